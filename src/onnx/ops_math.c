/* ops_math.c — ONNX's elementwise operators (math, activations, comparisons, logic, bitwise, casts, Clip,
 * Where, the variadic Sum/Mean/Max/Min), and the table onnx_ops_math, which also lists the reductions, the
 * softmax family, ArgMax/ArgMin, TopK, CumSum, Einsum and Det of ops_math_reduce.c, the windows, DFT, STFT and
 * MelWeightMatrix of ops_math_signal.c, the random operators of ops_math_random.c and TfIdfVectorizer of
 * ops_math_text.c (see onnx_op.h for the contract).
 *
 * Each operator is a few tg.h calls, as in tinygrad's onnx.py. Where tinygrad's semantics differ from ONNX's
 * reference implementation (onnx/reference/ops), the ONNX behaviour is composed explicitly: results keep the
 * input's type (tinygrad promotes small ints in sums and ints to float in float math), integer Div truncates,
 * Pow takes the base's type, Max/Min propagate a NaN from either side, Mod's fmod attribute picks python's or
 * C's sign rule. Shape arithmetic on values the runner knows is also evaluated on the host (math_known). */
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "ops_math.h"
#include "../uop/uop.h"

/* ---- helpers shared with ops_math_reduce.c and ops_math_known.c ------------------------------------- */

tg_status math_fail_tg(const onnx_node *n) {
  tg_status st = tg_error_status();
  return onnx_fail(n, st == TG_OK ? TG_ERR_ARG : st, "%s", tg_error());
}

tg_status math_out(const onnx_node *n, tg_tensor **out, int k, tg_tensor *t) {
  if (!t) return math_fail_tg(n);
  out[k] = tg_keep(t);
  return TG_OK;
}

tg_tensor *math_cast_to(tg_tensor *t, tg_dtype dt) { return t && tg_dtype_of(t) != dt ? tg_cast(t, dt) : t; }

tg_tensor *math_copy(tg_tensor *t) { return tg_reshape(t, tg_ndim(t), tg_shape_ptr(t)); }

int math_axis(const onnx_node *n, int64_t axis, int ndim) {
  if (axis < -(int64_t)ndim || axis >= ndim) {
    onnx_fail(n, TG_ERR_ARG, "axis %lld out of range for rank %d", (long long)axis, ndim);
    return -1;
  }
  return (int)(axis < 0 ? axis + ndim : axis);
}

static bool is_float(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64; }
static bool is_int(tg_dtype dt) { return dt >= TG_INT8 && dt <= TG_UINT64; }

/* the input i the node must have */
static tg_status need(const onnx_node *n, tg_tensor *const *in, int i) {
  return math_in(n, in, i) ? TG_OK : onnx_fail(n, TG_ERR_ARG, "input %d is missing", i);
}

/* the one value of input i when the runner holds it on the host (a constant or an initializer: a Pow's
 * exponent, a Clip's bounds), so the op can take it as a constant (x * x for Pow(x, 2)); false for a tensor of
 * several values or one computed by the graph (then the op works on the tensor: no kernel runs, nothing is read
 * from the device, and a tg_jit replay computes with the new values) */
static bool scalar_input(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, double *v) {
  int64_t count = 0;
  if (i >= n->nin || !in[i] || tg_numel(in[i]) != 1 || !math_input_known(c, n, in, i)) return false;
  if (onnx_input_doubles(c, n, in, i, v, 1, &count) != TG_OK || count != 1) {
    tg_error_clear();
    return false;
  }
  return true;
}

/* ---- unary operators without attributes: one function, looked up by op_type ------------------------ */

static tg_tensor *isnan_(tg_tensor *t) { return tg_isnan(t); }

static const struct {
  const char *op;
  tg_tensor *(*fn)(tg_tensor *);
  bool keep_type;  /* the result has the input's type (ONNX's T -> T) */
} unary_ops[] = {
    {"Abs", tg_abs, true},          {"Acos", tg_acos, true},         {"Acosh", tg_acosh, true},
    {"Asin", tg_asin, true},        {"Asinh", tg_asinh, true},       {"Atan", tg_atan, true},
    {"Atanh", tg_atanh, true},      {"Ceil", tg_ceil, true},         {"Cos", tg_cos, true},
    {"Cosh", tg_cosh, true},        {"Erf", tg_erf, true},           {"Exp", tg_exp, true},
    {"Floor", tg_floor, true},      {"Log", tg_log, true},           {"Neg", tg_neg, true},
    {"Reciprocal", tg_reciprocal, true}, {"Relu", tg_relu, true},    {"Round", tg_round, true},
    {"Sigmoid", tg_sigmoid, true},  {"Sign", tg_sign, true},         {"Sin", tg_sin, true},
    {"Sinh", tg_sinh, true},        {"Softplus", tg_softplus, true}, {"Softsign", tg_softsign, true},
    {"Sqrt", tg_sqrt, true},        {"Tan", tg_tan, true},           {"Tanh", tg_tanh, true},
    {"HardSwish", tg_hardswish, true}, {"Mish", tg_mish, true},      {"Not", tg_logical_not, false},
    {"BitwiseNot", tg_bitwise_not, true}, {"IsNaN", isnan_, false},
};

MATH_OP(op_unary) {
  tg_status st = need(n, in, 0);
  if (st) return st;
  for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++) {
    if (strcmp(n->op_type, unary_ops[i].op)) continue;
    tg_tensor *r = unary_ops[i].fn(in[0]);
    if (unary_ops[i].keep_type) r = math_cast_to(r, tg_dtype_of(in[0]));
    if ((st = math_out(n, out, 0, r))) return st;
    math_known(c, n, in, out[0]);
    return TG_OK;
  }
  return onnx_fail(n, TG_ERR_INTERNAL, "not a unary operator");
}

/* ---- activations with attributes ------------------------------------------------------------------- */

MATH_OP(op_activation) {
  tg_status st = need(n, in, 0);
  if (st) return st;
  tg_tensor *x = in[0], *r = NULL;
  const char *op = n->op_type;
  if (!strcmp(op, "Elu")) {
    r = tg_elu(x, onnx_attr_float(n, "alpha", 1.0));
  } else if (!strcmp(op, "Celu")) {
    double alpha = onnx_attr_float(n, "alpha", 1.0);
    if (alpha == 0) return onnx_fail(n, TG_ERR_ARG, "alpha must not be 0");
    r = tg_celu(x, alpha);
  } else if (!strcmp(op, "Selu")) {
    r = tg_selu_ag(x, onnx_attr_float(n, "alpha", 1.67326319217681884765625),
                   onnx_attr_float(n, "gamma", 1.05070102214813232421875));
  } else if (!strcmp(op, "LeakyRelu")) {
    r = tg_leaky_relu(x, onnx_attr_float(n, "alpha", 0.01));
  } else if (!strcmp(op, "HardSigmoid")) {
    r = tg_hardsigmoid_ab(x, onnx_attr_float(n, "alpha", 0.2), onnx_attr_float(n, "beta", 0.5));
  } else if (!strcmp(op, "ThresholdedRelu")) {
    r = tg_where_scalar(tg_gt_scalar(x, onnx_attr_float(n, "alpha", 1.0)), x, 0);
  } else if (!strcmp(op, "Shrink")) {
    /* x < -lambd ? x + bias : x > lambd ? x - bias : 0 */
    double bias = onnx_attr_float(n, "bias", 0.0), lambd = onnx_attr_float(n, "lambd", 0.5);
    tg_tensor *hi = tg_where_scalar(tg_gt_scalar(x, lambd), tg_sub_scalar(x, bias), 0);
    r = tg_where(tg_lt_scalar(x, -lambd), tg_add_scalar(x, bias), hi);
  } else if (!strcmp(op, "IsInf")) {
    return math_out(n, out, 0, tg_isinf(x, onnx_attr_int(n, "detect_positive", 1) != 0,
                                        onnx_attr_int(n, "detect_negative", 1) != 0));
  } else if (!strcmp(op, "Swish")) {
    r = tg_mul(x, tg_sigmoid(tg_mul_scalar(x, onnx_attr_float(n, "alpha", 1.0))));
  } else if (!strcmp(op, "Gelu")) {
    const char *approx = onnx_attr_string(n, "approximate", "none");
    if (strcmp(approx, "none") && strcmp(approx, "tanh"))
      return onnx_fail(n, TG_ERR_ARG, "approximate '%s' is neither \"none\" nor \"tanh\"", approx);
    r = tg_gelu_mode(x, strcmp(approx, "tanh") ? TG_GELU_NONE : TG_GELU_TANH);
  } else {
    return onnx_fail(n, TG_ERR_INTERNAL, "not an activation");
  }
  return math_out(n, out, 0, math_cast_to(r, tg_dtype_of(x)));
}

/* BitCast (opset 26): the bits read as `to`, which has the input's element size; bool is 0 or 1 in its byte */
MATH_OP(op_bitcast) {
  tg_status st = need(n, in, 0);
  if (st) return st;
  tg_tensor *x = in[0];
  tg_dtype to, from = tg_dtype_of(x);
  int64_t ot = onnx_attr_int(n, "to", 0);
  if (!onnx_dtype_to_tg((int32_t)ot, &to)) return onnx_fail(n, TG_ERR_ARG, "to = %lld is not a supported type", (long long)ot);
  if (tg_dtype_size(to) != tg_dtype_size(from))
    return onnx_fail(n, TG_ERR_ARG, "%s and %s differ in size", tg_dtype_name(from), tg_dtype_name(to));
  if (from == to) return math_out(n, out, 0, math_copy(x));
  if (from == TG_BOOL || to == TG_BOOL) {   /* through uint8: a bool's byte is its 0 or 1 */
    tg_tensor *u = from == TG_BOOL ? tg_cast(x, TG_UINT8) : (from == TG_UINT8 ? x : tg_bitcast(x, TG_UINT8));
    return math_out(n, out, 0, to == TG_BOOL ? tg_ne_scalar(u, 0) : (to == TG_UINT8 ? u : tg_bitcast(u, to)));
  }
  if (tg_ndim(x) == 0) {   /* tg_bitcast wants an axis */
    int64_t one = 1;
    return math_out(n, out, 0, tg_reshape(tg_bitcast(tg_reshape(x, 1, &one), to), 0, NULL));
  }
  return math_out(n, out, 0, tg_bitcast(x, to));
}

/* SwiGLU (opset 28): Swish(a) * b, a and b of one shape and dtype */
MATH_OP(op_swiglu) {
  tg_status st = need(n, in, 0);
  if (st || (st = need(n, in, 1))) return st;
  tg_tensor *a = in[0], *b = in[1];
  int nd = tg_ndim(a);
  bool same = nd == tg_ndim(b) && tg_dtype_of(a) == tg_dtype_of(b);
  for (int i = 0; same && i < nd; i++) same = tg_shape(a, i) == tg_shape(b, i);
  if (!same) return onnx_fail(n, TG_ERR_ARG, "A and B differ in shape or dtype (SwiGLU does not broadcast)");
  tg_tensor *swish = tg_mul(a, math_cast_to(tg_sigmoid(tg_mul_scalar(a, onnx_attr_float(n, "alpha", 1.0))), tg_dtype_of(a)));
  return math_out(n, out, 0, math_cast_to(tg_mul(swish, b), tg_dtype_of(a)));
}

/* PRelu: x < 0 ? slope * x : x. From opset 7 slope broadcasts to x (numpy); before, a vector slope holds one
 * value per channel (x's axis 1) */
MATH_OP(op_prelu) {
  tg_status st = need(n, in, 0);
  if (st || (st = need(n, in, 1))) return st;
  tg_tensor *x = in[0], *slope = math_cast_to(in[1], tg_dtype_of(x));
  int nd = tg_ndim(x);
  if (onnx_opset(c, "") < 7 && tg_ndim(slope) == 1 && nd >= 2 && tg_numel(slope) > 1 && tg_numel(slope) == tg_shape(x, 1)) {
    int64_t shape[TG_MAX_DIMS];
    for (int i = 0; i < nd - 1; i++) shape[i] = i == 0 ? tg_numel(slope) : 1;
    slope = tg_reshape(slope, nd - 1, shape);
  }
  tg_tensor *r = tg_where(tg_lt_scalar(x, 0), tg_mul(x, slope), x);
  return math_out(n, out, 0, math_cast_to(r, tg_dtype_of(x)));
}

/* ---- binary operators ------------------------------------------------------------------------------ */

/* Before opset 7, a binary op's B broadcasts only with broadcast=1, and with an axis attribute B's dims line up
 * with A's starting at axis (suffix matching, numpy's rule, otherwise). B reshaped so numpy's rule does that. */
static tg_tensor *legacy_broadcast(onnx_ctx *c, const onnx_node *n, tg_tensor *a, tg_tensor *b) {
  if (onnx_opset(c, "") >= 7 || !onnx_attr_int(n, "broadcast", 0) || !onnx_attr_has(n, "axis")) return b;
  int an = tg_ndim(a), bn = tg_ndim(b);
  int64_t axis = onnx_attr_int(n, "axis", 0);
  if (axis < 0) axis += an;
  if (axis < 0 || axis > an - bn) {
    onnx_fail(n, TG_ERR_ARG, "broadcast axis %lld does not fit B (rank %d) into A (rank %d)",
              (long long)onnx_attr_int(n, "axis", 0), bn, an);
    return NULL;
  }
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < an; i++) shape[i] = i >= axis && i < axis + bn ? tg_shape(b, (int)(i - axis)) : 1;
  tg_tensor *r = tg_reshape(b, an, shape);
  if (!r) math_fail_tg(n);
  return r;
}

/* a op b for the arithmetic, comparison, logic and bitwise binary operators; NULL (error set) if op is none */
static tg_tensor *binary(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, const char *op, tg_tensor *a,
                         tg_tensor *b) {
  tg_dtype dt = tg_dtype_of(a);
  if (!strcmp(op, "Add") || !strcmp(op, "Sum")) return math_cast_to(tg_add(a, b), dt);
  if (!strcmp(op, "Sub")) return math_cast_to(tg_sub(a, b), dt);
  if (!strcmp(op, "Mul")) return math_cast_to(tg_mul(a, b), dt);
  if (!strcmp(op, "Div")) return math_cast_to(is_int(dt) ? tg_idiv(a, b) : tg_div(a, b), dt);
  if (!strcmp(op, "Mod"))
    return math_cast_to(onnx_attr_int(n, "fmod", 0) ? tg_fmod(a, b) : tg_mod(a, b), dt);
  if (!strcmp(op, "Pow")) {
    /* ONNX: the base's type, the power truncated (numpy's astype). A float power that an exact computation
     * would make an integer may come out just below it (exp2/log2: 3^6 as 728.9999): within 1e-3 of an
     * integer it is taken as that integer */
    double e;
    if (is_float(dt) && in && tg_numel(b) == 1 && tg_ndim(b) <= tg_ndim(a) && scalar_input(c, n, in, 1, &e))
      return math_cast_to(tg_pow_scalar(a, e), dt);   /* a constant exponent: x * x for 2 */
    tg_tensor *p = tg_pow(a, b);
    if (p && !is_float(dt) && is_float(tg_dtype_of(p))) {
      tg_tensor *near = tg_round(p);
      p = tg_where(tg_lt_scalar(tg_abs(tg_sub(p, near)), 1e-3), near, tg_trunc(p));
    }
    return math_cast_to(p, dt);
  }
  if (!strcmp(op, "Max") || !strcmp(op, "Min")) {
    tg_tensor *m = !strcmp(op, "Max") ? tg_maximum(a, b) : tg_minimum(a, b);
    /* tinygrad's maximum passes a NaN in a through but not one in b; ONNX (numpy) propagates both */
    if (m && is_float(tg_dtype_of(m))) m = tg_where(tg_isnan(b), math_cast_to(b, tg_dtype_of(m)), m);
    return math_cast_to(m, dt);
  }
  if (!strcmp(op, "Equal")) return tg_eq(a, b);
  if (!strcmp(op, "Greater")) return tg_gt(a, b);
  /* tinygrad's a >= b is not(a < b), true for a NaN; ONNX (IEEE) compares false */
  if (!strcmp(op, "GreaterOrEqual"))
    return is_float(dt) || is_float(tg_dtype_of(b)) ? tg_bitwise_or(tg_gt(a, b), tg_eq(a, b)) : tg_ge(a, b);
  if (!strcmp(op, "Less")) return tg_lt(a, b);
  if (!strcmp(op, "LessOrEqual"))
    return is_float(dt) || is_float(tg_dtype_of(b)) ? tg_bitwise_or(tg_lt(a, b), tg_eq(a, b)) : tg_le(a, b);
  if (!strcmp(op, "And")) return tg_bitwise_and(math_cast_to(a, TG_BOOL), math_cast_to(b, TG_BOOL));
  if (!strcmp(op, "Or")) return tg_bitwise_or(math_cast_to(a, TG_BOOL), math_cast_to(b, TG_BOOL));
  if (!strcmp(op, "Xor")) return tg_bitwise_xor(math_cast_to(a, TG_BOOL), math_cast_to(b, TG_BOOL));
  if (!strcmp(op, "BitwiseAnd")) return tg_bitwise_and(a, b);
  if (!strcmp(op, "BitwiseOr")) return tg_bitwise_or(a, b);
  if (!strcmp(op, "BitwiseXor")) return tg_bitwise_xor(a, b);
  if (!strcmp(op, "BitShift")) {
    const char *dir = onnx_attr_string(n, "direction", "");
    if (!strcmp(dir, "LEFT")) return math_cast_to(tg_lshift(a, b), dt);
    if (!strcmp(dir, "RIGHT")) return math_cast_to(tg_rshift(a, b), dt);
    tg_set_error(TG_ERR_ARG, "direction '%s' is neither LEFT nor RIGHT", dir);
    return NULL;
  }
  tg_set_error(TG_ERR_INTERNAL, "not a binary operator");
  return NULL;
}

MATH_OP(op_binary) {
  tg_status st = need(n, in, 0);
  if (st || (st = need(n, in, 1))) return st;
  tg_tensor *b = legacy_broadcast(c, n, in[0], in[1]);
  if (!b) return tg_error_status();
  if ((st = math_out(n, out, 0, binary(c, n, in, n->op_type, in[0], b)))) return st;
  math_known(c, n, in, out[0]);
  return TG_OK;
}

/* Sum, Mean, Max, Min over one or more inputs, broadcast together */
MATH_OP(op_variadic) {
  tg_status st = TG_OK;
  int k = 0;
  for (int i = 0; i < n->nin; i++) k += in[i] != NULL;
  if (k == 0 || (st = need(n, in, 0))) return st ? st : onnx_fail(n, TG_ERR_ARG, "needs at least one input");
  bool mean = !strcmp(n->op_type, "Mean");
  const char *op = mean ? "Sum" : n->op_type;
  tg_tensor *acc = in[0];
  for (int i = 1; i < n->nin && acc; i++)
    if (in[i]) acc = binary(c, n, NULL, op, acc, in[i]);
  if (k == 1) acc = math_copy(acc);
  if (mean && acc) acc = math_cast_to(tg_div_scalar(acc, (double)k), tg_dtype_of(in[0]));
  if ((st = math_out(n, out, 0, acc))) return st;
  if (!mean) math_known(c, n, in, out[0]);
  return TG_OK;
}

/* Where(cond, X, Y): X's type */
MATH_OP(op_where) {
  tg_status st = TG_OK;
  for (int i = 0; i < 3; i++)
    if ((st = need(n, in, i))) return st;
  tg_tensor *r = tg_where(math_cast_to(in[0], TG_BOOL), in[1], in[2]);
  if ((st = math_out(n, out, 0, math_cast_to(r, tg_dtype_of(in[1]))))) return st;
  math_known(c, n, in, out[0]);
  return TG_OK;
}

/* ---- casts ------------------------------------------------------------------------------------------ */

/* Cast(to): the saturate attribute (opset 19) concerns float8 targets only, which tgc lacks */
MATH_OP(op_cast) {
  tg_status st = need(n, in, 0);
  if (st) return st;
  tg_dtype dt;
  const onnx_attr *to = onnx_attr_find(n, "to");
  if (!to || to->type != ONNX_ATTR_INT) return onnx_fail(n, TG_ERR_ARG, "attribute 'to' is missing");
  if (to->i < INT32_MIN || to->i > INT32_MAX || !onnx_dtype_to_tg((int32_t)to->i, &dt))
    return onnx_fail(n, TG_ERR_ARG, "cannot cast to ONNX data type %lld (not a type tgc has)", (long long)to->i);
  if ((st = math_out(n, out, 0, tg_cast(in[0], dt)))) return st;
  math_known(c, n, in, out[0]);
  return TG_OK;
}

MATH_OP(op_castlike) {
  tg_status st = need(n, in, 0);
  if (st || (st = need(n, in, 1))) return st;
  if ((st = math_out(n, out, 0, tg_cast(in[0], tg_dtype_of(in[1]))))) return st;
  math_known(c, n, in, out[0]);
  return TG_OK;
}

/* ---- Clip --------------------------------------------------------------------------------------------- */

/* Clip: below min -> min, then above max -> max (numpy's clip: max wins when min > max); NaN stays NaN. Before
 * opset 11 the bounds are attributes, from 11 on optional inputs (tensors: they may be computed) */
MATH_OP(op_clip) {
  tg_status st = need(n, in, 0);
  if (st) return st;
  tg_tensor *x = in[0];
  if (onnx_opset(c, "") < 11) {
    bool lo = onnx_attr_has(n, "min"), hi = onnx_attr_has(n, "max");
    if (!lo && !hi) return math_out(n, out, 0, math_copy(x));
    return math_out(n, out, 0, tg_clamp(x, lo ? onnx_attr_float(n, "min", 0) : NAN,
                                        hi ? onnx_attr_float(n, "max", 0) : NAN));
  }
  tg_dtype dt = tg_dtype_of(x);
  double lo = NAN, hi = NAN;
  bool has_lo = n->nin > 1 && in[1], has_hi = n->nin > 2 && in[2];
  if (is_float(dt) && (has_lo || has_hi) && (!has_lo || (scalar_input(c, n, in, 1, &lo) && !isnan(lo))) &&
      (!has_hi || (scalar_input(c, n, in, 2, &hi) && !isnan(hi))))
    return math_out(n, out, 0, tg_clamp(x, lo, hi));   /* constant bounds (a NaN bound is tg_clamp's "none") */
  tg_tensor *r = x;
  if (n->nin > 1 && in[1]) {
    tg_tensor *lo = math_cast_to(in[1], dt);
    r = tg_where(tg_lt(r, lo), lo, r);
  }
  if (n->nin > 2 && in[2] && r) {
    tg_tensor *hi = math_cast_to(in[2], dt);
    r = tg_where(tg_gt(r, hi), hi, r);
  }
  if (r == x) r = math_copy(x);
  return math_out(n, out, 0, math_cast_to(r, dt));
}

/* ---- the table ------------------------------------------------------------------------------------- */

const onnx_op_def onnx_ops_math[] = {
    /* unary */
    {"Abs", "", 1, op_unary},           {"Acos", "", 7, op_unary},        {"Acosh", "", 9, op_unary},
    {"Asin", "", 7, op_unary},          {"Asinh", "", 9, op_unary},       {"Atan", "", 7, op_unary},
    {"Atanh", "", 9, op_unary},         {"Ceil", "", 1, op_unary},        {"Cos", "", 7, op_unary},
    {"Cosh", "", 9, op_unary},          {"Erf", "", 9, op_unary},         {"Exp", "", 1, op_unary},
    {"Floor", "", 1, op_unary},         {"Log", "", 1, op_unary},         {"Neg", "", 1, op_unary},
    {"Reciprocal", "", 1, op_unary},    {"Relu", "", 1, op_unary},        {"Round", "", 11, op_unary},
    {"Sigmoid", "", 1, op_unary},       {"Sign", "", 9, op_unary},        {"Sin", "", 7, op_unary},
    {"Sinh", "", 9, op_unary},          {"Softplus", "", 1, op_unary},    {"Softsign", "", 1, op_unary},
    {"Sqrt", "", 1, op_unary},          {"Tan", "", 7, op_unary},         {"Tanh", "", 1, op_unary},
    {"HardSwish", "", 14, op_unary},    {"Mish", "", 18, op_unary},       {"Not", "", 1, op_unary},
    {"BitwiseNot", "", 18, op_unary},   {"IsNaN", "", 9, op_unary},
    /* activations with attributes */
    {"Elu", "", 1, op_activation},      {"Celu", "", 12, op_activation}, {"Swish", "", 24, op_activation}, {"SwiGLU", "", 28, op_swiglu},   {"BitCast", "", 26, op_bitcast},  {"Selu", "", 1, op_activation},
    {"LeakyRelu", "", 1, op_activation}, {"HardSigmoid", "", 1, op_activation},
    {"ThresholdedRelu", "", 10, op_activation}, {"Shrink", "", 9, op_activation},
    {"IsInf", "", 10, op_activation},   {"Gelu", "", 20, op_activation},  {"PRelu", "", 1, op_prelu},
    /* binary */
    {"Add", "", 1, op_binary},          {"Sub", "", 1, op_binary},        {"Mul", "", 1, op_binary},
    {"Div", "", 1, op_binary},          {"Pow", "", 1, op_binary},        {"Mod", "", 10, op_binary},
    {"Equal", "", 1, op_binary},        {"Greater", "", 1, op_binary},    {"GreaterOrEqual", "", 12, op_binary},
    {"Less", "", 1, op_binary},         {"LessOrEqual", "", 12, op_binary}, {"And", "", 1, op_binary},
    {"Or", "", 1, op_binary},           {"Xor", "", 1, op_binary},        {"BitwiseAnd", "", 18, op_binary},
    {"BitwiseOr", "", 18, op_binary},   {"BitwiseXor", "", 18, op_binary}, {"BitShift", "", 11, op_binary},
    /* variadic, select, casts */
    {"Sum", "", 1, op_variadic},        {"Mean", "", 1, op_variadic},     {"Max", "", 1, op_variadic},
    {"Min", "", 1, op_variadic},        {"Where", "", 9, op_where},       {"Cast", "", 1, op_cast},
    {"CastLike", "", 15, op_castlike},  {"Clip", "", 1, op_clip},
    /* ops_math_reduce.c */
    {"ReduceSum", "", 1, op_reduce},    {"ReduceMean", "", 1, op_reduce}, {"ReduceMax", "", 1, op_reduce},
    {"ReduceMin", "", 1, op_reduce},    {"ReduceProd", "", 1, op_reduce}, {"ReduceL1", "", 1, op_reduce},
    {"ReduceL2", "", 1, op_reduce},     {"ReduceLogSum", "", 1, op_reduce}, {"ReduceLogSumExp", "", 1, op_reduce},
    {"ReduceSumSquare", "", 1, op_reduce},
    {"ArgMax", "", 1, op_argmax},       {"ArgMin", "", 1, op_argmax},
    {"Softmax", "", 1, op_softmax},     {"LogSoftmax", "", 1, op_softmax}, {"Hardmax", "", 1, op_softmax},
    {"TopK", "", 1, op_topk},           {"CumSum", "", 11, op_cumsum},    {"CumProd", "", 26, op_cumsum},    {"Einsum", "", 12, op_einsum},
    {"Det", "", 11, op_det},
    /* ops_math_signal.c */
    {"HannWindow", "", 17, op_window},  {"HammingWindow", "", 17, op_window}, {"BlackmanWindow", "", 17, op_window},
    {"DFT", "", 17, op_dft},            {"STFT", "", 17, op_stft},        {"MelWeightMatrix", "", 17, op_mel_weight_matrix},
    /* ops_math_random.c */
    {"RandomNormal", "", 1, op_random},  {"RandomUniform", "", 1, op_random},
    {"RandomNormalLike", "", 1, op_random}, {"RandomUniformLike", "", 1, op_random},
    {"Bernoulli", "", 15, op_bernoulli}, {"Multinomial", "", 7, op_multinomial},
    /* ops_math_text.c */
    {"TfIdfVectorizer", "", 9, op_tfidf},
    {NULL, NULL, 0, NULL},
};
