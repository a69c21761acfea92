/* test_api_promises.c — tg.h promises no other test checked: the random initializers' distributions
 * (tg_uniform, tg_normal, tg_kaiming_uniform/normal, tg_glorot_uniform: range, mean and spread over 2^16
 * draws, against the formulas in tg.h), tg_swish as tg_silu, the training flag, tg_requires_grad,
 * tg_version, tg_variable_name, tg_dist_set_timeout/tg_dist_timeout. */
#include <stdlib.h>

#include "test.h"

enum { N = 1 << 16 };

typedef struct stats { double lo, hi, mean, sd; } stats;

/* the statistics of t (N float32 values); false with a failure reported */
static bool stats_of(const char *what, tg_tensor *t, stats *s, const char *file, int line) {
  static float v[N];
  if (!t || tg_numel(t) != N || tg_dtype_of(t) != TG_FLOAT32 || tg_to_host(t, v, sizeof v) != TG_OK) {
    test_fail(file, line, "%s: no float32 result of %d values: %s", what, N, tg_error());
    return false;
  }
  double sum = 0, sq = 0;
  s->lo = INFINITY;
  s->hi = -INFINITY;
  for (int i = 0; i < N; i++) {
    sum += v[i];
    s->lo = fmin(s->lo, v[i]);
    s->hi = fmax(s->hi, v[i]);
  }
  s->mean = sum / N;
  for (int i = 0; i < N; i++) sq += (v[i] - s->mean) * (v[i] - s->mean);
  s->sd = sqrt(sq / (N - 1));
  return true;
}

/* a uniform U(lo, hi): inside [lo, hi), reaching near both ends, mean and sd within 2% of the range */
static void check_uniform(const char *what, tg_tensor *t, double lo, double hi, const char *file, int line) {
  stats s;
  if (!stats_of(what, t, &s, file, line)) return;
  double r = hi - lo, tol = 0.02 * r;
  if (s.lo < lo || s.hi >= hi || s.lo > lo + tol || s.hi < hi - tol || fabs(s.mean - (lo + hi) / 2) > tol ||
      fabs(s.sd - r / sqrt(12)) > tol)
    test_fail(file, line, "%s: U(%g, %g) drew min %g max %g mean %g sd %g (want sd %g)", what, lo, hi, s.lo, s.hi, s.mean,
              s.sd, r / sqrt(12));
}

/* a normal N(mean, sd): mean within 3% of sd, sd within 3% */
static void check_normal(const char *what, tg_tensor *t, double mean, double sd, const char *file, int line) {
  stats s;
  if (!stats_of(what, t, &s, file, line)) return;
  if (fabs(s.mean - mean) > 0.03 * sd || fabs(s.sd - sd) > 0.03 * sd || s.hi - s.lo < 6 * sd)
    test_fail(file, line, "%s: N(%g, %g) drew mean %g sd %g (range %g .. %g)", what, mean, sd, s.mean, s.sd, s.lo, s.hi);
}

TEST(test_api_initializers_follow_their_formulas) {
  tg_scope_begin();
  tg_manual_seed(1234);
  const int64_t flat = N, conv[4] = {64, 16, 8, 8}, mat[2] = {256, 256};  /* each N values */
  check_uniform("tg_uniform", tg_uniform(TG_FLOAT32, 1, &flat, -3, 5), -3, 5, __FILE__, __LINE__);
  check_normal("tg_normal", tg_normal(TG_FLOAT32, 1, &flat, 2, 0.5), 2, 0.5, __FILE__, __LINE__);
  /* fan_in = shape[1] * prod(shape[2:]) = 16 * 64; g = 2 / (1 + a^2) */
  double fan_in = 16 * 64, a = 0.5, g = 2 / (1 + a * a);
  double bk = sqrt(3 * g / fan_in);
  check_uniform("tg_kaiming_uniform", tg_kaiming_uniform(TG_FLOAT32, 4, conv, a), -bk, bk, __FILE__, __LINE__);
  check_normal("tg_kaiming_normal", tg_kaiming_normal(TG_FLOAT32, 4, conv, a), 0, sqrt(g / fan_in), __FILE__, __LINE__);
  double bg = sqrt(6.0 / (256 + 256));
  check_uniform("tg_glorot_uniform", tg_glorot_uniform(TG_FLOAT32, 2, mat), -bg, bg, __FILE__, __LINE__);
  /* (64, 16, 8, 8): fan_in 16 * 64 over shape[0] + prod(shape[1:]) for glorot */
  double bc = sqrt(6.0 / (64 + 16 * 64));
  check_uniform("tg_glorot_uniform 4-d", tg_glorot_uniform(TG_FLOAT32, 4, conv), -bc, bc, __FILE__, __LINE__);
  /* the same seed, the same numbers */
  float x1[8], x2[8];
  int64_t e = 8;
  tg_manual_seed(7);
  bool ok = tg_to_host(tg_kaiming_normal(TG_FLOAT32, 1, &e, 0), x1, sizeof x1) == TG_OK;
  tg_manual_seed(7);
  ok = ok && tg_to_host(tg_kaiming_normal(TG_FLOAT32, 1, &e, 0), x2, sizeof x2) == TG_OK;
  CHECK(ok && !memcmp(x1, x2, sizeof x1), "tg_manual_seed does not repeat tg_kaiming_normal: %s", tg_error());
  tg_scope_end();
}

TEST(test_api_small_promises) {
  tg_scope_begin();
  /* tg_swish is tg_silu */
  float x[5] = {-3, -0.5f, 0, 0.5f, 3}, a[5], b[5];
  tg_tensor *t = tg_from_data(TG_FLOAT32, 1, (int64_t[]){5}, x, sizeof x);
  CHECK(tg_to_host(tg_swish(t), a, sizeof a) == TG_OK && tg_to_host(tg_silu(t), b, sizeof b) == TG_OK && !memcmp(a, b, sizeof a),
        "tg_swish differs from tg_silu: %s", tg_error());
  for (int i = 0; i < 5; i++) CHECK(fabs(a[i] - x[i] / (1 + exp(-x[i]))) < 1e-6, "swish(%g) = %g", x[i], a[i]);
  /* the training flag: false by default, as set */
  CHECK(!tg_training(), "training is on by default");
  tg_set_training(true);
  CHECK(tg_training(), "tg_set_training(true) not seen");
  tg_set_training(false);
  CHECK(!tg_training(), "tg_set_training(false) not seen");
  /* tg_requires_grad */
  CHECK(!tg_requires_grad(NULL) && !tg_requires_grad(t), "requires_grad on a fresh tensor");
  CHECK(tg_set_requires_grad(t, true) == t && tg_requires_grad(t), "tg_set_requires_grad(true)");
  tg_set_requires_grad(t, false);
  CHECK(!tg_requires_grad(t), "tg_set_requires_grad(false)");
  /* the version */
  CHECK(tg_version() && !strcmp(tg_version(), TG_VERSION_STRING), "tg_version %s, header %s", tg_version(), TG_VERSION_STRING);
  /* a variable's name: at most 31 bytes of it */
  tg_variable *v = tg_variable_new("seq_len", 1, 16);
  CHECK(v && !strcmp(tg_variable_name(v), "seq_len"), "variable name: %s", v ? tg_variable_name(v) : tg_error());
  tg_variable_free(v);
  v = tg_variable_new("a_name_that_is_longer_than_thirty_one_bytes", 1, 16);
  CHECK(v && strlen(tg_variable_name(v)) <= 31 && !strncmp(tg_variable_name(v), "a_name_that_is_longer", 21), "long name: %s",
        v ? tg_variable_name(v) : tg_error());
  tg_variable_free(v);
  CHECK(!strcmp(tg_variable_name(NULL), ""), "the name of NULL");
  /* the collectives' timeout: > 0, else refused */
  double was = tg_dist_timeout();
  CHECK(was > 0, "default timeout %g", was);
  CHECK(tg_dist_set_timeout(2.5) == TG_OK && tg_dist_timeout() == 2.5, "set timeout 2.5: %g", tg_dist_timeout());
  CHECK(tg_dist_set_timeout(0) == TG_ERR_ARG && tg_dist_set_timeout(-1) == TG_ERR_ARG && tg_dist_timeout() == 2.5,
        "a timeout <= 0 must be refused");
  CHECK(tg_dist_set_timeout(was) == TG_OK, "restore the timeout");
  tg_scope_end();
}
