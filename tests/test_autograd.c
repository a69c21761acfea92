/* test_autograd.c — every gradient against central finite differences, in float64.
 *
 * The loss is sum(f(x) * w) with a fixed random w, so every output element matters with its own weight.
 * Inputs include broadcasting and non-contiguous views. Tolerance atol 1e-4 / rtol 1e-3 as tinygrad. */
#include <stdlib.h>

#include "test.h"

static uint64_t rs = 0x2545F4914F6CDD1DULL;
static double urand(double lo, double hi) {
  rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
  return lo + (hi - lo) * (double)(rs >> 11) / 9007199254740992.0;
}

typedef tg_tensor *(*fn2)(tg_tensor *x, tg_tensor *y);

typedef struct gcase {
  const char *name;
  fn2 f;
  int nx, ny;           /* dims of x and y (ny 0: unary) */
  int64_t sx[4], sy[4];
  double lo, hi;
} gcase;

static int64_t numel(int n, const int64_t *s) {
  int64_t k = 1;
  for (int i = 0; i < n; i++) k *= s[i];
  return k;
}

/* loss(x, y) as a double, or NAN on error */
static double loss_of(const gcase *c, const double *x, const double *y, const double *w, int64_t nw, int64_t *wshape,
                      int *wndim) {
  tg_scope_begin();
  tg_tensor *tx = tg_from_data(TG_FLOAT64, c->nx, c->sx, x, (size_t)numel(c->nx, c->sx) * 8);
  tg_tensor *ty = c->ny ? tg_from_data(TG_FLOAT64, c->ny, c->sy, y, (size_t)numel(c->ny, c->sy) * 8) : NULL;
  tg_tensor *out = c->f(tx, ty);
  double r = NAN;
  if (out && w) {
    tg_tensor *tw = tg_from_data(TG_FLOAT64, tg_ndim(out), tg_shape_ptr(out), w, (size_t)nw * 8);
    r = tg_item(tg_sum(tg_mul(out, tw), 0, NULL, false));
  } else if (out) {
    *wndim = tg_ndim(out);
    for (int i = 0; i < *wndim; i++) wshape[i] = tg_shape(out, i);
    r = 0;
  }
  tg_scope_end();
  return r;
}

static void check_case(const gcase *c) {
  int64_t nx = numel(c->nx, c->sx), ny = c->ny ? numel(c->ny, c->sy) : 0;
  double *x = malloc((size_t)nx * 8), *y = malloc((size_t)(ny + 1) * 8);
  for (int64_t i = 0; i < nx; i++) x[i] = urand(c->lo, c->hi);
  for (int64_t i = 0; i < ny; i++) y[i] = urand(c->lo, c->hi);
  int64_t wshape[TG_MAX_DIMS];
  int wndim = 0;
  if (loss_of(c, x, y, NULL, 0, wshape, &wndim) != 0) {
    CHECK(false, "%s: forward failed: %s", c->name, tg_error());
    free(x); free(y);
    return;
  }
  int64_t nw = numel(wndim, wshape);
  double *w = malloc((size_t)(nw + 1) * 8);
  for (int64_t i = 0; i < nw; i++) w[i] = urand(-1, 1);
  /* analytic gradients */
  double *gx = calloc((size_t)nx, 8), *gy = calloc((size_t)(ny + 1), 8);
  tg_scope_begin();
  tg_tensor *tx = tg_set_requires_grad(tg_from_data(TG_FLOAT64, c->nx, c->sx, x, (size_t)nx * 8), true);
  tg_tensor *ty = c->ny ? tg_set_requires_grad(tg_from_data(TG_FLOAT64, c->ny, c->sy, y, (size_t)ny * 8), true) : NULL;
  tg_tensor *out = c->f(tx, ty);
  tg_tensor *tw = tg_from_data(TG_FLOAT64, wndim, wshape, w, (size_t)nw * 8);
  tg_tensor *loss = tg_sum(tg_mul(out, tw), 0, NULL, false);
  bool ok = tg_backward(loss) == TG_OK;
  CHECK(ok, "%s: backward failed: %s", c->name, tg_error());
  if (ok && tg_grad(tx)) ok = tg_to_host(tg_grad(tx), gx, (size_t)nx * 8) == TG_OK;
  if (ok && ty && tg_grad(ty)) ok = tg_to_host(tg_grad(ty), gy, (size_t)ny * 8) == TG_OK;
  CHECK(ok, "%s: reading gradients failed: %s", c->name, tg_error());
  tg_scope_end();
  /* central differences */
  const double eps = 1e-6;
  int bad = 0;
  for (int which = 0; which < (c->ny ? 2 : 1) && ok; which++) {
    double *v = which ? y : x, *g = which ? gy : gx;
    int64_t n = which ? ny : nx;
    for (int64_t i = 0; i < n && bad < 3; i++) {
      double keep = v[i];
      v[i] = keep + eps;
      double lp = loss_of(c, x, y, w, nw, wshape, &wndim);
      v[i] = keep - eps;
      double lm = loss_of(c, x, y, w, nw, wshape, &wndim);
      v[i] = keep;
      double fd = (lp - lm) / (2 * eps);
      if (!(fabs(fd - g[i]) <= 1e-4 + 1e-3 * fabs(fd))) {
        CHECK(false, "%s: d/d%s[%lld]: analytic %.9g, finite differences %.9g", c->name, which ? "y" : "x",
              (long long)i, g[i], fd);
        bad++;
      }
    }
  }
  free(x); free(y); free(w); free(gx); free(gy);
}

static tg_tensor *f_neg(tg_tensor *x, tg_tensor *y) { return tg_neg(x); }
static tg_tensor *f_exp(tg_tensor *x, tg_tensor *y) { return tg_exp(x); }
static tg_tensor *f_log(tg_tensor *x, tg_tensor *y) { return tg_log(x); }
static tg_tensor *f_sqrt(tg_tensor *x, tg_tensor *y) { return tg_sqrt(x); }
static tg_tensor *f_rsqrt(tg_tensor *x, tg_tensor *y) { return tg_rsqrt(x); }
static tg_tensor *f_sin(tg_tensor *x, tg_tensor *y) { return tg_sin(x); }
static tg_tensor *f_cos(tg_tensor *x, tg_tensor *y) { return tg_cos(x); }
static tg_tensor *f_tan(tg_tensor *x, tg_tensor *y) { return tg_tan(x); }
static tg_tensor *f_recip(tg_tensor *x, tg_tensor *y) { return tg_reciprocal(x); }
static tg_tensor *f_relu(tg_tensor *x, tg_tensor *y) { return tg_relu(x); }
static tg_tensor *f_sigmoid(tg_tensor *x, tg_tensor *y) { return tg_sigmoid(x); }
static tg_tensor *f_tanh(tg_tensor *x, tg_tensor *y) { return tg_tanh(x); }
static tg_tensor *f_gelu(tg_tensor *x, tg_tensor *y) { return tg_gelu(x); }
static tg_tensor *f_silu(tg_tensor *x, tg_tensor *y) { return tg_silu(x); }
static tg_tensor *f_softplus(tg_tensor *x, tg_tensor *y) { return tg_softplus(x); }
static tg_tensor *f_abs(tg_tensor *x, tg_tensor *y) { return tg_abs(x); }
static tg_tensor *f_square(tg_tensor *x, tg_tensor *y) { return tg_square(x); }
static tg_tensor *f_leaky(tg_tensor *x, tg_tensor *y) { return tg_leaky_relu(x, 0.1); }
static tg_tensor *f_elu(tg_tensor *x, tg_tensor *y) { return tg_elu(x, 1.3); }
static tg_tensor *f_mish(tg_tensor *x, tg_tensor *y) { return tg_mish(x); }
static tg_tensor *f_hardswish(tg_tensor *x, tg_tensor *y) { return tg_hardswish(x); }
static tg_tensor *f_exp2(tg_tensor *x, tg_tensor *y) { return tg_exp2(x); }
static tg_tensor *f_log2(tg_tensor *x, tg_tensor *y) { return tg_log2(x); }
static tg_tensor *f_sum1(tg_tensor *x, tg_tensor *y) { return tg_sum(x, 1, (int[]){1}, false); }
static tg_tensor *f_sumall(tg_tensor *x, tg_tensor *y) { return tg_sum(x, 0, NULL, true); }
static tg_tensor *f_max0(tg_tensor *x, tg_tensor *y) { return tg_max(x, 1, (int[]){0}, false); }
static tg_tensor *f_min1(tg_tensor *x, tg_tensor *y) { return tg_min(x, 1, (int[]){1}, true); }
static tg_tensor *f_prod(tg_tensor *x, tg_tensor *y) { return tg_prod(x, 1, (int[]){1}, false); }
static tg_tensor *f_mean(tg_tensor *x, tg_tensor *y) { return tg_mean(x, 1, (int[]){-1}, false); }
static tg_tensor *f_var(tg_tensor *x, tg_tensor *y) { return tg_var(x, 1, (int[]){1}, false, 1); }
static tg_tensor *f_std(tg_tensor *x, tg_tensor *y) { return tg_std(x, 1, (int[]){0}, true, 1); }
static tg_tensor *f_softmax(tg_tensor *x, tg_tensor *y) { return tg_softmax(x, 1); }
static tg_tensor *f_logsoftmax(tg_tensor *x, tg_tensor *y) { return tg_log_softmax(x, 0); }
static tg_tensor *f_lse(tg_tensor *x, tg_tensor *y) { return tg_logsumexp(x, 1, false); }
static tg_tensor *f_matmul(tg_tensor *x, tg_tensor *y) { return tg_matmul(x, y); }
static tg_tensor *f_add(tg_tensor *x, tg_tensor *y) { return tg_add(x, y); }
static tg_tensor *f_sub(tg_tensor *x, tg_tensor *y) { return tg_sub(x, y); }
static tg_tensor *f_mul(tg_tensor *x, tg_tensor *y) { return tg_mul(x, y); }
static tg_tensor *f_div(tg_tensor *x, tg_tensor *y) { return tg_div(x, y); }
static tg_tensor *f_pow(tg_tensor *x, tg_tensor *y) { return tg_pow(x, y); }
static tg_tensor *f_maximum(tg_tensor *x, tg_tensor *y) { return tg_maximum(x, y); }
static tg_tensor *f_minimum(tg_tensor *x, tg_tensor *y) { return tg_minimum(x, y); }
static tg_tensor *f_where(tg_tensor *x, tg_tensor *y) { return tg_where(tg_gt(x, y), tg_mul(x, y), tg_sub(x, y)); }
static tg_tensor *f_movement(tg_tensor *x, tg_tensor *y) {  /* permute, pad, flip, shrink, reshape, expand */
  tg_tensor *t = tg_permute(x, 3, (int[]){2, 0, 1});
  t = tg_pad_axes(t, 3, (int64_t[]){1, 0, 0, 2, 1, 1}, 0);
  t = tg_flip(t, 1, (int[]){1});
  t = tg_shrink(t, 3, (int64_t[]){0, 3, 1, 4, 0, 3});
  t = tg_reshape(t, 2, (int64_t[]){3, 9});
  return tg_expand(tg_unsqueeze(t, 0), 3, (int64_t[]){2, 3, 9});
}
static tg_tensor *f_slice_cat(tg_tensor *x, tg_tensor *y) {
  tg_tensor *a = tg_slice_axes(x, 2, (tg_slice[]){{.all = true}, {1, TG_END, 2, false}});
  tg_tensor *b = tg_slice_axes(x, 2, (tg_slice[]){{TG_END, TG_END, -1, false}, {.all = true}});
  tg_tensor *parts[2] = {tg_reshape(a, 1, (int64_t[]){-1}), tg_reshape(b, 1, (int64_t[]){-1})};
  return tg_cat(2, parts, 0);
}
static tg_tensor *f_transposed_mul(tg_tensor *x, tg_tensor *y) { return tg_mul(tg_transpose(x, 0, 1), y); }

static tg_tensor *f_conv(tg_tensor *x, tg_tensor *w) { return tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1), .stride = TG_INTS(2)}); }
static tg_tensor *f_conv_groups(tg_tensor *x, tg_tensor *w) {
  return tg_conv2d(x, w, NULL, (tg_conv_opts){.groups = 2, .dilation = TG_INTS(2)});
}
static tg_tensor *f_conv_t(tg_tensor *x, tg_tensor *w) {
  return tg_conv_transpose2d(x, w, NULL, (tg_conv_opts){.stride = TG_INTS(2), .padding = TG_INTS(1)});
}
/* the input gradient is a transposed convolution (conv.c): cases where its padding is uneven or negative */
static tg_tensor *f_conv_stride_rem(tg_tensor *x, tg_tensor *w) {  /* the last row and column are read by no window */
  return tg_conv2d(x, w, NULL, (tg_conv_opts){.stride = TG_INTS(2)});
}
static tg_tensor *f_conv_wide_pad(tg_tensor *x, tg_tensor *w) {  /* padding 3 > k - 1 */
  return tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(3, 1), .stride = TG_INTS(1, 3), .dilation = TG_INTS(1, 2)});
}
static tg_tensor *f_conv_t_groups(tg_tensor *x, tg_tensor *w) {
  return tg_conv_transpose2d(x, w, NULL, (tg_conv_opts){.groups = 2, .stride = TG_INTS(3), .padding = TG_INTS(1), .output_padding = TG_INTS(2)});
}
static tg_tensor *f_maxpool(tg_tensor *x, tg_tensor *y) { return tg_max_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(2)}); }
static tg_tensor *f_maxpool_overlap(tg_tensor *x, tg_tensor *y) {
  return tg_max_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .padding = TG_INTS(1)});
}
static tg_tensor *f_avgpool(tg_tensor *x, tg_tensor *y) { return tg_avg_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(1)}); }
static tg_tensor *f_layernorm(tg_tensor *x, tg_tensor *y) { return tg_layernorm(x, 1, (int[]){-1}, 1e-5); }
static tg_tensor *f_batchnorm_train(tg_tensor *x, tg_tensor *w) {  /* batch statistics, as BatchNorm2d in training */
  tg_tensor *mean = tg_mean(x, 3, (int[]){0, 2, 3}, false);
  tg_tensor *xc = tg_sub(x, tg_reshape(mean, 4, (int64_t[]){1, -1, 1, 1}));
  tg_tensor *var = tg_mean(tg_mul(xc, xc), 3, (int[]){0, 2, 3}, false);
  return tg_batchnorm(x, w, NULL, mean, tg_rsqrt(tg_add_scalar(var, 1e-5)));
}
static tg_tensor *f_xent(tg_tensor *x, tg_tensor *y) {
  int32_t lab[4] = {1, 0, 3, 2};
  tg_tensor *l = tg_from_data(TG_INT32, 1, (int64_t[]){4}, lab, sizeof lab);
  return tg_sparse_categorical_crossentropy(x, l, (tg_loss_opts){.label_smoothing = 0.1});
}
static tg_tensor *f_cumsum(tg_tensor *x, tg_tensor *y) { return tg_cumsum(x, 1); }
static tg_tensor *f_interp(tg_tensor *x, tg_tensor *y) { return tg_interpolate(x, 2, (int64_t[]){5, 7}, TG_INTERP_LINEAR, false); }
static tg_tensor *f_embedding(tg_tensor *w, tg_tensor *y) {
  int32_t idx[5] = {2, 0, 2, 3, 1};
  return tg_embedding(w, tg_from_data(TG_INT32, 1, (int64_t[]){5}, idx, sizeof idx));
}
static tg_tensor *f_sdpa(tg_tensor *q, tg_tensor *k) { return tg_scaled_dot_product_attention(q, k, k, NULL, 0, true, false); }

static const gcase cases[] = {
    {"conv2d stride 2 padding 1", f_conv, 4, 4, {2, 3, 5, 5}, {4, 3, 3, 3}, -1, 1},
    {"conv2d groups 2 dilation 2", f_conv_groups, 4, 4, {1, 4, 6, 6}, {2, 2, 2, 2}, -1, 1},
    {"conv_transpose2d stride 2", f_conv_t, 4, 4, {1, 2, 3, 3}, {2, 3, 3, 3}, -1, 1},
    {"conv2d stride 2 with a remainder", f_conv_stride_rem, 4, 4, {2, 2, 6, 7}, {3, 2, 3, 2}, -1, 1},
    {"conv2d padding wider than the window", f_conv_wide_pad, 4, 4, {1, 2, 4, 7}, {2, 2, 2, 3}, -1, 1},
    {"conv_transpose2d groups 2 output_padding 2", f_conv_t_groups, 4, 4, {1, 4, 3, 2}, {4, 1, 3, 3}, -1, 1},
    {"max_pool2d", f_maxpool, 4, 0, {1, 2, 4, 4}, {0}, -1, 1},
    {"max_pool2d overlapping", f_maxpool_overlap, 4, 0, {1, 1, 5, 5}, {0}, -1, 1},
    {"avg_pool2d", f_avgpool, 4, 0, {1, 2, 4, 5}, {0}, -1, 1},
    {"layernorm", f_layernorm, 2, 0, {3, 6}, {0}, -1, 1},
    {"batchnorm (batch statistics)", f_batchnorm_train, 4, 1, {3, 2, 2, 2}, {2}, -1, 1},
    {"sparse_categorical_crossentropy", f_xent, 2, 0, {4, 5}, {0}, -2, 2},
    {"cumsum", f_cumsum, 2, 0, {3, 6}, {0}, -1, 1},
    {"interpolate linear", f_interp, 4, 0, {1, 1, 3, 4}, {0}, -1, 1},
    {"embedding", f_embedding, 2, 0, {4, 3}, {0}, -1, 1},
    {"attention causal", f_sdpa, 3, 3, {2, 4, 3}, {2, 4, 3}, -1, 1},
    {"neg", f_neg, 2, 0, {3, 4}, {0}, -2, 2},
    {"exp", f_exp, 2, 0, {3, 4}, {0}, -2, 2},
    {"exp2", f_exp2, 1, 0, {7}, {0}, -2, 2},
    {"log", f_log, 2, 0, {3, 4}, {0}, 0.2, 3},
    {"log2", f_log2, 1, 0, {7}, {0}, 0.2, 3},
    {"sqrt", f_sqrt, 2, 0, {3, 4}, {0}, 0.2, 3},
    {"rsqrt", f_rsqrt, 1, 0, {5}, {0}, 0.2, 3},
    {"sin", f_sin, 2, 0, {3, 4}, {0}, -3, 3},
    {"cos", f_cos, 2, 0, {3, 4}, {0}, -3, 3},
    {"tan", f_tan, 1, 0, {6}, {0}, -1, 1},
    {"reciprocal", f_recip, 2, 0, {3, 4}, {0}, 0.5, 2},
    {"relu", f_relu, 2, 0, {3, 4}, {0}, -2, 2},
    {"sigmoid", f_sigmoid, 2, 0, {3, 4}, {0}, -3, 3},
    {"tanh", f_tanh, 2, 0, {3, 4}, {0}, -2, 2},
    {"gelu", f_gelu, 2, 0, {3, 4}, {0}, -3, 3},
    {"silu", f_silu, 2, 0, {3, 4}, {0}, -3, 3},
    {"softplus", f_softplus, 2, 0, {3, 4}, {0}, -3, 3},
    {"abs", f_abs, 2, 0, {3, 4}, {0}, -2, 2},
    {"square", f_square, 2, 0, {3, 4}, {0}, -2, 2},
    {"leaky_relu", f_leaky, 2, 0, {3, 4}, {0}, -2, 2},
    {"elu", f_elu, 2, 0, {3, 4}, {0}, -2, 2},
    {"mish", f_mish, 2, 0, {3, 4}, {0}, -2, 2},
    {"hardswish", f_hardswish, 2, 0, {3, 4}, {0}, -4, 4},
    {"sum axis 1", f_sum1, 3, 0, {2, 5, 3}, {0}, -1, 1},
    {"sum all", f_sumall, 2, 0, {4, 5}, {0}, -1, 1},
    {"max axis 0", f_max0, 2, 0, {5, 3}, {0}, -1, 1},
    {"min axis 1", f_min1, 2, 0, {3, 6}, {0}, -1, 1},
    {"prod", f_prod, 2, 0, {3, 4}, {0}, 0.5, 1.5},
    {"mean", f_mean, 2, 0, {3, 4}, {0}, -1, 1},
    {"var", f_var, 2, 0, {3, 5}, {0}, -1, 1},
    {"std", f_std, 2, 0, {4, 3}, {0}, -1, 1},
    {"softmax", f_softmax, 2, 0, {3, 7}, {0}, -2, 2},
    {"log_softmax", f_logsoftmax, 2, 0, {5, 3}, {0}, -2, 2},
    {"logsumexp", f_lse, 2, 0, {3, 4}, {0}, -2, 2},
    {"matmul", f_matmul, 2, 2, {3, 5}, {5, 4}, -1, 1},
    {"matmul batched broadcast", f_matmul, 3, 2, {2, 3, 4}, {4, 2}, -1, 1},
    {"matmul vector", f_matmul, 1, 2, {4}, {4, 3}, -1, 1},
    {"add broadcast", f_add, 2, 1, {3, 4}, {4}, -1, 1},
    {"sub broadcast", f_sub, 2, 2, {3, 1}, {1, 4}, -1, 1},
    {"mul broadcast", f_mul, 3, 2, {2, 3, 4}, {3, 1}, -1, 1},
    {"div", f_div, 2, 2, {3, 4}, {3, 4}, 0.5, 2},
    {"pow", f_pow, 2, 2, {3, 4}, {3, 4}, 0.5, 2},
    {"maximum", f_maximum, 2, 2, {3, 4}, {3, 4}, -1, 1},
    {"minimum", f_minimum, 2, 1, {3, 4}, {4}, -1, 1},
    {"where", f_where, 2, 2, {3, 4}, {3, 4}, -1, 1},
    {"movement chain", f_movement, 3, 0, {3, 2, 4}, {0}, -1, 1},
    {"slice with steps and cat", f_slice_cat, 2, 0, {3, 5}, {0}, -1, 1},
    {"transposed input", f_transposed_mul, 2, 2, {4, 3}, {3, 4}, -1, 1},
};

TEST(test_autograd_every_op_matches_finite_differences) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
}

TEST(test_autograd_backward_accumulates_and_zero_grad_clears) {
  tg_scope_begin();
  double xv[3] = {1, 2, 3};
  tg_tensor *x = tg_set_requires_grad(tg_from_data(TG_FLOAT64, 1, (int64_t[]){3}, xv, sizeof xv), true);
  tg_tensor *loss = tg_sum(tg_mul(x, x), 0, NULL, false);
  CHECK(tg_backward(loss) == TG_OK, "%s", tg_error());
  CHECK(tg_backward(loss) == TG_OK, "%s", tg_error());
  double g[3];
  CHECK(tg_to_host(tg_grad(x), g, sizeof g) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 3; i++) CHECK(fabs(g[i] - 4 * xv[i]) < 1e-12, "grad[%d] = %g, want %g", i, g[i], 4 * xv[i]);
  tg_zero_grad(x);
  CHECK(tg_grad(x) == NULL, "zero_grad left a gradient");
  tg_scope_end();
}

TEST(test_autograd_detach_stops_gradient) {
  tg_scope_begin();
  double xv[2] = {1.5, -2};
  tg_tensor *x = tg_set_requires_grad(tg_from_data(TG_FLOAT64, 1, (int64_t[]){2}, xv, sizeof xv), true);
  tg_tensor *loss = tg_sum(tg_mul(x, tg_detach(x)), 0, NULL, false);  /* d/dx = detach(x) = x */
  CHECK(tg_backward(loss) == TG_OK, "%s", tg_error());
  double g[2];
  CHECK(tg_to_host(tg_grad(x), g, sizeof g) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 2; i++) CHECK(fabs(g[i] - xv[i]) < 1e-12, "grad[%d] = %g, want %g", i, g[i], xv[i]);
  tg_scope_end();
}

TEST(test_autograd_functional_gradient_and_unrelated_target) {
  tg_scope_begin();
  float av[4] = {1, 2, 3, 4}, bv[4] = {0.5f, -1, 2, 0};
  tg_tensor *a = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, av, sizeof av);
  tg_tensor *b = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, bv, sizeof bv);
  tg_tensor *c = tg_ones(TG_FLOAT32, 1, (int64_t[]){4});
  tg_tensor *loss = tg_sum(tg_mul(tg_exp(a), b), 0, NULL, false);
  tg_tensor *g[3];
  CHECK(tg_gradient(loss, 3, (tg_tensor *[]){a, b, c}, g) == TG_OK, "%s", tg_error());
  float ga[4], gb[4], gc[4];
  CHECK(tg_to_host(g[0], ga, sizeof ga) == TG_OK && tg_to_host(g[1], gb, sizeof gb) == TG_OK &&
            tg_to_host(g[2], gc, sizeof gc) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 4; i++) {
    CHECK(fabsf(ga[i] - expf(av[i]) * bv[i]) <= 1e-5f * (1 + fabsf(ga[i])), "d/da[%d]", i);
    CHECK(fabsf(gb[i] - expf(av[i])) <= 1e-5f * expf(av[i]), "d/db[%d]", i);
    CHECK(gc[i] == 0, "d/dc[%d] should be 0", i);
  }
  CHECK(tg_gradient(tg_exp(a), 1, &a, g) != TG_OK, "a non-scalar loss was accepted");
  CHECK(strstr(tg_error(), "tg_gradient"), "error does not name the op: %s", tg_error());
  tg_scope_end();
}

TEST(test_autograd_forward_and_backward_fuse) {
  tg_scope_begin();
  tg_tensor *x = tg_rand(TG_FLOAT32, 2, (int64_t[]){16, 32});
  tg_tensor *w = tg_set_requires_grad(tg_contiguous(tg_rand(TG_FLOAT32, 2, (int64_t[]){32, 8})), true);
  CHECK(tg_realize(w) == TG_OK, "%s", tg_error());
  tg_tensor *loss = tg_mean(tg_relu(tg_matmul(x, w)), 0, NULL, false);
  CHECK(tg_backward(loss) == TG_OK, "%s", tg_error());
  tg_tensor *both[2] = {loss, tg_grad(w)};
  CHECK(tg_realize_many(2, both) == TG_OK, "%s", tg_error());
  /* 5: the matmul stored once (relu's forward and its gradient's mask both read it), the loss, relu's
   * gradient, the weight gradient, and x's rand; recomputing the matmul in the gradient kernel saved one */
  CHECK(tg_kernel_count_last() <= 5, "loss and its gradient took %d kernels", (int)tg_kernel_count_last());
  tg_scope_end();
}
