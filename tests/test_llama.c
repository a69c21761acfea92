/* test_llama.c — the real stories260K model decoded greedily through the JIT gives llama2.c's tokens
 * (tests/fixtures/stories260K_greedy.txt, from run.c), replays match eager steps, and malformed checkpoints
 * and tokenizers are refused with messages that name the file and the problem. The model-file tests skip
 * with a note when stories260K is not on this machine. */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "uop/env.h"

#define STEPS 40

typedef struct fixture { int32_t prompt[16], next[128]; int nprompt, nnext; char text[1024]; } fixture;

/* space-separated integers after "key: " on one line of s into out (at most cap); the count */
static int ints_after(const char *s, const char *key, int32_t *out, int cap) {
  const char *p = strstr(s, key);
  int n = 0;
  if (!p) return 0;
  p += strlen(key);
  while (n < cap && *p && *p != '\n') {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p) break;
    out[n++] = (int32_t)v;
    p = end;
  }
  return n;
}

static bool fixture_load(fixture *f) {
  const char *file = __FILE__, *slash = strrchr(file, '/');
  char path[PATH_MAX], buf[8192];
  snprintf(path, sizeof path, "%.*sfixtures/stories260K_greedy.txt", slash ? (int)(slash - file + 1) : 0, file);
  FILE *fp = fopen(path, "rb");
  size_t n = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
  if (fp) fclose(fp);
  buf[n] = 0;
  memset(f, 0, sizeof *f);
  f->nprompt = ints_after(buf, "\nprompt_ids: ", f->prompt, 16);
  f->nnext = ints_after(buf, "\nnext: ", f->next, 128);
  const char *t = strstr(buf, "\ntext: ");
  for (size_t i = 0, k = 0; t && t[7 + i] && t[7 + i] != '\n' && k + 1 < sizeof f->text; i++) {
    bool nl = t[7 + i] == '\\' && t[8 + i] == 'n';  /* the fixture writes newlines as \n */
    f->text[k++] = nl ? '\n' : t[7 + i];
    i += nl;
  }
  CHECK(f->nprompt > 0 && f->nnext >= STEPS && t, "cannot read %s (run from the repository root)", path);
  return f->nprompt > 0 && f->nnext >= STEPS && t;
}

/* the model and tokenizer paths, or false after printing why the test is skipped */
static bool find_model(char *model, char *tok) {
  if (tg_data_find(NULL, "stories260K", "stories260K.bin", model, PATH_MAX) != TG_OK ||
      tg_data_find(NULL, "stories260K", "tok512.bin", tok, PATH_MAX) != TG_OK) {
    const char *looked = strstr(tg_error(), "looked in ");
    test_skip("stories260K not found in %s", looked ? looked + 10 : tg_error());
    tg_error_clear();
    return false;
  }
  return true;
}

static int32_t argmax(const float *x, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = (int32_t)i;
  return best;
}

TEST(test_llama_greedy_tokens_match_llama2c) {
  char model[PATH_MAX], tokp[PATH_MAX];
  fixture f;
  if (!find_model(model, tokp) || !fixture_load(&f)) return;
  tg_llama *m = tg_llama_load(model, 0);
  CHECK_T(m);
  tg_llama_config c = tg_llama_config_of(m);
  CHECK(c.dim == 64 && c.hidden_dim == 172 && c.n_layers == 5 && c.n_heads == 8 && c.n_kv_heads == 4 &&
        c.vocab_size == 512 && c.seq_len == 512, "config %lld %lld %lld %lld %lld %lld %lld", (long long)c.dim,
        (long long)c.hidden_dim, (long long)c.n_layers, (long long)c.n_heads, (long long)c.n_kv_heads,
        (long long)c.vocab_size, (long long)c.seq_len);
  tg_tokenizer *tok = tg_tokenizer_load(tokp, c.vocab_size);
  if (!tok) tg_llama_free(m);
  CHECK_T(tok);
  int32_t ids[32];
  int64_t n = tg_tokenizer_encode(tok, "Once upon a time", true, false, ids, 32);
  CHECK(n == f.nprompt && !memcmp(ids, f.prompt, (size_t)n * 4), "prompt encodes to %lld tokens: %d %d %d %d %d",
        (long long)n, ids[0], ids[1], ids[2], ids[3], ids[4]);
  float logits[512];
  int32_t got[STEPS], token = f.prompt[0];
  char text[1024] = "";
  uint64_t compiled = 0, schedules = 0;
  for (int pos = 0; pos < STEPS; pos++) {
    if (pos == 2) {
      compiled = tg_get_stats().kernels_compiled;
      schedules = tg_get_stats().schedules;
    }
    if (tg_llama_step(m, token, pos, logits) != TG_OK) {
      CHECK(false, "step %d: %s", pos, tg_error());
      break;
    }
    got[pos] = pos + 1 < f.nprompt ? f.prompt[pos + 1] : argmax(logits, 512);
    const char *piece = tg_tokenizer_decode(tok, token, got[pos]);
    if (piece && strlen(text) + strlen(piece) < sizeof text) strcat(text, piece);
    token = got[pos];
  }
  int64_t g[STEPS], w[STEPS];
  for (int i = 0; i < STEPS; i++) g[i] = got[i], w[i] = f.next[i];
  check_equal_i64("greedy token", g, w, STEPS, __FILE__, __LINE__);
  CHECK(!strncmp(text, f.text, strlen(text)) && strlen(text) > 100, "text differs from run.c's:\n%s\n%s", text, f.text);
  const char *jit = getenv("JIT");
  if (!jit || strcmp(jit, "0")) {
    CHECK(tg_llama_kernels(m) > 0, "no kernels captured");
    CHECK(tg_get_stats().kernels_compiled == compiled && tg_get_stats().schedules == schedules,
          "replays compiled %llu kernels and scheduled %llu times",
          (unsigned long long)(tg_get_stats().kernels_compiled - compiled),
          (unsigned long long)(tg_get_stats().schedules - schedules));
  }
  /* the caches emptied, the same prompt gives the same logits */
  float again[512];
  CHECK(tg_llama_reset(m) == TG_OK && tg_llama_step(m, f.prompt[0], 0, again) == TG_OK &&
        tg_llama_step(m, f.prompt[1], 1, again) == TG_OK && argmax(again, 512) == f.next[1],
        "after reset: %s", tg_error());
  tg_tokenizer_free(tok);
  tg_llama_free(m);
}

TEST(test_llama_jit_replay_matches_eager_logits) {
  char model[PATH_MAX], tokp[PATH_MAX];
  fixture f;
  if (!find_model(model, tokp) || !fixture_load(&f)) return;
  tg_llama *jit = tg_llama_load(model, 0), *eager = tg_llama_load(model, 0);
  if (!jit || !eager) {
    CHECK(false, "%s", tg_error());
    tg_llama_free(jit);
    tg_llama_free(eager);
    return;
  }
  const char *old = getenv("JIT");
  char *keep = old ? strdup(old) : NULL;
  float a[512], b[512];
  int32_t token = f.prompt[0];
  for (int pos = 0; pos < 8; pos++) {
    unsetenv("JIT");
    env_reload();
    tg_status sa = tg_llama_step(jit, token, pos, a);
    setenv("JIT", "0", 1);
    env_reload();
    tg_status sb = tg_llama_step(eager, token, pos, b);
    if (sa != TG_OK || sb != TG_OK) {
      CHECK(false, "pos %d: %s", pos, tg_error());
      break;
    }
    /* the same kernels on the same buffers' values: the replay is bit-identical to the eager step */
    if (memcmp(a, b, sizeof a)) CHECK_CLOSE("replayed vs eager logits", a, b, 512);
    CHECK(!memcmp(a, b, sizeof a), "pos %d: replayed logits differ from eager ones", pos);
    token = f.next[pos];
  }
  if (keep) setenv("JIT", keep, 1);
  else unsetenv("JIT");
  env_reload();
  free(keep);
  CHECK(tg_llama_kernels(jit) > 0 && tg_llama_kernels(eager) == 0, "kernels captured: jit %d, eager %d",
        tg_llama_kernels(jit), tg_llama_kernels(eager));
  /* positions out of order would add a second row into the cache: refused */
  CHECK(tg_llama_step(jit, 1, 3, a) == TG_ERR_ARG && strstr(tg_error(), "position 8"), "%s", tg_error());
  tg_error_clear();
  tg_llama_free(jit);
  tg_llama_free(eager);
}

/* ---- malformed files (no model needed) ------------------------------------------------------------------ */

static bool write_file(const char *path, const void *a, size_t na, size_t extra_floats) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return false;
  bool ok = fwrite(a, 1, na, fp) == na;
  float z = 0.01f;
  for (size_t i = 0; ok && i < extra_floats; i++) ok = fwrite(&z, 4, 1, fp) == 1;
  return fclose(fp) == 0 && ok;
}

TEST(test_llama_refuses_malformed_checkpoints) {
  char dir[PATH_MAX], path[PATH_MAX + 16];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  snprintf(path, sizeof path, "%s/m.bin", dir);
  /* dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 10, seq 4: head 4, kv_dim 4 */
  int32_t h[7] = {8, 16, 1, 2, 1, 10, 4};
  size_t floats = 10 * 8 + (2 * 8 + 2 * 64 + 2 * 8 * 4 + 3 * 8 * 16) + 8 + 4 * 4;
  CHECK(write_file(path, h, sizeof h, floats), "write");
  tg_llama *m = tg_llama_load(path, 0);
  CHECK(m, "a well-formed small checkpoint refused: %s", tg_error());
  if (m) {
    float lg[10];
    CHECK(tg_llama_step(m, 3, 0, lg) == TG_OK && isfinite(lg[0]), "step: %s", tg_error());
    CHECK(tg_llama_step(m, 10, 1, lg) == TG_ERR_ARG && strstr(tg_error(), "token 10"), "token 10: %s", tg_error());
    tg_error_clear();
    tg_llama_free(m);
  }
  struct { int32_t h[7]; long extra; const char *want; } bad[] = {
    {{8, 16, 1, 2, 1, 10, 4}, -1, "truncated"},
    {{8, 16, 1, 2, 1, 10, 4}, 1, "bytes, but its header describes"},
    {{8, 16, 1, 2, 1, -10, 4}, 0, "truncated"},          /* an unshared classifier needs 80 more floats */
    {{8, 16, 1, 0, 1, 10, 4}, 0, "n_heads = 0"},
    {{8, 16, 1, 3, 1, 10, 4}, 0, "even head size"},
    {{8, 16, 1, 2, 3, 10, 4}, 0, "multiple of n_kv_heads"},
    {{0x616b3432, 2, 0, 0, 0, 0, 0}, 0, "versioned llama2.c export"},
    {{8, 16, 1, 2, 1, 10, 1 << 30}, 0, "seq_len"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(write_file(path, bad[i].h, sizeof bad[i].h, (size_t)((long)floats + bad[i].extra)), "write");
    tg_error_clear();
    m = tg_llama_load(path, 0);
    CHECK(!m && strstr(tg_error(), bad[i].want) && strstr(tg_error(), path), "case %zu: %s", i, tg_error());
    tg_llama_free(m);
  }
  CHECK(write_file(path, h, 20, 0), "write");
  CHECK(!tg_llama_load(path, 0) && strstr(tg_error(), "header"), "short header: %s", tg_error());
  CHECK(!tg_llama_load("/nonexistent/m.bin", 0) && strstr(tg_error(), "/nonexistent/m.bin") &&
        strstr(tg_error(), "No such file"), "%s", tg_error());
  /* a missing file: every place looked in is named */
  char found[PATH_MAX], want[PATH_MAX + 32];
  const char *old = getenv("TG_DATA");
  char *keep = old ? strdup(old) : NULL;
  setenv("TG_DATA", dir, 1);
  CHECK(tg_data_find("/nonexistent-dir", "stories260K", "none.bin", found, sizeof found) == TG_ERR_IO, "found");
  snprintf(want, sizeof want, "%s/stories260K, ", dir);
  CHECK(strstr(tg_error(), "none.bin not found") && strstr(tg_error(), "/nonexistent-dir, ") && strstr(tg_error(), want) &&
        strstr(tg_error(), "../shared/data/stories260K"), "%s", tg_error());
  CHECK(tg_data_find(NULL, ".", "m.bin", found, sizeof found) == TG_OK && strstr(found, dir), "$TG_DATA/./m.bin: %s",
        tg_error());
  if (keep) setenv("TG_DATA", keep, 1);
  else unsetenv("TG_DATA");
  free(keep);
  tg_error_clear();
  test_remove_dir(dir);
}

TEST(test_tokenizer_encodes_merges_and_refuses_bad_files) {
  char dir[PATH_MAX], path[PATH_MAX + 16];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  snprintf(path, sizeof path, "%s/t.bin", dir);
  /* <unk> <s> </s> then " ", "a", "b", "ab", " ab", "<0x41>": merges pick the best score first */
  const char *pieces[] = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", "ab", " ab", "<0x41>"};
  float scores[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f, 0};
  FILE *fp = fopen(path, "wb");
  int32_t maxlen = 6;
  bool ok = fp && fwrite(&maxlen, 4, 1, fp) == 1;
  for (int i = 0; ok && i < 9; i++) {
    int32_t len = (int32_t)strlen(pieces[i]);
    ok = fwrite(&scores[i], 4, 1, fp) == 1 && fwrite(&len, 4, 1, fp) == 1 && fwrite(pieces[i], 1, (size_t)len, fp) == (size_t)len;
  }
  CHECK(fp && fclose(fp) == 0 && ok, "write");
  tg_tokenizer *t = tg_tokenizer_load(path, 9);
  CHECK_T(t);
  int32_t ids[16];
  /* " " "a" "b" -> "ab" (-0.5) beats " a" (absent) -> " ab" (-0.25); 'c' is not in, and its byte token
   * 'c' + 3 is past this vocabulary: <unk> */
  int64_t n = tg_tokenizer_encode(t, "abc", true, true, ids, 16);
  CHECK(n == 4 && ids[0] == 1 && ids[1] == 7 && ids[2] == 0 && ids[3] == 2, "encode: %lld: %d %d %d %d",
        (long long)n, ids[0], ids[1], ids[2], ids[3]);
  CHECK(tg_tokenizer_encode(t, "abc", true, true, ids, 5) < 0 && strstr(tg_error(), "room"), "small cap accepted");
  tg_error_clear();
  CHECK(!strcmp(tg_tokenizer_decode(t, 1, 7), "ab") && !strcmp(tg_tokenizer_decode(t, 5, 7), " ab") &&
        !strcmp(tg_tokenizer_decode(t, 5, 8), "A"), "decode");
  tg_tokenizer_free(t);
  CHECK(!tg_tokenizer_load(path, 10) && strstr(tg_error(), "truncated") && strstr(tg_error(), path),
        "a vocabulary larger than the file: %s", tg_error());
  CHECK(!tg_tokenizer_load(path, 8) && strstr(tg_error(), "bytes after"), "trailing bytes: %s", tg_error());
  maxlen = 2;
  fp = fopen(path, "r+b");
  CHECK(fp && fwrite(&maxlen, 4, 1, fp) == 1 && fclose(fp) == 0, "rewrite");
  CHECK(!tg_tokenizer_load(path, 9) && strstr(tg_error(), "length 5"), "a piece above the max length: %s", tg_error());
  tg_error_clear();
  test_remove_dir(dir);
}
