/* beam.h — BEAM search over the optimization actions (beam.c), timed by the device through callbacks, so
 * codegen stays free of any one device. */
#ifndef TG_BEAM_H
#define TG_BEAM_H

#include "codegen/opt.h"
#include "render/render.h"

typedef struct beam_device {
  void *ctx;
  /* the program's source in the device's language (and a GPU kernel's launch shape); caller frees */
  char *(*render)(void *ctx, const linear_program *lp, const kernel_info *info, launch_shape *shape);
  /* source -> program (launched with shape on a GPU); NULL on failure. Called from several threads at once */
  void *(*compile)(void *ctx, const char *name, const char *src, const launch_shape *shape);
  /* seconds one run of prog takes on the kernel's buffers (random inputs) with nthreads (the device's own
   * time on a GPU); < 0 on failure */
  double (*run)(void *ctx, void *prog, int nthreads);
  void (*release)(void *ctx, void *prog);
  const char *key;        /* the device's identity in the disk cache */
  const char *cache_dir;  /* where results are kept; NULL or "": nowhere */
} beam_device;

/* ks (as it is, not optimized) gets the fastest actions found with a beam of width kernels, within about
 * limit_s seconds, or those cached on disk for it; false when no candidate ran (ks unchanged) */
bool beam_search(kernel_state *ks, int width, const beam_device *d, double limit_s);

#endif
