/* fuzz_gguf.c — the GGUF reader (src/nn/gguf.c, gguf_api.c) on arbitrary bytes: open them as a file; when they
 * are accepted, read every key with the getter of its type (and every array element), every tensor's info, and
 * every tensor: plain types are read back whole (AddressSanitizer sees every byte the tensor claims, on the heap
 * copy the reader maps), block formats are built and, when small (at most 4 blocks, flattened so that few
 * kernels compile), dequantized and read back. Seeds: tests/fuzz/corpus/gguf (make_corpus.c). */
#include "fuzz.h"
#include "nn/gguf.h"

static void read_key(tg_gguf *g, const char *key) {
  tg_gguf_type type = tg_gguf_kv_type(g, key);
  FUZZ_CHECK(type >= TG_GGUF_UINT8 && type <= TG_GGUF_FLOAT64, "key '%s' has type %d", key, (int)type);
  int64_t i;
  double f;
  bool b;
  size_t len;
  switch (type) {
    case TG_GGUF_STRING: {
      const char *s = tg_gguf_get_string(g, key, &len);
      FUZZ_CHECK(s && strlen(s) <= len && s[len] == 0, "string '%s'", key);
      break;
    }
    case TG_GGUF_BOOL: FUZZ_CHECK(tg_gguf_get_bool(g, key, &b) == TG_OK, "bool '%s'", key); break;
    case TG_GGUF_FLOAT32:
    case TG_GGUF_FLOAT64:
      FUZZ_CHECK(tg_gguf_get_float(g, key, &f) == TG_OK && tg_gguf_get_int(g, key, &i) == TG_ERR_ARG, "float '%s'", key);
      break;
    case TG_GGUF_ARRAY: {
      tg_gguf_type et;
      int64_t n;
      FUZZ_CHECK(tg_gguf_get_array(g, key, &et, &n) == TG_OK && n >= 0, "array '%s'", key);
      for (int64_t e = 0; e < n; e++) {
        tg_status st = TG_OK;
        if (et == TG_GGUF_STRING) {
          const char *s = tg_gguf_array_string(g, key, e, &len);
          FUZZ_CHECK(s && strlen(s) <= len && s[len] == 0, "'%s'[%lld]", key, (long long)e);
        } else if (et == TG_GGUF_BOOL) st = tg_gguf_array_bool(g, key, e, &b);
        else st = tg_gguf_array_float(g, key, e, &f);
        FUZZ_CHECK(st == TG_OK, "'%s'[%lld] of %s", key, (long long)e, tg_gguf_type_name(et));
      }
      FUZZ_CHECK(tg_gguf_array_int(g, key, n, &i) == TG_ERR_ARG && tg_error()[0], "'%s' past its end", key);
      break;
    }
    default:  /* an integer */
      if (tg_gguf_get_int(g, key, &i) != TG_OK) FUZZ_CHECK(type == TG_GGUF_UINT64, "int '%s'", key);
      FUZZ_CHECK(tg_gguf_get_float(g, key, &f) == TG_OK, "int '%s' as float", key);
  }
}

static void read_tensor(tg_gguf *g, int64_t i) {
  tg_gguf_info info;
  FUZZ_CHECK(tg_gguf_tensor_info(g, i, &info) == TG_OK && info.name && info.type_name, "tensor %lld's info", (long long)i);
  FUZZ_CHECK(tg_gguf_find_tensor(g, info.name) == i, "tensor '%s' is not found at its index", info.name);
  FUZZ_CHECK(info.offset <= (uint64_t)g->len && info.nbytes <= (uint64_t)g->len - info.offset,
             "tensor '%s' claims bytes past the file", info.name);
  tg_error_clear();
  tg_tensor *t = tg_gguf_tensor(g, info.name);
  if (!t) {
    FUZZ_CHECK_ERROR("tg_gguf_tensor");
    FUZZ_CHECK(!info.supported, "a supported tensor '%s' (%s) was refused", info.name, info.type_name);
    return;
  }
  FUZZ_CHECK(info.supported && tg_ndim(t) == info.ndim, "tensor '%s'", info.name);
  for (int d = 0; d < info.ndim; d++) FUZZ_CHECK(tg_shape(t, d) == info.shape[d], "tensor '%s' axis %d", info.name, d);
  const gguf_type_info *ti = gguf_type_of(info.type);
  if (ti->dtype != TG_DTYPE_COUNT) fuzz_read_back(t, info.name);
  else if (info.nbytes <= 4 * (uint64_t)ti->size) {
    tg_tensor *flat = tg_reshape(t, 1, (int64_t[]){tg_numel(t)});
    FUZZ_CHECK(flat, "flatten '%s'", info.name);
    fuzz_read_back(flat, info.name);
    tg_free(flat);
  }
  tg_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_error_clear();
  tg_gguf *g = gguf_open_bytes("fuzz.gguf", data, size);
  if (!g) {
    FUZZ_CHECK_ERROR("gguf_open_bytes");
    return fuzz_done();
  }
  FUZZ_CHECK(tg_gguf_version(g) == 2 || tg_gguf_version(g) == 3, "version %u", tg_gguf_version(g));
  for (int64_t i = 0; i < tg_gguf_num_kv(g); i++) {
    const char *key = tg_gguf_key(g, i);
    FUZZ_CHECK(key, "key %lld", (long long)i);
    read_key(g, key);
  }
  for (int64_t i = 0; i < tg_gguf_num_tensors(g); i++) read_tensor(g, i);
  tg_gguf_close(g);
  return fuzz_done();
}
