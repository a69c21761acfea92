/* getitem.c — python's t[...] as tinygrad's __getitem__ and __setitem__, and the data-dependent selections
 * nonzero and masked_select.
 *
 * An index is parsed into one entry per output or input axis (ints, slices, None, integer tensors; the
 * ellipsis expands to full slices, a bool mask to the integer tensors of its nonzero). The basic entries are
 * views (shrink, flip, and a pad + reshape + shrink for steps), then a reshape drops the int axes and adds
 * the None ones. Tensor indices select as tinygrad's do: each becomes a one-hot mask against an arange, the
 * masks multiply, and a sum over the indexed axes collapses them, so everything stays lazy and differentiable;
 * adjacent tensor indices first fold into one linear index over the flattened axes (one mask, not several). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/compose.h"

#define SB 256
#define OP "tg_getitem"

/* one parsed entry: kind INT, SLICE, NONE or TENSOR (ellipsis and masks are expanded) */
typedef struct ent {
  tg_index_kind kind;
  int axis;             /* the input axis it indexes, -1 for NONE */
  int64_t b0, b1, st;   /* the covered range [b0, b1) of the axis, |step|; INT: [i, i+1) */
  bool neg;             /* a negative step: the range is read backwards */
  int64_t size;         /* its size in the view: 1 for INT and NONE, the count for SLICE, the axis for TENSOR */
  tg_tensor *tensor;    /* TENSOR: int index with negatives wrapped (in the tmps) */
} ent;

typedef struct parsed {
  ent e[2 * TG_MAX_DIMS + 1];
  int n;
} parsed;

/* python's slice.indices(len) then tinygrad's boundary: the covered range, |step| and direction */
static void slice_bounds(tg_slice sl, int64_t len, ent *e) {
  int64_t step = sl.all ? 1 : sl.step, start, stop;
  if (sl.all) { start = 0; stop = len; }
  else if (step > 0) {
    start = sl.start == TG_END ? 0 : sl.start < 0 ? (sl.start < -len ? 0 : sl.start + len) : (sl.start > len ? len : sl.start);
    stop = sl.stop == TG_END ? len : sl.stop < 0 ? (sl.stop < -len ? 0 : sl.stop + len) : (sl.stop > len ? len : sl.stop);
  } else {
    start = sl.start == TG_END ? len - 1 : sl.start < 0 ? (sl.start < -len ? -1 : sl.start + len) : (sl.start > len - 1 ? len - 1 : sl.start);
    stop = sl.stop == TG_END ? -1 : sl.stop < 0 ? (sl.stop < -len ? -1 : sl.stop + len) : (sl.stop > len - 1 ? len - 1 : sl.stop);
  }
  uint64_t ust = step > 0 ? (uint64_t)step : -(uint64_t)step;
  int64_t diff = step > 0 ? stop - start : start - stop;
  int64_t count = diff <= 0 ? 0 : (int64_t)((uint64_t)(diff - 1) / ust) + 1;
  e->neg = step < 0;
  if (count == 0) { e->b0 = e->b1 = 0; e->st = 1; e->size = 0; e->neg = false; return; }
  e->st = count == 1 ? 1 : (int64_t)ust;   /* one element: the step does not matter (and stays small) */
  if (step > 0) { e->b0 = start; e->b1 = start + (count - 1) * e->st + 1; }
  else { e->b1 = start + 1; e->b0 = start - (count - 1) * e->st; }
  e->size = count;
}

/* an integer index tensor for axis of size n: int32 (int64 kept), negatives + n */
static tg_tensor *index_tensor(tmps *s, tg_tensor *ix, int64_t n) {
  tg_dtype dt = TDT(ix);
  if (!dtype_is_int(dt)) {
    tg_set_error(TG_ERR_ARG, OP ": index tensors must be integer, got %s%s", tg_dtype_name(dt),
                 dt == TG_BOOL ? " (tinygrad refuses bool index tensors: use TG_IX_MASK for numpy's boolean indexing)" : "");
    return NULL;
  }
  tg_dtype to = dt == TG_INT64 || dt == TG_UINT32 || dt == TG_UINT64 ? TG_INT64 : TG_INT32;
  if (to == TG_INT32 && n > INT32_MAX) to = TG_INT64;
  tg_tensor *x = dt == to ? ix : tmp(s, tg_cast(ix, to));
  if (dtype_is_unsigned(dt)) return x;
  tg_tensor *negs = tmp(s, tg_lt(x, tmp(s, tg_scalar(to, 0))));
  return tmp(s, tg_where(negs, tmp(s, tg_add_scalar(x, (double)n)), x));
}

/* parses idx against t into p; false with an error */
static bool parse(tmps *s, tg_tensor *t, int n, const tg_index *idx, parsed *p) {
  int nd = TNDIM(t), nell = 0, nreal = 0;
  char a[SB];
  if (n < 0 || (n && !idx) || n > 2 * TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, OP ": %d index entries", n);
    return false;
  }
  for (int k = 0; k < n; k++) {
    switch (idx[k].kind) {
      case TG_INDEX_ELLIPSIS: nell++; break;
      case TG_INDEX_NONE: break;
      case TG_INDEX_INT: case TG_INDEX_SLICE: nreal++; break;
      case TG_INDEX_TENSOR: case TG_INDEX_MASK:
        if (!idx[k].tensor) {
          if (!tg_error_status()) tg_set_error(TG_ERR_ARG, OP ": index tensor %d is NULL", k);
          return false;
        }
        nreal += idx[k].kind == TG_INDEX_MASK ? TNDIM(idx[k].tensor) : 1;
        break;
      default:
        tg_set_error(TG_ERR_ARG, OP ": entry %d has an unknown kind %d", k, (int)idx[k].kind);
        return false;
    }
  }
  if (nell > 1) {
    tg_set_error(TG_ERR_ARG, OP ": an index can only have a single ellipsis");
    return false;
  }
  if (nreal > nd) {
    tg_set_error(TG_ERR_ARG, OP ": too many indices (%d) for a tensor of %d dimensions, shape %s", nreal, nd,
                 shape_str(a, sizeof a, nd, TSHAPE(t)));
    return false;
  }
  p->n = 0;
  int axis = 0;
  for (int k = 0; k <= n; k++) {
    if (k == n ? nell == 0 : idx[k].kind == TG_INDEX_ELLIPSIS) {  /* the axes not indexed, as full slices */
      for (int j = 0; j < nd - nreal; j++, axis++)
        p->e[p->n++] = (ent){TG_INDEX_SLICE, axis, 0, TSHAPE(t)[axis], 1, false, TSHAPE(t)[axis], NULL};
    }
    if (k == n) break;
    const tg_index *ix = &idx[k];
    if (p->n + (ix->kind == TG_INDEX_MASK ? TNDIM(ix->tensor) : 1) > (int)(sizeof p->e / sizeof p->e[0])) {
      tg_set_error(TG_ERR_ARG, OP ": more than %d dimensions", TG_MAX_DIMS);
      return false;
    }
    ent *e = &p->e[p->n];
    switch (ix->kind) {
      case TG_INDEX_ELLIPSIS: break;
      case TG_INDEX_NONE:
        *e = (ent){TG_INDEX_NONE, -1, 0, 1, 1, false, 1, NULL};
        p->n++;
        break;
      case TG_INDEX_INT: {
        int64_t len = TSHAPE(t)[axis], i = ix->i;
        if (i >= len || i < -len) {
          tg_set_error(TG_ERR_ARG, OP ": index %lld is out of bounds for axis %d with size %lld", (long long)i, axis, (long long)len);
          return false;
        }
        if (i < 0) i += len;
        *e = (ent){TG_INDEX_INT, axis++, i, i + 1, 1, false, 1, NULL};
        p->n++;
        break;
      }
      case TG_INDEX_SLICE:
        if (!ix->slice.all && ix->slice.step == 0) {
          tg_set_error(TG_ERR_ARG, OP ": slice step cannot be 0 (axis %d)", axis);
          return false;
        }
        *e = (ent){TG_INDEX_SLICE, axis, 0, 0, 1, false, 0, NULL};
        slice_bounds(ix->slice, TSHAPE(t)[axis], e);
        axis++;
        p->n++;
        break;
      case TG_INDEX_TENSOR: {
        int64_t len = TSHAPE(t)[axis];
        tg_tensor *it = index_tensor(s, ix->tensor, len);
        if (!it) return false;
        *e = (ent){TG_INDEX_TENSOR, axis++, 0, len, 1, false, len, it};
        p->n++;
        break;
      }
      case TG_INDEX_MASK: {
        tg_tensor *m = ix->tensor;
        int k2 = TNDIM(m);
        bool ok = TDT(m) == TG_BOOL && k2 > 0;
        for (int j = 0; ok && j < k2; j++) ok = TSHAPE(m)[j] == TSHAPE(t)[axis + j];
        if (!ok) {
          char b[SB];
          tg_set_error(TG_ERR_ARG, OP ": a mask must be a bool tensor of at least 1 dimension matching the axes it indexes: "
                       "mask %s %s at axis %d of shape %s", tg_dtype_name(TDT(m)), shape_str(b, sizeof b, k2, TSHAPE(m)), axis,
                       shape_str(a, sizeof a, nd, TSHAPE(t)));
          return false;
        }
        tg_tensor *nz = tmp(s, tg_nonzero(m));   /* (count, k2), realizes the mask */
        if (!nz) return false;
        int64_t cnt = TSHAPE(nz)[0];
        for (int j = 0; j < k2; j++) {
          tg_tensor *col = tmp(s, tg_shrink(nz, 2, (int64_t[]){0, cnt, j, j + 1}));
          col = tmp(s, tg_reshape(col, 1, &cnt));
          if (!col) return false;
          int64_t len = TSHAPE(t)[axis];
          p->e[p->n++] = (ent){TG_INDEX_TENSOR, axis++, 0, len, 1, false, len, col};
        }
        break;
      }
    }
  }
  return true;
}

/* one axis of x read with every st-th element from the first (count elements) */
static tg_tensor *stride_axis(tmps *s, tg_tensor *x, int ax, int64_t st, int64_t count) {
  int nd = TNDIM(x);
  if (nd + 1 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, OP ": a step other than 1 or -1 needs a spare dimension: at most %d dimensions", TG_MAX_DIMS - 1);
    return NULL;
  }
  int64_t p[2 * TG_MAX_DIMS] = {0}, sh[TG_MAX_DIMS], b[2 * TG_MAX_DIMS];
  p[2 * ax + 1] = count * st - TSHAPE(x)[ax];
  x = tmp(s, tg_pad_axes(x, nd, p, 0));
  if (!x) return NULL;
  for (int i = 0, j = 0; i < nd; i++) {
    if (i == ax) { sh[j++] = count; sh[j++] = st; }
    else sh[j++] = TSHAPE(x)[i];
  }
  x = tmp(s, tg_reshape(x, nd + 1, sh));
  for (int i = 0; i <= nd; i++) { b[2 * i] = 0; b[2 * i + 1] = sh[i]; }
  b[2 * (ax + 1) + 1] = 1;
  x = tmp(s, tg_shrink(x, nd + 1, b));
  sh[ax + 1] = 1;
  for (int i = ax + 1; i < nd; i++) sh[i] = sh[i + 1];
  return tmp(s, tg_reshape(x, nd, sh));
}

/* the basic view: shrink to the ranges, flip the backward ones, take every st-th, then the entries' sizes
 * (ints dropped, None added) */
static tg_tensor *basic_view(tmps *s, tg_tensor *t, const parsed *p) {
  int nd = TNDIM(t);
  int64_t b[2 * TG_MAX_DIMS];
  bool flip[TG_MAX_DIMS] = {false};
  int axes[TG_MAX_DIMS], nf = 0;
  for (int i = 0; i < nd; i++) { b[2 * i] = 0; b[2 * i + 1] = TSHAPE(t)[i]; }
  for (int k = 0; k < p->n; k++) {
    const ent *e = &p->e[k];
    if (e->axis < 0) continue;
    b[2 * e->axis] = e->b0;
    b[2 * e->axis + 1] = e->b1;
    if (e->neg && !flip[e->axis]) { flip[e->axis] = true; axes[nf++] = e->axis; }
  }
  tg_tensor *x = tmp(s, tg_shrink(t, nd, b));
  if (nf) x = tmp(s, tg_flip(x, nf, axes));
  for (int k = 0; k < p->n && x; k++) {
    const ent *e = &p->e[k];
    if (e->axis >= 0 && e->st != 1) x = stride_axis(s, x, e->axis, e->st, e->size);
  }
  if (!x) return NULL;
  int64_t sh[2 * TG_MAX_DIMS + 1];
  int m = 0;
  for (int k = 0; k < p->n; k++)
    if (p->e[k].kind != TG_INDEX_INT) sh[m++] = p->e[k].size;
  if (m > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, OP ": the result has %d dimensions, more than %d", m, TG_MAX_DIMS);
    return NULL;
  }
  return tmp(s, tg_reshape(x, m, sh));
}

/* numpy broadcasting of the index tensors' shapes into big (*nb dims); false with an error */
static bool broadcast_indices(int nt, tg_tensor *const *ts, int *nb, int64_t *big) {
  *nb = 0;
  for (int i = 0; i < nt; i++)
    if (TNDIM(ts[i]) > *nb) *nb = TNDIM(ts[i]);
  for (int d = 0; d < *nb; d++) big[d] = 1;
  for (int i = 0; i < nt; i++)
    for (int d = 0; d < TNDIM(ts[i]); d++) {
      int od = d + *nb - TNDIM(ts[i]);
      int64_t v = TSHAPE(ts[i])[d];
      if (v == big[od] || v == 1) continue;
      if (big[od] == 1) { big[od] = v; continue; }
      char a[SB], b[SB];
      tg_set_error(TG_ERR_ARG, OP ": index tensors of shapes %s and %s cannot be broadcast together",
                   shape_str(a, sizeof a, TNDIM(ts[0]), TSHAPE(ts[0])), shape_str(b, sizeof b, TNDIM(ts[i]), TSHAPE(ts[i])));
      return false;
    }
  return true;
}

/* the one-hot masks of index tensors ts at axes dims (ascending) of x, multiplied: bool, broadcastable to
 * tinygrad's pre-reduce shape (x[:d0], big, x[d0:]) */
static tg_tensor *index_mask(tmps *s, tg_tensor *x, int nt, const int *dims, tg_tensor *const *ts, int nb) {
  int xn = TNDIM(x), d0 = dims[0];
  if (xn + nb > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, OP ": indexing needs %d dimensions, more than %d", xn + nb, TG_MAX_DIMS);
    return NULL;
  }
  tg_tensor *mask = NULL;
  int64_t sh[TG_MAX_DIMS];
  for (int k = 0; k < nt; k++) {
    /* the index right-aligned into big, then ones over x[d0:]; the arange on the axis' own position */
    int ti = TNDIM(ts[k]);
    memcpy(sh, TSHAPE(ts[k]), sizeof(int64_t) * (size_t)ti);
    for (int j = 0; j < xn - d0; j++) sh[ti + j] = 1;
    tg_tensor *it = tmp(s, tg_reshape(ts[k], ti + xn - d0, sh));
    tg_tensor *m = tmp(s, tg_eq(it, arange_col(s, TSHAPE(x)[dims[k]], xn - dims[k] - 1)));
    mask = mask ? tmp(s, tg_mul(mask, m)) : m;
  }
  return mask;
}

/* x as (x[:d0], 1 x nb, x[d0:]) */
static tg_tensor *insert_ones(tmps *s, tg_tensor *x, int d0, int nb) {
  int64_t sh[TG_MAX_DIMS];
  int m = 0, xn = TNDIM(x);
  for (int i = 0; i < d0; i++) sh[m++] = TSHAPE(x)[i];
  for (int i = 0; i < nb; i++) sh[m++] = 1;
  for (int i = d0; i < xn; i++) sh[m++] = TSHAPE(x)[i];
  return tmp(s, tg_reshape(x, m, sh));
}

/* tinygrad's tensor indexing of x at axes dims (ascending) by ts: the masked sum, (x[:d0], big, x[d0:] without
 * dims); no permute */
static tg_tensor *select_masked(tmps *s, tg_tensor *x, int nt, const int *dims, tg_tensor *const *ts, int nb,
                                const int64_t *big) {
  (void)big;
  tg_tensor *mask = index_mask(s, x, nt, dims, ts, nb);
  if (!mask) return NULL;
  tg_tensor *xr = insert_ones(s, x, dims[0], nb);
  tg_tensor *sel = tmp(s, tg_where(mask, xr, tmp(s, tg_scalar(TDT(x), 0))));
  int axes[TG_MAX_DIMS];
  for (int k = 0; k < nt; k++) axes[k] = dims[k] + nb;
  return tmp(s, tg_cast(tmp(s, tg_sum(sel, nt, axes, false)), TDT(x)));
}

/* the tensor-indexed view x (the entries' sizes) -> the result */
static tg_tensor *advanced(tmps *s, tg_tensor *x, const parsed *p) {
  int dims[TG_MAX_DIMS], nt = 0, pos = 0;
  tg_tensor *ts[TG_MAX_DIMS];
  for (int k = 0; k < p->n; k++) {
    if (p->e[k].kind == TG_INDEX_INT) continue;
    if (p->e[k].kind == TG_INDEX_TENSOR) { dims[nt] = pos; ts[nt++] = p->e[k].tensor; }
    pos++;
  }
  if (!nt) return x;
  int nb;
  int64_t big[TG_MAX_DIMS];
  if (!broadcast_indices(nt, ts, &nb, big)) return NULL;
  bool consecutive = dims[nt - 1] - dims[0] == nt - 1;
  int64_t lin = 1;
  bool fits = true;
  for (int k = 0; k < nt && fits; k++) fits = size_mul(lin, TSHAPE(x)[dims[k]], &lin) && lin <= INT32_MAX;
  if (nt > 1 && consecutive && fits) {
    /* tinygrad: adjacent indices as one linear index into the flattened axes, invalid ones masked to 0 */
    int xn = TNDIM(x), d0 = dims[0];
    tg_tensor *li = NULL, *valid = NULL;
    int64_t stride = 1;
    for (int k = nt - 1; k >= 0; k--) {
      int64_t n = TSHAPE(x)[dims[k]];
      tg_tensor *ok = tmp(s, tg_mul(tmp(s, tg_ge(ts[k], tmp(s, tg_scalar(TDT(ts[k]), 0)))),
                                    tmp(s, tg_lt(ts[k], tmp(s, tg_scalar(TDT(ts[k]), (double)n))))));
      /* out-of-range components are 0 before the products, so the sum stays below lin <= 2^31 - 1 */
      tg_tensor *ik = tmp(s, tg_cast(tmp(s, tg_where(ok, ts[k], tmp(s, tg_scalar(TDT(ts[k]), 0)))), TG_INT32));
      tg_tensor *term = tmp(s, tg_mul_scalar(ik, (double)stride));
      li = k < nt - 1 ? tmp(s, tg_add(li, term)) : term;   /* by k, not li: a NULL (no memory) must stay NULL */
      valid = k < nt - 1 ? tmp(s, tg_mul(valid, ok)) : ok;
      stride *= n;
    }
    int64_t sh[TG_MAX_DIMS];
    int m = 0;
    for (int i = 0; i < d0; i++) sh[m++] = TSHAPE(x)[i];
    sh[m++] = lin;
    for (int i = dims[nt - 1] + 1; i < xn; i++) sh[m++] = TSHAPE(x)[i];
    tg_tensor *xf = tmp(s, tg_reshape(x, m, sh));
    if (!xf || !li || !valid) return NULL;
    tg_tensor *r = select_masked(s, xf, 1, &d0, &li, TNDIM(li), TSHAPE(li));
    if (!r) return NULL;
    /* valid as (1 x d0, big, 1 x rest) */
    int mv = 0, nvd = TNDIM(valid);
    for (int i = 0; i < d0; i++) sh[mv++] = 1;
    for (int i = 0; i < nb - nvd; i++) sh[mv++] = 1;
    for (int i = 0; i < nvd; i++) sh[mv++] = TSHAPE(valid)[i];
    for (int i = dims[nt - 1] + 1; i < xn; i++) sh[mv++] = 1;
    tg_tensor *vr = tmp(s, tg_reshape(valid, mv, sh));
    return tmp(s, tg_where(vr, r, tmp(s, tg_scalar(TDT(x), 0))));
  }
  tg_tensor *r = select_masked(s, x, nt, dims, ts, nb, big);
  if (r && dims[0] != 0 && nt > 1 && !consecutive) {  /* numpy: separated advanced indices put their axes first */
    int perm[TG_MAX_DIMS], k = 0, rn = TNDIM(r), d0 = dims[0];
    for (int i = 0; i < nb; i++) perm[k++] = d0 + i;
    for (int i = 0; i < d0; i++) perm[k++] = i;
    for (int i = d0 + nb; i < rn; i++) perm[k++] = i;
    r = tmp(s, tg_permute(r, rn, perm));
  }
  return r;
}

tg_tensor *tg_getitem(tg_tensor *t, int n, const tg_index *idx) {
  if (!t) return NULL;
  tmps s = TMPS(OP);
  parsed p;
  if (!parse(&s, t, n, idx, &p)) return tmps_end(&s, NULL);
  tg_tensor *x = basic_view(&s, t, &p);
  if (!x) return tmps_end(&s, NULL);
  x = advanced(&s, x, &p);
  if (x && x == t) x = tmp(&s, tg_reshape(t, TNDIM(t), TSHAPE(t)));
  return tmps_end(&s, x);
}

/* ---- nonzero, masked_select ------------------------------------------------------------------------------- */

/* the truth of every element of t (t != 0, NaN true) read to host as bytes; NULL with an error */
static uint8_t *truth_host(tmps *s, tg_tensor *t, int64_t n) {
  uint8_t *buf = mem_alloc((size_t)(n ? n : 1));
  if (!buf) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory", s->op);
    return NULL;
  }
  if (n == 0) return buf;
  tg_tensor *nz = tmp(s, tg_cast(tmp(s, tg_ne(t, tmp(s, tg_scalar(TDT(t), 0)))), TG_UINT8));
  if (!nz || tg_to_host(nz, buf, (size_t)n) != TG_OK) {
    free(buf);
    return NULL;
  }
  return buf;
}

tg_tensor *tg_nonzero(tg_tensor *t) {
  if (!t) return NULL;
  int nd = TNDIM(t);
  for (int i = 0; i < nd; i++)
    if (TSHAPE(t)[i] > INT32_MAX) {
      tg_set_error(TG_ERR_ARG, "tg_nonzero: axis %d of size %lld does not fit int32 indices", i, (long long)TSHAPE(t)[i]);
      return NULL;
    }
  tmps s = TMPS("tg_nonzero");
  int64_t n = tg_numel(t), cnt = 0;
  uint8_t *truth = truth_host(&s, t, n);
  if (!truth) return tmps_end(&s, NULL);
  for (int64_t i = 0; i < n; i++) cnt += truth[i] != 0;
  int32_t *out = mem_alloc((size_t)(cnt * nd > 0 ? cnt * nd : 1) * sizeof *out);
  tg_tensor *r = NULL;
  if (!out) tg_set_error(TG_ERR_NOMEM, "tg_nonzero: out of memory");
  else {
    int64_t k = 0, co[TG_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
      if (truth[i])
        for (int d = 0; d < nd; d++) out[k++] = (int32_t)co[d];
      for (int d = nd - 1; d >= 0; d--) {  /* the next row-major coordinate */
        if (++co[d] < TSHAPE(t)[d]) break;
        co[d] = 0;
      }
    }
    r = tmp(&s, tg_from_data(TG_INT32, 2, (int64_t[]){cnt, nd}, out, (size_t)(cnt * nd) * sizeof *out));
  }
  free(out);
  free(truth);
  return tmps_end(&s, r);
}

tg_tensor *tg_masked_select(tg_tensor *x, tg_tensor *mask) {
  if (!x || !mask) return NULL;
  if (TDT(mask) != TG_BOOL) {
    tg_set_error(TG_ERR_ARG, "tg_masked_select: the mask must be bool, got %s", tg_dtype_name(TDT(mask)));
    return NULL;
  }
  tmps s = TMPS("tg_masked_select");
  tg_tensor *m = tmp(&s, tg_expand(mask, TNDIM(x), TSHAPE(x)));
  if (!m) return tmps_end(&s, NULL);
  int64_t n = tg_numel(x), cnt = 0;
  uint8_t *truth = truth_host(&s, m, n);
  if (!truth) return tmps_end(&s, NULL);
  for (int64_t i = 0; i < n; i++) cnt += truth[i] != 0;
  bool wide = n > INT32_MAX;
  void *pos = mem_alloc((size_t)(cnt ? cnt : 1) * (wide ? 8 : 4));
  tg_tensor *r = NULL;
  if (!pos) tg_set_error(TG_ERR_NOMEM, "tg_masked_select: out of memory");
  else {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
      if (truth[i]) {
        if (wide) ((int64_t *)pos)[k++] = i;
        else ((int32_t *)pos)[k++] = (int32_t)i;
      }
    tg_tensor *ix = tmp(&s, tg_from_data(wide ? TG_INT64 : TG_INT32, 1, &cnt, pos, (size_t)cnt * (wide ? 8 : 4)));
    tg_tensor *flat = tmp(&s, tg_flatten(x, 0, -1));
    if (ix && flat) r = tmp(&s, tg_getitem(flat, 1, (tg_index[]){TG_IX_TENSOR(ix)}));
  }
  free(pos);
  free(truth);
  return tmps_end(&s, r);
}

/* The lazy forms with a fixed size (tinygrad's size=, jittable): sel (size, n) bool is true where flat element
 * i is the (j+1)-th true one of the flat mask m (n,); *valid (size,) is true for the rows that exist (j < count) */
static tg_tensor *nth_true(tmps *s, tg_tensor *m, int64_t size, tg_tensor **valid) {
  tg_tensor *mi = tmp(s, tg_cast(m, TG_INT32));
  tg_tensor *cs = mi ? tmp(s, tg_cumsum(mi, 0)) : NULL;                                          /* (n,) */
  tg_tensor *j1 = tmp(s, tg_arange(TG_INT32, 1, (double)size + 1, 1));
  tg_tensor *col = j1 ? tmp(s, tg_reshape(j1, 2, (int64_t[]){size, 1})) : NULL;                   /* (size, 1) */
  tg_tensor *hit = cs && col ? tmp(s, tg_eq(cs, col)) : NULL;                                     /* (size, n) */
  tg_tensor *sel = hit ? tmp(s, tg_mul(hit, m)) : NULL;
  tg_tensor *total = mi ? tmp(s, tg_sum(mi, 0, NULL, false)) : NULL;
  *valid = total && col ? tmp(s, tg_le(tmp(s, tg_reshape(col, 1, &size)), total)) : NULL;
  return *valid ? sel : NULL;
}

static bool size_ok(const char *op, int64_t size, int64_t n) {
  if (size < 0 || size > INT32_MAX || n > INT32_MAX) {
    tg_set_error(TG_ERR_ARG, "%s: size %lld (>= 0) or %lld elements out of the int32 range", op, (long long)size, (long long)n);
    return false;
  }
  return true;
}

tg_tensor *tg_masked_select_size(tg_tensor *x, tg_tensor *mask, int64_t size, double fill_value) {
  if (!x || !mask) return NULL;
  if (TDT(mask) != TG_BOOL) {
    tg_set_error(TG_ERR_ARG, "tg_masked_select_size: the mask must be bool, got %s", tg_dtype_name(TDT(mask)));
    return NULL;
  }
  if (!size_ok("tg_masked_select_size", size, tg_numel(x))) return NULL;
  tmps s = TMPS("tg_masked_select_size");
  tg_tensor *m = tmp(&s, tg_expand(mask, TNDIM(x), TSHAPE(x)));
  tg_tensor *mf = m ? tmp(&s, tg_flatten(m, 0, -1)) : NULL, *xf = tmp(&s, tg_flatten(x, 0, -1)), *valid = NULL;
  tg_tensor *sel = mf && xf ? nth_true(&s, mf, size, &valid) : NULL;
  /* out[j] = the sum over i of sel[j, i] ? x[i] : 0: one term is picked (NaN and inf elsewhere stay out) */
  tg_tensor *pick = sel ? tmp(&s, tg_where(sel, xf, tmp(&s, tg_zeros(TDT(x), 0, NULL)))) : NULL;
  tg_tensor *sum = pick ? tmp(&s, tg_sum(pick, 1, (int[]){1}, false)) : NULL;
  tg_tensor *r = sum ? tmp(&s, tg_where_scalar(valid, tmp(&s, tg_cast(sum, TDT(x))), fill_value)) : NULL;
  return tmps_end(&s, r ? tmp(&s, tg_cast(r, TDT(x))) : NULL);
}

tg_tensor *tg_nonzero_size(tg_tensor *t, int64_t size, double fill_value) {
  if (!t) return NULL;
  if (!size_ok("tg_nonzero_size", size, tg_numel(t))) return NULL;
  int nd = TNDIM(t);
  if (nd == 0) return tg_zeros(TG_INT32, 2, (int64_t[]){size, 0});  /* as tinygrad: no coordinates to give */
  tmps s = TMPS("tg_nonzero_size");
  tg_tensor *m = tmp(&s, tg_flatten(tmp(&s, tg_ne(t, tmp(&s, tg_scalar(TDT(t), 0)))), 0, -1)), *valid = NULL;
  tg_tensor *coord[TG_MAX_DIMS];  /* coord[d]: (n,) the d-th coordinate of each flat position */
  bool ok = m != NULL;
  for (int d = 0; d < nd && ok; d++) {
    int64_t sh[TG_MAX_DIMS];
    for (int e = 0; e < nd; e++) sh[e] = e == d ? TSHAPE(t)[d] : 1;
    tg_tensor *a = tmp(&s, tg_arange(TG_INT32, 0, (double)TSHAPE(t)[d], 1));
    tg_tensor *e = a ? tmp(&s, tg_expand(tmp(&s, tg_reshape(a, nd, sh)), nd, TSHAPE(t))) : NULL;
    coord[d] = e ? tmp(&s, tg_flatten(e, 0, -1)) : NULL;
    ok = coord[d] != NULL;
  }
  tg_tensor *co = ok ? tmp(&s, tg_stack(nd, coord, 1)) : NULL;                  /* (n, nd) */
  tg_tensor *sel = co ? nth_true(&s, m, size, &valid) : NULL;                   /* (size, n) */
  tg_tensor *out = sel ? tmp(&s, tg_matmul(tmp(&s, tg_cast(sel, TG_INT32)), co)) : NULL;  /* (size, nd) */
  tg_tensor *v2 = out ? tmp(&s, tg_reshape(valid, 2, (int64_t[]){size, 1})) : NULL;
  tg_tensor *r = v2 ? tmp(&s, tg_where_scalar(v2, out, fill_value)) : NULL;
  return tmps_end(&s, r ? tmp(&s, tg_cast(r, TG_INT32)) : NULL);
}

/* ---- setitem ---------------------------------------------------------------------------------------------- */

/* bool (1 x d, n, 1 x rest) of the positions of an axis of size n that the entry writes: inside [b0, b1) and on
 * its step (counted from the end that is read first) */
static tg_tensor *axis_written(tmps *s, const ent *e, int64_t n, int nd) {
  tg_dtype it = n > INT32_MAX ? TG_INT64 : TG_INT32;
  tg_tensor *ix = tmp(s, tg_arange(it, 0, (double)n, 1));
  tg_tensor *m = tmp(s, tg_mul(tmp(s, tg_ge(ix, tmp(s, tg_scalar(it, (double)e->b0)))),
                               tmp(s, tg_lt(ix, tmp(s, tg_scalar(it, (double)e->b1))))));
  if (e->st != 1) {
    tg_tensor *from = e->neg ? tmp(s, tg_sub(tmp(s, tg_scalar(it, (double)(e->b1 - 1))), ix))
                             : tmp(s, tg_sub_scalar(ix, (double)e->b0));
    tg_tensor *on = tmp(s, tg_eq(tmp(s, tg_mod(from, tmp(s, tg_scalar(it, (double)e->st)))), tmp(s, tg_scalar(it, 0))));
    m = tmp(s, tg_mul(m, on));
  }
  int64_t sh[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) sh[i] = i == e->axis ? n : 1;
  return tmp(s, tg_reshape(m, nd, sh));
}

/* the value of the view x with the tensor-indexed positions set from v (broadcast to the getitem result):
 * tinygrad's masked merge, a position hit twice taking the last (row-major) hit */
static tg_tensor *merge_advanced(tmps *s, tg_tensor *x, const parsed *p, tg_tensor *v) {
  int dims[TG_MAX_DIMS], nt = 0, pos = 0;
  tg_tensor *ts[TG_MAX_DIMS];
  for (int k = 0; k < p->n; k++) {
    if (p->e[k].kind == TG_INDEX_INT) continue;
    if (p->e[k].kind == TG_INDEX_TENSOR) { dims[nt] = pos; ts[nt++] = p->e[k].tensor; }
    pos++;
  }
  int nb, xn = TNDIM(x), d0 = dims[0];
  int64_t big[TG_MAX_DIMS], pre[TG_MAX_DIMS], res[TG_MAX_DIMS];
  if (!broadcast_indices(nt, ts, &nb, big)) return NULL;
  tg_tensor *mask = index_mask(s, x, nt, dims, ts, nb);
  if (!mask) return NULL;
  bool permuted = d0 != 0 && nt > 1 && dims[nt - 1] - d0 != nt - 1;
  /* the pre-reduce shape (x[:d0], big, x[d0:]), or (big, x) when the index axes went first */
  int m = 0, bs = permuted ? 0 : d0;
  for (int i = 0; i < xn + nb; i++) {
    int rel = i - bs;
    pre[m++] = rel >= 0 && rel < nb ? big[rel] : TSHAPE(x)[i < bs ? i : i - nb];
  }
  if (permuted) {
    int perm[TG_MAX_DIMS], k = 0;
    for (int i = 0; i < nb; i++) perm[k++] = d0 + i;
    for (int i = 0; i < d0; i++) perm[k++] = i;
    for (int i = d0 + nb; i < xn + nb; i++) perm[k++] = i;
    int64_t full[TG_MAX_DIMS];
    for (int i = 0; i < d0; i++) full[i] = TSHAPE(x)[i];
    for (int i = 0; i < nb; i++) full[d0 + i] = big[i];
    for (int i = d0; i < xn; i++) full[nb + i] = TSHAPE(x)[i];
    mask = tmp(s, tg_permute(tmp(s, tg_expand(mask, xn + nb, full)), xn + nb, perm));
  } else {
    mask = tmp(s, tg_expand(mask, xn + nb, pre));
  }
  /* v as the getitem result, then back in the pre-reduce layout (the indexed axes as 1) */
  int r = 0;
  for (int i = 0; i < xn + nb; i++) {
    bool indexed = false;
    for (int k = 0; k < nt; k++) indexed |= i == dims[k] + nb;
    if (!indexed) res[r++] = pre[i];
  }
  tg_tensor *vb = tmp(s, tg_expand(v, r, res));
  int64_t sh1[TG_MAX_DIMS];
  for (int i = 0; i < xn + nb; i++) {
    bool indexed = false;
    for (int k = 0; k < nt; k++) indexed |= i == dims[k] + nb;
    sh1[i] = indexed ? 1 : pre[i];
  }
  vb = tmp(s, tg_reshape(vb, xn + nb, sh1));
  if (nb == 0) return tmp(s, tg_where(mask, vb, x));  /* 0-d index tensors only: one hit at most */
  /* the last hit: the largest row-major position among big's, per written element */
  int64_t nbig = 1;
  for (int i = 0; i < nb; i++) nbig *= big[i];
  int64_t lsh[TG_MAX_DIMS];
  for (int i = 0; i < xn + nb; i++) lsh[i] = i >= bs && i < bs + nb ? big[i - bs] : 1;
  /* positions in float32 while exact: an upcast int32 max reduce returned INT32_MIN on the CPU (reported) */
  tg_dtype pd = nbig <= (1 << 24) ? TG_FLOAT32 : TG_INT32;
  tg_tensor *lin = tmp(s, tg_reshape(tmp(s, tg_arange(pd, 0, (double)nbig, 1)), xn + nb, lsh));
  tg_tensor *at = tmp(s, tg_where(mask, lin, tmp(s, tg_scalar(pd, -1))));
  int bax[TG_MAX_DIMS];
  for (int i = 0; i < nb; i++) bax[i] = bs + i;
  tg_tensor *last = tmp(s, tg_max(at, nb, bax, true));
  tg_tensor *pick = tmp(s, tg_mul(mask, tmp(s, tg_eq(lin, last))));
  tg_tensor *val = tmp(s, tg_cast(tmp(s, tg_sum(tmp(s, tg_where(pick, vb, tmp(s, tg_scalar(TDT(x), 0)))), nb, bax, false)), TDT(x)));
  tg_tensor *hit = tmp(s, tg_reshape(tmp(s, tg_ge(last, tmp(s, tg_scalar(pd, 0)))), TNDIM(val), TSHAPE(val)));
  return tmp(s, tg_where(hit, val, x));
}

static tg_status setitem(tg_tensor *t, int n, const tg_index *idx, tg_tensor *v) {
  const char *op = "tg_setitem";
  if (TDT(v) != TDT(t)) {
    tg_set_error(TG_ERR_ARG, "%s: the value is %s, the tensor %s (tinygrad requires the same dtype)", op,
                 tg_dtype_name(TDT(v)), tg_dtype_name(TDT(t)));
    return TG_ERR_ARG;
  }
  tmps s = TMPS(op);
  parsed p;
  if (!parse(&s, t, n, idx, &p)) return tmps_end(&s, NULL), tg_error_status();
  tg_tensor *x = basic_view(&s, t, &p), *vb = NULL;
  bool adv = false;
  for (int k = 0; k < p.n; k++) adv |= p.e[k].kind == TG_INDEX_TENSOR;
  if (x && adv) vb = merge_advanced(&s, x, &p, v);
  else if (x) vb = tmp(&s, tg_expand(v, TNDIM(x), TSHAPE(x)));
  int nd = TNDIM(t);
  /* vb (the view's shape) as one axis per input axis: ints as 1, None dropped */
  int64_t sh[TG_MAX_DIMS];
  int m = 0;
  for (int k = 0; k < p.n; k++)
    if (p.e[k].axis >= 0) sh[m++] = p.e[k].size;
  if (vb) vb = tmp(&s, tg_reshape(vb, nd, sh));
  tg_tensor *written = NULL;
  bool flip[TG_MAX_DIMS] = {false};
  int faxes[TG_MAX_DIMS], nf = 0;
  for (int k = 0; k < p.n && vb; k++) {
    const ent *e = &p.e[k];
    if (e->axis < 0) continue;
    int d = e->axis;
    if (e->st != 1 && e->size > 1) {  /* back to the covered range: st - 1 zeros after each element */
      int64_t sh2[TG_MAX_DIMS + 1], b[2 * (TG_MAX_DIMS + 1)];
      if (nd + 1 > TG_MAX_DIMS) {
        tg_set_error(TG_ERR_ARG, "%s: a step other than 1 or -1 needs a spare dimension", op);
        return tmps_end(&s, NULL), TG_ERR_ARG;
      }
      tg_tensor *u = tmp(&s, tg_unsqueeze(vb, d + 1));
      int64_t pads[2 * TG_MAX_DIMS] = {0};
      pads[2 * (d + 1) + 1] = e->st - 1;
      u = tmp(&s, tg_pad_axes(u, nd + 1, pads, 0));
      for (int i = 0, j = 0; i < nd; i++) sh2[j++] = i == d ? e->size * e->st : TSHAPE(vb)[i];
      u = tmp(&s, tg_reshape(u, nd, sh2));
      for (int i = 0; i < nd; i++) { b[2 * i] = 0; b[2 * i + 1] = sh2[i]; }
      b[2 * d + 1] = e->b1 - e->b0;
      vb = tmp(&s, tg_shrink(u, nd, b));
      if (!vb) break;
    }
    if (e->neg && !flip[d]) { flip[d] = true; faxes[nf++] = d; }
    tg_tensor *w = axis_written(&s, e, TSHAPE(t)[d], nd);
    written = written ? tmp(&s, tg_mul(written, w)) : w;
  }
  if (vb && nf) vb = tmp(&s, tg_flip(vb, nf, faxes));
  int64_t pads[2 * TG_MAX_DIMS] = {0};
  for (int k = 0; k < p.n; k++) {
    const ent *e = &p.e[k];
    if (e->axis < 0) continue;
    pads[2 * e->axis] = e->b0;
    pads[2 * e->axis + 1] = TSHAPE(t)[e->axis] - e->b1;
  }
  if (vb) vb = tmp(&s, tg_pad_axes(vb, nd, pads, 0));
  tg_tensor *merged = vb && written ? tmp(&s, tg_where(written, vb, t)) : vb;
  if (!merged) return tmps_end(&s, NULL), tg_error_status();
  tg_status st = tg_assign(t, merged);
  tmps_end(&s, t);  /* frees the intermediates; t is not among them */
  return st;
}

tg_status tg_setitem(tg_tensor *t, int n, const tg_index *idx, tg_tensor *value) {
  if (!t || !value) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_setitem: %s is NULL", t ? "value" : "t");
    return tg_error_status();
  }
  return setitem(t, n, idx, value);
}

tg_status tg_setitem_scalar(tg_tensor *t, int n, const tg_index *idx, double value) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_setitem_scalar: t is NULL");
    return tg_error_status();
  }
  tg_tensor *v = tg_scalar(TDT(t), value);
  if (!v) return tg_error_status();
  tg_status st = setitem(t, n, idx, v);
  tg_free(v);
  return st;
}
