/* program_cache.h — the programs a device has built, kept in memory by (device, kernel name, source).
 *
 * Every device (cpu.c, opencl.c, cuda.c) keeps one: compile() asks it first, so one process never builds or
 * loads the same kernel twice. It keeps the PROGRAM_CACHE_MAX most recently used programs that nobody else
 * holds, and remembers the last sources the device refused with their messages: the same source fails the
 * same way, so a kernel the renderer gets wrong does not run the compiler on every realize that needs it.
 * The failures are forgotten when the environment changes (env_generation: another TG_CC may compile them).
 */
#ifndef TG_PROGRAM_CACHE_H
#define TG_PROGRAM_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/device.h"

#define PROGRAM_CACHE_BUCKETS 4096
#define PROGRAM_CACHE_MAX 2048
#define PROGRAM_CACHE_FAILED 32

struct program_entry;
typedef struct program_failure { uint64_t h1, h2; char msg[1024]; } program_failure;

typedef struct program_cache {
  pthread_mutex_t lock;
  struct program_entry *buckets[PROGRAM_CACHE_BUCKETS];
  struct program_entry *newest, *oldest;   /* the LRU list */
  int count;
  uint64_t mem_hits, disk_hits;
  program_failure failed[PROGRAM_CACHE_FAILED];   /* a ring: the oldest failure is forgotten first */
  int nfailed, next_failed;
  unsigned failed_env;
} program_cache;

#define PROGRAM_CACHE_INIT {.lock = PTHREAD_MUTEX_INITIALIZER}

/* builds (or loads from disk) a program with one reference; NULL with tg_error set, and *refused true when the
 * source itself is at fault (a compiler error, no such kernel in it), not memory, I/O or a lost device */
typedef tg_program *(*program_build_fn)(const device *d, const char *name, const char *src, bool *refused);

/* the program for (name, src) on d, with a reference for the caller: from the cache, or built by build without
 * the lock (threads building different kernels do not wait for each other) and kept. seed separates what
 * else the program depends on (the device's index, its driver). */
tg_program *program_cache_get(program_cache *pc, const device *d, uint64_t seed, const char *name, const char *src,
                              program_build_fn build);
/* whether program_cache_get would find (name, src) without building */
bool program_cache_has(program_cache *pc, uint64_t seed, const char *name, const char *src);
/* drops every program the cache holds (those others hold live on) and the remembered failures */
void program_cache_clear(program_cache *pc);
/* calls answered from memory, and programs that build reported as loaded from the disk cache */
void program_cache_counters(program_cache *pc, uint64_t *mem_hits, uint64_t *disk_hits);

#endif
