/* onnx_ops_seq.c — ONNX's sequence operators (opset 11 on): SequenceEmpty, SequenceConstruct, SequenceInsert,
 * SequenceErase, SequenceAt, SequenceLength, SplitToSequence and ConcatFromSequence, over the runner's
 * sequence values (onnx_run.h: a list of tensor references of one dtype), and Identity, which passes either
 * kind of value, and Optional, OptionalHasElement and OptionalGetElement over present values: the operators in
 * this file's table are the only ones the runner gives a sequence to. A sequence lives inside a graph run:
 * the models PyTorch exports for a list of tensors (torch.split, then a loop or a cat over the parts) build
 * one, take it apart and give tensors out. Making or reading a sequence runs nothing: the tensors stay lazy
 * and the parts of a split are views. Graph inputs and outputs that are sequences are refused at load. */
#include <stdlib.h>
#include <string.h>

#include "onnx_run.h"
#include "tensor/tensor.h"
#include "uop/uop.h"

/* the most tensors a sequence may hold here (a hostile split of a huge axis into ones would make that many) */
#define SEQ_MAX ((int64_t)1 << 20)

static const onnx_seq *seq_in(onnx_ctx *c, const onnx_node *n, int i, tg_status *st) {
  const onnx_seq *s = onnx_input_seq(c, n, i);
  if (!s) *st = onnx_fail(n, TG_ERR_ARG, "input %d is not a sequence", i);
  return s;
}

/* a position input (a scalar, int32 or int64) in [-len, len + extra), made non-negative; dflt when left out */
static tg_status seq_position(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, int64_t len, int64_t extra,
                              int64_t dflt, int64_t *pos) {
  if (i >= n->nin || !in[i]) {
    *pos = dflt;
    return TG_OK;
  }
  tg_dtype dt = tg_dtype_of(in[i]);
  if ((dt != TG_INT32 && dt != TG_INT64) || tg_numel(in[i]) != 1)
    return onnx_fail(n, TG_ERR_ARG, "position (input %d) must be one int32 or int64 value", i);
  int64_t cnt = 0;
  tg_status st = onnx_input_ints(c, n, in, i, pos, 1, &cnt);
  if (st) return st;
  if (*pos < -len || *pos >= len + extra)
    return onnx_fail(n, TG_ERR_ARG, "position %lld is out of range for a sequence of %lld", (long long)*pos, (long long)len);
  if (*pos < 0) *pos += len;
  return TG_OK;
}

/* Identity: a tensor, or a sequence (a new one sharing its tensors) */
static tg_status op_identity(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  const onnx_seq *s = onnx_input_seq(c, n, 0);
  if (s) {
    onnx_seq *r = onnx_seq_new(s->n, s->dt);
    if (!r) return onnx_fail(n, TG_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < s->n; i++) r->items[i] = tg_retain(s->items[i]);
    return onnx_set_seq(c, 0, r);
  }
  if (n->nin < 1 || !in[0]) return onnx_fail(n, TG_ERR_ARG, "needs an input");
  out[0] = tg_retain(in[0]);
  return TG_OK;
}

static tg_status op_sequence_empty(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_dtype dt = TG_FLOAT32;
  int64_t ot = onnx_attr_int(n, "dtype", 0);
  if (ot && !onnx_dtype_to_tg((int32_t)ot, &dt)) return onnx_fail(n, TG_ERR_ARG, "dtype %lld is not supported", (long long)ot);
  onnx_seq *s = onnx_seq_new(0, dt);
  return s ? onnx_set_seq(c, 0, s) : onnx_fail(n, TG_ERR_NOMEM, "out of memory");
}

static tg_status op_sequence_construct(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  if (n->nin < 1) return onnx_fail(n, TG_ERR_ARG, "needs at least one input");
  for (int i = 0; i < n->nin; i++) {
    if (!in[i]) return onnx_fail(n, TG_ERR_ARG, "input %d is missing or a sequence", i);
    if (tg_dtype_of(in[i]) != tg_dtype_of(in[0]))
      return onnx_fail(n, TG_ERR_ARG, "input %d is %s where input 0 is %s: a sequence holds one dtype", i,
                       tg_dtype_name(tg_dtype_of(in[i])), tg_dtype_name(tg_dtype_of(in[0])));
  }
  onnx_seq *s = onnx_seq_new(n->nin, tg_dtype_of(in[0]));
  if (!s) return onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n->nin; i++) s->items[i] = tg_retain(in[i]);
  return onnx_set_seq(c, 0, s);
}

static tg_status op_sequence_insert(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_status st = TG_OK;
  const onnx_seq *s = seq_in(c, n, 0, &st);
  if (!s) return st;
  tg_tensor *t = n->nin > 1 ? in[1] : NULL;
  if (!t) return onnx_fail(n, TG_ERR_ARG, "input 1 (the tensor) is missing or a sequence");
  if (tg_dtype_of(t) != s->dt)
    return onnx_fail(n, TG_ERR_ARG, "inserts a %s tensor into a sequence of %s", tg_dtype_name(tg_dtype_of(t)),
                     tg_dtype_name(s->dt));
  if (s->n >= SEQ_MAX) return onnx_fail(n, TG_ERR_ARG, "a sequence of more than %lld tensors", (long long)SEQ_MAX);
  int64_t pos;
  if ((st = seq_position(c, n, in, 2, s->n, 1, s->n, &pos))) return st;
  onnx_seq *r = onnx_seq_new(s->n + 1, s->dt);
  if (!r) return onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  for (int64_t i = 0, j = 0; i <= s->n; i++) r->items[i] = tg_retain(i == pos ? t : s->items[j++]);
  return onnx_set_seq(c, 0, r);
}

static tg_status op_sequence_erase(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_status st = TG_OK;
  const onnx_seq *s = seq_in(c, n, 0, &st);
  if (!s) return st;
  if (s->n == 0) return onnx_fail(n, TG_ERR_ARG, "erases from an empty sequence");
  int64_t pos;
  if ((st = seq_position(c, n, in, 1, s->n, 0, s->n - 1, &pos))) return st;
  onnx_seq *r = onnx_seq_new(s->n - 1, s->dt);
  if (!r) return onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  for (int64_t i = 0, j = 0; i < s->n; i++)
    if (i != pos) r->items[j++] = tg_retain(s->items[i]);
  return onnx_set_seq(c, 0, r);
}

static tg_status op_sequence_at(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_status st = TG_OK;
  const onnx_seq *s = seq_in(c, n, 0, &st);
  if (!s) return st;
  if (n->nin < 2 || !in[1]) return onnx_fail(n, TG_ERR_ARG, "input 1 (the position) is missing");
  int64_t pos;
  if ((st = seq_position(c, n, in, 1, s->n, 0, 0, &pos))) return st;
  out[0] = tg_retain(s->items[pos]);
  return TG_OK;
}

static tg_status op_sequence_length(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_status st = TG_OK;
  const onnx_seq *s = seq_in(c, n, 0, &st);
  if (!s) return st;
  int64_t len = s->n;
  if (!(out[0] = tg_from_data(TG_INT64, 0, NULL, &len, sizeof len))) return onnx_fail(n, TG_ERR_NOMEM, "%s", tg_error());
  return onnx_set_known(c, 0, &len, 1);
}

/* SplitToSequence: split left out, parts of 1 (their axis dropped unless keepdims); a scalar, parts of that
 * size (the last one shorter); a vector, the parts' sizes */
static tg_status op_split_to_sequence(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0];
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing or a sequence");
  int nd = tg_ndim(x);
  int64_t axis = onnx_attr_int(n, "axis", 0);
  if (axis < -nd || axis >= nd) return onnx_fail(n, TG_ERR_ARG, "axis %lld out of range for rank %d", (long long)axis, nd);
  if (axis < 0) axis += nd;
  int64_t dim = tg_shape_ptr(x)[axis];
  bool keepdims = onnx_attr_int(n, "keepdims", 1) != 0, given = n->nin > 1 && in[1];
  bool vector = given && tg_ndim(in[1]) > 0;
  int64_t nparts = dim, each = 1, *sizes = NULL;   /* parts of `each` unless split is a vector */
  tg_status st = TG_OK;
  if (given && !vector) {
    int64_t cnt = 0;
    if ((st = onnx_input_ints(c, n, in, 1, &each, 1, &cnt))) return st;
    if (each <= 0) return onnx_fail(n, TG_ERR_ARG, "split %lld is not positive", (long long)each);
    nparts = (dim + each - 1) / each;
  } else if (vector) {
    nparts = tg_numel(in[1]);
  }
  if (nparts > SEQ_MAX) return onnx_fail(n, TG_ERR_ARG, "%lld parts: more than %lld", (long long)nparts, (long long)SEQ_MAX);
  sizes = mem_alloc((size_t)(nparts ? nparts : 1) * sizeof *sizes);
  if (!sizes) return onnx_fail(n, TG_ERR_NOMEM, "out of memory for %lld parts", (long long)nparts);
  if (!vector) {
    for (int64_t p = 0; p < nparts; p++) sizes[p] = dim - p * each < each ? dim - p * each : each;
  } else {
    int64_t cnt = 0, sum = 0;
    st = onnx_input_ints(c, n, in, 1, sizes, nparts, &cnt);
    for (int64_t p = 0; !st && p < nparts; p++) {
      if (sizes[p] < 0) st = onnx_fail(n, TG_ERR_ARG, "split[%lld] = %lld is negative", (long long)p, (long long)sizes[p]);
      sum += sizes[p];
    }
    if (!st && sum != dim)
      st = onnx_fail(n, TG_ERR_ARG, "split sums to %lld, axis %lld has %lld", (long long)sum, (long long)axis, (long long)dim);
  }
  onnx_seq *s = st ? NULL : onnx_seq_new(nparts, tg_dtype_of(x));
  if (!st && !s) st = onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  int64_t bounds[2 * 8];
  const int64_t *shape = tg_shape_ptr(x);
  if (!st && nd > 8) st = onnx_fail(n, TG_ERR_ARG, "rank %d: at most 8 is supported", nd);
  for (int64_t p = 0, at = 0; !st && p < nparts; at += sizes[p++]) {
    for (int a = 0; a < nd; a++) bounds[2 * a] = 0, bounds[2 * a + 1] = shape[a];
    bounds[2 * axis] = at;
    bounds[2 * axis + 1] = at + sizes[p];
    tg_tensor *part = tg_shrink(x, nd, bounds);
    if (part && !given && !keepdims) {
      tg_tensor *sq = tg_squeeze(part, (int)axis);
      tg_free(part);
      part = sq;
    }
    if (!part) st = onnx_fail(n, TG_ERR_ARG, "%s", tg_error());
    else s->items[p] = tensor_unscope(part);
  }
  free(sizes);
  if (st) {
    onnx_seq_free(s);
    return st;
  }
  return onnx_set_seq(c, 0, s);
}

/* ConcatFromSequence: the tensors joined along axis, or stacked on a new axis there (new_axis = 1) */
static tg_status op_concat_from_sequence(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_status st = TG_OK;
  const onnx_seq *s = seq_in(c, n, 0, &st);
  if (!s) return st;
  if (!onnx_attr_has(n, "axis")) return onnx_fail(n, TG_ERR_ARG, "attribute 'axis' is missing");
  if (s->n == 0) return onnx_fail(n, TG_ERR_ARG, "joins an empty sequence");
  if (s->n > INT32_MAX) return onnx_fail(n, TG_ERR_ARG, "joins %lld tensors", (long long)s->n);
  bool stack = onnx_attr_int(n, "new_axis", 0) != 0;
  int nd = tg_ndim(s->items[0]) + (stack ? 1 : 0);
  int64_t axis = onnx_attr_int(n, "axis", 0);
  if (axis < -nd || axis >= nd) return onnx_fail(n, TG_ERR_ARG, "axis %lld out of range for rank %d", (long long)axis, nd);
  if (axis < 0) axis += nd;
  tg_tensor *y = stack ? tg_stack((int)s->n, s->items, (int)axis) : tg_cat((int)s->n, s->items, (int)axis);
  if (!y) return onnx_fail(n, TG_ERR_ARG, "%s", tg_error());
  out[0] = y;
  return TG_OK;
}

/* ---- optionals: an optional holding a value is that value here (a present tensor or sequence); an empty one is
 * a left-out input ("") ---- */

static tg_status op_optional_has_element(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  bool has = (n->nin > 0 && in[0]) || onnx_input_seq(c, n, 0);
  if (!(out[0] = tg_full(TG_BOOL, 0, NULL, has))) return onnx_fail(n, TG_ERR_NOMEM, "%s", tg_error());
  return TG_OK;
}

static tg_status op_optional_get_element(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  if (!((n->nin > 0 && in[0]) || onnx_input_seq(c, n, 0))) return onnx_fail(n, TG_ERR_ARG, "the optional is empty");
  return op_identity(c, n, in, out);
}

/* Optional(x): x itself; an empty optional (no input) has no value here to hold it */
static tg_status op_optional(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  if (!((n->nin > 0 && in[0]) || onnx_input_seq(c, n, 0)))
    return onnx_fail(n, TG_ERR_ARG, "an empty optional (no input) is not supported");
  return op_identity(c, n, in, out);
}

const onnx_op_def onnx_ops_seq[] = {
    {"Identity", "", 1, op_identity},
    {"SequenceEmpty", "", 11, op_sequence_empty},
    {"SequenceConstruct", "", 11, op_sequence_construct},
    {"SequenceInsert", "", 11, op_sequence_insert},
    {"SequenceErase", "", 11, op_sequence_erase},
    {"SequenceAt", "", 11, op_sequence_at},
    {"SequenceLength", "", 11, op_sequence_length},
    {"SplitToSequence", "", 11, op_split_to_sequence},
    {"ConcatFromSequence", "", 11, op_concat_from_sequence},
    {"Optional", "", 15, op_optional},
    {"OptionalHasElement", "", 15, op_optional_has_element},
    {"OptionalGetElement", "", 15, op_optional_get_element},
    {NULL, NULL, 0, NULL},
};

bool onnx_op_takes_seqs(const onnx_op_def *d) {
  for (const onnx_op_def *e = onnx_ops_seq; e->op_type; e++)
    if (e == d) return true;
  return false;
}
