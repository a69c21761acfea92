/* fuzz_digits.c — the digits CSV reader (src/nn/data.c), raw and gzipped, on arbitrary bytes. A dataset read
 * must have x (N, 64) float32 with pixels in [0, 16] and y (N) int32 labels in [0, 9].
 * Seeds: tests/fuzz/corpus/digits. */
#include "fuzz.h"
#include "nn/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tg_dataset d;
  tg_error_clear();
  tg_status st = data_digits("fuzz.csv", data, size, &d);
  if (st != TG_OK) {
    FUZZ_CHECK(st < 0 && tg_error_status() == st && tg_error()[0], "failed (status %d) without a message", (int)st);
    FUZZ_CHECK(!d.x && !d.y && !d.n, "a failed read left a dataset behind");
    return fuzz_done();
  }
  FUZZ_CHECK(d.n > 0 && d.x && d.y && tg_ndim(d.x) == 2 && tg_shape(d.x, 0) == d.n && tg_shape(d.x, 1) == 64 &&
             tg_dtype_of(d.x) == TG_FLOAT32 && tg_ndim(d.y) == 1 && tg_shape(d.y, 0) == d.n &&
             tg_dtype_of(d.y) == TG_INT32, "bad dataset shapes");
  float *x = malloc((size_t)d.n * 64 * sizeof *x);
  int32_t *y = malloc((size_t)d.n * sizeof *y);
  FUZZ_CHECK(x && y && tg_to_host(d.x, x, (size_t)d.n * 64 * sizeof *x) == TG_OK &&
             tg_to_host(d.y, y, (size_t)d.n * sizeof *y) == TG_OK, "reading back");
  for (int64_t i = 0; i < d.n * 64; i++) FUZZ_CHECK(x[i] >= 0 && x[i] <= 16, "pixel %lld = %g", (long long)i, x[i]);
  for (int64_t i = 0; i < d.n; i++) FUZZ_CHECK(y[i] >= 0 && y[i] <= 9, "label %lld = %d", (long long)i, y[i]);
  free(x);
  free(y);
  tg_dataset_free(&d);
  return fuzz_done();
}
