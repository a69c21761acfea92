/* symbolic.c — the simplifier for integer index expressions, as rules for the rewrite engine.
 *
 * Movement ops become index arithmetic (reshape: div/mod, pad: masks); this pass makes that arithmetic
 * cheap again: constant folding, value ranges (vmin/vmax) that fold comparisons and dead masks, sums
 * kept in a canonical order with like terms merged, and div/mod folding ((a*6+b)//6 -> a when 0<=b<6,
 * (x//6)*6 + x%6 -> x).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

/* ---- value ranges ------------------------------------------------------------------------------------- */

static int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? INT64_MAX : INT64_MIN;
  return r;
}

static int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return (a > 0) == (b > 0) ? INT64_MAX : INT64_MIN;
  return r;
}

static int64_t min4(int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t m = a < b ? a : b;
  m = m < c ? m : c;
  return m < d ? m : d;
}
static int64_t max4(int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t m = a > b ? a : b;
  m = m > c ? m : c;
  return m > d ? m : d;
}

static void dtype_range(tg_dtype dt, int64_t *lo, int64_t *hi) {
  if (dt == TG_BOOL) { *lo = 0; *hi = 1; return; }
  if (dt == TG_UINT64 || dt == TG_INT64 || !dtype_is_int(dt)) { *lo = dt == TG_UINT64 ? 0 : INT64_MIN; *hi = INT64_MAX; return; }
  *lo = (int64_t)dtype_min(dt);
  *hi = (int64_t)dtype_max(dt);
}

static void compute_range(uop *u) {
  int64_t lo, hi;
  dtype_range((tg_dtype)u->dtype, &lo, &hi);
  uop *a = u->nsrc > 0 ? u->src[0] : NULL, *b = u->nsrc > 1 ? u->src[1] : NULL;
  bool intish = dtype_is_int((tg_dtype)u->dtype) || u->dtype == TG_BOOL;
  if (!intish) goto done;
  switch (u->op) {
    case OP_CONST: lo = hi = u->arg.i; break;
    case OP_RANGE: lo = 0; hi = uop_vmax(a) - 1; if (hi < 0) hi = 0; break;
    case OP_CORE_ID: lo = 0; hi = 1023; break;
    case OP_ADD: lo = sat_add(uop_vmin(a), uop_vmin(b)); hi = sat_add(uop_vmax(a), uop_vmax(b)); break;
    case OP_MUL: {
      int64_t p1 = sat_mul(uop_vmin(a), uop_vmin(b)), p2 = sat_mul(uop_vmin(a), uop_vmax(b));
      int64_t p3 = sat_mul(uop_vmax(a), uop_vmin(b)), p4 = sat_mul(uop_vmax(a), uop_vmax(b));
      lo = min4(p1, p2, p3, p4);
      hi = max4(p1, p2, p3, p4);
      break;
    }
    case OP_NEG:
      if (uop_vmin(a) == INT64_MIN) break;
      lo = -uop_vmax(a);
      hi = -uop_vmin(a);
      break;
    case OP_IDIV:
      if (uop_is_const(b) && b->arg.i > 0) { lo = uop_vmin(a) / b->arg.i; hi = uop_vmax(a) / b->arg.i; }
      break;
    case OP_MOD:
      if (uop_is_const(b) && b->arg.i > 0) {
        int64_t c = b->arg.i;
        if (uop_vmin(a) >= 0) {
          lo = 0;
          hi = uop_vmax(a) < c ? uop_vmax(a) : c - 1;
          if (uop_vmax(a) < c) lo = uop_vmin(a);
        } else {
          lo = -(c - 1);
          hi = c - 1;
        }
      }
      break;
    case OP_MAX:
      lo = uop_vmin(a) > uop_vmin(b) ? uop_vmin(a) : uop_vmin(b);
      hi = uop_vmax(a) > uop_vmax(b) ? uop_vmax(a) : uop_vmax(b);
      break;
    case OP_CMPLT:
      if (dtype_is_float((tg_dtype)a->dtype)) break;
      lo = uop_vmax(a) < uop_vmin(b);
      hi = uop_vmin(a) < uop_vmax(b);
      break;
    case OP_CMPNE: case OP_CMPEQ:
      if (dtype_is_float((tg_dtype)a->dtype)) break;
      if (uop_vmax(a) < uop_vmin(b) || uop_vmin(a) > uop_vmax(b)) lo = hi = u->op == OP_CMPNE;
      else if (uop_vmin(a) == uop_vmax(a) && uop_vmin(b) == uop_vmax(b)) lo = hi = u->op == OP_CMPEQ;
      break;
    case OP_AND:
      if (u->dtype == TG_BOOL) { lo = uop_vmin(a) && uop_vmin(b); hi = uop_vmax(a) && uop_vmax(b); }
      else if (uop_vmin(a) >= 0 && uop_vmin(b) >= 0) { lo = 0; hi = uop_vmax(a) < uop_vmax(b) ? uop_vmax(a) : uop_vmax(b); }
      break;
    case OP_OR:
      if (u->dtype == TG_BOOL) { lo = uop_vmin(a) || uop_vmin(b); hi = uop_vmax(a) || uop_vmax(b); }
      break;
    case OP_SHR:
      if (uop_vmin(a) >= 0 && uop_is_const(b) && b->arg.i >= 0 && b->arg.i < 63) {
        lo = uop_vmin(a) >> b->arg.i;
        hi = uop_vmax(a) >> b->arg.i;
      }
      break;
    case OP_WHERE: {
      uop *c = u->src[2];
      if (uop_vmin(a) == 1) { lo = uop_vmin(b); hi = uop_vmax(b); }
      else if (uop_vmax(a) == 0) { lo = uop_vmin(c); hi = uop_vmax(c); }
      else { lo = uop_vmin(b) < uop_vmin(c) ? uop_vmin(b) : uop_vmin(c); hi = uop_vmax(b) > uop_vmax(c) ? uop_vmax(b) : uop_vmax(c); }
      break;
    }
    case OP_CAST:
      if (dtype_is_int((tg_dtype)a->dtype) || a->dtype == TG_BOOL) {
        int64_t l2, h2;
        dtype_range((tg_dtype)u->dtype, &l2, &h2);
        if (uop_vmin(a) >= l2 && uop_vmax(a) <= h2) { lo = uop_vmin(a); hi = uop_vmax(a); }
      }
      break;
    default: break;
  }
  {
    int64_t dlo, dhi;  /* a range past the dtype's means the value wraps: know nothing then */
    dtype_range((tg_dtype)u->dtype, &dlo, &dhi);
    if (lo < dlo || hi > dhi) { lo = dlo; hi = dhi; }
  }
done:
  u->vmin = lo;
  u->vmax = hi;
  u->has_range = true;
}

int64_t uop_vmin(uop *u) {
  if (!u->has_range) compute_range(u);
  return u->vmin;
}

int64_t uop_vmax(uop *u) {
  if (!u->has_range) compute_range(u);
  return u->vmax;
}

/* Whether the integer sum or product u may have wrapped around its dtype on the way: its exact range, or that
 * of a sum or product it is made of, passes the dtype's. Sums and products are right modulo 2^bits, so the
 * rules that only regroup them hold either way, but comparisons and div/mod reason about true integers: for a
 * uint8 x, (x + 255) < 1 is x == 0 wrapped, not x < -254. Index arithmetic has known small ranges and never
 * wraps; data arithmetic in narrow or 64-bit types may. */
static bool may_wrap(uop *u) {
  if (u->op != OP_ADD && u->op != OP_MUL && u->op != OP_NEG) return false;
  uop *a = u->src[0], *b = u->nsrc > 1 ? u->src[1] : NULL;
  int64_t lo, hi, dlo, dhi;
  dtype_range((tg_dtype)u->dtype, &dlo, &dhi);
  if (u->op == OP_ADD) {
    lo = sat_add(uop_vmin(a), uop_vmin(b));
    hi = sat_add(uop_vmax(a), uop_vmax(b));
  } else if (u->op == OP_MUL) {
    int64_t p1 = sat_mul(uop_vmin(a), uop_vmin(b)), p2 = sat_mul(uop_vmin(a), uop_vmax(b));
    int64_t p3 = sat_mul(uop_vmax(a), uop_vmin(b)), p4 = sat_mul(uop_vmax(a), uop_vmax(b));
    lo = min4(p1, p2, p3, p4);
    hi = max4(p1, p2, p3, p4);
  } else {
    if (uop_vmin(a) == INT64_MIN) return true;
    lo = -uop_vmax(a);
    hi = -uop_vmin(a);
  }
  /* a saturated bound is an int64 overflow */
  if (lo < dlo || hi > dhi || lo == INT64_MIN || hi == INT64_MAX) return true;
  return may_wrap(a) || (b && may_wrap(b));
}

/* ---- constant folding ----------------------------------------------------------------------------------- */

static uop *fold_int(uop *u, uop **s) {
  tg_dtype dt = (tg_dtype)u->dtype;
  int64_t a = s[0]->arg.i, b = u->nsrc > 1 ? s[1]->arg.i : 0, r;
  bool uns = dtype_is_unsigned((tg_dtype)s[0]->dtype);
  switch (u->op) {
    case OP_NEG: r = (int64_t)(0 - (uint64_t)a); break;
    case OP_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
    case OP_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
    case OP_IDIV:
      if (b == 0 || (a == INT64_MIN && b == -1)) return NULL;
      r = uns ? (int64_t)((uint64_t)a / (uint64_t)b) : a / b;
      break;
    case OP_MOD:
      if (b == 0 || (a == INT64_MIN && b == -1)) return NULL;
      r = uns ? (int64_t)((uint64_t)a % (uint64_t)b) : a % b;
      break;
    case OP_MAX: r = uns ? ((uint64_t)a > (uint64_t)b ? a : b) : (a > b ? a : b); break;
    case OP_CMPLT: r = uns ? (uint64_t)a < (uint64_t)b : a < b; break;
    case OP_CMPNE: r = a != b; break;
    case OP_CMPEQ: r = a == b; break;
    case OP_AND: r = a & b; break;
    case OP_OR: r = a | b; break;
    case OP_XOR: r = a ^ b; break;
    case OP_SHL: if (b < 0 || b > 63) return NULL; r = (int64_t)((uint64_t)a << b); break;
    case OP_SHR: if (b < 0 || b > 63) return NULL; r = uns ? (int64_t)((uint64_t)a >> b) : a >> b; break;
    default: return NULL;
  }
  return uop_const_int(dt, dtype_wrap_int(dt, r));
}

static uop *rule_fold_const(void *ctx, uop *u, uop **cap) {
  if (!uop_is_alu((uop_op)u->op)) return NULL;
  for (int i = 0; i < u->nsrc; i++)
    if (!uop_is_const(u->src[i])) return NULL;
  tg_dtype dt = (tg_dtype)u->dtype;
  uop *a = u->src[0];
  if (u->op == OP_WHERE) return uop_const_value(a) != 0 ? u->src[1] : u->src[2];
  if (u->op == OP_CAST) return uop_const(dt, uop_const_value(a));
  if (u->op == OP_BITCAST || u->op == OP_POW) return NULL;
  bool ints = !dtype_is_float((tg_dtype)a->dtype);
  if (ints) return fold_int(u, u->src);
  double x = uop_const_value(a), y = u->nsrc > 1 ? uop_const_value(u->src[1]) : 0, r;
  switch (u->op) {
    case OP_NEG: r = -x; break;
    case OP_ADD: r = x + y; break;
    case OP_MUL: r = x * y; break;
    case OP_FDIV: r = x / y; break;
    case OP_MAX: r = x > y || isnan(x) ? x : y; break;
    case OP_CMPLT: r = x < y; break;
    case OP_CMPNE: r = x != y; break;
    case OP_CMPEQ: r = x == y; break;
    case OP_SQRT: r = sqrt(x); break;
    case OP_RECIP: r = 1.0 / x; break;
    case OP_EXP2: r = exp2(x); break;
    case OP_LOG2: r = log2(x); break;
    case OP_SIN: r = sin(x); break;
    case OP_TRUNC: r = trunc(x); break;
    default: return NULL;
  }
  return uop_const(dt, r);
}

/* an integer node whose value range is one value is that value: folds dead masks and div/mod of small ranges */
static uop *rule_fold_range(void *ctx, uop *u, uop **cap) {
  if (u->op == OP_RANGE) return uop_is_const(u->src[0]) && u->src[0]->arg.i == 1 ? uop_const_int((tg_dtype)u->dtype, 0) : NULL;
  if (!uop_is_alu((uop_op)u->op)) return NULL;
  tg_dtype dt = (tg_dtype)u->dtype;
  if (!dtype_is_int(dt) && dt != TG_BOOL) return NULL;
  if (uop_vmin(u) != uop_vmax(u)) return NULL;
  return uop_const_int(dt, uop_vmin(u));
}

static bool is_intish(const uop *u) { return dtype_is_int((tg_dtype)u->dtype); }

static uop *rule_identity(void *ctx, uop *u, uop **cap) { return cap[0]; }
static uop *rule_zero_int(void *ctx, uop *u, uop **cap) {
  return is_intish(u) ? uop_const_int((tg_dtype)u->dtype, 0) : NULL;
}
static uop *rule_false_int(void *ctx, uop *u, uop **cap) {
  return is_intish(cap[0]) || cap[0]->dtype == TG_BOOL ? uop_const_int(TG_BOOL, 0) : NULL;
}
static uop *rule_true_int(void *ctx, uop *u, uop **cap) {
  return is_intish(cap[0]) || cap[0]->dtype == TG_BOOL ? uop_const_int(TG_BOOL, 1) : NULL;
}
static uop *rule_bool_and(void *ctx, uop *u, uop **cap) {  /* (AND x c) for bools */
  if (u->dtype != TG_BOOL) return NULL;
  return cap[1]->arg.i ? cap[0] : cap[1];
}
/* x & (2^k - 1) for 0 <= x < 2^k is x (a byte's high nibble, x >> 4 of a uint8, masked with 15) */
static uop *rule_and_mask(void *ctx, uop *u, uop **cap) {
  uop *x = cap[0];
  int64_t c = cap[1]->arg.i;
  if (!is_intish(u) || c < 0 || (c & (c + 1)) || uop_vmin(x) < 0 || uop_vmax(x) > c) return NULL;
  return x;
}
static uop *rule_bool_or(void *ctx, uop *u, uop **cap) {
  if (u->dtype != TG_BOOL) return NULL;
  return cap[1]->arg.i ? cap[1] : cap[0];
}
static uop *rule_where_const(void *ctx, uop *u, uop **cap) { return cap[0]->arg.i ? cap[1] : cap[2]; }
/* bools between constants: where(c, true, false) -> c, where(c, false, true) -> c == false (a mask built as
 * where(cond, 0, 1) is then a comparison that codegen/trim.c can read) */
static uop *rule_where_bool(void *ctx, uop *u, uop **cap) {
  if (u->dtype != TG_BOOL || cap[0]->dtype != TG_BOOL || (cap[1]->arg.i != 0) == (cap[2]->arg.i != 0)) return NULL;
  return cap[1]->arg.i ? cap[0] : uop_binary(OP_CMPEQ, cap[0], cap[1]);
}
/* a bool against a constant: x == true, x != false, x ^ false -> x; (y == false) == false -> y; x != true ->
 * x == false (one form of not) */
static uop *rule_bool_cmp(void *ctx, uop *u, uop **cap) {
  uop *x = cap[0], *c = cap[1];
  if (x->dtype != TG_BOOL || c->dtype != TG_BOOL) return NULL;
  bool keep = u->op == OP_CMPEQ ? c->arg.i != 0 : c->arg.i == 0;  /* x itself, else its negation */
  if (keep) return x;
  if (u->op == OP_XOR) return NULL;
  if (x->op == OP_CMPEQ && x->src[0]->dtype == TG_BOOL && uop_is_const(x->src[1]) && x->src[1]->arg.i == 0)
    return x->src[0];
  return u->op == OP_CMPNE ? uop_binary(OP_CMPEQ, x, uop_const_int(TG_BOOL, 0)) : NULL;
}
/* (WHERE c (LOAD p i g) 0) -> the load when its gate g implies c (g is c, or c AND something): a gated load
 * reads 0 where its gate is false (a pad's mask applied twice in every tap of a padded convolution) */
static uop *rule_where_gated_load(void *ctx, uop *u, uop **cap) {
  uop *c = u->src[0], *l = u->src[1], *z = u->src[2];
  if (l->op != OP_LOAD || l->nsrc != 3 || !uop_is_const(z) || uop_const_value(z) != 0) return NULL;
  uop *g = l->src[2];
  return g == c || (g->op == OP_AND && (g->src[0] == c || g->src[1] == c)) ? l : NULL;
}
/* a load or store whose gate is always true is not gated: the renderer then keeps a reused vector load in a
 * register (a padded convolution's interior row loads came out gated by a folded `1`) */
static uop *rule_true_gate(void *ctx, uop *u, uop **cap) {
  uop *g = u->src[u->nsrc - 1];
  if (g->dtype != TG_BOOL || !g->arg.i) return NULL;
  return uop_new_shaped((uop_op)u->op, (tg_dtype)u->dtype, u->nsrc - 1, u->src, u->arg, u->naux, u->aux, u->ndim,
                        u->shape);
}
/* a gated load whose gate is always false reads 0 (a padded convolution's tap beyond the image's edge, once an
 * UNROLL of the taps and an UPCAST of the pixels make the edge a constant): a product with it is 0 and a sum
 * with it is the other term. As trim.c's masked factor, the product is 0 even where the other factor is
 * infinite: the term is the padding's, which the op defines as 0 */
static bool false_gated(const uop *u) {
  return u->op == OP_LOAD && u->nsrc == 3 && uop_is_const(u->src[2]) && u->src[2]->dtype == TG_BOOL && !u->src[2]->arg.i;
}
static uop *rule_false_gate_mul(void *ctx, uop *u, uop **cap) {
  return false_gated(u->src[0]) || false_gated(u->src[1]) ? uop_const((tg_dtype)u->dtype, 0) : NULL;
}
static uop *rule_false_gate_add(void *ctx, uop *u, uop **cap) {
  return false_gated(u->src[1]) ? u->src[0] : false_gated(u->src[0]) ? u->src[1] : NULL;
}
static uop *rule_cast_noop(void *ctx, uop *u, uop **cap) { return cap[0]->dtype == u->dtype ? cap[0] : NULL; }

/* ---- sums: flatten, merge like terms, fold div/mod pairs, canonical order ------------------------------ */

typedef struct term { uop *x; int64_t k; } term;  /* k * x; x NULL for the constant */

typedef struct sum { term *t; int n, cap; int64_t c; bool ok; } sum;

static void sum_push(sum *s, uop *x, int64_t k) {
  if (!s->ok) return;
  for (int i = 0; i < s->n; i++)
    if (s->t[i].x == x) { s->t[i].k += k; return; }
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 8;
    term *nt = mem_realloc(s->t, (size_t)nc * sizeof *nt);
    if (!nt) { s->ok = false; return; }
    s->t = nt;
    s->cap = nc;
  }
  s->t[s->n++] = (term){x, k};
}

static void sum_collect(sum *s, uop *u, int64_t k) {
  if (u->op == OP_ADD) { sum_collect(s, u->src[0], k); sum_collect(s, u->src[1], k); return; }
  if (u->op == OP_CONST) { s->c += k * u->arg.i; return; }
  if (u->op == OP_MUL && uop_is_const(u->src[1])) { sum_collect(s, u->src[0], k * u->src[1]->arg.i); return; }
  if (u->op == OP_NEG) { sum_collect(s, u->src[0], -k); return; }
  sum_push(s, u, k);
}

static int cmp_term(const void *a, const void *b) {
  uint64_t ha = ((const term *)a)->x->hash, hb = ((const term *)b)->x->hash;
  return ha < hb ? -1 : ha > hb;
}

static uop *term_node(tg_dtype dt, uop *x, int64_t k) {
  return k == 1 ? x : uop_binary(OP_MUL, x, uop_const_int(dt, k));
}

static uop *sum_build(tg_dtype dt, term *t, int n, int64_t c) {
  uop *r = NULL;
  for (int i = 0; i < n; i++) {
    if (t[i].k == 0) continue;
    uop *x = term_node(dt, t[i].x, t[i].k);
    r = r ? uop_binary(OP_ADD, r, x) : x;
  }
  if (!r) return uop_const_int(dt, c);
  return c ? uop_binary(OP_ADD, r, uop_const_int(dt, c)) : r;
}

/* (x//c)*k*c + (x%c)*k -> x*k, and ((x//a)%b)*k*a + (x%a)*k -> (x%(a*b))*k: a row of a (.., b, a) view read
 * through its (.., b*a) reshape (a Q4_0 weight's 2 x 16 values stored as a row of 32) */
static void sum_merge_divmod(sum *s) {
  for (int i = 0; i < s->n; i++) {
    uop *m = s->t[i].x;
    if (m->op != OP_MOD || !uop_is_const(m->src[1]) || m->src[0]->op != OP_IDIV || !uop_is_const(m->src[0]->src[1]) ||
        s->t[i].k == 0)
      continue;
    uop *x = m->src[0]->src[0];
    int64_t a = m->src[0]->src[1]->arg.i, b = m->src[1]->arg.i;
    if (a <= 0 || b <= 0 || s->t[i].k % a || uop_vmin(x) < 0) continue;
    int64_t k = s->t[i].k / a;
    for (int j = 0; j < s->n; j++) {
      uop *r = s->t[j].x;
      if (r->op == OP_MOD && r->src[0] == x && uop_is_const(r->src[1]) && r->src[1]->arg.i == a && s->t[j].k == k) {
        s->t[i].k = 0;
        s->t[j].k = 0;
        sum_push(s, uop_binary(OP_MOD, x, uop_const_int((tg_dtype)x->dtype, a * b)), k);
        return;
      }
    }
  }
  for (int i = 0; i < s->n; i++) {
    uop *d = s->t[i].x;
    if (d->op != OP_IDIV || !uop_is_const(d->src[1]) || s->t[i].k == 0) continue;
    int64_t c = d->src[1]->arg.i;
    if (c <= 0 || s->t[i].k % c) continue;
    int64_t k = s->t[i].k / c;
    for (int j = 0; j < s->n; j++) {
      uop *m = s->t[j].x;
      if (m->op == OP_MOD && m->src[0] == d->src[0] && m->src[1] == d->src[1] && s->t[j].k == k &&
          uop_vmin(d->src[0]) >= 0) {
        s->t[i].k = 0;
        s->t[j].k = 0;
        sum_push(s, d->src[0], k);
        return;
      }
    }
  }
}

static uop *rule_sum(void *ctx, uop *u, uop **cap) {
  if (!is_intish(u)) return NULL;
  sum s = {.ok = true};
  sum_collect(&s, u, 1);
  uop *r = NULL;
  if (s.ok) {
    for (int guard = 0; guard < 4; guard++) sum_merge_divmod(&s);
    int m = 0;
    for (int i = 0; i < s.n; i++)
      if (s.t[i].k) s.t[m++] = s.t[i];
    if (m > 1) qsort(s.t, (size_t)m, sizeof *s.t, cmp_term);
    r = sum_build((tg_dtype)u->dtype, s.t, m, s.c);
  }
  free(s.t);
  return r == u ? NULL : r;
}

/* (x*c1)*c2 -> x*(c1*c2); (a+b)*c -> a*c + b*c (integers) */
static uop *rule_mul_const(void *ctx, uop *u, uop **cap) {
  if (!is_intish(u)) return NULL;
  uop *x = cap[0], *c = cap[1];
  if (x->op == OP_CONST) return NULL;
  if (x->op == OP_MUL && uop_is_const(x->src[1]))
    return uop_binary(OP_MUL, x->src[0], uop_const_int((tg_dtype)u->dtype, x->src[1]->arg.i * c->arg.i));
  if (x->op == OP_ADD) return uop_binary(OP_ADD, uop_binary(OP_MUL, x->src[0], c), uop_binary(OP_MUL, x->src[1], c));
  if (u->src[0] != x) return uop_binary(OP_MUL, x, c);  /* constant on the right */
  return NULL;
}

static int64_t floordiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
static int64_t gcd(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) { int64_t t = a % b; a = b; b = t; }
  return a;
}

/* x = g*y + b with 0 <= b < g and g dividing c (x >= 0, so y >= 0): x // c -> y // (c/g) and x % c ->
 * (y % (c/g))*g + b. An index unrolled by a block of g within a larger one: (32*r + 5) // 256 -> r // 8 (a
 * K-quant's block of 256 read 32 values at a time). g is the largest divisor of c that is the gcd of the
 * coefficients of some of the terms and leaves the others and the constant in [0, g); NULL when none */
static uop *divmod_blocks(const sum *s, tg_dtype dt, int64_t c, bool is_mod) {
  int64_t best = 1;
  for (int i = 0; i < s->n; i++) {
    int64_t g = gcd(s->t[i].k, c);
    if (g <= best || g >= c) continue;
    term *big = mem_alloc((size_t)(s->n + 1) * sizeof *big), *small = mem_alloc((size_t)(s->n + 1) * sizeof *small);
    int nb = 0, ns = 0;
    if (big && small) {
      for (int j = 0; j < s->n; j++) {
        if (s->t[j].k % g == 0) big[nb++] = s->t[j];
        else small[ns++] = s->t[j];
      }
      int64_t cb = floordiv(s->c, g) * g;
      uop *b = sum_build(dt, small, ns, s->c - cb);
      if (nb && b && uop_vmin(b) >= 0 && uop_vmax(b) < g) best = g;
    }
    free(big);
    free(small);
  }
  if (best == 1) return NULL;
  int64_t g = best, cb = floordiv(s->c, g) * g;
  term *big = mem_alloc((size_t)(s->n + 1) * sizeof *big), *small = mem_alloc((size_t)(s->n + 1) * sizeof *small);
  uop *r = NULL;
  if (big && small) {
    int nb = 0, ns = 0;
    for (int j = 0; j < s->n; j++) {
      if (s->t[j].k % g == 0) big[nb++] = (term){s->t[j].x, s->t[j].k / g};
      else small[ns++] = s->t[j];
    }
    uop *y = sum_build(dt, big, nb, cb / g), *m = uop_const_int(dt, c / g);
    r = !is_mod ? uop_binary(OP_IDIV, y, m)
                : uop_binary(OP_ADD, uop_binary(OP_MUL, uop_binary(OP_MOD, y, m), uop_const_int(dt, g)), sum_build(dt, small, ns, s->c - cb));
  }
  free(big);
  free(small);
  return r;
}

/* x // c and x % c for x >= 0, c > 0: take the multiples of c out of the sum */
static uop *divmod_fold(uop *u, bool is_mod) {
  uop *x = u->src[0], *cu = u->src[1];
  if (!is_intish(u) || !uop_is_const(cu) || cu->arg.i <= 0 || uop_vmin(x) < 0 || may_wrap(x)) return NULL;
  int64_t c = cu->arg.i;
  tg_dtype dt = (tg_dtype)u->dtype;
  if (c == 1) return is_mod ? uop_const_int(dt, 0) : x;
  if (is_mod && uop_vmax(x) < c) return x;
  if (x->op == OP_IDIV && !is_mod && uop_is_const(x->src[1]) && x->src[1]->arg.i > 0 && uop_vmin(x->src[0]) >= 0)
    return uop_binary(OP_IDIV, x->src[0], uop_const_int(dt, x->src[1]->arg.i * c));
  if (x->op == OP_MOD && is_mod && uop_is_const(x->src[1]) && x->src[1]->arg.i % c == 0)
    return uop_binary(OP_MOD, x->src[0], cu);
  sum s = {.ok = true};
  sum_collect(&s, x, 1);
  uop *r = NULL;
  if (!s.ok) goto out;
  term *q = mem_alloc((size_t)(s.n + 1) * sizeof *q), *rem = mem_alloc((size_t)(s.n + 1) * sizeof *rem);
  if (!q || !rem) { free(q); free(rem); goto out; }
  int nq = 0, nr = 0;
  int64_t g = c;
  for (int i = 0; i < s.n; i++) {
    if (s.t[i].k % c == 0) q[nq++] = (term){s.t[i].x, s.t[i].k / c};
    else { rem[nr++] = s.t[i]; g = gcd(g, s.t[i].k); }
  }
  int64_t cq = floordiv(s.c, c), cr = s.c - cq * c;
  /* split every coefficient k of a non-negative term into (k/c)*c + k%c: when what is left stays below c
   * the division is exact ((r1 + 13*r0) % 12 -> r1 + r0 for r0 < 2, r1 < 8: windows of convolutions) */
  {
    term *q2 = mem_alloc((size_t)(s.n + 1) * sizeof *q2), *r2 = mem_alloc((size_t)(s.n + 1) * sizeof *r2);
    int n2q = 0, n2r = 0;
    bool ok = q2 && r2;
    for (int i = 0; i < s.n && ok; i++) {
      int64_t k = s.t[i].k, kq = floordiv(k, c), kr = k - kq * c;
      if (kq && uop_vmin(s.t[i].x) < 0) ok = false;
      if (kq) q2[n2q++] = (term){s.t[i].x, kq};
      if (kr) r2[n2r++] = (term){s.t[i].x, kr};
    }
    uop *r2sum = ok ? sum_build(dt, r2, n2r, cr) : NULL;
    bool split = ok && n2q > nq && r2sum && uop_vmin(r2sum) >= 0 && uop_vmax(r2sum) < c;
    if (split) r = is_mod ? r2sum : sum_build(dt, q2, n2q, cq);
    free(q2);
    free(r2);
    if (split) {
      free(q);
      free(rem);
      goto out;
    }
  }
  uop *rsum = sum_build(dt, rem, nr, cr);
  bool changed = nq > 0 || cq != 0;
  if (rsum && uop_vmin(rsum) >= 0) {
    if (is_mod) {
      if (changed) r = uop_binary(OP_MOD, rsum, cu);
      else if (g > 1 && cr % g == 0) {  /* (g*y) % c -> g*(y % (c/g)) */
        for (int i = 0; i < nr; i++) rem[i].k /= g;
        uop *y = sum_build(dt, rem, nr, cr / g);
        r = uop_binary(OP_MUL, uop_binary(OP_MOD, y, uop_const_int(dt, c / g)), uop_const_int(dt, g));
      }
    } else {
      uop *rq = NULL;
      if (changed) rq = uop_binary(OP_IDIV, rsum, cu);
      else if (g > 1 && cr % g == 0) {  /* (g*y) // c -> y // (c/g) */
        for (int i = 0; i < nr; i++) rem[i].k /= g;
        rq = uop_binary(OP_IDIV, sum_build(dt, rem, nr, cr / g), uop_const_int(dt, c / g));
        changed = true;
      }
      if (changed) r = uop_binary(OP_ADD, sum_build(dt, q, nq, cq), rq);
    }
  }
  free(q);
  free(rem);
  if (!r) r = divmod_blocks(&s, dt, c, is_mod);
out:
  free(s.t);
  return r == u ? NULL : r;
}

static uop *rule_idiv(void *ctx, uop *u, uop **cap) { return divmod_fold(u, false); }
static uop *rule_mod(void *ctx, uop *u, uop **cap) { return divmod_fold(u, true); }

/* (x + c) < d -> x < d - c, and c*x < d for c > 0 -> x < ceil(d/c) (integers) */
static uop *rule_cmplt_const(void *ctx, uop *u, uop **cap) {
  uop *x = cap[0], *d = cap[1];
  if (!is_intish(x) || may_wrap(x)) return NULL;
  tg_dtype dt = (tg_dtype)x->dtype;
  if (x->op == OP_ADD && uop_is_const(x->src[1])) {
    int64_t dc, dlo, dhi;  /* d - c must be a value of the dtype too */
    dtype_range(dt, &dlo, &dhi);
    if (__builtin_sub_overflow(d->arg.i, x->src[1]->arg.i, &dc) || dc < dlo || dc > dhi) return NULL;
    return uop_binary(OP_CMPLT, x->src[0], uop_const_int(dt, dc));
  }
  if (x->op == OP_MUL && uop_is_const(x->src[1]) && x->src[1]->arg.i > 0) {
    int64_t c = x->src[1]->arg.i;
    return uop_binary(OP_CMPLT, x->src[0], uop_const_int(dt, -floordiv(-d->arg.i, c)));
  }
  return NULL;
}

static const rule symbolic_rules[] = {
    {"(ADD x 0)", rule_identity},
    {"(MUL x 1)", rule_identity},
    {"(MUL x 0)", rule_zero_int},
    {"(IDIV x 1)", rule_identity},
    {"(SHL x 0)", rule_identity},  /* a shift by an unrolled arange's first value (a nibble's shift of 0) */
    {"(SHR x 0)", rule_identity},
    {"(WHERE _ x x)", rule_identity},
    {"(WHERE c:CONST a b)", rule_where_const},
    {"(WHERE c a:CONST b:CONST)", rule_where_bool},
    {"(CMPEQ x c:CONST)", rule_bool_cmp},
    {"(CMPNE x c:CONST)", rule_bool_cmp},
    {"(XOR x c:CONST)", rule_bool_cmp},
    {"(WHERE _ _ _)", rule_where_gated_load},
    {"(LOAD _ _ g:CONST)", rule_true_gate},
    {"(STORE _ _ _ g:CONST)", rule_true_gate},
    {"(MUL _ _)", rule_false_gate_mul},
    {"(ADD _ _)", rule_false_gate_add},
    {"(CMPLT x x)", rule_false_int},
    {"(CMPNE x x)", rule_false_int},
    {"(CMPEQ x x)", rule_true_int},
    {"(AND x c:CONST)", rule_bool_and},
    {"(AND x c:CONST)", rule_and_mask},
    {"(OR x c:CONST)", rule_bool_or},
    {"(AND x x)", rule_identity},
    {"(OR x x)", rule_identity},
    {"(MAX x x)", rule_identity},
    {"(CAST x)", rule_cast_noop},
    {"(MUL x c:CONST)", rule_mul_const},
    {"(ADD _ _)", rule_sum},
    {"(IDIV _ _)", rule_idiv},
    {"(MOD _ _)", rule_mod},
    {"(CMPLT x d:CONST)", rule_cmplt_const},
    {"_", rule_fold_const},
    {"_", rule_fold_range},
    {NULL, NULL},
};

static matcher *sym;

const matcher *symbolic_matcher(void) {
  if (!sym) sym = matcher_new(symbolic_rules);
  return sym;
}

uop *uop_simplify(uop *root) {
  const matcher *m = symbolic_matcher();
  if (!m) return NULL;
  return graph_rewrite(root, m, NULL, false);
}

void symbolic_shutdown(void) {
  matcher_free(sym);
  sym = NULL;
}
