/* user_program.c — a program as a user of the installed library writes it: only tg.h, linked with
 * `pkg-config --cflags --libs tg` (dynamically) or `pkg-config --static` (statically), outside the source
 * tree. It also defines its own functions under names that the library uses internally (buffer_new, uop_new,
 * tmp, ...): the program must link, keep its own functions, and the library must keep calling its own.
 * Built and run by scripts/check_symbols.sh and scripts/check_install.sh; prints one line per check and
 * exits 0 when all hold. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tg.h"

/* The user's own functions under names libtg's sources use internally. Signatures differ on purpose:
 * the library must never call these (own_calls counts calls from anywhere). */
static int own_calls;
void *buffer_new(void) { own_calls++; return NULL; }
void buffer_release(void *p) { (void)p; own_calls++; }
void *uop_new(void) { own_calls++; return NULL; }
void *tensor_new(void) { own_calls++; return NULL; }
void *tmp(void) { own_calls++; return NULL; }
int hash_bytes(void) { own_calls++; return -1; }
int pool_size(void) { own_calls++; return -1; }
int graph_rewrite(void) { own_calls++; return -1; }
int render_c(void) { own_calls++; return -1; }
int linearize(void) { own_calls++; return -1; }

static int failures;

static void check(bool ok, const char *what) {
  printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}

int main(void) {
#ifdef TG_VERSION_STRING
  check(strcmp(tg_version(), TG_VERSION_STRING) == 0, "tg_version() equals TG_VERSION_STRING");
  printf("     version %s (header %d.%d.%d)\n", tg_version(), TG_VERSION_MAJOR, TG_VERSION_MINOR,
         TG_VERSION_PATCH);
#else
  check(false, "tg.h defines TG_VERSION_STRING");
#endif

  /* sum(x * x + 1) over x = 1..4 is 30 + 4 = 34 */
  const float data[4] = {1, 2, 3, 4};
  const int64_t shape[1] = {4};
  tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, shape, data, sizeof data);
  tg_tensor *y = tg_sum(tg_add(tg_mul(x, x), tg_scalar(TG_FLOAT32, 1)), 0, NULL, false);
  double v = tg_item(y);
  if (isnan(v)) printf("     tg_error: %s\n", tg_error());
  printf("     sum(x*x + 1) = %g\n", v);
  check(v == 34, "tg_item(sum(x*x + 1)) == 34");
  tg_scope_end();
  check(own_calls == 0, "the library never called the program's buffer_new, uop_new, tmp, ...");

  /* the program's own definitions are the ones its calls reach */
  int n = own_calls;
  check(buffer_new() == NULL && hash_bytes() == -1 && tmp() == NULL && pool_size() == -1 &&
            own_calls == n + 4,
        "the program's calls reach its own buffer_new, hash_bytes, tmp, pool_size");
  return failures ? 1 : 0;
}
