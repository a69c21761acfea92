/* ref.h — a plain C reference for every forward op of tg.h, written independently of the library.
 *
 * A ref_arr is a contiguous row-major n-d array of doubles with a dtype tag: every op materializes its
 * result, computes in double and rounds each stored element to its dtype (float32 rounding, integer
 * wrap-around, bool 0/1), so a test compares tg's result with ref_check() and nothing in here shares code
 * with the library's graph, scheduler or code generator. Semantics follow tinygrad: numpy broadcasting,
 * tinygrad's dtype promotion lattice, weak python scalars, sum accumulating ints in at least 32 bits,
 * idiv truncating toward zero, mod with the sign of the divisor, argmax returning the first extreme as int32.
 *
 * Arrays are owned by one global pool: ref_free_all() frees every array made since the last call, so a test
 * calls it once at its end. Inputs come from a seeded xorshift generator (ref_seed / ref_rand*), never rand().
 */
#ifndef TG_TEST_REF_H
#define TG_TEST_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "tg.h"

typedef struct ref_arr {
  tg_dtype dtype;
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  int64_t numel;
  double *data;  /* numel values, row-major, each exactly representable in dtype */
} ref_arr;

/* "ndim, shape" argument pair from a list of sizes: ref_rand(TG_FLOAT32, SHAPE(3, 4), -1, 1) */
#define SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
#define AXES(...) (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (const int[]){__VA_ARGS__}

/* ---- seeded generator (xorshift64*) ------------------------------------------------------------------ */
void ref_seed(uint64_t seed);
uint64_t ref_next(void);
double ref_uniform(double lo, double hi);   /* [lo, hi) */
int64_t ref_randint(int64_t lo, int64_t hi); /* [lo, hi] */

/* ---- dtypes ------------------------------------------------------------------------------------------- */
bool ref_is_float(tg_dtype dt);
bool ref_is_unsigned(tg_dtype dt);
bool ref_is_int(tg_dtype dt);                 /* signed or unsigned integer, not bool */
size_t ref_dtype_size(tg_dtype dt);
const char *ref_dtype_name(tg_dtype dt);
tg_dtype ref_promote(tg_dtype a, tg_dtype b); /* tinygrad's least_upper_dtype */
tg_dtype ref_sum_dtype(tg_dtype dt);          /* the dtype tg_sum returns */
double ref_round(tg_dtype dt, double v);      /* v stored in dt (C conversion semantics) */
uint16_t ref_f32_to_f16(float f);
float ref_f16_to_f32(uint16_t h);
uint16_t ref_f32_to_bf16(float f);
float ref_bf16_to_f32(uint16_t h);

/* ---- pool and creation -------------------------------------------------------------------------------- */
ref_arr *ref_new(tg_dtype dt, int ndim, const int64_t *shape);  /* zeros */
void ref_free_all(void);
ref_arr *ref_full(tg_dtype dt, int ndim, const int64_t *shape, double v);
ref_arr *ref_scalar(tg_dtype dt, double v);
ref_arr *ref_from(tg_dtype dt, int ndim, const int64_t *shape, const double *vals);
/* floats uniform in [lo, hi); ints uniform in [lo, hi]; bool 0/1 */
ref_arr *ref_rand(tg_dtype dt, int ndim, const int64_t *shape, double lo, double hi);
ref_arr *ref_arange(tg_dtype dt, double start, double stop, double step);
ref_arr *ref_eye(tg_dtype dt, int64_t n, int64_t m);
ref_arr *ref_copy(const ref_arr *a);
const char *ref_shape_str(char *buf, size_t n, int ndim, const int64_t *shape);

/* ---- movement (all materialize) ----------------------------------------------------------------------- */
ref_arr *ref_reshape(const ref_arr *a, int ndim, const int64_t *shape);  /* one -1 allowed */
ref_arr *ref_permute(const ref_arr *a, const int *order);
ref_arr *ref_expand(const ref_arr *a, int ndim, const int64_t *shape);   /* aligned right, -1 keeps */
ref_arr *ref_pad(const ref_arr *a, const int64_t *pads, double value);  /* a->ndim pairs */
ref_arr *ref_shrink(const ref_arr *a, const int64_t *bounds);           /* a->ndim pairs */
ref_arr *ref_flip(const ref_arr *a, int naxes, const int *axes);
ref_arr *ref_transpose(const ref_arr *a, int d0, int d1);
ref_arr *ref_flatten(const ref_arr *a, int start, int end);
ref_arr *ref_squeeze(const ref_arr *a, int axis);  /* TG_ALL: every size-1 axis */
ref_arr *ref_unsqueeze(const ref_arr *a, int axis);
ref_arr *ref_slice(const ref_arr *a, int n, const tg_slice *s);
ref_arr *ref_cat(int n, ref_arr *const *as, int axis);
ref_arr *ref_stack(int n, ref_arr *const *as, int axis);
ref_arr *ref_repeat(const ref_arr *a, int ndim, const int64_t *repeats);
/* the general strided view: out[i] = a->data[offset + sum_k idx_k * strides[k]] */
ref_arr *ref_view(const ref_arr *a, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset);

/* ---- elementwise -------------------------------------------------------------------------------------- */
typedef enum ref_op {
  /* unary */
  R_NEG, R_EXP, R_EXP2, R_LOG, R_LOG2, R_SQRT, R_RSQRT, R_SIN, R_COS, R_TAN, R_RECIP, R_ABS, R_SIGN,
  R_SQUARE, R_TRUNC, R_FLOOR, R_CEIL, R_RELU, R_SIGMOID, R_TANH, R_GELU, R_SILU, R_SOFTPLUS, R_LEAKY_RELU,
  R_ELU, R_RELU6, R_HARDSWISH, R_HARDSIGMOID, R_MISH, R_LOGICAL_NOT, R_CLAMP,
  /* binary */
  R_ADD, R_SUB, R_MUL, R_DIV, R_IDIV, R_MOD, R_POW, R_MAXIMUM, R_MINIMUM, R_LT, R_LE, R_GT, R_GE, R_EQ, R_NE,
  R_AND, R_OR, R_XOR,
  /* reduce */
  R_SUM, R_PROD, R_MAX, R_MIN, R_MEAN,
} ref_op;
const char *ref_op_name(ref_op op);

ref_arr *ref_unary(ref_op op, const ref_arr *a, double p0, double p1);  /* p0/p1: slope, alpha, lo/hi */
bool ref_broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb, int *nout, int64_t *out);
ref_arr *ref_binary(ref_op op, const ref_arr *a, const ref_arr *b);     /* NULL if not broadcastable */
ref_arr *ref_binary_scalar(ref_op op, const ref_arr *a, double v);      /* weak scalar, as tinygrad */
ref_arr *ref_where(const ref_arr *c, const ref_arr *a, const ref_arr *b);
ref_arr *ref_cast(const ref_arr *a, tg_dtype dt);

/* ---- reductions --------------------------------------------------------------------------------------- */
ref_arr *ref_reduce(ref_op op, const ref_arr *a, int naxes, const int *axes, bool keepdim);
ref_arr *ref_var(const ref_arr *a, int naxes, const int *axes, bool keepdim, double correction, bool take_sqrt);
ref_arr *ref_argext(const ref_arr *a, int axis, bool keepdim, bool is_min);  /* axis TG_ALL: flattened */
ref_arr *ref_softmax(const ref_arr *a, int axis, bool take_log);
ref_arr *ref_logsumexp(const ref_arr *a, int axis, bool keepdim);
ref_arr *ref_matmul(const ref_arr *a, const ref_arr *b);  /* NULL if shapes do not fit */

/* ---- bridging to tg ----------------------------------------------------------------------------------- */
tg_tensor *ref_to_tg(const ref_arr *a);     /* tg_from_data of a's values in a's dtype */
ref_arr *ref_from_tg(tg_tensor *t);         /* realizes t and reads it back; NULL on error */
/* compares t with want: shape, dtype (when check_dtype), then values: floats with atol/rtol, others exactly */
bool ref_check_tol(const char *what, tg_tensor *t, const ref_arr *want, bool check_dtype, double atol,
                   double rtol, const char *file, int line);
#define CHECK_REF(what, t, want) ref_check_tol(what, t, want, true, 1e-6, 1e-3, __FILE__, __LINE__)
#define CHECK_REF_VALUES(what, t, want) ref_check_tol(what, t, want, false, 1e-6, 1e-3, __FILE__, __LINE__)

/* a test whose body runs in a tensor scope with the reference generator seeded by its line, and frees the
 * reference arrays it made (needs test.h) */
#define REF_TEST(name)            \
  static void name##_body(void);  \
  TEST(name) {                    \
    ref_seed((uint64_t)__LINE__); \
    tg_scope_begin();             \
    name##_body();                \
    tg_scope_end();               \
    ref_free_all();               \
  }                               \
  static void name##_body(void)

#endif
