/* schedule.c — which nodes are stored, and the kernels that store them, in dependency order.
 *
 * A node gets a buffer when it is an output, a CONTIGUOUS, or a REDUCE_AXIS whose result reaches its
 * consumers through an EXPAND (x - x.max(): recomputing the reduce for every broadcast element would
 * multiply its work). Everything else fuses: elementwise chains, the work before a reduce, the epilogue
 * after it, and reduces nested in reduces (matmul -> relu -> sum is one kernel).
 */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

typedef struct walk_ctx { uop_map *realized; } walk_ctx;

static bool enter_no_storage(uop *u, void *ctx) { return !node_has_storage(u); }

tg_status schedule_create(int n, uop *const *outs, schedule *s) {
  memset(s, 0, sizeof *s);
  uop_map realized = {0}, expanded = {0};
  tg_status st = TG_OK;
  uop *sink = uop_new(OP_SINK, TG_BOOL, n, outs, (uop_arg){.i = -2}, 0, NULL);
  if (!sink) return TG_ERR_NOMEM;
  int nn;
  uop **order = uop_toposort_filtered(sink, enter_no_storage, NULL, &nn);
  if (!order) return TG_ERR_NOMEM;
  static char yes;
  for (int i = 0; i < n; i++)
    if (!node_has_storage(outs[i]) && !umap_put(&realized, outs[i], &yes)) goto nomem;
  /* consumers come before producers in reverse order, so a node's "seen through an EXPAND" flag is
   * final when the node is reached */
  for (int i = nn - 1; i >= 0; i--) {
    uop *u = order[i];
    if (u == sink || node_has_storage(u)) continue;
    bool stored = umap_get(&realized, u) != NULL;
    if (!stored && (u->op == OP_CONTIGUOUS || (u->op == OP_REDUCE_AXIS && umap_get(&expanded, u)))) {
      if (!umap_put(&realized, u, &yes)) goto nomem;
      stored = true;
    }
    bool flag = !stored && (umap_get(&expanded, u) || u->op == OP_EXPAND);
    if (flag)
      for (int k = 0; k < u->nsrc; k++)
        if (!umap_put(&expanded, u->src[k], &yes)) goto nomem;
  }
  s->kernels = calloc((size_t)realized.n + 1, sizeof *s->kernels);
  s->realized = calloc((size_t)realized.n + 1, sizeof *s->realized);
  if (!s->kernels || !s->realized) goto nomem;
  for (int i = 0; i < nn; i++) {
    uop *u = order[i];
    if (u == sink || !umap_get(&realized, u)) continue;
    s->realized[s->nrealized++] = u;
    if (uop_numel(u) == 0) continue;  /* an empty tensor needs storage but no kernel */
    sched_kernel *k = &s->kernels[s->nkernels];
    k->output = u;
    k->ast = lower_kernel(u, &realized, &k->bufs, &k->nbufs);
    if (!k->ast) {
      st = tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
      goto out;
    }
    s->nkernels++;
  }
  goto out;
nomem:
  st = TG_ERR_NOMEM;
  tg_set_error(st, "schedule: out of memory");
out:
  free(order);
  umap_free(&realized);
  umap_free(&expanded);
  if (st != TG_OK) schedule_free(s);
  return st;
}

void schedule_free(schedule *s) {
  for (int i = 0; i < s->nkernels; i++) free(s->kernels[i].bufs);
  free(s->kernels);
  free(s->realized);
  memset(s, 0, sizeof *s);
}
