/* onnx_backend.c — ONNX's backend tests through tgc's C API (tg_onnx_load / tg_onnx_run), as onnx's
 * backend test runner and tinygrad's external_test_onnx_backend.py run them.
 *
 *   onnx_backend [--data DIR] [--list] [--expected FILE] [--write-expected FILE] [FILTER...]
 *
 * Every test directory (test_*) under DIR (default $ONNX_TESTDATA, else /usr/share/libonnx-testdata/data; in
 * DIR itself and in its node/, pytorch-converted/, pytorch-operator/ and simple/) whose name contains one of
 * the FILTERs runs: model.onnx on each test_data_set_*'s input_K.pb, compared with output_K.pb (same dtype and
 * shape; floats within rtol 1e-3, atol 1e-7 with NaN equal to NaN; integers and bools exactly). DIR/light holds
 * the onnx wheel's model tests (light_NAME.onnx, run as test_NAME; the filter "light" selects them all): whole
 * networks (ResNet-50, DenseNet-121, Inception, VGG-19, ...) with constant weights, on the input onnx's runner
 * generates; their expected outputs are constant (a softmax of equal logits), so they check that a whole
 * graph loads, runs and has the right shapes, not its arithmetic. One line per
 * test (pass / FAIL / unsupported and why), then a table per operator (a node test's operator is its model's
 * first node's) and "onnx backend: N passed, N failed, N unsupported of N".
 *
 * The tests not expected to pass are listed in --expected (default tests/onnx_backend/expected.txt: a test
 * name per line, then the reason; # starts a comment). Exit status 1 when a test not listed fails or is
 * unsupported, or a listed one passes (then remove it from the list). --write-expected FILE writes the list
 * of what does not pass now. Missing data: says where it looked, prints "skipped" and exits 0. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "onnx/onnx_model.h"
#include "tg.h"

enum { PASS, FAIL, UNSUPPORTED };
static const char *const result_name[] = {"pass", "FAIL", "unsupported"};

typedef struct test {
  char name[256];
  char dir[4400];
  char op[128];
  int result;
  char reason[512];
  int light;     /* dir is light_NAME.onnx, its output beside it as light_NAME_output_K.pb, inputs generated */
  double rtol;
} test;

typedef struct op_row { char op[128]; int n[3]; } op_row;

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int cmp_test(const void *a, const void *b) { return strcmp(((const test *)a)->name, ((const test *)b)->name); }
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static test *tests;
static int ntests, captests;

static int wanted(const char *name, int nfilters, char **filters) {
  int keep = nfilters == 0;
  for (int i = 0; i < nfilters && !keep; i++) keep = strstr(name, filters[i]) != NULL;
  return keep;
}

static test *new_test(const char *name, const char *dir) {
  if (ntests == captests) {
    captests = captests ? captests * 2 : 256;
    tests = realloc(tests, (size_t)captests * sizeof *tests);
    if (!tests) exit(2);
  }
  test *t = &tests[ntests++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  snprintf(t->dir, sizeof t->dir, "%s", dir);
  t->rtol = 1e-3;
  return t;
}

/* onnx's "light" model tests (the onnx wheel's backend/test/data/light): light_NAME.onnx with constant
 * weights and its output light_NAME_output_0.pb, for the input onnx's runner generates (arange(n) / n in the
 * declared shape, a named dimension 1); the tolerances of onnx's model test cases */
static void add_light_tests(const char *dir, int nfilters, char **filters) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, "light_", 6) || n < 12 || strcmp(e->d_name + n - 5, ".onnx") || n + strlen(dir) > 4000)
      continue;
    char name[256], p[4400], out[4500];
    snprintf(name, sizeof name, "test_%.*s", (int)(n - 11), e->d_name + 6);
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    snprintf(out, sizeof out, "%.*s_output_0.pb", (int)(strlen(p) - 5), p);
    if (!is_file(p) || !is_file(out) || !(wanted(name, nfilters, filters) || wanted(e->d_name, nfilters, filters)))
      continue;
    test *t = new_test(name, p);
    t->light = 1;
    if (strstr(name, "densenet121")) t->rtol = 2e-3;
  }
  closedir(d);
}

static void add_tests(const char *dir, int nfilters, char **filters) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "test_", 5)) continue;
    char p[4400], model[4500];
    if (strlen(dir) + strlen(e->d_name) + 2 > 4096) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    snprintf(model, sizeof model, "%s/model.onnx", p);
    if (!is_dir(p) || !is_file(model) || !wanted(e->d_name, nfilters, filters)) continue;
    new_test(e->d_name, p);
  }
  closedir(d);
}

/* the first node's operator, read with the library's parser (whether or not tgc supports the model) */
static void model_path(const test *t, char *model, size_t cap) {
  if (t->light) snprintf(model, cap, "%s", t->dir);
  else snprintf(model, cap, "%s/model.onnx", t->dir);
}

static void first_op(test *t) {
  char model[4500];
  model_path(t, model, sizeof model);
  snprintf(t->op, sizeof t->op, "?");
  onnx_map *f = onnx_map_file(model, "model");
  if (!f) return;
  onnx_model *pm = onnx_model_parse(f, model, t->dir);
  if (pm && pm->graph && pm->graph->nnodes) snprintf(t->op, sizeof t->op, "%s", pm->graph->nodes[0].op_type);
  onnx_model_free(pm);
  tg_error_clear();
}

static void set(test *t, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set(test *t, int r, const char *fmt, ...) {
  t->result = r;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->reason, sizeof t->reason, fmt, ap);
  va_end(ap);
  for (char *c = t->reason; *c; c++)
    if (*c == '\n' || *c == '\t') *c = ' ';
  /* paths inside the test's directory are shown relative to it (the list reads the same on every machine) */
  size_t dl = strlen(t->dir);
  for (char *p; (p = strstr(t->reason, t->dir)) && p[dl] == '/';) memmove(p, p + dl + 1, strlen(p + dl + 1) + 1);
}

static int is_float(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64; }

/* numpy has no bfloat16: onnx's test data stores a bfloat16 tensor as its bits, uint16 (onnx's runner hands
 * the backend those bits), so a uint16 tensor where a bfloat16 is due is read as the bfloat16 of its bits */
static tg_tensor *bf16_bits(tg_tensor *t) { return tg_dtype_of(t) == TG_UINT16 ? tg_bitcast(t, TG_BFLOAT16) : t; }

/* compares got with want; 0 if they match, else writes why into why */
static int compare(tg_tensor *got, tg_tensor *want, double rtol, char *why, size_t n) {
  if (tg_dtype_of(got) == TG_BFLOAT16 && tg_dtype_of(want) == TG_UINT16) want = bf16_bits(want);
  if (tg_dtype_of(got) != tg_dtype_of(want)) {
    snprintf(why, n, "dtype %s, expected %s", tg_dtype_name(tg_dtype_of(got)), tg_dtype_name(tg_dtype_of(want)));
    return 1;
  }
  int same = tg_ndim(got) == tg_ndim(want);
  for (int d = 0; same && d < tg_ndim(got); d++) same = tg_shape(got, d) == tg_shape(want, d);
  if (!same) {
    char a[200] = "(", b[200] = "(";
    for (int d = 0; d < tg_ndim(got); d++) snprintf(a + strlen(a), sizeof a - strlen(a), "%lld,", (long long)tg_shape(got, d));
    for (int d = 0; d < tg_ndim(want); d++) snprintf(b + strlen(b), sizeof b - strlen(b), "%lld,", (long long)tg_shape(want, d));
    snprintf(why, n, "shape %.150s), expected %.150s)", a, b);
    return 1;
  }
  int64_t cnt = tg_numel(got);
  int fl = is_float(tg_dtype_of(want));
  tg_dtype host = fl ? TG_FLOAT64 : TG_INT64;
  tg_tensor *g = tg_cast(got, host), *w = tg_cast(want, host);
  void *gb = malloc((size_t)(cnt ? cnt : 1) * 8), *wb = malloc((size_t)(cnt ? cnt : 1) * 8);
  int rc = 0;
  if (!g || !w || !gb || !wb || tg_to_host(g, gb, (size_t)cnt * 8) || tg_to_host(w, wb, (size_t)cnt * 8)) {
    snprintf(why, n, "reading the output: %s", tg_error());
    rc = 1;
  }
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; !rc && i < cnt; i++) {
    int ok;
    if (fl) {
      double a = ((double *)gb)[i], b = ((double *)wb)[i];
      ok = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= 1e-7 + rtol * fabs(b);
    } else {
      ok = ((int64_t *)gb)[i] == ((int64_t *)wb)[i];
    }
    if (!ok && first < 0) first = i;
    bad += !ok;
  }
  if (!rc && bad) {
    if (fl)
      snprintf(why, n, "%lld of %lld values differ, first at %lld: %.8g, expected %.8g", (long long)bad, (long long)cnt,
               (long long)first, ((double *)gb)[first], ((double *)wb)[first]);
    else
      snprintf(why, n, "%lld of %lld values differ, first at %lld: %lld, expected %lld", (long long)bad, (long long)cnt,
               (long long)first, (long long)((int64_t *)gb)[first], (long long)((int64_t *)wb)[first]);
    rc = 1;
  }
  free(gb);
  free(wb);
  tg_free(g);
  tg_free(w);
  return rc;
}

/* reads dir/prefix_K.pb for K = 0, 1, ... into ts (at most cap); the count, or -1 (t's result set) */
static int read_pbs(test *t, const char *dir, const char *prefix, tg_tensor **ts, int cap) {
  int k = 0;
  for (; k < cap; k++) {
    char p[4600];
    snprintf(p, sizeof p, "%s/%s_%d.pb", dir, prefix, k);
    if (!is_file(p)) break;
    if (!(ts[k] = tg_onnx_read_tensor(p))) {
      set(t, tg_error_status() == TG_ERR_ARG ? UNSUPPORTED : FAIL, "%s_%d.pb: %s", prefix, k, tg_error());
      return -1;
    }
  }
  return k;
}

enum { CAP = 64 };

/* onnx's generated input for a light model: arange(n) / n in float32, a dimension without a size 1 */
static tg_tensor *light_input(const tg_onnx_io *io) {
  if (io->dtype != TG_FLOAT32 || io->ndim < 0) return NULL;
  int64_t shape[TG_MAX_DIMS], n = 1;
  for (int d = 0; d < io->ndim; d++) n *= shape[d] = io->shape[d] > 0 ? io->shape[d] : 1;
  return tg_reshape(tg_div(tg_arange(TG_FLOAT32, 0, (double)n, 1), tg_scalar(TG_FLOAT32, (double)n)), io->ndim, shape);
}

/* runs m on one data set: inputs in[0..nin) (by position), outputs compared with want[0..nwant) */
static void run_set(test *t, tg_onnx *m, const char *label, int nin, tg_tensor **in, int nwant, tg_tensor **want) {
  tg_tensor *got[CAP] = {0};
  const char *names[CAP];
  int ni = tg_onnx_num_inputs(m), no = tg_onnx_num_outputs(m);
  if (nin > ni) nin = ni;   /* more files than inputs cannot be bound by position */
  for (int k = 0; k < nin; k++) {
    tg_onnx_io io;
    tg_onnx_input(m, k, &io);
    names[k] = io.name;
    if (io.dtype == TG_BFLOAT16) in[k] = bf16_bits(in[k]);
  }
  if (no > CAP || nwant != no) {
    set(t, FAIL, "%s: the model has %d outputs, the data set %d", label, no, nwant);
  } else if (tg_onnx_run(m, nin, names, in, got) != TG_OK) {
    set(t, tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "not supported") ? UNSUPPORTED : FAIL, "%s: run: %s",
        label, tg_error());
  } else if (no && tg_realize_many(no, got) != TG_OK) {
    set(t, FAIL, "%s: realize: %s", label, tg_error());
  } else {
    for (int k = 0; k < no && t->result == PASS; k++) {
      char why[400];
      if (compare(got[k], want[k], t->rtol, why, sizeof why)) set(t, FAIL, "%s: output %d: %s", label, k, why);
    }
  }
}

static void run_light(test *t, tg_onnx *m) {
  char dir[4400], prefix[512];
  const char *slash = strrchr(t->dir, '/'), *base = slash ? slash + 1 : t->dir;
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - t->dir) : 1, slash ? t->dir : ".");
  snprintf(prefix, sizeof prefix, "%.*s_output", (int)(strlen(base) - 5), base);
  set(t, PASS, "generated input");
  tg_tensor *in[CAP] = {0}, *want[CAP] = {0};
  tg_scope_begin();
  int nin = tg_onnx_num_inputs(m), nwant = read_pbs(t, dir, prefix, want, CAP);
  for (int k = 0; k < nin && k < CAP && t->result == PASS; k++) {
    tg_onnx_io io;
    tg_onnx_input(m, k, &io);
    if (!(in[k] = light_input(&io))) set(t, FAIL, "input %d '%s': no generated input for %s", k, io.name, tg_dtype_name(io.dtype));
  }
  if (t->result == PASS && nwant >= 0) run_set(t, m, "light", nin, in, nwant, want);
  tg_scope_end();
}

static void run_test(test *t) {
  char model[4500];
  model_path(t, model, sizeof model);
  first_op(t);
  tg_error_clear();
  tg_onnx *m = tg_onnx_load(model);
  if (!m) {
    set(t, tg_error_status() == TG_ERR_ARG ? UNSUPPORTED : FAIL, "load: %s", tg_error());
    return;
  }
  if (t->light) {
    run_light(t, m);
    tg_onnx_free(m);
    return;
  }
  DIR *d = opendir(t->dir);
  char *sets[256];
  int nsets = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "test_data_set_", 14) && nsets < 256) sets[nsets++] = strdup(e->d_name);
  if (d) closedir(d);
  qsort(sets, (size_t)nsets, sizeof *sets, cmp_str);
  set(t, PASS, "%d data sets", nsets);
  if (!nsets) set(t, FAIL, "no test_data_set_*");
  for (int s = 0; s < nsets && t->result == PASS; s++) {
    char sd[4500];
    snprintf(sd, sizeof sd, "%s/%s", t->dir, sets[s]);
    tg_tensor *in[CAP] = {0}, *want[CAP] = {0};
    tg_scope_begin();
    int nin = read_pbs(t, sd, "input", in, CAP), nwant = nin < 0 ? -1 : read_pbs(t, sd, "output", want, CAP);
    if (nin >= 0 && nwant >= 0) run_set(t, m, sets[s], nin, in, nwant, want);
    tg_scope_end();
  }
  for (int s = 0; s < nsets; s++) free(sets[s]);
  tg_onnx_free(m);
}

/* the expected list: names (sorted) */
static char **expected;
static int nexpected;

static void read_expected(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "onnx_backend: no expected list at %s (every test is expected to pass)\n", path);
    return;
  }
  char line[2048];
  int cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    size_t n = strcspn(p, " \t\n");
    if (nexpected == cap) {
      cap = cap ? cap * 2 : 256;
      expected = realloc(expected, (size_t)cap * sizeof *expected);
      if (!expected) exit(2);
    }
    expected[nexpected++] = strndup(p, n);
  }
  fclose(f);
  if (nexpected) qsort(expected, (size_t)nexpected, sizeof *expected, cmp_str);  /* qsort(NULL, 0) is undefined */
}

static void free_all(char **filters, op_row *rows) {
  for (int i = 0; i < nexpected; i++) free(expected[i]);
  free(expected);
  free(tests);
  free(filters);
  free(rows);
}

static int is_expected(const char *name) {
  return nexpected && bsearch(&name, expected, (size_t)nexpected, sizeof *expected, cmp_str) != NULL;
}

int main(int argc, char **argv) {
  const char *data = getenv("ONNX_TESTDATA"), *expected_path = "tests/onnx_backend/expected.txt", *write_path = NULL;
  if (!data || !data[0]) data = "/usr/share/libonnx-testdata/data";
  int list = 0, nfilters = 0;
  char **filters = calloc((size_t)argc + 1, sizeof *filters);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
    else if (!strcmp(argv[i], "--list")) list = 1;
    else if (!strcmp(argv[i], "--expected") && i + 1 < argc) expected_path = argv[++i];
    else if (!strcmp(argv[i], "--write-expected") && i + 1 < argc) write_path = argv[++i];
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: onnx_backend [--data DIR] [--list] [--expected FILE] [--write-expected FILE] [FILTER...]\n");
      return 0;
    } else filters[nfilters++] = argv[i];
  }
  static const char *const subs[] = {"", "node", "pytorch-converted", "pytorch-operator", "simple"};
  for (size_t s = 0; s < sizeof subs / sizeof *subs; s++) {
    char p[4096];
    snprintf(p, sizeof p, "%s%s%s", data, subs[s][0] ? "/" : "", subs[s]);
    add_tests(p, nfilters, filters);
  }
  char light[4096];
  snprintf(light, sizeof light, "%s/light", data);
  add_light_tests(light, nfilters, filters);
  if (!ntests) {
    printf("onnx backend: no tests found under %s (in it or its node/, pytorch-converted/, pytorch-operator/, simple/)%s: skipped\n",
           data, nfilters ? " matching the filters" : "");
    free_all(filters, NULL);
    return 0;
  }
  qsort(tests, (size_t)ntests, sizeof *tests, cmp_test);
  if (list) {
    for (int i = 0; i < ntests; i++) printf("%s\n", tests[i].name);
    free_all(filters, NULL);
    return 0;
  }
  if (!write_path) read_expected(expected_path);
  int counts[3] = {0}, bad = 0;
  op_row *rows = calloc((size_t)ntests, sizeof *rows);
  int nrows = 0;
  time_t t0 = time(NULL);
  for (int i = 0; i < ntests; i++) {
    test *t = &tests[i];
    run_test(t);
    tg_collect();
    counts[t->result]++;
    int exp = is_expected(t->name);
    const char *note = "";
    if (!write_path && t->result != PASS && !exp) {
      bad++;
      note = "  [not in expected.txt]";
    } else if (!write_path && t->result == PASS && exp) {
      bad++;
      note = "  [now passing, remove from expected.txt]";
    }
    printf("%-60s %-11s %s%s\n", t->name, result_name[t->result], t->result == PASS ? "" : t->reason, note);
    fflush(stdout);
    const char *op = strstr(t->dir, "/node/") ? t->op : "(model tests)";
    int r = 0;
    while (r < nrows && strcmp(rows[r].op, op)) r++;
    if (r == nrows) snprintf(rows[nrows++].op, sizeof rows->op, "%s", op);
    rows[r].n[t->result]++;
  }
  printf("\n%-32s %6s %6s %12s\n", "operator", "pass", "fail", "unsupported");
  for (int r = 0; r < nrows; r++)
    printf("%-32s %6d %6d %12d\n", rows[r].op, rows[r].n[PASS], rows[r].n[FAIL], rows[r].n[UNSUPPORTED]);
  printf("onnx backend: %d passed, %d failed, %d unsupported of %d (%lds)\n", counts[PASS], counts[FAIL],
         counts[UNSUPPORTED], ntests, (long)(time(NULL) - t0));
  if (write_path) {
    FILE *f = fopen(write_path, "w");
    if (!f) {
      fprintf(stderr, "onnx_backend: cannot write %s: %s\n", write_path, strerror(errno));
      free_all(filters, rows);
      return 2;
    }
    fprintf(f, "# ONNX backend tests not expected to pass (build/onnx_backend --write-expected FILE writes this list):\n"
               "# a test name, then why it does not pass\n");
    for (int i = 0; i < ntests; i++)
      if (tests[i].result != PASS) fprintf(f, "%s %s: %s\n", tests[i].name, result_name[tests[i].result], tests[i].reason);
    fclose(f);
    printf("wrote %s\n", write_path);
    free_all(filters, rows);
    return 0;
  }
  if (bad) printf("onnx backend: %d tests differ from expected.txt\n", bad);
  free_all(filters, rows);
  return bad ? 1 : 0;
}
