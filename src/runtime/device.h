/* device.h — devices behind one interface: allocate, copy, compile, load, launch.
 *
 * A device is a struct of function pointers. The engine asks a device for buffers and programs and never
 * looks inside them. The CPU device (cpu.c) compiles C with the system compiler into a shared object,
 * caches it on disk by a hash of source + compiler + flags + CPU (compile_cache.c), loads it with dlopen
 * and runs it on a persistent thread pool (threadpool.c). The OpenCL device (opencl.c) and the CUDA device
 * (cuda.c) load their drivers at run time (dlopen), so the library builds and runs where they are absent; a
 * device whose driver is missing is an error naming what to install, never silently the CPU.
 *
 * On a GPU device a buffer's ptr is the driver's handle (a cl_mem, a CUdeviceptr), never host memory: the
 * engine reads and writes contents only through copyin/copyout/copy.
 */
#ifndef TG_DEVICE_H
#define TG_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg.h"

typedef struct device device;

/* A buffer: device memory, reference counted. */
typedef struct tg_buffer {
  int refcnt;
  const device *dev;
  size_t nbytes;
  void *ptr;        /* host pointer on the CPU device */
  bool wrapped;     /* memory the user gave us (tg_from_blob): never freed by us */
  /* kernels that wrote it in place (an assign realized into it): a BUFFER node made before the last one
   * (its epoch is the count when it was made) stands for contents that are gone */
  uint32_t writes;
  /* wrapped only: called once when the buffer is freed, to let go of the memory (a file mapping, say) */
  void (*on_free)(void *ctx);
  void *ctx;
  bool counted;     /* made by buffer_new: counted in its device's memory in use (memory.c) until freed */
  struct tg_buffer *parent;  /* a view (buffer_view): bytes of parent, which it holds a reference to */
  bool arena;       /* a JIT arena: counted among the arenas too */
} tg_buffer;

/* A compiled kernel. A CPU kernel has the signature
 *   void name(void **bufs, int64_t core_id, int64_t ncores, int64_t worker)
 * and splits its outermost THREAD loop by core_id (a chunk of ncores); worker (the pool thread running it)
 * picks its per-thread scratch. A GPU kernel takes one pointer argument per buffer, in
 * order, and runs over global[] work items in groups of local[] (OpenCL's NDRange: global counts work items,
 * a multiple of local; CUDA's grid is global/local blocks of local threads). */
typedef struct tg_program {
  int refcnt;
  const device *dev;
  char *name;
  void *fn;        /* entry point */
  void *handle;    /* dlopen handle or device module */
  bool from_disk;  /* loaded from the disk cache rather than compiled now */
  double compile_ms;
  size_t global[3], local[3];  /* GPU devices: the launch shape, set by the engine after compile */
  int nargs;       /* OpenCL only: buffer arguments the kernel declares (a buffer no op reads is none); -1 unknown */
  /* CPU only: the trip count of the kernel's THREAD loop and the loop iterations of the whole kernel (its
   * name_split symbol), which size the chunks cpu_launch cuts the loop into; 0 when it has none */
  int64_t split_trip;
  double split_work;
} tg_program;

typedef enum device_kind { DEVICE_CPU, DEVICE_CL, DEVICE_CUDA } device_kind;

struct device {
  const char *name;  /* "CPU", "CL", "CL:1", "CUDA", "CUDA:1" */
  device_kind kind;  /* which renderer dialect its kernels are written in */
  char arch[64];     /* what its compiled code depends on besides the source ("sm_90", the OpenCL device and
                      * driver version): part of every kernel cache key */
  void *ctx;         /* the device's own state */
  tg_buffer *(*alloc)(const device *d, size_t nbytes);  /* zero-filled not promised */
  void (*buffer_free)(tg_buffer *b);
  tg_status (*copyin)(tg_buffer *dst, const void *src, size_t nbytes);
  tg_status (*copyout)(void *dst, const tg_buffer *src, size_t nbytes);
  /* source text -> program; NULL with tg_error set on failure */
  tg_program *(*compile)(const device *d, const char *name, const char *src);
  void (*program_free)(tg_program *p);
  /* runs p over bufs on nthreads threads (0: all; the CPU's) or its global/local shape (GPUs). A GPU device
   * may return before the kernel ends (launches are queued in order); *ms, when not NULL, gets the kernel's
   * own time from the device's events, waiting for it */
  tg_status (*launch)(const tg_program *p, void **bufs, int nbufs, int nthreads, double *ms);
  int (*num_threads)(const device *d);
  /* waits until every queued launch and copy has ended; NULL: always synchronous (the CPU) */
  tg_status (*synchronize)(const device *d);
  /* nbytes from src at soff into dst at doff, both buffers of this device; NULL: through the host */
  tg_status (*copy)(tg_buffer *dst, size_t doff, const tg_buffer *src, size_t soff, size_t nbytes);
  /* gives back the device memory held by the freed-buffer cache (an allocation that failed is retried after) */
  void (*flush_cache)(const device *d);
  /* a hint before compile() is called for each of n kernels: a driver with a large fixed cost per build (PoCL
   * parses all of opencl-c.h each time) builds them as one program; the CPU runs several compilers at once
   * (TG_COMPILE_JOBS). Errors are not reported here (compile()
   * reports each kernel's own); NULL: none */
  void (*prebuild)(const device *d, int n, const char *const *names, const char *const *srcs);
  /* bytes held by the freed-buffer cache now (tg_memory's cached); NULL: none kept */
  size_t (*cached_bytes)(const device *d);
};

/* the device named by tinygrad's name: "CPU", "CL", "CL:n", "CUDA", "CUDA:n" (case-insensitive), opened on
 * first use; NULL with tg_error set (TG_ERR_ARG for an unknown name, TG_ERR_DEVICE naming what to install when
 * the driver or the device is missing) */
const device *device_get(const char *name);
const device *device_default(void);   /* DEV's device (the CPU when DEV is unset); NULL with tg_error set */
const device *device_cpu(void);
/* CPU devices in one process: CPU:0 (the CPU) .. CPU:DEVICE_CPU_MAX-1, one host memory and pool (cpu.c); NULL
 * past them */
#define DEVICE_CPU_MAX 8
const device *device_cpu_n(int idx);
/* the OpenCL (opencl.c) and CUDA (cuda.c) devices number idx, opened on first use; NULL with tg_error set */
const device *device_cl(int idx);
const device *device_cuda(int idx);
/* whether the device runs GPU kernels (global/local shapes, a C-style dialect other than the CPU's) */
static inline bool device_is_gpu(const device *d) { return d && d->kind != DEVICE_CPU; }

tg_buffer *buffer_new(const device *d, size_t nbytes);   /* refcnt 1 */
tg_buffer *buffer_wrap(const device *d, void *ptr, size_t nbytes);
/* nbytes of parent from offset on, as a buffer of its own that keeps parent alive (an arena's slot); not on
 * OpenCL, whose buffers are handles without addresses */
tg_buffer *buffer_view(tg_buffer *parent, size_t offset, size_t nbytes);
void buffer_retain(tg_buffer *b);
void buffer_release(tg_buffer *b);
int64_t buffer_live_count(void);  /* buffers made by buffer_new/buffer_wrap and not yet freed */
void program_retain(tg_program *p);
void program_release(tg_program *p);

/* ---- memory accounting (memory.c) ------------------------------------------------------------------ */
/* counts nbytes against d before it is allocated; false with TG_ERR_NOMEM (naming the request, the limit and
 * what is held) when d's limit would be passed even after emptying d's cache */
bool memory_reserve(const device *d, size_t nbytes);
void memory_release(const device *d, size_t nbytes, bool arena);  /* a counted buffer freed (or never made) */
void memory_mark_arena(tg_buffer *b);      /* b is a JIT arena: counted among the arenas as well */
size_t memory_in_use(const device *d);     /* bytes of d's counted buffers alive now */
void memory_use_env_limit(const device *d);  /* d's limit is TG_MEMORY_LIMIT's again, as before tg_memory_set_limit */

/* ---- thread pool (threadpool.c) --------------------------------------------------------------------- */
typedef void (*pool_task)(void *ctx, int64_t core_id, int64_t ncores);
int pool_size(void);                                   /* worker count incl. the caller; TG_THREADS overrides */
void pool_run(pool_task fn, void *ctx, int nthreads);  /* fn(ctx, i, n) for i in [0, n), waits */
/* fn(ctx, i, nids) for i in [0, nids) on up to nthreads threads (0: the pool's), which take the ids one by
 * one as they come free; waits */
void pool_run_split(pool_task fn, void *ctx, int nids, int nthreads);
int pool_worker(void);  /* the pool thread running the calling task: 0 the caller (any other thread), 1.. */
void pool_shutdown(void);

/* ---- compile cache (compile_cache.c) ---------------------------------------------------------------- */
/* the path of a loadable shared object for this source, compiling it if the disk cache lacks it (or holds
 * a file that fails its check: see compile_cache.c); *from_disk says which. Caller frees the path. NULL
 * with tg_error set on a compile failure (TG_ERR_DEVICE, naming TG_CC) or an I/O one. */
char *cpu_compile_to_file(const char *src, bool *from_disk);
uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);  /* 64-bit FNV-1a style hash */
/* as cpu_compile_to_file; *is_temp (if not NULL) says the file is a private temporary (the cache directory
 * was unusable) that the caller should unlink once it has loaded it */
char *cpu_compile_so(const char *src, bool *from_disk, bool *is_temp);
/* Compiles unit, one translation unit that defines what each of the n sources srcs[i] defines (2 <= n <= 64),
 * with one compiler process, and stores the object in the disk cache under every source's key, as
 * cpu_compile_so would find it. Returns how many sources it stored: 0 when the unit failed to compile or there
 * is no cache directory (then compile them one by one: each reports its own error); it sets tg_error() and
 * counts one compile when the compiler ran. */
int cpu_compile_batch(int n, const char *const *srcs, const char *unit);
/* whether the disk cache holds src's object, intact: cpu_compile_so will load it without compiling */
bool cpu_compile_cached(const char *src);
/* whether the last cpu_compile_so on this thread failed because the compiler refused the source (an error in it,
 * not a spawn failure, a signal or the cache directory's I/O): compiling it again would fail the same way */
bool compile_cache_rejected(void);
/* the disk cache directory from now on; NULL: TG_CACHE, else $XDG_CACHE_HOME/tgc, else $HOME/.cache/tgc */
void compile_cache_set_dir(const char *dir);
/* the disk cache directory in use ("" when there is none) into out */
void compile_cache_dir(char *out, size_t n);

/* ---- host memory (buffer.c) ------------------------------------------------------------------------- */
/* 64-byte aligned host memory of at least nbytes, reused from the cache when a block of the same size
 * class is free; NULL with TG_ERR_NOMEM. Thread-safe. */
void *host_alloc(size_t nbytes);
void host_free(void *p, size_t nbytes);   /* nbytes as given to host_alloc; back to the cache or the system */
void buffer_cache_flush(void);            /* returns every cached block to the system */
size_t buffer_cache_set_limit(size_t bytes);  /* most bytes kept cached (default 1 GiB, 0: off); old limit */

/* ---- process-wide state (cpu.c) --------------------------------------------------------------------- */
typedef struct runtime_counters {
  uint64_t compiles;           /* C compiler invocations */
  uint64_t disk_hits;          /* kernels found in the disk cache */
  uint64_t disk_rejects;       /* disk cache files found damaged (or made for another source), compiled again */
  uint64_t mem_hits;           /* compile() calls answered by the in-memory program cache */
  uint64_t prebuilt;           /* kernels compiled or loaded ahead, several at once, by the CPU's prebuild */
  uint64_t buffers_allocated;  /* host blocks taken from the system (not from the buffer cache) */
  uint64_t buffer_cache_hits;  /* host blocks reused from the buffer cache */
  size_t bytes_cached;         /* bytes held by the buffer cache now */
} runtime_counters;
runtime_counters runtime_get_counters(void);
void cpu_program_cache_clear(void);  /* drops the in-memory program cache (programs still held stay alive) */
/* frees every device's program cache and freed-buffer cache, and the thread pool (joined); the runtime restarts
 * lazily (device.c) */
void runtime_shutdown(void);
/* helpers behind runtime_get_counters */
uint64_t compile_cache_compiles(void);
uint64_t compile_cache_rejects(void);
void host_alloc_counters(uint64_t *allocated, uint64_t *hits, size_t *cached);

/* ---- the OpenCL device (opencl.c) ------------------------------------------------------------------- */
typedef struct opencl_counters_t {
  uint64_t compiles;           /* programs built from source */
  uint64_t disk_hits;          /* programs loaded from a binary in the disk cache */
  uint64_t disk_rejects;       /* disk cache binaries found damaged (or refused by the driver), built again */
  uint64_t mem_hits;           /* compile() calls answered by the in-memory program cache */
  uint64_t buffers_allocated;  /* cl_mem objects created (not taken from the freed-buffer cache) */
  uint64_t buffer_cache_hits;  /* buffers reused from the freed-buffer cache */
  size_t bytes_cached;         /* bytes held by the freed-buffer caches of the open devices now */
} opencl_counters_t;
opencl_counters_t opencl_counters(void);  /* process-wide, over every OpenCL device */
void opencl_program_cache_clear(void);    /* drops the in-memory program cache (programs still held stay alive) */
/* opencl_program_cache_clear, and gives back every open device's freed buffers (runtime_shutdown) */
void opencl_release_caches(void);

#endif
