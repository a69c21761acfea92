/* test_multiout.c — values of one loop nest are stored by one kernel (schedule/merge.c): an Adam update is one
 * kernel per parameter, independent same-shaped outputs of a realize share a kernel, values that read each
 * other at other elements do not, and assigns into a buffer read elsewhere stay right. Values against plain C. */
#include <stdlib.h>

#include "test.h"

static float fval(int i, int salt) { return (float)sin(0.37 * (i + 1) + 0.91 * salt); }

static tg_tensor *filled(int ndim, const int64_t *shape, int salt) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *d = malloc((size_t)n * sizeof *d);
  for (int64_t i = 0; i < n; i++) d[i] = fval((int)i, salt);
  tg_tensor *t = tg_from_data(TG_FLOAT32, ndim, shape, d, (size_t)n * sizeof *d);
  free(d);
  return t;
}

static bool read(tg_tensor *t, float *out) { return tg_to_host(t, out, (size_t)tg_numel(t) * sizeof *out) == TG_OK; }

/* the loss of a small linear model: sum((x @ w + b)^2) over a fixed x (6, 5) */
static tg_tensor *model_loss(tg_tensor *w, tg_tensor *b, int step) {
  tg_tensor *x = filled(2, (int64_t[]){6, 5}, 10 + step);
  tg_tensor *y = tg_add(tg_matmul(x, w), b);
  return tg_sum(tg_mul(y, y), 0, NULL, false);
}

TEST(test_multiout_adam_step_is_one_kernel_per_parameter) {
  enum { NW = 5 * 7, NB = 7, STEPS = 3 };
  tg_tensor *w = tg_set_requires_grad(filled(2, (int64_t[]){5, 7}, 1), true);
  tg_tensor *b = tg_set_requires_grad(filled(1, (int64_t[]){7}, 2), true);
  CHECK_T(b);
  tg_params *p = tg_params_new();
  CHECK(tg_params_add(p, "w", w) == TG_OK && tg_params_add(p, "b", b) == TG_OK, "%s", tg_error());
  tg_adam_opts ao = tg_adam_defaults();
  ao.lr = 0.01;
  tg_optim *o = tg_adam_new(p, ao);
  CHECK_T(o);
  /* plain C Adam on the same gradients, in double */
  double pw[NW + NB], m[NW + NB] = {0}, v[NW + NB] = {0}, b1t = 1, b2t = 1;
  for (int i = 0; i < NW; i++) pw[i] = fval(i, 1);
  for (int i = 0; i < NB; i++) pw[NW + i] = fval(i, 2);
  for (int s = 0; s < STEPS; s++) {
    tg_scope_begin();
    tg_tensor *loss = model_loss(w, b, s);
    CHECK(tg_backward(loss) == TG_OK, "%s", tg_error());
    float g[NW + NB], got[NW + NB];
    CHECK(read(tg_grad(w), g) && read(tg_grad(b), g + NW), "%s", tg_error());
    CHECK(tg_optim_step(o, 0, NULL) == TG_OK, "step %d: %s", s, tg_error());
    /* the step's realize: one kernel per parameter (its new value, m and v) and one for the two bias
     * corrections (b1^t and b2^t, of one shape) */
    CHECK(tg_kernel_count_last() == 3, "step %d: the Adam update ran %d kernels, want 3", s, (int)tg_kernel_count_last());
    b1t *= 0.9;
    b2t *= 0.999;
    float want[NW + NB];
    for (int i = 0; i < NW + NB; i++) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * (double)g[i] * g[i];
      pw[i] -= 0.01 * (m[i] / (1 - b1t)) / (sqrt(v[i] / (1 - b2t)) + 1e-8);
      want[i] = (float)pw[i];
    }
    CHECK(read(w, got) && read(b, got + NW), "%s", tg_error());
    check_close_f32("adam params", got, want, NW + NB, 1e-6, 1e-5, __FILE__, __LINE__);
    tg_scope_end();
  }
  tg_optim_free(o);
  tg_params_free(p);
  tg_free(w);
  tg_free(b);
}

TEST(test_multiout_independent_outputs_share_a_kernel) {
  tg_scope_begin();
  tg_tensor *x = filled(2, (int64_t[]){9, 17}, 3), *y = filled(2, (int64_t[]){9, 17}, 4);
  CHECK(tg_realize(x) == TG_OK && tg_realize(y) == TG_OK, "%s", tg_error());
  tg_tensor *o1 = tg_add(tg_mul(x, y), x), *o2 = tg_exp(tg_sub(x, y));
  CHECK_T(o2);
  tg_tensor *both[2] = {o1, o2};
  CHECK(tg_realize_many(2, both) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 1, "two elementwise outputs of one shape: %d kernels, want 1", (int)tg_kernel_count_last());
  float h1[153], h2[153], w1[153], w2[153];
  CHECK(read(o1, h1) && read(o2, h2), "%s", tg_error());
  for (int i = 0; i < 153; i++) {
    float a = fval(i, 3), c = fval(i, 4);
    w1[i] = a * c + a;
    w2[i] = expf(a - c);
  }
  CHECK_CLOSE("o1", h1, w1, 153);
  CHECK_CLOSE("o2", h2, w2, 153);
  tg_scope_end();
}

/* eight outputs reading four buffers each would take 40 buffers: more than a kernel takes, they split in two */
TEST(test_multiout_many_buffers_split_into_halves) {
  tg_scope_begin();
  tg_tensor *in[32], *outs[8];
  for (int i = 0; i < 32; i++) {
    in[i] = filled(1, (int64_t[]){33}, 20 + i);
    CHECK(tg_realize(in[i]) == TG_OK, "%s", tg_error());
  }
  for (int o = 0; o < 8; o++) outs[o] = tg_add(tg_mul(in[4 * o], in[4 * o + 1]), tg_mul(in[4 * o + 2], in[4 * o + 3]));
  CHECK_T(outs[7]);
  CHECK(tg_realize_many(8, outs) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 2, "8 outputs of 4 inputs each: %d kernels, want 2", (int)tg_kernel_count_last());
  for (int o = 0; o < 8; o++) {
    float got[33], want[33];
    CHECK(read(outs[o], got), "%s", tg_error());
    for (int i = 0; i < 33; i++)
      want[i] = fval(i, 20 + 4 * o) * fval(i, 21 + 4 * o) + fval(i, 22 + 4 * o) * fval(i, 23 + 4 * o);
    CHECK_CLOSE("out", got, want, 33);
  }
  tg_scope_end();
}

TEST(test_multiout_output_read_at_its_element_is_computed_in_the_kernel) {
  tg_scope_begin();
  tg_tensor *x = filled(2, (int64_t[]){8, 12}, 5);
  CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
  tg_tensor *a = tg_add_scalar(tg_mul(x, x), 1.0), *c = tg_mul(a, x);  /* c reads a where it stores */
  CHECK_T(c);
  tg_tensor *both[2] = {a, c};
  CHECK(tg_realize_many(2, both) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 1, "c reads a at its element: %d kernels, want 1", (int)tg_kernel_count_last());
  float ha[96], hc[96], wa[96], wc[96];
  CHECK(read(a, ha) && read(c, hc), "%s", tg_error());
  for (int i = 0; i < 96; i++) {
    float v = fval(i, 5);
    wa[i] = v * v + 1.0f;
    wc[i] = wa[i] * v;
  }
  CHECK_CLOSE("a", ha, wa, 96);
  CHECK_CLOSE("c", hc, wc, 96);
  tg_scope_end();
}

TEST(test_multiout_output_read_at_other_elements_stays_apart) {
  tg_scope_begin();
  tg_tensor *x = filled(2, (int64_t[]){8, 12}, 6);
  CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
  tg_tensor *a = tg_add_scalar(tg_mul(x, x), 1.0);
  tg_tensor *c = tg_mul_scalar(tg_flip(a, 1, (int[]){1}), 2.0);  /* c reads a at other elements */
  CHECK_T(c);
  tg_tensor *both[2] = {a, c};
  CHECK(tg_realize_many(2, both) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 2, "c reads a flipped: %d kernels, want 2", (int)tg_kernel_count_last());
  float ha[96], hc[96], wa[96], wc[96];
  CHECK(read(a, ha) && read(c, hc), "%s", tg_error());
  for (int i = 0; i < 96; i++) {
    float v = fval(i, 6);
    wa[i] = v * v + 1.0f;
  }
  for (int r = 0; r < 8; r++)
    for (int k = 0; k < 12; k++) wc[r * 12 + k] = 2 * wa[r * 12 + 11 - k];
  CHECK_CLOSE("a", ha, wa, 96);
  CHECK_CLOSE("c", hc, wc, 96);
  tg_scope_end();
}

/* out1 = x + 1 assigned into x with out2 = 2 x (the old x) realized together: at the same element, and (flip)
 * at others, where writing x in place would change what out2 reads */
TEST(test_multiout_assign_keeps_old_values_for_other_readers) {
  for (int flip = 0; flip < 2; flip++) {
    tg_scope_begin();
    tg_tensor *x = filled(2, (int64_t[]){6, 10}, 7 + flip);
    CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
    tg_tensor *old = flip ? tg_flip(x, 1, (int[]){1}) : x;
    tg_tensor *out2 = tg_mul_scalar(old, 2.0);
    CHECK(tg_assign(x, tg_add_scalar(x, 1.0)) == TG_OK, "%s", tg_error());
    tg_tensor *both[2] = {x, out2};
    CHECK(tg_realize_many(2, both) == TG_OK, "flip %d: %s", flip, tg_error());
    if (!flip) CHECK(tg_kernel_count_last() == 1, "same element: %d kernels, want 1", (int)tg_kernel_count_last());
    float hx[60], h2[60], wx[60], w2[60];
    CHECK(read(x, hx) && read(out2, h2), "%s", tg_error());
    for (int r = 0; r < 6; r++)
      for (int k = 0; k < 10; k++) {
        wx[r * 10 + k] = fval(r * 10 + k, 7 + flip) + 1.0f;
        w2[r * 10 + k] = 2 * fval(r * 10 + (flip ? 9 - k : k), 7 + flip);
      }
    CHECK_CLOSE("x", hx, wx, 60);
    CHECK_CLOSE("out2", h2, w2, 60);
    tg_scope_end();
  }
}

/* a step of a two-layer model with Adam, eager and captured: the same bits */
typedef struct net { tg_nn_linear l1, l2; tg_optim *opt; tg_params *p; } net;

static tg_status net_init(net *m) {
  tg_manual_seed(21);
  memset(m, 0, sizeof *m);
  if (tg_nn_linear_init(&m->l1, 10, 16, true) || tg_nn_linear_init(&m->l2, 16, 4, true)) return tg_error_status();
  m->p = tg_params_new();
  tg_nn_linear_params(&m->l1, "l1", m->p);
  tg_nn_linear_params(&m->l2, "l2", m->p);
  m->opt = tg_adam_new(m->p, adam_lr(0.01));
  return m->opt ? TG_OK : tg_error_status();
}

static void net_free(net *m) {
  tg_optim_free(m->opt);
  tg_params_free(m->p);
  tg_nn_linear_free(&m->l1);
  tg_nn_linear_free(&m->l2);
}

static tg_status net_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  net *m = ctx;
  tg_scope_begin();
  tg_tensor *logits = tg_nn_linear_forward(&m->l2, tg_relu(tg_nn_linear_forward(&m->l1, in[0])));
  tg_tensor *loss = tg_sparse_categorical_crossentropy(logits, in[1], (tg_loss_opts){0});
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->opt, 1, &loss);
  out[0] = st == TG_OK ? tg_keep(loss) : NULL;
  tg_scope_end();
  return st;
}

#define NET_PARAMS (10 * 16 + 16 + 16 * 4 + 4)

static void net_params(net *m, float *out) {
  size_t k = 0;
  for (int i = 0; i < tg_params_count(m->p); i++) {
    tg_tensor *t = tg_params_tensor(m->p, i);
    size_t n = (size_t)tg_numel(t);
    tg_to_host(t, out + k, n * 4);
    k += n;
  }
}

TEST(test_multiout_jit_replay_matches_eager_bits) {
  net a, b;
  CHECK(net_init(&a) == TG_OK && net_init(&b) == TG_OK, "%s", tg_error());
  tg_jit *j = tg_jit_new(net_step, &b, 2, 1);
  CHECK_T(j);
  float pa[NET_PARAMS], pb[NET_PARAMS];
  for (int s = 0; s < 5; s++) {
    tg_scope_begin();
    float xv[60];
    int32_t yv[6];
    for (int i = 0; i < 60; i++) xv[i] = (float)cos(0.29 * (i + 1) * (s + 2));
    for (int i = 0; i < 6; i++) yv[i] = (i * 3 + s) % 4;
    tg_tensor *in[2] = {tg_from_data(TG_FLOAT32, 2, (int64_t[]){6, 10}, xv, sizeof xv),
                        tg_from_data(TG_INT32, 1, (int64_t[]){6}, yv, sizeof yv)};
    tg_tensor *la, *lb;
    CHECK(net_step(&a, 2, in, 1, &la) == TG_OK, "eager step %d: %s", s, tg_error());
    CHECK(tg_jit_call(j, in, &lb) == TG_OK, "jit step %d: %s", s, tg_error());
    CHECK(tg_item(la) == tg_item(lb), "step %d: loss %.9g eager, %.9g jit", s, tg_item(la), tg_item(lb));
    net_params(&a, pa);
    net_params(&b, pb);
    CHECK(!memcmp(pa, pb, sizeof pa), "step %d: parameters differ between eager and jit", s);
    tg_free(la);
    tg_free(lb);
    tg_scope_end();
  }
  tg_jit_free(j);
  net_free(&a);
  net_free(&b);
}
