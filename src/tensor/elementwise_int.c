/* elementwise_int.c — division with a rounding mode (python's //, tinygrad's div(rounding_mode=)), C's fmod,
 * shifts and bitwise not, and the scalar forms of tinygrad's operators: t op v and the reflected v op t
 * (python's 2 - x, 2 ** x, 2 % x), each with the scalar weak as in tinygrad (elementwise.h).
 *
 * Integer division never traps: a zero divisor gives 0 (the renderer's guard), and MIN / -1, which faults
 * on x86 (SIGFPE), is computed as -MIN (wrapping to MIN) with remainder 0. Integer results are exact.
 */
#include <math.h>

#include "tensor/elementwise.h"

/* ---- node helpers ----------------------------------------------------------------------------------------- */

/* NULL in, NULL out: a node that failed to build (out of memory) propagates to the op's result */
static uop *cf(uop *x, double v) { return x ? mk_const_like(x, v) : NULL; }
/* an integer constant of x's dtype and shape, wrapped as the dtype wraps (-1 is all ones in any width) */
static uop *ci(uop *x, int64_t v) {
  if (!x) return NULL;
  uop *c = uop_const_int((tg_dtype)x->dtype, v);
  if (!c || x->ndim == 0) return c;
  int64_t ones[TG_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) ones[i] = 1;
  return mk_expand(mk_reshape(c, x->ndim, ones), x->ndim, x->shape);
}
static uop *lt(uop *a, uop *b) { return mk_binary(OP_CMPLT, a, b); }
static uop *ne(uop *a, uop *b) { return mk_binary(OP_CMPNE, a, b); }
static uop *eq(uop *a, uop *b) { return mk_binary(OP_CMPEQ, a, b); }
static uop *where(uop *c, uop *a, uop *b) { return mk_where(c, a, b); }
static uop *neg(uop *x) { return mk_unary(OP_NEG, x); }
static uop *trunc_(uop *x) { return mk_unary(OP_TRUNC, x); }
static uop *floor_(uop *x) {
  uop *t = trunc_(x);
  return where(lt(x, t), mk_binary(OP_ADD, t, cf(t, -1)), t);
}
static bool is_signed(uop *x) { return !dtype_is_unsigned((tg_dtype)x->dtype); }

/* C's a / b (toward zero) and a % b (the sign of a) on integers, without MIN / -1 */
static uop *cdiv(uop *a, uop *b) {
  if (!is_signed(a)) return mk_binary(OP_IDIV, a, b);
  uop *m1 = eq(b, ci(b, -1));
  return where(m1, neg(a), mk_binary(OP_IDIV, a, where(m1, ci(b, 1), b)));
}
static uop *cmod(uop *a, uop *b) {
  if (!is_signed(a)) return mk_binary(OP_MOD, a, b);
  uop *m1 = eq(b, ci(b, -1));
  return where(m1, ci(a, 0), mk_binary(OP_MOD, a, where(m1, ci(b, 1), b)));
}
/* python's a // b on integers: C's quotient, one less when the remainder is not 0 and a, b differ in sign */
static uop *floordiv_int(uop *a, uop *b) {
  uop *q = cdiv(a, b);
  if (!is_signed(a)) return q;
  uop *r = cmod(a, b), *zero = ci(a, 0);
  uop *fix = mk_binary(OP_AND, ne(r, zero), ne(lt(r, zero), lt(b, zero)));
  return where(fix, mk_binary(OP_ADD, q, ci(q, -1)), q);
}

/* ---- division with a rounding mode, fmod ------------------------------------------------------------------- */

typedef uop *(*bfn)(uop *a, uop *b);

/* broadcasts and promotes; int_only: integer tensors only (bool too when bool_ok); bool_to_float: bool
 * operands become float32 (tinygrad's division treats bool as not integer) */
static tg_tensor *binary(const char *name, tg_tensor *ta, tg_tensor *tb, bfn f, bool int_only, bool bool_ok) {
  if (!ta || !tb) return NULL;
  lib_lock();
  uop *a = ta->u, *b = tb->u;
  tg_tensor *r = NULL;
  if (broadcast_pair(name, &a, &b)) {
    tg_dtype dt = (tg_dtype)a->dtype;
    if (int_only && (dtype_is_float(dt) || (dt == TG_BOOL && !bool_ok)))
      tg_set_error(TG_ERR_ARG, "%s: needs integer tensors, got %s and %s", name, tg_dtype_name(TDT(ta)),
                   tg_dtype_name(TDT(tb)));
    else
      r = tensor_new(f(a, b));
  }
  lib_unlock();
  return r;
}

static uop *to_f32(uop *x) { return mk_cast(x, TG_FLOAT32); }
static uop *b_div_trunc(uop *a, uop *b) {
  if (dtype_is_int((tg_dtype)a->dtype)) return cdiv(a, b);
  if (a->dtype == TG_BOOL) a = to_f32(a), b = to_f32(b);
  return trunc_(mk_binary(OP_FDIV, a, b));
}
static uop *b_div_floor(uop *a, uop *b) {
  if (dtype_is_int((tg_dtype)a->dtype)) return floordiv_int(a, b);
  if (a->dtype == TG_BOOL) a = to_f32(a), b = to_f32(b);
  return floor_(mk_binary(OP_FDIV, a, b));
}
/* C's fmod: a - trunc(a / b) * b, the sign of a; a finite a over an infinite b is a (as C and PyTorch;
 * tinygrad's formula gives NaN there) */
static uop *b_fmod(uop *a, uop *b) {
  if (dtype_is_int((tg_dtype)a->dtype)) return cmod(a, b);
  if (a->dtype == TG_BOOL) a = to_f32(a), b = to_f32(b);
  uop *r = mk_binary(OP_ADD, a, neg(mk_binary(OP_MUL, trunc_(mk_binary(OP_FDIV, a, b)), b)));
  uop *binf = mk_binary(OP_OR, eq(b, cf(b, INFINITY)), eq(b, cf(b, -INFINITY)));
  uop *afin = eq(mk_binary(OP_ADD, a, neg(a)), cf(a, 0));  /* a - a is 0 for finite a, NaN otherwise */
  return where(mk_binary(OP_AND, binf, afin), a, r);
}

tg_tensor *tg_div_mode(tg_tensor *a, tg_tensor *b, tg_rounding_mode mode) {
  switch (mode) {
    case TG_ROUND_NONE: return tg_div(a, b);
    case TG_ROUND_TRUNC: return binary("tg_div_mode", a, b, b_div_trunc, false, true);
    case TG_ROUND_FLOOR: return binary("tg_div_mode", a, b, b_div_floor, false, true);
  }
  if (!a || !b) return NULL;
  tg_set_error(TG_ERR_ARG, "tg_div_mode: rounding mode %d is none of TG_ROUND_NONE, _TRUNC, _FLOOR", (int)mode);
  return NULL;
}

tg_tensor *tg_floordiv(tg_tensor *a, tg_tensor *b) { return binary("tg_floordiv", a, b, b_div_floor, false, true); }
tg_tensor *tg_fmod(tg_tensor *a, tg_tensor *b) { return binary("tg_fmod", a, b, b_fmod, false, true); }

/* ---- shifts and bitwise not ---------------------------------------------------------------------------------- */

/* a shift by a negative amount or by the width of the dtype or more is not left to C (undefined there):
 * it gives 0, or for a right shift of a negative value -1 (every bit shifted out, as PyTorch) */
static uop *shift(uop *a, uop *b, bool left) {
  int bits = (int)tg_dtype_size((tg_dtype)a->dtype) * 8;
  uop *negb = lt(b, ci(b, 0)), *ok = mk_binary(OP_AND, eq(negb, ci(negb, 0)), lt(b, ci(b, bits)));
  uop *r = mk_binary(left ? OP_SHL : OP_SHR, a, where(ok, b, ci(b, 0)));
  uop *out = left || !is_signed(a) ? ci(a, 0) : where(lt(a, ci(a, 0)), ci(a, -1), ci(a, 0));
  return where(ok, r, out);
}
static uop *b_shl(uop *a, uop *b) { return shift(a, b, true); }
static uop *b_shr(uop *a, uop *b) { return shift(a, b, false); }

tg_tensor *tg_lshift(tg_tensor *a, tg_tensor *b) { return binary("tg_lshift", a, b, b_shl, true, false); }
tg_tensor *tg_rshift(tg_tensor *a, tg_tensor *b) { return binary("tg_rshift", a, b, b_shr, true, false); }

tg_tensor *tg_bitwise_not(tg_tensor *t) {
  if (!t) return NULL;
  if (dtype_is_float(TDT(t))) {
    tg_set_error(TG_ERR_ARG, "tg_bitwise_not: needs an integer or bool tensor, got %s", tg_dtype_name(TDT(t)));
    return NULL;
  }
  lib_lock();
  uop *x = t->u;
  tg_tensor *r = tensor_new(x->dtype == TG_BOOL ? eq(x, ci(x, 0)) : mk_binary(OP_XOR, x, ci(x, -1)));
  lib_unlock();
  return r;
}

/* ---- scalar forms ---------------------------------------------------------------------------------------------- */

typedef tg_tensor *(*tfn)(tg_tensor *a, tg_tensor *b);

/* f(a, v), or f(v, a) when reflected, with v a weak scalar */
static tg_tensor *with_scalar(tg_tensor *a, double v, tfn f, bool reflected) {
  if (!a) return NULL;
  lib_lock();
  tg_tensor *s = tensor_new(uop_const(scalar_dtype(TDT(a), v), v));
  tg_tensor *r = s ? (reflected ? f(s, a) : f(a, s)) : NULL;
  tg_free(s);
  lib_unlock();
  return r;
}

/* the same with an integer v, kept exact in 64 bits (a bool tensor meets it as int32) */
static tg_tensor *with_int(tg_tensor *a, int64_t v, tfn f, bool reflected) {
  if (!a) return NULL;
  lib_lock();
  tg_tensor *s = tensor_new(uop_const_int(TDT(a) == TG_BOOL ? TG_INT32 : TDT(a), v));
  tg_tensor *r = s ? (reflected ? f(s, a) : f(a, s)) : NULL;
  tg_free(s);
  lib_unlock();
  return r;
}

tg_tensor *tg_rsub_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_sub, true); }
tg_tensor *tg_rdiv_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_div, true); }
tg_tensor *tg_rpow_scalar(tg_tensor *a, double v) {
  if (a && v < 0 && !dtype_is_float(scalar_dtype(TDT(a), v))) {  /* tinygrad: "base needs to be float" */
    tg_set_error(TG_ERR_ARG, "tg_rpow_scalar: %g ** a %s tensor: a negative integer base needs a float exponent", v,
                 tg_dtype_name(TDT(a)));
    return NULL;
  }
  return with_scalar(a, v, tg_pow, true);
}
tg_tensor *tg_mod_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_mod, false); }
tg_tensor *tg_rmod_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_mod, true); }
tg_tensor *tg_idiv_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_idiv, false); }
tg_tensor *tg_floordiv_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_floordiv, false); }
tg_tensor *tg_rfloordiv_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_floordiv, true); }
tg_tensor *tg_fmod_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_fmod, false); }
tg_tensor *tg_copysign_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_copysign, false); }
tg_tensor *tg_logaddexp_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_logaddexp, false); }
tg_tensor *tg_lt_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_lt, false); }
tg_tensor *tg_le_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_le, false); }
tg_tensor *tg_gt_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_gt, false); }
tg_tensor *tg_ge_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_ge, false); }
tg_tensor *tg_eq_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_eq, false); }
tg_tensor *tg_ne_scalar(tg_tensor *a, double v) { return with_scalar(a, v, tg_ne, false); }
tg_tensor *tg_bitwise_and_scalar(tg_tensor *a, int64_t v) { return with_int(a, v, tg_bitwise_and, false); }
tg_tensor *tg_bitwise_or_scalar(tg_tensor *a, int64_t v) { return with_int(a, v, tg_bitwise_or, false); }
tg_tensor *tg_bitwise_xor_scalar(tg_tensor *a, int64_t v) { return with_int(a, v, tg_bitwise_xor, false); }
tg_tensor *tg_lshift_scalar(tg_tensor *a, int64_t v) { return with_int(a, v, tg_lshift, false); }
tg_tensor *tg_rshift_scalar(tg_tensor *a, int64_t v) { return with_int(a, v, tg_rshift, false); }
tg_tensor *tg_rlshift_scalar(tg_tensor *a, int64_t v) { return with_int(a, v, tg_lshift, true); }
tg_tensor *tg_rrshift_scalar(tg_tensor *a, int64_t v) { return with_int(a, v, tg_rshift, true); }
