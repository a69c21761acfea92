/* test_threads.c — independent work from several threads at once: each thread builds, realizes and checks
 * its own tensors (elementwise, reductions, matmul, movement, autograd, scopes, a JIT step, errors) against
 * values computed here in plain C, while the others do the same. The library shares its intern table,
 * caches, allocator and thread pool between them; tg.h's "Threads:" paragraph says what the caller must do.
 * Also: gradients on one interned node from several threads, tensors handed from one thread to another,
 * the pool launched from several threads, tg_collect meanwhile, and fork() while a thread holds the lock.
 * scripts/tsan.sh runs these tests under ThreadSanitizer. */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/device.h"
#include "test.h"
#include "uop/uop.h"

#define NTHREADS 4

typedef struct worker {
  int id, iters;
  int fails;
  char first[512];  /* the first failure, reported by the main thread */
} worker;

static void wfail(worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wfail(worker *w, const char *fmt, ...) {
  if (w->fails++) return;
  va_list ap;
  va_start(ap, fmt);
  int k = snprintf(w->first, sizeof w->first, "thread %d: ", w->id);
  vsnprintf(w->first + k, sizeof w->first - (size_t)k, fmt, ap);
  va_end(ap);
}

/* t's n float32 values into out; false (with a failure recorded) if it could not be read */
static bool host(worker *w, const char *what, tg_tensor *t, float *out, int64_t n) {
  if (!t) {
    wfail(w, "%s: NULL: %s", what, tg_error());
    return false;
  }
  if (tg_numel(t) != n) {
    wfail(w, "%s: %lld elements, want %lld", what, (long long)tg_numel(t), (long long)n);
    return false;
  }
  if (tg_to_host(t, out, (size_t)n * sizeof *out) != TG_OK) {
    wfail(w, "%s: tg_to_host: %s", what, tg_error());
    return false;
  }
  return true;
}

static void expect(worker *w, const char *what, const float *got, const float *want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)got[i] - want[i]) <= tol + tol * fabs((double)want[i]))) {
      wfail(w, "%s[%lld]: got %.9g want %.9g", what, (long long)i, got[i], want[i]);
      return;
    }
}

/* ---- the JIT step of every thread: acc += x in place, out = acc * 2 + x ------------------------------- */

typedef struct step_ctx { tg_tensor *acc; } step_ctx;

static tg_status jit_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  step_ctx *s = ctx;
  tg_scope_begin();
  tg_status st = tg_assign(s->acc, tg_add(s->acc, in[0]));
  if (st == TG_OK) st = tg_realize(s->acc);
  out[0] = st == TG_OK ? tg_keep(tg_add(tg_mul_scalar(s->acc, 2), in[0])) : NULL;
  tg_scope_end();
  return out[0] ? TG_OK : tg_error_status();
}

/* ---- one thread's work -------------------------------------------------------------------------------- */

#define R 8
#define C 8

static float val(int id, int it, int k, int which) {
  return (float)sin(0.1 * (k + 1) + 0.7 * id + 0.013 * it + 1.9 * which);
}

/* one iteration: every kind of op, realized and compared */
static void iteration(worker *w, int it, tg_jit *jit, float *jit_acc) {
  int id = w->id;
  float a[R * C], b[R * C], got[R * C], want[R * C];
  for (int k = 0; k < R * C; k++) {
    a[k] = val(id, it, k, 0);
    b[k] = val(id, it, k, 1);
  }
  int64_t shape[2] = {R, C};
  tg_scope_begin();
  tg_tensor *A = tg_from_data(TG_FLOAT32, 2, shape, a, sizeof a);
  tg_tensor *B = tg_from_data(TG_FLOAT32, 2, shape, b, sizeof b);

  /* elementwise: relu(a * b - 0.25) + exp(a / 2) */
  tg_tensor *e = tg_add(tg_relu(tg_sub_scalar(tg_mul(A, B), 0.25)), tg_exp(tg_mul_scalar(A, 0.5)));
  for (int k = 0; k < R * C; k++) want[k] = fmaxf(a[k] * b[k] - 0.25f, 0) + expf(a[k] * 0.5f);
  if (host(w, "elementwise", e, got, R * C)) expect(w, "elementwise", got, want, R * C, 1e-5);

  /* reductions: row sums of a, column maxima of b */
  float rs[R], cm[C];
  for (int r = 0; r < R; r++) {
    rs[r] = 0;
    for (int c = 0; c < C; c++) rs[r] += a[r * C + c];
  }
  for (int c = 0; c < C; c++) {
    cm[c] = b[c];
    for (int r = 1; r < R; r++) cm[c] = fmaxf(cm[c], b[r * C + c]);
  }
  if (host(w, "sum", tg_sum(A, 1, (int[]){1}, false), got, R)) expect(w, "sum", got, rs, R, 1e-5);
  if (host(w, "max", tg_max(B, 1, (int[]){0}, false), got, C)) expect(w, "max", got, cm, C, 0);

  /* matmul */
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) {
      double s = 0;
      for (int k = 0; k < C; k++) s += (double)a[i * C + k] * b[k * C + j];
      want[i * C + j] = (float)s;
    }
  if (host(w, "matmul", tg_matmul(A, B), got, R * C)) expect(w, "matmul", got, want, R * C, 1e-5);

  /* movement: transpose, reshape (4, 16), rows 1..3, flipped along the last axis */
  tg_tensor *m = tg_flip(tg_shrink(tg_reshape(tg_contiguous(tg_permute(A, 2, (int[]){1, 0})), 2, (int64_t[]){4, 16}),
                                   2, (int64_t[]){1, 3, 0, 16}),
                         1, (int[]){1});
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 16; c++) {
      int flat = (r + 1) * 16 + (15 - c);  /* index into the transposed (8, 8) laid out flat */
      int ti = flat / C, tj = flat % C;
      want[r * 16 + c] = a[tj * C + ti];
    }
  if (host(w, "movement", m, got, 32)) expect(w, "movement", got, want, 32, 0);

  /* autograd: d/dX sum(X * X * B) = 2 X B */
  tg_tensor *X = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 2, shape, a, sizeof a), true);
  tg_tensor *loss = tg_sum(tg_mul(tg_mul(X, X), B), 0, NULL, false);
  if (!loss || tg_backward(loss) != TG_OK) wfail(w, "backward: %s", tg_error());
  else {
    for (int k = 0; k < R * C; k++) want[k] = 2 * a[k] * b[k];
    if (host(w, "grad", tg_grad(X), got, R * C)) expect(w, "grad", got, want, R * C, 1e-5);
  }
  tg_free(X);  /* X was made in the scope: this drops it (and its gradient) now */

  /* the same graph in every thread: one interned node, realized by whichever thread comes first */
  if (host(w, "shared", tg_sum(tg_add_scalar(tg_full(TG_FLOAT32, 2, shape, 3), 1), 0, NULL, false), got, 1))
    expect(w, "shared", got, (float[]){4 * R * C}, 1, 0);

  /* a thread's state made alike in every thread (equal graphs, one buffer at first), then written in place:
   * each thread's copy must see its own writes only */
  tg_tensor *st = tg_contiguous(tg_zeros(TG_FLOAT32, 1, (int64_t[]){4}));
  if (tg_realize(st) != TG_OK) wfail(w, "state: %s", tg_error());
  for (int k = 0; k <= id; k++)
    if (tg_assign(st, tg_add_scalar(st, 1)) != TG_OK || tg_realize(st) != TG_OK)
      wfail(w, "state assign: %s", tg_error());
  if (host(w, "state", st, got, 4)) expect(w, "state", got, (float[]){id + 1, id + 1, id + 1, id + 1}, 4, 0);

  /* random numbers: in range (which numbers a thread gets depends on the others' draws) */
  if (host(w, "rand", tg_rand(TG_FLOAT32, 1, (int64_t[]){16}), got, 16))
    for (int k = 0; k < 16; k++)
      if (!(got[k] >= 0 && got[k] < 1)) wfail(w, "rand[%d] = %g", k, got[k]);

  /* errors are per thread: this thread's message names this thread's shape */
  int64_t bad = 60 + id;
  tg_error_clear();
  if (tg_reshape(A, 1, &bad)) wfail(w, "reshape to (%lld,) succeeded", (long long)bad);
  char mine[32];
  snprintf(mine, sizeof mine, "(%lld,)", (long long)bad);
  if (tg_error_status() != TG_ERR_ARG || !strstr(tg_error(), mine))
    wfail(w, "error: status %d, message \"%s\" should name %s", tg_error_status(), tg_error(), mine);
  tg_error_clear();

  /* this thread's JIT: new input every call */
  float x[4], out[4];
  for (int k = 0; k < 4; k++) x[k] = (float)(id * 10 + k + it);
  tg_tensor *in = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, x, sizeof x);
  tg_tensor *o = NULL;
  if (!in || tg_jit_call(jit, &in, &o) != TG_OK) wfail(w, "jit call %d: %s", it, tg_error());
  else {
    for (int k = 0; k < 4; k++) {
      jit_acc[k] += x[k];
      want[k] = jit_acc[k] * 2 + x[k];
    }
    if (host(w, "jit", o, out, 4)) expect(w, "jit", out, want, 4, 0);
  }
  tg_free(o);
  tg_scope_end();
}

static void *work(void *arg) {
  worker *w = arg;
  tg_scope_begin();
  step_ctx sc = {.acc = tg_keep(tg_contiguous(tg_full(TG_FLOAT32, 1, (int64_t[]){4}, 0.5 * w->id)))};
  tg_scope_end();
  float acc[4] = {0.5f * w->id, 0.5f * w->id, 0.5f * w->id, 0.5f * w->id};
  tg_jit *jit = tg_jit_new(jit_step, &sc, 1, 1);
  if (!sc.acc || tg_realize(sc.acc) != TG_OK || !jit) wfail(w, "setup: %s", tg_error());
  for (int it = 0; it < w->iters && !w->fails; it++) iteration(w, it, jit, acc);
  tg_jit_free(jit);
  tg_free(sc.acc);
  return NULL;
}

/* runs work on n threads at once, each with its own id; reports the first failure of each */
static void run_threads(int n, int iters) {
  pthread_t th[NTHREADS];
  worker w[NTHREADS];
  for (int i = 0; i < n; i++) {
    w[i] = (worker){.id = i, .iters = iters};
    if (pthread_create(&th[i], NULL, work, &w[i]) != 0) {
      CHECK(0, "pthread_create failed");
      n = i;
    }
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) CHECK(!w[i].fails, "%s (%d failures)", w[i].first, w[i].fails);
}

TEST(test_threads_independent_work_gives_right_values) {
  /* the same work on one thread first: the reference for what several threads at once must also give */
  worker one = {.id = 3, .iters = 2};
  work(&one);
  CHECK(!one.fails, "one thread: %s", one.first);
  run_threads(NTHREADS, getenv("TG_TEST_QUICK") ? 8 : 20);
}

/* ---- variables, and a thread that empties every cache meanwhile ------------------------------------ */

typedef struct var_worker { worker w; bool collector; atomic_int *running; } var_worker;

static void *var_work(void *arg) {
  var_worker *vw = arg;
  worker *w = &vw->w;
  if (vw->collector) {  /* frees caches, stops the pool, reads statistics until the others are done */
    for (int it = 0; it < w->iters && atomic_load(vw->running); it++) {
      tg_get_stats();
      if (tg_collect() != TG_OK) wfail(w, "tg_collect: %s", tg_error());
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    return NULL;
  }
  float xv[16];
  for (int k = 0; k < 16; k++) xv[k] = (float)(100 * w->id + k);
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){16}, xv, sizeof xv);
  tg_variable *v = tg_variable_new("pos", 0, 12);
  if (!x || !v) wfail(w, "setup: %s", tg_error());
  for (int it = 0; it < w->iters && !w->fails; it++) {
    int pos = (it * 5 + w->id) % 13;
    if (tg_variable_bind(v, pos) != TG_OK) {
      wfail(w, "bind: %s", tg_error());
      break;
    }
    tg_scope_begin();
    float got[4];
    if (host(w, "shrink_at", tg_mul_scalar(tg_shrink_at(x, 0, v, 4), 2), got, 4))
      expect(w, "shrink_at", got, (float[]){2 * xv[pos], 2 * xv[pos + 1], 2 * xv[pos + 2], 2 * xv[pos + 3]}, 4, 0);
    tg_scope_end();
  }
  tg_variable_free(v);
  tg_free(x);
  atomic_fetch_sub(vw->running, 1);
  return NULL;
}

TEST(test_threads_variables_while_another_thread_collects) {
  pthread_t th[NTHREADS];
  var_worker vw[NTHREADS];
  int n = NTHREADS;
  atomic_int running = NTHREADS - 1;
  for (int i = 0; i < n; i++) {
    vw[i] = (var_worker){.w = {.id = i, .iters = i == 0 ? 1000 : 40}, .collector = i == 0, .running = &running};
    if (pthread_create(&th[i], NULL, var_work, &vw[i]) != 0) {
      CHECK(0, "pthread_create failed");
      atomic_store(&running, 0);
      n = i;
      break;
    }
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) CHECK(!vw[i].w.fails, "%s (%d failures)", vw[i].w.first, vw[i].w.fails);
}

/* ---- the pool itself: launches from several threads at once take turns ----------------------------- */

typedef struct pool_job { int64_t hits[64]; } pool_job;

static void mark_ids(void *ctx, int64_t core, int64_t n) {
  pool_job *j = ctx;
  j->hits[core] += n;  /* each id once per launch: no two threads of one launch touch the same element */
}

static void *pool_work(void *arg) {
  worker *w = arg;
  pool_job job = {{0}};
  int width = 2 + w->id % 3;
  for (int it = 0; it < w->iters; it++) pool_run(mark_ids, &job, width);
  for (int c = 0; c < 64; c++)
    if (job.hits[c] != (c < width ? (int64_t)w->iters * width : 0)) {
      wfail(w, "core id %d ran %lld times over %d launches of width %d", c, (long long)job.hits[c] / width, w->iters,
            width);
      break;
    }
  return NULL;
}

TEST(test_threads_pool_launches_from_several_threads) {
  pthread_t th[NTHREADS];
  worker w[NTHREADS];
  int n = NTHREADS;
  for (int i = 0; i < n; i++) {
    w[i] = (worker){.id = i, .iters = 2000};
    if (pthread_create(&th[i], NULL, pool_work, &w[i]) != 0) {
      CHECK(0, "pthread_create failed");
      n = i;
    }
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) CHECK(!w[i].fails, "%s", w[i].first);
}

/* ---- fork() while another thread is inside the library ----------------------------------------------- */

static void *hold_library(void *arg) {
  atomic_int *state = arg;
  lib_lock();  /* as a realize does, for 100 ms */
  atomic_store(state, 1);
  struct timespec t = {0, 100 * 1000000};
  nanosleep(&t, NULL);
  lib_unlock();
  atomic_store(state, 2);
  return NULL;
}

static double sum_times_two(void) {
  tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, (float[]){1, 2, 3, 4}, 16);
  double v = tg_item(tg_sum(tg_mul_scalar(x, 2), 0, NULL, false));
  tg_scope_end();
  return v;
}

TEST(test_threads_fork_while_another_thread_is_inside_the_library) {
  /* a child of fork() cannot use the parent's GPU driver (its threads are not there): it gets an error, no hang */
  bool gpu = strcmp(test_device_name(), "CPU") != 0;
  CHECK(sum_times_two() == 20, "before the fork: %s", tg_error());
  static atomic_int state;
  atomic_store(&state, 0);
  pthread_t th;
  pthread_attr_t at;  /* detached: the child's copy of the process must not see it as a thread never joined */
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&th, &at, hold_library, &state);
  pthread_attr_destroy(&at);
  if (err) {
    CHECK(0, "pthread_create failed");
    return;
  }
  while (!atomic_load(&state)) sched_yield();
  pid_t pid = fork();  /* the child has no thread that would ever give the lock back */
  if (pid == 0) {
    alarm(20);  /* a child stuck on the lock dies of SIGALRM */
    _exit(sum_times_two() == 20 ? 0 : strstr(tg_error(), "forked") ? 3 : 1);
  }
  int st = 0;
  if (pid > 0) waitpid(pid, &st, 0);
  while (atomic_load(&state) != 2) sched_yield();
  CHECK(pid > 0, "fork failed");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == (gpu ? 3 : 0), "the child %s %d", WIFEXITED(st) ? "exited with" : "died of signal",
        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* ---- gradients: a tensor made alike on two threads, and tensors handed from one thread to another ---- */

typedef struct grad_worker { worker w; pthread_barrier_t *bar; } grad_worker;

/* w = ones(4) requiring a gradient: the same graph on every thread, so one interned node */
static void *same_node_grad(void *arg) {
  grad_worker *g = arg;
  worker *w = &g->w;
  float xv[4], got[4];
  for (int k = 0; k < 4; k++) xv[k] = (float)(w->id * 10 + k);
  tg_tensor *p = tg_set_requires_grad(tg_ones(TG_FLOAT32, 1, (int64_t[]){4}), true);
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, xv, sizeof xv);
  pthread_barrier_wait(g->bar);  /* every thread's p is alive before anyone's backward */
  tg_scope_begin();
  tg_tensor *loss = tg_sum(tg_mul(p, x), 0, NULL, false);
  if (!loss || tg_backward(loss) != TG_OK) wfail(w, "backward: %s", tg_error());
  else if (host(w, "grad", tg_grad(p), got, 4)) expect(w, "grad (this thread's x only)", got, xv, 4, 0);
  tg_scope_end();
  pthread_barrier_wait(g->bar);  /* ... and until everyone read theirs */
  tg_free(p);
  tg_free(x);
  return NULL;
}

TEST(test_threads_backward_gives_each_thread_its_own_gradient) {
  pthread_t th[NTHREADS];
  grad_worker g[NTHREADS];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, NTHREADS);
  for (int i = 0; i < NTHREADS; i++) {
    g[i] = (grad_worker){.w = {.id = i, .iters = 1}, .bar = &bar};
    if (pthread_create(&th[i], NULL, same_node_grad, &g[i]) != 0) {
      CHECK(0, "pthread_create failed");
      return;  /* the others would wait at the barrier forever: leave them (the test has failed) */
    }
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&bar);
  for (int i = 0; i < NTHREADS; i++) CHECK(!g[i].w.fails, "%s", g[i].w.first);
}

/* a parameter made on the main thread, trained on another: y = w . x, loss = (y - 3)^2, plain SGD */
typedef struct handed { worker w; tg_tensor *param; float want[4]; } handed;

static void *train_handed(void *arg) {
  handed *h = arg;
  worker *w = &h->w;
  for (int it = 0; it < w->iters && !w->fails; it++) {
    tg_scope_begin();
    float xv[4] = {1, (float)it, 0.5f, -1};
    tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, xv, sizeof xv);
    tg_tensor *loss = tg_square(tg_sub_scalar(tg_sum(tg_mul(h->param, x), 0, NULL, false), 3));
    if (!loss || tg_backward(loss) != TG_OK || !tg_grad(h->param)) {
      wfail(w, "step %d: no gradient for the handed-over parameter: %s", it, tg_error());
    } else if (tg_assign(h->param, tg_sub(h->param, tg_mul_scalar(tg_grad(h->param), 0.05))) != TG_OK ||
               tg_realize(h->param) != TG_OK) {
      wfail(w, "step %d: update: %s", it, tg_error());
    }
    tg_zero_grad(h->param);
    tg_scope_end();
    double y = 0;  /* the same step in plain C */
    for (int k = 0; k < 4; k++) y += (double)h->want[k] * xv[k];
    for (int k = 0; k < 4; k++) h->want[k] -= (float)(0.05 * 2 * (y - 3) * xv[k]);
  }
  return NULL;
}

TEST(test_threads_tensors_handed_to_another_thread_train_there) {
  float init[4] = {0.1f, -0.2f, 0.3f, 0.05f}, got[4];
  handed h = {.w = {.id = 1, .iters = 6}};
  memcpy(h.want, init, sizeof init);
  tg_tensor *lazy = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, init, sizeof init);
  h.param = tg_set_requires_grad(tg_contiguous(lazy), true);
  tg_free(lazy);
  CHECK_T(h.param);
  CHECK(tg_realize(h.param) == TG_OK, "%s", tg_error());
  pthread_t th;
  if (pthread_create(&th, NULL, train_handed, &h) != 0) {
    CHECK(0, "pthread_create failed");
    tg_free(h.param);
    return;
  }
  pthread_join(th, NULL);  /* the hand back: the main thread reads what the other one trained */
  CHECK(!h.w.fails, "%s", h.w.first);
  if (tg_to_host(h.param, got, sizeof got) == TG_OK) CHECK_CLOSE("trained parameter", got, h.want, 4);
  else CHECK(0, "%s", tg_error());
  tg_free(h.param);
}
