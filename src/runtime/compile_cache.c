/* compile_cache.c — C source → shared object on disk, compiled once per (source, compiler, flags, CPU).
 *
 * The file is <dir>/<16 hex digits>.so, the hex being a hash of the source, the compiler's command and its
 * `--version` line, the flags and the CPU (model and feature flags: -march=native code from another CPU may
 * not run here). dir is TG_CACHE, else $XDG_CACHE_HOME/tgc, else $HOME/.cache/tgc.
 *
 * Each file ends with a record after the shared object (the loader maps what the ELF headers name and
 * ignores bytes after them): the keys of the sources it was compiled from (the key and a second independent
 * hash of each), the object's size, a checksum of its bytes and a magic. A cached file is checked against it
 * before dlopen sees it: a truncated object made dlopen die of SIGBUS, and an object copied over another
 * key's name loaded and computed the wrong thing. A file that fails the check is deleted, compiled again and
 * counted (compile_cache_rejects; DEBUG>=1 says so). New files are written under a temporary name in the same
 * directory, given their record and renamed into place, so another process never sees half a file, and
 * dlopen, which recognises files by path, never meets two codes under one name. When the cache directory
 * cannot be used, the object goes to a private temporary file instead.
 *
 * Several sources may be compiled as one translation unit (cpu_compile_batch: a compiler process costs ~35 ms
 * before it compiles anything, about as much as a kernel's own code): the object's record then lists every
 * source's keys, and each source's name is a hard link to it, so a later process finds each kernel under its
 * own key as before (dlopen maps the shared file once).
 *
 * The compiler is TG_CC split into words (env.c: "cc -O0" is the program cc with the argument -O0), run with
 * posix_spawnp (the fork+exec of the C library, without a shell, and without copying the page tables of a
 * large process), with stdin from /dev/null and its stdout and stderr in a pipe: nothing reaches the
 * terminal, and a failure's first lines become the tg_error() message, which names TG_CC.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/device.h"
#include "runtime/disk_blob.h"
#include "uop/env.h"
#include "uop/uop.h"

extern char **environ;

#define MAX_FLAGS 10
#define MAX_ARGS (ENV_CC_MAX_WORDS + MAX_FLAGS + 8)
#define OUT_CAP 4096  /* compiler output kept for the error message */
#define MAX_SO_BYTES ((size_t)256 << 20)  /* a cached file larger than this is not read, just replaced */
#define MAX_BATCH 64                      /* sources compiled as one unit at most (cpu_compile_batch) */

/* the compiler command, copied by value (no pointers into itself) so a compile runs without the lock */
typedef struct compiler {
  char words[1024];                 /* the command's words, each NUL-terminated */
  int off[ENV_CC_MAX_WORDS];        /* where each word starts in words */
  int nwords;
  const char *flags[MAX_FLAGS + 1]; /* NULL-terminated; static strings */
  char desc[1280];                  /* how messages name it: "the C compiler TG_CC='cc -O0'" */
} compiler;

static struct {
  pthread_mutex_t lock;
  bool ready;                 /* compiler, flags and CPU read */
  unsigned env_gen;           /* env_generation() they were read at */
  bool dir_ready;             /* dir resolved */
  char dir[PATH_MAX];         /* "" : no usable disk cache location */
  compiler cc;
  uint64_t key_seed;          /* hash of compiler, version, flags, CPU */
} cfg = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_ullong ncompiles, nrejects;
/* set when the compiler refused the last source this thread compiled (cpu_compile_so clears it) */
static _Thread_local bool rejected;

bool compile_cache_rejected(void) { return rejected; }

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  /* FNV-1a mixes its last bytes poorly into the high bits: finish with a 64-bit avalanche */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

uint64_t compile_cache_compiles(void) { return atomic_load(&ncompiles); }
uint64_t compile_cache_rejects(void) { return atomic_load(&nrejects); }

/* ---- running a program --------------------------------------------------------------------------------- */

/* runs argv (PATH searched) with stdout+stderr captured into out (first cap-1 bytes, NUL-terminated);
 * returns its exit status, 128+signal when killed, or -1 with the reason (strerror's text) in out if it did
 * not start */
static int run_capture(char *const argv[], char *out, size_t cap) {
  out[0] = 0;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    snprintf(out, cap, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_init(&at);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(fds[1]);
  if (err) {
    close(fds[0]);
    snprintf(out, cap, "%s", strerror(err));
    return -1;
  }
  size_t len = 0;
  char sink[512];
  for (;;) {  /* read to EOF (keeping the first cap-1 bytes) so the child never blocks on a full pipe */
    char *dst = len + 1 < cap ? out + len : sink;
    size_t room = len + 1 < cap ? cap - 1 - len : sizeof sink;
    ssize_t r = read(fds[0], dst, room);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (dst != sink) len += (size_t)r;
  }
  out[len] = 0;
  close(fds[0]);
  int st;
  pid_t w;
  while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
  if (w < 0) return 0;  /* SIGCHLD ignored by the application: the status is lost; the output file decides */
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* ---- configuration --------------------------------------------------------------------------------------- */

/* formats a path into out; false if it does not fit */
__attribute__((format(printf, 3, 4))) static bool fmt_path(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, cap, fmt, ap);
  va_end(ap);
  return n >= 0 && (size_t)n < cap;
}

/* appends to buf the first line of /proc/cpuinfo for each of keys */
static void append_cpuinfo(char *buf, size_t cap, const char *const *keys) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char *line = NULL;
  size_t n = 0;
  unsigned found = 0;
  while (getline(&line, &n, f) > 0) {
    for (unsigned k = 0; keys[k]; k++) {
      size_t kl = strlen(keys[k]);
      bool match = !strncmp(line, keys[k], kl) && (line[kl] == ' ' || line[kl] == '\t' || line[kl] == ':');
      if (match && !(found & (1u << k))) {
        found |= 1u << k;
        size_t used = strlen(buf);
        if (used + 1 < cap) snprintf(buf + used, cap - used, "%s", line);
      }
    }
  }
  free(line);
  fclose(f);
}

static void mix_str(uint64_t *h, const char *s) { *h = hash_bytes(s, strlen(s) + 1, *h); }


/* argv for running c: its program, then flags (NULL-terminated), then the arguments given in TG_CC (after
 * ours, so that TG_CC="cc -O0" compiles at -O0: the last -O wins), then tail; argv has room for MAX_ARGS */
static void compiler_argv(const compiler *c, char **argv, const char *const *flags, const char *const *tail) {
  int argc = 0;
  argv[argc++] = (char *)c->words;
  for (int i = 0; flags && flags[i]; i++) argv[argc++] = (char *)flags[i];
  for (int i = 1; i < c->nwords; i++) argv[argc++] = (char *)c->words + c->off[i];
  for (int i = 0; tail && tail[i]; i++) argv[argc++] = (char *)tail[i];
  argv[argc] = NULL;
}

/* with cfg.lock held: the compiler (TG_CC, split by env.c), its flags and the key seed, read again when the
 * environment was (env_reload, in tests) */
static void config_init(void) {
  const env_values *env = env_get();
  if (cfg.ready && cfg.env_gen == env_generation()) return;
  compiler *c = &cfg.cc;
  memset(c, 0, sizeof *c);
  size_t used = 0;
  for (int i = 0; env->cc_argv[i] && i < ENV_CC_MAX_WORDS; i++) {
    size_t n = strlen(env->cc_argv[i]) + 1;
    if (used + n > sizeof c->words) break;
    memcpy(c->words + used, env->cc_argv[i], n);
    c->off[c->nwords++] = (int)used;
    used += n;
  }
  if (env->cc_text) snprintf(c->desc, sizeof c->desc, "the C compiler TG_CC='%s'", env->cc_text);
  else snprintf(c->desc, sizeof c->desc, "the C compiler 'cc' (the default; TG_CC chooses another)");

  char version[OUT_CAP];
  char *argv[MAX_ARGS];
  compiler_argv(c, argv, NULL, (const char *const[]){"--version", NULL});
  if (run_capture(argv, version, sizeof version) != 0) version[0] = 0;  /* the compile will report it */
  version[strcspn(version, "\n")] = 0;

  /* gcc 12 vectorizes loops with run-time bounds at -O2 only with the cheap cost model (NOTES.md); clang
   * does without it and rejects the flag. TG_NO_NATIVE=1 (valgrind runs) drops -march=native. */
  bool clang = strstr(version, "clang") != NULL;
  int nf = 0;
  c->flags[nf++] = "-O2";
  if (!clang) c->flags[nf++] = "-fvect-cost-model=cheap";
  /* gcc's predictive commoning carries a convolution's overlapping window loads (x[i+1] of one step is x[i] of
   * the next) from iteration to iteration in registers, which spilled two of the tile's accumulators to the
   * stack on AVX2: MNIST's 5x5 convolution 310 -> 179 ms, its weight gradient 298 -> 128 (one thread) */
  if (!clang) c->flags[nf++] = "-fno-predictive-commoning";
  /* gcc turns a short copy loop (a GEMM's panel packing: 16 floats per row of K) into a call to memmove per row,
   * about 20 cycles each where two vector loads and stores do: mlp.onnx's 32x784x512 product, one thread,
   * 0.44 -> 0.37 ms. clang does not call for loops of a constant trip count this short */
  if (!clang) c->flags[nf++] = "-fno-tree-loop-distribute-patterns";
  /* the renderer writes a multiply-add as two statements (t = a*b; acc = acc + t): gcc fuses them into one
   * FMA in GNU C by default, clang only within one expression; without this flag clang's kernels issue a
   * vmulps and a vaddps for each FMA, half the machine's peak (conv2d 64->64's inner loop, clang 14) */
  if (clang) c->flags[nf++] = "-ffp-contract=fast";
  if (!env->no_native) c->flags[nf++] = "-march=native";
  c->flags[nf++] = "-fPIC";
  c->flags[nf++] = "-shared";
  c->flags[nf++] = "-nostdlib";
  c->flags[nf] = NULL;

  static const char *const keys[] = {"model name", "flags", "Features", "CPU implementer", "CPU part", NULL};
  static char cpu[16384];
  cpu[0] = 0;
  append_cpuinfo(cpu, sizeof cpu, keys);

  /* "tgc-cpu3": bump when the file format or the kernel ABI changes (2: the checked record at the end; 3: the
   * record lists the keys of every source compiled into the object) */
  uint64_t h = 0x7467632d63707533ull;
  for (int i = 0; i < c->nwords; i++) mix_str(&h, c->words + c->off[i]);
  mix_str(&h, version);
  for (int i = 0; c->flags[i]; i++) mix_str(&h, c->flags[i]);
  mix_str(&h, "-lgcc");
  mix_str(&h, cpu);
  cfg.key_seed = h;
  cfg.ready = true;
  cfg.env_gen = env_generation();
  if (tg_debug_level() >= 4) fprintf(stderr, "compile cache: %s (%s)\n", c->desc, version);
}

/* with cfg.lock held */
static void dir_init(void) {
  if (cfg.dir_ready) return;
  const char *env = getenv("TG_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n = 0;
  if (env && *env) n = snprintf(cfg.dir, sizeof cfg.dir, "%s", env);
  else if (xdg && xdg[0] == '/') n = snprintf(cfg.dir, sizeof cfg.dir, "%s/tgc", xdg);
  else if (home && *home) n = snprintf(cfg.dir, sizeof cfg.dir, "%s/.cache/tgc", home);
  else cfg.dir[0] = 0;
  if (n < 0 || (size_t)n >= sizeof cfg.dir - 32) cfg.dir[0] = 0;  /* room for "/<hash>.so.tmp.XXXXXX" */
  cfg.dir_ready = true;
}

void compile_cache_dir(char *out, size_t n) {
  pthread_mutex_lock(&cfg.lock);
  dir_init();
  snprintf(out, n, "%s", cfg.dir);
  pthread_mutex_unlock(&cfg.lock);
}

void compile_cache_set_dir(const char *dir) {
  pthread_mutex_lock(&cfg.lock);
  if (dir) {
    int n = snprintf(cfg.dir, sizeof cfg.dir, "%s", dir);
    if (n < 0 || (size_t)n >= sizeof cfg.dir - 32) cfg.dir[0] = 0;
    cfg.dir_ready = true;
  } else {
    cfg.dir_ready = false;
  }
  pthread_mutex_unlock(&cfg.lock);
}

/* ---- compiling ----------------------------------------------------------------------------------------- */

typedef enum { CC_OK, CC_IO, CC_FAIL } cc_result;

/* writes src to a temporary file in dir and compiles it to out (an existing file name); CC_IO when the
 * directory cannot take the source file (tg_error untouched), CC_FAIL with tg_error set when the compiler
 * failed */
static cc_result compile_into(const char *src, const char *dir, const char *hex, const compiler *cc,
                              const char *out) {
  char srcpath[PATH_MAX];
  if (!fmt_path(srcpath, sizeof srcpath, "%s/%s.XXXXXX.c", dir, hex)) return CC_IO;
  int fd = mkstemps(srcpath, 2);
  if (fd < 0) return CC_IO;
  size_t len = strlen(src), off = 0;
  while (off < len) {
    ssize_t w = write(fd, src + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (close(fd) != 0 || off < len) {
    unlink(srcpath);
    return CC_IO;
  }

  char *argv[MAX_ARGS];
  /* -lgcc after the source, so the _Float16 helpers it needs are linked in */
  compiler_argv(cc, argv, cc->flags, (const char *const[]){"-o", out, "-x", "c", srcpath, "-lgcc", NULL});
  if (tg_debug_level() >= 4) {
    fprintf(stderr, "compile:");
    for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
  }

  char *text = mem_alloc(OUT_CAP);
  if (!text) {
    unlink(srcpath);
    tg_set_error(TG_ERR_NOMEM, "compile: out of memory");
    return CC_FAIL;
  }
  atomic_fetch_add(&ncompiles, 1);
  int st = run_capture(argv, text, OUT_CAP);
  unlink(srcpath);
  struct stat sb;
  if (st != 0 || stat(out, &sb) != 0 || sb.st_size == 0) {
    /* keep the message to the first lines: tg_error() holds about 1 KiB */
    size_t keep = 0;
    for (int lines = 0; text[keep] && lines < 8 && keep < 700; keep++)
      if (text[keep] == '\n') lines++;
    text[keep] = 0;
    if (st < 0) tg_set_error(TG_ERR_DEVICE, "compile: cannot run %s: %s", cc->desc, text);
    else if (st == 0) tg_set_error(TG_ERR_DEVICE, "compile: %s made no output file%s%s", cc->desc, text[0] ? ":\n" : "", text);
    else tg_set_error(TG_ERR_DEVICE, "compile: %s failed (exit %d)%s%s", cc->desc, st, text[0] ? ":\n" : "", text);
    rejected = st > 0 && st < 128;  /* the compiler ran and refused the source: not a signal, not a spawn failure */
    free(text);
    return CC_FAIL;
  }
  if (tg_debug_level() >= 4 && text[0]) fprintf(stderr, "%s", text);
  free(text);
  return CC_OK;
}

/* a private object file in $TMPDIR or /tmp */
static char *compile_private(const char *src, const char *hex, const compiler *cc) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  char dir[PATH_MAX];
  int n = snprintf(dir, sizeof dir, "%s", tmp);
  if (n < 0 || (size_t)n >= sizeof dir - 48) snprintf(dir, sizeof dir, "/tmp");
  char *out = mem_alloc(PATH_MAX);
  if (!out) {
    tg_set_error(TG_ERR_NOMEM, "compile: out of memory");
    return NULL;
  }
  int fd = fmt_path(out, PATH_MAX, "%s/tgc-%s.XXXXXX.so", dir, hex) ? mkstemps(out, 3) : -1;
  if (fd < 0) {
    tg_set_error(TG_ERR_IO, "compile: cannot create a file in %s: %s", dir, strerror(errno));
    free(out);
    return NULL;
  }
  close(fd);
  cc_result r = compile_into(src, dir, hex, cc, out);
  if (r != CC_OK) {
    if (r == CC_IO) tg_set_error(TG_ERR_IO, "compile: cannot write a source file in %s", dir);
    unlink(out);
    free(out);
    return NULL;
  }
  return out;
}

/* ---- the record at the end of a cached file ------------------------------------------------------------ */

/* the file: the object's bytes, nkeys so_keys, the tail */
typedef struct so_key {
  uint64_t key;   /* the file's name */
  uint64_t key2;  /* a second hash of the source (another seed): two sources whose keys collide still differ */
} so_key;
typedef struct so_tail {
  uint64_t nkeys; /* the sources compiled into the object, 1 to MAX_BATCH */
  uint64_t size;  /* bytes of the shared object before the keys */
  uint64_t sum;   /* hash of those bytes */
  char magic[8];  /* RECORD_MAGIC */
} so_tail;
_Static_assert(sizeof(so_key) == 16 && sizeof(so_tail) == 32, "the record has no padding");
static const char RECORD_MAGIC[8] = {'t', 'g', 'c', '-', 's', 'o', '2', '\n'};
#define SUM_SEED 0x736f2d73756d32ull

/* n bytes from fd at offset off into buf; false on a short read or an error */
static bool read_at(int fd, void *buf, size_t n, off_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return true;
}

/* hash of the first n bytes of fd; false when they cannot be read (or memory is short) */
static bool sum_file(int fd, size_t n, uint64_t seed, uint64_t *sum) {
  unsigned char *b = mem_alloc(n ? n : 1);
  if (!b) return false;
  bool ok = read_at(fd, b, n, 0);
  if (ok) *sum = hash_bytes(b, n, seed);
  free(b);
  return ok;
}

/* appends the record of the n sources keys[] to the compiled object at path; false on an I/O error (the object
 * still loads: the loader ignores bytes after what its headers name) */
static bool record_append(const char *path, int n, const so_key *keys) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat sb;
  so_tail tail = {.nkeys = (uint64_t)n};
  memcpy(tail.magic, RECORD_MAGIC, sizeof tail.magic);
  bool ok = fstat(fd, &sb) == 0 && sb.st_size > 0 && (size_t)sb.st_size <= MAX_SO_BYTES;
  if (ok) {
    tail.size = (uint64_t)sb.st_size;
    ok = sum_file(fd, (size_t)sb.st_size, SUM_SEED, &tail.sum);
  }
  size_t kb = (size_t)n * sizeof *keys;
  ok = ok && pwrite(fd, keys, kb, sb.st_size) == (ssize_t)kb &&
       pwrite(fd, &tail, sizeof tail, sb.st_size + (off_t)kb) == (ssize_t)sizeof tail;
  return close(fd) == 0 && ok;
}

typedef enum { ENTRY_NONE, ENTRY_OK, ENTRY_BAD } entry_state;

/* whether path holds an intact object compiled from the source of (key, key2); *why says what is wrong */
static entry_state entry_check(const char *path, so_key want, const char **why) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot be opened";
    return errno == ENOENT ? ENTRY_NONE : ENTRY_BAD;
  }
  struct stat sb;
  so_tail tail;
  so_key keys[MAX_BATCH];
  entry_state st = ENTRY_BAD;
  uint64_t sum;
  size_t kb = 0;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) *why = "is not a regular file";
  else if ((size_t)sb.st_size < sizeof tail + sizeof *keys + 64) *why = "is too short to be a shared object";
  else if ((size_t)sb.st_size > MAX_SO_BYTES + sizeof tail + sizeof keys) *why = "is too large";
  else if (!read_at(fd, &tail, sizeof tail, sb.st_size - (off_t)sizeof tail)) *why = "cannot be read";
  else if (memcmp(tail.magic, RECORD_MAGIC, sizeof tail.magic)) *why = "has no record (truncated or not written by tgc)";
  else if (tail.nkeys < 1 || tail.nkeys > MAX_BATCH) *why = "has a bad record";
  else if (kb = tail.nkeys * sizeof *keys, tail.size != (uint64_t)sb.st_size - sizeof tail - kb) *why = "has the wrong size";
  else if (!read_at(fd, keys, kb, (off_t)tail.size)) *why = "cannot be read";
  else {
    bool mine = false;
    for (uint64_t i = 0; i < tail.nkeys; i++) mine |= keys[i].key == want.key && keys[i].key2 == want.key2;
    if (!mine) *why = "was compiled from another source";
    else if (!sum_file(fd, tail.size, SUM_SEED, &sum)) *why = "cannot be read";
    else if (sum != tail.sum) *why = "fails its checksum";
    else st = ENTRY_OK;
  }
  close(fd);
  return st;
}

/* ---- the cache ----------------------------------------------------------------------------------------- */

static so_key source_key(const char *src, size_t len, uint64_t seed) {
  return (so_key){hash_bytes(src, len, seed), hash_bytes(src, len, seed ^ 0x6b6579326b657932ull)};
}

char *cpu_compile_so(const char *src, bool *from_disk, bool *is_temp) {
  rejected = false;
  bool fd_dummy, tmp_dummy;
  if (!from_disk) from_disk = &fd_dummy;
  if (!is_temp) is_temp = &tmp_dummy;
  *from_disk = *is_temp = false;
  if (!src) {
    tg_set_error(TG_ERR_ARG, "compile: NULL source");
    return NULL;
  }
  char dir[PATH_MAX];
  compiler cc;
  size_t len = strlen(src);
  pthread_mutex_lock(&cfg.lock);
  config_init();
  dir_init();
  memcpy(dir, cfg.dir, sizeof dir);
  cc = cfg.cc;
  so_key k = source_key(src, len, cfg.key_seed);
  pthread_mutex_unlock(&cfg.lock);
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)k.key);

  if (dir[0]) {
    char *path = mem_alloc(PATH_MAX);
    if (!path) {
      tg_set_error(TG_ERR_NOMEM, "compile: out of memory");
      return NULL;
    }
    bool fits = fmt_path(path, PATH_MAX, "%s/%s.so", dir, hex);
    const char *why = "";
    entry_state es = fits ? entry_check(path, k, &why) : ENTRY_NONE;
    if (es == ENTRY_OK) {
      *from_disk = true;
      return path;
    }
    if (es == ENTRY_BAD) {  /* never handed to dlopen: delete it and compile again */
      atomic_fetch_add(&nrejects, 1);
      unlink(path);
      if (tg_debug_level() >= 1) fprintf(stderr, "compile cache: %s %s: compiling it again\n", path, why);
    }
    make_dirs(dir);
    char tmp[PATH_MAX];
    int fd = fits && fmt_path(tmp, sizeof tmp, "%s/%s.so.tmp.XXXXXX", dir, hex) ? mkstemp(tmp) : -1;
    if (fd >= 0) {
      close(fd);
      cc_result r = compile_into(src, dir, hex, &cc, tmp);
      if (r == CC_FAIL) {
        unlink(tmp);
        free(path);
        return NULL;
      }
      if (r == CC_OK) {
        if (record_append(tmp, 1, &k) && rename(tmp, path) == 0) return path;
        free(path);  /* could not publish it: use it as a private file */
        char *own = mem_strdup(tmp);
        if (!own) {
          unlink(tmp);
          tg_set_error(TG_ERR_NOMEM, "compile: out of memory");
          return NULL;
        }
        *is_temp = true;
        return own;
      }
      unlink(tmp);
    }
    if (tg_debug_level() >= 4) fprintf(stderr, "compile cache: cannot write to %s: using a private file\n", dir);
    free(path);
  }
  char *out = compile_private(src, hex, &cc);
  if (out) *is_temp = true;
  return out;
}

char *cpu_compile_to_file(const char *src, bool *from_disk) { return cpu_compile_so(src, from_disk, NULL); }

bool cpu_compile_cached(const char *src) {
  char path[PATH_MAX];
  pthread_mutex_lock(&cfg.lock);
  config_init();
  dir_init();
  so_key k = source_key(src, strlen(src), cfg.key_seed);
  bool fits = cfg.dir[0] && fmt_path(path, sizeof path, "%s/%016llx.so", cfg.dir, (unsigned long long)k.key);
  pthread_mutex_unlock(&cfg.lock);
  const char *why;
  return fits && entry_check(path, k, &why) == ENTRY_OK;
}

int cpu_compile_batch(int n, const char *const *srcs, const char *unit) {
  if (n < 2 || n > MAX_BATCH || !srcs || !unit) return 0;
  char dir[PATH_MAX];
  compiler cc;
  so_key keys[MAX_BATCH];
  pthread_mutex_lock(&cfg.lock);
  config_init();
  dir_init();
  memcpy(dir, cfg.dir, sizeof dir);
  cc = cfg.cc;
  for (int i = 0; i < n; i++) keys[i] = source_key(srcs[i], strlen(srcs[i]), cfg.key_seed);
  uint64_t ukey = hash_bytes(unit, strlen(unit), cfg.key_seed);
  pthread_mutex_unlock(&cfg.lock);
  if (!dir[0]) return 0;  /* no cache directory: one by one, each into its private file */
  char hex[17], tmp[PATH_MAX], path[PATH_MAX];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)ukey);
  make_dirs(dir);
  int fd = fmt_path(tmp, sizeof tmp, "%s/%s.so.tmp.XXXXXX", dir, hex) ? mkstemp(tmp) : -1;
  if (fd < 0) return 0;
  close(fd);
  int published = 0;
  if (compile_into(unit, dir, hex, &cc, tmp) == CC_OK && record_append(tmp, n, keys))
    for (int i = 0; i < n; i++)  /* another process may have published one meanwhile: then it is there */
      if (fmt_path(path, sizeof path, "%s/%016llx.so", dir, (unsigned long long)keys[i].key) &&
          (link(tmp, path) == 0 || errno == EEXIST))
        published++;
  unlink(tmp);
  return published;
}
