/* c_rows.c — C text for row groups (codegen/rows.c): a tile's strided vector accesses as rows.
 *
 * A group of n vectors of L lanes, padded to w (a power of two, w <= L) with zeros, is transposed in w x w
 * blocks of lanes: after the rounds of tg_rows_t<w>, lanes g*w .. g*w+w-1 of vector j hold row g*w + j (its
 * n elements, then padding). The transpose is its own inverse, so a load group reads the rows into the same
 * places and transposes them into the members' vectors. A row of n < w elements is accessed under a mask with
 * AVX-512, else as two overlapping halves of w/2 (the first and the last w/2 elements): both are inside the
 * row, and the elements they share are stored twice with the same values. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "render/cstyle.h"

/* the in-register transpose of w x w blocks over r[0..w-1] (vectors of `lanes`), one round per halving. Always
 * inlined: kernels with one preamble are compiled as one unit (cpu.c's batches), where gcc called it out of
 * line from some of them, and a call in the epilogue of a tile clobbers every vector register (the values that
 * live across it are spilled: ResNet-18's 58x58 convolution 10-20% slower that way) */
static void put_transpose(out *o, int w, int lanes) {
  put(o, "static inline __attribute__((always_inline)) void tg_rows_t%d(tg_float_v *r) {\n", w);
  for (int h = w / 2; h >= 1; h /= 2)
    for (int i = 0; i < w; i++) {
      if (i & h) continue;
      put(o, "  { tg_float_v a = __builtin_shufflevector(r[%d], r[%d]", i, i + h);
      for (int l = 0; l < lanes; l++) put(o, ", %d", (l % w) & h ? lanes + l - h : l);
      put(o, "), b = __builtin_shufflevector(r[%d], r[%d]", i, i + h);
      for (int l = 0; l < lanes; l++) put(o, ", %d", (l % w) & h ? lanes + l : l + h);
      put(o, "); r[%d] = a; r[%d] = b; }\n", i, i + h);
    }
  put(o, "}\n");
}

/* a row of n < w elements, stored from or loaded into a w-element vector: AVX-512 masks the access; without,
 * two overlapping halves */
static void put_partial(out *o, int w, int n, int lanes) {
  const char *t = w == lanes ? "tg_float_v" : NULL;
  char tn[24];
  if (!t) snprintf(tn, sizeof tn, "tg_float_r%d", w), t = tn;
  int h = w / 2, bits = 32 * w;
  const char *mt = w == 16 ? "unsigned short" : "unsigned char";
  unsigned mask = (1u << n) - 1;
  put(o, "static inline __attribute__((always_inline)) void tg_rows_st%d_%d(float *p, %s v) {\n#if defined(__AVX512VL__)\n"
         "  __builtin_ia32_storeups%d_mask((void *)p, v, (%s)0x%x);\n#else\n", w, n, t, bits, mt, mask);
  for (int half = 0; half < 2; half++) {
    int off = half ? n - h : 0;
    put(o, "  *(tg_float_r%d *)(p + %d) = __builtin_shufflevector(v, v", h, off);
    for (int l = 0; l < h; l++) put(o, ", %d", off + l);
    put(o, ");\n");
  }
  put(o, "#endif\n}\n");
  put(o, "static inline __attribute__((always_inline)) %s tg_rows_ld%d_%d(const float *p) {\n#if defined(__AVX512VL__)\n"
         "  return __builtin_ia32_loadups%d_mask((const void *)p, (%s){0}, (%s)0x%x);\n#else\n"
         "  return __builtin_shufflevector(*(const tg_float_r%d *)p, *(const tg_float_r%d *)(p + %d)",
      t, w, n, bits, t, mt, mask, h, h, n - h);
  for (int i = 0; i < w; i++) put(o, ", %d", i < h ? i : i < n ? h + i - (n - h) : w - 1);
  put(o, ");\n#endif\n}\n");
}

void c_rows_header(out *o, const row_plan *r, int lanes) {
  bool done[ROW_MAX + 1] = {false};
  bool part[ROW_MAX + 1][ROW_MAX + 1] = {{false}};
  for (int w = 2; w < lanes; w *= 2)
    put(o, "typedef float tg_float_r%d __attribute__((vector_size(%d), aligned(4), may_alias));\n", w, 4 * w);
  for (int g = 0; g < r->n; g++) {
    int w = r->groups[g].width, n = r->groups[g].n;
    if (!done[w]) put_transpose(o, w, lanes);
    done[w] = true;
    if (n < w && !part[w][n]) put_partial(o, w, n, lanes);
    part[w][n] = true;
  }
}

/* lanes lo .. lo+k-1 of vector v as a k-element vector expression */
static void put_part(out *o, const char *v, int lo, int k, int lanes) {
  if (k == lanes) {
    put(o, "%s", v);
    return;
  }
  put(o, "__builtin_shufflevector(%s, %s", v, v);
  for (int l = 0; l < k; l++) put(o, ", %d", lo + l);
  put(o, ")");
}

static void put_row_type(out *o, int k, int lanes) {
  if (k == lanes) put(o, "tg_float_vu");
  else put(o, "tg_float_r%d", k);
}

static void store_group(rctx *c, const row_group *g, int gi) {
  int L = c->p->lanes, w = g->width;
  indent(c);
  if (g->gate) put(c->o, "if (%s) ", name_of(c, (uop *)g->gate));
  put(c->o, "{ tg_float_v r%d_[%d] = {", gi, w);
  for (int k = 0; k < w; k++) {
    const uop *v = k < g->n ? c->p->ops[g->pos[k]]->src[2] : NULL;
    if (v && lp_is_vec(c->p, v)) put(c->o, "%s%s", k ? ", " : "", name_of(c, (uop *)v));
    else put(c->o, "%stg_bc_float(%s)", k ? ", " : "", v ? name_of(c, (uop *)v) : "0.0f");
  }
  put(c->o, "}; tg_rows_t%d(r%d_); float *q_ = %s + (%s[0] + %" PRId64 "LL);", w, gi, name_of(c, c->p->ops[g->pos[0]]->src[0]),
      name_of(c, (uop *)g->root), g->c0);
  char v[32];
  for (int row = 0; row < L; row++) {
    int j = row % w, lo = row / w * w;
    snprintf(v, sizeof v, "r%d_[%d]", gi, j);
    int64_t at = row * g->stride;
    if (g->n == w) {
      put(c->o, " *(");
      put_row_type(c->o, w, L);
      put(c->o, "*)(q_ + %" PRId64 "LL) = ", at);
    } else {
      put(c->o, " tg_rows_st%d_%d(q_ + %" PRId64 "LL, ", w, g->n, at);
    }
    put_part(c->o, v, lo, w, L);
    put(c->o, g->n == w ? ";" : ");");
  }
  put(c->o, " }\n");
}

/* row `row` of a load group as a w-element vector expression */
static void put_row_load(rctx *c, const row_group *g, int row) {
  int64_t at = row * g->stride;
  if (g->n < g->width) {
    put(c->o, "tg_rows_ld%d_%d(q_ + %" PRId64 "LL)", g->width, g->n, at);
    return;
  }
  put(c->o, "*(const ");
  put_row_type(c->o, g->width, c->p->lanes);
  put(c->o, "*)(q_ + %" PRId64 "LL)", at);
}

/* vector j of a load group: the rows j, w + j, 2w + j, ... side by side */
static void put_concat(rctx *c, const row_group *g, int j, int first, int count) {
  if (count == 1) {
    put_row_load(c, g, first * g->width + j);
    return;
  }
  put(c->o, "__builtin_shufflevector(");
  put_concat(c, g, j, first, count / 2);
  put(c->o, ", ");
  put_concat(c, g, j, first + count / 2, count / 2);
  for (int l = 0; l < count * g->width; l++) put(c->o, ", %d", l);
  put(c->o, ")");
}

static void load_group(rctx *c, const row_group *g, int gi) {
  int w = g->width;
  indent(c);
  put(c->o, "tg_float_v rows%d_[%d] = {0}; ", gi, w);
  if (g->gate) put(c->o, "if (%s) ", name_of(c, (uop *)g->gate));
  put(c->o, "{ const float *q_ = %s + (%s[0] + %" PRId64 "LL);", name_of(c, c->p->ops[g->pos[0]]->src[0]), name_of(c, (uop *)g->root),
      g->c0);
  for (int j = 0; j < w; j++) {
    put(c->o, "\n");
    indent(c);
    put(c->o, "  rows%d_[%d] = ", gi, j);
    put_concat(c, g, j, 0, c->p->lanes / w);
    put(c->o, ";");
  }
  put(c->o, " tg_rows_t%d(rows%d_); }\n", w, gi);
}

bool c_rows_op(rctx *c, const row_plan *r, int pos) {
  int gi = r ? r->group_of[pos] : -1;
  if (gi < 0) return false;
  const row_group *g = &r->groups[gi];
  uop *u = c->p->ops[pos];
  if (g->store) {
    if (pos == g->at) store_group(c, g, gi);
    return true;
  }
  if (pos == g->at) load_group(c, g, gi);
  for (int k = 0; k < g->n; k++)
    if (g->pos[k] == pos) set_name(c, u, fmt("rows%d_[%d]", gi, k));
  return true;
}
