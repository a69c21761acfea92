/* memory.c — what each device holds, and a limit on it.
 *
 * Every buffer made by buffer_new is counted against its device until it is freed: in_use (tensors, kept
 * state, JIT arenas; the arenas also on their own), the peak of in_use since the last reset, and beside them
 * the freed buffers a device keeps for reuse (its cache, asked of the device). A device may have a limit
 * (TG_MEMORY_LIMIT, tg_memory_set_limit): an allocation that would take in_use + cached past it empties the
 * device's cache first, and fails with TG_ERR_NOMEM when in_use alone would pass it. Failing before the
 * device is asked keeps every existing buffer as it was: the realize that asked has launched nothing yet.
 *
 * Buffers wrapping memory tgc does not own (tg_from_blob, file mappings) are not counted: they are the
 * caller's or the file's. Neither are BEAM's scratch buffers, which never outlive one search.
 */
#include <pthread.h>
#include <string.h>

#include "runtime/device.h"
#include "uop/env.h"
#include "uop/uop.h"

#define MAX_ACCOUNTS 64

typedef struct account {
  const device *dev;
  size_t in_use, arenas, peak, limit;
  bool limit_set;  /* by tg_memory_set_limit: TG_MEMORY_LIMIT no longer applies */
} account;

static struct {
  pthread_mutex_t lock;
  account a[MAX_ACCOUNTS];
  int n;
} accounts = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* d's account, made on first use; NULL only when MAX_ACCOUNTS devices are open (then d is not counted).
 * With the lock held. */
static account *account_of(const device *d) {
  for (int i = 0; i < accounts.n; i++)
    if (accounts.a[i].dev == d) return &accounts.a[i];
  if (accounts.n == MAX_ACCOUNTS) return NULL;
  account *a = &accounts.a[accounts.n++];
  *a = (account){.dev = d};
  return a;
}

static size_t limit_of(const account *a) { return a->limit_set ? a->limit : env_get()->memory_limit; }

static size_t cached_of(const device *d) { return d->cached_bytes ? d->cached_bytes(d) : 0; }

static double mb(size_t n) { return (double)n / (1 << 20); }

bool memory_reserve(const device *d, size_t nbytes) {
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(d);
  size_t limit = a ? limit_of(a) : 0;
  bool over = limit && (nbytes > limit || a->in_use > limit - nbytes);
  size_t in_use = a ? a->in_use : 0, arenas = a ? a->arenas : 0;
  pthread_mutex_unlock(&accounts.lock);
  /* the cache goes first: its blocks count against the limit, and may be the very memory the request needs */
  if (limit && d->flush_cache && (over || cached_of(d) > limit - (in_use + nbytes)))  /* !over: no wrap */
    d->flush_cache(d);
  if (over) {
    tg_set_error(TG_ERR_NOMEM,
                 "%s: a buffer of %zu bytes (%.1f MiB) would pass the memory limit of %zu bytes (%.1f MiB): %zu bytes "
                 "(%.1f MiB) are in use, %zu of them in JIT arenas; the cache of freed buffers was emptied first "
                 "(TG_MEMORY_LIMIT, tg_memory_set_limit)",
                 d->name, nbytes, mb(nbytes), limit, mb(limit), in_use, mb(in_use), arenas);
    return false;
  }
  pthread_mutex_lock(&accounts.lock);
  if ((a = account_of(d)) != NULL) {
    a->in_use += nbytes;
    if (a->in_use > a->peak) a->peak = a->in_use;
  }
  pthread_mutex_unlock(&accounts.lock);
  return true;
}

void memory_release(const device *d, size_t nbytes, bool arena) {
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(d);
  if (a) {
    a->in_use -= nbytes <= a->in_use ? nbytes : a->in_use;
    if (arena) a->arenas -= nbytes <= a->arenas ? nbytes : a->arenas;
  }
  pthread_mutex_unlock(&accounts.lock);
}

void memory_mark_arena(tg_buffer *b) {
  if (!b || !b->counted || b->arena) return;
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(b->dev);
  if (a) a->arenas += b->nbytes;
  b->arena = true;
  pthread_mutex_unlock(&accounts.lock);
}

size_t memory_in_use(const device *d) {
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(d);
  size_t n = a ? a->in_use : 0;
  pthread_mutex_unlock(&accounts.lock);
  return n;
}

void memory_use_env_limit(const device *d) {
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(d);
  if (a) a->limit_set = false;
  pthread_mutex_unlock(&accounts.lock);
}

/* ---- the public API ---------------------------------------------------------------------------------- */

static const device *named(const char *op, const char *name) {
  const device *d = name ? device_get(name) : device_default();
  if (!d && !tg_error_status()) tg_set_error(TG_ERR_DEVICE, "%s: no device %s", op, name ? name : "(default)");
  return d;
}

tg_status tg_memory(const char *device_name, tg_memory_info *out) {
  if (!out) {
    tg_set_error(TG_ERR_ARG, "tg_memory: out is NULL");
    return TG_ERR_ARG;
  }
  memset(out, 0, sizeof *out);
  const device *d = named("tg_memory", device_name);
  if (!d) return tg_error_status();
  size_t cached = cached_of(d);
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(d);
  if (a) *out = (tg_memory_info){.in_use = a->in_use, .arenas = a->arenas, .peak = a->peak, .limit = limit_of(a)};
  pthread_mutex_unlock(&accounts.lock);
  out->cached = cached;
  return TG_OK;
}

tg_status tg_memory_reset_peak(const char *device_name) {
  const device *d = named("tg_memory_reset_peak", device_name);
  if (!d) return tg_error_status();
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(d);
  if (a) a->peak = a->in_use;
  pthread_mutex_unlock(&accounts.lock);
  return TG_OK;
}

tg_status tg_memory_empty_cache(const char *device_name) {
  const device *d = named("tg_memory_empty_cache", device_name);
  if (!d) return tg_error_status();
  if (d->flush_cache) d->flush_cache(d);
  return TG_OK;
}

tg_status tg_memory_set_limit(const char *device_name, size_t bytes) {
  const device *d = named("tg_memory_set_limit", device_name);
  if (!d) return tg_error_status();
  pthread_mutex_lock(&accounts.lock);
  account *a = account_of(d);
  if (a) {
    a->limit = bytes;
    a->limit_set = true;
  }
  pthread_mutex_unlock(&accounts.lock);
  if (!a) {
    tg_set_error(TG_ERR_INTERNAL, "tg_memory_set_limit: more than %d devices are open", MAX_ACCOUNTS);
    return TG_ERR_INTERNAL;
  }
  size_t cached = cached_of(d);
  if (bytes && cached && d->flush_cache && memory_in_use(d) + cached > bytes) d->flush_cache(d);
  return TG_OK;
}
