/* trim.c — loops that end where the values make the rest of their iterations useless.
 *
 * A reduce whose body is the reduce's identity beyond some point of one of its loops (attention over a KV cache
 * masked past the position: sum over t of where(t <= pos, p[t], 0) * v[t]) need not run that loop past the
 * point. The linearizer asks trim_bound for such a point before it opens a reduce loop; the loop then runs
 * to min(N, bound), computed in the kernel from values known outside it (a variable, the outer loops). The
 * WHERE stays in the body, so a bound that is too large (a split loop's ceil-divided piece, a vector of lanes
 * seen at its smallest) costs iterations, never correctness.
 *
 * The conditions understood: c(r) compared against an expression e free of r, with r entering linearly and
 * increasing (r*k + rest, k > 0; rest seen at its smallest value): r*k + rest < e, e < r*k + rest, r == e,
 * their negations and conjunctions. The bodies: where(c, x, identity), where(c, identity, x), sums of
 * such (the copies an UNROLL made), products with one (a reduce over ADD only: a masked factor makes the term
 * 0, where an infinite other factor would have made it NaN: the trimmed loop then gives 0 for those terms).
 */
#include "codegen/opt.h"
#include <math.h>
#include <stdlib.h>

typedef struct trim_ctx {
  uop *r;          /* the loop to trim */
  uint64_t open;   /* the loops a bound may use: those open outside r */
  loop_sets *ls;
  uop_op rop;      /* the reduce's op */
  tg_dtype rdt;    /* the reduce's dtype */
} trim_ctx;

static bool is_identity(const trim_ctx *t, uop *u) {
  if (!uop_is_const(u)) return false;
  double v = uop_const_value(u);
  if (t->rop == OP_ADD) return v == 0;
  if (t->rop == OP_MUL) return v == 1;
  return v == -INFINITY || v <= dtype_min(t->rdt);
}

static uop *ic(const trim_ctx *t, int64_t v) { return uop_const_int((tg_dtype)t->r->dtype, v); }

/* the smaller (either may be missing: a point past which the value is known from one side is enough) */
static uop *either_min(uop *a, uop *b) {
  if (!a || !b) return a ? a : b;
  return uop_unary(OP_NEG, uop_binary(OP_MAX, uop_unary(OP_NEG, a), uop_unary(OP_NEG, b)));
}
/* the larger (both needed) */
static uop *both_max(uop *a, uop *b) { return a && b ? uop_binary(OP_MAX, a, b) : NULL; }

/* e usable as a bound: an integer free of r, whose loops are all open outside r, in r's dtype */
static uop *free_side(const trim_ctx *t, uop *e) {
  if (!dtype_is_int((tg_dtype)e->dtype) || uop_uses(e, t->r)) return NULL;
  if (loops_free(t->ls, e) & ~t->open) return NULL;
  return e->dtype == t->r->dtype ? e : uop_cast(e, (tg_dtype)t->r->dtype);
}

/* the least r from which r*k + rest >= x + add holds, with a the side that has r: ceil((x + add - rest)/k), rest
 * itself when the loops it uses are open outside r (a convolution's tap row ky beside its output row y: y + ky
 * >= 4 from ky = 4 - y), else at its smallest value (`lower`: its largest, for a point that must not be too
 * late). C's division truncates, which for a negative numerator rounds up: larger, so safe for an end; for a
 * start the value is then at most 0, where the loop starts anyway */
static uop *crossing_at(const trim_ctx *t, uop *a, uop *x, int64_t add, bool lower) {
  int64_t k;
  if (!dtype_is_int((tg_dtype)a->dtype) || !lin_coef(a, t->r, &k) || k <= 0) return NULL;
  uop *z = ic(t, 0), *rest = z ? uop_simplify(uop_substitute(a, t->r, z)) : NULL;
  if (!rest) return NULL;
  uop *free_rest = uop_is_const(rest) ? NULL : free_side(t, rest), *num;
  if (free_rest) {
    num = uop_binary(OP_ADD, uop_binary(OP_ADD, x, uop_unary(OP_NEG, free_rest)), ic(t, add + (k - 1)));
  } else {
    int64_t lo = lower ? uop_vmax(rest) : uop_vmin(rest);
    if (lo < -(INT64_C(1) << 40) || lo > (INT64_C(1) << 40)) return NULL;
    num = uop_binary(OP_ADD, x, ic(t, add - lo + (k - 1)));
  }
  return k == 1 ? num : uop_binary(OP_IDIV, num, ic(t, k));
}
static uop *crossing(const trim_ctx *t, uop *a, uop *x, int64_t add) { return crossing_at(t, a, x, add, false); }


/* the least r from which c's value is `want` for every larger r in the loop, or NULL when unknown */
static uop *cond_bound(const trim_ctx *t, uop *c, bool want) {
  if (c->op == OP_CMPEQ || c->op == OP_CMPNE || c->op == OP_XOR) {
    for (int i = 0; i < 2; i++) {  /* negations: x == false, x != true, x ^ true; x == true, x != false */
      uop *k = c->src[1 - i];
      if (c->src[i]->dtype != TG_BOOL || !uop_is_const(k)) continue;
      bool kv = uop_const_value(k) != 0, flip = c->op == OP_CMPEQ ? !kv : kv;
      return cond_bound(t, c->src[i], flip ? !want : want);
    }
  }
  if (c->op == OP_AND) {
    uop *a = cond_bound(t, c->src[0], want), *b = cond_bound(t, c->src[1], want);
    return want ? both_max(a, b) : either_min(a, b);
  }
  if (c->op == OP_OR) {
    uop *a = cond_bound(t, c->src[0], want), *b = cond_bound(t, c->src[1], want);
    return want ? either_min(a, b) : both_max(a, b);
  }
  if (c->op == OP_CMPLT) {
    uop *a = c->src[0], *b = c->src[1], *x;
    if (!want && (x = free_side(t, b))) return crossing(t, a, x, 0);   /* a >= b */
    if (want && (x = free_side(t, a))) return crossing(t, b, x, 1);    /* b >= a + 1 */
    return NULL;
  }
  if ((c->op == OP_CMPEQ && !want) || (c->op == OP_CMPNE && want)) {  /* r == e ends past e */
    for (int i = 0; i < 2; i++) {
      uop *x = free_side(t, c->src[1 - i]);
      if (x && uop_uses(c->src[i], t->r)) return crossing(t, c->src[i], x, 1);
    }
  }
  return NULL;
}

/* a load with a gate (lowered padding: 0 where the gate fails) in a sum: 0 is the identity */
static bool gated_zero(const trim_ctx *t, const uop *u) {
  return u->op == OP_LOAD && u->nsrc == 3 && u->src[2]->dtype == TG_BOOL && t->rop == OP_ADD;
}

/* the least r from which the body u is the reduce's identity */
static uop *zero_bound(const trim_ctx *t, uop *u) {
  if (is_identity(t, u)) return ic(t, 0);
  if (!uop_uses(u, t->r)) return NULL;
  if (u->op == OP_WHERE) {
    if (is_identity(t, u->src[2])) return either_min(cond_bound(t, u->src[0], false), zero_bound(t, u->src[1]));
    if (is_identity(t, u->src[1])) return either_min(cond_bound(t, u->src[0], true), zero_bound(t, u->src[2]));
    return both_max(zero_bound(t, u->src[1]), zero_bound(t, u->src[2]));
  }
  if (u->op == (uint16_t)t->rop) return both_max(zero_bound(t, u->src[0]), zero_bound(t, u->src[1]));
  if (t->rop == OP_ADD && u->op == OP_MUL) return either_min(zero_bound(t, u->src[0]), zero_bound(t, u->src[1]));
  if (u->op == OP_CAST && t->rop != OP_MAX && u->dtype != TG_BOOL) {
    trim_ctx in = *t;
    in.rdt = (tg_dtype)u->src[0]->dtype;
    return zero_bound(&in, u->src[0]);
  }
  if (gated_zero(t, u)) return cond_bound(t, u->src[2], false);
  return NULL;
}

/* ---- starts: the first iterations of a loop that are the identity --------------------------------------
 * The mirror of the above: the least r below which the body is the reduce's identity (the tap rows above a
 * convolution's padded input, y + ky < 4 for the first output rows). The loop then runs from max(0, start). A
 * start must never be too late: a point computed from a value seen at its largest, not its smallest. */

/* the smaller (both needed) and the larger (either may be missing) */
static uop *both_min(uop *a, uop *b) { return a && b ? either_min(a, b) : NULL; }
static uop *either_max(uop *a, uop *b) {
  if (!a || !b) return a ? a : b;
  return uop_binary(OP_MAX, a, b);
}

/* the least r such that c is not `want` for any smaller r, or NULL when unknown */
static uop *cond_start(const trim_ctx *t, uop *c, bool want) {
  if (c->op == OP_CMPEQ || c->op == OP_CMPNE || c->op == OP_XOR) {
    for (int i = 0; i < 2; i++) {
      uop *k = c->src[1 - i];
      if (c->src[i]->dtype != TG_BOOL || !uop_is_const(k)) continue;
      bool kv = uop_const_value(k) != 0, flip = c->op == OP_CMPEQ ? !kv : kv;
      return cond_start(t, c->src[i], flip ? !want : want);
    }
    return NULL;
  }
  if (c->op == OP_AND) {
    uop *a = cond_start(t, c->src[0], want), *b = cond_start(t, c->src[1], want);
    return want ? either_max(a, b) : both_min(a, b);
  }
  if (c->op == OP_OR) {
    uop *a = cond_start(t, c->src[0], want), *b = cond_start(t, c->src[1], want);
    return want ? both_min(a, b) : either_max(a, b);
  }
  if (c->op == OP_CMPLT) {  /* r enters increasing: a comparison changes its value once, where it crosses */
    uop *a = c->src[0], *b = c->src[1], *x;
    if (!want && (x = free_side(t, b))) return crossing_at(t, a, x, 0, true);  /* a < b until a >= b */
    if (want && (x = free_side(t, a))) return crossing_at(t, b, x, 1, true);   /* false until b >= a + 1 */
  }
  return NULL;
}

/* the least r below which the body u is the reduce's identity */
static uop *zero_start(const trim_ctx *t, uop *u) {
  if (!uop_uses(u, t->r)) return NULL;
  if (u->op == OP_WHERE) {
    if (is_identity(t, u->src[2])) return either_max(cond_start(t, u->src[0], true), zero_start(t, u->src[1]));
    if (is_identity(t, u->src[1])) return either_max(cond_start(t, u->src[0], false), zero_start(t, u->src[2]));
    return both_min(zero_start(t, u->src[1]), zero_start(t, u->src[2]));
  }
  if (u->op == (uint16_t)t->rop) return both_min(zero_start(t, u->src[0]), zero_start(t, u->src[1]));
  if (t->rop == OP_ADD && u->op == OP_MUL) return either_max(zero_start(t, u->src[0]), zero_start(t, u->src[1]));
  if (u->op == OP_CAST && t->rop != OP_MAX && u->dtype != TG_BOOL) {
    trim_ctx in = *t;
    in.rdt = (tg_dtype)u->src[0]->dtype;
    return zero_start(&in, u->src[0]);
  }
  if (gated_zero(t, u)) return cond_start(t, u->src[2], true);
  return NULL;
}

uop *trim_start(uop *red, uop *r, uint64_t open, loop_sets *ls) {
  if (!uop_is_const(r->src[0])) return NULL;
  trim_ctx t = {.r = r, .open = open, .ls = ls, .rop = (uop_op)red->arg.i, .rdt = (tg_dtype)red->dtype};
  uop *b = zero_start(&t, red->src[0]);
  b = b ? uop_simplify(uop_binary(OP_MAX, b, ic(&t, 0))) : NULL;
  return b && !(uop_is_const(b) && b->arg.i <= 0) ? b : NULL;
}

uop *trim_bound(uop *red, uop *r, uint64_t open, loop_sets *ls) {
  if (!uop_is_const(r->src[0])) return NULL;
  trim_ctx t = {.r = r, .open = open, .ls = ls, .rop = (uop_op)red->arg.i, .rdt = (tg_dtype)red->dtype};
  return zero_bound(&t, red->src[0]);
}

uop *trim_clamp(uop *b, uop *r) {
  if (!b) return NULL;
  uop *n = r->src[0], *z = uop_const_int((tg_dtype)r->dtype, 0);
  uop *lo = z ? uop_binary(OP_MAX, b, z) : NULL;
  uop *c = lo ? uop_unary(OP_NEG, uop_binary(OP_MAX, uop_unary(OP_NEG, lo), uop_unary(OP_NEG, n))) : NULL;
  c = c ? uop_simplify(c) : NULL;
  return c && c != n && !(uop_is_const(c) && c->arg.i >= n->arg.i) ? c : NULL;
}

/* ---- guards: a reduce whose value matters only where a condition holds -------------------------------
 * A stored where(c, f, y) needs f's reduces only where c holds (the score kernel of attention: where(t <= pos,
 * q.k[t], -inf)); c, when the loops it uses are open before the reduce's, makes its outermost loop run 0 times
 * where c does not hold, as an IF around the nest would. */

/* marks what is reached from u without entering the first value of a where on c */
static bool reach(uop *u, uop *c, uop_map *seen) {
  static char yes;
  if (umap_get(seen, u)) return true;
  if (!umap_put(seen, u, &yes)) return false;
  for (int i = 0; i < u->nsrc; i++) {
    if (u->op == OP_WHERE && i == 1 && u->src[0] == c) continue;
    if (!reach(u->src[i], c, seen)) return false;
  }
  return true;
}

bool trim_guards(uop *ast, uop_map *guards) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return false;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    uop *w = order[i];
    if (w->op != OP_WHERE || !uop_is_const(w->src[2])) continue;
    int nf;
    uop **in = uop_toposort(w->src[1], &nf);
    if (!in) { ok = false; break; }
    uop_map seen = {0};
    bool reached = false;
    for (int j = 0; j < nf && ok; j++) {
      if (in[j]->op != OP_REDUCE || umap_get(guards, in[j])) continue;
      if (!reached) ok = reached = reach(ast, w->src[0], &seen);
      if (ok && !umap_get(&seen, in[j]) && !umap_put(guards, in[j], w->src[0])) ok = false;
    }
    umap_free(&seen);
    free(in);
  }
  free(order);
  return ok;
}

/* whether u reads a vector load (its lanes are no values a scalar bound can name) */
static bool reads_vector(uop *u) {
  int n;
  uop **order = uop_toposort(u, &n);
  bool v = !order;
  for (int i = 0; i < n && !v; i++) v = order[i]->op == OP_LOAD && order[i]->arg.i > 0;
  free(order);
  return v;
}

uop *trim_guarded(uop *b, uop *g, uop *r, uop *lane, int lanes) {
  if (!g) return b;
  if (reads_vector(g)) return NULL;
  uop *any = NULL;
  if (lane && uop_uses(g, lane)) {  /* a vector condition: the loop runs when it holds in some lane */
    if (lanes > 16) return NULL;
    for (int l = 0; l < lanes; l++) {
      uop *gl = uop_substitute(g, lane, uop_const_int((tg_dtype)lane->dtype, l));
      any = any ? uop_binary(OP_OR, any, gl) : gl;
    }
  } else {
    any = g;
  }
  uop *z = uop_const_int((tg_dtype)r->dtype, 0);
  return uop_where(any, b ? b : r->src[0], z);
}
