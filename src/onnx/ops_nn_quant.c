/* ops_nn_quant.c — ONNX quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the
 * integer and quantized products (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv). Integer
 * products accumulate in int32 as the spec says; requantization rounds half to even and saturates. */
#include <string.h>

#include "ops_nn.h"

static bool is_float(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64; }

/* round half to even, clamp to dt's range, convert */
static tg_tensor *saturate(tg_tensor *v, tg_dtype dt) {
  double lo, hi;
  nn_int_range(dt, &lo, &hi);
  return tg_cast(tg_clamp(tg_round(v), lo, hi), dt);
}

/* a / b as a correctly rounded float32 division (the reference's and onnxruntime's): divided in float64 and
 * rounded once to float32, where a float32 product with the reciprocal can land on the other side of a .5 */
static tg_tensor *f32_div(tg_tensor *a, tg_tensor *b) {
  return tg_cast(tg_div(tg_cast(a, TG_FLOAT64), tg_cast(b, TG_FLOAT64)), TG_FLOAT32);
}

/* scale or zero point v for x: a scalar, a vector along axis, or (block_size > 0) blocks along axis */
static tg_tensor *quant_param(const onnx_node *n, tg_tensor *v, tg_tensor *x, int64_t axis, int64_t block) {
  if (!v) return NULL;
  int xn = tg_ndim(x);
  if (tg_numel(v) == 1 && block <= 0) return tg_reshape(v, 0, NULL);
  if (axis < 0) axis += xn;
  if (axis < 0 || axis >= xn) return nn_err(n, "axis %lld out of range for rank %d", (long long)axis, xn);
  if (block > 0) {
    if (block > NN_MAX_SPATIAL) return nn_err(n, "block_size %lld out of range", (long long)block);
    if (tg_ndim(v) != xn) return nn_err(n, "blocked scale needs the input's rank %d", xn);
    tg_tensor *r = tg_repeat_interleave(v, block, (int)axis);
    if (!r) return NULL;
    int64_t b[2 * TG_MAX_DIMS];
    for (int i = 0; i < xn; i++) b[2 * i] = 0, b[2 * i + 1] = tg_shape(x, i);
    return tg_shrink(r, xn, b);
  }
  if (tg_ndim(v) != 1 || tg_shape(v, 0) != tg_shape(x, (int)axis))
    return nn_err(n, "scale/zero point of %lld values for axis %lld of size %lld", (long long)tg_numel(v), (long long)axis,
                  (long long)tg_shape(x, (int)axis));
  return nn_along_axis(v, (int)axis, xn);
}

/* y = saturate(round(x / scale) + zero_point); y's type is the zero point's, else output_dtype, else uint8 */
tg_status onnx_nn_quantize_linear(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *scale = NN_IN(1), *zp = NN_IN(2), *y = NULL;
  int64_t axis = onnx_attr_int(n, "axis", 1), block = onnx_attr_int(n, "block_size", 0);
  tg_dtype dt = TG_UINT8;
  tg_scope_begin();
  if (zp) {
    dt = tg_dtype_of(zp);
  } else if (onnx_attr_int(n, "output_dtype", 0) && !onnx_dtype_to_tg((int32_t)onnx_attr_int(n, "output_dtype", 0), &dt)) {
    y = nn_err(n, "output_dtype %lld is not supported", (long long)onnx_attr_int(n, "output_dtype", 0));
    return nn_done(n, out, 1, &y);
  }
  if (!x || !scale || is_float(dt) || dt == TG_BOOL) {
    if (x && scale) y = nn_err(n, "quantizing to %s is not supported", tg_dtype_name(dt));
    return nn_done(n, out, 1, &y);
  }
  tg_tensor *s = quant_param(n, scale, x, axis, block);
  tg_tensor *v = tg_round(f32_div(x, s));
  if (zp) v = tg_add(v, tg_cast(quant_param(n, zp, x, axis, block), TG_FLOAT32));
  y = saturate(v, dt);
  return nn_done(n, out, 1, &y);
}

/* y = (x - zero_point) * scale, in the scale's type */
tg_status onnx_nn_dequantize_linear(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *scale = NN_IN(1), *zp = NN_IN(2), *y = NULL;
  int64_t axis = onnx_attr_int(n, "axis", 1), block = onnx_attr_int(n, "block_size", 0);
  tg_scope_begin();
  if (x && scale) {
    tg_tensor *v = tg_cast(x, TG_FLOAT32);
    if (zp) v = tg_sub(v, tg_cast(quant_param(n, zp, x, axis, block), TG_FLOAT32));
    y = tg_mul(v, tg_cast(quant_param(n, scale, x, axis, block), TG_FLOAT32));
    if (y && tg_dtype_of(scale) != TG_FLOAT32) y = tg_cast(y, tg_dtype_of(scale));
  }
  return nn_done(n, out, 1, &y);
}

/* uint8 y, its scale (max(0, max x) - min(0, min x)) / 255 (1 / 255 when that range is 0) and zero point
 * round(clip(-min / scale, 0, 255)), as the reference */
tg_status onnx_nn_dynamic_quantize_linear(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *res[3] = {NULL, NULL, NULL};
  tg_scope_begin();
  if (x) {
    tg_tensor *xf = tg_cast(x, TG_FLOAT32);
    tg_tensor *mx = tg_maximum_scalar(tg_max(xf, 0, NULL, false), 0.0);
    tg_tensor *mn = tg_minimum_scalar(tg_min(xf, 0, NULL, false), 0.0);
    tg_tensor *range = tg_sub(mx, mn);
    tg_tensor *scale = f32_div(tg_where_scalar(tg_ne(mx, mn), range, 1.0), tg_scalar(TG_FLOAT32, 255.0));
    tg_tensor *zpf = tg_round(tg_clamp(tg_rsub_scalar(f32_div(mn, scale), 0.0), 0, 255));
    res[0] = saturate(tg_add(tg_round(f32_div(xf, scale)), zpf), TG_UINT8);
    res[1] = tg_cast(scale, tg_dtype_of(x));
    res[2] = tg_cast(zpf, TG_UINT8);
  }
  return nn_done(n, out, 3, res);
}

/* v as int32 minus its zero point (a scalar, or a vector reshaped by shape when given) */
static tg_tensor *centered(tg_tensor *v, tg_tensor *zp, int zn, const int64_t *zsh) {
  tg_tensor *r = tg_cast(v, TG_INT32);
  if (!zp) return r;
  tg_tensor *z = tg_numel(zp) == 1 ? tg_reshape(zp, 0, NULL) : zsh ? tg_reshape(zp, zn, zsh) : zp;
  return tg_sub(r, tg_cast(z, TG_INT32));
}

/* (a - a_zero_point) @ (b - b_zero_point) in int32; a's zero point may be per row (M), b's per column (N) */
tg_status onnx_nn_matmul_integer(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *a = NN_IN(0), *b = NN_IN(1), *y = NULL;
  tg_scope_begin();
  if (a && b) y = tg_matmul(centered(a, NN_IN(2), 2, (int64_t[]){-1, 1}), centered(b, NN_IN(3), 0, NULL));
  return nn_done(n, out, 1, &y);
}

/* the weight's zero point or scale per output channel: (M) -> (M, 1, ...) of w's rank */
static const int64_t *per_out_shape(tg_tensor *w, int64_t *sh) {
  for (int i = 0; i < tg_ndim(w); i++) sh[i] = i == 0 ? -1 : 1;
  return sh;
}

tg_status onnx_nn_conv_integer(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *w = NN_IN(1), *y = NULL;
  int64_t sh[TG_MAX_DIMS];
  tg_scope_begin();
  if (x && w) y = nn_conv(n, centered(x, NN_IN(2), 0, NULL), centered(w, NN_IN(3), tg_ndim(w), per_out_shape(w, sh)), NULL);
  return nn_done(n, out, 1, &y);
}

/* the int32 accumulator acc * (sa * sb / sy) + zero point y, saturated to the zero point's type */
static tg_tensor *requantize(tg_tensor *acc, tg_tensor *sa, tg_tensor *sb, tg_tensor *sy, tg_tensor *zy, tg_dtype dt) {
  tg_tensor *m = tg_div(tg_mul(tg_cast(sa, TG_FLOAT32), tg_cast(sb, TG_FLOAT32)), tg_cast(sy, TG_FLOAT32));
  tg_tensor *v = tg_mul(tg_cast(acc, TG_FLOAT32), m);
  if (zy) v = tg_add(v, tg_cast(tg_reshape(zy, 0, NULL), TG_FLOAT32));
  return saturate(v, dt);
}

tg_status onnx_nn_qlinear_matmul(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *a = NN_IN(0), *sa = NN_IN(1), *b = NN_IN(3), *sb = NN_IN(4), *sy = NN_IN(6), *zy = NN_IN(7), *y = NULL;
  tg_scope_begin();
  if (a && sa && b && sb && sy) {
    tg_tensor *acc = tg_matmul(centered(a, NN_IN(2), 2, (int64_t[]){-1, 1}), centered(b, NN_IN(5), 0, NULL));
    tg_tensor *sar = tg_numel(sa) == 1 ? tg_reshape(sa, 0, NULL) : tg_reshape(sa, 2, (int64_t[]){-1, 1});
    y = requantize(acc, sar, sb, tg_reshape(sy, 0, NULL), zy, zy ? tg_dtype_of(zy) : tg_dtype_of(a));
  } else {
    y = nn_err(n, "needs a, a_scale, b, b_scale and y_scale");
  }
  return nn_done(n, out, 1, &y);
}

tg_status onnx_nn_qlinear_conv(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *sx = NN_IN(1), *w = NN_IN(3), *sw = NN_IN(4), *sy = NN_IN(6), *zy = NN_IN(7), *y = NULL;
  int64_t sh[TG_MAX_DIMS];
  tg_scope_begin();
  if (x && sx && w && sw && sy) {
    tg_tensor *acc = nn_conv(n, centered(x, NN_IN(2), 0, NULL), centered(w, NN_IN(5), tg_ndim(w), per_out_shape(w, sh)),
                             NN_IN(8) ? tg_cast(NN_IN(8), TG_INT32) : NULL);
    tg_tensor *swr = tg_numel(sw) == 1 ? tg_reshape(sw, 0, NULL) : nn_per_channel(sw, tg_ndim(x));
    y = requantize(acc, tg_reshape(sx, 0, NULL), swr, tg_reshape(sy, 0, NULL), zy, zy ? tg_dtype_of(zy) : tg_dtype_of(x));
  } else {
    y = nn_err(n, "needs x, x_scale, w, w_scale and y_scale");
  }
  return nn_done(n, out, 1, &y);
}
