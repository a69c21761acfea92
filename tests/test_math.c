/* test_math.c — exp2, log2 and sin of vector kernels (polynomials in render/c_math.c) against libm, over the
 * whole float range: specials (0, -0, inf, nan, denormals, the largest float), the edges of each function,
 * and random bit patterns. */
#include <float.h>
#include <stdlib.h>

#include "test.h"

static int64_t ulp_key(float f) {
  int32_t i;
  memcpy(&i, &f, 4);
  return i < 0 ? (int64_t)INT32_MIN - i : i;
}

/* ulps between a and b; 0 for two nans, a lot for one nan */
static int64_t ulps(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
  int64_t d = ulp_key(a) - ulp_key(b);
  return d < 0 ? -d : d;
}

#define NMATH 8192

static float *math_inputs(int64_t *n) {
  float *x = malloc(NMATH * sizeof *x);
  if (!x) return NULL;
  const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                      1e-40f, -1e-40f, 1.4e-45f, -1.4e-45f, 1.0f, -1.0f, 0.5f, 2.0f, 127.99f, 128.0f, 128.5f,
                      -126.0f, -126.5f, -149.0f, -149.5f, -150.0f, -151.0f, 3.14159265f, -3.14159265f, 1.5707964f,
                      6.2831855f, 1e4f, 524287.9f, 524288.0f, 1e6f, 1e30f, -1e30f, 0.99999994f, 1.0000001f, 1e-30f};
  int64_t k = 0;
  for (size_t i = 0; i < sizeof sp / sizeof *sp; i++) x[k++] = sp[i];
  uint64_t s = 0x243F6A8885A308D3ULL;
  while (k < NMATH) {
    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
    uint32_t bits = (uint32_t)(s >> 32);
    float f;
    if (k % 3 == 0) {
      memcpy(&f, &bits, 4);               /* any float */
    } else if (k % 3 == 1) {
      f = ((float)(bits >> 8) / 16777216.0f - 0.5f) * 400.0f;   /* exp2's range and sin's first periods */
    } else {
      f = ((float)(bits >> 8) / 16777216.0f) * 64.0f;           /* log2 near 0 .. 64 */
    }
    x[k++] = f;
  }
  *n = k;
  return x;
}

typedef tg_tensor *(*unary_fn)(tg_tensor *);

static void check_math(const char *name, unary_fn fn, float (*ref)(float), int64_t max_ulp) {
  int64_t n;
  float *x = math_inputs(&n), *got = malloc(NMATH * sizeof *got);
  if (!x || !got) { free(x); free(got); test_fail(__FILE__, __LINE__, "out of memory"); return; }
  tg_scope_begin();
  tg_tensor *t = tg_from_data(TG_FLOAT32, 1, &n, x, (size_t)n * sizeof *x), *y = fn(t);
  if (!y || tg_to_host(y, got, (size_t)n * sizeof *got) != TG_OK) {
    test_fail(__FILE__, __LINE__, "%s: %s", name, tg_error());
  } else {
    int bad = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
      float want = ref(x[i]);
      int64_t d = ulps(got[i], want);
      if (d > worst) worst = d;
      if (d > max_ulp && bad++ < 5)
        test_fail(__FILE__, __LINE__, "%s(%.9g) = %.9g, libm %.9g (%lld ulp)", name, x[i], got[i], want, (long long)d);
    }
    if (getenv("DEBUG") && atoi(getenv("DEBUG")) >= 1) fprintf(stderr, "  %s: worst %lld ulp over %lld inputs\n", name, (long long)worst, (long long)n);
  }
  tg_scope_end();
  free(x);
  free(got);
}

static float ref_exp2(float x) { return exp2f(x); }
static float ref_log2(float x) { return log2f(x); }
static float ref_sin(float x) { return sinf(x); }

TEST(test_math_exp2_within_1_ulp_of_libm_over_the_float_range) { check_math("exp2", tg_exp2, ref_exp2, 1); }
TEST(test_math_log2_within_1_ulp_of_libm_over_the_float_range) { check_math("log2", tg_log2, ref_log2, 1); }
TEST(test_math_sin_within_1_ulp_of_libm_over_the_float_range) { check_math("sin", tg_sin, ref_sin, 1); }
