/* ops_index.c — ONNX operators that pick or place elements by index: Gather, GatherElements, GatherND,
 * ScatterElements (and the old Scatter), ScatterND, NonZero, Compress, OneHot, ReverseSequence, Unique. Each
 * is a composition of tg.h's gather/scatter/getitem calls, lazy except where the output's shape depends on
 * values (NonZero, Compress's condition, Unique read them on the host); negative indices count from the end,
 * as ONNX's reference implementation (onnx/reference/ops). A Gather of a few indices known on the host is a
 * concatenation of shrinks (views, no one-hot select), and of host-known data a host-known result. */
#include <stdlib.h>
#include <string.h>

#include "ops_shape.h"
#include "../uop/uop.h"

/* idx with negative values moved up by dim (idx + dim where idx < 0); a new tensor */
static tg_tensor *wrap_negative(tg_tensor *idx, int64_t dim) {
  return tg_where(tg_lt_scalar(idx, 0), tg_add_scalar(idx, (double)dim), idx);
}

/* the few host-known indices idx (count k, shape of in[1]) of axis ax taken from x: one shrink each, joined */
static tg_tensor *gather_shrinks(tg_tensor *x, int ax, const int64_t *idx, int64_t k, int ondim, const int64_t *oshape) {
  int nd = tg_ndim(x);
  int64_t b[2 * TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) b[2 * d] = 0, b[2 * d + 1] = tg_shape(x, d);
  tg_tensor *pieces[64];
  if (k == 0) {
    b[2 * ax + 1] = 0;
    return tg_reshape(tg_shrink(x, nd, b), ondim, oshape);
  }
  for (int64_t j = 0; j < k; j++) {
    b[2 * ax] = idx[j], b[2 * ax + 1] = idx[j] + 1;
    pieces[j] = tg_shrink(x, nd, b);
  }
  return tg_reshape(k == 1 ? pieces[0] : tg_cat((int)k, pieces, ax), ondim, oshape);
}

tg_status onnx_op_gather(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0], *idx = in[1];
  int nd = tg_ndim(x), ni = tg_ndim(idx);
  int ax = oshape_axis(n, onnx_attr_int(n, "axis", 0), nd);
  if (ax < 0) return TG_ERR_ARG;
  if (nd - 1 + ni > TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "the result would have %d dims", nd - 1 + ni);
  int64_t dim = tg_shape(x, ax), oshape[TG_MAX_DIMS];
  int ond = 0;
  for (int d = 0; d < ax; d++) oshape[ond++] = tg_shape(x, d);
  for (int d = 0; d < ni; d++) oshape[ond++] = tg_shape(idx, d);
  for (int d = ax + 1; d < nd; d++) oshape[ond++] = tg_shape(x, d);
  int64_t *kv = mem_alloc(3 * SHAPE_KNOWN_CAP * sizeof *kv), kc, xc;
  if (!kv) return onnx_fail(n, TG_ERR_NOMEM, "host values");
  oshape_begin();
  tg_tensor *res = NULL;
  if (oshape_known(c, n, in, 1, kv, SHAPE_KNOWN_CAP, &kc)) {
    for (int64_t j = 0; j < kc; j++) {
      if (kv[j] < -dim || kv[j] >= dim) {
        int64_t bad = kv[j];
        free(kv);
        return oshape_close(onnx_fail(n, TG_ERR_ARG, "index %lld is out of range for axis %d of size %lld",
                                      (long long)bad, ax, (long long)dim));
      }
      if (kv[j] < 0) kv[j] += dim;
    }
    int64_t total = oshape_numel(ond, oshape), *xv = kv + SHAPE_KNOWN_CAP, *ov = kv + 2 * SHAPE_KNOWN_CAP;
    if (total <= SHAPE_KNOWN_CAP && oshape_known(c, n, in, 0, xv, SHAPE_KNOWN_CAP, &xc)) {
      int64_t outer = oshape_numel(ax, tg_shape_ptr(x)), inner = oshape_numel(nd - ax - 1, tg_shape_ptr(x) + ax + 1), o = 0;
      for (int64_t a = 0; a < outer; a++)
        for (int64_t j = 0; j < kc; j++)
          for (int64_t i = 0; i < inner; i++) ov[o++] = xv[(a * dim + kv[j]) * inner + i];
      res = oshape_known_out(c, 0, tg_dtype_of(x), ond, oshape, ov);
    } else if (kc <= 64) {
      res = gather_shrinks(x, ax, kv, kc, ond, oshape);
    }
  }
  free(kv);
  if (!res) res = tg_index_select(x, ax, wrap_negative(idx, dim));
  return oshape_end(n, res, out, 0);
}

tg_status onnx_op_gather_elements(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  int ax = oshape_axis(n, onnx_attr_int(n, "axis", 0), nd);
  if (ax < 0) return TG_ERR_ARG;
  if (tg_ndim(in[1]) != nd) return onnx_fail(n, TG_ERR_ARG, "indices have %d dims, data %d", tg_ndim(in[1]), nd);
  oshape_begin();
  return oshape_end(n, tg_gather(in[0], ax, wrap_negative(in[1], tg_shape(in[0], ax))), out, 0);
}

/* indices[..., j] (the last axis dropped) */
static tg_tensor *last_axis_at(tg_tensor *ind, int64_t j) {
  int q = tg_ndim(ind);
  int64_t b[2 * TG_MAX_DIMS];
  for (int d = 0; d < q; d++) b[2 * d] = 0, b[2 * d + 1] = tg_shape(ind, d);
  b[2 * (q - 1)] = j, b[2 * (q - 1) + 1] = j + 1;
  return tg_reshape(tg_shrink(ind, q, b), q - 1, tg_shape_ptr(ind));
}

tg_status onnx_op_gather_nd(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0], *ind = in[1];
  int r = tg_ndim(x), q = tg_ndim(ind);
  int64_t b = onnx_attr_int(n, "batch_dims", 0);
  if (q < 1 || b < 0 || b >= q || b >= r) return onnx_fail(n, TG_ERR_ARG, "batch_dims %lld for data of %d dims and "
                                                          "indices of %d", (long long)b, r, q);
  int64_t k = tg_shape(ind, -1);
  if (k < 1 || k > r - b) return onnx_fail(n, TG_ERR_ARG, "indices pick %lld axes of %lld", (long long)k, (long long)(r - b));
  for (int d = 0; d < b; d++)
    if (tg_shape(x, d) != tg_shape(ind, d)) return onnx_fail(n, TG_ERR_ARG, "batch axis %d: data %lld, indices %lld", d,
                                                              (long long)tg_shape(x, d), (long long)tg_shape(ind, d));
  int64_t B = oshape_numel((int)b, tg_shape_ptr(x)), xs[TG_MAX_DIMS], is[TG_MAX_DIMS], os[TG_MAX_DIMS];
  int nxs = 0, nis = 0, nos = 0;
  xs[nxs++] = B;
  for (int d = (int)b; d < r; d++) xs[nxs++] = tg_shape(x, d);
  is[nis++] = B;
  for (int d = (int)b; d < q; d++) is[nis++] = tg_shape(ind, d);
  for (int d = 0; d < q - 1; d++) os[nos++] = tg_shape(ind, d);
  for (int d = (int)(b + k); d < r; d++) os[nos++] = tg_shape(x, d);
  if (nos > TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "the result would have %d dims", nos);
  oshape_begin();
  tg_index ix[TG_MAX_DIMS + 1];
  int nix = 0;
  tg_tensor *xb = tg_reshape(x, nxs, xs), *ib = tg_reshape(ind, nis, is);
  if (b > 0) {   /* the batch position, broadcast against each column of indices */
    int64_t bs[TG_MAX_DIMS];
    for (int d = 0; d < nis - 1; d++) bs[d] = d ? 1 : B;
    ix[nix++] = TG_IX_TENSOR(tg_reshape(tg_arange(TG_INT64, 0, (double)B, 1), nis - 1, bs));
  } else {
    xb = x, ib = ind;
  }
  for (int64_t j = 0; j < k; j++) ix[nix++] = TG_IX_TENSOR(last_axis_at(ib, j));
  for (int i = 0; i < nix; i++)
    if (!ix[i].tensor) return oshape_end(n, NULL, out, 0);
  return oshape_end(n, tg_reshape(tg_getitem(xb, nix, ix), nos, os), out, 0);
}

/* ONNX's reduction attribute as tgc's scatter reduction: -1 none, or the op; -2 unknown */
static int scatter_reduction(const onnx_node *n, tg_scatter_reduce_op *op) {
  const char *r = onnx_attr_string(n, "reduction", "none");
  if (!strcmp(r, "none")) return -1;
  if (!strcmp(r, "add")) *op = TG_SCATTER_SUM;
  else if (!strcmp(r, "mul")) *op = TG_SCATTER_PROD;
  else if (!strcmp(r, "max")) *op = TG_SCATTER_AMAX;
  else if (!strcmp(r, "min")) *op = TG_SCATTER_AMIN;
  else return -2;
  return 0;
}

tg_status onnx_op_scatter_elements(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  int ax = oshape_axis(n, onnx_attr_int(n, "axis", 0), nd);
  if (ax < 0) return TG_ERR_ARG;
  tg_scatter_reduce_op op = TG_SCATTER_SUM;
  int red = scatter_reduction(n, &op);
  if (red == -2) return onnx_fail(n, TG_ERR_ARG, "unknown reduction '%s'", onnx_attr_string(n, "reduction", ""));
  if (tg_ndim(in[1]) != nd || tg_ndim(in[2]) != nd)
    return onnx_fail(n, TG_ERR_ARG, "indices (%d dims) and updates (%d) must have the data's %d dims", tg_ndim(in[1]),
                     tg_ndim(in[2]), nd);
  oshape_begin();
  tg_tensor *idx = wrap_negative(in[1], tg_shape(in[0], ax));
  return oshape_end(n, red < 0 ? tg_scatter(in[0], ax, idx, in[2]) : tg_scatter_reduce(in[0], ax, idx, in[2], op, true),
                   out, 0);
}

/* ScatterND as a scatter along axis 0 of data seen as (rows, slice): each index tuple becomes a row number */
tg_status onnx_op_scatter_nd(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0], *ind = in[1], *upd = in[2];
  int r = tg_ndim(x), q = tg_ndim(ind);
  tg_scatter_reduce_op op = TG_SCATTER_SUM;
  int red = scatter_reduction(n, &op);
  if (red == -2) return onnx_fail(n, TG_ERR_ARG, "unknown reduction '%s'", onnx_attr_string(n, "reduction", ""));
  if (q < 1) return onnx_fail(n, TG_ERR_ARG, "indices must have a dim");
  int64_t k = tg_shape(ind, -1);
  if (k > r) return onnx_fail(n, TG_ERR_ARG, "indices pick %lld axes of %d", (long long)k, r);
  /* updates: indices' shape without its last axis, then data's shape past k */
  bool ok = tg_ndim(upd) == q - 1 + r - k;
  for (int d = 0; ok && d < q - 1; d++) ok = tg_shape(upd, d) == tg_shape(ind, d);
  for (int d = (int)k; ok && d < r; d++) ok = tg_shape(upd, q - 1 + d - (int)k) == tg_shape(x, d);
  if (!ok) return onnx_fail(n, TG_ERR_ARG, "updates have the wrong shape for indices and data");
  const int64_t *xs = tg_shape_ptr(x);
  int64_t M = oshape_numel(q - 1, tg_shape_ptr(ind)), S = oshape_numel(r - (int)k, xs + k), R = oshape_numel((int)k, xs);
  oshape_begin();
  if (M == 0) return oshape_end(n, tg_reshape(x, r, xs), out, 0);
  tg_tensor *ind64 = tg_cast(ind, TG_INT64), *row = NULL;
  int64_t stride = 1;
  for (int64_t j = k - 1; j >= 0; j--) {   /* row = sum of index j times the size of the axes after it */
    tg_tensor *col = tg_mul_scalar(wrap_negative(last_axis_at(ind64, j), xs[j]), (double)stride);
    row = row ? tg_add(row, col) : col;
    stride *= xs[j];
  }
  if (!row) row = tg_zeros(TG_INT64, q - 1, tg_shape_ptr(ind));
  int64_t ms[2] = {M, S}, m1[2] = {M, 1}, rs[2] = {R, S};
  tg_tensor *index = tg_expand(tg_reshape(row, 2, m1), 2, ms), *src = tg_reshape(upd, 2, ms);
  tg_tensor *x2 = tg_reshape(x, 2, rs);
  tg_tensor *res = red < 0 ? tg_scatter(x2, 0, index, src) : tg_scatter_reduce(x2, 0, index, src, op, true);
  return oshape_end(n, tg_reshape(res, r, tg_shape_ptr(x)), out, 0);
}

/* NonZero: int64 (ndim, count), realized (its size is the count) */
tg_status onnx_op_nonzero(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  oshape_begin();
  tg_tensor *res;
  if (tg_ndim(in[0]) == 0) {   /* the reference's (0, count) */
    int64_t one = 1;
    tg_tensor *nz = tg_nonzero(tg_reshape(in[0], 1, &one));
    int64_t s[2] = {0, nz ? tg_shape(nz, 0) : 0};
    res = nz ? tg_zeros(TG_INT64, 2, s) : NULL;
  } else {
    res = tg_cast(tg_transpose(tg_nonzero(in[0]), 0, 1), TG_INT64);
  }
  return oshape_end(n, res, out, 0);
}

tg_status onnx_op_compress(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0];
  if (!in[1] || tg_ndim(in[1]) != 1) return onnx_fail(n, TG_ERR_ARG, "condition must be 1-d");
  int64_t len = tg_numel(in[1]), cnt, nsel = 0;
  int64_t *cond = mem_alloc((size_t)(len ? len : 1) * 2 * sizeof *cond);
  if (!cond) return onnx_fail(n, TG_ERR_NOMEM, "a condition of %lld values", (long long)len);
  tg_status st = onnx_input_ints(c, n, in, 1, cond, len, &cnt);
  if (st) {
    free(cond);
    return st;
  }
  oshape_begin();
  int ax = 0;
  if (onnx_attr_has(n, "axis")) {
    ax = oshape_axis(n, onnx_attr_int(n, "axis", 0), tg_ndim(x));
  } else {
    int64_t all = tg_numel(x);
    x = tg_reshape(x, 1, &all);
  }
  int64_t dim = ax >= 0 && x ? tg_shape(x, ax) : 0, *sel = cond + (len ? len : 1);
  for (int64_t i = 0; ax >= 0 && i < cnt; i++) {
    if (!cond[i]) continue;
    if (i >= dim) {
      free(cond);
      return oshape_close(onnx_fail(n, TG_ERR_ARG, "condition is true at %lld, past the axis' %lld", (long long)i,
                                   (long long)dim));
    }
    sel[nsel++] = i;
  }
  tg_tensor *res = NULL;
  if (ax < 0) {
    free(cond);
    return oshape_close(TG_ERR_ARG);
  }
  if (nsel == 0) {
    int64_t b[2 * TG_MAX_DIMS];
    for (int d = 0; d < tg_ndim(x); d++) b[2 * d] = 0, b[2 * d + 1] = d == ax ? 0 : tg_shape(x, d);
    res = tg_shrink(x, tg_ndim(x), b);
  } else {
    res = tg_index_select(x, ax, tg_from_data(TG_INT64, 1, &nsel, sel, (size_t)nsel * sizeof *sel));
  }
  free(cond);
  return oshape_end(n, res, out, 0);
}

tg_status onnx_op_onehot(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  double dd;
  int64_t cnt;
  for (int i = 0; i < 3; i++)
    if (i >= n->nin || !in[i]) return onnx_fail(n, TG_ERR_ARG, "input %d is missing", i);
  if (tg_numel(in[2]) != 2) return onnx_fail(n, TG_ERR_ARG, "values must hold 2 elements");
  tg_status st = onnx_input_doubles(c, n, in, 1, &dd, 1, &cnt);
  if (st) return st;
  if (!(dd >= 1 && dd < 1e12)) return onnx_fail(n, TG_ERR_ARG, "depth %g", dd);
  int64_t depth = (int64_t)dd;
  int r = tg_ndim(in[0]);
  if (r + 1 > TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "indices of %d dims", r);
  int ax = oshape_axis(n, onnx_attr_int(n, "axis", -1), r + 1);
  if (ax < 0) return TG_ERR_ARG;
  int64_t as[TG_MAX_DIMS], one = 1, b0[2] = {0, 1}, b1[2] = {1, 2};
  for (int d = 0; d <= r; d++) as[d] = d == ax ? depth : 1;
  oshape_begin();
  tg_tensor *idx = tg_unsqueeze(wrap_negative(tg_cast(in[0], TG_INT64), depth), ax);
  tg_tensor *mask = tg_eq(idx, tg_reshape(tg_arange(TG_INT64, 0, (double)depth, 1), r + 1, as));
  tg_tensor *v = tg_reshape(in[2], 1, &(int64_t){2});
  tg_tensor *off = tg_reshape(tg_shrink(v, 1, b0), 0, &one), *on = tg_reshape(tg_shrink(v, 1, b1), 0, &one);
  return oshape_end(n, tg_where(mask, on, off), out, 0);
}

tg_status onnx_op_reverse_sequence(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0];
  int nd = tg_ndim(x);
  int64_t ta = onnx_attr_int(n, "time_axis", 0), ba = onnx_attr_int(n, "batch_axis", 1);
  if (nd < 2 || ta < 0 || ta > 1 || ba < 0 || ba > 1 || ta == ba)
    return onnx_fail(n, TG_ERR_ARG, "time_axis %lld and batch_axis %lld for %d dims", (long long)ta, (long long)ba, nd);
  if (!in[1] || tg_ndim(in[1]) != 1 || tg_shape(in[1], 0) != tg_shape(x, (int)ba))
    return onnx_fail(n, TG_ERR_ARG, "sequence_lens must be 1-d of the batch size %lld", (long long)tg_shape(x, (int)ba));
  int64_t T = tg_shape(x, (int)ta), ts[TG_MAX_DIMS], bs[TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) ts[d] = d == ta ? T : 1, bs[d] = d == ba ? tg_shape(x, (int)ba) : 1;
  oshape_begin();
  /* element t of sequence b comes from len_b - 1 - t while t < len_b, else stays */
  tg_tensor *t = tg_reshape(tg_arange(TG_INT64, 0, (double)T, 1), nd, ts);
  tg_tensor *len = tg_reshape(tg_cast(in[1], TG_INT64), nd, bs);
  tg_tensor *idx = tg_where(tg_lt(t, len), tg_sub(tg_add_scalar(len, -1), t), t);
  return oshape_end(n, tg_gather(x, (int)ta, tg_expand(idx, nd, tg_shape_ptr(x))), out, 0);
}

/* ---- Unique: the distinct slices along an axis (or the distinct elements), found on the host ---- */

typedef struct uniq_keys {
  int64_t rows, len;        /* rows to compare, each of len values */
  const int64_t *iv;        /* integer dtypes: exact values */
  const double *dv;         /* float dtypes */
  int64_t outer, inner, D;  /* row j's values: x[o, j, i] for o < outer, i < inner (x as (outer, D, inner)) */
} uniq_keys;

/* row a against row b: lexicographic over their values, as numpy's unique compares rows */
static int uniq_cmp(const uniq_keys *k, int64_t a, int64_t b) {
  for (int64_t o = 0; o < k->outer; o++)
    for (int64_t i = 0; i < k->inner; i++) {
      int64_t pa = (o * k->D + a) * k->inner + i, pb = (o * k->D + b) * k->inner + i;
      if (k->iv ? k->iv[pa] != k->iv[pb] : k->dv[pa] != k->dv[pb])
        return k->iv ? (k->iv[pa] < k->iv[pb] ? -1 : 1) : (k->dv[pa] < k->dv[pb] ? -1 : 1);
    }
  return 0;
}

/* a stable merge sort of the row numbers idx[0..n) by uniq_cmp (tmp: room for n) */
static void uniq_sort(const uniq_keys *k, int64_t *idx, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2, i = 0, j = h, o = 0;
  uniq_sort(k, idx, tmp, h);
  uniq_sort(k, idx + h, tmp, n - h);
  while (i < h && j < n) tmp[o++] = uniq_cmp(k, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
  while (i < h) tmp[o++] = idx[i++];
  while (j < n) tmp[o++] = idx[j++];
  memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

tg_status onnx_op_unique(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0];
  int nd = tg_ndim(x);
  bool has_axis = onnx_attr_has(n, "axis"), sorted = onnx_attr_int(n, "sorted", 1) != 0;
  int ax = has_axis ? oshape_axis(n, onnx_attr_int(n, "axis", 0), nd) : 0;
  if (ax < 0) return TG_ERR_ARG;
  int64_t N = tg_numel(x), cnt, D = has_axis ? tg_shape(x, ax) : N;
  bool isint = oshape_int_dtype(tg_dtype_of(x));
  /* the values, then per row: sorted order, scratch, group of each row, first row and count of each group */
  int64_t *iv = isint ? mem_alloc((size_t)(N ? N : 1) * sizeof *iv) : NULL;
  double *dv = isint ? NULL : mem_alloc((size_t)(N ? N : 1) * sizeof *dv);
  int64_t *w = mem_alloc((size_t)(D ? D : 1) * 6 * sizeof *w);
  tg_status st = TG_OK;
  if ((isint ? !iv : !dv) || !w) st = onnx_fail(n, TG_ERR_NOMEM, "%lld values", (long long)N);
  else if (isint) st = onnx_input_ints(c, n, in, 0, iv, N, &cnt);
  else st = onnx_input_doubles(c, n, in, 0, dv, N, &cnt);
  if (st) {
    free(iv), free(dv), free(w);
    return st;
  }
  uniq_keys k = {D, D ? N / D : 0, iv, dv, 1, 1, D};
  if (has_axis) {
    k.outer = oshape_numel(ax, tg_shape_ptr(x));
    k.inner = oshape_numel(nd - ax - 1, tg_shape_ptr(x) + ax + 1);
  }
  int64_t *order = w, *tmp = w + D, *group = w + 2 * D, *first = w + 3 * D, *count = w + 4 * D, *rank = w + 5 * D, U = 0;
  for (int64_t j = 0; j < D; j++) order[j] = j;
  uniq_sort(&k, order, tmp, D);
  for (int64_t j = 0; j < D; j++) {   /* groups in sorted order; the stable sort puts each group's first row first */
    if (j == 0 || uniq_cmp(&k, order[j - 1], order[j])) first[U] = order[j], count[U++] = 0;
    group[order[j]] = U - 1;
    count[U - 1]++;
  }
  if (!sorted) {   /* groups renumbered in the order of their first rows */
    int64_t *firstof = tmp, next = 0;
    for (int64_t j = 0; j < D; j++) firstof[j] = -1;
    for (int64_t g = 0; g < U; g++) firstof[first[g]] = g;
    for (int64_t j = 0; j < D; j++)
      if (firstof[j] >= 0) rank[firstof[j]] = next++;
    for (int64_t g = 0; g < U; g++) order[rank[g]] = first[g];
    memcpy(first, order, (size_t)U * sizeof *first);
    for (int64_t g = 0; g < U; g++) order[rank[g]] = count[g];
    memcpy(count, order, (size_t)U * sizeof *count);
    for (int64_t j = 0; j < D; j++) group[j] = rank[group[j]];
  }
  oshape_begin();
  tg_tensor *src = has_axis ? x : tg_reshape(x, 1, &N);
  tg_tensor *fi = tg_from_data(TG_INT64, 1, &U, first, (size_t)U * sizeof *first);
  tg_tensor *r[4] = {tg_index_select(src, ax, fi), fi, tg_from_data(TG_INT64, 1, &D, group, (size_t)D * sizeof *group),
                     tg_from_data(TG_INT64, 1, &U, count, (size_t)U * sizeof *count)};
  free(iv), free(dv), free(w);
  for (int i = 0; i < 4; i++)
    if (!r[i]) return oshape_end(n, NULL, out, 0);
  for (int i = 0; i < n->nout && i < 4; i++) out[i] = n->outputs[i][0] ? tg_keep(r[i]) : NULL;
  return oshape_close(TG_OK);
}
