/* merge.c — the kernels of the realized nodes, with values of the same loop nest stored by one kernel.
 *
 * schedule.c decides which nodes are stored; each would be one kernel storing one buffer. Elementwise kernels of
 * one shape whose values do not depend on each other through other kernels are one kernel with several STOREs
 * instead (tinygrad's scheduler stores every value computed over the same ranges in one kernel): lowered over
 * the same RANGE nodes, their loads and common subexpressions are interned once and computed once. An Adam
 * update is the case that decided it: the new moment m, the new v and the parameter read the gradient and the
 * old moments, and the parameter reads the new m and v, all at one element; as three kernels the gradient was
 * read three times and m and v written and read back. A member read by another at the element it stores is
 * computed in place (lower_multi); one read at another element, or an assign target read at another element
 * than the one its new value is stored at, keeps its own kernel.
 *
 * Groups are formed greedily in dependency order. A node joins a group when the group (as one kernel) would not
 * reach itself through other kernels: no kernel the node reads depends, through kernels and the groups they are
 * in, on a member. The kernels are then ordered by a depth-first walk over the groups.
 */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

#define GROUP_TRIES 2       /* same-shaped groups tried per node, most recent first */
#define REACH_VISITS 4096   /* groups a dependency check may visit before it answers "depends" */
/* buffers of a merged kernel at most (tinygrad's limit for CPU and Metal; OpenCL and CUDA devices take more) */
#define MAX_KERNEL_BUFS 31

typedef struct knode {
  uop *u;
  int group;          /* its group */
  bool window;        /* a window write: a kernel of its own */
  bool mergeable;     /* elementwise: no reduce in its kernel */
  int nleaves;
  int *leaves;        /* the kernel nodes it reads (indices) */
  bool *direct;       /* read at the element it stores: no view or reduce between */
  uop *target;        /* its assign target, or NULL */
  window_write w;
} knode;

typedef struct kgroup { int n; int members[SCHED_MAX_OUTS]; } kgroup;

typedef struct kernel_walk { uop *root; const uop_map *realized; } kernel_walk;

static bool enter_kernel(uop *u, void *ctx) {
  kernel_walk *w = ctx;
  return u == w->root || (!node_has_storage(u) && !umap_get(w->realized, u));
}

/* passes a value through unchanged at the same element */
static bool same_element(uop *x) {
  return uop_is_alu((uop_op)x->op) || x->op == OP_CONTIGUOUS || x->op == OP_DETACH || x->op == OP_CUSTOM_GRAD;
}

/* k's leaves (the kernel nodes it reads), whether each is read at k's own element, and whether k reduces */
static bool walk_kernel(knode *ks, int i, const uop_map *index, const uop_map *realized) {
  knode *k = &ks[i];
  kernel_walk w = {k->u, realized};
  int n;
  uop **order = uop_toposort_filtered(k->u, enter_kernel, &w, &n);
  if (!order) return false;
  uop_map under = {0};  /* nodes read through a view or a reduce */
  static char yes;
  bool ok = (k->leaves = mem_alloc(((size_t)n + 1) * sizeof *k->leaves)) &&
            (k->direct = mem_alloc(((size_t)n + 1) * sizeof *k->direct));
  k->mergeable = true;
  for (int j = n - 1; j >= 0 && ok; j--) {  /* readers before what they read */
    uop *x = order[j];
    if (!enter_kernel(x, &w)) {
      intptr_t li = (intptr_t)umap_get(index, x);
      if (li) {
        k->leaves[k->nleaves] = (int)li - 1;
        k->direct[k->nleaves++] = !umap_get(&under, x);
      }
      continue;
    }
    if (x->op == OP_REDUCE_AXIS) k->mergeable = false;
    if (!umap_get(&under, x) && same_element(x)) continue;
    for (int s = 0; s < x->nsrc && ok; s++) ok = umap_put(&under, x->src[s], &yes);
  }
  umap_free(&under);
  free(order);
  return ok;
}

/* whether some kernel node among k's leaves outside group g reaches g through kernels and their groups (or the
 * walk got too long to tell) */
static bool reaches(const knode *ks, const kgroup *gs, int *stamp, int mark, int *stack, const knode *k, int g) {
  int sp = 0, visits = 0;
  for (int l = 0; l < k->nleaves; l++) {
    int h = ks[k->leaves[l]].group;
    if (h != g && stamp[h] != mark) {
      stamp[h] = mark;
      stack[sp++] = h;
    }
  }
  while (sp) {
    if (++visits > REACH_VISITS) return true;
    const kgroup *G = &gs[stack[--sp]];
    for (int m = 0; m < G->n; m++) {
      const knode *x = &ks[G->members[m]];
      for (int l = 0; l < x->nleaves; l++) {
        int h = ks[x->leaves[l]].group;
        if (h == g) return true;
        if (stamp[h] != mark) {
          stamp[h] = mark;
          stack[sp++] = h;
        }
      }
    }
  }
  return false;
}

/* whether kernel node i may join group g */
static bool may_join(const knode *ks, const kgroup *gs, int *stamp, int *mark, int *stack, int i, int g) {
  const knode *k = &ks[i], *first = &ks[gs[g].members[0]];
  if (gs[g].n >= SCHED_MAX_OUTS || !first->mergeable || first->window) return false;
  if (k->u->ndim != first->u->ndim || memcmp(k->u->shape, first->u->shape, (size_t)k->u->ndim * sizeof *k->u->shape))
    return false;
  for (int l = 0; l < k->nleaves; l++)
    if (ks[k->leaves[l]].group == g && !k->direct[l]) return false;
  return !reaches(ks, gs, stamp, ++*mark, stack, k, g);
}

/* the groups in an order that runs every group after the groups it reads (a depth-first walk, iterative) */
static bool order_groups(const knode *ks, const kgroup *gs, int ng, int *out) {
  int *state = mem_calloc((size_t)ng + 1, sizeof *state);  /* 0 new, 1 open, 2 done */
  int *stack = mem_alloc(((size_t)ng + 1) * sizeof *stack), *next = mem_calloc((size_t)ng + 1, sizeof *next);
  int no = 0;
  bool ok = state && stack && next;
  for (int g0 = 0; g0 < ng && ok; g0++) {
    if (state[g0]) continue;
    int sp = 0;
    stack[sp++] = g0;
    state[g0] = 1;
    while (sp) {
      int g = stack[sp - 1], pushed = -1;
      /* next[g] counts the (member, leaf) pairs visited: members in order, each one's leaves */
      for (int m = 0, c = 0; m < gs[g].n && pushed < 0; m++) {
        const knode *x = &ks[gs[g].members[m]];
        for (int l = 0; l < x->nleaves && pushed < 0; l++, c++) {
          if (c < next[g]) continue;
          next[g] = c + 1;
          int h = ks[x->leaves[l]].group;
          if (!state[h]) pushed = h;
        }
      }
      if (pushed >= 0) {
        state[pushed] = 1;
        stack[sp++] = pushed;
        continue;
      }
      state[g] = 2;
      out[no++] = g;
      sp--;
    }
  }
  free(state);
  free(stack);
  free(next);
  return ok && no == ng;
}

/* the kernels of members[0..n) of one group (in dependency order): one kernel storing them all, else (they do not
 * share their loops, or need more buffers than a kernel takes) the first half's kernels, then the second's */
static tg_status emit_members(schedule *s, knode *ks, const int *members, int n, const uop_map *realized) {
  if (n > 1) {
    uop *roots[SCHED_MAX_OUTS], *targets[SCHED_MAX_OUTS];
    for (int m = 0; m < n; m++) {
      roots[m] = ks[members[m]].u;
      targets[m] = ks[members[m]].target;
    }
    sched_kernel *k = &s->kernels[s->nkernels];
    tg_status st = lower_multi(n, roots, targets, realized, &k->ast, &k->bufs, &k->nbufs);
    if (st != TG_OK) return st;
    if (k->ast && k->nbufs <= MAX_KERNEL_BUFS) {
      k->output = roots[0];
      k->nout = n;
      s->nkernels++;
      return TG_OK;
    }
    free(k->bufs);
    memset(k, 0, sizeof *k);
    st = emit_members(s, ks, members, n / 2, realized);
    return st == TG_OK ? emit_members(s, ks, members + n / 2, n - n / 2, realized) : st;
  }
  knode *x = &ks[members[0]];
  sched_kernel *k = &s->kernels[s->nkernels];
  k->output = x->u;
  k->nout = 1;
  k->window_into = x->window ? x->target : NULL;
  k->ast = lower_window_kernel(x->u, x->window ? &x->w : NULL, realized, &k->bufs, &k->nbufs);
  if (!k->ast) return tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
  s->nkernels++;
  return TG_OK;
}

tg_status schedule_kernels(schedule *s, uop **order, int nn, uop *sink, const uop_map *realized, int n,
                           uop *const *targets) {
  knode *ks = mem_calloc((size_t)nn + 1, sizeof *ks);
  kgroup *gs = mem_calloc((size_t)nn + 1, sizeof *gs);
  int *stamp = mem_calloc((size_t)nn + 1, sizeof *stamp), *stack = mem_alloc(((size_t)nn + 1) * sizeof *stack);
  int *gorder = mem_alloc(((size_t)nn + 1) * sizeof *gorder);
  uop_map index = {0};  /* kernel node -> its index + 1 */
  tg_status st = TG_ERR_NOMEM;
  int nk = 0, ng = 0, mark = 0;
  if (!ks || !gs || !stamp || !stack || !gorder) goto out;
  for (int i = 0; i < nn; i++) {
    uop *u = order[i];
    if (u == sink || !umap_get(realized, u) || uop_numel(u) == 0) continue;  /* empty: storage, no kernel */
    ks[nk].u = u;
    for (int r = 0; targets && r < n && !ks[nk].target; r++)
      if (targets[r] && s->roots[r] == u) ks[nk].target = targets[r];
    ks[nk].window = ks[nk].target && lower_window_of(u, ks[nk].target, &ks[nk].w);
    if (!umap_put(&index, u, (void *)(intptr_t)(nk + 1))) goto out;
    nk++;
  }
  for (int i = 0; i < nk; i++)
    if (!walk_kernel(ks, i, &index, realized)) goto out;
  /* greedy groups in dependency order (ks is in it) */
  for (int i = 0; i < nk; i++) {
    int g = -1;
    if (ks[i].mergeable && !ks[i].window)
      for (int h = ng - 1, tries = 0; h >= 0 && g < 0 && tries < GROUP_TRIES; h--) {
        const knode *f = &ks[gs[h].members[0]];
        if (!f->mergeable || f->window || f->u->ndim != ks[i].u->ndim ||
            memcmp(f->u->shape, ks[i].u->shape, (size_t)f->u->ndim * sizeof *f->u->shape))
          continue;
        tries++;
        if (may_join(ks, gs, stamp, &mark, stack, i, h)) g = h;
      }
    if (g < 0) g = ng++;
    gs[g].members[gs[g].n++] = i;
    ks[i].group = g;
  }
  if (!order_groups(ks, gs, ng, gorder)) goto out;
  st = TG_OK;
  for (int i = 0; i < ng && st == TG_OK; i++) st = emit_members(s, ks, gs[gorder[i]].members, gs[gorder[i]].n, realized);
out:
  if (st == TG_ERR_NOMEM && !tg_error_status()) tg_set_error(st, "schedule: out of memory");
  for (int i = 0; ks && i < nk; i++) {
    free(ks[i].leaves);
    free(ks[i].direct);
  }
  free(ks);
  free(gs);
  free(stamp);
  free(stack);
  free(gorder);
  umap_free(&index);
  return st;
}
