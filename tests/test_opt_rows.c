/* test_opt_rows.c — a reduce broadcast along an output loop of its own kernel (a convolution whose weight is a
 * constant: its reduce over (cin, ky, kx) does not use cout) is computed once per element of the loops it uses:
 * the heuristic opens the broadcast loop inside the reduce, and the values match plain C loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"
#include "heuristic_source.h"
#include "render/render.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "test.h"

/* the C source the heuristic makes for y's one kernel; NULL when y is not one kernel */
/* where the loop header "ridxN < size;" is in src, -1 if none */
static long loop_at(const char *src, int size) {
  char pat[32];
  snprintf(pat, sizeof pat, " < %d;", size);
  const char *p = strstr(src, pat);
  return p ? (long)(p - src) : -1;
}

static float *host(tg_tensor *t, int64_t n) {
  float *d = malloc((size_t)n * sizeof *d);
  if (d && tg_to_host(t, d, (size_t)n * sizeof *d) != TG_OK) {
    free(d);
    return NULL;
  }
  return d;
}

/* relu(conv2d(x, 0.02 everywhere, padding 1)): the reduce over (16, 3, 3) opened outside the cout loop of 64,
 * vector lanes on ox; values against a plain C convolution */
TEST(test_opt_rows_conv_with_a_constant_weight_reduces_once_per_pixel) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t sx[4] = {1, 16, 21, 21}, sw[4] = {64, 16, 3, 3};
  tg_tensor *x = tg_rand(TG_FLOAT32, 4, sx);
  CHECK_T(x);
  CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
  tg_tensor *y = tg_relu(tg_sub(tg_conv2d(x, tg_full(TG_FLOAT32, 4, sw, 0.02), NULL, (tg_conv_opts){.padding = TG_INTS(1)}),
                                tg_full(TG_FLOAT32, 0, NULL, 0.2)));
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  CHECK(src, "not one kernel: %s", tg_error());
  if (src) {
    long red = loop_at(src, 16), cout = loop_at(src, 64);
    CHECK(red >= 0 && cout > red, "the cout loop (64) is not inside the reduce's (16): opts %s\n%s", info.opts, src);
    CHECK(strstr(src, "tg_float_v acc"), "no vector accumulator: opts %s\n%s", info.opts, src);
  }
  free(src);
  float *hx = host(x, 16 * 21 * 21), *hy = host(y, 64 * 21 * 21);
  CHECK(hx && hy, "%s", tg_error());
  for (int o = 0; hx && hy && o < 64; o++)
    for (int i = 0; i < 21; i++)
      for (int j = 0; j < 21; j++) {
        double r = 0;
        for (int c = 0; c < 16; c++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
              int yy = i + ky - 1, xx = j + kx - 1;
              if (yy >= 0 && yy < 21 && xx >= 0 && xx < 21) r += hx[(c * 21 + yy) * 21 + xx] * (double)0.02f;
            }
        r = r - 0.2f > 0 ? r - 0.2f : 0;
        float got = hy[(o * 21 + i) * 21 + j];
        if (fabs(got - r) > 1e-5 + 1e-4 * fabs(r)) {
          CHECK(0, "y[%d,%d,%d] = %g, want %g", o, i, j, got, r);
          o = 64;
          break;
        }
      }
  free(hx);
  free(hy);
  tg_scope_end();
}

/* the same on rows of 14 pixels (shufflenet's and inception's 14x14 and 13x13 layers): the row is padded to two
 * vectors, the second masked, not left as scalar lanes; values against a plain C convolution */
TEST(test_opt_rows_conv_with_a_constant_weight_on_short_rows_is_vector_code) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { C = 8, CO = 24, H = 14 };
  tg_tensor *x = tg_rand(TG_FLOAT32, 4, (int64_t[]){1, C, H, H});
  CHECK_T(x);
  CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
  tg_tensor *y = tg_conv2d(x, tg_full(TG_FLOAT32, 4, (int64_t[]){CO, C, 3, 3}, 0.02), NULL, (tg_conv_opts){.padding = TG_INTS(1)});
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  CHECK(src && strstr(info.opts, "PADTO") && strstr(src, "tg_float_v acc"), "opts %s: want the row padded to vectors\n%s",
        src ? info.opts : "", src ? src : tg_error());
  free(src);
  float *hx = host(x, C * H * H), *hy = host(y, CO * H * H);
  CHECK(hx && hy, "%s", tg_error());
  for (int o = 0; hx && hy && o < CO; o++)
    for (int i = 0; i < H; i++)
      for (int j = 0; j < H; j++) {
        double r = 0;
        for (int c = 0; c < C; c++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
              int yy = i + ky - 1, xx = j + kx - 1;
              if (yy >= 0 && yy < H && xx >= 0 && xx < H) r += hx[(c * H + yy) * H + xx] * (double)0.02f;
            }
        float got = hy[(o * H + i) * H + j];
        if (fabs(got - r) > 1e-5 + 1e-4 * fabs(r)) {
          CHECK(0, "y[%d,%d,%d] = %g, want %g", o, i, j, got, r);
          o = CO;
          break;
        }
      }
  free(hx);
  free(hy);
  tg_scope_end();
}

/* the same without a convolution: x (8,64,48) broadcast to (8,32,64,48), summed over 64 and added to z
 * (8,32,48): the sum over 64 runs once per (a, c), not once per (a, b, c) */
TEST(test_opt_rows_a_sum_broadcast_in_a_middle_axis_runs_once_per_row) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t sx[3] = {8, 64, 48}, sx1[4] = {8, 1, 64, 48}, se[4] = {8, 32, 64, 48}, sz[3] = {8, 32, 48};
  tg_tensor *x = tg_rand(TG_FLOAT32, 3, sx), *z = tg_rand(TG_FLOAT32, 3, sz);
  CHECK_T(x);
  CHECK_T(z);
  CHECK(tg_realize(x) == TG_OK && tg_realize(z) == TG_OK, "%s", tg_error());
  tg_tensor *y = tg_add(tg_sum(tg_expand(tg_reshape(x, 4, sx1), 4, se), 1, (int[]){2}, false), z);
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  CHECK(src, "not one kernel: %s", tg_error());
  if (src) {
    long red = loop_at(src, 64), b = loop_at(src, 32);
    CHECK(red >= 0 && b > red, "the broadcast loop (32) is not inside the reduce's (64): opts %s\n%s", info.opts, src);
    CHECK(strstr(src, "tg_float_v acc"), "no vector accumulator: opts %s\n%s", info.opts, src);
  }
  free(src);
  float *hx = host(x, 8 * 64 * 48), *hz = host(z, 8 * 32 * 48), *hy = host(y, 8 * 32 * 48);
  CHECK(hx && hz && hy, "%s", tg_error());
  for (int a = 0; hx && hz && hy && a < 8; a++)
    for (int bb = 0; bb < 32; bb++)
      for (int c = 0; c < 48; c++) {
        double r = hz[(a * 32 + bb) * 48 + c];
        for (int k = 0; k < 64; k++) r += hx[(a * 64 + k) * 48 + c];
        float got = hy[(a * 32 + bb) * 48 + c];
        if (fabs(got - r) > 1e-4 + 1e-5 * fabs(r)) {
          CHECK(0, "y[%d,%d,%d] = %g, want %g", a, bb, c, got, r);
          a = 8;
          bb = 32;
          break;
        }
      }
  free(hx);
  free(hz);
  free(hy);
  tg_scope_end();
}

/* a row's sum broadcast back along the row and added to it (softmax's shape): one kernel, the row loop inside
 * the reduce, values against plain C */
TEST(test_opt_rows_a_row_sum_added_back_to_its_row_is_one_kernel) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t sx[2] = {24, 1000};
  tg_tensor *x = tg_rand(TG_FLOAT32, 2, sx);
  CHECK_T(x);
  CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
  tg_tensor *y = tg_add(x, tg_sum(x, 1, (int[]){1}, true));
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  CHECK(src, "not one kernel: %s", tg_error());
  free(src);
  float *hx = host(x, 24 * 1000), *hy = host(y, 24 * 1000);
  CHECK(hx && hy, "%s", tg_error());
  for (int i = 0; hx && hy && i < 24; i++) {
    double s = 0;
    for (int j = 0; j < 1000; j++) s += hx[i * 1000 + j];
    for (int j = 0; j < 1000; j++)
      if (fabs(hy[i * 1000 + j] - (hx[i * 1000 + j] + s)) > 1e-3 + 1e-5 * fabs(s)) {
        CHECK(0, "y[%d,%d] = %g, want %g", i, j, hy[i * 1000 + j], hx[i * 1000 + j] + s);
        i = 24;
        break;
      }
  }
  free(hx);
  free(hy);
  tg_scope_end();
}
