/* ops_nn.c — ONNX neural-network operators (the contract is onnx_op.h): the table onnx_ops_nn, the helpers
 * the ops_nn*.c files share (ops_nn.h), and the matrix products and convolutions. The other operators live
 * in ops_nn_pool.c (pooling), ops_nn_norm.c (normalization, dropout, losses), ops_nn_resize.c (Resize,
 * Upsample, GridSample, AffineGrid), ops_nn_quant.c (quantization), ops_nn_rnn.c (RNN, GRU, LSTM),
 * ops_nn_detect.c (NonMaxSuppression, RoiAlign) and ops_nn_ms.c (com.microsoft). Semantics are those of ONNX's
 * reference implementation (onnx/reference/ops), written with tg.h's calls as tinygrad's onnx.py does. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops_nn.h"

/* ---- helpers ------------------------------------------------------------------------------------------ */

bool nn_wants(const onnx_node *n, int k) { return k < n->nout && n->outputs[k] && n->outputs[k][0]; }

tg_status nn_done(const onnx_node *n, tg_tensor **out, int k, tg_tensor *const *res) {
  for (int i = 0; i < k; i++) {
    if (nn_wants(n, i) && !res[i]) {
      tg_status st = tg_error_status();
      if (st == TG_OK) st = TG_ERR_INTERNAL;
      if (strncmp(tg_error(), "onnx: ", 6) != 0) onnx_fail(n, st, "%s", tg_error());
      tg_scope_end();
      return st;
    }
  }
  for (int i = 0; i < k; i++)
    if (nn_wants(n, i)) out[i] = tg_keep(res[i]);
  tg_scope_end();
  return TG_OK;
}

tg_tensor *nn_err(const onnx_node *n, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  onnx_fail(n, TG_ERR_ARG, "%s", msg);
  return NULL;
}

tg_tensor *nn_per_channel(tg_tensor *v, int ndim) {
  if (!v) return NULL;
  int64_t sh[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) sh[i] = i == 1 ? -1 : 1;
  return tg_reshape(v, ndim, sh);
}

tg_tensor *nn_along_axis(tg_tensor *v, int axis, int ndim) {
  if (!v) return NULL;
  if (tg_numel(v) == 1 && tg_ndim(v) <= 1) return tg_reshape(v, 0, NULL);
  int64_t sh[TG_MAX_DIMS];
  for (int i = 0; i < ndim; i++) sh[i] = i == axis ? -1 : 1;
  return tg_reshape(v, ndim, sh);
}

void nn_int_range(tg_dtype dt, double *lo, double *hi) {
  switch (dt) {
    case TG_INT8: *lo = -128; *hi = 127; break;
    case TG_UINT8: *lo = 0; *hi = 255; break;
    case TG_INT16: *lo = -32768; *hi = 32767; break;
    case TG_UINT16: *lo = 0; *hi = 65535; break;
    case TG_INT32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    case TG_UINT32: *lo = 0; *hi = 4294967295.0; break;
    default: *lo = -9.2233720368547758e18; *hi = 9.2233720368547758e18; break;
  }
}

tg_ints nn_ints(int nd, const int64_t *v) {
  tg_ints r = {.n = nd};
  for (int j = 0; j < nd; j++) r.v[j] = v[j];
  return r;
}

tg_ints nn_window_pads(const nn_window *w) {
  tg_ints r = {.n = 2 * w->nd};
  for (int j = 0; j < w->nd; j++) {
    r.v[2 * (w->nd - 1 - j)] = w->begin[j];
    r.v[2 * (w->nd - 1 - j) + 1] = w->end[j];
  }
  return r;
}

/* attribute name as nd values (or one value for all), dflt when absent; false (error set) otherwise */
static bool window_ints(const onnx_node *n, const char *name, int nd, int64_t dflt, int64_t lo, int64_t *v) {
  const int64_t *a;
  int64_t cnt = onnx_attr_ints(n, name, &a);
  if (cnt < 0) {
    for (int j = 0; j < nd; j++) v[j] = dflt;
    return true;
  }
  if (cnt != nd && cnt != 1) {
    nn_err(n, "attribute %s has %lld values for %d spatial dims", name, (long long)cnt, nd);
    return false;
  }
  for (int j = 0; j < nd; j++) {
    v[j] = a[cnt == 1 ? 0 : j];
    if (v[j] < lo || v[j] > NN_MAX_WINDOW) {
      nn_err(n, "attribute %s: value %lld out of range", name, (long long)v[j]);
      return false;
    }
  }
  return true;
}

bool nn_window_read(const onnx_node *n, tg_tensor *x, const int64_t *kernel, bool dilate_same, nn_window *w) {
  int xn = tg_ndim(x);
  memset(w, 0, sizeof *w);
  if (xn < 3 || xn > 2 + TG_CONV_DIMS) {
    nn_err(n, "input of rank %d: need (N, C, *spatial) with 1 to %d spatial dims", xn, TG_CONV_DIMS);
    return false;
  }
  int nd = w->nd = xn - 2;
  const int64_t *ks;
  int64_t kc = onnx_attr_ints(n, "kernel_shape", &ks);
  if (kc >= 0) {
    if (kc != nd) {
      nn_err(n, "kernel_shape has %lld values for %d spatial dims", (long long)kc, nd);
      return false;
    }
    for (int j = 0; j < nd; j++) w->k[j] = ks[j];
  } else if (kernel) {
    for (int j = 0; j < nd; j++) w->k[j] = kernel[j];
  } else {
    nn_err(n, "the kernel_shape attribute is required");
    return false;
  }
  for (int j = 0; j < nd; j++) {
    if (w->k[j] < 1 || w->k[j] > NN_MAX_WINDOW) {
      nn_err(n, "kernel_shape value %lld out of range", (long long)w->k[j]);
      return false;
    }
    if (tg_shape(x, 2 + j) > NN_MAX_SPATIAL) {
      nn_err(n, "spatial size %lld past %lld", (long long)tg_shape(x, 2 + j), (long long)NN_MAX_SPATIAL);
      return false;
    }
  }
  if (!window_ints(n, "strides", nd, 1, 1, w->s) || !window_ints(n, "dilations", nd, 1, 1, w->d)) return false;
  const char *ap = onnx_attr_string(n, "auto_pad", "NOTSET");
  if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    for (int j = 0; j < nd; j++) {
      int64_t i = tg_shape(x, 2 + j), o = (i + w->s[j] - 1) / w->s[j];
      int64_t ext = dilate_same ? (w->k[j] - 1) * w->d[j] + 1 : w->k[j];
      int64_t total = (o - 1) * w->s[j] + ext - i;
      if (total < 0) total = 0;
      w->begin[j] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
      w->end[j] = total - w->begin[j];
    }
    return true;
  }
  if (!strcmp(ap, "VALID")) return true;
  if (strcmp(ap, "NOTSET") != 0 && ap[0]) {
    nn_err(n, "unknown auto_pad '%s'", ap);
    return false;
  }
  const int64_t *p;
  int64_t pc = onnx_attr_ints(n, "pads", &p);
  if (pc < 0) return true;
  if (pc != 2 * nd && pc != nd) {
    nn_err(n, "pads has %lld values for %d spatial dims (need %d)", (long long)pc, nd, 2 * nd);
    return false;
  }
  for (int j = 0; j < nd; j++) {
    w->begin[j] = p[j];
    w->end[j] = p[pc == nd ? j : nd + j];
    if (w->begin[j] < 0 || w->end[j] < 0 || w->begin[j] > NN_MAX_WINDOW || w->end[j] > NN_MAX_WINDOW) {
      nn_err(n, "pads value (%lld, %lld) out of range", (long long)w->begin[j], (long long)w->end[j]);
      return false;
    }
  }
  return true;
}

/* ---- matrix products ------------------------------------------------------------------------------------ */

/* Y = alpha * A' B' + beta * C, A' = transA ? A^T : A (2-D), C broadcast to (M, N); Y keeps A's dtype */
tg_status onnx_nn_gemm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *A = NN_IN(0), *B = NN_IN(1), *C = NN_IN(2);
  double alpha = onnx_attr_float(n, "alpha", 1.0), beta = onnx_attr_float(n, "beta", 1.0);
  tg_scope_begin();
  tg_tensor *y = NULL;
  if (!A || !B || tg_ndim(A) != 2 || tg_ndim(B) != 2) {
    y = nn_err(n, "A and B must be 2-D (ranks %d and %d)", tg_ndim(A), tg_ndim(B));
  } else {
    tg_tensor *a = onnx_attr_int(n, "transA", 0) ? tg_transpose(A, 0, 1) : A;
    tg_tensor *b = onnx_attr_int(n, "transB", 0) ? tg_transpose(B, 0, 1) : B;
    y = tg_matmul(a, b);
    if (alpha != 1.0) y = tg_mul_scalar(y, alpha);
    if (C && beta != 0.0) y = tg_add(y, beta != 1.0 ? tg_mul_scalar(C, beta) : C);
    if (y && tg_dtype_of(y) != tg_dtype_of(A)) y = tg_cast(y, tg_dtype_of(A));
  }
  return nn_done(n, out, 1, &y);
}

tg_status onnx_nn_matmul(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_scope_begin();
  tg_tensor *y = tg_matmul(NN_IN(0), NN_IN(1));
  return nn_done(n, out, 1, &y);
}

/* ---- convolutions ---------------------------------------------------------------------------------------- */

tg_tensor *nn_conv(const onnx_node *n, tg_tensor *x, tg_tensor *w, tg_tensor *bias) {
  if (!x || !w) return NULL;
  if (tg_ndim(w) != tg_ndim(x)) return nn_err(n, "X has rank %d but W rank %d", tg_ndim(x), tg_ndim(w));
  int64_t wk[TG_CONV_DIMS] = {0};
  for (int j = 0; j + 2 < tg_ndim(w) && j < TG_CONV_DIMS; j++) wk[j] = tg_shape(w, 2 + j);
  nn_window win;
  if (!nn_window_read(n, x, wk, true, &win)) return NULL;
  for (int j = 0; j < win.nd; j++)
    if (win.k[j] != wk[j]) return nn_err(n, "kernel_shape does not match W's spatial size %lld", (long long)wk[j]);
  tg_conv_opts o = tg_conv_defaults();
  o.groups = onnx_attr_int(n, "group", 1);
  o.stride = nn_ints(win.nd, win.s);
  o.dilation = nn_ints(win.nd, win.d);
  o.padding = nn_window_pads(&win);
  return tg_conv2d(x, w, bias, o);
}

tg_status onnx_nn_conv(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_scope_begin();
  tg_tensor *y = nn_conv(n, NN_IN(0), NN_IN(1), NN_IN(2));
  return nn_done(n, out, 1, &y);
}

static int64_t floordiv2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

/* X (N, C, *S), W (C, M/group, *K): the gradient of Conv. Padding from pads, or derived from output_shape
 * or auto_pad as the ONNX spec says; an output larger than the natural one grows at its end (the
 * reference's and onnxruntime's output_shape handling). output_padding is folded into the end padding. */
tg_status onnx_nn_conv_transpose(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *w = NN_IN(1), *bias = NN_IN(2);
  tg_scope_begin();
  tg_tensor *y = NULL;
  nn_window win;
  int64_t wk[TG_CONV_DIMS] = {0}, op[TG_CONV_DIMS] = {0}, os[TG_CONV_DIMS];
  if (!x || !w || tg_ndim(w) != tg_ndim(x)) {
    y = nn_err(n, "X has rank %d but W rank %d", tg_ndim(x), tg_ndim(w));
    return nn_done(n, out, 1, &y);
  }
  for (int j = 0; j + 2 < tg_ndim(w) && j < TG_CONV_DIMS; j++) wk[j] = tg_shape(w, 2 + j);
  /* pads as given (auto_pad is resolved below, not by the forward convolution's rule) */
  const char *ap = onnx_attr_string(n, "auto_pad", "NOTSET");
  bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER"), upper = !strcmp(ap, "SAME_UPPER");
  if (!nn_window_read(n, x, wk, true, &win)) return nn_done(n, out, 1, &y);
  int nd = win.nd;
  if (!window_ints(n, "output_padding", nd, 0, 0, op)) return nn_done(n, out, 1, &y);
  const int64_t *osa;
  int64_t osc = onnx_attr_ints(n, "output_shape", &osa);
  if (osc >= 0 && osc != nd && osc != nd + 2) {
    y = nn_err(n, "output_shape has %lld values for %d spatial dims", (long long)osc, nd);
    return nn_done(n, out, 1, &y);
  }
  if (osc >= 0 || same) {
    for (int j = 0; j < nd; j++) {
      int64_t i = tg_shape(x, 2 + j);
      os[j] = osc >= 0 ? osa[osc - nd + j] : i * win.s[j];
      if (os[j] < 1 || os[j] > NN_MAX_SPATIAL) {
        y = nn_err(n, "output_shape value %lld out of range", (long long)os[j]);
        return nn_done(n, out, 1, &y);
      }
      int64_t total = win.s[j] * (i - 1) + op[j] + (win.k[j] - 1) * win.d[j] + 1 - os[j];
      if (total < 0) {
        win.begin[j] = 0;
        win.end[j] = total;
      } else if (upper) {
        win.begin[j] = floordiv2(total);
        win.end[j] = total - win.begin[j];
      } else {
        win.end[j] = floordiv2(total);
        win.begin[j] = total - win.end[j];
      }
    }
  }
  for (int j = 0; j < nd; j++) win.end[j] -= op[j];
  tg_conv_opts o = tg_conv_defaults();
  o.groups = onnx_attr_int(n, "group", 1);
  o.stride = nn_ints(nd, win.s);
  o.dilation = nn_ints(nd, win.d);
  o.padding = nn_window_pads(&win);
  y = tg_conv_transpose2d(x, w, bias, o);
  return nn_done(n, out, 1, &y);
}

/* ---- the table ----------------------------------------------------------------------------------------- */

const onnx_op_def onnx_ops_nn[] = {
    {"Gemm", "", 1, onnx_nn_gemm},
    {"MatMul", "", 1, onnx_nn_matmul},
    {"MatMulInteger", "", 10, onnx_nn_matmul_integer},
    {"Conv", "", 1, onnx_nn_conv},
    {"ConvInteger", "", 10, onnx_nn_conv_integer},
    {"ConvTranspose", "", 1, onnx_nn_conv_transpose},
    {"AveragePool", "", 1, onnx_nn_average_pool},
    {"MaxPool", "", 1, onnx_nn_max_pool},
    {"LpPool", "", 1, onnx_nn_lp_pool},
    {"GlobalAveragePool", "", 1, onnx_nn_global_average_pool},
    {"GlobalMaxPool", "", 1, onnx_nn_global_max_pool},
    {"GlobalLpPool", "", 1, onnx_nn_global_lp_pool},
    {"MaxUnpool", "", 9, onnx_nn_max_unpool},
    {"BatchNormalization", "", 1, onnx_nn_batch_norm},
    {"InstanceNormalization", "", 1, onnx_nn_instance_norm},
    {"LayerNormalization", "", 17, onnx_nn_layer_norm},
    {"RMSNormalization", "", 23, onnx_nn_rms_norm},
    {"Attention", "", 23, onnx_nn_attention_std},
    {"RotaryEmbedding", "", 23, onnx_nn_rotary_embedding},
    {"TensorScatter", "", 24, onnx_nn_tensor_scatter},
    {"LpNormalization", "", 1, onnx_nn_lp_norm},
    {"GroupNormalization", "", 18, onnx_nn_group_norm_18},
    {"GroupNormalization", "", 21, onnx_nn_group_norm_21},
    {"LRN", "", 1, onnx_nn_lrn},
    {"MeanVarianceNormalization", "", 9, onnx_nn_mvn},
    {"Dropout", "", 1, onnx_nn_dropout_6},
    {"Dropout", "", 7, onnx_nn_dropout_7},
    {"Dropout", "", 12, onnx_nn_dropout_12},
    {"Resize", "", 10, onnx_nn_resize},
    {"Upsample", "", 7, onnx_nn_upsample_7},
    {"Upsample", "", 9, onnx_nn_upsample_9},
    {"GridSample", "", 16, onnx_nn_grid_sample},
    {"AffineGrid", "", 20, onnx_nn_affine_grid},
    {"QuantizeLinear", "", 10, onnx_nn_quantize_linear},
    {"DequantizeLinear", "", 10, onnx_nn_dequantize_linear},
    {"DynamicQuantizeLinear", "", 11, onnx_nn_dynamic_quantize_linear},
    {"QLinearConv", "", 10, onnx_nn_qlinear_conv},
    {"QLinearMatMul", "", 10, onnx_nn_qlinear_matmul},
    {"NegativeLogLikelihoodLoss", "", 12, onnx_nn_nll_loss},
    {"SoftmaxCrossEntropyLoss", "", 12, onnx_nn_sce_loss},
    {"NonMaxSuppression", "", 10, onnx_nn_nms},
    {"RoiAlign", "", 10, onnx_nn_roi_align},
    {"RNN", "", 7, onnx_nn_rnn},
    {"GRU", "", 7, onnx_nn_gru},
    {"LSTM", "", 7, onnx_nn_lstm},
    {"FastGelu", "com.microsoft", 1, onnx_nn_fast_gelu},
    {"BiasGelu", "com.microsoft", 1, onnx_nn_bias_gelu},
    {"SkipLayerNormalization", "com.microsoft", 1, onnx_nn_skip_layer_norm},
    {"EmbedLayerNormalization", "com.microsoft", 1, onnx_nn_embed_layer_norm},
    {"Attention", "com.microsoft", 1, onnx_nn_attention},
    {NULL, NULL, 0, NULL},
};
