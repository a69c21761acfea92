/* test_special_grads.c — gradients at the special values of tinygrad's test_ops.py (its vals= cases with a
 * backward): sqrt/rsqrt at 0, x**-1 at 0, log/log2/log10/exp/exp2 at +-inf and NaN, sin/cos/tan at NaN, inf
 * and 0, sign and round (zero gradients), logaddexp far apart, logcumsumexp of (0, 100), gather of -inf,
 * lerp, and copysign over the grid {-1, -0, 0, 1, inf, -inf, NaN}^2 (finite a, as test_copysign_exact). The
 * expected values are PyTorch's (2.x, CPU, float32), which tinygrad's tests compare against; NaN equals NaN,
 * an infinity its own sign. Tolerance atol 1e-6 / rtol 1e-5. */
#include "test.h"

#define INF INFINITY

static bool same(double got, double want) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= 1e-6 + 1e-5 * fabs(want);
}

static tg_tensor *vec(int n, const float *v) { return tg_from_data(TG_FLOAT32, 1, (int64_t[]){n}, v, (size_t)n * 4); }

typedef tg_tensor *(*un_fn)(tg_tensor *x);
typedef tg_tensor *(*bin_fn)(tg_tensor *a, tg_tensor *b);

/* d sum(f(inputs)) / d input k against want (the inputs' values in order, concatenated) */
static void grads_case(const char *what, int nin, tg_tensor **in, tg_tensor *y, const float *want, const char *file, int line) {
  tg_tensor *g[2] = {0};
  if (!y || tg_gradient(tg_sum(y, 0, NULL, false), nin, in, g) != TG_OK) {
    test_fail(file, line, "%s: gradient: %s", what, tg_error());
    return;
  }
  int at = 0;
  for (int k = 0; k < nin; k++) {
    float got[16];
    int n = (int)tg_numel(g[k]);
    if (n > 16 || tg_to_host(g[k], got, (size_t)n * 4) != TG_OK) {
      test_fail(file, line, "%s: reading gradient %d: %s", what, k, tg_error());
      return;
    }
    for (int i = 0; i < n; i++, at++)
      if (!same(got[i], want[at])) test_fail(file, line, "d%s/d input %d [%d] = %.9g, want %.9g", what, k, i, got[i], want[at]);
  }
}

#define UN(what, f, x, want)                                          \
  do {                                                                \
    tg_scope_begin();                                                 \
    const float xs_[] = x;                                            \
    tg_tensor *t_ = vec((int)(sizeof xs_ / 4), xs_);                  \
    grads_case(what, 1, &t_, f(t_), (const float[])want, __FILE__, __LINE__); \
    tg_scope_end();                                                   \
  } while (0)
#define L(...) {__VA_ARGS__}

static tg_tensor *f_sqrt(tg_tensor *x) { return tg_sqrt(x); }
static tg_tensor *f_rsqrt(tg_tensor *x) { return tg_rsqrt(x); }
static tg_tensor *f_recip_pow(tg_tensor *x) { return tg_pow_scalar(x, -1.0); }
static tg_tensor *f_log(tg_tensor *x) { return tg_log(x); }
static tg_tensor *f_log2(tg_tensor *x) { return tg_log2(x); }
static tg_tensor *f_log10(tg_tensor *x) { return tg_log10(x); }
static tg_tensor *f_exp(tg_tensor *x) { return tg_exp(x); }
static tg_tensor *f_exp2(tg_tensor *x) { return tg_exp2(x); }
static tg_tensor *f_sin(tg_tensor *x) { return tg_sin(x); }
static tg_tensor *f_cos(tg_tensor *x) { return tg_cos(x); }
static tg_tensor *f_tan(tg_tensor *x) { return tg_tan(x); }
static tg_tensor *f_sign(tg_tensor *x) { return tg_sign(x); }
static tg_tensor *f_round_mix(tg_tensor *x) { return tg_add(x, tg_mul_scalar(tg_sub(tg_round(x), x), 0.125)); }
static tg_tensor *f_lcse(tg_tensor *x) { return tg_logcumsumexp(x, 0); }
static tg_tensor *f_gather(tg_tensor *x) {
  int32_t id[5] = {2, 1, 0, 1, 2};
  return tg_gather(x, 0, tg_from_data(TG_INT32, 1, (int64_t[]){5}, id, sizeof id));
}

TEST(test_special_grads_unary_at_special_values) {
  UN("sqrt(0)", f_sqrt, L(0), L(INF));
  UN("rsqrt(0)", f_rsqrt, L(0), L(-INF));
  UN("x**-1", f_recip_pow, L(-1, 0, 1), L(-1, -INF, -1));
  UN("log", f_log, L(INF, -INF, NAN), L(0, -0.0f, NAN));
  UN("log2", f_log2, L(INF, -INF, NAN), L(0, -0.0f, NAN));
  UN("log10", f_log10, L(INF, -INF, NAN), L(0, -0.0f, NAN));
  UN("exp", f_exp, L(INF, -INF, NAN), L(INF, 0, NAN));
  UN("exp2", f_exp2, L(INF, -INF, NAN), L(INF, 0, NAN));
  UN("sin", f_sin, L(NAN, INF, -INF, 0), L(NAN, NAN, NAN, 1));
  UN("cos", f_cos, L(NAN, INF, -INF, 0), L(NAN, NAN, NAN, 0));
  UN("tan", f_tan, L(NAN, INF, -INF, 0), L(NAN, NAN, NAN, 1));
  UN("sign", f_sign, L(-1, 0, 1), L(0, 0, 0));
  UN("x + (round(x) - x) / 8", f_round_mix, L(-1.2f, -0.7f, -0.2f, 0.2f, 0.7f, 1.2f),
     L(0.875f, 0.875f, 0.875f, 0.875f, 0.875f, 0.875f));
  UN("logcumsumexp", f_lcse, L(0, 100), L(1, 1));
  UN("gather of -inf", f_gather, L(-INF, 2, 3), L(1, 2, 2));
}

static void bin(const char *what, bin_fn f, int na, const float *a, int nb, const float *b, const float *want,
                const char *file, int line) {
  tg_scope_begin();
  tg_tensor *in[2] = {vec(na, a), vec(nb, b)};
  grads_case(what, 2, in, f(in[0], in[1]), want, file, line);
  tg_scope_end();
}
#define BIN(what, f, a, b, want)                                                                    \
  do {                                                                                              \
    const float a_[] = a, b_[] = b;                                                                 \
    bin(what, f, (int)(sizeof a_ / 4), a_, (int)(sizeof b_ / 4), b_, (const float[])want, __FILE__, __LINE__); \
  } while (0)

static tg_tensor *f_logaddexp(tg_tensor *a, tg_tensor *b) { return tg_logaddexp(a, b); }
static tg_tensor *f_lerp_half(tg_tensor *a, tg_tensor *b) { return tg_lerp(a, b, tg_scalar(TG_FLOAT32, 0.5)); }
static tg_tensor *f_copysign(tg_tensor *a, tg_tensor *b) { return tg_copysign(a, b); }

TEST(test_special_grads_binary_at_special_values) {
  BIN("logaddexp broadcast", f_logaddexp, L(-1), L(-1, 2, 3), L(0.565412f, 0.5f, 0.952574f, 0.982014f));
  BIN("logaddexp far below", f_logaddexp, L(-100, -200, -300), L(-1, 2, 3), L(0, 0, 0, 1, 1, 1));
  BIN("logaddexp far above", f_logaddexp, L(1, 2000, 30000), L(-1, 2, 3), L(0.880797f, 1, 1, 0.119203f, 0, 0));
  BIN("lerp", f_lerp_half, L(1, 2, 3), L(4, 5, 6), L(0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f));
  /* copysign: d/da is the product of the signs (0 at a = +-0; a NaN b counts positive), d/db is 0 */
  const float v[] = {-1, -0.0f, 0, 1, INF, -INF, NAN};
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 7; j++) {
      float sa = v[i] == 0 ? 0 : v[i] < 0 ? -1 : 1, sb = signbit(v[j]) && !isnan(v[j]) ? -1 : 1;
      char w[64];
      snprintf(w, sizeof w, "copysign(%g, %g)", v[i], v[j]);
      bin(w, f_copysign, 1, &v[i], 1, &v[j], (const float[]){sa * sb, 0}, __FILE__, __LINE__);
    }
}
