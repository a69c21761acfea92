/* cuda.h — what the CUDA runtime (cuda.c, nvrtc.c) offers besides the device interface of device.h.
 *
 * NVRTC (nvrtc.c) compiles CUDA C to a cubin or PTX without a GPU; it is loaded with dlopen on first use, so
 * the library builds and runs where the CUDA toolkit is absent. cuda.c's kernel images go through a disk cache
 * (cuda_compile_image), usable without a GPU too: the tests and the renderer's compile check use it here.
 *
 * The kernel ABI the CUDA renderer emits:
 *   extern "C" __global__ void NAME(float *data0, const float *data1, ...)
 * one pointer per buffer, in order; a thread's index comes from blockIdx/blockDim/threadIdx. A launch runs
 * global[k]/local[k] blocks of local[k] threads on axis k (tg_program's global counts threads, as OpenCL's).
 */
#ifndef TG_CUDA_H
#define TG_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg.h"

/* src (kernel name, for messages and the program's file name) compiled by NVRTC for arch: "sm_90" with cubin
 * true gives a cubin (an ELF file), "compute_90" with cubin false PTX text (NUL included in *nbytes). *image
 * is the caller's, freed with free(). TG_ERR_DEVICE with NVRTC's log when the source does not compile, or
 * naming what to install when NVRTC is missing; TG_ERR_NOMEM. Thread-safe. */
tg_status nvrtc_compile(const char *name, const char *src, const char *arch, bool cubin, void **image,
                        size_t *nbytes);
/* whether NVRTC could be loaded (loads it on the first call) */
bool nvrtc_available(void);
/* NVRTC's version (major*1000 + minor*10, as CUDA's: 13000), 0 when it is missing */
int nvrtc_version(void);
/* the real architectures (75 for sm_75, ...) NVRTC compiles cubins for, ascending, into archs (up to cap);
 * returns how many it knows (0 when NVRTC is missing) */
int nvrtc_supported_archs(int *archs, int cap);

/* The image for a device of compute capability sm (90 for sm_90): a cubin for sm_<sm> when NVRTC knows that
 * architecture, else PTX for the newest compute_<k> below it (the driver compiles that PTX when it loads it).
 * Looked up first in the disk cache (compile_cache_dir(), file cuda-<hash>.bin, keyed by the source, the name,
 * the target and NVRTC's version, checked by a record at its end; a damaged file is compiled again), else
 * compiled and written there atomically. *target gets the architecture compiled for ("sm_90", "compute_90"),
 * *is_ptx whether the image is PTX, *from_disk whether it came from the cache. */
tg_status cuda_compile_image(const char *name, const char *src, int sm, void **image, size_t *nbytes,
                             char target[16], bool *is_ptx, bool *from_disk);

/* counters of the CUDA runtime, for tests and DEBUG */
typedef struct cuda_counters {
  uint64_t compiles;      /* NVRTC compilations */
  uint64_t disk_hits;     /* images found in the disk cache */
  uint64_t disk_rejects;  /* cache files found damaged, compiled again */
  uint64_t mem_hits;      /* compile() calls answered by the in-memory program cache */
  uint64_t allocs;        /* cuMemAlloc calls */
  uint64_t alloc_hits;    /* allocations answered by the freed-buffer cache */
} cuda_counters;
cuda_counters cuda_get_counters(void);
/* drops the in-memory program cache and gives back every open device's freed buffers (runtime_shutdown) */
void cuda_release_caches(void);

/* the driver library device_cuda opens ("libcuda.so.1"; NULL restores it), for tests: a driver that is not
 * there, or CUDA's stub library, must give TG_ERR_DEVICE. Forgets a driver that failed to load; TG_ERR_ARG
 * once a driver has loaded (its devices stay open for the life of the process). */
tg_status cuda_set_driver_path(const char *path);

#endif
