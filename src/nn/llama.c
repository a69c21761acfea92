/* llama.c — a Llama model from a llama2.c checkpoint, decoded one token per step through tg_jit.
 *
 * The checkpoint is user input: a 7 int32 header (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
 * seq_len; a negative vocab_size means the classifier is stored apart from the embedding) and float32
 * weights in llama2.c's order. The header is checked before anything is allocated from it and the file
 * must be exactly as long as it says.
 *
 * The decode step is one captured JIT step: its input is the token id (int32 (1,)), its output the logits
 * (1, vocab). The position is a tg_variable bound before each call, so one capture serves every position:
 * RoPE's angle is pos * freq computed in the kernel, each layer's K and V caches (max_seq, kv_dim) get the
 * new row with tg_assign_at (a kernel over the row writes it in place), and attention reads all max_seq
 * positions with those after pos masked to -inf.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/data.h"
#include "tensor/tensor.h"

#define HEADER_INTS 7
#define SIZE_LIMIT (1 << 20)  /* any one header size; keeps every product below 2^62 */

typedef struct llama_layer {
  tg_tensor *att_norm, *wq, *wk, *wv, *wo;   /* w* (out, in) as llama2.c stores them */
  tg_tensor *ffn_norm, *w1, *w2, *w3;
  tg_tensor *kc, *vc;                        /* the caches (max_seq, kv_dim), written in place */
} llama_layer;

struct tg_llama {
  tg_llama_config c;
  int64_t max_seq, head, kv_dim, next_pos;
  tg_tensor *emb, *final_norm, *cls;        /* cls is emb when the classifier is shared */
  tg_tensor *freq;                          /* (head/2,): 1 / 10000^(2i/head) */
  llama_layer *layers;
  tg_variable *pos;
  tg_jit *jit;
};

static void layer_free(llama_layer *l) {
  tg_tensor *all[] = {l->att_norm, l->wq, l->wk, l->wv, l->wo, l->ffn_norm, l->w1, l->w2, l->w3, l->kc, l->vc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tg_free(all[i]);
}

void tg_llama_free(tg_llama *m) {
  if (!m) return;
  tg_jit_free(m->jit);
  for (int64_t l = 0; m->layers && l < m->c.n_layers; l++) layer_free(&m->layers[l]);
  free(m->layers);
  if (m->cls != m->emb) tg_free(m->cls);
  tg_free(m->emb);
  tg_free(m->final_norm);
  tg_free(m->freq);
  tg_variable_free(m->pos);
  free(m);
}

/* ---- the checkpoint ------------------------------------------------------------------------------------- */

/* checks the header; fills c and the number of floats the file must hold after it */
static bool header_check(const char *path, const int32_t *h, tg_llama_config *c, uint64_t *nfloats) {
  static const char *names[HEADER_INTS] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                                           "seq_len"};
  if (h[0] == 0x616b3432) {  /* "ak42": llama2.c's versioned export */
    tg_set_error(TG_ERR_IO, "tg_llama_load: %s: a versioned llama2.c export (magic ak42, version %d); this reader "
                 "takes the legacy format (export.py --version 0)", path, h[1]);
    return false;
  }
  for (int i = 0; i < HEADER_INTS; i++) {
    int64_t v = i == 5 ? llabs((long long)h[i]) : h[i];
    if (v < 1 || v > SIZE_LIMIT) {
      tg_set_error(TG_ERR_IO, "tg_llama_load: %s: header %s = %d is outside [1, %d]%s", path, names[i], h[i],
                   SIZE_LIMIT, i == 5 ? " (in absolute value)" : "");
      return false;
    }
  }
  *c = (tg_llama_config){h[0], h[1], h[2], h[3], h[4], llabs((long long)h[5]), h[6], h[5] > 0};
  if (c->n_layers > 4096 || c->dim % c->n_heads || (c->dim / c->n_heads) % 2 || c->n_kv_heads > c->n_heads ||
      c->n_heads % c->n_kv_heads) {
    tg_set_error(TG_ERR_IO, "tg_llama_load: %s: header dim %lld, n_heads %lld, n_kv_heads %lld, n_layers %lld: want "
                 "an even head size dim / n_heads, n_heads a multiple of n_kv_heads, at most 4096 layers", path,
                 (long long)c->dim, (long long)c->n_heads, (long long)c->n_kv_heads, (long long)c->n_layers);
    return false;
  }
  uint64_t d = (uint64_t)c->dim, hd = (uint64_t)c->hidden_dim, kv = d / (uint64_t)c->n_heads * (uint64_t)c->n_kv_heads;
  uint64_t head = d / (uint64_t)c->n_heads, per_layer = 2 * d + 2 * d * d + 2 * d * kv + 3 * d * hd;
  *nfloats = (uint64_t)c->vocab_size * d + (uint64_t)c->n_layers * per_layer + d +
             (uint64_t)c->seq_len * head + (c->shared_classifier ? 0 : (uint64_t)c->vocab_size * d);
  return true;
}

/* the next n floats of the weights (little-endian float32, any alignment) as a realized tensor of the given
 * shape, owned by the caller */
static tg_tensor *weight(const uint8_t *w, uint64_t *at, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  tg_tensor *t = tensor_unscope(tg_from_data(TG_FLOAT32, ndim, shape, w + *at * 4, (size_t)n * sizeof(float)));
  *at += (uint64_t)n;
  return t;
}

static bool make_weights(tg_llama *m, const uint8_t *w) {
  const tg_llama_config *c = &m->c;
  int64_t d = c->dim, L = c->n_layers, hd = c->hidden_dim, kv = m->kv_dim;
  uint64_t at = 0;
  m->emb = weight(w, &at, 2, (int64_t[]){c->vocab_size, d});
  /* llama2.c stores each kind of weight for all layers together */
  struct { size_t field; int64_t rows, cols; } kinds[] = {
    {offsetof(llama_layer, att_norm), 1, d}, {offsetof(llama_layer, wq), d, d}, {offsetof(llama_layer, wk), kv, d},
    {offsetof(llama_layer, wv), kv, d},      {offsetof(llama_layer, wo), d, d}, {offsetof(llama_layer, ffn_norm), 1, d},
    {offsetof(llama_layer, w1), hd, d},      {offsetof(llama_layer, w2), d, hd}, {offsetof(llama_layer, w3), hd, d},
  };
  bool ok = m->emb != NULL;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    for (int64_t l = 0; l < L; l++) {
      tg_tensor **slot = (tg_tensor **)((char *)&m->layers[l] + kinds[k].field);
      *slot = kinds[k].rows == 1 ? weight(w, &at, 1, &kinds[k].cols)
                                 : weight(w, &at, 2, (int64_t[]){kinds[k].rows, kinds[k].cols});
      ok = ok && *slot;
    }
  m->final_norm = weight(w, &at, 1, &d);
  at += (uint64_t)c->seq_len * (uint64_t)m->head;  /* the RoPE tables of old exports: computed here instead */
  m->cls = c->shared_classifier ? m->emb : weight(w, &at, 2, (int64_t[]){c->vocab_size, d});
  return ok && m->final_norm && m->cls;
}

/* the per-layer state a step needs besides the weights: caches, RoPE frequencies, the position */
static bool make_state(tg_llama *m) {
  int64_t half = m->head / 2, shape[2] = {m->max_seq, m->kv_dim};
  float *f = mem_alloc((size_t)half * sizeof *f);
  if (!f) return false;
  for (int64_t i = 0; i < half; i++) f[i] = 1.0f / powf(10000.0f, (float)(2 * i) / (float)m->head);  /* as run.c */
  m->freq = tensor_unscope(tg_from_data(TG_FLOAT32, 1, &half, f, (size_t)half * sizeof *f));
  free(f);
  bool ok = m->freq && (m->pos = tg_variable_new("pos", 0, m->max_seq - 1));
  for (int64_t l = 0; ok && l < m->c.n_layers; l++) {
    llama_layer *y = &m->layers[l];
    y->kc = tensor_own(tg_zeros(TG_FLOAT32, 2, shape));
    y->vc = tensor_own(tg_zeros(TG_FLOAT32, 2, shape));
    ok = y->kc && y->vc;
  }
  return ok;
}

static tg_status llama_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out);

tg_llama *data_llama(const char *path, const uint8_t *bytes, size_t len, int64_t max_seq) {
  if (max_seq < 0) {
    tg_set_error(TG_ERR_ARG, "tg_llama_load: max_seq is negative");
    return NULL;
  }
  int32_t h[HEADER_INTS];
  tg_llama_config c;
  uint64_t nfloats = 0;
  if (len < sizeof h) {
    tg_set_error(TG_ERR_IO, "tg_llama_load: %s: %zu bytes is shorter than the 28-byte header", path, len);
    return NULL;
  }
  memcpy(h, bytes, sizeof h);
  if (!header_check(path, h, &c, &nfloats)) return NULL;
  uint64_t want = HEADER_INTS * 4 + nfloats * 4;
  if (len != want) {
    tg_set_error(TG_ERR_IO, "tg_llama_load: %s: %zu bytes, but its header describes %llu (%llu floats of weights "
                 "after 28 bytes of header)%s", path, len, (unsigned long long)want, (unsigned long long)nfloats,
                 len < want ? ": truncated?" : "");
    return NULL;
  }
  if (max_seq > c.seq_len) {
    tg_set_error(TG_ERR_ARG, "tg_llama_load: max_seq %lld is above the model's seq_len %lld", (long long)max_seq,
                 (long long)c.seq_len);
    return NULL;
  }
  tg_llama *m = mem_calloc(1, sizeof *m);
  if (m) {
    m->c = c;
    m->max_seq = max_seq ? max_seq : c.seq_len;
    m->head = c.dim / c.n_heads;
    m->kv_dim = m->head * c.n_kv_heads;
    m->layers = mem_calloc((size_t)c.n_layers, sizeof *m->layers);
  }
  bool ok = m && m->layers && make_weights(m, bytes + sizeof h) && make_state(m) &&
            (m->jit = tg_jit_new(llama_step, m, 1, 1));
  if (!ok) {
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "tg_llama_load: %s: out of memory", path);
    tg_llama_free(m);
    return NULL;
  }
  return m;
}

tg_llama *tg_llama_load(const char *path, int64_t max_seq) {
  if (!path || max_seq < 0) {
    tg_set_error(TG_ERR_ARG, "tg_llama_load: %s", !path ? "path is NULL" : "max_seq is negative");
    return NULL;
  }
  /* mapped, not read: the weights are copied once, into their tensors */
  data_map f;
  if (data_map_file("tg_llama_load", path, &f) != TG_OK) return NULL;
  tg_llama *m = data_llama(path, f.b, f.n, max_seq);
  data_unmap(&f);
  return m;
}

/* ---- the decode step ------------------------------------------------------------------------------------ */

static tg_tensor *linear(tg_tensor *x, tg_tensor *w) { return tg_matmul(x, tg_transpose(w, 0, 1)); }

static tg_tensor *rmsnorm(tg_tensor *x, tg_tensor *w) { return tg_mul(tg_rmsnorm(x, 1, (int[]){-1}, 1e-5), w); }

/* x (1, nh*head): each pair (x0, x1) of every head turned by its angle: (x0 c - x1 s, x1 c + x0 s). cs and sn
 * are (head/2, 2): (c, c) and (-s, s); the pair swapped is a flip of the last axis */
static tg_tensor *rope(tg_tensor *x, int64_t nh, int64_t head, tg_tensor *cs, tg_tensor *sn) {
  tg_tensor *p = tg_reshape(x, 3, (int64_t[]){nh, head / 2, 2});
  tg_tensor *r = tg_add(tg_mul(p, cs), tg_mul(tg_flip(p, 1, (int[]){2}), sn));
  return tg_reshape(r, 2, (int64_t[]){1, nh * head});
}

/* in: the token id, int32 (1,), at position m->pos. out: the logits (1, vocab). Writes the caches' row pos */
static tg_status llama_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  tg_llama *m = ctx;
  const tg_llama_config *c = &m->c;
  int64_t head = m->head, nkv = c->n_kv_heads, rep = c->n_heads / nkv, T = m->max_seq;
  tg_scope_begin();
  tg_tensor *pos = tg_variable_tensor(m->pos);
  /* RoPE: the angle of pair i is pos * freq[i], computed in the kernel from the bound position */
  tg_tensor *ang = tg_reshape(tg_mul(tg_cast(pos, TG_FLOAT32), m->freq), 2, (int64_t[]){head / 2, 1});
  tg_tensor *sign = tg_from_data(TG_FLOAT32, 2, (int64_t[]){1, 2}, (float[]){-1, 1}, 8);
  tg_tensor *cs = tg_expand(tg_cos(ang), 2, (int64_t[]){head / 2, 2}), *sn = tg_mul(tg_sin(ang), sign);
  tg_tensor *seen = tg_le(tg_arange(TG_INT32, 0, (double)T, 1), pos);  /* (T,): positions 0..pos */
  tg_tensor **assigned = mem_alloc((size_t)(2 * c->n_layers + 1) * sizeof *assigned);
  tg_status st = assigned ? TG_OK : TG_ERR_NOMEM;
  if (!assigned) tg_set_error(st, "tg_llama_step: out of memory");
  /* NULL is a valid mask for attention (none): a mask that failed to build must stop the step here */
  if (st == TG_OK && !seen) st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  tg_tensor *x = tg_embedding(m->emb, in[0]);  /* (1, dim) */
  for (int64_t l = 0; st == TG_OK && l < c->n_layers; l++) {
    llama_layer *y = &m->layers[l];
    tg_tensor *h = rmsnorm(x, y->att_norm);
    tg_tensor *q = rope(linear(h, y->wq), c->n_heads, head, cs, sn);      /* (1, dim) */
    /* the new rows are stored, then placed: left to the scheduler, the K row's matmul and RoPE fuse into one
     * kernel that runs the matmul twice (the pair and its flip), 1150 vs 1400 tok/s best of 6 */
    tg_tensor *k = tg_contiguous(rope(linear(h, y->wk), nkv, head, cs, sn));   /* (1, kv_dim) */
    tg_tensor *v = linear(h, y->wv);
    /* row pos of each cache, written in place by a kernel over the row; the attention below reads the
     * caches with it (the realize orders the write before those reads) */
    st = tg_assign_at(y->kc, 0, m->pos, k);
    if (st == TG_OK) st = tg_assign_at(y->vc, 0, m->pos, v);
    tg_tensor *kn = y->kc, *vn = y->vc;                                         /* (T, kv_dim) */
    assigned[2 * l] = y->kc;
    assigned[2 * l + 1] = y->vc;
    /* grouped-query attention: query head g*rep + r reads kv head g */
    int order[3] = {1, 0, 2};
    tg_tensor *qh = tg_reshape(q, 3, (int64_t[]){nkv, rep, head});
    tg_tensor *kh = tg_permute(tg_reshape(kn, 3, (int64_t[]){T, nkv, head}), 3, order);  /* (nkv, T, head) */
    tg_tensor *vh = tg_permute(tg_reshape(vn, 3, (int64_t[]){T, nkv, head}), 3, order);
    tg_tensor *att = tg_scaled_dot_product_attention(qh, kh, vh, seen, 0, false, false);            /* (nkv, rep, head) */
    x = tg_add(x, linear(tg_reshape(att, 2, (int64_t[]){1, c->dim}), y->wo));
    h = rmsnorm(x, y->ffn_norm);
    x = tg_add(x, linear(tg_mul(tg_silu(linear(h, y->w1)), linear(h, y->w3)), y->w2));
  }
  tg_tensor *logits = linear(rmsnorm(x, m->final_norm), m->cls);  /* (1, vocab) */
  if (st == TG_OK && !logits) st = tg_error_status();
  if (st == TG_OK) {
    assigned[2 * c->n_layers] = logits;
    st = tg_realize_many((int)(2 * c->n_layers + 1), assigned);
  }
  out[0] = st == TG_OK ? tg_keep(logits) : NULL;
  free(assigned);
  tg_scope_end();
  return st;
}

tg_status tg_llama_step(tg_llama *m, int32_t token, int64_t pos, float *logits) {
  if (!m || !logits) {
    tg_set_error(TG_ERR_ARG, "tg_llama_step: %s is NULL", !m ? "the model" : "logits");
    return TG_ERR_ARG;
  }
  if (token < 0 || token >= m->c.vocab_size || pos != m->next_pos || pos >= m->max_seq) {
    tg_set_error(TG_ERR_ARG, "tg_llama_step: token %d at position %lld: want a token in [0, %lld) at position %lld "
                 "(positions come in order, each once, below max_seq %lld; tg_llama_reset starts over)", token,
                 (long long)pos, (long long)m->c.vocab_size, (long long)m->next_pos, (long long)m->max_seq);
    return TG_ERR_ARG;
  }
  tg_status st = tg_variable_bind(m->pos, pos);
  if (st != TG_OK) return st;
  tg_scope_begin();
  tg_tensor *in = tg_from_data(TG_INT32, 1, (int64_t[]){1}, &token, sizeof token), *out = NULL;
  st = in ? tg_jit_call(m->jit, &in, &out) : tg_error_status();
  if (st == TG_OK) st = tg_to_host(out, logits, (size_t)m->c.vocab_size * sizeof *logits);
  tg_free(out);
  tg_scope_end();
  if (st == TG_OK) m->next_pos++;
  return st;
}

tg_status tg_llama_reset(tg_llama *m) {
  if (!m) {
    tg_set_error(TG_ERR_ARG, "tg_llama_reset: the model is NULL");
    return TG_ERR_ARG;
  }
  tg_status st = TG_OK;
  tg_scope_begin();
  for (int64_t l = 0; st == TG_OK && l < m->c.n_layers; l++) {
    llama_layer *y = &m->layers[l];
    st = tg_assign(y->kc, tg_zeros_like(y->kc));
    if (st == TG_OK) st = tg_assign(y->vc, tg_zeros_like(y->vc));
    if (st == TG_OK) st = tg_realize_many(2, (tg_tensor *[]){y->kc, y->vc});
  }
  tg_scope_end();
  if (st == TG_OK) m->next_pos = 0;
  return st;
}

tg_llama_config tg_llama_config_of(const tg_llama *m) { return m ? m->c : (tg_llama_config){0}; }
int64_t tg_llama_max_seq(const tg_llama *m) { return m ? m->max_seq : -1; }
int tg_llama_kernels(const tg_llama *m) { return m ? tg_jit_kernels(m->jit) : 0; }
