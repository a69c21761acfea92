/* cuda.c — the CUDA device: the driver API loaded at run time, kernels compiled by NVRTC (nvrtc.c).
 *
 * device_cuda(n) opens libcuda.so.1 with dlopen on first use (never linked: tgc builds and runs without CUDA),
 * calls cuInit, and gives device n its primary context and one stream. Every call that talks to the GPU makes
 * that context current first, since the engine may call from any thread. Work is queued on the stream in
 * order: launches and host->device copies return before they end; copyout, synchronize and timed launches wait.
 *
 * Buffers: cuMemAlloc, with a cache of freed buffers by exact size (up to a quarter of the GPU's memory); an
 * allocation the GPU cannot hold empties the cache and tries again. Reusing a freed buffer at once is safe
 * because every kernel and copy runs on the one stream, in order. Host copies go through two pinned staging
 * buffers (STAGE_BYTES each), so the driver's DMA never waits for pageable memory to be pinned.
 *
 * Programs: the source compiled for the GPU's own architecture (a cubin; PTX when NVRTC does not know that
 * architecture yet: the driver compiles it), through a disk cache of images (cuda_compile_image) and an
 * in-memory cache of loaded modules by (device, name, source), as cpu.c has.
 */
#include <dlfcn.h>
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

#include "runtime/cuda.h"
#include "runtime/device.h"
#include "runtime/disk_blob.h"
#include "runtime/free_cache.h"
#include "runtime/program_cache.h"
#include "uop/uop.h"

/* ---- cuda.h of the driver API (CUDA 12.x/13.0): the few types, constants and functions used --------------- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  /* CUdeviceptr_v2 */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define CUDA_ERROR_NOT_FOUND 500
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X 2  /* _Y 3, _Z 4 */
#define CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X 5   /* _Y 6, _Z 7 */
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_EVENT_DEFAULT 0
#define CU_EVENT_DISABLE_TIMING 2
#define CU_STREAM_DEFAULT 0

#define MAX_DEVICES 64
#define STAGE_BYTES ((size_t)8 << 20)  /* per staging buffer; two of them */
#define MAX_IMAGE_BYTES ((size_t)64 << 20)

/* the driver's functions (dlsym'd by their ABI names: cuMemAlloc is cuMemAlloc_v2 since CUDA 3.2) */
static struct {
  CUresult (*Init)(unsigned flags);
  CUresult (*DriverGetVersion)(int *v);
  CUresult (*GetErrorName)(CUresult r, const char **s);
  CUresult (*GetErrorString)(CUresult r, const char **s);
  CUresult (*DeviceGetCount)(int *n);
  CUresult (*DeviceGet)(CUdevice *d, int ordinal);
  CUresult (*DeviceGetName)(char *name, int len, CUdevice d);
  CUresult (*DeviceGetAttribute)(int *v, int attrib, CUdevice d);
  CUresult (*DeviceTotalMem)(size_t *bytes, CUdevice d);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *c, CUdevice d);
  CUresult (*CtxSetCurrent)(CUcontext c);
  CUresult (*StreamCreate)(CUstream *s, unsigned flags);
  CUresult (*StreamSynchronize)(CUstream s);
  CUresult (*MemAlloc)(CUdeviceptr *p, size_t n);
  CUresult (*MemFree)(CUdeviceptr p);
  CUresult (*MemGetInfo)(size_t *free_bytes, size_t *total);
  CUresult (*MemHostAlloc)(void **p, size_t n, unsigned flags);
  CUresult (*MemFreeHost)(void *p);
  CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void *src, size_t n);
  CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t n);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t n, CUstream s);
  CUresult (*MemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t n, CUstream s);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
  CUresult (*ModuleLoadData)(CUmodule *m, const void *image);
  CUresult (*ModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
  CUresult (*ModuleUnload)(CUmodule m);
  CUresult (*LaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared_bytes, CUstream s, void **params, void **extra);
  CUresult (*EventCreate)(CUevent *e, unsigned flags);
  CUresult (*EventRecord)(CUevent e, CUstream s);
  CUresult (*EventSynchronize)(CUevent e);
  CUresult (*EventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*EventDestroy)(CUevent e);
} cu;

/* one GPU */
typedef struct cuda_dev {
  device dev;      /* dev.ctx points back here */
  int idx;
  char name[16];      /* "CUDA", "CUDA:1" */
  char gpu[256];      /* the GPU's own name */
  CUdevice cudev;
  CUcontext ctx;
  CUstream stream;
  int sm;             /* compute capability as 90 for 9.0 */
  int nsm, max_threads, max_block[3], max_grid[3];
  size_t total_mem;
  pthread_mutex_t stage_lock;  /* the staging buffers: held through a whole copy */
  free_cache freed;   /* freed blocks (CUdeviceptr) kept for reuse, up to a quarter of the GPU's memory */
  void *stage[2];     /* pinned; NULL until the first copy (or when pinned memory was refused) */
  CUevent stage_ev[2];
  size_t stage_len[2];
  bool stage_busy[2]; /* a copy from/to it is queued: wait for stage_ev before touching it */
  bool stage_failed;  /* pinned memory was refused: copy synchronously */
} cuda_dev;

static struct {
  pthread_mutex_t lock;
  bool tried;          /* the driver was loaded, or failed to be */
  void *lib;
  char path[256];      /* the library to open; "" = libcuda.so.1 */
  char why[640];       /* why the driver is unusable ("" when it is) */
  int ndev, version;
  cuda_dev *devs[MAX_DEVICES];
} drv = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_ullong n_compiles, n_disk_hits, n_disk_rejects, n_allocs, n_alloc_hits;

/* ---- errors ------------------------------------------------------------------------------------------------ */

/* the CUresult's name: the driver's when it knows it (a stub does not), else ours for the common ones */
static const char *cu_name(CUresult r) {
  const char *s = NULL;
  if (cu.GetErrorName && cu.GetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  switch (r) {
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 4: return "CUDA_ERROR_DEINITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 46: return "CUDA_ERROR_DEVICES_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 200: return "CUDA_ERROR_INVALID_IMAGE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 218: return "CUDA_ERROR_INVALID_PTX";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 500: return "CUDA_ERROR_NOT_FOUND";
    case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case 701: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case 702: return "CUDA_ERROR_LAUNCH_TIMEOUT";
    case 719: return "CUDA_ERROR_LAUNCH_FAILED";
    default: return "CUDA_ERROR_UNKNOWN";
  }
}

static const char *cu_string(CUresult r) {
  const char *s = NULL;
  if (cu.GetErrorString && cu.GetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return "";
}

/* records "CUDA:0: <call> failed[ for kernel K]: NAME (text)"; TG_ERR_NOMEM for out of memory */
static tg_status cu_fail(const cuda_dev *cd, CUresult r, const char *call, const char *kernel) {
  tg_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? TG_ERR_NOMEM : TG_ERR_DEVICE;
  const char *text = cu_string(r);
  tg_set_error(st, "%s: %s failed%s%s: %s%s%s%s", cd ? cd->name : "CUDA", call, kernel ? " for kernel " : "",
               kernel ? kernel : "", cu_name(r), *text ? " (" : "", text, *text ? ")" : "");
  return st;
}

/* makes cd's context current on this thread (the engine calls from any thread) */
static tg_status use(const cuda_dev *cd) {
  CUresult r = cu.CtxSetCurrent(cd->ctx);
  return r == CUDA_SUCCESS ? TG_OK : cu_fail(cd, r, "cuCtxSetCurrent", NULL);
}

static cuda_dev *dev_of(const device *d) { return d && d->kind == DEVICE_CUDA ? (cuda_dev *)d->ctx : NULL; }

/* ---- loading the driver --------------------------------------------------------------------------------------- */

static bool sym(void *lib, const char *name, void *slot) {
  void *f = dlsym(lib, name);
  if (!f) return false;
  memcpy(slot, &f, sizeof f);
  return true;
}

/* with drv.lock held: dlopen + cuInit + cuDeviceGetCount once; drv.why says what is wrong */
static void driver_load(void) {
  if (drv.tried) return;
  drv.tried = true;
  drv.why[0] = 0;
  const char *path = drv.path[0] ? drv.path : "libcuda.so.1";
  static const char install[] = "install the NVIDIA driver (libcuda.so.1) on a machine with an NVIDIA GPU";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(drv.why, sizeof drv.why, "the CUDA driver library %s cannot be loaded (%.200s): %s", path, e ? e : "?",
             install);
    return;
  }
  struct { const char *name; void *slot; } fns[] = {
      {"cuInit", &cu.Init}, {"cuDriverGetVersion", &cu.DriverGetVersion}, {"cuGetErrorName", &cu.GetErrorName},
      {"cuGetErrorString", &cu.GetErrorString}, {"cuDeviceGetCount", &cu.DeviceGetCount},
      {"cuDeviceGet", &cu.DeviceGet}, {"cuDeviceGetName", &cu.DeviceGetName},
      {"cuDeviceGetAttribute", &cu.DeviceGetAttribute}, {"cuDeviceTotalMem_v2", &cu.DeviceTotalMem},
      {"cuDevicePrimaryCtxRetain", &cu.DevicePrimaryCtxRetain}, {"cuCtxSetCurrent", &cu.CtxSetCurrent},
      {"cuStreamCreate", &cu.StreamCreate}, {"cuStreamSynchronize", &cu.StreamSynchronize},
      {"cuMemAlloc_v2", &cu.MemAlloc}, {"cuMemFree_v2", &cu.MemFree}, {"cuMemGetInfo_v2", &cu.MemGetInfo},
      {"cuMemHostAlloc", &cu.MemHostAlloc}, {"cuMemFreeHost", &cu.MemFreeHost},
      {"cuMemcpyHtoD_v2", &cu.MemcpyHtoD}, {"cuMemcpyDtoH_v2", &cu.MemcpyDtoH},
      {"cuMemcpyHtoDAsync_v2", &cu.MemcpyHtoDAsync}, {"cuMemcpyDtoHAsync_v2", &cu.MemcpyDtoHAsync},
      {"cuMemcpyDtoDAsync_v2", &cu.MemcpyDtoDAsync}, {"cuModuleLoadData", &cu.ModuleLoadData},
      {"cuModuleGetFunction", &cu.ModuleGetFunction}, {"cuModuleUnload", &cu.ModuleUnload},
      {"cuLaunchKernel", &cu.LaunchKernel}, {"cuEventCreate", &cu.EventCreate}, {"cuEventRecord", &cu.EventRecord},
      {"cuEventSynchronize", &cu.EventSynchronize}, {"cuEventElapsedTime", &cu.EventElapsedTime},
      {"cuEventDestroy_v2", &cu.EventDestroy},
  };
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
    if (!sym(h, fns[i].name, fns[i].slot)) {
      snprintf(drv.why, sizeof drv.why, "the CUDA driver library %s lacks %s (too old a driver): %s", path,
               fns[i].name, install);
      memset(&cu, 0, sizeof cu);
      dlclose(h);
      return;
    }
  drv.lib = h;
  CUresult r = cu.Init(0);
  if (r == CUDA_SUCCESS) r = cu.DeviceGetCount(&drv.ndev);
  if (r == CUDA_SUCCESS) cu.DriverGetVersion(&drv.version);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    snprintf(drv.why, sizeof drv.why, "cuInit failed: %s: %s is the CUDA toolkit's stub library, not a driver: %s",
             cu_name(r), path, install);
  else if (r == CUDA_ERROR_NO_DEVICE || (r == CUDA_SUCCESS && drv.ndev <= 0))
    snprintf(drv.why, sizeof drv.why, "the NVIDIA driver (%s) finds no CUDA GPU (%s)", path,
             r == CUDA_SUCCESS ? "cuDeviceGetCount gives 0" : cu_name(r));
  else if (r != CUDA_SUCCESS)
    snprintf(drv.why, sizeof drv.why, "cuInit failed: %s (%s): the NVIDIA driver (%s) is not usable", cu_name(r),
             cu_string(r), path);
  if (drv.why[0]) drv.ndev = 0;
}

tg_status cuda_set_driver_path(const char *path) {
  pthread_mutex_lock(&drv.lock);
  bool open = drv.tried && !drv.why[0];
  for (int i = 0; i < MAX_DEVICES; i++) open = open || drv.devs[i];
  if (open) {
    pthread_mutex_unlock(&drv.lock);
    tg_set_error(TG_ERR_ARG, "cuda_set_driver_path: the CUDA driver is loaded already");
    return TG_ERR_ARG;
  }
  if (drv.lib) dlclose(drv.lib);  /* a stub: unloaded, so that its soname libcuda.so.1 names nothing again */
  drv.lib = NULL;
  memset(&cu, 0, sizeof cu);
  drv.tried = false;
  snprintf(drv.path, sizeof drv.path, "%s", path ? path : "");
  pthread_mutex_unlock(&drv.lock);
  return TG_OK;
}

/* ---- buffers ------------------------------------------------------------------------------------------------- */

static size_t cuda_cached_bytes(const device *d) {
  cuda_dev *cd = dev_of(d);
  return cd ? free_cache_bytes(&cd->freed) : 0;
}

/* free_cache_drain's release; arg: whether the context is usable (a lost one took the blocks with it) */
static void release_block(void *handle, void *arg) {
  if (*(bool *)arg) cu.MemFree((CUdeviceptr)(uintptr_t)handle);
}

static void cuda_flush_cache(const device *d) {
  cuda_dev *cd = dev_of(d);
  if (!cd) return;
  bool usable = free_cache_bytes(&cd->freed) == 0 || use(cd) == TG_OK;
  free_cache_drain(&cd->freed, release_block, &usable);
}

static tg_buffer *cuda_alloc(const device *d, size_t nbytes) {
  cuda_dev *cd = dev_of(d);
  if (!cd) {
    tg_set_error(TG_ERR_ARG, "CUDA alloc: not a CUDA device");
    return NULL;
  }
  tg_buffer *b = mem_alloc(sizeof *b);
  if (!b) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of host memory for a buffer of %zu bytes", cd->name, nbytes);
    return NULL;
  }
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)free_cache_take(&cd->freed, nbytes);
  if (p) {
    atomic_fetch_add(&n_alloc_hits, 1);
  } else {
    if (use(cd) != TG_OK) {
      free(b);
      return NULL;
    }
    size_t n = nbytes ? nbytes : 1;  /* cuMemAlloc refuses 0 bytes */
    CUresult r = cu.MemAlloc(&p, n);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      cuda_flush_cache(d);
      r = cu.MemAlloc(&p, n);
    }
    if (r != CUDA_SUCCESS) {
      free(b);
      if (r != CUDA_ERROR_OUT_OF_MEMORY) {
        cu_fail(cd, r, "cuMemAlloc", NULL);
        return NULL;
      }
      size_t fr = 0, total = 0;
      cu.MemGetInfo(&fr, &total);
      tg_set_error(TG_ERR_NOMEM, "%s: out of device memory allocating %zu bytes (%zu MiB free of %zu MiB, after "
                   "emptying the freed-buffer cache)", cd->name, nbytes, fr >> 20, total >> 20);
      return NULL;
    }
    atomic_fetch_add(&n_allocs, 1);
  }
  *b = (tg_buffer){.refcnt = 1, .dev = d, .nbytes = nbytes, .ptr = (void *)(uintptr_t)p};
  return b;
}

static void cuda_buffer_free(tg_buffer *b) {
  if (!b) return;
  cuda_dev *cd = dev_of(b->dev);
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)b->ptr;
  size_t n = b->nbytes;
  free(b);
  if (!cd || !p) return;
  if (!free_cache_put(&cd->freed, n, (void *)(uintptr_t)p) && use(cd) == TG_OK) cu.MemFree(p);
}

/* ---- copies -------------------------------------------------------------------------------------------------- */

/* with cd->stage_lock held: the staging buffers and their events, made on first use; false when pinned memory is
 * refused (then copies go synchronously from the caller's memory) */
static bool stage_ready(cuda_dev *cd) {
  if (cd->stage[0]) return true;
  if (cd->stage_failed) return false;
  for (int k = 0; k < 2; k++) {
    if (cu.MemHostAlloc(&cd->stage[k], STAGE_BYTES, 0) != CUDA_SUCCESS) cd->stage[k] = NULL;
    if (cu.EventCreate(&cd->stage_ev[k], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) cd->stage_ev[k] = NULL;
  }
  if (cd->stage[0] && cd->stage[1] && cd->stage_ev[0] && cd->stage_ev[1]) return true;
  for (int k = 0; k < 2; k++) {
    if (cd->stage[k]) cu.MemFreeHost(cd->stage[k]);
    if (cd->stage_ev[k]) cu.EventDestroy(cd->stage_ev[k]);
    cd->stage[k] = NULL;
    cd->stage_ev[k] = NULL;
  }
  cd->stage_failed = true;
  return false;
}

/* with cd->stage_lock held: waits until staging buffer k is free */
static tg_status stage_wait(cuda_dev *cd, int k, const char *op) {
  if (!cd->stage_busy[k]) return TG_OK;
  CUresult r = cu.EventSynchronize(cd->stage_ev[k]);
  cd->stage_busy[k] = false;
  return r == CUDA_SUCCESS ? TG_OK : cu_fail(cd, r, op, NULL);
}

static tg_status cuda_copyin(tg_buffer *dst, const void *src, size_t nbytes) {
  cuda_dev *cd = dst ? dev_of(dst->dev) : NULL;
  if (!cd || (!src && nbytes) || nbytes > dst->nbytes) {
    tg_set_error(TG_ERR_ARG, "CUDA copyin: %zu bytes into a buffer of %zu%s", nbytes, dst ? dst->nbytes : 0,
                 dst && !cd ? " (not a CUDA buffer)" : "");
    return TG_ERR_ARG;
  }
  if (!nbytes) return TG_OK;
  tg_status st = use(cd);
  if (st != TG_OK) return st;
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst->ptr;
  pthread_mutex_lock(&cd->stage_lock);
  if (!stage_ready(cd)) {
    pthread_mutex_unlock(&cd->stage_lock);
    CUresult r = cu.StreamSynchronize(cd->stream);  /* the synchronous copy is not ordered on our stream */
    if (r == CUDA_SUCCESS) r = cu.MemcpyHtoD(d, src, nbytes);
    return r == CUDA_SUCCESS ? TG_OK : cu_fail(cd, r, "copyin: cuMemcpyHtoD", NULL);
  }
  /* returns once the last chunk is in a staging buffer: the caller's memory is free, the copy still queued */
  int k = 0;
  for (size_t off = 0; off < nbytes && st == TG_OK; off += STAGE_BYTES, k ^= 1) {
    size_t n = nbytes - off < STAGE_BYTES ? nbytes - off : STAGE_BYTES;
    if ((st = stage_wait(cd, k, "copyin: cuEventSynchronize")) != TG_OK) break;
    memcpy(cd->stage[k], (const char *)src + off, n);
    CUresult r = cu.MemcpyHtoDAsync(d + off, cd->stage[k], n, cd->stream);
    if (r == CUDA_SUCCESS) r = cu.EventRecord(cd->stage_ev[k], cd->stream);
    if (r != CUDA_SUCCESS) st = cu_fail(cd, r, "copyin: cuMemcpyHtoDAsync", NULL);
    else cd->stage_busy[k] = true;
  }
  pthread_mutex_unlock(&cd->stage_lock);
  return st;
}

static tg_status cuda_copyout(void *dst, const tg_buffer *src, size_t nbytes) {
  cuda_dev *cd = src ? dev_of(src->dev) : NULL;
  if (!cd || (!dst && nbytes) || nbytes > src->nbytes) {
    tg_set_error(TG_ERR_ARG, "CUDA copyout: %zu bytes from a buffer of %zu%s", nbytes, src ? src->nbytes : 0,
                 src && !cd ? " (not a CUDA buffer)" : "");
    return TG_ERR_ARG;
  }
  if (!nbytes) return TG_OK;
  tg_status st = use(cd);
  if (st != TG_OK) return st;
  CUdeviceptr s = (CUdeviceptr)(uintptr_t)src->ptr;
  pthread_mutex_lock(&cd->stage_lock);
  if (!stage_ready(cd)) {
    pthread_mutex_unlock(&cd->stage_lock);
    CUresult r = cu.StreamSynchronize(cd->stream);
    if (r == CUDA_SUCCESS) r = cu.MemcpyDtoH(dst, s, nbytes);
    return r == CUDA_SUCCESS ? TG_OK : cu_fail(cd, r, "copyout: cuMemcpyDtoH (or a kernel queued before it)", NULL);
  }
  /* two chunks in flight: the GPU fills one staging buffer while the CPU empties the other */
  size_t issued = 0, done = 0;
  int ki = 0, kd = 0, inflight = 0;
  while (done < nbytes && st == TG_OK) {
    while (issued < nbytes && inflight < 2 && st == TG_OK) {
      size_t n = nbytes - issued < STAGE_BYTES ? nbytes - issued : STAGE_BYTES;
      if ((st = stage_wait(cd, ki, "copyout: cuEventSynchronize")) != TG_OK) break;
      CUresult r = cu.MemcpyDtoHAsync(cd->stage[ki], s + issued, n, cd->stream);
      if (r == CUDA_SUCCESS) r = cu.EventRecord(cd->stage_ev[ki], cd->stream);
      if (r != CUDA_SUCCESS) {
        st = cu_fail(cd, r, "copyout: cuMemcpyDtoHAsync", NULL);
        break;
      }
      cd->stage_busy[ki] = true;
      cd->stage_len[ki] = n;
      issued += n;
      ki ^= 1;
      inflight++;
    }
    if (st != TG_OK) break;
    if ((st = stage_wait(cd, kd, "copyout: cuEventSynchronize (a kernel queued before it failed?)")) != TG_OK) break;
    memcpy((char *)dst + done, cd->stage[kd], cd->stage_len[kd]);
    done += cd->stage_len[kd];
    kd ^= 1;
    inflight--;
  }
  pthread_mutex_unlock(&cd->stage_lock);
  return st;
}

static tg_status cuda_copy(tg_buffer *dst, size_t doff, const tg_buffer *src, size_t soff, size_t nbytes) {
  cuda_dev *cd = dst ? dev_of(dst->dev) : NULL;
  if (!cd || !src || src->dev != dst->dev || doff > dst->nbytes || nbytes > dst->nbytes - doff ||
      soff > src->nbytes || nbytes > src->nbytes - soff) {
    tg_set_error(TG_ERR_ARG, "CUDA copy: %zu bytes from offset %zu of a buffer of %zu to offset %zu of one of %zu%s",
                 nbytes, soff, src ? src->nbytes : 0, doff, dst ? dst->nbytes : 0,
                 cd && src && src->dev != dst->dev ? " (on another device)" : "");
    return TG_ERR_ARG;
  }
  if (!nbytes) return TG_OK;
  tg_status st = use(cd);
  if (st != TG_OK) return st;
  CUresult r = cu.MemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst->ptr + doff, (CUdeviceptr)(uintptr_t)src->ptr + soff,
                                  nbytes, cd->stream);
  return r == CUDA_SUCCESS ? TG_OK : cu_fail(cd, r, "cuMemcpyDtoDAsync", NULL);
}

static tg_status cuda_synchronize(const device *d) {
  cuda_dev *cd = dev_of(d);
  if (!cd) {
    tg_set_error(TG_ERR_ARG, "CUDA synchronize: not a CUDA device");
    return TG_ERR_ARG;
  }
  tg_status st = use(cd);
  if (st != TG_OK) return st;
  CUresult r = cu.StreamSynchronize(cd->stream);
  return r == CUDA_SUCCESS ? TG_OK : cu_fail(cd, r, "cuStreamSynchronize (a queued kernel or copy failed)", NULL);
}

/* ---- kernel images: NVRTC and the disk cache --------------------------------------------------------------- */

static const char IMAGE_MAGIC[8] = {'t', 'g', 'c', '-', 'c', 'u', '2', '\n'};   /* disk_blob.c's header */

tg_status cuda_compile_image(const char *name, const char *src, int sm, void **image, size_t *nbytes,
                             char target[16], bool *is_ptx, bool *from_disk) {
  *image = NULL;
  *nbytes = 0;
  *from_disk = *is_ptx = false;
  target[0] = 0;
  if (!name || !*name || !src) {
    tg_set_error(TG_ERR_ARG, "CUDA compile: %s", !src ? "NULL source" : "no kernel name");
    return TG_ERR_ARG;
  }
  if (!nvrtc_available()) return nvrtc_compile(name, src, "sm_90", true, image, nbytes);  /* says what to install */
  /* a cubin for the GPU's own architecture when NVRTC knows it; else PTX for the newest one below it */
  int archs[64], na = nvrtc_supported_archs(archs, 64), pick = 0;
  if (na > 64) na = 64;
  bool exact = false;
  for (int i = 0; i < na; i++) {
    if (archs[i] == sm) exact = true;
    if (archs[i] <= sm) pick = archs[i];
  }
  if (na == 0) pick = sm;  /* an NVRTC without the list: let it judge compute_<sm> */
  if (!pick) {
    int v = nvrtc_version();
    tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s: NVRTC %d.%d does not compile for sm_%d (sm_%d is its oldest); "
                 "use the CUDA toolkit of this GPU's generation", name, v / 1000, v % 1000 / 10, sm, archs[0]);
    return TG_ERR_DEVICE;
  }
  *is_ptx = !exact;
  snprintf(target, 16, "%s_%d", exact ? "sm" : "compute", pick);

  /* "tgc-cu2": bump when the file format or the compile options change */
  uint64_t seed = hash_bytes(target, strlen(target) + 1, 0x7467632d63753200ull);
  int ver = nvrtc_version();
  seed = hash_bytes(&ver, sizeof ver, seed);
  seed = hash_bytes(name, strlen(name) + 1, seed);
  size_t len = strlen(src);
  uint64_t key = hash_bytes(src, len, seed), key2 = hash_bytes(src, len, seed ^ 0x6b6579326b657932ull);
  char dir[PATH_MAX], path[PATH_MAX];
  compile_cache_dir(dir, sizeof dir);
  bool have_path = false;
  if (dir[0]) {
    int n = snprintf(path, sizeof path, "%s/cuda-%016llx.bin", dir, (unsigned long long)key);
    have_path = n > 0 && (size_t)n + 16 < sizeof path;
  }
  if (have_path) {
    const char *why;
    disk_blob_status ds = disk_blob_read(path, IMAGE_MAGIC, key, key2, MAX_IMAGE_BYTES, image, nbytes, &why);
    if (ds == DISK_BLOB_OK) {
      *from_disk = true;
      atomic_fetch_add(&n_disk_hits, 1);
      return TG_OK;
    }
    if (ds == DISK_BLOB_DAMAGED) {
      atomic_fetch_add(&n_disk_rejects, 1);
      unlink(path);
      if (tg_debug_level() >= 1) fprintf(stderr, "CUDA: cache file %s %s: compiling it again\n", path, why);
    }
  }
  atomic_fetch_add(&n_compiles, 1);
  tg_status st = nvrtc_compile(name, src, target, exact, image, nbytes);
  if (st != TG_OK) return st;
  if (have_path) disk_blob_write(dir, path, IMAGE_MAGIC, key, key2, *image, *nbytes);
  return TG_OK;
}

/* ---- the in-memory program cache (program_cache.c) ------------------------------------------------------------ */

static program_cache pc = PROGRAM_CACHE_INIT;

cuda_counters cuda_get_counters(void) {
  uint64_t mem_hits;
  program_cache_counters(&pc, &mem_hits, NULL);
  return (cuda_counters){.compiles = atomic_load(&n_compiles), .disk_hits = atomic_load(&n_disk_hits),
                         .disk_rejects = atomic_load(&n_disk_rejects), .mem_hits = mem_hits,
                         .allocs = atomic_load(&n_allocs), .alloc_hits = atomic_load(&n_alloc_hits)};
}

static void cuda_program_free(tg_program *p) {
  if (!p) return;
  cuda_dev *cd = dev_of(p->dev);
  if (p->handle && cd && use(cd) == TG_OK) cu.ModuleUnload((CUmodule)p->handle);
  free(p->name);
  free(p);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* compiles (or finds on disk) and loads; *refused when the source is at fault (it will fail the same again) */
static tg_program *load_program(cuda_dev *cd, const char *name, const char *src, bool *refused) {
  double t0 = now_ms();
  *refused = false;
  void *image;
  size_t n;
  char target[16];
  bool is_ptx, from_disk;
  tg_status st = cuda_compile_image(name, src, cd->sm, &image, &n, target, &is_ptx, &from_disk);
  if (st != TG_OK) {
    *refused = st == TG_ERR_DEVICE;
    return NULL;
  }
  if (use(cd) != TG_OK) {
    free(image);
    return NULL;
  }
  CUmodule mod = NULL;
  CUresult r = cu.ModuleLoadData(&mod, image);
  free(image);
  if (r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
      tg_set_error(TG_ERR_DEVICE, "%s: kernel %s: the driver (CUDA %d.%d) is older than NVRTC %d.%d, whose PTX for %s "
                   "it cannot load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION): update the NVIDIA driver", cd->name, name,
                   drv.version / 1000, drv.version % 1000 / 10, nvrtc_version() / 1000, nvrtc_version() % 1000 / 10,
                   target);
    else {
      char call[96];
      snprintf(call, sizeof call, "cuModuleLoadData (%s for %s; driver CUDA %d.%d, NVRTC %d.%d)", is_ptx ? "PTX" : "cubin",
               target, drv.version / 1000, drv.version % 1000 / 10, nvrtc_version() / 1000, nvrtc_version() % 1000 / 10);
      cu_fail(cd, r, call, name);
    }
    return NULL;
  }
  CUfunction fn = NULL;
  r = cu.ModuleGetFunction(&fn, mod, name);
  if (r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NOT_FOUND) {
      tg_set_error(TG_ERR_DEVICE, "%s: the compiled source defines no kernel %s (extern \"C\" __global__ void %s)",
                   cd->name, name, name);
      *refused = true;
    } else {
      cu_fail(cd, r, "cuModuleGetFunction", name);
    }
    cu.ModuleUnload(mod);
    return NULL;
  }
  tg_program *p = mem_alloc(sizeof *p);
  char *nm = mem_strdup(name);
  if (!p || !nm) {
    free(p);
    free(nm);
    cu.ModuleUnload(mod);
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory loading kernel %s", cd->name, name);
    return NULL;
  }
  *p = (tg_program){.refcnt = 1, .dev = &cd->dev, .name = nm, .fn = fn, .handle = mod, .from_disk = from_disk,
                    .compile_ms = now_ms() - t0};
  if (tg_debug_level() >= 4)
    fprintf(stderr, "%s: kernel %s %s for %s in %.1f ms\n", cd->name, name,
            from_disk ? "loaded from the disk cache" : "compiled", target, p->compile_ms);
  return p;
}

void cuda_release_caches(void) {
  program_cache_clear(&pc);
  pthread_mutex_lock(&drv.lock);
  cuda_dev *open[MAX_DEVICES];
  for (int i = 0; i < MAX_DEVICES; i++) open[i] = drv.devs[i];
  pthread_mutex_unlock(&drv.lock);
  for (int i = 0; i < MAX_DEVICES; i++)
    if (open[i]) cuda_flush_cache(&open[i]->dev);
}

/* program_cache's builder: d is a CUDA device (cuda_compile checked it) */
static tg_program *build_program(const device *d, const char *name, const char *src, bool *refused) {
  return load_program(dev_of(d), name, src, refused);
}

static tg_program *cuda_compile(const device *d, const char *name, const char *src) {
  cuda_dev *cd = dev_of(d);
  if (!cd || !name || !*name || !src) {
    tg_set_error(TG_ERR_ARG, "CUDA compile: %s", !cd ? "not a CUDA device" : !src ? "NULL source" : "no kernel name");
    return NULL;
  }
  return program_cache_get(&pc, d, (uint64_t)cd->idx + 1, name, src, build_program);
}

/* ---- launching ----------------------------------------------------------------------------------------------- */

static tg_status cuda_launch(const tg_program *p, void **bufs, int nbufs, int nthreads, double *ms) {
  (void)nthreads;
  cuda_dev *cd = p ? dev_of(p->dev) : NULL;
  if (!cd || !p->fn || nbufs < 0 || (nbufs > 0 && !bufs)) {
    tg_set_error(TG_ERR_ARG, "CUDA launch: %s", !p || !p->fn ? "no program" : !cd ? "not a CUDA program" : "bad buffer list");
    return TG_ERR_ARG;
  }
  unsigned grid[3], block[3];
  size_t threads = 1;
  for (int k = 0; k < 3; k++) {
    size_t g = p->global[k] ? p->global[k] : 1, l = p->local[k] ? p->local[k] : 1;
    if (g % l || l > (size_t)cd->max_block[k] || g / l > (size_t)cd->max_grid[k]) {
      tg_set_error(TG_ERR_ARG, "%s launch of kernel %s: global[%d]=%zu local[%d]=%zu: %s", cd->name, p->name, k, g, k,
                   l, g % l ? "global is not a multiple of local"
                   : l > (size_t)cd->max_block[k] ? "more threads per block on this axis than the GPU allows"
                                                  : "more blocks on this axis than the GPU allows");
      return TG_ERR_ARG;
    }
    grid[k] = (unsigned)(g / l);
    block[k] = (unsigned)l;
    threads *= l;
  }
  if (threads > (size_t)cd->max_threads) {
    tg_set_error(TG_ERR_ARG, "%s launch of kernel %s: %zu threads per block (local %zux%zux%zu), the GPU allows %d",
                 cd->name, p->name, threads, p->local[0], p->local[1], p->local[2], cd->max_threads);
    return TG_ERR_ARG;
  }
  tg_status st = use(cd);
  if (st != TG_OK) return st;
  /* kernelParams: a pointer to each argument; a buffer's ptr is its CUdeviceptr, the same 8 bytes */
  _Static_assert(sizeof(void *) == sizeof(CUdeviceptr), "a device pointer travels in a void *");
  void *stack_params[32], **params = stack_params;
  if (nbufs > 32 && !(params = mem_alloc((size_t)nbufs * sizeof *params))) {
    tg_set_error(TG_ERR_NOMEM, "%s launch of kernel %s: out of memory for %d arguments", cd->name, p->name, nbufs);
    return TG_ERR_NOMEM;
  }
  for (int i = 0; i < nbufs; i++) params[i] = &bufs[i];
  CUevent ev[2] = {NULL, NULL};
  CUresult r = CUDA_SUCCESS;
  const char *call = "cuEventCreate";
  if (ms) {
    r = cu.EventCreate(&ev[0], CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS) r = cu.EventCreate(&ev[1], CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS && (r = cu.EventRecord(ev[0], cd->stream)) != CUDA_SUCCESS) call = "cuEventRecord";
  }
  if (r == CUDA_SUCCESS) {
    call = "cuLaunchKernel";
    r = cu.LaunchKernel((CUfunction)p->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, cd->stream,
                        nbufs ? params : NULL, NULL);
  }
  if (ms && r == CUDA_SUCCESS) {
    float t = 0;
    call = "cuEventRecord";
    if ((r = cu.EventRecord(ev[1], cd->stream)) == CUDA_SUCCESS) {
      call = "cuEventSynchronize (the kernel failed)";
      if ((r = cu.EventSynchronize(ev[1])) == CUDA_SUCCESS) {
        call = "cuEventElapsedTime";
        r = cu.EventElapsedTime(&t, ev[0], ev[1]);
      }
    }
    *ms = t;
  }
  for (int i = 0; i < 2; i++)
    if (ev[i]) cu.EventDestroy(ev[i]);
  if (params != stack_params) free(params);
  return r == CUDA_SUCCESS ? TG_OK : cu_fail(cd, r, call, p->name);
}

static int cuda_num_threads(const device *d) {
  cuda_dev *cd = dev_of(d);
  return cd ? cd->nsm : 1;
}

/* ---- opening a device ------------------------------------------------------------------------------------------ */

/* with drv.lock held: device idx's state, or NULL with tg_error set */
static cuda_dev *dev_open(int idx) {
  cuda_dev *cd = mem_calloc(1, sizeof *cd);
  if (!cd) {
    tg_set_error(TG_ERR_NOMEM, "device CUDA:%d: out of memory", idx);
    return NULL;
  }
  cd->idx = idx;
  if (idx) snprintf(cd->name, sizeof cd->name, "CUDA:%d", idx);
  else snprintf(cd->name, sizeof cd->name, "CUDA");
  CUresult r = cu.DeviceGet(&cd->cudev, idx);
  const char *call = "cuDeviceGet";
  int major = 0, minor = 0;
  struct { int attr; int *out; } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major}, {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &cd->nsm}, {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &cd->max_threads},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &cd->max_block[0]}, {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + 1, &cd->max_block[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + 2, &cd->max_block[2]}, {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &cd->max_grid[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + 1, &cd->max_grid[1]}, {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + 2, &cd->max_grid[2]},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof *attrs && r == CUDA_SUCCESS; i++) {
    call = "cuDeviceGetAttribute";
    r = cu.DeviceGetAttribute(attrs[i].out, attrs[i].attr, cd->cudev);
  }
  if (r == CUDA_SUCCESS && (r = cu.DeviceGetName(cd->gpu, (int)sizeof cd->gpu - 1, cd->cudev)) != CUDA_SUCCESS)
    call = "cuDeviceGetName";
  if (r == CUDA_SUCCESS && (r = cu.DeviceTotalMem(&cd->total_mem, cd->cudev)) != CUDA_SUCCESS) call = "cuDeviceTotalMem";
  if (r == CUDA_SUCCESS && (r = cu.DevicePrimaryCtxRetain(&cd->ctx, cd->cudev)) != CUDA_SUCCESS)
    call = "cuDevicePrimaryCtxRetain";
  if (r == CUDA_SUCCESS && (r = cu.CtxSetCurrent(cd->ctx)) != CUDA_SUCCESS) call = "cuCtxSetCurrent";
  if (r == CUDA_SUCCESS && (r = cu.StreamCreate(&cd->stream, CU_STREAM_DEFAULT)) != CUDA_SUCCESS) call = "cuStreamCreate";
  if (r != CUDA_SUCCESS) {
    char what[64];
    snprintf(what, sizeof what, "opening the device: %s", call);
    cu_fail(cd, r, what, NULL);
    free(cd);  /* a retained primary context stays with the process: the driver frees it at exit */
    return NULL;
  }
  pthread_mutex_init(&cd->stage_lock, NULL);
  cd->sm = major * 10 + minor;
  /* freed buffers kept for reuse: up to a quarter of the GPU's memory (an allocation that fails empties it) */
  free_cache_init(&cd->freed, cd->total_mem / 4);
  cd->dev = (device){.name = cd->name, .kind = DEVICE_CUDA, .ctx = cd, .alloc = cuda_alloc,
                        .buffer_free = cuda_buffer_free, .copyin = cuda_copyin, .copyout = cuda_copyout,
                        .compile = cuda_compile, .program_free = cuda_program_free, .launch = cuda_launch,
                        .num_threads = cuda_num_threads, .synchronize = cuda_synchronize, .copy = cuda_copy,
                        .flush_cache = cuda_flush_cache, .cached_bytes = cuda_cached_bytes};
  snprintf(cd->dev.arch, sizeof cd->dev.arch, "sm_%d", cd->sm);
  if (tg_debug_level() >= 2)
    fprintf(stderr, "%s: %s, %s, %d SMs, %zu MiB, driver CUDA %d.%d, NVRTC %d.%d\n", cd->name, cd->gpu, cd->dev.arch,
            cd->nsm, cd->total_mem >> 20, drv.version / 1000, drv.version % 1000 / 10, nvrtc_version() / 1000,
            nvrtc_version() % 1000 / 10);
  return cd;
}

const device *device_cuda(int idx) {
  pthread_mutex_lock(&drv.lock);
  driver_load();
  cuda_dev *cd = NULL;
  if (drv.why[0]) {
    tg_set_error(TG_ERR_DEVICE, "device CUDA:%d: %s", idx, drv.why);
  } else if (idx < 0 || idx >= drv.ndev || idx >= MAX_DEVICES) {
    tg_set_error(TG_ERR_DEVICE, "device CUDA:%d: no such GPU: the NVIDIA driver finds %d (CUDA:0 to CUDA:%d)", idx,
                 drv.ndev, drv.ndev - 1);
  } else {
    cd = drv.devs[idx];
    if (!cd) cd = drv.devs[idx] = dev_open(idx);
  }
  pthread_mutex_unlock(&drv.lock);
  return cd ? &cd->dev : NULL;
}
