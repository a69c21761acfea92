/* tokenizer.h — the one representation both tokenizer loaders fill (llama2.c's file in tokenizer.c, a GGUF's
 * tokenizer.ggml.* metadata in tokenizer_gguf.c) and the encoders that read it: SentencePiece-style merges by
 * score (tokenizer_spm.c) and byte-level BPE merges by rank after a pre-tokenizer (tokenizer_bpe.c). */
#ifndef TG_NN_TOKENIZER_H
#define TG_NN_TOKENIZER_H

#include "tg.h"

typedef enum tok_kind { TOK_SPM, TOK_BPE } tok_kind;
/* the pre-tokenizer regexes of byte-level BPE vocabularies (tokenizer_pre.c) */
typedef enum tok_pre { TOK_PRE_GPT2, TOK_PRE_LLAMA3, TOK_PRE_QWEN2, TOK_PRE_DEFAULT } tok_pre;
/* llama.cpp's token types (tokenizer.ggml.token_type) */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

/* a token's text: SPM with spaces for "▁", BPE as the bytes it stands for (byte-level mapping undone) */
typedef struct piece { const char *s; int32_t len, id; } piece;

/* a merge of BPE tokens (left, right) into result, by rank (lower first) in an open-addressed table */
typedef struct tok_merge { int32_t left, right, result, rank; } tok_merge;

struct tg_tokenizer {
  tok_kind kind;
  tok_pre pre;
  int64_t vocab;
  int32_t max_len;        /* the longest piece, in bytes */
  char *bytes;            /* every piece, NUL-terminated, back to back */
  piece *pieces;          /* by id */
  int32_t *index;         /* ids by a hash of their bytes (open addressing, -1 empty; tok_lookup) */
  int64_t nindex;         /* its slots, a power of two at least twice the vocabulary */
  float *scores;          /* SPM: a merge's priority (higher first) */
  uint8_t *type;          /* TOK_NORMAL ... per id */
  int32_t bos, eos, unk;  /* -1 when absent */
  bool add_bos, add_space_prefix, ignore_merges;
  bool fold_u2581;        /* SPM from a GGUF (llama.cpp's rules): "▁" in a text is a space (the file's pieces
                           * spell spaces so), a lead byte says how long its symbol is */
  int32_t byte_id[256];   /* SPM byte fallback <0xNN>; BPE the token of each single byte; -1 if none */
  piece *special;         /* control and user-defined tokens, longest first, for encode_special */
  int32_t nspecial;
  bool special_first[256];  /* the first bytes of the specials: the split looks for one only at these */
  bool *eog;              /* per id: ends generation */
  tok_merge *merges;      /* BPE: nmerge_slots slots (a power of two), left -1 when empty */
  int64_t nmerge_slots;
  char raw[256][2];       /* the one-byte strings <0xNN> tokens decode to */
};

/* a new empty tokenizer for vocab tokens (pieces, index, scores, type, eog allocated), NULL on no memory */
tg_tokenizer *tok_alloc(const char *op, int64_t vocab, size_t text_bytes);
/* fills the lookup table and the specials once the pieces are in; false on no memory */
bool tok_finish(tg_tokenizer *t, const char *op);
/* the id of the piece with exactly these bytes, -1 if none */
int32_t tok_lookup(const tg_tokenizer *t, const char *s, int32_t len);
/* the byte a piece "<0xNN>" stands for, -1 if it is not one */
int tok_byte_piece(const piece *p);

/* the tokens of text[0, len) (no special tokens in it) appended at out[*n]; SPM adds its space prefix when
 * prefix; out has room for len + 1 more. TG_OK or TG_ERR_NOMEM */
tg_status tok_spm_encode(const tg_tokenizer *t, const char *text, int64_t len, bool prefix, int32_t *out, int64_t *n);
tg_status tok_bpe_encode(const tg_tokenizer *t, const char *text, int64_t len, int32_t *out, int64_t *n);
/* the bytes GPT-2's byte-level text s[0, len) stands for into out (at most len bytes; a character outside the
 * mapping is kept as it is); their count */
int32_t tok_bpe_unmap(const char *s, int64_t len, char *out);
/* reads tokenizer.ggml.merges into t->merges; TG_OK or an error naming the bad merge */
tg_status tok_bpe_merges(tg_tokenizer *t, const tg_gguf *g);
/* a symbol of the merge loop: bytes [start, start + len) of the text (len 0: merged away), its token (-1 if
 * none), its neighbours (-1 at the ends) */
typedef struct tok_sym { int32_t start, len, prev, next, id; } tok_sym;
/* a pair of symbols that can merge, the left one and its next: higher prio first, then the leftmost; size: the
 * two lengths when pushed (16 bytes: the heap of a long text is most of the merge loop's memory traffic) */
typedef struct tok_pair { float prio; int32_t left, size, result; } tok_pair;
/* whether symbols a, b (adjacent, of text) merge, with what priority into which token */
typedef bool (*tok_pair_fn)(const tg_tokenizer *t, const char *text, const tok_sym *a, const tok_sym *b, float *prio,
                            int32_t *result);
/* merges sym[0, n) (linked in order) best pair first until no pair merges; sym[0] stays the first; TG_OK or
 * TG_ERR_NOMEM */
tg_status tok_merge_symbols(const tg_tokenizer *t, const char *text, tok_sym *sym, int64_t n, tok_pair_fn fn);
/* the length in bytes of the pre-tokenizer's next word at text[at, len) (at < len), at least 1 */
int64_t tok_pre_next(tok_pre pre, const char *text, int64_t len, int64_t at);

#endif
