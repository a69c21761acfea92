/* schedule.h — the tensor graph becomes a list of kernels.
 *
 * Decides which nodes are stored to a buffer (outputs, CONTIGUOUS, reduces whose result is broadcast),
 * turns everything between two stored values into ONE kernel AST with movement ops rewritten to index
 * arithmetic and validity masks (lower.c), and orders the kernels by their buffer dependencies.
 */
#ifndef TG_SCHEDULE_H
#define TG_SCHEDULE_H

#include "uop/uop.h"

typedef struct sched_kernel {
  uop *ast;         /* SINK(STORE(PARAM 0, index, value)) over RANGEs; simplified */
  uop *output;      /* the tensor-graph node this kernel stores */
  int nbufs;
  uop **bufs;       /* tensor-graph nodes whose storage is PARAM i; bufs[0] == output */
} sched_kernel;

typedef struct schedule {
  int nkernels;
  sched_kernel *kernels;
  int nrealized;
  uop **realized;   /* nodes that get a buffer in this schedule (kernel outputs), in kernel order */
  uop **roots;      /* the outputs as scheduled: roots[i] computes outs[i] (big reductions are split) */
} schedule;

/* the kernels that compute outs[0..n); NULL-free on error with tg_error set */
tg_status schedule_create(int n, uop *const *outs, schedule *s);
void schedule_free(schedule *s);

/* the kernel graph of node `root` stored contiguously (lower.c); leaves: nodes with storage or realized */
uop *lower_kernel(uop *root, const uop_map *realized, uop ***bufs, int *nbufs);
/* whether lower_kernel narrows int64 indices that fit to int32 (true; tests turn it off to cover int64 code) */
extern bool lower_narrow_indices;

/* true for a node that needs no kernel to be read as a contiguous buffer: BUFFER or RESHAPE(BUFFER) with
 * storage, or a node realized before */
bool node_has_storage(const uop *u);

#endif
