/* llama2c_gguf.c — a llama2.c checkpoint and tokenizer.bin as a GGUF file, as llama.cpp's
 * convert-llama2c-to-ggml writes it: architecture "llama", its hyperparameters, the SentencePiece vocabulary
 * (pieces, scores, token types) and the weights under llama.cpp's tensor names.
 *
 * No row is permuted: llama2.c's Q and K rows are already in the order llama.cpp's "llama" RoPE (adjacent
 * pairs) expects; the permutation in llama.cpp's HF converter undoes HF's halves layout, which llama2.c's
 * export had already undone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/data.h"
#include "nn/llm.h"
#include "tensor/tensor.h"

/* token types as llama.cpp numbers them */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_BYTE = 6 };

/* piece i of llama2.c's vocabulary as a SentencePiece token of a GGUF file, NUL-terminated: ids 0, 1, 2 named
 * <unk>, <s>, </s> and every space written as U+2581 (llama2.c's export turned them into spaces; llama.cpp's
 * converter turns them back), its type in *type */
static char *piece_text(int64_t i, const uint8_t *p, int32_t len, int64_t *type) {
  static const char *special[3] = {"<unk>", "<s>", "</s>"};
  size_t spaces = 0;
  for (int32_t k = 0; k < len; k++) spaces += p[k] == ' ';
  size_t n = i < 3 ? strlen(special[i]) : (size_t)len + 2 * spaces;
  char *t = mem_alloc(n + 1);
  if (!t) return NULL;
  if (i < 3) memcpy(t, special[i], n + 1);
  for (int32_t k = 0, o = 0; i >= 3 && k < len; k++) {
    if (p[k] == ' ') memcpy(t + o, "\xe2\x96\x81", 3), o += 3;
    else t[o++] = (char)p[k];
  }
  t[n] = 0;
  unsigned byte;
  char end;
  *type = i == 0 ? TOK_UNKNOWN : i < 3 || len == 0 ? TOK_CONTROL
        : len == 6 && sscanf(t, "<0x%2X%c", &byte, &end) == 2 && end == '>' ? TOK_BYTE : TOK_NORMAL;
  return t;
}

/* llama2.c's tokenizer file: vocab pieces (NUL-terminated copies) and scores, or false with an error */
static bool read_vocab(const char *path, const uint8_t *b, size_t n, int64_t vocab, char **pieces, double *scores,
                       int64_t *types) {
  size_t at = 4;
  if (n < 4) {
    tg_set_error(TG_ERR_IO, "tg_llama2c_to_gguf: %s: %zu bytes: too short for a tokenizer", path, n);
    return false;
  }
  for (int64_t i = 0; i < vocab; i++) {
    float score;
    int32_t len;
    if (n - at < 8) goto truncated;
    memcpy(&score, b + at, 4);
    memcpy(&len, b + at + 4, 4);
    at += 8;
    if (len < 0 || (size_t)len > n - at) goto truncated;
    pieces[i] = piece_text(i, b + at, len, &types[i]);
    if (!pieces[i]) {
      tg_set_error(TG_ERR_NOMEM, "tg_llama2c_to_gguf: out of memory");
      return false;
    }
    at += (size_t)len;
    scores[i] = score;
  }
  return true;
truncated:
  tg_set_error(TG_ERR_IO, "tg_llama2c_to_gguf: %s: truncated before the %lld tokens of the model's vocabulary",
               path, (long long)vocab);
  return false;
}

static tg_status write_meta(tg_gguf_writer *w, const tg_llama_config *c, char **pieces, const double *scores,
                            const int64_t *types) {
  tg_status st = tg_gguf_set_string(w, "general.architecture", "llama");
  if (st == TG_OK) st = tg_gguf_set_string(w, "general.name", "llama");
  struct { const char *k; int64_t v; } ints[] = {
    {"llama.context_length", c->seq_len}, {"llama.embedding_length", c->dim},
    {"llama.feed_forward_length", c->hidden_dim}, {"llama.block_count", c->n_layers},
    {"llama.attention.head_count", c->n_heads}, {"llama.attention.head_count_kv", c->n_kv_heads},
    {"llama.rope.dimension_count", c->dim / c->n_heads},
    {"tokenizer.ggml.bos_token_id", 1}, {"tokenizer.ggml.eos_token_id", 2}, {"tokenizer.ggml.unknown_token_id", 0},
  };
  for (size_t i = 0; st == TG_OK && i < sizeof ints / sizeof ints[0]; i++)
    st = tg_gguf_set_int(w, ints[i].k, TG_GGUF_UINT32, ints[i].v);
  if (st == TG_OK) st = tg_gguf_set_float(w, "llama.attention.layer_norm_rms_epsilon", TG_GGUF_FLOAT32, 1e-5);
  if (st == TG_OK) st = tg_gguf_set_float(w, "llama.rope.freq_base", TG_GGUF_FLOAT32, 10000);
  if (st == TG_OK) st = tg_gguf_set_string(w, "tokenizer.ggml.model", "llama");
  if (st == TG_OK)
    st = tg_gguf_set_array_string(w, "tokenizer.ggml.tokens", (const char *const *)pieces, c->vocab_size);
  if (st == TG_OK) st = tg_gguf_set_array_float(w, "tokenizer.ggml.scores", TG_GGUF_FLOAT32, scores, c->vocab_size);
  if (st == TG_OK) st = tg_gguf_set_array_int(w, "tokenizer.ggml.token_type", TG_GGUF_INT32, types, c->vocab_size);
  return st;
}

/* the weights in llama2.c's order under llama.cpp's names; 2-d ones as type where their rows are whole blocks */
static tg_status write_tensors(tg_gguf_writer *w, const tg_llama_config *c, const float *f, tg_ggml_type type) {
  int64_t d = c->dim, hd = c->hidden_dim, kv = d / c->n_heads * c->n_kv_heads;
  uint64_t at = 0;
  char name[64];
  tg_status st = TG_OK;
#define T(nm, rows, cols)                                                                                     \
  do {                                                                                                        \
    int64_t shape[2] = {rows, cols};                                                                          \
    tg_ggml_type ty = rows == 1 || (type != TG_GGML_F32 && type != TG_GGML_F16 && type != TG_GGML_BF16 &&     \
                                    cols % 32) ? TG_GGML_F32 : type;                                          \
    if (st == TG_OK) st = tg_gguf_add_tensor(w, nm, rows == 1 ? 1 : 2, rows == 1 ? shape + 1 : shape, f + at, ty); \
    at += (uint64_t)(rows) * (uint64_t)(cols);                                                                \
  } while (0)
  T("token_embd.weight", c->vocab_size, d);
  struct { const char *suffix; int64_t rows, cols; } kinds[] = {
    {"attn_norm.weight", 1, d}, {"attn_q.weight", d, d}, {"attn_k.weight", kv, d}, {"attn_v.weight", kv, d},
    {"attn_output.weight", d, d}, {"ffn_norm.weight", 1, d}, {"ffn_gate.weight", hd, d},
    {"ffn_down.weight", d, hd}, {"ffn_up.weight", hd, d},
  };
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    for (int64_t l = 0; l < c->n_layers; l++) {
      snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, kinds[k].suffix);
      T(name, kinds[k].rows, kinds[k].cols);
    }
  T("output_norm.weight", 1, d);
  at += (uint64_t)c->seq_len * (uint64_t)(d / c->n_heads);  /* old exports' RoPE tables: not needed */
  if (!c->shared_classifier) T("output.weight", c->vocab_size, d);
#undef T
  return st;
}

tg_status tg_llama2c_to_gguf(const char *model_bin, const char *tokenizer_bin, const char *out_gguf,
                             tg_ggml_type type) {
  if (!model_bin || !tokenizer_bin || !out_gguf) {
    tg_set_error(TG_ERR_ARG, "tg_llama2c_to_gguf: a path is NULL");
    return TG_ERR_ARG;
  }
  data_map fm = {0}, ft = {0};
  if (data_map_file("tg_llama2c_to_gguf", model_bin, &fm) != TG_OK) return TG_ERR_IO;
  if (data_map_file("tg_llama2c_to_gguf", tokenizer_bin, &ft) != TG_OK) {
    data_unmap(&fm);
    return TG_ERR_IO;
  }
  tg_llama_config c;
  tg_status st = llama2c_header(model_bin, fm.b, fm.n, &c) ? TG_OK : tg_error_status();
  char **pieces = NULL;
  double *scores = NULL;
  int64_t *types = NULL;
  float *weights = NULL;
  if (st == TG_OK) {
    pieces = mem_calloc((size_t)c.vocab_size, sizeof *pieces);
    scores = mem_alloc((size_t)c.vocab_size * sizeof *scores);
    types = mem_alloc((size_t)c.vocab_size * sizeof *types);
    weights = mem_alloc(fm.n - 28);  /* a copy: the mapping's floats need not be aligned */
    if (!pieces || !scores || !types || !weights) {
      tg_set_error(TG_ERR_NOMEM, "tg_llama2c_to_gguf: out of memory");
      st = TG_ERR_NOMEM;
    }
  }
  if (st == TG_OK && !read_vocab(tokenizer_bin, ft.b, ft.n, c.vocab_size, pieces, scores, types))
    st = tg_error_status();
  tg_gguf_writer *w = st == TG_OK ? tg_gguf_writer_new() : NULL;
  if (st == TG_OK && !w) st = tg_error_status();
  if (st == TG_OK) {
    memcpy(weights, fm.b + 28, fm.n - 28);
    st = write_meta(w, &c, pieces, scores, types);
  }
  if (st == TG_OK) st = write_tensors(w, &c, weights, type);
  if (st == TG_OK) st = tg_gguf_writer_save(w, out_gguf);
  tg_gguf_writer_free(w);
  for (int64_t i = 0; pieces && i < c.vocab_size; i++) free(pieces[i]);
  free(pieces);
  free(scores);
  free(types);
  free(weights);
  data_unmap(&fm);
  data_unmap(&ft);
  return st;
}
