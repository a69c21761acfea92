/* graph.c — builders of tensor-graph nodes. Each derives the node's shape from its source and arguments;
 * the public ops (movement.c, elementwise.c, ...) check user input before calling them. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

static uop *shaped(uop_op op, tg_dtype dt, uop *src, int64_t arg, int naux, const int64_t *aux, int ndim,
                   const int64_t *shape) {
  if (!src) return NULL;
  return uop_new_shaped(op, dt, 1, &src, (uop_arg){.i = arg}, naux, aux, ndim, shape);
}

static bool same_shape(const uop *x, int ndim, const int64_t *shape) {
  if (x->ndim != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (x->shape[i] != shape[i]) return false;
  return true;
}

uop *mk_reshape(uop *x, int ndim, const int64_t *shape) {
  if (!x) return NULL;
  /* a reshape of a reshape stays two nodes: the inner one may be a tensor that wants its gradient */
  if (same_shape(x, ndim, shape)) return x;
  return shaped(OP_RESHAPE, (tg_dtype)x->dtype, x, 0, ndim, shape, ndim, shape);
}

uop *mk_expand(uop *x, int ndim, const int64_t *shape) {
  if (!x) return NULL;
  if (same_shape(x, ndim, shape)) return x;
  return shaped(OP_EXPAND, (tg_dtype)x->dtype, x, 0, ndim, shape, ndim, shape);
}

uop *mk_permute(uop *x, const int *order) {
  if (!x) return NULL;
  int64_t aux[TG_MAX_DIMS], shape[TG_MAX_DIMS];
  bool ident = true;
  for (int i = 0; i < x->ndim; i++) {
    aux[i] = order[i];
    shape[i] = x->shape[order[i]];
    ident &= order[i] == i;
  }
  if (ident) return x;
  return shaped(OP_PERMUTE, (tg_dtype)x->dtype, x, 0, x->ndim, aux, x->ndim, shape);
}

uop *mk_pad(uop *x, const int64_t *pads) {
  if (!x) return NULL;
  int64_t shape[TG_MAX_DIMS];
  bool zero = true;
  for (int i = 0; i < x->ndim; i++) {
    if (!size_add(x->shape[i], pads[2 * i], &shape[i]) || !size_add(shape[i], pads[2 * i + 1], &shape[i])) {
      tg_set_error(TG_ERR_ARG, "tg_pad: padding %lld and %lld of axis %d (size %lld) is negative or makes more than "
                   "2^60 elements", (long long)pads[2 * i], (long long)pads[2 * i + 1], i, (long long)x->shape[i]);
      return NULL;
    }
    zero &= pads[2 * i] == 0 && pads[2 * i + 1] == 0;
  }
  if (zero) return x;
  return shaped(OP_PAD, (tg_dtype)x->dtype, x, 0, 2 * x->ndim, pads, x->ndim, shape);
}

uop *mk_shrink(uop *x, const int64_t *bounds) {
  if (!x) return NULL;
  int64_t shape[TG_MAX_DIMS];
  bool full = true;
  for (int i = 0; i < x->ndim; i++) {
    shape[i] = bounds[2 * i + 1] - bounds[2 * i];
    full &= bounds[2 * i] == 0 && bounds[2 * i + 1] == x->shape[i];
  }
  if (full) return x;
  return shaped(OP_SHRINK, (tg_dtype)x->dtype, x, 0, 2 * x->ndim, bounds, x->ndim, shape);
}

/* SHRINK or PAD whose offset along one axis is an int32 node (a bound variable) as well as a constant:
 * the node is the second source; aux holds the constant pairs and then that axis */
static uop *moved_at(uop_op op, uop *x, int axis, uop *off, int64_t keep) {
  if (!x || !off) return NULL;
  int64_t aux[2 * TG_MAX_DIMS + 1], shape[TG_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) {
    aux[2 * i] = 0;
    aux[2 * i + 1] = op == OP_SHRINK ? x->shape[i] : 0;
    shape[i] = x->shape[i];
  }
  if (op == OP_SHRINK) aux[2 * axis + 1] = keep;
  else aux[2 * axis + 1] = keep - x->shape[axis];
  shape[axis] = keep;
  aux[2 * x->ndim] = axis;
  return uop_new_shaped(op, (tg_dtype)x->dtype, 2, (uop *[]){x, off}, (uop_arg){0}, 2 * x->ndim + 1, aux, x->ndim,
                        shape);
}

uop *mk_shrink_at(uop *x, int axis, uop *off, int64_t len) { return moved_at(OP_SHRINK, x, axis, off, len); }
uop *mk_pad_at(uop *x, int axis, uop *off, int64_t size) { return moved_at(OP_PAD, x, axis, off, size); }

uop *mk_flip(uop *x, const bool *axes) {
  if (!x) return NULL;
  int64_t aux[TG_MAX_DIMS];
  bool any = false;
  for (int i = 0; i < x->ndim; i++) {
    aux[i] = axes[i] && x->shape[i] > 1;
    any |= aux[i] != 0;
  }
  if (!any) return x;
  return shaped(OP_FLIP, (tg_dtype)x->dtype, x, 0, x->ndim, aux, x->ndim, x->shape);
}

uop *mk_reduce(uop *x, uop_op op, const bool *axes) {
  if (!x) return NULL;
  int64_t aux[TG_MAX_DIMS], shape[TG_MAX_DIMS];
  if (uop_numel(x) == 0) {  /* as tinygrad: over nothing, the identity; x's graph (maybe huge) is not needed */
    bool any = false;
    for (int i = 0; i < x->ndim; i++) {
      shape[i] = axes[i] ? 1 : x->shape[i];
      any |= axes[i];
    }
    tg_dtype dt = (tg_dtype)x->dtype;
    double id = op == OP_ADD ? 0 : op == OP_MUL ? 1 : dtype_is_float(dt) ? -INFINITY : dt == TG_BOOL ? 0 : dtype_min(dt);
    if (any) return mk_const(dt, id, x->ndim, shape);
  }
  int reduced = 0, kept = 0;
  for (int i = 0; i < x->ndim; i++)
    if (x->shape[i] != 1) {  /* a kept axis of size 0 is kept too: (2, 0, 5) over 0 and 2 is (0,) */
      if (axes[i]) reduced++;
      else kept++;
    }
  if (reduced > 1 && kept == 0) {  /* a full reduction is one axis: the scheduler can then split it */
    int64_t n = uop_numel(x), ones[TG_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) ones[i] = 1;
    uop *flat = mk_reshape(x, 1, &n);
    uop *r = flat ? uop_new_shaped(OP_REDUCE_AXIS, (tg_dtype)x->dtype, 1, &flat, (uop_arg){.i = op}, 1,
                                   (int64_t[]){1}, 1, (int64_t[]){1}) : NULL;
    return mk_reshape(r, x->ndim, ones);
  }
  bool any = false;
  for (int i = 0; i < x->ndim; i++) {
    aux[i] = axes[i];
    shape[i] = axes[i] ? 1 : x->shape[i];
    any |= axes[i];
  }
  if (!any) return x;
  return shaped(OP_REDUCE_AXIS, (tg_dtype)x->dtype, x, op, x->ndim, aux, x->ndim, shape);
}

uop *mk_const(tg_dtype dt, double v, int ndim, const int64_t *shape) {
  uop *c = uop_const(dt, v);
  if (!c || ndim == 0) return c;
  int64_t ones[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) ones[i] = 1;
  return mk_expand(mk_reshape(c, ndim, ones), ndim, shape);
}

uop *mk_alu(uop_op op, tg_dtype dt, int nsrc, uop *const *src) {
  for (int i = 0; i < nsrc; i++)
    if (!src[i]) return NULL;
  return uop_new_shaped(op, dt, nsrc, src, (uop_arg){0}, 0, NULL, src[nsrc - 1]->ndim, src[nsrc - 1]->shape);
}

uop *mk_cast(uop *x, tg_dtype dt) {
  if (!x) return NULL;
  if (x->dtype == dt) return x;
  return shaped(OP_CAST, dt, x, 0, 0, NULL, x->ndim, x->shape);
}

static _Atomic int64_t buffer_ids;

uop *mk_buffer(tg_dtype dt, int64_t numel, void *buf) {
  int64_t shape[1] = {numel};
  lib_lock();  /* the collector reads buf */
  uop *u = uop_new_shaped(OP_BUFFER, dt, 0, NULL, (uop_arg){.i = atomic_fetch_add(&buffer_ids, 1) + 1}, 1, shape, 1, shape);
  if (u) u->buf = buf;
  lib_unlock();
  return u;
}

uop *mk_iota(tg_dtype dt, int64_t n) {
  int64_t shape[1] = {n};
  return uop_new_shaped(OP_IOTA, dt, 0, NULL, (uop_arg){0}, 1, shape, 1, shape);
}

/* ---- shorthand for the composite ops: shapes must already agree ---------------------------------------- */

uop *mk_const_like(uop *x, double v) { return x ? mk_const((tg_dtype)x->dtype, v, x->ndim, x->shape) : NULL; }
uop *mk_unary(uop_op op, uop *x) { return x ? mk_alu(op, (tg_dtype)x->dtype, 1, &x) : NULL; }

uop *mk_binary(uop_op op, uop *a, uop *b) {
  if (!a || !b) return NULL;
  uop *s[2] = {a, b};
  bool cmp = op == OP_CMPLT || op == OP_CMPNE || op == OP_CMPEQ;
  return mk_alu(op, cmp ? TG_BOOL : (tg_dtype)a->dtype, 2, s);
}

uop *mk_where(uop *c, uop *a, uop *b) {
  if (!c || !a || !b) return NULL;
  uop *s[3] = {c, a, b};
  return mk_alu(OP_WHERE, (tg_dtype)a->dtype, 3, s);
}
