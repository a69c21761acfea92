/* error.c — the last error of each thread, and the DEBUG level. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "uop/uop.h"

static _Thread_local char err_msg[1024];
static _Thread_local tg_status err_status;

void tg_set_error(tg_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_msg, sizeof err_msg, fmt, ap);
  va_end(ap);
  err_status = st;
}

const char *tg_error(void) { return err_msg; }
tg_status tg_error_status(void) { return err_status; }
void tg_error_clear(void) { err_msg[0] = 0; err_status = TG_OK; }

int tg_debug_level(void) {
  static atomic_int level = -1;  /* read once; threads racing to read it first read the same value */
  int l = atomic_load_explicit(&level, memory_order_relaxed);
  if (l < 0) {
    const char *s = getenv("DEBUG");
    l = s ? atoi(s) : 0;
    atomic_store_explicit(&level, l, memory_order_relaxed);
  }
  return l;
}

const char *shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "(");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (ndim == 1 && k < n) k += (size_t)snprintf(buf + k, n - k, ",");
  if (k < n) snprintf(buf + k, n - k, ")");
  return buf;
}
