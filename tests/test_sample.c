/* test_sample.c — the sampler (src/nn/sample.c): greedy and top-k 1 are the argmax (ties: the lower id); top-k,
 * top-p and min-p keep exactly the candidates a hand-computed softmax says they should, with the probabilities
 * it gives; the draws follow those probabilities; a seed fixes the sequence; the repetition penalty is
 * llama.cpp's (a positive logit divided, a negative one multiplied, once per distinct token of the window). */
#include <stdlib.h>

#include "test.h"

/* logits whose softmax is exactly p (up to rounding): log p */
static void logits_of(const double *p, int n, float *out) {
  for (int i = 0; i < n; i++) out[i] = (float)log(p[i]);
}

/* the softmax of x[ids[i]] / t over the listed ids, in double: the reference */
static void ref_softmax(const float *x, const int *ids, int n, double t, double *out) {
  double mx = -INFINITY, sum = 0;
  for (int i = 0; i < n; i++) mx = fmax(mx, x[ids[i]]);
  for (int i = 0; i < n; i++) sum += out[i] = exp((x[ids[i]] - mx) / t);
  for (int i = 0; i < n; i++) out[i] /= sum;
}

/* the sampler with o over the logits keeps exactly want_ids (in that order) with the softmax at o.temperature */
static void check_kept(const char *what, tg_sampler_opts o, const float *logits, int vocab, const int *want_ids,
                       int nwant) {
  tg_sampler *s = tg_sampler_new(o, vocab);
  CHECK(s, "%s: tg_sampler_new: %s", what, tg_error());
  if (!s) return;
  int32_t ids[64];
  float probs[64];
  double want[64];
  int64_t n = tg_sampler_probs(s, logits, ids, probs);
  CHECK(n == nwant, "%s: %lld candidates, want %d", what, (long long)n, nwant);
  if (n == nwant) {
    ref_softmax(logits, want_ids, nwant, o.temperature, want);
    for (int i = 0; i < nwant; i++) {
      CHECK(ids[i] == want_ids[i], "%s: candidate %d is %d, want %d", what, i, ids[i], want_ids[i]);
      CHECK(fabs(probs[i] - want[i]) < 1e-6, "%s: p[%d] = %.8f, want %.8f", what, i, probs[i], want[i]);
    }
  }
  tg_sampler_free(s);
}

/* no cut at all: every cut off, temperature t */
static tg_sampler_opts plain(double t) {
  tg_sampler_opts o = tg_sampler_defaults();
  o.temperature = t;
  o.top_k = 0;
  o.top_p = 1;
  o.min_p = 0;
  return o;
}

TEST(test_sample_greedy_is_argmax_lowest_id_on_ties) {
  float logits[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 3.0f};
  tg_sampler_opts o = tg_sampler_defaults();
  o.temperature = 0;
  tg_sampler *s = tg_sampler_new(o, 6);
  CHECK_T(s);
  for (int i = 0; i < 5; i++) CHECK(tg_sampler_sample(s, logits) == 1, "greedy picked another token than 1");
  int32_t id;
  float p;
  CHECK(tg_sampler_probs(s, logits, &id, &p) == 1 && id == 1 && p == 1.0f, "greedy: one candidate, 1 with p 1");
  tg_sampler_free(s);
  /* top-k 1 at any temperature is the argmax too */
  o = plain(1.5);
  o.top_k = 1;
  s = tg_sampler_new(o, 6);
  CHECK_T(s);
  for (int i = 0; i < 20; i++) CHECK(tg_sampler_sample(s, logits) == 1, "top_k 1 picked another token than 1");
  tg_sampler_free(s);
}

TEST(test_sample_top_k_keeps_the_k_highest) {
  float logits[7] = {1, 3, 2, 5, 4, 0, 4};
  tg_sampler_opts o = plain(1);
  o.top_k = 3;
  check_kept("top_k 3", o, logits, 7, (int[]){3, 4, 6}, 3);
  o.top_k = 4;
  o.temperature = 0.5;
  check_kept("top_k 4 t 0.5", o, logits, 7, (int[]){3, 4, 6, 1}, 4);
  o.top_k = 100;  /* more than the vocabulary: all */
  o.temperature = 1;
  check_kept("top_k 100", o, logits, 7, (int[]){3, 4, 6, 1, 2, 0, 5}, 7);
}

TEST(test_sample_top_p_keeps_the_token_that_reaches_p) {
  /* probabilities 0.4 0.3 0.2 0.1 (ids 2 0 3 1) */
  float logits[4];
  logits_of((double[]){0.3, 0.1, 0.4, 0.2}, 4, logits);
  tg_sampler_opts o = plain(1);
  o.top_p = 0.65;  /* 0.4 < 0.65 <= 0.7 */
  check_kept("top_p 0.65", o, logits, 4, (int[]){2, 0}, 2);
  o.top_p = 0.75;  /* 0.7 < 0.75 <= 0.9 */
  check_kept("top_p 0.75", o, logits, 4, (int[]){2, 0, 3}, 3);
  o.top_p = 0.35;  /* the first token reaches it */
  check_kept("top_p 0.35", o, logits, 4, (int[]){2}, 1);
  o.top_p = 0.0;
  check_kept("top_p 0", o, logits, 4, (int[]){2}, 1);
  o.top_p = 0.5;  /* over all four: 0.4 < 0.5, keeps two */
  check_kept("top_p 0.5", o, logits, 4, (int[]){2, 0}, 2);
  o.top_k = 2;  /* after top-k 2, p renormalized over two: 0.4/0.7 = 0.571 >= 0.5 keeps one (llama.cpp's order) */
  check_kept("top_k 2 top_p 0.5", o, logits, 4, (int[]){2}, 1);
  o.top_k = 0;
  o.top_p = 0.65;
  o.temperature = 2;  /* the cut is made at temperature 1, as llama.cpp applies the temperature last */
  check_kept("top_p 0.65 t 2", o, logits, 4, (int[]){2, 0}, 2);
}

TEST(test_sample_min_p_keeps_tokens_near_the_best) {
  float logits[5];
  logits_of((double[]){0.1, 0.3, 0.4, 0.15, 0.05}, 5, logits);
  tg_sampler_opts o = plain(1);
  o.min_p = 0.6;  /* >= 0.24: 0.4 0.3 */
  check_kept("min_p 0.6", o, logits, 5, (int[]){2, 1}, 2);
  o.min_p = 0.3;  /* >= 0.12: 0.4 0.3 0.15 */
  check_kept("min_p 0.3", o, logits, 5, (int[]){2, 1, 3}, 3);
  o.min_p = 1.0;  /* only the best */
  check_kept("min_p 1", o, logits, 5, (int[]){2}, 1);
  o.min_p = 0.1;  /* >= 0.04: all */
  check_kept("min_p 0.1", o, logits, 5, (int[]){2, 1, 3, 0, 4}, 5);
  o.min_p = 0.3;
  o.top_p = 0.75;  /* top-p first: 0.4 0.3 0.15 (0.85), then min-p 0.12: the same three */
  o.top_k = 2;     /* top-k first of all: two */
  check_kept("top_k 2 top_p 0.75 min_p 0.3", o, logits, 5, (int[]){2, 1}, 2);
}

TEST(test_sample_draws_follow_the_probabilities) {
  const double p[5] = {0.05, 0.5, 0.15, 0.3, 0.0};
  float logits[5];
  logits_of(p, 5, logits);  /* log 0 = -inf: never drawn */
  tg_sampler_opts o = plain(1);
  o.seed = 1234;
  tg_sampler *s = tg_sampler_new(o, 5);
  CHECK_T(s);
  enum { N = 40000 };
  int count[5] = {0};
  for (int i = 0; i < N; i++) {
    int32_t t = tg_sampler_sample(s, logits);
    CHECK(t >= 0 && t < 5, "draw %d: token %d", i, t);
    if (t >= 0 && t < 5) count[t]++;
  }
  /* 5 standard deviations of a frequency (at most 0.0025 for N = 40000): a fixed seed makes this exact anyway */
  for (int i = 0; i < 5; i++) {
    double f = (double)count[i] / N, sd = sqrt(p[i] * (1 - p[i]) / N);
    CHECK(fabs(f - p[i]) <= 5 * sd + 1e-9, "token %d drawn %.4f of the time, p %.4f", i, f, p[i]);
  }
  tg_sampler_free(s);

  /* at temperature 0.5 the probabilities are p^2 normalized: 0.0025 0.25 0.0225 0.09 -> /0.365 */
  o.temperature = 0.5;
  s = tg_sampler_new(o, 5);
  CHECK_T(s);
  memset(count, 0, sizeof count);
  for (int i = 0; i < N; i++) {
    int32_t t = tg_sampler_sample(s, logits);
    if (t >= 0 && t < 5) count[t]++;
  }
  for (int i = 0; i < 5; i++) {
    double q = p[i] * p[i] / 0.365, f = (double)count[i] / N, sd = sqrt(q * (1 - q) / N);
    CHECK(fabs(f - q) <= 5 * sd + 1e-9, "t 0.5: token %d drawn %.4f of the time, p %.4f", i, f, q);
  }
  tg_sampler_free(s);
}

/* n tokens drawn with seed from a fixed 300-token distribution */
static void draw_seq(uint64_t seed, int n, int32_t *out) {
  float logits[300];
  for (int i = 0; i < 300; i++) logits[i] = (float)sin(i * 0.37) * 3.0f;
  tg_sampler_opts o = tg_sampler_defaults();
  o.seed = seed;
  o.repeat_penalty = 1.1;
  tg_sampler *s = tg_sampler_new(o, 300);
  for (int i = 0; i < n; i++) out[i] = s ? tg_sampler_sample(s, logits) : -1;
  tg_sampler_free(s);
}

TEST(test_sample_same_seed_same_sequence) {
  int32_t a[64], b[64], c[64];
  draw_seq(42, 64, a);
  draw_seq(42, 64, b);
  draw_seq(43, 64, c);
  bool differ = false;
  for (int i = 0; i < 64; i++) {
    CHECK(a[i] == b[i] && a[i] >= 0, "draw %d: %d then %d with the same seed", i, a[i], b[i]);
    differ |= a[i] != c[i];
  }
  CHECK(differ, "seeds 42 and 43 gave the same 64 tokens");
  /* reset: the same sequence again from the same sampler */
  float logits[3] = {0, 0, 0};
  tg_sampler_opts o = plain(1);
  o.seed = 7;
  tg_sampler *s = tg_sampler_new(o, 3);
  CHECK_T(s);
  int32_t first[16];
  for (int i = 0; i < 16; i++) first[i] = tg_sampler_sample(s, logits);
  CHECK(tg_sampler_reset(s) == TG_OK, "reset: %s", tg_error());
  for (int i = 0; i < 16; i++) CHECK(tg_sampler_sample(s, logits) == first[i], "after reset, draw %d differs", i);
  tg_sampler_free(s);
}

TEST(test_sample_repeat_penalty_as_llama_cpp) {
  float logits[5] = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f};
  tg_sampler_opts o = plain(1);
  o.repeat_penalty = 2.0;
  o.repeat_last_n = 3;
  tg_sampler *s = tg_sampler_new(o, 5);
  CHECK_T(s);
  /* window 3: 2 0 1 0 leaves 0 1 0, so 0 (twice: once penalized) and 1 */
  int32_t acc[4] = {2, 0, 1, 0};
  for (int i = 0; i < 4; i++) CHECK(tg_sampler_accept(s, acc[i]) == TG_OK, "accept: %s", tg_error());
  float pen[5] = {1.0f, -4.0f, 1.0f, 0.5f, 0.0f};  /* 2 / 2, -2 * 2; 2 left the window */
  int32_t ids[5];
  float probs[5];
  double want[5];
  int64_t n = tg_sampler_probs(s, logits, ids, probs);
  CHECK(n == 5, "%lld candidates, want 5", (long long)n);
  int order[5] = {0, 2, 3, 4, 1};  /* 1.0 (ids 0, 2: the lower first), 0.5, 0.0, -4 */
  ref_softmax(pen, order, 5, 1.0, want);
  for (int i = 0; i < 5 && n == 5; i++) {
    CHECK(ids[i] == order[i], "candidate %d is %d, want %d", i, ids[i], order[i]);
    CHECK(fabs(probs[i] - want[i]) < 1e-6, "p[%d] = %.8f, want %.8f", i, probs[i], want[i]);
  }
  /* the logits are not modified */
  CHECK(logits[0] == 2.0f && logits[1] == -2.0f, "the sampler wrote into the logits");
  tg_sampler_free(s);
  /* greedy after a penalty: token 0 (2.0) penalized to 1.0 ties with 2 (1.0): the lower id, 0 */
  o.temperature = 0;
  o.repeat_penalty = 2.0;
  s = tg_sampler_new(o, 5);
  CHECK_T(s);
  tg_sampler_accept(s, 0);
  CHECK(tg_sampler_sample(s, logits) == 0, "greedy with the penalty: want 0");
  /* the sampled token was accepted too: 0 is in the window twice, still divided once */
  CHECK(tg_sampler_sample(s, logits) == 0, "greedy with the penalty, twice: want 0");
  tg_sampler_free(s);
  o.repeat_penalty = 4.0;
  s = tg_sampler_new(o, 5);
  CHECK_T(s);
  tg_sampler_accept(s, 0);
  CHECK(tg_sampler_sample(s, logits) == 2, "greedy with penalty 4 on token 0: want 2");
  tg_sampler_free(s);
}

TEST(test_sample_refuses_bad_values) {
  tg_sampler_opts o = tg_sampler_defaults();
  CHECK(!tg_sampler_new(o, 0), "vocab 0 accepted");
  CHECK(strstr(tg_error(), "vocab"), "the error names vocab: %s", tg_error());
  o.repeat_penalty = 0;
  CHECK(!tg_sampler_new(o, 10) && strstr(tg_error(), "repeat_penalty"), "repeat_penalty 0: %s", tg_error());
  o = tg_sampler_defaults();
  o.temperature = NAN;
  CHECK(!tg_sampler_new(o, 10) && strstr(tg_error(), "temperature"), "temperature NaN: %s", tg_error());
  o = tg_sampler_defaults();
  o.repeat_last_n = -1;
  CHECK(!tg_sampler_new(o, 10) && strstr(tg_error(), "repeat_last_n"), "repeat_last_n -1: %s", tg_error());
  o = tg_sampler_defaults();
  o.min_p = 1.5;
  CHECK(!tg_sampler_new(o, 10) && strstr(tg_error(), "min_p"), "min_p 1.5: %s", tg_error());
  tg_sampler *s = tg_sampler_new(tg_sampler_defaults(), 3);
  CHECK_T(s);
  CHECK(tg_sampler_sample(s, (float[]){0, NAN, 1}) == -1 && strstr(tg_error(), "logits[1] is NaN"), "NaN: %s",
        tg_error());
  CHECK(tg_sampler_sample(s, (float[]){-INFINITY, -INFINITY, -INFINITY}) == -1 && strstr(tg_error(), "-inf"),
        "all -inf: %s", tg_error());
  CHECK(tg_sampler_accept(s, 3) == TG_ERR_ARG && tg_sampler_accept(s, -1) == TG_ERR_ARG, "accept out of vocab");
  CHECK(tg_sampler_sample(NULL, (float[]){0, 0, 0}) == -1, "NULL sampler");
  CHECK(tg_sampler_probs(s, NULL, NULL, NULL) == -1, "NULL logits");
  tg_sampler_free(s);
  tg_sampler_free(NULL);
}

/* ---- the chain against a plain reference: sort everything, then cut as llama.cpp's samplers do ---------------- */

typedef struct ref_cand { float logit; int id; } ref_cand;

static int ref_cmp(const void *a, const void *b) {
  const ref_cand *x = a, *y = b;
  if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
  return x->id - y->id;
}

/* the candidates llama.cpp's top-k, top-p, min-p keep, in order, into out; their count */
static int ref_chain(const float *logits, int v, int64_t top_k, double top_p, double min_p, ref_cand *out) {
  for (int i = 0; i < v; i++) out[i] = (ref_cand){logits[i], i};
  qsort(out, (size_t)v, sizeof *out, ref_cmp);
  int n = top_k > 0 && top_k < v ? (int)top_k : v;
  if (top_p < 1) {
    double z = 0, cum = 0;
    for (int i = 0; i < n; i++) z += exp((double)out[i].logit - out[0].logit);
    for (int i = 0; i < n; i++) {
      cum += exp((double)out[i].logit - out[0].logit) / z;
      if (cum >= top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (min_p > 0) {
    float thr = out[0].logit + logf((float)min_p);
    int m = 1;
    while (m < n && out[m].logit >= thr) m++;
    n = m;
  }
  return n;
}

TEST(test_sample_cuts_match_a_sorting_reference) {
  enum { V = 5000 };
  static float logits[V];
  static ref_cand want[V];
  static int32_t ids[V];
  static float probs[V];
  uint64_t x = 12345;
  for (int i = 0; i < V; i++) {  /* a coarse grid of values: many ties */
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    logits[i] = (float)((int)(x >> 40) % 200) * 0.05f - 5.0f;
  }
  const struct { int64_t k; double p, minp; } cases[] = {
      {50, 1, 0}, {0, 0.9, 0}, {0, 1, 0.2}, {300, 0.95, 0.05}, {40, 0.5, 0.05}, {0, 0.99, 0.001}, {0, 1, 0},
      {1, 0.9, 0.5}, {V + 10, 0.3, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    tg_sampler_opts o = plain(0.7);
    o.top_k = cases[c].k;
    o.top_p = cases[c].p;
    o.min_p = cases[c].minp;
    tg_sampler *s = tg_sampler_new(o, V);
    CHECK_T(s);
    int nwant = ref_chain(logits, V, o.top_k, o.top_p, o.min_p, want);
    int64_t n = tg_sampler_probs(s, logits, ids, probs);
    CHECK(n == nwant, "case %zu (k %lld p %g min_p %g): %lld candidates, want %d", c, (long long)o.top_k, o.top_p,
          o.min_p, (long long)n, nwant);
    double sum = 0, mx = want[0].logit;
    for (int i = 0; i < nwant; i++) sum += exp((want[i].logit - mx) / 0.7);
    int bad = 0;
    for (int i = 0; i < nwant && n == nwant; i++) {
      double p = exp((want[i].logit - mx) / 0.7) / sum;
      if ((ids[i] != want[i].id || fabs(probs[i] - p) > 1e-6) && bad++ < 3)
        CHECK(false, "case %zu: candidate %d is %d (p %.7f), want %d (p %.7f)", c, i, ids[i], probs[i], want[i].id, p);
    }
    tg_sampler_free(s);
  }
}
