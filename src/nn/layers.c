/* layers.c — nn layers: a struct of parameter tensors, an init that draws them as tinygrad's nn does, a
 * forward that is a composition of tensor ops, and a way to list the parameters by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/tensor.h"

/* the value of a lazy initializer, stored once, owned by the layer, wanting a gradient if trainable */
static tg_tensor *param_of(tg_tensor *lazy, bool trainable) {
  tg_tensor *t = tensor_own(lazy);
  return t ? tg_set_requires_grad(t, trainable) : NULL;
}

static tg_status add_named(tg_params *p, const char *prefix, const char *name, tg_tensor *t) {
  if (!t) return TG_OK;
  char full[512];
  snprintf(full, sizeof full, "%s%s%s", prefix ? prefix : "", prefix && *prefix ? "." : "", name);
  return tg_params_add(p, full, t);
}

/* a layer function given a NULL layer struct */
static tg_status null_layer(const char *op) {
  tg_set_error(TG_ERR_ARG, "%s: layer is NULL", op);
  return TG_ERR_ARG;
}

static tg_status init_failed(const char *op) {
  if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  return tg_error_status();
}

/* weight of shape wshape and an optional bias of n elements, both U(-1/sqrt(fan_in), 1/sqrt(fan_in)):
 * kaiming_uniform(a=sqrt(5)) as tinygrad and PyTorch */
static tg_status weight_and_bias(const char *op, int nd, const int64_t *wshape, double fan_in, int64_t n, bool bias,
                                 tg_tensor **w, tg_tensor **b) {
  double bound = 1 / sqrt(fan_in);
  *w = param_of(tg_uniform(TG_FLOAT32, nd, wshape, -bound, bound), true);
  *b = bias ? param_of(tg_uniform(TG_FLOAT32, 1, &n, -bound, bound), true) : NULL;
  if (*w && (!bias || *b)) return TG_OK;
  tg_free(*w);
  tg_free(*b);
  *w = *b = NULL;
  return init_failed(op);
}

static tg_status weight_bias_params(tg_tensor *w, tg_tensor *b, const char *prefix, tg_params *p) {
  tg_status st = add_named(p, prefix, "weight", w);
  return st ? st : add_named(p, prefix, "bias", b);
}

static bool positive(const char *op, int n, const int64_t *v) {
  for (int i = 0; i < n; i++)
    if (v[i] <= 0) {
      tg_set_error(TG_ERR_ARG, "%s: sizes must be positive, got %lld", op, (long long)v[i]);
      return false;
    }
  return true;
}

/* ---- Linear ------------------------------------------------------------------------------------------ */

tg_status tg_nn_linear_init(tg_nn_linear *l, int64_t in, int64_t out, bool bias) {
  if (!l) return null_layer("tg_nn_linear_init");
  *l = (tg_nn_linear){0};
  if (!positive("tg_nn_linear_init", 2, (int64_t[]){in, out})) return TG_ERR_ARG;
  return weight_and_bias("tg_nn_linear_init", 2, (int64_t[]){out, in}, (double)in, out, bias, &l->weight, &l->bias);
}

tg_tensor *tg_nn_linear_forward(const tg_nn_linear *l, tg_tensor *x) {
  if (!l || !x) return NULL;
  tg_tensor *wt = tg_transpose(l->weight, 0, 1);
  tg_tensor *y = tg_matmul(x, wt);
  tg_free(wt);
  if (!l->bias || !y) return y;
  tg_tensor *r = tg_add(y, l->bias);
  tg_free(y);
  return r;
}

tg_status tg_nn_linear_params(const tg_nn_linear *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_linear_params");
  return weight_bias_params(l->weight, l->bias, prefix, p);
}

void tg_nn_linear_free(tg_nn_linear *l) {
  if (!l) return;
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_nn_linear){0};
}

tg_tensor *tg_linear(tg_tensor *x, tg_tensor *weight, tg_tensor *bias) {
  if (!x || !weight) return NULL;
  tg_scope_begin();
  tg_tensor *y = tg_ndim(weight) == 1 ? tg_mul(x, weight) : tg_matmul(x, weight);
  tg_tensor *r = tg_keep(bias ? tg_add(y, bias) : y);
  tg_scope_end();
  return r;
}

/* ---- Conv2d, ConvTranspose2d ----------------------------------------------------------------------- */

/* the kernel's spatial sizes (1 value: square 2-d; 2 or 3 values: one per dim) into k; their count, 0 on error */
static int kernel_dims(const char *op, tg_ints kernel, int64_t *k) {
  int nd = kernel.n == 1 ? 2 : kernel.n;
  if (nd < 2 || nd > TG_CONV_DIMS) {
    tg_set_error(TG_ERR_ARG, "%s: kernel has %d values: give 1 (square), 2 or 3", op, kernel.n);
    return 0;
  }
  for (int j = 0; j < nd; j++) k[j] = kernel.v[kernel.n == 1 ? 0 : j];
  return positive(op, nd, k) ? nd : 0;
}

/* a convolution layer's weight (a, b, *k) with fan_in b * prod(k) and its bias of cout, after the checks */
static tg_status conv_weights(const char *op, int64_t cin, int64_t cout, tg_ints kernel, bool bias, tg_conv_opts o,
                              bool transposed, tg_tensor **w, tg_tensor **b) {
  int64_t k[TG_CONV_DIMS], sh[2 + TG_CONV_DIMS], g = o.groups ? o.groups : 1;
  int nd = kernel_dims(op, kernel, k);
  if (!nd || !positive(op, 2, (int64_t[]){cin, cout})) return TG_ERR_ARG;
  if (g < 1 || cin % g || cout % g) {
    tg_set_error(TG_ERR_ARG, "%s: %lld and %lld channels do not split into %lld groups", op, (long long)cin, (long long)cout,
                 (long long)g);
    return TG_ERR_ARG;
  }
  /* Conv2d (cout, cin/g, *k); ConvTranspose2d (cin, cout/g, *k) as PyTorch, fan_in from its dim 1 */
  sh[0] = transposed ? cin : cout;
  sh[1] = transposed ? cout / g : cin / g;
  double fan_in = (double)sh[1];
  for (int j = 0; j < nd; j++) fan_in *= (double)(sh[2 + j] = k[j]);
  return weight_and_bias(op, 2 + nd, sh, fan_in, cout, bias, w, b);
}

tg_status tg_nn_conv2d_init(tg_nn_conv2d *l, int64_t cin, int64_t cout, tg_ints kernel, bool bias, tg_conv_opts o) {
  if (!l) return null_layer("tg_nn_conv2d_init");
  *l = (tg_nn_conv2d){.opts = o};
  return conv_weights("tg_nn_conv2d_init", cin, cout, kernel, bias, o, false, &l->weight, &l->bias);
}

tg_tensor *tg_nn_conv2d_forward(const tg_nn_conv2d *l, tg_tensor *x) {
  return l ? tg_conv2d(x, l->weight, l->bias, l->opts) : NULL;
}

tg_status tg_nn_conv2d_params(const tg_nn_conv2d *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_conv2d_params");
  return weight_bias_params(l->weight, l->bias, prefix, p);
}

void tg_nn_conv2d_free(tg_nn_conv2d *l) {
  if (!l) return;
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_nn_conv2d){0};
}

tg_status tg_nn_conv_transpose2d_init(tg_nn_conv_transpose2d *l, int64_t cin, int64_t cout, tg_ints kernel, bool bias,
                                      tg_conv_opts o) {
  if (!l) return null_layer("tg_nn_conv_transpose2d_init");
  *l = (tg_nn_conv_transpose2d){.opts = o};
  return conv_weights("tg_nn_conv_transpose2d_init", cin, cout, kernel, bias, o, true, &l->weight, &l->bias);
}

tg_tensor *tg_nn_conv_transpose2d_forward(const tg_nn_conv_transpose2d *l, tg_tensor *x) {
  return l ? tg_conv_transpose2d(x, l->weight, l->bias, l->opts) : NULL;
}

tg_status tg_nn_conv_transpose2d_params(const tg_nn_conv_transpose2d *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_conv_transpose2d_params");
  return weight_bias_params(l->weight, l->bias, prefix, p);
}

void tg_nn_conv_transpose2d_free(tg_nn_conv_transpose2d *l) {
  if (!l) return;
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_nn_conv_transpose2d){0};
}

/* ---- BatchNorm2d ------------------------------------------------------------------------------------- */

tg_status tg_nn_batchnorm_init(tg_nn_batchnorm *l, int64_t c) {
  if (!l) return null_layer("tg_nn_batchnorm_init");
  *l = (tg_nn_batchnorm){.eps = 1e-5, .momentum = 0.1};
  if (!positive("tg_nn_batchnorm_init", 1, &c)) return TG_ERR_ARG;
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &c), true);
  l->bias = param_of(tg_zeros(TG_FLOAT32, 1, &c), true);
  l->running_mean = param_of(tg_zeros(TG_FLOAT32, 1, &c), false);
  l->running_var = param_of(tg_ones(TG_FLOAT32, 1, &c), false);
  /* 0-d int64 as PyTorch's and tinygrad's: a PyTorch state dict loads as it is */
  l->num_batches_tracked = param_of(tg_zeros(TG_INT64, 0, NULL), false);
  if (!l->weight || !l->bias || !l->running_mean || !l->running_var || !l->num_batches_tracked) {
    tg_nn_batchnorm_free(l);
    return init_failed("tg_nn_batchnorm_init");
  }
  return TG_OK;
}

/* per-channel (1, C, 1, 1) view of a (C) tensor */
static tg_tensor *chan(tg_tensor *t, int ndim) {
  int64_t s[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) s[i] = i == 1 ? tg_shape(t, 0) : 1;
  return tg_reshape(t, ndim, s);
}

tg_tensor *tg_nn_batchnorm_forward(tg_nn_batchnorm *l, tg_tensor *x) {
  if (!l || !x) return NULL;
  if (tg_ndim(x) < 2 || tg_shape(x, 1) != tg_shape(l->weight, 0)) {
    char b[256];
    tg_set_error(TG_ERR_ARG, "tg_nn_batchnorm_forward: input of shape %s, expected (N, %lld, ...)",
                 shape_str(b, sizeof b, tg_ndim(x), tg_shape_ptr(x)), (long long)tg_shape(l->weight, 0));
    return NULL;
  }
  int nd = tg_ndim(x), axes[TG_MAX_DIMS], na = 0;
  for (int i = 0; i < nd; i++)
    if (i != 1) axes[na++] = i;
  double n = (double)tg_numel(x) / (double)tg_shape(x, 1);
  if (tg_training() && n <= 1) {  /* PyTorch refuses it; tinygrad divides by zero in the running variance */
    char b[256];
    tg_set_error(TG_ERR_ARG, "tg_nn_batchnorm_forward: training needs more than 1 value per channel, got input of "
                 "shape %s", shape_str(b, sizeof b, tg_ndim(x), tg_shape_ptr(x)));
    return NULL;
  }
  tg_tensor *r = NULL;
  tg_scope_begin();
  tg_tensor *mean, *invstd;
  if (tg_training()) {
    tg_tensor *bm = tg_mean(x, na, axes, false);
    tg_tensor *xc = tg_sub(x, chan(bm, nd));
    tg_tensor *bv = tg_mean(tg_mul(xc, xc), na, axes, false);  /* biased, for normalizing */
    tg_tensor *unbiased = tg_mul_scalar(bv, n / (n - 1));
    double m = l->momentum;
    tg_assign(l->running_mean, tg_add(tg_mul_scalar(tg_detach(l->running_mean), 1 - m), tg_mul_scalar(tg_detach(bm), m)));
    tg_assign(l->running_var, tg_add(tg_mul_scalar(tg_detach(l->running_var), 1 - m), tg_mul_scalar(tg_detach(unbiased), m)));
    tg_assign(l->num_batches_tracked, tg_add_scalar(l->num_batches_tracked, 1));
    mean = bm;
    invstd = tg_rsqrt(tg_add_scalar(bv, l->eps));
  } else {
    mean = l->running_mean;
    invstd = tg_rsqrt(tg_add_scalar(l->running_var, l->eps));
  }
  r = tg_keep(tg_batchnorm(x, l->weight, l->bias, mean, invstd));
  tg_scope_end();
  return r;
}

tg_status tg_nn_batchnorm_params(const tg_nn_batchnorm *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_batchnorm_params");
  tg_status st = add_named(p, prefix, "weight", l->weight);
  if (!st) st = add_named(p, prefix, "bias", l->bias);
  if (!st) st = add_named(p, prefix, "running_mean", l->running_mean);
  if (!st) st = add_named(p, prefix, "running_var", l->running_var);
  if (!st) st = add_named(p, prefix, "num_batches_tracked", l->num_batches_tracked);
  return st;
}

void tg_nn_batchnorm_free(tg_nn_batchnorm *l) {
  if (!l) return;
  tg_free(l->weight);
  tg_free(l->bias);
  tg_free(l->running_mean);
  tg_free(l->running_var);
  tg_free(l->num_batches_tracked);
  *l = (tg_nn_batchnorm){0};
}

/* ---- LayerNorm, RMSNorm, GroupNorm, Embedding ----------------------------------------------------- */

tg_status tg_nn_layernorm_init(tg_nn_layernorm *l, int64_t dim, double eps) {
  if (!l) return null_layer("tg_nn_layernorm_init");
  *l = (tg_nn_layernorm){.eps = eps};
  if (!positive("tg_nn_layernorm_init", 1, &dim)) return TG_ERR_ARG;
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &dim), true);
  l->bias = param_of(tg_zeros(TG_FLOAT32, 1, &dim), true);
  if (!l->weight || !l->bias) {
    tg_nn_layernorm_free(l);
    return init_failed("tg_nn_layernorm_init");
  }
  return TG_OK;
}

/* x's last axis has the layer's size n, else an error naming op */
static bool last_dim_is(const char *op, tg_tensor *x, int64_t n) {
  if (tg_ndim(x) >= 1 && tg_shape(x, tg_ndim(x) - 1) == n) return true;
  char b[256];
  tg_set_error(TG_ERR_ARG, "%s: input of shape %s, expected a last axis of %lld", op,
               shape_str(b, sizeof b, tg_ndim(x), tg_shape_ptr(x)), (long long)n);
  return false;
}

tg_tensor *tg_nn_layernorm_forward(const tg_nn_layernorm *l, tg_tensor *x) {
  if (!l || !x || !l->weight || !last_dim_is("tg_nn_layernorm_forward", x, tg_shape(l->weight, 0))) return NULL;
  tg_scope_begin();
  tg_tensor *r = tg_keep(tg_add(tg_mul(tg_layernorm(x, 1, (int[]){-1}, l->eps), l->weight), l->bias));
  tg_scope_end();
  return r;
}

tg_status tg_nn_layernorm_params(const tg_nn_layernorm *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_layernorm_params");
  tg_status st = add_named(p, prefix, "weight", l->weight);
  return st ? st : add_named(p, prefix, "bias", l->bias);
}

void tg_nn_layernorm_free(tg_nn_layernorm *l) {
  if (!l) return;
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_nn_layernorm){0};
}

tg_status tg_nn_rmsnorm_init(tg_nn_rmsnorm *l, int64_t dim, double eps) {
  if (!l) return null_layer("tg_nn_rmsnorm_init");
  *l = (tg_nn_rmsnorm){.eps = eps};
  if (!positive("tg_nn_rmsnorm_init", 1, &dim)) return TG_ERR_ARG;
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &dim), true);
  return l->weight ? TG_OK : init_failed("tg_nn_rmsnorm_init");
}

tg_tensor *tg_nn_rmsnorm_forward(const tg_nn_rmsnorm *l, tg_tensor *x) {
  if (!l || !x || !l->weight || !last_dim_is("tg_nn_rmsnorm_forward", x, tg_shape(l->weight, 0))) return NULL;
  tg_tensor *n = tg_rmsnorm(x, 1, (int[]){-1}, l->eps);
  tg_tensor *r = tg_mul(n, l->weight);
  tg_free(n);
  return r;
}

tg_status tg_nn_rmsnorm_params(const tg_nn_rmsnorm *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_rmsnorm_params");
  return add_named(p, prefix, "weight", l->weight);
}

void tg_nn_rmsnorm_free(tg_nn_rmsnorm *l) {
  if (!l) return;
  tg_free(l->weight);
  *l = (tg_nn_rmsnorm){0};
}

tg_status tg_nn_groupnorm_init(tg_nn_groupnorm *l, int64_t groups, int64_t channels, double eps) {
  if (!l) return null_layer("tg_nn_groupnorm_init");
  *l = (tg_nn_groupnorm){.groups = groups, .eps = eps};
  if (!positive("tg_nn_groupnorm_init", 2, (int64_t[]){groups, channels})) return TG_ERR_ARG;
  if (channels % groups) {  /* PyTorch refuses it at construction; the forward could never run */
    tg_set_error(TG_ERR_ARG, "tg_nn_groupnorm_init: %lld groups do not divide %lld channels", (long long)groups,
                 (long long)channels);
    return TG_ERR_ARG;
  }
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &channels), true);
  l->bias = param_of(tg_zeros(TG_FLOAT32, 1, &channels), true);
  if (!l->weight || !l->bias) {
    tg_nn_groupnorm_free(l);
    return init_failed("tg_nn_groupnorm_init");
  }
  return TG_OK;
}

tg_tensor *tg_nn_groupnorm_forward(const tg_nn_groupnorm *l, tg_tensor *x) {
  return l ? tg_group_norm(x, l->groups, l->weight, l->bias, l->eps) : NULL;
}

tg_status tg_nn_groupnorm_params(const tg_nn_groupnorm *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_groupnorm_params");
  tg_status st = add_named(p, prefix, "weight", l->weight);
  return st ? st : add_named(p, prefix, "bias", l->bias);
}

void tg_nn_groupnorm_free(tg_nn_groupnorm *l) {
  if (!l) return;
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_nn_groupnorm){0};
}

tg_status tg_nn_embedding_init(tg_nn_embedding *l, int64_t vocab, int64_t dim) {
  if (!l) return null_layer("tg_nn_embedding_init");
  *l = (tg_nn_embedding){0};
  if (!positive("tg_nn_embedding_init", 2, (int64_t[]){vocab, dim})) return TG_ERR_ARG;
  l->weight = param_of(tg_glorot_uniform(TG_FLOAT32, 2, (int64_t[]){vocab, dim}), true);
  return l->weight ? TG_OK : init_failed("tg_nn_embedding_init");
}

tg_tensor *tg_nn_embedding_forward(const tg_nn_embedding *l, tg_tensor *idx) {
  return l ? tg_embedding(l->weight, idx) : NULL;
}

tg_status tg_nn_embedding_params(const tg_nn_embedding *l, const char *prefix, tg_params *p) {
  if (!l) return null_layer("tg_nn_embedding_params");
  return add_named(p, prefix, "weight", l->weight);
}

void tg_nn_embedding_free(tg_nn_embedding *l) {
  if (!l) return;
  tg_free(l->weight);
  *l = (tg_nn_embedding){0};
}
