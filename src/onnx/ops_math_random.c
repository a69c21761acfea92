/* ops_math_random.c — ONNX's random operators: RandomNormal, RandomUniform and their *Like forms, Bernoulli
 * and Multinomial, drawn from tgc's generator (tg_rand: counter-based, inside the kernels, so a graph under
 * tg_jit draws new numbers at every replay). A node's `seed` restarts the generator (tg_manual_seed), as
 * PyTorch's and tinygrad's ONNX runners do: a run then gives the same numbers every time, and the draws after
 * it follow from that seed too. The numbers are tgc's, not numpy's: a model's outputs agree with another
 * runtime's in distribution, not value by value. */
#include <math.h>
#include <string.h>

#include "ops_math.h"

/* the output dtype: attribute dtype when the node has one, else dflt; float types only unless any_type */
static tg_status random_dtype(const onnx_node *n, tg_dtype dflt, bool any_type, tg_dtype *dt) {
  *dt = dflt;
  int64_t ot = onnx_attr_int(n, "dtype", 0);
  if (ot && !onnx_dtype_to_tg((int32_t)ot, dt)) return onnx_fail(n, TG_ERR_ARG, "dtype %lld is not supported", (long long)ot);
  bool is_float = *dt == TG_FLOAT16 || *dt == TG_BFLOAT16 || *dt == TG_FLOAT32 || *dt == TG_FLOAT64;
  if (!any_type && !is_float) return onnx_fail(n, TG_ERR_ARG, "output dtype %s is not a float type", tg_dtype_name(*dt));
  return TG_OK;
}

static void random_seed(const onnx_node *n) {
  if (onnx_attr_has(n, "seed")) {
    double s = onnx_attr_float(n, "seed", 0);
    tg_manual_seed(isfinite(s) ? (uint64_t)(int64_t)s : 0);
  }
}

/* RandomNormal, RandomUniform (shape from the attribute) and RandomNormalLike, RandomUniformLike (input 0's) */
MATH_OP(op_random) {
  bool like = strstr(n->op_type, "Like") != NULL, normal = !strncmp(n->op_type, "RandomNormal", 12);
  tg_tensor *x = like ? math_in(n, in, 0) : NULL;
  if (like && !x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  tg_dtype dt;
  tg_status st = random_dtype(n, like ? tg_dtype_of(x) : TG_FLOAT32, false, &dt);
  if (st) return st;
  const int64_t *shape = NULL;
  int64_t nd = like ? tg_ndim(x) : onnx_attr_ints(n, "shape", &shape);
  if (nd < 0) return onnx_fail(n, TG_ERR_ARG, "attribute 'shape' is missing");
  if (nd > TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "shape has %lld dims, more than %d", (long long)nd, TG_MAX_DIMS);
  if (like) shape = tg_shape_ptr(x);
  for (int64_t i = 0; i < nd; i++)
    if (shape[i] < 0) return onnx_fail(n, TG_ERR_ARG, "shape[%lld] = %lld is negative", (long long)i, (long long)shape[i]);
  random_seed(n);
  double a = onnx_attr_float(n, normal ? "mean" : "low", 0), b = onnx_attr_float(n, normal ? "scale" : "high", 1);
  tg_tensor *y = normal ? tg_normal(TG_FLOAT32, (int)nd, shape, a, b) : tg_uniform(TG_FLOAT32, (int)nd, shape, a, b);
  return math_out(n, out, 0, math_cast_to(y, dt));
}

/* Bernoulli: 1 where a uniform draw falls below the probability, in the dtype asked (the input's by default) */
MATH_OP(op_bernoulli) {
  tg_tensor *p = math_in(n, in, 0);
  if (!p) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  tg_dtype pt = tg_dtype_of(p), dt;
  if (pt != TG_FLOAT16 && pt != TG_BFLOAT16 && pt != TG_FLOAT32 && pt != TG_FLOAT64)
    return onnx_fail(n, TG_ERR_ARG, "input is %s; probabilities are a float type", tg_dtype_name(pt));
  tg_status st = random_dtype(n, pt, true, &dt);
  if (st) return st;
  random_seed(n);
  tg_tensor *u = tg_rand(TG_FLOAT32, tg_ndim(p), tg_shape_ptr(p));
  return math_out(n, out, 0, tg_cast(tg_lt(u, math_cast_to(p, TG_FLOAT32)), dt));
}

/* Multinomial: sample_size class indices per row of unnormalized log-probabilities (batch, classes), drawn
 * with replacement from their softmax */
MATH_OP(op_multinomial) {
  tg_tensor *x = math_in(n, in, 0);
  if (!x) return onnx_fail(n, TG_ERR_ARG, "input 0 is missing");
  if (tg_ndim(x) != 2) return onnx_fail(n, TG_ERR_ARG, "input has %d dims; (batch, classes) expected", tg_ndim(x));
  if (tg_shape_ptr(x)[1] < 1) return onnx_fail(n, TG_ERR_ARG, "input has no classes");
  int64_t samples = onnx_attr_int(n, "sample_size", 1);
  if (samples < 1) return onnx_fail(n, TG_ERR_ARG, "sample_size %lld is not positive", (long long)samples);
  tg_dtype dt = TG_INT32;
  int64_t ot = onnx_attr_int(n, "dtype", 6);
  if (ot == 7) dt = TG_INT64;
  else if (ot != 6) return onnx_fail(n, TG_ERR_ARG, "dtype %lld: int32 (6) or int64 (7) expected", (long long)ot);
  random_seed(n);
  tg_tensor *probs = tg_softmax(math_cast_to(x, TG_FLOAT32), 1);
  return math_out(n, out, 0, math_cast_to(tg_multinomial(probs, samples, true), dt));
}
