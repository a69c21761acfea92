/* test_llm_gguf_write.c — the GGUF writer (src/nn/gguf_write.c): metadata of every value type and tensors
 * of every type it writes read back by tg_gguf_open; quantized bytes equal to the `gguf` package's
 * gguf.quants.quantize on the same floats (tests/fixtures/gguf/quantize.gguf, written by
 * make_gguf_write_fixture.py beside it); bad arguments refused. */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn/gguf.h"
#include "uop/uop.h"
#include "test.h"

static bool temp_file(char *dir, char *path, const char *name) {
  if (!test_temp_dir(dir, PATH_MAX)) {
    CHECK(false, "no temporary directory");
    return false;
  }
  int n = snprintf(path, PATH_MAX, "%.3900s/%s", dir, name);
  return n > 0 && n < PATH_MAX;
}

TEST(test_gguf_writer_metadata_round_trip) {
  char dir[PATH_MAX], path[PATH_MAX];
  if (!temp_file(dir, path, "meta.gguf")) return;
  tg_gguf_writer *w = tg_gguf_writer_new();
  CHECK_T(w);
  static const tg_gguf_type ints[] = {TG_GGUF_UINT8, TG_GGUF_INT8, TG_GGUF_UINT16, TG_GGUF_INT16,
                                      TG_GGUF_UINT32, TG_GGUF_INT32, TG_GGUF_UINT64, TG_GGUF_INT64};
  static const int64_t vals[] = {250, -100, 65000, -30000, 4000000000LL, -2000000000LL, INT64_MAX, INT64_MIN};
  char key[32];
  for (int i = 0; i < 8; i++) {
    snprintf(key, sizeof key, "i.%d", i);
    CHECK(tg_gguf_set_int(w, key, ints[i], vals[i]) == TG_OK, "%s: %s", key, tg_error());
  }
  CHECK(tg_gguf_set_float(w, "f.32", TG_GGUF_FLOAT32, 0.1) == TG_OK, "f32");
  CHECK(tg_gguf_set_float(w, "f.64", TG_GGUF_FLOAT64, -1e100) == TG_OK, "f64");
  CHECK(tg_gguf_set_bool(w, "b", true) == TG_OK, "bool");
  CHECK(tg_gguf_set_string(w, "s", "h\xc3\xa9llo") == TG_OK, "string");
  CHECK(tg_gguf_set_array_int(w, "a.i16", TG_GGUF_INT16, (int64_t[]){-32768, 5, 32767}, 3) == TG_OK, "a.i16");
  CHECK(tg_gguf_set_array_int(w, "a.u64", TG_GGUF_UINT64, NULL, 0) == TG_OK, "empty array");
  CHECK(tg_gguf_set_array_float(w, "a.f32", TG_GGUF_FLOAT32, (double[]){0.5, -1.25}, 2) == TG_OK, "a.f32");
  CHECK(tg_gguf_set_array_string(w, "a.s", (const char *[]){"", "<0x0A>", "\xe2\x96\x81the"}, 3) == TG_OK, "a.s");
  /* refused: a repeated key, a value that does not fit, a non-integer type, a repeated tensor */
  CHECK(tg_gguf_set_int(w, "i.0", TG_GGUF_UINT8, 1) == TG_ERR_ARG && strstr(tg_error(), "already"), "repeat");
  CHECK(tg_gguf_set_int(w, "x", TG_GGUF_UINT8, 256) == TG_ERR_ARG && strstr(tg_error(), "256"), "256 as u8");
  CHECK(tg_gguf_set_int(w, "x", TG_GGUF_FLOAT32, 1) == TG_ERR_ARG, "float type as int");
  CHECK(tg_gguf_set_array_int(w, "x", TG_GGUF_INT8, (int64_t[]){1, 200}, 2) == TG_ERR_ARG &&
        strstr(tg_error(), "element 1"), "%s", tg_error());
  float data[64];
  for (int i = 0; i < 64; i++) data[i] = (float)i - 31.5f;
  CHECK(tg_gguf_add_tensor(w, "t", 2, (int64_t[]){2, 32}, data, TG_GGML_F32) == TG_OK, "%s", tg_error());
  CHECK(tg_gguf_add_tensor(w, "t", 1, (int64_t[]){64}, data, TG_GGML_F32) == TG_ERR_ARG, "repeated tensor");
  CHECK(tg_gguf_add_tensor(w, "q", 2, (int64_t[]){4, 16}, data, TG_GGML_Q8_0) == TG_ERR_ARG &&
        strstr(tg_error(), "blocks of 32"), "%s", tg_error());
  CHECK(tg_gguf_add_tensor(w, "q", 2, (int64_t[]){2, 32}, data, TG_GGML_Q8_0) == TG_OK, "%s", tg_error());
  CHECK(tg_gguf_writer_save(w, path) == TG_OK, "save: %s", tg_error());
  CHECK(tg_gguf_writer_save(w, "/nonexistent-dir/x.gguf") == TG_ERR_IO && strstr(tg_error(), "/nonexistent-dir"),
        "%s", tg_error());
  tg_gguf_writer_free(w);

  tg_gguf *g = tg_gguf_open(path);
  CHECK_T(g);
  CHECK(tg_gguf_version(g) == 3 && tg_gguf_num_kv(g) == 16 && tg_gguf_num_tensors(g) == 2, "counts");
  for (int i = 0; i < 8; i++) {
    int64_t v = 0;
    snprintf(key, sizeof key, "i.%d", i);
    if (ints[i] == TG_GGUF_UINT64) continue;  /* INT64_MAX as uint64: read below */
    CHECK(tg_gguf_kv_type(g, key) == ints[i] && tg_gguf_get_int(g, key, &v) == TG_OK && v == vals[i], "%s: %lld", key,
          (long long)v);
  }
  int64_t v = 0;
  double f = 0;
  bool b = false;
  size_t len = 0;
  CHECK(tg_gguf_get_int(g, "i.6", &v) == TG_OK && v == INT64_MAX, "u64");
  CHECK(tg_gguf_get_float(g, "f.32", &f) == TG_OK && f == (double)0.1f, "f32 %g", f);
  CHECK(tg_gguf_get_float(g, "f.64", &f) == TG_OK && f == -1e100, "f64");
  CHECK(tg_gguf_get_bool(g, "b", &b) == TG_OK && b, "bool");
  const char *s = tg_gguf_get_string(g, "s", &len);
  CHECK(s && len == 6 && !strcmp(s, "h\xc3\xa9llo"), "string");
  tg_gguf_type et;
  CHECK(tg_gguf_get_array(g, "a.i16", &et, &v) == TG_OK && et == TG_GGUF_INT16 && v == 3, "a.i16");
  CHECK(tg_gguf_array_int(g, "a.i16", 0, &v) == TG_OK && v == -32768, "a.i16[0]");
  CHECK(tg_gguf_get_array(g, "a.u64", &et, &v) == TG_OK && et == TG_GGUF_UINT64 && v == 0, "empty");
  CHECK(tg_gguf_array_float(g, "a.f32", 1, &f) == TG_OK && f == -1.25, "a.f32[1]");
  s = tg_gguf_array_string(g, "a.s", 2, &len);
  CHECK(s && !strcmp(s, "\xe2\x96\x81the") && tg_gguf_array_string(g, "a.s", 0, &len) && len == 0, "a.s");
  tg_gguf_info info;
  CHECK(tg_gguf_tensor_info(g, 1, &info) == TG_OK && !strcmp(info.name, "q") && info.type == GGML_Q8_0 &&
        info.ndim == 2 && info.shape[0] == 2 && info.shape[1] == 32 && info.offset % 32 == 0, "q's info");
  float got[64];
  tg_tensor *t = tg_gguf_tensor(g, "t");
  CHECK(t && tg_to_host(t, got, sizeof got) == TG_OK && !memcmp(got, data, sizeof got), "t read back");
  tg_free(t);
  tg_gguf_close(g);
  test_remove_dir(dir);
}

/* the fixture's "src" quantized by the writer: the bytes of every type equal the package's */
TEST(test_gguf_writer_quantizes_as_the_gguf_package) {
  char fix[PATH_MAX], dir[PATH_MAX], path[PATH_MAX];
  const char *file = __FILE__, *slash = strrchr(file, '/');
  snprintf(fix, sizeof fix, "%.*sfixtures/gguf/quantize.gguf", slash ? (int)(slash - file + 1) : 0, file);
  if (access(fix, R_OK) != 0) {
    test_skip("the fixture is not found at %s (run from the repository root)", fix);
    return;
  }
  tg_gguf *ref = tg_gguf_open(fix);
  CHECK_T(ref);
  float src[8 * 64];
  tg_tensor *s = tg_gguf_tensor(ref, "src");
  CHECK(s && tg_to_host(s, src, sizeof src) == TG_OK, "src: %s", tg_error());
  tg_free(s);
  static const struct { const char *name; tg_ggml_type type; } types[] = {
    {"F16", TG_GGML_F16}, {"BF16", TG_GGML_BF16}, {"Q4_0", TG_GGML_Q4_0}, {"Q4_1", TG_GGML_Q4_1},
    {"Q5_0", TG_GGML_Q5_0}, {"Q5_1", TG_GGML_Q5_1}, {"Q8_0", TG_GGML_Q8_0}};
  tg_gguf_writer *w = tg_gguf_writer_new();
  if (!temp_file(dir, path, "q.gguf") || !w) {
    tg_gguf_writer_free(w);
    tg_gguf_close(ref);
    return;
  }
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    CHECK(tg_gguf_add_tensor(w, types[i].name, 2, (int64_t[]){8, 64}, src, types[i].type) == TG_OK, "%s: %s",
          types[i].name, tg_error());
  CHECK(tg_gguf_writer_save(w, path) == TG_OK, "%s", tg_error());
  tg_gguf_writer_free(w);
  tg_gguf *g = tg_gguf_open(path);
  for (size_t i = 0; g && i < sizeof types / sizeof types[0]; i++) {
    char rn[16];
    snprintf(rn, sizeof rn, "q.%s", types[i].name);
    tg_gguf_info a, b;
    bool ok = tg_gguf_tensor_info(g, tg_gguf_find_tensor(g, types[i].name), &a) == TG_OK &&
              tg_gguf_tensor_info(ref, tg_gguf_find_tensor(ref, rn), &b) == TG_OK;
    CHECK(ok && a.type == b.type && a.nbytes == b.nbytes, "%s: type %u vs %u, %llu vs %llu bytes", types[i].name,
          a.type, b.type, (unsigned long long)a.nbytes, (unsigned long long)b.nbytes);
    if (!ok || a.nbytes != b.nbytes) continue;
    const uint8_t *pa = g->base + a.offset, *pb = ref->base + b.offset;
    uint64_t diff = 0, first = 0;
    for (uint64_t k = 0; k < a.nbytes; k++)
      if (pa[k] != pb[k] && !diff++) first = k;
    CHECK(diff == 0, "%s: %llu of %llu bytes differ from gguf.quants.quantize's, the first at %llu (%02x vs %02x)",
          types[i].name, (unsigned long long)diff, (unsigned long long)a.nbytes, (unsigned long long)first,
          pa[first], pb[first]);
  }
  CHECK(g, "%s", tg_error());
  tg_gguf_close(g);
  tg_gguf_close(ref);
  test_remove_dir(dir);
}

/* every allocation of building and saving a small file fails in turn: TG_ERR_NOMEM with a message, nothing
 * leaks (LeakSanitizer), no file is left; the run without a failure writes a file that opens */
TEST(test_gguf_writer_survives_every_allocation_failure) {
  char dir[PATH_MAX], path[PATH_MAX];
  if (!temp_file(dir, path, "f.gguf")) return;
  float data[64];
  for (int i = 0; i < 64; i++) data[i] = (float)i / 7;
  int sites = 0;
  for (int64_t k = 1; k < 10000; k++) {
    tg_error_clear();
    mem_fail_at(k);
    tg_gguf_writer *w = tg_gguf_writer_new();
    tg_status st = w ? TG_OK : tg_error_status();
    if (st == TG_OK) st = tg_gguf_set_string(w, "general.architecture", "llama");
    if (st == TG_OK) st = tg_gguf_set_array_string(w, "s", (const char *[]){"a", "bc"}, 2);
    if (st == TG_OK) st = tg_gguf_set_array_int(w, "i", TG_GGUF_INT32, (int64_t[]){1, 2, 3}, 3);
    if (st == TG_OK) st = tg_gguf_add_tensor(w, "q", 2, (int64_t[]){2, 32}, data, TG_GGML_Q4_0);
    if (st == TG_OK) st = tg_gguf_add_tensor(w, "f", 1, (int64_t[]){64}, data, TG_GGML_F16);
    if (st == TG_OK) st = tg_gguf_writer_save(w, path);
    bool fired = mem_failed();
    mem_fail_at(0);
    tg_gguf_writer_free(w);
    if (!fired) {
      tg_gguf *g = tg_gguf_open(path);
      CHECK(st == TG_OK && g && tg_gguf_num_tensors(g) == 2 && tg_gguf_num_kv(g) == 3, "no failure, yet: %s",
            tg_error());
      tg_gguf_close(g);
      break;
    }
    sites++;
    CHECK(st == TG_ERR_NOMEM && tg_error()[0] && access(path, F_OK) != 0, "allocation %lld failed: status %d, '%s'",
          (long long)k, (int)st, tg_error());
  }
  CHECK(sites > 8, "only %d allocation sites", sites);
  test_remove_dir(dir);
}
