/* scan.c — running reductions along one axis: cumprod, cummax and cummin (values and indices) and
 * logcumsumexp, built as tinygrad builds them. The axis goes last, gets n - 1 copies of the op's identity in
 * front and is viewed as n windows of n (pool_windows), each window reduced with tg_prod or tg_max; an axis
 * longer than 512 goes in two stages (running values inside chunks of 256, combined with the running value of
 * the chunk totals), as tg_cumsum. Every step is a public op, so the results are lazy, fuse, and take their
 * gradients from the reduces' own rules (prod's rule covers zeros in the input).
 *
 * The index outputs are tinygrad's: for each position the first index j <= i whose value equals the running
 * extreme (PyTorch picks the last one among ties), found as a masked (n, n) comparison reduced with max. */
#include <math.h>

#include "tensor/compose.h"

typedef enum scan_op { SCAN_MUL, SCAN_MAX } scan_op;

#define SCAN_SPLIT 256

/* the running op over the last axis of x (its size n > 0) */
static tg_tensor *scan_last(tmps *s, tg_tensor *x, scan_op op);

/* every window of n reduced: pad n - 1 identities in front, n windows of n with stride 1 */
static tg_tensor *scan_windows(tmps *s, tg_tensor *x, scan_op op) {
  int nd = TNDIM(x);
  int64_t n = TSHAPE(x)[nd - 1], p[2 * TG_MAX_DIMS] = {0}, one = 1;
  p[2 * (nd - 1)] = n - 1;
  double id = op == SCAN_MUL ? 1 : dtype_min(TDT(x));
  tg_tensor *w = pool_windows(s, pad_const(s, x, p, id), 1, &n, &one, &one);
  int last = -1;
  return tmp(s, op == SCAN_MUL ? tg_prod(w, 1, &last, false) : tg_max(w, 1, &last, false));
}

static tg_tensor *scan_last(tmps *s, tg_tensor *x, scan_op op) {
  if (!x) return NULL;
  int nd = TNDIM(x);
  int64_t n = TSHAPE(x)[nd - 1];
  if (n <= 2 * SCAN_SPLIT) return scan_windows(s, x, op);
  /* (..., nc, 256): running values inside each chunk; the chunk totals' running value shifted by one chunk
   * (the identity first) combines with every element of the next chunk */
  double id = op == SCAN_MUL ? 1 : dtype_min(TDT(x));
  int64_t nc = ceildiv(n, SCAN_SPLIT), p[2 * TG_MAX_DIMS] = {0}, sh[TG_MAX_DIMS], b[2 * TG_MAX_DIMS];
  p[2 * (nd - 1)] = nc * SCAN_SPLIT - n;
  tg_tensor *t = pad_const(s, x, p, id);
  for (int i = 0; i < nd - 1; i++) sh[i] = TSHAPE(x)[i];
  sh[nd - 1] = nc;
  sh[nd] = SCAN_SPLIT;
  tg_tensor *chunks = scan_windows(s, tmp(s, tg_reshape(t, nd + 1, sh)), op);
  if (!chunks) return NULL;
  for (int i = 0; i <= nd; i++) { b[2 * i] = 0; b[2 * i + 1] = sh[i]; }
  b[2 * nd] = SCAN_SPLIT - 1;
  tg_tensor *last = tmp(s, tg_reshape(tmp(s, tg_shrink(chunks, nd + 1, b)), nd, sh));  /* (..., nc) */
  int64_t q[2 * TG_MAX_DIMS] = {0};
  q[2 * (nd - 1)] = 1;
  q[2 * (nd - 1) + 1] = -1;
  tg_tensor *base = tmp(s, tg_unsqueeze(pad_const(s, scan_last(s, last, op), q, id), -1));
  tg_tensor *y = tmp(s, op == SCAN_MUL ? tg_mul(chunks, base) : tg_maximum(chunks, base));
  sh[nd - 1] = nc * SCAN_SPLIT;
  y = tmp(s, tg_reshape(y, nd, sh));
  for (int i = 0; i < nd; i++) { b[2 * i] = 0; b[2 * i + 1] = sh[i]; }
  b[2 * (nd - 1)] = nc * SCAN_SPLIT - n;
  return tmp(s, tg_shrink(y, nd, b));
}

/* the axis of x for a scan named op: -1 with the error set. A 0-d tensor takes axis 0 or -1 (returned as 0) */
static int scan_axis(const char *op, tg_tensor *x, int axis) {
  if (TNDIM(x) == 0) return norm_axis_scalar(op, axis, 0);
  int a = norm_axis(op, axis, TNDIM(x));
  if (a < 0) return -1;
  if (TNDIM(x) + 2 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "%s: a tensor of %d dimensions needs more than %d for its windows", op, TNDIM(x), TG_MAX_DIMS);
    return -1;
  }
  /* the windows (and the index comparisons): n (at most 512) elements per element, twice that padded */
  int64_t n = TSHAPE(x)[a], w;
  if (!size_mul(tg_numel(x), 2 * n, &w)) {
    tg_set_error(TG_ERR_ARG, "%s: a running value over an axis of %lld in %lld elements takes windows of more than 2^60 "
                 "elements", op, (long long)n, (long long)tg_numel(x));
    return -1;
  }
  return a;
}

/* the running op along axis a of x (ndim > 0, no size 0) */
static tg_tensor *scan_axis_values(tmps *s, tg_tensor *x, int a, scan_op op) {
  tg_tensor *t = tmp(s, tg_transpose(x, a, -1));
  return tmp(s, tg_transpose(scan_last(s, t, op), a, -1));
}

tg_tensor *tg_cumprod(tg_tensor *x, int axis) {
  if (!x) return NULL;
  int a = scan_axis("tg_cumprod", x, axis);
  if (a < 0) return NULL;
  if (TNDIM(x) == 0 || tg_numel(x) == 0) return tg_cast(x, TDT(x));
  tmps s = TMPS("tg_cumprod");
  return tmps_end(&s, scan_axis_values(&s, x, a, SCAN_MUL));
}

/* the order-reversing map tinygrad's cummin and min use: -x for floats, ~x for integers, not x for bool */
static tg_tensor *inverse(tmps *s, tg_tensor *x) {
  tg_dtype dt = TDT(x);
  if (dtype_is_float(dt) || dt == TG_BOOL) return tmp(s, tg_neg(x));
  tg_tensor *ones = tmp(s, tensor_new(uop_const_int(dt, -1)));  /* every bit set, for unsigned types too */
  return tmp(s, tg_bitwise_xor(x, ones));
}

/* values: the running max of x along axis a; indices: for each position i the first j <= i with x[j] equal to
 * it, int32 (n when none is: a NaN) */
static tg_status cummax_parts(tmps *s, tg_tensor *x, int a, tg_tensor **values, tg_tensor **indices) {
  int nd = TNDIM(x);
  if (nd == 0 || tg_numel(x) == 0) {
    *values = tmp(s, tg_cast(x, TDT(x)));
    *indices = tmp(s, tg_zeros(TG_INT32, nd, TSHAPE(x)));
    return *values && *indices ? TG_OK : tg_error_status();
  }
  int64_t n = TSHAPE(x)[a];
  tg_tensor *xt = tmp(s, tg_transpose(x, a, -1));
  tg_tensor *vt = scan_last(s, xt, SCAN_MAX);
  /* (..., j, i): x[j] == v[i] and j <= i, weighted n - j so that the largest weight is the first j */
  tg_tensor *match = tmp(s, tg_eq(tmp(s, tg_unsqueeze(xt, -1)), tmp(s, tg_unsqueeze(vt, -2))));
  tg_tensor *upper = tmp(s, tg_le(arange_col(s, n, 1), arange_col(s, n, 0)));
  tg_tensor *w = tmp(s, tg_reshape(tmp(s, tg_arange(TG_INT32, (double)n, 0, -1)), 2, (int64_t[]){n, 1}));
  tg_tensor *hit = tmp(s, tg_where(tmp(s, tg_mul(match, upper)), w, tmp(s, tg_scalar(TG_INT32, 0))));
  tg_tensor *first = tmp(s, tg_max(hit, 1, (int[]){-2}, false));
  tg_tensor *idx = tmp(s, tg_add_scalar(tmp(s, tg_neg(first)), (double)n));
  *values = tmp(s, tg_transpose(vt, a, -1));
  *indices = tmp(s, tg_transpose(idx, a, -1));
  return *values && *indices ? TG_OK : tg_error_status();
}

/* tmps_end for two results: frees every other recorded tensor */
static void tmps_end_pair(tmps *s, tg_tensor *a, tg_tensor *b) {
  for (int k = 0; k < s->n; k++)
    if (s->v[k] == b) s->v[k] = NULL;
  tmps_end(s, a);
}

/* the public two-output scans: both outputs or neither; out pointers may be NULL when not wanted */
static tg_status cum_extreme(const char *op, tg_tensor *x, int axis, bool is_min, tg_tensor **values,
                             tg_tensor **indices) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!x) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "%s: tensor is NULL", op);
    return tg_error_status();
  }
  int a = scan_axis(op, x, axis);
  if (a < 0) return TG_ERR_ARG;
  tmps s = {op, NULL, 0, 0};
  tg_tensor *v = NULL, *i = NULL;
  tg_tensor *in = is_min ? inverse(&s, x) : x;
  tg_status st = in ? cummax_parts(&s, in, a, &v, &i) : tg_error_status();
  if (st == TG_OK && is_min) v = inverse(&s, v);
  if (st == TG_OK && !v) st = tg_error_status();
  if (st != TG_OK) {
    tmps_end(&s, NULL);
    return st ? st : TG_ERR_INTERNAL;
  }
  tmps_end_pair(&s, v, i);
  if (values) *values = v;
  else tg_free(v);
  if (indices) *indices = i;
  else tg_free(i);
  return TG_OK;
}

tg_status tg_cummax(tg_tensor *x, int axis, tg_tensor **values, tg_tensor **indices) {
  return cum_extreme("tg_cummax", x, axis, false, values, indices);
}

tg_status tg_cummin(tg_tensor *x, int axis, tg_tensor **values, tg_tensor **indices) {
  return cum_extreme("tg_cummin", x, axis, true, values, indices);
}

/* log(sum_{j <= i} exp(x[j])) as tinygrad: shifted by the running max (detached) so nothing overflows; an
 * infinite running max shifts by 0 instead (PyTorch's -inf for a run of -inf, +inf after a +inf, where the
 * plain shift gives NaN) */
tg_tensor *tg_logcumsumexp(tg_tensor *x, int axis) {
  if (!x) return NULL;
  int a = scan_axis("tg_logcumsumexp", x, axis);
  if (a < 0) return NULL;
  tg_dtype ft = dtype_is_float(TDT(x)) ? TDT(x) : TG_FLOAT32;
  if (TNDIM(x) == 0 || tg_numel(x) == 0) return tg_cast(x, ft);
  tmps s = TMPS("tg_logcumsumexp");
  int64_t n = TSHAPE(x)[a];
  tg_tensor *xt = tmp(&s, tg_transpose(tmp(&s, tg_cast(x, ft)), a, -1));  /* (..., n) */
  tg_tensor *cm = tmp(&s, tg_detach(scan_last(&s, xt, SCAN_MAX)));
  tg_tensor *inf = tmp(&s, tg_eq(tmp(&s, tg_abs(cm)), tmp(&s, tg_scalar(ft, INFINITY))));
  tg_tensor *shift = tmp(&s, tg_where(inf, tmp(&s, tg_scalar(ft, 0)), cm));
  /* (..., i, j): x[j] - shift[i] for j <= i, -inf (exp 0, no gradient) above */
  tg_tensor *d = tmp(&s, tg_sub(tmp(&s, tg_unsqueeze(xt, -2)), tmp(&s, tg_unsqueeze(shift, -1))));
  tg_tensor *lower = tmp(&s, tg_le(arange_col(&s, n, 0), arange_col(&s, n, 1)));
  d = tmp(&s, tg_where(lower, d, tmp(&s, tg_scalar(ft, -INFINITY))));
  tg_tensor *lse = tmp(&s, tg_log(tmp(&s, tg_sum(tmp(&s, tg_exp(d)), 1, (int[]){-1}, false))));
  tg_tensor *r = tmp(&s, tg_add(lse, shift));
  return tmps_end(&s, tmp(&s, tg_transpose(r, a, -1)));
}
