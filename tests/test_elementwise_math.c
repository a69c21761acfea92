/* test_elementwise_math.c — the math, activation and float binary ops of tg.h's "more of tinygrad's methods"
 * section against libm in double (rounded to the result's dtype), over random values and the edges: 0, -0,
 * +-inf, NaN, domain edges (acos at +-1, atanh at +-1, acosh at 1), ties for round, half precision and
 * integer inputs, broadcasting, size 0. Gradients: central finite differences in float64 (loss sum(f * w)
 * with random w) and, where a closed form exists, that formula; saturated inputs give finite gradients. */
#include <float.h>
#include <stdlib.h>

#include "ref.h"
#include "test.h"


typedef double (*dfn)(double x, double p);

/* out[i] = f(a[i]) rounded to dt */
static ref_arr *map1(const ref_arr *a, tg_dtype dt, dfn f, double p) {
  ref_arr *o = ref_new(dt, a->ndim, a->shape);
  for (int64_t i = 0; i < a->numel; i++) o->data[i] = ref_round(dt, f(a->data[i], p));
  return o;
}

/* a and b broadcast to one shape */
static void bcast(ref_arr **a, ref_arr **b) {
  int nd;
  int64_t sh[TG_MAX_DIMS];
  if (!ref_broadcast_shape((*a)->ndim, (*a)->shape, (*b)->ndim, (*b)->shape, &nd, sh)) return;
  *a = ref_expand(ref_reshape(*a, (*a)->ndim, (*a)->shape), nd, sh);
  *b = ref_expand(*b, nd, sh);
}
static ref_arr *map2(ref_arr *a, ref_arr *b, tg_dtype dt, double (*f)(double, double)) {
  bcast(&a, &b);
  ref_arr *o = ref_new(dt, a->ndim, a->shape);
  for (int64_t i = 0; i < a->numel; i++) o->data[i] = ref_round(dt, f(a->data[i], b->data[i]));
  return o;
}

static ref_arr *vec(tg_dtype dt, int n, const double *v) { return ref_from(dt, 1, (int64_t[]){n}, v); }

/* n random values in [lo, hi) followed by the edges */
static ref_arr *with_edges(tg_dtype dt, int n, double lo, double hi, int ne, const double *edges) {
  ref_arr *a = ref_new(dt, 1, (int64_t[]){n + ne});
  for (int i = 0; i < n; i++) a->data[i] = ref_round(dt, ref_uniform(lo, hi));
  for (int i = 0; i < ne; i++) a->data[n + i] = ref_round(dt, edges[i]);
  return a;
}

static const double EDGES[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30,
                               300.0, -300.0, 1e30, -1e30, 1.5, 2.5, 3.5, 4.5, -4.499, 0.99999994, -0.99999994};
#define NEDGES (int)(sizeof EDGES / sizeof EDGES[0])

static double r_log10(double x, double p) { return log10(x); }
static double r_sinh(double x, double p) { return sinh(x); }
static double r_cosh(double x, double p) { return cosh(x); }
static double r_asin(double x, double p) { return asin(x); }
static double r_acos(double x, double p) { return acos(x); }
static double r_atan(double x, double p) { return atan(x); }
static double r_asinh(double x, double p) { return asinh(x); }
static double r_acosh(double x, double p) { return acosh(x); }
static double r_atanh(double x, double p) { return atanh(x); }
static double r_erf(double x, double p) { return erf(x); }
static double r_celu(double x, double a) { return x > 0 ? x : a * expm1(x / a); }
static double r_selu(double x, double p) { return 1.0507009873554805 * (x >= 0 ? x : 1.6732632423543772 * expm1(x)); }
static double r_softsign(double x, double p) { return x / (1 + fabs(x)); }
static double r_sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }
static double r_quick_gelu(double x, double p) { return x * r_sigmoid(1.702 * x); }
static double r_softplus(double x) { return isnan(x) ? x : fmax(x, 0) + log1p(exp(-fabs(x))); }
static double r_logsigmoid(double x, double p) { return -r_softplus(-x); }
static double r_gelu_erf(double x, double p) { return 0.5 * x * (1 + erf(x / sqrt(2))); }
static double r_softplus_beta(double x, double b) { return r_softplus(b * x) / b; }
static double r_round(double x, double p) { return nearbyint(x); }  /* the default rounding: ties to even */

typedef tg_tensor *(*uop_fn)(tg_tensor *t);
static double g_param;  /* the parameter of the op under test, for the wrappers below */
static tg_tensor *w_celu(tg_tensor *t) { return tg_celu(t, g_param); }
static tg_tensor *w_softplus_beta(tg_tensor *t) { return tg_softplus_beta(t, g_param); }
static tg_tensor *w_gelu_none(tg_tensor *t) { return tg_gelu_mode(t, TG_GELU_NONE); }

/* op over random values in [lo, hi) and the edges, as float32 (and float64, float16, int32 inputs) */
static void check_unary(const char *name, uop_fn op, dfn ref, double p, double lo, double hi, double atol, double rtol,
                        const char *file, int line) {
  char what[96];
  g_param = p;
  ref_arr *a = with_edges(TG_FLOAT32, 200, lo, hi, NEDGES, EDGES);
  snprintf(what, sizeof what, "%s float32", name);
  ref_check_tol(what, op(ref_to_tg(a)), map1(a, TG_FLOAT32, ref, p), true, atol, rtol, file, line);
  ref_arr *d = ref_cast(a, TG_FLOAT64);
  snprintf(what, sizeof what, "%s float64", name);
  ref_check_tol(what, op(ref_to_tg(d)), map1(d, TG_FLOAT64, ref, p), true, atol, rtol, file, line);
  ref_arr *h = ref_cast(ref_rand(TG_FLOAT32, SHAPE(3, 17), lo, hi), TG_FLOAT16);
  snprintf(what, sizeof what, "%s float16", name);
  ref_check_tol(what, op(ref_to_tg(h)), map1(h, TG_FLOAT16, ref, p), true, 1e-3, 4e-3, file, line);
  ref_arr *n = ref_rand(TG_INT32, SHAPE(2, 5), floor(fmax(lo, -20)), ceil(fmin(hi, 20)));
  snprintf(what, sizeof what, "%s int32 -> float32", name);
  ref_check_tol(what, op(ref_to_tg(n)), map1(n, TG_FLOAT32, ref, p), true, atol, rtol, file, line);
  ref_arr *z = ref_new(TG_FLOAT32, SHAPE(0, 3));
  snprintf(what, sizeof what, "%s size 0", name);
  ref_check_tol(what, op(ref_to_tg(z)), z, true, atol, rtol, file, line);
  ref_arr *s = ref_scalar(TG_FLOAT32, 0.25);
  snprintf(what, sizeof what, "%s 0-d", name);
  ref_check_tol(what, op(ref_to_tg(s)), map1(s, TG_FLOAT32, ref, p), true, atol, rtol, file, line);
}
#define UNARY(name, op, ref, p, lo, hi, atol, rtol) \
  REF_TEST(test_ew_##name) { check_unary(#name, op, ref, p, lo, hi, atol, rtol, __FILE__, __LINE__); }

/* float32-accurate ones are held to a few ulp, not just test_ops' 1e-6 / 1e-3 */
UNARY(log10, tg_log10, r_log10, 0, 0, 100, 1e-7, 1e-6)
UNARY(sinh, tg_sinh, r_sinh, 0, -10, 10, 1e-6, 1e-6)
UNARY(cosh, tg_cosh, r_cosh, 0, -10, 10, 1e-6, 1e-6)
UNARY(asin, tg_asin, r_asin, 0, -1, 1, 2e-7, 1e-6)
UNARY(acos, tg_acos, r_acos, 0, -1, 1, 3e-7, 1e-6)
UNARY(atan, tg_atan, r_atan, 0, -20, 20, 2e-7, 1e-6)
UNARY(asinh, tg_asinh, r_asinh, 0, -50, 50, 2e-7, 1e-6)
UNARY(acosh, tg_acosh, r_acosh, 0, 1, 50, 2e-7, 1e-6)
UNARY(atanh, tg_atanh, r_atanh, 0, -1, 1, 2e-7, 1e-5)
UNARY(erf, tg_erf, r_erf, 0, -5, 5, 1e-7, 1e-6)
UNARY(celu, w_celu, r_celu, 1.0, -10, 10, 1e-7, 1e-6)
UNARY(celu_alpha3, w_celu, r_celu, 3.0, -10, 10, 1e-7, 1e-6)
UNARY(celu_alpha_neg, w_celu, r_celu, -0.5, -10, 10, 1e-6, 1e-5)
UNARY(selu, tg_selu, r_selu, 0, -10, 10, 1e-7, 1e-6)
UNARY(softsign, tg_softsign, r_softsign, 0, -10, 10, 1e-7, 1e-6)
UNARY(quick_gelu, tg_quick_gelu, r_quick_gelu, 0, -10, 10, 1e-7, 1e-6)
UNARY(logsigmoid, tg_logsigmoid, r_logsigmoid, 0, -30, 30, 1e-7, 1e-6)
/* 1 + erf(x/sqrt 2) cancels for x < -3 in float32, as in PyTorch's own formula: test_ops' atol */
UNARY(gelu_none, w_gelu_none, r_gelu_erf, 0, -6, 6, 1e-6, 1e-6)
UNARY(softplus_beta3, w_softplus_beta, r_softplus_beta, 3.0, -10, 10, 1e-7, 1e-6)
UNARY(softplus_beta_third, w_softplus_beta, r_softplus_beta, 1.0 / 3, -10, 10, 1e-7, 1e-6)

/* round: ties go to the even neighbour, exactly, for every float32 (odd integers past 2^23 included) */
REF_TEST(test_ew_round_ties_to_even) {
  static const double v[] = {0.5,  1.5,  2.5,   3.5,    -0.5,      -1.5,       -2.5,      1.499,      1.501,
                             -2.499, -2.501, 0.0, -0.0, 2.1,    1e12,       -1e12,     8388609.0, -8388609.0,
                             8388608.5, 4194304.5, 4194305.5, INFINITY, -INFINITY, NAN, 0.49999997, -0.49999997};
  int n = (int)(sizeof v / sizeof v[0]);
  ref_arr *a = vec(TG_FLOAT32, n, v);
  ref_arr *want = map1(a, TG_FLOAT32, r_round, 0);
  tg_tensor *r = tg_round(ref_to_tg(a));
  CHECK_REF("round ties", r, want);
  ref_arr *got = ref_from_tg(r);
  for (int i = 0; got && i < n; i++)  /* exactly (the sign of a zero result is not kept: round(-0.4) is +0) */
    if (!isnan(want->data[i]))
      CHECK(got->data[i] == want->data[i], "round(%.9g): got %.9g want %.9g", a->data[i], got->data[i], want->data[i]);
  tg_dtype fts[3] = {TG_FLOAT32, TG_FLOAT64, TG_FLOAT16};
  for (int k = 0; k < 3; k++) {
    ref_arr *r = ref_rand(fts[k], SHAPE(9, 11), -40, 40);
    for (int64_t i = 0; i < r->numel; i += 3) r->data[i] = ref_round(fts[k], floor(r->data[i]) + 0.5);  /* ties */
    CHECK_REF("round random", tg_round(ref_to_tg(r)), map1(r, fts[k], r_round, 0));
  }
  ref_arr *ints = ref_rand(TG_INT16, SHAPE(4, 3), -1000, 1000);
  CHECK_REF("round int16 unchanged", tg_round(ref_to_tg(ints)), ints);
  /* the gradient is 0 (tinygrad's test_round_quantization_gradient: x + 0.125 (round(x) - x) has slope 7/8) */
  tg_tensor *x = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, (float[]){-1.2f, -0.7f, 0.2f, 1.2f}, 16), true);
  tg_tensor *y = tg_add(x, tg_mul_scalar(tg_sub(tg_round(x), x), 0.125));
  CHECK_T(y);
  CHECK(tg_backward(tg_sum(y, 0, NULL, false)) == TG_OK, "backward: %s", tg_error());
  float g[4] = {0};
  CHECK(tg_grad(x) && tg_to_host(tg_grad(x), g, sizeof g) == TG_OK, "grad");
  for (int i = 0; i < 4; i++) CHECK(g[i] == 0.875f, "round slope [%d] = %g", i, g[i]);
}

REF_TEST(test_ew_hardtanh_clip) {
  ref_arr *a = with_edges(TG_FLOAT32, 100, -30, 30, NEDGES, EDGES);
  ref_arr *want = ref_new(TG_FLOAT32, a->ndim, a->shape);
  for (int64_t i = 0; i < a->numel; i++) {
    double x = a->data[i], r = x < -10 ? -10 : x;
    want->data[i] = r > 15 ? 15 : r;
  }
  CHECK_REF("hardtanh(-10, 15)", tg_hardtanh(ref_to_tg(a), -10, 15), want);
  ref_arr *f = ref_rand(TG_FLOAT32, SHAPE(7, 3), -30, 30);  /* tg_clip is tg_clamp (NaN: the fix of issue 14) */
  ref_arr *fw = ref_new(TG_FLOAT32, f->ndim, f->shape);
  for (int64_t i = 0; i < f->numel; i++) fw->data[i] = fmin(fmax(f->data[i], -10), 15);
  CHECK_REF("clip(-10, 15)", tg_clip(ref_to_tg(f), -10, 15), fw);
  /* min > max: max everywhere (tinygrad's clip) */
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(5), -3, 3);
  CHECK_REF("hardtanh(3, 0)", tg_hardtanh(ref_to_tg(b), 3, 0), ref_full(TG_FLOAT32, SHAPE(5), 0));
  /* integer tensors stay integer for integral bounds, become float32 for fractional ones */
  ref_arr *n = ref_from(TG_INT8, SHAPE(5), (double[]){-100, -2, 0, 2, 100});
  CHECK_REF("hardtanh int8", tg_hardtanh(ref_to_tg(n), -1, 1), ref_from(TG_INT8, SHAPE(5), (double[]){-1, -1, 0, 1, 1}));
  CHECK_REF("hardtanh int8 frac", tg_hardtanh(ref_to_tg(n), -1.5, 1.5),
            ref_from(TG_FLOAT32, SHAPE(5), (double[]){-1.5, -1.5, 0, 1.5, 1.5}));
  CHECK(tg_hardtanh(ref_to_tg(b), NAN, 1) == NULL, "NaN bound refused");
}

REF_TEST(test_ew_isinf_isnan_isfinite) {
  static const double v[] = {-INFINITY, 0.0, INFINITY, NAN, 1.1, -0.0, 3e38};
  ref_arr *a = vec(TG_FLOAT32, 7, v);
  tg_tensor *t = ref_to_tg(a);
  CHECK_REF("isinf", tg_isinf(t, true, true), ref_from(TG_BOOL, SHAPE(7), (double[]){1, 0, 1, 0, 0, 0, 0}));
  CHECK_REF("isinf +", tg_isinf(t, true, false), ref_from(TG_BOOL, SHAPE(7), (double[]){0, 0, 1, 0, 0, 0, 0}));
  CHECK_REF("isinf -", tg_isinf(t, false, true), ref_from(TG_BOOL, SHAPE(7), (double[]){1, 0, 0, 0, 0, 0, 0}));
  CHECK_REF("isinf none", tg_isinf(t, false, false), ref_from(TG_BOOL, SHAPE(7), (double[]){0, 0, 0, 0, 0, 0, 0}));
  CHECK_REF("isnan", tg_isnan(t), ref_from(TG_BOOL, SHAPE(7), (double[]){0, 0, 0, 1, 0, 0, 0}));
  CHECK_REF("isfinite", tg_isfinite(t), ref_from(TG_BOOL, SHAPE(7), (double[]){0, 1, 0, 0, 1, 1, 1}));
  ref_arr *h = vec(TG_FLOAT16, 7, v);
  CHECK_REF("isfinite f16", tg_isfinite(ref_to_tg(h)), ref_from(TG_BOOL, SHAPE(7), (double[]){0, 1, 0, 0, 1, 1, 0}));
  ref_arr *n = ref_rand(TG_INT64, SHAPE(2, 3), -5, 5);
  CHECK_REF("isnan int", tg_isnan(ref_to_tg(n)), ref_full(TG_BOOL, SHAPE(2, 3), 0));
  CHECK_REF("isinf int", tg_isinf(ref_to_tg(n), true, true), ref_full(TG_BOOL, SHAPE(2, 3), 0));
  CHECK_REF("isfinite int", tg_isfinite(ref_to_tg(n)), ref_full(TG_BOOL, SHAPE(2, 3), 1));
}

/* ---- binary ----------------------------------------------------------------------------------------------- */

static double r_copysign(double a, double b) { return copysign(fabs(a), b); }
static double r_logaddexp(double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  double m = fmax(a, b);
  if (isinf(m)) return m;
  return m + log1p(exp(-fabs(a - b)));
}

REF_TEST(test_ew_copysign) {
  static const double v[] = {-1.0, -0.0, 0.0, 1.0, INFINITY, -INFINITY, NAN, 2.5};
  double av[64], bv[64];
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) av[i * 8 + j] = v[i], bv[i * 8 + j] = v[j];
  ref_arr *a = vec(TG_FLOAT32, 64, av), *b = vec(TG_FLOAT32, 64, bv);
  ref_arr *want = map2(a, b, TG_FLOAT32, r_copysign);
  tg_tensor *r = tg_copysign(ref_to_tg(a), ref_to_tg(b));
  CHECK_REF("copysign table", r, want);
  ref_arr *got = ref_from_tg(r);
  for (int i = 0; got && i < 64; i++)
    if (!isnan(av[i]))
      CHECK(signbit(got->data[i]) == signbit(want->data[i]), "copysign(%g, %g): got %g want %g", av[i], bv[i],
            got->data[i], want->data[i]);
  /* broadcasting, random */
  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(4, 1), -3, 3), *y = ref_rand(TG_FLOAT32, SHAPE(1, 5), -3, 3);
  CHECK_REF("copysign (4,1) (1,5)", tg_copysign(ref_to_tg(x), ref_to_tg(y)), map2(x, y, TG_FLOAT32, r_copysign));
  /* integers keep their dtype (tinygrad; PyTorch gives float) */
  ref_arr *n = ref_rand(TG_INT8, SHAPE(3, 4), -100, 100), *m = ref_rand(TG_INT8, SHAPE(4), -3, 3);
  CHECK_REF("copysign int8", tg_copysign(ref_to_tg(n), ref_to_tg(m)), map2(n, m, TG_INT8, r_copysign));
  CHECK_REF("copysign scalar", tg_copysign_scalar(ref_to_tg(x), -1), map2(x, ref_scalar(TG_FLOAT32, -1), TG_FLOAT32, r_copysign));
  ref_arr *z = ref_new(TG_FLOAT32, SHAPE(0, 5));
  CHECK_REF("copysign size 0", tg_copysign(ref_to_tg(z), ref_to_tg(y)), z);
}

REF_TEST(test_ew_logaddexp) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(6, 7), -50, 50), *b = ref_rand(TG_FLOAT32, SHAPE(7), -50, 50);
  CHECK_REF("logaddexp", tg_logaddexp(ref_to_tg(a), ref_to_tg(b)), map2(a, b, TG_FLOAT32, r_logaddexp));
  static const double x[] = {-1, -100, -200, -300, 1, 2000, 30000, INFINITY, -INFINITY, -INFINITY, INFINITY, NAN, 5, 0};
  static const double y[] = {-1, -1, 2, 3, -1, 2, 3, 1, 1, -INFINITY, INFINITY, 1, NAN, 0};
  ref_arr *xa = vec(TG_FLOAT32, 14, x), *ya = vec(TG_FLOAT32, 14, y);
  CHECK_REF("logaddexp edges", tg_logaddexp(ref_to_tg(xa), ref_to_tg(ya)), map2(xa, ya, TG_FLOAT32, r_logaddexp));
  ref_arr *n = ref_rand(TG_INT32, SHAPE(5), -5, 5), *m = ref_rand(TG_INT32, SHAPE(5), -5, 5);
  CHECK_REF("logaddexp int -> float32", tg_logaddexp(ref_to_tg(n), ref_to_tg(m)), map2(n, m, TG_FLOAT32, r_logaddexp));
  CHECK_REF("logaddexp scalar 0", tg_logaddexp_scalar(ref_to_tg(a), 0),
            map2(a, ref_scalar(TG_FLOAT32, 0), TG_FLOAT32, r_logaddexp));
}

static double g_rtol, g_atol;
static bool g_equal_nan;
static double r_isclose(double a, double b) {
  if (isnan(a) || isnan(b)) return g_equal_nan && isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= g_atol + g_rtol * fabs(b);
}

REF_TEST(test_ew_isclose) {
  static const double x[] = {1e-7, 1e-8, 1e-9, NAN, INFINITY, INFINITY, -INFINITY, 1.0, 1.00001, 100, 100.002, NAN, 0};
  static const double y[] = {0.0, 0.0, 0.0, NAN, INFINITY, -INFINITY, -INFINITY, 1.0, 1.0, 100.001, 100, 1, INFINITY};
  ref_arr *a = vec(TG_FLOAT32, 13, x), *b = vec(TG_FLOAT32, 13, y);
  for (int en = 0; en < 2; en++) {
    g_rtol = 1e-5, g_atol = 1e-8, g_equal_nan = en;
    CHECK_REF(en ? "isclose equal_nan" : "isclose", tg_isclose(ref_to_tg(a), ref_to_tg(b), 1e-5, 1e-8, en),
              map2(a, b, TG_BOOL, r_isclose));
  }
  g_rtol = 0.1, g_atol = 0.05, g_equal_nan = false;
  ref_arr *c = ref_rand(TG_FLOAT32, SHAPE(5, 1), -1, 1), *d = ref_rand(TG_FLOAT32, SHAPE(1, 9), -1, 1);
  CHECK_REF("isclose broadcast", tg_isclose(ref_to_tg(c), ref_to_tg(d), 0.1, 0.05, false), map2(c, d, TG_BOOL, r_isclose));
  /* integers exactly: int64 values past 2^24 that float32 would merge */
  int64_t ia[4] = {16777217, -16777217, 1000000007, INT64_MAX}, ib[4] = {16777216, -16777217, 1000000006, INT64_MAX - 1};
  tg_tensor *ta = tg_from_data(TG_INT64, 1, (int64_t[]){4}, ia, sizeof ia), *tb = tg_from_data(TG_INT64, 1, (int64_t[]){4}, ib, sizeof ib);
  ref_arr *want0 = ref_from(TG_BOOL, SHAPE(4), (double[]){0, 1, 0, 1});  /* INT64_MAX - 1 rounds onto INT64_MAX in float64 */
  CHECK_REF("isclose int64 exact", tg_isclose(ta, tb, 0, 0, false), want0);
  CHECK_REF("isclose int64 atol 1", tg_isclose(ta, tb, 0, 1, false), ref_full(TG_BOOL, SHAPE(4), 1));
  uint8_t ua[3] = {3, 250, 7}, ub[3] = {5, 5, 7};  /* an unsigned difference must not wrap */
  tg_tensor *tua = tg_from_data(TG_UINT8, 1, (int64_t[]){3}, ua, 3), *tub = tg_from_data(TG_UINT8, 1, (int64_t[]){3}, ub, 3);
  CHECK_REF("isclose uint8", tg_isclose(tua, tub, 0, 2, false), ref_from(TG_BOOL, SHAPE(3), (double[]){1, 0, 1}));
  CHECK(tg_isclose(ta, tb, -1, 0, false) == NULL, "negative rtol refused");
}

REF_TEST(test_ew_lerp_masked_fill_where) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 5), -3, 3), *e = ref_rand(TG_FLOAT32, SHAPE(5), -3, 3);
  ref_arr *w = ref_rand(TG_FLOAT32, SHAPE(4, 1), 0, 1);
  ref_arr *want = ref_binary(R_ADD, a, ref_binary(R_MUL, ref_binary(R_SUB, e, a), w));
  CHECK_REF("lerp", tg_lerp(ref_to_tg(a), ref_to_tg(e), ref_to_tg(w)), want);
  ref_arr *want5 = ref_binary(R_ADD, a, ref_binary_scalar(R_MUL, ref_binary(R_SUB, e, a), 0.5));
  CHECK_REF("lerp_scalar", tg_lerp_scalar(ref_to_tg(a), ref_to_tg(e), 0.5), want5);
  /* integers interpolate in float32 (no wrap of end - a) */
  ref_arr *u = ref_from(TG_UINT8, SHAPE(3), (double[]){200, 10, 0}), *v = ref_from(TG_UINT8, SHAPE(3), (double[]){100, 250, 0});
  CHECK_REF("lerp uint8", tg_lerp_scalar(ref_to_tg(u), ref_to_tg(v), 0.25), ref_from(TG_FLOAT32, SHAPE(3), (double[]){175, 70, 0}));

  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(6, 4), -1, 1);
  tg_tensor *tx = ref_to_tg(x), *mask = tg_gt_scalar(tx, 0.1);
  ref_arr *mf = ref_copy(x);
  for (int64_t i = 0; i < mf->numel; i++)
    if (x->data[i] > ref_round(TG_FLOAT32, 0.1)) mf->data[i] = -INFINITY;
  CHECK_REF("masked_fill -inf", tg_masked_fill(tx, mask, -INFINITY), mf);
  ref_arr *n = ref_from(TG_INT32, SHAPE(5), (double[]){1, 2, 3, 4, 5});
  ref_arr *m = ref_from(TG_BOOL, SHAPE(5), (double[]){1, 0, 1, 0, 0});
  CHECK_REF("masked_fill int keeps int", tg_masked_fill(ref_to_tg(n), ref_to_tg(m), -12),
            ref_from(TG_INT32, SHAPE(5), (double[]){-12, 2, -12, 4, 5}));
  CHECK_REF("masked_fill int frac -> float32", tg_masked_fill(ref_to_tg(n), ref_to_tg(m), 0.5),
            ref_from(TG_FLOAT32, SHAPE(5), (double[]){0.5, 2, 0.5, 4, 5}));
  ref_arr *val = ref_from(TG_INT32, SHAPE(5), (double[]){-1, -2, -3, -4, -5});
  CHECK_REF("masked_fill tensor", tg_masked_fill_tensor(ref_to_tg(n), ref_to_tg(m), ref_to_tg(val)),
            ref_from(TG_INT32, SHAPE(5), (double[]){-1, 2, -3, 4, 5}));
  CHECK_REF("where scalars int", tg_where_scalars(ref_to_tg(m), 4, 2), ref_from(TG_INT32, SHAPE(5), (double[]){4, 2, 4, 2, 2}));
  CHECK_REF("where scalars float", tg_where_scalars(ref_to_tg(m), 4, 2.5),
            ref_from(TG_FLOAT32, SHAPE(5), (double[]){4, 2.5, 4, 2.5, 2.5}));
  CHECK_REF("where scalar", tg_where_scalar(ref_to_tg(m), ref_to_tg(n), 9), ref_from(TG_INT32, SHAPE(5), (double[]){1, 9, 3, 9, 9}));
}

REF_TEST(test_ew_clone) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 4), -2, 2);
  tg_tensor *x = tg_set_requires_grad(ref_to_tg(a), true);
  tg_tensor *c = tg_clone(x);
  CHECK(tg_grad(c) == NULL, "a clone of a tensor without a gradient has none");
  /* gradients flow through a clone (backward before reading it: a realized tensor is a buffer) */
  CHECK(tg_backward(tg_sum(tg_mul_scalar(c, 3), 0, NULL, false)) == TG_OK, "backward: %s", tg_error());
  CHECK_REF("clone value", c, a);
  CHECK_REF("grad through clone", tg_grad(x), ref_full(TG_FLOAT32, SHAPE(3, 4), 3));
  /* tinygrad's clone copies the gradient too */
  tg_tensor *c2 = tg_clone(x);
  CHECK(tg_grad(c2) != NULL, "clone copies the gradient");
  if (tg_grad(c2)) CHECK_REF("cloned grad", tg_grad(c2), ref_full(TG_FLOAT32, SHAPE(3, 4), 3));
  tg_free(c2);  /* its gradient with it (the leak run checks) */
  CHECK_REF("contiguous_backward", tg_contiguous_backward(x), a);
}

/* ---- gradients ---------------------------------------------------------------------------------------------- */

typedef tg_tensor *(*fn2)(tg_tensor *x, tg_tensor *y);

static double loss_of(fn2 f, int64_t nx, const double *x, int64_t ny, const double *y, const double *w) {
  tg_scope_begin();
  tg_tensor *tx = tg_from_data(TG_FLOAT64, 1, &nx, x, (size_t)nx * 8);
  tg_tensor *ty = ny ? tg_from_data(TG_FLOAT64, 1, &ny, y, (size_t)ny * 8) : NULL;
  tg_tensor *tw = tg_from_data(TG_FLOAT64, 1, &nx, w, (size_t)nx * 8);
  double r = tg_item(tg_sum(tg_mul(f(tx, ty), tw), 0, NULL, false));
  tg_scope_end();
  return r;
}

/* d(sum(f(x, y) * w)) by autograd against central differences; x, y of n elements each (y may be absent) */
static void grad_check(const char *name, fn2 f, int n, const double *x0, const double *y0, const char *file, int line) {
  double x[64], y[64], w[64], gx[64] = {0}, gy[64] = {0};
  int64_t nn = n, ny = y0 ? n : 0;
  for (int i = 0; i < n; i++) x[i] = x0[i], y[i] = y0 ? y0[i] : 0, w[i] = ref_uniform(-1, 1);
  tg_scope_begin();
  tg_tensor *tx = tg_set_requires_grad(tg_from_data(TG_FLOAT64, 1, &nn, x, (size_t)n * 8), true);
  tg_tensor *ty = ny ? tg_set_requires_grad(tg_from_data(TG_FLOAT64, 1, &nn, y, (size_t)n * 8), true) : NULL;
  tg_tensor *tw = tg_from_data(TG_FLOAT64, 1, &nn, w, (size_t)n * 8);
  bool ok = tg_backward(tg_sum(tg_mul(f(tx, ty), tw), 0, NULL, false)) == TG_OK;
  if (!ok) test_fail(file, line, "%s: backward: %s", name, tg_error());
  if (ok && tg_grad(tx)) tg_to_host(tg_grad(tx), gx, (size_t)n * 8);
  if (ok && ty && tg_grad(ty)) tg_to_host(tg_grad(ty), gy, (size_t)n * 8);
  tg_scope_end();
  const double eps = 1e-6;
  int bad = 0;
  for (int which = 0; which < (ny ? 2 : 1) && ok; which++) {
    double *v = which ? y : x, *g = which ? gy : gx;
    for (int i = 0; i < n && bad < 3; i++) {
      double keep = v[i];
      v[i] = keep + eps;
      double lp = loss_of(f, nn, x, ny, y, w);
      v[i] = keep - eps;
      double lm = loss_of(f, nn, x, ny, y, w);
      v[i] = keep;
      double fd = (lp - lm) / (2 * eps);
      if (!(fabs(fd - g[i]) <= 1e-5 + 1e-4 * fabs(fd))) {
        test_fail(file, line, "%s: d/d%s at %.9g: autograd %.9g, finite differences %.9g", name, which ? "y" : "x",
                  v[i], g[i], fd);
        bad++;
      }
    }
  }
}

static tg_tensor *g_log10(tg_tensor *x, tg_tensor *y) { return tg_log10(x); }
static tg_tensor *g_sinh(tg_tensor *x, tg_tensor *y) { return tg_sinh(x); }
static tg_tensor *g_cosh(tg_tensor *x, tg_tensor *y) { return tg_cosh(x); }
static tg_tensor *g_asin(tg_tensor *x, tg_tensor *y) { return tg_asin(x); }
static tg_tensor *g_acos(tg_tensor *x, tg_tensor *y) { return tg_acos(x); }
static tg_tensor *g_atan(tg_tensor *x, tg_tensor *y) { return tg_atan(x); }
static tg_tensor *g_asinh(tg_tensor *x, tg_tensor *y) { return tg_asinh(x); }
static tg_tensor *g_acosh(tg_tensor *x, tg_tensor *y) { return tg_acosh(x); }
static tg_tensor *g_atanh(tg_tensor *x, tg_tensor *y) { return tg_atanh(x); }
static tg_tensor *g_erf(tg_tensor *x, tg_tensor *y) { return tg_erf(x); }
static tg_tensor *g_celu(tg_tensor *x, tg_tensor *y) { return tg_celu(x, 1.7); }
static tg_tensor *g_selu(tg_tensor *x, tg_tensor *y) { return tg_selu(x); }
static tg_tensor *g_softsign(tg_tensor *x, tg_tensor *y) { return tg_softsign(x); }
static tg_tensor *g_quick_gelu(tg_tensor *x, tg_tensor *y) { return tg_quick_gelu(x); }
static tg_tensor *g_logsigmoid(tg_tensor *x, tg_tensor *y) { return tg_logsigmoid(x); }
static tg_tensor *g_gelu_none(tg_tensor *x, tg_tensor *y) { return tg_gelu_mode(x, TG_GELU_NONE); }
static tg_tensor *g_softplus3(tg_tensor *x, tg_tensor *y) { return tg_softplus_beta(x, 3); }
static tg_tensor *g_hardtanh(tg_tensor *x, tg_tensor *y) { return tg_hardtanh(x, -1, 1); }
static tg_tensor *g_copysign(tg_tensor *x, tg_tensor *y) { return tg_copysign(x, y); }
static tg_tensor *g_logaddexp(tg_tensor *x, tg_tensor *y) { return tg_logaddexp(x, y); }
static tg_tensor *g_lerp(tg_tensor *x, tg_tensor *y) { return tg_lerp(x, y, tg_mul_scalar(tg_add(x, y), 0.25)); }
static tg_tensor *g_lerp_s(tg_tensor *x, tg_tensor *y) { return tg_lerp_scalar(x, y, 0.3); }
static tg_tensor *g_masked_fill(tg_tensor *x, tg_tensor *y) { return tg_masked_fill(x, tg_gt_scalar(y, 0), 2); }
static tg_tensor *g_rsub(tg_tensor *x, tg_tensor *y) { return tg_rsub_scalar(x, 2); }
static tg_tensor *g_rdiv(tg_tensor *x, tg_tensor *y) { return tg_rdiv_scalar(x, 2); }
static tg_tensor *g_rpow(tg_tensor *x, tg_tensor *y) { return tg_rpow_scalar(x, 2.5); }

typedef struct gcase { const char *name; fn2 f; double lo, hi; bool binary; } gcase;

REF_TEST(test_ew_gradients) {
  static const gcase cases[] = {
      {"log10", g_log10, 0.1, 10, false},   {"sinh", g_sinh, -3, 3, false},         {"cosh", g_cosh, -3, 3, false},
      {"asin", g_asin, -0.99, 0.99, false}, {"acos", g_acos, -0.99, 0.99, false},   {"atan", g_atan, -20, 20, false},
      {"asinh", g_asinh, -20, 20, false},   {"acosh", g_acosh, 1.01, 20, false},    {"atanh", g_atanh, -0.99, 0.99, false},
      {"erf", g_erf, -5, 5, false},         {"celu", g_celu, -4, 4, false},         {"selu", g_selu, -4, 4, false},
      {"softsign", g_softsign, -4, 4, false}, {"quick_gelu", g_quick_gelu, -6, 6, false},
      {"logsigmoid", g_logsigmoid, -30, 30, false}, {"gelu none", g_gelu_none, -5, 5, false},
      {"softplus beta 3", g_softplus3, -5, 5, false}, {"hardtanh", g_hardtanh, -3, 3, false},
      {"copysign", g_copysign, -3, 3, true}, {"logaddexp", g_logaddexp, -20, 20, true}, {"lerp", g_lerp, -3, 3, true},
      {"lerp scalar", g_lerp_s, -3, 3, true}, {"masked_fill", g_masked_fill, -3, 3, true},
      {"rsub", g_rsub, -3, 3, false}, {"rdiv", g_rdiv, 0.5, 3, false}, {"rpow", g_rpow, -3, 3, false},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    double x[24], y[24];
    for (int i = 0; i < 24; i++) x[i] = ref_uniform(cases[k].lo, cases[k].hi), y[i] = ref_uniform(cases[k].lo, cases[k].hi);
    grad_check(cases[k].name, cases[k].f, 24, x, cases[k].binary ? y : NULL, __FILE__, __LINE__);
  }
}

/* the slope against the closed form, in float32 as a user runs it, at points that include the edges */
static void slope_check(const char *name, tg_tensor *(*op)(tg_tensor *), double (*d)(double), int n, const float *xs,
                        double atol, double rtol, const char *file, int line) {
  tg_scope_begin();
  tg_tensor *x = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){n}, xs, (size_t)n * 4), true);
  float g[64];
  if (tg_backward(tg_sum(op(x), 0, NULL, false)) != TG_OK || !tg_grad(x) ||
      tg_to_host(tg_grad(x), g, (size_t)n * 4) != TG_OK) {
    test_fail(file, line, "%s: backward: %s", name, tg_error());
  } else {
    for (int i = 0; i < n; i++) {
      double want = d(xs[i]);
      bool ok = (isnan(want) && isnan(g[i])) || fabs(g[i] - want) <= atol + rtol * fabs(want);
      if (!ok) test_fail(file, line, "%s'(%.9g): got %.9g want %.9g", name, xs[i], g[i], want);
    }
  }
  tg_scope_end();
}
static double d_erf(double x) { return 1.1283791670955126 * exp(-x * x); }
static double d_asin(double x) { return 1 / sqrt(1 - x * x); }
static double d_atan(double x) { return 1 / (1 + x * x); }
static double d_asinh(double x) { return 1 / sqrt(x * x + 1); }
static double d_quick_gelu(double x) { double s = r_sigmoid(1.702 * x); return s + 1.702 * x * s * (1 - s); }
static double d_logsigmoid(double x) { return r_sigmoid(-x); }
static double d_selu(double x) { return 1.0507009873554805 * (x >= 0 ? 1 : 1.6732632423543772 * exp(x)); }
static double d_celu(double x) { return x > 0 ? 1 : exp(x); }
static double d_gelu_none(double x) { return 0.5 * (1 + erf(x / sqrt(2))) + x * exp(-x * x / 2) / sqrt(2 * M_PI); }
static double d_softsign(double x) { return 1 / ((1 + fabs(x)) * (1 + fabs(x))); }
static double d_softplus3(double x) { return r_sigmoid(3 * x); }
static tg_tensor *w_celu1(tg_tensor *t) { return tg_celu(t, 1); }
static tg_tensor *w_softplus3(tg_tensor *t) { return tg_softplus_beta(t, 3); }

REF_TEST(test_ew_slopes_exact_and_saturated) {
  static const float pts[] = {0.0f, -0.0f, 1e-6f, -1e-6f, 0.3f, -0.7f, 0.5f, 1.5f, -2.5f, 3.49f, 4.6f, -6.0f,
                              30.0f, -30.0f, 300.0f, -300.0f, 400.0f, -400.0f};
  int n = (int)(sizeof pts / sizeof pts[0]);
  slope_check("erf", tg_erf, d_erf, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("quick_gelu", tg_quick_gelu, d_quick_gelu, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("logsigmoid", tg_logsigmoid, d_logsigmoid, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("selu", tg_selu, d_selu, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("celu", w_celu1, d_celu, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("gelu none", w_gelu_none, d_gelu_none, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("softsign", tg_softsign, d_softsign, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("softplus beta 3", w_softplus3, d_softplus3, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("atan", tg_atan, d_atan, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  slope_check("asinh", tg_asinh, d_asinh, n, pts, 1e-6, 1e-5, __FILE__, __LINE__);
  static const float in1[] = {0.0f, -0.0f, 1e-6f, 0.3f, -0.49f, 0.51f, -0.8f, 0.99f, -0.999f, 0.9999f};
  slope_check("asin", tg_asin, d_asin, 10, in1, 1e-6, 1e-3, __FILE__, __LINE__);
  /* copysign: d/da is sign(a) sign(b)-ish and 0 at a = 0 (PyTorch), d/db 0 */
  float a[6] = {0.0f, -0.0f, 2.0f, -2.0f, 3.0f, -3.0f}, b[6] = {1.0f, -1.0f, -1.0f, -1.0f, 1.0f, 1.0f};
  tg_tensor *ta = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){6}, a, sizeof a), true);
  tg_tensor *tb = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){6}, b, sizeof b), true);
  CHECK(tg_backward(tg_sum(tg_copysign(ta, tb), 0, NULL, false)) == TG_OK, "backward: %s", tg_error());
  float ga[6] = {0}, gb[6] = {0}, wa[6] = {0, 0, -1, 1, 1, -1};
  if (tg_grad(ta)) tg_to_host(tg_grad(ta), ga, sizeof ga);
  if (tg_grad(tb)) tg_to_host(tg_grad(tb), gb, sizeof gb);
  for (int i = 0; i < 6; i++) CHECK(ga[i] == wa[i] && gb[i] == 0, "copysign grad [%d]: %g %g", i, ga[i], gb[i]);
}

/* erf in float32 over 200001 points of [-6, 6] against libm's double erf: within 2e-7 everywhere (its own
 * fit is 1.3e-7), within 4 ulp relative below 1/2 (an odd polynomial: no cancellation near 0), never above 1,
 * and +-1 at +-inf, NaN at NaN; float64 within 2e-8 (the Taylor form's 1.4e-8) */
REF_TEST(test_ew_erf_dense) {
  enum { N = 200001 };
  float *x = malloc(sizeof(float) * (N + 3)), *y = malloc(sizeof(float) * (N + 3));
  double *xd = malloc(sizeof(double) * N), *yd = malloc(sizeof(double) * N);
  if (!x || !y || !xd || !yd) { test_fail(__FILE__, __LINE__, "out of memory"); free(x); free(y); free(xd); free(yd); return; }
  for (int i = 0; i < N; i++) x[i] = -6.0f + 12.0f * (float)i / (N - 1), xd[i] = x[i];
  x[N] = INFINITY, x[N + 1] = -INFINITY, x[N + 2] = NAN;
  tg_scope_begin();
  CHECK(tg_to_host(tg_erf(tg_from_data(TG_FLOAT32, 1, (int64_t[]){N + 3}, x, sizeof(float) * (N + 3))), y,
                   sizeof(float) * (N + 3)) == TG_OK &&
            tg_to_host(tg_erf(tg_from_data(TG_FLOAT64, 1, (int64_t[]){N}, xd, sizeof(double) * N)), yd,
                       sizeof(double) * N) == TG_OK, "%s", tg_error());
  tg_scope_end();
  double worst = 0, worst_rel = 0, worst64 = 0;
  int at = 0, at_rel = 0, above = 0;
  for (int i = 0; i < N; i++) {
    double want = erf((double)x[i]), e = fabs(y[i] - want);
    if (e > worst) worst = e, at = i;
    if (fabs(x[i]) < 0.5f && want != 0 && e / fabs(want) > worst_rel) worst_rel = e / fabs(want), at_rel = i;
    above += fabsf(y[i]) > 1.0f;
    if (fabs(yd[i] - want) > worst64) worst64 = fabs(yd[i] - want);
  }
  CHECK(worst <= 2e-7, "float32 erf(%.9g) = %.9g, off by %.3g", x[at], y[at], worst);
  CHECK(worst_rel <= 4 * FLT_EPSILON, "float32 erf(%.9g) = %.9g, relative error %.3g", x[at_rel], y[at_rel], worst_rel);
  CHECK(above == 0, "%d values above 1 in magnitude", above);
  CHECK(y[N] == 1.0f && y[N + 1] == -1.0f && isnan(y[N + 2]), "erf(inf, -inf, nan) = %g %g %g", y[N], y[N + 1], y[N + 2]);
  CHECK(worst64 <= 2e-8, "float64 erf off by %.3g", worst64);
  free(x); free(y); free(xd); free(yd);
}

REF_TEST(test_ew_math_errors) {
  tg_tensor *x = tg_scalar(TG_FLOAT32, 1);
  CHECK(tg_celu(x, 0) == NULL && strstr(tg_error(), "tg_celu"), "celu alpha 0: %s", tg_error());
  CHECK(tg_softplus_beta(x, 0) == NULL && strstr(tg_error(), "tg_softplus_beta"), "beta 0: %s", tg_error());
  CHECK(tg_gelu_mode(x, (tg_gelu_approx)7) == NULL, "bad gelu mode");
  CHECK(tg_copysign(tg_zeros(TG_FLOAT32, SHAPE(2, 3)), tg_zeros(TG_FLOAT32, SHAPE(4))) == NULL, "bad broadcast");
  tg_error_clear();
  CHECK(tg_erf(NULL) == NULL && tg_logaddexp(x, NULL) == NULL && tg_lerp(x, x, NULL) == NULL &&
            tg_masked_fill(NULL, x, 0) == NULL && tg_clone(NULL) == NULL && tg_isclose(NULL, x, 0, 0, 0) == NULL,
        "NULL propagates");
  CHECK(tg_error_status() == TG_OK, "NULL inputs leave the error alone: %s", tg_error());
}
