/* tokenizer_gguf.c — a tokenizer from a GGUF file's tokenizer.ggml.* metadata, as llama.cpp reads it: model
 * "llama" (SentencePiece-style: tokens, scores, token_type with <0xNN> byte tokens, add_space_prefix) or "gpt2"
 * (byte-level BPE: tokens, token_type, merges "left right" by rank, the pre-tokenizer named by
 * tokenizer.ggml.pre). The pieces are copied out of the file and kept as the text they stand for: SPM with
 * spaces where the file spells "▁", BPE with GPT-2's byte-to-character mapping undone (control and
 * user-defined tokens are already plain text). Every value is checked: a hostile file gets an error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/tokenizer.h"
#include "uop/uop.h"

static const char *op = "tg_tokenizer_from_gguf";

/* an optional token id key into *out: unchanged when absent or outside the vocabulary (llama.cpp keeps its
 * default then); false with an error when it is not an integer */
static bool opt_id(const tg_gguf *g, const char *key, int64_t vocab, int32_t *out) {
  if (tg_gguf_kv_type(g, key) == TG_GGUF_NONE) return true;
  int64_t v;
  if (tg_gguf_get_int(g, key, &v) != TG_OK) {
    tg_set_error(TG_ERR_IO, "%s: %s is not an integer", op, key);
    return false;
  }
  if (v >= 0 && v < vocab) *out = (int32_t)v;
  return true;
}

static bool opt_bool(const tg_gguf *g, const char *key, bool *out) {
  if (tg_gguf_kv_type(g, key) == TG_GGUF_NONE) return true;
  if (tg_gguf_get_bool(g, key, out) != TG_OK) {
    tg_set_error(TG_ERR_IO, "%s: %s is not a bool", op, key);
    return false;
  }
  return true;
}

/* an array key's length when it holds vocab elements of a number type (or strings when str), else -1 with an
 * error; -2 when absent and not required */
static int64_t array_len(const tg_gguf *g, const char *key, bool str, bool required) {
  tg_gguf_type et;
  int64_t n;
  if (tg_gguf_kv_type(g, key) == TG_GGUF_NONE) {
    if (!required) return -2;
    tg_set_error(TG_ERR_IO, "%s: no %s in the file", op, key);
    return -1;
  }
  if (tg_gguf_get_array(g, key, &et, &n) != TG_OK || (et == TG_GGUF_STRING) != str || et == TG_GGUF_BOOL) {
    tg_set_error(TG_ERR_IO, "%s: %s is not an array of %s", op, key, str ? "strings" : "numbers");
    return -1;
  }
  return n;
}

static const char *eog_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                  "<EOT>", "<|end_of_text|>", "<|eom_id|>", "<end_of_utterance>"};

tg_tokenizer *tg_tokenizer_from_gguf(const tg_gguf *g) {
  if (!g) {
    tg_set_error(TG_ERR_ARG, "%s: the reader is NULL", op);
    return NULL;
  }
  const char *model = tg_gguf_kv_type(g, "tokenizer.ggml.model") == TG_GGUF_STRING
                          ? tg_gguf_get_string(g, "tokenizer.ggml.model", NULL) : NULL;
  if (!model) {
    tg_set_error(TG_ERR_IO, "%s: no tokenizer.ggml.model string in the file", op);
    return NULL;
  }
  bool spm = !strcmp(model, "llama"), bpe = !strcmp(model, "gpt2");
  if (!spm && !bpe) {
    tg_set_error(TG_ERR_ARG, "%s: tokenizer.ggml.model '%.64s' is not supported (\"llama\" and \"gpt2\" are)", op,
                 model);
    return NULL;
  }
  /* llama.cpp's names (llama-vocab.cpp) of the pre-tokenizers written here; none: its "default" */
  tok_pre pre = TOK_PRE_DEFAULT;
  if (bpe && tg_gguf_kv_type(g, "tokenizer.ggml.pre") != TG_GGUF_NONE) {
    const char *p = tg_gguf_get_string(g, "tokenizer.ggml.pre", NULL);
    if (p && (!strcmp(p, "llama-bpe") || !strcmp(p, "llama3") || !strcmp(p, "llama-v3"))) pre = TOK_PRE_LLAMA3;
    else if (p && (!strcmp(p, "qwen2") || !strcmp(p, "deepseek-r1-qwen"))) pre = TOK_PRE_QWEN2;
    else if (p && (!strcmp(p, "gpt-2") || !strcmp(p, "gpt2"))) pre = TOK_PRE_GPT2;
    else if (!p || strcmp(p, "default")) {
      tg_set_error(TG_ERR_ARG, "%s: the pre-tokenizer tokenizer.ggml.pre '%.64s' is not supported (llama-bpe, "
                   "llama3, llama-v3, qwen2, deepseek-r1-qwen, gpt-2, gpt2, default are)", op, p ? p : "(not a string)");
      return NULL;
    }
  }
  int64_t vocab = array_len(g, "tokenizer.ggml.tokens", true, true);
  if (vocab < 0) return NULL;
  if (vocab < 1 || vocab > (1 << 24)) {
    tg_set_error(TG_ERR_IO, "%s: %lld tokens is outside [1, 2^24]", op, (long long)vocab);
    return NULL;
  }
  int64_t nscores = array_len(g, "tokenizer.ggml.scores", false, spm);
  int64_t ntypes = array_len(g, "tokenizer.ggml.token_type", false, false);
  if (nscores == -1 || ntypes == -1) return NULL;
  if ((nscores >= 0 && nscores != vocab) || (ntypes >= 0 && ntypes != vocab)) {
    tg_set_error(TG_ERR_IO, "%s: %lld tokens but %lld %s", op, (long long)vocab,
                 (long long)(nscores >= 0 && nscores != vocab ? nscores : ntypes),
                 nscores >= 0 && nscores != vocab ? "scores" : "token types");
    return NULL;
  }
  size_t text = 0;
  for (int64_t i = 0; i < vocab; i++) {
    size_t len = 0;
    if (!tg_gguf_array_string(g, "tokenizer.ggml.tokens", i, &len)) return NULL;
    if (len > (1 << 16)) {
      tg_set_error(TG_ERR_IO, "%s: token %lld is %zu bytes long (more than 65536)", op, (long long)i, len);
      return NULL;
    }
    text += len;
  }
  tg_tokenizer *t = tok_alloc(op, vocab, text);
  if (!t) return NULL;
  t->kind = spm ? TOK_SPM : TOK_BPE;
  t->pre = pre;
  t->add_bos = spm || pre == TOK_PRE_LLAMA3;  /* llama.cpp's defaults when the file does not say */
  t->add_space_prefix = spm;
  t->ignore_merges = pre == TOK_PRE_LLAMA3;
  t->fold_u2581 = spm;
  size_t used = 0;
  for (int64_t i = 0; i < vocab; i++) {
    size_t len;
    const char *s = tg_gguf_array_string(g, "tokenizer.ggml.tokens", i, &len);
    int64_t type = TOK_NORMAL;
    double score = 0;
    if ((ntypes >= 0 && tg_gguf_array_int(g, "tokenizer.ggml.token_type", i, &type) != TG_OK) ||
        (nscores >= 0 && tg_gguf_array_float(g, "tokenizer.ggml.scores", i, &score) != TG_OK)) {
      tg_set_error(TG_ERR_IO, "%s: the type or score of token %lld is not a number", op, (long long)i);
      goto fail;
    }
    if (type < TOK_NORMAL || type > TOK_BYTE) type = TOK_NORMAL;  /* llama.cpp: undefined types are normal */
    t->type[i] = (uint8_t)type;
    t->scores[i] = (float)score;
    char *d = t->bytes + used;
    int32_t n = 0;
    if (spm) {  /* "▁" (e2 96 81) is a space */
      for (size_t k = 0; k < len; k++) {
        if (k + 2 < len && !memcmp(s + k, "\xe2\x96\x81", 3)) {
          d[n++] = ' ';
          k += 2;
        } else {
          d[n++] = s[k];
        }
      }
    } else if (type == TOK_CONTROL || type == TOK_USER) {
      memcpy(d, s, len);
      n = (int32_t)len;
    } else {
      n = tok_bpe_unmap(s, (int64_t)len, d);
    }
    d[n] = 0;
    t->pieces[i] = (piece){d, n, (int32_t)i};
    used += (size_t)n + 1;
  }
  if (spm) {  /* llama.cpp's defaults for a SentencePiece vocabulary */
    t->unk = 0;
    t->bos = vocab > 1 ? 1 : -1;
    t->eos = vocab > 2 ? 2 : -1;
  }
  if (!opt_id(g, "tokenizer.ggml.bos_token_id", vocab, &t->bos) ||
      !opt_id(g, "tokenizer.ggml.eos_token_id", vocab, &t->eos) ||
      !opt_id(g, "tokenizer.ggml.unknown_token_id", vocab, &t->unk) ||
      !opt_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos) ||
      !opt_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix))
    goto fail;
  int32_t eot = -1, eom = -1;
  if (!opt_id(g, "tokenizer.ggml.eot_token_id", vocab, &eot) || !opt_id(g, "tokenizer.ggml.eom_token_id", vocab, &eom))
    goto fail;
  if (!tok_finish(t, op)) goto fail;
  if (eot >= 0) t->eog[eot] = true;
  if (eom >= 0) t->eog[eom] = true;
  for (int32_t i = 0; i < t->nspecial; i++)
    for (size_t k = 0; k < sizeof eog_texts / sizeof *eog_texts; k++) {
      const piece *p = &t->special[i];
      if (p->len == (int32_t)strlen(eog_texts[k]) && !memcmp(p->s, eog_texts[k], (size_t)p->len)) t->eog[p->id] = true;
    }
  for (int b = 0; b < 256; b++) {
    if (spm) {  /* <0xNN> byte tokens, else the byte itself as a piece (llama.cpp's fallback) */
      char hex[8];
      snprintf(hex, sizeof hex, "<0x%02X>", b);
      t->byte_id[b] = tok_lookup(t, hex, 6);
      if (t->byte_id[b] < 0) t->byte_id[b] = tok_lookup(t, t->raw[b], 1);
    } else {
      t->byte_id[b] = tok_lookup(t, t->raw[b], 1);
    }
  }
  if (bpe && tok_bpe_merges(t, g) != TG_OK) goto fail;
  return t;
fail:
  tg_tokenizer_free(t);
  return NULL;
}
