/* place.h — work placed per device: lazy copies (COPY, tg_to) and sharded tensors (MULTI, tg_shard).
 *
 * A node's device is the device of the buffers it reads (constants and iota are device-free: the device of the
 * kernel that uses them; a graph that reads no buffer runs on the default device); a COPY's is its
 * destination, a MULTI part's is its device. realize.c takes the path of one device (as before any of this)
 * until a COPY or MULTI node is first built (place_needed); from then on place_realize maps MULTI graphs to one
 * graph per device (multi.c), realizes each COPY's source on its device and copies, then runs each device's
 * kernels. */
#ifndef TG_PLACE_H
#define TG_PLACE_H

#include <stdbool.h>

#include "runtime/device.h"
#include "tg.h"
#include "uop/uop.h"

#define PLACE_MAX_DEVS 16

extern bool place_needed;  /* a COPY or MULTI node was built in this process (library lock) */
/* a realize of parts of sharded values is running: no value is cached on a node (realize.c), as equal parts on
 * two devices are one node */
extern bool place_parts;

/* a MULTI of n parts on devs, split along axis (-1: replicated), of the given global shape */
uop *mk_multi_node(tg_dtype dt, int n, uop *const *parts, const device *const *devs, int axis, int ndim,
                   const int64_t *shape);
uop *mk_copy_node(uop *x, const device *dst);  /* x's value on dst */
/* root's graph with every node over a MULTI mapped to per-device parts (multi.c); memo: node -> lowered. NULL
 * with tg_error set (an op that cannot run sharded: its name and the devices or axis) */
uop *multi_lower(uop *root, uop_map *memo);
/* realizes ts with every kernel on dev (realize.c) */
tg_status realize_on(const device *dev, int n, tg_tensor *const *ts);
/* realizes ts, each part on its device (place.c) */
tg_status place_realize(int n, tg_tensor *const *ts);
/* the sharded value m (a MULTI) gathered onto its first device, in a new tensor owned by the caller */
tg_tensor *place_gather(uop *m);

#endif
