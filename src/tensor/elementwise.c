/* elementwise.c — unary, binary and ternary ops with numpy broadcasting and tinygrad's dtype promotion.
 * Math ops and activations are compositions of the ALU primitives (EXP2, LOG2, SIN, SQRT, RECIP, ...),
 * as in tinygrad, so a backend renders only the primitives and everything fuses. */
#include <math.h>
#include <stdio.h>

#include "tensor/elementwise.h"

#define LN2 0.69314718055994530942
#define LOG2E 1.44269504088896340736

/* ---- broadcasting --------------------------------------------------------------------------------- */

/* broadcasts n nodes to one shape in place; false with an error naming op and the shapes */
static bool broadcast_n(const char *op, int n, uop **xs) {
  int nd = 0;
  for (int i = 0; i < n; i++) {
    if (!xs[i]) return false;
    if (xs[i]->ndim > nd) nd = xs[i]->ndim;
  }
  int64_t out[TG_MAX_DIMS] = {0};
  for (int d = 0; d < nd; d++) out[d] = 1;
  for (int i = 0; i < n; i++)
    for (int d = 0; d < xs[i]->ndim; d++) {
      int od = d + nd - xs[i]->ndim;
      int64_t s = xs[i]->shape[d];
      if (s == out[od] || s == 1) continue;
      if (out[od] == 1) { out[od] = s; continue; }
      char a[256], b[256];
      tg_set_error(TG_ERR_ARG, "%s: cannot broadcast shapes %s and %s", op,
                   shape_str(a, sizeof a, xs[0]->ndim, xs[0]->shape), shape_str(b, sizeof b, xs[i]->ndim, xs[i]->shape));
      return false;
    }
  if (!shape_check(op, nd, out)) return false;  /* (2^40, 1) and (1, 2^40) broadcast past 2^60 elements */
  for (int i = 0; i < n; i++) {
    int64_t r[TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
      int sd = d - (nd - xs[i]->ndim);
      r[d] = sd >= 0 ? xs[i]->shape[sd] : 1;
    }
    xs[i] = mk_expand(mk_reshape(xs[i], nd, r), nd, out);
    if (!xs[i]) return false;
  }
  return true;
}

bool broadcast_pair(const char *op, uop **a, uop **b) {
  uop *xs[2] = {*a, *b};
  if (!broadcast_n(op, 2, xs)) return false;
  tg_dtype dt = dtype_promote((tg_dtype)xs[0]->dtype, (tg_dtype)xs[1]->dtype);
  *a = mk_cast(xs[0], dt);
  *b = mk_cast(xs[1], dt);
  return *a && *b;
}

static tg_dtype float_of(tg_dtype dt) { return dtype_is_float(dt) ? dt : TG_FLOAT32; }

/* ---- node helpers: the composite ops below are written with these ---------------------------------- */

static uop *addc(uop *x, double v) { return mk_binary(OP_ADD, x, mk_const_like(x, v)); }
static uop *mulc(uop *x, double v) { return mk_binary(OP_MUL, x, mk_const_like(x, v)); }
static uop *neg(uop *x) { return x && x->dtype == TG_BOOL ? mk_binary(OP_CMPEQ, x, mk_const_like(x, 0)) : mk_unary(OP_NEG, x); }
static uop *sub(uop *a, uop *b) { return mk_binary(OP_ADD, a, neg(b)); }
static uop *fdiv_(uop *a, uop *b) { return mk_binary(OP_FDIV, a, b); }
static uop *lt(uop *a, uop *b) { return mk_binary(OP_CMPLT, a, b); }
static uop *exp_(uop *x) { return mk_unary(OP_EXP2, mulc(x, LOG2E)); }
static uop *log_(uop *x) { return mulc(mk_unary(OP_LOG2, x), LN2); }
static uop *recip(uop *x) { return mk_unary(OP_RECIP, x); }
/* v, a function of x, marked so that x's gradient comes from the CUSTOM_GRAD rule kind (autograd.c) and none
 * flows through v's own nodes. The scheduler sees v alone, the plain composition (no DETACH in the way of
 * fusion decisions) */
static uop *with_grad(int kind, uop *v, uop *x) {
  if (!v || !x) return NULL;
  uop *src[2] = {v, x};
  return uop_new_shaped(OP_CUSTOM_GRAD, (tg_dtype)v->dtype, 2, src, (uop_arg){.i = kind}, 0, NULL, v->ndim, v->shape);
}
/* 1 / (1 + e^-x), with the gradient s (1 - s) of its value s: composed, the gradient of a saturated input
 * (|x| past ~88 in float32, or inf) would be 0 * inf = NaN; tinygrad gets s (1 - s) by rewriting its gradient
 * graph (x * (1 / (1 + x)) -> 1 - 1 / (1 + x)) */
static uop *sigmoid_(uop *x) { return with_grad(CG_SIGMOID, recip(addc(exp_(neg(x)), 1)), x); }
static uop *tanh_(uop *x) { return addc(mulc(sigmoid_(mulc(x, 2)), 2), -1); }
/* tinygrad's relu, (x > 0).where(x, 0): NaN gives 0, and the gradient at 0 is 0 where a MAX's splits 0.5/0.5.
 * The value is MAX(x, 0), the same (rendered x > 0 ? x : 0), which reads x once: the where read it twice, and
 * a matmul's output read twice is stored rather than fused with its relu */
static uop *relu_(uop *x) {
  if (!dtype_is_float((tg_dtype)x->dtype)) return mk_binary(OP_MAX, x, mk_const_like(x, 0));
  return with_grad(CG_RELU, mk_binary(OP_MAX, x, mk_const_like(x, 0)), x);
}
static uop *softplus_(uop *x) {  /* relu(x) + log(1 + e^-|x|): no overflow for large x; both kinks on one side */
  uop *c = lt(x, mk_const_like(x, 0));
  uop *r = mk_where(c, mk_const_like(x, 0), x);
  return mk_binary(OP_ADD, r, log_(addc(exp_(mk_where(c, x, neg(x))), 1)));
}

/* unary entry: NULL propagates; integer inputs of float math become float32 as in tinygrad */
typedef uop *(*ufn)(uop *x);
static tg_tensor *unary(tg_tensor *t, ufn f, bool to_float) {
  if (!t) return NULL;
  lib_lock();  /* once for the op rather than once for each node it interns (uop.h) */
  uop *x = t->u;
  if (to_float) x = mk_cast(x, float_of((tg_dtype)x->dtype));
  tg_tensor *r = tensor_new(f(x));
  lib_unlock();
  return r;
}

static uop *f_neg(uop *x) { return neg(x); }
static uop *f_exp(uop *x) { return exp_(x); }
static uop *f_exp2(uop *x) { return mk_unary(OP_EXP2, x); }
static uop *f_log(uop *x) { return log_(x); }
static uop *f_log2(uop *x) { return mk_unary(OP_LOG2, x); }
static uop *f_sqrt(uop *x) { return mk_unary(OP_SQRT, x); }
static uop *f_rsqrt(uop *x) { return recip(mk_unary(OP_SQRT, x)); }
static uop *f_sin(uop *x) { return mk_unary(OP_SIN, x); }
static uop *f_cos(uop *x) { return mk_unary(OP_SIN, mk_binary(OP_ADD, mk_const_like(x, M_PI / 2), neg(x))); }
static uop *f_tan(uop *x) { return fdiv_(f_sin(x), f_cos(x)); }
static uop *f_recip(uop *x) { return recip(x); }
/* floats as tinygrad's x * sign(x), sign(NaN) = 1: the gradient at 0 is 0, abs(NaN) NaN with gradient 1 */
static uop *f_abs(uop *x) {
  if (x->dtype == TG_BOOL || dtype_is_unsigned((tg_dtype)x->dtype)) return x;
  uop *zero = mk_const_like(x, 0);
  if (!dtype_is_float((tg_dtype)x->dtype)) return mk_where(lt(x, zero), neg(x), x);
  uop *s = mk_where(mk_binary(OP_CMPNE, x, zero), mk_where(lt(x, zero), mk_const_like(x, -1), mk_const_like(x, 1)), zero);
  return mk_binary(OP_MUL, x, s);
}
static uop *f_sign(uop *x) {
  if (x->dtype == TG_BOOL) return x;
  uop *s = mk_where(mk_binary(OP_CMPNE, x, mk_const_like(x, 0)), mk_where(lt(x, mk_const_like(x, 0)), mk_const_like(x, -1), mk_const_like(x, 1)), mk_const_like(x, 0));
  return dtype_is_float((tg_dtype)x->dtype) ? mk_binary(OP_ADD, s, mulc(x, 0)) : s;  /* x*0 keeps nan */
}
static uop *f_square(uop *x) { return mk_binary(OP_MUL, x, x); }
static uop *f_trunc(uop *x) { return dtype_is_float((tg_dtype)x->dtype) ? mk_unary(OP_TRUNC, x) : x; }
static uop *f_floor(uop *x) {
  if (!dtype_is_float((tg_dtype)x->dtype)) return x;
  uop *t = mk_unary(OP_TRUNC, x);
  return mk_where(lt(x, t), addc(t, -1), t);
}
static uop *f_ceil(uop *x) {
  if (!dtype_is_float((tg_dtype)x->dtype)) return x;
  uop *t = mk_unary(OP_TRUNC, x);
  return mk_where(lt(t, x), addc(t, 1), t);
}
static uop *f_relu(uop *x) { return x->dtype == TG_BOOL ? x : relu_(x); }
static uop *f_sigmoid(uop *x) { return sigmoid_(x); }
static uop *f_tanh(uop *x) { return tanh_(x); }
static uop *f_gelu(uop *x) {
  uop *inner = mulc(mk_binary(OP_ADD, x, mulc(mk_binary(OP_MUL, mk_binary(OP_MUL, x, x), x), 0.044715)), 0.7978845608028654);
  return mk_binary(OP_MUL, mulc(x, 0.5), addc(tanh_(inner), 1));
}
static uop *f_silu(uop *x) { return mk_binary(OP_MUL, x, sigmoid_(x)); }
static uop *f_softplus(uop *x) { return softplus_(x); }
/* gradients as tinygrad's relu(x) - relu(x - 6): 0 at 0, 1 at 6; NaN gives 0. Exact above 6 (the
 * difference is not: 1e8 - (1e8 - 6) is 8 in float32) */
static uop *f_relu6(uop *x) {
  if (x->dtype == TG_BOOL) return x;
  uop *six = mk_const_like(x, 6);
  return mk_where(lt(mk_const_like(x, 0), x), mk_where(lt(six, x), six, x), mk_const_like(x, 0));
}
static uop *f_hardsigmoid(uop *x) { return mulc(f_relu6(addc(x, 3)), 1.0 / 6); }
static uop *f_hardswish(uop *x) { return mk_binary(OP_MUL, x, f_hardsigmoid(x)); }
static uop *f_mish(uop *x) { return mk_binary(OP_MUL, x, tanh_(softplus_(x))); }
static uop *f_not(uop *x) { return mk_binary(OP_CMPEQ, x, mk_const_like(x, 0)); }

tg_tensor *tg_neg(tg_tensor *t) { return unary(t, f_neg, false); }
tg_tensor *tg_exp(tg_tensor *t) { return unary(t, f_exp, true); }
tg_tensor *tg_exp2(tg_tensor *t) { return unary(t, f_exp2, true); }
tg_tensor *tg_log(tg_tensor *t) { return unary(t, f_log, true); }
tg_tensor *tg_log2(tg_tensor *t) { return unary(t, f_log2, true); }
tg_tensor *tg_sqrt(tg_tensor *t) { return unary(t, f_sqrt, true); }
tg_tensor *tg_rsqrt(tg_tensor *t) { return unary(t, f_rsqrt, true); }
tg_tensor *tg_sin(tg_tensor *t) { return unary(t, f_sin, true); }
tg_tensor *tg_cos(tg_tensor *t) { return unary(t, f_cos, true); }
tg_tensor *tg_tan(tg_tensor *t) { return unary(t, f_tan, true); }
tg_tensor *tg_reciprocal(tg_tensor *t) { return unary(t, f_recip, true); }
tg_tensor *tg_abs(tg_tensor *t) { return unary(t, f_abs, false); }
tg_tensor *tg_sign(tg_tensor *t) { return unary(t, f_sign, false); }
tg_tensor *tg_square(tg_tensor *t) { return unary(t, f_square, false); }
tg_tensor *tg_trunc(tg_tensor *t) { return unary(t, f_trunc, false); }
tg_tensor *tg_floor(tg_tensor *t) { return unary(t, f_floor, false); }
tg_tensor *tg_ceil(tg_tensor *t) { return unary(t, f_ceil, false); }
tg_tensor *tg_relu(tg_tensor *t) { return unary(t, f_relu, false); }
tg_tensor *tg_sigmoid(tg_tensor *t) { return unary(t, f_sigmoid, true); }
tg_tensor *tg_tanh(tg_tensor *t) { return unary(t, f_tanh, true); }
tg_tensor *tg_gelu(tg_tensor *t) { return unary(t, f_gelu, true); }
tg_tensor *tg_silu(tg_tensor *t) { return unary(t, f_silu, true); }
tg_tensor *tg_softplus(tg_tensor *t) { return unary(t, f_softplus, true); }
tg_tensor *tg_relu6(tg_tensor *t) { return unary(t, f_relu6, false); }
tg_tensor *tg_hardswish(tg_tensor *t) { return unary(t, f_hardswish, true); }
tg_tensor *tg_hardsigmoid(tg_tensor *t) { return unary(t, f_hardsigmoid, true); }
tg_tensor *tg_mish(tg_tensor *t) { return unary(t, f_mish, true); }
tg_tensor *tg_logical_not(tg_tensor *t) { return unary(t, f_not, false); }

tg_tensor *tg_leaky_relu(tg_tensor *t, double slope) {
  if (!t) return NULL;
  uop *x = mk_cast(t->u, float_of(TDT(t)));
  return tensor_new(mk_where(lt(x, mk_const_like(x, 0)), mulc(x, slope), x));
}

tg_tensor *tg_elu(tg_tensor *t, double alpha) {
  if (!t) return NULL;
  uop *x = mk_cast(t->u, float_of(TDT(t)));
  uop *pos = lt(mk_const_like(x, 0), x);  /* e^x of min(x, 0): a large x's unused branch stays finite (no 0 * inf) */
  return tensor_new(mk_where(pos, x, mulc(addc(exp_(mk_where(pos, mk_const_like(x, 0), x)), -1), alpha)));
}

/* a bound as a constant of x's dtype: an integer dtype takes its nearest value (inf has no int32) */
static uop *bound_like(uop *x, double v) {
  tg_dtype dt = (tg_dtype)x->dtype;
  if (!dtype_is_float(dt)) v = v < dtype_min(dt) ? dtype_min(dt) : v > dtype_max(dt) ? dtype_max(dt) : v;
  return mk_const_like(x, v);
}

/* tinygrad's clamp: (x < lo).where(lo, x), then (r > hi).where(hi, r). A value at a bound gets the gradient 1,
 * NaN stays NaN, and lo > hi gives hi everywhere */
tg_tensor *tg_clamp(tg_tensor *t, double lo, double hi) {
  if (!t) return NULL;
  if (isnan(lo) && isnan(hi)) {
    tg_set_error(TG_ERR_ARG, "tg_clamp: at least one of min and max must be given (both are NaN)");
    return NULL;
  }
  lib_lock();
  uop *x = t->u;
  if (!isnan(lo)) x = mk_where(lt(x, bound_like(x, lo)), bound_like(x, lo), x);
  if (!isnan(hi) && x) x = mk_where(lt(bound_like(x, hi), x), bound_like(x, hi), x);
  tg_tensor *r = tensor_new(x);
  lib_unlock();
  return r;
}

/* ---- binary ------------------------------------------------------------------------------------------ */

typedef uop *(*bfn)(uop *a, uop *b);

static tg_tensor *binary_op(const char *name, tg_tensor *ta, tg_tensor *tb, bfn f, bool to_float, bool int_only) {
  if (!ta || !tb) return NULL;
  uop *a = ta->u, *b = tb->u;
  if (!broadcast_pair(name, &a, &b)) return NULL;
  tg_dtype dt = (tg_dtype)a->dtype;
  if (int_only && dtype_is_float(dt)) {
    tg_set_error(TG_ERR_ARG, "%s: needs integer or bool tensors, got %s", name, tg_dtype_name(dt));
    return NULL;
  }
  if (to_float && !dtype_is_float(dt)) {
    a = mk_cast(a, TG_FLOAT32);
    b = mk_cast(b, TG_FLOAT32);
  }
  return tensor_new(f(a, b));
}

static tg_tensor *binary(const char *name, tg_tensor *ta, tg_tensor *tb, bfn f, bool to_float, bool int_only) {
  lib_lock();  /* once for the op rather than once for each node it interns (uop.h) */
  tg_tensor *r = binary_op(name, ta, tb, f, to_float, int_only);
  lib_unlock();
  return r;
}

static uop *b_add(uop *a, uop *b) { return mk_binary(OP_ADD, a, b); }
static uop *b_sub(uop *a, uop *b) { return sub(a, b); }
static uop *b_mul(uop *a, uop *b) { return a->dtype == TG_BOOL ? mk_binary(OP_AND, a, b) : mk_binary(OP_MUL, a, b); }
static uop *b_div(uop *a, uop *b) { return fdiv_(a, b); }
static uop *b_idiv(uop *a, uop *b) {
  return dtype_is_float((tg_dtype)a->dtype) ? mk_unary(OP_TRUNC, fdiv_(a, b)) : mk_binary(OP_IDIV, a, b);
}
/* python modulo: the result takes the sign of b. Floats: a - b floor(a / b), except that a finite a modulo an
 * infinite b is a itself when it is 0 or of b's sign and b otherwise (python, numpy and PyTorch: -3 % inf is
 * inf), where the formula gives NaN */
static uop *b_mod(uop *a, uop *b) {
  if (dtype_is_float((tg_dtype)a->dtype)) {
    uop *r = sub(a, mk_binary(OP_MUL, b, f_floor(fdiv_(a, b))));
    uop *binf = mk_binary(OP_OR, mk_binary(OP_CMPEQ, b, mk_const_like(b, INFINITY)),
                          mk_binary(OP_CMPEQ, b, mk_const_like(b, -INFINITY)));
    uop *afin = mk_binary(OP_CMPEQ, sub(a, a), mk_const_like(a, 0));   /* a - a is 0 for finite a, NaN otherwise */
    uop *keep = mk_binary(OP_OR, mk_binary(OP_CMPEQ, a, mk_const_like(a, 0)),
                          mk_binary(OP_CMPEQ, lt(a, mk_const_like(a, 0)), lt(b, mk_const_like(b, 0))));
    return mk_where(mk_binary(OP_AND, binf, afin), mk_where(keep, a, b), r);
  }
  uop *r = mk_binary(OP_MOD, a, b);
  if (dtype_is_unsigned((tg_dtype)a->dtype)) return r;
  uop *zero = mk_const_like(r, 0);
  uop *fix = mk_binary(OP_AND, mk_binary(OP_CMPNE, r, zero), mk_binary(OP_CMPNE, lt(r, zero), lt(b, mk_const_like(b, 0))));
  return mk_where(fix, mk_binary(OP_ADD, r, b), r);
}
/* tinygrad's maximum is (a < b).where(b, a): a NaN a gives NaN, a NaN b gives a. MAX(b, a) renders as
 * b > a ? b : a, the same, and keeps MAX's gradient, which splits ties 0.5/0.5 as tinygrad's */
static uop *b_max(uop *a, uop *b) { return mk_binary(OP_MAX, b, a); }
/* -max(-a, -b) for floats as tinygrad: ties split, a NaN a gives NaN, a NaN b gives a */
static uop *b_min(uop *a, uop *b) {
  if (!dtype_is_float((tg_dtype)a->dtype)) return mk_where(lt(b, a), b, a);
  return neg(b_max(neg(a), neg(b)));
}
static uop *b_lt(uop *a, uop *b) { return lt(a, b); }
static uop *b_gt(uop *a, uop *b) { return lt(b, a); }
static uop *b_le(uop *a, uop *b) { return f_not(lt(b, a)); }
static uop *b_ge(uop *a, uop *b) { return f_not(lt(a, b)); }
static uop *b_eq(uop *a, uop *b) { return mk_binary(OP_CMPEQ, a, b); }
static uop *b_ne(uop *a, uop *b) { return mk_binary(OP_CMPNE, a, b); }
static uop *b_and(uop *a, uop *b) { return mk_binary(OP_AND, a, b); }
static uop *b_or(uop *a, uop *b) { return mk_binary(OP_OR, a, b); }
static uop *b_xor(uop *a, uop *b) { return mk_binary(OP_XOR, a, b); }

/* the value of tinygrad's pow (its xpow): |a|^b through exp2/log2; a negative base takes the sign of an odd
 * integral exponent and gives NaN for a fractional one, except -inf (|a|^b: (-inf)^0.3 = inf); x^0 = 1 for
 * every x. Its own gradient is meaningless (a where picks 1 at b = 0): pow_node gives pow's */
static uop *pow_value(uop *a, uop *b) {
  uop *zero = mk_const_like(a, 0);
  uop *r = mk_unary(OP_EXP2, mk_binary(OP_MUL, b, mk_unary(OP_LOG2, mk_where(lt(a, zero), neg(a), a))));
  uop *bint = mk_binary(OP_CMPEQ, mk_unary(OP_TRUNC, b), b);
  uop *half = mulc(b, 0.5);
  uop *odd = mk_binary(OP_CMPNE, mk_unary(OP_TRUNC, half), half);
  uop *frac = mk_where(mk_binary(OP_CMPEQ, a, mk_const_like(a, -INFINITY)), r, mk_const_like(r, NAN));
  uop *negr = mk_where(bint, mk_where(odd, neg(r), r), frac);
  r = mk_where(lt(a, zero), negr, r);
  return mk_where(mk_binary(OP_CMPEQ, b, mk_const_like(b, 0)), mk_const_like(r, 1), r);
}

/* a^b of two float nodes of one shape and dtype: the value marked CUSTOM_GRAD CG_POW, which gives a and b
 * tinygrad's gradients of POW (autograd.c) */
uop *pow_node(uop *a, uop *b) {
  uop *v = a && b ? pow_value(a, b) : NULL;
  if (!v) return NULL;
  uop *src[3] = {v, a, b};
  return uop_new_shaped(OP_CUSTOM_GRAD, (tg_dtype)v->dtype, 3, src, (uop_arg){.i = CG_POW}, 0, NULL, v->ndim, v->shape);
}

static uop *b_pow(uop *a, uop *b) {
  if (dtype_is_float((tg_dtype)a->dtype)) return pow_node(a, b);
  tg_dtype dt = (tg_dtype)a->dtype;
  uop *r = pow_value(mk_cast(a, TG_FLOAT64), mk_cast(b, TG_FLOAT64));
  uop *rounded = f_floor(addc(r, 0.5));
  return mk_cast(rounded, dt);
}

tg_tensor *tg_add(tg_tensor *a, tg_tensor *b) { return binary("tg_add", a, b, b_add, false, false); }
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b) { return binary("tg_sub", a, b, b_sub, false, false); }
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b) { return binary("tg_mul", a, b, b_mul, false, false); }
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b) { return binary("tg_div", a, b, b_div, true, false); }
tg_tensor *tg_idiv(tg_tensor *a, tg_tensor *b) { return binary("tg_idiv", a, b, b_idiv, false, false); }
tg_tensor *tg_mod(tg_tensor *a, tg_tensor *b) { return binary("tg_mod", a, b, b_mod, false, false); }
tg_tensor *tg_pow(tg_tensor *a, tg_tensor *b) { return binary("tg_pow", a, b, b_pow, false, false); }
tg_tensor *tg_maximum(tg_tensor *a, tg_tensor *b) { return binary("tg_maximum", a, b, b_max, false, false); }
tg_tensor *tg_minimum(tg_tensor *a, tg_tensor *b) { return binary("tg_minimum", a, b, b_min, false, false); }
tg_tensor *tg_lt(tg_tensor *a, tg_tensor *b) { return binary("tg_lt", a, b, b_lt, false, false); }
tg_tensor *tg_le(tg_tensor *a, tg_tensor *b) { return binary("tg_le", a, b, b_le, false, false); }
tg_tensor *tg_gt(tg_tensor *a, tg_tensor *b) { return binary("tg_gt", a, b, b_gt, false, false); }
tg_tensor *tg_ge(tg_tensor *a, tg_tensor *b) { return binary("tg_ge", a, b, b_ge, false, false); }
tg_tensor *tg_eq(tg_tensor *a, tg_tensor *b) { return binary("tg_eq", a, b, b_eq, false, false); }
tg_tensor *tg_ne(tg_tensor *a, tg_tensor *b) { return binary("tg_ne", a, b, b_ne, false, false); }
tg_tensor *tg_bitwise_and(tg_tensor *a, tg_tensor *b) { return binary("tg_bitwise_and", a, b, b_and, false, true); }
tg_tensor *tg_bitwise_or(tg_tensor *a, tg_tensor *b) { return binary("tg_bitwise_or", a, b, b_or, false, true); }
tg_tensor *tg_bitwise_xor(tg_tensor *a, tg_tensor *b) { return binary("tg_bitwise_xor", a, b, b_xor, false, true); }

tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b) {
  if (!cond || !a || !b) return NULL;
  uop *xs[3] = {mk_cast(cond->u, TG_BOOL), a->u, b->u};
  if (!broadcast_n("tg_where", 3, xs)) return NULL;
  tg_dtype dt = dtype_promote((tg_dtype)xs[1]->dtype, (tg_dtype)xs[2]->dtype);
  return tensor_new(mk_where(xs[0], mk_cast(xs[1], dt), mk_cast(xs[2], dt)));
}

static bool valid_dtype(const char *op, tg_dtype dt) {
  if ((unsigned)dt >= TG_DTYPE_COUNT) {
    tg_set_error(TG_ERR_ARG, "%s: bad dtype %d", op, (int)dt);
    return false;
  }
  return true;
}

tg_tensor *tg_cast(tg_tensor *t, tg_dtype dt) {
  if (!t || !valid_dtype("tg_cast", dt)) return NULL;
  return tensor_new(mk_cast(t->u, dt));
}

tg_tensor *tg_bitcast(tg_tensor *t, tg_dtype dt) {
  if (!t || !valid_dtype("tg_bitcast", dt)) return NULL;
  if (tg_dtype_size(dt) != tg_dtype_size(TDT(t))) return bitcast_resize(t, dt);
  if (dt == TDT(t)) return tensor_new(t->u);
  uop *x = t->u;
  return tensor_new(uop_new_shaped(OP_BITCAST, dt, 1, &x, (uop_arg){0}, 0, NULL, x->ndim, x->shape));
}

/* ---- scalar right-hand sides ------------------------------------------------------------------------- */

/* the dtype a weak scalar takes next to a tensor of dtype dt, as tinygrad's python scalars do */
tg_dtype scalar_dtype(tg_dtype dt, double v) {
  bool integral = v == trunc(v) && fabs(v) < 9.2e18;
  if (dtype_is_float(dt)) return dt;
  if (!integral) return TG_FLOAT32;
  return dt == TG_BOOL ? TG_INT32 : dt;
}

static tg_tensor *with_scalar(tg_tensor *a, double v, tg_tensor *(*f)(tg_tensor *, tg_tensor *)) {
  if (!a) return NULL;
  lib_lock();  /* once for the op, its scalar and its nodes (uop.h) */
  tg_tensor *s = tensor_new(uop_const(scalar_dtype(TDT(a), v), v));
  tg_tensor *r = s ? f(a, s) : NULL;
  tg_free(s);
  lib_unlock();
  return r;
}

tg_tensor *tg_add_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_add); }
tg_tensor *tg_sub_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_sub); }
tg_tensor *tg_mul_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_mul); }
tg_tensor *tg_div_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_div); }
tg_tensor *tg_maximum_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_maximum); }
tg_tensor *tg_minimum_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_minimum); }

tg_tensor *tg_pow_scalar(tg_tensor *a, double v) {
  if (!a) return NULL;
  if (v < 0 && !dtype_is_float(scalar_dtype(TDT(a), v))) {  /* tinygrad: "base needs to be float" */
    tg_set_error(TG_ERR_ARG, "tg_pow_scalar: %s tensor ** %g: a negative integer power needs a float base", tg_dtype_name(TDT(a)), v);
    return NULL;
  }
  uop *x = a->u;
  if (v == 1) return tensor_new(x);
  if (v == 2 || v == 3) {
    uop *r = mk_binary(OP_MUL, x, x);
    return tensor_new(v == 3 ? mk_binary(OP_MUL, r, x) : r);
  }
  if (dtype_is_float(TDT(a)) && v == 0.5) return tensor_new(mk_unary(OP_SQRT, x));
  if (dtype_is_float(TDT(a)) && v == -1) return tensor_new(recip(x));
  return with_scalar(a, v, tg_pow);
}
