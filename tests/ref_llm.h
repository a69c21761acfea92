/* ref_llm.h — a plain C reference forward of the language models of tg_llm (llama, qwen2, qwen3), one token
 * at a time with its own KV cache, computed in double from float weights; written from the architectures'
 * definitions (llama2.c's run.c, tinygrad's llm runner), sharing nothing with the library. */
#ifndef TG_TEST_REF_LLM_H
#define TG_TEST_REF_LLM_H

#include "tg.h"

typedef struct ref_llm_layer {
  float *att_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *q_norm, *k_norm, *ffn_norm, *w1, *w2, *w3;
} ref_llm_layer;

typedef struct ref_llm {
  tg_llm_config c;            /* max_seq: the reference cache's length */
  float *emb, *final_norm, *out, *factors;   /* factors: RoPE frequency divisors (head_dim/2), or NULL */
  ref_llm_layer *layers;
  double *kc, *vc;            /* (n_layers, max_seq, kv_dim) */
  int64_t pos;
} ref_llm;

/* the weights of a GGUF file (any type tgc reads, dequantized by tg_gguf_tensor) for config c; false on error */
bool ref_llm_from_gguf(ref_llm *r, tg_gguf *g, const tg_llm_config *c);
/* token at the next position: its logits (vocab floats) */
void ref_llm_step(ref_llm *r, int32_t token, float *logits);
void ref_llm_free(ref_llm *r);

#endif
