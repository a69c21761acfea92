/* sort.c — sort, argsort and topk along one axis, lazy and differentiable through the values.
 *
 * tinygrad sorts with a bitonic network of tensor ops and then finds each sorted value's index with an (n, n)
 * comparison of occurrence counts, so its cost is n^2 per row whatever the network does. Here the n^2 step
 * comes first and is the whole sort: the stable rank of element i is the number of elements that go before it
 *   rank[i] = #{j : x[j] before x[i]} + #{j < i : x[j] == x[i]}
 * (one fused reduce), and output position r takes the element whose rank is r: values[r] = sum_i (rank[i] == r
 * ? x[i] : 0) and indices[r] = sum_i (rank[i] == r ? i : 0). The same results as tinygrad (ties keep index
 * order, ascending or descending), a few kernels instead of log^2 n, and the values' gradient flows through
 * the selection to the chosen inputs. topk computes only its k output positions.
 *
 * NaN sorts as the largest value (after +inf ascending, first descending), as PyTorch; tinygrad's network
 * leaves NaN's place unspecified. */
#include <math.h>

#include "tensor/compose.h"

/* the error of a status call given a NULL tensor: the one that made the NULL */
static tg_status null_status(const char *op) {
  if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "%s: tensor is NULL", op);
  return tg_error_status();
}

/* tmps_end for two results (b may be NULL): frees every other recorded tensor */
static void tmps_end_pair(tmps *s, tg_tensor *a, tg_tensor *b) {
  for (int k = 0; k < s->n; k++)
    if (b && s->v[k] == b) s->v[k] = NULL;
  tmps_end(s, a);
}

/* (..., i, j): whether x[j] goes before x[i] in the order (NaN the largest), ties not counted */
static tg_tensor *goes_before(tmps *s, tg_tensor *xi, tg_tensor *xj, bool descending) {
  tg_tensor *lo = descending ? xi : xj, *hi = descending ? xj : xi;  /* lo < hi means "before" */
  tg_tensor *b = tmp(s, tg_lt(lo, hi));
  if (!dtype_is_float(TDT(xi))) return b;
  tg_tensor *nan_hi = tmp(s, tg_ne(hi, hi)), *num_lo = tmp(s, tg_eq(lo, lo));
  return tmp(s, tg_bitwise_or(b, tmp(s, tg_bitwise_and(nan_hi, num_lo))));
}

/* (..., i, j): whether x[j] and x[i] are equal in the order (two NaN are) */
static tg_tensor *same_place(tmps *s, tg_tensor *xi, tg_tensor *xj) {
  tg_tensor *e = tmp(s, tg_eq(xi, xj));
  if (!dtype_is_float(TDT(xi))) return e;
  tg_tensor *both = tmp(s, tg_bitwise_and(tmp(s, tg_ne(xi, xi)), tmp(s, tg_ne(xj, xj))));
  return tmp(s, tg_bitwise_or(e, both));
}

/* x (..., n): the int32 stable rank of every element, materialized (each output position reads all of it) */
static tg_tensor *stable_rank(tmps *s, tg_tensor *x, bool descending) {
  int64_t n = TSHAPE(x)[TNDIM(x) - 1];
  tg_tensor *key = TDT(x) == TG_BOOL ? tmp(s, tg_cast(x, TG_INT32)) : x;
  tg_tensor *xi = tmp(s, tg_unsqueeze(key, -1)), *xj = tmp(s, tg_unsqueeze(key, -2));
  tg_tensor *earlier = tmp(s, tg_lt(arange_col(s, n, 0), arange_col(s, n, 1)));  /* (i, j): j < i */
  tg_tensor *tie = tmp(s, tg_bitwise_and(same_place(s, xi, xj), earlier));
  tg_tensor *before = tmp(s, tg_bitwise_or(goes_before(s, xi, xj, descending), tie));
  tg_tensor *rank = tmp(s, tg_sum(before, 1, (int[]){-1}, false));
  return tmp(s, tg_contiguous(tmp(s, tg_cast(rank, TG_INT32))));
}

/* x (..., n), its rank: the first k positions of the order, values (x's dtype) and int32 indices (either NULL
 * when not wanted) */
static bool select_ranked(tmps *s, tg_tensor *x, tg_tensor *rank, int64_t k, tg_tensor **values, tg_tensor **indices) {
  int64_t n = TSHAPE(x)[TNDIM(x) - 1];
  /* (..., r, i): rank[i] == r */
  tg_tensor *pick = tmp(s, tg_eq(tmp(s, tg_unsqueeze(rank, -2)), arange_col(s, k, 1)));
  int last = -1;
  if (values) {
    tg_tensor *v = tmp(s, tg_where(pick, tmp(s, tg_unsqueeze(x, -2)), tmp(s, tg_scalar(TDT(x), 0))));
    *values = tmp(s, tg_cast(tmp(s, tg_sum(v, 1, &last, false)), TDT(x)));  /* one term: exact in any dtype */
    if (!*values) return false;
  }
  if (indices) {
    tg_tensor *i = tmp(s, tg_where(pick, tmp(s, tg_arange(TG_INT32, 0, (double)n, 1)), tmp(s, tg_scalar(TG_INT32, 0))));
    *indices = tmp(s, tg_sum(i, 1, &last, false));
    if (!*indices) return false;
  }
  return true;
}

/* the first k of the stable order of x along axis (all: every position), with the checks of op */
static tg_status sort_k(const char *op, tg_tensor *x, int axis, int64_t k, bool all, bool descending,
                        tg_tensor **values, tg_tensor **indices) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!x) return null_status(op);
  int nd = TNDIM(x);
  int a = nd == 0 ? norm_axis_scalar(op, axis, 0) : norm_axis(op, axis, nd);
  if (a < 0) return TG_ERR_ARG;
  int64_t n = nd ? TSHAPE(x)[a] : 1, cells;
  if (all) k = n;
  if (k < 0 || k > n || (nd == 0 && k != 1)) {  /* a 0-d result cannot hold none of its one element */
    tg_set_error(TG_ERR_ARG, "%s: k %lld is out of range for an axis of %lld", op, (long long)k, (long long)n);
    return TG_ERR_ARG;
  }
  if (nd + 2 > TG_MAX_DIMS || !size_mul(tg_numel(x), n, &cells)) {
    tg_set_error(TG_ERR_ARG, "%s: comparing every pair along an axis of %lld in %d dimensions needs more than %d "
                 "dimensions or 2^60 elements", op, (long long)n, nd, TG_MAX_DIMS);
    return TG_ERR_ARG;
  }
  tmps s = {op, NULL, 0, 0};
  tg_tensor *v = NULL, *i = NULL;
  bool ok;
  if (n <= 1 || tg_numel(x) == 0) {  /* already in order: the first k, index 0 */
    int64_t b[2 * TG_MAX_DIMS];
    for (int d = 0; d < nd; d++) { b[2 * d] = 0; b[2 * d + 1] = d == a ? k : TSHAPE(x)[d]; }
    tg_tensor *kept = tmp(&s, tg_shrink(x, nd, b));
    if (values) v = tmp(&s, tg_cast(kept, TDT(x)));
    if (indices) i = tmp(&s, tg_zeros(TG_INT32, nd, kept ? TSHAPE(kept) : NULL));
    ok = kept && (!values || v) && (!indices || i);
  } else {
    tg_tensor *xt = tmp(&s, tg_transpose(x, a, -1));
    tg_tensor *rank = xt ? stable_rank(&s, xt, descending) : NULL;
    ok = rank && select_ranked(&s, xt, rank, k, values ? &v : NULL, indices ? &i : NULL);
    if (ok && v) ok = (v = tmp(&s, tg_transpose(v, a, -1))) != NULL;
    if (ok && i) ok = (i = tmp(&s, tg_transpose(i, a, -1))) != NULL;
  }
  if (!ok) {
    tmps_end(&s, NULL);
    return tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
  }
  if (v) tmps_end_pair(&s, v, i);
  else tmps_end(&s, i);
  if (values) *values = v;
  if (indices) *indices = i;
  return TG_OK;
}

tg_status tg_sort(tg_tensor *t, int axis, bool descending, tg_tensor **values, tg_tensor **indices) {
  return sort_k("tg_sort", t, axis, 0, true, descending, values, indices);
}

tg_tensor *tg_argsort(tg_tensor *t, int axis, bool descending) {
  tg_tensor *i = NULL;
  return sort_k("tg_argsort", t, axis, 0, true, descending, NULL, &i) == TG_OK ? i : NULL;
}

tg_status tg_topk(tg_tensor *t, int64_t k, int axis, bool largest, bool sorted, tg_tensor **values,
                  tg_tensor **indices) {
  (void)sorted;  /* the k are always in order, which sorted == false allows */
  return sort_k("tg_topk", t, axis, k, false, largest, values, indices);
}
