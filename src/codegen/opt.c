/* opt.c — the optimization actions (see opt.h): each checks that it applies, or says why not, then rewrites
 * the RANGEs of the kernel AST. Nothing here knows a device beyond opt_target. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"

static const char *const names[OPT_COUNT] = {"UPCAST", "UNROLL", "THREAD", "PADTO", "SWAP", "PACK", "LOCAL", "GROUP", "GROUPTOP"};

const char *opt_name(opt_op op) { return op < OPT_COUNT ? names[op] : "?"; }

const char *opts_str(const kernel_state *ks, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < ks->napplied && k + 1 < n; i++) {
    int w = snprintf(buf + k, n - k, "%s%s(%d,%lld)", i ? " " : "", opt_name(ks->applied[i].op), ks->applied[i].axis,
                     (long long)ks->applied[i].arg);
    if (w < 0) break;
    k += (size_t)w;
  }
  return buf;
}

/* ---- graph helpers -------------------------------------------------------------------------------------- */

static bool uses_rec(uop *u, uop *r, uop_map *memo, bool *oom) {
  if (u == r) return true;
  void *m = umap_get(memo, u);
  if (m) return m == (void *)2;
  bool y = false;
  for (int i = 0; i < u->nsrc && !y; i++) y = uses_rec(u->src[i], r, memo, oom);
  if (!umap_put(memo, u, y ? (void *)2 : (void *)1)) *oom = true;
  return y;
}

bool uop_uses_memo(uop *u, uop *r, uop_map *memo) {
  bool oom = false;
  return uses_rec(u, r, memo, &oom);
}

bool uop_uses(uop *u, uop *r) {
  uop_map memo = {0};
  bool oom = false;
  bool y = uses_rec(u, r, &memo, &oom);
  umap_free(&memo);
  return y;
}

int64_t max_range_id(uop *ast) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return -2;
  int64_t m = -1;
  for (int i = 0; i < n; i++)
    if (order[i]->op == OP_RANGE && order[i]->arg.i > m) m = order[i]->arg.i;
  free(order);
  return m;
}

static uop *mk_range(tg_dtype dt, int64_t size, int64_t id, int64_t type) {
  uop *b = uop_const_int(dt, size);
  return b ? uop_new(OP_RANGE, dt, 1, &b, (uop_arg){.i = id}, 1, &type) : NULL;
}

typedef struct rebuild_ctx {
  uop *r, *expr;       /* r -> expr in values */
  uop *outer, *inner;  /* r -> outer, inner in REDUCE range lists (inner NULL: r -> outer) */
  uop_map memo;
  bool fail;
} rebuild_ctx;

static uop *rebuild(rebuild_ctx *c, uop *u) {
  if (c->fail) return NULL;
  if (u == c->r) return c->expr;
  uop *done = umap_get(&c->memo, u);
  if (done) return done;
  uop *s[TG_MAX_DIMS + 8], **src = u->nsrc + 1 <= (int)(sizeof s / sizeof *s) ? s : mem_alloc((size_t)(u->nsrc + 1) * sizeof *src);
  if (!src) { c->fail = true; return NULL; }
  int n = 0;
  for (int i = 0; i < u->nsrc; i++) {
    if (u->op == OP_REDUCE && i >= 1 && u->src[i] == c->r) {
      src[n++] = c->outer;
      if (c->inner) src[n++] = c->inner;
      continue;
    }
    src[n++] = rebuild(c, u->src[i]);
    if (!src[n - 1]) c->fail = true;
  }
  uop *out = c->fail ? NULL : uop_replace_src(u, n, src);
  if (src != s) free(src);
  if (!out || !umap_put(&c->memo, u, out)) { c->fail = true; return NULL; }
  return out;
}

uop *split_range(uop *ast, uop *r, int64_t k, int inner_type, uop **outer, uop **inner) {
  int64_t n = r->src[0]->arg.i, id = max_range_id(ast) + 1;
  if (id == -1) return NULL;  /* out of memory */
  if (id >= 64) {
    tg_set_error(TG_ERR_INTERNAL, "opt: more than 64 loops in one kernel");
    return NULL;
  }
  tg_dtype dt = (tg_dtype)r->dtype;
  uop *o = mk_range(dt, n / k, r->arg.i, r->aux[0]), *in = mk_range(dt, k, id, inner_type);
  if (!o || !in) return NULL;
  uop *expr = uop_binary(OP_ADD, uop_binary(OP_MUL, o, uop_const_int(dt, k)), in);
  rebuild_ctx c = {.r = r, .expr = expr, .outer = o, .inner = in};
  uop *res = expr ? rebuild(&c, ast) : NULL;
  umap_free(&c.memo);
  if (!res) return NULL;
  if (outer) *outer = o;
  if (inner) *inner = in;
  return kernel_simplify(res);
}

/* the simplifier folds a loop of one iteration to 0, also in a REDUCE's range list: such entries are dropped,
 * and a REDUCE left with no loop is its value */
static uop *rule_reduce_consts(void *ctx, uop *u, uop **cap) {
  if (u->op != OP_REDUCE) return NULL;
  uop *s[TG_MAX_DIMS + 64];
  int n = 0;
  bool changed = false;
  for (int i = 0; i < u->nsrc; i++) {
    if (i >= 1 && u->src[i]->op != OP_RANGE) { changed = true; continue; }
    if (n < (int)(sizeof s / sizeof *s)) s[n++] = u->src[i];
  }
  if (!changed) return NULL;
  return n == 1 ? s[0] : uop_new(OP_REDUCE, (tg_dtype)u->dtype, n, s, u->arg, u->naux, u->aux);
}

uop *kernel_simplify(uop *ast) {
  static matcher *m;
  static const rule rules[] = {{"_", rule_reduce_consts}, {NULL, NULL}};
  if (!m && !(m = matcher_new(rules))) return NULL;
  uop *s = uop_simplify(ast);
  return s ? graph_rewrite(s, m, NULL, false) : NULL;
}

/* whether u uses r other than inside a REDUCE over r (where r is bound) */
static bool uses_free(uop *u, uop *r, uop_map *memo, bool *oom) {
  if (u == r) return true;
  void *m = umap_get(memo, u);
  if (m) return m == (void *)2;
  bool y = false;
  if (u->op == OP_REDUCE)
    for (int i = 1; i < u->nsrc; i++)
      if (u->src[i] == r) goto done;
  for (int i = 0; i < u->nsrc && !y; i++) y = uses_free(u->src[i], r, memo, oom);
done:
  if (!umap_put(memo, u, y ? (void *)2 : (void *)1)) *oom = true;
  return y;
}

uint64_t reduce_loops(uop *ast) {
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return ~0ULL;
  loop_sets ls = {0};
  uint64_t all = ~0ULL;
  for (int i = 0; i < n; i++)
    if (order[i]->op == OP_REDUCE) all &= loops_free(&ls, order[i]);
  loop_sets_free(&ls);
  free(order);
  return ls.fail ? ~0ULL : all;
}

/* ---- PADTO: r of size n becomes r' of size m, every load and store that uses it masked with r' < n, every
 * reduce over it given the identity outside ------------------------------------------------------------ */

typedef struct pad_ctx { uop *r; uop *valid; uop_map memo, uses; bool fail; } pad_ctx;

static double reduce_identity(uop_op op, tg_dtype dt) {
  if (op == OP_MUL) return 1;
  if (op == OP_MAX) return dtype_min(dt);
  return 0;
}

/* whether u is exactly 0 wherever valid is false: a load masked by valid (it reads 0 there), or sums and
 * products of such values (0 * 0, not 0 * x: x may be inf). Then a reduce needs no select of its identity,
 * which would keep the multiply and the add from fusing (conv's weight gradient over a padded row) */
static bool zero_outside(uop *u, uop *valid) {
  if (u->op == OP_LOAD)
    return u->nsrc == 3 && (u->src[2] == valid || (u->src[2]->op == OP_AND && (u->src[2]->src[0] == valid ||
                                                                               u->src[2]->src[1] == valid)));
  if (u->op == OP_MUL || u->op == OP_ADD) return zero_outside(u->src[0], valid) && zero_outside(u->src[1], valid);
  return false;
}

static uop *pad_mask(pad_ctx *c, uop *u) {
  if (c->fail) return NULL;
  uop *done = umap_get(&c->memo, u);
  if (done) return done;
  uop *s[TG_MAX_DIMS + 8], **src = u->nsrc <= (int)(sizeof s / sizeof *s) ? s : mem_alloc((size_t)u->nsrc * sizeof *src);
  if (!src) { c->fail = true; return NULL; }
  for (int i = 0; i < u->nsrc; i++)
    if (!(src[i] = pad_mask(c, u->src[i]))) c->fail = true;
  uop *out = NULL;
  if (!c->fail) {
    bool oom = false;
    bool uses = uses_free(u, c->r, &c->uses, &oom);
    c->fail |= oom;
    if ((u->op == OP_LOAD || u->op == OP_STORE) && uses) {
      int vi = u->op == OP_LOAD ? 2 : 3;
      uop *ns[4];
      memcpy(ns, src, (size_t)u->nsrc * sizeof *ns);
      ns[vi] = u->nsrc > vi ? uop_binary(OP_AND, src[vi], c->valid) : c->valid;
      out = uop_new((uop_op)u->op, (tg_dtype)u->dtype, vi + 1, ns, u->arg, u->naux, u->aux);
    } else if (u->op == OP_REDUCE) {
      bool has = false;
      for (int i = 1; i < u->nsrc; i++) has |= u->src[i] == c->r;
      if (has && !(u->arg.i == OP_ADD && zero_outside(src[0], c->valid))) {
        uop *id = uop_const((tg_dtype)u->dtype, reduce_identity((uop_op)u->arg.i, (tg_dtype)u->dtype));
        src[0] = uop_where(c->valid, src[0], id);
      }
      out = uop_replace_src(u, u->nsrc, src);
    } else {
      out = uop_replace_src(u, u->nsrc, src);
    }
  }
  if (src != s) free(src);
  if (!out || !umap_put(&c->memo, u, out)) { c->fail = true; return NULL; }
  return out;
}

static uop *pad_range(uop *ast, uop *r, int64_t m) {
  int64_t n = r->src[0]->arg.i;
  tg_dtype dt = (tg_dtype)r->dtype;
  uop *r2 = mk_range(dt, m, r->arg.i, r->aux[0]);
  if (!r2) return NULL;
  uop *sub = uop_substitute(ast, r, r2);
  if (!sub) return NULL;
  pad_ctx c = {.r = r2, .valid = uop_binary(OP_CMPLT, r2, uop_const_int(dt, n))};
  uop *res = c.valid ? pad_mask(&c, sub) : NULL;
  umap_free(&c.memo);
  umap_free(&c.uses);
  return res ? kernel_simplify(res) : NULL;
}

/* ---- SWAP and PACK ----------------------------------------------------------------------------------- */

static uop *swap_ranges(uop *ast, uop *a, uop *b) {
  int64_t tmp_id = max_range_id(ast) + 1;
  if (tmp_id == -1) return NULL;  /* out of memory */
  if (tmp_id >= 64) {
    tg_set_error(TG_ERR_INTERNAL, "opt: more than 64 loops in one kernel");
    return NULL;
  }
  tg_dtype dt = (tg_dtype)a->dtype;
  uop *tmp = mk_range(dt, a->src[0]->arg.i, tmp_id, a->aux[0]);
  uop *a2 = mk_range(dt, a->src[0]->arg.i, b->arg.i, a->aux[0]), *b2 = mk_range(dt, b->src[0]->arg.i, a->arg.i, b->aux[0]);
  if (!tmp || !a2 || !b2) return NULL;
  uop *r = uop_substitute(ast, a, tmp);
  r = r ? uop_substitute(r, b, b2) : NULL;
  return r ? uop_substitute(r, tmp, a2) : NULL;
}

/* load: the value copied (the load, or WHERE(gate, load, const): padding's gate then is evaluated in the copy,
 * not in the tile loop); src: the load itself */
typedef struct pack_plan { uop *load, *src; uop *inner[KS_MAX_AXES]; int ninner; int64_t elems; int nodes; } pack_plan;

/* a loop r the packed value uses: fine when opened before the tile loop (before[]), else it becomes a loop of the
 * panel (one of red's loops, or a register loop; *uses_red notes red's); false for any other loop */
static bool panel_loop(pack_plan *pl, uop *r, const uop *red, uop *const *before, int nbefore, bool *uses_red) {
  bool outer = false, mine = false;
  for (int j = 0; j < nbefore; j++) outer |= before[j] == r;
  for (int j = 1; j < red->nsrc; j++) mine |= red->src[j] == r;
  *uses_red |= mine;
  if (outer) return true;
  if ((!mine && r->aux[0] != AX_UPCAST && r->aux[0] != AX_UNROLL) || pl->ninner == KS_MAX_AXES) return false;
  pl->inner[pl->ninner++] = r;
  pl->elems *= r->src[0]->arg.i;
  return true;
}

/* whether load L can be packed for loop t: it does not use t, and every loop it uses is opened before t
 * (before[]), is one of red's loops, or is a register loop */
static bool pack_candidate(uop *L, uop *red, uop *t, uop *const *before, int nbefore, pack_plan *pl) {
  uop *src = L->op == OP_WHERE ? L->src[1] : L;
  if (L->op == OP_WHERE && (src->op != OP_LOAD || L->src[2]->op != OP_CONST)) return false;
  if (src->src[0]->op != OP_PARAM || uop_uses(L, t)) return false;
  int n;
  uop **order = uop_toposort(L, &n);  /* the loops of its index and of its mask (a masked load is copied masked) */
  if (!order) return false;
  bool ok = true, uses_red = false;
  pl->ninner = 0;
  pl->elems = 1;
  for (int i = 0; i < n && ok; i++) {
    uop *r = order[i];
    if (r->op == OP_RANGE) ok = panel_loop(pl, r, red, before, nbefore, &uses_red);
  }
  free(order);
  pl->load = L;
  pl->src = src;
  return ok && uses_red;
}

/* A value decoded from packed bytes (a quantized weight: the scheduler fuses it into its matmul,
 * schedule/schedule.c decodes_bytes): a float32 expression whose loads all read 1-byte integers from kernel
 * parameters, with no reduce in it. It is packed whole: the copy decodes each weight once per panel and the
 * tile loop reads float32 from the panel, so the decode is shared by every row of the tile loop. pl->src is
 * its first load (the loop order of the panel follows that load's strides). */
static bool decoded_candidate(uop *x, uop *red, uop *t, uop *const *before, int nbefore, pack_plan *pl) {
  if (x->dtype != TG_FLOAT32 || !uop_is_alu((uop_op)x->op) || uop_uses(x, t)) return false;
  int n;
  uop **order = uop_toposort(x, &n);
  if (!order) return false;
  bool ok = true, uses_red = false;
  uop *first = NULL;
  pl->ninner = 0;
  pl->elems = 1;
  for (int i = 0; i < n && ok; i++) {
    uop *r = order[i];
    if (r->op == OP_REDUCE || r->op == OP_DEFINE_LOCAL) ok = false;
    if (r->op == OP_LOAD) {
      ok = r->src[0]->op == OP_PARAM && (r->dtype == TG_UINT8 || r->dtype == TG_INT8);
      if (!first) first = r;
    }
    if (r->op == OP_RANGE && ok) ok = panel_loop(pl, r, red, before, nbefore, &uses_red);
  }
  free(order);
  pl->load = x;
  pl->src = first;
  pl->nodes = n;
  return ok && uses_red && first;
}

/* The fill loops of a decoded value's panel (decoded_candidate) in the order its bytes lie, not the panel's:
 * the register tile's loops (N: rows of the weight) outermost, then each reduce loop split into blocks of 32
 * (the block formats' grain; a K-quant's 256 are 8 of them), their two halves and the 16 values of a half
 * innermost. A block's scale then depends on outer loops only and is decoded once per block (the linearizer
 * hoists it), not once per value as in the panel's order (reduce outside, N inside, each value in another
 * block); a half's nibble shift (Q4_0: low nibbles, then high) once per half, and its bytes are contiguous. fl are the fill's
 * loops (ids below next), replaced in *val and *fidx. Returns false when out of memory or loops. */
#define DECODE_BLOCK 32

/* a reduce loop of values across blocks: longer than a block, and read at no fixed stride (a loop already of
 * blocks, its values' loops apart, reads its bytes at the block's stride and is not split again) */
static bool value_loop(const pack_plan *pl, int i, int64_t n) {
  int64_t k;
  return pl->inner[i]->aux[0] == AX_REDUCE && n > DECODE_BLOCK && n % DECODE_BLOCK == 0 &&
         !lin_coef(pl->src->src[1], pl->inner[i], &k);
}

static bool decoded_fill_order(uop **val, uop **fidx, uop *const *fl, const pack_plan *pl, int64_t next, tg_dtype it) {
  int nsplit = 0;
  for (int i = 0; i < pl->ninner; i++) nsplit += value_loop(pl, i, fl[i]->src[0]->arg.i);
  if (next + pl->ninner + 2 * nsplit > 64) {
    tg_set_error(TG_ERR_INTERNAL, "opt: more than 64 loops in one kernel");
    return false;
  }
  uop *inner[KS_MAX_AXES];  /* the block loops, given ids after all others */
  uop *from[KS_MAX_AXES], *to[KS_MAX_AXES];
  int ni = 0, nsub = 0;
  for (int pass = 0; pass < 2; pass++)  /* the tile's loops first */
    for (int i = 0; i < pl->ninner; i++) {
      if ((pl->inner[i]->aux[0] == AX_UPCAST) != (pass == 0)) continue;
      int64_t n = fl[i]->src[0]->arg.i;
      bool split = value_loop(pl, i, n);
      uop *o = mk_range(it, split ? n / DECODE_BLOCK : n, next++, AX_LOOP);
      if (!o) return false;
      from[nsub] = fl[i];
      to[nsub++] = o;
      if (split) inner[ni++] = o;
    }
  for (int i = 0; i < ni; i++) {  /* the split loops' values: block * 32 + half * 16 + value */
    uop *h = mk_range(it, 2, next++, AX_LOOP), *j = h ? mk_range(it, DECODE_BLOCK / 2, next++, AX_LOOP) : NULL;
    if (!j) return false;
    for (int k = 0; k < nsub; k++)
      if (to[k] == inner[i])
        to[k] = uop_binary(OP_ADD, uop_binary(OP_MUL, inner[i], uop_const_int(it, DECODE_BLOCK)),
                           uop_binary(OP_ADD, uop_binary(OP_MUL, h, uop_const_int(it, DECODE_BLOCK / 2)), j));
  }
  for (int k = 0; k < nsub && *val && *fidx; k++) {
    if (!to[k]) return false;
    *val = uop_substitute(*val, from[k], to[k]);
    *fidx = uop_substitute(*fidx, from[k], to[k]);
  }
  *val = *val ? uop_simplify(*val) : NULL;
  *fidx = *fidx ? uop_simplify(*fidx) : NULL;
  return *val && *fidx;
}

/* whether the panel's loops a and b = a + 1 (buffer order) can be filled as one loop: the copied value is a
 * plain load whose index is affine in both, with a's stride in the source b's times b's size (as it is in the
 * buffer), and its mask uses neither. Its value at (a, b) is then its value at (0, a * size(b) + b). */
static bool merges_in_fill(const pack_plan *pl, int a, int b) {
  const uop *L = pl->load;
  if (L->op != OP_LOAD && L->op != OP_WHERE) return false;
  uop *gate = L->op == OP_WHERE ? L->src[0] : pl->src->nsrc > 2 ? pl->src->src[2] : NULL;
  int64_t ka, kb;
  uop *ra = pl->inner[a], *rb = pl->inner[b];
  if (gate && (uop_uses(gate, ra) || uop_uses(gate, rb))) return false;
  return lin_coef(pl->src->src[1], ra, &ka) && lin_coef(pl->src->src[1], rb, &kb) && kb != 0 &&
         ka == kb * rb->src[0]->arg.i;
}

/* the copy of the load's values over its inner loops into a DEFINE_LOCAL, and the load from it */
static uop *pack_apply(uop *ast, pack_plan *pl, bool upcast_last) {
  /* buffer order: by falling stride in the source, so the source's contiguous loop stays contiguous (of equal
   * strides the UPCAST loop innermost: conv's window ox+kx then gives vector lanes along ox); with
   * upcast_last the UPCAST loops go innermost whatever their stride (a transposing copy: matmul with B
   * transposed then reads its panel as the plain one) */
  int64_t coef[KS_MAX_AXES];
  for (int i = 0; i < pl->ninner; i++) {
    if (!lin_coef(pl->src->src[1], pl->inner[i], &coef[i])) coef[i] = 0;
    if (upcast_last && pl->inner[i]->aux[0] == AX_UPCAST) coef[i] = -1 - pl->inner[i]->src[0]->arg.i;
  }
  for (int i = 1; i < pl->ninner; i++)
    for (int j = i; j > 0 && (coef[j] > coef[j - 1] || (coef[j] == coef[j - 1] && pl->inner[j - 1]->aux[0] == AX_UPCAST &&
                                                      pl->inner[j]->aux[0] != AX_UPCAST));
         j--) {
      int64_t tc = coef[j]; coef[j] = coef[j - 1]; coef[j - 1] = tc;
      uop *tr = pl->inner[j]; pl->inner[j] = pl->inner[j - 1]; pl->inner[j - 1] = tr;
    }
  int64_t id = max_range_id(ast) + 1;
  if (id == -1) return NULL;  /* out of memory */
  if (id + pl->ninner > 64) {
    tg_set_error(TG_ERR_INTERNAL, "opt: more than 64 loops in one kernel");
    return NULL;
  }
  int n, nlocal = 0;
  uop **order = uop_toposort(ast, &n);
  if (!order) return NULL;
  for (int i = 0; i < n; i++) nlocal += order[i]->op == OP_DEFINE_LOCAL;
  free(order);
  tg_dtype it = (tg_dtype)pl->inner[0]->dtype;
  uop *val = pl->load, *fidx = uop_const_int(it, 0), *lidx = uop_const_int(it, 0), *fl[KS_MAX_AXES];
  int64_t stride = 1;
  for (int i = pl->ninner - 1; i >= 0 && val; i--) {
    /* loops adjacent in the buffer that are also contiguous in the source are filled by one loop (a 3x3
     * convolution's weight: input channel, ky and kx are 4608 consecutive floats of one output channel), so
     * that a transposing copy is one pair of loops, which the linearizer copies in register blocks */
    int j = i;
    int64_t size = pl->inner[i]->src[0]->arg.i;
    while (j > 0 && merges_in_fill(pl, j - 1, j)) size *= pl->inner[--j]->src[0]->arg.i;
    uop *r = pl->inner[i], *r2 = mk_range(it, size, id + i, AX_LOOP);
    if (!r2) return NULL;
    for (int k = j; k <= i; k++) fl[k] = r2;
    val = uop_substitute(val, r, r2);
    for (int k = j; k < i && val; k++) val = uop_substitute(val, pl->inner[k], uop_const_int(it, 0));
    fidx = uop_binary(OP_ADD, fidx, uop_binary(OP_MUL, r2, uop_const_int(it, stride)));
    for (int k = i; k >= j; k--) {
      lidx = uop_binary(OP_ADD, lidx, uop_binary(OP_MUL, pl->inner[k], uop_const_int(it, stride)));
      stride *= pl->inner[k]->src[0]->arg.i;
    }
    i = j;
  }
  if (val && fidx && pl->load->op != OP_LOAD && pl->load->op != OP_WHERE) {
    fidx = uop_simplify(fidx);
    if (!fidx || !decoded_fill_order(&val, &fidx, fl, pl, id + pl->ninner, it)) return NULL;
  }
  uop *local = uop_new(OP_DEFINE_LOCAL, (tg_dtype)pl->load->dtype, 0, NULL, (uop_arg){.i = nlocal}, 1, &pl->elems);
  uop *fs[3] = {local, uop_simplify(fidx), val};
  uop *fill = val && fs[1] ? uop_new(OP_STORE, (tg_dtype)pl->load->dtype, 3, fs, (uop_arg){0}, 0, NULL) : NULL;
  uop *ls[2] = {fill, uop_simplify(lidx)};
  uop *nl = fill && ls[1] ? uop_new(OP_LOAD, (tg_dtype)pl->load->dtype, 2, ls, (uop_arg){0}, 0, NULL) : NULL;
  uop *r = nl ? uop_substitute(ast, pl->load, nl) : NULL;
  return r ? kernel_simplify(r) : NULL;
}


static uop *pack(kernel_state *ks, const axis_info *ax, int nout, int a, bool upcast_last, char *why) {
  uop *before[KS_MAX_AXES];
  for (int i = 0; i < a; i++) before[i] = ax[i].r;
  int n;
  uop **order = uop_toposort(ks->ast, &n);
  if (!order) return NULL;
  pack_plan best = {0}, pl;
  for (int i = 0; i < n; i++) {
    if (order[i]->op != OP_REDUCE) continue;
    int m;
    uop **sub = uop_toposort(order[i]->src[0], &m);
    if (!sub) break;
    for (int j = 0; j < m; j++) {
      if ((sub[j]->op == OP_LOAD || sub[j]->op == OP_WHERE) && pack_candidate(sub[j], order[i], ax[a].r, before, a, &pl) &&
          pl.elems <= (upcast_last ? PACK_T_MAX_ELEMS : PACK_MAX_ELEMS) &&
          (pl.elems > best.elems || (pl.elems == best.elems && pl.src == best.load)))
        best = pl, best.nodes = 0;
      /* of a decoded value's nodes, the whole expression: the most nodes */
      if (uop_is_alu((uop_op)sub[j]->op) && decoded_candidate(sub[j], order[i], ax[a].r, before, a, &pl) &&
          pl.elems <= (upcast_last ? PACK_T_MAX_ELEMS : PACK_MAX_ELEMS) &&
          (pl.elems > best.elems || (pl.elems == best.elems && pl.nodes > best.nodes)))
        best = pl;
    }
    free(sub);
  }
  free(order);
  if (!best.load) {
    snprintf(why, 160, "PACK: no load inside a reduce is reused across axis %d with a panel of at most %d elements", a,
             upcast_last ? PACK_T_MAX_ELEMS : PACK_MAX_ELEMS);
    return NULL;
  }
  return pack_apply(ks->ast, &best, upcast_last);
}

/* ---- groups (GPU) ------------------------------------------------------------------------------------- */

/* A REDUCE over a GROUP range r (size k: each of k work items of a group holds one value of r, its local index)
 * becomes two: each item's partial over the REDUCE's other ranges, stored in local memory at r, then the group's
 * result, every item reading the k partials over a new loop (the renderer puts barriers around the store). */
uop *lower_groups(uop *ast) {
  for (;;) {
    int n;
    uop **order = uop_toposort(ast, &n);
    if (!order) return NULL;
    uop *red = NULL, *g = NULL;
    int nlocal = 0;
    for (int i = 0; i < n; i++) {
      nlocal += order[i]->op == OP_DEFINE_LOCAL;
      if (red || order[i]->op != OP_REDUCE) continue;
      for (int k = 1; k < order[i]->nsrc; k++)
        if (order[i]->src[k]->aux[0] == AX_GROUP) { red = order[i]; g = order[i]->src[k]; }
    }
    free(order);
    if (!red) return ast;
    int64_t id = max_range_id(ast) + 1;
    if (id < 0) return NULL;
    if (id >= 64) {
      tg_set_error(TG_ERR_INTERNAL, "opt: more than 64 loops in one kernel");
      return NULL;
    }
    tg_dtype dt = (tg_dtype)red->dtype;
    uop *rs[TG_MAX_DIMS + 64];
    int nr = 0;
    rs[nr++] = red->src[0];
    for (int k = 1; k < red->nsrc && nr < (int)(sizeof rs / sizeof *rs); k++)
      if (red->src[k] != g) rs[nr++] = red->src[k];
    uop *part = nr == 1 ? rs[0] : uop_new(OP_REDUCE, dt, nr, rs, red->arg, red->naux, red->aux);
    int64_t k = g->src[0]->arg.i;
    uop *local = uop_new(OP_DEFINE_LOCAL, dt, 0, NULL, (uop_arg){.i = nlocal}, 1, &k);
    uop *fill = part && local ? uop_new(OP_STORE, dt, 3, (uop *[]){local, g, part}, (uop_arg){0}, 0, NULL) : NULL;
    uop *j = mk_range((tg_dtype)g->dtype, k, id, AX_REDUCE);
    uop *ld = fill && j ? uop_new(OP_LOAD, dt, 2, (uop *[]){fill, j}, (uop_arg){0}, 0, NULL) : NULL;
    uop *total = ld ? uop_new(OP_REDUCE, dt, 2, (uop *[]){ld, j}, red->arg, red->naux, red->aux) : NULL;
    ast = total ? uop_substitute(ast, red, total) : NULL;
    if (!ast) return NULL;
  }
}

/* ---- the axes ------------------------------------------------------------------------------------------ */

static int by_falling_id(const void *a, const void *b) {
  int64_t x = (*(uop *const *)a)->arg.i, y = (*(uop *const *)b)->arg.i;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* whether some load reads output loop r through r // c alone or r % c alone (a grouped convolution's input: its
 * group; after a channel shuffle, the group is the channel modulo the groups) */
static bool read_by_group(uop *const *order, int n, uop *r, int64_t c) {
  uop *k = uop_const_int((tg_dtype)r->dtype, c), *z = uop_const_int((tg_dtype)r->dtype, 0);
  uop *parts[2] = {uop_binary(OP_IDIV, r, k), uop_binary(OP_MOD, r, k)};
  for (int p = 0; p < 2; p++)
    for (int i = 0; i < n && parts[p] && z; i++) {
      uop *L = order[i];
      if (L->op != OP_LOAD || L->nsrc < 2 || !uop_uses(L->src[1], parts[p])) continue;
      uop *rest = uop_substitute(L->src[1], parts[p], z);
      if (rest && !uop_uses(rest, r)) return true;
    }
  return false;
}

/* a loop r of N read as r // c and r % c (c dividing N) becomes two loops, N/c outside c. A reduce loop: the
 * reshaped read of a permuted tensor (attention's heads merged back into the width: (r // 64)*8192 + r % 64)
 * then indexes linearly, without a division and a remainder in every iteration of the innermost loop. An output
 * loop of a kernel with a reduce, when a load reads it through r // c or r % c alone: a grouped convolution's output
 * channels (g, c), whose input depends on g only, so the register tile can reuse it across c. (Not other output
 * loops: a weight gradient's flattened (c, h, w) is faster as one loop with its panel packed, 266-289 us against
 * 365-428 split, and an elementwise kernel's flat loop is merged on purpose, for whole vectors.) */
static uop *split_divmod_loops(uop *ast) {
  bool reduces = false;
  for (int guard = 0; guard < 8; guard++) {
    int n;
    uop **order = uop_toposort(ast, &n);
    if (!order) return NULL;
    for (int i = 0; i < n && guard == 0; i++) reduces |= order[i]->op == OP_REDUCE;
    uop *r = NULL;
    int64_t c = 0;
    for (int i = 0; i < n && !r; i++) {
      uop *u = order[i], *x = u->nsrc == 2 ? u->src[0] : NULL;
      if ((u->op != OP_IDIV && u->op != OP_MOD) || !x || x->op != OP_RANGE ||
          (x->aux[0] != AX_REDUCE && !(x->aux[0] == AX_GLOBAL && reduces)) || !uop_is_const(x->src[0]) ||
          !uop_is_const(u->src[1]))
        continue;
      int64_t k = u->src[1]->arg.i, size = x->src[0]->arg.i;
      if (k > 1 && k < size && size % k == 0 && (x->aux[0] == AX_REDUCE || read_by_group(order, n, x, k))) r = x, c = k;
    }
    free(order);
    if (!r) return ast;
    uop *o = NULL, *in = NULL;
    ast = split_range(ast, r, c, (int)r->aux[0], &o, &in);
    if (!ast) return NULL;
    /* the inner part right after the outer one, where r was in the loop order (split_range opens it innermost):
     * swapped with each loop of its kind between them, the nearest first (a swap touches those two loops only) */
    if (!(order = uop_toposort(ast, &n))) return NULL;
    uop *between[64];
    int nb = 0;
    for (int i = 0; i < n && nb < 64; i++) {
      uop *x = order[i];
      if (x->op == OP_RANGE && x->aux[0] == in->aux[0] && x->arg.i > o->arg.i && x->arg.i < in->arg.i) between[nb++] = x;
    }
    free(order);
    qsort(between, (size_t)nb, sizeof *between, by_falling_id);
    for (int i = 0; i < nb && ast; i++) {
      int64_t id = between[i]->arg.i;
      ast = swap_ranges(ast, in, between[i]);
      in = mk_range((tg_dtype)in->dtype, c, id, in->aux[0]);
    }
    if (!ast || !in) return NULL;
  }
  return ast;
}

bool ks_init(kernel_state *ks, uop *ast, opt_target tg) {
  memset(ks, 0, sizeof *ks);
  ast = split_divmod_loops(ast);
  if (!ast) return false;
  ks->ast = ast;
  ks->tg = tg;
  ks->nthreads = 1;
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return false;
  for (int i = 0; i < n; i++)
    if (order[i]->op == OP_RANGE && order[i]->aux[0] == AX_THREAD) ks->nthreads = tg.nthreads;
  free(order);
  return true;
}

static int axis_class(int type) {
  switch (type) {
    case AX_REDUCE: case AX_GROUP: return 1;
    case AX_UNROLL: return 2;
    case AX_UPCAST: return 3;
    case AX_LOOP: return 4;  /* the loops of a PACK copy: not axes of the kernel */
    default: return 0;
  }
}

static int cmp_axis(const void *pa, const void *pb) {
  const axis_info *a = pa, *b = pb;
  int ca = axis_class(a->type), cb = axis_class(b->type);
  if (ca != cb) return ca - cb;
  /* the linearizer opens the THREAD loop first, the others by id */
  if (ca == 0 && (a->type == AX_THREAD) != (b->type == AX_THREAD)) return a->type == AX_THREAD ? -1 : 1;
  return a->r->arg.i < b->r->arg.i ? -1 : a->r->arg.i > b->r->arg.i;
}

int ks_axes(const kernel_state *ks, axis_info *ax, int *nout, int *nred) {
  int n, k = 0;
  if (nout) *nout = 0;
  if (nred) *nred = 0;
  uop **order = uop_toposort(ks->ast, &n);
  if (!order) return 0;  /* out of memory: no axes (get_kernel refuses a kernel made while memory ran out) */
  for (int i = 0; i < n && k < KS_MAX_AXES; i++) {
    uop *u = order[i];
    if (u->op != OP_RANGE || !uop_is_const(u->src[0])) continue;
    ax[k++] = (axis_info){.r = u, .size = u->src[0]->arg.i, .type = (int)u->aux[0]};
  }
  free(order);
  qsort(ax, (size_t)k, sizeof *ax, cmp_axis);
  int no = 0, nr = 0;
  for (int i = 0; i < k; i++) {
    if (axis_class(ax[i].type) == 0) no++;
    if (axis_class(ax[i].type) == 1) nr++;
  }
  if (nout) *nout = no;
  if (nred) *nred = nr;
  return k;
}

/* the most register copies of one value once the UPCAST/UNROLL loops are expanded and r is split by k: the
 * product of the expanded loops a value uses. Loops no value uses together multiply nothing (a row kernel's
 * output UPCAST and its reduces' UNROLLs: each reduce is copied by its own UNROLL only). *nodes: the nodes of
 * the expanded kernel, every node counted once per copy */
static int64_t expand_product(uop *ast, const axis_info *ax, int n, uop *r, int64_t k, int64_t *nodes) {
  int64_t size[64] = {0};
  for (int i = 0; i < n; i++)
    if ((ax[i].type == AX_UPCAST || ax[i].type == AX_UNROLL) && ax[i].r->arg.i < 64) size[ax[i].r->arg.i] = ax[i].size;
  int m;
  uop **order = uop_toposort(ast, &m);
  *nodes = INT64_MAX;
  if (!order) return INT64_MAX;
  loop_sets ls = {0};
  int64_t most = 1, total = 0;
  for (int i = 0; i < m; i++) {
    /* a REDUCE's source uses its loops; the REDUCE itself is one value per its free loops */
    uint64_t f = loops_free(&ls, order[i]);
    int64_t p = r->arg.i < 64 && (f >> r->arg.i & 1) ? k : 1;
    for (int b = 0; b < 64; b++)
      if ((f >> b & 1) && size[b]) p *= size[b];
    if (p > most) most = p;
    total += p;
  }
  loop_sets_free(&ls);
  free(order);
  if (!ls.fail) *nodes = total;
  return ls.fail ? INT64_MAX : most;
}

#define REFUSE(...) do { snprintf(why, 160, __VA_ARGS__); return false; } while (0)

bool apply_opt(kernel_state *ks, opt o, char *why) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred;
  int n = ks_axes(ks, ax, &nout, &nred);
  why[0] = 0;
  if (o.op >= OPT_COUNT) REFUSE("unknown action %d", (int)o.op);
  if (ks->napplied >= KS_MAX_OPTS) REFUSE("%s: at most %d actions per kernel", opt_name(o.op), KS_MAX_OPTS);
  for (int i = 0; i < ks->napplied; i++)  /* its buffer is filled over the loops as they are now; another PACK
                                            * fills a panel of its own (a second reduce's weight) */
    if (ks->applied[i].op == OPT_PACK && o.op != OPT_PACK)
      REFUSE("%s: PACK must be the last action", opt_name(o.op));
  if ((o.op == OPT_LOCAL || o.op == OPT_GROUP || o.op == OPT_GROUPTOP) && !ks->tg.has_local)
    REFUSE("%s: the CPU has no workgroups or local memory (a GPU action)", opt_name(o.op));
  /* the panel is filled by the loops of the kernel as they run: on a GPU its work items would fill one buffer
   * side by side without a barrier (BEAM on PoCL picked such a matmul: rows read from other rows' panels) */
  if (o.op == OPT_PACK && ks->tg.has_local) REFUSE("PACK: cache blocking for the CPU, not for a GPU's work items");
  if (o.op == OPT_LOCAL) REFUSE("LOCAL: not built yet (output work items are grouped by the renderer)");
  bool on_reduce = o.op == OPT_UNROLL || o.op == OPT_GROUP || o.op == OPT_GROUPTOP;
  int lim = on_reduce ? nred : o.op == OPT_PADTO ? nout + nred : nout;
  if (o.axis < 0 || o.axis >= lim)
    REFUSE("%s: axis %d out of range (the kernel has %d %s axes)", opt_name(o.op), o.axis, lim,
           on_reduce ? "reduce" : o.op == OPT_PADTO ? "output and reduce" : "output");
  axis_info a = ax[on_reduce ? nout + o.axis : o.axis];
  int64_t size = a.size, k = o.arg;
  uop *ast = NULL;
  switch (o.op) {
    case OPT_UPCAST:
    case OPT_UNROLL: {
      if (k == 0) k = size;  /* tinygrad: 0 takes the whole axis */
      if (k < 2) REFUSE("%s: amount %lld must be at least 2", opt_name(o.op), (long long)k);
      if (k > 64) REFUSE("%s: amount %lld is more than 64 registers", opt_name(o.op), (long long)k);
      if (size % k) REFUSE("%s: axis %d of size %lld is not a multiple of %lld (PADTO first)", opt_name(o.op), o.axis,
                           (long long)size, (long long)k);
      int64_t expanded;
      if (expand_product(ks->ast, ax, n, a.r, k, &expanded) > KS_MAX_EXPAND)
        REFUSE("%s: more than %d register copies in all", opt_name(o.op), KS_MAX_EXPAND);
      if (expanded > KS_MAX_EXPANDED_NODES)
        REFUSE("%s: %lld operations once expanded, more than %d", opt_name(o.op), (long long)expanded,
               KS_MAX_EXPANDED_NODES);
      if (o.op == OPT_UPCAST && a.type == AX_THREAD && size / k < ks->nthreads)
        REFUSE("UPCAST: leaves %lld iterations for %d threads", (long long)(size / k), ks->nthreads);
      ast = split_range(ks->ast, a.r, k, o.op == OPT_UPCAST ? AX_UPCAST : AX_UNROLL, NULL, NULL);
      break;
    }
    case OPT_GROUP:
    case OPT_GROUPTOP: {
      /* the reduce's iterations spread over k work items of a group, which combine their partial results through
       * local memory (lower_groups): GROUP gives neighbouring items neighbouring iterations (coalesced loads),
       * GROUPTOP each item a contiguous run */
      for (int i = 0; i < n; i++)
        if (ax[i].type == AX_GROUP) REFUSE("%s: the kernel already has a GROUP axis", opt_name(o.op));
      if (a.type != AX_REDUCE) REFUSE("%s: reduce axis %d is unrolled already", opt_name(o.op), o.axis);
      if (k < 2 || k > 1024) REFUSE("%s: %lld work items per group (2..1024)", opt_name(o.op), (long long)k);
      if (size % k) REFUSE("%s: axis %d of size %lld is not a multiple of %lld", opt_name(o.op), o.axis, (long long)size,
                           (long long)k);
      uop *outer, *inner;
      if (o.op == OPT_GROUP) {
        ast = split_range(ks->ast, a.r, k, AX_GROUP, NULL, NULL);
      } else if ((ast = split_range(ks->ast, a.r, size / k, AX_REDUCE, &outer, &inner)) != NULL) {
        uop *g = mk_range((tg_dtype)outer->dtype, k, outer->arg.i, AX_GROUP);
        ast = g ? uop_substitute(ast, outer, g) : NULL;
      }
      break;
    }
    case OPT_THREAD: {
      if (a.type == AX_THREAD) REFUSE("THREAD: axis %d is already split across threads", o.axis);
      if (ks->nthreads > 1) REFUSE("THREAD: the kernel already has a THREAD axis");
      if (a.type != AX_GLOBAL) REFUSE("THREAD: axis %d is not an output loop", o.axis);
      /* the threads' loop is opened first: a reduce that does not use it would run once per thread's part */
      if (a.r->arg.i >= 64 || !(reduce_loops(ks->ast) >> a.r->arg.i & 1))
        REFUSE("THREAD: axis %d is a row the kernel's reduces are broadcast along", o.axis);
      if (k < 2 || k > ks->tg.nthreads) REFUSE("THREAD: %lld threads, the pool has %d", (long long)k, ks->tg.nthreads);
      if (size < k) REFUSE("THREAD: axis %d has %lld iterations for %lld threads", o.axis, (long long)size, (long long)k);
      int64_t type = AX_THREAD;
      uop *t = uop_new(OP_RANGE, (tg_dtype)a.r->dtype, 1, a.r->src, a.r->arg, 1, &type);
      ast = t ? uop_substitute(ks->ast, a.r, t) : NULL;
      if (ast) ks->nthreads = (int)k;
      break;
    }
    case OPT_SWAP: {
      if (k < 0 || k >= nout || k == o.axis) REFUSE("SWAP: the other axis %lld is not another output axis", (long long)k);
      if (a.type == AX_THREAD || ax[k].type == AX_THREAD) REFUSE("SWAP: the THREAD axis stays outermost");
      ast = swap_ranges(ks->ast, a.r, ax[k].r);
      break;
    }
    case OPT_PACK: {
      if (a.type != AX_GLOBAL) REFUSE("PACK: axis %d is not an output loop of the kernel", o.axis);
      if (k != 0 && k != 1) REFUSE("PACK: arg %lld is not 0 (source order) or 1 (upcast loops innermost)", (long long)k);
      ast = pack(ks, ax, nout, o.axis, k == 1, why);
      if (!ast && why[0]) return false;
      break;
    }
    case OPT_PADTO: {
      if (a.type != AX_GLOBAL && a.type != AX_REDUCE && a.type != AX_THREAD)
        REFUSE("PADTO: axis %d is already upcast or unrolled", o.axis);
      if (k < 2) REFUSE("PADTO: multiple %lld must be at least 2", (long long)k);
      int64_t m = (size + k - 1) / k * k;
      if (m == size) REFUSE("PADTO: axis %d of size %lld is already a multiple of %lld", o.axis, (long long)size, (long long)k);
      if (m > 2 * size) REFUSE("PADTO: padding %lld to %lld wastes more than half the work", (long long)size, (long long)m);
      ast = pad_range(ks->ast, a.r, m);
      break;
    }
    default: REFUSE("%s: no rule applies it", opt_name(o.op));
  }
  if (!ast) REFUSE("%s: %s", opt_name(o.op), tg_error());
  ks->ast = ast;
  ks->applied[ks->napplied++] = o;
  return true;
}
