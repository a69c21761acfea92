/* optimize.c — the loop structure of a kernel: the actions (opt.c) chosen by the heuristic (heuristic.c), or
 * none with NOOPT=1 (the outermost loop split across the pool, nothing else), then UPCAST/UNROLL loops
 * expanded into registers and vector lanes (expand.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"
#include "uop/env.h"

/* below this many loop iterations in total a kernel runs on one thread: waking the pool costs more */
#define THREAD_MIN_WORK 32768

static void kernel_name(uop *ast, kernel_info *info) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return;
  bool has_reduce = false;
  for (int i = 0; i < n; i++) has_reduce |= order[i]->op == OP_REDUCE;
  size_t k = (size_t)snprintf(info->name, sizeof info->name, "%s", has_reduce ? "r" : "E");
  /* loop sizes as tinygrad prints them: output loops, then reduce loops, each in loop order */
  static const int classes[] = {AX_THREAD, AX_GLOBAL, AX_REDUCE, AX_UNROLL, AX_UPCAST};
  for (int pass = 0; pass < 5; pass++)
    for (int64_t id = 0; id < 64; id++)
      for (int i = 0; i < n && k < sizeof info->name - 24; i++) {
        uop *u = order[i];
        if (u->op != OP_RANGE || u->arg.i != id || u->aux[0] != classes[pass] || !uop_is_const(u->src[0])) continue;
        k += (size_t)snprintf(info->name + k, sizeof info->name - k, "_%lld", (long long)u->src[0]->arg.i);
      }
  free(order);
}

/* bytes of one machine vector for generated C compiled with -march=native on this host */
static int host_vec_bytes(void) {
  const env_values *env = env_get();
  if (env->vec_bytes >= 0) return env->vec_bytes;  /* TG_VEC_BYTES, for tests: 0 turns the vector path off */
  int b = 16;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!env->no_native) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) b = 64;
    else if (__builtin_cpu_supports("avx2")) b = 32;
  }
#endif
  return b;
}

opt_target codegen_host_target(int nthreads) {
  return (opt_target){.nthreads = nthreads, .vec_bytes = host_vec_bytes(), .has_local = false};
}

/* NOOPT: the outermost output loop split across the pool when there is enough work */
static void noopt_threads(kernel_state *ks) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  double work = 1;
  for (int i = 0; i < n; i++) work *= (double)ax[i].size;
  if (ks->tg.nthreads < 2 || work < THREAD_MIN_WORK || !nout || ax[0].type != AX_GLOBAL || ax[0].size < 2) return;
  char why[160];
  apply_opt(ks, (opt){OPT_THREAD, 0, ax[0].size < ks->tg.nthreads ? ax[0].size : ks->tg.nthreads}, why);
}

/* the product of the loop sizes u is computed in, not looking through another STORE (a PACK's fill, whose
 * loops are a nest of their own); seen marks the nodes visited */
static double nest_work(uop *u, uop_map *seen, bool root, bool *oom) {
  if (umap_get(seen, u) || (!root && u->op == OP_STORE)) return 1;
  if (!umap_put(seen, u, u)) { *oom = true; return 1; }
  double w = u->op == OP_RANGE && uop_is_const(u->src[0]) ? (double)u->src[0]->arg.i : 1;
  for (int i = 0; i < u->nsrc; i++) w *= nest_work(u->src[i], seen, false, oom);
  return w;
}

/* the loop iterations of the kernel's biggest loop nest: of each STORE, the product of the loops it is
 * computed in (a PACK's fill is a nest of its own, not nested in the tile's loops) */
static double kernel_work(uop *ast) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return 0;
  double most = 0;
  bool oom = false;
  for (int i = 0; i < n && !oom; i++) {
    if (order[i]->op != OP_STORE) continue;
    uop_map seen = {0};
    double w = nest_work(order[i], &seen, true, &oom);
    umap_free(&seen);
    if (w > most) most = w;
  }
  free(order);
  return oom ? 0 : most;
}

uop *codegen_finish(kernel_state *ks, kernel_info *info) {
  memset(info, 0, sizeof *info);
  int n;
  uop **order = uop_toposort(ks->ast, &n);
  if (!order) return NULL;
  for (int i = 0; i < n; i++)
    if (order[i]->op == OP_PARAM) info->bytes += (double)order[i]->aux[0] * (double)tg_dtype_size((tg_dtype)order[i]->dtype);
  free(order);
  kernel_name(ks->ast, info);
  opts_str(ks, info->opts, sizeof info->opts);
  info->threaded = ks->nthreads > 1;
  info->nthreads = ks->nthreads > 1 ? ks->nthreads : 1;
  info->work = kernel_work(ks->ast);
  uop *lane = NULL;
  uop *ast = expand_kernel(ks->ast, ks->tg.vec_bytes, &lane);
  if (ast && ks->tg.has_local) ast = lower_groups(ast);
  info->lane = lane;
  info->lanes = lane ? (int)lane->src[0]->arg.i : 1;
  return ast;
}

/* a GPU: no thread pool and no machine vectors (its parallelism is the global index space, gpu.c) */
opt_target codegen_gpu_target(void) { return (opt_target){.nthreads = 1, .vec_bytes = 0, .has_local = true}; }

uop *codegen_optimize(uop *ast, int nthreads, kernel_info *info) {
  return codegen_optimize_for(ast, codegen_host_target(nthreads), info);
}

uop *codegen_optimize_for(uop *ast, opt_target tg, kernel_info *info) {
  if (!ast) return NULL;
  memset(info, 0, sizeof *info);
  kernel_state ks;
  if (!ks_init(&ks, ast, tg)) return NULL;
  if (env_get()->noopt) noopt_threads(&ks);
  else hand_coded_optimizations(&ks);
  return codegen_finish(&ks, info);
}
