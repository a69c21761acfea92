/* tg_llm.c — `tg-llm`: text from a language model in a GGUF file (llama, qwen2, qwen3), streamed to stdout as
 * it comes; statistics on stderr. The prompt is one batched forward (tg_llm_prefill), then one tg_jit replay
 * per token (tg_llm_step); the next token is drawn by tg_sampler (llama.cpp's flags and defaults).
 *
 *   tg-llm                                          # stories260K, converted to GGUF on the first run
 *   tg-llm -m model.gguf -p "The capital of France is" -n 32 --temp 0
 *   tg-llm -m qwen2.gguf -i -p "You are terse."      # chat; -p is the system message
 *
 * Without -m the model is stories260K.gguf in $TG_DATA/stories260K, ~/.cache/tgc/stories260K or
 * ../shared/data/stories260K; when none has it, stories260K.bin and tok512.bin found there are converted into
 * ~/.cache/tgc/stories260K/stories260K.gguf (tg_llama2c_to_gguf). --help lists the flags; a bad flag or value is
 * a message and exit status 2.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tg.h>

#include "args.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct options {
  const char *model, *prompt, *threads;
  long long n_predict, ctx;
  bool interactive, seed_given, verbose_prompt;
  tg_sampler_opts sampling;
} options;

static void usage(void) {
  tg_sampler_opts d = tg_sampler_defaults();
  printf("usage: tg-llm [-m MODEL.gguf] [-p PROMPT] [-n N] [-i] [sampling flags] [-t THREADS] [-c CONTEXT]\n"
         "Text from a language model in a GGUF file (architectures llama, qwen2, qwen3), streamed to stdout;\n"
         "progress and statistics (prefill and decode tokens/s, peak memory) on stderr.\n"
         "  -m, --model FILE        a GGUF file (default: stories260K.gguf in $TG_DATA/stories260K,\n"
         "                          ~/.cache/tgc/stories260K or ../shared/data/stories260K, converted there from\n"
         "                          llama2.c's stories260K.bin and tok512.bin on the first run)\n"
         "  -p, --prompt TEXT       the prompt (default \"Once upon a time\"); with -i, the system message\n"
         "  -n, --n-predict N       tokens to generate (per reply with -i), -1: until an end-of-generation token\n"
         "                          or the context is full (default 256)\n"
         "  -i, --interactive       chat: each line on stdin is a user message, framed by the model's chat\n"
         "                          template (llama3, chatml for qwen2/qwen3, llama2 [INST]; none: the text as is)\n"
         "  --temp T                temperature, 0..100; 0 is greedy (default %g)\n"
         "  --top-k K               keep the K most likely tokens, 0..2147483647; 0: all (default %lld)\n"
         "  --top-p P               keep the most likely tokens up to probability P, 0..1; 1: off (default %g)\n"
         "  --min-p P               keep tokens at least P times the most likely's probability, 0..1; 0: off\n"
         "                          (default %g)\n"
         "  --repeat-penalty R      divide (multiply, if negative) the logits of recent tokens by R, >0..100;\n"
         "                          1: off (default %g)\n"
         "  --repeat-last-n N       the tokens the penalty looks back on, 0..65536 (default %lld)\n"
         "  -s, --seed S            the sampler's seed, 0..9223372036854775807 (default: from the clock, printed)\n"
         "  -t, --threads N         CPU threads, 1..256 (default: TG_THREADS, else every core)\n"
         "  -c, --ctx-size N        positions in the KV cache, 1..the model's context; 0: the model's, at most\n"
         "                          4096 (default 0)\n"
         "  --verbose-prompt        print the tokens of the prompt (of each turn with -i) on stderr: id and text\n"
         "  -h, --help              this help\n"
         "Exit status: 0 done, 1 a failure while running (a message says what), 2 a bad command line.\n",
         d.temperature, (long long)d.top_k, d.top_p, d.min_p, d.repeat_penalty, (long long)d.repeat_last_n);
}

/* the options from argv; false after a message when one is bad, *help when --help was asked */
static bool parse(int argc, char **argv, options *o, bool *help) {
  *o = (options){.prompt = NULL, .n_predict = 256, .sampling = tg_sampler_defaults()};
  *help = false;
  tg_sampler_opts *s = &o->sampling;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool ok = true;
    long long v;
    double r;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      *help = true;
      return true;
    } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
      ok = (o->model = args_value(argc, argv, &i, "a GGUF file")) && args_input_ok(a, o->model);
    } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
      /* a prompt may begin with "--": take the next argument whatever it is */
      if (i + 1 >= argc) ok = args_usage_error("%s needs a value (the prompt)", a);
      else o->prompt = argv[++i];
    } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
      ok = args_int(argc, argv, &i, -1, INT32_MAX, &o->n_predict);
    } else if (!strcmp(a, "-i") || !strcmp(a, "--interactive")) {
      o->interactive = true;
    } else if (!strcmp(a, "--verbose-prompt")) {
      o->verbose_prompt = true;
    } else if (!strcmp(a, "--temp")) {
      ok = args_real(argc, argv, &i, 0, 100, &s->temperature);
    } else if (!strcmp(a, "--top-k")) {
      ok = args_int(argc, argv, &i, 0, INT32_MAX, &v);
      s->top_k = v;
    } else if (!strcmp(a, "--top-p")) {
      ok = args_real(argc, argv, &i, 0, 1, &s->top_p);
    } else if (!strcmp(a, "--min-p")) {
      ok = args_real(argc, argv, &i, 0, 1, &s->min_p);
    } else if (!strcmp(a, "--repeat-penalty")) {
      ok = args_real(argc, argv, &i, 0, 100, &r);
      if (ok && r == 0) ok = args_error("%s: 0 is out of range; allowed a number above 0 up to 100", a);
      s->repeat_penalty = r;
    } else if (!strcmp(a, "--repeat-last-n")) {
      ok = args_int(argc, argv, &i, 0, 65536, &v);
      s->repeat_last_n = v;
    } else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
      ok = args_int(argc, argv, &i, 0, LLONG_MAX, &v);
      s->seed = (uint64_t)v;
      o->seed_given = true;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
      ok = args_int(argc, argv, &i, 1, 256, &v);
      o->threads = argv[i];
    } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {  /* the upper limit is the model's, checked later */
      ok = args_int_in(argc, argv, &i, 0, INT32_MAX, "0..the model's context length", &o->ctx);
    } else {
      ok = args_unknown(a);
    }
    if (!ok) return false;
  }
  if (!o->prompt) o->prompt = o->interactive ? "" : "Once upon a time";
  return true;
}

/* ---- the default model ----------------------------------------------------------------------------------- */

/* mkdir -p for the folder part of path */
static bool make_parents(const char *path) {
  char dir[PATH_MAX];
  args_dirname(path, dir, sizeof dir);
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return false;
    *p = '/';
  }
  return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

/* stories260K.gguf into out: found, else converted from llama2.c's files into the user cache */
static bool default_model(char *out, size_t cap) {
  if (tg_data_find(NULL, "stories260K", "stories260K.gguf", out, cap) == TG_OK) return true;
  char bin[PATH_MAX], tok[PATH_MAX];
  if (tg_data_find(NULL, "stories260K", "stories260K.bin", bin, sizeof bin) != TG_OK ||
      tg_data_find(NULL, "stories260K", "tok512.bin", tok, sizeof tok) != TG_OK) {
    fprintf(stderr, "tg-llm: no model given and %s; pass -m MODEL.gguf\n", tg_error());
    return false;
  }
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int w = xdg && *xdg ? snprintf(out, cap, "%s/tgc/stories260K/stories260K.gguf", xdg)
          : home && *home ? snprintf(out, cap, "%s/.cache/tgc/stories260K/stories260K.gguf", home) : -1;
  if (w < 0 || (size_t)w >= cap || !make_parents(out)) {
    fprintf(stderr, "tg-llm: no user cache folder to convert stories260K into (HOME or XDG_CACHE_HOME); pass -m\n");
    return false;
  }
  fprintf(stderr, "tg-llm: converting %s and %s to %s (once)\n", bin, tok, out);
  if (tg_llama2c_to_gguf(bin, tok, out, TG_GGML_F32) != TG_OK) {
    fprintf(stderr, "tg-llm: %s\n", tg_error());
    return false;
  }
  return true;
}

/* ---- chat templates: named from tokenizer.chat_template (never interpreted), then framed here ----------------- */

typedef struct chat_template {
  const char *name;
  const char *system_pre, *system_post;   /* around the system message (none: it is sent as a first user line) */
  const char *user_pre, *user_post;       /* around a user message; user_post opens the assistant's reply */
  const char *end;                        /* closes a reply that stopped before its end-of-generation token */
  const char *between;                    /* after a closed reply, before the next user message */
  bool bos_each_turn;                     /* llama2: every [INST] turn begins with BOS */
} chat_template;

static const chat_template LLAMA3 = {"llama3", "<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
                                     "<|start_header_id|>user<|end_header_id|>\n\n",
                                     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>", "",
                                     false};
static const chat_template CHATML = {"chatml", "<|im_start|>system\n", "<|im_end|>\n", "<|im_start|>user\n",
                                     "<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>", "\n", false};
static const chat_template LLAMA2 = {"llama2", NULL, NULL, "[INST] ", " [/INST]", "</s>", "", true};
static const chat_template RAW = {"none (each line is appended to the text as it is)", NULL, NULL, "", "", "", "",
                                  false};

/* the template family of the file: its tokenizer.chat_template's markers, else the architecture's and the
 * vocabulary's; *from says which */
static const chat_template *template_of(tg_gguf *g, const tg_tokenizer *tok, const char **from) {
  const char *t = tg_gguf_kv_type(g, "tokenizer.chat_template") == TG_GGUF_STRING
                      ? tg_gguf_get_string(g, "tokenizer.chat_template", NULL) : NULL;
  if (t) {
    *from = "tokenizer.chat_template";
    if (strstr(t, "<|start_header_id|>")) return &LLAMA3;
    if (strstr(t, "<|im_start|>")) return &CHATML;
    if (strstr(t, "[INST]")) return &LLAMA2;
  }
  const char *arch = tg_gguf_kv_type(g, "general.architecture") == TG_GGUF_STRING
                         ? tg_gguf_get_string(g, "general.architecture", NULL) : "";
  *from = t ? "an unknown tokenizer.chat_template: the vocabulary's markers" : "the vocabulary (no chat template)";
  if (tg_tokenizer_find(tok, "<|start_header_id|>") >= 0) return &LLAMA3;
  if (tg_tokenizer_find(tok, "<|im_start|>") >= 0 || !strncmp(arch, "qwen", 4)) return &CHATML;
  return &RAW;
}

/* ---- a growing token list --------------------------------------------------------------------------------- */

typedef struct tokens { int32_t *v; int64_t n, cap; } tokens;

/* text encoded onto the end of l: special markers as their tokens when special, else as plain text */
static bool push_text(tokens *l, const tg_tokenizer *tok, const char *text, bool special, bool bos) {
  int64_t need = l->n + (int64_t)strlen(text) + 3;
  if (need > l->cap) {
    int32_t *v = realloc(l->v, (size_t)need * 2 * sizeof *v);
    if (!v) {
      fprintf(stderr, "tg-llm: out of memory\n");
      return false;
    }
    l->v = v;
    l->cap = need * 2;
  }
  if (!*text && !bos) return true;
  int64_t n = special ? tg_tokenizer_encode_special(tok, text, bos, l->v + l->n, l->cap - l->n)
                      : tg_tokenizer_encode(tok, text, bos, false, l->v + l->n, l->cap - l->n);
  if (n < 0) {
    fprintf(stderr, "tg-llm: encoding the prompt: %s\n", tg_error());
    return false;
  }
  l->n += n;
  return true;
}

static bool push_token(tokens *l, int32_t t) {
  if (l->n == l->cap) {
    int32_t *v = realloc(l->v, (size_t)(l->cap * 2 + 16) * sizeof *v);
    if (!v) return false;
    l->v = v;
    l->cap = l->cap * 2 + 16;
  }
  l->v[l->n++] = t;
  return true;
}

/* ---- generation -------------------------------------------------------------------------------------------- */

typedef struct run {
  tg_llm *m;
  tg_tokenizer *tok;
  tg_sampler *sampler;
  float *logits;
  int64_t vocab, max_seq;
  int32_t bos;
  /* statistics over the whole run */
  int64_t prefill_tokens, decode_tokens;
  double prefill_s, decode_s, first_step_s;
  bool stepped, verbose_prompt;
} run;

/* prints the text of token after prev: a piece of one ASCII control byte (not whitespace) is dropped, as
 * llama2.c's safe_printf; a special token (a chat marker) is not printed when hide_special */
static void print_token(const run *r, int32_t prev, int32_t token, bool hide_special) {
  if (hide_special && tg_tokenizer_is_special(r->tok, token)) return;
  const char *p = tg_tokenizer_decode(r->tok, prev, token);
  if (!p || !p[0]) return;
  unsigned char c = (unsigned char)p[0];
  if (!p[1] && c < 0x80 && !isprint(c) && !isspace(c)) return;
  fputs(p, stdout);
  fflush(stdout);
}

/* tokens fed in one prefill: the logits of the last into r->logits */
static bool prefill(run *r, const tokens *l) {
  if (r->verbose_prompt) {
    fprintf(stderr, "tg-llm: %lld prompt tokens:", (long long)l->n);
    for (int64_t i = 0; i < l->n; i++) {
      const char *p = tg_tokenizer_decode(r->tok, -1, l->v[i]);
      fprintf(stderr, " %d '", l->v[i]);
      for (; p && *p; p++) *p == '\n' ? fputs("\\n", stderr) : fputc(*p, stderr);
      fprintf(stderr, "'");
    }
    fprintf(stderr, "\n");
  }
  if (tg_llm_pos(r->m) + l->n > r->max_seq) {
    fprintf(stderr, "\ntg-llm: the context is full: %lld positions used, %lld more asked, %lld in all (-c)\n",
            (long long)tg_llm_pos(r->m), (long long)l->n, (long long)r->max_seq);
    return false;
  }
  double t0 = now_s();
  if (tg_llm_prefill(r->m, l->v, l->n, r->logits) != TG_OK) {
    fprintf(stderr, "\ntg-llm: prefill of %lld tokens: %s\n", (long long)l->n, tg_error());
    return false;
  }
  r->prefill_s += now_s() - t0;
  r->prefill_tokens += l->n;
  return true;
}

/* up to n tokens (-1: no limit) sampled from r->logits on; each but the last fed back with tg_llm_step. The last
 * token drawn, not yet fed, into *last (-1 if none); *eog whether it ends the generation. False on an error. */
static bool generate(run *r, int64_t n, int32_t prev, bool hide_special, int32_t *last, bool *eog) {
  *last = -1;
  *eog = false;
  for (int64_t i = 0; n < 0 || i < n; i++) {
    int32_t t = tg_sampler_sample(r->sampler, r->logits);
    if (t < 0) {
      fprintf(stderr, "\ntg-llm: sampling: %s\n", tg_error());
      return false;
    }
    *last = t;
    /* the end of generation; a BOS too, as llama2.c's run.c (stories models begin their next story with it) */
    if (tg_tokenizer_is_eog(r->tok, t) || t == r->bos) {
      *eog = true;
      return true;
    }
    print_token(r, prev, t, hide_special);
    prev = t;
    if ((n >= 0 && i + 1 == n) || tg_llm_pos(r->m) >= r->max_seq) return true;
    double t0 = now_s();
    if (tg_llm_step(r->m, t, r->logits) != TG_OK) {
      fprintf(stderr, "\ntg-llm: decode step at position %lld: %s\n", (long long)tg_llm_pos(r->m), tg_error());
      return false;
    }
    double dt = now_s() - t0;
    if (!r->stepped) {  /* the first step captures the JIT (compiles): reported apart, as examples/llama */
      r->stepped = true;
      r->first_step_s = dt;
    } else {
      r->decode_s += dt;
      r->decode_tokens++;
    }
  }
  return true;
}

/* one prompt, its text first (as run.c prints it), then the continuation */
static int complete(run *r, const options *o) {
  tokens l = {0};
  bool add_bos = tg_tokenizer_add_bos(r->tok) && r->bos >= 0;
  int rc = 1;
  if (!push_text(&l, r->tok, o->prompt, false, add_bos)) goto done;
  if (l.n == 0) {
    fprintf(stderr, "tg-llm: the prompt is empty and the model adds no BOS: nothing to start from\n");
    goto done;
  }
  for (int64_t i = 0; i < l.n; i++)
    if (!(i == 0 && add_bos)) print_token(r, i ? l.v[i - 1] : -1, l.v[i], false);
  int32_t last;
  bool eog;
  if (prefill(r, &l) && generate(r, o->n_predict, l.v[l.n - 1], false, &last, &eog)) rc = 0;
  printf("\n");
  fflush(stdout);  /* the text before the statistics on stderr, also when piped */
  if (rc == 0 && !eog && tg_llm_pos(r->m) >= r->max_seq)
    fprintf(stderr, "tg-llm: stopped at the end of the context (%lld positions, -c)\n", (long long)r->max_seq);
done:
  fflush(stdout);
  free(l.v);
  return rc;
}

/* the chat: a line from stdin per user message, framed by the template, the reply streamed */
static int chat(run *r, const options *o, const chat_template *ct) {
  tokens l = {0};
  char *line = NULL;
  size_t linecap = 0;
  bool add_bos = tg_tokenizer_add_bos(r->tok) && r->bos >= 0, first = true, ok = true;
  int32_t pending = -1;  /* the last token of the previous reply, drawn but not yet fed */
  bool pending_eog = false;
  const char *system = o->prompt && *o->prompt ? o->prompt : NULL;
  fprintf(stderr, "tg-llm: chat; each line is a message, an empty line or end of input (Ctrl-D) ends it\n");
  while (ok) {
    fprintf(stderr, "> ");
    ssize_t len = getline(&line, &linecap, stdin);
    if (len <= 0) break;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (!len) break;
    /* the turn as one text, encoded once with its markers as special tokens (as llama.cpp tokenizes a formatted
     * chat); the previous reply's last token, drawn but not fed, goes first */
    l.n = 0;
    if (pending >= 0) ok = push_token(&l, pending);
    if (ok && !first && !pending_eog) ok = push_text(&l, r->tok, ct->end, true, false);  /* stopped at -n */
    char *turn = NULL;
    size_t turn_len = 0;
    FILE *f = ok ? open_memstream(&turn, &turn_len) : NULL;
    if (f) {
      if (!first) fputs(ct->between, f);
      if (first && system && ct->system_pre) fprintf(f, "%s%s%s", ct->system_pre, system, ct->system_post);
      fputs(ct->user_pre, f);
      if (first && system && !ct->system_pre) fprintf(f, "%s\n\n", system);  /* no system slot: it leads */
      fprintf(f, "%s%s", line, ct->user_post);
      ok = fclose(f) == 0;
    } else {
      ok = false;
    }
    ok = ok && push_text(&l, r->tok, turn, true, add_bos && (first || ct->bos_each_turn));
    free(turn);
    if (!ok || !prefill(r, &l)) {
      ok = false;
      break;
    }
    first = false;
    int32_t prev = l.v[l.n - 1];
    ok = generate(r, o->n_predict, prev, true, &pending, &pending_eog);
    printf("\n");
    fflush(stdout);
    if (ok && tg_llm_pos(r->m) >= r->max_seq) {
      fprintf(stderr, "tg-llm: the context is full (%lld positions, -c); the chat ends\n", (long long)r->max_seq);
      break;
    }
  }
  free(line);
  free(l.v);
  return ok ? 0 : 1;
}

/* ---- main ---------------------------------------------------------------------------------------------------- */

static void report(const run *r) {
  if (r->prefill_tokens)
    fprintf(stderr, "tg-llm: prefill %lld tokens in %.3f s: %.1f tokens/s\n", (long long)r->prefill_tokens,
            r->prefill_s, r->prefill_tokens / r->prefill_s);
  if (r->decode_tokens)
    fprintf(stderr, "tg-llm: decode %lld tokens in %.3f s: %.1f tokens/s (%.3f ms per token; the first step, "
            "%.2f s with the JIT capture, not counted), %d kernels per step\n", (long long)r->decode_tokens,
            r->decode_s, r->decode_tokens / r->decode_s, r->decode_s * 1e3 / (double)r->decode_tokens,
            r->first_step_s, tg_llm_kernels(r->m));
  tg_memory_info mi;
  if (tg_memory(NULL, &mi) == TG_OK)
    fprintf(stderr, "tg-llm: peak memory %.1f MB of tensors and arenas (the mapped weights not counted), %d "
            "threads\n", mi.peak / 1e6, tg_num_threads());
}

int main(int argc, char **argv) {
  args_prog = "tg-llm";
  options o;
  bool help;
  if (!parse(argc, argv, &o, &help)) return ARGS_EXIT;
  if (help) {
    usage();
    return 0;
  }
  if (o.threads) setenv("TG_THREADS", o.threads, 1);  /* before the pool starts */
  if (!o.seed_given) o.sampling.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

  char path[PATH_MAX];
  if (o.model) snprintf(path, sizeof path, "%s", o.model);
  else if (!default_model(path, sizeof path)) return 1;

  run r = {0};
  int rc = 1;
  tg_gguf *g = tg_gguf_open(path);
  if (!g) {
    fprintf(stderr, "tg-llm: %s\n", tg_error());
    return 1;
  }
  r.tok = tg_tokenizer_from_gguf(g);
  if (!r.tok) {
    fprintf(stderr, "tg-llm: %s: the tokenizer: %s\n", path, tg_error());
    goto done;
  }
  const char *from = "";
  const chat_template *ct = o.interactive ? template_of(g, r.tok, &from) : NULL;
  fprintf(stderr, "tg-llm: loading %s\n", path);
  double t0 = now_s();
  r.m = tg_llm_from_gguf(g, 0);
  if (!r.m) {
    fprintf(stderr, "tg-llm: %s: %s\n", path, tg_error());
    goto done;
  }
  tg_llm_config c = tg_llm_config_of(r.m);
  if (o.ctx > c.context) {
    args_error("-c: %lld is out of range; allowed 0..%lld (the model's context length)", o.ctx,
               (long long)c.context);
    rc = ARGS_EXIT;
    goto done;
  }
  if (o.ctx && o.ctx != c.max_seq) {  /* another cache length: load again with it */
    tg_llm_free(r.m);
    r.m = tg_llm_from_gguf(g, o.ctx);
    if (!r.m) {
      fprintf(stderr, "tg-llm: %s: %s\n", path, tg_error());
      goto done;
    }
    c = tg_llm_config_of(r.m);
  }
  r.vocab = c.vocab_size;
  r.max_seq = c.max_seq;
  r.bos = tg_tokenizer_bos(r.tok);
  r.verbose_prompt = o.verbose_prompt;
  if (tg_tokenizer_vocab(r.tok) > r.vocab) {
    fprintf(stderr, "tg-llm: %s: the tokenizer has %lld tokens, the model's output %lld\n", path,
            (long long)tg_tokenizer_vocab(r.tok), (long long)r.vocab);
    goto done;
  }
  r.sampler = tg_sampler_new(o.sampling, r.vocab);
  r.logits = malloc((size_t)r.vocab * sizeof *r.logits);
  if (!r.sampler || !r.logits) {
    fprintf(stderr, "tg-llm: %s\n", r.sampler ? "out of memory" : tg_error());
    goto done;
  }
  fprintf(stderr, "tg-llm: %s, %lld layers, dim %lld, %lld heads (%lld kv), vocab %lld, %lld positions; "
          "loaded in %.2f s; seed %llu\n", c.arch, (long long)c.n_layers, (long long)c.dim,
          (long long)c.n_heads, (long long)c.n_kv_heads, (long long)c.vocab_size, (long long)c.max_seq,
          now_s() - t0, (unsigned long long)o.sampling.seed);
  if (ct) fprintf(stderr, "tg-llm: chat template %s, from %s\n", ct->name, from);
  tg_gguf_close(g);  /* the weights keep the mapping */
  g = NULL;
  rc = ct ? chat(&r, &o, ct) : complete(&r, &o);
  report(&r);
done:
  tg_gguf_close(g);
  free(r.logits);
  tg_sampler_free(r.sampler);
  tg_tokenizer_free(r.tok);
  tg_llm_free(r.m);
  return rc;
}
