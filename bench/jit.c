/* jit.c — the JIT benchmark of issue 5, in one run:
 *   - the MLP training step (784-512-512-10, relu, cross entropy, Adam, batch 128): tgc eager, tgc under tg_jit,
 *     tinygrad under TinyJit and PyTorch CPU eager (the peers from bench/workload_peers.py, skipped with a note
 *     when not installed);
 *   - the memory of the captured step's intermediates on their own and in the planned arena;
 *   - the replay cost per kernel, apart from kernel work: a captured step of one-element kernels.
 * The MNIST CNN step (eager, JIT, peers) is bench/mnist.sh. Usage: ./build/bench/jit [--steps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "runtime/device.h"
#include "tg.h"

typedef struct mlp { tg_nn_linear l1, l2, l3; tg_optim *opt; tg_params *p; } mlp;

static void die(const char *what) {
  fprintf(stderr, "jit bench: %s: %s\n", what, tg_error());
  exit(1);
}

static tg_status mlp_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  mlp *m = ctx;
  tg_scope_begin();
  tg_tensor *h = tg_relu(tg_nn_linear_forward(&m->l1, in[0]));
  h = tg_relu(tg_nn_linear_forward(&m->l2, h));
  tg_tensor *loss = tg_sparse_categorical_crossentropy(tg_nn_linear_forward(&m->l3, h), in[1], (tg_loss_opts){0});
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->opt, 1, &loss);
  out[0] = st == TG_OK ? tg_keep(loss) : NULL;
  tg_scope_end();
  return st;
}

/* median ms per call of fn (jit NULL: eager) over `steps` calls after `warm` warm-up calls; inputs are new
 * tensors every call, as a data loader gives them */
static double time_calls(tg_jit_fn fn, void *ctx, tg_jit *jit, int warm, int steps, int nin, tg_tensor *(*make)(int)) {
  double *t = malloc((size_t)steps * sizeof *t);
  if (!t) die("malloc");
  for (int s = 0; s < steps + warm; s++) {
    tg_scope_begin();
    tg_tensor *in[4], *out = NULL;
    for (int i = 0; i < nin; i++) in[i] = make(i);
    double t0 = bench_now_s();
    tg_status st = jit ? tg_jit_call(jit, in, &out) : fn(ctx, nin, in, 1, &out);
    double el = bench_now_s() - t0;
    if (st != TG_OK) die("step");
    if (s >= warm) t[s - warm] = el * 1e3;
    tg_free(out);
    tg_scope_end();
  }
  double m = median(t, steps);
  free(t);
  return m;
}

static float *xs;
static int32_t ys[128];

static tg_tensor *mlp_input(int i) {
  return i == 0 ? tg_from_data(TG_FLOAT32, 2, (int64_t[]){128, 784}, xs, 128 * 784 * 4)
                : tg_from_data(TG_INT32, 1, (int64_t[]){128}, ys, sizeof ys);
}

/* ---- replay cost: a chain of one-element kernels ------------------------------------------------------- */

#define CHAIN 256

static tg_status chain_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  tg_scope_begin();
  tg_tensor *y = in[0];
  for (int i = 0; i < CHAIN; i++) y = tg_contiguous(tg_add_scalar(tg_mul_scalar(y, 0.5), 1));
  out[0] = tg_keep(y);
  tg_scope_end();
  return out[0] ? TG_OK : tg_error_status();
}

/* a new buffer every call: the same graph on the same values would be served from realized values */
static tg_tensor *chain_input(int i) { return tg_from_data(TG_FLOAT32, 1, (int64_t[]){1}, (float[]){3}, 4); }

/* the pool's part of a launch split across threads: an empty task, many times */
static void empty_task(void *ctx, int64_t core, int64_t n) {}

static double pool_dispatch_us(void) {
  int reps = 20000;
  pool_run(empty_task, NULL, 0);
  double t0 = bench_now_s();
  for (int i = 0; i < reps; i++) pool_run(empty_task, NULL, 0);
  return (bench_now_s() - t0) * 1e6 / reps;
}

/* ---- peers ------------------------------------------------------------------------------------------------ */

typedef struct peer { char impl[32], note[224]; double ms; int threads; } peer;

static int run_peers(peer *p, int max) {
  char path[4200], line[4096];
  FILE *f = bench_run_script("workload_peers.py", "TG_BENCH_ONLY=mlp", true, path, sizeof path);
  int n = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f) && n < max) {
    char wl[64];
    peer *r = &p[n];
    *r = (peer){.ms = NAN};
    if (json_str(line, "skip", r->impl, sizeof r->impl) && json_str(line, "note", r->note, sizeof r->note)) {
      if (strcmp(r->impl, "numpy") && strcmp(r->impl, "tinygrad_beam")) n++;
    } else if (json_str(line, "workload", wl, sizeof wl) && !strcmp(wl, "mlp_784_512_512_10_adam_b128") &&
               json_str(line, "impl", r->impl, sizeof r->impl)) {
      r->ms = json_num(line, "value");
      r->threads = (int)json_num(line, "threads");
      n++;
    }
  }
  if (pclose(f) != 0 && n == 0) {
    snprintf(p[0].impl, sizeof p[0].impl, "peers");
    snprintf(p[0].note, sizeof p[0].note, "bench/workload_peers.py failed (run from the repository root)");
    p[0].ms = NAN;
    n = 1;
  }
  return n;
}

int main(int argc, char **argv) {
  long long steps_arg = 20;
  args_prog = "jit";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps")) {
      if (!args_int(argc, argv, &i, 1, 100000, &steps_arg)) return ARGS_EXIT;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: jit [--steps N]\n"
             "The MLP training step (784-512-512-10, Adam, batch 128) eagerly and under tg_jit, next to tinygrad's\n"
             "TinyJit and PyTorch; the step's planned memory; the replay cost per kernel.\n"
             "  --steps N   timed steps of each kind after the warm-up, 1..100000 (default 20)\n"
             "  -h, --help  this help\n");
      return 0;
    } else {
      args_unknown(argv[i]);
      return ARGS_EXIT;
    }
  }
  int steps = (int)steps_arg;
  xs = malloc(128 * 784 * sizeof *xs);
  if (!xs) die("malloc");
  for (int i = 0; i < 128 * 784; i++) xs[i] = (float)((i * 7919) % 255) / 255.0f;
  for (int i = 0; i < 128; i++) ys[i] = i % 10;
  mlp m;
  tg_manual_seed(1);
  if (tg_nn_linear_init(&m.l1, 784, 512, true) || tg_nn_linear_init(&m.l2, 512, 512, true) ||
      tg_nn_linear_init(&m.l3, 512, 10, true))
    die("init");
  m.p = tg_params_new();
  tg_nn_linear_params(&m.l1, "l1", m.p);
  tg_nn_linear_params(&m.l2, "l2", m.p);
  tg_nn_linear_params(&m.l3, "l3", m.p);
  if (!(m.opt = tg_adam_new(m.p, adam_lr(1e-3)))) die("adam");

  double eager = time_calls(mlp_step, &m, NULL, 3, steps, 2, mlp_input);
  tg_jit *jit = tg_jit_new(mlp_step, &m, 2, 1);
  if (!jit) die("tg_jit_new");
  double jitted = time_calls(mlp_step, &m, jit, 3, steps, 2, mlp_input);
  size_t before = 0, after = 0;
  tg_jit_memory(jit, &before, &after);
  int nk = tg_jit_kernels(jit);

  /* replay cost per kernel: the chain replayed vs the same chain run eagerly */
  tg_jit *cj = tg_jit_new(chain_step, NULL, 1, 1);
  if (!cj) die("tg_jit_new");
  double chain_eager = time_calls(chain_step, NULL, NULL, 2, steps, 1, chain_input);
  double chain_jit = time_calls(chain_step, NULL, cj, 3, steps, 1, chain_input);
  int ck = tg_jit_kernels(cj);
  double pool_us = pool_dispatch_us();

  peer peers[8];
  int np = run_peers(peers, 8);

  printf("MLP 784-512-512-10 training step (relu, cross entropy, Adam), batch 128; tgc %d threads; median of %d "
         "steps after 3 warm-up steps; new input tensors every step\n", tg_num_threads(), steps);
  printf("%-22s %10s %14s\n", "implementation", "ms/step", "tgc JIT speedup");
  printf("%-22s %10.2f %13.2fx\n", "tgc eager", eager, eager / jitted);
  printf("%-22s %10.2f %13s  (%d kernels replayed)\n", "tgc JIT", jitted, "1.00x", nk);
  for (int i = 0; i < np; i++) {
    const char *name = !strcmp(peers[i].impl, "tinygrad") ? "tinygrad TinyJit"
                       : !strcmp(peers[i].impl, "pytorch") ? "PyTorch eager" : peers[i].impl;
    if (isnan(peers[i].ms)) printf("%-22s %10s %14s  skipped: %s\n", name, "-", "-", peers[i].note);
    else printf("%-22s %10.2f %13.2fx  (%d threads)\n", name, peers[i].ms, peers[i].ms / jitted, peers[i].threads);
  }
  printf("step memory: intermediates %.2f MB in their own buffers, %.2f MB in the planned arena (%.0f%%); parameters "
         "and Adam state keep their buffers\n", before / 1e6, after / 1e6, before ? 100.0 * after / before : 100);
  printf("replay cost: a step of %d one-element kernels: %.1f us replayed (%.2f us per kernel), %.1f us eager "
         "(%.2f us per kernel: graph, schedule, cache look-ups, launch)\n", ck, chain_jit * 1e3,
         ck ? chain_jit * 1e3 / ck : 0, chain_eager * 1e3, ck ? chain_eager * 1e3 / ck : 0);
  printf("a kernel split across the %d threads of the pool adds %.2f us (an empty task dispatched and joined)\n",
         pool_size(), pool_us);
  tg_jit_free(cj);
  tg_jit_free(jit);
  tg_optim_free(m.opt);
  tg_params_free(m.p);
  tg_nn_linear_free(&m.l1);
  tg_nn_linear_free(&m.l2);
  tg_nn_linear_free(&m.l3);
  free(xs);
  tg_collect();
  return 0;
}
