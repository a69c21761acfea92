/* test_random.c — the counter-based generator: reproducible across runs and thread counts, with the
 * right moments. */
#include <stdlib.h>

#include "test.h"
#include "uop/env.h"

static float *draw(tg_tensor *(*f)(tg_dtype, int, const int64_t *), int64_t n) {
  float *v = malloc((size_t)n * sizeof *v);
  tg_scope_begin();
  tg_tensor *t = f(TG_FLOAT32, 1, &n);
  if (!t || tg_to_host(t, v, (size_t)n * sizeof *v) != TG_OK) { free(v); v = NULL; }
  tg_scope_end();
  return v;
}

TEST(test_random_same_seed_same_numbers_any_thread_count) {
  int64_t n = 1 << 18;  /* big enough to run on the whole pool */
  tg_manual_seed(42);
  float *a = draw(tg_rand, n), *a2 = draw(tg_rand, n);
  tg_collect();  /* restarts the pool with one thread */
  setenv("TG_THREADS", "1", 1);
  env_reload();
  tg_manual_seed(42);
  float *b = draw(tg_rand, n), *b2 = draw(tg_rand, n);
  tg_collect();
  unsetenv("TG_THREADS");
  env_reload();
  CHECK(a && b && a2 && b2, "%s", tg_error());
  if (a && b && a2 && b2) {
    CHECK(!memcmp(a, b, (size_t)n * sizeof *a), "same seed, different numbers on 1 thread");
    CHECK(!memcmp(a2, b2, (size_t)n * sizeof *a), "second draw differs across thread counts");
    CHECK(memcmp(a, a2, (size_t)n * sizeof *a), "two draws gave the same numbers");
  }
  free(a); free(b); free(a2); free(b2);
}

static void moments(const float *v, int64_t n, double *mean, double *var) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s += v[i];
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) s2 += (v[i] - *mean) * (v[i] - *mean);
  *var = s2 / (double)(n - 1);
}

TEST(test_random_rand_and_randn_moments) {
  int64_t n = 1 << 20;
  tg_manual_seed(7);
  float *u = draw(tg_rand, n), *g = draw(tg_randn, n);
  CHECK(u && g, "%s", tg_error());
  if (!u || !g) { free(u); free(g); return; }
  double m, v;
  moments(u, n, &m, &v);
  /* 5 standard errors: sd of the mean of U(0,1) is sqrt(1/12/n) ~ 2.8e-4 */
  CHECK(fabs(m - 0.5) < 5 * sqrt(1.0 / 12 / (double)n), "rand mean %g", m);
  CHECK(fabs(v - 1.0 / 12) < 0.002, "rand variance %g", v);
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < n; i++) { lo = u[i] < lo ? u[i] : lo; hi = u[i] > hi ? u[i] : hi; }
  CHECK(lo >= 0 && hi < 1, "rand outside [0, 1): [%g, %g]", lo, hi);
  moments(g, n, &m, &v);
  CHECK(fabs(m) < 5 / sqrt((double)n), "randn mean %g", m);
  CHECK(fabs(v - 1) < 0.01, "randn variance %g", v);
  int64_t in1 = 0;
  for (int64_t i = 0; i < n; i++) in1 += fabsf(g[i]) < 1;
  CHECK(fabs((double)in1 / (double)n - 0.6827) < 0.005, "randn within one sd: %g", (double)in1 / (double)n);
  free(u); free(g);
}

TEST(test_random_randint_range_and_uniform_bounds) {
  tg_scope_begin();
  tg_manual_seed(3);
  int64_t n = 10000;
  tg_tensor *r = tg_randint(TG_INT32, 1, &n, -3, 5);
  int32_t *v = malloc((size_t)n * sizeof *v);
  CHECK(tg_to_host(r, v, (size_t)n * sizeof *v) == TG_OK, "%s", tg_error());
  int counts[8] = {0};
  for (int64_t i = 0; i < n; i++) {
    CHECK(v[i] >= -3 && v[i] < 5, "randint value %d out of [-3, 5)", v[i]);
    if (v[i] >= -3 && v[i] < 5) counts[v[i] + 3]++;
  }
  for (int k = 0; k < 8; k++) CHECK(counts[k] > 1000 && counts[k] < 1500, "value %d drawn %d times of 10000", k - 3, counts[k]);
  free(v);
  tg_tensor *k = tg_kaiming_uniform(TG_FLOAT32, 2, (int64_t[]){64, 50}, sqrt(5));
  float kv[3200];
  CHECK(tg_to_host(k, kv, sizeof kv) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 3200; i++) CHECK(fabsf(kv[i]) <= 1 / sqrtf(50) + 1e-6f, "kaiming_uniform value %g out of bounds", kv[i]);
  CHECK(tg_randint(TG_INT32, 1, &n, 5, 5) == NULL && strstr(tg_error(), "tg_randint"), "empty randint range accepted");
  tg_scope_end();
}

TEST(test_random_dropout_scales_kept_values) {
  tg_scope_begin();
  tg_manual_seed(11);
  int64_t n = 1 << 16;
  tg_tensor *x = tg_ones(TG_FLOAT32, 1, &n);
  tg_set_training(true);
  tg_tensor *d = tg_dropout(x, 0.25);
  tg_set_training(false);
  float *v = malloc((size_t)n * sizeof *v);
  CHECK(tg_to_host(d, v, (size_t)n * sizeof *v) == TG_OK, "%s", tg_error());
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; i++) {
    zeros += v[i] == 0;
    CHECK(v[i] == 0 || fabsf(v[i] - 1 / 0.75f) < 1e-6f, "dropout value %g", v[i]);
    if (v[i] != 0 && fabsf(v[i] - 1 / 0.75f) >= 1e-6f) break;
  }
  CHECK(fabs((double)zeros / (double)n - 0.25) < 0.01, "dropped fraction %g", (double)zeros / (double)n);
  tg_tensor *e = tg_dropout(x, 0.25);  /* not training: identity */
  CHECK(tg_to_host(e, v, (size_t)n * sizeof *v) == TG_OK && v[0] == 1 && v[n - 1] == 1, "dropout outside training");
  free(v);
  tg_scope_end();
}
