/* bench_util.h — what the benchmark programs share: reading the peers' JSON lines, timing. Header-only:
 * each bench/ file is a program of its own. */
#ifndef TG_BENCH_UTIL_H
#define TG_BENCH_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* the string value of "key" in a flat JSON object line, into out */
static inline bool json_str(const char *s, const char *key, char *out, size_t n) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": \"", key);
  const char *p = strstr(s, k);
  if (!p) return false;
  p += strlen(k);
  size_t len = strcspn(p, "\"");
  snprintf(out, n, "%.*s", (int)(len < n - 1 ? len : n - 1), p);
  return true;
}

/* the number value of "key", NAN if absent */
static inline double json_num(const char *s, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *p = strstr(s, k);
  if (!p) return NAN;
  p += strlen(k);
  char *end;
  double v = strtod(p, &end);
  return end == p ? NAN : v;
}

#endif
