/* bench_util.h — what the benchmark programs share: timing, medians, the load average, progress notes,
 * reading the peers' JSON lines, wrapping host arrays as tensors. Header-only: each bench/ file is a program
 * of its own. */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../examples/args.h"  /* strict flags: args_int, args_unknown, ARGS_EXIT (exit status 2) */
#include "tg.h"

/* --json: results as JSON lines on stdout and nothing else there */
static bool json_mode __attribute__((unused));

static inline double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* the median of v[0..n) (v is left as it is), NAN when n < 1 or out of memory */
static inline double median(const double *v, int n) {
  double *s = n > 0 ? malloc((size_t)n * sizeof *s) : NULL;
  if (!s) return NAN;
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return m;
}

/* the 1-minute load average, NAN if unknown: other processes running during the benchmark skew it */
static inline double loadavg1(void) {
  FILE *f = fopen("/proc/loadavg", "r");
  double v = NAN;
  if (f) {
    if (fscanf(f, "%lf", &v) != 1) v = NAN;
    fclose(f);
  }
  return v;
}

/* progress and tables on stdout, except in --json mode */
static inline void note(const char *fmt, ...) {
  if (json_mode) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

static inline void die_tg(const char *what) {
  fprintf(stderr, "%s: %s failed: %s (status %d)\n", program_invocation_short_name, what, tg_error(),
          (int)tg_error_status());
  exit(1);
}

/* a float32 tensor over host memory p (not copied) */
/* tinygrad's Adam defaults with the learning rate lr */
static inline tg_adam_opts adam_lr(double lr) {
  tg_adam_opts o = tg_adam_defaults();
  o.lr = lr;
  return o;
}

static inline tg_tensor *wrap(float *p, int ndim, const int64_t *shape) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
  tg_tensor *t = tg_from_blob(TG_FLOAT32, ndim, shape, p, n * sizeof(float));
  if (!t) die_tg("tg_from_blob");
  return t;
}

/* bench/<name>: beside this program's source in the tree (../../bench from build/bench/<program>), else
 * relative to the working directory */
static inline void bench_script_path(const char *name, char *out, size_t n) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      snprintf(out, n, "%s/../../bench/%s", exe, name);
      if (access(out, R_OK) == 0) return;
    }
  }
  snprintf(out, n, "bench/%s", name);
}

/* the standard output of `[env] $PYTHON bench/<name>` (python3 unless PYTHON is set; its stderr dropped when
 * quiet), or NULL with path naming the script when it is missing; close with pclose */
static inline FILE *bench_run_script(const char *name, const char *env, bool quiet, char *path, size_t npath) {
  bench_script_path(name, path, npath);
  if (access(path, R_OK) != 0) return NULL;
  const char *py = getenv("PYTHON");
  size_t n = strlen(path) + 256 + (env ? strlen(env) : 0);
  char *cmd = malloc(n);
  if (!cmd) return NULL;
  snprintf(cmd, n, "%s %s '%s'%s", env ? env : "", py && *py ? py : "python3", path, quiet ? " 2>/dev/null" : "");
  FILE *f = popen(cmd, "r");
  free(cmd);
  return f;
}

/* where the value of "key" starts in a flat JSON object line (spaces after the colon skipped), NULL if absent */
static inline const char *json_value(const char *s, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *p = strstr(s, k);
  if (!p) return NULL;
  p += strlen(k);
  while (*p == ' ') p++;
  return p;
}

/* the string value of "key", into out */
static inline bool json_str(const char *s, const char *key, char *out, size_t n) {
  const char *p = json_value(s, key);
  if (!p || *p != '"') return false;
  p++;
  size_t len = strcspn(p, "\"");
  snprintf(out, n, "%.*s", (int)(len < n - 1 ? len : n - 1), p);
  return true;
}

/* the number value of "key", NAN if absent */
static inline double json_num(const char *s, const char *key) {
  const char *p = json_value(s, key);
  if (!p) return NAN;
  char *end;
  double v = strtod(p, &end);
  return end == p ? NAN : v;
}

#endif
