/* test_edges.c — tinygrad's semantics where finite differences say nothing: gradients at ties and kinks,
 * pow at special values, saturated activations, NaN and inf through clamp/maximum/minimum, prod's gradient at
 * zeros, var/std past their count, and convolution with a negative (cropping) padding. NaN inside a max/min
 * reduction is not tested: tgc's result depends on where the NaN lies (tinygrad skips it, PyTorch gives NaN).
 *
 * The expected values are tinygrad's (0.14 and master, run on its CPU device) unless a comment says
 * otherwise; tinygrad agrees with PyTorch on every one of them except where a comment says so. Each is exact
 * up to float32 rounding: compared with atol 1e-6 / rtol 1e-5, NaN equal to NaN, inf to inf of its sign. */
#include <stdlib.h>

#include "test.h"

#define INF INFINITY

/* got matches want: both NaN, the same infinity, or close */
static bool same(double got, double want) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= 1e-6 + 1e-5 * fabs(want);
}

static tg_tensor *vec(int n, const float *v) {
  int64_t s = n;
  return tg_from_data(TG_FLOAT32, 1, &s, v, (size_t)n * sizeof(float));
}

/* reads t (n float32 elements) into out; false with a failure reported */
static bool read_f32(const char *what, tg_tensor *t, int n, float *out, const char *file, int line) {
  if (!t || tg_numel(t) != n || tg_to_host(t, out, (size_t)n * sizeof(float)) != TG_OK) {
    test_fail(file, line, "%s: no result of %d elements: %s", what, n, tg_error());
    return false;
  }
  return true;
}

static void check_vals(const char *what, const float *got, const float *want, int n, const char *file, int line) {
  int bad = 0;
  for (int i = 0; i < n && bad < 4; i++)
    if (!same(got[i], want[i])) {
      test_fail(file, line, "%s[%d] = %.9g, want %.9g", what, i, got[i], want[i]);
      bad++;
    }
}

typedef tg_tensor *(*un_fn)(tg_tensor *x);
typedef tg_tensor *(*bin_fn)(tg_tensor *a, tg_tensor *b);

/* y = f(x) and d(sum y)/dx against want_y and want_g (want_g NULL: the forward only) */
static void un_case(const char *what, un_fn f, int n, const float *x, const float *want_y, const float *want_g,
                    const char *file, int line) {
  tg_scope_begin();  /* the gradient is built before y is read: a realized y no longer leads back to x */
  tg_tensor *tx = vec(n, x), *y = f(tx), *g = NULL;
  float got[64];
  bool gok = !want_g || (y && tg_gradient(tg_sum(y, 0, NULL, false), 1, &tx, &g) == TG_OK);
  if (!gok) test_fail(file, line, "%s: gradient: %s", what, tg_error());
  if (read_f32(what, y, n, got, file, line)) check_vals(what, got, want_y, n, file, line);
  if (want_g && gok && read_f32(what, g, n, got, file, line)) {
    char w[128];
    snprintf(w, sizeof w, "d %s", what);
    check_vals(w, got, want_g, n, file, line);
  }
  tg_scope_end();
}
#define UN(what, f, x, y, g) un_case(what, f, (int)(sizeof(x) / sizeof *(x)), x, y, g, __FILE__, __LINE__)

static void bin_case(const char *what, bin_fn f, int n, const float *a, const float *b, const float *want_y,
                     const float *want_ga, const float *want_gb, const char *file, int line) {
  tg_scope_begin();
  tg_tensor *ta = vec(n, a), *tb = vec(n, b), *y = f(ta, tb), *g[2] = {NULL, NULL};
  float got[64];
  bool gok = y && tg_gradient(tg_sum(y, 0, NULL, false), 2, (tg_tensor *[]){ta, tb}, g) == TG_OK;
  if (read_f32(what, y, n, got, file, line)) check_vals(what, got, want_y, n, file, line);
  if (!gok) test_fail(file, line, "%s: gradient: %s", what, tg_error());
  else {
    char w[128];
    snprintf(w, sizeof w, "d/da %s", what);
    if (read_f32(w, g[0], n, got, file, line)) check_vals(w, got, want_ga, n, file, line);
    snprintf(w, sizeof w, "d/db %s", what);
    if (read_f32(w, g[1], n, got, file, line)) check_vals(w, got, want_gb, n, file, line);
  }
  tg_scope_end();
}
#define BIN(what, f, a, b, y, ga, gb) bin_case(what, f, (int)(sizeof(a) / sizeof *(a)), a, b, y, ga, gb, __FILE__, __LINE__)

/* ---- ties and kinks ------------------------------------------------------------------------------------ */

static tg_tensor *f_relu(tg_tensor *x) { return tg_relu(x); }
static tg_tensor *f_abs(tg_tensor *x) { return tg_abs(x); }
static tg_tensor *f_relu6(tg_tensor *x) { return tg_relu6(x); }
static tg_tensor *f_hardsigmoid(tg_tensor *x) { return tg_hardsigmoid(x); }
static tg_tensor *f_hardswish(tg_tensor *x) { return tg_hardswish(x); }
static tg_tensor *f_leaky(tg_tensor *x) { return tg_leaky_relu(x, 0.1); }
static tg_tensor *f_clamp11(tg_tensor *x) { return tg_clamp(x, -1, 1); }
static tg_tensor *f_clamp30(tg_tensor *x) { return tg_clamp(x, 3, 0); }
static tg_tensor *f_clamp_hi(tg_tensor *x) { return tg_clamp(x, NAN, 0.5); }
static tg_tensor *f_clamp_lo(tg_tensor *x) { return tg_clamp(x, 0.5, NAN); }
static tg_tensor *f_clamp_inf(tg_tensor *x) { return tg_clamp(x, -INF, INF); }
static tg_tensor *f_max(tg_tensor *a, tg_tensor *b) { return tg_maximum(a, b); }
static tg_tensor *f_min(tg_tensor *a, tg_tensor *b) { return tg_minimum(a, b); }

TEST(test_edges_relu_abs_at_zero) {
  float x[] = {-1, 0, 1, NAN, -INF, INF};
  UN("relu", f_relu, x, ((float[]){0, 0, 1, 0, 0, INF}), ((float[]){0, 0, 1, 0, 0, 1}));
  float xa[] = {-1, -0.0f, 0, 1, INF, -INF, NAN};
  UN("abs", f_abs, xa, ((float[]){1, 0, 0, 1, INF, INF, NAN}), ((float[]){-1, 0, 0, 1, 1, -1, 1}));
}

TEST(test_edges_relu6_hardsigmoid_leaky_at_kinks) {
  float x[] = {-1, 0, 3, 6, 7, NAN, 1e8f};  /* relu6(1e8) is 6 exactly (tinygrad's relu(x) - relu(x - 6) gives 8) */
  UN("relu6", f_relu6, x, ((float[]){0, 0, 3, 6, 6, 0, 6}), ((float[]){0, 0, 1, 1, 0, 0, 0}));
  float h[] = {-3, 0, 3, NAN};
  UN("hardsigmoid", f_hardsigmoid, h, ((float[]){0, 0.5f, 1, 0}), ((float[]){0, 1 / 6.f, 1 / 6.f, 0}));
  float hs[] = {-3, 0, 3};
  UN("hardswish", f_hardswish, hs, ((float[]){0, 0, 3}), ((float[]){0, 0.5f, 1.5f}));
  float l[] = {-1, 0, 1, NAN};
  UN("leaky_relu", f_leaky, l, ((float[]){-0.1f, 0, 1, NAN}), ((float[]){0.1f, 1, 1, 1}));
}

TEST(test_edges_clamp_bounds_nan_and_order) {
  float x[] = {-2, -1, 0, 1, 2, NAN};
  UN("clamp(-1, 1)", f_clamp11, x, ((float[]){-1, -1, 0, 1, 1, NAN}), ((float[]){0, 1, 1, 1, 0, 1}));
  float y[] = {-2, 0, 1, 3, 4, NAN};  /* min above max: max everywhere, NaN stays */
  UN("clamp(3, 0)", f_clamp30, y, ((float[]){0, 0, 0, 0, 0, NAN}), ((float[]){0, 0, 0, 0, 0, 1}));
  float z[] = {-2, 0.5f, 2, NAN};
  UN("clamp(max 0.5)", f_clamp_hi, z, ((float[]){-2, 0.5f, 0.5f, NAN}), ((float[]){1, 1, 0, 1}));
  UN("clamp(min 0.5)", f_clamp_lo, z, ((float[]){0.5f, 0.5f, 2, NAN}), ((float[]){0, 1, 1, 1}));
  float w[] = {-INF, -1, INF};
  UN("clamp(-inf, inf)", f_clamp_inf, w, ((float[]){-INF, -1, INF}), ((float[]){1, 1, 1}));
  tg_scope_begin();
  tg_tensor *t = vec(4, z);
  CHECK(!tg_clamp(t, NAN, NAN) && strstr(tg_error(), "tg_clamp"), "clamp with no bound: %s", tg_error());
  /* an int tensor: bounds past its range clamp to it, no undefined conversion of inf */
  int32_t iv[] = {-5, 0, 7, INT32_MIN, INT32_MAX}, got[5], want[] = {-5, 0, 5, INT32_MIN, 5};
  tg_tensor *ti = tg_from_data(TG_INT32, 1, (int64_t[]){5}, iv, sizeof iv);
  tg_tensor *c = tg_clamp(ti, -INF, 5);
  CHECK(c && tg_dtype_of(c) == TG_INT32 && tg_to_host(c, got, sizeof got) == TG_OK && !memcmp(got, want, sizeof got),
        "int clamp: %s", tg_error());
  tg_scope_end();
}

TEST(test_edges_maximum_minimum_ties_and_nan) {
  float a[] = {1, 2, 3, NAN, 1}, b[] = {1, 1, 4, 1, NAN};
  /* tinygrad's maximum is (a < b).where(b, a): NaN in a wins, NaN in b loses (PyTorch: NaN both) */
  BIN("maximum", f_max, a, b, ((float[]){1, 2, 4, NAN, 1}), ((float[]){0.5f, 1, 0, 0, 0}), ((float[]){0.5f, 0, 1, 0, 0}));
  BIN("minimum", f_min, a, b, ((float[]){1, 1, 3, NAN, 1}), ((float[]){0.5f, 0, 1, 0, 0}), ((float[]){0.5f, 1, 0, 0, 0}));
}

/* ---- reductions ---------------------------------------------------------------------------------------- */

static tg_tensor *f_maxr(tg_tensor *x) { return tg_max(x, 0, NULL, false); }
static tg_tensor *f_minr(tg_tensor *x) { return tg_min(x, 0, NULL, false); }
static tg_tensor *f_prod(tg_tensor *x) { return tg_prod(x, 0, NULL, false); }

/* one-element results: reduce x, compare the value and the gradient */
static void red_case(const char *what, un_fn f, int n, const float *x, float want_y, const float *want_g,
                     const char *file, int line) {
  tg_scope_begin();
  tg_tensor *tx = vec(n, x), *y = f(tx), *g = NULL;
  float got[64], gy;
  bool gok = y && tg_gradient(tg_sum(y, 0, NULL, false), 1, &tx, &g) == TG_OK;
  if (read_f32(what, y, 1, &gy, file, line) && !same(gy, want_y)) test_fail(file, line, "%s = %.9g, want %.9g", what, gy, want_y);
  if (!gok) test_fail(file, line, "%s: gradient: %s", what, tg_error());
  else if (read_f32(what, g, n, got, file, line)) check_vals(what, got, want_g, n, file, line);
  tg_scope_end();
}
#define RED(what, f, x, y, g) red_case(what, f, (int)(sizeof(x) / sizeof *(x)), x, y, g, __FILE__, __LINE__)

TEST(test_edges_max_min_reduce_ties) {
  float t[] = {1, 3, 3, 2}, u[] = {1, 1, 3, 2};
  RED("max ties", f_maxr, t, 3, ((float[]){0, 0.5f, 0.5f, 0}));
  RED("min ties", f_minr, u, 1, ((float[]){0.5f, 0.5f, 0, 0}));
  /* ties along an axis: rows (2, 2, 1) and (0, 5, 5) */
  tg_scope_begin();
  float x[] = {2, 2, 1, 0, 5, 5}, g[6];
  tg_tensor *tx = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, x, sizeof x), *gr = NULL;
  CHECK(tg_gradient(tg_sum(tg_max(tx, 1, (int[]){-1}, false), 0, NULL, false), 1, &tx, &gr) == TG_OK &&
            tg_to_host(gr, g, sizeof g) == TG_OK, "max axis gradient: %s", tg_error());
  check_vals("d max(axis -1)", g, (float[]){0.5f, 0.5f, 0, 0, 0.5f, 0.5f}, 6, __FILE__, __LINE__);
  tg_scope_end();
}

TEST(test_edges_prod_gradient_at_zeros) {
  float a[] = {1, 0, 3, 2}, b[] = {1, 0, 3, 0}, c[] = {2, 3, 4};
  RED("prod one zero", f_prod, a, 0, ((float[]){0, 6, 0, 0}));
  RED("prod two zeros", f_prod, b, 0, ((float[]){0, 0, 0, 0}));
  RED("prod no zero", f_prod, c, 24, ((float[]){12, 8, 6}));
  /* along an axis: rows (0, 2, 3), (0, 0, 5), (1, 2, 3) */
  tg_scope_begin();
  float x[] = {0, 2, 3, 0, 0, 5, 1, 2, 3}, g[9];
  float want[] = {6, 0, 0, 0, 0, 0, 6, 3, 2};
  tg_tensor *tx = tg_from_data(TG_FLOAT32, 2, (int64_t[]){3, 3}, x, sizeof x), *gr = NULL;
  tg_tensor *p = tg_prod(tx, 1, (int[]){-1}, false);
  CHECK(tg_gradient(tg_sum(p, 0, NULL, false), 1, &tx, &gr) == TG_OK && tg_to_host(gr, g, sizeof g) == TG_OK,
        "prod axis gradient: %s", tg_error());
  check_vals("d prod(axis -1)", g, want, 9, __FILE__, __LINE__);
  tg_scope_end();
}

static tg_tensor *f_var5(tg_tensor *x) { return tg_var(x, 0, NULL, false, 5); }
static tg_tensor *f_var4(tg_tensor *x) { return tg_var(x, 0, NULL, false, 4); }
static tg_tensor *f_std5(tg_tensor *x) { return tg_std(x, 0, NULL, false, 5); }
static tg_tensor *f_var1(tg_tensor *x) { return tg_var(x, 0, NULL, false, 1); }

TEST(test_edges_var_std_correction_past_count) {
  float x[] = {1, 0, 3, 2}, one[] = {2};
  float nan4[] = {NAN, NAN, NAN, NAN};
  RED("var correction 5 of 4", f_var5, x, INF, nan4);
  RED("var correction 4 of 4", f_var4, x, INF, nan4);
  RED("std correction 5 of 4", f_std5, x, INF, nan4);
  RED("var of one element", f_var1, one, NAN, ((float[]){NAN}));  /* 0 / 0 */
}

/* ---- pow ---------------------------------------------------------------------------------------------- */

static double pow_c;
static tg_tensor *f_pow_c(tg_tensor *x) { return tg_pow_scalar(x, pow_c); }
static tg_tensor *f_c_pow(tg_tensor *x) {
  tg_tensor *c = tg_full(TG_FLOAT32, 0, NULL, pow_c);
  tg_tensor *r = tg_pow(c, x);
  tg_free(c);
  return r;
}
static tg_tensor *f_pow(tg_tensor *a, tg_tensor *b) { return tg_pow(a, b); }

TEST(test_edges_pow_const_exponent) {
  /* x ** c at x = -inf, -2, 0, 0.5, 2, inf, NaN: (value, gradient) from tinygrad */
  float x[] = {-INF, -2, 0, 0.5f, 2, INF, NAN};
  static const struct { double c; float y[7], g[7]; } t[] = {
      {-2, {0, 0.25f, INF, 4, 0.25f, 0, NAN}, {0, 0.25f, -INF, -16, -0.25f, 0, NAN}},
      {-1, {-0.0f, -0.5f, INF, 2, 0.5f, 0, NAN}, {-0.0f, -0.25f, -INF, -4, -0.25f, -0.0f, NAN}},
      {-0.7, {0, NAN, INF, 1.6245048f, 0.61557221f, 0, NAN}, {0, NAN, -INF, -2.2743068f, -0.21545026f, 0, NAN}},
      {0, {1, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0}},
      {0.3, {INF, NAN, 0, 0.8122524f, 1.2311444f, INF, NAN}, {0, NAN, INF, 0.48735145f, 0.18467167f, 0, NAN}},
      {1, {-INF, -2, 0, 0.5f, 2, INF, NAN}, {1, 1, 1, 1, 1, 1, 1}},
      {1.1, {INF, NAN, 0, 0.46651649f, 2.1435471f, INF, NAN}, {INF, NAN, 0, 1.0263363f, 1.1789508f, INF, NAN}},
      {2, {INF, 4, 0, 0.25f, 4, INF, NAN}, {-INF, -4, 0, 1, 4, INF, NAN}},
      {3, {-INF, -8, 0, 0.125f, 8, INF, NAN}, {INF, 12, 0, 0.75f, 12, INF, NAN}},
      {3.3, {INF, NAN, 0, 0.10153155f, 9.8491545f, INF, NAN}, {INF, NAN, 0, 0.67010820f, 16.251104f, INF, NAN}},
      {-5.5, {0, NAN, INF, 45.254833f, 0.022097087f, 0, NAN}, {0, NAN, -INF, -497.80316f, -0.060766988f, 0, NAN}},
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    char w[64];
    snprintf(w, sizeof w, "x ** %g", t[i].c);
    pow_c = t[i].c;
    UN(w, f_pow_c, x, t[i].y, t[i].g);
  }
}

TEST(test_edges_pow_const_base) {
  /* c ** x: the gradient at x = 0 is ln c; 0 ** x is -inf (x < 0) or 0; a negative base's is NaN */
  float x[] = {-2, -1, 0, 0.5f, 1, 2};
  static const struct { double c; float y[6], g[6]; } t[] = {
      {0, {INF, INF, 1, 0, 0, 0}, {-INF, -INF, 0, 0, 0, 0}},
      {0.7, {2.0408163f, 1.4285713f, 1, 0.83666003f, 0.7f, 0.49f}, {-0.72790802f, -0.50953561f, -0.35667494f, -0.29841566f, -0.24967246f, -0.17477073f}},
      {2, {0.25f, 0.5f, 1, 1.4142135f, 2, 4}, {0.17328680f, 0.34657359f, 0.69314718f, 0.98025811f, 1.3862944f, 2.7725887f}},
      {-2, {0.25f, -0.5f, 1, NAN, -2, 4}, {NAN, NAN, NAN, NAN, NAN, NAN}},
      {1, {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0}},
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    char w[64];
    snprintf(w, sizeof w, "%g ** x", t[i].c);
    pow_c = t[i].c;
    UN(w, f_c_pow, x, t[i].y, t[i].g);
  }
}

TEST(test_edges_pow_tensor_special_values) {
  /* (a, b) pairs with a^b, d/da and d/db from tinygrad's tensor ** tensor */
  float a[] = {-INF, -INF, -INF, -INF, -INF, -2, -2, 0, 0, 0, 0, 0, 1, 2, 2, INF, INF, INF, -1, -INF};
  float b[] = {-INF, -2, 0, 0.5f, 1, -0.5f, 2, -INF, -0.5f, 0, 0.5f, INF, -2, -INF, 0, -INF, 0, 0.5f, -INF, 3.3f};
  float y[] = {0, 0, 1, INF, -INF, NAN, 4, INF, INF, 1, 0, 0, 1, 0, 1, 0, 1, INF, NAN, INF};
  float ga[] = {NAN, 0, 0, 0, 1, NAN, -4, -INF, -INF, 0, INF, NAN, -2, NAN, 0, NAN, 0, 0, NAN, INF};
  float gb[] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, -INF, -INF, 0, 0, 0, 0, 0, 0.69314718f, NAN, INF, INF, NAN, NAN};
  BIN("a ** b", f_pow, a, b, y, ga, gb);
}

/* ---- saturated activations ----------------------------------------------------------------------------- */

static tg_tensor *f_sigmoid(tg_tensor *x) { return tg_sigmoid(x); }
static tg_tensor *f_tanh(tg_tensor *x) { return tg_tanh(x); }
static tg_tensor *f_gelu(tg_tensor *x) { return tg_gelu(x); }
static tg_tensor *f_silu(tg_tensor *x) { return tg_silu(x); }
static tg_tensor *f_softplus(tg_tensor *x) { return tg_softplus(x); }
static tg_tensor *f_mish(tg_tensor *x) { return tg_mish(x); }
static tg_tensor *f_elu(tg_tensor *x) { return tg_elu(x, 1); }

TEST(test_edges_saturated_activations) {
  float x[] = {-INF, -1e4f, -200, -100, 0, 100, 200, 1e4f, INF};
  UN("sigmoid", f_sigmoid, x, ((float[]){0, 0, 0, 0, 0.5f, 1, 1, 1, 1}), ((float[]){0, 0, 0, 0, 0.25f, 0, 0, 0, 0}));
  UN("tanh", f_tanh, x, ((float[]){-1, -1, -1, -1, 0, 1, 1, 1, 1}), ((float[]){0, 0, 0, 0, 1, 0, 0, 0, 0}));
  /* -inf and inf: tinygrad's NaNs (0 * inf inside x * ...) are left out, except softplus(inf) = inf with
   * gradient 1 as PyTorch (tinygrad: NaN) */
  float y[] = {-1e4f, -200, -100, 0, 100, 200, 1e4f};
  UN("gelu", f_gelu, y, ((float[]){0, 0, 0, 0, 100, 200, 1e4f}), ((float[]){0, 0, 0, 0.5f, 1, 1, 1}));
  UN("silu", f_silu, y, ((float[]){0, 0, 0, 0, 100, 200, 1e4f}), ((float[]){0, 0, 0, 0.5f, 1, 1, 1}));
  UN("mish", f_mish, y, ((float[]){0, 0, 0, 0, 100, 200, 1e4f}), ((float[]){0, 0, 0, 0.6f, 1, 1, 1}));
  UN("softplus", f_softplus, x, ((float[]){0, 0, 0, 0, 0.69314718f, 100, 200, 1e4f, INF}),
     ((float[]){0, 0, 0, 0, 0.5f, 1, 1, 1, 1}));
  /* elu: the large inputs' unused e^x branch no longer overflows into 0 * inf (tinygrad: NaN past ~88). At 0
   * the gradient is alpha as PyTorch's (tinygrad's relu-based form gives 0) */
  UN("elu", f_elu, y, ((float[]){-1, -1, -1, 0, 100, 200, 1e4f}), ((float[]){0, 0, 0, 1, 1, 1, 1}));
}

/* ---- gradients that are zero, not missing -------------------------------------------------------------- */

TEST(test_edges_zero_gradients_of_rounding_and_where) {
  un_fn fs[] = {tg_floor, tg_ceil, tg_trunc, tg_sign};
  const char *names[] = {"floor", "ceil", "trunc", "sign"};
  for (int i = 0; i < 4; i++) {
    tg_scope_begin();
    float x[] = {-1.5f, 0, 2.5f}, g[3] = {1, 1, 1};
    tg_tensor *tx = tg_set_requires_grad(vec(3, x), true);
    tg_tensor *loss = tg_sum(tg_mul(fs[i](tx), tx), 0, NULL, false);  /* d/dx (f(x) x) = f(x) + 0 */
    tg_tensor *l2 = tg_sum(fs[i](tx), 0, NULL, false);
    CHECK(tg_backward(l2) == TG_OK && tg_grad(tx), "%s: backward gives no gradient: %s", names[i], tg_error());
    if (tg_grad(tx) && tg_to_host(tg_grad(tx), g, sizeof g) == TG_OK)
      for (int k = 0; k < 3; k++) CHECK(g[k] == 0, "d %s[%d] = %g, want 0", names[i], k, g[k]);
    tg_zero_grad(tx);
    CHECK(tg_backward(loss) == TG_OK && tg_grad(tx) && tg_to_host(tg_grad(tx), g, sizeof g) == TG_OK, "%s: %s", names[i], tg_error());
    float want[3];
    tg_tensor *fx = fs[i](tx);
    CHECK(tg_to_host(fx, want, sizeof want) == TG_OK, "%s forward", names[i]);
    check_vals(names[i], g, want, 3, __FILE__, __LINE__);
    tg_scope_end();
  }
  /* where: the condition (a float cast to bool) gets a zero gradient, the branches theirs */
  tg_scope_begin();
  float c[] = {1, 0, 2}, a[] = {1, 2, 3}, b[] = {4, 5, 6}, g[3][3];
  tg_tensor *tc = vec(3, c), *ta = vec(3, a), *tb = vec(3, b), *gr[3] = {NULL, NULL, NULL};
  tg_tensor *loss = tg_sum(tg_where(tc, ta, tb), 0, NULL, false);
  CHECK(tg_gradient(loss, 3, (tg_tensor *[]){tc, ta, tb}, gr) == TG_OK, "where gradient: %s", tg_error());
  for (int k = 0; k < 3 && gr[k]; k++) CHECK(tg_to_host(gr[k], g[k], sizeof g[k]) == TG_OK, "read");
  check_vals("d where/d cond", g[0], (float[]){0, 0, 0}, 3, __FILE__, __LINE__);
  check_vals("d where/d a", g[1], (float[]){1, 0, 1}, 3, __FILE__, __LINE__);
  check_vals("d where/d b", g[2], (float[]){0, 1, 0}, 3, __FILE__, __LINE__);
  tg_scope_end();
}

TEST(test_edges_abs_of_ints_exact) {
  tg_scope_begin();
  int32_t v[] = {-3, 0, 5, INT32_MIN + 1, INT32_MAX}, got[5], want[] = {3, 0, 5, INT32_MAX, INT32_MAX};
  tg_tensor *a = tg_abs(tg_from_data(TG_INT32, 1, (int64_t[]){5}, v, sizeof v));
  CHECK(a && tg_dtype_of(a) == TG_INT32 && tg_to_host(a, got, sizeof got) == TG_OK && !memcmp(got, want, sizeof got),
        "abs int32: %s", tg_error());
  int8_t u[] = {-128, -1, 0, 127}, gu[4], wu[] = {-128, 1, 0, 127};  /* -(-128) wraps, as tinygrad's and PyTorch's */
  tg_tensor *b = tg_abs(tg_from_data(TG_INT8, 1, (int64_t[]){4}, u, sizeof u));
  CHECK(b && tg_to_host(b, gu, sizeof gu) == TG_OK && !memcmp(gu, wu, sizeof gu), "abs int8: %s", tg_error());
  tg_scope_end();
}

/* ---- convolution and pooling with a negative padding: a crop ------------------------------------------ */

TEST(test_edges_conv_negative_padding_crops) {
  tg_scope_begin();
  float xv[2 * 5 * 6], wv[2 * 2 * 2 * 3];
  for (int i = 0; i < 60; i++) xv[i] = (float)((i * 37) % 11) - 5;
  for (int i = 0; i < 24; i++) wv[i] = (float)((i * 13) % 7) - 3;
  tg_tensor *x = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 2, 5, 6}, xv, sizeof xv);
  tg_tensor *w = tg_from_data(TG_FLOAT32, 4, (int64_t[]){2, 2, 2, 3}, wv, sizeof wv);
  /* padding -1: the input cropped by one on every side; (1, -1, 0, -2): width (1, -1), height (0, -2) */
  struct { tg_ints opt; int64_t crop[8], pad[8]; } cs[] = {
      {TG_INTS(-1), {0, 1, 0, 2, 1, 4, 1, 5}, {0}},
      {TG_INTS(-1, 0), {0, 1, 0, 2, 1, 4, 0, 6}, {0}},
      {TG_INTS(1, -1, 0, -2), {0, 1, 0, 2, 0, 3, 0, 5}, {0, 0, 0, 0, 0, 0, 1, 0}},
  };
  for (int k = 0; k < 3; k++) {
    tg_tensor *y = tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = cs[k].opt});
    tg_tensor *ref = tg_conv2d(tg_pad_axes(tg_shrink(x, 4, cs[k].crop), 4, cs[k].pad, 0), w, NULL, (tg_conv_opts){0});
    CHECK_T(y);
    CHECK_T(ref);
    CHECK(tg_ndim(y) == 4 && tg_shape(y, 2) == tg_shape(ref, 2) && tg_shape(y, 3) == tg_shape(ref, 3), "case %d: shape", k);
    int64_t n = tg_numel(ref);
    float got[64], want[64];
    CHECK(n <= 64 && tg_numel(y) == n && tg_to_host(y, got, (size_t)n * 4) == TG_OK && tg_to_host(ref, want, (size_t)n * 4) == TG_OK,
          "case %d: read: %s", k, tg_error());
    check_vals("conv negative padding", got, want, (int)n, __FILE__, __LINE__);
    /* gradients of x and w match the cropped form's */
    tg_tensor *g1[2] = {NULL, NULL}, *g2[2] = {NULL, NULL};
    CHECK(tg_gradient(tg_sum(tg_mul(y, y), 0, NULL, false), 2, (tg_tensor *[]){x, w}, g1) == TG_OK &&
              tg_gradient(tg_sum(tg_mul(ref, ref), 0, NULL, false), 2, (tg_tensor *[]){x, w}, g2) == TG_OK,
          "case %d: gradients: %s", k, tg_error());
    float a[60], b[60];
    CHECK(g1[0] && g2[0] && tg_to_host(g1[0], a, sizeof a) == TG_OK && tg_to_host(g2[0], b, sizeof b) == TG_OK, "read dx");
    check_vals("d conv/dx negative padding", a, b, 60, __FILE__, __LINE__);
    CHECK(g1[1] && g2[1] && tg_to_host(g1[1], a, 24 * 4) == TG_OK && tg_to_host(g2[1], b, 24 * 4) == TG_OK, "read dw");
    check_vals("d conv/dw negative padding", a, b, 24, __FILE__, __LINE__);
  }
  /* pooling crops too, as tinygrad's (2, 1, 5, 6) max_pool2d(2, padding=-1) -> (2, 1, 1, 2) */
  tg_tensor *p = tg_max_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(2), .padding = TG_INTS(-1)});
  tg_tensor *pr = tg_max_pool2d(tg_shrink(x, 4, (int64_t[]){0, 1, 0, 2, 1, 4, 1, 5}), (tg_pool_opts){.kernel = TG_INTS(2)});
  CHECK_T(p);
  CHECK_T(pr);
  float got[16], want[16];
  CHECK(tg_numel(p) == 4 && tg_shape(p, 2) == 1 && tg_shape(p, 3) == 2 && tg_to_host(p, got, 16) == TG_OK &&
            tg_to_host(pr, want, 16) == TG_OK, "max_pool2d padding -1: %s", tg_error());
  check_vals("max_pool2d negative padding", got, want, 4, __FILE__, __LINE__);
  /* cropping more than the input is refused, with an error rather than a bad shape */
  CHECK(!tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(-3)}), "padding -3 of a 5x6 input");
  CHECK(!tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(INT64_MIN)}), "padding INT64_MIN");
  tg_scope_end();
}

/* ---- second derivatives through the CUSTOM_GRAD rules (pow, sigmoid, relu) ----------------------------- */

TEST(test_edges_second_derivatives_of_custom_rules) {
  tg_scope_begin();
  float xv[] = {-1.5f, 0.5f, 2}, g[3];
  tg_tensor *x = vec(3, xv), *d1 = NULL, *d2 = NULL;
  /* x ** tensor 3 (CG_POW, not the product x x x of tg_pow_scalar): 3x^2, then 6x, negative x too */
  tg_tensor *three = tg_full(TG_FLOAT32, 1, (int64_t[]){3}, 3);
  CHECK(tg_gradient(tg_sum(tg_pow(x, three), 0, NULL, false), 1, &x, &d1) == TG_OK &&
            tg_gradient(tg_sum(d1, 0, NULL, false), 1, &x, &d2) == TG_OK && tg_to_host(d2, g, sizeof g) == TG_OK,
        "pow: %s", tg_error());
  for (int i = 0; i < 3; i++) CHECK(fabs(g[i] - 6 * xv[i]) < 1e-4 * (1 + fabs(6 * xv[i])), "d2 x^3 [%d] = %g, want %g", i, g[i], 6 * xv[i]);
  /* sigmoid: s (1 - s) (1 - 2 s) */
  CHECK(tg_gradient(tg_sum(tg_sigmoid(x), 0, NULL, false), 1, &x, &d1) == TG_OK &&
            tg_gradient(tg_sum(d1, 0, NULL, false), 1, &x, &d2) == TG_OK && tg_to_host(d2, g, sizeof g) == TG_OK,
        "sigmoid: %s", tg_error());
  for (int i = 0; i < 3; i++) {
    double s = 1 / (1 + exp(-xv[i])), want = s * (1 - s) * (1 - 2 * s);
    CHECK(fabs(g[i] - want) < 1e-5, "d2 sigmoid[%d] = %g, want %g", i, g[i], want);
  }
  /* relu: 0 */
  CHECK(tg_gradient(tg_sum(tg_mul(tg_relu(x), x), 0, NULL, false), 1, &x, &d1) == TG_OK &&
            tg_gradient(tg_sum(d1, 0, NULL, false), 1, &x, &d2) == TG_OK && tg_to_host(d2, g, sizeof g) == TG_OK,
        "relu: %s", tg_error());
  for (int i = 0; i < 3; i++) CHECK(g[i] == (xv[i] > 0 ? 2 : 0), "d2 relu(x) x [%d] = %g", i, g[i]);
  tg_scope_end();
}
