/* ops_nn_attention.c — ONNX's Attention (opset 23; nonpad_kv_seqlen from 24, sliding windows from 25), with the
 * semantics of ONNX's reference implementation: Q, K, V in 4 dims (batch, heads, sequence, head size) or 3
 * (batch, sequence, heads x head size, split by q_num_heads / kv_num_heads); a past key and value cache
 * concatenated in front (the present outputs); grouped-query heads (each KV head serves q_heads / kv_heads
 * query heads); a mask (bool: where attention may go; float: added), causal masking aligned to the bottom right
 * (a query at i sees keys up to i + the cache's length), sliding windows, per-batch key lengths; a softcap;
 * the softmax in softmax_precision when given; rows with every key masked give 0. The scale (1 / sqrt(head
 * size) by default) is applied as its square root to both Q and K, as the reference does.
 *
 * Outputs: Y, present_key, present_value and the QK product (qk_matmul_output_mode 0 or 1: after the softcap,
 * 2: with the mask added, 3: after the softmax), all in Q's dtype. Everything is lazy tensor algebra: the
 * masks are comparisons of position ranges, so a decode step under tg_jit replays with new positions only
 * when its shapes stay. RotaryEmbedding (opset 23), the rotation of query and key features by position, and
 * TensorScatter (24), the write of new keys or values into a cache, are at the end. */
#include <math.h>
#include <string.h>

#include "ops_nn.h"

/* a (q, kv) bias of 0 where allowed(i, j) and -inf elsewhere, for offset a scalar (ioff) or per batch
 * (boff: (batch) int64 -> (batch, 1, q, kv)): diff = i + offset - j; causal: diff >= 0; window: within the
 * left and right sizes (-1: unbounded) */
static tg_tensor *position_bias(tg_dtype dt, int64_t q, int64_t kv, int64_t ioff, tg_tensor *boff, bool causal,
                                int64_t left, int64_t right) {
  int64_t qs[2] = {q, 1}, ks[2] = {1, kv};
  tg_tensor *i = tg_reshape(tg_arange(TG_INT64, 0, (double)q, 1), 2, qs);
  tg_tensor *j = tg_reshape(tg_arange(TG_INT64, 0, (double)kv, 1), 2, ks);
  tg_tensor *diff = tg_sub(tg_add_scalar(i, (double)ioff), j);   /* (q, kv) */
  if (boff) {
    int64_t bs[3] = {tg_numel(boff), 1, 1};
    diff = tg_add(diff, tg_reshape(boff, 3, bs));                  /* (batch, q, kv) */
  }
  tg_tensor *ok = causal ? tg_ge_scalar(diff, 0) : NULL;
  if (left >= 0) ok = ok ? tg_mul(ok, tg_le_scalar(diff, (double)left)) : tg_le_scalar(diff, (double)left);
  if (right >= 0) ok = ok ? tg_mul(ok, tg_ge_scalar(diff, -(double)right)) : tg_ge_scalar(diff, -(double)right);
  tg_tensor *bias = ok ? tg_where_scalars(ok, 0, -INFINITY) : tg_zeros_like(tg_cast(diff, TG_FLOAT32));
  if (boff) {
    int64_t s4[4] = {tg_numel(boff), 1, q, kv};
    bias = tg_reshape(bias, 4, s4);
  }
  return tg_cast(bias, dt);
}

/* (b, s, heads * d) -> (b, heads, s, d) */
static tg_tensor *split_heads(tg_tensor *x, int64_t heads) {
  int64_t s4[4] = {tg_shape(x, 0), tg_shape(x, 1), heads, tg_shape(x, 2) / heads};
  int perm[4] = {0, 2, 1, 3};
  return tg_permute(tg_reshape(x, 4, s4), 4, perm);
}

tg_status onnx_nn_attention_std(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *q = NN_IN(0), *k = NN_IN(1), *v = NN_IN(2), *mask = NN_IN(3), *pk = NN_IN(4), *pv = NN_IN(5);
  tg_tensor *nonpad = NN_IN(6), *res[4] = {NULL, NULL, NULL, NULL};
  tg_scope_begin();
  int nd = q ? tg_ndim(q) : 0;
  if (!q || !k || !v || (nd != 3 && nd != 4) || tg_ndim(k) != nd || tg_ndim(v) != nd) {
    res[0] = nn_err(n, "needs Q, K and V of 3 or 4 dims alike");
    return nn_done(n, out, 4, res);
  }
  if (!pk != !pv || (nonpad && pk)) {
    res[0] = nn_err(n, "past_key and past_value come together, and not with nonpad_kv_seqlen");
    return nn_done(n, out, 4, res);
  }
  tg_dtype dt = tg_dtype_of(q);
  int64_t qh = onnx_attr_int(n, "q_num_heads", 0), kvh = onnx_attr_int(n, "kv_num_heads", 0);
  if (nd == 3) {
    if (qh < 1 || kvh < 1 || tg_shape(q, 2) % qh || tg_shape(k, 2) % kvh || tg_shape(v, 2) % kvh) {
      res[0] = nn_err(n, "3-dim inputs need q_num_heads and kv_num_heads dividing their hidden sizes");
      return nn_done(n, out, 4, res);
    }
    q = split_heads(q, qh);
    k = split_heads(k, kvh);
    v = split_heads(v, kvh);
  }
  int64_t b = tg_shape(q, 0), heads = tg_shape(q, 1), sq = tg_shape(q, 2), d = tg_shape(q, 3);
  if (pk) {
    tg_tensor *kk[2] = {pk, k}, *vv[2] = {pv, v};
    k = tg_cat(2, kk, 2);
    v = tg_cat(2, vv, 2);
  }
  res[1] = k;
  res[2] = v;
  if (!k || !v) {
    res[0] = nn_err(n, "the past cache does not fit K and V: %s", tg_error());
    return nn_done(n, out, 4, res);
  }
  int64_t kvheads = tg_shape(k, 1), skv = tg_shape(k, 2), past = pk ? tg_shape(pk, 2) : 0;
  if (tg_shape(k, 0) != b || tg_shape(k, 3) != d || tg_shape(v, 1) != kvheads || tg_shape(v, 2) != skv ||
      heads % kvheads) {
    res[0] = nn_err(n, "K (%lld heads of %lld) and V do not fit Q (%lld heads of %lld)", (long long)kvheads,
                    (long long)tg_shape(k, 3), (long long)heads, (long long)d);
    return nn_done(n, out, 4, res);
  }

  /* the bias (q, kv), (b, 1, q, kv) or the mask's broadcast shape: 0 or -inf, or the float mask's values */
  bool causal = onnx_attr_int(n, "is_causal", 0) != 0;
  int64_t left = onnx_attr_int(n, "left_window_size", -1), right = onnx_attr_int(n, "right_window_size", -1);
  tg_tensor *bias = NULL, *boff = NULL;
  if (nonpad) {
    if (tg_numel(nonpad) != b) {
      res[0] = nn_err(n, "nonpad_kv_seqlen has %lld values for a batch of %lld", (long long)tg_numel(nonpad), (long long)b);
      return nn_done(n, out, 4, res);
    }
    int64_t one[1] = {b};
    boff = tg_sub_scalar(tg_reshape(tg_cast(nonpad, TG_INT64), 1, one), (double)sq);
  }
  if (mask) {
    int mn = tg_ndim(mask);
    int64_t pad = mn ? skv - tg_shape(mask, mn - 1) : 0;
    if (mn < 1 || pad < 0) {
      res[0] = nn_err(n, "attn_mask's last axis is longer than the %lld keys", (long long)skv);
      return nn_done(n, out, 4, res);
    }
    bool is_bool = tg_dtype_of(mask) == TG_BOOL;
    if (pad > 0) {   /* keys past the mask's end: masked */
      int64_t pairs[2 * TG_MAX_DIMS] = {0};
      pairs[2 * (mn - 1) + 1] = pad;
      mask = is_bool ? tg_cast(tg_pad_axes(tg_cast(mask, TG_INT32), mn, pairs, 0), TG_BOOL)
                     : tg_pad_axes(mask, mn, pairs, -INFINITY);
    }
    bias = is_bool ? tg_cast(tg_where_scalars(mask, 0, -INFINITY), dt) : tg_cast(mask, dt);
  }
  if (causal) {
    tg_tensor *cb = position_bias(dt, sq, skv, past, boff, true, -1, -1);
    bias = bias ? tg_add(bias, cb) : cb;
  }
  if (left >= 0 || right >= 0) {
    tg_tensor *wb = position_bias(dt, sq, skv, past, boff, false, left, right);
    bias = bias ? tg_add(bias, wb) : wb;
  }
  if (nonpad) {
    int64_t ks[2] = {1, skv}, bs[2] = {b, 1}, s4[4] = {b, 1, 1, skv};
    tg_tensor *j = tg_reshape(tg_arange(TG_INT64, 0, (double)skv, 1), 2, ks);
    tg_tensor *ok = tg_lt(j, tg_reshape(tg_cast(nonpad, TG_INT64), 2, bs));
    tg_tensor *pb = tg_cast(tg_reshape(tg_where_scalars(ok, 0, -INFINITY), 4, s4), dt);
    bias = bias ? tg_add(bias, pb) : pb;
  }

  /* grouped-query heads: KV head h serves query heads h * reps .. h * reps + reps - 1 */
  tg_tensor *kr = k, *vr = v;
  if (kvheads != heads) {
    int64_t reps = heads / kvheads, e5[5] = {b, kvheads, reps, skv, d}, r4[4] = {b, heads, skv, d};
    int64_t e5v[5] = {b, kvheads, reps, skv, tg_shape(v, 3)}, r4v[4] = {b, heads, skv, tg_shape(v, 3)};
    kr = tg_reshape(tg_expand(tg_unsqueeze(k, 2), 5, e5), 4, r4);
    vr = tg_reshape(tg_expand(tg_unsqueeze(v, 2), 5, e5v), 4, r4v);
  }
  double scale = onnx_attr_has(n, "scale") ? onnx_attr_float(n, "scale", 1) : 1 / sqrt((double)d);
  double rs = sqrt(scale);
  tg_tensor *qk = tg_matmul(tg_mul_scalar(q, rs), tg_transpose(tg_mul_scalar(kr, rs), 2, 3));
  double softcap = onnx_attr_float(n, "softcap", 0);
  if (softcap > 0) qk = tg_mul_scalar(tg_tanh(tg_div_scalar(qk, softcap)), softcap);
  tg_tensor *with_bias = bias ? tg_add(qk, bias) : qk;
  int64_t mode = onnx_attr_int(n, "qk_matmul_output_mode", 0);
  tg_tensor *qk_out = mode == 2 ? with_bias : qk;
  tg_tensor *x = with_bias;
  if (onnx_attr_has(n, "softmax_precision")) {
    tg_dtype sp;
    if (!onnx_dtype_to_tg((int32_t)onnx_attr_int(n, "softmax_precision", 1), &sp)) {
      res[0] = nn_err(n, "softmax_precision %lld is not supported", (long long)onnx_attr_int(n, "softmax_precision", 1));
      return nn_done(n, out, 4, res);
    }
    x = tg_cast(x, sp);
  }
  /* softmax, a fully masked row (max -inf) giving 0 rather than NaN */
  int last = 3;
  tg_tensor *mx = tg_max(x, 1, &last, true);
  tg_tensor *e = tg_exp(tg_sub(x, tg_where(tg_eq_scalar(mx, -INFINITY), tg_zeros_like(mx), mx)));
  tg_tensor *sum = tg_sum(e, 1, &last, true);
  tg_tensor *p = tg_div(e, tg_where(tg_eq_scalar(sum, 0), tg_full_like(sum, 1), sum));
  if (bias) {
    int bl = tg_ndim(bias) - 1;
    tg_tensor *dead = tg_eq_scalar(tg_max(bias, 1, &bl, true), -INFINITY);
    p = tg_where(dead, tg_zeros_like(p), p);
  }
  if (mode == 3) qk_out = p;
  p = tg_cast(p, dt);
  tg_tensor *y = tg_matmul(p, vr);
  if (nd == 3) {
    int perm[4] = {0, 2, 1, 3};
    int64_t s3[3] = {b, sq, heads * tg_shape(v, 3)};
    y = tg_reshape(tg_permute(y, 4, perm), 3, s3);
  }
  res[0] = y ? tg_cast(y, dt) : nn_err(n, "%s", tg_error());
  res[3] = qk_out ? tg_cast(qk_out, dt) : NULL;
  return nn_done(n, out, 4, res);
}

/* ---- RotaryEmbedding (opset 23) ------------------------------------------------------------------------- */

/* x's last axis [lo, hi) */
static tg_tensor *last_range(tg_tensor *x, int64_t lo, int64_t hi) {
  int nd = tg_ndim(x);
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) b[2 * i] = 0, b[2 * i + 1] = tg_shape(x, i);
  b[2 * (nd - 1)] = lo;
  b[2 * (nd - 1) + 1] = hi;
  return tg_shrink(x, nd, b);
}

/* X (b, heads, s, d) or (b, s, heads * d) rotated in its first rotary_embedding_dim features per head: pairs
 * (x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2), the pairs being the halves of those features or (interleaved)
 * neighbours; cos and sin (b, s, dim / 2), or rows of (positions, dim / 2) picked by position_ids (b, s) */
tg_status onnx_nn_rotary_embedding(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *x = NN_IN(0), *cosc = NN_IN(1), *sinc = NN_IN(2), *pos = NN_IN(3), *y = NULL;
  tg_scope_begin();
  int nd = x ? tg_ndim(x) : 0;
  int64_t nh = onnx_attr_int(n, "num_heads", 0);
  if (!x || !cosc || !sinc || (nd != 3 && nd != 4) || (nd == 3 && (nh < 1 || tg_shape(x, 2) % nh))) {
    y = nn_err(n, "needs X of 4 dims, or of 3 with num_heads dividing its last axis, and the cos and sin caches");
    return nn_done(n, out, 1, &y);
  }
  int perm[4] = {0, 2, 1, 3};
  tg_tensor *h = nd == 4 ? tg_permute(x, 4, perm)
                         : tg_reshape(x, 4, (int64_t[]){tg_shape(x, 0), tg_shape(x, 1), nh, tg_shape(x, 2) / nh});
  int64_t b = tg_shape(h, 0), s = tg_shape(h, 1), heads = tg_shape(h, 2), d = tg_shape(h, 3);
  int64_t rd = onnx_attr_int(n, "rotary_embedding_dim", 0);
  if (rd == 0) rd = d;
  bool inter = onnx_attr_int(n, "interleaved", 0) != 0;
  if (rd < 2 || rd > d || rd % 2) {
    y = nn_err(n, "rotary_embedding_dim %lld for a head size of %lld", (long long)rd, (long long)d);
    return nn_done(n, out, 1, &y);
  }
  int64_t half = rd / 2, cs[4] = {b, s, 1, half};
  tg_dtype dt = tg_dtype_of(x);
  if (pos) {   /* the caches' rows at the positions */
    int64_t flat = tg_numel(pos);
    tg_tensor *ids = tg_reshape(tg_cast(pos, TG_INT64), 1, &flat);
    cosc = tg_index_select(cosc, 0, ids);
    sinc = tg_index_select(sinc, 0, ids);
  }
  if (!cosc || !sinc || tg_numel(cosc) != b * s * half || tg_numel(sinc) != b * s * half) {
    y = nn_err(n, "the caches do not hold (%lld, %lld, %lld) values", (long long)b, (long long)s, (long long)half);
    return nn_done(n, out, 1, &y);
  }
  tg_tensor *cv = tg_cast(tg_reshape(cosc, 4, cs), dt), *sv = tg_cast(tg_reshape(sinc, 4, cs), dt);
  tg_tensor *rot = last_range(h, 0, rd), *x1, *x2;
  if (inter) {   /* neighbours: (.., half, 2) */
    int64_t p5[5] = {b, s, heads, half, 2}, h4[4] = {b, s, heads, half};
    tg_tensor *pairs = tg_reshape(rot, 5, p5);
    x1 = tg_reshape(last_range(pairs, 0, 1), 4, h4);
    x2 = tg_reshape(last_range(pairs, 1, 2), 4, h4);
  } else {
    x1 = last_range(rot, 0, half);
    x2 = last_range(rot, half, rd);
  }
  tg_tensor *re = tg_sub(tg_mul(cv, x1), tg_mul(sv, x2)), *im = tg_add(tg_mul(sv, x1), tg_mul(cv, x2));
  tg_tensor *parts[2] = {re, im};
  tg_tensor *r = inter ? tg_reshape(tg_stack(2, parts, 4), 4, (int64_t[]){b, s, heads, rd}) : tg_cat(2, parts, 3);
  if (rd < d) {
    tg_tensor *all[2] = {r, last_range(h, rd, d)};
    r = tg_cat(2, all, 3);
  }
  y = nd == 4 ? tg_permute(r, 4, perm) : tg_reshape(r, 3, tg_shape_ptr(x));
  y = y ? tg_cast(y, dt) : nn_err(n, "%s", tg_error());
  return nn_done(n, out, 1, &y);
}

/* ---- TensorScatter (opset 24): a KV cache update ---------------------------------------------------------- */

/* past (B, .., M, ..) with update (B, .., S, ..) written along axis from position write_indices[b] of each batch
 * row (0 by default), wrapping modulo M in circular mode. Lazily: cache position p of row b takes update element
 * s = p - w[b] (mod M) when 0 <= s < S, as a select summed over a one-hot (b, p, s) comparison */
tg_status onnx_nn_tensor_scatter(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  tg_tensor *past = NN_IN(0), *upd = NN_IN(1), *wi = NN_IN(2), *y = NULL;
  tg_scope_begin();
  const char *mode = onnx_attr_string(n, "mode", "linear");
  bool circular = !strcmp(mode, "circular");
  int r = past ? tg_ndim(past) : 0;
  int64_t axis = onnx_attr_int(n, "axis", -2);
  if (axis < 0) axis += r;
  bool fits = past && upd && tg_ndim(upd) == r && r >= 2 && axis >= 1 && axis < r && tg_dtype_of(upd) == tg_dtype_of(past);
  for (int i = 0; fits && i < r; i++) fits = i == axis ? tg_shape(upd, i) <= tg_shape(past, i) : tg_shape(upd, i) == tg_shape(past, i);
  if (!fits || (!circular && strcmp(mode, "linear"))) {
    y = nn_err(n, "needs past_cache and update alike but on axis %lld (not the batch axis), mode linear or circular",
               (long long)onnx_attr_int(n, "axis", -2));
    return nn_done(n, out, 1, &y);
  }
  int64_t b = tg_shape(past, 0), m = tg_shape(past, (int)axis), s = tg_shape(upd, (int)axis);
  int64_t bs[2] = {b, 1}, ms[2] = {1, m}, ss[3] = {1, 1, s}, bm3[3] = {b, m, 1};
  tg_tensor *w = wi ? tg_reshape(tg_cast(wi, TG_INT64), 2, bs) : tg_zeros(TG_INT64, 2, bs);
  if (wi && tg_numel(wi) != b) {
    y = nn_err(n, "write_indices has %lld values for a batch of %lld", (long long)tg_numel(wi), (long long)b);
    return nn_done(n, out, 1, &y);
  }
  tg_tensor *src = tg_sub(tg_reshape(tg_arange(TG_INT64, 0, (double)m, 1), 2, ms), w);   /* (B, M) */
  if (circular) src = tg_mod_scalar(src, (double)m);
  tg_tensor *hot = tg_eq(tg_reshape(src, 3, bm3), tg_reshape(tg_arange(TG_INT64, 0, (double)s, 1), 3, ss));   /* (B, M, S) */
  tg_tensor *valid = tg_mul(tg_ge_scalar(src, 0), tg_lt_scalar(src, (double)s));   /* (B, M) */
  /* hot as (B, 1.., M, S, 1..) against update (B, .., 1, S, ..): the selected element summed over S */
  int64_t hs[TG_MAX_DIMS + 1], vs[TG_MAX_DIMS];
  for (int i = 0; i <= r; i++) hs[i] = 1;
  for (int i = 0; i < r; i++) vs[i] = 1;
  hs[0] = vs[0] = b, hs[axis] = vs[axis] = m, hs[axis + 1] = s;
  tg_tensor *picked = tg_where(tg_reshape(hot, r + 1, hs), tg_unsqueeze(upd, (int)axis), tg_zeros_like(tg_unsqueeze(upd, (int)axis)));
  int sum_axis = (int)axis + 1;
  tg_tensor *gathered = tg_sum_dtype(picked, 1, &sum_axis, false, tg_dtype_of(past));
  y = tg_where(tg_reshape(valid, r, vs), gathered, past);
  y = y ? tg_cast(y, tg_dtype_of(past)) : nn_err(n, "%s", tg_error());
  return nn_done(n, out, 1, &y);
}
