/* test_every2_copy.c — a PACK whose fill reads every second element (a stride-2 convolution's input panel, as
 * ResNet's 7x7 stem packs its input with lanes on its pixels, BEAM's plan) copies a vector at a time from two
 * vector loads (linearize.c's emit_every2_copy): the source says so at every vector width this host compiles,
 * and the values equal a plain C convolution, the last vectors of the input (whose second load would pass its
 * end) included. The heuristic's own plan (lanes on the output channels, heuristic.c's strided_window) gives
 * the same values. */
#include <stdlib.h>
#include <string.h>

#include "run_kernel.h"
#include "test.h"

TEST(test_every2_copy_stride2_conv_packs_its_input_by_vectors) {
  REQUIRE_CPU();
  enum { CI = 3, CO = 64, K = 7, H = 70, OH = (H - K) / 2 + 1 };
  tg_scope_begin();
  float *hx = rand_data(CI * H * H), *hw = rand_data(CO * CI * K * K);
  float *got = malloc(sizeof(float) * CO * OH * OH), *want = malloc(sizeof(float) * CO * OH * OH);
  CHECK(hx && hw && got && want, "out of memory");
  if (hx && hw && got && want) {
    tg_tensor *x = tensor_of(hx, 4, (int64_t[]){1, CI, H, H}), *w = tensor_of(hw, 4, (int64_t[]){CO, CI, K, K});
    tg_tensor *y = tg_conv2d(x, w, NULL, (tg_conv_opts){.stride = TG_INTS(2)});
    CHECK_T(y);
    for (int o = 0; o < CO; o++)
      for (int i = 0; i < OH; i++)
        for (int j = 0; j < OH; j++) {
          double s = 0;
          for (int c = 0; c < CI; c++)
            for (int ky = 0; ky < K; ky++)
              for (int kx = 0; kx < K; kx++)
                s += (double)hx[(c * H + 2 * i + ky) * H + 2 * j + kx] * hw[((o * CI + c) * K + ky) * K + kx];
          want[(o * OH + i) * OH + j] = (float)s;
        }
    int host = codegen_host_target(2).vec_bytes;
    for (int vb = host; vb >= 16; vb /= 2) {
      int lanes = vb / 4;
      /* lanes on the pixels (axis 2, ox), a tile of as many channels (axis 0), the input packed along ox at
       * 2 ox + kx before the channel loop; then the heuristic's plan */
      const opt plan[] = {{OPT_UPCAST, 2, lanes}, {OPT_UPCAST, 0, lanes}, {OPT_THREAD, 1, 2}, {OPT_SWAP, 1, 2},
                          {OPT_PACK, 2, 1}};
      for (int pass = 0; pass < 2; pass++) {
        char opts[300], what[400], *src = NULL;
        bool ok = run_kernel_plan(y, (opt_target){.nthreads = 2, .vec_bytes = vb}, pass ? NULL : plan, 5, -1, 0, 2,
                                  got, sizeof(float) * CO * OH * OH, opts, sizeof opts, &src);
        CHECK(ok, "%d-byte vectors, %s plan: %s", vb, pass ? "the heuristic's" : "the pixel-vector", tg_error());
        snprintf(what, sizeof what, "7x7/2 conv, %d-byte vectors, %s", vb, opts);
        if (!pass && lanes >= 8)
          CHECK(src && strstr(src, "const float *s_ = "), "%s: the input panel is not copied by vectors", what);
        if (ok) check_close_f32(what, got, want, CO * OH * OH, 1e-4, 1e-4, __FILE__, __LINE__);
        free(src);
      }
    }
  }
  free(hx); free(hw); free(got); free(want);
  tg_scope_end();
}
