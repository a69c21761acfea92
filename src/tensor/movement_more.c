/* movement_more.c — tinygrad's movement methods built on the primitive views of movement.c: roll, diagonal,
 * diag, unfold, repeat_interleave, unflatten, view, T, shrink_to, pad_to, chunk, split by size, meshgrid, and
 * the pad modes reflect, replicate and circular. Each is a composition of public movement ops (shrink, pad,
 * reshape, expand, permute, flip, cat), so it stays a view where tinygrad's is one, fuses, and gets its
 * gradient from the primitives' rules. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/compose.h"

#define SB 256

/* (0, size) on every axis of x */
static void full_bounds(const tg_tensor *x, int64_t *b) {
  for (int i = 0; i < TNDIM(x); i++) { b[2 * i] = 0; b[2 * i + 1] = TSHAPE(x)[i]; }
}

/* x with axis ax as k copies of itself one after another (k >= 1): reshape, expand, reshape, never past
 * x's dims + 1 (tg_repeat over every axis needs twice the dims) */
static tg_tensor *tile_axis(tmps *s, tg_tensor *x, int ax, int64_t k) {
  if (!x || k == 1) return x;
  int nd = TNDIM(x);
  if (nd + 1 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "%s: a tensor of %d dimensions has no spare dimension to repeat an axis in", s->op, nd);
    return NULL;
  }
  int64_t sh[TG_MAX_DIMS], ex[TG_MAX_DIMS], fin[TG_MAX_DIMS];
  for (int i = 0, j = 0; i < nd; i++) {
    if (i == ax) { sh[j] = 1; ex[j++] = k; }
    sh[j] = ex[j] = TSHAPE(x)[i];
    j++;
  }
  for (int i = 0; i < nd; i++) fin[i] = TSHAPE(x)[i] * (i == ax ? k : 1);
  x = tmp(s, tg_reshape(x, nd + 1, sh));
  x = tmp(s, tg_expand(x, nd + 1, ex));
  return tmp(s, tg_reshape(x, nd, fin));
}

/* ---- roll ---------------------------------------------------------------------------------------------- */

tg_tensor *tg_roll(tg_tensor *t, int nshifts, const int64_t *shifts, int ndims, const int *dims) {
  if (!t) return NULL;
  if (nshifts < 0 || ndims < 0 || (nshifts && !shifts) || (ndims && !dims)) {
    tg_set_error(TG_ERR_ARG, "tg_roll: bad counts (%d shifts, %d dims)", nshifts, ndims);
    return NULL;
  }
  if (ndims == 0) {  /* tinygrad: the flattened tensor along its one axis, then the old shape */
    if (nshifts != 1) {
      tg_set_error(TG_ERR_ARG, "tg_roll: without dims, one shift is rolled over the flattened tensor (got %d)", nshifts);
      return NULL;
    }
    tmps s = TMPS("tg_roll");
    tg_tensor *f = tmp(&s, tg_flatten(t, 0, -1));
    f = tmp(&s, tg_roll(f, 1, shifts, 1, (int[]){0}));
    return tmps_end(&s, tmp(&s, tg_reshape(f, TNDIM(t), TSHAPE(t))));
  }
  if (nshifts != ndims) {
    tg_set_error(TG_ERR_ARG, "tg_roll: %d shifts for %d dims", nshifts, ndims);
    return NULL;
  }
  int64_t by[TG_MAX_DIMS] = {0};
  int nd = TNDIM(t);
  for (int k = 0; k < ndims; k++) {
    int a = norm_axis("tg_roll", dims[k], nd);
    if (a < 0) return NULL;
    int64_t n = TSHAPE(t)[a];
    if (n) by[a] = (by[a] + (shifts[k] % n + n) % n) % n;  /* a repeated axis rolls by the sum, as PyTorch */
  }
  tmps s = TMPS("tg_roll");
  tg_tensor *x = t;
  int64_t b[2 * TG_MAX_DIMS];
  full_bounds(t, b);
  for (int a = 0; a < nd; a++)
    if (by[a]) {
      /* two copies of the axis; the window [n - shift, 2n - shift) is the rolled axis */
      x = tile_axis(&s, x, a, 2);
      b[2 * a] = TSHAPE(t)[a] - by[a];
      b[2 * a + 1] = 2 * TSHAPE(t)[a] - by[a];
    }
  if (x == t) return tmps_end(&s, tmp(&s, tg_reshape(t, nd, TSHAPE(t))));
  return tmps_end(&s, tmp(&s, tg_shrink(x, nd, b)));
}

/* ---- diagonal, diag ------------------------------------------------------------------------------------- */

tg_tensor *tg_diagonal(tg_tensor *t, int64_t offset, int dim1, int dim2) {
  if (!t) return NULL;
  int nd = TNDIM(t);
  int a = norm_axis("tg_diagonal", dim1, nd), b = a < 0 ? -1 : norm_axis("tg_diagonal", dim2, nd);
  if (a < 0 || b < 0) return NULL;
  if (a == b) {
    tg_set_error(TG_ERR_ARG, "tg_diagonal: dim1 and dim2 are the same axis (%d)", a);
    return NULL;
  }
  tmps s = TMPS("tg_diagonal");
  /* the two axes last, (..., R, C) */
  int perm[TG_MAX_DIMS], k = 0;
  for (int i = 0; i < nd; i++)
    if (i != a && i != b) perm[k++] = i;
  perm[k++] = a;
  perm[k++] = b;
  tg_tensor *x = tmp(&s, tg_permute(t, nd, perm));
  int64_t r = TSHAPE(x)[nd - 2], c = TSHAPE(x)[nd - 1], bnd[2 * TG_MAX_DIMS], sh[TG_MAX_DIMS];
  /* the diagonal `offset` starts at (0, offset) or (-offset, 0); past the edge it is empty */
  int64_t r0 = offset < 0 ? (-offset < r ? -offset : r) : 0, c0 = offset > 0 ? (offset < c ? offset : c) : 0;
  int64_t d = r - r0 < c - c0 ? r - r0 : c - c0;
  full_bounds(x, bnd);
  bnd[2 * (nd - 2)] = r0;
  bnd[2 * (nd - 2) + 1] = r0 + d;
  bnd[2 * (nd - 1)] = c0;
  bnd[2 * (nd - 1) + 1] = c0 + d;
  x = tmp(&s, tg_shrink(x, nd, bnd));  /* (..., d, d) */
  memcpy(sh, TSHAPE(x), sizeof(int64_t) * (size_t)nd);
  if (d == 0) {
    sh[nd - 2] = 0;
    return tmps_end(&s, tmp(&s, tg_reshape(x, nd - 1, sh)));
  }
  /* tinygrad's trick: the d*d square flattened and padded to d*(d+1) is (d, d+1) whose first column is
   * the diagonal */
  x = tmp(&s, tg_flatten(x, nd - 2, nd - 1));
  int64_t p[2 * TG_MAX_DIMS] = {0};
  p[2 * (nd - 2) + 1] = d;
  x = tmp(&s, tg_pad_axes(x, nd - 1, p, 0));
  sh[nd - 2] = d;
  sh[nd - 1] = d + 1;
  x = tmp(&s, tg_reshape(x, nd, sh));
  full_bounds(x, bnd);
  bnd[2 * (nd - 1) + 1] = 1;
  x = tmp(&s, tg_shrink(x, nd, bnd));
  return tmps_end(&s, tmp(&s, tg_reshape(x, nd - 1, sh)));
}

tg_tensor *tg_diag(tg_tensor *t, int64_t offset) {
  if (!t) return NULL;
  if (TNDIM(t) == 2) return tg_diagonal(t, offset, 0, 1);
  if (TNDIM(t) != 1) {
    tg_set_error(TG_ERR_ARG, "tg_diag: expects a 1-d or 2-d tensor, got %d dimensions", TNDIM(t));
    return NULL;
  }
  int64_t n = TSHAPE(t)[0], m, ao = offset < 0 ? (offset == INT64_MIN ? INT64_MAX : -offset) : offset;
  if (!size_add(n, ao, &m) || !size_mul(m, m, &(int64_t){0})) {
    tg_set_error(TG_ERR_ARG, "tg_diag: offset %lld of a vector of %lld makes a matrix past 2^60 elements",
                 (long long)offset, (long long)n);
    return NULL;
  }
  tmps s = TMPS("tg_diag");
  /* (n, 1) padded to (n, n+1), flattened, cut to n*n, as (n, n): the vector on the main diagonal */
  tg_tensor *x = tmp(&s, tg_unsqueeze(t, -1));
  x = tmp(&s, tg_pad_axes(x, 2, (int64_t[]){0, 0, 0, n}, 0));
  x = tmp(&s, tg_flatten(x, 0, -1));
  x = tmp(&s, tg_shrink(x, 1, (int64_t[]){0, n * n}));
  x = tmp(&s, tg_reshape(x, 2, (int64_t[]){n, n}));
  /* offset k > 0: k columns in front and k rows below; k < 0: rows above and columns behind */
  int64_t p[4] = {offset < 0 ? ao : 0, offset > 0 ? ao : 0, offset > 0 ? ao : 0, offset < 0 ? ao : 0};
  return tmps_end(&s, tmp(&s, tg_pad_axes(x, 2, p, 0)));
}

/* ---- unfold, repeat_interleave, unflatten, view, T ---------------------------------------------------------- */

tg_tensor *tg_unfold(tg_tensor *t, int dim, int64_t size, int64_t step) {
  if (!t) return NULL;
  int nd = TNDIM(t);
  int ax = norm_axis("tg_unfold", dim, nd);
  if (ax < 0) return NULL;
  if (size < 0 || step <= 0 || size > TSHAPE(t)[ax] || nd + 1 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_unfold: size %lld and step %lld over axis %d of size %lld (need 0 <= size <= the size, "
                 "step > 0)", (long long)size, (long long)step, ax, (long long)TSHAPE(t)[ax]);
    return NULL;
  }
  int64_t n = TSHAPE(t)[ax], o = (n - size) / step + 1, sh[TG_MAX_DIMS];
  tmps s = TMPS("tg_unfold");
  for (int i = 0; i < nd; i++) sh[i] = i == ax ? o : TSHAPE(t)[i];
  sh[nd] = size;
  if (size == 0) {  /* windows of nothing: an empty view of t, so that t still gets a (zero) gradient */
    int64_t b[2 * TG_MAX_DIMS];
    full_bounds(t, b);
    b[2 * ax + 1] = 0;
    return tmps_end(&s, tmp(&s, tg_reshape(tmp(&s, tg_shrink(t, nd, b)), nd + 1, sh)));
  }
  tg_tensor *x = tmp(&s, tg_transpose(t, ax, -1));
  int64_t one = 1;
  x = pool_windows(&s, x, 1, &size, &step, &one);  /* (..., o, size): the swapped axis' windows */
  if (!x) return tmps_end(&s, NULL);
  int perm[TG_MAX_DIMS];
  for (int i = 0; i <= nd; i++) perm[i] = i;
  perm[ax] = nd - 1;
  perm[nd - 1] = ax;
  return tmps_end(&s, tmp(&s, tg_permute(x, nd + 1, perm)));
}

tg_tensor *tg_repeat_interleave(tg_tensor *t, int64_t repeats, int dim) {
  if (!t) return NULL;
  if (repeats < 0) {
    tg_set_error(TG_ERR_ARG, "tg_repeat_interleave: repeats must be >= 0, got %lld", (long long)repeats);
    return NULL;
  }
  tmps s = TMPS("tg_repeat_interleave");
  tg_tensor *x = t;
  int ax = 0;
  if (dim == TG_ALL) x = tmp(&s, tg_flatten(t, 0, -1));
  else if ((ax = norm_axis("tg_repeat_interleave", dim, TNDIM(t))) < 0) return tmps_end(&s, NULL);
  if (!x) return tmps_end(&s, NULL);
  int nd = TNDIM(x);
  if (nd + 1 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_repeat_interleave: a tensor of %d dimensions has no spare dimension", nd);
    return tmps_end(&s, NULL);
  }
  int64_t sh[TG_MAX_DIMS], ex[TG_MAX_DIMS], fin[TG_MAX_DIMS];
  for (int i = 0, j = 0; i < nd; i++) {
    sh[j] = ex[j] = TSHAPE(x)[i];
    j++;
    if (i == ax) { sh[j] = 1; ex[j++] = repeats; }
    fin[i] = TSHAPE(x)[i];
  }
  if (!size_mul(fin[ax], repeats, &fin[ax])) {
    tg_set_error(TG_ERR_ARG, "tg_repeat_interleave: %lld repeats of an axis of %lld are past 2^60", (long long)repeats,
                 (long long)TSHAPE(x)[ax]);
    return tmps_end(&s, NULL);
  }
  x = tmp(&s, tg_reshape(x, nd + 1, sh));
  x = tmp(&s, tg_expand(x, nd + 1, ex));
  return tmps_end(&s, tmp(&s, tg_reshape(x, nd, fin)));
}

tg_tensor *tg_unflatten(tg_tensor *t, int dim, int nsizes, const int64_t *sizes) {
  if (!t) return NULL;
  int nd = TNDIM(t), ax = norm_axis("tg_unflatten", dim, nd);
  if (ax < 0) return NULL;
  if (nsizes < 0 || (nsizes && !sizes) || nd - 1 + nsizes > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_unflatten: %d sizes for axis %d of a tensor of %d dimensions", nsizes, ax, nd);
    return NULL;
  }
  int64_t sh[TG_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < nd; i++) {
    if (i != ax) { sh[k++] = TSHAPE(t)[i]; continue; }
    for (int j = 0; j < nsizes; j++) sh[k++] = sizes[j];
  }
  /* an inferred -1 must come from the unflattened axis alone: check the sizes against it first */
  int64_t known = 1;
  int infer = 0;
  bool ok = true;
  for (int j = 0; j < nsizes && ok; j++) {
    if (sizes[j] == -1) infer++;
    else ok = sizes[j] >= 0 && size_mul(known, sizes[j], &known);
  }
  int64_t n = TSHAPE(t)[ax];
  ok = ok && infer <= 1 && (infer ? (known ? n % known == 0 : n == 0) : known == n);
  if (!ok) {
    char a[SB], b[SB];
    tg_set_error(TG_ERR_ARG, "tg_unflatten: sizes %s do not fit axis %d of shape %s", shape_str(b, sizeof b, nsizes, sizes), ax,
                 shape_str(a, sizeof a, nd, TSHAPE(t)));
    return NULL;
  }
  if (infer && known == 0) {  /* (0) as (-1, 0): -1 cannot be inferred */
    tg_set_error(TG_ERR_ARG, "tg_unflatten: cannot infer -1 next to a size 0");
    return NULL;
  }
  return tg_reshape(t, k, sh);
}

tg_tensor *tg_view(tg_tensor *t, int ndim, const int64_t *shape) { return tg_reshape(t, ndim, shape); }

tg_tensor *tg_T(tg_tensor *t) { return tg_transpose(t, 1, 0); }

/* ---- shrink_to, pad_to ---------------------------------------------------------------------------------- */

tg_tensor *tg_shrink_to(tg_tensor *t, int ndim, const int64_t *shape) {
  if (!t) return NULL;
  if (ndim != TNDIM(t) || (ndim && !shape)) {
    tg_set_error(TG_ERR_ARG, "tg_shrink_to: %d sizes for a tensor of %d dimensions", ndim, TNDIM(t));
    return NULL;
  }
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) { b[2 * i] = 0; b[2 * i + 1] = shape[i] == -1 ? TSHAPE(t)[i] : shape[i]; }
  return tg_shrink(t, ndim, b);
}

tg_tensor *tg_pad_to(tg_tensor *t, int ndim, const int64_t *shape, double value) {
  if (!t) return NULL;
  if (ndim != TNDIM(t) || (ndim && !shape)) {
    tg_set_error(TG_ERR_ARG, "tg_pad_to: %d sizes for a tensor of %d dimensions", ndim, TNDIM(t));
    return NULL;
  }
  int64_t p[2 * TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int64_t want = shape[i] == -1 ? TSHAPE(t)[i] : shape[i];
    if (want < TSHAPE(t)[i]) {
      char a[SB];
      tg_set_error(TG_ERR_ARG, "tg_pad_to: size %lld is smaller than axis %d of shape %s", (long long)shape[i], i,
                   shape_str(a, sizeof a, ndim, TSHAPE(t)));
      return NULL;
    }
    p[2 * i] = 0;
    p[2 * i + 1] = want - TSHAPE(t)[i];
  }
  return tg_pad_axes(t, ndim, p, value);
}

/* ---- chunk, split by size, meshgrid ----------------------------------------------------------------------- */

/* the pieces of tinygrad's split(int): size each, the last one shorter; an empty axis gives one empty piece */
static tg_status split_by(const char *op, tg_tensor *t, int64_t size, int64_t count, int ax, int cap, int *n,
                          tg_tensor **out) {
  if (count > cap) {
    tg_set_error(TG_ERR_ARG, "%s: %lld pieces do not fit in out (room for %d)", op, (long long)count, cap);
    return TG_ERR_ARG;
  }
  int64_t *sizes = mem_alloc((size_t)(count ? count : 1) * sizeof *sizes), len = TSHAPE(t)[ax];
  if (!sizes) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
    return TG_ERR_NOMEM;
  }
  for (int64_t i = 0; i < count; i++) sizes[i] = len - i * size < size ? len - i * size : size;
  tg_status st = tg_split(t, (int)count, sizes, ax, out);
  free(sizes);
  if (st == TG_OK && n) *n = (int)count;
  return st;
}

tg_status tg_split_size(tg_tensor *t, int64_t size, int axis, int cap, int *n, tg_tensor **out) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_split_size: tensor is NULL");
    return tg_error_status();
  }
  if (!out || cap < 0) {
    tg_set_error(TG_ERR_ARG, "tg_split_size: %s", out ? "negative capacity" : "out is NULL");
    return TG_ERR_ARG;
  }
  int ax = norm_axis("tg_split_size", axis, TNDIM(t));
  if (ax < 0) return TG_ERR_ARG;
  int64_t len = TSHAPE(t)[ax];
  if (size <= 0 && len > 0) {
    tg_set_error(TG_ERR_ARG, "tg_split_size: pieces of size %lld cannot split an axis of %lld", (long long)size, (long long)len);
    return TG_ERR_ARG;
  }
  if (len == 0) return split_by("tg_split_size", t, 0, 1, ax, cap, n, out);
  return split_by("tg_split_size", t, size, ceildiv(len, size), ax, cap, n, out);
}

tg_status tg_chunk(tg_tensor *t, int chunks, int axis, int *n, tg_tensor **out) {
  if (!t) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_chunk: tensor is NULL");
    return tg_error_status();
  }
  if (!out || chunks <= 0) {
    tg_set_error(TG_ERR_ARG, "tg_chunk: %s", out ? "chunks must be > 0" : "out is NULL");
    return TG_ERR_ARG;
  }
  int ax = norm_axis("tg_chunk", axis, TNDIM(t));
  if (ax < 0) return TG_ERR_ARG;
  int64_t len = TSHAPE(t)[ax];
  if (len == 0) return split_by("tg_chunk", t, 0, chunks, ax, chunks, n, out);  /* chunks empty pieces */
  int64_t size = ceildiv(len, chunks);
  return split_by("tg_chunk", t, size, ceildiv(len, size), ax, chunks, n, out);
}

tg_status tg_meshgrid(int n, tg_tensor *const *ts, bool xy, tg_tensor **out) {
  if (n <= 0 || !ts || !out) {
    tg_set_error(TG_ERR_ARG, "tg_meshgrid: %s", n <= 0 ? "no tensors" : "ts or out is NULL");
    return TG_ERR_ARG;
  }
  for (int i = 0; i < n; i++)
    if (!ts[i]) {
      if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_meshgrid: tensor %d is NULL", i);
      return tg_error_status();
    }
  if (n == 1) {  /* tinygrad returns the one tensor as it is */
    out[0] = tg_reshape(ts[0], TNDIM(ts[0]), TSHAPE(ts[0]));
    return out[0] ? TG_OK : tg_error_status();
  }
  int64_t shape[TG_MAX_DIMS];
  bool ok = n <= TG_MAX_DIMS;
  for (int i = 0; i < n && ok; i++) {
    ok = TNDIM(ts[i]) <= 1;
    int b = xy && i < 2 ? 1 - i : i;  /* xy: the first two grids swap places */
    shape[b] = ok ? tg_numel(ts[i]) : 0;
  }
  if (!ok) {
    tg_set_error(TG_ERR_ARG, "tg_meshgrid: %d tensors (at most %d), each 0-d or 1-d", n, TG_MAX_DIMS);
    return TG_ERR_ARG;
  }
  for (int i = 0; i < n; i++) out[i] = NULL;
  for (int i = 0; i < n; i++) {
    int b = xy && i < 2 ? 1 - i : i;
    int64_t sh[TG_MAX_DIMS];
    for (int j = 0; j < n; j++) sh[j] = j == b ? shape[b] : 1;
    tg_tensor *r = tg_reshape(ts[i], n, sh);
    out[i] = tg_expand(r, n, shape);
    tg_free(r);
    if (!out[i]) {
      for (int j = 0; j < i; j++) { tg_free(out[j]); out[j] = NULL; }
      return tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
    }
  }
  return TG_OK;
}

/* ---- pad modes -------------------------------------------------------------------------------------------- */

/* reflect or replicate: each axis gets its mirrored or repeated edges (positive pads), then negative pads
 * crop the result, so a crop may eat into the new edges as tinygrad's does */
static tg_tensor *pad_edges(tmps *s, tg_tensor *x, const int64_t *pairs, bool reflect) {
  int nd = TNDIM(x);
  for (int d = 0; d < nd && x; d++) {
    int64_t pb = pairs[2 * d] > 0 ? pairs[2 * d] : 0, pa = pairs[2 * d + 1] > 0 ? pairs[2 * d + 1] : 0, n = TSHAPE(x)[d];
    if (!pb && !pa) continue;
    if (reflect ? (pb >= n || pa >= n) : n == 0) {
      if (reflect)
        tg_set_error(TG_ERR_ARG, "%s: reflect padding (%lld, %lld) must be less than the size %lld of axis %d", s->op,
                     (long long)pb, (long long)pa, (long long)n, d);
      else
        tg_set_error(TG_ERR_ARG, "%s: replicate padding (%lld, %lld) of axis %d, which is empty", s->op, (long long)pb,
                     (long long)pa, d);
      return NULL;
    }
    tg_tensor *ord[3];
    int k = 0;
    tg_slice sl[TG_MAX_DIMS];
    for (int i = 0; i < nd; i++) sl[i] = (tg_slice){0, 0, 1, true};
    int64_t b[2 * TG_MAX_DIMS], sh[TG_MAX_DIMS];
    for (int side = 0; side < 2; side++) {  /* [before], x, [after] */
      int64_t p = side ? pa : pb;
      tg_tensor *piece = NULL;
      if (side) ord[k++] = x;
      if (!p) continue;
      if (reflect) {  /* x[p:0:-1] before, x[n-2:n-2-p:-1] after: the edge element itself is not repeated */
        sl[d] = side ? (tg_slice){n - 2, n - 2 - p, -1, false} : (tg_slice){p, 0, -1, false};
        if (side && n - 2 - p < 0) sl[d].stop = TG_END;
        piece = tmp(s, tg_slice_axes(x, nd, sl));
      } else {  /* the edge element expanded p times */
        full_bounds(x, b);
        b[2 * d] = side ? n - 1 : 0;
        b[2 * d + 1] = side ? n : 1;
        memcpy(sh, TSHAPE(x), sizeof(int64_t) * (size_t)nd);
        sh[d] = p;
        piece = tmp(s, tg_expand(tmp(s, tg_shrink(x, nd, b)), nd, sh));
      }
      if (!piece) return NULL;
      ord[k++] = piece;
    }
    x = tmp(s, tg_cat(k, ord, d));
  }
  if (!x) return NULL;
  int64_t b[2 * TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int64_t n = TSHAPE(x)[d], pb = pairs[2 * d], pa = pairs[2 * d + 1];
    b[2 * d] = pb < 0 ? -pb : 0;
    b[2 * d + 1] = pa < 0 ? n + pa : n;
    if (b[2 * d] > n || b[2 * d + 1] < b[2 * d]) {
      tg_set_error(TG_ERR_ARG, "%s: padding (%lld, %lld) crops more than the %lld elements of axis %d", s->op, (long long)pb,
                   (long long)pa, (long long)n, d);
      return NULL;
    }
  }
  return tmp(s, tg_shrink(x, nd, b));
}

/* circular: negative pads crop first, then each axis wraps around once at most */
static tg_tensor *pad_circular(tmps *s, tg_tensor *x, const int64_t *pairs) {
  int nd = TNDIM(x);
  int64_t p[2 * TG_MAX_DIMS] = {0};
  for (int i = 0; i < 2 * nd; i++) p[i] = pairs[i] < 0 ? pairs[i] : 0;
  x = tmp(s, tg_pad_axes(x, nd, p, 0));  /* only crops */
  if (!x) return NULL;
  int64_t b[2 * TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int64_t pb = pairs[2 * d] > 0 ? pairs[2 * d] : 0, pa = pairs[2 * d + 1] > 0 ? pairs[2 * d + 1] : 0, n = TSHAPE(x)[d];
    if (pb > n || pa > n) {
      tg_set_error(TG_ERR_ARG, "%s: circular padding (%lld, %lld) wraps around axis %d (size %lld) more than once", s->op,
                   (long long)pb, (long long)pa, d, (long long)n);
      return NULL;
    }
    int64_t k = 1 + (pb > 0) + (pa > 0);
    x = tile_axis(s, x, d, k);
    if (!x) return NULL;
    b[2 * d] = pb ? n - pb : 0;
    b[2 * d + 1] = pa ? k * n - n + pa : k * n;
  }
  return tmp(s, tg_shrink(x, nd, b));
}

tg_tensor *tg_pad_axes_mode(tg_tensor *t, int ndim, const int64_t *pairs, tg_padding_mode mode, double value) {
  if (!t) return NULL;
  if (mode == TG_PAD_CONSTANT) return tg_pad_axes(t, ndim, pairs, value);
  if (mode != TG_PAD_REFLECT && mode != TG_PAD_REPLICATE && mode != TG_PAD_CIRCULAR) {
    tg_set_error(TG_ERR_ARG, "tg_pad: mode %d is not one of constant, reflect, replicate, circular", (int)mode);
    return NULL;
  }
  if (ndim != TNDIM(t) || (ndim && !pairs)) {
    char a[SB];
    tg_set_error(TG_ERR_ARG, "tg_pad: %d padded axes for a tensor of shape %s", ndim, shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)));
    return NULL;
  }
  for (int i = 0; i < 2 * ndim; i++)
    if (pairs[i] > ((int64_t)1 << 60) || pairs[i] < -((int64_t)1 << 60)) {
      tg_set_error(TG_ERR_ARG, "tg_pad: padding %lld of axis %d is past 2^60", (long long)pairs[i], i / 2);
      return NULL;
    }
  tmps s = TMPS("tg_pad");
  tg_tensor *r = mode == TG_PAD_CIRCULAR ? pad_circular(&s, t, pairs) : pad_edges(&s, t, pairs, mode == TG_PAD_REFLECT);
  return tmps_end(&s, r);
}

tg_tensor *tg_pad_mode(tg_tensor *t, int npads, const int64_t *pads, tg_padding_mode mode, double value) {
  if (!t) return NULL;
  int nd = TNDIM(t);
  if (npads < 0 || npads % 2 || npads > 2 * nd || (npads && !pads)) {
    char a[SB];
    tg_set_error(TG_ERR_ARG, "tg_pad: %d padding values for a tensor of shape %s: expected an even count up to %d (last axis first)",
                 npads, shape_str(a, sizeof a, nd, TSHAPE(t)), 2 * nd);
    return NULL;
  }
  int64_t pairs[2 * TG_MAX_DIMS] = {0};
  for (int k = 0; k < npads / 2; k++) {
    pairs[2 * (nd - 1 - k)] = pads[2 * k];
    pairs[2 * (nd - 1 - k) + 1] = pads[2 * k + 1];
  }
  return tg_pad_axes_mode(t, nd, pairs, mode, value);
}
