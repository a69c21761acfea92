/* elementwise_math.c — more of tinygrad's elementwise methods: logarithm base 10, hyperbolic and inverse
 * trigonometric functions, erf, rounding half to even, NaN/inf tests, activations (celu, selu, softsign,
 * quick_gelu, logsigmoid, hardtanh, gelu with erf, softplus with beta), copysign, logaddexp, isclose, lerp,
 * masked_fill, where with scalars, clone.
 *
 * Each op is a composition of the ALU primitives, as elementwise.c's, so autograd and fusion come free. Two
 * habits keep the gradients what PyTorch's are:
 *  - "safe where": where(c, f(x), g(x)) passes a zero gradient into the branch it does not pick, and the
 *    primitives' rules multiply that zero by their local derivative, so a branch that overflows there
 *    (exp(300) in the x < 0 side of selu) would turn it into 0 * inf = NaN. Each branch therefore reads x
 *    clamped to its own side (a where on x itself), never x beyond it.
 *  - approximations (erf, asin, atan) are polynomials whose derivative is as accurate as their value, and
 *    they, like every op here, run in at least float32: a half-precision input is widened and the result
 *    rounded back (as tinygrad's exp), since x^2 overflows float16 at 256.
 */
#include <math.h>

#include "tensor/compose.h"
#include "tensor/elementwise.h"

#define LN2 0.69314718055994530942
#define LOG2E 1.44269504088896340736
#define PI_2 1.57079632679489661923

/* ---- node helpers ---------------------------------------------------------------------------------- */

static uop *cf(uop *x, double v) { return mk_const_like(x, v); }
static uop *add(uop *a, uop *b) { return mk_binary(OP_ADD, a, b); }
static uop *mul(uop *a, uop *b) { return mk_binary(OP_MUL, a, b); }
static uop *addc(uop *x, double v) { return add(x, cf(x, v)); }
static uop *mulc(uop *x, double v) { return mul(x, cf(x, v)); }
static uop *neg(uop *x) { return mk_unary(OP_NEG, x); }
static uop *sub(uop *a, uop *b) { return add(a, neg(b)); }
static uop *rsubc(double v, uop *x) { return add(cf(x, v), neg(x)); }  /* v - x */
static uop *fdiv_(uop *a, uop *b) { return mk_binary(OP_FDIV, a, b); }
static uop *lt(uop *a, uop *b) { return mk_binary(OP_CMPLT, a, b); }
static uop *ltc(uop *x, double v) { return lt(x, cf(x, v)); }  /* x < v */
static uop *gtc(uop *x, double v) { return lt(cf(x, v), x); }  /* x > v */
static uop *eqc(uop *x, double v) { return mk_binary(OP_CMPEQ, x, cf(x, v)); }
static uop *not_(uop *c) { return mk_binary(OP_CMPEQ, c, mk_const_like(c, 0)); }
static uop *and_(uop *a, uop *b) { return mk_binary(OP_AND, a, b); }
static uop *or_(uop *a, uop *b) { return mk_binary(OP_OR, a, b); }
static uop *where(uop *c, uop *a, uop *b) { return mk_where(c, a, b); }
static uop *exp_(uop *x) { return mk_unary(OP_EXP2, mulc(x, LOG2E)); }
static uop *log_(uop *x) { return mulc(mk_unary(OP_LOG2, x), LN2); }
static uop *sqrt_(uop *x) { return mk_unary(OP_SQRT, x); }
static uop *recip(uop *x) { return mk_unary(OP_RECIP, x); }
static uop *isnan_(uop *x) { return mk_binary(OP_CMPNE, x, x); }
static uop *isinf_(uop *x) { return or_(eqc(x, INFINITY), eqc(x, -INFINITY)); }
/* |x| as a where: its gradient is 1 at 0, used only where the slope at 0 does not matter */
static uop *abs_(uop *x) { return where(ltc(x, 0), neg(x), x); }
/* the odd extension of r, a function of |x|: -r for negative x */
static uop *odd(uop *x, uop *r) { return where(ltc(x, 0), neg(r), r); }
static uop *floor_(uop *x) {
  uop *t = mk_unary(OP_TRUNC, x);
  return where(lt(x, t), addc(t, -1), t);
}
/* c[0] + c[1] x + ... + c[n-1] x^(n-1), Horner's scheme */
static uop *poly(uop *x, const double *c, int n) {
  uop *r = cf(x, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) r = addc(mul(r, x), c[i]);
  return r;
}
/* x where keep, else v: a branch's input clamped to its own side (see "safe where" above) */
static uop *keep_or(uop *keep, uop *x, double v) { return where(keep, x, cf(x, v)); }

/* log(1 + e^x) without overflow, with softplus's slope 1/2 at 0 */
static uop *softplus_(uop *x) {
  uop *pos = gtc(x, 0), *xp = keep_or(pos, x, 0), *xn = where(pos, cf(x, 0), x);
  return where(pos, add(xp, log_(addc(exp_(neg(xp)), 1))), log_(addc(exp_(xn), 1)));
}
/* 1 / (1 + e^-x) whose gradient is 0, not NaN, where e^-x overflows */
static uop *sigmoid_(uop *x) {
  uop *pos = not_(ltc(x, 0));
  uop *xp = keep_or(pos, x, 0), *xn = where(pos, cf(x, 0), x);
  uop *en = exp_(xn);
  return where(pos, recip(addc(exp_(neg(xp)), 1)), fdiv_(en, addc(en, 1)));
}

/* ---- entries ------------------------------------------------------------------------------------------ */

static tg_dtype float_of(tg_dtype dt) { return dtype_is_float(dt) ? dt : TG_FLOAT32; }
static tg_dtype wide_of(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16 ? TG_FLOAT32 : dt; }

typedef uop *(*ufn)(uop *x, const double *p);

/* float math: integer and bool inputs become float32; half precision computes in float32 and rounds back */
static tg_tensor *unary_float(tg_tensor *t, ufn f, const double *p) {
  if (!t) return NULL;
  lib_lock();  /* once for the op rather than once for each node it interns (uop.h) */
  tg_dtype dt = float_of(TDT(t));
  tg_tensor *r = tensor_new(mk_cast(f(mk_cast(t->u, wide_of(dt)), p), dt));
  lib_unlock();
  return r;
}

/* ---- logarithm and hyperbolic functions ---------------------------------------------------------------- */

static uop *f_log10(uop *x, const double *p) { return mulc(mk_unary(OP_LOG2, x), 0.30102999566398119521); }
static uop *f_sinh(uop *x, const double *p) { return mulc(sub(exp_(x), exp_(neg(x))), 0.5); }
static uop *f_cosh(uop *x, const double *p) { return mulc(add(exp_(x), exp_(neg(x))), 0.5); }

/* past 2^40, sqrt(x^2 +- 1) is x to float precision and x^2 may overflow: log(x + sqrt(...)) = log(2x) */
#define HYP_BIG 1099511627776.0
static uop *f_asinh(uop *x, const double *p) {  /* odd: log(a + sqrt(a^2 + 1)) of a = |x| */
  uop *a = abs_(x), *small = ltc(a, HYP_BIG), *as = keep_or(small, a, 0), *ab = keep_or(not_(small), a, HYP_BIG);
  uop *r = where(small, log_(add(as, sqrt_(addc(mul(as, as), 1)))), addc(log_(ab), LN2));
  return odd(x, r);
}
static uop *f_acosh(uop *x, const double *p) {  /* log(x + sqrt((x - 1)(x + 1))): NaN below 1 */
  uop *small = ltc(abs_(x), HYP_BIG), *xs = keep_or(small, x, 2), *xb = keep_or(not_(small), x, HYP_BIG);
  return where(small, log_(add(xs, sqrt_(mul(addc(xs, -1), addc(xs, 1))))), addc(log_(xb), LN2));
}
static uop *f_atanh(uop *x, const double *p) {  /* log((1 + x) / (1 - x)) / 2 */
  return mulc(log_(fdiv_(addc(x, 1), rsubc(1, x))), 0.5);
}

/* ---- inverse trigonometry ------------------------------------------------------------------------------ */

/* asin's Maclaurin coefficients x, x^3, x^5, ...: (2n)! / (4^n (n!)^2 (2n + 1)); 10 terms reach 5e-9 at 1/2 */
#define ASIN_TERMS 10
static void asin_series(double *c) {
  double b = 1;
  for (int n = 0; n < ASIN_TERMS; n++) {
    if (n) b *= (2.0 * n - 1) / (2.0 * n);
    c[n] = b / (2 * n + 1);
  }
}
/* Abramowitz & Stegun 4.4.46 (as tinygrad): asin(a) = pi/2 - sqrt(1 - a) P(a) on [0, 1], error 2e-8 */
static const double asin_as[8] = {1.5707963050, -0.2145988016, 0.0889789874, -0.0501743046,
                                  0.0308918810, -0.0170881256, 0.0066700901, -0.0012624911};
static uop *asin_(uop *x) {
  double c[ASIN_TERMS];
  asin_series(c);
  uop *a = abs_(x), *small = ltc(a, 0.5);
  uop *xs = keep_or(small, x, 0), *ab = keep_or(not_(small), a, 0.5);  /* not 1: sqrt's slope at 0 is inf */
  /* |x| < 1/2: the odd series (exact slope at 0); beyond: A&S, where 1 - a is exact (Sterbenz) */
  uop *near0 = mul(xs, poly(mul(xs, xs), c, ASIN_TERMS));
  uop *far = rsubc(PI_2, mul(sqrt_(rsubc(1, ab)), poly(ab, asin_as, 8)));
  return where(small, near0, odd(x, far));
}
static uop *f_asin(uop *x, const double *p) { return asin_(x); }
static uop *f_acos(uop *x, const double *p) { return rsubc(PI_2, asin_(x)); }

/* Abramowitz & Stegun 4.4.49: atan(x) = x P(x^2) on [-1, 1], error 2e-8; beyond, pi/2 - atan(1/|x|) */
static const double atan_as[9] = {1.0, -0.3333314528, 0.1999355085, -0.1420889944, 0.1065626393,
                                  -0.0752896400, 0.0429096138, -0.0161657367, 0.0028662257};
static uop *f_atan(uop *x, const double *p) {
  uop *a = abs_(x), *small = not_(gtc(a, 1));
  uop *xs = keep_or(small, x, 0), *ib = recip(keep_or(not_(small), a, 1));
  uop *near0 = mul(xs, poly(mul(xs, xs), atan_as, 9));
  uop *far = rsubc(PI_2, mul(ib, poly(mul(ib, ib), atan_as, 9)));
  return where(small, near0, odd(x, far));
}

/* ---- erf ----------------------------------------------------------------------------------------------- */

/* float64: erf(c + h) = erf(c) + 2/sqrt(pi) e^(-c^2) sum_n (-1)^n H_n(c) h^(n+1) / (n+1)!  (H_n: Hermite
 * polynomials, erf's derivatives). Centers 0..4 with |h| <= 1/2 and 13 terms: value within 1.4e-8, slope within
 * 4e-7 of the true ones; past 4.5, erf is +-1 in float64 to 2e-10. */
#define ERF_TERMS 13
static void erf_taylor(double c, double *a) {
  double k = 1.12837916709551257390 * exp(-c * c), h0 = 1, h1 = 2 * c, fact = 1;
  a[0] = erf(c);
  for (int n = 0; n < ERF_TERMS - 1; n++) {
    double hn = n == 0 ? 1 : n == 1 ? 2 * c : 2 * c * h1 - 2 * (n - 1) * h0;
    if (n >= 2) { h0 = h1; h1 = hn; }
    fact *= n + 1;
    a[n + 1] = k * (n % 2 ? -hn : hn) / fact;
  }
}
static uop *erf_f64(uop *x) {
  double co[ERF_TERMS], odd0[(ERF_TERMS + 1) / 2];
  erf_taylor(0, co);
  for (int i = 0; 2 * i + 1 < ERF_TERMS; i++) odd0[i] = co[2 * i + 1];
  uop *a = abs_(x), *small = ltc(a, 0.5), *xs = keep_or(small, x, 0);
  uop *near0 = mul(xs, poly(mul(xs, xs), odd0, ERF_TERMS / 2));  /* odd: x * P(x^2), exact slope at 0 */
  uop *ac = keep_or(ltc(a, 4.5), a, 4.5);
  uop *far = cf(x, 1);
  for (int c = 4; c >= 1; c--) {
    erf_taylor(c, co);
    far = where(ltc(a, c + 0.5), poly(addc(ac, -c), co, ERF_TERMS), far);
  }
  return where(isnan_(x), x, where(small, near0, odd(x, far)));
}

/* float32, a quarter of the float64 form's work (GELU's epilogue runs it on every matmul output): below 1/2
 * the odd x S(x^2), S(0) = 2/sqrt(pi); beyond, 1 - e^(-a^2) R(a) with R = P/Q fitted to the scaled erfc
 * e^(a^2) erfc(a) on [1/2, 4] (relative minimax fits: 1.5e-9 and 3.8e-8). Run in float32 on 2e6 points of
 * [-5, 5]: within 1.3e-7 of erf (2.4 ulp, mean 0.26 ulp; the float64 form run in float32 was 7.7e-8, 2.2 ulp,
 * mean 0.32); PyTorch's vectorized CPU erf (A&S 7.1.26) is 1.5e-7. Past 4, erf(4) rounds to 1. Q has no zero
 * on [0, 4], so the branch not taken has a finite slope (safe where). */
static const double erf_s[5] = {1.1283791670955126, -0.37612617203550375, 0.11282949787806905,
                                -0.026764029715085354, 0.0047302365906273644};
static const double erfcx_p[5] = {1.0001121879961041, 0.62263429881352883, 0.17908706936443333,
                                  -0.00054722205680093493, 2.6635091007941019e-05};
static const double erfcx_q[4] = {1, 1.7519726041644201, 1.1522999522770767, 0.30850150480923216};
static uop *erf_f32(uop *x) {
  uop *a = abs_(x), *ac = where(gtc(a, 4), cf(x, 4), a);  /* a where, not a max: NaN stays NaN */
  uop *near0 = mul(x, poly(mul(x, x), erf_s, 5));
  uop *r = fdiv_(poly(ac, erfcx_p, 5), poly(ac, erfcx_q, 4));
  uop *far = rsubc(1, mul(exp_(neg(mul(ac, ac))), r));
  return where(ltc(a, 0.5), near0, odd(x, far));
}
static uop *erf_(uop *x) { return x->dtype == TG_FLOAT64 ? erf_f64(x) : erf_f32(x); }
static uop *f_erf(uop *x, const double *p) { return erf_(x); }

tg_tensor *tg_log10(tg_tensor *t) { return unary_float(t, f_log10, NULL); }
tg_tensor *tg_sinh(tg_tensor *t) { return unary_float(t, f_sinh, NULL); }
tg_tensor *tg_cosh(tg_tensor *t) { return unary_float(t, f_cosh, NULL); }
tg_tensor *tg_asinh(tg_tensor *t) { return unary_float(t, f_asinh, NULL); }
tg_tensor *tg_acosh(tg_tensor *t) { return unary_float(t, f_acosh, NULL); }
tg_tensor *tg_atanh(tg_tensor *t) { return unary_float(t, f_atanh, NULL); }
tg_tensor *tg_asin(tg_tensor *t) { return unary_float(t, f_asin, NULL); }
tg_tensor *tg_acos(tg_tensor *t) { return unary_float(t, f_acos, NULL); }
tg_tensor *tg_atan(tg_tensor *t) { return unary_float(t, f_atan, NULL); }
tg_tensor *tg_erf(tg_tensor *t) { return unary_float(t, f_erf, NULL); }

/* ---- activations ------------------------------------------------------------------------------------------ */

static uop *f_celu(uop *x, const double *p) {  /* x > 0 ? x : alpha (e^(x/alpha) - 1) */
  uop *pos = gtc(x, 0), *xn = where(pos, cf(x, 0), x);
  return where(pos, x, mulc(addc(exp_(mulc(xn, 1 / p[0])), -1), p[0]));
}
/* PyTorch's constants in full (tinygrad rounds them to 1.67326 and 1.0507, a 2e-6 relative difference) */
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946
static uop *f_selu(uop *x, const double *p) {  /* tinygrad's x >= 0 picks the linear side at 0 */
  uop *neg_ = ltc(x, 0), *xn = keep_or(neg_, x, 0);
  return mulc(where(neg_, mulc(addc(exp_(xn), -1), SELU_ALPHA), x), SELU_SCALE);
}
static uop *f_softsign(uop *x, const double *p) { return fdiv_(x, addc(abs_(x), 1)); }
static uop *f_quick_gelu(uop *x, const double *p) { return mul(x, sigmoid_(mulc(x, 1.702))); }
static uop *f_logsigmoid(uop *x, const double *p) { return neg(softplus_(neg(x))); }
static uop *f_gelu_erf(uop *x, const double *p) { return mul(mulc(x, 0.5), addc(erf_(mulc(x, M_SQRT1_2)), 1)); }
static uop *f_softplus_beta(uop *x, const double *p) { return mulc(softplus_(mulc(x, p[0])), 1 / p[0]); }

tg_tensor *tg_selu(tg_tensor *t) { return unary_float(t, f_selu, NULL); }
tg_tensor *tg_softsign(tg_tensor *t) { return unary_float(t, f_softsign, NULL); }
tg_tensor *tg_quick_gelu(tg_tensor *t) { return unary_float(t, f_quick_gelu, NULL); }
tg_tensor *tg_logsigmoid(tg_tensor *t) { return unary_float(t, f_logsigmoid, NULL); }
tg_tensor *tg_swish(tg_tensor *t) { return tg_silu(t); }
tg_tensor *tg_clip(tg_tensor *t, double lo, double hi) { return tg_clamp(t, lo, hi); }

tg_tensor *tg_celu(tg_tensor *t, double alpha) {
  if (t && (alpha == 0 || !isfinite(alpha))) {
    tg_set_error(TG_ERR_ARG, "tg_celu: alpha %g must be finite and not 0", alpha);
    return NULL;
  }
  return unary_float(t, f_celu, &alpha);
}

tg_tensor *tg_softplus_beta(tg_tensor *t, double beta) {
  if (t && (beta == 0 || !isfinite(beta))) {
    tg_set_error(TG_ERR_ARG, "tg_softplus_beta: beta %g must be finite and not 0", beta);
    return NULL;
  }
  return unary_float(t, f_softplus_beta, &beta);
}

tg_tensor *tg_gelu_mode(tg_tensor *t, tg_gelu_approx approximate) {
  if (approximate == TG_GELU_TANH) return tg_gelu(t);
  if (approximate != TG_GELU_NONE) {
    tg_set_error(TG_ERR_ARG, "tg_gelu_mode: approximate %d is neither TG_GELU_TANH nor TG_GELU_NONE", (int)approximate);
    return NULL;
  }
  return unary_float(t, f_gelu_erf, NULL);
}

/* tinygrad's clip: x < lo -> lo, then > hi -> hi (lo > hi gives hi everywhere); the bounds are weak scalars */
tg_tensor *tg_hardtanh(tg_tensor *t, double min_val, double max_val) {
  if (!t) return NULL;
  if (isnan(min_val) || isnan(max_val)) {
    tg_set_error(TG_ERR_ARG, "tg_hardtanh: bounds %g, %g must not be NaN", min_val, max_val);
    return NULL;
  }
  lib_lock();
  tg_dtype dt = dtype_promote(scalar_dtype(TDT(t), min_val), scalar_dtype(TDT(t), max_val));
  if (dt == TG_BOOL) dt = TG_INT32;
  uop *x = mk_cast(t->u, dt);
  uop *r = where(ltc(x, min_val), cf(x, min_val), x);
  tg_tensor *out = tensor_new(where(gtc(r, max_val), cf(r, max_val), r));
  lib_unlock();
  return out;
}

/* ---- rounding and classification --------------------------------------------------------------------- */

/* floor(x) + 1 when the fraction is above 1/2, or exactly 1/2 with an odd floor; exact for every float
 * (tinygrad's floor(x + 0.5) form is off by one for odd integers past 2^23) */
static uop *f_round(uop *x) {
  uop *r = floor_(x), *d = sub(x, r), *half = mulc(r, 0.5);
  uop *odd_r = mk_binary(OP_CMPNE, floor_(half), half);
  uop *up = or_(gtc(d, 0.5), and_(eqc(d, 0.5), odd_r));
  return where(up, addc(r, 1), r);
}

tg_tensor *tg_round(tg_tensor *t) {
  if (!t) return NULL;
  lib_lock();
  tg_tensor *r = tensor_new(dtype_is_float(TDT(t)) ? f_round(t->u) : t->u);
  lib_unlock();
  return r;
}

/* a bool test of each value; integers and bool are never NaN or inf: the constant int_value */
static tg_tensor *classify(tg_tensor *t, uop *(*f)(uop *x, const bool *flags), const bool *flags, bool int_value) {
  if (!t) return NULL;
  lib_lock();
  uop *x = t->u;
  tg_tensor *r = tensor_new(dtype_is_float(TDT(t)) ? f(x, flags) : mk_const(TG_BOOL, int_value, x->ndim, x->shape));
  lib_unlock();
  return r;
}
static uop *c_isnan(uop *x, const bool *f) { return isnan_(x); }
static uop *c_isfinite(uop *x, const bool *f) { return not_(or_(isinf_(x), isnan_(x))); }
static uop *c_isinf(uop *x, const bool *f) {
  uop *r = mk_const(TG_BOOL, 0, x->ndim, x->shape);
  if (f[0]) r = or_(r, eqc(x, INFINITY));
  if (f[1]) r = or_(r, eqc(x, -INFINITY));
  return r;
}

tg_tensor *tg_isnan(tg_tensor *t) { return classify(t, c_isnan, NULL, false); }
tg_tensor *tg_isfinite(tg_tensor *t) { return classify(t, c_isfinite, NULL, true); }
tg_tensor *tg_isinf(tg_tensor *t, bool detect_positive, bool detect_negative) {
  return classify(t, c_isinf, (const bool[]){detect_positive, detect_negative}, false);
}

/* ---- binary ------------------------------------------------------------------------------------------------ */

typedef uop *(*bfn)(uop *a, uop *b, const double *p);

/* broadcasts and promotes a and b; to_float: integers and bool become float32, halves compute in float32
 * and the result rounds back (bool results stay bool) */
static tg_tensor *binary(const char *name, tg_tensor *ta, tg_tensor *tb, bfn f, const double *p, bool to_float) {
  if (!ta || !tb) return NULL;
  lib_lock();
  uop *a = ta->u, *b = tb->u, *r = NULL;
  if (broadcast_pair(name, &a, &b)) {
    tg_dtype dt = to_float ? float_of((tg_dtype)a->dtype) : (tg_dtype)a->dtype, wt = to_float ? wide_of(dt) : dt;
    r = f(mk_cast(a, wt), mk_cast(b, wt), p);
    if (r && r->dtype != TG_BOOL) r = mk_cast(r, dt);
  }
  tg_tensor *out = r ? tensor_new(r) : NULL;
  lib_unlock();
  return out;
}

/* |a| with the sign of b. |a| is 0 (+0.0, slope 0, as PyTorch's copysign) at a = 0, NaN stays NaN; b's
 * sign: b < 0, or 1/b < 0 for b = -0.0 */
static uop *b_copysign(uop *a, uop *b, const double *p) {
  tg_dtype dt = (tg_dtype)a->dtype;
  if (dt == TG_BOOL || dtype_is_unsigned(dt)) return a;
  if (!dtype_is_float(dt)) return where(ltc(b, 0), neg(abs_(a)), abs_(a));
  uop *mag = where(ltc(a, 0), neg(a), where(eqc(a, 0), cf(a, 0), a));
  return where(or_(ltc(b, 0), ltc(recip(b), 0)), neg(mag), mag);
}

/* m + log(e^(a-m) + e^(b-m)) with m = max(a, b) held constant (its slope cancels); m when m is +-inf */
static uop *b_logaddexp(uop *a, uop *b, const double *p) {
  uop *m = mk_unary(OP_DETACH, mk_binary(OP_MAX, a, b));
  uop *r = add(log_(add(exp_(sub(a, m)), exp_(sub(b, m)))), m);
  return where(isinf_(m), m, r);
}

/* tinygrad's isclose: finite and |a - b| <= atol + rtol |b|, or equal infinities, or (equal_nan) both NaN.
 * Integers and bool compare in float64: exact up to 2^53, and the difference cannot wrap */
static uop *b_isclose(uop *a, uop *b, const double *p) {
  tg_dtype dt = (tg_dtype)a->dtype;
  if (!dtype_is_float(dt)) {
    uop *af = mk_cast(a, TG_FLOAT64), *bf = mk_cast(b, TG_FLOAT64);
    return not_(lt(addc(mulc(abs_(bf), p[0]), p[1]), abs_(sub(af, bf))));
  }
  uop *close = not_(lt(addc(mulc(abs_(b), p[0]), p[1]), abs_(sub(a, b))));
  uop *fin = and_(and_(not_(isinf_(a)), not_(isnan_(a))), and_(not_(isinf_(b)), not_(isnan_(b))));
  uop *r = or_(and_(fin, close), and_(or_(isinf_(a), isinf_(b)), mk_binary(OP_CMPEQ, a, b)));
  return p[2] != 0 ? or_(r, and_(isnan_(a), isnan_(b))) : r;
}

tg_tensor *tg_copysign(tg_tensor *a, tg_tensor *b) { return binary("tg_copysign", a, b, b_copysign, NULL, false); }
tg_tensor *tg_logaddexp(tg_tensor *a, tg_tensor *b) { return binary("tg_logaddexp", a, b, b_logaddexp, NULL, true); }
tg_tensor *tg_isclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan) {
  if (a && b && (isnan(rtol) || isnan(atol) || rtol < 0 || atol < 0)) {
    tg_set_error(TG_ERR_ARG, "tg_isclose: rtol %g and atol %g must not be negative or NaN", rtol, atol);
    return NULL;
  }
  const double p[3] = {rtol, atol, equal_nan};
  tg_tensor *r = NULL;
  if (a && b && !dtype_is_float(dtype_promote(TDT(a), TDT(b)))) {
    /* integers: compared exactly in float64; bool as int32 */
    lib_lock();
    uop *x = a->u, *y = b->u;
    if (broadcast_pair("tg_isclose", &x, &y)) {
      if (x->dtype == TG_BOOL) x = mk_cast(x, TG_INT32), y = mk_cast(y, TG_INT32);
      uop *u = b_isclose(x, y, p);
      r = u ? tensor_new(u) : NULL;
    }
    lib_unlock();
    return r;
  }
  return binary("tg_isclose", a, b, b_isclose, p, true);
}

/* ---- composites -------------------------------------------------------------------------------------------- */

/* a + (end - a) * weight in the float dtype of the three (tinygrad's uint8 fixed-point path is not taken) */
static tg_tensor *lerp(const char *name, tg_tensor *a, tg_tensor *end, tg_tensor *w, tg_dtype wdt) {
  tmps s = TMPS(name);
  tg_dtype dt = float_of(dtype_promote(dtype_promote(TDT(a), TDT(end)), wdt));
  tg_tensor *ac = tmp(&s, tg_cast(a, dt)), *ec = tmp(&s, tg_cast(end, dt)), *wc = tmp(&s, tg_cast(w, dt));
  return tmps_end(&s, tg_add(ac, tmp(&s, tg_mul(tmp(&s, tg_sub(ec, ac)), wc))));
}

tg_tensor *tg_lerp(tg_tensor *a, tg_tensor *end, tg_tensor *weight) {
  if (!a || !end || !weight) return NULL;
  return lerp("tg_lerp", a, end, weight, TDT(weight));
}

tg_tensor *tg_lerp_scalar(tg_tensor *a, tg_tensor *end, double weight) {
  if (!a || !end) return NULL;
  tg_dtype wdt = scalar_dtype(dtype_promote(TDT(a), TDT(end)), weight);
  tg_tensor *w = tg_scalar(wdt, weight);
  tg_tensor *r = w ? lerp("tg_lerp_scalar", a, end, w, wdt) : NULL;
  tg_free(w);
  return r;
}

/* a 0-d tensor holding the weak scalar v as it meets a tensor of dtype like */
static tg_tensor *weak(tg_dtype like, double v) { return tg_scalar(scalar_dtype(like, v), v); }

tg_tensor *tg_masked_fill(tg_tensor *t, tg_tensor *mask, double value) {
  if (!t || !mask) return NULL;
  tg_tensor *v = weak(TDT(t), value);
  tg_tensor *r = v ? tg_where(mask, v, t) : NULL;
  tg_free(v);
  return r;
}

tg_tensor *tg_masked_fill_tensor(tg_tensor *t, tg_tensor *mask, tg_tensor *value) { return tg_where(mask, value, t); }

tg_tensor *tg_where_scalar(tg_tensor *cond, tg_tensor *a, double b) {
  if (!cond || !a) return NULL;
  tg_tensor *v = weak(TDT(a), b);
  tg_tensor *r = v ? tg_where(cond, a, v) : NULL;
  tg_free(v);
  return r;
}

tg_tensor *tg_where_scalars(tg_tensor *cond, double a, double b) {
  if (!cond) return NULL;
  /* two weak scalars: int32 if both are integral, else float32 (tinygrad's default dtypes) */
  tg_dtype dt = dtype_promote(scalar_dtype(TG_INT32, a), scalar_dtype(TG_INT32, b));
  tg_tensor *va = tg_scalar(dt, a), *vb = tg_scalar(dt, b);
  tg_tensor *r = va && vb ? tg_where(cond, va, vb) : NULL;
  tg_free(va);
  tg_free(vb);
  return r;
}

tg_tensor *tg_clone(tg_tensor *t) {
  if (!t) return NULL;
  lib_lock();
  tg_tensor *r = tg_contiguous(t);
  if (r && t->grad && !(r->grad = tensor_new_unscoped(t->grad->u))) {
    tg_free(r);
    r = NULL;
  }
  lib_unlock();
  return r;
}

tg_tensor *tg_contiguous_backward(tg_tensor *t) {
  if (!t) return NULL;
  lib_lock();
  tg_tensor *r = tensor_new(t->u);
  lib_unlock();
  return r;
}
