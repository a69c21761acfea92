/* free_cache.h — device memory freed by the engine and kept for reuse (the OpenCL and CUDA devices).
 *
 * Allocating device memory is a driver call (and on a GPU often a synchronization); training steps and JIT
 * replays free and allocate the same sizes over and over. A freed block goes here, under its exact size, while
 * the cache holds less than its limit; an allocation of that size takes it back. The device empties it when
 * an allocation fails (then retries) and on tg_memory_empty_cache / tg_collect. (The CPU's host blocks have
 * their own cache, buffer.c, which also serves tg_from_data's copies.)
 */
#ifndef TG_FREE_CACHE_H
#define TG_FREE_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define FREE_CACHE_BUCKETS 256

struct free_entry;
typedef struct free_cache {
  pthread_mutex_t lock;
  struct free_entry *buckets[FREE_CACHE_BUCKETS];
  size_t bytes;   /* held now (a 0-byte block counts 1) */
  size_t limit;
} free_cache;

void free_cache_init(free_cache *fc, size_t limit);
/* a block of exactly nbytes (the handle given to free_cache_put), or NULL */
void *free_cache_take(free_cache *fc, size_t nbytes);
/* keeps handle as a free block of nbytes; false when it would pass the limit (or no memory for the entry):
 * then the caller frees the block */
bool free_cache_put(free_cache *fc, size_t nbytes, void *handle);
size_t free_cache_bytes(free_cache *fc);
/* empties the cache, calling release on each block outside the lock */
void free_cache_drain(free_cache *fc, void (*release)(void *handle, void *arg), void *arg);

#endif
