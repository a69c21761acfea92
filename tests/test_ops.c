/* test_ops.c — forward correctness of every op in tg.h against the plain C reference (ref.c).
 *
 * Each test builds seeded random inputs as ref arrays, runs the op through tg (tg_from_data -> op ->
 * tg_to_host) and through the reference, and compares: floats with atol 1e-6 / rtol 1e-3, integers and
 * bools exactly, shapes and dtypes always. Every test runs inside one tg scope (OPS_TEST) so an early
 * return from CHECK_T still frees its tensors; ref arrays are freed at the end of each test. */
#include <stdlib.h>

#include "ref.h"
#include "test.h"


typedef tg_tensor *(*unary_fn)(tg_tensor *);
typedef tg_tensor *(*binary_fn)(tg_tensor *, tg_tensor *);
typedef tg_tensor *(*reduce_fn)(tg_tensor *, int, const int *, bool);

static tg_tensor *T(const ref_arr *a) { return ref_to_tg(a); }

/* x -> x + 0.5*sign(x): keeps divisors away from zero */
static ref_arr *away_from_zero(ref_arr *a) {
  for (int64_t i = 0; i < a->numel; i++) a->data[i] = ref_round(a->dtype, a->data[i] >= 0 ? a->data[i] + 0.5 : a->data[i] - 0.5);
  return a;
}

/* ---- unary ------------------------------------------------------------------------------------------ */
static void check_unary(ref_op op, unary_fn fn, double lo, double hi, const char *file, int line) {
  char what[64];
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(7, 13), lo, hi);
  snprintf(what, sizeof what, "%s contiguous", ref_op_name(op));
  ref_check_tol(what, fn(T(a)), ref_unary(op, a, 0, 0), true, 1e-6, 1e-3, file, line);
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(13, 7), lo, hi);
  snprintf(what, sizeof what, "%s transposed", ref_op_name(op));
  ref_check_tol(what, fn(tg_transpose(T(b), 0, 1)), ref_unary(op, ref_transpose(b, 0, 1), 0, 0), true, 1e-6, 1e-3,
                file, line);
}

#define UNARY_TEST(name, op, fn, lo, hi) \
  REF_TEST(test_ops_unary_##name) { check_unary(op, fn, lo, hi, __FILE__, __LINE__); }

UNARY_TEST(neg, R_NEG, tg_neg, -3, 3)
UNARY_TEST(exp, R_EXP, tg_exp, -5, 5)
UNARY_TEST(exp2, R_EXP2, tg_exp2, -6, 6)
UNARY_TEST(log, R_LOG, tg_log, 0.01, 10)
UNARY_TEST(log2, R_LOG2, tg_log2, 0.01, 10)
UNARY_TEST(sqrt, R_SQRT, tg_sqrt, 0, 10)
UNARY_TEST(rsqrt, R_RSQRT, tg_rsqrt, 0.01, 10)
UNARY_TEST(sin, R_SIN, tg_sin, -6, 6)
UNARY_TEST(cos, R_COS, tg_cos, -6, 6)
UNARY_TEST(tan, R_TAN, tg_tan, -1.2, 1.2)
UNARY_TEST(reciprocal, R_RECIP, tg_reciprocal, -5, 5)
UNARY_TEST(abs, R_ABS, tg_abs, -3, 3)
UNARY_TEST(sign, R_SIGN, tg_sign, -3, 3)
UNARY_TEST(square, R_SQUARE, tg_square, -3, 3)
UNARY_TEST(trunc, R_TRUNC, tg_trunc, -10, 10)
UNARY_TEST(floor, R_FLOOR, tg_floor, -10, 10)
UNARY_TEST(ceil, R_CEIL, tg_ceil, -10, 10)
UNARY_TEST(relu, R_RELU, tg_relu, -3, 3)
UNARY_TEST(sigmoid, R_SIGMOID, tg_sigmoid, -8, 8)
UNARY_TEST(tanh, R_TANH, tg_tanh, -4, 4)
UNARY_TEST(gelu, R_GELU, tg_gelu, -3, 3)
UNARY_TEST(silu, R_SILU, tg_silu, -5, 5)
UNARY_TEST(softplus, R_SOFTPLUS, tg_softplus, -8, 8)
UNARY_TEST(relu6, R_RELU6, tg_relu6, -3, 9)
UNARY_TEST(hardswish, R_HARDSWISH, tg_hardswish, -5, 5)
UNARY_TEST(hardsigmoid, R_HARDSIGMOID, tg_hardsigmoid, -5, 5)
UNARY_TEST(mish, R_MISH, tg_mish, -5, 5)

REF_TEST(test_ops_unary_leaky_relu) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(7, 13), -3, 3);
  CHECK_REF("leaky_relu 0.01", tg_leaky_relu(T(a), 0.01), ref_unary(R_LEAKY_RELU, a, 0.01, 0));
  CHECK_REF("leaky_relu 0.2", tg_leaky_relu(T(a), 0.2), ref_unary(R_LEAKY_RELU, a, 0.2, 0));
}

REF_TEST(test_ops_unary_elu) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(7, 13), -4, 3);
  CHECK_REF("elu 1", tg_elu(T(a), 1.0), ref_unary(R_ELU, a, 1.0, 0));
  CHECK_REF("elu 0.5", tg_elu(T(a), 0.5), ref_unary(R_ELU, a, 0.5, 0));
}

REF_TEST(test_ops_unary_clamp) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(7, 13), -3, 3);
  CHECK_REF("clamp float", tg_clamp(T(a), -1.5, 0.75), ref_unary(R_CLAMP, a, -1.5, 0.75));
  ref_arr *b = ref_rand(TG_INT32, SHAPE(5, 9), -20, 20);
  CHECK_REF("clamp int32", tg_clamp(T(b), -5, 7), ref_unary(R_CLAMP, b, -5, 7));
}

REF_TEST(test_ops_unary_logical_not) {
  ref_arr *a = ref_rand(TG_BOOL, SHAPE(3, 7), 0, 1);
  CHECK_REF("logical_not bool", tg_logical_not(T(a)), ref_unary(R_LOGICAL_NOT, a, 0, 0));
  ref_arr *b = ref_rand(TG_INT32, SHAPE(3, 7), -1, 1);
  CHECK_REF("logical_not int32", tg_logical_not(T(b)), ref_unary(R_LOGICAL_NOT, b, 0, 0));
}

REF_TEST(test_ops_unary_special_values) {
  static const double v[] = {0, -0.0, 1, -1, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 1e-30, -1e-30, 100, -100, 3.999, -3.999};
  ref_arr *a = ref_from(TG_FLOAT32, SHAPE(16), v);
  static const struct { ref_op op; unary_fn fn; } ops[] = {
      {R_ABS, tg_abs},     {R_SIGN, tg_sign}, {R_TRUNC, tg_trunc}, {R_FLOOR, tg_floor}, {R_CEIL, tg_ceil},
      {R_RELU, tg_relu},   {R_NEG, tg_neg},   {R_SQUARE, tg_square}, {R_RELU6, tg_relu6}, {R_SIGMOID, tg_sigmoid},
      {R_TANH, tg_tanh},   {R_EXP, tg_exp},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    CHECK_REF(ref_op_name(ops[i].op), ops[i].fn(T(a)), ref_unary(ops[i].op, a, 0, 0));
  static const double p[] = {0, 1, 4, 0.25, 1e-6, 1e6};
  ref_arr *pos = ref_from(TG_FLOAT32, SHAPE(6), p);
  CHECK_REF("sqrt", tg_sqrt(T(pos)), ref_unary(R_SQRT, pos, 0, 0));
  CHECK_REF("log", tg_log(T(pos)), ref_unary(R_LOG, pos, 0, 0));  /* log(0) = -inf */
  CHECK_REF("log2", tg_log2(T(pos)), ref_unary(R_LOG2, pos, 0, 0));
  CHECK_REF("reciprocal", tg_reciprocal(T(pos)), ref_unary(R_RECIP, pos, 0, 0));  /* 1/0 = inf */
}

REF_TEST(test_ops_unary_int32_keeps_dtype) {
  ref_arr *a = ref_rand(TG_INT32, SHAPE(4, 9), -100, 100);
  static const struct { ref_op op; unary_fn fn; } ops[] = {
      {R_NEG, tg_neg}, {R_ABS, tg_abs}, {R_SIGN, tg_sign}, {R_SQUARE, tg_square}, {R_RELU, tg_relu},
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    CHECK_REF(ref_op_name(ops[i].op), ops[i].fn(T(a)), ref_unary(ops[i].op, a, 0, 0));
  ref_arr *b = ref_rand(TG_INT64, SHAPE(9), -100000, 100000);
  CHECK_REF("neg int64", tg_neg(T(b)), ref_unary(R_NEG, b, 0, 0));
  CHECK_REF("abs int64", tg_abs(T(b)), ref_unary(R_ABS, b, 0, 0));
}

REF_TEST(test_ops_unary_int_input_promotes_to_float) {
  ref_arr *a = ref_rand(TG_INT32, SHAPE(3, 5), 1, 20);
  CHECK_REF("sqrt int32", tg_sqrt(T(a)), ref_unary(R_SQRT, a, 0, 0));
  CHECK_REF("exp int32", tg_exp(T(a)), ref_unary(R_EXP, a, 0, 0));
  CHECK_REF("log int32", tg_log(T(a)), ref_unary(R_LOG, a, 0, 0));
  CHECK_REF("sigmoid int32", tg_sigmoid(T(a)), ref_unary(R_SIGMOID, a, 0, 0));
}

REF_TEST(test_ops_unary_odd_sizes) {
  static const int64_t sizes[] = {1, 7, 13, 1023};
  for (size_t i = 0; i < 4; i++) {
    ref_arr *a = ref_rand(TG_FLOAT32, 1, &sizes[i], -2, 2);
    CHECK_REF("exp odd size", tg_exp(T(a)), ref_unary(R_EXP, a, 0, 0));
  }
  ref_arr *s = ref_scalar(TG_FLOAT32, 0.75);
  CHECK_REF("exp 0-d", tg_exp(T(s)), ref_unary(R_EXP, s, 0, 0));
}

/* ---- binary ----------------------------------------------------------------------------------------- */
/* a op b on float32 for the broadcasting shapes of the brief and a non-contiguous pair */
static void check_binary_f32(ref_op op, binary_fn fn, double lo, double hi, bool nonzero_b, const char *file,
                             int line) {
  static const struct { int na, nb; int64_t sa[3], sb[3]; } cases[] = {
      {2, 2, {3, 1}, {1, 4}}, {3, 1, {2, 3, 4}, {4}}, {1, 0, {5}, {0}}, {0, 2, {0}, {3, 2}},
      {2, 2, {7, 13}, {7, 13}}, {3, 3, {1, 1, 5}, {5, 1, 1}},
  };
  char what[96];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ref_arr *a = ref_rand(TG_FLOAT32, cases[i].na, cases[i].sa, lo, hi);
    ref_arr *b = ref_rand(TG_FLOAT32, cases[i].nb, cases[i].sb, lo, hi);
    if (nonzero_b) away_from_zero(b);
    snprintf(what, sizeof what, "%s case %zu", ref_op_name(op), i);
    ref_check_tol(what, fn(T(a), T(b)), ref_binary(op, a, b), true, 1e-6, 1e-3, file, line);
  }
  /* non-contiguous: a transposed, b flipped */
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(5, 4), lo, hi);
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(4, 5), lo, hi);
  if (nonzero_b) away_from_zero(b);
  snprintf(what, sizeof what, "%s transposed x flipped", ref_op_name(op));
  ref_check_tol(what, fn(tg_transpose(T(a), 0, 1), tg_flip(T(b), AXES(0, 1))),
                ref_binary(op, ref_transpose(a, 0, 1), ref_flip(b, AXES(0, 1))), true, 1e-6, 1e-3, file, line);
}

#define BINARY_F32_TEST(name, op, fn, lo, hi, nz) \
  REF_TEST(test_ops_##name##_broadcast) { check_binary_f32(op, fn, lo, hi, nz, __FILE__, __LINE__); }

BINARY_F32_TEST(add, R_ADD, tg_add, -3, 3, false)
BINARY_F32_TEST(sub, R_SUB, tg_sub, -3, 3, false)
BINARY_F32_TEST(mul, R_MUL, tg_mul, -3, 3, false)
BINARY_F32_TEST(div, R_DIV, tg_div, -3, 3, true)
BINARY_F32_TEST(pow, R_POW, tg_pow, 0.1, 3, false)
BINARY_F32_TEST(maximum, R_MAXIMUM, tg_maximum, -3, 3, false)
BINARY_F32_TEST(minimum, R_MINIMUM, tg_minimum, -3, 3, false)

/* comparisons: small integers stored as float32 so that ties occur */
static void check_cmp(ref_op op, binary_fn fn, const char *file, int line) {
  char what[64];
  static const tg_dtype dts[] = {TG_FLOAT32, TG_INT32, TG_UINT8, TG_BOOL};
  for (size_t d = 0; d < 4; d++) {
    ref_arr *a = ref_cast(ref_rand(TG_INT32, SHAPE(3, 1), 0, 2), dts[d]);
    ref_arr *b = ref_cast(ref_rand(TG_INT32, SHAPE(1, 4), 0, 2), dts[d]);
    snprintf(what, sizeof what, "%s %s (3,1)x(1,4)", ref_op_name(op), ref_dtype_name(dts[d]));
    ref_check_tol(what, fn(T(a), T(b)), ref_binary(op, a, b), true, 0, 0, file, line);
  }
  ref_arr *a = ref_cast(ref_rand(TG_INT32, SHAPE(2, 3, 4), -2, 2), TG_FLOAT32);
  ref_arr *b = ref_cast(ref_rand(TG_INT32, SHAPE(4), -2, 2), TG_FLOAT32);
  snprintf(what, sizeof what, "%s float32 (2,3,4)x(4,)", ref_op_name(op));
  ref_check_tol(what, fn(T(a), T(b)), ref_binary(op, a, b), true, 0, 0, file, line);
  ref_arr *s = ref_scalar(TG_FLOAT32, 0);
  snprintf(what, sizeof what, "%s float32 (2,3,4)x()", ref_op_name(op));
  ref_check_tol(what, fn(T(a), T(s)), ref_binary(op, a, s), true, 0, 0, file, line);
  ref_arr *ai = ref_rand(TG_INT32, SHAPE(6), -2, 2), *bf = ref_rand(TG_FLOAT32, SHAPE(6), -2, 2);
  snprintf(what, sizeof what, "%s int32 x float32", ref_op_name(op));
  ref_check_tol(what, fn(T(ai), T(bf)), ref_binary(op, ai, bf), true, 0, 0, file, line);
}

#define CMP_TEST(name, op, fn) \
  REF_TEST(test_ops_cmp_##name) { check_cmp(op, fn, __FILE__, __LINE__); }
CMP_TEST(lt, R_LT, tg_lt)
CMP_TEST(le, R_LE, tg_le)
CMP_TEST(gt, R_GT, tg_gt)
CMP_TEST(ge, R_GE, tg_ge)
CMP_TEST(eq, R_EQ, tg_eq)
CMP_TEST(ne, R_NE, tg_ne)

/* integer ops of one dtype with broadcasting */
static void check_binary_int(ref_op op, binary_fn fn, tg_dtype dt, double lo, double hi, bool nonzero_b,
                             const char *file, int line) {
  char what[96];
  static const struct { int na, nb; int64_t sa[3], sb[3]; } cases[] = {
      {2, 2, {3, 1}, {1, 4}}, {3, 1, {2, 3, 4}, {4}}, {1, 0, {5}, {0}}, {2, 2, {7, 13}, {7, 13}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ref_arr *a = ref_rand(dt, cases[i].na, cases[i].sa, lo, hi);
    ref_arr *b = ref_rand(dt, cases[i].nb, cases[i].sb, lo, hi);
    if (nonzero_b)
      for (int64_t k = 0; k < b->numel; k++)
        if (b->data[k] == 0) b->data[k] = 3;
    snprintf(what, sizeof what, "%s %s case %zu", ref_op_name(op), ref_dtype_name(dt), i);
    ref_check_tol(what, fn(T(a), T(b)), ref_binary(op, a, b), true, 0, 0, file, line);
  }
}

REF_TEST(test_ops_int32_arith) {
  check_binary_int(R_ADD, tg_add, TG_INT32, -1000, 1000, false, __FILE__, __LINE__);
  check_binary_int(R_SUB, tg_sub, TG_INT32, -1000, 1000, false, __FILE__, __LINE__);
  check_binary_int(R_MUL, tg_mul, TG_INT32, -1000, 1000, false, __FILE__, __LINE__);
  check_binary_int(R_MAXIMUM, tg_maximum, TG_INT32, -1000, 1000, false, __FILE__, __LINE__);
  check_binary_int(R_MINIMUM, tg_minimum, TG_INT32, -1000, 1000, false, __FILE__, __LINE__);
}

REF_TEST(test_ops_int32_wraps_on_overflow) {
  static const double av[] = {2147483647, -2147483647 - 1.0, 65536, 100000};
  static const double bv[] = {1, -1, 65536, -100000};
  ref_arr *a = ref_from(TG_INT32, SHAPE(4), av), *b = ref_from(TG_INT32, SHAPE(4), bv);
  CHECK_REF("add wraps", tg_add(T(a), T(b)), ref_binary(R_ADD, a, b));
  CHECK_REF("mul wraps", tg_mul(T(a), T(b)), ref_binary(R_MUL, a, b));
}

REF_TEST(test_ops_idiv_truncates_toward_zero) {
  check_binary_int(R_IDIV, tg_idiv, TG_INT32, -50, 50, true, __FILE__, __LINE__);
  check_binary_int(R_IDIV, tg_idiv, TG_INT64, -50, 50, true, __FILE__, __LINE__);
  static const double av[] = {7, -7, 7, -7, 0, 1, -1, 6};
  static const double bv[] = {2, 2, -2, -2, 3, 3, 3, -3};
  ref_arr *a = ref_from(TG_INT32, SHAPE(8), av), *b = ref_from(TG_INT32, SHAPE(8), bv);
  static const double want[] = {3, -3, -3, 3, 0, 0, 0, -2};
  CHECK_REF("idiv table", tg_idiv(T(a), T(b)), ref_from(TG_INT32, SHAPE(8), want));
}

REF_TEST(test_ops_mod_has_sign_of_divisor) {
  check_binary_int(R_MOD, tg_mod, TG_INT32, -50, 50, true, __FILE__, __LINE__);
  check_binary_int(R_MOD, tg_mod, TG_INT64, -50, 50, true, __FILE__, __LINE__);
  static const double av[] = {7, -7, 7, -7, 0, 6, -6, 1};
  static const double bv[] = {3, 3, -3, -3, 3, 3, -3, -5};
  ref_arr *a = ref_from(TG_INT32, SHAPE(8), av), *b = ref_from(TG_INT32, SHAPE(8), bv);
  static const double want[] = {1, 2, -2, -1, 0, 0, 0, -4};
  CHECK_REF("mod table", tg_mod(T(a), T(b)), ref_from(TG_INT32, SHAPE(8), want));
}

REF_TEST(test_ops_int64_arith) {
  check_binary_int(R_ADD, tg_add, TG_INT64, -3000000000.0, 3000000000.0, false, __FILE__, __LINE__);
  check_binary_int(R_SUB, tg_sub, TG_INT64, -3000000000.0, 3000000000.0, false, __FILE__, __LINE__);
  check_binary_int(R_MUL, tg_mul, TG_INT64, -100000, 100000, false, __FILE__, __LINE__);
  check_binary_int(R_MAXIMUM, tg_maximum, TG_INT64, -3000000000.0, 3000000000.0, false, __FILE__, __LINE__);
}

REF_TEST(test_ops_uint8_arith_wraps) {
  check_binary_int(R_ADD, tg_add, TG_UINT8, 0, 255, false, __FILE__, __LINE__);
  check_binary_int(R_SUB, tg_sub, TG_UINT8, 0, 255, false, __FILE__, __LINE__);
  check_binary_int(R_MUL, tg_mul, TG_UINT8, 0, 255, false, __FILE__, __LINE__);
  check_binary_int(R_MAXIMUM, tg_maximum, TG_UINT8, 0, 255, false, __FILE__, __LINE__);
  check_binary_int(R_IDIV, tg_idiv, TG_UINT8, 0, 255, true, __FILE__, __LINE__);
  check_binary_int(R_MOD, tg_mod, TG_UINT8, 0, 255, true, __FILE__, __LINE__);
}

REF_TEST(test_ops_bitwise) {
  static const tg_dtype dts[] = {TG_INT32, TG_INT64, TG_UINT8, TG_BOOL};
  static const double lo[] = {-1000, -100000, 0, 0}, hi[] = {1000, 100000, 255, 1};
  for (int d = 0; d < 4; d++) {
    check_binary_int(R_AND, tg_bitwise_and, dts[d], lo[d], hi[d], false, __FILE__, __LINE__);
    check_binary_int(R_OR, tg_bitwise_or, dts[d], lo[d], hi[d], false, __FILE__, __LINE__);
    check_binary_int(R_XOR, tg_bitwise_xor, dts[d], lo[d], hi[d], false, __FILE__, __LINE__);
  }
}

REF_TEST(test_ops_pow_negative_base_integer_exponent) {
  static const double av[] = {-2, -2, -3, -1.5, 2, 0};
  static const double bv[] = {2, 3, 0, 2, -1, 2};
  ref_arr *a = ref_from(TG_FLOAT32, SHAPE(6), av), *b = ref_from(TG_FLOAT32, SHAPE(6), bv);
  CHECK_REF("pow", tg_pow(T(a), T(b)), ref_binary(R_POW, a, b));
}

REF_TEST(test_ops_dtype_promotion) {
  static const struct { tg_dtype a, b, want; } cases[] = {
      {TG_INT32, TG_FLOAT32, TG_FLOAT32}, {TG_UINT8, TG_INT8, TG_INT16},   {TG_INT32, TG_INT64, TG_INT64},
      {TG_BOOL, TG_INT32, TG_INT32},      {TG_UINT8, TG_UINT8, TG_UINT8},  {TG_UINT8, TG_INT32, TG_INT32},
      {TG_BOOL, TG_FLOAT32, TG_FLOAT32},  {TG_INT64, TG_FLOAT32, TG_FLOAT32}, {TG_UINT8, TG_BOOL, TG_UINT8},
      {TG_INT32, TG_UINT32, TG_INT64},    {TG_FLOAT32, TG_FLOAT64, TG_FLOAT64}, {TG_INT8, TG_INT16, TG_INT16},
      {TG_UINT16, TG_INT16, TG_INT32},
  };
  char what[96];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK(ref_promote(cases[i].a, cases[i].b) == cases[i].want, "ref_promote(%s, %s)",
          ref_dtype_name(cases[i].a), ref_dtype_name(cases[i].b));
    ref_arr *a = ref_rand(cases[i].a, SHAPE(3, 1), 0, 9), *b = ref_rand(cases[i].b, SHAPE(1, 4), 0, 9);
    ref_arr *want = ref_binary(R_ADD, a, b);
    CHECK(want->dtype == cases[i].want, "ref add dtype");
    snprintf(what, sizeof what, "add %s + %s", ref_dtype_name(cases[i].a), ref_dtype_name(cases[i].b));
    CHECK_REF(what, tg_add(T(a), T(b)), want);
  }
  ref_arr *a = ref_rand(TG_INT32, SHAPE(6), -20, 20), *b = ref_rand(TG_INT32, SHAPE(6), 1, 7);
  CHECK_REF("int32 / int32 is float32", tg_div(T(a), T(b)), ref_binary(R_DIV, a, b));
}

REF_TEST(test_ops_scalar_ops) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 5), 0.5, 3);
  CHECK_REF("add_scalar", tg_add_scalar(T(a), 1.25), ref_binary_scalar(R_ADD, a, 1.25));
  CHECK_REF("sub_scalar", tg_sub_scalar(T(a), -2), ref_binary_scalar(R_SUB, a, -2));
  CHECK_REF("mul_scalar", tg_mul_scalar(T(a), 3.5), ref_binary_scalar(R_MUL, a, 3.5));
  CHECK_REF("div_scalar", tg_div_scalar(T(a), 4), ref_binary_scalar(R_DIV, a, 4));
  CHECK_REF("pow_scalar 2", tg_pow_scalar(T(a), 2), ref_binary_scalar(R_POW, a, 2));
  CHECK_REF("pow_scalar 0.5", tg_pow_scalar(T(a), 0.5), ref_binary_scalar(R_POW, a, 0.5));
  CHECK_REF("pow_scalar -1.5", tg_pow_scalar(T(a), -1.5), ref_binary_scalar(R_POW, a, -1.5));
  CHECK_REF("maximum_scalar", tg_maximum_scalar(T(a), 1.5), ref_binary_scalar(R_MAXIMUM, a, 1.5));
  CHECK_REF("minimum_scalar", tg_minimum_scalar(T(a), 1.5), ref_binary_scalar(R_MINIMUM, a, 1.5));
  ref_arr *n = ref_rand(TG_FLOAT32, SHAPE(6), -3, 3);
  CHECK_REF("pow_scalar 3 negative base", tg_pow_scalar(T(n), 3), ref_binary_scalar(R_POW, n, 3));
}

REF_TEST(test_ops_scalar_ops_int_weak_scalar) {
  ref_arr *a = ref_rand(TG_INT32, SHAPE(3, 5), -20, 20);
  CHECK_REF("int32 add_scalar 3 stays int32", tg_add_scalar(T(a), 3), ref_binary_scalar(R_ADD, a, 3));
  CHECK_REF("int32 mul_scalar -2 stays int32", tg_mul_scalar(T(a), -2), ref_binary_scalar(R_MUL, a, -2));
  CHECK_REF("int32 add_scalar 2.5 is float32", tg_add_scalar(T(a), 2.5), ref_binary_scalar(R_ADD, a, 2.5));
  CHECK_REF("int32 div_scalar 2 is float32", tg_div_scalar(T(a), 2), ref_binary_scalar(R_DIV, a, 2));
  CHECK_REF("int32 maximum_scalar 0", tg_maximum_scalar(T(a), 0), ref_binary_scalar(R_MAXIMUM, a, 0));
  ref_arr *u = ref_rand(TG_UINT8, SHAPE(7), 0, 255);
  CHECK_REF("uint8 add_scalar 10 stays uint8", tg_add_scalar(T(u), 10), ref_binary_scalar(R_ADD, u, 10));
  ref_arr *l = ref_rand(TG_INT64, SHAPE(7), -100, 100);
  CHECK_REF("int64 sub_scalar 1", tg_sub_scalar(T(l), 1), ref_binary_scalar(R_SUB, l, 1));
}

/* ---- non-contiguous, size-0, size-1, odd and large ---------------------------------------------------- */
REF_TEST(test_ops_add_noncontiguous_inputs) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 3, 5), -2, 2);
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(4, 1), -2, 2);
  /* permuted + expanded */
  CHECK_REF("permuted + expanded", tg_add(tg_permute(T(a), AXES(2, 0, 1)), tg_expand(T(b), SHAPE(5, 4, 3))),
            ref_binary(R_ADD, ref_permute(a, (int[]){2, 0, 1}), ref_expand(b, SHAPE(5, 4, 3))));
  /* padded + flipped */
  ref_arr *c = ref_rand(TG_FLOAT32, SHAPE(3, 4), -2, 2), *d = ref_rand(TG_FLOAT32, SHAPE(5, 7), -2, 2);
  int64_t pads[] = {1, 1, 2, 1};
  CHECK_REF("padded + flipped", tg_add(tg_pad_axes(T(c), 2, pads, 0.5), tg_flip(T(d), AXES(1))),
            ref_binary(R_ADD, ref_pad(c, pads, 0.5), ref_flip(d, AXES(1))));
  /* sliced with a step + shrunk */
  ref_arr *e = ref_rand(TG_FLOAT32, SHAPE(9, 10), -2, 2), *f = ref_rand(TG_FLOAT32, SHAPE(6, 8), -2, 2);
  tg_slice sl[2] = {{0, TG_END, 2, false}, {TG_END, INT64_MIN, -3, false}};
  int64_t bounds[] = {1, 6, 2, 6};
  CHECK_REF("sliced + shrunk", tg_mul(tg_slice_axes(T(e), 2, sl), tg_shrink(T(f), 2, bounds)),
            ref_binary(R_MUL, ref_slice(e, 2, sl), ref_shrink(f, bounds)));
  /* the same tensor twice, once transposed */
  ref_arr *g = ref_rand(TG_FLOAT32, SHAPE(6, 6), -2, 2);
  tg_tensor *tg_g = T(g);
  CHECK_REF("x + x.T", tg_add(tg_g, tg_transpose(tg_g, 0, 1)), ref_binary(R_ADD, g, ref_transpose(g, 0, 1)));
}

REF_TEST(test_ops_size0_dims) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(0, 3), -1, 1), *b = ref_rand(TG_FLOAT32, SHAPE(1, 3), -1, 1);
  CHECK_REF("(0,3) + (1,3)", tg_add(T(a), T(b)), ref_binary(R_ADD, a, b));
  CHECK_REF("exp (0,3)", tg_exp(T(a)), ref_unary(R_EXP, a, 0, 0));
  CHECK_REF("sum (0,3) axis 0", tg_sum(T(a), AXES(0), false), ref_reduce(R_SUM, a, AXES(0), false));
  CHECK_REF("sum (0,3) axis 1", tg_sum(T(a), AXES(1), false), ref_reduce(R_SUM, a, AXES(1), false));
  CHECK_REF("sum (0,3) all", tg_sum(T(a), 0, NULL, false), ref_reduce(R_SUM, a, 0, NULL, false));
  CHECK_REF("prod (0,3) axis 0", tg_prod(T(a), AXES(0), true), ref_reduce(R_PROD, a, AXES(0), true));
  int64_t pads[] = {1, 1, 0, 0};
  CHECK_REF("pad (0,3)", tg_pad_axes(T(a), 2, pads, 2.0), ref_pad(a, pads, 2.0));
  ref_arr *c = ref_rand(TG_FLOAT32, SHAPE(2, 3), -1, 1);
  ref_arr *parts[] = {a, c, a};
  tg_tensor *tparts[] = {T(a), T(c), T(a)};
  CHECK_REF("cat with empty pieces", tg_cat(3, tparts, 0), ref_cat(3, parts, 0));
  CHECK_REF("reshape (0,3) -> (3,0,5)", tg_reshape(T(a), SHAPE(3, 0, 5)), ref_reshape(a, SHAPE(3, 0, 5)));
  ref_arr *e = ref_rand(TG_FLOAT32, SHAPE(2, 0), -1, 1), *f = ref_rand(TG_FLOAT32, SHAPE(0, 3), -1, 1);
  CHECK_REF("matmul (2,0)@(0,3) is zeros", tg_matmul(T(e), T(f)), ref_matmul(e, f));
}

REF_TEST(test_ops_size1_dims) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(1, 1, 5), -1, 1), *b = ref_rand(TG_FLOAT32, SHAPE(5, 1, 1), -1, 1);
  CHECK_REF("(1,1,5)+(5,1,1)", tg_add(T(a), T(b)), ref_binary(R_ADD, a, b));
  ref_arr *c = ref_rand(TG_FLOAT32, SHAPE(1), -1, 1), *d = ref_rand(TG_FLOAT32, SHAPE(1, 1), -1, 1);
  CHECK_REF("(1,)*(1,1)", tg_mul(T(c), T(d)), ref_binary(R_MUL, c, d));
  CHECK_REF("sum (1,1,5) axis 1", tg_sum(T(a), AXES(1), false), ref_reduce(R_SUM, a, AXES(1), false));
  CHECK_REF("max (5,1,1) all", tg_max(T(b), 0, NULL, true), ref_reduce(R_MAX, b, 0, NULL, true));
}

REF_TEST(test_ops_odd_sizes) {
  static const int64_t sizes[] = {1, 7, 13, 1023};
  for (int i = 0; i < 4; i++) {
    ref_arr *a = ref_rand(TG_FLOAT32, 1, &sizes[i], -1, 1), *b = ref_rand(TG_FLOAT32, 1, &sizes[i], -1, 1);
    CHECK_REF("add odd", tg_add(T(a), T(b)), ref_binary(R_ADD, a, b));
    CHECK_REF("sum odd", tg_sum(T(a), 0, NULL, false), ref_reduce(R_SUM, a, 0, NULL, false));
    CHECK_REF("max odd", tg_max(T(a), 0, NULL, false), ref_reduce(R_MAX, a, 0, NULL, false));
  }
  ref_arr *m = ref_rand(TG_FLOAT32, SHAPE(13, 1023), -1, 1);
  CHECK_REF("sum (13,1023) axis 1", tg_sum(T(m), AXES(1), false), ref_reduce(R_SUM, m, AXES(1), false));
  CHECK_REF("sum (13,1023) axis 0", tg_sum(T(m), AXES(0), false), ref_reduce(R_SUM, m, AXES(0), false));
}

/* > 2^24 elements: index arithmetic past float precision, and sums that a plain float32 accumulator would
 * get wrong (16777216 + 1 == 16777216 in float32) */
#define BIG_N (17LL * 1000 * 1000)
REF_TEST(test_ops_large_add) {
  float *a = malloc(BIG_N * sizeof(float)), *b = malloc(BIG_N * sizeof(float));
  float *got = malloc(BIG_N * sizeof(float)), *want = malloc(BIG_N * sizeof(float));
  if (!a || !b || !got || !want) {
    CHECK(0, "out of memory");
    free(a), free(b), free(got), free(want);
    return;
  }
  for (int64_t i = 0; i < BIG_N; i++) {
    a[i] = (float)(i % 1000) * 0.5f;
    b[i] = (float)(i / 1000);
    want[i] = a[i] + b[i];
  }
  int64_t n = BIG_N;
  tg_tensor *ta = tg_from_data(TG_FLOAT32, 1, &n, a, BIG_N * sizeof(float));
  tg_tensor *tb = tg_from_data(TG_FLOAT32, 1, &n, b, BIG_N * sizeof(float));
  tg_tensor *y = tg_add(ta, tb);
  if (!y) CHECK(0, "add: %s", tg_error());
  else if (tg_to_host(y, got, BIG_N * sizeof(float)) != TG_OK) CHECK(0, "to_host: %s", tg_error());
  else CHECK_CLOSE("17M add", got, want, BIG_N);
  free(a), free(b), free(got), free(want);
}

REF_TEST(test_ops_large_sum) {
  int64_t n = BIG_N;
  tg_tensor *ones_i = tg_ones(TG_INT32, 1, &n);
  CHECK_T(ones_i);
  double s = tg_item(tg_sum(ones_i, 0, NULL, false));
  CHECK(s == (double)BIG_N, "int32 sum of 17M ones: got %.17g: %s", s, tg_error());
  tg_tensor *ones_f = tg_ones(TG_FLOAT32, 1, &n);
  double sf = tg_item(tg_sum(ones_f, 0, NULL, false));
  CHECK(fabs(sf - (double)BIG_N) <= 1e-3 * BIG_N, "float32 sum of 17M ones: got %.17g (a float32 accumulator stops at 16777216)", sf);
  /* per-row sums of (arange(17M) % 1000) as (17000, 1000): int32, since float32 cannot count past 2^24 */
  tg_tensor *ar = tg_arange(TG_INT32, 0, (double)BIG_N, 1);
  CHECK_T(ar);
  tg_tensor *rows = tg_sum(tg_reshape(tg_mod(ar, tg_scalar(TG_INT32, 1000)), SHAPE(17000, 1000)),
                           AXES(1), false);
  CHECK_T(rows);
  int64_t *got = malloc(17000 * sizeof(int64_t)), *want = malloc(17000 * sizeof(int64_t));
  int32_t *raw = malloc(17000 * sizeof(int32_t));
  if (got && want && raw && tg_to_host(rows, raw, 17000 * sizeof(int32_t)) == TG_OK) {
    for (int i = 0; i < 17000; i++) {
      got[i] = raw[i];
      want[i] = 999 * 1000 / 2;
    }
    check_equal_i64("row sums", got, want, 17000, __FILE__, __LINE__);
  } else {
    CHECK(0, "row sums: %s (dtype %s)", tg_error(), tg_dtype_name(tg_dtype_of(rows)));
  }
  free(got), free(want), free(raw);
}

/* ---- where / cast / bitcast ------------------------------------------------------------------------- */
REF_TEST(test_ops_where) {
  ref_arr *c = ref_rand(TG_BOOL, SHAPE(3, 1), 0, 1), *a = ref_rand(TG_FLOAT32, SHAPE(1, 4), -1, 1);
  ref_arr *b = ref_scalar(TG_FLOAT32, 7);
  CHECK_REF("where (3,1),(1,4),()", tg_where(T(c), T(a), T(b)), ref_where(c, a, b));
  ref_arr *c2 = ref_rand(TG_BOOL, SHAPE(2, 3, 4), 0, 1), *ai = ref_rand(TG_INT32, SHAPE(4), -9, 9);
  ref_arr *bi = ref_rand(TG_INT32, SHAPE(3, 1), -9, 9);
  CHECK_REF("where int32", tg_where(T(c2), T(ai), T(bi)), ref_where(c2, ai, bi));
  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(5, 6), -1, 1);
  ref_arr *zero = ref_scalar(TG_FLOAT32, 0);
  ref_arr *cond = ref_binary(R_GT, x, zero);
  CHECK_REF("where from comparison", tg_where(tg_gt(T(x), T(zero)), T(x), tg_neg(T(x))),
            ref_where(cond, x, ref_unary(R_NEG, x, 0, 0)));
  ref_arr *bf = ref_rand(TG_FLOAT32, SHAPE(4), -1, 1);
  CHECK_REF("where int32/float32 promotes", tg_where(T(c2), T(ai), T(bf)), ref_where(c2, ai, bf));
}

REF_TEST(test_ops_cast) {
  ref_arr *f = ref_rand(TG_FLOAT32, SHAPE(4, 8), -100, 100);
  CHECK_REF("float32->int32 truncates", tg_cast(T(f), TG_INT32), ref_cast(f, TG_INT32));
  CHECK_REF("float32->int64", tg_cast(T(f), TG_INT64), ref_cast(f, TG_INT64));
  CHECK_REF("float32->bool", tg_cast(T(f), TG_BOOL), ref_cast(f, TG_BOOL));
  CHECK_REF("float32->float64", tg_cast(T(f), TG_FLOAT64), ref_cast(f, TG_FLOAT64));
  CHECK_REF("float32->float16", tg_cast(T(f), TG_FLOAT16), ref_cast(f, TG_FLOAT16));
  CHECK_REF("float32->bfloat16", tg_cast(T(f), TG_BFLOAT16), ref_cast(f, TG_BFLOAT16));
  /* casts of constants (may be folded when the graph is built) */
  CHECK_REF("scalar float32->bfloat16", tg_cast(tg_scalar(TG_FLOAT32, 20.125), TG_BFLOAT16),
            ref_scalar(TG_BFLOAT16, 20.125));
  CHECK_REF("full float32->bfloat16", tg_cast(tg_full(TG_FLOAT32, SHAPE(3), -30.75), TG_BFLOAT16),
            ref_full(TG_BFLOAT16, SHAPE(3), -30.75));
  CHECK_REF("scalar float32->float16", tg_cast(tg_scalar(TG_FLOAT32, 1.0 / 3), TG_FLOAT16), ref_scalar(TG_FLOAT16, 1.0 / 3));
  CHECK_REF("scalar float32->int32", tg_cast(tg_scalar(TG_FLOAT32, -2.75), TG_INT32), ref_scalar(TG_INT32, -2.75));
  CHECK_REF("scalar float32->uint8", tg_cast(tg_scalar(TG_FLOAT32, 200.5), TG_UINT8), ref_scalar(TG_UINT8, 200.5));
  CHECK_REF("scalar int32->int8 wraps", tg_cast(tg_scalar(TG_INT32, 200), TG_INT8), ref_scalar(TG_INT8, -56));
  CHECK_REF("scalar float32->bool", tg_cast(tg_scalar(TG_FLOAT32, 0.25), TG_BOOL), ref_scalar(TG_BOOL, 1));
  ref_arr *fu = ref_rand(TG_FLOAT32, SHAPE(16), 0, 255.9);
  CHECK_REF("float32->uint8", tg_cast(T(fu), TG_UINT8), ref_cast(fu, TG_UINT8));
  ref_arr *i = ref_rand(TG_INT32, SHAPE(4, 8), -100000, 100000);
  CHECK_REF("int32->float32", tg_cast(T(i), TG_FLOAT32), ref_cast(i, TG_FLOAT32));
  CHECK_REF("int32->uint8 wraps", tg_cast(T(i), TG_UINT8), ref_cast(i, TG_UINT8));
  CHECK_REF("int32->int8 wraps", tg_cast(T(i), TG_INT8), ref_cast(i, TG_INT8));
  CHECK_REF("int32->int64", tg_cast(T(i), TG_INT64), ref_cast(i, TG_INT64));
  ref_arr *ib = ref_rand(TG_INT32, SHAPE(9), -1, 1);
  CHECK_REF("int32->bool", tg_cast(T(ib), TG_BOOL), ref_cast(ib, TG_BOOL));
  ref_arr *l = ref_rand(TG_INT64, SHAPE(6), -5000000000.0, 5000000000.0);
  CHECK_REF("int64->int32 wraps", tg_cast(T(l), TG_INT32), ref_cast(l, TG_INT32));
  ref_arr *b = ref_rand(TG_BOOL, SHAPE(7), 0, 1);
  CHECK_REF("bool->float32", tg_cast(T(b), TG_FLOAT32), ref_cast(b, TG_FLOAT32));
  CHECK_REF("bool->int32", tg_cast(T(b), TG_INT32), ref_cast(b, TG_INT32));
  ref_arr *u = ref_rand(TG_UINT8, SHAPE(7), 0, 255);
  CHECK_REF("uint8->float32", tg_cast(T(u), TG_FLOAT32), ref_cast(u, TG_FLOAT32));
  CHECK_REF("uint8->int8", tg_cast(T(u), TG_INT8), ref_cast(u, TG_INT8));
  ref_arr *t = ref_rand(TG_FLOAT32, SHAPE(5, 3), -3, 3);
  CHECK_REF("cast of transposed", tg_cast(tg_transpose(T(t), 0, 1), TG_INT32), ref_cast(ref_transpose(t, 0, 1), TG_INT32));
}

REF_TEST(test_ops_bitcast) {
  static const float fv[] = {1.0f, -2.5f, 0.0f, 3.14159f};
  int64_t n = 4;
  tg_tensor *f = tg_from_data(TG_FLOAT32, 1, &n, fv, sizeof fv);
  tg_tensor *i = tg_bitcast(f, TG_INT32);
  CHECK_T(i);
  CHECK(tg_dtype_of(i) == TG_INT32, "bitcast dtype %s", tg_dtype_name(tg_dtype_of(i)));
  int32_t got[4];
  CHECK(tg_to_host(i, got, sizeof got) == TG_OK, "to_host: %s", tg_error());
  for (int k = 0; k < 4; k++) {
    int32_t want;
    memcpy(&want, &fv[k], 4);
    CHECK(got[k] == want, "bitcast[%d]: got %d want %d", k, got[k], want);
  }
  tg_tensor *back = tg_bitcast(tg_add(i, tg_scalar(TG_INT32, 0)), TG_FLOAT32);
  float gotf[4];
  CHECK_T(back);
  CHECK(tg_to_host(back, gotf, sizeof gotf) == TG_OK, "to_host: %s", tg_error());
  CHECK(memcmp(gotf, fv, sizeof fv) == 0, "bitcast round trip changed the bits");
  static const int32_t iv[] = {-1, 0, 1, -2147483647 - 1};
  tg_tensor *u = tg_bitcast(tg_from_data(TG_INT32, 1, &n, iv, sizeof iv), TG_UINT32);
  uint32_t gotu[4];
  CHECK_T(u);
  CHECK(tg_to_host(u, gotu, sizeof gotu) == TG_OK, "to_host: %s", tg_error());
  CHECK(gotu[0] == 0xffffffffu && gotu[1] == 0 && gotu[2] == 1 && gotu[3] == 0x80000000u, "int32->uint32 bitcast");
}

/* the bytes of got (n bytes) equal want's */
static void check_bytes(const char *what, tg_tensor *t, const void *want, size_t n, tg_dtype dt, int ndim, const int64_t *shape) {
  unsigned char got[64];
  CHECK(t, "%s: %s", what, tg_error());
  if (!t) return;
  CHECK(tg_dtype_of(t) == dt && tg_ndim(t) == ndim, "%s: %s of %d dims", what, tg_dtype_name(tg_dtype_of(t)), tg_ndim(t));
  for (int d = 0; d < ndim && d < tg_ndim(t); d++) CHECK(tg_shape(t, d) == shape[d], "%s: dim %d is %lld, want %lld", what, d, (long long)tg_shape(t, d), (long long)shape[d]);
  CHECK(n <= sizeof got && tg_to_host(t, got, n) == TG_OK, "%s: %s", what, tg_error());
  CHECK(memcmp(got, want, n) == 0, "%s: the bytes differ from the input's", what);
}

/* tinygrad's Tensor.bitcast to another element size: the last dim's bytes regrouped, little-endian (numpy's
 * .view): each result's bytes equal the input's */
REF_TEST(test_ops_bitcast_changes_the_last_dim_with_the_size) {
  unsigned char b[16];
  for (int i = 0; i < 16; i++) b[i] = (unsigned char)(i * 37 + 11);
  tg_tensor *u8 = tg_from_data(TG_UINT8, 2, (int64_t[]){2, 8}, b, sizeof b);
  check_bytes("uint8 -> uint32", tg_bitcast(u8, TG_UINT32), b, 16, TG_UINT32, 2, (int64_t[]){2, 2});
  check_bytes("uint8 -> uint16", tg_bitcast(u8, TG_UINT16), b, 16, TG_UINT16, 2, (int64_t[]){2, 4});
  check_bytes("uint8 -> int64", tg_bitcast(u8, TG_INT64), b, 16, TG_INT64, 2, (int64_t[]){2, 1});
  check_bytes("uint8 -> float32 of a computed tensor", tg_bitcast(tg_add_scalar(u8, 0), TG_FLOAT32), b, 16, TG_FLOAT32, 2, (int64_t[]){2, 2});
  float fv[6] = {1.0f, -2.5f, 3.14159f, -0.0f, 65504.0f, 1e-30f};
  tg_tensor *f = tg_from_data(TG_FLOAT32, 2, (int64_t[]){3, 2}, fv, sizeof fv);
  check_bytes("float32 -> uint8", tg_bitcast(f, TG_UINT8), fv, sizeof fv, TG_UINT8, 2, (int64_t[]){3, 8});
  check_bytes("float32 -> float16 -> float32", tg_bitcast(tg_bitcast(f, TG_FLOAT16), TG_FLOAT32), fv, sizeof fv, TG_FLOAT32, 2,
              (int64_t[]){3, 2});
  double dv[2] = {-1.5, 1e300};
  check_bytes("float64 -> int32", tg_bitcast(tg_from_data(TG_FLOAT64, 1, (int64_t[]){2}, dv, sizeof dv), TG_INT32), dv, sizeof dv,
              TG_INT32, 1, (int64_t[]){4});
  /* a transposed view: the bytes of its elements in the view's order */
  float want[6];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) want[j * 3 + i] = fv[i * 2 + j];
  check_bytes("a transposed float32 -> uint16", tg_bitcast(tg_transpose(f, 0, 1), TG_UINT16), want, sizeof want, TG_UINT16, 2,
              (int64_t[]){2, 6});
}

/* ---- reductions ------------------------------------------------------------------------------------- */
static void check_reduce(ref_op op, reduce_fn fn, tg_dtype dt, double lo, double hi, const char *file, int line) {
  static const struct { int n; int axes[3]; } axsets[] = {
      {0, {0}}, {1, {0}}, {1, {1}}, {1, {2}}, {1, {-1}}, {2, {0, 2}}, {2, {-1, 0}}, {3, {0, 1, 2}},
  };
  ref_arr *a = ref_rand(dt, SHAPE(3, 4, 5), lo, hi);
  tg_tensor *ta = T(a);
  char what[96];
  for (size_t i = 0; i < sizeof axsets / sizeof axsets[0]; i++)
    for (int k = 0; k < 2; k++) {
      snprintf(what, sizeof what, "%s %s axes#%zu keepdim=%d", ref_op_name(op), ref_dtype_name(dt), i, k);
      ref_check_tol(what, fn(ta, axsets[i].n, axsets[i].axes, k), ref_reduce(op, a, axsets[i].n, axsets[i].axes, k),
                    true, 1e-6, 1e-3, file, line);
    }
  /* over a permuted view */
  ref_arr *p = ref_rand(dt, SHAPE(6, 7), lo, hi);
  snprintf(what, sizeof what, "%s %s of transposed", ref_op_name(op), ref_dtype_name(dt));
  ref_check_tol(what, fn(tg_transpose(T(p), 0, 1), AXES(1), false),
                ref_reduce(op, ref_transpose(p, 0, 1), AXES(1), false), true, 1e-6, 1e-3, file, line);
}

REF_TEST(test_ops_sum_axes_keepdim) { check_reduce(R_SUM, tg_sum, TG_FLOAT32, -1, 1, __FILE__, __LINE__); }
REF_TEST(test_ops_prod_axes_keepdim) { check_reduce(R_PROD, tg_prod, TG_FLOAT32, 0.5, 1.5, __FILE__, __LINE__); }
REF_TEST(test_ops_max_axes_keepdim) { check_reduce(R_MAX, tg_max, TG_FLOAT32, -1, 1, __FILE__, __LINE__); }
REF_TEST(test_ops_min_axes_keepdim) { check_reduce(R_MIN, tg_min, TG_FLOAT32, -1, 1, __FILE__, __LINE__); }
REF_TEST(test_ops_mean_axes_keepdim) { check_reduce(R_MEAN, tg_mean, TG_FLOAT32, -1, 1, __FILE__, __LINE__); }

REF_TEST(test_ops_reduce_int_dtypes) {
  check_reduce(R_SUM, tg_sum, TG_INT32, -1000, 1000, __FILE__, __LINE__);
  check_reduce(R_MAX, tg_max, TG_INT32, -1000, 1000, __FILE__, __LINE__);
  check_reduce(R_MIN, tg_min, TG_INT32, -1000, 1000, __FILE__, __LINE__);
  check_reduce(R_PROD, tg_prod, TG_INT32, -2, 2, __FILE__, __LINE__);
  check_reduce(R_MEAN, tg_mean, TG_INT32, -1000, 1000, __FILE__, __LINE__);
}

REF_TEST(test_ops_sum_small_int_dtypes_accumulate_wide) {
  ref_arr *u = ref_rand(TG_UINT8, SHAPE(4, 250), 200, 255);
  CHECK_REF("sum uint8 -> uint32", tg_sum(T(u), AXES(1), false), ref_reduce(R_SUM, u, AXES(1), false));
  ref_arr *b = ref_rand(TG_BOOL, SHAPE(5, 300), 0, 1);
  CHECK_REF("sum bool -> int32", tg_sum(T(b), AXES(1), false), ref_reduce(R_SUM, b, AXES(1), false));
  CHECK_REF("sum bool all -> int32", tg_sum(T(b), 0, NULL, false), ref_reduce(R_SUM, b, 0, NULL, false));
  ref_arr *l = ref_rand(TG_INT64, SHAPE(3, 5), -3000000000.0, 3000000000.0);
  CHECK_REF("sum int64", tg_sum(T(l), AXES(0), true), ref_reduce(R_SUM, l, AXES(0), true));
  ref_arr *i8 = ref_rand(TG_INT8, SHAPE(2, 100), -128, 127);
  CHECK_REF("sum int8 -> int32", tg_sum(T(i8), AXES(1), false), ref_reduce(R_SUM, i8, AXES(1), false));
  CHECK_REF("max uint8", tg_max(T(u), AXES(1), false), ref_reduce(R_MAX, u, AXES(1), false));
  CHECK_REF("min uint8", tg_min(T(u), AXES(0), false), ref_reduce(R_MIN, u, AXES(0), false));
  CHECK_REF("max bool", tg_max(T(b), AXES(1), false), ref_reduce(R_MAX, b, AXES(1), false));
}

REF_TEST(test_ops_reduce_of_expanded_and_padded) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 1), -1, 1);
  CHECK_REF("sum of expanded", tg_sum(tg_expand(T(a), SHAPE(3, 6)), AXES(1), false),
            ref_reduce(R_SUM, ref_expand(a, SHAPE(3, 6)), AXES(1), false));
  ref_arr *b = ref_rand(TG_FLOAT32, SHAPE(4, 5), -1, 1);
  int64_t pads[] = {1, 2, 0, 3};
  CHECK_REF("max of padded (-5)", tg_max(tg_pad_axes(T(b), 2, pads, -5), AXES(0), false),
            ref_reduce(R_MAX, ref_pad(b, pads, -5), AXES(0), false));
  CHECK_REF("sum of padded (2)", tg_sum(tg_pad_axes(T(b), 2, pads, 2), AXES(1), true),
            ref_reduce(R_SUM, ref_pad(b, pads, 2), AXES(1), true));
  CHECK_REF("sum of flipped", tg_sum(tg_flip(T(b), AXES(0, 1)), AXES(0), false),
            ref_reduce(R_SUM, ref_flip(b, AXES(0, 1)), AXES(0), false));
}

REF_TEST(test_ops_reduce_then_elementwise) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(5, 9), -1, 1);
  ref_arr *m = ref_reduce(R_MAX, a, AXES(1), true);
  CHECK_REF("x - max(x, 1)", tg_sub(T(a), tg_max(T(a), AXES(1), true)), ref_binary(R_SUB, a, m));
  ref_arr *s = ref_reduce(R_SUM, a, AXES(0), false);
  CHECK_REF("exp(sum(x, 0))", tg_exp(tg_sum(T(a), AXES(0), false)), ref_unary(R_EXP, s, 0, 0));
  ref_arr *ss = ref_reduce(R_SUM, ref_reduce(R_SUM, a, AXES(1), false), 0, NULL, false);
  CHECK_REF("sum(sum(x, 1))", tg_sum(tg_sum(T(a), AXES(1), false), 0, NULL, false), ss);
}

REF_TEST(test_ops_var_std_correction) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 6, 5), -2, 2);
  tg_tensor *ta = T(a);
  static const double corr[] = {0, 1, 2};
  for (int c = 0; c < 3; c++)
    for (int k = 0; k < 2; k++) {
      CHECK_REF("var all", tg_var(ta, 0, NULL, k, corr[c]), ref_var(a, 0, NULL, k, corr[c], false));
      CHECK_REF("var axis 1", tg_var(ta, AXES(1), k, corr[c]), ref_var(a, AXES(1), k, corr[c], false));
      CHECK_REF("std axes (0,2)", tg_std(ta, AXES(0, 2), k, corr[c]), ref_var(a, AXES(0, 2), k, corr[c], true));
      CHECK_REF("std axis -1", tg_std(ta, AXES(-1), k, corr[c]), ref_var(a, AXES(-1), k, corr[c], true));
    }
  ref_arr *i = ref_rand(TG_INT32, SHAPE(3, 7), -10, 10);
  CHECK_REF("var int32 -> float32", tg_var(T(i), AXES(1), false, 1), ref_var(i, AXES(1), false, 1, false));
}

REF_TEST(test_ops_argmax_argmin) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 6, 3), -1, 1);
  tg_tensor *ta = T(a);
  static const int axes[] = {0, 1, 2, -1, TG_ALL};
  char what[64];
  for (int i = 0; i < 5; i++)
    for (int k = 0; k < 2; k++) {
      if (axes[i] == TG_ALL && k) continue;
      snprintf(what, sizeof what, "argmax axis %d keepdim %d", axes[i], k);
      CHECK_REF(what, tg_argmax(ta, axes[i], k), ref_argext(a, axes[i], k, false));
      snprintf(what, sizeof what, "argmin axis %d keepdim %d", axes[i], k);
      CHECK_REF(what, tg_argmin(ta, axes[i], k), ref_argext(a, axes[i], k, true));
    }
}

REF_TEST(test_ops_argmax_first_of_ties) {
  ref_arr *a = ref_rand(TG_INT32, SHAPE(5, 11), 0, 2);
  CHECK_REF("argmax int32 ties axis 1", tg_argmax(T(a), 1, false), ref_argext(a, 1, false, false));
  CHECK_REF("argmin int32 ties axis 0", tg_argmin(T(a), 0, true), ref_argext(a, 0, true, true));
  CHECK_REF("argmax int32 ties all", tg_argmax(T(a), TG_ALL, false), ref_argext(a, TG_ALL, false, false));
  ref_arr *f = ref_full(TG_FLOAT32, SHAPE(3, 4), 1.5);
  CHECK_REF("argmax of constant", tg_argmax(T(f), 1, false), ref_argext(f, 1, false, false));
  ref_arr *b = ref_rand(TG_BOOL, SHAPE(4, 9), 0, 1);
  CHECK_REF("argmax bool", tg_argmax(T(b), 1, false), ref_argext(b, 1, false, false));
}

/* min of signed integers at the ends of their range: min was -max(-x), and -INT32_MIN overflows */
REF_TEST(test_ops_min_int_extremes) {
  int32_t d[2 * 21];
  for (int i = 0; i < 42; i++) d[i] = (int32_t)((i * 7919) % 2001 - 1000);
  d[3] = INT32_MIN, d[7] = INT32_MAX, d[30] = INT32_MIN, d[40] = INT32_MAX;
  tg_tensor *t = tg_from_data(TG_INT32, 2, (int64_t[]){2, 21}, d, sizeof d);
  int32_t mn[2], mx[2], am[2];
  CHECK(tg_to_host(tg_min(t, 1, (int[]){1}, false), mn, sizeof mn) == TG_OK, "%s", tg_error());
  CHECK(tg_to_host(tg_max(t, 1, (int[]){1}, false), mx, sizeof mx) == TG_OK, "%s", tg_error());
  CHECK(tg_to_host(tg_argmin(t, 1, false), am, sizeof am) == TG_OK, "%s", tg_error());
  CHECK(mn[0] == INT32_MIN && mn[1] == INT32_MIN, "min %d %d, want INT32_MIN", mn[0], mn[1]);
  CHECK(mx[0] == INT32_MAX && mx[1] == INT32_MAX, "max %d %d, want INT32_MAX", mx[0], mx[1]);
  CHECK(am[0] == 3 && am[1] == 9, "argmin %d %d, want 3 9", am[0], am[1]);
  int16_t h[5] = {5, INT16_MIN, -3, INT16_MAX, 0}, hm = 0;
  CHECK(tg_to_host(tg_min(tg_from_data(TG_INT16, 1, (int64_t[]){5}, h, sizeof h), 1, (int[]){0}, false), &hm, sizeof hm) == TG_OK,
        "%s", tg_error());
  CHECK(hm == INT16_MIN, "int16 min %d", hm);
}

REF_TEST(test_ops_softmax_axes) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 7), -3, 3), *b = ref_rand(TG_FLOAT32, SHAPE(2, 3, 5), -3, 3);
  static const int ax2[] = {0, 1, -1}, ax3[] = {0, 1, 2, -2};
  for (int i = 0; i < 3; i++) CHECK_REF("softmax 2-d", tg_softmax(T(a), ax2[i]), ref_softmax(a, ax2[i], false));
  for (int i = 0; i < 4; i++) CHECK_REF("softmax 3-d", tg_softmax(T(b), ax3[i]), ref_softmax(b, ax3[i], false));
  ref_arr *big = ref_rand(TG_FLOAT32, SHAPE(3, 5), 80, 100);
  CHECK_REF("softmax of large values is stable", tg_softmax(T(big), -1), ref_softmax(big, -1, false));
}

REF_TEST(test_ops_log_softmax_axes) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 7), -3, 3), *b = ref_rand(TG_FLOAT32, SHAPE(2, 3, 5), -3, 3);
  static const int ax2[] = {0, 1, -1}, ax3[] = {0, 1, 2, -2};
  for (int i = 0; i < 3; i++) CHECK_REF("log_softmax 2-d", tg_log_softmax(T(a), ax2[i]), ref_softmax(a, ax2[i], true));
  for (int i = 0; i < 4; i++) CHECK_REF("log_softmax 3-d", tg_log_softmax(T(b), ax3[i]), ref_softmax(b, ax3[i], true));
  ref_arr *big = ref_rand(TG_FLOAT32, SHAPE(3, 5), -100, 100);
  CHECK_REF("log_softmax of large values is stable", tg_log_softmax(T(big), 1), ref_softmax(big, 1, true));
}

REF_TEST(test_ops_logsumexp_axes) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 7), -3, 3), *b = ref_rand(TG_FLOAT32, SHAPE(2, 3, 5), -3, 3);
  for (int k = 0; k < 2; k++) {
    CHECK_REF("logsumexp 2-d axis 0", tg_logsumexp(T(a), 0, k), ref_logsumexp(a, 0, k));
    CHECK_REF("logsumexp 2-d axis -1", tg_logsumexp(T(a), -1, k), ref_logsumexp(a, -1, k));
    CHECK_REF("logsumexp 3-d axis 1", tg_logsumexp(T(b), 1, k), ref_logsumexp(b, 1, k));
  }
  ref_arr *big = ref_rand(TG_FLOAT32, SHAPE(3, 5), 200, 300);
  CHECK_REF("logsumexp of large values is stable", tg_logsumexp(T(big), 1, false), ref_logsumexp(big, 1, false));
}

/* ---- matmul ----------------------------------------------------------------------------------------- */
static void check_matmul(int na, const int64_t *sa, int nb, const int64_t *sb, tg_dtype dt, const char *file, int line) {
  char what[128], b1[64], b2[64];
  ref_arr *a = ref_rand(dt, na, sa, -2, 2), *b = ref_rand(dt, nb, sb, -2, 2);
  snprintf(what, sizeof what, "matmul %s @ %s %s", ref_shape_str(b1, sizeof b1, na, sa),
           ref_shape_str(b2, sizeof b2, nb, sb), ref_dtype_name(dt));
  ref_check_tol(what, tg_matmul(T(a), T(b)), ref_matmul(a, b), true, 1e-5, 1e-3, file, line);
}
#define MM(sa, sb) check_matmul(sa, sb, TG_FLOAT32, __FILE__, __LINE__)

REF_TEST(test_ops_matmul_2d) {
  MM(SHAPE(3, 4), SHAPE(4, 5));
  MM(SHAPE(1, 1), SHAPE(1, 1));
  MM(SHAPE(7, 13), SHAPE(13, 1));
  MM(SHAPE(33, 65), SHAPE(65, 17));
  MM(SHAPE(64, 64), SHAPE(64, 64));
}

REF_TEST(test_ops_matmul_1d) {
  MM(SHAPE(4), SHAPE(4, 5));
  MM(SHAPE(4, 5), SHAPE(5));
  MM(SHAPE(7), SHAPE(7));
  MM(SHAPE(3), SHAPE(2, 3, 4));
}

REF_TEST(test_ops_matmul_batched_broadcast) {
  MM(SHAPE(2, 3, 4), SHAPE(4, 5));
  MM(SHAPE(2, 3, 4), SHAPE(2, 4, 5));
  MM(SHAPE(2, 1, 3, 4), SHAPE(3, 4, 6));
  MM(SHAPE(5, 3, 7), SHAPE(1, 7, 2));
}

REF_TEST(test_ops_matmul_int32_and_transposed) {
  check_matmul(SHAPE(3, 4), SHAPE(4, 5), TG_INT32, __FILE__, __LINE__);
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(6, 5), -1, 1), *b = ref_rand(TG_FLOAT32, SHAPE(7, 6), -1, 1);
  CHECK_REF("matmul a.T @ b.T", tg_matmul(tg_transpose(T(a), 0, 1), tg_transpose(T(b), 0, 1)),
            ref_matmul(ref_transpose(a, 0, 1), ref_transpose(b, 0, 1)));
  ref_arr *c = ref_rand(TG_FLOAT32, SHAPE(4), -1, 1), *d = ref_rand(TG_FLOAT32, SHAPE(4, 3), -1, 1);
  CHECK_REF("dot 1-d @ 2-d", tg_dot(T(c), T(d)), ref_matmul(c, d));
  CHECK_REF("dot 1-d @ 1-d", tg_dot(T(c), T(c)), ref_matmul(c, c));
  ref_arr *e = ref_rand(TG_FLOAT32, SHAPE(5, 4), -1, 1);
  CHECK_REF("matmul then relu", tg_relu(tg_matmul(T(e), T(d))), ref_unary(R_RELU, ref_matmul(e, d), 0, 0));
}

/* ---- movement --------------------------------------------------------------------------------------- */
REF_TEST(test_ops_reshape) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(2, 3, 4), -1, 1);
  CHECK_REF("reshape (6,4)", tg_reshape(T(a), SHAPE(6, 4)), ref_reshape(a, SHAPE(6, 4)));
  CHECK_REF("reshape (-1,)", tg_reshape(T(a), SHAPE(-1)), ref_reshape(a, SHAPE(-1)));
  CHECK_REF("reshape (4,-1,2)", tg_reshape(T(a), SHAPE(4, -1, 2)), ref_reshape(a, SHAPE(4, -1, 2)));
  CHECK_REF("reshape (1,24,1)", tg_reshape(T(a), SHAPE(1, 24, 1)), ref_reshape(a, SHAPE(1, 24, 1)));
  ref_arr *s = ref_rand(TG_INT32, SHAPE(1), 0, 9);
  CHECK_REF("reshape (1,) -> ()", tg_reshape(T(s), 0, NULL), ref_reshape(s, 0, NULL));
  CHECK_REF("reshape of permuted", tg_reshape(tg_permute(T(a), AXES(2, 0, 1)), SHAPE(8, 3)),
            ref_reshape(ref_permute(a, (int[]){2, 0, 1}), SHAPE(8, 3)));
}

REF_TEST(test_ops_permute_transpose) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(2, 3, 4, 5), -1, 1);
  CHECK_REF("permute (3,1,0,2)", tg_permute(T(a), AXES(3, 1, 0, 2)), ref_permute(a, (int[]){3, 1, 0, 2}));
  CHECK_REF("permute negative axes", tg_permute(T(a), AXES(-1, -2, -3, -4)), ref_permute(a, (int[]){3, 2, 1, 0}));
  CHECK_REF("transpose(0, 2)", tg_transpose(T(a), 0, 2), ref_transpose(a, 0, 2));
  CHECK_REF("transpose(-1, -2)", tg_transpose(T(a), -1, -2), ref_transpose(a, -1, -2));
  ref_arr *u = ref_rand(TG_UINT8, SHAPE(3, 5), 0, 255);
  CHECK_REF("transpose uint8", tg_transpose(T(u), 0, 1), ref_transpose(u, 0, 1));
}

REF_TEST(test_ops_expand) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 1), -1, 1);
  CHECK_REF("expand (3,4)", tg_expand(T(a), SHAPE(3, 4)), ref_expand(a, SHAPE(3, 4)));
  CHECK_REF("expand (-1,4)", tg_expand(T(a), SHAPE(-1, 4)), ref_expand(a, SHAPE(-1, 4)));
  CHECK_REF("expand new leading dims (2,3,5)", tg_expand(T(a), SHAPE(2, 3, 5)), ref_expand(a, SHAPE(2, 3, 5)));
  ref_arr *s = ref_scalar(TG_INT32, 7);
  CHECK_REF("expand 0-d", tg_expand(T(s), SHAPE(2, 2)), ref_expand(s, SHAPE(2, 2)));
  ref_arr *b = ref_rand(TG_BOOL, SHAPE(1, 4, 1), 0, 1);
  CHECK_REF("expand bool", tg_expand(T(b), SHAPE(3, 4, 2)), ref_expand(b, SHAPE(3, 4, 2)));
}

REF_TEST(test_ops_pad) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 4), -1, 1);
  int64_t p1[] = {1, 2, 0, 3}, p2[] = {0, 0, 0, 0}, p3[] = {4, 0, 0, 1};
  CHECK_REF("pad 0", tg_pad_axes(T(a), 2, p1, 0), ref_pad(a, p1, 0));
  CHECK_REF("pad -inf", tg_pad_axes(T(a), 2, p1, -INFINITY), ref_pad(a, p1, -INFINITY));
  CHECK_REF("pad nothing", tg_pad_axes(T(a), 2, p2, 1), ref_pad(a, p2, 1));
  CHECK_REF("pad of transposed", tg_pad_axes(tg_transpose(T(a), 0, 1), 2, p3, 2.5),
            ref_pad(ref_transpose(a, 0, 1), p3, 2.5));
  ref_arr *i = ref_rand(TG_INT32, SHAPE(2, 2), -9, 9);
  CHECK_REF("pad int32 with 7", tg_pad_axes(T(i), 2, p1, 7), ref_pad(i, p1, 7));
  CHECK_REF("pad twice", tg_pad_axes(tg_pad_axes(T(a), 2, p1, 1), 2, p3, 2), ref_pad(ref_pad(a, p1, 1), p3, 2));
}

REF_TEST(test_ops_shrink) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(5, 6), -1, 1);
  int64_t b1[] = {1, 4, 0, 6}, b2[] = {0, 5, 2, 3}, b3[] = {2, 2, 0, 6};
  CHECK_REF("shrink rows", tg_shrink(T(a), 2, b1), ref_shrink(a, b1));
  CHECK_REF("shrink to one column", tg_shrink(T(a), 2, b2), ref_shrink(a, b2));
  CHECK_REF("shrink to empty", tg_shrink(T(a), 2, b3), ref_shrink(a, b3));
  int64_t p[] = {2, 2, 2, 2}, b4[] = {1, 8, 3, 7};
  CHECK_REF("shrink of padded", tg_shrink(tg_pad_axes(T(a), 2, p, -1), 2, b4), ref_shrink(ref_pad(a, p, -1), b4));
}

REF_TEST(test_ops_flip) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 4, 5), -1, 1);
  CHECK_REF("flip 0", tg_flip(T(a), AXES(0)), ref_flip(a, AXES(0)));
  CHECK_REF("flip -1", tg_flip(T(a), AXES(-1)), ref_flip(a, AXES(-1)));
  CHECK_REF("flip 0,2", tg_flip(T(a), AXES(0, 2)), ref_flip(a, AXES(0, 2)));
  CHECK_REF("flip twice is identity", tg_flip(tg_flip(T(a), AXES(1)), AXES(1)), a);
  ref_arr *l = ref_rand(TG_INT64, SHAPE(7), -9, 9);
  CHECK_REF("flip int64", tg_flip(T(l), AXES(0)), ref_flip(l, AXES(0)));
}

REF_TEST(test_ops_flatten_squeeze_unsqueeze) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(2, 1, 3, 1, 4), -1, 1);
  CHECK_REF("flatten all", tg_flatten(T(a), 0, -1), ref_flatten(a, 0, -1));
  CHECK_REF("flatten 1..3", tg_flatten(T(a), 1, 3), ref_flatten(a, 1, 3));
  CHECK_REF("squeeze all", tg_squeeze(T(a), TG_ALL), ref_squeeze(a, TG_ALL));
  CHECK_REF("squeeze 1", tg_squeeze(T(a), 1), ref_squeeze(a, 1));
  CHECK_REF("squeeze -2", tg_squeeze(T(a), -2), ref_squeeze(a, -2));
  CHECK_REF("squeeze of a non-1 axis keeps it", tg_squeeze(T(a), 0), ref_squeeze(a, 0));
  CHECK_REF("unsqueeze 0", tg_unsqueeze(T(a), 0), ref_unsqueeze(a, 0));
  CHECK_REF("unsqueeze -1", tg_unsqueeze(T(a), -1), ref_unsqueeze(a, -1));
  CHECK_REF("unsqueeze 3", tg_unsqueeze(T(a), 3), ref_unsqueeze(a, 3));
}

REF_TEST(test_ops_slice_steps) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(7, 9), -1, 1);
  static const tg_slice cases[][2] = {
      {{1, 5, 1, false}, {0, 0, 0, true}},
      {{0, TG_END, 2, false}, {1, TG_END, 3, false}},
      {{TG_END, INT64_MIN, -1, false}, {0, 0, 0, true}},
      {{-2, -6, -2, false}, {8, 0, -3, false}},
      {{-100, 100, 1, false}, {-3, TG_END, 1, false}},
      {{5, 2, 1, false}, {0, 0, 0, true}},
      {{6, 6, -1, false}, {2, 7, 4, false}},
      {{0, 0, 0, true}, {-1, -10, -4, false}},
  };
  char what[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(what, sizeof what, "slice case %zu", i);
    CHECK_REF(what, tg_slice_axes(T(a), 2, cases[i]), ref_slice(a, 2, cases[i]));
  }
  ref_arr *b = ref_rand(TG_INT32, SHAPE(5, 4, 3), -9, 9);
  tg_slice one[1] = {{1, TG_END, 3, false}};
  CHECK_REF("slice leading axis only", tg_slice_axes(T(b), 1, one), ref_slice(b, 1, one));
}

REF_TEST(test_ops_cat_stack) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(2, 3), -1, 1), *b = ref_rand(TG_FLOAT32, SHAPE(4, 3), -1, 1);
  ref_arr *c = ref_rand(TG_FLOAT32, SHAPE(1, 3), -1, 1);
  ref_arr *ra[] = {a, b, c};
  tg_tensor *ta[] = {T(a), T(b), T(c)};
  CHECK_REF("cat axis 0", tg_cat(3, ta, 0), ref_cat(3, ra, 0));
  ref_arr *d = ref_rand(TG_FLOAT32, SHAPE(2, 5), -1, 1);
  ref_arr *rb[] = {a, d};
  tg_tensor *tb[] = {T(a), T(d)};
  CHECK_REF("cat axis -1", tg_cat(2, tb, -1), ref_cat(2, rb, -1));
  ref_arr *rs[] = {a, a, ref_flip(a, AXES(1))};
  tg_tensor *ts[] = {T(a), T(a), tg_flip(T(a), AXES(1))};
  CHECK_REF("stack axis 0", tg_stack(3, ts, 0), ref_stack(3, rs, 0));
  CHECK_REF("stack axis 1", tg_stack(3, ts, 1), ref_stack(3, rs, 1));
  CHECK_REF("stack axis -1", tg_stack(3, ts, -1), ref_stack(3, rs, -1));
  ref_arr *i1 = ref_rand(TG_INT32, SHAPE(3), -9, 9), *i2 = ref_rand(TG_INT32, SHAPE(2), -9, 9);
  ref_arr *ri[] = {i1, i2};
  tg_tensor *ti[] = {T(i1), T(i2)};
  CHECK_REF("cat int32 1-d", tg_cat(2, ti, 0), ref_cat(2, ri, 0));
  tg_tensor *one[] = {T(a)};
  CHECK_REF("cat of one", tg_cat(1, one, 0), a);
}

REF_TEST(test_ops_split) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(3, 10), -1, 1);
  tg_tensor *out[3] = {NULL, NULL, NULL};
  int64_t sizes[] = {2, 5, 3};
  CHECK(tg_split(T(a), 3, sizes, 1, out) == TG_OK, "split: %s", tg_error());
  int64_t at = 0;
  for (int i = 0; i < 3; i++) {
    int64_t b[] = {0, 3, at, at + sizes[i]};
    CHECK_REF("split piece", out[i], ref_shrink(a, b));
    at += sizes[i];
  }
  int64_t s0[] = {1, 2};
  tg_tensor *o2[2] = {NULL, NULL};
  CHECK(tg_split(T(a), 2, s0, 0, o2) == TG_OK, "split axis 0: %s", tg_error());
  int64_t b0[] = {0, 1, 0, 10}, b1[] = {1, 3, 0, 10};
  CHECK_REF("split axis 0 piece 0", o2[0], ref_shrink(a, b0));
  CHECK_REF("split axis 0 piece 1", o2[1], ref_shrink(a, b1));
}

REF_TEST(test_ops_repeat) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(2, 3), -1, 1);
  CHECK_REF("repeat (2,1)", tg_repeat(T(a), SHAPE(2, 1)), ref_repeat(a, SHAPE(2, 1)));
  CHECK_REF("repeat (3,2)", tg_repeat(T(a), SHAPE(3, 2)), ref_repeat(a, SHAPE(3, 2)));
  CHECK_REF("repeat (2,1,2) adds a dim", tg_repeat(T(a), SHAPE(2, 1, 2)), ref_repeat(a, SHAPE(2, 1, 2)));
  ref_arr *i = ref_rand(TG_INT32, SHAPE(3), -9, 9);
  CHECK_REF("repeat int32 (4,)", tg_repeat(T(i), SHAPE(4)), ref_repeat(i, SHAPE(4)));
}

REF_TEST(test_ops_contiguous) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 5), -1, 1);
  tg_tensor *c = tg_contiguous(tg_transpose(T(a), 0, 1));
  CHECK_REF("contiguous of transposed", c, ref_transpose(a, 0, 1));
  CHECK_REF("add after contiguous", tg_add(c, c), ref_binary(R_ADD, ref_transpose(a, 0, 1), ref_transpose(a, 0, 1)));
}

/* ---- creation --------------------------------------------------------------------------------------- */
REF_TEST(test_ops_creation_full_zeros_ones) {
  static const tg_dtype dts[] = {TG_FLOAT32, TG_INT32, TG_INT64, TG_UINT8, TG_BOOL, TG_FLOAT16};
  for (int d = 0; d < 6; d++) {
    CHECK_REF("zeros", tg_zeros(dts[d], SHAPE(2, 3)), ref_full(dts[d], SHAPE(2, 3), 0));
    CHECK_REF("ones", tg_ones(dts[d], SHAPE(4)), ref_full(dts[d], SHAPE(4), 1));
    CHECK_REF("full 3", tg_full(dts[d], SHAPE(3, 1, 2), 3), ref_full(dts[d], SHAPE(3, 1, 2), 3));
  }
  CHECK_REF("full -2.5 float32", tg_full(TG_FLOAT32, SHAPE(5), -2.5), ref_full(TG_FLOAT32, SHAPE(5), -2.5));
  CHECK_REF("full 2.7 int32 truncates", tg_full(TG_INT32, SHAPE(2), 2.7), ref_full(TG_INT32, SHAPE(2), 2.7));
  CHECK_REF("scalar", tg_scalar(TG_FLOAT32, 4.25), ref_scalar(TG_FLOAT32, 4.25));
  CHECK_REF("scalar int64", tg_scalar(TG_INT64, -123456789012.0), ref_scalar(TG_INT64, -123456789012.0));
  CHECK_REF("zeros with a size-0 dim", tg_zeros(TG_FLOAT32, SHAPE(0, 4)), ref_full(TG_FLOAT32, SHAPE(0, 4), 0));
  tg_tensor *e = tg_empty(TG_INT32, SHAPE(3, 4));
  CHECK_T(e);
  CHECK(tg_ndim(e) == 2 && tg_shape(e, 0) == 3 && tg_shape(e, -1) == 4 && tg_dtype_of(e) == TG_INT32 &&
            tg_numel(e) == 12,
        "empty has the wrong shape or dtype");
  CHECK(tg_realize(e) == TG_OK, "realize empty: %s", tg_error());
}

REF_TEST(test_ops_creation_like) {
  ref_arr *a = ref_rand(TG_INT32, SHAPE(2, 5), -9, 9);
  tg_tensor *ta = T(a);
  CHECK_REF("full_like", tg_full_like(ta, 6), ref_full(TG_INT32, SHAPE(2, 5), 6));
  CHECK_REF("zeros_like", tg_zeros_like(ta), ref_full(TG_INT32, SHAPE(2, 5), 0));
  CHECK_REF("ones_like", tg_ones_like(ta), ref_full(TG_INT32, SHAPE(2, 5), 1));
  ref_arr *f = ref_rand(TG_FLOAT32, SHAPE(3), -1, 1);
  CHECK_REF("ones_like of transposed", tg_ones_like(tg_flip(T(f), AXES(0))), ref_full(TG_FLOAT32, SHAPE(3), 1));
  CHECK_REF("full_like float", tg_full_like(T(f), 0.5), ref_full(TG_FLOAT32, SHAPE(3), 0.5));
}

REF_TEST(test_ops_creation_arange) {
  CHECK_REF("arange 0..10", tg_arange(TG_INT32, 0, 10, 1), ref_arange(TG_INT32, 0, 10, 1));
  CHECK_REF("arange 10..0 step -3", tg_arange(TG_INT32, 10, 0, -3), ref_arange(TG_INT32, 10, 0, -3));
  CHECK_REF("arange float 0..1 step 0.1", tg_arange(TG_FLOAT32, 0, 1, 0.1), ref_arange(TG_FLOAT32, 0, 1, 0.1));
  CHECK_REF("arange float -2.5..3 step 0.75", tg_arange(TG_FLOAT32, -2.5, 3, 0.75), ref_arange(TG_FLOAT32, -2.5, 3, 0.75));
  CHECK_REF("arange empty", tg_arange(TG_FLOAT32, 5, 5, 1), ref_arange(TG_FLOAT32, 5, 5, 1));
  CHECK_REF("arange int64 1023", tg_arange(TG_INT64, 0, 1023, 1), ref_arange(TG_INT64, 0, 1023, 1));
  CHECK_REF("arange + 1", tg_add_scalar(tg_arange(TG_FLOAT32, 0, 13, 1), 1),
            ref_binary_scalar(R_ADD, ref_arange(TG_FLOAT32, 0, 13, 1), 1));
}

REF_TEST(test_ops_creation_eye) {
  CHECK_REF("eye 3", tg_eye(TG_FLOAT32, 3, 3), ref_eye(TG_FLOAT32, 3, 3));
  CHECK_REF("eye 2x5", tg_eye(TG_FLOAT32, 2, 5), ref_eye(TG_FLOAT32, 2, 5));
  CHECK_REF("eye 5x2 int32", tg_eye(TG_INT32, 5, 2), ref_eye(TG_INT32, 5, 2));
  CHECK_REF("eye 1 bool", tg_eye(TG_BOOL, 1, 1), ref_eye(TG_BOOL, 1, 1));
}

REF_TEST(test_ops_creation_from_data_dtypes) {
  static const tg_dtype dts[] = {TG_FLOAT32, TG_INT32, TG_INT64, TG_UINT8, TG_BOOL, TG_INT8, TG_INT16,
                                 TG_UINT16, TG_UINT32, TG_FLOAT64, TG_FLOAT16, TG_BFLOAT16};
  for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
    ref_arr *a = ref_rand(dts[d], SHAPE(3, 5), ref_is_unsigned(dts[d]) ? 0 : -100, 100);
    char what[64];
    snprintf(what, sizeof what, "from_data round trip %s", ref_dtype_name(dts[d]));
    CHECK_REF(what, T(a), a);
    snprintf(what, sizeof what, "from_data transposed %s", ref_dtype_name(dts[d]));
    CHECK_REF(what, tg_transpose(T(a), 0, 1), ref_transpose(a, 0, 1));
  }
}

REF_TEST(test_ops_from_blob_sees_host_writes) {
  REQUIRE_CPU();  /* a GPU device copies the blob when the tensor is made (tg.h) */
  REQUIRE_CPU();  /* a GPU device copies the blob when the tensor is made (tg.h) */
  static _Alignas(64) float buf[16];
  for (int i = 0; i < 16; i++) buf[i] = (float)i;
  tg_tensor *t = tg_from_blob(TG_FLOAT32, SHAPE(4, 4), buf, sizeof buf);
  CHECK_T(t);
  tg_tensor *y = tg_mul_scalar(t, 2);
  CHECK_T(y);
  for (int i = 0; i < 16; i++) buf[i] = 100.0f + (float)i;  /* written after building, before realizing */
  float got[16], want[16];
  CHECK(tg_to_host(y, got, sizeof got) == TG_OK, "to_host: %s", tg_error());
  for (int i = 0; i < 16; i++) want[i] = 2 * (100.0f + (float)i);
  CHECK_CLOSE("from_blob * 2", got, want, 16);
  for (int i = 0; i < 16; i++) buf[i] = -(float)i;
  tg_tensor *z = tg_add_scalar(t, 1);
  CHECK(tg_to_host(z, got, sizeof got) == TG_OK, "to_host: %s", tg_error());
  for (int i = 0; i < 16; i++) want[i] = 1 - (float)i;
  CHECK_CLOSE("from_blob + 1 after a second write", got, want, 16);
  CHECK(tg_to_host(t, got, sizeof got) == TG_OK, "to_host of the blob: %s", tg_error());
  for (int i = 0; i < 16; i++) want[i] = -(float)i;
  CHECK_CLOSE("from_blob itself", got, want, 16);
}

/* ---- running and reading ---------------------------------------------------------------------------- */
REF_TEST(test_ops_realize_many) {
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(5, 6), -1, 1);
  tg_tensor *ta = T(a);
  tg_tensor *e = tg_exp(ta);
  tg_tensor *outs[3] = {e, tg_add_scalar(e, 1), tg_sum(e, AXES(1), false)};
  CHECK(tg_realize_many(3, outs) == TG_OK, "realize_many: %s", tg_error());
  ref_arr *re = ref_unary(R_EXP, a, 0, 0);
  CHECK_REF("out 0", outs[0], re);
  CHECK_REF("out 1", outs[1], ref_binary_scalar(R_ADD, re, 1));
  CHECK_REF("out 2", outs[2], ref_reduce(R_SUM, re, AXES(1), false));
  CHECK(tg_realize_many(0, NULL) == TG_OK, "realize_many of nothing: %s", tg_error());
  CHECK(tg_realize(outs[0]) == TG_OK, "realize again: %s", tg_error());
}

REF_TEST(test_ops_item) {
  CHECK(tg_item(tg_scalar(TG_FLOAT32, 2.5)) == 2.5, "item of 0-d");
  CHECK(tg_item(tg_full(TG_INT32, SHAPE(1, 1), -7)) == -7, "item of (1,1) int32");
  CHECK(tg_item(tg_scalar(TG_BOOL, 1)) == 1, "item of bool");
  ref_arr *a = ref_rand(TG_FLOAT32, SHAPE(4, 4), -1, 1);
  ref_arr *s = ref_reduce(R_SUM, a, 0, NULL, false);
  double v = tg_item(tg_sum(T(a), 0, NULL, false));
  CHECK(fabs(v - s->data[0]) <= 1e-6 + 1e-3 * fabs(s->data[0]), "item of sum: got %g want %g", v, s->data[0]);
  CHECK(tg_item(tg_max(tg_arange(TG_INT64, 0, 100, 1), 0, NULL, false)) == 99, "item of int64 max");
  CHECK(isnan(tg_item(T(a))), "item of a 16-element tensor is NaN");
  CHECK(isnan(tg_item(NULL)), "item of NULL is NaN");
}

REF_TEST(test_ops_properties) {
  tg_tensor *t = tg_zeros(TG_UINT8, SHAPE(2, 3, 4));
  CHECK_T(t);
  CHECK(tg_ndim(t) == 3, "ndim");
  CHECK(tg_shape(t, 0) == 2 && tg_shape(t, 2) == 4 && tg_shape(t, -1) == 4 && tg_shape(t, -3) == 2, "shape");
  CHECK(tg_shape(t, 3) == -1 && tg_shape(t, -4) == -1, "shape out of range is -1");
  const int64_t *sp = tg_shape_ptr(t);
  CHECK(sp && sp[0] == 2 && sp[1] == 3 && sp[2] == 4, "shape_ptr");
  CHECK(tg_numel(t) == 24, "numel");
  CHECK(tg_dtype_of(t) == TG_UINT8, "dtype_of");
  CHECK(tg_dtype_size(TG_FLOAT16) == 2 && tg_dtype_size(TG_INT64) == 8 && tg_dtype_size(TG_BOOL) == 1, "dtype_size");
  CHECK(strcmp(tg_dtype_name(TG_BFLOAT16), "bfloat16") == 0, "dtype_name");
  tg_tensor *s = tg_scalar(TG_FLOAT32, 1);
  CHECK(tg_ndim(s) == 0 && tg_numel(s) == 1, "0-d properties");
}

REF_TEST(test_ops_half_dtypes) {
  ref_arr *h = ref_rand(TG_FLOAT16, SHAPE(4, 6), -4, 4), *g = ref_rand(TG_FLOAT16, SHAPE(6), -4, 4);
  CHECK_REF("float16 add", tg_add(T(h), T(g)), ref_binary(R_ADD, h, g));
  CHECK_REF("float16 mul", tg_mul(T(h), T(g)), ref_binary(R_MUL, h, g));
  CHECK_REF("float16 sum stays float16", tg_sum(T(h), AXES(1), false), ref_reduce(R_SUM, h, AXES(1), false));
  /* tinygrad accumulates float16 sums in float32: 2048 + 1 is 2048 in float16 */
  CHECK_REF("float16 sum of 4096 ones", tg_sum(tg_ones(TG_FLOAT16, SHAPE(4096)), 0, NULL, false),
            ref_scalar(TG_FLOAT16, 4096));
  CHECK_REF("float16 -> float32", tg_cast(T(h), TG_FLOAT32), ref_cast(h, TG_FLOAT32));
  ref_arr *f = ref_rand(TG_FLOAT32, SHAPE(6), -4, 4);
  CHECK_REF("float16 + float32 is float32", tg_add(T(g), T(f)), ref_binary(R_ADD, g, f));
  ref_arr *b = ref_rand(TG_BFLOAT16, SHAPE(4, 6), -4, 4);
  CHECK_REF("bfloat16 -> float32", tg_cast(T(b), TG_FLOAT32), ref_cast(b, TG_FLOAT32));
  CHECK_REF("bfloat16 add", tg_add(T(b), T(b)), ref_binary(R_ADD, b, b));
  CHECK_REF("float16 + bfloat16 is float32", tg_add(T(h), T(b)), ref_binary(R_ADD, h, b));
  ref_arr *i = ref_rand(TG_INT32, SHAPE(5), -300, 300);
  CHECK_REF("int32 -> bfloat16", tg_cast(T(i), TG_BFLOAT16), ref_cast(i, TG_BFLOAT16));
  CHECK_REF("int32 -> float16", tg_cast(T(i), TG_FLOAT16), ref_cast(i, TG_FLOAT16));
}
