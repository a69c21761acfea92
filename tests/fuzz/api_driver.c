/* api_driver.c — a random-API driver: long seeded sequences of valid and invalid tg_ calls.
 *
 *   build/fuzz/api_driver SEED CALLS [-v]
 *
 * Each call draws an op and its arguments at random: creation (random shapes, 0-d, empty, negative and huge
 * sizes, bad dtypes), movement ops with random axes and bounds, elementwise and scalar ops with broadcasting,
 * reductions, matmul, cat/stack/split, slicing, index_select and one_hot, casts, realize and to_host. The
 * driver decides on its own whether the call is valid (a small model of the rules written here, not taken from
 * the library) and checks:
 *   - an invalid call returns NULL (or a negative status) with a non-empty tg_error() and a negative
 *     tg_error_status(), and an op given that NULL returns NULL keeping the message;
 *   - a valid call succeeds with the expected shape, and where the inputs' values are known (small tensors
 *     built from known values) its value, read back at random later, equals the plain C reference of
 *     tests/ref.c (atol 1e-5 / rtol 1e-3 for floats, exact otherwise).
 * Tensors live in a pool of slots; every EPISODE calls the pool is emptied in one tg_scope_end. Ops the lead is
 * redesigning (conv, pool, pad, randint, layernorm, optimizers, layers, losses) are left out. Built with
 * -fsanitize=address,undefined by scripts/fuzz_api.sh. Prints "N passed, N failed" (calls) and exits 1 on any
 * failure. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"
#include "test.h"

#define NSLOT 12
#define EPISODE 150
#define SMALL 2048            /* values are tracked (and may be read back) up to this many elements */
#define LIMIT ((int64_t)1 << 60)  /* tg.h: no tensor has more than 2^60 elements (zeros left out) */

typedef struct slot {
  tg_tensor *t;
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  tg_dtype dt;
  ref_arr *r;  /* its value when known and small, else NULL */
  int64_t work;  /* the most elements any node of its graph has: only cheap graphs are realized */
  bool half;     /* float16/bfloat16 somewhere in its graph: compared with half-precision tolerances */
  bool inexact;  /* its graph rounds (exp, div, mean, ...): the library and the reference may differ in the last
                  * bits, so ops that jump at a boundary (floor, comparisons, casts to integers) are not compared */
  char hist[700];  /* the calls that made it (its first input's, then its own), for failure messages */
} slot;

static slot pool[NSLOT];
static uint64_t seed;
static long call_no, passed, failed, nvalid, ninvalid, nchecked;
static bool verbose;
static char desc[4096];  /* the current call, for messages */
static int64_t cur_work;  /* the work of the current call's inputs */
static char cur_hist[700];  /* the history of the current call's first input */
#define MAX_WORK ((int64_t)1 << 16)

static bool cur_half, cur_inexact;  /* of the current call's inputs (and, once set by the op, its rounding) */

static void uses(const slot *s) {
  if (!s) return;
  if (s->work > cur_work) cur_work = s->work;
  cur_half |= s->half;
  cur_inexact |= s->inexact;
}

static void describe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void describe(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(desc, sizeof desc, fmt, ap);
  va_end(ap);
}

static bool call_failed;

/* ref.c reports through this (as the test runner's) */
void test_fail(const char *file, int line, const char *fmt, ...) {
  call_failed = true;
  if (failed > 40) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL seed %llu call %ld (%s%s%s): ", (unsigned long long)seed, call_no, desc,
          cur_hist[0] ? " on " : "", cur_hist);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " [%s:%d]\n", file, line);
  va_end(ap);
}

#define FAIL(...) test_fail(__FILE__, __LINE__, __VA_ARGS__)

static int64_t rnd(int64_t lo, int64_t hi) { return ref_randint(lo, hi); }
static bool chance(int pct) { return rnd(0, 99) < pct; }

/* ---- the model of the rules ------------------------------------------------------------------------- */

/* numel with the library's bound; -1 if the shape is not allowed */
static int64_t model_numel(int ndim, const int64_t *s) {
  if (ndim < 0 || ndim > TG_MAX_DIMS) return -1;
  int64_t nz = 1;
  bool zero = false;
  for (int i = 0; i < ndim; i++) {
    if (s[i] < 0) return -1;
    if (s[i] == 0) { zero = true; continue; }
    if (s[i] > LIMIT / nz) return -1;
    nz *= s[i];
  }
  return zero ? 0 : nz;
}

/* axis against ndim; -1 if out of range (scalar_ok: a 0-d tensor takes 0 and -1, as tinygrad's reductions) */
static int model_axis(int axis, int ndim, bool scalar_ok) {
  if (ndim == 0) return scalar_ok && (axis == 0 || axis == -1) ? 0 : -1;
  int a = axis < 0 ? axis + ndim : axis;
  return a >= 0 && a < ndim ? a : -1;
}

/* an axis argument: mostly in range, sometimes just outside, sometimes far */
static int draw_axis(int ndim) {
  int k = (int)rnd(0, 19);
  if (k < 15) return (int)rnd(-ndim - 1, ndim);
  if (k < 18) return (int)rnd(-ndim - 3, ndim + 2);
  return k == 18 ? TG_ALL : -TG_ALL;
}

/* ---- checking a call ------------------------------------------------------------------------------- */

static void begin_call(void) {
  call_no++;
  call_failed = false;
  tg_error_clear();
}

static void end_call(void) {
  if (call_failed) failed++;
  else passed++;
  if (verbose) fprintf(stderr, "%6ld %s %s\n", call_no, call_failed ? "FAIL" : "ok  ", desc);
}

/* an invalid call: the result must be NULL with a message; an op on that NULL stays NULL with it */
static void expect_error(bool failed_call) {
  ninvalid++;
  const char *msg = tg_error();
  if (!failed_call) {
    FAIL("an invalid call succeeded");
    return;
  }
  if (!msg[0]) FAIL("an invalid call failed with an empty tg_error()");
  else if (tg_error_status() >= 0) FAIL("an invalid call failed with status %d: %s", tg_error_status(), msg);
  else if (chance(20)) {
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", msg);
    tg_tensor *chained = tg_relu(tg_add_scalar(NULL, 1));
    if (chained || strcmp(copy, tg_error()) != 0) FAIL("an op on the NULL result changed the message to \"%s\"", tg_error());
  }
}

static void slot_clear(slot *s) {
  tg_free(s->t);
  memset(s, 0, sizeof *s);
}

/* a valid call returned t: check its shape against the model's, then keep it in a random slot */
static void expect_tensor(tg_tensor *t, int ndim, const int64_t *shape_in, tg_dtype dt, bool check_dt, ref_arr *r) {
  nvalid++;
  int64_t shape[TG_MAX_DIMS + 2] = {0};  /* shape_in may be the slot this result replaces */
  if (ndim > 0) memcpy(shape, shape_in, (size_t)(ndim < TG_MAX_DIMS ? ndim : TG_MAX_DIMS) * sizeof *shape);
  char a[400], b[400];
  if (!t) {
    FAIL("a valid call failed: %s", tg_error());
    return;
  }
  bool ok = tg_ndim(t) == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = tg_shape_ptr(t)[i] == shape[i];
  if (!ok) {
    FAIL("shape %s, want %s", ref_shape_str(a, sizeof a, tg_ndim(t), tg_shape_ptr(t)), ref_shape_str(b, sizeof b, ndim, shape));
    tg_free(t);
    return;
  }
  if (check_dt && tg_dtype_of(t) != dt) FAIL("dtype %s, want %s", tg_dtype_name(tg_dtype_of(t)), tg_dtype_name(dt));
  if (r && (r->ndim != ndim || memcmp(r->shape, shape, (size_t)ndim * sizeof *shape) != 0)) {
    FAIL("the reference has shape %s, the model %s", ref_shape_str(a, sizeof a, r->ndim, r->shape),
         ref_shape_str(b, sizeof b, ndim, shape));
    r = NULL;
  }
  if (model_numel(ndim, shape) > SMALL) r = NULL;
  slot *s = &pool[rnd(0, NSLOT - 1)];
  slot_clear(s);
  s->t = t;
  s->ndim = ndim;
  memcpy(s->shape, shape, (size_t)ndim * sizeof *shape);
  s->dt = tg_dtype_of(t);
  s->r = r;
  int64_t n = model_numel(ndim, shape);
  s->work = n > cur_work ? n : cur_work;
  s->half = cur_half || s->dt == TG_FLOAT16 || s->dt == TG_BFLOAT16;
  s->inexact = cur_inexact;
  char h[sizeof cur_hist + sizeof desc + 8];
  snprintf(h, sizeof h, "%s%s%s", cur_hist, cur_hist[0] ? " -> " : "", desc);
  size_t len = strlen(h), keep = len < sizeof s->hist ? len : sizeof s->hist - 1;
  memcpy(s->hist, h + len - keep, keep);  /* the most recent calls */
  s->hist[keep] = 0;
}

static slot *pick(void) {
  int start = (int)rnd(0, NSLOT - 1);
  for (int i = 0; i < NSLOT; i++)
    if (pool[(start + i) % NSLOT].t) return &pool[(start + i) % NSLOT];
  return NULL;
}

static bool no_nan(const ref_arr *r) {
  for (int64_t i = 0; r && i < r->numel; i++)
    if (isnan(r->data[i])) return false;
  return r != NULL;
}

static bool small_float_values(const ref_arr *r, double bound) {
  if (!r) return false;
  for (int64_t i = 0; i < r->numel; i++)
    if (!(fabs(r->data[i]) <= bound)) return false;
  return true;
}

/* ---- creation ----------------------------------------------------------------------------------------- */

static const tg_dtype value_dtypes[] = {TG_FLOAT32, TG_FLOAT32, TG_INT32, TG_BOOL, TG_FLOAT16, TG_INT8, TG_UINT8};
static tg_dtype draw_dtype(void) { return value_dtypes[rnd(0, (int)(sizeof value_dtypes / sizeof *value_dtypes) - 1)]; }

/* a shape: mostly small, sometimes 0-d, empty, negative, huge or too many dims */
static int draw_shape(int64_t *s) {
  int k = (int)rnd(0, 99);
  int nd = k < 10 ? 0 : k < 97 ? (int)rnd(1, 4) : (int)rnd(5, TG_MAX_DIMS + 1);
  for (int i = 0; i < nd && i < TG_MAX_DIMS + 1; i++) {
    int w = (int)rnd(0, 99);
    s[i] = w < 80 ? rnd(1, 4) : w < 88 ? 0 : w < 92 ? rnd(5, 9) : w < 95 ? -rnd(1, 3)
         : w < 97 ? ((int64_t)1 << rnd(20, 40)) : w < 99 ? INT64_MAX : INT64_MIN;
  }
  return nd;
}

static void op_create(void) {
  cur_work = 0;
  cur_half = cur_inexact = false;
  cur_hist[0] = 0;
  int64_t s[TG_MAX_DIMS + 1];
  int nd = draw_shape(s);
  tg_dtype dt = chance(3) ? (tg_dtype)rnd(TG_DTYPE_COUNT, 40) : draw_dtype();
  bool dt_ok = (unsigned)dt < TG_DTYPE_COUNT;
  int64_t n = model_numel(nd, s);
  bool ok = dt_ok && n >= 0;
  char sh[400];
  ref_shape_str(sh, sizeof sh, nd > TG_MAX_DIMS ? TG_MAX_DIMS : nd, s);
  int kind = (int)rnd(0, 5);
  if (kind == 0) {  /* full */
    double v = (double)rnd(-5, 5) / (chance(50) ? 1 : 4);
    describe("tg_full(%s, %s, %g)", tg_dtype_name(dt), sh, v);
    begin_call();
    tg_tensor *t = tg_full(dt, nd, s, v);
    if (!ok) expect_error(!t);
    else expect_tensor(t, nd, s, dt, true, n <= SMALL ? ref_full(dt, nd, s, v) : NULL);
  } else if (kind == 1) {  /* from_data, sometimes with the wrong byte count */
    if (!ok || n > SMALL) { ok = false; n = 0; }
    ref_arr *r = ok ? ref_rand(dt, nd, s, -4, 4) : NULL;
    size_t nb = ok ? (size_t)n * tg_dtype_size(dt) : 8;
    bool wrong = chance(10) && ok;
    void *data = calloc(nb + 8, 1);
    for (int64_t i = 0; r && i < n; i++) {
      double v = r->data[i];
      switch (dt) {
        case TG_FLOAT32: ((float *)data)[i] = (float)v; break;
        case TG_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
        case TG_BOOL: ((uint8_t *)data)[i] = v != 0; break;
        case TG_FLOAT16: ((uint16_t *)data)[i] = ref_f32_to_f16((float)v); break;
        case TG_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
        case TG_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
        default: break;
      }
    }
    describe("tg_from_data(%s, %s, %zu bytes)", tg_dtype_name(dt), sh, wrong ? nb + 1 : nb);
    begin_call();
    tg_tensor *t = data ? tg_from_data(dt, nd, s, data, wrong ? nb + 1 : nb) : NULL;
    if (!ok || wrong) expect_error(!t);
    else expect_tensor(t, nd, s, dt, true, r);
    free(data);
  } else if (kind == 2) {  /* empty or rand: values unknown */
    bool rand_ = chance(50);
    if (rand_ && dt_ok && !ref_is_float(dt)) dt = TG_FLOAT32;
    describe("%s(%s, %s)", rand_ ? "tg_rand" : "tg_empty", tg_dtype_name(dt), sh);
    begin_call();
    tg_tensor *t = rand_ ? tg_rand(dt, nd, s) : tg_empty(dt, nd, s);
    if (!ok) expect_error(!t);
    else expect_tensor(t, nd, s, dt, true, NULL);
  } else if (kind == 3) {  /* arange */
    double start = (double)rnd(-6, 6), stop = (double)rnd(-6, 12), step = (double)rnd(-3, 3);
    if (chance(20)) step /= 2;
    if (chance(3)) stop = 1e18;
    tg_dtype adt = chance(50) ? TG_FLOAT32 : TG_INT32;
    describe("tg_arange(%s, %g, %g, %g)", tg_dtype_name(adt), start, stop, step);
    double cnt = step != 0 ? ceil((stop - start) / step) : -1;
    bool aok = step != 0 && cnt <= 1e15;
    begin_call();
    tg_tensor *t = tg_arange(adt, start, stop, step);
    int64_t len = cnt > 0 ? (int64_t)cnt : 0;
    bool exact = adt == TG_FLOAT32 || step == floor(step);
    if (!aok) expect_error(!t);
    else expect_tensor(t, 1, &len, adt, true, len <= SMALL && exact ? ref_arange(adt, start, stop, step) : NULL);
  } else if (kind == 4) {  /* eye */
    int64_t a = chance(90) ? rnd(0, 5) : chance(50) ? -1 : (int64_t)1 << 40, b = chance(90) ? rnd(0, 5) : -2;
    describe("tg_eye(float32, %lld, %lld)", (long long)a, (long long)b);
    begin_call();
    tg_tensor *t = tg_eye(TG_FLOAT32, a, b);
    int64_t k = a > b ? a : b;
    bool eok = a >= 0 && b >= 0 && (a == 0 || b == 0 || (k + 1 <= LIMIT / k));
    if (!eok) expect_error(!t);
    else expect_tensor(t, 2, (int64_t[]){a, b}, TG_FLOAT32, true, a * b <= SMALL ? ref_eye(TG_FLOAT32, a, b) : NULL);
  } else {  /* scalar */
    double v = (double)rnd(-9, 9) / 2;
    describe("tg_scalar(%s, %g)", tg_dtype_name(dt), v);
    begin_call();
    tg_tensor *t = tg_scalar(dt, v);
    if (!dt_ok) expect_error(!t);
    else expect_tensor(t, 0, NULL, dt, true, ref_scalar(dt, v));
  }
  end_call();
}

/* ---- movement ----------------------------------------------------------------------------------------- */

static void op_reshape(slot *x) {
  int64_t n = model_numel(x->ndim, x->shape), s[TG_MAX_DIMS + 1];
  int nd;
  if (chance(75)) {  /* a factorization of n, maybe with one -1 */
    nd = (int)rnd(0, 4);
    if (n != 1 && nd == 0) nd = 1;
    int64_t rest = n;
    for (int i = 0; i < nd; i++) s[i] = 1;
    if (n == 0) s[rnd(0, nd - 1)] = 0;
    else
      for (int i = 0; i < nd - 1; i++)
        for (int64_t d = rnd(2, 5); d >= 2; d--)
          if (rest % d == 0 && chance(60)) { s[i] = d; rest /= d; break; }
    if (n != 0 && nd) s[nd - 1] = rest;
    if (nd && n != 0 && chance(30)) s[rnd(0, nd - 1)] = -1;
  } else {
    nd = draw_shape(s);
    if (nd && chance(30)) s[rnd(0, nd - 1)] = -1;
  }
  /* the model: at most one -1, no other negative size, the known sizes within the bound, the count kept */
  bool ok = nd <= TG_MAX_DIMS;
  int infer = -1;
  int64_t known_shape[TG_MAX_DIMS + 1], out[TG_MAX_DIMS + 1];
  for (int i = 0; ok && i < nd; i++) {
    if (s[i] == -1 && infer < 0) infer = i;
    else if (s[i] < 0) ok = false;
    known_shape[i] = s[i] == -1 && infer == i ? 1 : s[i];
  }
  int64_t known = ok ? model_numel(nd, known_shape) : -1;
  ok = ok && known >= 0;
  if (ok) {
    memcpy(out, known_shape, (size_t)nd * sizeof *out);
    if (infer >= 0) {
      out[infer] = known ? n / known : 0;
      ok = out[infer] * known == n;
    } else ok = known == n;
  }
  char a[400];
  describe("tg_reshape(%s, %s)", ref_shape_str(a, sizeof a, x->ndim, x->shape),
           ref_shape_str(a + 200, 200, nd > TG_MAX_DIMS ? TG_MAX_DIMS : nd, s));
  begin_call();
  tg_tensor *t = tg_reshape(x->t, nd, s);
  if (!ok) expect_error(!t);
  else expect_tensor(t, nd, out, x->dt, true, x->r ? ref_reshape(x->r, nd, out) : NULL);
  end_call();
}

static void op_permute(slot *x) {
  int nd = x->ndim, cnt = chance(90) ? nd : (int)rnd(0, nd + 1), order[TG_MAX_DIMS + 2], norm[TG_MAX_DIMS];
  for (int i = 0; i < cnt; i++) order[i] = i;
  for (int i = cnt - 1; i > 0; i--) {
    int j = (int)rnd(0, i), tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
  for (int i = 0; i < cnt; i++) {
    if (chance(20)) order[i] -= nd;
    if (chance(5)) order[i] = draw_axis(nd);
  }
  bool ok = cnt == nd, seen[TG_MAX_DIMS] = {0};
  int64_t out[TG_MAX_DIMS];
  for (int i = 0; ok && i < cnt; i++) {
    int a = model_axis(order[i], nd, false);
    ok = a >= 0 && !seen[a];
    if (ok) { seen[a] = true; norm[i] = a; out[i] = x->shape[a]; }
  }
  describe("tg_permute(ndim %d, %d axes: %d %d ...)", nd, cnt, cnt > 0 ? order[0] : 0, cnt > 1 ? order[1] : 0);
  begin_call();
  tg_tensor *t = tg_permute(x->t, cnt, order);
  if (!ok) expect_error(!t);
  else expect_tensor(t, nd, out, x->dt, true, x->r ? ref_permute(x->r, norm) : NULL);
  end_call();
}

static void op_expand(slot *x) {
  int nd = x->ndim, n2 = chance(90) ? nd + (int)rnd(0, 2) : (int)rnd(0, nd + 1);
  if (n2 > TG_MAX_DIMS + 1) n2 = TG_MAX_DIMS + 1;
  int64_t s[TG_MAX_DIMS + 2], out[TG_MAX_DIMS + 2];
  bool ok = n2 >= nd && n2 <= TG_MAX_DIMS;
  for (int i = 0; i < n2; i++) {
    int j = i - (n2 - nd);
    int64_t have = j >= 0 ? x->shape[j] : 1;
    int k = (int)rnd(0, 9);
    s[i] = k < 3 ? have : k < 5 ? -1 : have == 1 ? (k < 9 ? rnd(0, 4) : (int64_t)1 << 40) : (k < 9 ? have + 1 : -2);
    out[i] = s[i] == -1 ? have : s[i];
    ok = ok && out[i] >= 0 && (out[i] == have || have == 1);
  }
  ok = ok && model_numel(n2, out) >= 0;
  char a[200], b[200];
  describe("tg_expand(%s, %s)", ref_shape_str(a, sizeof a, nd, x->shape), ref_shape_str(b, sizeof b, n2 > TG_MAX_DIMS ? TG_MAX_DIMS : n2, s));
  begin_call();
  tg_tensor *t = tg_expand(x->t, n2, s);
  if (!ok) expect_error(!t);
  else expect_tensor(t, n2, out, x->dt, true, x->r && model_numel(n2, out) <= SMALL ? ref_expand(x->r, n2, s) : NULL);
  end_call();
}

static void op_shrink(slot *x) {
  int nd = x->ndim, cnt = chance(95) ? nd : nd + 1;
  int64_t b[2 * TG_MAX_DIMS + 2], out[TG_MAX_DIMS];
  bool ok = cnt == nd;
  for (int i = 0; i < cnt; i++) {
    int64_t len = i < nd ? x->shape[i] : 1;
    if (chance(92)) {
      b[2 * i] = rnd(0, len);
      b[2 * i + 1] = rnd(b[2 * i], len);
    } else {
      b[2 * i] = rnd(-2, len + 2);
      b[2 * i + 1] = chance(50) ? rnd(-2, len + 2) : INT64_MAX;
    }
    if (i < nd) {
      ok = ok && b[2 * i] >= 0 && b[2 * i] <= b[2 * i + 1] && b[2 * i + 1] <= len;
      out[i] = ok ? b[2 * i + 1] - b[2 * i] : 0;
    }
  }
  char a[200];
  describe("tg_shrink(%s, [%lld, %lld) ...)", ref_shape_str(a, sizeof a, nd, x->shape), cnt ? (long long)b[0] : 0,
           cnt ? (long long)b[1] : 0);
  begin_call();
  tg_tensor *t = tg_shrink(x->t, cnt, b);
  if (!ok) expect_error(!t);
  else expect_tensor(t, nd, out, x->dt, true, x->r ? ref_shrink(x->r, b) : NULL);
  end_call();
}

static void op_flip(slot *x) {
  int nd = x->ndim, na = (int)rnd(0, nd < 3 ? nd + 1 : 3), axes[4], norm[4];
  bool ok = true, seen[TG_MAX_DIMS] = {0};
  for (int i = 0; i < na; i++) {
    axes[i] = draw_axis(nd);
    int a = model_axis(axes[i], nd, false);
    ok = ok && a >= 0 && !seen[a];
    if (a >= 0) { seen[a] = true; norm[i] = a; }
  }
  describe("tg_flip(ndim %d, %d axes: %d ...)", nd, na, na ? axes[0] : 0);
  begin_call();
  tg_tensor *t = tg_flip(x->t, na, axes);
  if (!ok) expect_error(!t);
  else expect_tensor(t, nd, x->shape, x->dt, true, x->r ? ref_flip(x->r, na, norm) : NULL);
  end_call();
}

static void op_transpose(slot *x) {
  int nd = x->ndim, d0 = draw_axis(nd), d1 = draw_axis(nd);
  int a = model_axis(d0, nd, false), b = model_axis(d1, nd, false);
  bool ok = a >= 0 && b >= 0;
  int64_t out[TG_MAX_DIMS];
  memcpy(out, x->shape, sizeof out);
  if (ok) { out[a] = x->shape[b]; out[b] = x->shape[a]; }
  describe("tg_transpose(ndim %d, %d, %d)", nd, d0, d1);
  begin_call();
  tg_tensor *t = tg_transpose(x->t, d0, d1);
  if (!ok) expect_error(!t);
  else expect_tensor(t, nd, out, x->dt, true, x->r ? ref_transpose(x->r, a, b) : NULL);
  end_call();
}

static void op_flatten(slot *x) {
  int nd = x->ndim, s0 = chance(30) ? 0 : draw_axis(nd), s1 = chance(30) ? -1 : draw_axis(nd);
  int a = model_axis(s0, nd, nd == 0), b = model_axis(s1, nd, nd == 0);
  bool ok = a >= 0 && b >= 0 && a <= b;
  int64_t out[TG_MAX_DIMS];
  int n = 0;
  if (ok && nd == 0) out[n++] = 1;
  else if (ok) {
    for (int i = 0; i < a; i++) out[n++] = x->shape[i];
    int64_t m = 1;
    for (int i = a; i <= b; i++) m *= x->shape[i];
    out[n++] = m;
    for (int i = b + 1; i < nd; i++) out[n++] = x->shape[i];
  }
  describe("tg_flatten(ndim %d, %d, %d)", nd, s0, s1);
  begin_call();
  tg_tensor *t = tg_flatten(x->t, s0, s1);
  if (!ok) expect_error(!t);
  else expect_tensor(t, n, out, x->dt, true, x->r ? ref_reshape(x->r, n, out) : NULL);
  end_call();
}

static void op_squeeze(slot *x) {
  int nd = x->ndim, axis = chance(25) ? TG_ALL : draw_axis(nd);
  int a = axis == TG_ALL ? -2 : model_axis(axis, nd, true);
  bool ok = axis == TG_ALL || a >= 0;
  int64_t out[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < nd; i++)
    if (!(x->shape[i] == 1 && (a == -2 || a == i))) out[n++] = x->shape[i];
  describe("tg_squeeze(ndim %d, %d)", nd, axis);
  begin_call();
  tg_tensor *t = tg_squeeze(x->t, axis);
  if (!ok) expect_error(!t);
  else expect_tensor(t, n, out, x->dt, true, x->r ? ref_reshape(x->r, n, out) : NULL);
  end_call();
}

static void op_unsqueeze(slot *x) {
  int nd = x->ndim, axis = draw_axis(nd + 1);
  int a = model_axis(axis, nd + 1, false);
  bool ok = a >= 0 && nd + 1 <= TG_MAX_DIMS;
  int64_t out[TG_MAX_DIMS + 1];
  int n = 0;
  for (int i = 0; i <= nd; i++) {
    if (i == a) out[n++] = 1;
    if (i < nd) out[n++] = x->shape[i];
  }
  describe("tg_unsqueeze(ndim %d, %d)", nd, axis);
  begin_call();
  tg_tensor *t = tg_unsqueeze(x->t, axis);
  if (!ok) expect_error(!t);
  else expect_tensor(t, n, out, x->dt, true, x->r ? ref_reshape(x->r, n, out) : NULL);
  end_call();
}

/* python's slice length with TG_END as None, computed without ever overflowing (a third implementation) */
static int64_t model_slice_len(int64_t n, tg_slice s) {
  if (s.all) return n;
  long double step = (long double)s.step, lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
  long double start = s.start == TG_END ? (step < 0 ? hi : n) : (long double)s.start;
  long double stop = s.stop == TG_END ? (step < 0 ? lo : hi) : (long double)s.stop;
  if (start < 0) start += n;
  if (stop < 0 && s.stop != TG_END) stop += n;
  start = start < lo ? lo : start > hi ? hi : start;
  stop = stop < lo ? lo : stop > hi ? hi : stop;
  long double span = step > 0 ? stop - start : start - stop;
  if (span <= 0) return 0;
  long double c = ceill(span / fabsl(step));
  return (int64_t)c;
}

static int64_t draw_bound(int64_t len) {
  int k = (int)rnd(0, 19);
  return k < 14 ? rnd(-len - 2, len + 2) : k < 16 ? TG_END : k < 18 ? INT64_MIN : INT64_MAX - rnd(0, 1);
}

static void op_slice(slot *x) {
  int nd = x->ndim, n = chance(90) ? (int)rnd(0, nd) : nd + 1;
  tg_slice sl[TG_MAX_DIMS + 1];
  bool ok = n <= nd;
  int64_t out[TG_MAX_DIMS];
  memcpy(out, x->shape, sizeof out);
  for (int i = 0; i < n; i++) {
    int64_t len = i < nd ? x->shape[i] : 1;
    sl[i] = (tg_slice){0, 0, 1, chance(25)};
    sl[i].start = draw_bound(len);
    sl[i].stop = draw_bound(len);
    int k = (int)rnd(0, 19);
    sl[i].step = k < 12 ? rnd(1, 3) : k < 17 ? -rnd(1, 3) : k == 17 ? 0 : k == 18 ? INT64_MIN : INT64_MAX;
    if (!sl[i].all && sl[i].step == 0) ok = false;
    if (!sl[i].all && sl[i].step != 1 && sl[i].step != -1 && nd == TG_MAX_DIMS) ok = false;
    if (i < nd) out[i] = model_slice_len(len, sl[i]);
  }
  describe("tg_slice_axes(ndim %d, %d slices, first %s%lld:%lld:%lld)", nd, n, n && sl[0].all ? "all " : "",
           n ? (long long)sl[0].start : 0, n ? (long long)sl[0].stop : 0, n ? (long long)sl[0].step : 0);
  begin_call();
  tg_tensor *t = tg_slice_axes(x->t, n, sl);
  if (!ok) expect_error(!t);
  else expect_tensor(t, nd, out, x->dt, true, x->r ? ref_slice(x->r, n, sl) : NULL);
  end_call();
}

/* a tensor of x's shape with size `along` on axis ax (ax < 0: x's shape), filled from known values */
static tg_tensor *companion(const slot *x, int ax, int64_t along, tg_dtype dt, ref_arr **r) {
  int64_t s[TG_MAX_DIMS];
  memcpy(s, x->shape, sizeof s);
  if (ax >= 0) s[ax] = along;
  *r = NULL;
  if (model_numel(x->ndim, s) < 0 || model_numel(x->ndim, s) > SMALL) return tg_full(dt, x->ndim, s, 2);
  *r = ref_rand(dt, x->ndim, s, -3, 3);
  return ref_to_tg(*r);
}

static void op_cat(slot *x) {
  int nd = x->ndim, k = (int)rnd(1, 3), axis = draw_axis(nd);
  int a = model_axis(axis, nd, false);
  tg_tensor *ts[3];
  ref_arr *rs[3];
  slot info[3] = {{0}};
  bool known = true;
  for (int i = 0; i < k; i++) {
    if (i == 0 || chance(30)) {
      const slot *y = i == 0 || chance(50) ? x : pick();
      uses(y);
      ts[i] = y->t;
      rs[i] = y->r;
      info[i] = *y;
    } else {
      tg_dtype dt = chance(80) ? x->dt : draw_dtype();
      ts[i] = companion(x, a, a >= 0 ? rnd(0, 3) : 0, dt, &rs[i]);
      if (!ts[i]) { known = false; ts[i] = x->t; rs[i] = x->r; info[i] = *x; continue; }
      info[i].ndim = tg_ndim(ts[i]);
      memcpy(info[i].shape, tg_shape_ptr(ts[i]), (size_t)info[i].ndim * sizeof(int64_t));
      info[i].dt = tg_dtype_of(ts[i]);
    }
    known = known && rs[i];
  }
  bool ok = a >= 0;
  int64_t out[TG_MAX_DIMS], total = 0;
  tg_dtype dt = info[0].dt;
  memcpy(out, x->shape, sizeof out);
  for (int i = 0; ok && i < k; i++) {
    ok = info[i].ndim == nd;
    for (int d = 0; ok && d < nd; d++) ok = d == a || info[i].shape[d] == x->shape[d];
    if (ok) {
      ok = info[i].shape[a] <= LIMIT - total;
      total += ok ? info[i].shape[a] : 0;
      dt = ref_promote(dt, info[i].dt);
    }
  }
  if (ok) out[a] = total;
  ok = ok && model_numel(nd, out) >= 0;
  describe("tg_cat(%d tensors of ndim %d, axis %d)", k, nd, axis);
  begin_call();
  tg_tensor *t = tg_cat(k, ts, axis);
  if (!ok) expect_error(!t);
  else expect_tensor(t, nd, out, dt, true, known && model_numel(nd, out) <= SMALL ? ref_cat(k, rs, a) : NULL);
  end_call();
}

static void op_stack(slot *x) {
  int nd = x->ndim, k = (int)rnd(1, 3), axis = draw_axis(nd + 1);
  int a = model_axis(axis, nd + 1, false);
  tg_tensor *ts[3];
  ref_arr *rs[3];
  bool ok = a >= 0 && nd + 1 <= TG_MAX_DIMS, known = true;
  tg_dtype dt = x->dt;
  for (int i = 0; i < k; i++) {
    if (i == 0 || chance(50)) { ts[i] = x->t; rs[i] = x->r; }
    else if (chance(80)) { ts[i] = companion(x, -1, 0, x->dt, &rs[i]); }
    else {
      const slot *y = pick();
      uses(y);
      ts[i] = y->t;
      rs[i] = y->r;
      bool same = y->ndim == nd && memcmp(y->shape, x->shape, (size_t)nd * sizeof(int64_t)) == 0;
      ok = ok && same;
      dt = ref_promote(dt, y->dt);
    }
    known = known && rs[i] && ts[i];
    if (!ts[i]) { ts[i] = x->t; rs[i] = x->r; }
  }
  int64_t out[TG_MAX_DIMS + 1];
  int n = 0;
  for (int i = 0; i <= nd; i++) {
    if (i == a) out[n++] = k;
    if (i < nd) out[n++] = x->shape[i];
  }
  ok = ok && model_numel(n, out) >= 0;
  describe("tg_stack(%d tensors of ndim %d, axis %d)", k, nd, axis);
  begin_call();
  tg_tensor *t = tg_stack(k, ts, axis);
  if (!ok) expect_error(!t);
  else expect_tensor(t, n, out, dt, true, known && model_numel(n, out) <= SMALL ? ref_stack(k, rs, a) : NULL);
  end_call();
}

static void op_split(slot *x) {
  int nd = x->ndim, axis = draw_axis(nd), k = (int)rnd(1, 3);
  int a = model_axis(axis, nd, false);
  int64_t len = a >= 0 ? x->shape[a] : 2, sizes[3], left = len, total = 0;
  bool ok = a >= 0, sum_ok = true;
  for (int i = 0; i < k; i++) {
    sizes[i] = i == k - 1 ? left : rnd(0, left);
    left -= sizes[i];
    if (chance(6)) sizes[i] = chance(50) ? -1 : INT64_MAX - rnd(0, 3);
    if (sizes[i] < 0 || sizes[i] > LIMIT - total) sum_ok = false;
    else total += sizes[i];
  }
  ok = ok && sum_ok && total == len;
  describe("tg_split(ndim %d, %d pieces %lld.., axis %d)", nd, k, (long long)sizes[0], axis);
  tg_tensor *out[3] = {NULL, NULL, NULL};
  begin_call();
  tg_status st = tg_split(x->t, k, sizes, axis, out);
  if (!ok) {
    expect_error(st != TG_OK);
    if (out[0] && st != TG_OK) FAIL("a failed split left a tensor in out[0]");
  } else if (st != TG_OK) {
    nvalid++;
    FAIL("a valid split failed: %s", tg_error());
  } else {
    int64_t off = 0;
    for (int i = 0; i < k; i++) {
      int64_t s[TG_MAX_DIMS], b[2 * TG_MAX_DIMS];
      memcpy(s, x->shape, sizeof s);
      s[a] = sizes[i];
      for (int d = 0; d < nd; d++) { b[2 * d] = 0; b[2 * d + 1] = x->shape[d]; }
      b[2 * a] = off;
      b[2 * a + 1] = off + sizes[i];
      off += sizes[i];
      expect_tensor(out[i], nd, s, x->dt, true, x->r ? ref_shrink(x->r, b) : NULL);
    }
  }
  end_call();
}

static void op_repeat(slot *x) {
  int nd = x->ndim, n = chance(95) ? nd + (int)rnd(0, 2) : nd - 1;
  if (n < 0) n = 0;
  int64_t reps[TG_MAX_DIMS + 2], out[TG_MAX_DIMS + 2];
  bool ok = n >= nd && 2 * n <= TG_MAX_DIMS;
  for (int i = 0; i < n; i++) {
    int k = (int)rnd(0, 19);
    reps[i] = k < 17 ? rnd(0, 2) : k == 17 ? -1 : k == 18 ? (int64_t)1 << 40 : INT64_MAX;
    int j = i - (n - nd);
    int64_t base = j >= 0 ? x->shape[j] : 1;
    ok = ok && reps[i] >= 0 && (base == 0 || reps[i] <= LIMIT / base);
    out[i] = ok && base ? reps[i] * base : 0;
  }
  ok = ok && model_numel(n, out) >= 0;
  describe("tg_repeat(ndim %d, %d repeats: %lld ...)", nd, n, n ? (long long)reps[0] : 0);
  begin_call();
  tg_tensor *t = tg_repeat(x->t, n, reps);
  if (!ok) expect_error(!t);
  else expect_tensor(t, n, out, x->dt, true, x->r && model_numel(n, out) <= SMALL ? ref_repeat(x->r, n, reps) : NULL);
  end_call();
}

/* ---- elementwise -------------------------------------------------------------------------------------- */

typedef tg_tensor *(*unary_fn)(tg_tensor *);
/* kind 0: exact on exact values; 1: rounds; 2: jumps at a boundary (integers, zero) */
static const struct { const char *name; unary_fn fn; ref_op op; int kind; } unaries[] = {
    {"neg", tg_neg, R_NEG, 0},         {"abs", tg_abs, R_ABS, 0},           {"relu", tg_relu, R_RELU, 0},
    {"square", tg_square, R_SQUARE, 0}, {"sigmoid", tg_sigmoid, R_SIGMOID, 1}, {"tanh", tg_tanh, R_TANH, 1},
    {"exp", tg_exp, R_EXP, 1},         {"sin", tg_sin, R_SIN, 1},           {"floor", tg_floor, R_FLOOR, 2},
    {"ceil", tg_ceil, R_CEIL, 2},      {"trunc", tg_trunc, R_TRUNC, 2},     {"sign", tg_sign, R_SIGN, 2},
    {"logical_not", tg_logical_not, R_LOGICAL_NOT, 2}, {"sqrt", tg_sqrt, R_SQRT, 1},
    {"log", tg_log, R_LOG, 1},        {"reciprocal", tg_reciprocal, R_RECIP, 1},
};

static void op_unary(slot *x) {
  int i = (int)rnd(0, (int)(sizeof unaries / sizeof *unaries) - 1);
  describe("tg_%s(%s ndim %d)", unaries[i].name, tg_dtype_name(x->dt), x->ndim);
  begin_call();
  tg_tensor *t = unaries[i].fn(x->t);
  bool jumps = unaries[i].kind == 2 && cur_inexact;
  ref_arr *r = x->r && small_float_values(x->r, 8) && !jumps ? ref_unary(unaries[i].op, x->r, 0, 0) : NULL;
  cur_inexact |= unaries[i].kind == 1;
  expect_tensor(t, x->ndim, x->shape, r ? r->dtype : x->dt, r != NULL, r);
  end_call();
}

/* y for a binary op with x: x itself, a broadcastable fresh tensor, or any other slot */
static const slot *operand(const slot *x, slot *tmp) {
  int k = (int)rnd(0, 9);
  if (k < 2) return x;
  if (k < 8) {
    *tmp = *x;
    int drop = (int)rnd(0, x->ndim);
    tmp->ndim = x->ndim - drop;
    for (int i = 0; i < tmp->ndim; i++) tmp->shape[i] = chance(30) ? 1 : x->shape[i + drop];
    if (chance(10) && tmp->ndim) tmp->shape[rnd(0, tmp->ndim - 1)] += 1;  /* may not broadcast */
    tmp->dt = chance(75) ? x->dt : draw_dtype();
    tmp->r = NULL;
    tmp->t = companion(tmp, -1, 0, tmp->dt, &tmp->r);
    if (!tmp->t) return x;
    return tmp;
  }
  const slot *y = pick();
  uses(y);
  return y;
}

typedef tg_tensor *(*binary_fn)(tg_tensor *, tg_tensor *);
/* kind 1: integers only; 2: a comparison (jumps); 3: rounds */
static const struct { const char *name; binary_fn fn; ref_op op; int kind; } binaries[] = {
    {"add", tg_add, R_ADD, 0},       {"sub", tg_sub, R_SUB, 0},         {"mul", tg_mul, R_MUL, 0},
    {"div", tg_div, R_DIV, 3},       {"maximum", tg_maximum, R_MAXIMUM, 0}, {"minimum", tg_minimum, R_MINIMUM, 0},
    {"lt", tg_lt, R_LT, 2},          {"le", tg_le, R_LE, 2},            {"eq", tg_eq, R_EQ, 2},
    {"ne", tg_ne, R_NE, 2},          {"bitwise_and", tg_bitwise_and, R_AND, 1}, {"bitwise_xor", tg_bitwise_xor, R_XOR, 1},
};

static void op_binary(slot *x) {
  slot tmp;
  const slot *y = operand(x, &tmp);
  int i = (int)rnd(0, (int)(sizeof binaries / sizeof *binaries) - 1);
  int n = 0;
  int64_t out[TG_MAX_DIMS];
  bool ok = ref_broadcast_shape(x->ndim, x->shape, y->ndim, y->shape, &n, out) && model_numel(n, out) >= 0;
  tg_dtype dt = ref_promote(x->dt, y->dt);
  if (binaries[i].kind == 1 && ref_is_float(dt)) ok = false;  /* bitwise ops take integers and bools */
  char a[200], b[200];
  describe("tg_%s(%s %s, %s %s)", binaries[i].name, tg_dtype_name(x->dt), ref_shape_str(a, sizeof a, x->ndim, x->shape),
           tg_dtype_name(y->dt), ref_shape_str(b, sizeof b, y->ndim, y->shape));
  begin_call();
  tg_tensor *t = binaries[i].fn(x->t, y->t);
  if (!ok) expect_error(!t);
  else {
    /* NaN: tinygrad's compositions (x <= y is not x > y; minimum through maximum) differ from IEEE, which the
     * reference follows; such values are not compared */
    bool jumps = binaries[i].kind == 2 && cur_inexact;
    ref_arr *r = no_nan(x->r) && no_nan(y->r) && !jumps && model_numel(n, out) <= SMALL ? ref_binary(binaries[i].op, x->r, y->r) : NULL;
    cur_inexact |= binaries[i].kind == 3;
    expect_tensor(t, n, out, r ? r->dtype : dt, r != NULL, r);
  }
  end_call();
}

typedef tg_tensor *(*scalar_fn)(tg_tensor *, double);
static const struct { const char *name; scalar_fn fn; ref_op op; } scalars[] = {
    {"add_scalar", tg_add_scalar, R_ADD}, {"sub_scalar", tg_sub_scalar, R_SUB}, {"mul_scalar", tg_mul_scalar, R_MUL},
    {"maximum_scalar", tg_maximum_scalar, R_MAXIMUM}, {"minimum_scalar", tg_minimum_scalar, R_MINIMUM},
};

static void op_scalar(slot *x) {
  int i = (int)rnd(0, (int)(sizeof scalars / sizeof *scalars) - 1);
  double v = (double)rnd(-6, 6) / (chance(30) ? 2 : 1);
  describe("tg_%s(%s ndim %d, %g)", scalars[i].name, tg_dtype_name(x->dt), x->ndim, v);
  begin_call();
  tg_tensor *t = scalars[i].fn(x->t, v);
  ref_arr *r = x->r && small_float_values(x->r, 1e6) ? ref_binary_scalar(scalars[i].op, x->r, v) : NULL;
  expect_tensor(t, x->ndim, x->shape, r ? r->dtype : x->dt, r != NULL, r);
  end_call();
}

static void op_where(slot *x) {
  slot tmp;
  const slot *y = operand(x, &tmp);
  tg_tensor *cond = tg_lt(x->t, tg_scalar(x->dt, 0.5));
  int n = 0;
  int64_t out[TG_MAX_DIMS];
  bool ok = ref_broadcast_shape(x->ndim, x->shape, y->ndim, y->shape, &n, out) && model_numel(n, out) >= 0;
  describe("tg_where(x < 0.5, x ndim %d, y ndim %d)", x->ndim, y->ndim);
  begin_call();
  tg_tensor *t = tg_where(cond, x->t, y->t);
  if (!ok) expect_error(!t);
  else {
    ref_arr *r = NULL;
    if (x->r && y->r && !cur_inexact && model_numel(n, out) <= SMALL)
      r = ref_where(ref_binary(R_LT, x->r, ref_scalar(x->dt, 0.5)), x->r, y->r);
    expect_tensor(t, n, out, r ? r->dtype : x->dt, r != NULL, r);
  }
  end_call();
}

static void op_cast(slot *x) {
  bool bit = chance(25);
  tg_dtype dt = chance(4) ? (tg_dtype)rnd(TG_DTYPE_COUNT, TG_DTYPE_COUNT + 5) : draw_dtype();
  bool ok = (unsigned)dt < TG_DTYPE_COUNT;
  int64_t out[TG_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) out[d] = x->shape[d];
  /* a bitcast to another element size regroups the last dim's bytes (no bool on either side, not 0-dim) */
  if (ok && bit && tg_dtype_size(dt) != tg_dtype_size(x->dt)) {
    int64_t os = (int64_t)tg_dtype_size(x->dt), ns = (int64_t)tg_dtype_size(dt);
    ok = x->ndim >= 1 && dt != TG_BOOL && x->dt != TG_BOOL && (x->shape[x->ndim - 1] * os) % ns == 0;
    if (ok) out[x->ndim - 1] = x->shape[x->ndim - 1] * os / ns;
  }
  describe("tg_%s(%s ndim %d, %s)", bit ? "bitcast" : "cast", tg_dtype_name(x->dt), x->ndim, tg_dtype_name(dt));
  begin_call();
  tg_tensor *t = bit ? tg_bitcast(x->t, dt) : tg_cast(x->t, dt);
  if (!ok) expect_error(!t);
  else {
    /* values a C conversion defines: finite, in range, not negative into an unsigned type */
    bool defined = x->r && small_float_values(x->r, 100);
    if (ref_is_float(x->dt) && !ref_is_float(dt) && cur_inexact) defined = false;  /* truncation jumps */
    for (int64_t i = 0; defined && ref_is_unsigned(dt) && ref_is_float(x->dt) && i < x->r->numel; i++)
      defined = x->r->data[i] >= 0;
    expect_tensor(t, x->ndim, out, dt, true, !bit && defined ? ref_cast(x->r, dt) : NULL);
  }
  end_call();
}

/* ---- reductions and matmul ------------------------------------------------------------------------------ */

typedef tg_tensor *(*reduce_fn)(tg_tensor *, int, const int *, bool);
static const struct { const char *name; reduce_fn fn; ref_op op; } reduces[] = {
    {"sum", tg_sum, R_SUM}, {"max", tg_max, R_MAX}, {"min", tg_min, R_MIN}, {"mean", tg_mean, R_MEAN}, {"prod", tg_prod, R_PROD},
};

static void op_reduce(slot *x) {
  int i = (int)rnd(0, (int)(sizeof reduces / sizeof *reduces) - 1), nd = x->ndim;
  int na = chance(5) ? -1 : (int)rnd(0, nd < 3 ? nd + 1 : 3), axes[4];
  bool keep = chance(50), ok = na >= 0, mask[TG_MAX_DIMS] = {0};
  for (int k = 0; k < na; k++) {
    axes[k] = chance(85) ? (int)rnd(-nd, nd - 1) : draw_axis(nd);
    if (nd == 0 && chance(70)) axes[k] = (int)rnd(-1, 0);
    int a = model_axis(axes[k], nd, true);
    ok = ok && a >= 0;
    if (a >= 0 && nd) mask[a] = true;
  }
  int64_t out[TG_MAX_DIMS], empty = 0;
  int n = 0;
  for (int d = 0; d < nd; d++) {
    bool red = na == 0 || mask[d];
    if (red && x->shape[d] == 0) empty = 1;
    if (!red) out[n++] = x->shape[d];
    else if (keep) out[n++] = 1;
  }
  char sh[200];
  describe("tg_%s(%s %s, %d axes: %d %d, keepdim %d)", reduces[i].name, tg_dtype_name(x->dt),
           ref_shape_str(sh, sizeof sh, nd, x->shape), na, na > 0 ? axes[0] : 0, na > 1 ? axes[1] : 0, keep);
  begin_call();
  tg_tensor *t = reduces[i].fn(x->t, na, na > 0 ? axes : NULL, keep);
  cur_inexact |= reduces[i].op == R_MEAN;
  if (!ok) expect_error(!t);
  else {
    /* 0-d: over axis 0 or -1 is over everything; prod and empty max/min values are left to the unit tests */
    bool vals = x->r && small_float_values(x->r, 8) && !(empty && (reduces[i].op == R_MAX || reduces[i].op == R_MIN)) &&
                model_numel(n, out) <= SMALL;  /* a reduce of an empty tensor can be larger than it */
    int rn = 0, rax[4];
    for (int k = 0; k < na && nd; k++) rax[rn++] = axes[k];
    ref_arr *r = vals ? ref_reduce(reduces[i].op, x->r, nd ? na : 0, nd && na ? rax : NULL, keep) : NULL;
    if (r && nd == 0) r = ref_reshape(r, 0, NULL);
    expect_tensor(t, n, out, r ? r->dtype : x->dt, r != NULL, r);
  }
  end_call();
}

/* the library's arg-extremes got (read back) against x: each index in range and at an extreme value. Ties
 * among values that carry rounding are broken by last bits, so the index itself is not compared. */
static bool check_argext(const slot *x, int a, const ref_arr *got, bool is_min) {
  int64_t outer = 1, len = x->r->numel, inner = 1;
  if (got->numel == 0) return true;  /* outer may still be 2^40 */
  if (a >= 0) {
    len = x->shape[a];
    for (int i = 0; i < a; i++) outer *= x->shape[i];
    for (int i = a + 1; i < x->ndim; i++) inner *= x->shape[i];
  }
  for (int64_t p = 0, o = 0; p < outer; p++)
    for (int64_t q = 0; q < inner; q++, o++) {
      double ext = x->r->data[p * len * inner + q], idx = got->data[o];
      for (int64_t k = 1; k < len; k++) {
        double v = x->r->data[(p * len + k) * inner + q];
        if (is_min ? v < ext : v > ext) ext = v;
      }
      if (!(idx >= 0 && idx < len && idx == floor(idx))) {
        FAIL("index %g at output %lld is outside 0..%lld", idx, (long long)o, (long long)len - 1);
        return false;
      }
      double v = x->r->data[(p * len + (int64_t)idx) * inner + q];
      double tol = x->half || x->inexact ? 1e-3 + 4e-3 * fabs(ext) : 0;
      if (fabs(v - ext) > tol) {
        FAIL("index %g at output %lld has value %.9g, the %s is %.9g", idx, (long long)o, v, is_min ? "minimum" : "maximum", ext);
        return false;
      }
    }
  return true;
}

static void op_argmax(slot *x) {
  int nd = x->ndim, axis = chance(20) ? TG_ALL : draw_axis(nd);
  bool keep = chance(50), is_min = chance(50);
  int a = axis == TG_ALL ? -2 : model_axis(axis, nd, true);
  bool ok = axis == TG_ALL || a >= 0;
  int64_t out[TG_MAX_DIMS];
  int n = 0;
  bool empty = axis == TG_ALL ? model_numel(nd, x->shape) == 0 : (nd && a >= 0 && x->shape[a] == 0);
  if (axis != TG_ALL)
    for (int d = 0; d < nd; d++) {
      if (d != a) out[n++] = x->shape[d];
      else if (keep) out[n++] = 1;
    }
  describe("tg_%s(%s ndim %d, axis %d, keepdim %d)", is_min ? "argmin" : "argmax", tg_dtype_name(x->dt), nd, axis, keep);
  begin_call();
  tg_tensor *t = is_min ? tg_argmin(x->t, axis, keep) : tg_argmax(x->t, axis, keep);
  if (!ok) expect_error(!t);
  else {
    ref_arr *r = NULL;
    if (t && x->r && !empty && small_float_values(x->r, 1e6) && cur_work <= MAX_WORK && chance(30)) {
      nchecked++;
      ref_arr *got = ref_from_tg(t);
      if (!got) FAIL("reading the result: %s", tg_error());
      else if (got->ndim == n && !memcmp(got->shape, out, (size_t)n * sizeof *out) &&
               check_argext(x, axis == TG_ALL || nd == 0 ? -1 : a, got, is_min))
        r = got;
    }
    expect_tensor(t, n, out, TG_INT32, true, r);
  }
  end_call();
}

static void op_softmax(slot *x) {
  int nd = x->ndim, axis = draw_axis(nd), kind = (int)rnd(0, 2);
  int a = model_axis(axis, nd, true);
  bool all = kind == 2 && axis == TG_ALL;  /* logsumexp over every axis, as tinygrad's axis=None */
  bool keep = chance(50), ok = a >= 0 || all;
  const char *names[] = {"softmax", "log_softmax", "logsumexp"};
  int64_t out[TG_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < nd; d++) {
    if (kind < 2 || (d != a && !all)) out[n++] = x->shape[d];
    else if (keep) out[n++] = 1;
  }
  describe("tg_%s(%s ndim %d, axis %d)", names[kind], tg_dtype_name(x->dt), nd, axis);
  begin_call();
  tg_tensor *t = kind == 0 ? tg_softmax(x->t, axis) : kind == 1 ? tg_log_softmax(x->t, axis) : tg_logsumexp(x->t, axis, keep);
  cur_inexact = true;
  if (!ok) expect_error(!t);
  else {
    bool vals = !all && x->r && nd && x->shape[a] > 0 && small_float_values(x->r, 8);
    ref_arr *r = !vals ? NULL : kind < 2 ? ref_softmax(x->r, a, kind == 1) : ref_logsumexp(x->r, a, keep);
    expect_tensor(t, n, out, r ? r->dtype : x->dt, r != NULL, r);
  }
  end_call();
}

/* numpy matmul shapes; false when they do not fit. *work: the multiply-adds, zero sizes left out */
static bool model_matmul(const slot *x, const slot *y, int *n, int64_t *out, int64_t *work) {
  if (x->ndim == 0 || y->ndim == 0) return false;
  int64_t ka = x->shape[x->ndim - 1], kb = y->shape[y->ndim >= 2 ? y->ndim - 2 : 0];
  if (ka != kb) return false;
  int nbx = x->ndim >= 2 ? x->ndim - 2 : 0, nby = y->ndim >= 2 ? y->ndim - 2 : 0, nb;
  int64_t batch[TG_MAX_DIMS];
  if (!ref_broadcast_shape(nbx, x->shape, nby, y->shape, &nb, batch)) return false;
  *n = 0;
  for (int i = 0; i < nb; i++) out[(*n)++] = batch[i];
  if (x->ndim >= 2) out[(*n)++] = x->shape[x->ndim - 2];
  if (y->ndim >= 2) out[(*n)++] = y->shape[y->ndim - 1];
  /* the product (..., n, m, k) takes one more axis than an operand promoted to 2-d */
  if (*n > TG_MAX_DIMS - 1 || (x->ndim < 2 ? 2 : x->ndim) + 1 > TG_MAX_DIMS || (y->ndim < 2 ? 2 : y->ndim) + 1 > TG_MAX_DIMS)
    return false;
  /* the product (..., n, m, k) must fit as well as the result */
  int64_t prod[TG_MAX_DIMS + 1];
  memcpy(prod, out, (size_t)*n * sizeof *out);
  prod[*n] = ka;
  *work = 1;
  for (int i = 0; i <= *n; i++) *work = prod[i] && *work <= LIMIT / prod[i] ? *work * prod[i] : *work;
  return model_numel(*n, out) >= 0 && model_numel(*n + 1, prod) >= 0;
}

static void op_matmul(slot *x) {
  slot tmp = *x;
  const slot *y;
  if (chance(60) && x->ndim >= 1) {  /* a fitting right operand */
    int64_t k = x->shape[x->ndim - 1];
    tmp.ndim = chance(30) ? 1 : 2;
    tmp.shape[0] = k;
    tmp.shape[1] = rnd(1, 4);
    tmp.dt = chance(80) ? x->dt : draw_dtype();
    tmp.t = companion(&tmp, -1, 0, tmp.dt, &tmp.r);
    y = tmp.t ? &tmp : x;
  } else {
    y = pick();
    uses(y);
  }
  int n = 0;
  int64_t out[TG_MAX_DIMS + 1], work = 0;
  bool ok = model_matmul(x, y, &n, out, &work);
  char a[200], b[200];
  describe("tg_matmul(%s %s, %s %s)", tg_dtype_name(x->dt), ref_shape_str(a, sizeof a, x->ndim, x->shape),
           tg_dtype_name(y->dt), ref_shape_str(b, sizeof b, y->ndim, y->shape));
  begin_call();
  tg_tensor *t = tg_matmul(x->t, y->t);
  if (work > cur_work) cur_work = work;
  if (!ok) expect_error(!t);
  else {
    bool vals = x->r && y->r && model_numel(n, out) <= SMALL && work <= MAX_WORK && small_float_values(x->r, 8) &&
                small_float_values(y->r, 8);
    ref_arr *r = vals ? ref_matmul(x->r, y->r) : NULL;
    expect_tensor(t, n, out, r ? r->dtype : x->dt, r != NULL, r);
  }
  end_call();
}

/* ---- indexing ------------------------------------------------------------------------------------------- */

/* out = x[..., idx[...], ...] along axis a (idx values already wrapped into range) */
static ref_arr *ref_index_select(const ref_arr *x, int a, const ref_arr *idx) {
  int64_t s[TG_MAX_DIMS], outer = 1, inner = 1, len = x->shape[a];
  int n = 0;
  for (int i = 0; i < a; i++) { s[n++] = x->shape[i]; outer *= x->shape[i]; }
  for (int i = 0; i < idx->ndim; i++) s[n++] = idx->shape[i];
  for (int i = a + 1; i < x->ndim; i++) { s[n++] = x->shape[i]; inner *= x->shape[i]; }
  ref_arr *o = ref_new(x->dtype, n, s);
  if (o->numel == 0) return o;  /* outer may still be 2^40 */
  for (int64_t p = 0, k = 0; p < outer; p++)
    for (int64_t j = 0; j < idx->numel; j++) {
      int64_t v = (int64_t)idx->data[j];
      if (v < 0) v += len;
      for (int64_t q = 0; q < inner; q++, k++) o->data[k] = x->data[(p * len + v) * inner + q];
    }
  return o;
}

static void op_index_select(slot *x) {
  int nd = x->ndim, axis = draw_axis(nd);
  int a = model_axis(axis, nd, false);
  int64_t len = a >= 0 ? x->shape[a] : 0, is[2] = {rnd(0, 3), rnd(1, 3)};
  int ni = (int)rnd(0, 2);
  tg_dtype idt = chance(90) ? TG_INT32 : TG_FLOAT32;
  ref_arr *idx = ref_rand(idt, ni, is, len ? -len : 0, len ? len - 1 : 0);
  tg_tensor *it = ref_to_tg(idx);
  bool ok = a >= 0 && idt == TG_INT32 && nd + ni <= TG_MAX_DIMS && (len > 0 || idx->numel == 0) && it;
  int64_t out[TG_MAX_DIMS + 2];
  int n = 0;
  for (int i = 0; a >= 0 && i < a; i++) out[n++] = x->shape[i];
  for (int i = 0; a >= 0 && i < ni; i++) out[n++] = is[i];
  for (int i = a + 1; a >= 0 && i < nd; i++) out[n++] = x->shape[i];
  ok = ok && model_numel(n, out) >= 0;
  describe("tg_index_select(%s ndim %d, axis %d, %s index of ndim %d)", tg_dtype_name(x->dt), nd, axis, tg_dtype_name(idt), ni);
  begin_call();
  tg_tensor *t = tg_index_select(x->t, axis, it);
  if (len == 0 && a >= 0 && idx->numel && idt == TG_INT32 && t) ok = true;  /* no valid index: any answer is fine */
  if (!ok) expect_error(!t);
  else {
    ref_arr *r = x->r && len > 0 && model_numel(n, out) <= SMALL ? ref_index_select(x->r, a, idx) : NULL;
    expect_tensor(t, n, out, x->dt, true, r);
  }
  end_call();
}

static void op_one_hot(slot *x) {
  int64_t classes = chance(90) ? rnd(0, 5) : chance(50) ? -1 : (int64_t)INT32_MAX + 1;
  bool ok = ref_is_int(x->dt) && classes >= 0 && classes <= INT32_MAX && x->ndim + 1 <= TG_MAX_DIMS;
  int64_t out[TG_MAX_DIMS + 1];
  memcpy(out, x->shape, (size_t)x->ndim * sizeof *out);
  out[x->ndim] = classes;
  ok = ok && model_numel(x->ndim + 1, out) >= 0;
  describe("tg_one_hot(%s ndim %d, %lld)", tg_dtype_name(x->dt), x->ndim, (long long)classes);
  begin_call();
  tg_tensor *t = tg_one_hot(x->t, classes);
  if (!ok) expect_error(!t);
  else {
    ref_arr *r = NULL;
    if (x->r && model_numel(x->ndim + 1, out) <= SMALL) {
      r = ref_new(TG_INT32, x->ndim + 1, out);
      for (int64_t i = 0; i < x->r->numel; i++)
        for (int64_t c = 0; c < classes; c++) r->data[i * classes + c] = x->r->data[i] == (double)c;
    }
    expect_tensor(t, x->ndim + 1, out, TG_INT32, true, r);
  }
  end_call();
}

static void op_cumsum(slot *x) {
  int nd = x->ndim, axis = draw_axis(nd);
  int a = model_axis(axis, nd, true);
  int64_t n = model_numel(nd, x->shape);
  bool ok = a >= 0 && (nd == 0 || n == 0 || nd + 2 <= TG_MAX_DIMS);  /* its windows take two more axes */
  bool either = ok && n > LIMIT / 1024;  /* near the bound its windows may not fit: an error is fine too */
  tg_dtype dt = ref_is_float(x->dt) ? x->dt : ref_sum_dtype(x->dt);
  describe("tg_cumsum(%s ndim %d, axis %d)", tg_dtype_name(x->dt), nd, axis);
  begin_call();
  tg_tensor *t = tg_cumsum(x->t, axis);
  if (either && !t) ok = false;
  if (!ok) expect_error(!t);
  else {
    ref_arr *r = NULL;
    if (x->r && small_float_values(x->r, 100)) {
      r = ref_new(dt, nd, x->shape);
      int64_t outer = 1, len = nd ? x->shape[a] : 1, inner = 1;
      for (int i = 0; i < a && nd; i++) outer *= x->shape[i];
      for (int i = a + 1; i < nd; i++) inner *= x->shape[i];
      for (int64_t p = 0; p < outer && r->numel; p++)
        for (int64_t q = 0; q < inner; q++) {
          double acc = 0;
          for (int64_t k = 0; k < len; k++) {
            int64_t at = (p * len + k) * inner + q;
            acc += x->r->data[at];
            r->data[at] = ref_round(dt, acc);
          }
        }
    }
    expect_tensor(t, nd, x->shape, dt, true, r);
  }
  end_call();
}

/* tg_shape with any axis: the size, or -1 with a message */
static void op_shape_query(slot *x) {
  int axis = draw_axis(x->ndim), a = model_axis(axis, x->ndim, false);
  describe("tg_shape(ndim %d, %d)", x->ndim, axis);
  begin_call();
  int64_t got = tg_shape(x->t, axis);
  if (a < 0) expect_error(got == -1);
  else if (got != x->shape[a]) FAIL("tg_shape gave %lld, want %lld", (long long)got, (long long)x->shape[a]);
  end_call();
}

/* ---- reading values --------------------------------------------------------------------------------------- */

static void op_check(void) {
  slot *x = NULL;
  for (int tries = 0; tries < NSLOT && !x; tries++) {
    slot *c = &pool[rnd(0, NSLOT - 1)];
    if (c->t && c->r && c->work <= MAX_WORK) x = c;
  }
  if (!x) return;
  cur_hist[0] = 0;
  describe("read back: %s", x->hist);
  begin_call();
  nchecked++;
  int k = (int)rnd(0, 9);
  if (k == 0) {  /* a wrong byte count */
    char buf[8];
    expect_error(tg_to_host(x->t, buf, (size_t)tg_numel(x->t) * tg_dtype_size(x->dt) + 1) != TG_OK);
  } else if (k == 1) {  /* item */
    double v = tg_item(x->t);
    if (x->r->numel != 1) expect_error(isnan(v));
    else {
      double w = x->r->data[0];
      bool half = x->half;
      bool close = (isnan(w) && isnan(v)) || v == w || fabs(v - w) <= (half ? 1e-2 : 1e-5) + (half ? 1e-2 : 1e-3) * fabs(w);
      if (!close) FAIL("tg_item %.9g, want %.9g", v, w);
    }
  } else {
    /* half floats: the library rounds to float16 between steps (as tinygrad does), the reference once: a few
     * ulps (2^-11 relative each) per step, which cancellation in a later sum makes large next to the result */
    bool half = x->half;
    ref_check_tol(desc, x->t, x->r, true, half ? 1e-2 : 1e-5, half ? 1e-2 : 1e-3, __FILE__, __LINE__);
  }
  end_call();
}

/* realizes a few small slots together: one schedule (nothing to compare but the status) */
static void op_realize_many(void) {
  tg_tensor *ts[NSLOT];
  int n = 0;
  for (int i = 0; i < NSLOT; i++)
    if (pool[i].t && pool[i].work <= MAX_WORK && chance(50)) ts[n++] = pool[i].t;
  cur_hist[0] = 0;
  describe("tg_realize_many(%d tensors)", n);
  for (int i = 0, k = 0; i < NSLOT; i++)  /* which ones, and how they were made */
    if (k < n && pool[i].t == ts[k]) {
      size_t len = strlen(desc);
      snprintf(desc + len, sizeof desc - len, " [%d: %s]", k++, pool[i].hist);
    }
  begin_call();
  if (tg_realize_many(n, ts) != TG_OK) FAIL("tg_realize_many: %s", tg_error());
  end_call();
}

/* ---- the loop ------------------------------------------------------------------------------------------ */

static void one_call(void) {
  slot *picked = pick(), copy;
  slot *x = picked ? (copy = *picked, &copy) : NULL;  /* results may replace the picked slot */
  cur_work = x ? x->work : 0;
  cur_half = x && x->half;
  cur_inexact = x && x->inexact;
  snprintf(cur_hist, sizeof cur_hist, "%s", x ? x->hist : "");
  int k = (int)rnd(0, 99);
  if (!x || k < 14) { op_create(); return; }
  if (k < 20) { op_reshape(x); return; }
  if (k < 24) { op_permute(x); return; }
  if (k < 28) { op_expand(x); return; }
  if (k < 31) { op_shrink(x); return; }
  if (k < 33) { op_flip(x); return; }
  if (k < 35) { op_transpose(x); return; }
  if (k < 37) { op_flatten(x); return; }
  if (k < 39) { op_squeeze(x); return; }
  if (k < 41) { op_unsqueeze(x); return; }
  if (k < 45) { op_slice(x); return; }
  if (k < 48) { op_cat(x); return; }
  if (k < 50) { op_stack(x); return; }
  if (k < 52) { op_split(x); return; }
  if (k < 54) { op_repeat(x); return; }
  if (k < 59) { op_unary(x); return; }
  if (k < 66) { op_binary(x); return; }
  if (k < 69) { op_scalar(x); return; }
  if (k < 71) { op_where(x); return; }
  if (k < 74) { op_cast(x); return; }
  if (k < 79) { op_reduce(x); return; }
  if (k < 81) { op_argmax(x); return; }
  if (k < 83) { op_softmax(x); return; }
  if (k < 86) { op_matmul(x); return; }
  if (k < 88) { op_index_select(x); return; }
  if (k < 89) { chance(50) ? op_one_hot(x) : op_cumsum(x); return; }
  if (k < 90) { chance(50) ? op_realize_many() : op_shape_query(x); return; }
  op_check();
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "-v") != 0)) {
    fprintf(stderr, "usage: %s SEED CALLS [-v]\n", argv[0]);
    return 2;
  }
  char *end;
  seed = strtoull(argv[1], &end, 10);
  long calls = strtol(argv[2], &end, 10);
  if (*end || calls < 0) {
    fprintf(stderr, "api_driver: CALLS must be a count, got %s\n", argv[2]);
    return 2;
  }
  verbose = argc == 4;
  ref_seed(seed);
  while (call_no < calls) {
    tg_scope_begin();
    long stop = call_no + EPISODE;
    while (call_no < stop && call_no < calls) {
      one_call();
      if (call_no % 5000 == 0) fprintf(stderr, "api_driver: %ld calls, %ld failed\n", call_no, failed);
    }
    for (int i = 0; i < NSLOT; i++) slot_clear(&pool[i]);
    tg_scope_end();
    ref_free_all();
  }
  tg_collect();
  printf("seed %llu: %ld calls (%ld valid, %ld invalid, %ld value checks)\n", (unsigned long long)seed, call_no, nvalid,
         ninvalid, nchecked);
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed ? 1 : 0;
}
