/* cpu.c — the CPU device: host buffers, C compiled by the system compiler, kernels run on the thread pool.
 *
 * compile() turns C source into a program: the disk cache (compile_cache.c) gives a shared object, dlopen
 * loads it and dlsym finds the kernel. Programs are also cached in memory (program_cache.c), so one process
 * never loads the same kernel twice. launch() runs the kernel
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
#include "runtime/program_cache.h"
#include "uop/env.h"
#include "uop/uop.h"

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
  return program_cache_get(&pc, d, 0, name, src, load_program);
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
  program_cache_counters(&pc, &c.mem_hits, &c.disk_hits);
  c.compiles = compile_cache_compiles();
  c.disk_rejects = compile_cache_rejects();
  host_alloc_counters(&c.buffers_allocated, &c.buffer_cache_hits, &c.bytes_cached);
  return c;
}
