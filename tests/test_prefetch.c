/* test_prefetch.c — a reduction that streams a large buffer once (a decode-time matrix-vector product) prefetches
 * the next tile of it (codegen/prefetch.c); small or reused buffers get none; the values equal plain C either way. */
#include <stdlib.h>
#include <string.h>

#include "heuristic_source.h"
#include "nn/gguf.h"
#include "test.h"

/* y = x (1, k) @ w^T for w (n, k) built by make_w; its kernel's source; *src NULL when it is not one kernel */
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

/* x (1, K) @ W^T, W (N, K) float32 of 4 MiB: a streamed reduction, prefetched; values against plain C */
TEST(test_prefetch_float_matvec_over_a_large_weight) {
  REQUIRE_CPU();
  enum { N = 1024, K = 1024 };
  tg_scope_begin();
  float *hw = malloc(sizeof(float) * N * K), hx[K], got[N];
  CHECK(hw, "out of memory");
  if (!hw) return;
  uint32_t s = 7;
  for (int i = 0; i < N * K; i++) hw[i] = rnd(&s);
  for (int i = 0; i < K; i++) hx[i] = rnd(&s);
  tg_tensor *w = tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, K}, hw, sizeof(float) * N * K);
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){1, K}, hx, sizeof hx);
  char *src;
  tg_tensor *y = matvec(x, w, &src);
  CHECK_T(y);
  CHECK(src && strstr(src, "__builtin_prefetch"), "want a prefetch of the weight\n%s", src ? src : tg_error());
  free(src);
  CHECK(tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  int bad = 0;
  for (int n = 0; n < N; n++) {
    double want = 0;
    for (int k = 0; k < K; k++) want += (double)hx[k] * hw[n * K + k];
    if (fabs(got[n] - want) > 1e-4 + 1e-4 * fabs(want) && bad++ < 3) CHECK(0, "y[%d] = %g, want %g", n, got[n], want);
  }
  free(hw);
  tg_scope_end();
}

/* the same with a Q4_0 weight (N x K of 1.2 MB, dequantized in the kernel), the shape of a decode step */
TEST(test_prefetch_q4_0_matvec_over_a_large_weight) {
  REQUIRE_CPU();
  enum { N = 2048, K = 1024, NB = N * K / 32 };
  tg_scope_begin();
  uint8_t *blk = malloc((size_t)NB * 18);
  float hx[K], *got = malloc(sizeof(float) * N);
  CHECK(blk && got, "out of memory");
  if (!blk || !got) goto out;
  uint32_t s = 11;
  for (int b = 0; b < NB; b++) {
    uint16_t d = (uint16_t)(0x2000 + (b % 7) * 0x40);  /* float16 scales 2^-7 .. about 1.2 * 2^-7 */
    blk[b * 18] = (uint8_t)d;
    blk[b * 18 + 1] = (uint8_t)(d >> 8);
    for (int j = 0; j < 16; j++) blk[b * 18 + 2 + j] = (uint8_t)((rnd(&s) + 0.5f) * 256);
  }
  for (int i = 0; i < K; i++) hx[i] = rnd(&s);
  tg_tensor *bt = tg_from_data(TG_UINT8, 2, (int64_t[]){NB, 18}, blk, (size_t)NB * 18);
  tg_tensor *w = tg_reshape(gguf_dequantize(bt, GGML_Q4_0), 2, (int64_t[]){N, K});
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){1, K}, hx, sizeof hx);
  char *src;
  tg_tensor *y = matvec(x, w, &src);
  CHECK_T(y);
  CHECK(src && strstr(src, "__builtin_prefetch"), "want a prefetch of the blocks\n%s", src ? src : tg_error());
  free(src);
  CHECK(tg_to_host(y, got, sizeof(float) * N) == TG_OK, "%s", tg_error());
  int bad = 0;
  for (int n = 0; n < N; n++) {
    double want = 0;
    for (int k = 0; k < K; k++) {
      const uint8_t *b = blk + (size_t)(n * K + k) / 32 * 18;
      int j = k % 32, q = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
      float d = ldexpf(1.0f + (float)((b[0] | b[1] << 8) & 0x3ff) / 1024.0f, ((b[1] >> 2) & 31) - 15);
      want += (double)hx[k] * d * (q - 8);
    }
    if (fabs(got[n] - want) > 1e-4 + 1e-4 * fabs(want) && bad++ < 3) CHECK(0, "y[%d] = %g, want %g", n, got[n], want);
  }
out:
  free(blk);
  free(got);
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
