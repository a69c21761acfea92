/* ops_nn_rnn.c — ONNX's recurrent layers RNN, GRU and LSTM, unrolled over the (static) sequence length.
 *
 * Per direction, the input projection of every step is one matmul (X @ W^T + Wb over the whole sequence);
 * each step then adds H @ R^T + Rb and applies the gates, as onnx/reference/ops/op_{rnn,gru,lstm}.py.
 * Activations (f, g, h) follow the activations attribute with their alpha/beta; clip bounds the gate inputs.
 * sequence_lens: a batch entry's steps past its length leave its state unchanged and give zeros in Y
 * (onnxruntime's behaviour; the reference ignores the input), forward direction only when lengths differ. */
#include <string.h>
#include <strings.h>

#include "ops_nn.h"

typedef enum { A_SIGMOID, A_TANH, A_RELU, A_LEAKY, A_HARDSIG, A_AFFINE, A_THRESH, A_SCALEDTANH, A_ELU, A_SOFTSIGN, A_SOFTPLUS } act_kind;
typedef struct act { act_kind k; double a, b; } act;

static tg_tensor *apply(act f, tg_tensor *x) {
  switch (f.k) {
    case A_SIGMOID: return tg_sigmoid(x);
    case A_TANH: return tg_tanh(x);
    case A_RELU: return tg_relu(x);
    case A_LEAKY: return tg_leaky_relu(x, f.a);
    case A_HARDSIG: return tg_clamp(tg_add_scalar(tg_mul_scalar(x, f.a), f.b), 0, 1);
    case A_AFFINE: return tg_add_scalar(tg_mul_scalar(x, f.a), f.b);
    case A_THRESH: return tg_where_scalar(tg_gt_scalar(x, f.a), x, 0);
    case A_SCALEDTANH: return tg_mul_scalar(tg_tanh(tg_mul_scalar(x, f.b)), f.a);
    case A_ELU: return tg_elu(x, f.a);
    case A_SOFTSIGN: return tg_softsign(x);
    case A_SOFTPLUS: default: return tg_softplus(x);
  }
}

/* the node's activations: per direction, per (the layer's count) functions; false with the error recorded */
static bool read_acts(const onnx_node *n, int ndir, int per, const act_kind *dflt, act *out) {
  const onnx_attr *a = onnx_attr_find(n, "activations");
  const float *al = NULL, *be = NULL;
  int64_t nal = onnx_attr_floats(n, "activation_alpha", &al), nbe = onnx_attr_floats(n, "activation_beta", &be), ia = 0, ib = 0;
  static const struct { const char *name; act_kind k; int na, nb; double a, b; } tab[] = {
      {"Sigmoid", A_SIGMOID, 0, 0, 0, 0},          {"Tanh", A_TANH, 0, 0, 0, 0},
      {"Relu", A_RELU, 0, 0, 0, 0},                {"LeakyRelu", A_LEAKY, 1, 0, 0.01, 0},
      {"HardSigmoid", A_HARDSIG, 1, 1, 0.2, 0.5},  {"Affine", A_AFFINE, 1, 1, 1, 0},
      {"ThresholdedRelu", A_THRESH, 1, 0, 1, 0},   {"ScaledTanh", A_SCALEDTANH, 1, 1, 1, 1},
      {"Elu", A_ELU, 1, 0, 1, 0},                  {"Softsign", A_SOFTSIGN, 0, 0, 0, 0},
      {"Softplus", A_SOFTPLUS, 0, 0, 0, 0},
  };
  if (a && (a->type != ONNX_ATTR_STRINGS || (a->nstrings != per && a->nstrings != per * ndir))) {
    nn_err(n, "activations needs %d or %d names", per, per * ndir);
    return false;
  }
  for (int i = 0; i < per * ndir; i++) {
    if (!a) {
      out[i] = (act){dflt[i % per], 0, 0};
      continue;
    }
    const char *name = a->strings[i % a->nstrings];
    size_t t;
    for (t = 0; t < sizeof tab / sizeof tab[0] && strcasecmp(tab[t].name, name); t++) {}
    if (t == sizeof tab / sizeof tab[0]) {
      nn_err(n, "activation '%s' is not supported", name);
      return false;
    }
    out[i] = (act){tab[t].k, tab[t].a, tab[t].b};
    if (i < a->nstrings) {  /* alphas and betas are consumed in order by the functions that take them */
      if (tab[t].na && ia < nal) out[i].a = al[ia++];
      if (tab[t].nb && ib < nbe) out[i].b = be[ib++];
    }
  }
  return true;
}

typedef enum { K_RNN, K_GRU, K_LSTM } rnn_kind;

/* slice [lo, hi) of axis of t */
static tg_tensor *cut(tg_tensor *t, int axis, int64_t lo, int64_t hi) {
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < tg_ndim(t); i++) b[2 * i] = 0, b[2 * i + 1] = tg_shape(t, i);
  b[2 * axis] = lo;
  b[2 * axis + 1] = hi;
  return tg_shrink(t, tg_ndim(t), b);
}

/* one direction over xs (S, B, I) in order; Y (S, B, H), final h and c */
static void run_dir(rnn_kind k, const act *f, double clip, bool input_forget, bool linear_before_reset, tg_tensor *xs,
                    tg_tensor *w, tg_tensor *r, tg_tensor *b, tg_tensor *p, tg_tensor *h, tg_tensor *cst, tg_tensor *valid,
                    int64_t hs, tg_tensor **y, tg_tensor **yh, tg_tensor **yc) {
  int64_t S = tg_shape(xs, 0), G = k == K_RNN ? 1 : k == K_GRU ? 3 : 4;
  tg_tensor *xw = tg_matmul(xs, tg_transpose(w, 0, 1));  /* (S, B, G*H) */
  tg_tensor *wb = b ? cut(b, 0, 0, G * hs) : NULL, *rb = b ? cut(b, 0, G * hs, 2 * G * hs) : NULL;
  if (wb) xw = tg_add(xw, wb);
  tg_tensor *rt = tg_transpose(r, 0, 1);  /* (H, G*H) */
  tg_tensor *steps[1024];
  for (int64_t t = 0; t < S; t++) {
    tg_tensor *xt = tg_reshape(cut(xw, 0, t, t + 1), 2, (int64_t[]){-1, G * hs});
    tg_tensor *hprev = h, *cprev = cst, *hn = NULL, *cn = NULL;
    if (k == K_GRU) {
      /* z, r from x and h together; the candidate's recurrent part is gated by r before (default) or after
       * (linear_before_reset) the matmul */
      tg_tensor *rzr = cut(rt, 1, 0, 2 * hs), *rh = cut(rt, 1, 2 * hs, 3 * hs);
      tg_tensor *g = tg_add(cut(xt, 1, 0, 2 * hs), tg_matmul(h, rzr));
      if (rb) g = tg_add(g, cut(rb, 0, 0, 2 * hs));
      if (clip > 0) g = tg_clamp(g, -clip, clip);
      tg_tensor *z = apply(f[0], cut(g, 1, 0, hs)), *rr = apply(f[0], cut(g, 1, hs, 2 * hs));
      tg_tensor *rbh = rb ? cut(rb, 0, 2 * hs, 3 * hs) : NULL, *cand;
      if (linear_before_reset) {
        tg_tensor *hr = tg_matmul(h, rh);
        cand = tg_mul(rr, rbh ? tg_add(hr, rbh) : hr);
      } else {
        cand = tg_matmul(tg_mul(rr, h), rh);
        if (rbh) cand = tg_add(cand, rbh);
      }
      cand = tg_add(cut(xt, 1, 2 * hs, 3 * hs), cand);
      if (clip > 0) cand = tg_clamp(cand, -clip, clip);
      tg_tensor *hh = apply(f[1], cand);
      hn = tg_add(tg_mul(tg_rsub_scalar(z, 1), hh), tg_mul(z, h));
    } else {
      tg_tensor *g = tg_add(xt, tg_matmul(h, rt));
      if (rb) g = tg_add(g, rb);
      if (clip > 0) g = tg_clamp(g, -clip, clip);
      if (k == K_RNN) {
        hn = apply(f[0], g);
      } else {  /* gates i, o, f, c; peepholes p = (pi, po, pf) */
        tg_tensor *gi = cut(g, 1, 0, hs), *go = cut(g, 1, hs, 2 * hs), *gf = cut(g, 1, 2 * hs, 3 * hs), *gc = cut(g, 1, 3 * hs, 4 * hs);
        if (p) gi = tg_add(gi, tg_mul(cut(p, 0, 0, hs), cst));
        if (p) gf = tg_add(gf, tg_mul(cut(p, 0, 2 * hs, 3 * hs), cst));
        tg_tensor *i = apply(f[0], gi);
        tg_tensor *fg = input_forget ? tg_rsub_scalar(i, 1) : apply(f[0], gf);
        cn = tg_add(tg_mul(fg, cst), tg_mul(i, apply(f[1], gc)));
        if (p) go = tg_add(go, tg_mul(cut(p, 0, hs, 2 * hs), cn));
        hn = tg_mul(apply(f[0], go), apply(f[2], cn));
      }
    }
    if (valid) {  /* (S, B, 1): steps past a sequence's end keep the state */
      tg_tensor *v = tg_reshape(cut(valid, 0, t, t + 1), 2, (int64_t[]){-1, 1});
      hn = tg_where(v, hn, hprev);
      if (cn) cn = tg_where(v, cn, cprev);
      steps[t] = tg_where(v, hn, tg_zeros_like(hn));
    } else {
      steps[t] = hn;
    }
    h = hn;
    if (cn) cst = cn;
  }
  *y = tg_stack((int)S, steps, 0);
  *yh = h;
  *yc = cst;
}

static tg_status rnn_common(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out, rnn_kind k) {
  tg_tensor *x = NN_IN(0), *w = NN_IN(1), *r = NN_IN(2), *b = NN_IN(3), *h0 = NN_IN(5);
  tg_tensor *c0 = k == K_LSTM ? NN_IN(6) : NULL, *p = k == K_LSTM ? NN_IN(7) : NULL, *res[3] = {NULL, NULL, NULL};
  const char *dir = onnx_attr_string(n, "direction", "forward");
  int ndir = !strcmp(dir, "bidirectional") ? 2 : 1, per = k == K_RNN ? 1 : k == K_GRU ? 2 : 3;
  bool reverse = !strcmp(dir, "reverse"), layout = onnx_attr_int(n, "layout", 0) != 0;
  int64_t G = k == K_RNN ? 1 : k == K_GRU ? 3 : 4, hs = onnx_attr_int(n, "hidden_size", 0);
  double clip = onnx_attr_float(n, "clip", 0);
  static const act_kind d_rnn[] = {A_TANH}, d_gru[] = {A_SIGMOID, A_TANH}, d_lstm[] = {A_SIGMOID, A_TANH, A_TANH};
  act acts[6];
  tg_scope_begin();
  if (!x || !w || !r || tg_ndim(x) != 3 || tg_ndim(w) != 3 || tg_ndim(r) != 3) {
    res[0] = nn_err(n, "needs X, W and R of rank 3");
    return nn_done(n, out, 3, res);
  }
  if (!hs) hs = tg_shape(r, 2);
  if (hs < 1 || hs > ((int64_t)1 << 40)) {
    res[0] = nn_err(n, "hidden_size %lld out of range", (long long)hs);
    return nn_done(n, out, 3, res);
  }
  if ((strcmp(dir, "forward") && !reverse && ndir != 2) || tg_shape(w, 0) != ndir || tg_shape(w, 1) != G * hs ||
      tg_shape(r, 1) != G * hs || tg_shape(r, 2) != hs) {
    res[0] = nn_err(n, "direction '%s' and hidden_size %lld do not fit W and R", dir, (long long)hs);
    return nn_done(n, out, 3, res);
  }
  if (!read_acts(n, ndir, per, k == K_RNN ? d_rnn : k == K_GRU ? d_gru : d_lstm, acts)) return nn_done(n, out, 3, res);
  if (layout) x = tg_transpose(x, 0, 1);  /* (B, S, I) -> (S, B, I) */
  int64_t S = tg_shape(x, 0), B = tg_shape(x, 1);
  if (S > 1024) {
    res[0] = nn_err(n, "sequence of %lld steps (at most 1024 are unrolled)", (long long)S);
    return nn_done(n, out, 3, res);
  }
  if (layout && h0) h0 = tg_transpose(h0, 0, 1);
  if (layout && c0) c0 = tg_transpose(c0, 0, 1);
  tg_tensor *valid = NULL;
  if (NN_IN(4)) {
    int64_t lens[4096], cnt;
    if (tg_numel(NN_IN(4)) > 4096) {
      res[0] = nn_err(n, "sequence_lens of %lld values", (long long)tg_numel(NN_IN(4)));
      return nn_done(n, out, 3, res);
    }
    if (onnx_input_ints(c, n, in, 4, lens, 4096, &cnt) != TG_OK) return nn_done(n, out, 3, res);
    bool full = cnt == B;
    for (int64_t i = 0; i < cnt; i++) full &= lens[i] == S;
    if (!full) {
      if (reverse || ndir == 2) {
        res[0] = nn_err(n, "sequence_lens shorter than the sequence with direction '%s' is not supported", dir);
        return nn_done(n, out, 3, res);
      }
      tg_tensor *steps = tg_reshape(tg_arange(TG_INT64, 0, (double)S, 1), 3, (int64_t[]){S, 1, 1});
      valid = tg_lt(steps, tg_reshape(tg_cast(NN_IN(4), TG_INT64), 3, (int64_t[]){1, B, 1}));
    }
  }
  tg_tensor *ys[2], *yhs[2], *ycs[2];
  for (int d = 0; d < ndir; d++) {
    bool rev = reverse || d == 1;
    tg_index id[1] = {TG_IX_INT(d)};
    tg_tensor *wd = tg_getitem(w, 1, id), *rd = tg_getitem(r, 1, id), *bd = b ? tg_getitem(b, 1, id) : NULL;
    tg_tensor *pd = p ? tg_getitem(p, 1, id) : NULL;
    tg_tensor *hd = h0 ? tg_getitem(h0, 1, id) : tg_zeros(tg_dtype_of(x), 2, (int64_t[]){B, hs});
    tg_tensor *cd = k == K_LSTM ? (c0 ? tg_getitem(c0, 1, id) : tg_zeros(tg_dtype_of(x), 2, (int64_t[]){B, hs})) : NULL;
    tg_tensor *xs = rev ? tg_flip(x, 1, (int[]){0}) : x;
    run_dir(k, acts + d * per, clip, onnx_attr_int(n, "input_forget", 0) != 0,
            onnx_attr_int(n, "linear_before_reset", 0) != 0, xs, wd, rd, bd, pd, hd, cd, valid, hs, &ys[d], &yhs[d], &ycs[d]);
    if (rev) ys[d] = tg_flip(ys[d], 1, (int[]){0});
  }
  res[0] = tg_stack(ndir, ys, 1);      /* (S, D, B, H) */
  res[1] = tg_stack(ndir, yhs, 0);     /* (D, B, H) */
  res[2] = k == K_LSTM ? tg_stack(ndir, ycs, 0) : NULL;
  if (layout) {
    res[0] = tg_permute(res[0], 4, (int[]){2, 0, 1, 3});
    res[1] = tg_transpose(res[1], 0, 1);
    if (res[2]) res[2] = tg_transpose(res[2], 0, 1);
  }
  if (k != K_LSTM && nn_wants(n, 2)) res[2] = nn_err(n, "has 2 outputs");
  return nn_done(n, out, 3, res);
}

tg_status onnx_nn_rnn(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  return rnn_common(c, n, in, out, K_RNN);
}

tg_status onnx_nn_gru(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  return rnn_common(c, n, in, out, K_GRU);
}

tg_status onnx_nn_lstm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  return rnn_common(c, n, in, out, K_LSTM);
}
