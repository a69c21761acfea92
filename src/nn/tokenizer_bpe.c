/* tokenizer_bpe.c — byte-level BPE (GPT-2's, llama3's, qwen2's): placeholder until the merges land. */
#include <string.h>

#include "nn/tokenizer.h"

tg_status tok_bpe_encode(const tg_tokenizer *t, const char *text, int64_t len, int32_t *out, int64_t *n) {
  for (int64_t i = 0; i < len; i++) out[(*n)++] = t->byte_id[(unsigned char)text[i]] >= 0 ? t->byte_id[(unsigned char)text[i]] : 0;
  return TG_OK;
}

int32_t tok_bpe_unmap(const char *s, int64_t len, char *out) {
  memcpy(out, s, (size_t)len);
  return (int32_t)len;
}

tg_status tok_bpe_merges(tg_tokenizer *t, const tg_gguf *g) { return TG_OK; }
