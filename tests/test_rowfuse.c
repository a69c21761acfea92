/* test_rowfuse.c — row fusion (schedule.c): softmax, log_softmax and layernorm with their row reductions
 * computed inside the output's kernel, against a plain C reference at sizes that take the vector path, the
 * scalar path, a row of exactly one vector, the row limit and one past it, and a reduction over a middle axis
 * (which stays realized); their gradients against the analytic formulas, in float32 so the vector path runs. */
#include <stdlib.h>

#include "test.h"

typedef enum { SOFTMAX, LOG_SOFTMAX, LAYERNORM } row_op;
static const char *const NAMES[] = {"softmax", "log_softmax", "layernorm"};

static uint64_t seed = 0x9E3779B97F4A7C15ULL;
static float *random_floats(int64_t n, float scale) {
  float *d = malloc((size_t)(n ? n : 1) * sizeof *d);
  for (int64_t i = 0; d && i < n; i++) {
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    d[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 2 - 1) * scale;
  }
  return d;
}

/* y = op(x) over the middle axis of a row-major (outer, n, inner) array, in double */
static void reference(row_op op, const float *x, float *y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
#define X(j) ((double)x[(o * n + (j)) * inner + in])
#define Y(j) y[(o * n + (j)) * inner + in]
      double m = -INFINITY, s = 0, mean = 0, var = 0;
      for (int64_t j = 0; j < n; j++) m = X(j) > m ? X(j) : m, mean += X(j);
      mean /= (double)n;
      for (int64_t j = 0; j < n; j++) s += exp(X(j) - m), var += (X(j) - mean) * (X(j) - mean);
      var /= (double)n;
      for (int64_t j = 0; j < n; j++)
        Y(j) = (float)(op == SOFTMAX ? exp(X(j) - m) / s : op == LOG_SOFTMAX ? X(j) - m - log(s) : (X(j) - mean) / sqrt(var + 1e-5));
#undef X
#undef Y
    }
}

static tg_tensor *apply(row_op op, tg_tensor *x, int axis) {
  return op == SOFTMAX ? tg_softmax(x, axis) : op == LOG_SOFTMAX ? tg_log_softmax(x, axis) : tg_layernorm(x, 1, (int[]){-1}, 1e-5);
}

/* op over axis of a random x of this shape: values against the reference; the kernels it took */
static int check_values(row_op op, int ndim, const int64_t *shape, int axis) {
  int64_t outer = 1, inner = 1, numel = 1;
  for (int i = 0; i < ndim; i++) {
    numel *= shape[i];
    if (i < axis) outer *= shape[i];
    if (i > axis) inner *= shape[i];
  }
  float *hx = random_floats(numel, 3), *want = malloc((size_t)numel * sizeof *want), *got = malloc((size_t)numel * sizeof *got);
  int kernels = -1;
  tg_scope_begin();
  tg_tensor *y = apply(op, tg_from_data(TG_FLOAT32, ndim, shape, hx, (size_t)numel * sizeof *hx), axis);
  if (y && tg_realize(y) == TG_OK) {
    kernels = (int)tg_kernel_count_last();
    if (tg_to_host(y, got, (size_t)numel * sizeof *got) == TG_OK) {
      reference(op, hx, want, outer, shape[axis], inner);
      char what[96];
      snprintf(what, sizeof what, "%s of %lld elements over axis %d", NAMES[op], (long long)numel, axis);
      check_close_f32(what, got, want, numel, 1e-6, 1e-3, __FILE__, __LINE__);
    } else kernels = -1;
  }
  CHECK(kernels >= 0, "%s: %s", NAMES[op], tg_error());
  tg_scope_end();
  free(hx); free(want); free(got);
  return kernels;
}

TEST(test_rowfuse_softmax_family_is_one_kernel_per_row_reduction_chain) {
  static const int64_t sizes[][2] = {{9, 40}, {3, 1000}, {7, 17}, {5, 16}, {3, 48}, {2, 4096}, {2, 16384}};
  for (int op = 0; op < 3; op++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      int k = check_values((row_op)op, 2, sizes[i], 1);
      CHECK(k == 1, "%s of (%lld, %lld): %d kernels, want 1", NAMES[op], (long long)sizes[i][0], (long long)sizes[i][1], k);
    }
  for (int op = 0; op < 3; op++) {
    int k = check_values((row_op)op, 3, (int64_t[]){2, 3, 17}, 2);
    CHECK(k == 1, "%s over the last axis of (2, 3, 17): %d kernels, want 1", NAMES[op], k);
    /* rows shorter than a vector (a pooling window's 4) are not fused: same values, a kernel per reduce */
    k = check_values((row_op)op, 3, (int64_t[]){2, 3, 5}, 2);
    CHECK(k == 3, "%s over the last axis of (2, 3, 5): %d kernels, want 3", NAMES[op], k);
  }
}

TEST(test_rowfuse_long_rows_and_middle_axes_stay_realized) {
  /* one past the row limit: the reduces are realized (3 kernels), the values are the same */
  for (int op = 0; op < 3; op++) {
    int k = check_values((row_op)op, 2, (int64_t[]){1, 16385}, 1);
    CHECK(k > 1, "%s of a row of 16385: %d kernels, the row limit is 16384", NAMES[op], k);
  }
  /* over a middle axis the reduce is not per row of the outermost loops */
  for (int op = 0; op < 2; op++) {
    int k = check_values((row_op)op, 3, (int64_t[]){2, 3, 5}, 1);
    CHECK(k > 1, "%s over the middle axis of (2, 3, 5): %d kernels", NAMES[op], k);
    check_values((row_op)op, 3, (int64_t[]){4, 33, 16}, 1);
  }
}

/* d sum(op(x) * w) / dx against the analytic gradient, per row (the last axis) */
static void check_gradient(row_op op, int64_t rows, int64_t n) {
  int64_t numel = rows * n;
  float *hx = random_floats(numel, 3), *hw = random_floats(numel, 1), *got = malloc((size_t)numel * sizeof *got);
  float *want = malloc((size_t)numel * sizeof *want), *y = malloc((size_t)numel * sizeof *y);
  tg_scope_begin();
  int64_t shape[2] = {rows, n};
  tg_tensor *x = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 2, shape, hx, (size_t)numel * sizeof *hx), true);
  tg_tensor *w = tg_from_data(TG_FLOAT32, 2, shape, hw, (size_t)numel * sizeof *hw);
  tg_tensor *loss = tg_sum(tg_mul(apply(op, x, 1), w), 0, NULL, false);
  bool ok = loss && tg_backward(loss) == TG_OK && tg_grad(x) && tg_to_host(tg_grad(x), got, (size_t)numel * sizeof *got) == TG_OK;
  CHECK(ok, "%s backward: %s", NAMES[op], tg_error());
  tg_scope_end();
  /* softmax s: s * (w - sum(w s)); log_softmax: w - s * sum(w); layernorm xh = (x - mean) r:
   * r * (w - mean(w) - xh * mean(w xh)) */
  reference(op == LAYERNORM ? LAYERNORM : SOFTMAX, hx, y, rows, n, 1);
  for (int64_t i = 0; ok && i < rows; i++) {
    const float *s = y + i * n, *wi = hw + i * n, *xi = hx + i * n;
    double sw = 0, sws = 0, mean = 0, var = 0;
    for (int64_t j = 0; j < n; j++) sw += wi[j], sws += (double)wi[j] * s[j], mean += xi[j];
    mean /= (double)n;
    for (int64_t j = 0; j < n; j++) var += (xi[j] - mean) * (xi[j] - mean);
    double r = 1 / sqrt(var / (double)n + 1e-5), swx = 0;
    for (int64_t j = 0; j < n; j++) swx += (double)wi[j] * (xi[j] - mean) * r;
    for (int64_t j = 0; j < n; j++)
      want[i * n + j] = (float)(op == SOFTMAX       ? s[j] * (wi[j] - sws)
                                : op == LOG_SOFTMAX ? wi[j] - s[j] * sw
                                                    : r * (wi[j] - sw / (double)n - (xi[j] - mean) * r * swx / (double)n));
  }
  char what[96];
  snprintf(what, sizeof what, "d %s / dx of (%lld, %lld)", NAMES[op], (long long)rows, (long long)n);
  if (ok) check_close_f32(what, got, want, numel, 1e-4, 1e-3, __FILE__, __LINE__);
  free(hx); free(hw); free(got); free(want); free(y);
}

TEST(test_rowfuse_gradients_match_the_analytic_formulas) {
  static const int64_t sizes[][2] = {{3, 1000}, {4, 64}, {7, 17}, {2, 4096}};
  for (int op = 0; op < 3; op++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) check_gradient((row_op)op, sizes[i][0], sizes[i][1]);
}

TEST(test_rowfuse_a_row_max_shared_by_two_outputs_is_computed_once) {
  tg_scope_begin();
  int64_t shape[2] = {6, 40};
  float *hx = random_floats(240, 3), w1[240], w2[240], g1[240], g2[240];
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, shape, hx, sizeof w1);
  tg_tensor *m = tg_max(x, 1, (int[]){1}, true);
  tg_tensor *outs[2] = {tg_mul_scalar(tg_sub(x, m), 2.0), tg_exp(tg_sub(x, m))};
  CHECK_T(outs[1]);
  CHECK(tg_realize_many(2, outs) == TG_OK, "%s", tg_error());
  /* the max is realized once for both (its own kernel), not computed inside each output's kernel; the two
   * outputs, of one shape, are then one kernel of two stores */
  CHECK(tg_kernel_count_last() == 2, "%d kernels, want 2", (int)tg_kernel_count_last());
  CHECK(tg_to_host(outs[0], g1, sizeof g1) == TG_OK && tg_to_host(outs[1], g2, sizeof g2) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 6; i++) {
    float mx = -INFINITY;
    for (int j = 0; j < 40; j++) mx = hx[i * 40 + j] > mx ? hx[i * 40 + j] : mx;
    for (int j = 0; j < 40; j++) w1[i * 40 + j] = 2 * (hx[i * 40 + j] - mx), w2[i * 40 + j] = expf(hx[i * 40 + j] - mx);
  }
  CHECK_CLOSE("2 (x - max)", g1, w1, 240);
  CHECK_CLOSE("exp(x - max)", g2, w2, 240);
  /* logsumexp: a row reduce whose own output is per row */
  tg_tensor *l = tg_logsumexp(x, 1, false);
  CHECK_T(l);
  float gl[6];
  CHECK(tg_to_host(l, gl, sizeof gl) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 6; i++) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < 40; j++) mx = hx[i * 40 + j] > mx ? hx[i * 40 + j] : mx;
    for (int j = 0; j < 40; j++) s += exp(hx[i * 40 + j] - mx);
    w1[i] = (float)(mx + log(s));
  }
  CHECK_CLOSE("logsumexp", gl, w1, 6);
  free(hx);
  tg_scope_end();
}
