/* optimize.c — the loop structure of a kernel: for now, which output loop the thread pool splits.
 * This is where the optimization actions (UPCAST, UNROLL, LOCAL, GROUP, PADTO), the heuristic that picks
 * them and BEAM search plug in: each rewrites RANGEs of the AST. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

/* below this many loop iterations in total a kernel runs on one thread: waking the pool costs more */
#define THREAD_MIN_WORK 32768

static void kernel_name(uop **order, int n, kernel_info *info) {
  bool has_reduce = false;
  for (int i = 0; i < n; i++) has_reduce |= order[i]->op == OP_REDUCE;
  size_t k = (size_t)snprintf(info->name, sizeof info->name, "%s", has_reduce ? "r" : "E");
  /* loop sizes as tinygrad prints them: output loops, then reduce loops, each in loop order */
  for (int pass = 0; pass < 2; pass++)
    for (int64_t id = 0; id < 64; id++)
      for (int i = 0; i < n && k < sizeof info->name - 24; i++) {
        uop *u = order[i];
        if (u->op != OP_RANGE || u->arg.i != id || (u->aux[0] == AX_REDUCE) != (pass == 1) || !uop_is_const(u->src[0])) continue;
        k += (size_t)snprintf(info->name + k, sizeof info->name - k, "_%lld", (long long)u->src[0]->arg.i);
      }
}

uop *codegen_optimize(uop *ast, int nthreads, kernel_info *info) {
  if (!ast) return NULL;
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return NULL;
  memset(info, 0, sizeof *info);
  kernel_name(order, n, info);
  double work = 1;
  uop *outer = NULL;
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    if (u->op == OP_RANGE && uop_is_const(u->src[0])) {
      work *= (double)u->src[0]->arg.i;
      if (u->aux[0] == AX_GLOBAL && (!outer || u->arg.i < outer->arg.i)) outer = u;
    }
    if (u->op == OP_PARAM) info->bytes += (double)u->aux[0] * (double)tg_dtype_size((tg_dtype)u->dtype);
  }
  free(order);
  if (nthreads > 1 && outer && work >= THREAD_MIN_WORK && outer->src[0]->arg.i >= 2) {
    int64_t type = AX_THREAD;
    uop *t = uop_new(OP_RANGE, (tg_dtype)outer->dtype, 1, outer->src, outer->arg, 1, &type);
    ast = uop_substitute(ast, outer, t);
    info->threaded = true;
  }
  return ast;
}
