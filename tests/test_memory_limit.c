/* test_memory_limit.c — memory accounting and the memory limit (tg_memory*, TG_MEMORY_LIMIT).
 *
 * Counts are checked against the bytes of the tensors made (each realized tensor of n float32 holds 4n bytes
 * in one counted buffer), peaks against what was alive together, and everything back to the starting count
 * once the tensors are freed and tg_collect drops the values cached on the graph. The limit is checked on a
 * training step: too small, the step fails with TG_ERR_NOMEM and changes nothing; just above what it needs, it
 * gives the values of an unlimited run. */
#include <stdlib.h>

#include "test.h"
#include "runtime/device.h"
#include "uop/env.h"

static tg_memory_info mem(void) {
  tg_memory_info m;
  tg_status st = tg_memory(NULL, &m);
  if (st != TG_OK) memset(&m, 0, sizeof m);
  return m;
}

/* a realized float32 tensor of n values i * 0.5 */
static tg_tensor *realized(int64_t n) {
  tg_tensor *a = tg_arange(TG_FLOAT32, 0, (double)n, 1);
  tg_tensor *b = tg_contiguous(tg_mul_scalar(a, 0.5));
  tg_free(a);
  if (b && tg_realize(b) != TG_OK) {
    tg_free(b);
    return NULL;
  }
  return b;
}

TEST(test_memory_counts_realized_tensors_and_returns_to_zero) {
  tg_collect();
  tg_memory_info m0 = mem();
  CHECK(m0.arenas <= m0.in_use && m0.peak >= m0.in_use, "start: in_use %zu arenas %zu peak %zu", m0.in_use, m0.arenas,
        m0.peak);
  CHECK(tg_memory_reset_peak(NULL) == TG_OK && mem().peak == m0.in_use, "reset: peak %zu, in use %zu", mem().peak,
        m0.in_use);
  tg_tensor *a = realized(1000);
  CHECK_T(a);
  tg_memory_info m1 = mem();
  CHECK(m1.in_use == m0.in_use + 4000, "one tensor of 1000 float32: in use %zu -> %zu", m0.in_use, m1.in_use);
  tg_tensor *b = realized(250000);
  CHECK_T(b);
  tg_memory_info m2 = mem();
  CHECK(m2.in_use == m1.in_use + 1000000, "a tensor of 250000 float32: in use %zu -> %zu", m1.in_use, m2.in_use);
  CHECK(m2.peak >= m2.in_use, "peak %zu below in use %zu", m2.peak, m2.in_use);
  tg_free(b);
  tg_free(a);
  tg_collect();  /* values cached on the graph's nodes keep their buffers until then */
  tg_memory_info m3 = mem();
  CHECK(m3.in_use == m0.in_use, "after freeing: in use %zu, at the start %zu", m3.in_use, m0.in_use);
  CHECK(m3.peak >= m0.in_use + 1004000, "peak %zu: both tensors (1004000 bytes) were alive together", m3.peak);
  CHECK(tg_memory_reset_peak(NULL) == TG_OK && mem().peak == m3.in_use, "peak after reset %zu", mem().peak);
  /* the freed buffers went to the reuse cache (on the CPU), and empty_cache gives them back */
  CHECK(tg_memory_empty_cache(NULL) == TG_OK && mem().cached == 0, "cached after empty_cache: %zu", mem().cached);
}

TEST(test_memory_bad_arguments) {
  tg_memory_info m;
  CHECK(tg_memory(NULL, NULL) == TG_ERR_ARG, "a NULL out is refused");
  CHECK(tg_memory("TPU", &m) == TG_ERR_ARG && strstr(tg_error(), "TPU"), "an unknown device: %s", tg_error());
  tg_error_clear();
}

static tg_status square_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)ctx, (void)nin, (void)nout;
  tg_scope_begin();
  tg_tensor *h = tg_contiguous(tg_tanh(in[0]));
  out[0] = tg_keep(tg_sum(tg_mul(h, tg_exp(h)), 1, (int[]){1}, false));
  tg_scope_end();
  return out[0] ? TG_OK : tg_error_status();
}

TEST(test_memory_counts_jit_arenas) {
  if (!strcmp(test_device_name(), "CL")) {
    test_skip("the JIT plans no arena on OpenCL");
    return;
  }
  tg_jit *j = tg_jit_new(square_step, NULL, 1, 1);
  CHECK_T(j);
  for (int call = 0; call < 3; call++) {
    tg_scope_begin();
    tg_tensor *x = tg_rand(TG_FLOAT32, 2, (int64_t[]){64, 300}), *o = NULL;
    CHECK(tg_jit_call(j, &x, &o) == TG_OK, "call %d: %s", call, tg_error());
    tg_free(o);
    tg_scope_end();
  }
  size_t before = 0, after = 0;
  CHECK(tg_jit_memory(j, &before, &after) == TG_OK, "%s", tg_error());
  tg_memory_info m = mem();
  CHECK(after > 0 && m.arenas >= after && m.in_use >= m.arenas, "arena %zu bytes; counted arenas %zu, in use %zu", after,
        m.arenas, m.in_use);
  tg_jit_free(j);
  tg_collect();
  tg_memory_info m2 = mem();
  CHECK(m2.arenas + after == m.arenas, "freeing the step gave back %zu arena bytes of %zu", m.arenas - m2.arenas, after);
}

/* ---- the limit on a training step ------------------------------------------------------------------------ */

#define NIN 96
#define NOUT 40
#define BATCH 64

typedef struct model { tg_tensor *w, *b; tg_optim *opt; tg_params *p; } model;

static bool model_init(model *m) {
  float wv[NIN * NOUT], bv[NOUT];
  for (int i = 0; i < NIN * NOUT; i++) wv[i] = (float)sin(0.37 * i) * 0.1f;
  for (int i = 0; i < NOUT; i++) bv[i] = (float)cos(0.5 * i) * 0.1f;
  m->w = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 2, (int64_t[]){NIN, NOUT}, wv, sizeof wv), true);
  m->b = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){NOUT}, bv, sizeof bv), true);
  m->p = tg_params_new();
  if (!m->w || !m->b || !m->p || tg_params_add(m->p, "w", m->w) != TG_OK || tg_params_add(m->p, "b", m->b) != TG_OK)
    return false;
  return (m->opt = tg_adam_new(m->p, adam_lr(0.01))) != NULL;
}

static void model_free(model *m) {
  tg_optim_free(m->opt);
  tg_params_free(m->p);
  tg_free(m->w);
  tg_free(m->b);
}

/* one eager step on a fixed batch: softmax cross-entropy of relu(x w + b) */
static tg_status model_step(model *m, int k) {
  float xv[BATCH * NIN];
  int32_t yv[BATCH];
  for (int i = 0; i < BATCH * NIN; i++) xv[i] = (float)sin(0.11 * i + k);
  for (int i = 0; i < BATCH; i++) yv[i] = (i * 7 + k) % NOUT;
  tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){BATCH, NIN}, xv, sizeof xv);
  tg_tensor *y = tg_from_data(TG_INT32, 1, (int64_t[]){BATCH}, yv, sizeof yv);
  tg_tensor *loss = tg_sparse_categorical_crossentropy(tg_relu(tg_add(tg_matmul(x, m->w), m->b)), y, tg_loss_defaults());
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->opt, 0, NULL);
  tg_optim_zero_grad(m->opt);
  tg_scope_end();
  return st;
}

static bool weights(model *m, float *w) { return tg_to_host(m->w, w, NIN * NOUT * sizeof(float)) == TG_OK; }

TEST(test_memory_limit_fails_a_step_cleanly_and_a_fitting_limit_matches) {
  static float ref[NIN * NOUT], got[NIN * NOUT], before[NIN * NOUT];
  model a = {0}, b = {0};
  /* the reference: three unlimited steps */
  CHECK(model_init(&a), "init: %s", tg_error());
  for (int k = 0; k < 3; k++) CHECK(model_step(&a, k) == TG_OK, "reference step %d: %s", k, tg_error());
  CHECK(weights(&a, ref), "%s", tg_error());
  model_free(&a);

  CHECK(model_init(&b), "init: %s", tg_error());
  CHECK(model_step(&b, 0) == TG_OK, "step 0: %s", tg_error());
  CHECK(weights(&b, before), "%s", tg_error());
  /* what one step needs on top of what is held between steps */
  tg_collect();
  tg_memory_info m0 = mem();
  tg_memory_reset_peak(NULL);
  tg_memory_empty_cache(NULL);
  /* a limit a little above what is held now: the step's first new buffer passes it */
  CHECK(tg_memory_set_limit(NULL, m0.in_use + 256) == TG_OK, "%s", tg_error());
  tg_status st = model_step(&b, 1);
  CHECK(st == TG_ERR_NOMEM, "a step under a limit of %zu bytes (%zu in use): status %d", m0.in_use + 256, m0.in_use,
        (int)st);
  CHECK(strstr(tg_error(), "memory limit") && strstr(tg_error(), "in use"), "the message names the limit: %s",
        tg_error());
  tg_error_clear();
  CHECK(mem().cached == 0, "the cache was emptied first (%zu cached)", mem().cached);
  /* nothing changed: the weights are those after step 0, readable */
  CHECK(tg_memory_set_limit(NULL, 0) == TG_OK, "%s", tg_error());
  CHECK(weights(&b, got), "%s", tg_error());
  CHECK(!memcmp(got, before, sizeof got), "the failed step changed the weights");
  /* with the limit at what an unlimited step held at its peak (plus what the failed one left cached), the same
   * step runs and the run ends where the reference did */
  tg_collect();
  tg_memory_empty_cache(NULL);
  tg_memory_info m1 = mem();
  tg_memory_reset_peak(NULL);
  model probe = {0};
  CHECK(model_init(&probe), "init: %s", tg_error());
  CHECK(model_step(&probe, 1) == TG_OK, "probe step: %s", tg_error());
  tg_memory_info mp = mem();
  size_t need = mp.peak - m1.in_use;  /* the probe's parameters and state included: more than b's step needs */
  model_free(&probe);
  tg_collect();
  CHECK(tg_memory_set_limit(NULL, mem().in_use + need) == TG_OK, "%s", tg_error());
  for (int k = 1; k < 3; k++) CHECK(model_step(&b, k) == TG_OK, "step %d under a limit of %zu: %s", k, mem().limit, tg_error());
  tg_memory_info ml = mem();
  CHECK(ml.in_use <= ml.limit, "in use %zu passed the limit %zu", ml.in_use, ml.limit);
  CHECK(tg_memory_set_limit(NULL, 0) == TG_OK, "%s", tg_error());
  CHECK(weights(&b, got), "%s", tg_error());
  CHECK_CLOSE("weights after 3 steps, limited vs not", got, ref, NIN * NOUT);
  model_free(&b);
}

TEST(test_memory_limit_from_the_environment) {
  static const struct { const char *v; size_t bytes; } good[] = {
      {"4096", 4096}, {"512M", (size_t)512 << 20}, {"2g", (size_t)2 << 30}, {"64KiB", 64 << 10}, {"1KB", 1024}};
  static const char *const badv[] = {"abc", "12Q", "-5", "0", "M", "1.5G", "99999999999999999999"};
  const char *old = getenv("TG_MEMORY_LIMIT");
  char *saved = old ? strdup(old) : NULL;
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    setenv("TG_MEMORY_LIMIT", good[i].v, 1);
    env_reload();
    CHECK(env_check(ENV_REALIZE) == TG_OK && env_get()->memory_limit == good[i].bytes, "TG_MEMORY_LIMIT=%s: %zu (%s)",
          good[i].v, env_get()->memory_limit, tg_error());
  }
  for (size_t i = 0; i < sizeof badv / sizeof *badv; i++) {
    setenv("TG_MEMORY_LIMIT", badv[i], 1);
    env_reload();
    CHECK(env_check(ENV_REALIZE) == TG_ERR_ARG && strstr(tg_error(), "TG_MEMORY_LIMIT"), "TG_MEMORY_LIMIT=%s: %s",
          badv[i], tg_error());
    tg_error_clear();
  }
  /* a limit from the environment applies to realizes, until the API sets one (0: none) */
  setenv("TG_MEMORY_LIMIT", "1K", 1);
  env_reload();
  memory_use_env_limit(device_default());
  tg_tensor *a = realized(4096);
  CHECK(!a && tg_error_status() == TG_ERR_NOMEM && strstr(tg_error(), "memory limit of 1024 bytes"),
        "16 KB under TG_MEMORY_LIMIT=1K: %s", a ? "allowed" : tg_error());
  tg_free(a);
  tg_error_clear();
  tg_memory_info m = mem();
  CHECK(m.limit == 1024, "tg_memory reports the environment's limit: %zu", m.limit);
  tg_memory_set_limit(NULL, 0);
  a = realized(4096);
  CHECK(a != NULL, "an API limit of 0 (none) overrides TG_MEMORY_LIMIT: %s", tg_error());
  tg_free(a);
  if (saved) setenv("TG_MEMORY_LIMIT", saved, 1);
  else unsetenv("TG_MEMORY_LIMIT");
  free(saved);
  env_reload();
}
