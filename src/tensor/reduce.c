/* reduce.c — reductions (sum, prod, max, min, mean, var, std, argmax, argmin), softmax and friends, and
 * matmul as a broadcasted multiply followed by a sum, so it lands in one kernel with its epilogue. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

/* there is no MIN reduce in the IR: min is built from max (min_r); reduce_op takes this marker for it */
#define REDUCE_MIN OP_CMPLT

tg_dtype sum_acc_dtype(tg_dtype dt) {
  switch (dt) {
    case TG_BOOL: case TG_INT8: case TG_INT16: return TG_INT32;
    case TG_UINT8: case TG_UINT16: return TG_UINT32;
    case TG_FLOAT16: case TG_BFLOAT16: return TG_FLOAT32;  /* accumulated in float32, cast back after */
    default: return dt;
  }
}

/* the reduced axes as flags; false with an error naming op */
static bool axes_flags(const char *op, const uop *x, int naxes, const int *axes, bool *flags) {
  for (int i = 0; i < x->ndim; i++) flags[i] = naxes == 0 || !axes;
  if (naxes < 0) {
    tg_set_error(TG_ERR_ARG, "%s: %d axes", op, naxes);
    return false;
  }
  for (int i = 0; i < naxes && axes; i++) {
    int a = norm_axis_scalar(op, axes[i], x->ndim);
    if (a < 0) return false;
    flags[a] = true;
  }
  return true;
}

/* drops the reduced axes when keepdim is false */
static uop *finish(uop *r, const bool *flags, bool keepdim) {
  if (!r || keepdim) return r;
  int64_t s[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < r->ndim; i++)
    if (!flags[i]) s[n++] = r->shape[i];
  return mk_reshape(r, n, s);
}

static uop *neg(uop *x) { return x ? mk_alu(OP_NEG, (tg_dtype)x->dtype, 1, &x) : NULL; }

/* max keeping dims; min through the max of the negation (complement for unsigned, not for bool) */
static uop *max_r(uop *x, const bool *f) { return mk_reduce(x, OP_MAX, f); }
static uop *min_r(uop *x, const bool *f) {
  tg_dtype dt = (tg_dtype)x->dtype;
  if (dt == TG_BOOL) {
    uop *nx = mk_binary(OP_CMPEQ, x, mk_const_like(x, 0));
    uop *m = max_r(nx, f);
    return mk_binary(OP_CMPEQ, m, mk_const_like(m, 0));
  }
  /* integers: ~x (x ^ all ones) reverses the order without overflow; -x of INT_MIN is undefined in C, and gcc
   * 12 -O2 (4-lane vectors) then dropped lanes of an int32 min */
  if (dtype_is_int(dt)) {
    double ones = dtype_is_unsigned(dt) ? dtype_max(dt) : -1;
    uop *m = max_r(mk_binary(OP_XOR, x, mk_const_like(x, ones)), f);
    return mk_binary(OP_XOR, m, mk_const_like(m, ones));
  }
  return neg(max_r(neg(x), f));
}

tg_tensor *reduce_op(const char *name, tg_tensor *t, uop_op op, int naxes, const int *axes, bool keepdim) {
  if (!t) return NULL;
  bool f[TG_MAX_DIMS];
  if (!axes_flags(name, t->u, naxes, axes, f)) return NULL;
  uop *x = t->u, *r;
  if (op == OP_MUL) r = mk_reduce(x, op, f);  /* prod keeps the dtype, as tinygrad's */
  else if (op == OP_ADD) {
    tg_dtype acc = sum_acc_dtype(TDT(t));
    r = mk_reduce(mk_cast(x, acc), op, f);
    if (dtype_is_float(TDT(t))) r = mk_cast(r, TDT(t));
  } else if (op == OP_MAX) r = max_r(x, f);
  else r = min_r(x, f);
  return tensor_new(finish(r, f, keepdim));
}

tg_tensor *tg_sum(tg_tensor *t, int n, const int *axes, bool keepdim) { return reduce_op("tg_sum", t, OP_ADD, n, axes, keepdim); }
tg_tensor *tg_prod(tg_tensor *t, int n, const int *axes, bool keepdim) { return reduce_op("tg_prod", t, OP_MUL, n, axes, keepdim); }
tg_tensor *tg_max(tg_tensor *t, int n, const int *axes, bool keepdim) { return reduce_op("tg_max", t, OP_MAX, n, axes, keepdim); }
tg_tensor *tg_min(tg_tensor *t, int n, const int *axes, bool keepdim) { return reduce_op("tg_min", t, REDUCE_MIN, n, axes, keepdim); }

static int64_t reduced_count(const uop *x, const bool *f) {
  int64_t n = 1;
  for (int i = 0; i < x->ndim; i++)
    if (f[i]) n *= x->shape[i];
  return n;
}

static uop *mean_keep(uop *x, const bool *f) {  /* x is float */
  uop *s = mk_reduce(x, OP_ADD, f);
  int64_t n = reduced_count(x, f);
  return mk_binary(OP_MUL, s, mk_const_like(s, n ? 1.0 / (double)n : NAN));
}

static tg_dtype float_of(tg_dtype dt) { return dtype_is_float(dt) ? dt : TG_FLOAT32; }

tg_tensor *tg_mean(tg_tensor *t, int naxes, const int *axes, bool keepdim) {
  if (!t) return NULL;
  bool f[TG_MAX_DIMS];
  if (!axes_flags("tg_mean", t->u, naxes, axes, f)) return NULL;
  return tensor_new(finish(mean_keep(mk_cast(t->u, float_of(TDT(t))), f), f, keepdim));
}

static uop *var_keep(uop *x, const bool *f, double correction) {
  uop *m = mean_keep(x, f);
  uop *d = mk_binary(OP_ADD, x, neg(mk_expand(m, x->ndim, x->shape)));
  uop *s = mk_reduce(mk_binary(OP_MUL, d, d), OP_ADD, f);
  double n = (double)reduced_count(x, f) - correction;  /* as tinygrad: s / max(n, 0), inf (or NaN for 0 / 0) */
  return mk_binary(OP_MUL, s, mk_const_like(s, n > 0 ? 1.0 / n : INFINITY));
}

tg_tensor *tg_var(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction) {
  if (!t) return NULL;
  bool f[TG_MAX_DIMS];
  if (!axes_flags("tg_var", t->u, naxes, axes, f)) return NULL;
  return tensor_new(finish(var_keep(mk_cast(t->u, float_of(TDT(t))), f, correction), f, keepdim));
}

tg_tensor *tg_std(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction) {
  if (!t) return NULL;
  bool f[TG_MAX_DIMS];
  if (!axes_flags("tg_std", t->u, naxes, axes, f)) return NULL;
  uop *v = var_keep(mk_cast(t->u, float_of(TDT(t))), f, correction);
  return tensor_new(finish(v ? mk_alu(OP_SQRT, (tg_dtype)v->dtype, 1, &v) : NULL, f, keepdim));
}

/* argmax as tinygrad: the largest of (x == max) * (n - i) over the axis gives n - (first index of max) */
static tg_tensor *arg_extreme(const char *name, tg_tensor *t, int axis, bool keepdim, bool is_min) {
  if (!t) return NULL;
  uop *x = t->u;
  if (axis == TG_ALL) {
    int64_t n = uop_numel(x);
    x = mk_reshape(x, 1, &n);
    axis = 0;
    keepdim = false;
  }
  int a = norm_axis_scalar(name, axis, x->ndim);
  if (a < 0) return NULL;
  bool f[TG_MAX_DIMS] = {0};
  f[a] = true;
  int64_t n = x->ndim ? x->shape[a] : 1;
  if (x->ndim == 0) {
    int64_t one = 1;
    x = mk_reshape(x, 1, &one);
  }
  uop *ext = is_min ? min_r(x, f) : max_r(x, f);
  uop *is_ext = mk_binary(OP_CMPEQ, x, mk_expand(ext, x->ndim, x->shape));
  /* n - i along the axis, broadcast: built from an arange-like descending buffer */
  tg_tensor *desc = tg_arange(TG_INT32, (double)n, 0, -1);
  if (!desc) return NULL;
  int64_t s[TG_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) s[i] = i == a ? n : 1;
  uop *idx = mk_expand(mk_reshape(desc->u, x->ndim, s), x->ndim, x->shape);
  tg_free(desc);
  uop *zero = mk_const(TG_INT32, 0, x->ndim, x->shape);
  uop *sel[3] = {is_ext, idx, zero};
  uop *m = max_r(mk_alu(OP_WHERE, TG_INT32, 3, sel), f);
  uop *r = mk_binary(OP_ADD, mk_const_like(m, (double)n), neg(m));
  if (t->u->ndim == 0) return tensor_new(mk_reshape(r, 0, NULL));
  return tensor_new(finish(r, f, keepdim));
}

tg_tensor *tg_argmax(tg_tensor *t, int axis, bool keepdim) { return arg_extreme("tg_argmax", t, axis, keepdim, false); }
tg_tensor *tg_argmin(tg_tensor *t, int axis, bool keepdim) { return arg_extreme("tg_argmin", t, axis, keepdim, true); }

/* ---- softmax family ------------------------------------------------------------------------------- */

#define LN2 0.69314718055994530942
#define LOG2E 1.44269504088896340736

typedef struct smx { uop *x, *shifted, *sumexp; bool f[TG_MAX_DIMS]; } smx;

/* x - max(x) and sum(exp(x - max(x))) over one axis, with dims kept */
static bool softmax_parts(const char *op, tg_tensor *t, int axis, smx *p) {
  p->x = mk_cast(t->u, float_of(TDT(t)));
  int a = norm_axis_scalar(op, axis, p->x->ndim);
  if (a < 0) return false;
  for (int i = 0; i < TG_MAX_DIMS; i++) p->f[i] = i == a;
  uop *m = max_r(p->x, p->f);
  p->shifted = mk_binary(OP_ADD, p->x, neg(mk_expand(m, p->x->ndim, p->x->shape)));
  uop *scaled = mk_binary(OP_MUL, p->shifted, mk_const_like(p->shifted, LOG2E));
  uop *e = scaled ? mk_alu(OP_EXP2, (tg_dtype)scaled->dtype, 1, &scaled) : NULL;
  p->sumexp = mk_reduce(e, OP_ADD, p->f);
  return p->sumexp != NULL;
}

static uop *log_(uop *x) {
  uop *l = x ? mk_alu(OP_LOG2, (tg_dtype)x->dtype, 1, &x) : NULL;
  return mk_binary(OP_MUL, l, mk_const_like(l, LN2));
}

tg_tensor *tg_softmax(tg_tensor *t, int axis) {
  if (!t) return NULL;
  smx p;
  if (!softmax_parts("tg_softmax", t, axis, &p)) return NULL;
  uop *scaled = mk_binary(OP_MUL, p.shifted, mk_const_like(p.shifted, LOG2E));
  uop *e = mk_alu(OP_EXP2, (tg_dtype)scaled->dtype, 1, &scaled);
  uop *inv = mk_alu(OP_RECIP, (tg_dtype)p.sumexp->dtype, 1, &p.sumexp);
  return tensor_new(mk_binary(OP_MUL, e, mk_expand(inv, p.x->ndim, p.x->shape)));
}

tg_tensor *tg_log_softmax(tg_tensor *t, int axis) {
  if (!t) return NULL;
  smx p;
  if (!softmax_parts("tg_log_softmax", t, axis, &p)) return NULL;
  return tensor_new(mk_binary(OP_ADD, p.shifted, neg(mk_expand(log_(p.sumexp), p.x->ndim, p.x->shape))));
}

/* one axis, or TG_ALL: the several-axes form (stats.c) */
tg_tensor *tg_logsumexp(tg_tensor *t, int axis, bool keepdim) {
  return tg_logsumexp_axes(t, axis == TG_ALL ? 0 : 1, &axis, keepdim);
}

/* ---- matmul ------------------------------------------------------------------------------------------ */

/* numpy matmul: (..., n, k) @ (..., k, m) as (..., n, 1, k) * (..., 1, m, k) summed over k */
tg_tensor *tg_matmul(tg_tensor *ta, tg_tensor *tb) {
  if (!ta || !tb) return NULL;
  uop *a = ta->u, *b = tb->u;
  char sa[256], sb[256];
  if (a->ndim == 0 || b->ndim == 0) {
    tg_set_error(TG_ERR_ARG, "tg_matmul: both operands need at least 1 dimension, got shapes %s and %s",
                 shape_str(sa, sizeof sa, a->ndim, a->shape), shape_str(sb, sizeof sb, b->ndim, b->shape));
    return NULL;
  }
  int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim >= 2 ? b->ndim - 2 : 0];
  if (ka != kb) {
    tg_set_error(TG_ERR_ARG, "tg_matmul: shapes %s and %s do not align: %lld (last axis of the first) != %lld",
                 shape_str(sa, sizeof sa, a->ndim, a->shape), shape_str(sb, sizeof sb, b->ndim, b->shape),
                 (long long)ka, (long long)kb);
    return NULL;
  }
  bool a1 = a->ndim == 1, b1 = b->ndim == 1;
  if (a1) a = mk_reshape(a, 2, (int64_t[]){1, ka});
  if (b1) b = mk_reshape(b, 2, (int64_t[]){kb, 1});
  if (!a || !b) return NULL;  /* out of memory, the error set */
  if (a->ndim + 1 > TG_MAX_DIMS || b->ndim + 1 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_matmul: too many dimensions");
    return NULL;
  }
  /* a: (..., n, k) -> (..., n, 1, k); b: (..., k, m) -> (..., 1, m, k) */
  int64_t s[TG_MAX_DIMS];
  int na = a->ndim;
  for (int i = 0; i < na - 1; i++) s[i] = a->shape[i];
  s[na - 1] = 1;
  s[na] = ka;
  uop *a3 = mk_reshape(a, na + 1, s);
  int nb = b->ndim, o[TG_MAX_DIMS];
  for (int i = 0; i < nb; i++) o[i] = i;
  o[nb - 2] = nb - 1;
  o[nb - 1] = nb - 2;
  uop *bt = mk_permute(b, o);
  if (!a3 || !bt) return NULL;
  for (int i = 0; i < nb - 2; i++) s[i] = bt->shape[i];
  s[nb - 2] = 1;
  s[nb - 1] = bt->shape[nb - 2];
  s[nb] = bt->shape[nb - 1];
  uop *b3 = mk_reshape(bt, nb + 1, s);
  uop *pa = a3, *pb = b3;
  if (!b3) return NULL;
  if (!broadcast_pair("tg_matmul", &pa, &pb)) {
    if (!strstr(tg_error(), "cannot broadcast")) return NULL;  /* its own message: too large, out of memory */
    tg_set_error(TG_ERR_ARG, "tg_matmul: batch dimensions of shapes %s and %s do not broadcast",
                 shape_str(sa, sizeof sa, ta->u->ndim, ta->u->shape), shape_str(sb, sizeof sb, tb->u->ndim, tb->u->shape));
    return NULL;
  }
  tg_dtype acc = sum_acc_dtype((tg_dtype)pa->dtype);
  uop *prod = mk_binary(pa->dtype == TG_BOOL ? OP_AND : OP_MUL, pa, pb);
  bool f[TG_MAX_DIMS] = {0};
  f[pa->ndim - 1] = true;
  uop *r = mk_reduce(mk_cast(prod, acc), OP_ADD, f);
  if (dtype_is_float((tg_dtype)pa->dtype)) r = mk_cast(r, (tg_dtype)pa->dtype);
  if (!r) return NULL;
  /* drop k, then the axes that were added for 1-d operands */
  int64_t out[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < r->ndim - 1; i++) {
    if (a1 && i == r->ndim - 3) continue;
    if (b1 && i == r->ndim - 2) continue;
    out[n++] = r->shape[i];
  }
  return tensor_new(mk_reshape(r, n, out));
}

tg_tensor *tg_dot(tg_tensor *a, tg_tensor *b) { return tg_matmul(a, b); }
