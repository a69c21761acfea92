/* test_shapes.c — issue 12 item 10: axes are checked against the real rank (a 0-d tensor has none, except where
 * tinygrad lets a reduction take axis 0 or -1 of it), and no shape computation overflows: a shape whose element
 * count passes 2^60 is refused with a message, and slicing takes any step, INT64_MIN included. */
#include <stdint.h>
#include <stdlib.h>

#include "test.h"

#define SH(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
#define AX(...) (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (const int[]){__VA_ARGS__}

/* expr (a tensor) must be NULL with a message that contains want */
#define REFUSED(expr, want)                                                                               \
  do {                                                                                                    \
    tg_error_clear();                                                                                     \
    tg_tensor *r_ = (expr);                                                                               \
    CHECK(!r_, "%s: expected an error, got a tensor", #expr);                                             \
    CHECK(!r_ && strstr(tg_error(), want) && tg_error_status() == TG_ERR_ARG, "%s: message \"%s\" (status %d) " \
          "lacks \"%s\"", #expr, tg_error(), tg_error_status(), want);                                   \
  } while (0)

static double item(tg_tensor *t) {
  double v = tg_item(t);
  tg_free(t);
  return v;
}

TEST(test_shapes_0d_axes) {
  tg_scope_begin();
  tg_tensor *s = tg_scalar(TG_FLOAT32, 3);
  CHECK_T(s);
  tg_error_clear();
  CHECK(tg_shape(s, 0) == -1 && tg_error()[0], "tg_shape(scalar, 0) = %lld, want -1 with an error",
        (long long)tg_shape(s, 0));
  CHECK(tg_shape(s, -1) == -1, "tg_shape(scalar, -1) = %lld", (long long)tg_shape(s, -1));
  tg_tensor *parts[2] = {NULL, NULL};
  tg_error_clear();
  CHECK(tg_split(s, 1, (int64_t[]){1}, 0, parts) == TG_ERR_ARG && tg_error()[0] && !parts[0], "tg_split of a 0-d tensor");
  REFUSED(tg_cat(2, (tg_tensor *[]){s, s}, 0), "0-d");
  REFUSED(tg_cat(1, (tg_tensor *[]){s}, -1), "0-d");
  REFUSED(tg_flip(s, AX(0)), "0-d");
  REFUSED(tg_transpose(s, 0, -1), "0-d");
  REFUSED(tg_sum(s, AX(1), false), "tg_sum");
  REFUSED(tg_cumsum(s, 1), "tg_cumsum");
  REFUSED(tg_squeeze(s, 1), "tg_squeeze");
  /* tinygrad's reductions (and cumsum, squeeze, softmax) take axis 0 or -1 of a 0-d tensor */
  CHECK(item(tg_sum(s, AX(0), false)) == 3, "sum over axis 0 of a 0-d tensor");
  CHECK(item(tg_max(s, AX(-1), true)) == 3, "max over axis -1 of a 0-d tensor");
  CHECK(item(tg_mean(s, AX(0), false)) == 3, "mean over axis 0 of a 0-d tensor");
  CHECK(item(tg_cumsum(s, 0)) == 3, "cumsum of a 0-d tensor");
  CHECK(item(tg_squeeze(s, -1)) == 3, "squeeze of a 0-d tensor");
  CHECK(item(tg_argmax(s, 0, false)) == 0, "argmax of a 0-d tensor");
  CHECK(item(tg_softmax(s, -1)) == 1, "softmax of a 0-d tensor");
  tg_tensor *f = tg_flatten(s, 0, -1);
  CHECK(f && tg_ndim(f) == 1 && tg_shape(f, 0) == 1, "flatten of a 0-d tensor");
  tg_tensor *st = tg_stack(2, (tg_tensor *[]){s, s}, 0);  /* stacking 0-d tensors makes a 1-d one */
  CHECK(st && tg_shape(st, 0) == 2, "stack of 0-d tensors: %s", tg_error());
  tg_scope_end();
}

TEST(test_shapes_overflowing_element_counts_are_refused) {
  tg_scope_begin();
  const int64_t big = (int64_t)1 << 32;
  static float one;
  REFUSED(tg_from_data(TG_FLOAT32, SH(big, big), &one, 0), "2^60");
  REFUSED(tg_empty(TG_FLOAT32, SH(big, big, 4)), "2^60");
  REFUSED(tg_full(TG_INT8, SH(INT64_MAX, 2), 1), "2^60");
  REFUSED(tg_zeros(TG_FLOAT32, SH(0, INT64_MAX, 4)), "2^60");  /* strides would overflow though numel is 0 */
  REFUSED(tg_rand(TG_FLOAT32, SH(big, big)), "2^60");
  /* 2^59 elements are allowed, so a draw must not make a (2^59, 4) view of its counters (the driver found it) */
  tg_tensor *r = tg_rand(TG_FLOAT32, SH((int64_t)1 << 20, (int64_t)1 << 36, 4, 2));
  CHECK(r && tg_numel(r) == (int64_t)1 << 59, "tg_rand of 2^59 elements: %s", tg_error());
  tg_tensor *x = tg_ones(TG_FLOAT32, SH(2, 3));
  CHECK_T(x);
  REFUSED(tg_reshape(x, SH(INT64_MAX, 2, 0)), "2^60");
  REFUSED(tg_reshape(x, SH(-1, big, big)), "2^60");
  REFUSED(tg_expand(tg_reshape(x, SH(2, 3, 1)), SH(2, 3, INT64_MAX)), "2^60");
  REFUSED(tg_repeat(x, SH(big, big)), "2^60");
  REFUSED(tg_repeat(x, SH(INT64_MAX / 2, 1)), "2^60");
  REFUSED(tg_eye(TG_FLOAT32, big, 1), "tg_eye");
  /* broadcasting (2^40, 1) with (1, 2^40), or a matmul that would, passes the bound */
  tg_tensor *col = tg_expand(tg_ones(TG_FLOAT32, SH(1, 1)), SH((int64_t)1 << 40, 1));
  tg_tensor *row = tg_expand(tg_ones(TG_FLOAT32, SH(1, 1)), SH(1, (int64_t)1 << 40));
  CHECK_T(col);
  CHECK_T(row);
  REFUSED(tg_add(col, row), "tg_add");
  REFUSED(tg_matmul(col, row), "2^60");
  tg_tensor *half = tg_expand(tg_ones(TG_FLOAT32, SH(1)), SH((int64_t)1 << 59));
  CHECK_T(half);
  REFUSED(tg_cat(3, (tg_tensor *[]){half, half, half}, 0), "2^60");
  tg_tensor *parts[2];
  tg_error_clear();
  CHECK(tg_split(x, 2, (int64_t[]){INT64_MAX, 4}, 1, parts) == TG_ERR_ARG && strstr(tg_error(), "tg_split"),
        "split with sizes that overflow: %s", tg_error());
  tg_variable *v = tg_variable_new("v", 0, 1);
  CHECK(v, "%s", tg_error());
  REFUSED(tg_shrink_at(x, 1, v, INT64_MAX), "tg_shrink_at");
  REFUSED(tg_pad_at(x, 1, v, INT64_MAX), "2^60");
  tg_variable_free(v);
  tg_scope_end();
}

/* tg_pad with huge pads gave a negative shape: both forms refuse sizes past 2^60 */
TEST(test_shapes_huge_pads_are_refused) {
  tg_scope_begin();
  tg_tensor *x = tg_ones(TG_FLOAT32, SH(2, 3));
  CHECK_T(x);
  REFUSED(tg_pad_axes(x, 2, (int64_t[]){0, 0, INT64_MAX, 1}, 0), "2^60");
  REFUSED(tg_pad_axes(x, 2, (int64_t[]){INT64_MAX / 2, INT64_MAX / 2, 0, 0}, 0), "2^60");
  REFUSED(tg_pad(x, 2, (int64_t[]){INT64_MAX, 1}, 0), "2^60");
  REFUSED(tg_pad(x, 4, (int64_t[]){0, 0, (int64_t)1 << 59, (int64_t)1 << 59}, 0), "2^60");
  tg_scope_end();
}

/* python slicing with any step: INT64_MIN and INT64_MAX pick one element */
TEST(test_shapes_slicing_with_extreme_steps) {
  tg_scope_begin();
  float v[6] = {0, 1, 2, 3, 4, 5};
  tg_tensor *x = tg_from_data(TG_FLOAT32, SH(6), v, sizeof v);
  CHECK_T(x);
  const struct { tg_slice s; int n; float first; } cases[] = {
      {{0, TG_END, INT64_MIN, false}, 1, 0},          /* x[0::min]: only x[0] */
      {{TG_END, TG_END, INT64_MIN, false}, 1, 5},     /* x[::min]: only x[-1] */
      {{0, TG_END, INT64_MAX, false}, 1, 0},          /* x[::max] */
      {{INT64_MIN, INT64_MAX, 2, false}, 3, 0},       /* clamped bounds */
      {{INT64_MAX, INT64_MIN, -2, false}, 3, 5},      /* x[max:min:-2] = 5, 3, 1 */
      {{-1, INT64_MIN, INT64_MIN + 1, false}, 1, 5},
  };
  for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
    tg_tensor *y = tg_slice_axes(x, 1, &cases[c].s);
    CHECK(y && tg_numel(y) == cases[c].n, "case %d: %s, numel %lld, want %d", c, y ? "" : tg_error(),
          (long long)tg_numel(y), cases[c].n);
    float got[6] = {0};
    if (y && tg_numel(y) == cases[c].n) {
      CHECK(tg_to_host(y, got, (size_t)cases[c].n * 4) == TG_OK && got[0] == cases[c].first, "case %d: first %g, want %g",
            c, got[0], cases[c].first);
      if (cases[c].n == 3) CHECK(got[1] == cases[c].first + (cases[c].first ? -2 : 2), "case %d: second %g", c, got[1]);
    }
  }
  tg_scope_end();
}

/* found by the random-API driver: reducing some axes of a tensor with an empty kept axis kept its shape
 * ((2, 0, 5) over axes 0 and 2 gave (1,), not (0,)), and repeating an empty axis any number of times was refused */
TEST(test_shapes_empty_axes_in_reduce_and_repeat) {
  tg_scope_begin();
  tg_tensor *x = tg_ones(TG_FLOAT32, SH(2, 0, 5));
  CHECK_T(x);
  tg_tensor *s = tg_sum(x, AX(0, 2), false), *k = tg_max(x, AX(0, -1), true);
  CHECK(s && tg_ndim(s) == 1 && tg_shape(s, 0) == 0, "sum over 0 and 2 of (2, 0, 5): %s ndim %d", tg_error(), tg_ndim(s));
  CHECK(k && tg_ndim(k) == 3 && tg_shape(k, 0) == 1 && tg_shape(k, 1) == 0 && tg_shape(k, 2) == 1, "max keepdim: %s",
        tg_error());
  CHECK(s && tg_realize(s) == TG_OK, "realizing an empty sum: %s", tg_error());
  tg_tensor *m = tg_mean(tg_ones(TG_FLOAT32, SH(3, 0)), AX(0), false);
  CHECK(m && tg_shape(m, 0) == 0, "mean over axis 0 of (3, 0)");
  tg_tensor *r = tg_repeat(tg_ones(TG_FLOAT32, SH(0, 2)), SH(INT64_MAX, 3));
  CHECK(r && tg_shape(r, 0) == 0 && tg_shape(r, 1) == 6, "repeat of an empty axis: %s", tg_error());
  REFUSED(tg_repeat(tg_ones(TG_FLOAT32, SH(1, 2)), SH(INT64_MAX, 1)), "2^60");
  tg_scope_end();
}

/* found by the random-API driver: an empty result still ran its graph, and a softmax over the empty last axis of
 * (2^40, 0) first stored a (2^40, 1) max: 4 TB, refused as out of memory. An empty value needs no kernel. */
TEST(test_shapes_empty_results_run_no_kernels) {
  tg_scope_begin();
  tg_tensor *x = tg_repeat(tg_ones(TG_FLOAT32, SH(1, 0)), SH((int64_t)1 << 40, 1));
  CHECK_T(x);
  tg_tensor *y = tg_softmax(x, -1);
  CHECK_T(y);
  tg_stats before = tg_get_stats();
  CHECK(tg_realize(y) == TG_OK, "realizing a (2^40, 0) softmax: %s", tg_error());
  CHECK(tg_get_stats().kernels_run == before.kernels_run, "an empty result ran %llu kernels",
        (unsigned long long)(tg_get_stats().kernels_run - before.kernels_run));
  CHECK(tg_to_host(y, NULL, 0) == TG_OK && tg_shape(y, 0) == (int64_t)1 << 40 && tg_numel(y) == 0, "%s", tg_error());
  /* a reduce over nothing is its identity, as tinygrad's: the (2^40, 1) max inside the softmax is never stored */
  tg_tensor *z = tg_zeros(TG_FLOAT32, SH((int64_t)1 << 40, 0));
  double mx = tg_item(tg_max(tg_log_softmax(z, 1), 0, NULL, false));
  double mn = tg_item(tg_min(z, 0, NULL, false)), sm = tg_item(tg_sum(z, 0, NULL, false));
  CHECK(isinf(mx) && mx < 0 && isinf(mn) && mn > 0 && sm == 0, "max %g, min %g, sum %g of nothing: %s", mx, mn, sm,
        tg_error());
  int32_t im[3] = {0};
  tg_tensor *imin = tg_min(tg_zeros(TG_INT32, SH(0, 3)), AX(0), false);
  CHECK(imin && tg_to_host(imin, im, sizeof im) == TG_OK && im[0] == INT32_MAX && im[2] == INT32_MAX,
        "int32 min over an empty axis: %d (%s)", im[0], tg_error());
  tg_tensor *e = tg_empty(TG_FLOAT32, SH(3, 0));
  tg_tensor *s = tg_add_scalar(e, 1);
  CHECK(s && tg_realize(s) == TG_OK && tg_numel(s) == 0, "an empty sum: %s", tg_error());
  tg_scope_end();
}

/* found by the random-API driver: a cumsum over 2^41 elements was refused (its chunk totals' running sum was
 * quadratic: 2^33 windows of 2^33); the totals are now split the same way, so any length builds */
TEST(test_shapes_long_cumsum) {
  tg_scope_begin();
  tg_tensor *huge = tg_cumsum(tg_ones(TG_FLOAT32, SH((int64_t)1 << 41)), 0);
  CHECK(huge && tg_shape(huge, 0) == (int64_t)1 << 41, "cumsum over 2^41: %s", tg_error());
  /* 2^60 elements: the windows would not fit, and the message says so in tg_cumsum's words */
  REFUSED(tg_cumsum(tg_full(TG_INT32, SH((int64_t)1 << 31, (int64_t)1 << 27, 4, 1), 1), 1), "tg_cumsum: a running sum");
  enum { N = 300000 };  /* 1172 chunks of 256: the totals are split again */
  tg_tensor *y = tg_cumsum(tg_ones(TG_INT32, SH(2, N)), -1);
  int32_t *got = malloc(2 * N * sizeof *got);
  CHECK(got && y && tg_to_host(y, got, 2 * N * sizeof *got) == TG_OK, "%s", tg_error());
  int bad = 0;
  for (int i = 0; got && i < 2 * N; i++)
    if (got[i] != i % N + 1 && bad++ < 3) CHECK(false, "cumsum[%d] = %d, want %d", i, got[i], i % N + 1);
  free(got);
  tg_scope_end();
}
