/* test_prefetch.c — a reduction that streams a large buffer once (a decode-time matrix-vector product) prefetches
 * the next tile of it (codegen/prefetch.c); small or reused buffers get none; the values equal plain C either way. */
#include <stdlib.h>
#include <string.h>

#include "heuristic_source.h"
#include "nn/gguf.h"
#include "test.h"

/* y = x (1, k) @ w^T for w (n, k); its kernel's source; *src NULL when it is not one kernel */
static tg_tensor *matvec(tg_tensor *x, tg_tensor *w, char **src) {
  tg_tensor *y = tg_matmul(x, tg_T(w));
  kernel_info info;
  *src = y ? heuristic_source(y, 32, &info) : NULL;
  return y;
}

static float rnd(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

/* x (1, K) @ w^T for w (N, K) whose values are hw: the kernel prefetches the weight and y equals plain C */
static void check_prefetched_matvec(const char *what, tg_tensor *w, const float *hw, int N, int K) {
  float *hx = malloc(sizeof(float) * (size_t)K), *got = malloc(sizeof(float) * (size_t)N);
  CHECK(hx && got, "out of memory");
  uint32_t s = 11;
  for (int i = 0; hx && i < K; i++) hx[i] = rnd(&s);
  tg_tensor *x = hx ? tg_from_data(TG_FLOAT32, 2, (int64_t[]){1, K}, hx, sizeof(float) * (size_t)K) : NULL;
  char *src = NULL;
  tg_tensor *y = x && got ? matvec(x, w, &src) : NULL;
  CHECK_T(y);
  CHECK(src && strstr(src, "__builtin_prefetch"), "%s: want a prefetch of the weight\n%s", what, src ? src : tg_error());
  free(src);
  if (y && tg_to_host(y, got, sizeof(float) * (size_t)N) == TG_OK) {
    int bad = 0;
    for (int n = 0; n < N; n++) {
      double want = 0;
      for (int k = 0; k < K; k++) want += (double)hx[k] * hw[(size_t)n * K + k];
      if (fabs(got[n] - want) > 1e-4 + 1e-4 * fabs(want) && bad++ < 3) CHECK(0, "%s: y[%d] = %g, want %g", what, n, got[n], want);
    }
  } else {
    CHECK(0, "%s: %s", what, tg_error());
  }
  free(hx);
  free(got);
}

/* x (1, K) @ W^T, W (N, K) float32 of 4 MiB: a streamed reduction, prefetched */
TEST(test_prefetch_float_matvec_over_a_large_weight) {
  REQUIRE_CPU();
  enum { N = 1024, K = 1024 };
  tg_scope_begin();
  float *hw = malloc(sizeof(float) * N * K);
  CHECK(hw, "out of memory");
  uint32_t s = 7;
  for (int i = 0; hw && i < N * K; i++) hw[i] = rnd(&s);
  if (hw) check_prefetched_matvec("float32", tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, K}, hw, sizeof(float) * N * K), hw, N, K);
  free(hw);
  tg_scope_end();
}

/* the same with a Q4_0 weight (N x K of 1.2 MB, dequantized in the kernel), the shape of a decode step; the
 * reference multiplies a plain C dequantization */
TEST(test_prefetch_q4_0_matvec_over_a_large_weight) {
  REQUIRE_CPU();
  enum { N = 2048, K = 1024, NB = N * K / 32 };
  tg_scope_begin();
  uint8_t *blk = malloc((size_t)NB * 18);
  float *hw = malloc(sizeof(float) * N * K);
  CHECK(blk && hw, "out of memory");
  uint32_t s = 13;
  for (int b = 0; blk && hw && b < NB; b++) {
    uint16_t d = (uint16_t)(0x2000 + (b % 7) * 0x40);  /* float16 scales 2^-7 .. about 1.2 * 2^-7 */
    uint8_t *q = blk + (size_t)b * 18;
    q[0] = (uint8_t)d;
    q[1] = (uint8_t)(d >> 8);
    for (int j = 0; j < 16; j++) q[2 + j] = (uint8_t)((rnd(&s) + 0.5f) * 256);
    float df = ldexpf(1.0f + (float)(d & 0x3ff) / 1024.0f, ((d >> 10) & 31) - 15);
    for (int j = 0; j < 32; j++) hw[(size_t)b * 32 + j] = df * ((j < 16 ? q[2 + j] & 15 : q[2 + j - 16] >> 4) - 8);
  }
  if (blk && hw) {
    tg_tensor *bt = tg_from_data(TG_UINT8, 2, (int64_t[]){NB, 18}, blk, (size_t)NB * 18);
    check_prefetched_matvec("Q4_0", tg_reshape(gguf_dequantize(bt, GGML_Q4_0), 2, (int64_t[]){N, K}), hw, N, K);
  }
  free(blk);
  free(hw);
  tg_scope_end();
}

/* a weight of 64 KiB stays in the caches, and an elementwise kernel has no reduction: neither prefetches */
TEST(test_prefetch_none_for_a_small_weight_or_without_a_reduction) {
  REQUIRE_CPU();
  tg_scope_begin();
  tg_tensor *x = tg_rand(TG_FLOAT32, 2, (int64_t[]){1, 128}), *w = tg_rand(TG_FLOAT32, 2, (int64_t[]){128, 128});
  tg_tensor *a = tg_rand(TG_FLOAT32, 2, (int64_t[]){1024, 1024});
  CHECK(tg_realize(x) == TG_OK && tg_realize(w) == TG_OK && tg_realize(a) == TG_OK, "%s", tg_error());
  char *src;
  tg_tensor *y = matvec(x, w, &src);
  CHECK_T(y);
  CHECK(src && !strstr(src, "__builtin_prefetch"), "a 64 KiB weight: want no prefetch\n%s", src ? src : tg_error());
  free(src);
  tg_tensor *e = tg_add(a, tg_exp(a));
  kernel_info info;
  src = e ? heuristic_source(e, 32, &info) : NULL;
  CHECK(src && !strstr(src, "__builtin_prefetch"), "elementwise: want no prefetch\n%s", src ? src : tg_error());
  free(src);
  tg_scope_end();
}
