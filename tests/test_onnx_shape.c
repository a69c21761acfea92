/* test_onnx_shape.c — the ONNX shape, movement, indexing and constant-making operators (src/onnx/ops_shape.c,
 * ops_index.c, ops_layout.c) through the public API: small models at the opsets and attribute forms Debian's
 * libonnx-testdata lacks (tests/fixtures/onnx_shape/node, outputs from onnxruntime checked against ONNX's
 * reference evaluator by make_onnx_shape_fixtures.py), ONNX's own node tests of these operators where
 * installed, an exported shape chain that must build its graph without running a kernel, and bad nodes
 * refused with an error naming the operator. */
#include <dirent.h>
#include <stdlib.h>

#include "test.h"

/* the directory of this file's fixtures: tests/fixtures/onnx_shape/<sub> */
static void fixture_dir(char *out, size_t cap, const char *sub) {
  const char *file = __FILE__, *slash = strrchr(file, '/');
  snprintf(out, cap, "%.*sfixtures/onnx_shape/%s", slash ? (int)(slash - file + 1) : 0, file, sub);
}

/* got against the stored tensor want: dtype, shape, then values (floats within the backend tests' rtol 1e-3,
 * atol 1e-7, NaN equal to NaN; others exactly); false with a failure recorded naming what */
static bool same_tensor(const char *what, tg_tensor *got, tg_tensor *want) {
  if (tg_dtype_of(got) != tg_dtype_of(want) || tg_ndim(got) != tg_ndim(want)) {
    test_fail(__FILE__, __LINE__, "%s: %s %d dims, want %s %d dims", what, tg_dtype_name(tg_dtype_of(got)),
              tg_ndim(got), tg_dtype_name(tg_dtype_of(want)), tg_ndim(want));
    return false;
  }
  for (int d = 0; d < tg_ndim(got); d++)
    if (tg_shape(got, d) != tg_shape(want, d)) {
      test_fail(__FILE__, __LINE__, "%s: size %lld on axis %d, want %lld", what, (long long)tg_shape(got, d), d,
                (long long)tg_shape(want, d));
      return false;
    }
  int64_t n = tg_numel(got);
  tg_tensor *g64 = tg_cast(got, TG_FLOAT64), *w64 = tg_cast(want, TG_FLOAT64);
  double *g = malloc((size_t)(n ? n : 1) * sizeof *g), *w = malloc((size_t)(n ? n : 1) * sizeof *w);
  bool ok = g && w && tg_to_host(g64, g, (size_t)n * sizeof *g) == TG_OK && tg_to_host(w64, w, (size_t)n * sizeof *w) == TG_OK;
  if (!ok) test_fail(__FILE__, __LINE__, "%s: reading the values: %s", what, tg_error());
  bool fl = tg_dtype_of(want) >= TG_FLOAT16;
  for (int64_t i = 0; ok && i < n; i++) {
    bool close = fl ? (isnan(w[i]) ? isnan(g[i]) : fabs(g[i] - w[i]) <= 1e-7 + 1e-3 * fabs(w[i])) : g[i] == w[i];
    if (!close) {
      test_fail(__FILE__, __LINE__, "%s: element %lld is %.9g, want %.9g", what, (long long)i, g[i], w[i]);
      ok = false;
    }
  }
  free(g);
  free(w);
  tg_free(g64);
  tg_free(w64);
  return ok;
}

/* runs the backend-test directory dir (model.onnx, test_data_set_0): true when every output matches; with
 * kernels non-NULL, the kernels tg_onnx_run itself ran go there */
static bool run_case(const char *dir, uint64_t *kernels) {
  char path[1024];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  tg_onnx *m = tg_onnx_load(path);
  if (!m) {
    test_fail(__FILE__, __LINE__, "%s: load: %s", dir, tg_error());
    return false;
  }
  int nin = tg_onnx_num_inputs(m), nout = tg_onnx_num_outputs(m);
  tg_tensor *ins[16] = {0}, *outs[16] = {0};
  const char *names[16];
  bool ok = nin <= 16 && nout <= 16;
  for (int i = 0; ok && i < nin; i++) {
    tg_onnx_io io;
    snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, i);
    ok = tg_onnx_input(m, i, &io) == TG_OK && (ins[i] = tg_onnx_read_tensor(path)) != NULL;
    names[i] = io.name;
    if (!ok) test_fail(__FILE__, __LINE__, "%s: input %d: %s", dir, i, tg_error());
  }
  uint64_t before = tg_get_stats().kernels_run;
  if (ok && tg_onnx_run(m, nin, names, ins, outs) != TG_OK) {
    test_fail(__FILE__, __LINE__, "%s: run: %s", dir, tg_error());
    ok = false;
  }
  if (kernels) *kernels = tg_get_stats().kernels_run - before;
  for (int i = 0; ok && i < nout; i++) {
    snprintf(path, sizeof path, "%s/test_data_set_0/output_%d.pb", dir, i);
    tg_tensor *want = tg_onnx_read_tensor(path);
    char what[1200];
    snprintf(what, sizeof what, "%s output %d", dir, i);
    if (!want) test_fail(__FILE__, __LINE__, "%s: %s", what, tg_error());
    ok = want && same_tensor(what, outs[i], want);
    tg_free(want);
  }
  for (int i = 0; i < 16; i++) tg_free(ins[i]), tg_free(outs[i]);
  tg_onnx_free(m);
  return ok;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* every test_* directory under dir whose name starts with one of the prefixes (NULL: all), in name order;
 * returns how many ran, -1 when dir is missing */
static int run_dir(const char *dir, const char *const *prefixes, int *passed) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  char *names[1024];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 1024;) {
    bool want = !strncmp(e->d_name, "test_", 5) && !prefixes;
    for (int p = 0; prefixes && prefixes[p]; p++) {
      size_t l = strlen(prefixes[p]);
      if (!strncmp(e->d_name, prefixes[p], l) && !strstr(e->d_name, "_expanded")) want = true;
    }
    if (want) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, by_name);
  *passed = 0;
  for (int i = 0; i < n; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (run_case(path, NULL)) (*passed)++;
    free(names[i]);
  }
  return n;
}

TEST(onnx_shape_fixtures_match_onnxruntime) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, "node");
  int passed, n = run_dir(dir, NULL, &passed);
  CHECK(n >= 27, "%d fixture models in %s (want 27)", n, dir);
  CHECK(passed == n, "%d of %d fixture models match", passed, n);
}

/* the node tests of ONNX 1.12 (libonnx-testdata) of every operator of these files */
TEST(onnx_shape_backend_node_tests) {
  const char *dir = getenv("ONNX_TESTDATA") ? getenv("ONNX_TESTDATA") : "/usr/share/libonnx-testdata/data";
  char node[1024];
  snprintf(node, sizeof node, "%s/node", dir);
  static const char *const ops[] = {
      "test_reshape", "test_expand", "test_flatten", "test_squeeze", "test_unsqueeze", "test_transpose", "test_concat",
      "test_split_", "test_slice", "test_gather", "test_scatter", "test_tile", "test_constant_pad", "test_edge_pad",
      "test_reflect_pad", "test_shape", "test_size", "test_constantofshape", "test_range", "test_eyelike",
      "test_tril", "test_triu", "test_onehot", "test_depthtospace", "test_spacetodepth", "test_nonzero",
      "test_compress", "test_reversesequence", "test_unique", NULL};
  int passed, n = run_dir(node, ops, &passed);
  if (n < 0) {
    test_skip("ONNX backend test data not found at %s (Debian's libonnx-testdata)", node);
    return;
  }
  CHECK(n >= 140, "%d node tests found (want 140)", n);
  CHECK(passed == n, "%d of %d node tests pass", passed, n);
}

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Slice -> Expand, Size -> Range, ConstantOfShape, Squeeze,
 * Flatten: every shape value is known on the host, so building the graph runs no kernel */
TEST(onnx_shape_chain_builds_without_kernels) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, "node/test_shape_chain_known_15");
  uint64_t kernels = 99;
  CHECK(run_case(dir, &kernels), "the chain's outputs");
  CHECK(kernels == 0, "tg_onnx_run ran %llu kernels building an exported shape chain", (unsigned long long)kernels);
}

TEST(onnx_shape_bad_nodes_refused) {
  static const char *const cases[] = {"Reshape_two_infer", "Reshape_bad_count", "Gather_out_of_range",
                                      "Squeeze_not_one", "Slice_step_zero", "Split_bad_sum", "Expand_no_broadcast",
                                      "Transpose_bad_perm", "Concat_axis_range", "Pad_bad_count"};
  int64_t shape[3] = {2, 3, 4};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char path[1100], dir[1024];
    fixture_dir(dir, sizeof dir, "bad");
    snprintf(path, sizeof path, "%s/%s.onnx", dir, cases[i]);
    tg_onnx *m = tg_onnx_load(path);
    CHECK(m, "%s: load: %s", cases[i], tg_error());
    if (!m) continue;
    tg_tensor *x = tg_zeros(TG_FLOAT32, 3, shape), *outs[2] = {0};
    const char *name = "x";
    tg_error_clear();
    tg_status st = tg_onnx_run(m, 1, &name, &x, outs);
    char op[64];
    snprintf(op, sizeof op, "%.*s", (int)(strchr(cases[i], '_') - cases[i]), cases[i]);
    CHECK(st == TG_ERR_ARG, "%s: status %d, want TG_ERR_ARG (%s)", cases[i], st, tg_error());
    CHECK(strstr(tg_error(), op), "%s: the error '%s' does not name %s", cases[i], tg_error(), op);
    tg_free(outs[0]);
    tg_free(outs[1]);
    tg_free(x);
    tg_onnx_free(m);
  }
}
