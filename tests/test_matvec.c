/* test_matvec.c — the heuristic's matrix-vector path (heuristic.c's matvec): y = x W^T for x of M <= 4 rows
 * and W of N rows of K, odd sizes included, equal plain C loops; vector lanes that divide K (no padded,
 * masked lanes where 4 lanes divide it); threads only for products large enough to pay for the pool. */
#include "run_kernel.h"
#include "test.h"

typedef struct mv_case { int m, n, k; bool threaded; } mv_case;

TEST(test_matvec_heuristic_matches_plain_c_without_padded_lanes) {
  REQUIRE_CPU();
  static const mv_case cases[] = {
      {1, 64, 172, false}, {1, 172, 64, false}, {1, 288, 768, true}, {2, 288, 768, true}, {3, 100, 36, false},
      {4, 1031, 260, true}, {1, 50, 257, false}, {1, 4096, 64, true}, {2, 9, 12, false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const mv_case *t = &cases[c];
    tg_scope_begin();
    float *x = rand_data((int64_t)t->m * t->k), *w = rand_data((int64_t)t->n * t->k);
    float *got = malloc((size_t)t->m * t->n * sizeof *got);
    CHECK(x && w && got, "allocation failed");
    if (x && w && got) {
      int64_t sx[2] = {t->m, t->k}, sw[2] = {t->n, t->k};
      tg_tensor *y = tg_matmul(tensor_of(x, 2, sx), tg_T(tensor_of(w, 2, sw)));
      CHECK_T(y);
      char opts[300];
      bool ok = y && run_kernel(y, 2, -1, 0, 0, got, (size_t)t->m * t->n * sizeof *got, opts, sizeof opts);
      CHECK(ok, "%dx%dx%d: %s: %s", t->m, t->n, t->k, opts, tg_error());
      for (int i = 0; ok && i < t->m; i++)
        for (int j = 0; j < t->n; j++) {
          double s = 0;
          for (int l = 0; l < t->k; l++) s += (double)x[i * t->k + l] * w[(size_t)j * t->k + l];
          if (!(fabs(got[i * t->n + j] - s) <= 1e-4 * (1 + fabs(s)))) {
            CHECK(false, "%dx%dx%d %s: y[%d][%d] = %.9g, plain C %.9g", t->m, t->n, t->k, opts, i, j, got[i * t->n + j], s);
            ok = false;
            break;
          }
        }
      if (ok && t->k % 4 == 0) CHECK(!strstr(opts, "PADTO"), "%dx%dx%d: padded lanes: %s", t->m, t->n, t->k, opts);
      if (ok) CHECK(!strstr(opts, "THREAD") == !t->threaded, "%dx%dx%d: %s", t->m, t->n, t->k, opts);
    }
    free(x), free(w), free(got);
    tg_scope_end();
  }
}

/* with 16-lane vectors (AVX-512) the tile's 16 N rows are as many as the lanes: the lanes must still be K's
 * (contiguous loads of W and x, one horizontal sum per output), not N's (W gathered across 16 rows) */
TEST(test_matvec_lanes_are_on_k_when_the_tile_is_as_wide_as_a_vector) {
  REQUIRE_CPU();
  tg_scope_begin();
  float *x = rand_data(256), *w = rand_data(64 * 256);
  int64_t sx[2] = {1, 256}, sw[2] = {64, 256};
  tg_tensor *y = x && w ? tg_matmul(tensor_of(x, 2, sx), tg_T(tensor_of(w, 2, sw))) : NULL;
  CHECK_T(y);
  schedule s;
  if (y && schedule_create(1, &y->u, &s) == TG_OK) {
    kernel_state ks;
    CHECK(s.nkernels == 1 && ks_init(&ks, s.kernels[0].ast, (opt_target){.nthreads = 1, .vec_bytes = 64}), "%s", tg_error());
    hand_coded_optimizations(&ks);
    kernel_info info;
    memset(&info, 0, sizeof info);
    uop *fin = codegen_finish(&ks, &info);
    linear_program lp = {0};
    char *src = fin && linearize(fin, &lp, &info) ? render_c(info.name, &lp, &info) : NULL;
    CHECK(src, "no source: %s", tg_error());
    CHECK(strstr(info.opts, "UNROLL(0,16)") && strstr(info.opts, "UPCAST(0,16)"), "opts %s", info.opts);
    /* contiguous vector loads of W at row offsets, a horizontal sum per output, scalar stores */
    if (src)
      CHECK(strstr(src, "*(const tg_float_vu*)(data2+") && strstr(src, "for (int l_") && !strstr(src, "*(tg_float_vu*)(data0+"),
            "lanes not on K:\n%s", src);
    free(src);
    linear_program_free(&lp);
    schedule_free(&s);
  }
  free(x), free(w);
  tg_scope_end();
}
