/* test_opt_gemm.c — matmuls of a short reduce whose output loop is no multiple of the vector (stories260K's FFN:
 * x (128, 64) @ W^T of 172 or 176 rows) take the GEMM path: the output loop padded to vectors, its panel packed,
 * not lanes on the reduce with a horizontal sum per accumulator every 8 FMAs (codegen/heuristic.c); the values
 * equal plain C. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "heuristic_source.h"
#include "test.h"

static float val(int i, int salt) { return (float)((i * 37 + salt * 11) % 29) / 14.0f - 1.0f; }

/* x (M, K) @ W^T, W (N, K): the heuristic's actions must include want (and PACK), the values plain C's */
static void check_gemm(int M, int K, int N, const char *want) {
  tg_scope_begin();
  float *hx = malloc(sizeof(float) * (size_t)M * K), *hw = malloc(sizeof(float) * (size_t)N * K);
  float *got = malloc(sizeof(float) * (size_t)M * N);
  CHECK(hx && hw && got, "out of memory");
  if (hx && hw && got) {
    for (int i = 0; i < M * K; i++) hx[i] = val(i, 1);
    for (int i = 0; i < N * K; i++) hw[i] = val(i, 2);
    tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){M, K}, hx, sizeof(float) * (size_t)M * K);
    tg_tensor *w = tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, K}, hw, sizeof(float) * (size_t)N * K);
    tg_tensor *y = tg_matmul(x, tg_T(w));
    CHECK_T(y);
    kernel_info info;
    char *src = y ? heuristic_source(y, 32, &info) : NULL;
    CHECK(src && strstr(info.opts, want) && strstr(info.opts, "PACK("), "%dx%dx%d: opts %s, want %s and a PACK", M, K, N,
          src ? info.opts : tg_error(), want);
    free(src);
    CHECK(tg_to_host(y, got, sizeof(float) * (size_t)M * N) == TG_OK, "%s", tg_error());
    int bad = 0;
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) {
        double want_v = 0;
        for (int k = 0; k < K; k++) want_v += (double)hx[m * K + k] * hw[n * K + k];
        float g = got[m * N + n];
        if (fabs(g - want_v) > 1e-4 + 1e-5 * fabs(want_v) && bad++ < 3) CHECK(0, "y[%d,%d] = %g, want %g", m, n, g, want_v);
      }
  }
  free(hx);
  free(hw);
  free(got);
  tg_scope_end();
}

TEST(test_opt_gemm_short_reduce_pads_an_odd_output) {
  REQUIRE_CPU();
  check_gemm(128, 64, 172, "PADTO(");
}

/* 176 = 11 panels of 16: the threads split the panels (6 and 5), so the panel loop stays outside the row tiles */
TEST(test_opt_gemm_odd_panel_count_is_split_across_threads) {
  REQUIRE_CPU();
  check_gemm(128, 64, 176, "THREAD(1,");
}
