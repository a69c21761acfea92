/* schedule.h — the tensor graph becomes a list of kernels.
 *
 * Decides which nodes are stored to a buffer (outputs, CONTIGUOUS, reduces whose result is broadcast, except
 * those a kernel computes once per row of its own: softmax's max and sum),
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

/* whether the reduce u (or a value made from one), left unrealized, is computed in root's kernel once per
 * element: indexed only by root's outermost loops P, every REDUCE of that kernel over one row of at most row_max
 * elements and depending on exactly P (softmax: max and sum once per row, then the row's outputs) */
bool lower_row_fusable(uop *root, const uop_map *realized, uop *u, int64_t row_max);

/* true for a node that needs no kernel to be read as a contiguous buffer: BUFFER or RESHAPE(BUFFER) with
 * storage, or a node realized before */
bool node_has_storage(uop *u);

#endif
