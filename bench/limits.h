/* limits.h — the machine's own limits, measured by the benchmark programs themselves: the peak FMA rate of
 * the vector unit tgc's kernels use (GFLOP/s) and the STREAM triad bandwidth (GB/s), each on one thread and on
 * all of them. Header-only, as bench_util.h: core.c and workloads.c print their results against these.
 *
 * The FMA loop is compiled for the widest vector ISA the CPU has (AVX-512, else AVX2+FMA, else SSE without
 * FMA), chosen at run time: the benchmarks are built for plain x86-64, the kernels tgc compiles for the
 * machine (-march=native). 16 independent accumulators (12 with AVX2's 16 registers) hide the FMA latency
 * on two FMA ports. */
#ifndef TG_BENCH_LIMITS_H
#define TG_BENCH_LIMITS_H

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_util.h"

#define MAX_CPUS 64
#define TRIAD_BLOCK 1024 /* a constant inner trip count, so gcc -O2 vectorizes the triad */
#define TRIAD_N ((size_t)64 << 20) /* floats per array, 3 x 256 MiB: past the 260 MiB L3 this VM reports */

/* the CPUs online, 1..MAX_CPUS: the threads a limit is measured on */
static inline int limit_cpus(void) {
  long nc = sysconf(_SC_NPROCESSORS_ONLN);
  return nc < 1 ? 1 : nc > MAX_CPUS ? MAX_CPUS : (int)nc;
}

static inline double minimum(const double *v, int n) {
  double m = INFINITY;
  for (int i = 0; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

/* ---- memory ---------------------------------------------------------------------------------------------- */

typedef struct region { void *base; size_t len; float *p; } region;

/* n floats, 2 MiB aligned, asking for huge pages (or refusing them); not touched yet */
static inline bool region_map(region *r, size_t nfloats, bool huge) {
  size_t align = (size_t)2 << 20, bytes = nfloats * sizeof(float);
  r->len = bytes + align;
  r->base = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r->base == MAP_FAILED) {
    r->base = NULL;
    return false;
  }
  r->p = (float *)(((uintptr_t)r->base + align - 1) & ~(uintptr_t)(align - 1));
  madvise(r->p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return true;
}

static inline void region_unmap(region *r) {
  if (r->base) munmap(r->base, r->len);
  r->base = NULL;
}

/* touches one byte per 4 KiB page of [p, p + bytes); returns seconds */
static inline double touch_pages(void *p, size_t bytes) {
  double t0 = bench_now_s();
  volatile char *c = p;
  for (size_t i = 0; i < bytes; i += 4096) c[i] = 0;
  return bench_now_s() - t0;
}

/* ---- threads: run fn(ctx, id) on nthreads threads (the caller is thread 0) ---------------------------- */

typedef struct limit_arg { void *(*fn)(void *ctx, int id); void *ctx; int id; } limit_arg;

static inline void *limit_thread(void *p) {
  limit_arg *a = p;
  return a->fn(a->ctx, a->id);
}

/* exits (with a message) if a thread cannot start: the callers' barriers would wait forever */
static inline void run_threads(void *(*fn)(void *ctx, int id), void *ctx, int nthreads) {
  pthread_t tids[MAX_CPUS];
  limit_arg args[MAX_CPUS];
  for (int t = 0; t < nthreads; t++) args[t] = (limit_arg){fn, ctx, t};
  for (int t = 1; t < nthreads; t++)
    if (pthread_create(&tids[t], NULL, limit_thread, &args[t]) != 0) {
      fprintf(stderr, "%s: could not start %d threads\n", program_invocation_short_name, nthreads);
      exit(1);
    }
  fn(ctx, 0);
  for (int t = 1; t < nthreads; t++) pthread_join(tids[t], NULL);
}

/* ---- STREAM triad a[i] = b[i] + s*c[i] ------------------------------------------------------------------- */

static inline void triad_block(float *restrict a, const float *restrict b, const float *restrict c, float s) {
  for (int i = 0; i < TRIAD_BLOCK; i++) a[i] = b[i] + s * c[i];
}

typedef struct triad_ctx {
  float *a, *b, *c;
  size_t n;
  int nthreads, reps;
  pthread_barrier_t bar;
  double touch_s;      /* first touch of all three arrays, all threads */
  double times[64];    /* per rep, measured by thread 0 */
} triad_ctx;

static inline void *triad_thread(void *ctx, int id) {
  triad_ctx *x = ctx;
  size_t nblocks = x->n / TRIAD_BLOCK;
  size_t lo = nblocks * (size_t)id / (size_t)x->nthreads * TRIAD_BLOCK;
  size_t hi = nblocks * (size_t)(id + 1) / (size_t)x->nthreads * TRIAD_BLOCK;
  /* first touch by the thread that will use the chunk; timed, then filled */
  pthread_barrier_wait(&x->bar);
  double t0 = bench_now_s();
  if (x->touch_s < 0) {
    touch_pages(x->a + lo, (hi - lo) * sizeof(float));
    touch_pages(x->b + lo, (hi - lo) * sizeof(float));
    touch_pages(x->c + lo, (hi - lo) * sizeof(float));
  }
  pthread_barrier_wait(&x->bar);
  if (id == 0 && x->touch_s < 0) x->touch_s = bench_now_s() - t0;
  for (size_t i = lo; i < hi; i++) x->a[i] = 0, x->b[i] = 1.0f, x->c[i] = 2.0f;
  for (int r = 0; r < x->reps; r++) {
    pthread_barrier_wait(&x->bar);
    double r0 = bench_now_s();
    for (size_t i = lo; i < hi; i += TRIAD_BLOCK) triad_block(x->a + i, x->b + i, x->c + i, 3.0f);
    pthread_barrier_wait(&x->bar);
    if (id == 0) x->times[r] = bench_now_s() - r0;
  }
  return NULL;
}

/* best triad GB/s (12 bytes per element) on nthreads threads over arrays already mapped (reps <= 64);
 * touch_s < 0 asks for the first touch */
static inline double triad_run(triad_ctx *x, int nthreads, int reps) {
  x->nthreads = nthreads;
  x->reps = reps;
  if (pthread_barrier_init(&x->bar, NULL, (unsigned)nthreads) != 0) return NAN;
  run_threads(triad_thread, x, nthreads);
  pthread_barrier_destroy(&x->bar);
  for (size_t i = 0; i < x->n; i += x->n / 7 + 1)
    if (x->a[i] != 7.0f) {
      fprintf(stderr, "%s: triad computed %g at %zu, expected 7\n", program_invocation_short_name, x->a[i], i);
      return NAN;
    }
  return 3.0 * sizeof(float) * (double)x->n / minimum(x->times, reps) / 1e9;
}

/* maps three arrays of n floats (huge pages asked for) for triad_run; false if they cannot be mapped */
static inline bool triad_map(triad_ctx *x, region r[3], size_t n) {
  for (int i = 0; i < 3; i++) r[i].base = NULL;
  for (int i = 0; i < 3; i++)
    if (!region_map(&r[i], n, true)) {
      for (int k = 0; k < i; k++) region_unmap(&r[k]);
      return false;
    }
  *x = (triad_ctx){.a = r[0].p, .b = r[1].p, .c = r[2].p, .n = n, .touch_s = -1};
  return true;
}

/* ---- peak FMA rate ----------------------------------------------------------------------------------------- */

#define FMA_ITERS 4000000L /* per thread and run: 1 GFLOP with AVX-512, about 6 ms on a core here */

#define FMA_STEP4(acc, fma, k, a, b) \
  (acc[k] = fma(acc[k], a, b), acc[k + 1] = fma(acc[k + 1], a, b), acc[k + 2] = fma(acc[k + 2], a, b), \
   acc[k + 3] = fma(acc[k + 3], a, b))
#define FMA_STEP12(acc, fma, a, b) (FMA_STEP4(acc, fma, 0, a, b), FMA_STEP4(acc, fma, 4, a, b), FMA_STEP4(acc, fma, 8, a, b))
#define FMA_STEP16(acc, fma, a, b) (FMA_STEP12(acc, fma, a, b), FMA_STEP4(acc, fma, 12, a, b))

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

__attribute__((target("avx512f"))) static inline float fma_loop_avx512(long iters) {
  __m512 acc[16], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int j = 0; j < 16; j++) acc[j] = _mm512_set1_ps((float)j);
  for (long i = 0; i < iters; i++) {
    /* unrolled by hand: a loop over acc[] at -O2 would keep the accumulators in memory */
    FMA_STEP16(acc, _mm512_fmadd_ps, a, b);
    __asm__ volatile("" : "+v"(a));  /* a stays opaque: the loop cannot be folded */
  }
  float s = 0;
  for (int j = 0; j < 16; j++) s += _mm512_reduce_add_ps(acc[j]);
  return s;
}

__attribute__((target("avx2,fma"))) static inline float fma_loop_avx2(long iters) {
  __m256 acc[12], a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int j = 0; j < 12; j++) acc[j] = _mm256_set1_ps((float)j);
  for (long i = 0; i < iters; i++) {
    FMA_STEP12(acc, _mm256_fmadd_ps, a, b);
    __asm__ volatile("" : "+x"(a));
  }
  float v[8], s = 0;
  for (int j = 0; j < 12; j++) {
    _mm256_storeu_ps(v, acc[j]);
    for (int l = 0; l < 8; l++) s += v[l];
  }
  return s;
}
#endif

/* flops of one call of the widest loop the CPU runs, and the ISA's name */
static inline const char *fma_isa(double *flops_per_iter) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) {
    *flops_per_iter = 16 * 16 * 2;
    return "AVX-512 FMA";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *flops_per_iter = 12 * 8 * 2;
    return "AVX2 FMA";
  }
#endif
  *flops_per_iter = 16 * 4 * 2;
  return "SSE mul+add";
}

static inline float fma_loop(long iters) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) return fma_loop_avx512(iters);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return fma_loop_avx2(iters);
#endif
  /* 16 chains of 4 lanes, multiply then add: what a plain C compiler makes of a*b+c without FMA */
  float acc[16][4], a = 0.999999f, b = 1e-7f, s = 0;
  for (int j = 0; j < 16; j++)
    for (int l = 0; l < 4; l++) acc[j][l] = (float)j;
  for (long i = 0; i < iters; i++) {
    for (int j = 0; j < 16; j++)
      for (int l = 0; l < 4; l++) acc[j][l] = acc[j][l] * a + b;
    __asm__ volatile("" : "+r"(a));
  }
  for (int j = 0; j < 16; j++)
    for (int l = 0; l < 4; l++) s += acc[j][l];
  return s;
}

typedef struct fma_ctx {
  pthread_barrier_t bar;
  int reps;
  double times[16];  /* wall seconds per rep, all threads, measured by thread 0 */
  volatile float sink;
} fma_ctx;

static inline void *fma_thread(void *ctx, int id) {
  fma_ctx *x = ctx;
  for (int r = 0; r < x->reps; r++) {
    pthread_barrier_wait(&x->bar);
    double t0 = bench_now_s();
    float s = fma_loop(FMA_ITERS);
    pthread_barrier_wait(&x->bar);
    if (id == 0) x->times[r] = bench_now_s() - t0, x->sink = s;
  }
  return NULL;
}

/* the best FMA rate of nthreads threads together, GFLOP/s, over reps runs (<= 16); *isa names the loop */
static inline double fma_peak_gflops(int nthreads, int reps, const char **isa) {
  double per_iter;
  *isa = fma_isa(&per_iter);
  fma_ctx x = {.reps = reps};
  if (pthread_barrier_init(&x.bar, NULL, (unsigned)nthreads) != 0) return NAN;
  run_threads(fma_thread, &x, nthreads);
  pthread_barrier_destroy(&x.bar);
  return per_iter * (double)FMA_ITERS * nthreads / minimum(x.times, reps) / 1e9;
}

#endif
