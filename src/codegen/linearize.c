/* linearize.c — kernel AST -> loops -> one ordered list of UOps.
 *
 * Every node depends on a set of RANGEs (its loop variables). Output RANGEs open loops from the outside in;
 * a REDUCE opens loops for its own RANGEs around an accumulator. Before a loop opens, everything that does
 * not use its variable is emitted outside it ("hoisting"), so a value is computed in the outermost loop
 * that can compute it, and a value used after a loop is always declared before it.
 *
 * REDUCEs over the same loops (the copies an UPCAST made, expand.c) share one loop nest, one accumulator each:
 * a register tile. The vector lane (kernel_info.lane) is never a loop: it is open everywhere, and a value that
 * depends on it (or a contiguous vector LOAD) is a vector; a REDUCE over the lane ends with a horizontal reduce
 * of its vector accumulator, which the renderer writes.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"

typedef struct lin_ctx {
  uop_map deps;      /* node -> range bit set (boxed) */
  uop_map emitted;
  uop_map seen;      /* node -> hoist pass that visited it: a DAG is walked once per pass, not per path */
  intptr_t pass;
  uop **ranges;      /* range id -> RANGE node */
  int nranges;
  uint64_t open;
  uop **out;
  uop **bnd;         /* per op of out: a loop's run-time bound (trim.c), or NULL */
  uop **start;       /* per op of out: a loop's run-time first value (trim.c), or NULL (0) */
  int n, cap;
  int next_acc;
  bool fail;
  double flops, iters;
  uop *lane;
  int lanes;
  uop_map *vec, *accs;
  uop **reduces;     /* every REDUCE of the kernel */
  int nreduces;
  int64_t next_id;   /* a loop id no RANGE of the kernel has */
  loop_sets ls;      /* for trim_bound */
  uop_map guards;    /* REDUCE -> the condition its value is used under (trim_guards) */
  uop_map body;      /* nodes a REDUCE's body uses (its value, its loops' bounds) */
  uop_map above;     /* nodes with a REDUCE under them */
} lin_ctx;

static void push(lin_ctx *c, uop *u) {
  if (!u) { c->fail = true; return; }
  if (c->n == c->cap) {
    int nc = c->cap ? c->cap * 2 : 256;
    uop **no = mem_realloc(c->out, (size_t)nc * sizeof *no);
    if (no) c->out = no;
    uop **nb = no ? mem_realloc(c->bnd, (size_t)nc * sizeof *nb) : NULL;
    if (nb) c->bnd = nb;
    uop **ns = nb ? mem_realloc(c->start, (size_t)nc * sizeof *ns) : NULL;
    if (!ns) { c->fail = true; return; }
    c->start = ns;
    c->cap = nc;
  }
  c->bnd[c->n] = NULL;
  c->start[c->n] = NULL;
  c->out[c->n++] = u;
  if (uop_is_alu((uop_op)u->op)) c->flops += c->iters * (umap_get(c->vec, u) ? c->lanes : 1);
}

static uint64_t range_bit(lin_ctx *c, uop *r) {
  int64_t id = r->arg.i;
  return id < 64 ? 1ULL << id : 0;
}

/* a STORE filling a DEFINE_LOCAL: the loops of its index are its own (AX_LOOP), opened around it */
static bool is_local_store(const uop *u) { return u->op == OP_STORE && u->src[0]->op == OP_DEFINE_LOCAL; }

/* the RANGEs u depends on, as a bit set (ranges have ids below 64) */
static uint64_t deps(lin_ctx *c, uop *u) {
  uint64_t *box = umap_get(&c->deps, u);
  if (box) return *box;
  uint64_t d = 0;
  if (u->op == OP_RANGE) d = range_bit(c, u);
  for (int i = 0; i < u->nsrc; i++) d |= deps(c, u->src[i]);
  if (u->op == OP_REDUCE)
    for (int i = 1; i < u->nsrc; i++) d &= ~range_bit(c, u->src[i]);
  if (is_local_store(u)) d = deps(c, u->src[2]) & ~deps(c, u->src[1]);
  box = mem_alloc(sizeof *box);
  if (!box || !umap_put(&c->deps, u, box)) { free(box); c->fail = true; return d; }
  *box = d;
  return d;
}

static bool emitted(lin_ctx *c, uop *u) { return umap_get(&c->emitted, u) != NULL; }
static void mark(lin_ctx *c, uop *u) {
  static char yes;
  if (!umap_put(&c->emitted, u, &yes)) c->fail = true;
}

static void emit(lin_ctx *c, uop *u);

/* A value only the epilogue after the reduces uses (a bias, the mask of a ReLU's gradient, the output's index)
 * is not hoisted above their loops: there it would hold registers through the whole reduce, which the register
 * tile needs (MNIST's input-gradient convolution on AVX2 spilled two of its twelve accumulators to the stack
 * while a ReLU mask waited). It is computed after the reduce, once per output tile as before. */
static bool epilogue_only(lin_ctx *c, uop *u) {
  if (!c->nreduces || umap_get(&c->body, u) || u->op == OP_REDUCE || u->op == OP_STORE) return false;
  return u->op == OP_LOAD || uop_is_alu((uop_op)u->op) || u->op == OP_CAST || u->op == OP_BITCAST;
}

static void hoist_walk(lin_ctx *c, uop *u) {
  if (c->fail || emitted(c, u) || (intptr_t)umap_get(&c->seen, u) == c->pass) return;
  if (!umap_put(&c->seen, u, (void *)c->pass)) { c->fail = true; return; }
  if ((deps(c, u) & ~c->open) == 0 && !epilogue_only(c, u)) { emit(c, u); return; }
  if (u->op == OP_REDUCE) { hoist_walk(c, u->src[0]); return; }
  if (is_local_store(u)) { hoist_walk(c, u->src[0]); hoist_walk(c, u->src[2]); return; }
  for (int i = 0; i < u->nsrc; i++) hoist_walk(c, u->src[i]);
}

/* emits every node under u that only uses open loop variables */
static void hoist(lin_ctx *c, uop *u) {
  c->pass++;
  hoist_walk(c, u);
}

static void open_loop(lin_ctx *c, uop *r) {
  push(c, r);
  mark(c, r);
  c->open |= range_bit(c, r);
  if (uop_is_const(r->src[0])) c->iters *= (double)r->src[0]->arg.i;
}

static void close_loop(lin_ctx *c, uop *r) {
  /* what was computed inside the loop goes out of scope with it: a later loop over the same range (a second
   * reduce over it, outside the first one's outer loop) computes it again. A REDUCE's value lives on in its
   * accumulator, declared outside, and a STORE's in the memory it wrote (a panel packed into local memory is
   * read by the loops after it: storing it again in each was 300x slower for MNIST's weight gradient). */
  for (int i = c->n - 1; i >= 0 && c->out[i] != r; i--) {
    uop *u = c->out[i];
    bool lives_on = u->op == OP_REDUCE || u->op == OP_STORE;
    if (!lives_on && emitted(c, u) && !umap_put(&c->emitted, u, NULL)) c->fail = true;
  }
  push(c, uop_new(OP_ENDRANGE, TG_INT32, 1, &r, (uop_arg){0}, 0, NULL));
  c->open &= ~range_bit(c, r);
  if (uop_is_const(r->src[0]) && r->src[0]->arg.i) c->iters /= (double)r->src[0]->arg.i;
}

static double identity(uop_op op, tg_dtype dt) {
  if (op == OP_MUL) return 1;
  if (op == OP_MAX) return dtype_min(dt);
  return 0;
}

static bool same_loops(const uop *a, const uop *b) {
  if (a->nsrc != b->nsrc) return false;
  for (int i = 1; i < a->nsrc; i++)
    if (a->src[i] != b->src[i]) return false;
  return true;
}

/* b when it can bound a loop opening here: it uses only loops open outside it, and it is a scalar (one reading a
 * vector, a contiguous load, is left alone), needing no reduce not computed yet (its nest would open here,
 * between a group's accumulators and its loops); NULL otherwise */
static uop *usable_bound(lin_ctx *c, uop *b, uint64_t open) {
  if (!b || (deps(c, b) & ~open)) return NULL;
  int n;
  uop **order = uop_toposort(b, &n);
  bool ok = order != NULL;
  for (int i = 0; ok && i < n; i++) ok = (order[i]->op != OP_REDUCE || emitted(c, order[i])) && !umap_get(c->vec, order[i]);
  free(order);
  return ok ? b : NULL;
}

/* the run-time bound of the group's loop rng (trim.c): the largest of its reduces' points past which their bodies
 * are their identities, when every one has such a point, 0 for a reduce whose guard does not hold (outermost
 * loop only); NULL for the whole loop */
static uop *group_bound(lin_ctx *c, uop *const *grp, int ng, uop *rng, bool outermost) {
  uint64_t lane = c->lane ? range_bit(c, c->lane) : 0, open = c->open & ~lane;
  uop *b = NULL;
  for (int g = 0; g < ng; g++) {
    uop *bg = trim_bound(grp[g], rng, open, &c->ls), *guard = outermost ? umap_get(&c->guards, grp[g]) : NULL;
    if (guard) {
      uop *gb = trim_guarded(bg, guard, rng, c->lane, c->lanes);
      bg = gb ? gb : bg;
    }
    if (!bg) return NULL;
    b = b && b != bg ? uop_binary(OP_MAX, b, bg) : bg;
  }
  return usable_bound(c, trim_clamp(b, rng), open);
}

/* the run-time first value of the group's loop rng: the smallest of its reduces' points before which their
 * bodies are their identities, when every one has such a point; NULL: from 0 */
static uop *group_start(lin_ctx *c, uop *const *grp, int ng, uop *rng) {
  uint64_t lane = c->lane ? range_bit(c, c->lane) : 0, open = c->open & ~lane;
  uop *b = NULL;
  for (int g = 0; g < ng; g++) {
    uop *bg = trim_start(grp[g], rng, open, &c->ls);
    if (!bg) return NULL;
    b = b && b != bg ? uop_unary(OP_NEG, uop_binary(OP_MAX, uop_unary(OP_NEG, b), uop_unary(OP_NEG, bg))) : bg;
  }
  return b ? usable_bound(c, uop_simplify(b), open) : NULL;
}

/* The loop rng of a PACK's fill u, cut where no reduce reading the panel needs the rest (trim.c): a reader whose
 * loop R copies rng (same count, the same stride in the panel's index) needs rng up to R's bound; a reader that is
 * guarded (trim_guards: its value is used only where its guard holds) needs none of the outermost fill loop where
 * the guard fails. Attention's decode step packs the cache, max_seq rows of it, for the scores (guarded by key
 * <= pos) and for p @ v (its reduce over keys ends at pos): the copies past pos were 2-4 MB per layer and step,
 * 0.5 ms. NULL: the whole loop */
static uop *fill_bound(lin_ctx *c, uop *u, uop *rng, bool outermost) {
  uint64_t lane = c->lane ? range_bit(c, c->lane) : 0, open = c->open & ~lane;
  int64_t fk;
  if (!lin_coef(u->src[1], rng, &fk)) return NULL;
  uop *b = NULL;
  int readers = 0;
  for (int i = 0; i < c->nreduces; i++) {
    uop *q = c->reduces[i];
    if (emitted(c, q) || !uop_uses(q->src[0], u)) continue;
    int n;
    uop **order = uop_toposort(q->src[0], &n), *ld = NULL;
    if (!order) { c->fail = true; return NULL; }
    for (int j = 0; j < n && !ld; j++)
      if (order[j]->op == OP_LOAD && order[j]->src[0] == u) ld = order[j];
    free(order);
    uop *bq = NULL;
    int64_t rk;
    for (int k = 1; k < q->nsrc && ld && fk && !bq; k++) {  /* fk 0: rng is no loop of the fill's index */
      uop *R = q->src[k];
      if (R != c->lane && R->src[0] == rng->src[0] && lin_coef(ld->src[1], R, &rk) && rk == fk)
        bq = trim_bound(q, R, open, &c->ls);
    }
    uop *g = outermost ? umap_get(&c->guards, q) : NULL;
    if (g) {
      uop *gb = trim_guarded(bq, g, rng, c->lane, c->lanes);
      bq = gb ? gb : bq;
    }
    if (!bq) return NULL;
    b = b && b != bq ? uop_binary(OP_MAX, b, bq) : bq;
    readers++;
  }
  return readers ? usable_bound(c, trim_clamp(b, rng), open) : NULL;
}

/* v as a sum of up to n terms, into out (n >= 1): its ADDs split from the top, widest first. Any split is the
 * same sum, so the terms are right whatever the simplifier made of expand.c's tree; n of them when it is that
 * tree. Returns the count. */
static int unfold(uop *v, int n, uop **out) {
  int m = 1;
  out[0] = v;
  for (bool split = true; split && m < n;) {
    split = false;
    for (int i = 0; i < m && m < n; i++)
      if (out[i]->op == OP_ADD && out[i]->nsrc == 2) {
        out[m++] = out[i]->src[1];
        out[i] = out[i]->src[0];
        split = true;
      }
  }
  return m;
}

/* The loads a reduce's body reads that are not emitted yet (emitted inside the innermost loop with it), at most
 * cap; -1 when there are more */
static int body_loads(lin_ctx *c, uop *body, uop **out, int cap) {
  int n = 0, nn;
  uop **order = uop_toposort(body, &nn);
  if (!order) { c->fail = true; return -1; }
  for (int i = 0; i < nn && n >= 0; i++)
    if (order[i]->op == OP_LOAD && !emitted(c, order[i])) n = n < cap ? (out[n] = order[i], n + 1) : -1;
  free(order);
  return n;
}

/* The order of a register tile's updates inside its innermost loop: each next the one whose body brings in the
 * fewest loads not read yet, of equal ones the one that is the last reader of the most loads read before. A
 * tile of a broadcast operand across m values and a vector operand across n holds n + 1 operands with this
 * order where the reduces' own order (vector-major) held m + 1: ResNet-18's 28x28 convolution (6 pixels x 2
 * channel vectors, 12 accumulators) held its 6 broadcasts and both vectors, spilled 3 accumulators to the
 * stack in the loop, and ran at 39% of the FMA peak. Kept as it is when a body reads more than MAX_OPS loads. */
#define MAX_OPS 8
static void order_tile(lin_ctx *c, uop *const *grp, int ng, int *perm) {
  for (int g = 0; g < ng; g++) perm[g] = g;
  if (ng < 4 || ng > 64) return;
  uop *ops[64][MAX_OPS];
  int nops[64];
  for (int g = 0; g < ng; g++)
    if ((nops[g] = body_loads(c, grp[g]->src[0], ops[g], MAX_OPS)) < 0) return;
  /* the distinct loads, whether one is read already, and how many members not placed yet read it */
  uop *load[64 * MAX_OPS];
  int nload = 0, which[64][MAX_OPS], readers[64 * MAX_OPS] = {0};
  bool read[64 * MAX_OPS] = {0}, done[64] = {0};
  for (int g = 0; g < ng; g++)
    for (int i = 0; i < nops[g]; i++) {
      int l = 0;
      while (l < nload && load[l] != ops[g][i]) l++;
      if (l == nload) load[nload++] = ops[g][i];
      which[g][i] = l;
      readers[l]++;
    }
  for (int k = 0; k < ng; k++) {
    int best = -1, best_new = 0, best_last = 0;
    for (int g = 0; g < ng; g++) {
      if (done[g]) continue;
      int fresh = 0, last = 0;
      for (int i = 0; i < nops[g]; i++) {
        fresh += !read[which[g][i]];
        last += read[which[g][i]] && readers[which[g][i]] == 1;
      }
      if (best < 0 || fresh < best_new || (fresh == best_new && last > best_last))
        best = g, best_new = fresh, best_last = last;
    }
    done[best] = true;
    perm[k] = best;
    for (int i = 0; i < nops[best]; i++) {
      read[which[best][i]] = true;
      readers[which[best][i]]--;
    }
  }
}

#define TERM_MAJOR_MAX 8

/* all of a group share one loop nest: values inside it that depend on its loops are emitted once, there */
static void emit_reduce(lin_ctx *c, uop *r) {
  uop **grp = mem_alloc((size_t)(c->nreduces + 1) * 2 * sizeof *grp);
  if (!grp) { c->fail = true; return; }
  uop **acc = grp + c->nreduces + 1;
  int ng = 0;
  grp[ng++] = r;
  for (int i = 0; i < c->nreduces; i++) {
    uop *q = c->reduces[i];
    if (q == r || emitted(c, q) || !same_loops(q, r) || (deps(c, q) & ~c->open)) continue;
    /* a reduce that uses another's value is not in its loop nest, even over the same loops (a row kernel's
     * sum of exp(x - max) after the max, both over the vector lane only) */
    bool dep = false;
    for (int g = 0; g < ng && !dep; g++) dep = uop_uses(q->src[0], grp[g]) || uop_uses(grp[g]->src[0], q);
    if (dep) continue;
    mark(c, q);
    grp[ng++] = q;
  }
  for (int g = 0; g < ng; g++) hoist(c, grp[g]->src[0]);
  for (int g = 0; g < ng; g++) {
    tg_dtype dt = (tg_dtype)grp[g]->dtype;
    uop *init = uop_const(dt, identity((uop_op)grp[g]->arg.i, dt));
    int64_t isvec = umap_get(c->vec, grp[g]->src[0]) != NULL;
    acc[g] = uop_new(OP_DEFINE_ACC, dt, 1, &init, (uop_arg){.i = c->next_acc++}, 1, &isvec);
    if (acc[g] && isvec && !umap_put(c->vec, acc[g], (void *)1)) c->fail = true;
    push(c, acc[g]);
  }
  bool outermost = true;
  for (int i = 1; i < r->nsrc; i++) {
    if (r->src[i] == c->lane) continue;
    uop *b = group_bound(c, grp, ng, r->src[i], outermost), *st = group_start(c, grp, ng, r->src[i]);
    outermost = false;
    if (b) emit(c, b);
    if (st) emit(c, st);
    open_loop(c, r->src[i]);
    if (b && !c->fail) c->bnd[c->n - 1] = b;
    if (st && !c->fail) c->start[c->n - 1] = st;
    /* inside the innermost loop the bodies are emitted one reduce at a time below, not hoisted all at once */
    bool innermost = true;
    for (int j = i + 1; j < r->nsrc; j++) innermost &= r->src[j] == c->lane;
    if (!innermost)
      for (int g = 0; g < ng; g++) hoist(c, grp[g]->src[0]);
  }
  /* each accumulator's update right after its own body: a register tile's products then live one statement,
   * not until every product of the tile is computed (gcc kept all of a 5x5 convolution's broadcasts live and
   * read its weight vectors from memory at every FMA: MNIST's input-gradient convolution 270 -> 211 ms, a 3x3
   * one 33 -> 15, on one AVX2 core); in the order that holds the fewest operands (order_tile) */
  int *perm = mem_alloc(((size_t)ng + 1) * sizeof *perm);
  if (!perm) c->fail = true;
  else order_tile(c, grp, ng, perm);
  /* the copies of an UNROLL for one accumulator (expand.c: aux[0] of them, summed) are added one at a time.
   * A small tile (at most TERM_MAJOR_MAX accumulators) adds the first copy of every accumulator before the
   * second of any: a convolution's taps unrolled into its tile (one_accumulator) then read one tap's weight
   * vectors across the tile's pixels, where they held all three taps' (2 vectors x 4 pixels x 3 taps on AVX2:
   * 6 weight vectors live beside 8 accumulators, one spilled in the loop; ResNet-18's 14x14 convolutions
   * 1.22 -> 0.89 and 2.50 -> 1.76 ms, per-kernel minimums, 2 threads). Larger tiles keep each accumulator's
   * copies together: 12 or 14 accumulators ran 1.5-1.7x slower the other way (0.86 -> 1.31 ms) */
  uop *(*terms)[64] = c->fail ? NULL : mem_alloc(((size_t)ng + 1) * sizeof *terms);
  int *nt = terms ? mem_alloc(((size_t)ng + 1) * sizeof *nt) : NULL;
  if (!nt) c->fail = true;
  int most = 0;
  for (int g = 0; g < ng && !c->fail; g++) {
    nt[g] = grp[g]->naux == 1 && grp[g]->aux[0] > 1 && grp[g]->aux[0] <= 64 ? unfold(grp[g]->src[0], (int)grp[g]->aux[0], terms[g]) : 0;
    if (nt[g] <= 0) terms[g][0] = grp[g]->src[0], nt[g] = 1;
    if (nt[g] > most) most = nt[g];
  }
  bool term_major = ng <= TERM_MAJOR_MAX;
  for (int round = 0; round < (term_major ? most : 1) && !c->fail; round++)
    for (int k = 0; k < ng && !c->fail; k++) {
      int g = perm[k];
      bool vec = umap_get(c->vec, grp[g]->src[0]) != NULL;
      int first = term_major ? round : 0, end = term_major && round + 1 < nt[g] ? round + 1 : nt[g];
      for (int t = first; t < end && !c->fail; t++) {
        emit(c, terms[g][t]);
        uop *upd = uop_binary((uop_op)grp[g]->arg.i, acc[g], terms[g][t]);
        if (upd && vec && !umap_put(c->vec, upd, (void *)1)) c->fail = true;
        uop *s[2] = {acc[g], upd};
        push(c, upd);
        push(c, uop_new(OP_ASSIGN, (tg_dtype)grp[g]->dtype, 2, s, (uop_arg){0}, 0, NULL));
      }
    }
  free(terms);
  free(nt);
  free(perm);
  for (int i = r->nsrc - 1; i >= 1; i--)
    if (r->src[i] != c->lane) close_loop(c, r->src[i]);
  /* from here on a REDUCE's value is its accumulator (over the lane: the accumulator's lanes reduced) */
  for (int g = 0; g < ng && !c->fail; g++) {
    push(c, grp[g]);
    if (!umap_put(c->accs, grp[g], acc[g])) c->fail = true;
  }
  free(grp);
}

/* A PACK that transposes (matmul with B transposed, as every linear layer's weight is stored: the panel's rows
 * are the source's columns) copies it in BxB blocks through registers, B the vector lanes: B row loads, a
 * butterfly of two-source shuffles, B row stores (render/c.c), instead of one element at a time (x @ W^T,
 * 128x784x512: 493-507 -> 459-462 us; the copy is mostly bound by reading W). The fill STORE becomes a
 * STORE_TBLOCK (codegen.h) in loops over the blocks; it names the fill, which the panel's loads read. */
static bool emit_tblock_copy(lin_ctx *c, uop *u, uop *const *loops) {
  int64_t B = c->lanes, da, db, sa, sb;
  uop *val = u->src[2], *a = loops[0], *b = loops[1];
  if ((B != 8 && B != 16) || val->op != OP_LOAD || val->nsrc != 2 || val->dtype != TG_FLOAT32 ||
      val->src[0]->op != OP_PARAM || !uop_is_const(a->src[0]) || !uop_is_const(b->src[0]) || c->next_id + 2 > 64)
    return false;
  int64_t na = a->src[0]->arg.i, nb = b->src[0]->arg.i;
  if (na % B || nb % B || !lin_coef(u->src[1], a, &da) || !lin_coef(u->src[1], b, &db) ||
      !lin_coef(val->src[1], a, &sa) || !lin_coef(val->src[1], b, &sb) || db != 1 || da != nb || sa != 1 || sb <= 1)
    return false;
  tg_dtype it = (tg_dtype)a->dtype;
  int64_t type = AX_LOOP;
  uop *ca = uop_const_int(it, na / B), *cb = uop_const_int(it, nb / B);
  uop *a0 = ca ? uop_new(OP_RANGE, it, 1, &ca, (uop_arg){.i = c->next_id}, 1, &type) : NULL;
  uop *b0 = cb ? uop_new(OP_RANGE, it, 1, &cb, (uop_arg){.i = c->next_id + 1}, 1, &type) : NULL;
  uop *cB = uop_const_int(it, B);
  if (!a0 || !b0 || !cB) { c->fail = true; return true; }
  c->next_id += 2;
  uop *as = uop_binary(OP_MUL, a0, cB), *bs = uop_binary(OP_MUL, b0, cB);
  uop *dst = uop_substitute(u->src[1], a, as), *src = uop_substitute(val->src[1], a, as);
  dst = dst ? uop_simplify(uop_substitute(dst, b, bs)) : NULL;
  src = src ? uop_simplify(uop_substitute(src, b, bs)) : NULL;
  uop *stride = uop_const_int(it, sb), *dstride = uop_const_int(it, nb);
  if (!dst || !src || !stride || !dstride) { c->fail = true; return true; }
  /* the blocks of B source rows outside, those along the rows inside: B rows read at once, each from its start
   * to its end, which the prefetchers follow (3x3 conv weights 512 x 4608, 16 blocks of 32 rows on 2 threads:
   * 0.92-1.04 ms with the row loop inside (32 rows at once), 0.51-0.54 outside, 0.32-0.34 with tg_tblock's
   * prefetch, 1.2-1.66 by elements; reading it whole takes 0.17-0.30) */
  uop *fb = fill_bound(c, u, a0, true);
  if (fb) emit(c, fb);
  open_loop(c, b0);
  hoist(c, dst);
  hoist(c, src);
  open_loop(c, a0);
  if (fb && !c->fail) c->bnd[c->n - 1] = fb;
  emit(c, dst);
  emit(c, src);
  uop *srcs[7] = {u->src[0], dst, val->src[0], src, stride, dstride, u};
  push(c, uop_new(OP_STORE, TG_FLOAT32, 7, srcs, (uop_arg){.i = STORE_TBLOCK}, 0, NULL));
  close_loop(c, a0);
  close_loop(c, b0);
  return true;
}

/* A fill whose innermost loop writes consecutive elements of the buffer from every second element of a kernel
 * argument (ResNet's 7x7 stride-2 stem packs its input so: 16 pixels at 2 ox + kx) copies a vector per step:
 * two vector loads and a shuffle of their even lanes (render/c.c), where gcc's code for the loop moved most
 * elements one by one. The STORE becomes a STORE_EVERY2 in a loop over the vectors of that loop. */
static bool emit_every2_copy(lin_ctx *c, uop *u, uop *const *loops, int nl) {
  int64_t B = c->lanes, dk, sk;
  uop *val = u->src[2], *r = nl ? loops[nl - 1] : NULL;
  if (!c->lane || B < 4 || !r || val->op != OP_LOAD || val->nsrc != 2 || val->dtype != TG_FLOAT32 ||
      val->src[0]->op != OP_PARAM || val->src[0]->naux < 1 || !uop_is_const(r->src[0]) || r->src[0]->arg.i % B ||
      c->next_id + 1 > 64 || !lin_coef(u->src[1], r, &dk) || dk != 1 || !lin_coef(val->src[1], r, &sk) || sk != 2)
    return false;
  tg_dtype it = (tg_dtype)r->dtype;
  int64_t type = AX_LOOP;
  uop *cn = uop_const_int(it, r->src[0]->arg.i / B), *cB = uop_const_int(it, B);
  uop *v = cn ? uop_new(OP_RANGE, it, 1, &cn, (uop_arg){.i = c->next_id}, 1, &type) : NULL;
  uop *at = v && cB ? uop_binary(OP_MUL, v, cB) : NULL;
  uop *dst = at ? uop_simplify(uop_substitute(u->src[1], r, at)) : NULL;
  uop *src = at ? uop_simplify(uop_substitute(val->src[1], r, at)) : NULL;
  if (!dst || !src) { c->fail = true; return true; }
  c->next_id++;
  for (int i = 0; i < nl - 1; i++) {
    uop *fb = fill_bound(c, u, loops[i], i == 0);
    if (fb) emit(c, fb);
    open_loop(c, loops[i]);
    if (fb && !c->fail) c->bnd[c->n - 1] = fb;
    hoist(c, dst);
    hoist(c, src);
  }
  open_loop(c, v);
  emit(c, dst);
  emit(c, src);
  uop *srcs[5] = {u->src[0], dst, val->src[0], src, u};
  push(c, uop_new(OP_STORE, TG_FLOAT32, 5, srcs, (uop_arg){.i = STORE_EVERY2}, 0, NULL));
  close_loop(c, v);
  for (int i = nl - 2; i >= 0; i--) close_loop(c, loops[i]);
  return true;
}

/* the copy loops of a PACK around the STORE that fills its buffer */
static void emit_local_store(lin_ctx *c, uop *u) {
  emit(c, u->src[0]);
  hoist(c, u->src[2]);
  int n;
  uop **order = uop_toposort(u->src[1], &n);
  if (!order) { c->fail = true; return; }
  uop *loops[64];
  int nl = 0;
  for (int i = 0; i < n; i++)
    if (order[i]->op == OP_RANGE && !(c->open & range_bit(c, order[i])) && nl < 64) loops[nl++] = order[i];
  free(order);
  for (int i = 1; i < nl; i++)
    for (int j = i; j > 0 && loops[j]->arg.i < loops[j - 1]->arg.i; j--) {
      uop *t = loops[j];
      loops[j] = loops[j - 1];
      loops[j - 1] = t;
    }
  if (nl == 2 && emit_tblock_copy(c, u, loops)) return;
  if (emit_every2_copy(c, u, loops, nl)) return;
  for (int i = 0; i < nl; i++) {
    uop *fb = fill_bound(c, u, loops[i], i == 0);
    if (fb) emit(c, fb);
    open_loop(c, loops[i]);
    if (fb && !c->fail) c->bnd[c->n - 1] = fb;
    hoist(c, u->src[2]);
    hoist(c, u->src[1]);
  }
  emit(c, u->src[1]);
  emit(c, u->src[2]);
  push(c, u);
  for (int i = nl - 1; i >= 0; i--) close_loop(c, loops[i]);
}

static void emit(lin_ctx *c, uop *u) {
  if (c->fail || emitted(c, u)) return;
  mark(c, u);
  if (u->op == OP_PARAM || u->op == OP_CONST) return;  /* rendered inline */
  if (u->op == OP_REDUCE) { emit_reduce(c, u); return; }
  if (is_local_store(u)) { emit_local_store(c, u); return; }
  /* the sources with reduces first: the others are then computed after the reduces' loops, not held through them */
  for (int i = 0; i < u->nsrc; i++)
    if (u->src[i]->op == OP_REDUCE || umap_get(&c->above, u->src[i])) emit(c, u->src[i]);
  for (int i = 0; i < u->nsrc; i++) emit(c, u->src[i]);
  push(c, u);
}

/* the vector values: the lane, contiguous vector accesses and what uses them; a REDUCE over the lane is not */
static bool vec_of(const uop *u, uop *lane, uop_map *vec) {
  if (!lane) return false;
  if (u == lane || ((u->op == OP_LOAD || u->op == OP_STORE) && u->arg.i > 0)) return true;
  if (u->op == OP_REDUCE) {
    for (int i = 1; i < u->nsrc; i++)
      if (u->src[i] == lane) return false;
    return umap_get(vec, u->src[0]) != NULL;
  }
  for (int i = 0; i < u->nsrc; i++)
    if (umap_get(vec, u->src[i])) return true;
  return false;
}

bool lp_is_vec(const linear_program *p, const uop *u) { return umap_get(&p->vec, u) != NULL; }

/* THREAD first (the pool splits the outermost loop), then by id: ids were given outermost first */
static bool loop_before(const uop *a, const uop *b) {
  if ((a->aux[0] == AX_THREAD) != (b->aux[0] == AX_THREAD)) return a->aux[0] == AX_THREAD;
  return a->arg.i < b->arg.i;
}

bool linearize(uop *ast, linear_program *out, kernel_info *info) {
  lin_ctx c = {.iters = 1};
  memset(out, 0, sizeof *out);
  out->lane = c.lane = info ? info->lane : NULL;
  out->lanes = c.lanes = info && info->lane ? info->lanes : 1;
  c.vec = &out->vec;
  c.accs = &out->accs;
  int nn;
  uop **order = uop_toposort(ast, &nn);
  if (!order) return false;
  c.reduces = mem_alloc((size_t)nn * sizeof *c.reduces);
  if (!c.reduces) {
    free(order);
    tg_set_error(TG_ERR_NOMEM, "linearize: out of memory");
    return false;
  }
  uop *globals[64];
  int ng = 0;
  for (int i = 0; i < nn; i++) {
    uop *u = order[i];
    if (u->op == OP_RANGE && u->arg.i >= 64) {
      free(order);
      free(c.reduces);
      tg_set_error(TG_ERR_INTERNAL, "linearize: more than 64 loops in one kernel");
      return false;
    }
    if (u->op == OP_RANGE && u->arg.i >= c.next_id) c.next_id = u->arg.i + 1;
    if (u->op == OP_RANGE && u != c.lane && u->aux[0] != AX_REDUCE && u->aux[0] != AX_UNROLL && u->aux[0] != AX_LOOP)
      globals[ng++] = u;
    if (u->op == OP_PARAM && u->arg.i + 1 > out->nparams) out->nparams = (int)u->arg.i + 1;
    if (u->op == OP_STORE && u->src[0]->op == OP_PARAM && u->src[0]->arg.i + 1 > out->nouts)
      out->nouts = (int)u->src[0]->arg.i + 1;
    if (u->op == OP_REDUCE) c.reduces[c.nreduces++] = u;
    if (vec_of(u, c.lane, c.vec) && !umap_put(c.vec, u, (void *)1)) c.fail = true;
  }
  /* the lane's id is taken too: the expander may have left it out of the AST, and a new loop sharing its bit
   * would count as open wherever the lane is */
  if (c.lane && c.lane->arg.i >= c.next_id) c.next_id = c.lane->arg.i + 1;
  /* what the reduces' bodies use (sources before users in order: walked backwards), and what uses a reduce */
  static char yes;
  for (int i = nn - 1; i >= 0; i--) {
    uop *u = order[i];
    bool in_body = umap_get(&c.body, u) != NULL;
    for (int k = 0; k < u->nsrc; k++)
      if ((in_body || u->op == OP_REDUCE) && !umap_put(&c.body, u->src[k], &yes)) c.fail = true;
  }
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < order[i]->nsrc; k++)
      if ((order[i]->src[k]->op == OP_REDUCE || umap_get(&c.above, order[i]->src[k])) && !umap_put(&c.above, order[i], &yes))
        c.fail = true;
  free(order);
  if (!trim_guards(ast, &c.guards)) c.fail = true;
  if (c.lane) c.open |= range_bit(&c, c.lane);
  for (int i = 1; i < ng; i++)
    for (int j = i; j > 0 && loop_before(globals[j], globals[j - 1]); j--) {
      uop *t = globals[j];
      globals[j] = globals[j - 1];
      globals[j - 1] = t;
    }
  hoist(&c, ast);
  for (int i = 0; i < ng; i++) {
    open_loop(&c, globals[i]);
    hoist(&c, ast);
  }
  emit(&c, ast);
  for (int i = ng - 1; i >= 0; i--) close_loop(&c, globals[i]);
  for (size_t i = 0; i < c.deps.cap; i++)
    if (c.deps.keys[i]) free(c.deps.vals[i]);
  umap_free(&c.deps);
  umap_free(&c.emitted);
  umap_free(&c.seen);
  loop_sets_free(&c.ls);
  umap_free(&c.guards);
  umap_free(&c.body);
  umap_free(&c.above);
  free(c.reduces);
  if (c.fail) {
    free(c.out);
    free(c.bnd);
    free(c.start);
    umap_free(&out->vec);
    umap_free(&out->accs);
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "linearize: out of memory");
    return false;
  }
  out->ops = c.out;
  out->bounds = c.bnd;
  out->starts = c.start;
  out->n = c.n;
  if (info) info->flops = c.flops;
  return true;
}

void linear_program_free(linear_program *p) {
  free(p->ops);
  free(p->bounds);
  free(p->starts);
  umap_free(&p->vec);
  umap_free(&p->accs);
  memset(p, 0, sizeof *p);
}
