/* test_llm.c — language models from GGUF (src/nn/llm*.c): stories260K converted at test time with
 * tg_llama2c_to_gguf gives llama2.c's greedy tokens (tests/fixtures/stories260K_greedy.txt) and tg_llama's
 * logits; its F16, Q8_0 and Q4_0 conversions give the tokens of a plain C reference forward (tests/ref_llm.c)
 * on their dequantized weights; prefill equals single steps; small random-weight llama3-, qwen2- and
 * qwen3-style files written with tg_gguf_writer give the reference's logits; bad files and calls are refused.
 * The stories260K tests skip when the model is not on this machine. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn/llm.h"
#include "ref_llm.h"
#include "test.h"
#include "uop/uop.h"

#define NSTEPS 64

static int nprompt, nnext;
static int32_t prompt[16], next_ids[NSTEPS];

/* the fixture's prompt ids and next ids */
static bool fixture(void) {
  const char *file = __FILE__, *slash = strrchr(file, '/');
  char path[PATH_MAX], buf[8192];
  snprintf(path, sizeof path, "%.*sfixtures/stories260K_greedy.txt", slash ? (int)(slash - file + 1) : 0, file);
  FILE *fp = fopen(path, "rb");
  size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
  if (fp) fclose(fp);
  buf[n] = 0;
  const char *keys[2] = {"\nprompt_ids: ", "\nnext: "};
  int32_t *outs[2] = {prompt, next_ids};
  int caps[2] = {16, NSTEPS}, *counts[2] = {&nprompt, &nnext};
  for (int k = 0; k < 2; k++) {
    const char *p = strstr(buf, keys[k]);
    *counts[k] = 0;
    for (p = p ? p + strlen(keys[k]) : NULL; p && *counts[k] < caps[k] && *p && *p != '\n';) {
      char *end;
      long v = strtol(p, &end, 10);
      if (end == p) break;
      outs[k][(*counts[k])++] = (int32_t)v;
      p = end;
    }
  }
  CHECK(nprompt > 1 && nnext == NSTEPS, "cannot read %s (run from the repository root)", path);
  return nprompt > 1 && nnext == NSTEPS;
}

/* stories260K converted to GGUF of type in a new temporary directory dir; false (skipped or failed) otherwise */
static bool stories(tg_ggml_type type, char *dir, char *path, char *model) {
  char tok[PATH_MAX];
  if (tg_data_find(NULL, "stories260K", "stories260K.bin", model, PATH_MAX) != TG_OK ||
      tg_data_find(NULL, "stories260K", "tok512.bin", tok, PATH_MAX) != TG_OK) {
    const char *looked = strstr(tg_error(), "looked in ");
    test_skip("stories260K not found in %s", looked ? looked + 10 : tg_error());
    tg_error_clear();
    return false;
  }
  if (!fixture()) return false;
  if (!test_temp_dir(dir, PATH_MAX)) {
    CHECK(false, "no temporary directory");
    return false;
  }
  snprintf(path, PATH_MAX, "%.4000s/s.gguf", dir);
  tg_status st = tg_llama2c_to_gguf(model, tok, path, type);
  CHECK(st == TG_OK, "convert: %s", tg_error());
  if (st != TG_OK) test_remove_dir(dir);
  return st == TG_OK;
}

static int32_t argmax(const float *x, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = (int32_t)i;
  return best;
}

TEST(test_llm_stories_f32_gguf_matches_llama2c_and_tg_llama) {
  char dir[PATH_MAX], path[PATH_MAX], model[PATH_MAX];
  if (!stories(TG_GGML_F32, dir, path, model)) return;
  tg_gguf *g = tg_gguf_open(path);
  int64_t v = 0;
  size_t len = 0;
  const char *s = g ? tg_gguf_get_string(g, "tokenizer.ggml.model", &len) : NULL;
  CHECK(s && !strcmp(s, "llama") && tg_gguf_get_int(g, "llama.rope.dimension_count", &v) == TG_OK && v == 8 &&
        tg_gguf_array_int(g, "tokenizer.ggml.token_type", 0, &v) == TG_OK && v == 2 &&
        tg_gguf_array_int(g, "tokenizer.ggml.token_type", 1, &v) == TG_OK && v == 3 &&
        !strcmp(tg_gguf_array_string(g, "tokenizer.ggml.tokens", 2, NULL), "</s>") &&
        !strcmp(tg_gguf_array_string(g, "tokenizer.ggml.tokens", 403, NULL), "\xe2\x96\x81Once") &&
        tg_gguf_array_int(g, "tokenizer.ggml.token_type", 3, &v) == TG_OK && v == 6 &&
        tg_gguf_array_int(g, "tokenizer.ggml.token_type", 300, &v) == TG_OK && v == 1 &&
        tg_gguf_find_tensor(g, "output.weight") < 0 && tg_gguf_find_tensor(g, "blk.4.ffn_down.weight") >= 0,
        "the converted file's metadata: %s", tg_error());
  tg_llm *m = g ? tg_llm_from_gguf(g, 0) : NULL;
  tg_gguf_close(g);
  tg_llama *ref = tg_llama_load(model, 0);
  if (!m || !ref) {
    CHECK(false, "load: %s", tg_error());
    tg_llm_free(m), tg_llama_free(ref), test_remove_dir(dir);
    return;
  }
  tg_llm_config c = tg_llm_config_of(m);
  CHECK(!strcmp(c.arch, "llama") && c.dim == 64 && c.hidden_dim == 172 && c.n_layers == 5 && c.n_heads == 8 &&
        c.n_kv_heads == 4 && c.head_dim == 8 && c.vocab_size == 512 && c.context == 512 && c.max_seq == 512 &&
        c.tied_output && !c.rope_neox && c.rope_base == 10000 && fabs(c.norm_eps - 1e-5) < 1e-12, "config");
  float a[512], b[512];
  int64_t got[NSTEPS], want[NSTEPS];
  int32_t token = prompt[0];
  for (int pos = 0; pos < NSTEPS; pos++) {
    if (tg_llm_step(m, token, a) != TG_OK || tg_llama_step(ref, token, pos, b) != TG_OK) {
      CHECK(false, "step %d: %s", pos, tg_error());
      break;
    }
    if (pos < 8 || pos == NSTEPS - 1)
      check_close_f32("logits against tg_llama's", a, b, 512, 1e-4, 0, __FILE__, __LINE__);
    token = pos + 1 < nprompt ? prompt[pos + 1] : argmax(a, 512);
    got[pos] = token;
    want[pos] = next_ids[pos];
  }
  check_equal_i64("greedy token against llama2.c's", got, want, NSTEPS, __FILE__, __LINE__);
  CHECK(tg_llm_pos(m) == NSTEPS, "pos %lld", (long long)tg_llm_pos(m));
  /* the prompt prefilled (one chunk padded to 8 or 16 rows), then greedy steps: the same text */
  CHECK(tg_llm_reset(m) == TG_OK && tg_llm_prefill(m, prompt, nprompt, a) == TG_OK, "prefill: %s", tg_error());
  for (int pos = nprompt - 1; pos < NSTEPS; pos++) {
    got[pos] = token = argmax(a, 512);
    if (pos + 1 < NSTEPS && tg_llm_step(m, token, a) != TG_OK) {
      CHECK(false, "step %d: %s", pos, tg_error());
      break;
    }
  }
  check_equal_i64("greedy token after a prefill against llama2.c's", got + nprompt - 1, want + nprompt - 1,
                  NSTEPS - nprompt + 1, __FILE__, __LINE__);
  tg_llm_free(m);
  tg_llama_free(ref);
  test_remove_dir(dir);
}

TEST(test_llm_prefill_equals_single_steps) {
  char dir[PATH_MAX], path[PATH_MAX], model[PATH_MAX];
  if (!stories(TG_GGML_F32, dir, path, model)) return;
  tg_llm *m = tg_llm_load(path, 64);
  if (!m) {
    CHECK(false, "%s", tg_error());
    test_remove_dir(dir);
    return;
  }
  /* 12 tokens: the prompt, then the greedy ones */
  int32_t seq[12];
  for (int i = 0; i < 12; i++) seq[i] = i < nprompt ? prompt[i] : next_ids[i - 1];
  float steps[12][512], pre[512];
  for (int i = 0; i < 12; i++) CHECK(tg_llm_step(m, seq[i], steps[i]) == TG_OK, "step %d: %s", i, tg_error());
  /* one prefill of the prompt; then a prefill of 3 at a nonzero position; then 1-token prefills and steps */
  CHECK(tg_llm_reset(m) == TG_OK && tg_llm_pos(m) == 0, "reset");
  CHECK(tg_llm_prefill(m, seq, nprompt, pre) == TG_OK && tg_llm_pos(m) == nprompt, "prefill: %s", tg_error());
  check_close_f32("prefill of the prompt against its steps", pre, steps[nprompt - 1], 512, 1e-4, 0, __FILE__, __LINE__);
  CHECK(tg_llm_prefill(m, seq + nprompt, 3, pre) == TG_OK, "prefill at %d: %s", nprompt, tg_error());
  check_close_f32("prefill at a nonzero position", pre, steps[nprompt + 2], 512, 1e-4, 0, __FILE__, __LINE__);
  CHECK(tg_llm_prefill(m, seq + nprompt + 3, 1, pre) == TG_OK, "%s", tg_error());
  check_close_f32("prefill of one token", pre, steps[nprompt + 3], 512, 1e-4, 0, __FILE__, __LINE__);
  for (int i = nprompt + 4; i < 12; i++) {
    CHECK(tg_llm_step(m, seq[i], pre) == TG_OK, "%s", tg_error());
    check_close_f32("a step after prefills", pre, steps[i], 512, 1e-4, 0, __FILE__, __LINE__);
  }
  /* refused: past max_seq, bad tokens, n < 1 */
  int32_t many[64] = {0};
  CHECK(tg_llm_prefill(m, many, 64, NULL) == TG_ERR_ARG && strstr(tg_error(), "max_seq 64"), "%s", tg_error());
  CHECK(tg_llm_prefill(m, (int32_t[]){1, 512}, 2, NULL) == TG_ERR_ARG && strstr(tg_error(), "512"), "%s", tg_error());
  CHECK(tg_llm_step(m, -1, pre) == TG_ERR_ARG && tg_llm_prefill(m, many, 0, pre) == TG_ERR_ARG, "bad calls");
  CHECK(tg_llm_pos(m) == 12, "the refused calls moved the position: %lld", (long long)tg_llm_pos(m));
  tg_llm_free(m);
  /* 300 tokens: a prefill in two chunks (256 + 44) against 300 steps */
  m = tg_llm_load(path, 300);
  CHECK_T(m);
  int32_t *toks = malloc(300 * sizeof *toks);
  for (int i = 0; toks && i < 300; i++) toks[i] = i ? (int32_t)((i * 37 + 11) % 512) : 1;
  for (int i = 0; toks && i < 300; i++) CHECK(tg_llm_step(m, toks[i], steps[0]) == TG_OK, "step %d: %s", i, tg_error());
  CHECK(toks && tg_llm_reset(m) == TG_OK && tg_llm_prefill(m, toks, 300, pre) == TG_OK && tg_llm_pos(m) == 300,
        "prefill of 300: %s", tg_error());
  check_close_f32("prefill of 300 tokens in chunks", pre, steps[0], 512, 1e-4, 0, __FILE__, __LINE__);
  free(toks);
  tg_llm_free(m);
  test_remove_dir(dir);
}

/* NSTEPS greedy tokens from the prompt by tg_llm and by the reference on the same file's weights */
static void greedy_pair(const char *path, int64_t *got, int64_t *want) {
  tg_gguf *g = tg_gguf_open(path);
  tg_llm *m = g ? tg_llm_from_gguf(g, NSTEPS) : NULL;
  ref_llm r = {0};
  tg_llm_config c = tg_llm_config_of(m);
  bool ok = m && ref_llm_from_gguf(&r, g, &c);
  tg_gguf_close(g);
  CHECK(ok, "%s: %s", path, tg_error());
  float a[512], b[512];
  int32_t ta = prompt[0], tb = prompt[0];
  for (int pos = 0; ok && pos < NSTEPS; pos++) {
    ok = tg_llm_step(m, ta, a) == TG_OK;
    ref_llm_step(&r, tb, b);
    ta = pos + 1 < nprompt ? prompt[pos + 1] : argmax(a, 512);
    tb = pos + 1 < nprompt ? prompt[pos + 1] : argmax(b, 512);
    got[pos] = ta;
    want[pos] = tb;
  }
  CHECK(ok, "step: %s", tg_error());
  tg_llm_free(m);
  ref_llm_free(&r);
}

TEST(test_llm_stories_quantized_greedy_tokens) {
  static const struct { tg_ggml_type type; const char *name; bool as_f32; } types[] = {
    {TG_GGML_F16, "F16", true}, {TG_GGML_Q8_0, "Q8_0", true}, {TG_GGML_Q4_0, "Q4_0", false}};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    char dir[PATH_MAX], path[PATH_MAX], model[PATH_MAX], what[96];
    if (!stories(types[k].type, dir, path, model)) return;
    int64_t got[NSTEPS], want[NSTEPS], f32[NSTEPS];
    greedy_pair(path, got, want);
    snprintf(what, sizeof what, "%s greedy token against the C reference on its weights", types[k].name);
    check_equal_i64(what, got, want, NSTEPS, __FILE__, __LINE__);
    /* F16 and Q8_0 keep llama2.c's tokens; Q4_0 on a 260K-parameter model does not (nor does the reference) */
    for (int i = 0; i < NSTEPS; i++) f32[i] = next_ids[i];
    snprintf(what, sizeof what, "%s greedy token against llama2.c's (F32)", types[k].name);
    if (types[k].as_f32) check_equal_i64(what, got, f32, NSTEPS, __FILE__, __LINE__);
    test_remove_dir(dir);
  }
}

/* ---- small random-weight models --------------------------------------------------------------------------- */

static uint64_t rng_state;
static float rnd(float scale) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return scale * ((float)(rng_state >> 40) / (float)(1 << 24) * 2 - 1);
}

/* a random tensor (rows 0: 1-d of cols) of type */
static void add(tg_gguf_writer *w, const char *name, int64_t rows, int64_t cols, float scale, float bias,
                tg_ggml_type type) {
  int64_t n = (rows ? rows : 1) * cols;
  float *f = malloc((size_t)n * sizeof *f);
  if (!f) return;
  for (int64_t i = 0; i < n; i++) f[i] = bias + rnd(scale);
  int64_t shape[2] = {rows, cols};
  CHECK(tg_gguf_add_tensor(w, name, rows ? 2 : 1, rows ? shape : shape + 1, f, type) == TG_OK, "%s: %s", name,
        tg_error());
  free(f);
}

typedef struct arch_case {
  const char *arch;
  int64_t dim, hidden, layers, heads, kv_heads, key_length, vocab;
  double base, eps;
  bool biases, qk_norm, tied, freqs;
  tg_ggml_type type;
} arch_case;

static bool write_model(const arch_case *a, const char *path) {
  tg_gguf_writer *w = tg_gguf_writer_new();
  if (!w) return false;
  char k[96];
  int64_t hd = a->key_length ? a->key_length : a->dim / a->heads, q = a->heads * hd, kv = a->kv_heads * hd;
  tg_gguf_set_string(w, "general.architecture", a->arch);
#define KI(suffix, v) (snprintf(k, sizeof k, "%s." suffix, a->arch), tg_gguf_set_int(w, k, TG_GGUF_UINT32, v))
  KI("embedding_length", a->dim); KI("feed_forward_length", a->hidden); KI("block_count", a->layers);
  KI("attention.head_count", a->heads); KI("attention.head_count_kv", a->kv_heads); KI("context_length", 64);
  if (a->key_length) KI("attention.key_length", a->key_length);
#undef KI
  snprintf(k, sizeof k, "%s.rope.freq_base", a->arch);
  tg_gguf_set_float(w, k, TG_GGUF_FLOAT32, a->base);
  snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a->arch);
  tg_gguf_set_float(w, k, TG_GGUF_FLOAT32, a->eps);
  add(w, "token_embd.weight", a->vocab, a->dim, 1, 0, a->type);
  add(w, "output_norm.weight", 0, a->dim, 0.2f, 1, TG_GGML_F32);
  if (!a->tied) add(w, "output.weight", a->vocab, a->dim, 0.3f, 0, a->type);
  if (a->freqs) {   /* llama3's factors: 1 for high frequencies, up to 8 for low ones */
    float f[64];
    for (int64_t i = 0; i < hd / 2; i++) f[i] = 1 + 7 * (float)i / (float)(hd / 2 - 1);
    CHECK(tg_gguf_add_tensor(w, "rope_freqs.weight", 1, (int64_t[]){hd / 2}, f, TG_GGML_F32) == TG_OK, "freqs");
  }
  for (int64_t l = 0; l < a->layers; l++) {
    char n[64];
#define T(suffix, rows, cols, scale, bias, type) \
    (snprintf(n, sizeof n, "blk.%lld." suffix, (long long)l), add(w, n, rows, cols, scale, bias, type))
    T("attn_norm.weight", 0, a->dim, 0.2f, 1, TG_GGML_F32);
    T("attn_q.weight", q, a->dim, 0.3f, 0, a->type);
    T("attn_k.weight", kv, a->dim, 0.3f, 0, a->type);
    T("attn_v.weight", kv, a->dim, 0.3f, 0, a->type);
    T("attn_output.weight", a->dim, q, 0.3f, 0, a->type);
    if (a->biases) {
      T("attn_q.bias", 0, q, 0.5f, 0, TG_GGML_F32);
      T("attn_k.bias", 0, kv, 0.5f, 0, TG_GGML_F32);
      T("attn_v.bias", 0, kv, 0.5f, 0, TG_GGML_F32);
    }
    if (a->qk_norm) {
      T("attn_q_norm.weight", 0, hd, 0.3f, 1, TG_GGML_F32);
      T("attn_k_norm.weight", 0, hd, 0.3f, 1, TG_GGML_F32);
    }
    T("ffn_norm.weight", 0, a->dim, 0.2f, 1, TG_GGML_F32);
    T("ffn_gate.weight", a->hidden, a->dim, 0.3f, 0, a->type);
    T("ffn_down.weight", a->dim, a->hidden, 0.3f, 0, a->type);
    T("ffn_up.weight", a->hidden, a->dim, 0.3f, 0, a->type);
#undef T
  }
  tg_status st = tg_gguf_writer_save(w, path);
  tg_gguf_writer_free(w);
  CHECK(st == TG_OK, "%s: %s", path, tg_error());
  return st == TG_OK;
}

TEST(test_llm_random_llama3_qwen2_qwen3_match_the_reference) {
  static const arch_case cases[] = {
    /* llama3-style: GQA 4/2, rope_freqs, base 500000, separate output */
    {"llama", 64, 96, 2, 4, 2, 0, 40, 500000, 1e-5, false, false, false, true, TG_GGML_F32},
    /* qwen2-style: biases, neox RoPE, tied output, GQA 4/1 */
    {"qwen2", 64, 96, 2, 4, 1, 0, 48, 1e6, 1e-6, true, false, true, false, TG_GGML_F32},
    /* qwen3-style: q/k norms, head_dim 32 from key_length (not dim / heads = 16), GQA 4/2 */
    {"qwen3", 64, 96, 2, 4, 2, 32, 40, 1e6, 1e-6, false, true, true, false, TG_GGML_F32},
    /* llama in Q8_0 (and a Q4_0 qwen2): quantized weights against the reference on their dequantized values */
    {"llama", 64, 96, 2, 4, 2, 0, 40, 10000, 1e-5, false, false, false, false, TG_GGML_Q8_0},
    {"qwen2", 64, 96, 1, 4, 2, 0, 40, 10000, 1e-6, true, false, true, false, TG_GGML_Q4_0},
    /* F16 and BF16 weights (the embedding too: its rows enter the first RMSNorm as float32) */
    {"qwen3", 64, 96, 1, 4, 2, 32, 40, 1e6, 1e-6, false, true, true, false, TG_GGML_F16},
    {"llama", 64, 96, 1, 4, 4, 0, 40, 10000, 1e-5, false, false, false, false, TG_GGML_BF16},
  };
  char dir[PATH_MAX], path[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "no temporary directory");
    return;
  }
  snprintf(path, sizeof path, "%.4000s/r.gguf", dir);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    const arch_case *a = &cases[k];
    rng_state = 1000 + k;
    if (!write_model(a, path)) break;
    tg_gguf *g = tg_gguf_open(path);
    tg_llm *m = g ? tg_llm_from_gguf(g, 16) : NULL;
    tg_llm_config c = tg_llm_config_of(m);
    ref_llm r = {0};
    bool ok = m && ref_llm_from_gguf(&r, g, &c);
    tg_gguf_close(g);
    CHECK(ok, "case %zu (%s): %s", k, a->arch, tg_error());
    if (!ok) {
      tg_llm_free(m);
      ref_llm_free(&r);
      continue;
    }
    CHECK(c.head_dim == (a->key_length ? a->key_length : 16) && c.tied_output == a->tied &&
          c.rope_neox == (a->arch[0] == 'q') && c.max_seq == 16 && c.context == 64, "case %zu: config", k);
    /* 5 tokens prefilled, then 4 steps; the reference steps through all */
    int32_t toks[9] = {1, 7, 3, 30, 2, 11, 0, 39, 5};
    float got[64], want[64];
    char what[96];
    CHECK(tg_llm_prefill(m, toks, 5, got) == TG_OK, "case %zu prefill: %s", k, tg_error());
    for (int i = 0; i < 9; i++) {
      ref_llm_step(&r, toks[i], want);
      if (i >= 5) CHECK(tg_llm_step(m, toks[i], got) == TG_OK, "case %zu step: %s", k, tg_error());
      if (i < 4) continue;
      snprintf(what, sizeof what, "case %zu (%s, type %d) logits at %d", k, a->arch, (int)a->type, i);
      check_close_f32(what, got, want, c.vocab_size, 1e-4, 1e-4, __FILE__, __LINE__);
    }
    tg_llm_free(m);
    ref_llm_free(&r);
  }
  test_remove_dir(dir);
}

TEST(test_llm_refuses_bad_files) {
  char dir[PATH_MAX], path[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "no temporary directory");
    return;
  }
  snprintf(path, sizeof path, "%.4000s/bad.gguf", dir);
  arch_case a = {"llama", 64, 96, 1, 4, 2, 0, 40, 10000, 1e-5, false, false, true, false, TG_GGML_F32};
  a.arch = "gpt2";
  rng_state = 1;
  if (write_model(&a, path))
    CHECK(!tg_llm_load(path, 0) && strstr(tg_error(), "gpt2"), "an unknown architecture: %s", tg_error());
  a.arch = "llama";
  a.heads = 3;   /* 64 / 3 heads, 2 KV heads */
  if (write_model(&a, path)) CHECK(!tg_llm_load(path, 0) && strstr(tg_error(), "heads"), "bad heads: %s", tg_error());
  a.heads = 128;   /* 64 / 128 heads: a head size of 0 */
  a.kv_heads = 128;
  if (write_model(&a, path))
    CHECK(!tg_llm_load(path, 0) && strstr(tg_error(), "heads of 0"), "head size 0: %s", tg_error());
  a.heads = 4;
  a.kv_heads = 2;
  a.qk_norm = true;   /* fine for llama: extra tensors are ignored */
  if (write_model(&a, path)) {
    tg_llm *m = tg_llm_load(path, 0);
    CHECK(m && tg_llm_config_of(m).max_seq == 64, "a llama with extra tensors: %s", tg_error());
    CHECK(!tg_llm_load(path, 65) && strstr(tg_error(), "context length 64"), "max_seq 65: %s", tg_error());
    tg_llm_free(m);
  }
  a.arch = "qwen2";   /* no biases */
  if (write_model(&a, path))
    CHECK(!tg_llm_load(path, 0) && strstr(tg_error(), "attn_q.bias"), "qwen2 without biases: %s", tg_error());
  CHECK(!tg_llm_load("/nonexistent/x.gguf", 0) && strstr(tg_error(), "/nonexistent/x.gguf"), "%s", tg_error());
  CHECK(!tg_llm_load(NULL, 0) && !tg_llm_from_gguf(NULL, 0) && tg_llm_pos(NULL) == -1 && tg_llm_kernels(NULL) == 0,
        "NULLs");
  tg_llm_free(NULL);
  test_remove_dir(dir);
}

/* every allocation of loading a small model fails in turn: an error (TG_ERR_NOMEM, or what the failed
 * allocation made of it), nothing leaks (LeakSanitizer); the run without a failure steps */
TEST(test_llm_load_survives_every_allocation_failure) {
  char dir[PATH_MAX], path[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "no temporary directory");
    return;
  }
  snprintf(path, sizeof path, "%.4000s/r.gguf", dir);
  arch_case a = {"qwen3", 32, 64, 1, 2, 1, 16, 40, 10000, 1e-6, false, true, false, false, TG_GGML_Q8_0};
  rng_state = 5;
  tg_gguf *g = write_model(&a, path) ? tg_gguf_open(path) : NULL;
  CHECK_T(g);
  int sites = 0;
  for (int64_t k = 1; k < 100000; k++) {
    tg_error_clear();
    mem_fail_at(k);
    tg_llm *m = tg_llm_from_gguf(g, 8);
    bool fired = mem_failed();
    mem_fail_at(0);
    if (!fired) {
      float lg[40];
      CHECK(m && tg_llm_step(m, 3, lg) == TG_OK, "no failure, yet: %s", tg_error());
      tg_llm_free(m);
      break;
    }
    sites++;
    CHECK(m || (tg_error_status() != TG_OK && tg_error()[0]), "allocation %lld failed: no error", (long long)k);
    tg_llm_free(m);
  }
  CHECK(sites > 20, "only %d allocation sites", sites);
  tg_gguf_close(g);
  test_remove_dir(dir);
}

/* got against want within 1e-5 of the largest |want| (float32 sums in another order: the kernels of 16 rows and
 * of 9 split their loops differently) */
static void check_logits(const char *what, const float *got, const float *want, int64_t n) {
  double big = 0;
  for (int64_t i = 0; i < n; i++) big = fabs(want[i]) > big ? fabs(want[i]) : big;
  check_close_f32(what, got, want, n, 1e-5 * (big > 1 ? big : 1), 0, __FILE__, __LINE__);
}

/* prefill chunks padded to 8, 16, .. rows give the logits of unpadded ones (llm.h's exact_chunks) for several
 * lengths, at position 0 and after earlier tokens, and a prompt of another length in a bucket already run
 * compiles nothing; the steps after a padded prefill see the cache as after an unpadded one. Near max_seq the
 * chunk runs unpadded. */
TEST(test_llm_prefill_buckets_equal_unpadded) {
  char dir[PATH_MAX], path[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "no temporary directory");
    return;
  }
  snprintf(path, sizeof path, "%.4000s/r.gguf", dir);
  arch_case a = {"llama", 64, 96, 2, 4, 2, 0, 40, 10000, 1e-5, false, false, true, false, TG_GGML_F32};
  rng_state = 77;
  tg_llm *pad = write_model(&a, path) ? tg_llm_load(path, 48) : NULL, *exact = tg_llm_load(path, 48);
  if (!pad || !exact) {
    CHECK(false, "load: %s", tg_error());
    tg_llm_free(pad), tg_llm_free(exact), test_remove_dir(dir);
    return;
  }
  exact->exact_chunks = true;
  int32_t toks[48];
  for (int i = 0; i < 48; i++) toks[i] = (int32_t)((i * 17 + 3) % 40);
  /* (first, then): a prompt of `first` tokens, then `then` more in a second prefill; then 2 steps */
  static const int cases[][2] = {{2, 3}, {5, 9}, {8, 1}, {9, 17}, {17, 5}, {33, 12}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    float got[40], want[40];
    char what[96];
    int first = cases[k][0], then = cases[k][1];
    CHECK(tg_llm_reset(pad) == TG_OK && tg_llm_reset(exact) == TG_OK, "reset: %s", tg_error());
    CHECK(tg_llm_prefill(pad, toks, first, got) == TG_OK && tg_llm_prefill(exact, toks, first, want) == TG_OK,
          "prefill %d: %s", first, tg_error());
    snprintf(what, sizeof what, "a padded prefill of %d against an unpadded one", first);
    check_logits(what, got, want, 40);
    CHECK(tg_llm_prefill(pad, toks + first, then, got) == TG_OK &&
          tg_llm_prefill(exact, toks + first, then, want) == TG_OK, "prefill %d at %d: %s", then, first, tg_error());
    snprintf(what, sizeof what, "a padded prefill of %d at %d", then, first);
    check_logits(what, got, want, 40);
    for (int s = 0; s < 2; s++) {
      int32_t t = toks[first + then + s];
      CHECK(tg_llm_step(pad, t, got) == TG_OK && tg_llm_step(exact, t, want) == TG_OK, "step: %s", tg_error());
      snprintf(what, sizeof what, "step %d after prefills of %d and %d", s, first, then);
      check_logits(what, got, want, 40);
    }
  }
  /* 19 and 30 tokens (bucket 32, as 17 above), 6 (bucket 8, as 5): nothing new to compile */
  float lg[40];
  CHECK(tg_llm_reset(pad) == TG_OK, "reset");
  uint64_t compiled = tg_get_stats().kernels_compiled, kernels_cached = tg_get_stats().disk_cache_hits;
  CHECK(tg_llm_prefill(pad, toks, 19, lg) == TG_OK && tg_llm_prefill(pad, toks + 19, 6, lg) == TG_OK &&
        tg_llm_reset(pad) == TG_OK && tg_llm_prefill(pad, toks, 30, lg) == TG_OK, "prefills: %s", tg_error());
  CHECK(tg_get_stats().kernels_compiled == compiled && tg_get_stats().disk_cache_hits == kernels_cached,
        "prompts of 19, 6 and 30 tokens compiled %llu kernels and loaded %llu",
        (unsigned long long)(tg_get_stats().kernels_compiled - compiled),
        (unsigned long long)(tg_get_stats().disk_cache_hits - kernels_cached));
  /* near max_seq (48): 8 tokens at 40 fit 8 rows (padded: none); 7 at 41 would not fit 8: unpadded */
  float want[40];
  CHECK(tg_llm_reset(pad) == TG_OK && tg_llm_reset(exact) == TG_OK && tg_llm_prefill(pad, toks, 40, lg) == TG_OK &&
        tg_llm_prefill(exact, toks, 40, want) == TG_OK, "prefill 40: %s", tg_error());
  CHECK(tg_llm_prefill(pad, toks + 40, 1, lg) == TG_OK && tg_llm_prefill(exact, toks + 40, 1, want) == TG_OK &&
        tg_llm_prefill(pad, toks + 41, 7, lg) == TG_OK && tg_llm_prefill(exact, toks + 41, 7, want) == TG_OK &&
        tg_llm_pos(pad) == 48, "prefill to max_seq: %s", tg_error());
  check_logits("a prefill ending at max_seq", lg, want, 40);
  tg_llm_free(pad);
  tg_llm_free(exact);
  test_remove_dir(dir);
}
