/* fuzz_llm_gguf.c — the language-model loader (src/nn/llm_load.c: tg_llm_from_gguf) on arbitrary bytes opened
 * as a GGUF file: a model loads, its configuration consistent with the file's tensors, or the load fails with a
 * message; nothing leaks either way. The load runs kernels (the caches are zeroed); no step runs: a step is the
 * model, not the loader, and compiles dozens of kernels per shape. Seeds: tests/fuzz/corpus/llm_gguf
 * (make_corpus.c: llama in F32, qwen2 in F16, llama with a Q8_0 embedding and Q4_0 weights). */
#include "fuzz.h"
#include "nn/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_error_clear();
  tg_gguf *g = gguf_open_bytes("fuzz.gguf", data, size);
  if (!g) {
    FUZZ_CHECK_ERROR("gguf_open_bytes");
    return fuzz_done();
  }
  /* odd sizes load with the file's context (capped at 4096), even ones with a cache of 4 positions */
  int64_t max_seq = size % 2 ? 0 : 4;
  tg_llm *m = tg_llm_from_gguf(g, max_seq);
  if (!m) {
    FUZZ_CHECK_ERROR("tg_llm_from_gguf");
    tg_gguf_close(g);
    return fuzz_done();
  }
  tg_llm_config c = tg_llm_config_of(m);
  tg_gguf_info emb;
  int64_t ei = tg_gguf_find_tensor(g, "token_embd.weight");
  FUZZ_CHECK(ei >= 0 && tg_gguf_tensor_info(g, ei, &emb) == TG_OK && emb.ndim == 2 && emb.shape[0] == c.vocab_size &&
             emb.shape[1] == c.dim, "the configuration's vocab %lld and dim %lld are not token_embd's",
             (long long)c.vocab_size, (long long)c.dim);
  FUZZ_CHECK(c.n_layers >= 1 && c.n_heads % c.n_kv_heads == 0 && c.head_dim % 2 == 0 && c.max_seq >= 1 &&
             c.max_seq <= c.context && (max_seq == 0 || c.max_seq == max_seq) &&
             c.tied_output == (tg_gguf_find_tensor(g, "output.weight") < 0), "an inconsistent configuration");
  tg_gguf_close(g);
  FUZZ_CHECK(tg_llm_pos(m) == 0, "a new model at position %lld", (long long)tg_llm_pos(m));
  tg_llm_free(m);
  return fuzz_done();
}
