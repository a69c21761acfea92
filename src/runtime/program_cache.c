/* program_cache.c — the in-memory program cache every device shares the code of (program_cache.h) */
#include "runtime/program_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uop/env.h"
#include "uop/uop.h"

typedef struct program_entry {
  uint64_t h1, h2;                      /* two independent hashes of (seed, name, source) */
  tg_program *p;                        /* holds one reference */
  struct program_entry *hnext;          /* hash chain */
  struct program_entry *older, *newer;  /* LRU list */
} program_entry;

static void keys(uint64_t seed, const char *name, const char *src, uint64_t *h1, uint64_t *h2) {
  size_t len = strlen(src), nlen = strlen(name);
  *h1 = hash_bytes(src, len, hash_bytes(name, nlen, seed * 2 + 1));
  *h2 = hash_bytes(src, len, hash_bytes(name, nlen, seed * 2 + 2));
}

static program_entry **bucket_of(program_cache *pc, uint64_t h1) { return &pc->buckets[h1 % PROGRAM_CACHE_BUCKETS]; }

/* with pc->lock held */
static program_entry *find(program_cache *pc, uint64_t h1, uint64_t h2) {
  for (program_entry *e = *bucket_of(pc, h1); e; e = e->hnext)
    if (e->h1 == h1 && e->h2 == h2) return e;
  return NULL;
}

static void lru_unlink(program_cache *pc, program_entry *e) {
  if (e->older) e->older->newer = e->newer;
  else pc->oldest = e->newer;
  if (e->newer) e->newer->older = e->older;
  else pc->newest = e->older;
  e->older = e->newer = NULL;
}

static void lru_push_newest(program_cache *pc, program_entry *e) {
  e->older = pc->newest;
  e->newer = NULL;
  if (pc->newest) pc->newest->newer = e;
  else pc->oldest = e;
  pc->newest = e;
}

/* with pc->lock held: unlinks e from its chain and the LRU list */
static void unlink_entry(program_cache *pc, program_entry *e) {
  program_entry **pp = bucket_of(pc, e->h1);
  while (*pp != e) pp = &(*pp)->hnext;
  *pp = e->hnext;
  lru_unlink(pc, e);
  pc->count--;
}

/* with pc->lock held: drops least recently used programs nobody else holds, down to PROGRAM_CACHE_MAX; returns
 * them chained through hnext, to be released without the lock */
static program_entry *evict(program_cache *pc) {
  program_entry *out = NULL;
  for (program_entry *e = pc->oldest, *next; e && pc->count > PROGRAM_CACHE_MAX; e = next) {
    next = e->newer;
    if (__atomic_load_n(&e->p->refcnt, __ATOMIC_ACQUIRE) != 1) continue;
    unlink_entry(pc, e);
    e->hnext = out;
    out = e;
  }
  return out;
}

static void release_entries(program_entry *e) {
  while (e) {
    program_entry *next = e->hnext;
    program_release(e->p);
    free(e);
    e = next;
  }
}

/* with pc->lock held: the failure recorded for (h1, h2), or NULL */
static const program_failure *failure_find(program_cache *pc, uint64_t h1, uint64_t h2) {
  if (pc->failed_env != env_generation()) {
    pc->nfailed = pc->next_failed = 0;
    pc->failed_env = env_generation();
  }
  for (int i = 0; i < pc->nfailed; i++)
    if (pc->failed[i].h1 == h1 && pc->failed[i].h2 == h2) return &pc->failed[i];
  return NULL;
}

tg_program *program_cache_get(program_cache *pc, const device *d, uint64_t seed, const char *name, const char *src,
                              program_build_fn build) {
  uint64_t h1, h2;
  keys(seed, name, src, &h1, &h2);
  pthread_mutex_lock(&pc->lock);
  program_entry *e = find(pc, h1, h2);
  if (e) {
    lru_unlink(pc, e);
    lru_push_newest(pc, e);
    program_retain(e->p);
    pc->mem_hits++;
    pthread_mutex_unlock(&pc->lock);
    return e->p;
  }
  const program_failure *f = failure_find(pc, h1, h2);
  if (f) {
    tg_set_error(TG_ERR_DEVICE, "%s", f->msg);
    pthread_mutex_unlock(&pc->lock);
    return NULL;
  }
  pthread_mutex_unlock(&pc->lock);

  bool refused = false;
  tg_program *p = build(d, name, src, &refused);
  if (!p) {
    if (refused) {
      pthread_mutex_lock(&pc->lock);
      program_failure *slot = &pc->failed[pc->next_failed];
      *slot = (program_failure){.h1 = h1, .h2 = h2};
      snprintf(slot->msg, sizeof slot->msg, "%s", tg_error());
      pc->next_failed = (pc->next_failed + 1) % PROGRAM_CACHE_FAILED;
      if (pc->nfailed < PROGRAM_CACHE_FAILED) pc->nfailed++;
      pthread_mutex_unlock(&pc->lock);
    }
    return NULL;
  }

  program_entry *ne = mem_alloc(sizeof *ne);
  pthread_mutex_lock(&pc->lock);
  if (p->from_disk) pc->disk_hits++;
  e = find(pc, h1, h2);
  if (e) {  /* another thread built it meanwhile: use theirs */
    program_retain(e->p);
    pthread_mutex_unlock(&pc->lock);
    free(ne);
    program_release(p);
    return e->p;
  }
  program_entry *evicted = NULL;
  if (ne) {  /* without an entry the program is just not cached */
    *ne = (program_entry){.h1 = h1, .h2 = h2, .p = p, .hnext = *bucket_of(pc, h1)};
    *bucket_of(pc, h1) = ne;
    lru_push_newest(pc, ne);
    pc->count++;
    program_retain(p);  /* the cache's reference */
    evicted = evict(pc);
  }
  pthread_mutex_unlock(&pc->lock);
  release_entries(evicted);
  return p;
}

bool program_cache_has(program_cache *pc, uint64_t seed, const char *name, const char *src) {
  uint64_t h1, h2;
  keys(seed, name, src, &h1, &h2);
  pthread_mutex_lock(&pc->lock);
  bool found = find(pc, h1, h2) != NULL;
  pthread_mutex_unlock(&pc->lock);
  return found;
}

void program_cache_clear(program_cache *pc) {
  pthread_mutex_lock(&pc->lock);
  pc->nfailed = pc->next_failed = 0;
  program_entry *all = NULL;
  while (pc->oldest) {
    program_entry *e = pc->oldest;
    unlink_entry(pc, e);
    e->hnext = all;
    all = e;
  }
  pthread_mutex_unlock(&pc->lock);
  release_entries(all);
}

void program_cache_counters(program_cache *pc, uint64_t *mem_hits, uint64_t *disk_hits) {
  pthread_mutex_lock(&pc->lock);
  if (mem_hits) *mem_hits = pc->mem_hits;
  if (disk_hits) *disk_hits = pc->disk_hits;
  pthread_mutex_unlock(&pc->lock);
}
