/* llamacpp_run.c — llama.cpp's side of llm_vs_llamacpp.sh (built against a llama.cpp build, never part of the
 * library or run_tests): decodes a GGUF model one token per llama_decode from the prompt ids given, greedily
 * after them, for N positions, with a float32 KV cache and flash attention off (llama.cpp's defaults, an F16
 * cache and flash attention, change the logits by about 1e-2 on stories260K); writes every position's logits
 * (vocab float32 each) to OUT and prints the ids it fed.
 *
 *   llamacpp_run MODEL.gguf N OUT id0 [id1 ...]
 */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: llamacpp_run MODEL.gguf N OUT id0 [id1 ...]\n");
    return 2;
  }
  llama_backend_init();
  struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  FILE *out = fopen(argv[3], "wb");
  if (!ctx || !out) return 1;
  int n = atoi(argv[2]), nprompt = argc - 4, nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_token t = atoi(argv[4]);
  for (int i = 0; i < n; i++) {
    printf("%d ", (int)t);
    if (llama_decode(ctx, llama_batch_get_one(&t, 1))) return 1;
    const float *lg = llama_get_logits_ith(ctx, -1);
    fwrite(lg, sizeof *lg, (size_t)nv, out);
    int best = 0;
    for (int k = 1; k < nv; k++)
      if (lg[k] > lg[best]) best = k;
    t = i + 1 < nprompt ? atoi(argv[5 + i]) : best;
  }
  printf("\n");
  fclose(out);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
