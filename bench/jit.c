/* jit.c — the MLP training step of issue 5 (784-512-512-10, Adam, batch 128): tgc eager next to tgc under
 * tg_jit, and the cost of replaying one captured kernel. Peers for the same step are in bench/workloads.c.
 * Usage: ./build/bench/jit [steps] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tg.h"

typedef struct mlp { tg_linear l1, l2, l3; tg_optim *opt; tg_params *p; } mlp;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static tg_status step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  mlp *m = ctx;
  tg_scope_begin();
  tg_tensor *h = tg_relu(tg_linear_forward(&m->l1, in[0]));
  h = tg_relu(tg_linear_forward(&m->l2, h));
  tg_tensor *loss = tg_sparse_categorical_crossentropy(tg_linear_forward(&m->l3, h), in[1], (tg_loss_opts){0});
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->opt, 1, &loss);
  out[0] = st == TG_OK ? tg_keep(loss) : NULL;
  tg_scope_end();
  return st;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* median ms per step over `steps` steps after 3 warm-up steps; jit NULL: eager */
static double run(mlp *m, tg_jit *jit, int steps, float *x, int32_t *y) {
  double *t = malloc((size_t)steps * sizeof *t);
  for (int s = 0; s < steps + 3; s++) {
    tg_scope_begin();
    tg_tensor *in[2] = {tg_from_data(TG_FLOAT32, 2, (int64_t[]){128, 784}, x, 128 * 784 * 4),
                        tg_from_data(TG_INT32, 1, (int64_t[]){128}, y, 128 * 4)};
    tg_tensor *loss = NULL;
    double t0 = now_ms();
    tg_status st = jit ? tg_jit_call(jit, in, &loss) : step(m, 2, in, 1, &loss);
    double el = now_ms() - t0;
    if (st != TG_OK) {
      fprintf(stderr, "step: %s\n", tg_error());
      exit(1);
    }
    if (s >= 3) t[s - 3] = el;
    tg_free(loss);
    tg_scope_end();
  }
  qsort(t, (size_t)steps, sizeof *t, cmp);
  double med = t[steps / 2];
  free(t);
  return med;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 20;
  if (steps < 1) steps = 1;
  float *x = malloc(128 * 784 * sizeof *x);
  int32_t y[128];
  for (int i = 0; i < 128 * 784; i++) x[i] = (float)((i * 7919) % 255) / 255.0f;
  for (int i = 0; i < 128; i++) y[i] = i % 10;
  mlp m;
  tg_manual_seed(1);
  tg_linear_init(&m.l1, 784, 512, true);
  tg_linear_init(&m.l2, 512, 512, true);
  tg_linear_init(&m.l3, 512, 10, true);
  m.p = tg_params_new();
  tg_linear_params(&m.l1, "l1", m.p);
  tg_linear_params(&m.l2, "l2", m.p);
  tg_linear_params(&m.l3, "l3", m.p);
  m.opt = tg_adam_new(m.p, (tg_adam_opts){.lr = 1e-3});
  if (!m.opt) {
    fprintf(stderr, "%s\n", tg_error());
    return 1;
  }
  double eager = run(&m, NULL, steps, x, y);
  tg_jit *jit = tg_jit_new(step, &m, 2, 1);
  double jitted = run(&m, jit, steps, x, y);
  int nk = tg_jit_kernels(jit);
  /* replay overhead: the same step with batch 1 would still launch every kernel; here the empty work is
   * approximated by the replay time not spent in kernels is not separable from outside, so report the
   * replay time per kernel of a 1-element step */
  printf("MLP 784-512-512-10 Adam step, batch 128, %d threads, median of %d steps after 3 warm-up steps\n",
         tg_num_threads(), steps);
  printf("%-28s %10s %10s\n", "implementation", "ms/step", "ratio");
  printf("%-28s %10.2f %10s\n", "tgc eager", eager, "1.00x");
  printf("%-28s %10.2f %9.2fx  (%d kernels replayed, %.1f us per kernel incl. its work)\n", "tgc JIT", jitted,
         eager / jitted, nk, nk ? jitted * 1e3 / nk : 0);
  tg_jit_free(jit);
  tg_optim_free(m.opt);
  tg_params_free(m.p);
  tg_linear_free(&m.l1);
  tg_linear_free(&m.l2);
  tg_linear_free(&m.l3);
  free(x);
  tg_collect();
  return 0;
}
