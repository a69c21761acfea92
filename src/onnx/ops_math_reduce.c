/* ops_math_reduce.c — ONNX's reductions (Reduce*), ArgMax/ArgMin, the softmax family (Softmax, LogSoftmax,
 * Hardmax), TopK, CumSum (and CumProd) and Einsum; listed in ops_math.c's table.
 *
 * Versions: a reduction's axes are an attribute until ReduceSum-13 and the others' opset 18, an optional input
 * from then on (with noop_with_empty_axes: no axes means no reduction, where the reference still applies the
 * elementwise part: ReduceSumSquare squares, ReduceL1 takes |x|); Softmax, LogSoftmax and Hardmax before opset
 * 13 coerce the input to 2-D at axis (default 1), from 13 on work along one axis (default -1); TopK's k is an
 * attribute before opset 10, an input from then on, largest and sorted from 11. */
#include <string.h>

#include "ops_math.h"

/* ---- Reduce* ---------------------------------------------------------------------------------------- */

/* the node's axes, normalized, deduplicated and sorted into ax (*nax of them; every axis when none are given,
 * none with *noop when noop_with_empty_axes asks for no reduction) */
static tg_status reduce_axes(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int ndim, int *ax, int *nax,
                             bool *noop) {
  int input_since = !strcmp(n->op_type, "ReduceSum") ? 13 : 18;
  int64_t axes[TG_MAX_DIMS], count = 0;
  if (onnx_opset(c, "") >= input_since) {
    if (n->nin > 1 && in[1]) {
      tg_status st = onnx_input_ints(c, n, in, 1, axes, TG_MAX_DIMS, &count);
      if (st) return st;
    }
  } else {
    const int64_t *v = NULL;
    count = onnx_attr_ints(n, "axes", &v);
    if (count > TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "%lld axes for a rank %d input", (long long)count, ndim);
    for (int64_t i = 0; i < count; i++) axes[i] = v[i];
    if (count < 0) count = 0;
  }
  *noop = count == 0 && onnx_attr_int(n, "noop_with_empty_axes", 0) != 0;
  bool seen[TG_MAX_DIMS] = {0};
  for (int64_t i = 0; i < count; i++) {
    int a = math_axis(n, axes[i], ndim);
    if (a < 0) return TG_ERR_ARG;
    seen[a] = true;
  }
  *nax = 0;
  for (int a = 0; a < ndim; a++)
    if (seen[a] || (count == 0 && !*noop)) ax[(*nax)++] = a;
  return TG_OK;
}

MATH_OP(op_reduce) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  int ax[TG_MAX_DIMS], k = 0;
  bool noop = false;
  tg_status st = reduce_axes(c, n, in, tg_ndim(x), ax, &k, &noop);
  if (st) return st;
  bool keep = onnx_attr_int(n, "keepdims", 1) != 0;
  const char *op = n->op_type + strlen("Reduce");
  tg_dtype dt = tg_dtype_of(x);
  tg_tensor *r = NULL;
  if (!strcmp(op, "Sum")) {
    r = noop ? math_copy(x) : tg_sum(x, k, ax, keep);
  } else if (!strcmp(op, "Mean")) {
    r = noop ? math_copy(x) : tg_mean(x, k, ax, keep);
  } else if (!strcmp(op, "Max")) {
    r = noop ? math_copy(x) : tg_max(x, k, ax, keep);
  } else if (!strcmp(op, "Min")) {
    r = noop ? math_copy(x) : tg_min(x, k, ax, keep);
  } else if (!strcmp(op, "Prod")) {
    r = noop ? math_copy(x) : tg_prod(x, k, ax, keep);
  } else if (!strcmp(op, "L1")) {
    tg_tensor *a = tg_abs(x);
    r = noop ? a : tg_sum(a, k, ax, keep);
  } else if (!strcmp(op, "L2")) {
    /* squares summed in float32 at least (a float16 square overflows at 256); integers truncate back */
    tg_tensor *s = tg_square(math_cast_to(x, dt == TG_FLOAT64 ? TG_FLOAT64 : TG_FLOAT32));
    r = tg_sqrt(noop ? s : tg_sum(s, k, ax, keep));
  } else if (!strcmp(op, "LogSum")) {
    r = tg_log(noop ? x : tg_sum(x, k, ax, keep));
  } else if (!strcmp(op, "LogSumExp")) {
    r = noop ? math_copy(x) : tg_logsumexp_axes(x, k, ax, keep);
  } else if (!strcmp(op, "SumSquare")) {
    tg_tensor *s = tg_square(x);
    r = noop ? s : tg_sum(s, k, ax, keep);
  } else {
    return onnx_fail(n, TG_ERR_INTERNAL, "not a reduction");
  }
  if ((st = math_out(n, out, 0, math_cast_to(r, dt)))) return st;
  math_known(c, n, in, out[0]);
  return TG_OK;
}

/* ---- ArgMax, ArgMin ------------------------------------------------------------------------------------ */

/* int64 indices of the first (select_last_index: last) largest or smallest value along axis */
MATH_OP(op_argmax) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  int nd = tg_ndim(x);
  int a = nd == 0 ? 0 : math_axis(n, onnx_attr_int(n, "axis", 0), nd);
  if (a < 0) return TG_ERR_ARG;
  bool keep = onnx_attr_int(n, "keepdims", 1) != 0, last = onnx_attr_int(n, "select_last_index", 0) != 0;
  bool is_max = !strcmp(n->op_type, "ArgMax");
  if (nd > 0 && tg_shape(x, a) == 0) return onnx_fail(n, TG_ERR_ARG, "axis %d is empty", a);
  /* the last index of the extreme value is the first one of the reversed axis, counted from the end */
  tg_tensor *xs = last && nd > 0 ? tg_flip(x, 1, &a) : x;
  tg_tensor *idx = is_max ? tg_argmax(xs, a, keep) : tg_argmin(xs, a, keep);
  if (last && nd > 0) idx = tg_rsub_scalar(idx, (double)(tg_shape(x, a) - 1));
  return math_out(n, out, 0, math_cast_to(idx, TG_INT64));
}

/* ---- Softmax, LogSoftmax, Hardmax ----------------------------------------------------------------------- */

/* 1 where x holds the first largest value along axis, else 0, in x's type */
static tg_tensor *hardmax(tg_tensor *x, int axis) {
  int nd = tg_ndim(x);
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) shape[i] = i == axis ? tg_shape(x, i) : 1;
  tg_tensor *idx = tg_argmax(x, axis, true);
  tg_tensor *pos = tg_reshape(tg_arange(TG_INT32, 0, (double)tg_shape(x, axis), 1), nd, shape);
  return tg_cast(tg_eq(idx, pos), tg_dtype_of(x));
}

static tg_tensor *softmax_kind(const char *op, tg_tensor *x, int axis) {
  if (!strcmp(op, "Softmax")) return tg_softmax(x, axis);
  if (!strcmp(op, "LogSoftmax")) return tg_log_softmax(x, axis);
  return hardmax(x, axis);
}

MATH_OP(op_softmax) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  bool coerce = onnx_opset(c, "") < 13;
  int nd = tg_ndim(x);
  tg_dtype dt = tg_dtype_of(x);
  int64_t axis = onnx_attr_int(n, "axis", coerce ? 1 : -1);
  if (nd == 0) return math_out(n, out, 0, math_cast_to(softmax_kind(n->op_type, x, 0), dt));
  if (!coerce) {
    int a = math_axis(n, axis, nd);
    if (a < 0) return TG_ERR_ARG;
    return math_out(n, out, 0, math_cast_to(softmax_kind(n->op_type, x, a), dt));
  }
  /* before opset 13: x as a matrix (prod(shape[:axis]), prod(shape[axis:])), the op along its rows. axis may
   * equal the rank (a matrix of one column) */
  if (axis < -(int64_t)nd || axis > nd) return onnx_fail(n, TG_ERR_ARG, "axis %lld out of range for rank %d", (long long)axis, nd);
  if (axis < 0) axis += nd;
  int64_t m[2] = {1, 1};
  for (int i = 0; i < nd; i++) m[i >= axis] *= tg_shape(x, i);
  tg_tensor *y = softmax_kind(n->op_type, tg_reshape(x, 2, m), 1);
  return math_out(n, out, 0, math_cast_to(tg_reshape(y, nd, tg_shape_ptr(x)), dt));
}

/* ---- TopK ---------------------------------------------------------------------------------------------- */

MATH_OP(op_topk) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  int opset = onnx_opset(c, "");
  int64_t k = 0, count = 0;
  if (opset < 10) {
    if (!onnx_attr_has(n, "k")) return onnx_fail(n, TG_ERR_ARG, "attribute 'k' is missing");
    k = onnx_attr_int(n, "k", 0);
  } else {
    tg_status st = onnx_input_ints(c, n, in, 1, &k, 1, &count);
    if (st) return st;
    if (count != 1) return onnx_fail(n, TG_ERR_ARG, "K holds %lld values, not 1", (long long)count);
  }
  int nd = tg_ndim(x);
  int a = nd == 0 ? 0 : math_axis(n, onnx_attr_int(n, "axis", -1), nd);
  if (a < 0) return TG_ERR_ARG;
  int64_t size = nd == 0 ? 1 : tg_shape(x, a);
  if (k < 0 || k > size) return onnx_fail(n, TG_ERR_ARG, "k %lld out of range for axis %d of size %lld", (long long)k, a, (long long)size);
  bool largest = opset < 11 || onnx_attr_int(n, "largest", 1) != 0;
  bool sorted = opset < 11 || onnx_attr_int(n, "sorted", 1) != 0;
  tg_tensor *vals = NULL, *idx = NULL;
  if (tg_topk(x, k, a, largest, sorted, &vals, &idx)) return math_fail_tg(n);
  tg_status st = math_out(n, out, 0, vals);
  if (!st && n->nout > 1) st = math_out(n, out, 1, math_cast_to(idx, TG_INT64));
  return st;
}

/* ---- CumSum and CumProd ------------------------------------------------------------------------------ */

/* the running sum along the axis given as input 1; exclusive leaves out the element itself, reverse runs from
 * the end */
MATH_OP(op_cumsum) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  int64_t axis = 0, count = 0;
  tg_status st = onnx_input_ints(c, n, in, 1, &axis, 1, &count);
  if (st) return st;
  if (count != 1) return onnx_fail(n, TG_ERR_ARG, "axis holds %lld values, not 1", (long long)count);
  int nd = tg_ndim(x);
  if (nd == 0) return onnx_fail(n, TG_ERR_ARG, "the input is a scalar (rank 0)");
  int a = math_axis(n, axis, nd);
  if (a < 0) return TG_ERR_ARG;
  bool reverse = onnx_attr_int(n, "reverse", 0) != 0, prod = !strcmp(n->op_type, "CumProd");
  tg_tensor *xs = reverse ? tg_flip(x, 1, &a) : x;
  if (onnx_attr_int(n, "exclusive", 0)) {
    /* shift by one along the axis: the identity (0, or 1 for a product) in front, the last element dropped */
    int64_t pairs[2 * TG_MAX_DIMS] = {0}, bounds[2 * TG_MAX_DIMS];
    pairs[2 * a] = 1;
    for (int i = 0; i < nd; i++) bounds[2 * i] = 0, bounds[2 * i + 1] = tg_shape(x, i);
    xs = tg_shrink(tg_pad_axes(xs, nd, pairs, prod ? 1 : 0), nd, bounds);
  }
  tg_tensor *r = prod ? tg_cumprod(xs, a) : tg_cumsum(xs, a);
  if (reverse) r = tg_flip(r, 1, &a);
  return math_out(n, out, 0, math_cast_to(r, tg_dtype_of(x)));
}

/* ---- Det ----------------------------------------------------------------------------------------------- */

/* the determinant of each square matrix in the last two axes: (*, n, n) -> (*) */
MATH_OP(op_det) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  tg_tensor *d = tg_det(x);
  if (!d) return math_fail_tg(n);
  return math_out(n, out, 0, d);
}

/* ---- Einsum -------------------------------------------------------------------------------------------- */

MATH_OP(op_einsum) {
  const char *eq = onnx_attr_string(n, "equation", NULL);
  if (!eq) return onnx_fail(n, TG_ERR_ARG, "attribute 'equation' is missing");
  if (n->nin < 1) return onnx_fail(n, TG_ERR_ARG, "needs at least one input");
  for (int i = 0; i < n->nin; i++)
    if (!in[i]) return onnx_fail(n, TG_ERR_ARG, "input %d is missing", i);
  return math_out(n, out, 0, math_cast_to(tg_einsum(eq, n->nin, in), tg_dtype_of(in[0])));
}
