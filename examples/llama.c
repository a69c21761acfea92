/* llama.c — greedy text generation with a real pretrained Llama (llama2.c's stories260K), one token per JIT
 * step: the step is captured once and replayed at every position, the position a tg_variable bound before
 * each call, the KV caches written in place (src/nn/llama.c holds the model).
 *
 *   ./build/examples/llama "Once upon a time"              # 256 positions, as llama2.c's run.c -n 256
 *   ./build/examples/llama -n 64 --ids "Once upon a time"  # token ids on stderr too
 *   JIT=0 ./build/examples/llama "Once upon a time"        # every step scheduled and run eagerly
 *
 * The model is stories260K.bin from --model PATH, else $TG_DATA/stories260K, ~/.cache/tgc/stories260K, or the
 * project's shared data (../shared/data/stories260K beside the repository or the executable); the tokenizer
 * tok512.bin from --tokenizer PATH, else beside the model.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tg.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* the shared data folder relative to this executable (build/examples/llama -> ../shared/data/<sub>) */
static bool beside_exe(const char *sub, char *out, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return false;
  *slash = 0;
  int w = snprintf(out, cap, "%s/../../../shared/data/%s", exe, sub);
  return w > 0 && (size_t)w < cap;
}

/* path into out: given, else found by tg_data_find, else beside the executable; false with a message */
static bool locate(const char *given, const char *name, char *out, size_t cap) {
  if (given) {
    snprintf(out, cap, "%s", given);
    return true;
  }
  if (tg_data_find(NULL, "stories260K", name, out, cap) == TG_OK) return true;
  char looked[1024], dir[PATH_MAX];
  snprintf(looked, sizeof looked, "%s", tg_error());
  if (beside_exe("stories260K", dir, sizeof dir)) {
    int w = snprintf(out, cap, "%s/%s", dir, name);
    if (w > 0 && (size_t)w < cap && access(out, R_OK) == 0) return true;
  }
  fprintf(stderr, "llama: %s, and %s; pass --model PATH (and --tokenizer PATH)\n", looked,
          beside_exe("stories260K", dir, sizeof dir) ? dir : "(the executable's folder is unknown)");
  return false;
}

/* prints a piece as run.c's safe_printf: a lone byte only when printable or whitespace */
static void print_piece(const char *p) {
  if (!p || !p[0]) return;
  if (!p[1] && !isprint((unsigned char)p[0]) && !isspace((unsigned char)p[0])) return;
  fputs(p, stdout);
  fflush(stdout);
}

static int usage(void) {
  fprintf(stderr, "usage: llama [--model PATH] [--tokenizer PATH] [-n POSITIONS] [--ids] [PROMPT]\n"
                  "  greedy decoding of PROMPT (default \"Once upon a time\") for POSITIONS positions (default 256,\n"
                  "  prompt included, as llama2.c's run.c -n); --ids prints the token ids on stderr\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *model_arg = NULL, *tok_arg = NULL, *prompt = "Once upon a time";
  long steps = 256;
  bool ids = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--model") && i + 1 < argc) model_arg = argv[++i];
    else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok_arg = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) steps = strtol(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--ids")) ids = true;
    else if (argv[i][0] == '-') return usage();
    else prompt = argv[i];
  }
  char model_path[PATH_MAX], tok_path[PATH_MAX];
  if (!locate(model_arg, "stories260K.bin", model_path, sizeof model_path)) return 1;
  if (!tok_arg && !model_arg) {
    /* the tokenizer beside the model */
    snprintf(tok_path, sizeof tok_path, "%s", model_path);
    char *slash = strrchr(tok_path, '/');
    snprintf(slash ? slash + 1 : tok_path, sizeof tok_path - (size_t)(slash ? slash + 1 - tok_path : 0), "tok512.bin");
  } else if (!locate(tok_arg, "tok512.bin", tok_path, sizeof tok_path)) {
    return 1;
  }

  tg_llama *m = tg_llama_load(model_path, 0);
  tg_tokenizer *tok = m ? tg_tokenizer_load(tok_path, tg_llama_config_of(m).vocab_size) : NULL;
  size_t cap = strlen(prompt) + 3;
  int32_t *prompt_ids = malloc(cap * sizeof *prompt_ids);
  float *logits = m ? malloc((size_t)tg_llama_config_of(m).vocab_size * sizeof *logits) : NULL;
  int64_t nprompt = tok && prompt_ids ? tg_tokenizer_encode(tok, prompt, true, false, prompt_ids, (int64_t)cap) : -1;
  if (!m || !tok || !prompt_ids || !logits || nprompt < 1) {
    fprintf(stderr, "llama: %s\n", tg_error()[0] ? tg_error() : "out of memory");
    free(prompt_ids);
    free(logits);
    tg_tokenizer_free(tok);
    tg_llama_free(m);
    return 1;
  }
  tg_llama_config c = tg_llama_config_of(m);
  if (steps < 1 || steps > tg_llama_max_seq(m)) steps = tg_llama_max_seq(m);

  /* as run.c's generate(): the prompt is forced token by token, then the argmax follows; BOS ends it */
  int32_t token = prompt_ids[0], next = 0;
  double start = 0, first = 0, t0 = now_s();
  long pos = 0;
  int rc = 0;
  while (pos < steps) {
    if (tg_llama_step(m, token, pos, logits) != TG_OK) {
      fprintf(stderr, "\nllama: step %ld: %s\n", pos, tg_error());
      rc = 1;
      break;
    }
    if (pos < nprompt - 1) {
      next = prompt_ids[pos + 1];
    } else {
      next = 0;
      for (int64_t i = 1; i < c.vocab_size; i++)
        if (logits[i] > logits[next]) next = (int32_t)i;
    }
    if (ids) fprintf(stderr, "%s%d", pos ? " " : "ids: ", next);
    pos++;
    if (next == 1) break;
    print_piece(tg_tokenizer_decode(tok, token, next));
    token = next;
    if (start == 0) {  /* the first step compiles; the second captures: the rate counts from here, as run.c */
      start = now_s();
      first = start - t0;
    }
  }
  printf("\n");
  fflush(stdout);  /* the text before the statistics on stderr, also when piped */
  if (ids) fprintf(stderr, "\n");
  double end = now_s();
  if (pos > 1 && rc == 0) {
    const char *jit = getenv("JIT");
    fprintf(stderr, "achieved tok/s: %.1f (%.3f ms per token over %ld steps; first step %.2f s), %s, %d kernels "
            "per step, %d threads\n", (pos - 1) / (end - start), (end - start) * 1e3 / (double)(pos - 1), pos - 1,
            first, jit && !strcmp(jit, "0") ? "JIT=0 (eager)" : "JIT", tg_llama_kernels(m), tg_num_threads());
  }
  free(prompt_ids);
  free(logits);
  tg_tokenizer_free(tok);
  tg_llama_free(m);
  return rc;
}
