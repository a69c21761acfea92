/* test_options.c — option structs are taken literally: per-dimension and per-side paddings, zero learning
 * rates, b1 = 0 and weight_decay = 0 mean what they say; tg_*_defaults() are tinygrad's defaults; tinygrad's
 * forms of pad, randint, layernorm, linear and the losses' reductions. Each result is checked against a
 * plain C computation. */
#include <stdlib.h>

#include "test.h"

#define H 5
#define W 6

/* one channel, one filter: out[i][j] = sum w[a][b] * x[i*s + a*d - top][j*s + b*d - left] (0 outside x) */
static int conv_ref(const float *x, int h, int w, const float *k, int kh, int kw, const int64_t *pads /* t,b,l,r */,
                    int s, float *out, int *oh, int *ow) {
  *oh = (int)((h + pads[0] + pads[1] - kh) / s + 1);
  *ow = (int)((w + pads[2] + pads[3] - kw) / s + 1);
  for (int i = 0; i < *oh; i++)
    for (int j = 0; j < *ow; j++) {
      double acc = 0;
      for (int a = 0; a < kh; a++)
        for (int b = 0; b < kw; b++) {
          int y = i * s + a - (int)pads[0], xx = j * s + b - (int)pads[2];
          if (y >= 0 && y < h && xx >= 0 && xx < w) acc += (double)k[a * kw + b] * x[y * w + xx];
        }
      out[i * *ow + j] = (float)acc;
    }
  return *oh * *ow;
}

static void fill(float *v, int n, float scale) {
  for (int i = 0; i < n; i++) v[i] = scale * (float)((i * 7 + 3) % 11) - 2.5f;
}

/* conv2d with options o against conv_ref with per-side pads (top, bottom, left, right) */
static void check_conv(const char *what, tg_conv_opts o, const int64_t *pads, int stride) {
  float x[H * W], k[3 * 2], want[64], got[64];
  fill(x, H * W, 0.5f);
  fill(k, 6, 0.25f);
  int oh, ow, n = conv_ref(x, H, W, k, 3, 2, pads, stride, want, &oh, &ow);
  tg_scope_begin();
  tg_tensor *xt = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, H, W}, x, sizeof x);
  tg_tensor *kt = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, 3, 2}, k, sizeof k);
  tg_tensor *y = tg_conv2d(xt, kt, NULL, o);
  if (!y) {
    CHECK(false, "%s: %s", what, tg_error());
  } else {
    CHECK(tg_shape(y, 2) == oh && tg_shape(y, 3) == ow, "%s: output (%lld, %lld), want (%d, %d)", what,
          (long long)tg_shape(y, 2), (long long)tg_shape(y, 3), oh, ow);
    if (tg_numel(y) == n && tg_to_host(y, got, (size_t)n * sizeof(float)) == TG_OK)
      check_close_f32(what, got, want, n, 1e-5, 1e-5, __FILE__, __LINE__);
  }
  tg_scope_end();
}

TEST(test_options_conv_padding_per_dimension_and_per_side) {
  /* {1, 0}: one row above and below, no column: before the redesign this padded both dimensions */
  check_conv("padding (1, 0)", (tg_conv_opts){.padding = TG_INTS(1, 0)}, (int64_t[]){1, 1, 0, 0}, 1);
  check_conv("padding 2", (tg_conv_opts){.padding = TG_INTS(2)}, (int64_t[]){2, 2, 2, 2}, 1);
  /* per side in tinygrad's flat order: (left, right, top, bottom) */
  check_conv("padding (left 1, right 0, top 2, bottom 0)", (tg_conv_opts){.padding = TG_INTS(1, 0, 2, 0)},
             (int64_t[]){2, 0, 1, 0}, 1);
  check_conv("stride 2, padding (0, 1)", (tg_conv_opts){.stride = TG_INTS(2), .padding = TG_INTS(0, 1)},
             (int64_t[]){0, 0, 1, 1}, 2);
  tg_conv_opts d = tg_conv_defaults();
  CHECK(d.groups == 1 && d.stride.n == 0 && d.padding.n == 0 && d.dilation.n == 0, "tg_conv_defaults");
  check_conv("defaults", d, (int64_t[]){0, 0, 0, 0}, 1);
  /* wrong counts and zero strides are refused, naming the option */
  tg_tensor *x = tg_zeros(TG_FLOAT32, 4, (int64_t[]){1, 1, H, W}), *k = tg_zeros(TG_FLOAT32, 4, (int64_t[]){1, 1, 3, 2});
  CHECK(!tg_conv2d(x, k, NULL, (tg_conv_opts){.padding = TG_INTS(1, 1, 1)}) && strstr(tg_error(), "padding"), "3 paddings");
  CHECK(!tg_conv2d(x, k, NULL, (tg_conv_opts){.stride = TG_INTS(0)}) && strstr(tg_error(), "stride"), "stride 0");
  /* a negative padding crops the input, as tinygrad's; cropping past the input is refused */
  check_conv("padding -1", (tg_conv_opts){.padding = TG_INTS(-1)}, (int64_t[]){-1, -1, -1, -1}, 1);
  check_conv("padding (left 1, right -1, top 0, bottom -1)", (tg_conv_opts){.padding = TG_INTS(1, -1, 0, -1)},
             (int64_t[]){0, -1, 1, -1}, 1);
  CHECK(!tg_conv2d(x, k, NULL, (tg_conv_opts){.padding = TG_INTS(-2)}) && strstr(tg_error(), "no output"), "padding -2: %s", tg_error());
  CHECK(!tg_conv2d(x, k, NULL, (tg_conv_opts){.groups = -2}) && strstr(tg_error(), "groups"), "groups -2");
  CHECK(!tg_conv2d(x, k, NULL, (tg_conv_opts){.output_padding = TG_INTS(1)}), "output_padding on conv2d");
  tg_free(x);
  tg_free(k);
}

TEST(test_options_conv_transpose_per_side_padding_matches_adjoint) {
  /* <conv_transpose(y), x> == <y, conv(x)> for the same weight and options: the transpose is the adjoint.
   * Padding (left 1, right 0, top 0, bottom 2), stride (2, 1): conv gives (3, 6), and the transpose (5, 6) */
  float x[H * W], k[6], y[64];
  fill(x, H * W, 0.5f);
  fill(k, 6, 0.25f);
  tg_conv_opts o = {.stride = TG_INTS(2, 1), .padding = TG_INTS(1, 0, 0, 2)};
  tg_scope_begin();
  tg_tensor *xt = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, H, W}, x, sizeof x);
  tg_tensor *kt = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, 3, 2}, k, sizeof k);
  tg_tensor *cx = tg_conv2d(xt, kt, NULL, o);
  CHECK_T(cx);
  int64_t n = tg_numel(cx);
  fill(y, (int)n, 0.125f);
  tg_tensor *yt = tg_from_data(TG_FLOAT32, 4, tg_shape_ptr(cx), y, (size_t)n * sizeof(float));
  tg_tensor *ty = tg_conv_transpose2d(yt, kt, NULL, o);
  CHECK_T(ty);
  CHECK(tg_shape(ty, 2) == H && tg_shape(ty, 3) == W, "transposed output (%lld, %lld)", (long long)tg_shape(ty, 2),
        (long long)tg_shape(ty, 3));
  double a = tg_item(tg_sum(tg_mul(ty, xt), 0, NULL, false)), b = tg_item(tg_sum(tg_mul(yt, cx), 0, NULL, false));
  CHECK(fabs(a - b) <= 1e-4 * (1 + fabs(b)), "<T(y), x> = %g, <y, C(x)> = %g", a, b);
  tg_scope_end();
}

TEST(test_options_pool_defaults_and_count_include_pad) {
  float x[16];
  for (int i = 0; i < 16; i++) x[i] = (float)(i + 1);
  tg_scope_begin();
  tg_tensor *xt = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, 1, 4, 4}, x, sizeof x);
  tg_pool_opts d = tg_pool_defaults();
  CHECK(d.count_include_pad && !d.ceil_mode && d.kernel.n == 0, "tg_pool_defaults");
  /* the defaults: a 2x2 kernel, stride 2 */
  float got[16];
  CHECK(tg_to_host(tg_max_pool2d(xt, d), got, 4 * sizeof(float)) == TG_OK, "%s", tg_error());
  CHECK(got[0] == 6 && got[1] == 8 && got[2] == 14 && got[3] == 16, "max_pool2d defaults: %g %g %g %g", got[0], got[1], got[2], got[3]);
  /* 3x3 stride 1 padding 1: the corner window holds 1, 2, 5, 6 */
  d.kernel = TG_INTS(3);
  d.stride = TG_INTS(1);
  d.padding = TG_INTS(1);
  CHECK(tg_to_host(tg_avg_pool2d(xt, d), got, sizeof got) == TG_OK, "%s", tg_error());
  CHECK(fabsf(got[0] - 14.0f / 9) < 1e-5f, "count_include_pad: corner %g, want 14/9", got[0]);
  d.count_include_pad = false;
  CHECK(tg_to_host(tg_avg_pool2d(xt, d), got, sizeof got) == TG_OK, "%s", tg_error());
  CHECK(fabsf(got[0] - 14.0f / 4) < 1e-5f, "count_include_pad false: corner %g, want 14/4", got[0]);
  /* per side: (left 0, right 1, top 1, bottom 0) with a 2x2 kernel, stride 2: rows -1..3, columns 0..4 */
  tg_pool_opts ps = {.kernel = TG_INTS(2), .padding = TG_INTS(0, 1, 1, 0)};
  tg_tensor *m = tg_max_pool2d(xt, ps);
  CHECK_T(m);
  CHECK(tg_shape(m, 2) == 2 && tg_shape(m, 3) == 2, "per-side pool shape (%lld, %lld)", (long long)tg_shape(m, 2),
        (long long)tg_shape(m, 3));
  CHECK(tg_to_host(m, got, 4 * sizeof(float)) == TG_OK, "%s", tg_error());
  CHECK(got[0] == 2 && got[1] == 4 && got[2] == 10 && got[3] == 12, "per-side max_pool: %g %g %g %g", got[0], got[1], got[2], got[3]);
  tg_scope_end();
}

/* one parameter p = 1 (gradient 2 p = 2 from loss p^2), one step of the optimizer o; p after it */
static double one_step(tg_optim *(*make)(const tg_params *, const void *), const void *opts) {
  tg_scope_begin();
  float one = 1;
  tg_tensor *p = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){1}, &one, sizeof one), true);
  tg_params *ps = tg_params_new();
  double r = NAN;
  if (tg_params_add(ps, "p", p) == TG_OK) {
    tg_optim *o = make(ps, opts);
    tg_tensor *loss = tg_sum(tg_square(p), 0, NULL, false);
    if (o && tg_backward(loss) == TG_OK && tg_optim_step(o, 1, &loss) == TG_OK) r = tg_item(p);
    tg_optim_free(o);
  }
  tg_params_free(ps);
  tg_scope_end();
  return r;
}
static tg_optim *make_adam(const tg_params *p, const void *o) { return tg_adam_new(p, *(const tg_adam_opts *)o); }
static tg_optim *make_adamw(const tg_params *p, const void *o) { return tg_adamw_new(p, *(const tg_adam_opts *)o); }
static tg_optim *make_sgd(const tg_params *p, const void *o) { return tg_sgd_new(p, *(const tg_sgd_opts *)o); }

TEST(test_options_optimizer_zeros_are_literal) {
  tg_adam_opts a = tg_adam_defaults(), w = tg_adamw_defaults();
  CHECK(a.lr == 1e-3 && a.b1 == 0.9 && a.b2 == 0.999 && a.eps == 1e-8 && a.weight_decay == 0, "tg_adam_defaults");
  CHECK(w.weight_decay == 0.01 && w.lr == 1e-3, "tg_adamw_defaults");
  tg_sgd_opts s = tg_sgd_defaults();
  CHECK(s.lr == 1e-3 && s.momentum == 0 && s.weight_decay == 0 && !s.nesterov, "tg_sgd_defaults");
  /* Adam's first step moves by lr * m/(1-b1) / (sqrt(v/(1-b2)) + eps) = lr * g / (|g| + eps) ~ lr */
  a.lr = 0.1;
  double p = one_step(make_adam, &a);
  CHECK(fabs(p - (1 - 0.1 * 2 / (2 + 1e-8))) < 1e-6, "adam step: %g", p);
  /* lr 0: no movement (before: the default 1e-3 was used) */
  a.lr = 0;
  p = one_step(make_adam, &a);
  CHECK(p == 1, "adam with lr 0 moved the parameter to %g", p);
  /* b1 0: m is the gradient; the same first step. b2 0 too: v = g^2 */
  a = tg_adam_defaults();
  a.lr = 0.1;
  a.b1 = 0;
  a.b2 = 0;
  p = one_step(make_adam, &a);
  CHECK(fabs(p - (1 - 0.1 * 2 / (2 + 1e-8))) < 1e-6, "adam b1 = b2 = 0 step: %g", p);
  /* eps 1: p - lr * 2 / (2 + 1) */
  a.eps = 1;
  p = one_step(make_adam, &a);
  CHECK(fabs(p - (1 - 0.1 * 2 / 3.0)) < 1e-6, "adam eps 1 step: %g", p);
  /* AdamW with weight_decay 0 is Adam (before: 0 meant 0.01); with 0.5: p * (1 - lr * wd) - lr * step */
  w.lr = 0.1;
  w.weight_decay = 0;
  p = one_step(make_adamw, &w);
  CHECK(fabs(p - (1 - 0.1 * 2 / (2 + 1e-8))) < 1e-6, "adamw with weight_decay 0: %g", p);
  w.weight_decay = 0.5;
  p = one_step(make_adamw, &w);
  CHECK(fabs(p - (1 * (1 - 0.1 * 0.5) - 0.1 * 2 / (2 + 1e-8))) < 1e-6, "adamw with weight_decay 0.5: %g", p);
  /* SGD: lr 0.25 -> 1 - 0.25 * 2 */
  s.lr = 0.25;
  p = one_step(make_sgd, &s);
  CHECK(fabs(p - 0.5) < 1e-6, "sgd step: %g", p);
  /* out of range values are refused, naming the option */
  tg_params *ps = tg_params_new();
  a = tg_adam_defaults();
  a.b1 = 1;
  CHECK(!tg_adam_new(ps, a) && strstr(tg_error(), "b1"), "adam b1 = 1 accepted");
  a = tg_adam_defaults();
  a.lr = NAN;
  CHECK(!tg_adam_new(ps, a) && strstr(tg_error(), "learning rate"), "adam lr nan accepted");
  s = tg_sgd_defaults();
  s.nesterov = true;
  CHECK(!tg_sgd_new(ps, s) && strstr(tg_error(), "nesterov"), "nesterov without momentum accepted");
  s.nesterov = false;
  s.momentum = -1;
  CHECK(!tg_sgd_new(ps, s) && strstr(tg_error(), "momentum"), "negative momentum accepted");
  tg_optim *o = tg_sgd_new(ps, tg_sgd_defaults());
  CHECK(o && tg_optim_set_lr(o, -1) == TG_ERR_ARG && tg_optim_lr(o) == 1e-3, "set_lr(-1) accepted");
  CHECK(tg_optim_set_lr(o, 0.5) == TG_OK && tg_optim_lr(o) == 0.5, "set_lr(0.5)");
  tg_optim_free(o);
  tg_params_free(ps);
}

TEST(test_options_pad_flat_form_is_last_axis_first) {
  float x[6] = {1, 2, 3, 4, 5, 6}, got[32];
  tg_scope_begin();
  tg_tensor *t = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, x, sizeof x);
  /* (1, 1): the last axis only -> (2, 5) */
  tg_tensor *a = tg_pad(t, 2, (int64_t[]){1, 1}, 0);
  CHECK_T(a);
  CHECK(tg_shape(a, 0) == 2 && tg_shape(a, 1) == 5, "pad (1, 1): shape (%lld, %lld)", (long long)tg_shape(a, 0),
        (long long)tg_shape(a, 1));
  /* (0, 1, 2, 0): the last axis gets 0 before and 1 after, the first 2 before -> (4, 4) */
  tg_tensor *b = tg_pad(t, 4, (int64_t[]){0, 1, 2, 0}, -1);
  CHECK_T(b);
  float want[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 1, 2, 3, -1, 4, 5, 6, -1};
  CHECK(tg_numel(b) == 16 && tg_to_host(b, got, 16 * sizeof(float)) == TG_OK, "%s", tg_error());
  check_close_f32("pad (0, 1, 2, 0)", got, want, 16, 0, 0, __FILE__, __LINE__);
  /* negative values crop, as tinygrad's */
  tg_tensor *c = tg_pad(t, 2, (int64_t[]){-1, 1}, 9);
  float want_c[8] = {2, 3, 9, 5, 6, 9};
  CHECK(c && tg_numel(c) == 6 && tg_to_host(c, got, 6 * sizeof(float)) == TG_OK, "%s", tg_error());
  check_close_f32("pad (-1, 1)", got, want_c, 6, 0, 0, __FILE__, __LINE__);
  tg_scope_end();
}

TEST(test_options_randint_shape_first_with_dtype) {
  int64_t n = 4000;
  tg_scope_begin();
  tg_manual_seed(9);
  tg_tensor *r = tg_randint(TG_INT64, 1, &n, -((int64_t)1 << 40), ((int64_t)1 << 40) + 3);
  CHECK_T(r);
  CHECK(tg_dtype_of(r) == TG_INT64, "randint dtype %s", tg_dtype_name(tg_dtype_of(r)));
  int64_t *v = malloc((size_t)n * sizeof *v);
  CHECK(v && tg_to_host(r, v, (size_t)n * sizeof *v) == TG_OK, "%s", tg_error());
  int neg = 0, big = 0;
  for (int64_t i = 0; v && i < n; i++) {
    CHECK(v[i] >= -((int64_t)1 << 40) && v[i] < ((int64_t)1 << 40) + 3, "randint value %lld out of range", (long long)v[i]);
    neg += v[i] < 0;
    big += v[i] > ((int64_t)1 << 39) || v[i] < -((int64_t)1 << 39);
  }
  CHECK(neg > n / 3 && big > n / 3, "randint over 2^41 values: %d negative, %d large of %lld", neg, big, (long long)n);
  free(v);
  tg_tensor *u8 = tg_randint(TG_UINT8, 1, &n, 250, 256);
  uint8_t b[4000];
  CHECK(u8 && tg_to_host(u8, b, sizeof b) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 4000; i++) CHECK(b[i] >= 250, "uint8 randint %d", b[i]);
  CHECK(!tg_randint(TG_UINT8, 1, &n, 0, 257), "range past uint8 accepted");
  CHECK(!tg_randint(TG_FLOAT32, 1, &n, 0, 2), "float randint accepted");
  tg_scope_end();
}

TEST(test_options_layernorm_axes_linear_and_loss_reductions) {
  float x[6] = {1, 2, 3, 4, 6, 8}, got[6];
  tg_scope_begin();
  tg_tensor *t = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, x, sizeof x);
  /* over axis 0: each column (a, b) -> (a - m, b - m) / sqrt(((a-b)/2)^2 + eps) = (-1, 1) */
  CHECK(tg_to_host(tg_layernorm(t, 1, (int[]){0}, 0), got, sizeof got) == TG_OK, "%s", tg_error());
  float want[6] = {-1, -1, -1, 1, 1, 1};
  check_close_f32("layernorm over axis 0", got, want, 6, 1e-5, 0, __FILE__, __LINE__);
  /* tg_linear: weight (in, out) as tinygrad's Tensor.linear */
  float w[6] = {1, 0, 0, 1, 1, 1}, bias[2] = {10, 20};
  tg_tensor *wt = tg_from_data(TG_FLOAT32, 2, (int64_t[]){3, 2}, w, sizeof w);
  tg_tensor *bt = tg_from_data(TG_FLOAT32, 1, (int64_t[]){2}, bias, sizeof bias);
  CHECK(tg_to_host(tg_linear(t, wt, bt), got, 4 * sizeof(float)) == TG_OK, "%s", tg_error());
  float want_l[4] = {1 + 3 + 10, 2 + 3 + 20, 4 + 8 + 10, 6 + 8 + 20};
  check_close_f32("linear", got, want_l, 4, 1e-5, 0, __FILE__, __LINE__);
  /* reductions: none gives the per-sample losses, sum their sum, mean their mean */
  int32_t lab[2] = {2, 0};
  tg_tensor *lt = tg_from_data(TG_INT32, 1, (int64_t[]){2}, lab, sizeof lab);
  double l0 = -(3 - log(exp(1) + exp(2) + exp(3))), l1 = -(4 - log(exp(4) + exp(6) + exp(8)));
  tg_loss_opts o = tg_loss_defaults();
  CHECK(o.reduction == TG_REDUCTION_MEAN && !o.use_ignore_index && o.label_smoothing == 0, "tg_loss_defaults");
  CHECK(fabs(tg_item(tg_sparse_categorical_crossentropy(t, lt, o)) - (l0 + l1) / 2) < 1e-4, "mean: %s", tg_error());
  o.reduction = TG_REDUCTION_SUM;
  CHECK(fabs(tg_item(tg_sparse_categorical_crossentropy(t, lt, o)) - (l0 + l1)) < 1e-4, "sum");
  o.reduction = TG_REDUCTION_NONE;
  tg_tensor *per = tg_sparse_categorical_crossentropy(t, lt, o);
  CHECK(per && tg_ndim(per) == 1 && tg_to_host(per, got, 2 * sizeof(float)) == TG_OK, "none: %s", tg_error());
  CHECK(fabs(got[0] - l0) < 1e-4 && fabs(got[1] - l1) < 1e-4, "none: %g %g, want %g %g", got[0], got[1], l0, l1);
  /* ignore_index 0 (class 0 is a real class: only when asked) */
  o = tg_loss_defaults();
  o.use_ignore_index = true;
  o.ignore_index = 0;
  CHECK(fabs(tg_item(tg_sparse_categorical_crossentropy(t, lt, o)) - l0) < 1e-4, "ignore_index 0");
  CHECK(fabs(tg_item(tg_cross_entropy(t, lt, tg_loss_defaults())) - (l0 + l1) / 2) < 1e-4, "cross_entropy: %s", tg_error());
  o.reduction = TG_REDUCTION_SUM;
  CHECK(!tg_cross_entropy(t, lt, o) && strstr(tg_error(), "ignore_index"), "cross_entropy took ignore_index");
  o = tg_loss_defaults();
  o.reduction = (tg_reduction)7;
  CHECK(!tg_nll_loss(t, lt, o) && strstr(tg_error(), "reduction"), "reduction 7 accepted");
  tg_scope_end();
}
