/* llm.c — prefill and decode tokens/s of a GGUF language model, measured as llama.cpp's llama-bench measures
 * them (bench/llm.sh runs both side by side): random token ids, a warm-up, then R repetitions of a prefill of P
 * tokens from an empty cache and of N decode steps from an empty cache, the mean rate and its spread. The KV
 * cache holds P + N positions (llama-bench's context for such a run).
 *
 *   ./build/bench/llm -m MODEL.gguf [-p 128] [-n 64] [-r 3] [-f 5,17,33] [-c N]       threads: TG_THREADS
 *
 * Prints one line per test: "pp128: 123.4 +- 1.2 tokens/s" and "tg64: ...". -f first: the first-token latency
 * of prompts of each length in turn, from an empty cache, each measured once in this process (the first sight
 * of a length: what a chat's next prompt costs, compiles included; run it with a warm or empty TG_CACHE). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "tg.h"

static void die(const char *what) {
  fprintf(stderr, "llm bench: %s: %s\n", what, tg_error());
  exit(1);
}

static void usage(void) {
  printf("usage: llm -m MODEL.gguf [-p TOKENS] [-n TOKENS] [-r RUNS] [-f LENGTHS] [-c POSITIONS]\n"
         "Prefill and decode tokens/s of a GGUF language model on random tokens, as llama-bench measures them.\n"
         "  -m FILE     the GGUF file\n"
         "  -p TOKENS   the prompt processed in one prefill, 0..4096 (0: no prefill test; default 128)\n"
         "  -n TOKENS   decode steps, 0..4096 (0: no decode test; default 64)\n"
         "  -r RUNS     repetitions of each test after a warm-up, 1..100 (default 3)\n"
         "  -f LENGTHS  first: the time to the first token's logits of a prompt of each length in turn (a\n"
         "              comma-separated list of at most 16 lengths in 1..4096), once each, compiles included\n"
         "  -c N        KV cache positions, 0..4096 (0: the longest test needs; the default); kernels depend on it\n"
         "Threads: TG_THREADS. Prints pp<P> and tg<N> lines: the mean tokens/s +- its standard deviation.\n");
}

static void report(const char *test, int64_t tokens, const double *s, int r) {
  double mean = 0, var = 0;
  for (int i = 0; i < r; i++) mean += tokens / s[i];
  mean /= r;
  for (int i = 0; i < r; i++) var += (tokens / s[i] - mean) * (tokens / s[i] - mean);
  printf("%s: %.2f +- %.2f tokens/s\n", test, mean, r > 1 ? sqrt(var / (r - 1)) : 0.0);
  fflush(stdout);
}

int main(int argc, char **argv) {
  args_prog = "llm";
  const char *model = NULL;
  long long p = 128, n = 64, r = 3, first[16], nfirst = 0, maxfirst = 0, ctx = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool ok = true;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    } else if (!strcmp(a, "-m")) {
      ok = (model = args_value(argc, argv, &i, "a GGUF file")) && args_input_ok(a, model);
    } else if (!strcmp(a, "-p")) {
      ok = args_int(argc, argv, &i, 0, 4096, &p);
    } else if (!strcmp(a, "-n")) {
      ok = args_int(argc, argv, &i, 0, 4096, &n);
    } else if (!strcmp(a, "-r")) {
      ok = args_int(argc, argv, &i, 1, 100, &r);
    } else if (!strcmp(a, "-c")) {
      ok = args_int(argc, argv, &i, 0, 4096, &ctx);
    } else if (!strcmp(a, "-f")) {
      const char *v = args_value(argc, argv, &i, "prompt lengths, as 5,17,33");
      ok = v != NULL;
      for (nfirst = 0; ok && *v && nfirst < 16; nfirst++) {
        char *end;
        first[nfirst] = strtoll(v, &end, 10);
        ok = end != v && first[nfirst] >= 1 && first[nfirst] <= 4096 && (*end == ',' || !*end);
        if (ok && first[nfirst] > maxfirst) maxfirst = first[nfirst];
        v = *end ? end + 1 : end;
      }
      if (!ok || *v) return args_usage_error("-f: want at most 16 lengths in 1..4096, comma-separated"), ARGS_EXIT;
    } else {
      ok = args_unknown(a);
    }
    if (!ok) return ARGS_EXIT;
  }
  if (!model) {
    args_usage_error("no model: -m MODEL.gguf");
    return ARGS_EXIT;
  }
  long long seq = p + n > maxfirst ? p + n : maxfirst;
  if (ctx && ctx < seq) return args_usage_error("-c %lld: the tests need %lld positions", ctx, seq), ARGS_EXIT;
  tg_llm *m = tg_llm_load(model, ctx ? ctx : seq > 1 ? seq : 2);
  if (!m) die(model);
  tg_llm_config c = tg_llm_config_of(m);
  float *logits = malloc((size_t)c.vocab_size * sizeof *logits);
  int32_t *tokens = malloc((size_t)(seq > 1 ? seq : 1) * sizeof *tokens);
  double *secs = malloc((size_t)r * sizeof *secs);
  if (!logits || !tokens || !secs) die("malloc");
  uint64_t x = 0x9e3779b97f4a7c15ull;  /* random ids, as llama-bench's: a fixed LCG */
  for (int64_t i = 0; i < seq; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    tokens[i] = (int32_t)((x >> 33) % (uint64_t)c.vocab_size);
  }
  note("%s: %s, %lld layers, dim %lld, vocab %lld; %d threads\n", model, c.arch, (long long)c.n_layers,
       (long long)c.dim, (long long)c.vocab_size, tg_num_threads());
  /* float32 K and V rows of n_kv_heads * head_dim per layer and position */
  printf("kv cache: %.2f MB\n", 2.0 * c.n_layers * c.max_seq * c.n_kv_heads * c.head_dim * 4 / 1e6);
  for (int k = 0; k < nfirst; k++) {
    if (tg_llm_reset(m) != TG_OK) die("reset");
    double t0 = bench_now_s();
    if (tg_llm_prefill(m, tokens, first[k], logits) != TG_OK) die("prefill");
    printf("first token of %lld: %.1f ms\n", first[k], (bench_now_s() - t0) * 1e3);
    fflush(stdout);
  }
  if (p > 0) {
    for (int i = -1; i < r; i++) {  /* run -1 is the warm-up (compiles the prefill's kernels) */
      if (tg_llm_reset(m) != TG_OK) die("reset");
      double t0 = bench_now_s();
      if (tg_llm_prefill(m, tokens, p, logits) != TG_OK) die("prefill");
      if (i >= 0) secs[i] = bench_now_s() - t0;
    }
    char name[32];
    snprintf(name, sizeof name, "pp%lld", p);
    report(name, p, secs, (int)r);
  }
  if (n > 0) {
    for (int i = -1; i < r; i++) {  /* the warm-up captures the step */
      if (tg_llm_reset(m) != TG_OK) die("reset");
      int32_t t = 1;
      double t0 = bench_now_s();
      for (int64_t k = 0; k < n; k++) {
        if (tg_llm_step(m, t, logits) != TG_OK) die("step");
        int32_t best = 0;
        for (int64_t v = 1; v < c.vocab_size; v++)
          if (logits[v] > logits[best]) best = (int32_t)v;
        t = best;
      }
      if (i >= 0) secs[i] = bench_now_s() - t0;
    }
    char name[32];
    snprintf(name, sizeof name, "tg%lld", n);
    report(name, n, secs, (int)r);
  }
  tg_memory_info mi;
  if (tg_memory(NULL, &mi) == TG_OK) note("peak memory: %.1f MB of tensors and arenas\n", mi.peak / 1e6);
  free(logits);
  free(tokens);
  free(secs);
  tg_llm_free(m);
  return 0;
}
