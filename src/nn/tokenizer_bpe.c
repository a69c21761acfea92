/* tokenizer_bpe.c — byte-level BPE (GPT-2's scheme, used by llama3, qwen2, ...): the text is cut into words by
 * the vocabulary's pre-tokenizer (tokenizer_pre.c); each word starts as one symbol per byte and the adjacent
 * pair with the lowest merge rank merges (the leftmost on ties) until no pair has a merge. With ignore_merges
 * (llama3) a word that is a token is that token, merged or not, as HF tokenizers and llama.cpp do.
 *
 * The merge loop is tokenizer_merge.c's. The file spells every byte as a printable character (GPT-2's
 * bytes_to_unicode: "Ġ" for a space); the tokenizer keeps the bytes themselves, so the merges table maps pairs
 * of token ids, and decoding is a copy.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenizer.h"
#include "nn/unicode.h"
#include "uop/uop.h"

/* the byte GPT-2's mapping spells as code point cp, -1 if none: the printable bytes ! .. ~, ¡ .. ¬, ® .. ÿ as
 * themselves, the other 68 (0 .. 32, 127 .. 160, 173) in order as U+0100 .. U+0143 */
static int byte_of(int32_t cp) {
  if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255)) return cp;
  int32_t k = cp - 256;
  return k < 0 || k >= 68 ? -1 : k < 33 ? k : k < 67 ? 127 + (k - 33) : 173;
}

int32_t tok_bpe_unmap(const char *s, int64_t len, char *out) {
  int32_t n = 0;
  for (int64_t i = 0; i < len;) {
    int32_t cp;
    int k = unicode_next(s, len, i, &cp);
    int b = byte_of(cp);
    if (b >= 0) {
      out[n++] = (char)b;
    } else {
      memcpy(out + n, s + i, (size_t)k);
      n += k;
    }
    i += k;
  }
  return n;
}

/* splitmix64's finalizer of the pair: every bit of both ids reaches the low bits the table masks */
static uint64_t merge_hash(int32_t a, int32_t b) {
  uint64_t h = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

/* the merge of tokens a, b, NULL if none */
static const tok_merge *merge_find(const tg_tokenizer *t, int32_t a, int32_t b) {
  if (!t->nmerge_slots || a < 0 || b < 0) return NULL;
  uint64_t mask = (uint64_t)t->nmerge_slots - 1;
  for (uint64_t h = merge_hash(a, b) & mask;; h = (h + 1) & mask) {
    const tok_merge *m = &t->merges[h];
    if (m->left < 0) return NULL;
    if (m->left == a && m->right == b) return m;
  }
}

tg_status tok_bpe_merges(tg_tokenizer *t, const tg_gguf *g) {
  static const char *op = "tg_tokenizer_from_gguf";
  const char *key = "tokenizer.ggml.merges";
  tg_gguf_type et;
  int64_t n = 0;
  if (tg_gguf_kv_type(g, key) == TG_GGUF_NONE) return TG_OK;  /* a vocabulary of bytes and specials only */
  if (tg_gguf_get_array(g, key, &et, &n) != TG_OK || et != TG_GGUF_STRING || n > (1 << 24)) {
    tg_set_error(TG_ERR_IO, "%s: %s is not an array of at most 2^24 strings", op, key);
    return TG_ERR_IO;
  }
  int64_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  t->merges = mem_alloc((size_t)slots * sizeof *t->merges);
  char *buf = mem_alloc(4 * (size_t)t->max_len + 8);  /* both sides unmapped, each at most 2 max_len bytes */
  if (!t->merges || !buf) {
    free(buf);
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory for %lld merges", op, (long long)n);
    return TG_ERR_NOMEM;
  }
  t->nmerge_slots = slots;
  for (int64_t i = 0; i < slots; i++) t->merges[i].left = -1;
  for (int64_t i = 0; i < n; i++) {
    size_t len;
    const char *s = tg_gguf_array_string(g, key, i, &len);
    const char *sp = s && len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;  /* "left right"; left is not empty */
    if (!sp) {
      free(buf);
      tg_set_error(TG_ERR_IO, "%s: merge %lld '%.64s' is not two tokens with a space between", op, (long long)i,
                   s ? s : "");
      return TG_ERR_IO;
    }
    int64_t la = sp - s, lb = (int64_t)len - la - 1;
    /* a token's spelling is at most twice its bytes (two-byte characters): longer sides are no tokens */
    if (la > (int64_t)t->max_len * 2 || lb > (int64_t)t->max_len * 2) continue;
    int32_t na = tok_bpe_unmap(s, la, buf), nb = tok_bpe_unmap(sp + 1, lb, buf + na);
    int32_t a = tok_lookup(t, buf, na), b = tok_lookup(t, buf + na, nb), r = tok_lookup(t, buf, na + nb);
    /* a merge of parts or into a result outside the vocabulary can never apply to tokens: skipped */
    if (a < 0 || b < 0 || r < 0 || merge_find(t, a, b)) continue;
    uint64_t mask = (uint64_t)slots - 1, h = merge_hash(a, b) & mask;
    while (t->merges[h].left >= 0) h = (h + 1) & mask;
    t->merges[h] = (tok_merge){a, b, r, (int32_t)i};
  }
  free(buf);
  return TG_OK;
}

/* a pair merges as the merges table says, the lowest rank first */
static bool bpe_pair(const tg_tokenizer *t, const char *text, const tok_sym *a, const tok_sym *b, float *prio,
                     int32_t *result) {
  const tok_merge *m = merge_find(t, a->id, b->id);
  if (!m) return false;
  *prio = -(float)m->rank;  /* exact: ranks are below 2^24 */
  *result = m->result;
  return true;
}

/* the tokens of one word text[0, len) at out[*n]; sym: room for len symbols */
static tg_status encode_word(const tg_tokenizer *t, const char *text, int64_t len, int32_t *out, int64_t *n,
                             tok_sym *sym) {
  if (t->ignore_merges) {
    int32_t w = len <= t->max_len ? tok_lookup(t, text, (int32_t)len) : -1;
    if (w >= 0 && t->type[w] != TOK_CONTROL) {
      out[(*n)++] = w;
      return TG_OK;
    }
  }
  for (int32_t i = 0; i < len; i++)
    sym[i] = (tok_sym){i, 1, i - 1, i + 1 < len ? i + 1 : -1, t->byte_id[(unsigned char)text[i]]};
  if (tok_merge_symbols(t, text, sym, len, bpe_pair) != TG_OK) return TG_ERR_NOMEM;
  /* a symbol is a token, or a byte without one: <unk> if the vocabulary has it, else dropped (llama.cpp) */
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id >= 0) out[(*n)++] = sym[i].id;
    else if (t->unk >= 0) out[(*n)++] = t->unk;
  }
  return TG_OK;
}

tg_status tok_bpe_encode(const tg_tokenizer *t, const char *text, int64_t len, int32_t *out, int64_t *n) {
  if (len > INT32_MAX / 4) return TG_ERR_NOMEM;
  tok_sym *sym = mem_alloc((size_t)(len > 0 ? len : 1) * sizeof *sym);
  if (!sym) return TG_ERR_NOMEM;
  tg_status st = TG_OK;
  for (int64_t at = 0; at < len && st == TG_OK;) {
    int64_t w = tok_pre_next(t->pre, text, len, at);
    st = encode_word(t, text + at, w, out, n, sym);
    at += w;
  }
  free(sym);
  return st;
}
