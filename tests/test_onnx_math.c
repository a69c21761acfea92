/* test_onnx_math.c — the math operators (src/onnx/ops_math*.c) through the public ONNX API, on the cases of
 * tests/fixtures/onnx_math.bin (written by make_onnx_math_fixtures.py: one-node models with their inputs and
 * the outputs of ONNX's reference implementation, cross-checked with onnxruntime). They cover what ONNX's
 * backend data (opsets <= 17, run by build/onnx_backend) leaves out: newer opsets, empty reductions, the
 * integer rules of Div/Mod/Pow, NaN in Max/Min/Clip, ties, version differences, window functions, DFT, STFT,
 * MelWeightMatrix, refused nodes, running under tg_jit, and shape arithmetic kept on the host (a chain of them
 * feeding TopK's K builds its graph without running a kernel). */
#include <math.h>
#include <stdlib.h>

#include "test.h"
#include "uop/uop.h"

typedef struct blob { const uint8_t *p, *end; bool ok; } blob;

static const uint8_t *take(blob *b, size_t n) {
  if (!b->ok || (size_t)(b->end - b->p) < n) {
    b->ok = false;
    return NULL;
  }
  const uint8_t *r = b->p;
  b->p += n;
  return r;
}

static uint32_t take_u(blob *b, int bytes) {
  const uint8_t *q = take(b, (size_t)bytes);
  uint32_t v = 0;
  for (int i = 0; q && i < bytes; i++) v |= (uint32_t)q[i] << (8 * i);
  return v;
}

/* a length-prefixed (u32) byte string */
static const uint8_t *take_bytes(blob *b, uint32_t *len) {
  *len = take_u(b, 4);
  return take(b, *len);
}

static uint8_t *read_fixture(const char *name, size_t *size) {
  char path[512];
  const char *dir = getenv("TG_FIXTURES");
  if (dir) snprintf(path, sizeof path, "%s/%s", dir, name);
  else {
    const char *file = __FILE__, *slash = strrchr(file, '/');
    snprintf(path, sizeof path, "%.*sfixtures/%s", slash ? (int)(slash - file + 1) : 0, file, name);
  }
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *data = NULL;
  if (!fseek(f, 0, SEEK_END)) {
    long n = ftell(f);
    if (n > 0 && !fseek(f, 0, SEEK_SET) && (data = malloc((size_t)n)) && fread(data, 1, (size_t)n, f) != (size_t)n) {
      free(data);
      data = NULL;
    }
    *size = n > 0 ? (size_t)n : 0;
  }
  fclose(f);
  return data;
}

/* got against want: dtype, shape, then values (floats within ONNX's backend tolerances rtol 1e-3, atol 1e-7,
 * NaN equal to NaN; integers and bools exactly) */
static bool same_tensor(const char *what, tg_tensor *got, tg_tensor *want) {
  if (tg_dtype_of(got) != tg_dtype_of(want)) {
    CHECK(0, "%s: dtype %s, want %s", what, tg_dtype_name(tg_dtype_of(got)), tg_dtype_name(tg_dtype_of(want)));
    return false;
  }
  bool shape_ok = tg_ndim(got) == tg_ndim(want);
  for (int i = 0; shape_ok && i < tg_ndim(got); i++) shape_ok = tg_shape(got, i) == tg_shape(want, i);
  if (!shape_ok) {
    CHECK(0, "%s: shape (rank %d, numel %lld), want (rank %d, numel %lld)", what, tg_ndim(got), (long long)tg_numel(got),
          tg_ndim(want), (long long)tg_numel(want));
    return false;
  }
  int64_t n = tg_numel(want);
  tg_dtype dt = tg_dtype_of(want);
  bool fl = dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64;
  tg_dtype host = fl ? TG_FLOAT64 : TG_INT64;
  tg_tensor *g = tg_cast(got, host), *w = tg_cast(want, host);
  void *gv = malloc((size_t)(n ? n : 1) * 8), *wv = malloc((size_t)(n ? n : 1) * 8);
  bool ok = g && w && gv && wv && tg_to_host(g, gv, (size_t)n * 8) == TG_OK && tg_to_host(w, wv, (size_t)n * 8) == TG_OK;
  CHECK(ok, "%s: cannot read the values: %s", what, tg_error());
  int bad = 0;
  for (int64_t i = 0; ok && i < n && bad < 4; i++) {
    if (fl) {
      double a = ((double *)gv)[i], b = ((double *)wv)[i];
      bool close = (isnan(a) && isnan(b)) || a == b || (isfinite(a) && isfinite(b) && fabs(a - b) <= 1e-7 + 1e-3 * fabs(b));
      if (!close) {
        CHECK(0, "%s[%lld] = %.9g, want %.9g", what, (long long)i, a, b);
        bad++;
      }
    } else {
      int64_t a = ((int64_t *)gv)[i], b = ((int64_t *)wv)[i];
      if (a != b) {
        CHECK(0, "%s[%lld] = %lld, want %lld", what, (long long)i, (long long)a, (long long)b);
        bad++;
      }
    }
  }
  free(gv);
  free(wv);
  tg_free(g);
  tg_free(w);
  return ok && !bad;
}

#define MAX_IO 8

/* one case of the fixture: a model, its inputs and the stored outputs (serialized protos in the fixture) */
typedef struct fcase {
  char name[128];
  uint32_t flags;   /* 1: must be refused, 2: tg_onnx_run runs no kernel, 4: run by a test of its own */
  const uint8_t *model, *ins[MAX_IO], *outs[MAX_IO];
  uint32_t mlen, nin, nout, ilen[MAX_IO], olen[MAX_IO];
} fcase;

/* the next case at b into k; false if the blob is malformed */
static bool next_case(blob *b, fcase *k) {
  uint32_t nlen = take_u(b, 2);
  const uint8_t *name = take(b, nlen);
  k->flags = take_u(b, 1);
  k->model = take_bytes(b, &k->mlen);
  k->nin = take_u(b, 1);
  for (uint32_t i = 0; i < k->nin && i < MAX_IO; i++) k->ins[i] = take_bytes(b, &k->ilen[i]);
  k->nout = take_u(b, 1);
  for (uint32_t i = 0; i < k->nout && i < MAX_IO; i++) k->outs[i] = take_bytes(b, &k->olen[i]);
  if (!b->ok || k->nin > MAX_IO || k->nout > MAX_IO) return false;
  snprintf(k->name, sizeof k->name, "%.*s", (int)nlen, (const char *)name);
  return true;
}

/* load, run, compare (or expect the refusal) */
static void run_case(const fcase *k) {
  tg_tensor *inputs[MAX_IO] = {0}, *got[MAX_IO] = {0};
  const char *names[MAX_IO];
  const char *cname = k->name;
  tg_onnx *m = tg_onnx_load_memory(k->model, k->mlen, NULL);
  bool loaded = m != NULL;
  tg_status st = loaded ? TG_OK : tg_error_status();
  for (uint32_t i = 0; st == TG_OK && i < k->nin; i++) {
    tg_onnx_io io = {0};
    inputs[i] = tg_onnx_tensor_from_memory(k->ins[i], k->ilen[i]);
    st = inputs[i] ? tg_onnx_input(m, (int)i, &io) : TG_ERR_ARG;
    names[i] = io.name;
    CHECK(st == TG_OK, "%s: input %u: %s", cname, i, tg_error());
  }
  uint64_t kernels = tg_get_stats().kernels_run;
  if (st == TG_OK) st = tg_onnx_run(m, (int)k->nin, names, inputs, got);
  uint64_t run_kernels = tg_get_stats().kernels_run - kernels;
  if (k->flags & 1) {
    CHECK(st != TG_OK, "%s: accepted, should be refused", cname);
    CHECK(st == TG_OK || strstr(tg_error(), "onnx"), "%s: the message does not name the node: %s", cname, tg_error());
  } else {
    CHECK(st == TG_OK, "%s: %s failed: %s", cname, loaded ? "tg_onnx_run" : "tg_onnx_load_memory", tg_error());
    CHECK(st != TG_OK || tg_onnx_num_outputs(m) == (int)k->nout, "%s: %d outputs, want %u", cname,
          tg_onnx_num_outputs(m), k->nout);
    if (k->flags & 2)
      CHECK(run_kernels == 0, "%s: tg_onnx_run ran %llu kernels, want none", cname, (unsigned long long)run_kernels);
    for (uint32_t i = 0; st == TG_OK && i < k->nout && (int)i < tg_onnx_num_outputs(m); i++) {
      tg_tensor *want = tg_onnx_tensor_from_memory(k->outs[i], k->olen[i]);
      char what[160];
      snprintf(what, sizeof what, "%.100s output %u", cname, i);
      CHECK(want, "%s: the stored output does not read: %s", what, tg_error());
      if (want && got[i]) same_tensor(what, got[i], want);
      else CHECK(got[i], "%s is NULL", what);
      tg_free(want);
    }
  }
  for (int i = 0; i < MAX_IO; i++) {
    tg_free(inputs[i]);
    tg_free(got[i]);
  }
  tg_onnx_free(m);
}

/* the fixture's cases whose name starts with prefix into ks (at most cap); the count, or -1 (skipped or failed:
 * recorded). *data holds the bytes they point into: free it */
static int load_cases(const char *prefix, fcase *ks, int cap, uint8_t **data) {
  size_t size = 0;
  *data = read_fixture("onnx_math.bin", &size);
  if (!*data) {
    test_skip("tests/fixtures/onnx_math.bin not found (run from the repository root or set TG_FIXTURES)");
    return -1;
  }
  blob b = {*data, *data + size, true};
  const uint8_t *magic = take(&b, 4);
  uint32_t version = take_u(&b, 4), count = take_u(&b, 4);
  CHECK(b.ok && !memcmp(magic, "TGOX", 4) && version == 1, "onnx_math.bin: not a version 1 fixture");
  int n = 0;
  fcase k;
  for (uint32_t i = 0; b.ok && i < count; i++) {
    CHECK(next_case(&b, &k), "onnx_math.bin: case %u is malformed", i);
    if (b.ok && !strncmp(k.name, prefix, strlen(prefix)) && n < cap) ks[n++] = k;
  }
  CHECK(b.ok && b.p == b.end, "onnx_math.bin: malformed or trailing bytes");
  CHECK(n > 0, "no case matches '%s'", prefix);
  return b.ok && n > 0 ? n : -1;
}

/* every case whose name starts with prefix */
static void run_cases(const char *prefix) {
  fcase ks[64];
  uint8_t *data = NULL;
  int n = load_cases(prefix, ks, 64, &data);
  for (int i = 0; i < n; i++)
    if (!(ks[i].flags & 4)) run_case(&ks[i]);
  free(data);
}

TEST(test_onnx_math_unary_and_activations) {
  const char *names[] = {"gelu", "mish", "round", "sign", "neg_", "abs_", "relu", "erf", "isinf", "isnan", "celu",
                         "selu", "elu_", "hardsigmoid", "thresholdedrelu", "shrink", "prelu", "leakyrelu", "softplus"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_cases(names[i]);
}

TEST(test_onnx_math_binary_integer_rules_and_broadcast) {
  const char *names[] = {"bitwise", "bitshift", "div_", "mod_", "pow_", "add_legacy", "mul_legacy", "equal",
                         "greater", "less", "xor_", "where_"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_cases(names[i]);
}

TEST(test_onnx_math_variadic_nan_and_clip) {
  const char *names[] = {"max_", "min_", "sum_", "mean_", "clip_"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_cases(names[i]);
}

TEST(test_onnx_math_casts) { run_cases("cast"); }

TEST(test_onnx_math_reductions_axes_noop_and_empty) { run_cases("reduce_"); }

TEST(test_onnx_math_arg_topk_softmax_family) {
  const char *names[] = {"argm", "topk", "softmax", "logsoftmax", "hardmax"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) run_cases(names[i]);
}

TEST(test_onnx_math_cumsum_einsum) {
  run_cases("cumsum");
  run_cases("einsum");
}

TEST(test_onnx_math_window_functions) { run_cases("window_"); }
TEST(test_onnx_math_dft_onesided_lengths_inverse_axis_input) { run_cases("dft_"); }
TEST(test_onnx_math_stft_frames_windows_and_mel_weight_matrix) {
  run_cases("stft_");
  run_cases("mel_");
}

TEST(test_onnx_math_tfidf_vectorizer_modes_weights_and_distances) { run_cases("tfidf_"); }

TEST(test_onnx_operators_of_opsets_18_to_28) { run_cases("newer_"); }

TEST(test_onnx_sequences_split_insert_erase_at_concat) { run_cases("seq_"); }

/* every allocation of a run of the sequence graphs fails in turn: the run fails cleanly (a message, no
 * outputs) or gives every output, and nothing leaks (the sanitizer pass) */
TEST(test_onnx_sequences_fault_every_allocation) {
  fcase ks[16];
  uint8_t *data = NULL;
  int n = load_cases("seq_", ks, 16, &data);
  int ran = 0;
  for (int c = 0; c < n; c++) {
    const fcase *k = &ks[c];
    if (k->flags & 1) continue;
    tg_tensor *ins[MAX_IO] = {0};
    const char *names[MAX_IO];
    tg_onnx *m = tg_onnx_load_memory(k->model, k->mlen, NULL);
    CHECK(m, "%s: load: %s", k->name, tg_error());
    for (uint32_t i = 0; m && i < k->nin; i++) {
      tg_onnx_io io = {0};
      ins[i] = tg_onnx_tensor_from_memory(k->ins[i], k->ilen[i]);
      tg_onnx_input(m, (int)i, &io);
      names[i] = io.name;
    }
    int64_t at = 1;
    for (; m && at < 20000; at++) {
      tg_tensor *outs[MAX_IO] = {0};
      tg_error_clear();
      mem_fail_at(at);
      tg_status st = tg_onnx_run(m, (int)k->nin, names, ins, outs);
      bool failed = mem_failed();
      mem_fail_at(0);
      bool none = true, all = true;
      for (uint32_t i = 0; i < k->nout; i++) none = none && !outs[i], all = all && outs[i];
      if (st != TG_OK) CHECK(failed && tg_error()[0] && none, "%s: allocation %lld: %s", k->name, (long long)at, tg_error());
      else CHECK(all, "%s: allocation %lld: outputs missing", k->name, (long long)at);
      for (int i = 0; i < MAX_IO; i++) tg_free(outs[i]);
      if (!failed) break;
    }
    CHECK(!m || (at > 5 && at < 20000), "%s: %lld allocations", k->name, (long long)at);
    for (int i = 0; i < MAX_IO; i++) tg_free(ins[i]);
    tg_onnx_free(m);
    ran++;
  }
  CHECK(n < 0 || ran >= 5, "%d sequence cases ran", ran);
  free(data);
}

/* runs the fixture's case name (a model of flag 4) once; its output 0 as doubles (malloc'd, *count of them),
 * and its dtype in *dt; NULL after recording the failure */
static double *run_random_case(const char *name, int64_t *count, tg_dtype *dt) {
  fcase ks[1];
  uint8_t *data = NULL;
  double *vals = NULL;
  if (load_cases(name, ks, 1, &data) != 1) {
    free(data);
    return NULL;
  }
  tg_tensor *ins[MAX_IO] = {0}, *outs[MAX_IO] = {0};
  const char *names[MAX_IO];
  tg_onnx *m = tg_onnx_load_memory(ks[0].model, ks[0].mlen, NULL);
  CHECK(m, "%s: load: %s", name, tg_error());
  for (uint32_t i = 0; m && i < ks[0].nin; i++) {
    tg_onnx_io io = {0};
    ins[i] = tg_onnx_tensor_from_memory(ks[0].ins[i], ks[0].ilen[i]);
    tg_onnx_input(m, (int)i, &io);
    names[i] = io.name;
  }
  tg_status st = m ? tg_onnx_run(m, (int)ks[0].nin, names, ins, outs) : TG_ERR_ARG;
  CHECK(st == TG_OK, "%s: run: %s", name, tg_error());
  if (st == TG_OK) {
    tg_tensor *d = tg_cast(outs[0], TG_FLOAT64);
    *count = tg_numel(outs[0]);
    *dt = tg_dtype_of(outs[0]);
    vals = malloc((size_t)*count * sizeof *vals);
    CHECK(vals && d && tg_to_host(d, vals, (size_t)*count * sizeof *vals) == TG_OK, "%s: read: %s", name, tg_error());
    tg_free(d);
  }
  for (int i = 0; i < MAX_IO; i++) {
    tg_free(ins[i]);
    tg_free(outs[i]);
  }
  tg_onnx_free(m);
  free(data);
  return vals;
}

static void moments(const double *v, int64_t n, double *mean, double *sd, double *lo, double *hi) {
  double s = 0, q = 0;
  *lo = INFINITY, *hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    s += v[i];
    if (v[i] < *lo) *lo = v[i];
    if (v[i] > *hi) *hi = v[i];
  }
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
  *sd = sqrt(q / (double)(n - 1));
}

/* The random operators against their distributions: means and deviations within 5 standard errors (at 1e5
 * draws), ranges, dtypes; a seeded node gives the same numbers twice; Bernoulli's certain probabilities give
 * certain outcomes; Multinomial's frequencies follow the softmax of its input */
TEST(test_onnx_math_random_operators_follow_their_distributions) {
  int64_t n = 0;
  tg_dtype dt = TG_DTYPE_COUNT;
  double mean, sd, lo, hi;
  double *v = run_random_case("random_normal_double", &n, &dt);
  if (v) {
    moments(v, n, &mean, &sd, &lo, &hi);
    CHECK(n == 100000 && dt == TG_FLOAT64, "RandomNormal: %lld values of %s", (long long)n, tg_dtype_name(dt));
    CHECK(fabs(mean - 2.0) < 5 * 3.0 / sqrt(1e5) && fabs(sd - 3.0) < 0.05, "RandomNormal: mean %g sd %g, want 2 and 3", mean, sd);
  }
  free(v);
  if ((v = run_random_case("random_uniform_float", &n, &dt))) {
    moments(v, n, &mean, &sd, &lo, &hi);
    CHECK(n == 100000 && dt == TG_FLOAT32, "RandomUniform: %lld values of %s", (long long)n, tg_dtype_name(dt));
    CHECK(lo >= -1.0 && hi < 3.0 && lo < -0.99 && hi > 2.99, "RandomUniform: range [%g, %g], want in [-1, 3)", lo, hi);
    CHECK(fabs(mean - 1.0) < 5 * (4 / sqrt(12.0)) / sqrt(1e5) && fabs(sd - 4 / sqrt(12.0)) < 0.02,
          "RandomUniform: mean %g sd %g", mean, sd);
  }
  free(v);
  double *w = NULL;
  int64_t n2 = 0;
  if ((v = run_random_case("random_normal_like_seeded", &n, &dt)) && (w = run_random_case("random_normal_like_seeded", &n2, &dt))) {
    moments(v, n, &mean, &sd, &lo, &hi);
    CHECK(n == 90000 && n2 == n && dt == TG_FLOAT32, "RandomNormalLike: %lld values of %s", (long long)n, tg_dtype_name(dt));
    CHECK(fabs(mean + 1.0) < 5 * 0.5 / 300 && fabs(sd - 0.5) < 0.01, "RandomNormalLike: mean %g sd %g, want -1 and 0.5", mean, sd);
    int64_t same = 0;
    for (int64_t i = 0; i < n && n2 == n; i++) same += v[i] == w[i];
    CHECK(same == n, "RandomNormalLike with a seed: %lld of %lld values repeat in a second run", (long long)same, (long long)n);
  }
  free(v);
  free(w);
  if ((v = run_random_case("random_uniform_like_half", &n, &dt))) {
    moments(v, n, &mean, &sd, &lo, &hi);
    CHECK(n == 50000 && dt == TG_FLOAT16, "RandomUniformLike: %lld values of %s", (long long)n, tg_dtype_name(dt));
    CHECK(lo >= 0 && hi <= 1 && fabs(mean - 0.5) < 5 * sqrt(1 / 12.0) / sqrt(5e4), "RandomUniformLike: [%g, %g], mean %g", lo, hi, mean);
  }
  free(v);
  if ((v = run_random_case("random_bernoulli_int64", &n, &dt))) {
    CHECK(n == 40000 && dt == TG_INT64, "Bernoulli: %lld values of %s", (long long)n, tg_dtype_name(dt));
    int64_t bad = 0, ones = 0;
    for (int64_t i = 0; i < n; i++) {
      if (v[i] != 0 && v[i] != 1) bad++;
      if (i < 1000 && v[i] != 0) bad++;
      if (i >= 1000 && i < 2000 && v[i] != 1) bad++;
      if (i >= 2000) ones += v[i] == 1;
    }
    double f = (double)ones / 38000;
    CHECK(bad == 0, "Bernoulli: %lld values are not 0 for p = 0, 1 for p = 1, or 0/1", (long long)bad);
    CHECK(fabs(f - 0.25) < 5 * sqrt(0.25 * 0.75 / 38000), "Bernoulli: p = 0.25 drew 1 at a rate of %g", f);
  }
  free(v);
  if ((v = run_random_case("random_multinomial_int64", &n, &dt))) {
    CHECK(n == 40000 && dt == TG_INT64, "Multinomial: %lld values of %s", (long long)n, tg_dtype_name(dt));
    int64_t cnt[2][3] = {{0}}, bad = 0;
    for (int64_t i = 0; i < n; i++) {
      int64_t c = (int64_t)v[i];
      if (c < 0 || c > 2 || (i >= 20000 && c == 2)) bad++;
      else cnt[i >= 20000][c]++;
    }
    const double want[2][3] = {{0.1, 0.2, 0.7}, {0.5, 0.5, 0}};
    CHECK(bad == 0, "Multinomial: %lld samples out of range or of a class of probability 0", (long long)bad);
    for (int r = 0; r < 2; r++)
      for (int c = 0; c < 3; c++) {
        double f = cnt[r][c] / 20000.0, se = sqrt(want[r][c] * (1 - want[r][c]) / 20000.0);
        CHECK(fabs(f - want[r][c]) <= 5 * se + 1e-12, "Multinomial: row %d class %d drawn at %g, want %g", r, c, f, want[r][c]);
      }
  }
  free(v);
  run_cases("random_error_");
}

TEST(test_onnx_math_refuses_bad_nodes) { run_cases("error_"); }

TEST(test_onnx_math_shape_arithmetic_runs_no_kernel) { run_cases("known_"); }

/* a JIT step: a model run on its inputs */
typedef struct jit_ctx { tg_onnx *m; const char *names[4]; } jit_ctx;

static tg_status jit_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  jit_ctx *j = ctx;
  return tg_onnx_run(j->m, nin, j->names, in, out);
}

/* runs case name (Clip(x, lo, hi) and Pow(x, e)) under tg_jit four times (plain, capture, replays), with new
 * values of x and, when they are graph inputs (nin 4), of lo, hi and e each time; checks against C */
static void jit_clip_pow(const char *name, int nin) {
  fcase k;
  uint8_t *data = NULL;
  if (load_cases(name, &k, 1, &data) != 1) {
    free(data);
    return;
  }
  jit_ctx j = {tg_onnx_load_memory(k.model, k.mlen, NULL), {"x", "lo", "hi", "e"}};
  tg_jit *jit = j.m ? tg_jit_new(jit_step, &j, nin, 2) : NULL;
  CHECK(jit, "%s: %s", name, tg_error());
  const float params[4][3] = {{0.7f, 1.2f, 2}, {0.2f, 0.9f, 3}, {1.0f, 1.5f, 0.5f}, {0.5f, 2.5f, -1}};
  int64_t shape[2] = {2, 3};
  for (int call = 0; jit && call < 4; call++) {
    const float *p = params[nin == 4 ? call : 0];
    float x[6], lo = p[0], hi = p[1], e = p[2];
    for (int i = 0; i < 6; i++) x[i] = 0.25f + 0.4f * (float)i + 0.1f * (float)call;
    tg_tensor *in[4] = {tg_from_data(TG_FLOAT32, 2, shape, x, sizeof x), tg_from_data(TG_FLOAT32, 0, NULL, &lo, 4),
                        tg_from_data(TG_FLOAT32, 0, NULL, &hi, 4), tg_from_data(TG_FLOAT32, 0, NULL, &e, 4)};
    tg_tensor *out[2] = {0};
    tg_status st = tg_jit_call(jit, in, out);
    CHECK(st == TG_OK, "%s call %d: %s", name, call, tg_error());
    float clip[6], pw[6], want_clip[6], want_pow[6];
    for (int i = 0; i < 6; i++) {
      float v = x[i] < lo ? lo : x[i];
      want_clip[i] = v > hi ? hi : v;
      want_pow[i] = powf(x[i], e);
    }
    if (st == TG_OK && tg_to_host(out[0], clip, sizeof clip) == TG_OK && tg_to_host(out[1], pw, sizeof pw) == TG_OK) {
      char what[64];
      snprintf(what, sizeof what, "%s call %d: clip", name, call);
      CHECK_CLOSE(what, clip, want_clip, 6);
      snprintf(what, sizeof what, "%s call %d: pow", name, call);
      CHECK_CLOSE(what, pw, want_pow, 6);
    } else {
      CHECK(st != TG_OK, "%s call %d: reading the outputs: %s", name, call, tg_error());
    }
    for (int i = 0; i < 4; i++) tg_free(in[i]);
    tg_free(out[0]);
    tg_free(out[1]);
  }
  CHECK(!jit || tg_jit_kernels(jit) > 0, "%s: the step was not captured", name);
  tg_jit_free(jit);
  tg_onnx_free(j.m);
  free(data);
}

/* Clip's bounds and Pow's exponent are taken as constants when the runner holds them (Constant nodes,
 * initializers), else used as tensors: nothing is read from the device, so a tg_jit capture works, and its
 * replays compute with the bounds and exponent of each call */
TEST(test_onnx_math_clip_pow_under_jit) {
  jit_clip_pow("jit_clip_pow", 4);
  jit_clip_pow("jit_const_clip_pow", 1);
  jit_clip_pow("jit_init_clip_pow", 1);
}
