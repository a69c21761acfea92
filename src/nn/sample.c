/* sample.c — the next token from a model's logits: llama.cpp's sampler chain (repetition penalty, top-k, top-p,
 * min-p, temperature, a draw) with the sampler's own seeded generator, so a seed fixes the text everywhere.
 *
 * The cuts all keep a prefix of the candidates in order of logit (ties: the lower id first). Exact thresholds
 * (min-p's; top-p's lower bound) and a one-pass bounded heap for top-k shrink the set first, then the survivors
 * come off a max-heap one by one until a cut stops: only tokens that are kept get ordered, never the vocabulary.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

typedef struct cand { float logit; int32_t id; } cand;

struct tg_sampler {
  tg_sampler_opts o;
  int64_t vocab;
  uint64_t rng[4];        /* xoshiro256** */
  int32_t *window;        /* the last accepted tokens, a ring of o.repeat_last_n */
  int64_t wlen, wnext;    /* tokens in the ring, the slot written next */
  uint32_t *seen;         /* per id: the pass that last penalized it (a token is penalized once per pass) */
  uint32_t pass;
  cand *heap;             /* vocab candidates */
  cand *kept;             /* the candidates kept, in order */
  double *prob;           /* their probabilities at the temperature */
};

tg_sampler_opts tg_sampler_defaults(void) {
  return (tg_sampler_opts){.temperature = 0.8, .top_k = 40, .top_p = 0.95, .min_p = 0.05, .repeat_penalty = 1.0,
                           .repeat_last_n = 64, .seed = 0};
}

/* ---- the generator: splitmix64 fills xoshiro256**'s state (the authors' recommendation) ---------------------- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t *s) {
  uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

/* uniform in [0, 1) with 53 random bits */
static double uniform(tg_sampler *s) { return (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53; }

static void seed_rng(tg_sampler *s) {
  uint64_t x = s->o.seed;
  for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

/* ---- lifetime ---------------------------------------------------------------------------------------------- */

tg_sampler *tg_sampler_new(tg_sampler_opts o, int64_t vocab) {
  const char *bad = NULL;
  if (vocab < 1 || vocab > INT32_MAX) bad = "vocab";
  else if (isnan(o.temperature) || isinf(o.temperature)) bad = "temperature";
  else if (isnan(o.top_p)) bad = "top_p";
  else if (isnan(o.min_p) || o.min_p > 1) bad = "min_p";
  else if (!(o.repeat_penalty > 0) || isinf(o.repeat_penalty)) bad = "repeat_penalty";
  else if (o.repeat_last_n < 0 || o.repeat_last_n > 65536) bad = "repeat_last_n";
  if (bad) {
    tg_set_error(TG_ERR_ARG, "tg_sampler_new: %s out of range (vocab %lld, temperature %g, top_p %g, min_p %g, "
                 "repeat_penalty %g, repeat_last_n %lld; allowed: vocab >= 1, finite temperature, min_p <= 1, "
                 "repeat_penalty > 0, repeat_last_n 0..65536)", bad, (long long)vocab, o.temperature, o.top_p,
                 o.min_p, o.repeat_penalty, (long long)o.repeat_last_n);
    return NULL;
  }
  tg_sampler *s = mem_calloc(1, sizeof *s);
  if (!s) goto nomem;
  s->o = o;
  s->vocab = vocab;
  s->window = mem_alloc((size_t)(o.repeat_last_n ? o.repeat_last_n : 1) * sizeof *s->window);
  s->seen = mem_calloc((size_t)vocab, sizeof *s->seen);
  s->heap = mem_alloc((size_t)vocab * sizeof *s->heap);
  s->kept = mem_alloc((size_t)vocab * sizeof *s->kept);
  s->prob = mem_alloc((size_t)vocab * sizeof *s->prob);
  if (!s->window || !s->seen || !s->heap || !s->kept || !s->prob) goto nomem;
  seed_rng(s);
  return s;
nomem:
  tg_sampler_free(s);
  tg_set_error(TG_ERR_NOMEM, "tg_sampler_new: out of memory for a vocabulary of %lld", (long long)vocab);
  return NULL;
}

void tg_sampler_free(tg_sampler *s) {
  if (!s) return;
  free(s->window);
  free(s->seen);
  free(s->heap);
  free(s->kept);
  free(s->prob);
  free(s);
}

tg_status tg_sampler_reset(tg_sampler *s) {
  if (!s) {
    tg_set_error(TG_ERR_ARG, "tg_sampler_reset: the sampler is NULL");
    return TG_ERR_ARG;
  }
  s->wlen = s->wnext = 0;
  seed_rng(s);
  return TG_OK;
}

tg_status tg_sampler_accept(tg_sampler *s, int32_t token) {
  if (!s || token < 0 || token >= s->vocab) {
    tg_set_error(TG_ERR_ARG, "tg_sampler_accept: %s token %d (vocabulary %lld)", s ? "a" : "NULL sampler,", token,
                 s ? (long long)s->vocab : 0LL);
    return TG_ERR_ARG;
  }
  int64_t n = s->o.repeat_last_n;
  if (n == 0) return TG_OK;
  s->window[s->wnext] = token;
  s->wnext = (s->wnext + 1) % n;
  if (s->wlen < n) s->wlen++;
  return TG_OK;
}

/* ---- the chain ----------------------------------------------------------------------------------------------- */

/* a goes before b: the higher logit, on a tie the lower id */
static bool before(cand a, cand b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

/* a before b in a heap: the better on top, or the worse (worst_first: the root of a bounded top-k heap) */
static bool above(cand a, cand b, bool worst_first) { return worst_first ? before(b, a) : before(a, b); }

static void sift_down(cand *h, int64_t n, int64_t i, bool worst_first) {
  for (;;) {
    int64_t l = 2 * i + 1, top = i;
    if (l < n && above(h[l], h[top], worst_first)) top = l;
    if (l + 1 < n && above(h[l + 1], h[top], worst_first)) top = l + 1;
    if (top == i) return;
    cand t = h[i];
    h[i] = h[top];
    h[top] = t;
    i = top;
  }
}

static void heapify(cand *h, int64_t n, bool worst_first) {
  for (int64_t i = n / 2 - 1; i >= 0; i--) sift_down(h, n, i, worst_first);
}

static cand heap_pop(cand *h, int64_t *n) {
  cand top = h[0];
  h[0] = h[--*n];
  sift_down(h, *n, 0, false);
  return top;
}

static int cand_cmp(const void *a, const void *b) {
  const cand *x = a, *y = b;
  return before(*x, *y) ? -1 : before(*y, *x) ? 1 : 0;
}

/* the candidates into s->kept / s->prob, most likely first when `order` (else, with no cut at all, in id order: a
 * draw needs no order); their count, -1 on error. op names the caller in messages. */
static int64_t run_chain(tg_sampler *s, const float *logits, bool order, const char *op) {
  if (!s || !logits) {
    tg_set_error(TG_ERR_ARG, "%s: the %s is NULL", op, s ? "logits pointer" : "sampler");
    return -1;
  }
  const tg_sampler_opts *o = &s->o;
  int64_t V = s->vocab;
  cand *h = s->heap;
  for (int64_t i = 0; i < V; i++) {
    if (isnan(logits[i])) {
      tg_set_error(TG_ERR_ARG, "%s: logits[%lld] is NaN", op, (long long)i);
      return -1;
    }
    h[i] = (cand){logits[i], (int32_t)i};
  }
  /* the penalty, once per distinct token of the window, as llama.cpp: a logit <= 0 is multiplied, else divided */
  if (o->repeat_penalty != 1.0 && s->wlen) {
    if (++s->pass == 0) {  /* the counter wrapped: old marks could alias */
      memset(s->seen, 0, (size_t)V * sizeof *s->seen);
      s->pass = 1;
    }
    float r = (float)o->repeat_penalty;
    for (int64_t j = 0; j < s->wlen; j++) {
      int32_t t = s->window[j];
      if (s->seen[t] == s->pass) continue;
      s->seen[t] = s->pass;
      h[t].logit = h[t].logit <= 0 ? h[t].logit * r : h[t].logit / r;
    }
  }
  int64_t best = 0;
  for (int64_t i = 1; i < V; i++)
    if (before(h[i], h[best])) best = i;
  if (isinf(h[best].logit) && h[best].logit < 0) {
    tg_set_error(TG_ERR_ARG, "%s: every one of the %lld logits is -inf", op, (long long)V);
    return -1;
  }
  if (o->temperature <= 0) {  /* greedy */
    s->kept[0] = h[best];
    s->prob[0] = 1.0;
    return 1;
  }
  int64_t k = o->top_k <= 0 || o->top_k > V ? V : o->top_k, m = 0;
  bool top_p = o->top_p < 1, min_p = o->min_p > 0;
  float max = h[best].logit;
  float min_logit = min_p ? max + logf((float)o->min_p) : -INFINITY;
  if (k == V && !top_p && !min_p) {  /* no cut: every token */
    memcpy(s->kept, h, (size_t)V * sizeof *h);
    m = V;
    if (order) qsort(s->kept, (size_t)V, sizeof *h, cand_cmp);
    goto temperature;
  }
  /* Exact prefilters, so that only tokens a cut may keep get ordered: min-p's threshold, and without top-k also
   * top-p's: the tokens of probability >= (1 - p) / V hold more than p together, so the prefix of the sorted
   * tokens that reaches p lies among them. Both thresholds are <= max: the best token always passes. */
  double z = 0, lo = min_logit;
  if (top_p && k == V) {
    for (int64_t i = 0; i < V; i++) z += exp((double)h[i].logit - max);
    double tau = (1 - fmax(o->top_p, 0)) / (2.0 * (double)V);  /* half the bound: a margin for rounding */
    if (tau > 0) lo = fmax(lo, max + log(tau * z));
  }
  int64_t n = 0;
  for (int64_t i = 0; i < V; i++)
    if (h[i].logit >= lo) h[n++] = h[i];
  /* top-k: one pass over a heap of the best k so far whose root is the worst of them */
  if (k < n) {
    heapify(h, k, true);
    for (int64_t i = k; i < n; i++)
      if (before(h[i], h[0])) {
        h[0] = h[i];
        sift_down(h, k, 0, true);
      }
    n = k;
  }
  if (top_p && k < V)  /* top-p normalizes over the top-k set (llama.cpp's order) */
    for (int64_t i = 0; i < n; i++) z += exp((double)h[i].logit - max);
  /* the survivors off a max-heap, best first, until a cut stops */
  heapify(h, n, false);
  double cum = 0;
  for (int64_t left = n; left > 0;) {
    cand c = heap_pop(h, &left);
    if (m > 0 && c.logit < min_logit) break;  /* min-p keeps at least one, as llama.cpp's min_keep 1 */
    s->kept[m++] = c;
    if (top_p) {
      cum += exp((double)c.logit - max) / z;
      if (cum >= o->top_p) break;  /* the token that reaches p is kept */
    }
  }
temperature:;
  /* the temperature, then the softmax of what is left */
  double sum = 0, inv_t = 1.0 / o->temperature;
  for (int64_t i = 0; i < m; i++) sum += s->prob[i] = exp(((double)s->kept[i].logit - max) * inv_t);
  for (int64_t i = 0; i < m; i++) s->prob[i] /= sum;
  return m;
}

int64_t tg_sampler_probs(tg_sampler *s, const float *logits, int32_t *ids, float *probs) {
  int64_t n = run_chain(s, logits, true, "tg_sampler_probs");
  for (int64_t i = 0; i < n; i++) {
    if (ids) ids[i] = s->kept[i].id;
    if (probs) probs[i] = (float)s->prob[i];
  }
  return n;
}

int32_t tg_sampler_sample(tg_sampler *s, const float *logits) {
  int64_t n = run_chain(s, logits, false, "tg_sampler_sample");
  if (n < 0) return -1;
  int32_t token = s->kept[n - 1].id;  /* where rounding leaves u past the last sum */
  if (n > 1) {
    double u = uniform(s), cum = 0;
    for (int64_t i = 0; i < n; i++) {
      cum += s->prob[i];
      if (u < cum) {
        token = s->kept[i].id;
        break;
      }
    }
  }
  tg_sampler_accept(s, token);
  return token;
}
