/* fuzz_tokenizer.c — llama2.c's tokenizer (src/nn/tokenizer.c) on arbitrary bytes: load, then encode a text and
 * decode what it gives. The input: a 2-byte little-endian vocabulary size v (3 + v % 4096 tokens), a 1-byte
 * text length n, n bytes of text (cut at its first NUL; its first bit also picks BOS/EOS), then the tokenizer
 * file. Encoding must give at most strlen + 3 tokens, each in the vocabulary; every token decodes to a string.
 * Seeds: tests/fuzz/corpus/tokenizer. */
#include "fuzz.h"
#include "nn/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int64_t vocab = 3 + ((int64_t)data[0] | (int64_t)data[1] << 8) % 4096;
  size_t ntext = data[2];
  if (ntext > size - 3) ntext = size - 3;
  char text[256];
  memcpy(text, data + 3, ntext);
  text[ntext] = 0;
  const unsigned char *file = data + 3 + ntext;
  size_t nfile = size - 3 - ntext;
  tg_error_clear();
  tg_tokenizer *t = data_tokenizer("fuzz.bin", file, nfile, vocab);
  if (!t) {
    FUZZ_CHECK_ERROR("data_tokenizer");
    return fuzz_done();
  }
  FUZZ_CHECK(tg_tokenizer_vocab(t) == vocab, "vocab %lld", (long long)tg_tokenizer_vocab(t));
  bool flags = ntext && (text[0] & 1);
  int64_t cap = (int64_t)strlen(text) + 3;
  int32_t tokens[256 + 3];
  int64_t n = tg_tokenizer_encode(t, text, flags, flags, tokens, cap);
  FUZZ_CHECK(n >= 0 && n <= cap, "encode gave %lld for a capacity of %lld", (long long)n, (long long)cap);
  int32_t prev = 1;
  for (int64_t i = 0; i < n; i++) {
    FUZZ_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "token %lld = %d", (long long)i, tokens[i]);
    const char *s = tg_tokenizer_decode(t, prev, tokens[i]);
    FUZZ_CHECK(s && strlen(s) <= (size_t)INT32_MAX, "decode of %d", tokens[i]);
    prev = tokens[i];
  }
  for (int32_t id = 0; id < vocab && id < 600; id++) {
    const char *a = tg_tokenizer_decode(t, 1, id), *b = tg_tokenizer_decode(t, 0, id);
    FUZZ_CHECK(a && b && strlen(a) <= strlen(b), "decode of %d", id);
  }
  FUZZ_CHECK(!tg_tokenizer_decode(t, 0, (int32_t)vocab) && tg_error()[0], "a token past the vocabulary decoded");
  tg_tokenizer_free(t);
  return fuzz_done();
}
