/* index.c — ops that pick elements by integer indices, written as tinygrad writes them: the index is
 * compared with an arange (a one-hot mask), the mask selects with where, and a sum over the indexed axis
 * collapses it. No gather primitive exists; the selection fuses with what comes before and after it.
 * Also cumsum (tinygrad's pad + pool trick: one reduce) and triu/tril. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/compose.h"

#define SB 256

static bool check_int(const char *op, const char *what, tg_tensor *t) {
  if (!dtype_is_int(TDT(t))) {
    tg_set_error(TG_ERR_ARG, "%s: %s must be an integer tensor, got %s", op, what, tg_dtype_name(TDT(t)));
    return false;
  }
  return true;
}

tg_tensor *tg_one_hot(tg_tensor *labels, int64_t num_classes) {
  if (!labels || !check_int("tg_one_hot", "labels", labels)) return NULL;
  if (num_classes < 0 || num_classes > INT32_MAX || TNDIM(labels) + 1 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_one_hot: %lld classes for labels of %d dimensions", (long long)num_classes, TNDIM(labels));
    return NULL;
  }
  tmps s = TMPS("tg_one_hot");
  return tmps_end(&s, tmp(&s, tg_cast(one_hot_mask(&s, labels, num_classes), TG_INT32)));
}

/* tinygrad's gather: out[..., i, ...] = x[..., index[..., i, ...], ...] along axis; index has x's rank and
 * is no larger than x outside axis */
tg_tensor *tg_gather(tg_tensor *x, int axis, tg_tensor *index) {
  if (!x || !index || !check_int("tg_gather", "index", index)) return NULL;
  char a[SB], b[SB];
  int nd = TNDIM(x);
  bool ok = TNDIM(index) == nd && nd + 1 <= TG_MAX_DIMS;
  int ax = ok ? norm_axis("tg_gather", axis, nd) : 0;
  if (ax < 0) return NULL;
  for (int d = 0; ok && d < nd; d++) ok = d == ax || TSHAPE(index)[d] <= TSHAPE(x)[d];
  if (!ok || nd == 0) {
    tg_set_error(TG_ERR_ARG, "tg_gather: index %s does not fit x %s along axis %d (same rank, no larger outside the axis)",
                 shape_str(a, sizeof a, TNDIM(index), TSHAPE(index)), shape_str(b, sizeof b, nd, TSHAPE(x)), axis);
    return NULL;
  }
  tmps s = TMPS("tg_gather");
  int64_t bnd[2 * TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) { bnd[2 * d] = 0; bnd[2 * d + 1] = d == ax ? TSHAPE(x)[d] : TSHAPE(index)[d]; }
  /* x as (..., 1 at axis, ..., S): each output position sees the whole indexed axis last */
  tg_tensor *xs = tmp(&s, tg_transpose(tmp(&s, tg_unsqueeze(tmp(&s, tg_shrink(x, nd, bnd)), -1)), -1, ax));
  tg_tensor *m = one_hot_mask(&s, index, TSHAPE(x)[ax]);
  tg_tensor *sel = tmp(&s, tg_where(m, xs, tmp(&s, tg_scalar(TDT(x), 0))));
  return tmps_end(&s, tmp(&s, tg_cast(tmp(&s, tg_sum(sel, 1, (int[]){-1}, false)), TDT(x))));
}

/* x (A..., S, B...) and index (I...) -> (A..., I..., B...); wrap: negative indices count from the end */
static tg_tensor *select_axis(tmps *s, tg_tensor *x, int ax, tg_tensor *index, bool wrap) {
  int na = ax, nb = TNDIM(x) - ax - 1, ni = TNDIM(index);
  int64_t n = TSHAPE(x)[ax], sh[TG_MAX_DIMS];
  if (wrap) {
    tg_tensor *neg = tmp(s, tg_lt(index, tmp(s, tg_scalar(TDT(index), 0))));
    index = tmp(s, tg_where(neg, tmp(s, tg_add_scalar(index, (double)n)), index));
    if (!index) return NULL;   /* out of memory: its shape is read below */
  }
  /* mask (1 x na, I..., S, 1 x nb) */
  tg_tensor *m = one_hot_mask(s, index, n);
  int k = 0;
  for (int i = 0; i < na; i++) sh[k++] = 1;
  for (int i = 0; i < ni; i++) sh[k++] = TSHAPE(index)[i];
  sh[k++] = n;
  for (int i = 0; i < nb; i++) sh[k++] = 1;
  m = tmp(s, tg_reshape(m, k, sh));
  /* x (A..., 1 x ni, S, B...) */
  k = 0;
  for (int i = 0; i < na; i++) sh[k++] = TSHAPE(x)[i];
  for (int i = 0; i < ni; i++) sh[k++] = 1;
  for (int i = 0; i <= nb; i++) sh[k++] = TSHAPE(x)[ax + i];
  tg_tensor *xr = tmp(s, tg_reshape(x, k, sh));
  tg_tensor *sel = tmp(s, tg_where(m, xr, tmp(s, tg_scalar(TDT(x), 0))));
  return tmp(s, tg_cast(tmp(s, tg_sum(sel, 1, (int[]){na + ni}, false)), TDT(x)));
}

static bool check_select(const char *op, tg_tensor *x, int ax, tg_tensor *index) {
  if (!check_int(op, "index", index)) return false;
  if (TNDIM(x) + TNDIM(index) > TG_MAX_DIMS) {
    char a[SB], b[SB];
    tg_set_error(TG_ERR_ARG, "%s: x %s and index %s make more than %d dimensions", op, shape_str(a, sizeof a, TNDIM(x), TSHAPE(x)),
                 shape_str(b, sizeof b, TNDIM(index), TSHAPE(index)), TG_MAX_DIMS);
    return false;
  }
  return ax >= 0;
}

tg_tensor *tg_index_select(tg_tensor *x, int axis, tg_tensor *index) {
  if (!x || !index) return NULL;
  if (TNDIM(x) == 0) {
    tg_set_error(TG_ERR_ARG, "tg_index_select: cannot index a 0-d tensor");
    return NULL;
  }
  int ax = norm_axis("tg_index_select", axis, TNDIM(x));
  if (!check_select("tg_index_select", x, ax, index)) return NULL;
  tmps s = TMPS("tg_index_select");
  return tmps_end(&s, select_axis(&s, x, ax, index, true));
}

/* tinygrad's _embedding_fwd: (arange(V) == index[..., None])[..., None].where(weight, 0).sum(-2) */
tg_tensor *tg_embedding(tg_tensor *weight, tg_tensor *index) {
  if (!weight || !index) return NULL;
  if (TNDIM(weight) != 2) {
    char a[SB];
    tg_set_error(TG_ERR_ARG, "tg_embedding: weight %s must be (vocabulary, dim)", shape_str(a, sizeof a, TNDIM(weight), TSHAPE(weight)));
    return NULL;
  }
  if (!check_select("tg_embedding", weight, 0, index)) return NULL;
  tmps s = TMPS("tg_embedding");
  return tmps_end(&s, select_axis(&s, weight, 0, index, false));
}

/* ---- cumsum ------------------------------------------------------------------------------------------- */

/* the running sum along the last axis (n > 0): pad n-1 zeros in front, take the n windows of n, sum each */
static tg_tensor *cumsum_last(tmps *s, tg_tensor *x) {
  int nd = TNDIM(x);
  int64_t n = TSHAPE(x)[nd - 1], p[2 * TG_MAX_DIMS] = {0}, one = 1;
  p[2 * (nd - 1)] = n - 1;
  tg_tensor *w = pool_windows(s, pad_const(s, x, p, 0), 1, &n, &one, &one);
  return tmp(s, tg_sum(w, 1, (int[]){-1}, false));
}

#define CUMSUM_SPLIT 256

tg_tensor *tg_cumsum(tg_tensor *x, int axis) {
  if (!x) return NULL;
  if (TNDIM(x) == 0 || tg_numel(x) == 0) {
    if (norm_axis_scalar("tg_cumsum", axis, TNDIM(x)) < 0) return NULL;
    tg_dtype dt = dtype_is_float(TDT(x)) ? TDT(x) : sum_acc_dtype(TDT(x));
    return tg_cast(x, dt);
  }
  int ax = norm_axis("tg_cumsum", axis, TNDIM(x));
  if (ax < 0) return NULL;
  if (TNDIM(x) + 2 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_cumsum: a tensor of %d dimensions needs more than %d for its windows", TNDIM(x), TG_MAX_DIMS);
    return NULL;
  }
  int nd = TNDIM(x);
  int64_t n = TSHAPE(x)[ax], w;
  /* its windows: n (at most 2 * CUMSUM_SPLIT) sums of up to as many elements per element, twice that padded */
  if (!size_mul(tg_numel(x), 2 * (n < 2 * CUMSUM_SPLIT ? n : 2 * CUMSUM_SPLIT), &w)) {
    tg_set_error(TG_ERR_ARG, "tg_cumsum: a running sum over an axis of %lld in %lld elements takes windows of more than "
                 "2^60 elements", (long long)n, (long long)tg_numel(x));
    return NULL;
  }
  tmps s = TMPS("tg_cumsum");
  tg_tensor *t = tmp(&s, tg_transpose(x, ax, -1)), *y;
  if (n <= 2 * CUMSUM_SPLIT) {
    y = cumsum_last(&s, t);
  } else {
    /* tinygrad's two stages: running sums inside chunks of 256, plus the running sum of the chunk totals
     * shifted by one chunk; n^2 work becomes n * 256. The chunk totals' running sum is split the same way when
     * there are more than 512 of them (tinygrad's is quadratic there: 2^32 chunks would need 2^64 windows) */
    int64_t nc = ceildiv(n, CUMSUM_SPLIT), p[2 * TG_MAX_DIMS] = {0}, sh[TG_MAX_DIMS], b[2 * TG_MAX_DIMS];
    p[2 * (nd - 1)] = nc * CUMSUM_SPLIT - n;
    t = pad_const(&s, t, p, 0);
    for (int i = 0; i < nd - 1; i++) sh[i] = TSHAPE(x)[i == ax ? nd - 1 : i];
    sh[nd - 1] = nc;
    sh[nd] = CUMSUM_SPLIT;
    tg_tensor *chunks = cumsum_last(&s, tmp(&s, tg_reshape(t, nd + 1, sh)));  /* (..., nc, 256) */
    for (int i = 0; i <= nd; i++) { b[2 * i] = 0; b[2 * i + 1] = sh[i]; }
    b[2 * nd] = CUMSUM_SPLIT - 1;
    tg_tensor *last = tmp(&s, tg_reshape(tmp(&s, tg_shrink(chunks, nd + 1, b)), nd, sh));  /* (..., nc) */
    int64_t q[2 * TG_MAX_DIMS] = {0};
    q[2 * (nd - 1)] = 1;
    q[2 * (nd - 1) + 1] = -1;
    tg_tensor *base = pad_const(&s, tmp(&s, tg_cumsum(last, -1)), q, 0);
    y = tmp(&s, tg_add(chunks, tmp(&s, tg_unsqueeze(base, -1))));
    sh[nd - 1] = nc * CUMSUM_SPLIT;
    y = tmp(&s, tg_reshape(y, nd, sh));
    for (int i = 0; i < nd; i++) { b[2 * i] = 0; b[2 * i + 1] = sh[i]; }
    b[2 * (nd - 1)] = nc * CUMSUM_SPLIT - n;
    y = tmp(&s, tg_shrink(y, nd, b));
  }
  return tmps_end(&s, tmp(&s, tg_transpose(y, ax, -1)));
}

/* ---- triu / tril --------------------------------------------------------------------------------------- */

/* tinygrad's _tri: arange(r)[:, None] + diagonal <= arange(c) */
static tg_tensor *tri(tmps *s, int64_t r, int64_t c, int64_t diag) {
  if (diag < -r - 1) diag = -r - 1;  /* beyond these the mask no longer changes; keeps it in int32 */
  if (diag > c + 1) diag = c + 1;
  tg_tensor *rows = tmp(s, tg_add_scalar(arange_col(s, r, 1), (double)diag));
  return tmp(s, tg_le(rows, arange_col(s, c, 0)));
}

static tg_tensor *tri_op(const char *op, tg_tensor *x, int64_t diagonal, bool upper) {
  if (!x) return NULL;
  if (TNDIM(x) < 2) {
    char a[SB];
    tg_set_error(TG_ERR_ARG, "%s: needs at least 2 dimensions, got shape %s", op, shape_str(a, sizeof a, TNDIM(x), TSHAPE(x)));
    return NULL;
  }
  tmps s = TMPS(op);
  int64_t r = TSHAPE(x)[TNDIM(x) - 2], c = TSHAPE(x)[TNDIM(x) - 1];
  tg_tensor *zero = tmp(&s, tg_scalar(TDT(x), 0));
  if (upper) return tmps_end(&s, tmp(&s, tg_where(tri(&s, r, c, diagonal), x, zero)));
  return tmps_end(&s, tmp(&s, tg_where(tri(&s, r, c, diagonal < INT64_MAX ? diagonal + 1 : diagonal), zero, x)));
}

tg_tensor *tg_triu(tg_tensor *x, int64_t diagonal) { return tri_op("tg_triu", x, diagonal, true); }
tg_tensor *tg_tril(tg_tensor *x, int64_t diagonal) { return tri_op("tg_tril", x, diagonal, false); }
