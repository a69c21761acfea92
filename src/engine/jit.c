/* jit.c — capture a step's kernels once, replay them.
 *
 * Call 1 runs the step (compiling what it needs). Call 2 runs it again with the capture hook on: every
 * launch is recorded with its program and buffers (all retained, so nothing they point at is freed).
 * Later calls check the inputs, swap the captured input buffers for the new ones and launch the records in
 * order: no graph is built, nothing is scheduled, compiled or allocated. Parameters and optimizer state are
 * updated in place (tg_assign writes into the old buffer), so their buffers are the same in every replay.
 *
 * A call holds the library lock throughout (uop.h); a capture is per thread, so another thread's realize
 * is never recorded into it. A tg_jit itself is used by one thread at a time (tg.h).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/jit.h"
#include "engine/memplan.h"
#include "tensor/tensor.h"
#include "uop/env.h"

/* a captured input's buffer sits in slot `slot` of launch `launch`: replays put the new input there */
typedef struct jit_patch { int launch, slot, input; } jit_patch;

struct tg_jit {
  tg_jit_fn fn;
  void *ctx;
  int nin, nout, calls;
  jit_capture cap;
  bool captured;
  tg_buffer **in_bufs;     /* the inputs' buffers during the capture */
  tg_buffer **out_bufs;    /* the outputs' buffers (retained) */
  uop **in_shape;          /* the captured inputs' nodes: shapes and dtypes to check against */
  uop **out_shape;
  /* prepared launches: the argument pointers of launch k are ptrs[k][0..nbufs) */
  void ***ptrs;
  jit_patch *patches;
  int npatches;
  tg_buffer **copy_src;    /* per launch: a copy's source when it is this replay's input (else NULL) */
  /* memory plan: intermediates live in one arena */
  tg_buffer *arena;
  plan_item *plan;
  int nplan;
  size_t bytes_unplanned;  /* what the intermediates took before planning */
};

static _Thread_local jit_capture *active TG_TLS_FAST;  /* the capture this thread is running */
static atomic_bool poison;

jit_capture *jit_capturing(void) { return active; }
bool engine_capturing(void) { return active != NULL; }

void jit_set_poison(bool on) { atomic_store_explicit(&poison, on, memory_order_relaxed); }

static bool grow(jit_capture *c) {
  if (c->n < c->cap) return true;
  int nc = c->cap ? c->cap * 2 : 64;
  jit_launch *nl = mem_realloc(c->launches, (size_t)nc * sizeof *nl);
  if (!nl) { c->failed = true; return false; }
  c->launches = nl;
  c->cap = nc;
  return true;
}

void jit_record(jit_capture *c, const device *dev, tg_program *prog, tg_buffer *const *bufs, int nbufs, int nout,
                int nthreads, double flops, double bytes) {
  if (c->failed) return;
  if (!grow(c)) return;
  tg_buffer **copy = mem_alloc((size_t)(nbufs ? nbufs : 1) * sizeof *copy);
  if (!copy) { c->failed = true; return; }
  for (int i = 0; i < nbufs; i++) {
    copy[i] = bufs[i];
    buffer_retain(bufs[i]);
  }
  program_retain(prog);
  c->launches[c->n++] = (jit_launch){.prog = prog, .dev = dev, .nbufs = nbufs, .nout = nout, .nthreads = nthreads,
                                     .bufs = copy, .flops = flops, .bytes = bytes};
}

void jit_record_copy(jit_capture *c, tg_buffer *dst, tg_buffer *src, size_t nbytes) {
  if (c->failed || !grow(c)) return;
  tg_buffer **b = mem_alloc(2 * sizeof *b);
  if (!b) { c->failed = true; return; }
  b[0] = dst;
  b[1] = src;
  buffer_retain(dst);
  buffer_retain(src);
  c->launches[c->n++] = (jit_launch){.dev = dst->dev, .src_dev = src->dev, .nbufs = 2, .nout = 1, .bufs = b, .nbytes = nbytes,
                                     .bytes = (double)nbytes};
}

/* random.c tells of every draw while a step is captured */
static void note_rng(void *ctx, void *buf, uint64_t base, uint64_t n) {
  jit_capture *c = ctx;
  if (c->failed || !buf) return;
  if (c->nrng == c->caprng) {
    int nc = c->caprng ? c->caprng * 2 : 16;
    jit_rng *nr = mem_realloc(c->rng, (size_t)nc * sizeof *nr);
    if (!nr) { c->failed = true; return; }
    c->rng = nr;
    c->caprng = nc;
  }
  buffer_retain(buf);
  c->rng[c->nrng++] = (jit_rng){.buf = buf, .base = base, .n = n};
}

static void capture_clear(jit_capture *c) {
  for (int i = 0; i < c->n; i++) {
    for (int b = 0; b < c->launches[i].nbufs; b++) buffer_release(c->launches[i].bufs[b]);
    free(c->launches[i].bufs);
    program_release(c->launches[i].prog);
  }
  for (int i = 0; i < c->nrng; i++) buffer_release(c->rng[i].buf);
  free(c->launches);
  free(c->rng);
  *c = (jit_capture){0};
}

/* drops the capture and everything prepared from it */
static void jit_reset(tg_jit *j) {
  capture_clear(&j->cap);
  if (j->ptrs) free(j->ptrs[0]);
  free(j->ptrs);
  free(j->patches);
  free(j->copy_src);
  free(j->plan);
  buffer_release(j->arena);
  j->ptrs = NULL;
  j->patches = NULL;
  j->copy_src = NULL;
  j->plan = NULL;
  j->arena = NULL;
  j->npatches = j->nplan = 0;
  j->bytes_unplanned = 0;
}

tg_jit *tg_jit_new(tg_jit_fn fn, void *ctx, int nin, int nout) {
  if (!fn || nin < 0 || nout < 0) {
    tg_set_error(TG_ERR_ARG, "tg_jit_new: %s", !fn ? "the step function is NULL" : "negative input or output count");
    return NULL;
  }
  tg_jit *j = mem_calloc(1, sizeof *j);
  if (j) {
    j->in_bufs = mem_calloc((size_t)nin + 1, sizeof *j->in_bufs);
    j->out_bufs = mem_calloc((size_t)nout + 1, sizeof *j->out_bufs);
    j->in_shape = mem_calloc((size_t)nin + 1, sizeof *j->in_shape);
    j->out_shape = mem_calloc((size_t)nout + 1, sizeof *j->out_shape);
  }
  if (!j || !j->in_bufs || !j->out_bufs || !j->in_shape || !j->out_shape) {
    tg_jit_free(j);
    tg_set_error(TG_ERR_NOMEM, "tg_jit_new: out of memory");
    return NULL;
  }
  *j = (tg_jit){.fn = fn, .ctx = ctx, .nin = nin, .nout = nout, .in_bufs = j->in_bufs, .out_bufs = j->out_bufs,
                .in_shape = j->in_shape, .out_shape = j->out_shape};
  return j;
}

static void mark_jit(void *ctx) {
  tg_jit *j = ctx;
  for (int i = 0; i < j->nin; i++) uop_mark(j->in_shape[i]);
  for (int i = 0; i < j->nout; i++) uop_mark(j->out_shape[i]);
}

void tg_jit_free(tg_jit *j) {
  if (!j) return;
  lib_lock();  /* a collection on another thread may be marking from it */
  uop_gc_remove_roots(mark_jit, j);
  lib_unlock();
  jit_reset(j);
  for (int i = 0; i < j->nout; i++) buffer_release(j->out_bufs[i]);
  free(j->in_bufs);
  free(j->out_bufs);
  free(j->in_shape);
  free(j->out_shape);
  free(j);
}

static int count_kernels(const jit_capture *c) {
  int n = 0;
  for (int k = 0; k < c->n; k++) n += c->launches[k].prog != NULL;  /* copies aside */
  return n;
}

int tg_jit_kernels(const tg_jit *j) { return j && j->captured ? count_kernels(&j->cap) : 0; }

static bool same_kind(const uop *a, const uop *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* runs the step normally; realizes the outputs so their kernels are part of the step */
static tg_status run_step(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  for (int i = 0; i < j->nout; i++) out[i] = NULL;
  tg_status st = j->fn(j->ctx, j->nin, in, j->nout, out);
  for (int i = 0; i < j->nout && st == TG_OK; i++)
    if (!out[i]) {
      if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_jit_call: the step returned no tensor for output %d", i);
      st = tg_error_status();
    }
  if (st == TG_OK) st = tg_realize_many(j->nout, out);
  if (st != TG_OK)
    for (int i = 0; i < j->nout; i++) { tg_free(out[i]); out[i] = NULL; }
  return st;
}

/* the distinct buffers of a capture with the facts the planner needs */
typedef struct buf_use {
  tg_buffer *buf;
  int slots;          /* launch slots that hold it (each one retained it) */
  int first, last;    /* first and last launch that touch it */
  bool written_first; /* the first launch writes it (an output slot) and does not read it */
  bool gpu_copy;      /* a GPU buffer a copy reads or writes: the device's copy functions take whole buffers */
} buf_use;

static const char *launch_name(const jit_launch *l) { return l->prog ? l->prog->name : "copy"; }

static int find_use(buf_use *u, int n, const tg_buffer *b) {
  for (int i = n - 1; i >= 0; i--)  /* recent buffers are the likely ones */
    if (u[i].buf == b) return i;
  return -1;
}

/* Intermediates are the buffers only the capture still holds, first written by a kernel of the step: no one
 * outside can see them and no value of theirs survives from one replay to the next. They move into one
 * arena placed by lifetime; parameters, optimizer state, inputs, outputs and random counters keep theirs. */
static tg_status plan_memory(tg_jit *j, const device *dev) {
  /* an OpenCL buffer is a handle, not an address: no offsets into an arena (each keeps its own buffer) */
  if (!dev || dev->kind == DEVICE_CL) return TG_OK;
  jit_capture *c = &j->cap;
  int total = 0;
  for (int k = 0; k < c->n; k++) total += c->launches[k].nbufs;
  buf_use *use = mem_alloc((size_t)(total ? total : 1) * sizeof *use);
  int *slot_use = mem_alloc((size_t)(total ? total : 1) * sizeof *slot_use);  /* launch slots in order -> use */
  if (!use || !slot_use) {
    free(use);
    free(slot_use);
    return TG_ERR_NOMEM;
  }
  int nuse = 0;
  for (int k = 0, s = 0; k < c->n; k++)
    for (int b = 0; b < c->launches[k].nbufs; b++, s++) {
      tg_buffer *buf = c->launches[k].bufs[b];
      int u = slot_use[s] = find_use(use, nuse, buf);
      if (u < 0) {
        u = slot_use[s] = nuse++;
        use[u] = (buf_use){.buf = buf, .first = k, .written_first = b < c->launches[k].nout};
      } else if (use[u].first == k) {
        use[u].written_first = false;  /* read and written by the same kernel: its old value matters */
      }
      use[u].slots++;
      use[u].last = k;
      use[u].gpu_copy |= !c->launches[k].prog && device_is_gpu(buf->dev);
    }
  j->plan = mem_alloc((size_t)(nuse ? nuse : 1) * sizeof *j->plan);
  int *item_of = mem_alloc((size_t)(nuse ? nuse : 1) * sizeof *item_of);
  if (!j->plan || !item_of) {
    free(use);
    free(slot_use);
    free(item_of);
    return TG_ERR_NOMEM;
  }
  j->nplan = 0;
  for (int u = 0; u < nuse; u++) {
    tg_buffer *b = use[u].buf;
    /* one arena, on the default device: buffers of a step's other devices keep their own */
    bool mine = !b->wrapped && b->dev == dev && !use[u].gpu_copy &&
                __atomic_load_n(&b->refcnt, __ATOMIC_RELAXED) == use[u].slots;
    for (int i = 0; i < j->nin && mine; i++) mine = b != j->in_bufs[i];  /* replays patch inputs in */
    item_of[u] = -1;
    if (!mine || !use[u].written_first) continue;
    item_of[u] = j->nplan;
    j->plan[j->nplan++] = (plan_item){.nbytes = b->nbytes, .first = use[u].first, .last = use[u].last};
    if (tg_debug_level() >= 3)  /* what the arena holds: the kernel writing each buffer, its size and life */
      fprintf(stderr, "jit: arena item %d: %.2f MB written by %s (kernel %d), last read by %s (kernel %d)\n",
              j->nplan - 1, b->nbytes / 1e6, launch_name(&c->launches[use[u].first]), use[u].first,
              launch_name(&c->launches[use[u].last]), use[u].last);
    j->bytes_unplanned += (b->nbytes + 63) & ~(size_t)63;  /* as the allocator takes it */
  }
  tg_status st = TG_OK;
  size_t arena = memplan_assign(j->plan, j->nplan, 64);
  /* the eager run's intermediates go before the arena comes (each slot held a reference), and so does the cache
   * they went to: the step's peak is the larger of the two, not their sum. A capture whose arena then fails is
   * reset whole (tg_jit_call), so nothing needs the old buffers after this. */
  for (int k = 0, s = 0; k < c->n; k++)
    for (int b = 0; b < c->launches[k].nbufs; b++, s++)
      if (item_of[slot_use[s]] >= 0) {
        buffer_release(c->launches[k].bufs[b]);
        c->launches[k].bufs[b] = NULL;
      }
  if (j->nplan && dev->flush_cache) dev->flush_cache(dev);
  if (arena == (size_t)-1) st = TG_ERR_NOMEM;
  else if (j->nplan && !(j->arena = buffer_new(dev, arena))) st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  memory_mark_arena(j->arena);
  /* point the prepared launches into the arena */
  for (int k = 0, s = 0; k < c->n && st == TG_OK; k++)
    for (int b = 0; b < c->launches[k].nbufs; b++, s++) {
      int it = item_of[slot_use[s]];
      if (it >= 0) j->ptrs[k][b] = (char *)j->arena->ptr + j->plan[it].offset;
    }
  if (st == TG_OK && tg_debug_level() >= 1)
    fprintf(stderr, "jit: captured %d kernels and %d copies; %d intermediate buffers of %.2f MB planned into one arena of %.2f MB "
            "(peak live %.2f MB)\n", count_kernels(c), c->n - count_kernels(c), j->nplan, j->bytes_unplanned / 1e6, arena / 1e6,
            memplan_peak_live(j->plan, j->nplan) / 1e6);
  free(use);
  free(slot_use);
  free(item_of);
  return st;
}

/* the argument arrays of every launch, and where the inputs go in them */
static tg_status prepare_launches(tg_jit *j) {
  jit_capture *c = &j->cap;
  size_t total = 0;
  int npatch = 0;
  for (int k = 0; k < c->n; k++) {
    total += (size_t)c->launches[k].nbufs;
    for (int b = 0; b < c->launches[k].nbufs; b++)
      for (int i = 0; i < j->nin; i++)
        if (c->launches[k].bufs[b] == j->in_bufs[i]) { npatch++; break; }
  }
  j->ptrs = mem_calloc((size_t)c->n + 1, sizeof *j->ptrs);
  j->copy_src = mem_calloc((size_t)c->n + 1, sizeof *j->copy_src);
  void **all = mem_alloc((total ? total : 1) * sizeof *all);
  j->patches = mem_alloc((size_t)(npatch ? npatch : 1) * sizeof *j->patches);
  if (!j->ptrs || !all || !j->patches || !j->copy_src) {
    free(all);
    return TG_ERR_NOMEM;
  }
  j->ptrs[0] = all;
  for (int k = 0; k < c->n; k++) {
    j->ptrs[k] = all;
    for (int b = 0; b < c->launches[k].nbufs; b++) {
      tg_buffer *buf = c->launches[k].bufs[b];
      all[b] = buf->ptr;
      for (int i = 0; i < j->nin; i++)
        if (buf == j->in_bufs[i]) {
          j->patches[j->npatches++] = (jit_patch){.launch = k, .slot = b, .input = i};
          break;
        }
    }
    all += c->launches[k].nbufs;
  }
  return TG_OK;
}

/* a new view node over a copy of t's value (t realized, on buffer b) in a buffer of its own */
static uop *copy_value(const device *dev, tg_tensor *t, tg_buffer *b) {
  uop *u = t->u;
  tg_buffer *nb = buffer_new(dev, b->nbytes);
  void *tmp = nb ? mem_alloc(b->nbytes) : NULL;
  tg_status st = !nb || !tmp ? TG_ERR_NOMEM : b->dev->copyout(tmp, b, b->nbytes);
  if (st == TG_OK) st = dev->copyin(nb, tmp, b->nbytes);
  free(tmp);
  uop *bn = st == TG_OK ? mk_buffer((tg_dtype)u->dtype, uop_numel(u), nb) : NULL;
  uop *view = bn ? mk_reshape(bn, u->ndim, u->shape) : NULL;
  if (!bn) buffer_release(nb);  /* else the node holds it until it is collected */
  if (!view && !tg_error_status())
    tg_set_error(st == TG_OK ? TG_ERR_NOMEM : st, "tg_jit_call: out of memory copying an input for the capture");
  return view;
}

/* The inputs the captured step reads (cin): each on a buffer that holds its value and nothing else. Replays
 * put each new input's buffer where the capture found that one, so a buffer the capture also read as another
 * input, as a parameter, or as another graph's cached value (equal graphs are one node and share their
 * value) would be swapped for the new input there too. An input whose buffer is not only its own moves onto
 * a copy (the caller's tensor keeps its value); the same tensor passed twice gets a private tensor on a copy
 * for the second place (*extra, freed by the caller). */
static tg_status own_inputs(tg_jit *j, tg_tensor *const *in, tg_tensor **cin, tg_tensor **extra) {
  const device *dev = device_default();
  if (!dev) return tg_error_status() ? tg_error_status() : TG_ERR_DEVICE;
  uop_cache_invalidate();  /* values realized before the step would let the capture skip their kernels */
  uop_gc();                /* dead nodes and dropped values let go of their buffers: a count is its holders */
  for (int i = 0; i < j->nin; i++) {
    cin[i] = in[i];
    extra[i] = NULL;
    j->in_shape[i] = in[i]->u;
    if (in[i]->u->op == OP_MULTI) {  /* replays patch one buffer per input */
      tg_set_error(TG_ERR_ARG, "tg_jit_call: input %d is sharded (tg_shard): a captured step takes whole tensors; "
                   "pass it whole and shard it inside the step", i);
      return TG_ERR_ARG;
    }
    tg_buffer *b = tensor_storage(in[i]);
    if (!b) return tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
    bool twice = false, shared = __atomic_load_n(&b->refcnt, __ATOMIC_RELAXED) > 1;
    for (int k = 0; k < i; k++) {
      twice |= in[k] == in[i];
      shared |= b == j->in_bufs[k];
    }
    if (twice || shared) {
      uop *v = copy_value(dev, in[i], b);
      if (!v) return tg_error_status();
      if (twice && !(cin[i] = extra[i] = tensor_new_unscoped(v))) return tg_error_status();
      if (!twice) in[i]->u = v;
      b = tensor_storage(cin[i]);
    }
    j->in_bufs[i] = b;
  }
  return TG_OK;
}

static tg_status capture(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  jit_reset(j);
  for (int i = 0; i < j->nout; i++) out[i] = NULL;
  /* the input nodes live on for the shape checks of replays */
  tg_tensor **cin = uop_gc_add_roots(mark_jit, j) ? mem_calloc(2 * (size_t)j->nin + 1, sizeof *cin) : NULL;
  tg_tensor **extra = cin ? cin + j->nin : NULL;
  tg_status st = cin ? own_inputs(j, in, cin, extra) : TG_ERR_NOMEM;
  if (st == TG_OK) {
    active = &j->cap;
    rng_set_observer(note_rng, &j->cap);
    st = run_step(j, cin, out);
  }
  for (int i = 0; cin && i < j->nin; i++) tg_free(extra[i]);
  free(cin);
  rng_set_observer(NULL, NULL);
  active = NULL;
  if (st == TG_OK && j->cap.failed) {  /* a host read inside the step (its error is set), or no memory */
    st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
    if (st == TG_ERR_NOMEM) tg_set_error(st, "tg_jit_call: out of memory recording the step");
  }
  for (int i = 0; i < j->nout && st == TG_OK; i++) {
    if (out[i]->u->op == OP_MULTI) {
      tg_set_error(TG_ERR_ARG, "tg_jit_call: output %d is sharded (tg_shard): a captured step returns whole tensors; "
                   "return tg_to(output, a device) from the step", i);
      st = TG_ERR_ARG;
      break;
    }
    j->out_bufs[i] = tensor_storage(out[i]);
    if (!j->out_bufs[i]) {
      tg_set_error(TG_ERR_INTERNAL, "tg_jit_call: output %d has no buffer after the step", i);
      st = TG_ERR_INTERNAL;
      break;
    }
    buffer_retain(j->out_bufs[i]);
    j->out_shape[i] = out[i]->u;
  }
  if (st == TG_OK) st = prepare_launches(j);
  if (st == TG_OK) uop_gc();  /* nodes of the step's dropped tensors let go of their buffers */
  if (st == TG_OK) st = plan_memory(j, device_default());
  if (st != TG_OK) {
    if (st == TG_ERR_NOMEM && !tg_error_status()) tg_set_error(st, "tg_jit_call: out of memory preparing the replay");
    jit_reset(j);
    for (int i = 0; i < j->nout; i++) {
      buffer_release(j->out_bufs[i]);
      j->out_bufs[i] = NULL;
      tg_free(out[i]);
      out[i] = NULL;
    }
    uop_gc_remove_roots(mark_jit, j);
    return st;
  }
  j->captured = true;
  return TG_OK;
}

/* a recorded copy again (p: its slots' pointers, which may be in the arena; src: this replay's input when
 * the copy reads one): host memory straight across, else with the devices' copy functions as place.c copies */
static tg_status replay_copy(const jit_launch *l, void *const *p, tg_buffer *src) {
  tg_buffer *db = l->bufs[0], *sb = src ? src : l->bufs[1];
  const device *dd = l->dev, *sd = l->src_dev;
  size_t n = l->nbytes;
  if (!n) return TG_OK;
  if (!device_is_gpu(sd) && !device_is_gpu(dd)) {
    memcpy(p[0], p[1], n);
    return TG_OK;
  }
  if (sd == dd && dd->copy) return dd->copy(db, 0, sb, 0, n);
  if (!device_is_gpu(sd)) return dd->copyin(db, p[1], n);
  if (!device_is_gpu(dd)) return sd->copyout(p[0], sb, n);
  void *tmp = mem_alloc(n);  /* GPU to another GPU through the host */
  tg_status st = tmp ? sd->copyout(tmp, sb, n) : TG_ERR_NOMEM;
  if (st == TG_OK) st = dd->copyin(db, tmp, n);
  if (!tmp) tg_set_error(st, "tg_jit_call: out of memory staging a %zu-byte copy from %s to %s", n, sd->name, dd->name);
  free(tmp);
  return st;
}

static tg_status replay(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  const device *dev = device_default();
  if (!dev) return tg_error_status();
  tg_status st = TG_OK;
  memset(j->copy_src, 0, (size_t)j->cap.n * sizeof *j->copy_src);
  /* random draws take their next counters, as the same step run eagerly would */
  if (j->cap.nrng) {
    uint64_t drawn = 0;
    for (int r = 0; r < j->cap.nrng; r++) drawn += j->cap.rng[r].n;
    uint64_t now = rng_advance(drawn);
    for (int r = 0; r < j->cap.nrng && st == TG_OK; r++) {
      uint32_t v[4];
      rng_draw_words(now + (j->cap.rng[r].base - j->cap.rng[0].base), v);
      st = j->cap.rng[r].buf->dev->copyin(j->cap.rng[r].buf, v, sizeof v);
    }
  }
  for (int p = 0; p < j->npatches && st == TG_OK; p++) {
    tg_buffer *b = tensor_storage(in[j->patches[p].input]);
    if (!b) st = tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
    else {
      j->ptrs[j->patches[p].launch][j->patches[p].slot] = b->ptr;
      if (!j->cap.launches[j->patches[p].launch].prog) j->copy_src[j->patches[p].launch] = b;  /* only ever read */
    }
  }
  /* the outputs' tensors first: once the kernels ran, nothing may fail (the parameters are written) */
  for (int i = 0; i < j->nout; i++) out[i] = NULL;
  for (int i = 0; i < j->nout && st == TG_OK; i++) {
    uop *o = j->out_shape[i];
    tg_buffer *b = j->out_bufs[i];
    for (int k = 0; k < j->nin; k++)  /* a step that returns an input returns this call's input */
      if (b == j->in_bufs[k]) b = tensor_storage(in[k]);
    buffer_retain(b);
    uop *bn = mk_buffer((tg_dtype)o->dtype, uop_numel(o), b);
    if (!bn) buffer_release(b);  /* else the node holds it */
    out[i] = tensor_new(mk_reshape(bn, o->ndim, o->shape));
    if (!out[i]) st = TG_ERR_NOMEM;
  }
  if (atomic_load_explicit(&poison, memory_order_relaxed) && j->arena && !device_is_gpu(dev)) memset(j->arena->ptr, 0xff, j->arena->nbytes);
  bool timed = tg_debug_level() >= 2;  /* a line per kernel, as eager runs print */
  double total_ms = 0;
  for (int k = 0; k < j->cap.n && st == TG_OK; k++) {
    const jit_launch *l = &j->cap.launches[k];
    double k0 = timed ? engine_now_ms() : 0, dev_ms = -1;
    if (l->prog)
      st = l->dev->launch(l->prog, j->ptrs[k], l->nbufs, l->nthreads, timed && device_is_gpu(l->dev) ? &dev_ms : NULL);
    else st = replay_copy(l, j->ptrs[k], j->copy_src[k]);
    if (timed && st == TG_OK) {
      double ms = dev_ms >= 0 ? dev_ms : engine_now_ms() - k0;
      total_ms += ms;
      engine_print_kernel(l->dev->name, k, launch_name(l), l->nbufs, l->flops, l->bytes, ms, total_ms);
    }
  }
  uop_cache_invalidate();  /* the replay wrote parameters and outputs in place */
  for (int i = 0; i < j->nout && st == TG_OK; i++) {
    uop *bn = out[i]->u->op == OP_RESHAPE ? out[i]->u->src[0] : out[i]->u;
    bn->epoch = ((tg_buffer *)bn->buf)->writes;
  }
  if (st != TG_OK)
    for (int i = 0; i < j->nout; i++) { tg_free(out[i]); out[i] = NULL; }
  return st;
}

bool jit_plan_ok(const tg_jit *j, char *why, size_t whylen) {
  if (!j || !j->captured) {
    snprintf(why, whylen, "nothing captured");
    return false;
  }
  return memplan_check(j->plan, j->nplan, j->arena ? j->arena->nbytes : 0, why, whylen);
}

tg_status tg_jit_memory(const tg_jit *j, size_t *before, size_t *after) {
  if (!j || !j->captured) {
    tg_set_error(TG_ERR_ARG, "tg_jit_memory: %s", j ? "the step is not captured yet (it is on the second call)" : "the JIT is NULL");
    return TG_ERR_ARG;
  }
  if (before) *before = j->bytes_unplanned;
  if (after) *after = j->arena ? j->arena->nbytes : 0;
  return TG_OK;
}

static tg_status jit_call(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  if (!j || (j->nin && !in) || (j->nout && !out)) {
    tg_set_error(TG_ERR_ARG, "tg_jit_call: %s", !j ? "the JIT is NULL" : "NULL input or output array");
    return TG_ERR_ARG;
  }
  if (active) {
    tg_set_error(TG_ERR_ARG, "tg_jit_call: a JIT step may not call another JIT while it is being captured");
    return TG_ERR_ARG;
  }
  tg_status est = env_check(ENV_BIT(ENV_JIT));  /* JIT=x is an error, not "on" (env.h) */
  if (est != TG_OK) return est;
  for (int i = 0; i < j->nin; i++) {
    if (!in[i]) {
      if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_jit_call: input %d is NULL", i);
      return tg_error_status();
    }
    if (j->captured && !same_kind(in[i]->u, j->in_shape[i])) {
      char a[256], b[256];
      tg_set_error(TG_ERR_ARG, "tg_jit_call: input %d is %s %s, the captured step took %s %s", i,
                   tg_dtype_name((tg_dtype)in[i]->u->dtype), shape_str(a, sizeof a, in[i]->u->ndim, in[i]->u->shape),
                   tg_dtype_name((tg_dtype)j->in_shape[i]->dtype),
                   shape_str(b, sizeof b, j->in_shape[i]->ndim, j->in_shape[i]->shape));
      return TG_ERR_ARG;
    }
  }
  tg_status st = tg_realize_many(j->nin, in);  /* inputs are values with buffers before the step reads them */
  if (st != TG_OK) return st;
  j->calls++;
  if (j->calls == 1 || !env_get()->jit) return run_step(j, in, out);
  if (!j->captured) {
    st = capture(j, in, out);
    if (st != TG_OK) j->calls = 1;  /* the JIT stays usable: the next call tries to capture again */
    return st;
  }
  return replay(j, in, out);
}

tg_status tg_jit_call(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  lib_region_begin();
  tg_status st = jit_call(j, in, out);
  lib_region_end();
  return st;
}
