/* test_tokenizer.c — tokenizers from GGUF metadata (src/nn/tokenizer_gguf.c): a GGUF holding tok512.bin's
 * vocabulary, written here as llama.cpp's converter writes a SentencePiece model ("▁" for spaces, token_type
 * 6 for <0xNN>, 3 for <unk> <s> </s>), encodes every test string as tg_tokenizer_load(tok512.bin) does (llama2.c's
 * run.c, itself checked by test_llama.c), 26 tricky strings and 300 random ones; small vocabularies written
 * here check special tokens, the capacity rule, end of generation, lookups, malformed metadata, and BPE's merge
 * order and ignore_merges. The fixtures from other implementations are in test_tokenizer_bpe.c. */
#include <limits.h>
#include <stdlib.h>

#include "nn/gguf.h"
#include "test.h"
#include "test_gguf.h"

/* ---- tokenizer metadata written by hand (test_gguf.h's byte writer) ---------------------------------------- */
static void gw_key(gw *w, const char *key, uint32_t type) { gw_str(w, key); gw_le(w, type, 4); }
static void gw_kv_str(gw *w, const char *key, const char *v) { gw_key(w, key, TG_GGUF_STRING); gw_str(w, v); }
static void gw_kv_u32(gw *w, const char *key, uint32_t v) { gw_key(w, key, TG_GGUF_UINT32); gw_le(w, v, 4); }
static void gw_kv_bool(gw *w, const char *key, bool v) { gw_key(w, key, TG_GGUF_BOOL); gw_le(w, v, 1); }
static void gw_arr(gw *w, const char *key, tg_gguf_type et, int64_t n) {
  gw_key(w, key, TG_GGUF_ARRAY);
  gw_le(w, (uint32_t)et, 4);
  gw_le(w, (uint64_t)n, 8);
}
static void gw_header(gw *w, uint64_t nkv) {
  gw_bytes(w, "GGUF", 4);
  gw_le(w, 3, 4);
  gw_le(w, 0, 8);
  gw_le(w, nkv, 8);
}

/* a small SentencePiece-style vocabulary */
typedef struct vocab { int n; const char **tok; const float *score; const int32_t *type; } vocab;

/* the GGUF bytes of model "llama" with v's tokens, scores and types and `extra` more key/values written by
 * extra_fn (counted in nextra) */
static tg_tokenizer *spm_from(const vocab *v, int nextra, void (*extra_fn)(gw *)) {
  gw w = {0};
  gw_header(&w, 4 + (uint64_t)nextra);
  gw_kv_str(&w, "tokenizer.ggml.model", "llama");
  gw_arr(&w, "tokenizer.ggml.tokens", TG_GGUF_STRING, v->n);
  for (int i = 0; i < v->n; i++) gw_str(&w, v->tok[i]);
  gw_arr(&w, "tokenizer.ggml.scores", TG_GGUF_FLOAT32, v->n);
  for (int i = 0; i < v->n; i++) {
    uint32_t u;
    memcpy(&u, &v->score[i], 4);
    gw_le(&w, u, 4);
  }
  gw_arr(&w, "tokenizer.ggml.token_type", TG_GGUF_INT32, v->n);
  for (int i = 0; i < v->n; i++) gw_le(&w, (uint32_t)v->type[i], 4);
  if (extra_fn) extra_fn(&w);
  tg_gguf *g = gguf_open_bytes("spm.gguf", w.p, w.n);
  free(w.p);
  if (!g) return NULL;
  tg_tokenizer *t = tg_tokenizer_from_gguf(g);
  tg_gguf_close(g);
  return t;
}

/* ---- tok512.bin as a GGUF ---------------------------------------------------------------------------------- */

/* the strings every encoder is checked on: spaces, digits, punctuation, unicode outside the vocabulary
 * (byte fallback), newlines, tabs, "▁" itself, invalid UTF-8 */
static const char *corpus[] = {
  "Once upon a time", "Hello world", " leading space", "trailing space ", "  two  spaces  ", "a", " ",
  "Lily and Tom went to the park. They saw a big dog!", "numbers 1 12 123 1234 1234567", "tab\there",
  "new\nline\n\nand two", "\r\n", "don't DON'T you'll I'M", "caf\xc3\xa9 na\xc3\xafve", "e\xcc\x81",
  "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c", "emoji \xf0\x9f\x98\x80!", "\xe2\x96\x81x\xe2\x96\x81",
  "<s> </s> <unk>", "bad \xff\xfe utf8 \xc3", "!!!???...", "x=(a+b)*c; // comment", "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
  "The quick brown fox jumps over the lazy dog.", "", "\357\273\277bom",
};

static int32_t read_i32(const uint8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

/* tok512.bin's pieces as llama.cpp's converter would write them; NULL (skipped, said why) without the file */
static tg_tokenizer *tok512_gguf(char *binpath) {
  if (tg_data_find(NULL, "stories260K", "tok512.bin", binpath, PATH_MAX) != TG_OK) {
    test_skip("tok512.bin not found: %s", tg_error());
    tg_error_clear();
    return NULL;
  }
  FILE *f = fopen(binpath, "rb");
  uint8_t buf[16384];
  size_t len = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f) fclose(f);
  CHECK(len > 4 && len < sizeof buf, "read %s", binpath);
  gw w = {0};
  gw_header(&w, 7);
  gw_kv_str(&w, "tokenizer.ggml.model", "llama");
  gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
  gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
  gw_kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
  gw_arr(&w, "tokenizer.ggml.tokens", TG_GGUF_STRING, 512);
  size_t off = 4;
  float scores[512];
  int32_t types[512];
  for (int i = 0; i < 512 && off + 8 <= len; i++) {
    memcpy(&scores[i], buf + off, 4);
    int32_t n = read_i32(buf + off + 4);
    off += 8;
    char s[256];
    int k = 0;
    for (int j = 0; j < n && off + (size_t)j < len && k < 250; j++) {
      if (buf[off + j] == ' ') k += snprintf(s + k, 4, "\xe2\x96\x81");
      else s[k++] = (char)buf[off + j];
    }
    off += (size_t)n;
    if (i < 3) k = snprintf(s, sizeof s, "%s", (const char *[]){"<unk>", "<s>", "</s>"}[i]);  /* "\n<s>\n" in run.c's */
    gw_strn(&w, s, (size_t)k);
    types[i] = i < 3 ? 3 : (k == 6 && !memcmp(s, "<0x", 3)) ? 6 : 1;
  }
  gw_arr(&w, "tokenizer.ggml.scores", TG_GGUF_FLOAT32, 512);
  gw_bytes(&w, scores, sizeof scores);
  gw_arr(&w, "tokenizer.ggml.token_type", TG_GGUF_INT32, 512);
  gw_bytes(&w, types, sizeof types);
  tg_gguf *g = gguf_open_bytes("tok512.gguf", w.p, w.n);
  free(w.p);
  CHECK(g, "open: %s", tg_error());
  tg_tokenizer *t = g ? tg_tokenizer_from_gguf(g) : NULL;
  CHECK(t, "from_gguf: %s", tg_error());
  tg_gguf_close(g);
  return t;
}

/* whether s is well-formed UTF-8 (leads and continuation bytes; enough for the corpus) */
static bool is_utf8(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
    if (!n) return false;
    for (int i = 1; i < n; i++)
      if ((p[i] & 0xC0) != 0x80) return false;
    p += n;
  }
  return true;
}

/* decode(encode(s)) == s, BOS stripping the prefix space, byte tokens as their bytes */
static bool round_trip(const tg_tokenizer *t, const char *s, const int32_t *ids, int64_t n, bool bos) {
  char out[1024] = "";
  size_t k = 0;
  for (int64_t i = bos; i < n; i++) {
    const char *p = tg_tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i]);
    size_t pl = p ? strlen(p) : 0;
    if (!p || k + pl >= sizeof out) return false;
    memcpy(out + k, p, pl);
    k += pl;
  }
  return k == strlen(s) && !memcmp(out, s, k);
}

TEST(test_tokenizer_gguf_spm_matches_llama2c_tok512) {
  char bin[PATH_MAX];
  tg_tokenizer *t = tok512_gguf(bin);
  if (!t) return;
  tg_tokenizer *ref = tg_tokenizer_load(bin, 512);
  CHECK_T(ref);
  CHECK(tg_tokenizer_vocab(t) == 512 && tg_tokenizer_bos(t) == 1 && tg_tokenizer_eos(t) == 2 &&
        tg_tokenizer_add_bos(t) && tg_tokenizer_is_eog(t, 2) && !tg_tokenizer_is_eog(t, 1), "ids");
  CHECK(tg_tokenizer_bos(ref) == 1 && tg_tokenizer_eos(ref) == 2 && tg_tokenizer_is_eog(ref, 2), "llama2.c ids");
  for (size_t c = 0; c < sizeof corpus / sizeof *corpus; c++) {
    const char *s = corpus[c];
    int32_t a[512], b[512];
    int64_t na = tg_tokenizer_encode(t, s, true, false, a, 512), nb = tg_tokenizer_encode(ref, s, true, false, b, 512);
    bool same = na == nb && na > 0 && !memcmp(a, b, (size_t)na * sizeof *a);
    /* not UTF-8: run.c groups a byte with the continuation bytes after it, llama.cpp by its lead byte */
    same = same || !is_utf8(s);
    if (!same && strstr(s, "\xe2\x96\x81")) {  /* "▁" is a space for the GGUF (as for llama.cpp), not for run.c */
      char sp[64];
      size_t k = 0;
      for (const char *p = s; *p && k + 1 < sizeof sp; p++) {
        bool u = !strncmp(p, "\xe2\x96\x81", 3);
        sp[k++] = u ? ' ' : *p;
        p += u ? 2 : 0;
      }
      sp[k] = 0;
      nb = tg_tokenizer_encode(ref, sp, true, false, b, 512);
      same = na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
    } else {
      CHECK(round_trip(t, s, a, na, true), "decode(encode('%s')) differs", s);
    }
    CHECK(same, "'%s': %lld tokens, llama2.c %lld; first: %d %d %d / %d %d %d", s, (long long)na, (long long)nb,
          a[1], na > 2 ? a[2] : -1, na > 3 ? a[3] : -1, b[1], nb > 2 ? b[2] : -1, nb > 3 ? b[3] : -1);
  }
  /* 300 random strings of letters, spaces, newlines, punctuation and two-byte characters */
  static const char *bits[] = {"a", "e", "o", "t", "h", "n", "s", "l", "d", "y", " ", " ", "  ", "\n", ".", ",",
                               "!", "'", "1", "7", "T", "L", "\xc3\xa9", "\xce\xbb", "was", "the", " and", "Lily"};
  unsigned seed = 512;
  for (int r = 0; r < 300; r++) {
    char s[256] = "";
    size_t k = 0;
    for (int w = 0; w < r % 40; w++) {
      seed = seed * 1103515245u + 12345u;
      const char *b = bits[(seed >> 16) % (sizeof bits / sizeof *bits)];
      memcpy(s + k, b, strlen(b) + 1);
      k += strlen(b);
    }
    int32_t a[300], b[300];
    int64_t na = tg_tokenizer_encode(t, s, true, true, a, 300), nb = tg_tokenizer_encode(ref, s, true, true, b, 300);
    CHECK(na == nb && na > 0 && !memcmp(a, b, (size_t)na * sizeof *a), "random '%s': %lld tokens, llama2.c %lld", s,
          (long long)na, (long long)nb);
    CHECK(round_trip(t, s, a, na - 1, true), "decode(encode('%s')) differs", s);
  }
  /* the GGUF's control tokens: plain text for encode, tokens for encode_special */
  int32_t ids[64];
  int64_t n = tg_tokenizer_encode_special(t, "<s>Hi</s>", false, ids, 64);
  CHECK(n >= 3 && ids[0] == 1 && ids[n - 1] == 2, "encode_special: %lld tokens, %d ... %d", (long long)n, ids[0],
        n > 0 ? ids[n - 1] : -1);
  n = tg_tokenizer_encode(t, "<s>", false, false, ids, 64);
  CHECK(n > 1 && ids[0] != 1, "encode took <s> as a token");
  CHECK(tg_tokenizer_find(t, "\xe2\x96\x81t") == tg_tokenizer_find(t, " t") && tg_tokenizer_find(t, " t") > 2 &&
        tg_tokenizer_find(t, "</s>") == 2 && tg_tokenizer_find(t, "no such piece") == -1, "find");
  CHECK(tg_tokenizer_is_special(t, 1) && !tg_tokenizer_is_special(t, 300), "is_special");
  tg_tokenizer_free(ref);
  tg_tokenizer_free(t);
}

/* ---- small vocabularies: special tokens, flags, malformed metadata ------------------------------------------ */

static const char *small_tok[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab", "\342\226\201ab",
                                  "<0x63>", "<|im_start|>", "<|im_end|>", "[U]", "<0x0A>", "|"};
static const float small_score[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f, 0, 0, 0, 0, 0, 0};
static const int32_t small_type[] = {2, 3, 3, 1, 1, 1, 1, 1, 6, 3, 3, 4, 6, 4};
static const vocab small = {14, small_tok, small_score, small_type};

static void no_prefix(gw *w) {
  gw_kv_bool(w, "tokenizer.ggml.add_space_prefix", false);
  gw_kv_bool(w, "tokenizer.ggml.add_bos_token", false);
  gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
  gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
}

static bool ids_are(const int32_t *got, int64_t n, const int32_t *want, int64_t nw) {
  return n == nw && !memcmp(got, want, (size_t)n * sizeof *got);
}

TEST(test_tokenizer_gguf_spm_special_tokens_and_flags) {
  tg_tokenizer *t = spm_from(&small, 0, NULL);
  CHECK_T(t);
  int32_t ids[64];
  /* no bos/eos keys: llama.cpp's 1 and 2; " " "a" "b" "c" -> "▁ab" + byte token of 'c'; 'd' has none: <unk> */
  CHECK(tg_tokenizer_bos(t) == 1 && tg_tokenizer_eos(t) == 2 && tg_tokenizer_add_bos(t), "defaults");
  int64_t n = tg_tokenizer_encode(t, "abcd", true, true, ids, 64);
  CHECK(ids_are(ids, n, (int32_t[]){1, 7, 8, 0, 2}, 5), "abcd: %lld: %d %d %d", (long long)n, ids[0], ids[1], ids[2]);
  /* control tokens are text for encode; user-defined [U] is a token either way; a space prefix follows each */
  n = tg_tokenizer_encode_special(t, "<|im_start|>ab[U]\n<|im_end|>", false, ids, 64);
  CHECK(ids_are(ids, n, (int32_t[]){9, 7, 11, 3, 12, 10}, 6), "encode_special: %lld: %d %d %d %d %d %d", (long long)n,
        ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]);
  /* not UTF-8: a symbol is as long as its lead byte says (llama.cpp), so "\xc3a" is one (not a piece: bytes,
   * <unk> for \xc3, "a" for a) and "ab" does not merge */
  n = tg_tokenizer_encode(t, "\xc3" "ab", false, false, ids, 64);
  CHECK(ids_are(ids, n, (int32_t[]){3, 0, 4, 5}, 4), "invalid UTF-8: %lld: %d %d %d %d", (long long)n, ids[0], ids[1],
        ids[2], ids[3]);
  n = tg_tokenizer_encode(t, "ab[U]", false, false, ids, 64);
  CHECK(ids_are(ids, n, (int32_t[]){7, 11}, 2), "user-defined: %lld: %d %d", (long long)n, ids[0], ids[1]);
  n = tg_tokenizer_encode(t, "<|im_end|>", false, false, ids, 64);
  CHECK(n > 3 && ids[0] != 10, "a control token's text became it: %lld", (long long)n);
  CHECK(tg_tokenizer_is_eog(t, 10) && !tg_tokenizer_is_eog(t, 9) && tg_tokenizer_is_special(t, 11), "eog");
  CHECK(!strcmp(tg_tokenizer_decode(t, 9, 7), " ab") && !strcmp(tg_tokenizer_decode(t, 7, 8), "c") &&
        !strcmp(tg_tokenizer_decode(t, 7, 10), "<|im_end|>"), "decode");
  CHECK(tg_tokenizer_encode(t, "ab", false, false, ids, 4) < 0 && strstr(tg_error(), "room"), "small cap");
  /* a one-byte user-defined token, a space prefix after each: 4 more tokens than bytes, the error says so */
  CHECK(tg_tokenizer_encode(t, "a|a|a|a", false, false, ids, 10) == TG_ERR_ARG && strstr(tg_error(), "may need 11"),
        "one-byte specials: %s", tg_error());
  n = tg_tokenizer_encode(t, "a|a|a|a", false, false, ids, 11);
  CHECK(ids_are(ids, n, (int32_t[]){3, 4, 13, 3, 4, 13, 3, 4, 13, 3, 4}, 11), "one-byte specials: %lld tokens",
        (long long)n);
  tg_error_clear();
  tg_tokenizer_free(t);

  t = spm_from(&small, 4, no_prefix);
  CHECK_T(t);
  n = tg_tokenizer_encode(t, "ab", true, true, ids, 64);
  CHECK(ids_are(ids, n, (int32_t[]){1, 6, 2}, 3), "no prefix: %lld: %d %d %d", (long long)n, ids[0], ids[1], ids[2]);
  CHECK(!tg_tokenizer_add_bos(t) && tg_tokenizer_is_eog(t, 2), "flags");
  tg_tokenizer_free(t);
}

static void bad_model(gw *w) { gw_kv_str(w, "tokenizer.ggml.model", "t5"); }
static void bad_bos(gw *w) { gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 99); }
static void bad_bos_type(gw *w) { gw_kv_str(w, "tokenizer.ggml.bos_token_id", "1"); }
static void bad_flag(gw *w) { gw_kv_u32(w, "tokenizer.ggml.add_bos_token", 1); }

TEST(test_tokenizer_gguf_refuses_bad_metadata) {
  tg_tokenizer *t = spm_from(&small, 1, bad_bos);  /* past the vocabulary: the default stays, as in llama.cpp */
  CHECK(t && tg_tokenizer_bos(t) == 1, "bos past the vocabulary: %s", tg_error());
  tg_tokenizer_free(t);
  CHECK(!spm_from(&small, 1, bad_bos_type) && strstr(tg_error(), "bos_token_id"), "a string bos: %s", tg_error());
  CHECK(!spm_from(&small, 1, bad_flag) && strstr(tg_error(), "add_bos_token"), "int flag: %s", tg_error());
  /* a second tokenizer.ggml.model key is refused by the reader itself; a lone t5 model by from_gguf */
  gw w = {0};
  gw_header(&w, 1);
  bad_model(&w);
  tg_gguf *g = gguf_open_bytes("t5.gguf", w.p, w.n);
  CHECK(g && !tg_tokenizer_from_gguf(g) && strstr(tg_error(), "'t5' is not supported"), "t5: %s", tg_error());
  tg_gguf_close(g);
  w.n = 0;
  gw_header(&w, 2);
  gw_kv_str(&w, "tokenizer.ggml.model", "llama");
  gw_arr(&w, "tokenizer.ggml.tokens", TG_GGUF_STRING, 2);
  gw_str(&w, "a");
  gw_str(&w, "b");
  g = gguf_open_bytes("noscores.gguf", w.p, w.n);
  CHECK(g && !tg_tokenizer_from_gguf(g) && strstr(tg_error(), "tokenizer.ggml.scores"), "no scores: %s", tg_error());
  tg_gguf_close(g);
  w.n = 0;
  gw_header(&w, 3);
  gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
  gw_kv_str(&w, "tokenizer.ggml.pre", "falcon");
  gw_arr(&w, "tokenizer.ggml.tokens", TG_GGUF_STRING, 1);
  gw_str(&w, "a");
  g = gguf_open_bytes("pre.gguf", w.p, w.n);
  CHECK(g && !tg_tokenizer_from_gguf(g) && strstr(tg_error(), "'falcon' is not supported"), "pre: %s", tg_error());
  tg_gguf_close(g);
  w.n = 0;
  gw_header(&w, 0);
  g = gguf_open_bytes("empty.gguf", w.p, w.n);
  CHECK(g && !tg_tokenizer_from_gguf(g) && strstr(tg_error(), "tokenizer.ggml.model"), "empty: %s", tg_error());
  tg_gguf_close(g);
  CHECK(!tg_tokenizer_from_gguf(NULL) && tg_tokenizer_encode(NULL, "", false, false, (int32_t[4]){0}, 4) < 0 &&
        tg_tokenizer_bos(NULL) == -1 && !tg_tokenizer_is_eog(NULL, 0) && tg_tokenizer_find(NULL, "a") == -1, "NULL");
  tg_error_clear();
  free(w.p);
}

/* ---- byte-level BPE: ignore_merges (llama3) and merge order, on a vocabulary written here ------------------ */

static tg_tokenizer *bpe_from(const char *pre) {
  const char *tok[] = {"a", "b", "c", "\xc4\xa0", "bc", "ab", "abc", "\304\240a", "abcdefghij"};
  /* the last merge's sides are no tokens, each twice the longest token (they overran the buffer that joins
   * them once) */
  const char *merges[] = {"b c", "a b", "\xc4\xa0 a", "aaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbb"};
  gw w = {0};
  gw_header(&w, 4);
  gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
  gw_kv_str(&w, "tokenizer.ggml.pre", pre);
  gw_arr(&w, "tokenizer.ggml.tokens", TG_GGUF_STRING, 9);
  for (int i = 0; i < 9; i++) gw_str(&w, tok[i]);
  gw_arr(&w, "tokenizer.ggml.merges", TG_GGUF_STRING, 4);
  for (int i = 0; i < 4; i++) gw_str(&w, merges[i]);
  tg_gguf *g = gguf_open_bytes("bpe.gguf", w.p, w.n);
  free(w.p);
  tg_tokenizer *t = g ? tg_tokenizer_from_gguf(g) : NULL;
  CHECK(t, "%s: %s", pre, tg_error());
  tg_gguf_close(g);
  return t;
}

TEST(test_tokenizer_gguf_bpe_merge_order_and_ignore_merges) {
  tg_tokenizer *l3 = bpe_from("llama-bpe"), *q2 = bpe_from("qwen2");
  if (!l3 || !q2) goto done;
  int32_t ids[16];
  /* "b c" ranks first, and "a bc" is no merge: qwen2 stops at a|bc; llama3 takes the word "abc" whole */
  int64_t n = tg_tokenizer_encode(q2, "abc", false, false, ids, 16);
  CHECK(ids_are(ids, n, (int32_t[]){0, 4}, 2), "qwen2 abc: %lld: %d %d", (long long)n, ids[0], ids[1]);
  n = tg_tokenizer_encode(l3, "abc", true, true, ids, 16);
  CHECK(ids_are(ids, n, (int32_t[]){6}, 1), "llama3 abc: %lld: %d", (long long)n, ids[0]);
  /* " abc" is no token: Ġ a b c -> Ġ a bc -> Ġa bc; a byte without a token (d) is dropped, as in llama.cpp */
  n = tg_tokenizer_encode(l3, " abcd", false, false, ids, 16);
  CHECK(ids_are(ids, n, (int32_t[]){7, 4}, 2), "llama3 ' abcd': %lld: %d %d", (long long)n, ids[0], ids[1]);
  CHECK(!strcmp(tg_tokenizer_decode(l3, 0, 7), " a") && tg_tokenizer_find(l3, " a") == 7 &&
        tg_tokenizer_find(l3, "\xc4\xa0" "a") == -1 && tg_tokenizer_bos(l3) == -1 && tg_tokenizer_add_bos(l3) &&
        !tg_tokenizer_add_bos(q2), "decode, find, flags");
done:
  tg_tokenizer_free(l3);
  tg_tokenizer_free(q2);
}
