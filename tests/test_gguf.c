/* test_gguf.c — the GGUF reader (src/nn/gguf.c, gguf_api.c): files written here by a minimal C writer
 * (metadata of every type, tensors, and malformed variants: every truncation, bad magic and versions, lengths
 * and offsets past the end, overflowing dimensions, unknown types, misaligned offsets, ...), each refused with
 * a message; and tests/fixtures/gguf/every_type.gguf, written by the `gguf` package from PyPI (the GGUF
 * project's writer), whose tensors carry the package's own dequantized values to compare with. The suite runs
 * under ASan and LeakSanitizer too: a read past the end or a leak on a refused file is a failure. */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn/gguf.h"
#include "runtime/device.h"
#include "tensor/tensor.h"
#include "test.h"
#include "test_gguf.h"

/* ---- a minimal GGUF writer (over test_gguf.h's byte writer) ---------------------------------------------------- */

static void gw_u32(gw *w, uint32_t v) { gw_le(w, v, 4); }
static void gw_u64(gw *w, uint64_t v) { gw_le(w, v, 8); }
static void gw_pad(gw *w, size_t align) { while (w->n % align) gw_le(w, 0, 1); }
static void gw_f32(gw *w, float f) { uint32_t u; memcpy(&u, &f, 4); gw_u32(w, u); }
static void gw_f64(gw *w, double f) { uint64_t u; memcpy(&u, &f, 8); gw_u64(w, u); }
static void gw_header(gw *w, uint32_t version, uint64_t nt, uint64_t nkv) {
  gw_bytes(w, "GGUF", 4);
  gw_u32(w, version);
  gw_u64(w, nt);
  gw_u64(w, nkv);
}
/* a key and its value type */
static void gw_key(gw *w, const char *key, uint32_t type) { gw_str(w, key); gw_u32(w, type); }
/* a tensor info with dims ne (ggml's order) */
static void gw_tensor(gw *w, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t offset) {
  gw_str(w, name);
  gw_u32(w, (uint32_t)nd);
  for (int d = 0; d < nd; d++) gw_u64(w, ne[d]);
  gw_u32(w, type);
  gw_u64(w, offset);
}

/* the values of the small file's tensors */
static float small_w[6] = {1.5f, -2, 0.25f, 4, -5, 6.75f};
static uint8_t small_q[2 * 34];

/* the small file: 13 keys of every value type, arrays of numbers, bools and strings (an empty one, a NUL inside
 * a string), tensors "w" F32 ne (2, 3) at 0 and "q" Q8_0 ne (32, 2) at 32; alignment 32 */
static void small_file(gw *w) {
  *w = (gw){0};
  gw_header(w, 3, 2, 14);
  gw_key(w, "general.architecture", 8); gw_str(w, "llama");
  gw_key(w, "k.u8", 0); gw_le(w, 250, 1);
  gw_key(w, "k.i8", 1); gw_le(w, (uint8_t)-3, 1);
  gw_key(w, "k.u16", 2); gw_le(w, 65000, 2);
  gw_key(w, "k.i16", 3); gw_le(w, (uint16_t)-1234, 2);
  gw_key(w, "k.u32", 4); gw_u32(w, 4000000000u);
  gw_key(w, "k.i32", 5); gw_u32(w, (uint32_t)-70000);
  gw_key(w, "k.f32", 6); gw_f32(w, 0.1f);
  gw_key(w, "k.bool", 7); gw_le(w, 0, 1);
  gw_key(w, "k.u64", 10); gw_u64(w, UINT64_MAX);
  gw_key(w, "k.i64", 11); gw_u64(w, (uint64_t)INT64_MIN);
  gw_key(w, "k.f64", 12); gw_f64(w, -1e100);
  gw_key(w, "k.arr", 9); gw_u32(w, 8); gw_u64(w, 3); gw_str(w, "a"); gw_str(w, ""); gw_strn(w, "b\0c", 3);
  gw_key(w, "k.empty", 9); gw_u32(w, 11); gw_u64(w, 0);
  gw_tensor(w, "w", 2, (uint64_t[]){2, 3}, GGML_F32, 0);
  gw_tensor(w, "q", 2, (uint64_t[]){32, 2}, GGML_Q8_0, 32);
  gw_pad(w, 32);
  gw_bytes(w, small_w, sizeof small_w);
  gw_pad(w, 32);
  gguf_rand_blocks(GGML_Q8_0, small_q, 2);
  gw_bytes(w, small_q, sizeof small_q);
}

static bool write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(p, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* ---- metadata ------------------------------------------------------------------------------------------------ */

TEST(test_gguf_reads_metadata_of_every_type) {
  gw w;
  small_file(&w);
  tg_gguf *g = gguf_open_bytes("small.gguf", w.p, w.n);
  CHECK(g, "%s", tg_error());
  if (!g) { free(w.p); return; }
  CHECK(tg_gguf_version(g) == 3 && tg_gguf_num_kv(g) == 14 && tg_gguf_num_tensors(g) == 2, "counts");
  CHECK(!strcmp(tg_gguf_key(g, 0), "general.architecture") && !strcmp(tg_gguf_key(g, 13), "k.empty") &&
        !tg_gguf_key(g, 14) && !tg_gguf_key(g, -1), "keys in file order");
  size_t len = 0;
  const char *arch = tg_gguf_get_string(g, "general.architecture", &len);
  CHECK(arch && !strcmp(arch, "llama") && len == 5, "architecture");
  int64_t i = 0;
  double f = 0;
  bool b = true;
  struct { const char *key; int64_t want; tg_gguf_type type; } ints[] = {
      {"k.u8", 250, TG_GGUF_UINT8},           {"k.i8", -3, TG_GGUF_INT8},   {"k.u16", 65000, TG_GGUF_UINT16},
      {"k.i16", -1234, TG_GGUF_INT16},        {"k.u32", 4000000000, TG_GGUF_UINT32},
      {"k.i32", -70000, TG_GGUF_INT32},       {"k.i64", INT64_MIN, TG_GGUF_INT64},
  };
  for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
    CHECK(tg_gguf_get_int(g, ints[k].key, &i) == TG_OK && i == ints[k].want, "%s: %lld (%s)", ints[k].key, (long long)i,
          tg_error());
    CHECK(tg_gguf_kv_type(g, ints[k].key) == ints[k].type, "%s's type", ints[k].key);
    CHECK(tg_gguf_get_float(g, ints[k].key, &f) == TG_OK && f == (double)ints[k].want, "%s as float", ints[k].key);
  }
  CHECK(tg_gguf_get_float(g, "k.f32", &f) == TG_OK && f == (double)0.1f, "k.f32 %g", f);
  CHECK(tg_gguf_get_float(g, "k.f64", &f) == TG_OK && f == -1e100, "k.f64 %g", f);
  CHECK(tg_gguf_get_bool(g, "k.bool", &b) == TG_OK && !b, "k.bool");
  CHECK(tg_gguf_get_float(g, "k.u64", &f) == TG_OK && f == 18446744073709551615.0, "k.u64 as float");
  /* refusals, each naming the key */
  tg_error_clear();
  CHECK(tg_gguf_get_int(g, "k.u64", &i) == TG_ERR_ARG && strstr(tg_error(), "k.u64") && strstr(tg_error(), "INT64_MAX"),
        "u64 past INT64_MAX: %s", tg_error());
  CHECK(tg_gguf_get_int(g, "k.f32", &i) == TG_ERR_ARG && strstr(tg_error(), "float32"), "float as int: %s", tg_error());
  CHECK(tg_gguf_get_int(g, "k.bool", &i) == TG_ERR_ARG, "bool as int");
  CHECK(tg_gguf_get_float(g, "k.bool", &f) == TG_ERR_ARG, "bool as float");
  CHECK(tg_gguf_get_bool(g, "k.u8", &b) == TG_ERR_ARG && strstr(tg_error(), "k.u8"), "int as bool: %s", tg_error());
  CHECK(tg_gguf_get_int(g, "nope", &i) == TG_ERR_ARG && strstr(tg_error(), "no key 'nope'"), "absent: %s", tg_error());
  CHECK(tg_gguf_kv_type(g, "nope") == TG_GGUF_NONE && tg_gguf_kv_type(NULL, "k.u8") == TG_GGUF_NONE, "absent type");
  CHECK(!tg_gguf_get_string(g, "k.u8", NULL) && strstr(tg_error(), "not a string"), "int as string: %s", tg_error());
  CHECK(tg_gguf_get_int(g, "k.arr", &i) == TG_ERR_ARG && strstr(tg_error(), "array"), "array as int: %s", tg_error());
  CHECK(!tg_gguf_get_string(g, "k.arr", NULL), "array as string");
  CHECK(tg_gguf_get_int(NULL, "k.u8", &i) == TG_ERR_ARG && tg_gguf_get_int(g, NULL, &i) == TG_ERR_ARG, "NULLs");
  /* arrays */
  tg_gguf_type et = TG_GGUF_NONE;
  int64_t n = -1;
  CHECK(tg_gguf_get_array(g, "k.arr", &et, &n) == TG_OK && et == TG_GGUF_STRING && n == 3, "k.arr");
  const char *s0 = tg_gguf_array_string(g, "k.arr", 0, &len);
  CHECK(s0 && !strcmp(s0, "a") && len == 1, "k.arr[0]");
  const char *s1 = tg_gguf_array_string(g, "k.arr", 1, &len);
  CHECK(s1 && !strcmp(s1, "") && len == 0, "k.arr[1]");
  const char *s2 = tg_gguf_array_string(g, "k.arr", 2, &len);
  CHECK(s2 && len == 3 && !memcmp(s2, "b\0c", 4), "k.arr[2] keeps its NUL and is NUL-terminated");
  CHECK(!tg_gguf_array_string(g, "k.arr", 3, NULL) && strstr(tg_error(), "index 3"), "past the end: %s", tg_error());
  CHECK(!tg_gguf_array_string(g, "k.arr", -1, NULL), "negative index");
  CHECK(tg_gguf_array_int(g, "k.arr", 0, &i) == TG_ERR_ARG, "strings as ints");
  CHECK(tg_gguf_get_array(g, "k.empty", &et, &n) == TG_OK && et == TG_GGUF_INT64 && n == 0, "an empty array");
  CHECK(tg_gguf_array_int(g, "k.empty", 0, &i) == TG_ERR_ARG, "element of an empty array");
  CHECK(tg_gguf_get_array(g, "k.u8", &et, &n) == TG_ERR_ARG, "a scalar as an array");
  CHECK(tg_gguf_array_int(g, "k.u8", 0, &i) == TG_ERR_ARG, "a scalar's element");
  CHECK(!strcmp(tg_gguf_type_name(TG_GGUF_FLOAT64), "float64") && !strcmp(tg_gguf_type_name((tg_gguf_type)13), "?") &&
        !strcmp(tg_gguf_type_name(TG_GGUF_NONE), "?"), "type names");
  tg_gguf_close(g);
  tg_gguf_close(NULL);
  CHECK(tg_gguf_version(NULL) == 0 && tg_gguf_num_kv(NULL) == -1 && tg_gguf_num_tensors(NULL) == -1, "NULL reader");
  free(w.p);
}

/* ---- tensors ------------------------------------------------------------------------------------------------- */

/* the buffer under a tensor that is a (reshaped) BUFFER node, or NULL */
static tg_buffer *buffer_of(const tg_tensor *t) {
  uop *u = t->u;
  if (u->op == OP_RESHAPE) u = u->src[0];
  return u->op == OP_BUFFER ? u->buf : NULL;
}

TEST(test_gguf_tensors_wrap_the_mapping) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  snprintf(path, sizeof path, "%s/small.gguf", dir);
  gw w;
  small_file(&w);
  CHECK(write_file(path, w.p, w.n), "write");
  tg_gguf *g = tg_gguf_open(path);
  CHECK(g, "%s", tg_error());
  if (!g) { free(w.p); test_remove_dir(dir); return; }
  tg_gguf_info info;
  CHECK(tg_gguf_find_tensor(g, "q") == 1 && tg_gguf_find_tensor(g, "nope") == -1, "find");
  CHECK(tg_gguf_tensor_info(g, 1, &info) == TG_OK && !strcmp(info.name, "q") && info.type == GGML_Q8_0 &&
        !strcmp(info.type_name, "Q8_0") && info.supported && info.ndim == 2 && info.shape[0] == 2 &&
        info.shape[1] == 32 && info.nbytes == 68 && info.offset % 32 == 0 && info.offset + 68 == w.n,
        "info of q: %s %d (%lld, %lld) %llu bytes at %llu", info.name, info.ndim, (long long)info.shape[0],
        (long long)info.shape[1], (unsigned long long)info.nbytes, (unsigned long long)info.offset);
  CHECK(tg_gguf_tensor_info(g, 2, &info) == TG_ERR_ARG && tg_gguf_tensor_info(g, -1, &info) == TG_ERR_ARG, "range");
  tg_tensor *wt = tg_gguf_tensor(g, "w"), *qt = tg_gguf_tensor(g, "q");
  CHECK_T(wt);
  CHECK_T(qt);
  CHECK(tg_dtype_of(wt) == TG_FLOAT32 && tg_ndim(wt) == 2 && tg_shape(wt, 0) == 3 && tg_shape(wt, 1) == 2, "w's shape");
  CHECK(tg_dtype_of(qt) == TG_FLOAT32 && tg_ndim(qt) == 2 && tg_shape(qt, 0) == 2 && tg_shape(qt, 1) == 32, "q's shape");
  if (!strcmp(test_device_name(), "CPU")) {   /* a GPU device copies the file's tensors to its memory */
    tg_buffer *bw = buffer_of(wt);
    CHECK(bw && bw->wrapped && bw->ptr == (void *)(g->base + g->data_off), "w is not wrapped on the mapping");
  }
  tg_gguf_close(g);  /* the tensors keep the mapping */
  tg_tensor *none = tg_gguf_tensor(NULL, "w");
  CHECK(!none && tg_error_status() == TG_ERR_ARG, "NULL reader");
  float got[64], want[64];
  CHECK(tg_to_host(wt, got, sizeof small_w) == TG_OK && !memcmp(got, small_w, sizeof small_w), "w's values");
  gguf_ref_dequantize(GGML_Q8_0, small_q, 2, want);
  CHECK(tg_to_host(qt, got, 64 * sizeof(float)) == TG_OK, "%s", tg_error());
  check_close_f32("q", got, want, 64, 1e-7, 1e-6, __FILE__, __LINE__);
  /* a matrix-vector product with the quantized weight: one kernel, and no buffer but its output */
  tg_tensor *x = tg_ones(TG_FLOAT32, 1, (int64_t[]){32});
  tg_tensor *xr = tg_contiguous(x);
  CHECK(tg_realize(xr) == TG_OK, "%s", tg_error());
  tg_tensor *qT = tg_transpose(qt, 0, 1), *y = tg_matmul(xr, qT);
  tg_stats s0 = tg_get_stats();
  CHECK(y && tg_realize(y) == TG_OK, "%s", tg_error());
  CHECK(tg_kernel_count_last() == 1 && tg_get_stats().buffers_allocated - s0.buffers_allocated <= 1,
        "x @ q^T: %llu kernels, %llu buffers (want 1 kernel, only the output's buffer)",
        (unsigned long long)tg_kernel_count_last(), (unsigned long long)(tg_get_stats().buffers_allocated - s0.buffers_allocated));
  float yv[2];
  if (tg_to_host(y, yv, sizeof yv) == TG_OK)
    for (int r = 0; r < 2; r++) {
      double acc = 0;
      for (int c = 0; c < 32; c++) acc += want[r * 32 + c];
      CHECK(fabs(yv[r] - acc) <= 1e-4 + 1e-4 * fabs(acc), "row %d: %g, want %g", r, yv[r], acc);
    }
  tg_free(y);
  tg_free(qT);
  tg_free(xr);
  tg_free(x);
  tg_free(wt);
  tg_free(qt);
  tg_collect();
  /* the mapping went away with the last tensor on it */
  FILE *maps = fopen("/proc/self/maps", "r");
  if (maps) {
    char line[PATH_MAX + 256];
    bool found = false;
    while (fgets(line, sizeof line, maps)) found |= strstr(line, path) != NULL;
    fclose(maps);
    CHECK(!found, "%s is still mapped after its reader and tensors were freed", path);
  }
  free(w.p);
  test_remove_dir(dir);
}

/* a file with general.alignment 1 and an F32 tensor at an odd offset: read through an aligned copy */
TEST(test_gguf_unaligned_tensor_is_copied) {
  gw w = {0};
  gw_header(&w, 2, 2, 1);
  gw_key(&w, "general.alignment", 4); gw_u32(&w, 1);
  gw_tensor(&w, "b", 1, (uint64_t[]){1}, GGML_I8, 0);
  gw_tensor(&w, "f", 1, (uint64_t[]){2}, GGML_F32, 1);
  gw_le(&w, 0x7f, 1);
  gw_f32(&w, 2.5f);
  gw_f32(&w, -1);
  tg_gguf *g = gguf_open_bytes("odd.gguf", w.p, w.n);
  CHECK(g && tg_gguf_version(g) == 2, "%s", tg_error());
  tg_tensor *f = g ? tg_gguf_tensor(g, "f") : NULL, *b = g ? tg_gguf_tensor(g, "b") : NULL;
  float got[2] = {0};
  int8_t bv = 0;
  CHECK(f && tg_to_host(f, got, sizeof got) == TG_OK && got[0] == 2.5f && got[1] == -1, "f: %s", tg_error());
  CHECK(b && tg_dtype_of(b) == TG_INT8 && tg_to_host(b, &bv, 1) == TG_OK && bv == 0x7f, "b");
  tg_free(f);
  tg_free(b);
  tg_gguf_close(g);
  free(w.p);
}

/* ---- malformed files ----------------------------------------------------------------------------------------- */

TEST(test_gguf_refuses_every_truncation) {
  gw w;
  small_file(&w);
  tg_gguf *g = gguf_open_bytes("t.gguf", w.p, w.n);
  CHECK(g, "the whole file: %s", tg_error());
  tg_gguf_close(g);
  for (size_t n = 0; n < w.n; n++) {
    tg_error_clear();
    g = gguf_open_bytes("t.gguf", w.p, n);
    CHECK(!g && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "t.gguf"), "%zu of %zu bytes: %s", n, w.n,
          g ? "accepted" : tg_error());
    tg_gguf_close(g);
  }
  /* through files too, every 16th length */
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); free(w.p); return; }
  snprintf(path, sizeof path, "%s/cut.gguf", dir);
  for (size_t n = 0; n < w.n; n += 16) {
    CHECK(write_file(path, w.p, n), "write");
    tg_error_clear();
    g = tg_gguf_open(path);
    CHECK(!g && tg_error_status() == TG_ERR_IO && strstr(tg_error(), path), "file of %zu bytes: %s", n, tg_error());
    tg_gguf_close(g);
  }
  tg_error_clear();
  CHECK(!tg_gguf_open(dir) && strstr(tg_error(), "regular"), "a directory: %s", tg_error());
  snprintf(path, sizeof path, "%s/none.gguf", dir);
  CHECK(!tg_gguf_open(path) && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "none.gguf"), "missing: %s", tg_error());
  CHECK(!tg_gguf_open(NULL) && tg_error_status() == TG_ERR_ARG, "NULL path");
  test_remove_dir(dir);
  free(w.p);
}

/* one malformed file: a header with nt tensors and nkv keys, then what build() writes */
typedef struct bad_file {
  const char *what, *expect;
  void (*build)(gw *w);
} bad_file;

static void bad_magic(gw *w) { gw_bytes(w, "GGUG", 4); gw_u32(w, 3); gw_u64(w, 0); gw_u64(w, 0); }
static void bad_v1(gw *w) { gw_header(w, 1, 0, 0); }
static void bad_v4(gw *w) { gw_header(w, 4, 0, 0); }
static void bad_be(gw *w) { gw_header(w, 0x03000000, 0, 0); }
static void bad_counts(gw *w) { gw_header(w, 3, 0, (uint64_t)1 << 60); gw_key(w, "a", 0); gw_le(w, 1, 1); }
static void bad_tcount(gw *w) { gw_header(w, 3, UINT64_MAX, 0); }
static void bad_keylen(gw *w) { gw_header(w, 3, 0, 1); gw_u64(w, (uint64_t)1 << 40); gw_bytes(w, "abcdefgh", 8); }
static void bad_strlen(gw *w) {
  gw_header(w, 3, 0, 1);
  gw_key(w, "s", 8);
  gw_u64(w, 9);
  gw_bytes(w, "12345678", 8);
}
static void bad_vtype(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "x", 13); gw_u64(w, 0); }
static void bad_bool(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "b", 7); gw_le(w, 2, 1); }
static void bad_bool_arr(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "b", 9); gw_u32(w, 7); gw_u64(w, 2); gw_le(w, 0x0301, 2); }
static void bad_nested(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "n", 9); gw_u32(w, 9); gw_u64(w, 1); gw_u32(w, 0); gw_u64(w, 0); }
static void bad_arrtype(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "n", 9); gw_u32(w, 77); gw_u64(w, 1); }
static void bad_arrlen(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "n", 9); gw_u32(w, 12); gw_u64(w, (uint64_t)1 << 61); gw_u64(w, 0); }
static void bad_strarr(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "n", 9); gw_u32(w, 8); gw_u64(w, 2); gw_str(w, "only one"); }
static void bad_nulkey(gw *w) { gw_header(w, 3, 0, 1); gw_strn(w, "a\0b", 3); gw_u32(w, 0); gw_le(w, 1, 1); }
static void bad_dupkey(gw *w) {
  gw_header(w, 3, 0, 2);
  gw_key(w, "same", 0); gw_le(w, 1, 1);
  gw_key(w, "same", 4); gw_u32(w, 2);
}
static void bad_align(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "general.alignment", 4); gw_u32(w, 48); }
static void bad_align0(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "general.alignment", 4); gw_u32(w, 0); }
static void bad_align_type(gw *w) { gw_header(w, 3, 0, 1); gw_key(w, "general.alignment", 8); gw_str(w, "32"); }
/* one tensor "t" described by the arguments, then the data section (size bytes of zeros) */
static void one_tensor(gw *w, int nd, const uint64_t *ne, uint32_t type, uint64_t offset, size_t size) {
  gw_header(w, 3, 1, 0);
  gw_tensor(w, "t", nd, ne, type, offset);
  gw_pad(w, 32);
  for (size_t i = 0; i < size; i++) gw_le(w, 0, 1);
}
static void bad_offset(gw *w) { one_tensor(w, 1, (uint64_t[]){4}, GGML_F32, (uint64_t)1 << 20, 16); }
static void bad_offset_huge(gw *w) { one_tensor(w, 1, (uint64_t[]){4}, GGML_F32, UINT64_MAX - 31, 16); }
static void bad_size(gw *w) { one_tensor(w, 1, (uint64_t[]){5}, GGML_F32, 0, 16); }
static void bad_misaligned(gw *w) { one_tensor(w, 1, (uint64_t[]){2}, GGML_F32, 8, 16); }
static void bad_overflow(gw *w) { one_tensor(w, 3, (uint64_t[]){1u << 31, 1u << 31, 1u << 31}, GGML_F32, 0, 16); }
static void bad_dim_sign(gw *w) { one_tensor(w, 1, (uint64_t[]){UINT64_MAX}, GGML_I8, 0, 16); }
static void bad_ndim(gw *w) {
  uint64_t ne[17];
  for (int i = 0; i < 17; i++) ne[i] = 1;
  one_tensor(w, 17, ne, GGML_F32, 0, 16);
}
static void bad_type(gw *w) { one_tensor(w, 1, (uint64_t[]){4}, 99, 0, 16); }
static void bad_removed_type(gw *w) { one_tensor(w, 1, (uint64_t[]){32}, 4, 0, 32); }
static void bad_row(gw *w) { one_tensor(w, 2, (uint64_t[]){33, 1}, GGML_Q8_0, 0, 64); }
static void bad_scalar_block(gw *w) { one_tensor(w, 0, NULL, GGML_Q4_0, 0, 32); }
static void bad_duptensor(gw *w) {
  gw_header(w, 3, 2, 0);
  gw_tensor(w, "t", 1, (uint64_t[]){1}, GGML_F32, 0);
  gw_tensor(w, "t", 1, (uint64_t[]){1}, GGML_F32, 32);
  gw_pad(w, 32);
  for (int i = 0; i < 36; i++) gw_le(w, 0, 1);
}
static void bad_nulname(gw *w) {
  gw_header(w, 3, 1, 0);
  gw_strn(w, "t\0", 2);
  gw_u32(w, 1); gw_u64(w, 1); gw_u32(w, GGML_F32); gw_u64(w, 0);
  gw_pad(w, 32);
  gw_u32(w, 0);
}
static void bad_data_start(gw *w) {
  gw_header(w, 3, 1, 0);
  gw_tensor(w, "t", 1, (uint64_t[]){0}, GGML_F32, 0);  /* empty, but the data section must still exist */
}

TEST(test_gguf_refuses_malformed_files) {
  const bad_file bad[] = {
      {"bad magic", "not a GGUF file", bad_magic},
      {"version 1", "version 1 is not supported", bad_v1},
      {"version 4", "unknown GGUF version 4", bad_v4},
      {"big-endian", "big-endian", bad_be},
      {"absurd key count", "cannot fit", bad_counts},
      {"absurd tensor count", "cannot fit", bad_tcount},
      {"key length past the end", "runs past the end", bad_keylen},
      {"string length past the end", "runs past the end", bad_strlen},
      {"unknown value type", "unknown value type 13", bad_vtype},
      {"bool of 2", "bool of value 2", bad_bool},
      {"bool array of 3", "bool of value 3", bad_bool_arr},
      {"nested array", "array of arrays", bad_nested},
      {"array of type 77", "unknown element type 77", bad_arrtype},
      {"array length past the end", "runs past the end", bad_arrlen},
      {"string array past the end", "truncated", bad_strarr},
      {"NUL in a key", "NUL", bad_nulkey},
      {"duplicate key", "key 'same' appears twice", bad_dupkey},
      {"alignment 48", "not a power of two", bad_align},
      {"alignment 0", "not a power of two", bad_align0},
      {"alignment a string", "not an integer", bad_align_type},
      {"tensor offset past the end", "runs past the end of the data section", bad_offset},
      {"tensor offset near 2^64", "runs past the end of the data section", bad_offset_huge},
      {"tensor data past the end", "runs past the end of the data section", bad_size},
      {"misaligned offset", "not a multiple of the alignment 32", bad_misaligned},
      {"dimensions overflow", "too large", bad_overflow},
      {"dimension past INT64_MAX", "too large", bad_dim_sign},
      {"17 dimensions", "17 dimensions", bad_ndim},
      {"unknown tensor type", "tensor 't' has an unknown type 99", bad_type},
      {"a removed ggml type", "unknown type 4", bad_removed_type},
      {"row not whole blocks", "not a whole number of Q8_0 blocks", bad_row},
      {"scalar of a block type", "scalar", bad_scalar_block},
      {"duplicate tensor", "tensor 't' appears twice", bad_duptensor},
      {"NUL in a tensor name", "NUL", bad_nulname},
      {"no data section", "data section would start", bad_data_start},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    gw w = {0};
    bad[i].build(&w);
    tg_error_clear();
    tg_gguf *g = gguf_open_bytes("bad.gguf", w.p, w.n);
    CHECK(!g && tg_error_status() == TG_ERR_IO && strstr(tg_error(), "bad.gguf") && strstr(tg_error(), bad[i].expect),
          "%s: %s (want '%s')", bad[i].what, g ? "accepted" : tg_error(), bad[i].expect);
    tg_gguf_close(g);
    free(w.p);
  }
}

/* a type ggml defines that tgc does not read: the file opens, the tensor is refused by name */
TEST(test_gguf_unsupported_type_is_named) {
  gw w = {0};
  one_tensor(&w, 1, (uint64_t[]){256}, 16 /* IQ2_XXS: 66 bytes a block */, 0, 66);
  tg_gguf *g = gguf_open_bytes("iq.gguf", w.p, w.n);
  CHECK(g, "%s", tg_error());
  tg_gguf_info info;
  CHECK(g && tg_gguf_tensor_info(g, 0, &info) == TG_OK && !info.supported && !strcmp(info.type_name, "IQ2_XXS") &&
        info.nbytes == 66, "info");
  tg_error_clear();
  CHECK(g && !tg_gguf_tensor(g, "t") && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "IQ2_XXS") &&
        strstr(tg_error(), "'t'"), "%s", tg_error());
  CHECK(g && !tg_gguf_tensor(g, "absent") && strstr(tg_error(), "no tensor 'absent'"), "%s", tg_error());
  tg_gguf_close(g);
  free(w.p);
}

/* ---- the fixture written by the gguf package ----------------------------------------------------------------- */

static tg_gguf *open_fixture(void) {
  char path[PATH_MAX];
  const char *dir = getenv("TG_FIXTURES");
  if (dir) snprintf(path, sizeof path, "%s/gguf/every_type.gguf", dir);
  else {
    const char *file = __FILE__, *slash = strrchr(file, '/');
    snprintf(path, sizeof path, "%.*sfixtures/gguf/every_type.gguf", slash ? (int)(slash - file + 1) : 0, file);
  }
  if (access(path, R_OK) != 0) {
    test_skip("the fixture is not found at %s (run from the repository root or set TG_FIXTURES)", path);
    return NULL;
  }
  tg_gguf *g = tg_gguf_open(path);
  CHECK(g, "%s", tg_error());
  return g;
}

TEST(test_gguf_fixture_metadata_of_every_type) {
  tg_gguf *g = open_fixture();
  if (!g) return;
  CHECK(tg_gguf_version(g) == 3 && tg_gguf_num_kv(g) == 27, "version %u, %lld keys", tg_gguf_version(g),
        (long long)tg_gguf_num_kv(g));
  int64_t i = 0;
  double f = 0;
  bool b = false;
  size_t len = 0;
  CHECK(!strcmp(tg_gguf_get_string(g, "general.architecture", NULL), "tgtest"), "architecture");
  CHECK(tg_gguf_get_int(g, "general.alignment", &i) == TG_OK && i == 64 &&
        tg_gguf_kv_type(g, "general.alignment") == TG_GGUF_UINT32, "alignment");
  struct { const char *key; int64_t want; tg_gguf_type type; } ints[] = {
      {"t.u8", 200, TG_GGUF_UINT8}, {"t.i8", -100, TG_GGUF_INT8}, {"t.u16", 60000, TG_GGUF_UINT16},
      {"t.i16", -30000, TG_GGUF_INT16}, {"t.u32", 4000000000, TG_GGUF_UINT32}, {"t.i32", -2000000000, TG_GGUF_INT32},
      {"t.u64small", 12345678901, TG_GGUF_UINT64}, {"t.i64", -(INT64_C(1) << 62) - 7, TG_GGUF_INT64},
  };
  for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
    CHECK(tg_gguf_get_int(g, ints[k].key, &i) == TG_OK && i == ints[k].want && tg_gguf_kv_type(g, ints[k].key) == ints[k].type,
          "%s: %lld (%s)", ints[k].key, (long long)i, tg_error());
  CHECK(tg_gguf_get_int(g, "t.u64", &i) == TG_ERR_ARG, "2^63 + 5 as int64");
  CHECK(tg_gguf_get_float(g, "t.u64", &f) == TG_OK && f == 9223372036854775813.0, "2^63 + 5 as double");
  CHECK(tg_gguf_get_float(g, "t.f32", &f) == TG_OK && f == 3.25, "t.f32");
  CHECK(tg_gguf_get_float(g, "t.f64", &f) == TG_OK && f == 2.718281828459045, "t.f64");
  CHECK(tg_gguf_get_bool(g, "t.bool", &b) == TG_OK && b, "t.bool");
  const char *s = tg_gguf_get_string(g, "t.str", &len);
  CHECK(s && !strcmp(s, "h\xc3\xa9llo \xe2\x98\x83") && len == 10, "t.str (UTF-8)");
  struct { const char *key; tg_gguf_type type; int n; int64_t v[4]; } arrs[] = {
      {"a.u8", TG_GGUF_UINT8, 3, {1, 2, 255}},      {"a.i8", TG_GGUF_INT8, 3, {-128, 0, 127}},
      {"a.u16", TG_GGUF_UINT16, 2, {65535, 7}},     {"a.i16", TG_GGUF_INT16, 2, {-32768, 5}},
      {"a.u32", TG_GGUF_UINT32, 1, {4294967295}},   {"a.i32", TG_GGUF_INT32, 4, {-5, 6, -7, 8}},
      {"a.i64", TG_GGUF_INT64, 2, {INT64_MIN, INT64_MAX}},
  };
  for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++) {
    tg_gguf_type et;
    int64_t n;
    CHECK(tg_gguf_get_array(g, arrs[k].key, &et, &n) == TG_OK && et == arrs[k].type && n == arrs[k].n, "%s", arrs[k].key);
    for (int e = 0; e < arrs[k].n; e++)
      CHECK(tg_gguf_array_int(g, arrs[k].key, e, &i) == TG_OK && i == arrs[k].v[e], "%s[%d]: %lld", arrs[k].key, e, (long long)i);
  }
  CHECK(tg_gguf_array_int(g, "a.u64", 0, &i) == TG_ERR_ARG && tg_gguf_array_int(g, "a.u64", 1, &i) == TG_OK && i == 3, "a.u64");
  CHECK(tg_gguf_array_float(g, "a.u64", 0, &f) == TG_OK && f == 18446744073709551615.0, "a.u64[0] as double");
  CHECK(tg_gguf_array_float(g, "a.f32", 1, &f) == TG_OK && f == -1.25 && tg_gguf_array_float(g, "a.f32", 2, &f) == TG_OK &&
        f == (double)1e30f, "a.f32");
  CHECK(tg_gguf_array_float(g, "a.f64", 0, &f) == TG_OK && f == 1e-300 && tg_gguf_array_float(g, "a.f64", 1, &f) == TG_OK &&
        f == -0.1, "a.f64");
  bool bs[3];
  for (int e = 0; e < 3; e++) CHECK(tg_gguf_array_bool(g, "a.bool", e, &bs[e]) == TG_OK, "a.bool[%d]", e);
  CHECK(bs[0] && !bs[1] && bs[2], "a.bool values");
  const char *want_s[] = {"", "\xc4\xa0the", "<0x0A>", "x\0y"};
  size_t want_len[] = {0, 5, 6, 3};
  for (int e = 0; e < 4; e++) {
    s = tg_gguf_array_string(g, "a.str", e, &len);
    CHECK(s && len == want_len[e] && !memcmp(s, want_s[e], len + 1), "a.str[%d]", e);
  }
  tg_gguf_close(g);
}

TEST(test_gguf_fixture_tensors_match_the_gguf_package) {
  tg_gguf *g = open_fixture();
  if (!g) return;
  int checked = 0;
  for (int64_t i = 0; i < tg_gguf_num_tensors(g); i++) {
    tg_gguf_info info, ref;
    if (tg_gguf_tensor_info(g, i, &info) != TG_OK) { CHECK(false, "%s", tg_error()); break; }
    size_t nl = strlen(info.name);
    if (nl > 4 && !strcmp(info.name + nl - 4, ".ref")) continue;
    char rname[96];
    snprintf(rname, sizeof rname, "%s.ref", info.name);
    int64_t ri = tg_gguf_find_tensor(g, rname);
    if (ri < 0) continue;   /* f32 and i32: checked below */
    CHECK(tg_gguf_tensor_info(g, ri, &ref) == TG_OK && ref.ndim == info.ndim && ref.shape[0] == info.shape[0] &&
          ref.shape[1] == info.shape[1], "%s: shape of its reference", info.name);
    tg_scope_begin();
    tg_tensor *t = tg_cast(tg_gguf_tensor(g, info.name), TG_FLOAT32), *r = tg_gguf_tensor(g, rname);
    int64_t n = tg_numel(r);
    float *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want);
    CHECK(t && r && got && want && tg_numel(t) == n && tg_to_host(t, got, (size_t)n * 4) == TG_OK &&
          tg_to_host(r, want, (size_t)n * 4) == TG_OK, "%s: %s", info.name, tg_error());
    char what[64];
    snprintf(what, sizeof what, "%s against gguf's dequantize", info.name);
    if (got && want) check_close_f32(what, got, want, n, 1e-7, 1e-6, __FILE__, __LINE__);
    /* and the reference dequantizer of test_gguf_quant.c agrees with gguf's on the same bytes */
    const gguf_type_info *ti = gguf_type_of(info.type);
    if (ti && ti->dtype == TG_DTYPE_COUNT && got) {
      gguf_ref_dequantize(info.type, g->base + info.offset, (int64_t)(info.nbytes / (uint64_t)ti->size), got);
      snprintf(what, sizeof what, "the C reference for %s", info.name);
      check_close_f32(what, got, want, n, 1e-7, 1e-6, __FILE__, __LINE__);
    }
    free(got);
    free(want);
    tg_scope_end();
    checked++;
  }
  CHECK(checked == 10, "checked %d tensors against their references, want 10 (F16, BF16 and 8 block formats)", checked);
  /* F32 and I32 as the package wrote them */
  tg_tensor *f = tg_gguf_tensor(g, "f32"), *i = tg_gguf_tensor(g, "i32");
  int32_t iv[6];
  CHECK(f && tg_ndim(f) == 2 && tg_shape(f, 0) == 3 && tg_shape(f, 1) == 5 && tg_dtype_of(f) == TG_FLOAT32, "f32");
  CHECK(i && tg_dtype_of(i) == TG_INT32 && tg_to_host(i, iv, sizeof iv) == TG_OK && iv[0] == 1 && iv[1] == -2 &&
        iv[3] == INT32_MAX && iv[4] == INT32_MIN, "i32");
  tg_free(f);
  tg_free(i);
  tg_gguf_close(g);
}

/* every allocation of opening the small file and making its quantized tensor fails in turn: each failure is
 * TG_ERR_NOMEM with a message, nothing leaks (LeakSanitizer), and the run without a failure works */
TEST(test_gguf_survives_every_allocation_failure) {
  gw w;
  small_file(&w);
  int sites = 0;
  for (int64_t k = 1; k < 100000; k++) {
    tg_error_clear();
    mem_fail_at(k);
    tg_gguf *g = gguf_open_bytes("f.gguf", w.p, w.n);
    tg_tensor *q = g ? tg_gguf_tensor(g, "q") : NULL;
    bool fired = mem_failed();
    mem_fail_at(0);
    if (!fired) {
      CHECK(g && q, "no failure, yet: %s", tg_error());
      float got[64], want[64];
      gguf_ref_dequantize(GGML_Q8_0, small_q, 2, want);
      CHECK(q && tg_to_host(q, got, sizeof got) == TG_OK && !memcmp(got, want, sizeof got), "q after the sweep");
      tg_free(q);
      tg_gguf_close(g);
      break;
    }
    sites++;
    if (!g || !q)
      CHECK(tg_error_status() == TG_ERR_NOMEM && tg_error()[0], "allocation %lld failed: status %d, '%s'", (long long)k,
            (int)tg_error_status(), tg_error());
    tg_free(q);
    tg_gguf_close(g);
  }
  CHECK(sites > 10, "only %d allocation sites", sites);
  free(w.p);
}

/* tensors with no elements: a (3, 0) Q4_0 and a (0) F32, both at the end of the data section */
TEST(test_gguf_empty_tensors) {
  gw w = {0};
  gw_header(&w, 3, 2, 0);
  gw_tensor(&w, "q", 2, (uint64_t[]){0, 3}, GGML_Q4_0, 0);
  gw_tensor(&w, "f", 1, (uint64_t[]){0}, GGML_F32, 0);
  gw_pad(&w, 32);
  tg_gguf *g = gguf_open_bytes("empty.gguf", w.p, w.n);
  CHECK(g, "%s", tg_error());
  tg_tensor *q = g ? tg_gguf_tensor(g, "q") : NULL, *f = g ? tg_gguf_tensor(g, "f") : NULL;
  CHECK(q && tg_ndim(q) == 2 && tg_shape(q, 0) == 3 && tg_shape(q, 1) == 0 && tg_realize(q) == TG_OK, "q: %s", tg_error());
  CHECK(f && tg_numel(f) == 0 && tg_realize(f) == TG_OK, "f: %s", tg_error());
  tg_free(q);
  tg_free(f);
  tg_gguf_close(g);
  free(w.p);
}
