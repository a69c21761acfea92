/* test_scan_sort.c — scans (cumsum forms, cumprod, cummax, cummin, logcumsumexp), sorting (sort, argsort,
 * topk), the statistics forms (var_mean, std_mean, logsumexp over several axes, softmin, any, all, sum and
 * prod with a dtype) and every reduction's 0-d and empty forms, against plain C references written here:
 * running loops over one axis, a stable insertion sort that breaks ties by index, bucketed reductions.
 * Gradients by central finite differences in float64 (atol 1e-4 / rtol 1e-3; sort and topk away from ties). */
#include <stdlib.h>

#include "ref.h"
#include "test.h"


static tg_tensor *T(const ref_arr *a) { return ref_to_tg(a); }

/* a random shape of 0 to 3 axes, sizes from {0, 1, 2, 3, 5} (size 0 only when allow_empty) */
static int rand_shape(int64_t *shape, bool allow_empty) {
  static const int64_t sizes[] = {0, 1, 2, 3, 5};
  int nd = (int)ref_randint(0, 3);
  for (int i = 0; i < nd; i++) shape[i] = sizes[ref_randint(allow_empty ? 0 : 1, 4)];
  return nd;
}

/* a random axis of nd, negative half the time; 0 or -1 for a 0-d tensor */
static int rand_axis(int nd) {
  if (nd == 0) return ref_randint(0, 1) ? 0 : -1;
  int a = (int)ref_randint(0, nd - 1);
  return ref_randint(0, 1) ? a - nd : a;
}

/* outer x n x inner around axis (0-d: 1 x 1 x 1) */
static void around(const ref_arr *a, int axis, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = *inner = *n = 1;
  if (a->ndim == 0) return;
  int ax = axis < 0 ? axis + a->ndim : axis;
  for (int i = 0; i < ax; i++) *outer *= a->shape[i];
  *n = a->shape[ax];
  for (int i = ax + 1; i < a->ndim; i++) *inner *= a->shape[i];
}

/* ---- scans: the plain C reference -------------------------------------------------------------------------- */

typedef enum { C_SUM, C_PROD, C_MAX, C_MIN, C_LSE } cop;

/* the running op along axis; idx (for max/min) gets tinygrad's index: the first j <= i equal to the value */
static ref_arr *ref_scan(const ref_arr *a, int axis, cop op, ref_arr **idx) {
  tg_dtype dt = op == C_SUM ? (ref_is_float(a->dtype) ? a->dtype : ref_sum_dtype(a->dtype))
                : op == C_LSE ? (ref_is_float(a->dtype) ? a->dtype : TG_FLOAT32) : a->dtype;
  ref_arr *r = ref_new(dt, a->ndim, a->shape);
  if (idx) *idx = ref_new(TG_INT32, a->ndim, a->shape);
  int64_t outer, n, inner;
  around(a, axis, &outer, &n, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      double acc = 0;
      for (int64_t i = 0; i < n; i++) {
        int64_t at = (o * n + i) * inner + k;
        double x = a->data[at];
        if (i == 0) acc = op == C_SUM ? x : x;
        else if (op == C_SUM) acc += x;
        else if (op == C_PROD) acc *= x;
        else if (op == C_MAX) acc = x > acc ? x : acc;
        else if (op == C_MIN) acc = x < acc ? x : acc;
        else {  /* log(e^acc + e^x), stable */
          double m = acc > x ? acc : x;
          acc = isinf(m) ? (m > 0 ? m : -INFINITY) : m + log(exp(acc - m) + exp(x - m));
        }
        acc = op == C_LSE ? acc : ref_round(dt, acc);
        r->data[at] = ref_round(dt, acc);
        if (idx) {
          int64_t j = 0;
          while (j < i && a->data[(o * n + j) * inner + k] != acc) j++;
          (*idx)->data[at] = (double)j;
        }
      }
    }
  return r;
}

static tg_tensor *cum_values(tg_status (*f)(tg_tensor *, int, tg_tensor **, tg_tensor **), tg_tensor *x, int axis,
                             tg_tensor **idx) {
  tg_tensor *v = NULL;
  return f(x, axis, &v, idx) == TG_OK ? v : NULL;
}

REF_TEST(test_scan_cumprod_cummax_cummin_random_shapes_and_dtypes) {
  static const tg_dtype dts[] = {TG_FLOAT32, TG_INT32, TG_INT8, TG_UINT8, TG_BOOL, TG_FLOAT64};
  char what[96];
  for (int c = 0; c < 14; c++) {
    int64_t shape[3];
    int nd = rand_shape(shape, true);
    int axis = rand_axis(nd);
    tg_dtype dt = dts[c % 6];
    /* small integers repeat, so the index ties are exercised; floats from a few values for the same reason */
    ref_arr *a = ref_rand(dt, nd, shape, dt == TG_UINT8 ? 0 : -2, 2);
    if (ref_is_float(dt))
      for (int64_t i = 0; i < a->numel; i++) a->data[i] = ref_round(dt, (double)ref_randint(-4, 4) * 0.375);
    tg_tensor *x = T(a);
    ref_arr *imax, *imin;
    ref_arr *wmax = ref_scan(a, axis, C_MAX, &imax), *wmin = ref_scan(a, axis, C_MIN, &imin);
    tg_tensor *gi = NULL, *gj = NULL;
    snprintf(what, sizeof what, "cummax %s axis %d case %d", ref_dtype_name(dt), axis, c);
    CHECK_REF(what, cum_values(tg_cummax, x, axis, &gi), wmax);
    CHECK_REF(what, gi, imax);
    snprintf(what, sizeof what, "cummin %s axis %d case %d", ref_dtype_name(dt), axis, c);
    CHECK_REF(what, cum_values(tg_cummin, x, axis, &gj), wmin);
    CHECK_REF(what, gj, imin);
    if (dt != TG_BOOL) {
      snprintf(what, sizeof what, "cumprod %s axis %d case %d", ref_dtype_name(dt), axis, c);
      CHECK_REF(what, tg_cumprod(x, axis), ref_scan(a, axis, C_PROD, NULL));
    }
    snprintf(what, sizeof what, "cumsum %s axis %d case %d", ref_dtype_name(dt), axis, c);
    CHECK_REF(what, tg_cumsum(x, axis), ref_scan(a, axis, C_SUM, NULL));
  }
}

/* over 512 the scans go in two stages (chunks of 256 and their running totals) */
REF_TEST(test_scan_long_axis_two_stages) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(700, 2), 0.99, 1.01);
  CHECK_REF("cumprod (700, 2) axis 0", tg_cumprod(T(a), 0), ref_scan(a, 0, C_PROD, NULL));
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(2, 1100), -100, 100);
  ref_arr *ib, *ic;
  tg_tensor *gi = NULL;
  CHECK_REF("cummax (2, 1100) axis -1", cum_values(tg_cummax, T(b), -1, &gi), ref_scan(b, -1, C_MAX, &ib));
  CHECK_REF("cummax (2, 1100) indices", gi, ib);
  ref_arr *c = ref_rand(TG_INT32, SHAPE(600), -1000, 1000);
  CHECK_REF("cummin int32 (600)", cum_values(tg_cummin, T(c), 0, &gi), ref_scan(c, 0, C_MIN, &ic));
  CHECK_REF("cummin int32 (600) indices", gi, ic);
  ref_arr *d = ref_rand(TG_FLOAT32, SHAPE(530), -3, 3);
  ref_arr *want = ref_scan(d, 0, C_LSE, NULL);
  ref_check_tol("logcumsumexp (530)", tg_logcumsumexp(T(d), 0), want, true, 1e-5, 1e-4, __FILE__, __LINE__);
}

/* int64 extremes (the pad identity is INT64_MIN) and uint8 (cummin's inverse is x ^ 255) */
REF_TEST(test_scan_integer_extremes) {
  int64_t v[] = {5, INT64_MIN, INT64_MAX, -7, INT64_MAX};
  tg_tensor *x = tg_from_data(TG_INT64, 1, (int64_t[]){5}, v, sizeof v);
  tg_tensor *vals = NULL, *idx = NULL;
  CHECK(tg_cummax(x, 0, &vals, &idx) == TG_OK, "cummax int64: %s", tg_error());
  int64_t gv[5], want[] = {5, 5, INT64_MAX, INT64_MAX, INT64_MAX};
  int32_t gi[5], wi[] = {0, 0, 2, 2, 2};
  CHECK(tg_to_host(vals, gv, sizeof gv) == TG_OK && tg_to_host(idx, gi, sizeof gi) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 5; i++) CHECK(gv[i] == want[i] && gi[i] == wi[i], "cummax int64 [%d]: %lld/%d", i, (long long)gv[i], gi[i]);
  CHECK(tg_cummin(x, 0, &vals, &idx) == TG_OK, "cummin int64: %s", tg_error());
  int64_t wmin[] = {5, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
  int32_t wmi[] = {0, 1, 1, 1, 1};
  CHECK(tg_to_host(vals, gv, sizeof gv) == TG_OK && tg_to_host(idx, gi, sizeof gi) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 5; i++) CHECK(gv[i] == wmin[i] && gi[i] == wmi[i], "cummin int64 [%d]: %lld/%d", i, (long long)gv[i], gi[i]);
  uint8_t u[] = {200, 255, 0, 3};
  tg_tensor *xu = tg_from_data(TG_UINT8, 1, (int64_t[]){4}, u, sizeof u);
  CHECK(tg_cummin(xu, -1, &vals, NULL) == TG_OK, "cummin uint8: %s", tg_error());
  uint8_t gu[4];
  CHECK(tg_to_host(vals, gu, sizeof gu) == TG_OK && gu[0] == 200 && gu[1] == 200 && gu[2] == 0 && gu[3] == 0,
        "cummin uint8: %u %u %u %u", gu[0], gu[1], gu[2], gu[3]);
}

REF_TEST(test_scan_logcumsumexp_stable_and_infinite) {
  for (int c = 0; c < 6; c++) {
    int64_t shape[3];
    int nd = rand_shape(shape, true);
    int axis = rand_axis(nd);
    ref_arr *a = ref_rand(TG_FLOAT32, nd, shape, -4, 4);
    char what[64];
    snprintf(what, sizeof what, "logcumsumexp axis %d case %d", axis, c);
    CHECK_REF(what, tg_logcumsumexp(T(a), axis), ref_scan(a, axis, C_LSE, NULL));
  }
  /* tinygrad's numerical case, large values, and infinities (PyTorch's results) */
  double big[] = {0, 100, 1000, -1000, 1000.5};
  ref_arr *b = ref_from(TG_FLOAT32, SHAPE(5), big);
  CHECK_REF("logcumsumexp large", tg_logcumsumexp(T(b), 0), ref_scan(b, 0, C_LSE, NULL));
  double inf[] = {-INFINITY, -INFINITY, 2, -INFINITY, INFINITY, 3};
  ref_arr *i = ref_from(TG_FLOAT32, SHAPE(6), inf);
  double want[] = {-INFINITY, -INFINITY, 2, 2, INFINITY, INFINITY};
  CHECK_REF("logcumsumexp infinities", tg_logcumsumexp(T(i), 0), ref_from(TG_FLOAT32, SHAPE(6), want));
  ref_arr *n = ref_rand(TG_INT32, SHAPE(2, 3), -3, 3);
  CHECK_REF("logcumsumexp int32 -> float32", tg_logcumsumexp(T(n), 1), ref_scan(n, 1, C_LSE, NULL));
}

/* ---- sorting: a stable insertion sort, NaN the largest ------------------------------------------------------ */

static bool before(double a, double b, bool desc) {  /* a strictly before b */
  if (isnan(a) || isnan(b)) return desc ? isnan(a) && !isnan(b) : !isnan(a) && isnan(b);
  return desc ? a > b : a < b;
}

/* sorted values and indices along axis, the first k */
static void ref_sort(const ref_arr *a, int axis, bool desc, int64_t k, ref_arr **vals, ref_arr **idx) {
  int64_t outer, n, inner, shape[TG_MAX_DIMS];
  around(a, axis, &outer, &n, &inner);
  int ax = a->ndim ? (axis < 0 ? axis + a->ndim : axis) : 0;
  for (int i = 0; i < a->ndim; i++) shape[i] = i == ax ? k : a->shape[i];
  *vals = ref_new(a->dtype, a->ndim, shape);
  *idx = ref_new(TG_INT32, a->ndim, shape);
  int64_t *ord = malloc((size_t)(n + 1) * sizeof *ord);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t c = 0; c < inner; c++) {
      for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        while (j > 0 && before(a->data[(o * n + i) * inner + c], a->data[(o * n + ord[j - 1]) * inner + c], desc)) {
          ord[j] = ord[j - 1];
          j--;
        }
        ord[j] = i;
      }
      for (int64_t r = 0; r < k; r++) {
        (*vals)->data[(o * k + r) * inner + c] = a->data[(o * n + ord[r]) * inner + c];
        (*idx)->data[(o * k + r) * inner + c] = (double)ord[r];
      }
    }
  free(ord);
}

REF_TEST(test_sort_argsort_random_stable) {
  static const tg_dtype dts[] = {TG_FLOAT32, TG_INT32, TG_INT8, TG_BOOL, TG_FLOAT16, TG_UINT8};
  char what[96];
  for (int c = 0; c < 12; c++) {
    int64_t shape[3];
    int nd = rand_shape(shape, true);
    int axis = rand_axis(nd);
    tg_dtype dt = dts[c % 6];
    bool desc = c % 4 >= 2;
    ref_arr *a = ref_rand(dt, nd, shape, dt == TG_UINT8 ? 0 : -3, 3);
    if (ref_is_float(dt))  /* a few distinct values: ties */
      for (int64_t i = 0; i < a->numel; i++) a->data[i] = ref_round(dt, (double)ref_randint(-3, 3) * 0.5);
    ref_arr *wv, *wi;
    int64_t outer, n, inner;
    around(a, axis, &outer, &n, &inner);
    ref_sort(a, axis, desc, n, &wv, &wi);
    tg_tensor *v = NULL, *i = NULL;
    snprintf(what, sizeof what, "sort %s axis %d %s case %d", ref_dtype_name(dt), axis, desc ? "desc" : "asc", c);
    CHECK(tg_sort(T(a), axis, desc, &v, &i) == TG_OK, "%s: %s", what, tg_error());
    CHECK_REF(what, v, wv);
    CHECK_REF(what, i, wi);
    CHECK_REF(what, tg_argsort(T(a), axis, desc), wi);
  }
  /* tinygrad's repeated values: (0, 1) * 9 */
  double rep[18];
  for (int i = 0; i < 18; i++) rep[i] = i % 2;
  ref_arr *r = ref_from(TG_FLOAT32, SHAPE(18), rep), *wv, *wi;
  for (int desc = 0; desc < 2; desc++) {
    tg_tensor *v = NULL, *i = NULL;
    ref_sort(r, 0, desc, 18, &wv, &wi);
    CHECK(tg_sort(T(r), -1, desc, &v, &i) == TG_OK, "sort repeated: %s", tg_error());
    CHECK_REF(desc ? "sort repeated desc" : "sort repeated", v, wv);
    CHECK_REF(desc ? "sort repeated desc indices" : "sort repeated indices", i, wi);
  }
  /* a longer axis of distinct values */
  ref_arr *l = ref_rand(TG_FLOAT32, SHAPE(3, 77), -10, 10);
  tg_tensor *v = NULL, *i = NULL;
  ref_sort(l, 1, true, 77, &wv, &wi);
  CHECK(tg_sort(T(l), 1, true, &v, &i) == TG_OK, "sort (3, 77): %s", tg_error());
  CHECK_REF("sort (3, 77) desc", v, wv);
  CHECK_REF("sort (3, 77) desc indices", i, wi);
}

REF_TEST(test_sort_nan_and_infinities) {
  double x[] = {1, NAN, -INFINITY, 0, INFINITY, NAN, -2, 1};
  ref_arr *a = ref_from(TG_FLOAT32, SHAPE(8), x), *wv, *wi;
  for (int desc = 0; desc < 2; desc++) {
    tg_tensor *v = NULL, *i = NULL;
    ref_sort(a, 0, desc, 8, &wv, &wi);
    CHECK(tg_sort(T(a), 0, desc, &v, &i) == TG_OK, "sort NaN: %s", tg_error());
    CHECK_REF(desc ? "sort NaN desc" : "sort NaN", v, wv);
    CHECK_REF(desc ? "sort NaN desc indices" : "sort NaN indices", i, wi);
  }
}

REF_TEST(test_topk_random_and_ties) {
  char what[96];
  for (int c = 0; c < 8; c++) {
    int64_t shape[3];
    int nd = rand_shape(shape, true);
    int axis = rand_axis(nd);
    bool largest = c % 2 == 0;
    tg_dtype dt = c % 3 == 0 ? TG_INT32 : TG_FLOAT32;
    ref_arr *a = ref_rand(dt, nd, shape, -3, 3);
    int64_t outer, n, inner;
    around(a, axis, &outer, &n, &inner);
    int64_t k = nd ? ref_randint(0, n) : 1;  /* a 0-d tensor: k 1 only */
    ref_arr *wv, *wi;
    ref_sort(a, axis, largest, k, &wv, &wi);
    tg_tensor *v = NULL, *i = NULL;
    snprintf(what, sizeof what, "topk k %lld axis %d %s case %d", (long long)k, axis, largest ? "largest" : "smallest", c);
    CHECK(tg_topk(T(a), k, axis, largest, c % 4 != 1, &v, &i) == TG_OK, "%s: %s", what, tg_error());
    CHECK_REF(what, v, wv);
    CHECK_REF(what, i, wi);
  }
  /* tinygrad's test: values 1 1 0 1 0 1 0 0 1 0 0 0 1 0 */
  int32_t b[] = {1, 1, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0};
  tg_tensor *x = tg_from_data(TG_INT32, 1, (int64_t[]){14}, b, sizeof b), *v = NULL, *i = NULL;
  int32_t gv[3], gi[3];
  CHECK(tg_topk(x, 3, -1, true, true, &v, &i) == TG_OK && tg_to_host(v, gv, sizeof gv) == TG_OK &&
        tg_to_host(i, gi, sizeof gi) == TG_OK, "topk: %s", tg_error());
  CHECK(gv[0] == 1 && gv[1] == 1 && gv[2] == 1 && gi[0] == 0 && gi[1] == 1 && gi[2] == 3, "topk largest: %d %d %d / %d %d %d",
        gv[0], gv[1], gv[2], gi[0], gi[1], gi[2]);
  CHECK(tg_topk(x, 3, 0, false, true, &v, &i) == TG_OK && tg_to_host(v, gv, sizeof gv) == TG_OK &&
        tg_to_host(i, gi, sizeof gi) == TG_OK, "topk: %s", tg_error());
  CHECK(gv[0] == 0 && gv[1] == 0 && gv[2] == 0 && gi[0] == 2 && gi[1] == 4 && gi[2] == 6, "topk smallest: %d %d %d / %d %d %d",
        gv[0], gv[1], gv[2], gi[0], gi[1], gi[2]);
  /* k out of range, a bad axis, NULL */
  tg_tensor *f = tg_zeros(TG_FLOAT32, 1, (int64_t[]){4});
  CHECK(tg_topk(f, 5, 0, true, true, &v, &i) == TG_ERR_ARG && !v && !i && strstr(tg_error(), "tg_topk"), "k 5 of 4: %s", tg_error());
  CHECK(tg_topk(f, -1, 0, true, true, &v, &i) == TG_ERR_ARG, "k -1");
  CHECK(tg_topk(f, 2, 1, true, true, &v, &i) == TG_ERR_ARG, "axis 1 of (4)");
  CHECK(tg_topk(tg_scalar(TG_FLOAT32, 1), 0, 0, true, true, &v, &i) == TG_ERR_ARG, "k 0 of a 0-d tensor");
  CHECK(tg_sort(f, -2, false, &v, &i) == TG_ERR_ARG && !v && !i, "sort axis -2 of (4)");
  tg_error_clear();
  CHECK(tg_sort(NULL, 0, false, &v, &i) == TG_ERR_ARG && !v && !i, "sort NULL");
  CHECK(tg_argsort(NULL, 0, false) == NULL, "argsort NULL");
}

REF_TEST(test_scan_sort_zero_d_and_errors) {
  tg_tensor *s = tg_scalar(TG_FLOAT32, -1.5), *v = NULL, *i = NULL;
  ref_arr *ws = ref_scalar(TG_FLOAT32, -1.5), *zi = ref_scalar(TG_INT32, 0);
  for (int axis = -1; axis <= 0; axis++) {
    CHECK_REF("cumprod 0-d", tg_cumprod(s, axis), ws);
    CHECK_REF("cumsum 0-d", tg_cumsum(s, axis), ws);
    CHECK(tg_cummax(s, axis, &v, &i) == TG_OK, "cummax 0-d: %s", tg_error());
    CHECK_REF("cummax 0-d", v, ws);
    CHECK_REF("cummax 0-d index", i, zi);
    CHECK(tg_cummin(s, axis, &v, &i) == TG_OK, "cummin 0-d: %s", tg_error());
    CHECK_REF("cummin 0-d", v, ws);
    CHECK_REF("cummin 0-d index", i, zi);
    CHECK_REF("logcumsumexp 0-d", tg_logcumsumexp(s, axis), ws);
    CHECK(tg_sort(s, axis, true, &v, &i) == TG_OK, "sort 0-d: %s", tg_error());
    CHECK_REF("sort 0-d", v, ws);
    CHECK_REF("sort 0-d index", i, zi);
    CHECK(tg_topk(s, 1, axis, true, true, &v, &i) == TG_OK, "topk 0-d: %s", tg_error());
    CHECK_REF("topk 0-d", v, ws);
    CHECK_REF("argsort 0-d", tg_argsort(s, axis, false), zi);
  }
  CHECK(tg_cumprod(s, 1) == NULL && strstr(tg_error(), "tg_cumprod"), "cumprod axis 1 of 0-d: %s", tg_error());
  CHECK(tg_cummax(s, 1, &v, &i) == TG_ERR_ARG && !v && !i, "cummax axis 1 of 0-d");
  CHECK(tg_cummin(s, -2, &v, &i) == TG_ERR_ARG, "cummin axis -2 of 0-d");
  CHECK(tg_logcumsumexp(s, 1) == NULL, "logcumsumexp axis 1 of 0-d");
  tg_tensor *x = tg_zeros(TG_FLOAT32, 1, (int64_t[]){5});
  CHECK(tg_cumprod(x, 1) == NULL && tg_cumprod(x, -2) == NULL, "cumprod axis 1 / -2 of (5)");
  CHECK(tg_cummax(x, -2, &v, &i) == TG_ERR_ARG, "cummax axis -2 of (5)");
  CHECK(tg_cumsum(x, 1) == NULL, "cumsum axis 1 of (5)");
  tg_error_clear();
  CHECK(tg_cummax(NULL, 0, &v, &i) == TG_ERR_ARG && !v && !i, "cummax NULL");
  /* the empty axis keeps shapes: (2, 0, 4) along 1 */
  tg_tensor *e = tg_zeros(TG_INT8, 3, (int64_t[]){2, 0, 4});
  CHECK(tg_cummin(e, 1, &v, &i) == TG_OK && tg_ndim(v) == 3 && tg_shape(v, 1) == 0 && tg_dtype_of(v) == TG_INT8 &&
        tg_dtype_of(i) == TG_INT32 && tg_numel(i) == 0, "cummin (2, 0, 4)");
  tg_tensor *cs = tg_cumsum(e, 1);
  CHECK(cs && tg_dtype_of(cs) == TG_INT32 && tg_numel(cs) == 0, "cumsum int8 of (2, 0, 4) is int32");
  CHECK(tg_sort(e, 1, false, &v, &i) == TG_OK && tg_numel(v) == 0 && tg_shape(i, 1) == 0, "sort (2, 0, 4)");
}

/* ---- gradients by central finite differences ---------------------------------------------------------------- */

typedef tg_tensor *(*ufn)(tg_tensor *x);

/* sum(f(x) * w) with w from the fixed seed w_seed; NAN on error */
static double loss_at(ufn f, int nd, const int64_t *shape, const double *x, int64_t n, uint64_t w_seed, tg_tensor **keep) {
  tg_tensor *tx = tg_from_data(TG_FLOAT64, nd, shape, x, (size_t)n * 8);
  if (keep) *keep = tg_set_requires_grad(tx, true);
  tg_tensor *y = f(tx);
  if (!y) return NAN;
  int64_t m = tg_numel(y);
  double *w = malloc((size_t)(m + 1) * 8);
  uint64_t r = w_seed;
  for (int64_t i = 0; i < m; i++) {
    r ^= r << 13; r ^= r >> 7; r ^= r << 17;
    w[i] = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
  }
  tg_tensor *tw = tg_from_data(TG_FLOAT64, tg_ndim(y), tg_shape_ptr(y), w, (size_t)m * 8);
  free(w);
  tg_tensor *loss = tg_sum(tg_mul(tg_cast(y, TG_FLOAT64), tw), 0, NULL, false);
  if (keep) return tg_backward(loss) == TG_OK ? 0 : NAN;
  return tg_item(loss);
}

static void check_grad(const char *name, ufn f, int nd, const int64_t *shape, const double *x0, const char *file, int line) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *x = malloc((size_t)(n + 1) * 8), *g = calloc((size_t)(n + 1), 8);
  memcpy(x, x0, (size_t)n * 8);
  uint64_t seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)line;
  tg_scope_begin();
  tg_tensor *tx = NULL;
  bool ok = loss_at(f, nd, shape, x, n, seed, &tx) == 0;
  if (!ok) test_fail(file, line, "%s: backward failed: %s", name, tg_error());
  else if (!tg_grad(tx)) memset(g, 0, (size_t)n * 8);
  else if (tg_to_host(tg_grad(tx), g, (size_t)n * 8) != TG_OK) {
    test_fail(file, line, "%s: reading the gradient failed: %s", name, tg_error());
    ok = false;
  }
  tg_scope_end();
  int bad = 0;
  for (int64_t i = 0; i < n && ok && bad < 3; i++) {
    double keep = x[i], eps = 1e-6;
    tg_scope_begin();
    x[i] = keep + eps;
    double lp = loss_at(f, nd, shape, x, n, seed, NULL);
    x[i] = keep - eps;
    double lm = loss_at(f, nd, shape, x, n, seed, NULL);
    tg_scope_end();
    x[i] = keep;
    double fd = (lp - lm) / (2 * eps);
    if (!(fabs(fd - g[i]) <= 1e-4 + 1e-3 * fabs(fd))) {
      test_fail(file, line, "%s: d/dx[%lld] (x = %g): analytic %.9g, finite differences %.9g", name, (long long)i, x[i], g[i], fd);
      bad++;
    }
  }
  free(x);
  free(g);
}
#define CHECK_GRAD(name, f, nd, shape, x) check_grad(name, f, nd, shape, x, __FILE__, __LINE__)

static tg_tensor *g_cumprod0(tg_tensor *x) { return tg_cumprod(x, 0); }
static tg_tensor *g_cumprod1(tg_tensor *x) { return tg_cumprod(x, -1); }
static tg_tensor *g_cummax1(tg_tensor *x) { return cum_values(tg_cummax, x, 1, NULL); }
static tg_tensor *g_cummin0(tg_tensor *x) { return cum_values(tg_cummin, x, 0, NULL); }
static tg_tensor *g_lcse1(tg_tensor *x) { return tg_logcumsumexp(x, -1); }
static tg_tensor *g_lcse0(tg_tensor *x) { return tg_logcumsumexp(x, 0); }
static tg_tensor *g_sort1(tg_tensor *x) {
  tg_tensor *v = NULL;
  return tg_sort(x, 1, false, &v, NULL) == TG_OK ? v : NULL;
}
static tg_tensor *g_sort0d(tg_tensor *x) {
  tg_tensor *v = NULL;
  return tg_sort(x, 0, true, &v, NULL) == TG_OK ? v : NULL;
}
static tg_tensor *g_topk(tg_tensor *x) {
  tg_tensor *v = NULL;
  return tg_topk(x, 2, -1, true, true, &v, NULL) == TG_OK ? v : NULL;
}
static tg_tensor *g_bottomk(tg_tensor *x) {
  tg_tensor *v = NULL;
  return tg_topk(x, 3, 0, false, true, &v, NULL) == TG_OK ? v : NULL;
}
static tg_tensor *g_lse_axes(tg_tensor *x) { return tg_logsumexp_axes(x, 2, (int[]){0, -1}, false); }
static tg_tensor *g_lse_all(tg_tensor *x) { return tg_logsumexp(x, TG_ALL, true); }
static tg_tensor *g_softmin(tg_tensor *x) { return tg_softmin(x, 0); }
static tg_tensor *g_var_mean(tg_tensor *x) {
  tg_tensor *v = NULL, *m = NULL;
  if (tg_var_mean(x, 1, (int[]){1}, false, 1, &v, &m) != TG_OK) return NULL;
  return tg_stack(2, (tg_tensor *[]){v, m}, 0);
}
static tg_tensor *g_std_mean(tg_tensor *x) {
  tg_tensor *s = NULL, *m = NULL;
  if (tg_std_mean(x, 0, NULL, true, 0, &s, &m) != TG_OK) return NULL;
  return tg_add(tg_mul_scalar(s, 2), m);
}

/* n values, distinct by at least 0.1, in a random order */
static void distinct(double *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = -1 + 0.13 * (double)i + ref_uniform(0, 0.02);
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = ref_randint(0, i);
    double t = x[i];
    x[i] = x[j];
    x[j] = t;
  }
}

REF_TEST(test_scan_sort_gradients_finite_differences) {
  double x[24];
  distinct(x, 24);
  CHECK_GRAD("cumprod axis 0 (4, 3)", g_cumprod0, 2, ((int64_t[]){4, 3}), x);
  CHECK_GRAD("cumprod axis -1 (2, 5)", g_cumprod1, 2, ((int64_t[]){2, 5}), x);
  CHECK_GRAD("cummax values axis 1 (3, 4)", g_cummax1, 2, ((int64_t[]){3, 4}), x);
  CHECK_GRAD("cummin values axis 0 (5, 2)", g_cummin0, 2, ((int64_t[]){5, 2}), x);
  CHECK_GRAD("logcumsumexp axis -1 (2, 6)", g_lcse1, 2, ((int64_t[]){2, 6}), x);
  CHECK_GRAD("logcumsumexp 0-d", g_lcse0, 0, NULL, x);
  CHECK_GRAD("sort values axis 1 (2, 6)", g_sort1, 2, ((int64_t[]){2, 6}), x);
  CHECK_GRAD("sort values 0-d", g_sort0d, 0, NULL, x);
  CHECK_GRAD("topk 2 largest (3, 4)", g_topk, 2, ((int64_t[]){3, 4}), x);
  CHECK_GRAD("topk 3 smallest axis 0 (5, 2)", g_bottomk, 2, ((int64_t[]){5, 2}), x);
  CHECK_GRAD("logsumexp axes (0, -1) of (2, 3, 2)", g_lse_axes, 3, ((int64_t[]){2, 3, 2}), x);
  CHECK_GRAD("logsumexp TG_ALL keepdim (3, 4)", g_lse_all, 2, ((int64_t[]){3, 4}), x);
  CHECK_GRAD("softmin axis 0 (4, 3)", g_softmin, 2, ((int64_t[]){4, 3}), x);
  CHECK_GRAD("var_mean axis 1 (3, 4)", g_var_mean, 2, ((int64_t[]){3, 4}), x);
  CHECK_GRAD("std_mean all (3, 4)", g_std_mean, 2, ((int64_t[]){3, 4}), x);
  /* a long axis: the two-stage cumprod and cummax */
  static double l[600];
  for (int i = 0; i < 600; i++) l[i] = 1 + 0.01 * sin(i * 0.7);
  CHECK_GRAD("cumprod (600) two stages", g_cumprod0, 1, ((int64_t[]){600}), l);
}

/* cumprod's gradient comes from prod's rule, which gives the product of the others at a zero (tinygrad's rule) */
REF_TEST(test_scan_cumprod_gradient_with_zeros) {
  double p[] = {0, 2, 3};
  tg_tensor *t = tg_set_requires_grad(tg_from_data(TG_FLOAT64, 1, (int64_t[]){3}, p, sizeof p), true);
  double g[3] = {0};
  bool ok = tg_backward(tg_prod(t, 0, NULL, false)) == TG_OK && tg_to_host(tg_grad(t), g, sizeof g) == TG_OK;
  CHECK(ok && fabs(g[0] - 6) <= 1e-9, "tg_prod's gradient at a zero: %g, want 6 (%s)", g[0], tg_error());
  double x[] = {0.5, 0, 2, -1.5, 0, 3, 1.2, 0.7, -0.3, 0, 0, 1.1};
  CHECK_GRAD("cumprod with zeros axis -1 (3, 4)", g_cumprod1, 2, ((int64_t[]){3, 4}), x);
  CHECK_GRAD("cumprod with zeros axis 0 (4, 3)", g_cumprod0, 2, ((int64_t[]){4, 3}), x);
}

/* ---- reductions: every one over axis 0 / -1 of a 0-d tensor, and over empty axes -------------------------- */

static double value_of(tg_tensor *t) { return t && tg_ndim(t) == 0 ? tg_item(tg_cast(t, TG_FLOAT64)) : NAN; }

REF_TEST(test_reductions_zero_d_axis_0_and_minus_1) {
  tg_tensor *s = tg_scalar(TG_FLOAT32, 2.5), *si = tg_scalar(TG_INT32, -3), *o1 = NULL, *o2 = NULL;
  for (int k = 0; k < 4; k++) {
    int axis = k % 2 ? -1 : 0;
    bool kd = k >= 2;
    int ax[1] = {axis};
    char w[64];
    snprintf(w, sizeof w, "axis %d keepdim %d", axis, kd);
#define ZD(expr, want) CHECK(value_of(expr) == (want), "%s: %s gives %g: %s", w, #expr, value_of(expr), tg_error())
    ZD(tg_sum(s, 1, ax, kd), 2.5);
    ZD(tg_prod(s, 1, ax, kd), 2.5);
    ZD(tg_max(s, 1, ax, kd), 2.5);
    ZD(tg_min(s, 1, ax, kd), 2.5);
    ZD(tg_mean(s, 1, ax, kd), 2.5);
    ZD(tg_var(s, 1, ax, kd, 0), 0);
    ZD(tg_std(s, 1, ax, kd, 0), 0);
    ZD(tg_sum(si, 1, ax, kd), -3);
    ZD(tg_min(si, 1, ax, kd), -3);
    ZD(tg_argmax(s, axis, kd), 0);
    ZD(tg_argmin(si, axis, kd), 0);
    ZD(tg_softmax(s, axis), 1);
    ZD(tg_log_softmax(s, axis), 0);
    ZD(tg_softmin(s, axis), 1);
    ZD(tg_logsumexp(s, axis, kd), 2.5);
    ZD(tg_logsumexp_axes(s, 1, ax, kd), 2.5);
    ZD(tg_cumsum(si, axis), -3);
    ZD(tg_cumprod(si, axis), -3);
    ZD(tg_logcumsumexp(s, axis), 2.5);
    ZD(tg_any(si, 1, ax, kd), 1);
    ZD(tg_all(tg_scalar(TG_FLOAT32, 0), 1, ax, kd), 0);
    ZD(tg_sum_dtype(s, 1, ax, kd, TG_INT32), 2);
    ZD(tg_prod_dtype(si, 1, ax, kd, TG_FLOAT64), -3);
    CHECK(tg_var_mean(s, 1, ax, kd, 0, &o1, &o2) == TG_OK && value_of(o1) == 0 && value_of(o2) == 2.5, "%s: var_mean", w);
    CHECK(tg_std_mean(si, 1, ax, kd, 0, &o1, &o2) == TG_OK && value_of(o1) == 0 && value_of(o2) == -3, "%s: std_mean", w);
#undef ZD
  }
  /* every axis (naxes 0) too, and axis 1 refused by each */
  CHECK(value_of(tg_any(s, 0, NULL, false)) == 1 && value_of(tg_logsumexp_axes(s, 0, NULL, true)) == 2.5, "naxes 0 of 0-d");
  int one[1] = {1};
  CHECK(!tg_sum(s, 1, one, false) && !tg_any(s, 1, one, false) && !tg_all(s, 1, (int[]){-2}, false) &&
        !tg_logsumexp(s, 1, false) && !tg_logsumexp_axes(s, 1, one, false) && !tg_softmin(s, 1) &&
        !tg_sum_dtype(s, 1, one, false, TG_FLOAT32) && !tg_argmax(s, 1, false),
        "axis 1 of a 0-d tensor is refused");
  CHECK(tg_var_mean(s, 1, one, false, 1, &o1, &o2) == TG_ERR_ARG && !o1 && !o2, "var_mean axis 1 of 0-d");
  tg_error_clear();
}

REF_TEST(test_reductions_over_empty_axes) {
  tg_tensor *e = tg_zeros(TG_FLOAT32, 3, (int64_t[]){1, 0, 3}), *ei = tg_zeros(TG_INT32, 2, (int64_t[]){0, 2});
  int ax[1] = {1}, a0[1] = {0};
  ref_arr *fill3 = NULL;
#define EMPTY(name, expr, dt, val, ...)                                  \
  do {                                                                   \
    fill3 = ref_full(dt, __VA_ARGS__, val);                              \
    CHECK_REF(name, expr, fill3);                                        \
  } while (0)
  EMPTY("sum empty", tg_sum(e, 1, ax, false), TG_FLOAT32, 0, SHAPE(1, 3));
  EMPTY("prod empty", tg_prod(e, 1, ax, true), TG_FLOAT32, 1, SHAPE(1, 1, 3));
  EMPTY("max empty", tg_max(e, 1, ax, false), TG_FLOAT32, -INFINITY, SHAPE(1, 3));
  EMPTY("min empty", tg_min(e, 1, ax, false), TG_FLOAT32, INFINITY, SHAPE(1, 3));
  EMPTY("mean empty", tg_mean(e, 1, ax, false), TG_FLOAT32, NAN, SHAPE(1, 3));
  EMPTY("logsumexp empty", tg_logsumexp(e, 1, false), TG_FLOAT32, -INFINITY, SHAPE(1, 3));
  EMPTY("any empty", tg_any(e, 1, ax, false), TG_BOOL, 0, SHAPE(1, 3));
  EMPTY("all empty", tg_all(e, 1, ax, false), TG_BOOL, 1, SHAPE(1, 3));
  EMPTY("sum int32 empty", tg_sum(ei, 1, a0, false), TG_INT32, 0, SHAPE(2));
  EMPTY("max int32 empty", tg_max(ei, 1, a0, false), TG_INT32, INT32_MIN, SHAPE(2));
  EMPTY("min int32 empty", tg_min(ei, 1, a0, false), TG_INT32, INT32_MAX, SHAPE(2));
  EMPTY("argmax empty (tinygrad: INT32_MIN)", tg_argmax(ei, 0, false), TG_INT32, INT32_MIN, SHAPE(2));
  EMPTY("sum_dtype empty", tg_sum_dtype(ei, 1, a0, false, TG_INT8), TG_INT8, 0, SHAPE(2));
  tg_tensor *v = NULL, *m = NULL;
  CHECK(tg_var_mean(e, 2, (int[]){0, 1}, false, 1, &v, &m) == TG_OK, "var_mean empty: %s", tg_error());
  EMPTY("var_mean's mean empty", m, TG_FLOAT32, NAN, SHAPE(3));
  EMPTY("var_mean's var empty", v, TG_FLOAT32, NAN, SHAPE(3));
  /* a size-0 tensor reduced over its other axes stays empty */
  tg_tensor *r = tg_any(e, 1, (int[]){-1}, true);
  CHECK(r && tg_ndim(r) == 3 && tg_shape(r, 1) == 0 && tg_shape(r, 2) == 1 && tg_dtype_of(r) == TG_BOOL, "any over axis -1 of (1, 0, 3)");
#undef EMPTY
}

/* ---- statistics forms --------------------------------------------------------------------------------------- */

/* a reduction over the flagged axes by a function of the gathered values */
static ref_arr *reduce_by(const ref_arr *a, int naxes, const int *axes, bool keepdim, tg_dtype dt,
                          double (*f)(const double *v, int64_t n)) {
  bool fl[TG_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) fl[i] = naxes == 0;
  for (int i = 0; i < naxes; i++) fl[axes[i] < 0 ? axes[i] + a->ndim : axes[i]] = true;
  int64_t sh[TG_MAX_DIMS], kept[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < a->ndim; i++) {
    kept[i] = fl[i] ? 1 : a->shape[i];
    if (keepdim || !fl[i]) sh[n++] = kept[i];
  }
  ref_arr *r = ref_new(dt, n, sh);
  double *vals = malloc((size_t)(a->numel + 1) * sizeof *vals);
  for (int64_t o = 0; o < r->numel; o++) {
    int64_t cnt = 0;
    for (int64_t i = 0; i < a->numel; i++) {  /* the output of element i: its index with reduced axes at 0 */
      int64_t rem = i, out = 0, mul = 1;
      for (int d = a->ndim - 1; d >= 0; d--) {
        int64_t c = rem % a->shape[d];
        rem /= a->shape[d];
        out += (fl[d] ? 0 : c) * mul;
        mul *= kept[d];
      }
      if (out == o) vals[cnt++] = a->data[i];
    }
    r->data[o] = ref_round(dt, f(vals, cnt));
  }
  free(vals);
  return r;
}
static double f_any(const double *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (v[i] != 0) return 1;
  return 0;
}
static double f_all(const double *v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (v[i] == 0) return 0;
  return 1;
}
static double f_lse(const double *v, int64_t n) {
  double m = -INFINITY, s = 0;
  for (int64_t i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
  if (isinf(m)) return m;
  for (int64_t i = 0; i < n; i++) s += exp(v[i] - m);
  return m + log(s);
}
static double f_sum_i8(const double *v, int64_t n) {
  int8_t s = 0;
  for (int64_t i = 0; i < n; i++) s = (int8_t)(uint8_t)((uint8_t)s + (uint8_t)(int8_t)v[i]);
  return s;
}
static double f_prod(const double *v, int64_t n) {
  double p = 1;
  for (int64_t i = 0; i < n; i++) p *= v[i];
  return p;
}

/* random axes (distinct, some negative) of nd into ax; their count */
static int rand_axes(int nd, int *ax) {
  int n = 0;
  for (int d = 0; d < nd; d++)
    if (ref_randint(0, 1)) ax[n++] = ref_randint(0, 1) ? d - nd : d;
  return n;
}

REF_TEST(test_any_all_logsumexp_dtype_reductions_several_axes) {
  char what[96];
  for (int c = 0; c < 10; c++) {
    int64_t shape[3];
    int nd = rand_shape(shape, true), ax[3];
    int na = rand_axes(nd, ax);
    bool kd = c % 2;
    ref_arr *b = ref_rand(c % 3 == 0 ? TG_BOOL : TG_INT32, nd, shape, 0, 3);
    if (c % 3 == 2)
      for (int64_t i = 0; i < b->numel; i++) b->data[i] = b->data[i] ? 1 : 0;  /* mostly ones: all() is true sometimes */
    snprintf(what, sizeof what, "any/all %d axes keepdim %d case %d", na, kd, c);
    CHECK_REF(what, tg_any(T(b), na, ax, kd), reduce_by(b, na, ax, kd, TG_BOOL, f_any));
    CHECK_REF(what, tg_all(T(b), na, ax, kd), reduce_by(b, na, ax, kd, TG_BOOL, f_all));
    ref_arr *f = ref_rand(TG_FLOAT32, nd, shape, -30, 30);
    snprintf(what, sizeof what, "logsumexp %d axes keepdim %d case %d", na, kd, c);
    CHECK_REF(what, tg_logsumexp_axes(T(f), na, ax, kd), reduce_by(f, na, ax, kd, TG_FLOAT32, f_lse));
    ref_arr *i8 = ref_rand(TG_INT32, nd, shape, -100, 100);
    snprintf(what, sizeof what, "sum int32 as int8 %d axes case %d", na, c);
    CHECK_REF(what, tg_sum_dtype(T(i8), na, ax, kd, TG_INT8), reduce_by(i8, na, ax, kd, TG_INT8, f_sum_i8));
    ref_arr *p = ref_rand(TG_INT32, nd, shape, -2, 2);
    snprintf(what, sizeof what, "prod int32 as float64 %d axes case %d", na, c);
    CHECK_REF(what, tg_prod_dtype(T(p), na, ax, kd, TG_FLOAT64), reduce_by(p, na, ax, kd, TG_FLOAT64, f_prod));
  }
  /* TG_ALL through the one-axis form, and rows of -inf / +inf (PyTorch's -inf and +inf) */
  double v[] = {-INFINITY, -INFINITY, -INFINITY, 1, INFINITY, 2, 0.5, -1, 3};
  ref_arr *a = ref_from(TG_FLOAT32, SHAPE(3, 3), v);
  CHECK_REF("logsumexp TG_ALL", tg_logsumexp(T(a), TG_ALL, false), reduce_by(a, 0, NULL, false, TG_FLOAT32, f_lse));
  CHECK_REF("logsumexp rows with infinities", tg_logsumexp(T(a), 1, true), reduce_by(a, 1, (int[]){1}, true, TG_FLOAT32, f_lse));
  ref_arr *h = ref_rand(TG_FLOAT16, SHAPE(4, 5), -2, 2);
  tg_tensor *sh = tg_sum_dtype(T(h), 1, (int[]){0}, false, TG_FLOAT32);
  CHECK(sh && tg_dtype_of(sh) == TG_FLOAT32, "sum float16 as float32 has dtype float32");
  CHECK_REF_VALUES("sum float16 as float32", sh, ref_reduce(R_SUM, h, 1, (int[]){0}, false));
  CHECK(tg_sum_dtype(T(h), 1, (int[]){0}, false, TG_DTYPE_COUNT) == NULL, "a bad dtype is refused");
}

REF_TEST(test_var_mean_std_mean_and_softmin) {
  char what[96];
  for (int c = 0; c < 6; c++) {
    int64_t shape[3];
    int nd = rand_shape(shape, false), ax[3];
    int na = rand_axes(nd, ax);
    bool kd = c % 2;
    double corr = c % 3 == 0 ? 0 : c % 3 == 1 ? 1 : 0.5;
    ref_arr *a = ref_rand(c == 3 ? TG_INT32 : TG_FLOAT32, nd, shape, -5, 5);
    int64_t cnt = 1;
    for (int d = 0; d < nd; d++) {
      bool red = na == 0;
      for (int k = 0; k < na; k++) red |= ax[k] == d || ax[k] == d - nd;
      if (red) cnt *= shape[d];
    }
    if ((double)cnt <= corr) corr = 0;  /* n <= correction is tg_var's edge, tested with tg_var */
    tg_tensor *v = NULL, *m = NULL;
    snprintf(what, sizeof what, "var_mean %d axes correction %g case %d", na, corr, c);
    CHECK(tg_var_mean(T(a), na, ax, kd, corr, &v, &m) == TG_OK, "%s: %s", what, tg_error());
    CHECK_REF(what, v, ref_var(a, na, ax, kd, corr, false));
    CHECK_REF(what, m, ref_cast(ref_reduce(R_MEAN, a, na, ax, kd), TG_FLOAT32));
    snprintf(what, sizeof what, "std_mean %d axes correction %g case %d", na, corr, c);
    CHECK(tg_std_mean(T(a), na, ax, kd, corr, &v, &m) == TG_OK, "%s: %s", what, tg_error());
    CHECK_REF(what, v, ref_var(a, na, ax, kd, corr, true));
    CHECK_REF(what, m, ref_cast(ref_reduce(R_MEAN, a, na, ax, kd), TG_FLOAT32));
    int axis = rand_axis(nd);
    snprintf(what, sizeof what, "softmin axis %d case %d", axis, c);
    ref_arr *want = nd == 0 ? ref_scalar(TG_FLOAT32, 1)  /* ref_softmax takes no 0-d array */
                            : ref_softmax(ref_unary(R_NEG, ref_cast(a, TG_FLOAT32), 0, 0), axis, false);
    CHECK_REF(what, tg_softmin(T(a), axis), want);
  }
  tg_tensor *v = NULL, *m = NULL;
  CHECK(tg_var_mean(tg_scalar(TG_FLOAT32, 1), 0, NULL, false, 0, &v, NULL) == TG_OK && value_of(v) == 0, "var only");
  CHECK(tg_std_mean(tg_scalar(TG_FLOAT32, 2), 0, NULL, false, 0, NULL, &m) == TG_OK && value_of(m) == 2, "mean only");
  tg_error_clear();
  CHECK(tg_std_mean(NULL, 0, NULL, false, 0, &v, &m) == TG_ERR_ARG && !v && !m, "std_mean NULL");
}
