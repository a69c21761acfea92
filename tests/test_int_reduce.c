/* test_int_reduce.c — integer reductions of comparisons, exact, in the shapes the optimizer vectorizes.
 *
 * A bool cast to int32 inside a vectorized max reduction was rendered as the negated mask (-m); gcc 12 folds
 * max(acc, -m) with acc starting at INT_MIN into a negated min, which wraps, and every value came out INT_MIN.
 * Reductions over an axis of a transposed comparison are what tinygrad's index and scatter ops build. */
#include <stdlib.h>

#include "test.h"

TEST(test_int_max_min_sum_of_comparisons_are_exact) {
  static const int64_t shapes[][4] = {{3, 4, 5, 3}, {2, 3, 17, 4}, {1, 1, 9, 2}, {4, 2, 8, 5}};
  for (int si = 0; si < 4; si++) {
    const int64_t *sh = shapes[si];
    int64_t n = sh[0] * sh[1] * sh[2];
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    int32_t *got = malloc((size_t)n * 3 * sizeof *got);
    CHECK(idx && got, "out of memory");
    if (!idx || !got) { free(idx); free(got); return; }
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)((i * 7 + si) % sh[3]);
    tg_scope_begin();
    tg_tensor *ix = tg_from_data(TG_INT32, 3, sh, idx, (size_t)n * sizeof *idx);
    tg_tensor *ar = tg_arange(TG_INT32, 0, (double)sh[3], 1);
    /* m[a, b, c, d] = (ix[d', b, c] == a) with the first and last axes swapped: (K, B, C, D) */
    tg_tensor *m = tg_cast(tg_permute(tg_eq(tg_unsqueeze(ix, -1), ar), 4, (int[]){3, 1, 2, 0}), TG_INT32);
    tg_tensor *r[3] = {tg_max(m, 1, (int[]){-1}, false), tg_min(m, 1, (int[]){-1}, false), tg_sum(m, 1, (int[]){-1}, false)};
    for (int op = 0; op < 3; op++) {
      CHECK_T(r[op]);
      int64_t cnt = sh[3] * sh[1] * sh[2];
      CHECK(tg_to_host(r[op], got, (size_t)cnt * sizeof *got) == TG_OK, "%s", tg_error());
      int bad = 0;
      for (int64_t a = 0; a < sh[3]; a++)
        for (int64_t b = 0; b < sh[1]; b++)
          for (int64_t c = 0; c < sh[2]; c++) {
            int want = op == 0 ? 0 : op == 1 ? 1 : 0;
            for (int64_t d = 0; d < sh[0]; d++) {
              int v = idx[(d * sh[1] + b) * sh[2] + c] == a;
              want = op == 0 ? (v > want ? v : want) : op == 1 ? (v < want ? v : want) : want + v;
            }
            int32_t g = got[(a * sh[1] + b) * sh[2] + c];
            if (g != want && bad++ < 3)
              CHECK(false, "shape %d op %d [%lld,%lld,%lld]: got %d, want %d", si, op, (long long)a, (long long)b,
                    (long long)c, g, want);
          }
    }
    tg_scope_end();
    free(idx);
    free(got);
  }
}

/* a float16 reduction on a target without half arithmetic (the GPU dialects) accumulates in float32: a max of
 * float16 compared the bits as unsigned shorts there, and -inf's bits beat every value */
TEST(test_half_max_and_sum_reductions_on_any_device) {
  float x[40];
  for (int i = 0; i < 40; i++) x[i] = (float)((i * 13) % 17) * 0.25f - 2.0f;
  tg_scope_begin();
  tg_tensor *h = tg_cast(tg_from_data(TG_FLOAT32, 2, (int64_t[]){8, 5}, x, sizeof x), TG_FLOAT16);
  tg_tensor *mx = tg_cast(tg_max(h, 1, (int[]){1}, false), TG_FLOAT32);
  tg_tensor *mn = tg_cast(tg_min(h, 1, (int[]){1}, false), TG_FLOAT32);
  tg_tensor *sm = tg_cast(tg_sum(h, 1, (int[]){1}, false), TG_FLOAT32);
  float gmx[8], gmn[8], gsm[8];
  CHECK(mx && mn && sm && tg_to_host(mx, gmx, sizeof gmx) == TG_OK && tg_to_host(mn, gmn, sizeof gmn) == TG_OK &&
            tg_to_host(sm, gsm, sizeof gsm) == TG_OK,
        "%s", tg_error());
  for (int r = 0; r < 8; r++) {
    float wmx = -INFINITY, wmn = INFINITY, wsm = 0;
    for (int c = 0; c < 5; c++) {
      float v = x[r * 5 + c];  /* multiples of 0.25 in [-2, 2]: exact in float16 */
      wmx = v > wmx ? v : wmx;
      wmn = v < wmn ? v : wmn;
      wsm += v;
    }
    CHECK(gmx[r] == wmx && gmn[r] == wmn && gsm[r] == wsm, "row %d: max %g min %g sum %g, want %g %g %g", r, gmx[r],
          gmn[r], gsm[r], wmx, wmn, wsm);
  }
  tg_scope_end();
}
