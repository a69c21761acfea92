/* test_train_digits.c — end to end: a small network trained on the 8x8 digits reaches 95% test accuracy. */
#include <stdlib.h>

#include "test.h"

static const char *digits_path(void) {
  static const char *cands[] = {"../shared/data/digits/digits.csv.gz", "../../shared/data/digits/digits.csv.gz",
                                "/work/shared/data/digits/digits.csv.gz", NULL};
  const char *env = getenv("TG_DIGITS");
  if (env) return env;
  for (int i = 0; cands[i]; i++) {
    FILE *f = fopen(cands[i], "rb");
    if (f) { fclose(f); return cands[i]; }
  }
  return NULL;
}

TEST(test_train_digits_mlp_reaches_95_percent) {
  const char *path = digits_path();
  if (!path) {
    test_skip("digits.csv.gz not found (set TG_DIGITS)");
    return;
  }
  tg_dataset all;
  CHECK(tg_digits_load(path, &all) == TG_OK, "%s", tg_error());
  if (tg_error_status()) return;
  CHECK(all.n == 1797, "digits: %lld rows", (long long)all.n);
  /* a fixed split: 1497 to train, 300 to test */
  int64_t *perm = malloc((size_t)all.n * sizeof *perm);
  tg_shuffle(perm, all.n, 5);
  int64_t ntrain = 1497, ntest = all.n - ntrain;
  tg_manual_seed(2);
  tg_nn_linear l1, l2;
  CHECK(tg_nn_linear_init(&l1, 64, 64, true) == TG_OK && tg_nn_linear_init(&l2, 64, 10, true) == TG_OK, "%s", tg_error());
  tg_params *p = tg_params_new();
  tg_nn_linear_params(&l1, "l1", p);
  tg_nn_linear_params(&l2, "l2", p);
  tg_optim *o = tg_adam_new(p, adam_lr(0.01));
  CHECK_T(o);
  int64_t batch = 64, pos = 0;
  int64_t *order = malloc((size_t)ntrain * sizeof *order);
  for (int step = 0; step < 400; step++) {
    if (pos + batch > ntrain || step == 0) {
      tg_shuffle(order, ntrain, 100 + (uint64_t)step);
      for (int64_t i = 0; i < ntrain; i++) order[i] = perm[order[i]];
      pos = 0;
    }
    tg_scope_begin();
    tg_tensor *x, *y;
    CHECK(tg_dataset_batch(&all, order, pos, batch, &x, &y) == TG_OK, "%s", tg_error());
    pos += batch;
    tg_tensor *h = tg_relu(tg_nn_linear_forward(&l1, tg_div_scalar(x, 16.0)));
    tg_tensor *loss = tg_sparse_categorical_crossentropy(tg_nn_linear_forward(&l2, h), y, (tg_loss_opts){0});
    bool ok = tg_backward(loss) == TG_OK && tg_optim_step(o, 1, &loss) == TG_OK;
    tg_scope_end();
    if (!ok) { CHECK(false, "step %d: %s", step, tg_error()); break; }
  }
  tg_scope_begin();
  tg_tensor *x, *y;
  CHECK(tg_dataset_batch(&all, perm, ntrain, ntest, &x, &y) == TG_OK, "%s", tg_error());
  tg_tensor *pred = tg_argmax(tg_nn_linear_forward(&l2, tg_relu(tg_nn_linear_forward(&l1, tg_div_scalar(x, 16.0)))), 1, false);
  int32_t *pv = malloc((size_t)ntest * 4), *yv = malloc((size_t)ntest * 4);
  CHECK(tg_to_host(pred, pv, (size_t)ntest * 4) == TG_OK && tg_to_host(y, yv, (size_t)ntest * 4) == TG_OK, "%s", tg_error());
  int correct = 0;
  for (int64_t i = 0; i < ntest; i++) correct += pv[i] == yv[i];
  double acc = (double)correct / (double)ntest;
  fprintf(stderr, "  digits test accuracy: %.2f%%\n", acc * 100);
  CHECK(acc >= 0.95, "test accuracy %.2f%% < 95%%", acc * 100);
  free(pv); free(yv);
  tg_scope_end();
  free(order);
  free(perm);
  tg_optim_free(o);
  tg_params_free(p);
  tg_nn_linear_free(&l1);
  tg_nn_linear_free(&l2);
  tg_dataset_free(&all);
}
