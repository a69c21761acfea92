/* schedule.h — the tensor graph becomes a list of kernels.
 *
 * Decides which nodes are stored to a buffer (outputs, CONTIGUOUS, reduces whose result is broadcast, except
 * those a kernel computes once per row of its own: softmax's max and sum),
 * turns everything between two stored values into ONE kernel AST with movement ops rewritten to index
 * arithmetic and validity masks (lower.c), stores values of the same loop nest from one kernel (merge.c), and
 * orders the kernels by their buffer dependencies.
 */
#ifndef TG_SCHEDULE_H
#define TG_SCHEDULE_H

#include "uop/uop.h"

/* most values one kernel stores (kernels of the same loop nest merged: schedule.c) */
#define SCHED_MAX_OUTS 8

typedef struct sched_kernel {
  uop *ast;         /* SINK(STORE(PARAM 0, index, value), ..., STORE(PARAM nout-1, ...)) over RANGEs; simplified */
  uop *output;      /* the (first) tensor-graph node this kernel stores: bufs[0] */
  int nout;         /* the nodes it stores: bufs[0..nout), each PARAM i written at the same index */
  int nbufs;
  uop **bufs;       /* tensor-graph nodes whose storage is PARAM i; bufs[0] == output */
  uop *window_into; /* a window write (lower_window_of): the kernel stores only the window, so its output
                     * buffer must be this target's storage */
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
/* the same with the assign target of each output (NULL: none): an output that writes a window of its
 * target gets a kernel over the window only (sched_kernel.window_into) */
tg_status schedule_create_assign(int n, uop *const *outs, uop *const *targets, schedule *s);
void schedule_free(schedule *s);

/* the kernel graph of node `root` stored contiguously (lower.c); leaves: nodes with storage or realized */
uop *lower_kernel(uop *root, const uop_map *realized, uop ***bufs, int *nbufs);
/* One kernel storing roots[0..n) (all of one shape) as PARAM 0..n-1 over the same loops (*ast), so loads and
 * values they share are computed once. A root read by another at the element it stores is computed in place, not
 * loaded. *ast NULL (TG_OK) when they cannot share the loops: one reads another at another element, or, with
 * targets (an assign target per root, NULL: none), a target is read at another element than its root's. */
tg_status lower_multi(int n, uop *const *roots, uop *const *targets, const uop_map *realized, uop **ast, uop ***bufs,
                      int *nbufs);

/* the kernels of the realized nodes among order[0..nn) (producers first; sink skipped) into s, which holds
 * s->roots; values of one loop nest share a kernel (merge.c). targets as schedule_create_assign's. */
tg_status schedule_kernels(schedule *s, uop **order, int nn, uop *sink, const uop_map *realized, int n,
                           uop *const *targets);
/* whether lower_kernel narrows int64 indices that fit to int32 (true; tests turn it off to cover int64 code) */
extern bool lower_narrow_indices;

/* A write into a window of a stored tensor: root = WHERE(PAD(true), PAD(value), target), the value placed
 * at offsets `before` (plus a variable offset along one axis) and the target everywhere else. Assigned to
 * the target, its kernel only needs to store the window into the target's buffer. */
typedef struct window_write {
  uop *value;                    /* what is written, shape of the window */
  int64_t before[TG_MAX_DIMS];   /* the window's constant offsets */
  int axis;                      /* the axis with a variable offset too, or -1 */
  uop *offset;                   /* that offset (a 0-d int32 node) */
} window_write;
/* true (filling w) when root is such a write into target's storage and its value does not read that storage */
bool lower_window_of(uop *root, uop *target, window_write *w);
/* the kernel of root, or with w, of its window only, stored at its place in root's (the target's) layout */
uop *lower_window_kernel(uop *root, const window_write *w, const uop_map *realized, uop ***bufs, int *nbufs);

/* whether the reduce u (or a value made from one), left unrealized, is computed in root's kernel once per
 * element: indexed only by root's outermost loops P, every REDUCE of that kernel over one row of at most row_max
 * elements and depending on exactly P (softmax: max and sum once per row, then the row's outputs) */
bool lower_row_fusable(uop *root, const uop_map *realized, uop *u, int64_t row_max);

/* true for a node that needs no kernel to be read as a contiguous buffer: BUFFER or RESHAPE(BUFFER) with
 * storage, or a node realized before */
bool node_has_storage(uop *u);
/* the buffer such a node reads (BUFFER, RESHAPE(BUFFER), a realized value), or NULL; allocates nothing */
void *node_stored_buffer(uop *u);

#endif
