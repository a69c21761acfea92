/* beam.h — BEAM search over the optimization actions (beam.c), timed by the device through callbacks, so
 * codegen stays free of any one device. */
#ifndef TG_BEAM_H
#define TG_BEAM_H

#include "codegen/opt.h"

typedef struct beam_device {
  void *ctx;
  /* source -> program; NULL on failure. Called from several threads at once */
  void *(*compile)(void *ctx, const char *name, const char *src);
  /* seconds one run of prog takes on the kernel's buffers (random inputs) with nthreads; < 0 on failure */
  double (*run)(void *ctx, void *prog, int nthreads);
  void (*release)(void *ctx, void *prog);
  const char *key;        /* the device's identity in the disk cache */
  const char *cache_dir;  /* where results are kept; NULL or "": nowhere */
} beam_device;

/* ks (as it is, not optimized) gets the fastest actions found with a beam of width kernels, within about
 * limit_s seconds, or those cached on disk for it; false when no candidate ran (ks unchanged) */
bool beam_search(kernel_state *ks, int width, const beam_device *d, double limit_s);

#endif
