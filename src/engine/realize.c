/* realize.c — runs a schedule: codegen + render + compile each kernel (cached by its AST, which is
 * interned, so equal kernels are one pointer), allocate buffers, launch, and make the realized tensors
 * point at their buffers (which kernels write into an assigned tensor's old buffer: inplace.c). DEBUG=1 prints
 * kernel counts, 2 a line per kernel, 3 the AST, 4 the source.
 *
 * A realize holds the library lock from start to end (uop.h), kernel runs included: the kernel cache, the
 * collector and the buffers of interned nodes stay as it found them, and kernels of two threads take turns
 * on the one CPU pool anyway. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "codegen/opt.h"
#include "engine/engine.h"
#include "engine/inplace.h"
#include "engine/jit.h"
#include "engine/memplan.h"
#include "engine/place.h"
#include "engine/render_cache.h"
#include "engine/schedule_cache.h"
#include "engine/search.h"
#include "render/render.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "uop/env.h"

typedef struct compiled {
  tg_program *prog;
  kernel_info info;
  int nparams;
} compiled;

static uop_map kcache;         /* kernel AST -> compiled, for kcache_dev */
static const device *kcache_dev;
static const device *sched_dev;  /* of the schedule cache */
static tg_stats stats;
static _Thread_local uint64_t last_kernels TG_TLS_FAST;  /* of this thread's last realize */
/* kernels launched per device (tests check that a sharded step runs each device's kernels once) */
static struct { const device *dev; uint64_t n; } kernels_on[16];

#define KCACHE_MAX 4096

static void kcache_clear(void) {
  for (size_t i = 0; i < kcache.cap; i++)
    if (kcache.keys[i]) {
      compiled *c = kcache.vals[i];
      program_release(c->prog);
      free(c);
    }
  umap_free(&kcache);
}

static void mark_kcache(void *ctx) {
  for (size_t i = 0; i < kcache.cap; i++)
    if (kcache.keys[i]) uop_mark(kcache.keys[i]);
}

double engine_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void engine_print_kernel(const char *dev, int k, const char *name, int nbufs, double flops, double bytes, double ms,
                         double total_ms) {
  fprintf(stderr, "*** %-4s %4d %-32s arg %2d mem %6.3f GB tm %10.2fus/%10.2fms (%8.2f GFLOPS %7.2f GB/s)\n", dev, k,
          name, nbufs, bytes / 1e9, ms * 1e3, total_ms, ms > 0 ? flops / (ms * 1e6) : 0, ms > 0 ? bytes / (ms * 1e6) : 0);
}

/* the kernel's source in the device's language; GPU kernels set *shape */
static char *render_for(const device *dev, const linear_program *lp, const kernel_info *info, launch_shape *shape) {
  if (!device_is_gpu(dev)) return render_c(info->name, lp, info);
  return render_gpu(dev->kind == DEVICE_CL ? LANG_OPENCL : LANG_CUDA, info->name, lp, info, shape);
}

static void (*kernel_observer)(uop *ast);

void engine_set_kernel_observer(void (*fn)(uop *ast)) {
  lib_lock();
  kernel_observer = fn;
  lib_unlock();
}

/* the kernel optimized for dev and rendered in its language (info, *shape for GPUs); NULL with tg_error set */
static char *kernel_source(const device *dev, uop *ast, kernel_info *info, int *nparams, launch_shape *shape) {
  int dbg = tg_debug_level();
  char *kept;
  render_key key;
  bool keyed = render_cache_key(dev, ast, &key);  /* the file to read, and to write after a render */
  if (keyed && render_cache_get(&key, info, nparams, shape, &kept)) {
    if (dbg >= 2 && info->opts[0]) fprintf(stderr, "opts %s: %s\n", info->name, info->opts);
    return kept;
  }
  uint64_t failed0 = mem_failures();
  const env_values *env = env_get();  /* checked by the realize that got here */
  bool gpu = device_is_gpu(dev);
  int width = env->noopt ? 0 : env->beam;
  uop *dec = decompose_dtypes(ast, !gpu);
  uop *opt = width > 0 ? engine_beam(dev, dec, width, info)
           : gpu       ? codegen_optimize_for(dec, codegen_gpu_target(), info)
                       : codegen_optimize(dec, dev->num_threads(dev), info);
  if (!opt) return NULL;
  if (dbg >= 2 && info->opts[0]) fprintf(stderr, "opts %s: %s\n", info->name, info->opts);
  if (dbg >= 3) {
    char *s = uop_to_string(opt);
    if (s) fprintf(stderr, "kernel %s:\n%s", info->name, s);
    free(s);
  }
  linear_program lp = {0};
  if (!linearize(opt, &lp, info)) return NULL;
  *nparams = lp.nparams;
  memset(shape, 0, sizeof *shape);
  char *src = render_for(dev, &lp, info, shape);
  linear_program_free(&lp);
  if (src && keyed && mem_failures() == failed0) render_cache_put(&key, info, *nparams, shape, src);
  return src;
}

/* A kernel rendered ahead of its compile: prebuild_kernels renders the new kernels of a schedule, get_kernel
 * takes their sources from here instead of rendering them again (codegen was a fifth of MNIST's first step) */
typedef struct rendered {
  uop *ast;
  char *src;
  kernel_info info;
  int nparams;
  launch_shape shape;
} rendered;

typedef struct rendered_set { rendered *r; int n; } rendered_set;

static void rendered_free(rendered_set *rs) {
  for (int i = 0; i < rs->n; i++) free(rs->r[i].src);
  free(rs->r);
  memset(rs, 0, sizeof *rs);
}

/* the source rendered ahead for ast, handed over (NULL when there is none) */
static rendered *rendered_take(rendered_set *rs, uop *ast) {
  for (int i = 0; i < rs->n; i++)
    if (rs->r[i].ast == ast && rs->r[i].src) return &rs->r[i];
  return NULL;
}

/* A driver with a large cost per build (dev->prebuild) gets the new kernels of a schedule at once, before
 * get_kernel compiles them one by one: the CPU compiles or loads them several at a time, PoCL's builds take
 * ~0.5 s each. The sources stay in *rs for get_kernel. A kernel rendered while an allocation failed is not
 * kept (get_kernel renders it again and refuses it if memory still runs out) */
static void prebuild_kernels(const device *dev, const schedule *s, rendered_set *rs) {
  memset(rs, 0, sizeof *rs);
  if (!dev->prebuild || s->nkernels < 2) return;
  rs->r = mem_calloc((size_t)s->nkernels, sizeof *rs->r);
  const char **np = mem_alloc((size_t)s->nkernels * sizeof *np);
  const char **srcs = mem_alloc((size_t)s->nkernels * sizeof *srcs);
  if (!rs->r || !np || !srcs) {
    free(np);
    free(srcs);
    rendered_free(rs);
    return;
  }
  for (int k = 0; k < s->nkernels; k++) {
    uop *ast = s->kernels[k].ast;
    bool seen = umap_get(&kcache, ast) != NULL;
    for (int j = 0; j < rs->n && !seen; j++) seen = rs->r[j].ast == ast;
    if (seen) continue;
    rendered *r = &rs->r[rs->n];
    uint64_t failed0 = mem_failures();
    r->src = kernel_source(dev, ast, &r->info, &r->nparams, &r->shape);
    if (r->src && mem_failures() != failed0) {
      free(r->src);
      r->src = NULL;
    }
    if (!r->src) continue;
    r->ast = ast;
    np[rs->n] = r->info.name;
    srcs[rs->n] = r->src;
    rs->n++;
  }
  if (rs->n >= 2) dev->prebuild(dev, rs->n, np, srcs);
  free(np);
  free(srcs);
}

static compiled *get_kernel(const device *dev, uop *ast, rendered_set *rs) {
  if (dev != kcache_dev) {  /* DEV changed (tests reload the environment): kernels of another device */
    kcache_clear();
    kcache_dev = dev;
  }
  compiled *c = umap_get(&kcache, ast);
  if (c) return c;
  if (kernel_observer) kernel_observer(ast);
  int dbg = tg_debug_level();
  /* the passes below take an allocation that fails for "no change" here and there (a heuristic without its
   * analysis, a name cut short): a kernel made while memory ran out is refused, never cached */
  uint64_t failed0 = mem_failures();
  c = mem_calloc(1, sizeof *c);
  if (!c) {
    tg_set_error(TG_ERR_NOMEM, "engine: out of memory");
    return NULL;
  }
  bool gpu = device_is_gpu(dev);
  launch_shape shape;
  char *src;
  rendered *pre = rs ? rendered_take(rs, ast) : NULL;
  if (pre) {
    src = pre->src;
    pre->src = NULL;
    c->info = pre->info;
    c->nparams = pre->nparams;
    shape = pre->shape;
  } else {
    src = kernel_source(dev, ast, &c->info, &c->nparams, &shape);
  }
  if (!src) goto fail;
  if (dbg >= 4) fprintf(stderr, "%s\n", src);
  c->prog = mem_failures() == failed0 ? dev->compile(dev, c->info.name, src) : NULL;
  free(src);
  if (!c->prog) {
    if (mem_failures() != failed0) tg_set_error(TG_ERR_NOMEM, "engine: out of memory making kernel %s", c->info.name);
    goto fail;
  }
  if (gpu) {  /* the shape is the source's: a program shared by equal sources has the same one */
    memcpy(c->prog->global, shape.global, sizeof shape.global);
    memcpy(c->prog->local, shape.local, sizeof shape.local);
  }
  if (kcache.n >= KCACHE_MAX) kcache_clear();
  if (!uop_gc_add_roots(mark_kcache, NULL) || !umap_put(&kcache, ast, c)) {
    program_release(c->prog);
    free(c);
    tg_set_error(TG_ERR_NOMEM, "engine: out of memory");
    return NULL;
  }
  return c;
fail:
  free(c);
  return NULL;
}

/* a constant seen through movement ops (tg_scalar, tg_full): its realized value is not cached on the node. The
 * node is shared by every graph that uses the constant (a max pool's padding mask is where(pad(true), ...)),
 * and with a buffer on it each of them would load the constant from memory instead of folding it */
static bool constant_view(const uop *u) {
  while (u->op >= OP_RESHAPE && u->op <= OP_FLIP && u->op != OP_PAD && u->nsrc == 1) u = u->src[0];
  return u->op == OP_CONST;
}

/* the storage a node has outside this schedule (allocating a BUFFER made by tg_empty), or NULL */
tg_buffer *realize_storage(const device *dev, uop *u) {
  if (uop_storage(u)) return u->buf;
  if (u->op == OP_RESHAPE && u->src[0]->op == OP_BUFFER) u = u->src[0];
  if (u->op != OP_BUFFER) return NULL;
  if (!u->buf) {
    size_t n = (size_t)u->aux[0] * tg_dtype_size((tg_dtype)u->dtype);
    u->buf = buffer_new(dev, n ? n : 1);
    if (u->buf) stats.buffers_allocated++;
    uop_gc_note_bytes(n);
  }
  return u->buf;
}

/* whether some output of kernel k is written in place */
static bool any_in_place(tg_buffer *const *inplace, const sched_kernel *sk, int k) {
  for (int j = 0; j < sk->nout; j++)
    if (INPLACE(inplace, k, j)) return true;
  return false;
}

/* A lazy value built from a tensor before an assign was realized into that tensor's buffer in place reads
 * contents that are gone (b = a * 2; a += 10 realized in place; b realized now would be 2 (a + 10)). Refused
 * before any kernel runs; realizing b before the assign, or with it, gives 2a. */
static tg_status check_not_stale(const schedule *s, const uop_map *made) {
  for (int k = 0; k < s->nkernels; k++)
    for (int j = 0; j < s->kernels[k].nbufs; j++) {
      uop *x = s->kernels[k].bufs[j];
      if (umap_get(made, x)) continue;
      uop *bn = x->op == OP_BUFFER ? x : x->op == OP_RESHAPE && x->src[0]->op == OP_BUFFER ? x->src[0] : NULL;
      tg_buffer *b = bn ? bn->buf : NULL;
      if (b && b->writes != bn->epoch) {
        char shape[128];
        tg_set_error(TG_ERR_ARG,
                     "tg_realize: a lazy tensor reads a %s %s tensor whose buffer an assign has since overwritten in "
                     "place; realize it before (or together with) the assign",
                     shape_str(shape, sizeof shape, x->ndim, x->shape), tg_dtype_name((tg_dtype)x->dtype));
        return TG_ERR_ARG;
      }
    }
  return TG_OK;
}

/* A realize's intermediates (kernel outputs that are not its outputs and are written in place nowhere) share one
 * arena placed by lifetime (memplan.c), as a captured JIT step's do: a chain of kernels holds two or three of them
 * at once rather than all, and a training step's peak is what is alive together. Each gets a view of the arena
 * into made; the arena lives while a view does (a JIT capture keeps them, then plans its own). Not on OpenCL,
 * whose buffers have no addresses to offset. */
static tg_status plan_intermediates(const device *dev, const schedule *s, int nout, const int *korder,
                                    tg_buffer *const *inplace, uop_map *made) {
  if (dev->kind == DEVICE_CL || s->nrealized < 2) return TG_OK;
  size_t nbufs = 1;
  for (int k = 0; k < s->nkernels; k++) nbufs += (size_t)s->kernels[k].nbufs;
  int *pos = mem_alloc((size_t)s->nkernels * sizeof *pos);
  plan_item *items = mem_alloc((size_t)s->nrealized * sizeof *items);
  uop **nodes = mem_alloc((size_t)s->nrealized * sizeof *nodes);
  /* per distinct node the kernels read or write: its writer ((kernel, output) + 1) and last reader (position
   * + 1); a node's slot is its scratch number */
  int *writer = mem_alloc(nbufs * sizeof *writer), *last_read = mem_alloc(nbufs * sizeof *last_read);
  tg_status st = pos && items && nodes && writer && last_read ? TG_OK : TG_ERR_NOMEM;
  int n = 0, nslots = 0;
  for (int p = 0; st == TG_OK && p < s->nkernels; p++) pos[korder[p]] = p;
  lib_lock();  /* the nodes' scratch is this pass's */
  uint32_t stamp = uop_scratch_stamp();
  for (int k = 0; st == TG_OK && k < s->nkernels; k++) {
    const sched_kernel *sk = &s->kernels[k];
    for (int j = 0; j < sk->nbufs; j++) {
      uop *u = sk->bufs[j];
      if (u->scratch_stamp != stamp) {
        u->scratch_stamp = stamp;
        u->scratch = nslots;
        writer[nslots] = last_read[nslots] = 0;
        nslots++;
      }
      if (j < sk->nout && !writer[u->scratch]) writer[u->scratch] = k * SCHED_MAX_OUTS + j + 1;
      if (j >= sk->nout && pos[k] + 1 > last_read[u->scratch]) last_read[u->scratch] = pos[k] + 1;
    }
  }
  for (int i = 0; st == TG_OK && i < s->nrealized; i++) {
    uop *r = s->realized[i];
    bool keep = umap_get(made, r) == NULL && r->scratch_stamp == stamp;
    for (int o = 0; o < nout && keep; o++) keep = s->roots[o] != r;  /* an output keeps a buffer of its own */
    int wo = keep ? writer[r->scratch] - 1 : -1;
    int w = wo < 0 ? -1 : wo / SCHED_MAX_OUTS;
    if (w < 0 || inplace[wo] || s->kernels[w].window_into) continue;
    int last = pos[w], l = last_read[r->scratch] - 1;
    if (l > last) last = l;
    size_t nb = (size_t)uop_numel(r) * tg_dtype_size((tg_dtype)r->dtype);
    items[n] = (plan_item){.nbytes = nb ? nb : 1, .first = pos[w], .last = last};
    nodes[n++] = r;
  }
  lib_unlock();
  free(writer);
  free(last_read);
  size_t size = st == TG_OK && n >= 2 ? memplan_assign(items, n, 64) : 0;
  if (size == (size_t)-1) st = TG_ERR_NOMEM;
  tg_buffer *arena = st == TG_OK && size ? buffer_new(dev, size) : NULL;
  if (size && !arena && st == TG_OK) st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  for (int i = 0; arena && st == TG_OK && i < n; i++) {
    tg_buffer *v = buffer_view(arena, items[i].offset, items[i].nbytes);
    if (!v || !umap_put(made, nodes[i], v)) {
      buffer_release(v);
      st = TG_ERR_NOMEM;
    }
  }
  if (arena) {
    stats.buffers_allocated++;
    uop_gc_note_bytes(size);
  }
  buffer_release(arena);  /* the views hold it */
  free(pos);
  free(items);
  free(nodes);
  return st;
}

/* a kernel ready to launch: a copy of its cache entry (the program held) and its buffers */
typedef struct ready_kernel { compiled c; void **bufs; tg_buffer **tbufs; } ready_kernel;

/* An empty value has nothing to compute: its tensors read an empty buffer and no kernel runs. Its graph may
 * still be large (a softmax over an empty last axis of (2^40, 0) would store a (2^40, 1) max first). */
static tg_status pin_empty(const device *dev, tg_tensor *t) {
  uop *o = t->u;
  if (uop_numel(o) != 0 || o->op == OP_BUFFER || (o->op == OP_RESHAPE && o->src[0]->op == OP_BUFFER)) return TG_OK;
  tg_buffer *b = buffer_new(dev, 1);
  uop *bn = b ? mk_buffer((tg_dtype)o->dtype, 0, b) : NULL;
  uop *view = bn ? mk_reshape(bn, o->ndim, o->shape) : NULL;
  if (!view) {
    if (!bn) buffer_release(b);
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "tg_realize: out of memory");
    return TG_ERR_NOMEM;
  }
  stats.buffers_allocated++;
  for (tg_tensor *x = tensor_live_first(); x; x = x->next)  /* the caller's and this thread's (as realize) */
    if (x->u == o && (x == t || tensor_is_own(x))) {
      x->u = view;
      x->assign_target = NULL;  /* an assign of nothing writes nothing */
    }
  return TG_OK;
}

/* the device whose kernels a cache holds for dev: the CPU devices (CPU:n) share the CPU's */
static const device *cache_device(const device *dev) { return dev->kind == DEVICE_CPU ? device_cpu() : dev; }

/* whether every tensor already reads a buffer of its own and assigns nothing: a realize would schedule no
 * kernel and rebind nothing (an eager decoding step realizes the bound variables and the logits it reads
 * back this way, four walks of the schedule cache a token) */
static bool all_stored(int n, tg_tensor *const *ts) {
  for (int i = 0; i < n; i++) {
    uop *u = ts[i]->u;
    if (u->op == OP_RESHAPE) u = u->src[0];
    if (ts[i]->assign_target || u->op != OP_BUFFER || !u->buf) return false;
  }
  return true;
}

static tg_status realize_many(int n, tg_tensor *const *ts) {
  if (n < 0 || (n && !ts)) {
    tg_set_error(TG_ERR_ARG, "tg_realize_many: bad tensor list");
    return TG_ERR_ARG;
  }
  for (int i = 0; i < n; i++)
    if (!ts[i]) {
      /* keep the message of the op that failed and returned this NULL */
      if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_realize: tensor %d is NULL", i);
      return tg_error_status();
    }
  tg_status est = env_check(ENV_REALIZE);  /* a bad BEAM, DEBUG, TG_THREADS, ... (env.h) */
  if (est != TG_OK) return est;
  uop_gc_maybe();  /* here only: the passes of a placed realize hold nodes no tensor roots */
  last_kernels = 0;
  if (all_stored(n, ts)) return TG_OK;
  if (place_needed) return place_realize(n, ts);
  const device *dev = device_default();
  if (!dev) return tg_error_status();
  return realize_on(dev, n, ts);
}

tg_status realize_on(const device *dev, int n, tg_tensor *const *ts) {
  const device *cdev = cache_device(dev);
  for (int i = 0; i < n; i++) {
    tg_status est = pin_empty(dev, ts[i]);
    if (est != TG_OK) return est;
  }
  uop **outs = mem_alloc(((size_t)n + 1) * sizeof *outs);
  if (!outs) return TG_ERR_NOMEM;
  for (int i = 0; i < n; i++) outs[i] = ts[i]->u;
  int dbg = tg_debug_level();
  double t0 = engine_now_ms();
  schedule s = {0};
  tg_buffer **inplace = NULL;  /* per kernel and output (INPLACE): the assigned tensor's buffer it overwrites */
  ready_kernel *ready = NULL;  /* per kernel in run order */
  void **ptrs = NULL;          /* their buffers' pointers and buffers, kernel after kernel */
  tg_buffer **tbufs = NULL;
  size_t used = 0;
  uop **views = NULL, **bns = NULL;  /* per output: the view it is rebound to, on a BUFFER node of its buffer */
  int *korder = NULL;
  rendered_set pre = {0};  /* the new kernels' sources, rendered once for the prebuild and the compiles */
  uop **targets = mem_calloc((size_t)n + 1, sizeof *targets);  /* assign targets: windows may be written in place */
  uop_map made = {0};  /* realized node -> buffer made in this run */
  tg_status st = targets ? TG_OK : TG_ERR_NOMEM;
  for (int i = 0; i < n && targets; i++) targets[i] = ts[i]->u == outs[i] ? ts[i]->assign_target : NULL;
  if (cdev != sched_dev) {  /* the cache holds one device's schedules */
    sched_cache_clear();
    sched_dev = cdev;
  }
  bool cached = false;
  for (int attempt = 0; attempt < 2 && st == TG_OK; attempt++) {
    /* the second attempt, without window writes, when the first found no order to run them in place. The
     * schedule may come from the cache; in place or not (the buffers' business) is planned every time. */
    st = schedule_cached(n, outs, attempt ? NULL : targets, &s, &cached);
    if (st != TG_OK) break;
    if (plan_in_place(&s, dev, ts, n, &made, &inplace, &korder, &st)) break;
    schedule_free(&s);
    free(inplace);
    free(korder);
    inplace = NULL;
    korder = NULL;
  }
  free(targets);
  if (st != TG_OK) goto out;
  if (s.nkernels) stats.schedules++;
  if (s.nkernels && cached) stats.schedules_cached++;
  double t_sched = engine_now_ms() - t0;
  if ((st = plan_intermediates(dev, &s, n, korder, inplace, &made)) != TG_OK) goto out;
  for (int i = 0; i < s.nrealized; i++) {
    uop *r = s.realized[i];
    if (umap_get(&made, r)) continue;  /* a view of the intermediates' arena */
    size_t nb = (size_t)uop_numel(r) * tg_dtype_size((tg_dtype)r->dtype);
    tg_buffer *b = NULL;
    for (int k = 0; k < s.nkernels && !b; k++)
      for (int j = 0; j < s.kernels[k].nout && !b; j++)
        if (INPLACE(inplace, k, j) && s.kernels[k].bufs[j] == r) {
          b = INPLACE(inplace, k, j);
          buffer_retain(b);
        }
    if (b) {
      if (!umap_put(&made, r, b)) { buffer_release(b); st = TG_ERR_NOMEM; goto out; }
      continue;
    }
    b = buffer_new(dev, nb ? nb : 1);
    if (!b || !umap_put(&made, r, b)) {
      buffer_release(b);
      st = TG_ERR_NOMEM;
      goto out;
    }
    stats.buffers_allocated++;
    uop_gc_note_bytes(nb);
  }
  if ((st = check_not_stale(&s, &made)) != TG_OK) goto out;
  /* everything that can fail comes before the first launch, so a failed realize has run nothing and changed
   * no buffer: each kernel (its program held, as the kernel cache may drop entries while later ones are made)
   * with its buffers, and the views the outputs will be rebound to */
  size_t nslots = 1;  /* every kernel's buffer pointers, sliced from one block each */
  for (int k = 0; k < s.nkernels; k++) nslots += (size_t)s.kernels[k].nbufs;
  ready = mem_calloc((size_t)s.nkernels + 1, sizeof *ready);
  views = mem_calloc((size_t)n + 1, sizeof *views);
  bns = mem_calloc((size_t)n + 1, sizeof *bns);
  ptrs = mem_alloc(nslots * sizeof *ptrs);
  tbufs = mem_alloc(nslots * sizeof *tbufs);
  if (!ready || !views || !bns || !ptrs || !tbufs) { st = TG_ERR_NOMEM; goto out; }
  if (cdev != kcache_dev) {  /* as get_kernel does: the cache holds one device's kernels */
    kcache_clear();
    kcache_dev = cdev;
  }
  prebuild_kernels(cdev, &s, &pre);
  for (int pos = 0; pos < s.nkernels; pos++) {
    sched_kernel *sk = &s.kernels[korder[pos]];
    compiled *c = get_kernel(cdev, sk->ast, &pre);
    if (!c) { st = tg_error_status() ? tg_error_status() : TG_ERR_DEVICE; goto out; }
    ready_kernel *r = &ready[pos];
    r->c = *c;
    program_retain(r->c.prog);
    r->bufs = ptrs + used;
    r->tbufs = tbufs + used;
    used += (size_t)sk->nbufs;
    for (int j = 0; j < sk->nbufs; j++) {
      tg_buffer *b = umap_get(&made, sk->bufs[j]);
      if (!b) b = realize_storage(dev, sk->bufs[j]);
      if (!b) {
        st = tg_error_status() == TG_ERR_NOMEM ? TG_ERR_NOMEM : TG_ERR_INTERNAL;
        if (st == TG_ERR_INTERNAL) tg_set_error(st, "engine: kernel %s reads a node with no storage", c->info.name);
        goto out;
      }
      if (b->dev != dev) {  /* tinygrad refuses an op across devices too */
        st = TG_ERR_ARG;
        tg_set_error(st, "engine: kernel %s on %s reads a tensor on %s; move it with tg_to first", c->info.name,
                     dev->name, b->dev->name);
        goto out;
      }
      r->bufs[j] = b->ptr;
      r->tbufs[j] = b;
    }
  }
  for (int i = 0; i < n; i++) {
    uop *o = outs[i];
    tg_buffer *b = umap_get(&made, s.roots[i]);
    if (!b) {
      if (!(b = realize_storage(dev, o))) { st = tg_error_status() == TG_ERR_NOMEM ? TG_ERR_NOMEM : TG_ERR_INTERNAL; goto out; }
      if (o->op == OP_BUFFER || (o->op == OP_RESHAPE && o->src[0]->op == OP_BUFFER)) continue;
    }
    buffer_retain(b);
    bns[i] = mk_buffer((tg_dtype)o->dtype, uop_numel(o), b);
    if (!bns[i]) { buffer_release(b); st = TG_ERR_NOMEM; goto out; }  /* else the node holds b */
    views[i] = mk_reshape(bns[i], o->ndim, o->shape);
    if (!views[i]) { st = TG_ERR_NOMEM; goto out; }
  }
  double total_ms = 0;
  for (int pos = 0; pos < s.nkernels; pos++) {
    int k = korder[pos];
    sched_kernel *sk = &s.kernels[k];
    ready_kernel *r = &ready[pos];
    double k0 = dbg >= 2 ? engine_now_ms() : 0;
    int nthreads = r->c.info.threaded ? r->c.info.nthreads : 1;
    double dev_ms = -1;  /* a GPU's own time for the kernel (DEBUG=2 waits for it) */
    st = dev->launch(r->c.prog, r->bufs, sk->nbufs, nthreads, dbg >= 2 && device_is_gpu(dev) ? &dev_ms : NULL);
    if (st != TG_OK) goto out;
    /* counted now: if a later launch failed, values built from the old contents would be refused, not
     * computed from the new ones */
    for (int j = 0; j < sk->nout; j++)
      if (INPLACE(inplace, k, j)) INPLACE(inplace, k, j)->writes++;
    jit_capture *cap = jit_capturing();
    if (cap)
      jit_record(cap, dev, r->c.prog, r->tbufs, sk->nbufs, sk->nout, nthreads, r->c.info.flops, r->c.info.bytes);
    stats.kernels_run++;
    for (int d = 0; d < 16; d++)
      if (kernels_on[d].dev == dev || !kernels_on[d].dev) {
        kernels_on[d].dev = dev;
        kernels_on[d].n++;
        break;
      }
    if (dbg >= 2) {
      double ms = dev_ms >= 0 ? dev_ms : engine_now_ms() - k0;
      total_ms += ms;
      engine_print_kernel(dev->name, k, r->c.info.name, sk->nbufs, r->c.info.flops, r->c.info.bytes, ms, total_ms);
    }
  }
  last_kernels += (uint64_t)s.nkernels;  /* a placed realize runs one of these per device */
  if (dbg >= 1 && s.nkernels)
    fprintf(stderr, "scheduled %d kernel%s in %.2f ms%s; %s memory in use %.2f MB\n", s.nkernels,
            s.nkernels == 1 ? "" : "s", t_sched, cached ? " (cached)" : "", dev->name,
            (double)memory_in_use(dev) / 1e6);
  /* outputs keep their buffers; tensors on them now read the buffer directly. So does an output whose value
   * was cached on its node (an equal graph realized before): the cache is dropped at the next in-place write
   * or JIT capture, and a tensor left on the computed node would then compute it again, inside a capture as a
   * kernel of the step (the step would replay that input's old value) or after its inputs were overwritten. */
  for (int i = 0; i < n; i++) {
    if (!views[i]) continue;
    uop *o = outs[i];
    tg_buffer *b = bns[i]->buf;
    bns[i]->epoch = b->writes;
    bool in_place = ts[i]->assign_target && b == realize_storage(dev, ts[i]->assign_target);
    /* an in-place value is overwritten by the next step: not a cache; nor is a part of a sharded value (equal
     * parts on two devices are one node: place.c) */
    if (!uop_storage(o) && !in_place && !place_parts && !constant_view(o)) {
      buffer_retain(b);
      uop_set_realized(o, b);
    }
    uop_pin_dropped(o);  /* the caller may still hold it */
  }
  /* other threads' tensors on an output keep it (they read the value cached on it): they may be reading it
   * now. One pass over the live tensors, each compared with the outputs (a model holds hundreds of tensors,
   * scattered in memory: a pass per output cost an eager decoding step 3% of its time); the first output
   * that takes a tensor gives it its view, as a pass per output did */
  for (tg_tensor *t = tensor_live_first(); t; t = t->next)
    for (int i = 0; i < n; i++)
      if (views[i] && t->u == outs[i] && (t == ts[i] || tensor_is_own(t))) {
        t->u = views[i];
        break;
      }
  for (int i = 0; i < n; i++) ts[i]->assign_target = NULL;
out:
  for (int k = 0; inplace && k < s.nkernels; k++)  /* values realized before may have read the old contents */
    if (any_in_place(inplace, &s.kernels[k], k)) {
      uop_cache_invalidate();
      break;
    }
  for (int pos = 0; ready && pos < s.nkernels; pos++) program_release(ready[pos].c.prog);
  free(ready);
  free(ptrs);
  free(tbufs);
  free(views);
  free(bns);
  free(inplace);
  free(korder);
  rendered_free(&pre);
  for (size_t i = 0; i < made.cap; i++)
    if (made.keys[i]) buffer_release(made.vals[i]);
  umap_free(&made);
  schedule_free(&s);
  free(outs);
  return st;
}

tg_status tg_realize_many(int n, tg_tensor *const *ts) {
  lib_region_begin();
  tg_status st = realize_many(n, ts);
  lib_region_end();
  return st;
}

tg_status tg_realize(tg_tensor *t) { return tg_realize_many(1, &t); }

static tg_status to_host(tg_tensor *t, void *dst, size_t nbytes) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_to_host: tensor is NULL");
    return tg_error_status();
  }
  if (jit_capturing()) {
    tg_set_error(TG_ERR_ARG, "tg_to_host: a JIT step is being captured: a value read to the host now would be "
                             "frozen into every replay (return the tensor from the step instead)");
    jit_capturing()->failed = true;
    return TG_ERR_ARG;
  }
  size_t want = (size_t)uop_numel(t->u) * tg_dtype_size(TDT(t));
  if (nbytes != want || (want && !dst)) {
    char b[256];
    tg_set_error(TG_ERR_ARG, "tg_to_host: a %s tensor of shape %s has %zu bytes, got a buffer of %zu%s",
                 tg_dtype_name(TDT(t)), shape_str(b, sizeof b, TNDIM(t), TSHAPE(t)), want, nbytes,
                 want && !dst ? " and a NULL pointer" : "");
    return TG_ERR_ARG;
  }
  tg_status st = tg_realize(t);
  if (st != TG_OK) return st;
  if (!want) return TG_OK;
  if (t->u->op == OP_MULTI) {  /* sharded: gathered onto its first device */
    tg_tensor *g = place_gather(t->u);
    st = g ? to_host(g, dst, nbytes) : tg_error_status();
    tg_free(g);
    return st;
  }
  const device *dev = device_default();
  tg_buffer *b = dev ? realize_storage(dev, t->u) : NULL;
  if (!b) return tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
  return b->dev->copyout(dst, b, nbytes);  /* the buffer's own device: a data set stays on the host */
}

tg_status tg_to_host(tg_tensor *t, void *dst, size_t nbytes) {
  lib_region_begin();
  tg_status st = to_host(t, dst, nbytes);
  lib_region_end();
  return st;
}

tg_stats tg_get_stats(void) {
  lib_lock();
  tg_stats s = stats;
  lib_unlock();
  runtime_counters rc = runtime_get_counters();
  s.kernels_compiled = rc.compiles;
  s.disk_cache_hits = rc.disk_hits;
  s.uops_live = uop_live_count();
  return s;
}

uint64_t tg_kernel_count_last(void) { return last_kernels; }

uint64_t engine_kernels_run_on(const char *name) {
  const device *d = device_get(name);
  uint64_t n = 0;
  lib_lock();
  for (int i = 0; d && i < 16; i++)
    if (kernels_on[i].dev == d) n = kernels_on[i].n;
  lib_unlock();
  return n;
}

int tg_num_threads(void) {
  const device *dev = device_default();
  return dev ? dev->num_threads(dev) : 1;
}

tg_status tg_collect(void) {
  lib_region_begin();  /* no realize or JIT replay runs meanwhile: the pool may stop */
  kcache_clear();
  uop_gc_remove_roots(mark_kcache, NULL);
  sched_cache_clear();
  uop_gc();
  runtime_shutdown();
  lib_region_end();
  return TG_OK;
}

tg_buffer *tensor_storage(tg_tensor *t) {
  const device *dev = device_default();
  lib_lock();
  tg_buffer *b = t && dev ? realize_storage(dev, t->u) : NULL;
  lib_unlock();
  return b;
}

static tg_status write_storage(tg_tensor *t, const void *src, size_t nbytes) {
  if (!t) return TG_ERR_ARG;
  size_t want = (size_t)uop_numel(t->u) * tg_dtype_size(TDT(t));
  if (nbytes != want) {
    tg_set_error(TG_ERR_ARG, "tensor_write: %zu bytes for a tensor of %zu", nbytes, want);
    return TG_ERR_ARG;
  }
  tg_status st = tg_realize(t);
  if (st != TG_OK) return st;
  const device *dev = device_default();
  tg_buffer *b = dev ? realize_storage(dev, t->u) : NULL;
  if (!b) return tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
  uop_cache_invalidate();
  return b->dev->copyin(b, src, nbytes);
}

tg_status tensor_write(tg_tensor *t, const void *src, size_t nbytes) {
  lib_region_begin();
  tg_status st = write_storage(t, src, nbytes);
  lib_region_end();
  return st;
}
