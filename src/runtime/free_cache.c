/* free_cache.c — freed device blocks by exact size, for reuse (free_cache.h) */
#include "runtime/free_cache.h"

#include <stdint.h>
#include <stdlib.h>

#include "uop/uop.h"

typedef struct free_entry {
  size_t nbytes;
  void *handle;
  struct free_entry *next;
} free_entry;

static size_t counted(size_t nbytes) { return nbytes ? nbytes : 1; }

static free_entry **bucket(free_cache *fc, size_t nbytes) {
  return &fc->buckets[((uint64_t)nbytes * 0x9E3779B97F4A7C15ull) >> 56];   /* 256 buckets: the top 8 bits */
}
_Static_assert(FREE_CACHE_BUCKETS == 256, "bucket() takes the top 8 bits of the hash");

void free_cache_init(free_cache *fc, size_t limit) {
  *fc = (free_cache){.limit = limit};
  pthread_mutex_init(&fc->lock, NULL);
}

void *free_cache_take(free_cache *fc, size_t nbytes) {
  void *h = NULL;
  free_entry *found = NULL;
  pthread_mutex_lock(&fc->lock);
  for (free_entry **pp = bucket(fc, nbytes); *pp; pp = &(*pp)->next)
    if ((*pp)->nbytes == nbytes) {
      found = *pp;
      *pp = found->next;
      h = found->handle;
      fc->bytes -= counted(nbytes);
      break;
    }
  pthread_mutex_unlock(&fc->lock);
  free(found);
  return h;
}

bool free_cache_put(free_cache *fc, size_t nbytes, void *handle) {
  size_t n = counted(nbytes);
  free_entry *e = mem_alloc(sizeof *e);
  if (!e) return false;
  pthread_mutex_lock(&fc->lock);
  bool fits = n <= fc->limit && fc->bytes <= fc->limit - n;
  if (fits) {
    free_entry **pp = bucket(fc, nbytes);
    *e = (free_entry){.nbytes = nbytes, .handle = handle, .next = *pp};
    *pp = e;
    fc->bytes += n;
  }
  pthread_mutex_unlock(&fc->lock);
  if (!fits) free(e);
  return fits;
}

size_t free_cache_bytes(free_cache *fc) {
  pthread_mutex_lock(&fc->lock);
  size_t n = fc->bytes;
  pthread_mutex_unlock(&fc->lock);
  return n;
}

void free_cache_drain(free_cache *fc, void (*release)(void *handle, void *arg), void *arg) {
  free_entry *all = NULL;
  pthread_mutex_lock(&fc->lock);
  for (int i = 0; i < FREE_CACHE_BUCKETS; i++) {
    while (fc->buckets[i]) {
      free_entry *e = fc->buckets[i];
      fc->buckets[i] = e->next;
      e->next = all;
      all = e;
    }
  }
  fc->bytes = 0;
  pthread_mutex_unlock(&fc->lock);
  while (all) {
    free_entry *e = all;
    all = e->next;
    release(e->handle, arg);
    free(e);
  }
}
