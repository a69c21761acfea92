/* cpu.c — the CPU device: host buffers, C compiled by the system compiler, kernels run on the thread pool.
 *
 * compile() turns C source into a program: the disk cache (compile_cache.c) gives a shared object, dlopen
 * loads it and dlsym finds the kernel. Programs are also cached in memory by a hash of (name, source), so
 * one process never loads the same kernel twice; the cache keeps the 2048 most recently used programs that
 * nobody else holds. launch() runs the kernel
 *   void name(void **bufs, int64_t core_id, int64_t ncores)
 * once per core id on the pool; the kernel splits its outermost THREAD loop by core_id.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/device.h"
#include "uop/env.h"
#include "uop/uop.h"

#define PC_BUCKETS 4096
#define PC_MAX 2048

typedef void (*kernel_fn)(void **bufs, int64_t core_id, int64_t ncores);

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

/* ---- the in-memory program cache ------------------------------------------------------------------------ */

typedef struct prog_entry {
  uint64_t h1, h2;                   /* two independent hashes of (name, source) */
  tg_program *p;                     /* holds one reference */
  struct prog_entry *hnext;          /* hash chain */
  struct prog_entry *older, *newer;  /* LRU list */
} prog_entry;

/* Sources the device refused (the compiler's error, a function missing), with the message: the same source fails
 * the same way, so it is not compiled again. Else a kernel the renderer gets wrong runs the compiler on every
 * realize that needs it, about 100 ms each, for the same error. A ring: the oldest failure is forgotten first. */
#define FAILED_MAX 32
typedef struct failed_src { uint64_t h1, h2; char msg[1024]; } failed_src;

static struct {
  pthread_mutex_t lock;
  prog_entry *buckets[PC_BUCKETS];
  prog_entry *newest, *oldest;
  int count;
  uint64_t mem_hits, disk_hits;
  failed_src failed[FAILED_MAX];
  int nfailed, next_failed;
  unsigned failed_env;  /* env_generation() of the failures: another TG_CC (tests) may compile them */
} pc = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* with pc.lock held: the failure recorded for (h1, h2), or NULL */
static const failed_src *failed_find(uint64_t h1, uint64_t h2) {
  if (pc.failed_env != env_generation()) {
    pc.nfailed = pc.next_failed = 0;
    pc.failed_env = env_generation();
  }
  for (int i = 0; i < pc.nfailed; i++)
    if (pc.failed[i].h1 == h1 && pc.failed[i].h2 == h2) return &pc.failed[i];
  return NULL;
}

static void lru_unlink(prog_entry *e) {
  if (e->older) e->older->newer = e->newer;
  else pc.oldest = e->newer;
  if (e->newer) e->newer->older = e->older;
  else pc.newest = e->older;
  e->older = e->newer = NULL;
}

static void lru_push_newest(prog_entry *e) {
  e->older = pc.newest;
  e->newer = NULL;
  if (pc.newest) pc.newest->newer = e;
  else pc.oldest = e;
  pc.newest = e;
}

static prog_entry **bucket_of(uint64_t h1) { return &pc.buckets[h1 % PC_BUCKETS]; }

/* with pc.lock held */
static prog_entry *pc_find(uint64_t h1, uint64_t h2) {
  for (prog_entry *e = *bucket_of(h1); e; e = e->hnext)
    if (e->h1 == h1 && e->h2 == h2) return e;
  return NULL;
}

/* with pc.lock held: unlinks e from its chain and the LRU list */
static void pc_remove(prog_entry *e) {
  prog_entry **pp = bucket_of(e->h1);
  while (*pp != e) pp = &(*pp)->hnext;
  *pp = e->hnext;
  lru_unlink(e);
  pc.count--;
}

/* with pc.lock held: drops least recently used programs nobody else holds, down to PC_MAX; returns them
 * chained through hnext, to be released without the lock */
static prog_entry *pc_evict(void) {
  prog_entry *out = NULL;
  for (prog_entry *e = pc.oldest, *next; e && pc.count > PC_MAX; e = next) {
    next = e->newer;
    if (__atomic_load_n(&e->p->refcnt, __ATOMIC_ACQUIRE) != 1) continue;
    pc_remove(e);
    e->hnext = out;
    out = e;
  }
  return out;
}

static void release_entries(prog_entry *e) {
  while (e) {
    prog_entry *next = e->hnext;
    program_release(e->p);
    free(e);
    e = next;
  }
}

void cpu_program_cache_clear(void) {
  pthread_mutex_lock(&pc.lock);
  pc.nfailed = pc.next_failed = 0;
  prog_entry *all = NULL;
  while (pc.oldest) {
    prog_entry *e = pc.oldest;
    pc_remove(e);
    e->hnext = all;
    all = e;
  }
  pthread_mutex_unlock(&pc.lock);
  release_entries(all);
}

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
                    .compile_ms = now_ms() - t0};
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
  size_t len = strlen(src), nlen = strlen(name);
  uint64_t h1 = hash_bytes(src, len, hash_bytes(name, nlen, 1));
  uint64_t h2 = hash_bytes(src, len, hash_bytes(name, nlen, 2));

  pthread_mutex_lock(&pc.lock);
  prog_entry *e = pc_find(h1, h2);
  if (e) {
    lru_unlink(e);
    lru_push_newest(e);
    program_retain(e->p);
    pc.mem_hits++;
    pthread_mutex_unlock(&pc.lock);
    return e->p;
  }
  const failed_src *f = failed_find(h1, h2);
  if (f) {
    tg_set_error(TG_ERR_DEVICE, "%s", f->msg);
    pthread_mutex_unlock(&pc.lock);
    return NULL;
  }
  pthread_mutex_unlock(&pc.lock);

  /* compile without the lock, so threads compiling different kernels do not wait for each other */
  bool refused;
  tg_program *p = load_program(d, name, src, &refused);
  if (!p) {
    if (refused) {  /* only the source's own faults: out of memory, a signal or the cache directory's I/O may pass */
      pthread_mutex_lock(&pc.lock);
      failed_src *slot = &pc.failed[pc.next_failed];
      *slot = (failed_src){.h1 = h1, .h2 = h2};
      snprintf(slot->msg, sizeof slot->msg, "%s", tg_error());
      pc.next_failed = (pc.next_failed + 1) % FAILED_MAX;
      if (pc.nfailed < FAILED_MAX) pc.nfailed++;
      pthread_mutex_unlock(&pc.lock);
    }
    return NULL;
  }

  prog_entry *ne = mem_alloc(sizeof *ne);
  pthread_mutex_lock(&pc.lock);
  if (p->from_disk) pc.disk_hits++;
  e = pc_find(h1, h2);
  if (e) {  /* another thread loaded it meanwhile: use theirs */
    program_retain(e->p);
    pthread_mutex_unlock(&pc.lock);
    free(ne);
    program_release(p);
    return e->p;
  }
  prog_entry *evicted = NULL;
  if (ne) {  /* without an entry the program is just not cached */
    *ne = (prog_entry){.h1 = h1, .h2 = h2, .p = p, .hnext = *bucket_of(h1)};
    *bucket_of(h1) = ne;
    lru_push_newest(ne);
    pc.count++;
    program_retain(p);  /* the cache's reference */
    evicted = pc_evict();
  }
  pthread_mutex_unlock(&pc.lock);
  release_entries(evicted);
  return p;
}

typedef struct launch_ctx {
  kernel_fn fn;
  void **bufs;
} launch_ctx;

static void launch_task(void *ctx, int64_t core_id, int64_t ncores) {
  launch_ctx *l = ctx;
  l->fn(l->bufs, core_id, ncores);
}

static tg_status cpu_launch(const tg_program *p, void **bufs, int nbufs, int nthreads, double *ms) {
  if (!p || !p->fn || p->dev != &cpu_dev || nbufs < 0 || (nbufs > 0 && !bufs)) {
    tg_set_error(TG_ERR_ARG, "CPU launch: %s", !p || !p->fn ? "no program" : p->dev != &cpu_dev ? "not a CPU program"
                                                                                               : "bad buffer list");
    return TG_ERR_ARG;
  }
  launch_ctx l = {.fn = (kernel_fn)p->fn, .bufs = bufs};
  struct timespec t0, t1;
  if (ms) clock_gettime(CLOCK_MONOTONIC, &t0);
  pool_run(launch_task, &l, nthreads > 0 ? nthreads : pool_size());
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
    .cached_bytes = cpu_cached_bytes,
};

const device *device_cpu(void) { return &cpu_dev; }


runtime_counters runtime_get_counters(void) {
  runtime_counters c = {0};
  pthread_mutex_lock(&pc.lock);
  c.mem_hits = pc.mem_hits;
  c.disk_hits = pc.disk_hits;
  pthread_mutex_unlock(&pc.lock);
  c.compiles = compile_cache_compiles();
  c.disk_rejects = compile_cache_rejects();
  host_alloc_counters(&c.buffers_allocated, &c.buffer_cache_hits, &c.bytes_cached);
  return c;
}

void runtime_shutdown(void) {
  cpu_program_cache_clear();
  buffer_cache_flush();
  pool_shutdown();
}
