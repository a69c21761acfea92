/* test_onnx.c — the ONNX runner (src/onnx/): models built here with a small protobuf writer (onnx_pbw.h) and
 * loaded from memory or files, their inputs and outputs, runs with good and bad inputs, initializers from
 * every data field and from external files, the control operators (Constant, If, Loop), and every kind of
 * malformed file refused with a message (the suite runs under ASan/UBSan: a read past the end fails too).
 * Operators other than the runner's own come from other files; these tests use Identity, Constant, If, Loop. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_pbw.h"
#include "test.h"
#include "uop/uop.h"

static const char *const NCHW[] = {"N", NULL};

/* Y = Identity(X), X float (N, 3) */
static pbw model_identity(void) {
  pbw g = {0}, n = onnx_w_node("Identity", (const char *[]){"X", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw_str(&g, ONNX_G_NAME, "g");
  pbw x = onnx_w_value("X", ONNX_FLOAT, 2, (int64_t[]){-1, 3}, NCHW), y = onnx_w_value("Y", ONNX_FLOAT, 2, (int64_t[]){-1, 3}, NCHW);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  return onnx_w_model(13, &g);
}

static tg_onnx *load(pbw *m) {
  tg_onnx *o = tg_onnx_load_memory(m->b, m->n, NULL);
  pbw_free(m);
  return o;
}

/* the model fails to load with code st and a message containing want */
#define CHECK_REFUSED(o, st, want)                                                                           \
  do {                                                                                                       \
    CHECK(!(o), "loaded, expected a refusal with '%s'", want);                                               \
    CHECK(tg_error_status() == (st), "status %d, expected %d: %s", (int)tg_error_status(), (int)(st), tg_error()); \
    CHECK(strstr(tg_error(), want), "message '%s' lacks '%s'", tg_error(), want);                           \
    tg_onnx_free(o);                                                                                         \
  } while (0)

static bool host_f32(tg_tensor *t, float *out, int64_t n) {
  return t && tg_numel(t) == n && tg_dtype_of(t) == TG_FLOAT32 && tg_to_host(t, out, (size_t)n * 4) == TG_OK;
}

TEST(test_onnx_identity_io_and_run) {
  pbw mb = model_identity();
  tg_onnx *m = load(&mb);
  CHECK_T(m);
  CHECK(tg_onnx_num_inputs(m) == 1 && tg_onnx_num_outputs(m) == 1, "io counts %d %d", tg_onnx_num_inputs(m), tg_onnx_num_outputs(m));
  tg_onnx_io io;
  CHECK(tg_onnx_input(m, 0, &io) == TG_OK, "%s", tg_error());
  CHECK(!strcmp(io.name, "X") && io.dtype == TG_FLOAT32 && io.ndim == 2, "input %s %d %d", io.name, io.dtype, io.ndim);
  CHECK(io.shape[0] == -1 && io.dim_names[0] && !strcmp(io.dim_names[0], "N") && io.shape[1] == 3 && !io.dim_names[1], "dims");
  CHECK(tg_onnx_output(m, 0, &io) == TG_OK && !strcmp(io.name, "Y"), "output");
  CHECK(tg_onnx_input(m, 1, &io) == TG_ERR_ARG && tg_onnx_output(m, -1, &io) == TG_ERR_ARG, "out of range io");
  float xs[6] = {1, 2, 3, 4, 5, 6}, ys[6];
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, xs, sizeof xs), *y = NULL;
  CHECK(tg_onnx_run(m, 1, (const char *[]){"X"}, &x, &y) == TG_OK, "%s", tg_error());
  CHECK(host_f32(y, ys, 6) && !memcmp(xs, ys, sizeof xs), "values");
  tg_free(y);
  /* inside a scope: outputs belong to it, the input stays the caller's */
  tg_scope_begin();
  CHECK(tg_onnx_run(m, 1, (const char *[]){"X"}, &x, &y) == TG_OK, "%s", tg_error());
  tg_scope_end();
  CHECK(host_f32(x, ys, 6) && ys[5] == 6, "the input survives the scope");
  tg_free(x);
  tg_onnx_free(m);
  CHECK(tg_onnx_num_inputs(NULL) == -1 && tg_onnx_num_outputs(NULL) == -1, "NULL model");
  tg_onnx_free(NULL);
}

TEST(test_onnx_run_refuses_bad_inputs) {
  /* Y = Identity(X) with X (N, 3), W = Identity(Z) with Z (N) int64 */
  pbw g = {0}, n1 = onnx_w_node("Identity", (const char *[]){"X", NULL, "Y", NULL}),
      n2 = onnx_w_node("Identity", (const char *[]){"Z", NULL, "W", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n1);
  pbw_msg(&g, ONNX_G_NODE, &n2);
  pbw x = onnx_w_value("X", ONNX_FLOAT, 2, (int64_t[]){-1, 3}, NCHW), z = onnx_w_value("Z", ONNX_INT64, 1, (int64_t[]){-1}, NCHW);
  pbw y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL), w = onnx_w_value("W", ONNX_INT64, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  pbw_msg(&g, ONNX_G_INPUT, &z);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw_msg(&g, ONNX_G_OUTPUT, &w);
  pbw mb = onnx_w_model(13, &g);
  tg_onnx *m = load(&mb);
  CHECK_T(m);
  tg_tensor *x23 = tg_zeros(TG_FLOAT32, 2, (int64_t[]){2, 3}), *x24 = tg_zeros(TG_FLOAT32, 2, (int64_t[]){2, 4});
  tg_tensor *xi = tg_zeros(TG_INT32, 2, (int64_t[]){2, 3}), *x3 = tg_zeros(TG_FLOAT32, 3, (int64_t[]){2, 3, 1});
  tg_tensor *z2 = tg_zeros(TG_INT64, 1, (int64_t[]){2}), *z5 = tg_zeros(TG_INT64, 1, (int64_t[]){5});
  tg_tensor *out[2] = {0};
  struct { const char *names[3]; tg_tensor *ts[3]; int n; const char *want; } cases[] = {
      {{"X"}, {x23}, 1, "input 'Z' is not given"},
      {{"X", "Q"}, {x23, z2}, 2, "no input 'Q'"},
      {{"X", "X"}, {x23, x23}, 2, "given twice"},
      {{"X", "Z"}, {xi, z2}, 2, "is int32, the model declares float32"},
      {{"X", "Z"}, {x24, z2}, 2, "declares (-1, 3)"},
      {{"X", "Z"}, {x3, z2}, 2, "declares 2 dims"},
      {{"X", "Z"}, {x23, z5}, 2, "dimension 'N' of size 5, input 'X' gave it size 2"},
      {{"X", "Z"}, {x23, NULL}, 2, "is NULL"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tg_error_clear();
    tg_status st = tg_onnx_run(m, cases[i].n, cases[i].names, cases[i].ts, out);
    CHECK(st == TG_ERR_ARG && strstr(tg_error(), cases[i].want), "case %zu: status %d, '%s' lacks '%s'", i, (int)st, tg_error(), cases[i].want);
    CHECK(!out[0] && !out[1], "case %zu: outputs left behind", i);
  }
  CHECK(tg_onnx_run(m, 2, (const char *[]){"Z", "X"}, (tg_tensor *[]){z2, x23}, out) == TG_OK, "%s", tg_error());
  CHECK(out[0] && out[1] && tg_dtype_of(out[1]) == TG_INT64 && tg_shape(out[1], 0) == 2, "outputs in graph order");
  tg_free(out[0]);
  tg_free(out[1]);
  tg_free(x23); tg_free(x24); tg_free(xi); tg_free(x3); tg_free(z2); tg_free(z5);
  tg_onnx_free(m);
}

/* a model whose output Y is the initializer (a TensorProto t, freed) through Identity */
static tg_onnx *model_of_initializer(pbw *t, const char *dir) {
  pbw g = {0}, n = onnx_w_node("Identity", (const char *[]){"W", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw_msg(&g, ONNX_G_INIT, t);
  pbw y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw mb = onnx_w_model(13, &g);
  tg_onnx *m = tg_onnx_load_memory(mb.b, mb.n, dir);
  pbw_free(&mb);
  return m;
}

/* runs a model without inputs; output 0 as a new tensor */
static tg_tensor *run0(tg_onnx *m) {
  tg_tensor *out[4] = {0};
  if (!m || tg_onnx_run(m, 0, NULL, NULL, out) != TG_OK) return NULL;
  for (int i = 1; i < 4; i++) tg_free(out[i]);
  return out[0];
}

static double elem(tg_tensor *t, int64_t i) {
  tg_tensor *r = tg_reshape(t, 1, (int64_t[]){-1}), *f = tg_cast(r, TG_FLOAT64);
  double buf[64] = {0};
  if (f && tg_numel(f) <= 64) tg_to_host(f, buf, (size_t)tg_numel(f) * 8);
  tg_free(r);
  tg_free(f);
  return buf[i];
}

TEST(test_onnx_initializers_from_every_field) {
  struct { int dtype; int field; uint64_t vals[3]; tg_dtype dt; double want[3]; } cases[] = {
      {ONNX_INT64, 7, {5, (uint64_t)-7, 1ull << 40}, TG_INT64, {5, -7, 1099511627776.0}},
      {ONNX_INT32, 5, {1, (uint64_t)-2, 3}, TG_INT32, {1, -2, 3}},
      {ONNX_INT8, 5, {(uint64_t)-128, 127, 0}, TG_INT8, {-128, 127, 0}},
      {ONNX_UINT8, 5, {255, 1, 0}, TG_UINT8, {255, 1, 0}},
      {ONNX_BOOL, 5, {1, 0, 1}, TG_BOOL, {1, 0, 1}},
      {ONNX_FLOAT16, 5, {0x3c00, 0xc000, 0x3800}, TG_FLOAT16, {1, -2, 0.5}},
      {ONNX_UINT32, 11, {4000000000u, 1, 2}, TG_UINT32, {4000000000.0, 1, 2}},
      {ONNX_UINT64, 11, {1, 2, 3}, TG_UINT64, {1, 2, 3}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    pbw t = onnx_w_tensor("W", cases[i].dtype, 1, (int64_t[]){3}, NULL, 0);
    for (int k = 0; k < 3; k++) pbw_int(&t, (uint32_t)cases[i].field, (int64_t)cases[i].vals[k]);
    tg_onnx *m = model_of_initializer(&t, NULL);
    tg_tensor *y = run0(m);
    CHECK(y && tg_dtype_of(y) == cases[i].dt, "case %zu: %s", i, tg_error());
    for (int k = 0; y && k < 3; k++) CHECK(elem(y, k) == cases[i].want[k], "case %zu[%d]: %g, want %g", i, k, elem(y, k), cases[i].want[k]);
    tg_free(y);
    tg_onnx_free(m);
  }
  /* float_data packed, double_data unpacked, raw_data */
  pbw t = onnx_w_tensor("W", ONNX_FLOAT, 2, (int64_t[]){1, 2}, NULL, 0);
  float fv[2] = {1.5f, -3};
  pbw_bytes(&t, 4, fv, sizeof fv);
  tg_onnx *m = model_of_initializer(&t, NULL);
  tg_tensor *y = run0(m);
  CHECK(y && tg_ndim(y) == 2 && elem(y, 0) == 1.5 && elem(y, 1) == -3, "float_data: %s", tg_error());
  tg_free(y);
  tg_onnx_free(m);
  t = onnx_w_tensor("W", ONNX_DOUBLE, 0, NULL, NULL, 0);
  pbw_key(&t, 10, 1);
  double dv = 2.25;
  pbw_raw(&t, &dv, 8);
  m = model_of_initializer(&t, NULL);
  y = run0(m);
  CHECK(y && tg_dtype_of(y) == TG_FLOAT64 && tg_ndim(y) == 0 && elem(y, 0) == 2.25, "double_data: %s", tg_error());
  tg_free(y);
  tg_onnx_free(m);
  /* a big raw tensor (wrapped, not copied, when aligned) and an empty one */
  enum { BIG = 3000 };
  float *big = malloc(BIG * 4);
  for (int k = 0; k < BIG; k++) big[k] = (float)k;
  t = onnx_w_tensor("W", ONNX_FLOAT, 1, (int64_t[]){BIG}, big, BIG * 4);
  m = model_of_initializer(&t, NULL);
  y = run0(m);
  float *back = malloc(BIG * 4);
  CHECK(host_f32(y, back, BIG) && !memcmp(big, back, BIG * 4), "big raw_data: %s", tg_error());
  tg_free(y);
  tg_onnx_free(m);
  free(big);
  free(back);
  t = onnx_w_tensor("W", ONNX_FLOAT, 2, (int64_t[]){0, 3}, NULL, 0);
  m = model_of_initializer(&t, NULL);
  y = run0(m);
  CHECK(y && tg_numel(y) == 0 && tg_shape(y, 1) == 3, "empty tensor: %s", tg_error());
  tg_free(y);
  tg_onnx_free(m);
}

/* Y = Constant(attr) */
static tg_tensor *constant_of(void (*attr)(pbw *node), tg_onnx **keep) {
  pbw g = {0}, n = onnx_w_node("Constant", (const char *[]){NULL, "Y", NULL});
  attr(&n);
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw mb = onnx_w_model(13, &g);
  tg_onnx *m = load(&mb);
  tg_tensor *r = run0(m);
  *keep = m;
  return r;
}
static void attr_ints(pbw *n) { onnx_w_attr_ints(n, "value_ints", 3, (int64_t[]){4, -5, 6}); }
static void attr_float(pbw *n) { onnx_w_attr_float(n, "value_float", 0.25f); }
static void attr_string(pbw *n) { onnx_w_attr_string(n, "value_string", "hi"); }
static void attr_tensor(pbw *n) {
  int32_t v[2] = {7, 8};
  pbw t = onnx_w_tensor("", ONNX_INT32, 1, (int64_t[]){2}, v, sizeof v);
  onnx_w_attr_msg(n, "value", 4, &t);
}

TEST(test_onnx_constant) {
  tg_onnx *m;
  tg_tensor *y = constant_of(attr_ints, &m);
  CHECK(y && tg_dtype_of(y) == TG_INT64 && tg_numel(y) == 3 && elem(y, 1) == -5, "value_ints: %s", tg_error());
  tg_free(y);
  tg_onnx_free(m);
  y = constant_of(attr_float, &m);
  CHECK(y && tg_dtype_of(y) == TG_FLOAT32 && tg_ndim(y) == 0 && elem(y, 0) == 0.25, "value_float: %s", tg_error());
  tg_free(y);
  tg_onnx_free(m);
  y = constant_of(attr_tensor, &m);
  CHECK(y && tg_dtype_of(y) == TG_INT32 && elem(y, 1) == 8, "value: %s", tg_error());
  tg_free(y);
  tg_onnx_free(m);
  tg_error_clear();
  y = constant_of(attr_string, &m);
  CHECK(!y && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "string"), "value_string: %s", tg_error());
  tg_onnx_free(m);
}

/* a graph whose one output Y is Constant value_int v */
static pbw branch(const char *name, int64_t v) {
  pbw g = {0}, n = onnx_w_node("Constant", (const char *[]){NULL, name, NULL});
  pbw a = {0};
  pbw_str(&a, 1, "value_int");
  pbw_int(&a, 3, v);
  pbw_int(&a, 20, 2);
  pbw_msg(&n, 5, &a);
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw y = onnx_w_value(name, ONNX_INT64, 0, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  return g;
}

TEST(test_onnx_if_picks_a_branch_on_the_host) {
  pbw g = {0}, n = onnx_w_node("If", (const char *[]){"C", NULL, "Y", NULL});
  pbw tb = branch("a", 11), eb = branch("b", 22);
  onnx_w_attr_msg(&n, "then_branch", 5, &tb);
  onnx_w_attr_msg(&n, "else_branch", 5, &eb);
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw c = onnx_w_value("C", ONNX_BOOL, 0, NULL, NULL), y = onnx_w_value("Y", ONNX_INT64, 0, NULL, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &c);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw mb = onnx_w_model(16, &g);
  tg_onnx *m = load(&mb);
  CHECK_T(m);
  for (int cond = 0; cond < 2; cond++) {
    bool b = cond;
    tg_tensor *ct = tg_from_data(TG_BOOL, 0, NULL, &b, 1), *out = NULL;
    CHECK(tg_onnx_run(m, 1, (const char *[]){"C"}, &ct, &out) == TG_OK, "%s", tg_error());
    CHECK(out && elem(out, 0) == (cond ? 11 : 22), "cond %d: %g", cond, out ? elem(out, 0) : -1);
    tg_free(out);
    tg_free(ct);
  }
  tg_onnx_free(m);
}

TEST(test_onnx_loop_carries_values_and_stacks_scans) {
  /* body(i, cond, v) -> (cond, v, i): 3 iterations keep v, the scan output stacks i = 0, 1, 2 */
  pbw body = {0};
  pbw n1 = onnx_w_node("Identity", (const char *[]){"cond_in", NULL, "cond_out", NULL});
  pbw n2 = onnx_w_node("Identity", (const char *[]){"v_in", NULL, "v_out", NULL});
  pbw n3 = onnx_w_node("Identity", (const char *[]){"i", NULL, "scan", NULL});
  pbw_msg(&body, ONNX_G_NODE, &n1);
  pbw_msg(&body, ONNX_G_NODE, &n2);
  pbw_msg(&body, ONNX_G_NODE, &n3);
  const char *ins[] = {"i", "cond_in", "v_in"}, *outs[] = {"cond_out", "v_out", "scan"};
  int itypes[] = {ONNX_INT64, ONNX_BOOL, ONNX_FLOAT}, otypes[] = {ONNX_BOOL, ONNX_FLOAT, ONNX_INT64};
  for (int k = 0; k < 3; k++) {
    pbw v = onnx_w_value(ins[k], itypes[k], -1, NULL, NULL), o = onnx_w_value(outs[k], otypes[k], -1, NULL, NULL);
    pbw_msg(&body, ONNX_G_INPUT, &v);
    pbw_msg(&body, ONNX_G_OUTPUT, &o);
  }
  pbw g = {0}, n = onnx_w_node("Loop", (const char *[]){"M", "C", "V", NULL, "VF", "S", NULL});
  onnx_w_attr_msg(&n, "body", 5, &body);
  pbw_msg(&g, ONNX_G_NODE, &n);
  int64_t three = 3;
  bool yes = true;
  pbw mt = onnx_w_tensor("M", ONNX_INT64, 0, NULL, &three, 8), ct = onnx_w_tensor("C", ONNX_BOOL, 0, NULL, &yes, 1);
  pbw_msg(&g, ONNX_G_INIT, &mt);
  pbw_msg(&g, ONNX_G_INIT, &ct);
  pbw v = onnx_w_value("V", ONNX_FLOAT, 1, (int64_t[]){2}, NULL), mi = onnx_w_value("M", ONNX_INT64, 0, NULL, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &v);
  pbw_msg(&g, ONNX_G_INPUT, &mi);
  pbw vf = onnx_w_value("VF", ONNX_FLOAT, -1, NULL, NULL), s = onnx_w_value("S", ONNX_INT64, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &vf);
  pbw_msg(&g, ONNX_G_OUTPUT, &s);
  pbw mb = onnx_w_model(16, &g);
  tg_onnx *m = load(&mb);
  CHECK_T(m);
  CHECK(tg_onnx_num_inputs(m) == 1, "initializers are not inputs: %d", tg_onnx_num_inputs(m));
  float vv[2] = {1, 2};
  tg_tensor *vt = tg_from_data(TG_FLOAT32, 1, (int64_t[]){2}, vv, 8), *out[2] = {0};
  CHECK(tg_onnx_run(m, 1, (const char *[]){"V"}, &vt, out) == TG_OK, "%s", tg_error());
  CHECK(out[0] && elem(out[0], 1) == 2, "carried value");
  CHECK(out[1] && tg_ndim(out[1]) == 1 && tg_shape(out[1], 0) == 3 && elem(out[1], 2) == 2, "scan output");
  tg_free(out[0]);
  tg_free(out[1]);
  /* an initializer's input can be overridden: M = 1 */
  int64_t one = 1;
  tg_tensor *mt1 = tg_from_data(TG_INT64, 0, NULL, &one, 8);
  CHECK(tg_onnx_run(m, 2, (const char *[]){"V", "M"}, (tg_tensor *[]){vt, mt1}, out) == TG_OK, "%s", tg_error());
  CHECK(out[1] && tg_shape(out[1], 0) == 1, "M given by the caller");
  tg_free(out[0]);
  tg_free(out[1]);
  tg_free(mt1);
  /* ... checked as any input */
  tg_tensor *mf = tg_zeros(TG_FLOAT32, 0, NULL);
  out[0] = out[1] = NULL;
  CHECK(tg_onnx_run(m, 2, (const char *[]){"V", "M"}, (tg_tensor *[]){vt, mf}, out) == TG_ERR_ARG &&
        strstr(tg_error(), "input 'M' is float32, the model declares int64"), "M of the wrong dtype: %s", tg_error());
  CHECK(!out[0] && !out[1], "outputs of a refused run");
  tg_free(mf);
  tg_free(vt);
  tg_onnx_free(m);
}

/* ---- external data ---------------------------------------------------------------------------------------- */

static bool write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* a float (n) initializer W in external file loc at offset, length len (-1: not given) */
static pbw external_tensor(const char *loc, int64_t n, long long offset, long long len) {
  pbw t = onnx_w_tensor("W", ONNX_FLOAT, 1, (int64_t[]){n}, NULL, 0);
  char num[32];
  pbw e = {0};
  pbw_str(&e, 1, "location");
  pbw_str(&e, 2, loc);
  pbw_msg(&t, 13, &e);
  snprintf(num, sizeof num, "%lld", offset);
  pbw_str(&e, 1, "offset");
  pbw_str(&e, 2, num);
  pbw_msg(&t, 13, &e);
  if (len >= 0) {
    snprintf(num, sizeof num, "%lld", len);
    pbw_str(&e, 1, "length");
    pbw_str(&e, 2, num);
    pbw_msg(&t, 13, &e);
  }
  pbw_int(&t, 14, 1);
  return t;
}

TEST(test_onnx_external_data) {
  char dir[512], path[700];
  if (!test_temp_dir(dir, sizeof dir)) {
    test_skip("no temporary directory");
    return;
  }
  enum { N = 2048 };   /* 8 KiB: mapped and wrapped, not copied */
  float *w = malloc(N * 4 + 64);
  for (int i = 0; i < N + 16; i++) w[i] = (float)i * 0.5f;
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  CHECK(write_file(path, w, N * 4 + 64), "writing %s", path);
  /* offset 64: the first 16 floats skipped */
  pbw t = external_tensor("weights.bin", N, 64, N * 4);
  pbw g = {0}, n = onnx_w_node("Identity", (const char *[]){"W", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw_msg(&g, ONNX_G_INIT, &t);
  pbw y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw mb = onnx_w_model(13, &g);
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  CHECK(write_file(path, mb.b, mb.n), "writing %s", path);
  tg_onnx *m = tg_onnx_load(path);
  tg_tensor *out = run0(m);
  float *back = malloc(N * 4);
  CHECK(host_f32(out, back, N) && !memcmp(back, w + 16, N * 4), "values from the external file: %s", tg_error());
  tg_onnx_free(m);
  /* the output may read the mapping: it stays valid after the model is freed */
  memset(back, 0, N * 4);
  tg_tensor *twice = tg_mul_scalar(out, 2);
  CHECK(host_f32(twice, back, N) && back[1] == w[17] * 2, "reading after tg_onnx_free");
  tg_free(twice);
  tg_free(out);
  /* from memory with the directory given; without it refused */
  m = tg_onnx_load_memory(mb.b, mb.n, dir);
  out = run0(m);
  CHECK(out && tg_numel(out) == N, "load_memory with dir: %s", tg_error());
  tg_free(out);
  tg_onnx_free(m);
  m = tg_onnx_load_memory(mb.b, mb.n, NULL);
  CHECK_REFUSED(m, TG_ERR_IO, "without a directory");
  pbw_free(&mb);
  struct { const char *loc; long long off, len; const char *want; } bad[] = {
      {"../weights.bin", 0, -1, "leaves the model's directory"},
      {"sub/../../x", 0, -1, "leaves the model's directory"},
      {"/etc/passwd", 0, -1, "relative path"},
      {"weights.bin", N * 4 + 128, -1, "past the end"},
      {"weights.bin", 128, -1, "runs past the end"},
      {"weights.bin", 0, 100, "length 100"},
      {"weights.bin", -4, -1, "negative"},
      {"missing.bin", 0, -1, "missing.bin"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    pbw bt = external_tensor(bad[i].loc, N, bad[i].off, bad[i].len);
    tg_error_clear();
    m = model_of_initializer(&bt, dir);
    CHECK(!m && tg_error_status() == TG_ERR_IO && strstr(tg_error(), bad[i].want), "case %zu: '%s' lacks '%s'", i, tg_error(), bad[i].want);
    tg_onnx_free(m);
  }
  /* a symbolic link in the directory that leads out of it */
  snprintf(path, sizeof path, "%s/link.bin", dir);
  if (symlink("/etc/hostname", path) == 0) {
    pbw bt = external_tensor("link.bin", 1, 0, -1);
    m = model_of_initializer(&bt, dir);
    CHECK(!m && strstr(tg_error(), "outside the model's directory"), "symlink out: %s", tg_error());
    tg_onnx_free(m);
  }
  free(w);
  free(back);
  test_remove_dir(dir);
}

/* ---- malformed files ---------------------------------------------------------------------------------------- */

TEST(test_onnx_truncated_at_every_byte_is_refused) {
  pbw mb = model_identity();
  for (size_t cut = 0; cut < mb.n; cut++) {
    tg_error_clear();
    tg_onnx *m = tg_onnx_load_memory(mb.b, cut, NULL);
    CHECK(!m && tg_error_status() == TG_ERR_IO && tg_error()[0], "cut at %zu of %zu: status %d '%s'", cut, mb.n,
          (int)tg_error_status(), tg_error());
    tg_onnx_free(m);
  }
  tg_onnx *m = tg_onnx_load_memory(mb.b, mb.n, NULL);
  CHECK(m, "the whole file loads: %s", tg_error());
  tg_onnx_free(m);
  pbw_free(&mb);
}

/* a model of bytes: the graph of model_identity with extra bytes appended inside the graph message */
static tg_onnx *identity_with_graph_bytes(const void *extra, size_t n) {
  pbw g = {0}, nd = onnx_w_node("Identity", (const char *[]){"X", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &nd);
  pbw x = onnx_w_value("X", ONNX_FLOAT, 1, (int64_t[]){3}, NULL), y = onnx_w_value("Y", ONNX_FLOAT, 1, (int64_t[]){3}, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw_raw(&g, extra, n);
  pbw mb = onnx_w_model(13, &g);
  return load(&mb);
}

TEST(test_onnx_malformed_wire_format_is_refused) {
  struct { const char *bytes; size_t n; const char *want; } cases[] = {
      {"\x3e\x01", 2, "wire type 6"},                                             /* field 7, wire type 6 */
      {"\x3b\x01", 2, "wire type 3"},                                             /* a group */
      {"\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11, "64 bits"},            /* varint overflow */
      {"\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "64 bits"},        /* 11-byte varint */
      {"\x12\x05" "ab", 4, "says 5 bytes, 2 are left"},                           /* a length past the end */
      {"\x12\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10, "left"},                   /* a huge length */
      {"\x15\x01\x02", 3, "runs past the end"},                                   /* fixed32 cut */
      {"\x00\x01", 2, "field number 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tg_error_clear();
    tg_onnx *m = identity_with_graph_bytes(cases[i].bytes, cases[i].n);
    CHECK_REFUSED(m, TG_ERR_IO, cases[i].want);
  }
  /* unknown fields of every wire type are skipped */
  const char unknown[] = "\xa0\x06\x05" "\xa9\x06" "12345678" "\xb2\x06\x02xy" "\xbd\x06" "1234";
  tg_onnx *m = identity_with_graph_bytes(unknown, sizeof unknown - 1);
  CHECK(m, "unknown fields: %s", tg_error());
  tg_onnx_free(m);
  /* not a model at all */
  m = tg_onnx_load_memory("hello", 5, NULL);
  CHECK_REFUSED(m, TG_ERR_IO, "");
  m = tg_onnx_load_memory("", 0, NULL);
  CHECK_REFUSED(m, TG_ERR_IO, "0 graphs");
}

TEST(test_onnx_nesting_is_limited) {
  /* If nodes nested 80 deep in then_branch: refused, not a stack overflow */
  pbw g = branch("Y", 1);
  for (int d = 0; d < 80; d++) {
    pbw outer = {0}, n = onnx_w_node("If", (const char *[]){"C", NULL, "Y", NULL}), e = branch("Y", 2);
    onnx_w_attr_msg(&n, "then_branch", 5, &g);
    onnx_w_attr_msg(&n, "else_branch", 5, &e);
    pbw_msg(&outer, ONNX_G_NODE, &n);
    pbw y = onnx_w_value("Y", ONNX_INT64, 0, NULL, NULL);
    pbw_msg(&outer, ONNX_G_OUTPUT, &y);
    g = outer;
  }
  pbw c = onnx_w_value("C", ONNX_BOOL, 0, NULL, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &c);
  pbw mb = onnx_w_model(13, &g);
  tg_onnx *m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_IO, "nested deeper");
}

TEST(test_onnx_bad_tensors_are_refused) {
  float two[2] = {1, 2};
  struct { pbw t; const char *want; tg_status st; } cases[] = {
      {onnx_w_tensor("W", ONNX_FLOAT, 1, (int64_t[]){-1}, NULL, 0), "negative", TG_ERR_IO},
      {onnx_w_tensor("W", ONNX_FLOAT, 3, (int64_t[]){1ll << 40, 1ll << 40, 1ll << 40}, NULL, 0), "overflows", TG_ERR_IO},
      {onnx_w_tensor("W", ONNX_FLOAT, 1, (int64_t[]){3}, two, sizeof two), "raw_data has 8 bytes", TG_ERR_IO},
      {onnx_w_tensor("W", ONNX_FLOAT, 1, (int64_t[]){3}, NULL, 0), "0 values", TG_ERR_IO},
      {onnx_w_tensor("W", ONNX_FLOAT, 17, (int64_t[17]){1}, NULL, 0), "17 dims", TG_ERR_ARG},
      {onnx_w_tensor("W", ONNX_STRING, 1, (int64_t[]){1}, NULL, 0), "type string", TG_ERR_ARG},
      {onnx_w_tensor("W", ONNX_INT64, 1, (int64_t[]){2}, two, sizeof two), "int64 tensor with data in field 4", TG_ERR_IO},
  };
  pbw_str(&cases[5].t, 6, "s");
  pbw_bytes(&cases[6].t, 4, two, sizeof two);
  cases[6].t.n -= 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    /* case 6 has raw_data and float_data: the raw_data is dropped by rebuilding without it */
    if (i == 6) {
      pbw_free(&cases[6].t);
      cases[6].t = onnx_w_tensor("W", ONNX_INT64, 1, (int64_t[]){2}, NULL, 0);
      pbw_bytes(&cases[6].t, 4, two, sizeof two);
    }
    tg_error_clear();
    tg_onnx *m = model_of_initializer(&cases[i].t, NULL);
    CHECK(!m && tg_error_status() == cases[i].st && strstr(tg_error(), cases[i].want), "case %zu: status %d '%s' lacks '%s'", i,
          (int)tg_error_status(), tg_error(), cases[i].want);
    tg_onnx_free(m);
  }
  /* a tensor with two data fields */
  pbw t = onnx_w_tensor("W", ONNX_FLOAT, 1, (int64_t[]){2}, two, sizeof two);
  pbw_bytes(&t, 4, two, sizeof two);
  tg_onnx *m = model_of_initializer(&t, NULL);
  CHECK_REFUSED(m, TG_ERR_IO, "more than one field");
}

TEST(test_onnx_bad_graphs_are_refused) {
  /* an operator tgc lacks: named with its domain and opset */
  pbw g = {0}, n = onnx_w_node("NoSuchOp", (const char *[]){"X", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw x = onnx_w_value("X", ONNX_FLOAT, -1, NULL, NULL), y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw mb = onnx_w_model(13, &g);
  tg_onnx *m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_ARG, "operator NoSuchOp (domain 'ai.onnx', opset 13) is not supported");
  /* a node reading a value nothing defines */
  g = (pbw){0};
  n = onnx_w_node("Identity", (const char *[]){"Q", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  mb = onnx_w_model(13, &g);
  m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_IO, "reads 'Q', which no input");
  /* a graph output nothing defines */
  g = (pbw){0};
  y = onnx_w_value("Z", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  mb = onnx_w_model(13, &g);
  m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_IO, "graph output 'Z' is not defined");
  /* an operator inside a subgraph is checked at load too */
  g = (pbw){0};
  pbw tb = {0}, inner = onnx_w_node("Frobnicate", (const char *[]){NULL, "a", NULL}), eb = branch("b", 1);
  pbw_msg(&tb, ONNX_G_NODE, &inner);
  pbw av = onnx_w_value("a", ONNX_INT64, 0, NULL, NULL);
  pbw_msg(&tb, ONNX_G_OUTPUT, &av);
  n = onnx_w_node("If", (const char *[]){"C", NULL, "Y", NULL});
  onnx_w_attr_msg(&n, "then_branch", 5, &tb);
  onnx_w_attr_msg(&n, "else_branch", 5, &eb);
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw c = onnx_w_value("C", ONNX_BOOL, 0, NULL, NULL);
  y = onnx_w_value("Y", ONNX_INT64, 0, NULL, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &c);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  mb = onnx_w_model(13, &g);
  m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_ARG, "operator Frobnicate");
  /* a sequence input */
  g = (pbw){0};
  n = onnx_w_node("Identity", (const char *[]){"X", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw seq = {0}, tp = {0}, st = {0};
  pbw_msg(&tp, 4, &st);
  pbw_str(&seq, 1, "X");
  pbw_msg(&seq, 2, &tp);
  pbw_msg(&g, ONNX_G_INPUT, &seq);
  y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  mb = onnx_w_model(13, &g);
  m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_ARG, "is not a tensor");
  /* a string with a NUL inside */
  g = (pbw){0};
  n = onnx_w_node("Identity", (const char *[]){"X", NULL, "Y", NULL});
  pbw_bytes(&n, 3, "a\0b", 3);
  pbw_msg(&g, ONNX_G_NODE, &n);
  mb = onnx_w_model(13, &g);
  m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_IO, "NUL");
  /* sparse initializers */
  g = (pbw){0};
  pbw sp = {0};
  pbw_msg(&g, 15, &sp);
  mb = onnx_w_model(13, &g);
  m = load(&mb);
  CHECK_REFUSED(m, TG_ERR_ARG, "sparse initializers");
}

/* ---- TensorProto files ---------------------------------------------------------------------------------------- */

TEST(test_onnx_read_tensor_files) {
  int64_t v[3] = {3, -1, 1ll << 50};
  pbw t = onnx_w_tensor("t", ONNX_INT64, 2, (int64_t[]){1, 3}, v, sizeof v);
  tg_tensor *x = tg_onnx_tensor_from_memory(t.b, t.n);
  CHECK(x && tg_dtype_of(x) == TG_INT64 && tg_ndim(x) == 2 && tg_shape(x, 1) == 3, "from memory: %s", tg_error());
  int64_t back[3] = {0};
  CHECK(x && tg_to_host(x, back, sizeof back) == TG_OK && !memcmp(back, v, sizeof v), "values");
  tg_free(x);
  for (size_t cut = 0; cut < t.n; cut++) {
    x = tg_onnx_tensor_from_memory(t.b, cut);
    /* a prefix may be a whole smaller message (fewer dims): then its data must not fit */
    CHECK(!x && tg_error()[0], "cut at %zu: loaded", cut);
    tg_free(x);
  }
  pbw_free(&t);
  x = tg_onnx_read_tensor("/nonexistent/input_0.pb");
  CHECK(!x && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "cannot open"), "missing file: %s", tg_error());
  /* the backend tests' files: input and output of test_identity are equal */
  const char *dir = "/usr/share/libonnx-testdata/data/node/test_identity/test_data_set_0";
  char a[256], b[256];
  snprintf(a, sizeof a, "%s/input_0.pb", dir);
  snprintf(b, sizeof b, "%s/output_0.pb", dir);
  if (access(a, R_OK) != 0) {
    test_skip("ONNX backend test data not found at %s (Debian libonnx-testdata)", dir);
    return;
  }
  tg_tensor *in = tg_onnx_read_tensor(a), *out = tg_onnx_read_tensor(b);
  CHECK(in && out && tg_dtype_of(in) == TG_FLOAT32 && tg_numel(in) == 4 && tg_numel(out) == 4, "%s", tg_error());
  float fi[4], fo[4];
  CHECK(host_f32(in, fi, 4) && host_f32(out, fo, 4) && !memcmp(fi, fo, sizeof fi), "identity's files differ");
  tg_free(in);
  tg_free(out);
}

TEST(test_onnx_backend_model_file_runs) {
  const char *dir = "/usr/share/libonnx-testdata/data/node/test_if";
  char p[256];
  snprintf(p, sizeof p, "%s/model.onnx", dir);
  if (access(p, R_OK) != 0) {
    test_skip("ONNX backend test data not found at %s (Debian libonnx-testdata)", dir);
    return;
  }
  tg_onnx *m = tg_onnx_load(p);
  CHECK_T(m);
  snprintf(p, sizeof p, "%s/test_data_set_0/input_0.pb", dir);
  tg_tensor *c = tg_onnx_read_tensor(p), *out = NULL;
  snprintf(p, sizeof p, "%s/test_data_set_0/output_0.pb", dir);
  tg_tensor *want = tg_onnx_read_tensor(p);
  tg_onnx_io io;
  CHECK(c && want && tg_onnx_input(m, 0, &io) == TG_OK, "%s", tg_error());
  CHECK(tg_onnx_run(m, 1, &io.name, &c, &out) == TG_OK, "%s", tg_error());
  float got[5], exp[5];
  CHECK(host_f32(out, got, 5) && host_f32(want, exp, 5) && !memcmp(got, exp, sizeof got), "test_if's output");
  tg_free(c);
  tg_free(want);
  tg_free(out);
  tg_onnx_free(m);
}

/* ---- allocation failures ---------------------------------------------------------------------------------------- */

TEST(test_onnx_fault_every_allocation_of_load_and_run) {
  /* If on an input choosing between constants, next to an Identity of an initializer */
  pbw g = {0}, n = onnx_w_node("If", (const char *[]){"C", NULL, "Y", NULL}), tb = branch("a", 1), eb = branch("b", 2);
  onnx_w_attr_msg(&n, "then_branch", 5, &tb);
  onnx_w_attr_msg(&n, "else_branch", 5, &eb);
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("Identity", (const char *[]){"W", NULL, "Z", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  int64_t w[4] = {1, 2, 3, 4};
  pbw t = onnx_w_tensor("W", ONNX_INT64, 1, (int64_t[]){4}, w, sizeof w);
  pbw_msg(&g, ONNX_G_INIT, &t);
  pbw c = onnx_w_value("C", ONNX_BOOL, 0, NULL, NULL), y = onnx_w_value("Y", ONNX_INT64, 0, NULL, NULL),
      z = onnx_w_value("Z", ONNX_INT64, 1, (int64_t[]){4}, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &c);
  pbw_msg(&g, ONNX_G_OUTPUT, &y);
  pbw_msg(&g, ONNX_G_OUTPUT, &z);
  pbw mb = onnx_w_model(16, &g);
  bool yes = true;
  tg_tensor *ct = tg_from_data(TG_BOOL, 0, NULL, &yes, 1);
  CHECK_T(ct);
  int64_t k = 1;
  for (; k < 20000; k++) {
    tg_error_clear();
    mem_fail_at(k);
    tg_onnx *m = tg_onnx_load_memory(mb.b, mb.n, NULL);
    tg_tensor *out[2] = {0};
    tg_status st = m ? tg_onnx_run(m, 1, (const char *[]){"C"}, &ct, out) : tg_error_status();
    bool failed = mem_failed();
    mem_fail_at(0);
    if (!m) CHECK(failed && tg_error()[0], "allocation %lld: load failed without an injected failure or message: %s", (long long)k, tg_error());
    else if (st != TG_OK) CHECK(failed && tg_error()[0] && !out[0] && !out[1], "allocation %lld: run failed: %s", (long long)k, tg_error());
    else CHECK(out[0] && out[1] && tg_numel(out[1]) == 4, "allocation %lld: outputs", (long long)k);
    tg_free(out[0]);
    tg_free(out[1]);
    tg_onnx_free(m);
    if (!failed) break;
  }
  CHECK(k > 20 && k < 20000, "%lld allocations", (long long)k);
  tg_free(ct);
  pbw_free(&mb);
}

/* the Scan tests' body graph: float inputs s_in, x_in and outputs s_out, y_out of any shape */
static void scan_body_io(pbw *body) {
  const char *ins[] = {"s_in", "x_in"}, *outs[] = {"s_out", "y_out"};
  for (int k = 0; k < 2; k++) {
    pbw v = onnx_w_value(ins[k], ONNX_FLOAT, -1, NULL, NULL), o = onnx_w_value(outs[k], ONNX_FLOAT, -1, NULL, NULL);
    pbw_msg(body, ONNX_G_INPUT, &v);
    pbw_msg(body, ONNX_G_OUTPUT, &o);
  }
}

/* the Scan tests' graph outputs: the final state SF and the stacked Y */
static void scan_outputs(pbw *g) {
  pbw sf = onnx_w_value("SF", ONNX_FLOAT, -1, NULL, NULL), y = onnx_w_value("Y", ONNX_FLOAT, -1, NULL, NULL);
  pbw_msg(g, ONNX_G_OUTPUT, &sf);
  pbw_msg(g, ONNX_G_OUTPUT, &y);
}

TEST(test_onnx_scan_slices_and_stacks) {
  /* body(s, x) -> (s, x): Y stacks the slices of X along axis 1, reversed, so Y[t] = X[:, 2 - t] */
  pbw body = {0};
  pbw n1 = onnx_w_node("Identity", (const char *[]){"s_in", NULL, "s_out", NULL});
  pbw n2 = onnx_w_node("Identity", (const char *[]){"x_in", NULL, "y_out", NULL});
  pbw_msg(&body, ONNX_G_NODE, &n1);
  pbw_msg(&body, ONNX_G_NODE, &n2);
  scan_body_io(&body);
  pbw g = {0}, n = onnx_w_node("Scan", (const char *[]){"S", "X", NULL, "SF", "Y", NULL});
  onnx_w_attr_msg(&n, "body", 5, &body);
  onnx_w_attr_int(&n, "num_scan_inputs", 1);
  onnx_w_attr_ints(&n, "scan_input_axes", 1, (int64_t[]){1});
  onnx_w_attr_ints(&n, "scan_input_directions", 1, (int64_t[]){1});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw s = onnx_w_value("S", ONNX_FLOAT, 1, (int64_t[]){1}, NULL), x = onnx_w_value("X", ONNX_FLOAT, 2, (int64_t[]){2, 3}, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &s);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  scan_outputs(&g);
  pbw mb = onnx_w_model(11, &g);
  tg_onnx *m = load(&mb);
  CHECK_T(m);
  float xs[6] = {1, 2, 3, 4, 5, 6}, ss = 7, ys[6], want[6] = {3, 6, 2, 5, 1, 4};
  tg_tensor *st = tg_from_data(TG_FLOAT32, 1, (int64_t[]){1}, &ss, 4), *xt = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, xs, sizeof xs);
  tg_tensor *out[2] = {0};
  CHECK(tg_onnx_run(m, 2, (const char *[]){"S", "X"}, (tg_tensor *[]){st, xt}, out) == TG_OK, "%s", tg_error());
  CHECK(out[0] && elem(out[0], 0) == 7, "final state");
  CHECK(out[1] && tg_ndim(out[1]) == 2 && tg_shape(out[1], 0) == 3 && host_f32(out[1], ys, 6) && !memcmp(ys, want, sizeof ys),
        "scan output");
  tg_free(out[0]);
  tg_free(out[1]);
  tg_free(st);
  tg_free(xt);
  tg_onnx_free(m);
}

/* Scan at opset 8: a batch axis first on every value, sequence_lens first; body(s, x) -> (s + x, s + x) over X
 * reversed, so entry b's Y[t] is the running sum of X[b] from its end, stacked along axis 1 */
TEST(test_onnx_scan8_batches_reversed_and_sequence_lens) {
  pbw body = {0};
  pbw n1 = onnx_w_node("Add", (const char *[]){"s_in", "x_in", NULL, "s_out", NULL});
  pbw n2 = onnx_w_node("Add", (const char *[]){"s_in", "x_in", NULL, "y_out", NULL});
  pbw_msg(&body, ONNX_G_NODE, &n1);
  pbw_msg(&body, ONNX_G_NODE, &n2);
  scan_body_io(&body);
  pbw g = {0}, n = onnx_w_node("Scan", (const char *[]){"L", "S", "X", NULL, "SF", "Y", NULL});
  onnx_w_attr_msg(&n, "body", 5, &body);
  onnx_w_attr_int(&n, "num_scan_inputs", 1);
  onnx_w_attr_ints(&n, "directions", 1, (int64_t[]){1});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw l = onnx_w_value("L", ONNX_INT64, 1, (int64_t[]){2}, NULL), s = onnx_w_value("S", ONNX_FLOAT, 2, (int64_t[]){2, 3}, NULL),
      x = onnx_w_value("X", ONNX_FLOAT, 3, (int64_t[]){2, 4, 3}, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &l);
  pbw_msg(&g, ONNX_G_INPUT, &s);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  scan_outputs(&g);
  pbw mb = onnx_w_model(8, &g);
  tg_onnx *m = load(&mb);
  CHECK_T(m);
  float xs[24], ss[6], ys[24], sfs[6], want_y[24], want_s[6];
  for (int i = 0; i < 24; i++) xs[i] = (float)(i * 7 % 11) - 5;
  for (int i = 0; i < 6; i++) ss[i] = (float)i * 0.5f;
  for (int b = 0; b < 2; b++)
    for (int c = 0; c < 3; c++) {
      float acc = ss[b * 3 + c];
      for (int t = 3; t >= 0; t--) {  /* reversed: step 0 reads X[b][3] */
        acc += xs[(b * 4 + t) * 3 + c];
        want_y[(b * 4 + (3 - t)) * 3 + c] = acc;
      }
      want_s[b * 3 + c] = acc;
    }
  int64_t full[2] = {4, 4}, part[2] = {4, 3};
  tg_tensor *st = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, ss, sizeof ss);
  tg_tensor *xt = tg_from_data(TG_FLOAT32, 3, (int64_t[]){2, 4, 3}, xs, sizeof xs);
  tg_tensor *lf = tg_from_data(TG_INT64, 1, (int64_t[]){2}, full, sizeof full);
  tg_tensor *lp = tg_from_data(TG_INT64, 1, (int64_t[]){2}, part, sizeof part);
  tg_tensor *out[2] = {0};
  CHECK(tg_onnx_run(m, 3, (const char *[]){"L", "S", "X"}, (tg_tensor *[]){lf, st, xt}, out) == TG_OK, "%s", tg_error());
  CHECK(out[0] && tg_ndim(out[0]) == 2 && tg_shape(out[0], 0) == 2 && host_f32(out[0], sfs, 6) &&
        !memcmp(sfs, want_s, sizeof sfs), "final states");
  CHECK(out[1] && tg_ndim(out[1]) == 3 && tg_shape(out[1], 0) == 2 && tg_shape(out[1], 1) == 4 && host_f32(out[1], ys, 24) &&
        !memcmp(ys, want_y, sizeof ys), "scan outputs (B, L, 3)");
  tg_free(out[0]);
  tg_free(out[1]);
  out[0] = out[1] = NULL;
  CHECK(tg_onnx_run(m, 3, (const char *[]){"L", "S", "X"}, (tg_tensor *[]){lp, st, xt}, out) != TG_OK &&
        strstr(tg_error(), "sequence_lens") && !out[0] && !out[1], "a shorter sequence refused: %s", tg_error());
  tg_free(st);
  tg_free(xt);
  tg_free(lf);
  tg_free(lp);
  tg_onnx_free(m);
}

TEST(test_onnx_load_refuses_missing_and_odd_paths) {
  tg_onnx *m = tg_onnx_load("/nonexistent/model.onnx");
  CHECK_REFUSED(m, TG_ERR_IO, "cannot open");
  m = tg_onnx_load("/");
  CHECK_REFUSED(m, TG_ERR_IO, "not a regular file");
  m = tg_onnx_load(NULL);
  CHECK_REFUSED(m, TG_ERR_ARG, "NULL");
  m = tg_onnx_load_memory(NULL, 4, NULL);
  CHECK_REFUSED(m, TG_ERR_ARG, "NULL");
  tg_tensor *t = tg_onnx_tensor_from_memory("\x08\x02\x10\x01", 4);   /* dims 2 of float, no data */
  CHECK(!t && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "0 values"), "a tensor without data: %s", tg_error());
}
