/* test.h — the test harness: TEST() registers a function, CHECK() records a failure with file:line.
 * The runner (run_tests.c) runs every test, or those whose name contains argv[1], and ends with the line
 * "N passed, N failed". */
#ifndef TG_TEST_H
#define TG_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tg.h"

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int test_failures_in_current(void);
/* marks the current test skipped (its data, tool or device is missing), saying why; the runner counts it
 * as skipped, never as passed */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* the device the suite runs on (DEV): "CPU", "CL", "CUDA", ... */
const char *test_device_name(void);

/* A test of the CPU device itself (its compiler and disk cache, its thread pool, host pointers into buffers,
 * the CPU's code generation) is skipped when the suite runs on another device (DEV=CL, DEV=CUDA); every other
 * test runs on whichever device is selected. */
#define REQUIRE_CPU()                                                                  \
  do {                                                                                 \
    if (strcmp(test_device_name(), "CPU")) {                                           \
      test_skip("a test of the CPU device; the suite runs on %s", test_device_name()); \
      return;                                                                          \
    }                                                                                  \
  } while (0)

#define TEST(name)                                                                  \
  static void name(void);                                                           \
  __attribute__((constructor)) static void name##_register(void) { test_register(#name, name); } \
  static void name(void)

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);    \
  } while (0)

/* a tensor result was NULL: fail with tg_error() and leave the test */
#define CHECK_T(t)                                                                     \
  do {                                                                                 \
    if (!(t)) { test_fail(__FILE__, __LINE__, "%s is NULL: %s", #t, tg_error()); return; } \
  } while (0)

/* compares got to want elementwise with atol/rtol; reports the first mismatches; true if all close */
bool check_close_f32(const char *what, const float *got, const float *want, int64_t n, double atol, double rtol,
                     const char *file, int line);
bool check_equal_i64(const char *what, const int64_t *got, const int64_t *want, int64_t n, const char *file, int line);
/* a fresh directory under $TMPDIR or /tmp into out; false if none could be made */
bool test_temp_dir(char *out, size_t cap);
/* removes dir and the files in it */
void test_remove_dir(const char *dir);

/* ResNet's max pool in plain C: 3x3 windows, stride 2, padding 1 (never a max), over `planes` planes of h x h into
 * y, planes of (h - 1) / 2 + 1 squared */
static inline void ref_max_pool_3s2p1(const float *x, int planes, int h, float *y) {
  int oh = (h - 1) / 2 + 1;
  for (int c = 0; c < planes; c++)
    for (int i = 0; i < oh; i++)
      for (int j = 0; j < oh; j++) {
        float m = -INFINITY;
        for (int ky = 0; ky < 3; ky++)
          for (int kx = 0; kx < 3; kx++) {
            int yy = 2 * i + ky - 1, xx = 2 * j + kx - 1;
            if (yy >= 0 && yy < h && xx >= 0 && xx < h && x[(c * h + yy) * h + xx] > m) m = x[(c * h + yy) * h + xx];
          }
        y[(c * oh + i) * oh + j] = m;
      }
}

/* a plain C 3x3 convolution with padding 1 at output (o, i, j): x (ci, h, h), w (co, ci, 3, 3) */
static inline double ref_conv3x3_at(const float *x, const float *w, int ci, int h, int o, int i, int j) {
  double s = 0;
  for (int c = 0; c < ci; c++)
    for (int ky = 0; ky < 3; ky++)
      for (int kx = 0; kx < 3; kx++) {
        int yy = i + ky - 1, xx = j + kx - 1;
        if (yy >= 0 && yy < h && xx >= 0 && xx < h) s += (double)x[(c * h + yy) * h + xx] * w[((o * ci + c) * 3 + ky) * 3 + kx];
      }
  return s;
}

/* tinygrad's Adam defaults with the learning rate lr */
static inline tg_adam_opts adam_lr(double lr) {
  tg_adam_opts o = tg_adam_defaults();
  o.lr = lr;
  return o;
}

#define CHECK_CLOSE(what, got, want, n) check_close_f32(what, got, want, n, 1e-6, 1e-3, __FILE__, __LINE__)

#endif
