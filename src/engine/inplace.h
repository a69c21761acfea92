/* inplace.h — the in-place plan of a realize (inplace.c), shared with realize.c. */
#ifndef TG_ENGINE_INPLACE_H
#define TG_ENGINE_INPLACE_H

#include "runtime/device.h"
#include "schedule/schedule.h"

/* per kernel k and output j: the assigned tensor's buffer it overwrites, or NULL */
#define INPLACE(inplace, k, j) (inplace)[(size_t)(k) * SCHED_MAX_OUTS + (size_t)(j)]

/* which kernels write into an assigned tensor's old buffer (*inplace_out, indexed by INPLACE) and the order to
 * run them in (*korder_out). false when a window write has no order that runs it in place (schedule again
 * without windows); true otherwise, with *st set when memory ran out. made: the buffers this realize made. */
bool plan_in_place(const schedule *s, const device *dev, tg_tensor *const *ts, int n, const uop_map *made,
                   tg_buffer ***inplace_out, int **korder_out, tg_status *st);

/* the storage a node has outside a schedule (allocating a BUFFER made by tg_empty), or NULL (realize.c) */
tg_buffer *realize_storage(const device *dev, uop *u);

#endif
