/* test_nn_ops.c — the neural network ops of tg.h against PyTorch's golden values.
 *
 * tests/fixtures/nn_ops.bin is written by tests/fixtures/make_nn_fixtures.py (PyTorch, CPU): seeded inputs,
 * each case's parameters and PyTorch's outputs for convolutions, pooling, norms, losses, cumsum, attention
 * and interpolate. The ops whose reference is a few lines (one_hot, gather, index_select, embedding,
 * triu/tril) are checked against plain C here. Tolerance: atol 1e-5 / rtol 1e-3. The atol is looser than
 * test_ops' 1e-6 because these outputs are sums of up to 72 products of N(0, 1) values, whose float32
 * rounding in another order reaches a few 1e-6 near zero. */
#include <stdarg.h>
#include <stdlib.h>

#include "fixture.h"
#include "run_kernel.h"
#include "test.h"

#define ATOL 1e-5
#define RTOL 1e-3

/* ---- fixtures ----------------------------------------------------------------------------------------- */

#define CHECK_FX(what, got, want) check_fx(what, got, want, ATOL, RTOL, __FILE__, __LINE__)

/* every test body runs in a scope that frees its tensors, and with the fixtures loaded */
#define NN_TEST(name) FIXTURE_TEST(name, "nn_ops.bin")

/* ---- convolutions --------------------------------------------------------------------------------------- */

/* p = [nd, groups, stride x3, dilation x3, padding x3, output_padding x3] */
static tg_conv_opts conv_opts(const fx_rec *p) {
  int nd = (int)fx_param(p, 0);
  tg_conv_opts o = {.groups = (int64_t)fx_param(p, 1)};
  o.stride.n = o.dilation.n = o.padding.n = o.output_padding.n = nd;
  for (int j = 0; j < nd; j++) {
    o.stride.v[j] = (int64_t)fx_param(p, 2 + j);
    o.dilation.v[j] = (int64_t)fx_param(p, 5 + j);
    o.padding.v[j] = (int64_t)fx_param(p, 8 + j);
    o.output_padding.v[j] = (int64_t)fx_param(p, 11 + j);
  }
  return o;
}

NN_TEST(test_nn_conv2d_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "conv2d/%d/x", i); i++, n++) {
    char what[64];
    snprintf(what, sizeof what, "conv2d case %d", i);
    tg_tensor *y = tg_conv2d(fx_tensor(fx_get(f, "conv2d/%d/x", i)), fx_tensor(fx_get(f, "conv2d/%d/w", i)),
                             fx_tensor(fx_get(f, "conv2d/%d/b", i)), conv_opts(fx_get(f, "conv2d/%d/p", i)));
    CHECK_FX(what, y, fx_get(f, "conv2d/%d/y", i));
  }
  CHECK(n >= 9, "only %d conv2d cases", n);
}

NN_TEST(test_nn_conv_transpose2d_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "convt/%d/x", i); i++, n++) {
    char what[64];
    snprintf(what, sizeof what, "conv_transpose2d case %d", i);
    tg_tensor *y = tg_conv_transpose2d(fx_tensor(fx_get(f, "convt/%d/x", i)), fx_tensor(fx_get(f, "convt/%d/w", i)),
                                       fx_tensor(fx_get(f, "convt/%d/b", i)), conv_opts(fx_get(f, "convt/%d/p", i)));
    CHECK_FX(what, y, fx_get(f, "convt/%d/y", i));
  }
  CHECK(n >= 6, "only %d conv_transpose2d cases", n);
}

/* p = [is_max, nd, kernel x3, stride x3, dilation x3, padding x3, ceil_mode, count_exclude_pad] */
NN_TEST(test_nn_pools_match_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "pool/%d/x", i); i++, n++) {
    const fx_rec *p = fx_get(f, "pool/%d/p", i);
    int nd = (int)fx_param(p, 1);
    tg_pool_opts o = {.ndims = nd, .ceil_mode = fx_param(p, 14) != 0, .count_include_pad = fx_param(p, 15) == 0};
    o.kernel.n = o.stride.n = o.dilation.n = o.padding.n = nd;
    for (int j = 0; j < nd; j++) {
      o.kernel.v[j] = (int64_t)fx_param(p, 2 + j);
      o.stride.v[j] = (int64_t)fx_param(p, 5 + j);
      o.dilation.v[j] = (int64_t)fx_param(p, 8 + j);
      o.padding.v[j] = (int64_t)fx_param(p, 11 + j);
    }
    if (o.stride.v[0] == 0) o.stride.n = 0;   /* PyTorch's stride=None: the kernel size */
    bool is_max = fx_param(p, 0) != 0;
    char what[64];
    snprintf(what, sizeof what, "%s case %d", is_max ? "max_pool" : "avg_pool", i);
    tg_tensor *x = fx_tensor(fx_get(f, "pool/%d/x", i));
    CHECK_FX(what, is_max ? tg_max_pool2d(x, o) : tg_avg_pool2d(x, o), fx_get(f, "pool/%d/y", i));
  }
  CHECK(n >= 16, "only %d pool cases", n);
}

/* conv2d + relu + max_pool2d: 2 kernels, as tinygrad (the conv with its relu, then the pool). The values a
 * max reduces are stored when they come from a reduce, so a gradient's x == max(x) sees the very same
 * floats (fusing the conv into the pool would be 1 kernel, but recomputed elsewhere with another summation
 * order the comparison can match nothing). */
NN_TEST(test_nn_conv_relu_maxpool_is_two_kernels) {
  const fx_rec *xr = fx_get(f, "conv2d/0/x"), *wr = fx_get(f, "conv2d/0/w"), *br = fx_get(f, "conv2d/0/b");
  tg_tensor *x = fx_tensor(xr), *w = fx_tensor(wr), *b = fx_tensor(br);
  tg_tensor *y = tg_max_pool2d(tg_relu(tg_conv2d(x, w, b, (tg_conv_opts){0})), (tg_pool_opts){.kernel = TG_INTS(2)});
  CHECK_T(y);
  CHECK(tg_realize(y) == TG_OK, "realize: %s", tg_error());
  CHECK(tg_kernel_count_last() == 2, "conv2d+relu+max_pool2d ran %llu kernels, expected 2 (tinygrad: 2)",
        (unsigned long long)tg_kernel_count_last());
  /* the value: max over 2x2 windows of relu(conv) from PyTorch's conv output */
  const fx_rec *cr = fx_get(f, "conv2d/0/y");
  int64_t nn = cr->shape[0], c = cr->shape[1], h = cr->shape[2], wd = cr->shape[3], oh = h / 2, ow = wd / 2;
  float *want = malloc((size_t)(nn * c * oh * ow) * sizeof *want), *got = malloc((size_t)(nn * c * oh * ow) * sizeof *got);
  const float *cv = cr->data;
  for (int64_t i = 0; i < nn * c; i++)
    for (int64_t r = 0; r < oh; r++)
      for (int64_t q = 0; q < ow; q++) {
        float m = 0;
        for (int a = 0; a < 2; a++)
          for (int bb = 0; bb < 2; bb++) {
            float v = cv[(i * h + 2 * r + a) * wd + 2 * q + bb];
            if (v > m) m = v;
          }
        want[(i * oh + r) * ow + q] = m;
      }
  if (want && got && tg_to_host(y, got, (size_t)(nn * c * oh * ow) * sizeof *got) == TG_OK)
    check_close_f32("conv+relu+maxpool", got, want, nn * c * oh * ow, ATOL, RTOL, __FILE__, __LINE__);
  free(want);
  free(got);
}

/* ---- norms ----------------------------------------------------------------------------------------------- */

NN_TEST(test_nn_layernorm_rmsnorm_match_pytorch) {
  for (int i = 0; fx_get(f, "layernorm/%d/x", i); i++) {
    int naxes = (int)fx_param(fx_get(f, "layernorm/%d/p", i), 0), axes[TG_MAX_DIMS];
    for (int k = 0; k < naxes; k++) axes[k] = -1 - k;   /* PyTorch's normalized_shape: the last naxes axes */
    CHECK_FX("layernorm", tg_layernorm(fx_tensor(fx_get(f, "layernorm/%d/x", i)), naxes, axes, 1e-5), fx_get(f, "layernorm/%d/y", i));
    CHECK_FX("rmsnorm", tg_rmsnorm(fx_tensor(fx_get(f, "rmsnorm/%d/x", i)), naxes, axes, 1e-6), fx_get(f, "rmsnorm/%d/y", i));
  }
}

NN_TEST(test_nn_batchnorm_matches_pytorch) {
  /* training: batch statistics over (N, H, W), biased variance */
  tg_tensor *x = fx_tensor(fx_get(f, "batchnorm/0/x"));
  int axes[3] = {0, 2, 3};
  tg_tensor *mean = tg_mean(x, 3, axes, false);
  tg_tensor *invstd = tg_rsqrt(tg_add_scalar(tg_var(x, 3, axes, false, 0), 1e-5));
  CHECK_FX("batchnorm training", tg_batchnorm(x, fx_tensor(fx_get(f, "batchnorm/0/w")), fx_tensor(fx_get(f, "batchnorm/0/b")), mean, invstd),
           fx_get(f, "batchnorm/0/y"));
  /* inference: running statistics */
  CHECK_FX("batchnorm inference",
           tg_batchnorm(fx_tensor(fx_get(f, "batchnorm/1/x")), fx_tensor(fx_get(f, "batchnorm/1/w")),
                        fx_tensor(fx_get(f, "batchnorm/1/b")), fx_tensor(fx_get(f, "batchnorm/1/mean")),
                        fx_tensor(fx_get(f, "batchnorm/1/invstd"))),
           fx_get(f, "batchnorm/1/y"));
}

NN_TEST(test_nn_group_norm_matches_pytorch) {
  for (int i = 0; fx_get(f, "groupnorm/%d/x", i); i++) {
    int64_t g = (int64_t)fx_param(fx_get(f, "groupnorm/%d/p", i), 0);
    tg_tensor *y = tg_group_norm(fx_tensor(fx_get(f, "groupnorm/%d/x", i)), g, fx_tensor(fx_get(f, "groupnorm/%d/w", i)),
                                 fx_tensor(fx_get(f, "groupnorm/%d/b", i)), 1e-5);
    CHECK_FX("group_norm", y, fx_get(f, "groupnorm/%d/y", i));
  }
}

/* ---- losses ---------------------------------------------------------------------------------------------- */

static tg_loss_opts loss_opts(const fx_rec *p) {
  tg_loss_opts o = tg_loss_defaults();
  o.label_smoothing = fx_param(p, 0);
  o.use_ignore_index = fx_param(p, 1) != 0;
  o.ignore_index = (int64_t)fx_param(p, 2);
  return o;
}

NN_TEST(test_nn_sparse_categorical_crossentropy_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "sce/%d/x", i); i++, n++) {
    char what[64];
    snprintf(what, sizeof what, "sparse_categorical_crossentropy case %d", i);
    tg_tensor *y = tg_sparse_categorical_crossentropy(fx_tensor(fx_get(f, "sce/%d/x", i)), fx_tensor(fx_get(f, "sce/%d/t", i)),
                                                      loss_opts(fx_get(f, "sce/%d/p", i)));
    CHECK_FX(what, y, fx_get(f, "sce/%d/y", i));
  }
  CHECK(n >= 5, "only %d cases", n);
  /* int32 labels work as well as int64 */
  tg_tensor *l32 = tg_cast(fx_tensor(fx_get(f, "sce/3/t")), TG_INT32);
  CHECK_FX("int32 labels", tg_sparse_categorical_crossentropy(fx_tensor(fx_get(f, "sce/3/x")), l32, loss_opts(fx_get(f, "sce/3/p"))),
           fx_get(f, "sce/3/y"));
}

NN_TEST(test_nn_cross_entropy_nll_bce_match_pytorch) {
  for (int i = 0; fx_get(f, "ce/%d/x", i); i++)
    CHECK_FX("cross_entropy", tg_cross_entropy(fx_tensor(fx_get(f, "ce/%d/x", i)), fx_tensor(fx_get(f, "ce/%d/t", i)),
                                               (tg_loss_opts){.label_smoothing = fx_param(fx_get(f, "ce/%d/p", i), 0)}),
             fx_get(f, "ce/%d/y", i));
  for (int i = 0; fx_get(f, "nll/%d/x", i); i++)
    CHECK_FX("nll_loss", tg_nll_loss(fx_tensor(fx_get(f, "nll/%d/x", i)), fx_tensor(fx_get(f, "nll/%d/t", i)),
                                     loss_opts(fx_get(f, "nll/%d/p", i))),
             fx_get(f, "nll/%d/y", i));
  CHECK_FX("binary_crossentropy", tg_binary_crossentropy(fx_tensor(fx_get(f, "bce/0/x")), fx_tensor(fx_get(f, "bce/0/t")), tg_loss_defaults()),
           fx_get(f, "bce/0/y"));
  CHECK_FX("binary_crossentropy_logits",
           tg_binary_crossentropy_logits(fx_tensor(fx_get(f, "bcel/0/x")), fx_tensor(fx_get(f, "bcel/0/t")), tg_loss_defaults()), fx_get(f, "bcel/0/y"));
}

/* ---- cumsum, attention, interpolate ------------------------------------------------------------------- */

NN_TEST(test_nn_cumsum_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "cumsum/%d/x", i); i++, n++) {
    char what[64];
    snprintf(what, sizeof what, "cumsum case %d", i);
    int axis = (int)fx_param(fx_get(f, "cumsum/%d/p", i), 0);
    CHECK_FX(what, tg_cumsum(fx_tensor(fx_get(f, "cumsum/%d/x", i)), axis), fx_get(f, "cumsum/%d/y", i));
  }
  CHECK(n >= 6, "only %d cases", n);
  /* int8 sums in int32, as tinygrad's sum */
  int8_t v[5] = {100, 100, 100, -50, 7};
  tg_tensor *c = tg_cumsum(tg_from_data(TG_INT8, 1, (int64_t[]){5}, v, sizeof v), 0);
  CHECK_T(c);
  CHECK(tg_dtype_of(c) == TG_INT32, "cumsum of int8 is %s", tg_dtype_name(tg_dtype_of(c)));
  int32_t got[5], want[5] = {100, 200, 300, 250, 257};
  CHECK(tg_to_host(c, got, sizeof got) == TG_OK && !memcmp(got, want, sizeof got), "int8 cumsum: %d %d %d %d %d", got[0],
        got[1], got[2], got[3], got[4]);
}

NN_TEST(test_nn_scaled_dot_product_attention_matches_pytorch) {
  for (int i = 0; fx_get(f, "sdpa/%d/q", i); i++) {
    const fx_rec *p = fx_get(f, "sdpa/%d/p", i);
    tg_tensor *mask = NULL;
    if (fx_param(p, 0) == 1) mask = fx_tensor(fx_get(f, "sdpa/%d/m", i));
    if (fx_param(p, 0) == 2) mask = tg_cast(fx_tensor(fx_get(f, "sdpa/%d/m", i)), TG_BOOL);
    char what[64];
    snprintf(what, sizeof what, "attention case %d", i);
    tg_tensor *y = tg_scaled_dot_product_attention(fx_tensor(fx_get(f, "sdpa/%d/q", i)), fx_tensor(fx_get(f, "sdpa/%d/k", i)),
                                                   fx_tensor(fx_get(f, "sdpa/%d/v", i)), mask, 0, fx_param(p, 1) != 0, false);
    CHECK_FX(what, y, fx_get(f, "sdpa/%d/y", i));
  }
}

NN_TEST(test_nn_interpolate_matches_pytorch) {
  int n = 0;
  for (int i = 0; fx_get(f, "interp/%d/x", i); i++, n++) {
    const fx_rec *p = fx_get(f, "interp/%d/p", i);
    int nd = (int)fx_param(p, 1);
    int64_t size[3];
    for (int j = 0; j < nd; j++) size[j] = (int64_t)fx_param(p, 2 + j);
    char what[64];
    snprintf(what, sizeof what, "interpolate case %d", i);
    tg_tensor *y = tg_interpolate(fx_tensor(fx_get(f, "interp/%d/x", i)), nd, size,
                                  fx_param(p, 0) != 0 ? TG_INTERP_LINEAR : TG_INTERP_NEAREST, false);
    CHECK_FX(what, y, fx_get(f, "interp/%d/y", i));
  }
  CHECK(n >= 7, "only %d cases", n);
}

/* ---- indexing, against plain C ------------------------------------------------------------------------ */

static bool host_i32(tg_tensor *t, int32_t *out, size_t n) {
  return t && tg_to_host(tg_cast(t, TG_INT32), out, n * sizeof *out) == TG_OK;
}

NN_TEST(test_nn_one_hot_gather_index_select_embedding) {
  (void)f;
  int64_t lab[5] = {0, 3, 1, 3, 2};
  tg_tensor *l = tg_from_data(TG_INT64, 1, (int64_t[]){5}, lab, sizeof lab);
  tg_tensor *oh = tg_one_hot(l, 4);
  CHECK_T(oh);
  CHECK(tg_dtype_of(oh) == TG_INT32 && tg_ndim(oh) == 2 && tg_shape(oh, 1) == 4, "one_hot shape/dtype");
  int32_t o[20];
  CHECK(host_i32(oh, o, 20), "one_hot: %s", tg_error());
  for (int i = 0; i < 5; i++)
    for (int c = 0; c < 4; c++) CHECK(o[i * 4 + c] == (lab[i] == c), "one_hot[%d][%d] = %d", i, c, o[i * 4 + c]);

  /* x (3, 4) = 10*i + j; gather along 1 with index (3, 2), along 0 with index (2, 4) */
  int32_t xv[12];
  for (int i = 0; i < 12; i++) xv[i] = 10 * (i / 4) + i % 4;
  tg_tensor *x = tg_from_data(TG_INT32, 2, (int64_t[]){3, 4}, xv, sizeof xv);
  int32_t i1[6] = {3, 0, 1, 1, 2, 3}, i0[8] = {2, 0, 1, 2, 0, 0, 2, 1}, g[8];
  CHECK(host_i32(tg_gather(x, 1, tg_from_data(TG_INT32, 2, (int64_t[]){3, 2}, i1, sizeof i1)), g, 6), "gather: %s", tg_error());
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 2; c++) CHECK(g[r * 2 + c] == xv[r * 4 + i1[r * 2 + c]], "gather axis 1 [%d][%d] = %d", r, c, g[r * 2 + c]);
  CHECK(host_i32(tg_gather(x, 0, tg_from_data(TG_INT32, 2, (int64_t[]){2, 4}, i0, sizeof i0)), g, 8), "gather: %s", tg_error());
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 4; c++) CHECK(g[r * 4 + c] == xv[i0[r * 4 + c] * 4 + c], "gather axis 0 [%d][%d] = %d", r, c, g[r * 4 + c]);

  /* index_select along axis 1 with a (2, 2) index, negative entries counting from the end: (3, 2, 2) */
  int32_t is[4] = {3, -1, 0, -4}, got[12];
  tg_tensor *sel = tg_index_select(x, 1, tg_from_data(TG_INT32, 2, (int64_t[]){2, 2}, is, sizeof is));
  CHECK_T(sel);
  CHECK(tg_ndim(sel) == 3 && tg_shape(sel, 0) == 3 && tg_shape(sel, 1) == 2 && tg_shape(sel, 2) == 2, "index_select shape");
  CHECK(host_i32(sel, got, 12), "index_select: %s", tg_error());
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 4; k++) CHECK(got[r * 4 + k] == xv[r * 4 + (is[k] + 4) % 4], "index_select [%d][%d] = %d", r, k, got[r * 4 + k]);

  /* embedding: weight (5, 3) float, index (2, 2) -> (2, 2, 3) */
  float w[15], e[12];
  for (int i = 0; i < 15; i++) w[i] = (float)i * 0.5f - 3;
  int64_t ix[4] = {4, 0, 2, 4};
  tg_tensor *emb = tg_embedding(tg_from_data(TG_FLOAT32, 2, (int64_t[]){5, 3}, w, sizeof w),
                                tg_from_data(TG_INT64, 2, (int64_t[]){2, 2}, ix, sizeof ix));
  CHECK_T(emb);
  CHECK(tg_ndim(emb) == 3 && tg_shape(emb, 2) == 3 && tg_to_host(emb, e, sizeof e) == TG_OK, "embedding: %s", tg_error());
  for (int i = 0; i < 4; i++)
    for (int d = 0; d < 3; d++) CHECK(e[i * 3 + d] == w[ix[i] * 3 + d], "embedding [%d][%d] = %g", i, d, e[i * 3 + d]);
}

NN_TEST(test_nn_triu_tril) {
  (void)f;
  float xv[2 * 3 * 4], got[24];
  for (int i = 0; i < 24; i++) xv[i] = (float)i + 1;
  tg_tensor *x = tg_from_data(TG_FLOAT32, 3, (int64_t[]){2, 3, 4}, xv, sizeof xv);
  for (int64_t dg = -3; dg <= 4; dg++) {
    CHECK(tg_to_host(tg_triu(x, dg), got, sizeof got) == TG_OK, "triu: %s", tg_error());
    for (int i = 0; i < 24; i++) {
      int r = (i / 4) % 3, c = i % 4;
      CHECK(got[i] == (c - r >= dg ? xv[i] : 0), "triu(%lld)[%d] = %g", (long long)dg, i, got[i]);
    }
    CHECK(tg_to_host(tg_tril(x, dg), got, sizeof got) == TG_OK, "tril: %s", tg_error());
    for (int i = 0; i < 24; i++) {
      int r = (i / 4) % 3, c = i % 4;
      CHECK(got[i] == (c - r <= dg ? xv[i] : 0), "tril(%lld)[%d] = %g", (long long)dg, i, got[i]);
    }
  }
}

/* ---- errors -------------------------------------------------------------------------------------------- */

static void expect_error(tg_tensor *t, const char *op, const char *file, int line) {
  if (t) test_fail(file, line, "%s: expected an error, got a tensor", op);
  else if (!strstr(tg_error(), op)) test_fail(file, line, "%s: message does not name the op: %s", op, tg_error());
}
#define EXPECT_ERR(t, op) expect_error(t, op, __FILE__, __LINE__)

NN_TEST(test_nn_ops_errors_name_op_and_propagate_null) {
  (void)f;
  tg_tensor *x = tg_zeros(TG_FLOAT32, 4, (int64_t[]){1, 4, 5, 5});
  tg_tensor *w = tg_zeros(TG_FLOAT32, 4, (int64_t[]){2, 3, 3, 3});
  tg_tensor *lab = tg_zeros(TG_INT32, 1, (int64_t[]){3});
  EXPECT_ERR(tg_conv2d(x, w, NULL, (tg_conv_opts){0}), "tg_conv2d");  /* 4 channels, weight wants 3 */
  CHECK(strstr(tg_error(), "(1, 4, 5, 5)") && strstr(tg_error(), "(2, 3, 3, 3)"), "shapes not named: %s", tg_error());
  EXPECT_ERR(tg_conv2d(x, tg_zeros(TG_FLOAT32, 4, (int64_t[]){2, 4, 7, 7}), NULL, (tg_conv_opts){0}), "tg_conv2d");
  EXPECT_ERR(tg_conv2d(x, tg_zeros(TG_FLOAT32, 4, (int64_t[]){2, 2, 3, 3}), NULL, (tg_conv_opts){.groups = 3}), "tg_conv2d");
  EXPECT_ERR(tg_conv2d(x, tg_zeros(TG_FLOAT32, 4, (int64_t[]){2, 4, 3, 3}), tg_zeros(TG_FLOAT32, 1, (int64_t[]){3}), (tg_conv_opts){0}),
             "tg_conv2d");
  EXPECT_ERR(tg_conv_transpose2d(x, tg_zeros(TG_FLOAT32, 4, (int64_t[]){4, 2, 3, 3}), NULL, (tg_conv_opts){.stride = TG_INTS(2), .output_padding = TG_INTS(2)}),
             "tg_conv_transpose2d");
  EXPECT_ERR(tg_max_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(0)}), "tg_max_pool2d");
  EXPECT_ERR(tg_avg_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(7)}), "tg_avg_pool2d");
  EXPECT_ERR(tg_layernorm(x, 1, (int[]){4}, 1e-5), "tg_layernorm");
  EXPECT_ERR(tg_layernorm(x, 2, (int[]){-1, 3}, 1e-5), "tg_layernorm");  /* repeated */
  EXPECT_ERR(tg_group_norm(x, 3, NULL, NULL, 1e-5), "tg_group_norm");
  EXPECT_ERR(tg_batchnorm(x, NULL, NULL, lab, lab), "tg_batchnorm");
  EXPECT_ERR(tg_one_hot(x, 3), "tg_one_hot");
  EXPECT_ERR(tg_gather(x, 1, lab), "tg_gather");
  EXPECT_ERR(tg_index_select(x, 4, lab), "tg_index_select");
  EXPECT_ERR(tg_embedding(x, lab), "tg_embedding");
  EXPECT_ERR(tg_sparse_categorical_crossentropy(tg_zeros(TG_FLOAT32, 2, (int64_t[]){4, 5}), lab, (tg_loss_opts){0}),
             "tg_sparse_categorical_crossentropy");
  EXPECT_ERR(tg_sparse_categorical_crossentropy(tg_zeros(TG_FLOAT32, 2, (int64_t[]){3, 5}), lab, (tg_loss_opts){.label_smoothing = 2}),
             "tg_sparse_categorical_crossentropy");
  EXPECT_ERR(tg_nll_loss(tg_zeros(TG_FLOAT32, 2, (int64_t[]){3, 5}), tg_zeros(TG_FLOAT32, 1, (int64_t[]){3}), (tg_loss_opts){0}),
             "tg_nll_loss");
  EXPECT_ERR(tg_cross_entropy(tg_zeros(TG_FLOAT32, 2, (int64_t[]){3, 5}), tg_zeros(TG_FLOAT32, 2, (int64_t[]){3, 4}), tg_loss_defaults()), "tg_cross_entropy");
  EXPECT_ERR(tg_binary_crossentropy(tg_zeros(TG_FLOAT32, 1, (int64_t[]){3}), tg_zeros(TG_FLOAT32, 1, (int64_t[]){4}), tg_loss_defaults()),
             "tg_binary_crossentropy");
  EXPECT_ERR(tg_scaled_dot_product_attention(x, w, w, NULL, 0, false, false), "tg_scaled_dot_product_attention");
  EXPECT_ERR(tg_cumsum(x, 4), "tg_cumsum");
  EXPECT_ERR(tg_triu(lab, 0), "tg_triu");
  EXPECT_ERR(tg_interpolate(x, 2, (int64_t[]){0, 3}, TG_INTERP_LINEAR, false), "tg_interpolate");
  /* NULL in, NULL out, and the last error stays */
  tg_error_clear();
  tg_tensor *none = NULL;
  CHECK(!tg_conv2d(none, w, NULL, (tg_conv_opts){0}) && !tg_conv_transpose2d(x, none, NULL, (tg_conv_opts){0}) &&
            !tg_max_pool2d(none, (tg_pool_opts){.kernel = TG_INTS(2)}) && !tg_avg_pool2d(none, (tg_pool_opts){.kernel = TG_INTS(2)}) &&
            !tg_layernorm(none, 0, NULL, 1e-5) && !tg_rmsnorm(none, 0, NULL, 1e-5) && !tg_batchnorm(x, NULL, NULL, none, none) &&
            !tg_group_norm(none, 1, NULL, NULL, 1e-5) && !tg_one_hot(none, 3) && !tg_gather(x, 0, none) &&
            !tg_index_select(none, 0, lab) && !tg_embedding(none, lab) && !tg_scaled_dot_product_attention(none, x, x, NULL, 0, false, false) &&
            !tg_sparse_categorical_crossentropy(none, lab, (tg_loss_opts){0}) && !tg_cross_entropy(x, none, tg_loss_defaults()) &&
            !tg_nll_loss(none, lab, (tg_loss_opts){0}) && !tg_binary_crossentropy(none, x, tg_loss_defaults()) &&
            !tg_binary_crossentropy_logits(x, none, tg_loss_defaults()) && !tg_cumsum(none, 0) && !tg_triu(none, 0) && !tg_tril(none, 0) &&
            !tg_interpolate(none, 1, (int64_t[]){2}, TG_INTERP_NEAREST, false),
        "an op given NULL returned a tensor");
  CHECK(tg_error()[0] == 0, "an op given NULL set an error: %s", tg_error());
}

/* ---- views and handles ------------------------------------------------------------------------------ */

/* the ops see through views: a transposed, a lazily computed and a batch-free input give the same values */
NN_TEST(test_nn_ops_on_views_and_lazy_inputs) {
  const fx_rec *xr = fx_get(f, "conv2d/0/x"), *p = fx_get(f, "conv2d/0/p");
  tg_tensor *x = fx_tensor(xr), *w = fx_tensor(fx_get(f, "conv2d/0/w")), *b = fx_tensor(fx_get(f, "conv2d/0/b"));
  tg_tensor *xt = tg_transpose(tg_contiguous(tg_transpose(x, 2, 3)), 2, 3);  /* same values, strided view */
  CHECK_FX("conv2d of a transposed view", tg_conv2d(xt, w, b, conv_opts(p)), fx_get(f, "conv2d/0/y"));
  CHECK_FX("conv2d of a lazy input", tg_conv2d(tg_add_scalar(tg_mul_scalar(x, 2), 0), tg_mul_scalar(w, 0.5), b, conv_opts(p)),
           fx_get(f, "conv2d/0/y"));
  /* pool case 1 (max, 3x3 stride 2 pad 1) on (N*C, H, W): leading axes are free */
  const fx_rec *pr = fx_get(f, "pool/1/x"), *py = fx_get(f, "pool/1/y");
  tg_tensor *x3 = tg_reshape(fx_tensor(pr), 3, (int64_t[]){pr->shape[0] * pr->shape[1], pr->shape[2], pr->shape[3]});
  tg_tensor *y3 = tg_max_pool2d(x3, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .padding = TG_INTS(1)});
  CHECK_T(y3);
  CHECK_FX("max_pool2d of (N*C, H, W)", tg_reshape(y3, 4, py->shape), py);
}

/* an op leaves exactly its result behind: freeing it frees every node it built */
NN_TEST(test_nn_ops_free_their_intermediates) {
  tg_tensor *x = fx_tensor(fx_get(f, "conv2d/0/x")), *w = fx_tensor(fx_get(f, "conv2d/0/w"));
  tg_tensor *lg = fx_tensor(fx_get(f, "sce/4/x")), *lab = fx_tensor(fx_get(f, "sce/4/t"));
  CHECK_T(x);
  CHECK_T(w);
  CHECK_T(lg);
  tg_tensor *bad_w = tg_zeros(TG_FLOAT32, 4, (int64_t[]){2, 7, 3, 3}), *wt = tg_transpose(w, 0, 1);
  CHECK_T(lab);
  CHECK_T(bad_w);
  tg_collect();
  uint64_t before = tg_get_stats().uops_live;
  for (int i = 0; i < 3; i++) {
    tg_tensor *ys[] = {
        tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)}), tg_conv_transpose2d(x, wt, NULL, (tg_conv_opts){.stride = TG_INTS(2)}),
        tg_avg_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .padding = TG_INTS(1), .ceil_mode = true, .count_include_pad = true}), tg_group_norm(x, 3, NULL, NULL, 1e-5),
        tg_sparse_categorical_crossentropy(lg, lab, (tg_loss_opts){.label_smoothing = 0.1}), tg_cumsum(x, 3),
        tg_interpolate(x, 2, (int64_t[]){9, 4}, TG_INTERP_LINEAR, false), tg_scaled_dot_product_attention(x, x, x, NULL, 0, true, false),
        tg_conv2d(x, bad_w, NULL, (tg_conv_opts){0}) /* an error */};
    for (size_t k = 0; k < sizeof ys / sizeof ys[0]; k++) {
      CHECK(k == sizeof ys / sizeof ys[0] - 1 ? !ys[k] : ys[k] != NULL, "op %zu: %s", k, tg_error());
      tg_free(ys[k]);
    }
  }
  tg_collect();
  uint64_t after = tg_get_stats().uops_live;
  CHECK(after <= before, "%llu IR nodes before, %llu after the ops' results were freed", (unsigned long long)before,
        (unsigned long long)after);
}

/* fusion guards: the kernels each composite op takes today (at most; fewer is better). Each input is a
 * realized buffer, so only the op's own kernels count. */
NN_TEST(test_nn_ops_kernel_counts) {
  tg_tensor *x = fx_tensor(fx_get(f, "conv2d/0/x")), *w = fx_tensor(fx_get(f, "conv2d/0/w")), *b = fx_tensor(fx_get(f, "conv2d/0/b"));
  tg_tensor *lg = fx_tensor(fx_get(f, "sce/0/x")), *lab = fx_tensor(fx_get(f, "sce/0/t"));
  tg_tensor *big = tg_contiguous(tg_ones(TG_FLOAT32, 2, (int64_t[]){2, 1500}));
  CHECK(tg_realize(big) == TG_OK, "%s", tg_error());
  struct { const char *name; tg_tensor *t; uint64_t most; } cases[] = {
      {"conv2d + bias + relu", tg_relu(tg_conv2d(x, w, b, (tg_conv_opts){.padding = TG_INTS(1)})), 1},
      {"conv_transpose2d stride 2", tg_conv_transpose2d(x, tg_transpose(w, 0, 1), NULL, (tg_conv_opts){.stride = TG_INTS(2)}), 1},
      {"max_pool2d 3x3 stride 2", tg_max_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .padding = TG_INTS(1)}), 1},
      {"avg_pool2d ceil, count_include_pad false", tg_avg_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .ceil_mode = true}), 1},
      {"layernorm", tg_layernorm(x, 2, (int[]){-1, -2}, 1e-5), 3},
      {"rmsnorm", tg_rmsnorm(x, 1, (int[]){-1}, 1e-5), 2},
      {"sparse_categorical_crossentropy", tg_sparse_categorical_crossentropy(lg, lab, (tg_loss_opts){.label_smoothing = 0.1}), 3},
      {"embedding", tg_embedding(tg_reshape(w, 2, (int64_t[]){4, 27}), lab), 1},
      {"cumsum of 7", tg_cumsum(x, 3), 1},
      {"cumsum of 1500 (two stages)", tg_cumsum(big, 1), 3},
      {"triu", tg_triu(x, 1), 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (!cases[i].t) { CHECK(0, "%s: %s", cases[i].name, tg_error()); continue; }
    CHECK(tg_realize(cases[i].t) == TG_OK, "%s: %s", cases[i].name, tg_error());
    CHECK(tg_kernel_count_last() <= cases[i].most, "%s ran %llu kernels, expected at most %llu", cases[i].name,
          (unsigned long long)tg_kernel_count_last(), (unsigned long long)cases[i].most);
  }
}

/* a residual block's shape: a 3x3 padded convolution over a computed input (relu(conv(x))), padded lazily in
 * its windows (conv.c pad_mode), and its sum with that input read unpadded; 32 channels of 48x48, so the
 * stored input is padded by a kernel of its own, against plain C */
TEST(test_conv2d_padded_over_a_computed_input) {
  enum { C = 32, H = 48 };
  tg_scope_begin();
  float *hx = rand_data(C * H * H), *hw1 = rand_data(C * C * 9), *hw2 = rand_data(C * C * 9);
  float *h1 = malloc(sizeof(float) * C * H * H), *want = malloc(sizeof(float) * C * H * H),
        *got = malloc(sizeof(float) * C * H * H);
  CHECK(hx && hw1 && hw2 && h1 && want && got, "out of memory");
  if (hx && hw1 && hw2 && h1 && want && got) {
    for (int o = 0; o < C; o++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++) {
          double v = ref_conv3x3_at(hx, hw1, C, H, o, i, j);
          h1[(o * H + i) * H + j] = v > 0 ? (float)v : 0;
        }
    for (int o = 0; o < C; o++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++)
          want[(o * H + i) * H + j] = (float)ref_conv3x3_at(h1, hw2, C, H, o, i, j) + h1[(o * H + i) * H + j];
    tg_tensor *x = tensor_of(hx, 4, (int64_t[]){1, C, H, H});
    tg_tensor *w1 = tensor_of(hw1, 4, (int64_t[]){C, C, 3, 3}), *w2 = tensor_of(hw2, 4, (int64_t[]){C, C, 3, 3});
    tg_conv_opts o = {.padding = TG_INTS(1)};
    tg_tensor *a = tg_relu(tg_conv2d(x, w1, NULL, o));
    tg_tensor *y = tg_add(tg_conv2d(a, w2, NULL, o), a);
    CHECK(y && tg_to_host(y, got, sizeof(float) * C * H * H) == TG_OK, "%s", tg_error());
    if (y) check_close_f32("conv(relu(conv(x))) + relu(conv(x))", got, want, C * H * H, 1e-3, 1e-3, __FILE__, __LINE__);
  }
  free(hx); free(hw1); free(hw2); free(h1); free(want); free(got);
  tg_scope_end();
}
