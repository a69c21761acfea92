/* tgc_run.c — tgc's side of llm_vs_llamacpp.sh: writes small random llama3/qwen2/qwen3-style models, converts
 * stories260K to GGUF of a type (tg_llama2c_to_gguf),
 * or with --compare decodes that file with tg_llm feeding the ids llama.cpp fed (llamacpp_run's output) and
 * compares the logits at every position with llama.cpp's: the largest difference, and the first position
 * where the greedy choices differ.
 *
 *   tgc_run --random llama3|qwen2|qwen3 OUT.gguf TYPE   (a small random-weight model, written by tg_gguf_writer)
 *   tgc_run --convert MODEL.bin TOKENIZER.bin OUT.gguf TYPE
 *   tgc_run --compare MODEL.gguf LOGITS.bin id0 id1 ...
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg.h"

/* ---- small random-weight models (--random) ------------------------------------------------------------------ */

static uint64_t rng = 16;
static float rnd(float scale) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return scale * ((float)(rng >> 40) / (float)(1 << 24) * 2 - 1);
}

/* a random tensor (rows 0: 1-d of cols): bias + uniform(-scale, scale) */
static tg_status add(tg_gguf_writer *w, const char *name, int64_t rows, int64_t cols, float scale, float bias,
                     tg_ggml_type type) {
  int64_t n = (rows ? rows : 1) * cols, shape[2] = {rows, cols};
  float *f = malloc((size_t)n * sizeof *f);
  if (!f) return TG_ERR_NOMEM;
  for (int64_t i = 0; i < n; i++) f[i] = bias + rnd(scale);
  tg_status st = tg_gguf_add_tensor(w, name, rows ? 2 : 1, rows ? shape : shape + 1, f, type);
  free(f);
  return st;
}

/* a llama3-style (GQA, rope_freqs, base 500000), qwen2-style (biases, tied output) or qwen3-style (q/k norms,
 * head_dim 32 from key_length) model with a 259-token vocabulary (<unk> <s> </s> and the 256 byte tokens) */
static tg_status random_model(const char *kind, const char *path, tg_ggml_type type) {
  bool llama = !strcmp(kind, "llama3"), qwen2 = !strcmp(kind, "qwen2"), qwen3 = !strcmp(kind, "qwen3");
  const char *arch = llama ? "llama" : kind;
  int64_t dim = 64, hidden = 96, layers = 2, heads = 4, kv_heads = qwen2 ? 1 : 2, hd = qwen3 ? 32 : 16, vocab = 259;
  int64_t q = heads * hd, kv = kv_heads * hd;
  tg_gguf_writer *w = tg_gguf_writer_new();
  if (!w || (!llama && !qwen2 && !qwen3)) return TG_ERR_ARG;
  char k[96], names[259][8];
  const char *toks[259];
  double scores[259] = {0};
  int64_t types[259];
  for (int i = 0; i < 259; i++) {
    snprintf(names[i], sizeof names[i], i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "<0x%02X>", i - 3);
    toks[i] = names[i];
    types[i] = i == 0 ? 2 : i < 3 ? 3 : 6;
  }
  tg_status st = tg_gguf_set_string(w, "general.architecture", arch);
#define KI(suffix, v) \
  if (st == TG_OK) st = (snprintf(k, sizeof k, "%s." suffix, arch), tg_gguf_set_int(w, k, TG_GGUF_UINT32, v))
  KI("embedding_length", dim); KI("feed_forward_length", hidden); KI("block_count", layers);
  KI("attention.head_count", heads); KI("attention.head_count_kv", kv_heads); KI("context_length", 512);
  KI("attention.key_length", hd); KI("attention.value_length", hd); KI("rope.dimension_count", hd);
#undef KI
  snprintf(k, sizeof k, "%s.rope.freq_base", arch);
  if (st == TG_OK) st = tg_gguf_set_float(w, k, TG_GGUF_FLOAT32, llama ? 500000 : 1e6);
  snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
  if (st == TG_OK) st = tg_gguf_set_float(w, k, TG_GGUF_FLOAT32, llama ? 1e-5 : 1e-6);
  if (st == TG_OK) st = tg_gguf_set_string(w, "tokenizer.ggml.model", "llama");
  if (st == TG_OK) st = tg_gguf_set_array_string(w, "tokenizer.ggml.tokens", toks, vocab);
  if (st == TG_OK) st = tg_gguf_set_array_float(w, "tokenizer.ggml.scores", TG_GGUF_FLOAT32, scores, vocab);
  if (st == TG_OK) st = tg_gguf_set_array_int(w, "tokenizer.ggml.token_type", TG_GGUF_INT32, types, vocab);
  if (st == TG_OK) st = tg_gguf_set_int(w, "tokenizer.ggml.bos_token_id", TG_GGUF_UINT32, 1);
  if (st == TG_OK) st = tg_gguf_set_int(w, "tokenizer.ggml.eos_token_id", TG_GGUF_UINT32, 2);
  if (st == TG_OK) st = add(w, "token_embd.weight", vocab, dim, 1, 0, type);
  if (st == TG_OK) st = add(w, "output_norm.weight", 0, dim, 0.2f, 1, TG_GGML_F32);
  if (st == TG_OK && llama) st = add(w, "output.weight", vocab, dim, 0.3f, 0, type);
  if (st == TG_OK && llama) {   /* llama3's factors: 1 for high frequencies, up to 8 for low ones */
    float f[16];
    for (int i = 0; i < hd / 2; i++) f[i] = 1 + 7 * (float)i / (float)(hd / 2 - 1);
    st = tg_gguf_add_tensor(w, "rope_freqs.weight", 1, (int64_t[]){hd / 2}, f, TG_GGML_F32);
  }
  for (int64_t l = 0; st == TG_OK && l < layers; l++) {
    char n[64];
#define T(suffix, rows, cols, scale, bias, ty) \
  if (st == TG_OK) st = (snprintf(n, sizeof n, "blk.%d." suffix, (int)l), add(w, n, rows, cols, scale, bias, ty))
    T("attn_norm.weight", 0, dim, 0.2f, 1, TG_GGML_F32);
    T("attn_q.weight", q, dim, 0.3f, 0, type);
    T("attn_k.weight", kv, dim, 0.3f, 0, type);
    T("attn_v.weight", kv, dim, 0.3f, 0, type);
    T("attn_output.weight", dim, q, 0.3f, 0, type);
    if (qwen2) {
      T("attn_q.bias", 0, q, 0.5f, 0, TG_GGML_F32);
      T("attn_k.bias", 0, kv, 0.5f, 0, TG_GGML_F32);
      T("attn_v.bias", 0, kv, 0.5f, 0, TG_GGML_F32);
    }
    if (qwen3) {
      T("attn_q_norm.weight", 0, hd, 0.3f, 1, TG_GGML_F32);
      T("attn_k_norm.weight", 0, hd, 0.3f, 1, TG_GGML_F32);
    }
    T("ffn_norm.weight", 0, dim, 0.2f, 1, TG_GGML_F32);
    T("ffn_gate.weight", hidden, dim, 0.3f, 0, type);
    T("ffn_down.weight", dim, hidden, 0.3f, 0, type);
    T("ffn_up.weight", hidden, dim, 0.3f, 0, type);
#undef T
  }
  if (st == TG_OK) st = tg_gguf_writer_save(w, path);
  tg_gguf_writer_free(w);
  return st;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--random")) {
    if (random_model(argv[2], argv[3], (tg_ggml_type)atoi(argv[4])) == TG_OK) return 0;
    fprintf(stderr, "tgc_run: %s\n", tg_error());
    return 1;
  }
  if (argc == 6 && !strcmp(argv[1], "--convert")) {
    if (tg_llama2c_to_gguf(argv[2], argv[3], argv[4], (tg_ggml_type)atoi(argv[5])) == TG_OK) return 0;
    fprintf(stderr, "tgc_run: %s\n", tg_error());
    return 1;
  }
  if (argc < 5 || strcmp(argv[1], "--compare")) {
    fprintf(stderr, "usage: tgc_run --convert MODEL.bin TOKENIZER.bin OUT.gguf TYPE | --compare MODEL.gguf LOGITS.bin ids...\n");
    return 2;
  }
  tg_llm *m = tg_llm_load(argv[2], 0);
  FILE *f = fopen(argv[3], "rb");
  if (!m || !f) {
    fprintf(stderr, "tgc_run: %s\n", m ? argv[3] : tg_error());
    return 1;
  }
  int64_t nv = tg_llm_config_of(m).vocab_size;
  float *a = malloc((size_t)nv * sizeof *a), *b = malloc((size_t)nv * sizeof *b);
  double worst = 0;
  int diverge = -1, n = argc - 4;
  for (int i = 0; a && b && i < n; i++) {
    if (tg_llm_step(m, atoi(argv[4 + i]), a) != TG_OK || fread(b, sizeof *b, (size_t)nv, f) != (size_t)nv) {
      fprintf(stderr, "tgc_run: position %d: %s\n", i, tg_error());
      return 1;
    }
    int ba = 0, bb = 0;
    for (int64_t k = 0; k < nv; k++) {
      worst = fmax(worst, fabs((double)a[k] - b[k]));
      if (a[k] > a[ba]) ba = (int)k;
      if (b[k] > b[bb]) bb = (int)k;
    }
    if (ba != bb && diverge < 0) diverge = i;
  }
  printf("max |logit difference| %.3g over %d positions; greedy choices %s%d\n", worst, n,
         diverge < 0 ? "agree at all " : "first differ at position ", diverge < 0 ? n : diverge);
  free(a);
  free(b);
  fclose(f);
  tg_llm_free(m);
  return 0;
}
