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
 * Contracts: every declaration follows these rules; its own comment says only what it adds or changes.
 *  - tg_tensor *: a new handle, owned as "Ownership" says, or NULL with tg_error() set. Given a NULL tensor
 *    argument it returns NULL and leaves tg_error() alone: it holds the message of the op that made the NULL.
 *  - tg_status: TG_OK, or a negative code with tg_error() set. Given a NULL tensor it returns the code of the
 *    last recorded error and keeps its message (TG_ERR_ARG and a new message when none is recorded).
 *    A success clears nothing: read tg_error() after a failure only.
 *  - Codes: any call may fail with TG_ERR_ARG (a bad shape, dtype, axis or value) or TG_ERR_NOMEM; calls that
 *    run kernels (their comments say so) also with TG_ERR_DEVICE (a kernel did not compile or load) or TG_ERR_IO
 *    (no directory to compile into: README), calls that read or write files with TG_ERR_IO.
 *  - Shapes are (ndim, sizes) with 0 <= ndim <= TG_MAX_DIMS. Arrays and strings passed in are read during the
 *    call only (tg_from_blob's data excepted).
 *  - Axes count from the end when negative. An op over one axis takes `int axis`, TG_ALL where tinygrad takes
 *    None (tg_squeeze, tg_argmax, tg_argmin); an op over several takes (naxes, axes), naxes 0 meaning every
 *    axis (except tg_flip: naxes 0 flips none).
 *  - Dtypes: tinygrad's promotion; float math (exp, div, mean, softmax, ...) on integer or bool gives float32.
 *  - Borrowed pointers, never freed by the caller, valid while their owner keeps them:
 *      tg_error()                    this thread's, until its next error or tg_error_clear()
 *      tg_dtype_name()               static
 *      tg_shape_ptr(t)               t's sizes, until t is freed or assigned or anything is realized: copy them
 *      tg_grad(t)                    t's, until tg_free(t), tg_zero_grad(t), tg_backward, tg_optim_step/_zero_grad
 *      tg_params_name/_tensor/_find  the list's, until tg_params_free (tg_retain a tensor to keep it longer)
 *      tg_variable_name(v)           v's, until tg_variable_free(v)
 *      tg_tokenizer_decode(t, ...)   t's, until tg_tokenizer_free(t)
 *      tg_onnx_io names              the model's, until tg_onnx_free(m)
 *      tensors in a tg_dataset or a tg_nn_* layer struct: the struct's, until its _free
 *    Memory lent to the library: tg_from_blob's data must outlive every tensor made from it. Shared buffers:
 *    after a tg_jit replay, the outputs read the JIT's own buffers, which its next call overwrites.
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

/* Everything declared here is libtg's exported API: the library is built with -fvisibility=hidden, and this
 * header alone gives its declarations default visibility (with a version script and, for libtg.a, hidden
 * names made local), so the library's internal names never meet a program's own. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define TG_MAX_DIMS 16

/* The library's version; the Makefile reads these three numbers (the SONAME is libtg.so.MAJOR). */
#define TG_VERSION_MAJOR 0
#define TG_VERSION_MINOR 1
#define TG_VERSION_PATCH 0
#define TG_VERSION_STR_(x) #x
#define TG_VERSION_XSTR_(x) TG_VERSION_STR_(x)
#define TG_VERSION_STRING                                                       \
  TG_VERSION_XSTR_(TG_VERSION_MAJOR) "." TG_VERSION_XSTR_(TG_VERSION_MINOR) "." \
  TG_VERSION_XSTR_(TG_VERSION_PATCH)
const char *tg_version(void);  /* the library's TG_VERSION_STRING, e.g. "0.1.0" (static storage) */

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
tg_status tg_error_status(void);    /* its status code (TG_OK if none) */
void tg_error_clear(void);          /* forgets it: tg_error() "" and tg_error_status() TG_OK again */
const char *tg_dtype_name(tg_dtype dt);  /* "float32", ...; "?" for a bad value */
size_t tg_dtype_size(tg_dtype dt);       /* bytes per element; 0 for a bad value */

/* ---- ownership ------------------------------------------------------------------------------------- */
void tg_free(tg_tensor *t);              /* drop the caller's reference, or the scope's if t is in one (NULL is fine) */
tg_tensor *tg_retain(tg_tensor *t);      /* one more reference, to be released with tg_free; returns t */
void tg_scope_begin(void);               /* opens a scope: tensors made until its tg_scope_end belong to it */
void tg_scope_end(void);                 /* frees every tensor made in the scope and not kept */
tg_tensor *tg_keep(tg_tensor *t);        /* move t out of the innermost scope to the one around it; returns t */

/* ---- properties ------------------------------------------------------------------------------------ */
int tg_ndim(const tg_tensor *t);                 /* the number of axes, 0 for a scalar; -1 for NULL */
int64_t tg_shape(const tg_tensor *t, int axis);  /* negative axes count from the end; -1 on error */
const int64_t *tg_shape_ptr(const tg_tensor *t); /* tg_ndim(t) sizes, borrowed (see Contracts); NULL for NULL */
int64_t tg_numel(const tg_tensor *t);            /* the product of the sizes (1 for a scalar); -1 for NULL */
tg_dtype tg_dtype_of(const tg_tensor *t);        /* the element type; TG_DTYPE_COUNT for NULL */

/* ---- creation -------------------------------------------------------------------------------------- */
tg_tensor *tg_empty(tg_dtype dt, int ndim, const int64_t *shape);  /* contents undefined until written (tg_assign) */
tg_tensor *tg_zeros(tg_dtype dt, int ndim, const int64_t *shape);  /* a constant: no buffer until realized */
tg_tensor *tg_ones(tg_dtype dt, int ndim, const int64_t *shape);   /* 1 everywhere, as tg_zeros */
tg_tensor *tg_full(tg_dtype dt, int ndim, const int64_t *shape, double value);  /* value converted to dt */
tg_tensor *tg_scalar(tg_dtype dt, double value);                  /* a 0-d tensor */
/* (n) with n = ceil((stop - start) / step) (0 if negative): start + i * step, computed in dt; step != 0 */
tg_tensor *tg_arange(tg_dtype dt, double start, double stop, double step);
tg_tensor *tg_eye(tg_dtype dt, int64_t n, int64_t m);            /* (n, m): ones on the main diagonal */
tg_tensor *tg_full_like(const tg_tensor *t, double value);        /* t's shape and dtype */
tg_tensor *tg_zeros_like(const tg_tensor *t);                      /* t's shape and dtype */
tg_tensor *tg_ones_like(const tg_tensor *t);                       /* t's shape and dtype */
/* copies nbytes == numel * dtype size from data */
tg_tensor *tg_from_data(tg_dtype dt, int ndim, const int64_t *shape, const void *data, size_t nbytes);
/* wraps data without a copy: it must stay valid (aligned to the element size; 64 bytes for speed) while the
 * tensor, or any lazy tensor that reads it, lives. On a GPU device (DEV=CL, CUDA), whose kernels cannot read host
 * memory, the data is copied now instead: later writes to it are not seen */
tg_tensor *tg_from_blob(tg_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes);

/* ---- more creation, random and linear algebra (tinygrad's linspace, randperm, multinomial, rearrange, qr, svd) ---- */
/* (steps) evenly spaced from start to stop inclusive, as tinygrad: start + i * ((stop - start) / (steps - 1))
 * computed in float32 and converted to dt (tinygrad's default dtype is float32; bool refused); steps 0: empty,
 * steps 1: (start) */
tg_tensor *tg_linspace(tg_dtype dt, double start, double stop, int64_t steps);
/* uniform in [-1, 1) times numel^-1/2, as tinygrad's scaled_uniform */
tg_tensor *tg_scaled_uniform(tg_dtype dt, int ndim, const int64_t *shape);
tg_tensor *tg_rand_like(const tg_tensor *t);    /* tg_rand of t's shape and dtype (a float dtype, as tinygrad) */
tg_tensor *tg_randn_like(const tg_tensor *t);   /* tg_randn of t's shape and dtype */
/* int32 (n): a uniform random permutation of 0..n-1, lazily, as tinygrad: the argsort of n uniform draws */
tg_tensor *tg_randperm(int64_t n);
/* int32 indices drawn with probabilities proportional to the weights along the last axis of probs (1-d: (k),
 * -> (num_samples); 2-d (rows, k) -> (rows, num_samples)), as tinygrad: with replacement (or one sample) by the
 * inverse of the cumsum CDF, without by Efraimidis-Spirakis keys log2(u) / w and topk; num_samples > 0 */
tg_tensor *tg_multinomial(tg_tensor *probs, int64_t num_samples, bool replacement);
/* 0-d bool: every element of tg_isclose(a, b, rtol, atol, equal_nan) is true (tinygrad returns a tensor, lazy;
 * tg_item gives PyTorch's bool). tinygrad's defaults: rtol 1e-5, atol 1e-8, equal_nan false */
tg_tensor *tg_allclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan);
/* tinygrad's rearrange (einops): "b c (h p) -> b (c p) h"; names[i] has size sizes[i] (n pairs) for splitting
 * a parenthesized group on the left (one size per group may be inferred) or checking an axis; "1" or "()" is
 * an axis of size 1; one "..." (or "…") stands for the axes not named, not in parentheses on the left. Views
 * only (a reshape, a permute, a reshape) */
tg_tensor *tg_rearrange(tg_tensor *t, const char *formula, int n, const char *const *names, const int64_t *sizes);
/* tinygrad's nonzero(size=, fill_value=): int32 (size, ndim), the first size rows of tg_nonzero, rows past the
 * count filled with fill_value; lazy (no realize, jittable). 0-d t: (size, 0) */
tg_tensor *tg_nonzero_size(tg_tensor *t, int64_t size, double fill_value);
/* tinygrad's masked_select(mask, size=, fill_value=): (size) of x's dtype, the first size selected elements,
 * then fill_value; lazy, gradients flow to x */
tg_tensor *tg_masked_select_size(tg_tensor *x, tg_tensor *mask, int64_t size, double fill_value);
/* tinygrad's qr: Q (*b, m, m) orthogonal and R (*b, m, n) upper triangular with t = Q R, by Householder
 * reflections built from tensor ops (lazy, batched over leading axes, differentiable); float, two or more dims.
 * R's diagonal may be negative (tinygrad's signs; LAPACK/PyTorch may differ by a sign per column/row) */
tg_status tg_qr(tg_tensor *t, tg_tensor **Q, tg_tensor **R);
/* the determinant of each square matrix in the last two axes: (*b, n, n) -> (*b), as torch.linalg.det and ONNX's
 * Det; from Householder QR (stable, lazy, batched, differentiable). Float, two or more dims, square, else NULL
 * with TG_ERR_ARG. A 0 x 0 matrix has determinant 1 */
tg_tensor *tg_det(tg_tensor *t);
/* tinygrad's svd: t = U diag(S) Vh with S (*b, k = min(m, n)) descending; U (*b, m, m) and Vh (*b, n, n), or
 * with full_matrices false U (*b, m, k) and Vh (*b, k, n); QR then 4k rounds of one-sided Jacobi, lazy. Signs
 * of singular vectors may differ from LAPACK's. A NULL output pointer: not wanted */
tg_status tg_svd(tg_tensor *t, bool full_matrices, tg_tensor **U, tg_tensor **S, tg_tensor **Vh);
/* tinygrad's newton_schulz: G = t / (||t||_F + eps) over the last two axes, then steps times
 * G <- sum_i params[i] (G G^T)^i G (on the transpose when t is tall); e.g. params (2, -1.5, 0.5) */
tg_tensor *tg_newton_schulz(tg_tensor *t, int steps, int nparams, const double *params, double eps);

/* ---- devices (tinygrad's names: "CPU", "CL", "CL:1", "CUDA", "CUDA:1"; DEV= picks the default) ---------- */
/* the device t's value lives on (a realized tensor's buffer), or for a lazy tensor the one its kernels will run
 * on: the device of the buffers it reads (a tg_to: its destination), the default when it reads none. A sharded
 * tensor (tg_shard) names its devices, "CPU:0,CPU:1". Static text, NULL with an error when DEV names a device
 * that is not there */
const char *tg_device(tg_tensor *t);
/* t's value on device, lazily: a COPY that the next realize does (t's value computed on its own device, then
 * copied). t already in a buffer of that device: t itself, a new reference. A sharded tensor is gathered. An op
 * reading tensors of two devices fails at realize with an error naming both (tinygrad refuses it too): move one
 * first. Devices: "CPU" (= "CPU:0") .. "CPU:7" (one process's memory and threads: for tests of several devices),
 * "CL", "CL:n", "CUDA", "CUDA:n". TG_ERR_ARG for an unknown name, TG_ERR_DEVICE for a device whose driver is
 * missing (the message says what to install). */
tg_tensor *tg_to(tg_tensor *t, const char *device);
/* t split over ndev devices along axis (-1: replicated, a whole copy on each), as tinygrad's Tensor.shard: the
 * result has t's (global) shape and every op takes it as any tensor; each device computes its part, with the
 * same kernels. A reduction over the split axis all-reduces the devices' partial results (a ring for more than
 * two) into a replicated value; a sharded and a replicated operand meet per part; an operand on one device is
 * refused (shard it too). Movement ops keep the split axis (a reshape keeps it as an outermost factor; pad,
 * shrink and flip only off it). tg_to gathers it, tg_to_host and tg_item read it gathered, tg_assign into it
 * writes each part. TG_ERR_ARG when shape[axis] is not a multiple of ndev (naming shape, axis and ndev), for an
 * already sharded t, a device listed twice. A tg_jit step may shard and copy (its copies replay in order with
 * its kernels); its inputs and outputs are whole tensors. */
tg_tensor *tg_shard(tg_tensor *t, int ndev, const char *const *devices, int axis);

/* ---- movement (views: index arithmetic, never a copy, except tg_contiguous) ------------------------ */
tg_tensor *tg_reshape(tg_tensor *t, int ndim, const int64_t *shape);  /* same numel; one size may be -1 */
tg_tensor *tg_permute(tg_tensor *t, int ndim, const int *order);      /* order: each of t's ndim axes once */
tg_tensor *tg_expand(tg_tensor *t, int ndim, const int64_t *shape);   /* size-1 and new leading axes grow; -1 keeps */
/* tinygrad's flat form (PyTorch's F.pad): npads (even, at most 2 * ndim) values for the last npads / 2 axes,
 * the last axis first: (left, right) of the last axis, then (top, bottom) of the one before, ... Negative
 * values crop. The new elements are value. */
tg_tensor *tg_pad(tg_tensor *t, int npads, const int64_t *pads, double value);
/* tinygrad's per-axis form: pairs[2*i], pairs[2*i+1] before and after axis i, for each of the ndim axes */
tg_tensor *tg_pad_axes(tg_tensor *t, int ndim, const int64_t *pairs, double value);
/* bounds[2*i] <= bounds[2*i+1]: the kept half-open range of axis i */
tg_tensor *tg_shrink(tg_tensor *t, int ndim, const int64_t *bounds);
tg_tensor *tg_flip(tg_tensor *t, int naxes, const int *axes);      /* reverses the given axes (naxes 0: none) */
tg_tensor *tg_transpose(tg_tensor *t, int dim0, int dim1);         /* swaps two axes */
tg_tensor *tg_flatten(tg_tensor *t, int start_dim, int end_dim);   /* axes start..end (inclusive) as one; 0-d: (1) */
tg_tensor *tg_squeeze(tg_tensor *t, int axis);       /* drops axis if its size is 1; TG_ALL: every size-1 axis */
tg_tensor *tg_unsqueeze(tg_tensor *t, int axis);     /* a new size-1 axis at axis, in [-(ndim + 1), ndim] */
/* basic slicing, one entry per leading axis, python semantics (negative and clamped bounds, step != 0);
 * all: the whole axis (start, stop and step ignored) */
typedef struct tg_slice { int64_t start, stop, step; bool all; } tg_slice;
#define TG_ALL 0x7fffffff    /* as an axis: every axis, tinygrad's None */
#define TG_END INT64_MAX     /* as a slice bound: python's omitted stop (and omitted start when step < 0) */
tg_tensor *tg_slice_axes(tg_tensor *t, int n, const tg_slice *slices);   /* t[slices[0], ..., slices[n-1]] */
tg_tensor *tg_cat(int n, tg_tensor *const *ts, int axis);    /* n >= 1 tensors, equal off axis; dtypes promote */
tg_tensor *tg_stack(int n, tg_tensor *const *ts, int axis);  /* n >= 1 tensors of one shape, along a new axis */
/* splits t along axis into pieces of the given sizes (adding up to the axis' size); fills out[0..n) and
 * returns TG_OK */
tg_status tg_split(tg_tensor *t, int n, const int64_t *sizes, int axis, tg_tensor **out);
/* tinygrad's repeat (numpy's tile): repeats[i] copies along axis i; ndim >= t's, new axes lead */
tg_tensor *tg_repeat(tg_tensor *t, int ndim, const int64_t *repeats);
tg_tensor *tg_contiguous(tg_tensor *t);   /* forces a materialized buffer */

/* ---- indexing and more movement (tinygrad's __getitem__, roll, diagonal, ...) ---- */
/* rolls axis dims[k] by shifts[k] (element i moves to (i + shift) mod size; an axis given twice rolls by the
 * sum); ndims 0: the flattened tensor by the one shift (nshifts 1), reshaped back, as tinygrad */
tg_tensor *tg_roll(tg_tensor *t, int nshifts, const int64_t *shifts, int ndims, const int *dims);
/* the diagonal `offset` (> 0 above, < 0 below the main one) of axes dim1, dim2 (distinct), as a new last axis
 * of length min(rows, cols) of the offset square (0 when it misses the matrix); the other axes keep their order */
tg_tensor *tg_diagonal(tg_tensor *t, int64_t offset, int dim1, int dim2);
/* 1-d (n): the (n + |offset|) square matrix with t on diagonal `offset` (0 elsewhere); 2-d: tg_diagonal(t,
 * offset, 0, 1), as PyTorch (tinygrad's diag takes 1-d tensors and offset 0 only) */
tg_tensor *tg_diag(tg_tensor *t, int64_t offset);
/* windows of `size` every `step` elements along dim: that axis becomes (size - size_window) / step + 1 windows
 * and a new last axis of `size`; 0 <= size <= the axis' size, step > 0 */
tg_tensor *tg_unfold(tg_tensor *t, int dim, int64_t size, int64_t step);
/* each element `repeats` (>= 0) times in a row along dim; dim TG_ALL: of the flattened tensor */
tg_tensor *tg_repeat_interleave(tg_tensor *t, int64_t repeats, int dim);
/* axis dim as nsizes axes of the given sizes (their product its size; one may be -1) */
tg_tensor *tg_unflatten(tg_tensor *t, int dim, int nsizes, const int64_t *sizes);
tg_tensor *tg_view(tg_tensor *t, int ndim, const int64_t *shape);    /* tg_reshape (tinygrad's alias) */
tg_tensor *tg_T(tg_tensor *t);   /* tinygrad's .T: tg_transpose(t, 1, 0) (2 or more dims) */
/* the leading shape[i] elements of each axis (ndim == t's; -1 keeps an axis, tinygrad's None) */
tg_tensor *tg_shrink_to(tg_tensor *t, int ndim, const int64_t *shape);
/* pads each axis at its end to shape[i] (>= its size; -1 keeps it) with value */
tg_tensor *tg_pad_to(tg_tensor *t, int ndim, const int64_t *shape, double value);
/* tinygrad's split(int): pieces of `size` along axis (the last one shorter; an empty axis gives one empty
 * piece) into out (room for cap), their count into *n (may be NULL) */
tg_status tg_split_size(tg_tensor *t, int64_t size, int axis, int cap, int *n, tg_tensor **out);
/* tinygrad's chunk: pieces of ceil(size / chunks) along axis, so possibly fewer than chunks (an empty axis:
 * chunks empty pieces); out has room for chunks, *n (may be NULL) gets the count */
tg_status tg_chunk(tg_tensor *t, int chunks, int axis, int *n, tg_tensor **out);
/* n 0-d or 1-d tensors -> n grids of shape (len0, len1, ...), indexing "ij"; xy: "xy" (the first two lengths
 * swap places); n == 1 gives the tensor as it is (tinygrad) */
tg_status tg_meshgrid(int n, tg_tensor *const *ts, bool xy, tg_tensor **out);
/* pad modes (tinygrad's pad(mode=)): constant fills with value; reflect mirrors without repeating the edge
 * (each pad < the axis' size); replicate repeats the edge element (the axis must not be empty); circular wraps
 * around (each pad <= the size left after crops). Negative values crop: reflect and replicate crop after
 * padding, circular and constant before, as tinygrad. value is used by constant only. */
typedef enum tg_padding_mode { TG_PAD_CONSTANT, TG_PAD_REFLECT, TG_PAD_REPLICATE, TG_PAD_CIRCULAR } tg_padding_mode;
/* tg_pad's flat form (last axis first) with a mode */
tg_tensor *tg_pad_mode(tg_tensor *t, int npads, const int64_t *pads, tg_padding_mode mode, double value);
/* tg_pad_axes' per-axis form with a mode ((0, 0) is tinygrad's None) */
tg_tensor *tg_pad_axes_mode(tg_tensor *t, int ndim, const int64_t *pairs, tg_padding_mode mode, double value);

/* One entry of an index, as python's t[...]: an int (negative counts from the end; out of range is an error
 * naming the axis), a slice (tg_slice; TG_END as start or stop means omitted), None (a new axis of 1), one
 * ellipsis (the axes not indexed), an integer tensor (advanced indexing: values picked along that axis, negative
 * values wrap once, values still out of range give 0 as tinygrad), or a bool mask (numpy's boolean indexing:
 * its shape matches the next axes, it stands for the integer tensors of tg_nonzero(mask) and so realizes it;
 * tinygrad refuses bool index tensors: TG_INDEX_TENSOR refuses them too). */
typedef enum tg_index_kind {
  TG_INDEX_INT, TG_INDEX_SLICE, TG_INDEX_NONE, TG_INDEX_ELLIPSIS, TG_INDEX_TENSOR, TG_INDEX_MASK
} tg_index_kind;
typedef struct tg_index {
  tg_index_kind kind;
  int64_t i;          /* TG_INDEX_INT */
  tg_slice slice;     /* TG_INDEX_SLICE */
  tg_tensor *tensor;  /* TG_INDEX_TENSOR (integer), TG_INDEX_MASK (bool); borrowed for the call */
} tg_index;
#define TG_IX_INT(v) ((tg_index){.kind = TG_INDEX_INT, .i = (v)})
#define TG_IX_SLICE(start, stop, step) ((tg_index){.kind = TG_INDEX_SLICE, .slice = {(start), (stop), (step), false}})
#define TG_IX_ALL ((tg_index){.kind = TG_INDEX_SLICE, .slice = {0, 0, 1, true}})
#define TG_IX_NONE ((tg_index){.kind = TG_INDEX_NONE})
#define TG_IX_ELLIPSIS ((tg_index){.kind = TG_INDEX_ELLIPSIS})
#define TG_IX_TENSOR(t) ((tg_index){.kind = TG_INDEX_TENSOR, .tensor = (t)})
#define TG_IX_MASK(t) ((tg_index){.kind = TG_INDEX_MASK, .tensor = (t)})
/* t[idx[0], ..., idx[n-1]] with numpy/tinygrad semantics: ints drop their axis, slices and None keep or add
 * one; the advanced (tensor) indices broadcast together and their shape replaces their axes where the first
 * one was, or comes first when they are not adjacent (a slice or None between them), as numpy. Ints are basic
 * indices as in tinygrad and PyTorch (numpy would count them as advanced). Lazy: tensor indices select with
 * one-hot masks and a sum, so gradients flow to t (a mask realizes only the mask). */
tg_tensor *tg_getitem(tg_tensor *t, int n, const tg_index *idx);
/* tinygrad's __setitem__: t[idx] = value in place, lazily (tg_assign of t with the merged value): value
 * broadcasts to t[idx]'s shape and has t's dtype; with tensor indices a position given twice takes the last
 * value. t must be realized and not require a gradient (tinygrad's rules) */
tg_status tg_setitem(tg_tensor *t, int n, const tg_index *idx, tg_tensor *value);
tg_status tg_setitem_scalar(tg_tensor *t, int n, const tg_index *idx, double value);  /* value converted to t's dtype */
/* int32 (count, ndim): the index of every non-zero element (NaN counts) in row-major order; realizes t (runs
 * kernels, refused inside a tg_jit capture) */
tg_tensor *tg_nonzero(tg_tensor *t);
/* 1-d: the elements of x where the bool mask (broadcast to x's shape) is true, in row-major order; realizes
 * the mask only, the selection stays lazy (gradients flow to x) */
tg_tensor *tg_masked_select(tg_tensor *x, tg_tensor *mask);
/* tinygrad's scatter: x with x[.., index[i], ..] = src[i] along dim (for each position of index); index (int)
 * has x's rank and is no larger than src, nor than x off dim; src has x's dtype; a position written twice
 * takes the last value along dim. Not differentiable through index */
tg_tensor *tg_scatter(tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src);
typedef enum tg_scatter_reduce_op {
  TG_SCATTER_SUM, TG_SCATTER_PROD, TG_SCATTER_MEAN, TG_SCATTER_AMAX, TG_SCATTER_AMIN
} tg_scatter_reduce_op;
/* tinygrad's scatter(dim, index, value) with a scalar src: reduce -1 none, TG_SCATTER_SUM ("add") or
 * TG_SCATTER_PROD ("multiply") */
tg_tensor *tg_scatter_scalar(tg_tensor *x, int dim, tg_tensor *index, double value, int reduce);
/* tinygrad's scatter_reduce: the values of src sent to each position combine with op, with x's own value
 * when include_self (mean counts it as one more); positions no index reaches keep x's value */
tg_tensor *tg_scatter_reduce(tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src, tg_scatter_reduce_op op,
                             bool include_self);

/* ---- elementwise ------------------------------------------------------------------------------------ */
/* Unary ops keep the shape. "float": the result is t's float dtype, or float32 for integer and bool t. */
tg_tensor *tg_neg(tg_tensor *t);         /* -x, t's dtype (bool: logical not) */
tg_tensor *tg_exp(tg_tensor *t);         /* e^x, float */
tg_tensor *tg_exp2(tg_tensor *t);        /* 2^x, float */
tg_tensor *tg_log(tg_tensor *t);         /* natural logarithm, float */
tg_tensor *tg_log2(tg_tensor *t);        /* float */
tg_tensor *tg_sqrt(tg_tensor *t);        /* float */
tg_tensor *tg_rsqrt(tg_tensor *t);       /* 1 / sqrt(x), float */
tg_tensor *tg_sin(tg_tensor *t);         /* float */
tg_tensor *tg_cos(tg_tensor *t);         /* float */
tg_tensor *tg_tan(tg_tensor *t);         /* float */
tg_tensor *tg_reciprocal(tg_tensor *t);  /* 1 / x, float */
tg_tensor *tg_abs(tg_tensor *t);         /* t's dtype; gradient 0 at 0 (tinygrad's x * sign(x)) */
tg_tensor *tg_sign(tg_tensor *t);        /* -1, 0 or 1 (NaN stays NaN), t's dtype */
tg_tensor *tg_square(tg_tensor *t);      /* x * x, t's dtype */
tg_tensor *tg_trunc(tg_tensor *t);       /* rounds toward zero, t's dtype (integers unchanged) */
tg_tensor *tg_floor(tg_tensor *t);       /* t's dtype */
tg_tensor *tg_ceil(tg_tensor *t);        /* t's dtype */
tg_tensor *tg_relu(tg_tensor *t);        /* x > 0 ? x : 0, t's dtype: gradient 0 at 0, NaN gives 0 (tinygrad) */
tg_tensor *tg_sigmoid(tg_tensor *t);     /* 1 / (1 + e^-x), float; saturated (even inf): gradient 0 */
tg_tensor *tg_tanh(tg_tensor *t);        /* float */
tg_tensor *tg_gelu(tg_tensor *t);        /* tanh approximation, as tinygrad; float */
tg_tensor *tg_silu(tg_tensor *t);        /* x * sigmoid(x), float */
tg_tensor *tg_softplus(tg_tensor *t);    /* log(1 + e^x) without overflow, float */
tg_tensor *tg_leaky_relu(tg_tensor *t, double neg_slope);  /* x < 0 ? neg_slope * x : x, float */
tg_tensor *tg_elu(tg_tensor *t, double alpha);             /* x > 0 ? x : alpha * (e^x - 1), float */
tg_tensor *tg_relu6(tg_tensor *t);       /* min(max(x, 0), 6), t's dtype; gradient 0 at 0, 1 at 6, NaN gives 0 */
tg_tensor *tg_hardswish(tg_tensor *t);   /* x * hardsigmoid(x), float */
tg_tensor *tg_hardsigmoid(tg_tensor *t); /* relu6(x + 3) / 6, float */
/* tinygrad's hardsigmoid(alpha, beta): relu(alpha x + beta) - relu(alpha x + beta - 1); alpha, beta weak scalars
 * (tinygrad's defaults 1/6, 0.5 give tg_hardsigmoid) */
tg_tensor *tg_hardsigmoid_ab(tg_tensor *t, double alpha, double beta);
tg_tensor *tg_mish(tg_tensor *t);        /* x * tanh(softplus(x)), float */
tg_tensor *tg_logical_not(tg_tensor *t); /* x == 0, bool */
/* tinygrad's clamp: x < lo ? lo : x, then that > hi ? hi : it; t's dtype. lo > hi gives hi; a bound of NaN is
 * not given (tinygrad's None; not both); gradient 1 at a bound; NaN stays NaN */
tg_tensor *tg_clamp(tg_tensor *t, double lo, double hi);

/* Binary ops broadcast a and b (numpy) and promote them to one dtype (tinygrad's rules), then apply. */
tg_tensor *tg_add(tg_tensor *a, tg_tensor *b);   /* a + b */
tg_tensor *tg_sub(tg_tensor *a, tg_tensor *b);   /* a - b */
tg_tensor *tg_mul(tg_tensor *a, tg_tensor *b);   /* a * b (bool: and) */
tg_tensor *tg_div(tg_tensor *a, tg_tensor *b);   /* true division: integers promote to float */
tg_tensor *tg_idiv(tg_tensor *a, tg_tensor *b);  /* integer division rounding toward zero */
tg_tensor *tg_mod(tg_tensor *a, tg_tensor *b);   /* python modulo: result has the sign of b */
/* a^b as tinygrad: x^0 = 1, NaN for a negative base with a fractional exponent except -inf ((-inf)^0.3 =
 * inf); integers rounded. Gradients as tinygrad's: b a^(b-1) (0 where b = 0) and a^b ln a (where a = 0: -inf
 * for b < 0, else 0) */
tg_tensor *tg_pow(tg_tensor *a, tg_tensor *b);
/* the larger (smaller) of a and b as tinygrad: a NaN in a gives NaN, a NaN in b gives a (PyTorch: NaN both);
 * ties split the gradient 0.5/0.5 */
tg_tensor *tg_maximum(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_minimum(tg_tensor *a, tg_tensor *b);  /* see tg_maximum */
tg_tensor *tg_lt(tg_tensor *a, tg_tensor *b);    /* a < b, bool (compared in the promoted dtype) */
tg_tensor *tg_le(tg_tensor *a, tg_tensor *b);    /* a <= b, bool */
tg_tensor *tg_gt(tg_tensor *a, tg_tensor *b);    /* a > b, bool */
tg_tensor *tg_ge(tg_tensor *a, tg_tensor *b);    /* a >= b, bool */
tg_tensor *tg_eq(tg_tensor *a, tg_tensor *b);    /* a == b, bool */
tg_tensor *tg_ne(tg_tensor *a, tg_tensor *b);    /* a != b, bool */
tg_tensor *tg_bitwise_and(tg_tensor *a, tg_tensor *b);  /* integer or bool tensors only */
tg_tensor *tg_bitwise_or(tg_tensor *a, tg_tensor *b);   /* integer or bool tensors only */
tg_tensor *tg_bitwise_xor(tg_tensor *a, tg_tensor *b);  /* integer or bool tensors only */
/* cond != 0 ? a : b; the three broadcast together, a and b promote to one dtype */
tg_tensor *tg_where(tg_tensor *cond, tg_tensor *a, tg_tensor *b);
tg_tensor *tg_cast(tg_tensor *t, tg_dtype dt);     /* each value converted to dt */
/* the bits read as dt. Another element size changes the last dim as tinygrad's Tensor.bitcast: (..., n) of k-byte
 * elements becomes (..., n * k / j) of j-byte ones, the bytes little-endian; n * k must be a multiple of j, and a
 * 0-dim tensor or bool on either side is refused (TG_ERR_ARG). No gradient flows through it */
tg_tensor *tg_bitcast(tg_tensor *t, tg_dtype dt);
/* scalar right-hand sides; the scalar is weak as in tinygrad: an int tensor stays int for an integral
 * value, a float value makes an int tensor float32 */
tg_tensor *tg_add_scalar(tg_tensor *a, double v);      /* a + v */
tg_tensor *tg_sub_scalar(tg_tensor *a, double v);      /* a - v */
tg_tensor *tg_mul_scalar(tg_tensor *a, double v);      /* a * v */
tg_tensor *tg_div_scalar(tg_tensor *a, double v);      /* a / v, float as tg_div */
/* a^v as tg_pow; v 2 and 3 are products in a's dtype; an integer or bool a with a negative integral v is refused
 * as tinygrad's x ** -2 (cast a to float first, as python's x ** -2.0 does) */
tg_tensor *tg_pow_scalar(tg_tensor *a, double v);
tg_tensor *tg_maximum_scalar(tg_tensor *a, double v);  /* max(a, v) */
tg_tensor *tg_minimum_scalar(tg_tensor *a, double v);  /* min(a, v) */

/* ---- elementwise, more of tinygrad's methods ---- */
/* Float math as above ("float": integer and bool t give float32). These run in at least float32: float16 and
 * bfloat16 inputs compute in float32 and round back. */
tg_tensor *tg_log10(tg_tensor *t);       /* base-10 logarithm, float */
tg_tensor *tg_sinh(tg_tensor *t);        /* (e^x - e^-x) / 2, float */
tg_tensor *tg_cosh(tg_tensor *t);        /* (e^x + e^-x) / 2, float */
tg_tensor *tg_asin(tg_tensor *t);        /* arcsine, float; NaN outside [-1, 1] */
tg_tensor *tg_acos(tg_tensor *t);        /* pi/2 - asin(x), float; NaN outside [-1, 1] */
tg_tensor *tg_atan(tg_tensor *t);        /* arctangent in (-pi/2, pi/2), float */
tg_tensor *tg_asinh(tg_tensor *t);       /* log(x + sqrt(x^2 + 1)), odd, no overflow; float */
tg_tensor *tg_acosh(tg_tensor *t);       /* log(x + sqrt(x^2 - 1)), float; NaN below 1 */
tg_tensor *tg_atanh(tg_tensor *t);       /* log((1 + x) / (1 - x)) / 2, float; +-inf at +-1, NaN beyond */
/* the error function, float: float32-accurate (within 1e-7), its slope within 1e-6 of 2/sqrt(pi) e^(-x^2)
 * (tinygrad's coarser fit is 1.5e-7 off, its slope 1e-4) */
tg_tensor *tg_erf(tg_tensor *t);
/* to the nearest integer, ties to even (2.5 -> 2, -1.5 -> -2); t's dtype: integers are returned unchanged
 * (tinygrad's round makes them float32) */
tg_tensor *tg_round(tg_tensor *t);
tg_tensor *tg_isnan(tg_tensor *t);       /* x != x, bool (false for integers) */
tg_tensor *tg_isfinite(tg_tensor *t);    /* neither inf nor NaN, bool (true for integers) */
/* x == +inf (when detect_positive) or x == -inf (when detect_negative), bool; tinygrad's default: both */
tg_tensor *tg_isinf(tg_tensor *t, bool detect_positive, bool detect_negative);
/* activations, float, with gradients 0 (not NaN) where they saturate */
tg_tensor *tg_celu(tg_tensor *t, double alpha);  /* x > 0 ? x : alpha (e^(x/alpha) - 1); alpha != 0 (tinygrad's default 1) */
/* 1.0507 (x >= 0 ? x : 1.6733 (e^x - 1)), PyTorch's full-precision constants (tinygrad rounds them; 2e-6 apart) */
tg_tensor *tg_selu(tg_tensor *t);
/* tinygrad's selu(alpha, gamma): gamma (x >= 0 ? x : alpha (e^x - 1)), float (tinygrad's defaults 1.67326, 1.0507) */
tg_tensor *tg_selu_ag(tg_tensor *t, double alpha, double gamma);
tg_tensor *tg_softsign(tg_tensor *t);    /* x / (1 + |x|), float */
tg_tensor *tg_quick_gelu(tg_tensor *t);  /* x sigmoid(1.702 x), float */
tg_tensor *tg_logsigmoid(tg_tensor *t);  /* log(sigmoid(x)) = -softplus(-x), no overflow; float */
tg_tensor *tg_swish(tg_tensor *t);       /* tg_silu (tinygrad's alias) */
typedef enum tg_gelu_approx { TG_GELU_TANH, TG_GELU_NONE } tg_gelu_approx;
/* tinygrad's gelu(approximate=): TG_GELU_TANH is tg_gelu; TG_GELU_NONE is x/2 (1 + erf(x / sqrt(2))), float */
tg_tensor *tg_gelu_mode(tg_tensor *t, tg_gelu_approx approximate);
tg_tensor *tg_softplus_beta(tg_tensor *t, double beta);  /* log(1 + e^(beta x)) / beta, float; beta != 0 */
/* tinygrad's clip(min_val, max_val): below min_val -> min_val, then above max_val -> max_val (so max_val
 * everywhere when min_val > max_val); the bounds are weak scalars (an integer t stays integer for integral
 * bounds); tinygrad's defaults are -1, 1 */
tg_tensor *tg_hardtanh(tg_tensor *t, double min_val, double max_val);
tg_tensor *tg_clip(tg_tensor *t, double lo, double hi);  /* tg_clamp (tinygrad's alias) */
/* Binary: a and b broadcast and promote as tg_add's. */
/* |a| with the sign of b (b = -0.0 counts as negative, NaN as positive); the promoted dtype as tinygrad
 * (PyTorch always gives float); d/da is 0 at a = 0 */
tg_tensor *tg_copysign(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_logaddexp(tg_tensor *a, tg_tensor *b);  /* log(e^a + e^b) without overflow, float */
/* tinygrad's isclose, bool: both finite and |a - b| <= atol + rtol |b|, or equal infinities, or both NaN
 * with equal_nan; tinygrad's defaults rtol 1e-5, atol 1e-8, equal_nan false. Integers compare exactly */
tg_tensor *tg_isclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan);
/* a + (end - a) weight, in the float dtype the three promote to (no uint8 fixed-point path as tinygrad's) */
tg_tensor *tg_lerp(tg_tensor *a, tg_tensor *end, tg_tensor *weight);
tg_tensor *tg_lerp_scalar(tg_tensor *a, tg_tensor *end, double weight);  /* tg_lerp with a weak scalar weight */
tg_tensor *tg_masked_fill(tg_tensor *t, tg_tensor *mask, double value);  /* mask ? value : t; value a weak scalar */
tg_tensor *tg_masked_fill_tensor(tg_tensor *t, tg_tensor *mask, tg_tensor *value);  /* tg_where(mask, value, t) */
tg_tensor *tg_where_scalar(tg_tensor *cond, tg_tensor *a, double b);  /* cond ? a : b, b a weak scalar */
/* cond ? a : b with two scalars: int32 when both are integral, else float32 */
tg_tensor *tg_where_scalars(tg_tensor *cond, double a, double b);
/* a copy in its own buffer (tg_contiguous), through which gradients flow; t's gradient, if any, is copied to it
 * (as tinygrad's clone) */
tg_tensor *tg_clone(tg_tensor *t);
tg_tensor *tg_contiguous_backward(tg_tensor *t);  /* t's value (tinygrad's hint for the backward pass: a no-op here) */
/* Division with a rounding mode, tinygrad's div(rounding_mode=): integers (both operands) stay integer and
 * exact, anything else divides in float (bool as float32) and rounds. An integer divided by 0 gives 0, and
 * MIN / -1 gives MIN (no trap). */
typedef enum tg_rounding_mode { TG_ROUND_NONE, TG_ROUND_TRUNC, TG_ROUND_FLOOR } tg_rounding_mode;
tg_tensor *tg_div_mode(tg_tensor *a, tg_tensor *b, tg_rounding_mode mode);  /* NONE: tg_div; TRUNC: toward 0; FLOOR: down */
/* python's a // b: floor(a / b) for floats (of the rounded quotient, as tinygrad: 1.0 // 0.1 is 10, python's
 * 9), integers with python's sign rules (-7 // 2 == -4) */
tg_tensor *tg_floordiv(tg_tensor *a, tg_tensor *b);
/* C's fmod: a - trunc(a / b) b, with the sign of a (torch.fmod); integers exact; a finite a over +-inf is a */
tg_tensor *tg_fmod(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_bitwise_not(tg_tensor *t);  /* ~x on integers, logical not on bool */
/* a << b on integer tensors; a shift by a negative amount or by the dtype's width or more gives 0 */
tg_tensor *tg_lshift(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_rshift(tg_tensor *a, tg_tensor *b);  /* a >> b, arithmetic for signed; past the width: 0 or -1 */
/* scalar forms, v a weak scalar as in tg_add_scalar; the reflected tg_r*_scalar(t, v) are python's v op t */
tg_tensor *tg_rsub_scalar(tg_tensor *a, double v);       /* v - a */
tg_tensor *tg_rdiv_scalar(tg_tensor *a, double v);       /* v / a, float */
tg_tensor *tg_rpow_scalar(tg_tensor *a, double v);       /* v ** a as tg_pow; a negative integral v with an integer a is refused (tinygrad) */
tg_tensor *tg_mod_scalar(tg_tensor *a, double v);        /* a % v as tg_mod (python's sign rules) */
tg_tensor *tg_rmod_scalar(tg_tensor *a, double v);       /* v % a as tg_mod */
tg_tensor *tg_idiv_scalar(tg_tensor *a, double v);       /* tg_idiv(a, v) */
tg_tensor *tg_floordiv_scalar(tg_tensor *a, double v);   /* a // v as tg_floordiv */
tg_tensor *tg_rfloordiv_scalar(tg_tensor *a, double v);  /* v // a as tg_floordiv */
tg_tensor *tg_fmod_scalar(tg_tensor *a, double v);       /* tg_fmod(a, v) */
tg_tensor *tg_copysign_scalar(tg_tensor *a, double v);   /* tg_copysign(a, v) */
tg_tensor *tg_logaddexp_scalar(tg_tensor *a, double v);  /* tg_logaddexp(a, v) */
tg_tensor *tg_lt_scalar(tg_tensor *a, double v);         /* a < v, bool */
tg_tensor *tg_le_scalar(tg_tensor *a, double v);         /* a <= v, bool */
tg_tensor *tg_gt_scalar(tg_tensor *a, double v);         /* a > v, bool */
tg_tensor *tg_ge_scalar(tg_tensor *a, double v);         /* a >= v, bool */
tg_tensor *tg_eq_scalar(tg_tensor *a, double v);         /* a == v, bool */
tg_tensor *tg_ne_scalar(tg_tensor *a, double v);         /* a != v, bool */
/* integer scalars, exact in 64 bits (a bool tensor meets v as int32) */
tg_tensor *tg_bitwise_and_scalar(tg_tensor *a, int64_t v);  /* a & v */
tg_tensor *tg_bitwise_or_scalar(tg_tensor *a, int64_t v);   /* a | v */
tg_tensor *tg_bitwise_xor_scalar(tg_tensor *a, int64_t v);  /* a ^ v */
tg_tensor *tg_lshift_scalar(tg_tensor *a, int64_t v);       /* a << v */
tg_tensor *tg_rshift_scalar(tg_tensor *a, int64_t v);       /* a >> v */
tg_tensor *tg_rlshift_scalar(tg_tensor *a, int64_t v);      /* v << a */
tg_tensor *tg_rrshift_scalar(tg_tensor *a, int64_t v);      /* v >> a */

/* ---- reductions: axes NULL/naxes 0 reduces everything; negative axes count from the end -------------- */
/* keepdim keeps each reduced axis with size 1, else it is dropped. A 0-d tensor takes axis 0 or -1 (every
 * reduction, softmax and argmax included: the identity). Empty reductions give the op's identity, as tinygrad:
 * sum 0, prod 1, max the dtype's lowest value (-inf), min its highest */
tg_tensor *tg_sum(tg_tensor *t, int naxes, const int *axes, bool keepdim);   /* (u)int8/16: (u)int32; bool: int32 */
tg_tensor *tg_prod(tg_tensor *t, int naxes, const int *axes, bool keepdim);  /* t's dtype; zeros: exact gradient */
tg_tensor *tg_max(tg_tensor *t, int naxes, const int *axes, bool keepdim);   /* t's dtype; ties share the gradient */
tg_tensor *tg_min(tg_tensor *t, int naxes, const int *axes, bool keepdim);   /* see tg_max */
tg_tensor *tg_mean(tg_tensor *t, int naxes, const int *axes, bool keepdim);  /* float (ints: float32); empty: NaN */
/* sum((x - mean)^2) / max(n - correction, 0), float (inf, or NaN for 0 / 0, when n <= correction); tinygrad's
 * default correction is 1 */
tg_tensor *tg_var(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction);
tg_tensor *tg_std(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction);  /* sqrt(tg_var) */
/* int32: the first index of the largest value along axis; TG_ALL: of the flattened tensor, 0-d. An empty axis
 * gives INT32_MIN (tinygrad's arithmetic; PyTorch refuses it) */
tg_tensor *tg_argmax(tg_tensor *t, int axis, bool keepdim);
tg_tensor *tg_argmin(tg_tensor *t, int axis, bool keepdim);    /* as tg_argmax, of the smallest value */
tg_tensor *tg_softmax(tg_tensor *t, int axis);                 /* t's shape, float */
tg_tensor *tg_log_softmax(tg_tensor *t, int axis);             /* t's shape, float */
/* tinygrad's softmax(axis, dtype=): x - max(x) in t's dtype, converted to dt, then the softmax in dt */
tg_tensor *tg_softmax_dtype(tg_tensor *t, int axis, tg_dtype dt);
tg_tensor *tg_log_softmax_dtype(tg_tensor *t, int axis, tg_dtype dt);  /* log_softmax(axis, dtype=) as tg_softmax_dtype */
tg_tensor *tg_logsumexp(tg_tensor *t, int axis, bool keepdim); /* float; one axis or TG_ALL (see tg_logsumexp_axes) */
/* numpy matmul semantics, 1-d and batched; floats keep their dtype, integers accumulate as tg_sum's */
tg_tensor *tg_matmul(tg_tensor *a, tg_tensor *b);
tg_tensor *tg_dot(tg_tensor *a, tg_tensor *b);     /* tg_matmul (tinygrad's dot) */

/* ---- scans, sorting and statistics ------------------------------------------------------------------- */
/* Scans run along one axis and keep the shape; a 0-d tensor takes axis 0 or -1 (its one element), a size-0
 * axis gives an empty result. Two-output calls fill both outputs (a NULL output pointer: not wanted) and return
 * TG_OK, or set both to NULL. */
tg_tensor *tg_cumprod(tg_tensor *x, int axis);     /* the running product, x's dtype */
/* the running max and, int32, the index it was taken from: tinygrad's first index j <= i holding the value
 * (PyTorch takes the last among equal values). With NaN in x, values and indices are unspecified (tinygrad's
 * too; PyTorch propagates the NaN) */
tg_status tg_cummax(tg_tensor *x, int axis, tg_tensor **values, tg_tensor **indices);
tg_status tg_cummin(tg_tensor *x, int axis, tg_tensor **values, tg_tensor **indices);  /* as tg_cummax, the min */
/* log(sum of exp(x[j]) for j <= i), float, without overflow; runs of -inf give -inf (as PyTorch; tinygrad NaN) */
tg_tensor *tg_logcumsumexp(tg_tensor *x, int axis);
/* sorted along axis, stable (equal values keep their index order, in both directions); indices int32. NaN
 * sorts as the largest value (PyTorch; tinygrad leaves it unspecified). The values' gradient flows to the
 * elements they came from. Work n^2 per row of n (tinygrad's too) */
tg_status tg_sort(tg_tensor *t, int axis, bool descending, tg_tensor **values, tg_tensor **indices);
tg_tensor *tg_argsort(tg_tensor *t, int axis, bool descending);   /* tg_sort's indices */
/* the k largest (or smallest) along axis (0 <= k <= its size; 1 for 0-d), in order, ties in index order as
 * tg_sort; sorted false gives the same order (PyTorch allows it; tinygrad refuses it). Outputs as tg_sort */
tg_status tg_topk(tg_tensor *t, int64_t k, int axis, bool largest, bool sorted, tg_tensor **values,
                  tg_tensor **indices);
/* tg_var and tg_mean of the same axes as two outputs (PyTorch's var_mean, tinygrad's) */
tg_status tg_var_mean(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction,
                      tg_tensor **var, tg_tensor **mean);
tg_status tg_std_mean(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction,  /* tg_std, tg_mean */
                      tg_tensor **std, tg_tensor **mean);
/* log(sum(exp(x))) over several axes (naxes 0: all), float; an all -inf (or empty) reduction is -inf and one
 * holding +inf is +inf, as PyTorch (tinygrad: NaN) */
tg_tensor *tg_logsumexp_axes(tg_tensor *t, int naxes, const int *axes, bool keepdim);
tg_tensor *tg_softmin(tg_tensor *t, int axis);   /* softmax(-x), float */
tg_tensor *tg_softmin_dtype(tg_tensor *t, int axis, tg_dtype dt);  /* tg_softmax_dtype(-x, axis, dt) */
tg_tensor *tg_any(tg_tensor *t, int naxes, const int *axes, bool keepdim);  /* bool: some x != 0 (empty: false) */
tg_tensor *tg_all(tg_tensor *t, int naxes, const int *axes, bool keepdim);  /* bool: every x != 0 (empty: true) */
/* tinygrad's sum(dtype=): t converted to dt and summed; the result is dt */
tg_tensor *tg_sum_dtype(tg_tensor *t, int naxes, const int *axes, bool keepdim, tg_dtype dt);
/* tinygrad's prod(dtype=): t converted to dt and multiplied; the result is dt */
tg_tensor *tg_prod_dtype(tg_tensor *t, int naxes, const int *axes, bool keepdim, tg_dtype dt);

/* ---- running and reading (these run kernels) -------------------------------------------------------- */
tg_status tg_realize(tg_tensor *t);   /* computes t into a buffer, which t reads from then on */
tg_status tg_realize_many(int n, tg_tensor *const *ts);   /* one schedule for all: shared work runs once */
/* copies the tensor, realized and made contiguous, into dst (nbytes == numel * dtype size); refused inside
 * a tg_jit step being captured */
tg_status tg_to_host(tg_tensor *t, void *dst, size_t nbytes);
double tg_item(tg_tensor *t);   /* the one element of a numel-1 tensor as a double; NaN on error */

/* ---- autograd ---------------------------------------------------------------------------------------- */
/* Gradients are more lazy graph: tg_backward builds them (one rule per primitive op) and runs nothing, so
 * the forward and backward of a step schedule and fuse together. */
tg_tensor *tg_set_requires_grad(tg_tensor *t, bool on);  /* returns t (the same handle) */
bool tg_requires_grad(const tg_tensor *t);               /* false for NULL */
/* adds d(loss)/d(t) to the gradient of every live tensor t that requires one and that loss depends on;
 * loss must be one float element */
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
/* Float dtypes: the numbers are drawn in float32 (24 random bits) and converted to dt. */
void tg_manual_seed(uint64_t seed);   /* restarts the generator: a seed and the same calls give the same numbers */
tg_tensor *tg_rand(tg_dtype dt, int ndim, const int64_t *shape);            /* uniform [0, 1) */
tg_tensor *tg_randn(tg_dtype dt, int ndim, const int64_t *shape);           /* standard normal */
/* integers uniform in [low, high) of an integer dtype, as tinygrad's randint(*shape, low, high, dtype) */
tg_tensor *tg_randint(tg_dtype dt, int ndim, const int64_t *shape, int64_t low, int64_t high);
tg_tensor *tg_uniform(tg_dtype dt, int ndim, const int64_t *shape, double low, double high);  /* [low, high) */
tg_tensor *tg_normal(tg_dtype dt, int ndim, const int64_t *shape, double mean, double std);  /* mean + std * N(0, 1) */
/* fan_in = shape[1] * prod(shape[2:]), as tinygrad/PyTorch; ndim >= 1; g = 2 / (1 + a^2) */
tg_tensor *tg_kaiming_uniform(tg_dtype dt, int ndim, const int64_t *shape, double a);  /* U(+-sqrt(3 g / fan_in)) */
tg_tensor *tg_kaiming_normal(tg_dtype dt, int ndim, const int64_t *shape, double a);   /* N(0, sqrt(g / fan_in)) */
/* U(+-sqrt(6 / (shape[0] + prod(shape[1:])))), as tinygrad */
tg_tensor *tg_glorot_uniform(tg_dtype dt, int ndim, const int64_t *shape);

/* ---- neural network ops (compositions of the primitives, so they fuse) ------------------------------ */
/* Options. Every option struct (tg_conv_opts, tg_pool_opts, tg_loss_opts, tg_sgd_opts, tg_adam_opts) has a
 * tg_*_defaults() function that returns tinygrad's defaults; start from it and set what you need. Every value
 * you write is taken literally (weight_decay 0 is no decay, padding 0 is no padding). A tg_ints field left
 * empty (n == 0, as in a zero-initialized struct) means "not given": that argument's default.
 *   tg_conv_opts o = tg_conv_defaults();  o.stride = TG_INTS(2);  o.padding = TG_INTS(1, 0);
 *   tg_conv2d(x, w, b, (tg_conv_opts){.padding = TG_INTS(1)});        (conv: zero-initialized == defaults) */
#define TG_CONV_DIMS 3
/* a short list of integers, as tinygrad takes an int or a tuple: n == 0 not given; n == 1 one value for
 * every spatial dimension; n == number of spatial dims one per dimension; for paddings also n == 2 * dims:
 * per side, tinygrad's (and PyTorch's F.pad) flat order, last dimension first: (left, right, top, bottom) */
typedef struct tg_ints { int n; int64_t v[2 * TG_CONV_DIMS]; } tg_ints;
#define TG_INTS(...) ((tg_ints){.n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .v = {__VA_ARGS__}})
typedef struct tg_conv_opts {
  int64_t groups;           /* 0 (not given) or 1: one group */
  tg_ints stride;           /* default 1 */
  tg_ints dilation;         /* default 1 */
  tg_ints padding;          /* zero padding, default 0; per side with 2 * dims values */
  tg_ints output_padding;   /* tg_conv_transpose2d only, default 0 */
} tg_conv_opts;
tg_conv_opts tg_conv_defaults(void);   /* one group, everything else not given (== a zero-initialized struct) */
/* x (N, Cin, *spatial), w (Cout, Cin/groups, *kernel), bias (Cout) or NULL; 1 to 3 spatial dims. The result
 * is (N, Cout, *out), out = (in + pads - dilation * (kernel - 1) - 1) / stride + 1 (at least 1); a negative
 * padding crops the input, as tinygrad's (pooling too) */
tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *w, tg_tensor *bias, tg_conv_opts o);
/* w (Cin, Cout/groups, *kernel) as PyTorch; padding removes rows from the output as PyTorch's */
tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *w, tg_tensor *bias, tg_conv_opts o);
typedef struct tg_pool_opts {
  int ndims;                /* pooled trailing axes, 1 to 3; 0 (not given): the kernel's count if 2 or 3, else 2 */
  tg_ints kernel;           /* default 2 (tinygrad's (2, 2)) */
  tg_ints stride;           /* default: the kernel size */
  tg_ints dilation;         /* default 1 */
  tg_ints padding;          /* default 0; per side with 2 * dims values */
  bool ceil_mode;           /* default false */
  bool count_include_pad;   /* avg_pool: the padding counts in the divisor; tinygrad's default is true */
} tg_pool_opts;
tg_pool_opts tg_pool_defaults(void);   /* kernel 2, stride = kernel, ceil_mode false, count_include_pad true */
tg_tensor *tg_max_pool2d(tg_tensor *x, tg_pool_opts o);   /* over the trailing o.ndims axes, x's dtype */
tg_tensor *tg_avg_pool2d(tg_tensor *x, tg_pool_opts o);   /* over the trailing o.ndims axes, float */
/* normalize over the given axes (tinygrad's layernorm(axis=-1): pass 1, (int[]){-1}; naxes 0: every axis) */
tg_tensor *tg_layernorm(tg_tensor *x, int naxes, const int *axes, double eps);
tg_tensor *tg_rmsnorm(tg_tensor *x, int naxes, const int *axes, double eps);   /* x / sqrt(mean(x^2) + eps) */
/* x (N, C, ...): (x - mean) * invstd * weight + bias, per channel; weight/bias may be NULL */
tg_tensor *tg_batchnorm(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_tensor *mean, tg_tensor *invstd);
/* x (N, C, ...) normalized over each group of C / groups channels (and the other axes), then * weight + bias
 * per channel (C); weight/bias may be NULL */
tg_tensor *tg_group_norm(tg_tensor *x, int64_t groups, tg_tensor *weight, tg_tensor *bias, double eps);
tg_tensor *tg_dropout(tg_tensor *x, double p);     /* identity unless tg_training(true); p in [0, 1] */
void tg_set_training(bool on);   /* the training flag read by tg_dropout and tg_nn_batchnorm (default false) */
bool tg_training(void);          /* the training flag */
/* int labels -> int32 (..., num_classes): 1 at each label, 0 elsewhere (a label out of range: a row of 0) */
tg_tensor *tg_one_hot(tg_tensor *labels, int64_t num_classes);
/* tinygrad's gather: out[..., i, ...] = x[..., index[..., i, ...], ...] along axis; index (integer) has x's rank
 * and is no larger than x off the axis; out has index's shape. An index out of range gives 0 */
tg_tensor *tg_gather(tg_tensor *x, int axis, tg_tensor *index);
/* x[index] along axis with an integer index tensor of any shape: the result replaces that axis by index's shape */
tg_tensor *tg_index_select(tg_tensor *x, int axis, tg_tensor *index);
/* weight (V, D), index int (...) -> (..., D); an index outside [0, V) gives a row of zeros, as tinygrad's */
tg_tensor *tg_embedding(tg_tensor *weight, tg_tensor *index);
/* dropout(softmax(q k^T / sqrt(E) + mask), dropout_p) v: q (..., L, E), k (..., S, E), v (..., S, Ev) ->
 * (..., L, Ev); mask (broadcast to (..., L, S)) bool: true keeps (a row with no key kept gives 0; the loops over
 * keys end at the last one kept, so a mask from a variable costs O(that position)), or float: added; is_causal:
 * key j <= query i
 * (not with a mask); dropout_p as tg_dropout (only in training); enable_gqa: k and v have Hk heads on axis -3
 * dividing q's, each repeated for q's heads / Hk consecutive query heads (repeat_interleave), as tinygrad */
tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *mask, double dropout_p,
                                           bool is_causal, bool enable_gqa);
/* Losses. The class axis is tinygrad's: the last one for sparse_categorical_crossentropy, 1 (0 for a 1-d
 * input) for cross_entropy and nll_loss, as PyTorch's. A loss is a float 0-d tensor, or with
 * TG_REDUCTION_NONE one value per sample (the labels' shape). */
typedef enum tg_reduction { TG_REDUCTION_MEAN, TG_REDUCTION_SUM, TG_REDUCTION_NONE } tg_reduction;
/* tinygrad's keyword arguments of the losses; each loss refuses one it does not have, set away from its default.
 * The tensors are borrowed (the caller keeps and frees them); NULL: not given */
typedef struct tg_loss_opts {
  tg_reduction reduction;   /* mean (over the labels that count), sum, or none: one loss per sample */
  double label_smoothing;   /* in [0, 1]; sparse_categorical_crossentropy and cross_entropy only */
  bool use_ignore_index;    /* labels equal to ignore_index add nothing and do not count in the mean */
  int64_t ignore_index;     /* sparse_categorical_crossentropy (where -1 ignores nothing, as tinygrad) and nll_loss */
  tg_tensor *weight;        /* nll_loss only: per-class weights (C); the mean divides by the sum of weight[label] */
  tg_tensor *pos_weight;    /* binary_crossentropy_logits only: multiplies the positive term; broadcasts with targets */
} tg_loss_opts;
/* tinygrad's defaults: mean, no smoothing, no label ignored, no weights (== a zero-initialized struct, ignore_index -1) */
tg_loss_opts tg_loss_defaults(void);
/* logits (..., C) (tinygrad's class axis -1, unlike PyTorch's 1), labels int (...); a label out of range adds 0 */
tg_tensor *tg_sparse_categorical_crossentropy(tg_tensor *logits, tg_tensor *labels, tg_loss_opts o);
/* logits (N, C, ...) or (C); target: probabilities of the logits' shape, or integer labels (N, ...) or () */
tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target, tg_loss_opts o);
/* -log_probs[label] * weight[label] along the class axis: log_probs (N, C, ...) or (C), labels int (N, ...) or ();
 * the mean is sum(-log_probs[label] w[label]) / sum(w[label]) over the labels that count */
tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *labels, tg_loss_opts o);
/* elementwise losses: reduction only (and pos_weight for the logits form); the mean is over every element.
 * probs in (0, 1): the logs are not clamped (as tinygrad, unlike PyTorch) */
tg_tensor *tg_binary_crossentropy(tg_tensor *probs, tg_tensor *targets, tg_loss_opts o);
/* sigmoid inside: pos_weight * y * softplus(-x) + (1 - y) * softplus(x) */
tg_tensor *tg_binary_crossentropy_logits(tg_tensor *logits, tg_tensor *targets, tg_loss_opts o);
/* the running sum along axis, x's shape; floats keep their dtype, integers take tg_sum's */
tg_tensor *tg_cumsum(tg_tensor *x, int axis);
tg_tensor *tg_triu(tg_tensor *x, int64_t diagonal);   /* x (..., R, C) with 0 below diagonal `diagonal` */
tg_tensor *tg_tril(tg_tensor *x, int64_t diagonal);   /* x (..., R, C) with 0 above diagonal `diagonal` */
/* tinygrad's modes "nearest", "linear" (bilinear/trilinear by the number of sizes), "nearest-exact" */
typedef enum tg_interp_mode { TG_INTERP_NEAREST, TG_INTERP_LINEAR, TG_INTERP_NEAREST_EXACT } tg_interp_mode;
/* resizes the trailing axes (ndim sizes, 1 to x's rank) as tinygrad's and PyTorch's interpolate; align_corners
 * (linear only) maps the corner elements onto each other; x's dtype (linear blends in float32 or wider, then
 * converts back: integers truncate; uint8 rounds, each axis in tinygrad's 7-bit fixed point, which matches
 * PyTorch's uint8 bilinear; unlike tinygrad's, neighbours more than 127 apart do not wrap around) */
tg_tensor *tg_interpolate(tg_tensor *x, int ndim, const int64_t *size, tg_interp_mode mode, bool align_corners);
/* tinygrad's max_pool2d(return_indices=True): *values as tg_max_pool2d, *indices int32 of the same shape: the
 * flat index (within each input plane of the pooled axes) of the first maximum of each window (PyTorch: int64) */
tg_status tg_max_pool2d_with_indices(tg_tensor *x, tg_pool_opts o, tg_tensor **values, tg_tensor **indices);
/* x (N, C, *S) and its indices from tg_max_pool2d_with_indices -> (N, C, *out) of zeros with x at those indices.
 * out: the last len(S) of output_size (nsize values), or with nsize 0 (S - 1) * stride - pads + dilation *
 * (kernel - 1) + 1 from o (kernel, stride, dilation, padding as tg_max_pool2d's); an index out of range is dropped,
 * one given twice (overlapping windows) adds up as in tinygrad (PyTorch writes it once) */
tg_tensor *tg_max_unpool2d(tg_tensor *x, tg_tensor *indices, tg_pool_opts o, int nsize, const int64_t *output_size);
/* x / max(||x||_p along dim, eps) as tinygrad's normalize (PyTorch's F.normalize; defaults p 2, dim 1, eps
 * 1e-12); p 0 counts the nonzero elements; p +-inf: the largest/smallest |x| (PyTorch's; tinygrad's formula
 * has no such case). Integers are normalized in float32 */
tg_tensor *tg_normalize(tg_tensor *x, double p, int dim, double eps);
/* Einstein summation over n operands: "ij,jk->ik", implicit output ("ij,jk": the letters seen once, sorted,
 * A-Z before a-z), "..." for leading dims (broadcast right-aligned), a letter repeated in one operand takes
 * its diagonal, letters absent from the output are summed, spaces are ignored; a size-1 dim broadcasts
 * against its letter's size. Built from movement ops, one multiply and one sum: lazy and differentiable */
tg_tensor *tg_einsum(const char *formula, int n, tg_tensor *const *operands);

/* ---- nn: named parameters ---------------------------------------------------------------------------- */
/* A list of (name, tensor) pairs: what a model exposes to optimizers and to state files. It holds a
 * reference to each tensor. */
typedef struct tg_params tg_params;
tg_params *tg_params_new(void);      /* an empty list */
void tg_params_free(tg_params *p);   /* frees the names and drops the references (NULL is fine) */
/* appends t under a copy of name (non-empty, not yet in the list) and retains t */
tg_status tg_params_add(tg_params *p, const char *name, tg_tensor *t);
int tg_params_count(const tg_params *p);   /* 0 for NULL */
const char *tg_params_name(const tg_params *p, int i);    /* borrowed (see Contracts); NULL if i is out of range */
tg_tensor *tg_params_tensor(const tg_params *p, int i);   /* borrowed (see Contracts); NULL if i is out of range */
tg_tensor *tg_params_find(const tg_params *p, const char *name);  /* borrowed; NULL if absent */

/* ---- nn: layers, as tinygrad's nn classes (tg_nn_linear is nn.Linear, ...) ----------------------------- */
/* Each layer is a struct of its tensors: _init creates them (initialized as tinygrad's nn does;
 * tg_manual_seed makes them reproducible) and owns them until _free; _forward builds the lazy output;
 * _params adds them to p as "prefix.weight", ... (the names of PyTorch's state dicts). The tensors are
 * float32 (num_batches_tracked 0-d int64, as PyTorch's) and stored by _init (it runs kernels); a size <= 0
 * is TG_ERR_ARG, and a failed _init leaves no tensor in the struct. _free drops the tensors and zeroes the
 * struct. */
typedef struct tg_nn_linear { tg_tensor *weight, *bias; } tg_nn_linear;   /* weight (out, in), bias (out) */
tg_status tg_nn_linear_init(tg_nn_linear *l, int64_t in, int64_t out, bool bias);
tg_tensor *tg_nn_linear_forward(const tg_nn_linear *l, tg_tensor *x);
tg_status tg_nn_linear_params(const tg_nn_linear *l, const char *prefix, tg_params *p);
void tg_nn_linear_free(tg_nn_linear *l);
/* tinygrad's Tensor.linear: x @ weight + bias with weight (in, out), or x * weight for a 1-d weight */
tg_tensor *tg_linear(tg_tensor *x, tg_tensor *weight, tg_tensor *bias);

/* nn.Conv2d: kernel as tinygrad's kernel_size: one value (square) or one per spatial dim (2 or 3 of them) */
typedef struct tg_nn_conv2d { tg_tensor *weight, *bias; tg_conv_opts opts; } tg_nn_conv2d;
tg_status tg_nn_conv2d_init(tg_nn_conv2d *l, int64_t cin, int64_t cout, tg_ints kernel, bool bias, tg_conv_opts o);
tg_tensor *tg_nn_conv2d_forward(const tg_nn_conv2d *l, tg_tensor *x);
tg_status tg_nn_conv2d_params(const tg_nn_conv2d *l, const char *prefix, tg_params *p);
void tg_nn_conv2d_free(tg_nn_conv2d *l);

/* nn.ConvTranspose2d: weight (cin, cout/groups, *kernel) as PyTorch; kernel as tg_nn_conv2d's */
typedef struct tg_nn_conv_transpose2d { tg_tensor *weight, *bias; tg_conv_opts opts; } tg_nn_conv_transpose2d;
tg_status tg_nn_conv_transpose2d_init(tg_nn_conv_transpose2d *l, int64_t cin, int64_t cout, tg_ints kernel, bool bias,
                                      tg_conv_opts o);
tg_tensor *tg_nn_conv_transpose2d_forward(const tg_nn_conv_transpose2d *l, tg_tensor *x);
tg_status tg_nn_conv_transpose2d_params(const tg_nn_conv_transpose2d *l, const char *prefix, tg_params *p);
void tg_nn_conv_transpose2d_free(tg_nn_conv_transpose2d *l);

/* nn.BatchNorm (BatchNorm2d): batch statistics while tg_training(), running statistics otherwise (updated in
 * training with momentum); eps 1e-5 and momentum 0.1 after _init, both fields yours to change. In training,
 * _forward assigns running_mean, running_var and num_batches_tracked lazily: realize them with the step
 * (tg_optim_step's extra). running_var takes the unbiased batch variance (PyTorch's); training needs more
 * than one value per channel (N * spatial > 1), else TG_ERR_ARG */
typedef struct tg_nn_batchnorm {
  tg_tensor *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
  double eps, momentum;
} tg_nn_batchnorm;
tg_status tg_nn_batchnorm_init(tg_nn_batchnorm *l, int64_t channels);
tg_tensor *tg_nn_batchnorm_forward(tg_nn_batchnorm *l, tg_tensor *x);
tg_status tg_nn_batchnorm_params(const tg_nn_batchnorm *l, const char *prefix, tg_params *p);  /* with running stats */
void tg_nn_batchnorm_free(tg_nn_batchnorm *l);

/* nn.LayerNorm over the last axis (of size dim, else the forward is TG_ERR_ARG), with weight and bias */
typedef struct tg_nn_layernorm { tg_tensor *weight, *bias; double eps; } tg_nn_layernorm;
tg_status tg_nn_layernorm_init(tg_nn_layernorm *l, int64_t dim, double eps);
tg_tensor *tg_nn_layernorm_forward(const tg_nn_layernorm *l, tg_tensor *x);
tg_status tg_nn_layernorm_params(const tg_nn_layernorm *l, const char *prefix, tg_params *p);
void tg_nn_layernorm_free(tg_nn_layernorm *l);

/* nn.RMSNorm over the last axis (of size dim, as tg_nn_layernorm), with weight */
typedef struct tg_nn_rmsnorm { tg_tensor *weight; double eps; } tg_nn_rmsnorm;
tg_status tg_nn_rmsnorm_init(tg_nn_rmsnorm *l, int64_t dim, double eps);
tg_tensor *tg_nn_rmsnorm_forward(const tg_nn_rmsnorm *l, tg_tensor *x);
tg_status tg_nn_rmsnorm_params(const tg_nn_rmsnorm *l, const char *prefix, tg_params *p);
void tg_nn_rmsnorm_free(tg_nn_rmsnorm *l);

/* nn.GroupNorm: tg_group_norm with weight and bias (channels); groups must divide channels */
typedef struct tg_nn_groupnorm { tg_tensor *weight, *bias; int64_t groups; double eps; } tg_nn_groupnorm;
tg_status tg_nn_groupnorm_init(tg_nn_groupnorm *l, int64_t groups, int64_t channels, double eps);
tg_tensor *tg_nn_groupnorm_forward(const tg_nn_groupnorm *l, tg_tensor *x);
tg_status tg_nn_groupnorm_params(const tg_nn_groupnorm *l, const char *prefix, tg_params *p);
void tg_nn_groupnorm_free(tg_nn_groupnorm *l);

/* nn.Embedding: weight (vocab, dim) */
typedef struct tg_nn_embedding { tg_tensor *weight; } tg_nn_embedding;
tg_status tg_nn_embedding_init(tg_nn_embedding *l, int64_t vocab, int64_t dim);
tg_tensor *tg_nn_embedding_forward(const tg_nn_embedding *l, tg_tensor *idx);
tg_status tg_nn_embedding_params(const tg_nn_embedding *l, const char *prefix, tg_params *p);
void tg_nn_embedding_free(tg_nn_embedding *l);

/* ---- nn: optimizers ------------------------------------------------------------------------------------ */
/* step() builds the update of every parameter (and its state) as lazy graph, assigns it, and realizes all
 * of it in one schedule together with `extra` tensors (the loss, say), then drops the gradients. Options are
 * taken literally (see "Options" above): start from tg_*_defaults(). A value out of range (a negative rate,
 * b1 or b2 outside [0, 1), nesterov without momentum, NaN) is refused with TG_ERR_ARG. An optimizer takes the
 * tensors of p that require a gradient when it is made (they must be float) and holds a reference to each;
 * making it runs kernels (its state is stored). */
typedef struct tg_optim tg_optim;
typedef struct tg_sgd_opts { double lr, momentum, weight_decay; bool nesterov; } tg_sgd_opts;
tg_sgd_opts tg_sgd_defaults(void);     /* tinygrad's SGD: lr 0.001, momentum 0, weight_decay 0, nesterov false */
typedef struct tg_adam_opts { double lr, b1, b2, eps, weight_decay; } tg_adam_opts;
tg_adam_opts tg_adam_defaults(void);   /* lr 0.001, b1 0.9, b2 0.999, eps 1e-8, weight_decay 0 */
tg_adam_opts tg_adamw_defaults(void);  /* the same with weight_decay 0.01 (tinygrad's AdamW) */
tg_optim *tg_sgd_new(const tg_params *p, tg_sgd_opts o);     /* weight_decay: L2 added to the gradient */
tg_optim *tg_adam_new(const tg_params *p, tg_adam_opts o);   /* weight_decay: L2 added to the gradient */
tg_optim *tg_adamw_new(const tg_params *p, tg_adam_opts o);  /* weight_decay: decoupled, lr * wd * param */
/* one step (runs kernels); a parameter without a gradient is left as it is; the gradients are dropped even
 * when it fails */
tg_status tg_optim_step(tg_optim *o, int nextra, tg_tensor *const *extra);
void tg_optim_zero_grad(tg_optim *o);                 /* drops the gradients of its parameters */
tg_status tg_optim_set_lr(tg_optim *o, double lr);   /* a finite lr >= 0, else TG_ERR_ARG */
double tg_optim_lr(const tg_optim *o);                /* the current rate; NaN for NULL */
void tg_optim_free(tg_optim *o);                      /* frees its state, drops its references (NULL is fine) */
/* learning-rate schedules: the rate for step `step` (0-based) */
/* StepLR: base * gamma^(step / step_size), the division rounding down */
double tg_lr_step(double base, int64_t step, int64_t step_size, double gamma);
/* CosineAnnealingLR: min_lr + (base - min_lr) * (1 + cos(pi * step / total)) / 2, min_lr from step total on */
double tg_lr_cosine(double base, int64_t step, int64_t total, double min_lr);
/* OneCycleLR (cosine): from max_lr / div_factor up to max_lr over pct_start of total steps, then down to
 * max_lr / div_factor / final_div_factor */
double tg_lr_onecycle(double max_lr, int64_t step, int64_t total, double pct_start, double div_factor,
                      double final_div_factor);

/* ---- nn: state (safetensors) ----------------------------------------------------------------------- */
/* writes p's tensors, realized (runs kernels), to a temporary file renamed to path: a failure (TG_ERR_IO)
 * leaves an older file at path as it was */
tg_status tg_safetensors_save(const char *path, const tg_params *p);
/* loads a file into p's tensors by name (the file is mapped, not read into a second copy). Every name of p
 * must be in the file with the same shape and dtype, and the file must hold no other names, unless
 * allow_partial: then missing and unexpected names are allowed. A malformed or truncated file is refused.
 * Errors: TG_ERR_IO (unreadable or malformed), TG_ERR_ARG (does not fit p); a failure changes no tensor.
 * The tensors take the values lazily (tg_assign): the next realize computes them. */
tg_status tg_safetensors_load(const char *path, tg_params *p, bool allow_partial);
/* every tensor of a file, as new params (names in file order), or NULL; free it with tg_params_free */
tg_params *tg_safetensors_read(const char *path);

/* ---- nn: datasets ---------------------------------------------------------------------------------- */
typedef struct tg_dataset {
  tg_tensor *x;      /* uint8 (N, 1, H, W) images, or float32 (N, F) features */
  tg_tensor *y;      /* int32 (N) labels */
  int64_t n;
} tg_dataset;
/* MNIST (fashion: Fashion-MNIST) from dir, else $TG_DATA, else ~/.cache/tgc/mnist (or fashion-mnist),
 * else /usr/share/datasets/fashion-mnist; the IDX files may be gzipped. On failure the error lists where it
 * looked and how to get the files (TG_ERR_IO). train or test may be NULL; filled ones own their tensors. */
tg_status tg_mnist_load(const char *dir, bool fashion, tg_dataset *train, tg_dataset *test);
/* scikit-learn's 8x8 digits CSV (64 pixels 0..16 then the label), gzipped or not: x float32 (N, 64). A NULL
 * path looks for digits.csv[.gz] in $TG_DATA/digits, the user cache's digits/, ../shared/data/digits */
tg_status tg_digits_load(const char *path, tg_dataset *all);
/* batch i of a shuffled epoch: the rows perm[i*batch, ...) of x and y as new tensors (copied rows); perm
 * NULL: rows in order; count is cut at the end of the data; y may be NULL (runs kernels) */
tg_status tg_dataset_batch(const tg_dataset *d, const int64_t *perm, int64_t start, int64_t count, tg_tensor **x,
                           tg_tensor **y);
/* a seeded permutation of 0..n-1 into perm (Fisher-Yates on a fixed generator: the same on every machine) */
void tg_shuffle(int64_t *perm, int64_t n, uint64_t seed);
void tg_dataset_free(tg_dataset *d);   /* drops x and y and zeroes d (NULL is fine) */

/* the file sub/name of a dataset or model: in dir when given, else $TG_DATA/sub, the user cache
 * ($XDG_CACHE_HOME/tgc/sub or ~/.cache/tgc/sub), then ../shared/data/sub; its path into out, or TG_ERR_IO with
 * an error that lists where it looked */
tg_status tg_data_find(const char *dir, const char *sub, const char *name, char *out, size_t cap);

/* ---- nn: sampling the next token from logits, seeded ---------------------------------------------- */
/* llama.cpp's sampler chain and meanings: the repetition penalty over the last repeat_last_n accepted tokens
 * (a positive logit divided by it, a negative one multiplied), then top_k, top_p, min_p, the temperature, and a
 * draw from the softmax of what is left. Candidates are ordered by logit, ties by the lower id, so the cuts are
 * exact and repeatable. The generator is the sampler's own (xoshiro256** seeded by splitmix64, plain C): the
 * same seed and the same logits give the same tokens on every machine and thread count.
 *   tg_sampler_opts o = tg_sampler_defaults();  o.temperature = 0.7;  o.seed = 42;
 *   tg_sampler *s = tg_sampler_new(o, vocab);  ... tg_sampler_accept(s, prompt[i]) ...
 *   int32_t next = tg_sampler_sample(s, logits); */
typedef struct tg_sampler_opts {
  double temperature;       /* <= 0: greedy (the highest logit after the penalty, ties the lowest id); 0.8 */
  int64_t top_k;            /* keep the k highest logits; <= 0: all; 40 */
  double top_p;             /* keep the fewest most likely tokens whose probabilities reach p; >= 1: off; 0.95 */
  double min_p;             /* keep tokens with probability >= min_p * the highest's; <= 0: off; 0.05 */
  double repeat_penalty;    /* > 0; 1: off (default) */
  int64_t repeat_last_n;    /* the penalty's window of accepted tokens, 0..65536; 0: off; 64 */
  uint64_t seed;            /* the generator's seed; 0 */
} tg_sampler_opts;
tg_sampler_opts tg_sampler_defaults(void);   /* llama.cpp's defaults (above) */
typedef struct tg_sampler tg_sampler;
/* a sampler over vocab token ids (>= 1); NULL with TG_ERR_ARG naming a value out of range */
tg_sampler *tg_sampler_new(tg_sampler_opts o, int64_t vocab);
/* the next token drawn from logits (vocab floats, not modified), also accepted (tg_sampler_accept); -1 with
 * TG_ERR_ARG for a NaN logit or when every logit is -inf */
int32_t tg_sampler_sample(tg_sampler *s, const float *logits);
/* what tg_sampler_sample draws from: the candidates left after the penalty and cuts, most likely first, into ids
 * and probs (vocab entries each, either may be NULL), probabilities at the temperature (greedy: one token, 1.0);
 * returns their count, -1 with TG_ERR_ARG as tg_sampler_sample. Draws nothing, accepts nothing. */
int64_t tg_sampler_probs(tg_sampler *s, const float *logits, int32_t *ids, float *probs);
/* records token (the prompt's, or one chosen elsewhere) in the penalty's window; TG_ERR_ARG outside the vocab */
tg_status tg_sampler_accept(tg_sampler *s, int32_t token);
tg_status tg_sampler_reset(tg_sampler *s);   /* empties the window and restarts the generator from the seed */
void tg_sampler_free(tg_sampler *s);         /* NULL is fine */

/* ---- nn: Llama from a llama2.c checkpoint, decoded one token per step ------------------------------- */
/* The checkpoint is llama2.c's legacy format (a 7 int32 header, then float32 weights in its order), checked
 * against its size. Each step is one tg_jit replay (JIT=0: run eagerly) whose position is a tg_variable:
 * RoPE, the KV-cache writes and the attention mask read it, so one capture serves every position. */
typedef struct tg_llama_config {
  int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  bool shared_classifier;   /* the classifier is the token embedding */
} tg_llama_config;
typedef struct tg_llama tg_llama;
/* max_seq (0: the model's seq_len) is the length of the KV caches and the number of positions; NULL on error
 * (TG_ERR_IO for the file); runs kernels */
tg_llama *tg_llama_load(const char *path, int64_t max_seq);
tg_llama_config tg_llama_config_of(const tg_llama *m);   /* the header's values (all 0 for NULL) */
int64_t tg_llama_max_seq(const tg_llama *m);             /* -1 for NULL */
/* the logits (vocab_size floats) after token at position pos; positions come in order from 0, each once
 * (else TG_ERR_ARG); runs kernels */
tg_status tg_llama_step(tg_llama *m, int32_t token, int64_t pos, float *logits);
tg_status tg_llama_reset(tg_llama *m);   /* empties the caches (runs kernels): the next position is 0 */
int tg_llama_kernels(const tg_llama *m);  /* kernels of the captured step (0 before the capture) */
void tg_llama_free(tg_llama *m);          /* NULL is fine */
/* A tokenizer: text to token ids and back. Two kinds: SentencePiece-style (llama2.c's tokenizer file, a GGUF
 * with tokenizer.ggml.model "llama") and byte-level BPE (a GGUF with model "gpt2"). */
typedef struct tg_tokenizer tg_tokenizer;
/* llama2.c's tokenizer file (int32 max token length, then per token a float32 score, an int32 length, bytes);
 * vocab_size: the model's; the file must hold exactly that many tokens (else TG_ERR_IO); NULL on error */
tg_tokenizer *tg_tokenizer_load(const char *path, int64_t vocab_size);
/* text to tokens: BOS first if bos (and the vocabulary has one), EOS last if eos. SPM: a space prefix, code
 * points (or byte tokens, <unk> when the vocabulary has none), then merges of the best-scoring pair, as
 * llama2.c's encode and llama.cpp do it. BPE: the pre-tokenizer's words, each merged by rank. Text spelling
 * a control token is plain text (a user-defined token's text becomes that token, as in llama.cpp); invalid
 * UTF-8 is kept byte for byte. Needs cap >= strlen(text) + 3 (more only for SPM text holding one-byte special
 * tokens, a space prefix after each: TG_ERR_ARG says how many); returns the count, negative (a tg_status) on
 * error */
int64_t tg_tokenizer_encode(const tg_tokenizer *t, const char *text, bool bos, bool eos, int32_t *tokens, int64_t cap);
/* the text of token following prev: SPM drops the space prefix after BOS and gives <0xNN> as that byte; BPE
 * gives the bytes the token stands for, perhaps part of a UTF-8 sequence (fine when streaming); control
 * tokens give their text ("<s>", "<|im_end|>"). Owned by t (see Contracts); NULL for a token outside the
 * vocabulary */
const char *tg_tokenizer_decode(const tg_tokenizer *t, int32_t prev, int32_t token);
int64_t tg_tokenizer_vocab(const tg_tokenizer *t);   /* -1 for NULL */
void tg_tokenizer_free(tg_tokenizer *t);             /* NULL is fine */
typedef struct tg_gguf tg_gguf;  /* a GGUF reader (see "GGUF files" below) */
/* a tokenizer from a GGUF file's tokenizer.ggml.* metadata: model "llama" (SentencePiece-style: token scores,
 * byte fallback <0xNN>, add_space_prefix) or "gpt2" (byte-level BPE with tokenizer.ggml.merges and the
 * pre-tokenizer tokenizer.ggml.pre names, as llama.cpp reads them: "llama-bpe"/"llama3"/"llama-v3",
 * "qwen2"/"deepseek-r1-qwen", "gpt-2"/"gpt2", "default" or none: llama.cpp's default). NULL with
 * TG_ERR_IO/TG_ERR_ARG naming what is missing or unsupported. Independent of g afterwards (copies). */
tg_tokenizer *tg_tokenizer_from_gguf(const tg_gguf *g);
/* as tg_tokenizer_encode, but text that spells a special (control/user-defined) token, e.g. "<|im_start|>",
 * becomes that token (chat templates need this; the longest one where several begin at the same byte); no EOS */
int64_t tg_tokenizer_encode_special(const tg_tokenizer *t, const char *text, bool bos, int32_t *tokens, int64_t cap);
/* the BOS id, -1 if none (llama2.c files, and SPM GGUFs without tokenizer.ggml.bos_token_id as in llama.cpp: 1) */
int32_t tg_tokenizer_bos(const tg_tokenizer *t);
int32_t tg_tokenizer_eos(const tg_tokenizer *t);   /* the EOS id, -1 if none (llama2.c files, SPM GGUFs: 2) */
/* whether a prompt starts with BOS: tokenizer.ggml.add_bos_token, else llama.cpp's default (SPM and llama3:
 * yes; llama2.c files: yes); false for NULL */
bool tg_tokenizer_add_bos(const tg_tokenizer *t);
bool tg_tokenizer_is_eog(const tg_tokenizer *t, int32_t token);  /* ends generation: EOS, EOT, <|im_end|>, ... */
/* a control or user-defined token (a chat marker, BOS, EOS: text a user would rather not see) */
bool tg_tokenizer_is_special(const tg_tokenizer *t, int32_t token);
/* the id of a token's text, -1 if none (SPM: "▁" or " " for a space; BPE: the bytes, " the", not "Ġthe") */
int32_t tg_tokenizer_find(const tg_tokenizer *t, const char *piece);

/* ---- GGUF files (ggml's and llama.cpp's format, versions 2 and 3) ------------------------------------ */
/* tg_gguf_open maps the file read-only and checks all of it before it returns: the header, every metadata
 * key and value, every tensor's name, dimensions, type and data range, each against the file's size (a
 * malformed, truncated or hostile file is TG_ERR_IO with what is wrong and where). Keys are unique, and so
 * are tensor names. Names, keys and strings it returns are borrowed: g's, valid until tg_gguf_close(g). The
 * mapping lives until g and every tensor made from it are freed. */
typedef struct tg_gguf tg_gguf;
/* the type of a metadata value, numbered as in the file; TG_GGUF_NONE: no such key */
typedef enum tg_gguf_type {
  TG_GGUF_NONE = -1,
  TG_GGUF_UINT8 = 0, TG_GGUF_INT8, TG_GGUF_UINT16, TG_GGUF_INT16, TG_GGUF_UINT32, TG_GGUF_INT32,
  TG_GGUF_FLOAT32, TG_GGUF_BOOL, TG_GGUF_STRING, TG_GGUF_ARRAY, TG_GGUF_UINT64, TG_GGUF_INT64, TG_GGUF_FLOAT64
} tg_gguf_type;
tg_gguf *tg_gguf_open(const char *path);        /* a new reader (free it with tg_gguf_close), or NULL */
void tg_gguf_close(tg_gguf *g);                 /* NULL is fine; tensors made from g stay valid */
uint32_t tg_gguf_version(const tg_gguf *g);     /* the file's version, 2 or 3; 0 for NULL */
const char *tg_gguf_type_name(tg_gguf_type type);  /* "uint8", ..., "float64"; "?" for a bad value (static) */
int64_t tg_gguf_num_kv(const tg_gguf *g);       /* the metadata key/value pairs, in file order; -1 for NULL */
const char *tg_gguf_key(const tg_gguf *g, int64_t i);  /* key i (0 <= i < num_kv), borrowed; NULL out of range */
tg_gguf_type tg_gguf_kv_type(const tg_gguf *g, const char *key);  /* the type of key's value; TG_GGUF_NONE if absent */
/* Typed getters: TG_ERR_ARG naming the key when it is absent or its value has another type.
 * get_int takes any integer type (not bool), converted; a uint64 past INT64_MAX is refused */
tg_status tg_gguf_get_int(const tg_gguf *g, const char *key, int64_t *out);
tg_status tg_gguf_get_float(const tg_gguf *g, const char *key, double *out);  /* float32, float64 or an integer */
tg_status tg_gguf_get_bool(const tg_gguf *g, const char *key, bool *out);     /* a bool */
/* a string, NUL-terminated (borrowed); *len (when len is not NULL) its length in bytes, which may count NULs
 * inside it; NULL with TG_ERR_ARG when absent or not a string */
const char *tg_gguf_get_string(const tg_gguf *g, const char *key, size_t *len);
/* an array's element type and length (either pointer may be NULL); arrays of arrays are refused by open */
tg_status tg_gguf_get_array(const tg_gguf *g, const char *key, tg_gguf_type *elem_type, int64_t *len);
/* element i (0 <= i < len) of an array, converted as the getters above do */
tg_status tg_gguf_array_int(const tg_gguf *g, const char *key, int64_t i, int64_t *out);
tg_status tg_gguf_array_float(const tg_gguf *g, const char *key, int64_t i, double *out);  /* as get_float */
tg_status tg_gguf_array_bool(const tg_gguf *g, const char *key, int64_t i, bool *out);     /* as get_bool */
const char *tg_gguf_array_string(const tg_gguf *g, const char *key, int64_t i, size_t *len);  /* as get_string */
int64_t tg_gguf_num_tensors(const tg_gguf *g);  /* the tensors, in file order; -1 for NULL */
/* a tensor as the file describes it */
typedef struct tg_gguf_info {
  const char *name;            /* borrowed */
  uint32_t type;               /* ggml's type number: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 12 Q4_K, 30 BF16, ... */
  const char *type_name;       /* ggml's name of it: "F32", "Q4_0", ... (static) */
  bool supported;              /* tg_gguf_tensor reads this type */
  int ndim;
  int64_t shape[TG_MAX_DIMS];  /* tgc's order: the file's dimensions reversed (ggml's ne[0], a row, is last) */
  uint64_t offset;             /* the first byte of its data in the file */
  uint64_t nbytes;             /* the bytes of its data */
} tg_gguf_info;
tg_status tg_gguf_tensor_info(const tg_gguf *g, int64_t i, tg_gguf_info *info);  /* tensor i (0 <= i < num_tensors) */
int64_t tg_gguf_find_tensor(const tg_gguf *g, const char *name);  /* its index; -1 if absent (no error set) */
/* tensor name as a new lazy tensor of info's shape, on the mapping (no copy; on a GPU device, copied there):
 * F32, F16, BF16, F64, I8, I16, I32, I64 as float32, float16, bfloat16, float64, int8, ... as they are; the
 * block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K as float32, an expression over the quantized
 * bytes that fuses into the kernels that read it (a matmul with a Q4_0 weight reads 4.5 bits per weight).
 * NULL with TG_ERR_ARG for an absent name or a type tgc does not read (named) */
tg_tensor *tg_gguf_tensor(tg_gguf *g, const char *name);

/* ---- GGUF writer (a file tg_gguf_open, llama.cpp and the gguf package read) ---------------------------- */
/* Metadata and tensors are collected in memory (tensors quantized when added), then written by
 * tg_gguf_writer_save as GGUF version 3 with alignment 32, through a temporary file renamed to path. Keys and
 * tensor names are unique (a repeat is TG_ERR_ARG); values are copied. */
typedef struct tg_gguf_writer tg_gguf_writer;
/* ggml's tensor types the writer produces, numbered as ggml numbers them (tg_gguf_info.type) */
typedef enum tg_ggml_type {
  TG_GGML_F32 = 0, TG_GGML_F16 = 1, TG_GGML_Q4_0 = 2, TG_GGML_Q4_1 = 3, TG_GGML_Q5_0 = 6, TG_GGML_Q5_1 = 7,
  TG_GGML_Q8_0 = 8, TG_GGML_BF16 = 30
} tg_ggml_type;
tg_gguf_writer *tg_gguf_writer_new(void);       /* an empty writer, or NULL */
void tg_gguf_writer_free(tg_gguf_writer *w);    /* NULL is fine */
/* key = an integer of type (TG_GGUF_UINT8 .. TG_GGUF_INT64; TG_ERR_ARG when value does not fit it) */
tg_status tg_gguf_set_int(tg_gguf_writer *w, const char *key, tg_gguf_type type, int64_t value);
tg_status tg_gguf_set_float(tg_gguf_writer *w, const char *key, tg_gguf_type type, double value);  /* FLOAT32/64 */
tg_status tg_gguf_set_bool(tg_gguf_writer *w, const char *key, bool value);       /* key = a bool */
tg_status tg_gguf_set_string(tg_gguf_writer *w, const char *key, const char *s);  /* NUL-terminated */
/* key = an array of n integers of elem_type (each must fit it); v may be NULL when n is 0 */
tg_status tg_gguf_set_array_int(tg_gguf_writer *w, const char *key, tg_gguf_type elem_type, const int64_t *v,
                                int64_t n);
/* key = an array of n floats stored as elem_type, FLOAT32 or FLOAT64 */
tg_status tg_gguf_set_array_float(tg_gguf_writer *w, const char *key, tg_gguf_type elem_type, const double *v,
                                  int64_t n);
/* key = an array of n NUL-terminated strings */
tg_status tg_gguf_set_array_string(tg_gguf_writer *w, const char *key, const char *const *v, int64_t n);
/* tensor name of shape (tgc's order: the last axis is ggml's row) from ndim-dim float32 data, stored as type:
 * F32, F16 and BF16 rounded to nearest even, the block formats quantized as ggml's reference quantizers
 * (quantize_row_*_ref; the gguf package's gguf.quants.quantize gives the same bytes). Sizes may be 0; at most
 * 2^40 elements; a block format needs the last axis a multiple of 32 (TG_ERR_ARG) */
tg_status tg_gguf_add_tensor(tg_gguf_writer *w, const char *name, int ndim, const int64_t *shape,
                             const float *data, tg_ggml_type type);
tg_status tg_gguf_writer_save(tg_gguf_writer *w, const char *path);   /* TG_ERR_IO naming path on failure */
/* a llama2.c checkpoint and its tokenizer.bin as a GGUF file of architecture "llama", as llama.cpp's
 * convert-llama2c-to-ggml writes it (hyperparameters; the SentencePiece vocabulary with scores and token
 * types: ids 0, 1, 2 named <unk>, <s>, </s>, spaces in pieces written as U+2581; tensors token_embd.weight,
 * blk.N.attn_q.weight, ..., output.weight unless the classifier is shared);
 * the 2-d weights as type (F32, F16, BF16, Q8_0, Q4_0, ...; with a block format, a weight whose rows are not
 * whole blocks of 32 stays F32), the norms F32. Q and K rows keep llama2.c's order, which is llama.cpp's for
 * "llama" (pairs of adjacent elements rotated) */
tg_status tg_llama2c_to_gguf(const char *model_bin, const char *tokenizer_bin, const char *out_gguf,
                             tg_ggml_type type);

/* ---- nn: language models from GGUF ----------------------------------------------------------------- */
/* A decoder-only transformer from a GGUF file's metadata and tensors, as tinygrad's llm runner: llama (llama
 * 2 and 3, TinyLlama, stories; RoPE on adjacent pairs, llama3 frequency factors from rope_freqs.weight, linear
 * scaling from llama.rope.scaling.*), qwen2 (q/k/v biases, RoPE on halves: neox), qwen3 (q/k RMSNorm per head,
 * neox RoPE, head_dim from attention.key_length). Grouped-query attention, SwiGLU, RMSNorm with the file's eps,
 * the file's RoPE base; no output.weight: the output is token_embd. Quantized weights stay quantized (read
 * through tg_gguf_tensor); the embedding reads each token's row alone, dequantizing only that row. The KV caches
 * (max_seq, kv_dim) per layer are float32. tg_llm_step is one tg_jit replay (JIT=0: eager) whose position and
 * token are tg_variables; tg_llm_prefill is one batched forward per 256 tokens with a causal mask, padded to 8,
 * 16, .., 256 rows (prompts of any length reuse the kernels of those six sizes; near max_seq a chunk runs
 * unpadded, compiling its own). Attention masks the cache rows past the position, and the kernels' loops over
 * keys end at the position (a bound computed from the mask at run time), so a step's attention costs O(pos);
 * only cheap elementwise passes over all max_seq rows remain. llama2.c checkpoints (tg_llama_*) run this code. */
typedef struct tg_llm tg_llm;
typedef struct tg_llm_config {
  char arch[32];                 /* "llama", "qwen2", "qwen3" */
  int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size;
  int64_t context;               /* the file's context length */
  int64_t max_seq;               /* this model's KV cache length (positions 0 .. max_seq-1) */
  double rope_base, norm_eps;
  bool rope_neox;                /* RoPE on (x[i], x[i + head_dim/2]) instead of (x[2i], x[2i+1]) */
  bool tied_output;              /* the output projection is token_embd */
} tg_llm_config;
/* the GGUF file at path (opened and closed here: the weights keep its mapping alive); max_seq 0: the file's
 * context length capped at 4096, else at most the context length; NULL on error (TG_ERR_IO for the file,
 * TG_ERR_ARG for an architecture or tensor tgc does not run, named); runs kernels (the caches are zeroed) */
tg_llm *tg_llm_load(const char *path, int64_t max_seq);
/* as tg_llm_load from an open reader; g may be closed afterwards (the tensors keep the mapping) */
tg_llm *tg_llm_from_gguf(tg_gguf *g, int64_t max_seq);
tg_llm_config tg_llm_config_of(const tg_llm *m);   /* all 0 for NULL */
int64_t tg_llm_pos(const tg_llm *m);                /* the next position (tokens in the cache); -1 for NULL */
/* tokens[0..n) at positions pos .. pos+n-1, batched (TG_ERR_ARG past max_seq or a token outside the
 * vocabulary, nothing run); logits (vocab_size floats, NULL: not wanted) of the last token; runs kernels. A
 * failure while running leaves the chunks already done in the cache (tg_llm_pos says how far) */
tg_status tg_llm_prefill(tg_llm *m, const int32_t *tokens, int64_t n, float *logits);
/* one token at the next position: its logits (vocab_size floats); runs kernels */
tg_status tg_llm_step(tg_llm *m, int32_t token, float *logits);
tg_status tg_llm_reset(tg_llm *m);          /* empties the caches (runs kernels): the next position is 0 */
int tg_llm_kernels(const tg_llm *m);        /* kernels of the captured decode step (0 before the capture) */
void tg_llm_free(tg_llm *m);                /* NULL is fine */

/* ---- arrays as .npy files (numpy's format, version 1.0-3.0) ------------------------------------------- */
/* reads a .npy file (little- or big-endian; C or Fortran order; bool, ints, uints, float16/32/64, bfloat16 as
 * ml_dtypes writes it as '<V2' is refused): a new realized tensor, or NULL (TG_ERR_IO: unreadable or malformed,
 * TG_ERR_ARG: a dtype tgc lacks, named) */
tg_tensor *tg_npy_load(const char *path);
/* writes t (realized: runs kernels) as a C-order little-endian .npy file (version 1.0), through a temporary
 * file renamed to path */
tg_status tg_npy_save(const char *path, tg_tensor *t);

/* ---- ONNX models (tinygrad's OnnxRunner): a graph of lazy tensors ---------------------------------- */
/* tg_onnx_load parses the protocol buffer (bounds-checked; a malformed, truncated or hostile file is
 * TG_ERR_IO with what is wrong), reads the initializers (raw_data, the typed fields, or external data files
 * beside the model, mapped), and checks every node's operator against the ones tgc implements at the
 * model's opset: an unsupported one fails here (TG_ERR_ARG naming the operator, its domain and opset),
 * never in tg_onnx_run. */
typedef struct tg_onnx tg_onnx;
tg_onnx *tg_onnx_load(const char *path);   /* a new model (free it with tg_onnx_free), or NULL, as above */
/* as tg_onnx_load from bytes in memory (copied as needed); dir: where external data files are (NULL: a model
 * with external data is refused) */
tg_onnx *tg_onnx_load_memory(const void *data, size_t size, const char *dir);
void tg_onnx_free(tg_onnx *m);                /* NULL is fine */
/* a graph input or output: its name, dtype and shape; a dimension named in the file (a batch size "N") has
 * size -1 and its name in dim_names, an unknown one -1 and NULL; names are m's (see Contracts); dtype is
 * TG_DTYPE_COUNT when the file gives no type (any dtype is then taken) */
typedef struct tg_onnx_io {
  const char *name;
  tg_dtype dtype;
  int ndim;                             /* -1: the file gives no shape */
  int64_t shape[TG_MAX_DIMS];
  const char *dim_names[TG_MAX_DIMS];
} tg_onnx_io;
int tg_onnx_num_inputs(const tg_onnx *m);     /* the graph's inputs that are not initializers; -1 for NULL */
int tg_onnx_num_outputs(const tg_onnx *m);    /* -1 for NULL */
tg_status tg_onnx_input(const tg_onnx *m, int i, tg_onnx_io *info);   /* input i (0 <= i < num_inputs) */
tg_status tg_onnx_output(const tg_onnx *m, int i, tg_onnx_io *info);  /* output i (0 <= i < num_outputs) */
/* runs the graph on n inputs given by name (every input must be given, except those an initializer
 * defaults): fills outputs[0 .. tg_onnx_num_outputs) with new lazy tensors (the caller's: realize, chain or
 * run them under tg_jit). Each input's dtype must be the declared one and its shape must fit the declared
 * one; a named dimension takes its size from the first input that has it and must agree everywhere else
 * (TG_ERR_ARG naming the input, the dimension and both sizes). May run kernels (values the graph needs on
 * the host, such as a Reshape's shape computed by the graph; so inside a tg_jit step being captured only
 * graphs whose such values are constants run). Outputs may read the model's weights where they lie in its
 * mapped file, without a copy: they hold the mapping, so they stay valid after tg_onnx_free. */
tg_status tg_onnx_run(tg_onnx *m, int n, const char *const *names, tg_tensor *const *inputs,
                      tg_tensor **outputs);
/* a serialized TensorProto (the .pb files of ONNX's backend tests) as a new realized tensor, or NULL */
tg_tensor *tg_onnx_read_tensor(const char *path);
tg_tensor *tg_onnx_tensor_from_memory(const void *data, size_t size);  /* as tg_onnx_read_tensor, from bytes */

/* ---- JIT: capture a step once, replay its kernels ------------------------------------------------------ */
/* A step reads nin realized input tensors and returns nout new tensors in out (owned as any new tensor). The
 * first tg_jit_call runs it normally, the second runs it and captures every kernel it launches with its
 * buffers, later calls replay those kernels with the new inputs' buffers: no graph building, scheduling,
 * compiling or allocating. Parameters updated with tg_assign are written in place, so a training step
 * replays. Inputs must keep the captured shapes and dtypes; reading tensor data to the host inside a step
 * being captured is refused (its value would be frozen into the replay). Random numbers drawn inside a
 * captured step take fresh counters on every replay, exactly as the step run eagerly would. The step's
 * intermediate buffers share one arena placed by lifetime (DEBUG=1 prints the bytes before and after). A step
 * may copy between devices (tg_to) and use sharded tensors (tg_shard): its copies are captured as launches of
 * their own and replayed in order with the kernels; the arena holds the default device's intermediates. Its
 * inputs and outputs are whole tensors: a sharded one is TG_ERR_ARG at the capture (shard inputs inside the
 * step, return tg_to of a sharded result). */
typedef struct tg_jit tg_jit;
typedef tg_status (*tg_jit_fn)(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out);
tg_jit *tg_jit_new(tg_jit_fn fn, void *ctx, int nin, int nout);   /* fn is called with ctx; NULL on error */
/* realizes in, then runs, captures or replays the step (runs kernels). out[i] are new tensors; after a replay
 * they read the JIT's output buffers, which the next call overwrites */
tg_status tg_jit_call(tg_jit *j, tg_tensor *const *in, tg_tensor **out);
int tg_jit_kernels(const tg_jit *j);   /* kernels captured (0 before the capture) */
/* bytes of the captured step's intermediate buffers on their own (before) and in the planned arena (after);
 * TG_ERR_ARG before the capture */
tg_status tg_jit_memory(const tg_jit *j, size_t *before, size_t *after);
void tg_jit_free(tg_jit *j);   /* NULL is fine; tensors it returned stay valid */

/* ---- symbolic integers: values bound at run time ---------------------------------------------------- */
/* A variable (tinygrad's Variable) is an integer in [min, max] that kernels read when they run: binding a
 * new value changes what the next realize or JIT replay computes and compiles nothing. Use it as a 0-d
 * int32 tensor (masks, positions) or as the offset of a window along one axis (a KV cache's position).
 * Shapes stay static: a window has a fixed length at a variable place. Bind before tg_jit_call, not in the
 * step. A value realized before a bind keeps the value it had; graphs realized after see the new one. */
typedef struct tg_variable tg_variable;
/* bound to min; min <= max, both in the int32 range; NULL on error */
tg_variable *tg_variable_new(const char *name, int64_t min, int64_t max);
tg_status tg_variable_bind(tg_variable *v, int64_t value);                   /* refused outside [min, max] */
int64_t tg_variable_value(const tg_variable *v);   /* the bound value (0 for NULL) */
const char *tg_variable_name(const tg_variable *v);  /* borrowed (see Contracts): at most 31 bytes of the name */
void tg_variable_free(tg_variable *v);             /* NULL is fine */
tg_tensor *tg_variable_tensor(tg_variable *v);   /* a new 0-d int32 tensor reading the bound value */
/* t[..., start:start+len, ...] along axis (needs min >= 0 and max + len <= the axis' size) */
tg_tensor *tg_shrink_at(tg_tensor *t, int axis, tg_variable *start, int64_t len);
/* zeros of extent size along axis with t placed from start on (needs min >= 0 and max + t's extent <= size) */
tg_tensor *tg_pad_at(tg_tensor *t, int axis, tg_variable *start, int64_t size);
/* dst[..., start:start+len, ...] = src along axis (src: dst's shape with len on axis, dst's dtype; min >= 0), in
 * place at the next realize of dst: its kernel runs over src only (a KV cache takes one row per step) */
tg_status tg_assign_at(tg_tensor *dst, int axis, tg_variable *start, tg_tensor *src);

/* ---- engine statistics, for tests and tools --------------------------------------------------------- */
typedef struct tg_stats {
  uint64_t kernels_run;       /* kernels launched by tg_realize (tg_jit replays are not counted) */
  uint64_t kernels_compiled;  /* C compiler invocations */
  uint64_t disk_cache_hits;   /* kernels loaded from the on-disk cache */
  uint64_t schedules;         /* tg_realize calls that scheduled work */
  uint64_t schedules_cached;  /* of those, the ones whose schedule came from the cache: a graph of the same
                               * structure (ops, shapes, dtypes, over other buffers) was scheduled before */
  uint64_t buffers_allocated;
  uint64_t uops_live;         /* interned IR nodes alive now */
} tg_stats;
tg_stats tg_get_stats(void);          /* the counters since the process started */
uint64_t tg_kernel_count_last(void);  /* kernels the last realize ran */
int tg_num_threads(void);            /* threads of the CPU pool */
/* frees caches and unreferenced IR now (it also happens on its own); returns TG_OK */
tg_status tg_collect(void);

/* ---- memory: what a device holds, and a limit (torch.cuda.memory_allocated and friends) --------------- */
/* Counted: every buffer tgc allocates on the device (realized tensors, optimizer state, JIT arenas) until it
 * is freed. Not counted: memory tgc does not own (tg_from_blob on the CPU, mapped files). A device name NULL is
 * the default device (DEV). */
typedef struct tg_memory_info {
  size_t in_use;   /* bytes of live buffers on the device, JIT arenas included */
  size_t arenas;   /* of in_use: the arenas of captured JIT steps */
  size_t cached;   /* freed buffers kept for reuse (not in in_use); tg_memory_empty_cache gives them back */
  size_t peak;     /* the most in_use since the process started or tg_memory_reset_peak */
  size_t limit;    /* the device's limit in bytes (0: none) */
} tg_memory_info;
tg_status tg_memory(const char *device, tg_memory_info *out);   /* fills *out (zeroed on error) */
tg_status tg_memory_reset_peak(const char *device);            /* peak = in_use now */
tg_status tg_memory_empty_cache(const char *device);           /* frees the cached buffers */
/* most bytes the device may hold (0: no limit; the default is TG_MEMORY_LIMIT, e.g. 512M, for every device).
 * An allocation that would pass it empties the cache, then fails with TG_ERR_NOMEM naming the request, the
 * limit and what is in use; the realize that asked runs nothing, and every existing tensor stays usable. */
tg_status tg_memory_set_limit(const char *device, size_t bytes);

/* ---- distributed: data parallelism over MPI (src/dist/) ------------------------------------------------ */
/* Several processes, on one machine or many, each run the same program under an MPI launcher
 * (`mpirun -np 2 prog`, README) and exchange tensors. Built only when MPI was found at build time (Open MPI:
 * libopenmpi-dev); otherwise tg_dist_init fails with TG_ERR_DEVICE saying so, and the rest as below.
 * Collectives: every rank calls the same ones in the same order with tensors of one dtype and shape; a header
 * swapped first refuses a mismatch on every rank (TG_ERR_ARG naming both ranks' dtypes and shapes). Each
 * waits for its peers at most the timeout (tg_dist_set_timeout, else TG_DIST_TIMEOUT seconds, else 60;
 * counted from when its own tensor is computed; a slower peer may still be computing or compiling): a
 * peer that exited or hangs is TG_ERR_IO naming the operation, the peer and the seconds waited, never a hang.
 * After such a failure every collective fails (the ranks are out of step): finalize and exit. A collective
 * realizes its tensor (runs kernels) and is refused inside a tg_jit step being captured. */
/* joins the job the launcher started (MPI_Init unless the program did it); again: TG_OK. Not started by a
 * launcher: one rank (size 1), MPI untouched, and the collectives return at once. TG_ERR_DEVICE without MPI */
tg_status tg_dist_init(void);
bool tg_dist_available(void);   /* whether the library was built with MPI */
int tg_dist_rank(void);         /* this process's rank, 0..size-1 (0 before tg_dist_init) */
int tg_dist_size(void);         /* the number of ranks (1 before tg_dist_init) */
typedef enum tg_dist_op {
  TG_DIST_SUM,   /* the sum over the ranks (integers wrap; bool: logical or) */
  TG_DIST_MEAN   /* the sum divided by the size (integers: rounded toward zero, 64-bit ones from the wrapped sum; not bool) */
} tg_dist_op;
/* t takes the sum (or mean) of its values on every rank, in place (its buffer is overwritten; tensors viewing
 * that buffer see it too). Every rank gets the same bits: element i is summed in rank order 0..n-1 (float16
 * and bfloat16 in float32, rounded once), whatever the timing. Any dtype; a size-0 tensor only checks shapes */
tg_status tg_dist_all_reduce(tg_tensor *t, tg_dist_op op);
/* t takes root's value on every rank, in place; 0 <= root < size, the same on every rank */
tg_status tg_dist_broadcast(tg_tensor *t, int root);
tg_status tg_dist_barrier(void);   /* returns when every rank has called it (or fails after the timeout) */
/* leaves MPI (MPI_Finalize if tg_dist_init called MPI_Init; not after a failed collective, which may leave
 * messages in flight); TG_OK, also when never initialized. MPI cannot start again in the process */
tg_status tg_dist_finalize(void);
tg_status tg_dist_set_timeout(double seconds);  /* the wait limit of every later collective; > 0, else TG_ERR_ARG */
double tg_dist_timeout(void);                   /* the wait limit in seconds */

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
