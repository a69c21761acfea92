/* dp_mnist.c — data-parallel training of the MNIST network (examples/mnist_net.h) under mpirun: three steps of
 * SGD on a global batch of 8 made-up images, each rank taking its slice, give bit-identical parameters on
 * every rank (rank 0's broadcast and compared), and rank 0 checks them against one process over the whole
 * global batch within 1e-6. The ranks start from different random weights: tg_dist_broadcast makes them one.
 * The batchnorms run in eval mode (running statistics), so a slice's gradient does not depend on the rest of
 * the batch and the mean of the ranks' gradients is the global batch's gradient. Exit status 0 on success. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnist_net.h"

enum { GLOBAL = 8, STEPS = 3 };

static unsigned char images[GLOBAL][28 * 28];
static int32_t labels[GLOBAL];

static void make_data(void) {
  uint64_t s = 12345;
  for (int i = 0; i < GLOBAL; i++) {
    for (int k = 0; k < 28 * 28; k++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      images[i][k] = (unsigned char)(s >> 62);  /* 0..3: activations stay moderate with eval-mode batchnorms */
    }
    labels[i] = i % 10;
  }
}

static tg_status batch(int64_t lo, int64_t hi, tg_tensor **x, tg_tensor **y) {
  *x = tg_from_data(TG_UINT8, 4, (int64_t[]){hi - lo, 1, 28, 28}, images[lo], (size_t)(hi - lo) * 28 * 28);
  *y = tg_from_data(TG_INT32, 1, (int64_t[]){hi - lo}, &labels[lo], (size_t)(hi - lo) * 4);
  return *x && *y ? TG_OK : tg_error_status();
}

/* every parameter, flattened into one float32 host array (caller frees); n: its length */
static float *flatten_params(const tg_params *p, int64_t *n) {
  *n = 0;
  for (int i = 0; i < tg_params_count(p); i++) *n += tg_numel(tg_params_tensor(p, i));
  float *v = malloc((size_t)*n * sizeof *v + 1);
  int64_t off = 0;
  for (int i = 0; i < tg_params_count(p) && v; i++) {
    tg_tensor *t = tg_cast(tg_params_tensor(p, i), TG_FLOAT32);
    if (tg_to_host(t, v + off, (size_t)tg_numel(t) * 4) != TG_OK) {
      free(v);
      v = NULL;
    }
    off += tg_numel(t);
    tg_free(t);
  }
  return v;
}

/* one process, the whole global batch, the same three steps */
static float *reference(int64_t *n) {
  tg_manual_seed(1);
  model m = {0};
  tg_params *p = tg_params_new();
  float *v = NULL;
  if (model_init(&m) != TG_OK || model_params(&m, p) != TG_OK) goto out;
  tg_sgd_opts o = tg_sgd_defaults();
  o.lr = 0.005;
  o.momentum = 0.9;
  tg_optim *opt = tg_sgd_new(p, o);
  for (int s = 0; s < STEPS && opt; s++) {
    tg_scope_begin();
    tg_tensor *x, *y;
    tg_status st = batch(0, GLOBAL, &x, &y);
    tg_tensor *loss = st == TG_OK ? tg_sparse_categorical_crossentropy(forward(&m, x), y, (tg_loss_opts){0}) : NULL;
    st = loss ? tg_backward(loss) : tg_error_status();
    if (st == TG_OK) st = tg_optim_step(opt, 1, &loss);
    tg_scope_end();
    if (st != TG_OK) {
      printf("reference step %d: %s\n", s, tg_error());
      tg_optim_free(opt);
      goto out;
    }
  }
  v = opt ? flatten_params(p, n) : NULL;
  tg_optim_free(opt);
out:
  tg_params_free(p);
  model_free(&m);
  return v;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (tg_dist_init() != TG_OK) {
    printf("dp_mnist: %s\n", tg_error());
    return 1;
  }
  int rank = tg_dist_rank(), size = tg_dist_size(), fails = 0;
  make_data();
  tg_manual_seed(1 + 7 * (uint64_t)rank);  /* different weights on every rank until the broadcast */
  model m = {0};
  tg_params *p = tg_params_new();
  tg_status st = model_init(&m);
  if (st == TG_OK) st = model_params(&m, p);
  if (st == TG_OK) st = dp_broadcast_params(p);
  tg_sgd_opts o = tg_sgd_defaults();
  o.lr = 0.005;
  o.momentum = 0.9;
  tg_optim *opt = st == TG_OK ? tg_sgd_new(p, o) : NULL;
  dp_step d = {0};
  if (st == TG_OK) st = opt ? dp_init(&d, &m, p, opt) : tg_error_status();
  int64_t lo = GLOBAL * rank / size, hi = GLOBAL * (rank + 1) / size;
  for (int s = 0; s < STEPS && st == TG_OK; s++) {
    tg_scope_begin();
    tg_tensor *x, *y;
    double loss = 0;
    st = batch(lo, hi, &x, &y);
    if (st == TG_OK) st = dp_run(&d, x, y, &loss);
    if (st == TG_OK) printf("rank %d step %d: global loss %.6f\n", rank, s, loss);
    tg_scope_end();
  }
  if (st != TG_OK) {
    printf("rank %d: %s\n", rank, tg_error());
    return 1;
  }
  int64_t n = 0, nref = 0;
  float *mine = flatten_params(p, &n), *root = malloc((size_t)n * sizeof *root + 1);
  memcpy(root, mine, (size_t)n * sizeof *root);
  tg_tensor *t = tg_from_data(TG_FLOAT32, 1, (int64_t[]){n}, root, (size_t)n * 4);
  if (tg_dist_broadcast(t, 0) != TG_OK || tg_to_host(t, root, (size_t)n * 4) != TG_OK) {
    printf("rank %d: %s\n", rank, tg_error());
    return 1;
  }
  if (memcmp(root, mine, (size_t)n * 4)) {
    printf("rank %d FAIL: its parameters differ from rank 0's\n", rank);
    fails++;
  } else {
    printf("rank %d: %lld parameters bit-identical to rank 0's\n", rank, (long long)n);
  }
  if (rank == 0) {
    float *ref = reference(&nref);
    double worst = nref == n && ref ? 0 : INFINITY;
    for (int64_t i = 0; i < n && ref && nref == n; i++) worst = fmax(worst, fabs((double)ref[i] - mine[i]));
    printf("rank 0: largest difference from one process over the global batch: %.3g\n", worst);
    if (!(worst <= 1e-6)) {
      printf("rank 0 FAIL: more than 1e-6\n");
      fails++;
    }
    free(ref);
  }
  free(mine);
  free(root);
  tg_free(t);
  dp_free(&d);
  tg_optim_free(opt);
  tg_params_free(p);
  model_free(&m);
  tg_dist_finalize();
  tg_collect();
  return fails ? 1 : 0;
}
