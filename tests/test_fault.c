/* test_fault.c — allocation failure injected at each allocation of a training step (src/uop/mem.c): every
 * run that hits the failure returns an error with a message (or absorbs it and still gives the right
 * numbers), leaks no tensor (and no memory: the CI runs this under LeakSanitizer), and the library keeps
 * working: the same step then succeeds with the numbers of a plain C reference. */
#include <execinfo.h>
#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

#include "engine/schedule_cache.h"
#include "runtime/device.h"
#include "tensor/tensor.h"
#include "engine/render_cache.h"
#include "test.h"

/* TG_FAULT_TRACE=1: each failing allocation prints its backtrace (resolve with addr2line -e build/run_tests) */
static void print_backtrace(int64_t k) {
  void *bt[16];
  int n = backtrace(bt, 16);
  fprintf(stderr, "== allocation %lld fails:\n", (long long)k);
  backtrace_symbols_fd(bt, n, 2);
}

static void trace_on(void) {
  if (getenv("TG_FAULT_TRACE")) mem_on_fail(print_backtrace);
}

/* TG_FAULT_LEAKS=1 under AddressSanitizer: LeakSanitizer looks after each failed step, naming the allocation
 * whose failure leaked (by default it looks once, at exit) */
#if defined(__SANITIZE_ADDRESS__)
#define FAULT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAULT_ASAN 1
#endif
#endif
#ifdef FAULT_ASAN
#include <sanitizer/lsan_interface.h>
static bool leaked_now(void) { return getenv("TG_FAULT_LEAKS") && __lsan_do_recoverable_leak_check(); }
#else
static bool leaked_now(void) { return false; }
#endif

/* a tiny MLP: x (N, I) -> relu(x w1 + b1) (N, H) -> w2 (N, O); loss mean((out - y)^2); SGD by primitives */
enum { N = 4, I = 3, H = 5, O = 2 };
#define LR 0.1f

static const float X[N * I] = {0.5f, -1, 2, 1.5f, 0.25f, -0.5f, -1, 2, 1, 0.75f, 0.5f, -2};
static const float Y[N * O] = {1, -1, 0.5f, 2, -0.5f, 0, 1.5f, 1};
static float W1[I * H], B1[H], W2[H * O];

static void init_values(void) {
  for (int i = 0; i < I * H; i++) W1[i] = (float)((i * 7) % 11 - 5) / 8;
  for (int i = 0; i < H; i++) B1[i] = (float)(i % 3) / 4 + 0.1f;
  for (int i = 0; i < H * O; i++) W2[i] = (float)((i * 5) % 9 - 4) / 6;
}

/* the step in plain C: the loss before the update and the updated parameters */
static float ref_step(float *w1, float *b1, float *w2) {
  float z[N * H], h[N * H], dout[N * O], dz[N * H];
  float loss = 0;
  for (int n = 0; n < N; n++)
    for (int j = 0; j < H; j++) {
      float s = B1[j];
      for (int i = 0; i < I; i++) s += X[n * I + i] * W1[i * H + j];
      z[n * H + j] = s;
      h[n * H + j] = s > 0 ? s : 0;
    }
  for (int n = 0; n < N; n++)
    for (int k = 0; k < O; k++) {
      float s = 0;
      for (int j = 0; j < H; j++) s += h[n * H + j] * W2[j * O + k];
      float d = s - Y[n * O + k];
      loss += d * d / (N * O);
      dout[n * O + k] = 2 * d / (N * O);
    }
  for (int n = 0; n < N; n++)
    for (int j = 0; j < H; j++) {
      float s = 0;
      for (int k = 0; k < O; k++) s += dout[n * O + k] * W2[j * O + k];
      dz[n * H + j] = z[n * H + j] > 0 ? s : 0;
    }
  for (int j = 0; j < H; j++)
    for (int k = 0; k < O; k++) {
      float g = 0;
      for (int n = 0; n < N; n++) g += h[n * H + j] * dout[n * O + k];
      w2[j * O + k] = W2[j * O + k] - LR * g;
    }
  for (int i = 0; i < I; i++)
    for (int j = 0; j < H; j++) {
      float g = 0;
      for (int n = 0; n < N; n++) g += X[n * I + i] * dz[n * H + j];
      w1[i * H + j] = W1[i * H + j] - LR * g;
    }
  for (int j = 0; j < H; j++) {
    float g = 0;
    for (int n = 0; n < N; n++) g += dz[n * H + j];
    b1[j] = B1[j] - LR * g;
  }
  return loss;
}

typedef struct mlp { tg_tensor *p[3]; } mlp;  /* w1, b1, w2 */

static bool mlp_new(mlp *m) {
  m->p[0] = tg_from_data(TG_FLOAT32, 2, (int64_t[]){I, H}, W1, sizeof W1);
  m->p[1] = tg_from_data(TG_FLOAT32, 1, (int64_t[]){H}, B1, sizeof B1);
  m->p[2] = tg_from_data(TG_FLOAT32, 2, (int64_t[]){H, O}, W2, sizeof W2);
  for (int i = 0; i < 3; i++) tg_set_requires_grad(m->p[i], true);
  return m->p[0] && m->p[1] && m->p[2];
}

static void mlp_free(mlp *m) {
  for (int i = 0; i < 3; i++) tg_free(m->p[i]);
}

/* one training step; *loss is the loss before the update */
static tg_status train_step(mlp *m, float *loss) {
  tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, I}, X, sizeof X);
  tg_tensor *y = tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, O}, Y, sizeof Y);
  tg_tensor *h = tg_relu(tg_add(tg_matmul(x, m->p[0]), m->p[1]));
  tg_tensor *d = tg_sub(tg_matmul(h, m->p[2]), y);
  tg_tensor *l = tg_mean(tg_mul(d, d), 0, NULL, false);
  tg_status st = l ? tg_backward(l) : tg_error_status();
  for (int i = 0; i < 3 && st == TG_OK; i++)
    st = tg_assign(m->p[i], tg_sub(m->p[i], tg_mul_scalar(tg_grad(m->p[i]), LR)));
  if (st == TG_OK) st = tg_realize_many(4, (tg_tensor *[]){m->p[0], m->p[1], m->p[2], l});
  if (st == TG_OK) st = tg_to_host(l, loss, sizeof *loss);
  for (int i = 0; i < 3; i++) tg_zero_grad(m->p[i]);
  tg_scope_end();
  return st;
}

/* the step's results against the reference; false after reporting the first difference */
static bool step_right(mlp *m, float loss, const char *when) {
  float w1[I * H], b1[H], w2[H * O], got[I * H];
  float want = ref_step(w1, b1, w2);
  if (!check_close_f32(when, &loss, &want, 1, 1e-5, 1e-4, __FILE__, __LINE__)) return false;
  const float *refs[3] = {w1, b1, w2};
  const size_t sizes[3] = {sizeof w1, sizeof b1, sizeof w2};
  for (int i = 0; i < 3; i++) {
    if (tg_to_host(m->p[i], got, sizes[i]) != TG_OK) {
      CHECK(false, "%s: reading parameter %d: %s", when, i, tg_error());
      return false;
    }
    if (!check_close_f32(when, got, refs[i], (int64_t)(sizes[i] / sizeof(float)), 1e-5, 1e-4, __FILE__, __LINE__))
      return false;
  }
  return true;
}

static int64_t live_tensors(void) {
  int64_t n = 0;
  for (tg_tensor *t = tensor_live_first(); t; t = t->next) n++;
  return n;
}

/* buffers still referenced once the IR nothing refers to is freed (a leaked reference keeps one) */
static int64_t live_buffers(void) {
  uop_gc();  /* the schedule cache keeps nodes of earlier graphs, never their buffers (a weak root) */
  /* freed buffers a device keeps for reuse are not references anyone holds: a failed allocation empties that
   * cache (then a count taken with it full looks like buffers "leaked" below zero: DEV=CL, -10) */
  tg_memory_empty_cache(NULL);
  return buffer_live_count();
}

typedef struct sweep_stats {
  int64_t sites;     /* k values whose allocation failed */
  int64_t errors;    /* ... and the step returned an error */
  int64_t absorbed;  /* ... and the step went on without it (a cache or a fallback) and was right */
  int64_t bad;       /* contract broken: reported */
} sweep_stats;

/* fails allocation k of the step, for k = 1, 2, ... (every stride-th) until a step runs without reaching k.
 * cold: the caches are emptied before each step, so the step schedules, generates and loads its kernels */
static void sweep(bool cold, int64_t stride, sweep_stats *s) {
  init_values();
  trace_on();
  /* a cold step starts from emptied caches: so does the count it is compared with (caches may hold buffers
   * of earlier tests, which the first tg_collect below would free) */
  if (cold) tg_collect();
  bool kept = render_cache_enable(!cold);  /* cold: every kernel is rendered, none read back from disk */
  int64_t base = live_tensors(), base_buffers = live_buffers();
  *s = (sweep_stats){0};
  for (int64_t k = 1;; k += stride) {
    if (cold) tg_collect();
    mlp m;
    float loss = 0;
    if (!mlp_new(&m)) { CHECK(false, "%s", tg_error()); return; }
    tg_error_clear();
    mem_fail_at(k);
    tg_status st = train_step(&m, &loss);
    bool fired = mem_failed();
    mem_fail_at(0);
    char when[64];
    snprintf(when, sizeof when, "%s, allocation %lld failed", cold ? "cold" : "warm", (long long)k);
    if (!fired) {
      /* k is past the step's last allocation: the sweep is done, and this step ran untouched */
      CHECK(st == TG_OK && step_right(&m, loss, "the step without a failure"), "%s", tg_error());
      mlp_free(&m);
      break;
    }
    s->sites++;
    if (st != TG_OK) {
      s->errors++;
      if (st != TG_ERR_NOMEM || tg_error_status() != TG_ERR_NOMEM || !tg_error()[0]) {
        s->bad++;
        CHECK(false, "%s: status %d, error status %d, message \"%s\" (want TG_ERR_NOMEM and a message)", when, (int)st,
              (int)tg_error_status(), tg_error());
      }
    } else if (step_right(&m, loss, when)) {
      s->absorbed++;
      if (getenv("TG_FAULT_TRACE")) fprintf(stderr, "  %s: absorbed\n", when);
    } else {
      s->bad++;
      CHECK(false, "%s: the step returned TG_OK with wrong numbers", when);
    }
    mlp_free(&m);
    if (leaked_now()) {
      s->bad++;
      CHECK(false, "%s: memory leaked (LeakSanitizer's report above)", when);
    }
    if (live_tensors() != base || live_buffers() != base_buffers) {
      s->bad++;
      CHECK(false, "%s: %lld tensors and %lld buffers leaked", when, (long long)(live_tensors() - base),
            (long long)(live_buffers() - base_buffers));
      base = live_tensors();
      base_buffers = live_buffers();
    }
    /* the library keeps working: the same step, nothing failing, gives the reference's numbers */
    if (!mlp_new(&m)) { CHECK(false, "%s", tg_error()); return; }
    st = train_step(&m, &loss);
    if (st != TG_OK || !step_right(&m, loss, "the step after")) {
      s->bad++;
      CHECK(false, "%s: the step after it: %s", when, st != TG_OK ? tg_error() : "wrong numbers");
    }
    mlp_free(&m);
    if (s->bad > 5) {
      CHECK(false, "%s: stopping after 5 broken contracts", when);
      break;
    }
  }
  mem_on_fail(NULL);
  render_cache_enable(kept);
}

/* Failures are absorbed where the code falls back to a choice that is still right, and the sweep checks the
 * numbers of those steps: the host allocator retries after emptying its buffer cache, the scheduler treats a
 * node it could not analyse as expensive (stored, not recomputed), the lowering drops an index expression it
 * had no use for (an axis of size 1), the collector frees nothing when its mark stack cannot grow. */
TEST(test_fault_every_allocation_of_a_warm_training_step) {
  sweep_stats s;
  sweep(false, 1, &s);
  fprintf(stderr, "  warm step: %lld allocations failed one at a time: %lld errors (TG_ERR_NOMEM), %lld absorbed with "
          "the right result, %lld broken\n", (long long)s.sites, (long long)s.errors, (long long)s.absorbed,
          (long long)s.bad);
  CHECK(s.sites > 100, "only %lld allocations in a training step?", (long long)s.sites);
}

/* with the caches emptied before each step it also schedules, generates, renders and loads its kernels:
 * about 4400 allocations, every one of them with TG_FAULT_FULL=1 (20 s), every 5th by default, every 13th
 * with TG_TEST_QUICK */
TEST(test_fault_allocations_of_a_cold_training_step) {
  sweep_stats s;
  int64_t stride = getenv("TG_FAULT_FULL") ? 1 : getenv("TG_TEST_QUICK") ? 13 : 5;
  sweep(true, stride, &s);
  fprintf(stderr, "  cold step (caches emptied: schedule, codegen, load): %lld allocations (one in %lld) failed one at a "
          "time: %lld errors (TG_ERR_NOMEM), %lld absorbed with the right result, %lld broken\n", (long long)s.sites,
          (long long)stride, (long long)s.errors, (long long)s.absorbed, (long long)s.bad);
  /* a GPU device makes fewer host allocations per kernel (no shared object to load) */
  CHECK(s.sites > (strcmp(test_device_name(), "CPU") ? 2000 : 4000) / stride, "only %lld allocations tried",
        (long long)s.sites);
}

/* a scope opened at depth 0 needs no allocation: one that could not open gave its tensors to no one (leaked) */
TEST(test_fault_scope_at_depth_0_always_opens) {
  int64_t base = live_tensors();
  for (int64_t k = 1; k <= 3; k++) {
    mem_fail_at(k);
    tg_scope_begin();
    tg_from_data(TG_FLOAT32, 1, (int64_t[]){2}, (float[]){1, 2}, 8);
    tg_scope_end();
    mem_fail_at(0);
    CHECK(live_tensors() == base, "allocation %lld failed: %lld tensors left after the scope ended", (long long)k,
          (long long)(live_tensors() - base));
  }
}

/* a graph sort that runs out of memory returns NULL, never a partial order (a node it could not record as
 * seen was taken for one seen before, and tg_backward lost gradients without an error) */
TEST(test_fault_toposort_is_whole_or_null) {
  uop *x = uop_const(TG_FLOAT32, 1);
  for (int i = 0; i < 300; i++) x = uop_binary(OP_ADD, x, uop_const(TG_FLOAT32, i + 2));  /* 601 nodes */
  CHECK(x != NULL, "%s", tg_error());
  int want = 0;
  free(uop_toposort(x, &want));
  CHECK(want == 601, "%d nodes", want);
  int failed = 0;
  for (int64_t k = 1;; k++) {
    int n = -1;
    tg_error_clear();
    mem_fail_at(k);
    uop **order = uop_toposort(x, &n);
    bool fired = mem_failed();
    mem_fail_at(0);
    bool sorted = order != NULL;
    free(order);
    if (!fired) break;
    failed++;
    CHECK(!sorted, "allocation %lld failed: an order of %d nodes of %d", (long long)k, n, want);
    CHECK(tg_error_status() == TG_ERR_NOMEM && tg_error()[0], "allocation %lld failed: no error", (long long)k);
  }
  CHECK(failed > 3, "%d allocations tried", failed);
}

/* a realize that fails runs nothing: an assigned parameter's buffer, written in place by its kernel, keeps
 * its old contents when another kernel of the same realize cannot be made (before: the first had run) */
TEST(test_fault_failed_realize_changes_no_buffer) {
  trace_on();
  int64_t tried = 0, errors = 0;
  for (int64_t k = 1;; k++) {
    tg_collect();  /* the kernels are made again: their allocations are among those that fail */
    float w0[4] = {1, 2, 3, 4}, x0[6] = {1, 2, 3, 4, 5, 6};
    tg_tensor *w = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, w0, sizeof w0);
    tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, x0, sizeof x0);
    CHECK_T(w);
    CHECK_T(x);
    tg_buffer *b = uop_storage(w->u->op == OP_RESHAPE ? w->u->src[0] : w->u);
    CHECK(b && b->ptr, "no buffer");
    tg_scope_begin();
    tg_error_clear();
    mem_fail_at(k);
    tg_status st = tg_assign(w, tg_add_scalar(w, 1.0));
    if (st == TG_OK) st = tg_realize_many(2, (tg_tensor *[]){w, tg_sum(tg_exp(x), 0, NULL, false)});
    bool fired = mem_failed();
    mem_fail_at(0);
    tg_scope_end();
    float got[4];
    CHECK(b->dev->copyout(got, b, sizeof got) == TG_OK, "reading the buffer back: %s", tg_error());
    tg_free(w);
    tg_free(x);
    if (!fired) {
      CHECK(st == TG_OK && got[0] == 2 && got[3] == 5, "%s", tg_error());
      break;
    }
    tried++;
    if (st == TG_OK) continue;
    errors++;
    CHECK(tg_error_status() == TG_ERR_NOMEM && tg_error()[0], "allocation %lld: status %d \"%s\"", (long long)k,
          (int)tg_error_status(), tg_error());
    CHECK(got[0] == 1 && got[1] == 2 && got[2] == 3 && got[3] == 4, "allocation %lld failed: the parameter's "
          "buffer holds %g %g %g %g, not 1 2 3 4", (long long)k, got[0], got[1], got[2], got[3]);
    if (test_failures_in_current() > 5) break;
  }
  mem_on_fail(NULL);
  CHECK(tried > 50 && errors > 0, "%lld allocations tried, %lld errors", (long long)tried, (long long)errors);
}

/* ---- the same step captured by tg_jit: call 1 runs it, call 2 captures it, call 3 replays it ------------ */

#define JIT_CALLS 3

static tg_status jit_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  mlp *m = ctx;
  tg_scope_begin();
  tg_tensor *h = tg_relu(tg_add(tg_matmul(in[0], m->p[0]), m->p[1]));
  tg_tensor *d = tg_sub(tg_matmul(h, m->p[2]), in[1]);
  tg_tensor *l = tg_mean(tg_mul(d, d), 0, NULL, false);
  tg_status st = l ? tg_backward(l) : tg_error_status();
  for (int i = 0; i < 3 && st == TG_OK; i++)
    st = tg_assign(m->p[i], tg_sub(m->p[i], tg_mul_scalar(tg_grad(m->p[i]), LR)));
  if (st == TG_OK) st = tg_realize_many(4, (tg_tensor *[]){m->p[0], m->p[1], m->p[2], l});
  for (int i = 0; i < 3; i++) tg_zero_grad(m->p[i]);
  out[0] = st == TG_OK ? tg_keep(l) : NULL;
  tg_scope_end();
  return st;
}

/* JIT_CALLS steps through a new tg_jit on fresh parameters; losses[i] of each; the first failing status */
static tg_status jit_steps(mlp *m, float *losses) {
  tg_jit *j = tg_jit_new(jit_step, m, 2, 1);
  tg_status st = j ? TG_OK : tg_error_status();
  for (int c = 0; c < JIT_CALLS && st == TG_OK; c++) {
    tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, I}, X, sizeof X);
    tg_tensor *y = tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, O}, Y, sizeof Y), *l = NULL;
    st = x && y ? tg_jit_call(j, (tg_tensor *[]){x, y}, &l) : tg_error_status();
    if (st == TG_OK) st = tg_to_host(l, &losses[c], sizeof losses[c]);
    tg_free(l);
    tg_free(x);
    tg_free(y);
  }
  tg_jit_free(j);
  return st;
}

/* the reference's losses of JIT_CALLS steps and the parameters after them */
static void ref_steps(float *losses, float *w1, float *b1, float *w2) {
  float s1[I * H], s2[H], s3[H * O];
  memcpy(s1, W1, sizeof s1), memcpy(s2, B1, sizeof s2), memcpy(s3, W2, sizeof s3);
  for (int c = 0; c < JIT_CALLS; c++) {
    losses[c] = ref_step(w1, b1, w2);
    memcpy(W1, w1, sizeof W1), memcpy(B1, b1, sizeof B1), memcpy(W2, w2, sizeof W2);
  }
  memcpy(W1, s1, sizeof s1), memcpy(B1, s2, sizeof s2), memcpy(W2, s3, sizeof s3);
}

static bool jit_right(mlp *m, const float *losses, const char *when) {
  float want[JIT_CALLS], w1[I * H], b1[H], w2[H * O], got[I * H];
  ref_steps(want, w1, b1, w2);
  if (!check_close_f32(when, losses, want, JIT_CALLS, 1e-5, 1e-4, __FILE__, __LINE__)) return false;
  const float *refs[3] = {w1, b1, w2};
  const size_t sizes[3] = {sizeof w1, sizeof b1, sizeof w2};
  for (int i = 0; i < 3; i++)
    if (tg_to_host(m->p[i], got, sizes[i]) != TG_OK ||
        !check_close_f32(when, got, refs[i], (int64_t)(sizes[i] / sizeof(float)), 1e-5, 1e-4, __FILE__, __LINE__))
      return false;
  return true;
}

/* about 2000 allocations, every one of them (every 3rd with TG_TEST_QUICK, as under the sanitizers) */
TEST(test_fault_every_allocation_of_jit_captured_steps) {
  init_values();
  trace_on();
  int64_t base = live_tensors(), base_buffers = live_buffers(), sites = 0, errors = 0, absorbed = 0;
  int64_t stride = getenv("TG_TEST_QUICK") && !getenv("TG_FAULT_FULL") ? 3 : 1;
  for (int64_t k = 1;; k += stride) {
    mlp m;
    float losses[JIT_CALLS] = {0};
    if (!mlp_new(&m)) { CHECK(false, "%s", tg_error()); break; }
    tg_error_clear();
    sched_cache_clear();  /* each round schedules anew: the scheduler's allocations are swept too */
    mem_fail_at(k);
    tg_status st = jit_steps(&m, losses);
    bool fired = mem_failed();
    mem_fail_at(0);
    char when[64];
    snprintf(when, sizeof when, "jit, allocation %lld failed", (long long)k);
    if (!fired) {
      CHECK(st == TG_OK && jit_right(&m, losses, "jit steps without a failure"), "%s", tg_error());
      mlp_free(&m);
      break;
    }
    sites++;
    if (st != TG_OK) {
      errors++;
      CHECK(st == TG_ERR_NOMEM && tg_error_status() == TG_ERR_NOMEM && tg_error()[0], "%s: status %d, error status "
            "%d, message \"%s\"", when, (int)st, (int)tg_error_status(), tg_error());
    } else if (jit_right(&m, losses, when)) {
      absorbed++;
      if (getenv("TG_FAULT_TRACE")) fprintf(stderr, "  %s: absorbed\n", when);
    } else {
      CHECK(false, "%s: TG_OK with wrong numbers", when);
    }
    mlp_free(&m);
    CHECK(!leaked_now(), "%s: memory leaked (LeakSanitizer's report above)", when);
    CHECK(live_tensors() == base && live_buffers() == base_buffers, "%s: %lld tensors and %lld buffers leaked", when,
          (long long)(live_tensors() - base), (long long)(live_buffers() - base_buffers));
    base = live_tensors();
    base_buffers = live_buffers();
    if (!mlp_new(&m)) { CHECK(false, "%s", tg_error()); break; }
    st = jit_steps(&m, losses);
    CHECK(st == TG_OK && jit_right(&m, losses, "the steps after"), "%s: the steps after it: %s", when, tg_error());
    mlp_free(&m);
    if (test_failures_in_current() > 5) break;
  }
  mem_on_fail(NULL);
  fprintf(stderr, "  jit (run, capture, replay): %lld allocations (one in %lld) failed one at a time: %lld errors "
          "(TG_ERR_NOMEM), %lld absorbed with the right result\n", (long long)sites, (long long)stride,
          (long long)errors, (long long)absorbed);
  CHECK(sites > 1000 / stride, "only %lld allocations", (long long)sites);
}

/* ---- the file readers: each allocation of a load fails in turn ------------------------------------------ */

/* a reader's load: run does it (its allocations are the ones that fail) and returns its status; check, with
 * nothing failing, verifies the result (or, after a failure, that nothing was half made) and frees all */
typedef struct reader {
  const char *what;
  tg_status (*run)(void *ctx);
  void (*check)(void *ctx, tg_status st);
  bool long_run;  /* thousands of allocations: every 5th is tried (13th quick, all with TG_FAULT_FULL=1) */
} reader;

/* fails allocation k = 1, 2, ... of the load until one runs without reaching k; checks each failure's status
 * and message, that nothing is left behind, and that the next load works. The count of allocations tried */
static int64_t load_sweep(const reader *r, void *ctx, int64_t stride) {
  trace_on();
  int64_t base = live_tensors(), base_buffers = live_buffers(), k = 1, tried = 0;
  int fails0 = test_failures_in_current();
  for (;; k += stride) {
    tg_error_clear();
    mem_fail_at(k);
    tg_status st = r->run(ctx);
    bool fired = mem_failed();
    mem_fail_at(0);
    if (st != TG_OK)
      CHECK(st == TG_ERR_NOMEM && tg_error_status() == TG_ERR_NOMEM && tg_error()[0], "%s, allocation %lld failed: "
            "status %d, error status %d, message \"%s\"", r->what, (long long)k, (int)st, (int)tg_error_status(),
            tg_error());
    r->check(ctx, st);
    if (!fired) break;
    tried++;
    CHECK(!leaked_now(), "%s, allocation %lld failed: memory leaked (LeakSanitizer's report above)", r->what,
          (long long)k);
    CHECK(live_tensors() == base && live_buffers() == base_buffers, "%s, allocation %lld failed: %lld tensors and "
          "%lld buffers leaked", r->what, (long long)k, (long long)(live_tensors() - base),
          (long long)(live_buffers() - base_buffers));
    base = live_tensors();
    base_buffers = live_buffers();
    st = r->run(ctx);
    CHECK(st == TG_OK, "%s after allocation %lld failed: %s", r->what, (long long)k, tg_error());
    r->check(ctx, st);
    if (test_failures_in_current() > fails0 + 5) break;
  }
  mem_on_fail(NULL);
  return tried;
}

typedef struct files { char dir[PATH_MAX], st[PATH_MAX + 32], csv[PATH_MAX + 32], model[PATH_MAX + 32], tok[PATH_MAX + 32]; } files;

/* what the loads made, checked and freed by the check functions */
typedef struct loaded {
  files *f;
  tg_params *rp, *p;  /* read; the parameters loaded into */
  tg_tensor *w, *b;
  tg_dataset train, test;
  tg_llama *m;
  float logits[10];
  tg_tokenizer *t;
  int64_t ntok;
  int32_t ids[16];
  const char *dec;
} loaded;

static const float ST_W[6] = {1, -2, 3.5f, 4, 0.25f, -6};
static const int64_t ST_B[3] = {7, -8, 1LL << 40};

static tg_status read_safetensors(void *ctx) {
  loaded *l = ctx;
  l->rp = tg_safetensors_read(l->f->st);
  return l->rp ? TG_OK : tg_error_status();
}

static void check_read_safetensors(void *ctx, tg_status st) {
  loaded *l = ctx;
  float w[6];
  int64_t b[3];
  if (st == TG_OK)
    CHECK(tg_to_host(tg_params_find(l->rp, "w"), w, sizeof w) == TG_OK && !memcmp(w, ST_W, sizeof w) &&
          tg_to_host(tg_params_find(l->rp, "b"), b, sizeof b) == TG_OK && !memcmp(b, ST_B, sizeof b),
          "tg_safetensors_read: wrong values");
  tg_params_free(l->rp);
  l->rp = NULL;
}

static tg_status load_safetensors(void *ctx) {
  loaded *l = ctx;
  return tg_safetensors_load(l->f->st, l->p, false);
}

/* all or nothing: a load that fails leaves both parameters as they were; fresh parameters for the next */
static void check_load_safetensors(void *ctx, tg_status st) {
  loaded *l = ctx;
  float w[6], w0[6] = {0};
  int64_t b[3], b0[3] = {0};
  if (l->p) {
    CHECK(tg_to_host(l->w, w, sizeof w) == TG_OK && tg_to_host(l->b, b, sizeof b) == TG_OK, "%s", tg_error());
    bool took = !memcmp(w, ST_W, sizeof w) && !memcmp(b, ST_B, sizeof b);
    bool kept = !memcmp(w, w0, sizeof w) && !memcmp(b, b0, sizeof b);
    CHECK(st == TG_OK ? took : kept, "tg_safetensors_load (status %d): the parameters are %s", (int)st,
          st == TG_OK ? "not the file's" : "changed although the load failed");
  }
  tg_params_free(l->p);
  tg_free(l->w);
  tg_free(l->b);
  l->w = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, w0, sizeof w0);
  l->b = tg_from_data(TG_INT64, 1, (int64_t[]){3}, b0, sizeof b0);
  l->p = tg_params_new();
  CHECK(tg_params_add(l->p, "w", l->w) == TG_OK && tg_params_add(l->p, "b", l->b) == TG_OK, "%s", tg_error());
}

static tg_status load_mnist(void *ctx) {
  loaded *l = ctx;
  return tg_mnist_load(l->f->dir, false, &l->train, &l->test);
}

static void check_mnist(void *ctx, tg_status st) {
  loaded *l = ctx;
  uint8_t px[2 * 6];
  int32_t lb[2];
  if (st == TG_OK)
    CHECK(l->train.n == 3 && tg_to_host(l->test.x, px, sizeof px) == TG_OK && px[7] == 7 &&
          tg_to_host(l->test.y, lb, sizeof lb) == TG_OK && lb[1] == 1, "tg_mnist_load: wrong values");
  else
    CHECK(!l->train.x && !l->test.x, "tg_mnist_load failed and left a dataset behind");
  tg_dataset_free(&l->train);
  tg_dataset_free(&l->test);
}

static tg_status load_digits(void *ctx) {
  loaded *l = ctx;
  return tg_digits_load(l->f->csv, &l->train);
}

static void check_digits(void *ctx, tg_status st) {
  loaded *l = ctx;
  int32_t y[2];
  if (st == TG_OK)
    CHECK(l->train.n == 2 && tg_to_host(l->train.y, y, sizeof y) == TG_OK && y[0] == 3 && y[1] == 9,
          "tg_digits_load: wrong values");
  else
    CHECK(!l->train.x, "tg_digits_load failed and left a dataset behind");
  tg_dataset_free(&l->train);
}

/* the load and one decode step (the JIT's first call: it runs the step eagerly) */
static tg_status load_llama(void *ctx) {
  loaded *l = ctx;
  l->m = tg_llama_load(l->f->model, 0);
  return l->m ? tg_llama_step(l->m, 3, 0, l->logits) : tg_error_status();
}

static void check_llama(void *ctx, tg_status st) {
  loaded *l = ctx;
  static float want[10];
  static bool have;
  if (st == TG_OK && !have) memcpy(want, l->logits, sizeof want), have = true;
  if (st == TG_OK) CHECK_CLOSE("tg_llama_step's logits against the first load's", l->logits, want, 10);
  tg_llama_free(l->m);
  l->m = NULL;
}

static tg_status load_tokenizer(void *ctx) {
  loaded *l = ctx;
  l->t = tg_tokenizer_load(l->f->tok, 9);
  if (!l->t) return tg_error_status();
  l->ntok = tg_tokenizer_encode(l->t, "abc", true, true, l->ids, 16);
  if (l->ntok < 0) return (tg_status)l->ntok;
  l->dec = tg_tokenizer_decode(l->t, 1, l->ids[1]);
  return l->dec ? TG_OK : tg_error_status();
}

static void check_tokenizer(void *ctx, tg_status st) {
  loaded *l = ctx;
  if (st == TG_OK)
    CHECK(l->ntok == 4 && l->ids[1] == 7 && !strcmp(l->dec, "ab"), "tokenizer: %lld tokens", (long long)l->ntok);
  tg_tokenizer_free(l->t);
  l->t = NULL;
}

static bool put_file(const char *path, const void *data, size_t n, bool gz) {
  if (gz) {
    gzFile g = gzopen(path, "wb");
    bool ok = g && gzwrite(g, data, (unsigned)n) == (int)n;
    return g && gzclose(g) == Z_OK && ok;
  }
  FILE *fp = fopen(path, "wb");
  bool ok = fp && fwrite(data, 1, n, fp) == n;
  return fp && fclose(fp) == 0 && ok;
}

static bool make_files(files *f) {
  if (!test_temp_dir(f->dir, sizeof f->dir)) return false;
  char p[PATH_MAX + 64];
  /* safetensors: w F32 (2, 3), b I64 (3,) */
  snprintf(f->st, sizeof f->st, "%s/m.safetensors", f->dir);
  tg_tensor *w = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, ST_W, sizeof ST_W);
  tg_tensor *b = tg_from_data(TG_INT64, 1, (int64_t[]){3}, ST_B, sizeof ST_B);
  tg_params *ps = tg_params_new();
  bool ok = tg_params_add(ps, "w", w) == TG_OK && tg_params_add(ps, "b", b) == TG_OK &&
            tg_safetensors_save(f->st, ps) == TG_OK;
  tg_params_free(ps);
  tg_free(w);
  tg_free(b);
  /* MNIST, gzipped: 3 train and 2 test images 2x3 (pixel i = i), labels 0, 1, 2 */
  uint8_t img[16 + 18] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3}, lab[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 0, 1, 2};
  for (int i = 0; i < 18; i++) img[16 + i] = (uint8_t)i;
  const char *names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                          "t10k-labels-idx1-ubyte"};
  for (int i = 0; i < 4 && ok; i++) {
    snprintf(p, sizeof p, "%s/%s.gz", f->dir, names[i]);
    if (i >= 2) img[7] = lab[7] = 2;  /* the test files: 2 of each */
    ok = i % 2 ? put_file(p, lab, 8 + (size_t)lab[7], true) : put_file(p, img, 16 + 6 * (size_t)img[7], true);
  }
  /* digits: two rows, gzipped */
  char csv[512];
  size_t k = 0;
  for (int r = 0; r < 2; r++) {
    for (int c = 0; c < 64; c++) k += (size_t)snprintf(csv + k, sizeof csv - k, "%d,", (r + c) % 17);
    k += (size_t)snprintf(csv + k, sizeof csv - k, "%d\n", r ? 9 : 3);
  }
  snprintf(f->csv, sizeof f->csv, "%s/d.csv.gz", f->dir);
  ok = ok && put_file(f->csv, csv, k, true);
  /* a llama2.c checkpoint: dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 10, seq 4 */
  int32_t h[7] = {8, 16, 1, 2, 1, 10, 4};
  size_t nf = 10 * 8 + (2 * 8 + 2 * 64 + 2 * 8 * 4 + 3 * 8 * 16) + 8 + 4 * 4;
  float *wts = malloc(sizeof h + nf * sizeof(float));
  ok = ok && wts;
  if (wts) {
    memcpy(wts, h, sizeof h);
    for (size_t i = 0; i < nf; i++) wts[7 + i] = (float)((i * 37) % 19) / 40 - 0.2f;
    snprintf(f->model, sizeof f->model, "%s/m.bin", f->dir);
    ok = ok && put_file(f->model, wts, sizeof h + nf * sizeof(float), false);
    free(wts);
  }
  /* the tokenizer of test_llama.c: " " "a" "b" merge into "ab", then " ab" */
  const char *pieces[] = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", "ab", " ab", "<0x41>"};
  float scores[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f, 0};
  uint8_t tok[256];
  size_t tn = 0;
  int32_t maxlen = 6;
  memcpy(tok, &maxlen, 4), tn = 4;
  for (int i = 0; i < 9; i++) {
    int32_t len = (int32_t)strlen(pieces[i]);
    memcpy(tok + tn, &scores[i], 4), memcpy(tok + tn + 4, &len, 4), memcpy(tok + tn + 8, pieces[i], (size_t)len);
    tn += 8 + (size_t)len;
  }
  snprintf(f->tok, sizeof f->tok, "%s/t.bin", f->dir);
  return ok && put_file(f->tok, tok, tn, false);
}

TEST(test_fault_every_allocation_of_each_file_reader) {
  files f;
  if (!make_files(&f)) { CHECK(false, "cannot write the files: %s", tg_error()); return; }
  loaded l = {.f = &f};
  check_load_safetensors(&l, TG_ERR_ARG);  /* makes the parameters to load into */
  const reader readers[] = {
      {"tg_safetensors_read", read_safetensors, check_read_safetensors, false},
      {"tg_safetensors_load", load_safetensors, check_load_safetensors, false},
      {"tg_mnist_load (gzip)", load_mnist, check_mnist, false},
      {"tg_digits_load (gzip)", load_digits, check_digits, false},
      {"tg_llama_load and a step", load_llama, check_llama, true},
      {"tg_tokenizer_load, encode, decode", load_tokenizer, check_tokenizer, false},
  };
  for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
    const reader *r = &readers[i];
    tg_status st = r->run(&l);  /* once without failures: kernels compiled, the reference logits kept */
    CHECK(st == TG_OK, "%s: %s", r->what, tg_error());
    r->check(&l, st);
    int64_t stride = !r->long_run || getenv("TG_FAULT_FULL") ? 1 : getenv("TG_TEST_QUICK") ? 13 : 5;
    int64_t n = load_sweep(r, &l, stride);
    char every[32] = "";
    if (stride > 1) snprintf(every, sizeof every, " (one in %lld)", (long long)stride);
    fprintf(stderr, "  %s: %lld allocations failed one at a time%s\n", r->what, (long long)n, every);
    CHECK(n >= 3, "%s: only %lld allocations", r->what, (long long)n);
  }
  tg_params_free(l.p);
  tg_free(l.w);
  tg_free(l.b);
  test_remove_dir(f.dir);
}

/* A collection whose mark stack cannot grow (1500 live tensors, each its own node, are pushed before any is
 * drained: the stack passes its first 1024 slots) frees nothing at all, not even garbage: a node marked without
 * its sources being visited may root anything. Then the live tensors' values are intact, and a collection with
 * memory frees the garbage. */
TEST(test_fault_collection_that_cannot_mark_frees_nothing) {
  enum { N = 1500 };
  tg_collect();
  tg_scope_begin();
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){1}, (float[]){0.5f}, 4), *ts[N];
  for (int i = 0; i < N; i++) ts[i] = tg_add_scalar(x, i);
  CHECK_T(ts[N - 1]);
  int lost = 0;
  for (int64_t k = 1; k <= 8; k++) {
    tg_scope_begin();  /* garbage for the collector: 200 nodes nothing roots once the scope ends */
    for (int i = 0; i < 200; i++) tg_mul_scalar(x, 1000 + i + 200 * (double)k);
    tg_scope_end();
    size_t before = uop_live_count();
    mem_fail_at(k);
    tg_collect();
    mem_fail_at(0);
    if (uop_live_count() == before) lost++;
  }
  CHECK(lost > 0, "no collection ran out of memory while marking: the test tests nothing");
  float v[3];
  tg_tensor *some[3] = {ts[0], ts[N / 2], ts[N - 1]};
  CHECK(tg_realize_many(3, some) == TG_OK, "%s", tg_error());
  for (int j = 0; j < 3; j++) CHECK(tg_to_host(some[j], &v[j], 4) == TG_OK, "%s", tg_error());
  CHECK(v[0] == 0.5f && v[1] == 0.5f + N / 2 && v[2] == 0.5f + N - 1, "values %g %g %g", v[0], v[1], v[2]);
  size_t before = uop_live_count();
  tg_collect();
  CHECK(uop_live_count() < before, "a collection with memory freed nothing (%zu nodes)", before);
  tg_scope_end();
}
