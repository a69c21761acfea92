/* shard.c — a data-parallel training step on two CPU devices of one process (tg_shard) against the same step on
 * one device: an MLP 784-512-512-10 with Adam, batch 128 split 64 + 64, the parameters replicated. The two CPU
 * devices share one thread pool, so this measures the cost of the split (per-device kernels, the all-reduce's
 * copies, the placement pass), not a speed-up. Also the one-device step again after sharding was used in the
 * process (every realize then takes the placed path).
 *   ./build/bench/shard [--steps N] */
#include "bench_util.h"

static const char *const two[] = {"CPU:0", "CPU:1"};

static tg_tensor *randu(int ndim, const int64_t *shape, double scale) {
  return tg_mul_scalar(tg_sub_scalar(tg_rand(TG_FLOAT32, ndim, shape), 0.5), scale);
}

/* median ms of an Adam step over steps (after 3 warm-up steps); NAN on error */
static double run(bool sharded, int steps) {
  double *ms = calloc((size_t)steps, sizeof *ms), med = NAN;
  tg_scope_begin();
  tg_manual_seed(1);
  int64_t sh[6][2] = {{784, 512}, {512, 0}, {512, 512}, {512, 0}, {512, 10}, {10, 0}};
  tg_tensor *p[6];
  tg_params *ps = tg_params_new();
  const char *names[6] = {"w1", "b1", "w2", "b2", "w3", "b3"};
  for (int i = 0; i < 6; i++) {
    p[i] = randu(sh[i][1] ? 2 : 1, sh[i], 0.1);
    if (sharded) p[i] = tg_shard(p[i], 2, two, -1);
    if (!p[i] || tg_realize(p[i]) != TG_OK) goto out;
    tg_params_add(ps, names[i], tg_set_requires_grad(p[i], true));
  }
  tg_tensor *x = tg_rand(TG_FLOAT32, 2, (int64_t[]){128, 784});
  tg_tensor *y = tg_cast(tg_mul_scalar(tg_rand(TG_FLOAT32, 1, (int64_t[]){128}), 9.99), TG_INT32);
  if (sharded) {
    x = tg_shard(x, 2, two, 0);
    y = tg_shard(y, 2, two, 0);
  }
  if (!x || !y || tg_realize(x) != TG_OK || tg_realize(y) != TG_OK) goto out;
  tg_optim *o = tg_adam_new(ps, tg_adam_defaults());
  if (!o) goto out;
  bool ok = true;
  for (int s = 0; s < steps + 3 && ok; s++) {
    double t0 = bench_now_s();
    tg_scope_begin();
    tg_tensor *h = tg_relu(tg_linear(tg_relu(tg_linear(x, p[0], p[1])), p[2], p[3]));
    tg_tensor *loss = tg_sparse_categorical_crossentropy(tg_linear(h, p[4], p[5]), y, (tg_loss_opts){.ignore_index = -1});
    ok = tg_backward(loss) == TG_OK && tg_optim_step(o, 1, &loss) == TG_OK && !isnan(tg_item(loss));
    tg_scope_end();
    if (s >= 3) ms[s - 3] = (bench_now_s() - t0) * 1e3;
  }
  if (ok) med = median(ms, steps);
  tg_optim_free(o);
out:
  if (isnan(med)) fprintf(stderr, "shard: %s\n", tg_error());
  tg_params_free(ps);
  tg_scope_end();
  free(ms);
  return med;
}

int main(int argc, char **argv) {
  int steps = argc == 3 && !strcmp(argv[1], "--steps") ? atoi(argv[2]) : 10;
  if (steps < 1) {
    fprintf(stderr, "usage: %s [--steps N]\n", argv[0]);
    return 2;
  }
  double one = run(false, steps), sharded = run(true, steps), after = run(false, steps);
  printf("MLP 784-512-512-10 Adam step, batch 128, eager, median of %d steps (load %.1f)\n", steps, loadavg1());
  printf("%-44s %10s\n", "configuration", "ms/step");
  printf("%-44s %10.2f\n", "one device (CPU)", one);
  printf("%-44s %10.2f  (%.2fx)\n", "sharded on CPU:0,CPU:1 (batch 64 + 64)", sharded, sharded / one);
  printf("%-44s %10.2f  (%.2fx)\n", "one device, after sharding was used", after, after / one);
  return isnan(one) || isnan(sharded) || isnan(after);
}
