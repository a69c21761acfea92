/* tokenizer_llama2.c — llama2.c's tokenizer file: a SentencePiece-derived vocabulary whose pieces hold spaces
 * (not "▁"), encoded as run.c's encode() does it (tokenizer_spm.c) token for token.
 *
 * The file is user input: int32 max token length, then per token a float32 score, an int32 length and that
 * many bytes. Every length is checked against the bytes left and against the maximum.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nn/data.h"
#include "nn/tokenizer.h"
#include "uop/uop.h"

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

tg_tokenizer *data_tokenizer(const char *path, const unsigned char *buf, size_t len, int64_t vocab) {
  static const char *op = "tg_tokenizer_load";
  if (vocab < 3 || vocab > (1 << 24)) {
    tg_set_error(TG_ERR_ARG, "%s: the vocabulary size must be in [3, 2^24]", op);
    return NULL;
  }
  size_t off = 0;
  int32_t max_len = 0;
  tg_tokenizer *t = tok_alloc(op, vocab, len);  /* the pieces are at most the file's bytes */
  if (!t) return NULL;
  if (!take(path, buf, len, &off, &max_len, 4, "the header", -1)) goto fail;
  if (max_len < 1 || max_len > (1 << 20)) {
    tg_set_error(TG_ERR_IO, "%s: %s: max token length %d is not in [1, 2^20]", op, path, max_len);
    goto fail;
  }
  size_t used = 0;
  for (int64_t i = 0; i < vocab; i++) {
    piece *p = &t->pieces[i];
    if (!take(path, buf, len, &off, &t->scores[i], 4, "the score", i) ||
        !take(path, buf, len, &off, &p->len, 4, "the length", i))
      goto fail;
    if (p->len < 0 || p->len > max_len) {
      tg_set_error(TG_ERR_IO, "%s: %s: token %lld has length %d, outside [0, %d] (the max the header gives)", op,
                   path, (long long)i, p->len, max_len);
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
  /* run.c: BOS 1, EOS 2, the byte b is token b + 3 (<unk>, 0, past the vocabulary); a space prefix when
   * " " is a piece */
  t->kind = TOK_SPM;
  t->bos = 1;
  t->eos = 2;
  t->unk = 0;
  t->add_bos = true;
  for (int b = 0; b < 256; b++) t->byte_id[b] = b + 3 < vocab ? b + 3 : 0;
  for (int64_t i = 0; i < vocab; i++) t->type[i] = tok_byte_piece(&t->pieces[i]) >= 0 ? TOK_BYTE : TOK_NORMAL;
  if (!tok_finish(t, op)) goto fail;
  t->add_space_prefix = tok_lookup(t, " ", 1) >= 0;
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

