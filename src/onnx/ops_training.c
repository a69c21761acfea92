/* ops_training.c — the operators of ONNX's training domain, ai.onnx.preview.training opset 1 (the contract is
 * onnx_op.h): the optimizers Adagrad, Adam and Momentum, and Gradient. Semantics are those of the ONNX
 * operator specs and their reference implementations (onnx/reference/ops/aionnx_preview_training).
 *
 * The optimizers take R (learning rate, scalar), T (step count, int64 scalar) and then n tensors to optimize,
 * their n gradients and their n state tensors per kind of state (Adagrad: H; Adam: V, H; Momentum: V), and
 * return the n new tensors, then the n new states of each kind. Everything is lazy: the branches on T (the
 * first step is special in Adam and Momentum) are tg_where, so no kernel runs while the graph is built.
 * Gradient differentiates a value of the graph with tg_gradient on the lazy tensors the runner holds. */
#include <stdlib.h>
#include <string.h>

#include "ops_nn.h"
#include "uop/uop.h"   /* mem_calloc */

/* ---- helpers ------------------------------------------------------------------------------------------ */

/* n, the number of tensors an optimizer updates, from its input count (2 + per * n), or -1 with the error set */
static int opt_count(const onnx_node *n, tg_tensor *const *in, int per) {
  if (n->nin < 2 + per || (n->nin - 2) % per)
    return onnx_fail(n, TG_ERR_ARG, "takes R, T and %d tensors per optimized tensor; it has %d inputs", per,
                     n->nin), -1;
  int k = (n->nin - 2) / per;
  if (n->nout > (per - 1) * k)   /* a new X and new states per tensor; no output for G */
    return onnx_fail(n, TG_ERR_ARG, "has %d outputs; %d tensors give at most %d", n->nout, k, (per - 1) * k), -1;
  for (int i = 0; i < n->nin; i++)
    if (!in[i]) return onnx_fail(n, TG_ERR_ARG, "input %d is left out; every input is required", i), -1;
  if (tg_numel(in[0]) != 1 || tg_numel(in[1]) != 1)
    return onnx_fail(n, TG_ERR_ARG, "R and T must be scalars (%lld and %lld elements)", (long long)tg_numel(in[0]),
                     (long long)tg_numel(in[1])), -1;
  for (int i = 0; i < k; i++) {
    tg_dtype dt = tg_dtype_of(in[2 + i]);
    if (dt != TG_FLOAT32 && dt != TG_FLOAT64)
      return onnx_fail(n, TG_ERR_ARG, "X%d is %s; the optimizers take float or double", i + 1, tg_dtype_name(dt)), -1;
  }
  return k;
}

/* a scalar input (R or T) as a 0-d tensor of dtype dt */
static tg_tensor *scalar_as(tg_tensor *t, tg_dtype dt) { return tg_cast(tg_reshape(t, 0, NULL), dt); }

/* norm * x + g: the gradient with the L2 regularization term added */
static tg_tensor *regularized(tg_tensor *x, tg_tensor *g, double norm) {
  return norm != 0.0 ? tg_add(tg_mul_scalar(x, norm), g) : g;
}

/* y in x's dtype (the outputs keep their input's type whatever R's is) */
static tg_tensor *like(tg_tensor *y, const tg_tensor *x) {
  return y && tg_dtype_of(y) != tg_dtype_of(x) ? tg_cast(y, tg_dtype_of(x)) : y;
}

/* nn_done for the optimizers' outputs r (allocated by the operator, freed here) */
static tg_status done(const onnx_node *n, tg_tensor **out, tg_tensor **r) {
  tg_status st = nn_done(n, out, n->nout, r);
  free(r);
  return st;
}

/* ---- optimizers --------------------------------------------------------------------------------------- */

/* r' = R / (1 + T * decay_factor); g' = norm * X + G; H' = H + g'^2; X' = X - r' * g' / (sqrt(H') + epsilon) */
static tg_status train_adagrad(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  int k = opt_count(n, in, 3);
  if (k < 0) return tg_error_status();
  double decay = onnx_attr_float(n, "decay_factor", 0.0), eps = onnx_attr_float(n, "epsilon", 1e-6);
  double norm = onnx_attr_float(n, "norm_coefficient", 0.0);
  tg_tensor **r = mem_calloc((size_t)(2 * k), sizeof *r);
  if (!r) return onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  tg_scope_begin();
  for (int i = 0; i < k; i++) {
    tg_tensor *x = in[2 + i], *g = in[2 + k + i], *h = in[2 + 2 * k + i];
    tg_dtype dt = tg_dtype_of(x);
    tg_tensor *rate = tg_div(scalar_as(in[0], dt), tg_add_scalar(tg_mul_scalar(scalar_as(in[1], dt), decay), 1.0));
    tg_tensor *gr = regularized(x, g, norm);
    tg_tensor *hn = tg_add(h, tg_mul(gr, gr));
    r[i] = like(tg_sub(x, tg_div(tg_mul(rate, gr), tg_add_scalar(tg_sqrt(hn), eps))), x);
    r[k + i] = like(hn, h);
  }
  return done(n, out, r);
}

/* g' = norm * X + G; V' = alpha * V + (1 - alpha) * g'; H' = beta * H + (1 - beta) * g'^2;
 * r' = R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R (bias correction from the second step on);
 * X' = (1 - norm_coefficient_post) * (X - r' * V' / (sqrt(H') + epsilon)) */
static tg_status train_adam(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  int k = opt_count(n, in, 4);
  if (k < 0) return tg_error_status();
  double alpha = onnx_attr_float(n, "alpha", 0.9), beta = onnx_attr_float(n, "beta", 0.999);
  double eps = onnx_attr_float(n, "epsilon", 1e-6), norm = onnx_attr_float(n, "norm_coefficient", 0.0);
  double post = onnx_attr_float(n, "norm_coefficient_post", 0.0);
  tg_tensor **r = mem_calloc((size_t)(3 * k), sizeof *r);
  if (!r) return onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  tg_scope_begin();
  for (int i = 0; i < k; i++) {
    tg_tensor *x = in[2 + i], *g = in[2 + k + i], *v = in[2 + 2 * k + i], *h = in[2 + 3 * k + i];
    tg_dtype dt = tg_dtype_of(x);
    tg_tensor *R = scalar_as(in[0], dt), *T = scalar_as(in[1], dt);
    /* at T == 0 the corrected rate divides by 0: tg_where drops it (NaN in the branch not taken is harmless) */
    tg_tensor *bt = tg_pow(tg_scalar(dt, beta), T), *at = tg_pow(tg_scalar(dt, alpha), T);
    tg_tensor *corrected = tg_div(tg_mul(R, tg_sqrt(tg_rsub_scalar(bt, 1.0))), tg_rsub_scalar(at, 1.0));
    tg_tensor *rate = tg_where(tg_gt_scalar(in[1], 0), corrected, R);
    tg_tensor *gr = regularized(x, g, norm);
    tg_tensor *vn = tg_add(tg_mul_scalar(v, alpha), tg_mul_scalar(gr, 1.0 - alpha));
    tg_tensor *hn = tg_add(tg_mul_scalar(h, beta), tg_mul_scalar(tg_mul(gr, gr), 1.0 - beta));
    tg_tensor *xn = tg_sub(x, tg_mul(tg_reshape(rate, 0, NULL), tg_div(vn, tg_add_scalar(tg_sqrt(hn), eps))));
    if (post != 0.0) xn = tg_mul_scalar(xn, 1.0 - post);
    r[i] = like(xn, x);
    r[k + i] = like(vn, v);
    r[2 * k + i] = like(hn, h);
  }
  return done(n, out, r);
}

/* g' = norm * X + G; V' = alpha * V + beta' * g' (beta' = beta when T > 0, else 1);
 * standard: X' = X - R * V'; nesterov: X' = X - R * (g' + alpha * V') */
static tg_status train_momentum(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  static const char *const required[] = {"alpha", "beta", "mode", "norm_coefficient"};
  for (size_t a = 0; a < sizeof required / sizeof *required; a++)
    if (!onnx_attr_has(n, required[a])) return onnx_fail(n, TG_ERR_ARG, "attribute '%s' is required", required[a]);
  const char *mode = onnx_attr_string(n, "mode", "");
  bool nesterov = !strcmp(mode, "nesterov");
  if (!nesterov && strcmp(mode, "standard"))
    return onnx_fail(n, TG_ERR_ARG, "mode '%s': expected 'standard' or 'nesterov'", mode);
  int k = opt_count(n, in, 3);
  if (k < 0) return tg_error_status();
  double alpha = onnx_attr_float(n, "alpha", 0), beta = onnx_attr_float(n, "beta", 0);
  double norm = onnx_attr_float(n, "norm_coefficient", 0);
  tg_tensor **r = mem_calloc((size_t)(2 * k), sizeof *r);
  if (!r) return onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  tg_scope_begin();
  for (int i = 0; i < k; i++) {
    tg_tensor *x = in[2 + i], *g = in[2 + k + i], *v = in[2 + 2 * k + i];
    tg_dtype dt = tg_dtype_of(x);
    tg_tensor *R = scalar_as(in[0], dt);
    tg_tensor *b = tg_cast(tg_where_scalars(tg_gt_scalar(tg_reshape(in[1], 0, NULL), 0), beta, 1.0), dt);
    tg_tensor *gr = regularized(x, g, norm);
    tg_tensor *vn = tg_add(tg_mul_scalar(v, alpha), tg_mul(b, gr));
    tg_tensor *step = nesterov ? tg_add(gr, tg_mul_scalar(vn, alpha)) : vn;
    r[i] = like(tg_sub(x, tg_mul(R, step)), x);
    r[k + i] = like(vn, v);
  }
  return done(n, out, r);
}

/* ---- Gradient ----------------------------------------------------------------------------------------- */

/* Outputs d(y)/d(xs[i]). The node's inputs are the values of xs, then of zs (the other inputs of the
 * differentiated subgraph, held constant); y is read by name. A y of more than one element is differentiated
 * as its sum (every element's gradient seeded with 1, as onnxruntime's training does). */
static tg_status train_gradient(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  const char *const *xs = NULL;
  const onnx_attr *ax = onnx_attr_find(n, "xs"), *ay = onnx_attr_find(n, "y");
  if (!ax || ax->type != ONNX_ATTR_STRINGS || ax->nstrings < 1)
    return onnx_fail(n, TG_ERR_ARG, "attribute 'xs' (the names to differentiate with respect to) is required");
  if (!ay || ay->type != ONNX_ATTR_STRING || !ay->s || !ay->s[0])
    return onnx_fail(n, TG_ERR_ARG, "attribute 'y' (the name of the value differentiated) is required");
  xs = ax->strings;
  int nx = (int)ax->nstrings;
  const onnx_attr *az = onnx_attr_find(n, "zs");
  int64_t nz = az && az->type == ONNX_ATTR_STRINGS ? az->nstrings : 0;
  if (n->nin != nx + nz)
    return onnx_fail(n, TG_ERR_ARG, "has %d inputs; xs and zs name %lld", n->nin, (long long)(nx + nz));
  if (n->nout != nx) return onnx_fail(n, TG_ERR_ARG, "has %d outputs; xs names %d", n->nout, nx);
  for (int i = 0; i < nx; i++)
    if (!in[i] || strcmp(n->inputs[i], xs[i]))
      return onnx_fail(n, TG_ERR_ARG, "input %d is '%s' but xs[%d] is '%s'", i, n->inputs[i], i, xs[i]);
  tg_tensor *y = onnx_value_named(c, ay->s);
  if (!y) return onnx_fail(n, TG_ERR_ARG, "y '%s' is not a value of the graph", ay->s);
  tg_dtype ydt = tg_dtype_of(y);
  if (ydt != TG_FLOAT16 && ydt != TG_FLOAT32 && ydt != TG_FLOAT64)
    return onnx_fail(n, TG_ERR_ARG, "y '%s' is %s; only a float value has a gradient", ay->s, tg_dtype_name(ydt));
  tg_scope_begin();
  tg_tensor *loss = tg_numel(y) == 1 ? tg_reshape(y, 0, NULL) : tg_sum(y, 0, NULL, false);
  tg_tensor **grads = mem_calloc((size_t)nx, sizeof *grads);
  if (!grads) return tg_scope_end(), onnx_fail(n, TG_ERR_NOMEM, "out of memory");
  /* on failure grads stay NULL and nn_done reports tg_gradient's error */
  if (loss) tg_gradient(loss, nx, in, grads);
  tg_status st = nn_done(n, out, nx, grads);
  free(grads);
  return st;
}

const onnx_op_def onnx_ops_training[] = {
    {"Adagrad", "ai.onnx.preview.training", 1, train_adagrad},
    {"Adam", "ai.onnx.preview.training", 1, train_adam},
    {"Momentum", "ai.onnx.preview.training", 1, train_momentum},
    {"Gradient", "ai.onnx.preview.training", 1, train_gradient},
    {NULL, NULL, 0, NULL},
};
