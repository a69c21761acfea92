/* fuzz_tokenizer_gguf.c — tokenizers from GGUF metadata (src/nn/tokenizer_gguf.c and the SPM and BPE encoders)
 * on arbitrary bytes. The input: a 1-byte text length n, n bytes of text (cut at its first NUL), then the GGUF
 * file. When the reader and tg_tokenizer_from_gguf accept it: encode and encode_special give at most strlen + 3
 * tokens (SPM text with one-byte special tokens may need more: refused, then at most 2 strlen + 3), each in the
 * vocabulary and decodable; a byte-level BPE vocabulary with a token for every byte gives
 * the text back from decode. Seeds: tests/fuzz/corpus/tokenizer_gguf (make_corpus.c). */
#include "fuzz.h"
#include "nn/gguf.h"
#include "nn/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t ntext = data[0];
  if (ntext > size - 1) ntext = size - 1;
  char text[256], back[1024];
  memcpy(text, data + 1, ntext);
  text[ntext] = 0;
  tg_error_clear();
  tg_gguf *g = gguf_open_bytes("fuzz.gguf", data + 1 + ntext, size - 1 - ntext);
  if (!g) {
    FUZZ_CHECK_ERROR("gguf_open_bytes");
    return fuzz_done();
  }
  tg_tokenizer *t = tg_tokenizer_from_gguf(g);
  tg_gguf_close(g);
  if (!t) {
    FUZZ_CHECK_ERROR("tg_tokenizer_from_gguf");
    return fuzz_done();
  }
  int64_t vocab = tg_tokenizer_vocab(t), len = (int64_t)strlen(text);
  bool all_bytes = t->kind == TOK_BPE;
  for (int b = 0; b < 256; b++) all_bytes = all_bytes && t->byte_id[b] >= 0;
  int32_t tokens[2 * 256 + 3];
  for (int special = 0; special < 2; special++) {
    /* strlen + 3 is enough, but for SPM text with one-byte specials (a prefix after each): then 2 strlen + 3 */
    int64_t cap = len + 3, n = special ? tg_tokenizer_encode_special(t, text, true, tokens, cap)
                                       : tg_tokenizer_encode(t, text, false, true, tokens, cap);
    if (n < 0) {
      FUZZ_CHECK(n == TG_ERR_ARG && strstr(tg_error(), "special tokens may need") && t->kind == TOK_SPM,
                 "encode refused a capacity of strlen + 3: %s", tg_error());
      cap = 2 * len + 3;
      n = special ? tg_tokenizer_encode_special(t, text, true, tokens, cap)
                  : tg_tokenizer_encode(t, text, false, true, tokens, cap);
    }
    FUZZ_CHECK(n >= 0 && n <= cap, "encode gave %lld for a capacity of %lld", (long long)n, (long long)cap);
    size_t k = 0;
    for (int64_t i = 0; i < n; i++) {
      FUZZ_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "token %lld = %d", (long long)i, tokens[i]);
      const char *s = tg_tokenizer_decode(t, i ? tokens[i - 1] : -1, tokens[i]);
      FUZZ_CHECK(s, "decode of %d", tokens[i]);
      size_t sl = strlen(s);
      if (k + sl < sizeof back) memcpy(back + k, s, sl);
      k += sl;
    }
    /* without EOS (the last token when the vocabulary has one) and BOS, BPE gives the bytes back */
    int32_t eos = tg_tokenizer_eos(t), bos = tg_tokenizer_bos(t);
    size_t el = !special && eos >= 0 ? strlen(tg_tokenizer_decode(t, 0, eos)) : 0;
    size_t bl = special && bos >= 0 ? strlen(tg_tokenizer_decode(t, 0, bos)) : 0;
    if (all_bytes && k < sizeof back)
      FUZZ_CHECK(k == (size_t)len + el + bl && !memcmp(back + bl, text, (size_t)len), "decode(encode(text)) differs");
  }
  FUZZ_CHECK(!tg_tokenizer_decode(t, 0, (int32_t)vocab) && tg_error()[0], "a token past the vocabulary decoded");
  tg_tokenizer_free(t);
  return fuzz_done();
}
