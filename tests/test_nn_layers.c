/* test_nn_layers.c — the tg_nn_* layer objects (BatchNorm with its running statistics in training and eval,
 * LayerNorm, RMSNorm, GroupNorm, Embedding, ConvTranspose2d) against PyTorch's nn modules: forward, and the
 * backward of loss = sum(y * gy) to the input and every trainable parameter; their inits as tinygrad's nn.
 *
 * tests/fixtures/nn_layers.bin is written by tests/fixtures/make_nn_layers_fixtures.py (PyTorch, CPU,
 * float32). Tolerance atol 1e-5 / rtol 1e-3 as test_nn_ops.c; gradients atol 1e-4. */
#include <stdlib.h>

#include "fixture.h"
#include "test.h"

#define CHECK_FX(what, got, want) check_fx(what, got, want, 1e-5, 1e-3, __FILE__, __LINE__)
#define CHECK_FXG(what, got, want) check_fx(what, got, want, 1e-4, 1e-3, __FILE__, __LINE__)

#define LAYER_TEST(name) FIXTURE_TEST(name, "nn_layers.bin")

/* a layer's parameter takes the golden value (stored, as an optimizer step would) */
static bool set_param(tg_tensor *p, const fx_rec *r, const char *file, int line) {
  tg_tensor *v = fx_tensor(r);
  if (!v || tg_assign(p, v) != TG_OK || tg_realize(p) != TG_OK) {
    test_fail(file, line, "setting a parameter: %s", r ? tg_error() : "no golden record");
    return false;
  }
  return true;
}
#define SET(p, r) set_param(p, r, __FILE__, __LINE__)

/* gradients of sum(y * gy) to the n targets into out (all NULL on failure, reported) */
static bool grads_of(tg_tensor *y, const fx_rec *gy, int n, tg_tensor *const *targets, tg_tensor **out,
                     const char *file, int line) {
  tg_tensor *loss = y && gy ? tg_sum(tg_mul(y, fx_tensor(gy)), 0, NULL, false) : NULL;
  if (!loss || tg_gradient(loss, n, targets, out) != TG_OK) {
    test_fail(file, line, "gradient: %s", tg_error());
    return false;
  }
  return true;
}
#define GRADS(y, gy, n, targets, out) grads_of(y, gy, n, targets, out, __FILE__, __LINE__)

/* ---- BatchNorm --------------------------------------------------------------------------------------- */

static int64_t batches_tracked(const tg_nn_batchnorm *l) {
  int64_t v = -1;
  if (tg_dtype_of(l->num_batches_tracked) != TG_INT64 || tg_ndim(l->num_batches_tracked) != 0 ||
      tg_to_host(l->num_batches_tracked, &v, sizeof v) != TG_OK)
    return -1;
  return v;
}

static void bn_case(const fx *f, int i) {
  char w[96];
  const fx_rec *x0r = fx_get(f, "bn/%d/x0", i);
  if (!x0r) { CHECK(false, "bn/%d: no golden record", i); return; }
  tg_nn_batchnorm l;
  CHECK(tg_nn_batchnorm_init(&l, x0r->shape[1]) == TG_OK, "bn init: %s", tg_error());
  if (!l.weight) return;
  /* PyTorch's (and tinygrad's) defaults */
  CHECK(fabs(l.momentum - 0.1) < 1e-12 && fabs(l.eps - 1e-5) < 1e-12 && batches_tracked(&l) == 0, "bn defaults");
  l.momentum = fx_param(fx_get(f, "bn/%d/p", i), 0);
  l.eps = fx_param(fx_get(f, "bn/%d/p", i), 1);
  if (!SET(l.weight, fx_get(f, "bn/%d/w", i)) || !SET(l.bias, fx_get(f, "bn/%d/b", i))) goto out;

  tg_set_training(true);
  for (int step = 0; step < 2; step++) {
    tg_tensor *x = fx_tensor(fx_get(f, "bn/%d/x%d", i, step)), *y = tg_nn_batchnorm_forward(&l, x), *g[3] = {0};
    if (step == 0 && !GRADS(y, fx_get(f, "bn/%d/t/gy", i), 3, ((tg_tensor *[]){x, l.weight, l.bias}), g)) break;
    /* the running statistics are assigned lazily: realized with the step's outputs */
    tg_tensor *outs[] = {y, l.running_mean, l.running_var, l.num_batches_tracked};
    CHECK(y && tg_realize_many(4, outs) == TG_OK, "bn step %d: %s", step, tg_error());
    snprintf(w, sizeof w, "bn %d train y%d", i, step);
    CHECK_FX(w, y, fx_get(f, "bn/%d/y%d", i, step));
    if (step == 0) {
      snprintf(w, sizeof w, "bn %d train dx", i);
      CHECK_FXG(w, g[0], fx_get(f, "bn/%d/t/dx", i));
      snprintf(w, sizeof w, "bn %d train dweight", i);
      CHECK_FXG(w, g[1], fx_get(f, "bn/%d/t/dweight", i));
      snprintf(w, sizeof w, "bn %d train dbias", i);
      CHECK_FXG(w, g[2], fx_get(f, "bn/%d/t/dbias", i));
    }
    snprintf(w, sizeof w, "bn %d running_mean after step %d", i, step);
    CHECK_FX(w, l.running_mean, fx_get(f, "bn/%d/rm%d", i, step));
    snprintf(w, sizeof w, "bn %d running_var (unbiased) after step %d", i, step);
    CHECK_FX(w, l.running_var, fx_get(f, "bn/%d/rv%d", i, step));
    CHECK(batches_tracked(&l) == step + 1, "bn %d num_batches_tracked %lld after step %d", i, (long long)batches_tracked(&l), step);
  }
  tg_set_training(false);

  /* eval: normalized by the running statistics, which stay as they are */
  tg_tensor *x = fx_tensor(fx_get(f, "bn/%d/xe", i)), *y = tg_nn_batchnorm_forward(&l, x), *g[3] = {0};
  if (GRADS(y, fx_get(f, "bn/%d/e/gy", i), 3, ((tg_tensor *[]){x, l.weight, l.bias}), g)) {
    snprintf(w, sizeof w, "bn %d eval y", i);
    CHECK_FX(w, y, fx_get(f, "bn/%d/ye", i));
    snprintf(w, sizeof w, "bn %d eval dx", i);
    CHECK_FXG(w, g[0], fx_get(f, "bn/%d/e/dx", i));
    snprintf(w, sizeof w, "bn %d eval dweight", i);
    CHECK_FXG(w, g[1], fx_get(f, "bn/%d/e/dweight", i));
    snprintf(w, sizeof w, "bn %d eval dbias", i);
    CHECK_FXG(w, g[2], fx_get(f, "bn/%d/e/dbias", i));
  }
  snprintf(w, sizeof w, "bn %d running_mean after eval", i);
  CHECK_FX(w, l.running_mean, fx_get(f, "bn/%d/rm1", i));
  snprintf(w, sizeof w, "bn %d running_var after eval", i);
  CHECK_FX(w, l.running_var, fx_get(f, "bn/%d/rv1", i));
  CHECK(batches_tracked(&l) == 2, "bn %d: eval changed num_batches_tracked to %lld", i, (long long)batches_tracked(&l));
out:
  tg_set_training(false);
  tg_nn_batchnorm_free(&l);
}

LAYER_TEST(test_nn_layers_batchnorm_running_stats_match_pytorch) {
  for (int i = 0; i < 3; i++) bn_case(f, i);
}

/* a BatchNorm2d state dict saved by PyTorch (num_batches_tracked a 0-d int64) loads strictly into the layer's
 * params, and the eval forward then matches PyTorch's */
LAYER_TEST(test_nn_layers_batchnorm_loads_a_pytorch_state_dict) {
  char path[512];
  const char *dir = getenv("TG_FIXTURES");
  if (dir) snprintf(path, sizeof path, "%s/nn_layers_bn_safetensors.bin", dir);
  else snprintf(path, sizeof path, "tests/fixtures/nn_layers_bn_safetensors.bin");
  tg_nn_batchnorm l;
  tg_params *p = tg_params_new();
  CHECK(p && tg_nn_batchnorm_init(&l, 3) == TG_OK && tg_nn_batchnorm_params(&l, NULL, p) == TG_OK, "init: %s", tg_error());
  if (!p || !l.weight) { tg_params_free(p); return; }
  CHECK(tg_safetensors_load(path, p, false) == TG_OK, "loading PyTorch's state dict: %s", tg_error());
  tg_set_training(false);
  CHECK_FX("batchnorm eval after loading", tg_nn_batchnorm_forward(&l, fx_tensor(fx_get(f, "bnstate/x"))), fx_get(f, "bnstate/y"));
  CHECK(batches_tracked(&l) == 3, "num_batches_tracked %lld, want 3 from the file", (long long)batches_tracked(&l));
  tg_params_free(p);
  tg_nn_batchnorm_free(&l);
}

/* ---- LayerNorm, RMSNorm, GroupNorm ------------------------------------------------------------------ */

/* every value of t equals v */
static bool all_equal(tg_tensor *t, float v) {
  float buf[64];
  int64_t n = tg_numel(t);
  if (n > 64 || tg_to_host(t, buf, (size_t)n * 4) != TG_OK) return false;
  for (int64_t i = 0; i < n; i++)
    if (buf[i] != v) return false;
  return true;
}

LAYER_TEST(test_nn_layers_layernorm_matches_pytorch) {
  char w[96];
  for (int i = 0; i < 2; i++) {
    const fx_rec *xr = fx_get(f, "ln/%d/x", i);
    if (!xr) { CHECK(false, "ln/%d: no golden record", i); return; }
    tg_nn_layernorm l;
    CHECK(tg_nn_layernorm_init(&l, xr->shape[xr->ndim - 1], fx_param(fx_get(f, "ln/%d/p", i), 0)) == TG_OK, "ln init: %s",
          tg_error());
    if (!l.weight) return;
    CHECK(all_equal(l.weight, 1) && all_equal(l.bias, 0), "layernorm init: weight ones, bias zeros");
    if (SET(l.weight, fx_get(f, "ln/%d/w", i)) && SET(l.bias, fx_get(f, "ln/%d/b", i))) {
      tg_tensor *x = fx_tensor(xr), *y = tg_nn_layernorm_forward(&l, x), *g[3] = {0};
      if (GRADS(y, fx_get(f, "ln/%d/gy", i), 3, ((tg_tensor *[]){x, l.weight, l.bias}), g)) {
        snprintf(w, sizeof w, "layernorm %d y", i);
        CHECK_FX(w, y, fx_get(f, "ln/%d/y", i));
        snprintf(w, sizeof w, "layernorm %d dx", i);
        CHECK_FXG(w, g[0], fx_get(f, "ln/%d/dx", i));
        snprintf(w, sizeof w, "layernorm %d dweight", i);
        CHECK_FXG(w, g[1], fx_get(f, "ln/%d/dweight", i));
        snprintf(w, sizeof w, "layernorm %d dbias", i);
        CHECK_FXG(w, g[2], fx_get(f, "ln/%d/dbias", i));
      }
    }
    tg_nn_layernorm_free(&l);
  }
}

LAYER_TEST(test_nn_layers_rmsnorm_matches_pytorch) {
  char w[96];
  for (int i = 0; i < 2; i++) {
    const fx_rec *xr = fx_get(f, "rms/%d/x", i);
    if (!xr) { CHECK(false, "rms/%d: no golden record", i); return; }
    tg_nn_rmsnorm l;
    CHECK(tg_nn_rmsnorm_init(&l, xr->shape[xr->ndim - 1], fx_param(fx_get(f, "rms/%d/p", i), 0)) == TG_OK, "rms init: %s",
          tg_error());
    if (!l.weight) return;
    CHECK(all_equal(l.weight, 1), "rmsnorm init: weight ones");
    if (SET(l.weight, fx_get(f, "rms/%d/w", i))) {
      tg_tensor *x = fx_tensor(xr), *y = tg_nn_rmsnorm_forward(&l, x), *g[2] = {0};
      if (GRADS(y, fx_get(f, "rms/%d/gy", i), 2, ((tg_tensor *[]){x, l.weight}), g)) {
        snprintf(w, sizeof w, "rmsnorm %d y", i);
        CHECK_FX(w, y, fx_get(f, "rms/%d/y", i));
        snprintf(w, sizeof w, "rmsnorm %d dx", i);
        CHECK_FXG(w, g[0], fx_get(f, "rms/%d/dx", i));
        snprintf(w, sizeof w, "rmsnorm %d dweight", i);
        CHECK_FXG(w, g[1], fx_get(f, "rms/%d/dweight", i));
      }
    }
    tg_nn_rmsnorm_free(&l);
  }
}

LAYER_TEST(test_nn_layers_groupnorm_matches_pytorch) {
  char w[96];
  for (int i = 0; i < 3; i++) {
    const fx_rec *xr = fx_get(f, "gn/%d/x", i), *p = fx_get(f, "gn/%d/p", i);
    if (!xr) { CHECK(false, "gn/%d: no golden record", i); return; }
    tg_nn_groupnorm l;
    CHECK(tg_nn_groupnorm_init(&l, (int64_t)fx_param(p, 0), xr->shape[1], fx_param(p, 1)) == TG_OK, "gn init: %s", tg_error());
    if (!l.weight) return;
    CHECK(all_equal(l.weight, 1) && all_equal(l.bias, 0), "groupnorm init: weight ones, bias zeros");
    if (SET(l.weight, fx_get(f, "gn/%d/w", i)) && SET(l.bias, fx_get(f, "gn/%d/b", i))) {
      tg_tensor *x = fx_tensor(xr), *y = tg_nn_groupnorm_forward(&l, x), *g[3] = {0};
      if (GRADS(y, fx_get(f, "gn/%d/gy", i), 3, ((tg_tensor *[]){x, l.weight, l.bias}), g)) {
        snprintf(w, sizeof w, "groupnorm %d y", i);
        CHECK_FX(w, y, fx_get(f, "gn/%d/y", i));
        snprintf(w, sizeof w, "groupnorm %d dx", i);
        CHECK_FXG(w, g[0], fx_get(f, "gn/%d/dx", i));
        snprintf(w, sizeof w, "groupnorm %d dweight", i);
        CHECK_FXG(w, g[1], fx_get(f, "gn/%d/dweight", i));
        snprintf(w, sizeof w, "groupnorm %d dbias", i);
        CHECK_FXG(w, g[2], fx_get(f, "gn/%d/dbias", i));
      }
    }
    tg_nn_groupnorm_free(&l);
  }
}

/* ---- Embedding ---------------------------------------------------------------------------------------- */

/* |v| <= bound for every value, and some above bound / 2 (the range is used) */
static bool within(tg_tensor *t, double bound) {
  int64_t n = tg_numel(t);
  float *v = malloc((size_t)n * 4);
  bool ok = v && tg_to_host(t, v, (size_t)n * 4) == TG_OK;
  double mx = 0;
  for (int64_t i = 0; ok && i < n; i++) {
    ok = fabsf(v[i]) <= bound * (1 + 1e-6);
    if (fabsf(v[i]) > mx) mx = fabsf(v[i]);
  }
  free(v);
  return ok && mx > bound / 2;
}

LAYER_TEST(test_nn_layers_embedding_matches_pytorch) {
  tg_nn_embedding l;
  const fx_rec *wr = fx_get(f, "emb/0/w");
  if (!wr) { CHECK(false, "emb: no golden record"); return; }
  CHECK(tg_nn_embedding_init(&l, wr->shape[0], wr->shape[1]) == TG_OK, "embedding init: %s", tg_error());
  if (!l.weight) return;
  /* tinygrad's glorot_uniform: U(-b, b), b = sqrt(6 / (vocab + dim)) */
  CHECK(tg_ndim(l.weight) == 2 && tg_shape(l.weight, 0) == wr->shape[0] && tg_shape(l.weight, 1) == wr->shape[1] &&
            within(l.weight, sqrt(6.0 / (double)(wr->shape[0] + wr->shape[1]))),
        "embedding init: glorot_uniform of (%lld, %lld)", (long long)wr->shape[0], (long long)wr->shape[1]);
  tg_params *p = tg_params_new();
  CHECK(p && tg_nn_embedding_params(&l, "tok", p) == TG_OK && tg_params_count(p) == 1 &&
            !strcmp(tg_params_name(p, 0), "tok.weight"),
        "embedding params: %s", tg_error());
  tg_params_free(p);
  if (SET(l.weight, wr)) {
    tg_tensor *idx = fx_tensor(fx_get(f, "emb/0/idx")), *y = tg_nn_embedding_forward(&l, idx), *g = NULL;
    if (GRADS(y, fx_get(f, "emb/0/gy"), 1, &l.weight, &g)) {
      CHECK_FX("embedding y", y, fx_get(f, "emb/0/y"));
      CHECK_FXG("embedding dweight (repeated indices summed)", g, fx_get(f, "emb/0/dweight"));
    }
  }
  tg_nn_embedding_free(&l);
}

/* ---- ConvTranspose2d ------------------------------------------------------------------------------- */

LAYER_TEST(test_nn_layers_conv_transpose2d_matches_pytorch) {
  char w[96];
  for (int i = 0; i < 3; i++) {
    const fx_rec *p = fx_get(f, "convt/%d/p", i);
    if (!p) { CHECK(false, "convt/%d: no golden record", i); return; }
    int64_t cin = (int64_t)fx_param(p, 0), cout = (int64_t)fx_param(p, 1), kh = (int64_t)fx_param(p, 2),
            kw = (int64_t)fx_param(p, 3), groups = (int64_t)fx_param(p, 12);
    bool bias = fx_param(p, 13) != 0;
    tg_conv_opts o = tg_conv_defaults();
    o.stride = TG_INTS((int64_t)fx_param(p, 4), (int64_t)fx_param(p, 5));
    o.padding = TG_INTS((int64_t)fx_param(p, 6), (int64_t)fx_param(p, 7));
    o.output_padding = TG_INTS((int64_t)fx_param(p, 8), (int64_t)fx_param(p, 9));
    o.dilation = TG_INTS((int64_t)fx_param(p, 10), (int64_t)fx_param(p, 11));
    o.groups = groups;
    tg_nn_conv_transpose2d l;
    CHECK(tg_nn_conv_transpose2d_init(&l, cin, cout, TG_INTS(kh, kw), bias, o) == TG_OK, "convt init: %s", tg_error());
    if (!l.weight) return;
    /* weight (cin, cout / groups, kh, kw), U(-b, b) with b = 1 / sqrt(cout / groups * kh * kw), as PyTorch */
    double bound = 1 / sqrt((double)(cout / groups * kh * kw));
    CHECK(tg_ndim(l.weight) == 4 && tg_shape(l.weight, 0) == cin && tg_shape(l.weight, 1) == cout / groups &&
              tg_shape(l.weight, 2) == kh && tg_shape(l.weight, 3) == kw && within(l.weight, bound),
          "convt %d init: weight shape or range", i);
    CHECK(bias ? l.bias && tg_numel(l.bias) == cout && within(l.bias, bound) : !l.bias, "convt %d init: bias", i);
    tg_params *pl = tg_params_new();
    CHECK(pl && tg_nn_conv_transpose2d_params(&l, "up", pl) == TG_OK && tg_params_count(pl) == (bias ? 2 : 1) &&
              !strcmp(tg_params_name(pl, 0), "up.weight") && (!bias || !strcmp(tg_params_name(pl, 1), "up.bias")),
          "convt params: %s", tg_error());
    tg_params_free(pl);
    if (SET(l.weight, fx_get(f, "convt/%d/w", i)) && (!bias || SET(l.bias, fx_get(f, "convt/%d/b", i)))) {
      tg_tensor *x = fx_tensor(fx_get(f, "convt/%d/x", i)), *y = tg_nn_conv_transpose2d_forward(&l, x), *g[3] = {0};
      if (GRADS(y, fx_get(f, "convt/%d/gy", i), bias ? 3 : 2, ((tg_tensor *[]){x, l.weight, l.bias}), g)) {
        snprintf(w, sizeof w, "conv_transpose2d %d y", i);
        CHECK_FX(w, y, fx_get(f, "convt/%d/y", i));
        snprintf(w, sizeof w, "conv_transpose2d %d dx", i);
        CHECK_FXG(w, g[0], fx_get(f, "convt/%d/dx", i));
        snprintf(w, sizeof w, "conv_transpose2d %d dweight", i);
        CHECK_FXG(w, g[1], fx_get(f, "convt/%d/dweight", i));
        if (bias) {
          snprintf(w, sizeof w, "conv_transpose2d %d dbias", i);
          CHECK_FXG(w, g[2], fx_get(f, "convt/%d/dbias", i));
        }
      }
    }
    tg_nn_conv_transpose2d_free(&l);
  }
}

/* ---- errors: refused as PyTorch refuses them, the message naming the layer and the values -------------- */

static void expect_err(bool failed, const char *needle, const char *file, int line) {
  if (!failed) test_fail(file, line, "expected an error naming \"%s\"", needle);
  else if (!strstr(tg_error(), needle)) test_fail(file, line, "the message does not name \"%s\": %s", needle, tg_error());
}
#define EXPECT_ERR(failed, needle) expect_err(failed, needle, __FILE__, __LINE__)

TEST(test_nn_layers_errors_name_the_layer) {
  tg_scope_begin();
  tg_nn_groupnorm gn;
  EXPECT_ERR(tg_nn_groupnorm_init(&gn, 3, 4, 1e-5) == TG_ERR_ARG && !gn.weight, "3 groups do not divide 4 channels");
  tg_nn_layernorm ln;
  tg_nn_rmsnorm rn;
  if (tg_nn_layernorm_init(&ln, 5, 1e-5) == TG_OK && tg_nn_rmsnorm_init(&rn, 5, 1e-6) == TG_OK) {
    tg_tensor *x = tg_ones(TG_FLOAT32, 2, (int64_t[]){2, 4});
    EXPECT_ERR(!tg_nn_layernorm_forward(&ln, x), "tg_nn_layernorm_forward: input of shape (2, 4), expected a last axis of 5");
    EXPECT_ERR(!tg_nn_rmsnorm_forward(&rn, x), "tg_nn_rmsnorm_forward: input of shape (2, 4)");
  } else {
    CHECK(false, "init: %s", tg_error());
  }
  tg_nn_layernorm_free(&ln);
  tg_nn_rmsnorm_free(&rn);
  /* training on one value per channel: PyTorch refuses it (the unbiased variance divides by n - 1 = 0) */
  tg_nn_batchnorm bn;
  if (tg_nn_batchnorm_init(&bn, 3) == TG_OK) {
    tg_set_training(true);
    EXPECT_ERR(!tg_nn_batchnorm_forward(&bn, tg_ones(TG_FLOAT32, 4, (int64_t[]){1, 3, 1, 1})), "more than 1 value per channel");
    tg_set_training(false);
    /* eval takes it */
    tg_tensor *y = tg_nn_batchnorm_forward(&bn, tg_ones(TG_FLOAT32, 4, (int64_t[]){1, 3, 1, 1}));
    float v[3];
    CHECK(y && tg_to_host(y, v, sizeof v) == TG_OK && fabsf(v[0] - 1 / sqrtf(1 + 1e-5f)) < 1e-6f, "eval on one value: %s",
          tg_error());
  }
  tg_nn_batchnorm_free(&bn);
  /* an embedding index outside [0, vocab) gives a row of zeros, as tinygrad's (PyTorch refuses it) */
  tg_nn_embedding em;
  if (tg_nn_embedding_init(&em, 4, 3) == TG_OK) {
    int32_t idx[3] = {0, 4, -1};
    float v[9], w0[3];
    tg_tensor *y = tg_nn_embedding_forward(&em, tg_from_data(TG_INT32, 1, (int64_t[]){3}, idx, sizeof idx));
    bool ok = y && tg_to_host(y, v, sizeof v) == TG_OK && tg_to_host(tg_shrink(em.weight, 2, (int64_t[]){0, 1, 0, 3}), w0, sizeof w0) == TG_OK;
    CHECK(ok && !memcmp(v, w0, sizeof w0), "embedding row 0: %s", tg_error());
    for (int i = 3; ok && i < 9; i++) CHECK(v[i] == 0, "embedding out of range: value %d is %g, want 0", i, v[i]);
    EXPECT_ERR(!tg_nn_embedding_forward(&em, tg_ones(TG_FLOAT32, 1, (int64_t[]){3})), "index must be an integer tensor");
  }
  tg_nn_embedding_free(&em);
  tg_scope_end();
}

/* the norm layers' params carry PyTorch's state-dict names */
TEST(test_nn_layers_norm_params_names) {
  tg_nn_layernorm ln;
  tg_nn_rmsnorm rn;
  tg_nn_groupnorm gn;
  tg_params *p = tg_params_new();
  bool ok = p && tg_nn_layernorm_init(&ln, 4, 1e-5) == TG_OK && tg_nn_rmsnorm_init(&rn, 4, 1e-6) == TG_OK &&
            tg_nn_groupnorm_init(&gn, 2, 4, 1e-5) == TG_OK && tg_nn_layernorm_params(&ln, "ln", p) == TG_OK &&
            tg_nn_rmsnorm_params(&rn, "norm", p) == TG_OK && tg_nn_groupnorm_params(&gn, "gn", p) == TG_OK;
  CHECK(ok, "init or params: %s", tg_error());
  const char *want[] = {"ln.weight", "ln.bias", "norm.weight", "gn.weight", "gn.bias"};
  CHECK(!ok || tg_params_count(p) == 5, "%d params, want 5", tg_params_count(p));
  for (int i = 0; ok && i < 5 && i < tg_params_count(p); i++)
    CHECK(!strcmp(tg_params_name(p, i), want[i]), "param %d is %s, want %s", i, tg_params_name(p, i), want[i]);
  tg_params_free(p);
  tg_nn_layernorm_free(&ln);
  tg_nn_rmsnorm_free(&rn);
  tg_nn_groupnorm_free(&gn);
  CHECK(!ln.weight && !rn.weight && !gn.weight, "_free zeroes the struct");
}
