/* test_onnx_math.c — the math operators (src/onnx/ops_math*.c) through the public ONNX API, on the cases of
 * tests/fixtures/onnx_math.bin (written by make_onnx_math_fixtures.py: one-node models with their inputs and
 * the outputs of ONNX's reference implementation, cross-checked with onnxruntime). They cover what ONNX's
 * backend data (opsets <= 17, run by build/onnx_backend) leaves out: newer opsets, empty reductions, the
 * integer rules of Div/Mod/Pow, NaN in Max/Min/Clip, ties, version differences, refused nodes, and shape
 * arithmetic kept on the host (a chain of them feeding TopK's K builds its graph without running a kernel). */
#include <stdlib.h>

#include "test.h"

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

/* one case of the fixture at b: load, run, compare (or expect the refusal); false if the blob is malformed */
static bool run_case(blob *b, const char *filter, int *ran) {
  uint32_t nlen = take_u(b, 2), mlen = 0, len[MAX_IO];
  const uint8_t *name = take(b, nlen);
  uint32_t flags = take_u(b, 1);
  const uint8_t *model = take_bytes(b, &mlen);
  uint32_t nin = take_u(b, 1);
  const uint8_t *ins[MAX_IO], *outs[MAX_IO];
  for (uint32_t i = 0; i < nin && i < MAX_IO; i++) ins[i] = take_bytes(b, &len[i]);
  uint32_t nout = take_u(b, 1), olen[MAX_IO];
  for (uint32_t i = 0; i < nout && i < MAX_IO; i++) outs[i] = take_bytes(b, &olen[i]);
  if (!b->ok || nin > MAX_IO || nout > MAX_IO) return false;
  char cname[128];
  snprintf(cname, sizeof cname, "%.*s", (int)nlen, (const char *)name);
  if (filter && strncmp(cname, filter, strlen(filter))) return true;
  ++*ran;

  tg_tensor *inputs[MAX_IO] = {0}, *got[MAX_IO] = {0};
  const char *names[MAX_IO];
  tg_onnx *m = tg_onnx_load_memory(model, mlen, NULL);
  bool loaded = m != NULL;
  tg_status st = loaded ? TG_OK : tg_error_status();
  for (uint32_t i = 0; st == TG_OK && i < nin; i++) {
    tg_onnx_io io = {0};
    inputs[i] = tg_onnx_tensor_from_memory(ins[i], len[i]);
    st = inputs[i] ? tg_onnx_input(m, (int)i, &io) : TG_ERR_ARG;
    names[i] = io.name;
    CHECK(st == TG_OK, "%s: input %u: %s", cname, i, tg_error());
  }
  uint64_t kernels = tg_get_stats().kernels_run;
  if (st == TG_OK) st = tg_onnx_run(m, (int)nin, names, inputs, got);
  uint64_t run_kernels = tg_get_stats().kernels_run - kernels;
  if (flags & 1) {
    CHECK(st != TG_OK, "%s: accepted, should be refused", cname);
    CHECK(st == TG_OK || strstr(tg_error(), "onnx"), "%s: the message does not name the node: %s", cname, tg_error());
  } else {
    CHECK(st == TG_OK, "%s: %s failed: %s", cname, loaded ? "tg_onnx_run" : "tg_onnx_load_memory", tg_error());
    CHECK(st != TG_OK || tg_onnx_num_outputs(m) == (int)nout, "%s: %d outputs, want %u", cname, tg_onnx_num_outputs(m), nout);
    if (flags & 2) CHECK(run_kernels == 0, "%s: tg_onnx_run ran %llu kernels, want none", cname, (unsigned long long)run_kernels);
    for (uint32_t i = 0; st == TG_OK && i < nout && (int)i < tg_onnx_num_outputs(m); i++) {
      tg_tensor *want = tg_onnx_tensor_from_memory(outs[i], olen[i]);
      char what[160];
      snprintf(what, sizeof what, "%s output %u", cname, i);
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
  return true;
}

/* every case whose name starts with filter (NULL: all) */
static void run_cases(const char *filter) {
  size_t size = 0;
  uint8_t *data = read_fixture("onnx_math.bin", &size);
  if (!data) {
    test_skip("tests/fixtures/onnx_math.bin not found (run from the repository root or set TG_FIXTURES)");
    return;
  }
  blob b = {data, data + size, true};
  const uint8_t *magic = take(&b, 4);
  uint32_t version = take_u(&b, 4), count = take_u(&b, 4);
  CHECK(b.ok && !memcmp(magic, "TGOX", 4) && version == 1, "onnx_math.bin: not a version 1 fixture");
  int ran = 0;
  for (uint32_t i = 0; b.ok && i < count; i++) CHECK(run_case(&b, filter, &ran), "onnx_math.bin: case %u is malformed", i);
  CHECK(b.ok && b.p == b.end, "onnx_math.bin: malformed or trailing bytes");
  CHECK(ran > 0, "no case matches '%s'", filter ? filter : "");
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

TEST(test_onnx_math_refuses_bad_nodes) { run_cases("error_"); }

TEST(test_onnx_math_shape_arithmetic_runs_no_kernel) { run_cases("known_"); }
