/* test_every2_load.c — a kernel whose only hot load reads every second element along a long row (a 3x3
 * stride-2 max pool, as ResNet's after its stem) reads it as two vector loads and a shuffle of their even lanes
 * (expand.c's LOAD_EVERY2): the source says so at every vector width this host compiles, and the values equal
 * tests/test.h's plain C pool. The input's width is odd and its padding on: the first window of a row starts before it, the
 * last vectors' second loads pass the end of the buffer (masked off), and every value is negative somewhere, so
 * a masked-off lane read as 0 would show. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_kernel.h"
#include "test.h"

TEST(test_every2_load_stride2_max_pool_reads_rows_by_vectors) {
  REQUIRE_CPU();
  enum { C = 3, H = 131, W = H, OH = (H - 1) / 2 + 1, OW = OH };
  tg_scope_begin();
  float *hx = rand_data(C * H * W), *got = malloc(sizeof(float) * C * OH * OW), *want = malloc(sizeof(float) * C * OH * OW);
  CHECK(hx && got && want, "out of memory");
  if (hx && got && want) {
    for (int i = 0; i < C * H * W; i++) hx[i] = -fabsf(hx[i]) - 0.5f;  /* all negative: a 0 from a masked lane shows */
    tg_tensor *x = tensor_of(hx, 4, (int64_t[]){1, C, H, W});
    tg_pool_opts o = tg_pool_defaults();
    o.kernel = TG_INTS(3);
    o.stride = TG_INTS(2);
    o.padding = TG_INTS(1);
    tg_tensor *y = tg_max_pool2d(x, o);
    CHECK_T(y);
    ref_max_pool_3s2p1(hx, C, H, want);
    int host = codegen_host_target(2).vec_bytes, every2 = 0, widths = 0;
    for (int vb = host; vb >= 16; vb /= 2) {
      char opts[300], what[400], *src = NULL;
      bool ok = run_kernel_for(y, (opt_target){.nthreads = 2, .vec_bytes = vb}, -1, 0, 2, got,
                               sizeof(float) * C * OH * OW, opts, sizeof opts, &src);
      CHECK(ok, "%d-byte vectors: %s", vb, tg_error());
      snprintf(what, sizeof what, "3x3/2 max pool, %d-byte vectors, %s", vb, opts);
      every2 += src && strstr(src, "z_ = tg_bc_int(0), a_ = __builtin_shufflevector(m_, z_") != NULL;
      widths++;
      if (ok) check_close_f32(what, got, want, C * OH * OW, 0, 0, __FILE__, __LINE__);
      free(src);
    }
    CHECK(every2 == widths, "%d of %d vector widths read the row every second element by vectors", every2, widths);
  }
  free(hx); free(got); free(want);
  tg_scope_end();
}
