/* test_more_ops.c — linspace, scaled_uniform, rand_like/randn_like, randperm, multinomial, allclose, rearrange
 * and the fixed-size (lazy) nonzero and masked_select, against plain C written here: float32 loops for linspace,
 * index loops for rearrange and the selections, the isclose formula for allclose, and counting for the random
 * draws (a permutation check, frequencies against the weights within a few standard deviations). */
#include <stdlib.h>

#include "ref.h"
#include "test.h"

#define MORE_TEST(name)           \
  static void name##_body(void);  \
  TEST(name) {                    \
    ref_seed((uint64_t)__LINE__); \
    tg_manual_seed(__LINE__);     \
    tg_scope_begin();             \
    name##_body();                \
    tg_scope_end();               \
    ref_free_all();               \
  }                               \
  static void name##_body(void)

/* ---- linspace ---------------------------------------------------------------------------------------------- */

MORE_TEST(test_linspace_matches_float32_formula) {
  static const struct { double a, b; int64_t n; } cs[] = {{0, 10, 5}, {-1, 1, 5}, {3, -2, 7}, {0, 1, 2}, {2.5, 2.5, 4},
                                                          {0, 1, 0}, {7, 9, 1}, {-3, 1e3, 100}};
  for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
    int64_t n = cs[c].n;
    ref_arr *want = ref_new(TG_FLOAT32, 1, &n);
    for (int64_t i = 0; i < n; i++) {
      float m = n > 1 ? (float)((cs[c].b - cs[c].a) / (double)(n - 1)) : 0;
      want->data[i] = n == 1 ? ref_round(TG_FLOAT32, cs[c].a) : ref_round(TG_FLOAT32, (double)((float)i * m) + cs[c].a);
    }
    tg_tensor *t = tg_linspace(TG_FLOAT32, cs[c].a, cs[c].b, n);
    CHECK_T(t);
    char what[64];
    snprintf(what, sizeof what, "linspace(%g, %g, %lld)", cs[c].a, cs[c].b, (long long)n);
    CHECK_REF(what, t, want);
    if (n >= 2) {  /* the ends are start and stop */
      ref_arr *got = ref_from_tg(t);
      CHECK(got && fabs(got->data[n - 1] - cs[c].b) <= 1e-5 * (1 + fabs(cs[c].b)), "%s ends at %g", what, got ? got->data[n - 1] : NAN);
    }
  }
}

MORE_TEST(test_linspace_int_dtypes_and_errors) {
  tg_tensor *t = tg_linspace(TG_INT32, 0, 10, 5);  /* 0 2.5 5 7.5 10 truncated */
  CHECK_T(t);
  CHECK_REF("linspace int32", t, ref_from(TG_INT32, SHAPE(5), (double[]){0, 2, 5, 7, 10}));
  t = tg_linspace(TG_FLOAT16, -1, 1, 3);
  CHECK_T(t);
  CHECK_REF("linspace float16", t, ref_from(TG_FLOAT16, SHAPE(3), (double[]){-1, 0, 1}));
  t = tg_linspace(TG_INT64, 5, 5, 1);
  CHECK_T(t);
  CHECK_REF("linspace steps 1", t, ref_from(TG_INT64, SHAPE(1), (double[]){5}));
  CHECK(!tg_linspace(TG_BOOL, 0, 1, 3) && tg_error_status() == TG_ERR_ARG, "bool linspace refused");
  CHECK(!tg_linspace(TG_FLOAT32, 0, 1, -1) && strstr(tg_error(), "tg_linspace"), "negative steps refused: %s", tg_error());
}

/* ---- random creation --------------------------------------------------------------------------------------- */

MORE_TEST(test_scaled_uniform_bound_and_spread) {
  tg_tensor *t = tg_scaled_uniform(TG_FLOAT32, 2, (int64_t[]){40, 25});
  CHECK_T(t);
  ref_arr *g = ref_from_tg(t);
  CHECK_T(g);
  double lo = 1, hi = -1, sum = 0;
  for (int64_t i = 0; i < g->numel; i++) {
    lo = fmin(lo, g->data[i]);
    hi = fmax(hi, g->data[i]);
    sum += g->data[i];
  }
  /* U(-1, 1) / sqrt(1000): inside +-0.0316, spread over it, mean near 0 (sd of the mean 0.0183 / sqrt(1000)) */
  CHECK(lo >= -1 / sqrt(1000.0) && hi < 1 / sqrt(1000.0), "range [%g, %g]", lo, hi);
  CHECK(lo < -0.9 / sqrt(1000.0) && hi > 0.9 / sqrt(1000.0), "spread [%g, %g]", lo, hi);
  CHECK(fabs(sum / 1000) < 4 * 0.0183 / sqrt(1000.0), "mean %g", sum / 1000);
  t = tg_scaled_uniform(TG_FLOAT16, 0, NULL);  /* 0-d: numel 1, U(-1, 1) */
  CHECK_T(t);
  CHECK(tg_ndim(t) == 0 && tg_dtype_of(t) == TG_FLOAT16 && fabs(tg_item(t)) <= 1, "0-d scaled_uniform %g", tg_item(t));
  t = tg_scaled_uniform(TG_FLOAT32, 2, (int64_t[]){0, 3});
  CHECK(t && tg_numel(t) == 0, "empty scaled_uniform");
}

MORE_TEST(test_rand_like_randn_like_take_shape_and_dtype) {
  tg_tensor *x = tg_zeros(TG_FLOAT16, 2, (int64_t[]){3, 4});
  tg_tensor *r = tg_rand_like(x);
  CHECK_T(r);
  CHECK(tg_dtype_of(r) == TG_FLOAT16 && tg_ndim(r) == 2 && tg_shape(r, 0) == 3 && tg_shape(r, 1) == 4, "rand_like shape/dtype");
  ref_arr *g = ref_from_tg(r);
  CHECK_T(g);
  for (int64_t i = 0; i < g->numel; i++) CHECK(g->data[i] >= 0 && g->data[i] <= 1, "rand_like value %g", g->data[i]);
  CHECK(!tg_rand_like(tg_zeros(TG_INT32, 1, (int64_t[]){2})) && tg_error_status() == TG_ERR_ARG, "rand_like of int refused");
  tg_tensor *big = tg_zeros(TG_FLOAT32, 1, (int64_t[]){20000});
  tg_tensor *n = tg_randn_like(big);
  CHECK_T(n);
  g = ref_from_tg(n);
  CHECK_T(g);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < g->numel; i++) {
    s += g->data[i];
    s2 += g->data[i] * g->data[i];
  }
  double mean = s / g->numel, var = s2 / g->numel - mean * mean;
  CHECK(fabs(mean) < 0.03 && fabs(var - 1) < 0.05, "randn_like mean %g var %g", mean, var);
  tg_tensor *ni = tg_randn_like(tg_zeros(TG_INT32, 2, (int64_t[]){2, 2}));
  CHECK(ni && tg_dtype_of(ni) == TG_INT32, "randn_like keeps an int dtype (tinygrad casts the normals)");
}

/* true if p holds each of 0..n-1 once */
static bool is_perm(const ref_arr *p, int64_t n) {
  if (p->numel != n) return false;
  char *seen = calloc((size_t)n + 1, 1);
  bool ok = true;
  for (int64_t i = 0; i < n && ok; i++) {
    int64_t v = (int64_t)p->data[i];
    ok = v >= 0 && v < n && !seen[v];
    if (ok) seen[v] = 1;
  }
  free(seen);
  return ok;
}

MORE_TEST(test_randperm_is_a_uniform_permutation) {
  static const int64_t ns[] = {0, 1, 2, 7, 300};
  for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
    tg_tensor *p = tg_randperm(ns[c]);
    CHECK_T(p);
    CHECK(tg_dtype_of(p) == TG_INT32 && tg_ndim(p) == 1, "randperm dtype/rank");
    ref_arr *g = ref_from_tg(p);
    CHECK(g && is_perm(g, ns[c]), "randperm(%lld) is not a permutation", (long long)ns[c]);
  }
  /* 3! = 6 orders: 240 draws, each about 40 times (sd 5.8) */
  int count[6] = {0};
  for (int d = 0; d < 240; d++) {
    ref_arr *g = ref_from_tg(tg_randperm(3));
    if (!g || !is_perm(g, 3)) {
      CHECK(0, "randperm(3) draw %d", d);
      return;
    }
    int a = (int)g->data[0], b = (int)g->data[1];
    count[a * 2 + (b > a ? b - 1 : b)]++;
  }
  for (int k = 0; k < 6; k++) CHECK(count[k] >= 18 && count[k] <= 64, "order %d drawn %d times of 240", k, count[k]);
  CHECK(!tg_randperm(-1) && tg_error_status() == TG_ERR_ARG, "randperm(-1) refused");
}

/* frequencies of column col of idx (rows, ns) against w / sum(w) within 5 standard deviations */
static void check_freq(const char *what, const ref_arr *idx, int col, const double *w, int k, const char *file, int line) {
  int64_t rows = idx->shape[0], ns = idx->shape[1];
  double sum = 0, cnt[16] = {0};
  for (int i = 0; i < k; i++) sum += w[i];
  for (int64_t r = 0; r < rows; r++) {
    int v = (int)idx->data[r * ns + col];
    if (v < 0 || v >= k) {
      test_fail(file, line, "%s: index %d out of [0, %d)", what, v, k);
      return;
    }
    cnt[v]++;
  }
  for (int i = 0; i < k; i++) {
    double p = w[i] / sum, sd = sqrt(p * (1 - p) / (double)rows);
    if (fabs(cnt[i] / (double)rows - p) > 5 * sd + 1e-12)
      test_fail(file, line, "%s: category %d drawn %.4f of the time, want %.4f", what, i, cnt[i] / (double)rows, p);
  }
}

MORE_TEST(test_multinomial_with_replacement_follows_weights) {
  double w[4] = {1, 2, 3, 4};
  tg_tensor *p = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, (float[]){1, 2, 3, 4}, 16);
  tg_tensor *s = tg_multinomial(p, 20000, true);
  CHECK_T(s);
  CHECK(tg_dtype_of(s) == TG_INT32 && tg_ndim(s) == 1 && tg_shape(s, 0) == 20000, "1-d weights give (num_samples)");
  ref_arr *g = ref_from_tg(s);
  CHECK_T(g);
  check_freq("multinomial replacement", ref_reshape(g, 2, (int64_t[]){20000, 1}), 0, w, 4, __FILE__, __LINE__);
  /* 2-d int weights with zeros: a zero-weight category is never drawn */
  tg_tensor *p2 = tg_from_data(TG_INT32, 2, (int64_t[]){2, 3}, (int32_t[]){0, 5, 0, 1, 0, 1}, 24);
  s = tg_multinomial(p2, 500, true);
  CHECK_T(s);
  CHECK(tg_ndim(s) == 2 && tg_shape(s, 0) == 2 && tg_shape(s, 1) == 500, "2-d weights give (rows, num_samples)");
  g = ref_from_tg(s);
  CHECK_T(g);
  int ones = 0;
  for (int i = 0; i < 500; i++) {
    CHECK(g->data[i] == 1, "row 0 draws only category 1, got %g", g->data[i]);
    CHECK(g->data[500 + i] == 0 || g->data[500 + i] == 2, "row 1 draws 0 or 2, got %g", g->data[500 + i]);
    ones += g->data[500 + i] == 2;
  }
  CHECK(ones > 190 && ones < 310, "row 1: category 2 drawn %d of 500", ones);
  s = tg_multinomial(p, 1, false);  /* one sample without replacement: the inverse-CDF path */
  CHECK(s && tg_ndim(s) == 1 && tg_shape(s, 0) == 1, "one sample");
}

MORE_TEST(test_multinomial_without_replacement_distinct_and_weighted) {
  enum { ROWS = 6000 };
  double w[4] = {1, 2, 3, 4};
  float *wf = malloc(ROWS * 4 * sizeof *wf);
  for (int i = 0; i < ROWS * 4; i++) wf[i] = (float)w[i % 4];
  tg_tensor *p = tg_from_data(TG_FLOAT32, 2, (int64_t[]){ROWS, 4}, wf, ROWS * 4 * sizeof *wf);
  free(wf);
  tg_tensor *s = tg_multinomial(p, 3, false);
  CHECK_T(s);
  ref_arr *g = ref_from_tg(s);
  CHECK_T(g);
  CHECK(g->ndim == 2 && g->shape[0] == ROWS && g->shape[1] == 3, "shape (rows, 3)");
  for (int r = 0; r < ROWS; r++) {
    double a = g->data[r * 3], b = g->data[r * 3 + 1], c = g->data[r * 3 + 2];
    if (a == b || b == c || a == c) {
      CHECK(0, "row %d repeats a category: %g %g %g", r, a, b, c);
      break;
    }
  }
  check_freq("multinomial first draw", g, 0, w, 4, __FILE__, __LINE__);  /* the first draw is weighted sampling */
  tg_tensor *z = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, (float[]){0, 1, 0, 1}, 16);
  g = ref_from_tg(tg_multinomial(z, 2, false));  /* the two weighted categories come first */
  CHECK(g && g->numel == 2 && (int)g->data[0] % 2 == 1 && (int)g->data[1] % 2 == 1 && g->data[0] != g->data[1],
        "zero weights are drawn last");
  CHECK(!tg_multinomial(z, 5, false) && tg_error_status() == TG_ERR_ARG, "5 of 4 without replacement refused");
  CHECK(!tg_multinomial(z, 0, true), "0 samples refused");
  CHECK(!tg_multinomial(tg_ones(TG_FLOAT32, 3, (int64_t[]){1, 1, 2}), 1, true), "3-d weights refused");
}

/* ---- allclose ---------------------------------------------------------------------------------------------- */

static bool close_ref(double a, double b, double rtol, double atol, bool equal_nan) {
  if (isnan(a) || isnan(b)) return equal_nan && isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;  /* both finite, or equal infinities */
  return fabs(a - b) <= atol + rtol * fabs(b);
}

MORE_TEST(test_allclose_against_formula) {
  for (int c = 0; c < 40; c++) {
    int64_t n = c % 5;
    ref_arr *a = ref_rand(TG_FLOAT32, 1, &n, -2, 2);
    ref_arr *b = ref_copy(a);
    for (int64_t i = 0; i < n; i++) {
      int k = (int)ref_randint(0, 5);
      b->data[i] = k == 0 ? ref_round(TG_FLOAT32, a->data[i] + 1e-3) : k == 1 ? NAN : k == 2 ? INFINITY : a->data[i];
      if (k == 1 && ref_randint(0, 1)) a->data[i] = NAN;
      if (k == 2 && ref_randint(0, 1)) a->data[i] = INFINITY;
    }
    double rtol = c % 2 ? 1e-5 : 1e-2, atol = c % 3 ? 1e-8 : 1e-2;
    bool eq_nan = c % 4 < 2, want = true;
    for (int64_t i = 0; i < n; i++) want &= close_ref(a->data[i], b->data[i], rtol, atol, eq_nan);
    tg_tensor *r = tg_allclose(ref_to_tg(a), ref_to_tg(b), rtol, atol, eq_nan);
    CHECK_T(r);
    CHECK(tg_ndim(r) == 0 && tg_dtype_of(r) == TG_BOOL, "allclose is a 0-d bool");
    CHECK((tg_item(r) != 0) == want, "case %d: allclose %g, want %d", c, tg_item(r), want);
  }
  /* broadcasting and ints */
  tg_tensor *a = tg_from_data(TG_INT32, 2, (int64_t[]){2, 2}, (int32_t[]){3, 3, 3, 3}, 16);
  CHECK(tg_item(tg_allclose(a, tg_full(TG_INT32, 1, (int64_t[]){2}, 3), 1e-5, 1e-8, false)) == 1, "int broadcast close");
  CHECK(tg_item(tg_allclose(a, tg_full(TG_INT32, 1, (int64_t[]){2}, 4), 1e-5, 1e-8, false)) == 0, "int broadcast far");
}

/* ---- rearrange --------------------------------------------------------------------------------------------- */

/* x of the given shape holding 0, 1, 2, ... (float32) */
static ref_arr *iota(int nd, const int64_t *shape) {
  ref_arr *a = ref_new(TG_FLOAT32, nd, shape);
  for (int64_t i = 0; i < a->numel; i++) a->data[i] = (double)i;
  return a;
}

static void check_rearrange(const char *f, const ref_arr *x, int n, const char *const *names, const int64_t *sizes,
                            const ref_arr *want, const char *file, int line) {
  tg_tensor *t = tg_rearrange(ref_to_tg(x), f, n, names, sizes);
  if (!t) {
    test_fail(file, line, "rearrange \"%s\": %s", f, tg_error());
    return;
  }
  ref_check_tol(f, t, want, true, 0, 0, file, line);
}
#define CHECK_REARRANGE(f, x, n, names, sizes, want) check_rearrange(f, x, n, names, sizes, want, __FILE__, __LINE__)

MORE_TEST(test_rearrange_against_index_loops) {
  ref_arr *x = iota(4, (int64_t[]){2, 3, 4, 5});
  CHECK_REARRANGE("b c h w -> b (c h w)", x, 0, NULL, NULL, ref_reshape(x, 2, (int64_t[]){2, 60}));
  CHECK_REARRANGE("b c h w -> b h w c", x, 0, NULL, NULL, ref_permute(x, (int[]){0, 2, 3, 1}));
  CHECK_REARRANGE("b c h w -> (b h) w c", x, 0, NULL, NULL,
                  ref_reshape(ref_permute(x, (int[]){0, 2, 3, 1}), 3, (int64_t[]){8, 5, 3}));
  CHECK_REARRANGE("... h w -> ... w h", x, 0, NULL, NULL, ref_permute(x, (int[]){0, 1, 3, 2}));
  CHECK_REARRANGE("b ... -> b (...)", x, 0, NULL, NULL, ref_reshape(x, 2, (int64_t[]){2, 60}));
  CHECK_REARRANGE("b … w -> w b …", x, 0, NULL, NULL, ref_permute(x, (int[]){3, 0, 1, 2}));
  CHECK_REARRANGE("b … w -> w b ...", x, 0, NULL, NULL, ref_permute(x, (int[]){3, 0, 1, 2}));
  CHECK_REARRANGE("b c h w ... -> (...) b c h w", x, 0, NULL, NULL, ref_reshape(x, 5, (int64_t[]){1, 2, 3, 4, 5}));
  CHECK_REARRANGE("b c h w ... -> ... w c h b", x, 0, NULL, NULL, ref_permute(x, (int[]){3, 1, 2, 0}));
  /* "b (h p) w -> b h (p w)": out[b][h][p*W + w] = x[b][h*P + p][w] */
  ref_arr *y = iota(3, (int64_t[]){2, 6, 3});
  ref_arr *want = ref_new(TG_FLOAT32, 3, (int64_t[]){2, 3, 6});
  for (int b = 0; b < 2; b++)
    for (int h = 0; h < 3; h++)
      for (int p = 0; p < 2; p++)
        for (int w = 0; w < 3; w++) want->data[(b * 3 + h) * 6 + p * 3 + w] = y->data[(b * 6 + h * 2 + p) * 3 + w];
  static const char *p_[] = {"p"}, *ph[] = {"p", "h"}, *pb[] = {"p", "b"}, *a_[] = {"a"};
  static const int64_t s2[] = {2}, s23[] = {2, 3}, s22[] = {2, 2}, s3[] = {3};
  CHECK_REARRANGE("b (h p) w -> b h (p w)", y, 1, p_, s2, want);
  CHECK_REARRANGE("b (h p) w -> b h (p w)", y, 2, ph, s23, want);
  CHECK_REARRANGE("b (h p) w -> b h (p w)", y, 2, pb, s22, want);
  /* size-1 axes: "1" and "()" */
  ref_arr *z = iota(2, (int64_t[]){2, 3});
  CHECK_REARRANGE("a b -> a 1 b", z, 0, NULL, NULL, ref_reshape(z, 3, (int64_t[]){2, 1, 3}));
  CHECK_REARRANGE("a b -> () b a ()", z, 0, NULL, NULL, ref_reshape(ref_permute(z, (int[]){1, 0}), 4, (int64_t[]){1, 3, 2, 1}));
  ref_arr *z1 = iota(3, (int64_t[]){2, 1, 3});
  CHECK_REARRANGE("a 1 b -> b a", z1, 0, NULL, NULL, ref_permute(z, (int[]){1, 0}));
  CHECK_REARRANGE("a () b -> (a b)", z1, 0, NULL, NULL, ref_reshape(z, 1, (int64_t[]){6}));
  CHECK_REARRANGE("(a b) c -> a b c", iota(2, (int64_t[]){6, 1}), 1, a_, s3, iota(3, (int64_t[]){3, 2, 1}));
  CHECK_REARRANGE(" -> 1", ref_scalar(TG_FLOAT32, 4), 0, NULL, NULL, ref_from(TG_FLOAT32, SHAPE(1), (double[]){4}));
  CHECK_REARRANGE("a b -> b a", iota(2, (int64_t[]){0, 3}), 0, NULL, NULL, ref_new(TG_FLOAT32, 2, (int64_t[]){3, 0}));
}

MORE_TEST(test_rearrange_refuses_bad_formulas) {
  tg_tensor *x = tg_zeros(TG_FLOAT32, 3, (int64_t[]){2, 6, 3});
  static const char *bad[] = {"a b c", "a b c -> a b", "a b c -> a b d", "a a c -> a a c", "a b c -> a b c -> a b c",
                              "a (b c -> a b c", "a b) c -> a b c", "... ... c -> c", "a (... c) -> a c ...",
                              "_a b c -> _a b c", "a b c d -> a b c d", "a b -> a b", "a (b c) d -> a b c d",
                              "a ((b c)) d -> a b c d", "a (b 1) c -> a b c", "a b 2 -> a b 2", "a ... -> ... …"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tg_tensor *r = tg_rearrange(x, bad[i], 0, NULL, NULL);
    CHECK(!r && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "tg_rearrange"), "\"%s\" accepted", bad[i]);
  }
  /* sizes: a name not on the left, a size that does not divide, a size that differs from the axis */
  CHECK(!tg_rearrange(x, "a (b c) d -> a b c d", 1, (const char *[]){"e"}, (int64_t[]){2}), "unknown name");
  CHECK(!tg_rearrange(x, "a (b c) d -> a b c d", 1, (const char *[]){"b"}, (int64_t[]){4}), "4 does not divide 6");
  CHECK(!tg_rearrange(x, "a (b c) d -> a b c d", 2, (const char *[]){"b", "c"}, (int64_t[]){2, 2}), "2 * 2 != 6");
  CHECK(!tg_rearrange(x, "a b d -> a b d", 1, (const char *[]){"d"}, (int64_t[]){4}), "d is 3");
  CHECK(!tg_rearrange(tg_zeros(TG_FLOAT32, 2, (int64_t[]){2, 3}), "a 1 -> a", 0, NULL, NULL), "1 over an axis of 3");
}

MORE_TEST(test_rearrange_gradient_flows_back) {
  ref_arr *xv = ref_rand(TG_FLOAT32, SHAPE(2, 6), -1, 1), *wv = ref_rand(TG_FLOAT32, SHAPE(3, 2, 2), -1, 1);
  tg_tensor *x = tg_set_requires_grad(ref_to_tg(xv), true);
  tg_tensor *r = tg_rearrange(x, "a (b c) -> b c a", 1, (const char *[]){"c"}, (int64_t[]){2});
  CHECK_T(r);
  tg_tensor *loss = tg_sum(tg_mul(r, ref_to_tg(wv)), 0, NULL, false), *g = NULL;
  CHECK(tg_gradient(loss, 1, &x, &g) == TG_OK && g, "gradient: %s", tg_error());
  ref_arr *want = ref_new(TG_FLOAT32, 2, (int64_t[]){2, 6});  /* dL/dx[a][b*2+c] = w[b][c][a] */
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 3; b++)
      for (int c = 0; c < 2; c++) want->data[a * 6 + b * 2 + c] = wv->data[(b * 2 + c) * 2 + a];
  CHECK_REF("rearrange grad", g, want);
}

/* ---- nonzero and masked_select with a size ----------------------------------------------------------------- */

MORE_TEST(test_nonzero_size_against_loops) {
  static const int64_t shapes[][3] = {{5, 0, 0}, {3, 4, 0}, {2, 3, 2}, {1, 1, 0}, {0, 3, 0}};
  static const int nds[] = {1, 2, 3, 2, 2};
  for (int c = 0; c < 5; c++)
    for (int dt = 0; dt < 2; dt++) {
      ref_arr *x = ref_rand(dt ? TG_INT32 : TG_FLOAT32, nds[c], shapes[c], -1, 1);
      if (!dt)
        for (int64_t i = 0; i < x->numel; i++) x->data[i] = ref_randint(0, 2) == 0 ? 0 : ref_randint(0, 3) == 0 ? NAN : x->data[i];
      int64_t cnt = 0;
      for (int64_t i = 0; i < x->numel; i++) cnt += x->data[i] != 0;
      int64_t sizes[] = {0, 1, cnt, cnt + 3};
      for (int k = 0; k < 4; k++) {
        int64_t size = sizes[k];
        int nd = nds[c];
        ref_arr *want = ref_full(TG_INT32, 2, (int64_t[]){size, nd}, -1);
        int64_t j = 0;
        for (int64_t i = 0; i < x->numel && j < size; i++)
          if (x->data[i] != 0) {
            for (int d = nd - 1, r = (int)i; d >= 0; d--) {
              want->data[j * nd + d] = r % x->shape[d];
              r /= (int)x->shape[d];
            }
            j++;
          }
        uint64_t before = tg_get_stats().kernels_run;
        tg_tensor *t = tg_nonzero_size(ref_to_tg(x), size, -1);
        CHECK_T(t);
        CHECK(tg_get_stats().kernels_run == before, "nonzero_size ran kernels before a realize");
        char what[64];
        snprintf(what, sizeof what, "nonzero_size case %d dtype %d size %lld", c, dt, (long long)size);
        CHECK_REF(what, t, want);
      }
    }
  tg_tensor *t = tg_nonzero_size(tg_scalar(TG_FLOAT32, 3), 2, 0);  /* 0-d: (size, 0) */
  CHECK(t && tg_ndim(t) == 2 && tg_shape(t, 0) == 2 && tg_shape(t, 1) == 0 && tg_dtype_of(t) == TG_INT32, "0-d nonzero_size");
  CHECK(!tg_nonzero_size(tg_scalar(TG_FLOAT32, 3), -1, 0), "negative size refused");
}

MORE_TEST(test_masked_select_size_values_fill_and_gradient) {
  for (int c = 0; c < 6; c++) {
    tg_dtype dt = c % 3 == 0 ? TG_FLOAT32 : c % 3 == 1 ? TG_INT8 : TG_BOOL;
    ref_arr *x = ref_rand(dt, SHAPE(3, 4), -5, 5);
    if (dt == TG_FLOAT32) x->data[1] = INFINITY, x->data[2] = NAN;
    ref_arr *m = ref_rand(TG_BOOL, c < 3 ? 2 : 1, c < 3 ? (int64_t[]){3, 4} : (int64_t[]){4}, 0, 1);
    if (dt == TG_FLOAT32) m->data[1] = m->data[2] = 0;  /* inf and NaN never selected must not leak */
    ref_arr *mb = ref_expand(m, 2, (int64_t[]){3, 4});
    int64_t cnt = 0;
    for (int i = 0; i < 12; i++) cnt += mb->data[i] != 0;
    int64_t sizes[] = {0, 2, cnt, cnt + 2};
    for (int k = 0; k < 4; k++) {
      int64_t size = sizes[k];
      double fill = dt == TG_BOOL ? 1 : -7;
      ref_arr *want = ref_full(dt, 1, &size, fill);
      for (int64_t i = 0, j = 0; i < 12 && j < size; i++)
        if (mb->data[i]) want->data[j++] = x->data[i];
      tg_tensor *t = tg_masked_select_size(ref_to_tg(x), ref_to_tg(m), size, fill);
      CHECK_T(t);
      char what[64];
      snprintf(what, sizeof what, "masked_select_size case %d size %lld", c, (long long)size);
      CHECK_REF(what, t, want);
    }
  }
  /* gradient: element i selected as the j-th (j < size) gets w[j], the rest 0 */
  ref_arr *xv = ref_rand(TG_FLOAT32, SHAPE(2, 5), -1, 1), *mv = ref_rand(TG_BOOL, SHAPE(2, 5), 0, 1);
  mv->data[0] = mv->data[3] = mv->data[7] = 1;
  ref_arr *wv = ref_rand(TG_FLOAT32, SHAPE(2), -1, 1);
  tg_tensor *x = tg_set_requires_grad(ref_to_tg(xv), true), *g = NULL;
  tg_tensor *sel = tg_masked_select_size(x, ref_to_tg(mv), 2, 0);
  CHECK_T(sel);
  CHECK(tg_gradient(tg_sum(tg_mul(sel, ref_to_tg(wv)), 0, NULL, false), 1, &x, &g) == TG_OK && g, "grad: %s", tg_error());
  ref_arr *want = ref_new(TG_FLOAT32, 2, (int64_t[]){2, 5});
  for (int i = 0, j = 0; i < 10 && j < 2; i++)
    if (mv->data[i]) want->data[i] = wv->data[j++];
  CHECK_REF("masked_select_size grad", g, want);
  CHECK(!tg_masked_select_size(x, x, 2, 0) && tg_error_status() == TG_ERR_ARG, "a float mask refused");
}

/* ---- qr, svd, newton_schulz -------------------------------------------------------------------------------- */

/* max |(A B)[i][j] - C[i][j]| for row-major A (m, k), B (k, n), C (m, n); tA/tB: use the transpose */
static double mm_err(const double *A, const double *B, const double *C, int m, int k, int n, bool tA, bool tB) {
  double e = 0;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0;
      for (int q = 0; q < k; q++) acc += (tA ? A[q * m + i] : A[i * k + q]) * (tB ? B[j * k + q] : B[q * n + j]);
      e = fmax(e, fabs(acc - C[i * n + j]));
    }
  return e;
}

static double orth_err(const double *Q, int rows, int cols) {  /* Q^T Q vs I for Q (rows, cols) */
  double e = 0;
  for (int i = 0; i < cols; i++)
    for (int j = 0; j < cols; j++) {
      double acc = 0;
      for (int q = 0; q < rows; q++) acc += Q[q * cols + i] * Q[q * cols + j];
      e = fmax(e, fabs(acc - (i == j)));
    }
  return e;
}

MORE_TEST(test_qr_orthogonal_triangular_reconstructs) {
  static const int64_t shapes[][3] = {{1, 3, 3}, {1, 4, 2}, {1, 2, 4}, {2, 3, 3}, {1, 1, 1}, {1, 5, 3}};
  for (int c = 0; c < 6; c++) {
    int64_t b = shapes[c][0], m = shapes[c][1], n = shapes[c][2];
    ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(b, m, n), -1, 1);
    if (c == 1)
      for (int i = 0; i < m; i++) a->data[i * n] = 0;  /* a zero column: no reflection there */
    tg_tensor *Q = NULL, *R = NULL;
    CHECK(tg_qr(ref_to_tg(a), &Q, &R) == TG_OK, "qr: %s", tg_error());
    ref_arr *q = Q ? ref_from_tg(Q) : NULL, *r = R ? ref_from_tg(R) : NULL;
    tg_free(Q);
    tg_free(R);
    CHECK_T(q);
    CHECK_T(r);
    CHECK(q->shape[1] == m && q->shape[2] == m && r->shape[1] == m && r->shape[2] == n, "qr shapes case %d", c);
    for (int64_t k = 0; k < b; k++) {
      const double *qa = q->data + k * m * m, *ra = r->data + k * m * n, *aa = a->data + k * m * n;
      CHECK(orth_err(qa, (int)m, (int)m) < 1e-5, "case %d: Q^T Q off by %g", c, orth_err(qa, (int)m, (int)m));
      CHECK(mm_err(qa, ra, aa, (int)m, (int)m, (int)n, false, false) < 1e-5, "case %d: QR != A", c);
      for (int i = 0; i < m; i++)
        for (int j = 0; j < i && j < n; j++) CHECK(fabs(ra[i * n + j]) < 1e-5, "case %d: R[%d][%d] = %g", c, i, j, ra[i * n + j]);
    }
  }
  tg_tensor *Q = NULL;
  CHECK(tg_qr(tg_ones(TG_FLOAT32, 1, (int64_t[]){3}), &Q, NULL) == TG_ERR_ARG && !Q, "1-d refused");
  CHECK(tg_qr(tg_ones(TG_INT32, 2, (int64_t[]){2, 2}), &Q, NULL) == TG_ERR_ARG, "int refused");
}

/* the singular values of A (m, n) in double: sqrt of the eigenvalues of A^T A by cyclic Jacobi, descending */
static void ref_singular_values(const double *A, int m, int n, double *sv) {
  double M[8][8];
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      M[i][j] = 0;
      for (int q = 0; q < m; q++) M[i][j] += A[q * n + i] * A[q * n + j];
    }
  for (int sweep = 0; sweep < 60; sweep++)
    for (int p = 0; p < n; p++)
      for (int q = p + 1; q < n; q++) {
        if (fabs(M[p][q]) < 1e-300) continue;
        double th = 0.5 * atan2(2 * M[p][q], M[q][q] - M[p][p]), c = cos(th), s = sin(th);
        for (int k = 0; k < n; k++) {  /* M <- J^T M J */
          double mp = M[k][p], mq = M[k][q];
          M[k][p] = c * mp - s * mq;
          M[k][q] = s * mp + c * mq;
        }
        for (int k = 0; k < n; k++) {
          double mp = M[p][k], mq = M[q][k];
          M[p][k] = c * mp - s * mq;
          M[q][k] = s * mp + c * mq;
        }
      }
  for (int i = 0; i < n; i++) sv[i] = sqrt(fmax(M[i][i], 0));
  for (int i = 0; i < n; i++)  /* descending */
    for (int j = i + 1; j < n; j++)
      if (sv[j] > sv[i]) {
        double t = sv[i];
        sv[i] = sv[j];
        sv[j] = t;
      }
}

MORE_TEST(test_svd_values_and_reconstruction) {
  static const int64_t shapes[][3] = {{1, 4, 3}, {1, 3, 5}, {1, 2, 2}, {2, 3, 3}, {1, 1, 3}, {1, 4, 4}};
  for (int c = 0; c < 6; c++)
    for (int full = 0; full < 2; full++) {
      int64_t b = shapes[c][0], m = shapes[c][1], n = shapes[c][2], k = m < n ? m : n;
      ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(b, m, n), -1, 1);
      tg_tensor *U = NULL, *S = NULL, *Vh = NULL;
      CHECK(tg_svd(ref_to_tg(a), full, &U, &S, &Vh) == TG_OK, "svd: %s", tg_error());
      ref_arr *u = U ? ref_from_tg(U) : NULL, *sv = S ? ref_from_tg(S) : NULL, *vh = Vh ? ref_from_tg(Vh) : NULL;
      tg_free(U);
      tg_free(S);
      tg_free(Vh);
      CHECK_T(u);
      CHECK_T(sv);
      CHECK_T(vh);
      int64_t uc = full ? m : k, vr = full ? n : k;
      CHECK(u->shape[1] == m && u->shape[2] == uc && sv->shape[1] == k && vh->shape[1] == vr && vh->shape[2] == n,
            "svd shapes case %d full %d", c, full);
      for (int64_t bi = 0; bi < b; bi++) {
        const double *ua = u->data + bi * m * uc, *sa = sv->data + bi * k, *va = vh->data + bi * vr * n, *aa = a->data + bi * m * n;
        double want[8];
        ref_singular_values(aa, (int)m, (int)n, want);
        for (int i = 0; i < k; i++) CHECK(fabs(sa[i] - want[i]) < 1e-4, "case %d: S[%d] %g, want %g", c, i, sa[i], want[i]);
        /* U[:, :k] diag(S) Vh[:k, :] = A; the first k columns of U and rows of Vh orthonormal */
        double us[64];
        for (int i = 0; i < m; i++)
          for (int j = 0; j < k; j++) us[i * k + j] = ua[i * uc + j] * sa[j];
        CHECK(mm_err(us, va, aa, (int)m, (int)k, (int)n, false, false) < 1e-4, "case %d full %d: U S Vh != A", c, full);
        CHECK(orth_err(ua, (int)m, (int)uc) < 1e-4, "case %d: U not orthonormal", c);
        double vt[64];
        for (int i = 0; i < vr; i++)
          for (int j = 0; j < n; j++) vt[j * vr + i] = va[i * n + j];
        CHECK(orth_err(vt, (int)n, (int)vr) < 1e-4, "case %d: Vh not orthonormal", c);
      }
    }
}

MORE_TEST(test_newton_schulz_against_loop) {
  static const int64_t shapes[][2] = {{2, 3}, {3, 3}, {4, 2}};
  const double p[3] = {2, -1.5, 0.5};
  for (int c = 0; c < 3; c++) {
    int m = (int)shapes[c][0], n = (int)shapes[c][1];
    ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(m, n), -1, 1);
    /* the reference works on the wide orientation (r x q, r <= q) */
    bool tall = m > n;
    int r = tall ? n : m, q = tall ? m : n;
    double G[16], fro = 0;
    for (int i = 0; i < r; i++)
      for (int j = 0; j < q; j++) G[i * q + j] = tall ? a->data[j * n + i] : a->data[i * q + j];
    for (int i = 0; i < r * q; i++) fro += G[i] * G[i];
    for (int i = 0; i < r * q; i++) G[i] /= sqrt(fro) + 1e-7;
    for (int step = 0; step < 5; step++) {
      double GG[16], term[16], acc[16], nt[16];
      for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) {
          GG[i * r + j] = 0;
          for (int k = 0; k < q; k++) GG[i * r + j] += G[i * q + k] * G[j * q + k];
        }
      memcpy(term, G, sizeof term);
      for (int i = 0; i < r * q; i++) acc[i] = p[0] * term[i];
      for (int d = 1; d < 3; d++) {
        for (int i = 0; i < r; i++)
          for (int j = 0; j < q; j++) {
            nt[i * q + j] = 0;
            for (int k = 0; k < r; k++) nt[i * q + j] += GG[i * r + k] * term[k * q + j];
          }
        memcpy(term, nt, sizeof term);
        for (int i = 0; i < r * q; i++) acc[i] += p[d] * term[i];
      }
      memcpy(G, acc, sizeof G);
    }
    ref_arr *want = ref_new(TG_FLOAT32, 2, (int64_t[]){m, n});
    for (int i = 0; i < r; i++)
      for (int j = 0; j < q; j++) want->data[tall ? j * n + i : i * q + j] = ref_round(TG_FLOAT32, G[i * q + j]);
    tg_tensor *t = tg_newton_schulz(ref_to_tg(a), 5, 3, p, 1e-7);
    CHECK_T(t);
    ref_check_tol("newton_schulz", t, want, true, 1e-5, 1e-4, __FILE__, __LINE__);
  }
  CHECK(!tg_newton_schulz(tg_ones(TG_FLOAT32, 1, (int64_t[]){3}), 1, 1, p, 1e-7), "1-d refused");
}

/* loss(A) = sum(Wq * Q) + sum(Wr * R) of qr(A) in float64 */
static double qr_loss(const double *a, const ref_arr *wq, const ref_arr *wr, tg_tensor **grad) {
  ref_arr *av = ref_from(TG_FLOAT64, SHAPE(3, 3), a);
  tg_tensor *x = tg_set_requires_grad(ref_to_tg(av), true), *Q = NULL, *R = NULL;
  if (tg_qr(x, &Q, &R) != TG_OK) return NAN;
  tg_tensor *l = tg_add(tg_sum(tg_mul(Q, ref_to_tg(wq)), 0, NULL, false), tg_sum(tg_mul(R, ref_to_tg(wr)), 0, NULL, false));
  if (grad && tg_gradient(l, 1, &x, grad) != TG_OK) *grad = NULL;
  double v = tg_item(l);
  tg_free(Q);
  tg_free(R);
  return v;
}

MORE_TEST(test_qr_gradient_by_finite_differences) {
  ref_arr *a = ref_rand(TG_FLOAT64, SHAPE(3, 3), -1, 1), *wq = ref_rand(TG_FLOAT64, SHAPE(3, 3), -1, 1),
          *wr = ref_rand(TG_FLOAT64, SHAPE(3, 3), -1, 1);
  tg_tensor *g = NULL;
  qr_loss(a->data, wq, wr, &g);
  CHECK(g, "qr gradient: %s", tg_error());
  if (!g) return;
  ref_arr *ga = ref_from_tg(g);
  CHECK_T(ga);
  for (int i = 0; i < 9; i++) {
    double p[9], h = 1e-6;
    memcpy(p, a->data, sizeof p);
    p[i] += h;
    double up = qr_loss(p, wq, wr, NULL);
    p[i] -= 2 * h;
    double fd = (up - qr_loss(p, wq, wr, NULL)) / (2 * h);
    CHECK(fabs(ga->data[i] - fd) < 1e-4 + 1e-3 * fabs(fd), "dL/dA[%d] %g, finite differences %g", i, ga->data[i], fd);
  }
}

/* det of A (n, n) in double by Gaussian elimination with partial pivoting: the reference for tg_det */
static double ref_det(const double *a, int n) {
  double m[8][8], det = 1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) m[i][j] = a[i * n + j];
  for (int k = 0; k < n; k++) {
    int p = k;
    for (int i = k + 1; i < n; i++)
      if (fabs(m[i][k]) > fabs(m[p][k])) p = i;
    if (m[p][k] == 0) return 0;
    if (p != k) {
      for (int j = 0; j < n; j++) {
        double t = m[k][j];
        m[k][j] = m[p][j];
        m[p][j] = t;
      }
      det = -det;
    }
    det *= m[k][k];
    for (int i = k + 1; i < n; i++) {
      double f = m[i][k] / m[k][k];
      for (int j = k; j < n; j++) m[i][j] -= f * m[k][j];
    }
  }
  return det;
}

MORE_TEST(test_det_matches_elimination_batched_singular_and_errors) {
  static const int64_t shapes[][2] = {{1, 1}, {1, 2}, {3, 3}, {2, 4}};
  for (int c = 0; c < 4; c++) {
    int64_t b = shapes[c][0], n = shapes[c][1];
    ref_arr *a = ref_rand(TG_FLOAT64, SHAPE(b, n, n), -2, 2);
    if (c == 3)  /* the second matrix singular: row 2 = row 0 + row 1 */
      for (int j = 0; j < n; j++) a->data[n * n + 2 * n + j] = a->data[n * n + j] + a->data[n * n + n + j];
    if (c == 2) {  /* a 3-cycle (det 1) and a swap (det -1): the signs of the reflections matter */
      static const double cyc[9] = {0, 1, 0, 0, 0, 1, 1, 0, 0}, swp[9] = {0, 1, 0, 1, 0, 0, 0, 0, 1};
      memcpy(a->data + 9, cyc, sizeof cyc);
      memcpy(a->data + 18, swp, sizeof swp);
    }
    tg_tensor *d = tg_det(ref_to_tg(a));
    CHECK(d, "det case %d: %s", c, tg_error());
    ref_arr *got = d ? ref_from_tg(d) : NULL;
    tg_free(d);
    CHECK_T(got);
    CHECK(got->ndim == 1 && got->shape[0] == b, "det case %d: shape", c);
    for (int64_t k = 0; k < b; k++) {
      double want = ref_det(a->data + k * n * n, (int)n);
      CHECK(fabs(got->data[k] - want) < 1e-9 + 1e-9 * fabs(want), "det case %d matrix %lld: %.17g, elimination %.17g", c,
            (long long)k, got->data[k], want);
    }
  }
  /* float32 */
  float f[4] = {2, 1, 3, 4};
  tg_tensor *p = tg_det(tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 2}, f, sizeof f));
  CHECK(p && fabs(tg_item(p) - 5) < 1e-5, "det of a float32 matrix: %g, want 5", p ? tg_item(p) : NAN);
  tg_free(p);
  /* 0 x 0 matrices: the empty product, 1 (as torch.linalg.det and numpy give) */
  tg_tensor *e = tg_det(tg_zeros(TG_FLOAT32, 3, (int64_t[]){2, 0, 0}));
  ref_arr *ge = e ? ref_from_tg(e) : NULL;
  tg_free(e);
  CHECK(ge && ge->ndim == 1 && ge->shape[0] == 2 && ge->data[0] == 1 && ge->data[1] == 1, "det of 0 x 0 matrices: %s",
        ge ? "not [1, 1]" : tg_error());
  CHECK(!tg_det(tg_ones(TG_FLOAT32, 2, (int64_t[]){2, 3})) && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "2 x 3"),
        "non-square refused: %s", tg_error());
  CHECK(!tg_det(tg_ones(TG_INT32, 2, (int64_t[]){2, 2})) && tg_error_status() == TG_ERR_ARG, "int refused");
  CHECK(!tg_det(tg_ones(TG_FLOAT32, 1, (int64_t[]){3})) && tg_error_status() == TG_ERR_ARG, "1-d refused");
  tg_error_clear();
}

/* d det(A) / dA = det(A) A^-T: checked by central differences of the float64 det */
MORE_TEST(test_det_gradient_by_finite_differences) {
  if (getenv("TG_TEST_QUICK")) {  /* the runs on other devices and under the sanitizers: qr's gradient is tested */
    test_skip("TG_TEST_QUICK: a gradient graph of ~50 kernels (7 s of PoCL compiling)");
    return;
  }
  ref_arr *a = ref_rand(TG_FLOAT64, SHAPE(3, 3), -1, 1);
  tg_tensor *x = tg_set_requires_grad(ref_to_tg(a), true), *g = NULL;
  tg_tensor *d = tg_det(x);
  CHECK(d && tg_gradient(d, 1, &x, &g) == TG_OK, "det gradient: %s", tg_error());
  tg_free(d);
  if (!g) return;
  ref_arr *ga = ref_from_tg(g);
  CHECK_T(ga);
  for (int i = 0; i < 9; i++) {
    double q[9], h = 1e-6;
    memcpy(q, a->data, sizeof q);
    q[i] += h;
    double up = ref_det(q, 3);
    q[i] -= 2 * h;
    double fd = (up - ref_det(q, 3)) / (2 * h);
    CHECK(fabs(ga->data[i] - fd) < 1e-6 + 1e-5 * fabs(fd), "d det/dA[%d] %g, finite differences %g", i, ga->data[i], fd);
  }
}
