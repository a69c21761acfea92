/* mnist_net.h — tinygrad's beautiful_mnist network, and its data-parallel training step over tg_dist (MPI),
 * shared by examples/mnist.c and tests/mpi/dp_mnist.c. Public API only (tg.h).
 *
 * A data-parallel step is two tg_jit steps with one all-reduce between them: the first runs forward and
 * backward on this rank's slice of the global batch and returns every gradient (and the loss) flattened into
 * one vector; tg_dist_all_reduce takes its mean over the ranks (one collective per step, the same bits on
 * every rank); the second hands the mean gradients to the optimizer. Every rank thus applies the same update
 * to the same parameters and they stay identical, as one process over the global batch would compute them. */
#ifndef TG_EXAMPLES_MNIST_NET_H
#define TG_EXAMPLES_MNIST_NET_H

#include <stdlib.h>
#include <time.h>

#include "tg.h"

typedef struct model {
  tg_nn_conv2d c1, c2, c3, c4;
  tg_nn_batchnorm bn1, bn2;
  tg_nn_linear fc;
} model;

static inline tg_status model_init(model *m) {
  tg_status st = TG_OK;
  tg_conv_opts o = {0};
  if (!st) st = tg_nn_conv2d_init(&m->c1, 1, 32, TG_INTS(5), true, o);
  if (!st) st = tg_nn_conv2d_init(&m->c2, 32, 32, TG_INTS(5), true, o);
  if (!st) st = tg_nn_batchnorm_init(&m->bn1, 32);
  if (!st) st = tg_nn_conv2d_init(&m->c3, 32, 64, TG_INTS(3), true, o);
  if (!st) st = tg_nn_conv2d_init(&m->c4, 64, 64, TG_INTS(3), true, o);
  if (!st) st = tg_nn_batchnorm_init(&m->bn2, 64);
  if (!st) st = tg_nn_linear_init(&m->fc, 576, 10, true);
  return st;
}

static inline tg_status model_params(const model *m, tg_params *p) {
  tg_status st = tg_nn_conv2d_params(&m->c1, "layers.0", p);
  if (!st) st = tg_nn_conv2d_params(&m->c2, "layers.2", p);
  if (!st) st = tg_nn_batchnorm_params(&m->bn1, "layers.4", p);
  if (!st) st = tg_nn_conv2d_params(&m->c3, "layers.6", p);
  if (!st) st = tg_nn_conv2d_params(&m->c4, "layers.8", p);
  if (!st) st = tg_nn_batchnorm_params(&m->bn2, "layers.10", p);
  if (!st) st = tg_nn_linear_params(&m->fc, "layers.13", p);
  return st;
}

static inline void model_free(model *m) {
  tg_nn_conv2d_free(&m->c1);
  tg_nn_conv2d_free(&m->c2);
  tg_nn_conv2d_free(&m->c3);
  tg_nn_conv2d_free(&m->c4);
  tg_nn_batchnorm_free(&m->bn1);
  tg_nn_batchnorm_free(&m->bn2);
  tg_nn_linear_free(&m->fc);
}

/* (N, 1, 28, 28) uint8 or float -> (N, 10) logits */
static inline tg_tensor *forward(model *m, tg_tensor *x) {
  tg_pool_opts pool = {.kernel = TG_INTS(2)};
  x = tg_cast(x, TG_FLOAT32);
  x = tg_relu(tg_nn_conv2d_forward(&m->c1, x));
  x = tg_relu(tg_nn_conv2d_forward(&m->c2, x));
  x = tg_max_pool2d(tg_nn_batchnorm_forward(&m->bn1, x), pool);
  x = tg_relu(tg_nn_conv2d_forward(&m->c3, x));
  x = tg_relu(tg_nn_conv2d_forward(&m->c4, x));
  x = tg_max_pool2d(tg_nn_batchnorm_forward(&m->bn2, x), pool);
  return tg_nn_linear_forward(&m->fc, tg_flatten(x, 1, -1));
}

/* ---- data parallel ------------------------------------------------------------------------------------ */
typedef struct dp_step {
  model *m;
  tg_optim *opt;
  int n;                 /* parameters that take a gradient */
  tg_tensor **p;         /* borrowed from the parameter list */
  int64_t *sizes;        /* their element counts, then 1 for the loss */
  tg_jit *grads, *apply;
  double comm_s;         /* seconds spent in tg_dist_all_reduce so far */
  double wait_s;         /* seconds spent waiting for the slowest rank before it (a barrier) */
} dp_step;

/* in = {images, labels} of this rank's slice; out = {every gradient flattened, then the loss: one vector} */
static inline tg_status dp_grads_fn(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  dp_step *d = ctx;
  model *m = d->m;
  tg_scope_begin();
  tg_tensor *loss = tg_sparse_categorical_crossentropy(forward(m, in[0]), in[1], (tg_loss_opts){0});
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  tg_tensor **parts = calloc((size_t)d->n + 1, sizeof *parts);
  if (st == TG_OK && !parts) st = TG_ERR_NOMEM;
  for (int i = 0; i < d->n && st == TG_OK; i++) {
    tg_tensor *g = tg_grad(d->p[i]);
    parts[i] = tg_flatten(g ? g : tg_zeros_like(d->p[i]), 0, -1);
  }
  tg_tensor *flat = NULL;
  if (st == TG_OK) {
    parts[d->n] = tg_reshape(loss, 1, (int64_t[]){1});
    flat = tg_cat(d->n + 1, parts, 0);
    /* the batchnorms' running statistics update in the same schedule as the gradients */
    tg_tensor *all[8] = {flat, m->bn1.running_mean, m->bn1.running_var, m->bn1.num_batches_tracked,
                         m->bn2.running_mean, m->bn2.running_var, m->bn2.num_batches_tracked, loss};
    st = flat ? tg_realize_many(8, all) : tg_error_status();
  }
  for (int i = 0; i < d->n; i++) tg_zero_grad(d->p[i]);
  out[0] = st == TG_OK ? tg_keep(flat) : NULL;
  free(parts);
  tg_scope_end();
  return st;
}

/* in = {the mean gradients, as dp_grads_fn returns them}: each becomes its parameter's gradient (the gradient
 * of sum(p * g) is g exactly), then the optimizer steps */
static inline tg_status dp_apply_fn(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  dp_step *d = ctx;
  tg_scope_begin();
  tg_tensor **parts = calloc((size_t)d->n + 1, sizeof *parts);
  tg_status st = parts ? tg_split(in[0], d->n + 1, d->sizes, 0, parts) : TG_ERR_NOMEM;
  tg_tensor *surrogate = NULL;
  for (int i = 0; i < d->n && st == TG_OK; i++) {
    tg_tensor *g = tg_reshape(parts[i], tg_ndim(d->p[i]), tg_shape_ptr(d->p[i]));
    tg_tensor *term = tg_sum(tg_mul(d->p[i], tg_detach(g)), 0, NULL, false);
    surrogate = surrogate ? tg_add(surrogate, term) : term;
  }
  if (st == TG_OK) st = surrogate ? tg_backward(surrogate) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(d->opt, 0, NULL);
  free(parts);
  tg_scope_end();
  return st;
}

static inline void dp_free(dp_step *d) {
  tg_jit_free(d->grads);
  tg_jit_free(d->apply);
  free(d->p);
  free(d->sizes);
  *d = (dp_step){0};
}

/* the parameters of params that require a gradient take part; params must be the optimizer's list */
static inline tg_status dp_init(dp_step *d, model *m, const tg_params *params, tg_optim *opt) {
  *d = (dp_step){.m = m, .opt = opt};
  int np = tg_params_count(params);
  d->p = calloc((size_t)np + 1, sizeof *d->p);
  d->sizes = calloc((size_t)np + 1, sizeof *d->sizes);
  if (!d->p || !d->sizes) {
    dp_free(d);
    return TG_ERR_NOMEM;
  }
  for (int i = 0; i < np; i++) {
    tg_tensor *t = tg_params_tensor(params, i);
    if (!tg_requires_grad(t)) continue;
    d->sizes[d->n] = tg_numel(t);
    d->p[d->n++] = t;
  }
  d->sizes[d->n] = 1;
  d->grads = tg_jit_new(dp_grads_fn, d, 2, 1);
  d->apply = tg_jit_new(dp_apply_fn, d, 1, 0);
  if (!d->grads || !d->apply) {
    dp_free(d);
    return tg_error_status();
  }
  return TG_OK;
}

/* elements of the vector one step all-reduces: every gradient and the loss */
static inline int64_t dp_numel(const dp_step *d) {
  int64_t n = 0;
  for (int i = 0; d->sizes && i <= d->n; i++) n += d->sizes[i];
  return n;
}

/* the same parameters on every rank: rank 0's values */
static inline tg_status dp_broadcast_params(const tg_params *params) {
  tg_status st = TG_OK;
  for (int i = 0; i < tg_params_count(params) && st == TG_OK; i++) st = tg_dist_broadcast(tg_params_tensor(params, i), 0);
  return st;
}

static inline double dp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* one step on this rank's slice (x, y); *loss: the mean loss over the global batch */
static inline tg_status dp_run(dp_step *d, tg_tensor *x, tg_tensor *y, double *loss) {
  tg_tensor *in[2] = {x, y}, *flat = NULL;
  tg_status st = tg_jit_call(d->grads, in, &flat);
  /* a barrier first, so that the time of the all-reduce is the transfer, not the wait for a slower rank */
  double tw = dp_now();
  if (st == TG_OK) st = tg_dist_barrier();
  double t0 = dp_now();
  d->wait_s += t0 - tw;
  if (st == TG_OK) st = tg_dist_all_reduce(flat, TG_DIST_MEAN);
  /* the ranks' running statistics differ (each saw its own slice): all take their mean */
  tg_tensor *stats[4] = {d->m->bn1.running_mean, d->m->bn1.running_var, d->m->bn2.running_mean, d->m->bn2.running_var};
  for (int i = 0; i < 4 && st == TG_OK; i++) st = tg_dist_all_reduce(stats[i], TG_DIST_MEAN);
  d->comm_s += dp_now() - t0;
  if (st == TG_OK) st = tg_jit_call(d->apply, &flat, NULL);
  if (st == TG_OK && loss) {
    float v[1];
    int64_t n = tg_numel(flat);
    tg_tensor *last = tg_shrink(flat, 1, (int64_t[]){n - 1, n});
    st = tg_to_host(last, v, sizeof v);
    *loss = v[0];
    tg_free(last);
  }
  tg_free(flat);
  return st;
}

#endif
