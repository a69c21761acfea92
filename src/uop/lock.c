/* lock.c — the library lock, and the nodes each thread keeps alive between its collection points.
 *
 * One mutex guards everything threads share above the runtime: the intern table and the collector, the
 * live-tensor list, the kernel cache, realized values cached on nodes, engine statistics, the lazily built
 * rule tables. It is recursive through a per-thread depth, so a public call that holds it throughout (a
 * realize, a JIT call, a backward: a "region") calls others that take it again for the price of a counter.
 * Outside regions, building a graph takes it once per interned node. The runtime below (buffer cache,
 * program cache, compile cache, thread pool) has its own locks and is safe without this one.
 *
 * Pins. Between two library calls a thread holds only tensors, and the collector marks every live tensor.
 * Inside a call it may hold nodes no tensor refers to yet (an op half built, a dropped tensor's node), and
 * another thread's collection must not free those. So every node a thread gets from the intern table
 * outside a region, and the node of every tensor it drops, is pinned: a root of the other threads'
 * collections until this thread reaches a point where it could collect itself (uop_gc, uop_gc_maybe: the
 * points where no unrooted node may be held, with one thread as with many). A region needs no pins: no other
 * thread collects while it holds the lock, and it hands nothing unrooted back to its caller. A thread that
 * waits between two such points (on something of its own) keeps what it pinned alive until it is back; a
 * thread that ends lets go of it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

/* what one thread keeps alive; in the registry while it has pins */
typedef struct thread_pins {
  uop **pins;
  size_t n, cap;
  size_t unique_after_compact;  /* n after the last compaction: compact again when it doubled */
  bool lost;                    /* a pin could not be stored: nothing is freed until this thread's next point */
  bool registered;
  struct thread_pins *prev, *next;
} thread_pins;

static pthread_mutex_t lib_mutex = PTHREAD_MUTEX_INITIALIZER;
_Thread_local int lib_lock_depth TG_TLS_FAST;    /* lib_lock calls not yet undone on this thread */
_Thread_local int lib_region_depth TG_TLS_FAST;
static _Thread_local thread_pins self TG_TLS_FAST;
static thread_pins *registry;  /* threads with pins (with the lock held) */
static int lost_threads;       /* threads whose pins are incomplete: collections free nothing meanwhile */
static pthread_key_t exit_key;
static bool key_ok;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void lock_init(void);

void lib_mutex_acquire(void) {
  pthread_once(&init_once, lock_init);
  pthread_mutex_lock(&lib_mutex);
}
void lib_mutex_release(void) { pthread_mutex_unlock(&lib_mutex); }

void lib_region_begin(void) {
  lib_lock();
  lib_region_depth++;
}

void lib_region_end(void) {
  lib_region_depth--;
  lib_unlock();
}

/* with the lock held */
static void unregister(thread_pins *p) {
  if (!p->registered) return;
  if (p->prev) p->prev->next = p->next;
  else registry = p->next;
  if (p->next) p->next->prev = p->prev;
  p->prev = p->next = NULL;
  p->registered = false;
}

/* a thread that ends lets go of its pins (its tensors stay: they belong to whoever holds them) */
static void thread_exit(void *arg) {
  thread_pins *p = arg;
  lib_lock();
  unregister(p);
  if (p->lost) lost_threads--;
  free(p->pins);
  *p = (thread_pins){0};
  lib_unlock();
}

/* fork() while another thread is inside the library would give the child a lock that nobody there will
 * release: fork waits for the lock, and the child forgets the other threads' pins (they have no threads) */
static void fork_prepare(void) { lib_lock(); }
static void fork_parent(void) { lib_unlock(); }
static void fork_child(void) {
  registry = self.registered ? &self : NULL;
  self.prev = self.next = NULL;
  lost_threads = self.lost;
  lib_unlock();
}

static void lock_init(void) {
  key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (uop *const *)a, y = (uintptr_t) * (uop *const *)b;
  return x < y ? -1 : x > y;
}

/* Makes room for one more pin; false when out of memory. A thread that builds the same op again and again
 * without reaching a collection point pins the same nodes again and again, so a big list drops its
 * duplicates before it grows. Not a small one: a list is emptied at every collection point, and sorting
 * one step's few thousand pins each step cost 6% of building and scheduling a chain of tiny kernels. */
#define PINS_COMPACT_MIN 65536
static bool pins_room(thread_pins *p) {
  if (p->n < p->cap) return true;
  if (p->n >= PINS_COMPACT_MIN && p->n >= 2 * p->unique_after_compact) {
    qsort(p->pins, p->n, sizeof *p->pins, by_address);
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
      if (!k || p->pins[k - 1] != p->pins[i]) p->pins[k++] = p->pins[i];
    p->n = p->unique_after_compact = k;
    if (p->n < p->cap) return true;
  }
  size_t nc = p->cap ? p->cap * 2 : 256;
  uop **np = mem_realloc(p->pins, nc * sizeof *np);
  if (!np) return false;
  p->pins = np;
  p->cap = nc;
  return true;
}

/* with the lock held: this thread's pins are incomplete until its next collection point */
static void set_lost(thread_pins *p) {
  if (!p->lost) lost_threads++;
  p->lost = true;
}

void uop_pin_dropped(uop *u) {
  if (!u) return;
  thread_pins *p = &self;
  if (!p->registered) {
    /* the key's destructor takes the thread out of the registry when it ends (lock_init made the key: the
     * lock is held). Without a key (none left in the process) the thread stays out of the registry and
     * every collection frees nothing while it holds pins it could not record. */
    if (key_ok && pthread_setspecific(exit_key, p) == 0) {
      p->registered = true;
      p->next = registry;
      if (registry) registry->prev = p;
      registry = p;
    }
  }
  if (p->registered && pins_room(p)) p->pins[p->n++] = u;
  else set_lost(p);
}

void pins_release_own(void) {
  lib_lock();
  self.n = self.unique_after_compact = 0;
  if (self.lost) lost_threads--;
  self.lost = false;
  lib_unlock();
}

bool pins_mark_others(void) {
  for (thread_pins *p = registry; p; p = p->next)
    if (p != &self)
      for (size_t i = 0; i < p->n; i++) uop_mark(p->pins[i]);
  return lost_threads > (self.lost ? 1 : 0);
}
