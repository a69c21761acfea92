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
