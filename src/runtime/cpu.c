/* cpu.c — the CPU device: host buffers, C compiled by the system compiler, kernels run on the thread pool.
 *
 * compile() turns C source into a program: the disk cache (compile_cache.c) gives a shared object, dlopen
 * loads it and dlsym finds the kernel. Programs are also cached in memory (program_cache.c), so one process
 * never loads the same kernel twice; prebuild() compiles the new kernels of a schedule several at once, several
 * to a translation unit, before compile() asks for them. launch() runs the kernel
 *   void name(void **bufs, int64_t core_id, int64_t ncores, int64_t worker)
 * once per core id on the pool; the kernel splits its outermost THREAD loop by core_id. The ids are chunks
 * (chunk_count): a few per thread when the loop is long and the kernel's work large, taken by the pool's
 * threads as they come free, so a core the OS takes away for a moment delays a chunk, not the kernel by a
 * whole thread's share (the transformer block's bimodal timings on a shared machine). worker, the pool thread
 * running the chunk, indexes the kernel's per-thread scratch (a PACK's panel). Each iteration of the THREAD
 * loop computes whole outputs (opt.c's THREAD is an output loop every reduce uses), so results do not depend
 * on the chunks.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/device.h"
#include "runtime/program_cache.h"
#include "uop/env.h"
#include "uop/uop.h"

typedef void (*kernel_fn)(void **bufs, int64_t core_id, int64_t ncores, int64_t worker);

/* ---- buffers --------------------------------------------------------------------------------------------- */

static const device cpu_dev;

static tg_buffer *cpu_alloc(const device *d, size_t nbytes) {
  tg_buffer *b = mem_alloc(sizeof *b);
  if (!b) {
    tg_set_error(TG_ERR_NOMEM, "CPU: out of memory allocating a buffer of %zu bytes", nbytes);
    return NULL;
  }
  void *p = host_alloc(nbytes);
  if (!p) {
    free(b);
    return NULL;
  }
  *b = (tg_buffer){.refcnt = 1, .dev = d, .nbytes = nbytes, .ptr = p};
  return b;
}

static void cpu_buffer_free(tg_buffer *b) {
  if (!b) return;
  if (!b->wrapped) host_free(b->ptr, b->nbytes);
  free(b);
}

static tg_status cpu_copyin(tg_buffer *dst, const void *src, size_t nbytes) {
  if (!dst || (!src && nbytes) || nbytes > dst->nbytes) {
    tg_set_error(TG_ERR_ARG, "copyin: %zu bytes into a buffer of %zu", nbytes, dst ? dst->nbytes : 0);
    return TG_ERR_ARG;
  }
  if (nbytes) memcpy(dst->ptr, src, nbytes);
  return TG_OK;
}

static tg_status cpu_copyout(void *dst, const tg_buffer *src, size_t nbytes) {
  if (!src || (!dst && nbytes) || nbytes > src->nbytes) {
    tg_set_error(TG_ERR_ARG, "copyout: %zu bytes from a buffer of %zu", nbytes, src ? src->nbytes : 0);
    return TG_ERR_ARG;
  }
  if (nbytes) memcpy(dst, src->ptr, nbytes);
  return TG_OK;
}

static program_cache pc = PROGRAM_CACHE_INIT;

void cpu_program_cache_clear(void) { program_cache_clear(&pc); }

/* ---- programs ---------------------------------------------------------------------------------------------- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void cpu_program_free(tg_program *p) {
  if (!p) return;
  if (p->handle) dlclose(p->handle);
  free(p->name);
  free(p);
}

/* compiles (or finds) src and loads it; a program with one reference, or NULL with tg_error set and *refused
 * true when the source itself is at fault (the compiler's error, no such function in it) */
static tg_program *load_program(const device *d, const char *name, const char *src, bool *refused) {
  double t0 = now_ms();
  bool from_disk, is_temp;
  *refused = false;
  char *path = cpu_compile_so(src, &from_disk, &is_temp);
  if (!path) {
    *refused = compile_cache_rejected();
    return NULL;
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (is_temp) unlink(path);  /* the mapping outlives the name */
  if (!h) {
    const char *e = dlerror();
    tg_set_error(TG_ERR_DEVICE, "CPU: cannot load kernel %s from %s: %s", name, path, e ? e : "?");
    free(path);
    return NULL;
  }
  free(path);
  dlerror();
  void *fn = dlsym(h, name);
  if (!fn) {
    tg_set_error(TG_ERR_DEVICE, "CPU: the compiled source defines no function %s", name);
    dlclose(h);
    *refused = true;
    return NULL;
  }
  /* the THREAD loop's trip count and the kernel's work (render_c's name_split); none in hand-written kernels */
  int64_t split[2] = {0, 0};
  char sym[160];
  if (snprintf(sym, sizeof sym, "%s_split", name) < (int)sizeof sym) {
    const long long *sp = dlsym(h, sym);
    if (sp && sp[0] > 0 && sp[1] >= 0) split[0] = sp[0], split[1] = sp[1];
    dlerror();
  }
  tg_program *p = mem_alloc(sizeof *p);
  char *nm = mem_strdup(name);
  if (!p || !nm) {
    free(p);
    free(nm);
    dlclose(h);
    tg_set_error(TG_ERR_NOMEM, "CPU: out of memory loading kernel %s", name);
    return NULL;
  }
  *p = (tg_program){.refcnt = 1, .dev = d, .name = nm, .fn = fn, .handle = h, .from_disk = from_disk,
                    .compile_ms = now_ms() - t0, .split_trip = split[0], .split_work = (double)split[1]};
  if (tg_debug_level() >= 4)
    fprintf(stderr, "CPU: kernel %s %s in %.1f ms\n", name, from_disk ? "loaded from the disk cache" : "compiled",
            p->compile_ms);
  return p;
}

static tg_program *cpu_compile(const device *d, const char *name, const char *src) {
  if (!name || !*name || !src) {
    tg_set_error(TG_ERR_ARG, "CPU compile: %s", !src ? "NULL source" : "no kernel name");
    return NULL;
  }
  return program_cache_get(&pc, d, 0, name, src, load_program);
}

/* ---- compiles ahead (prebuild) ---------------------------------------------------------------------------
 * realize hands over the new kernels of a schedule before it asks for them one by one: each is a compiler
 * process of 50-300 ms, so they are built here on up to compile_jobs() threads at once (the main thread
 * among them), each through the same program cache and disk cache path as compile() (same keys, same
 * temporary-file-and-rename writes). The compile() that follows finds the program in memory; a source the
 * compiler refused is remembered there with its message, which compile() then reports as it would have.
 * Threads and not a pool: the pool's workers are for kernels, and a compile spends its time waiting for a
 * child process (posix_spawn, safe from a threaded process). */

#define MAX_COMPILE_JOBS 256

/* TG_COMPILE_JOBS (1..256), else the pool's size (TG_THREADS, else the CPUs); a bad value is the default */
static int compile_jobs(void) {
  const char *s = getenv("TG_COMPILE_JOBS");
  if (s && *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*end == 0 && v >= 1 && v <= MAX_COMPILE_JOBS && s[0] >= '0' && s[0] <= '9') return (int)v;
    if (tg_debug_level() >= 1) fprintf(stderr, "CPU: TG_COMPILE_JOBS='%s' is not 1..256: using %d\n", s, pool_size());
  }
  int n = pool_size();
  return n < 1 ? 1 : n > MAX_COMPILE_JOBS ? MAX_COMPILE_JOBS : n;
}

/* Kernels rendered by render_c compile several to one translation unit (cpu_compile_batch): a compiler process
 * costs ~35 ms before it compiles anything (driver, cc1 and as starting, ld), about what a small kernel's code
 * costs: MNIST's kernels took 56 ms each one by one, 29 in a unit of 50. render_c's source is a comment line
 * naming the kernel, a preamble of types and helpers (which varies with the vector width and the helpers the
 * kernel needs), then the kernel from "static void NAME_body(" on: kernels with the same preamble and different
 * names (a name is a symbol of the object) share a unit of the preamble once and each one's kernel. Units hold
 * at most BATCH_MAX, fewer when there are few kernels per thread, so that the threads still share the work. */
#define BATCH_MAX 8

typedef struct prebuild_item {
  size_t len;          /* of the source */
  int idx;
  size_t pre, body;    /* the preamble's offset and the kernel's (render_c's layout), body 0 when not found */
  uint64_t pre_hash;   /* of the preamble */
} prebuild_item;

typedef struct prebuild_batch {
  int n, member[BATCH_MAX];  /* items */
  size_t len;                /* of their sources together: the longest compile starts first */
} prebuild_batch;

typedef struct prebuild_ctx {
  const device *d;
  const char *const *names, *const *srcs;
  const prebuild_item *items;  /* the kernels not in memory */
  const prebuild_batch *batches;
  int nbatches;
  atomic_int next;  /* the next batch to take */
} prebuild_ctx;

/* where the preamble and the kernel of render_c's source begin; false for a source of another shape */
static bool source_parts(const char *name, const char *src, size_t *pre, size_t *body) {
  const char *nl = strchr(src, '\n');
  char marker[160];
  if (!nl || strncmp(src, "/* ", 3) || snprintf(marker, sizeof marker, "\nstatic void %s_body(", name) >= (int)sizeof marker)
    return false;
  const char *k = strstr(nl, marker);
  if (!k) return false;
  *pre = (size_t)(nl + 1 - src);
  *body = (size_t)(k + 1 - src);
  return true;
}

/* batchable items first, grouped by preamble, each group longest first */
static int by_preamble(const void *a, const void *b) {
  const prebuild_item *x = a, *y = b;
  if ((x->body != 0) != (y->body != 0)) return x->body ? -1 : 1;
  if (x->pre_hash != y->pre_hash) return x->pre_hash < y->pre_hash ? -1 : 1;
  return x->len != y->len ? (x->len < y->len ? 1 : -1) : x->idx - y->idx;
}

static int longer_first(const void *a, const void *b) {
  const prebuild_batch *x = a, *y = b;
  return x->len != y->len ? (x->len < y->len ? 1 : -1) : x->member[0] - y->member[0];
}

/* whether item i may join batch b: the same preamble as its kernels, a name none of them has */
static bool joins(const prebuild_ctx *c, const prebuild_batch *b, int i) {
  const prebuild_item *it = &c->items[i], *f = &c->items[b->member[0]];
  if (!it->body || !f->body || it->pre_hash != f->pre_hash || it->body - it->pre != f->body - f->pre ||
      memcmp(c->srcs[it->idx] + it->pre, c->srcs[f->idx] + f->pre, it->body - it->pre))
    return false;
  for (int k = 0; k < b->n; k++)
    if (!strcmp(c->names[c->items[b->member[k]].idx], c->names[it->idx])) return false;
  return true;
}

/* compiles batch b's kernels as one unit (their preamble once), stored under each one's key; best effort */
static void build_unit(const prebuild_ctx *c, const prebuild_batch *b) {
  const char *srcs[BATCH_MAX];
  size_t len = 1;
  for (int k = 0; k < b->n; k++) {
    const prebuild_item *it = &c->items[b->member[k]];
    srcs[k] = c->srcs[it->idx];
    len += k ? it->len - it->body : it->len;
  }
  char *unit = mem_alloc(len), *o = unit;
  if (!unit) return;
  for (int k = 0; k < b->n; k++) {  /* the first source whole, the others' kernels */
    const prebuild_item *it = &c->items[b->member[k]];
    size_t from = k ? it->body : 0;
    memcpy(o, srcs[k] + from, it->len - from);
    o += it->len - from;
  }
  *o = 0;
  cpu_compile_batch(b->n, srcs, unit);
  free(unit);
}

static atomic_ullong nprebuilt;

static void *prebuild_worker(void *arg) {
  prebuild_ctx *c = arg;
  for (int k; (k = atomic_fetch_add(&c->next, 1)) < c->nbatches;) {
    const prebuild_batch *b = &c->batches[k];
    if (b->n > 1) build_unit(c, b);
    for (int j = 0; j < b->n; j++) {
      int i = c->items[b->member[j]].idx;
      /* errors stay with this thread: compile() reports each kernel's own (a refusal from the failure memory) */
      tg_program *p = program_cache_get(&pc, c->d, 0, c->names[i], c->srcs[i], load_program);
      if (p) {
        atomic_fetch_add(&nprebuilt, 1);
        program_release(p);
      }
    }
  }
  return NULL;
}

static void cpu_prebuild(const device *d, int n, const char *const *names, const char *const *srcs) {
  if (n < 2 || !names || !srcs) return;
  int jobs = compile_jobs();
  prebuild_item *items = mem_alloc((size_t)n * sizeof *items);
  prebuild_batch *batches = mem_alloc((size_t)n * sizeof *batches);
  if (!items || !batches) {  /* only a hint: compile() will report the memory */
    free(items);
    free(batches);
    return;
  }
  int nnew = 0;  /* kernels not in memory yet */
  for (int i = 0; i < n; i++)
    if (names[i] && srcs[i] && !program_cache_has(&pc, 0, names[i], srcs[i])) {
      prebuild_item *it = &items[nnew++];
      *it = (prebuild_item){.len = strlen(srcs[i]), .idx = i};
      /* a kernel in the disk cache loads alone; the others may share a unit */
      if (source_parts(names[i], srcs[i], &it->pre, &it->body) && !cpu_compile_cached(srcs[i]))
        it->pre_hash = hash_bytes(srcs[i] + it->pre, it->body - it->pre, 0);
      else
        it->pre = it->body = 0;
    }
  qsort(items, (size_t)nnew, sizeof *items, by_preamble);
  int per = (nnew + 2 * jobs - 1) / (2 * jobs);  /* kernels per unit: two units per thread at least */
  per = per < 1 ? 1 : per > BATCH_MAX ? BATCH_MAX : per;
  prebuild_ctx c = {.d = d, .names = names, .srcs = srcs, .items = items, .batches = batches};
  /* each kernel joins the first unit of its preamble group with room and no kernel of its name (units of an
   * earlier group are full or of another preamble: the search starts at the group's first unit) */
  for (int i = 0, group = 0; i < nnew; i++) {
    if (i && items[i].pre_hash != items[i - 1].pre_hash) group = c.nbatches;
    int b = group;
    while (b < c.nbatches && (batches[b].n >= per || !joins(&c, &batches[b], i))) b++;
    if (b == c.nbatches) batches[c.nbatches++] = (prebuild_batch){0};
    batches[b].member[batches[b].n++] = i;
    batches[b].len += items[i].len;
  }
  if (jobs > c.nbatches) jobs = c.nbatches;
  if (jobs < 2 && c.nbatches == nnew) {  /* one thread and no unit of several: compile() builds them as always */
    free(items);
    free(batches);
    return;
  }
  qsort(batches, (size_t)c.nbatches, sizeof *batches, longer_first);
  atomic_init(&c.next, 0);
  pthread_t th[MAX_COMPILE_JOBS];
  int started = 0;
  tg_status saved = tg_error_status();  /* the caller's error text is left as it was */
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", tg_error());
  double t0 = now_ms();
  for (; started < jobs - 1; started++)
    if (pthread_create(&th[started], NULL, prebuild_worker, &c) != 0) break;  /* fewer helpers, same work */
  prebuild_worker(&c);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(items);
  free(batches);
  if (saved) tg_set_error(saved, "%s", msg);
  else tg_error_clear();
  if (tg_debug_level() >= 2)
    fprintf(stderr, "CPU: %d new kernels built ahead in %d units on %d threads in %.1f ms\n", nnew, c.nbatches,
            started + 1, now_ms() - t0);
}

typedef struct launch_ctx {
  kernel_fn fn;
  void **bufs;
} launch_ctx;

static void launch_task(void *ctx, int64_t core_id, int64_t ncores) {
  launch_ctx *l = ctx;
  l->fn(l->bufs, core_id, ncores, pool_worker());
}

#define CHUNKS_PER_THREAD 4  /* enough for a late thread's share to be taken by the others */
/* loop iterations a chunk should have at least: a few µs of work against the 0.1-0.3 µs of taking a chunk
 * (a shared counter's cache line) and entering the kernel */
#define CHUNK_MIN_WORK 16384

/* the ids a launch of p on nthreads threads cuts its THREAD loop into: CHUNKS_PER_THREAD (TG_CHUNKS) per
 * thread, fewer when chunks would get less than CHUNK_MIN_WORK (never fewer than the threads), and never more
 * than the loop's iterations (a loop shorter than the threads gets one chunk per iteration). A kernel without
 * name_split gets one id per thread */
static int chunk_count(const tg_program *p, int nthreads) {
  if (nthreads <= 1 || p->split_trip <= 0) return nthreads;
  int per = env_get()->chunks;
  int64_t n = (int64_t)nthreads * (per > 0 ? per : CHUNKS_PER_THREAD);
  if (per <= 0) {
    double by_work = p->split_work / CHUNK_MIN_WORK;
    if ((double)n > by_work) n = (int64_t)by_work;
    if (n < nthreads) n = nthreads;
  }
  if (n > p->split_trip) n = p->split_trip;
  return n < 1 ? 1 : (int)n;
}

static tg_status cpu_launch(const tg_program *p, void **bufs, int nbufs, int nthreads, double *ms) {
  if (!p || !p->fn || p->dev->kind != DEVICE_CPU || nbufs < 0 || (nbufs > 0 && !bufs)) {
    tg_set_error(TG_ERR_ARG, "CPU launch: %s", !p || !p->fn ? "no program" : p->dev->kind != DEVICE_CPU ? "not a CPU program"
                                                                                               : "bad buffer list");
    return TG_ERR_ARG;
  }
  launch_ctx l = {.fn = (kernel_fn)p->fn, .bufs = bufs};
  struct timespec t0, t1;
  if (ms) clock_gettime(CLOCK_MONOTONIC, &t0);
  if (nthreads <= 0) nthreads = pool_size();
  pool_run_split(launch_task, &l, chunk_count(p, nthreads), nthreads);
  if (ms) {
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  }
  return TG_OK;
}

/* the host's block cache serves the CPU device alone */
static void cpu_flush_cache(const device *d) {
  (void)d;
  buffer_cache_flush();
}

static size_t cpu_cached_bytes(const device *d) {
  (void)d;
  uint64_t allocated, hits;
  size_t cached;
  host_alloc_counters(&allocated, &hits, &cached);
  return cached;
}

static int cpu_num_threads(const device *d) {
  (void)d;
  return pool_size();
}

static const device cpu_dev = {
    .name = "CPU",
    .kind = DEVICE_CPU,
    .alloc = cpu_alloc,
    .buffer_free = cpu_buffer_free,
    .copyin = cpu_copyin,
    .copyout = cpu_copyout,
    .compile = cpu_compile,
    .program_free = cpu_program_free,
    .launch = cpu_launch,
    .num_threads = cpu_num_threads,
    .flush_cache = cpu_flush_cache,
    .prebuild = cpu_prebuild,
    .cached_bytes = cpu_cached_bytes,
};

const device *device_cpu(void) { return &cpu_dev; }

/* CPU:1 .. CPU:7: the same compiler, kernel cache, host memory and thread pool as the CPU (CPU:0), each a
 * device of its own, so sharded tensors (tg_shard) and lazy copies can be tested in one process without a GPU.
 * Their kernels take turns on the one pool: this splits work by device, not the machine's cores. */
static device cpu_more[DEVICE_CPU_MAX - 1];
static char cpu_more_names[DEVICE_CPU_MAX - 1][8];

const device *device_cpu_n(int idx) {
  if (idx < 0 || idx >= DEVICE_CPU_MAX) return NULL;
  if (idx == 0) return &cpu_dev;
  lib_lock();
  device *d = &cpu_more[idx - 1];
  if (!d->name) {
    snprintf(cpu_more_names[idx - 1], sizeof cpu_more_names[0], "CPU:%d", idx);
    *d = cpu_dev;
    d->name = cpu_more_names[idx - 1];
  }
  lib_unlock();
  return d;
}


runtime_counters runtime_get_counters(void) {
  runtime_counters c = {0};
  program_cache_counters(&pc, &c.mem_hits, &c.disk_hits);
  c.compiles = compile_cache_compiles();
  c.prebuilt = atomic_load(&nprebuilt);
  c.disk_rejects = compile_cache_rejects();
  host_alloc_counters(&c.buffers_allocated, &c.buffer_cache_hits, &c.bytes_cached);
  return c;
}
