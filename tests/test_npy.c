/* test_npy.c — .npy files (src/nn/npy.c) against the files numpy itself writes (tests/fixtures/npy/, made by
 * tests/fixtures/make_npy_fixtures.py): every dtype, 0-d, size 0, Fortran order, big-endian, versions 2.0 and
 * 3.0 load to the bytes numpy's tobytes() gives (NAME.raw); tg_npy_save writes numpy's bytes exactly; round
 * trips; and malformed files (every truncation, bad headers, dtypes tgc lacks) refused with a message. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/npy.h"
#include "test.h"

/* tests/fixtures/npy/NAME.EXT (or $TG_FIXTURES/npy/...) into path */
static void fixture_path(char *path, size_t cap, const char *name, const char *ext) {
  const char *dir = getenv("TG_FIXTURES");
  if (dir) {
    snprintf(path, cap, "%s/npy/%s.%s", dir, name, ext);
  } else {
    const char *file = __FILE__, *slash = strrchr(file, '/');
    snprintf(path, cap, "%.*sfixtures/npy/%s.%s", slash ? (int)(slash - file + 1) : 0, file, name, ext);
  }
}

/* the whole file into a new malloc'ed buffer (*n bytes); NULL if unreadable */
static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *b = NULL;
  long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)len + 1)) &&
      fread(b, 1, (size_t)len, f) != (size_t)len) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *n = (size_t)(len > 0 ? len : 0);
  return b;
}

static bool spill(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = (!n || fwrite(p, 1, n, f) == n);
  return fclose(f) == 0 && ok;
}

/* what numpy wrote, and the dtype and shape tgc must see */
typedef struct npy_case {
  const char *name;
  tg_dtype dt;
  int ndim;
  int64_t shape[4];
  bool c_le_v1;  /* little-endian, C order, version 1.0: tg_npy_save must write the same bytes */
} npy_case;

static const npy_case cases[] = {
    {"bool", TG_BOOL, 2, {2, 3}, true},         {"int8", TG_INT8, 2, {2, 3}, true},
    {"int16", TG_INT16, 2, {2, 3}, true},       {"int32", TG_INT32, 2, {2, 3}, true},
    {"int64", TG_INT64, 2, {2, 3}, true},       {"uint8", TG_UINT8, 2, {2, 3}, true},
    {"uint16", TG_UINT16, 2, {2, 3}, true},     {"uint32", TG_UINT32, 2, {2, 3}, true},
    {"uint64", TG_UINT64, 2, {2, 3}, true},     {"float16", TG_FLOAT16, 2, {2, 3}, true},
    {"float32", TG_FLOAT32, 2, {2, 3}, true},   {"float64", TG_FLOAT64, 2, {2, 3}, true},
    {"scalar", TG_FLOAT32, 0, {0}, true},       {"empty", TG_FLOAT32, 1, {0}, true},
    {"empty3d", TG_INT64, 3, {2, 0, 3}, true},  {"vector", TG_INT32, 1, {100}, true},
    {"4d", TG_FLOAT64, 4, {2, 3, 4, 5}, true},  {"fortran", TG_FLOAT32, 3, {2, 3, 4}, false},
    {"fortran_int16", TG_INT16, 2, {3, 2}, false}, {"be_float32", TG_FLOAT32, 2, {2, 3}, false},
    {"be_float16", TG_FLOAT16, 2, {2, 3}, false}, {"be_float64", TG_FLOAT64, 2, {2, 3}, false},
    {"be_int64", TG_INT64, 2, {2, 3}, false},   {"be_uint16", TG_UINT16, 2, {2, 3}, false},
    {"be_int32_fortran", TG_INT32, 2, {3, 4}, false}, {"v2", TG_FLOAT32, 2, {3, 2}, false},
    {"v3", TG_UINT8, 2, {2, 3}, false},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* t has c's dtype and shape and holds the bytes of c's .raw file */
static bool check_case(const npy_case *c, tg_tensor *t) {
  char path[1024];
  if (tg_dtype_of(t) != c->dt || tg_ndim(t) != c->ndim) {
    CHECK(0, "%s: %s with %d axes, expected %s with %d", c->name, tg_dtype_name(tg_dtype_of(t)), tg_ndim(t),
          tg_dtype_name(c->dt), c->ndim);
    return false;
  }
  for (int d = 0; d < c->ndim; d++)
    if (tg_shape(t, d) != c->shape[d]) {
      CHECK(0, "%s: axis %d has size %lld, expected %lld", c->name, d, (long long)tg_shape(t, d), (long long)c->shape[d]);
      return false;
    }
  fixture_path(path, sizeof path, c->name, "raw");
  size_t n = 0;
  uint8_t *want = slurp(path, &n);
  if (!want) {
    CHECK(0, "cannot read %s (run from the repository root or set TG_FIXTURES)", path);
    return false;
  }
  size_t nb = (size_t)tg_numel(t) * tg_dtype_size(c->dt);
  uint8_t *got = malloc(nb + 1);
  bool ok = got && nb == n && tg_to_host(t, got, nb) == TG_OK;
  CHECK(ok, "%s: %zu bytes, the .raw file has %zu (%s)", c->name, nb, n, tg_error());
  for (size_t i = 0; ok && i < n; i++)
    if (got[i] != want[i]) {
      CHECK(0, "%s: byte %zu is 0x%02x, numpy's is 0x%02x", c->name, i, got[i], want[i]);
      ok = false;
    }
  free(got);
  free(want);
  return ok;
}

TEST(test_npy_loads_what_numpy_wrote) {
  for (int k = 0; k < NCASES; k++) {
    char path[1024];
    fixture_path(path, sizeof path, cases[k].name, "npy");
    tg_tensor *t = tg_npy_load(path);
    CHECK(t, "%s: %s", path, tg_error());
    if (t) check_case(&cases[k], t);
    tg_free(t);
  }
}

TEST(test_npy_loaded_tensor_belongs_to_the_scope_and_computes) {
  char path[1024];
  fixture_path(path, sizeof path, "vector", "npy");
  tg_scope_begin();
  tg_tensor *t = tg_npy_load(path);
  CHECK_T(t);
  /* numpy's vector is arange(100) * 3 - 50: its sum is 3 * 4950 - 5000 */
  double s = tg_item(tg_sum(t, 0, NULL, false));
  CHECK(s == 9850.0, "sum %g, expected 9850", s);
  tg_scope_end();  /* frees t and the sum: LeakSanitizer sees any leak */
}

TEST(test_npy_save_writes_numpys_bytes) {
  char dir[512], out[1024], path[1024];
  CHECK(test_temp_dir(dir, sizeof dir), "no temporary folder");
  snprintf(out, sizeof out, "%s/a.npy", dir);
  for (int k = 0; k < NCASES; k++) {
    const npy_case *c = &cases[k];
    if (!c->c_le_v1) continue;
    size_t nraw = 0, nnpy = 0, ngot = 0;
    fixture_path(path, sizeof path, c->name, "raw");
    uint8_t *raw = slurp(path, &nraw);
    fixture_path(path, sizeof path, c->name, "npy");
    uint8_t *want = slurp(path, &nnpy);
    CHECK(raw && want, "cannot read the fixtures of %s", c->name);
    tg_tensor *t = raw ? tg_from_data(c->dt, c->ndim, c->shape, raw, nraw) : NULL;
    CHECK(t, "%s: %s", c->name, tg_error());
    CHECK(!t || tg_npy_save(out, t) == TG_OK, "save %s: %s", c->name, tg_error());
    uint8_t *got = slurp(out, &ngot);
    bool same = got && want && ngot == nnpy && !memcmp(got, want, nnpy);
    CHECK(same, "%s: tg_npy_save wrote %zu bytes unlike numpy's %zu (header: %.70s)", c->name, ngot, nnpy,
          got && ngot > 10 ? (const char *)got + 10 : "");
    free(raw);
    free(want);
    free(got);
    tg_free(t);
  }
  test_remove_dir(dir);
}

TEST(test_npy_round_trips_lazy_views_and_every_dtype) {
  char dir[512], path[1024];
  CHECK(test_temp_dir(dir, sizeof dir), "no temporary folder");
  snprintf(path, sizeof path, "%s/x.npy", dir);
  /* a permuted, sliced lazy view: saved in C order of its own shape */
  float want[3 * 2];
  tg_tensor *a = tg_reshape(tg_arange(TG_FLOAT32, 0, 12, 1), 2, (int64_t[]){4, 3});
  tg_tensor *v = tg_shrink(tg_permute(a, 2, (int[]){1, 0}), 2, (int64_t[]){0, 3, 1, 3});  /* (3, 2) */
  CHECK_T(v);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) want[i * 2 + j] = (float)((j + 1) * 3 + i);
  CHECK(tg_npy_save(path, v) == TG_OK, "save: %s", tg_error());
  tg_tensor *b = tg_npy_load(path);
  CHECK_T(b);
  float got[6] = {0};
  CHECK(tg_ndim(b) == 2 && tg_shape(b, 0) == 3 && tg_shape(b, 1) == 2, "shape");
  CHECK(tg_to_host(b, got, sizeof got) == TG_OK, "%s", tg_error());
  CHECK_CLOSE("view", got, want, 6);
  tg_free(a);
  tg_free(v);
  tg_free(b);
  /* every dtype numpy has, through a cast of the same values */
  for (int d = 0; d < TG_DTYPE_COUNT; d++) {
    if (d == TG_BFLOAT16) continue;
    tg_tensor *x = tg_cast(tg_arange(TG_FLOAT32, 0, 5, 1), (tg_dtype)d);
    CHECK(tg_npy_save(path, x) == TG_OK, "save %s: %s", tg_dtype_name((tg_dtype)d), tg_error());
    tg_tensor *y = tg_npy_load(path);
    tg_tensor *eq = y ? tg_all(tg_eq(x, y), 0, NULL, false) : NULL;
    CHECK(y && tg_dtype_of(y) == (tg_dtype)d && tg_item(eq) == 1.0, "%s did not round-trip: %s", tg_dtype_name((tg_dtype)d),
          tg_error());
    tg_free(eq);
    tg_free(x);
    tg_free(y);
  }
  test_remove_dir(dir);
}

TEST(test_npy_save_refuses_what_numpy_lacks_and_keeps_the_old_file) {
  char dir[512], path[1024];
  CHECK(test_temp_dir(dir, sizeof dir), "no temporary folder");
  snprintf(path, sizeof path, "%s/x.npy", dir);
  CHECK(spill(path, "old", 3), "write");
  tg_tensor *b = tg_ones(TG_BFLOAT16, 1, (int64_t[]){2});
  tg_error_clear();
  CHECK(tg_npy_save(path, b) == TG_ERR_ARG && strstr(tg_error(), "bfloat16"), "bfloat16: %s", tg_error());
  tg_error_clear();
  CHECK(tg_npy_save(path, NULL) == TG_ERR_ARG && tg_error()[0], "NULL tensor: %s", tg_error());
  CHECK(tg_npy_save(NULL, b) == TG_ERR_ARG, "NULL path");
  char missing[1100];
  snprintf(missing, sizeof missing, "%s/no/such/x.npy", dir);
  tg_tensor *f = tg_ones(TG_FLOAT32, 1, (int64_t[]){2});
  CHECK(tg_npy_save(missing, f) == TG_ERR_IO && strstr(tg_error(), "/no/such"), "missing folder: %s", tg_error());
  size_t n = 0;
  uint8_t *old = slurp(path, &n);
  CHECK(old && n == 3 && !memcmp(old, "old", 3), "a refused save touched the file");
  free(old);
  tg_free(b);
  tg_free(f);
  test_remove_dir(dir);
}

TEST(test_npy_refuses_dtypes_tgc_lacks) {
  static const struct { const char *name, *word; } lack[] = {
      {"complex", "c8"}, {"object", "|O"}, {"structured", "structured"}, {"unicode", "U2"}, {"bfloat16", "V2"},
  };
  for (int k = 0; k < (int)(sizeof lack / sizeof lack[0]); k++) {
    char path[1024];
    fixture_path(path, sizeof path, lack[k].name, "npy");
    if (access(path, R_OK) != 0) {
      CHECK(strcmp(lack[k].name, "bfloat16") == 0, "%s is missing", path);  /* written only with ml_dtypes */
      continue;
    }
    tg_error_clear();
    tg_tensor *t = tg_npy_load(path);
    CHECK(!t && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), lack[k].word) && strstr(tg_error(), path),
          "%s: got %p, status %d, \"%s\"", lack[k].name, (void *)t, (int)tg_error_status(), tg_error());
    tg_free(t);
  }
}

/* every prefix of a good file, and the file with a byte more, refused (TG_ERR_IO), by the in-memory reader
 * and (many of them) by the file reader */
TEST(test_npy_refuses_every_truncation) {
  static const char *const names[] = {"float32", "scalar", "empty", "fortran", "v2", "v3", "be_int64"};
  char dir[512], out[1024], path[1024];
  CHECK(test_temp_dir(dir, sizeof dir), "no temporary folder");
  snprintf(out, sizeof out, "%s/t.npy", dir);
  for (int k = 0; k < (int)(sizeof names / sizeof names[0]); k++) {
    size_t n = 0;
    fixture_path(path, sizeof path, names[k], "npy");
    uint8_t *b = slurp(path, &n);
    CHECK(b, "cannot read %s", path);
    if (!b) continue;
    uint8_t *longer = malloc(n + 1);
    memcpy(longer, b, n);
    longer[n] = 0;
    for (size_t len = 0; len <= n + 1; len++) {
      if (len == n) continue;
      const uint8_t *src = len > n ? longer : b;
      tg_error_clear();
      tg_tensor *m = npy_load_bytes("mem.npy", src, len);
      CHECK(!m && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "mem.npy"),
            "%s cut to %zu of %zu bytes: in memory got %p, \"%s\"", names[k], len, n, (void *)m, tg_error());
      tg_free(m);
      /* the file reader: the prefix, the last bytes and every 16th length (writing files is slow) */
      if (len > 16 && len + 8 < n && len % 16) continue;
      CHECK(spill(out, src, len), "write");
      tg_error_clear();
      tg_tensor *t = tg_npy_load(out);
      CHECK(!t && tg_error_status() == TG_ERR_IO && tg_error()[0], "%s cut to %zu of %zu bytes: got %p, \"%s\"",
            names[k], len, n, (void *)t, tg_error());
      tg_free(t);
      if (test_failures_in_current()) break;
    }
    free(longer);
    free(b);
  }
  test_remove_dir(dir);
}

/* a version 1.0 file of the header text h (padded as numpy pads) and n data bytes, into out; its length */
static size_t build(uint8_t *out, size_t cap, const char *h, const void *data, size_t n) {
  size_t hl = strlen(h), total = (10 + hl + 1 + 63) / 64 * 64, pad = total - 10 - hl;
  if (total + n > cap) return 0;
  memcpy(out, "\x93NUMPY\x01\x00", 8);
  out[8] = (uint8_t)((total - 10) & 0xff);
  out[9] = (uint8_t)((total - 10) >> 8);
  memcpy(out + 10, h, hl);
  memset(out + 10 + hl, ' ', pad - 1);
  out[total - 1] = '\n';
  if (n) memcpy(out + total, data, n);
  return total + n;
}

TEST(test_npy_refuses_malformed_headers) {
  static const struct { const char *header; size_t ndata; tg_status st; const char *word; } bad[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4, TG_ERR_IO, "need"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12, TG_ERR_IO, "follow the data"},
      {"{'descr': '<f4', 'fortran_order': False}", 4, TG_ERR_IO, "'shape' is missing"},
      {"{'descr': '<f4', 'shape': (1,)}", 4, TG_ERR_IO, "'fortran_order' is missing"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", 4, TG_ERR_IO, "unknown key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", 4, TG_ERR_IO, "(n,)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4, TG_ERR_IO, "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}", 4, TG_ERR_IO, "leading zero"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,)}", 4, TG_ERR_IO, "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}", 4, TG_ERR_IO, "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", 4, TG_ERR_IO, "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", 4, TG_ERR_IO, "tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4, TG_ERR_IO, "2^63"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}", 4, TG_ERR_IO,
       "needs more data"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", 4, TG_ERR_IO, "True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (1,)}", 4, TG_ERR_IO, "True or False"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", 4, TG_ERR_IO, "True or False"},
      {"{'descr': '<f3', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_ARG, "f3"},
      {"{'descr': 'xf4', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "not a numpy dtype"},
      {"{'descr': '<z4', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "not a numpy dtype"},
      {"{'descr': '<f', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "not a numpy dtype"},
      {"{'descr': '|f4', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "byte order"},
      {"{'descr': '<f4\\x', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "escapes"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "descr"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "quoted"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", 4, TG_ERR_IO, "':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4, TG_ERR_IO, "follow the dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}}", 4, TG_ERR_IO, "follow the dict"},
      {"['descr', '<f4']", 4, TG_ERR_IO, "dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,),", 4, TG_ERR_IO, "ends"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}", 4, TG_ERR_ARG,
       "more than 16 axes"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8, TG_ERR_ARG, "c8"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), '\xe9': 1}", 4, TG_ERR_IO, "0xe9"},
  };
  uint8_t buf[512], zero[16] = {0};
  for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
    size_t n = build(buf, sizeof buf, bad[k].header, zero, bad[k].ndata);
    tg_error_clear();
    tg_tensor *t = npy_load_bytes("bad.npy", buf, n);
    CHECK(!t && tg_error_status() == bad[k].st && strstr(tg_error(), bad[k].word),
          "header %s: got %p, status %d (expected %d), \"%s\" (expected to name \"%s\")", bad[k].header, (void *)t,
          (int)tg_error_status(), (int)bad[k].st, tg_error(), bad[k].word);
    tg_free(t);
  }
  /* the prefix: magic, version, header length */
  size_t n = build(buf, sizeof buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", zero, 4);
  static const struct { int at; uint8_t byte; const char *word; } prefix[] = {
      {0, 0x92, "not a .npy"}, {5, 'y', "not a .npy"}, {6, 4, "version 4.0"}, {6, 0, "version 0.0"},
      {7, 1, "version 1.1"}, {8, 0xff, "header is"}, {9, 0x01, "header is"},
  };
  for (int k = 0; k < (int)(sizeof prefix / sizeof prefix[0]); k++) {
    uint8_t c[512];
    memcpy(c, buf, n);
    c[prefix[k].at] = prefix[k].byte;
    tg_error_clear();
    tg_tensor *t = npy_load_bytes("bad.npy", c, n);
    CHECK(!t && tg_error_status() == TG_ERR_IO && strstr(tg_error(), prefix[k].word), "byte %d = 0x%02x: \"%s\"",
          prefix[k].at, prefix[k].byte, tg_error());
    tg_free(t);
  }
}

/* what numpy's reader also takes: Python 2's long integers, double quotes, any key order, no trailing comma,
 * '=' (this machine's order), '>' on a 1-byte type, tabs and newlines between tokens */
TEST(test_npy_accepts_headers_numpy_reads) {
  static const char *const good[] = {
      "{'descr': '<i2', 'fortran_order': False, 'shape': (2L, 3L), }",
      "{\"descr\": \"<i2\", \"fortran_order\": False, \"shape\": (2, 3)}",
      "{'shape': (2, 3,), 'fortran_order': False, 'descr': '<i2'}",
      "{'descr': '=i2', 'fortran_order': False, 'shape': (2, 3)}",
      "{\n\t'descr' : '<i2' ,\n 'fortran_order' :False,'shape':( 2 ,3 ) ,}",
  };
  int16_t data[6] = {1, -2, 3, -4, 5, 32767};
  uint8_t buf[512];
  for (int k = 0; k < (int)(sizeof good / sizeof good[0]); k++) {
    size_t n = build(buf, sizeof buf, good[k], data, sizeof data);
    tg_tensor *t = npy_load_bytes("good.npy", buf, n);
    int16_t got[6] = {0};
    CHECK(t && tg_dtype_of(t) == TG_INT16 && tg_ndim(t) == 2 && tg_shape(t, 0) == 2 && tg_shape(t, 1) == 3 &&
              tg_to_host(t, got, sizeof got) == TG_OK && !memcmp(got, data, sizeof data),
          "header %s: %s", good[k], t ? "wrong dtype, shape or data" : tg_error());
    tg_free(t);
  }
  uint8_t u8[3] = {1, 2, 255};
  size_t n = build(buf, sizeof buf, "{'descr': '>u1', 'fortran_order': True, 'shape': (3,)}", u8, 3);
  tg_tensor *t = npy_load_bytes("good.npy", buf, n);
  uint8_t got[3] = {0};
  CHECK(t && tg_dtype_of(t) == TG_UINT8 && tg_to_host(t, got, 3) == TG_OK && !memcmp(got, u8, 3), "'>u1': %s",
        tg_error());
  tg_free(t);
}

/* the entries of dir other than . and .. */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (d) closedir(d);
  return n;
}

/* a save whose last step fails (the target is a folder: the rename over it is refused) leaves no temporary
 * file behind and the folder as it was */
TEST(test_npy_save_that_fails_at_the_rename_leaves_nothing) {
  char dir[512], path[1024];
  CHECK(test_temp_dir(dir, sizeof dir), "no temporary folder");
  snprintf(path, sizeof path, "%s/x.npy", dir);
  CHECK(mkdir(path, 0755) == 0, "mkdir");
  tg_tensor *f = tg_ones(TG_FLOAT32, 1, (int64_t[]){5});
  tg_error_clear();
  CHECK(tg_npy_save(path, f) == TG_ERR_IO && strstr(tg_error(), "x.npy"), "over a folder: %s", tg_error());
  struct stat sb;
  CHECK(entries(dir) == 1 && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode), "%d entries left", entries(dir));
  tg_free(f);
  rmdir(path);
  test_remove_dir(dir);
}

TEST(test_npy_load_refuses_paths_that_are_not_files) {
  char dir[512], path[1024];
  CHECK(test_temp_dir(dir, sizeof dir), "no temporary folder");
  tg_error_clear();
  CHECK(!tg_npy_load(dir) && tg_error_status() == TG_ERR_IO && strstr(tg_error(), dir), "a folder: %s", tg_error());
  snprintf(path, sizeof path, "%s/missing.npy", dir);
  tg_error_clear();
  CHECK(!tg_npy_load(path) && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "missing.npy"), "missing: %s",
        tg_error());
  tg_error_clear();
  CHECK(!tg_npy_load(NULL) && tg_error_status() == TG_ERR_ARG, "NULL path");
  test_remove_dir(dir);
}
