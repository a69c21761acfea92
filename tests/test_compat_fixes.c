/* test_compat_fixes.c — bugs in existing ops found by running tinygrad's test_ops.py against tgc
 * (tests/tinygrad/), one test each, against plain-C references. */
#include <stdlib.h>

#include "test.h"

/* conv1d with one-sided padding, gradients of x and w: the kernel holds two reduces over the same window loop,
 * one inside the output loop and one hoisted out of it; the second computed its load inside the first's loop
 * and used it out of scope (the C compiler refused the kernel: 'val4' undeclared) */
TEST(compat_conv1d_one_sided_padding_grad) {
  const int64_t pads[][2] = {{0, 1}, {2, 0}, {2, 1}, {1, 3}};
  for (int n = 3; n <= 5; n++)
    for (int pi = 0; pi < 4; pi++) {
      int64_t pl = pads[pi][0], pr = pads[pi][1], k = 2, m = n + pl + pr - k + 1;
      float xd[5], wd[2] = {0.5f, -1.25f}, gx_want[5] = {0}, gw_want[2] = {0};
      for (int i = 0; i < n; i++) xd[i] = 1.0f + (float)i * 0.75f;
      for (int64_t o = 0; o < m; o++)
        for (int64_t j = 0; j < k; j++) {
          int64_t i = o + j - pl;  /* the input element under tap j of window o, or padding */
          if (i < 0 || i >= n) continue;
          gx_want[i] += wd[j];
          gw_want[j] += xd[i];
        }
      tg_tensor *x = tg_from_data(TG_FLOAT32, 3, (int64_t[]){1, 1, n}, xd, (size_t)n * 4);
      tg_tensor *w = tg_from_data(TG_FLOAT32, 3, (int64_t[]){1, 1, k}, wd, 8);
      tg_conv_opts o = tg_conv_defaults();
      o.padding = TG_INTS(pl, pr);
      tg_tensor *y = tg_conv2d(x, w, NULL, o), *l = tg_sum(y, 0, NULL, false), *g[2] = {0};
      CHECK_T(l);
      CHECK(tg_shape(y, 2) == m, "n %d pads (%lld, %lld): output %lld, want %lld", n, (long long)pl, (long long)pr,
            (long long)tg_shape(y, 2), (long long)m);
      CHECK(tg_gradient(l, 2, (tg_tensor *[]){x, w}, g) == TG_OK, "gradient: %s", tg_error());
      CHECK(tg_realize_many(2, g) == TG_OK, "n %d pads (%lld, %lld): %s", n, (long long)pl, (long long)pr, tg_error());
      float gx[5] = {0}, gw[2] = {0};
      CHECK(tg_to_host(g[0], gx, (size_t)n * 4) == TG_OK && tg_to_host(g[1], gw, 8) == TG_OK, "%s", tg_error());
      CHECK_CLOSE("grad x", gx, gx_want, n);
      CHECK_CLOSE("grad w", gw, gw_want, 2);
      tg_free(g[0]);
      tg_free(g[1]);
      tg_free(l);
      tg_free(y);
      tg_free(w);
      tg_free(x);
    }
}

/* the gradient of a broadcast float16 value sums its copies in float32, as tg_sum and tinygrad do: 4096 ones
 * added in float16 stop at 2048 (2049 is not a float16); the half matmul's weight gradient lost 1% this way */
TEST(compat_half_expand_grad_sums_in_float32) {
  const int64_t n = 4096;
  uint16_t one = 0x3c00;   /* 1.0 in float16 */
  tg_tensor *h = tg_from_data(TG_FLOAT16, 1, (int64_t[]){1}, &one, 2);
  tg_tensor *e = tg_expand(h, 1, &n), *w = tg_ones(TG_FLOAT16, 1, &n), *m = tg_mul(e, w);
  tg_tensor *l = tg_cast(tg_sum(m, 0, NULL, false), TG_FLOAT32), *g = NULL;
  CHECK_T(l);
  CHECK(tg_gradient(l, 1, &h, &g) == TG_OK, "gradient: %s", tg_error());
  tg_tensor *g32 = tg_cast(g, TG_FLOAT32);
  CHECK_T(g32);
  float got = 0, want = (float)n;
  CHECK(tg_to_host(g32, &got, 4) == TG_OK, "%s", tg_error());
  CHECK(got == want, "gradient %g, want %g", got, want);
  tg_free(g32);
  tg_free(g);
  tg_free(l);
  tg_free(m);
  tg_free(w);
  tg_free(e);
  tg_free(h);
}
