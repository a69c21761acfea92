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
 *
 * Threads: several threads may use the library at once, each with its own tensors. A tensor, and every
 * object the library returns (a tg_jit, a tg_variable, an optimizer, a parameter list, a layer, a dataset, a
 * model, a tokenizer), is used by one thread at a time: to hand one to another thread, synchronize as for any
 * shared data (as in PyTorch), and take a tensor out of every scope first (scopes are per thread). What the
 * library shares behind them (interned graph nodes, caches, the buffer allocator, the CPU thread pool) is
 * locked; realizing, reading to the host, tg_backward and tg_jit_call hold one lock from start to end, so
 * threads gain safety, not speed, and a JIT step must not wait for another thread that uses the library.
 * Per thread: scopes, tg_error(), tg_kernel_count_last(); tg_backward never gives a gradient to another
 * thread's tensor made alike. For the whole process: tg_manual_seed and the random counter (threads drawing
 * at once get distinct numbers, in an order set by timing), tg_set_training, tg_collect, and the environment
 * variables.
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

/* ---- autograd ---------------------------------------------------------------------------------------- */
/* Gradients are more lazy graph: tg_backward builds them (one rule per primitive op) and runs nothing, so
 * the forward and backward of a step schedule and fuse together. */
tg_tensor *tg_set_requires_grad(tg_tensor *t, bool on);  /* returns t */
bool tg_requires_grad(const tg_tensor *t);
/* adds d(loss)/d(t) to the gradient of every tensor t that requires one and that loss depends on;
 * loss must have one element */
tg_status tg_backward(tg_tensor *loss);
tg_tensor *tg_grad(const tg_tensor *t);   /* t's gradient (owned by t: do not free), NULL if none */
void tg_zero_grad(tg_tensor *t);          /* drops t's gradient */
/* functional form: grads[i] = d(loss)/d(targets[i]) (new tensors, zeros where loss does not depend on it) */
tg_status tg_gradient(tg_tensor *loss, int n, tg_tensor *const *targets, tg_tensor **grads);
tg_tensor *tg_detach(tg_tensor *t);       /* the same value, with no gradient flowing back */
/* dst takes the value of src (same shape and dtype): parameters and optimizer state update in place,
 * lazily; the new value is computed at the next realize. A lazy tensor built from dst's old value and
 * realized after that in-place write is refused (TG_ERR_ARG): its input is gone; realize it first or with dst */
tg_status tg_assign(tg_tensor *dst, tg_tensor *src);

/* ---- random numbers: a counter-based generator that runs inside kernels ------------------------------ */
void tg_manual_seed(uint64_t seed);
tg_tensor *tg_rand(tg_dtype dt, int ndim, const int64_t *shape);            /* uniform [0, 1) */
tg_tensor *tg_randn(tg_dtype dt, int ndim, const int64_t *shape);           /* standard normal */
tg_tensor *tg_randint(int64_t low, int64_t high, int ndim, const int64_t *shape);  /* int32 in [low, high) */
tg_tensor *tg_uniform(tg_dtype dt, int ndim, const int64_t *shape, double low, double high);
tg_tensor *tg_normal(tg_dtype dt, int ndim, const int64_t *shape, double mean, double std);
/* fan_in = shape[1] * prod(shape[2:]), as tinygrad/PyTorch */
tg_tensor *tg_kaiming_uniform(tg_dtype dt, int ndim, const int64_t *shape, double a);
tg_tensor *tg_kaiming_normal(tg_dtype dt, int ndim, const int64_t *shape, double a);
tg_tensor *tg_glorot_uniform(tg_dtype dt, int ndim, const int64_t *shape);

/* ---- neural network ops (compositions of the primitives, so they fuse) ------------------------------ */
#define TG_CONV_DIMS 3
/* per spatial dimension; a value given only in [0] applies to every dimension; 0 means the default */
typedef struct tg_conv_opts {
  int64_t groups;                          /* default 1 */
  int64_t stride[TG_CONV_DIMS];            /* default 1 */
  int64_t dilation[TG_CONV_DIMS];          /* default 1 */
  int64_t padding[TG_CONV_DIMS];           /* symmetric zero padding, default 0 */
  int64_t output_padding[TG_CONV_DIMS];    /* conv_transpose2d only */
} tg_conv_opts;
/* x (N, Cin, *spatial), w (Cout, Cin/groups, *kernel), bias (Cout) or NULL; 1 to 3 spatial dims */
tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *w, tg_tensor *bias, tg_conv_opts o);
/* w (Cin, Cout/groups, *kernel) as PyTorch */
tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *w, tg_tensor *bias, tg_conv_opts o);
typedef struct tg_pool_opts {
  int64_t kernel[TG_CONV_DIMS];            /* required */
  int64_t stride[TG_CONV_DIMS];            /* default: the kernel size */
  int64_t dilation[TG_CONV_DIMS];          /* default 1 */
  int64_t padding[TG_CONV_DIMS];           /* default 0 */
  bool ceil_mode;
  bool count_exclude_pad;                  /* avg_pool: PyTorch's count_include_pad=False */
  int ndims;                               /* spatial dims, default 2 */
} tg_pool_opts;
tg_tensor *tg_max_pool2d(tg_tensor *x, tg_pool_opts o);
tg_tensor *tg_avg_pool2d(tg_tensor *x, tg_pool_opts o);
/* normalizes over the last naxes axes */
tg_tensor *tg_layernorm(tg_tensor *x, int naxes, double eps);
tg_tensor *tg_rmsnorm(tg_tensor *x, int naxes, double eps);
/* x (N, C, ...): (x - mean) * invstd * weight + bias, per channel; weight/bias may be NULL */
tg_tensor *tg_batchnorm(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_tensor *mean, tg_tensor *invstd);
tg_tensor *tg_group_norm(tg_tensor *x, int64_t groups, tg_tensor *weight, tg_tensor *bias, double eps);
tg_tensor *tg_dropout(tg_tensor *x, double p);     /* identity unless tg_training(true) */
void tg_set_training(bool on);
bool tg_training(void);
tg_tensor *tg_one_hot(tg_tensor *labels, int64_t num_classes);  /* int labels -> int32 (..., num_classes) */
tg_tensor *tg_gather(tg_tensor *x, int axis, tg_tensor *index);
/* x[index] along axis with an integer index tensor of any shape: the result replaces that axis by index's shape */
tg_tensor *tg_index_select(tg_tensor *x, int axis, tg_tensor *index);
tg_tensor *tg_embedding(tg_tensor *weight, tg_tensor *index);   /* weight (V, D), index int (...) -> (..., D) */
tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *mask, bool is_causal);
typedef struct tg_loss_opts { double label_smoothing; int64_t ignore_index; bool use_ignore_index; } tg_loss_opts;
/* logits (N, C) or (N, C, ...), labels int (N) or (N, ...): mean cross entropy */
tg_tensor *tg_sparse_categorical_crossentropy(tg_tensor *logits, tg_tensor *labels, tg_loss_opts o);
tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target_probs, double label_smoothing);
tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *labels, tg_loss_opts o);
tg_tensor *tg_binary_crossentropy(tg_tensor *probs, tg_tensor *targets);
tg_tensor *tg_binary_crossentropy_logits(tg_tensor *logits, tg_tensor *targets);
tg_tensor *tg_cumsum(tg_tensor *x, int axis);
tg_tensor *tg_triu(tg_tensor *x, int64_t diagonal);
tg_tensor *tg_tril(tg_tensor *x, int64_t diagonal);
typedef enum tg_interp_mode { TG_INTERP_NEAREST, TG_INTERP_LINEAR } tg_interp_mode;
/* resizes the trailing spatial axes (ndim sizes) as PyTorch's interpolate (align_corners false) */
tg_tensor *tg_interpolate(tg_tensor *x, int ndim, const int64_t *size, tg_interp_mode mode);

/* ---- nn: named parameters ---------------------------------------------------------------------------- */
/* A list of (name, tensor) pairs: what a model exposes to optimizers and to state files. It holds a
 * reference to each tensor. */
typedef struct tg_params tg_params;
tg_params *tg_params_new(void);
void tg_params_free(tg_params *p);
tg_status tg_params_add(tg_params *p, const char *name, tg_tensor *t);
int tg_params_count(const tg_params *p);
const char *tg_params_name(const tg_params *p, int i);
tg_tensor *tg_params_tensor(const tg_params *p, int i);
tg_tensor *tg_params_find(const tg_params *p, const char *name);  /* NULL if absent */

/* ---- nn: layers (weights initialized as tinygrad's nn does; tg_manual_seed makes them reproducible) --- */
typedef struct tg_linear { tg_tensor *weight, *bias; } tg_linear;            /* weight (out, in) */
tg_status tg_linear_init(tg_linear *l, int64_t in, int64_t out, bool bias);
tg_tensor *tg_linear_forward(const tg_linear *l, tg_tensor *x);
tg_status tg_linear_params(const tg_linear *l, const char *prefix, tg_params *p);
void tg_linear_free(tg_linear *l);

typedef struct tg_conv2d_layer { tg_tensor *weight, *bias; tg_conv_opts opts; } tg_conv2d_layer;
tg_status tg_conv2d_layer_init(tg_conv2d_layer *l, int64_t cin, int64_t cout, int64_t kernel, bool bias, tg_conv_opts o);
tg_tensor *tg_conv2d_layer_forward(const tg_conv2d_layer *l, tg_tensor *x);
tg_status tg_conv2d_layer_params(const tg_conv2d_layer *l, const char *prefix, tg_params *p);
void tg_conv2d_layer_free(tg_conv2d_layer *l);

typedef struct tg_conv_transpose2d_layer { tg_tensor *weight, *bias; tg_conv_opts opts; } tg_conv_transpose2d_layer;
tg_status tg_conv_transpose2d_layer_init(tg_conv_transpose2d_layer *l, int64_t cin, int64_t cout, int64_t kernel,
                                         bool bias, tg_conv_opts o);
tg_tensor *tg_conv_transpose2d_layer_forward(const tg_conv_transpose2d_layer *l, tg_tensor *x);
tg_status tg_conv_transpose2d_layer_params(const tg_conv_transpose2d_layer *l, const char *prefix, tg_params *p);
void tg_conv_transpose2d_layer_free(tg_conv_transpose2d_layer *l);

/* batch statistics while tg_training(), running statistics otherwise (updated in training, momentum 0.1) */
typedef struct tg_batchnorm2d {
  tg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
  double eps, momentum;
} tg_batchnorm2d;
tg_status tg_batchnorm2d_init(tg_batchnorm2d *l, int64_t channels);
tg_tensor *tg_batchnorm2d_forward(tg_batchnorm2d *l, tg_tensor *x);
tg_status tg_batchnorm2d_params(const tg_batchnorm2d *l, const char *prefix, tg_params *p);  /* incl. running stats */
void tg_batchnorm2d_free(tg_batchnorm2d *l);

typedef struct tg_layernorm_layer { tg_tensor *weight, *bias; int naxes; double eps; } tg_layernorm_layer;
tg_status tg_layernorm_layer_init(tg_layernorm_layer *l, int64_t dim, double eps);   /* over the last axis */
tg_tensor *tg_layernorm_layer_forward(const tg_layernorm_layer *l, tg_tensor *x);
tg_status tg_layernorm_layer_params(const tg_layernorm_layer *l, const char *prefix, tg_params *p);
void tg_layernorm_layer_free(tg_layernorm_layer *l);

typedef struct tg_rmsnorm_layer { tg_tensor *weight; double eps; } tg_rmsnorm_layer;
tg_status tg_rmsnorm_layer_init(tg_rmsnorm_layer *l, int64_t dim, double eps);
tg_tensor *tg_rmsnorm_layer_forward(const tg_rmsnorm_layer *l, tg_tensor *x);
tg_status tg_rmsnorm_layer_params(const tg_rmsnorm_layer *l, const char *prefix, tg_params *p);
void tg_rmsnorm_layer_free(tg_rmsnorm_layer *l);

typedef struct tg_groupnorm_layer { tg_tensor *weight, *bias; int64_t groups; double eps; } tg_groupnorm_layer;
tg_status tg_groupnorm_layer_init(tg_groupnorm_layer *l, int64_t groups, int64_t channels, double eps);
tg_tensor *tg_groupnorm_layer_forward(const tg_groupnorm_layer *l, tg_tensor *x);
tg_status tg_groupnorm_layer_params(const tg_groupnorm_layer *l, const char *prefix, tg_params *p);
void tg_groupnorm_layer_free(tg_groupnorm_layer *l);

typedef struct tg_embedding_layer { tg_tensor *weight; } tg_embedding_layer;
tg_status tg_embedding_layer_init(tg_embedding_layer *l, int64_t vocab, int64_t dim);
tg_tensor *tg_embedding_layer_forward(const tg_embedding_layer *l, tg_tensor *idx);
tg_status tg_embedding_layer_params(const tg_embedding_layer *l, const char *prefix, tg_params *p);
void tg_embedding_layer_free(tg_embedding_layer *l);

/* ---- nn: optimizers ------------------------------------------------------------------------------------ */
/* step() builds the update of every parameter (and its state) as lazy graph, assigns it, and realizes all
 * of it in one schedule together with `extra` tensors (the loss, say), then drops the gradients. */
typedef struct tg_optim tg_optim;
typedef struct tg_sgd_opts { double lr, momentum, weight_decay; bool nesterov; } tg_sgd_opts;
typedef struct tg_adam_opts { double lr, b1, b2, eps, weight_decay; } tg_adam_opts;  /* 0: 1e-3, .9, .999, 1e-8 */
tg_optim *tg_sgd_new(const tg_params *p, tg_sgd_opts o);
tg_optim *tg_adam_new(const tg_params *p, tg_adam_opts o);   /* weight_decay: L2 added to the gradient */
tg_optim *tg_adamw_new(const tg_params *p, tg_adam_opts o);  /* decoupled weight decay, default 0.01 */
tg_status tg_optim_step(tg_optim *o, int nextra, tg_tensor *const *extra);
void tg_optim_zero_grad(tg_optim *o);
void tg_optim_set_lr(tg_optim *o, double lr);
double tg_optim_lr(const tg_optim *o);
void tg_optim_free(tg_optim *o);
/* learning-rate schedules: the rate for step `step` (0-based) */
double tg_lr_step(double base, int64_t step, int64_t step_size, double gamma);
double tg_lr_cosine(double base, int64_t step, int64_t total, double min_lr);
double tg_lr_onecycle(double max_lr, int64_t step, int64_t total, double pct_start, double div_factor,
                      double final_div_factor);

/* ---- nn: state (safetensors) ----------------------------------------------------------------------- */
tg_status tg_safetensors_save(const char *path, const tg_params *p);
/* loads a file into p's tensors by name (the file is mapped, not read into a second copy). Every name of p
 * must be in the file with the same shape and dtype, and the file must hold no other names, unless
 * allow_partial: then missing and unexpected names are allowed. A malformed or truncated file is refused. */
tg_status tg_safetensors_load(const char *path, tg_params *p, bool allow_partial);
/* every tensor of a file, as new params (names in file order) */
tg_params *tg_safetensors_read(const char *path);

/* ---- nn: datasets ---------------------------------------------------------------------------------- */
typedef struct tg_dataset {
  tg_tensor *x;      /* uint8 (N, 1, H, W) images, or float32 (N, F) features */
  tg_tensor *y;      /* int32 (N) labels */
  int64_t n;
} tg_dataset;
/* MNIST (fashion: Fashion-MNIST) from dir, else $TG_DATA, else ~/.cache/tgc/mnist (or fashion-mnist),
 * else /usr/share/datasets/fashion-mnist; the IDX files may be gzipped. On failure the error lists where it
 * looked and how to get the files. */
tg_status tg_mnist_load(const char *dir, bool fashion, tg_dataset *train, tg_dataset *test);
/* scikit-learn's 8x8 digits CSV (64 pixels 0..16 then the label), gzipped or not: x float32 (N, 64) */
tg_status tg_digits_load(const char *path, tg_dataset *all);
/* batch i of a shuffled epoch: the rows perm[i*batch, ...) of x and y as new tensors (copied rows) */
tg_status tg_dataset_batch(const tg_dataset *d, const int64_t *perm, int64_t start, int64_t count, tg_tensor **x,
                           tg_tensor **y);
/* a seeded permutation of 0..n-1 into perm (Fisher-Yates on a fixed generator: the same on every machine) */
void tg_shuffle(int64_t *perm, int64_t n, uint64_t seed);
void tg_dataset_free(tg_dataset *d);

/* the file sub/name of a dataset or model: in dir when given, else $TG_DATA/sub, the user cache
 * ($XDG_CACHE_HOME/tgc/sub or ~/.cache/tgc/sub), then ../shared/data/sub; its path into out, or TG_ERR_IO with
 * an error that lists where it looked */
tg_status tg_data_find(const char *dir, const char *sub, const char *name, char *out, size_t cap);

/* ---- nn: Llama from a llama2.c checkpoint, decoded one token per step ------------------------------- */
/* The checkpoint is llama2.c's legacy format (a 7 int32 header, then float32 weights in its order), checked
 * against its size. Each step is one tg_jit replay (JIT=0: run eagerly) whose position is a tg_variable:
 * RoPE, the KV-cache writes and the attention mask read it, so one capture serves every position. */
typedef struct tg_llama_config {
  int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  bool shared_classifier;   /* the classifier is the token embedding */
} tg_llama_config;
typedef struct tg_llama tg_llama;
/* max_seq (0: the model's seq_len) is the length of the KV caches and the number of positions */
tg_llama *tg_llama_load(const char *path, int64_t max_seq);
tg_llama_config tg_llama_config_of(const tg_llama *m);
int64_t tg_llama_max_seq(const tg_llama *m);
/* the logits (vocab_size floats) after token at position pos; positions come in order from 0, each once */
tg_status tg_llama_step(tg_llama *m, int32_t token, int64_t pos, float *logits);
tg_status tg_llama_reset(tg_llama *m);   /* empties the caches: the next position is 0 */
int tg_llama_kernels(const tg_llama *m);  /* kernels of the captured step (0 before the capture) */
void tg_llama_free(tg_llama *m);
/* llama2.c's tokenizer file (int32 max token length, then per token a float32 score, an int32 length, bytes) */
typedef struct tg_tokenizer tg_tokenizer;
tg_tokenizer *tg_tokenizer_load(const char *path, int64_t vocab_size);
/* llama2.c's encode: BOS (1) if bos, a dummy-prefix space, code points (or byte tokens), then merges of the
 * best-scoring pair (a byte token past the vocabulary: <unk>, 0); EOS (2) if eos. Needs cap >= strlen(text) + 3; returns the count, negative on error */
int64_t tg_tokenizer_encode(const tg_tokenizer *t, const char *text, bool bos, bool eos, int32_t *tokens, int64_t cap);
/* the text of token following prev (the space after BOS stripped, <0xNN> as that byte); owned by t */
const char *tg_tokenizer_decode(const tg_tokenizer *t, int32_t prev, int32_t token);
int64_t tg_tokenizer_vocab(const tg_tokenizer *t);
void tg_tokenizer_free(tg_tokenizer *t);

/* ---- JIT: capture a step once, replay its kernels ------------------------------------------------------ */
/* A step reads nin realized input tensors and returns nout new tensors in out (owned by the caller). The
 * first tg_jit_call runs it normally, the second runs it and captures every kernel it launches with its
 * buffers, later calls replay those kernels with the new inputs' buffers: no graph building, scheduling,
 * compiling or allocating. Parameters updated with tg_assign are written in place, so a training step
 * replays. Inputs must keep the captured shapes and dtypes; reading tensor data to the host inside a step
 * being captured is refused (its value would be frozen into the replay). Random numbers drawn inside a
 * captured step take fresh counters on every replay, exactly as the step run eagerly would. The step's
 * intermediate buffers share one arena placed by lifetime (DEBUG=1 prints the bytes before and after). */
typedef struct tg_jit tg_jit;
typedef tg_status (*tg_jit_fn)(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out);
tg_jit *tg_jit_new(tg_jit_fn fn, void *ctx, int nin, int nout);
/* out[i] are new tensors owned by the caller; after a replay they read the JIT's output buffers, which the
 * next call overwrites */
tg_status tg_jit_call(tg_jit *j, tg_tensor *const *in, tg_tensor **out);
int tg_jit_kernels(const tg_jit *j);   /* kernels captured (0 before the capture) */
/* bytes of the captured step's intermediate buffers on their own (before) and in the planned arena (after) */
tg_status tg_jit_memory(const tg_jit *j, size_t *before, size_t *after);
void tg_jit_free(tg_jit *j);

/* ---- symbolic integers: values bound at run time ---------------------------------------------------- */
/* A variable (tinygrad's Variable) is an integer in [min, max] that kernels read when they run: binding a
 * new value changes what the next realize or JIT replay computes and compiles nothing. Use it as a 0-d
 * int32 tensor (masks, positions) or as the offset of a window along one axis (a KV cache's position).
 * Shapes stay static: a window has a fixed length at a variable place. Bind before tg_jit_call, not in the
 * step. A value realized before a bind keeps the value it had; graphs realized after see the new one. */
typedef struct tg_variable tg_variable;
tg_variable *tg_variable_new(const char *name, int64_t min, int64_t max);   /* bound to min */
tg_status tg_variable_bind(tg_variable *v, int64_t value);                   /* refused outside [min, max] */
int64_t tg_variable_value(const tg_variable *v);
const char *tg_variable_name(const tg_variable *v);
void tg_variable_free(tg_variable *v);
tg_tensor *tg_variable_tensor(tg_variable *v);   /* a new 0-d int32 tensor reading the bound value */
/* t[..., start:start+len, ...] along axis (needs 0 <= min and max + len <= the axis' size) */
tg_tensor *tg_shrink_at(tg_tensor *t, int axis, tg_variable *start, int64_t len);
/* zeros of extent size along axis with t placed from start on (needs max + t's extent <= size) */
tg_tensor *tg_pad_at(tg_tensor *t, int axis, tg_variable *start, int64_t size);
/* dst[..., start:start+len, ...] = src along axis (src: dst's shape with len on axis, dst's dtype), in place
 * at the next realize of dst: its kernel runs over src only (a KV cache takes one row per step) */
tg_status tg_assign_at(tg_tensor *dst, int axis, tg_variable *start, tg_tensor *src);

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
