/* tgc_run.c — tgc's side of llm_vs_llamacpp.sh: converts stories260K to GGUF of a type (tg_llama2c_to_gguf),
 * or with --compare decodes that file with tg_llm feeding the ids llama.cpp fed (llamacpp_run's output) and
 * compares the logits at every position with llama.cpp's: the largest difference, and the first position
 * where the greedy choices differ.
 *
 *   tgc_run --convert MODEL.bin TOKENIZER.bin OUT.gguf TYPE
 *   tgc_run --compare MODEL.gguf LOGITS.bin id0 id1 ...
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tg.h"

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "--convert")) {
    if (tg_llama2c_to_gguf(argv[2], argv[3], argv[4], (tg_ggml_type)atoi(argv[5])) == TG_OK) return 0;
    fprintf(stderr, "tgc_run: %s\n", tg_error());
    return 1;
  }
  if (argc < 5 || strcmp(argv[1], "--compare")) {
    fprintf(stderr, "usage: tgc_run --convert MODEL.bin TOKENIZER.bin OUT.gguf TYPE | --compare MODEL.gguf LOGITS.bin ids...\n");
    return 2;
  }
  tg_llm *m = tg_llm_load(argv[2], 0);
  FILE *f = fopen(argv[3], "rb");
  if (!m || !f) {
    fprintf(stderr, "tgc_run: %s\n", m ? argv[3] : tg_error());
    return 1;
  }
  int64_t nv = tg_llm_config_of(m).vocab_size;
  float *a = malloc((size_t)nv * sizeof *a), *b = malloc((size_t)nv * sizeof *b);
  double worst = 0;
  int diverge = -1, n = argc - 4;
  for (int i = 0; a && b && i < n; i++) {
    if (tg_llm_step(m, atoi(argv[4 + i]), a) != TG_OK || fread(b, sizeof *b, (size_t)nv, f) != (size_t)nv) {
      fprintf(stderr, "tgc_run: position %d: %s\n", i, tg_error());
      return 1;
    }
    int ba = 0, bb = 0;
    for (int64_t k = 0; k < nv; k++) {
      worst = fmax(worst, fabs((double)a[k] - b[k]));
      if (a[k] > a[ba]) ba = (int)k;
      if (b[k] > b[bb]) bb = (int)k;
    }
    if (ba != bb && diverge < 0) diverge = i;
  }
  printf("max |logit difference| %.3g over %d positions; greedy choices %s%d\n", worst, n,
         diverge < 0 ? "agree at all " : "first differ at position ", diverge < 0 ? n : diverge);
  free(a);
  free(b);
  fclose(f);
  tg_llm_free(m);
  return 0;
}
