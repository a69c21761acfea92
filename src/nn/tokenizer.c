/* tokenizer.c — what every tokenizer shares once a loader has filled it (llama2.c's file: tokenizer_llama2.c,
 * a GGUF's metadata: tokenizer_gguf.c): the piece lookup, the split of a text at the special tokens it spells,
 * BOS/EOS around the encoder of the kind (SentencePiece-style: tokenizer_spm.c, byte-level BPE:
 * tokenizer_bpe.c), and the decoder. Pieces are compared with their lengths, not as C strings.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenizer.h"
#include "uop/uop.h"

/* FNV-1a, then splitmix64's finalizer so that the low bits the table masks depend on every byte */
static uint64_t piece_hash(const char *s, int32_t len) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

/* a hash table, not a binary search of sorted pieces: loading Llama 3's vocabulary looks up 840000 pieces
 * (its merges), each a cache miss or two instead of 17 */
int32_t tok_lookup(const tg_tokenizer *t, const char *s, int32_t len) {
  if (len > t->max_len) return -1;
  uint64_t mask = (uint64_t)t->nindex - 1;
  for (uint64_t h = piece_hash(s, len) & mask;; h = (h + 1) & mask) {
    int32_t id = t->index[h];
    if (id < 0) return -1;
    if (t->pieces[id].len == len && !memcmp(t->pieces[id].s, s, (size_t)len)) return id;
  }
}

void tg_tokenizer_free(tg_tokenizer *t) {
  if (!t) return;
  free(t->bytes);
  free(t->pieces);
  free(t->index);
  free(t->scores);
  free(t->type);
  free(t->special);
  free(t->eog);
  free(t->merges);
  free(t);
}

tg_tokenizer *tok_alloc(const char *op, int64_t vocab, size_t text_bytes) {
  tg_tokenizer *t = mem_calloc(1, sizeof *t);
  if (t) {
    t->vocab = vocab;
    t->bos = t->eos = t->unk = -1;
    t->pieces = mem_calloc((size_t)vocab, sizeof *t->pieces);
    for (t->nindex = 16; t->nindex < 2 * vocab; t->nindex *= 2) {}
    t->index = mem_alloc((size_t)t->nindex * sizeof *t->index);
    t->scores = mem_calloc((size_t)vocab, sizeof *t->scores);
    t->type = mem_calloc((size_t)vocab, sizeof *t->type);
    t->eog = mem_calloc((size_t)vocab, sizeof *t->eog);
    t->bytes = mem_alloc(text_bytes + (size_t)vocab + 1);  /* the pieces plus their NULs */
  }
  if (!t || !t->pieces || !t->index || !t->scores || !t->type || !t->eog || !t->bytes) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory for %lld tokens", op, (long long)vocab);
    tg_tokenizer_free(t);
    return NULL;
  }
  for (int b = 0; b < 256; b++) {
    t->raw[b][0] = (char)b;
    t->byte_id[b] = -1;
  }
  return t;
}

/* longest first, so that encode_special takes "<|im_start|>" before a shorter special that begins it */
static int special_cmp(const void *a, const void *b) {
  const piece *x = a, *y = b;
  return x->len != y->len ? (x->len < y->len) - (x->len > y->len) : (x->id > y->id) - (x->id < y->id);
}

/* a control or user-defined token with text */
static bool is_special(const tg_tokenizer *t, int64_t i) {
  return (t->type[i] == TOK_CONTROL || t->type[i] == TOK_USER) && t->pieces[i].len;
}

bool tok_finish(tg_tokenizer *t, const char *op) {
  t->max_len = 0;
  for (int64_t i = 0; i < t->vocab; i++)
    if (t->pieces[i].len > t->max_len) t->max_len = t->pieces[i].len;
  /* pieces spelled alike (rare: a control token and a normal one) are found as the lowest id */
  uint64_t mask = (uint64_t)t->nindex - 1;
  for (int64_t i = 0; i < t->nindex; i++) t->index[i] = -1;
  for (int64_t i = 0; i < t->vocab; i++) {
    const piece *p = &t->pieces[i];
    if (tok_lookup(t, p->s, p->len) >= 0) continue;
    uint64_t h = piece_hash(p->s, p->len) & mask;
    while (t->index[h] >= 0) h = (h + 1) & mask;
    t->index[h] = (int32_t)i;
  }
  int32_t ns = 0;
  for (int64_t i = 0; i < t->vocab; i++) ns += is_special(t, i);
  if (ns) {
    t->special = mem_alloc((size_t)ns * sizeof *t->special);
    if (!t->special) {
      tg_set_error(TG_ERR_NOMEM, "%s: out of memory for %d special tokens", op, ns);
      return false;
    }
    for (int64_t i = 0; i < t->vocab; i++)
      if (is_special(t, i)) t->special[t->nspecial++] = t->pieces[i];
    qsort(t->special, (size_t)ns, sizeof *t->special, special_cmp);
    for (int32_t i = 0; i < ns; i++) t->special_first[(unsigned char)t->special[i].s[0]] = true;
  }
  if (t->eos >= 0) t->eog[t->eos] = true;
  return true;
}

/* the byte a piece "<0xNN>" stands for, -1 if it is not one */
int tok_byte_piece(const piece *p) {
  static const char hex[] = "0123456789ABCDEF";
  if (p->len != 6 || memcmp(p->s, "<0x", 3) || p->s[5] != '>') return -1;
  const char *h = strchr(hex, p->s[3]), *l = strchr(hex, p->s[4]);
  return h && l && p->s[3] && p->s[4] ? (int)((h - hex) * 16 + (l - hex)) : -1;
}

/* the special token text[at...] begins with (the longest), NULL if none */
static const piece *special_at(const tg_tokenizer *t, const char *text, int64_t at, int64_t len, bool control) {
  if (!t->special_first[(unsigned char)text[at]]) return NULL;
  for (int32_t i = 0; i < t->nspecial; i++) {
    const piece *p = &t->special[i];
    if (p->len <= len - at && !memcmp(text + at, p->s, (size_t)p->len) && (control || t->type[p->id] == TOK_USER))
      return p;
  }
  return NULL;
}

/* the end of the plain text from at (up to the next special token, user-defined ones always, as llama.cpp;
 * control ones when `control`) and that token into *sp (NULL at the end of the text) */
static int64_t next_special(const tg_tokenizer *t, const char *text, int64_t at, int64_t len, bool control,
                            const piece **sp) {
  *sp = NULL;
  while (at < len && !(t->nspecial && (*sp = special_at(t, text, at, len, control)))) at++;
  return at;
}

/* the tokens of text: each stretch of plain text goes to the encoder of the kind, each special token is itself;
 * SPM's space prefix starts the text and follows every special token, as llama.cpp does it */
static int64_t encode(const char *op, const tg_tokenizer *t, const char *text, bool bos, bool eos, bool control,
                      int32_t *tokens, int64_t cap) {
  if (!t || !text || !tokens) {
    tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, !t ? "the tokenizer" : !text ? "the text" : "tokens");
    return TG_ERR_ARG;
  }
  int64_t len = (int64_t)strlen(text);
  if (len > (1 << 28)) {
    tg_set_error(TG_ERR_ARG, "%s: a text of %lld bytes is longer than 2^28", op, (long long)len);
    return TG_ERR_ARG;
  }
  /* the most tokens: BOS, EOS, a token per byte at most, a prefix per stretch of SPM text, a token per special
   * (len + 3 unless one-byte specials, each with a prefix after it, are in the text) */
  int64_t need = (bos && t->bos >= 0) + (eos && t->eos >= 0) + len, nspecial = 0, nprefix = 0;
  const piece *sp;
  for (int64_t at = 0; at < len; at += sp ? sp->len : 0) {
    int64_t end = next_special(t, text, at, len, control, &sp);
    nprefix += end > at && t->kind == TOK_SPM && t->add_space_prefix;
    if (sp) need += 1 - sp->len;
    nspecial += sp != NULL;
    at = end;
  }
  need += nprefix;
  if (need < len + 3) need = len + 3;
  if (cap < need) {
    tg_set_error(TG_ERR_ARG, "%s: room for %lld tokens; a text of %lld bytes%s may need %lld", op, (long long)cap,
                 (long long)len, nspecial ? " with special tokens" : "", (long long)need);
    return TG_ERR_ARG;
  }
  int64_t n = 0;
  if (bos && t->bos >= 0) tokens[n++] = t->bos;
  bool prefix = true;
  for (int64_t at = 0; at < len; at += sp ? sp->len : 0) {
    int64_t end = next_special(t, text, at, len, control, &sp);
    if (end > at) {
      bool pre = prefix && t->add_space_prefix;
      tg_status st = t->kind == TOK_SPM ? tok_spm_encode(t, text + at, end - at, pre, tokens, &n)
                                        : tok_bpe_encode(t, text + at, end - at, tokens, &n);
      if (st != TG_OK) {
        tg_set_error(st, "%s: out of memory", op);
        return st;
      }
    }
    if (sp) tokens[n++] = sp->id;
    prefix = sp != NULL;
    at = end;
  }
  if (eos && t->eos >= 0) tokens[n++] = t->eos;
  return n;
}

int64_t tg_tokenizer_encode(const tg_tokenizer *t, const char *text, bool bos, bool eos, int32_t *tokens,
                            int64_t cap) {
  return encode("tg_tokenizer_encode", t, text, bos, eos, false, tokens, cap);
}

int64_t tg_tokenizer_encode_special(const tg_tokenizer *t, const char *text, bool bos, int32_t *tokens, int64_t cap) {
  return encode("tg_tokenizer_encode_special", t, text, bos, false, true, tokens, cap);
}

const char *tg_tokenizer_decode(const tg_tokenizer *t, int32_t prev, int32_t token) {
  if (!t || token < 0 || token >= t->vocab) {
    tg_set_error(TG_ERR_ARG, "tg_tokenizer_decode: %s", !t ? "the tokenizer is NULL" : "token outside the vocabulary");
    return NULL;
  }
  const piece *p = &t->pieces[token];
  if (t->kind == TOK_BPE) return p->s;
  int b = t->type[token] == TOK_BYTE ? tok_byte_piece(p) : -1;
  if (b >= 0) return t->raw[b];
  /* after BOS, SentencePiece's decoder strips the leading space of the dummy prefix */
  return prev >= 0 && prev == t->bos && p->s[0] == ' ' ? p->s + 1 : p->s;
}

int64_t tg_tokenizer_vocab(const tg_tokenizer *t) { return t ? t->vocab : -1; }
int32_t tg_tokenizer_bos(const tg_tokenizer *t) { return t ? t->bos : -1; }
int32_t tg_tokenizer_eos(const tg_tokenizer *t) { return t ? t->eos : -1; }
bool tg_tokenizer_add_bos(const tg_tokenizer *t) { return t && t->add_bos; }
bool tg_tokenizer_is_eog(const tg_tokenizer *t, int32_t token) {
  return t && token >= 0 && token < t->vocab && t->eog[token];
}
bool tg_tokenizer_is_special(const tg_tokenizer *t, int32_t token) {
  return t && token >= 0 && token < t->vocab && (t->type[token] == TOK_CONTROL || t->type[token] == TOK_USER);
}

int32_t tg_tokenizer_find(const tg_tokenizer *t, const char *piece) {
  if (!t || !piece) {
    tg_set_error(TG_ERR_ARG, "tg_tokenizer_find: %s is NULL", !t ? "the tokenizer" : "the piece");
    return -1;
  }
  size_t len = strlen(piece);
  if (len > (size_t)t->max_len * 3) return -1;
  int32_t id = tok_lookup(t, piece, (int32_t)len);
  if (id >= 0 || !t->fold_u2581 || !strstr(piece, "\xe2\x96\x81")) return id;
  char *s = mem_alloc(len + 1);  /* the file's spelling: "▁" for a space */
  if (!s) {
    tg_set_error(TG_ERR_NOMEM, "tg_tokenizer_find: out of memory");
    return -1;
  }
  int32_t n = 0;
  for (size_t k = 0; k < len; k++) {
    bool sp = k + 2 < len && !memcmp(piece + k, "\xe2\x96\x81", 3);
    s[n++] = sp ? ' ' : piece[k];
    k += sp ? 2 : 0;
  }
  id = tok_lookup(t, s, n);
  free(s);
  return id;
}
