/* matvec.c — decode-time matrix-vector products y = x W^T (x 1 x K, W N x K row-major, as a Linear layer
 * stores it): the heuristic's kernel launched directly (the engine's codegen → render → compile path, no
 * scheduling), next to a plain C loop (gcc -O2, this file) and the same loop with 8 partial sums.
 *
 * Usage: build/bench/matvec [ROUNDS]   (default 7). Sizes N x K: 64x172 (stories260K's w2), 288x768,
 * 2048x2048, 4096x4096. Each round times enough launches for about 20 ms and keeps the time per launch;
 * the table shows the median and the best round, in µs and GFLOP/s (2 N K flops). TG_THREADS sets the pool;
 * MATVEC_SRC=1 prints the kernels' C on stderr; MATVEC_M=2..4 makes x M x K (M rows: flops 2 M N K).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "codegen/codegen.h"
#include "render/render.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "tg.h"

static void *leaf_ptr(uop *u) {
  if (!u->buf && u->op == OP_RESHAPE && u->src[0]->op == OP_BUFFER) u = u->src[0];
  tg_buffer *b = u->buf;
  return b ? b->ptr : NULL;
}

typedef struct kern {
  tg_program *p;
  void *bufs[8];
  int nbufs, nthreads;
  kernel_info info;
} kern;

static bool prepare(tg_tensor *y, float *out, kern *k) {
  const device *dev = device_cpu();
  schedule s;
  if (schedule_create(1, &y->u, &s) != TG_OK) return false;
  bool ok = false;
  char *src = NULL;
  linear_program lp = {0};
  if (s.nkernels != 1 || s.kernels[0].nbufs > 8) goto out;
  sched_kernel *sk = &s.kernels[0];
  memset(&k->info, 0, sizeof k->info);
  uop *opt = codegen_optimize(sk->ast, dev->num_threads(dev), &k->info);
  if (!opt || !linearize(opt, &lp, &k->info) || !(src = render_c(k->info.name, &lp, &k->info))) goto out;
  if (getenv("MATVEC_SRC")) fprintf(stderr, "%s\n", src);  /* MATVEC_SRC=1: the kernels' C */
  if (!(k->p = dev->compile(dev, k->info.name, src))) goto out;
  k->nbufs = sk->nbufs;
  k->nthreads = k->info.threaded ? k->info.nthreads : 1;
  k->bufs[0] = out;
  ok = true;
  for (int j = 1; j < sk->nbufs; j++) ok = ok && (k->bufs[j] = leaf_ptr(sk->bufs[j])) != NULL;
out:
  linear_program_free(&lp);
  free(src);
  schedule_free(&s);
  return ok;
}

static int rows = 1;  /* M, MATVEC_M */

static void plain(float *y, const float *w, const float *x, int n, int kk) {
  for (int r = 0; r < rows; r++)
    for (int i = 0; i < n; i++) {
      float s = 0;
      for (int j = 0; j < kk; j++) s += w[(size_t)i * kk + j] * x[r * kk + j];
      y[r * n + i] = s;
    }
}

/* 8 partial sums: what gcc -O2 can vectorize without reassociating a single sum */
static void plain8(float *y, const float *w, const float *x0, int n, int kk) {
  for (int rr = 0; rr < rows; rr++)
  for (int i = 0; i < n; i++) {
    const float *x = x0 + rr * kk;
    float s[8] = {0};
    const float *r = w + (size_t)i * kk;
    int j = 0;
    for (; j + 8 <= kk; j += 8)
      for (int l = 0; l < 8; l++) s[l] += r[j + l] * x[j + l];
    float t = 0;
    for (; j < kk; j++) t += r[j] * x[j];
    y[rr * n + i] = t + ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  }
}

typedef enum { IMPL_TGC, IMPL_PLAIN, IMPL_PLAIN8 } impl;

/* seconds per call over a round of about 20 ms */
static double round_time(impl m, const kern *k, float *y, const float *w, const float *x, int n, int kk, int reps) {
  double t0 = bench_now_s();
  for (int r = 0; r < reps; r++) {
    if (m == IMPL_TGC) device_cpu()->launch(k->p, (void **)k->bufs, k->nbufs, k->nthreads, NULL);
    else if (m == IMPL_PLAIN) plain(y, w, x, n, kk);
    else plain8(y, w, x, n, kk);
  }
  return (bench_now_s() - t0) / reps;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 7;
  if (rounds < 1 || rounds > 99) rounds = 7;
  if (getenv("MATVEC_M")) rows = atoi(getenv("MATVEC_M"));
  if (rows < 1 || rows > 4) rows = 1;
  static const int sizes[][2] = {{64, 172}, {288, 768}, {2048, 2048}, {4096, 4096}};
  printf("matvec y = x W^T, x %d x K, W N x K row-major; %d rounds, median (best); threads %d; load %.1f\n", rows, rounds,
         device_cpu()->num_threads(device_cpu()), loadavg1());
  printf("%-10s %-44s %22s %22s %22s\n", "N x K", "tgc kernel [opts]", "tgc us (GFLOP/s)", "plain C",
         "plain C 8 sums");
  for (int si = 0; si < 4; si++) {
    int n = sizes[si][0], kk = sizes[si][1];
    float *w = malloc((size_t)n * kk * sizeof *w), *x = malloc((size_t)rows * kk * sizeof *x);
    float *y = malloc((size_t)rows * n * sizeof *y), *ref = malloc((size_t)rows * n * sizeof *ref);
    if (!w || !x || !y || !ref) return 1;
    for (size_t i = 0; i < (size_t)n * kk; i++) w[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (int i = 0; i < rows * kk; i++) x[i] = (float)(i % 17) / 17.0f - 0.5f;
    tg_scope_begin();
    int64_t sw[2] = {n, kk}, sx[2] = {rows, kk};
    tg_tensor *tw = tg_from_data(TG_FLOAT32, 2, sw, w, (size_t)n * kk * sizeof *w);
    tg_tensor *tx = tg_from_data(TG_FLOAT32, 2, sx, x, (size_t)rows * kk * sizeof *x);
    if (tw) tg_realize(tw);
    if (tx) tg_realize(tx);
    tg_tensor *ty = tg_matmul(tx, tg_T(tw));
    kern k = {0};
    if (!ty || !prepare(ty, y, &k)) {
      fprintf(stderr, "matvec %dx%d: %s\n", n, kk, tg_error());
      return 1;
    }
    /* check against the plain loop */
    device_cpu()->launch(k.p, (void **)k.bufs, k.nbufs, k.nthreads, NULL);
    plain(ref, w, x, n, kk);
    for (int i = 0; i < rows * n; i++)
      if (fabsf(y[i] - ref[i]) > 1e-3f * (1 + fabsf(ref[i]))) {
        fprintf(stderr, "matvec %dx%d: y[%d] = %g, plain C %g\n", n, kk, i, y[i], ref[i]);
        return 1;
      }
    double est = round_time(IMPL_PLAIN, &k, ref, w, x, n, kk, 3);
    int reps = (int)(0.02 / (est > 1e-8 ? est : 1e-8));
    if (reps < 3) reps = 3;
    double t[3][99];
    for (int r = 0; r < rounds; r++)
      for (int m = 0; m < 3; m++) t[m][r] = round_time((impl)m, &k, m ? ref : y, w, x, n, kk, reps);
    char label[16], opts[64], col[3][40];
    snprintf(label, sizeof label, "%dx%d", n, kk);
    snprintf(opts, sizeof opts, "%.20s [%.40s]", k.info.name, k.info.opts);
    for (int m = 0; m < 3; m++) {
      double best = t[m][0];
      for (int r = 1; r < rounds; r++) best = t[m][r] < best ? t[m][r] : best;
      double med = median(t[m], rounds);
      snprintf(col[m], sizeof col[m], "%.2f (%.1f) best %.2f", med * 1e6, 2.0 * rows * n * kk / med / 1e9, best * 1e6);
    }
    printf("%-10s %-44s %22s %22s %22s\n", label, opts, col[0], col[1], col[2]);
    program_release(k.p);
    tg_scope_end();
    free(w), free(x), free(y), free(ref);
  }
  return 0;
}
