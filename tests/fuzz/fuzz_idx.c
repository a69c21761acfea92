/* fuzz_idx.c — the MNIST IDX reader (src/nn/data.c), raw and gzipped, on arbitrary bytes. The input is a
 * pair of files: a 2-byte little-endian length n, then n bytes of the images file, then the labels file.
 * A dataset read must have x (N, 1, H, W) uint8 and y (N) int32 with labels below 10.
 * Seeds: tests/fuzz/corpus/idx. */
#include "fuzz.h"
#include "nn/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  size_t ni = (size_t)data[0] | (size_t)data[1] << 8;
  if (ni > size - 2) ni = size - 2;
  const uint8_t *img = data + 2, *lab = data + 2 + ni;
  size_t nl = size - 2 - ni;
  tg_dataset d;
  tg_error_clear();
  tg_status st = data_idx_pair("images", img, ni, "labels", lab, nl, 10, &d);
  if (st != TG_OK) {
    FUZZ_CHECK(st < 0 && tg_error_status() == st && tg_error()[0], "failed (status %d) without a message", (int)st);
    FUZZ_CHECK(!d.x && !d.y && !d.n, "a failed read left a dataset behind");
    return fuzz_done();
  }
  FUZZ_CHECK(d.x && d.y && tg_ndim(d.x) == 4 && tg_shape(d.x, 0) == d.n && tg_shape(d.x, 1) == 1 &&
             tg_dtype_of(d.x) == TG_UINT8 && tg_ndim(d.y) == 1 && tg_shape(d.y, 0) == d.n &&
             tg_dtype_of(d.y) == TG_INT32, "bad dataset shapes");
  fuzz_read_back(d.x, "x");
  int32_t *y = malloc((size_t)d.n * sizeof *y + 1);
  FUZZ_CHECK(y && tg_to_host(d.y, y, (size_t)d.n * sizeof *y) == TG_OK, "reading the labels");
  for (int64_t i = 0; i < d.n; i++) FUZZ_CHECK(y[i] >= 0 && y[i] < 10, "label %lld = %d", (long long)i, y[i]);
  free(y);
  tg_dataset_free(&d);
  return fuzz_done();
}
