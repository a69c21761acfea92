/* run_tests.c — runs the registered tests; the last line is "N passed, N failed", then ", N skipped" when a test's
 * data or tool is missing (test_skip). */
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "runtime/device.h"
#include "test.h"

#define MAX_TESTS 4096
typedef struct test_entry { const char *name; test_fn fn; } test_entry;
static test_entry tests[MAX_TESTS];
static int ntests, cur_failures;
static bool cur_skipped;

void test_register(const char *name, test_fn fn) {
  if (ntests < MAX_TESTS) tests[ntests++] = (test_entry){name, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...) {
  if (cur_failures++ >= 10) return;  /* keep a failing test's output short */
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "  %s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

int test_failures_in_current(void) { return cur_failures; }

const char *test_device_name(void) {
  const device *d = device_default();
  if (!d) return "none";
  return d->kind == DEVICE_CPU ? "CPU" : d->kind == DEVICE_CL ? "CL" : "CUDA";
}

void test_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "  skipped: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  cur_skipped = true;
}

bool check_close_f32(const char *what, const float *got, const float *want, int64_t n, double atol, double rtol,
                     const char *file, int line) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    bool ok = (isnan(w) && isnan(g)) || (isinf(w) && g == w) || fabs(g - w) <= atol + rtol * fabs(w);
    if (!ok && bad++ < 4) test_fail(file, line, "%s[%lld]: got %.9g want %.9g", what, (long long)i, g, w);
  }
  if (bad > 4) test_fail(file, line, "%s: %lld of %lld elements differ", what, (long long)bad, (long long)n);
  return bad == 0;
}

bool check_equal_i64(const char *what, const int64_t *got, const int64_t *want, int64_t n, const char *file, int line) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i] && bad++ < 4)
      test_fail(file, line, "%s[%lld]: got %lld want %lld", what, (long long)i, (long long)got[i], (long long)want[i]);
  if (bad > 4) test_fail(file, line, "%s: %lld of %lld elements differ", what, (long long)bad, (long long)n);
  return bad == 0;
}

bool test_temp_dir(char *out, size_t cap) {
  const char *t = getenv("TMPDIR");
  snprintf(out, cap, "%s/tgc-test-XXXXXX", t && *t ? t : "/tmp");
  return mkdtemp(out) != NULL;
}

void test_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const test_entry *)a)->name, ((const test_entry *)b)->name);
}

/* render_check.c: TG_RENDER_CHECK=CUDA compiles every kernel of the run as CUDA C too */
bool render_check_begin(void);
int render_check_end(void);

/* run_tests [--shard I/N] [FILTER]: the tests whose names contain FILTER; with --shard, only every Nth of them
 * from the Ith (0-based), so N processes run the suite side by side (DEV=CL in CI: PoCL compiles each kernel
 * for about half a second on one core) */
int main(int argc, char **argv) {
  qsort(tests, (size_t)ntests, sizeof tests[0], cmp_name);
  int shard = 0, nshards = 1;
  if (argc > 2 && !strcmp(argv[1], "--shard")) {
    if (sscanf(argv[2], "%d/%d", &shard, &nshards) != 2 || nshards < 1 || shard < 0 || shard >= nshards) {
      fprintf(stderr, "run_tests: --shard I/N with 0 <= I < N, got '%s'\n", argv[2]);
      return 2;
    }
    argc -= 2;
    argv += 2;
  }
  if (!render_check_begin()) return 2;
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0, match = 0; i < ntests; i++) {
    if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
    if (match++ % nshards != shard) continue;
    cur_failures = 0;
    cur_skipped = false;
    tg_error_clear();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tests[i].fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (cur_failures) failed++;
    else if (cur_skipped) skipped++;
    else passed++;
    fprintf(stderr, "%s %s (%.0f ms)\n", cur_failures ? "FAIL" : cur_skipped ? "skip" : "ok  ", tests[i].name, ms);
  }
  int render_failures = render_check_end();
  tg_collect();
  if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else printf("%d passed, %d failed\n", passed, failed);
  return failed || render_failures ? 1 : 0;
}
