/* test_memory.c — a long loop of small graphs keeps a flat resident memory, and the IR does not grow. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/device.h"
#include "test.h"

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
  fclose(f);
  return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* one iteration: fresh inputs, a small fused graph, a realize and a read, all freed by the scope */
static bool step(int i, double *out) {
  tg_scope_begin();
  float d[8];
  for (int k = 0; k < 8; k++) d[k] = (float)(i % 7 + k);
  tg_tensor *a = tg_from_data(TG_FLOAT32, 1, (int64_t[]){8}, d, sizeof d);
  tg_tensor *y = tg_sum(tg_mul_scalar(tg_add(a, tg_exp(tg_neg(a))), 2.0), 0, NULL, false);
  *out = tg_item(y);
  bool ok = y != NULL;
  tg_scope_end();
  return ok;
}

TEST(test_memory_loop_of_100k_realizes_is_flat) {
  int iters = getenv("TG_TEST_QUICK") ? 20000 : 100000;
  long base = 0;
  size_t uops_mid = 0;
  for (int i = 0; i < iters; i++) {
    double v;
    if (!step(i, &v)) { CHECK(false, "iteration %d failed: %s", i, tg_error()); return; }
    if (i == 0 || i == iters - 1) {
      double want = 0;
      for (int k = 0; k < 8; k++) {
        double x = (float)(i % 7 + k);
        want += 2 * (x + exp(-x));
      }
      CHECK(fabs(v - want) <= 1e-4 * fabs(want), "iteration %d: got %g want %g", i, v, want);
    }
    if (i == iters / 10) {
      base = rss_kib();
      uops_mid = tg_get_stats().uops_live;
    }
  }
  long end = rss_kib();
  size_t uops_end = tg_get_stats().uops_live;
#ifndef __SANITIZE_ADDRESS__  /* AddressSanitizer keeps freed memory in quarantine: RSS says nothing there */
  CHECK(end - base < 4096, "resident memory grew by %ld KiB over %d iterations", end - base, iters - iters / 10);
#else
  (void)base;
  (void)end;
#endif
  CHECK(uops_end < uops_mid * 2 + 20000, "IR grew from %zu to %zu live nodes", uops_mid, uops_end);
}

TEST(test_memory_ir_is_collected_when_graphs_change) {
  tg_collect();
  size_t before = tg_get_stats().uops_live;
  /* distinct graphs every time (different shapes): nothing may pile up once tensors are gone */
  for (int i = 1; i <= 200; i++) {
    tg_scope_begin();
    tg_tensor *a = tg_full(TG_FLOAT32, 2, (int64_t[]){i, 3}, 1.0);
    tg_tensor *b = tg_reshape(tg_permute(tg_add_scalar(a, (double)i), 2, (int[]){1, 0}), 1, (int64_t[]){3 * i});
    CHECK_T(b);
    tg_scope_end();
  }
  tg_collect();
  size_t after = tg_get_stats().uops_live;
  CHECK(after <= before + 16, "live IR nodes went from %zu to %zu", before, after);
}

/* A loop whose result is a few MB: each iteration's buffers must come back for the next one. Before, dead
 * tensors' buffers waited for a collection at 256 MB made, so every iteration page-faulted fresh memory. */
TEST(test_memory_big_results_reuse_their_buffers_next_iteration) {
  int64_t n = 1 << 20;  /* 4 MiB of float32 */
  float *d = malloc((size_t)n * sizeof *d);
  if (!d) { CHECK(false, "out of memory"); return; }
  for (int64_t k = 0; k < n; k++) d[k] = (float)(k % 17);
  tg_collect();  /* earlier tests' dead IR would make the first collections wait longer */
  uint64_t allocated_at_3 = 0;
  for (int i = 0; i < 12; i++) {
    tg_scope_begin();
    tg_tensor *a = tg_from_data(TG_FLOAT32, 1, (int64_t[]){n}, d, (size_t)n * sizeof *d);
    tg_tensor *y = tg_add_scalar(tg_mul_scalar(a, 2.0), (double)i);
    float probe[4];
    CHECK(tg_realize(y) == TG_OK, "%s", tg_error());  /* the whole result, as a loop over big outputs makes */
    CHECK(tg_to_host(tg_shrink(y, 1, (int64_t[]){n - 4, n}), probe, sizeof probe) == TG_OK, "%s", tg_error());
    for (int k = 0; k < 4; k++) {
      float want = 2.0f * (float)((n - 4 + k) % 17) + (float)i;
      CHECK(probe[k] == want, "iteration %d element %d: got %g want %g", i, k, probe[k], want);
    }
    tg_scope_end();
    if (i == 3) allocated_at_3 = runtime_get_counters().buffers_allocated;
  }
  uint64_t allocated_end = runtime_get_counters().buffers_allocated;
  CHECK(allocated_end == allocated_at_3, "8 more iterations took %llu new blocks from the system instead of reusing freed ones",
        (unsigned long long)(allocated_end - allocated_at_3));
  free(d);
}
