/* tensor.h — the frontend's internals: the tensor handle, its lifetime, and the helpers the op files share.
 *
 * A tensor is a handle on one node of the lazy UOp graph. Ops build new nodes; tg_realize (engine/)
 * replaces a tensor's node by the BUFFER that holds its value.
 */
#ifndef TG_TENSOR_H
#define TG_TENSOR_H

#include "tg.h"
#include "uop/uop.h"

struct tg_tensor {
  int refcnt;
  int scope;             /* depth of the scope that owns a reference, 0: the caller owns it */
  uop *u;                /* the lazy value; its shape and dtype are the tensor's */
  bool requires_grad;
  tg_tensor *grad;       /* owned reference, NULL if none */
  uop *assign_target;    /* the stored value tg_assign replaced: the next realize writes into its buffer */
  tg_tensor *prev, *next; /* every live tensor, the roots of the collector (library lock) */
  const void *owner;     /* the thread that made it (tensor_is_own) */
};

/* Threads: a tensor is used by one thread at a time (the caller synchronizes, tg.h). That thread writes u,
 * assign_target, requires_grad, grad and the list links with the library lock held (uop.h), and reads them
 * without it; other threads read them (the collector, a realize looking for shared buffers, a backward
 * looking for tensors that require a gradient) only with the lock held. */

/* a new tensor on node u (NULL if u is NULL); owned as tg.h says */
tg_tensor *tensor_new(uop *u);
/* a new tensor owned by the caller alone, never by a scope (gradients, kept state) */
tg_tensor *tensor_new_unscoped(uop *u);
/* takes t out of whatever scope owns it: the caller owns it now */
tg_tensor *tensor_unscope(tg_tensor *t);
/* lazy's value, realized into a buffer of its own, owned by the caller (lazy is freed). State that is
 * written in place (optimizer moments, running statistics, caches) needs one: equal graphs are one node, so
 * tg_contiguous(tg_zeros(...)) of two tensors would share one buffer until the first write copies it. */
tg_tensor *tensor_own(tg_tensor *lazy);
/* a tensor on memory the caller owns, as tg_from_blob, but owned by the caller alone (never by a scope):
 * on_free(ctx) is called once when the storage is dropped, and also when this call fails (so one
 * reference to the memory always passes in) */
tg_tensor *tensor_wrap_memory(tg_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes,
                              void (*on_free)(void *ctx), void *ctx);
/* every live tensor, of every thread, for the engine (with the library lock held) */
tg_tensor *tensor_live_first(void);
/* whether the calling thread made t (another thread's tensors on a node may be in use there now) */
bool tensor_is_own(const tg_tensor *t);

/* graph builders with shape checks; op names the public call for error messages */
uop *mk_reshape(uop *x, int ndim, const int64_t *shape);
uop *mk_expand(uop *x, int ndim, const int64_t *shape);
uop *mk_permute(uop *x, const int *order);
uop *mk_pad(uop *x, const int64_t *pads);       /* zero padding */
uop *mk_shrink(uop *x, const int64_t *bounds);
uop *mk_flip(uop *x, const bool *axes);
/* x[..., off:off+len, ...] along axis, off an int32 scalar node (a variable, variable.c) */
uop *mk_shrink_at(uop *x, int axis, uop *off, int64_t len);
/* zeros of extent size along axis with x placed from off on */
uop *mk_pad_at(uop *x, int axis, uop *off, int64_t size);
uop *mk_reduce(uop *x, uop_op op, const bool *axes);  /* keeps reduced axes as size 1 */
uop *mk_const(tg_dtype dt, double v, int ndim, const int64_t *shape);  /* broadcast constant */
uop *mk_alu(uop_op op, tg_dtype dt, int nsrc, uop *const *src);  /* same shapes required */
uop *mk_cast(uop *x, tg_dtype dt);
uop *mk_buffer(tg_dtype dt, int64_t numel, void *buf);  /* a BUFFER node (1-d); buf may be NULL */
uop *mk_iota(tg_dtype dt, int64_t n);
uop *mk_const_like(uop *x, double v);            /* v broadcast to x's shape and dtype */
uop *mk_unary(uop_op op, uop *x);                 /* x's dtype */
uop *mk_binary(uop_op op, uop *a, uop *b);        /* comparisons give bool, else a's dtype */
uop *mk_where(uop *c, uop *a, uop *b);                     /* 0, 1, ..., n-1 computed in the kernel */

/* random counters (random.c). Each draw of n numbers takes the next n counters and writes the first into a
 * small buffer its kernels read; a JIT replay gives those buffers fresh counters (engine/jit.c) */
typedef void (*rng_draw_fn)(void *ctx, void *buf, uint64_t base, uint64_t n);
void rng_set_observer(rng_draw_fn fn, void *ctx);  /* fn sees every draw of this thread from now on (NULL: none) */
uint64_t rng_advance(uint64_t n);                  /* takes n counters; returns the first */
void rng_draw_words(uint64_t base, uint32_t out[4]);  /* a draw buffer's contents: counter, current seed */

/* the gradient of a convolution's input x from its output's gradient gy and its weight w, aux as a
 * CUSTOM_GRAD CG_CONV_INPUT node's (conv.c) */
uop *conv_input_grad(uop *gy, uop *x, uop *w, const int64_t *aux);
/* a^b of two float nodes of one shape and dtype, as tinygrad's pow, marked CUSTOM_GRAD CG_POW (elementwise.c) */
uop *pow_node(uop *a, uop *b);

/* normalizes a possibly negative axis against ndim; -1 with an error naming op if out of range. A 0-d
 * tensor has no axes: every axis is refused */
int norm_axis(const char *op, int axis, int ndim);
/* the same, but as tinygrad's reductions (and cumsum, squeeze, flatten, softmax) a 0-d tensor takes axis 0
 * or -1, returned as 0: the op then works on the one element (a caller must not read shape[0]) */
int norm_axis_scalar(const char *op, int axis, int ndim);
/* broadcasts a and b to one shape and promotes them to one dtype; false with an error naming op */
bool broadcast_pair(const char *op, uop **a, uop **b);
tg_dtype sum_acc_dtype(tg_dtype dt);
/* reduce builder behind tg_sum etc.: axes as the user gave them */
tg_tensor *reduce_op(const char *name, tg_tensor *t, uop_op op, int naxes, const int *axes, bool keepdim);

#define TSHAPE(t) ((t)->u->shape)
#define TNDIM(t) ((t)->u->ndim)
#define TDT(t) ((tg_dtype)(t)->u->dtype)

#endif
