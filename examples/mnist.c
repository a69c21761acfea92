/* mnist.c — tinygrad's beautiful_mnist in C: a small convolutional network trained with Adam on MNIST.
 *
 *   ./build/examples/mnist                      train 70 steps of batch 512, save the weights, evaluate
 *   ./build/examples/mnist --fashion            the same on Fashion-MNIST (weights: fashion-mnist.safetensors)
 *   ./build/examples/mnist --eval FILE          load weights and evaluate
 *   mpirun -np 2 ./build/examples/mnist --dist  data parallel over MPI: each rank trains on its slice of every
 *                                               batch, the gradients are averaged (tg_dist_all_reduce), rank 0
 *                                               evaluates and saves (README: several machines)
 * --help lists every flag (--steps --batch --lr --seed --data --fashion --out --no-save --eval --dist). The command line
 * is checked whole before any work: a bad flag or value, a --data folder without the files or an --out that
 * cannot be written is a message and exit status 2, and nothing is written.
 * The last line printed is "test accuracy: NN.NN%".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "mnist_net.h"
#include "tg.h"

/* one training step as the JIT sees it: in = {images, labels}, out = {loss} */
typedef struct train_ctx { model *m; tg_optim *opt; } train_ctx;

static tg_status train_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  train_ctx *c = ctx;
  model *m = c->m;
  tg_scope_begin();
  tg_tensor *loss = tg_sparse_categorical_crossentropy(forward(m, in[0]), in[1], (tg_loss_opts){0});
  /* the batchnorms' running statistics update in the same schedule as the parameters */
  tg_tensor *extra[7] = {loss, m->bn1.running_mean, m->bn1.running_var, m->bn1.num_batches_tracked,
                         m->bn2.running_mean, m->bn2.running_var, m->bn2.num_batches_tracked};
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(c->opt, 7, extra);
  out[0] = st == TG_OK ? tg_keep(loss) : NULL;
  tg_scope_end();
  return st;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* fraction of test images classified right, in chunks so memory stays small */
static double evaluate(model *m, const tg_dataset *test, double *seconds) {
  double t0 = now_s();
  int64_t chunk = 1000, correct = 0;
  int64_t *perm = malloc((size_t)test->n * sizeof *perm);
  int32_t *pred = malloc((size_t)chunk * sizeof *pred), *lab = malloc((size_t)chunk * sizeof *lab);
  if (!perm || !pred || !lab) {
    free(perm); free(pred); free(lab);
    return -1;
  }
  for (int64_t i = 0; i < test->n; i++) perm[i] = i;
  for (int64_t s = 0; s < test->n; s += chunk) {
    int64_t cnt = test->n - s < chunk ? test->n - s : chunk;
    tg_scope_begin();
    tg_tensor *x, *y;
    if (tg_dataset_batch(test, perm, s, cnt, &x, &y) != TG_OK) { tg_scope_end(); correct = -1; break; }
    tg_tensor *p = tg_argmax(forward(m, x), 1, false);
    if (tg_to_host(p, pred, (size_t)cnt * 4) != TG_OK || tg_to_host(y, lab, (size_t)cnt * 4) != TG_OK) {
      tg_scope_end();
      correct = -1;
      break;
    }
    for (int64_t i = 0; i < cnt; i++) correct += pred[i] == lab[i];
    tg_scope_end();
  }
  free(perm); free(pred); free(lab);
  *seconds = now_s() - t0;
  return correct < 0 ? -1 : (double)correct / (double)test->n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* one line of progress on stderr: rewritten in place on a terminal, a line per step otherwise. eta < 0: unknown */
static void progress(long long step, long long steps, double loss, double sps, double eta, bool tty) {
  int width = 30, done = steps ? (int)((double)width * (double)step / (double)steps) : width;
  char bar[64], eta_s[32];
  for (int i = 0; i < width; i++) bar[i] = i < done ? '#' : '.';
  bar[width] = 0;
  if (eta < 0) snprintf(eta_s, sizeof eta_s, "    ?");
  else snprintf(eta_s, sizeof eta_s, "%5.1fs", eta);
  fprintf(stderr, "%s[%s] step %4lld/%lld  loss %7.4f  %7.0f samples/s  ETA %s%s", tty ? "\r" : "", bar, step, steps,
          loss, sps, eta_s, tty ? "" : "\n");
  fflush(stderr);
}

/* the help, on stdout: every flag, its range and its default */
static void usage(void) {
  printf("usage: mnist [--steps N] [--batch N] [--lr X] [--seed N] [--data DIR] [--fashion] [--out FILE | --no-save]\n"
         "             [--dist]\n"
         "       mnist --eval FILE [--data DIR] [--fashion] [--seed N]\n"
         "Trains tinygrad's beautiful_mnist network with Adam on MNIST, saves the weights, then evaluates them on\n"
         "the test images; the last line is \"test accuracy: NN.NN%%\".\n"
         "  --steps N    training steps, 1..1000000 (default 70)\n"
         "  --batch N    images per step, 1..60000 and at most the training set (default 512)\n"
         "  --lr X       Adam's learning rate, 1e-08..10 (default 0.001)\n"
         "  --seed N     seed of the initial weights and of the shuffling, 0..9223372036854775807 (default 1337)\n"
         "  --data DIR   the folder holding the four IDX files (train-images-idx3-ubyte etc., raw or .gz); it must\n"
         "               exist and hold them (default: $TG_DATA/mnist, then ~/.cache/tgc/mnist, as scripts/get_mnist.sh\n"
         "               fills it; with --fashion fashion-mnist instead of mnist, then /usr/share/datasets/fashion-mnist)\n"
         "  --fashion    Fashion-MNIST instead of MNIST\n"
         "  --out FILE   where the trained weights go (safetensors), checked before anything runs (default\n"
         "               mnist.safetensors, or fashion-mnist.safetensors with --fashion)\n"
         "  --no-save    do not save the weights\n"
         "  --eval FILE  no training: load the weights in FILE and evaluate them\n"
         "  --dist       data parallel over MPI, under mpirun (mpirun -np 2 mnist --dist): --batch is the global batch,\n"
         "               each rank takes its slice; rank 0 prints, evaluates and saves (TG_DIST_TIMEOUT: seconds a rank\n"
         "               waits for the others, default 60)\n"
         "  -h, --help   this help\n"
         "JIT=0 runs every step eagerly; DEBUG, BEAM, TG_THREADS and TG_DATA are described in the README.\n"
         "Exit status: 0 done, 1 a failure while running, 2 a bad command line (a message names the flag).\n");
}

/* the four IDX files of MNIST and Fashion-MNIST, each raw or gzipped */
static const char *const idx_files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                         "t10k-labels-idx1-ubyte"};

/* true when the folder given with --data exists and holds the four files; tg_mnist_load would look elsewhere */
static bool data_dir_ok(const char *dir) {
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return args_error("--data %s: no such folder", dir);
  for (int i = 0; i < 4; i++) {
    char raw[PATH_MAX], gz[PATH_MAX];
    snprintf(raw, sizeof raw, "%s/%s", dir, idx_files[i]);
    snprintf(gz, sizeof gz, "%s/%s.gz", dir, idx_files[i]);
    if (access(raw, R_OK) != 0 && access(gz, R_OK) != 0)
      return args_error("--data %s: the folder lacks %s (or %s.gz); scripts/get_mnist.sh fetches the files", dir,
                        idx_files[i], idx_files[i]);
  }
  return true;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  args_prog = "mnist";
  long long steps = 70, batch = 512, seed = 1337;
  double lr = 0.001;
  const char *data = NULL, *out = NULL, *eval_path = NULL;
  const char *train_flag = NULL;  /* the last flag given that only training reads (an error with --eval) */
  bool fashion = false, save = true, dist = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool ok = true;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    } else if (!strcmp(a, "--steps")) {
      train_flag = a;
      ok = args_int(argc, argv, &i, 1, 1000000, &steps);
    } else if (!strcmp(a, "--batch")) {
      train_flag = a;
      ok = args_int(argc, argv, &i, 1, 60000, &batch);
    } else if (!strcmp(a, "--lr")) {
      train_flag = a;
      ok = args_real(argc, argv, &i, 1e-8, 10, &lr);
    } else if (!strcmp(a, "--seed")) {
      ok = args_int(argc, argv, &i, 0, LLONG_MAX, &seed);
    } else if (!strcmp(a, "--data")) {
      ok = (data = args_value(argc, argv, &i, "a folder")) != NULL;
    } else if (!strcmp(a, "--out")) {
      train_flag = a;
      ok = (out = args_value(argc, argv, &i, "a file to write")) != NULL;
    } else if (!strcmp(a, "--eval")) {
      ok = (eval_path = args_value(argc, argv, &i, "a safetensors file")) != NULL;
    } else if (!strcmp(a, "--fashion")) {
      fashion = true;
    } else if (!strcmp(a, "--dist")) {
      train_flag = a;
      dist = true;
    } else if (!strcmp(a, "--no-save")) {
      train_flag = a;
      save = false;
    } else {
      ok = args_unknown(a);
    }
    if (!ok) return ARGS_EXIT;
  }
  /* everything the command line names is checked here, before the dataset loads or a step runs */
  if (eval_path && train_flag) {
    args_error("%s is a training flag; --eval only evaluates the weights it loads", train_flag);
    return ARGS_EXIT;
  }
  if (out && !save) {
    args_error("--out and --no-save contradict each other");
    return ARGS_EXIT;
  }
  if (!eval_path && save && !out) out = fashion ? "fashion-mnist.safetensors" : "mnist.safetensors";
  /* --dist: join the job first, so that only rank 0 checks and writes the output */
  int rank = 0, nranks = 1;
  if (dist) {
    if (tg_dist_init() != TG_OK) {
      fprintf(stderr, "mnist: --dist: %s\n", tg_error());
      return 1;
    }
    rank = tg_dist_rank();
    nranks = tg_dist_size();
    if (batch < nranks) {
      args_error("--batch %lld: fewer images than the %d ranks", batch, nranks);
      return ARGS_EXIT;
    }
    if (rank != 0) save = false;
  }
  if (!eval_path && save && !args_output_ok("--out", out)) return ARGS_EXIT;
  if (eval_path && !args_input_ok("--eval", eval_path)) return ARGS_EXIT;
  if (data && !data_dir_ok(data)) return ARGS_EXIT;
  tg_dataset train = {0}, test = {0};
  if (tg_mnist_load(data, fashion, &train, &test) != TG_OK) {
    fprintf(stderr, "mnist: %s\n", tg_error());
    return 1;
  }
  if (batch > train.n) {
    args_error("--batch %lld: more than the %lld training images", batch, (long long)train.n);
    tg_dataset_free(&train);
    tg_dataset_free(&test);
    return ARGS_EXIT;
  }
  tg_manual_seed((uint64_t)seed);
  model m = {0};
  tg_params *params = tg_params_new();
  int rc = 1;
  tg_optim *opt = NULL;
  dp_step dp = {0};
  int64_t *perm = malloc((size_t)train.n * sizeof *perm);
  if (!perm || !params || model_init(&m) != TG_OK || model_params(&m, params) != TG_OK) {
    fprintf(stderr, "mnist: %s\n", tg_error());
    goto done;
  }
  if (eval_path) {
    if (tg_safetensors_load(eval_path, params, false) != TG_OK) {
      fprintf(stderr, "mnist: %s\n", tg_error());
      goto done;
    }
  } else {
    tg_adam_opts adam = tg_adam_defaults();   /* tinygrad's Adam: b1 0.9, b2 0.999, eps 1e-8 */
    adam.lr = lr;
    opt = tg_adam_new(params, adam);
    if (!opt) {
      fprintf(stderr, "mnist: %s\n", tg_error());
      goto done;
    }
    bool tty = isatty(2) && rank == 0;
    train_ctx tc = {&m, opt};
    tg_jit *jit = dist ? NULL : tg_jit_new(train_step, &tc, 2, 1);  /* JIT=0 runs every step eagerly */
    /* --dist: rank 0's initial weights everywhere, and a step of two tg_jit's around one all-reduce */
    if (dist && (dp_broadcast_params(params) != TG_OK || dp_init(&dp, &m, params, opt) != TG_OK)) {
      fprintf(stderr, "mnist: rank %d: %s\n", rank, tg_error());
      goto done;
    }
    if (!jit && !dist) {
      fprintf(stderr, "mnist: %s\n", tg_error());
      goto done;
    }
    if (rank == 0)
      printf("training %lld steps of batch %lld on %s (%lld images), %d threads\n", steps, batch,
             fashion ? "Fashion-MNIST" : "MNIST", (long long)train.n, tg_num_threads());
    if (dist && rank == 0)
      printf("data parallel: %d ranks of %d threads, %lld images each per step\n", nranks, tg_num_threads(),
             batch / nranks);
    tg_shuffle(perm, train.n, (uint64_t)seed);
    int64_t pos = 0, epoch = 0;
    double t0 = now_s(), loss_v = 0, steady_s = 0;
    double *step_s = calloc((size_t)steps + 1, sizeof *step_s), *comm_s = calloc((size_t)steps + 1, sizeof *comm_s);
    double *wait_s = calloc((size_t)steps + 1, sizeof *wait_s);
    if (!step_s || !comm_s || !wait_s) {
      free(step_s);
      free(comm_s);
      free(wait_s);
      fprintf(stderr, "mnist: out of memory\n");
      tg_jit_free(jit);
      goto done;
    }
    tg_set_training(true);
    for (long long s = 0; s < steps; s++) {
      if (pos + batch > train.n) {
        tg_shuffle(perm, train.n, (uint64_t)seed + (uint64_t)++epoch);
        pos = 0;
      }
      double ts = now_s();
      tg_scope_begin();
      tg_tensor *x, *y;
      /* --dist: this rank's slice of the global batch (every rank shuffled alike) */
      int64_t lo = dist ? batch * rank / nranks : 0, hi = dist ? batch * (rank + 1) / nranks : batch;
      tg_status st = tg_dataset_batch(&train, perm, pos + lo, hi - lo, &x, &y);
      pos += batch;
      tg_tensor *loss = NULL, *in[2] = {x, y};
      double comm0 = dp.comm_s, wait0 = dp.wait_s;
      if (st == TG_OK) st = dist ? dp_run(&dp, x, y, &loss_v) : tg_jit_call(jit, in, &loss);
      if (st != TG_OK) {
        fprintf(stderr, "\nmnist: rank %d: step %lld: %s\n", rank, s, tg_error());
        tg_scope_end();
        free(step_s);
        free(comm_s);
        free(wait_s);
        tg_jit_free(jit);
        goto done;
      }
      if (!dist) loss_v = tg_item(loss);
      tg_free(loss);
      tg_scope_end();
      step_s[s] = now_s() - ts;
      comm_s[s] = dp.comm_s - comm0;
      wait_s[s] = dp.wait_s - wait0;
      /* rate and ETA from the steps after the first two: the first call of a tg_jit step runs it and compiles
       * every kernel, the second captures it; both take many times a replay (averaging them in made the first
       * ETAs about 8x too high). Until a third step is done the ETA is unknown. */
      long long nsteady = s + 1 - 2;
      if (nsteady > 0) steady_s += step_s[s];
      double el = now_s() - t0, per_step = nsteady > 0 ? steady_s / (double)nsteady : el / (double)(s + 1);
      if (rank == 0)
        progress(s + 1, steps, loss_v, (double)batch / per_step, nsteady > 0 ? per_step * (double)(steps - s - 1) : -1, tty);
    }
    tg_set_training(false);
    size_t unplanned, arena;
    if (jit && tg_jit_memory(jit, &unplanned, &arena) == TG_OK)
      printf("jit: %d kernels per step; intermediates %.1f MB on their own, %.1f MB in the planned arena\n",
             tg_jit_kernels(jit), unplanned / 1e6, arena / 1e6);
    tg_error_clear();  /* not captured (JIT=0, or one step) */
    tg_jit_free(jit);
    double train_s = now_s() - t0;
    if (tty) fprintf(stderr, "\n");
    if (rank == 0)
      printf("trained in %.1f s (%.1f ms/step), final loss %.4f\n", train_s, train_s * 1e3 / (double)steps, loss_v);
    if (steps > 1 && rank == 0) {  /* steady state: the first step compiles the kernels */
      qsort(step_s + 1, (size_t)steps - 1, sizeof *step_s, cmp_double);
      printf("median step after the first: %.1f ms (first step %.2f s)\n", step_s[1 + (steps - 1) / 2] * 1e3, step_s[0]);
      if (dist) {  /* the all-reduces' time, and before them the wait for the slowest rank */
        qsort(comm_s + 1, (size_t)steps - 1, sizeof *comm_s, cmp_double);
        qsort(wait_s + 1, (size_t)steps - 1, sizeof *wait_s, cmp_double);
        double c = comm_s[1 + (steps - 1) / 2], w = wait_s[1 + (steps - 1) / 2], m = step_s[1 + (steps - 1) / 2];
        printf("communication: median %.2f ms per step (%.2f%% of the median step), all-reduce of %.2f MB; waiting "
               "for the slower rank: median %.2f ms (%.1f%%)\n", c * 1e3, 100 * c / m, (double)dp_numel(&dp) * 4 / 1e6,
               w * 1e3, 100 * w / m);
      }
    }
    free(step_s);
    free(comm_s);
    free(wait_s);
    if (save) {
      if (tg_safetensors_save(out, params) != TG_OK) {
        fprintf(stderr, "mnist: saving %s: %s\n", out, tg_error());
        goto done;
      }
      printf("weights saved to %s\n", out);
    }
  }
  if (rank != 0) {  /* rank 0 evaluates */
    rc = 0;
    goto done;
  }
  double eval_s;
  double acc = evaluate(&m, &test, &eval_s);
  if (acc < 0) {
    fprintf(stderr, "mnist: evaluation: %s\n", tg_error());
    goto done;
  }
  printf("evaluated %lld test images in %.1f s\n", (long long)test.n, eval_s);
  printf("test accuracy: %.2f%%\n", acc * 100);
  tg_memory_info mi;
  if (tg_memory(NULL, &mi) == TG_OK)
    printf("peak memory: %.1f MB of tensors and arenas (%.1f MB in JIT arenas now)\n", mi.peak / 1e6, mi.arenas / 1e6);
  rc = 0;
done:
  dp_free(&dp);
  if (dist) tg_dist_finalize();
  tg_optim_free(opt);
  tg_params_free(params);
  model_free(&m);
  tg_dataset_free(&train);
  tg_dataset_free(&test);
  free(perm);
  tg_collect();
  return rc;
}
