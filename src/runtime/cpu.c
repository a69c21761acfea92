/* cpu.c — the CPU device: host buffers, C compiled by the system compiler, kernels run on the thread pool.
 *
 * compile() turns C source into a program: the disk cache (compile_cache.c) gives a shared object, dlopen
 * loads it and dlsym finds the kernel. Programs are also cached in memory (program_cache.c), so one process
 * never loads the same kernel twice; prebuild() compiles the new kernels of a schedule several at once before
 * compile() asks for them. launch() runs the kernel
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

typedef struct prebuild_item {
  size_t len;  /* of the source: the longest compile the longest, so they start first */
  int idx;
} prebuild_item;

typedef struct prebuild_ctx {
  const device *d;
  const char *const *names, *const *srcs;
  const prebuild_item *items;  /* the kernels not in memory, longest first */
  int n;
  atomic_int next;  /* the next item to take */
} prebuild_ctx;

static int longer_first(const void *a, const void *b) {
  const prebuild_item *x = a, *y = b;
  return x->len != y->len ? (x->len < y->len ? 1 : -1) : x->idx - y->idx;
}

static atomic_ullong nprebuilt;

static void *prebuild_worker(void *arg) {
  prebuild_ctx *c = arg;
  for (int k; (k = atomic_fetch_add(&c->next, 1)) < c->n;) {
    int i = c->items[k].idx;
    /* errors stay with this thread: compile() reports each kernel's own (a refusal from the failure memory) */
    tg_program *p = program_cache_get(&pc, c->d, 0, c->names[i], c->srcs[i], load_program);
    if (p) {
      atomic_fetch_add(&nprebuilt, 1);
      program_release(p);
    }
  }
  return NULL;
}

static void cpu_prebuild(const device *d, int n, const char *const *names, const char *const *srcs) {
  if (n < 2 || !names || !srcs) return;
  int jobs = compile_jobs();
  if (jobs < 2) return;  /* compile() builds them one by one as it always did */
  prebuild_item *items = mem_alloc((size_t)n * sizeof *items);
  if (!items) return;  /* only a hint: compile() will report the memory */
  int nnew = 0;  /* kernels not in memory yet */
  for (int i = 0; i < n; i++)
    if (names[i] && srcs[i] && !program_cache_has(&pc, 0, names[i], srcs[i]))
      items[nnew++] = (prebuild_item){.len = strlen(srcs[i]), .idx = i};
  if (jobs > nnew) jobs = nnew;
  if (jobs < 2) {
    free(items);
    return;
  }
  qsort(items, (size_t)nnew, sizeof *items, longer_first);
  prebuild_ctx c = {.d = d, .names = names, .srcs = srcs, .items = items, .n = nnew};
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
  if (saved) tg_set_error(saved, "%s", msg);
  else tg_error_clear();
  if (tg_debug_level() >= 2)
    fprintf(stderr, "CPU: %d new kernels built ahead on %d threads in %.1f ms\n", nnew, started + 1, now_ms() - t0);
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
