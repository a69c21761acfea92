/* test_schedule_cache.c — schedules reused by graph structure (src/engine/schedule_cache.c): a graph built
 * again over other buffers takes the cached schedule and computes its own values (checked against plain C);
 * graphs that differ in shape, op, dtype, which leaves they read or what they are assigned into do not; in-place
 * assign loops, an eager training step and random numbers stay right. */
#include <stdlib.h>

#include "test.h"
#include "uop/uop.h"

static uint64_t xs = 0x9e3779b97f4a7c15ULL;
static float frand(void) {
  xs ^= xs << 13; xs ^= xs >> 7; xs ^= xs << 17;
  return (float)((xs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static tg_tensor *rand_t(int64_t r, int64_t c, float *out) {
  for (int64_t i = 0; i < r * c; i++) out[i] = frand();
  return tg_from_data(TG_FLOAT32, 2, (int64_t[]){r, c}, out, (size_t)(r * c) * sizeof *out);
}

static uint64_t cached(void) { return tg_get_stats().schedules_cached; }

/* sum(relu(a * b + a), axis 1) and a max beside it: two outputs, a reduce and an elementwise chain */
static void f_ref(const float *a, const float *b, int64_t r, int64_t c, float *sum, float *mx) {
  for (int64_t i = 0; i < r; i++) {
    double s = 0;
    float m = -1e30f;
    for (int64_t j = 0; j < c; j++) {
      float v = a[i * c + j] * b[i * c + j] + a[i * c + j];
      s += v > 0 ? v : 0;
      if (b[i * c + j] > m) m = b[i * c + j];
    }
    sum[i] = (float)s;
    mx[i] = m;
  }
}

/* realizes f(a, b) on fresh data (b = a when same) and checks it; returns whether the schedule was cached */
static bool run_f(int64_t r, int64_t c, bool same) {
  tg_scope_begin();
  float *ha = malloc((size_t)(r * c) * sizeof *ha), *hb = malloc((size_t)(r * c) * sizeof *hb);
  float *s = malloc((size_t)r * sizeof *s), *m = malloc((size_t)r * sizeof *m);
  float *ws = malloc((size_t)r * sizeof *ws), *wm = malloc((size_t)r * sizeof *wm);
  tg_tensor *a = rand_t(r, c, ha), *b = same ? a : rand_t(r, c, hb);
  if (same) memcpy(hb, ha, (size_t)(r * c) * sizeof *ha);
  tg_tensor *out[2] = {tg_sum(tg_relu(tg_add(tg_mul(a, b), a)), 1, (int[]){1}, false),
                       tg_max(b, 1, (int[]){1}, false)};
  uint64_t c0 = cached();
  CHECK(tg_realize_many(2, out) == TG_OK, "%s", tg_error());
  bool hit = cached() > c0;
  f_ref(ha, hb, r, c, ws, wm);
  CHECK(tg_to_host(out[0], s, (size_t)r * sizeof *s) == TG_OK, "%s", tg_error());
  CHECK(tg_to_host(out[1], m, (size_t)r * sizeof *m) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("sum", s, ws, r);
  CHECK_CLOSE("max", m, wm, r);
  free(ha); free(hb); free(s); free(m); free(ws); free(wm);
  tg_scope_end();
  return hit;
}

TEST(test_schedule_cache_same_structure_hits_with_new_buffers) {
  run_f(7, 33, false);
  for (int i = 0; i < 3; i++)
    CHECK(run_f(7, 33, false), "round %d: the same graph over new buffers was scheduled again", i);
}

TEST(test_schedule_cache_other_structures_miss) {
  run_f(5, 17, false);
  CHECK(run_f(5, 17, false), "the same structure missed");
  CHECK(!run_f(5, 18, false), "another shape hit");
  CHECK(!run_f(5, 17, true), "one leaf read twice hit the graph of two leaves");
  CHECK(run_f(5, 17, true), "one leaf read twice, again, missed");
  tg_scope_begin();
  float h[6] = {1, -2, 3, -4, 5, -6}, got[6];
  for (int op = 0; op < 2; op++)
    for (int round = 0; round < 2; round++) {
      tg_tensor *a = tg_from_data(TG_FLOAT32, 1, (int64_t[]){6}, h, sizeof h);
      tg_tensor *y = op ? tg_mul(a, a) : tg_add(a, a);
      uint64_t c0 = cached();
      CHECK(tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
      CHECK((cached() > c0) == (round == 1), "op %d round %d: hit %d", op, round, (int)(cached() > c0));
      for (int i = 0; i < 6; i++) CHECK(got[i] == (op ? h[i] * h[i] : h[i] + h[i]), "op %d [%d] = %g", op, i, got[i]);
    }
  /* another dtype: int32 a + a after float32 a + a */
  int32_t hi[6] = {1, -2, 3, -4, 5, -6}, gi[6];
  tg_tensor *ai = tg_from_data(TG_INT32, 1, (int64_t[]){6}, hi, sizeof hi);
  uint64_t c0 = cached();
  CHECK(tg_to_host(tg_add(ai, ai), gi, sizeof gi) == TG_OK, "%s", tg_error());
  CHECK(cached() == c0, "an int32 graph hit a float32 one");
  for (int i = 0; i < 6; i++) CHECK(gi[i] == 2 * hi[i], "[%d] = %d", i, gi[i]);
  tg_scope_end();
}

/* an elementwise graph over one leaf takes its shape from the leaf alone (no reshape or reduce names it): a
 * float[1] leaf's schedule must not serve a float[2] one (it did: its kernel and a buffer of the first size) */
TEST(test_schedule_cache_leaf_shape_misses) {
  tg_scope_begin();
  const float h[3] = {1.5f, -2, 3};
  const int64_t sizes[] = {1, 2, 3, 1, 3};
  for (int k = 0; k < 5; k++) {
    tg_tensor *a = tg_from_data(TG_FLOAT32, 1, &sizes[k], h, (size_t)sizes[k] * sizeof *h);
    double got[3] = {0};
    uint64_t c0 = cached();
    CHECK(tg_to_host(tg_cast(a, TG_FLOAT64), got, (size_t)sizes[k] * sizeof *got) == TG_OK, "size %lld: %s",
          (long long)sizes[k], tg_error());
    CHECK((cached() > c0) == (k >= 3), "size %lld (round %d): hit %d", (long long)sizes[k], k, (int)(cached() > c0));
    for (int64_t i = 0; i < sizes[k]; i++)
      CHECK(got[i] == h[i], "size %lld [%lld] = %g", (long long)sizes[k], (long long)i, got[i]);
  }
  tg_scope_end();
}

/* x = x + 1 repeated, in place; then x assigned into another target of the same shape */
TEST(test_schedule_cache_assign_loops) {
  tg_scope_begin();
  float h[8] = {0, 1, 2, 3, 4, 5, 6, 7}, got[8];
  tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){8}, h, sizeof h);
  tg_tensor *y = tg_from_data(TG_FLOAT32, 1, (int64_t[]){8}, h, sizeof h);
  CHECK(tg_realize(x) == TG_OK && tg_realize(y) == TG_OK, "%s", tg_error());
  tg_tensor *one = tg_full(TG_FLOAT32, 1, (int64_t[]){8}, 1.0);
  uint64_t c0 = cached();
  for (int i = 0; i < 5; i++) {
    tg_scope_begin();
    CHECK(tg_assign(x, tg_add(x, one)) == TG_OK && tg_realize(x) == TG_OK, "%s", tg_error());
    tg_scope_end();
  }
  CHECK(cached() - c0 >= 3, "x = x + 1 was scheduled anew %d times of 5", (int)(5 - (cached() - c0)));
  /* x + 1 realized as a new tensor is the same value graph with no assign target: not the same schedule */
  c0 = cached();
  tg_tensor *z = tg_add(x, one);
  CHECK(tg_realize(z) == TG_OK, "%s", tg_error());
  CHECK(cached() == c0, "a value without an assign target took the in-place assign's schedule");
  CHECK(tg_to_host(x, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 8; i++) CHECK(got[i] == h[i] + 5, "x[%d] = %g", i, got[i]);
  CHECK(tg_to_host(z, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 8; i++) CHECK(got[i] == h[i] + 6, "z[%d] = %g", i, got[i]);
  /* y = y * 2 + x: the same shapes, another target; then x's own update keeps working */
  for (int i = 0; i < 3; i++) {
    tg_scope_begin();
    CHECK(tg_assign(y, tg_add(tg_mul(y, tg_full(TG_FLOAT32, 1, (int64_t[]){8}, 2.0)), x)) == TG_OK &&
          tg_realize(y) == TG_OK, "%s", tg_error());
    CHECK(tg_assign(x, tg_add(x, one)) == TG_OK && tg_realize(x) == TG_OK, "%s", tg_error());
    tg_scope_end();
  }
  float wy[8], wx[8];
  for (int i = 0; i < 8; i++) {
    wx[i] = h[i] + 5;
    wy[i] = h[i];
    for (int k = 0; k < 3; k++) { wy[i] = wy[i] * 2 + wx[i]; wx[i] += 1; }
  }
  CHECK(tg_to_host(x, got, sizeof got) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("x", got, wx, 8);
  CHECK(tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("y", got, wy, 8);
  tg_scope_end();
}

/* three eager SGD steps of a linear layer (loss mean((x w + b - y)^2)) against plain C */
TEST(test_schedule_cache_eager_training_steps) {
  enum { N = 5, I = 4, O = 3, STEPS = 3 };
  float hx[N * I], hy[N * O], hw[I * O], hb[O];
  tg_scope_begin();
  tg_tensor *x = rand_t(N, I, hx), *y = rand_t(N, O, hy);
  tg_tensor *w = tg_set_requires_grad(rand_t(I, O, hw), true);
  for (int i = 0; i < O; i++) hb[i] = frand();
  tg_tensor *b = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 1, (int64_t[]){O}, hb, sizeof hb), true);
  tg_params *p = tg_params_new();
  CHECK(tg_params_add(p, "w", w) == TG_OK && tg_params_add(p, "b", b) == TG_OK, "%s", tg_error());
  tg_optim *o = tg_sgd_new(p, (tg_sgd_opts){.lr = 0.1});
  CHECK_T(o);
  uint64_t c0 = cached();
  float losses[STEPS], want[STEPS];
  for (int step = 0; step < STEPS; step++) {
    tg_scope_begin();
    tg_tensor *d = tg_sub(tg_add(tg_matmul(x, w), b), y);
    tg_tensor *loss = tg_mean(tg_mul(d, d), 0, NULL, false);
    CHECK(tg_backward(loss) == TG_OK && tg_optim_step(o, 1, &loss) == TG_OK, "%s", tg_error());
    losses[step] = (float)tg_item(loss);
    tg_scope_end();
    /* the reference step */
    float dd[N * O], gw[I * O] = {0}, gb[O] = {0};
    double l = 0;
    for (int n = 0; n < N; n++)
      for (int j = 0; j < O; j++) {
        double v = hb[j] - hy[n * O + j];
        for (int k = 0; k < I; k++) v += (double)hx[n * I + k] * hw[k * O + j];
        dd[n * O + j] = (float)(2 * v / (N * O));
        l += v * v;
      }
    want[step] = (float)(l / (N * O));
    for (int n = 0; n < N; n++)
      for (int j = 0; j < O; j++) {
        gb[j] += dd[n * O + j];
        for (int k = 0; k < I; k++) gw[k * O + j] += hx[n * I + k] * dd[n * O + j];
      }
    for (int i = 0; i < I * O; i++) hw[i] -= 0.1f * gw[i];
    for (int j = 0; j < O; j++) hb[j] -= 0.1f * gb[j];
  }
  CHECK(cached() > c0, "no step took a cached schedule");
  CHECK_CLOSE("losses", losses, want, STEPS);
  float gw[I * O], gb[O];
  CHECK(tg_to_host(w, gw, sizeof gw) == TG_OK && tg_to_host(b, gb, sizeof gb) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("w", gw, hw, I * O);
  CHECK_CLOSE("b", gb, hb, O);
  tg_optim_free(o);
  tg_params_free(p);
  tg_scope_end();
}

TEST(test_schedule_cache_random_stays_fresh) {
  tg_scope_begin();
  float r[3][64];
  for (int i = 0; i < 3; i++) {
    tg_tensor *t = tg_mul(tg_rand(TG_FLOAT32, 1, (int64_t[]){64}), tg_full(TG_FLOAT32, 1, (int64_t[]){64}, 2.0));
    CHECK(tg_to_host(t, r[i], sizeof r[i]) == TG_OK, "%s", tg_error());
  }
  for (int i = 1; i < 3; i++) {
    int same = 0;
    for (int k = 0; k < 64; k++) same += r[i][k] == r[0][k];
    CHECK(same < 4, "call %d repeated %d of 64 numbers of call 0", i, same);
    for (int k = 0; k < 64; k++) CHECK(r[i][k] >= 0 && r[i][k] < 2, "r[%d][%d] = %g", i, k, r[i][k]);
  }
  tg_scope_end();
}

/* a value realized before is a leaf of the graphs built on it: a*b realized, then a*b + 1 reads it; over new
 * a, b (a*b not realized) the graph computes the product itself and is another structure */
TEST(test_schedule_cache_realized_values_are_leaves) {
  tg_scope_begin();
  float ha[12], hb[12], got[12];
  for (int round = 0; round < 3; round++) {
    tg_tensor *a = rand_t(3, 4, ha), *b = rand_t(3, 4, hb);
    if (round == 0) CHECK(tg_realize(tg_mul(a, b)) == TG_OK, "%s", tg_error());  /* cached on the a*b node */
    tg_tensor *y = tg_add(tg_mul(a, b), tg_full(TG_FLOAT32, 2, (int64_t[]){3, 4}, 1.0));
    uint64_t c0 = cached();
    CHECK(tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
    if (round == 1) CHECK(cached() == c0, "a graph computing a*b took the schedule of one reading it");
    if (round == 2) CHECK(cached() > c0, "the same graph again missed");
    for (int i = 0; i < 12; i++)
      CHECK(fabsf(got[i] - (ha[i] * hb[i] + 1)) < 1e-6f, "round %d [%d] = %g", round, i, got[i]);
  }
  tg_scope_end();
}

static tg_status step_fn(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  tg_tensor *two = tg_full(TG_FLOAT32, 1, (int64_t[]){16}, 2.0);
  out[0] = tg_sum(tg_relu(tg_sub(tg_mul(in[0], two), in[1])), 0, NULL, false);
  return out[0] ? TG_OK : tg_error_status();
}

/* a step run eagerly first (its schedule cached), then captured by tg_jit: the capture sees every kernel */
TEST(test_schedule_cache_then_jit_capture) {
  tg_scope_begin();
  tg_jit *j = tg_jit_new(step_fn, NULL, 2, 1);
  CHECK(j != NULL, "%s", tg_error());
  for (int call = 0; call < 6; call++) {
    float hx[16], hy[16], got;
    tg_tensor *in[2];
    for (int i = 0; i < 16; i++) { hx[i] = frand(); hy[i] = frand(); }
    in[0] = tg_from_data(TG_FLOAT32, 1, (int64_t[]){16}, hx, sizeof hx);
    in[1] = tg_from_data(TG_FLOAT32, 1, (int64_t[]){16}, hy, sizeof hy);
    tg_tensor *out = NULL;
    tg_status st = call < 2 ? step_fn(NULL, 2, in, 1, &out) : tg_jit_call(j, in, &out);
    CHECK(st == TG_OK && tg_to_host(out, &got, sizeof got) == TG_OK, "call %d: %s", call, tg_error());
    double want = 0;
    for (int i = 0; i < 16; i++) want += hx[i] * 2 - hy[i] > 0 ? hx[i] * 2 - hy[i] : 0;
    CHECK(fabs(got - want) < 1e-5, "call %d: %g, want %g", call, got, want);
  }
  CHECK(tg_jit_kernels(j) >= 1, "the capture saw %d kernels", tg_jit_kernels(j));
  tg_jit_free(j);
  tg_scope_end();
}

/* leaves that differ only in their own shape (1-d buffers read directly, no reshape above them to tell the
 * sizes apart) are other structures: a + b over 7 elements after the same over 1 took the (1,) schedule and
 * wrote 28 bytes into a 4-byte buffer before the stand-ins carried their shapes */
TEST(test_schedule_cache_leaf_shapes_are_part_of_the_key) {
  static const int64_t sizes[] = {1, 7, 7, 13};
  for (int i = 0; i < 4; i++) {
    tg_scope_begin();
    float ha[13], hb[13], got[13];
    for (int64_t k = 0; k < sizes[i]; k++) ha[k] = frand(), hb[k] = frand();
    tg_tensor *a = tg_from_data(TG_FLOAT32, 1, &sizes[i], ha, (size_t)sizes[i] * sizeof *ha);
    tg_tensor *b = tg_from_data(TG_FLOAT32, 1, &sizes[i], hb, (size_t)sizes[i] * sizeof *hb);
    uint64_t c0 = cached();
    CHECK(tg_to_host(tg_add(a, b), got, (size_t)sizes[i] * sizeof *got) == TG_OK, "size %lld: %s",
          (long long)sizes[i], tg_error());
    CHECK((cached() > c0) == (i == 2), "size %lld (round %d): hit %d", (long long)sizes[i], i, (int)(cached() > c0));
    for (int64_t k = 0; k < sizes[i]; k++) CHECK(got[k] == ha[k] + hb[k], "size %lld [%lld]", (long long)sizes[i], (long long)k);
    tg_scope_end();
  }
}

/* a value computed from no buffer at all (arange + 1) is the same node in the cache's canonical graph as in the
 * caller's: the entry must not keep the buffer realized on it once the caller's tensors are gone */
TEST(test_schedule_cache_keeps_no_realized_buffer) {
  tg_memory_info m0, m1;
  uop_gc();
  CHECK(tg_memory(NULL, &m0) == TG_OK, "memory: %s", tg_error());
  const int64_t n = 1 << 18;
  float *h = malloc((size_t)n * sizeof *h);
  for (int i = 0; i < 3; i++) {
    tg_tensor *t = tg_contiguous(tg_add_scalar(tg_arange(TG_FLOAT32, 0, (double)n, 1), 1.0 + i));
    CHECK(t && tg_realize(t) == TG_OK && tg_to_host(t, h, (size_t)n * sizeof *h) == TG_OK, "realize: %s",
          tg_error());
    CHECK(h[5] == 6.0f + (float)i && h[n - 1] == (float)n + (float)i, "values %g %g", h[5], h[n - 1]);
    tg_free(t);
  }
  free(h);
  uop_gc();  /* not tg_collect, which empties the schedule cache */
  CHECK(tg_memory(NULL, &m1) == TG_OK, "memory: %s", tg_error());
  CHECK(m1.in_use <= m0.in_use, "%zu bytes in use after, %zu before: a freed value's buffer is kept", m1.in_use,
        m0.in_use);
}

/* tensors that already read buffers of their own realize without scheduling anything (engine/realize.c
 * returns before the cache walk), with their values kept; one with an assign pending, or a view that is not
 * the whole buffer, still runs its kernel */
TEST(test_schedule_cache_stored_tensors_realize_without_kernels) {
  tg_scope_begin();
  float ha[12], hb[12], got[12], want[12];
  tg_tensor *a = rand_t(3, 4, ha), *b = rand_t(3, 4, hb);
  tg_tensor *y = tg_add(a, b);
  CHECK(tg_realize(y) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 1, "the sum took %llu kernels", (unsigned long long)tg_kernel_count_last());
  uint64_t s0 = tg_get_stats().schedules, k0 = tg_get_stats().kernels_run;
  tg_tensor *all[3] = {a, b, y};
  CHECK(tg_realize_many(3, all) == TG_OK, "%s", tg_error());
  CHECK(tg_get_stats().schedules == s0 && tg_get_stats().kernels_run == k0,
        "stored tensors scheduled %llu times and ran %llu kernels",
        (unsigned long long)(tg_get_stats().schedules - s0), (unsigned long long)(tg_get_stats().kernels_run - k0));
  for (int i = 0; i < 12; i++) want[i] = ha[i] + hb[i];
  CHECK(tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("a + b realized again", got, want, 12);
  /* a column: a view of part of the buffer, computed by a kernel */
  tg_tensor *col = tg_shrink(y, 2, (int64_t[]){0, 3, 1, 2});
  CHECK(tg_realize(col) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 1, "a column of a stored tensor took %llu kernels",
        (unsigned long long)tg_kernel_count_last());
  float gc[3], wc[3] = {want[1], want[5], want[9]};
  CHECK(tg_to_host(col, gc, sizeof gc) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("column", gc, wc, 3);
  /* a stored tensor with an assign pending */
  CHECK(tg_assign(y, tg_mul(a, b)) == TG_OK, "%s", tg_error());
  CHECK(tg_realize(y) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 1, "the assign took %llu kernels", (unsigned long long)tg_kernel_count_last());
  for (int i = 0; i < 12; i++) want[i] = ha[i] * hb[i];
  CHECK(tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("y assigned a * b", got, want, 12);
  tg_scope_end();
}
