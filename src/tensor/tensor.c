/* tensor.c — tensor handles: reference counts, scopes, the live list the collector marks from, and
 * properties. */
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "tensor/tensor.h"

static tg_tensor *live;

typedef struct scope { tg_tensor **items; int n, cap; } scope;
static scope *scopes;
static int nscopes, scopes_cap;

static void mark_live(void *ctx) {
  for (tg_tensor *t = live; t; t = t->next) {
    uop_mark(t->u);
    uop_mark(t->assign_target);
  }
}

tg_tensor *tensor_live_first(void) { return live; }

static void release_storage(void *b) { buffer_release(b); }

static bool scope_push(scope *s, tg_tensor *t) {
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 64;
    tg_tensor **ni = realloc(s->items, (size_t)nc * sizeof *ni);
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
  tg_tensor *t = calloc(1, sizeof *t);
  if (!t) {
    tg_set_error(TG_ERR_NOMEM, "out of memory allocating a tensor");
    return NULL;
  }
  t->refcnt = 1;
  t->u = u;
  if (!live && !uop_gc_add_roots(mark_live, NULL)) {
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
  if (!live) uop_set_buf_release(release_storage);
  t->next = live;
  if (live) live->prev = t;
  live = t;
  return t;
}

tg_tensor *tensor_new(uop *u) { return tensor_alloc(u, true); }
tg_tensor *tensor_new_unscoped(uop *u) { return tensor_alloc(u, false); }

static void tensor_destroy(tg_tensor *t) {
  tg_free(t->grad);
  if (t->prev) t->prev->next = t->next;
  else live = t->next;
  if (t->next) t->next->prev = t->prev;
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
static int lost_scopes, lost_depth;

void tg_scope_begin(void) {
  if (nscopes == scopes_cap) {
    int nc = scopes_cap ? scopes_cap * 2 : 8;
    scope *ns = realloc(scopes, (size_t)nc * sizeof *ns);
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
  for (int i = 0; i < s.n; i++) {
    tg_tensor *t = s.items[i];
    t->scope = 0;
    if (--t->refcnt == 0) tensor_destroy(t);
  }
  free(s.items);
  if (!nscopes) {
    free(scopes);
    scopes = NULL;
    scopes_cap = 0;
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
tg_dtype tg_dtype_of(const tg_tensor *t) { return t ? (tg_dtype)t->u->dtype : TG_FLOAT32; }

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
