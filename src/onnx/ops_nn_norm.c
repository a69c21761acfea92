/* ops_nn_norm.c — ONNX normalizations (Batch, Instance, Layer, Group, LRN, MeanVariance), Dropout and the
 * losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), on tg.h's layernorm, batchnorm, nll_loss. */
#include <stdlib.h>
#include <string.h>

#include "../uop/uop.h"

#include "ops_nn.h"

/* halves compute in float32 (the ONNX stash type); other dtypes in their own */
static tg_dtype stash_dtype(tg_tensor *x) {
  tg_dtype dt = tg_dtype_of(x);
  return dt == TG_FLOAT16 || dt == TG_BFLOAT16 ? TG_FLOAT32 : dt;
}

static tg_tensor *as_dtype(tg_tensor *t, tg_dtype dt) { return t && tg_dtype_of(t) != dt ? tg_cast(t, dt) : t; }

/* a new handle for t's value (an output must not be the runner's own input handle) */
static tg_tensor *alias(tg_tensor *t) { return t ? tg_reshape(t, tg_ndim(t), tg_shape_ptr(t)) : NULL; }

/* Inference: (x - mean) / sqrt(var + eps) * scale + B per channel (axis 1). Training (training_mode at 14+,
 * is_test 0 before 7, or the statistics outputs asked for in between): the batch's mean and (biased)
 * variance normalize, and the running statistics come out as mean * momentum + batch * (1 - momentum). */
tg_status onnx_nn_batch_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = NN_IN(0), *scale = NN_IN(1), *b = NN_IN(2), *mean = NN_IN(3), *var = NN_IN(4);
  tg_tensor *res[5] = {NULL, NULL, NULL, NULL, NULL};
  double eps = onnx_attr_float(n, "epsilon", 1e-5), momentum = onnx_attr_float(n, "momentum", 0.9);
  int opset = onnx_opset(c, "");
  bool training;
  if (opset >= 14) training = onnx_attr_int(n, "training_mode", 0) != 0;
  else if (opset < 7) training = onnx_attr_int(n, "is_test", 0) == 0 && n->nout > 1;
  else training = nn_wants(n, 1) || nn_wants(n, 2) || nn_wants(n, 3) || nn_wants(n, 4);
  tg_scope_begin();
  if (!x || !scale || !b || !mean || !var || tg_ndim(x) < 2) {
    res[0] = nn_err(n, "needs X (N, C, ...), scale, B, mean and var");
    return nn_done(n, out, 1, res);
  }
  if (!training) {
    res[0] = as_dtype(tg_batchnorm(x, scale, b, mean, tg_rsqrt(tg_add_scalar(var, eps))), tg_dtype_of(x));
    for (int k = 1; k < 5; k++)
      if (nn_wants(n, k)) res[k] = nn_err(n, "output %d is given in training mode only", k);
    return nn_done(n, out, 5, res);
  }
  int axes[TG_MAX_DIMS], na = 0;
  for (int i = 0; i < tg_ndim(x); i++)
    if (i != 1) axes[na++] = i;
  tg_tensor *xs = as_dtype(x, stash_dtype(x));
  tg_tensor *bvar, *bmean;
  if (tg_var_mean(xs, na, axes, false, 0.0, &bvar, &bmean) != TG_OK) return nn_done(n, out, 1, res);
  res[0] = as_dtype(tg_batchnorm(xs, scale, b, bmean, tg_rsqrt(tg_add_scalar(bvar, eps))), tg_dtype_of(x));
  tg_tensor *rmean = tg_add(tg_mul_scalar(mean, momentum), tg_mul_scalar(bmean, 1.0 - momentum));
  tg_tensor *rvar = tg_add(tg_mul_scalar(var, momentum), tg_mul_scalar(bvar, 1.0 - momentum));
  res[1] = as_dtype(rmean, tg_dtype_of(mean));
  res[2] = as_dtype(rvar, tg_dtype_of(var));
  if (opset < 14) {
    res[3] = as_dtype(bmean, tg_dtype_of(mean));
    res[4] = as_dtype(bvar, tg_dtype_of(var));
  } else if (nn_wants(n, 3) || nn_wants(n, 4)) {
    res[3] = nn_err(n, "has 3 outputs at opset %d", opset);
  }
  return nn_done(n, out, 5, res);
}

/* x (N, C, *S) normalized over S per (n, c), then * scale + B per channel */
tg_status onnx_nn_instance_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *scale = NN_IN(1), *b = NN_IN(2), *y = NULL;
  double eps = onnx_attr_float(n, "epsilon", 1e-5);
  tg_scope_begin();
  if (!x || !scale || !b || tg_ndim(x) < 3) {
    y = nn_err(n, "needs X (N, C, *spatial), scale and B");
    return nn_done(n, out, 1, &y);
  }
  int xn = tg_ndim(x), axes[TG_MAX_DIMS];
  for (int i = 2; i < xn; i++) axes[i - 2] = i;
  y = tg_layernorm(as_dtype(x, stash_dtype(x)), xn - 2, axes, eps);
  y = tg_add(tg_mul(as_dtype(y, tg_dtype_of(x)), nn_per_channel(scale, xn)), nn_per_channel(b, xn));
  y = as_dtype(y, tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

/* X normalized over the axes from axis on (in the stash type), * Scale (+ B); Mean and InvStdDev keep the
 * reduced axes as 1 */
tg_status onnx_nn_layer_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *scale = NN_IN(1), *b = NN_IN(2), *res[3] = {NULL, NULL, NULL};
  double eps = onnx_attr_float(n, "epsilon", 1e-5);
  int64_t axis = onnx_attr_int(n, "axis", -1);
  tg_scope_begin();
  if (!x || !scale) {
    res[0] = nn_err(n, "needs X and Scale");
    return nn_done(n, out, 3, res);
  }
  int xn = tg_ndim(x), axes[TG_MAX_DIMS], na = 0;
  if (axis < 0) axis += xn;
  if (axis < 0 || axis >= xn) {
    res[0] = nn_err(n, "axis %lld out of range for rank %d", (long long)onnx_attr_int(n, "axis", -1), xn);
    return nn_done(n, out, 3, res);
  }
  for (int i = (int)axis; i < xn; i++) axes[na++] = i;
  tg_tensor *xs = as_dtype(x, stash_dtype(x));
  tg_tensor *mean = tg_mean(xs, na, axes, true);
  tg_tensor *d = tg_sub(xs, mean);
  tg_tensor *inv = tg_rsqrt(tg_add_scalar(tg_mean(tg_mul(d, d), na, axes, true), eps));
  tg_tensor *y = tg_mul(as_dtype(tg_mul(d, inv), tg_dtype_of(x)), scale);
  if (b) y = tg_add(y, b);
  res[0] = as_dtype(y, tg_dtype_of(x));
  res[1] = mean;
  res[2] = inv;
  return nn_done(n, out, 3, res);
}

/* RMSNormalization (opset 23): x over the root mean square of the axes from axis on (in stash_type), times scale */
tg_status onnx_nn_rms_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *scale = NN_IN(1), *y = NULL;
  double eps = onnx_attr_float(n, "epsilon", 1e-5);
  int64_t axis = onnx_attr_int(n, "axis", -1);
  tg_scope_begin();
  if (!x || !scale) {
    y = nn_err(n, "needs X and scale");
    return nn_done(n, out, 1, &y);
  }
  int xn = tg_ndim(x), axes[TG_MAX_DIMS], na = 0;
  if (axis < 0) axis += xn;
  if (axis < 0 || axis >= xn) {
    y = nn_err(n, "axis %lld out of range for rank %d", (long long)onnx_attr_int(n, "axis", -1), xn);
    return nn_done(n, out, 1, &y);
  }
  for (int i = (int)axis; i < xn; i++) axes[na++] = i;
  tg_tensor *xs = as_dtype(x, stash_dtype(x));
  tg_tensor *inv = tg_rsqrt(tg_add_scalar(tg_mean(tg_mul(xs, xs), na, axes, true), eps));
  y = as_dtype(tg_mul(as_dtype(tg_mul(xs, inv), tg_dtype_of(x)), scale), tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

/* LpNormalization: x over its L1 (p = 1) or L2 (p = 2) norm along axis; 0 where the norm is 0 */
tg_status onnx_nn_lp_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  int64_t axis = onnx_attr_int(n, "axis", -1), p = onnx_attr_int(n, "p", 2);
  tg_scope_begin();
  if (!x) {
    y = nn_err(n, "needs an input");
    return nn_done(n, out, 1, &y);
  }
  int xn = tg_ndim(x);
  if (axis < 0) axis += xn;
  if (axis < 0 || axis >= xn || (p != 1 && p != 2)) {
    y = nn_err(n, "axis %lld for rank %d, p %lld (1 or 2)", (long long)onnx_attr_int(n, "axis", -1), xn, (long long)p);
    return nn_done(n, out, 1, &y);
  }
  int a = (int)axis;
  tg_tensor *norm = p == 1 ? tg_sum(tg_abs(x), 1, &a, true) : tg_sqrt(tg_sum(tg_mul(x, x), 1, &a, true));
  tg_tensor *nonzero = tg_ne_scalar(norm, 0);
  y = as_dtype(tg_where_scalar(nonzero, tg_div(x, tg_where_scalar(nonzero, norm, 1)), 0), tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

/* x (N, C, *S) normalized over each group of C / num_groups channels; scale and bias per group (opset 18)
 * or per channel (21) */
static tg_status group_norm(const onnx_node *n, tg_tensor *const *in, tg_tensor **out, bool per_group) {
  tg_tensor *x = NN_IN(0), *scale = NN_IN(1), *b = NN_IN(2), *y = NULL;
  double eps = onnx_attr_float(n, "epsilon", 1e-5);
  int64_t g = onnx_attr_int(n, "num_groups", 0);
  tg_scope_begin();
  if (!x || !scale || !b || tg_ndim(x) < 2) {
    y = nn_err(n, "needs X (N, C, ...), scale and bias");
    return nn_done(n, out, 1, &y);
  }
  int64_t ch = tg_shape(x, 1);
  if (g < 1 || ch % g != 0) {
    y = nn_err(n, "num_groups %lld does not divide %lld channels", (long long)g, (long long)ch);
    return nn_done(n, out, 1, &y);
  }
  if (per_group) {
    if (tg_numel(scale) != g || tg_numel(b) != g) {
      y = nn_err(n, "scale and bias need num_groups (%lld) values", (long long)g);
      return nn_done(n, out, 1, &y);
    }
    scale = tg_repeat_interleave(tg_reshape(scale, 1, (int64_t[]){g}), ch / g, 0);
    b = tg_repeat_interleave(tg_reshape(b, 1, (int64_t[]){g}), ch / g, 0);
  }
  y = as_dtype(tg_group_norm(as_dtype(x, stash_dtype(x)), g, scale, b, eps), tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

tg_status onnx_nn_group_norm_18(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  return group_norm(n, in, out, true);
}

tg_status onnx_nn_group_norm_21(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  return group_norm(n, in, out, false);
}

/* y = x / (bias + alpha / size * sum of x^2 over the size channels around c)^beta; the window is
 * [c - floor((size-1)/2), c + ceil((size-1)/2)], an average pool over a zero-padded channel axis */
tg_status onnx_nn_lrn(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  int64_t size = onnx_attr_int(n, "size", 0);
  double alpha = onnx_attr_float(n, "alpha", 1e-4), beta = onnx_attr_float(n, "beta", 0.75),
         bias = onnx_attr_float(n, "bias", 1.0);
  tg_scope_begin();
  if (!x || tg_ndim(x) < 2 || size < 1 || size > ((int64_t)1 << 30)) {
    y = nn_err(n, "needs X (N, C, ...) and a size >= 1 (got %lld)", (long long)size);
    return nn_done(n, out, 1, &y);
  }
  int64_t sh[4] = {tg_shape(x, 0), 1, tg_shape(x, 1), -1};
  tg_tensor *sq = tg_reshape(tg_mul(x, x), 4, sh);
  int64_t pads[8] = {0, 0, 0, 0, (size - 1) / 2, size / 2, 0, 0};
  tg_pool_opts o = tg_pool_defaults();
  o.ndims = 2;
  o.kernel = TG_INTS(size, 1);
  o.stride = TG_INTS(1, 1);
  tg_tensor *avg = tg_avg_pool2d(tg_pad_axes(sq, 4, pads, 0), o);
  tg_tensor *den = tg_pow_scalar(tg_add_scalar(tg_mul_scalar(avg, alpha), bias), beta);
  y = as_dtype(tg_div(x, tg_reshape(den, tg_ndim(x), tg_shape_ptr(x))), tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

/* (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9) over axes (default 0, 2, 3) */
tg_status onnx_nn_mvn(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  const int64_t *av;
  int64_t na = onnx_attr_ints(n, "axes", &av);
  int axes[TG_MAX_DIMS];
  tg_scope_begin();
  if (!x) return nn_done(n, out, 1, &y);
  if (na < 0) {
    na = 3;
    axes[0] = 0, axes[1] = 2, axes[2] = 3;
  } else if (na > TG_MAX_DIMS) {
    y = nn_err(n, "%lld axes", (long long)na);
    return nn_done(n, out, 1, &y);
  } else {
    for (int i = 0; i < na; i++) axes[i] = (int)av[i];
  }
  tg_tensor *xs = as_dtype(x, stash_dtype(x));
  tg_tensor *mean = tg_mean(xs, (int)na, axes, true);
  tg_tensor *msq = tg_mean(tg_mul(xs, xs), (int)na, axes, true);
  tg_tensor *sd = tg_sqrt(tg_sub(msq, tg_mul(mean, mean)));
  y = as_dtype(tg_div(tg_sub(xs, mean), tg_add_scalar(sd, 1e-9)), tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

/* ---- Dropout: an inference runner's identity; the mask is all ones (all true) ---- */

static tg_status dropout_identity(const onnx_node *n, tg_tensor *x, tg_tensor **out, tg_dtype mask_dt) {
  tg_tensor *res[2] = {NULL, NULL};
  tg_scope_begin();
  res[0] = alias(x);
  if (x && nn_wants(n, 1)) res[1] = tg_ones(mask_dt, tg_ndim(x), tg_shape_ptr(x));
  return nn_done(n, out, 2, res);
}

/* opset 1 to 6: is_test 0 asks for training, which an inference runner does not do (as onnxruntime) */
tg_status onnx_nn_dropout_6(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  return dropout_identity(n, NN_IN(0), out, tg_dtype_of(NN_IN(0)));
}

/* opset 7 to 11: always the identity; the mask has X's type before 10, bool from 10 */
tg_status onnx_nn_dropout_7(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  return dropout_identity(n, NN_IN(0), out, onnx_opset(c, "") >= 10 ? TG_BOOL : tg_dtype_of(NN_IN(0)));
}

/* numpy's legacy RandomState(seed).random(count) (MT19937 seeded by init_genrand, 53-bit doubles), which
 * ONNX's reference Dropout draws from: a seeded Dropout then drops exactly the elements the backend tests
 * expect, as tinygrad's runner does. The doubles go to out (count of them) */
static void numpy_random(uint32_t seed, double *out, int64_t count) {
  uint32_t mt[624];
  int i = 624;
  mt[0] = seed;
  for (int k = 1; k < 624; k++) mt[k] = 1812433253u * (mt[k - 1] ^ (mt[k - 1] >> 30)) + (uint32_t)k;
  for (int64_t c = 0; c < count; c++) {
    uint32_t ab[2];
    for (int h = 0; h < 2; h++) {
      if (i >= 624) {
        for (int k = 0; k < 624; k++) {
          uint32_t y = (mt[k] & 0x80000000u) | (mt[(k + 1) % 624] & 0x7fffffffu);
          mt[k] = mt[(k + 397) % 624] ^ (y >> 1) ^ (y & 1 ? 0x9908b0dfu : 0);
        }
        i = 0;
      }
      uint32_t y = mt[i++];
      y ^= y >> 11;
      y ^= (y << 7) & 0x9d2c5680u;
      y ^= (y << 15) & 0xefc60000u;
      y ^= y >> 18;
      ab[h] = y;
    }
    out[c] = ((double)(ab[0] >> 5) * 67108864.0 + (double)(ab[1] >> 6)) / 9007199254740992.0;
  }
}

/* opset 12+: ratio and training_mode are inputs. In training mode with a ratio above 0, each element is
 * kept with probability 1 - ratio and scaled by 1 / (1 - ratio); the draws are numpy's for a seed attribute
 * (as the reference), else tg_rand's */
tg_status onnx_nn_dropout_12(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = NN_IN(0);
  double ratio = 0.5;
  int64_t training = 0, cnt;
  if (NN_IN(2) && onnx_input_ints(c, n, in, 2, &training, 1, &cnt) != TG_OK) return tg_error_status();
  if (training && NN_IN(1) && onnx_input_doubles(c, n, in, 1, &ratio, 1, &cnt) != TG_OK) return tg_error_status();
  if (!training || ratio == 0) return dropout_identity(n, x, out, TG_BOOL);
  tg_tensor *res[2] = {NULL, NULL};
  tg_scope_begin();
  if (!(ratio > 0 && ratio < 1)) {
    res[0] = nn_err(n, "ratio %g must be in [0, 1)", ratio);
    return nn_done(n, out, 2, res);
  }
  tg_tensor *u;
  if (onnx_attr_has(n, "seed")) {
    int64_t cnt = tg_numel(x);
    double *r = cnt <= ((int64_t)1 << 26) ? mem_alloc((size_t)(cnt ? cnt : 1) * sizeof *r) : NULL;
    if (!r) {
      res[0] = nn_err(n, "no memory for %lld seeded draws", (long long)cnt);
      return nn_done(n, out, 2, res);
    }
    numpy_random((uint32_t)onnx_attr_int(n, "seed", 0), r, cnt);
    u = tg_from_data(TG_FLOAT64, tg_ndim(x), tg_shape_ptr(x), r, (size_t)cnt * sizeof *r);
    free(r);
  } else {
    u = tg_rand(stash_dtype(x), tg_ndim(x), tg_shape_ptr(x));
  }
  tg_tensor *mask = tg_ge_scalar(u, ratio);
  res[0] = as_dtype(tg_div_scalar(tg_mul(x, mask), 1.0 - ratio), tg_dtype_of(x));
  res[1] = mask;
  return nn_done(n, out, 2, res);
}

/* ---- losses ---- */

/* the reduction attribute as tg's, false (error recorded) for an unknown one */
static bool loss_opts(const onnx_node *n, tg_tensor *weight, tg_loss_opts *o) {
  *o = tg_loss_defaults();
  const char *r = onnx_attr_string(n, "reduction", "mean");
  if (!strcmp(r, "mean")) o->reduction = TG_REDUCTION_MEAN;
  else if (!strcmp(r, "sum")) o->reduction = TG_REDUCTION_SUM;
  else if (!strcmp(r, "none")) o->reduction = TG_REDUCTION_NONE;
  else {
    nn_err(n, "unknown reduction '%s'", r);
    return false;
  }
  if (onnx_attr_has(n, "ignore_index")) {
    o->use_ignore_index = true;
    o->ignore_index = onnx_attr_int(n, "ignore_index", 0);
  }
  o->weight = weight;
  return true;
}

/* input (N, C, *d) log-probabilities, target (N, *d), weight (C): -input[n, target, ...] * weight[target],
 * reduced (mean divides by the weights of the targets that count) */
tg_status onnx_nn_nll_loss(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *t = NN_IN(1), *y = NULL;
  tg_loss_opts o;
  tg_scope_begin();
  if (x && t && tg_ndim(x) < 2) y = nn_err(n, "input of rank %d: need (N, C, ...)", tg_ndim(x));
  else if (x && t && loss_opts(n, NN_IN(2), &o)) y = as_dtype(tg_nll_loss(x, t, o), tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

/* scores (N, C, *d): log_softmax over C, then NegativeLogLikelihoodLoss; the log-probabilities are the
 * second output */
tg_status onnx_nn_sce_loss(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *t = NN_IN(1), *res[2] = {NULL, NULL};
  tg_loss_opts o;
  tg_scope_begin();
  if (x && t && tg_ndim(x) < 2) {
    res[0] = nn_err(n, "scores of rank %d: need (N, C, ...)", tg_ndim(x));
  } else if (x && t && loss_opts(n, NN_IN(2), &o)) {
    tg_tensor *lp = as_dtype(tg_log_softmax(x, 1), tg_dtype_of(x));
    res[0] = as_dtype(tg_nll_loss(lp, t, o), tg_dtype_of(x));
    res[1] = lp;
  }
  return nn_done(n, out, 2, res);
}
