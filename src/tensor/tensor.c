/* tensor.c — tensor handles: reference counts, scopes, the live list the collector marks from, and
 * properties. Scopes are per thread; the live list is shared, under the library lock. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "tensor/tensor.h"

static tg_tensor *live;
static _Thread_local char owner_token TG_TLS_FAST;  /* its address names the calling thread */

typedef struct scope { tg_tensor **items; int n, cap; } scope;
/* per thread. The first levels need no allocation, so a scope at depth 0 always opens: a scope that cannot
 * open gives its tensors to the one around it (see tg_scope_begin), and at depth 0 there would be none */
#define STATIC_SCOPES 16
static _Thread_local scope static_scopes[STATIC_SCOPES];
static _Thread_local scope *scopes TG_TLS_FAST;   /* static_scopes or a heap copy; NULL before the first */
static _Thread_local int nscopes TG_TLS_FAST, scopes_cap TG_TLS_FAST;

static void mark_live(void *ctx) {
  for (tg_tensor *t = live; t; t = t->next) {
    uop_mark(t->u);
    uop_mark(t->assign_target);
  }
}

tg_tensor *tensor_live_first(void) { return live; }
bool tensor_is_own(const tg_tensor *t) { return t->owner == &owner_token; }

static void release_storage(void *b) { buffer_release(b); }

static bool scope_push(scope *s, tg_tensor *t) {
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 64;
    tg_tensor **ni = mem_realloc(s->items, (size_t)nc * sizeof *ni);
    if (!ni) return false;
    s->items = ni;
    s->cap = nc;
  }
  s->items[s->n++] = t;
  return true;
}

static void scope_remove(scope *s, tg_tensor *t) {
  for (int i = s->n - 1; i >= 0; i--)
    if (s->items[i] == t) {
      memmove(&s->items[i], &s->items[i + 1], (size_t)(s->n - i - 1) * sizeof *s->items);
      s->n--;
      return;
    }
}

static tg_tensor *tensor_alloc(uop *u, bool scoped) {
  if (!u) return NULL;
  tg_tensor *t = mem_calloc(1, sizeof *t);
  if (!t) {
    tg_set_error(TG_ERR_NOMEM, "out of memory allocating a tensor");
    return NULL;
  }
  t->refcnt = 1;
  t->u = u;
  t->owner = &owner_token;
  lib_lock();
  bool rooted = live || uop_gc_add_roots(mark_live, NULL);
  lib_unlock();
  if (!rooted) {
    free(t);
    tg_set_error(TG_ERR_NOMEM, "out of memory registering the live tensors with the collector");
    return NULL;
  }
  if (scoped && nscopes) {
    if (!scope_push(&scopes[nscopes - 1], t)) {
      free(t);
      tg_set_error(TG_ERR_NOMEM, "out of memory recording a tensor in its scope");
      return NULL;
    }
    t->scope = nscopes;
  }
  lib_lock();
  if (!live) uop_set_buf_release(release_storage);
  t->next = live;
  if (live) live->prev = t;
  live = t;
  lib_unlock();
  return t;
}

tg_tensor *tensor_new(uop *u) { return tensor_alloc(u, true); }
tg_tensor *tensor_new_unscoped(uop *u) { return tensor_alloc(u, false); }

static void tensor_destroy(tg_tensor *t) {
  lib_lock();
  tg_free(t->grad);
  uop_pin_dropped(t->u);  /* the caller may still build on them (random.c keeps a dropped tensor's node) */
  uop_pin_dropped(t->assign_target);
  if (t->prev) t->prev->next = t->next;
  else live = t->next;
  if (t->next) t->next->prev = t->prev;
  lib_unlock();
  free(t);
}

void tg_free(tg_tensor *t) {
  if (!t) return;
  /* the reference a scope holds is the creation reference: freeing it takes the tensor out of the scope,
   * whoever else (a parameter list, a retain) still holds it */
  if (t->scope > 0 && t->scope <= nscopes) {
    scope_remove(&scopes[t->scope - 1], t);
    t->scope = 0;
  }
  if (--t->refcnt == 0) tensor_destroy(t);
}

tg_tensor *tg_retain(tg_tensor *t) {
  if (t) t->refcnt++;
  return t;
}

/* scopes that could not be opened for lack of memory: their tensors belong to the enclosing scope, and
 * their tg_scope_end must not close that one */
static _Thread_local int lost_scopes TG_TLS_FAST, lost_depth TG_TLS_FAST;

void tg_scope_begin(void) {
  if (!scopes) {
    scopes = static_scopes;
    scopes_cap = STATIC_SCOPES;
  }
  if (nscopes == scopes_cap) {
    int nc = scopes_cap * 2;
    scope *ns = scopes == static_scopes ? mem_alloc((size_t)nc * sizeof *ns) : mem_realloc(scopes, (size_t)nc * sizeof *ns);
    if (ns && scopes == static_scopes) memcpy(ns, static_scopes, sizeof static_scopes);
    if (!ns) {
      if (!lost_scopes) lost_depth = nscopes;
      lost_scopes += lost_depth == nscopes;  /* deeper losses than the first are not tracked (memory is gone) */
      return;
    }
    scopes = ns;
    scopes_cap = nc;
  }
  scopes[nscopes++] = (scope){0};
}

void tg_scope_end(void) {
  if (lost_scopes && nscopes == lost_depth) {
    lost_scopes--;
    return;
  }
  if (!nscopes) return;
  scope s = scopes[--nscopes];
  lib_lock();  /* once for all the tensors destroyed here */
  for (int i = 0; i < s.n; i++) {
    tg_tensor *t = s.items[i];
    t->scope = 0;
    if (--t->refcnt == 0) tensor_destroy(t);
  }
  lib_unlock();
  free(s.items);
  if (!nscopes && scopes != static_scopes) {
    free(scopes);
    scopes = static_scopes;
    scopes_cap = STATIC_SCOPES;
  }
  uop_gc_maybe();
}

tg_tensor *tensor_unscope(tg_tensor *t) {
  if (!t || t->scope <= 0 || t->scope > nscopes) return t;
  scope_remove(&scopes[t->scope - 1], t);
  t->scope = 0;
  return t;
}

tg_tensor *tensor_own(tg_tensor *lazy) {
  if (!lazy) return NULL;
  tg_tensor *t = tensor_unscope(tg_empty(TDT(lazy), TNDIM(lazy), TSHAPE(lazy)));
  tg_status st = t ? tg_assign(t, lazy) : tg_error_status();
  if (st == TG_OK) st = tg_realize(t);
  tg_free(lazy);
  if (st != TG_OK) {
    tg_free(t);
    return NULL;
  }
  return t;
}

tg_tensor *tg_keep(tg_tensor *t) {
  if (!t || t->scope <= 0 || t->scope > nscopes) return t;
  scope_remove(&scopes[t->scope - 1], t);
  t->scope--;
  if (t->scope > 0 && !scope_push(&scopes[t->scope - 1], t)) t->scope = 0; /* then the caller owns it */
  return t;
}

/* ---- properties ------------------------------------------------------------------------------------ */

int tg_ndim(const tg_tensor *t) { return t ? t->u->ndim : -1; }

int64_t tg_shape(const tg_tensor *t, int axis) {
  if (!t) return -1;
  int a = norm_axis("tg_shape", axis, t->u->ndim);
  return a < 0 ? -1 : t->u->shape[a];
}

const int64_t *tg_shape_ptr(const tg_tensor *t) { return t ? t->u->shape : NULL; }
int64_t tg_numel(const tg_tensor *t) { return t ? uop_numel(t->u) : -1; }
tg_dtype tg_dtype_of(const tg_tensor *t) { return t ? (tg_dtype)t->u->dtype : TG_DTYPE_COUNT; }

static int axis_in(const char *op, int axis, int ndim, bool scalar_ok) {
  if (ndim == 0 && scalar_ok && (axis == 0 || axis == -1)) return 0;
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim) {
    if (ndim == 0)
      tg_set_error(TG_ERR_ARG, "%s: axis %d given for a 0-d tensor, which has no axes", op, axis);
    else
      tg_set_error(TG_ERR_ARG, "%s: axis %d out of range for a tensor of %d dimensions (-%d..%d)", op, axis, ndim,
                   ndim, ndim - 1);
    return -1;
  }
  return a;
}

int norm_axis(const char *op, int axis, int ndim) { return axis_in(op, axis, ndim, false); }
int norm_axis_scalar(const char *op, int axis, int ndim) { return axis_in(op, axis, ndim, true); }

/* the one element read to the host (tg_to_host realizes it) as a double */
double tg_item(tg_tensor *t) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_item: tensor is NULL");
    return NAN;
  }
  if (uop_numel(t->u) != 1) {
    char b[256];
    tg_set_error(TG_ERR_ARG, "tg_item: needs a tensor of one element, got shape %s", shape_str(b, sizeof b, TNDIM(t), TSHAPE(t)));
    return NAN;
  }
  unsigned char v[8];
  if (tg_to_host(t, v, tg_dtype_size(TDT(t))) != TG_OK) return NAN;
  switch (TDT(t)) {
    case TG_BOOL: return *(bool *)v;
    case TG_INT8: return *(int8_t *)v;
    case TG_INT16: return *(int16_t *)v;
    case TG_INT32: return *(int32_t *)v;
    case TG_INT64: return (double)*(int64_t *)v;
    case TG_UINT8: return *(uint8_t *)v;
    case TG_UINT16: return *(uint16_t *)v;
    case TG_UINT32: return *(uint32_t *)v;
    case TG_UINT64: return (double)*(uint64_t *)v;
    case TG_FLOAT16: { uint16_t h; memcpy(&h, v, 2); return half_to_float(h); }
    case TG_BFLOAT16: { uint32_t bits = (uint32_t)(*(uint16_t *)v) << 16; float f; memcpy(&f, &bits, 4); return f; }
    case TG_FLOAT32: return *(float *)v;
    case TG_FLOAT64: return *(double *)v;
    default: return NAN;
  }
}
