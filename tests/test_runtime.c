/* test_runtime.c — the CPU runtime: host buffers, the thread pool, compiling (memory and disk caches,
 * corrupt and unwritable caches, compiler errors) and launching kernels. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/device.h"
#include "test.h"
#include "uop/env.h"

/* c[i] = a[i] + b[i] for i < n; the range is split into ncores contiguous parts */
static const char *add_src =
    "#include <stdint.h>\n"
    "void add_f32(void **bufs, int64_t core_id, int64_t ncores, int64_t worker) {\n"
    "  (void)worker; float *c = bufs[0]; const float *a = bufs[1], *b = bufs[2];\n"
    "  int64_t n = *(const int64_t *)bufs[3];\n"
    "  int64_t chunk = (n + ncores - 1) / ncores, lo = core_id * chunk, hi = lo + chunk < n ? lo + chunk : n;\n"
    "  for (int64_t i = lo; i < hi; i++) c[i] = a[i] + b[i];\n"
    "}\n";

/* runs add_src's kernel p over n elements on nthreads and compares with a plain loop */
static void check_add_kernel(const tg_program *p, int64_t n, int nthreads) {
  const device *d = device_cpu();
  tg_buffer *a = buffer_new(d, (size_t)n * 4), *b = buffer_new(d, (size_t)n * 4), *c = buffer_new(d, (size_t)n * 4);
  float *want = malloc((size_t)n * 4);
  CHECK(a && b && c && want, "allocation failed: %s", tg_error());
  if (a && b && c && want) {
    float *pa = a->ptr, *pb = b->ptr, *pc = c->ptr;
    for (int64_t i = 0; i < n; i++) {
      pa[i] = (float)i * 0.5f;
      pb[i] = 3.0f - (float)(i % 7);
      pc[i] = -1.0f;
      want[i] = pa[i] + pb[i];
    }
    void *bufs[4] = {c->ptr, a->ptr, b->ptr, &n};
    tg_status st = d->launch(p, bufs, 4, nthreads, NULL);
    CHECK(st == TG_OK, "launch: %s", tg_error());
    CHECK_CLOSE("add", pc, want, n);
  }
  free(want);
  buffer_release(a);
  buffer_release(b);
  buffer_release(c);
}

TEST(test_runtime_buffers_are_aligned_and_copy) {
  REQUIRE_CPU();
  const device *d = device_cpu();
  size_t sizes[] = {0, 1, 63, 100, 4096, 70000, (size_t)3 << 20};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    tg_buffer *b = buffer_new(d, sizes[k]);
    CHECK(b && b->ptr, "buffer_new(%zu): %s", sizes[k], tg_error());
    if (!b) continue;
    CHECK((uintptr_t)b->ptr % 64 == 0, "buffer of %zu bytes at %p is not 64-byte aligned", sizes[k], b->ptr);
    CHECK(b->nbytes == sizes[k] && b->refcnt == 1 && b->dev == d && !b->wrapped, "buffer fields");
    if (sizes[k]) {
      unsigned char *src = malloc(sizes[k]), *dst = malloc(sizes[k]);
      for (size_t i = 0; i < sizes[k]; i++) src[i] = (unsigned char)(i * 31 + 7);
      CHECK(d->copyin(b, src, sizes[k]) == TG_OK, "copyin");
      CHECK(d->copyout(dst, b, sizes[k]) == TG_OK, "copyout");
      CHECK(!memcmp(src, dst, sizes[k]), "copy round trip of %zu bytes differs", sizes[k]);
      free(src);
      free(dst);
    }
    CHECK(d->copyin(b, "x", sizes[k] + 1) == TG_ERR_ARG, "copyin past the end must fail");
    buffer_retain(b);
    buffer_release(b);
    CHECK(b->refcnt == 1, "retain + release");
    buffer_release(b);
  }
  float user[4] = {1, 2, 3, 4};
  tg_buffer *w = buffer_wrap(d, user, sizeof user);
  CHECK(w && w->ptr == user && w->wrapped, "buffer_wrap");
  buffer_release(w);
  CHECK(user[3] == 4, "wrapped memory is the user's");
}

TEST(test_runtime_buffer_cache_reuses_blocks) {
  REQUIRE_CPU();
  const device *d = device_cpu();
  size_t old = buffer_cache_set_limit((size_t)64 << 20);
  tg_buffer *b = buffer_new(d, 12345);
  CHECK_T(b);
  void *p = b->ptr;
  buffer_release(b);
  runtime_counters c0 = runtime_get_counters();
  CHECK(c0.bytes_cached >= 12345, "released block is cached (%zu bytes cached)", c0.bytes_cached);
  b = buffer_new(d, 12340);  /* same size class */
  CHECK_T(b);
  CHECK(b->ptr == p, "same size class reuses the block");
  runtime_counters c1 = runtime_get_counters();
  CHECK(c1.buffer_cache_hits == c0.buffer_cache_hits + 1, "one cache hit");
  buffer_release(b);
  buffer_cache_flush();
  CHECK(runtime_get_counters().bytes_cached == 0, "flush empties the cache");
  buffer_cache_set_limit(0);
  b = buffer_new(d, 100);
  buffer_release(b);
  CHECK(runtime_get_counters().bytes_cached == 0, "limit 0 caches nothing");
  buffer_cache_set_limit(old);
}

static void count_task(void *ctx, int64_t core_id, int64_t ncores) {
  atomic_llong *counts = ctx;
  if (core_id >= 0 && core_id < ncores && ncores <= 64) atomic_fetch_add(&counts[core_id], 1);
  atomic_fetch_add(&counts[64], 1);
}

TEST(test_runtime_pool_runs_every_core_id_exactly_once) {
  REQUIRE_CPU();
  int n = pool_size();
  CHECK(n >= 1, "pool_size %d", n);
  int widths[] = {0, 1, 2, 3, 7};
  for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
    static atomic_llong counts[65];
    for (int i = 0; i < 65; i++) atomic_store(&counts[i], 0);
    int iters = 10000;
    for (int it = 0; it < iters; it++) pool_run(count_task, counts, widths[w]);
    int ncores = widths[w] ? widths[w] : n;
    for (int i = 0; i < ncores; i++)
      CHECK(atomic_load(&counts[i]) == iters, "nthreads=%d: core %d ran %lld times, want %d", widths[w], i,
            (long long)atomic_load(&counts[i]), iters);
    CHECK(atomic_load(&counts[64]) == (long long)iters * ncores, "nthreads=%d: %lld calls, want %lld", widths[w],
          (long long)atomic_load(&counts[64]), (long long)iters * ncores);
  }
}

static void nested_task(void *ctx, int64_t core_id, int64_t ncores) {
  (void)core_id, (void)ncores;
  pool_run(count_task, ctx, 3);  /* runs inline on this thread */
}

TEST(test_runtime_pool_nested_run_and_restart) {
  REQUIRE_CPU();
  static atomic_llong counts[65];
  for (int i = 0; i < 65; i++) atomic_store(&counts[i], 0);
  pool_run(nested_task, counts, 2);
  CHECK(atomic_load(&counts[64]) == 6, "nested pool_run: %lld calls, want 6", (long long)atomic_load(&counts[64]));
  pool_shutdown();  /* the next run starts the threads again */
  for (int i = 0; i < 65; i++) atomic_store(&counts[i], 0);
  pool_run(count_task, counts, 2);
  CHECK(atomic_load(&counts[0]) == 1 && atomic_load(&counts[1]) == 1, "pool restarts after shutdown");
}

TEST(test_runtime_compile_launch_and_memory_cache) {
  REQUIRE_CPU();
  const device *d = device_cpu();
  runtime_counters c0 = runtime_get_counters();
  tg_program *p = d->compile(d, "add_f32", add_src);
  CHECK_T(p);
  CHECK(p->fn && p->handle && p->compile_ms >= 0, "program fields");
  check_add_kernel(p, 1000003, 0);
  check_add_kernel(p, 5, 0);
  check_add_kernel(p, 1, 4);
  check_add_kernel(p, 777, 1);
  tg_program *q = d->compile(d, "add_f32", add_src);
  CHECK(q == p, "the same source compiles to the same program (%p vs %p)", (void *)q, (void *)p);
  runtime_counters c1 = runtime_get_counters();
  CHECK(c1.compiles <= c0.compiles + 1, "second compile ran the compiler (%llu -> %llu)",
        (unsigned long long)c0.compiles, (unsigned long long)c1.compiles);
  CHECK(c1.mem_hits == c0.mem_hits + 1, "second compile is a memory cache hit");
  program_release(q);
  program_release(p);
  tg_program *bad = d->compile(d, "no_such_kernel", add_src);
  CHECK(!bad && strstr(tg_error(), "no_such_kernel"), "missing symbol: %s", tg_error());
}

/* the disk cache steps, in a fresh cache directory dir */
static void disk_cache_steps(const char *dir) {
  const device *d = device_cpu();
  tg_program *p = d->compile(d, "add_f32", add_src);
  CHECK_T(p);
  CHECK(!p->from_disk, "fresh cache dir: compiled, not loaded");
  program_release(p);
  bool from_disk = false;
  char *path = cpu_compile_to_file(add_src, &from_disk);
  CHECK(path && from_disk, "the .so is in the cache dir: %s", path ? path : tg_error());
  if (!path) return;
  CHECK(!strncmp(path, dir, strlen(dir)), "path %s is under %s", path, dir);

  /* a new process would find it on disk */
  cpu_program_cache_clear();
  p = d->compile(d, "add_f32", add_src);
  CHECK(p && p->from_disk, "after clearing the memory cache the program comes from disk: %s", tg_error());
  if (p) check_add_kernel(p, 4099, 0);
  program_release(p);

  /* a truncated file is compiled again and replaced */
  cpu_program_cache_clear();
  CHECK(truncate(path, 100) == 0, "truncate");
  p = d->compile(d, "add_f32", add_src);
  CHECK(p && !p->from_disk, "a corrupt cache file is recompiled: %s", tg_error());
  if (p) check_add_kernel(p, 4099, 0);
  program_release(p);
  struct stat sb;
  CHECK(stat(path, &sb) == 0 && sb.st_size > 100, "the corrupt file was replaced");
  free(path);

  /* a cache "directory" below a regular file cannot be created: compile into a private file */
  char file[PATH_MAX + 16], sub[PATH_MAX + 32];
  snprintf(file, sizeof file, "%s/plainfile", dir);
  int fd = open(file, O_CREAT | O_WRONLY, 0644);
  CHECK(fd >= 0, "create %s", file);
  if (fd >= 0) close(fd);
  snprintf(sub, sizeof sub, "%s/cache", file);
  compile_cache_set_dir(sub);
  cpu_program_cache_clear();
  p = d->compile(d, "add_f32", add_src);
  CHECK(p && !p->from_disk, "unwritable cache dir: compiled anyway: %s", tg_error());
  if (p) check_add_kernel(p, 333, 0);
  program_release(p);
}

TEST(test_runtime_disk_cache_hit_corrupt_and_unwritable) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  compile_cache_set_dir(dir);
  cpu_program_cache_clear();
  disk_cache_steps(dir);
  cpu_program_cache_clear();
  compile_cache_set_dir(NULL);
  test_remove_dir(dir);
}

TEST(test_runtime_compile_error_reports_compiler_message) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  compile_cache_set_dir(dir);
  const device *d = device_cpu();
  tg_error_clear();
  tg_program *p = d->compile(d, "broken", "void broken(void **b, long c, long n) { int x = ; }\n");
  CHECK(!p, "a syntax error compiles to NULL");
  CHECK(tg_error_status() == TG_ERR_DEVICE, "status %d", (int)tg_error_status());
  CHECK(strstr(tg_error(), "error"), "the message carries the compiler's error: \"%s\"", tg_error());
  /* the same source again: the same error, without running the compiler again */
  char first[1024];
  snprintf(first, sizeof first, "%s", tg_error());
  runtime_counters c0 = runtime_get_counters();
  tg_error_clear();
  p = d->compile(d, "broken", "void broken(void **b, long c, long n) { int x = ; }\n");
  runtime_counters c1 = runtime_get_counters();
  CHECK(!p && tg_error_status() == TG_ERR_DEVICE && !strcmp(tg_error(), first), "second failure: \"%s\"", tg_error());
  CHECK(c1.compiles == c0.compiles, "the refused source was compiled again (%llu -> %llu compiles)",
        (unsigned long long)c0.compiles, (unsigned long long)c1.compiles);
  /* nothing is left behind in the cache directory */
  DIR *dd = opendir(dir);
  int files = 0;
  if (dd) {
    struct dirent *e;
    while ((e = readdir(dd)) != NULL) files += e->d_name[0] != '.';
    closedir(dd);
  }
  CHECK(files == 0, "%d files left in the cache dir after a failed compile", files);
  /* a missing function is remembered too; a different source still compiles */
  static const char ok_src[] = "void fine(void **b, long long c, long long n) { (void)b; (void)c; (void)n; }\n";
  CHECK(!d->compile(d, "absent", ok_src) && strstr(tg_error(), "absent"), "missing symbol: %s", tg_error());
  c0 = runtime_get_counters();
  CHECK(!d->compile(d, "absent", ok_src) && strstr(tg_error(), "absent"), "missing symbol again: %s", tg_error());
  CHECK(runtime_get_counters().compiles == c0.compiles, "a source without the function was compiled again");
  tg_program *fine = d->compile(d, "fine", ok_src);
  CHECK(fine, "a good source after failures: %s", tg_error());
  if (fine) program_release(fine);
  compile_cache_set_dir(NULL);
  test_remove_dir(dir);
}

TEST(test_runtime_device_default_reads_dev) {
  const char *old = getenv("DEV");
  char *saved = old ? strdup(old) : NULL;
  unsetenv("DEV");
  env_reload();
  CHECK(device_default() == device_cpu(), "DEV unset: CPU");
  setenv("DEV", "CPU", 1);
  env_reload();
  CHECK(device_default() == device_cpu(), "DEV=CPU");
  setenv("DEV", "FOO", 1);
  env_reload();
  CHECK(device_default() == NULL && strstr(tg_error(), "FOO"), "DEV=FOO: NULL and an error naming it: %s", tg_error());
  if (saved) setenv("DEV", saved, 1);
  else unsetenv("DEV");
  env_reload();
  free(saved);
  CHECK(device_cpu()->num_threads(device_cpu()) == pool_size(), "num_threads is the pool size");
}

TEST(test_runtime_hash_is_deterministic) {
  REQUIRE_CPU();
  CHECK(hash_bytes("abc", 3, 0) == hash_bytes("abc", 3, 0), "same input, same hash");
  CHECK(hash_bytes("abc", 3, 0) != hash_bytes("abd", 3, 0), "one byte changes the hash");
  CHECK(hash_bytes("abc", 3, 0) != hash_bytes("abc", 3, 1), "the seed changes the hash");
}
