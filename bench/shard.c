/* shard.c — a data-parallel training step on two CPU devices of one process (tg_shard) against the same step on
 * one device: an MLP 784-512-512-10 with Adam, batch 128 split 64 + 64, the parameters replicated. The two CPU
 * devices share one thread pool, so this measures the cost of the split (per-device kernels, the all-reduce's
 * copies, the placement pass), not a speed-up. Also the one-device step again after sharding was used in the
 * process (every realize then takes the placed path), and both steps under tg_jit (the sharded one replays its
 * copies with its kernels).
 *   ./build/bench/shard [--steps N] */
#include "bench_util.h"

static const char *const two[] = {"CPU:0", "CPU:1"};

static tg_tensor *randu(int ndim, const int64_t *shape, double scale) {
  return tg_mul_scalar(tg_sub_scalar(tg_rand(TG_FLOAT32, ndim, shape), 0.5), scale);
}

typedef struct net {
  tg_tensor *p[6];
  tg_optim *o;
  bool sharded;
} net;

/* one Adam step on the batch in[0], in[1] (whole: split over the devices here when sharded); out: the loss */
static tg_status step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)nin, (void)nout;
  net *m = ctx;
  tg_scope_begin();
  tg_tensor *x = m->sharded ? tg_shard(in[0], 2, two, 0) : in[0], *y = m->sharded ? tg_shard(in[1], 2, two, 0) : in[1];
  tg_tensor *h = tg_relu(tg_linear(tg_relu(tg_linear(x, m->p[0], m->p[1])), m->p[2], m->p[3]));
  tg_tensor *loss = tg_sparse_categorical_crossentropy(tg_linear(h, m->p[4], m->p[5]), y, (tg_loss_opts){.ignore_index = -1});
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->o, 1, &loss);
  out[0] = st == TG_OK ? tg_keep(tg_to(loss, "CPU:0")) : NULL;
  tg_scope_end();
  return out[0] ? TG_OK : tg_error_status();
}

/* median ms of an Adam step over steps (after 3 warm-up steps, which capture under tg_jit); NAN on error */
static double run(bool sharded, bool jit, int steps) {
  double *ms = calloc((size_t)steps, sizeof *ms), med = NAN;
  tg_scope_begin();
  tg_manual_seed(1);
  int64_t sh[6][2] = {{784, 512}, {512, 0}, {512, 512}, {512, 0}, {512, 10}, {10, 0}};
  net m = {.sharded = sharded};
  tg_params *ps = tg_params_new();
  tg_jit *j = NULL;
  const char *names[6] = {"w1", "b1", "w2", "b2", "w3", "b3"};
  for (int i = 0; i < 6; i++) {
    m.p[i] = randu(sh[i][1] ? 2 : 1, sh[i], 0.1);
    if (sharded) m.p[i] = tg_shard(m.p[i], 2, two, -1);
    if (!m.p[i] || tg_realize(m.p[i]) != TG_OK) goto out;
    tg_params_add(ps, names[i], tg_set_requires_grad(m.p[i], true));
  }
  tg_tensor *in[2] = {tg_rand(TG_FLOAT32, 2, (int64_t[]){128, 784}),
                      tg_cast(tg_mul_scalar(tg_rand(TG_FLOAT32, 1, (int64_t[]){128}), 9.99), TG_INT32)};
  if (!in[0] || !in[1] || tg_realize(in[0]) != TG_OK || tg_realize(in[1]) != TG_OK) goto out;
  if (!(m.o = tg_adam_new(ps, tg_adam_defaults()))) goto out;
  if (jit && !(j = tg_jit_new(step, &m, 2, 1))) goto out;
  bool ok = true;
  for (int s = 0; s < steps + 3 && ok; s++) {
    double t0 = bench_now_s();
    tg_scope_begin();
    tg_tensor *loss = NULL;
    ok = (jit ? tg_jit_call(j, in, &loss) : step(&m, 2, in, 1, &loss)) == TG_OK && !isnan(tg_item(loss));
    tg_scope_end();
    if (s >= 3) ms[s - 3] = (bench_now_s() - t0) * 1e3;
  }
  if (ok) med = median(ms, steps);
out:
  if (isnan(med)) fprintf(stderr, "shard: %s\n", tg_error());
  tg_jit_free(j);
  tg_optim_free(m.o);
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
  double one = run(false, false, steps), sharded = run(true, false, steps), after = run(false, false, steps);
  double one_j = run(false, true, steps), sharded_j = run(true, true, steps);
  printf("MLP 784-512-512-10 Adam step, batch 128, median of %d steps (load %.1f)\n", steps, loadavg1());
  printf("%-44s %10s %10s\n", "configuration", "eager ms", "tg_jit ms");
  printf("%-44s %10.2f %10.2f\n", "one device (CPU)", one, one_j);
  printf("%-44s %10.2f %10.2f  (%.2fx, %.2fx)\n", "sharded on CPU:0,CPU:1 (batch 64 + 64)", sharded, sharded_j,
         sharded / one, sharded_j / one_j);
  printf("%-44s %10.2f %10s  (%.2fx)\n", "one device, after sharding was used", after, "", after / one);
  return isnan(one) || isnan(sharded) || isnan(after) || isnan(one_j) || isnan(sharded_j);
}
