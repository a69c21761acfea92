/* tokenizer_spm.c — SentencePiece-style encoding (llama2.c's run.c encode(), llama.cpp's "llama" vocabulary):
 * the text, after a space prefix, starts as one symbol per UTF-8 code point; the adjacent pair whose
 * concatenation is the best-scoring piece merges (the leftmost on ties) until no pair is a piece; a symbol that
 * is a piece is its token, any other (a code point outside the vocabulary) one byte-fallback token per byte.
 *
 * Symbols are spans of one buffer, so a pair's text is the span from the left one's start to the right one's
 * end; the merge loop is tokenizer_merge.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenizer.h"
#include "uop/uop.h"

/* a pair merges into the piece that spells both (scored above run.c's threshold, -1e10), by its score */
static bool spm_pair(const tg_tokenizer *t, const char *text, const tok_sym *a, const tok_sym *b, float *prio,
                     int32_t *result) {
  int32_t id = tok_lookup(t, text + a->start, a->len + b->len);
  if (id < 0 || !(t->scores[id] > -1e10f)) return false;
  *prio = t->scores[id];
  *result = id;
  return true;
}

tg_status tok_spm_encode(const tg_tokenizer *t, const char *text, int64_t len, bool prefix, int32_t *out, int64_t *n) {
  if (len + 1 > INT32_MAX / 4) return TG_ERR_NOMEM;
  char *buf = mem_alloc((size_t)len + 1);
  tok_sym *sym = mem_alloc((size_t)(len + 1) * sizeof *sym);
  if (!buf || !sym) {
    free(buf), free(sym);
    return TG_ERR_NOMEM;
  }
  int32_t blen = 0;
  if (prefix) buf[blen++] = ' ';
  /* a GGUF vocabulary spells spaces "▁" (kept as spaces here): that character in the text is a space too */
  for (int64_t i = 0; i < len; i++) {
    if (t->fold_u2581 && i + 2 < len && !memcmp(text + i, "\xe2\x96\x81", 3)) {
      buf[blen++] = ' ';
      i += 2;
    } else {
      buf[blen++] = text[i];
    }
  }
  /* one symbol per code point. Where the text is not UTF-8 the two references part: run.c takes a byte and
   * up to three continuation bytes after it, llama.cpp the length its lead byte says */
  static const int8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  int32_t ns = 0;
  for (int32_t i = 0; i < blen;) {
    int32_t k = 1;
    if (t->fold_u2581) k = lead_len[(unsigned char)buf[i] >> 4] < blen - i ? lead_len[(unsigned char)buf[i] >> 4] : blen - i;
    else while (k < 4 && i + k < blen && ((unsigned char)buf[i + k] & 0xC0) == 0x80) k++;
    sym[ns] = (tok_sym){i, k, ns - 1, ns + 1, -1};
    ns++;
    i += k;
  }
  if (ns) sym[ns - 1].next = -1;
  if (tok_merge_symbols(t, buf, sym, ns, spm_pair) != TG_OK) {
    free(buf), free(sym);
    return TG_ERR_NOMEM;
  }
  for (int32_t i = ns ? 0 : -1; i >= 0; i = sym[i].next) {
    int32_t id = tok_lookup(t, buf + sym[i].start, sym[i].len);
    if (id >= 0) {
      out[(*n)++] = id;
      continue;
    }
    for (int32_t k = 0; k < sym[i].len; k++) {
      int32_t b = t->byte_id[(unsigned char)buf[sym[i].start + k]];
      out[(*n)++] = b >= 0 ? b : t->unk >= 0 ? t->unk : 0;
    }
  }
  free(buf), free(sym);
  return TG_OK;
}
