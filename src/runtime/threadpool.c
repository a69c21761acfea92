/* threadpool.c — the persistent thread pool CPU kernels run on.
 *
 * A kernel splits its outermost THREAD loop by core_id, so a launch is "call fn(ctx, i, n) for every i in
 * [0, n) and wait". The pool has pool_size() threads including the caller; the worker threads are created
 * on the first launch (TG_THREADS, else the CPUs this process may run on). The ids may be more than the
 * threads that take them (pool_run_split: cpu.c cuts a kernel's loop into a few chunks per thread), so a
 * thread the OS sets aside for a while holds up one small chunk, not a whole thread's share; pool_worker()
 * names the thread running an id (0 the caller, 1.. the workers), for scratch kept per thread.
 *
 * The ids are not dealt out in advance: the caller and the workers it wakes claim them one by one from a
 * shared ticket, so when the OS has not scheduled a worker (a loaded or oversubscribed machine), the caller
 * runs that share itself instead of waiting a scheduler time slice for it. With static shares a decoding
 * step of 95 small kernels went from 0.6 ms to 70 ms per token when another process took a core.
 *
 * Each worker has its own wake word (a cache line): the caller bumps it; the worker spins on it for up to
 * SPIN_NS (pause, then sched_yield), then sleeps on it with a futex. The caller waits for the finished-id
 * count the same way. NOTES.md measured 0.12–0.8 µs per launch for spin-then-futex, 1.4 µs for sleep-only
 * and 4–70 µs for libgomp. With more threads than CPUs, spinning only steals time from the thread being
 * waited for, so workers sleep at once.
 *
 * pool_run is meant to be called from one thread at a time; a mutex makes concurrent callers take turns.
 * Called from inside a task, it runs the nested work on the calling thread, in order. Workers block all
 * signals, and a child of fork() starts its own workers on its first launch.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "runtime/device.h"
#include "uop/env.h"

#define MAX_THREADS ENV_THREADS_MAX  /* TG_THREADS accepts up to this */
#define SPIN_NS 100000  /* 100 µs: covers the host work between back-to-back kernels */
#define PAUSE_ITERS 64  /* about 2–5 µs of pause before yielding */

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* sleeps while *w == expect (spurious wakes allowed); wakes sleepers on w */
#ifdef __linux__
static void word_wait(atomic_uint *w, unsigned expect) {
  syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
}
static void word_wake(atomic_uint *w) { syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }
#else
static void word_wait(atomic_uint *w, unsigned expect) {
  (void)w, (void)expect;
  sched_yield();
}
static void word_wake(atomic_uint *w) { (void)w; }
#endif

typedef struct slot {
  _Alignas(64) atomic_uint gen;  /* bumped by the caller once per launch this worker should join */
  atomic_int sleeping;           /* the worker is (about to be) in word_wait on gen */
  atomic_bool exit;
  unsigned start_gen;            /* gen when the thread was created */
} slot;

/* The launch in progress. Core ids are claimed one at a time from `ticket` (launch number << 32 | id count
 * << 16 | next id): whoever runs (the caller, or a worker that woke up) takes the next id, so a worker the OS
 * has not scheduled yet holds nothing up: the caller runs its share. A claim is a compare-and-swap on the
 * whole ticket, so it succeeds only while the ticket still names the launch whose task the claimer read: a
 * late worker never runs an old task, and never a new task under an old count. */
#define TICKET(seq, n, next) ((uint64_t)(seq) << 32 | (uint64_t)(n) << 16 | (uint64_t)(next))
#define MAX_IDS 65535
static struct {
  pthread_mutex_t run_lock;   /* one launch (or start/shutdown) at a time */
  int nthreads;               /* threads incl. the caller once started; 0 before */
  int64_t spin_ns;
  pthread_t tids[MAX_THREADS];
  slot slots[MAX_THREADS];
  _Atomic(pool_task) fn;
  _Atomic(void *) ctx;
  _Alignas(64) _Atomic uint64_t ticket;
  _Alignas(64) atomic_uint done;     /* core ids finished in the current launch */
  atomic_int caller_sleeping;
} P = {.run_lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_int configured;       /* pool_size before the threads exist; 0: not read yet */
static _Thread_local bool in_task;  /* this thread is running a task: a nested pool_run runs inline */
static _Thread_local int worker_idx;  /* pool_worker(): 0 on every thread but the pool's workers */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cpus_available(void) {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static int config_size(void) {
  int n = atomic_load(&configured);
  if (n) return n;
  n = env_get()->threads;  /* a bad TG_THREADS is realize's error (env.h); the pool just starts */
  if (n <= 0) n = cpus_available();
  if (n > MAX_THREADS) n = MAX_THREADS;
  atomic_store(&configured, n);
  return n;
}

/* spins until (*w == v) == equal, for up to spin_ns: pause first (a back-to-back launch is answered within
 * a few µs), then sched_yield, so that a thread the scheduler put on this CPU (likely the one being waited
 * for: a scheduler that packs threads onto few CPUs made pure spinning cost 100 µs per launch) can run.
 * true if the condition came true */
static bool spin_until(atomic_uint *w, unsigned v, bool equal, int64_t spin_ns) {
  if (spin_ns <= 0) return false;
  int64_t t0 = now_ns();
  for (int k = 1;; k++) {
    if ((atomic_load(w) == v) == equal) return true;
    if (k <= PAUSE_ITERS) {
      CPU_RELAX();
    } else {
      if (now_ns() - t0 > spin_ns) return false;
      sched_yield();
    }
  }
}

/* waits until *w != seen: spins, then sleeps; returns the new value */
static unsigned wait_change(atomic_uint *w, unsigned seen, atomic_int *sleeping, int64_t spin_ns) {
  unsigned v;
  if (spin_until(w, seen, false, spin_ns)) return atomic_load(w);
  for (;;) {
    atomic_store(sleeping, 1);
    if ((v = atomic_load(w)) != seen) break;
    word_wait(w, seen);
  }
  atomic_store(sleeping, 0);
  return v;
}

/* claims and runs core ids of the current launch until none is left */
static void run_claims(void) {
  for (;;) {
    uint64_t t = atomic_load(&P.ticket);
    pool_task fn = atomic_load(&P.fn);
    void *ctx = atomic_load(&P.ctx);
    unsigned n = (unsigned)(t >> 16 & 0xffff), id = (unsigned)(t & 0xffff);
    if (id >= n) return;
    if (!atomic_compare_exchange_weak(&P.ticket, &t, t + 1)) continue;  /* the ticket moved on: read again */
    in_task = true;
    fn(ctx, id, n);
    in_task = false;
    /* the caller may sleep on done: wake it when the last id is finished */
    if (atomic_fetch_add(&P.done, 1) + 1 == n && atomic_load(&P.caller_sleeping)) word_wake(&P.done);
  }
}

static void *worker_main(void *arg) {
  slot *s = arg;
  unsigned seen = s->start_gen;
  worker_idx = (int)(s - P.slots);
  for (;;) {
    seen = wait_change(&s->gen, seen, &s->sleeping, P.spin_ns);
    if (atomic_load(&s->exit)) return NULL;
    run_claims();
  }
}

/* in a child of fork() the workers do not exist: forget them, the next launch starts new ones */
static void pool_after_fork_child(void) {
  pthread_mutex_init(&P.run_lock, NULL);
  P.nthreads = 0;
  for (int t = 0; t < MAX_THREADS; t++) atomic_store(&P.slots[t].sleeping, 0);
  atomic_store(&P.caller_sleeping, 0);
  atomic_store(&configured, 0);
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, pool_after_fork_child); }

/* creates the workers; with run_lock held */
static void pool_start(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_atfork);
  int want = config_size();
  P.spin_ns = want <= cpus_available() ? SPIN_NS : 0;  /* before the workers read it */
  /* workers take no signals: the application's handlers run on its own threads */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int n = 1;
  for (; n < want; n++) {
    slot *s = &P.slots[n];
    atomic_store(&s->exit, false);
    s->start_gen = atomic_load(&s->gen);
    if (pthread_create(&P.tids[n], NULL, worker_main, s) != 0) break;  /* run with what we have */
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  P.nthreads = n;
  atomic_store(&configured, n);
}

int pool_size(void) { return config_size(); }

int pool_worker(void) { return worker_idx; }

void pool_run(pool_task fn, void *ctx, int nthreads) { pool_run_split(fn, ctx, nthreads, nthreads); }

void pool_run_split(pool_task fn, void *ctx, int nids, int nthreads) {
  if (!fn) return;
  int64_t n = nids > 0 ? nids : pool_size();
  if (n > MAX_IDS) n = MAX_IDS;  /* ids are 16 bits of the ticket; kernels split by whatever count they get */
  if (nthreads <= 0) nthreads = pool_size();
  if (n == 1 || nthreads == 1 || in_task) {
    bool outer = in_task;
    for (int64_t i = 0; i < n; i++) {
      in_task = true;
      fn(ctx, i, n);
    }
    in_task = outer;
    return;
  }
  pthread_mutex_lock(&P.run_lock);
  if (!P.nthreads) pool_start();
  int most = nthreads < P.nthreads ? nthreads : P.nthreads;
  int helpers = (n < most ? (int)n : most) - 1;  /* workers woken to claim ids */
  /* the task first, then the ticket that opens it (seq_cst: a claimer that reads the new ticket reads the
   * new task); ids of the previous launch are all claimed, so no one reads the task while it changes hands */
  atomic_store(&P.fn, fn);
  atomic_store(&P.ctx, ctx);
  atomic_store(&P.done, 0);
  atomic_store(&P.ticket, TICKET((atomic_load(&P.ticket) >> 32) + 1, n, 0));
  for (int t = 1; t <= helpers; t++) {
    slot *s = &P.slots[t];
    atomic_fetch_add(&s->gen, 1);  /* seq_cst: orders the read of sleeping after it */
    if (atomic_load(&s->sleeping)) word_wake(&s->gen);
  }
  run_claims();
  /* wait for the ids others claimed: spin, then sleep on done */
  unsigned fin;
  if (!spin_until(&P.done, (unsigned)n, true, P.spin_ns)) {
    while ((fin = atomic_load(&P.done)) != (unsigned)n) {
      atomic_store(&P.caller_sleeping, 1);
      if ((fin = atomic_load(&P.done)) != (unsigned)n) word_wait(&P.done, fin);
      atomic_store(&P.caller_sleeping, 0);
    }
  }
  pthread_mutex_unlock(&P.run_lock);
}

void pool_shutdown(void) {
  pthread_mutex_lock(&P.run_lock);
  for (int t = 1; t < P.nthreads; t++) {
    slot *s = &P.slots[t];
    atomic_store(&s->exit, true);
    atomic_fetch_add(&s->gen, 1);
    if (atomic_load(&s->sleeping)) word_wake(&s->gen);
  }
  for (int t = 1; t < P.nthreads; t++) pthread_join(P.tids[t], NULL);
  P.nthreads = 0;
  atomic_store(&configured, 0);  /* TG_THREADS (env_get) is applied again on the next start */
  pthread_mutex_unlock(&P.run_lock);
}
