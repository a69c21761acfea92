/* ops_nn_ms.c — the com.microsoft operators tinygrad's runner supports, as onnxruntime's contrib operators
 * document them (docs/ContribOperators.md): FastGelu, BiasGelu, SkipLayerNormalization,
 * EmbedLayerNormalization and Attention (BERT-style self-attention from one packed QKV projection). */
#include <math.h>
#include <string.h>

#include "ops_nn.h"

/* gelu's tanh approximation of X (+ bias) */
tg_status onnx_nn_fast_gelu(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_scope_begin();
  tg_tensor *y = NN_IN(0) ? tg_gelu(NN_IN(1) ? tg_add(NN_IN(0), NN_IN(1)) : NN_IN(0)) : NULL;
  return nn_done(n, out, 1, &y);
}

/* the exact (erf) gelu of A + B */
tg_status onnx_nn_bias_gelu(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_scope_begin();
  tg_tensor *y = tg_gelu_mode(tg_add(NN_IN(0), NN_IN(1)), TG_GELU_NONE);
  return nn_done(n, out, 1, &y);
}

/* layer normalization of v over its last axis: the normalized values, and its mean and 1/std (keepdim) */
static tg_tensor *last_axis_norm(tg_tensor *v, double eps, tg_tensor **mean, tg_tensor **inv) {
  int axis = -1;
  *mean = tg_mean(v, 1, &axis, true);
  tg_tensor *d = tg_sub(v, *mean);
  *inv = tg_rsqrt(tg_add_scalar(tg_mean(tg_mul(d, d), 1, &axis, true), eps));
  return tg_mul(d, *inv);
}

/* s = input + skip (+ bias); output = layernorm(s) * gamma (+ beta); mean, inv_std_var, s */
tg_status onnx_nn_skip_layer_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *res[4] = {NULL, NULL, NULL, NULL};
  double eps = onnx_attr_float(n, "epsilon", 1e-12);
  tg_scope_begin();
  if (!NN_IN(0) || !NN_IN(1) || !NN_IN(2)) {
    res[0] = nn_err(n, "needs input, skip and gamma");
    return nn_done(n, out, 4, res);
  }
  tg_tensor *s = tg_add(NN_IN(0), NN_IN(1));
  if (NN_IN(4)) s = tg_add(s, NN_IN(4));
  tg_tensor *y = tg_mul(last_axis_norm(s, eps, &res[1], &res[2]), NN_IN(2));
  res[0] = NN_IN(3) ? tg_add(y, NN_IN(3)) : y;
  res[3] = s;
  return nn_done(n, out, 4, res);
}

/* BERT's embeddings: word[input_ids] + position[position_ids or 0..S-1] (+ segment[segment_ids]),
 * layer-normalized * gamma + beta; mask_index is the count of mask's nonzeros per row (int32; zeros without
 * a mask); embedding_sum the sum before the normalization */
tg_status onnx_nn_embed_layer_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *ids = NN_IN(0), *seg = NN_IN(1), *we = NN_IN(2), *pe = NN_IN(3), *se = NN_IN(4), *gamma = NN_IN(5),
            *beta = NN_IN(6), *mask = NN_IN(7), *pos = NN_IN(8), *res[3] = {NULL, NULL, NULL};
  double eps = onnx_attr_float(n, "epsilon", 1e-12);
  tg_scope_begin();
  if (!ids || !we || !pe || !gamma || !beta || tg_ndim(ids) != 2 || (seg != NULL) != (se != NULL)) {
    res[0] = nn_err(n, "needs input_ids (B, S), word and position embeddings, gamma and beta (and segment ids with "
                       "segment embeddings)");
    return nn_done(n, out, 3, res);
  }
  int64_t b = tg_shape(ids, 0), s = tg_shape(ids, 1);
  if (!pos) pos = tg_expand(tg_reshape(tg_arange(TG_INT32, 0, (double)s, 1), 2, (int64_t[]){1, s}), 2, (int64_t[]){b, s});
  tg_tensor *sum = tg_add(tg_embedding(we, ids), tg_embedding(pe, tg_expand(pos, 2, (int64_t[]){b, s})));
  if (seg) sum = tg_add(sum, tg_embedding(se, seg));
  tg_tensor *mean, *inv;
  res[0] = tg_add(tg_mul(last_axis_norm(sum, eps, &mean, &inv), gamma), beta);
  res[1] = mask ? tg_sum_dtype(tg_ne_scalar(mask, 0), 1, (int[]){1}, false, TG_INT32) : tg_zeros(TG_INT32, 1, &b);
  res[2] = sum;
  return nn_done(n, out, 3, res);
}

/* x (B, S, D) split in heads: (B, heads, S, D / heads) */
static tg_tensor *heads(tg_tensor *x, int64_t b, int64_t s, int64_t h) {
  return tg_transpose(tg_reshape(x, 4, (int64_t[]){b, s, h, -1}), 1, 2);
}

/* input (B, S, Hin) @ weights (Hin, Dq + Dk + Dv) + bias -> q, k, v in num_heads heads; past (2, B, heads, P,
 * dh) prepends keys and values (present is the concatenation); scores q k^T * scale (default 1/sqrt(dq /
 * heads)) + attention_bias, masked by mask_index (1-D: end positions, or ends then starts; 2-D to 4-D: a 0/1
 * mask) and unidirectional (causal) to mask_filter_value; output softmax(scores) v as (B, S, Dv) */
tg_status onnx_nn_attention(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *w = NN_IN(1), *bias = NN_IN(2), *mi = NN_IN(3), *past = NN_IN(4), *ab = NN_IN(5);
  tg_tensor *res[2] = {NULL, NULL};
  int64_t h = onnx_attr_int(n, "num_heads", 0);
  double filt = onnx_attr_float(n, "mask_filter_value", -10000.0);
  tg_scope_begin();
  if (!x || !w || tg_ndim(x) != 3 || tg_ndim(w) != 2 || h < 1) {
    res[0] = nn_err(n, "needs input (B, S, H), weights (H, 3D) and num_heads >= 1");
    return nn_done(n, out, 2, res);
  }
  if (onnx_attr_int(n, "do_rotary", 0)) {
    res[0] = nn_err(n, "do_rotary is not supported");
    return nn_done(n, out, 2, res);
  }
  int64_t b = tg_shape(x, 0), s = tg_shape(x, 1), sizes[3];
  const int64_t *qkv;
  if (onnx_attr_ints(n, "qkv_hidden_sizes", &qkv) == 3) {
    memcpy(sizes, qkv, sizeof sizes);
    for (int i = 0; i < 3; i++)
      if (sizes[i] < 1 || sizes[i] > ((int64_t)1 << 40)) {
        res[0] = nn_err(n, "qkv_hidden_sizes value %lld out of range", (long long)sizes[i]);
        return nn_done(n, out, 2, res);
      }
  } else {
    sizes[0] = sizes[1] = sizes[2] = tg_shape(w, 1) / 3;
  }
  if (sizes[0] + sizes[1] + sizes[2] != tg_shape(w, 1) || sizes[0] % h || sizes[1] % h || sizes[2] % h) {
    res[0] = nn_err(n, "qkv sizes (%lld, %lld, %lld) do not fit weights of width %lld and %lld heads", (long long)sizes[0],
                    (long long)sizes[1], (long long)sizes[2], (long long)tg_shape(w, 1), (long long)h);
    return nn_done(n, out, 2, res);
  }
  tg_tensor *parts[3];
  tg_tensor *proj = tg_matmul(x, w);
  if (bias) proj = tg_add(proj, bias);
  if (tg_split(proj, 3, sizes, 2, parts) != TG_OK) return nn_done(n, out, 2, res);
  tg_tensor *q = heads(parts[0], b, s, h), *k = heads(parts[1], b, s, h), *v = heads(parts[2], b, s, h);
  int64_t p = 0;
  if (past) {
    tg_tensor *pk = tg_getitem(past, 1, (tg_index[]){TG_IX_INT(0)}), *pv = tg_getitem(past, 1, (tg_index[]){TG_IX_INT(1)});
    p = tg_shape(past, 3);
    k = tg_cat(2, (tg_tensor *[]){pk, k}, 2);
    v = tg_cat(2, (tg_tensor *[]){pv, v}, 2);
  }
  if (nn_wants(n, 1)) res[1] = tg_stack(2, (tg_tensor *[]){k, v}, 0);
  int64_t t = s + p;
  double scale = onnx_attr_float(n, "scale", 0.0);
  if (scale == 0.0) scale = 1.0 / sqrt((double)(sizes[0] / h));
  tg_tensor *sc = tg_mul_scalar(tg_matmul(q, tg_transpose(k, -1, -2)), scale);  /* (B, heads, S, T) */
  if (ab) sc = tg_add(sc, ab);
  tg_tensor *keep = NULL;
  if (mi) {
    tg_tensor *kpos = tg_reshape(tg_arange(TG_INT32, 0, (double)t, 1), 2, (int64_t[]){1, t});
    if (tg_ndim(mi) == 1 && tg_shape(mi, 0) == b) {
      keep = tg_lt(kpos, tg_reshape(tg_cast(mi, TG_INT32), 2, (int64_t[]){b, 1}));
    } else if (tg_ndim(mi) == 1 && tg_shape(mi, 0) == 2 * b) {
      tg_tensor *se[2];
      if (tg_split(tg_cast(mi, TG_INT32), 2, (int64_t[]){b, b}, 0, se) != TG_OK) return nn_done(n, out, 2, res);
      keep = tg_mul(tg_lt(kpos, tg_reshape(se[0], 2, (int64_t[]){b, 1})), tg_ge(kpos, tg_reshape(se[1], 2, (int64_t[]){b, 1})));
    } else if (tg_ndim(mi) >= 2 && tg_ndim(mi) <= 4) {
      keep = tg_ne_scalar(mi, 0);
    } else {
      res[0] = nn_err(n, "mask_index of rank %d is not supported", tg_ndim(mi));
      return nn_done(n, out, 2, res);
    }
    if (tg_ndim(mi) <= 2) keep = tg_reshape(keep, 4, (int64_t[]){b, 1, 1, t});
    else if (tg_ndim(mi) == 3) keep = tg_unsqueeze(keep, 1);
  }
  if (onnx_attr_int(n, "unidirectional", 0)) {  /* query i sits at position p + i */
    tg_tensor *causal = tg_tril(tg_ones(TG_BOOL, 2, (int64_t[]){s, t}), p);
    keep = keep ? tg_mul(keep, causal) : causal;
  }
  if (keep) sc = tg_where(keep, sc, tg_full(tg_dtype_of(sc), 0, NULL, filt));
  tg_tensor *o = tg_matmul(tg_softmax(sc, -1), v);  /* (B, heads, S, dv) */
  res[0] = tg_reshape(tg_transpose(o, 1, 2), 3, (int64_t[]){b, s, sizes[2]});
  return nn_done(n, out, 2, res);
}
