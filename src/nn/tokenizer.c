/* tokenizer.c — llama2.c's tokenizer: a SentencePiece-derived vocabulary read from its binary format, the
 * greedy merge encoder and the piece decoder, matching run.c's encode() and decode() token for token.
 *
 * The file is user input: int32 max token length, then per token a float32 score, an int32 length and that
 * many bytes. Every length is checked against the bytes left and against the maximum, so the merge buffer
 * (two pieces) can never overflow. Pieces are compared with their lengths, not as C strings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/data.h"
#include "uop/uop.h"

typedef struct piece { const char *s; int32_t len, id; } piece;

struct tg_tokenizer {
  int64_t vocab;
  int32_t max_len;
  char *bytes;         /* every piece, NUL-terminated, back to back */
  piece *pieces;       /* by id */
  piece *sorted;       /* by bytes, for lookups */
  float *scores;
  char raw[256][2];    /* the one-byte strings <0xNN> tokens decode to */
};

static int piece_cmp(const void *a, const void *b) {
  const piece *x = a, *y = b;
  int32_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, (size_t)n);
  return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* the id of the piece with exactly these bytes, -1 if none */
static int32_t lookup(const tg_tokenizer *t, const char *s, int32_t len) {
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
  free(t);
}

/* reads n bytes at *off of buf (size len) into dst; false with an error naming what ran short */
static bool take(const char *path, const unsigned char *buf, size_t len, size_t *off, void *dst, size_t n,
                 const char *what, int64_t tok) {
  if (len - *off < n) {
    char where[48] = "";
    if (tok >= 0) snprintf(where, sizeof where, " of token %lld", (long long)tok);
    tg_set_error(TG_ERR_IO, "tg_tokenizer_load: %s: truncated: the file ends inside %s%s (at byte %zu of %zu)", path,
                 what, where, *off, len);
    return false;
  }
  memcpy(dst, buf + *off, n);
  *off += n;
  return true;
}

static unsigned char *read_file(const char *op, const char *path, size_t max, size_t *n) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    tg_set_error(TG_ERR_IO, "%s: %s: %s", op, path, strerror(errno));
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    tg_set_error(TG_ERR_IO, "%s: %s: not a regular file", op, path);
    return NULL;
  }
  if ((uint64_t)sb.st_size > max) {
    tg_set_error(TG_ERR_IO, "%s: %s: %lld bytes is more than this format can hold (%zu)", op, path,
                 (long long)sb.st_size, max);
    return NULL;
  }
  FILE *f = fopen(path, "rb");
  unsigned char *buf = mem_alloc((size_t)sb.st_size + 1);
  size_t got = f && buf ? fread(buf, 1, (size_t)sb.st_size, f) : 0;
  bool ok = f && buf && got == (size_t)sb.st_size && getc(f) == EOF;
  if (!ok) tg_set_error(!buf ? TG_ERR_NOMEM : TG_ERR_IO, "%s: %s: %s", op, path,
                        !f ? strerror(errno) : !buf ? "out of memory" : "the file changed size while being read");
  if (f) fclose(f);
  if (!ok) {
    free(buf);
    return NULL;
  }
  *n = (size_t)sb.st_size;
  return buf;
}

/* the byte a piece "<0xNN>" stands for, -1 if it is not one */
static int byte_piece(const piece *p) {
  static const char hex[] = "0123456789ABCDEF";
  if (p->len != 6 || memcmp(p->s, "<0x", 3) || p->s[5] != '>') return -1;
  const char *h = strchr(hex, p->s[3]), *l = strchr(hex, p->s[4]);
  return h && l && p->s[3] && p->s[4] ? (int)((h - hex) * 16 + (l - hex)) : -1;
}

tg_tokenizer *data_tokenizer(const char *path, const unsigned char *buf, size_t len, int64_t vocab) {
  static const char *op = "tg_tokenizer_load";
  if (vocab < 3 || vocab > (1 << 24)) {
    tg_set_error(TG_ERR_ARG, "%s: the vocabulary size must be in [3, 2^24]", op);
    return NULL;
  }
  size_t off = 0;
  tg_tokenizer *t = mem_calloc(1, sizeof *t);
  if (t) {
    t->vocab = vocab;
    t->pieces = mem_calloc((size_t)vocab, sizeof *t->pieces);
    t->sorted = mem_calloc((size_t)vocab, sizeof *t->sorted);
    t->scores = mem_calloc((size_t)vocab, sizeof *t->scores);
    t->bytes = mem_alloc(len + (size_t)vocab);  /* the pieces are at most the file's bytes, plus their NULs */
  }
  if (!t || !t->pieces || !t->sorted || !t->scores || !t->bytes) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory for %lld tokens", op, (long long)vocab);
    goto fail;
  }
  if (!take(path, buf, len, &off, &t->max_len, 4, "the header", -1)) goto fail;
  if (t->max_len < 1 || t->max_len > (1 << 20)) {
    tg_set_error(TG_ERR_IO, "%s: %s: max token length %d is not in [1, 2^20]", op, path, t->max_len);
    goto fail;
  }
  size_t used = 0;
  for (int64_t i = 0; i < vocab; i++) {
    piece *p = &t->pieces[i];
    if (!take(path, buf, len, &off, &t->scores[i], 4, "the score", i) ||
        !take(path, buf, len, &off, &p->len, 4, "the length", i))
      goto fail;
    if (p->len < 0 || p->len > t->max_len) {
      tg_set_error(TG_ERR_IO, "%s: %s: token %lld has length %d, outside [0, %d] (the max the header gives)", op,
                   path, (long long)i, p->len, t->max_len);
      goto fail;
    }
    char *s = t->bytes + used;
    if (!take(path, buf, len, &off, s, (size_t)p->len, "the bytes", i)) goto fail;
    s[p->len] = 0;
    used += (size_t)p->len + 1;
    p->s = s;
    p->id = (int32_t)i;
  }
  if (off != len) {
    tg_set_error(TG_ERR_IO, "%s: %s: %zu bytes after the %lld tokens (a different vocabulary size?)", op, path,
                 len - off, (long long)vocab);
    goto fail;
  }
  memcpy(t->sorted, t->pieces, (size_t)vocab * sizeof *t->sorted);
  qsort(t->sorted, (size_t)vocab, sizeof *t->sorted, piece_cmp);
  for (int b = 0; b < 256; b++) t->raw[b][0] = (char)b;
  return t;
fail:
  tg_tokenizer_free(t);
  return NULL;
}

tg_tokenizer *tg_tokenizer_load(const char *path, int64_t vocab) {
  static const char *op = "tg_tokenizer_load";
  if (!path || vocab < 3 || vocab > (1 << 24)) {
    tg_set_error(TG_ERR_ARG, "%s: %s", op, !path ? "path is NULL" : "the vocabulary size must be in [3, 2^24]");
    return NULL;
  }
  size_t len = 0;
  unsigned char *buf = read_file(op, path, (size_t)1 << 31, &len);
  if (!buf) return NULL;
  tg_tokenizer *t = data_tokenizer(path, buf, len, vocab);
  free(buf);
  return t;
}

int64_t tg_tokenizer_encode(const tg_tokenizer *t, const char *text, bool bos, bool eos, int32_t *tokens,
                            int64_t cap) {
  static const char *op = "tg_tokenizer_encode";
  if (!t || !text || !tokens) {
    tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, !t ? "the tokenizer" : !text ? "the text" : "tokens");
    return TG_ERR_ARG;
  }
  size_t need = strlen(text) + 3;  /* BOS, the dummy prefix, a token per byte at most, EOS */
  if (cap < 0 || (uint64_t)cap < need) {
    tg_set_error(TG_ERR_ARG, "%s: room for %lld tokens; a text of %zu bytes may need %zu", op, (long long)cap,
                 need - 3, need);
    return TG_ERR_ARG;
  }
  char *buf = mem_alloc((size_t)t->max_len * 2 + 1);
  if (!buf) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
    return TG_ERR_NOMEM;
  }
  int64_t n = 0;
  if (bos) tokens[n++] = 1;
  /* SentencePiece's add_dummy_prefix: the text starts with a space, as run.c does it */
  if (text[0]) {
    int32_t sp = lookup(t, " ", 1);
    if (sp >= 0) tokens[n++] = sp;
  }
  /* one token per UTF-8 code point when the vocabulary has it, else one byte token (id byte + 3) per byte */
  for (const unsigned char *c = (const unsigned char *)text; *c;) {
    int32_t k = 1;
    while (k < 4 && (c[k] & 0xC0) == 0x80) k++;
    int32_t id = k <= t->max_len ? lookup(t, (const char *)c, k) : -1;
    if (id >= 0) {
      tokens[n++] = id;
    } else {
      for (int32_t i = 0; i < k; i++) tokens[n++] = c[i] + 3 < t->vocab ? c[i] + 3 : 0;
    }
    c += k;
  }
  /* merge the adjacent pair whose merged piece scores best (the first such pair on ties) until none is left */
  for (;;) {
    float best = -1e10f;
    int64_t at = -1;
    int32_t best_id = -1;
    for (int64_t i = 0; i + 1 < n; i++) {
      const piece *a = &t->pieces[tokens[i]], *b = &t->pieces[tokens[i + 1]];
      memcpy(buf, a->s, (size_t)a->len);
      memcpy(buf + a->len, b->s, (size_t)b->len);
      int32_t id = a->len + b->len <= t->max_len ? lookup(t, buf, a->len + b->len) : -1;
      if (id >= 0 && t->scores[id] > best) {
        best = t->scores[id];
        at = i;
        best_id = id;
      }
    }
    if (at < 0) break;
    tokens[at] = best_id;
    memmove(tokens + at + 1, tokens + at + 2, (size_t)(n - at - 2) * sizeof *tokens);
    n--;
  }
  if (eos) tokens[n++] = 2;
  free(buf);
  return n;
}

const char *tg_tokenizer_decode(const tg_tokenizer *t, int32_t prev, int32_t token) {
  if (!t || token < 0 || token >= t->vocab) {
    tg_set_error(TG_ERR_ARG, "tg_tokenizer_decode: %s", !t ? "the tokenizer is NULL" : "token outside the vocabulary");
    return NULL;
  }
  const piece *p = &t->pieces[token];
  int b = byte_piece(p);
  if (b >= 0) return t->raw[b];
  /* after BOS, SentencePiece's decoder strips the leading space of the dummy prefix */
  return prev == 1 && p->s[0] == ' ' ? p->s + 1 : p->s;
}

int64_t tg_tokenizer_vocab(const tg_tokenizer *t) { return t ? t->vocab : -1; }
