/* nvrtc.c — CUDA C -> cubin or PTX with NVRTC, loaded at run time.
 *
 * NVRTC (libnvrtc.so, part of the CUDA toolkit) compiles without a GPU and without the driver. It is opened
 * with dlopen on first use (libnvrtc.so, .so.13, .so.12, then the same in /usr/local/cuda/lib64 and
 * $CUDA_PATH/lib64), so tgc builds and runs where it is absent: then compiling is a TG_ERR_DEVICE error that
 * says what to install. The few types and functions used are declared here from nvrtc.h (CUDA 12/13); their
 * ABI has not changed since CUDA 11.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda.h"
#include "uop/uop.h"

/* ---- nvrtc.h (CUDA 12.x/13.0) -------------------------------------------------------------------------- */
typedef int nvrtcResult;  /* enum: NVRTC_SUCCESS = 0, NVRTC_ERROR_COMPILATION = 6, ... */
typedef struct _nvrtcProgram *nvrtcProgram;
#define NVRTC_SUCCESS 0
#define NVRTC_ERROR_COMPILATION 6

static struct {
  pthread_once_t once;
  void *lib;
  char path[512];  /* the file that loaded */
  const char *(*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int *major, int *minor);
  nvrtcResult (*GetNumSupportedArchs)(int *n);
  nvrtcResult (*GetSupportedArchs)(int *archs);
  nvrtcResult (*CreateProgram)(nvrtcProgram *p, const char *src, const char *name, int nheaders,
                               const char *const *headers, const char *const *include_names);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *p);
  nvrtcResult (*CompileProgram)(nvrtcProgram p, int nopts, const char *const *opts);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram p, size_t *n);
  nvrtcResult (*GetProgramLog)(nvrtcProgram p, char *log);
  nvrtcResult (*GetPTXSize)(nvrtcProgram p, size_t *n);
  nvrtcResult (*GetPTX)(nvrtcProgram p, char *ptx);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram p, size_t *n);
  nvrtcResult (*GetCUBIN)(nvrtcProgram p, char *cubin);
  int version;     /* major*1000 + minor*10 */
  int archs[64];   /* ascending */
  int narchs;
} nv = {.once = PTHREAD_ONCE_INIT};

/* dlsym into *slot; false when missing */
static bool sym(void *lib, const char *name, void *slot) {
  void *f = dlsym(lib, name);
  if (!f) return false;
  memcpy(slot, &f, sizeof f);  /* object pointer -> function pointer without a cast ISO C forbids */
  return true;
}

static void *try_open(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h) snprintf(nv.path, sizeof nv.path, "%s", path);
  return h;
}

static void load_once(void) {
  static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  const char *cuda_path = getenv("CUDA_PATH");
  void *h = NULL;
  for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++) h = try_open(names[i]);
  for (int where = 0; where < 2 && !h; where++) {
    const char *dir = where == 0 ? "/usr/local/cuda" : cuda_path;
    if (!dir || !*dir) continue;
    for (size_t i = 0; !h && i < sizeof names / sizeof *names; i++) {
      char p[512];
      int n = snprintf(p, sizeof p, "%s/lib64/%s", dir, names[i]);
      if (n > 0 && (size_t)n < sizeof p) h = try_open(p);
    }
  }
  if (!h) return;
  bool ok = sym(h, "nvrtcGetErrorString", &nv.GetErrorString) && sym(h, "nvrtcVersion", &nv.Version) &&
            sym(h, "nvrtcCreateProgram", &nv.CreateProgram) && sym(h, "nvrtcDestroyProgram", &nv.DestroyProgram) &&
            sym(h, "nvrtcCompileProgram", &nv.CompileProgram) &&
            sym(h, "nvrtcGetProgramLogSize", &nv.GetProgramLogSize) && sym(h, "nvrtcGetProgramLog", &nv.GetProgramLog) &&
            sym(h, "nvrtcGetPTXSize", &nv.GetPTXSize) && sym(h, "nvrtcGetPTX", &nv.GetPTX);
  if (!ok) {
    dlclose(h);
    return;
  }
  /* cubins and the architecture list came with CUDA 11.1-11.2: an older NVRTC still gives PTX */
  sym(h, "nvrtcGetCUBINSize", &nv.GetCUBINSize);
  sym(h, "nvrtcGetCUBIN", &nv.GetCUBIN);
  sym(h, "nvrtcGetNumSupportedArchs", &nv.GetNumSupportedArchs);
  sym(h, "nvrtcGetSupportedArchs", &nv.GetSupportedArchs);
  int major = 0, minor = 0;
  if (nv.Version(&major, &minor) == NVRTC_SUCCESS) nv.version = major * 1000 + minor * 10;
  int n = 0;
  if (nv.GetNumSupportedArchs && nv.GetSupportedArchs && nv.GetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
    int *all = mem_calloc((size_t)n, sizeof *all);
    if (all && nv.GetSupportedArchs(all) == NVRTC_SUCCESS) {
      for (int i = 0; i < n && nv.narchs < (int)(sizeof nv.archs / sizeof *nv.archs); i++) nv.archs[nv.narchs++] = all[i];
      for (int i = 1; i < nv.narchs; i++)  /* the documentation promises ascending order; do not rely on it */
        for (int j = i; j > 0 && nv.archs[j - 1] > nv.archs[j]; j--) {
          int t = nv.archs[j];
          nv.archs[j] = nv.archs[j - 1];
          nv.archs[j - 1] = t;
        }
    }
    free(all);
  }
  nv.lib = h;
}

static bool load(void) {
  pthread_once(&nv.once, load_once);
  return nv.lib != NULL;
}

bool nvrtc_available(void) { return load(); }
int nvrtc_version(void) { return load() ? nv.version : 0; }

int nvrtc_supported_archs(int *archs, int cap) {
  if (!load()) return 0;
  for (int i = 0; i < nv.narchs && i < cap; i++) archs[i] = nv.archs[i];
  return nv.narchs;
}

static const char *err_str(nvrtcResult r) {
  const char *s = nv.GetErrorString ? nv.GetErrorString(r) : NULL;
  return s ? s : "unknown NVRTC error";
}

/* the program's log (the caller frees), or NULL */
static char *program_log(nvrtcProgram p) {
  size_t n = 0;
  if (nv.GetProgramLogSize(p, &n) != NVRTC_SUCCESS || n == 0) return NULL;
  char *log = mem_alloc(n + 1);
  if (!log) return NULL;
  if (nv.GetProgramLog(p, log) != NVRTC_SUCCESS) {
    free(log);
    return NULL;
  }
  log[n] = 0;
  return log;
}

/* keeps the first lines of a log: tg_error() holds about 1 KiB, and the first error is the one to read */
static void trim_log(char *log) {
  size_t keep = 0;
  for (int lines = 0; log[keep] && lines < 10 && keep < 800; keep++)
    if (log[keep] == '\n') lines++;
  log[keep] = 0;
  while (keep > 0 && (log[keep - 1] == '\n' || log[keep - 1] == ' ')) log[--keep] = 0;
}

tg_status nvrtc_compile(const char *name, const char *src, const char *arch, bool cubin, void **image,
                        size_t *nbytes) {
  if (!name || !src || !arch || !image || !nbytes) {
    tg_set_error(TG_ERR_ARG, "CUDA: nvrtc_compile: NULL %s", !name ? "name" : !src ? "source" : !arch ? "arch" : "output");
    return TG_ERR_ARG;
  }
  *image = NULL;
  *nbytes = 0;
  if (!load()) {
    tg_set_error(TG_ERR_DEVICE,
                 "CUDA: kernel %s cannot be compiled: NVRTC (libnvrtc.so) was not found; install the CUDA toolkit's "
                 "NVRTC (the Debian/NVIDIA package cuda-nvrtc-XX) or set CUDA_PATH to the toolkit", name);
    return TG_ERR_DEVICE;
  }
  if (cubin && (!nv.GetCUBINSize || !nv.GetCUBIN)) {
    tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s: NVRTC %d.%d (%s) cannot make cubins (CUDA 11.1 or newer can)", name,
                 nv.version / 1000, nv.version % 1000 / 10, nv.path);
    return TG_ERR_DEVICE;
  }
  char opt_arch[64];
  snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=%s", arch);
  /* -default-device: helper functions the renderer writes without __device__ are device functions */
  const char *const opts[] = {opt_arch, "-default-device"};
  nvrtcProgram prog = NULL;
  nvrtcResult r = nv.CreateProgram(&prog, src, name, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) {
    tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s: nvrtcCreateProgram failed: %s", name, err_str(r));
    return TG_ERR_DEVICE;
  }
  r = nv.CompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
  if (r != NVRTC_SUCCESS) {
    char *log = program_log(prog);
    if (log) trim_log(log);
    if (r == NVRTC_ERROR_COMPILATION)
      tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s failed to compile for %s:\n%s", name, arch, log ? log : "(no log)");
    else
      tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s failed to compile for %s: %s%s%s", name, arch, err_str(r),
                   log && *log ? "\n" : "", log ? log : "");
    free(log);
    nv.DestroyProgram(&prog);
    return TG_ERR_DEVICE;
  }
  size_t n = 0;
  r = cubin ? nv.GetCUBINSize(prog, &n) : nv.GetPTXSize(prog, &n);
  char *out = NULL;
  if (r == NVRTC_SUCCESS && n > 0) {
    out = mem_alloc(n);
    if (!out) {
      nv.DestroyProgram(&prog);
      tg_set_error(TG_ERR_NOMEM, "CUDA: kernel %s: out of memory for its %zu-byte %s", name, n, cubin ? "cubin" : "PTX");
      return TG_ERR_NOMEM;
    }
    r = cubin ? nv.GetCUBIN(prog, out) : nv.GetPTX(prog, out);
  }
  nv.DestroyProgram(&prog);
  if (r != NVRTC_SUCCESS || n == 0) {
    free(out);
    tg_set_error(TG_ERR_DEVICE, "CUDA: kernel %s: %s failed for %s: %s", name, cubin ? "nvrtcGetCUBIN" : "nvrtcGetPTX",
                 arch, r != NVRTC_SUCCESS ? err_str(r) : "an empty image");
    return TG_ERR_DEVICE;
  }
  *image = out;
  *nbytes = n;
  return TG_OK;
}
