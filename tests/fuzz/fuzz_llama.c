/* fuzz_llama.c — the llama2.c checkpoint reader (src/nn/llama.c) on arbitrary bytes: a model loads (its
 * configuration as the header says) or the load fails with a message. No step runs: a step is the model,
 * not the reader, and compiles kernels. Seeds: tests/fuzz/corpus/llama. */
#include "fuzz.h"
#include "nn/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_error_clear();
  tg_llama *m = data_llama("fuzz.bin", data, size, 0);
  if (!m) {
    FUZZ_CHECK_ERROR("data_llama");
    return fuzz_done();
  }
  int32_t h[7];
  memcpy(h, data, sizeof h);
  tg_llama_config c = tg_llama_config_of(m);
  FUZZ_CHECK(c.dim == h[0] && c.hidden_dim == h[1] && c.n_layers == h[2] && c.n_heads == h[3] &&
             c.n_kv_heads == h[4] && c.vocab_size == (h[5] < 0 ? -(int64_t)h[5] : h[5]) && c.seq_len == h[6] &&
             c.shared_classifier == (h[5] > 0) && tg_llama_max_seq(m) == c.seq_len, "the configuration is not the header's");
  tg_llama_free(m);
  return fuzz_done();
}
