/* test_nn_edges2.c — tinygrad's forms of the losses and activations (issue 14): sparse_categorical_crossentropy
 * with the class axis last, nll_loss weight=, binary_crossentropy_logits pos_weight=, uint8 linear interpolate
 * in tinygrad's fixed point, integer ** negative integer refused, hardsigmoid(alpha, beta), selu(alpha, gamma),
 * softmax/log_softmax/softmin(dtype=).
 *
 * References: PyTorch goldens (tests/fixtures/nn_edges2_golden.h, written by make_nn_edges2_fixtures.py),
 * plain C formulas computed here in double, and gradients by central differences in float64. */
#include <stdlib.h>

#include "fixtures/nn_edges2_golden.h"
#include "ref.h"
#include "test.h"

#define N_OF(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

static void expect_error(tg_tensor *t, const char *needle, const char *file, int line) {
  if (t) test_fail(file, line, "expected an error naming \"%s\", got a tensor", needle);
  else if (!strstr(tg_error(), needle)) test_fail(file, line, "the message does not name \"%s\": %s", needle, tg_error());
}
#define EXPECT_ERR(t, needle) expect_error(t, needle, __FILE__, __LINE__)

static tg_tensor *f32(int nd, const int64_t *sh, const float *v) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  return tg_from_data(TG_FLOAT32, nd, sh, v, (size_t)n * sizeof *v);
}

static tg_tensor *i32(int nd, const int64_t *sh, const int *v) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  int32_t *w = malloc((size_t)n * 4 + 4);
  for (int64_t i = 0; i < n; i++) w[i] = v[i];
  tg_tensor *t = tg_from_data(TG_INT32, nd, sh, w, (size_t)n * 4);
  free(w);
  return t;
}

/* t (float) against want[n] with atol/rtol; the shape's element count must be n */
static void check_vals(const char *what, tg_tensor *t, const float *want, int64_t n, double atol, double rtol,
                       const char *file, int line) {
  if (!t) {
    test_fail(file, line, "%s: NULL: %s", what, tg_error());
    return;
  }
  if (tg_numel(t) != n) {
    test_fail(file, line, "%s: %lld elements, want %lld", what, (long long)tg_numel(t), (long long)n);
    return;
  }
  float *got = malloc((size_t)n * 4 + 4);
  tg_tensor *c = tg_cast(t, TG_FLOAT32);
  if (tg_to_host(c, got, (size_t)n * 4) != TG_OK) test_fail(file, line, "%s: %s", what, tg_error());
  else check_close_f32(what, got, want, n, atol, rtol, file, line);
  free(got);
}
#define CHECK_VALS(what, t, want, n) check_vals(what, t, want, n, 1e-5, 1e-4, __FILE__, __LINE__)

/* ---- gradients by central differences in float64 ------------------------------------------------------------ */

typedef tg_tensor *(*fn1)(tg_tensor *x, const void *ctx);

/* sum(f(x) * w), w fixed pseudo-random weights of f(x)'s shape */
static double fd_loss(fn1 fun, const void *ctx, int nd, const int64_t *sh, const double *x, int64_t n) {
  tg_scope_begin();
  tg_tensor *y = tg_cast(fun(tg_from_data(TG_FLOAT64, nd, sh, x, (size_t)n * 8), ctx), TG_FLOAT64);
  double r = NAN;
  if (y) {
    int64_t ny = tg_numel(y);
    double *w = malloc((size_t)ny * 8 + 8);
    for (int64_t i = 0; i < ny; i++) w[i] = 0.3 + 0.7 * (double)((i * 37) % 11) / 11.0;
    r = tg_item(tg_sum(tg_mul(y, tg_from_data(TG_FLOAT64, tg_ndim(y), tg_shape_ptr(y), w, (size_t)ny * 8)), 0, NULL, false));
    free(w);
  }
  tg_scope_end();
  return r;
}

/* d/dx of fd_loss by backward against central differences at x (n values) */
static void check_grad(const char *what, fn1 fun, const void *ctx, int nd, const int64_t *sh, const double *x,
                       const char *file, int line) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  double *xs = malloc((size_t)n * 8 + 8), *g = calloc((size_t)n + 1, 8);
  memcpy(xs, x, (size_t)n * 8);
  tg_scope_begin();
  tg_tensor *tx = tg_set_requires_grad(tg_from_data(TG_FLOAT64, nd, sh, xs, (size_t)n * 8), true);
  tg_tensor *y = tg_cast(fun(tx, ctx), TG_FLOAT64);
  bool ok = false;
  if (y) {
    int64_t ny = tg_numel(y);
    double *w = malloc((size_t)ny * 8 + 8);
    for (int64_t i = 0; i < ny; i++) w[i] = 0.3 + 0.7 * (double)((i * 37) % 11) / 11.0;
    tg_tensor *loss = tg_sum(tg_mul(y, tg_from_data(TG_FLOAT64, tg_ndim(y), tg_shape_ptr(y), w, (size_t)ny * 8)), 0, NULL, false);
    ok = tg_backward(loss) == TG_OK && tg_grad(tx) && tg_to_host(tg_grad(tx), g, (size_t)n * 8) == TG_OK;
    free(w);
  }
  tg_scope_end();
  if (!ok) test_fail(file, line, "%s: backward failed: %s", what, tg_error());
  for (int64_t i = 0, bad = 0; ok && i < n && bad < 3; i++) {
    double keep = xs[i], e = 1e-6;
    xs[i] = keep + e;
    double lp = fd_loss(fun, ctx, nd, sh, xs, n);
    xs[i] = keep - e;
    double lm = fd_loss(fun, ctx, nd, sh, xs, n);
    xs[i] = keep;
    double fd = (lp - lm) / (2 * e);
    if (!(fabs(fd - g[i]) <= 1e-5 + 1e-4 * fabs(fd))) {
      test_fail(file, line, "%s: d/dx[%lld]: analytic %.9g, finite differences %.9g", what, (long long)i, g[i], fd);
      bad++;
    }
  }
  free(xs);
  free(g);
}
#define CHECK_GRAD(what, fun, ctx, nd, sh, x) check_grad(what, fun, ctx, nd, sh, x, __FILE__, __LINE__)

/* n doubles from a small xorshift generator in [lo, hi) */
static double *rand_vals(int64_t n, double lo, double hi, uint64_t seed) {
  double *v = malloc((size_t)n * 8 + 8);
  for (int64_t i = 0; i < n; i++) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    v[i] = lo + (hi - lo) * (double)(seed >> 11) / 9007199254740992.0;
  }
  return v;
}

/* ---- sparse_categorical_crossentropy: class axis last ------------------------------------------------------ */

TEST(test_nn_edges2_sparse_xent_takes_the_class_axis_last_as_tinygrad) {
  tg_scope_begin();
  const int64_t sx[3] = {3, 12, 10}, st[2] = {3, 12};
  tg_tensor *x = f32(3, sx, sce_x), *t = i32(2, st, sce_t);
  CHECK_VALS("mean", tg_sparse_categorical_crossentropy(x, t, tg_loss_defaults()), sce_mean, 1);
  CHECK_VALS("label_smoothing 0.2", tg_sparse_categorical_crossentropy(x, t, (tg_loss_opts){.label_smoothing = 0.2}), sce_ls, 1);
  CHECK_VALS("sum", tg_sparse_categorical_crossentropy(x, t, (tg_loss_opts){.reduction = TG_REDUCTION_SUM}), sce_sum, 1);
  tg_tensor *none = tg_sparse_categorical_crossentropy(x, t, (tg_loss_opts){.reduction = TG_REDUCTION_NONE});
  CHECK_VALS("none", none, sce_none, N_OF(sce_none));
  CHECK(tg_ndim(none) == 2 && tg_shape_ptr(none)[0] == 3 && tg_shape_ptr(none)[1] == 12, "none: the labels' shape");
  tg_loss_opts ign = {.label_smoothing = 0.1, .use_ignore_index = true, .ignore_index = 3};
  CHECK_VALS("ignore_index 3", tg_sparse_categorical_crossentropy(x, t, ign), sce_ign, 1);
  /* int64 labels work as int32 */
  CHECK_VALS("int64 labels", tg_sparse_categorical_crossentropy(x, tg_cast(t, TG_INT64), tg_loss_defaults()), sce_mean, 1);
  /* PyTorch's layout (N, C, d) with labels (N, d) no longer fits: the class axis is the last one */
  EXPECT_ERR(tg_sparse_categorical_crossentropy(tg_permute(x, 3, (int[]){0, 2, 1}), t, tg_loss_defaults()), "class axis 2");

  /* 1-d logits (C) with a 0-d label; plain C: -log_softmax(x)[label] */
  float v[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  double se = 0;
  for (int i = 0; i < 4; i++) se += exp(v[i]);
  float want = (float)(log(se) - v[2]);
  tg_tensor *l1 = tg_sparse_categorical_crossentropy(f32(1, (int64_t[]){4}, v), tg_scalar(TG_INT32, 2), tg_loss_defaults());
  CHECK_VALS("1-d logits", l1, &want, 1);
  /* tinygrad: ignore_index -1 (its default) ignores nothing: a label -1 adds 0 and counts in the mean */
  float v2[6] = {1, 2, 3, -1, 0, 1};
  double lse0 = log(exp(1.0) + exp(2.0) + exp(3.0));
  float want2 = (float)((lse0 - 2.0) / 2);
  tg_tensor *x2 = f32(2, (int64_t[]){2, 3}, v2), *t2 = i32(1, (int64_t[]){2}, (int[]){1, -1});
  CHECK_VALS("label -1, ignore_index -1", tg_sparse_categorical_crossentropy(x2, t2, tg_loss_defaults()), &want2, 1);
  float want3 = (float)(lse0 - 3.0);
  tg_loss_opts ig1 = {.use_ignore_index = true, .ignore_index = 1};
  CHECK_VALS("ignore_index 1", tg_sparse_categorical_crossentropy(x2, i32(1, (int64_t[]){2}, (int[]){2, 1}), ig1), &want3, 1);
  /* size 0: the sum is 0, the mean 0 / 0 */
  tg_tensor *x0 = tg_zeros(TG_FLOAT32, 2, (int64_t[]){0, 5}), *t0 = tg_zeros(TG_INT32, 1, (int64_t[]){0});
  CHECK(tg_item(tg_sparse_categorical_crossentropy(x0, t0, (tg_loss_opts){.reduction = TG_REDUCTION_SUM})) == 0, "empty sum");
  CHECK(isnan(tg_item(tg_sparse_categorical_crossentropy(x0, t0, tg_loss_defaults()))), "empty mean is NaN");
  tg_scope_end();
}

static tg_tensor *f_sce3(tg_tensor *x, const void *ctx) {
  (void)ctx;
  tg_tensor *t = i32(2, (int64_t[]){2, 3}, (int[]){0, 3, 1, 2, 2, 0});
  return tg_sparse_categorical_crossentropy(x, t, (tg_loss_opts){.label_smoothing = 0.15});
}

TEST(test_nn_edges2_sparse_xent_gradient_class_axis_last) {
  double *x = rand_vals(24, -2, 2, 77);
  CHECK_GRAD("sparse_categorical_crossentropy (2, 3, 4)", f_sce3, NULL, 3, ((int64_t[]){2, 3, 4}), x);
  free(x);
}

/* ---- nll_loss weight=, cross_entropy keeps axis 1 ----------------------------------------------------------- */

TEST(test_nn_edges2_nll_loss_weight_matches_pytorch) {
  tg_scope_begin();
  tg_tensor *x = f32(2, (int64_t[]){6, 4}, nll_x), *t = i32(1, (int64_t[]){6}, nll_t), *w = f32(1, (int64_t[]){4}, nll_w);
  CHECK_VALS("weight, mean", tg_nll_loss(x, t, (tg_loss_opts){.weight = w}), nll_mean, 1);
  CHECK_VALS("weight, sum", tg_nll_loss(x, t, (tg_loss_opts){.weight = w, .reduction = TG_REDUCTION_SUM}), nll_sum, 1);
  CHECK_VALS("weight, none", tg_nll_loss(x, t, (tg_loss_opts){.weight = w, .reduction = TG_REDUCTION_NONE}), nll_none, 6);
  tg_loss_opts ign = {.weight = w, .use_ignore_index = true, .ignore_index = 1};
  CHECK_VALS("weight, ignore_index 1", tg_nll_loss(x, t, ign), nll_ign, 1);
  tg_tensor *x3 = f32(3, (int64_t[]){2, 4, 3}, nll3_x), *t3 = i32(2, (int64_t[]){2, 3}, nll3_t);
  CHECK_VALS("(N, C, d), weight", tg_nll_loss(x3, t3, (tg_loss_opts){.weight = w}), nll3_mean, 1);
  /* no weight is weight 1 */
  float ones[4] = {1, 1, 1, 1};
  double a = tg_item(tg_nll_loss(x, t, tg_loss_defaults())), b = tg_item(tg_nll_loss(x, t, (tg_loss_opts){.weight = f32(1, (int64_t[]){4}, ones)}));
  CHECK(fabs(a - b) < 1e-6, "weight of ones %g != no weight %g", b, a);
  /* 1-d log_probs (C), 0-d label: -x[label] w[label] / w[label] = -x[label] */
  float want = -nll_x[2];
  CHECK_VALS("1-d, weight", tg_nll_loss(f32(1, (int64_t[]){4}, nll_x), tg_scalar(TG_INT32, 2), (tg_loss_opts){.weight = w}), &want, 1);
  /* a label out of range picks weight 0 (tinygrad's gather): it neither adds nor counts */
  tg_tensor *tr = i32(1, (int64_t[]){6}, (int[]){0, 1, 3, 1, 2, 7});
  double s5 = 0, c5 = 0;
  for (int i = 0; i < 5; i++) s5 += -nll_x[i * 4 + nll_t[i]] * nll_w[nll_t[i]], c5 += nll_w[nll_t[i]];
  float want5 = (float)(s5 / c5);
  CHECK_VALS("label out of range", tg_nll_loss(x, tr, (tg_loss_opts){.weight = w}), &want5, 1);
  /* errors: weight of the wrong size; weight where tinygrad has none */
  EXPECT_ERR(tg_nll_loss(x, t, (tg_loss_opts){.weight = f32(1, (int64_t[]){3}, ones)}), "weight");
  EXPECT_ERR(tg_cross_entropy(x, t, (tg_loss_opts){.weight = w}), "no weight");
  EXPECT_ERR(tg_sparse_categorical_crossentropy(x, t, (tg_loss_opts){.weight = w}), "no weight");
  EXPECT_ERR(tg_binary_crossentropy(x, x, (tg_loss_opts){.weight = w}), "no weight");
  /* cross_entropy keeps PyTorch's axis 1 (tinygrad's too): (N, C, d) logits with (N, d) labels */
  double ce = tg_item(tg_cross_entropy(x3, t3, tg_loss_defaults()));
  double nl = tg_item(tg_nll_loss(tg_log_softmax(x3, 1), t3, tg_loss_defaults()));
  CHECK(fabs(ce - nl) < 1e-5 && isfinite(ce), "cross_entropy %g != nll_loss(log_softmax) %g", ce, nl);
  tg_scope_end();
}

static tg_tensor *f_nllw(tg_tensor *x, const void *ctx) {
  (void)ctx;
  tg_tensor *t = i32(2, (int64_t[]){2, 3}, (int[]){0, 3, 1, 2, 2, 0});
  tg_tensor *w = f32(1, (int64_t[]){4}, (float[]){0.5f, 2.0f, 1.25f, 0.75f});
  return tg_nll_loss(x, t, (tg_loss_opts){.weight = w, .use_ignore_index = true, .ignore_index = 2});
}

TEST(test_nn_edges2_nll_loss_weight_gradient) {
  double *x = rand_vals(24, -3, 0, 5);
  CHECK_GRAD("nll_loss weight ignore_index (2, 4, 3)", f_nllw, NULL, 3, ((int64_t[]){2, 4, 3}), x);
  free(x);
}

/* ---- binary_crossentropy_logits pos_weight= ---------------------------------------------------------------- */

TEST(test_nn_edges2_bce_logits_pos_weight_matches_pytorch) {
  tg_scope_begin();
  tg_tensor *x = f32(2, (int64_t[]){4, 5}, bcel_x), *t = f32(2, (int64_t[]){4, 5}, bcel_t), *pw = f32(1, (int64_t[]){5}, bcel_pw);
  CHECK_VALS("pos_weight mean", tg_binary_crossentropy_logits(x, t, (tg_loss_opts){.pos_weight = pw}), bcel_mean, 1);
  CHECK_VALS("pos_weight sum", tg_binary_crossentropy_logits(x, t, (tg_loss_opts){.pos_weight = pw, .reduction = TG_REDUCTION_SUM}),
             bcel_sum, 1);
  CHECK_VALS("pos_weight none", tg_binary_crossentropy_logits(x, t, (tg_loss_opts){.pos_weight = pw, .reduction = TG_REDUCTION_NONE}),
             bcel_none, 20);
  /* a 0-d pos_weight 1 is no pos_weight; plain C for pos_weight 3 on one element */
  double a = tg_item(tg_binary_crossentropy_logits(x, t, tg_loss_defaults()));
  double b = tg_item(tg_binary_crossentropy_logits(x, t, (tg_loss_opts){.pos_weight = tg_scalar(TG_FLOAT32, 1)}));
  CHECK(fabs(a - b) < 1e-6, "pos_weight 1: %g != %g", b, a);
  double z = 1.5, y = 0.25;
  float want = (float)(3 * y * log1p(exp(-z)) + (1 - y) * log1p(exp(z)));
  CHECK_VALS("pos_weight 3, plain C", tg_binary_crossentropy_logits(tg_scalar(TG_FLOAT32, z), tg_scalar(TG_FLOAT32, y),
                                                                    (tg_loss_opts){.pos_weight = tg_scalar(TG_FLOAT32, 3)}),
             &want, 1);
  /* integer targets are float; pos_weight elsewhere is refused; a shape that does not broadcast too */
  EXPECT_ERR(tg_binary_crossentropy(t, t, (tg_loss_opts){.pos_weight = pw}), "no pos_weight");
  EXPECT_ERR(tg_nll_loss(x, i32(1, (int64_t[]){4}, (int[]){0, 1, 2, 3}), (tg_loss_opts){.pos_weight = pw}), "no pos_weight");
  EXPECT_ERR(tg_binary_crossentropy_logits(x, t, (tg_loss_opts){.pos_weight = f32(1, (int64_t[]){3}, bcel_pw)}), "broadcast");
  tg_scope_end();
}

static tg_tensor *f_bcelpw(tg_tensor *x, const void *ctx) {
  (void)ctx;
  tg_tensor *t = f32(2, (int64_t[]){2, 3}, (float[]){0, 1, 0.25f, 1, 0.5f, 0});
  tg_tensor *pw = f32(1, (int64_t[]){3}, (float[]){0.5f, 2.0f, 3.0f});
  return tg_binary_crossentropy_logits(x, t, (tg_loss_opts){.pos_weight = pw});
}

TEST(test_nn_edges2_bce_logits_pos_weight_gradient) {
  double *x = rand_vals(6, -3, 3, 9);
  CHECK_GRAD("binary_crossentropy_logits pos_weight", f_bcelpw, NULL, 2, ((int64_t[]){2, 3}), x);
  free(x);
}

/* ---- uint8 linear interpolate ------------------------------------------------------------------------------- */

/* plain C: tinygrad's interpolate (linear) of uint8 x, one axis at a time (last first), each a 7-bit fixed-point
 * blend of the two neighbours (the difference exact); ndim trailing sizes */
static unsigned char *ref_interp_u8(const unsigned char *x, int nd, const int64_t *shape, int nsz, const int64_t *size,
                                    bool align) {
  int64_t cur[8], n = 1;
  for (int i = 0; i < nd; i++) cur[i] = shape[i], n *= shape[i];
  int *v = malloc((size_t)n * sizeof *v + 4);
  for (int64_t i = 0; i < n; i++) v[i] = x[i];
  for (int k = 1; k <= nsz; k++) {
    int ax = nd - k;
    int64_t in = cur[ax], out = size[nsz - k], outer = 1, inner = 1;
    if (in == out) continue;
    for (int i = 0; i < ax; i++) outer *= cur[i];
    for (int i = ax + 1; i < nd; i++) inner *= cur[i];
    int *r = malloc((size_t)(outer * out * inner) * sizeof *r + 4);
    for (int64_t o = 0; o < out; o++) {
      int64_t num, den;
      if (align) num = o * (in - 1), den = out > 1 ? out - 1 : 1;
      else num = (2 * o + 1) * in - out, den = 2 * out;
      if (num < 0) num = 0;
      if (num > (in - 1) * den) num = (in - 1) * den;
      int64_t lo = num / den, hi = (num + den - 1) / den;
      float w = (float)(num % den) / (float)den;
      int wi = (int)(w * 128.0f + 0.5f);
      for (int64_t a = 0; a < outer; a++)
        for (int64_t b = 0; b < inner; b++) {
          int l = v[(a * in + lo) * inner + b], h = v[(a * in + hi) * inner + b];
          int t = (h - l) * wi + 64;
          r[(a * out + o) * inner + b] = l + (t >= 0 ? t / 128 : -((-t + 127) / 128));  /* floor(t / 128) */
        }
    }
    free(v);
    v = r;
    cur[ax] = out;
  }
  n = 1;
  for (int i = 0; i < nd; i++) n *= cur[i];
  unsigned char *res = malloc((size_t)n + 1);
  for (int64_t i = 0; i < n; i++) res[i] = (unsigned char)v[i];
  free(v);
  return res;
}

/* tg_interpolate of uint8 x against want (n values): exact, or within tol */
static void check_u8(const char *what, tg_tensor *y, const unsigned char *want, int64_t n, int tol, const char *file, int line) {
  if (!y || tg_dtype_of(y) != TG_UINT8 || tg_numel(y) != n) {
    test_fail(file, line, "%s: %s", what, y ? "not uint8 of the expected size" : tg_error());
    return;
  }
  unsigned char *got = malloc((size_t)n + 1);
  if (tg_to_host(y, got, (size_t)n) != TG_OK) test_fail(file, line, "%s: %s", what, tg_error());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (abs((int)got[i] - (int)want[i]) > tol && bad++ == 0) first = i;
  if (bad)
    test_fail(file, line, "%s: %lld of %lld differ by more than %d; first [%lld] got %d want %d", what, (long long)bad,
              (long long)n, tol, (long long)first, got[first], want[first]);
  free(got);
}

TEST(test_nn_edges2_interpolate_uint8_linear_rounds_as_tinygrad_and_pytorch) {
  tg_scope_begin();
  /* tinygrad's test_ops case: PyTorch's uint8 bilinear, exactly (a float blend truncated was off by one on half) */
  const int64_t sx[4] = {1, 3, 24, 24};
  tg_tensor *x = tg_from_data(TG_UINT8, 4, sx, u8_x, sizeof u8_x);
  check_u8("(1,3,24,24) -> (10,10) vs PyTorch", tg_interpolate(x, 2, (int64_t[]){10, 10}, TG_INTERP_LINEAR, false), u8_y,
           N_OF(u8_y), 0, __FILE__, __LINE__);
  /* full-range values: PyTorch within 2 (tinygrad's int8 difference would wrap: 0 and 255 blend to 0) */
  const int64_t sf[4] = {1, 2, 9, 31};
  tg_tensor *xf = tg_from_data(TG_UINT8, 4, sf, u8full_x, sizeof u8full_x);
  tg_tensor *yf = tg_interpolate(xf, 2, (int64_t[]){20, 12}, TG_INTERP_LINEAR, false);
  check_u8("full range vs PyTorch", yf, u8full_y, N_OF(u8full_y), 2, __FILE__, __LINE__);
  unsigned char *rf = ref_interp_u8(u8full_x, 4, sf, 2, (int64_t[]){20, 12}, false);
  check_u8("full range vs the fixed-point formula", yf, rf, N_OF(u8full_y), 0, __FILE__, __LINE__);
  free(rf);
  unsigned char h[4] = {0, 255, 0, 255}, hw[7];
  unsigned char *rh = ref_interp_u8(h, 1, (int64_t[]){4}, 1, (int64_t[]){7}, false);
  memcpy(hw, rh, 7);
  free(rh);
  CHECK(hw[3] == 128, "the plain C formula blends 0 and 255 half way to %d", hw[3]);
  check_u8("0/255 alternating", tg_interpolate(tg_from_data(TG_UINT8, 1, (int64_t[]){4}, h, 4), 1, (int64_t[]){7}, TG_INTERP_LINEAR, false),
           hw, 7, 0, __FILE__, __LINE__);
  /* other forms against the formula: 1-d down and up, three axes, align_corners, a size-1 axis */
  struct { int nd; int64_t sh[5]; int nsz; int64_t size[3]; bool align; } cases[] = {
      {3, {2, 3, 20}, 1, {7}, false},          {3, {2, 3, 7}, 1, {20}, false},
      {4, {1, 5, 2, 8}, 3, {3, 6, 4}, false},  {3, {2, 5, 6}, 2, {9, 4}, true},
      {3, {3, 1, 5}, 2, {4, 11}, false},       {2, {4, 13}, 1, {13}, false},
  };
  for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
    int64_t n = 1, m = 1;
    for (int i = 0; i < cases[c].nd; i++) n *= cases[c].sh[i];
    unsigned char *in = malloc((size_t)n);
    double *r = rand_vals(n, 0, 256, 100 + (uint64_t)c);
    for (int64_t i = 0; i < n; i++) in[i] = (unsigned char)r[i];
    free(r);
    for (int i = 0; i < cases[c].nd - cases[c].nsz; i++) m *= cases[c].sh[i];
    for (int i = 0; i < cases[c].nsz; i++) m *= cases[c].size[i];
    unsigned char *want = ref_interp_u8(in, cases[c].nd, cases[c].sh, cases[c].nsz, cases[c].size, cases[c].align);
    char what[64];
    snprintf(what, sizeof what, "uint8 case %d", c);
    tg_tensor *y = tg_interpolate(tg_from_data(TG_UINT8, cases[c].nd, cases[c].sh, in, (size_t)n), cases[c].nsz, cases[c].size,
                                  TG_INTERP_LINEAR, cases[c].align);
    check_u8(what, y, want, m, 0, __FILE__, __LINE__);
    free(in);
    free(want);
  }
  tg_scope_end();
}

/* ---- integer ** negative integer ------------------------------------------------------------------------------ */

TEST(test_nn_edges2_int_pow_negative_integer_is_refused_as_tinygrad) {
  tg_scope_begin();
  tg_tensor *xi = i32(1, (int64_t[]){3}, (int[]){-2, 0, 2});
  EXPECT_ERR(tg_pow_scalar(xi, -2), "tg_pow_scalar");
  EXPECT_ERR(tg_pow_scalar(xi, -1), "tg_pow_scalar");
  EXPECT_ERR(tg_pow_scalar(tg_cast(xi, TG_UINT8), -3), "tg_pow_scalar");
  EXPECT_ERR(tg_pow_scalar(tg_cast(xi, TG_BOOL), -1), "tg_pow_scalar");
  EXPECT_ERR(tg_pow_scalar(tg_cast(xi, TG_INT64), -1e6), "tg_pow_scalar");
  /* what tinygrad computes: non-negative integer powers of ints (in the int dtype), float exponents (float32), float
   * bases, and tensor exponents */
  int32_t got[3];
  tg_tensor *p0 = tg_pow_scalar(xi, 0), *p29 = tg_pow_scalar(xi, 29);
  CHECK(p0 && tg_dtype_of(p0) == TG_INT32 && tg_to_host(p0, got, 12) == TG_OK && got[0] == 1 && got[1] == 1 && got[2] == 1,
        "x ** 0: %s", tg_error());
  CHECK(p29 && tg_to_host(p29, got, 12) == TG_OK && got[0] == -536870912 && got[1] == 0 && got[2] == 536870912, "x ** 29");
  tg_tensor *pf = tg_pow_scalar(tg_cast(i32(1, (int64_t[]){4}, (int[]){1, 2, 3, 4}), TG_INT32), -1.5);
  float want[4] = {1.0f, (float)pow(2, -1.5), (float)pow(3, -1.5), (float)pow(4, -1.5)};
  CHECK(pf && tg_dtype_of(pf) == TG_FLOAT32, "int ** -1.5 is float32");
  CHECK_VALS("int ** -1.5", pf, want, 4);
  CHECK(tg_pow_scalar(xi, -INFINITY) != NULL, "int ** -inf (a float exponent): %s", tg_error());
  float wf[3] = {0.25f, INFINITY, 0.25f};
  CHECK_VALS("float ** -2", tg_pow_scalar(tg_cast(xi, TG_FLOAT32), -2), wf, 3);
  CHECK(tg_pow(xi, i32(1, (int64_t[]){3}, (int[]){-1, 1, -2})) != NULL, "int tensor ** int tensor: %s", tg_error());
  tg_scope_end();
}

/* ---- hardsigmoid(alpha, beta), selu(alpha, gamma) ------------------------------------------------------------ */

static double relu_d(double v) { return v > 0 ? v : 0; }

TEST(test_nn_edges2_hardsigmoid_alpha_beta_and_selu_alpha_gamma) {
  tg_scope_begin();
  float xv[9] = {-5, -3, -1.5f, -0.2f, 0, 0.7f, 2, 3, 6};
  tg_tensor *x = f32(1, (int64_t[]){9}, xv);
  float w[9], d[9], s[9];
  for (int i = 0; i < 9; i++) {
    double a = 0.25 * xv[i] + 0.4;
    w[i] = (float)(relu_d(a) - relu_d(a - 1));
    d[i] = (float)(xv[i] / 6.0 + 0.5 > 1 ? 1 : xv[i] / 6.0 + 0.5 < 0 ? 0 : xv[i] / 6.0 + 0.5);
    s[i] = (float)(1.2 * (xv[i] >= 0 ? xv[i] : 1.5 * (exp(xv[i]) - 1)));
  }
  CHECK_VALS("hardsigmoid(0.25, 0.4)", tg_hardsigmoid_ab(x, 0.25, 0.4), w, 9);
  CHECK_VALS("hardsigmoid defaults", tg_hardsigmoid_ab(x, 1.0 / 6, 0.5), d, 9);
  CHECK_VALS("selu(1.5, 1.2)", tg_selu_ag(x, 1.5, 1.2), s, 9);
  /* weak scalars as tinygrad: integral alpha and beta keep an int tensor int (clamp to [0, 1]); 1/6 makes it float */
  tg_tensor *xi = i32(1, (int64_t[]){5}, (int[]){-3, 0, 1, 2, 7});
  tg_tensor *hi = tg_hardsigmoid_ab(xi, 1, 0);
  int32_t got[5];
  CHECK(hi && tg_dtype_of(hi) == TG_INT32 && tg_to_host(hi, got, 20) == TG_OK && got[0] == 0 && got[1] == 0 && got[2] == 1 &&
            got[3] == 1 && got[4] == 1,
        "int hardsigmoid(1, 0): %s", tg_error());
  CHECK(tg_dtype_of(tg_hardsigmoid_ab(xi, 1.0 / 6, 0.5)) == TG_FLOAT32, "int hardsigmoid default is float32");
  CHECK(tg_dtype_of(tg_selu_ag(xi, 1.5, 1.2)) == TG_FLOAT32, "int selu is float32");
  /* 0-d and size 0 */
  CHECK(fabs(tg_item(tg_selu_ag(tg_scalar(TG_FLOAT32, -1), 2, 3)) - 3 * 2 * (exp(-1.0) - 1)) < 1e-6, "0-d selu");
  CHECK(tg_numel(tg_hardsigmoid_ab(tg_zeros(TG_FLOAT32, 2, (int64_t[]){0, 3}), 0.5, 0.5)) == 0, "size 0");
  /* NaN passes through */
  CHECK(isnan(tg_item(tg_selu_ag(tg_scalar(TG_FLOAT32, NAN), 1.5, 1.2))), "selu(NaN)");
  tg_scope_end();
}

static tg_tensor *f_hs(tg_tensor *x, const void *ctx) { (void)ctx; return tg_hardsigmoid_ab(x, 0.3, 0.2); }
static tg_tensor *f_selu(tg_tensor *x, const void *ctx) { (void)ctx; return tg_selu_ag(x, 1.7, 1.1); }

TEST(test_nn_edges2_hardsigmoid_selu_gradients) {
  /* away from the kinks of hardsigmoid (x = -2/3, 8/3) and selu (0) */
  double xs[8] = {-3, -1.5, -0.4, 0.1, 0.9, 2.0, 3.5, 5.0};
  CHECK_GRAD("hardsigmoid(0.3, 0.2)", f_hs, NULL, 1, ((int64_t[]){8}), xs);
  CHECK_GRAD("selu(1.7, 1.1)", f_selu, NULL, 1, ((int64_t[]){8}), xs);
  /* saturated: the gradient is gamma far right and 0 far left, never NaN */
  tg_scope_begin();
  tg_tensor *x = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){2}, (float[]){200, -200}, 8), true);
  float g[2] = {NAN, NAN};
  bool ok = tg_backward(tg_sum(tg_selu_ag(x, 1.7, 1.1), 0, NULL, false)) == TG_OK && tg_to_host(tg_grad(x), g, 8) == TG_OK;
  CHECK(ok && fabsf(g[0] - 1.1f) < 1e-6f && g[1] == 0, "selu gradient at +-200: %g %g", g[0], g[1]);
  tg_scope_end();
}

/* ---- softmax / log_softmax / softmin with dtype ---------------------------------------------------------------- */

TEST(test_nn_edges2_softmax_dtype_forms) {
  tg_scope_begin();
  ref_seed(1414);
  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(3, 4, 5), -4, 4);
  for (int axis = -3; axis < 3; axis++) {
    /* x - max(x) in float32, then float64 */
    ref_arr *m = ref_reduce(R_MAX, x, 1, &axis, true);
    ref_arr *sh = ref_cast(ref_binary(R_SUB, x, m), TG_FLOAT64);
    ref_arr *shn = ref_cast(ref_binary(R_SUB, ref_unary(R_NEG, x, 0, 0), ref_reduce(R_MAX, ref_unary(R_NEG, x, 0, 0), 1, &axis, true)),
                            TG_FLOAT64);
    char what[64];
    snprintf(what, sizeof what, "softmax float64 axis %d", axis);
    ref_check_tol(what, tg_softmax_dtype(ref_to_tg(x), axis, TG_FLOAT64), ref_softmax(sh, axis, false), true, 1e-12, 1e-10,
                  __FILE__, __LINE__);
    snprintf(what, sizeof what, "log_softmax float64 axis %d", axis);
    ref_check_tol(what, tg_log_softmax_dtype(ref_to_tg(x), axis, TG_FLOAT64), ref_softmax(sh, axis, true), true, 1e-12, 1e-10,
                  __FILE__, __LINE__);
    snprintf(what, sizeof what, "softmin float64 axis %d", axis);
    ref_check_tol(what, tg_softmin_dtype(ref_to_tg(x), axis, TG_FLOAT64), ref_softmax(shn, axis, false), true, 1e-12, 1e-10,
                  __FILE__, __LINE__);
  }
  /* float32 -> float16: half results within half's precision */
  ref_arr *sh16 = ref_cast(ref_binary(R_SUB, x, ref_reduce(R_MAX, x, 1, (int[]){-1}, true)), TG_FLOAT16);
  tg_tensor *h = tg_softmax_dtype(ref_to_tg(x), -1, TG_FLOAT16);
  CHECK(tg_dtype_of(h) == TG_FLOAT16, "float16 result");
  ref_check_tol("softmax float16", h, ref_softmax(sh16, -1, false), true, 2e-3, 1e-2, __FILE__, __LINE__);
  /* int input: x - max(x) in int32, then float32 */
  ref_arr *xi = ref_rand(TG_INT32, SHAPE(4, 6), -5, 5);
  ref_arr *shi = ref_cast(ref_binary(R_SUB, xi, ref_reduce(R_MAX, xi, 1, (int[]){1}, true)), TG_FLOAT32);
  CHECK_REF("int32 softmax float32", tg_softmax_dtype(ref_to_tg(xi), 1, TG_FLOAT32), ref_softmax(shi, 1, false));
  CHECK_REF("int32 log_softmax float32", tg_log_softmax_dtype(ref_to_tg(xi), 1, TG_FLOAT32), ref_softmax(shi, 1, true));
  /* 0-d, size 0, a bad axis, a bad dtype */
  CHECK(tg_item(tg_softmax_dtype(tg_scalar(TG_FLOAT32, 3), -1, TG_FLOAT64)) == 1, "0-d softmax is 1");
  CHECK(tg_numel(tg_softmax_dtype(tg_zeros(TG_FLOAT32, 2, (int64_t[]){0, 3}), -1, TG_FLOAT64)) == 0, "size 0");
  CHECK(tg_softmax_dtype(ref_to_tg(x), 3, TG_FLOAT64) == NULL, "axis 3 of a 3-d tensor");
  CHECK(tg_softmax_dtype(ref_to_tg(x), 0, (tg_dtype)99) == NULL, "dtype 99");
  ref_free_all();
  tg_scope_end();
}

typedef struct { int axis; int which; } smx_ctx;
static tg_tensor *f_smx(tg_tensor *x, const void *ctx) {
  const smx_ctx *c = ctx;
  return c->which == 0   ? tg_softmax_dtype(x, c->axis, TG_FLOAT64)
         : c->which == 1 ? tg_log_softmax_dtype(x, c->axis, TG_FLOAT64)
                         : tg_softmin_dtype(x, c->axis, TG_FLOAT64);
}

TEST(test_nn_edges2_softmax_dtype_gradients) {
  double *x = rand_vals(12, -2, 2, 31);
  for (int which = 0; which < 3; which++) {
    smx_ctx c = {which == 1 ? -1 : 0, which};
    CHECK_GRAD(which == 0 ? "softmax_dtype" : which == 1 ? "log_softmax_dtype" : "softmin_dtype", f_smx, &c, 2,
               ((int64_t[]){3, 4}), x);
  }
  free(x);
}
