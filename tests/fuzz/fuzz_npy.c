/* fuzz_npy.c — the .npy reader (src/nn/npy.c) on arbitrary bytes: a tensor whose bytes are all read back, or
 * NULL with a status and message; when a tensor comes back, saving it and loading the saved file gives the
 * same bytes (the writer and the reader agree). Seeds: tests/fuzz/corpus/npy. */
#include <unistd.h>

#include "fuzz.h"
#include "nn/npy.h"

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_npy.%ld.npy", (long)getpid());
  tg_error_clear();
  tg_tensor *t = npy_load_bytes("fuzz.npy", data, size);
  if (!t) {
    FUZZ_CHECK_ERROR("npy_load_bytes");
    return fuzz_done();
  }
  fuzz_read_back(t, "the loaded tensor");
  size_t nb = (size_t)tg_numel(t) * tg_dtype_size(tg_dtype_of(t));
  /* the round trip only for small arrays: a file write per input is slow */
  if (nb <= 4096) {
    FUZZ_CHECK(tg_npy_save(path, t) == TG_OK, "saving a loaded tensor");
    tg_tensor *u = tg_npy_load(path);
    FUZZ_CHECK(u && tg_dtype_of(u) == tg_dtype_of(t) && tg_ndim(u) == tg_ndim(t), "reloading the saved file");
    for (int d = 0; d < tg_ndim(t); d++) FUZZ_CHECK(tg_shape(u, d) == tg_shape(t, d), "axis %d changed", d);
    unsigned char *a = malloc(nb + 1), *b = malloc(nb + 1);
    FUZZ_CHECK(a && b && tg_to_host(t, a, nb) == TG_OK && tg_to_host(u, b, nb) == TG_OK, "reading back");
    FUZZ_CHECK(!memcmp(a, b, nb), "the saved file holds other bytes");
    free(a);
    free(b);
    tg_free(u);
    unlink(path);
  }
  tg_free(t);
  return fuzz_done();
}
