/* test_variable.c — symbolic integers bound at run time: values, windows at a variable offset, gradients,
 * errors, no recompiles between values, and a KV-cache attention step captured once and replayed at every
 * position, against separate eager runs and a plain C reference. */
#include <math.h>
#include <stdlib.h>

#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "test.h"

static tg_tensor *vec(int ndim, const int64_t *shape, const float *v) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return tg_from_data(TG_FLOAT32, ndim, shape, v, (size_t)n * 4);
}

TEST(test_variable_as_a_tensor_masks_without_recompiling) {
  tg_variable *pos = tg_variable_new("pos", 0, 7);
  CHECK_T(pos);
  float xv[8];
  for (int i = 0; i < 8; i++) xv[i] = (float)(1 << i);
  uint64_t compiled = 0;
  for (int p = 0; p < 8; p++) {
    CHECK(tg_variable_bind(pos, p) == TG_OK && tg_variable_value(pos) == p, "%s", tg_error());
    tg_scope_begin();
    tg_tensor *x = vec(1, (int64_t[]){8}, xv);
    /* sum of x[i] for i <= pos */
    tg_tensor *mask = tg_lt(tg_arange(TG_INT32, 0, 8, 1), tg_add_scalar(tg_variable_tensor(pos), 1));
    double got = tg_item(tg_sum(tg_where(mask, x, tg_zeros_like(x)), 0, NULL, false));
    CHECK(got == (double)((1 << (p + 1)) - 1), "pos %d: sum %g, want %d", p, got, (1 << (p + 1)) - 1);
    if (p == 1) compiled = tg_get_stats().kernels_compiled;
    if (p > 1) CHECK(tg_get_stats().kernels_compiled == compiled, "pos %d compiled new kernels", p);
    tg_scope_end();
  }
  tg_variable_free(pos);
}

TEST(test_variable_bind_reaches_graphs_built_again) {
  tg_variable *v = tg_variable_new("k", -5, 5);
  CHECK_T(v);
  tg_scope_begin();
  tg_tensor *x = tg_arange(TG_INT32, 0, 4, 1);
  CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
  tg_variable_bind(v, 3);
  double a = tg_item(tg_sum(tg_mul(x, tg_variable_tensor(v)), 0, NULL, false));
  tg_variable_bind(v, -2);  /* the same graph again: interned to the node realized above */
  double b = tg_item(tg_sum(tg_mul(x, tg_variable_tensor(v)), 0, NULL, false));
  CHECK(a == 18 && b == -12, "sum(x * k): %g with k=3, %g with k=-2 (want 18, -12)", a, b);
  tg_scope_end();
  tg_variable_free(v);
}

TEST(test_shrink_at_and_pad_at_match_a_reference) {
  enum { R = 3, C = 41, L = 19 };
  float xv[R * C], got[R * C], want[R * C];
  for (int i = 0; i < R * C; i++) xv[i] = (float)(i * 7 % 31) - 15.0f;
  tg_variable *pos = tg_variable_new("pos", 0, C - L), *row = tg_variable_new("row", 0, R - 1);
  CHECK_T(pos && row);
  for (int p = 0; p <= C - L; p += 3) {
    tg_variable_bind(pos, p);
    tg_scope_begin();
    tg_tensor *x = vec(2, (int64_t[]){R, C}, xv);
    /* a window along the contiguous axis, at unaligned offsets: vector loads must not assume alignment */
    tg_tensor *w = tg_mul_scalar(tg_shrink_at(x, 1, pos, L), 2);
    CHECK(tg_to_host(w, got, R * L * 4) == TG_OK, "%s", tg_error());
    for (int r = 0; r < R; r++)
      for (int c = 0; c < L; c++) want[r * L + c] = 2 * xv[r * C + p + c];
    CHECK(!memcmp(got, want, R * L * 4), "shrink_at pos %d differs", p);
    /* the window placed back: zeros outside */
    tg_tensor *back = tg_add_scalar(tg_pad_at(w, 1, pos, C), 1);
    CHECK(tg_to_host(back, got, R * C * 4) == TG_OK, "%s", tg_error());
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++) want[r * C + c] = 1 + (c >= p && c < p + L ? 2 * xv[r * C + c] : 0);
    CHECK(!memcmp(got, want, R * C * 4), "pad_at pos %d differs", p);
    /* along the outer axis: the bounds decide what fits, whatever the value now */
    CHECK(!tg_shrink_at(x, 0, pos, 1) && strstr(tg_error(), "does not fit"), "a window that may not fit accepted");
    tg_error_clear();
    tg_variable_bind(row, p % R);
    CHECK(tg_to_host(tg_shrink_at(x, 0, row, 1), got, C * 4) == TG_OK && !memcmp(got, xv + p % R * C, C * 4),
          "row %d differs", p % R);
    tg_scope_end();
  }
  tg_variable_free(pos);
  tg_variable_free(row);
}

TEST(test_shrink_at_and_pad_at_gradients) {
  tg_variable *pos = tg_variable_new("pos", 0, 6);
  CHECK_T(pos);
  tg_variable_bind(pos, 4);
  tg_scope_begin();
  float xv[10], wv[3] = {1, 10, 100}, g[10];
  for (int i = 0; i < 10; i++) xv[i] = (float)i;
  tg_tensor *x = tg_set_requires_grad(vec(1, (int64_t[]){10}, xv), true);
  tg_tensor *w = vec(1, (int64_t[]){3}, wv);
  /* loss = sum(x[pos:pos+3] * w) + sum(pad_at(x[0:3], pos, 9)[pos+1]) */
  tg_tensor *loss = tg_sum(tg_mul(tg_shrink_at(x, 0, pos, 3), w), 0, NULL, false);
  tg_tensor *placed = tg_pad_at(tg_shrink(x, 1, (int64_t[]){0, 3}), 0, pos, 9);
  tg_tensor *pick = tg_from_data(TG_FLOAT32, 1, (int64_t[]){9}, (float[]){0, 0, 0, 0, 0, 1, 0, 0, 0}, 36);
  loss = tg_add(loss, tg_sum(tg_mul(placed, pick), 0, NULL, false));
  CHECK(tg_backward(loss) == TG_OK && tg_to_host(tg_grad(x), g, sizeof g) == TG_OK, "%s", tg_error());
  float want[10] = {0, 1, 0, 0, 1, 10, 100, 0, 0, 0};  /* pick hits placed[5] = x[1] */
  CHECK(!memcmp(g, want, sizeof g), "gradient %g %g %g %g %g %g %g", g[0], g[1], g[2], g[3], g[4], g[5], g[6]);
  tg_scope_end();
  tg_variable_free(pos);
}

TEST(test_variable_errors) {
  CHECK(!tg_variable_new("v", 3, 2) && strstr(tg_error(), "min"), "min > max accepted");
  tg_error_clear();
  tg_variable *v = tg_variable_new("len", -1, 4);
  CHECK_T(v);
  CHECK(tg_variable_bind(v, 5) != TG_OK && strstr(tg_error(), "len = 5") && strstr(tg_error(), "[-1, 4]"),
        "message: %s", tg_error());
  CHECK(tg_variable_value(v) == -1, "a refused bind changed the value");
  tg_error_clear();
  tg_scope_begin();
  tg_tensor *x = tg_zeros(TG_FLOAT32, 1, (int64_t[]){8});
  CHECK(!tg_shrink_at(x, 0, v, 2) && strstr(tg_error(), "negative"), "a possibly negative offset: %s", tg_error());
  tg_error_clear();
  tg_variable *p = tg_variable_new("p", 0, 7);
  CHECK(!tg_shrink_at(x, 0, p, 2) && strstr(tg_error(), "(8,)"), "window past the end: %s", tg_error());
  tg_error_clear();
  CHECK(!tg_pad_at(x, 0, p, 12) && strstr(tg_error(), "12"), "pad too small: %s", tg_error());
  tg_error_clear();
  CHECK(!tg_shrink_at(x, 3, p, 1), "axis 3 of a 1-d tensor accepted");
  tg_error_clear();
  tg_scope_end();
  tg_variable_free(p);
  tg_variable_free(v);
}

/* ---- a KV-cache attention step ---------------------------------------------------------------------- */

enum { D = 8, T = 16 };

typedef struct kv {
  tg_variable *pos;
  bool window;  /* write the caches with tg_assign_at (a kernel over the row) instead of cache + pad_at */
  tg_tensor *wq, *wk, *wv, *k, *v;  /* k, v: the caches (T, D), written in place */
} kv;

static void kv_init(kv *c, tg_variable *pos) {
  float w[3][D * D];
  for (int m = 0; m < 3; m++)
    for (int i = 0; i < D * D; i++) w[m][i] = (float)sin(1.3 * i + m) / 3;
  c->pos = pos;
  c->wq = (vec(2, (int64_t[]){D, D}, w[0]));
  c->wk = (vec(2, (int64_t[]){D, D}, w[1]));
  c->wv = (vec(2, (int64_t[]){D, D}, w[2]));
  c->k = (tg_zeros(TG_FLOAT32, 2, (int64_t[]){T, D}));
  c->v = (tg_zeros(TG_FLOAT32, 2, (int64_t[]){T, D}));
  tg_tensor *all[5] = {c->wq, c->wk, c->wv, c->k, c->v};
  tg_realize_many(5, all);
}

static void kv_free(kv *c) {
  tg_free(c->wq);
  tg_free(c->wk);
  tg_free(c->wv);
  tg_free(c->k);
  tg_free(c->v);
}

/* in: x (1, D), the token at position pos. out: attention output (1, D) over positions 0..pos, and the
 * cache row at pos read back through a window */
static tg_status kv_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  kv *c = ctx;
  tg_scope_begin();
  tg_tensor *q = tg_matmul(in[0], c->wq), *k = tg_matmul(in[0], c->wk), *v = tg_matmul(in[0], c->wv);
  tg_tensor *kn, *vn;
  tg_status st = TG_OK;
  if (c->window) {
    /* the rows first: the attention below reads the caches with them */
    st = tg_assign_at(c->k, 0, c->pos, k);
    if (st == TG_OK) st = tg_assign_at(c->v, 0, c->pos, v);
    tg_tensor *both[2] = {c->k, c->v};
    if (st == TG_OK) st = tg_realize_many(2, both);
    kn = c->k, vn = c->v;
  } else {
    kn = tg_add(c->k, tg_pad_at(k, 0, c->pos, T)), vn = tg_add(c->v, tg_pad_at(v, 0, c->pos, T));
  }
  tg_tensor *scores = tg_mul_scalar(tg_matmul(q, tg_transpose(kn, 0, 1)), 1 / sqrt(D));
  tg_tensor *seen = tg_le(tg_arange(TG_INT32, 0, T, 1), tg_variable_tensor(c->pos));
  scores = tg_where(seen, scores, tg_full(TG_FLOAT32, 2, (int64_t[]){1, T}, -INFINITY));
  out[0] = tg_keep(tg_matmul(tg_softmax(scores, 1), vn));
  out[1] = tg_keep(tg_shrink_at(kn, 0, c->pos, 1));
  if (st == TG_OK && !c->window) st = tg_assign(c->k, kn);
  if (st == TG_OK && !c->window) st = tg_assign(c->v, vn);
  tg_tensor *all[4] = {c->k, c->v, out[0], out[1]};
  if (st == TG_OK) st = tg_realize_many(4, all);
  tg_scope_end();
  return st;
}

static void kv_cache_case(bool window) {
  tg_variable *pos = tg_variable_new("pos", 0, T - 1);
  CHECK_T(pos);
  kv eager, jitted;
  kv_init(&eager, pos);
  kv_init(&jitted, pos);
  eager.window = jitted.window = window;
  tg_jit *j = tg_jit_new(kv_step, &jitted, 1, 2);
  CHECK_T(j);
  float xs[10][D], wk[D * D], wv[D * D], wq[D * D];
  CHECK(tg_to_host(eager.wq, wq, sizeof wq) == TG_OK && tg_to_host(eager.wk, wk, sizeof wk) == TG_OK &&
        tg_to_host(eager.wv, wv, sizeof wv) == TG_OK, "%s", tg_error());
  uint64_t compiled = 0;
  for (int p = 0; p < 10; p++) {
    for (int i = 0; i < D; i++) xs[p][i] = (float)cos(0.9 * i * (p + 1) + p);
    CHECK(tg_variable_bind(pos, p) == TG_OK, "%s", tg_error());
    tg_scope_begin();
    tg_tensor *x = vec(2, (int64_t[]){1, D}, xs[p]), *e[2], *o[2];
    tg_stats before = tg_get_stats();
    CHECK(tg_jit_call(j, &x, o) == TG_OK, "jit pos %d: %s", p, tg_error());
    tg_stats after = tg_get_stats();
    if (p >= 2)
      CHECK(after.schedules == before.schedules && after.kernels_compiled == before.kernels_compiled,
            "pos %d: the replay scheduled or compiled", p);
    if (p == 2) compiled = after.kernels_compiled;
    CHECK(kv_step(&eager, 1, &x, 2, e) == TG_OK, "eager pos %d: %s", p, tg_error());
    float ge[D], gj[D], row[D], ref[D];
    CHECK(tg_to_host(e[0], ge, sizeof ge) == TG_OK && tg_to_host(o[0], gj, sizeof gj) == TG_OK &&
          tg_to_host(o[1], row, sizeof row) == TG_OK, "%s", tg_error());
    CHECK(!memcmp(ge, gj, sizeof ge), "pos %d: the replay differs from the eager step", p);
    /* reference: attention of q_p over k_0..k_p */
    double q[D], s[T], m = -INFINITY, z = 0;
    for (int i = 0; i < D; i++) {
      q[i] = 0;
      for (int a = 0; a < D; a++) q[i] += xs[p][a] * wq[a * D + i];
    }
    for (int t = 0; t <= p; t++) {
      s[t] = 0;
      for (int i = 0; i < D; i++) {
        double kt = 0;
        for (int a = 0; a < D; a++) kt += xs[t][a] * wk[a * D + i];
        if (t == p) CHECK(fabs(kt - row[i]) < 1e-5, "pos %d: cache row %d is %g, want %g", p, i, row[i], kt);
        s[t] += q[i] * kt;
      }
      s[t] /= sqrt(D);
      if (s[t] > m) m = s[t];
    }
    for (int t = 0; t <= p; t++) z += exp(s[t] - m);
    for (int i = 0; i < D; i++) {
      ref[i] = 0;
      for (int t = 0; t <= p; t++) {
        double vt = 0;
        for (int a = 0; a < D; a++) vt += xs[t][a] * wv[a * D + i];
        ref[i] += (float)(exp(s[t] - m) / z * vt);
      }
    }
    CHECK_CLOSE("attention output", gj, ref, D);
    for (int k = 0; k < 2; k++) {
      tg_free(e[k]);
      tg_free(o[k]);
    }
    tg_scope_end();
  }
  CHECK(tg_get_stats().kernels_compiled == compiled, "positions after the capture compiled kernels");
  tg_jit_free(j);
  kv_free(&eager);
  kv_free(&jitted);
  tg_variable_free(pos);
}

TEST(test_kv_cache_step_replays_at_every_position) { kv_cache_case(false); }
TEST(test_kv_cache_step_with_window_writes_replays_at_every_position) { kv_cache_case(true); }

/* a window write: its kernel runs over the window only, in place; readers of the old value in the same
 * realize see the old value, readers of the new one the new; a window that reads its own target and two
 * tensors sharing one buffer fall back to whole-tensor kernels with the same values */
TEST(test_assign_at_writes_only_its_window) {
  enum { R = 6, C = 5 };
  tg_variable *pos = tg_variable_new("pos", 0, R - 2);
  CHECK_T(pos);
  float init[R * C], rows[2 * C], want[R * C], got[R * C];
  for (int i = 0; i < R * C; i++) init[i] = (float)i;
  for (int i = 0; i < 2 * C; i++) rows[i] = -1.0f - (float)i;
  tg_tensor *dst = tg_from_data(TG_FLOAT32, 2, (int64_t[]){R, C}, init, sizeof init);
  memcpy(want, init, sizeof want);
  for (int p = 0; p <= R - 2; p += 2) {
    tg_variable_bind(pos, p);
    tg_scope_begin();
    tg_tensor *src = tg_mul_scalar(tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, C}, rows, sizeof rows), p + 1);
    tg_tensor *old_sum = tg_sum(dst, 0, NULL, false);  /* built before the write: the old value */
    /* the schedule: one kernel, over the 2 x C window, writing into dst's buffer */
    CHECK(tg_assign_at(dst, 0, pos, src) == TG_OK, "%s", tg_error());
    schedule s;
    uop *target = dst->assign_target, *out = dst->u;
    CHECK(schedule_create_assign(1, &out, &target, &s) == TG_OK && s.nkernels == 1 && s.kernels[0].window_into == target,
          "p %d: %d kernels, window %p", p, s.nkernels, (void *)s.kernels[0].window_into);
    schedule_free(&s);
    tg_tensor *new_sum = tg_sum(dst, 0, NULL, false);
    double old_want = 0, new_want = 0;
    for (int i = 0; i < R * C; i++) old_want += want[i];
    for (int r = 0; r < 2; r++)
      for (int c = 0; c < C; c++) want[(p + r) * C + c] = rows[r * C + c] * (float)(p + 1);
    for (int i = 0; i < R * C; i++) new_want += want[i];
    tg_tensor *all[3] = {dst, old_sum, new_sum};
    CHECK(tg_realize_many(3, all) == TG_OK && tg_to_host(dst, got, sizeof got) == TG_OK, "%s", tg_error());
    CHECK(!memcmp(got, want, sizeof got), "p %d: the window write differs", p);
    CHECK(tg_item(old_sum) == old_want && tg_item(new_sum) == new_want, "p %d: sums %g %g, want %g %g", p,
          tg_item(old_sum), tg_item(new_sum), old_want, new_want);
    tg_scope_end();
  }
  /* src reading the target itself: rows 0..1 copied to the window */
  tg_variable_bind(pos, 3);
  tg_scope_begin();
  CHECK(tg_assign_at(dst, 0, pos, tg_shrink(dst, 2, (int64_t[]){0, 2, 0, C})) == TG_OK && tg_realize(dst) == TG_OK,
        "%s", tg_error());
  memcpy(want + 3 * C, want, 2 * C * sizeof *want);
  CHECK(tg_to_host(dst, got, sizeof got) == TG_OK && !memcmp(got, want, sizeof got), "self-reading window differs");
  tg_scope_end();
  /* two tensors made alike share one buffer: writing one leaves the other */
  tg_tensor *a = tg_zeros(TG_FLOAT32, 2, (int64_t[]){R, C}), *b = tg_zeros(TG_FLOAT32, 2, (int64_t[]){R, C});
  tg_tensor *ab[2] = {a, b};
  CHECK(tg_realize_many(2, ab) == TG_OK, "%s", tg_error());
  tg_scope_begin();
  CHECK(tg_assign_at(a, 0, pos, tg_full(TG_FLOAT32, 2, (int64_t[]){2, C}, 7)) == TG_OK && tg_realize(a) == TG_OK, "%s",
        tg_error());
  tg_scope_end();
  CHECK(tg_item(tg_sum(a, 0, NULL, false)) == 70 && tg_item(tg_sum(b, 0, NULL, false)) == 0,
        "a write into one of two alike tensors changed the other (sums %g, %g)", tg_item(tg_sum(a, 0, NULL, false)),
        tg_item(tg_sum(b, 0, NULL, false)));
  tg_free(a);
  tg_free(b);
  tg_free(dst);
  tg_variable_free(pos);
}
