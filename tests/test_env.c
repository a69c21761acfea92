/* test_env.c — environment variables are parsed strictly (src/uop/env.c): a bad value is an error naming the
 * variable, its value and the accepted values, returned by every call that depends on it, never a silent
 * default; good values take effect. Each test sets variables with setenv, re-reads them with env_reload (the
 * library reads the environment once) and puts the old values back. */
#include <stdlib.h>

#include "test.h"
#include "uop/env.h"

typedef struct saved_var { const char *name; char *value; bool was_set; } saved_var;

static saved_var env_set(const char *name, const char *value) {
  const char *old = getenv(name);
  saved_var s = {name, old ? strdup(old) : NULL, old != NULL};
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  env_reload();
  return s;
}

static void env_restore(saved_var s) {
  if (s.was_set && s.value) setenv(s.name, s.value, 1);
  else unsetenv(s.name);
  free(s.value);
  env_reload();
}

/* a fresh graph x * 3 + 1 over 37 floats, realized and compared; the status of the realize */
static tg_status realize_small(bool check) {
  float xv[37], got[37], want[37];
  for (int i = 0; i < 37; i++) xv[i] = (float)i * 0.25f - 3, want[i] = xv[i] * 3 + 1;
  tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){37}, xv, sizeof xv);
  tg_tensor *y = tg_add_scalar(tg_mul_scalar(x, 3), 1);
  tg_status st = y ? tg_to_host(y, got, sizeof got) : tg_error_status();
  if (st == TG_OK && check) CHECK_CLOSE("x*3+1", got, want, 37);
  tg_scope_end();
  return st;
}

/* the error of a call that depends on name: TG_ERR_ARG, naming the variable and its value, saying what is
 * accepted */
static void check_env_error(tg_status st, const char *name, const char *value, const char *call) {
  const char *e = tg_error();
  CHECK(st == TG_ERR_ARG, "%s=%s: %s returned %d (%s)", name, value, call, (int)st, e);
  char nv[128];
  snprintf(nv, sizeof nv, "%s=%s", name, value);
  CHECK(strstr(e, nv) && strstr(e, "accepted"), "%s: %s's message does not name %s and the accepted values: \"%s\"",
        nv, call, nv, e);
}

static const struct { const char *name, *value; } bad_values[] = {
    {"BEAM", "abc"},          {"BEAM", "-1"},          {"BEAM", "1000"},        {"BEAM", "2x"},
    {"DEBUG", "abc"},         {"DEBUG", "8"},          {"DEBUG", "-1"},         {"DEBUG", "99999999999999999999"},
    {"NOOPT", "x"},           {"NOOPT", "2"},          {"NOOPT", "true"},       {"TG_THREADS", "abc"},
    {"TG_THREADS", "-4"},     {"TG_THREADS", "0"},     {"TG_THREADS", "100000"}, {"TG_THREADS", " 4"},
    {"TG_THREADS", "4 "},     {"TG_BEAM_LIMIT", "abc"}, {"TG_BEAM_LIMIT", "0"},   {"TG_BEAM_LIMIT", "-1"},
    {"TG_BEAM_LIMIT", "inf"}, {"TG_BEAM_LIMIT", "nan"}, {"TG_BEAM_LIMIT", "5s"},  {"TG_NO_NATIVE", "x"},
    {"TG_NO_NATIVE", "yes"},  {"TG_VEC_BYTES", "12"},  {"TG_VEC_BYTES", "abc"},  {"TG_CC", "\"cc"},
    {"TG_CC", "cc 'x"},       {"DEV", "METAL"},        {"DEV", "CL:"},          {"DEV", "FOO"},
    {"DEV", "CPU:8"},         {"DEV", "CPU:"},         {"DEV", "cuda:x"},       {"DEV", "CUDA:12345"},
    {"TG_CHUNKS", "0"},       {"TG_CHUNKS", "65"},     {"TG_CHUNKS", "x"},
};

TEST(test_env_bad_value_is_an_error_from_realize_naming_the_variable) {
  CHECK(realize_small(true) == TG_OK, "the environment as given fails: %s", tg_error());
  for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
    const char *name = bad_values[i].name, *value = bad_values[i].value;
    saved_var s = env_set(name, value);
    /* the first call that depends on it, and every one after it */
    for (int k = 0; k < 2; k++) {
      tg_error_clear();
      check_env_error(realize_small(false), name, value, k ? "a second realize" : "realize");
    }
    env_restore(s);
    CHECK(realize_small(true) == TG_OK, "after restoring %s: %s", name, tg_error());
  }
}

TEST(test_env_bad_dev_fails_tensor_creation) {
  saved_var s = env_set("DEV", "METAL");
  tg_error_clear();
  float v[3] = {1, 2, 3};
  tg_tensor *t = tg_from_data(TG_FLOAT32, 1, (int64_t[]){3}, v, sizeof v);
  CHECK(!t, "DEV=METAL: tg_from_data made a tensor");
  check_env_error(tg_error_status(), "DEV", "METAL", "tg_from_data");
  CHECK(strstr(tg_error(), "not built"), "the message says METAL is not built: %s", tg_error());
  tg_free(t);
  /* a tensor that needs no device now fails at its realize */
  tg_tensor *f = tg_full(TG_FLOAT32, 1, (int64_t[]){5}, 2.0);
  tg_error_clear();
  check_env_error(f ? tg_realize(f) : tg_error_status(), "DEV", "METAL", "tg_realize");
  tg_free(f);
  env_restore(s);
  s = env_set("DEV", "nonsense");
  tg_error_clear();
  check_env_error(realize_small(false), "DEV", "nonsense", "realize");
  CHECK(strstr(tg_error(), "unknown"), "DEV=nonsense: the message says the device is unknown: %s", tg_error());
  env_restore(s);
}

static tg_status double_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)ctx, (void)nin, (void)nout;
  out[0] = tg_mul_scalar(in[0], 2);
  return out[0] ? TG_OK : tg_error_status();
}

TEST(test_env_bad_jit_fails_jit_calls_only) {
  tg_jit *j = tg_jit_new(double_step, NULL, 1, 1);
  CHECK_T(j);
  saved_var s = env_set("JIT", "x");
  tg_scope_begin();
  float v[4] = {1, 2, 3, 4}, got[4] = {0}, want[4] = {2, 4, 6, 8};
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, v, sizeof v), *y = NULL;
  tg_error_clear();
  check_env_error(tg_jit_call(j, &x, &y), "JIT", "x", "tg_jit_call");
  CHECK(!y, "a refused call made an output");
  /* realize does not depend on JIT */
  CHECK(realize_small(true) == TG_OK, "JIT=x failed a plain realize: %s", tg_error());
  env_restore(s);
  for (int k = 0; k < 3; k++) {  /* run, capture, replay */
    CHECK(tg_jit_call(j, &x, &y) == TG_OK && y && tg_to_host(y, got, sizeof got) == TG_OK, "call %d: %s", k, tg_error());
    CHECK_CLOSE("jit x*2", got, want, 4);
    tg_free(y);
    y = NULL;
  }
  tg_scope_end();
  tg_jit_free(j);
}

TEST(test_env_good_values_are_read) {
  static const struct { const char *name, *value; } good[] = {
      {"DEV", "CPU"}, {"DEV", "cpu"}, {"DEV", "CPU:0"}, {"DEV", ""}, {"BEAM", "0"}, {"DEBUG", "0"}, {"NOOPT", "0"},
      {"JIT", "1"},   {"TG_NO_NATIVE", "0"}, {"TG_BEAM_LIMIT", "0.5"}, {"TG_THREADS", "2"}, {"TG_CC", ""},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    saved_var s = env_set(good[i].name, good[i].value);
    CHECK(env_check(ENV_ALL) == TG_OK, "%s=%s refused: %s", good[i].name, good[i].value, tg_error());
    env_restore(s);
  }
  saved_var a = env_set("BEAM", "3"), b = env_set("TG_BEAM_LIMIT", "2.5"), c = env_set("NOOPT", "1"),
            d = env_set("JIT", "0"), e = env_set("TG_THREADS", "7"), f = env_set("DEBUG", "0");
  const env_values *v = env_get();
  CHECK(v->beam == 3 && v->beam_limit == 2.5 && v->noopt && !v->jit && v->threads == 7 && v->debug == 0,
        "read beam %d limit %g noopt %d jit %d threads %d debug %d", v->beam, v->beam_limit, v->noopt, v->jit,
        v->threads, v->debug);
  env_restore(f), env_restore(e), env_restore(d), env_restore(c), env_restore(b), env_restore(a);
}

TEST(test_env_tg_cc_is_split_into_program_and_arguments) {
  static const struct { const char *text; const char *words[5]; } cases[] = {
      {"cc", {"cc"}},
      {"cc -O0", {"cc", "-O0"}},
      {"  gcc\t-O1   -g ", {"gcc", "-O1", "-g"}},
      {"cc '-DX=a b' \"-DY=c d\"", {"cc", "-DX=a b", "-DY=c d"}},
      {"/opt/my\\ cc/bin/cc -w", {"/opt/my cc/bin/cc", "-w"}},
      {"cc -DQ='\"x\"'", {"cc", "-DQ=\"x\""}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    saved_var s = env_set("TG_CC", cases[i].text);
    const env_values *v = env_get();
    CHECK(env_check(ENV_BIT(ENV_CC)) == TG_OK, "TG_CC=%s refused: %s", cases[i].text, tg_error());
    int n = 0;
    while (cases[i].words[n]) n++;
    for (int k = 0; k <= n; k++) {
      const char *got = v->cc_argv[k], *want = cases[i].words[k];
      CHECK(got == want || (got && want && !strcmp(got, want)), "TG_CC=%s: word %d is '%s', want '%s'", cases[i].text,
            k, got ? got : "(end)", want ? want : "(end)");
    }
    env_restore(s);
  }
  saved_var s = env_set("TG_CC", NULL);
  CHECK(!strcmp(env_get()->cc_argv[0], "cc") && !env_get()->cc_argv[1], "unset TG_CC: cc");
  env_restore(s);
}
