/* ref_llm.c — the reference forward of ref_llm.h: loops over rows and heads, in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_llm.h"

/* tensor name as floats (numel of it), or NULL when absent */
static float *get(tg_gguf *g, const char *name, bool *ok) {
  if (tg_gguf_find_tensor(g, name) < 0) return NULL;
  tg_tensor *t = tg_cast(tg_gguf_tensor(g, name), TG_FLOAT32);
  int64_t n = tg_numel(t);
  float *f = n > 0 ? malloc((size_t)n * sizeof *f) : NULL;
  if (!f || tg_to_host(t, f, (size_t)n * sizeof *f) != TG_OK) {
    free(f);
    f = NULL;
    *ok = false;
  }
  tg_free(t);
  return f;
}

bool ref_llm_from_gguf(ref_llm *r, tg_gguf *g, const tg_llm_config *c) {
  memset(r, 0, sizeof *r);
  r->c = *c;
  bool ok = true;
  int64_t kv = c->n_kv_heads * c->head_dim;
  r->layers = calloc((size_t)c->n_layers, sizeof *r->layers);
  r->kc = calloc((size_t)(c->n_layers * c->max_seq * kv), sizeof *r->kc);
  r->vc = calloc((size_t)(c->n_layers * c->max_seq * kv), sizeof *r->vc);
  if (!r->layers || !r->kc || !r->vc) return false;
  r->emb = get(g, "token_embd.weight", &ok);
  r->final_norm = get(g, "output_norm.weight", &ok);
  r->out = get(g, "output.weight", &ok);
  r->factors = get(g, "rope_freqs.weight", &ok);
  for (int64_t l = 0; l < c->n_layers; l++) {
    ref_llm_layer *y = &r->layers[l];
    char n[64];
#define G(field, suffix) (snprintf(n, sizeof n, "blk.%lld." suffix, (long long)l), y->field = get(g, n, &ok))
    G(att_norm, "attn_norm.weight"); G(wq, "attn_q.weight"); G(wk, "attn_k.weight"); G(wv, "attn_v.weight");
    G(wo, "attn_output.weight"); G(bq, "attn_q.bias"); G(bk, "attn_k.bias"); G(bv, "attn_v.bias");
    G(q_norm, "attn_q_norm.weight"); G(k_norm, "attn_k_norm.weight"); G(ffn_norm, "ffn_norm.weight");
    G(w1, "ffn_gate.weight"); G(w2, "ffn_down.weight"); G(w3, "ffn_up.weight");
#undef G
  }
  return ok && r->emb && r->final_norm;
}

void ref_llm_free(ref_llm *r) {
  for (int64_t l = 0; r->layers && l < r->c.n_layers; l++) {
    ref_llm_layer *y = &r->layers[l];
    float *all[] = {y->att_norm, y->wq, y->wk, y->wv, y->wo, y->bq, y->bk, y->bv, y->q_norm, y->k_norm, y->ffn_norm,
                    y->w1, y->w2, y->w3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
  }
  free(r->layers);
  free(r->emb);
  free(r->final_norm);
  free(r->out);
  free(r->factors);
  free(r->kc);
  free(r->vc);
  memset(r, 0, sizeof *r);
}

/* o = w x (+ b): w (rows, cols) row-major */
static void matvec(double *o, const float *w, const float *b, const double *x, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i++) {
    double s = b ? b[i] : 0;
    for (int64_t j = 0; j < cols; j++) s += (double)w[i * cols + j] * x[j];
    o[i] = s;
  }
}

static void rmsnorm(double *o, const double *x, const float *w, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
  double r = 1 / sqrt(ss / (double)n + eps);
  for (int64_t i = 0; i < n; i++) o[i] = x[i] * r * w[i];
}

/* one head's vector x (hd) turned by position pos: pairs (2i, 2i+1), or (i, i + hd/2) for neox */
static void rope(const ref_llm *r, double *x, int64_t pos) {
  int64_t hd = r->c.head_dim, half = hd / 2;
  for (int64_t i = 0; i < half; i++) {
    double f = 1.0 / pow(r->c.rope_base, (double)(2 * i) / (double)hd);
    if (r->factors) f /= r->factors[i];
    double a = (double)pos * f, c = cos(a), s = sin(a);
    int64_t i0 = r->c.rope_neox ? i : 2 * i, i1 = r->c.rope_neox ? i + half : 2 * i + 1;
    double x0 = x[i0], x1 = x[i1];
    x[i0] = x0 * c - x1 * s;
    x[i1] = x1 * c + x0 * s;
  }
}

void ref_llm_step(ref_llm *r, int32_t token, float *logits) {
  const tg_llm_config *c = &r->c;
  int64_t d = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, kvd = nkv * hd, qd = nh * hd;
  int64_t T = c->max_seq, pos = r->pos, big = d > c->hidden_dim ? d : c->hidden_dim;
  if (qd > big) big = qd;
  if (c->vocab_size > big) big = c->vocab_size;
  double *x = calloc((size_t)d, sizeof *x), *h = calloc((size_t)big, sizeof *h), *q = calloc((size_t)qd, sizeof *q);
  double *att = calloc((size_t)qd, sizeof *att), *o = calloc((size_t)big, sizeof *o);
  double *g1 = calloc((size_t)c->hidden_dim, sizeof *g1), *g3 = calloc((size_t)c->hidden_dim, sizeof *g3);
  double *sc = calloc((size_t)T, sizeof *sc);
  for (int64_t i = 0; i < d; i++) x[i] = r->emb[(int64_t)token * d + i];
  for (int64_t l = 0; l < c->n_layers; l++) {
    const ref_llm_layer *y = &r->layers[l];
    double *kc = r->kc + l * T * kvd, *vc = r->vc + l * T * kvd;
    rmsnorm(h, x, y->att_norm, d, c->norm_eps);
    matvec(q, y->wq, y->bq, h, qd, d);
    matvec(kc + pos * kvd, y->wk, y->bk, h, kvd, d);
    matvec(vc + pos * kvd, y->wv, y->bv, h, kvd, d);
    for (int64_t k = 0; k < nh; k++) {
      if (y->q_norm) rmsnorm(q + k * hd, q + k * hd, y->q_norm, hd, c->norm_eps);
      rope(r, q + k * hd, pos);
    }
    for (int64_t k = 0; k < nkv; k++) {
      if (y->k_norm) rmsnorm(kc + pos * kvd + k * hd, kc + pos * kvd + k * hd, y->k_norm, hd, c->norm_eps);
      rope(r, kc + pos * kvd + k * hd, pos);
    }
    for (int64_t k = 0; k < nh; k++) {
      int64_t g = k / (nh / nkv);
      double mx = -INFINITY, sum = 0;
      for (int64_t t = 0; t <= pos; t++) {
        double s = 0;
        for (int64_t i = 0; i < hd; i++) s += q[k * hd + i] * kc[t * kvd + g * hd + i];
        sc[t] = s / sqrt((double)hd);
        if (sc[t] > mx) mx = sc[t];
      }
      for (int64_t t = 0; t <= pos; t++) sum += sc[t] = exp(sc[t] - mx);
      for (int64_t i = 0; i < hd; i++) {
        double a = 0;
        for (int64_t t = 0; t <= pos; t++) a += sc[t] / sum * vc[t * kvd + g * hd + i];
        att[k * hd + i] = a;
      }
    }
    matvec(o, y->wo, NULL, att, d, qd);
    for (int64_t i = 0; i < d; i++) x[i] += o[i];
    rmsnorm(h, x, y->ffn_norm, d, c->norm_eps);
    matvec(g1, y->w1, NULL, h, c->hidden_dim, d);
    matvec(g3, y->w3, NULL, h, c->hidden_dim, d);
    for (int64_t i = 0; i < c->hidden_dim; i++) g1[i] = g1[i] / (1 + exp(-g1[i])) * g3[i];
    matvec(o, y->w2, NULL, g1, d, c->hidden_dim);
    for (int64_t i = 0; i < d; i++) x[i] += o[i];
  }
  rmsnorm(h, x, r->final_norm, d, c->norm_eps);
  matvec(o, r->out ? r->out : r->emb, NULL, h, c->vocab_size, d);
  for (int64_t i = 0; i < c->vocab_size; i++) logits[i] = (float)o[i];
  r->pos++;
  free(x), free(h), free(q), free(att), free(o), free(g1), free(g3), free(sc);
}
