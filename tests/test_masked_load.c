/* test_masked_load.c — contiguous vector loads under a lane mask (a padded row's edges) read a whole vector with a
 * plain load when every lane lies inside the buffer (render/c.c tg_mload_*_in) and keep the masked load where the
 * vector would cross an end of the buffer. The input here sits between two inaccessible pages, so a plain load
 * across either end faults; the values are checked against plain C loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "heuristic_source.h"
#include "test.h"

enum { C = 4, CO = 8, H = 16, N = C * H * H };  /* N floats: one 4 KiB page */

/* a padded 3x3 convolution of x (1, C, H, H) whose bytes fill one page between two PROT_NONE pages */
TEST(test_masked_load_at_both_ends_of_a_guarded_buffer) {
  REQUIRE_CPU();
  long pg = sysconf(_SC_PAGESIZE);
  CHECK(pg > 0 && N * (long)sizeof(float) <= pg, "page size %ld", pg);
  if (pg <= 0 || N * (long)sizeof(float) > pg) return;
  char *map = mmap(NULL, (size_t)(3 * pg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(map != MAP_FAILED, "mmap failed");
  if (map == MAP_FAILED) return;
  float *x = (float *)(map + 2 * pg) - N;  /* the last byte of x is the last byte before the second guard */
  CHECK(mprotect(map, (size_t)pg, PROT_NONE) == 0 && mprotect(map + 2 * pg, (size_t)pg, PROT_NONE) == 0, "mprotect");
  float w[CO * C * 9];
  for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < CO * C * 9; i++) w[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
  tg_scope_begin();
  tg_tensor *xt = tg_from_blob(TG_FLOAT32, 4, (int64_t[]){1, C, H, H}, x, N * sizeof(float));
  tg_tensor *wt = tg_from_data(TG_FLOAT32, 4, (int64_t[]){CO, C, 3, 3}, w, sizeof w);
  tg_tensor *y = tg_conv2d(xt, wt, NULL, (tg_conv_opts){.padding = TG_INTS(1)});
  CHECK_T(y);
  kernel_info info;
  char *src = y ? heuristic_source(y, 32, &info) : NULL;
  CHECK(src && strstr(src, "tg_mload_float_in("), "want masked loads bounded by the buffer's size: opts %s\n%s",
        src ? info.opts : "", src ? src : tg_error());
  free(src);
  float *got = malloc(CO * H * H * sizeof *got);
  CHECK(got && y && tg_to_host(y, got, CO * H * H * sizeof *got) == TG_OK, "%s", tg_error());
  for (int o = 0, bad = 0; got && o < CO && bad < 4; o++)
    for (int i = 0; i < H; i++)
      for (int j = 0; j < H; j++) {
        double r = ref_conv3x3_at(x, w, C, H, o, i, j);
        float g = got[(o * H + i) * H + j];
        if (fabs(g - r) > 1e-5 + 1e-4 * fabs(r) && bad++ < 4) CHECK(0, "y[%d,%d,%d] = %g, want %g", o, i, j, g, r);
      }
  free(got);
  tg_scope_end();
  tg_collect();
  munmap(map, (size_t)(3 * pg));
}
