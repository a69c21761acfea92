/* run_kernel.h — one kernel of a tensor's schedule, optimized (the heuristic's plan, or a THREAD alone),
 * rendered, compiled and launched directly on the CPU device: for tests of the code the heuristic and the pool
 * make (test_chunks.c, test_matvec.c, test_row_groups.c). Header-only, each test file its own copy. */
#ifndef TG_TEST_RUN_KERNEL_H
#define TG_TEST_RUN_KERNEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"
#include "render/render.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "tg.h"

static uint64_t rk_xs = 0x2545F4914F6CDD1DULL;
static inline float frand(void) {
  rk_xs ^= rk_xs << 13; rk_xs ^= rk_xs >> 7; rk_xs ^= rk_xs << 17;
  return (float)((rk_xs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static inline float *rand_data(int64_t n) {
  float *d = malloc((size_t)n * sizeof *d);
  if (d)
    for (int64_t i = 0; i < n; i++) d[i] = frand();
  return d;
}

static inline tg_tensor *tensor_of(const float *d, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  tg_tensor *t = tg_from_data(TG_FLOAT32, ndim, shape, d, (size_t)n * sizeof *d);
  if (t) tg_realize(t);
  return t;
}

static inline void *leaf_ptr(uop *u) {
  if (!u->buf && u->op == OP_RESHAPE && u->src[0]->op == OP_BUFFER) u = u->src[0];
  tg_buffer *b = u->buf;
  return b ? b->ptr : NULL;
}

/* y's one kernel optimized for target tg: the actions plan[0..nplan) when plan is not NULL, else the heuristic's
 * plan (or, with thread_axis >= 0, only THREAD on that axis over thread_k threads), compiled and run on
 * launch_threads threads into out. opts gets the plan; src, when not NULL, the rendered source (caller frees) */
static inline bool run_kernel_plan(tg_tensor *y, opt_target tg, const opt *plan, int nplan, int thread_axis, int thread_k,
                                   int launch_threads, float *out, size_t nbytes, char *opts, size_t nopts, char **src_out) {
  schedule s;
  if (src_out) *src_out = NULL;
  if (schedule_create(1, &y->u, &s) != TG_OK) return false;
  bool ok = false;
  char *src = NULL;
  tg_program *prog = NULL;
  linear_program lp = {0};
  if (s.nkernels != 1) goto out;
  sched_kernel *k = &s.kernels[0];
  kernel_state ks;
  if (!ks_init(&ks, k->ast, tg)) goto out;
  char why[160];
  if (plan) {
    for (int i = 0; i < nplan; i++)
      if (!apply_opt(&ks, plan[i], why)) {
        tg_set_error(TG_ERR_ARG, "action %d of the plan refused: %s", i, why);
        goto out;
      }
  } else if (thread_axis < 0) {
    hand_coded_optimizations(&ks);
  } else if (!apply_opt(&ks, (opt){OPT_THREAD, thread_axis, thread_k}, why)) {
    goto out;
  }
  kernel_info info;
  memset(&info, 0, sizeof info);
  uop *fin = codegen_finish(&ks, &info);
  if (snprintf(opts, nopts, "%s [%s]", info.name, info.opts) < 0) goto out;
  if (!fin || !linearize(fin, &lp, &info) || !(src = render_c(info.name, &lp, &info))) goto out;
  const device *dev = device_cpu();
  if (!(prog = dev->compile(dev, info.name, src))) goto out;
  void *bufs[8];
  bufs[0] = out;
  for (int j = 1; j < k->nbufs && j < 8; j++)
    if (!(bufs[j] = leaf_ptr(k->bufs[j]))) goto out;
  memset(out, 0, nbytes);
  int nt = launch_threads ? launch_threads : info.threaded ? info.nthreads : 1;
  ok = dev->launch(prog, bufs, k->nbufs, nt, NULL) == TG_OK;
out:
  program_release(prog);
  if (src_out) *src_out = src;
  else free(src);
  linear_program_free(&lp);
  schedule_free(&s);
  return ok;
}

static inline bool run_kernel_for(tg_tensor *y, opt_target tg, int thread_axis, int thread_k, int launch_threads,
                                  float *out, size_t nbytes, char *opts, size_t nopts, char **src_out) {
  return run_kernel_plan(y, tg, NULL, 0, thread_axis, thread_k, launch_threads, out, nbytes, opts, nopts, src_out);
}

/* run_kernel_for this host's target for nthreads threads */
static inline bool run_kernel(tg_tensor *y, int nthreads, int thread_axis, int thread_k, int launch_threads, float *out,
                       size_t nbytes, char *opts, size_t nopts) {
  return run_kernel_for(y, codegen_host_target(nthreads), thread_axis, thread_k, launch_threads, out, nbytes, opts,
                        nopts, NULL);
}

#endif
