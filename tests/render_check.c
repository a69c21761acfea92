/* render_check.c — TG_RENDER_CHECK=CUDA: every kernel the suite compiles is also optimized for a GPU, rendered as
 * CUDA C and compiled by NVRTC for sm_90, on a machine without a GPU (issue 13: the CUDA renderer is checked in
 * CI). A kernel that fails to render or compile fails the run, with its name and NVRTC's message. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/opt.h"
#include "engine/engine.h"
#include "render/render.h"
#include "runtime/cuda.h"
#include "test.h"

static int checked, failures, from_cache;

static void check_kernel(uop *ast) {
  char msg[512];
  kernel_info info;
  memset(&info, 0, sizeof info);
  linear_program lp = {0};
  launch_shape shape;
  uop *opt = codegen_optimize_for(decompose_dtypes(ast, false), codegen_gpu_target(), &info);
  char *src = opt && linearize(opt, &lp, &info) ? render_gpu(LANG_CUDA, info.name, &lp, &info, &shape) : NULL;
  linear_program_free(&lp);
  void *image = NULL;
  size_t n = 0;
  char target[16];
  bool ptx = false, disk = false;
  tg_status st = src ? cuda_compile_image(info.name, src, 90, &image, &n, target, &ptx, &disk) : tg_error_status();
  checked++;
  if (st == TG_OK && !ptx) from_cache += disk;
  else {
    failures++;
    snprintf(msg, sizeof msg, "%s", st == TG_OK ? "PTX instead of an sm_90 cubin" : tg_error());
    fprintf(stderr, "render check: kernel %s: %s\n", info.name[0] ? info.name : "?", msg);
    if (src && failures <= 3) fprintf(stderr, "%s\n", src);
  }
  free(image);
  free(src);
  tg_error_clear();
}

bool render_check_begin(void) {
  const char *v = getenv("TG_RENDER_CHECK");
  if (!v || !*v) return true;
  if (strcmp(v, "CUDA")) {
    fprintf(stderr, "TG_RENDER_CHECK=%s: accepted: CUDA\n", v);
    return false;
  }
  if (!nvrtc_available()) {
    fprintf(stderr, "render check: skipped, NVRTC (libnvrtc.so) is not installed\n");
    return true;
  }
  engine_set_kernel_observer(check_kernel);
  return true;
}

int render_check_end(void) {
  engine_set_kernel_observer(NULL);
  const char *v = getenv("TG_RENDER_CHECK");
  if (v && *v && nvrtc_available())
    printf("render check: %d kernels rendered as CUDA C and compiled by NVRTC for sm_90 (%d from the disk cache), "
           "%d failed\n", checked, from_cache, failures);
  return failures;
}
