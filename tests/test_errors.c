/* test_errors.c — errors are values: a bad call returns NULL (or a negative status), records a message that
 * names the op and the offending values, never crashes, and any op given NULL returns NULL. */
#include <stdlib.h>

#include "test.h"

#define ERR_TEST(name)           \
  static void name##_body(void); \
  TEST(name) {                   \
    tg_scope_begin();            \
    name##_body();               \
    tg_scope_end();              \
    tg_error_clear();            \
  }                              \
  static void name##_body(void)

#define SH(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
#define AX(...) (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (const int[]){__VA_ARGS__}

/* failed: the call reported failure; then the message must contain every one of want (NULL-terminated) */
static void check_err(bool failed, const char *expr, const char *const *want, const char *file, int line) {
  const char *msg = tg_error();
  if (!failed) {
    test_fail(file, line, "%s: expected an error, got success", expr);
    return;
  }
  if (!msg || !msg[0]) {
    test_fail(file, line, "%s: failed with an empty tg_error()", expr);
    return;
  }
  for (int i = 0; want[i]; i++)
    if (!strstr(msg, want[i])) test_fail(file, line, "%s: message \"%s\" lacks \"%s\"", expr, msg, want[i]);
  if (tg_error_status() >= 0) test_fail(file, line, "%s: tg_error_status() is %d, want negative", expr, tg_error_status());
}

/* the tensor expression must be NULL, with a message naming the given words */
#define CHECK_ERR(expr, ...)                                                                    \
  do {                                                                                          \
    tg_error_clear();                                                                           \
    tg_tensor *r_ = (expr);                                                                     \
    check_err(r_ == NULL, #expr, (const char *const[]){__VA_ARGS__, NULL}, __FILE__, __LINE__); \
  } while (0)
/* the status expression must be negative */
#define CHECK_ERR_ST(expr, ...)                                                               \
  do {                                                                                        \
    tg_error_clear();                                                                         \
    tg_status s_ = (expr);                                                                    \
    check_err(s_ < 0, #expr, (const char *const[]){__VA_ARGS__, NULL}, __FILE__, __LINE__);   \
  } while (0)

static tg_tensor *f32(int ndim, const int64_t *shape) { return tg_ones(TG_FLOAT32, ndim, shape); }

ERR_TEST(test_errors_matmul_shape_mismatch_names_both_shapes) {
  tg_tensor *a = f32(SH(2, 3)), *b = f32(SH(4, 5));
  CHECK_T(a);
  CHECK_T(b);
  CHECK_ERR(tg_matmul(a, b), "matmul", "(2, 3)", "(4, 5)");
  CHECK(tg_error_status() == TG_ERR_ARG, "status %d, want TG_ERR_ARG", tg_error_status());
  tg_tensor *c = f32(SH(3)), *d = f32(SH(4));
  CHECK_ERR(tg_matmul(c, d), "matmul", "(3,)", "(4,)");
  tg_tensor *e = f32(SH(2, 2, 3)), *f = f32(SH(3, 3, 4));
  CHECK_ERR(tg_matmul(e, f), "matmul");  /* batch dims 2 and 3 do not broadcast */
  tg_tensor *s = tg_scalar(TG_FLOAT32, 1);
  CHECK_ERR(tg_matmul(s, a), "matmul");  /* 0-d */
  CHECK_ERR(tg_dot(a, b), "(2, 3)", "(4, 5)");
}

ERR_TEST(test_errors_reshape_element_count) {
  tg_tensor *a = f32(SH(2, 3));
  CHECK_T(a);
  CHECK_ERR(tg_reshape(a, SH(4, 2)), "reshape", "(2, 3)", "(4, 2)");
  CHECK_ERR(tg_reshape(a, SH(-1, -1)), "reshape");
  CHECK_ERR(tg_reshape(a, SH(-1, 4)), "reshape");
  CHECK_ERR(tg_reshape(a, SH(7)), "reshape");
  CHECK_ERR(tg_reshape(a, SH(-2, -3)), "reshape");
}

ERR_TEST(test_errors_permute_bad_axes) {
  tg_tensor *a = f32(SH(2, 3, 4));
  CHECK_T(a);
  CHECK_ERR(tg_permute(a, AX(0, 0, 1)), "permute");
  CHECK_ERR(tg_permute(a, AX(0, 1, 3)), "permute");
  CHECK_ERR(tg_permute(a, AX(0, 1, -4)), "permute");
  CHECK_ERR(tg_permute(a, AX(1, 0)), "permute");
  CHECK_ERR(tg_transpose(a, 0, 3), "transpose");
}

ERR_TEST(test_errors_broadcast_incompatible) {
  tg_tensor *a = f32(SH(3, 4)), *b = f32(SH(2, 4));
  CHECK_T(a);
  CHECK_T(b);
  CHECK_ERR(tg_add(a, b), "add", "(3, 4)", "(2, 4)");
  CHECK_ERR(tg_mul(a, b), "mul");
  CHECK_ERR(tg_where(tg_gt(a, a), a, b), "where");
  tg_tensor *c = f32(SH(3));
  CHECK_ERR(tg_sub(a, c), "sub", "(3, 4)", "(3,)");
}

ERR_TEST(test_errors_null_inputs_return_null) {
  tg_tensor *a = f32(SH(2, 3));
  CHECK_T(a);
  int64_t sh[] = {2, 3}, pads[] = {0, 0, 0, 0}, bounds[] = {0, 1, 0, 1};
  int ord[] = {1, 0}, ax[] = {0};
  tg_slice sl[] = {{0, 1, 1, false}};
  tg_tensor *(*un[])(tg_tensor *) = {
      tg_neg,  tg_exp,      tg_exp2,       tg_log,   tg_log2,     tg_sqrt,     tg_rsqrt,    tg_sin,
      tg_cos,  tg_tan,      tg_reciprocal, tg_abs,   tg_sign,     tg_square,   tg_trunc,    tg_floor,
      tg_ceil, tg_relu,     tg_sigmoid,    tg_tanh,  tg_gelu,     tg_silu,     tg_softplus, tg_relu6,
      tg_hardswish, tg_hardsigmoid, tg_mish, tg_logical_not, tg_contiguous,
  };
  for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) CHECK(un[i](NULL) == NULL, "unary #%zu of NULL", i);
  tg_tensor *(*bin[])(tg_tensor *, tg_tensor *) = {
      tg_add, tg_sub, tg_mul, tg_div, tg_idiv, tg_mod, tg_pow, tg_maximum, tg_minimum, tg_lt, tg_le, tg_gt,
      tg_ge,  tg_eq,  tg_ne,  tg_bitwise_and, tg_bitwise_or, tg_bitwise_xor, tg_matmul, tg_dot,
  };
  for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++) {
    CHECK(bin[i](NULL, a) == NULL, "binary #%zu (NULL, a)", i);
    CHECK(bin[i](a, NULL) == NULL, "binary #%zu (a, NULL)", i);
    CHECK(bin[i](NULL, NULL) == NULL, "binary #%zu (NULL, NULL)", i);
  }
  tg_tensor *(*sc[])(tg_tensor *, double) = {tg_add_scalar,  tg_sub_scalar,     tg_mul_scalar,    tg_div_scalar,
                                             tg_pow_scalar,  tg_maximum_scalar, tg_minimum_scalar, tg_leaky_relu,
                                             tg_elu};
  for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) CHECK(sc[i](NULL, 2) == NULL, "scalar op #%zu of NULL", i);
  CHECK(tg_clamp(NULL, 0, 1) == NULL, "clamp");
  CHECK(tg_zeros_like(NULL) == NULL && tg_ones_like(NULL) == NULL && tg_full_like(NULL, 2) == NULL, "*_like");
  CHECK(tg_where(NULL, a, a) == NULL && tg_where(tg_gt(a, a), NULL, a) == NULL && tg_where(tg_gt(a, a), a, NULL) == NULL,
        "where");
  CHECK(tg_cast(NULL, TG_INT32) == NULL && tg_bitcast(NULL, TG_INT32) == NULL, "cast");
  CHECK(tg_reshape(NULL, 2, sh) == NULL && tg_permute(NULL, 2, ord) == NULL && tg_expand(NULL, 2, sh) == NULL, "mv");
  CHECK(tg_pad_axes(NULL, 2, pads, 0) == NULL && tg_shrink(NULL, 2, bounds) == NULL && tg_flip(NULL, 1, ax) == NULL, "mv");
  CHECK(tg_transpose(NULL, 0, 1) == NULL && tg_flatten(NULL, 0, -1) == NULL && tg_squeeze(NULL, TG_ALL) == NULL &&
            tg_unsqueeze(NULL, 0) == NULL,
        "mv");
  CHECK(tg_slice_axes(NULL, 1, sl) == NULL && tg_repeat(NULL, 2, sh) == NULL, "slice/repeat");
  tg_tensor *two[] = {a, NULL};
  CHECK(tg_cat(2, two, 0) == NULL && tg_stack(2, two, 0) == NULL, "cat/stack with a NULL entry");
  tg_tensor *out[2] = {NULL, NULL};
  int64_t sizes[] = {1, 1};
  CHECK(tg_split(NULL, 2, sizes, 0, out) < 0, "split of NULL");
  CHECK(tg_sum(NULL, 0, NULL, false) == NULL && tg_prod(NULL, 0, NULL, false) == NULL &&
            tg_max(NULL, 0, NULL, false) == NULL && tg_min(NULL, 0, NULL, false) == NULL &&
            tg_mean(NULL, 0, NULL, false) == NULL,
        "reductions");
  CHECK(tg_var(NULL, 0, NULL, false, 1) == NULL && tg_std(NULL, 0, NULL, false, 1) == NULL, "var/std");
  CHECK(tg_argmax(NULL, 0, false) == NULL && tg_argmin(NULL, 0, false) == NULL, "argmax/argmin");
  CHECK(tg_softmax(NULL, 0) == NULL && tg_log_softmax(NULL, 0) == NULL && tg_logsumexp(NULL, 0, false) == NULL,
        "softmax");
  CHECK(tg_from_data(TG_FLOAT32, 2, sh, NULL, 24) == NULL, "from_data of NULL data");
  CHECK(tg_from_blob(TG_FLOAT32, 2, sh, NULL, 24) == NULL, "from_blob of NULL data");
  CHECK(tg_realize(NULL) < 0, "realize NULL");
  tg_tensor *many[] = {a, NULL};
  CHECK(tg_realize_many(2, many) < 0, "realize_many with a NULL");
  float buf[6];
  CHECK(tg_to_host(NULL, buf, sizeof buf) < 0, "to_host NULL");
  CHECK(tg_to_host(a, NULL, sizeof buf) < 0, "to_host into NULL");
  CHECK(isnan(tg_item(NULL)), "item NULL");
  tg_free(NULL);
  CHECK(tg_keep(NULL) == NULL && tg_retain(NULL) == NULL, "keep/retain NULL");
  /* still usable after all that */
  CHECK(tg_item(tg_sum(a, 0, NULL, false)) == 6, "a working op after NULL inputs");
}

ERR_TEST(test_errors_chain_keeps_first_message) {
  tg_tensor *a = f32(SH(2, 3)), *b = f32(SH(4, 5));
  CHECK_T(a);
  CHECK_T(b);
  tg_error_clear();
  tg_tensor *y = tg_relu(tg_add_scalar(tg_matmul(a, b), 1));
  CHECK(y == NULL, "chain with a bad matmul is not NULL");
  CHECK(strstr(tg_error(), "matmul") != NULL, "the chain's message \"%s\" lost the first error", tg_error());
}

ERR_TEST(test_errors_to_host_wrong_byte_count) {
  tg_tensor *a = f32(SH(2, 3));
  CHECK_T(a);
  float buf[8];
  CHECK_ERR_ST(tg_to_host(a, buf, 5 * sizeof(float)), "to_host");
  CHECK_ERR_ST(tg_to_host(a, buf, 7 * sizeof(float)), "to_host");
  CHECK_ERR_ST(tg_to_host(a, buf, 6 * sizeof(float) + 1), "to_host");
  CHECK(tg_to_host(a, buf, 6 * sizeof(float)) == TG_OK, "the right count fails: %s", tg_error());
  float data[6] = {0};
  CHECK_ERR(tg_from_data(TG_FLOAT32, SH(2, 3), data, 5 * sizeof(float)), "from_data");
  CHECK_ERR(tg_from_blob(TG_FLOAT32, SH(2, 3), data, 7 * sizeof(float)), "from_blob");
}

ERR_TEST(test_errors_bad_dtype) {
  tg_dtype bad = (tg_dtype)99, neg = (tg_dtype)-1;
  CHECK(tg_dtype_size(bad) == 0 && tg_dtype_size(TG_DTYPE_COUNT) == 0, "dtype_size of a bad dtype");
  CHECK(strcmp(tg_dtype_name(bad), "?") == 0, "dtype_name of a bad dtype");
  CHECK_ERR(tg_zeros(bad, SH(2)), "zeros");
  CHECK_ERR(tg_ones(neg, SH(2)), "ones");
  CHECK_ERR(tg_full(TG_DTYPE_COUNT, SH(2), 1), "full");
  CHECK_ERR(tg_empty(bad, SH(2)), "empty");
  CHECK_ERR(tg_scalar(bad, 1), "scalar");
  CHECK_ERR(tg_arange(bad, 0, 4, 1), "arange");
  CHECK_ERR(tg_eye(bad, 2, 2), "eye");
  float data[2] = {0};
  CHECK_ERR(tg_from_data(bad, SH(2), data, sizeof data), "from_data");
  tg_tensor *a = f32(SH(2));
  CHECK_T(a);
  CHECK_ERR(tg_cast(a, bad), "cast");
  CHECK_ERR(tg_bitcast(a, bad), "bitcast");
  /* another element size: the last dim's bytes must be whole elements of it, and a 0-dim tensor has no last dim */
  CHECK_ERR(tg_bitcast(f32(SH(3)), TG_INT64), "bitcast");
  CHECK_ERR(tg_bitcast(tg_from_data(TG_UINT8, SH(2, 3), data, 6), TG_UINT16), "bitcast");
  CHECK_ERR(tg_bitcast(tg_scalar(TG_FLOAT32, 1), TG_FLOAT16), "bitcast");
  CHECK_ERR(tg_bitcast(f32(SH(2)), TG_BOOL), "bitcast");  /* bytes other than 0 and 1 are no bools */
}

ERR_TEST(test_errors_negative_and_bad_shapes) {
  CHECK_ERR(tg_zeros(TG_FLOAT32, SH(2, -3)), "zeros");
  CHECK_ERR(tg_ones(TG_FLOAT32, SH(-1)), "ones");
  CHECK_ERR(tg_full(TG_FLOAT32, SH(-5, 2), 1), "full");
  CHECK_ERR(tg_empty(TG_FLOAT32, SH(3, -2)), "empty");
  float data[4] = {0};
  CHECK_ERR(tg_from_data(TG_FLOAT32, SH(-2, -2), data, sizeof data), "from_data");
  int64_t big[TG_MAX_DIMS + 1];
  for (int i = 0; i <= TG_MAX_DIMS; i++) big[i] = 1;
  CHECK_ERR(tg_zeros(TG_FLOAT32, TG_MAX_DIMS + 1, big), "zeros");
  CHECK_ERR(tg_zeros(TG_FLOAT32, -1, big), "zeros");
  CHECK_ERR(tg_arange(TG_FLOAT32, 0, 5, 0), "arange");
  CHECK_ERR(tg_eye(TG_FLOAT32, -1, 2), "eye");
  tg_tensor *a = f32(SH(3, 1));
  CHECK_T(a);
  CHECK_ERR(tg_expand(a, SH(3, -4)), "expand");
  CHECK_ERR(tg_expand(a, SH(2, 4)), "expand", "(3, 1)", "(2, 4)");  /* a non-1 axis */
  CHECK_ERR(tg_expand(a, SH(4)), "expand");
}

ERR_TEST(test_errors_movement_bad_arguments) {
  tg_tensor *a = f32(SH(3, 4));
  CHECK_T(a);
  CHECK_ERR(tg_pad_axes(a, 2, (const int64_t[]){-2, -2, 0, 0}, 0), "pad");   /* crops 4 of 3 */
  CHECK_ERR(tg_pad_axes(a, 2, (const int64_t[]){INT64_MIN, 0, 0, 0}, 0), "pad");
  CHECK_ERR(tg_pad_axes(a, 2, (const int64_t[]){0, INT64_MAX, 0, 0}, 0), "pad");   /* overflows */
  CHECK_ERR(tg_pad_axes(a, 1, (const int64_t[]){1, 1}, 0), "pad");
  CHECK_ERR(tg_pad(a, 3, (const int64_t[]){1, 1, 1}, 0), "pad");      /* odd count */
  CHECK_ERR(tg_pad(a, 6, (const int64_t[]){1, 1, 1, 1, 1, 1}, 0), "pad");   /* 3 axes of 2 */
  CHECK_ERR(tg_shrink(a, 2, (const int64_t[]){0, 4, 0, 4}), "shrink");
  CHECK_ERR(tg_shrink(a, 2, (const int64_t[]){2, 1, 0, 4}), "shrink");
  CHECK_ERR(tg_shrink(a, 2, (const int64_t[]){-1, 2, 0, 4}), "shrink");
  CHECK_ERR(tg_flip(a, AX(2)), "flip");
  CHECK_ERR(tg_flip(a, AX(0, 0)), "flip");
  CHECK_ERR(tg_squeeze(a, 5), "squeeze");
  CHECK_ERR(tg_unsqueeze(a, 4), "unsqueeze");
  tg_slice zero_step[] = {{0, 2, 0, false}};
  CHECK_ERR(tg_slice_axes(a, 1, zero_step), "slice");
  tg_slice too_many[3] = {{0, 0, 0, true}, {0, 0, 0, true}, {0, 0, 0, true}};
  CHECK_ERR(tg_slice_axes(a, 3, too_many), "slice");
  CHECK_ERR(tg_repeat(a, SH(2)), "repeat");
  CHECK_ERR(tg_repeat(a, SH(2, -1)), "repeat");
  tg_tensor *b = f32(SH(3, 5)), *c = f32(SH(2, 4, 1));
  tg_tensor *ab[] = {a, b}, *ac[] = {a, c};
  CHECK_ERR(tg_cat(2, ab, 0), "cat");
  CHECK_ERR(tg_cat(2, ac, 0), "cat");
  CHECK_ERR(tg_cat(2, ab, 2), "cat");
  CHECK_ERR(tg_cat(0, ab, 0), "cat");
  CHECK_ERR(tg_stack(2, ab, 0), "stack");
  tg_tensor *out[2] = {NULL, NULL};
  CHECK_ERR_ST(tg_split(a, 2, (const int64_t[]){1, 1}, 0, out), "split");
  CHECK_ERR_ST(tg_split(a, 2, (const int64_t[]){-1, 5}, 1, out), "split");
  CHECK_ERR_ST(tg_split(a, 2, (const int64_t[]){1, 2}, 2, out), "split");
}

ERR_TEST(test_errors_reduce_bad_axes) {
  tg_tensor *a = f32(SH(3, 4));
  CHECK_T(a);
  CHECK_ERR(tg_sum(a, AX(2), false), "sum");
  CHECK_ERR(tg_sum(a, AX(-3), false), "sum");
  CHECK_ERR(tg_mean(a, AX(5), true), "mean");
  CHECK_ERR(tg_argmax(a, 2, false), "argmax");
  CHECK_ERR(tg_argmin(a, -3, false), "argmin");
  CHECK_ERR(tg_softmax(a, 2), "softmax");
  CHECK_ERR(tg_log_softmax(a, -3), "log_softmax");
  CHECK_ERR(tg_logsumexp(a, 7, false), "logsumexp");
  CHECK_ERR(tg_var(a, AX(3), false, 1), "var");
}

ERR_TEST(test_errors_dtype_rules) {
  tg_tensor *f = f32(SH(2));
  CHECK_T(f);
  CHECK_ERR(tg_bitwise_and(f, f), "bitwise_and");
  CHECK_ERR(tg_bitwise_xor(f, f), "bitwise_xor");
  tg_tensor *a = f32(SH(3, 4)), *many[] = {a};
  CHECK(tg_item(a) != tg_item(a), "item of a 12-element tensor is NaN");
  CHECK(tg_realize_many(1, many) == TG_OK, "realize_many after errors: %s", tg_error());
}

/* b = a * 2 built, then a += 10 realized in place: b's contents are gone, and realizing b is refused (it would
 * have been 2 (a + 10)); realized before the assign, or together with it, b is 2a; a and graphs built after
 * it read the new values */
ERR_TEST(test_errors_read_of_a_buffer_overwritten_in_place_is_refused) {
  const float v[4] = {1, 2, 3, 4};
  tg_tensor *a = tg_from_data(TG_FLOAT32, SH(4), v, sizeof v);
  CHECK(tg_realize(a) == TG_OK, "%s", tg_error());
  tg_tensor *early = tg_mul_scalar(a, 2), *stale = tg_mul_scalar(a, 3);
  CHECK(tg_realize(early) == TG_OK, "%s", tg_error());
  CHECK(tg_assign(a, tg_add_scalar(a, 10)) == TG_OK && tg_realize(a) == TG_OK, "%s", tg_error());
  float got[4], twice[4];
  CHECK_ERR_ST(tg_to_host(stale, got, sizeof got), "overwritten in place", "(4,)");
  CHECK(tg_to_host(early, got, sizeof got) == TG_OK && got[0] == 2 && got[3] == 8, "early: %g .. %g", got[0], got[3]);
  CHECK(tg_to_host(a, got, sizeof got) == TG_OK && got[0] == 11 && got[3] == 14, "a: %g .. %g", got[0], got[3]);
  tg_tensor *with = tg_mul_scalar(a, 2);  /* realized together with the next assign: the old a, doubled */
  CHECK(tg_assign(a, tg_add_scalar(a, 1)) == TG_OK, "%s", tg_error());
  tg_tensor *both[2] = {a, with};
  CHECK(tg_realize_many(2, both) == TG_OK, "%s", tg_error());
  CHECK(tg_to_host(with, twice, sizeof twice) == TG_OK && twice[0] == 22 && twice[3] == 28, "with: %g .. %g", twice[0],
        twice[3]);
  CHECK(tg_to_host(tg_mul_scalar(a, 2), got, sizeof got) == TG_OK && got[0] == 24 && got[3] == 30, "after: %g .. %g",
        got[0], got[3]);
}

/* the layers refuse a NULL layer struct; a failed op's message survives tg_split; tg_rand wants a float type */
ERR_TEST(test_errors_layers_null_struct_split_keeps_message_rand_int) {
  CHECK_ERR_ST(tg_nn_linear_init(NULL, 2, 3, true), "tg_nn_linear_init", "NULL");
  CHECK_ERR_ST(tg_nn_conv2d_init(NULL, 1, 2, TG_INTS(3), true, tg_conv_defaults()), "tg_nn_conv2d_init");
  CHECK_ERR_ST(tg_nn_batchnorm_params(NULL, "bn", NULL), "tg_nn_batchnorm_params");
  tg_nn_embedding_free(NULL);  /* a no-op, as free(NULL) */
  tg_nn_linear l;
  CHECK_ERR_ST(tg_nn_conv2d_init(&(tg_nn_conv2d){0}, 4, 4, TG_INTS(3, 3, 3, 3), true, tg_conv_defaults()), "kernel");
  CHECK(tg_nn_linear_init(&l, 2, 3, true) == TG_OK, "%s", tg_error());
  tg_nn_linear_free(&l);
  tg_tensor *out[2];
  tg_tensor *bad = tg_reshape(f32(SH(4)), SH(3));  /* fails: its message names tg_reshape */
  CHECK(bad == NULL, "reshape of 4 to 3 succeeded");
  CHECK(tg_split(bad, 2, (const int64_t[]){1, 2}, 0, out) < 0 && strstr(tg_error(), "tg_reshape"),
        "tg_split(NULL) replaced the failed op's message: %s", tg_error());
  CHECK_ERR(tg_rand(TG_INT32, SH(3)), "tg_rand", "int32");
  CHECK(tg_dtype_of(NULL) == TG_DTYPE_COUNT, "tg_dtype_of(NULL) is a real dtype");
}
