/* multi.c — the graph over sharded tensors (MULTI nodes, tg_shard) mapped to one graph per device, as
 * tinygrad's multi.py does. The frontend and autograd build global-shape nodes over a MULTI; before scheduling,
 * multi_lower walks the graph sources first and gives each node either a plain value (no MULTI under it) or a
 * MULTI of per-device parts:
 *   elementwise  per part; a replicated operand is cut to each part's slice, a constant is used everywhere;
 *                an operand that reads a buffer of one device is refused (as tinygrad), naming the op
 *   movement     per part, with the split axis followed through reshape (it must stay an outermost factor),
 *                permute and expand; pad/shrink/flip only off the split axis
 *   reduce       per part; over the split axis the partial results are all-reduced (allreduce below) into a
 *                replicated value
 *   COPY(MULTI)  the gather: each part copied to the destination and placed at its offset
 * The result still holds COPY nodes; place.c realizes them (the source on its device, then a device copy).
 * A graph without MULTI never comes here (realize.c checks a flag first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/place.h"
#include "runtime/device.h"
#include "tensor/tensor.h"

#define DEV_OF(m, j) ((const device *)(intptr_t)(m)->aux[j])

static const char *dev_name(const uop *m, int j) { return DEV_OF(m, j)->name; }

/* "CPU:0,CPU:1" for the devices of a MULTI into buf */
static const char *devs_str(char *buf, size_t n, const uop *m) {
  size_t len = 0;
  buf[0] = 0;
  for (int j = 0; j < m->naux && len + 1 < n; j++)
    len += (size_t)snprintf(buf + len, n - len, "%s%s%s", j ? "," : "", dev_name(m, j), strchr(dev_name(m, j), ':') ? "" : ":0");
  return buf;
}

uop *mk_multi_node(tg_dtype dt, int n, uop *const *parts, const device *const *devs, int axis, int ndim,
                   const int64_t *shape) {
  int64_t aux[PLACE_MAX_DEVS];
  for (int j = 0; j < n; j++) aux[j] = (int64_t)(intptr_t)devs[j];
  place_needed = true;
  return uop_new_shaped(OP_MULTI, dt, n, parts, (uop_arg){.i = axis}, n, aux, ndim, shape);
}

uop *mk_copy_node(uop *x, const device *dst) {
  if (!x) return NULL;
  place_needed = true;
  return uop_new_shaped(OP_COPY, (tg_dtype)x->dtype, 1, &x, (uop_arg){.i = (int64_t)(intptr_t)dst}, 0, NULL, x->ndim,
                        x->shape);
}

/* a MULTI like m (devices, dtype) with new parts, axis and global shape */
static uop *remulti(const uop *m, uop *const *parts, int axis, int ndim, const int64_t *shape) {
  const device *devs[PLACE_MAX_DEVS];
  for (int j = 0; j < m->nsrc; j++) devs[j] = DEV_OF(m, j);
  for (int j = 0; j < m->nsrc; j++)
    if (!parts[j]) return NULL;
  return mk_multi_node((tg_dtype)parts[0]->dtype, m->nsrc, parts, devs, axis, ndim, shape);
}

/* x cut to part j of n along axis (x has the global shape) */
static uop *slice_of(uop *x, int axis, int j, int n) {
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < x->ndim; i++) { b[2 * i] = 0; b[2 * i + 1] = x->shape[i]; }
  int64_t len = x->shape[axis] / n;
  b[2 * axis] = len * j;
  b[2 * axis + 1] = len * (j + 1);
  return mk_shrink(x, b);
}

static bool has_storage_under(uop *x) {
  int nn;
  uop **order = uop_toposort(x, &nn);
  if (!order) return true;
  bool found = false;
  /* a value cached on a node that reads no buffer (a constant realized before) is still device-free */
  for (int i = 0; i < nn && !found; i++) found = order[i]->op == OP_BUFFER || order[i]->op == OP_COPY;
  free(order);
  return found;
}

/* per-device combination of n partial values with op (ADD, MUL, MAX), the same on every device: a replicated
 * MULTI. Two devices, or fewer elements than devices: every device combines the parts in device order (the
 * others' copied over), so all get the same bits. More: a ring over n chunks of the flattened value; chunk c is
 * combined along the ring from device c+1 round to device c (reduce-scatter), then every device gathers the
 * chunks (all-gather): each chunk crosses n-1 links twice instead of every part going to every device. */
static uop *allreduce(const uop *m, uop_op op, uop **p, int ndim, const int64_t *shape) {
  int n = m->nsrc;
  uop *res[PLACE_MAX_DEVS];
  int64_t numel = uop_numel(p[0]);
  if (n <= 2 || numel < n) {
    for (int i = 0; i < n; i++) {
      uop *acc = NULL;
      for (int j = 0; j < n; j++) {
        uop *x = j == i ? p[j] : mk_copy_node(p[j], DEV_OF(m, i));
        acc = acc ? mk_binary(op, acc, x) : x;
      }
      res[i] = acc;
    }
    return remulti(m, res, -1, ndim, shape);
  }
  uop *flat[PLACE_MAX_DEVS], *chunk[PLACE_MAX_DEVS];
  int64_t lo[PLACE_MAX_DEVS + 1];
  for (int j = 0; j < n; j++) flat[j] = mk_reshape(p[j], 1, &numel);
  for (int c = 0; c <= n; c++) lo[c] = numel * c / n;
  for (int c = 0; c < n; c++) {  /* reduce-scatter: chunk c ends on device c */
    int64_t b[2] = {lo[c], lo[c + 1]};
    uop *acc = NULL;
    for (int s = 1; s <= n; s++) {
      int d = (c + s) % n;
      uop *mine = mk_shrink(flat[d], b);
      acc = acc ? mk_binary(op, mk_copy_node(acc, DEV_OF(m, d)), mine) : mine;
    }
    chunk[c] = acc;
  }
  for (int i = 0; i < n; i++) {  /* all-gather: chunk c placed at its offset on every device */
    uop *acc = NULL;
    for (int c = 0; c < n; c++) {
      uop *x = c == i ? chunk[c] : mk_copy_node(chunk[c], DEV_OF(m, i));
      int64_t pads[2] = {lo[c], numel - lo[c + 1]};
      x = mk_pad(x, pads);
      acc = acc ? mk_binary(OP_ADD, acc, x) : x;
    }
    res[i] = mk_reshape(acc, ndim, shape);
  }
  return remulti(m, res, -1, ndim, shape);
}

/* the new split axis of a reshape of a value split along axis: the axis whose leading product equals the old
 * one's and whose size the devices divide; -1 when the split does not survive */
static int reshape_axis(const uop *x, int axis, int n, int ndim, const int64_t *shape) {
  int64_t before = 1, nb = 1;
  for (int i = 0; i < axis; i++) before *= x->shape[i];
  for (int i = 0; i < ndim; i++) {
    if (nb == before && shape[i] > 0 && shape[i] % n == 0) {
      int64_t rest_new = 1, rest_old = 1;  /* the chunks of the flat value must line up */
      for (int k = i + 1; k < ndim; k++) rest_new *= shape[k];
      for (int k = axis + 1; k < x->ndim; k++) rest_old *= x->shape[k];
      if (shape[i] / n * rest_new == x->shape[axis] / n * rest_old) return i;
    }
    nb *= shape[i];
  }
  return -1;
}

/* node u (global shape) over lowered sources s, one of them a MULTI; NULL with tg_error set */
static uop *lower_node(uop *u, uop **s) {
  const uop *m = NULL;
  int axis = -1;
  char d1[160], d2[160];
  for (int k = 0; k < u->nsrc; k++) {
    if (s[k]->op != OP_MULTI) continue;
    if (!m) m = s[k];
    if (s[k]->nsrc != m->nsrc || memcmp(s[k]->aux, m->aux, (size_t)m->naux * sizeof *m->aux)) {
      tg_set_error(TG_ERR_ARG, "%s: operands sharded over different devices (%s) and (%s)", uop_op_name(u->op),
                   devs_str(d1, sizeof d1, m), devs_str(d2, sizeof d2, s[k]));
      return NULL;
    }
    int a = (int)s[k]->arg.i;
    if (a >= 0 && axis >= 0 && a != axis) {
      tg_set_error(TG_ERR_ARG, "%s: operands sharded along different axes (%d and %d)", uop_op_name(u->op), axis, a);
      return NULL;
    }
    if (a >= 0) axis = a;
  }
  int n = m->nsrc;
  uop *parts[PLACE_MAX_DEVS];
  int64_t local[TG_MAX_DIMS];
  for (int i = 0; i < u->ndim; i++) local[i] = u->shape[i];
  if (u->op == OP_CUSTOM_GRAD) return s[0];  /* the scheduler sees src[0] alone */
  if (u->op == OP_COPY) {  /* gather onto one device */
    const device *dst = (const device *)(intptr_t)u->arg.i;
    int a = (int)s[0]->arg.i;
    uop *acc = NULL;
    for (int j = 0; j < n && (a >= 0 || !acc); j++) {
      uop *x = DEV_OF(s[0], j) == dst ? s[0]->src[j] : mk_copy_node(s[0]->src[j], dst);
      if (a >= 0) {
        int64_t pads[2 * TG_MAX_DIMS] = {0}, len = u->shape[a] / n;
        pads[2 * a] = len * j;
        pads[2 * a + 1] = len * (n - 1 - j);
        x = mk_pad(x, pads);
      }
      acc = acc ? mk_binary(OP_ADD, acc, x) : x;
    }
    return acc;
  }
  if (uop_is_alu((uop_op)u->op) || u->op == OP_CONTIGUOUS || u->op == OP_DETACH) {
    if (axis >= 0) local[axis] /= n;
    for (int k = 0; k < u->nsrc; k++)
      if (s[k]->op != OP_MULTI && has_storage_under(s[k])) {
        tg_set_error(TG_ERR_ARG, "%s: an operand sharded over (%s) meets one on a single device; shard it (axis -1 "
                     "replicates it) or copy it", uop_op_name(u->op), devs_str(d1, sizeof d1, m));
        return NULL;
      }
    for (int j = 0; j < n; j++) {
      uop *src[3];
      for (int k = 0; k < u->nsrc; k++) {
        bool cut = axis >= 0 && !(s[k]->op == OP_MULTI && s[k]->arg.i >= 0);
        uop *x = s[k]->op == OP_MULTI ? s[k]->src[j] : s[k];
        src[k] = cut ? slice_of(x, axis, j, n) : x;
      }
      parts[j] = uop_new_shaped((uop_op)u->op, (tg_dtype)u->dtype, u->nsrc, src, u->arg, u->naux, u->aux, u->ndim, local);
    }
    return remulti(m, parts, axis, u->ndim, u->shape);
  }
  if (u->op == OP_MULTI) {
    tg_set_error(TG_ERR_ARG, "tg_shard: a sharded tensor cannot be sharded again (devices %s)", devs_str(d1, sizeof d1, m));
    return NULL;
  }
  const uop *x = s[0];
  bool movement = u->op == OP_RESHAPE || u->op == OP_PERMUTE || u->op == OP_EXPAND || u->op == OP_PAD ||
                  u->op == OP_SHRINK || u->op == OP_FLIP;
  if ((movement || u->op == OP_REDUCE_AXIS) && u->nsrc > 1) {
    tg_set_error(TG_ERR_ARG, "%s: a window at a variable offset on a sharded tensor is not supported",
                 uop_op_name(u->op));
    return NULL;
  }
  if (movement && axis < 0) {  /* replicated: the same op on every part */
    for (int j = 0; j < n; j++) parts[j] = uop_replace_src(u, 1, &x->src[j]);
    return remulti(m, parts, -1, u->ndim, u->shape);
  }
  int64_t aux[2 * TG_MAX_DIMS];
  int nax = u->naux, new_axis = axis;
  memcpy(aux, u->aux, (size_t)nax * sizeof *aux);
  switch (u->op) {
    case OP_RESHAPE:
      new_axis = reshape_axis(x, axis, n, u->ndim, u->shape);
      if (new_axis < 0) {
        tg_set_error(TG_ERR_ARG, "RESHAPE: %s to %s splits the axis %d the tensor is sharded along over %d devices",
                     shape_str(d1, sizeof d1, x->ndim, x->shape), shape_str(d2, sizeof d2, u->ndim, u->shape), axis, n);
        return NULL;
      }
      aux[new_axis] /= n;
      break;
    case OP_PERMUTE:
      for (int i = 0; i < u->ndim; i++)
        if (aux[i] == axis) new_axis = i;
      break;
    case OP_EXPAND: aux[axis] /= n; break;
    case OP_PAD:
    case OP_SHRINK:
    case OP_FLIP: {
      bool moved = u->op == OP_FLIP ? aux[axis] != 0
                 : u->op == OP_PAD  ? aux[2 * axis] != 0 || aux[2 * axis + 1] != 0
                                    : aux[2 * axis] != 0 || aux[2 * axis + 1] != x->shape[axis];
      if (moved) {
        tg_set_error(TG_ERR_ARG, "%s: along axis %d, which the tensor of shape %s is sharded along over %d devices "
                     "(copy it to one device first)", uop_op_name(u->op), axis,
                     shape_str(d1, sizeof d1, x->ndim, x->shape), n);
        return NULL;
      }
      if (u->op == OP_SHRINK) aux[2 * axis + 1] /= n;
      break;
    }
    case OP_REDUCE_AXIS: {
      for (int i = 0; i < u->ndim; i++) local[i] = u->shape[i];
      bool over_split = axis >= 0 && aux[axis];
      if (axis >= 0 && !over_split) local[axis] /= n;
      for (int j = 0; j < n; j++)
        parts[j] = uop_new_shaped(OP_REDUCE_AXIS, (tg_dtype)u->dtype, 1, &x->src[j], u->arg, nax, aux, u->ndim, local);
      if (!over_split) return remulti(m, parts, axis, u->ndim, u->shape);
      for (int j = 0; j < n; j++)
        if (!parts[j]) return NULL;
      return allreduce(m, (uop_op)u->arg.i, parts, u->ndim, u->shape);
    }
    default:
      tg_set_error(TG_ERR_ARG, "%s on a sharded tensor is not supported", uop_op_name(u->op));
      return NULL;
  }
  for (int i = 0; i < u->ndim; i++) local[i] = u->shape[i];
  if (new_axis >= 0) local[new_axis] /= n;
  for (int j = 0; j < n; j++)
    parts[j] = uop_new_shaped((uop_op)u->op, (tg_dtype)u->dtype, 1, &x->src[j], u->arg, nax, aux, u->ndim, local);
  return remulti(m, parts, new_axis, u->ndim, u->shape);
}

static bool enter_unstored(uop *u, void *ctx) {
  (void)ctx;
  return !uop_storage(u);
}

uop *multi_lower(uop *root, uop_map *memo) {
  int nn;
  uop **order = uop_toposort_filtered(root, enter_unstored, NULL, &nn);
  if (!order) return NULL;
  uop *res = NULL;
  bool ok = true;
  for (int i = 0; i < nn && ok; i++) {
    uop *u = order[i];
    if (umap_get(memo, u)) continue;
    uop *s[64], *r = u;
    bool changed = false, any_multi = false;
    if (!uop_storage(u) && u->nsrc <= 64)
      for (int k = 0; k < u->nsrc; k++) {
        s[k] = umap_get(memo, u->src[k]);
        if (!s[k]) s[k] = u->src[k];
        changed |= s[k] != u->src[k];
        any_multi |= s[k]->op == OP_MULTI;
      }
    if (any_multi && u->op != OP_MULTI) r = lower_node(u, s);
    else if (changed) r = uop_replace_src(u, u->nsrc, s);
    ok = r && umap_put(memo, u, r);
  }
  if (ok) res = umap_get(memo, root);
  free(order);
  return res;
}
