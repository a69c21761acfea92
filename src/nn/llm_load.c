/* llm_load.c — a tg_llm from a GGUF file: the hyperparameters from its metadata ("<arch>.*" keys, as
 * llama.cpp names them) and the weights as lazy tensors on the file's mapping (tg_gguf_tensor: quantized
 * types stay quantized, dequantized in the kernels that read them). Every value and tensor shape is checked
 * against the others before it is used: a file is user input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gguf.h"
#include "nn/llm.h"
#include "tensor/tensor.h"

#define SIZE_LIMIT (1 << 20)   /* any one size; keeps every product below 2^62 */
#define DEFAULT_MAX_SEQ 4096

/* "<arch>.<suffix>" into buf */
static const char *akey(char *buf, size_t cap, const char *arch, const char *suffix) {
  snprintf(buf, cap, "%s.%s", arch, suffix);
  return buf;
}

/* an integer hyperparameter in [lo, SIZE_LIMIT]; def when absent and def >= 0 */
static bool hp_int(tg_gguf *g, const char *arch, const char *suffix, int64_t def, int64_t lo, int64_t *out) {
  char k[128];
  akey(k, sizeof k, arch, suffix);
  if (tg_gguf_kv_type(g, k) == TG_GGUF_NONE && def >= 0) {
    *out = def;
    return true;
  }
  if (tg_gguf_get_int(g, k, out) != TG_OK) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: no integer '%s' in the file (%s)", k, tg_error());
    return false;
  }
  if (*out < lo || *out > SIZE_LIMIT) {
    tg_set_error(TG_ERR_IO, "tg_llm_load: %s = %lld is outside [%lld, %d]", k, (long long)*out, (long long)lo,
                 SIZE_LIMIT);
    return false;
  }
  return true;
}

static bool hp_float(tg_gguf *g, const char *arch, const char *suffix, double def, double *out) {
  char k[128];
  akey(k, sizeof k, arch, suffix);
  if (tg_gguf_kv_type(g, k) == TG_GGUF_NONE) {
    *out = def;
    return true;
  }
  if (tg_gguf_get_float(g, k, out) != TG_OK || !(*out > 0 && *out < 1e30)) {
    tg_set_error(TG_ERR_IO, "tg_llm_load: %s: want a positive number", k);
    return false;
  }
  return true;
}

/* the config from the metadata; vocab from token_embd.weight */
static bool read_config(tg_gguf *g, int64_t max_seq, tg_llm_config *c) {
  memset(c, 0, sizeof *c);
  size_t alen = 0;
  const char *arch = tg_gguf_get_string(g, "general.architecture", &alen);
  if (!arch) return false;
  if (strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "qwen3")) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: architecture '%.64s': tgc runs llama, qwen2 and qwen3", arch);
    return false;
  }
  snprintf(c->arch, sizeof c->arch, "%s", arch);
  c->rope_neox = strcmp(arch, "llama") != 0;
  if (!hp_int(g, arch, "embedding_length", -1, 1, &c->dim) || !hp_int(g, arch, "feed_forward_length", -1, 1,
      &c->hidden_dim) || !hp_int(g, arch, "block_count", -1, 1, &c->n_layers) ||
      !hp_int(g, arch, "attention.head_count", -1, 1, &c->n_heads) ||
      !hp_int(g, arch, "attention.head_count_kv", c->n_heads, 1, &c->n_kv_heads) ||
      !hp_int(g, arch, "context_length", -1, 1, &c->context) ||
      !hp_int(g, arch, "attention.key_length", c->dim / c->n_heads, 2, &c->head_dim) ||
      !hp_float(g, arch, "rope.freq_base", 10000, &c->rope_base) ||
      !hp_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5, &c->norm_eps))
    return false;
  int64_t rope_dim = 0, vlen = 0;
  if (!hp_int(g, arch, "rope.dimension_count", c->head_dim, 2, &rope_dim)) return false;
  if (c->n_layers > 4096 || c->head_dim < 2 || c->head_dim % 2 || c->n_heads % c->n_kv_heads ||
      rope_dim != c->head_dim) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: %lld layers, %lld heads of %lld (RoPE over %lld), %lld KV heads: want at "
                 "most 4096 layers, an even head size, RoPE over all of it, heads a multiple of KV heads",
                 (long long)c->n_layers, (long long)c->n_heads, (long long)c->head_dim, (long long)rope_dim,
                 (long long)c->n_kv_heads);
    return false;
  }
  int64_t ti = tg_gguf_find_tensor(g, "token_embd.weight");
  tg_gguf_info info;
  if (ti < 0 || tg_gguf_tensor_info(g, ti, &info) != TG_OK || info.ndim != 2 || info.shape[1] != c->dim) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: want a tensor token_embd.weight (vocab, %lld)", (long long)c->dim);
    return false;
  }
  c->vocab_size = info.shape[0];
  if (tg_gguf_get_array(g, "tokenizer.ggml.tokens", NULL, &vlen) == TG_OK && vlen > c->vocab_size) {
    tg_set_error(TG_ERR_IO, "tg_llm_load: %lld tokens in tokenizer.ggml.tokens but token_embd.weight has %lld rows",
                 (long long)vlen, (long long)c->vocab_size);
    return false;
  }
  tg_error_clear();
  c->max_seq = max_seq ? max_seq : c->context < DEFAULT_MAX_SEQ ? c->context : DEFAULT_MAX_SEQ;
  if (max_seq > c->context) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: max_seq %lld is above the model's context length %lld",
                 (long long)max_seq, (long long)c->context);
    return false;
  }
  return true;
}

/* tensor name of the shape wanted (rows 0: a 1-d tensor of cols), owned by the caller; NULL when optional and
 * absent (no error), or with an error */
static tg_tensor *load(tg_gguf *g, const char *name, int64_t rows, int64_t cols, bool optional, bool *ok) {
  if (!*ok) return NULL;   /* keep the first error */
  int64_t i = tg_gguf_find_tensor(g, name);
  if (i < 0) {
    if (!optional) {
      tg_set_error(TG_ERR_ARG, "tg_llm_load: the file has no tensor '%s'", name);
      *ok = false;
    }
    return NULL;
  }
  tg_gguf_info info;
  if (tg_gguf_tensor_info(g, i, &info) != TG_OK) return *ok = false, NULL;
  bool fits = rows ? info.ndim == 2 && info.shape[0] == rows && info.shape[1] == cols
                   : info.ndim == 1 && info.shape[0] == cols;
  if (!fits) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: tensor '%s' has %d dims (%lld, %lld): want (%lld%s%lld)", name,
                 info.ndim, (long long)info.shape[0], (long long)(info.ndim > 1 ? info.shape[1] : 0),
                 (long long)(rows ? rows : cols), rows ? ", " : "", (long long)(rows ? cols : 0));
    *ok = false;
    return NULL;
  }
  tg_tensor *t = tensor_unscope(tg_gguf_tensor(g, name));
  if (!t) *ok = false;
  return t;
}

/* token_embd.weight (vocab, dim) as stored (quantized rows stay their bytes: llm.c reads a token's row alone),
 * and the output: output.weight, else the table (tied), dequantized lazily over the same bytes when quantized */
static void load_embedding(tg_llm *m, tg_gguf *g, bool *ok) {
  const tg_llm_config *c = &m->c;
  tg_tensor *check = load(g, "token_embd.weight", c->vocab_size, c->dim, false, ok);  /* its shape, checked */
  tg_free(check);
  m->emb = *ok ? tensor_unscope(gguf_tensor_rows(g, "token_embd.weight", &m->emb_type)) : NULL;
  if (*ok && !m->emb) *ok = false;
  m->out = load(g, "output.weight", c->vocab_size, c->dim, true, ok);
  m->c.tied_output = !m->out;
  if (*ok && !m->out)
    m->out = gguf_type_of(m->emb_type)->dtype != TG_DTYPE_COUNT ? m->emb
                                                               : tensor_unscope(gguf_dequantize_rows(m->emb, m->emb_type));
  if (!m->out) *ok = false;
}

/* RoPE frequency factors (head_dim/2 floats): rope_freqs.weight (llama3), else a linear scaling factor; NULL
 * when there are none (*ok false on error) */
static float *rope_factors(tg_gguf *g, const tg_llm_config *c, bool *ok) {
  int64_t half = c->head_dim / 2;
  float *f = NULL;
  char k[128];
  const char *type = tg_gguf_get_string(g, akey(k, sizeof k, c->arch, "rope.scaling.type"), NULL);
  tg_error_clear();
  double factor = 1;
  if (type && !strcmp(type, "linear") && !hp_float(g, c->arch, "rope.scaling.factor", 1, &factor))
    return *ok = false, NULL;
  if (type && strcmp(type, "linear") && strcmp(type, "none") && tg_gguf_find_tensor(g, "rope_freqs.weight") < 0) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: RoPE scaling '%.32s': tgc knows linear and llama3's rope_freqs", type);
    return *ok = false, NULL;
  }
  tg_tensor *t = load(g, "rope_freqs.weight", 0, half, true, ok);
  if (!*ok || (!t && factor == 1)) return NULL;
  f = mem_alloc((size_t)half * sizeof *f);
  if (!f) {
    tg_set_error(TG_ERR_NOMEM, "tg_llm_load: out of memory");
    *ok = false;
  } else if (t) {
    tg_tensor *t32 = tg_cast(t, TG_FLOAT32);
    *ok = tg_to_host(t32, f, (size_t)half * sizeof *f) == TG_OK;
    tg_free(t32);
  }
  for (int64_t i = 0; *ok && i < half; i++) {
    f[i] = t ? f[i] * (float)factor : (float)factor;
    if (!(f[i] > 0)) {
      tg_set_error(TG_ERR_IO, "tg_llm_load: RoPE frequency factor %lld is %g: want a positive one", (long long)i,
                   (double)f[i]);
      *ok = false;
    }
  }
  tg_free(t);
  if (!*ok) free(f), f = NULL;
  return f;
}

static bool load_weights(tg_llm *m, tg_gguf *g) {
  const tg_llm_config *c = &m->c;
  int64_t d = c->dim, hd = c->hidden_dim, q = c->n_heads * c->head_dim, kv = m->kv_dim;
  bool ok = true, qwen2 = !strcmp(c->arch, "qwen2"), qwen3 = !strcmp(c->arch, "qwen3");
  load_embedding(m, g, &ok);
  m->final_norm = load(g, "output_norm.weight", 0, d, false, &ok);
  for (int64_t l = 0; ok && l < c->n_layers; l++) {
    llm_layer *y = &m->layers[l];
    char n[64];
#define W(field, suffix, rows, cols, opt) \
    (snprintf(n, sizeof n, "blk.%lld." suffix, (long long)l), y->field = load(g, n, rows, cols, opt, &ok))
    W(att_norm, "attn_norm.weight", 0, d, false);
    W(wq, "attn_q.weight", q, d, false);
    W(wk, "attn_k.weight", kv, d, false);
    W(wv, "attn_v.weight", kv, d, false);
    W(wo, "attn_output.weight", d, q, false);
    W(bq, "attn_q.bias", 0, q, !qwen2);
    W(bk, "attn_k.bias", 0, kv, !qwen2);
    W(bv, "attn_v.bias", 0, kv, !qwen2);
    W(q_norm, "attn_q_norm.weight", 0, c->head_dim, !qwen3);
    W(k_norm, "attn_k_norm.weight", 0, c->head_dim, !qwen3);
    W(ffn_norm, "ffn_norm.weight", 0, d, false);
    W(w1, "ffn_gate.weight", hd, d, false);
    W(w2, "ffn_down.weight", d, hd, false);
    W(w3, "ffn_up.weight", hd, d, false);
#undef W
  }
  return ok;
}

tg_llm *tg_llm_from_gguf(tg_gguf *g, int64_t max_seq) {
  if (!g || max_seq < 0) {
    tg_set_error(TG_ERR_ARG, "tg_llm_from_gguf: %s", !g ? "the reader is NULL" : "max_seq is negative");
    return NULL;
  }
  tg_llm_config c;
  if (!read_config(g, max_seq, &c)) return NULL;
  tg_llm *m = llm_new(&c);
  if (!m) return NULL;
  bool ok = load_weights(m, g);
  float *factors = ok ? rope_factors(g, &m->c, &ok) : NULL;
  ok = ok && llm_finish(m, factors) == TG_OK;
  free(factors);
  if (!ok) {
    tg_llm_free(m);
    return NULL;
  }
  return m;
}

tg_llm *tg_llm_load(const char *path, int64_t max_seq) {
  if (!path) {
    tg_set_error(TG_ERR_ARG, "tg_llm_load: path is NULL");
    return NULL;
  }
  tg_gguf *g = tg_gguf_open(path);
  tg_llm *m = g ? tg_llm_from_gguf(g, max_seq) : NULL;
  tg_gguf_close(g);
  return m;
}
