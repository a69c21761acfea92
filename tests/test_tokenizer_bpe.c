/* test_tokenizer_bpe.c — tokenizers from GGUF files against other implementations: tests/fixtures/tokenizer/
 * (make_tokenizer_fixtures.py) holds byte-level BPE vocabularies trained with HF `tokenizers` under llama3's
 * and qwen2's pre-tokenizer regexes and a SentencePiece BPE model with byte fallback, converted as llama.cpp's
 * converter does, with those packages' encodings of a corpus of tricky strings (unicode, spaces, newlines,
 * digits, contractions, special tokens in the text; llama.cpp's llama-tokenize gives the same ids, checked by the
 * generator with --llama-tokenize: 630 of 630). Every string encodes to the same ids, with and without
 * special tokens, and decodes back to itself; the pre-tokenizer matchers are checked word by word on strings
 * whose splits are written out here, and arbitrary bytes (invalid UTF-8) round-trip. */
#include <limits.h>
#include <stdlib.h>

#include "nn/tokenizer.h"
#include "test.h"

static void fixture_path(char *out, size_t cap, const char *name) {
  const char *dir = getenv("TG_FIXTURES");
  if (dir) {
    snprintf(out, cap, "%s/tokenizer/%s", dir, name);
    return;
  }
  const char *file = __FILE__, *slash = strrchr(file, '/');
  snprintf(out, cap, "%.*sfixtures/tokenizer/%s", slash ? (int)(slash - file + 1) : 0, file, name);
}

static tg_tokenizer *load(const char *kind) {
  char path[PATH_MAX], name[64];
  snprintf(name, sizeof name, "%s.gguf", kind);
  fixture_path(path, sizeof path, name);
  tg_gguf *g = tg_gguf_open(path);
  CHECK(g, "open %s (run from the repository root or set TG_FIXTURES): %s", path, tg_error());
  tg_tokenizer *t = g ? tg_tokenizer_from_gguf(g) : NULL;
  CHECK(!g || t, "%s: %s", path, tg_error());
  tg_gguf_close(g);
  return t;
}

/* space-separated ids from s up to ';' or the end into out; the count */
static int64_t parse_ids(const char **s, int32_t *out, int64_t cap) {
  int64_t n = 0;
  while (**s && **s != ';' && **s != '\n') {
    char *end;
    long v = strtol(*s, &end, 10);
    if (end == *s) break;
    if (n < cap) out[n++] = (int32_t)v;
    *s = end;
    while (**s == ' ') (*s)++;
  }
  if (**s == ';') (*s)++;
  return n;
}

/* the concatenated decodings of ids[0, n) into out; its length (-1 past cap or on an error) */
static int64_t decode_all(const tg_tokenizer *t, const int32_t *ids, int64_t n, char *out, size_t cap) {
  size_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *p = tg_tokenizer_decode(t, i ? ids[i - 1] : -1, ids[i]);
    size_t pl = p ? strlen(p) : 0;
    if (!p || k + pl >= cap) return -1;
    memcpy(out + k, p, pl);
    k += pl;
  }
  out[k] = 0;
  return (int64_t)k;
}

static void print_ids(char *buf, size_t cap, const int32_t *ids, int64_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (int64_t i = 0; i < n && k + 12 < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%d ", ids[i]);
}

TEST(test_tokenizer_gguf_matches_hf_tokenizers_and_sentencepiece) {
  const char *kinds[3] = {"bpe_llama3", "bpe_qwen2", "spm"};
  tg_tokenizer *tok[3];
  for (int k = 0; k < 3; k++) tok[k] = load(kinds[k]);
  if (!tok[0] || !tok[1] || !tok[2]) goto done;
  char path[PATH_MAX];
  fixture_path(path, sizeof path, "expected.txt");
  FILE *f = fopen(path, "rb");
  CHECK(f, "open %s", path);
  if (!f) goto done;
  static char line[1 << 16], text[1 << 14], back[1 << 14];
  int32_t want[2][4096], got[4096];
  int checked[3] = {0};
  while (fgets(line, sizeof line, f)) {
    char kind[32];
    const char *s = line;
    int k = 0;
    if (sscanf(line, "%31s", kind) != 1) continue;
    while (k < 3 && strcmp(kind, kinds[k])) k++;
    CHECK(k < 3, "unknown kind in %s: %s", path, kind);
    if (k == 3) break;
    s += strlen(kind) + 1;
    size_t tl = 0;
    for (unsigned v; tl + 1 < sizeof text && sscanf(s, "%2x", &v) == 1 && *s != ';'; s += 2) text[tl++] = (char)v;
    text[tl] = 0;
    s++;
    int64_t nw0 = parse_ids(&s, want[0], 4096), nw1 = parse_ids(&s, want[1], 4096);
    for (int special = 0; special < 2; special++) {
      int64_t n = special ? tg_tokenizer_encode_special(tok[k], text, false, got, 4096)
                          : tg_tokenizer_encode(tok[k], text, false, false, got, 4096);
      int64_t nw = special ? nw1 : nw0;
      if (n != nw || memcmp(got, want[special], (size_t)n * sizeof *got)) {
        char a[512], b[512];
        print_ids(a, sizeof a, got, n);
        print_ids(b, sizeof b, want[special], nw);
        CHECK(false, "%s%s '%s':\n    got  %s\n    want %s", kinds[k], special ? " special" : "", text, a, b);
      }
      /* SentencePiece: the space prefix stays (it is stripped after BOS only); "▁" in a text is a space (as
       * in sentencepiece and llama.cpp), so that one does not come back */
      int64_t bl = decode_all(tok[k], got, n, back, sizeof back);
      if (k == 2 && strstr(text, "\xe2\x96\x81")) continue;
      bool same = k == 2 ? bl >= 0 && (tl ? back[0] == ' ' && !strcmp(back + 1, text) : !bl)
                         : bl == (int64_t)tl && !memcmp(back, text, tl);
      CHECK(same, "%s: decode(encode('%s')) = '%s'", kinds[k], text, bl >= 0 ? back : "(error)");
    }
    checked[k]++;
  }
  fclose(f);
  CHECK(checked[0] > 40 && checked[1] > 40 && checked[2] > 40, "%d %d %d strings checked", checked[0], checked[1],
        checked[2]);
done:
  for (int k = 0; k < 3; k++) tg_tokenizer_free(tok[k]);
}

/* hex digits at *s into out up to a stop character; the byte count */
static size_t unhex(const char **s, char *out, size_t cap) {
  size_t n = 0;
  unsigned v;
  while (n + 1 < cap && **s && **s != ';' && **s != ',' && **s != '\n' && sscanf(*s, "%2x", &v) == 1) {
    out[n++] = (char)v;
    *s += 2;
  }
  out[n] = 0;
  return n;
}

TEST(test_tokenizer_pre_tokenizers_split_as_hf_regexes) {
  char path[PATH_MAX];
  fixture_path(path, sizeof path, "splits.txt");
  FILE *f = fopen(path, "rb");
  CHECK(f, "open %s (run from the repository root or set TG_FIXTURES)", path);
  if (!f) return;
  static char line[1 << 16], text[1 << 13], word[1 << 13];
  int checked = 0;
  while (fgets(line, sizeof line, f)) {
    char name[16];
    if (sscanf(line, "%15s", name) != 1) continue;
    tok_pre pre = !strcmp(name, "gpt2")     ? TOK_PRE_GPT2
                  : !strcmp(name, "llama3") ? TOK_PRE_LLAMA3
                  : !strcmp(name, "qwen2")  ? TOK_PRE_QWEN2
                                            : TOK_PRE_DEFAULT;
    const char *s = line + strlen(name) + 1;
    int64_t len = (int64_t)unhex(&s, text, sizeof text), at = 0;
    if (*s == ';') s++;
    int w = 0;
    while (*s && *s != '\n') {
      size_t wl = unhex(&s, word, sizeof word);
      if (*s == ',') s++;
      int64_t got = at < len ? tok_pre_next(pre, text, len, at) : 0;
      if (got != (int64_t)wl || memcmp(text + at, word, wl)) {
        CHECK(false, "%s '%s': word %d is '%.*s', HF's '%s'", name, text, w, (int)got, text + at, word);
        break;
      }
      at += got;
      w++;
    }
    CHECK(at == len || test_failures_in_current(), "%s '%s': %lld bytes left after HF's words", name, text,
          (long long)(len - at));
    checked++;
  }
  fclose(f);
  CHECK(checked > 300, "%d strings checked", checked);
}

/* arbitrary bytes, invalid UTF-8 among them, round-trip through each vocabulary (BPE keeps every byte) */
TEST(test_tokenizer_bpe_round_trips_any_bytes) {
  tg_tokenizer *t = load("bpe_llama3");
  if (!t) return;
  static const char *texts[] = {"\xff\xfe", "bad \xc3 cut", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 past",
                                "\xc0\xaf overlong", "\x80\x80\x80", "\x01\x02\x1b[0m\x7f", "a\xe4\xbd"};
  char back[256];
  int32_t ids[64];
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    int64_t n = tg_tokenizer_encode(t, texts[i], false, false, ids, 64);
    CHECK(n > 0 && decode_all(t, ids, n, back, sizeof back) == (int64_t)strlen(texts[i]) && !strcmp(back, texts[i]),
          "text %zu: %lld tokens", i, (long long)n);
  }
  unsigned seed = 16;
  char text[200];
  int32_t many[256];
  for (int r = 0; r < 200; r++) {
    int len = r % 180;
    for (int i = 0; i < len; i++) {
      seed = seed * 1103515245u + 12345u;
      text[i] = (char)(1 + (seed >> 16) % 255);
    }
    text[len] = 0;
    int64_t n = tg_tokenizer_encode_special(t, text, true, many, 256);
    CHECK(n >= 1 && n <= len + 3 && decode_all(t, many + 1, n - 1, back, sizeof back) == len && !strcmp(back, text),
          "random bytes %d: %lld tokens", r, (long long)n);
  }
  /* ids, eog, find and bos for a llama3 vocabulary */
  int32_t eot = tg_tokenizer_find(t, "<|eot_id|>"), end = tg_tokenizer_find(t, "<|end_of_text|>");
  CHECK(eot >= 0 && end >= 0 && tg_tokenizer_is_eog(t, eot) && tg_tokenizer_is_eog(t, end) &&
        tg_tokenizer_eos(t) == end && tg_tokenizer_bos(t) == tg_tokenizer_find(t, "<|begin_of_text|>") &&
        tg_tokenizer_add_bos(t) && !tg_tokenizer_is_eog(t, tg_tokenizer_find(t, "<|im_start|>")) &&
        tg_tokenizer_is_special(t, eot) && tg_tokenizer_find(t, " the") >= 256, "ids");
  CHECK(!strcmp(tg_tokenizer_decode(t, 0, eot), "<|eot_id|>"), "a control token decodes to its text");
  tg_tokenizer_free(t);
}

/* a whole file into a new NUL-terminated buffer (*n its length), NULL if unreadable */
static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *b = NULL;
  long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)len + 1))) {
    *n = fread(b, 1, (size_t)len, f);
    b[*n] = 0;
  }
  fclose(f);
  return b;
}

/* llama.cpp's own tokenizer tests (its models/ggml-vocab-<name>.gguf: real vocabularies, Llama 3, Qwen2,
 * Llama 2, Phi-3 and GPT-2, with .inp texts and .out ids as tests/test-tokenizer-0 reads them: no BOS, special
 * tokens not parsed), from $TG_LLAMA_CPP_VOCABS or ~/.cache/tgc/llama.cpp/src/models (a llama.cpp checkout's
 * models/); skipped when absent */
TEST(test_tokenizer_gguf_matches_llama_cpp_vocab_tests) {
  char dir[PATH_MAX], path[PATH_MAX + 64], out_path[PATH_MAX + 128];
  const char *env = getenv("TG_LLAMA_CPP_VOCABS"), *home = getenv("HOME");
  if (env) snprintf(dir, sizeof dir, "%s", env);
  else snprintf(dir, sizeof dir, "%s/.cache/tgc/llama.cpp/src/models", home ? home : "");
  static const char *names[] = {"llama-bpe", "qwen2", "llama-spm", "phi-3", "gpt-2"};
  int found = 0;
  for (size_t v = 0; v < sizeof names / sizeof *names; v++) {
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, names[v]);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    size_t ni = 0, no = 0;
    char *inp = NULL, *out = slurp(out_path, &no);
    if (out) {
      char inp_path[PATH_MAX + 128];
      snprintf(inp_path, sizeof inp_path, "%s.inp", path);
      inp = slurp(inp_path, &ni);
    }
    tg_gguf *g = inp ? tg_gguf_open(path) : NULL;
    tg_tokenizer *t = g ? tg_tokenizer_from_gguf(g) : NULL;
    tg_gguf_close(g);
    CHECK(!inp || t, "%s: %s", path, tg_error());
    if (t) {
      found++;
      static const char sep[] = "\n__ggml_vocab_test__\n";
      static int32_t ids[1 << 14];
      static char got[1 << 16];
      char *s = inp, *o = out;
      int cases = 0;
      for (;;) {
        char *next = strstr(s, sep), *eol = strchr(o, '\n');
        if (next) *next = 0;
        if (eol) *eol = 0;
        int64_t n = tg_tokenizer_encode(t, s, false, false, ids, 1 << 14);
        size_t k = 0;
        got[0] = 0;
        for (int64_t i = 0; i < n && k + 16 < sizeof got; i++) k += (size_t)snprintf(got + k, sizeof got - k, " %d", ids[i]);
        CHECK(n >= 0 && !strcmp(got, o), "%s '%s':\n    got %s\n    llama.cpp %s", names[v], s, got, o);
        cases++;
        if (!next || !eol) break;
        s = next + sizeof sep - 1;
        o = eol + 1;
      }
      CHECK(cases > 30, "%s: %d cases", names[v], cases);
    }
    tg_tokenizer_free(t);
    free(inp);
    free(out);
  }
  if (!found) test_skip("llama.cpp's vocabulary tests (models/ggml-vocab-*.gguf) not in %s (set TG_LLAMA_CPP_VOCABS)", dir);
}
