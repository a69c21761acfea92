/* test_render_cache.c — rendered kernels kept on disk under their AST (engine/render_cache.c): a graph realized
 * again after the in-memory caches are dropped (as a new process would) takes every kernel's source from disk
 * and computes the same numbers as plain C; a damaged file is found out and rendered again; a setting that
 * changes the code generator's choices (NOOPT) keys other files. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/render_cache.h"
#include "test.h"
#include "uop/env.h"

enum { M = 48, K = 40, N = 24 };

/* the files render_cache.c wrote in dir, each damaged (its middle bytes overwritten) when `damage` */
static int render_files(const char *dir, bool damage) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "render-", 7)) continue;
    n++;
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    FILE *f = damage ? fopen(p, "r+b") : NULL;
    if (f) {
      fseek(f, 0, SEEK_END);
      long len = ftell(f);
      fseek(f, len / 2, SEEK_SET);
      fwrite("garbage!", 1, 8, f);
      fclose(f);
    }
  }
  closedir(d);
  return n;
}

/* relu(x @ w + 1) summed over its rows, realized from a new graph and checked against C */
static void run_graph(const char *what) {
  static float x[M * K], w[K * N], got[M], want[M];
  for (int i = 0; i < M * K; i++) x[i] = (float)((i * 7) % 13) * 0.25f - 1.5f;
  for (int i = 0; i < K * N; i++) w[i] = (float)((i * 5) % 11) * 0.125f - 0.6f;
  for (int i = 0; i < M; i++) {
    double s = 0;
    for (int j = 0; j < N; j++) {
      double v = 1;
      for (int k = 0; k < K; k++) v += (double)x[i * K + k] * w[k * N + j];
      s += v > 0 ? v : 0;
    }
    want[i] = (float)s;
  }
  tg_scope_begin();
  tg_tensor *a = tg_from_data(TG_FLOAT32, 2, (int64_t[]){M, K}, x, sizeof x);
  tg_tensor *b = tg_from_data(TG_FLOAT32, 2, (int64_t[]){K, N}, w, sizeof w);
  tg_tensor *y = tg_sum(tg_relu(tg_add_scalar(tg_matmul(a, b), 1)), 1, (int[]){1}, false);
  CHECK(y && tg_to_host(y, got, sizeof got) == TG_OK, "%s: %s", what, tg_error());
  if (y) check_close_f32(what, got, want, M, 1e-4, 1e-4, __FILE__, __LINE__);
  tg_scope_end();
}

TEST(test_render_cache_serves_a_new_process_and_survives_damage) {
  REQUIRE_CPU();
  char dir[512];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  compile_cache_set_dir(dir);
  tg_collect();
  run_graph("first realize (renders)");
  int files = render_files(dir, false);
  CHECK(files >= 1, "no rendered kernel kept in %s", dir);

  tg_collect();  /* no kernel, program or schedule in memory: what a new process has */
  uint64_t h0 = render_cache_hits();
  run_graph("second realize (from disk)");
  CHECK(render_cache_hits() - h0 == (uint64_t)files, "%llu kernels from disk, want %d",
        (unsigned long long)(render_cache_hits() - h0), files);

  render_files(dir, true);
  tg_collect();
  h0 = render_cache_hits();
  run_graph("realize over damaged files");
  CHECK(render_cache_hits() == h0, "a damaged file was used");
  tg_collect();
  h0 = render_cache_hits();
  run_graph("realize over the files written again");
  CHECK(render_cache_hits() - h0 == (uint64_t)files, "the damaged files were not replaced: %llu hits of %d",
        (unsigned long long)(render_cache_hits() - h0), files);

  /* NOOPT renders other kernels: other keys, nothing taken from the optimized ones' files */
  setenv("NOOPT", "1", 1);
  env_reload();
  tg_collect();
  h0 = render_cache_hits();
  run_graph("NOOPT=1");
  CHECK(render_cache_hits() == h0, "NOOPT=1 took %llu kernels rendered with optimizations",
        (unsigned long long)(render_cache_hits() - h0));
  unsetenv("NOOPT");
  env_reload();

  tg_collect();
  compile_cache_set_dir(NULL);
  test_remove_dir(dir);
}
