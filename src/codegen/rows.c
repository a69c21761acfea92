/* rows.c — a register tile's strided vector accesses read and written as rows (CPU kernels).
 *
 * A convolution tiled as channel vectors x pixels holds, per pixel k of the tile, a vector of 16 output channels.
 * Its output is NCHW: the 16 lanes of pixel k's store lie a plane apart (root + l * 3136 + k), so each store is a
 * scatter, 16 scalar stores, and a residual read the same way is 16 scalar loads. Taken together, the tile's n
 * pixels are, for every lane l, one row of n consecutive elements: the n vectors transposed in registers
 * (log2 n rounds of two-vector shuffles) give each lane's row in one piece, stored (or loaded, then transposed)
 * with a vector access per row. gcc compiles a scatter into vscatterdps with AVX-512 and into one scalar store
 * per lane without (AVX2 has no scatter). ResNet-18's 56x56 convolution with its residual, 2 threads of an AMD
 * Zen 5 (AVX-512): 533-563 us with the scatter and gather, 488-509 us with rows.
 *
 * A group is n >= 2 accesses of one kind (gather loads or scatter stores of float32, no lane mask) to one
 * kernel parameter in one block of the program (no loop opens or closes between them), with the same scalar
 * gate or none, at indices root + c0 + k for k = 0..n-1, where root is linear in the lane with a coefficient
 * (the rows' stride) of at least n, so rows do not overlap: each group reads or writes exactly the elements its
 * members did. A load group is read where its first member was (no store to the buffer may come between its
 * members), a store group written where its last member was (no load of the buffer between). Runs longer than
 * the lanes are cut into pieces of at most that many. */
#include <stdlib.h>

#include "codegen/opt.h"

typedef struct cand {
  int pos;
  int block;
  const uop *root;
  int64_t c;
  int64_t stride;
  const uop *gate;
  bool store;
  bool taken;
} cand;

/* whether op u is a gather or scatter a group may take (its index vector split into *root + *c) */
static bool candidate(const linear_program *p, const uop *u, const uop **root, int64_t *c, int64_t *stride,
                      const uop **gate) {
  bool load = u->op == OP_LOAD && u->nsrc >= 2 && u->nsrc <= 3 && u->dtype == TG_FLOAT32;
  bool store = u->op == OP_STORE && u->nsrc >= 3 && u->nsrc <= 4 && u->src[2]->dtype == TG_FLOAT32;
  if ((!load && !store) || u->arg.i != 0 || u->src[0]->op != OP_PARAM || !lp_is_vec(p, u->src[1])) return false;
  *gate = u->nsrc == (load ? 3 : 4) ? u->src[u->nsrc - 1] : NULL;
  if (*gate && lp_is_vec(p, *gate)) return false;
  *c = split_const(u->src[1], root);
  if (!lin_coef((uop *)*root, p->lane, stride)) return false;
  return *stride >= 2;
}

static bool same_class(const cand *a, const cand *b, const linear_program *p) {
  return a->store == b->store && a->block == b->block && a->root == b->root && a->gate == b->gate &&
         a->stride == b->stride && p->ops[a->pos]->src[0] == p->ops[b->pos]->src[0];
}

/* whether an access between positions lo and hi conflicts with moving the group (a store of its buffer into a
 * load group's span, a load of it into a store group's) */
static bool conflict(const linear_program *p, const uop *buf, bool store, int lo, int hi) {
  for (int i = lo + 1; i < hi; i++) {
    const uop *u = p->ops[i];
    if (u->nsrc && u->src[0] == buf && u->op == (store ? OP_LOAD : OP_STORE)) return true;
  }
  return false;
}

static int pow2_at_least(int n) {
  int w = 1;
  while (w < n) w *= 2;
  return w;
}

row_plan *plan_rows(const linear_program *p) {
  if (!p->lane || p->lanes < 4 || p->lanes > ROW_MAX) return NULL;
  cand *cs = mem_alloc(sizeof *cs * (size_t)p->n);
  int nc = 0, block = 0;
  if (!cs) return NULL;  /* rows are a faster form of the same accesses: without memory the scatters stay */
  for (int i = 0; i < p->n; i++) {
    const uop *u = p->ops[i];
    if (u->op == OP_RANGE || u->op == OP_ENDRANGE) block++;
    cand x = {.pos = i, .block = block, .store = u->op == OP_STORE};
    if (candidate(p, u, &x.root, &x.c, &x.stride, &x.gate)) cs[nc++] = x;
  }
  row_plan *r = NULL;
  row_group *gs = NULL;
  int ng = 0, capg = 0;
  int *members = mem_alloc(sizeof *members * (size_t)(nc ? nc : 1));
  if (!members) goto out;
  for (int a = 0; a < nc; a++) {
    if (cs[a].taken) continue;
    /* the class of a, sorted by offset (insertion: a class is a tile's worth of accesses) */
    int m = 0;
    for (int b = a; b < nc; b++) {
      if (cs[b].taken || !same_class(&cs[a], &cs[b], p)) continue;
      cs[b].taken = true;
      int j = m++;
      for (; j > 0 && cs[members[j - 1]].c > cs[b].c; j--) members[j] = members[j - 1];
      members[j] = b;
    }
    /* runs of consecutive offsets, cut at the lanes and at the stride (rows must not overlap) */
    int limit = p->lanes < cs[a].stride ? p->lanes : (int)cs[a].stride;
    for (int s = 0; s < m;) {
      int e = s + 1;
      while (e < m && e - s < limit && cs[members[e]].c == cs[members[e - 1]].c + 1) e++;
      int n = e - s;
      if (n >= 2) {
        row_group g = {.n = n, .width = pow2_at_least(n), .stride = cs[a].stride, .c0 = cs[members[s]].c,
                       .root = cs[a].root, .gate = cs[a].gate, .store = cs[a].store};
        int lo = cs[members[s]].pos, hi = lo;
        for (int k = 0; k < n; k++) {
          int pos = g.pos[k] = cs[members[s + k]].pos;
          lo = pos < lo ? pos : lo;
          hi = pos > hi ? pos : hi;
        }
        g.at = g.store ? hi : lo;
        if (g.width <= p->lanes && !conflict(p, p->ops[lo]->src[0], g.store, lo, hi)) {
          if (ng == capg) {
            int nc2 = capg ? 2 * capg : 8;
            row_group *t = mem_realloc(gs, sizeof *t * (size_t)nc2);
            if (!t) goto out;
            gs = t;
            capg = nc2;
          }
          gs[ng++] = g;
        }
      }
      s = e;
    }
  }
  if (!ng) goto out;
  r = mem_calloc(1, sizeof *r);
  int *of = mem_alloc(sizeof *of * (size_t)p->n);
  if (!r || !of) {
    free(r);
    free(of);
    r = NULL;
    goto out;
  }
  for (int i = 0; i < p->n; i++) of[i] = -1;
  for (int g = 0; g < ng; g++)
    for (int k = 0; k < gs[g].n; k++) of[gs[g].pos[k]] = g;
  r->n = ng;
  r->groups = gs;
  r->group_of = of;
  gs = NULL;
out:
  free(gs);
  free(members);
  free(cs);
  return r;
}

void row_plan_free(row_plan *r) {
  if (!r) return;
  free(r->groups);
  free(r->group_of);
  free(r);
}
