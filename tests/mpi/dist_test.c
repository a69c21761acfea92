/* dist_test.c — the collectives of tg.h's "distributed" section, run by tests/mpi.sh under mpirun (or alone:
 * one rank). Modes:
 *   collectives  all-reduce (sum, mean) and broadcast of random tensors of every dtype and of size 0, against
 *                the sum each rank computes itself from every rank's seed; a non-contiguous tensor; barrier
 *   mismatch     rank 0 passes (3, 4), the others (4, 3), then float32 (3, 4) against int64 (100000): every
 *                rank gets TG_ERR_ARG naming both, and the next collective still works
 *   kill, hang   the last rank kills itself (SIGKILL) or sleeps before a collective: the others must fail
 *                within the timeout (TG_DIST_TIMEOUT) with a message naming it; exit status 3 when they do
 * Exit status 0 when every check passed; each rank prints its failures and one summary line.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tg.h"

static int R, N, checks, fails;

#define CHECK(cond, ...)                                           \
  do {                                                             \
    checks++;                                                      \
    if (!(cond)) {                                                 \
      fails++;                                                     \
      printf("rank %d FAIL line %d: ", R, __LINE__);               \
      printf(__VA_ARGS__);                                         \
      printf("\n");                                                \
    }                                                              \
  } while (0)

static uint64_t mix(uint64_t *s) {  /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* an exactly representable float (k/8, |k| <= 64) as float16 / bfloat16 bits: no rounding needed */
static uint16_t exact_half(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  if (f == 0) return (uint16_t)(b >> 16);
  return (uint16_t)(((b >> 16) & 0x8000) | ((((b >> 23) & 0xff) - 127 + 15) << 10) | ((b >> 13) & 0x3ff));
}
/* float16 bits of f rounded to nearest even (finite, in range): for means, which need not be exact */
static uint16_t round_half(float f) {
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  if (a == 0) return sign;
  int e;
  frexp(a, &e);
  int E = e - 1 < -14 ? -14 : e - 1;  /* a = 1.x * 2^E; below 2^-14 the quantum stays 2^-24 */
  double k = nearbyint(a / ldexp(1.0, E - 10));
  if (k >= 2048) {
    E++;
    k /= 2;
  }
  if (k < 1024) return (uint16_t)(sign | (uint16_t)k);
  return (uint16_t)(sign | ((E + 15) << 10) | ((int)k - 1024));
}
/* bfloat16 bits of f rounded to nearest even */
static uint16_t round_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
static float half_value(uint16_t h) {
  if (!(h & 0x7fff)) return 0;
  uint32_t b = ((uint32_t)(h & 0x8000) << 16) | ((uint32_t)(((h >> 10) & 0x1f) - 15 + 127) << 23) |
               ((uint32_t)(h & 0x3ff) << 13);
  float f;
  memcpy(&f, &b, 4);
  return f;
}

/* rank r's values for case c: n elements of dt */
static void fill(void *out, tg_dtype dt, int64_t n, int r, int c) {
  uint64_t s = (uint64_t)r * 1000003u + (uint64_t)c * 7919u + 1;
  size_t es = tg_dtype_size(dt);
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = mix(&s);
    float k8 = (float)((int)(x % 129) - 64) / 8.0f;
    unsigned char *p = (unsigned char *)out + (size_t)i * es;
    switch (dt) {
    case TG_BOOL: *p = (x & 3) == 0; break;
    case TG_FLOAT16: { uint16_t h = exact_half(k8); memcpy(p, &h, 2); break; }
    case TG_BFLOAT16: { uint32_t b; memcpy(&b, &k8, 4); uint16_t h = (uint16_t)(b >> 16); memcpy(p, &h, 2); break; }
    case TG_FLOAT32: { float f = (float)((double)(x >> 11) / 9007199254740992.0 * 2 - 1); memcpy(p, &f, 4); break; }
    case TG_FLOAT64: { double d = (double)(x >> 11) / 9007199254740992.0 * 200 - 100; memcpy(p, &d, 8); break; }
    default: memcpy(p, &x, es); break;  /* integers: random bits (little-endian) */
    }
  }
}

/* the expected element i: every rank's value summed in rank order 0..N-1, then / N for a mean */
static void expect(void *out, tg_dtype dt, int64_t n, int c, bool mean) {
  size_t es = tg_dtype_size(dt);
  unsigned char *all = malloc((size_t)N * (size_t)n * es + 1);
  for (int r = 0; r < N; r++) fill(all + (size_t)r * (size_t)n * es, dt, n, r, c);
  for (int64_t i = 0; i < n; i++) {
    unsigned char *o = (unsigned char *)out + (size_t)i * es;
#define AT(T, r) (((const T *)(all + (size_t)(r) * (size_t)n * es))[i])
    switch (dt) {
    case TG_BOOL: { uint8_t a = 0; for (int r = 0; r < N; r++) a |= AT(uint8_t, r) != 0; *o = a; break; }
    case TG_INT8: case TG_INT16: case TG_INT32: {
      int64_t a = 0;
      for (int r = 0; r < N; r++) a += dt == TG_INT8 ? AT(int8_t, r) : dt == TG_INT16 ? AT(int16_t, r) : AT(int32_t, r);
      if (mean) a /= N;
      if (dt == TG_INT8) *(int8_t *)o = (int8_t)a;
      else if (dt == TG_INT16) *(int16_t *)o = (int16_t)a;
      else *(int32_t *)o = (int32_t)a;
      break;
    }
    case TG_UINT8: case TG_UINT16: case TG_UINT32: {
      uint64_t a = 0;
      for (int r = 0; r < N; r++) a += dt == TG_UINT8 ? AT(uint8_t, r) : dt == TG_UINT16 ? AT(uint16_t, r) : AT(uint32_t, r);
      if (mean) a /= (uint64_t)N;
      if (dt == TG_UINT8) *(uint8_t *)o = (uint8_t)a;
      else if (dt == TG_UINT16) *(uint16_t *)o = (uint16_t)a;
      else *(uint32_t *)o = (uint32_t)a;
      break;
    }
    case TG_INT64: case TG_UINT64: {
      uint64_t a = 0;
      for (int r = 0; r < N; r++) a += AT(uint64_t, r);
      if (mean && dt == TG_INT64) a = (uint64_t)((int64_t)a / N);
      else if (mean) a /= (uint64_t)N;
      memcpy(o, &a, 8);
      break;
    }
    case TG_FLOAT16: case TG_BFLOAT16: {  /* k/8 values: the sums are exact in float, a mean is rounded once */
      float a = 0;
      for (int r = 0; r < N; r++) {
        uint16_t h = AT(uint16_t, r);
        uint32_t b = (uint32_t)h << 16;
        float f;
        memcpy(&f, &b, 4);
        a += dt == TG_FLOAT16 ? half_value(h) : f;
      }
      if (mean) a /= (float)N;
      uint16_t h = dt == TG_FLOAT16 ? round_half(a) : round_bf16(a);
      memcpy(o, &h, 2);
      break;
    }
    case TG_FLOAT32: { float a = AT(float, 0); for (int r = 1; r < N; r++) a += AT(float, r); if (mean) a /= (float)N; memcpy(o, &a, 4); break; }
    case TG_FLOAT64: { double a = AT(double, 0); for (int r = 1; r < N; r++) a += AT(double, r); if (mean) a /= N; memcpy(o, &a, 8); break; }
    default: break;
    }
#undef AT
  }
  free(all);
}

static void check_all_reduce(tg_dtype dt, int64_t n, int c, tg_dist_op op) {
  size_t nb = (size_t)n * tg_dtype_size(dt);
  unsigned char *mine = malloc(nb + 1), *want = malloc(nb + 1), *got = malloc(nb + 1);
  fill(mine, dt, n, R, c);
  expect(want, dt, n, c, op == TG_DIST_MEAN);
  tg_tensor *t = tg_from_data(dt, 1, (int64_t[]){n}, mine, nb);
  tg_status st = tg_dist_all_reduce(t, op);
  CHECK(st == TG_OK, "all_reduce %s n=%lld: %s", tg_dtype_name(dt), (long long)n, tg_error());
  if (st == TG_OK) {
    st = tg_to_host(t, got, nb);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
      if (memcmp(got + (size_t)i * tg_dtype_size(dt), want + (size_t)i * tg_dtype_size(dt), tg_dtype_size(dt))) bad = i;
    CHECK(st == TG_OK && bad < 0, "all_reduce %s %s n=%lld: element %lld differs from the plain sum",
          op == TG_DIST_MEAN ? "mean" : "sum", tg_dtype_name(dt), (long long)n, (long long)bad);
  }
  tg_error_clear();
  tg_free(t);
  free(mine); free(want); free(got);
}

static void check_broadcast(tg_dtype dt, int64_t n, int c, int root) {
  size_t nb = (size_t)n * tg_dtype_size(dt);
  unsigned char *mine = malloc(nb + 1), *want = malloc(nb + 1), *got = malloc(nb + 1);
  fill(mine, dt, n, R, c);
  fill(want, dt, n, root, c);
  tg_tensor *t = tg_from_data(dt, 2, (int64_t[]){1, n}, mine, nb);
  tg_status st = tg_dist_broadcast(t, root);
  CHECK(st == TG_OK, "broadcast %s n=%lld: %s", tg_dtype_name(dt), (long long)n, tg_error());
  if (st == TG_OK) {
    st = tg_to_host(t, got, nb);
    CHECK(st == TG_OK && !memcmp(got, want, nb), "broadcast %s n=%lld from %d: not root's values", tg_dtype_name(dt),
          (long long)n, root);
  }
  tg_error_clear();
  tg_free(t);
  free(mine); free(want); free(got);
}

static void collectives(void) {
  static const int64_t sizes[] = {0, 1, 7, 1000, 300001};
  int c = 0;
  for (int dt = 0; dt < TG_DTYPE_COUNT; dt++)
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
      check_all_reduce((tg_dtype)dt, sizes[k], c++, TG_DIST_SUM);
      if (dt != TG_BOOL) check_all_reduce((tg_dtype)dt, sizes[k], c++, TG_DIST_MEAN);
      check_broadcast((tg_dtype)dt, sizes[k], c++, (int)(k % (size_t)N));
    }
  /* many segments and uneven chunks: 3,000,017 floats (12 MB, 1 MiB segments) */
  check_all_reduce(TG_FLOAT32, 3000017, c++, TG_DIST_SUM);
  /* a bool mean is refused on every rank alike, before any message */
  tg_tensor *b = tg_zeros(TG_BOOL, 1, (int64_t[]){3});
  CHECK(tg_dist_all_reduce(b, TG_DIST_MEAN) == TG_ERR_ARG, "bool mean accepted");
  tg_error_clear();
  tg_free(b);
  /* a transposed view and a constant: realized first, then reduced */
  float v[6] = {1, 2, 3, 4, 5, 6}, got[6];
  tg_tensor *x = tg_permute(tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, v, sizeof v), 2, (int[]){1, 0});
  tg_status st = tg_dist_all_reduce(x, TG_DIST_SUM);
  CHECK(st == TG_OK && tg_to_host(x, got, sizeof got) == TG_OK, "transposed view: %s", tg_error());
  if (st == TG_OK)
    for (int i = 0; i < 6; i++) {
      float want = v[(i % 2) * 3 + i / 2] * (float)N;
      CHECK(got[i] == want, "transposed view: element %d is %g, want %g", i, got[i], want);
    }
  tg_error_clear();
  tg_tensor *z = tg_full(TG_FLOAT32, 1, (int64_t[]){4}, 2.5);
  st = tg_dist_all_reduce(z, TG_DIST_SUM);
  CHECK(st == TG_OK && tg_to_host(z, got, 16) == TG_OK && got[3] == 2.5f * (float)N, "constant: %s", tg_error());
  tg_error_clear();
  CHECK(tg_dist_broadcast(z, N) == TG_ERR_ARG, "root %d accepted", N);
  tg_error_clear();
  CHECK(tg_dist_barrier() == TG_OK, "barrier: %s", tg_error());
  tg_free(x);
  tg_free(z);
}

static void mismatch(void) {
  tg_tensor *t = tg_zeros(TG_FLOAT32, 2, R == 0 ? (int64_t[]){3, 4} : (int64_t[]){4, 3});
  tg_status st = tg_dist_all_reduce(t, TG_DIST_SUM);
  const char *e = tg_error();
  if (N > 1) {
    CHECK(st == TG_ERR_ARG && strstr(e, "float32 (3, 4)") && strstr(e, "float32 (4, 3)"),
          "mismatched shapes: status %d, message \"%s\"", st, e);
    printf("rank %d: %s\n", R, e);
  }
  tg_error_clear();
  tg_free(t);
  /* a small tensor (its bytes travel with the header) against a large one of another dtype */
  t = R == 0 ? tg_zeros(TG_FLOAT32, 2, (int64_t[]){3, 4}) : tg_zeros(TG_INT64, 1, (int64_t[]){100000});
  st = tg_dist_all_reduce(t, TG_DIST_SUM);
  e = tg_error();
  if (N > 1)
    CHECK(st == TG_ERR_ARG && strstr(e, "float32 (3, 4)") && strstr(e, "int64 (100000)"),
          "mismatched sizes: status %d, message \"%s\"", st, e);
  tg_error_clear();
  tg_free(t);
  t = tg_ones(TG_FLOAT32, 1, (int64_t[]){5});
  float got[5];
  st = tg_dist_all_reduce(t, TG_DIST_SUM);
  CHECK(st == TG_OK && tg_to_host(t, got, sizeof got) == TG_OK && got[4] == (float)N, "after a mismatch: %s",
        tg_error());
  tg_free(t);
}

/* the last rank dies (kill) or sleeps (hang) where the others enter an all-reduce */
static int fault(bool hang) {
  tg_tensor *t = tg_ones(TG_FLOAT32, 1, (int64_t[]){1000});
  CHECK(tg_dist_all_reduce(t, TG_DIST_SUM) == TG_OK, "the step before the fault: %s", tg_error());
  if (R == N - 1) {
    if (hang) sleep(600);
    else raise(SIGKILL);
  }
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  tg_status st = tg_dist_all_reduce(t, TG_DIST_SUM);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
  printf("rank %d: all-reduce returned %d after %.1f s: %s\n", R, st, s, tg_error());
  if (st == TG_OK) return 1;
  /* every later collective fails at once */
  st = tg_dist_barrier();
  printf("rank %d: then barrier: %s\n", R, tg_error());
  tg_free(t);
  tg_dist_finalize();
  return st == TG_ERR_IO ? 3 : 1;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argc > 1 ? argv[1] : "collectives";
  if (tg_dist_init() != TG_OK) {
    printf("dist_test: %s\n", tg_error());
    return 1;
  }
  CHECK(tg_dist_init() == TG_OK, "a second tg_dist_init");
  R = tg_dist_rank();
  N = tg_dist_size();
  if (!strcmp(mode, "kill") || !strcmp(mode, "hang")) return fault(!strcmp(mode, "hang"));
  if (!strcmp(mode, "mismatch")) mismatch();
  else collectives();
  printf("rank %d of %d: %d checks, %d failed\n", R, N, checks, fails);
  tg_dist_finalize();
  tg_collect();
  return fails ? 1 : 0;
}
