/* expand.c — UPCAST and UNROLL loops become registers.
 *
 * A loop of constant small trip count chosen by the actions is not kept as a loop: every STORE that uses an
 * UPCAST loop u is copied once per value of u (u replaced by the constant), and a REDUCE over an UNROLL loop q
 * becomes one REDUCE (one accumulator) per value of q over its other loops, combined after them. The copies
 * share what does not depend on the loop (nodes are interned); REDUCEs copied with a STORE or by an UNROLL
 * are more accumulators in the same loop nest (the linearizer groups REDUCEs over the same loops).
 *
 * One of these loops, of exactly as many iterations as a machine vector has lanes, is kept instead: every
 * value that depends on it is a vector (the renderer's types). A LOAD or STORE whose index is base + lane is
 * marked as a contiguous vector access (arg.i 1, 2 when aligned; index = base); any other index that depends on the
 * lane is a gather or scatter. The lane is chosen where that gives contiguous accesses: an UPCAST loop with a
 * contiguous store, else an UNROLL loop with contiguous loads. A kernel with a value the vector path does not
 * cover (dtypes other than float32/int32/int64/bool, 8- and 16-bit integers loaded and computed but not
 * stored, float16 loaded to be converted to float32) keeps all its lanes scalar.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"

/* the coefficient of lane in e when e is linear in it (sums and products by constants); false otherwise */
bool lin_coef(uop *e, uop *lane, int64_t *coef) {
  if (e == lane) { *coef = 1; return true; }
  if (!uop_uses(e, lane)) { *coef = 0; return true; }
  int64_t a, b;
  if (e->op == OP_ADD) {
    if (!lin_coef(e->src[0], lane, &a) || !lin_coef(e->src[1], lane, &b)) return false;
    *coef = a + b;
    return true;
  }
  if (e->op == OP_MUL && (uop_is_const(e->src[0]) || uop_is_const(e->src[1]))) {
    int ci = uop_is_const(e->src[0]) ? 0 : 1;
    if (!lin_coef(e->src[1 - ci], lane, &a)) return false;
    *coef = a * e->src[ci]->arg.i;
    return true;
  }
  return false;
}

bool r_plus_multiple(uop *x, uop *r, int64_t m) {
  if (x == r) return true;
  if (x->op != OP_ADD) return false;
  for (int i = 0; i < 2; i++) {
    uop *o = x->src[1 - i];
    int64_t k;
    bool mult = uop_is_const(o) ? o->arg.i % m == 0
                                : o->op == OP_MUL && uop_is_const(o->src[1]) && o->src[1]->arg.i % m == 0 && !uop_uses(o, r);
    if (mult && lin_coef(x->src[i], r, &k) && k == 1 && r_plus_multiple(x->src[i], r, m)) return true;
  }
  return false;
}

/* (r + m) / g is m / g + r / g when m is a multiple of g and r + m is never negative (C's division truncates:
 * (-1) / 2 is 0, not -1) */
int64_t runs_of(uop *e, uop *r) {
  if (e->op == OP_ADD) {
    bool a = uop_uses(e->src[0], r), b = uop_uses(e->src[1], r);
    return a == b ? 0 : runs_of(e->src[a ? 0 : 1], r);
  }
  if (e->op != OP_IDIV || !uop_is_const(e->src[1]) || e->src[1]->arg.i < 2) return 0;
  int64_t g = e->src[1]->arg.i;
  return r_plus_multiple(e->src[0], r, g) && uop_vmin(e->src[0]) >= 0 ? g : 0;
}

int64_t runs_load(uop *load, uop *idx, uop *r, int lanes) {
  if (load->op != OP_LOAD || load->nsrc != 2 || (load->dtype != TG_FLOAT32 && load->dtype != TG_INT32)) return 0;
  int64_t g = runs_of(idx, r);
  return g && g < lanes && lanes % g == 0 ? g : 0;
}

static bool contiguous(uop *idx, uop *lane) {
  int64_t k;
  return lin_coef(idx, lane, &k) && k == 1;
}

bool every2_load(uop *load, uop *idx, uop *lane) {
  int64_t k;
  return load->op == OP_LOAD && load->dtype == TG_FLOAT32 && load->src[0]->op == OP_PARAM &&
         lin_coef(idx, lane, &k) && k == 2;
}

static uop *fold(uop_op op, uop **v, int n) {
  if (n == 1) return v[0];
  int h = n / 2;
  return uop_binary(op, fold(op, v, h), fold(op, v + h, n - h));
}

/* every REDUCE over q: one REDUCE per value of q over the other loops, combined by a balanced tree */
typedef struct unroll_ctx { uop *q; uop_map memo; bool fail; } unroll_ctx;

static uop *unroll(unroll_ctx *c, uop *u) {
  if (c->fail) return NULL;
  uop *done = umap_get(&c->memo, u);
  if (done) return done;
  int n = u->nsrc;
  uop **src = mem_alloc((size_t)(n + 1) * sizeof *src);
  if (!src) { c->fail = true; return NULL; }
  for (int i = 0; i < n; i++)
    if (!(src[i] = unroll(c, u->src[i]))) c->fail = true;
  uop *out = NULL;
  int qi = -1;
  if (u->op == OP_REDUCE)
    for (int i = 1; i < n; i++)
      if (u->src[i] == c->q) qi = i;
  if (!c->fail && qi > 0) {
    /* one accumulator per copy when loops remain (they share the loop nest: expand.c's top comment), the
     * accumulators reduced into one after it; without loops left, the copies reduced directly. An UNROLL the
     * heuristic marked for one accumulator (aux[1]) gives one REDUCE of the copies' sum, its aux the number of
     * copies: linearize adds them into the accumulator one at a time */
    int64_t k = c->q->src[0]->arg.i;
    bool one = c->q->naux > 1 && c->q->aux[1] == 1 && u->naux <= 1 && u->arg.i == OP_ADD;
    int64_t terms = k * (u->naux == 1 ? u->aux[0] : 1);
    uop **v = mem_alloc((size_t)k * sizeof *v), *value = src[0];
    memmove(src + qi, src + qi + 1, (size_t)(n - qi - 1) * sizeof *src);
    n--;
    if (v) {
      for (int64_t j = 0; j < k && !c->fail; j++) {
        if (!(v[j] = uop_substitute(value, c->q, uop_const_int((tg_dtype)c->q->dtype, j)))) c->fail = true;
        src[0] = v[j];
        if (!c->fail && n > 1 && !one && !(v[j] = uop_new(OP_REDUCE, (tg_dtype)u->dtype, n, src, u->arg, u->naux, u->aux)))
          c->fail = true;
      }
      if (!c->fail && one && n > 1) {
        src[0] = fold((uop_op)u->arg.i, v, (int)k);
        out = src[0] ? uop_new(OP_REDUCE, (tg_dtype)u->dtype, n, src, u->arg, 1, &terms) : NULL;
      } else if (!c->fail) {
        out = fold((uop_op)u->arg.i, v, (int)k);
      }
      free(v);
    } else c->fail = true;
  } else if (!c->fail) {
    out = uop_replace_src(u, n, src);
  }
  free(src);
  if (!out || !umap_put(&c->memo, u, out)) { c->fail = true; return NULL; }
  return out;
}

/* every STORE that uses u copied for u = 0..k-1 */
static uop *upcast(uop *sink, uop *u) {
  int64_t k = u->src[0]->arg.i;
  int cap = sink->nsrc * (int)k, n = 0;
  uop **s = mem_alloc((size_t)cap * sizeof *s);
  if (!s) return NULL;
  bool fail = false;
  for (int i = 0; i < sink->nsrc && !fail; i++) {
    uop *st = sink->src[i];
    if (!uop_uses(st, u)) { s[n++] = st; continue; }
    for (int64_t j = 0; j < k && !fail; j++)
      if (!(s[n++] = uop_substitute(st, u, uop_const_int((tg_dtype)u->dtype, j)))) fail = true;
  }
  uop *r = fail ? NULL : uop_new(OP_SINK, (tg_dtype)sink->dtype, n, s, sink->arg, sink->naux, sink->aux);
  free(s);
  return r;
}

static uop *unroll_range(uop *ast, uop *r) {
  unroll_ctx c = {.q = r};
  uop *out = unroll(&c, ast);
  umap_free(&c.memo);
  return c.fail ? NULL : out;
}

static uop *expand_range(uop *ast, uop *r) { return r->aux[0] == AX_UPCAST ? upcast(ast, r) : unroll_range(ast, r); }

/* ---- the vector lane -------------------------------------------------------------------------------------- */

static bool vec_dtype(int dt) { return dt == TG_FLOAT32 || dt == TG_INT32 || dt == TG_INT64 || dt == TG_BOOL; }

/* 8- and 16-bit integers have vector lanes too, held in int32 lanes (the renderer narrows what could leave the
 * type's range): a quantized weight's bytes are loaded as one vector, unpacked with shifts and masks and
 * converted to float32 lanes. Loaded, computed and converted only: not stored or reduced as vectors */
static bool small_int(int dt) { return dt == TG_INT8 || dt == TG_UINT8 || dt == TG_INT16 || dt == TG_UINT16; }

/* whether every vector value of the marked kernel (what uses the lane, contiguous accesses, what uses them)
 * has a vector form in the renderers: float32, int32, int64 (indices), bool and small integer lanes */
static bool vec_supported(uop *ast, uop *lane) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return false;
  bool ok = true;
  uop_map vec = {0};
  for (int i = 0; i < n && ok; i++) {
    uop *u = order[i];
    bool v = u == lane || ((u->op == OP_LOAD || u->op == OP_STORE) && u->arg.i > 0), over = false;
    for (int j = 0; j < u->nsrc && !v; j++) v = umap_get(&vec, u->src[j]) != NULL;
    if (u->op == OP_REDUCE)
      for (int j = 1; j < u->nsrc; j++) over |= u->src[j] == lane;
    if (!v || u->op == OP_SINK) continue;
    if (over && !umap_get(&vec, u->src[0])) ok = false;
    if (!over && !umap_put(&vec, u, (void *)1)) ok = false;
    if (u->op == OP_STORE) { ok &= vec_dtype(u->src[2]->dtype) && u->src[2]->dtype != TG_BOOL; continue; }
    if (u->dtype == TG_FLOAT16) {  /* loaded (into float32 lanes) to be converted to float32, nothing else */
      ok &= u->op == OP_LOAD;
      continue;
    }
    if (u->op == OP_CAST && u->src[0]->dtype == TG_FLOAT16) {
      ok &= u->dtype == TG_FLOAT32;
      continue;
    }
    if (small_int(u->dtype)) {
      if (u->op == OP_REDUCE || u->op == OP_DEFINE_ACC) ok = false;
      if (u->op == OP_CAST) ok &= vec_dtype(u->src[0]->dtype) || small_int(u->src[0]->dtype);
      if (u->op == OP_BITCAST) ok &= small_int(u->src[0]->dtype) && tg_dtype_size((tg_dtype)u->src[0]->dtype) == tg_dtype_size((tg_dtype)u->dtype);
      continue;
    }
    if (!vec_dtype(u->dtype) || (u->op == OP_LOAD && u->dtype == TG_BOOL) || (u->op == OP_REDUCE && u->dtype == TG_BOOL)) ok = false;
    if (u->op == OP_CAST) ok &= vec_dtype(u->src[0]->dtype) || small_int(u->src[0]->dtype);
    if (u->op == OP_BITCAST) ok &= u->dtype != TG_INT64 && u->dtype != TG_BOOL && vec_dtype(u->src[0]->dtype) &&
                                   u->src[0]->dtype != TG_INT64 && u->src[0]->dtype != TG_BOOL;
  }
  umap_free(&vec);
  free(order);
  return ok;
}

/* whether the integer u is a multiple of k for every value of its loops */
static bool divisible(uop *u, int64_t k) {
  if (uop_is_const(u)) return u->arg.i % k == 0;
  if (u->op == OP_ADD) return divisible(u->src[0], k) && divisible(u->src[1], k);
  if (u->op == OP_MUL) return divisible(u->src[0], k) || divisible(u->src[1], k);
  return false;
}

/* LOADs and STOREs at base + lane become contiguous vector accesses of `lanes` elements at base (arg.i 1,
 * or 2 when base is known aligned to the vector); an unmasked LOAD at base + lane / g, runs of g (LOAD_RUNS) */
typedef struct mark_ctx { uop *lane; int lanes; uop_map memo; bool fail; } mark_ctx;

static uop *mark_access(mark_ctx *c, uop *u) {
  if (c->fail) return NULL;
  uop *done = umap_get(&c->memo, u);
  if (done) return done;
  uop *src[TG_MAX_DIMS + 64];
  uop **s = u->nsrc <= (int)(sizeof src / sizeof *src) ? src : mem_alloc((size_t)u->nsrc * sizeof *s);
  if (!s) { c->fail = true; return NULL; }
  for (int i = 0; i < u->nsrc; i++)
    if (!(s[i] = mark_access(c, u->src[i]))) c->fail = true;
  uop *out = NULL;
  if (!c->fail) {
    int64_t g;
    int vi = u->op == OP_LOAD ? 2 : 3;
    (void)vi;  /* a mask that depends on the lane stays: the renderer loads or stores the whole vector when
                * every lane is valid, lane by lane otherwise */
    if ((u->op == OP_LOAD || u->op == OP_STORE) && u->arg.i == 0 && contiguous(s[1], c->lane)) {
      s[1] = uop_simplify(uop_substitute(s[1], c->lane, uop_const_int((tg_dtype)c->lane->dtype, 0)));
      /* aligned when the buffer is a PACK buffer (64-byte aligned) and the index a multiple of the lanes;
       * the kernel's parameters may be user memory (tg_from_blob) with no alignment promised */
      bool local = u->op == OP_LOAD && u->src[0]->op == OP_STORE && u->src[0]->src[0]->op == OP_DEFINE_LOCAL;
      int64_t kind = s[1] && local && divisible(s[1], c->lanes) ? 2 : 1;
      out = s[1] ? uop_new((uop_op)u->op, (tg_dtype)u->dtype, u->nsrc, s, (uop_arg){.i = kind}, u->naux, u->aux) : NULL;
    } else if (u->arg.i == 0 && every2_load(u, s[1], c->lane)) {
      /* every second element: two loads and a shuffle (render/c.c), not a gather of `lanes` */
      s[1] = uop_simplify(uop_substitute(s[1], c->lane, uop_const_int((tg_dtype)c->lane->dtype, 0)));
      out = s[1] ? uop_new(OP_LOAD, TG_FLOAT32, u->nsrc, s, (uop_arg){.i = LOAD_EVERY2}, u->naux, u->aux) : NULL;
    } else if (u->arg.i == 0 && (g = runs_load(u, s[1], c->lane, c->lanes))) {
      /* lanes / g consecutive values, each repeated g times (render/c.c) */
      s[1] = uop_simplify(uop_substitute(s[1], c->lane, uop_const_int((tg_dtype)c->lane->dtype, 0)));
      out = s[1] ? uop_new(OP_LOAD, (tg_dtype)u->dtype, 2, s, (uop_arg){.i = LOAD_RUNS(g)}, u->naux, u->aux) : NULL;
    } else {
      out = uop_replace_src(u, u->nsrc, s);
    }
  }
  if (s != src) free(s);
  if (!out || !umap_put(&c->memo, u, out)) { c->fail = true; return NULL; }
  return out;
}

/* a score for r as the lane: contiguous accesses count for it, gathers against it. A load inside a REDUCE
 * runs once per iteration of the reduce, the store after it once: a convolution vectorized over its output
 * channels reads its packed weight contiguously every step and scatters its result once (2304 steps in
 * ResNet's 3x3 over 256 channels), so it takes the lane even with the scatter */
static int lane_score(uop *ast, uop *r, bool every2) {
  int n, score = 0;
  uop **order = uop_toposort(ast, &n);
  if (!order) return -1000;
  uop_map hot = {0};
  for (int i = 0; i < n; i++) {
    if (order[i]->op != OP_REDUCE) continue;
    int m;
    uop **sub = uop_toposort(order[i]->src[0], &m);
    for (int j = 0; sub && j < m; j++)
      if (sub[j]->op == OP_LOAD) umap_put(&hot, sub[j], (void *)1);
    free(sub);
  }
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    if ((u->op != OP_LOAD && u->op != OP_STORE) || !uop_uses(u->src[1], r)) continue;
    int64_t k;
    bool lin = lin_coef(u->src[1], r, &k);
    int w = u->op == OP_STORE ? 4 : umap_get(&hot, u) ? 8 : 2;
    /* every second element: two loads and a shuffle, half a contiguous load's worth, where allowed */
    score += lin && k == 1 ? w : every2 && every2_load(u, u->src[1], r) ? w / 2 : -w;
  }
  umap_free(&hot);
  free(order);
  return score;
}

/* Other loops of the kernel that no value uses together with the lane's loop share the lane: their inner
 * `lanes` iterations become the same RANGE. A value then is a vector along at most one of them, and a REDUCE
 * over the lane binds it, so what it means inside the reduce never meets what it means outside. A row kernel
 * (softmax: the row's max, its sum of exps, its outputs) so has vector loads in all three loops. rs[0..*nr)
 * are the loops left to expand (the split loops' outer parts replace them); cand is the lane's own loop. */
static uop *merge_lanes(uop *ast, uop *lane, uop *cand, uop **rs, int *nr, int lanes) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return NULL;
  loop_sets ls = {0};
  uint64_t group = (cand->arg.i < 64 ? 1ULL << cand->arg.i : 0) | (lane->arg.i < 64 ? 1ULL << lane->arg.i : 0);
  uint64_t with[64] = {0};  /* the loops each loop is used together with */
  for (int i = 0; i < n; i++) {
    uint64_t f = loops_free(&ls, order[i]);
    for (int b = 0; b < 64; b++)
      if (f >> b & 1) with[b] |= f;
  }
  free(order);
  loop_sets_free(&ls);
  if (ls.fail) return ast;  /* out of memory: the other loops stay scalar copies */
  for (int i = 0; i < *nr && ast; i++) {
    uop *q = rs[i];
    int64_t id = q->arg.i;
    if (q == lane || id >= 64 || q->src[0]->arg.i % lanes || lane_score(ast, q, false) <= 0) continue;
    uint64_t together = 0;
    for (int b = 0; b < 64; b++)
      if (group >> b & 1) together |= with[b];
    if (together >> id & 1) continue;
    group |= 1ULL << id;
    if (q->src[0]->arg.i > lanes) {
      uop *outer, *inner;
      ast = split_range(ast, q, lanes, (int)q->aux[0], &outer, &inner);
      ast = ast ? uop_substitute(ast, inner, lane) : NULL;
      rs[i] = outer;
    } else {
      ast = uop_substitute(ast, q, lane);
      rs[i--] = rs[--*nr];
    }
  }
  return ast;
}

uop *expand_kernel(uop *ast, int vec_bytes, uop **lane_out) {
  *lane_out = NULL;
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return NULL;
  uop *rs[KS_MAX_AXES];
  int nr = 0;
  for (int i = 0; i < n && nr < KS_MAX_AXES; i++)
    if (order[i]->op == OP_RANGE && (order[i]->aux[0] == AX_UPCAST || order[i]->aux[0] == AX_UNROLL)) rs[nr++] = order[i];
  free(order);
  if (!nr) return ast;
  int lanes = vec_bytes / 4;
  uop *cand = NULL, *split_ast = NULL, *split_outer = NULL, *split_lane = NULL;
  int best = 0;
  /* a loop longer than the vector is scored by its inner `lanes` iterations, split off as the lane would be:
   * a block of 32 packed as two runs of 16 (Q4_0's low nibbles, then its high ones: byte j % 16) reads
   * contiguously along its inner 16 only */
  for (int i = 0; i < nr && lanes >= 2; i++) {
    if (rs[i]->src[0]->arg.i % lanes) continue;
    uop *a = ast, *outer = NULL, *in = rs[i];
    if (rs[i]->src[0]->arg.i > lanes && !(a = split_range(ast, rs[i], lanes, (int)rs[i]->aux[0], &outer, &in))) return NULL;
    /* loads of every second element make a vector only along an UPCAST of two vectors or more: the heuristic
     * gives a long row that (heuristic.c's every2_row); a shorter one over such loads is its scalar chains */
    bool every2 = rs[i]->aux[0] == AX_UPCAST && rs[i]->src[0]->arg.i >= 2 * lanes;
    int s = lane_score(a, in, every2) + (rs[i]->aux[0] == AX_UPCAST);
    if (s > best) { best = s; cand = rs[i]; split_ast = a; split_outer = outer; split_lane = in; }
  }
  uop *lane = NULL;
  if (cand) {
    if (cand->src[0]->arg.i > lanes) {
      ast = split_ast;
      lane = split_lane;
      for (int i = 0; i < nr; i++)
        if (rs[i] == cand) rs[i] = split_outer;
    } else {
      lane = cand;
      for (int i = 0; i < nr; i++)
        if (rs[i] == cand) rs[i] = rs[--nr];
    }
  }
  if (lane && !(ast = merge_lanes(ast, lane, cand, rs, &nr, lanes))) return NULL;
  /* unrolls first: fewer REDUCEs to copy when the upcasts copy the stores */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < nr; i++) {
      if ((rs[i]->aux[0] == AX_UNROLL) != (pass == 0)) continue;
      if (!(ast = expand_range(ast, rs[i]))) return NULL;
    }
  if (!(ast = kernel_simplify(ast))) return NULL;
  if (!lane || !uop_uses(ast, lane)) return ast;
  mark_ctx mc = {.lane = lane, .lanes = lanes};
  uop *out = mark_access(&mc, ast);
  umap_free(&mc.memo);
  if (!out) return NULL;
  if (!vec_supported(out, lane)) {
    /* scalar lanes after all. The lane may be an UPCAST loop of stores and, merged into it, an UNROLL loop of
     * REDUCEs (a row kernel: a max over the row, then the row's outputs): those REDUCEs are unrolled into one
     * accumulator per lane combined after the loop, and only then are the stores copied per lane (copying
     * first would leave each copy the max of its own lane, not of the row: argmin of float16 tanh was wrong) */
    ast = unroll_range(ast, lane);
    if (ast && uop_uses(ast, lane)) ast = upcast(ast, lane);
    return ast ? kernel_simplify(ast) : NULL;
  }
  *lane_out = lane;
  return out;
}
