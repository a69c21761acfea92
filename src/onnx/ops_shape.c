/* ops_shape.c — ONNX operators that compute or change shapes (Shape, Size, Reshape, Flatten, Squeeze,
 * Unsqueeze, Expand, Concat, Split, Slice, ConstantOfShape, Range), the helpers the shape operator files share
 * (ops_shape.h), and the table onnx_ops_shape of every operator of those files (ops_index.c, ops_layout.c).
 *
 * Each operator is a few tg.h calls (views: no copy). Where the inputs are integers known on the host (a
 * shape read by Shape, a Constant), the node also computes its output on the host and records it with
 * onnx_set_known (see ops_shape.h), following ONNX's reference implementation (onnx/reference/ops). */
#include <stdlib.h>
#include <string.h>

#include "onnx_model.h"
#include "ops_shape.h"
#include "../uop/uop.h"

/* ---- helpers (ops_shape.h) ---- */

void oshape_begin(void) { tg_scope_begin(); }

tg_status oshape_end(const onnx_node *n, tg_tensor *t, tg_tensor **out, int k) {
  out[k] = tg_keep(t);
  tg_scope_end();
  if (t) return TG_OK;
  tg_status st = tg_error_status();
  return onnx_fail(n, st == TG_OK ? TG_ERR_ARG : st, "%s", tg_error());
}

tg_status oshape_close(tg_status st) {
  tg_scope_end();
  return st;
}

bool oshape_int_dtype(tg_dtype dt) {
  return dt == TG_BOOL || (dt >= TG_INT8 && dt <= TG_UINT64);
}

int64_t oshape_numel(int ndim, const int64_t *shape) {
  int64_t p = 1;
  for (int i = 0; i < ndim; i++) p *= shape[i];
  return p;
}

int oshape_axis(const onnx_node *n, int64_t axis, int ndim) {
  if (axis < -(int64_t)ndim || axis >= ndim) {
    onnx_fail(n, TG_ERR_ARG, "axis %lld is out of range for %d dims", (long long)axis, ndim);
    return -1;
  }
  return (int)(axis < 0 ? axis + ndim : axis);
}

bool oshape_known(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, int64_t *vals, int64_t cap,
                 int64_t *count) {
  if (i >= n->nin || !in[i] || !oshape_int_dtype(tg_dtype_of(in[i])) || tg_numel(in[i]) > cap) return false;
  if (!onnx_input_known(c, n, i)) return false;
  if (onnx_input_ints(c, n, in, i, vals, cap, count) != TG_OK) {
    tg_error_clear();
    return false;
  }
  return true;
}

tg_tensor *oshape_known_out(onnx_ctx *c, int k, tg_dtype dt, int ndim, const int64_t *shape, const int64_t *vals) {
  if (!oshape_int_dtype(dt)) {
    tg_set_error(TG_ERR_INTERNAL, "onnx: a host-known value of dtype %s", tg_dtype_name(dt));
    return NULL;
  }
  int64_t numel = oshape_numel(ndim, shape);
  size_t es = tg_dtype_size(dt);
  void *buf = mem_alloc(numel ? (size_t)numel * es : 1);
  if (!buf) {
    tg_set_error(TG_ERR_NOMEM, "onnx: %lld host values", (long long)numel);
    return NULL;
  }
  for (int64_t j = 0; j < numel; j++) {
    int64_t v = vals[j];
    switch (dt) {
      case TG_BOOL: ((uint8_t *)buf)[j] = v != 0; break;
      case TG_INT8: ((int8_t *)buf)[j] = (int8_t)v; break;
      case TG_UINT8: ((uint8_t *)buf)[j] = (uint8_t)v; break;
      case TG_INT16: ((int16_t *)buf)[j] = (int16_t)v; break;
      case TG_UINT16: ((uint16_t *)buf)[j] = (uint16_t)v; break;
      case TG_INT32: ((int32_t *)buf)[j] = (int32_t)v; break;
      case TG_UINT32: ((uint32_t *)buf)[j] = (uint32_t)v; break;
      case TG_UINT64: ((uint64_t *)buf)[j] = (uint64_t)v; break;
      default: ((int64_t *)buf)[j] = v; break;
    }
  }
  tg_tensor *t = tg_from_data(dt, ndim, shape, buf, (size_t)numel * es);
  free(buf);
  if (t && onnx_set_known(c, k, vals, numel) != TG_OK) {
    tg_free(t);
    return NULL;
  }
  return t;
}

/* the ints of input i (opset >= since) or of attribute name (older opsets) into vals: TG_OK with *count the
 * number, or -1 when the node gives none */
static tg_status ints_arg(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, const char *name,
                          int since, int64_t *vals, int64_t cap, int64_t *count) {
  *count = -1;
  if (onnx_opset(c, "") >= since) {
    if (i >= n->nin || !in[i]) return TG_OK;
    return onnx_input_ints(c, n, in, i, vals, cap, count);
  }
  const int64_t *a;
  int64_t na = onnx_attr_ints(n, name, &a);
  if (na < 0) return TG_OK;
  if (na > cap) return onnx_fail(n, TG_ERR_ARG, "attribute %s has %lld values (at most %lld)", name, (long long)na,
                                 (long long)cap);
  memcpy(vals, a, (size_t)na * sizeof *vals);
  *count = na;
  return TG_OK;
}

/* ---- Shape, Size ---- */

tg_status onnx_op_shape(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  int64_t start = 0, end = nd;
  if (onnx_opset(c, "") >= 15) {
    start = onnx_attr_int(n, "start", 0);
    end = onnx_attr_int(n, "end", nd);
  }
  if (start < 0) start += nd;
  if (end < 0) end += nd;
  start = start < 0 ? 0 : start > nd ? nd : start;
  end = end < start ? start : end > nd ? nd : end;
  int64_t vals[TG_MAX_DIMS], len = end - start;
  for (int64_t i = 0; i < len; i++) vals[i] = tg_shape(in[0], (int)(start + i));
  oshape_begin();
  return oshape_end(n, oshape_known_out(c, 0, TG_INT64, 1, &len, vals), out, 0);
}

tg_status onnx_op_size(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int64_t v = tg_numel(in[0]);
  oshape_begin();
  return oshape_end(n, oshape_known_out(c, 0, TG_INT64, 0, NULL, &v), out, 0);
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze: new sizes, the same values in the same order ---- */

/* data reshaped to shape; when data's values are known, the result's are too */
static tg_status reshape_to(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int ndim, const int64_t *shape,
                            tg_tensor **out) {
  int64_t *kv = mem_alloc(SHAPE_KNOWN_CAP * sizeof *kv), cnt = 0;
  oshape_begin();
  tg_tensor *r = tg_reshape(in[0], ndim, shape);
  if (r && kv && oshape_known(c, n, in, 0, kv, SHAPE_KNOWN_CAP, &cnt) && cnt == tg_numel(r))
    r = oshape_known_out(c, 0, tg_dtype_of(r), ndim, tg_shape_ptr(r), kv);
  free(kv);
  return oshape_end(n, r, out, 0);
}

tg_status onnx_op_reshape(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int64_t shape[TG_MAX_DIMS], cnt;
  tg_status st = onnx_input_ints(c, n, in, 1, shape, TG_MAX_DIMS, &cnt);
  if (st) return st;
  bool allowzero = onnx_attr_int(n, "allowzero", 0) != 0;
  int nd = tg_ndim(in[0]), ninfer = 0;
  for (int64_t i = 0; i < cnt; i++) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= nd) return onnx_fail(n, TG_ERR_ARG, "shape[%lld] is 0 (copy) but the data has %d dims", (long long)i, nd);
      shape[i] = tg_shape(in[0], (int)i);
    }
    if (shape[i] < -1) return onnx_fail(n, TG_ERR_ARG, "shape[%lld] is %lld", (long long)i, (long long)shape[i]);
    if (shape[i] == -1) ninfer++;
  }
  if (ninfer > 1) return onnx_fail(n, TG_ERR_ARG, "more than one -1 in the shape");
  if (ninfer) {   /* inferred here: tg_reshape cannot infer next to a 0 (0 elements) */
    int64_t known = 1, at = -1;
    for (int64_t i = 0; i < cnt; i++) {
      if (shape[i] == -1) at = i;
      else known *= shape[i];
    }
    int64_t total = tg_numel(in[0]);
    if (known == 0 || total % known) return onnx_fail(n, TG_ERR_ARG, "cannot infer -1: %lld elements into parts of %lld",
                                                      (long long)total, (long long)known);
    shape[at] = total / known;
  }
  return reshape_to(c, n, in, (int)cnt, shape, out);
}

tg_status onnx_op_flatten(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  int64_t axis = onnx_attr_int(n, "axis", 1);
  if (axis < 0) axis += nd;
  if (axis < 0 || axis > nd) return onnx_fail(n, TG_ERR_ARG, "axis %lld out of range for %d dims",
                                              (long long)onnx_attr_int(n, "axis", 1), nd);
  const int64_t *sh = tg_shape_ptr(in[0]);
  int64_t shape[2] = {oshape_numel((int)axis, sh), oshape_numel(nd - (int)axis, sh + axis)};
  return reshape_to(c, n, in, 2, shape, out);
}

/* the axes of Squeeze/Unsqueeze (attribute before opset 13, input since), each in [-r, r) as [0, r), distinct */
static tg_status squeeze_axes(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int r, bool *mark, int64_t *cnt) {
  int64_t axes[TG_MAX_DIMS];
  tg_status st = ints_arg(c, n, in, 1, "axes", 13, axes, TG_MAX_DIMS, cnt);
  if (st) return st;
  memset(mark, 0, TG_MAX_DIMS * sizeof *mark);
  for (int64_t i = 0; i < *cnt; i++) {
    int a = oshape_axis(n, axes[i], r);
    if (a < 0) return TG_ERR_ARG;
    if (mark[a]) return onnx_fail(n, TG_ERR_ARG, "axis %lld given twice", (long long)axes[i]);
    mark[a] = true;
  }
  return TG_OK;
}

tg_status onnx_op_squeeze(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]), k = 0;
  bool mark[TG_MAX_DIMS];
  int64_t cnt, shape[TG_MAX_DIMS];
  tg_status st = squeeze_axes(c, n, in, nd, mark, &cnt);
  if (st) return st;
  for (int d = 0; d < nd; d++) {
    int64_t s = tg_shape(in[0], d);
    if (cnt > 0 && mark[d] && s != 1) return onnx_fail(n, TG_ERR_ARG, "axis %d has size %lld, not 1", d, (long long)s);
    if (cnt > 0 ? !mark[d] : s != 1) shape[k++] = s;
  }
  return reshape_to(c, n, in, k, shape, out);
}

tg_status onnx_op_unsqueeze(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  int64_t axes[TG_MAX_DIMS], cnt, shape[TG_MAX_DIMS];
  tg_status st = ints_arg(c, n, in, 1, "axes", 13, axes, TG_MAX_DIMS, &cnt);
  if (st) return st;
  if (cnt < 0) return onnx_fail(n, TG_ERR_ARG, "no axes given");
  if (nd + cnt > TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "%d dims and %lld new ones pass %d", nd, (long long)cnt,
                                               TG_MAX_DIMS);
  int r = nd + (int)cnt;
  bool mark[TG_MAX_DIMS];
  if ((st = squeeze_axes(c, n, in, r, mark, &cnt))) return st;
  for (int d = 0, j = 0; d < r; d++) shape[d] = mark[d] ? 1 : tg_shape(in[0], j++);
  return reshape_to(c, n, in, r, shape, out);
}

/* ---- Expand, Concat, Split, Slice ---- */

/* out's flat index o (row-major over ndim sizes) as its coordinates */
static void unravel(int64_t o, int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; d--) {
    idx[d] = shape[d] ? o % shape[d] : 0;
    o = shape[d] ? o / shape[d] : 0;
  }
}

tg_status onnx_op_expand(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int64_t want[TG_MAX_DIMS], cnt, shape[TG_MAX_DIMS], view[TG_MAX_DIMS];
  tg_status st = onnx_input_ints(c, n, in, 1, want, TG_MAX_DIMS, &cnt);
  if (st) return st;
  int nd = tg_ndim(in[0]), r = nd > cnt ? nd : (int)cnt;
  for (int d = 0; d < r; d++) {   /* numpy's broadcast of the two shapes, right-aligned */
    int64_t a = d - (r - nd) >= 0 ? tg_shape(in[0], d - (r - nd)) : 1, b = d - (r - cnt) >= 0 ? want[d - (r - cnt)] : 1;
    if (a != b && a != 1 && b != 1)
      return onnx_fail(n, TG_ERR_ARG, "the data's size %lld and the shape's %lld on axis %d do not broadcast",
                       (long long)a, (long long)b, d);
    view[d] = a;
    shape[d] = a == 1 ? b : a;
  }
  int64_t *kv = mem_alloc(SHAPE_KNOWN_CAP * 2 * sizeof *kv), kc;
  oshape_begin();
  tg_tensor *r0 = tg_reshape(in[0], r, view);
  tg_tensor *res = tg_expand(r0, r, shape);
  int64_t total = oshape_numel(r, shape);
  if (res && kv && total <= SHAPE_KNOWN_CAP && oshape_known(c, n, in, 0, kv, SHAPE_KNOWN_CAP, &kc)) {
    int64_t idx[TG_MAX_DIMS], *ov = kv + SHAPE_KNOWN_CAP;
    for (int64_t o = 0; o < total; o++) {
      unravel(o, r, shape, idx);
      int64_t src = 0;
      for (int d = 0; d < r; d++) src = src * view[d] + (view[d] == 1 ? 0 : idx[d]);
      ov[o] = kv[src];
    }
    res = oshape_known_out(c, 0, tg_dtype_of(in[0]), r, shape, ov);
  }
  free(kv);
  return oshape_end(n, res, out, 0);
}

tg_status onnx_op_concat(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  if (n->nin < 1) return onnx_fail(n, TG_ERR_ARG, "no inputs");
  for (int i = 0; i < n->nin; i++)
    if (!in[i]) return onnx_fail(n, TG_ERR_ARG, "input %d is missing", i);
  if (!onnx_attr_has(n, "axis")) return onnx_fail(n, TG_ERR_ARG, "the attribute axis is required");
  int nd = tg_ndim(in[0]);
  int ax = oshape_axis(n, onnx_attr_int(n, "axis", 0), nd);
  if (ax < 0) return TG_ERR_ARG;
  oshape_begin();
  tg_tensor *res = tg_cat(n->nin, in, ax);
  /* host values: every input known (small), concatenated block by block */
  int64_t *kv = res && tg_numel(res) <= SHAPE_KNOWN_CAP ? mem_alloc(SHAPE_KNOWN_CAP * 2 * sizeof *kv) : NULL;
  if (kv) {
    int64_t *ov = kv + SHAPE_KNOWN_CAP, outer = oshape_numel(ax, tg_shape_ptr(res)), off = 0, kc;
    bool ok = true;
    for (int i = 0; ok && i < n->nin; i++) {
      int64_t inner = oshape_numel(nd - ax, tg_shape_ptr(in[i]) + ax), rowlen = oshape_numel(nd - ax, tg_shape_ptr(res) + ax);
      ok = oshape_known(c, n, in, i, kv, SHAPE_KNOWN_CAP, &kc);
      for (int64_t o = 0; ok && o < outer; o++) memcpy(ov + o * rowlen + off, kv + o * inner, (size_t)inner * sizeof *kv);
      off += inner;
    }
    if (ok) res = oshape_known_out(c, 0, tg_dtype_of(res), nd, tg_shape_ptr(res), ov);
    free(kv);
  }
  return oshape_end(n, res, out, 0);
}

tg_status onnx_op_split(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]), nout = n->nout;
  int ax = oshape_axis(n, onnx_attr_int(n, "axis", 0), nd);
  if (ax < 0) return TG_ERR_ARG;
  if (nout < 1 || nout > 4096) return onnx_fail(n, TG_ERR_ARG, "%d outputs", nout);
  int64_t *sizes = mem_alloc((size_t)nout * sizeof *sizes), cnt, dim = tg_shape(in[0], ax);
  tg_tensor **parts = mem_calloc((size_t)nout, sizeof *parts);
  if (!sizes || !parts) {
    free(sizes);
    free(parts);
    return onnx_fail(n, TG_ERR_NOMEM, "%d outputs", nout);
  }
  tg_status st = ints_arg(c, n, in, 1, "split", 13, sizes, nout, &cnt);
  if (st == TG_OK && cnt >= 0 && cnt != nout)
    st = onnx_fail(n, TG_ERR_ARG, "split has %lld sizes for %d outputs", (long long)cnt, nout);
  if (st == TG_OK && cnt < 0) {   /* equal parts; at opset 18 the last may be smaller (num_outputs) */
    int64_t parts_n = onnx_attr_int(n, "num_outputs", nout);
    if (parts_n != nout) st = onnx_fail(n, TG_ERR_ARG, "num_outputs %lld but %d outputs", (long long)parts_n, nout);
    int64_t each = (dim + nout - 1) / nout, left = dim;
    for (int i = 0; i < nout; i++, left -= each) sizes[i] = left < each ? (left > 0 ? left : 0) : each;
  }
  int64_t sum = 0;
  for (int i = 0; st == TG_OK && i < nout; i++) {
    if (sizes[i] < 0) st = onnx_fail(n, TG_ERR_ARG, "split size %lld", (long long)sizes[i]);
    sum += sizes[i];
  }
  if (st == TG_OK && sum != dim)
    st = onnx_fail(n, TG_ERR_ARG, "the split sizes add up to %lld, the axis has %lld", (long long)sum, (long long)dim);
  if (st == TG_OK) {
    oshape_begin();
    st = tg_split(in[0], nout, sizes, ax, parts);
    if (st) st = onnx_fail(n, st, "%s", tg_error());
    for (int i = 0; i < nout; i++) out[i] = st == TG_OK && n->outputs[i][0] ? tg_keep(parts[i]) : NULL;
    st = oshape_close(st);
  }
  free(sizes);
  free(parts);
  return st;
}

/* one axis of a Slice after ONNX's clamping: the first index, the count and the step */
typedef struct slice_axis { int64_t start, len, step; } slice_axis;

static slice_axis slice_clamp(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  slice_axis s = {0, 0, step};
  if (step > 0) {
    start = start < 0 ? 0 : start > dim ? dim : start;
    end = end < 0 ? 0 : end > dim ? dim : end;
    s.len = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    s.len = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  s.start = s.len ? start : 0;
  return s;
}

tg_status onnx_op_slice(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  int64_t starts[TG_MAX_DIMS], ends[TG_MAX_DIMS], axes[TG_MAX_DIMS], steps[TG_MAX_DIMS], ns, ne, na = -1, nst = -1;
  tg_status st;
  if (onnx_opset(c, "") >= 10) {
    if ((st = onnx_input_ints(c, n, in, 1, starts, TG_MAX_DIMS, &ns)) ||
        (st = onnx_input_ints(c, n, in, 2, ends, TG_MAX_DIMS, &ne)) ||
        (st = ints_arg(c, n, in, 3, "axes", 10, axes, TG_MAX_DIMS, &na)) ||
        (st = ints_arg(c, n, in, 4, "steps", 10, steps, TG_MAX_DIMS, &nst)))
      return st;
  } else if ((st = ints_arg(c, n, in, 1, "starts", 10, starts, TG_MAX_DIMS, &ns)) ||
             (st = ints_arg(c, n, in, 1, "ends", 10, ends, TG_MAX_DIMS, &ne)) ||
             (st = ints_arg(c, n, in, 1, "axes", 10, axes, TG_MAX_DIMS, &na))) {
    return st;
  }
  if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
    return onnx_fail(n, TG_ERR_ARG, "starts, ends, axes and steps differ in length (%lld, %lld, %lld, %lld)",
                     (long long)ns, (long long)ne, (long long)na, (long long)nst);
  slice_axis sa[TG_MAX_DIMS];
  bool seen[TG_MAX_DIMS] = {false};
  for (int d = 0; d < nd; d++) sa[d] = (slice_axis){0, tg_shape(in[0], d), 1};
  for (int64_t i = 0; i < ns; i++) {
    int a = oshape_axis(n, na >= 0 ? axes[i] : i, nd);
    if (a < 0) return TG_ERR_ARG;
    int64_t step = nst >= 0 ? steps[i] : 1;
    if (seen[a]) return onnx_fail(n, TG_ERR_ARG, "axis %d given twice", a);
    if (step == 0) return onnx_fail(n, TG_ERR_ARG, "step 0 on axis %d", a);
    seen[a] = true;
    sa[a] = slice_clamp(starts[i], ends[i], step, tg_shape(in[0], a));
  }
  tg_slice sl[TG_MAX_DIMS];
  int64_t oshape[TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    /* python bounds that give exactly sa[d]: stop one step past the last element (TG_END past index 0) */
    int64_t stop = sa[d].start + sa[d].len * sa[d].step;
    sl[d] = (tg_slice){sa[d].start, stop < 0 ? TG_END : stop, sa[d].step, false};
    if (sa[d].len == 0) sl[d] = (tg_slice){0, 0, 1, false};
    oshape[d] = sa[d].len;
  }
  oshape_begin();
  tg_tensor *res = tg_slice_axes(in[0], nd, sl);
  int64_t total = oshape_numel(nd, oshape), kc;
  int64_t *kv = res && total <= SHAPE_KNOWN_CAP ? mem_alloc(SHAPE_KNOWN_CAP * 2 * sizeof *kv) : NULL;
  if (kv && oshape_known(c, n, in, 0, kv, SHAPE_KNOWN_CAP, &kc)) {
    int64_t idx[TG_MAX_DIMS], *ov = kv + SHAPE_KNOWN_CAP;
    for (int64_t o = 0; o < total; o++) {
      unravel(o, nd, oshape, idx);
      int64_t src = 0;
      for (int d = 0; d < nd; d++) src = src * tg_shape(in[0], d) + sa[d].start + idx[d] * sa[d].step;
      ov[o] = kv[src];
    }
    res = oshape_known_out(c, 0, tg_dtype_of(in[0]), nd, oshape, ov);
  }
  free(kv);
  return oshape_end(n, res, out, 0);
}

/* ---- ConstantOfShape, Range ---- */

static bool attr_scalar(const onnx_attr *a, tg_dtype dt, int64_t *iv, double *dv);


tg_status onnx_op_constant_of_shape(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int64_t shape[TG_MAX_DIMS], cnt;
  tg_status st = onnx_input_ints(c, n, in, 0, shape, TG_MAX_DIMS, &cnt);
  if (st) return st;
  for (int64_t i = 0; i < cnt; i++)
    if (shape[i] < 0) return onnx_fail(n, TG_ERR_ARG, "shape[%lld] is %lld", (long long)i, (long long)shape[i]);
  oshape_begin();
  if (!onnx_attr_has(n, "value")) return oshape_end(n, tg_zeros(TG_FLOAT32, (int)cnt, shape), out, 0);
  tg_tensor *v = onnx_attr_tensor(c, n, "value");
  if (!v) return oshape_close(onnx_fail(n, TG_ERR_ARG, "attribute value: %s", tg_error()));
  if (tg_numel(v) != 1) return oshape_close(onnx_fail(n, TG_ERR_ARG, "value has %lld elements, not 1", (long long)tg_numel(v)));
  tg_dtype dt = tg_dtype_of(v);
  int64_t ones[TG_MAX_DIMS], total = oshape_numel((int)cnt, shape), iv;
  double dv;
  for (int i = 0; i < TG_MAX_DIMS; i++) ones[i] = 1;
  /* the value read from the attribute's bytes (nothing read back from a device, so it works inside a tg_jit
   * capture) makes a constant, and an integer one is known */
  if (attr_scalar(onnx_attr_find(n, "value"), dt, &iv, &dv)) {
    if (oshape_int_dtype(dt) && total <= SHAPE_KNOWN_CAP) {
      int64_t *kv = mem_alloc((size_t)(total ? total : 1) * sizeof *kv);
      if (!kv) return oshape_close(onnx_fail(n, TG_ERR_NOMEM, "%lld values", (long long)total));
      for (int64_t i = 0; i < total; i++) kv[i] = iv;
      tg_tensor *res = oshape_known_out(c, 0, dt, (int)cnt, shape, kv);
      free(kv);
      return oshape_end(n, res, out, 0);
    }
    if (!oshape_int_dtype(dt) || (iv > -(INT64_C(1) << 53) && iv < (INT64_C(1) << 53)))
      return oshape_end(n, tg_full(dt, (int)cnt, shape, dv), out, 0);
  }
  return oshape_end(n, tg_expand(tg_reshape(v, (int)cnt, ones), (int)cnt, shape), out, 0);
}

/* the one value of t read on the host as an integer and a double, when t's dtype is an integer, bool, float32
 * or float64 and the read succeeds (no error left behind either way) */
/* the one value of a tensor attribute (its dtype dt) as an integer and a double, when dt is an integer, bool,
 * float32 or float64 */
static bool attr_scalar(const onnx_attr *a, tg_dtype dt, int64_t *iv, double *dv) {
  union { uint8_t b[8]; int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint16_t u16; uint32_t u32; uint64_t u64;
          float f; double d; } u = {{0}};
  if (!oshape_int_dtype(dt) && dt != TG_FLOAT32 && dt != TG_FLOAT64) return false;
  if (!a || a->type != ONNX_ATTR_TENSOR || !a->t->data || a->t->nbytes < tg_dtype_size(dt)) return false;
  memcpy(u.b, a->t->data, tg_dtype_size(dt));
  switch (dt) {
    case TG_BOOL: case TG_UINT8: *iv = u.b[0]; break;
    case TG_INT8: *iv = u.i8; break;
    case TG_INT16: *iv = u.i16; break;
    case TG_UINT16: *iv = u.u16; break;
    case TG_INT32: *iv = u.i32; break;
    case TG_UINT32: *iv = u.u32; break;
    case TG_INT64: *iv = u.i64; break;
    case TG_UINT64: *iv = (int64_t)u.u64; break;
    case TG_FLOAT32: *dv = u.f; *iv = 0; return true;
    default: *dv = u.d; *iv = 0; return true;
  }
  *dv = dt == TG_UINT64 ? (double)u.u64 : (double)*iv;
  return true;
}

tg_status onnx_op_range(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  for (int i = 0; i < 3; i++)
    if (i >= n->nin || !in[i] || tg_numel(in[i]) != 1) return onnx_fail(n, TG_ERR_ARG, "input %d must be one value", i);
  tg_dtype dt = tg_dtype_of(in[0]);
  oshape_begin();
  tg_tensor *res = NULL;
  if (oshape_int_dtype(dt)) {
    int64_t v[3], cnt;
    for (int i = 0; i < 3; i++) {
      tg_status st = onnx_input_ints(c, n, in, i, &v[i], 1, &cnt);
      if (st) return oshape_close(st);
    }
    if (v[2] == 0) return oshape_close(onnx_fail(n, TG_ERR_ARG, "delta is 0"));
    int64_t len = v[2] > 0 ? (v[1] > v[0] ? (v[1] - v[0] + v[2] - 1) / v[2] : 0)
                           : (v[0] > v[1] ? (v[0] - v[1] - v[2] - 1) / -v[2] : 0);
    if (len <= SHAPE_KNOWN_CAP) {
      int64_t *kv = mem_alloc((size_t)(len ? len : 1) * sizeof *kv);
      if (!kv) return oshape_close(onnx_fail(n, TG_ERR_NOMEM, "%lld values", (long long)len));
      for (int64_t i = 0; i < len; i++) kv[i] = v[0] + i * v[2];
      res = oshape_known_out(c, 0, dt, 1, &len, kv);
      free(kv);
    } else {
      res = tg_arange(dt, (double)v[0], (double)v[1], (double)v[2]);
    }
  } else {
    double v[3];
    int64_t cnt;
    for (int i = 0; i < 3; i++) {
      tg_status st = onnx_input_doubles(c, n, in, i, &v[i], 1, &cnt);
      if (st) return oshape_close(st);
    }
    if (v[2] == 0) return oshape_close(onnx_fail(n, TG_ERR_ARG, "delta is 0"));
    res = tg_arange(dt, v[0], v[1], v[2]);
  }
  return oshape_end(n, res, out, 0);
}

/* ---- the table ---- */

const onnx_op_def onnx_ops_shape[] = {
    {"Shape", "", 1, onnx_op_shape},
    {"Size", "", 1, onnx_op_size},
    {"Reshape", "", 5, onnx_op_reshape},
    {"Flatten", "", 1, onnx_op_flatten},
    {"Squeeze", "", 1, onnx_op_squeeze},
    {"Unsqueeze", "", 1, onnx_op_unsqueeze},
    {"Expand", "", 8, onnx_op_expand},
    {"Concat", "", 4, onnx_op_concat},
    {"Split", "", 2, onnx_op_split},
    {"Slice", "", 1, onnx_op_slice},
    {"ConstantOfShape", "", 9, onnx_op_constant_of_shape},
    {"Range", "", 11, onnx_op_range},
    {"Gather", "", 1, onnx_op_gather},
    {"GatherElements", "", 11, onnx_op_gather_elements},
    {"GatherND", "", 11, onnx_op_gather_nd},
    {"Scatter", "", 9, onnx_op_scatter_elements},
    {"ScatterElements", "", 11, onnx_op_scatter_elements},
    {"ScatterND", "", 11, onnx_op_scatter_nd},
    {"NonZero", "", 9, onnx_op_nonzero},
    {"Compress", "", 9, onnx_op_compress},
    {"OneHot", "", 9, onnx_op_onehot},
    {"ReverseSequence", "", 10, onnx_op_reverse_sequence},
    {"Unique", "", 11, onnx_op_unique},
    {"Transpose", "", 1, onnx_op_transpose},
    {"Tile", "", 6, onnx_op_tile},
    {"Pad", "", 2, onnx_op_pad},
    {"DepthToSpace", "", 1, onnx_op_depth_to_space},
    {"SpaceToDepth", "", 1, onnx_op_space_to_depth},
    {"EyeLike", "", 9, onnx_op_eyelike},
    {"CenterCropPad", "", 18, onnx_op_center_crop_pad},
    {"Col2Im", "", 18, onnx_op_col2im},
    {"Trilu", "", 14, onnx_op_trilu},
    {NULL, NULL, 0, NULL},
};
