/* test_trim.c — reduce loops that end at a run-time bound (codegen/trim.c): masked sums, maxima and products
 * over a variable's prefix equal a plain C reference at every position, eager and under tg_jit replays; the
 * generated loop has the bound (linear_program.bounds); a where whose other value is not the reduce's identity
 * keeps its loop whole; a reduce under a stored where(mask, ., constant) runs only where the mask holds;
 * attention with a bool mask (decode and causal prefill) matches a reference. */
#include <math.h>
#include <stdlib.h>

#include "codegen/codegen.h"
#include "render/render.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "test.h"

enum { R = 3, N = 100 };  /* N: no multiple of the vector width or an unroll */

static float xval(int i, int j) { return (float)((i * 37 + j * 11) % 23) / 8.0f - 1.3f; }

/* the loops of the last kernel of y's schedule with a run-time bound; -1 on failure */
static int trimmed_loops(tg_tensor *y) {
  schedule s;
  if (!y || schedule_create(1, &y->u, &s) != TG_OK) return -1;
  int n = -1;
  kernel_info info;
  linear_program lp;
  uop *ast = s.nkernels ? codegen_optimize(s.kernels[s.nkernels - 1].ast, 2, &info) : NULL;
  if (ast && linearize(ast, &lp, &info)) {
    n = 0;
    for (int i = 0; i < lp.n; i++) n += lp.ops[i]->op == OP_RANGE && lp.bounds[i];
    char *src = render_c(info.name, &lp, &info);
    if (!src) n = -1;
    free(src);
    linear_program_free(&lp);
  }
  schedule_free(&s);
  return n;
}

/* the loops of the last kernel of y's schedule that start at a run-time value; -1 on failure */
static int started_loops(tg_tensor *y) {
  schedule s;
  if (!y || schedule_create(1, &y->u, &s) != TG_OK) return -1;
  int n = -1;
  kernel_info info;
  linear_program lp;
  uop *ast = s.nkernels ? codegen_optimize(s.kernels[s.nkernels - 1].ast, 2, &info) : NULL;
  if (ast && linearize(ast, &lp, &info)) {
    n = 0;
    for (int i = 0; i < lp.n; i++) n += lp.ops[i]->op == OP_RANGE && lp.starts[i];
    char *src = render_c(info.name, &lp, &info);
    if (!src) n = -1;
    free(src);
    linear_program_free(&lp);
  }
  schedule_free(&s);
  return n;
}

/* reduce op k (0 sum, 1 max, 2 prod) over axis 1 of where(j <= pos, x, other) */
static tg_tensor *masked_reduce(tg_tensor *x, tg_variable *pos, int k, double other) {
  tg_tensor *mask = tg_le(tg_reshape(tg_arange(TG_INT32, 0, N, 1), 2, (int64_t[]){1, N}), tg_variable_tensor(pos));
  tg_tensor *m = tg_where_scalar(mask, x, other);
  int ax = 1;
  return k == 0 ? tg_sum(m, 1, &ax, false) : k == 1 ? tg_max(m, 1, &ax, false) : tg_prod(m, 1, &ax, false);
}

static tg_tensor *x_tensor(void) {
  float xv[R * N];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < N; j++) xv[i * N + j] = xval(i, j) * (j % 2 ? 1.0f : 0.25f) + 1.0f;
  return tg_from_data(TG_FLOAT32, 2, (int64_t[]){R, N}, xv, sizeof xv);
}

static float xv_at(int i, int j) { return xval(i, j) * (j % 2 ? 1.0f : 0.25f) + 1.0f; }

static double ref_reduce_x(int i, int p, int k, double other) {
  double acc = k == 0 ? 0 : k == 1 ? -INFINITY : 1;
  for (int j = 0; j < N; j++) {
    double v = j <= p ? xv_at(i, j) : other;
    acc = k == 0 ? acc + v : k == 1 ? (v > acc ? v : acc) : acc * v;
  }
  return acc;
}

TEST(test_trim_masked_sum_max_prod_match_a_reference_at_every_position) {
  REQUIRE_CPU();
  static const double ident[3] = {0, -INFINITY, 1};
  tg_variable *pos = tg_variable_new("pos", 0, N - 1);
  CHECK_T(pos);
  for (int k = 0; k < 3; k++) {
    int ps[] = {0, 1, 37, N / 2, N - 2, N - 1};
    for (size_t t = 0; t < sizeof ps / sizeof *ps; t++) {
      tg_variable_bind(pos, ps[t]);
      tg_scope_begin();
      tg_tensor *y = masked_reduce(x_tensor(), pos, k, ident[k]);
      if (t == 0) CHECK(trimmed_loops(y) >= 1, "reduce %d: no loop with a run-time bound", k);
      float got[R], want[R];
      CHECK(y && tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
      for (int i = 0; i < R; i++) want[i] = (float)ref_reduce_x(i, ps[t], k, ident[k]);
      CHECK_CLOSE("masked reduce", got, want, R);
      tg_scope_end();
    }
  }
  tg_variable_free(pos);
}

TEST(test_trim_keeps_the_loop_when_the_other_value_is_not_the_identity) {
  REQUIRE_CPU();
  tg_variable *pos = tg_variable_new("pos", 0, N - 1);
  CHECK_T(pos);
  static const double other[3] = {0.5, -2, 2};  /* not 0, -inf, 1 */
  for (int k = 0; k < 3; k++) {
    tg_variable_bind(pos, 20);
    tg_scope_begin();
    tg_tensor *y = masked_reduce(x_tensor(), pos, k, other[k]);
    CHECK(trimmed_loops(y) == 0, "reduce %d with a non-identity else was trimmed", k);
    float got[R], want[R];
    CHECK(y && tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
    for (int i = 0; i < R; i++) want[i] = (float)ref_reduce_x(i, 20, k, other[k]);
    CHECK_CLOSE("untrimmed reduce", got, want, R);
    tg_scope_end();
  }
  tg_variable_free(pos);
}

typedef struct jctx { tg_variable *pos; } jctx;

static tg_status masked_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)nin, (void)nout;
  jctx *c = ctx;
  tg_tensor *mask = tg_le(tg_reshape(tg_arange(TG_INT32, 0, N, 1), 2, (int64_t[]){1, N}), tg_variable_tensor(c->pos));
  int ax = 1;
  /* a product with a masked factor: p @ v's form */
  tg_tensor *p = tg_where_scalar(mask, in[0], 0);
  out[0] = tg_keep(tg_sum(tg_mul(p, tg_add_scalar(in[0], 1)), 1, &ax, false));
  return out[0] ? TG_OK : tg_error_status();
}

TEST(test_trim_jit_replays_with_new_bindings) {
  REQUIRE_CPU();
  tg_variable *pos = tg_variable_new("pos", 0, N - 1);
  CHECK_T(pos);
  jctx c = {pos};
  tg_jit *j = tg_jit_new(masked_step, &c, 1, 1);
  CHECK_T(j);
  int ps[] = {N - 1, 0, 5, N / 2, 0, N - 1, 63};
  for (size_t t = 0; j && t < sizeof ps / sizeof *ps; t++) {
    tg_scope_begin();
    tg_tensor *x = x_tensor(), *o = NULL;
    CHECK(tg_variable_bind(pos, ps[t]) == TG_OK && tg_jit_call(j, &x, &o) == TG_OK, "pos %d: %s", ps[t], tg_error());
    float got[R], want[R];
    CHECK(o && tg_to_host(o, got, sizeof got) == TG_OK, "%s", tg_error());
    for (int i = 0; i < R; i++) {
      double acc = 0;
      for (int q = 0; q <= ps[t]; q++) acc += (double)xv_at(i, q) * (xv_at(i, q) + 1);
      want[i] = (float)acc;
    }
    CHECK_CLOSE("jit masked product sum", got, want, R);
    tg_free(o);
    tg_scope_end();
  }
  tg_jit_free(j);
  tg_variable_free(pos);
}

/* attention of L query rows at positions start .. start+L-1 over S keys, query i seeing keys <= start + i */
static void ref_attention(const float *q, const float *k, const float *v, int L, int S, int E, int start, float *out) {
  for (int i = 0; i < L; i++) {
    double s[256], mx = -INFINITY, sum = 0;
    int last = start + i < S - 1 ? start + i : S - 1;
    for (int j = 0; j <= last; j++) {
      s[j] = 0;
      for (int e = 0; e < E; e++) s[j] += (double)q[i * E + e] * k[j * E + e];
      s[j] /= sqrt((double)E);
      mx = s[j] > mx ? s[j] : mx;
    }
    for (int j = 0; j <= last; j++) sum += exp(s[j] - mx);
    for (int e = 0; e < E; e++) {
      double acc = 0;
      for (int j = 0; j <= last; j++) acc += exp(s[j] - mx) / sum * v[j * E + e];
      out[i * E + e] = (float)acc;
    }
  }
}

TEST(test_trim_attention_with_a_bool_mask_decode_and_prefill) {
  REQUIRE_CPU();
  enum { S = 96, E = 16, L = 5 };
  float hq[L * E], hk[S * E], hv[S * E], got[L * E], want[L * E];
  for (int i = 0; i < L * E; i++) hq[i] = (float)((i * 13) % 17) / 9.0f - 0.9f;
  for (int i = 0; i < S * E; i++) hk[i] = (float)((i * 7) % 19) / 10.0f - 0.8f, hv[i] = (float)((i * 5) % 23) / 7.0f - 1.5f;
  tg_variable *start = tg_variable_new("start", 0, S - L);
  CHECK_T(start);
  int ps[] = {0, 1, 40, S - L};
  for (size_t t = 0; t < sizeof ps / sizeof *ps; t++) {
    tg_variable_bind(start, ps[t]);
    for (int rows = 1; rows <= L; rows += L - 1) {
      tg_scope_begin();
      tg_tensor *q = tg_from_data(TG_FLOAT32, 2, (int64_t[]){rows, E}, hq, (size_t)rows * E * 4);
      tg_tensor *k = tg_from_data(TG_FLOAT32, 2, (int64_t[]){S, E}, hk, sizeof hk);
      tg_tensor *v = tg_from_data(TG_FLOAT32, 2, (int64_t[]){S, E}, hv, sizeof hv);
      /* (rows, S): key j seen by row i when j <= start + i */
      tg_tensor *qpos = tg_add(tg_reshape(tg_arange(TG_INT32, 0, rows, 1), 2, (int64_t[]){rows, 1}), tg_variable_tensor(start));
      tg_tensor *mask = tg_le(tg_reshape(tg_arange(TG_INT32, 0, S, 1), 2, (int64_t[]){1, S}), qpos);
      tg_tensor *o = tg_scaled_dot_product_attention(q, k, v, mask, 0, false, false);
      if (t == 0) CHECK(trimmed_loops(o) >= 1, "attention (%d rows): p @ v has no loop with a run-time bound", rows);
      CHECK(o && tg_to_host(o, got, (size_t)rows * E * 4) == TG_OK, "%s", tg_error());
      ref_attention(hq, hk, hv, rows, S, E, ps[t], want);
      CHECK_CLOSE("masked attention", got, want, rows * E);
      tg_scope_end();
    }
  }
  tg_variable_free(start);
}

/* where(j <= pos, x[j] . w, -inf) stored: the dot product's loop runs only for the rows the mask keeps (guards) */
TEST(test_trim_guards_the_reduce_under_a_stored_where) {
  REQUIRE_CPU();
  enum { J = 40, D = 96 };
  float hx[J * D], hw[D], got[J], want[J];
  for (int i = 0; i < J * D; i++) hx[i] = (float)((i * 29) % 31) / 15.0f - 1.0f;
  for (int d = 0; d < D; d++) hw[d] = (float)((d * 7) % 11) / 5.0f - 1.0f;
  tg_variable *pos = tg_variable_new("pos", 0, J - 1);
  CHECK_T(pos);
  int ps[] = {0, 17, J - 1};
  for (size_t t = 0; t < sizeof ps / sizeof *ps; t++) {
    tg_variable_bind(pos, ps[t]);
    tg_scope_begin();
    tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){J, D}, hx, sizeof hx);
    tg_tensor *w = tg_from_data(TG_FLOAT32, 2, (int64_t[]){D, 1}, hw, sizeof hw);
    tg_tensor *mask = tg_le(tg_reshape(tg_arange(TG_INT32, 0, J, 1), 2, (int64_t[]){J, 1}), tg_variable_tensor(pos));
    tg_tensor *y = tg_where_scalar(mask, tg_matmul(x, w), -INFINITY);
    if (t == 0) CHECK(trimmed_loops(y) >= 1, "the dot product under where(mask, ., -inf) has no guarded loop");
    CHECK(y && tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
    for (int j = 0; j < J; j++) {
      double acc = 0;
      for (int d = 0; d < D; d++) acc += (double)hx[j * D + d] * hw[d];
      want[j] = j <= ps[t] ? (float)acc : -INFINITY;
    }
    CHECK_CLOSE("guarded dot products", got, want, J);
    tg_scope_end();
  }
  tg_variable_free(pos);
}

/* the loops of PACK copies (AX_LOOP) with a run-time bound, over every kernel of y's schedule; -1 on failure */
static int trimmed_fills(tg_tensor *y, int *packs) {
  schedule s;
  *packs = 0;
  if (!y || schedule_create(1, &y->u, &s) != TG_OK) return -1;
  int n = 0;
  for (int k = 0; k < s.nkernels && n >= 0; k++) {
    kernel_info info;
    linear_program lp;
    uop *ast = codegen_optimize(s.kernels[k].ast, 2, &info);
    if (!ast || !linearize(ast, &lp, &info)) { n = -1; break; }
    *packs += strstr(info.opts, "PACK") != NULL;
    for (int i = 0; i < lp.n; i++) n += lp.ops[i]->op == OP_RANGE && lp.ops[i]->aux[0] == AX_LOOP && lp.bounds[i];
    linear_program_free(&lp);
  }
  schedule_free(&s);
  return n;
}

/* A decode step's grouped-query attention over a KV cache of T rows (llm.c's shapes: q (kv heads, rep, hd), the
 * caches (T, kv heads * hd)): the kernels that pack the cache (for the scores, guarded by key <= pos, and for
 * p @ v, whose reduce ends at pos) copy only the rows up to pos; values against plain C at several positions */
TEST(test_trim_packed_cache_copies_end_at_the_position) {
  REQUIRE_CPU();
  enum { T = 256, KV = 2, REP = 4, HD = 64 };
  static float hq[KV * REP * HD], hk[T * KV * HD], hv[T * KV * HD], got[KV * REP * HD], want[REP * HD];
  static float kh[T * HD], vh[T * HD];
  for (int i = 0; i < KV * REP * HD; i++) hq[i] = (float)((i * 13) % 17) / 9.0f - 0.9f;
  for (int i = 0; i < T * KV * HD; i++) hk[i] = (float)((i * 7) % 19) / 10.0f - 0.8f, hv[i] = (float)((i * 5) % 23) / 7.0f - 1.5f;
  tg_variable *pos = tg_variable_new("pos", 0, T - 1);
  CHECK_T(pos);
  int ps[] = {0, 37, T - 1};
  for (size_t t = 0; t < sizeof ps / sizeof *ps; t++) {
    tg_variable_bind(pos, ps[t]);
    tg_scope_begin();
    tg_tensor *q = tg_from_data(TG_FLOAT32, 3, (int64_t[]){KV, REP, HD}, hq, sizeof hq);
    tg_tensor *k = tg_from_data(TG_FLOAT32, 2, (int64_t[]){T, KV * HD}, hk, sizeof hk);
    tg_tensor *v = tg_from_data(TG_FLOAT32, 2, (int64_t[]){T, KV * HD}, hv, sizeof hv);
    int order[3] = {1, 0, 2};
    tg_tensor *kh3 = tg_permute(tg_reshape(k, 3, (int64_t[]){T, KV, HD}), 3, order);
    tg_tensor *vh3 = tg_permute(tg_reshape(v, 3, (int64_t[]){T, KV, HD}), 3, order);
    tg_tensor *mask = tg_le(tg_reshape(tg_arange(TG_INT32, 0, T, 1), 2, (int64_t[]){1, T}),
                            tg_reshape(tg_variable_tensor(pos), 2, (int64_t[]){1, 1}));
    tg_tensor *o = tg_scaled_dot_product_attention(q, kh3, vh3, mask, 0, false, false);
    if (t == 0) {
      int packs, fills = trimmed_fills(o, &packs);
      CHECK(fills >= packs && packs >= 1, "%d kernels pack the cache, %d copy loops have a run-time bound", packs, fills);
    }
    CHECK(o && tg_to_host(o, got, sizeof got) == TG_OK, "%s", tg_error());
    for (int h = 0; h < KV; h++) {
      for (int j = 0; j < T; j++)
        for (int e = 0; e < HD; e++) kh[j * HD + e] = hk[(j * KV + h) * HD + e], vh[j * HD + e] = hv[(j * KV + h) * HD + e];
      /* every query row at position pos: ref_attention's row i sees keys <= start + i, so one row at a time */
      for (int r = 0; r < REP; r++) ref_attention(hq + (h * REP + r) * HD, kh, vh, 1, T, HD, ps[t], want + r * HD);
      CHECK_CLOSE("attention over the cache", got + h * REP * HD, want, REP * HD);
    }
    tg_scope_end();
  }
  tg_variable_free(pos);
}

/* where(lo <= j < lo + W, x, identity) reduced over j: the loop starts at lo and ends at lo + W, run-time values
 * (trim_start and trim_bound); every window position, sum, max and product, against C */
TEST(test_trim_window_sums_start_and_end_at_the_mask) {
  REQUIRE_CPU();
  enum { W = 9 };
  static const double ident[3] = {0, -INFINITY, 1};
  tg_variable *lo = tg_variable_new("lo", 0, N - 1);
  CHECK_T(lo);
  for (int k = 0; k < 3; k++) {
    int ps[] = {0, 1, 37, N - W, N - 2, N - 1};
    for (size_t t = 0; t < sizeof ps / sizeof *ps; t++) {
      tg_variable_bind(lo, ps[t]);
      tg_scope_begin();
      tg_tensor *j = tg_reshape(tg_arange(TG_INT32, 0, N, 1), 2, (int64_t[]){1, N}), *l = tg_variable_tensor(lo);
      tg_tensor *mask = tg_bitwise_and(tg_ge(j, l), tg_lt(j, tg_add_scalar(l, W)));
      tg_tensor *m = tg_where_scalar(mask, x_tensor(), ident[k]);
      int ax = 1;
      tg_tensor *y = k == 0 ? tg_sum(m, 1, &ax, false) : k == 1 ? tg_max(m, 1, &ax, false) : tg_prod(m, 1, &ax, false);
      if (t == 0) CHECK(started_loops(y) >= 1 && trimmed_loops(y) >= 1, "reduce %d: no loop with run-time start and end", k);
      float got[R], want[R];
      CHECK(y && tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
      for (int i = 0; i < R; i++) {
        double acc = ident[k];
        for (int jj = ps[t]; jj < ps[t] + W && jj < N; jj++) {
          double v = xv_at(i, jj);
          acc = k == 0 ? acc + v : k == 1 ? (v > acc ? v : acc) : acc * v;
        }
        want[i] = (float)acc;
      }
      CHECK_CLOSE("window reduce", got, want, R);
      tg_scope_end();
    }
  }
  tg_variable_free(lo);
}

/* a 5x5 convolution's input gradient: the output gradient stored padded along x only, its padded rows left as
 * masks, so the tap-row loop runs from max(0, 4 - y) to min(5, 24 - y) for each input row y (MNIST's conv2
 * backward, smaller); x's gradient against a plain C transposed convolution */
TEST(test_trim_conv_input_gradient_skips_the_padded_tap_rows) {
  REQUIRE_CPU();
  enum { B = 4, CI = 3, CO = 16, H = 28, K = 5, O = H - K + 1 };
  static float hx[B * CI * H * H], hw[CO * CI * K * K], hg[B * CO * O * O], got[B * CI * H * H], want[B * CI * H * H];
  for (int i = 0; i < B * CI * H * H; i++) hx[i] = xval(i, 3);
  for (int i = 0; i < CO * CI * K * K; i++) hw[i] = xval(i, 7) * 0.2f;
  for (int i = 0; i < B * CO * O * O; i++) hg[i] = xval(i, 5);
  tg_scope_begin();
  tg_tensor *x = tg_set_requires_grad(tg_from_data(TG_FLOAT32, 4, (int64_t[]){B, CI, H, H}, hx, sizeof hx), true);
  tg_tensor *w = tg_from_data(TG_FLOAT32, 4, (int64_t[]){CO, CI, K, K}, hw, sizeof hw);
  tg_tensor *g = tg_from_data(TG_FLOAT32, 4, (int64_t[]){B, CO, O, O}, hg, sizeof hg);
  tg_tensor *loss = tg_sum(tg_mul(tg_conv2d(x, w, NULL, (tg_conv_opts){0}), g), 0, NULL, false);
  CHECK(loss && tg_backward(loss) == TG_OK, "%s", tg_error());
  tg_tensor *dx = tg_grad(x);
  CHECK(started_loops(dx) >= 1 && trimmed_loops(dx) >= 1, "the input gradient's tap rows run whole");
  CHECK(dx && tg_to_host(dx, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int b = 0; b < B; b++)
    for (int ci = 0; ci < CI; ci++)
      for (int y = 0; y < H; y++)
        for (int xx = 0; xx < H; xx++) {
          double acc = 0;
          for (int co = 0; co < CO; co++)
            for (int ky = 0; ky < K; ky++)
              for (int kx = 0; kx < K; kx++) {
                int oy = y - ky, ox = xx - kx;
                if (oy >= 0 && oy < O && ox >= 0 && ox < O)
                  acc += (double)hg[((b * CO + co) * O + oy) * O + ox] * hw[((co * CI + ci) * K + ky) * K + kx];
              }
          want[((b * CI + ci) * H + y) * H + xx] = (float)acc;
        }
  CHECK_CLOSE("conv input gradient", got, want, B * CI * H * H);
  tg_scope_end();
}
