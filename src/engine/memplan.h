/* memplan.h — places buffers with known lifetimes in one arena so that buffers alive at the same time never
 * share a byte, and buffers that are never alive together do. The JIT plans a captured step's intermediate
 * buffers with it (lifetimes: the first and last kernel that touches each). */
#ifndef TG_MEMPLAN_H
#define TG_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct plan_item {
  size_t nbytes;
  int first, last;   /* alive from step first to step last, both included */
  size_t offset;     /* set by memplan_assign */
} plan_item;

/* sets every item's offset (a multiple of align, a power of two); returns the arena size needed, or
 * (size_t)-1 when the scratch memory could not be allocated */
size_t memplan_assign(plan_item *items, int n, size_t align);

/* true when no two items alive at the same step overlap and all lie inside arena bytes; otherwise false
 * with the first offending pair written to why */
bool memplan_check(const plan_item *items, int n, size_t arena, char *why, size_t whylen);

/* the most bytes alive at one step: what no plan can go below */
size_t memplan_peak_live(const plan_item *items, int n);

#endif
