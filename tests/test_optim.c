/* test_optim.c — optimizers against PyTorch (ten steps, parameters within 1e-5), schedules, layers, and a
 * 1,000-step training loop with flat memory. */
#include <stdlib.h>
#include <unistd.h>

#include "fixtures/optim_golden.h"
#include "test.h"

typedef tg_optim *(*make_fn)(const tg_params *p);

static tg_optim *mk_sgd(const tg_params *p) {
  return tg_sgd_new(p, (tg_sgd_opts){.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
}
static tg_optim *mk_sgd_plain(const tg_params *p) { return tg_sgd_new(p, (tg_sgd_opts){.lr = 0.1}); }
static tg_optim *mk_adam(const tg_params *p) {
  tg_adam_opts o = tg_adam_defaults();
  o.lr = o.weight_decay = 0.01;
  return tg_adam_new(p, o);
}
static tg_optim *mk_adamw(const tg_params *p) {
  tg_adam_opts o = tg_adamw_defaults();
  o.lr = 0.01;
  return tg_adamw_new(p, o);
}

static void run_against_torch(const char *name, make_fn make, const float *want_w, const float *want_b) {
  tg_scope_begin();
  tg_tensor *w = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 2, (int64_t[]){4, 3}, opt_w0, sizeof opt_w0), true);
  tg_tensor *b = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){3}, opt_b0, sizeof opt_b0), true);
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){5, 4}, opt_x, sizeof opt_x);
  tg_tensor *y = tg_from_data(TG_FLOAT32, 2, (int64_t[]){5, 3}, opt_y, sizeof opt_y);
  tg_params *p = tg_params_new();
  CHECK(tg_params_add(p, "w", w) == TG_OK && tg_params_add(p, "b", b) == TG_OK, "%s", tg_error());
  tg_optim *o = make(p);
  CHECK_T(o);
  for (int step = 0; step < 10; step++) {
    tg_scope_begin();
    tg_tensor *d = tg_sub(tg_add(tg_matmul(x, w), b), y);
    tg_tensor *loss = tg_mean(tg_mul(d, d), 0, NULL, false);
    CHECK(tg_backward(loss) == TG_OK, "%s: backward: %s", name, tg_error());
    CHECK(tg_optim_step(o, 1, &loss) == TG_OK, "%s: step: %s", name, tg_error());
    tg_scope_end();
  }
  float gw[12], gb[3];
  CHECK(tg_to_host(w, gw, sizeof gw) == TG_OK && tg_to_host(b, gb, sizeof gb) == TG_OK, "%s", tg_error());
  check_close_f32(name, gw, want_w, 12, 1e-5, 0, __FILE__, __LINE__);
  check_close_f32(name, gb, want_b, 3, 1e-5, 0, __FILE__, __LINE__);
  tg_optim_free(o);
  tg_params_free(p);
  tg_scope_end();
}

TEST(test_optim_sgd_nesterov_weight_decay_matches_torch) { run_against_torch("sgd", mk_sgd, opt_sgd_w, opt_sgd_b); }
TEST(test_optim_sgd_plain_matches_torch) { run_against_torch("sgd_plain", mk_sgd_plain, opt_sgd_plain_w, opt_sgd_plain_b); }
TEST(test_optim_adam_matches_torch) { run_against_torch("adam", mk_adam, opt_adam_w, opt_adam_b); }
TEST(test_optim_adamw_matches_torch) { run_against_torch("adamw", mk_adamw, opt_adamw_w, opt_adamw_b); }

TEST(test_optim_steps_reuse_compiled_kernels) {
  tg_scope_begin();
  tg_tensor *w = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 2, (int64_t[]){4, 3}, opt_w0, sizeof opt_w0), true);
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){5, 4}, opt_x, sizeof opt_x);
  tg_params *p = tg_params_new();
  tg_params_add(p, "w", w);
  tg_optim *o = tg_adam_new(p, adam_lr(0.01));
  CHECK_T(o);
  uint64_t compiled = 0;
  for (int step = 0; step < 6; step++) {
    if (step == 2) compiled = tg_get_stats().kernels_compiled + tg_get_stats().disk_cache_hits;
    tg_optim_set_lr(o, tg_lr_cosine(0.01, step, 6, 0));
    tg_scope_begin();
    tg_tensor *loss = tg_sum(tg_square(tg_matmul(x, w)), 0, NULL, false);
    CHECK(tg_backward(loss) == TG_OK && tg_optim_step(o, 1, &loss) == TG_OK, "%s", tg_error());
    tg_scope_end();
  }
  uint64_t after = tg_get_stats().kernels_compiled + tg_get_stats().disk_cache_hits;
  CHECK(after == compiled, "steps 3..6 built %llu new kernels (a changing constant in a kernel?)",
        (unsigned long long)(after - compiled));
  tg_optim_free(o);
  tg_params_free(p);
  tg_scope_end();
}

TEST(test_optim_lr_schedules) {
  CHECK(fabs(tg_lr_step(0.1, 25, 10, 0.5) - 0.025) < 1e-12, "step schedule");
  CHECK(fabs(tg_lr_cosine(0.1, 0, 100, 0.0) - 0.1) < 1e-12, "cosine start");
  CHECK(fabs(tg_lr_cosine(0.1, 50, 100, 0.0) - 0.05) < 1e-12, "cosine middle");
  CHECK(fabs(tg_lr_cosine(0.1, 100, 100, 0.001) - 0.001) < 1e-12, "cosine end");
  /* PyTorch OneCycleLR(max_lr=1, total_steps=100, pct_start=0.3, div 25, final_div 1e4) */
  CHECK(fabs(tg_lr_onecycle(1, 0, 100, 0.3, 25, 1e4) - 0.04) < 1e-9, "onecycle start %g", tg_lr_onecycle(1, 0, 100, 0.3, 25, 1e4));
  CHECK(fabs(tg_lr_onecycle(1, 29, 100, 0.3, 25, 1e4) - 1.0) < 1e-9, "onecycle peak %g", tg_lr_onecycle(1, 29, 100, 0.3, 25, 1e4));
  CHECK(fabs(tg_lr_onecycle(1, 99, 100, 0.3, 25, 1e4) - 4e-6) < 1e-9, "onecycle end %g", tg_lr_onecycle(1, 99, 100, 0.3, 25, 1e4));
}

TEST(test_nn_layers_forward_shapes_and_params) {
  tg_scope_begin();
  tg_manual_seed(1);
  tg_nn_linear lin;
  tg_nn_conv2d conv;
  tg_nn_batchnorm bn;
  CHECK(tg_nn_linear_init(&lin, 6, 4, true) == TG_OK, "%s", tg_error());
  CHECK(tg_nn_conv2d_init(&conv, 3, 8, TG_INTS(3), true, (tg_conv_opts){.padding = TG_INTS(1)}) == TG_OK, "%s", tg_error());
  CHECK(tg_nn_batchnorm_init(&bn, 8) == TG_OK, "%s", tg_error());
  tg_params *p = tg_params_new();
  CHECK(tg_nn_linear_params(&lin, "fc", p) == TG_OK && tg_nn_conv2d_params(&conv, "conv", p) == TG_OK &&
            tg_nn_batchnorm_params(&bn, "bn", p) == TG_OK, "%s", tg_error());
  CHECK(tg_params_count(p) == 9, "9 named tensors expected, got %d", tg_params_count(p));
  CHECK(tg_params_find(p, "fc.weight") && tg_params_find(p, "bn.running_var"), "names missing");
  CHECK(tg_params_add(p, "fc.weight", lin.weight) != TG_OK, "a duplicate name was accepted");
  /* weights are bounded as the init says: |w| <= 1/sqrt(fan_in) */
  float wv[24];
  CHECK(tg_to_host(lin.weight, wv, sizeof wv) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 24; i++) CHECK(fabsf(wv[i]) <= 1 / sqrtf(6.0f) + 1e-6f, "weight %d = %g out of bounds", i, wv[i]);
  tg_tensor *x = tg_rand(TG_FLOAT32, 4, (int64_t[]){2, 3, 5, 5});
  tg_set_training(true);
  tg_tensor *y = tg_nn_batchnorm_forward(&bn, tg_nn_conv2d_forward(&conv, x));
  tg_set_training(false);
  CHECK_T(y);
  CHECK(tg_ndim(y) == 4 && tg_shape(y, 1) == 8 && tg_shape(y, 2) == 5, "conv+bn output shape");
  /* training-mode batchnorm output has per-channel mean 0 */
  tg_tensor *m = tg_mean(y, 3, (int[]){0, 2, 3}, false);
  float mv[8];
  CHECK(tg_to_host(m, mv, sizeof mv) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 8; i++) CHECK(fabsf(mv[i]) < 1e-4f, "channel %d mean %g", i, mv[i]);
  tg_tensor *stats[2] = {bn.running_mean, bn.running_var};
  CHECK(tg_realize_many(2, stats) == TG_OK, "%s", tg_error());
  tg_tensor *z = tg_nn_linear_forward(&lin, tg_rand(TG_FLOAT32, 2, (int64_t[]){7, 6}));
  CHECK(z && tg_shape(z, 0) == 7 && tg_shape(z, 1) == 4, "linear output shape");
  tg_params_free(p);
  tg_nn_linear_free(&lin);
  tg_nn_conv2d_free(&conv);
  tg_nn_batchnorm_free(&bn);
  tg_scope_end();
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
  fclose(f);
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST(test_optim_training_loop_of_1000_steps_is_flat) {
  int steps = getenv("TG_TEST_QUICK") ? 200 : 1000;
  tg_manual_seed(3);
  tg_nn_linear l1, l2;
  CHECK(tg_nn_linear_init(&l1, 8, 16, true) == TG_OK && tg_nn_linear_init(&l2, 16, 2, true) == TG_OK, "%s", tg_error());
  tg_params *p = tg_params_new();
  tg_nn_linear_params(&l1, "l1", p);
  tg_nn_linear_params(&l2, "l2", p);
  tg_optim *o = tg_adam_new(p, adam_lr(0.01));
  CHECK_T(o);
  long base = 0;
  double first = 0, last = 0;
  for (int s = 0; s < steps; s++) {
    tg_scope_begin();
    tg_tensor *x = tg_randn(TG_FLOAT32, 2, (int64_t[]){32, 8});
    tg_tensor *labels = tg_cast(tg_gt(tg_sum(x, 1, (int[]){1}, false), tg_scalar(TG_FLOAT32, 0)), TG_INT32);
    tg_tensor *logits = tg_nn_linear_forward(&l2, tg_relu(tg_nn_linear_forward(&l1, x)));
    tg_tensor *loss = tg_sparse_categorical_crossentropy(logits, labels, (tg_loss_opts){0});
    if (tg_backward(loss) != TG_OK || tg_optim_step(o, 1, &loss) != TG_OK) {
      CHECK(false, "step %d: %s", s, tg_error());
      tg_scope_end();
      break;
    }
    if (s == 0) first = tg_item(loss);
    if (s == steps - 1) last = tg_item(loss);
    tg_scope_end();
    if (s == steps / 10) base = rss_kib();
  }
  CHECK(last < first * 0.5, "loss did not fall: %g -> %g", first, last);
#ifndef __SANITIZE_ADDRESS__
  long grew = rss_kib() - base;
  CHECK(grew < 8192, "resident memory grew by %ld KiB over the loop", grew);
#else
  (void)base;  /* AddressSanitizer's quarantine keeps freed memory: RSS says nothing there */
#endif
  tg_optim_free(o);
  tg_params_free(p);
  tg_nn_linear_free(&l1);
  tg_nn_linear_free(&l2);
}
