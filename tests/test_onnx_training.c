/* test_onnx_training.c — ONNX's training operators (src/onnx/ops_training.c: ai.onnx.preview.training opset 1)
 * through the public API, on models built here (onnx_pbw.h), against the update rules of the ONNX specs written
 * out in plain C: what ONNX's own backend tests leave out (T > 0, so Adam's bias correction and Momentum's beta;
 * norm_coefficient_post; double tensors; non-scalar y in Gradient; a y that another node reads last), and the
 * refusals (bad mode, missing attributes, a y no node defines). build/onnx_backend runs ONNX's own tests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_pbw.h"
#include "test.h"
#include "uop/uop.h"

#define TRAINING "ai.onnx.preview.training"

/* ---- building models ---------------------------------------------------------------------------------- */

static void attr_strings(pbw *node, const char *name, int n, const char *const *s) {
  pbw a = {0};
  pbw_str(&a, 1, name);
  for (int i = 0; i < n; i++) pbw_str(&a, 9, s[i]);
  pbw_int(&a, 20, 8);
  pbw_msg(node, 5, &a);
}

/* ModelProto: the default domain at opset 13 and the training domain at opset 1; the graph (freed) */
static tg_onnx *load_model(pbw *graph) {
  pbw m = {0}, o = {0}, t = {0};
  pbw_int(&m, 1, 8);
  pbw_str(&o, 1, "");
  pbw_int(&o, 2, 13);
  pbw_msg(&m, 8, &o);
  pbw_str(&t, 1, TRAINING);
  pbw_int(&t, 2, 1);
  pbw_msg(&m, 8, &t);
  pbw_msg(&m, 7, graph);
  tg_onnx *r = tg_onnx_load_memory(m.b, m.n, NULL);
  pbw_free(&m);
  return r;
}

static void add_value(pbw *g, int field, const char *name, int elem, int ndim, const int64_t *dims) {
  pbw v = onnx_w_value(name, elem, ndim, dims, NULL);
  pbw_msg(g, field, &v);
}

static tg_tensor *f32(int64_t n, const float *v) { return tg_from_data(TG_FLOAT32, 1, &n, v, (size_t)n * sizeof *v); }

static bool close_to(const char *what, tg_tensor *t, int64_t n, const double *want) {
  double got[8];
  if (!t || tg_numel(t) != n || n > 8) {
    test_fail(__FILE__, __LINE__, "%s: %lld elements, expected %lld: %s", what, t ? (long long)tg_numel(t) : -1LL,
              (long long)n, tg_error());
    return false;
  }
  if (tg_to_host(tg_cast(t, TG_FLOAT64), got, (size_t)n * sizeof *got) != TG_OK) {
    test_fail(__FILE__, __LINE__, "%s: %s", what, tg_error());
    return false;
  }
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= 1e-6 + 1e-5 * fabs(want[i]))) {
      test_fail(__FILE__, __LINE__, "%s[%lld] = %.9g, expected %.9g", what, (long long)i, got[i], want[i]);
      return false;
    }
  return true;
}

/* the element type of the optimized tensors and their states (ONNX_FLOAT or ONNX_DOUBLE) */
static int opt_elem = ONNX_FLOAT;

/* one optimizer node over X1 (1) and X2 (3): inputs R, T, then per kind the two tensors named kinds[k] 1 and 2;
 * outputs per kind the two new ones ("X1_new", ...). mode NULL: no mode attribute */
static tg_onnx *optimizer_model(const char *op, int nkinds, const char *const *kinds, int nattrs, const char *const *an,
                                const float *av, const char *mode) {
  const char *io[64];
  char names[2][8][16];
  int k = 0;
  io[k++] = "R";
  io[k++] = "T";
  for (int j = 0; j < nkinds; j++)
    for (int i = 0; i < 2; i++) {
      snprintf(names[0][2 * j + i], 16, "%s%d", kinds[j], i + 1);
      io[k++] = names[0][2 * j + i];
    }
  io[k++] = NULL;
  /* outputs: the new X's, then the new states (every kind after G) */
  for (int j = 0; j < nkinds; j++)
    for (int i = 0; j != 1 && i < 2; i++) {
      snprintf(names[1][2 * j + i], 16, "%s%d_new", kinds[j], i + 1);
      io[k++] = names[1][2 * j + i];
    }
  io[k++] = NULL;
  pbw g = {0}, n = onnx_w_node(op, io);
  pbw_str(&n, 7, TRAINING);
  for (int a = 0; a < nattrs; a++) onnx_w_attr_float(&n, an[a], av[a]);
  if (mode) onnx_w_attr_string(&n, "mode", mode);
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw_str(&g, ONNX_G_NAME, "opt");
  add_value(&g, ONNX_G_INPUT, "R", ONNX_FLOAT, 0, NULL);
  add_value(&g, ONNX_G_INPUT, "T", ONNX_INT64, 0, NULL);
  for (int j = 0; j < nkinds; j++)
    for (int i = 0; i < 2; i++) add_value(&g, ONNX_G_INPUT, names[0][2 * j + i], opt_elem, 1, (int64_t[]){i ? 3 : 1});
  for (int j = 0; j < nkinds; j++)
    for (int i = 0; j != 1 && i < 2; i++)
      add_value(&g, ONNX_G_OUTPUT, names[1][2 * j + i], opt_elem, 1, (int64_t[]){i ? 3 : 1});
  return load_model(&g);
}

/* the data: X1 (1), X2 (3), G, then two state tensors, element i of the four values below */
static const float X[4] = {1.0f, -0.5f, 2.0f, 0.25f}, G[4] = {-1.0f, 0.5f, -3.0f, 2.0f};
static const float S1[4] = {0.5f, 1.0f, 0.0f, -2.0f}, S2[4] = {2.0f, 4.0f, 1.0f, 0.5f};

/* runs the optimizer model m on R, T and nstate state tensors; out gets 2 * (1 + nstate) outputs */
static bool run_optimizer(tg_onnx *m, float r, int64_t t, int nstate, tg_tensor **out) {
  const float *state[2] = {S1, S2};
  tg_tensor *in[10];
  const char *names[10];
  tg_onnx_io io;
  int n = 0;
  in[n++] = tg_from_data(TG_FLOAT32, 0, NULL, &r, sizeof r);
  in[n++] = tg_from_data(TG_INT64, 0, NULL, &t, sizeof t);
  const float *data[3] = {X, G, NULL};
  for (int j = 0; j < 2 + nstate; j++) {
    const float *d = j < 2 ? data[j] : state[j - 2];
    in[n++] = opt_elem == ONNX_DOUBLE ? tg_cast(f32(1, d), TG_FLOAT64) : f32(1, d);
    in[n++] = opt_elem == ONNX_DOUBLE ? tg_cast(f32(3, d + 1), TG_FLOAT64) : f32(3, d + 1);
  }
  for (int i = 0; i < n; i++) {
    tg_onnx_input(m, i, &io);
    names[i] = io.name;
  }
  return tg_onnx_run(m, n, names, in, out) == TG_OK;
}

#define MOMENTUM_ATTRS ((const char *[]){"alpha", "beta", "norm_coefficient"})

/* ---- optimizers --------------------------------------------------------------------------------------- */

TEST(test_onnx_training_adam_bias_correction_and_post) {
  tg_scope_begin();
  const double alpha = 0.9, beta = 0.99, eps = 1e-3, norm = 0.01, post = 0.05, r = 0.1;
  const char *const an[] = {"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"};
  tg_onnx *m = optimizer_model("Adam", 4, (const char *[]){"X", "G", "V", "H"}, 5, an,
                               (const float[]){0.9f, 0.99f, 1e-3f, 0.01f, 0.05f}, NULL);
  CHECK_T(m);
  for (int64_t t = 0; t <= 3; t += 3) {
    tg_tensor *out[6] = {0};
    CHECK(run_optimizer(m, 0.1f, t, 2, out), "T=%lld: %s", (long long)t, tg_error());
    double x[4], v[4], h[4];
    for (int i = 0; i < 4; i++) {
      double a = (float)alpha, b = (float)beta;
      double g = (float)norm * X[i] + G[i];
      v[i] = a * S1[i] + (1 - a) * g;
      h[i] = b * S2[i] + (1 - b) * g * g;
      double rate = t > 0 ? (float)r * sqrt(1 - pow(b, (double)t)) / (1 - pow(a, (double)t)) : (float)r;
      x[i] = (1 - (float)post) * (X[i] - rate * v[i] / (sqrt(h[i]) + (float)eps));
    }
    CHECK(close_to("X1_new", out[0], 1, x) && close_to("X2_new", out[1], 3, x + 1), "T=%lld", (long long)t);
    CHECK(close_to("V1_new", out[2], 1, v) && close_to("V2_new", out[3], 3, v + 1), "T=%lld", (long long)t);
    CHECK(close_to("H1_new", out[4], 1, h) && close_to("H2_new", out[5], 3, h + 1), "T=%lld", (long long)t);
    for (int i = 0; i < 6; i++) tg_free(out[i]);
  }
  tg_onnx_free(m);
  tg_scope_end();
}

TEST(test_onnx_training_momentum_modes_and_steps) {
  tg_scope_begin();
  const double alpha = 0.9, beta = 0.5, norm = 0.1, r = 0.2;
  for (int nesterov = 0; nesterov < 2; nesterov++) {
    tg_onnx *m = optimizer_model("Momentum", 3, (const char *[]){"X", "G", "V"}, 3, MOMENTUM_ATTRS,
                                 (const float[]){0.9f, 0.5f, 0.1f}, nesterov ? "nesterov" : "standard");
    CHECK_T(m);
    for (int64_t t = 0; t <= 2; t += 2) {
      tg_tensor *out[4] = {0};
      CHECK(run_optimizer(m, 0.2f, t, 1, out), "T=%lld: %s", (long long)t, tg_error());
      double x[4], v[4];
      for (int i = 0; i < 4; i++) {
        double a = (float)alpha, g = (float)norm * X[i] + G[i], b = t > 0 ? (float)beta : 1.0;
        v[i] = a * S1[i] + b * g;
        x[i] = X[i] - (float)r * (nesterov ? g + a * v[i] : v[i]);
      }
      CHECK(close_to("X1_new", out[0], 1, x) && close_to("X2_new", out[1], 3, x + 1), "nesterov %d T=%lld", nesterov,
            (long long)t);
      CHECK(close_to("V1_new", out[2], 1, v) && close_to("V2_new", out[3], 3, v + 1), "nesterov %d T=%lld", nesterov,
            (long long)t);
      for (int i = 0; i < 4; i++) tg_free(out[i]);
    }
    tg_onnx_free(m);
  }
  tg_scope_end();
}

TEST(test_onnx_training_adagrad_decay_float_and_double) {
  for (int dbl = 0; dbl < 2; dbl++) {
    tg_scope_begin();
    opt_elem = dbl ? ONNX_DOUBLE : ONNX_FLOAT;
    tg_onnx *m = optimizer_model("Adagrad", 3, (const char *[]){"X", "G", "H"}, 3,
                                 (const char *[]){"decay_factor", "epsilon", "norm_coefficient"},
                                 (const float[]){0.5f, 1e-2f, 0.1f}, NULL);
    CHECK_T(m);
    tg_tensor *out[4] = {0};
    CHECK(run_optimizer(m, 0.3f, 4, 1, out), "%s", tg_error());
    double x[4], h[4];
    for (int i = 0; i < 4; i++) {
      double rate = (double)0.3f / (1 + 4 * (double)0.5f), g = (double)0.1f * X[i] + G[i];
      h[i] = S1[i] + g * g;
      x[i] = X[i] - rate * g / (sqrt(h[i]) + (double)1e-2f);
    }
    CHECK(close_to("X1_new", out[0], 1, x) && close_to("X2_new", out[1], 3, x + 1), "X");
    CHECK(close_to("H1_new", out[2], 1, h) && close_to("H2_new", out[3], 3, h + 1), "H");
    tg_dtype want = dbl ? TG_FLOAT64 : TG_FLOAT32;
    CHECK(tg_dtype_of(out[1]) == want && tg_dtype_of(out[3]) == want, "dtype %s", tg_dtype_name(tg_dtype_of(out[1])));
    tg_onnx_free(m);
    opt_elem = ONNX_FLOAT;
    tg_scope_end();
  }
}

TEST(test_onnx_training_optimizer_refusals) {
  tg_scope_begin();
  tg_tensor *out[4] = {0};
  tg_onnx *m = optimizer_model("Momentum", 3, (const char *[]){"X", "G", "V"}, 3, MOMENTUM_ATTRS,
                               (const float[]){0.9f, 0.5f, 0.1f}, "heavy");
  CHECK_T(m);
  CHECK(!run_optimizer(m, 0.1f, 1, 1, out) && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "mode 'heavy'"),
        "bad mode: %s", tg_error());
  tg_onnx_free(m);
  m = optimizer_model("Momentum", 3, (const char *[]){"X", "G", "V"}, 2, (const char *[]){"alpha", "beta"},
                      (const float[]){0.9f, 0.5f}, "standard");
  CHECK_T(m);
  CHECK(!run_optimizer(m, 0.1f, 1, 1, out) && strstr(tg_error(), "'norm_coefficient' is required"), "missing: %s",
        tg_error());
  tg_onnx_free(m);
  tg_scope_end();
}

/* ---- Gradient ----------------------------------------------------------------------------------------- */

/* c = a + b; d = c * a; e = Neg(d) (d's last reader before Gradient); dd/da, dd/db, dd/dz by Gradient(y = d),
 * with a, b, z float (3); z plays no part in d. outputs e, da, db, dz */
static tg_onnx *gradient_model(const char *y) {
  pbw g = {0};
  pbw n1 = onnx_w_node("Add", (const char *[]){"a", "b", NULL, "c", NULL});
  pbw n2 = onnx_w_node("Mul", (const char *[]){"c", "a", NULL, "d", NULL});
  pbw n3 = onnx_w_node("Neg", (const char *[]){"d", NULL, "e", NULL});
  pbw n4 = onnx_w_node("Gradient", (const char *[]){"a", "b", "z", NULL, "da", "db", "dz", NULL});
  pbw_str(&n4, 3, "grad");
  pbw_str(&n4, 7, TRAINING);
  attr_strings(&n4, "xs", 3, (const char *[]){"a", "b", "z"});
  onnx_w_attr_string(&n4, "y", y);
  pbw_msg(&g, ONNX_G_NODE, &n1);
  pbw_msg(&g, ONNX_G_NODE, &n2);
  pbw_msg(&g, ONNX_G_NODE, &n3);
  pbw_msg(&g, ONNX_G_NODE, &n4);
  pbw_str(&g, ONNX_G_NAME, "grad");
  const int64_t three = 3;
  const char *const ins[] = {"a", "b", "z"}, *const outs[] = {"e", "da", "db", "dz"};
  for (int i = 0; i < 3; i++) add_value(&g, ONNX_G_INPUT, ins[i], ONNX_FLOAT, 1, &three);
  for (int i = 0; i < 4; i++) add_value(&g, ONNX_G_OUTPUT, outs[i], ONNX_FLOAT, 1, &three);
  return load_model(&g);
}

TEST(test_onnx_training_gradient_of_a_vector) {
  tg_scope_begin();
  tg_onnx *m = gradient_model("d");
  CHECK_T(m);
  const float a[3] = {1, -2, 0.5f}, b[3] = {3, 4, -1}, z[3] = {7, 8, 9};
  tg_tensor *in[3] = {f32(3, a), f32(3, b), f32(3, z)}, *out[4] = {0};
  CHECK(tg_onnx_run(m, 3, (const char *[]){"a", "b", "z"}, in, out) == TG_OK, "%s", tg_error());
  /* y = d is not a scalar: its sum is differentiated, d(sum((a + b) a))/da = 2a + b, /db = a, /dz = 0 */
  double e[3], da[3], db[3], dz[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    e[i] = -(double)(a[i] + b[i]) * a[i];
    da[i] = 2.0 * a[i] + b[i];
    db[i] = a[i];
  }
  CHECK(close_to("e", out[0], 3, e), "e");
  CHECK(close_to("da", out[1], 3, da) && close_to("db", out[2], 3, db) && close_to("dz", out[3], 3, dz), "grads");
  for (int i = 0; i < 4; i++) tg_free(out[i]);
  tg_onnx_free(m);
  tg_scope_end();
}

TEST(test_onnx_training_gradient_refusals) {
  tg_onnx *m = gradient_model("nowhere");
  CHECK(!m && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "attribute y reads 'nowhere'"), "undefined y: %s",
        tg_error());
  tg_onnx_free(m);
}

/* every allocation of a run failing in turn (models loaded once): the run fails with a message and no outputs,
 * or succeeds with all of them; nothing leaks (the ASan run checks) */
static void fault_runs(const char *what, tg_onnx *m, int nin, const char *const *names, tg_tensor *const *in,
                       int nout) {
  int64_t k = 1;
  for (; k < 20000; k++) {
    tg_tensor *outs[8] = {0};
    tg_error_clear();
    mem_fail_at(k);
    tg_status st = tg_onnx_run(m, nin, names, in, outs);
    bool failed = mem_failed();
    mem_fail_at(0);
    bool none = true, all = true;
    for (int i = 0; i < nout; i++) none = none && !outs[i], all = all && outs[i];
    if (st != TG_OK) CHECK(failed && tg_error()[0] && none, "%s: allocation %lld: %s", what, (long long)k, tg_error());
    else CHECK(all, "%s: allocation %lld: outputs missing", what, (long long)k);
    for (int i = 0; i < 8; i++) tg_free(outs[i]);
    if (!failed) break;
  }
  CHECK(k > 5 && k < 20000, "%s: %lld allocations", what, (long long)k);
}

TEST(test_onnx_training_fault_every_allocation_of_a_run) {
  tg_scope_begin();
  tg_onnx *m = gradient_model("d");
  CHECK_T(m);
  const float v[3] = {1, 2, 3};
  tg_tensor *in[3] = {f32(3, v), f32(3, v), f32(3, v)};
  fault_runs("Gradient", m, 3, (const char *[]){"a", "b", "z"}, in, 4);
  tg_onnx_free(m);
  const char *const an[] = {"alpha", "beta"};
  m = optimizer_model("Adam", 4, (const char *[]){"X", "G", "V", "H"}, 2, an, (const float[]){0.9f, 0.99f}, NULL);
  CHECK_T(m);
  float r = 0.1f;
  int64_t t = 2;
  tg_tensor *oin[10] = {tg_from_data(TG_FLOAT32, 0, NULL, &r, sizeof r), tg_from_data(TG_INT64, 0, NULL, &t, sizeof t)};
  const char *names[10];
  for (int i = 0; i < 10; i++) {
    if (i >= 2) oin[i] = i % 2 ? f32(3, v) : f32(1, v);
    tg_onnx_io io;
    tg_onnx_input(m, i, &io);
    names[i] = io.name;
  }
  fault_runs("Adam", m, 10, names, oin, 6);
  tg_onnx_free(m);
  tg_scope_end();
}
