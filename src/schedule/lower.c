/* lower.c — one kernel's tensor graph becomes a kernel graph ("rangeify").
 *
 * Walking from the stored node down, every node is visited with the index expressions of its output
 * (one per axis, built from RANGE loop variables). Movement ops only rewrite those expressions:
 *   reshape  linear index over the output, unravelled over the input with div/mod
 *   permute  reorder            expand  0 on broadcast axes      shrink  + offset
 *   flip     size-1-i           pad     i - before, with a validity mask (the value is 0 outside)
 * A REDUCE_AXIS opens new RANGEs for its reduced axes. A node with storage becomes a LOAD of a PARAM.
 * The symbolic simplifier then folds the div/mod and masks away wherever it can.
 */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

typedef struct lower_ctx {
  const uop_map *realized;
  uop *root;
  uop **bufs;
  int nbufs, cap;
  uop_map memo;
  int next_range;
  tg_dtype idt;
  bool oom;
} lower_ctx;

bool node_has_storage(const uop *u) {
  if (u->buf) return true;
  if (u->op == OP_BUFFER) return true;
  return u->op == OP_RESHAPE && u->src[0]->op == OP_BUFFER;
}

static uop *ic(lower_ctx *c, int64_t v) { return uop_const_int(c->idt, v); }
static uop *add(uop *a, uop *b) { return uop_binary(OP_ADD, a, b); }
static uop *mul(uop *a, uop *b) { return uop_binary(OP_MUL, a, b); }
static uop *and_(uop *a, uop *b) { return uop_binary(OP_AND, a, b); }

static int param_slot(lower_ctx *c, uop *n) {
  for (int i = 0; i < c->nbufs; i++)
    if (c->bufs[i] == n) return i;
  if (c->nbufs == c->cap) {
    int nc = c->cap ? c->cap * 2 : 8;
    uop **nb = realloc(c->bufs, (size_t)nc * sizeof *nb);
    if (!nb) { c->oom = true; return 0; }
    c->bufs = nb;
    c->cap = nc;
  }
  c->bufs[c->nbufs] = n;
  return c->nbufs++;
}

static uop *param(lower_ctx *c, uop *n) {
  int slot = param_slot(c, n);
  int64_t numel = n->op == OP_BUFFER ? n->aux[0] : uop_numel(n);
  return uop_new(OP_PARAM, (tg_dtype)n->dtype, 0, NULL, (uop_arg){.i = slot}, 1, &numel);
}

/* sum of idx[i] * stride[i] for a contiguous layout of shape */
static uop *linear_index(lower_ctx *c, int ndim, const int64_t *shape, uop *const *idx) {
  uop *lin = ic(c, 0);
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    if (shape[i] != 1) lin = add(lin, mul(idx[i], ic(c, stride)));
    stride *= shape[i];
  }
  return lin;
}

static uop *lower(lower_ctx *c, uop *n, uop **idx, uop *valid);

static uop *load(lower_ctx *c, uop *n, uop **idx, uop *valid) {
  uop *p, *lin;
  if (n->op == OP_BUFFER) {
    p = param(c, n);
    lin = idx[0];
  } else if (n->op == OP_RESHAPE && !n->buf && n->src[0]->op == OP_BUFFER) {
    p = param(c, n->src[0]);
    lin = linear_index(c, n->ndim, n->shape, idx);
  } else {
    p = param(c, n);
    lin = linear_index(c, n->ndim, n->shape, idx);
  }
  bool always = uop_is_const(valid) && valid->arg.i;
  uop *s[3] = {p, lin, valid};
  return uop_new(OP_LOAD, (tg_dtype)n->dtype, always ? 2 : 3, s, (uop_arg){0}, 0, NULL);
}

static uop *lower_reduce(lower_ctx *c, uop *n, uop **idx, uop *valid) {
  uop *src = n->src[0], *in[TG_MAX_DIMS], *ranges[TG_MAX_DIMS];
  int nr = 0;
  for (int i = 0; i < n->ndim; i++) {
    if (!n->aux[i]) { in[i] = idx[i]; continue; }
    if (src->shape[i] == 1) { in[i] = ic(c, 0); continue; }
    uop *bound = ic(c, src->shape[i]);
    int64_t type = AX_REDUCE;
    in[i] = ranges[nr++] = uop_new(OP_RANGE, c->idt, 1, &bound, (uop_arg){.i = c->next_range++}, 1, &type);
  }
  uop *v = lower(c, src, in, valid);
  if (!nr || !v) return v;
  uop *s[TG_MAX_DIMS + 1];
  s[0] = v;
  memcpy(s + 1, ranges, (size_t)nr * sizeof *ranges);
  return uop_new(OP_REDUCE, (tg_dtype)n->dtype, nr + 1, s, (uop_arg){.i = n->arg.i}, 0, NULL);
}

static uop *lower_uncached(lower_ctx *c, uop *n, uop **idx, uop *valid) {
  uop *in[TG_MAX_DIMS];
  if (n != c->root && (umap_get(c->realized, n) || node_has_storage(n))) return load(c, n, idx, valid);
  uop *src = n->nsrc ? n->src[0] : NULL;
  switch (n->op) {
    case OP_CONST: return n;
    case OP_CONTIGUOUS:
    case OP_DETACH:
    case OP_CUSTOM_GRAD: return lower(c, src, idx, valid);
    case OP_IOTA: return uop_cast(idx[0], (tg_dtype)n->dtype);
    case OP_RESHAPE: {
      uop *lin = linear_index(c, n->ndim, n->shape, idx);
      int64_t stride = 1;
      for (int j = src->ndim - 1; j >= 0; j--) {
        uop *q = stride == 1 ? lin : uop_binary(OP_IDIV, lin, ic(c, stride));
        in[j] = j == 0 ? q : uop_binary(OP_MOD, q, ic(c, src->shape[j]));
        if (src->shape[j] == 1) in[j] = ic(c, 0);
        stride *= src->shape[j];
      }
      return lower(c, src, in, valid);
    }
    case OP_PERMUTE:
      for (int i = 0; i < n->ndim; i++) in[n->aux[i]] = idx[i];
      return lower(c, src, in, valid);
    case OP_EXPAND:
      for (int i = 0; i < n->ndim; i++) in[i] = src->shape[i] == 1 ? ic(c, 0) : idx[i];
      return lower(c, src, in, valid);
    case OP_SHRINK:
      for (int i = 0; i < n->ndim; i++) in[i] = add(idx[i], ic(c, n->aux[2 * i]));
      return lower(c, src, in, valid);
    case OP_FLIP:
      for (int i = 0; i < n->ndim; i++) in[i] = n->aux[i] ? add(mul(idx[i], ic(c, -1)), ic(c, n->shape[i] - 1)) : idx[i];
      return lower(c, src, in, valid);
    case OP_PAD: {
      uop *mask = uop_const_int(TG_BOOL, 1);
      for (int i = 0; i < n->ndim; i++) {
        int64_t before = n->aux[2 * i];
        in[i] = add(idx[i], ic(c, -before));
        if (n->aux[2 * i] || n->aux[2 * i + 1]) {
          mask = and_(mask, uop_binary(OP_CMPLT, ic(c, before - 1), idx[i]));
          mask = and_(mask, uop_binary(OP_CMPLT, idx[i], ic(c, before + src->shape[i])));
        }
      }
      mask = uop_simplify(mask);
      uop *v = lower(c, src, in, uop_simplify(and_(valid, mask)));
      return uop_where(mask, v, uop_const_int((tg_dtype)n->dtype, 0));
    }
    case OP_REDUCE_AXIS: return lower_reduce(c, n, idx, valid);
    default: break;
  }
  if (!uop_is_alu((uop_op)n->op)) {
    tg_set_error(TG_ERR_INTERNAL, "schedule: cannot lower a %s node", uop_op_name((uop_op)n->op));
    return NULL;
  }
  uop *s[3];
  for (int i = 0; i < n->nsrc; i++)
    if (!(s[i] = lower(c, n->src[i], idx, valid))) return NULL;
  return uop_new((uop_op)n->op, (tg_dtype)n->dtype, n->nsrc, s, n->arg, 0, NULL);
}

/* memoized on (node, index expressions, valid): a key node made of them */
static uop *lower(lower_ctx *c, uop *n, uop **idx, uop *valid) {
  if (!n || !valid) return NULL;
  uop *ks[TG_MAX_DIMS + 2];
  ks[0] = n;
  ks[1] = valid;
  for (int i = 0; i < n->ndim; i++) {
    if (!idx[i]) return NULL;
    ks[i + 2] = idx[i];
  }
  uop *key = uop_new(OP_SINK, TG_BOOL, n->ndim + 2, ks, (uop_arg){.i = -1}, 0, NULL);
  if (!key) return NULL;
  uop *r = umap_get(&c->memo, key);
  if (r) return r;
  r = lower_uncached(c, n, idx, valid);
  if (r && !umap_put(&c->memo, key, r)) c->oom = true;
  return r;
}

static bool enter_unrealized(uop *u, void *ctx) {
  lower_ctx *c = ctx;
  return u == c->root || !(umap_get(c->realized, u) || node_has_storage(u));
}

/* The index type is chosen from the sizes of the tensor graph, and a convolution's windows are a virtual
 * tensor of billions of elements (batch 512, 32->32 channels, 5x5 on 20x20: 5.2e9) even when every buffer it
 * reads is small. Once the indices are simplified their real ranges are known: when every int64 value of the
 * kernel is an index that fits in 2^30 (room for PADTO and vector lanes), the kernel computes in int32. Its
 * lane masks are then one int32 vector compare instead of a 16 x int64 compare that gcc splits into scalar
 * instructions (conv 32->32 5x5 weight gradient: about 100 instructions of mask per 16 FMAs). */
bool lower_narrow_indices = true;

static uop *narrow_indices(uop *ast) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return NULL;
  bool ok = true, any = false;
  for (int i = 0; i < n && ok; i++) {
    uop *u = order[i];
    if ((u->op == OP_LOAD || u->op == OP_PARAM || u->op == OP_BITCAST) && u->dtype == TG_INT64) ok = false;
    if (u->op == OP_STORE && u->src[2]->dtype == TG_INT64) ok = false;
    if (u->op == OP_CAST && (u->dtype == TG_INT64) != (u->src[0]->dtype == TG_INT64)) ok = u->dtype != TG_INT64;
    if (u->dtype != TG_INT64) continue;
    any = true;
    ok = ok && uop_vmin(u) > -((int64_t)1 << 30) && uop_vmax(u) < ((int64_t)1 << 30);
  }
  uop_map memo = {0};
  uop *res = ast;
  for (int i = 0; i < n && ok && any; i++) {
    uop *u = order[i], *s[TG_MAX_DIMS + 64], **src = u->nsrc <= (int)(sizeof s / sizeof *s) ? s : malloc((size_t)u->nsrc * sizeof *src);
    if (!src) { res = NULL; break; }
    for (int k = 0; k < u->nsrc; k++) src[k] = umap_get(&memo, u->src[k]);
    uop *v;
    if (u->op == OP_CONST && u->dtype == TG_INT64) v = uop_const_int(TG_INT32, u->arg.i);
    else if (u->dtype == TG_INT64) v = uop_new((uop_op)u->op, TG_INT32, u->nsrc, src, u->arg, u->naux, u->aux);
    else v = uop_replace_src(u, u->nsrc, src);
    if (src != s) free(src);
    if (!v || !umap_put(&memo, u, v)) { res = NULL; break; }
    res = v;
  }
  umap_free(&memo);
  free(order);
  return res;
}

uop *lower_kernel(uop *root, const uop_map *realized, uop ***bufs, int *nbufs) {
  lower_ctx c = {.realized = realized, .root = root, .idt = TG_INT32};
  *bufs = NULL;
  *nbufs = 0;
  /* 32-bit indices unless some node of the kernel has 2^31 elements or more */
  int nn;
  uop **order = uop_toposort_filtered(root, enter_unrealized, &c, &nn);
  if (!order) return NULL;
  for (int i = 0; i < nn; i++) {
    int64_t ne = order[i]->op == OP_BUFFER ? order[i]->aux[0] : uop_numel(order[i]);
    if (ne >= ((int64_t)1 << 31) - 1) c.idt = TG_INT64;
    for (int d = 0; d < order[i]->ndim; d++)
      if (order[i]->shape[d] >= ((int64_t)1 << 31) - 1) c.idt = TG_INT64;
  }
  free(order);
  param_slot(&c, root);  /* the output is PARAM 0 */
  uop *idx[TG_MAX_DIMS];
  for (int i = 0; i < root->ndim; i++) {
    if (root->shape[i] == 1) { idx[i] = ic(&c, 0); continue; }
    uop *bound = ic(&c, root->shape[i]);
    int64_t type = AX_GLOBAL;
    idx[i] = uop_new(OP_RANGE, c.idt, 1, &bound, (uop_arg){.i = c.next_range++}, 1, &type);
  }
  uop *value = lower(&c, root, idx, uop_const_int(TG_BOOL, 1));
  uop *ast = NULL;
  if (value && !c.oom) {
    uop *s[3] = {param(&c, root), linear_index(&c, root->ndim, root->shape, idx), value};
    uop *store = uop_new(OP_STORE, (tg_dtype)root->dtype, 3, s, (uop_arg){0}, 0, NULL);
    ast = uop_simplify(store ? uop_new(OP_SINK, TG_BOOL, 1, &store, (uop_arg){0}, 0, NULL) : NULL);
    if (ast && c.idt == TG_INT64 && lower_narrow_indices) ast = uop_simplify(narrow_indices(ast));
  }
  umap_free(&c.memo);
  if (!ast || c.oom) {
    if (c.oom) tg_set_error(TG_ERR_NOMEM, "schedule: out of memory lowering a kernel");
    free(c.bufs);
    return NULL;
  }
  *bufs = c.bufs;
  *nbufs = c.nbufs;
  return ast;
}
