/* fuzz_safetensors.c — the safetensors reader (src/nn/safetensors.c) on arbitrary bytes: read every tensor and
 * read each back; then load the same bytes into a fixed parameter list (w F32 (2, 3), b I64 (3,), the names
 * and shapes of the first seed), strict and partial. Seeds: tests/fuzz/corpus/safetensors. */
#include "fuzz.h"
#include "nn/safetensors.h"

static void load_into_fixed(const uint8_t *data, size_t size, bool partial) {
  float w0[6] = {0};
  int64_t b0[3] = {0};
  tg_tensor *w = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, w0, sizeof w0);
  tg_tensor *b = tg_from_data(TG_INT64, 1, (int64_t[]){3}, b0, sizeof b0);
  tg_params *p = tg_params_new();
  FUZZ_CHECK(w && b && p && tg_params_add(p, "w", w) == TG_OK && tg_params_add(p, "b", b) == TG_OK, "setup");
  tg_error_clear();
  tg_status st = st_load_bytes("fuzz.safetensors", data, size, p, partial);
  if (st != TG_OK) FUZZ_CHECK(st < 0 && tg_error_status() == st && tg_error()[0], "load failed (status %d)", (int)st);
  /* the parameters keep their dtype and shape whether the load took or not */
  FUZZ_CHECK(tg_dtype_of(w) == TG_FLOAT32 && tg_ndim(w) == 2 && tg_shape(w, 0) == 2 && tg_shape(w, 1) == 3, "w changed");
  FUZZ_CHECK(tg_dtype_of(b) == TG_INT64 && tg_ndim(b) == 1 && tg_shape(b, 0) == 3, "b changed");
  tg_params_free(p);
  tg_free(w);
  tg_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_error_clear();
  tg_params *p = st_read_bytes("fuzz.safetensors", data, size);
  if (!p) {
    FUZZ_CHECK_ERROR("st_read_bytes");
  } else {
    for (int i = 0; i < tg_params_count(p); i++) {
      FUZZ_CHECK(tg_params_name(p, i) && tg_params_name(p, i)[0], "tensor %d has no name", i);
      fuzz_read_back(tg_params_tensor(p, i), tg_params_name(p, i));
    }
    tg_params_free(p);
  }
  load_into_fixed(data, size, false);
  load_into_fixed(data, size, true);
  return fuzz_done();
}
