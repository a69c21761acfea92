/* memplan.c — lifetime-based placement of buffers in one arena.
 *
 * Greedy by size, as TensorFlow Lite's and tinygrad's planners: the largest buffer is placed first, each
 * next one at the lowest offset where it fits between the buffers already placed whose lifetimes intersect
 * its own. Large buffers placed early leave the holes to the small ones; the result is close to the peak
 * of live bytes for the chains of intermediates a training step makes.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine/memplan.h"
#include "uop/uop.h"

static size_t round_up(size_t v, size_t align) { return (v + align - 1) & ~(align - 1); }

static bool alive_together(const plan_item *a, const plan_item *b) { return a->first <= b->last && b->first <= a->last; }

static _Thread_local const plan_item *sort_items;  /* qsort's comparator has no context argument */
static int by_size_desc(const void *x, const void *y) {
  const plan_item *a = &sort_items[*(const int *)x], *b = &sort_items[*(const int *)y];
  if (a->nbytes != b->nbytes) return a->nbytes < b->nbytes ? 1 : -1;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  return *(const int *)x - *(const int *)y;
}

static int by_offset(const void *x, const void *y) {
  const plan_item *a = *(plan_item *const *)x, *b = *(plan_item *const *)y;
  return a->offset < b->offset ? -1 : a->offset > b->offset;
}

size_t memplan_assign(plan_item *items, int n, size_t align) {
  if (n <= 0) return 0;
  int *order = mem_alloc((size_t)n * sizeof *order);
  plan_item **near = mem_alloc((size_t)n * sizeof *near);
  if (!order || !near) {
    free(order);
    free(near);
    return (size_t)-1;
  }
  for (int i = 0; i < n; i++) order[i] = i;
  sort_items = items;
  qsort(order, (size_t)n, sizeof *order, by_size_desc);
  size_t arena = 0;
  for (int k = 0; k < n; k++) {
    plan_item *it = &items[order[k]];
    int nn = 0;
    for (int j = 0; j < k; j++)
      if (alive_together(it, &items[order[j]])) near[nn++] = &items[order[j]];
    qsort(near, (size_t)nn, sizeof *near, by_offset);
    size_t at = 0, need = round_up(it->nbytes ? it->nbytes : 1, align);
    for (int j = 0; j < nn; j++) {
      if (near[j]->offset >= at + need) break;  /* fits in the gap before this one */
      size_t end = round_up(near[j]->offset + near[j]->nbytes, align);
      if (end > at) at = end;
    }
    it->offset = at;
    if (at + need > arena) arena = at + need;
  }
  free(order);
  free(near);
  return arena;
}

bool memplan_check(const plan_item *items, int n, size_t arena, char *why, size_t whylen) {
  for (int i = 0; i < n; i++) {
    if (items[i].offset + items[i].nbytes > arena) {
      snprintf(why, whylen, "item %d [%zu, %zu) ends past the arena of %zu bytes", i, items[i].offset,
               items[i].offset + items[i].nbytes, arena);
      return false;
    }
    for (int j = i + 1; j < n; j++) {
      const plan_item *a = &items[i], *b = &items[j];
      bool overlap = a->offset < b->offset + b->nbytes && b->offset < a->offset + a->nbytes;
      if (overlap && alive_together(a, b)) {
        snprintf(why, whylen, "items %d [%zu, %zu) steps %d-%d and %d [%zu, %zu) steps %d-%d overlap", i, a->offset,
                 a->offset + a->nbytes, a->first, a->last, j, b->offset, b->offset + b->nbytes, b->first, b->last);
        return false;
      }
    }
  }
  return true;
}

size_t memplan_peak_live(const plan_item *items, int n) {
  size_t peak = 0;
  for (int i = 0; i < n; i++) {  /* the live set is largest at some item's first step */
    size_t live = 0;
    for (int j = 0; j < n; j++)
      if (items[j].first <= items[i].first && items[i].first <= items[j].last) live += items[j].nbytes;
    if (live > peak) peak = live;
  }
  return peak;
}
