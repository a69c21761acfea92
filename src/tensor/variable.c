/* variable.c — symbolic integers bound at run time (tinygrad's Variable).
 *
 * A variable is an int32 held in a one-element buffer. Kernels load it (clamped to the variable's bounds,
 * so the index simplifier knows its range and no value can address memory outside the tensor) instead of
 * baking it in as a constant: binding a new value changes what the next realize or JIT replay computes
 * and compiles nothing. A variable enters graphs as a 0-d tensor (masks, positions: a KV cache's "how far")
 * and as the offset of a window along one axis (tg_shrink_at reads t[pos:pos+len], tg_pad_at places a
 * tensor at pos): indices, not shapes, since every shape stays static and every kernel keeps its loops.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "tensor/tensor.h"

struct tg_variable {
  char name[32];
  int64_t min, max, value;
  tg_tensor *store;   /* int32 (1,): the bound value */
};

tg_variable *tg_variable_new(const char *name, int64_t min, int64_t max) {
  if (!name || min > max || min < INT32_MIN || max > INT32_MAX) {
    tg_set_error(TG_ERR_ARG, "tg_variable_new: %s", !name ? "name is NULL"
                 : min > max ? "min is above max" : "bounds outside the int32 range");
    return NULL;
  }
  tg_variable *v = mem_calloc(1, sizeof *v);
  int32_t init = (int32_t)min;
  if (!v || !(v->store = tensor_unscope(tg_from_data(TG_INT32, 1, (int64_t[]){1}, &init, sizeof init))) ||
      tg_realize(v->store) != TG_OK) {
    if (v) tg_free(v->store);
    free(v);
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "tg_variable_new: out of memory");
    return NULL;
  }
  snprintf(v->name, sizeof v->name, "%s", name);
  v->min = min;
  v->max = max;
  v->value = min;
  return v;
}

void tg_variable_free(tg_variable *v) {
  if (!v) return;
  tg_free(v->store);
  free(v);
}

tg_status tg_variable_bind(tg_variable *v, int64_t value) {
  if (!v) {
    tg_set_error(TG_ERR_ARG, "tg_variable_bind: the variable is NULL");
    return TG_ERR_ARG;
  }
  if (value < v->min || value > v->max) {
    tg_set_error(TG_ERR_ARG, "tg_variable_bind: %s = %lld is outside its bounds [%lld, %lld]", v->name, (long long)value,
                 (long long)v->min, (long long)v->max);
    return TG_ERR_ARG;
  }
  if (engine_capturing()) {
    tg_set_error(TG_ERR_ARG, "tg_variable_bind: %s: a JIT step is being captured; bind variables before tg_jit_call (a "
                 "bind inside the step would not be replayed)", v->name);
    return TG_ERR_ARG;
  }
  int32_t x = (int32_t)value;
  tg_status st = tensor_write(v->store, &x, sizeof x);
  if (st == TG_OK) v->value = value;
  return st;
}

int64_t tg_variable_value(const tg_variable *v) { return v ? v->value : 0; }
const char *tg_variable_name(const tg_variable *v) { return v ? v->name : ""; }

/* the value as a 0-d int32 node: the load clamped to [min, max] */
static uop *var_node(tg_variable *v) {
  uop *x = mk_reshape(v->store->u, 0, NULL);
  if (!x) return NULL;
  uop *hi = mk_unary(OP_NEG, mk_binary(OP_MAX, mk_unary(OP_NEG, x), mk_const_like(x, (double)-v->max)));
  return mk_binary(OP_MAX, hi, mk_const_like(x, (double)v->min));
}

tg_tensor *tg_variable_tensor(tg_variable *v) {
  if (!v) {
    tg_set_error(TG_ERR_ARG, "tg_variable_tensor: the variable is NULL");
    return NULL;
  }
  return tensor_new(var_node(v));
}

/* checks shared by tg_shrink_at and tg_pad_at; the normalized axis or -1 */
static int check_window(const char *op, tg_tensor *t, int axis, tg_variable *v) {
  if (!t || !v) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, !t ? "the tensor" : "the variable");
    return -1;
  }
  int a = norm_axis(op, axis, TNDIM(t));
  if (a >= 0 && v->min < 0) {
    tg_set_error(TG_ERR_ARG, "%s: variable %s may be negative (bounds [%lld, %lld])", op, v->name, (long long)v->min,
                 (long long)v->max);
    return -1;
  }
  return a;
}

tg_tensor *tg_shrink_at(tg_tensor *t, int axis, tg_variable *start, int64_t len) {
  int a = check_window("tg_shrink_at", t, axis, start);
  if (a < 0) return NULL;
  if (len < 0 || len > TSHAPE(t)[a] - start->max) {  /* max <= INT32_MAX: no overflow */
    char b[256];
    tg_set_error(TG_ERR_ARG, "tg_shrink_at: a window of %lld from %s (up to %lld) does not fit axis %d of %s",
                 (long long)len, start->name, (long long)start->max, a, shape_str(b, sizeof b, TNDIM(t), TSHAPE(t)));
    return NULL;
  }
  return tensor_new(mk_shrink_at(t->u, a, var_node(start), len));
}

tg_tensor *tg_pad_at(tg_tensor *t, int axis, tg_variable *start, int64_t size) {
  int a = check_window("tg_pad_at", t, axis, start);
  if (a < 0) return NULL;
  if (start->max + TSHAPE(t)[a] > size) {
    char b[256];
    tg_set_error(TG_ERR_ARG, "tg_pad_at: %s placed from %s (up to %lld) does not fit in %lld along axis %d",
                 shape_str(b, sizeof b, TNDIM(t), TSHAPE(t)), start->name, (long long)start->max, (long long)size, a);
    return NULL;
  }
  return tensor_new(mk_pad_at(t->u, a, var_node(start), size));
}

tg_status tg_assign_at(tg_tensor *dst, int axis, tg_variable *start, tg_tensor *src) {
  int a = check_window("tg_assign_at", dst, axis, start);
  if (a < 0) return tg_error_status();
  if (!src) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_assign_at: src is NULL");
    return tg_error_status();
  }
  bool fits = TNDIM(src) == TNDIM(dst) && TDT(src) == TDT(dst) && start->max + TSHAPE(src)[a] <= TSHAPE(dst)[a];
  for (int i = 0; i < TNDIM(dst) && fits; i++) fits = i == a || TSHAPE(src)[i] == TSHAPE(dst)[i];
  if (!fits) {
    char b1[256], b2[256];
    tg_set_error(TG_ERR_ARG, "tg_assign_at: a %s %s does not fit in %s %s along axis %d from %s (up to %lld)",
                 tg_dtype_name(TDT(src)), shape_str(b1, sizeof b1, TNDIM(src), TSHAPE(src)), tg_dtype_name(TDT(dst)),
                 shape_str(b2, sizeof b2, TNDIM(dst), TSHAPE(dst)), a, start->name, (long long)start->max);
    return TG_ERR_ARG;
  }
  /* the value: src in the window, dst elsewhere; realized as a kernel over the window (schedule.h) */
  uop *off = var_node(start);
  int64_t ext = TSHAPE(dst)[a];
  uop *inside = mk_pad_at(mk_const(TG_BOOL, 1, TNDIM(src), TSHAPE(src)), a, off, ext);
  uop *placed = mk_pad_at(src->u, a, off, ext);
  tg_tensor *v = tensor_new(mk_where(inside, placed, dst->u));
  tg_status st = v ? tg_assign(dst, v) : tg_error_status();
  tg_free(v);
  return st;
}
