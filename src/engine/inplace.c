/* inplace.c — which kernels of a schedule write their output into an assigned tensor's old buffer, and the
 * order that makes it safe: a kernel overwrites a buffer only where it reads nothing but the element it writes,
 * after every other reader of the old contents, and never a buffer another live tensor holds (equal graphs are one
 * node, so two tensors made alike share one). A window write (tg_assign_at) must run in place. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/inplace.h"
#include "tensor/tensor.h"

/* Whether kernel k may store its output j into target (an assigned tensor's old buffer): it reads that buffer
 * only at the element output j is written at. */
static bool reads_only_own_element(const sched_kernel *k, int j, const device *dev, const tg_buffer *target,
                                   const uop_map *made) {
  uop *store = j < k->ast->nsrc ? k->ast->src[j] : NULL;
  if (k->ast->nsrc != k->nout || !store || store->op != OP_STORE) return false;
  int n;
  uop **order = uop_toposort(k->ast, &n);
  if (!order) return false;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    uop *u = order[i];
    if (u->op != OP_LOAD || u->src[0]->op != OP_PARAM) continue;
    uop *node = k->bufs[u->src[0]->arg.i];
    const tg_buffer *b = umap_get(made, node);
    if (!b) b = realize_storage(dev, node);
    if (b == target) ok = u->nsrc == 2 && u->src[1] == store->src[1];
  }
  free(order);
  return ok;
}

/* kernel order with write-after-read edges: a kernel that overwrites a buffer in place runs after every
 * other kernel that reads the old contents. false when no order exists (then nothing runs in place). */
static bool order_kernels(const schedule *s, const device *dev, tg_buffer *const *inplace, const uop_map *made,
                          int *order) {
  int n = s->nkernels;
  size_t nbufs = 1;
  for (int k = 0; k < n; k++) nbufs += (size_t)s->kernels[k].nbufs;
  bool *done = mem_calloc((size_t)n + 1, sizeof *done);
  /* per kernel and read: the producing kernel + 1 (0: none), and the buffer it reads (looked up once, not at
   * every step of the order) */
  int *producer = mem_alloc(nbufs * sizeof *producer), *first = mem_alloc(((size_t)n + 1) * sizeof *first);
  const tg_buffer **reads = mem_alloc(nbufs * sizeof *reads);
  bool ok = done && producer && first && reads, any_inplace = false;
  lib_lock();  /* the nodes' scratch is this pass's: a kernel's output node numbers its producer */
  uint32_t stamp = uop_scratch_stamp();
  for (int k = 0; k < n && ok; k++)
    for (int j = 0; j < s->kernels[k].nout; j++) {
      uop *u = s->kernels[k].bufs[j];
      u->scratch_stamp = stamp;
      u->scratch = k + 1;  /* a node two kernels write: the later one */
      any_inplace |= INPLACE(inplace, k, j) != NULL;
    }
  for (int k = 0, at = 0; k < n && ok; k++) {
    const sched_kernel *sk = &s->kernels[k];
    first[k] = at;
    for (int j = sk->nout; j < sk->nbufs; j++, at++) {
      uop *u = sk->bufs[j];
      producer[at] = u->scratch_stamp == stamp ? u->scratch : 0;
      const tg_buffer *b = NULL;
      if (any_inplace && !(b = umap_get(made, u))) b = realize_storage(dev, u);
      reads[at] = b;
    }
    first[k + 1] = at;
  }
  lib_unlock();
  for (int pos = 0; pos < n && ok; pos++) {
    int pick = -1;
    for (int k = 0; k < n && pick < 0; k++) {
      if (done[k]) continue;
      bool ready = true;
      for (int r = first[k]; r < first[k + 1] && ready; r++)  /* what it reads must be made */
        if (producer[r] && !done[producer[r] - 1]) ready = false;
      const sched_kernel *sk = &s->kernels[k];
      for (int o = 0; ready && o < sk->nout; o++) {  /* and who reads the old contents must have run */
        tg_buffer *ip = INPLACE(inplace, k, o);
        for (int r = 0; ip && r < n && ready; r++) {
          if (r == k || done[r]) continue;
          for (int x = first[r]; x < first[r + 1] && ready; x++)
            if (reads[x] == ip) ready = false;
        }
      }
      if (ready) pick = k;
    }
    if (pick < 0) ok = false;
    else {
      done[pick] = true;
      order[pos] = pick;
    }
  }
  free(producer);
  free(first);
  free(reads);
  free(done);
  return ok;
}

typedef struct holder { const void *buf; int i; } holder;

static int by_buffer(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)((const holder *)x)->buf, b = (uintptr_t)((const holder *)y)->buf;
  return a < b ? -1 : a > b;
}

/* shared[i]: a live tensor other than ts[i] holds the buffer ts[i] is assigned into as its value, or is
 * assigned into it too. Equal graphs are one node, so two tensors made alike (zeros of one shape) share one
 * buffer after a realize; writing it in place would change both. One walk over the live tensors, each
 * looked up among the targets sorted by buffer. NULL when out of memory. */
static bool *shared_targets(const device *dev, tg_tensor *const *ts, int n) {
  bool *shared = mem_calloc((size_t)n + 1, sizeof *shared);
  holder *h = mem_alloc(((size_t)n + 1) * sizeof *h);
  if (!shared || !h) {
    free(shared);
    free(h);
    return NULL;
  }
  int nh = 0;
  for (int i = 0; i < n; i++) {
    tg_buffer *b = ts[i]->assign_target ? realize_storage(dev, ts[i]->assign_target) : NULL;
    if (b) h[nh++] = (holder){b, i};
  }
  qsort(h, (size_t)nh, sizeof *h, by_buffer);
  for (tg_tensor *o = nh ? tensor_live_first() : NULL; o; o = o->next)
    for (int side = 0; side < 2; side++) {
      uop *u = side ? o->assign_target : o->u;
      holder key = {u ? node_stored_buffer(u) : NULL, 0}, *e;
      if (!key.buf || !(e = bsearch(&key, h, (size_t)nh, sizeof *h, by_buffer))) continue;
      while (e > h && e[-1].buf == key.buf) e--;
      for (; e < h + nh && e->buf == key.buf; e++)
        if (ts[e->i] != o) shared[e->i] = true;
    }
  free(h);
  return shared;
}

/* which kernels write into an assigned tensor's old buffer (*inplace) and the order to run them in
 * (*korder). An assigned tensor's kernel writes into its old buffer when that is safe; a window write must.
 * false when a window write has no order that runs it in place (schedule again without windows). */
bool plan_in_place(const schedule *s, const device *dev, tg_tensor *const *ts, int n, const uop_map *made,
                          tg_buffer ***inplace_out, int **korder_out, tg_status *st) {
  uint64_t failed0 = mem_failures();
  tg_buffer **inplace = *inplace_out = mem_calloc(((size_t)s->nkernels + 1) * SCHED_MAX_OUTS, sizeof *inplace);
  int *korder = *korder_out = mem_calloc((size_t)s->nkernels + 1, sizeof *korder);
  if (!inplace || !korder) {
    *st = TG_ERR_NOMEM;
    return true;
  }
  bool *shared = shared_targets(dev, ts, n);
  if (!shared) {
    *st = TG_ERR_NOMEM;
    return true;
  }
  bool windows = false;
  for (int k = 0; k < s->nkernels; k++)
    if (s->kernels[k].window_into) {
      INPLACE(inplace, k, 0) = realize_storage(dev, s->kernels[k].window_into);
      windows = true;
      for (int i = 0; i < n; i++)
        if (ts[i]->assign_target == s->kernels[k].window_into && shared[i]) {
          free(shared);
          return false;
        }
    }
  for (int i = 0; i < n; i++) {
    uop *t = ts[i]->assign_target;
    if (!t || shared[i]) continue;  /* shared: copy on write */
    tg_buffer *tb = realize_storage(dev, t);
    for (int k = 0; k < s->nkernels && tb; k++)
      for (int j = 0; j < s->kernels[k].nout; j++)
        if (!s->kernels[k].window_into && s->kernels[k].bufs[j] == s->roots[i] && uop_numel(t) == uop_numel(s->roots[i]) &&
            t->dtype == s->roots[i]->dtype && reads_only_own_element(&s->kernels[k], j, dev, tb, made))
          INPLACE(inplace, k, j) = tb;
  }
  free(shared);
  bool ordered = order_kernels(s, dev, inplace, made, korder);
  /* the checks above answer "not in place" when they run out of memory: right for one realize, but a JIT
   * capture would then replay writes into a copy while the parameter keeps its old buffer */
  if (mem_failures() != failed0) {
    tg_set_error(TG_ERR_NOMEM, "engine: out of memory planning which kernels write in place");
    *st = TG_ERR_NOMEM;
    return true;
  }
  if (ordered) return true;
  if (windows) return false;
  memset(inplace, 0, (size_t)s->nkernels * SCHED_MAX_OUTS * sizeof *inplace);
  for (int k = 0; k < s->nkernels; k++) korder[k] = k;
  return true;
}
