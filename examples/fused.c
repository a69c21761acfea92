/* fused.c — a tour of tgc: a few lazy computations, each fused into as few kernels as possible.
 * Run with DEBUG=2 to see one line per kernel (name, time, GFLOP/s, GB/s); DEBUG=4 shows the C. No flags but
 * --help. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "tg.h"

static tg_tensor *randn_like_data(int ndim, const int64_t *shape, unsigned seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *d = malloc((size_t)n * sizeof *d);
  if (!d) return NULL;
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    d[i] = (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  tg_tensor *t = tg_from_data(TG_FLOAT32, ndim, shape, d, (size_t)n * sizeof *d);
  free(d);
  return t;
}

static int show(const char *what, tg_tensor *t, int count) {
  if (tg_realize(t) != TG_OK) {
    fprintf(stderr, "%s: %s\n", what, tg_error());
    return 1;
  }
  unsigned long long kernels = (unsigned long long)tg_kernel_count_last();
  int64_t n = tg_numel(t);
  float *h = malloc((size_t)n * sizeof *h);
  if (!h || tg_to_host(t, h, (size_t)n * sizeof *h) != TG_OK) {
    fprintf(stderr, "%s: %s\n", what, tg_error());
    free(h);
    return 1;
  }
  printf("%-34s %llu kernel%s:", what, kernels, kernels == 1 ? " " : "s");
  for (int i = 0; i < count && i < n; i++) printf(" %.4f", h[i]);
  printf("%s\n", n > count ? " ..." : "");
  free(h);
  return 0;
}

int main(int argc, char **argv) {
  args_prog = "fused";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: fused\n"
             "A few lazy computations, each fused into as few kernels as possible, with their kernel counts and\n"
             "first values. No flags but this one; DEBUG=2 prints one line per kernel (time, GFLOP/s, GB/s),\n"
             "DEBUG=4 the generated C.\n"
             "  -h, --help  this help\n");
      return 0;
    }
    args_unknown(argv[i]);
    return ARGS_EXIT;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);  /* keep results in line with the DEBUG lines on stderr */
  int err = 0;
  tg_scope_begin();
  int64_t n = 1 << 20;
  tg_tensor *a = randn_like_data(1, &n, 1), *b = randn_like_data(1, &n, 2), *c = randn_like_data(1, &n, 3);
  /* relu(a*b + c) * 0.5: one elementwise kernel */
  err |= show("relu(a*b+c)*0.5 over 1M", tg_mul_scalar(tg_relu(tg_add(tg_mul(a, b), c)), 0.5), 6);

  int64_t sx[2] = {256, 512}, sw[2] = {512, 128};
  tg_tensor *x = randn_like_data(2, sx, 4), *w = randn_like_data(2, sw, 5);
  /* a matmul with its epilogue and a reduction after it: one kernel */
  err |= show("matmul(x,w).relu().sum(1)", tg_sum(tg_relu(tg_matmul(x, w)), 1, (int[]){1}, false), 6);
  /* softmax: max, sum of exp, divide */
  err |= show("softmax(x, axis=1)", tg_softmax(x, 1), 6);
  /* layernorm-style normalization */
  tg_tensor *mean = tg_mean(x, 1, (int[]){1}, true);
  tg_tensor *xc = tg_sub(x, mean);
  tg_tensor *var = tg_mean(tg_mul(xc, xc), 1, (int[]){1}, true);
  err |= show("(x-mean)/sqrt(var+eps)", tg_div(xc, tg_sqrt(tg_add_scalar(var, 1e-5))), 6);
  /* movement ops are index arithmetic, not copies */
  tg_tensor *t = tg_flip(tg_permute(tg_reshape(x, 3, (int64_t[]){16, 16, 512}), 3, (int[]){2, 0, 1}), 1, (int[]){0});
  err |= show("flip(permute(reshape(x))) + 1", tg_add_scalar(t, 1.0), 6);
  err |= show("sum of 1M elements", tg_sum(a, 0, NULL, false), 1);
  tg_scope_end();
  tg_collect();
  return err;
}
