/* args.h — strict command-line parsing for the example and benchmark programs. A number is taken only when the
 * whole argument is one (no "12abc", no empty value, no leading space) and it lies in its stated range; a path
 * that the program will write is checked before any work starts. Every problem is one line on stderr naming the
 * program, the flag and the allowed values; the caller then exits with ARGS_EXIT (2), the code for a bad command
 * line. Header-only: each program is a single file. Uses only the C library and POSIX, never tg.h. */
#ifndef TG_EXAMPLES_ARGS_H
#define TG_EXAMPLES_ARGS_H

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARGS_EXIT 2

/* the program's name in messages; set it first thing in main */
static const char *args_prog = "program";

static inline void args_report(const char *tail, const char *fmt, va_list ap) {
  fprintf(stderr, "%s: ", args_prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "%s\n", tail);
}

/* "prog: <message>" on stderr; returns false so a check can end in `return args_error(...)` */
static inline bool args_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline bool args_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  args_report("", fmt, ap);
  va_end(ap);
  return false;
}

/* as args_error, for a malformed command line: the message ends with a pointer to --help */
static inline bool args_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline bool args_usage_error(const char *fmt, ...) {
  char tail[128];
  snprintf(tail, sizeof tail, " (%s --help lists the flags)", args_prog);
  va_list ap;
  va_start(ap, fmt);
  args_report(tail, fmt, ap);
  va_end(ap);
  return false;
}

/* argv[*i] is a flag that takes a value: the value, with *i moved onto it; NULL with a message when there is
 * none. A value that is itself a long flag ("--out --steps") counts as missing: write ./--x for such a file. */
static inline const char *args_value(int argc, char **argv, int *i, const char *what) {
  const char *flag = argv[*i];
  if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2)) {
    args_usage_error("%s needs a value (%s)%s%s", flag, what, *i + 1 < argc ? ", got the flag " : "",
               *i + 1 < argc ? argv[*i + 1] : "");
    return NULL;
  }
  return argv[++*i];
}

/* an integer value in lo..hi for the flag argv[*i] into *out; `range` describes lo..hi in messages when the
 * limit is known only later (NULL: "lo..hi") */
static inline bool args_int_in(int argc, char **argv, int *i, long long lo, long long hi, const char *range,
                               long long *out) {
  const char *flag = argv[*i];
  char allowed[96], what[128];
  if (range) snprintf(allowed, sizeof allowed, "%s", range);
  else snprintf(allowed, sizeof allowed, "%lld..%lld", lo, hi);
  snprintf(what, sizeof what, "an integer in %s", allowed);
  const char *s = args_value(argc, argv, i, what);
  if (!s) return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || isspace((unsigned char)*s) || *end) return args_usage_error("%s: '%s' is not %s", flag, s, what);
  if (errno == ERANGE || v < lo || v > hi) return args_error("%s: %s is out of range; allowed %s", flag, s, allowed);
  *out = v;
  return true;
}

static inline bool args_int(int argc, char **argv, int *i, long long lo, long long hi, long long *out) {
  return args_int_in(argc, argv, i, lo, hi, NULL, out);
}

/* a finite number in lo..hi for the flag argv[*i] into *out */
static inline bool args_real(int argc, char **argv, int *i, double lo, double hi, double *out) {
  const char *flag = argv[*i];
  char what[96];
  snprintf(what, sizeof what, "a number in %g..%g", lo, hi);
  const char *s = args_value(argc, argv, i, what);
  if (!s) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || isspace((unsigned char)*s) || *end || isnan(v)) return args_usage_error("%s: '%s' is not %s", flag, s, what);
  if (errno == ERANGE || !(v >= lo && v <= hi)) return args_error("%s: %s is out of range; allowed %g..%g", flag, s, lo, hi);
  *out = v;
  return true;
}

/* the folder part of path into dir ("." when it has none) */
static inline void args_dirname(const char *path, char *dir, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, cap, ".");
  else if (slash == path) snprintf(dir, cap, "/");
  else snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

/* true when the file `path` (given with `flag`) can be written: it is not a folder, and a new file can be made
 * beside it (a saver that writes a temporary file and renames it needs exactly that). The probe file is removed
 * at once and an existing file is neither opened nor truncated. */
static inline bool args_output_ok(const char *flag, const char *path) {
  char dir[PATH_MAX], probe[PATH_MAX + 32];
  struct stat sb;
  if (!*path) return args_error("%s: the path is empty", flag);
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return args_error("%s %s: is a folder, not a file", flag, path);
  args_dirname(path, dir, sizeof dir);
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return args_error("%s %s: the folder %s does not exist", flag, path, dir);
  int w = snprintf(probe, sizeof probe, "%s.probe.%ld", path, (long)getpid());
  if (w < 0 || (size_t)w >= sizeof probe) return args_error("%s: the path is too long", flag);
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return args_error("%s %s: cannot create a file in %s: %s", flag, path, dir, strerror(errno));
  close(fd);
  unlink(probe);
  return true;
}

/* true when `path` (given with `flag`) is a readable file */
static inline bool args_input_ok(const char *flag, const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0) return args_error("%s %s: %s", flag, path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return args_error("%s %s: is a folder, not a file", flag, path);
  if (access(path, R_OK) != 0) return args_error("%s %s: %s", flag, path, strerror(errno));
  return true;
}

/* an argument that is no flag of the program */
static inline bool args_unknown(const char *arg) {
  return args_usage_error("unknown %s '%s'", arg[0] == '-' ? "flag" : "argument", arg);
}

#endif
