/* llm.h — the language model shared by its loaders: llm.c runs it, llm_load.c fills it from a GGUF file,
 * llama.c from a llama2.c checkpoint. */
#ifndef TG_NN_LLM_H
#define TG_NN_LLM_H

#include "tg.h"

typedef struct llm_layer {
  tg_tensor *att_norm, *wq, *wk, *wv, *wo;   /* w* (out, in), as ggml and llama2.c store them */
  tg_tensor *bq, *bk, *bv;                   /* qwen2's biases (out,), else NULL */
  tg_tensor *q_norm, *k_norm;                /* qwen3's per-head RMSNorm weights (head_dim,), else NULL */
  tg_tensor *ffn_norm, *w1, *w2, *w3;        /* w1 gate, w2 down, w3 up */
  tg_tensor *kc, *vc;                        /* the caches (max_seq, kv_dim), written in place */
} llm_layer;

struct tg_llm {
  tg_llm_config c;
  int64_t kv_dim, next_pos;
  /* emb: the token embedding as stored, (vocab, dim) of a plain dtype or, for a ggml block format, its bytes
   * uint8 (vocab, bytes per row); emb_type its ggml type (0, F32, for a loader's float32 table). A token's
   * row is read alone (a window at a variable) and dequantized in the kernel that reads it. out is emb when
   * the output is tied to a plain table; a tied quantized table's out is its dequantize, over the same bytes */
  tg_tensor *emb, *final_norm, *out;
  uint32_t emb_type;
  tg_tensor *freq;                           /* (head_dim/2,): the RoPE frequency of each pair */
  llm_layer *layers;
  tg_variable *pos;                          /* the decode step's position */
  tg_variable *tok;                          /* the token whose row is read: the step's, a prefill's one by one */
  tg_variable *row;                          /* the row of xrows a prefill's token is written to */
  tg_tensor *xrows;                          /* a prefill chunk's embedded rows (256, dim), made at the first */
  tg_jit *embed_jit;                         /* writes the row of tok into xrows at row */
  tg_jit *jit;
  bool exact_chunks;                         /* prefill chunks unpadded (tests compare the two) */
};

/* a model of config c (c->max_seq set) with no weights yet, or NULL with an error */
tg_llm *llm_new(const tg_llm_config *c);
/* after the loader set every weight (owned by m, out of any scope): the RoPE frequencies (each divided by
 * factors[i] when factors is not NULL: llama3's rope_freqs), the caches, the position and the JIT */
tg_status llm_finish(tg_llm *m, const float *factors);

/* tokens[0..n) (checked by the caller; n <= 256) embedded as the prefill embeds them: out gets n * dim floats */
tg_status llm_embed(tg_llm *m, const int32_t *tokens, int64_t n, float *out);

/* llama2.c checkpoints (llama.c): the header in bytes checked against len (fills c, or false with an error
 * naming path), and the model config it gives (llama2.c's run.c: RoPE base 10000, RMSNorm eps 1e-5) */
bool llama2c_header(const char *path, const uint8_t *bytes, size_t len, tg_llama_config *c);
tg_llm_config llama2c_config(const tg_llama_config *c, int64_t max_seq);

#endif
