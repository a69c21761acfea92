/* test_indexing.c — indexing and the movement ops of movement_more.c against plain C references.
 *
 * Each reference here maps an output coordinate to an input coordinate (or to a fill value) with loops over
 * ref_arr arrays, written from the numpy / PyTorch definitions and sharing nothing with the library: roll,
 * diagonal, diag, unfold, repeat_interleave, the pad modes, and a numpy-semantics getitem (ints, slices with
 * steps, None, ellipsis, integer arrays broadcast together, adjacent or separated). Gradients are checked by
 * central finite differences in float64 (loss = sum(f(x) * w), w fixed and random). */
#include <stdlib.h>

#include "ref.h"
#include "test.h"

/* ---- a coordinate-map reference --------------------------------------------------------------------------- */

/* out[o] = a[map(o)] or fill when map returns false */
typedef bool (*coord_map)(const void *ctx, const int64_t *out, int64_t *in);

static ref_arr *ref_map(const ref_arr *a, int ndim, const int64_t *shape, coord_map f, const void *ctx, double fill) {
  ref_arr *r = ref_new(a->dtype, ndim, shape);
  int64_t o[TG_MAX_DIMS] = {0}, in[TG_MAX_DIMS];
  for (int64_t k = 0; k < r->numel; k++) {
    if (f(ctx, o, in)) {
      int64_t off = 0;
      for (int d = 0; d < a->ndim; d++) off = off * a->shape[d] + in[d];
      r->data[k] = a->data[off];
    } else {
      r->data[k] = fill;
    }
    for (int d = ndim - 1; d >= 0; d--) {
      if (++o[d] < shape[d]) break;
      o[d] = 0;
    }
  }
  return r;
}

static int64_t pmod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

/* ---- gradients by finite differences ---------------------------------------------------------------------- */

typedef tg_tensor *(*unary_fn)(tg_tensor *x, const void *ctx);

static double fd_loss(unary_fn f, const void *ctx, int nd, const int64_t *sh, const double *x, const double *w) {
  tg_scope_begin();
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  tg_tensor *tx = tg_from_data(TG_FLOAT64, nd, sh, x, (size_t)n * 8);
  tg_tensor *y = f(tx, ctx);
  double r = NAN;
  if (y) {
    tg_tensor *tw = tg_from_data(TG_FLOAT64, tg_ndim(y), tg_shape_ptr(y), w, (size_t)tg_numel(y) * 8);
    r = tg_item(tg_sum(tg_mul(y, tw), 0, NULL, false));
  }
  tg_scope_end();
  return r;
}

/* checks d(sum(f(x) * w))/dx against central differences for a random x of shape sh */
static void check_grad(const char *what, unary_fn f, const void *ctx, int nd, const int64_t *sh, const char *file, int line) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  double *x = malloc((size_t)(n + 1) * 8), *g = calloc((size_t)(n + 1), 8), *w = NULL;
  for (int64_t i = 0; i < n; i++) x[i] = ref_uniform(-2, 2);
  tg_scope_begin();
  tg_tensor *tx = tg_set_requires_grad(tg_from_data(TG_FLOAT64, nd, sh, x, (size_t)n * 8), true);
  tg_tensor *y = f(tx, ctx);
  bool ok = y != NULL;
  if (ok) {
    int64_t ny = tg_numel(y);
    w = malloc((size_t)(ny + 1) * 8);
    for (int64_t i = 0; i < ny; i++) w[i] = ref_uniform(-1, 1);
    tg_tensor *tw = tg_from_data(TG_FLOAT64, tg_ndim(y), tg_shape_ptr(y), w, (size_t)ny * 8);
    ok = tg_backward(tg_sum(tg_mul(y, tw), 0, NULL, false)) == TG_OK;
    if (ok && tg_grad(tx)) ok = tg_to_host(tg_grad(tx), g, (size_t)n * 8) == TG_OK;
  }
  if (!ok) test_fail(file, line, "%s: forward or backward failed: %s", what, tg_error());
  tg_scope_end();
  int bad = 0;
  for (int64_t i = 0; ok && i < n && bad < 3; i++) {
    double keep = x[i], eps = 1e-6;
    x[i] = keep + eps;
    double lp = fd_loss(f, ctx, nd, sh, x, w);
    x[i] = keep - eps;
    double lm = fd_loss(f, ctx, nd, sh, x, w);
    x[i] = keep;
    double fd = (lp - lm) / (2 * eps);
    if (!(fabs(fd - g[i]) <= 1e-4 + 1e-3 * fabs(fd))) {
      test_fail(file, line, "%s: d/dx[%lld]: analytic %.9g, finite differences %.9g", what, (long long)i, g[i], fd);
      bad++;
    }
  }
  free(x);
  free(g);
  free(w);
}
#define CHECK_GRAD(what, f, ctx, ...) check_grad(what, f, ctx, __VA_ARGS__, __FILE__, __LINE__)

/* ---- roll --------------------------------------------------------------------------------------------------- */

typedef struct roll_ctx { const ref_arr *a; int64_t by[TG_MAX_DIMS]; } roll_ctx;
static bool roll_map(const void *c, const int64_t *o, int64_t *in) {
  const roll_ctx *r = c;
  for (int d = 0; d < r->a->ndim; d++) in[d] = pmod(o[d] - r->by[d], r->a->shape[d]);
  return true;
}
static ref_arr *ref_roll(const ref_arr *a, int n, const int64_t *shifts, const int *dims) {
  roll_ctx c = {a, {0}};
  for (int k = 0; k < n; k++) {
    int d = dims[k] < 0 ? dims[k] + a->ndim : dims[k];
    c.by[d] += shifts[k];
  }
  return ref_map(a, a->ndim, a->shape, roll_map, &c, 0);
}

TEST(test_roll_matches_reference) {
  ref_seed(11);
  struct { int nd; int64_t sh[3]; int n; int64_t shifts[3]; int dims[3]; } cs[] = {
      {2, {2, 4}, 1, {1}, {0}},           {2, {2, 4}, 1, {-1}, {0}},          {2, {2, 4}, 2, {2, 1}, {0, 1}},
      {3, {2, 4, 6}, 1, {1}, {0}},        {2, {2, 4}, 1, {1}, {-1}},          {2, {2, 4}, 1, {5}, {0}},
      {2, {2, 4}, 1, {-5}, {0}},          {3, {2, 4, 6}, 2, {2, -3}, {0, 2}}, {3, {2, 4, 6}, 3, {1, 2, -1}, {0, 1, 2}},
      {2, {2, 4}, 1, {0}, {0}},           {3, {2, 0, 3}, 1, {1}, {1}},        {3, {2, 0, 3}, 1, {1}, {0}},
      {1, {0}, 1, {1}, {0}},              {2, {3, 5}, 2, {1, 2}, {1, 1}},     {1, {1}, 1, {-7}, {0}},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    ref_arr *a = ref_rand(TG_FLOAT32, cs[i].nd, cs[i].sh, -3, 3);
    tg_tensor *t = ref_to_tg(a), *r = tg_roll(t, cs[i].n, cs[i].shifts, cs[i].n, cs[i].dims);
    char what[64];
    snprintf(what, sizeof what, "roll case %zu", i);
    CHECK(r, "%s: %s", what, tg_error());
    if (r) CHECK_REF(what, r, ref_roll(a, cs[i].n, cs[i].shifts, cs[i].dims));
    tg_free(r);
    tg_free(t);
  }
  /* no dims: the flattened tensor, as torch.roll(x, 1) */
  ref_arr *a = ref_rand(TG_INT32, SHAPE(2, 4), -50, 50);
  tg_tensor *t = ref_to_tg(a), *r = tg_roll(t, 1, (int64_t[]){3}, 0, NULL);
  ref_arr *flat = ref_reshape(a, 1, (int64_t[]){8});
  CHECK(r && CHECK_REF("roll flat", r, ref_reshape(ref_roll(flat, 1, (int64_t[]){3}, (int[]){0}), 2, (int64_t[]){2, 4})), "roll flat");
  tg_free(r);
  /* errors: two shifts without dims, counts that differ, a bad axis */
  CHECK(!tg_roll(t, 2, (int64_t[]){1, 2}, 0, NULL), "two shifts without dims must fail");
  CHECK(!tg_roll(t, 1, (int64_t[]){1}, 2, (int[]){0, 1}), "one shift for two dims must fail");
  CHECK(!tg_roll(t, 2, (int64_t[]){1, 2}, 1, (int[]){0}), "two shifts for one dim must fail");
  CHECK(!tg_roll(t, 1, (int64_t[]){1}, 1, (int[]){2}), "axis 2 of a 2-d tensor must fail");
  tg_free(t);
  ref_free_all();
}

static tg_tensor *g_roll(tg_tensor *x, const void *c) {
  (void)c;
  return tg_roll(x, 2, (int64_t[]){2, -1}, 2, (int[]){0, 2});
}

/* ---- diagonal, diag ---------------------------------------------------------------------------------------- */

typedef struct diag_ctx { const ref_arr *a; int d1, d2; int64_t r0, c0; } diag_ctx;
static bool diag_map(const void *c, const int64_t *o, int64_t *in) {
  const diag_ctx *g = c;
  int nd = g->a->ndim, k = 0;
  for (int d = 0; d < nd; d++)
    if (d != g->d1 && d != g->d2) in[d] = o[k++];
  in[g->d1] = g->r0 + o[nd - 2];
  in[g->d2] = g->c0 + o[nd - 2];
  return true;
}
static ref_arr *ref_diagonal(const ref_arr *a, int64_t off, int d1, int d2) {
  int nd = a->ndim;
  d1 = d1 < 0 ? d1 + nd : d1;
  d2 = d2 < 0 ? d2 + nd : d2;
  diag_ctx c = {a, d1, d2, off < 0 ? -off : 0, off > 0 ? off : 0};
  int64_t len = a->shape[d1] - c.r0 < a->shape[d2] - c.c0 ? a->shape[d1] - c.r0 : a->shape[d2] - c.c0, sh[TG_MAX_DIMS];
  if (len < 0) len = 0;
  int k = 0;
  for (int d = 0; d < nd; d++)
    if (d != d1 && d != d2) sh[k++] = a->shape[d];
  sh[k++] = len;
  return ref_map(a, k, sh, diag_map, &c, 0);
}

TEST(test_diagonal_and_diag_match_reference) {
  ref_seed(12);
  struct { int nd; int64_t sh[4]; int64_t off; int d1, d2; } cs[] = {
      {2, {5, 5}, 0, 0, 1},  {2, {3, 4}, 0, 0, 1},     {2, {4, 3}, 0, 0, 1},         {3, {3, 3, 3}, 0, -2, -1},
      {3, {4, 5, 6}, 0, -2, -1}, {4, {2, 3, 4, 5}, 0, -2, -1}, {2, {5, 5}, 1, 0, 1}, {2, {5, 5}, -1, 0, 1},
      {2, {3, 5}, 2, 0, 1},  {2, {3, 5}, 7, 0, 1},     {2, {3, 5}, -3, 0, 1},        {3, {4, 2, 3}, 1, 2, 0},
      {2, {1, 1}, 0, 0, 1},  {2, {0, 4}, 0, 0, 1},     {3, {2, 4, 3}, -1, 1, 2},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    ref_arr *a = ref_rand(TG_FLOAT32, cs[i].nd, cs[i].sh, -3, 3);
    tg_tensor *t = ref_to_tg(a), *r = tg_diagonal(t, cs[i].off, cs[i].d1, cs[i].d2);
    char what[64];
    snprintf(what, sizeof what, "diagonal case %zu", i);
    CHECK(r, "%s: %s", what, tg_error());
    if (r) CHECK_REF(what, r, ref_diagonal(a, cs[i].off, cs[i].d1, cs[i].d2));
    tg_free(r);
    tg_free(t);
  }
  tg_tensor *sq = tg_zeros(TG_FLOAT32, SHAPE(3, 3));
  CHECK(!tg_diagonal(sq, 0, 0, 0) && !tg_diagonal(sq, 0, 1, -1), "the same axis twice must fail");
  tg_free(sq);
  /* diag of a vector, with offsets: (n + |k|) square, t on diagonal k */
  for (int64_t k = -2; k <= 2; k++) {
    ref_arr *v = ref_rand(TG_INT32, SHAPE(4), -9, 9);
    int64_t m = 4 + (k < 0 ? -k : k);
    ref_arr *want = ref_new(TG_INT32, 2, (int64_t[]){m, m});
    for (int64_t i = 0; i < 4; i++) want->data[(i + (k < 0 ? -k : 0)) * m + i + (k > 0 ? k : 0)] = v->data[i];
    tg_tensor *t = ref_to_tg(v), *r = tg_diag(t, k);
    char what[64];
    snprintf(what, sizeof what, "diag offset %lld", (long long)k);
    CHECK(r && CHECK_REF(what, r, want), "%s: %s", what, tg_error());
    tg_free(r);
    tg_free(t);
  }
  ref_arr *m2 = ref_rand(TG_FLOAT32, SHAPE(3, 4), -1, 1);
  tg_tensor *t2 = ref_to_tg(m2), *d2 = tg_diag(t2, 1);
  CHECK(d2 && CHECK_REF("diag of a matrix", d2, ref_diagonal(m2, 1, 0, 1)), "diag of a matrix: %s", tg_error());
  tg_tensor *t3 = tg_zeros(TG_FLOAT32, SHAPE(2, 2, 2)), *e0 = tg_zeros(TG_FLOAT32, 1, (int64_t[]){0});
  CHECK(!tg_diag(t3, 0), "diag of a 3-d tensor must fail");
  tg_tensor *de = tg_diag(e0, 0);
  CHECK(de && tg_ndim(de) == 2 && tg_shape(de, 0) == 0 && tg_shape(de, 1) == 0, "diag of an empty vector is (0, 0)");
  tg_free(de); tg_free(e0); tg_free(t3); tg_free(d2); tg_free(t2);
  ref_free_all();
}

static tg_tensor *g_diagonal(tg_tensor *x, const void *c) { (void)c; return tg_diagonal(x, -1, 2, 0); }
static tg_tensor *g_diag(tg_tensor *x, const void *c) {
  (void)c;
  return tg_diag(tg_reshape(x, 1, (int64_t[]){-1}), 2);  /* leaks nothing: checks run in a scope */
}

/* ---- unfold, repeat_interleave, unflatten -------------------------------------------------------------------- */

typedef struct unfold_ctx { const ref_arr *a; int ax; int64_t step; } unfold_ctx;
static bool unfold_map(const void *c, const int64_t *o, int64_t *in) {
  const unfold_ctx *u = c;
  for (int d = 0; d < u->a->ndim; d++) in[d] = o[d];
  in[u->ax] = o[u->ax] * u->step + o[u->a->ndim];
  return true;
}

typedef struct rep_ctx { int ax; int64_t r; int nd; } rep_ctx;
static bool rep_map(const void *c, const int64_t *o, int64_t *in) {
  const rep_ctx *r = c;
  for (int d = 0; d < r->nd; d++) in[d] = d == r->ax ? o[d] / r->r : o[d];
  return true;
}

TEST(test_unfold_repeat_interleave_unflatten_match_reference) {
  ref_seed(13);
  struct { int nd; int64_t sh[5]; int dim; int64_t size, step; } cs[] = {
      {1, {8}, 0, 2, 1}, {1, {8}, 0, 2, 2}, {1, {8}, 0, 7, 3}, {3, {3, 3, 3}, 2, 2, 8}, {3, {3, 3, 3}, 1, 0, 8},
      {5, {3, 3, 3, 3, 3}, -1, 2, 2}, {2, {4, 6}, 0, 1, 1}, {2, {4, 6}, 1, 6, 1}, {2, {0, 5}, 1, 2, 2},
      {2, {5, 4}, 0, 3, 1},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    ref_arr *a = ref_rand(TG_FLOAT32, cs[i].nd, cs[i].sh, -3, 3);
    int ax = cs[i].dim < 0 ? cs[i].dim + cs[i].nd : cs[i].dim;
    int64_t sh[TG_MAX_DIMS];
    memcpy(sh, cs[i].sh, sizeof cs[i].sh);
    sh[ax] = (cs[i].sh[ax] - cs[i].size) / cs[i].step + 1;
    sh[cs[i].nd] = cs[i].size;
    unfold_ctx c = {a, ax, cs[i].step};
    ref_arr *want = ref_map(a, cs[i].nd + 1, sh, unfold_map, &c, 0);
    tg_tensor *t = ref_to_tg(a), *r = tg_unfold(t, cs[i].dim, cs[i].size, cs[i].step);
    char what[64];
    snprintf(what, sizeof what, "unfold case %zu", i);
    CHECK(r && CHECK_REF(what, r, want), "%s: %s", what, tg_error());
    tg_free(r);
    tg_free(t);
  }
  tg_tensor *v = tg_zeros(TG_FLOAT32, 1, (int64_t[]){8});
  CHECK(!tg_unfold(v, 0, 9, 3), "a window past the axis must fail");
  CHECK(!tg_unfold(v, 1, 8, 3), "axis 1 of a vector must fail");
  CHECK(!tg_unfold(v, 0, 1, -1) && !tg_unfold(v, 0, 1, 0), "step <= 0 must fail");
  CHECK(!tg_unfold(v, 0, -1, 1), "a negative size must fail");
  tg_free(v);

  /* repeat_interleave: (3, 3) by 2 along each axis, and flattened by 6; int dtype exact */
  ref_arr *a = ref_rand(TG_INT32, SHAPE(3, 3), -9, 9);
  tg_tensor *t = ref_to_tg(a);
  for (int dim = -2; dim <= 1; dim++) {
    int ax = dim < 0 ? dim + 2 : dim;
    rep_ctx c = {ax, 2, 2};
    int64_t sh[2] = {3, 3};
    sh[ax] = 6;
    tg_tensor *r = tg_repeat_interleave(t, 2, dim);
    char what[48];
    snprintf(what, sizeof what, "repeat_interleave dim %d", dim);
    CHECK(r && CHECK_REF(what, r, ref_map(a, 2, sh, rep_map, &c, 0)), "%s: %s", what, tg_error());
    tg_free(r);
  }
  rep_ctx cf = {0, 6, 1};
  tg_tensor *rf = tg_repeat_interleave(t, 6, TG_ALL);
  CHECK(rf && CHECK_REF("repeat_interleave flat", rf, ref_map(ref_reshape(a, 1, (int64_t[]){9}), 1, (int64_t[]){54}, rep_map, &cf, 0)),
        "flat: %s", tg_error());
  tg_tensor *r0 = tg_repeat_interleave(t, 0, 1);
  CHECK(r0 && tg_shape(r0, 0) == 3 && tg_shape(r0, 1) == 0, "0 repeats: (3, 0)");
  CHECK(!tg_repeat_interleave(t, -1, 0), "negative repeats must fail");
  tg_free(r0); tg_free(rf);

  /* unflatten (4, 3, 6, 6) as test_ops, -1 inferred */
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(4, 3, 6, 6), -1, 1);
  tg_tensor *tb = ref_to_tg(b);
  struct { int dim, n; int64_t sizes[3]; int nd; int64_t want[6]; } us[] = {
      {0, 2, {2, 2}, 5, {2, 2, 3, 6, 6}}, {3, 2, {3, 2}, 5, {4, 3, 6, 3, 2}}, {-1, 3, {3, 2, 1}, 6, {4, 3, 6, 3, 2, 1}},
      {1, 2, {-1, 1}, 5, {4, 3, 1, 6, 6}},
  };
  for (size_t i = 0; i < sizeof us / sizeof us[0]; i++) {
    tg_tensor *u = tg_unflatten(tb, us[i].dim, us[i].n, us[i].sizes);
    CHECK(u && CHECK_REF("unflatten", u, ref_reshape(b, us[i].nd, us[i].want)), "unflatten %zu: %s", i, tg_error());
    tg_free(u);
  }
  CHECK(!tg_unflatten(tb, 1, 2, (int64_t[]){2, 2}), "sizes that do not multiply to the axis must fail");
  CHECK(!tg_unflatten(tb, 0, 2, (int64_t[]){-1, 3}), "an inferred size that does not divide must fail");
  tg_free(tb);
  tg_free(t);
  ref_free_all();
}

static tg_tensor *g_unfold(tg_tensor *x, const void *c) { (void)c; return tg_unfold(x, 1, 3, 2); }
static tg_tensor *g_repint(tg_tensor *x, const void *c) { (void)c; return tg_repeat_interleave(x, 3, -1); }

/* ---- view, T, shrink_to, pad_to, chunk, split_size, meshgrid ------------------------------------------------ */

TEST(test_small_movement_aliases) {
  ref_seed(14);
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 4, 2), -1, 1);
  tg_tensor *t = ref_to_tg(a);
  tg_tensor *v = tg_view(t, 2, (int64_t[]){-1, 2});
  CHECK(v && CHECK_REF("view", v, ref_reshape(a, 2, (int64_t[]){12, 2})), "view: %s", tg_error());
  tg_tensor *tt = tg_T(t);
  CHECK(tt && CHECK_REF("T", tt, ref_transpose(a, 0, 1)), "T: %s", tg_error());
  tg_tensor *st = tg_shrink_to(t, 3, (int64_t[]){2, -1, 1});
  CHECK(st && CHECK_REF("shrink_to", st, ref_shrink(a, (int64_t[]){0, 2, 0, 4, 0, 1})), "shrink_to: %s", tg_error());
  tg_tensor *pt = tg_pad_to(t, 3, (int64_t[]){4, -1, 5}, -2.5);
  CHECK(pt && CHECK_REF("pad_to", pt, ref_pad(a, (int64_t[]){0, 1, 0, 0, 0, 3}, -2.5)), "pad_to: %s", tg_error());
  CHECK(!tg_pad_to(t, 3, (int64_t[]){2, 4, 2}, 0), "pad_to smaller must fail");
  CHECK(!tg_shrink_to(t, 2, (int64_t[]){2, 2}), "shrink_to with the wrong rank must fail");
  tg_free(v); tg_free(tt); tg_free(st); tg_free(pt);

  /* chunk: 13 along an axis in 6 chunks -> 5 pieces of 3, 3, 3, 3, 1 (ceil(13/6) = 3), as torch */
  ref_arr *c = ref_arange(TG_INT32, 0, 13, 1);
  tg_tensor *tc = ref_to_tg(c), *out[8] = {0};
  int n = -1;
  CHECK(tg_chunk(tc, 6, 0, &n, out) == TG_OK && n == 5, "chunk(13, 6): %d pieces (%s)", n, tg_error());
  int64_t want[] = {3, 3, 3, 3, 1}, off = 0;
  for (int i = 0; i < n && i < 5; i++) {
    CHECK(tg_shape(out[i], 0) == want[i], "chunk piece %d has %lld", i, (long long)tg_shape(out[i], 0));
    CHECK_REF("chunk piece", out[i], ref_shrink(c, (int64_t[]){off, off + want[i]}));
    off += want[i];
    tg_free(out[i]);
  }
  CHECK(tg_chunk(tc, 3, -1, &n, out) == TG_OK && n == 3 && tg_shape(out[2], 0) == 3, "chunk(13, 3): 5, 5, 3");
  for (int i = 0; i < n; i++) tg_free(out[i]);
  CHECK(tg_chunk(tc, 0, 0, &n, out) != TG_OK, "0 chunks must fail");
  tg_tensor *e = tg_zeros(TG_FLOAT32, 1, (int64_t[]){0});
  CHECK(tg_chunk(e, 4, 0, &n, out) == TG_OK && n == 4 && tg_numel(out[3]) == 0, "chunk of an empty axis: 4 empty pieces");
  for (int i = 0; i < n; i++) tg_free(out[i]);
  /* split by size: 10 by 3 -> 3, 3, 3, 1; an empty axis -> one empty piece */
  tg_tensor *ten = tg_arange(TG_INT32, 0, 10, 1);
  CHECK(tg_split_size(ten, 3, 0, 8, &n, out) == TG_OK && n == 4 && tg_shape(out[3], 0) == 1, "split 10 by 3");
  for (int i = 0; i < n; i++) tg_free(out[i]);
  CHECK(tg_split_size(ten, 3, 0, 3, &n, out) != TG_OK, "4 pieces in room for 3 must fail");
  CHECK(tg_split_size(e, 5, 0, 8, &n, out) == TG_OK && n == 1 && tg_numel(out[0]) == 0, "split of an empty axis");
  for (int i = 0; i < n; i++) tg_free(out[i]);
  tg_free(ten); tg_free(e); tg_free(tc);

  /* meshgrid ij and xy of (3) and (4) and (2) */
  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(3), -1, 1), *y = ref_rand(TG_FLOAT32, SHAPE(4), -1, 1), *z = ref_rand(TG_FLOAT32, SHAPE(2), -1, 1);
  tg_tensor *ts[3] = {ref_to_tg(x), ref_to_tg(y), ref_to_tg(z)}, *g[3] = {0};
  for (int xy = 0; xy < 2; xy++) {
    CHECK(tg_meshgrid(3, ts, xy, g) == TG_OK, "meshgrid: %s", tg_error());
    int64_t sh[3] = {xy ? 4 : 3, xy ? 3 : 4, 2};
    ref_arr *ra = ref_expand(ref_reshape(x, 3, xy ? (int64_t[]){1, 3, 1} : (int64_t[]){3, 1, 1}), 3, sh);
    ref_arr *rb = ref_expand(ref_reshape(y, 3, xy ? (int64_t[]){4, 1, 1} : (int64_t[]){1, 4, 1}), 3, sh);
    ref_arr *rc = ref_expand(ref_reshape(z, 3, (int64_t[]){1, 1, 2}), 3, sh);
    CHECK_REF("meshgrid 0", g[0], ra);
    CHECK_REF("meshgrid 1", g[1], rb);
    CHECK_REF("meshgrid 2", g[2], rc);
    for (int i = 0; i < 3; i++) tg_free(g[i]);
  }
  CHECK(tg_meshgrid(1, ts, false, g) == TG_OK && tg_ndim(g[0]) == 1, "meshgrid of one tensor is that tensor");
  tg_free(g[0]);
  for (int i = 0; i < 3; i++) tg_free(ts[i]);
  tg_free(t);
  ref_free_all();
}

/* ---- pad modes ------------------------------------------------------------------------------------------------ */

typedef struct pad_ctx { const ref_arr *a; tg_padding_mode mode; int64_t pairs[2 * TG_MAX_DIMS]; } pad_ctx;
/* PyTorch's definition: reflect and replicate index the padded (positive pads) tensor, then crop; circular
 * crops first, then wraps; the output coordinate o maps back through the crop */
static bool pad_map(const void *c, const int64_t *o, int64_t *in) {
  const pad_ctx *p = c;
  for (int d = 0; d < p->a->ndim; d++) {
    int64_t pb = p->pairs[2 * d], n = p->a->shape[d], i;
    if (p->mode == TG_PAD_CIRCULAR) {
      int64_t cb = pb < 0 ? -pb : 0, ca = p->pairs[2 * d + 1] < 0 ? -p->pairs[2 * d + 1] : 0, m = n - cb - ca;
      int64_t gb = pb > 0 ? pb : 0;
      i = cb + pmod(o[d] - gb, m);
    } else {
      int64_t gb = pb > 0 ? pb : 0, cb = pb < 0 ? -pb : 0;
      i = o[d] + cb - gb;  /* the position in the original axis */
      if (p->mode == TG_PAD_REPLICATE) i = i < 0 ? 0 : i >= n ? n - 1 : i;
      else if (p->mode == TG_PAD_REFLECT) i = i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
      else if (i < 0 || i >= n) return false;
    }
    in[d] = i;
  }
  return true;
}
static ref_arr *ref_pad_mode(const ref_arr *a, const int64_t *flat, int npads, tg_padding_mode mode, double value) {
  pad_ctx c = {a, mode, {0}};
  int nd = a->ndim;
  for (int k = 0; k < npads / 2; k++) {
    c.pairs[2 * (nd - 1 - k)] = flat[2 * k];
    c.pairs[2 * (nd - 1 - k) + 1] = flat[2 * k + 1];
  }
  int64_t sh[TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) sh[d] = a->shape[d] + c.pairs[2 * d] + c.pairs[2 * d + 1];
  return ref_map(a, nd, sh, pad_map, &c, value);
}

TEST(test_pad_modes_match_reference) {
  ref_seed(15);
  struct { int nd; int64_t sh[5]; int np; int64_t p[8]; tg_padding_mode mode; } cs[] = {
      /* test_ops' cases, reflect */
      {4, {1, 1, 5, 5}, 4, {0, 2, 3, 2}, TG_PAD_REFLECT},   {3, {5, 5, 5}, 2, {0, 2}, TG_PAD_REFLECT},
      {5, {1, 1, 5, 5, 5}, 6, {1, 2, 3, 4, 1, 2}, TG_PAD_REFLECT}, {4, {3, 3, 3, 3}, 4, {-1, 2, 2, -1}, TG_PAD_REFLECT},
      {4, {1, 1, 5, 5}, 4, {3, -3, 0, -3}, TG_PAD_REFLECT}, {4, {1, 1, 5, 5}, 4, {3, -5, 1, -5}, TG_PAD_REFLECT},
      {4, {1, 1, 5, 5}, 4, {0, 0, 0, -5}, TG_PAD_REFLECT},  {4, {1, 1, 5, 5}, 4, {4, 4, 0, 4}, TG_PAD_REFLECT},
      /* replicate */
      {4, {1, 1, 5, 5}, 4, {0, 2, 3, 2}, TG_PAD_REPLICATE}, {3, {5, 5, 5}, 2, {0, 2}, TG_PAD_REPLICATE},
      {5, {1, 1, 5, 5, 5}, 6, {1, 2, 3, 4, 1, 2}, TG_PAD_REPLICATE}, {4, {3, 3, 3, 3}, 4, {-1, 2, 2, -1}, TG_PAD_REPLICATE},
      {4, {1, 1, 5, 5}, 4, {3, -3, 0, -3}, TG_PAD_REPLICATE}, {4, {1, 1, 5, 5}, 4, {3, -5, 1, -5}, TG_PAD_REPLICATE},
      {4, {1, 1, 5, 5}, 4, {3, 11, 0, 30}, TG_PAD_REPLICATE}, {2, {1, 1}, 4, {2, 3, 1, 0}, TG_PAD_REPLICATE},
      /* circular */
      {4, {1, 1, 5, 5}, 4, {0, 2, 3, 2}, TG_PAD_CIRCULAR},  {3, {5, 5, 5}, 2, {0, 2}, TG_PAD_CIRCULAR},
      {5, {1, 1, 5, 5, 5}, 6, {1, 2, 3, 5, 1, 2}, TG_PAD_CIRCULAR}, {4, {1, 1, 5, 5}, 4, {1, -2, 2, -1}, TG_PAD_CIRCULAR},
      {2, {4, 3}, 4, {3, 3, -1, 2}, TG_PAD_CIRCULAR},
      /* constant with crops, for the common reference */
      {4, {3, 3, 3, 3}, 4, {-1, 2, -3, 4}, TG_PAD_CONSTANT}, {2, {3, 3}, 4, {1, 2, 3, 4}, TG_PAD_CONSTANT},
  };
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    ref_arr *a = ref_rand(TG_FLOAT32, cs[i].nd, cs[i].sh, -3, 3);
    tg_tensor *t = ref_to_tg(a), *r = tg_pad_mode(t, cs[i].np, cs[i].p, cs[i].mode, 1.5);
    char what[64];
    snprintf(what, sizeof what, "pad mode %d case %zu", (int)cs[i].mode, i);
    CHECK(r && CHECK_REF(what, r, ref_pad_mode(a, cs[i].p, cs[i].np, cs[i].mode, 1.5)), "%s: %s", what, tg_error());
    tg_free(r);
    /* the per-axis form gives the same */
    int64_t pairs[2 * TG_MAX_DIMS] = {0};
    int nd = cs[i].nd;
    for (int k = 0; k < cs[i].np / 2; k++) {
      pairs[2 * (nd - 1 - k)] = cs[i].p[2 * k];
      pairs[2 * (nd - 1 - k) + 1] = cs[i].p[2 * k + 1];
    }
    r = tg_pad_axes_mode(t, nd, pairs, cs[i].mode, 1.5);
    CHECK(r && CHECK_REF(what, r, ref_pad_mode(a, cs[i].p, cs[i].np, cs[i].mode, 1.5)), "%s (axes): %s", what, tg_error());
    tg_free(r);
    tg_free(t);
  }
  /* errors: reflect pad >= size, circular wrapping twice, replicate of an empty axis, odd or too many pads, a bad mode */
  tg_tensor *t = tg_zeros(TG_FLOAT32, SHAPE(1, 1, 5, 5)), *e = tg_zeros(TG_FLOAT32, SHAPE(2, 0));
  CHECK(!tg_pad_mode(t, 4, (int64_t[]){3, 5, 0, 0}, TG_PAD_REFLECT, 0), "reflect pad 5 of 5 must fail");
  CHECK(!tg_pad_mode(t, 4, (int64_t[]){3, 6, 0, 0}, TG_PAD_CIRCULAR, 0), "circular pad 6 of 5 must fail");
  tg_tensor *fine = tg_pad_mode(t, 2, (int64_t[]){3, -2}, TG_PAD_CIRCULAR, 0);
  CHECK(fine && tg_shape(fine, 3) == 6, "circular 3 after cropping 2 of 5 is fine: %s", tg_error());
  tg_free(fine);
  CHECK(!tg_pad_mode(t, 2, (int64_t[]){4, -2}, TG_PAD_CIRCULAR, 0), "circular 4 of the 3 left after the crop must fail");
  CHECK(!tg_pad_mode(e, 2, (int64_t[]){1, 0}, TG_PAD_REPLICATE, 0), "replicate of an empty axis must fail");
  CHECK(!tg_pad_mode(t, 3, (int64_t[]){1, 1, 1}, TG_PAD_REFLECT, 0), "an odd count must fail");
  CHECK(!tg_pad_mode(t, 10, (int64_t[]){0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, TG_PAD_CONSTANT, 0), "too many pads must fail");
  CHECK(!tg_pad_mode(t, 2, (int64_t[]){1, 1}, (tg_padding_mode)7, 0), "an unknown mode must fail");
  CHECK(!tg_pad_mode(t, 2, (int64_t[]){-3, -3}, TG_PAD_REPLICATE, 0), "crops past the axis must fail");
  tg_free(t);
  tg_free(e);
  /* tinygrad's pad forms in constant mode: negative values crop in both forms, (0, 0) is None */
  ref_arr *b = ref_rand(TG_INT32, SHAPE(3, 3), -9, 9);
  tg_tensor *tb = ref_to_tg(b);
  tg_tensor *p1 = tg_pad(tb, 4, (int64_t[]){-1, 2, -3, 4}, 5), *p2 = tg_pad_axes(tb, 2, (int64_t[]){-3, 4, -1, 2}, 5);
  tg_tensor *p3 = tg_pad_axes(tb, 2, (int64_t[]){3, 4, 0, 0}, 1);
  CHECK(p1 && CHECK_REF("flat crop", p1, ref_pad_mode(b, (int64_t[]){-1, 2, -3, 4}, 4, TG_PAD_CONSTANT, 5)), "flat crop");
  CHECK(p2 && CHECK_REF("axes crop", p2, ref_pad_mode(b, (int64_t[]){-1, 2, -3, 4}, 4, TG_PAD_CONSTANT, 5)), "axes crop");
  CHECK(p3 && CHECK_REF("axes None", p3, ref_pad_mode(b, (int64_t[]){0, 0, 3, 4}, 4, TG_PAD_CONSTANT, 1)), "axes None");
  tg_free(p1); tg_free(p2); tg_free(p3); tg_free(tb);
  ref_free_all();
}

typedef struct gpad { tg_padding_mode mode; int64_t p[4]; } gpad;
static tg_tensor *g_pad(tg_tensor *x, const void *c) {
  const gpad *g = c;
  return tg_pad_mode(x, 4, g->p, g->mode, 0.5);
}

/* ---- getitem -------------------------------------------------------------------------------------------------- */

/* numpy's (and tinygrad's) getitem on a ref_arr; integer arrays are ref_arr (int32) broadcast together. Ints
 * are basic indices (tinygrad); tensor index values out of range after one wrap give 0 (tinygrad). */
static ref_arr *ref_getitem_at(const ref_arr *a, int n, const tg_index *ix, ref_arr *const *arrs, int64_t **offs) {
  /* expand the ellipsis */
  int nreal = 0, k, ne = 0;
  for (k = 0; k < n; k++) nreal += ix[k].kind == TG_INDEX_INT || ix[k].kind == TG_INDEX_SLICE || ix[k].kind == TG_INDEX_TENSOR;
  tg_index e[40];
  const ref_arr *earr[40];
  bool had = false;
  for (k = 0; k <= n; k++) {
    if (k == n ? !had : ix[k].kind == TG_INDEX_ELLIPSIS) {
      for (int j = 0; j < a->ndim - nreal; j++) { earr[ne] = NULL; e[ne++] = TG_IX_ALL; }
      had = true;
    }
    if (k < n && ix[k].kind != TG_INDEX_ELLIPSIS) { earr[ne] = arrs ? arrs[k] : NULL; e[ne++] = ix[k]; }
  }
  /* broadcast shape of the arrays, and where they go */
  int nb = 0, first = -1, last = -1, pos = 0, ntens = 0;
  int64_t big[TG_MAX_DIMS];
  for (k = 0; k < ne; k++) {
    if (e[k].kind == TG_INDEX_INT) continue;
    if (e[k].kind == TG_INDEX_TENSOR) {
      if (first < 0) first = pos;
      last = pos;
      ntens++;
      int nn;
      int64_t out[TG_MAX_DIMS];
      if (!ref_broadcast_shape(nb, big, earr[k]->ndim, earr[k]->shape, &nn, out)) return NULL;
      nb = nn;
      memcpy(big, out, sizeof out);
    }
    pos++;
  }
  bool front = ntens > 1 && last - first + 1 != ntens;
  /* per entry: start and step of slices, in the input's axes */
  int64_t sh[TG_MAX_DIMS];
  int nout = 0;
  if (front) for (int i = 0; i < nb; i++) sh[nout++] = big[i];
  int64_t start[40], step[40], cnt[40];
  int ax = 0;
  bool placed = front;
  for (k = 0; k < ne; k++) {
    if (e[k].kind == TG_INDEX_NONE) { sh[nout++] = 1; continue; }
    int64_t len = a->shape[ax++];
    if (e[k].kind == TG_INDEX_INT) { start[k] = e[k].i < 0 ? e[k].i + len : e[k].i; continue; }
    if (e[k].kind == TG_INDEX_TENSOR) {
      if (!placed) { for (int i = 0; i < nb; i++) sh[nout++] = big[i]; placed = true; }
      continue;
    }
    /* python slice.indices */
    tg_slice s = e[k].slice;
    int64_t st = s.all ? 1 : s.step, b, en;
    if (st > 0) {
      b = s.all || s.start == TG_END ? 0 : s.start < 0 ? s.start + len : s.start;
      en = s.all || s.stop == TG_END ? len : s.stop < 0 ? s.stop + len : s.stop;
      b = b < 0 ? 0 : b > len ? len : b;
      en = en < 0 ? 0 : en > len ? len : en;
      cnt[k] = en > b ? (int64_t)((uint64_t)(en - b - 1) / (uint64_t)st) + 1 : 0;
    } else {
      b = s.start == TG_END ? len - 1 : s.start < 0 ? s.start + len : s.start;
      en = s.stop == TG_END ? -1 : s.stop < 0 ? s.stop + len : s.stop;
      b = b < -1 ? -1 : b > len - 1 ? len - 1 : b;
      en = en < -1 ? -1 : en > len - 1 ? len - 1 : en;
      cnt[k] = b > en ? (int64_t)((uint64_t)(b - en - 1) / (0 - (uint64_t)st)) + 1 : 0;
    }
    start[k] = b;
    step[k] = st;
    sh[nout++] = cnt[k];
  }
  ref_arr *r = ref_new(a->dtype, nout, sh);
  int64_t o[TG_MAX_DIMS] = {0};
  if (offs) *offs = malloc((size_t)(r->numel + 1) * sizeof **offs);
  for (int64_t q = 0; q < r->numel; q++) {
    /* read the output coordinate back */
    int oi = 0;
    int64_t bcoord[TG_MAX_DIMS];
    if (front) for (int i = 0; i < nb; i++) bcoord[i] = o[oi++];
    int64_t off = 0;
    bool valid = true, seen = front;
    ax = 0;
    for (k = 0; k < ne; k++) {
      if (e[k].kind == TG_INDEX_NONE) { oi++; continue; }
      int64_t len = a->shape[ax++], i;
      if (e[k].kind == TG_INDEX_INT) i = start[k];
      else if (e[k].kind == TG_INDEX_SLICE) i = start[k] + step[k] * o[oi++];
      else {
        if (!seen) { for (int j = 0; j < nb; j++) bcoord[j] = o[oi++]; seen = true; }
        const ref_arr *ia = earr[k];
        int64_t io = 0;
        for (int j = 0; j < ia->ndim; j++) {
          int64_t c = bcoord[nb - ia->ndim + j];
          io = io * ia->shape[j] + (ia->shape[j] == 1 ? 0 : c);
        }
        i = (int64_t)ia->data[io];
        if (i < 0) i += len;
        if (i < 0 || i >= len) valid = false;
      }
      off = off * len + (valid ? i : 0);
    }
    r->data[q] = valid ? a->data[off] : 0;
    if (offs) (*offs)[q] = valid ? off : -1;
    for (int d = nout - 1; d >= 0; d--) {
      if (++o[d] < sh[d]) break;
      o[d] = 0;
    }
  }
  return r;
}

static ref_arr *ref_getitem(const ref_arr *a, int n, const tg_index *ix, ref_arr *const *arrs) {
  return ref_getitem_at(a, n, ix, arrs, NULL);
}

/* numpy's a[ix] = v (v broadcast to the getitem's shape), writes in row-major order of the result */
static ref_arr *ref_setitem(const ref_arr *a, int n, const tg_index *ix, ref_arr *const *arrs, const ref_arr *v) {
  int64_t *offs = NULL;
  ref_arr *g = ref_getitem_at(a, n, ix, arrs, &offs);
  ref_arr *r = ref_copy(a);
  if (g) {
    ref_arr *vb = ref_expand(v, g->ndim, g->shape);
    for (int64_t q = 0; q < g->numel; q++)
      if (offs[q] >= 0) r->data[offs[q]] = vb->data[q];
  }
  free(offs);
  return g ? r : NULL;
}

/* builds tensors for the arrays, runs both getitems and compares */
static void check_getitem(const char *what, const ref_arr *a, int n, const tg_index *ix, ref_arr *const *arrs,
                          const char *file, int line) {
  tg_index tix[40];
  tg_tensor *ts[40] = {0};
  for (int k = 0; k < n; k++) {
    tix[k] = ix[k];
    if (ix[k].kind == TG_INDEX_TENSOR) tix[k].tensor = ts[k] = ref_to_tg(arrs[k]);
  }
  tg_tensor *t = ref_to_tg(a), *r = tg_getitem(t, n, tix);
  ref_arr *want = ref_getitem(a, n, ix, arrs);
  if (!r) test_fail(file, line, "%s: tg_getitem failed: %s", what, tg_error());
  else if (!want) test_fail(file, line, "%s: the reference refused it", what);
  else ref_check_tol(what, r, want, true, 0, 0, file, line);
  tg_free(r);
  tg_free(t);
  for (int k = 0; k < n; k++) tg_free(ts[k]);
}
#define CHECK_GETITEM(what, a, arrs, ...)                                                                  \
  check_getitem(what, a, (int)(sizeof((tg_index[]){__VA_ARGS__}) / sizeof(tg_index)), (tg_index[]){__VA_ARGS__}, \
                arrs, __FILE__, __LINE__)

#define I(v) TG_IX_INT(v)
#define S(a, b, c) TG_IX_SLICE(a, b, c)
#define ALL TG_IX_ALL
#define NEW TG_IX_NONE
#define ELL TG_IX_ELLIPSIS
#define TT ((tg_index){.kind = TG_INDEX_TENSOR})
#define E TG_END

TEST(test_getitem_basic_matches_numpy) {
  ref_seed(16);
  ref_arr *a3 = ref_rand(TG_FLOAT32, SHAPE(3, 3, 3), -5, 5), *a1 = ref_rand(TG_INT32, SHAPE(3), -9, 9);
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(7, 5, 10), -5, 5), *c4 = ref_rand(TG_FLOAT32, SHAPE(3, 3, 3, 3), -5, 5);
  ref_arr *s0 = ref_scalar(TG_FLOAT32, 2.5), *z = ref_rand(TG_FLOAT32, SHAPE(10, 10), -1, 1);
  CHECK_GETITEM("x[1:3]", a1, NULL, S(1, 3, 1));
  CHECK_GETITEM("x[-2:2]", a1, NULL, S(-2, 2, 1));
  CHECK_GETITEM("x[-1]", a1, NULL, I(-1));
  CHECK_GETITEM("x[-3]", a1, NULL, I(-3));
  CHECK_GETITEM("x[1,1,1]", a3, NULL, I(1), I(1), I(1));
  CHECK_GETITEM("x[1:2, 2]", a3, NULL, S(1, 2, 1), I(2));
  CHECK_GETITEM("x[1:2, 1:2, 0:-1]", a3, NULL, S(1, 2, 1), S(1, 2, 1), S(0, -1, 1));
  CHECK_GETITEM("x[None]", a3, NULL, NEW);
  CHECK_GETITEM("x[1:2, None, 1:2]", a3, NULL, S(1, 2, 1), NEW, S(1, 2, 1));
  CHECK_GETITEM("x[1:2, 1:2, None, -1]", a3, NULL, S(1, 2, 1), S(1, 2, 1), NEW, I(-1));
  CHECK_GETITEM("x[None, None, 1, None, 2, 0:2]", a3, NULL, NEW, NEW, I(1), NEW, I(2), S(0, 2, 1));
  CHECK_GETITEM("x[-6:4]", a3, NULL, S(-6, 4, 1));
  CHECK_GETITEM("x[1:50, 1:2, -1]", a3, NULL, S(1, 50, 1), S(1, 2, 1), I(-1));
  CHECK_GETITEM("x[::2, ::3, ::4]", b, NULL, S(E, E, 2), S(E, E, 3), S(E, E, 4));
  CHECK_GETITEM("x[1:5:2, 3, ::4]", b, NULL, S(1, 5, 2), I(3), S(E, E, 4));
  CHECK_GETITEM("x[1:5:2, None, None, 3, None, ::4]", b, NULL, S(1, 5, 2), NEW, NEW, I(3), NEW, S(E, E, 4));
  CHECK_GETITEM("x[::-1]", z, NULL, S(E, E, -1));
  CHECK_GETITEM("x[::-2]", z, NULL, S(E, E, -2));
  CHECK_GETITEM("x[:, 2:0:-1]", b, NULL, ALL, S(2, 0, -1));
  CHECK_GETITEM("x[4:0:-3, 2:0:-1, -1:-5:-2]", b, NULL, S(4, 0, -3), S(2, 0, -1), S(-1, -5, -2));
  CHECK_GETITEM("x[2:5:-1]", b, NULL, S(2, 5, -1));
  CHECK_GETITEM("x[:, :, 2:5:-1]", b, NULL, ALL, ALL, S(2, 5, -1));
  CHECK_GETITEM("x[5:10]", a3, NULL, S(5, 10, 1));
  CHECK_GETITEM("x[-15:-7]", a3, NULL, S(-15, -7, 1));
  CHECK_GETITEM("x[1:1]", z, NULL, S(1, 1, 1));
  CHECK_GETITEM("x[..., 0]", c4, NULL, ELL, I(0));
  CHECK_GETITEM("x[0, ..., 0]", c4, NULL, I(0), ELL, I(0));
  CHECK_GETITEM("x[0:3, ..., 2:3]", c4, NULL, S(0, 3, 1), ELL, S(2, 3, 1));
  CHECK_GETITEM("x[None, 0:3, ..., 0, None]", c4, NULL, NEW, S(0, 3, 1), ELL, I(0), NEW);
  CHECK_GETITEM("scalar[None]", s0, NULL, NEW);
  CHECK_GETITEM("scalar[...]", s0, NULL, ELL);
  CHECK_GETITEM("x[-1::-3]", z, NULL, S(-1, E, -3));
  CHECK_GETITEM("x[7:-20:-4]", z, NULL, S(7, -20, -4));
  CHECK_GETITEM("x[3:9:100]", z, NULL, S(3, 9, 100));
  CHECK_GETITEM("x[INT64_MAX step]", z, NULL, S(E, E, INT64_MAX));
  CHECK_GETITEM("x[INT64_MIN step]", z, NULL, S(E, E, INT64_MIN));

  /* errors, as tinygrad's test_slice_errors */
  tg_tensor *t = tg_ones(TG_FLOAT32, SHAPE(4, 3)), *s = tg_scalar(TG_FLOAT32, 2);
  CHECK(!tg_getitem(t, 4, (tg_index[]){I(1), I(77), I(77), I(77)}) && strstr(tg_error(), "too many"), "too many: %s", tg_error());
  CHECK(!tg_getitem(t, 2, (tg_index[]){I(1), I(3)}) && strstr(tg_error(), "out of bounds") && strstr(tg_error(), "axis 1"),
        "out of bounds: %s", tg_error());
  CHECK(!tg_getitem(t, 2, (tg_index[]){I(1), I(-4)}) && strstr(tg_error(), "out of bounds"), "-4: %s", tg_error());
  CHECK(!tg_getitem(t, 2, (tg_index[]){ELL, ELL}) && strstr(tg_error(), "single ellipsis"), "two ellipses: %s", tg_error());
  CHECK(!tg_getitem(t, 2, (tg_index[]){S(E, E, 0), I(1)}), "step 0 must fail");
  CHECK(!tg_getitem(s, 1, (tg_index[]){ALL}), "slicing a 0-d tensor must fail");
  CHECK(!tg_getitem(s, 1, (tg_index[]){I(0)}), "indexing a 0-d tensor must fail");
  tg_free(t);
  tg_free(s);
  ref_free_all();
}

TEST(test_getitem_tensor_indices_match_numpy) {
  ref_seed(17);
  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(2, 5, 6, 5, 3, 4), -5, 5);
  /* tinygrad's _get_index_randoms: a in [-1, 0], b 0, c in [-5, 4] (some out of range), d in [0, 3], e 0 */
  ref_arr *ia = ref_rand(TG_INT32, SHAPE(2, 1, 1, 1, 1, 1), -1, 0), *ib = ref_rand(TG_INT32, SHAPE(1, 3, 1, 1, 1, 1), 0, 0);
  ref_arr *ic = ref_rand(TG_INT32, SHAPE(1, 1, 4, 1, 1, 1), -5, 4), *id = ref_rand(TG_INT32, SHAPE(2, 1, 1, 5, 1, 1), 0, 3);
  ref_arr *ie = ref_rand(TG_INT32, SHAPE(1, 1, 1, 1, 6, 1), 0, 0);
  ic->data[0] = 7;  /* out of range after the wrap: 0 as tinygrad */
  ref_arr *A[8];
#define ARR(...) (memcpy(A, (ref_arr *[]){__VA_ARGS__}, sizeof((ref_arr *[]){__VA_ARGS__})), A)
  CHECK_GETITEM("x[a,b,c,d,e]", x, ARR(ia, ib, ic, id, ie), TT, TT, TT, TT, TT);
  CHECK_GETITEM("x[:,b,c,d,:]", x, ARR(NULL, ib, ic, id, NULL), ALL, TT, TT, TT, ALL);
  CHECK_GETITEM("x[a,b,...]", x, ARR(ia, ib, NULL), TT, TT, ELL);
  CHECK_GETITEM("x[a,...,e]", x, ARR(ia, NULL, ie), TT, ELL, TT);
  CHECK_GETITEM("x[...,c,:,e]", x, ARR(NULL, ic, NULL, ie), ELL, TT, ALL, TT);
  CHECK_GETITEM("x[1,b,c,d,e]", x, ARR(NULL, ib, ic, id, ie), I(1), TT, TT, TT, TT);
  CHECK_GETITEM("x[a,b,3,d,e]", x, ARR(ia, ib, NULL, id, ie), TT, TT, I(3), TT, TT);
  CHECK_GETITEM("x[1,b,2,d,2]", x, ARR(NULL, ib, NULL, id, NULL), I(1), TT, I(2), TT, I(2));
  CHECK_GETITEM("x[a,2,2,2,e]", x, ARR(ia, NULL, NULL, NULL, ie), TT, I(2), I(2), I(2), TT);
  CHECK_GETITEM("x[1,:,3:11:2,d,0:2]", x, ARR(NULL, NULL, NULL, id, NULL), I(1), ALL, S(3, 11, 2), TT, S(0, 2, 1));
  CHECK_GETITEM("x[None,b,c,d,e]", x, ARR(NULL, ib, ic, id, ie), NEW, TT, TT, TT, TT);
  CHECK_GETITEM("x[a,b,None,d,e]", x, ARR(ia, ib, NULL, id, ie), TT, TT, NEW, TT, TT);
  CHECK_GETITEM("x[a,:,None,d,e]", x, ARR(ia, NULL, NULL, id, ie), TT, ALL, NEW, TT, TT);
  CHECK_GETITEM("x[None,None,b,c,None,None]", x, ARR(NULL, NULL, ib, ic, NULL, NULL), NEW, NEW, TT, TT, NEW, NEW);
  CHECK_GETITEM("x[1,b,None,d,1]", x, ARR(NULL, ib, NULL, id, NULL), I(1), TT, NEW, TT, I(1));
  CHECK_GETITEM("x[...,1,d,None]", x, ARR(NULL, NULL, id, NULL), ELL, I(1), TT, NEW);
  /* small 2-d cases of test_slice_fancy_indexing_with_tensors, 0-d and negative indices */
  ref_arr *y = ref_rand(TG_INT32, SHAPE(2, 3), -50, 50);
  ref_arr *z6 = ref_from(TG_INT32, SHAPE(2, 3), (double[]){0, 0, 0, 0, 0, 0}), *one = ref_scalar(TG_INT32, 1);
  ref_arr *neg = ref_from(TG_INT32, SHAPE(2, 3), (double[]){0, 1, -1, -1, -2, 0}), *v3 = ref_from(TG_INT32, SHAPE(3), (double[]){2, 1, -1});
  ref_arr *o1 = ref_from(TG_INT32, SHAPE(1), (double[]){1});
  CHECK_GETITEM("y[t2x3, 1]", y, ARR(z6, one), TT, TT);
  CHECK_GETITEM("y[[1], t2x3]", y, ARR(o1, z6), TT, TT);
  CHECK_GETITEM("y[neg, [2,1,-1]]", y, ARR(neg, v3), TT, TT);
  CHECK_GETITEM("y[:, neg]", y, ARR(NULL, neg), ALL, TT);
  /* separated indices go to the front: x[a, :, c] and a None between */
  ref_arr *w = ref_rand(TG_FLOAT32, SHAPE(3, 4, 5), -1, 1);
  ref_arr *i2 = ref_from(TG_INT32, SHAPE(2), (double[]){2, -1}), *i3 = ref_from(TG_INT32, SHAPE(3, 1), (double[]){4, 0, 1});
  CHECK_GETITEM("w[i2, :, i3]", w, ARR(i2, NULL, i3), TT, ALL, TT);
  CHECK_GETITEM("w[:, i2, i3]", w, ARR(NULL, i2, i3), ALL, TT, TT);
  CHECK_GETITEM("w[i2, None, i2]", w, ARR(i2, NULL, i2), TT, NEW, TT);
  CHECK_GETITEM("w[1:, i3, ::-2]", w, ARR(NULL, i3, NULL), S(1, E, 1), TT, S(E, E, -2));
  /* empty index tensors and empty axes */
  ref_arr *empty = ref_new(TG_INT32, 1, (int64_t[]){0}), *e2 = ref_rand(TG_FLOAT32, SHAPE(0, 3), -1, 1);
  CHECK_GETITEM("w[empty]", w, ARR(empty), TT);
  CHECK_GETITEM("w[:, empty, [1]]", w, ARR(NULL, empty, o1), ALL, TT, TT);
  CHECK_GETITEM("e2[:, i2]", e2, ARR(NULL, i2), ALL, TT);
  /* other index dtypes: int8 and int64 */
  ref_arr *i8 = ref_from(TG_INT8, SHAPE(3), (double[]){-1, 0, 2}), *i64 = ref_from(TG_INT64, SHAPE(2), (double[]){3, -4});
  CHECK_GETITEM("w[i8, i64]", w, ARR(i8, NULL), TT, ALL, I(1));
  CHECK_GETITEM("w[:, i64]", w, ARR(NULL, i64), ALL, TT);
  /* inf and nan pass through */
  ref_arr *f = ref_from(TG_FLOAT32, SHAPE(3), (double[]){INFINITY, -INFINITY, NAN}), *i012 = ref_from(TG_INT32, SHAPE(3), (double[]){0, 1, 2});
  tg_tensor *tf = ref_to_tg(f), *ti = ref_to_tg(i012), *r = tg_getitem(tf, 1, (tg_index[]){TG_IX_TENSOR(ti)});
  float got[3] = {0};
  CHECK(r && tg_to_host(r, got, sizeof got) == TG_OK && isinf(got[0]) && got[0] > 0 && isinf(got[1]) && got[1] < 0 && isnan(got[2]),
        "inf, -inf, nan: %g %g %g", got[0], got[1], got[2]);
  tg_free(r); tg_free(ti); tg_free(tf);

  /* errors: float and bool index tensors (tinygrad's IndexError), shapes that do not broadcast */
  tg_tensor *t = tg_ones(TG_FLOAT32, SHAPE(10, 11, 12)), *fl = tg_scalar(TG_FLOAT32, 1.1);
  tg_tensor *bo = tg_from_data(TG_BOOL, 1, (int64_t[]){2}, (bool[]){true, false}, 2);
  CHECK(!tg_getitem(t, 1, (tg_index[]){TG_IX_TENSOR(fl)}), "a float index must fail");
  CHECK(!tg_getitem(t, 1, (tg_index[]){TG_IX_TENSOR(bo)}) && strstr(tg_error(), "bool"), "a bool index tensor must fail");
  tg_tensor *r1 = tg_randint(TG_INT32, SHAPE(3, 1, 1, 1), 0, 3), *r2 = tg_randint(TG_INT32, SHAPE(1, 4, 1, 1), 0, 3);
  tg_tensor *r3 = tg_randint(TG_INT32, SHAPE(2, 4, 4, 1), 0, 3);
  CHECK(!tg_getitem(t, 3, (tg_index[]){TG_IX_TENSOR(r1), TG_IX_TENSOR(r2), TG_IX_TENSOR(r3)}), "shapes that do not broadcast");
  tg_free(r1); tg_free(r2); tg_free(r3); tg_free(bo); tg_free(fl); tg_free(t);
#undef ARR
  ref_free_all();
}

TEST(test_getitem_mask_nonzero_masked_select) {
  ref_seed(18);
  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(4, 5), -1, 1);
  tg_tensor *tx = ref_to_tg(x);
  tg_tensor *thr = tg_scalar(TG_FLOAT32, 0.2), *m = tg_gt(tx, thr);
  /* nonzero: (count, 2) int32 coordinates, row-major */
  int64_t cnt = 0;
  for (int64_t i = 0; i < 20; i++) cnt += x->data[i] > 0.2;
  ref_arr *want = ref_new(TG_INT32, 2, (int64_t[]){cnt, 2}), *sel = ref_new(TG_FLOAT32, 1, &cnt);
  for (int64_t i = 0, k = 0; i < 20; i++)
    if (x->data[i] > 0.2) { want->data[2 * k] = (double)(i / 5); want->data[2 * k + 1] = (double)(i % 5); sel->data[k++] = x->data[i]; }
  tg_tensor *nz = tg_nonzero(m);
  CHECK(nz && CHECK_REF("nonzero", nz, want), "nonzero: %s", tg_error());
  tg_tensor *ms = tg_masked_select(tx, m);
  CHECK(ms && CHECK_REF("masked_select", ms, sel), "masked_select: %s", tg_error());
  tg_tensor *gm = tg_getitem(tx, 1, (tg_index[]){TG_IX_MASK(m)});
  CHECK(gm && CHECK_REF("x[mask]", gm, sel), "x[mask]: %s", tg_error());
  /* a 1-d mask on the second axis: x[:, rowmask] */
  tg_tensor *cm = tg_from_data(TG_BOOL, 1, (int64_t[]){5}, (bool[]){true, false, false, true, true}, 5);
  tg_tensor *gc = tg_getitem(tx, 2, (tg_index[]){TG_IX_ALL, TG_IX_MASK(cm)});
  ref_arr *cols = ref_new(TG_FLOAT32, 2, (int64_t[]){4, 3});
  for (int i = 0; i < 4; i++) { cols->data[3 * i] = x->data[5 * i]; cols->data[3 * i + 1] = x->data[5 * i + 3]; cols->data[3 * i + 2] = x->data[5 * i + 4]; }
  CHECK(gc && CHECK_REF("x[:, mask]", gc, cols), "x[:, mask]: %s", tg_error());
  /* a mask broadcast to x (masked_select of Tensor(True)), nonzero of 0-d and of values with NaN */
  tg_tensor *all = tg_from_data(TG_BOOL, 0, NULL, (bool[]){true}, 1), *ma = tg_masked_select(tx, all);
  CHECK(ma && CHECK_REF("masked_select all", ma, ref_reshape(x, 1, (int64_t[]){20})), "all: %s", tg_error());
  for (int v = 0; v < 3; v++) {
    double vals[] = {0, 2.5, NAN};
    tg_tensor *s = tg_scalar(TG_FLOAT32, vals[v]), *n0 = tg_nonzero(s);
    CHECK(n0 && tg_ndim(n0) == 2 && tg_shape(n0, 0) == (v ? 1 : 0) && tg_shape(n0, 1) == 0, "nonzero of %g: (%lld, %lld)", vals[v],
          (long long)tg_shape(n0, 0), (long long)tg_shape(n0, 1));
    tg_free(n0);
    tg_free(s);
  }
  tg_tensor *ez = tg_zeros(TG_INT32, SHAPE(0, 3)), *nze = tg_nonzero(ez);
  CHECK(nze && tg_shape(nze, 0) == 0 && tg_shape(nze, 1) == 2, "nonzero of an empty (0, 3): (0, 2)");
  tg_tensor *nm = tg_masked_select(tx, tx);
  CHECK(!nm, "a float mask must fail");
  tg_tensor *wrong = tg_ones(TG_BOOL, SHAPE(3));
  CHECK(!tg_getitem(tx, 1, (tg_index[]){TG_IX_MASK(wrong)}), "a mask of the wrong shape must fail");
  tg_free(wrong); tg_free(nze); tg_free(ez); tg_free(ma); tg_free(all); tg_free(gc); tg_free(cm); tg_free(gm); tg_free(ms);
  tg_free(nz); tg_free(m); tg_free(thr); tg_free(tx);
  ref_free_all();
}

static tg_tensor *g_getitem_tensors(tg_tensor *x, const void *c) {
  (void)c;
  tg_tensor *i = tg_from_data(TG_INT32, 2, (int64_t[]){2, 2}, (int32_t[]){0, -1, 2, 0}, 16);
  tg_tensor *j = tg_from_data(TG_INT32, 1, (int64_t[]){2}, (int32_t[]){1, 1}, 8);
  return tg_getitem(x, 3, (tg_index[]){TG_IX_TENSOR(i), TG_IX_SLICE(TG_END, TG_END, -2), TG_IX_TENSOR(j)});
}
static tg_tensor *g_getitem_adjacent(tg_tensor *x, const void *c) {
  (void)c;
  tg_tensor *i = tg_from_data(TG_INT32, 1, (int64_t[]){3}, (int32_t[]){2, 2, -3}, 12);
  tg_tensor *j = tg_from_data(TG_INT32, 1, (int64_t[]){3}, (int32_t[]){0, 3, 1}, 12);
  return tg_getitem(x, 4, (tg_index[]){TG_IX_NONE, TG_IX_TENSOR(i), TG_IX_TENSOR(j), TG_IX_INT(-1)});
}

TEST(test_indexing_gradients_match_finite_differences) {
  ref_seed(19);
  CHECK_GRAD("roll", g_roll, NULL, 3, (int64_t[]){3, 2, 4});
  CHECK_GRAD("diagonal", g_diagonal, NULL, 3, (int64_t[]){4, 2, 3});
  CHECK_GRAD("diag", g_diag, NULL, 1, (int64_t[]){3});
  CHECK_GRAD("unfold", g_unfold, NULL, 2, (int64_t[]){2, 7});
  CHECK_GRAD("repeat_interleave", g_repint, NULL, 2, (int64_t[]){2, 3});
  gpad pads[] = {{TG_PAD_REFLECT, {2, 1, -1, 2}}, {TG_PAD_REPLICATE, {3, -1, 2, 0}}, {TG_PAD_CIRCULAR, {1, 3, 2, -1}}};
  for (int i = 0; i < 3; i++) CHECK_GRAD("pad mode", g_pad, &pads[i], 2, (int64_t[]){3, 4});
  CHECK_GRAD("getitem separated tensors", g_getitem_tensors, NULL, 3, (int64_t[]){3, 4, 2});
  CHECK_GRAD("getitem adjacent tensors", g_getitem_adjacent, NULL, 3, (int64_t[]){3, 4, 2});
  ref_free_all();
}

/* t[ix] = v on a realized copy of a, against the reference */
static void check_setitem(const char *what, const ref_arr *a, const ref_arr *v, int n, const tg_index *ix, ref_arr *const *arrs,
                          const char *file, int line) {
  tg_index tix[40];
  tg_tensor *ts[40] = {0};
  for (int k = 0; k < n; k++) {
    tix[k] = ix[k];
    if (ix[k].kind == TG_INDEX_TENSOR) tix[k].tensor = ts[k] = ref_to_tg(arrs[k]);
  }
  tg_tensor *t = tg_contiguous(ref_to_tg(a)), *tv = ref_to_tg(v);
  tg_realize(t);
  ref_arr *want = ref_setitem(a, n, ix, arrs, v);
  if (tg_setitem(t, n, tix, tv) != TG_OK) test_fail(file, line, "%s: tg_setitem failed: %s", what, tg_error());
  else if (!want) test_fail(file, line, "%s: the reference refused it", what);
  else ref_check_tol(what, t, want, true, 0, 0, file, line);
  tg_free(t);
  tg_free(tv);
  for (int k = 0; k < n; k++) tg_free(ts[k]);
}
#define CHECK_SETITEM(what, a, v, arrs, ...)                                                                  \
  check_setitem(what, a, v, (int)(sizeof((tg_index[]){__VA_ARGS__}) / sizeof(tg_index)), (tg_index[]){__VA_ARGS__}, \
                arrs, __FILE__, __LINE__)

TEST(test_setitem_matches_numpy) {
  ref_seed(20);
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 5, 3), -5, 5), *A[4];
#define ARR(...) (memcpy(A, (ref_arr *[]){__VA_ARGS__}, sizeof((ref_arr *[]){__VA_ARGS__})), A)
  ref_arr *v0 = ref_scalar(TG_FLOAT32, 9.5), *vrow = ref_rand(TG_FLOAT32, SHAPE(3), -1, 1);
  CHECK_SETITEM("a[1] = 9.5", a, v0, NULL, I(1));
  CHECK_SETITEM("a[1:3, ::2] = row", a, vrow, NULL, S(1, 3, 1), S(E, E, 2));
  CHECK_SETITEM("a[::-2, -1, 0] = 9.5", a, v0, NULL, S(E, E, -2), I(-1), I(0));
  CHECK_SETITEM("a[..., None, 1:] = row[:2]", a, ref_shrink(vrow, (int64_t[]){0, 2}), NULL, ELL, NEW, S(1, E, 1));
  CHECK_SETITEM("a[4:1:-3, 1::3] = 9.5", a, v0, NULL, S(4, 1, -3), S(1, E, 3));
  CHECK_SETITEM("a[5:] = 9.5 (nothing)", a, v0, NULL, S(5, E, 1));
  /* tensor indices: repeated positions take the last value */
  ref_arr *i1 = ref_from(TG_INT32, SHAPE(4), (double[]){0, 2, -1, 0}), *vals = ref_rand(TG_FLOAT32, SHAPE(4, 5, 3), -1, 1);
  CHECK_SETITEM("a[[0,2,-1,0]] = v", a, ref_shrink(vals, (int64_t[]){0, 4, 0, 5, 0, 3}), ARR(i1), TT);
  ref_arr *i2 = ref_from(TG_INT32, SHAPE(2, 2), (double[]){1, 4, 4, 0}), *i3 = ref_from(TG_INT32, SHAPE(2), (double[]){2, 2});
  ref_arr *v22 = ref_rand(TG_FLOAT32, SHAPE(2, 2), -1, 1);
  CHECK_SETITEM("a[1:3, i2, i3] = v", a, ref_rand(TG_FLOAT32, SHAPE(2, 2, 2), -1, 1), ARR(NULL, i2, i3), S(1, 3, 1), TT, TT);
  CHECK_SETITEM("a[i3, :, i3] = v", a, ref_rand(TG_FLOAT32, SHAPE(2, 5), -1, 1), ARR(i3, NULL, i3), TT, ALL, TT);
  CHECK_SETITEM("a[0, i2] = v", a, ref_expand(ref_reshape(v22, 3, (int64_t[]){2, 2, 1}), 3, (int64_t[]){2, 2, 3}), ARR(NULL, i2), I(0), TT);
  ref_arr *i0 = ref_scalar(TG_INT32, -2);
  CHECK_SETITEM("a[t0] = 9.5", a, v0, ARR(i0), TT);
  /* int dtypes exactly, and the dtype rule */
  ref_arr *ai = ref_rand(TG_INT32, SHAPE(6), -100, 100), *vi = ref_scalar(TG_INT32, 77);
  CHECK_SETITEM("int a[1::2] = 77", ai, vi, NULL, S(1, E, 2));
  tg_tensor *t = tg_contiguous(ref_to_tg(ai)), *vf = tg_scalar(TG_FLOAT32, 1);
  tg_realize(t);
  CHECK(tg_setitem(t, 1, (tg_index[]){I(0)}, vf) != TG_OK, "a float value into an int tensor must fail");
  CHECK(tg_setitem_scalar(t, 1, (tg_index[]){I(-1)}, -5) == TG_OK, "setitem_scalar: %s", tg_error());
  int32_t got[6];
  CHECK(tg_to_host(t, got, sizeof got) == TG_OK && got[5] == -5 && got[0] == (int32_t)ai->data[0], "setitem_scalar wrote %d", got[5]);
  CHECK(tg_setitem_scalar(t, 1, (tg_index[]){I(6)}, 1) != TG_OK, "an index out of range must fail");
  tg_free(vf);
  tg_free(t);
#undef ARR
  ref_free_all();
}

/* ---- scatter ---------------------------------------------------------------------------------------------------- */

/* PyTorch's scatter / scatter_reduce on ref arrays: every index position p sends src[p] to p with dim replaced by
 * index[p]; op -1: the last one wins */
static ref_arr *ref_scatter(const ref_arr *x, int dim, const ref_arr *index, const ref_arr *src, int op, bool include_self) {
  int nd = x->ndim;
  dim = dim < 0 ? dim + nd : dim;
  ref_arr *r = ref_copy(x);
  double *cnt = calloc((size_t)(x->numel + 1), sizeof *cnt);
  int64_t p[TG_MAX_DIMS] = {0};
  for (int64_t q = 0; q < index->numel; q++) {
    int64_t to = 0, so = 0;
    for (int d = 0; d < nd; d++) {
      to = to * x->shape[d] + (d == dim ? (int64_t)index->data[q] : p[d]);
      so = so * src->shape[d] + p[d];
    }
    double v = src->data[so];
    if (op != -1 && cnt[to] == 0 && !include_self) r->data[to] = v;
    else if (op == -1) r->data[to] = v;
    else if (op == TG_SCATTER_SUM || op == TG_SCATTER_MEAN) r->data[to] += v;
    else if (op == TG_SCATTER_PROD) r->data[to] *= v;
    else if (op == TG_SCATTER_AMAX) r->data[to] = v > r->data[to] ? v : r->data[to];
    else r->data[to] = v < r->data[to] ? v : r->data[to];
    cnt[to] += 1;
    for (int d = nd - 1; d >= 0; d--) {
      if (++p[d] < index->shape[d]) break;
      p[d] = 0;
    }
  }
  if (op == TG_SCATTER_MEAN)
    for (int64_t i = 0; i < x->numel; i++)
      if (cnt[i]) r->data[i] = ref_round(x->dtype, r->data[i] / (cnt[i] + (include_self ? 1 : 0)));
  for (int64_t i = 0; i < x->numel; i++) r->data[i] = ref_round(x->dtype, r->data[i]);
  free(cnt);
  return r;
}

TEST(test_scatter_matches_reference) {
  ref_seed(21);
  ref_arr *idx = ref_rand(TG_INT32, SHAPE(3, 4, 5), 0, 2);
  tg_tensor *ti = ref_to_tg(idx);
  for (int dim = -3; dim <= 2; dim++) {
    ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(4, 5, 6), -2, 2), *src = ref_rand(TG_FLOAT32, SHAPE(4, 5, 6), -2, 2);
    tg_tensor *tx = ref_to_tg(x), *ts = ref_to_tg(src), *r = tg_scatter(tx, dim, ti, ts);
    char what[64];
    snprintf(what, sizeof what, "scatter dim %d", dim);
    CHECK(r && CHECK_REF(what, r, ref_scatter(x, dim, idx, src, -1, true)), "%s: %s", what, tg_error());
    tg_free(r);
    for (int op = TG_SCATTER_SUM; op <= TG_SCATTER_AMIN; op++)
      for (int self = 0; self < 2; self++) {
        ref_arr *x3 = ref_rand(TG_FLOAT32, SHAPE(3, 4, 5), -2, 2), *s3 = ref_rand(TG_FLOAT32, SHAPE(3, 4, 5), -2, 2);
        tg_tensor *tx3 = ref_to_tg(x3), *ts3 = ref_to_tg(s3);
        r = tg_scatter_reduce(tx3, dim, ti, ts3, (tg_scatter_reduce_op)op, self);
        snprintf(what, sizeof what, "scatter_reduce op %d self %d dim %d", op, self, dim);
        CHECK(r && CHECK_REF(what, r, ref_scatter(x3, dim, idx, s3, op, self)), "%s: %s", what, tg_error());
        tg_free(r); tg_free(tx3); tg_free(ts3);
      }
    tg_free(tx); tg_free(ts);
  }
  /* int dtype exactly, a scalar src with add and multiply, overlapping writes of [0, 0] */
  ref_arr *xi = ref_rand(TG_INT32, SHAPE(4, 5), -9, 9), *ii = ref_rand(TG_INT32, SHAPE(2, 5), 0, 3);
  tg_tensor *txi = ref_to_tg(xi), *tii = ref_to_tg(ii);
  ref_arr *full = ref_full(TG_INT32, SHAPE(2, 5), 3);
  tg_tensor *ra = tg_scatter_scalar(txi, 0, tii, 3, TG_SCATTER_SUM), *rm = tg_scatter_scalar(txi, 0, tii, 3, TG_SCATTER_PROD);
  tg_tensor *rn = tg_scatter_scalar(txi, 0, tii, 3, -1);
  CHECK(ra && CHECK_REF("scatter add", ra, ref_scatter(xi, 0, ii, full, TG_SCATTER_SUM, true)), "add: %s", tg_error());
  CHECK(rm && CHECK_REF("scatter multiply", rm, ref_scatter(xi, 0, ii, full, TG_SCATTER_PROD, true)), "mul: %s", tg_error());
  CHECK(rn && CHECK_REF("scatter scalar", rn, ref_scatter(xi, 0, ii, full, -1, true)), "none: %s", tg_error());
  ref_arr *si = ref_rand(TG_INT32, SHAPE(2, 5), -20, 20);
  tg_tensor *tsi = ref_to_tg(si);
  for (int op = TG_SCATTER_AMAX; op <= TG_SCATTER_AMIN; op++)
    for (int self = 0; self < 2; self++) {
      tg_tensor *ri = tg_scatter_reduce(txi, 0, tii, tsi, (tg_scatter_reduce_op)op, self);
      CHECK(ri && CHECK_REF("int scatter_reduce", ri, ref_scatter(xi, 0, ii, si, op, self)), "int op %d: %s", op, tg_error());
      tg_free(ri);
    }
  tg_free(tsi);
  ref_arr *x4 = ref_from(TG_FLOAT32, SHAPE(4), (double[]){1, 2, 3, 4}), *s2 = ref_from(TG_FLOAT32, SHAPE(2), (double[]){1, 0});
  ref_arr *i00 = ref_from(TG_INT32, SHAPE(2), (double[]){0, 0});
  tg_tensor *tx4 = ref_to_tg(x4), *ts2 = ref_to_tg(s2), *ti00 = ref_to_tg(i00), *ro = tg_scatter(tx4, 0, ti00, ts2);
  CHECK(ro && CHECK_REF("scatter overlapping", ro, ref_from(TG_FLOAT32, SHAPE(4), (double[]){0, 2, 3, 4})), "overlap: %s", tg_error());
  /* errors: index larger than x off dim, dtype mismatch, a bad reduce */
  tg_tensor *small = tg_zeros(TG_FLOAT32, SHAPE(2, 3, 10)), *big = tg_zeros(TG_FLOAT32, SHAPE(10, 10, 10)), *half = tg_zeros(TG_FLOAT16, SHAPE(3, 4, 5));
  tg_tensor *src345 = tg_zeros(TG_FLOAT32, SHAPE(3, 4, 5));
  CHECK(!tg_scatter(small, 1, ti, big), "index larger than x off dim must fail");
  CHECK(!tg_scatter(half, 1, ti, src345), "a dtype mismatch must fail");
  CHECK(!tg_scatter_reduce(src345, 0, ti, src345, (tg_scatter_reduce_op)9, true), "a bad reduce must fail");
  CHECK(!tg_scatter_scalar(src345, 0, ti, 1, 5), "a bad scalar reduce must fail");
  tg_free(small); tg_free(big); tg_free(half); tg_free(src345);
  tg_free(ro); tg_free(tx4); tg_free(ts2); tg_free(ti00);
  tg_free(ra); tg_free(rm); tg_free(rn); tg_free(txi); tg_free(tii); tg_free(ti);
  ref_free_all();
}
