/* test_chunks.c — a threaded CPU kernel's THREAD loop cut into chunks that the pool's threads take as they
 * come free (cpu.c's chunk_count, threadpool.c's pool_run_split): results equal plain C loops, and are the
 * same bit for bit whatever the chunk count (no reduction is split by chunks), for odd sizes on pools of 1, 2
 * and 3 threads; a THREAD loop shorter than the threads; a matmul whose packed panels (per-thread scratch,
 * indexed by the worker, not the chunk) are filled by many chunks in turn. */
#include <stdatomic.h>
#include <stdlib.h>

#include "run_kernel.h"
#include "test.h"
#include "uop/env.h"

/* the pool restarted with nthreads threads and TG_CHUNKS set to chunks (0: unset) */
static void set_pool(int nthreads, int chunks) {
  pool_shutdown();
  char v[16];
  snprintf(v, sizeof v, "%d", nthreads);
  setenv("TG_THREADS", v, 1);
  if (chunks) {
    snprintf(v, sizeof v, "%d", chunks);
    setenv("TG_CHUNKS", v, 1);
  } else {
    unsetenv("TG_CHUNKS");
  }
  env_reload();
}

static void reset_pool(void) {
  pool_shutdown();
  unsetenv("TG_THREADS");
  unsetenv("TG_CHUNKS");
  env_reload();
}

static bool close_to(const float *got, const double *want, int64_t n, double tol, int64_t *bad) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - want[i]) <= tol + tol * fabs(want[i]))) {
      *bad = i;
      return false;
    }
  return true;
}

enum { K_MATMUL, K_MATVEC, K_ROWSUM, K_FMA, K_COUNT };
#define MM_M 45
#define MM_K 129
#define MM_N 192
#define MV_N 1031
#define MV_K 257
#define RS_R 517
#define RS_C 301
#define FMA_N 100003

TEST(test_chunks_results_match_plain_c_for_every_thread_and_chunk_count) {
  REQUIRE_CPU();
  tg_scope_begin();
  float *a = rand_data(MM_M * MM_K), *b = rand_data(MM_K * MM_N), *w = rand_data(MV_N * MV_K), *x = rand_data(MV_K),
        *r = rand_data(RS_R * RS_C), *p = rand_data(FMA_N), *q = rand_data(FMA_N), *c = rand_data(FMA_N);
  static const int64_t nout[K_COUNT] = {MM_M * MM_N, MV_N, RS_R, FMA_N};
  double *want[K_COUNT];
  float *got[K_COUNT], *first[K_COUNT];
  for (int k = 0; k < K_COUNT; k++) {
    want[k] = malloc((size_t)nout[k] * sizeof(double));
    got[k] = malloc((size_t)nout[k] * sizeof(float));
    first[k] = malloc((size_t)nout[k] * sizeof(float));
  }
  bool have = a && b && w && x && r && p && q && c;
  for (int k = 0; k < K_COUNT; k++) have = have && want[k] && got[k] && first[k];
  CHECK(have, "allocation failed");
  if (have) {
    /* the references, in double */
    for (int i = 0; i < MM_M; i++)
      for (int j = 0; j < MM_N; j++) {
        double s = 0;
        for (int l = 0; l < MM_K; l++) s += (double)a[i * MM_K + l] * b[l * MM_N + j];
        want[K_MATMUL][i * MM_N + j] = s;
      }
    for (int i = 0; i < MV_N; i++) {
      double s = 0;
      for (int l = 0; l < MV_K; l++) s += (double)w[i * MV_K + l] * x[l];
      want[K_MATVEC][i] = s;
    }
    for (int i = 0; i < RS_R; i++) {
      double s = 0;
      for (int l = 0; l < RS_C; l++) s += r[i * RS_C + l];
      want[K_ROWSUM][i] = s;
    }
    for (int i = 0; i < FMA_N; i++) want[K_FMA][i] = (double)p[i] * q[i] + c[i];

    int64_t sa[2] = {MM_M, MM_K}, sb[2] = {MM_K, MM_N}, sw[2] = {MV_N, MV_K}, sx[2] = {MV_K, 1}, sr[2] = {RS_R, RS_C},
            sp[1] = {FMA_N};
    int ax1 = 1;
    tg_tensor *y[K_COUNT] = {
        tg_matmul(tensor_of(a, 2, sa), tensor_of(b, 2, sb)),
        tg_matmul(tensor_of(w, 2, sw), tensor_of(x, 2, sx)),
        tg_sum(tensor_of(r, 2, sr), 1, &ax1, false),
        tg_add(tg_mul(tensor_of(p, 1, sp), tensor_of(q, 1, sp)), tensor_of(c, 1, sp)),
    };
    static const int threads[] = {1, 2, 3}, chunks[] = {0, 1, 3, 7, 64};
    for (int ti = 0; ti < 3; ti++)
      for (int ci = 0; ci < 5; ci++) {
        set_pool(threads[ti], chunks[ci]);
        for (int k = 0; k < K_COUNT; k++) {
          char opts[300];
          CHECK_T(y[k]);
          if (!y[k]) continue;
          bool ok = run_kernel(y[k], threads[ti], -1, 0, 0, got[k], (size_t)nout[k] * sizeof(float), opts, sizeof opts);
          CHECK(ok, "%s on %d threads, TG_CHUNKS=%d: %s", opts, threads[ti], chunks[ci], tg_error());
          if (!ok) continue;
          int64_t bad = 0;
          CHECK(close_to(got[k], want[k], nout[k], 1e-4, &bad), "%s on %d threads, TG_CHUNKS=%d: [%lld] %.9g want %.9g",
                opts, threads[ti], chunks[ci], (long long)bad, got[k][bad], want[k][bad]);
          if (threads[ti] > 1) CHECK(strstr(opts, "THREAD"), "%s: not threaded on %d threads", opts, threads[ti]);
          if (k == K_MATMUL) CHECK(strstr(opts, "PACK"), "%s: no packed panel (the scratch path)", opts);
          /* the same bits whatever the chunks */
          if (ci == 0) memcpy(first[k], got[k], (size_t)nout[k] * sizeof(float));
          else
            CHECK(!memcmp(first[k], got[k], (size_t)nout[k] * sizeof(float)),
                  "%s on %d threads: TG_CHUNKS=%d changed the result", opts, threads[ti], chunks[ci]);
        }
      }
    reset_pool();
  }
  for (int k = 0; k < K_COUNT; k++) free(want[k]), free(got[k]), free(first[k]);
  free(a), free(b), free(w), free(x), free(r), free(p), free(q), free(c);
  tg_scope_end();
}

/* THREAD on a loop of 2 iterations, launched on 3 threads in up to 3 x 8 chunks: one chunk per iteration */
TEST(test_chunks_thread_loop_shorter_than_the_threads) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { R = 2, C = 40001 };
  float *d = rand_data(R * C), *got = malloc(R * C * sizeof *got);
  CHECK(d && got, "allocation failed");
  if (d && got) {
    int64_t s[2] = {R, C};
    tg_tensor *y = tg_add(tg_mul_scalar(tensor_of(d, 2, s), 3.0f), tensor_of(d, 2, s));
    CHECK_T(y);
    for (int chunks = 0; chunks <= 8 && y; chunks += 8) {
      set_pool(3, chunks);
      char opts[300];
      bool ok = run_kernel(y, 3, 0, 2, 3, got, R * C * sizeof *got, opts, sizeof opts);
      CHECK(ok && strstr(opts, "THREAD"), "%s: %s", opts, tg_error());
      for (int i = 0; ok && i < R * C; i++)
        if (got[i] != d[i] * 3.0f + d[i]) {
          CHECK(false, "%s TG_CHUNKS=%d: [%d] %g want %g", opts, chunks, i, got[i], d[i] * 3.0f + d[i]);
          break;
        }
    }
    reset_pool();
  }
  free(d), free(got);
  tg_scope_end();
}

/* pool_run_split: every id exactly once, on no more threads than asked, from the workers' own ids */
#define SPLIT_IDS 50
static atomic_int seen[SPLIT_IDS], bad_worker;
static void split_task(void *ctx, int64_t id, int64_t n) {
  int lim = *(int *)ctx;
  if (id >= 0 && id < n && n == SPLIT_IDS) atomic_fetch_add(&seen[id], 1);
  if (pool_worker() < 0 || pool_worker() >= lim) atomic_fetch_add(&bad_worker, 1);
}

TEST(test_chunks_pool_run_split_runs_every_id_once_on_its_threads) {
  REQUIRE_CPU();
  for (int lim = 1; lim <= 3; lim++) {
    set_pool(3, 0);
    for (int i = 0; i < SPLIT_IDS; i++) atomic_store(&seen[i], 0);
    atomic_store(&bad_worker, 0);
    pool_run_split(split_task, &lim, SPLIT_IDS, lim);
    for (int i = 0; i < SPLIT_IDS; i++) CHECK(atomic_load(&seen[i]) == 1, "id %d ran %d times", i, atomic_load(&seen[i]));
    CHECK(atomic_load(&bad_worker) == 0, "%d ids ran on a worker beyond %d threads", atomic_load(&bad_worker), lim);
  }
  reset_pool();
}
