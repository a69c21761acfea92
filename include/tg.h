/* tg.h — the public API of tgc, a lazy tensor library with tinygrad's architecture, in C.
 *
 * Every call that builds a tensor records nodes in a lazy graph and returns at once; nothing runs until
 * tg_realize() (or a call that reads data) is made. Names and semantics follow tinygrad's Tensor methods
 * with a tg_ prefix: numpy broadcasting, tinygrad's dtype promotion, reductions that keep or drop axes.
 *
 * Errors are values: a call that builds a tensor returns NULL on error and records a message readable with
 * tg_error(); any call given a NULL tensor returns NULL, so a chain of calls is checked once, at the end.
 * Calls that do work return a status (TG_OK == 0, negative on error). The library never aborts, exits or
 * prints, except for DEBUG output on stderr when the DEBUG environment variable asks for it.
 *
 * Ownership: a tensor is a reference-counted handle. A new tensor belongs to the innermost open scope
 * (tg_scope_begin/tg_scope_end), which frees it when it ends unless tg_keep() moved it out; outside any
 * scope the caller owns it and releases it with tg_free().
 */
#ifndef TG_H
#define TG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TG_MAX_DIMS 16

typedef enum tg_dtype {
  TG_BOOL,
  TG_INT8, TG_INT16, TG_INT32, TG_INT64,
  TG_UINT8, TG_UINT16, TG_UINT32, TG_UINT64,
  TG_FLOAT16, TG_BFLOAT16, TG_FLOAT32, TG_FLOAT64,
  TG_DTYPE_COUNT
} tg_dtype;

typedef enum tg_status {
  TG_OK = 0,
  TG_ERR_ARG = -1,      /* a bad argument: shape, dtype, axis, NULL */
  TG_ERR_NOMEM = -2,    /* an allocation failed */
  TG_ERR_DEVICE = -3,   /* compiling, loading or running a kernel failed */
  TG_ERR_IO = -4,       /* a file could not be read or written */
  TG_ERR_INTERNAL = -5, /* a broken invariant inside the library (a bug: please report it) */
} tg_status;

typedef struct tg_tensor tg_tensor;

/* ---- errors ---------------------------------------------------------------------------------------- */
const char *tg_error(void);         /* the message of the last error on this thread ("" if none) */
tg_status tg_error_status(void);    /* its status code */
void tg_error_clear(void);
const char *tg_dtype_name(tg_dtype dt);  /* "float32", ...; "?" for a bad value */
size_t tg_dtype_size(tg_dtype dt);       /* bytes per element; 0 for a bad value */

/* ---- ownership ------------------------------------------------------------------------------------- */
void tg_free(tg_tensor *t);              /* drop the caller's reference (NULL is fine) */
tg_tensor *tg_retain(tg_tensor *t);      /* one more reference, to be released with tg_free */
void tg_scope_begin(void);
void tg_scope_end(void);                 /* frees every tensor made in the scope and not kept */
tg_tensor *tg_keep(tg_tensor *t);        /* move t out of the innermost scope to the one around it */

/* ---- properties ------------------------------------------------------------------------------------ */
int tg_ndim(const tg_tensor *t);
int64_t tg_shape(const tg_tensor *t, int axis);  /* negative axes count from the end; -1 on error */
const int64_t *tg_shape_ptr(const tg_tensor *t); /* tg_ndim(t) sizes */
int64_t tg_numel(const tg_tensor *t);
tg_dtype tg_dtype_of(const tg_tensor *t);

/* ---- creation -------------------------------------------------------------------------------------- */
tg_tensor *tg_empty(tg_dtype dt, int ndim, const int64_t *shape);
tg_tensor *tg_zeros(tg_dtype dt, int ndim, const int64_t *shape);
tg_tensor *tg_ones(tg_dtype dt, int ndim, const int64_t *shape);
tg_tensor *tg_full(tg_dtype dt, int ndim, const int64_t *shape, double value);
tg_tensor *tg_scalar(tg_dtype dt, double value);                  /* a 0-d tensor */
tg_tensor *tg_arange(tg_dtype dt, double start, double stop, double step);
tg_tensor *tg_eye(tg_dtype dt, int64_t n, int64_t m);
tg_tensor *tg_full_like(const tg_tensor *t, double value);
tg_tensor *tg_zeros_like(const tg_tensor *t);
tg_tensor *tg_ones_like(const tg_tensor *t);
/* copies nbytes == numel * dtype size from data */
tg_tensor *tg_from_data(tg_dtype dt, int ndim, const int64_t *shape, const void *data, size_t nbytes);
/* wraps data without a copy: it must stay valid (and 64-byte aligned for speed) while the tensor lives */
tg_tensor *tg_from_blob(tg_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes);

/* ---- movement (views: never a copy) ---------------------------------------------------------------- */
tg_tensor *tg_reshape(tg_tensor *t, int ndim, const int64_t *shape);  /* one size may be -1 */
tg_tensor *tg_permute(tg_tensor *t, int ndim, const int *order);
tg_tensor *tg_expand(tg_tensor *t, int ndim, const int64_t *shape);   /* -1 keeps a size */
/* pads[2*i], pads[2*i+1]: before and after axis i, both >= 0 */
tg_tensor *tg_pad(tg_tensor *t, int ndim, const int64_t *pads, double value);
/* bounds[2*i] <= bounds[2*i+1]: the kept half-open range of axis i */
tg_tensor *tg_shrink(tg_tensor *t, int ndim, const int64_t *bounds);
tg_tensor *tg_flip(tg_tensor *t, int naxes, const int *axes);
tg_tensor *tg_transpose(tg_tensor *t, int dim0, int dim1);
tg_tensor *tg_flatten(tg_tensor *t, int start_dim, int end_dim);
tg_tensor *tg_squeeze(tg_tensor *t, int axis);       /* axis TG_ALL: every size-1 axis */
tg_tensor *tg_unsqueeze(tg_tensor *t, int axis);
/* basic slicing, one entry per leading axis, python semantics (negative and clamped bounds, step != 0) */
typedef struct tg_slice { int64_t start, stop, step; bool all; } tg_slice;
#define TG_ALL 0x7fffffff
#define TG_END INT64_MAX
tg_tensor *tg_slice_axes(tg_tensor *t, int n, const tg_slice *slices);
tg_tensor *tg_cat(int n, tg_tensor *const *ts, int axis);
tg_tensor *tg_stack(int n, tg_tensor *const *ts, int axis);
/* splits t along axis into pieces of the given sizes; fills out[0..n) and returns TG_OK */
tg_status tg_split(tg_tensor *t, int n, const int64_t *sizes, int axis, tg_tensor **out);
tg_tensor *tg_repeat(tg_tensor *t, int ndim, const int64_t *repeats);
tg_tensor *tg_contiguous(tg_tensor *t);   /* forces a materialized buffer */

/* ---- elementwise ------------------------------------------------------------------------------------ */
tg_tensor *tg_neg(tg_tensor *t);
tg_tensor *tg_exp(tg_tensor *t);
tg_tensor *tg_exp2(tg_tensor *t);
tg_tensor *tg_log(tg_tensor *t);
tg_tensor *tg_log2(tg_tensor *t);
tg_tensor *tg_sqrt(tg_tensor *t);
tg_tensor *tg_rsqrt(tg_tensor *t);
tg_tensor *tg_sin(tg_tensor *t);
tg_tensor *tg_cos(tg_tensor *t);
tg_tensor *tg_tan(tg_tensor *t);
tg_tensor *tg_reciprocal(tg_tensor *t);
tg_tensor *tg_abs(tg_tensor *t);
tg_tensor *tg_sign(tg_tensor *t);
tg_tensor *tg_square(tg_tensor *t);
tg_tensor *tg_trunc(tg_tensor *t);
tg_tensor *tg_floor(tg_tensor *t);
tg_tensor *tg_ceil(tg_tensor *t);
tg_tensor *tg_relu(tg_tensor *t);
tg_tensor *tg_sigmoid(tg_tensor *t);
tg_tensor *tg_tanh(tg_tensor *t);
tg_tensor *tg_gelu(tg_tensor *t);        /* tanh approximation, as tinygrad */
tg_tensor *tg_silu(tg_tensor *t);
tg_tensor *tg_softplus(tg_tensor *t);
tg_tensor *tg_leaky_relu(tg_tensor *t, double neg_slope);
tg_tensor *tg_elu(tg_tensor *t, double alpha);
tg_tensor *tg_relu6(tg_tensor *t);
tg_tensor *tg_hardswish(tg_tensor *t);
tg_tensor *tg_hardsigmoid(tg_tensor *t);
tg_tensor *tg_mish(tg_tensor *t);
tg_tensor *tg_logical_not(tg_tensor *t);
tg_tensor *tg_clamp(tg_tensor *t, double lo, double hi);

tg_tensor *tg_add(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b);   /* true division: integers promote to float */
tg_tensor *tg_idiv(tg_tensor *a, tg_tensor *b);  /* integer division rounding toward zero */
tg_tensor *tg_mod(tg_tensor *a, tg_tensor *b);   /* python modulo: result has the sign of b */
tg_tensor *tg_pow(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_maximum(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_minimum(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_lt(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_le(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_gt(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_ge(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_eq(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_ne(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_bitwise_and(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_bitwise_or(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_bitwise_xor(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b);
tg_tensor *tg_cast(tg_tensor *t, tg_dtype dt);
tg_tensor *tg_bitcast(tg_tensor *t, tg_dtype dt);  /* same element size only */
/* scalar right-hand sides; the scalar is weak as in tinygrad: an int tensor stays int for an integral
 * value, a float value makes an int tensor float32 */
tg_tensor *tg_add_scalar(tg_tensor *a, double v);
tg_tensor *tg_sub_scalar(tg_tensor *a, double v);
tg_tensor *tg_mul_scalar(tg_tensor *a, double v);
tg_tensor *tg_div_scalar(tg_tensor *a, double v);
tg_tensor *tg_pow_scalar(tg_tensor *a, double v);
tg_tensor *tg_maximum_scalar(tg_tensor *a, double v);
tg_tensor *tg_minimum_scalar(tg_tensor *a, double v);

/* ---- reductions: axes NULL/naxes 0 reduces everything; negative axes count from the end -------------- */
tg_tensor *tg_sum(tg_tensor *t, int naxes, const int *axes, bool keepdim);
tg_tensor *tg_prod(tg_tensor *t, int naxes, const int *axes, bool keepdim);
tg_tensor *tg_max(tg_tensor *t, int naxes, const int *axes, bool keepdim);
tg_tensor *tg_min(tg_tensor *t, int naxes, const int *axes, bool keepdim);
tg_tensor *tg_mean(tg_tensor *t, int naxes, const int *axes, bool keepdim);
tg_tensor *tg_var(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction);
tg_tensor *tg_std(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction);
tg_tensor *tg_argmax(tg_tensor *t, int axis, bool keepdim);  /* axis TG_ALL: of the flattened tensor */
tg_tensor *tg_argmin(tg_tensor *t, int axis, bool keepdim);
tg_tensor *tg_softmax(tg_tensor *t, int axis);
tg_tensor *tg_log_softmax(tg_tensor *t, int axis);
tg_tensor *tg_logsumexp(tg_tensor *t, int axis, bool keepdim);
tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b);  /* numpy matmul semantics, 1-d and batched */
tg_tensor *tg_dot(tg_tensor *a, tg_tensor *b);

/* ---- running and reading ---------------------------------------------------------------------------- */
tg_status tg_realize(tg_tensor *t);
tg_status tg_realize_many(int n, tg_tensor *const *ts);   /* one schedule for all: shared work runs once */
/* copies the tensor, realized and made contiguous, into dst (nbytes == numel * dtype size) */
tg_status tg_to_host(tg_tensor *t, void *dst, size_t nbytes);
double tg_item(tg_tensor *t);   /* the one element of a numel-1 tensor as a double; NaN on error */

/* ---- engine statistics, for tests and tools --------------------------------------------------------- */
typedef struct tg_stats {
  uint64_t kernels_run;       /* kernels launched */
  uint64_t kernels_compiled;  /* C compiler invocations */
  uint64_t disk_cache_hits;   /* kernels loaded from the on-disk cache */
  uint64_t schedules;         /* tg_realize calls that scheduled work */
  uint64_t buffers_allocated;
  uint64_t uops_live;         /* interned IR nodes alive now */
} tg_stats;
tg_stats tg_get_stats(void);
uint64_t tg_kernel_count_last(void);  /* kernels the last realize ran */
int tg_num_threads(void);            /* threads of the CPU pool */
/* frees caches and unreferenced IR now (it also happens on its own); returns TG_OK */
tg_status tg_collect(void);

#ifdef __cplusplus
}
#endif
#endif
