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
 * tok512.bin from --tokenizer PATH, else beside the model, else in those folders. The words of the prompt may
 * come quoted or not (they are joined with spaces). --help lists the flags; a bad flag or value is a message and
 * exit status 2.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tg.h>

#include "args.h"

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

/* the file `name` into out: found by tg_data_find, else beside the executable; false with a message */
static bool locate(const char *name, char *out, size_t cap) {
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

/* the file `name` in the folder of `file` into out, when it is readable there */
static bool beside(const char *file, const char *name, char *out, size_t cap) {
  const char *slash = strrchr(file, '/');
  int w = slash ? snprintf(out, cap, "%.*s/%s", (int)(slash - file), file, name) : snprintf(out, cap, "%s", name);
  return w > 0 && (size_t)w < cap && access(out, R_OK) == 0;
}

/* prints a piece as run.c's safe_printf: a lone byte only when printable or whitespace */
static void print_piece(const char *p) {
  if (!p || !p[0]) return;
  if (!p[1] && !isprint((unsigned char)p[0]) && !isspace((unsigned char)p[0])) return;
  fputs(p, stdout);
  fflush(stdout);
}

/* the help, on stdout: every flag, its range and its default */
static void usage(void) {
  printf("usage: llama [--model FILE] [--tokenizer FILE] [-n POSITIONS] [--ids] [--] [PROMPT...]\n"
         "Greedy decoding with llama2.c's stories260K: the prompt, then at each position the most likely token.\n"
         "  PROMPT...         the prompt; several words are joined with spaces (default \"Once upon a time\")\n"
         "  --model FILE      a llama2.c checkpoint (default: stories260K.bin in $TG_DATA/stories260K,\n"
         "                    ~/.cache/tgc/stories260K or ../shared/data/stories260K)\n"
         "  --tokenizer FILE  a llama2.c tokenizer (default: tok512.bin beside the model, then in those folders)\n"
         "  -n POSITIONS      positions to run, the prompt's included, as llama2.c's run.c -n: 1 up to the\n"
         "                    model's sequence length (512 for stories260K; default 256)\n"
         "  --ids             also print the token ids, on stderr\n"
         "  --                what follows is the prompt, even words that begin with -\n"
         "  -h, --help        this help\n"
         "JIT=0 runs every step eagerly. Exit status: 0 done, 1 a failure while running, 2 a bad command line (a\n"
         "message names the flag).\n");
}

/* the n words joined with spaces, in a new string; NULL when out of memory */
static char *join_words(int n, char **words) {
  size_t len = 1;
  for (int i = 0; i < n; i++) len += strlen(words[i]) + 1;
  char *s = malloc(len), *p = s;
  if (!s) return NULL;
  *s = 0;
  for (int i = 0; i < n; i++) p += sprintf(p, "%s%s", i ? " " : "", words[i]);
  return s;
}

int main(int argc, char **argv) {
  args_prog = "llama";
  const char *model_arg = NULL, *tok_arg = NULL;
  long long steps = 256;
  bool ids = false;
  char **words = argv;  /* the prompt's words, gathered over argv itself: word k goes to argv[k], already read */
  int nwords = 0;
  bool flags_end = false;  /* after "--" every argument is a word */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool ok = true;
    if (flags_end || a[0] != '-' || !a[1]) {
      words[nwords++] = argv[i];
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    } else if (!strcmp(a, "--model")) {
      ok = (model_arg = args_value(argc, argv, &i, "a llama2.c checkpoint")) && args_input_ok(a, model_arg);
    } else if (!strcmp(a, "--tokenizer")) {
      ok = (tok_arg = args_value(argc, argv, &i, "a llama2.c tokenizer")) && args_input_ok(a, tok_arg);
    } else if (!strcmp(a, "-n")) {  /* the upper limit is the model's, checked once it is loaded */
      ok = args_int_in(argc, argv, &i, 1, LLONG_MAX, "1..the model's sequence length", &steps);
    } else if (!strcmp(a, "--ids")) {
      ids = true;
    } else if (!strcmp(a, "--")) {
      flags_end = true;
    } else {
      ok = args_unknown(a);
    }
    if (!ok) return ARGS_EXIT;
  }
  char *prompt = nwords ? join_words(nwords, words) : strdup("Once upon a time");
  char model_path[PATH_MAX], tok_path[PATH_MAX];
  if (!prompt) {
    fprintf(stderr, "llama: out of memory\n");
    return 1;
  }
  /* the model: --model, else found; the tokenizer: --tokenizer, else the one beside the model, else found */
  bool found = true;
  if (model_arg) snprintf(model_path, sizeof model_path, "%s", model_arg);
  else found = locate("stories260K.bin", model_path, sizeof model_path);
  if (tok_arg) snprintf(tok_path, sizeof tok_path, "%s", tok_arg);
  else if (found && !beside(model_path, "tok512.bin", tok_path, sizeof tok_path))
    found = locate("tok512.bin", tok_path, sizeof tok_path);
  if (!found) {
    free(prompt);
    return 1;
  }

  tg_llama *m = tg_llama_load(model_path, 0);
  if (m && steps > tg_llama_max_seq(m)) {
    args_error("-n: %lld is out of range; allowed 1..%lld (the model's sequence length)", steps,
               (long long)tg_llama_max_seq(m));
    tg_llama_free(m);
    free(prompt);
    return ARGS_EXIT;
  }
  tg_tokenizer *tok = m ? tg_tokenizer_load(tok_path, tg_llama_config_of(m).vocab_size) : NULL;
  size_t cap = strlen(prompt) + 3;
  int32_t *prompt_ids = malloc(cap * sizeof *prompt_ids);
  float *logits = m ? malloc((size_t)tg_llama_config_of(m).vocab_size * sizeof *logits) : NULL;
  int64_t nprompt = tok && prompt_ids ? tg_tokenizer_encode(tok, prompt, true, false, prompt_ids, (int64_t)cap) : -1;
  free(prompt);
  if (!m || !tok || !prompt_ids || !logits || nprompt < 1) {
    fprintf(stderr, "llama: %s\n", tg_error()[0] ? tg_error() : "out of memory");
    free(prompt_ids);
    free(logits);
    tg_tokenizer_free(tok);
    tg_llama_free(m);
    return 1;
  }
  tg_llama_config c = tg_llama_config_of(m);

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
    tg_memory_info mi;
    if (tg_memory(NULL, &mi) == TG_OK) fprintf(stderr, "peak memory: %.1f MB of tensors and arenas\n", mi.peak / 1e6);
  }
  free(prompt_ids);
  free(logits);
  tg_tokenizer_free(tok);
  tg_llama_free(m);
  return rc;
}
