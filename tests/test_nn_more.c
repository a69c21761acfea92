/* test_nn_more.c — the nn ops of issue 14 against PyTorch's golden values, plain C references and finite
 * differences: interpolate in every mode (align_corners), max_pool2d's indices and max_unpool2d, normalize,
 * einsum, attention with grouped heads and dropout, and per-side padding of convolutions and pools.
 *
 * tests/fixtures/nn_more.bin is written by tests/fixtures/make_nn_more_fixtures.py (PyTorch, CPU); the
 * formulas of the einsum cases are listed here in the script's order. Tolerance atol 1e-5 / rtol 1e-3 as
 * test_nn_ops.c (sums of N(0, 1) products); gradients atol 1e-4 / rtol 1e-3 in float64. */
#include <stdarg.h>
#include <stdlib.h>

#include "fixture.h"
#include "test.h"

#define ATOL 1e-5
#define RTOL 1e-3

/* ---- fixtures (the format of make_nn_fixtures.py) ------------------------------------------------------- */

#define CHECK_FX(what, got, want) check_fx(what, got, want, ATOL, RTOL, __FILE__, __LINE__)

#define NN_TEST(name) FIXTURE_TEST(name, "nn_more.bin")

static void expect_error(tg_tensor *t, const char *needle, const char *file, int line) {
  if (t) test_fail(file, line, "expected an error naming \"%s\", got a tensor", needle);
  else if (!strstr(tg_error(), needle)) test_fail(file, line, "the message does not name \"%s\": %s", needle, tg_error());
}
#define EXPECT_ERR(t, needle) expect_error(t, needle, __FILE__, __LINE__)

/* ---- gradients by central differences in float64 ------------------------------------------------------- */

typedef tg_tensor *(*fn1)(tg_tensor *x, const void *ctx);

static uint64_t rs = 0x9E3779B97F4A7C15ULL;
static double urand(double lo, double hi) {
  rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
  return lo + (hi - lo) * (double)(rs >> 11) / 9007199254740992.0;
}

/* sum(f(x) * w) for a fixed w of f(x)'s shape (made on the first call: *w NULL) */
static double fd_loss(fn1 fun, const void *ctx, int nd, const int64_t *sh, const double *x, int64_t n, double **w) {
  tg_scope_begin();
  tg_tensor *y = fun(tg_from_data(TG_FLOAT64, nd, sh, x, (size_t)n * 8), ctx);
  double r = NAN;
  if (y) {
    int64_t ny = tg_numel(y);
    if (!*w) {
      *w = malloc((size_t)ny * 8 + 8);
      for (int64_t i = 0; i < ny; i++) (*w)[i] = urand(-1, 1);
    }
    r = tg_item(tg_sum(tg_mul(tg_cast(y, TG_FLOAT64), tg_from_data(TG_FLOAT64, tg_ndim(y), tg_shape_ptr(y), *w, (size_t)ny * 8)),
                       0, NULL, false));
  }
  tg_scope_end();
  return r;
}

static void check_grad(const char *what, fn1 fun, const void *ctx, int nd, const int64_t *sh, double lo, double hi,
                       const char *file, int line) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  double *x = malloc((size_t)n * 8 + 8), *g = calloc((size_t)n + 1, 8), *w = NULL;
  for (int64_t i = 0; i < n; i++) x[i] = urand(lo, hi);
  if (isnan(fd_loss(fun, ctx, nd, sh, x, n, &w))) {
    test_fail(file, line, "%s: forward failed: %s", what, tg_error());
    goto out;
  }
  tg_scope_begin();
  tg_tensor *tx = tg_set_requires_grad(tg_from_data(TG_FLOAT64, nd, sh, x, (size_t)n * 8), true);
  tg_tensor *y = tg_cast(fun(tx, ctx), TG_FLOAT64);
  tg_tensor *loss = tg_sum(tg_mul(y, tg_from_data(TG_FLOAT64, tg_ndim(y), tg_shape_ptr(y), w, (size_t)tg_numel(y) * 8)), 0, NULL, false);
  bool ok = tg_backward(loss) == TG_OK && tg_grad(tx) && tg_to_host(tg_grad(tx), g, (size_t)n * 8) == TG_OK;
  tg_scope_end();
  if (!ok) {
    test_fail(file, line, "%s: backward failed: %s", what, tg_error());
    goto out;
  }
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 3; i++) {
    double keep = x[i], e = 1e-6;
    x[i] = keep + e;
    double lp = fd_loss(fun, ctx, nd, sh, x, n, &w);
    x[i] = keep - e;
    double lm = fd_loss(fun, ctx, nd, sh, x, n, &w);
    x[i] = keep;
    double fd = (lp - lm) / (2 * e);
    if (!(fabs(fd - g[i]) <= 1e-4 + 1e-3 * fabs(fd))) {
      test_fail(file, line, "%s: d/dx[%lld]: analytic %.9g, finite differences %.9g", what, (long long)i, g[i], fd);
      bad++;
    }
  }
out:
  free(x);
  free(g);
  free(w);
}
#define CHECK_GRAD(what, fun, ctx, nd, sh, lo, hi) check_grad(what, fun, ctx, nd, sh, lo, hi, __FILE__, __LINE__)

/* ---- interpolate ---------------------------------------------------------------------------------------- */

static const tg_interp_mode modes[3] = {TG_INTERP_NEAREST, TG_INTERP_LINEAR, TG_INTERP_NEAREST_EXACT};

NN_TEST(test_nn_more_interpolate_every_mode_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "interp/%d/x", i); i++, n++) {
    const fx_rec *p = fx_get(f, "interp/%d/p", i);
    int nd = (int)fx_param(p, 2);
    int64_t size[3];
    for (int j = 0; j < nd; j++) size[j] = (int64_t)fx_param(p, 3 + j);
    char what[64];
    snprintf(what, sizeof what, "interpolate case %d (mode %d, align_corners %d)", i, (int)fx_param(p, 0), (int)fx_param(p, 1));
    tg_tensor *y = tg_interpolate(fx_tensor(fx_get(f, "interp/%d/x", i)), nd, size, modes[(int)fx_param(p, 0)], fx_param(p, 1) != 0);
    CHECK_FX(what, y, fx_get(f, "interp/%d/y", i));
  }
  CHECK(n >= 18, "only %d cases", n);
}

TEST(test_nn_more_interpolate_integers_and_errors) {
  tg_scope_begin();
  /* int32 linear: blended in float32, truncated back (plain C reference) */
  int32_t xv[4] = {0, 10, 21, 40};
  tg_tensor *x = tg_from_data(TG_INT32, 1, (int64_t[]){4}, xv, sizeof xv);
  tg_tensor *y = tg_interpolate(x, 1, (int64_t[]){7}, TG_INTERP_LINEAR, true);
  int32_t got[7];
  CHECK(y && tg_dtype_of(y) == TG_INT32 && tg_to_host(y, got, sizeof got) == TG_OK, "int linear: %s", tg_error());
  for (int i = 0; i < 7; i++) {
    double pos = i * 3.0 / 6.0;
    int lo = (int)pos, hi = lo + (pos > lo);
    int32_t want = (int32_t)(float)(xv[lo] + (xv[hi] - xv[lo]) * (float)(pos - lo));
    CHECK(got[i] == want, "int linear [%d]: %d, want %d", i, got[i], want);
  }
  /* nearest-exact on uint8 keeps the dtype and picks floor((i + 0.5) * in / out) */
  uint8_t uv[5] = {1, 2, 3, 4, 5}, ug[3];
  tg_tensor *u = tg_interpolate(tg_from_data(TG_UINT8, 2, (int64_t[]){1, 5}, uv, 5), 1, (int64_t[]){3}, TG_INTERP_NEAREST_EXACT, false);
  CHECK(u && tg_dtype_of(u) == TG_UINT8 && tg_to_host(u, ug, 3) == TG_OK, "uint8 nearest-exact: %s", tg_error());
  for (int i = 0; i < 3; i++) CHECK(ug[i] == uv[(int)floor((i + 0.5) * 5.0 / 3.0)], "nearest-exact [%d] = %d", i, ug[i]);
  /* a size-0 batch resizes to a size-0 result */
  tg_tensor *e = tg_interpolate(tg_zeros(TG_FLOAT32, 3, (int64_t[]){0, 2, 4}), 1, (int64_t[]){6}, TG_INTERP_LINEAR, false);
  CHECK(e && tg_shape(e, 0) == 0 && tg_shape(e, 2) == 6, "empty batch: %s", tg_error());
  tg_tensor *z = tg_zeros(TG_FLOAT32, 3, (int64_t[]){1, 2, 4});
  EXPECT_ERR(tg_interpolate(z, 1, (int64_t[]){6}, TG_INTERP_NEAREST, true), "align_corners");
  EXPECT_ERR(tg_interpolate(z, 1, (int64_t[]){6}, TG_INTERP_NEAREST_EXACT, true), "align_corners");
  EXPECT_ERR(tg_interpolate(z, 1, (int64_t[]){6}, (tg_interp_mode)7, false), "mode");
  EXPECT_ERR(tg_interpolate(z, 4, (int64_t[]){1, 1, 1, 1}, TG_INTERP_LINEAR, false), "tg_interpolate");
  EXPECT_ERR(tg_interpolate(z, 1, (int64_t[]){0}, TG_INTERP_LINEAR, false), "tg_interpolate");
  tg_scope_end();
}

typedef struct interp_ctx { int nd; int64_t size[3]; tg_interp_mode mode; bool align; } interp_ctx;
static tg_tensor *f_interp(tg_tensor *x, const void *c) {
  const interp_ctx *p = c;
  return tg_interpolate(x, p->nd, p->size, p->mode, p->align);
}

TEST(test_nn_more_interpolate_gradients) {
  interp_ctx a = {2, {5, 2}, TG_INTERP_LINEAR, true}, b = {1, {7}, TG_INTERP_NEAREST_EXACT, false},
             c = {3, {3, 4, 2}, TG_INTERP_LINEAR, false};
  CHECK_GRAD("bilinear align_corners", f_interp, &a, 4, ((int64_t[]){1, 2, 3, 4}), -1, 1);
  CHECK_GRAD("nearest-exact", f_interp, &b, 3, ((int64_t[]){2, 1, 4}), -1, 1);
  CHECK_GRAD("trilinear", f_interp, &c, 5, ((int64_t[]){1, 1, 2, 3, 3}), -1, 1);
}

/* ---- max_pool2d indices and max_unpool2d ---------------------------------------------------------------- */

/* p = [k x2, stride x2, dilation x2, padding x2, ceil, output_size x2 (0: none)] */
static tg_pool_opts mpi_opts(const fx_rec *p) {
  tg_pool_opts o = tg_pool_defaults();
  o.kernel = TG_INTS((int64_t)fx_param(p, 0), (int64_t)fx_param(p, 1));
  o.stride = TG_INTS((int64_t)fx_param(p, 2), (int64_t)fx_param(p, 3));
  o.dilation = TG_INTS((int64_t)fx_param(p, 4), (int64_t)fx_param(p, 5));
  o.padding = TG_INTS((int64_t)fx_param(p, 6), (int64_t)fx_param(p, 7));
  o.ceil_mode = fx_param(p, 8) != 0;
  return o;
}

NN_TEST(test_nn_more_max_pool_indices_and_unpool_match_pytorch) {
  int n = 0, nu = 0;
  for (int i = 0; fx_get(f, "mpi/%d/x", i); i++, n++) {
    const fx_rec *p = fx_get(f, "mpi/%d/p", i);
    tg_pool_opts o = mpi_opts(p);
    tg_tensor *v = NULL, *idx = NULL;
    char what[64];
    snprintf(what, sizeof what, "max_pool2d_with_indices case %d", i);
    tg_status st = tg_max_pool2d_with_indices(fx_tensor(fx_get(f, "mpi/%d/x", i)), o, &v, &idx);
    CHECK(st == TG_OK, "%s: %s", what, tg_error());
    if (st != TG_OK) continue;
    CHECK(tg_dtype_of(idx) == TG_INT32, "%s: indices are %s", what, tg_dtype_name(tg_dtype_of(idx)));
    CHECK_FX(what, v, fx_get(f, "mpi/%d/v", i));
    CHECK_FX(what, idx, fx_get(f, "mpi/%d/i", i));
    /* the plain max pool gives the same values */
    CHECK_FX(what, tg_max_pool2d(fx_tensor(fx_get(f, "mpi/%d/x", i)), o), fx_get(f, "mpi/%d/v", i));
    const fx_rec *u = fx_get(f, "mpi/%d/u", i);
    if (!u) continue;
    nu++;
    int64_t osz[4] = {99, 99, (int64_t)fx_param(p, 9), (int64_t)fx_param(p, 10)};  /* N and C of output_size are ignored */
    snprintf(what, sizeof what, "max_unpool2d case %d", i);
    tg_tensor *y = osz[2] ? tg_max_unpool2d(v, idx, o, 4, osz) : tg_max_unpool2d(v, idx, o, 0, NULL);
    CHECK_FX(what, y, u);
  }
  CHECK(n >= 8 && nu >= 5, "only %d / %d cases", n, nu);
}

TEST(test_nn_more_max_pool_indices_edges) {
  tg_scope_begin();
  /* tinygrad's test_max_unpool2d_inf: inf, -inf and NaN in the input */
  float xv[6] = {INFINITY, -INFINITY, NAN, 1, 2, 3};
  tg_tensor *x = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, 2, 3}, xv, sizeof xv), *v, *idx;
  CHECK(tg_max_pool2d_with_indices(x, tg_pool_defaults(), &v, &idx) == TG_OK, "%s", tg_error());
  float uv[6];
  int32_t iv;
  CHECK(tg_to_host(idx, &iv, 4) == TG_OK && iv == 0, "index of inf: %d", iv);
  /* (2 - 1) * 2 + 1 * (2 - 1) + 1: a (2, 2) plane with inf at 0 */
  CHECK(tg_to_host(tg_max_unpool2d(v, idx, tg_pool_defaults(), 0, NULL), uv, 4 * 4) == TG_OK, "%s", tg_error());
  CHECK(isinf(uv[0]) && uv[0] > 0 && uv[1] == 0 && uv[2] == 0 && uv[3] == 0, "unpool: %g %g %g %g", uv[0], uv[1], uv[2], uv[3]);
  /* an index given twice adds up, as tinygrad's one-hot sum (PyTorch writes it once) */
  float two[2] = {2, 5}, sum4[4];
  int32_t same[2] = {3, 3};
  tg_tensor *su = tg_max_unpool2d(tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, 1, 2}, two, sizeof two),
                                  tg_from_data(TG_INT32, 4, (int64_t[]){1, 1, 1, 2}, same, sizeof same), tg_pool_defaults(), 2,
                                  (int64_t[]){2, 2});
  CHECK(tg_to_host(su, sum4, sizeof sum4) == TG_OK && sum4[0] == 0 && sum4[2] == 0 && sum4[3] == 7, "repeated index: %s", tg_error());
  /* int32 with padding (plain C): the padded border never wins; ties take the first position */
  int32_t a[12] = {5, 5, 1, 7, 2, 7, 7, 0, -3, -3, -3, -3}, av[12], ai[12];
  tg_pool_opts o = tg_pool_defaults();
  o.kernel = TG_INTS(2);
  o.stride = TG_INTS(2);
  o.padding = TG_INTS(1);
  tg_tensor *t = tg_from_data(TG_INT32, 3, (int64_t[]){1, 3, 4}, a, sizeof a);
  CHECK(tg_max_pool2d_with_indices(t, o, &v, &idx) == TG_OK, "%s", tg_error());
  CHECK(tg_shape(v, 1) == 2 && tg_shape(v, 2) == 3 && tg_dtype_of(v) == TG_INT32, "shape (%lld, %lld)",
        (long long)tg_shape(v, 1), (long long)tg_shape(v, 2));
  CHECK(tg_to_host(v, av, 6 * 4) == TG_OK && tg_to_host(idx, ai, 6 * 4) == TG_OK, "%s", tg_error());
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) {
      int best = -1;
      for (int dr = 0; dr < 2; dr++)
        for (int dc = 0; dc < 2; dc++) {
          int rr = 2 * r - 1 + dr, cc = 2 * c - 1 + dc;
          if (rr < 0 || rr >= 3 || cc < 0 || cc >= 4) continue;
          int k = rr * 4 + cc;
          if (best < 0 || a[k] > a[best] || (a[k] == a[best] && k < best)) best = k;
        }
      CHECK(av[r * 3 + c] == a[best] && ai[r * 3 + c] == best, "window (%d, %d): %d at %d, want %d at %d", r, c,
            av[r * 3 + c], ai[r * 3 + c], a[best], best);
    }
  /* errors */
  tg_tensor *i64 = tg_zeros(TG_INT64, 4, (int64_t[]){1, 1, 2, 2}), *f4 = tg_zeros(TG_FLOAT32, 4, (int64_t[]){1, 1, 2, 2});
  EXPECT_ERR(tg_max_unpool2d(f4, tg_zeros(TG_FLOAT32, 4, (int64_t[]){1, 1, 2, 2}), tg_pool_defaults(), 0, NULL), "indices");
  EXPECT_ERR(tg_max_unpool2d(f4, tg_zeros(TG_INT32, 4, (int64_t[]){1, 1, 2, 3}), tg_pool_defaults(), 0, NULL), "indices");
  EXPECT_ERR(tg_max_unpool2d(tg_zeros(TG_FLOAT32, 2, (int64_t[]){2, 2}), i64, tg_pool_defaults(), 0, NULL), "tg_max_unpool2d");
  EXPECT_ERR(tg_max_unpool2d(f4, i64, tg_pool_defaults(), 1, (int64_t[]){4}), "output_size");
  CHECK(tg_max_pool2d_with_indices(f4, tg_pool_defaults(), NULL, &idx) != TG_OK, "NULL values accepted");
  CHECK(tg_max_pool2d_with_indices(NULL, tg_pool_defaults(), &v, &idx) != TG_OK && !v && !idx, "NULL input accepted");
  o.padding = TG_INTS(1, 1, 1);
  CHECK(tg_max_pool2d_with_indices(f4, o, &v, &idx) != TG_OK && strstr(tg_error(), "padding"), "3 paddings: %s", tg_error());
  tg_scope_end();
}

static tg_tensor *f_pool_values(tg_tensor *x, const void *c) {
  tg_tensor *v, *i;
  return tg_max_pool2d_with_indices(x, *(const tg_pool_opts *)c, &v, &i) == TG_OK ? v : NULL;
}
static tg_tensor *f_unpool(tg_tensor *x, const void *c) {
  /* indices fixed (from a constant input), the values differentiable */
  int32_t iv[4] = {0, 3, 7, 8};
  tg_tensor *idx = tg_from_data(TG_INT32, 4, (int64_t[]){1, 1, 2, 2}, iv, sizeof iv);
  return tg_max_unpool2d(x, idx, *(const tg_pool_opts *)c, 0, NULL);
}

TEST(test_nn_more_max_pool_indices_gradients) {
  tg_pool_opts o = tg_pool_defaults();
  o.kernel = TG_INTS(3);
  o.stride = TG_INTS(2);
  o.padding = TG_INTS(1, 0, 0, 1);
  CHECK_GRAD("max_pool2d_with_indices values", f_pool_values, &o, 4, ((int64_t[]){1, 2, 5, 4}), -1, 1);
  tg_pool_opts u = tg_pool_defaults();
  CHECK_GRAD("max_unpool2d", f_unpool, &u, 4, ((int64_t[]){1, 1, 2, 2}), -1, 1);
}

/* ---- normalize ------------------------------------------------------------------------------------------ */

NN_TEST(test_nn_more_normalize_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "normalize/%d/x", i); i++, n++) {
    const fx_rec *p = fx_get(f, "normalize/%d/p", i);
    char what[64];
    snprintf(what, sizeof what, "normalize case %d (p %g, dim %d)", i, fx_param(p, 0), (int)fx_param(p, 1));
    tg_tensor *y = tg_normalize(fx_tensor(fx_get(f, "normalize/%d/x", i)), fx_param(p, 0), (int)fx_param(p, 1), 1e-12);
    CHECK_FX(what, y, fx_get(f, "normalize/%d/y", i));
  }
  CHECK(n >= 10, "only %d cases", n);
}

typedef struct norm_ctx { double p; int dim; } norm_ctx;
static tg_tensor *f_normalize(tg_tensor *x, const void *c) {
  const norm_ctx *n = c;
  return tg_normalize(x, n->p, n->dim, 1e-12);
}

TEST(test_nn_more_normalize_edges_and_gradients) {
  tg_scope_begin();
  /* an all-zero row stays 0 (eps), an int input gives float32 (plain C) */
  int32_t xv[6] = {3, 4, 0, 0, 0, 0};
  float got[6];
  tg_tensor *y = tg_normalize(tg_from_data(TG_INT32, 2, (int64_t[]){2, 3}, xv, sizeof xv), 2, -1, 1e-12);
  CHECK(y && tg_dtype_of(y) == TG_FLOAT32 && tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  float want[6] = {0.6f, 0.8f, 0, 0, 0, 0};
  CHECK_CLOSE("normalize int rows", got, want, 6);
  tg_tensor *e = tg_normalize(tg_zeros(TG_FLOAT32, 2, (int64_t[]){0, 3}), 2, 1, 1e-12);
  CHECK(e && tg_shape(e, 0) == 0, "empty: %s", tg_error());
  EXPECT_ERR(tg_normalize(tg_zeros(TG_FLOAT32, 1, (int64_t[]){3}), 2, 1, 1e-12), "tg_normalize");
  tg_scope_end();
  norm_ctx a = {2, 1}, b = {3, 0}, c = {1, -1}, d = {-1, 1};
  CHECK_GRAD("normalize p 2", f_normalize, &a, 2, ((int64_t[]){3, 4}), -2, 2);
  CHECK_GRAD("normalize p 3 dim 0", f_normalize, &b, 2, ((int64_t[]){3, 4}), -2, 2);
  CHECK_GRAD("normalize p 1", f_normalize, &c, 3, ((int64_t[]){2, 2, 3}), -2, 2);
  CHECK_GRAD("normalize p -1", f_normalize, &d, 2, ((int64_t[]){3, 4}), 0.5, 2);
}

/* ---- einsum ----------------------------------------------------------------------------------------------- */

/* make_nn_more_fixtures.py's einsum_cases, in order */
static const char *const einsum_formulas[] = {
    "->", "ij->ji", "ij -> ji", "ji", "jki", "ij,jk", "ijk->", "ij->j", "ik,k->i", "jk,ki->ji", "i,i->i", "i,j->ij",
    "ijk,ikl->jil", "pqrs,tuqvr->pstuv", "ik,jkl,il->ij", "...id,...jd->...ij", "...id,...jd", "i...j,ji...->...",
    "ij...,ij...->ij", "i,i", "ii->i", "ii->", "...ii->...i", "...ii->...", "ii", "iji->j", "bij,bjk->bik", "Ab,bA->A",
    "...ij,...jk", "i,j,k->ijk", "ij,ij->",
};

NN_TEST(test_nn_more_einsum_matches_pytorch) {
  int n = (int)(sizeof einsum_formulas / sizeof *einsum_formulas), seen = 0;
  for (int i = 0; i < n; i++) {
    const fx_rec *p = fx_get(f, "einsum/%d/p", i);
    if (!p) break;
    seen++;
    int k = (int)fx_param(p, 0);
    tg_tensor *ops[4];
    for (int j = 0; j < k && j < 4; j++) ops[j] = fx_tensor(fx_get(f, "einsum/%d/x%d", i, j));
    char what[64];
    snprintf(what, sizeof what, "einsum '%s'", einsum_formulas[i]);
    CHECK_FX(what, tg_einsum(einsum_formulas[i], k, ops), fx_get(f, "einsum/%d/y", i));
  }
  CHECK(seen == n && !fx_get(f, "einsum/%d/p", n), "%d golden cases for %d formulas", seen, n);
}

TEST(test_nn_more_einsum_errors_name_the_subscript) {
  tg_scope_begin();
  tg_tensor *a = tg_zeros(TG_FLOAT32, 3, (int64_t[]){2, 3, 4}), *b = tg_zeros(TG_FLOAT32, 3, (int64_t[]){2, 3, 4});
  tg_tensor *ab[2] = {a, b}, *abc[3] = {a, b, a};
  EXPECT_ERR(tg_einsum("...ik..., ...jk ->", 2, ab), "ellipsis");
  EXPECT_ERR(tg_einsum("i...j,ji...->...", 2, ab), "'j'");  /* j is 4 in a, 2 in b */
  EXPECT_ERR(tg_einsum("ij,jk->ij", 3, abc), "operands");
  EXPECT_ERR(tg_einsum("ij,jk->ij", 1, ab), "operands");
  EXPECT_ERR(tg_einsum("ijk,ijk->z", 2, ab), "'z'");
  EXPECT_ERR(tg_einsum("ijk,ijk->ii", 2, ab), "more than once");
  EXPECT_ERR(tg_einsum("ij,ijk", 2, ab), "operand 0");
  EXPECT_ERR(tg_einsum("ij#,ijk", 2, ab), "'#'");
  EXPECT_ERR(tg_einsum("ijk,ijk->i->j", 2, ab), "->");
  EXPECT_ERR(tg_einsum("iij", 1, ab), "'i'");
  EXPECT_ERR(tg_einsum("ijk,ikj", 2, ab), "'k'");
  tg_tensor *none[1] = {NULL};
  CHECK(!tg_einsum("ij", 1, none) && !tg_einsum(NULL, 1, ab), "NULL accepted");
  tg_scope_end();
}

static tg_tensor *f_einsum(tg_tensor *x, const void *c) {
  /* x (3, 3, 4): a trace, a contraction with a constant and an outer sum */
  int64_t sh[2] = {4, 2};
  double wv[8] = {1, -2, 0.5, 3, -1, 2, 0.25, -0.5};
  tg_tensor *w = tg_from_data(TG_FLOAT64, 2, sh, wv, sizeof wv);
  tg_tensor *ops[3] = {x, w, x};
  return tg_einsum((const char *)c, 3, ops);
}

TEST(test_nn_more_einsum_gradients) {
  CHECK_GRAD("einsum iik,kl,jjm->lm", f_einsum, "iik,kl,jjm->lm", 3, ((int64_t[]){3, 3, 4}), -1, 1);
  CHECK_GRAD("einsum ...k,kl,ijk->l...", f_einsum, "...k,kl,ijk->l...", 3, ((int64_t[]){3, 3, 4}), -1, 1);
}

/* ---- attention: grouped heads and dropout ------------------------------------------------------------- */

NN_TEST(test_nn_more_attention_gqa_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "gqa/%d/q", i); i++, n++) {
    char what[64];
    snprintf(what, sizeof what, "gqa case %d", i);
    tg_tensor *y = tg_scaled_dot_product_attention(fx_tensor(fx_get(f, "gqa/%d/q", i)), fx_tensor(fx_get(f, "gqa/%d/k", i)),
                                                   fx_tensor(fx_get(f, "gqa/%d/v", i)), NULL, 0,
                                                   fx_param(fx_get(f, "gqa/%d/p", i), 0) != 0, true);
    CHECK_FX(what, y, fx_get(f, "gqa/%d/y", i));
  }
  CHECK(n >= 3, "only %d cases", n);
  tg_tensor *q = tg_zeros(TG_FLOAT32, 4, (int64_t[]){2, 31, 4, 8}), *k = tg_zeros(TG_FLOAT32, 4, (int64_t[]){2, 8, 4, 8});
  EXPECT_ERR(tg_scaled_dot_product_attention(q, k, k, NULL, 0, false, true), "enable_gqa");
  EXPECT_ERR(tg_scaled_dot_product_attention(q, k, k, NULL, 0, false, false), "tg_scaled_dot_product_attention");
  EXPECT_ERR(tg_scaled_dot_product_attention(k, k, k, NULL, 1.5, false, false), "dropout_p");
  /* dropout: inactive outside training; p = 1 in training zeroes the weights */
  tg_tensor *x = tg_rand(TG_FLOAT32, 3, (int64_t[]){2, 3, 4});
  float a[24], b[24];
  CHECK(tg_to_host(tg_scaled_dot_product_attention(x, x, x, NULL, 0.5, false, false), a, sizeof a) == TG_OK &&
        tg_to_host(tg_scaled_dot_product_attention(x, x, x, NULL, 0, false, false), b, sizeof b) == TG_OK, "%s", tg_error());
  CHECK(!memcmp(a, b, sizeof a), "dropout applied outside training");
  tg_set_training(true);
  tg_status st = tg_to_host(tg_scaled_dot_product_attention(x, x, x, NULL, 1, false, false), a, sizeof a);
  tg_set_training(false);
  CHECK(st == TG_OK, "%s", tg_error());
  for (int i = 0; i < 24; i++) CHECK(a[i] == 0, "dropout 1: [%d] = %g", i, a[i]);
}

/* ---- per-side padding of convolutions and pools ------------------------------------------------------- */

/* p = [nd, transposed, stride x3, dilation x3, pads x6, output_padding x3] */
NN_TEST(test_nn_more_per_side_padding_conv_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "padconv/%d/x", i); i++, n++) {
    const fx_rec *p = fx_get(f, "padconv/%d/p", i);
    int nd = (int)fx_param(p, 0);
    tg_conv_opts o = tg_conv_defaults();
    o.stride.n = o.dilation.n = o.output_padding.n = nd;
    o.padding.n = 2 * nd;
    for (int j = 0; j < nd; j++) {
      o.stride.v[j] = (int64_t)fx_param(p, 2 + j);
      o.dilation.v[j] = (int64_t)fx_param(p, 5 + j);
      o.output_padding.v[j] = (int64_t)fx_param(p, 14 + j);
    }
    for (int j = 0; j < 2 * nd; j++) o.padding.v[j] = (int64_t)fx_param(p, 8 + j);
    tg_tensor *x = fx_tensor(fx_get(f, "padconv/%d/x", i)), *w = fx_tensor(fx_get(f, "padconv/%d/w", i)),
              *b = fx_tensor(fx_get(f, "padconv/%d/b", i));
    char what[64];
    snprintf(what, sizeof what, "per-side padding conv case %d", i);
    CHECK_FX(what, fx_param(p, 1) != 0 ? tg_conv_transpose2d(x, w, b, o) : tg_conv2d(x, w, b, o), fx_get(f, "padconv/%d/y", i));
  }
  CHECK(n >= 7, "only %d cases", n);
}

/* p = [nd, kind, kernel x3, stride x3, dilation x3, pads x6] */
NN_TEST(test_nn_more_per_side_padding_pool_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "padpool/%d/x", i); i++, n++) {
    const fx_rec *p = fx_get(f, "padpool/%d/p", i);
    int nd = (int)fx_param(p, 0);
    tg_pool_opts o = tg_pool_defaults();
    o.ndims = nd;
    o.kernel.n = o.stride.n = o.dilation.n = nd;
    o.padding.n = 2 * nd;
    for (int j = 0; j < nd; j++) {
      o.kernel.v[j] = (int64_t)fx_param(p, 2 + j);
      o.stride.v[j] = (int64_t)fx_param(p, 5 + j);
      o.dilation.v[j] = (int64_t)fx_param(p, 8 + j);
    }
    for (int j = 0; j < 2 * nd; j++) o.padding.v[j] = (int64_t)fx_param(p, 11 + j);
    tg_tensor *x = fx_tensor(fx_get(f, "padpool/%d/x", i));
    char what[64];
    snprintf(what, sizeof what, "per-side padding pool case %d", i);
    CHECK_FX(what, fx_param(p, 1) != 0 ? tg_avg_pool2d(x, o) : tg_max_pool2d(x, o), fx_get(f, "padpool/%d/y", i));
  }
  CHECK(n >= 5, "only %d cases", n);
}

/* plain C pooling of one (H, W) plane with per-side padding, dilation and ceil_mode, as PyTorch defines it
 * (a window may not start in the end padding); avg divides by the window's positions inside the padded
 * input (count_include_pad) or inside the input */
static void ref_pool(const float *x, int h, int w, const int *k, const int *s, const int *d, const int *pb, const int *pa,
                     bool ceil, bool avg, bool include_pad, float *out, int *oh, int *ow) {
  int in[2] = {h, w}, o[2];
  for (int j = 0; j < 2; j++) {
    int span = in[j] + pb[j] + pa[j] - d[j] * (k[j] - 1) - 1;
    o[j] = (ceil ? (span + s[j] - 1) / s[j] : span / s[j]) + 1;
    if (ceil && (o[j] - 1) * s[j] >= in[j] + pb[j]) o[j]--;
  }
  *oh = o[0];
  *ow = o[1];
  for (int r = 0; r < o[0]; r++)
    for (int c = 0; c < o[1]; c++) {
      double acc = avg ? 0 : -INFINITY;
      int cnt = 0;
      for (int a = 0; a < k[0]; a++)
        for (int b = 0; b < k[1]; b++) {
          int rr = r * s[0] - pb[0] + a * d[0], cc = c * s[1] - pb[1] + b * d[1];
          bool inside = rr >= 0 && rr < h && cc >= 0 && cc < w;
          bool padded = rr >= -pb[0] && rr < h + pa[0] && cc >= -pb[1] && cc < w + pa[1];
          if (include_pad ? padded : inside) cnt++;
          double v = inside ? x[rr * w + cc] : avg ? 0 : -INFINITY;
          acc = avg ? acc + v : fmax(acc, v);
        }
      out[r * o[1] + c] = (float)(avg ? acc / cnt : acc);
    }
}

TEST(test_nn_more_ceil_mode_with_per_side_padding_and_dilation) {
  /* (k, s, d, pads flat (left, right, top, bottom)) */
  struct { int k[2], s[2], d[2], flat[4]; } cases[] = {
      {{3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}}, {{2, 3}, {3, 2}, {1, 1}, {0, 2, 1, 0}},
      {{3, 2}, {2, 3}, {2, 1}, {1, 1, 2, 0}}, {{2, 2}, {3, 3}, {2, 2}, {1, 0, 1, 1}},
  };
  const int h = 7, w = 8;
  float x[56];
  for (int i = 0; i < 56; i++) x[i] = (float)urand(-2, 2);
  tg_scope_begin();
  tg_tensor *t = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, h, w}, x, sizeof x);
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    for (int kind = 0; kind < 3; kind++)  /* max, avg counting the padding, avg not counting it */
      for (int ceil = 0; ceil < 2; ceil++) {
        if (kind && (cases[c].d[0] > 1 || cases[c].d[1] > 1)) continue;  /* PyTorch's avg pool has no dilation */
        int pb[2] = {cases[c].flat[2], cases[c].flat[0]}, pa[2] = {cases[c].flat[3], cases[c].flat[1]}, oh, ow;
        float want[64], got[64];
        ref_pool(x, h, w, cases[c].k, cases[c].s, cases[c].d, pb, pa, ceil, kind > 0, kind == 1, want, &oh, &ow);
        tg_pool_opts o = tg_pool_defaults();
        o.kernel = TG_INTS(cases[c].k[0], cases[c].k[1]);
        o.stride = TG_INTS(cases[c].s[0], cases[c].s[1]);
        o.dilation = TG_INTS(cases[c].d[0], cases[c].d[1]);
        o.padding = TG_INTS(cases[c].flat[0], cases[c].flat[1], cases[c].flat[2], cases[c].flat[3]);
        o.ceil_mode = ceil;
        o.count_include_pad = kind != 2;
        tg_tensor *y = kind ? tg_avg_pool2d(t, o) : tg_max_pool2d(t, o);
        char what[96];
        snprintf(what, sizeof what, "case %zu kind %d ceil %d", c, kind, ceil);
        CHECK(y && tg_shape(y, 2) == oh && tg_shape(y, 3) == ow, "%s: shape (%lld, %lld), want (%d, %d): %s", what,
              y ? (long long)tg_shape(y, 2) : -1LL, y ? (long long)tg_shape(y, 3) : -1LL, oh, ow, tg_error());
        if (!y || tg_shape(y, 2) != oh || tg_shape(y, 3) != ow) continue;
        CHECK(tg_to_host(y, got, (size_t)(oh * ow) * 4) == TG_OK, "%s", tg_error());
        check_close_f32(what, got, want, oh * ow, 1e-6, 1e-5, __FILE__, __LINE__);
      }
  tg_scope_end();
}

static tg_tensor *f_conv_sides(tg_tensor *x, const void *c) {
  double wv[12];
  for (int i = 0; i < 12; i++) wv[i] = 0.1 * (i % 5) - 0.2;
  tg_tensor *w = tg_from_data(TG_FLOAT64, 4, (int64_t[]){2, 1, 2, 3}, wv, sizeof wv);
  tg_conv_opts o = tg_conv_defaults();
  o.padding = TG_INTS(2, 0, 0, 1);
  o.dilation = TG_INTS(2, 1);
  return *(const int *)c ? tg_conv_transpose2d(x, tg_reshape(w, 4, (int64_t[]){1, 2, 2, 3}), NULL, o) : tg_conv2d(x, w, NULL, o);
}

TEST(test_nn_more_per_side_padding_gradients) {
  int plain = 0, transposed = 1;
  CHECK_GRAD("conv2d padding (2, 0, 0, 1) dilation 2", f_conv_sides, &plain, 4, ((int64_t[]){1, 1, 5, 4}), -1, 1);
  CHECK_GRAD("conv_transpose2d padding (2, 0, 0, 1)", f_conv_sides, &transposed, 4, ((int64_t[]){1, 1, 3, 4}), -1, 1);
}
