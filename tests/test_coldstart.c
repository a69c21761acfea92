/* test_coldstart.c — the CPU's prebuild: the new kernels of a schedule compiled several at once
 * (TG_COMPILE_JOBS) and several to a translation unit, each stored in the disk cache as a compile() one by one
 * would store it, so that compile() and a later process find them; a source the compiler refuses among good
 * ones reports its own error. */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include "runtime/device.h"
#include "test.h"

#define NK 6

/* kernel k: out[i] = in[i] * (k + 2) + k, named scale_k */
static void kernel_src(int k, char *name, size_t ncap, char *src, size_t scap) {
  snprintf(name, ncap, "scale_%d", k);
  snprintf(src, scap,
           "void scale_%d(void **bufs, long long core_id, long long ncores, long long worker) {\n"
           "  float *o = bufs[0]; const float *a = bufs[1];\n"
           "  if (core_id) return; (void)ncores, (void)worker;\n"
           "  for (int i = 0; i < 64; i++) o[i] = a[i] * %d.0f + %d.0f;\n"
           "}\n",
           k, k + 2, k);
}

/* files in dir whose name ends with suffix, and (*other) any others */
static int count_files(const char *dir, const char *suffix, int *other) {
  DIR *d = opendir(dir);
  int n = 0;
  if (other) *other = 0;
  if (!d) return -1;
  struct dirent *e;
  size_t sl = strlen(suffix);
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    size_t l = strlen(e->d_name);
    if (l > sl && !strcmp(e->d_name + l - sl, suffix)) n++;
    else if (other) (*other)++;
  }
  closedir(d);
  return n;
}

/* runs kernel k's program and compares with the plain C formula */
static void check_scale(const tg_program *p, int k) {
  float a[64], o[64], want[64];
  for (int i = 0; i < 64; i++) {
    a[i] = (float)i * 0.25f - 3.0f;
    o[i] = -1.0f;
    want[i] = a[i] * (float)(k + 2) + (float)k;
  }
  void *bufs[2] = {o, a};
  CHECK(device_cpu()->launch(p, bufs, 2, 0, NULL) == TG_OK, "launch: %s", tg_error());
  CHECK_CLOSE("scale", o, want, 64);
}

static char *saved_jobs;

/* a fresh cache directory in dir, empty memory caches, TG_COMPILE_JOBS=jobs */
static bool begin(char *dir, size_t cap, const char *jobs) {
  const char *j = getenv("TG_COMPILE_JOBS");
  saved_jobs = j ? strdup(j) : NULL;
  setenv("TG_COMPILE_JOBS", jobs, 1);
  if (!test_temp_dir(dir, cap)) {
    CHECK(false, "mkdtemp failed");
    return false;
  }
  tg_collect();
  compile_cache_set_dir(dir);
  return true;
}

static void end(const char *dir) {
  tg_collect();
  compile_cache_set_dir(NULL);
  test_remove_dir(dir);
  if (saved_jobs) setenv("TG_COMPILE_JOBS", saved_jobs, 1);
  else unsetenv("TG_COMPILE_JOBS");
  free(saved_jobs);
  saved_jobs = NULL;
}

TEST(test_coldstart_prebuild_fills_the_disk_cache) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!begin(dir, sizeof dir, "3")) return;
  const device *d = device_cpu();
  CHECK(d->prebuild != NULL, "the CPU device has a prebuild hook");
  char names[NK][32], srcs[NK][512];
  const char *np[NK], *sp[NK];
  for (int k = 0; k < NK; k++) {
    kernel_src(k, names[k], sizeof names[k], srcs[k], sizeof srcs[k]);
    np[k] = names[k];
    sp[k] = srcs[k];
  }
  runtime_counters c0 = runtime_get_counters();
  if (d->prebuild) d->prebuild(d, NK, np, sp);
  runtime_counters c1 = runtime_get_counters();
  CHECK(c1.compiles == c0.compiles + NK && c1.prebuilt == c0.prebuilt + NK, "%llu compiles, %llu prebuilt (want %d)",
        (unsigned long long)(c1.compiles - c0.compiles), (unsigned long long)(c1.prebuilt - c0.prebuilt), NK);
  int other;
  int so = count_files(dir, ".so", &other);
  CHECK(so == NK && other == 0, "%d objects and %d other files in the cache (want %d and 0)", so, other, NK);
  /* compile() finds them in memory: no compiler runs */
  for (int k = 0; k < NK; k++) {
    tg_program *p = d->compile(d, names[k], srcs[k]);
    CHECK(p, "compile %s: %s", names[k], tg_error());
    if (p) check_scale(p, k);
    program_release(p);
  }
  runtime_counters c2 = runtime_get_counters();
  CHECK(c2.compiles == c1.compiles && c2.mem_hits == c1.mem_hits + NK, "compile() after prebuild: %llu compiles, "
        "%llu memory hits", (unsigned long long)(c2.compiles - c1.compiles), (unsigned long long)(c2.mem_hits - c1.mem_hits));
  /* as a new process: each one loads from the disk, under the key a serial compile uses */
  cpu_program_cache_clear();
  for (int k = 0; k < NK; k++) {
    bool from_disk = false;
    char *path = cpu_compile_to_file(srcs[k], &from_disk);
    CHECK(path && from_disk, "%s is in the disk cache: %s", names[k], path ? path : tg_error());
    free(path);
    tg_program *p = d->compile(d, names[k], srcs[k]);
    CHECK(p && p->from_disk, "compile %s loads it from the disk: %s", names[k], tg_error());
    if (p) check_scale(p, k);
    program_release(p);
  }
  CHECK(runtime_get_counters().compiles == c2.compiles, "nothing was compiled again");
  /* a warm prebuild loads them ahead without compiling */
  cpu_program_cache_clear();
  c0 = runtime_get_counters();
  d->prebuild(d, NK, np, sp);
  c1 = runtime_get_counters();
  CHECK(c1.compiles == c0.compiles && c1.disk_hits == c0.disk_hits + NK, "warm prebuild: %llu compiles, %llu disk hits",
        (unsigned long long)(c1.compiles - c0.compiles), (unsigned long long)(c1.disk_hits - c0.disk_hits));
  end(dir);
}

TEST(test_coldstart_prebuild_one_bad_kernel_reports_its_error) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!begin(dir, sizeof dir, "4")) return;
  const device *d = device_cpu();
  char names[NK][32], srcs[NK][512];
  const char *np[NK], *sp[NK];
  for (int k = 0; k < NK; k++) {
    kernel_src(k, names[k], sizeof names[k], srcs[k], sizeof srcs[k]);
    np[k] = names[k];
    sp[k] = srcs[k];
  }
  enum { BAD = 2 };
  snprintf(srcs[BAD], sizeof srcs[BAD], "void scale_%d(void **b, long long c, long long n) { int x = ; }\n", BAD);
  tg_error_clear();
  runtime_counters c0 = runtime_get_counters();
  if (d->prebuild) d->prebuild(d, NK, np, sp);
  runtime_counters c1 = runtime_get_counters();
  CHECK(tg_error_status() == TG_OK, "prebuild reports nothing itself: \"%s\"", tg_error());
  CHECK(c1.compiles == c0.compiles + NK && c1.prebuilt == c0.prebuilt + NK - 1, "%llu compiles, %llu prebuilt",
        (unsigned long long)(c1.compiles - c0.compiles), (unsigned long long)(c1.prebuilt - c0.prebuilt));
  int other;
  int so = count_files(dir, ".so", &other);
  CHECK(so == NK - 1 && other == 0, "%d objects and %d other files in the cache: nothing half-written (want %d, 0)",
        so, other, NK - 1);
  /* compile() gives the compiler's error for the bad one, without running the compiler again, and the rest */
  char first[1024] = "";
  for (int k = 0; k < NK; k++) {
    tg_error_clear();
    tg_program *p = d->compile(d, names[k], srcs[k]);
    if (k == BAD) {
      CHECK(!p && tg_error_status() == TG_ERR_DEVICE && strstr(tg_error(), "error") && strstr(tg_error(), "C compiler"),
            "the bad kernel: \"%s\"", tg_error());
      snprintf(first, sizeof first, "%s", tg_error());
    } else {
      CHECK(p, "compile %s: %s", names[k], tg_error());
      if (p) check_scale(p, k);
    }
    program_release(p);
  }
  CHECK(runtime_get_counters().compiles == c1.compiles, "compile() ran the compiler again");
  /* the same message as a compile one by one gives (the temporary source's name aside) */
  cpu_program_cache_clear();
  tg_error_clear();
  CHECK(!d->compile(d, names[BAD], srcs[BAD]), "the bad kernel alone fails too");
  const char *a = strstr(first, "failed (exit"), *b = strstr(tg_error(), "failed (exit");
  CHECK(a && b && !strncmp(first, tg_error(), (size_t)(a - first)) && !strncmp(a, b, 20),
        "prebuilt: \"%s\"; alone: \"%s\"", first, tg_error());
  end(dir);
}

TEST(test_coldstart_realize_many_new_kernels) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!begin(dir, sizeof dir, "4")) return;
  enum { N = 1000 };
  float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i % 97) * 0.03125f - 1.0f;
  for (int round = 0; round < 2; round++) {  /* empty cache, then as a new process with the cache filled */
    runtime_counters c0 = runtime_get_counters();
    tg_tensor *t = tg_from_data(TG_FLOAT32, 1, (int64_t[]){N}, x, sizeof x);
    CHECK_T(t);
    tg_tensor *outs[4] = {tg_exp(t), tg_sin(tg_mul_scalar(t, 3.0)), tg_sqrt(tg_add_scalar(tg_mul(t, t), 1.0)),
                          tg_sum(tg_mul(t, tg_add_scalar(t, 0.5)), 0, NULL, false)};
    for (int i = 0; i < 4; i++) CHECK_T(outs[i]);
    CHECK(tg_realize_many(4, outs) == TG_OK, "realize: %s", tg_error());
    uint64_t kernels = tg_kernel_count_last();
    runtime_counters c1 = runtime_get_counters();
    float got[3][N], want[3][N], sum = 0, sum_want = 0;
    for (int i = 0; i < 3; i++) CHECK(tg_to_host(outs[i], got[i], sizeof got[i]) == TG_OK, "read: %s", tg_error());
    CHECK(tg_to_host(outs[3], &sum, sizeof sum) == TG_OK, "read: %s", tg_error());
    double s = 0;
    for (int i = 0; i < N; i++) {
      want[0][i] = expf(x[i]);
      want[1][i] = sinf(x[i] * 3.0f);
      want[2][i] = sqrtf(x[i] * x[i] + 1.0f);
      s += (double)x[i] * ((double)x[i] + 0.5);
    }
    sum_want = (float)s;
    for (int i = 0; i < 3; i++) CHECK_CLOSE("output", got[i], want[i], N);
    CHECK_CLOSE("sum", &sum, &sum_want, 1);
    for (int i = 0; i < 4; i++) tg_free(outs[i]);
    tg_free(t);
    if (round == 0) {
      int so = count_files(dir, ".so", NULL);
      CHECK(kernels >= 2 && c1.prebuilt >= c0.prebuilt + 2 && so >= 2 && (uint64_t)so == c1.compiles - c0.compiles,
            "%llu kernels, %llu built ahead, %llu compiles, %d files in the cache", (unsigned long long)kernels,
            (unsigned long long)(c1.prebuilt - c0.prebuilt), (unsigned long long)(c1.compiles - c0.compiles), so);
    } else {
      CHECK(c1.compiles == c0.compiles && c1.disk_hits >= c0.disk_hits + 2, "second round: %llu compiles, %llu disk hits",
            (unsigned long long)(c1.compiles - c0.compiles), (unsigned long long)(c1.disk_hits - c0.disk_hits));
    }
    tg_collect();  /* the next round starts as a new process would: nothing in memory */
  }
  end(dir);
}

/* kernel k in render_c's layout (a comment naming it, a preamble, then NAME_body and NAME), out[i] = in[i] *
 * (k + 2) + k through the preamble's helper; pre picks one of two preambles; name_k names it (kernels of one
 * name and different code: a unit cannot hold both) */
static void unit_src(int k, int name_k, int pre, char *name, size_t ncap, char *src, size_t scap) {
  snprintf(name, ncap, "scale_%d", name_k);
  snprintf(src, scap,
           "/* scale_%d */\n"
           "%s"
           "static void scale_%d_body(float *o, const float *a) {\n"
           "  for (int i = 0; i < 64; i++) o[i] = tg_fma(a[i], %d.0f, %d.0f);\n"
           "}\n"
           "void scale_%d(void **bufs, long long core_id, long long ncores, long long worker) {\n"
           "  (void)ncores, (void)worker;\n"
           "  if (!core_id) scale_%d_body(bufs[0], bufs[1]);\n"
           "}\n",
           name_k,
           pre ? "typedef float tg_f;\nstatic inline tg_f tg_fma(tg_f a, tg_f b, tg_f c) { return a * b + c; }\n"
               : "static inline float tg_fma(float a, float b, float c) { return c + b * a; }\n",
           name_k, k + 2, k, name_k, name_k);
}

/* kernels of one preamble and different names compile as one translation unit (cpu_compile_batch): fewer
 * compiler processes than kernels, each kernel in the disk cache under its own key (a hard link to the unit's
 * object) for compile() and a later process; kernels of another preamble or of a name taken go to other units */
TEST(test_coldstart_prebuild_compiles_units_of_kernels) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!begin(dir, sizeof dir, "1")) return;
  const device *d = device_cpu();
  enum { N = 8 };
  /* kernels 0-5: preamble 1, names 0-5; kernel 6: preamble 1, the name of kernel 0; kernel 7: preamble 0 */
  static const int name_of[N] = {0, 1, 2, 3, 4, 5, 0, 7}, pre_of[N] = {1, 1, 1, 1, 1, 1, 1, 0};
  char names[N][32], srcs[N][1024];
  const char *np[N], *sp[N];
  for (int k = 0; k < N; k++) {
    unit_src(k, name_of[k], pre_of[k], names[k], sizeof names[k], srcs[k], sizeof srcs[k]);
    np[k] = names[k];
    sp[k] = srcs[k];
  }
  runtime_counters c0 = runtime_get_counters();
  d->prebuild(d, N, np, sp);
  runtime_counters c1 = runtime_get_counters();
  /* one thread, 4 kernels a unit at most (two units per thread): {0..3} {4, 5, 6} {7}, or 6 elsewhere */
  uint64_t compiles = c1.compiles - c0.compiles;
  CHECK(c1.prebuilt == c0.prebuilt + N && compiles >= 3 && compiles <= 4, "%llu compiles for %d kernels, %llu prebuilt",
        (unsigned long long)compiles, N, (unsigned long long)(c1.prebuilt - c0.prebuilt));
  int other, so = count_files(dir, ".so", &other);
  CHECK(so == N && other == 0, "%d objects and %d other files in the cache (want %d and 0)", so, other, N);
  for (int round = 0; round < 2; round++) {  /* from memory, then as a new process from the disk */
    for (int k = 0; k < N; k++) {
      tg_program *p = d->compile(d, names[k], srcs[k]);
      CHECK(p && (round == 0 || p->from_disk), "round %d: compile %s (kernel %d): %s", round, names[k], k, tg_error());
      if (p) check_scale(p, k);
      program_release(p);
    }
    CHECK(runtime_get_counters().compiles == c1.compiles, "round %d compiled again", round);
    cpu_program_cache_clear();
  }
  /* a prebuild as a new process compiles no unit again: each kernel loads from the disk */
  c0 = runtime_get_counters();
  d->prebuild(d, N, np, sp);
  for (int k = 0; k < N; k++) program_release(d->compile(d, names[k], srcs[k]));
  c1 = runtime_get_counters();
  CHECK(c1.compiles == c0.compiles && c1.disk_hits == c0.disk_hits + N, "warm prebuild: %llu compiles, %llu disk hits",
        (unsigned long long)(c1.compiles - c0.compiles), (unsigned long long)(c1.disk_hits - c0.disk_hits));
  cpu_program_cache_clear();
  /* a unit with a source the compiler refuses: each is compiled alone, the bad one reports its own error */
  end(dir);
  if (!begin(dir, sizeof dir, "1")) return;
  snprintf(srcs[1] + strlen(srcs[1]) - 2, 8, " x\n");  /* "... }\n" -> "... x\n": a syntax error */
  tg_error_clear();
  c0 = runtime_get_counters();
  d->prebuild(d, N, np, sp);
  c1 = runtime_get_counters();
  CHECK(tg_error_status() == TG_OK, "prebuild reports nothing itself: \"%s\"", tg_error());
  CHECK(c1.prebuilt == c0.prebuilt + N - 1, "%llu prebuilt", (unsigned long long)(c1.prebuilt - c0.prebuilt));
  for (int k = 0; k < N; k++) {
    tg_error_clear();
    tg_program *p = d->compile(d, names[k], srcs[k]);
    if (k == 1) {
      CHECK(!p && tg_error_status() == TG_ERR_DEVICE && strstr(tg_error(), "C compiler"), "the bad kernel: \"%s\"",
            tg_error());
    } else {
      CHECK(p, "compile %s (kernel %d): %s", names[k], k, tg_error());
      if (p) check_scale(p, k);
    }
    program_release(p);
  }
  so = count_files(dir, ".so", &other);
  CHECK(so == N - 1 && other == 0, "%d objects and %d other files: nothing half-written (want %d, 0)", so, other, N - 1);
  end(dir);
}
