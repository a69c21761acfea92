/* schedule_cache.h — schedules remembered by graph structure (tinygrad's schedule cache).
 *
 * Eager loops (a training step, a decoding step) build a graph of the same structure every time over other
 * buffers. Its schedule (kernel ASTs, their order, which nodes are stored, window writes) depends on the
 * structure only, so it is made once: a realize looks its graph up by its canonical form and gets the
 * schedule back bound to its own storage leaves. What depends on the buffers themselves (which kernels write
 * in place, the intermediates' arena) is planned again by the realize.
 */
#ifndef TG_SCHEDULE_CACHE_H
#define TG_SCHEDULE_CACHE_H

#include "schedule/schedule.h"

/* a realize's graph as the cache reads it: its nodes in a fixed depth-first walk order from the outputs (and
 * assign targets), each storage leaf (BUFFER nodes, values realized before) standing for its dtype, shape,
 * kind and which earlier leaf shares its buffer, each other node for its op, dtype, arg, aux and its sources'
 * positions in the walk. Equal structures give equal walks; the hash of the walk finds the entries to compare
 * node by node. The canonical graph (interned nodes over stand-ins of the leaves) is built only when the
 * schedule is new (sched_cache_put). */
typedef struct sched_query {
  uint64_t hash;
  int nnodes;
  uop **order;     /* the nodes in walk order, leaves included, the root (a SINK) last */
  int64_t *sig;    /* the walk written out (schedule_cache.c): equal signatures, equal canonical graphs */
  size_t nsig, capsig;
  int nleaves, capleaves;
  uop **leaves;    /* the storage leaves in walk order */
  int *alias;      /* per leaf: the first leaf holding the same buffer */
  uop *key;        /* the canonical graph (sched_cache_put makes it) */
  uop_map canon;   /* graph node -> its canonical node */
} sched_query;

/* the walk of outs[0..n) with their assign targets (targets NULL, or entries NULL: none);
 * TG_ERR_NOMEM (tg_error set) when out of memory */
tg_status sched_cache_query(int n, uop *const *outs, uop *const *targets, sched_query *q);
/* true when a graph of q's structure was scheduled before: *s is that schedule with q's leaves bound
 * (schedule_free frees it). false when not (or on an allocation failure: *s empty, *st TG_ERR_NOMEM). */
bool sched_cache_get(const sched_query *q, schedule *s, tg_status *st);
/* remembers s, made for q's graph; TG_ERR_NOMEM when out of memory (nothing remembered) */
tg_status sched_cache_put(sched_query *q, const schedule *s);
void sched_query_free(sched_query *q);
/* schedule_create_assign through the cache: *cached tells whether the schedule came from it */
tg_status schedule_cached(int n, uop *const *outs, uop *const *targets, schedule *s, bool *cached);
/* forgets every schedule (tg_collect, another device) */
void sched_cache_clear(void);

#endif
