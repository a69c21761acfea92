/* test_row_groups.c — a tile of channel vectors reads and writes NCHW memory as rows (codegen/rows.c): the
 * residual of a ResNet block and the block's output, each a vector per pixel whose lanes are a plane apart, go
 * through row groups (a transpose in registers), at every vector width this host compiles (16, 32 and, with
 * AVX-512, 64 bytes), for full rows (8 pixels), partial ones (7) and gated ones (a row padded to the tile).
 * Each kernel is rendered for the width, compiled and run directly; its values equal plain C loops. */
#include <stdlib.h>
#include <string.h>

#include "run_kernel.h"
#include "test.h"

/* y's one kernel as the heuristic plans it for 2 threads of vec_bytes vectors, run on 2 threads into out;
 * *rows: whether its source has a row group, *loads: one of loads. False when a stage failed */
static bool run_at_width(tg_tensor *y, int vec_bytes, float *out, size_t nbytes, bool *rows, bool *loads, char *opts,
                         size_t nopts) {
  char *src;
  bool ok = run_kernel_for(y, (opt_target){.nthreads = 2, .vec_bytes = vec_bytes}, -1, 0, 2, out, nbytes, opts, nopts, &src);
  *rows = src && strstr(src, "tg_rows_t");
  *loads = src && (strstr(src, "rows0_") || strstr(src, "rows1_"));
  free(src);
  return ok;
}

/* the widths to check on this host: its own, and the narrower ones its compiler also runs */
static int widths(int *w) {
  int host = codegen_host_target(2).vec_bytes, n = 0;
  for (int b = 64; b >= 16; b /= 2)
    if (b <= host) w[n++] = b;
  return n;
}

/* relu(conv3x3(x, w, padding 1) * scale[c] + r) over an h x h image, 32 -> 32 channels: the tile's output and
 * its residual r are rows of the pixels it holds; h = 14 gives 8-pixel rows on AVX-512 (partial ones on
 * narrower widths), 7 a 7-pixel row */
TEST(test_row_groups_residual_block_reads_and_writes_rows) {
  REQUIRE_CPU();
  enum { C = 32 };
  int sizes[2] = {14, 7};
  for (int si = 0; si < 2; si++) {
    int H = sizes[si];
    int64_t nx = (int64_t)C * H * H;
    tg_scope_begin();
    float *hx = rand_data(nx), *hw = rand_data(C * C * 9), *hs = rand_data(C), *hr = rand_data(nx);
    float *got = malloc(sizeof(float) * (size_t)nx), *want = malloc(sizeof(float) * (size_t)nx);
    CHECK(hx && hw && hs && hr && got && want, "out of memory");
    if (!hx || !hw || !hs || !hr || !got || !want) goto next;
    tg_tensor *x = tensor_of(hx, 4, (int64_t[]){1, C, H, H}), *w = tensor_of(hw, 4, (int64_t[]){C, C, 3, 3});
    tg_tensor *sc = tensor_of(hs, 4, (int64_t[]){1, C, 1, 1}), *r = tensor_of(hr, 4, (int64_t[]){1, C, H, H});
    tg_tensor *y = tg_relu(tg_add(tg_mul(tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)}), sc), r));
    CHECK_T(y);
    for (int o = 0; o < C; o++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++) {
          int at = (o * H + i) * H + j;
          double v = ref_conv3x3_at(hx, hw, C, H, o, i, j) * hs[o] + hr[at];
          want[at] = v > 0 ? (float)v : 0;
        }
    int wb[3], nw = widths(wb);
    for (int k = 0; k < nw; k++) {
      bool rows = false, loads = false;
      char opts[300], what[420];
      CHECK(run_at_width(y, wb[k], got, sizeof(float) * (size_t)nx, &rows, &loads, opts, sizeof opts),
            "%dx%d at %d-byte vectors: %s", H, H, wb[k], tg_error());
      snprintf(what, sizeof what, "%dx%d block, %d-byte vectors, %s", H, H, wb[k], opts);
      /* channel vectors (their weight panel, PACK) store along a plane; pixel vectors are contiguous */
      CHECK(!strstr(opts, "PACK(") || (rows && loads), "%s: want the residual and the output as row groups", what);
      check_close_f32(what, got, want, nx, 1e-4, 1e-4, __FILE__, __LINE__);
    }
  next:
    free(hx); free(hw); free(hs); free(hr); free(got); free(want);
    tg_scope_end();
  }
}

/* relu(conv3x3) written into the next convolution's zero border, 20x20 into 22x22: the row of 22 is padded to
 * the tile, and the padded pixels' stores are gated, a row group of their own under the gate */
TEST(test_row_groups_zero_border_writer_gates_its_padded_rows) {
  REQUIRE_CPU();
  enum { CI = 16, CO = 32, H = 20, P = H + 2 };
  tg_scope_begin();
  float *hx = rand_data(CI * H * H), *hw = rand_data(CO * CI * 9);
  float *got = malloc(sizeof(float) * CO * P * P), *want = malloc(sizeof(float) * CO * P * P);
  CHECK(hx && hw && got && want, "out of memory");
  if (hx && hw && got && want) {
    tg_tensor *x = tensor_of(hx, 4, (int64_t[]){1, CI, H, H}), *w = tensor_of(hw, 4, (int64_t[]){CO, CI, 3, 3});
    tg_tensor *y = tg_pad(tg_relu(tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)})), 4,
                          (int64_t[]){1, 1, 1, 1}, 0.0);
    CHECK_T(y);
    for (int o = 0; o < CO; o++)
      for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
          double v = i == 0 || j == 0 || i == P - 1 || j == P - 1 ? 0 : ref_conv3x3_at(hx, hw, CI, H, o, i - 1, j - 1);
          want[(o * P + i) * P + j] = v > 0 ? (float)v : 0;
        }
    int wb[3], nw = widths(wb);
    for (int k = 0; k < nw; k++) {
      bool rows = false, loads = false;
      char opts[300], what[420];
      CHECK(run_at_width(y, wb[k], got, sizeof(float) * CO * P * P, &rows, &loads, opts, sizeof opts),
            "%d-byte vectors: %s", wb[k], tg_error());
      snprintf(what, sizeof what, "20x20 into 22x22, %d-byte vectors, %s", wb[k], opts);
      CHECK(!strstr(opts, "PACK(") || rows, "%s: want the output as row groups", what);
      check_close_f32(what, got, want, CO * P * P, 1e-4, 1e-4, __FILE__, __LINE__);
    }
  }
  free(hx); free(hw); free(got); free(want);
  tg_scope_end();
}
