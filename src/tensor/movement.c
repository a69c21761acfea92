/* movement.c — reshape, permute, expand, pad, shrink, flip and what tinygrad builds on them (transpose,
 * flatten, squeeze, slicing with steps, cat, stack, split, repeat). All are views: the scheduler turns
 * them into index arithmetic, never into copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

#define SHAPE_BUF 256

static bool check_shape(const char *op, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "%s: %d dimensions, expected 0..%d", op, ndim, TG_MAX_DIMS);
    return false;
  }
  if (ndim && !shape) {
    tg_set_error(TG_ERR_ARG, "%s: shape is NULL", op);
    return false;
  }
  return true;
}

tg_tensor *tg_reshape(tg_tensor *t, int ndim, const int64_t *shape) {
  if (!t || !check_shape("tg_reshape", ndim, shape)) return NULL;
  int64_t s[TG_MAX_DIMS] = {0}, known = 1;
  int infer = -1;
  for (int i = 0; i < ndim; i++) {
    s[i] = shape[i] == -1 && infer < 0 ? 1 : shape[i];
    if (shape[i] == -1 && infer < 0) infer = i;
    else if (shape[i] < 0) {
      char b[SHAPE_BUF];
      tg_set_error(TG_ERR_ARG, "tg_reshape: bad size %lld in shape %s", (long long)shape[i], shape_str(b, sizeof b, ndim, shape));
      return NULL;
    }
  }
  if (!shape_check("tg_reshape", ndim, s)) return NULL;
  shape_numel(ndim, s, &known);
  int64_t n = uop_numel(t->u), m = known;
  if (infer >= 0) m = (s[infer] = known ? n / known : 0) * known;
  if (m != n) {
    char a[SHAPE_BUF], b[SHAPE_BUF];
    tg_set_error(TG_ERR_ARG, "tg_reshape: cannot reshape a tensor of shape %s (%lld elements) to %s (%lld elements)",
                 shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)), (long long)n, shape_str(b, sizeof b, ndim, shape),
                 (long long)m);
    return NULL;
  }
  return tensor_new(mk_reshape(t->u, ndim, s));
}

tg_tensor *tg_permute(tg_tensor *t, int ndim, const int *order) {
  if (!t) return NULL;
  char a[SHAPE_BUF];
  if (ndim != TNDIM(t) || (ndim && !order)) {
    tg_set_error(TG_ERR_ARG, "tg_permute: %d axes given for a tensor of shape %s", ndim, shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)));
    return NULL;
  }
  int o[TG_MAX_DIMS];
  bool seen[TG_MAX_DIMS] = {0};
  for (int i = 0; i < ndim; i++) {
    int ax = order[i] < 0 ? order[i] + ndim : order[i];
    if (ax < 0 || ax >= ndim || seen[ax]) {
      tg_set_error(TG_ERR_ARG, "tg_permute: axis %d %s for a tensor of shape %s", order[i],
                   ax < 0 || ax >= ndim ? "is out of range" : "is repeated", shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)));
      return NULL;
    }
    seen[ax] = true;
    o[i] = ax;
  }
  return tensor_new(mk_permute(t->u, o));
}

tg_tensor *tg_expand(tg_tensor *t, int ndim, const int64_t *shape) {
  if (!t || !check_shape("tg_expand", ndim, shape)) return NULL;
  char a[SHAPE_BUF], b[SHAPE_BUF];
  int xn = TNDIM(t);
  if (ndim < xn) goto bad;
  int64_t ones[TG_MAX_DIMS], s[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int j = i - (ndim - xn);
    ones[i] = j >= 0 ? TSHAPE(t)[j] : 1;
    s[i] = shape[i] == -1 ? ones[i] : shape[i];
    if (s[i] < 0 || (ones[i] != s[i] && ones[i] != 1)) goto bad;
  }
  if (!shape_check("tg_expand", ndim, s)) return NULL;
  return tensor_new(mk_expand(mk_reshape(t->u, ndim, ones), ndim, s));
bad:
  tg_set_error(TG_ERR_ARG, "tg_expand: cannot expand shape %s to %s", shape_str(a, sizeof a, xn, TSHAPE(t)),
               shape_str(b, sizeof b, ndim, shape));
  return NULL;
}

tg_tensor *tg_pad_axes(tg_tensor *t, int ndim, const int64_t *pairs, double value) {
  if (!t) return NULL;
  char a[SHAPE_BUF];
  if (ndim != TNDIM(t) || (ndim && !pairs)) {
    tg_set_error(TG_ERR_ARG, "tg_pad: %d padded axes for a tensor of shape %s", ndim, shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)));
    return NULL;
  }
  /* negative values crop first (a shrink), then the rest pads */
  int64_t crop[2 * TG_MAX_DIMS], pads[2 * TG_MAX_DIMS];
  bool cropped = false;
  for (int i = 0; i < ndim; i++) {
    int64_t pb = pairs[2 * i], pa = pairs[2 * i + 1], n = TSHAPE(t)[i];
    int64_t cb = pb < 0 ? (pb == INT64_MIN ? INT64_MAX : -pb) : 0, ca = pa < 0 ? (pa == INT64_MIN ? INT64_MAX : -pa) : 0;
    if (cb > n || ca > n - cb) {
      tg_set_error(TG_ERR_ARG, "tg_pad: padding (%lld, %lld) crops more than the %lld elements of axis %d of shape %s",
                   (long long)pb, (long long)pa, (long long)n, i, shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)));
      return NULL;
    }
    int64_t kept = n - cb - ca, grow_b = pb > 0 ? pb : 0, grow_a = pa > 0 ? pa : 0, size;
    if (!size_add(kept, grow_b, &size) || !size_add(size, grow_a, &size)) {
      tg_set_error(TG_ERR_ARG, "tg_pad: padding (%lld, %lld) of axis %d makes a size past 2^60", (long long)pb, (long long)pa, i);
      return NULL;
    }
    crop[2 * i] = cb;
    crop[2 * i + 1] = n - ca;
    pads[2 * i] = grow_b;
    pads[2 * i + 1] = grow_a;
    cropped |= cb || ca;
  }
  uop *u = cropped ? mk_shrink(t->u, crop) : t->u;
  uop *p = mk_pad(u, pads);
  if (value != 0 && p != u && p) {
    uop *mask = mk_pad(mk_const(TG_BOOL, 1, u->ndim, u->shape), pads);
    uop *v = mk_const(TDT(t), value, p->ndim, p->shape);
    uop *s[3] = {mask, p, v};
    p = mk_alu(OP_WHERE, TDT(t), 3, s);
  }
  return tensor_new(p);
}

tg_tensor *tg_pad(tg_tensor *t, int npads, const int64_t *pads, double value) {
  if (!t) return NULL;
  char a[SHAPE_BUF];
  int nd = TNDIM(t);
  if (npads < 0 || npads % 2 || npads > 2 * nd || (npads && !pads)) {
    tg_set_error(TG_ERR_ARG, "tg_pad: %d padding values for a tensor of shape %s: expected an even count up to %d (last axis first)",
                 npads, shape_str(a, sizeof a, nd, TSHAPE(t)), 2 * nd);
    return NULL;
  }
  int64_t pairs[2 * TG_MAX_DIMS] = {0};
  for (int k = 0; k < npads / 2; k++) {  /* pads[2k], pads[2k+1]: axis nd-1-k */
    pairs[2 * (nd - 1 - k)] = pads[2 * k];
    pairs[2 * (nd - 1 - k) + 1] = pads[2 * k + 1];
  }
  return tg_pad_axes(t, nd, pairs, value);
}

tg_tensor *tg_shrink(tg_tensor *t, int ndim, const int64_t *bounds) {
  if (!t) return NULL;
  char a[SHAPE_BUF];
  if (ndim != TNDIM(t) || (ndim && !bounds)) {
    tg_set_error(TG_ERR_ARG, "tg_shrink: %d axes given for a tensor of shape %s", ndim, shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)));
    return NULL;
  }
  for (int i = 0; i < ndim; i++)
    if (bounds[2 * i] < 0 || bounds[2 * i] > bounds[2 * i + 1] || bounds[2 * i + 1] > TSHAPE(t)[i]) {
      tg_set_error(TG_ERR_ARG, "tg_shrink: range [%lld, %lld) out of bounds for axis %d of shape %s",
                   (long long)bounds[2 * i], (long long)bounds[2 * i + 1], i, shape_str(a, sizeof a, TNDIM(t), TSHAPE(t)));
      return NULL;
    }
  return tensor_new(mk_shrink(t->u, bounds));
}

tg_tensor *tg_flip(tg_tensor *t, int naxes, const int *axes) {
  if (!t) return NULL;
  bool f[TG_MAX_DIMS] = {0};
  for (int i = 0; i < naxes; i++) {
    int a = norm_axis("tg_flip", axes[i], TNDIM(t));
    if (a < 0) return NULL;
    if (f[a]) {
      tg_set_error(TG_ERR_ARG, "tg_flip: axis %d is repeated", axes[i]);
      return NULL;
    }
    f[a] = true;
  }
  return tensor_new(mk_flip(t->u, f));
}

tg_tensor *tg_transpose(tg_tensor *t, int dim0, int dim1) {
  if (!t) return NULL;
  int a = norm_axis("tg_transpose", dim0, TNDIM(t)), b = norm_axis("tg_transpose", dim1, TNDIM(t));
  if (a < 0 || b < 0) return NULL;
  int o[TG_MAX_DIMS];
  for (int i = 0; i < TNDIM(t); i++) o[i] = i;
  o[a] = b;
  o[b] = a;
  return tensor_new(mk_permute(t->u, o));
}

tg_tensor *tg_flatten(tg_tensor *t, int start_dim, int end_dim) {
  if (!t) return NULL;
  if (TNDIM(t) == 0) {
    if (norm_axis_scalar("tg_flatten", start_dim, 0) < 0 || norm_axis_scalar("tg_flatten", end_dim, 0) < 0) return NULL;
    return tg_reshape(t, 1, (int64_t[]){1});
  }
  int a = norm_axis("tg_flatten", start_dim, TNDIM(t)), b = norm_axis("tg_flatten", end_dim, TNDIM(t));
  if (a < 0 || b < 0) return NULL;
  if (b < a) {
    tg_set_error(TG_ERR_ARG, "tg_flatten: start_dim %d is after end_dim %d", start_dim, end_dim);
    return NULL;
  }
  int64_t s[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < a; i++) s[n++] = TSHAPE(t)[i];
  int64_t m = 1;
  for (int i = a; i <= b; i++) m *= TSHAPE(t)[i];
  s[n++] = m;
  for (int i = b + 1; i < TNDIM(t); i++) s[n++] = TSHAPE(t)[i];
  return tensor_new(mk_reshape(t->u, n, s));
}

tg_tensor *tg_squeeze(tg_tensor *t, int axis) {
  if (!t) return NULL;
  int64_t s[TG_MAX_DIMS];
  int n = 0, a = -1;
  if (axis != TG_ALL) {
    a = norm_axis_scalar("tg_squeeze", axis, TNDIM(t));
    if (a >= 0 && TNDIM(t) == 0) return tensor_new(t->u);
    if (a < 0) return NULL;
  }
  for (int i = 0; i < TNDIM(t); i++)
    if (!(TSHAPE(t)[i] == 1 && (a < 0 || a == i))) s[n++] = TSHAPE(t)[i];
  return tensor_new(mk_reshape(t->u, n, s));
}

tg_tensor *tg_unsqueeze(tg_tensor *t, int axis) {
  if (!t) return NULL;
  int a = norm_axis("tg_unsqueeze", axis, TNDIM(t) + 1);
  if (a < 0) return NULL;
  if (TNDIM(t) + 1 > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_unsqueeze: more than %d dimensions", TG_MAX_DIMS);
    return NULL;
  }
  int64_t s[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i <= TNDIM(t); i++) {
    if (i == a) s[n++] = 1;
    if (i < TNDIM(t)) s[n++] = TSHAPE(t)[i];
  }
  return tensor_new(mk_reshape(t->u, n, s));
}

/* one axis of x[start:stop:step], python semantics */
static uop *slice_axis(uop *x, int ax, tg_slice sl) {
  int64_t len = x->shape[ax], step = sl.all ? 1 : sl.step, start, stop;
  if (sl.all) { start = 0; stop = len; }
  else if (step > 0) {
    start = sl.start < 0 ? sl.start + len : sl.start;
    stop = sl.stop == TG_END ? len : sl.stop < 0 ? sl.stop + len : sl.stop;
    start = start < 0 ? 0 : start > len ? len : start;
    stop = stop < 0 ? 0 : stop > len ? len : stop;
  } else {
    start = sl.start == TG_END ? len - 1 : sl.start < 0 ? sl.start + len : sl.start;
    stop = sl.stop == TG_END ? -1 : sl.stop < 0 ? sl.stop + len : sl.stop;
    if (sl.stop != TG_END && stop < 0) stop = -1;
    start = start < -1 ? -1 : start > len - 1 ? len - 1 : start;
    stop = stop < -1 ? -1 : stop > len - 1 ? len - 1 : stop;
  }
  /* the count without overflow for any step (INT64_MIN included): |step| as unsigned, differences <= len + 1 */
  uint64_t ustep = step > 0 ? (uint64_t)step : -(uint64_t)step;
  int64_t diff = step > 0 ? stop - start : start - stop;
  int64_t count = diff <= 0 ? 0 : (int64_t)((uint64_t)(diff - 1) / ustep) + 1;
  if (count <= 1) step = step > 0 ? 1 : -1;  /* one element: the step does not matter, and |step| <= len now */
  int nd = x->ndim;
  if (step < 0) {
    bool f[TG_MAX_DIMS] = {0};
    f[ax] = true;
    x = mk_flip(x, f);
    if (!x) return NULL;   /* no memory */
    start = len - 1 - start;
    step = -step;
  }
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) { b[2 * i] = 0; b[2 * i + 1] = x->shape[i]; }
  if (count == 0) {
    b[2 * ax] = b[2 * ax + 1] = 0;
    return mk_shrink(x, b);
  }
  int64_t span = (count - 1) * step + 1;
  b[2 * ax] = start;
  b[2 * ax + 1] = start + span;
  x = mk_shrink(x, b);
  if (!x) return NULL;   /* no memory */
  if (step == 1) return x;
  int64_t p[2 * TG_MAX_DIMS] = {0};
  p[2 * ax + 1] = count * step - span;
  x = mk_pad(x, p);
  if (!x) return NULL;   /* no memory */
  int64_t s[TG_MAX_DIMS + 1];
  int n = 0;
  for (int i = 0; i < nd; i++) {
    if (i == ax) { s[n++] = count; s[n++] = step; }
    else s[n++] = x->shape[i];
  }
  x = mk_reshape(x, n, s);
  if (!x) return NULL;   /* no memory */
  int64_t b2[2 * (TG_MAX_DIMS + 1)];
  for (int i = 0; i < n; i++) { b2[2 * i] = 0; b2[2 * i + 1] = s[i]; }
  b2[2 * (ax + 1) + 1] = 1;
  x = mk_shrink(x, b2);
  if (!x) return NULL;   /* no memory */
  s[ax + 1] = 1;
  int64_t s2[TG_MAX_DIMS];
  for (int i = 0, k = 0; i < n; i++)
    if (i != ax + 1) s2[k++] = s[i];
  return mk_reshape(x, nd, s2);
}

tg_tensor *tg_slice_axes(tg_tensor *t, int n, const tg_slice *slices) {
  if (!t) return NULL;
  if (n < 0 || n > TNDIM(t) || (n && !slices)) {
    tg_set_error(TG_ERR_ARG, "tg_slice_axes: %d slices for a tensor of %d dimensions", n, TNDIM(t));
    return NULL;
  }
  uop *x = t->u;
  for (int i = 0; i < n; i++) {
    if (!slices[i].all && slices[i].step == 0) {
      tg_set_error(TG_ERR_ARG, "tg_slice_axes: step 0 on axis %d", i);
      return NULL;
    }
    if (!slices[i].all && slices[i].step != 1 && slices[i].step != -1 && TNDIM(t) == TG_MAX_DIMS) {
      tg_set_error(TG_ERR_ARG, "tg_slice_axes: a step other than 1 or -1 (axis %d) takes a spare dimension: at most %d "
                   "dimensions", i, TG_MAX_DIMS - 1);
      return NULL;
    }
    if (!(x = slice_axis(x, i, slices[i]))) return NULL;   /* no memory: the error is set */
  }
  return tensor_new(x);
}

tg_tensor *tg_cat(int n, tg_tensor *const *ts, int axis) {
  if (n <= 0 || !ts) {
    tg_set_error(TG_ERR_ARG, "tg_cat: no tensors given");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!ts[i]) return NULL;
  int nd = TNDIM(ts[0]);
  int ax = norm_axis("tg_cat", axis, nd);
  if (ax < 0) return NULL;
  tg_dtype dt = TDT(ts[0]);
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    char a[SHAPE_BUF], b[SHAPE_BUF];
    bool ok = TNDIM(ts[i]) == nd;
    for (int d = 0; ok && d < nd; d++) ok = d == ax || TSHAPE(ts[i])[d] == TSHAPE(ts[0])[d];
    if (!ok) {
      tg_set_error(TG_ERR_ARG, "tg_cat: shapes %s and %s differ outside axis %d", shape_str(a, sizeof a, nd, TSHAPE(ts[0])),
                   shape_str(b, sizeof b, TNDIM(ts[i]), TSHAPE(ts[i])), ax);
      return NULL;
    }
    if (!size_add(total, TSHAPE(ts[i])[ax], &total)) {
      tg_set_error(TG_ERR_ARG, "tg_cat: the sizes along axis %d add up to more than 2^60", ax);
      return NULL;
    }
    dt = dtype_promote(dt, TDT(ts[i]));
  }
  uop *acc = NULL;
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    int64_t p[2 * TG_MAX_DIMS] = {0};
    p[2 * ax] = off;
    p[2 * ax + 1] = total - off - TSHAPE(ts[i])[ax];
    off += TSHAPE(ts[i])[ax];
    uop *x = mk_pad(mk_cast(ts[i]->u, dt), p);
    uop *s[2] = {acc, x};
    acc = acc ? mk_alu(dt == TG_BOOL ? OP_OR : OP_ADD, dt, 2, s) : x;
  }
  return tensor_new(acc);
}

tg_tensor *tg_stack(int n, tg_tensor *const *ts, int axis) {
  if (n <= 0 || !ts) {
    tg_set_error(TG_ERR_ARG, "tg_stack: no tensors given");
    return NULL;
  }
  tg_tensor **u = mem_calloc((size_t)n, sizeof *u);
  if (!u) { tg_set_error(TG_ERR_NOMEM, "tg_stack: out of memory"); return NULL; }
  tg_tensor *r = NULL;
  int nd = ts[0] ? TNDIM(ts[0]) : 0;
  int ax = norm_axis("tg_stack", axis, nd + 1);
  if (ax >= 0) {
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = (u[i] = tg_unsqueeze(ts[i], ax)) != NULL;
    if (ok && !(r = tg_cat(n, u, ax))) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", tg_error());
      tg_set_error(tg_error_status(), "tg_stack: %s", msg);
    }
  }
  for (int i = 0; i < n; i++) tg_free(u[i]);
  free(u);
  return r;
}

tg_status tg_split(tg_tensor *t, int n, const int64_t *sizes, int axis, tg_tensor **out) {
  if (!t) {  /* keep the message of the op that failed and returned this NULL */
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_split: tensor is NULL");
    return tg_error_status();
  }
  if (!out || n <= 0 || !sizes) {
    tg_set_error(TG_ERR_ARG, "tg_split: %s", !out ? "out is NULL" : n <= 0 ? "no pieces" : "sizes is NULL");
    return TG_ERR_ARG;
  }
  int ax = norm_axis("tg_split", axis, TNDIM(t));
  if (ax < 0) return TG_ERR_ARG;
  int64_t total = 0;
  for (int i = 0; i < n; i++)
    if (!size_add(total, sizes[i], &total) || total > TSHAPE(t)[ax]) {
      tg_set_error(TG_ERR_ARG, "tg_split: size %lld (piece %d) is negative or past the end of axis %d (%lld)",
                   (long long)sizes[i], i, ax, (long long)TSHAPE(t)[ax]);
      return TG_ERR_ARG;
    }
  if (total != TSHAPE(t)[ax]) {
    tg_set_error(TG_ERR_ARG, "tg_split: sizes add up to %lld, axis %d has %lld", (long long)total, ax, (long long)TSHAPE(t)[ax]);
    return TG_ERR_ARG;
  }
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    int64_t b[2 * TG_MAX_DIMS];
    for (int d = 0; d < TNDIM(t); d++) { b[2 * d] = 0; b[2 * d + 1] = TSHAPE(t)[d]; }
    b[2 * ax] = off;
    b[2 * ax + 1] = off + sizes[i];
    off += sizes[i];
    out[i] = tensor_new(mk_shrink(t->u, b));
    if (!out[i]) {
      for (int j = 0; j < i; j++) { tg_free(out[j]); out[j] = NULL; }
      return tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
    }
  }
  return TG_OK;
}

tg_tensor *tg_repeat(tg_tensor *t, int ndim, const int64_t *repeats) {
  if (!t) return NULL;
  if (ndim < TNDIM(t) || 2 * ndim > TG_MAX_DIMS || (ndim && !repeats)) {
    tg_set_error(TG_ERR_ARG, "tg_repeat: %d repeats for a tensor of %d dimensions", ndim, TNDIM(t));
    return NULL;
  }
  int64_t base[TG_MAX_DIMS], s1[TG_MAX_DIMS], s2[TG_MAX_DIMS], fin[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int j = i - (ndim - TNDIM(t));
    base[i] = j >= 0 ? TSHAPE(t)[j] : 1;
    if (repeats[i] < 0) {
      tg_set_error(TG_ERR_ARG, "tg_repeat: negative repeat %lld", (long long)repeats[i]);
      return NULL;
    }
    s1[2 * i] = 1;
    s1[2 * i + 1] = base[i];
    s2[2 * i] = repeats[i];
    s2[2 * i + 1] = base[i];
    fin[i] = 0;  /* any count of an empty axis is empty */
    if (base[i] && !size_mul(repeats[i], base[i], &fin[i])) {
      tg_set_error(TG_ERR_ARG, "tg_repeat: %lld repeats of size %lld make more than 2^60 elements",
                   (long long)repeats[i], (long long)base[i]);
      return NULL;
    }
  }
  int64_t n;
  if (!shape_check("tg_repeat", ndim, fin)) return NULL;
  shape_numel(ndim, fin, &n);
  if (n == 0) return tensor_new(mk_const(TDT(t), 0, ndim, fin));  /* no elements: the (repeat, size) view may not fit */
  uop *x = mk_reshape(t->u, 2 * ndim, s1);
  x = mk_expand(x, 2 * ndim, s2);
  return tensor_new(mk_reshape(x, ndim, fin));
}

tg_tensor *tg_contiguous(tg_tensor *t) {
  if (!t) return NULL;
  uop *x = t->u;
  return tensor_new(uop_new_shaped(OP_CONTIGUOUS, (tg_dtype)x->dtype, 1, &x, (uop_arg){0}, 0, NULL, x->ndim, x->shape));
}
