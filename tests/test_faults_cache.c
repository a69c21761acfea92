/* test_faults_cache.c — faults around compiling kernels: a damaged kernel cache (truncated, garbage bytes,
 * a valid object made for another kernel), a cache directory that cannot be written, a compiler that fails
 * or is missing, and a compiler command with arguments. Every case must end in the right numbers or a clear
 * error, never a crash and never a wrong result; the library keeps working afterwards.
 *
 * Runs that load a damaged file happen in a forked child: a regression there dies of a signal inside
 * dlopen (a truncated object did: SIGBUS), and the child turns that into one failed test instead of the
 * end of the whole run. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/device.h"
#include "test.h"
#include "uop/env.h"

#define N 1000

/* a fresh, empty kernel cache in dir, and no kernel in memory */
static bool fresh_cache(char *dir, size_t cap) {
  if (!test_temp_dir(dir, cap)) {
    CHECK(false, "mkdtemp failed");
    return false;
  }
  compile_cache_set_dir(dir);
  tg_collect();
  return true;
}

static void drop_cache(const char *dir) {
  tg_collect();
  compile_cache_set_dir(NULL);
  test_remove_dir(dir);
}

/* the .so files in dir: how many, and the path of the first one not in skip (NULL: none) into out */
static int so_files(const char *dir, const char *skip, char *out, size_t cap) {
  DIR *d = opendir(dir);
  int n = 0;
  if (out) out[0] = 0;
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".so")) continue;
    n++;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (out && !out[0] && (!skip || strcmp(p, skip))) snprintf(out, cap, "%s", p);
  }
  closedir(d);
  return n;
}

/* x*y (mul) or x+y over N floats, realized from a fresh graph and compared with C; the realize's status */
static tg_status run_binop(bool mul) {
  static float x[N], y[N], got[N], want[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 17) * 0.5f - 2, y[i] = (float)(i % 5) + 1.5f;
    want[i] = mul ? x[i] * y[i] : x[i] + y[i];
  }
  tg_scope_begin();
  tg_tensor *a = tg_from_data(TG_FLOAT32, 1, (int64_t[]){N}, x, sizeof x);
  tg_tensor *b = tg_from_data(TG_FLOAT32, 1, (int64_t[]){N}, y, sizeof y);
  tg_tensor *c = mul ? tg_mul(a, b) : tg_add(a, b);
  tg_status st = c ? tg_to_host(c, got, sizeof got) : tg_error_status();
  if (st == TG_OK) CHECK_CLOSE(mul ? "x*y" : "x+y", got, want, N);
  tg_scope_end();
  return st;
}

/* runs fn(ctx) in a child process; true if the child neither failed a CHECK nor died */
static bool isolated(void (*fn)(void *), void *ctx, const char *what) {
  fflush(NULL);
  int before = test_failures_in_current();
  pid_t pid = fork();
  if (pid < 0) {
    CHECK(false, "%s: fork failed", what);
    return false;
  }
  if (pid == 0) {
    fn(ctx);
    fflush(NULL);
    _exit(test_failures_in_current() > before ? 1 : 0);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0) {}
  CHECK(!WIFSIGNALED(st), "%s: the child died of signal %d", what, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  CHECK(!WIFEXITED(st) || WEXITSTATUS(st) == 0, "%s: the child's checks failed", what);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

typedef struct reload_case { const char *path; uint64_t rejects; } reload_case;

/* the damaged file is found out, deleted and compiled again: right numbers, one rejection, a good file */
static void reload_mul(void *ctx) {
  reload_case *c = ctx;
  uint64_t r0 = runtime_get_counters().disk_rejects, n0 = runtime_get_counters().compiles;
  CHECK(run_binop(true) == TG_OK, "realize after damaging the cache: %s", tg_error());
  runtime_counters rc = runtime_get_counters();
  CHECK(rc.disk_rejects == r0 + c->rejects, "%llu damaged files counted, want %llu",
        (unsigned long long)(rc.disk_rejects - r0), (unsigned long long)c->rejects);
  CHECK(rc.compiles == n0 + 1, "%llu compiles, want 1", (unsigned long long)(rc.compiles - n0));
  /* the replacement is a good entry: a new process loads it without compiling */
  tg_collect();
  n0 = runtime_get_counters().compiles;
  CHECK(run_binop(true) == TG_OK, "realize from the replaced file: %s", tg_error());
  CHECK(runtime_get_counters().compiles == n0, "the replaced file was not loaded from disk");
}

static bool write_at(const char *path, off_t off, const void *b, size_t n) {
  int fd = open(path, O_WRONLY);
  if (fd < 0) return false;
  bool ok = pwrite(fd, b, n, off) == (ssize_t)n;
  return close(fd) == 0 && ok;
}

typedef enum { CUT_HALF, CUT_EMPTY, CUT_RECORD, GARBAGE_ALL, GARBAGE_AFTER_HEADER, FLIP_ONE_BYTE, DAMAGE_KINDS } damage;
static const char *const damage_names[] = {"truncated to half", "truncated to 0 bytes", "the last 8 bytes cut",
                                           "all garbage", "garbage after the ELF header", "one byte flipped"};

static bool damage_file(const char *path, damage how) {
  struct stat sb;
  if (stat(path, &sb) != 0) return false;
  off_t size = sb.st_size;
  static unsigned char junk[1 << 16];
  uint32_t s = 12345;
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)((s = s * 1664525u + 1013904223u) >> 24);
  switch (how) {
    case CUT_HALF: return truncate(path, size / 2) == 0;
    case CUT_EMPTY: return truncate(path, 0) == 0;
    case CUT_RECORD: return truncate(path, size - 8) == 0;
    case GARBAGE_ALL: return (size_t)size <= sizeof junk && write_at(path, 0, junk, (size_t)size);
    case GARBAGE_AFTER_HEADER: return (size_t)size <= sizeof junk + 64 && write_at(path, 64, junk, (size_t)size - 64);
    case FLIP_ONE_BYTE: {
      unsigned char b;
      int fd = open(path, O_RDWR);
      if (fd < 0) return false;
      bool ok = pread(fd, &b, 1, size / 2) == 1;
      b ^= 0x40;
      ok = ok && pwrite(fd, &b, 1, size / 2) == 1;
      return close(fd) == 0 && ok;
    }
    default: return false;
  }
}

TEST(test_faults_cache_damaged_entry_is_compiled_again) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!fresh_cache(dir, sizeof dir)) return;
  char path[PATH_MAX + 256];
  CHECK(run_binop(true) == TG_OK, "first realize: %s", tg_error());
  CHECK(so_files(dir, NULL, path, sizeof path) == 1 && path[0], "one kernel file in %s", dir);
  for (int how = 0; how < DAMAGE_KINDS && path[0]; how++) {
    tg_collect();  /* as a new process: nothing in memory */
    CHECK(damage_file(path, (damage)how), "could not damage %s (%s)", path, damage_names[how]);
    reload_case c = {path, 1};
    if (!isolated(reload_mul, &c, damage_names[how])) break;
    /* the child replaced the file with a good one: the next kind of damage starts from that */
  }
  drop_cache(dir);
}

TEST(test_faults_cache_valid_object_of_another_kernel_is_compiled_again) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!fresh_cache(dir, sizeof dir)) return;
  char mul_path[PATH_MAX + 256], add_path[PATH_MAX + 256];
  CHECK(run_binop(true) == TG_OK, "x*y: %s", tg_error());
  so_files(dir, NULL, mul_path, sizeof mul_path);
  CHECK(run_binop(false) == TG_OK, "x+y: %s", tg_error());
  CHECK(so_files(dir, mul_path, add_path, sizeof add_path) == 2 && add_path[0] && mul_path[0],
        "two kernel files in %s", dir);
  if (!add_path[0] || !mul_path[0]) {
    drop_cache(dir);
    return;
  }
  /* the add kernel's file, whole and loadable, under the mul kernel's name (as a copy between caches,
   * or a hash collision, would leave it) */
  tg_collect();
  CHECK(rename(add_path, mul_path) == 0, "rename");
  reload_case c = {mul_path, 1};
  isolated(reload_mul, &c, "the add kernel under the mul kernel's name");
  drop_cache(dir);
}

TEST(test_faults_cache_unwritable_cache_dir_still_computes) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!fresh_cache(dir, sizeof dir)) return;
  /* root ignores permissions: a path below a regular file cannot be a directory for anyone */
  char file[PATH_MAX + 16], below[PATH_MAX + 32];
  snprintf(file, sizeof file, "%s/plainfile", dir);
  int fd = open(file, O_CREAT | O_WRONLY, 0644);
  CHECK(fd >= 0 && write(fd, "x", 1) == 1, "create %s", file);
  if (fd >= 0) close(fd);
  snprintf(below, sizeof below, "%s/cache", file);
  const char *dirs[2] = {below, file};  /* a directory below a file; the file itself as the directory */
  for (int i = 0; i < 2; i++) {
    compile_cache_set_dir(dirs[i]);
    tg_collect();
    CHECK(run_binop(true) == TG_OK, "cache dir %s: %s", dirs[i], tg_error());
  }
  /* no cache and no private temporary directory either: a clear error, and the library recovers */
  const char *old = getenv("TMPDIR");
  char *saved = old ? strdup(old) : NULL;
  char tmpdir[PATH_MAX + 32];
  snprintf(tmpdir, sizeof tmpdir, "%s/tmp", file);
  setenv("TMPDIR", tmpdir, 1);
  tg_collect();
  tg_error_clear();
  tg_status st = run_binop(false);
  CHECK(st == TG_ERR_IO && strstr(tg_error(), tmpdir), "no writable directory: status %d, \"%s\"", (int)st, tg_error());
  if (saved) setenv("TMPDIR", saved, 1);
  else unsetenv("TMPDIR");
  free(saved);
  CHECK(run_binop(false) == TG_OK, "with TMPDIR back: %s", tg_error());
  drop_cache(dir);
}

/* a copy of TG_CC (NULL when unset), to put back with set_cc */
static char *saved_cc(void) {
  const char *o = getenv("TG_CC");
  return o ? strdup(o) : NULL;
}

/* TG_CC set to value (NULL: unset) and re-read */
static void set_cc(const char *value) {
  if (value) setenv("TG_CC", value, 1);
  else unsetenv("TG_CC");
  env_reload();
}

TEST(test_faults_cache_failing_or_missing_compiler_is_a_device_error) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!fresh_cache(dir, sizeof dir)) return;
  char *orig = saved_cc();
  static const char *const bad_cc[] = {"false", "/nonexistent/cc", "/nonexistent/cc -O2"};
  for (int i = 0; i < 3; i++) {
    set_cc(bad_cc[i]);
    tg_collect();
    int files = so_files(dir, NULL, NULL, 0);
    for (int k = 0; k < 2; k++) {  /* the first realize, and one after it */
      tg_error_clear();
      tg_status st = run_binop(true);
      char want[64];
      snprintf(want, sizeof want, "TG_CC='%s'", bad_cc[i]);
      CHECK(st == TG_ERR_DEVICE, "TG_CC=%s: status %d (%s)", bad_cc[i], (int)st, tg_error());
      CHECK(strstr(tg_error(), want), "TG_CC=%s: the message does not name %s: \"%s\"", bad_cc[i], want, tg_error());
    }
    CHECK(so_files(dir, NULL, NULL, 0) == files, "a failed compile left a kernel file");
    set_cc(orig);
    CHECK(run_binop(true) == TG_OK, "TG_CC restored after %s: %s", bad_cc[i], tg_error());
  }
  free(orig);
  drop_cache(dir);
}

TEST(test_faults_cache_tg_cc_with_arguments_compiles) {
  REQUIRE_CPU();
  char dir[PATH_MAX];
  if (!fresh_cache(dir, sizeof dir)) return;
  char *orig = saved_cc(), cmd[512];
  snprintf(cmd, sizeof cmd, "%s -O0 -DTGC_TEST_DEFINE=\"1 2\"", orig && *orig ? orig : "cc");
  set_cc(cmd);
  uint64_t n0 = runtime_get_counters().compiles;
  CHECK(run_binop(true) == TG_OK && run_binop(false) == TG_OK, "TG_CC=%s: %s", cmd, tg_error());
  CHECK(runtime_get_counters().compiles == n0 + 2, "TG_CC=%s: %llu compiles, want 2", cmd,
        (unsigned long long)(runtime_get_counters().compiles - n0));
  set_cc(orig);
  free(orig);
  drop_cache(dir);
}
