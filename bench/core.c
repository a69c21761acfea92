/* core.c — the core benchmark: tgc next to the machine's own limits and next to numpy, in one run.
 *
 *   1. machine limits (limits.h): peak FMA rate and STREAM triad a[i] = b[i] + s*c[i] on 1 and all threads
 *      (best of several runs), the cost of a first touch of a page (4 KiB pages and MADV_HUGEPAGE), and a
 *      core-to-core round trip
 *   2. elementwise y = relu(a*b + c) * 0.5 over 2^24 float32      (GB/s, 16 bytes per element)
 *   3. sum over the last axis of a 4096x4096 float32               (GB/s)
 *   4. matmul 1024x1024 float32                                    (GFLOP/s, 2 N^3 flops), numpy via peers.py
 *   5. compile time per kernel: cold (a fresh TG_CACHE, set before any tgc call and removed at exit) and from
 *      the disk cache (after dropping the in-memory caches), each path confirmed by tg_get_stats()
 *   6. launch overhead: pool_run of an empty task, and realizing a tiny already-compiled graph
 *
 * Usage: build/bench/core [--json]. --json prints one JSON line per (workload, implementation) instead of
 * the table. numpy runs as `python3 bench/peers.py` (PYTHON=... picks another interpreter); without numpy
 * its rows are skipped. Runs in about 10-20 s on a 2-core machine.
 *
 * How tgc is timed. UOps are interned and a realized node keeps its buffer, so building the same graph on the
 * same input tensors again realizes nothing (0 kernels). Each timed iteration therefore wraps the input
 * arrays in fresh tensors (tg_from_blob: no copy), builds the graph and realizes it: "e2e" is that whole
 * cost (graph build + schedule + kernel-cache lookup + output buffer + launch), reported as the median.
 * Freed tensors release their buffers only when the IR collector runs (uop_gc_maybe runs it once the bytes
 * made outweigh the nodes to sweep), so after each iteration the benchmark calls uop_gc() itself, outside the
 * timed region: the collection's cost stays out of the timing and every iteration reuses the last output's
 * block instead of paying page faults on a fresh one. "kernel" is the compiled kernel alone,
 * launched directly on the device (the program the engine uses, found through the same codegen → render →
 * compile path, answered by the in-memory program cache) on pre-touched buffers, reported as the best run
 * (a capability, like the triad's best). e2e and direct launches alternate, so that the noise of a shared
 * machine (single runs here vary 2x) hits both alike. Medians are compared with medians, bests with bests.
 * Byte counts are the arrays a kernel must read and write, without write-allocate traffic (the triad:
 * 3 arrays x 4 bytes per element, so both sides of a ratio count the same way).
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "limits.h"
#include "tg.h"
#include "codegen/codegen.h"
#include "render/render.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"

#define EW_N ((int64_t)1 << 24)
#define SUM_N 4096
#define MM_N 1024
#define NCOMPILE 5
#define POOL_ITERS 100000
#define TINY_ITERS 20000


/* ---- output ---------------------------------------------------------------------------------------------- */

static void json_line(const char *workload, const char *impl, double value, const char *unit, int threads) {
  if (!json_mode) return;
  if (isfinite(value))
    printf("{\"workload\": \"%s\", \"impl\": \"%s\", \"value\": %.6g, \"unit\": \"%s\", \"threads\": %d}\n",
           workload, impl, value, unit, threads);
  else
    printf("{\"workload\": \"%s\", \"impl\": \"%s\", \"value\": null, \"unit\": \"%s\", \"threads\": %d}\n",
           workload, impl, unit, threads);
  fflush(stdout);
}

static void fmt_num(char *b, size_t n, double v) {
  if (!isfinite(v)) snprintf(b, n, "n/a");
  else if (v >= 100) snprintf(b, n, "%.0f", v);
  else if (v >= 10) snprintf(b, n, "%.1f", v);
  else if (v >= 1) snprintf(b, n, "%.2f", v);
  else snprintf(b, n, "%.3f", v);
}

/* one table row: tgc value (NAN: "-"), the peer or limit with its label (NULL: none), ratio tgc/peer */
static void row(const char *workload, double tgc, const char *peer_label, double peer) {
  if (json_mode) return;
  char t[32] = "-", p[64] = "", pv[32], r[32] = "";
  if (isfinite(tgc)) fmt_num(t, sizeof t, tgc);
  if (peer_label) {
    fmt_num(pv, sizeof pv, peer);
    snprintf(p, sizeof p, "%s%s%s", peer_label, *peer_label ? " " : "", pv);
  }
  if (isfinite(tgc) && peer_label && isfinite(peer) && peer > 0) snprintf(r, sizeof r, "%.3gx", tgc / peer);
  printf("%-42s %-10s %-20s %s\n", workload, t, p, r);
  fflush(stdout);
}

/* a reproducible pseudo-random float in [-1, 1) for element i */
static float val(uint64_t i, uint64_t seed) {
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return (float)((double)(h >> 40) / (double)(1ull << 23) - 1.0);
}

static void fill(float *p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) p[i] = val(i, seed);
}

/* ---- 1. machine limits: core-to-core round trip (the floor under a thread-pool launch) ------------------------ */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPIN_PAUSE() _mm_pause()
#else
#define SPIN_PAUSE() ((void)0)
#endif

#define PING_BATCH 10000
#define PING_BATCHES 10
static _Alignas(64) atomic_int ping_word;
static _Alignas(64) atomic_int pong_word;

static void *pong_thread(void *arg) {
  (void)arg;
  for (int i = 1; i <= PING_BATCH * PING_BATCHES; i++) {
    while (atomic_load_explicit(&ping_word, memory_order_acquire) != i) SPIN_PAUSE();
    atomic_store_explicit(&pong_word, i, memory_order_release);
  }
  return NULL;
}

/* µs for one thread to see a store of another and answer it, both spinning: the best batch mean of
 * PING_BATCHES x PING_BATCH round trips (a vCPU of this VM is sometimes descheduled for a while) */
static double ping_pong_us(void) {
  double best = INFINITY;
  atomic_store(&ping_word, 0);
  atomic_store(&pong_word, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, pong_thread, NULL) != 0) return NAN;
  for (int b = 0, i = 1; b < PING_BATCHES; b++) {
    double t0 = bench_now_s();
    for (int k = 0; k < PING_BATCH; k++, i++) {
      atomic_store_explicit(&ping_word, i, memory_order_release);
      while (atomic_load_explicit(&pong_word, memory_order_acquire) != i) SPIN_PAUSE();
    }
    double us = (bench_now_s() - t0) / PING_BATCH * 1e6;
    best = us < best ? us : best;
  }
  pthread_join(t, NULL);
  return best;
}

typedef struct machine {
  int ncpu;
  double triad1, triadN, touch_huge_us, touch_4k_us, pingpong_us, fma1, fmaN;
  const char *fma_isa;
  int triad_runs;       /* all-thread triad runs behind triadN */
  triad_ctx *x;         /* the triad arrays while mapped */
  region r[3];
} machine;

/* maps the triad arrays (first touched and filled by the threads at the first triad_run) */
static bool triad_setup(machine *m) {
  if (m->x) return true;
  m->x = calloc(1, sizeof *m->x);
  if (!m->x || !triad_map(m->x, m->r, TRIAD_N)) {
    fprintf(stderr, "core: cannot map 3 x %zu MiB for the triad\n", TRIAD_N * 4 >> 20);
    free(m->x);
    m->x = NULL;
    return false;
  }
  return true;
}

static void triad_free(machine *m) {
  if (m->x)
    for (int i = 0; i < 3; i++) region_unmap(&m->r[i]);
  free(m->x);
  m->x = NULL;
}

/* the all-thread triad, best of reps, folded into triadN: the limit is the best seen in the whole run, since
 * this shared machine's bandwidth drifts by 2x within seconds, so it runs again between the workloads */
static void triad_again(machine *m, int reps) {
  if (!triad_setup(m)) return;
  double v = triad_run(m->x, m->ncpu, reps);
  if (v > m->triadN || isnan(m->triadN)) m->triadN = v;
  m->triad_runs += reps;
}

static machine measure_machine(void) {
  machine m = {0};
  m.ncpu = limit_cpus();
  m.triad1 = m.triadN = m.touch_huge_us = m.touch_4k_us = m.pingpong_us = NAN;
  m.fma1 = fma_peak_gflops(1, 5, &m.fma_isa);
  m.fmaN = fma_peak_gflops(m.ncpu, 5, &m.fma_isa);
  triad_again(&m, 10);
  if (m.x) m.triad1 = triad_run(m.x, 1, 5);
  triad_free(&m);
  /* first touch, one thread, 128 MiB, huge pages asked for or refused, alternating, best of 2 each. After
   * the triad returned its memory, so that both kinds get pages the VM has backed already (memory the VM
   * touches for the first time also pays the hypervisor: 12-30 µs per 4 KiB, seen while writing this) */
  size_t nt = (size_t)32 << 20;
  double pages = (double)(nt * sizeof(float)) / 4096;
  for (int r = 0; r < 4; r++) {
    region rt;
    bool huge = r % 2 == 0;
    if (!region_map(&rt, nt, huge)) break;
    double us = touch_pages(rt.p, nt * sizeof(float)) / pages * 1e6;
    double *dst = huge ? &m.touch_huge_us : &m.touch_4k_us;
    if (!(*dst <= us)) *dst = us;  /* NAN-aware minimum */
    region_unmap(&rt);
  }
  if (m.ncpu > 1) m.pingpong_us = ping_pong_us();
  return m;
}

/* the host pointer of a schedule leaf (a node with storage), or NULL */
static void *leaf_ptr(uop *u) {
  if (!u->buf && u->op == OP_RESHAPE && u->src[0]->op == OP_BUFFER) u = u->src[0];
  tg_buffer *b = u->buf;
  return b ? b->ptr : NULL;
}

/* The compiled kernel of a graph, to be launched directly: the program the engine runs, found through the
 * engine's own path (realize.c get_kernel): schedule → codegen_optimize → linearize → render_c → device
 * compile, which the in-memory program cache answers once the engine has run the kernel. */
typedef struct direct {
  tg_program *p;
  void *bufs[32];
  int nbufs, nthreads;
} direct;

/* prepares the one kernel that realizing y would run, with its output in out; false (with a message) if any
 * step is not as expected */
static bool direct_prepare(tg_tensor *y, float *out, direct *d) {
  memset(d, 0, sizeof *d);
  const device *dev = device_default();
  schedule s;
  if (!dev || schedule_create(1, &y->u, &s) != TG_OK) {
    fprintf(stderr, "core: kernel-only: schedule failed: %s\n", tg_error());
    return false;
  }
  bool ok = false;
  char *src = NULL;
  if (s.nkernels != 1 || s.kernels[0].nbufs > 32) {
    fprintf(stderr, "core: kernel-only: expected 1 kernel, the schedule has %d\n", s.nkernels);
    goto out;
  }
  sched_kernel *k = &s.kernels[0];
  kernel_info info;
  memset(&info, 0, sizeof info);
  linear_program lp = {0};
  uop *opt = codegen_optimize(k->ast, dev->num_threads(dev), &info);
  if (!opt || !linearize(opt, &lp, &info)) goto fail;
  src = render_c(info.name, &lp, &info);
  linear_program_free(&lp);
  if (!src) goto fail;
  uint64_t compiles0 = runtime_get_counters().compiles;
  d->p = dev->compile(dev, info.name, src);
  if (!d->p) goto fail;
  if (runtime_get_counters().compiles != compiles0)
    fprintf(stderr, "core: kernel-only: note: %s was compiled again (not the engine's program)\n", info.name);
  d->nbufs = k->nbufs;
  d->nthreads = info.threaded ? 0 : 1;
  d->bufs[0] = out;
  for (int j = 1; j < k->nbufs; j++)
    if (!(d->bufs[j] = leaf_ptr(k->bufs[j]))) {
      fprintf(stderr, "core: kernel-only: input %d of %s has no storage\n", j, info.name);
      goto out;
    }
  ok = true;
  goto out;
fail:
  fprintf(stderr, "core: kernel-only: %s\n", tg_error());
out:
  if (!ok) {
    program_release(d->p);
    d->p = NULL;
  }
  free(src);
  schedule_free(&s);
  return ok;
}

/* seconds for one direct launch; NAN on failure */
static double direct_launch(const direct *d) {
  const device *dev = device_default();
  double t0 = bench_now_s();
  if (dev->launch(d->p, (void **)d->bufs, d->nbufs, d->nthreads, NULL) != TG_OK) return NAN;
  return bench_now_s() - t0;
}

/* builds a graph of fresh tensors over the inputs (see the top of the file) */
typedef tg_tensor *(*graph_fn)(float **in);

typedef struct timing { double e2e_med, kern_best; bool ok; } timing;

/* warm realizes (the first compiles), then iters rounds of one timed e2e realize and one timed direct
 * launch of its kernel, interleaved so that the noise of a shared machine hits both alike. Checks one
 * kernel per realize, and both outputs (e2e into out, direct into kout) against check(). */
static timing time_graph(const char *name, graph_fn build, float **in, float *out, float *kout, size_t out_n,
                         int warm, int iters, bool (*check)(const float *out, float **in)) {
  timing r = {NAN, NAN, false};
  double te[256] = {0}, tk[256] = {0};
  if (iters > 256) iters = 256;
  direct d = {0};
  bool have_direct = false;
  int wrong_count = 0;
  uint64_t wrong_kernels = 0;
  for (int i = 0; i < warm + iters; i++) {
    if (i == warm) { /* the kernel is compiled now */
      tg_scope_begin();
      tg_tensor *y = build(in);
      have_direct = y && direct_prepare(y, kout, &d);
      tg_scope_end();
      uop_gc();
    }
    tg_scope_begin();
    double t0 = bench_now_s();
    tg_tensor *y = build(in);
    if (!y) die_tg(name);
    if (tg_realize(y) != TG_OK) die_tg(name);
    double dt = bench_now_s() - t0;
    if (tg_kernel_count_last() != 1) wrong_count++, wrong_kernels = tg_kernel_count_last();
    if (i >= warm) te[i - warm] = dt;
    if (i == warm + iters - 1) {
      if (tg_to_host(y, out, out_n * sizeof(float)) != TG_OK) die_tg("tg_to_host");
      r.ok = check(out, in);
    }
    tg_scope_end();
    uop_gc();  /* frees the last output now, so the next iteration reuses its block (see the top) */
    if (i >= warm) tk[i - warm] = have_direct ? direct_launch(&d) : NAN;
  }
  if (wrong_count)
    fprintf(stderr, "core: %s: %d realizes ran %llu kernels, not 1 (kernel-only timing needs 1)\n", name,
            wrong_count, (unsigned long long)wrong_kernels);
  r.e2e_med = median(te, iters);
  if (have_direct) {
    r.kern_best = minimum(tk, iters);
    if (!isfinite(r.kern_best) || r.kern_best <= 0) r.kern_best = NAN;
    if (!check(kout, in)) {
      fprintf(stderr, "core: %s: the kernel launched directly gave wrong values\n", name);
      r.kern_best = NAN;
    }
    program_release(d.p);
  }
  return r;
}

static bool close_to(double got, double want, double rtol, double atol) {
  return fabs(got - want) <= atol + rtol * fabs(want);
}

/* ---- 2. elementwise -------------------------------------------------------------------------------------- */

static tg_tensor *ew_graph(float **in) {
  int64_t sh[1] = {EW_N};
  tg_tensor *a = wrap(in[0], 1, sh), *b = wrap(in[1], 1, sh), *c = wrap(in[2], 1, sh);
  return tg_mul_scalar(tg_relu(tg_add(tg_mul(a, b), c)), 0.5);
}

static bool ew_check(const float *out, float **in) {
  for (int64_t i = 0; i < EW_N; i += 9973) {
    double v = (double)in[0][i] * in[1][i] + in[2][i];
    double want = (v > 0 ? v : 0) * 0.5;
    if (!close_to(out[i], want, 1e-5, 1e-6)) {
      fprintf(stderr, "core: elementwise: y[%lld] = %.8g, expected %.8g\n", (long long)i, out[i], want);
      return false;
    }
  }
  return true;
}

/* ---- 3. sum over the last axis ---------------------------------------------------------------------------- */

static tg_tensor *sum_graph(float **in) {
  int64_t sh[2] = {SUM_N, SUM_N};
  int ax = -1;
  return tg_sum(wrap(in[0], 2, sh), 1, &ax, false);
}

static bool sum_check(const float *out, float **in) {
  for (int r = 0; r < SUM_N; r += 511) {
    double want = 0;
    for (int j = 0; j < SUM_N; j++) want += in[0][(size_t)r * SUM_N + j];
    if (!close_to(out[r], want, 1e-4, 1e-3)) {
      fprintf(stderr, "core: sum: row %d = %.8g, expected %.8g\n", r, out[r], want);
      return false;
    }
  }
  return true;
}

/* ---- 4. matmul ------------------------------------------------------------------------------------------- */

static tg_tensor *mm_graph(float **in) {
  int64_t sh[2] = {MM_N, MM_N};
  return tg_matmul(wrap(in[0], 2, sh), wrap(in[1], 2, sh));
}

static bool mm_check(const float *out, float **in) {
  for (int i = 0; i < MM_N; i += 241)
    for (int j = 0; j < MM_N; j += 263) {
      double want = 0;
      for (int k = 0; k < MM_N; k++) want += (double)in[0][(size_t)i * MM_N + k] * in[1][(size_t)k * MM_N + j];
      if (!close_to(out[(size_t)i * MM_N + j], want, 1e-3, 1e-3)) {
        fprintf(stderr, "core: matmul: c[%d][%d] = %.8g, expected %.8g\n", i, j, out[(size_t)i * MM_N + j], want);
        return false;
      }
    }
  return true;
}

/* ---- 5. compile time --------------------------------------------------------------------------------------- */

static int64_t compile_n;  /* the size of the next compile-time kernel */

static tg_tensor *compile_graph(float **in) {
  int64_t sh[1] = {compile_n};
  tg_tensor *a = wrap(in[0], 1, sh), *b = wrap(in[1], 1, sh);
  return tg_sqrt(tg_add_scalar(tg_mul(tg_exp(a), tg_abs(b)), 1.0));
}

typedef struct compile_times { double cold_ms, disk_ms; int cold_ok, disk_ok; } compile_times;

/* realizes compile_graph once for each of NCOMPILE sizes never used before, timing it, and checks with the
 * engine's counters which path ran; want_disk: the disk cache, else the compiler */
static double compile_pass(float **in, bool want_disk, int *ok) {
  double ms[NCOMPILE];
  *ok = 0;
  for (int k = 0; k < NCOMPILE; k++) {
    compile_n = 4093 + 16 * k;
    tg_scope_begin();
    tg_stats s0 = tg_get_stats();
    double t0 = bench_now_s();
    tg_tensor *y = compile_graph(in);
    if (!y || tg_realize(y) != TG_OK) die_tg("compile kernel");
    ms[k] = (bench_now_s() - t0) * 1e3;
    tg_stats s1 = tg_get_stats();
    uint64_t dc = s1.kernels_compiled - s0.kernels_compiled, dd = s1.disk_cache_hits - s0.disk_cache_hits;
    if (want_disk ? (dc == 0 && dd == 1) : (dc == 1 && dd == 0)) (*ok)++;
    else
      fprintf(stderr, "core: compile %s kernel %d: kernels_compiled +%llu, disk_cache_hits +%llu\n",
              want_disk ? "disk" : "cold", k, (unsigned long long)dc, (unsigned long long)dd);
    tg_scope_end();
    uop_gc();
  }
  return median(ms, NCOMPILE);
}

static compile_times measure_compile(void) {
  compile_times c;
  float *a = malloc(8192 * sizeof *a), *b = malloc(8192 * sizeof *b);
  if (!a || !b) exit(1);
  fill(a, 8192, 11), fill(b, 8192, 12);
  float *in[2] = {a, b};
  c.cold_ms = compile_pass(in, false, &c.cold_ok);
  /* drop both in-memory caches: the engine's (tg_collect) and the CPU device's program cache */
  tg_collect();
  cpu_program_cache_clear();
  c.disk_ms = compile_pass(in, true, &c.disk_ok);
  free(a), free(b);
  return c;
}

/* ---- 6. launch overhead ---------------------------------------------------------------------------------- */

static void empty_task(void *ctx, int64_t core_id, int64_t ncores) { (void)ctx, (void)core_id, (void)ncores; }

/* µs per pool_run of an empty task on all threads: POOL_ITERS launches in 10 batches, the best batch mean
 * (the round trip it is compared with is measured the same way) */
static double pool_launch_us(void) {
  for (int i = 0; i < 1000; i++) pool_run(empty_task, NULL, 0);
  double best = INFINITY;
  for (int b = 0; b < 10; b++) {
    double t0 = bench_now_s();
    for (int i = 0; i < POOL_ITERS / 10; i++) pool_run(empty_task, NULL, 0);
    double us = (bench_now_s() - t0) / (POOL_ITERS / 10) * 1e6;
    best = us < best ? us : best;
  }
  return best;
}

/* mean µs per realize of a 16-element add on fresh input tensors (so it is not memoized), its kernel compiled
 * already: every cost a user pays per realize, the collector's amortized share included */
static double tiny_realize_us(bool *ok) {
  float a[16], b[16], y[16];
  fill(a, 16, 21), fill(b, 16, 22);
  int64_t sh[1] = {16};
  uint64_t run0 = 0;
  double t0 = 0;
  for (int i = 0; i < 100 + TINY_ITERS; i++) {
    if (i == 100) {
      run0 = tg_get_stats().kernels_run;
      t0 = bench_now_s();
    }
    tg_scope_begin();
    tg_tensor *s = tg_add(wrap(a, 1, sh), wrap(b, 1, sh));
    if (!s || tg_realize(s) != TG_OK) die_tg("tiny realize");
    if (i == 0 && tg_to_host(s, y, sizeof y) != TG_OK) die_tg("tiny to_host");
    tg_scope_end();
  }
  double us = (bench_now_s() - t0) / TINY_ITERS * 1e6;
  *ok = tg_get_stats().kernels_run - run0 == TINY_ITERS;
  for (int i = 0; i < 16; i++) *ok = *ok && y[i] == a[i] + b[i];
  return us;
}

/* ---- numpy (bench/peers.py) ------------------------------------------------------------------------------- */

typedef struct peers {
  bool ran, have_numpy;
  char version[32];
  int threads;
  double mm, ew, sum;             /* medians */
  double mm_best, ew_best, sum_best;
} peers;

static peers run_peers(void) {
  peers p = {.threads = -1, .mm = NAN, .ew = NAN, .sum = NAN, .mm_best = NAN, .ew_best = NAN, .sum_best = NAN};
  char path[4200], line[4096] = "";
  FILE *f = bench_run_script("peers.py", NULL, true, path, sizeof path);
  if (!f) return p;
  char buf[4096];
  while (fgets(buf, sizeof buf, f))
    if (buf[0] == '{') snprintf(line, sizeof line, "%s", buf);
  pclose(f);
  if (!line[0]) return p;
  p.ran = true;
  p.have_numpy = strstr(line, "\"numpy\": true") != NULL;
  const char *v = strstr(line, "\"version\": \"");
  if (v) {
    v += strlen("\"version\": \"");
    size_t k = strcspn(v, "\"");
    snprintf(p.version, sizeof p.version, "%.*s", (int)(k < 31 ? k : 31), v);
  }
  double t = json_num(line, "threads");
  p.threads = isfinite(t) ? (int)t : -1;
  p.mm = json_num(line, "matmul_1024_gflops");
  p.ew = json_num(line, "elementwise_16M_gbs");
  p.sum = json_num(line, "sum_4096_gbs");
  p.mm_best = json_num(line, "matmul_1024_gflops_best");
  p.ew_best = json_num(line, "elementwise_16M_gbs_best");
  p.sum_best = json_num(line, "sum_4096_gbs_best");
  return p;
}

/* ---- the cache directory ------------------------------------------------------------------------------------ */

static char cache_dir[64];

static void remove_cache_dir(void) {
  if (!cache_dir[0]) return;
  DIR *d = opendir(cache_dir);
  if (d) {
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(cache_dir);
}

/* the 1-minute load average, NAN if unknown: other processes running during the benchmark skew it */
/* ---- main ------------------------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
  args_prog = "core";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json_mode = true;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: core [--json]\n"
             "tgc next to the machine's limits (FMA peak, STREAM triad) and numpy: elementwise, sum, matmul,\n"
             "compile time and launch overhead, in a table.\n"
             "  --json      one JSON line per (workload, implementation) on stdout instead of the table\n"
             "  -h, --help  this help\n");
      return 0;
    } else {
      args_unknown(argv[i]);
      return ARGS_EXIT;
    }
  }
  /* a fresh compile cache before any tgc call, so section 5 sees a cold cache (and we leave nothing behind) */
  const char *tmp = getenv("TMPDIR");
  snprintf(cache_dir, sizeof cache_dir, "%s/tgc-bench-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
  if (!mkdtemp(cache_dir)) {
    perror("core: mkdtemp");
    return 1;
  }
  atexit(remove_cache_dir);
  setenv("TG_CACHE", cache_dir, 1);
  double t_start = bench_now_s(), load_start = loadavg1();

  /* 1. machine limits, before tgc starts its thread pool */
  machine m = measure_machine();
  int nt = tg_num_threads();
  note("tgc core benchmark: %d CPUs, tgc pool %d threads, triad %d threads; TG_CACHE=%s (fresh)\n", m.ncpu, nt,
       m.ncpu, cache_dir);
  note("GB/s = 1e9 B/s of the arrays read + written, write-allocate not counted (triad 12 B/elem, elementwise 16;\n"
       "with it 16 and 20, so at equal memory traffic elementwise shows 16/20 / (12/16) = 1.07x the triad);\n"
       "the triad limit is the best all-thread run, repeated between the tgc workloads (bandwidth drifts here);\n"
       "tgc e2e = median of fresh-graph build + tg_realize; kernel = best direct launch of its compiled kernel;\n"
       "medians are compared with medians, bests with bests; for times (ms, us) lower is better\n\n");

  /* inputs: our own pre-touched huge-page memory, wrapped without copies */
  region rin[3], rout, rkout;
  for (int i = 0; i < 3; i++)
    if (!region_map(&rin[i], (size_t)EW_N, true)) return 1;
  if (!region_map(&rout, (size_t)EW_N, true) || !region_map(&rkout, (size_t)EW_N, true)) return 1;
  float *in[3] = {rin[0].p, rin[1].p, rin[2].p}, *out = rout.p, *kout = rkout.p;
  for (int i = 0; i < 3; i++) fill(in[i], (size_t)EW_N, (uint64_t)i + 1);
  memset(out, 0, (size_t)EW_N * sizeof(float));
  memset(kout, 0, (size_t)EW_N * sizeof(float));

  /* 2. elementwise; the triad runs again around each memory-bound workload */
  triad_again(&m, 3);
  timing ew = time_graph("elementwise", ew_graph, in, out, kout, (size_t)EW_N, 2, 30, ew_check);
  double ew_bytes = 16.0 * (double)EW_N;
  double ew_e2e = ew.ok ? ew_bytes / ew.e2e_med / 1e9 : NAN, ew_k = ew.ok ? ew_bytes / ew.kern_best / 1e9 : NAN;

  /* 3. sum (the first 4096^2 floats of the elementwise input a) */
  triad_again(&m, 3);
  timing sm = time_graph("sum", sum_graph, in, out, kout, SUM_N, 2, 30, sum_check);
  double sum_bytes = 4.0 * ((double)SUM_N * SUM_N + SUM_N);
  double sum_e2e = sm.ok ? sum_bytes / sm.e2e_med / 1e9 : NAN, sum_k = sm.ok ? sum_bytes / sm.kern_best / 1e9 : NAN;

  triad_again(&m, 3);
  triad_free(&m);

  /* 4. matmul (a and b, 1024^2 each, from the start of the elementwise inputs) */
  timing mm = time_graph("matmul", mm_graph, in, out, kout, (size_t)MM_N * MM_N, 1, 7, mm_check);
  double mm_flops = 2.0 * MM_N * MM_N * MM_N;
  double mm_e2e = mm.ok ? mm_flops / mm.e2e_med / 1e9 : NAN, mm_k = mm.ok ? mm_flops / mm.kern_best / 1e9 : NAN;

  for (int i = 0; i < 3; i++) region_unmap(&rin[i]);
  region_unmap(&rout), region_unmap(&rkout);

  /* 5. compile time */
  compile_times ct = measure_compile();

  /* 6. launch overhead */
  double pool_us = pool_launch_us();
  if (m.ncpu > 1) { /* the round trip again, next to the pool: keep the best of both */
    double rt = ping_pong_us();
    if (rt < m.pingpong_us || isnan(m.pingpong_us)) m.pingpong_us = rt;
  }
  bool tiny_ok;
  double tiny_us = tiny_realize_us(&tiny_ok);

  /* numpy, in a subprocess, after tgc's work (tgc's pool workers sleep by then) */
  peers np = run_peers();
  char np_label[48];
  snprintf(np_label, sizeof np_label, "numpy");

  char triad_label[64];
  snprintf(triad_label, sizeof triad_label, "triad all threads, best of %d (GB/s)", m.triad_runs);
  note("%-42s %-10s %-20s %s\n", "workload", "tgc", "peer/limit", "ratio");
  char fma1_label[64], fmaN_label[64];
  snprintf(fma1_label, sizeof fma1_label, "%s 1 thread, best (GFLOP/s)", m.fma_isa);
  snprintf(fmaN_label, sizeof fmaN_label, "%s all threads, best (GFLOP/s)", m.fma_isa);
  row(fma1_label, NAN, "", m.fma1);
  row(fmaN_label, NAN, "", m.fmaN);
  row("triad 1 thread, best of 5 (GB/s)", NAN, "", m.triad1);
  row(triad_label, NAN, "", m.triadN);
  row("first touch, THP madvise (us/4KiB)", NAN, "", m.touch_huge_us);
  row("first touch, 4 KiB pages (us/4KiB)", NAN, "", m.touch_4k_us);
  row("core-to-core round trip, best batch (us)", NAN, "", m.pingpong_us);
  json_line("fma_peak", "c_intrinsics", m.fma1, "GFLOP/s", 1);
  json_line("fma_peak", "c_intrinsics", m.fmaN, "GFLOP/s", m.ncpu);
  json_line("triad", "c_pthreads", m.triad1, "GB/s", 1);
  json_line("triad", "c_pthreads", m.triadN, "GB/s", m.ncpu);
  json_line("first_touch_thp", "c", m.touch_huge_us, "us/4KiB", 1);
  json_line("first_touch_4k", "c", m.touch_4k_us, "us/4KiB", 1);
  json_line("core_round_trip", "c_atomics", m.pingpong_us, "us", 2);
  row("elementwise 16M e2e, median (GB/s)", ew_e2e, "triad", m.triadN);
  row("elementwise 16M kernel, best (GB/s)", ew_k, "triad", m.triadN);
  if (np.have_numpy) {
    row("elementwise 16M e2e, median (GB/s)", ew_e2e, "numpy", np.ew);
    row("elementwise 16M kernel, best (GB/s)", ew_k, "numpy best", np.ew_best);
  }
  row("sum 4096x4096 axis=-1 e2e, median (GB/s)", sum_e2e, "triad", m.triadN);
  row("sum 4096x4096 axis=-1 kernel, best (GB/s)", sum_k, "triad", m.triadN);
  if (np.have_numpy) {
    row("sum 4096x4096 axis=-1 e2e, median (GB/s)", sum_e2e, "numpy", np.sum);
    row("sum 4096x4096 axis=-1 kernel, best (GB/s)", sum_k, "numpy best", np.sum_best);
  }
  row("matmul 1024 e2e, median (GFLOP/s)", mm_e2e, np.have_numpy ? "numpy" : NULL, np.mm);
  row("matmul 1024 kernel, best (GFLOP/s)", mm_k, np.have_numpy ? "numpy best" : NULL, np.mm_best);
  row("matmul 1024 kernel, best (GFLOP/s)", mm_k, "FMA peak", m.fmaN);
  row("compile cold, median of 5 (ms/kernel)", ct.cold_ms, NULL, NAN);
  row("compile from disk cache, med (ms/kernel)", ct.disk_ms, "cold", ct.cold_ms);
  row("pool_run empty task, best batch (us)", pool_us, "round trip", m.pingpong_us);
  row("realize 16-elem add, mean (us/realize)", tiny_ok ? tiny_us : NAN, NULL, NAN);

  json_line("elementwise_16M", "tgc", ew_e2e, "GB/s", nt);
  json_line("elementwise_16M", "tgc_kernel_best", ew_k, "GB/s", nt);
  json_line("sum_4096x4096", "tgc", sum_e2e, "GB/s", nt);
  json_line("sum_4096x4096", "tgc_kernel_best", sum_k, "GB/s", nt);
  json_line("matmul_1024", "tgc", mm_e2e, "GFLOP/s", nt);
  json_line("matmul_1024", "tgc_kernel_best", mm_k, "GFLOP/s", nt);
  if (np.have_numpy) {
    json_line("elementwise_16M", "numpy", np.ew, "GB/s", np.threads);
    json_line("elementwise_16M", "numpy_best", np.ew_best, "GB/s", np.threads);
    json_line("sum_4096x4096", "numpy", np.sum, "GB/s", np.threads);
    json_line("sum_4096x4096", "numpy_best", np.sum_best, "GB/s", np.threads);
    json_line("matmul_1024", "numpy", np.mm, "GFLOP/s", np.threads);
    json_line("matmul_1024", "numpy_best", np.mm_best, "GFLOP/s", np.threads);
  }
  json_line("compile_cold", "tgc", ct.cold_ms, "ms/kernel", 1);
  json_line("compile_disk_cache", "tgc", ct.disk_ms, "ms/kernel", 1);
  json_line("pool_run_empty", "tgc", pool_us, "us/launch", nt);
  json_line("realize_tiny_add", "tgc", tiny_ok ? tiny_us : NAN, "us/realize", nt);

  if (json_mode && !np.have_numpy)
    fprintf(stderr, "numpy: %s\n", np.ran ? "not installed (skipped)" : "python3 or bench/peers.py unavailable (skipped)");
  note("\nthreads: tgc %d (tg_num_threads), triad %d", nt, m.ncpu);
  if (np.have_numpy) note(", numpy %s: %d (BLAS threads)\n", np.version, np.threads);
  else note("\nnumpy: %s\n", np.ran ? "not installed (skipped)" : "python3 or bench/peers.py unavailable (skipped)");
  note("checks: elementwise %s, sum %s, matmul %s, tiny add %s; compile paths confirmed by tg_get_stats: "
       "cold %d/%d compiled, disk %d/%d disk_cache_hits\n",
       ew.ok ? "ok" : "WRONG", sm.ok ? "ok" : "WRONG", mm.ok ? "ok" : "WRONG", tiny_ok ? "ok" : "WRONG",
       ct.cold_ok, NCOMPILE, ct.disk_ok, NCOMPILE);
  note("load average (1 min): %.2f at the start, %.2f at the end%s\n", load_start, loadavg1(),
       load_start > 0.5 ? " (the CPUs were busy before the start: expect skewed numbers)" : "");
  note("total %.1f s\n", bench_now_s() - t_start);
  return 0;
}
