/* ops_nn_pool.c — ONNX pooling operators: AveragePool, MaxPool (with its Indices output), LpPool, the
 * global pools and MaxUnpool, on tg_avg_pool2d / tg_max_pool2d_with_indices / tg_max_unpool2d (which take
 * 1 to 3 pooled dims despite their names). */
#include <string.h>

#include "ops_nn.h"

/* the pool options of the node's window attributes for x (N, C, *S) */
static bool pool_opts(const onnx_node *n, tg_tensor *x, nn_window *w, tg_pool_opts *o) {
  if (!nn_window_read(n, x, NULL, true, w)) return false;
  *o = tg_pool_defaults();
  o->ndims = w->nd;
  o->kernel = nn_ints(w->nd, w->k);
  o->stride = nn_ints(w->nd, w->s);
  o->dilation = nn_ints(w->nd, w->d);
  o->padding = nn_window_pads(w);
  o->ceil_mode = onnx_attr_int(n, "ceil_mode", 0) != 0;
  o->count_include_pad = onnx_attr_int(n, "count_include_pad", 0) != 0;
  return true;
}

tg_status onnx_nn_average_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  tg_scope_begin();
  nn_window w;
  tg_pool_opts o;
  if (x && pool_opts(n, x, &w, &o)) y = tg_avg_pool2d(x, o);
  return nn_done(n, out, 1, &y);
}

/* Y, and Indices (int64) as ONNX flattens them: the offset of each maximum in the whole input tensor, its
 * spatial part row-major (storage_order 0) or column-major (storage_order 1) */
tg_status onnx_nn_max_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *res[2] = {NULL, NULL};
  tg_scope_begin();
  nn_window w;
  tg_pool_opts o;
  if (!x || !pool_opts(n, x, &w, &o)) return nn_done(n, out, 2, res);
  if (!nn_wants(n, 1)) {
    res[0] = tg_max_pool2d(x, o);
    return nn_done(n, out, 2, res);
  }
  tg_tensor *idx;
  if (tg_max_pool2d_with_indices(x, o, &res[0], &idx) != TG_OK) return nn_done(n, out, 2, res);
  idx = tg_cast(idx, TG_INT64);  /* the flat index within the input plane, row-major */
  int nd = w.nd, xn = tg_ndim(x);
  int64_t plane = 1;
  for (int j = 0; j < nd; j++) plane *= tg_shape(x, 2 + j);
  if (onnx_attr_int(n, "storage_order", 0)) {  /* the same position, counted column-major */
    tg_tensor *cm = tg_zeros_like(idx);
    int64_t rest = idx ? plane : 0, colstride = 1;
    for (int j = 0; j < nd && idx; j++) {  /* coordinate j: (idx / (stride of j, row-major)) % size_j */
      int64_t size = tg_shape(x, 2 + j);
      rest /= size;
      tg_tensor *coord = tg_mod_scalar(tg_idiv_scalar(idx, (double)rest), (double)size);
      cm = tg_add(cm, tg_mul_scalar(coord, (double)colstride));
      colstride *= size;
    }
    idx = cm;
  }
  int64_t nc = tg_shape(x, 0) * tg_shape(x, 1), sh[TG_MAX_DIMS];
  for (int i = 0; i < xn; i++) sh[i] = i < 2 ? tg_shape(x, i) : 1;
  tg_tensor *base = tg_reshape(tg_arange(TG_INT64, 0, (double)(nc * plane), (double)(plane ? plane : 1)), xn, sh);
  res[1] = tg_add(idx, base);
  return nn_done(n, out, 2, res);
}

/* p-norm of each window: (sum |x|^p)^(1/p), zeros for the padding; the sum is an average pool over whole
 * windows (count_include_pad) times the window size, with ceil_mode's extra windows as more end padding */
tg_status onnx_nn_lp_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  tg_scope_begin();
  nn_window w;
  tg_pool_opts o;
  if (!x || !pool_opts(n, x, &w, &o)) return nn_done(n, out, 1, &y);
  double p = onnx_attr_float(n, "p", 2.0);
  if (o.ceil_mode) {
    for (int j = 0; j < w.nd; j++) {
      int64_t i = tg_shape(x, 2 + j), ext = (w.k[j] - 1) * w.d[j] + 1, span = i + w.begin[j] + w.end[j] - ext;
      if (span < 0) continue;
      int64_t outn = (span + w.s[j] - 1) / w.s[j] + 1;
      if ((outn - 1) * w.s[j] >= i + w.begin[j]) outn--;
      int64_t need = (outn - 1) * w.s[j] + ext - (i + w.begin[j] + w.end[j]);
      if (need > 0) w.end[j] += need;
    }
    o.padding = nn_window_pads(&w);
    o.ceil_mode = false;
  }
  o.count_include_pad = true;
  double ksize = 1;
  for (int j = 0; j < w.nd; j++) ksize *= (double)w.k[j];
  tg_tensor *ap = tg_abs(x);
  tg_tensor *sum = tg_mul_scalar(tg_avg_pool2d(p == 1 ? ap : tg_pow_scalar(ap, p), o), ksize);
  y = p == 1 ? sum : p == 2 ? tg_sqrt(sum) : tg_pow_scalar(sum, 1.0 / p);
  if (y && tg_dtype_of(y) != tg_dtype_of(x)) y = tg_cast(y, tg_dtype_of(x));
  return nn_done(n, out, 1, &y);
}

/* the spatial axes 2.. of x, their count in *na */
static int spatial_axes(tg_tensor *x, int *axes) {
  int na = 0;
  for (int i = 2; i < tg_ndim(x); i++) axes[na++] = i;
  return na;
}

tg_status onnx_nn_global_average_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  int axes[TG_MAX_DIMS];
  tg_scope_begin();
  if (x && tg_ndim(x) < 3) y = nn_err(n, "input of rank %d: need (N, C, *spatial)", tg_ndim(x));
  else if (x) y = tg_mean(x, spatial_axes(x, axes), axes, true);
  return nn_done(n, out, 1, &y);
}

tg_status onnx_nn_global_max_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  int axes[TG_MAX_DIMS];
  tg_scope_begin();
  if (x && tg_ndim(x) < 3) y = nn_err(n, "input of rank %d: need (N, C, *spatial)", tg_ndim(x));
  else if (x) y = tg_max(x, spatial_axes(x, axes), axes, true);
  return nn_done(n, out, 1, &y);
}

tg_status onnx_nn_global_lp_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *y = NULL;
  int axes[TG_MAX_DIMS];
  double p = onnx_attr_float(n, "p", 2.0);
  tg_scope_begin();
  if (x && tg_ndim(x) < 3) {
    y = nn_err(n, "input of rank %d: need (N, C, *spatial)", tg_ndim(x));
  } else if (x) {
    int na = spatial_axes(x, axes);
    tg_tensor *sum = tg_sum(tg_pow_scalar(tg_abs(x), p), na, axes, true);
    y = p == 2 ? tg_sqrt(sum) : tg_pow_scalar(sum, 1.0 / p);
    if (y && tg_dtype_of(y) != tg_dtype_of(x)) y = tg_cast(y, tg_dtype_of(x));
  }
  return nn_done(n, out, 1, &y);
}

/* X (N, C, *S), I (int64, flat over the whole unpooled tensor as MaxPool gives them), output_shape (optional,
 * the whole shape): zeros with X at I in the inferred shape (S - 1) * stride - pads + kernel, then, as the
 * reference, padded (or cut) at the end of each spatial axis to output_shape */
tg_status onnx_nn_max_unpool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = NN_IN(0), *idx = NN_IN(1), *y = NULL;
  tg_scope_begin();
  nn_window w;
  if (!x || !idx) {
    y = nn_err(n, "X and I are required");
    return nn_done(n, out, 1, &y);
  }
  if (!nn_window_read(n, x, NULL, true, &w)) return nn_done(n, out, 1, &y);
  int nd = w.nd, xn = tg_ndim(x);
  int64_t os[TG_MAX_DIMS], inf[TG_CONV_DIMS], plane = 1, cnt = 0;
  if (NN_IN(2)) {
    if (onnx_input_ints(c, n, in, 2, os, TG_MAX_DIMS, &cnt) != TG_OK) return nn_done(n, out, 1, &y);
    if (cnt != xn || os[0] != tg_shape(x, 0) || os[1] != tg_shape(x, 1)) {
      y = nn_err(n, "output_shape of %lld values for an input of rank %d (N and C kept)", (long long)cnt, xn);
      return nn_done(n, out, 1, &y);
    }
  }
  for (int j = 0; j < nd; j++) {
    inf[j] = (tg_shape(x, 2 + j) - 1) * w.s[j] - (w.begin[j] + w.end[j]) + w.k[j];
    if (inf[j] < 1 || inf[j] > NN_MAX_SPATIAL || plane > ((int64_t)1 << 40) / inf[j] ||
        (cnt && (os[2 + j] < 0 || os[2 + j] > NN_MAX_SPATIAL))) {
      y = nn_err(n, "output size of spatial dim %d out of range", j);
      return nn_done(n, out, 1, &y);
    }
    plane *= inf[j];
  }
  int64_t nc = tg_shape(x, 0) * tg_shape(x, 1), sh[TG_MAX_DIMS];
  for (int i = 0; i < xn; i++) sh[i] = i < 2 ? tg_shape(x, i) : 1;
  tg_tensor *base = tg_reshape(tg_arange(TG_INT64, 0, (double)(nc * plane), (double)plane), xn, sh);
  tg_tensor *local = tg_sub(tg_cast(idx, TG_INT64), base);
  tg_pool_opts o = tg_pool_defaults();
  o.ndims = nd;
  y = tg_max_unpool2d(x, local, o, nd, inf);
  if (cnt) {
    int64_t pads[2 * TG_MAX_DIMS] = {0};
    for (int j = 0; j < nd; j++) pads[2 * (2 + j) + 1] = os[2 + j] - inf[j];
    y = tg_pad_axes(y, xn, pads, 0);
  }
  return nn_done(n, out, 1, &y);
}
