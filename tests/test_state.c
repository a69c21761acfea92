/* test_state.c — named parameters and safetensors: round trips of every dtype and odd shapes, loads that
 * share the file mapping, and malformed files, each refused with a message (the suite runs under ASan and
 * UBSan, so a read past the header or the file is a failure too). */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/device.h"
#include "tensor/tensor.h"
#include "test.h"

/* writes a safetensors file: the length hlen (or strlen(json) if hlen < 0), the json padded with spaces to
 * pad bytes (0: none), then ndata bytes */
static bool write_raw(const char *path, const char *json, long long hlen, size_t pad, const void *data, size_t ndata) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  size_t jl = strlen(json), total = pad > jl ? pad : jl;
  uint64_t h = hlen < 0 ? (uint64_t)total : (uint64_t)hlen;
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(h >> (8 * i));
  bool ok = fwrite(le, 1, 8, f) == 8 && fwrite(json, 1, jl, f) == jl;
  for (size_t i = jl; ok && i < total; i++) ok = fputc(' ', f) != EOF;
  if (ok && ndata) ok = fwrite(data, 1, ndata, f) == ndata;
  return fclose(f) == 0 && ok;
}

/* the buffer under a tensor that is a (reshaped) BUFFER node, or NULL */
static tg_buffer *buffer_of(const tg_tensor *t) {
  uop *u = t->u;
  if (u->op == OP_RESHAPE) u = u->src[0];
  return u->op == OP_BUFFER ? u->buf : NULL;
}

/* the sum of t's elements as a double (the temporary freed) */
static double sum_of(tg_tensor *t) {
  tg_tensor *s = tg_sum(t, 0, NULL, false);
  double v = tg_item(s);
  tg_free(s);
  return v;
}

/* the bytes of t */
static bool host_bytes(tg_tensor *t, void *dst) {
  return tg_to_host(t, dst, (size_t)tg_numel(t) * tg_dtype_size(tg_dtype_of(t))) == TG_OK;
}

TEST(test_params_hold_names_and_refuse_duplicates) {
  tg_params *p = tg_params_new();
  CHECK_T(p);
  tg_tensor *a = tg_zeros(TG_FLOAT32, 1, (int64_t[]){3}), *b = tg_ones(TG_INT32, 0, NULL);
  char name[16] = "w";
  CHECK(tg_params_add(p, name, a) == TG_OK, "%s", tg_error());
  name[0] = 'x';  /* the list keeps its own copy */
  CHECK(tg_params_add(p, "b", b) == TG_OK, "%s", tg_error());
  tg_free(a);  /* the list holds its own reference */
  tg_free(b);
  CHECK(tg_params_count(p) == 2, "count %d", tg_params_count(p));
  CHECK(!strcmp(tg_params_name(p, 0), "w") && !strcmp(tg_params_name(p, 1), "b"), "names");
  CHECK(tg_params_find(p, "w") == tg_params_tensor(p, 0) && tg_params_find(p, "zz") == NULL, "find");
  CHECK(tg_numel(tg_params_find(p, "w")) == 3, "the tensor is alive");
  CHECK(tg_params_add(p, "w", tg_params_tensor(p, 1)) == TG_ERR_ARG && strstr(tg_error(), "'w'"),
        "duplicate: %s", tg_error());
  CHECK(tg_params_add(p, NULL, tg_params_tensor(p, 1)) == TG_ERR_ARG, "NULL name");
  CHECK(tg_params_add(p, "", tg_params_tensor(p, 1)) == TG_ERR_ARG, "empty name");
  CHECK(tg_params_count(p) == 2 && tg_params_name(p, 2) == NULL && tg_params_tensor(p, -1) == NULL, "bounds");
  for (int i = 0; i < 100; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "layer.%d", i);
    tg_tensor *t = tg_full(TG_FLOAT32, 1, (int64_t[]){2}, i);
    CHECK(tg_params_add(p, nm, t) == TG_OK, "%s", tg_error());
    tg_free(t);
  }
  CHECK(tg_params_count(p) == 102 && sum_of(tg_params_find(p, "layer.0")) == 0, "growth");
  tg_params_free(p);
  tg_params_free(NULL);
}

typedef struct case_t { const char *name; tg_dtype dt; int ndim; int64_t shape[3]; } case_t;
static const case_t cases[] = {
    {"f32", TG_FLOAT32, 2, {2, 3}}, {"f16", TG_FLOAT16, 1, {5}},       {"bf16", TG_BFLOAT16, 2, {3, 1}},
    {"f64", TG_FLOAT64, 0, {0}},    {"i8", TG_INT8, 1, {7}},           {"i16", TG_INT16, 2, {2, 2}},
    {"i32", TG_INT32, 2, {0, 3}},   {"i64", TG_INT64, 1, {2}},         {"u8", TG_UINT8, 1, {3}},
    {"u16", TG_UINT16, 3, {1, 1, 1}}, {"u32", TG_UINT32, 1, {2}},      {"u64", TG_UINT64, 1, {2}},
    {"bool", TG_BOOL, 1, {4}},      {"name \"with\" \\ quotes\n", TG_FLOAT32, 1, {1}},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* deterministic bytes for case i (bool: 0/1) */
static void fill_case(int i, uint8_t *b, size_t n) {
  for (size_t k = 0; k < n; k++) b[k] = cases[i].dt == TG_BOOL ? (uint8_t)((k * 7 + (size_t)i) % 3 == 0) : (uint8_t)(k * 37 + (size_t)i * 11 + 1);
  if (cases[i].dt == TG_FLOAT16 || cases[i].dt == TG_BFLOAT16 || cases[i].dt == TG_FLOAT32 || cases[i].dt == TG_FLOAT64)
    for (size_t k = tg_dtype_size(cases[i].dt) - 1; k < n; k += tg_dtype_size(cases[i].dt)) b[k] = 0x3c;  /* no NaNs */
}

static size_t case_bytes(int i) {
  size_t n = tg_dtype_size(cases[i].dt);
  for (int d = 0; d < cases[i].ndim; d++) n *= (size_t)cases[i].shape[d];
  return n;
}

TEST(test_safetensors_round_trip_every_dtype_and_shape) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  tg_params *src = tg_params_new(), *dst = tg_params_new();
  uint8_t want[NCASES][64], got[64];
  for (int i = 0; i < NCASES; i++) {
    fill_case(i, want[i], case_bytes(i));
    tg_tensor *t = tg_from_data(cases[i].dt, cases[i].ndim, cases[i].shape, want[i], case_bytes(i));
    CHECK(tg_params_add(src, cases[i].name, t) == TG_OK, "%s", tg_error());
    tg_tensor *z = tg_zeros(cases[i].dt, cases[i].ndim, cases[i].shape);
    CHECK(tg_params_add(dst, cases[i].name, z) == TG_OK, "%s", tg_error());
    tg_free(t);
    tg_free(z);
  }
  /* a lazy value is realized by save */
  tg_tensor *a = tg_arange(TG_FLOAT32, 0, 6, 1), *a2 = tg_reshape(a, 2, (int64_t[]){3, 2});
  tg_tensor *lazy = tg_add_scalar(a2, 0.5);
  CHECK(tg_params_add(src, "lazy", lazy) == TG_OK, "%s", tg_error());
  tg_free(lazy);
  tg_free(a2);
  tg_free(a);
  tg_tensor *lz = tg_zeros(TG_FLOAT32, 2, (int64_t[]){3, 2});
  CHECK(tg_params_add(dst, "lazy", lz) == TG_OK, "%s", tg_error());
  tg_free(lz);
  CHECK(tg_safetensors_save(path, src) == TG_OK, "save: %s", tg_error());
  CHECK(tg_safetensors_load(path, dst, false) == TG_OK, "load: %s", tg_error());
  for (int i = 0; i < NCASES; i++) {
    tg_tensor *t = tg_params_find(dst, cases[i].name);
    memset(got, 0xAA, sizeof got);
    CHECK(host_bytes(t, got), "%s: %s", cases[i].name, tg_error());
    CHECK(!memcmp(got, want[i], case_bytes(i)), "%s: loaded bytes differ", cases[i].name);
    CHECK(tg_dtype_of(t) == cases[i].dt && tg_ndim(t) == cases[i].ndim, "%s: dtype/ndim", cases[i].name);
  }
  float lv[6];
  CHECK(host_bytes(tg_params_find(dst, "lazy"), lv), "%s", tg_error());
  for (int k = 0; k < 6; k++) CHECK(lv[k] == k + 0.5f, "lazy[%d] = %g", k, lv[k]);
  /* a loaded value computes like any other */
  CHECK(fabs(sum_of(tg_params_find(dst, "lazy")) - 18.0) < 1e-6, "sum of a loaded tensor");

  /* read: every tensor, in the file's (= the saved list's) order */
  tg_params *r = tg_safetensors_read(path);
  CHECK_T(r);
  CHECK(tg_params_count(r) == NCASES + 1, "read %d tensors", tg_params_count(r));
  for (int i = 0; i < NCASES && i < tg_params_count(r); i++) {
    CHECK(!strcmp(tg_params_name(r, i), cases[i].name), "order: %s", tg_params_name(r, i));
    tg_tensor *t = tg_params_tensor(r, i);
    CHECK(tg_dtype_of(t) == cases[i].dt && tg_ndim(t) == cases[i].ndim, "%s: dtype/ndim", cases[i].name);
    for (int d = 0; d < cases[i].ndim && d < tg_ndim(t); d++)
      CHECK(tg_shape(t, d) == cases[i].shape[d], "%s: shape", cases[i].name);
    CHECK(host_bytes(t, got) && !memcmp(got, want[i], case_bytes(i)), "%s: read bytes differ", cases[i].name);
  }
  tg_params_free(r);
  tg_params_free(src);
  tg_params_free(dst);

  /* an empty list round-trips too */
  tg_params *e = tg_params_new();
  CHECK(tg_safetensors_save(path, e) == TG_OK, "%s", tg_error());
  tg_params *er = tg_safetensors_read(path);
  CHECK(er && tg_params_count(er) == 0, "empty: %s", tg_error());
  tg_params_free(er);
  tg_params_free(e);
  test_remove_dir(dir);
}

/* the saved file follows the format: 8-byte header length, padded JSON, data aligned per dtype */
TEST(test_safetensors_file_layout) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  tg_params *p = tg_params_new();
  tg_tensor *a = tg_full(TG_UINT8, 1, (int64_t[]){3}, 7), *b = tg_full(TG_FLOAT64, 1, (int64_t[]){2}, 1.5);
  tg_params_add(p, "a", a);
  tg_params_add(p, "b", b);
  tg_free(a);
  tg_free(b);
  CHECK(tg_safetensors_save(path, p) == TG_OK, "%s", tg_error());
  FILE *f = fopen(path, "rb");
  uint8_t buf[256];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f) fclose(f);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = hl << 8 | buf[i];
  CHECK(n > 8 && (8 + hl) % 8 == 0 && 8 + hl + 19 == n, "header length %llu, file %zu", (unsigned long long)hl, n);
  const char *want = "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[16,19]},"
                     "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}";
  CHECK(n > 8 + strlen(want) && !memcmp(buf + 8, want, strlen(want)), "header: %.*s", (int)(n > 8 ? hl : 0), buf + 8);
  double d0;
  memcpy(&d0, buf + 8 + hl, 8);
  CHECK(d0 == 1.5 && buf[8 + hl + 16] == 7, "data");
  tg_params_free(p);
  test_remove_dir(dir);
}

TEST(test_safetensors_load_shares_the_mapping) {
  REQUIRE_CPU();  /* a GPU device copies the file's tensors to its memory */
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/big.safetensors", dir);
  enum { N = 1 << 18 };
  float *w = malloc(N * sizeof *w);
  if (!w) return;
  for (int i = 0; i < N; i++) w[i] = (float)i * 0.25f;
  tg_params *p = tg_params_new();
  tg_tensor *a = tg_from_data(TG_FLOAT32, 2, (int64_t[]){512, 512}, w, N * sizeof *w);
  tg_tensor *b = tg_from_data(TG_FLOAT32, 1, (int64_t[]){1000}, w, 1000 * sizeof *w);
  tg_params_add(p, "a", a);
  tg_params_add(p, "b", b);
  tg_free(a);
  tg_free(b);
  CHECK(tg_safetensors_save(path, p) == TG_OK, "%s", tg_error());
  tg_params_free(p);

  tg_params *q = tg_params_new();
  a = tg_zeros(TG_FLOAT32, 2, (int64_t[]){512, 512});
  b = tg_zeros(TG_FLOAT32, 1, (int64_t[]){1000});
  tg_params_add(q, "a", a);
  tg_params_add(q, "b", b);
  tg_free(a);
  tg_free(b);
  tg_stats s0 = tg_get_stats();
  CHECK(tg_safetensors_load(path, q, false) == TG_OK, "%s", tg_error());
  a = tg_params_find(q, "a");
  b = tg_params_find(q, "b");
  tg_buffer *ba = buffer_of(a), *bb = buffer_of(b);
  CHECK(ba && bb && ba->wrapped && bb->wrapped && ba->on_free && ba->ctx == bb->ctx,
        "loaded tensors are not wrapped buffers of one mapping");
  /* in the file: a at [0, 1 MiB), b right after it */
  if (ba && bb) CHECK((char *)ba->ptr + N * sizeof(float) == (char *)bb->ptr, "b is not beside a in the mapping");
  float *got = malloc(N * sizeof *got);
  CHECK(got && host_bytes(a, got) && !memcmp(got, w, N * sizeof *w), "a's values");
  CHECK(got && host_bytes(b, got) && !memcmp(got, w, 1000 * sizeof *w), "b's values");
  CHECK(tg_get_stats().buffers_allocated == s0.buffers_allocated, "loading and reading allocated %llu buffers",
        (unsigned long long)(tg_get_stats().buffers_allocated - s0.buffers_allocated));
  /* saving over the file these tensors map is safe: the new file replaces the name, the old one stays mapped */
  CHECK(tg_safetensors_save(path, q) == TG_OK, "save over the mapped file: %s", tg_error());
  CHECK(got && host_bytes(b, got) && !memcmp(got, w, 1000 * sizeof *w), "b after saving over its file");
  CHECK(tg_safetensors_load(path, q, false) == TG_OK, "%s", tg_error());
  CHECK(got && host_bytes(tg_params_find(q, "a"), got) && !memcmp(got, w, N * sizeof *w), "a reloaded");
  free(got);
  free(w);
  /* the mapping goes away with the last tensor on it */
  tg_params_free(q);
  tg_collect();
  FILE *maps = fopen("/proc/self/maps", "r");
  if (maps) {
    char line[PATH_MAX + 256];
    bool found = false;
    while (fgets(line, sizeof line, maps)) found |= strstr(line, path) != NULL;
    fclose(maps);
    CHECK(!found, "%s is still mapped after its tensors were freed", path);
  }
  test_remove_dir(dir);
}

TEST(test_safetensors_unaligned_offset_is_copied) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/u.safetensors", dir);
  /* a 1-byte tensor first puts the float32 tensor at offset 1 */
  const char *json = "{\"__metadata__\":{\"format\":\"pt\",\"k\":[1,{\"x\":null}]},"
                     "\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                     "\"f\":{\"shape\":[2,2],\"dtype\":\"F32\",\"data_offsets\":[1,17]}}";
  uint8_t data[17] = {9};
  float fv[4] = {1.5f, -2.0f, 3.25f, 1e-3f};
  memcpy(data + 1, fv, sizeof fv);
  size_t pad = (strlen(json) + 7) / 8 * 8;
  CHECK(write_raw(path, json, -1, pad, data, sizeof data), "write");
  tg_params *r = tg_safetensors_read(path);
  CHECK_T(r);
  CHECK(tg_params_count(r) == 2, "count %d", tg_params_count(r));
  float got[4] = {0};
  tg_tensor *f = tg_params_find(r, "f");
  CHECK(f && tg_shape(f, 0) == 2 && host_bytes(f, got) && !memcmp(got, fv, sizeof fv), "unaligned values");
  tg_buffer *bf = f ? buffer_of(f) : NULL;
  CHECK(bf && (uintptr_t)bf->ptr % 4 == 0, "the copy is aligned");
  uint8_t t0 = 0;
  CHECK(host_bytes(tg_params_find(r, "t"), &t0) && t0 == 9, "u8 value %u", t0);
  CHECK(f && fabs(sum_of(f) - (1.5 - 2.0 + 3.25 + 1e-3)) < 1e-5, "computes on the copy");
  tg_params_free(r);
  test_remove_dir(dir);
}

typedef struct bad_case {
  const char *what, *json;
  long long hlen;       /* -1: the JSON's length */
  size_t ndata;
  const char *expect;   /* a piece of the error */
} bad_case;

TEST(test_safetensors_refuses_malformed_files) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/bad.safetensors", dir);
  static char deep[2200];
  strcpy(deep, "{\"__metadata__\":");
  for (int i = 0; i < 1000; i++) strcat(deep, "[");
  for (int i = 0; i < 1000; i++) strcat(deep, "]");
  strcat(deep, "}");
  const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const bad_case bad[] = {
      {"header length past the end", ok, 1000, 8, "runs past the end"},
      {"header length huge", ok, 0x7fffffffffffffffll, 8, "runs past the end"},
      {"unclosed object", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", -1, 8, "bad JSON"},
      {"cut in a string", "{\"a", -1, 8, "bad JSON"},
      {"cut after a backslash", "{\"a\\", -1, 0, "bad JSON"},
      {"not an object", "[1, 2]", -1, 0, "bad JSON"},
      {"empty header", "", -1, 0, "bad JSON"},
      {"trailing bytes", "{} x", -1, 0, "bad JSON"},
      {"bad escape", "{\"a\\q\":{}}", -1, 0, "bad JSON"},
      {"short unicode escape", "{\"a\\u12\":{}}", -1, 0, "bad JSON"},
      {"lone surrogate", "{\"a\\udc00\":{}}", -1, 0, "bad JSON"},
      {"NUL in a name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}", -1, 1, "bad JSON"},
      {"control character", "{\"a\tb\":{}}", -1, 0, "bad JSON"},
      {"leading zero", "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", -1, 8, "bad JSON"},
      {"negative offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", -1, 8, "bad JSON"},
      {"fractional size", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", -1, 8, "bad JSON"},
      {"offset overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999999]}}", -1, 8, "too large"},
      {"one offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}", -1, 8, "bad JSON"},
      {"too many dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", -1, 4, "16 dimensions"},
      {"nesting too deep", deep, -1, 0, "nested too deeply"},
      {"metadata cut", "{\"__metadata__\":{\"a\":", -1, 0, "bad JSON"},
      {"missing dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, "lacks its \"dtype\""},
      {"missing offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", -1, 8, "data_offsets"},
      {"unknown dtype", "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", -1, 2, "unknown dtype 'F8_E4M3'"},
      {"duplicate name", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", -1, 2, "twice"},
      {"offsets out of range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[100,108]}}", -1, 8, "truncated"},
      {"truncated data", ok, -1, 5, "truncated"},
      {"size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8, "needs 12 bytes"},
      {"backwards offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", -1, 8, "backwards"},
      {"shape overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", -1, 8, "too large"},
      {"overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[6,8]}}", -1, 8, "overlap"},
      {"bad bool", "{\"a\":{\"dtype\":\"BOOL\",\"shape\":[8],\"data_offsets\":[0,8]}}", -1, 8, "BOOL"},
  };
  uint8_t data[16];
  for (int i = 0; i < 16; i++) data[i] = (uint8_t)(i + 2);
  tg_params *p = tg_params_new();
  tg_tensor *a = tg_full(TG_FLOAT32, 1, (int64_t[]){2}, 4);
  tg_params_add(p, "a", a);
  tg_free(a);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    /* the header sits at the end of the file when there is no data: a parser reading past it is caught */
    CHECK(write_raw(path, bad[i].json, bad[i].hlen, 0, data, bad[i].ndata), "write");
    tg_error_clear();
    tg_params *r = tg_safetensors_read(path);
    CHECK(r == NULL, "%s: read accepted the file", bad[i].what);
    CHECK(strstr(tg_error(), path) && strstr(tg_error(), bad[i].expect), "%s: message '%s'", bad[i].what, tg_error());
    tg_params_free(r);
    tg_error_clear();
    CHECK(tg_safetensors_load(path, p, true) != TG_OK && strstr(tg_error(), bad[i].expect), "%s: load: %s",
          bad[i].what, tg_error());
  }
  /* the parameter kept its value through every refused load */
  CHECK(sum_of(tg_params_find(p, "a")) == 8, "parameter changed");
  /* too short for the length, and no file at all */
  CHECK(write_raw(path, "", -1, 0, NULL, 0), "write");
  CHECK(truncate(path, 5) == 0, "truncate");
  CHECK(tg_safetensors_read(path) == NULL && strstr(tg_error(), "too few"), "short file: %s", tg_error());
  char missing[PATH_MAX + 64];
  snprintf(missing, sizeof missing, "%s/nope.safetensors", dir);
  CHECK(tg_safetensors_read(missing) == NULL && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "nope"),
        "missing file: %s", tg_error());
  CHECK(tg_safetensors_read(dir) == NULL && strstr(tg_error(), "regular"), "a directory: %s", tg_error());
  tg_params_free(p);
  test_remove_dir(dir);
}

TEST(test_safetensors_load_reports_every_difference) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  tg_params *file = tg_params_new();
  const char *fnames[] = {"w1", "w2", "b1", "extra1", "extra2"};
  for (int i = 0; i < 5; i++) {
    tg_tensor *t = tg_full(TG_FLOAT32, 1, (int64_t[]){4}, i + 1);
    tg_params_add(file, fnames[i], t);
    tg_free(t);
  }
  CHECK(tg_safetensors_save(path, file) == TG_OK, "%s", tg_error());
  tg_params_free(file);

  /* model: w1 right, w2 wrong shape, b1 wrong dtype, m1 and m2 missing */
  tg_params *m = tg_params_new();
  tg_tensor *ts[5] = {tg_zeros(TG_FLOAT32, 1, (int64_t[]){4}), tg_zeros(TG_FLOAT32, 2, (int64_t[]){2, 2}),
                      tg_zeros(TG_FLOAT16, 1, (int64_t[]){4}), tg_zeros(TG_FLOAT32, 1, (int64_t[]){4}),
                      tg_zeros(TG_FLOAT32, 1, (int64_t[]){4})};
  const char *mnames[] = {"w1", "w2", "b1", "m1", "m2"};
  for (int i = 0; i < 5; i++) {
    tg_params_add(m, mnames[i], ts[i]);
    tg_free(ts[i]);
  }
  CHECK(tg_safetensors_load(path, m, false) == TG_ERR_ARG, "accepted");
  const char *e = tg_error();
  const char *want[] = {"2 missing", "'m1'", "'m2'", "2 unexpected", "'extra1'", "'extra2'", "2 mismatched",
                        "'w2' is float32 (4,) in the file, float32 (2, 2) in the model", "'b1' is float32 (4,) in the file, float16"};
  for (int i = 0; i < 9; i++) CHECK(strstr(e, want[i]), "'%s' not in: %s", want[i], e);
  CHECK(sum_of(tg_params_find(m, "w1")) == 0, "w1 changed by a refused load");
  /* allow_partial: missing and unexpected are fine, mismatches are not */
  CHECK(tg_safetensors_load(path, m, true) == TG_ERR_ARG && !strstr(tg_error(), "missing") &&
            !strstr(tg_error(), "unexpected") && strstr(tg_error(), "2 mismatched"),
        "partial with mismatches: %s", tg_error());
  tg_params *ok = tg_params_new();
  tg_tensor *w1 = tg_zeros(TG_FLOAT32, 1, (int64_t[]){4}), *m1 = tg_full(TG_FLOAT32, 1, (int64_t[]){4}, -1);
  tg_params_add(ok, "w1", w1);
  tg_params_add(ok, "m1", m1);
  tg_free(w1);
  tg_free(m1);
  CHECK(tg_safetensors_load(path, ok, false) == TG_ERR_ARG && strstr(tg_error(), "'m1'") &&
            strstr(tg_error(), "'extra2'"), "strict: %s", tg_error());
  CHECK(tg_safetensors_load(path, ok, true) == TG_OK, "partial: %s", tg_error());
  CHECK(sum_of(tg_params_find(ok, "w1")) == 4, "w1 loaded");
  CHECK(sum_of(tg_params_find(ok, "m1")) == -4, "m1 kept");
  tg_params_free(ok);
  tg_params_free(m);
  test_remove_dir(dir);
}

/* a parameter tensor that requires a gradient keeps it and trains on the loaded value */
TEST(test_safetensors_load_into_trainable_param) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/t.safetensors", dir);
  tg_params *p = tg_params_new();
  tg_tensor *w = tg_full(TG_FLOAT32, 1, (int64_t[]){3}, 2);
  tg_params_add(p, "w", w);
  CHECK(tg_safetensors_save(path, p) == TG_OK, "%s", tg_error());
  tg_tensor *q = tg_set_requires_grad(tg_zeros(TG_FLOAT32, 1, (int64_t[]){3}), true);
  tg_params *l = tg_params_new();
  tg_params_add(l, "w", q);
  CHECK(tg_safetensors_load(path, l, false) == TG_OK, "%s", tg_error());
  tg_tensor *loss = tg_sum(tg_square(q), 0, NULL, false);
  CHECK(tg_backward(loss) == TG_OK, "%s", tg_error());
  float g[3] = {0};
  CHECK(tg_grad(q) && host_bytes(tg_grad(q), g) && g[0] == 4 && g[2] == 4, "grad %g", g[0]);
  tg_free(loss);
  tg_free(q);
  tg_free(w);
  tg_params_free(l);
  tg_params_free(p);
  test_remove_dir(dir);
}

/* a FIFO in place of a file is refused at once: opening it does not wait for a writer */
TEST(test_state_fifo_is_refused_without_blocking) {
  char dir[PATH_MAX], path[PATH_MAX + 16];
  CHECK(test_temp_dir(dir, sizeof dir), "no temp dir");
  snprintf(path, sizeof path, "%s/fifo", dir);
  CHECK(mkfifo(path, 0600) == 0, "mkfifo failed");
  tg_params *p = tg_safetensors_read(path);
  CHECK(!p && strstr(tg_error(), "regular file"), "a FIFO was read: %s", tg_error());
  tg_params_free(p);
  test_remove_dir(dir);
}
