/* heuristic_source.h — the C source the heuristic makes of a one-kernel graph, for tests that check which loops,
 * lanes and actions it chose (test_opt.c, test_opt_rows.c). */
#ifndef TG_TEST_HEURISTIC_SOURCE_H
#define TG_TEST_HEURISTIC_SOURCE_H

#include <string.h>

#include "codegen/opt.h"
#include "render/render.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"

/* y's single kernel under hand_coded_optimizations for a 2-thread target of vec_bytes vectors, rendered as C
 * (caller frees); NULL when y is not one kernel or a stage failed */
static inline char *heuristic_source(tg_tensor *y, int vec_bytes, kernel_info *info) {
  schedule s;
  if (schedule_create(1, &y->u, &s) != TG_OK) return NULL;
  if (s.nkernels != 1) {
    schedule_free(&s);
    return NULL;
  }
  kernel_state ks;
  ks_init(&ks, s.kernels[0].ast, (opt_target){.nthreads = 2, .vec_bytes = vec_bytes});
  hand_coded_optimizations(&ks);
  memset(info, 0, sizeof *info);
  uop *fin = codegen_finish(&ks, info);
  linear_program lp = {0};
  char *src = fin && linearize(fin, &lp, info) ? render_c(info->name, &lp, info) : NULL;
  linear_program_free(&lp);
  schedule_free(&s);
  return src;
}

#endif
