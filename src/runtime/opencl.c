/* opencl.c — the OpenCL device: any installed ICD (a GPU vendor's, or PoCL on the CPU), loaded at run time.
 *
 * The first device_cl() call dlopens libOpenCL.so.1 (the ICD loader), resolves the OpenCL 1.2 functions this
 * file uses (opencl_api.c) and lists the devices of every platform: GPUs first, then the rest, each group in
 * platform order; "CL:n" is number n of that list. Opening one makes a context and one in-order command queue with profiling
 * on. A missing library or device is remembered: every later call gives the same error without trying again.
 *
 * Buffers are cl_mem objects (buffer->ptr). Freed buffers are kept per device by exact byte size (up to
 * 1 GiB), so a training step that frees and allocates the same sizes again reuses them; an allocation the
 * driver refuses for lack of memory empties that cache and tries once more.
 *
 * compile() builds OpenCL C for the device. Programs are cached in memory by a hash of (device, name, source),
 * and their binaries on disk (compile_cache_dir(), files cl-<hash>.bin keyed by the source and the device's
 * name and driver versions), each file starting with a header holding its key and a checksum: a damaged or
 * foreign file is deleted and the source built again, never handed to the driver. launch() sets one cl_mem
 * argument per buffer and enqueues the kernel over the program's global/local shape; it returns at once
 * unless the caller asks for the kernel's time, which is read from the profiling events.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/device.h"
#include "runtime/disk_blob.h"
#include "runtime/free_cache.h"
#include "runtime/opencl_api.h"
#include "runtime/program_cache.h"
#include "uop/uop.h"

/* ---- devices ------------------------------------------------------------------------------------------- */

#define MAX_DEVICES 64
#define CACHE_LIMIT ((size_t)1 << 30)
/* the build options: OpenCL C 1.2, no unsafe math (results must match the CPU's within test_ops' tolerances) */
#define BUILD_OPTIONS "-cl-std=CL1.2"
#define INSTALL_HINT                                                                                          \
  "install an OpenCL driver (Debian: ocl-icd-libopencl1 with pocl-opencl-icd for the CPU, or your GPU vendor's " \
  "ICD)"

typedef struct cl_state {
  cl_device_id id;
  cl_context ctx;
  cl_command_queue queue;
  pthread_mutex_t launch_lock;  /* clSetKernelArg on a shared cl_kernel + its enqueue */
  free_cache freed;             /* freed buffers (their tg_buffer structs too) kept for reuse */
  uint64_t key_seed;            /* hash of the device's name and driver/device/platform versions, and the options */
} cl_state;

typedef struct cl_slot {
  int ready;            /* 0: not tried, 1: open, 2: failed (err holds why); read with acquire */
  device dev;
  cl_state st;
  char name[16];
  tg_status err_status;
  char err[512];
} cl_slot;

static struct {
  pthread_once_t once;
  void *lib;
  tg_status status;  /* of loading and listing: TG_OK or the error every call repeats */
  char err[640];
  int ndev;
  cl_device_id ids[MAX_DEVICES];
  pthread_mutex_t open_lock;
  cl_slot slots[MAX_DEVICES];
} g = {.once = PTHREAD_ONCE_INIT, .open_lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_ullong n_compiles, n_disk_hits, n_disk_rejects, n_allocated, n_cache_hits;

/* appends to g.ids the GPUs (gpus) or the other devices of every platform, in platform order */
static void list_devices(const cl_platform_id *plats, cl_uint nplat, bool gpus) {
  for (cl_uint p = 0; p < nplat && g.ndev < MAX_DEVICES; p++) {
    cl_device_id ids[MAX_DEVICES];
    cl_uint n = 0;
    if (opencl_fn.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, ids, &n) != CL_SUCCESS) continue;
    for (cl_uint i = 0; i < n && i < MAX_DEVICES && g.ndev < MAX_DEVICES; i++) {
      cl_device_type t = 0;
      if (opencl_fn.clGetDeviceInfo(ids[i], CL_DEVICE_TYPE, sizeof t, &t, NULL) != CL_SUCCESS) continue;
      if (((t & CL_DEVICE_TYPE_GPU) != 0) == gpus) g.ids[g.ndev++] = ids[i];
    }
  }
}

/* A child of fork() has none of the driver's threads (PoCL's would never answer it): after a fork every call on an
 * OpenCL device fails at once instead of hanging */
static atomic_bool forked;
static void on_fork_child(void) { atomic_store(&forked, true); }

static bool usable(const char *what) {
  if (!atomic_load_explicit(&forked, memory_order_relaxed)) return true;
  tg_set_error(TG_ERR_DEVICE, "CL %s: this process was forked after the OpenCL device was opened, and a child cannot "
               "use the parent's driver (open the device after fork, or use DEV=CPU in the child)", what);
  return false;
}

/* once per process: the library, its functions and the device list; failures go to g.status/g.err */
static void load_driver(void) {
  pthread_atfork(NULL, NULL, on_fork_child);
  char why[160];
  if (opencl_api_load(&g.lib, why, sizeof why)) {
    g.status = TG_ERR_DEVICE;
    snprintf(g.err, sizeof g.err, "device CL: %s; " INSTALL_HINT, why);
    return;
  }
  cl_platform_id plats[MAX_DEVICES];
  cl_uint nplat = 0;
  cl_int e = opencl_fn.clGetPlatformIDs(MAX_DEVICES, plats, &nplat);
  if (e != CL_SUCCESS || nplat == 0) {
    g.status = TG_ERR_DEVICE;
    snprintf(g.err, sizeof g.err, "device CL: no OpenCL platform found (clGetPlatformIDs: %s); " INSTALL_HINT,
             opencl_error_name(e));
    return;
  }
  if (nplat > MAX_DEVICES) nplat = MAX_DEVICES;
  list_devices(plats, nplat, true);
  list_devices(plats, nplat, false);
  if (g.ndev == 0) {
    g.status = TG_ERR_DEVICE;
    snprintf(g.err, sizeof g.err, "device CL: %u OpenCL platform%s but no device; " INSTALL_HINT, nplat,
             nplat == 1 ? "" : "s");
    return;
  }
  g.status = TG_OK;
}

/* a device string property into out ("?" when it cannot be read) */
static void device_string(cl_device_id id, cl_device_info what, char *out, size_t n) {
  size_t got = 0;
  if (opencl_fn.clGetDeviceInfo(id, what, n - 1, out, &got) != CL_SUCCESS) got = 0;
  out[got < n ? got : n - 1] = 0;
  if (!out[0]) snprintf(out, n, "?");
}

static tg_buffer *cl_alloc(const device *d, size_t nbytes);
static void cl_buffer_free(tg_buffer *b);
static tg_status cl_copyin(tg_buffer *dst, const void *src, size_t nbytes);
static tg_status cl_copyout(void *dst, const tg_buffer *src, size_t nbytes);
static tg_status cl_copy(tg_buffer *dst, size_t doff, const tg_buffer *src, size_t soff, size_t nbytes);
static tg_program *cl_compile(const device *d, const char *name, const char *src);
static void cl_program_free(tg_program *p);
static tg_status cl_launch(const tg_program *p, void **bufs, int nbufs, int nthreads, double *ms);
static int cl_num_threads(const device *d);
static tg_status cl_synchronize(const device *d);
static void cl_flush_cache(const device *d);
static size_t cl_cached_bytes(const device *d);
static void cl_prebuild(const device *d, int n, const char *const *names, const char *const *srcs);

/* with g.open_lock held: makes the context and queue of slot idx; false with s->err set */
static bool open_slot(int idx, cl_slot *s) {
  cl_state *st = &s->st;
  st->id = g.ids[idx];
  if (idx == 0) snprintf(s->name, sizeof s->name, "CL");
  else snprintf(s->name, sizeof s->name, "CL:%d", idx);
  cl_int e = CL_SUCCESS;
  st->ctx = opencl_fn.clCreateContext(NULL, 1, &st->id, NULL, NULL, &e);
  if (!st->ctx) {
    s->err_status = TG_ERR_DEVICE;
    snprintf(s->err, sizeof s->err, "device %s: clCreateContext failed: %s", s->name, opencl_error_name(e));
    return false;
  }
  st->queue = opencl_fn.clCreateCommandQueue(st->ctx, st->id, CL_QUEUE_PROFILING_ENABLE, &e);
  if (!st->queue) {
    opencl_fn.clReleaseContext(st->ctx);
    st->ctx = NULL;
    s->err_status = TG_ERR_DEVICE;
    snprintf(s->err, sizeof s->err, "device %s: clCreateCommandQueue failed: %s", s->name, opencl_error_name(e));
    return false;
  }
  pthread_mutex_init(&st->launch_lock, NULL);
  free_cache_init(&st->freed, CACHE_LIMIT);

  char dname[256], driver[128], dversion[256];
  device_string(st->id, CL_DEVICE_NAME, dname, sizeof dname);
  device_string(st->id, CL_DRIVER_VERSION, driver, sizeof driver);
  device_string(st->id, CL_DEVICE_VERSION, dversion, sizeof dversion);
  /* "tgc-cl1": bump when the disk file format changes */
  uint64_t h = hash_bytes("tgc-cl1", 7, 0);
  h = hash_bytes(dname, strlen(dname) + 1, h);
  h = hash_bytes(driver, strlen(driver) + 1, h);
  h = hash_bytes(dversion, strlen(dversion) + 1, h);
  st->key_seed = hash_bytes(BUILD_OPTIONS, sizeof BUILD_OPTIONS, h);

  device *d = &s->dev;
  *d = (device){.name = s->name, .kind = DEVICE_CL, .ctx = st, .alloc = cl_alloc, .buffer_free = cl_buffer_free,
                   .copyin = cl_copyin, .copyout = cl_copyout, .compile = cl_compile, .program_free = cl_program_free,
                   .launch = cl_launch, .num_threads = cl_num_threads, .synchronize = cl_synchronize,
                   .copy = cl_copy, .flush_cache = cl_flush_cache, .prebuild = cl_prebuild,
                   .cached_bytes = cl_cached_bytes};
  if (snprintf(d->arch, sizeof d->arch, "%s %s", dname, driver) < 0) d->arch[0] = 0;
  return true;
}

const device *device_cl(int idx) {
  if (idx >= 0 && idx < MAX_DEVICES && __atomic_load_n(&g.slots[idx].ready, __ATOMIC_ACQUIRE) == 1)
    return &g.slots[idx].dev;
  pthread_once(&g.once, load_driver);
  if (g.status != TG_OK) {
    tg_set_error(g.status, "%s", g.err);
    return NULL;
  }
  if (idx < 0 || idx >= g.ndev) {
    if (g.ndev == 1) tg_set_error(TG_ERR_DEVICE, "device CL:%d: there is 1 OpenCL device (CL)", idx);
    else tg_set_error(TG_ERR_DEVICE, "device CL:%d: there are %d OpenCL devices (CL to CL:%d)", idx, g.ndev, g.ndev - 1);
    return NULL;
  }
  cl_slot *s = &g.slots[idx];
  pthread_mutex_lock(&g.open_lock);
  if (s->ready == 0) __atomic_store_n(&s->ready, open_slot(idx, s) ? 1 : 2, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g.open_lock);
  if (s->ready == 1) return &s->dev;
  tg_set_error(s->err_status, "%s", s->err);
  return NULL;
}

/* ---- buffers ----------------------------------------------------------------------------------------- */

static void release_buffer(void *handle, void *arg) {
  (void)arg;
  tg_buffer *b = handle;
  opencl_fn.clReleaseMemObject((cl_mem)b->ptr);
  free(b);
}

static size_t cl_cached_bytes(const device *d) {
  if (!d || d->kind != DEVICE_CL) return 0;
  return free_cache_bytes(&((cl_state *)d->ctx)->freed);
}

static void cl_flush_cache(const device *d) {
  if (!d || d->kind != DEVICE_CL) return;
  free_cache_drain(&((cl_state *)d->ctx)->freed, release_buffer, NULL);
}

static bool out_of_memory(cl_int e) {
  return e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES || e == CL_OUT_OF_HOST_MEMORY;
}

static tg_buffer *cl_alloc(const device *d, size_t nbytes) {
  if (!usable("alloc")) return NULL;
  cl_state *st = d->ctx;
  tg_buffer *b = free_cache_take(&st->freed, nbytes);
  if (b) {
    atomic_fetch_add(&n_cache_hits, 1);
    *b = (tg_buffer){.refcnt = 1, .dev = d, .nbytes = nbytes, .ptr = b->ptr};
    return b;
  }
  b = mem_alloc(sizeof *b);
  if (!b) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory allocating a buffer of %zu bytes", d->name, nbytes);
    return NULL;
  }
  size_t sz = nbytes ? nbytes : 1;  /* OpenCL has no empty buffers */
  cl_int e = CL_SUCCESS;
  cl_mem m = opencl_fn.clCreateBuffer(st->ctx, CL_MEM_READ_WRITE, sz, NULL, &e);
  if (!m && out_of_memory(e)) {  /* the freed-buffer cache may hold what this needs */
    cl_flush_cache(d);
    m = opencl_fn.clCreateBuffer(st->ctx, CL_MEM_READ_WRITE, sz, NULL, &e);
  }
  if (!m) {
    free(b);
    if (out_of_memory(e) || e == CL_INVALID_BUFFER_SIZE)
      tg_set_error(TG_ERR_NOMEM, "%s: out of device memory allocating a buffer of %zu bytes (clCreateBuffer: %s)",
                   d->name, nbytes, opencl_error_name(e));
    else
      tg_set_error(TG_ERR_DEVICE, "%s: clCreateBuffer of %zu bytes failed: %s", d->name, nbytes, opencl_error_name(e));
    return NULL;
  }
  atomic_fetch_add(&n_allocated, 1);
  *b = (tg_buffer){.refcnt = 1, .dev = d, .nbytes = nbytes, .ptr = m};
  return b;
}

static void cl_buffer_free(tg_buffer *b) {
  if (!b) return;
  if (b->wrapped) {  /* buffer_release handles these; the memory is not a cl_mem of ours */
    if (b->on_free) b->on_free(b->ctx);
    free(b);
    return;
  }
  if (!free_cache_put(&((cl_state *)b->dev->ctx)->freed, b->nbytes, b)) release_buffer(b, NULL);
}

/* whether b is a buffer of this runtime (a wrap of host memory is not: its ptr is no cl_mem) */
static bool is_cl_buffer(const tg_buffer *b) { return b && b->dev && b->dev->kind == DEVICE_CL && !b->wrapped; }

static tg_status cl_copyin(tg_buffer *dst, const void *src, size_t nbytes) {
  if (!usable("copyin")) return TG_ERR_DEVICE;
  if (!is_cl_buffer(dst) || (!src && nbytes) || nbytes > dst->nbytes) {
    tg_set_error(TG_ERR_ARG, "CL copyin: %zu bytes into %s of %zu", nbytes,
                 !dst ? "no buffer" : !is_cl_buffer(dst) ? "a buffer that is not an OpenCL buffer" : "a buffer",
                 dst ? dst->nbytes : 0);
    return TG_ERR_ARG;
  }
  if (!nbytes) return TG_OK;
  cl_state *st = dst->dev->ctx;
  cl_int e = opencl_fn.clEnqueueWriteBuffer(st->queue, (cl_mem)dst->ptr, CL_TRUE, 0, nbytes, src, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    tg_set_error(TG_ERR_DEVICE, "%s copyin of %zu bytes: clEnqueueWriteBuffer: %s", dst->dev->name, nbytes,
                 opencl_error_name(e));
    return TG_ERR_DEVICE;
  }
  return TG_OK;
}

static tg_status cl_copyout(void *dst, const tg_buffer *src, size_t nbytes) {
  if (!usable("copyout")) return TG_ERR_DEVICE;
  if (!is_cl_buffer(src) || (!dst && nbytes) || nbytes > src->nbytes) {
    tg_set_error(TG_ERR_ARG, "CL copyout: %zu bytes from %s of %zu", nbytes,
                 !src ? "no buffer" : !is_cl_buffer(src) ? "a buffer that is not an OpenCL buffer" : "a buffer",
                 src ? src->nbytes : 0);
    return TG_ERR_ARG;
  }
  if (!nbytes) return TG_OK;
  cl_state *st = src->dev->ctx;
  cl_int e = opencl_fn.clEnqueueReadBuffer(st->queue, (cl_mem)src->ptr, CL_TRUE, 0, nbytes, dst, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    tg_set_error(TG_ERR_DEVICE, "%s copyout of %zu bytes: clEnqueueReadBuffer: %s", src->dev->name, nbytes,
                 opencl_error_name(e));
    return TG_ERR_DEVICE;
  }
  return TG_OK;
}

static tg_status cl_copy(tg_buffer *dst, size_t doff, const tg_buffer *src, size_t soff, size_t nbytes) {
  if (!usable("copy")) return TG_ERR_DEVICE;
  bool ok = is_cl_buffer(dst) && is_cl_buffer(src) && dst->dev == src->dev;
  if (!ok || soff > src->nbytes || nbytes > src->nbytes - soff || doff > dst->nbytes || nbytes > dst->nbytes - doff) {
    tg_set_error(TG_ERR_ARG, "CL copy: %zu bytes from offset %zu of a buffer of %zu to offset %zu of one of %zu%s",
                 nbytes, soff, src ? src->nbytes : 0, doff, dst ? dst->nbytes : 0,
                 ok ? "" : " (both must be OpenCL buffers of one device)");
    return TG_ERR_ARG;
  }
  if (!nbytes) return TG_OK;
  if (dst == src && soff < doff + nbytes && doff < soff + nbytes) {
    tg_set_error(TG_ERR_ARG, "CL copy: %zu bytes from offset %zu to offset %zu of the same buffer overlap", nbytes,
                 soff, doff);
    return TG_ERR_ARG;
  }
  cl_state *st = dst->dev->ctx;
  cl_int e = opencl_fn.clEnqueueCopyBuffer(st->queue, (cl_mem)src->ptr, (cl_mem)dst->ptr, soff, doff, nbytes, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    tg_set_error(TG_ERR_DEVICE, "%s copy of %zu bytes: clEnqueueCopyBuffer: %s", dst->dev->name, nbytes,
                 opencl_error_name(e));
    return TG_ERR_DEVICE;
  }
  return TG_OK;
}

/* ---- the disk cache of program binaries ------------------------------------------------------------------- */

static const char BIN_MAGIC[8] = {'t', 'g', 'c', '-', 'c', 'l', '2', '\n'};   /* disk_blob.c's header */
#define MAX_BIN_BYTES ((size_t)256 << 20)

/* the binary in path for (key, key2) as a built program, or NULL: no file (*bad false), or a file that fails
 * its check or that the driver refuses (*bad true; the caller deletes it) */
static cl_program disk_load(cl_state *st, const char *path, uint64_t key, uint64_t key2, bool *bad, const char **why) {
  void *bin;
  size_t len;
  disk_blob_status ds = disk_blob_read(path, BIN_MAGIC, key, key2, MAX_BIN_BYTES, &bin, &len, why);
  *bad = ds == DISK_BLOB_DAMAGED;
  if (ds != DISK_BLOB_OK) return NULL;
  const unsigned char *bins[1] = {bin};
  cl_int bstatus = CL_SUCCESS, e = CL_SUCCESS;
  cl_program prog = opencl_fn.clCreateProgramWithBinary(st->ctx, 1, &st->id, &len, bins, &bstatus, &e);
  if (prog && (bstatus != CL_SUCCESS || opencl_fn.clBuildProgram(prog, 1, &st->id, BUILD_OPTIONS, NULL, NULL) != CL_SUCCESS)) {
    opencl_fn.clReleaseProgram(prog);
    prog = NULL;
  }
  free(bin);
  if (!prog) {
    *bad = true;
    *why = "was refused by the driver";
  }
  return prog;
}

/* writes prog's binary to path; failures leave no file (the cache is an optimisation) */
static void disk_store(cl_program prog, const char *dir, const char *path, uint64_t key, uint64_t key2) {
  size_t size = 0;
  if (opencl_fn.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || !size ||
      size > MAX_BIN_BYTES)
    return;
  unsigned char *buf = mem_alloc(size);
  if (!buf) return;
  unsigned char *bins[1] = {buf};
  if (opencl_fn.clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS)
    disk_blob_write(dir, path, BIN_MAGIC, key, key2, buf, size);
  free(buf);
}

/* ---- programs -------------------------------------------------------------------------------------------- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* builds src from source for st's device; NULL with tg_error set (the build log) and *refused set when the
 * compiler rejected it */
static cl_program build_source(const device *d, const char *name, const char *src, bool *refused) {
  cl_state *st = d->ctx;
  cl_int e = CL_SUCCESS;
  size_t len = strlen(src);
  cl_program prog = opencl_fn.clCreateProgramWithSource(st->ctx, 1, &src, &len, &e);
  if (!prog) {
    tg_set_error(out_of_memory(e) ? TG_ERR_NOMEM : TG_ERR_DEVICE, "%s: kernel %s: clCreateProgramWithSource: %s",
                 d->name, name, opencl_error_name(e));
    return NULL;
  }
  atomic_fetch_add(&n_compiles, 1);
  e = opencl_fn.clBuildProgram(prog, 1, &st->id, BUILD_OPTIONS, NULL, NULL);
  if (e == CL_SUCCESS) return prog;
  char log[900];
  size_t got = 0;
  if (opencl_fn.clGetProgramBuildInfo(prog, st->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &got) != CL_SUCCESS) {
    /* a log longer than the buffer is refused whole: read it all, keep the start */
    size_t need = 0;
    char *all = NULL;
    got = 0;
    if (opencl_fn.clGetProgramBuildInfo(prog, st->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &need) == CL_SUCCESS && need &&
        (all = mem_alloc(need + 1)) != NULL &&
        opencl_fn.clGetProgramBuildInfo(prog, st->id, CL_PROGRAM_BUILD_LOG, need, all, NULL) == CL_SUCCESS) {
      got = need < sizeof log - 1 ? need : sizeof log - 1;
      memcpy(log, all, got);
    }
    free(all);
  }
  log[got < sizeof log ? got : sizeof log - 1] = 0;
  size_t n = strlen(log);
  while (n && (log[n - 1] == '\n' || log[n - 1] == ' ')) log[--n] = 0;
  opencl_fn.clReleaseProgram(prog);
  *refused = e == CL_BUILD_PROGRAM_FAILURE;
  tg_set_error(TG_ERR_DEVICE, "CL: kernel %s failed to compile: %s%s%s", name, opencl_error_name(e), n ? "\n" : "", log);
  return NULL;
}

/* ---- programs built ahead (prebuild) ---------------------------------------------------------------------
 * PoCL's clBuildProgram costs ~0.3-0.6 s whatever the source (its clang parses all of opencl-c.h), so the new
 * kernels of a schedule are built as one program; each waits here, under its own source's keys, for the
 * compile() that makes its kernel (and goes to the disk cache too, for later processes). */
#define STAGE_MAX 256
static struct {
  pthread_mutex_t lock;
  struct { const device *d; uint64_t key, key2; cl_program prog; char kname[128]; } e[STAGE_MAX];
  int n;
} stage = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* the staged program for (d, key, key2), which the caller now holds, and its kernel's name there; or NULL */
static cl_program stage_take(const device *d, uint64_t key, uint64_t key2, char kname[128]) {
  cl_program prog = NULL;
  pthread_mutex_lock(&stage.lock);
  for (int i = 0; i < stage.n && !prog; i++)
    if (stage.e[i].d == d && stage.e[i].key == key && stage.e[i].key2 == key2) {
      prog = stage.e[i].prog;
      memcpy(kname, stage.e[i].kname, 128);
      stage.e[i] = stage.e[--stage.n];
    }
  pthread_mutex_unlock(&stage.lock);
  return prog;
}

static void stage_clear(void) {
  pthread_mutex_lock(&stage.lock);
  for (int i = 0; i < stage.n; i++) opencl_fn.clReleaseProgram(stage.e[i].prog);
  stage.n = 0;
  pthread_mutex_unlock(&stage.lock);
}

/* the disk-cache keys of src on d, and the file's path (false: no cache directory) */
static bool source_keys(const device *d, const char *src, uint64_t *key, uint64_t *key2, char *dir, char *path) {
  cl_state *st = d->ctx;
  size_t len = strlen(src);
  *key = hash_bytes(src, len, st->key_seed);
  *key2 = hash_bytes(src, len, st->key_seed ^ 0x6b6579326b657932ull);
  compile_cache_dir(dir, PATH_MAX);
  return dir[0] && snprintf(path, PATH_MAX, "%s/cl-%016llx.bin", dir, (unsigned long long)*key) < PATH_MAX - 16;
}

static bool in_memory_cache(const device *d, const char *name, const char *src);

/* src with its kernel named `to` instead of `name` (a copy the caller frees), or NULL */
static char *rename_kernel(const char *src, const char *name, const char *to) {
  char decl[160];
  snprintf(decl, sizeof decl, "__kernel void %s(", name);
  const char *at = strstr(src, decl);
  if (!at) return NULL;
  size_t pre = (size_t)(at - src), nl = strlen(name), tl = strlen(to), len = strlen(src);
  char *r = mem_alloc(len - nl + tl + 1);
  if (!r) return NULL;
  const size_t kw = strlen("__kernel void ");
  memcpy(r, src, pre + kw);
  memcpy(r + pre + kw, to, tl);
  memcpy(r + pre + kw + tl, at + kw + nl, len - pre - kw - nl + 1);
  return r;
}

static void cl_prebuild(const device *d, int n, const char *const *names, const char *const *srcs) {
  if (!d || d->kind != DEVICE_CL || n < 2) return;
  int *pick = mem_alloc((size_t)n * sizeof *pick);
  uint64_t *keys = mem_alloc((size_t)n * 2 * sizeof *keys);
  char **renamed = mem_calloc((size_t)n, sizeof *renamed);   /* a source whose kernel took another name */
  char (*kname)[128] = mem_alloc((size_t)n * sizeof *kname);  /* the kernel's name in the combined program */
  char dir[PATH_MAX], path[PATH_MAX];
  size_t total = 1;
  int m = 0;
  for (int i = 0; pick && keys && renamed && kname && i < n; i++) {
    bool have_path = source_keys(d, srcs[i], &keys[2 * i], &keys[2 * i + 1], dir, path);
    if (in_memory_cache(d, names[i], srcs[i]) || (have_path && access(path, R_OK) == 0)) continue;
    /* kernels of one name (the same shape: E_1000) share a program under names of their own */
    bool dup = false;
    for (int j = 0; j < m && !dup; j++) dup = !strcmp(names[pick[j]], names[i]);
    snprintf(kname[i], sizeof kname[i], dup ? "%s_p%d" : "%s", names[i], i);
    if (dup && !(renamed[i] = rename_kernel(srcs[i], names[i], kname[i]))) continue;
    pick[m++] = i;
    total += strlen(renamed[i] ? renamed[i] : srcs[i]) + 1;
  }
  char *all = m >= 2 ? mem_alloc(total) : NULL;
  if (all) {
    size_t at = 0;
    for (int j = 0; j < m; j++) {
      const char *src = renamed[pick[j]] ? renamed[pick[j]] : srcs[pick[j]];
      size_t len = strlen(src);
      memcpy(all + at, src, len);
      all[at + len] = '\n';
      at += len + 1;
    }
    all[at] = 0;
    bool refused;
    cl_program prog = build_source(d, "(a schedule's kernels)", all, &refused);
    if (!prog) tg_error_clear();  /* each kernel's own compile() reports its error */
    for (int j = 0; prog && j < m; j++) {
      int i = pick[j];
      /* to disk under its own name only: a later process asks the file for that name */
      if (!renamed[i] && source_keys(d, srcs[i], &keys[2 * i], &keys[2 * i + 1], dir, path))
        disk_store(prog, dir, path, keys[2 * i], keys[2 * i + 1]);
      pthread_mutex_lock(&stage.lock);
      if (stage.n < STAGE_MAX && opencl_fn.clRetainProgram(prog) == CL_SUCCESS) {
        stage.e[stage.n] = (__typeof__(stage.e[0])){.d = d, .key = keys[2 * i], .key2 = keys[2 * i + 1], .prog = prog};
        memcpy(stage.e[stage.n++].kname, kname[i], sizeof kname[i]);
      }
      pthread_mutex_unlock(&stage.lock);
    }
    if (prog) opencl_fn.clReleaseProgram(prog);
  }
  for (int i = 0; renamed && i < n; i++) free(renamed[i]);
  free(renamed);
  free(kname);
  free(all);
  free(pick);
  free(keys);
}

/* compiles (or loads from the disk cache) and makes the kernel; a program with one reference, or NULL with
 * tg_error set and *refused true when the source itself is at fault */
static tg_program *load_program(const device *d, const char *name, const char *src, bool *refused) {
  cl_state *st = d->ctx;
  double t0 = now_ms();
  *refused = false;
  size_t len = strlen(src);
  uint64_t key = hash_bytes(src, len, st->key_seed);
  uint64_t key2 = hash_bytes(src, len, st->key_seed ^ 0x6b6579326b657932ull);
  char dir[PATH_MAX], path[PATH_MAX];
  compile_cache_dir(dir, sizeof dir);
  bool have_path = dir[0] && snprintf(path, sizeof path, "%s/cl-%016llx.bin", dir, (unsigned long long)key) <
                                 (int)sizeof path - 16;
  char kname[128];
  cl_program prog = stage_take(d, key, key2, kname);
  if (!prog) snprintf(kname, sizeof kname, "%s", name);
  bool from_disk = false;
  if (!prog && have_path) {
    bool bad;
    const char *why = "";
    prog = disk_load(st, path, key, key2, &bad, &why);
    if (prog) {
      from_disk = true;
      atomic_fetch_add(&n_disk_hits, 1);
    } else if (bad) {
      atomic_fetch_add(&n_disk_rejects, 1);
      unlink(path);
      if (tg_debug_level() >= 1) fprintf(stderr, "CL compile cache: %s %s: building it again\n", path, why);
    }
  }
  if (!prog) {
    prog = build_source(d, name, src, refused);
    if (!prog) return NULL;
    if (have_path) disk_store(prog, dir, path, key, key2);
  }
  cl_int e = CL_SUCCESS;
  cl_kernel k = opencl_fn.clCreateKernel(prog, kname, &e);
  if (!k) {
    opencl_fn.clReleaseProgram(prog);
    *refused = e == CL_INVALID_KERNEL_NAME;
    tg_set_error(TG_ERR_DEVICE, "CL: kernel %s: clCreateKernel: %s%s", name, opencl_error_name(e),
                 *refused ? " (the source defines no kernel of that name)" : "");
    return NULL;
  }
  tg_program *p = mem_alloc(sizeof *p);
  char *nm = mem_strdup(name);
  if (!p || !nm) {
    free(p);
    free(nm);
    opencl_fn.clReleaseKernel(k);
    opencl_fn.clReleaseProgram(prog);
    tg_set_error(TG_ERR_NOMEM, "CL: out of memory loading kernel %s", name);
    return NULL;
  }
  cl_uint nargs = 0;
  const cl_uint CL_KERNEL_NUM_ARGS_ = 0x1191;  /* OpenCL 1.0 */
  bool known = opencl_fn.clGetKernelInfo(k, CL_KERNEL_NUM_ARGS_, sizeof nargs, &nargs, NULL) == CL_SUCCESS;
  *p = (tg_program){.refcnt = 1, .dev = d, .name = nm, .fn = k, .handle = prog, .from_disk = from_disk,
                    .compile_ms = now_ms() - t0, .nargs = known ? (int)nargs : -1};
  if (tg_debug_level() >= 4)
    fprintf(stderr, "%s: kernel %s %s in %.1f ms\n", d->name, name, from_disk ? "loaded from the disk cache" : "built",
            p->compile_ms);
  return p;
}

static void cl_program_free(tg_program *p) {
  if (!p) return;
  if (p->fn) opencl_fn.clReleaseKernel((cl_kernel)p->fn);
  if (p->handle) opencl_fn.clReleaseProgram((cl_program)p->handle);
  free(p->name);
  free(p);
}

/* ---- the in-memory program cache (program_cache.c) ------------------------------------------------------- */

static program_cache pc = PROGRAM_CACHE_INIT;

void opencl_program_cache_clear(void) {
  stage_clear();
  program_cache_clear(&pc);
}

void opencl_release_caches(void) {
  opencl_program_cache_clear();
  for (int i = 0; i < MAX_DEVICES; i++)
    if (__atomic_load_n(&g.slots[i].ready, __ATOMIC_ACQUIRE) == 1) cl_flush_cache(&g.slots[i].dev);
}

/* what separates d's programs from another device's with the same source: the device and its driver */
static uint64_t program_seed(const device *d) { return ((cl_state *)d->ctx)->key_seed ^ (uint64_t)(uintptr_t)d; }

/* whether compile() would find (name, src) in the in-memory cache */
static bool in_memory_cache(const device *d, const char *name, const char *src) {
  return program_cache_has(&pc, program_seed(d), name, src);
}

static tg_program *cl_compile(const device *d, const char *name, const char *src) {
  if (!usable("compile")) return NULL;
  if (!d || d->kind != DEVICE_CL || !name || !*name || !src) {
    tg_set_error(TG_ERR_ARG, "CL compile: %s", !d || d->kind != DEVICE_CL ? "not an OpenCL device"
                                               : !src                     ? "NULL source"
                                                                          : "no kernel name");
    return NULL;
  }
  return program_cache_get(&pc, d, program_seed(d), name, src, load_program);
}

/* ---- launching ----------------------------------------------------------------------------------------- */

static tg_status cl_launch(const tg_program *p, void **bufs, int nbufs, int nthreads, double *ms) {
  if (!usable("launch")) return TG_ERR_DEVICE;
  (void)nthreads;
  if (!p || !p->fn || !p->dev || p->dev->kind != DEVICE_CL || nbufs < 0 || (nbufs > 0 && !bufs)) {
    tg_set_error(TG_ERR_ARG, "CL launch: %s", !p || !p->fn                              ? "no program"
                                              : !p->dev || p->dev->kind != DEVICE_CL ? "not an OpenCL program"
                                                                                     : "bad buffer list");
    return TG_ERR_ARG;
  }
  cl_state *st = p->dev->ctx;
  /* the used dimensions: up to the last nonzero global size (a 0 below it counts as 1); none: one work item */
  cl_uint dim = 0;
  for (cl_uint k = 0; k < 3; k++)
    if (p->global[k]) dim = k + 1;
  bool has_local = p->local[0] || p->local[1] || p->local[2];
  size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
  if (!dim) dim = 1;
  for (cl_uint k = 0; k < dim; k++) {
    if (p->global[k]) global[k] = p->global[k];
    if (p->local[k]) local[k] = p->local[k];
    if (has_local && global[k] % local[k]) {
      tg_set_error(TG_ERR_ARG, "CL launch of %s: global size %zu of dimension %u is not a multiple of local size %zu",
                   p->name, global[k], k, local[k]);
      return TG_ERR_ARG;
    }
  }
  cl_kernel k = p->fn;
  cl_event ev = NULL;
  cl_int e = CL_SUCCESS;
  int bad_arg = -1;
  /* the engine passes every buffer of the kernel; one no op reads (an empty piece of a cat) is no argument */
  if (p->nargs >= 0 && nbufs > p->nargs) nbufs = p->nargs;
  pthread_mutex_lock(&st->launch_lock);
  for (int i = 0; i < nbufs && e == CL_SUCCESS; i++) {
    e = opencl_fn.clSetKernelArg(k, (cl_uint)i, sizeof(cl_mem), &bufs[i]);
    if (e != CL_SUCCESS) bad_arg = i;
  }
  if (e == CL_SUCCESS)
    e = opencl_fn.clEnqueueNDRangeKernel(st->queue, k, dim, NULL, global, has_local ? local : NULL, 0, NULL, ms ? &ev : NULL);
  pthread_mutex_unlock(&st->launch_lock);
  if (e != CL_SUCCESS) {
    if (bad_arg >= 0)
      tg_set_error(TG_ERR_DEVICE, "%s: kernel %s: clSetKernelArg %d of %d: %s", p->dev->name, p->name, bad_arg, nbufs,
                   opencl_error_name(e));
    else
      tg_set_error(TG_ERR_DEVICE, "%s: kernel %s: clEnqueueNDRangeKernel (global %zu,%zu,%zu local %zu,%zu,%zu%s): %s",
                   p->dev->name, p->name, global[0], global[1], global[2], local[0], local[1], local[2],
                   has_local ? "" : " unset", opencl_error_name(e));
    return TG_ERR_DEVICE;
  }
  if (ms) {
    cl_ulong t0 = 0, t1 = 0;
    e = opencl_fn.clWaitForEvents(1, &ev);
    if (e == CL_SUCCESS) e = opencl_fn.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (e == CL_SUCCESS) e = opencl_fn.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    opencl_fn.clReleaseEvent(ev);
    if (e != CL_SUCCESS) {
      tg_set_error(TG_ERR_DEVICE, "%s: kernel %s: waiting for it to end: %s", p->dev->name, p->name, opencl_error_name(e));
      return TG_ERR_DEVICE;
    }
    *ms = t1 > t0 ? (double)(t1 - t0) / 1e6 : 0.0;
  }
  return TG_OK;
}

static tg_status cl_synchronize(const device *d) {
  if (!usable("synchronize")) return TG_ERR_DEVICE;
  if (!d || d->kind != DEVICE_CL) {
    tg_set_error(TG_ERR_ARG, "CL synchronize: not an OpenCL device");
    return TG_ERR_ARG;
  }
  cl_int e = opencl_fn.clFinish(((cl_state *)d->ctx)->queue);
  if (e != CL_SUCCESS) {
    tg_set_error(TG_ERR_DEVICE, "%s: clFinish: %s", d->name, opencl_error_name(e));
    return TG_ERR_DEVICE;
  }
  return TG_OK;
}

/* the GPU's parallelism is in the launch shape, not in host threads */
static int cl_num_threads(const device *d) {
  (void)d;
  return 1;
}

opencl_counters_t opencl_counters(void) {
  uint64_t mem_hits;
  program_cache_counters(&pc, &mem_hits, NULL);
  opencl_counters_t c = {.compiles = atomic_load(&n_compiles),
                         .disk_hits = atomic_load(&n_disk_hits),
                         .disk_rejects = atomic_load(&n_disk_rejects),
                         .mem_hits = mem_hits,
                         .buffers_allocated = atomic_load(&n_allocated),
                         .buffer_cache_hits = atomic_load(&n_cache_hits)};
  for (int i = 0; i < MAX_DEVICES; i++) {
    cl_slot *s = &g.slots[i];
    if (__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE) != 1) continue;
    c.bytes_cached += free_cache_bytes(&s->st.freed);
  }
  return c;
}
