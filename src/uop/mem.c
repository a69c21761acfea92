/* mem.c — every heap allocation of the library goes through these wrappers, so that a test can make one of
 * them fail (mem_fail_at) and check that the library returns an error, leaks nothing and keeps working.
 * They behave as the C library's functions (memory from them is released with free()), and a failure also
 * records TG_ERR_NOMEM with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

/* the allocation number (1-based, counted from the last mem_fail_at) that fails; 0: none. Atomic: the
 * thread pool's workers may allocate too */
static int64_t fail_at, count;
static bool fired;
static void (*on_fail)(int64_t k);

static _Thread_local int exempt;  /* mem_exempt depth on this thread */

/* true if this allocation is the one to fail */
static bool fail_now(void) {
  if (!__atomic_load_n(&fail_at, __ATOMIC_RELAXED) || exempt) return false;
  int64_t k = __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
  if (k != __atomic_load_n(&fail_at, __ATOMIC_RELAXED)) return false;
  __atomic_store_n(&fired, true, __ATOMIC_RELAXED);
  void (*fn)(int64_t) = __atomic_load_n(&on_fail, __ATOMIC_RELAXED);
  if (fn) fn(k);
  return true;
}

static _Thread_local uint64_t failures;  /* on this thread, for mem_failures */

/* p, or NULL with TG_ERR_NOMEM recorded: every failed allocation leaves a status and a message, which the
 * caller may replace with one naming its op */
static void *check(void *p, size_t n) {
  if (!p && n) {
    failures++;
    tg_set_error(TG_ERR_NOMEM, "out of memory (an allocation of %zu bytes failed)", n);
  }
  return p;
}

uint64_t mem_failures(void) { return failures; }

void mem_exempt(bool on) { exempt += on ? 1 : -1; }

void *mem_alloc(size_t n) { return check(fail_now() ? NULL : malloc(n), n); }
void *mem_realloc(void *p, size_t n) { return check(fail_now() ? NULL : realloc(p, n), n); }
void *mem_aligned(size_t align, size_t n) { return check(fail_now() ? NULL : aligned_alloc(align, n), n); }

void *mem_calloc(size_t n, size_t size) {
  return check(fail_now() ? NULL : calloc(n, size), size && n > SIZE_MAX / size ? SIZE_MAX : n * size);
}

bool mem_pooled(size_t n) { return check(fail_now() ? NULL : (void *)1, n) != NULL; }

char *mem_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = mem_alloc(n);
  return d ? memcpy(d, s, n) : NULL;
}

void mem_on_fail(void (*fn)(int64_t k)) { __atomic_store_n(&on_fail, fn, __ATOMIC_RELAXED); }

void mem_fail_at(int64_t k) {
  __atomic_store_n(&count, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&fired, false, __ATOMIC_RELAXED);
  __atomic_store_n(&fail_at, k > 0 ? k : 0, __ATOMIC_RELAXED);
}

int64_t mem_count(void) { return __atomic_load_n(&count, __ATOMIC_RELAXED); }
bool mem_failed(void) { return __atomic_load_n(&fired, __ATOMIC_RELAXED); }
