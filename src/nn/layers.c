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

tg_status tg_linear_init(tg_linear *l, int64_t in, int64_t out, bool bias) {
  *l = (tg_linear){0};
  if (!positive("tg_linear_init", 2, (int64_t[]){in, out})) return TG_ERR_ARG;
  return weight_and_bias("tg_linear_init", 2, (int64_t[]){out, in}, (double)in, out, bias, &l->weight, &l->bias);
}

tg_tensor *tg_linear_forward(const tg_linear *l, tg_tensor *x) {
  if (!l || !x) return NULL;
  tg_tensor *wt = tg_transpose(l->weight, 0, 1);
  tg_tensor *y = tg_matmul(x, wt);
  tg_free(wt);
  if (!l->bias || !y) return y;
  tg_tensor *r = tg_add(y, l->bias);
  tg_free(y);
  return r;
}

tg_status tg_linear_params(const tg_linear *l, const char *prefix, tg_params *p) {
  return weight_bias_params(l->weight, l->bias, prefix, p);
}

void tg_linear_free(tg_linear *l) {
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_linear){0};
}

/* ---- Conv2d, ConvTranspose2d ----------------------------------------------------------------------- */

static int64_t groups_of(const tg_conv_opts *o) { return o->groups > 0 ? o->groups : 1; }

tg_status tg_conv2d_layer_init(tg_conv2d_layer *l, int64_t cin, int64_t cout, int64_t k, bool bias, tg_conv_opts o) {
  *l = (tg_conv2d_layer){.opts = o};
  int64_t g = groups_of(&o);
  if (!positive("tg_conv2d_layer_init", 3, (int64_t[]){cin, cout, k})) return TG_ERR_ARG;
  if (cin % g || cout % g) {
    tg_set_error(TG_ERR_ARG, "tg_conv2d_layer_init: %lld and %lld channels do not split into %lld groups", (long long)cin,
                 (long long)cout, (long long)g);
    return TG_ERR_ARG;
  }
  return weight_and_bias("tg_conv2d_layer_init", 4, (int64_t[]){cout, cin / g, k, k}, (double)(cin / g * k * k), cout,
                         bias, &l->weight, &l->bias);
}

tg_tensor *tg_conv2d_layer_forward(const tg_conv2d_layer *l, tg_tensor *x) {
  return l ? tg_conv2d(x, l->weight, l->bias, l->opts) : NULL;
}

tg_status tg_conv2d_layer_params(const tg_conv2d_layer *l, const char *prefix, tg_params *p) {
  return weight_bias_params(l->weight, l->bias, prefix, p);
}

void tg_conv2d_layer_free(tg_conv2d_layer *l) {
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_conv2d_layer){0};
}

tg_status tg_conv_transpose2d_layer_init(tg_conv_transpose2d_layer *l, int64_t cin, int64_t cout, int64_t k, bool bias,
                                         tg_conv_opts o) {
  *l = (tg_conv_transpose2d_layer){.opts = o};
  int64_t g = groups_of(&o);
  if (!positive("tg_conv_transpose2d_layer_init", 3, (int64_t[]){cin, cout, k})) return TG_ERR_ARG;
  if (cin % g || cout % g) {
    tg_set_error(TG_ERR_ARG, "tg_conv_transpose2d_layer_init: %lld and %lld channels do not split into %lld groups",
                 (long long)cin, (long long)cout, (long long)g);
    return TG_ERR_ARG;
  }
  /* PyTorch: fan_in of the (cin, cout/g, k, k) weight */
  return weight_and_bias("tg_conv_transpose2d_layer_init", 4, (int64_t[]){cin, cout / g, k, k}, (double)(cout / g * k * k),
                         cout, bias, &l->weight, &l->bias);
}

tg_tensor *tg_conv_transpose2d_layer_forward(const tg_conv_transpose2d_layer *l, tg_tensor *x) {
  return l ? tg_conv_transpose2d(x, l->weight, l->bias, l->opts) : NULL;
}

tg_status tg_conv_transpose2d_layer_params(const tg_conv_transpose2d_layer *l, const char *prefix, tg_params *p) {
  return weight_bias_params(l->weight, l->bias, prefix, p);
}

void tg_conv_transpose2d_layer_free(tg_conv_transpose2d_layer *l) {
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_conv_transpose2d_layer){0};
}

/* ---- BatchNorm2d ------------------------------------------------------------------------------------- */

tg_status tg_batchnorm2d_init(tg_batchnorm2d *l, int64_t c) {
  *l = (tg_batchnorm2d){.eps = 1e-5, .momentum = 0.1};
  if (!positive("tg_batchnorm2d_init", 1, &c)) return TG_ERR_ARG;
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &c), true);
  l->bias = param_of(tg_zeros(TG_FLOAT32, 1, &c), true);
  l->running_mean = param_of(tg_zeros(TG_FLOAT32, 1, &c), false);
  l->running_var = param_of(tg_ones(TG_FLOAT32, 1, &c), false);
  l->num_batches_tracked = param_of(tg_zeros(TG_INT32, 1, (int64_t[]){1}), false);
  if (!l->weight || !l->bias || !l->running_mean || !l->running_var || !l->num_batches_tracked) {
    tg_batchnorm2d_free(l);
    return init_failed("tg_batchnorm2d_init");
  }
  return TG_OK;
}

/* per-channel (1, C, 1, 1) view of a (C) tensor */
static tg_tensor *chan(tg_tensor *t, int ndim) {
  int64_t s[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) s[i] = i == 1 ? tg_shape(t, 0) : 1;
  return tg_reshape(t, ndim, s);
}

tg_tensor *tg_batchnorm2d_forward(tg_batchnorm2d *l, tg_tensor *x) {
  if (!l || !x) return NULL;
  if (tg_ndim(x) < 2 || tg_shape(x, 1) != tg_shape(l->weight, 0)) {
    char b[256];
    tg_set_error(TG_ERR_ARG, "tg_batchnorm2d_forward: input of shape %s, expected (N, %lld, ...)",
                 shape_str(b, sizeof b, tg_ndim(x), tg_shape_ptr(x)), (long long)tg_shape(l->weight, 0));
    return NULL;
  }
  int nd = tg_ndim(x), axes[TG_MAX_DIMS], na = 0;
  for (int i = 0; i < nd; i++)
    if (i != 1) axes[na++] = i;
  tg_tensor *r = NULL;
  tg_scope_begin();
  tg_tensor *mean, *invstd;
  if (tg_training()) {
    tg_tensor *bm = tg_mean(x, na, axes, false);
    tg_tensor *xc = tg_sub(x, chan(bm, nd));
    tg_tensor *bv = tg_mean(tg_mul(xc, xc), na, axes, false);  /* biased, for normalizing */
    double n = (double)tg_numel(x) / (double)tg_shape(x, 1);
    tg_tensor *unbiased = tg_mul_scalar(bv, n > 1 ? n / (n - 1) : 1);
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

tg_status tg_batchnorm2d_params(const tg_batchnorm2d *l, const char *prefix, tg_params *p) {
  tg_status st = add_named(p, prefix, "weight", l->weight);
  if (!st) st = add_named(p, prefix, "bias", l->bias);
  if (!st) st = add_named(p, prefix, "running_mean", l->running_mean);
  if (!st) st = add_named(p, prefix, "running_var", l->running_var);
  if (!st) st = add_named(p, prefix, "num_batches_tracked", l->num_batches_tracked);
  return st;
}

void tg_batchnorm2d_free(tg_batchnorm2d *l) {
  tg_free(l->weight);
  tg_free(l->bias);
  tg_free(l->running_mean);
  tg_free(l->running_var);
  tg_free(l->num_batches_tracked);
  *l = (tg_batchnorm2d){0};
}

/* ---- LayerNorm, RMSNorm, GroupNorm, Embedding ----------------------------------------------------- */

tg_status tg_layernorm_layer_init(tg_layernorm_layer *l, int64_t dim, double eps) {
  *l = (tg_layernorm_layer){.naxes = 1, .eps = eps};
  if (!positive("tg_layernorm_layer_init", 1, &dim)) return TG_ERR_ARG;
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &dim), true);
  l->bias = param_of(tg_zeros(TG_FLOAT32, 1, &dim), true);
  if (!l->weight || !l->bias) {
    tg_layernorm_layer_free(l);
    return init_failed("tg_layernorm_layer_init");
  }
  return TG_OK;
}

tg_tensor *tg_layernorm_layer_forward(const tg_layernorm_layer *l, tg_tensor *x) {
  if (!l || !x) return NULL;
  tg_scope_begin();
  tg_tensor *r = tg_keep(tg_add(tg_mul(tg_layernorm(x, l->naxes, l->eps), l->weight), l->bias));
  tg_scope_end();
  return r;
}

tg_status tg_layernorm_layer_params(const tg_layernorm_layer *l, const char *prefix, tg_params *p) {
  tg_status st = add_named(p, prefix, "weight", l->weight);
  return st ? st : add_named(p, prefix, "bias", l->bias);
}

void tg_layernorm_layer_free(tg_layernorm_layer *l) {
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_layernorm_layer){0};
}

tg_status tg_rmsnorm_layer_init(tg_rmsnorm_layer *l, int64_t dim, double eps) {
  *l = (tg_rmsnorm_layer){.eps = eps};
  if (!positive("tg_rmsnorm_layer_init", 1, &dim)) return TG_ERR_ARG;
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &dim), true);
  return l->weight ? TG_OK : init_failed("tg_rmsnorm_layer_init");
}

tg_tensor *tg_rmsnorm_layer_forward(const tg_rmsnorm_layer *l, tg_tensor *x) {
  if (!l || !x) return NULL;
  tg_tensor *n = tg_rmsnorm(x, 1, l->eps);
  tg_tensor *r = tg_mul(n, l->weight);
  tg_free(n);
  return r;
}

tg_status tg_rmsnorm_layer_params(const tg_rmsnorm_layer *l, const char *prefix, tg_params *p) {
  return add_named(p, prefix, "weight", l->weight);
}

void tg_rmsnorm_layer_free(tg_rmsnorm_layer *l) {
  tg_free(l->weight);
  *l = (tg_rmsnorm_layer){0};
}

tg_status tg_groupnorm_layer_init(tg_groupnorm_layer *l, int64_t groups, int64_t channels, double eps) {
  *l = (tg_groupnorm_layer){.groups = groups, .eps = eps};
  if (!positive("tg_groupnorm_layer_init", 2, (int64_t[]){groups, channels})) return TG_ERR_ARG;
  l->weight = param_of(tg_ones(TG_FLOAT32, 1, &channels), true);
  l->bias = param_of(tg_zeros(TG_FLOAT32, 1, &channels), true);
  if (!l->weight || !l->bias) {
    tg_groupnorm_layer_free(l);
    return init_failed("tg_groupnorm_layer_init");
  }
  return TG_OK;
}

tg_tensor *tg_groupnorm_layer_forward(const tg_groupnorm_layer *l, tg_tensor *x) {
  return l ? tg_group_norm(x, l->groups, l->weight, l->bias, l->eps) : NULL;
}

tg_status tg_groupnorm_layer_params(const tg_groupnorm_layer *l, const char *prefix, tg_params *p) {
  tg_status st = add_named(p, prefix, "weight", l->weight);
  return st ? st : add_named(p, prefix, "bias", l->bias);
}

void tg_groupnorm_layer_free(tg_groupnorm_layer *l) {
  tg_free(l->weight);
  tg_free(l->bias);
  *l = (tg_groupnorm_layer){0};
}

tg_status tg_embedding_layer_init(tg_embedding_layer *l, int64_t vocab, int64_t dim) {
  *l = (tg_embedding_layer){0};
  if (!positive("tg_embedding_layer_init", 2, (int64_t[]){vocab, dim})) return TG_ERR_ARG;
  l->weight = param_of(tg_glorot_uniform(TG_FLOAT32, 2, (int64_t[]){vocab, dim}), true);
  return l->weight ? TG_OK : init_failed("tg_embedding_layer_init");
}

tg_tensor *tg_embedding_layer_forward(const tg_embedding_layer *l, tg_tensor *idx) {
  return l ? tg_embedding(l->weight, idx) : NULL;
}

tg_status tg_embedding_layer_params(const tg_embedding_layer *l, const char *prefix, tg_params *p) {
  return add_named(p, prefix, "weight", l->weight);
}

void tg_embedding_layer_free(tg_embedding_layer *l) {
  tg_free(l->weight);
  *l = (tg_embedding_layer){0};
}
