/* test_ties.c — gradients where the inputs tie, as tinygrad's: a max/min reduction over any axes shares the
 * gradient equally among the elements equal to the result; maximum/minimum give 0.5 to each side of a tie;
 * max_pool2d shares within each (overlapping) window; cummax/cummin share each running max among the equal
 * elements before it (tinygrad's pooled max; PyTorch routes to one index); sort and topk route each value to
 * the element it came from, equal values in index order (documented in tg.h; PyTorch's stable sort). Inputs
 * are small integers so ties are everywhere; the loss is sum(f(x) * w) with a random w. References in plain C. */
#include <stdlib.h>

#include "test.h"

static uint64_t rs = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void) {
  rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
  return (uint32_t)(rs >> 32);
}
static void fill_ints(float *v, int n, int k) { for (int i = 0; i < n; i++) v[i] = (float)(rnd() % (unsigned)k); }
static void fill_w(float *v, int n) { for (int i = 0; i < n; i++) v[i] = (float)(rnd() % 1000) / 100.0f - 5.0f; }

typedef tg_tensor *(*un_fn)(tg_tensor *x);

/* d/dx sum(f(x) * w) into g (nx floats); w has f(x)'s numel (nw); false with a failure reported */
static bool grad_of(tg_tensor *x, tg_tensor *y, const float *w, int64_t nw, float *g, int64_t nx, const char *what,
                    const char *file, int line) {
  tg_tensor *gx = NULL;
  if (!y || tg_numel(y) != nw) {
    test_fail(file, line, "%s: no result of %lld elements: %s", what, (long long)nw, tg_error());
    return false;
  }
  tg_tensor *tw = tg_from_data(TG_FLOAT32, tg_ndim(y), tg_shape_ptr(y), w, (size_t)nw * 4);
  if (tg_gradient(tg_sum(tg_mul(y, tw), 0, NULL, false), 1, &x, &gx) != TG_OK || tg_to_host(gx, g, (size_t)nx * 4) != TG_OK) {
    test_fail(file, line, "%s: gradient: %s", what, tg_error());
    return false;
  }
  return true;
}
#define GRAD(x, y, w, nw, g, nx, what) grad_of(x, y, w, nw, g, nx, what, __FILE__, __LINE__)
#define CLOSE(what, got, want, n) check_close_f32(what, got, want, n, 1e-5, 1e-5, __FILE__, __LINE__)

/* ---- max/min reductions over every set of axes of a (3, 4, 5) tensor --------------------------------- */

TEST(test_ties_max_min_reduce_share_equally) {
  enum { A = 3, B = 4, C = 5, N = A * B * C };
  const int64_t sh[3] = {A, B, C};
  float x[N], w[N], g[N], want[N];
  for (int mask = 1; mask < 8; mask++)
    for (int is_min = 0; is_min < 2; is_min++) {
      tg_scope_begin();
      fill_ints(x, N, 3);
      fill_w(w, N);
      int axes[3], na = 0;
      for (int d = 0; d < 3; d++)
        if (mask >> d & 1) axes[na++] = d;
      tg_tensor *tx = tg_from_data(TG_FLOAT32, 3, sh, x, sizeof x);
      tg_tensor *y = is_min ? tg_min(tx, na, axes, true) : tg_max(tx, na, axes, true);
      int64_t no = y ? tg_numel(y) : 0;
      char what[64];
      snprintf(what, sizeof what, "%s over axes mask %d", is_min ? "min" : "max", mask);
      if (GRAD(tx, y, w, no, g, N, what)) {
        /* the reference: per kept index, the extreme over the reduced ones and their count */
        int os[3] = {mask & 1 ? 1 : A, mask & 2 ? 1 : B, mask & 4 ? 1 : C};
        for (int i = 0; i < N; i++) {
          int i0 = i / (B * C), i1 = i / C % B, i2 = i % C;
          int o = (mask & 1 ? 0 : i0) * os[1] * os[2] + (mask & 2 ? 0 : i1) * os[2] + (mask & 4 ? 0 : i2);
          float ext = x[i];
          int cnt = 0;
          for (int j = 0; j < N; j++) {
            int j0 = j / (B * C), j1 = j / C % B, j2 = j % C;
            if ((!(mask & 1) && j0 != i0) || (!(mask & 2) && j1 != i1) || (!(mask & 4) && j2 != i2)) continue;
            if (is_min ? x[j] < ext : x[j] > ext) ext = x[j];
          }
          for (int j = 0; j < N; j++) {
            int j0 = j / (B * C), j1 = j / C % B, j2 = j % C;
            if ((!(mask & 1) && j0 != i0) || (!(mask & 2) && j1 != i1) || (!(mask & 4) && j2 != i2)) continue;
            cnt += x[j] == ext;
          }
          want[i] = x[i] == ext ? w[o] / (float)cnt : 0;
        }
        CLOSE(what, g, want, N);
      }
      tg_scope_end();
    }
}

/* ---- maximum/minimum, broadcast, against a scalar ------------------------------------------------- */

TEST(test_ties_maximum_minimum_half_each_side) {
  enum { R = 4, C = 6 };
  float a[R * C], b[C], w[R * C], ga[R * C], gb[C], wa[R * C], wb[C];
  fill_ints(a, R * C, 3);
  fill_ints(b, C, 3);
  fill_w(w, R * C);
  for (int is_min = 0; is_min < 2; is_min++) {
    tg_scope_begin();
    tg_tensor *ta = tg_from_data(TG_FLOAT32, 2, (int64_t[]){R, C}, a, sizeof a);
    tg_tensor *tb = tg_from_data(TG_FLOAT32, 2, (int64_t[]){1, C}, b, sizeof b);
    tg_tensor *y = is_min ? tg_minimum(ta, tb) : tg_maximum(ta, tb), *g[2] = {0};
    tg_tensor *tw = tg_from_data(TG_FLOAT32, 2, (int64_t[]){R, C}, w, sizeof w);
    bool ok = y && tg_gradient(tg_sum(tg_mul(y, tw), 0, NULL, false), 2, (tg_tensor *[]){ta, tb}, g) == TG_OK &&
              tg_to_host(g[0], ga, sizeof ga) == TG_OK && tg_to_host(g[1], gb, sizeof gb) == TG_OK;
    CHECK(ok, "maximum/minimum gradient: %s", tg_error());
    for (int j = 0; j < C; j++) wb[j] = 0;
    for (int i = 0; i < R * C; i++) {
      float x = a[i], z = b[i % C];
      float sa = x == z ? 0.5f : (is_min ? x < z : x > z) ? 1 : 0;
      wa[i] = w[i] * sa;
      wb[i % C] += w[i] * (1 - sa);
    }
    if (ok) {
      CLOSE(is_min ? "d/da minimum" : "d/da maximum", ga, wa, R * C);
      CLOSE(is_min ? "d/db minimum (summed over the broadcast)" : "d/db maximum (summed over the broadcast)", gb, wb, C);
    }
    /* against a scalar: x == v takes half */
    float gs[R * C], ws[R * C];
    tg_tensor *ys = is_min ? tg_minimum_scalar(ta, 1) : tg_maximum_scalar(ta, 1);
    if (GRAD(ta, ys, w, R * C, gs, R * C, "maximum_scalar")) {
      for (int i = 0; i < R * C; i++) ws[i] = w[i] * (a[i] == 1 ? 0.5f : (is_min ? a[i] < 1 : a[i] > 1) ? 1 : 0);
      CLOSE(is_min ? "d minimum_scalar(1)" : "d maximum_scalar(1)", gs, ws, R * C);
    }
    tg_scope_end();
  }
}

/* ---- max_pool2d: overlapping windows, ties shared in each ------------------------------------------- */

TEST(test_ties_max_pool2d_shares_in_each_window) {
  enum { H = 5, W = 6 };
  float x[2 * H * W], g[2 * H * W], want[2 * H * W];
  fill_ints(x, 2 * H * W, 2);
  int ks[2][2] = {{2, 1}, {3, 2}};  /* (kernel, stride): overlapping, then strided */
  for (int c = 0; c < 2; c++) {
    tg_scope_begin();
    int k = ks[c][0], s = ks[c][1], oh = (H - k) / s + 1, ow = (W - k) / s + 1;
    float w[2 * H * W];
    fill_w(w, 2 * oh * ow);
    tg_tensor *tx = tg_from_data(TG_FLOAT32, 4, (int64_t[]){2, 1, H, W}, x, sizeof x);
    tg_pool_opts o = tg_pool_defaults();
    o.kernel = TG_INTS(k);
    o.stride = TG_INTS(s);
    if (GRAD(tx, tg_max_pool2d(tx, o), w, 2 * oh * ow, g, 2 * H * W, "max_pool2d")) {
      for (int i = 0; i < 2 * H * W; i++) want[i] = 0;
      for (int n = 0; n < 2; n++)
        for (int p = 0; p < oh; p++)
          for (int q = 0; q < ow; q++) {
            const float *xn = x + n * H * W;
            float m = -INFINITY;
            int cnt = 0;
            for (int i = 0; i < k; i++)
              for (int j = 0; j < k; j++) m = fmaxf(m, xn[(p * s + i) * W + q * s + j]);
            for (int i = 0; i < k; i++)
              for (int j = 0; j < k; j++) cnt += xn[(p * s + i) * W + q * s + j] == m;
            for (int i = 0; i < k; i++)
              for (int j = 0; j < k; j++)
                if (xn[(p * s + i) * W + q * s + j] == m) want[n * H * W + (p * s + i) * W + q * s + j] += w[(n * oh + p) * ow + q] / (float)cnt;
          }
      CLOSE(c ? "d max_pool2d k3 s2" : "d max_pool2d k2 s1", g, want, 2 * H * W);
    }
    tg_scope_end();
  }
}

/* ---- cummax/cummin: each running extreme shared among the equal elements up to it -------------------- */

TEST(test_ties_cummax_cummin_share_the_running_extreme) {
  enum { R = 3, N = 9 };
  float x[R * N], w[R * N], g[R * N], want[R * N];
  fill_ints(x, R * N, 3);
  fill_w(w, R * N);
  for (int is_min = 0; is_min < 2; is_min++) {
    tg_scope_begin();
    tg_tensor *tx = tg_from_data(TG_FLOAT32, 2, (int64_t[]){R, N}, x, sizeof x), *v = NULL;
    CHECK((is_min ? tg_cummin : tg_cummax)(tx, -1, &v, NULL) == TG_OK, "cummax: %s", tg_error());
    if (GRAD(tx, v, w, R * N, g, R * N, "cummax")) {
      for (int i = 0; i < R * N; i++) want[i] = 0;
      for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) {
          const float *xr = x + r * N;
          float m = xr[0];
          int cnt = 0;
          for (int j = 0; j <= i; j++) m = is_min ? fminf(m, xr[j]) : fmaxf(m, xr[j]);
          for (int j = 0; j <= i; j++) cnt += xr[j] == m;
          for (int j = 0; j <= i; j++)
            if (xr[j] == m) want[r * N + j] += w[r * N + i] / (float)cnt;
        }
      CLOSE(is_min ? "d cummin" : "d cummax", g, want, R * N);
    }
    tg_scope_end();
  }
}

/* ---- sort and topk: each value's gradient to the element it came from, equal ones in index order ------ */

/* the stable order of row x (n) into idx */
static void stable_order(const float *x, int n, bool desc, int *idx) {
  for (int i = 0; i < n; i++) idx[i] = i;
  for (int i = 1; i < n; i++)  /* insertion sort: stable */
    for (int j = i; j > 0 && (desc ? x[idx[j]] > x[idx[j - 1]] : x[idx[j]] < x[idx[j - 1]]); j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
}

TEST(test_ties_sort_topk_route_to_the_source) {
  enum { R = 3, N = 7, K = 4 };
  float x[R * N], w[R * N], g[R * N], want[R * N];
  fill_ints(x, R * N, 3);
  fill_w(w, R * N);
  for (int desc = 0; desc < 2; desc++) {
    tg_scope_begin();
    tg_tensor *tx = tg_from_data(TG_FLOAT32, 2, (int64_t[]){R, N}, x, sizeof x), *v = NULL, *tv = NULL;
    CHECK(tg_sort(tx, -1, desc, &v, NULL) == TG_OK, "sort: %s", tg_error());
    int idx[N];
    if (GRAD(tx, v, w, R * N, g, R * N, "sort")) {
      for (int r = 0; r < R; r++) {
        stable_order(x + r * N, N, desc, idx);
        for (int k = 0; k < N; k++) want[r * N + idx[k]] = w[r * N + k];
      }
      CLOSE(desc ? "d sort descending" : "d sort", g, want, R * N);
    }
    CHECK(tg_topk(tx, K, -1, desc, true, &tv, NULL) == TG_OK, "topk: %s", tg_error());
    if (GRAD(tx, tv, w, R * K, g, R * N, "topk")) {
      for (int i = 0; i < R * N; i++) want[i] = 0;
      for (int r = 0; r < R; r++) {
        stable_order(x + r * N, N, desc, idx);
        for (int k = 0; k < K; k++) want[r * N + idx[k]] = w[r * K + k];
      }
      CLOSE(desc ? "d topk largest" : "d topk smallest", g, want, R * N);
    }
    tg_scope_end();
  }
}

/* ---- activations at their kinks (the ones test_edges.c leaves out) -------------------------------- */

static tg_tensor *f_hardtanh(tg_tensor *x) { return tg_hardtanh(x, -1, 1); }
static tg_tensor *f_clip(tg_tensor *x) { return tg_clip(x, 0, 1); }
static tg_tensor *f_celu(tg_tensor *x) { return tg_celu(x, 1); }
static tg_tensor *f_selu(tg_tensor *x) { return tg_selu(x); }
static tg_tensor *f_softsign(tg_tensor *x) { return tg_softsign(x); }

TEST(test_ties_activation_gradients_at_kinks) {
  float x[] = {-2, -1, 0, 1, 2}, g[5], ones[5] = {1, 1, 1, 1, 1};
  const double ga = 1.0507009873554805, al = 1.6732632423543772;
  struct { const char *name; un_fn f; float want[5]; } cs[] = {
      /* tinygrad's clip: (x < lo).where(lo, x), then (r > hi).where(hi, r): 1 at both bounds (PyTorch too) */
      {"hardtanh(-1, 1)", f_hardtanh, {0, 1, 1, 1, 0}},
      {"clip(0, 1)", f_clip, {0, 0, 1, 1, 0}},
      /* tinygrad's celu: maximum(x, 0) + minimum(alpha (e^(x/alpha) - 1), 0): 0.5 + 0.5 at 0 */
      {"celu", f_celu, {(float)exp(-2), (float)exp(-1), 1, 1, 1}},
      /* (x >= 0).where(x, ...): gamma at 0 */
      {"selu", f_selu, {(float)(ga * al * exp(-2)), (float)(ga * al * exp(-1)), (float)ga, (float)ga, (float)ga}},
      {"softsign", f_softsign, {1 / 9.f, 0.25f, 1, 0.25f, 1 / 9.f}},
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
    tg_scope_begin();
    tg_tensor *tx = tg_from_data(TG_FLOAT32, 1, (int64_t[]){5}, x, sizeof x);
    if (GRAD(tx, cs[i].f(tx), ones, 5, g, 5, cs[i].name)) CLOSE(cs[i].name, g, cs[i].want, 5);
    tg_scope_end();
  }
}
