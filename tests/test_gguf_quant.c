/* test_gguf_quant.c — ggml's block formats: tgc's lazy dequantize (src/nn/gguf_quant.c) against a plain C
 * dequantizer written here from ggml's block layouts, on random blocks; a matmul with a quantized weight against
 * dequantize-then-multiply in C; and the fusion: the dequantize is no kernel of its own. */
#include <math.h>
#include <stdlib.h>

#include "codegen/opt.h"
#include "nn/gguf.h"
#include "render/render.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "test.h"
#include "test_gguf.h"

/* ---- the reference: ggml's dequantize_row_* written from the block layouts, one loop per format ---------- */

float gguf_ref_half(const uint8_t *p) {
  uint16_t h = (uint16_t)(p[0] | p[1] << 8);
  uint32_t sign = (uint32_t)(h >> 15) << 31, e = h >> 10 & 31, m = h & 1023, bits;
  if (e == 31) bits = sign | 0x7F800000u | m << 13;   /* inf, NaN */
  else if (e) bits = sign | (e + 112) << 23 | m << 13;
  else if (!m) bits = sign;
  else {                                                /* subnormal: normalize */
    int s = 0;
    while (!(m & 1024)) m <<= 1, s++;
    bits = sign | (uint32_t)(113 - s) << 23 | (m & 1023) << 13;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j from the 12 packed bytes q */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4;
    *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
  }
}

void gguf_ref_dequantize(uint32_t type, const uint8_t *b, int64_t nblocks, float *y) {
  const gguf_type_info *ti = gguf_type_of(type);
  for (int64_t i = 0; i < nblocks; i++, b += ti->size, y += ti->block) {
    switch (type) {
      case GGML_Q4_0: {
        float d = gguf_ref_half(b);
        for (int j = 0; j < 16; j++) {
          y[j] = (float)((b[2 + j] & 0xF) - 8) * d;
          y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
        }
        break;
      }
      case GGML_Q4_1: {
        float d = gguf_ref_half(b), m = gguf_ref_half(b + 2);
        for (int j = 0; j < 16; j++) {
          y[j] = (float)(b[4 + j] & 0xF) * d + m;
          y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
        }
        break;
      }
      case GGML_Q5_0:
      case GGML_Q5_1: {
        bool one = type == GGML_Q5_1;
        float d = gguf_ref_half(b), m = one ? gguf_ref_half(b + 2) : 0;
        const uint8_t *qhp = b + (one ? 4 : 2), *qs = qhp + 4;
        uint32_t qh = (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 | (uint32_t)qhp[3] << 24;
        for (int j = 0; j < 16; j++) {
          int x0 = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4, x1 = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
          y[j] = one ? (float)x0 * d + m : (float)(x0 - 16) * d;
          y[j + 16] = one ? (float)x1 * d + m : (float)(x1 - 16) * d;
        }
        break;
      }
      case GGML_Q8_0: {
        float d = gguf_ref_half(b);
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
        break;
      }
      case GGML_Q4_K:
      case GGML_Q5_K: {
        bool five = type == GGML_Q5_K;
        float d = gguf_ref_half(b), dmin = gguf_ref_half(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16);
        for (int c = 0; c < 4; c++, q += 32) {   /* 64 values: the low nibbles of 32 bytes, then the high ones */
          int sc, m;
          for (int half = 0; half < 2; half++) {
            int s = 2 * c + half;
            scale_min_k4(s, scales, &sc, &m);
            float d1 = d * (float)sc, m1 = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
              int v = half ? q[l] >> 4 : q[l] & 0xF;
              if (five) v += (qh[l] >> s & 1) ? 16 : 0;
              y[64 * c + 32 * half + l] = d1 * (float)v - m1;
            }
          }
        }
        break;
      }
      case GGML_Q6_K: {
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = gguf_ref_half(b + 208);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8) {
          for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
            int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
            int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[128 * h + l] = d * (float)sc[is] * (float)q1;
            y[128 * h + l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[128 * h + l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[128 * h + l + 96] = d * (float)sc[is + 6] * (float)q4;
          }
        }
        break;
      }
      default: break;
    }
  }
}

/* ---- random blocks ------------------------------------------------------------------------------------------ */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

/* a random finite float16, magnitude in [2^-9, 2), at p */
static void rand_half(uint8_t *p) {
  uint16_t h = (uint16_t)((rnd() & 1) << 15 | (6 + rnd() % 10) << 10 | (rnd() & 1023));
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}

void gguf_rand_blocks(uint32_t type, uint8_t *b, int64_t nblocks) {
  const gguf_type_info *ti = gguf_type_of(type);
  for (int64_t i = 0; i < nblocks; i++, b += ti->size) {
    for (int64_t k = 0; k < ti->size; k++) b[k] = (uint8_t)rnd();
    int64_t halves[2] = {0, -1};   /* the float16 fields of the block */
    if (type == GGML_Q4_1 || type == GGML_Q5_1 || type == GGML_Q4_K || type == GGML_Q5_K) halves[1] = 2;
    if (type == GGML_Q6_K) halves[0] = 208;
    for (int k = 0; k < 2; k++)
      if (halves[k] >= 0) rand_half(b + halves[k]);
  }
}

/* ---- tests -------------------------------------------------------------------------------------------------- */

const uint32_t gguf_block_types[8] = {GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1,
                                      GGML_Q8_0, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};

TEST(test_gguf_dequantize_matches_reference_every_type) {
  for (int ti_ = 0; ti_ < 8; ti_++) {
    uint32_t type = gguf_block_types[ti_];
    const gguf_type_info *ti = gguf_type_of(type);
    int64_t nb = ti->block == 32 ? 7 : 3;   /* odd numbers of blocks */
    uint8_t *blocks = malloc((size_t)(nb * ti->size));
    float *want = malloc((size_t)(nb * ti->block) * sizeof *want), *got = malloc((size_t)(nb * ti->block) * sizeof *got);
    if (!blocks || !want || !got) { CHECK(false, "malloc"); free(blocks); free(want); free(got); return; }
    gguf_rand_blocks(type, blocks, nb);
    gguf_ref_dequantize(type, blocks, nb, want);
    tg_tensor *b = tg_from_data(TG_UINT8, 2, (int64_t[]){nb, ti->size}, blocks, (size_t)(nb * ti->size));
    tg_tensor *y = gguf_dequantize(b, type);
    CHECK(y && tg_dtype_of(y) == TG_FLOAT32 && tg_ndim(y) == 2 && tg_shape(y, 0) == nb && tg_shape(y, 1) == ti->block,
          "%s: a tensor (%lld, %lld) float32 (%s)", ti->name, (long long)nb, (long long)ti->block, tg_error());
    if (y && tg_to_host(y, got, (size_t)(nb * ti->block) * sizeof *got) == TG_OK) {
      char what[64];
      snprintf(what, sizeof what, "dequantize %s", ti->name);
      check_close_f32(what, got, want, nb * ti->block, 1e-7, 1e-6, __FILE__, __LINE__);
    } else {
      CHECK(false, "%s: %s", ti->name, tg_error());
    }
    tg_free(y);
    tg_free(b);
    free(blocks);
    free(want);
    free(got);
  }
}

TEST(test_gguf_dequantize_refuses_bad_blocks) {
  tg_tensor *b = tg_zeros(TG_UINT8, 2, (int64_t[]){3, 17});
  tg_error_clear();
  CHECK(!gguf_dequantize(b, GGML_Q4_0) && strstr(tg_error(), "Q4_0") && strstr(tg_error(), "18"), "%s", tg_error());
  CHECK(!gguf_dequantize(b, 16) && strstr(tg_error(), "IQ2_XXS"), "%s", tg_error());
  CHECK(!gguf_dequantize(b, GGML_F32), "F32 is no block format");
  tg_free(b);
}

/* x (m, k) @ W^T with W (n, k) of type `type`, against the reference dequantize and a double-precision product,
 * each element within float32 rounding of its sum: 1e-4 + 4e-6 sum_c |x_c w_c| (float32 accumulations in any
 * order are within about sqrt(k) eps of that sum; K-quant weights reach 100s, so their terms cancel a lot).
 * Returns the kernels the product ran */
static int quantized_matmul(uint32_t type, int64_t m, int64_t n) {
  const gguf_type_info *ti = gguf_type_of(type);
  int64_t k = ti->block == 32 ? 3 * 32 : 2 * 256, nb = n * k / ti->block;
  uint8_t *blocks = malloc((size_t)(nb * ti->size));
  float *w = malloc((size_t)(n * k) * sizeof *w), *x = malloc((size_t)(m * k) * sizeof *x);
  float *want = malloc((size_t)(m * n) * sizeof *want), *got = malloc((size_t)(m * n) * sizeof *got);
  double *mag = malloc((size_t)(m * n) * sizeof *mag);
  int kernels = -1;
  if (!blocks || !w || !x || !want || !got || !mag) goto out;
  gguf_rand_blocks(type, blocks, nb);
  gguf_ref_dequantize(type, blocks, nb, w);
  for (int64_t i = 0; i < m * k; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double acc = 0, sum = 0;
      for (int64_t c = 0; c < k; c++) {
        acc += (double)x[i * k + c] * (double)w[j * k + c];
        sum += fabs((double)x[i * k + c] * (double)w[j * k + c]);
      }
      want[i * n + j] = (float)acc;
      mag[i * n + j] = sum;
    }
  tg_scope_begin();
  tg_tensor *b = tg_from_data(TG_UINT8, 2, (int64_t[]){nb, ti->size}, blocks, (size_t)(nb * ti->size));
  tg_tensor *xt = tg_from_data(TG_FLOAT32, 2, (int64_t[]){m, k}, x, (size_t)(m * k) * sizeof *x);
  CHECK(tg_realize(b) == TG_OK && tg_realize(xt) == TG_OK, "%s", tg_error());
  tg_tensor *wt = tg_reshape(gguf_dequantize(b, type), 2, (int64_t[]){n, k});
  tg_tensor *y = tg_matmul(xt, tg_transpose(wt, 0, 1));
  CHECK(y && tg_realize(y) == TG_OK, "%s: %s", ti->name, tg_error());
  kernels = (int)tg_kernel_count_last();
  if (y && tg_to_host(y, got, (size_t)(m * n) * sizeof *got) == TG_OK) {
    char what[64];
    snprintf(what, sizeof what, "(%lld, %lld) @ %s (%lld, %lld)^T", (long long)m, (long long)k, ti->name, (long long)n,
             (long long)k);
    int bad = 0;
    for (int64_t i = 0; i < m * n; i++)
      if (!(fabs((double)got[i] - (double)want[i]) <= 1e-4 + 4e-6 * mag[i]) && bad++ < 5)
        CHECK(false, "%s[%lld]: got %.9g want %.9g (sum of |terms| %.4g)", what, (long long)i, got[i], want[i], mag[i]);
  }
  tg_scope_end();
out:
  CHECK(blocks && w && x && want && got && mag, "malloc");
  free(mag);
  free(blocks);
  free(w);
  free(x);
  free(want);
  free(got);
  return kernels;
}

/* Every row count is one kernel reading the blocks, the dequantize fused into it (no float32 copy of the
 * weight): one row (a decode step's matrix-vector product) and many (prefill: the weight decoded once per packed
 * panel of the kernel, shared by its rows; the next test checks the panel). Odd row counts (7, 33, 129: a last
 * partial tile) and N of 5 (no vector lanes along N) and 32 (two vectors of 16, the packed panel) */
TEST(test_gguf_quantized_matmul_every_type) {
  static const int64_t mn[][2] = {{1, 5}, {3, 5}, {1, 32}, {7, 32}, {33, 32}, {129, 32}};
  for (int i = 0; i < 8; i++) {
    const char *name = gguf_type_of(gguf_block_types[i])->name;
    for (int s = 0; s < 6; s++) {
      int kn = quantized_matmul(gguf_block_types[i], mn[s][0], mn[s][1]);
      CHECK(kn == 1, "%s: a %lld-row product ran %d kernels, expected 1 (the dequantize fused)", name,
            (long long)mn[s][0], kn);
    }
  }
}

/* The speed structure of a prefill product x (m, k) @ W^T with a quantized W (a GEMM): one kernel whose opts
 * PACK the decoded weight (the decode runs once per panel of N columns, into a float32 buffer the kernel's row
 * tiles read), with vector accumulators; checked for AVX2 (8 floats) and AVX-512 (16) vectors. */
static char *gemm_source(uint32_t type, int64_t m, int vec_bytes, kernel_info *info, int *nkernels) {
  const gguf_type_info *ti = gguf_type_of(type);
  int64_t n = 64, k = 512;
  tg_tensor *x = tg_ones(TG_FLOAT32, 2, (int64_t[]){m, k});
  tg_tensor *b = tg_zeros(TG_UINT8, 2, (int64_t[]){n * k / ti->block, ti->size});
  if (tg_realize(x) != TG_OK || tg_realize(b) != TG_OK) return NULL;
  tg_tensor *y = tg_matmul(x, tg_transpose(tg_reshape(gguf_dequantize(b, type), 2, (int64_t[]){n, k}), 0, 1));
  schedule s;
  if (!y || schedule_create(1, &y->u, &s) != TG_OK) return NULL;
  *nkernels = s.nkernels;
  char *src = NULL;
  if (s.nkernels == 1) {
    kernel_state ks;
    ks_init(&ks, s.kernels[0].ast, (opt_target){.nthreads = 2, .vec_bytes = vec_bytes});
    hand_coded_optimizations(&ks);
    memset(info, 0, sizeof *info);
    uop *fin = codegen_finish(&ks, info);
    linear_program lp = {0};
    src = fin && linearize(fin, &lp, info) ? render_c(info->name, &lp, info) : NULL;
    linear_program_free(&lp);
  }
  schedule_free(&s);
  return src;
}

TEST(test_gguf_quantized_gemm_decodes_into_a_packed_panel) {
  REQUIRE_CPU();
  for (int i = 0; i < 8; i++)
    for (int vb = 32; vb <= 64; vb *= 2) {
      tg_scope_begin();
      kernel_info info;
      int nk = 0;
      char *src = gemm_source(gguf_block_types[i], 128, vb, &info, &nk);
      CHECK(src && nk == 1 && strstr(info.opts, "PACK(") && strstr(src, "tg_float_v acc") && strstr(src, "local0"),
            "%s, %d-byte vectors: %d kernels, opts %s: not one kernel with the decoded weight packed:\n%s",
            gguf_type_of(gguf_block_types[i])->name, vb, nk, src ? info.opts : "-", src ? src : tg_error());
      free(src);
      tg_scope_end();
    }
}

/* The speed structure of a decode step's product x (1, k) @ W^T on a CPU with 16-float vectors: the heuristic
 * unrolls the reduce by the weight's (sub-)block, so the block's scale is computed once, and its values are
 * vector lanes: one widening load of the packed bytes (tg_ld_u8), unpacked and converted in vectors, multiplied
 * into vector accumulators (no per-lane loop). F16 weights: one converting load (tg_ld_f16). */
static char *matvec_source(uint32_t type, kernel_info *info) {
  const gguf_type_info *ti = gguf_type_of(type);
  int64_t n = 16, k = 512;
  /* realized inputs (buffers, not constants the scheduler could fold) */
  tg_tensor *x = tg_ones(TG_FLOAT32, 2, (int64_t[]){1, k});
  tg_tensor *b = type == GGML_F16 ? tg_ones(TG_FLOAT16, 2, (int64_t[]){n, k})
                                  : tg_zeros(TG_UINT8, 2, (int64_t[]){n * k / ti->block, ti->size});
  if (tg_realize(x) != TG_OK || tg_realize(b) != TG_OK) return NULL;
  tg_tensor *w = type == GGML_F16 ? tg_cast(b, TG_FLOAT32) : tg_reshape(gguf_dequantize(b, type), 2, (int64_t[]){n, k});
  tg_tensor *y = tg_matmul(x, tg_transpose(w, 0, 1));
  schedule s;
  if (!y || schedule_create(1, &y->u, &s) != TG_OK) return NULL;
  char *src = NULL;
  if (s.nkernels == 1) {
    kernel_state ks;
    ks_init(&ks, s.kernels[s.nkernels - 1].ast, (opt_target){.nthreads = 2, .vec_bytes = 64});
    hand_coded_optimizations(&ks);
    memset(info, 0, sizeof *info);
    uop *fin = codegen_finish(&ks, info);
    linear_program lp = {0};
    src = fin && linearize(fin, &lp, info) ? render_c(info->name, &lp, info) : NULL;
    linear_program_free(&lp);
  }
  schedule_free(&s);
  return src;
}

TEST(test_gguf_quantized_matvec_is_vector_code) {
  REQUIRE_CPU();
  for (int i = 0; i <= 8; i++) {
    uint32_t type = i < 8 ? gguf_block_types[i] : GGML_F16;
    tg_scope_begin();
    kernel_info info;
    char *src = matvec_source(type, &info);
    const char *load = type == GGML_F16 ? "tg_ld_f16(" : "tg_ld_u8(";
    CHECK(src && strstr(src, load) && strstr(src, "tg_float_v acc") && !strstr(src, "[l_] = "),
          "%s: not vector code with a widening load %s (opts %s):\n%s", gguf_type_of(type)->name, load, info.opts,
          src ? src : tg_error());
    free(src);
    tg_scope_end();
  }
}

/* F16 weights (their products are vector code with a converting load: the test above): x (m, k) @ W^T against
 * the float16 values in double precision, k odd (a masked last vector) and whole vectors, m = 1 and 3 */
TEST(test_gguf_f16_weight_products_match_reference) {
  static const int64_t ks[3] = {37, 96, 515};
  for (int ki = 0; ki < 3; ki++)
    for (int64_t m = 1; m <= 3; m += 2) {
      int64_t n = 21, k = ks[ki];
      uint8_t *wb = malloc((size_t)(n * k) * 2);
      float *x = malloc((size_t)(m * k) * sizeof *x), *want = malloc((size_t)(m * n) * sizeof *want),
            *got = malloc((size_t)(m * n) * sizeof *got);
      if (!wb || !x || !want || !got) { CHECK(false, "malloc"); free(wb); free(x); free(want); free(got); return; }
      for (int64_t i = 0; i < n * k; i++) {
        uint16_t h = (uint16_t)((rnd() & 1) << 15 | (8 + rnd() % 14) << 10 | (rnd() & 1023));
        wb[2 * i] = (uint8_t)h;
        wb[2 * i + 1] = (uint8_t)(h >> 8);
      }
      for (int64_t i = 0; i < m * k; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          double acc = 0;
          for (int64_t c = 0; c < k; c++) acc += (double)x[i * k + c] * (double)gguf_ref_half(wb + 2 * (j * k + c));
          want[i * n + j] = (float)acc;
        }
      tg_scope_begin();
      tg_tensor *w = tg_from_data(TG_FLOAT16, 2, (int64_t[]){n, k}, wb, (size_t)(n * k) * 2);
      tg_tensor *xt = tg_from_data(TG_FLOAT32, 2, (int64_t[]){m, k}, x, (size_t)(m * k) * sizeof *x);
      tg_tensor *y = tg_matmul(xt, tg_transpose(tg_cast(w, TG_FLOAT32), 0, 1));
      if (y && tg_to_host(y, got, (size_t)(m * n) * sizeof *got) == TG_OK) {
        char what[64];
        snprintf(what, sizeof what, "(%lld, %lld) @ F16 (%lld, %lld)^T", (long long)m, (long long)k, (long long)n, (long long)k);
        check_close_f32(what, got, want, m * n, 1e-4, 1e-4, __FILE__, __LINE__);
      } else {
        CHECK(false, "F16 product: %s", tg_error());
      }
      tg_scope_end();
      free(wb);
      free(x);
      free(want);
      free(got);
    }
}
