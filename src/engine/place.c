/* place.c — realizing graphs that span devices: lazy copies (tg_to makes a COPY node) and sharded tensors
 * (tg_shard makes a MULTI). See place.h for how a node's device is found. A COPY's source is realized on its
 * own device first (a realize of its own), then copied with the devices' copy functions; the COPY becomes a
 * BUFFER on the destination, and the kernels of each device then run as one realize per device, reading the
 * sources' buffers where they need a source's value too (computed once). Nothing is computed for a COPY to the
 * device its source is on (the source stays lazy), nor for a range of a host buffer (copied from there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/jit.h"
#include "engine/place.h"
#include "tensor/tensor.h"

bool place_needed;
bool place_parts;

#define DEV_OF(m, j) ((const device *)(intptr_t)(m)->aux[j])

static bool enter_unstored(uop *u, void *ctx) {
  (void)ctx;
  return !uop_storage(u);
}

/* the device of the buffers x reads (a COPY: its destination), or NULL when it reads none; *other: a second
 * device it reads, if any */
static const device *device_of(uop *x, const device **other) {
  int nn;
  uop **order = uop_toposort_filtered(x, enter_unstored, NULL, &nn);
  const device *d = NULL;
  *other = NULL;
  for (int i = 0; order && i < nn; i++) {
    uop *u = order[i];
    tg_buffer *b = uop_storage(u);
    const device *e = b ? b->dev : u->op == OP_COPY ? (const device *)(intptr_t)u->arg.i
                    : u->op == OP_MULTI ? DEV_OF(u, 0) : NULL;
    if (!e) continue;
    if (!d) d = e;
    else if (e != d && !*other) *other = e;
  }
  free(order);
  return d;
}

/* whether x's graph reads a buffer, values cached on its nodes aside */
static bool reads_buffer(uop *x) {
  int nn;
  uop **order = uop_toposort(x, &nn);
  bool r = !order;
  for (int i = 0; order && i < nn && !r; i++) r = order[i]->op == OP_BUFFER || order[i]->op == OP_COPY;
  free(order);
  return r;
}

/* the buffer u is a whole view of in order, or NULL */
static tg_buffer *plain_buffer(uop *u) {
  uop *b = u->op == OP_RESHAPE ? u->src[0] : u;
  return b->op == OP_BUFFER && b->buf && b->aux[0] == uop_numel(u) ? b->buf : NULL;
}

/* x's value in a buffer of the device it is computed on (a new reference); NULL with tg_error set */
static tg_buffer *realize_value(uop *x) {
  tg_buffer *b = plain_buffer(x);
  if (b) {
    buffer_retain(b);
    return b;
  }
  const device *other, *dev = device_of(x, &other);
  if (!dev && !(dev = device_default())) return NULL;
  tg_tensor *t = tensor_new_unscoped(x);
  if (!t) return NULL;
  tg_status st = realize_on(dev, 1, &t);
  b = st == TG_OK ? plain_buffer(t->u) : NULL;
  if (b) buffer_retain(b);
  else if (st == TG_OK) tg_set_error(TG_ERR_INTERNAL, "COPY: the realized source has no buffer of its own");
  tg_free(t);
  return b;
}

/* the first n bytes of sb into db, whatever their devices */
static tg_status transfer(tg_buffer *db, tg_buffer *sb, size_t n) {
  const device *dst = db->dev;
  if (!n) return TG_OK;
  if (sb->dev == dst && dst->copy) return dst->copy(db, 0, sb, 0, n);
  if (!device_is_gpu(sb->dev)) return dst->copyin(db, sb->ptr, n);   /* host memory straight in */
  if (!device_is_gpu(dst)) return sb->dev->copyout(db->ptr, sb, n);  /* or straight out */
  void *tmp = mem_alloc(n);  /* GPU to another GPU through the host */
  tg_status st = tmp ? sb->dev->copyout(tmp, sb, n) : TG_ERR_NOMEM;
  if (st == TG_OK) st = dst->copyin(db, tmp, n);
  if (!tmp) tg_set_error(st, "COPY: out of memory staging %zu bytes from %s to %s", n, sb->dev->name, dst->name);
  free(tmp);
  return st;
}

/* a new buffer on dst holding the first n bytes of sb; NULL with tg_error set */
static tg_buffer *copy_buffer(const device *dst, tg_buffer *sb, size_t n) {
  tg_buffer *db = buffer_new(dst, n ? n : 1);
  tg_status st = db ? TG_OK : (tg_error_status() ? tg_error_status() : TG_ERR_NOMEM);
  if (st == TG_OK) st = transfer(db, sb, n);
  if (st != TG_OK) {
    buffer_release(db);
    return NULL;
  }
  uop_gc_note_bytes(n);
  return db;
}

/* the host buffer x is one contiguous range of (a shard of a batch: rows of a buffer), *off its byte offset;
 * NULL when x is not that. Not while a JIT step is captured: its replay copies whole buffers */
static tg_buffer *host_range(uop *x, size_t *off) {
  if (x->op != OP_SHRINK || jit_capturing()) return NULL;
  uop *v = x->src[0];
  tg_buffer *b = plain_buffer(v);
  if (!b || device_is_gpu(b->dev) || !b->ptr || v->dtype != x->dtype || x->naux != 2 * v->ndim) return NULL;
  /* row-major: axes of extent 1, then one axis cut anywhere, then whole axes */
  int a = 0;
  while (a < v->ndim && x->aux[2 * a + 1] - x->aux[2 * a] == 1) a++;
  for (int i = a + 1; i < v->ndim; i++)
    if (x->aux[2 * i] != 0 || x->aux[2 * i + 1] != v->shape[i]) return NULL;
  int64_t o = 0, stride = 1;
  for (int i = v->ndim - 1; i >= 0; i--) {
    o += x->aux[2 * i] * stride;
    stride *= v->shape[i];
  }
  *off = (size_t)o * tg_dtype_size((tg_dtype)x->dtype);
  return b;
}

/* x's value (of u's shape and dtype) in a buffer of dst, as a node: x realized on its device, then copied; a
 * range of a host buffer is copied from there without a kernel */
static uop *copied(uop *u, uop *x, const device *dst) {
  size_t nb = (size_t)uop_numel(u) * tg_dtype_size((tg_dtype)u->dtype), off = 0;
  tg_buffer *rb = host_range(x, &off), *db = NULL;
  if (rb && rb->dev != dst) {
    db = buffer_new(dst, nb ? nb : 1);
    tg_status st = db ? (nb ? dst->copyin(db, (const unsigned char *)rb->ptr + off, nb) : TG_OK) : TG_ERR_NOMEM;
    if (st != TG_OK) {
      if (!tg_error_status()) tg_set_error(st, "COPY: out of memory for %zu bytes on %s", nb, dst->name);
      buffer_release(db);
      return NULL;
    }
    uop_gc_note_bytes(nb);
    uop *bn = mk_buffer((tg_dtype)u->dtype, uop_numel(u), db);
    if (!bn) buffer_release(db);
    return bn ? mk_reshape(bn, u->ndim, u->shape) : NULL;
  }
  tg_buffer *sb = realize_value(x);
  if (sb && sb->dev == dst) db = sb;
  else if (sb) {
    db = copy_buffer(dst, sb, nb);
    jit_capture *cap = jit_capturing();  /* a JIT replay does the copy again, in order with the kernels */
    if (db && cap) jit_record_copy(cap, db, sb, nb);
    buffer_release(sb);
  }
  uop *bn = db ? mk_buffer((tg_dtype)u->dtype, uop_numel(u), db) : NULL;
  if (db && !bn) buffer_release(db);
  return bn ? mk_reshape(bn, u->ndim, u->shape) : NULL;
}

static uop_map *copies_done;  /* COPY -> its BUFFER on the destination, during place_realize (library lock) */
/* a COPY's source -> its value realized on its device (a buffer view), during place_realize: the graphs realized
 * later read it there instead of computing it again (a data-parallel step's partial gradient is the source of
 * the all-reduce's copy and a term of its own device's sum: without this each device ran its forward and
 * backward twice, as a value cached on its node is dropped by the first in-place write, an optimizer's) */
static uop_map *sources_done;

/* the realized value of source u for a graph computed on dev (NULL: on the device its buffers say), or NULL:
 * a value that reads no buffer was realized on the default device and stands for u on that device alone */
static uop *source_done(uop *u, const device *dev) {
  uop *r = sources_done ? umap_get(sources_done, u) : NULL;
  tg_buffer *b = r ? plain_buffer(r) : NULL;
  if (!b) return NULL;
  const device *other, *d = dev ? dev : device_of(u, &other);
  return d == b->dev && (dev || !other) ? r : NULL;
}

/* root with every COPY under it done: the source realized on its device and copied to the destination. For a
 * part of a sharded value (dev: its device), a value that reads no buffer but was cached on its node by a
 * realize on another device (zeros realized on CPU:0 are one node with a part's zeros) is copied over too. */
static uop *resolve(uop *root, uop_map *memo, const device *dev) {
  int nn;
  uop **order = uop_toposort_filtered(root, enter_unstored, NULL, &nn);
  if (!order) return NULL;
  bool ok = true;
  for (int i = 0; i < nn && ok; i++) {
    uop *u = order[i], *r = u, *s[64];
    if (umap_get(memo, u) || u->nsrc > 64) continue;
    if ((r = source_done(u, dev))) {
      ok = umap_put(memo, u, r);
      continue;
    }
    r = u;
    tg_buffer *b = uop_storage(u);
    if (b) {
      if (!dev || b->dev == dev || plain_buffer(u) || u->op == OP_BUFFER || reads_buffer(u)) continue;
      ok = (r = copied(u, u, dev)) && umap_put(memo, u, r);
      continue;
    }
    bool changed = false;
    for (int k = 0; k < u->nsrc; k++) {
      s[k] = umap_get(memo, u->src[k]);
      if (!s[k]) s[k] = u->src[k];
      changed |= s[k] != u->src[k];
    }
    if (u->op == OP_COPY && copies_done && (r = umap_get(copies_done, u))) {
    } else if (u->op == OP_COPY) r = copied(u, s[0], (const device *)(intptr_t)u->arg.i);
    else if (changed) r = uop_replace_src(u, u->nsrc, s);
    ok = r && umap_put(memo, u, r);
  }
  free(order);
  if (!ok) {
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "tg_realize: out of memory placing work on devices");
    return NULL;
  }
  uop *r = umap_get(memo, root);
  return r ? r : root;
}

/* one value to realize on one device: a caller's tensor (t), or a part of a sharded one (node p, written into
 * target when an assign is realized into its part; its tensor is made only for the realize of its device) */
enum { CLEAN = 1, PENDING = 2 };

/* Every COPY under roots done, level by level: the sources whose graphs hold no COPY still to do are realized
 * together, one realize per device, then copied (into done). Together, because they share work: the partial
 * gradients of a data-parallel step share the forward and backward pass, which one realize each would repeat. */
static tg_status copy_levels(uop *const *roots, int nr, uop_map *done) {
  tg_status st = TG_OK;
  for (int level = 0; st == TG_OK; level++) {
    uop_map state = {0}, seen = {0};
    uop **ready = NULL;
    int nready = 0, cap = 0;
    for (int r = 0; st == TG_OK && r < nr; r++) {
      int nn;
      uop **order = uop_toposort_filtered(roots[r], enter_unstored, NULL, &nn);
      if (!order) st = TG_ERR_NOMEM;
      for (int i = 0; order && st == TG_OK && i < nn; i++) {
        uop *u = order[i];
        if (umap_get(&state, u)) continue;
        intptr_t v = CLEAN;
        if (u->op == OP_COPY && umap_get(done, u)) v = CLEAN;
        else if (!uop_storage(u)) {
          bool below = false;
          for (int k = 0; k < u->nsrc && !below; k++) below = (intptr_t)umap_get(&state, u->src[k]) == PENDING;
          if (u->op == OP_COPY && !below && !umap_get(&seen, u)) {
            if (nready == cap) {
              uop **g = mem_realloc(ready, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *g);
              if (!g) { st = TG_ERR_NOMEM; break; }
              ready = g;
            }
            ready[nready++] = u;
            if (!umap_put(&seen, u, u)) st = TG_ERR_NOMEM;
          }
          v = below || u->op == OP_COPY ? PENDING : CLEAN;
        }
        if (!umap_put(&state, u, (void *)v)) st = TG_ERR_NOMEM;
      }
      free(order);
    }
    umap_free(&state);
    umap_free(&seen);
    if (st != TG_OK || !nready) {
      free(ready);
      return st;
    }
    /* the sources, copies below them done, grouped by device */
    tg_tensor **ts = mem_calloc((size_t)nready, sizeof *ts), **group = mem_calloc((size_t)nready, sizeof *group);
    const device **dev = mem_calloc((size_t)nready, sizeof *dev);
    bool *taken = mem_calloc((size_t)nready, sizeof *taken);
    uop **xs = mem_calloc((size_t)nready, sizeof *xs);
    bool *same = mem_calloc((size_t)nready, sizeof *same);
    if (!ts || !group || !dev || !taken || !xs || !same) st = TG_ERR_NOMEM;
    uop_map tmp = {0};
    for (int i = 0; st == TG_OK && i < nready; i++) {
      uop *x = xs[i] = resolve(ready[i]->src[0], &tmp, NULL);
      const device *other;
      if (!x || !(ts[i] = tensor_new_unscoped(x))) { st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM; break; }
      if (!(dev[i] = device_of(x, &other)) && !(dev[i] = device_default())) st = tg_error_status();
      size_t off;
      const device *dst = (const device *)(intptr_t)ready[i]->arg.i;
      /* nothing to compute: a buffer, a range of one copied from the host, or a value on dst already (no copy:
       * the destination's graph computes it, fused with what reads it, as on one device) */
      same[i] = dev[i] == dst && !other && !plain_buffer(x);
      taken[i] = plain_buffer(x) || (host_range(x, &off) && dev[i] != dst) || same[i];
    }
    umap_free(&tmp);
    for (int i = 0; st == TG_OK && i < nready; i++) {
      if (taken[i]) continue;
      int k = 0;
      for (int j = i; j < nready; j++)
        if (!taken[j] && dev[j] == dev[i]) {
          taken[j] = true;
          group[k++] = ts[j];
        }
      st = realize_on(dev[i], k, group);
    }
    for (int i = 0; st == TG_OK && i < nready; i++) {
      if (same[i]) continue;
      uop *c = ready[i], *r = copied(c, ts[i]->u, (const device *)(intptr_t)c->arg.i);
      if (!r || !umap_put(done, c, r)) st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
      /* the source's value, for the graphs realized after (the node ts[i] stood for, and c's source) */
      if (st == TG_OK && sources_done && plain_buffer(ts[i]->u) &&
          (!umap_put(sources_done, c->src[0], ts[i]->u) || !umap_put(sources_done, xs[i], ts[i]->u)))
        st = TG_ERR_NOMEM;
    }
    for (int i = 0; st == TG_OK && i < nready; i++) {  /* realized for another device's copy, or lazy */
      uop *r = same[i] ? source_done(xs[i], dev[i]) : NULL;
      if (same[i] && !umap_put(done, ready[i], r ? r : xs[i])) st = TG_ERR_NOMEM;
    }
    for (int i = 0; ts && i < nready; i++) tg_free(ts[i]);
    free(ts);
    free(group);
    free(dev);
    free(taken);
    free(xs);
    free(same);
    free(ready);
    if (level > 1000) st = TG_ERR_INTERNAL;
  }
  return st;
}

/* the memo of resolve for parts on dev (one per device: a node may resolve differently on each) */
static uop_map *part_memo(uop_map *memos, const device **devs, int *n, const device *dev) {
  for (int i = 0; i < *n; i++)
    if (devs[i] == dev) return &memos[i];
  if (*n == 2 * PLACE_MAX_DEVS) {
    tg_set_error(TG_ERR_ARG, "tg_realize: sharded tensors over more than %d devices in one realize", 2 * PLACE_MAX_DEVS);
    return NULL;
  }
  devs[*n] = dev;
  return &memos[(*n)++];
}

/* An assign is realized in place when its kernel can write the old buffer; but when its value was realized
 * already (the source of a copy to another device, as an optimizer's step count replicated to a sharded
 * parameter's devices), the tensor just takes that value's buffer. Eagerly that is the same; a captured JIT
 * step would replay the same old value every time, as nothing writes the old buffer. So while capturing,
 * the value is copied into the old buffer (a copy the replay does too) and the tensor reads it there. */
static tg_status write_into(tg_tensor *t, tg_buffer *old) {
  tg_buffer *b = plain_buffer(t->u);
  uop *u = t->u;
  size_t n = (size_t)uop_numel(u) * tg_dtype_size((tg_dtype)u->dtype);
  if (!b || b == old || old->nbytes < n) return TG_OK;
  tg_status st = transfer(old, b, n);
  if (st != TG_OK) return st;
  jit_record_copy(jit_capturing(), old, b, n);
  old->writes++;  /* nodes made before stand for the old contents */
  buffer_retain(old);
  uop *bn = mk_buffer((tg_dtype)u->dtype, uop_numel(u), old);
  uop *view = bn ? mk_reshape(bn, u->ndim, u->shape) : NULL;
  if (!bn) buffer_release(old);
  if (!view) return tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  bn->epoch = old->writes;
  lib_lock();
  uop_pin_dropped(t->u);
  t->u = view;
  lib_unlock();
  return TG_OK;
}

typedef struct item { const device *dev; tg_tensor *t; uop *p, *target, *done; } item;

static const char *multi_name(const uop *m);

/* Parts of a sharded value are realized on their devices; equal parts are one node (the zeros of a replicated
 * state), so a part's tensor lives only during its device's realize, and no value is cached on a node while
 * parts are realized (place_parts, realize.c): one realized on CPU:0 must not stand for the same node on CPU:1. */
tg_status place_realize(int n, tg_tensor *const *ts) {
  uop_map lmemo = {0}, rmemo = {0}, pmemo[2 * PLACE_MAX_DEVS] = {{0}};
  const device *pdev[2 * PLACE_MAX_DEVS];
  int npm = 0;
  item *items = mem_calloc((size_t)n * PLACE_MAX_DEVS + 1, sizeof *items);
  uop **lowered = mem_calloc((size_t)n + 1, sizeof *lowered);
  tg_tensor **group = mem_calloc((size_t)n * PLACE_MAX_DEVS + 1, sizeof *group);
  int *gi = mem_calloc((size_t)n * PLACE_MAX_DEVS + 1, sizeof *gi);
  bool *taken = mem_calloc((size_t)n * PLACE_MAX_DEVS + 1, sizeof *taken);
  int ni = 0;
  tg_status st = items && lowered && group && gi && taken ? TG_OK : TG_ERR_NOMEM;
  uop_map copies = {0}, sources = {0};
  uop *roots[256];
  int nr = 0;
  for (int i = 0; st == TG_OK && i < n; i++) {
    uop *l = lowered[i] = multi_lower(ts[i]->u, &lmemo);
    if (!l) { st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM; break; }
    for (int j = 0; j < (l->op == OP_MULTI ? l->nsrc : 1) && nr < 256; j++) roots[nr++] = l->op == OP_MULTI ? l->src[j] : l;
  }
  uop_map *copies_before = copies_done, *sources_before = sources_done;
  copies_done = &copies;
  sources_done = &sources;
  if (st == TG_OK && nr < 256) st = copy_levels(roots, nr, &copies);  /* else each COPY on its own (resolve) */
  for (int i = 0; st == TG_OK && i < n; i++) {
    uop *l = lowered[i];
    if (l->op != OP_MULTI) {
      uop *p = resolve(l, &rmemo, NULL);
      const device *other, *d = p ? device_of(p, &other) : NULL;
      if (!p || (!d && !(d = device_default()))) { st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM; break; }
      if (p != ts[i]->u) {  /* the same value, its copies done */
        lib_lock();
        uop_pin_dropped(ts[i]->u);
        ts[i]->u = p;
        lib_unlock();
      }
      items[ni++] = (item){.dev = d, .t = ts[i]};
      continue;
    }
    uop *target = ts[i]->assign_target;
    for (int j = 0; j < l->nsrc && st == TG_OK; j++) {
      uop_map *pm = part_memo(pmemo, pdev, &npm, DEV_OF(l, j));  /* what is resolved for one device */
      uop *p = pm ? resolve(l->src[j], pm, DEV_OF(l, j)) : NULL;
      const device *other, *d = p ? device_of(p, &other) : NULL;
      if (!p) { st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM; break; }
      if ((d && d != DEV_OF(l, j)) || other) {
        st = TG_ERR_ARG;
        tg_set_error(st, "tg_realize: the part of a tensor sharded over %s on %s reads a tensor on %s; move it with "
                     "tg_to or shard it", multi_name(l), DEV_OF(l, j)->name, d != DEV_OF(l, j) ? d->name : other->name);
        break;
      }
      /* an assign into a sharded tensor writes each part into its own buffer */
      uop *tp = target && target->op == OP_MULTI && target->nsrc == l->nsrc ? target->src[j] : NULL;
      if (tp && !uop_storage(tp) && !plain_buffer(tp)) tp = NULL;
      items[ni++] = (item){.dev = DEV_OF(l, j), .p = p, .target = tp};
    }
  }
  /* one realize per device, in the order the devices were first met */
  for (int i = 0; st == TG_OK && i < ni; i++) {
    if (taken[i]) continue;
    int k = 0;
    for (int j = i; j < ni && st == TG_OK; j++) {
      if (taken[j] || items[j].dev != items[i].dev) continue;
      taken[j] = true;
      tg_tensor *t = items[j].t ? items[j].t : tensor_new_unscoped(items[j].p);
      if (!t) { st = TG_ERR_NOMEM; break; }
      if (!items[j].t) t->assign_target = items[j].target;
      gi[k] = j;
      group[k++] = t;
    }
    bool parts = false;
    for (int g = 0; g < k; g++) parts |= !items[gi[g]].t;
    /* an assigned whole tensor's old buffer, while a JIT step is captured */
    tg_buffer **into = st == TG_OK && jit_capturing() ? mem_calloc((size_t)k, sizeof *into) : NULL;
    if (st == TG_OK && jit_capturing() && !into) st = TG_ERR_NOMEM;
    for (int g = 0; into && g < k; g++)
      if (items[gi[g]].t && items[gi[g]].t->assign_target) into[g] = plain_buffer(items[gi[g]].t->assign_target);
    place_parts = parts;
    if (st == TG_OK) st = realize_on(items[i].dev, k, group);
    place_parts = false;
    for (int g = 0; into && g < k && st == TG_OK; g++)
      if (into[g]) st = write_into(group[g], into[g]);
    free(into);
    for (int g = 0; g < k; g++) {
      if (items[gi[g]].t) continue;
      items[gi[g]].done = group[g]->u;
      uop_pin_dropped(group[g]->u);
      tg_free(group[g]);
    }
  }
  /* a sharded result: a MULTI of the parts' buffers, for the caller's tensor alone (another tensor on the same
   * node gets buffers of its own when realized: a part written in place must not change it) */
  for (int i = 0, it = 0; st == TG_OK && i < n; i++) {
    uop *l = lowered[i];
    if (l->op != OP_MULTI) { it++; continue; }
    uop *parts[PLACE_MAX_DEVS];
    const device *devs[PLACE_MAX_DEVS];
    for (int j = 0; j < l->nsrc; j++) {
      parts[j] = items[it + j].done;
      devs[j] = DEV_OF(l, j);
    }
    it += l->nsrc;
    uop *m = mk_multi_node((tg_dtype)l->dtype, l->nsrc, parts, devs, (int)l->arg.i, l->ndim, l->shape);
    if (!m) {
      st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
      break;
    }
    lib_lock();
    uop_pin_dropped(ts[i]->u);
    ts[i]->u = m;
    lib_unlock();
  }
  for (int i = 0; st == TG_OK && i < n; i++) ts[i]->assign_target = NULL;
  copies_done = copies_before;
  sources_done = sources_before;
  umap_free(&copies);
  umap_free(&sources);
  umap_free(&lmemo);
  umap_free(&rmemo);
  for (int i = 0; i < npm; i++) umap_free(&pmemo[i]);
  free(items);
  free(lowered);
  free(group);
  free(gi);
  free(taken);
  return st;
}

tg_tensor *place_gather(uop *m) {
  uop *c = mk_copy_node(m, DEV_OF(m, 0));
  tg_tensor *t = c ? tensor_new_unscoped(c) : NULL;
  if (t && place_realize(1, &t) != TG_OK) {
    tg_free(t);
    return NULL;
  }
  return t;
}

/* ---- the public calls --------------------------------------------------------------------------------------- */

/* "CPU:0,CPU:1" for a MULTI's devices: static text, kept once per distinct list */
static const char *multi_name(const uop *m) {
  static char *names[64];
  char buf[256];
  size_t len = 0;
  buf[0] = 0;
  for (int j = 0; j < m->naux && len + 1 < sizeof buf; j++) {
    const char *nm = DEV_OF(m, j)->name;
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s%s", j ? "," : "", nm, strchr(nm, ':') ? "" : ":0");
  }
  int i = 0;
  for (; i < 64 && names[i]; i++)
    if (!strcmp(names[i], buf)) return names[i];
  if (i == 64) return "(several devices)";
  names[i] = mem_strdup(buf);
  return names[i] ? names[i] : "(several devices)";
}

static bool enter_lazy(uop *u, void *ctx) {
  (void)ctx;
  return !uop_storage(u) && u->op != OP_MULTI && u->op != OP_COPY;
}

const char *tg_device(tg_tensor *t) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_device: tensor is NULL");
    return NULL;
  }
  lib_lock();
  const char *name = NULL;
  tg_buffer *b = plain_buffer(t->u);
  if (b) name = b->dev->name;
  else if (t->u->op == OP_COPY) name = ((const device *)(intptr_t)t->u->arg.i)->name;
  else if (place_needed) {  /* a lazy value: where its sources are */
    int nn;
    uop **order = uop_toposort_filtered(t->u, enter_lazy, NULL, &nn);
    for (int i = 0; order && i < nn && !name; i++) {
      uop *u = order[i];
      if (u->op == OP_MULTI) name = multi_name(u);
      else if (u->op == OP_COPY) name = ((const device *)(intptr_t)u->arg.i)->name;
      else if (uop_storage(u)) name = ((tg_buffer *)uop_storage(u))->dev->name;
    }
    free(order);
  }
  lib_unlock();
  if (name) return name;
  const device *d = device_default();  /* a value that reads no buffer is computed on the default device */
  return d ? d->name : NULL;
}

tg_tensor *tg_to(tg_tensor *t, const char *name) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_to: tensor is NULL");
    return NULL;
  }
  const device *dst = device_get(name);
  if (!dst) return NULL;
  lib_lock();
  tg_buffer *b = plain_buffer(t->u);
  tg_tensor *r = b && b->dev == dst ? tg_retain(t) : tensor_new(mk_copy_node(t->u, dst));
  lib_unlock();
  return r;
}

tg_tensor *tg_shard(tg_tensor *t, int ndev, const char *const *devices, int axis) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_shard: tensor is NULL");
    return NULL;
  }
  if (ndev < 1 || ndev > PLACE_MAX_DEVS || !devices) {
    tg_set_error(TG_ERR_ARG, "tg_shard: %d devices (1 to %d, a list of names)", ndev, PLACE_MAX_DEVS);
    return NULL;
  }
  const device *devs[PLACE_MAX_DEVS];
  for (int j = 0; j < ndev; j++) {
    if (!(devs[j] = device_get(devices[j]))) return NULL;
    for (int k = 0; k < j; k++)
      if (devs[k] == devs[j]) {
        tg_set_error(TG_ERR_ARG, "tg_shard: device %s is listed twice", devs[j]->name);
        return NULL;
      }
  }
  char s[160];
  if (t->u->op == OP_MULTI) {
    tg_set_error(TG_ERR_ARG, "tg_shard: the tensor is sharded already (over %s)", multi_name(t->u));
    return NULL;
  }
  int a = -1;
  if (axis != -1 || TNDIM(t) == 0) {
    if (axis != -1 && (a = norm_axis("tg_shard", axis, TNDIM(t))) < 0) return NULL;
  }
  if (a >= 0 && TSHAPE(t)[a] % ndev) {
    tg_set_error(TG_ERR_ARG, "tg_shard: shape %s along axis %d does not split evenly over %d devices",
                 shape_str(s, sizeof s, TNDIM(t), TSHAPE(t)), a, ndev);
    return NULL;
  }
  lib_lock();
  uop *parts[PLACE_MAX_DEVS];
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < TNDIM(t); i++) { b[2 * i] = 0; b[2 * i + 1] = TSHAPE(t)[i]; }
  for (int j = 0; j < ndev; j++) {
    if (a >= 0) {
      b[2 * a] = TSHAPE(t)[a] / ndev * j;
      b[2 * a + 1] = TSHAPE(t)[a] / ndev * (j + 1);
    }
    parts[j] = mk_copy_node(a >= 0 ? mk_shrink(t->u, b) : t->u, devs[j]);
  }
  tg_tensor *r = tensor_new(mk_multi_node(TDT(t), ndev, parts, devs, a, TNDIM(t), TSHAPE(t)));
  lib_unlock();
  return r;
}

tg_tensor *tensor_replicate_like(tg_tensor *x, const tg_tensor *like) {
  if (!x || !like || like->u->op != OP_MULTI) return x;
  const char *names[PLACE_MAX_DEVS];
  for (int j = 0; j < like->u->nsrc; j++) names[j] = DEV_OF(like->u, j)->name;
  return tg_shard(x, like->u->nsrc, names, -1);
}
