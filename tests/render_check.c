/* render_check.c — TG_RENDER_CHECK=CUDA: every kernel the suite compiles is also optimized for a GPU, rendered as
 * CUDA C and compiled by NVRTC for sm_90, on a machine without a GPU (issue 13: the CUDA renderer is checked in
 * CI). Kernels are compiled 32 to a program (NVRTC's cost is mostly per program); a program that fails is
 * compiled again kernel by kernel, so a failure names its kernel, with NVRTC's message. A kernel that fails to
 * render or compile fails the run. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/opt.h"
#include "engine/engine.h"
#include "render/render.h"
#include "runtime/cuda.h"
#include "runtime/device.h"
#include "test.h"

#define BATCH 32

static int checked, failures, renamed_seq, repeats;

/* the hashes of the sources already checked (the fault tests make the same kernels again and again) */
static uint64_t *seen;
static size_t seen_cap, seen_n;

static bool seen_before(uint64_t h) {
  if (!h) h = 1;
  if (seen_n * 2 >= seen_cap) {
    size_t cap = seen_cap ? seen_cap * 2 : 4096;
    uint64_t *t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < seen_cap; i++)
      if (seen[i])
        for (size_t j = seen[i] % cap;; j = (j + 1) % cap)
          if (!t[j]) { t[j] = seen[i]; break; }
    free(seen);
    seen = t;
    seen_cap = cap;
  }
  for (size_t j = h % seen_cap;; j = (j + 1) % seen_cap) {
    if (seen[j] == h) return true;
    if (!seen[j]) { seen[j] = h; seen_n++; return false; }
  }
}
static char *pending[BATCH], *pending_name[BATCH];
static int npending;

static void report(const char *name, const char *msg, const char *src) {
  failures++;
  fprintf(stderr, "render check: kernel %s: %s\n", name, msg);
  if (src && failures <= 3) fprintf(stderr, "%s\n", src);
}

static bool compile_one(const char *name, const char *src) {
  void *image = NULL;
  size_t n = 0;
  tg_status st = nvrtc_compile(name, src, "sm_90", true, &image, &n);
  free(image);
  return st == TG_OK;
}

static void flush(void) {
  if (!npending) return;
  size_t total = 1;
  for (int i = 0; i < npending; i++) total += strlen(pending[i]) + 1;
  char *all = malloc(total);
  bool ok = false;
  if (all) {
    size_t at = 0;
    for (int i = 0; i < npending; i++) {
      size_t len = strlen(pending[i]);
      memcpy(all + at, pending[i], len);
      all[at + len] = '\n';
      at += len + 1;
    }
    all[at] = 0;
    ok = compile_one("render_check_batch", all);
  }
  free(all);
  for (int i = 0; i < npending; i++) {
    if (!ok && !compile_one(pending_name[i], pending[i])) report(pending_name[i], tg_error(), pending[i]);
    free(pending[i]);
    free(pending_name[i]);
  }
  npending = 0;
  tg_error_clear();
}

/* src with its kernel `name` called `to` (kernels of one name share a batch); NULL when the name is not found */
static char *rename_kernel(const char *src, const char *name, const char *to) {
  char decl[160];
  snprintf(decl, sizeof decl, ") %s(", name);
  const char *at = strstr(src, decl);
  if (!at) return NULL;
  size_t pre = (size_t)(at - src) + 2, nl = strlen(name), tl = strlen(to), len = strlen(src);
  char *r = malloc(len - nl + tl + 1);
  if (!r) return NULL;
  memcpy(r, src, pre);
  memcpy(r + pre, to, tl);
  memcpy(r + pre + tl, at + 2 + nl, len - pre - nl + 1);
  return r;
}

static void check_kernel_exempt(uop *ast);

/* the fault tests fail allocations one by one: the check's own neither fail nor shift their count */
static void check_kernel(uop *ast) {
  /* and the realize it runs in keeps its error state */
  tg_status st = tg_error_status();
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", tg_error());
  mem_exempt(true);
  check_kernel_exempt(ast);
  mem_exempt(false);
  if (st != TG_OK) tg_set_error(st, "%s", msg);
  else tg_error_clear();
}

static void check_kernel_exempt(uop *ast) {
  kernel_info info;
  memset(&info, 0, sizeof info);
  linear_program lp = {0};
  launch_shape shape;
  uop *opt = codegen_optimize_for(decompose_dtypes(ast, false), codegen_gpu_target(), &info);
  char *src = opt && linearize(opt, &lp, &info) ? render_gpu(LANG_CUDA, info.name, &lp, &info, &shape) : NULL;
  linear_program_free(&lp);
  if (src && seen_before(hash_bytes(src, strlen(src), 0x72656e646572ull))) {
    repeats++;
    free(src);
    return;
  }
  checked++;
  if (!src) {
    report(info.name[0] ? info.name : "?", tg_error(), NULL);
    tg_error_clear();
    return;
  }
  char to[128];
  snprintf(to, sizeof to, "%s_c%d", info.name, renamed_seq++);
  char *unique = rename_kernel(src, info.name, to);
  if (!unique) {
    report(info.name, "the kernel's declaration was not found in its source", src);
    free(src);
    return;
  }
  free(src);
  pending[npending] = unique;
  pending_name[npending++] = strdup(to);
  if (npending == BATCH) flush();
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
  if (!v || !*v || !nvrtc_available()) return 0;
  flush();
  printf("render check: %d kernels rendered as CUDA C and compiled by NVRTC for sm_90 (%d more seen again), %d failed\n",
         checked, repeats, failures);
  free(seen);
  return failures;
}
