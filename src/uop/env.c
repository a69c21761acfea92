/* env.c — the environment variables, parsed strictly once (env.h says which call checks which).
 *
 * Parsing is strict because a mistyped variable otherwise changes nothing visible: BEAM=abc ran without the
 * search, DEV=CUDA ran on the CPU. Integers are decimal digits with an optional '-' (so "-3" is reported as
 * out of range, not as garbage), nothing before or after; booleans are 0 or 1. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uop/env.h"
#include "uop/uop.h"

#define MSG_CAP 320
#define CC_CAP 1024

typedef struct env_state {
  env_values v;
  unsigned bad;               /* ENV_BIT()s of variables with a bad value */
  char msg[ENV_COUNT][MSG_CAP];
  char cc_words[CC_CAP];      /* the words of TG_CC, each NUL-terminated */
  char cc_text[CC_CAP];
} env_state;

static env_state state;
static atomic_bool loaded;
static atomic_uint generation;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* records var's message: "NAME=value: what is wrong; accepted: ..." */
__attribute__((format(printf, 3, 4))) static void bad(env_state *s, env_var var, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg[var], MSG_CAP, fmt, ap);
  va_end(ap);
  s->bad |= ENV_BIT(var);
}

/* the variable's value, NULL when unset or empty */
static const char *env_str(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* an integer variable in [lo, hi]; *out untouched when unset or bad */
static void parse_int(env_state *s, env_var var, const char *name, int lo, int hi, const char *accepted, int *out) {
  const char *v = env_str(name);
  if (!v) return;
  const char *p = v + (*v == '-');
  long long x = 0;
  bool digits = *p != 0, big = false;
  for (; *p; p++) {
    if (!isdigit((unsigned char)*p)) { digits = false; break; }
    if (x < 1000000000000LL) x = x * 10 + (*p - '0');
    else big = true;
  }
  if (!digits) {
    bad(s, var, "%s=%.64s: not an integer; accepted: %s", name, v, accepted);
    return;
  }
  if (*v == '-') x = -x;
  if (big || x < lo || x > hi) {
    bad(s, var, "%s=%.64s: out of range; accepted: %s", name, v, accepted);
    return;
  }
  *out = (int)x;
}

static void parse_bool(env_state *s, env_var var, const char *name, const char *meaning, bool *out) {
  const char *v = env_str(name);
  if (!v) return;
  if ((v[0] == '0' || v[0] == '1') && !v[1]) {
    *out = v[0] == '1';
    return;
  }
  bad(s, var, "%s=%.64s: not a boolean; accepted: 0 or 1 (%s)", name, v, meaning);
}

/* DEV: tinygrad's device names; whether the device is there is device_get's business (runtime/device.c) */
static void parse_dev(env_state *s) {
  static const char accepted[] = "CPU, CPU:n, CL, CL:n, CUDA or CUDA:n (n a device number)";
  const char *v = env_str("DEV");
  if (!v) return;
  size_t n = strcspn(v, ":");
  char name[16];
  bool long_name = n >= sizeof name;
  for (size_t i = 0; i < n && !long_name; i++) name[i] = (char)toupper((unsigned char)v[i]);
  name[long_name ? 0 : n] = 0;
  static const char *const not_built[] = {"NV", "AMD", "METAL", "LLVM", "NULL", "DISK", "GPU", "QCOM", "WEBGPU", NULL};
  if (!strcmp(name, "CPU") || !strcmp(name, "CL") || !strcmp(name, "CUDA")) {
    const char *idx = v + n;
    size_t nd = *idx ? strspn(idx + 1, "0123456789") : 0;
    if (*idx && (nd == 0 || nd > 4 || idx[1 + nd])) {
      bad(s, ENV_DEV, "DEV=%.64s: a device number is ':' and 1 to 4 digits; accepted: %s", v, accepted);
      return;
    }
    if (!strcmp(name, "CPU") && *idx && atoi(idx + 1) > 7) {  /* DEVICE_CPU_MAX (runtime/device.h) */
      bad(s, ENV_DEV, "DEV=%.64s: the CPU devices are CPU:0 .. CPU:7; accepted: %s", v, accepted);
      return;
    }
    snprintf(s->v.dev, sizeof s->v.dev, "%s%s", name, idx);
    return;
  }
  for (int i = 0; not_built[i]; i++)
    if (!strcmp(name, not_built[i])) {
      bad(s, ENV_DEV, "DEV=%.64s: the %s device is not built into tgc; accepted: %s", v, name, accepted);
      return;
    }
  bad(s, ENV_DEV, "DEV=%.64s: unknown device; accepted: %s", v, accepted);
}

static void parse_beam_limit(env_state *s) {
  static const char accepted[] = "seconds of search per kernel, a number > 0 and <= 1e6 (default 60)";
  const char *v = env_str("TG_BEAM_LIMIT");
  if (!v) return;
  char *end;
  double x = isdigit((unsigned char)v[0]) || v[0] == '.' ? strtod(v, &end) : NAN;
  if (isnan(x) || *end) {
    bad(s, ENV_BEAM_LIMIT, "TG_BEAM_LIMIT=%.64s: not a number; accepted: %s", v, accepted);
    return;
  }
  if (!(x > 0 && x <= 1e6)) {
    bad(s, ENV_BEAM_LIMIT, "TG_BEAM_LIMIT=%.64s: out of range; accepted: %s", v, accepted);
    return;
  }
  s->v.beam_limit = x;
}

/* TG_MEMORY_LIMIT: a byte count, optionally with a binary unit K, M, G or T (and an optional B or iB) */
static void parse_memory_limit(env_state *s) {
  static const char accepted[] = "a byte count, with an optional unit K, M, G or T (binary: 512M = 512 MiB)";
  const char *v = env_str("TG_MEMORY_LIMIT");
  if (!v) return;
  const char *p = v;
  unsigned long long x = 0;
  bool big = false;
  for (; isdigit((unsigned char)*p); p++) {
    if (x > (1ULL << 50)) big = true;
    else x = x * 10 + (unsigned)(*p - '0');
  }
  if (p == v) {
    bad(s, ENV_MEMORY_LIMIT, "TG_MEMORY_LIMIT=%.64s: not a byte count; accepted: %s", v, accepted);
    return;
  }
  static const char units[] = "KMGT";
  const char *u = *p ? strchr(units, toupper((unsigned char)*p)) : NULL;
  int shift = u ? 10 * (int)(u - units + 1) : 0;
  if (u) p++;
  if (u && (*p == 'i' || *p == 'I')) p++;
  if (*p == 'B' || *p == 'b') p++;
  if (*p) {
    bad(s, ENV_MEMORY_LIMIT, "TG_MEMORY_LIMIT=%.64s: not a byte count; accepted: %s", v, accepted);
    return;
  }
  if (big || x == 0 || (shift && x > (1ULL << (62 - shift)))) {
    bad(s, ENV_MEMORY_LIMIT, "TG_MEMORY_LIMIT=%.64s: out of range; accepted: %s, at least 1 byte", v, accepted);
    return;
  }
  s->v.memory_limit = (size_t)(x << shift);
}

/* TG_CC split into words as a shell would: blanks separate words, '...' and "..." group, a backslash
 * outside single quotes takes the next character as it is */
static void parse_cc(env_state *s) {
  const char *v = env_str("TG_CC");
  s->v.cc_text = NULL;
  snprintf(s->cc_words, sizeof s->cc_words, "cc");
  s->v.cc_argv[0] = s->cc_words;
  s->v.cc_argv[1] = NULL;
  if (!v) return;
  static const char accepted[] = "a compiler command, such as gcc, clang or \"cc -O0\"";
  if (strlen(v) >= CC_CAP) {
    bad(s, ENV_CC, "TG_CC=%.64s...: longer than %d characters; accepted: %s", v, CC_CAP - 1, accepted);
    return;
  }
  snprintf(s->cc_text, sizeof s->cc_text, "%s", v);
  s->v.cc_text = s->cc_text;
  const char *argv[ENV_CC_MAX_WORDS + 1];
  char *w = s->cc_words;  /* the words are never longer than the text */
  int argc = 0;
  const char *p = v;
  const char *why = NULL;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    if (!*p) break;
    if (argc == ENV_CC_MAX_WORDS) {
      why = "more than 16 words";
      break;
    }
    argv[argc++] = w;
    char quote = 0;
    for (; *p && (quote || (*p != ' ' && *p != '\t' && *p != '\n')); p++) {
      if (quote == '\'' && *p == '\'') quote = 0;
      else if (quote == '"' && *p == '"') quote = 0;
      else if (!quote && (*p == '\'' || *p == '"')) quote = *p;
      else if (quote != '\'' && *p == '\\' && p[1]) *w++ = *++p;
      else *w++ = *p;
    }
    *w++ = 0;
    if (quote) {
      why = quote == '"' ? "a \" is not closed" : "a ' is not closed";
      break;
    }
  }
  if (!why && (argc == 0 || !argv[0][0])) why = "no program";
  if (why) {
    bad(s, ENV_CC, "TG_CC=%.64s: %s; accepted: %s", v, why, accepted);
    snprintf(s->cc_words, sizeof s->cc_words, "cc");
    return;
  }
  for (int i = 0; i < argc; i++) s->v.cc_argv[i] = argv[i];
  s->v.cc_argv[argc] = NULL;
}

/* with lock held */
static void env_parse(env_state *s) {
  memset(s, 0, sizeof *s);
  s->v = (env_values){.jit = true, .beam_limit = 60.0, .vec_bytes = -1};
  parse_int(s, ENV_DEBUG, "DEBUG", 0, 7, "0..7 (1 kernel counts, 2 kernel timings, 3 kernel ASTs, 4 generated C)",
            &s->v.debug);
  parse_int(s, ENV_BEAM, "BEAM", 0, ENV_BEAM_MAX, "0..256, the beam width of the kernel search (0: no search)",
            &s->v.beam);
  parse_bool(s, ENV_NOOPT, "NOOPT", "1: no kernel optimizations", &s->v.noopt);
  parse_bool(s, ENV_JIT, "JIT", "0: tg_jit steps run eagerly", &s->v.jit);
  parse_dev(s);
  parse_int(s, ENV_THREADS, "TG_THREADS", 1, ENV_THREADS_MAX, "1..256 threads of the CPU pool (unset: all cores)",
            &s->v.threads);
  parse_beam_limit(s);
  parse_bool(s, ENV_NO_NATIVE, "TG_NO_NATIVE", "1: kernels without -march=native", &s->v.no_native);
  int vb = -1;
  parse_int(s, ENV_VEC_BYTES, "TG_VEC_BYTES", 0, 64, "0, 16, 32 or 64 bytes per vector (0: no vectors)", &vb);
  if (vb == 0 || vb == 16 || vb == 32 || vb == 64) s->v.vec_bytes = vb;
  else if (vb != -1)
    bad(s, ENV_VEC_BYTES, "TG_VEC_BYTES=%d: not a vector size; accepted: 0, 16, 32 or 64", vb);
  parse_cc(s);
  parse_memory_limit(s);
  parse_int(s, ENV_CHUNKS, "TG_CHUNKS", 1, ENV_CHUNKS_MAX,
            "1..64 chunks per thread of a threaded CPU kernel's loop (unset: by its length and work)", &s->v.chunks);
}

const env_values *env_get(void) {
  if (!atomic_load_explicit(&loaded, memory_order_acquire)) {
    pthread_mutex_lock(&lock);
    if (!atomic_load_explicit(&loaded, memory_order_relaxed)) {
      env_parse(&state);
      atomic_store_explicit(&loaded, true, memory_order_release);
    }
    pthread_mutex_unlock(&lock);
  }
  return &state.v;
}

tg_status env_check(unsigned mask) {
  env_get();
  unsigned b = state.bad & mask;
  if (!b) return TG_OK;
  int var = 0;
  while (!(b & ENV_BIT(var))) var++;
  tg_set_error(TG_ERR_ARG, "%s", state.msg[var]);
  return TG_ERR_ARG;
}

unsigned env_generation(void) { return atomic_load(&generation); }

void env_reload(void) {
  pthread_mutex_lock(&lock);
  env_parse(&state);
  atomic_fetch_add(&generation, 1);
  atomic_store_explicit(&loaded, true, memory_order_release);
  pthread_mutex_unlock(&lock);
}
