/* llama.c — a Llama model from a llama2.c checkpoint, run by the language model of llm.c.
 *
 * The checkpoint is user input: a 7 int32 header (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
 * seq_len; a negative vocab_size means the classifier is stored apart from the embedding) and float32
 * weights in llama2.c's order. The header is checked before anything is allocated from it and the file
 * must be exactly as long as it says. The weights are copied into tensors of a tg_llm (llama2.c's RoPE is
 * llama.cpp's "llama" ordering: adjacent pairs, base 10000, RMSNorm eps 1e-5), which decodes one token per
 * step through tg_jit.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/data.h"
#include "nn/llm.h"
#include "tensor/tensor.h"

#define HEADER_INTS 7
#define SIZE_LIMIT (1 << 20)  /* any one header size; keeps every product below 2^62 */

struct tg_llama {
  tg_llama_config c;
  tg_llm *m;
};

void tg_llama_free(tg_llama *m) {
  if (!m) return;
  tg_llm_free(m->m);
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

static bool make_weights(tg_llm *m, const tg_llama_config *c, const uint8_t *w) {
  int64_t d = c->dim, L = c->n_layers, hd = c->hidden_dim, kv = m->kv_dim;
  uint64_t at = 0;
  m->emb = weight(w, &at, 2, (int64_t[]){c->vocab_size, d});
  /* llama2.c stores each kind of weight for all layers together */
  struct { size_t field; int64_t rows, cols; } kinds[] = {
    {offsetof(llm_layer, att_norm), 1, d}, {offsetof(llm_layer, wq), d, d}, {offsetof(llm_layer, wk), kv, d},
    {offsetof(llm_layer, wv), kv, d},      {offsetof(llm_layer, wo), d, d}, {offsetof(llm_layer, ffn_norm), 1, d},
    {offsetof(llm_layer, w1), hd, d},      {offsetof(llm_layer, w2), d, hd}, {offsetof(llm_layer, w3), hd, d},
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
  at += (uint64_t)c->seq_len * (uint64_t)(d / c->n_heads);  /* the RoPE tables of old exports: computed instead */
  m->out = c->shared_classifier ? m->emb : weight(w, &at, 2, (int64_t[]){c->vocab_size, d});
  return ok && m->final_norm && m->out;
}

/* the model config of a llama2.c header: llama2.c's run.c hardcodes RoPE base 10000 and RMSNorm eps 1e-5 */
tg_llm_config llama2c_config(const tg_llama_config *c, int64_t max_seq) {
  tg_llm_config l = {.dim = c->dim, .hidden_dim = c->hidden_dim, .n_layers = c->n_layers, .n_heads = c->n_heads,
                     .n_kv_heads = c->n_kv_heads, .head_dim = c->dim / c->n_heads, .vocab_size = c->vocab_size,
                     .context = c->seq_len, .max_seq = max_seq ? max_seq : c->seq_len, .rope_base = 10000,
                     .norm_eps = 1e-5, .rope_neox = false, .tied_output = c->shared_classifier};
  memcpy(l.arch, "llama", 6);
  return l;
}

/* the header of a llama2.c checkpoint in bytes, checked against len: fills c, or false with an error */
bool llama2c_header(const char *path, const uint8_t *bytes, size_t len, tg_llama_config *c) {
  int32_t h[HEADER_INTS];
  uint64_t nfloats = 0;
  if (len < sizeof h) {
    tg_set_error(TG_ERR_IO, "tg_llama_load: %s: %zu bytes is shorter than the 28-byte header", path, len);
    return false;
  }
  memcpy(h, bytes, sizeof h);
  if (!header_check(path, h, c, &nfloats)) return false;
  uint64_t want = HEADER_INTS * 4 + nfloats * 4;
  if (len != want) {
    tg_set_error(TG_ERR_IO, "tg_llama_load: %s: %zu bytes, but its header describes %llu (%llu floats of weights "
                 "after 28 bytes of header)%s", path, len, (unsigned long long)want, (unsigned long long)nfloats,
                 len < want ? ": truncated?" : "");
    return false;
  }
  return true;
}

tg_llama *data_llama(const char *path, const uint8_t *bytes, size_t len, int64_t max_seq) {
  if (max_seq < 0) {
    tg_set_error(TG_ERR_ARG, "tg_llama_load: max_seq is negative");
    return NULL;
  }
  tg_llama_config c;
  if (!llama2c_header(path, bytes, len, &c)) return NULL;
  if (max_seq > c.seq_len) {
    tg_set_error(TG_ERR_ARG, "tg_llama_load: max_seq %lld is above the model's seq_len %lld", (long long)max_seq,
                 (long long)c.seq_len);
    return NULL;
  }
  tg_llama *m = mem_calloc(1, sizeof *m);
  tg_llm_config lc = llama2c_config(&c, max_seq);
  if (m) {
    m->c = c;
    m->m = llm_new(&lc);
  }
  bool ok = m && m->m && make_weights(m->m, &c, bytes + HEADER_INTS * 4) && llm_finish(m->m, NULL) == TG_OK;
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

tg_status tg_llama_step(tg_llama *m, int32_t token, int64_t pos, float *logits) {
  if (!m || !logits) {
    tg_set_error(TG_ERR_ARG, "tg_llama_step: %s is NULL", !m ? "the model" : "logits");
    return TG_ERR_ARG;
  }
  int64_t next = tg_llm_pos(m->m), max_seq = m->m->c.max_seq;
  if (token < 0 || token >= m->c.vocab_size || pos != next || pos >= max_seq) {
    tg_set_error(TG_ERR_ARG, "tg_llama_step: token %d at position %lld: want a token in [0, %lld) at position %lld "
                 "(positions come in order, each once, below max_seq %lld; tg_llama_reset starts over)", token,
                 (long long)pos, (long long)m->c.vocab_size, (long long)next, (long long)max_seq);
    return TG_ERR_ARG;
  }
  return tg_llm_step(m->m, token, logits);
}

tg_status tg_llama_reset(tg_llama *m) {
  if (!m) {
    tg_set_error(TG_ERR_ARG, "tg_llama_reset: the model is NULL");
    return TG_ERR_ARG;
  }
  return tg_llm_reset(m->m);
}

tg_llama_config tg_llama_config_of(const tg_llama *m) { return m ? m->c : (tg_llama_config){0}; }
int64_t tg_llama_max_seq(const tg_llama *m) { return m ? m->m->c.max_seq : -1; }
int tg_llama_kernels(const tg_llama *m) { return m ? tg_llm_kernels(m->m) : 0; }
