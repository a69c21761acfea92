/* tokenizer_spm.c — SentencePiece-style encoding (llama2.c's run.c encode(), llama.cpp's "llama" vocabulary):
 * the text, after a space prefix, starts as one symbol per UTF-8 code point; the adjacent pair whose
 * concatenation is the best-scoring piece merges (the leftmost on ties) until no pair is a piece; a symbol that
 * is a piece is its token, any other (a code point outside the vocabulary) one byte-fallback token per byte.
 *
 * Symbols are spans of one buffer, so a pair's text is the span from the left one's start to the right one's
 * end. Each pair's best piece is cached and only the two pairs around a merge are looked up again: a merge
 * costs a scan of n cached scores, not n lookups.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenizer.h"
#include "uop/uop.h"

/* the piece of the pair of symbols i, i+1 (-1 if it is none) and its score */
static int32_t pair(const tg_tokenizer *t, const char *buf, const int32_t *start, const int32_t *len, int64_t i,
                    float *score) {
  int32_t id = tok_lookup(t, buf + start[i], len[i] + len[i + 1]);
  /* run.c's threshold: a piece scored -1e10 or below never merges */
  *score = id >= 0 && t->scores[id] > -1e10f ? t->scores[id] : -1e10f;
  return *score > -1e10f ? id : -1;
}

tg_status tok_spm_encode(const tg_tokenizer *t, const char *text, int64_t len, bool prefix, int32_t *out, int64_t *n) {
  int64_t cap = len + 1;
  char *buf = mem_alloc((size_t)cap);
  int32_t *start = mem_alloc((size_t)cap * sizeof *start), *slen = mem_alloc((size_t)cap * sizeof *slen);
  int32_t *pid = mem_alloc((size_t)cap * sizeof *pid);
  float *pscore = mem_alloc((size_t)cap * sizeof *pscore);
  if (!buf || !start || !slen || !pid || !pscore) {
    free(buf), free(start), free(slen), free(pid), free(pscore);
    return TG_ERR_NOMEM;
  }
  int64_t blen = 0;
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
  /* one symbol per code point: a lead byte and up to three continuation bytes after it */
  int64_t ns = 0;
  for (int64_t i = 0; i < blen;) {
    int32_t k = 1;
    while (k < 4 && i + k < blen && ((unsigned char)buf[i + k] & 0xC0) == 0x80) k++;
    start[ns] = (int32_t)i;
    slen[ns++] = k;
    i += k;
  }
  for (int64_t i = 0; i + 1 < ns; i++) pid[i] = pair(t, buf, start, slen, i, &pscore[i]);
  for (;;) {
    int64_t at = -1;
    float best = -1e10f;
    for (int64_t i = 0; i + 1 < ns; i++)
      if (pid[i] >= 0 && pscore[i] > best) {
        best = pscore[i];
        at = i;
      }
    if (at < 0) break;
    slen[at] += slen[at + 1];
    size_t tail = (size_t)(ns - at - 2);
    memmove(start + at + 1, start + at + 2, tail * sizeof *start);
    memmove(slen + at + 1, slen + at + 2, tail * sizeof *slen);
    memmove(pid + at + 1, pid + at + 2, tail * sizeof *pid);
    memmove(pscore + at + 1, pscore + at + 2, tail * sizeof *pscore);
    ns--;
    if (at > 0) pid[at - 1] = pair(t, buf, start, slen, at - 1, &pscore[at - 1]);
    if (at + 1 < ns) pid[at] = pair(t, buf, start, slen, at, &pscore[at]);
  }
  for (int64_t i = 0; i < ns; i++) {
    int32_t id = tok_lookup(t, buf + start[i], slen[i]);
    if (id >= 0) {
      out[(*n)++] = id;
      continue;
    }
    for (int32_t k = 0; k < slen[i]; k++) {
      int32_t b = t->byte_id[(unsigned char)buf[start[i] + k]];
      out[(*n)++] = b >= 0 ? b : t->unk >= 0 ? t->unk : 0;
    }
  }
  free(buf), free(start), free(slen), free(pid), free(pscore);
  return TG_OK;
}
