/* test_schedule.c — fusion: the kernel counts tinygrad gets for known graphs, values checked too. */
#include <math.h>
#include <stdlib.h>

#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "test.h"

static uint64_t xs = 88172645463325252ULL;
static float frand(void) {
  xs ^= xs << 13; xs ^= xs >> 7; xs ^= xs << 17;
  return (float)((xs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static tg_tensor *rand_t(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *d = malloc((size_t)n * sizeof *d);
  for (int64_t i = 0; i < n; i++) d[i] = frand();
  tg_tensor *t = tg_from_data(TG_FLOAT32, ndim, shape, d, (size_t)n * sizeof *d);
  free(d);
  return t;
}

static float *host(tg_tensor *t) {
  int64_t n = tg_numel(t);
  float *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  if (tg_to_host(t, d, (size_t)n * sizeof *d) != TG_OK) { free(d); return NULL; }
  return d;
}

/* realizes t and returns how many kernels that took */
static int kernels_of(tg_tensor *t) {
  if (tg_realize(t) != TG_OK) return -1;
  return (int)tg_kernel_count_last();
}

TEST(test_schedule_fuses_elementwise_into_reduce) {
  tg_scope_begin();
  tg_tensor *a = rand_t(2, (int64_t[]){16, 33}), *b = rand_t(2, (int64_t[]){16, 33});
  float *ha = host(a), *hb = host(b);
  tg_tensor *s = tg_sum(tg_add(a, b), 1, (int[]){1}, false);
  CHECK_T(s);
  CHECK(kernels_of(s) == 1, "(a+b).sum(1) took %d kernels, want 1", (int)tg_kernel_count_last());
  float *hs = host(s), want[16];
  for (int i = 0; i < 16; i++) {
    double acc = 0;
    for (int j = 0; j < 33; j++) acc += (double)ha[i * 33 + j] + hb[i * 33 + j];
    want[i] = (float)acc;
  }
  CHECK_CLOSE("sum", hs, want, 16);
  free(ha); free(hb); free(hs);
  tg_scope_end();
}

static void ref_matmul(const float *a, const float *b, float *c, int n, int k, int m) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++) {
      double acc = 0;
      for (int p = 0; p < k; p++) acc += (double)a[i * k + p] * b[p * m + j];
      c[i * m + j] = (float)acc;
    }
}

TEST(test_schedule_matmul_relu_is_one_kernel) {
  tg_scope_begin();
  tg_tensor *a = rand_t(2, (int64_t[]){13, 7}), *b = rand_t(2, (int64_t[]){7, 9});
  tg_tensor *r = tg_relu(tg_matmul(a, b));
  CHECK_T(r);
  CHECK(kernels_of(r) == 1, "matmul(a,b).relu() took %d kernels, want 1", (int)tg_kernel_count_last());
  float *ha = host(a), *hb = host(b), *hr = host(r), want[13 * 9];
  ref_matmul(ha, hb, want, 13, 7, 9);
  for (int i = 0; i < 13 * 9; i++) want[i] = want[i] > 0 ? want[i] : 0;
  CHECK_CLOSE("relu(matmul)", hr, want, 13 * 9);
  free(ha); free(hb); free(hr);
  tg_scope_end();
}

TEST(test_schedule_nested_reduce_is_one_kernel) {
  tg_scope_begin();
  tg_tensor *x = rand_t(2, (int64_t[]){8, 64}), *w = rand_t(2, (int64_t[]){64, 64});
  tg_tensor *r = tg_sum(tg_relu(tg_matmul(x, w)), 1, (int[]){1}, false);
  CHECK_T(r);
  CHECK(kernels_of(r) == 1, "matmul(x,w).relu().sum(1) took %d kernels, want 1", (int)tg_kernel_count_last());
  float *hx = host(x), *hw = host(w), *hr = host(r), mm[8 * 64], want[8];
  ref_matmul(hx, hw, mm, 8, 64, 64);
  for (int i = 0; i < 8; i++) {
    double acc = 0;
    for (int j = 0; j < 64; j++) acc += mm[i * 64 + j] > 0 ? mm[i * 64 + j] : 0;
    want[i] = (float)acc;
  }
  CHECK_CLOSE("sum(relu(matmul))", hr, want, 8);
  free(hx); free(hw); free(hr);
  tg_scope_end();
}

/* a 2x2 average pool over relu(1x1 conv) with a long reduce (densenet's transition): the conv is stored, so it
 * keeps its own output loops for vectors and tiles (schedule.c, big_nested), and the pool is a second kernel */
TEST(test_schedule_pool_over_big_conv_stores_the_conv) {
  tg_scope_begin();
  enum { CI = 256, CO = 32, H = 16 };
  tg_tensor *x = rand_t(4, (int64_t[]){1, CI, H, H}), *w = rand_t(4, (int64_t[]){CO, CI, 1, 1});
  tg_tensor *r = tg_avg_pool2d(tg_relu(tg_conv2d(x, w, NULL, (tg_conv_opts){0})), (tg_pool_opts){0});
  CHECK_T(r);
  CHECK(kernels_of(r) == 2, "avg_pool2d(relu(conv 1x1, %d in)) took %d kernels, want 2", CI, (int)tg_kernel_count_last());
  float *hx = host(x), *hw = host(w), *hr = host(r);
  float *conv = malloc(sizeof(float) * CO * H * H), *want = malloc(sizeof(float) * CO * (H / 2) * (H / 2));
  for (int o = 0; o < CO; o++)
    for (int p = 0; p < H * H; p++) {
      double acc = 0;
      for (int c = 0; c < CI; c++) acc += (double)hx[c * H * H + p] * hw[o * CI + c];
      conv[o * H * H + p] = acc > 0 ? (float)acc : 0;
    }
  for (int o = 0; o < CO; o++)
    for (int y = 0; y < H / 2; y++)
      for (int xx = 0; xx < H / 2; xx++) {
        const float *c = conv + o * H * H + 2 * y * H + 2 * xx;
        want[(o * (H / 2) + y) * (H / 2) + xx] = (c[0] + c[1] + c[H] + c[H + 1]) / 4;
      }
  CHECK_CLOSE("avg_pool2d(relu(conv))", hr, want, CO * (H / 2) * (H / 2));
  free(hx); free(hw); free(hr); free(conv); free(want);
  tg_scope_end();
}

/* a max pool with padding 1 over relu(conv) (ResNet's stem): the conv's output is stored at its own size, not
 * on the pool's padded grid (pad_with_value: the pool applies the pad and -inf as it loads); values vs C */
TEST(test_schedule_max_pool_pad_is_not_stored_padded) {
  tg_scope_begin();
  enum { CI = 16, CO = 16, H = 16, OH = 8 };
  tg_tensor *x = rand_t(4, (int64_t[]){1, CI, H, H}), *w = rand_t(4, (int64_t[]){CO, CI, 3, 3});
  tg_tensor *r = tg_max_pool2d(tg_relu(tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)})),
                               (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .padding = TG_INTS(1)});
  CHECK_T(r);
  schedule s;
  CHECK(schedule_create(1, &r->u, &s) == TG_OK, "%s", tg_error());
  for (int k = 0; k < s.nkernels; k++)
    CHECK(uop_numel(s.kernels[k].output) == CO * H * H || uop_numel(s.kernels[k].output) == CO * OH * OH,
          "kernel %d stores %lld values, want the conv's %d or the pool's %d", k, (long long)uop_numel(s.kernels[k].output),
          CO * H * H, CO * OH * OH);
  schedule_free(&s);
  float *hx = host(x), *hw = host(w), *hr = host(r), conv[CO * H * H], want[CO * OH * OH];
  for (int o = 0; o < CO; o++)
    for (int i = 0; i < H; i++)
      for (int j = 0; j < H; j++) {
        double acc = ref_conv3x3_at(hx, hw, CI, H, o, i, j);
        conv[(o * H + i) * H + j] = acc > 0 ? (float)acc : 0;
      }
  ref_max_pool_3s2p1(conv, CO, H, want);
  CHECK_CLOSE("max_pool2d(relu(conv))", hr, want, CO * OH * OH);
  free(hx); free(hw); free(hr);
  tg_scope_end();
}

TEST(test_schedule_elementwise_chain_of_ten_is_one_kernel) {
  tg_scope_begin();
  int64_t sh[2] = {31, 17};
  tg_tensor *in[4];
  float *h[4];
  for (int i = 0; i < 4; i++) { in[i] = rand_t(2, sh); h[i] = host(in[i]); }
  tg_tensor *y = tg_add(in[0], in[1]);                 /* 1 */
  y = tg_mul(y, in[2]);                                 /* 2 */
  y = tg_sub(y, in[3]);                                 /* 3 */
  y = tg_relu(y);                                       /* 4 */
  y = tg_add_scalar(y, 0.5);                            /* 5 */
  y = tg_mul(y, in[0]);                                 /* 6 */
  y = tg_maximum(y, in[1]);                             /* 7 */
  y = tg_neg(y);                                        /* 8 */
  y = tg_add(y, in[2]);                                 /* 9 */
  y = tg_mul_scalar(y, 3.0);                            /* 10 */
  CHECK_T(y);
  CHECK(kernels_of(y) == 1, "10 elementwise ops took %d kernels, want 1", (int)tg_kernel_count_last());
  float *hy = host(y), want[31 * 17];
  for (int i = 0; i < 31 * 17; i++) {
    float v = (h[0][i] + h[1][i]) * h[2][i] - h[3][i];
    v = v > 0 ? v : 0;
    v = (v + 0.5f) * h[0][i];
    v = v > h[1][i] ? v : h[1][i];
    want[i] = (-v + h[2][i]) * 3.0f;
  }
  CHECK_CLOSE("chain", hy, want, 31 * 17);
  for (int i = 0; i < 4; i++) free(h[i]);
  free(hy);
  tg_scope_end();
}

TEST(test_schedule_permute_reshape_add_is_one_kernel) {
  tg_scope_begin();
  tg_tensor *a = rand_t(3, (int64_t[]){4, 6, 5});
  tg_tensor *y = tg_add_scalar(tg_reshape(tg_permute(a, 3, (int[]){2, 0, 1}), 2, (int64_t[]){5, 24}), 1.0);
  CHECK_T(y);
  CHECK(kernels_of(y) == 1, "permute+reshape+add took %d kernels, want 1", (int)tg_kernel_count_last());
  float *ha = host(a), *hy = host(y), want[120];
  for (int k = 0; k < 5; k++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 6; j++) want[k * 24 + i * 6 + j] = ha[i * 30 + j * 5 + k] + 1.0f;
  CHECK_CLOSE("permute reshape add", hy, want, 120);
  free(ha); free(hy);
  tg_scope_end();
}

TEST(test_schedule_softmax_is_one_kernel) {
  tg_scope_begin();
  tg_tensor *a = rand_t(2, (int64_t[]){9, 40});
  tg_tensor *s = tg_softmax(a, 1);
  CHECK_T(s);
  int k = kernels_of(s);
  CHECK(k == 1, "softmax took %d kernels, want 1 (max and sum computed per row inside it)", k);
  float *ha = host(a), *hs = host(s), want[360];
  for (int i = 0; i < 9; i++) {
    double m = -1e30, sum = 0;
    for (int j = 0; j < 40; j++) m = ha[i * 40 + j] > m ? ha[i * 40 + j] : m;
    for (int j = 0; j < 40; j++) sum += exp(ha[i * 40 + j] - m);
    for (int j = 0; j < 40; j++) want[i * 40 + j] = (float)(exp(ha[i * 40 + j] - m) / sum);
  }
  CHECK_CLOSE("softmax", hs, want, 360);
  free(ha); free(hs);
  tg_scope_end();
}

/* gelu reads its input four times; on a matmul's output all four are the matmul kernel's epilogue, so the
 * matmul's value is not stored for them: one kernel */
TEST(test_schedule_gelu_of_matmul_is_one_kernel) {
  tg_scope_begin();
  tg_tensor *a = rand_t(2, (int64_t[]){17, 12}), *b = rand_t(2, (int64_t[]){12, 40});
  tg_tensor *g = tg_gelu(tg_add_scalar(tg_matmul(a, b), 0.25));
  CHECK_T(g);
  int k = kernels_of(g);
  CHECK(k == 1, "gelu(matmul + c) took %d kernels, want 1", k);
  float *ha = host(a), *hb = host(b), *hg = host(g), want[17 * 40];
  ref_matmul(ha, hb, want, 17, 12, 40);
  for (int i = 0; i < 17 * 40; i++) {
    double x = want[i] + 0.25;
    want[i] = (float)(0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
  }
  CHECK_CLOSE("gelu(matmul)", hg, want, 17 * 40);
  free(ha); free(hb); free(hg);
  tg_scope_end();
}

/* a matmul read by its kernel's epilogue and by a row reduce of the same kernel stays stored: fused, each
 * read would run the matmul again */
TEST(test_schedule_matmul_read_in_and_out_of_a_row_reduce_is_stored) {
  tg_scope_begin();
  tg_tensor *a = rand_t(2, (int64_t[]){9, 20}), *b = rand_t(2, (int64_t[]){20, 48});
  tg_tensor *m = tg_matmul(a, b);
  tg_tensor *o = tg_add(tg_mul(m, m), tg_sum(m, 1, (int[]){1}, true));
  CHECK_T(o);
  int k = kernels_of(o);
  CHECK(k == 2, "m*m + m.sum(1) took %d kernels, want 2 (matmul stored, one row kernel)", k);
  float *ha = host(a), *hb = host(b), *ho = host(o), mm[9 * 48], want[9 * 48];
  ref_matmul(ha, hb, mm, 9, 20, 48);
  for (int i = 0; i < 9; i++) {
    double sum = 0;
    for (int j = 0; j < 48; j++) sum += mm[i * 48 + j];
    for (int j = 0; j < 48; j++) want[i * 48 + j] = (float)((double)mm[i * 48 + j] * mm[i * 48 + j] + sum);
  }
  CHECK_CLOSE("m*m + m.sum(1)", ho, want, 9 * 48);
  free(ha); free(hb); free(ho);
  tg_scope_end();
}

/* causal attention: the scores (a matmul, scaled and masked, stored because a max reads them), exp(s - max)
 * with the max computed per row, its normalization with the sum per row, and the second matmul: four kernels
 * (one exp per score; a single softmax kernel would compute each exp twice, 30% slower at 128x128) */
/* the masked scores, the softmax (max, sum and output loops over a row, the mask applied in each), the matmul with v */
TEST(test_schedule_attention_is_three_kernels) {
  enum { L = 24, E = 8 };  /* rows of 16 or more are fused (FUSE_ROW_MIN) */
  tg_scope_begin();
  tg_tensor *q = rand_t(3, (int64_t[]){2, L, E}), *k = rand_t(3, (int64_t[]){2, L, E}), *v = rand_t(3, (int64_t[]){2, L, E});
  tg_tensor *o = tg_scaled_dot_product_attention(q, k, v, NULL, 0, true, false);
  CHECK_T(o);
  int n = kernels_of(o);
  CHECK(n == 3, "causal attention took %d kernels, want 3", n);
  float *hq = host(q), *hk = host(k), *hv = host(v), *ho = host(o), want[2 * L * E];
  for (int b = 0; b < 2; b++)
    for (int i = 0; i < L; i++) {
      double s[L], mx = -1e30, sum = 0;
      for (int j = 0; j <= i; j++) {
        s[j] = 0;
        for (int e = 0; e < E; e++) s[j] += (double)hq[(b * L + i) * E + e] * hk[(b * L + j) * E + e];
        s[j] /= sqrt((double)E);
        mx = s[j] > mx ? s[j] : mx;
      }
      for (int j = 0; j <= i; j++) sum += exp(s[j] - mx);
      for (int e = 0; e < E; e++) {
        double acc = 0;
        for (int j = 0; j <= i; j++) acc += exp(s[j] - mx) / sum * hv[(b * L + j) * E + e];
        want[(b * L + i) * E + e] = (float)acc;
      }
    }
  CHECK_CLOSE("attention", ho, want, 2 * L * E);
  free(hq); free(hk); free(hv); free(ho);
  tg_scope_end();
}

TEST(test_schedule_layernorm_is_one_kernel) {
  tg_scope_begin();
  tg_tensor *x = rand_t(2, (int64_t[]){6, 50});
  tg_tensor *mean = tg_mean(x, 1, (int[]){1}, true);
  tg_tensor *xc = tg_sub(x, mean);
  tg_tensor *var = tg_mean(tg_mul(xc, xc), 1, (int[]){1}, true);
  tg_tensor *y = tg_div(xc, tg_sqrt(tg_add_scalar(var, 1e-5)));
  CHECK_T(y);
  int k = kernels_of(y);
  CHECK(k == 1, "layernorm took %d kernels, want 1 (mean and variance computed per row inside it)", k);
  float *hx = host(x), *hy = host(y), want[300];
  for (int i = 0; i < 6; i++) {
    double m = 0, v = 0;
    for (int j = 0; j < 50; j++) m += hx[i * 50 + j];
    m /= 50;
    for (int j = 0; j < 50; j++) v += (hx[i * 50 + j] - m) * (hx[i * 50 + j] - m);
    v /= 50;
    for (int j = 0; j < 50; j++) want[i * 50 + j] = (float)((hx[i * 50 + j] - m) / sqrt(v + 1e-5));
  }
  CHECK_CLOSE("layernorm", hy, want, 300);
  free(hx); free(hy);
  tg_scope_end();
}

TEST(test_schedule_outputs_sharing_work_together_use_fewer_kernels) {
  tg_scope_begin();
  tg_tensor *x = rand_t(2, (int64_t[]){24, 8});
  /* both outputs need the same column max (a max over rows would be computed inside each output's kernel) */
  tg_tensor *m = tg_max(x, 1, (int[]){0}, true);
  tg_tensor *o1 = tg_mul_scalar(tg_sub(x, m), 2.0), *o2 = tg_exp(tg_sub(x, m));
  CHECK_T(o2);
  /* p1, p2: built again, they are the interned nodes of o1 and o2 (built now: a value cached on a node lives as
   * long as the node, and a collection between the realizes below frees nodes no tensor holds); q1, q2 are a
   * fresh graph */
  tg_tensor *p1 = tg_mul_scalar(tg_sub(x, m), 2.0), *p2 = tg_exp(tg_sub(x, m));
  CHECK_T(p2);
  CHECK(tg_realize(o1) == TG_OK, "%s", tg_error());
  int apart = (int)tg_kernel_count_last();
  CHECK(tg_realize(o2) == TG_OK, "%s", tg_error());
  apart += (int)tg_kernel_count_last();
  tg_tensor *y = tg_mul_scalar(x, 2.0);
  tg_tensor *m2 = tg_max(y, 1, (int[]){0}, true);
  tg_tensor *q1 = tg_mul_scalar(tg_sub(y, m2), 2.0), *q2 = tg_exp(tg_sub(y, m2));
  tg_tensor *both[2] = {q1, q2};
  CHECK(tg_realize_many(2, both) == TG_OK, "%s", tg_error());
  int together = (int)tg_kernel_count_last();
  CHECK(together < apart, "together %d kernels, apart %d", together, apart);
  float *h1 = host(o1), *h2 = host(o2), *g1 = host(q1), *g2 = host(q2), *hx = host(x);
  float w1[192], w2[192], v1[192], v2[192];
  for (int i = 0; i < 8; i++) {
    float mx = -1e30f, my = -1e30f;
    for (int j = 0; j < 24; j++) {
      mx = hx[j * 8 + i] > mx ? hx[j * 8 + i] : mx;
      my = 2 * hx[j * 8 + i] > my ? 2 * hx[j * 8 + i] : my;
    }
    for (int j = 0; j < 24; j++) {
      w1[j * 8 + i] = 2 * (hx[j * 8 + i] - mx);
      w2[j * 8 + i] = expf(hx[j * 8 + i] - mx);
      v1[j * 8 + i] = 2 * (2 * hx[j * 8 + i] - my);
      v2[j * 8 + i] = expf(2 * hx[j * 8 + i] - my);
    }
  }
  CHECK_CLOSE("o1", h1, w1, 192);
  CHECK_CLOSE("o2", h2, w2, 192);
  CHECK_CLOSE("q1", g1, v1, 192);
  CHECK_CLOSE("q2", g2, v2, 192);
  /* p1 and p2 are the already-realized o1 and o2: nothing runs again */
  tg_tensor *pp[2] = {p1, p2};
  CHECK(tg_realize_many(2, pp) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 0, "realized values were recomputed: %d kernels", (int)tg_kernel_count_last());
  free(h1); free(h2); free(g1); free(g2); free(hx);
  tg_scope_end();
}

/* a reduce read through a view by two kernels (a weight's gradient reshaped, then both of Adam's moments)
 * is stored once, not recomputed in each; the two consumers, of one shape, are one kernel of two outputs */
TEST(test_schedule_reduce_shared_through_a_view_runs_once) {
  tg_scope_begin();
  tg_tensor *x = rand_t(3, (int64_t[]){64, 6, 4});
  tg_tensor *g = tg_reshape(tg_sum(x, 1, (int[]){0}, false), 2, (int64_t[]){4, 6});
  tg_tensor *o1 = tg_mul_scalar(g, 2.0), *o2 = tg_mul(g, g);
  CHECK_T(o2);
  tg_tensor *both[2] = {o1, o2};
  CHECK(tg_realize_many(2, both) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 2, "sum, then both consumers: %d kernels, want 2", (int)tg_kernel_count_last());
  float *hx = host(x), *h1 = host(o1), *h2 = host(o2), w1[24], w2[24];
  for (int i = 0; i < 24; i++) {
    double acc = 0;
    for (int n = 0; n < 64; n++) acc += hx[n * 24 + i];
    w1[i] = (float)(2 * acc);
    w2[i] = (float)(acc * acc);
  }
  CHECK_CLOSE("2g", h1, w1, 24);
  CHECK_CLOSE("g*g", h2, w2, 24);
  free(hx); free(h1); free(h2);
  tg_scope_end();
}

/* uint8 images cast to float32 and read by a convolution's windows are stored as float32 first (the vector
 * path has no uint8 lanes): two kernels, and the values of the plain convolution */
TEST(test_schedule_widened_uint8_under_a_conv_is_stored) {
  tg_scope_begin();
  uint8_t px[2 * 6 * 6];
  for (int i = 0; i < 72; i++) px[i] = (uint8_t)(i * 37 % 251);
  tg_tensor *x = tg_from_data(TG_UINT8, 4, (int64_t[]){2, 1, 6, 6}, px, sizeof px);
  tg_tensor *w = rand_t(4, (int64_t[]){4, 1, 3, 3});
  CHECK(tg_realize(x) == TG_OK && tg_realize(w) == TG_OK, "%s", tg_error());
  tg_tensor *y = tg_conv2d(tg_cast(x, TG_FLOAT32), w, NULL, (tg_conv_opts){0});
  CHECK_T(y);
  CHECK(kernels_of(y) == 2, "cast + conv took %d kernels, want 2", (int)tg_kernel_count_last());
  float *hw = host(w), *hy = host(y), want[2 * 4 * 4 * 4];
  for (int n = 0; n < 2; n++)
    for (int co = 0; co < 4; co++)
      for (int oy = 0; oy < 4; oy++)
        for (int ox = 0; ox < 4; ox++) {
          double acc = 0;
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) acc += (double)px[n * 36 + (oy + ky) * 6 + ox + kx] * hw[co * 9 + ky * 3 + kx];
          want[((n * 4 + co) * 4 + oy) * 4 + ox] = (float)acc;
        }
  CHECK_CLOSE("conv of uint8", hy, want, 2 * 4 * 4 * 4);
  free(hw); free(hy);
  tg_scope_end();
}

TEST(test_schedule_realized_tensor_is_not_recomputed) {
  tg_scope_begin();
  tg_tensor *a = rand_t(1, (int64_t[]){100});
  tg_tensor *b = tg_mul_scalar(tg_exp(a), 2.0);
  CHECK(kernels_of(b) == 1, "first realize");
  CHECK(kernels_of(b) == 0, "second realize of the same tensor ran %d kernels", (int)tg_kernel_count_last());
  tg_tensor *c = tg_add_scalar(b, 1.0);
  CHECK(kernels_of(c) == 1, "a consumer of a realized tensor took %d kernels", (int)tg_kernel_count_last());
  tg_scope_end();
}

TEST(test_schedule_kernels_run_in_dependency_order) {
  tg_scope_begin();
  tg_tensor *x = rand_t(2, (int64_t[]){30, 5});
  /* a chain of three dependent materializations: each reduce (over columns: they stay realized, a row's
   * would be computed inside its consumer) is broadcast into the next */
  tg_tensor *a = tg_sub(x, tg_max(x, 1, (int[]){0}, true));
  tg_tensor *b = tg_sub(a, tg_mean(a, 1, (int[]){0}, true));
  tg_tensor *c = tg_div(b, tg_add_scalar(tg_sum(tg_abs(b), 1, (int[]){0}, true), 1.0));
  CHECK_T(c);
  CHECK(kernels_of(c) == 4, "expected 4 kernels, got %d", (int)tg_kernel_count_last());
  float *hx = host(x), *hc = host(c), want[150];
  for (int i = 0; i < 5; i++) {
    float m = -1e30f;
    double mean = 0, s = 0;
    float col[30];
    for (int j = 0; j < 30; j++) m = hx[j * 5 + i] > m ? hx[j * 5 + i] : m;
    for (int j = 0; j < 30; j++) { col[j] = hx[j * 5 + i] - m; mean += col[j]; }
    mean /= 30;
    for (int j = 0; j < 30; j++) { col[j] = (float)(col[j] - mean); s += fabsf(col[j]); }
    for (int j = 0; j < 30; j++) want[j * 5 + i] = (float)(col[j] / (s + 1.0));
  }
  CHECK_CLOSE("chain of reductions", hc, want, 150);
  free(hx); free(hc);
  tg_scope_end();
}

/* a matmul row placed among many rows (a KV-cache write): the padded kernel would run the whole reduce for
 * every row, valid or not, so the row is stored first; a pad that adds little keeps the reduce fused */
TEST(test_schedule_reduce_seen_through_a_growing_pad_is_stored) {
  tg_scope_begin();
  tg_tensor *x = rand_t(2, (int64_t[]){1, 64}), *w = rand_t(2, (int64_t[]){64, 32});
  tg_tensor *c = rand_t(2, (int64_t[]){512, 32});
  tg_variable *pos = tg_variable_new("pos", 0, 511);
  CHECK_T(pos);
  tg_variable_bind(pos, 300);
  float *hx = host(x), *hw = host(w), *hc = host(c), row[32];
  ref_matmul(hx, hw, row, 1, 64, 32);
  tg_tensor *placed[2] = {tg_add(c, tg_pad_axes(tg_matmul(x, w), 2, (int64_t[]){300, 211, 0, 0}, 0)),
                          tg_add(c, tg_pad_at(tg_matmul(x, w), 0, pos, 512))};
  for (int k = 0; k < 2; k++) {
    CHECK_T(placed[k]);
    CHECK(kernels_of(placed[k]) == 2, "%s: %d kernels, want 2 (the row, then the placed sum)", k ? "pad_at" : "pad",
          (int)tg_kernel_count_last());
    float *got = host(placed[k]), *want = malloc(512 * 32 * sizeof *want);
    for (int i = 0; got && want && i < 512 * 32; i++) want[i] = hc[i] + (i / 32 == 300 ? row[i % 32] : 0);
    if (got && want) CHECK_CLOSE("placed row", got, want, 512 * 32);
    free(got);
    free(want);
  }
  tg_tensor *a = rand_t(2, (int64_t[]){16, 16}), *b = rand_t(2, (int64_t[]){16, 16});
  tg_tensor *small = tg_pad_axes(tg_matmul(a, b), 2, (int64_t[]){1, 1, 1, 1}, 0);
  CHECK_T(small);
  CHECK(kernels_of(small) == 1, "matmul padded by one: %d kernels, want 1", (int)tg_kernel_count_last());
  free(hx); free(hw); free(hc);
  tg_variable_free(pos);
  tg_scope_end();
}

/* plain C: y[co][i][j] = sum over ci, a, b of w[co][ci][a][b] * x[ci][i + a - p][j + b - p] (0 outside x) */
static void conv_chw_ref(const float *x, int ci, int h, int wd, const float *w, int co, int p, float *y) {
  for (int o = 0; o < co; o++)
    for (int i = 0; i < h; i++)
      for (int j = 0; j < wd; j++) {
        double acc = 0;
        for (int c = 0; c < ci; c++)
          for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
              int yy = i + a - p, xx = j + b - p;
              if (yy >= 0 && yy < h && xx >= 0 && xx < wd) acc += (double)w[((o * ci + c) * 3 + a) * 3 + b] * x[(c * h + yy) * wd + xx];
            }
        y[(o * h + i) * wd + j] = (float)acc;
      }
}

/* A convolution whose output the next, padded convolution reads is computed into the padded buffer in one kernel
 * (lower.c lowers the padded source over the padded axes' exact ranges and drops the pad's mask from loads that
 * do not depend on them): the border must stay zero and every value must match the two convolutions in plain C,
 * at sizes that are not multiples of the vector width. */
TEST(test_schedule_conv_into_a_padded_conv_matches_plain_c) {
  enum { C0 = 3, C1 = 5, C2 = 4, HH = 9, WW = 13 };
  static float x[C0 * HH * WW], w1[C1 * C0 * 9], w2[C2 * C1 * 9], mid[C1 * HH * WW], want[C2 * HH * WW],
      got[C2 * HH * WW];
  for (int i = 0; i < C0 * HH * WW; i++) x[i] = (float)((i * 37 + 11) % 23) / 11.0f - 1.0f;
  for (int i = 0; i < C1 * C0 * 9; i++) w1[i] = (float)((i * 17 + 5) % 19) / 9.0f - 1.0f;
  for (int i = 0; i < C2 * C1 * 9; i++) w2[i] = (float)((i * 29 + 3) % 13) / 6.0f - 1.0f;
  conv_chw_ref(x, C0, HH, WW, w1, C1, 1, mid);
  for (int i = 0; i < C1 * HH * WW; i++) mid[i] = mid[i] > 0 ? mid[i] : 0;
  conv_chw_ref(mid, C1, HH, WW, w2, C2, 1, want);
  tg_scope_begin();
  tg_tensor *xt = tg_from_data(TG_FLOAT32, 4, (int64_t[]){1, C0, HH, WW}, x, sizeof x);
  tg_tensor *k1 = tg_from_data(TG_FLOAT32, 4, (int64_t[]){C1, C0, 3, 3}, w1, sizeof w1);
  tg_tensor *k2 = tg_from_data(TG_FLOAT32, 4, (int64_t[]){C2, C1, 3, 3}, w2, sizeof w2);
  tg_conv_opts o = tg_conv_defaults();
  o.padding = TG_INTS(1);
  tg_tensor *y = tg_conv2d(tg_relu(tg_conv2d(xt, k1, NULL, o)), k2, NULL, o);
  CHECK(y && tg_to_host(y, got, sizeof got) == TG_OK, "conv chain: %s", tg_error());
  if (y) check_close_f32("conv(relu(conv(x, pad 1)), pad 1)", got, want, C2 * HH * WW, 1e-4, 1e-4, __FILE__, __LINE__);
  tg_scope_end();
}

/* batchnorm over a matmul's columns: d = x - mean(x) is read by the variance and by the normalization, a
 * subtraction over two stored values, so each reader computes it again instead of a kernel storing it:
 * matmul, mean, variance, output (a fifth kernel stored d while the matmul below it was undecided) */
TEST(test_schedule_cheap_shared_value_is_recomputed_by_its_readers) {
  enum { M = 40, K = 12, N = 24 };
  tg_scope_begin();
  tg_tensor *a = rand_t(2, (int64_t[]){M, K}), *b = rand_t(2, (int64_t[]){K, N});
  tg_tensor *x = tg_matmul(a, b);
  tg_tensor *d = tg_sub(x, tg_mean(x, 1, (int[]){0}, true));
  tg_tensor *v = tg_mean(tg_mul(d, d), 1, (int[]){0}, true);
  tg_tensor *o = tg_mul(d, tg_rsqrt(tg_add(v, tg_scalar(TG_FLOAT32, 1e-5))));
  CHECK_T(o);
  int k = kernels_of(o);
  CHECK(k == 4, "batchnorm of a matmul took %d kernels, want 4", k);
  float *ha = host(a), *hb = host(b), *ho = host(o), xm[M * N], want[M * N];
  ref_matmul(ha, hb, xm, M, K, N);
  for (int j = 0; j < N; j++) {
    double mean = 0, var = 0;
    for (int i = 0; i < M; i++) mean += xm[i * N + j];
    mean /= M;
    for (int i = 0; i < M; i++) var += (xm[i * N + j] - mean) * (xm[i * N + j] - mean);
    var /= M;
    for (int i = 0; i < M; i++) want[i * N + j] = (float)((xm[i * N + j] - mean) / sqrt(var + 1e-5));
  }
  CHECK_CLOSE("batchnorm", ho, want, M * N);
  free(ha); free(hb); free(ho);
  tg_scope_end();
}

/* the bounds of the output loops of y's single kernel, outer first, into b (at most 8); their count, -1 if y is
 * not one kernel */
static int output_loops(tg_tensor *y, int64_t *b) {
  schedule s;
  if (schedule_create(1, &y->u, &s) != TG_OK) return -1;
  int n = -1, m = 0;
  uop **order = s.nkernels == 1 ? uop_toposort(s.kernels[0].ast, &m) : NULL;
  if (order) {
    n = 0;
    for (int i = 0; i < m; i++)  /* output loops have ids 0.. outer first: sorted by id */
      if (order[i]->op == OP_RANGE && order[i]->aux[0] == AX_GLOBAL && order[i]->arg.i >= 0 && order[i]->arg.i < 8) {
        b[order[i]->arg.i] = order[i]->src[0]->arg.i;
        n++;
      }
  }
  free(order);
  schedule_free(&s);
  return n;
}

/* Axes that every load and store reads in one layout share one loop (lower.c lower_merged, as tinygrad merges
 * adjacent axes): a batch norm's (x - mean) * scale over (8, 4, 20, 20) with per-channel (1, 4, 1, 1) operands
 * runs as (8, 4, 400), whole vectors instead of rows of 20. A padded read and a transpose keep their axes: the
 * joined loop's div and mod would not fold away. Values against plain C in every case. */
TEST(test_schedule_merges_axes_read_in_one_layout) {
  tg_scope_begin();
  enum { N = 8, C = 4, H = 20 };
  tg_tensor *x = rand_t(4, (int64_t[]){N, C, H, H}), *m = rand_t(4, (int64_t[]){1, C, 1, 1});
  tg_tensor *y = tg_mul(tg_sub(x, m), tg_exp(m));
  int64_t b[8] = {0};
  int n = output_loops(y, b);
  CHECK(n == 3 && b[0] == N && b[1] == C && b[2] == H * H, "batch norm's loops: %d (%lld, %lld, %lld), want (8, 4, 400)", n,
        (long long)b[0], (long long)b[1], (long long)b[2]);
  float *hx = host(x), *hm = host(m), *hy = host(y);
  CHECK(hx && hm && hy, "%s", tg_error());
  for (int i = 0, bad = 0; hx && hm && hy && i < N * C * H * H; i++) {
    int c = i / (H * H) % C;
    float want = (hx[i] - hm[c]) * expf(hm[c]);
    if (fabsf(hy[i] - want) > 1e-6f * (1 + fabsf(want)) && bad++ < 3) CHECK(0, "y[%d] = %g, want %g", i, hy[i], want);
  }
  free(hx), free(hm), free(hy);
  /* zero padding around each plane: the mask tests row and column, which (r / 22, r % 22) would keep */
  tg_tensor *p = tg_add_scalar(tg_pad_axes(tg_reshape(x, 3, (int64_t[]){N * C, H, H}), 3, (int64_t[]){0, 0, 1, 1, 1, 1}, 0), 1);
  n = output_loops(p, b);
  CHECK(n == 3 && b[1] == H + 2 && b[2] == H + 2, "padded planes' loops: %d (.., %lld, %lld), want rows and columns of 22", n,
        (long long)b[1], (long long)b[2]);
  float *hp = host(p);
  hx = host(x);
  CHECK(hp && hx, "%s", tg_error());
  for (int i = 0, bad = 0; hp && hx && i < N * C * (H + 2) * (H + 2); i++) {
    int pl = i / ((H + 2) * (H + 2)), r = i / (H + 2) % (H + 2) - 1, col = i % (H + 2) - 1;
    float want = 1 + (r >= 0 && r < H && col >= 0 && col < H ? hx[(pl * H + r) * H + col] : 0);
    if (hp[i] != want && bad++ < 3) CHECK(0, "padded[%d] = %g, want %g", i, hp[i], want);
  }
  free(hp), free(hx);
  /* a transpose reads across rows */
  tg_tensor *xr = tg_reshape(x, 3, (int64_t[]){N * C, H, H}), *t = tg_mul(tg_transpose(xr, 1, 2), tg_exp(xr));
  n = output_loops(t, b);
  CHECK(n == 3 && b[1] == H && b[2] == H, "transpose's loops: %d (.., %lld, %lld), want (.., 20, 20)", n, (long long)b[1], (long long)b[2]);
  float *ht = host(t);
  hx = host(x);
  CHECK(ht && hx, "%s", tg_error());
  for (int i = 0, bad = 0; ht && hx && i < N * C * H * H; i++) {
    int pl = i / (H * H), r = i / H % H, col = i % H;
    float want = hx[(pl * H + col) * H + r] * expf(hx[i]);
    if (fabsf(ht[i] - want) > 1e-6f * (1 + fabsf(want)) && bad++ < 3) CHECK(0, "transposed[%d] = %g, want %g", i, ht[i], want);
  }
  free(ht), free(hx);
  tg_scope_end();
}

/* the bounds of y's single kernel's reduce loops, in the order of their ids, into b (at most 8); their count */
static int reduce_loops(tg_tensor *y, int64_t *b) {
  schedule s;
  if (schedule_create(1, &y->u, &s) != TG_OK) return -1;
  int n = -1, m = 0;
  uop **order = s.nkernels == 1 ? uop_toposort(s.kernels[0].ast, &m) : NULL;
  int64_t id[8];
  if (order) {
    n = 0;
    for (int i = 0; i < m; i++)
      if (order[i]->op == OP_RANGE && order[i]->aux[0] == AX_REDUCE && n < 8) {
        int at = n++;
        while (at > 0 && id[at - 1] > order[i]->arg.i) id[at] = id[at - 1], b[at] = b[at - 1], at--;
        id[at] = order[i]->arg.i;
        b[at] = order[i]->src[0]->arg.i;
      }
  }
  free(order);
  schedule_free(&s);
  return n;
}

/* A reduce over adjacent axes read in one layout is one loop: a batch norm's mean over (N, H, W) of (8, 4, 20,
 * 20) reduces (8, 400); over a transposed plane the axes stay apart. Values against plain C in double. */
TEST(test_schedule_merges_reduced_axes_read_in_one_layout) {
  tg_scope_begin();
  enum { N = 8, C = 4, H = 20 };
  tg_tensor *x = rand_t(4, (int64_t[]){N, C, H, H});
  tg_tensor *mean = tg_mean(tg_square(x), 3, (int[]){0, 2, 3}, false);
  int64_t b[8] = {0};
  int n = reduce_loops(mean, b);
  CHECK(n == 2 && b[0] == N && b[1] == H * H, "mean's reduce loops: %d (%lld, %lld), want (8, 400)", n, (long long)b[0],
        (long long)b[1]);
  float *hx = host(x), *hm = host(mean);
  CHECK(hx && hm, "%s", tg_error());
  for (int c = 0; hx && hm && c < C; c++) {
    double acc = 0;
    for (int i = 0; i < N; i++)
      for (int p = 0; p < H * H; p++) acc += (double)hx[(i * C + c) * H * H + p] * hx[(i * C + c) * H * H + p];
    acc /= N * H * H;
    CHECK(fabs(hm[c] - acc) < 1e-5 * (1 + fabs(acc)), "mean[%d] = %g, want %g", c, hm[c], acc);
  }
  free(hx), free(hm);
  /* rows of a transposed plane weighted by their column: the reduce reads across rows */
  tg_tensor *xr = tg_reshape(x, 3, (int64_t[]){N * C, H, H});
  tg_tensor *s = tg_sum(tg_mul(tg_transpose(xr, 1, 2), tg_exp(xr)), 2, (int[]){1, 2}, false);
  n = reduce_loops(s, b);
  CHECK(n == 2 && b[0] == H && b[1] == H, "transposed plane's reduce loops: %d (%lld, %lld), want (20, 20)", n,
        (long long)b[0], (long long)b[1]);
  float *hs = host(s);
  hx = host(x);
  CHECK(hs && hx, "%s", tg_error());
  for (int pl = 0; hs && hx && pl < N * C; pl++) {
    double acc = 0;
    for (int r = 0; r < H; r++)
      for (int col = 0; col < H; col++) acc += (double)hx[(pl * H + col) * H + r] * exp((double)hx[(pl * H + r) * H + col]);
    CHECK(fabs(hs[pl] - acc) < 1e-4 * (1 + fabs(acc)), "sum[%d] = %g, want %g", pl, hs[pl], acc);
  }
  free(hs), free(hx);
  tg_scope_end();
}

/* A max pool's input gradient read by three nodes (a batchnorm backward's two channel sums and an elementwise)
 * is stored as the image (n, c, y, x) they read, not in the pool's window order (n, c, oy, ox, ky, kx), which
 * each of them would read through a transposing view (MNIST: its batchnorm sums ran scalar over the windows).
 * Values against plain C: the gradient goes to each window's max, shared equally by tied maxima (tinygrad's
 * rule; x takes 4 values, so most windows have ties) */
TEST(test_schedule_pool_gradient_read_by_several_is_stored_as_the_image) {
  enum { N = 4, C = 8, H = 20, P = 10 };
  tg_scope_begin();
  static float xs[N * C * H * H];
  for (int i = 0; i < N * C * H * H; i++) xs[i] = floorf(frand() * 2.0f) * 0.5f;  /* -1, -0.5, 0, 0.5 */
  tg_tensor *x = tg_from_data(TG_FLOAT32, 4, (int64_t[]){N, C, H, H}, xs, sizeof xs);
  tg_tensor *w = rand_t(4, (int64_t[]){N, C, P, P}), *g = NULL;
  tg_pool_opts po = tg_pool_defaults();
  tg_tensor *loss = tg_sum(tg_mul(tg_max_pool2d(x, po), w), 0, NULL, false);
  CHECK(loss && tg_gradient(loss, 1, &x, &g) == TG_OK, "gradient: %s", tg_error());
  int axes[3] = {0, 2, 3};
  tg_tensor *s1 = tg_sum(g, 3, axes, false), *s2 = tg_sum(tg_mul(g, x), 3, axes, false);
  tg_tensor *e = tg_add(tg_mul_scalar(g, 2.0), x);
  CHECK_T(e);
  uop *outs[3] = {s1->u, s2->u, e->u};
  schedule s;
  CHECK(schedule_create(3, outs, &s) == TG_OK, "%s", tg_error());
  int image = 0, windows = 0;
  for (int i = 0; i < s.nrealized; i++) {
    const uop *r = s.realized[i];
    bool outputs = r == s.roots[0] || r == s.roots[1] || r == s.roots[2];
    if (!outputs && r->ndim == 4 && r->shape[2] == H && r->shape[3] == H) image++;
    if (r->ndim == 6 && uop_numel(r) == N * C * H * H) windows++;
  }
  schedule_free(&s);
  CHECK(image == 1 && windows == 0, "the gradient stored as the image %d times and in window order %d times, want 1 and 0",
        image, windows);
  tg_tensor *all[3] = {s1, s2, e};
  CHECK(tg_realize_many(3, all) == TG_OK, "%s", tg_error());
  float *hx = host(x), *hw = host(w), *h1 = host(s1), *h2 = host(s2), *he = host(e);
  float *gw = calloc(N * C * H * H, sizeof *gw), want1[C] = {0}, want2[C] = {0}, *wante = malloc(sizeof(float) * N * C * H * H);
  int tied = 0;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int oy = 0; oy < P; oy++)
        for (int ox = 0; ox < P; ox++) {
          int base = ((n * C + c) * H + 2 * oy) * H + 2 * ox, count = 0;
          float m = -INFINITY;
          for (int k = 0; k < 4; k++) m = fmaxf(m, hx[base + (k / 2) * H + k % 2]);
          for (int k = 0; k < 4; k++) count += hx[base + (k / 2) * H + k % 2] == m;
          tied += count > 1;
          for (int k = 0; k < 4; k++)
            if (hx[base + (k / 2) * H + k % 2] == m) gw[base + (k / 2) * H + k % 2] = hw[((n * C + c) * P + oy) * P + ox] / count;
        }
  CHECK(tied > 0, "no window has tied maxima: the ties are not tested");
  for (int i = 0; i < N * C * H * H; i++) {
    int c = i / (H * H) % C;
    want1[c] += gw[i];
    want2[c] += gw[i] * hx[i];
    wante[i] = 2 * gw[i] + hx[i];
  }
  CHECK_CLOSE("sum of the gradient", h1, want1, C);
  CHECK_CLOSE("sum of the gradient times x", h2, want2, C);
  CHECK_CLOSE("2 g + x", he, wante, N * C * H * H);
  free(hx); free(hw); free(h1); free(h2); free(he); free(gw); free(wante);
  tg_scope_end();
}
