/* tokenizer.c — what every tokenizer shares once a loader has filled it (llama2.c's file: tokenizer_llama2.c,
 * a GGUF's metadata: tokenizer_gguf.c): the piece lookup, the split of a text at the special tokens it spells,
 * BOS/EOS around the encoder of the kind (SentencePiece-style: tokenizer_spm.c, byte-level BPE:
 * tokenizer_bpe.c), and the decoder. Pieces are compared with their lengths, not as C strings.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/tokenizer.h"
#include "uop/uop.h"

static int piece_cmp(const void *a, const void *b) {
  const piece *x = a, *y = b;
  int32_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, (size_t)n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

int32_t tok_lookup(const tg_tokenizer *t, const char *s, int32_t len) {
  if (len > t->max_len) return -1;
  piece key = {s, len, 0};
  const piece *p = bsearch(&key, t->sorted, (size_t)t->vocab, sizeof *p, piece_cmp);
  return p ? p->id : -1;
}

void tg_tokenizer_free(tg_tokenizer *t) {
  if (!t) return;
  free(t->bytes);
  free(t->pieces);
  free(t->sorted);
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
    t->sorted = mem_calloc((size_t)vocab, sizeof *t->sorted);
    t->scores = mem_calloc((size_t)vocab, sizeof *t->scores);
    t->type = mem_calloc((size_t)vocab, sizeof *t->type);
    t->eog = mem_calloc((size_t)vocab, sizeof *t->eog);
    t->bytes = mem_alloc(text_bytes + (size_t)vocab + 1);  /* the pieces plus their NULs */
  }
  if (!t || !t->pieces || !t->sorted || !t->scores || !t->type || !t->eog || !t->bytes) {
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

bool tok_finish(tg_tokenizer *t, const char *op) {
  t->max_len = 0;
  for (int64_t i = 0; i < t->vocab; i++)
    if (t->pieces[i].len > t->max_len) t->max_len = t->pieces[i].len;
  memcpy(t->sorted, t->pieces, (size_t)t->vocab * sizeof *t->sorted);
  qsort(t->sorted, (size_t)t->vocab, sizeof *t->sorted, piece_cmp);
  int32_t ns = 0;
  for (int64_t i = 0; i < t->vocab; i++) ns += (t->type[i] == TOK_CONTROL || t->type[i] == TOK_USER) && t->pieces[i].len;
  if (ns) {
    t->special = mem_alloc((size_t)ns * sizeof *t->special);
    if (!t->special) {
      tg_set_error(TG_ERR_NOMEM, "%s: out of memory for %d special tokens", op, ns);
      return false;
    }
    for (int64_t i = 0; i < t->vocab; i++)
      if ((t->type[i] == TOK_CONTROL || t->type[i] == TOK_USER) && t->pieces[i].len) t->special[t->nspecial++] = t->pieces[i];
    qsort(t->special, (size_t)ns, sizeof *t->special, special_cmp);
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
  for (int32_t i = 0; i < t->nspecial; i++) {
    const piece *p = &t->special[i];
    if (p->len <= len - at && !memcmp(text + at, p->s, (size_t)p->len) && (control || t->type[p->id] == TOK_USER))
      return p;
  }
  return NULL;
}

/* the tokens of text between special tokens (user-defined ones always, as llama.cpp; control ones when
 * `control`): each stretch of plain text goes to the encoder of the kind; SPM's space prefix starts the text
 * and follows every special token, as llama.cpp does it */
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
  if (cap < 0 || cap < len + 3) {  /* BOS, the space prefix, a token per byte at most, EOS */
    tg_set_error(TG_ERR_ARG, "%s: room for %lld tokens; a text of %lld bytes may need %lld", op, (long long)cap,
                 (long long)len, (long long)len + 3);
    return TG_ERR_ARG;
  }
  int64_t n = 0;
  if (bos && t->bos >= 0) tokens[n++] = t->bos;
  bool prefix = true;
  for (int64_t at = 0; at < len;) {
    int64_t end = at;
    const piece *sp = NULL;
    while (end < len && !(t->nspecial && (sp = special_at(t, text, end, len, control)))) end++;
    if (end > at) {
      /* each special token is at least a byte, so only the prefixes after one-byte specials can run over */
      if (n + (end - at) + 2 > cap) {
        tg_set_error(TG_ERR_ARG, "%s: room for %lld tokens is not enough for this text's special tokens", op,
                     (long long)cap);
        return TG_ERR_ARG;
      }
      tg_status st = t->kind == TOK_SPM ? tok_spm_encode(t, text + at, end - at, prefix && t->add_space_prefix, tokens, &n)
                                        : tok_bpe_encode(t, text + at, end - at, tokens, &n);
      if (st != TG_OK) {
        tg_set_error(st, "%s: out of memory", op);
        return st;
      }
    }
    if (sp) {
      if (n + 2 > cap) {
        tg_set_error(TG_ERR_ARG, "%s: room for %lld tokens is not enough for this text's special tokens", op,
                     (long long)cap);
        return TG_ERR_ARG;
      }
      tokens[n++] = sp->id;
      end += sp->len;
    }
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
