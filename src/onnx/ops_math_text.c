/* ops_math_text.c — ONNX's TfIdfVectorizer (opset 9) over integer tokens, with the semantics of ONNX's
 * reference evaluator (a port of onnxruntime's kernel): each row of X is scanned for the pool's n-grams of
 * min_gram_length..max_gram_length items, taken at every skip distance 1..max_skip_count+1 (items d apart;
 * 1-grams once, at distance 1), and each n-gram found adds 1 to its output slot (ngram_indexes); the counts
 * are then weighted by mode (TF: the counts; IDF: the n-gram's weight, or 1, where a count is non-zero; TFIDF:
 * the weight times the count, or the count). A weight belongs to a pool n-gram (weights[k] to the k-th, whose
 * slot is ngram_indexes[k]), as the specification and onnxruntime have it: the reference implementation reads
 * weights[slot], which agrees only when the slots are in pool order. A pool that lists an n-gram twice is
 * refused, as onnxruntime refuses it.
 *
 * The scan is lazy: for n-gram size n and distance d the windows of a row are n shifted views of X (item j
 * of a window is X[:, j d + i]), compared with the pool's n-grams of that size on a new axis and and-ed over
 * j, then summed over the window positions: one fused reduction per (n, d) whose [rows, windows, n-grams]
 * booleans are never stored. A gather then moves each n-gram's count to its output slot.
 * String pools are not supported (tgc has no string tensors). */
#include <stdlib.h>
#include <string.h>

#include "ops_math.h"
#include "../uop/uop.h"

/* the most output slots and the most pool entries an attribute may ask for: past them a hostile file would
 * ask for gigabytes of host tables */
#define TFIDF_MAX_SLOTS ((int64_t)1 << 24)
#define TFIDF_MAX_POOL ((int64_t)1 << 22)

/* n-grams of one size in a pool, for sorting their numbers */
typedef struct tfidf_grams { const int64_t *pool; int64_t size; } tfidf_grams;

static int tfidf_cmp(const void *pa, const void *pb, void *ctx) {
  const tfidf_grams *gs = ctx;
  const int64_t *a = gs->pool + *(const int64_t *)pa * gs->size, *b = gs->pool + *(const int64_t *)pb * gs->size;
  for (int64_t j = 0; j < gs->size; j++)
    if (a[j] != b[j]) return a[j] < b[j] ? -1 : 1;
  return 0;
}

/* counts of pool n-grams of size n (their items at pool[0 .. k n), their slots slot[0 .. k)) found in the rows
 * of x [rows, cols] at every distance, as float [rows, nslots] */
static tg_tensor *tfidf_counts(tg_tensor *x, int64_t n, const int64_t *pool, const int64_t *slot, int64_t k,
                               int64_t max_skip, int64_t nslots) {
  int64_t rows = tg_shape_ptr(x)[0], cols = tg_shape_ptr(x)[1];
  tg_tensor *acc = NULL, *y = NULL;
  bool ready = false;   /* the pool's columns made: a NULL y from here on is a tg_ call's failure */
  int64_t *col = mem_alloc((size_t)k * sizeof *col), *pick = mem_alloc((size_t)(nslots ? nslots : 1) * sizeof *pick);
  bool *moved = mem_calloc((size_t)k, sizeof *moved);
  tg_tensor **items = mem_calloc((size_t)n, sizeof *items);   /* item j of every n-gram, [1, 1, k] */
  if (!col || !pick || !moved || !items) {
    tg_set_error(TG_ERR_NOMEM, "onnx: TfIdfVectorizer: out of memory for %lld n-grams", (long long)k);
    goto done;
  }
  for (int64_t j = 0; j < n; j++) {
    for (int64_t g = 0; g < k; g++) col[g] = pool[g * n + j];
    int64_t sh[3] = {1, 1, k};
    if (!(items[j] = tg_from_data(TG_INT64, 3, sh, col, (size_t)k * sizeof *col))) goto done;
  }
  ready = true;
  for (int64_t d = 1; d <= (n == 1 ? 1 : max_skip + 1); d++) {
    int64_t windows = cols - (n - 1) * d;
    if (windows <= 0) break;   /* a longer distance fits fewer windows still */
    tg_tensor *match = NULL;
    for (int64_t j = 0; j < n; j++) {
      int64_t b[4] = {0, rows, j * d, j * d + windows};
      tg_tensor *e = tg_eq(tg_unsqueeze(tg_shrink(x, 2, b), 2), items[j]);
      match = match ? tg_mul(match, e) : e;   /* bool: and */
    }
    int axis = 1;
    tg_tensor *s = tg_sum(match, 1, &axis, false);
    acc = acc ? tg_add(acc, s) : s;
  }
  int64_t ysh[2] = {rows, nslots};
  y = tg_zeros(TG_FLOAT32, 2, ysh);
  if (!acc) goto done;   /* rows shorter than an n-gram: no counts */
  /* each n-gram's count to its slot: a gather from the counts with a zero column at k appended, for slots no
   * n-gram (or no more n-grams) of this size names; slots named several times take one gather per repeat */
  int64_t zsh[2] = {rows, 1};
  tg_tensor *parts[2] = {tg_cast(acc, TG_FLOAT32), tg_zeros(TG_FLOAT32, 2, zsh)};
  tg_tensor *padded = tg_cat(2, parts, 1);
  for (;;) {
    bool any = false;
    for (int64_t i = 0; i < nslots; i++) pick[i] = k;
    for (int64_t g = 0; g < k; g++)
      if (!moved[g] && pick[slot[g]] == k) pick[slot[g]] = g, moved[g] = any = true;
    if (!any) break;
    tg_tensor *idx = tg_from_data(TG_INT64, 1, &nslots, pick, (size_t)nslots * sizeof *pick);
    y = tg_add(y, tg_index_select(padded, 1, idx));
  }
done:
  free(items);
  free(col);
  free(pick);
  free(moved);
  return ready ? y : NULL;
}

MATH_OP(op_tfidf) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  if (onnx_attr_has(n, "pool_strings")) return onnx_fail(n, TG_ERR_ARG, "string pools are not supported");
  tg_dtype dt = tg_dtype_of(x);
  if (dt != TG_INT32 && dt != TG_INT64)
    return onnx_fail(n, TG_ERR_ARG, "input X is %s; int32 and int64 are supported", tg_dtype_name(dt));
  int nd = tg_ndim(x);
  if (nd != 1 && nd != 2) return onnx_fail(n, TG_ERR_ARG, "input X has %d dims; 1 or 2 are supported", nd);

  int64_t min_n = onnx_attr_int(n, "min_gram_length", 0), max_n = onnx_attr_int(n, "max_gram_length", 0);
  int64_t max_skip = onnx_attr_int(n, "max_skip_count", 0);
  const char *mode = onnx_attr_string(n, "mode", "");
  bool tf = !strcmp(mode, "TF"), idf = !strcmp(mode, "IDF"), tfidf = !strcmp(mode, "TFIDF");
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    return onnx_fail(n, TG_ERR_ARG, "gram lengths %lld..%lld and max_skip_count %lld are out of range", (long long)min_n,
                     (long long)max_n, (long long)max_skip);
  if (!tf && !idf && !tfidf) return onnx_fail(n, TG_ERR_ARG, "mode '%s' is not TF, IDF or TFIDF", mode);

  const int64_t *counts = NULL, *slots = NULL, *pool = NULL;
  const float *weights = NULL;
  int64_t ncounts = onnx_attr_ints(n, "ngram_counts", &counts), nslot_list = onnx_attr_ints(n, "ngram_indexes", &slots);
  int64_t npool = onnx_attr_ints(n, "pool_int64s", &pool), nweights = onnx_attr_floats(n, "weights", &weights);
  if (ncounts < 0) ncounts = 0;
  if (npool < 0) npool = 0;
  if (nslot_list < 0) nslot_list = 0;
  if (npool > TFIDF_MAX_POOL) return onnx_fail(n, TG_ERR_ARG, "pool_int64s holds %lld values, more than supported", (long long)npool);
  int64_t nslots = 0;
  for (int64_t i = 0; i < nslot_list; i++) {
    if (slots[i] < 0 || slots[i] >= TFIDF_MAX_SLOTS)
      return onnx_fail(n, TG_ERR_ARG, "ngram_indexes[%lld] = %lld is out of range", (long long)i, (long long)slots[i]);
    if (slots[i] + 1 > nslots) nslots = slots[i] + 1;
  }
  if (nweights > 0 && nweights < nslot_list)
    return onnx_fail(n, TG_ERR_ARG, "weights holds %lld values for %lld n-grams", (long long)nweights,
                     (long long)nslot_list);

  /* the n-grams of each size: pool[counts[s] .. counts[s + 1]) holds those of size s + 1, numbered in pool order
   * across sizes (a slot per number) */
  int64_t rows = nd == 2 ? tg_shape_ptr(x)[0] : 1, cols = tg_shape_ptr(x)[nd - 1];
  int64_t sh2[2] = {rows, cols};
  tg_tensor *x2 = tg_reshape(math_cast_to(x, TG_INT64), 2, sh2);
  int64_t ysh[2] = {rows, nslots};
  tg_tensor *y = tg_zeros(TG_FLOAT32, 2, ysh);
  int64_t number = 0;
  int64_t *gslot = mem_alloc((size_t)(npool ? npool : 1) * sizeof *gslot);
  int64_t *order = mem_alloc((size_t)(npool ? npool : 1) * sizeof *order);
  tg_status st = gslot && order ? TG_OK : onnx_fail(n, TG_ERR_NOMEM, "out of memory for a pool of %lld values", (long long)npool);
  for (int64_t s = 0; !st && s < ncounts; s++) {
    int64_t size = s + 1, lo = counts[s], hi = s + 1 < ncounts ? counts[s + 1] : npool;
    if (lo < 0 || hi < lo || hi > npool) {
      st = onnx_fail(n, TG_ERR_ARG, "ngram_counts[%lld] = %lld is out of range for a pool of %lld", (long long)s,
                     (long long)lo, (long long)npool);
      break;
    }
    int64_t k = (hi - lo) / size;
    if (number + k > nslot_list) {
      st = onnx_fail(n, TG_ERR_ARG, "ngram_indexes has %lld values for more n-grams", (long long)nslot_list);
      break;
    }
    if (size < min_n || size > max_n || k == 0) {
      number += k;
      continue;
    }
    /* a repeat shows as two neighbours once the n-grams are sorted */
    tfidf_grams gs = {pool + lo, size};
    for (int64_t g = 0; g < k; g++) order[g] = g, gslot[g] = slots[number + g];
    qsort_r(order, (size_t)k, sizeof *order, tfidf_cmp, &gs);
    for (int64_t g = 1; g < k && !st; g++)
      if (!tfidf_cmp(&order[g - 1], &order[g], &gs))
        st = onnx_fail(n, TG_ERR_ARG, "pool_int64s lists a %lld-gram twice (at %lld and %lld)", (long long)size,
                       (long long)(lo + order[g - 1] * size), (long long)(lo + order[g] * size));
    if (st) break;
    tg_tensor *c = tfidf_counts(x2, size, pool + lo, gslot, k, max_skip, nslots);
    number += k;
    y = c ? tg_add(y, c) : NULL;
    if (!y) st = math_fail_tg(n);
  }
  free(gslot);
  free(order);
  if (st) return st;

  if (idf || (tfidf && nweights > 0)) {
    int64_t wsh[1] = {nslots};
    float *w = mem_alloc((size_t)(nslots ? nslots : 1) * sizeof *w);
    if (!w) return onnx_fail(n, TG_ERR_NOMEM, "out of memory for %lld weights", (long long)nslots);
    for (int64_t i = 0; i < nslots; i++) w[i] = 1.0f;
    for (int64_t g = 0; nweights > 0 && g < nslot_list; g++) w[slots[g]] = weights[g];
    tg_tensor *wt = tg_from_data(TG_FLOAT32, 1, wsh, w, (size_t)nslots * sizeof *w);
    free(w);
    y = idf ? tg_where_scalar(tg_gt_scalar(y, 0), tg_expand(wt, 2, ysh), 0) : tg_mul(y, wt);
  }
  if (nd == 1) y = tg_reshape(y, 1, &nslots);
  return math_out(n, out, 0, y);
}
