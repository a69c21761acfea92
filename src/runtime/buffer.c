/* buffer.c — buffers and programs (reference counts), and host memory with a caching allocator.
 *
 * Host memory is 64-byte aligned. A fresh page costs 2-12 µs per 4 KiB to touch on the build machines
 * (NOTES.md; 1.6-2.0 GB/s measured on 2026-12-07), so a framework that allocates new buffers every step
 * spends its time in page faults: freed blocks are kept on free lists, one per size class, and handed out
 * again for the same class. The cache is bounded (1 GiB by default; a block that would exceed the bound goes
 * back to the system) and flushable.
 * Blocks of 2 MiB and more are 2 MiB aligned (the kernel may back them with huge pages when THP is "always"),
 * but not marked MADV_HUGEPAGE: on the VMs we run on, a huge page's first touch costs 4x a small page's (0.45
 * against 1.9 GB/s: free 2 MiB blocks are the ones returned to the host, so each one faults in there), and
 * the first MNIST step went 0.59-0.79 s with the advice against 0.41-0.52 s without, steady steps unchanged.
 *
 * Size classes: multiples of 64 bytes below 64 KiB, of 4 KiB below 2 MiB, of 2 MiB above, so a block
 * wastes little and the sizes a training step asks for again and again find their blocks.
 * A cached block keeps its free-list link in its first bytes; under AddressSanitizer the rest of it is
 * poisoned, so a use after release is still reported.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "uop/uop.h"

#if defined(__SANITIZE_ADDRESS__)
#define TG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ASAN 1
#endif
#endif
#ifdef TG_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* reference counts may be touched from several threads (a buffer released by a worker, say) */
#define RC_INC(x) __atomic_add_fetch(&(x), 1, __ATOMIC_RELAXED)
#define RC_DEC(x) __atomic_sub_fetch(&(x), 1, __ATOMIC_ACQ_REL)

#define ALIGN 64
#define HUGE_SIZE ((size_t)2 << 20)
#define NCLASS_BUCKETS 256

/* ---- buffers and programs ------------------------------------------------------------------------------ */

static int64_t live_buffers;  /* made and not yet freed: tests check that failures leak no reference */

int64_t buffer_live_count(void) { return __atomic_load_n(&live_buffers, __ATOMIC_RELAXED); }

tg_buffer *buffer_new(const device *d, size_t nbytes) {
  if (!d) {
    tg_set_error(TG_ERR_ARG, "buffer_new: no device");
    return NULL;
  }
  if (!memory_reserve(d, nbytes)) return NULL;
  tg_buffer *b = d->alloc(d, nbytes);
  if (!b) {
    memory_release(d, nbytes, false);
    return NULL;
  }
  b->counted = true;
  RC_INC(live_buffers);
  return b;
}

tg_buffer *buffer_wrap(const device *d, void *ptr, size_t nbytes) {
  if (!d || (!ptr && nbytes)) {
    tg_set_error(TG_ERR_ARG, "buffer_wrap: %s", d ? "NULL pointer for a non-empty buffer" : "no device");
    return NULL;
  }
  tg_buffer *b = mem_alloc(sizeof *b);
  if (!b) {
    tg_set_error(TG_ERR_NOMEM, "buffer_wrap: out of memory");
    return NULL;
  }
  *b = (tg_buffer){.refcnt = 1, .dev = d, .nbytes = nbytes, .ptr = ptr, .wrapped = true};
  RC_INC(live_buffers);
  return b;
}

tg_buffer *buffer_view(tg_buffer *parent, size_t offset, size_t nbytes) {
  if (!parent || offset > parent->nbytes || nbytes > parent->nbytes - offset || parent->dev->kind == DEVICE_CL) {
    tg_set_error(TG_ERR_INTERNAL, "buffer_view: [%zu, +%zu) of a buffer of %zu bytes", offset, nbytes,
                 parent ? parent->nbytes : 0);
    return NULL;
  }
  tg_buffer *b = mem_alloc(sizeof *b);
  if (!b) {
    tg_set_error(TG_ERR_NOMEM, "buffer_view: out of memory");
    return NULL;
  }
  *b = (tg_buffer){.refcnt = 1, .dev = parent->dev, .nbytes = nbytes, .ptr = (char *)parent->ptr + offset,
                   .parent = parent};
  buffer_retain(parent);
  RC_INC(live_buffers);
  return b;
}

void buffer_retain(tg_buffer *b) {
  if (b) RC_INC(b->refcnt);
}

void buffer_release(tg_buffer *b) {
  if (!b || RC_DEC(b->refcnt) > 0) return;
  RC_DEC(live_buffers);
  if (b->counted) memory_release(b->dev, b->nbytes, b->arena);
  if (b->parent) {
    buffer_release(b->parent);
    free(b);
  } else if (b->wrapped) {  /* the memory is the user's, or the owner's hook lets go of it */
    if (b->on_free) b->on_free(b->ctx);
    free(b);
  } else {
    b->dev->buffer_free(b);
  }
}

void program_retain(tg_program *p) {
  if (p) RC_INC(p->refcnt);
}

void program_release(tg_program *p) {
  if (!p || RC_DEC(p->refcnt) > 0) return;
  p->dev->program_free(p);
}

/* ---- host memory ------------------------------------------------------------------------------------- */

typedef struct free_class {
  size_t size;       /* the class's block size */
  void *head;        /* first free block; each holds the next in its first bytes */
  struct free_class *next;  /* next class in the same hash bucket */
} free_class;

static struct {
  pthread_mutex_t lock;
  free_class *buckets[NCLASS_BUCKETS];
  size_t cached, limit;
  uint64_t allocated, hits;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .limit = (size_t)1 << 30};

/* the block size for nbytes, or 0 on overflow */
static size_t size_class(size_t nbytes) {
  size_t a = nbytes >= HUGE_SIZE ? HUGE_SIZE : nbytes >= ((size_t)64 << 10) ? 4096 : ALIGN;
  if (nbytes == 0) nbytes = 1;
  if (nbytes > SIZE_MAX - (a - 1)) return 0;
  return (nbytes + a - 1) & ~(a - 1);
}

static free_class **bucket_of(size_t size) {
  uint64_t h = (uint64_t)size * 0x9E3779B97F4A7C15ull;
  return &cache.buckets[h >> 56];
}

static void *block_pop(size_t size) {
  for (free_class *c = *bucket_of(size); c; c = c->next) {
    if (c->size != size || !c->head) continue;
    void *p = c->head;
    UNPOISON(p, sizeof(void *));
    memcpy(&c->head, p, sizeof(void *));
    UNPOISON(p, size);
    return p;
  }
  return NULL;
}

/* true if the block was cached */
static bool block_push(void *p, size_t size) {
  free_class **bk = bucket_of(size), *c = *bk;
  while (c && c->size != size) c = c->next;
  if (!c) {
    c = mem_alloc(sizeof *c);
    if (!c) return false;
    *c = (free_class){.size = size, .next = *bk};
    *bk = c;
  }
  memcpy(p, &c->head, sizeof(void *));
  c->head = p;
  /* the link stays readable: LeakSanitizer skips poisoned memory and would call the rest of the list leaked */
  POISON((char *)p + sizeof(void *), size - sizeof(void *));
  return true;
}

void *host_alloc(size_t nbytes) {
  size_t size = size_class(nbytes);
  if (!size) {
    tg_set_error(TG_ERR_NOMEM, "host_alloc: %zu bytes is too large", nbytes);
    return NULL;
  }
  pthread_mutex_lock(&cache.lock);
  void *p = cache.cached ? block_pop(size) : NULL;
  if (p) {
    cache.cached -= size;
    cache.hits++;
  } else {
    cache.allocated++;
  }
  pthread_mutex_unlock(&cache.lock);
  if (p) return p;

  size_t align = size >= HUGE_SIZE ? HUGE_SIZE : ALIGN;
  p = mem_aligned(align, size);  /* size is a multiple of align: a size class */
  if (!p) {
    /* the cache may hold the memory this needs */
    buffer_cache_flush();
    p = mem_aligned(align, size);
  }
  if (!p) {
    tg_set_error(TG_ERR_NOMEM, "host_alloc: out of memory allocating %zu bytes", nbytes);
    return NULL;
  }
  return p;
}

void host_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t size = size_class(nbytes);
  pthread_mutex_lock(&cache.lock);
  bool kept = size && size <= cache.limit && cache.cached <= cache.limit - size && block_push(p, size);
  if (kept) cache.cached += size;
  pthread_mutex_unlock(&cache.lock);
  if (!kept) free(p);
}

void buffer_cache_flush(void) {
  pthread_mutex_lock(&cache.lock);
  for (int i = 0; i < NCLASS_BUCKETS; i++) {
    free_class *c = cache.buckets[i];
    while (c) {
      for (void *p = c->head, *next; p; p = next) {
        UNPOISON(p, c->size);
        memcpy(&next, p, sizeof(void *));
        free(p);
      }
      free_class *next = c->next;
      free(c);
      c = next;
    }
    cache.buckets[i] = NULL;
  }
  cache.cached = 0;
  pthread_mutex_unlock(&cache.lock);
}

size_t buffer_cache_set_limit(size_t bytes) {
  pthread_mutex_lock(&cache.lock);
  size_t old = cache.limit;
  cache.limit = bytes;
  bool over = cache.cached > bytes;
  pthread_mutex_unlock(&cache.lock);
  if (over) buffer_cache_flush();
  return old;
}

void host_alloc_counters(uint64_t *allocated, uint64_t *hits, size_t *cached) {
  pthread_mutex_lock(&cache.lock);
  *allocated = cache.allocated;
  *hits = cache.hits;
  *cached = cache.cached;
  pthread_mutex_unlock(&cache.lock);
}
