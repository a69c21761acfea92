/* test_data.c — datasets: IDX files raw and gzipped (small ones written here, malformed ones refused), the
 * MNIST lookup and its error, the real MNIST/Fashion-MNIST/digits files when present, batches and the
 * seeded shuffle. */
#include <dirent.h>
#include <sys/stat.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "test.h"

/* writes n bytes to dir/name, gzipped if gz */
static bool write_file(const char *dir, const char *name, const void *data, size_t n, bool gz) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s%s", dir, name, gz ? ".gz" : "");
  if (gz) {
    gzFile f = gzopen(p, "wb");
    if (!f) return false;
    bool ok = !n || gzwrite(f, data, (unsigned)n) == (int)n;
    return gzclose(f) == Z_OK && ok;
  }
  FILE *f = fopen(p, "wb");
  if (!f) return false;
  bool ok = !n || fwrite(data, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

static void be32(uint8_t *b, uint32_t v) {
  b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8), b[3] = (uint8_t)v;
}

/* an IDX images file of n images h x w (pixel i of image k: k*31 + i) into buf; its size */
static size_t idx_images(uint8_t *buf, uint32_t n, uint32_t h, uint32_t w) {
  be32(buf, 0x803), be32(buf + 4, n), be32(buf + 8, h), be32(buf + 12, w);
  for (uint32_t i = 0; i < n * h * w; i++) buf[16 + i] = (uint8_t)((i / (h * w)) * 31 + i % (h * w));
  return 16 + (size_t)n * h * w;
}

static size_t idx_labels(uint8_t *buf, uint32_t n, uint32_t first) {
  be32(buf, 0x801), be32(buf + 4, n);
  for (uint32_t i = 0; i < n; i++) buf[8 + i] = (uint8_t)((first + i) % 10);
  return 8 + (size_t)n;
}

/* a small MNIST directory: 5 train images 3x4, 2 test images */
static bool write_small_mnist(const char *dir, bool gz) {
  uint8_t b[1024];
  size_t n = idx_images(b, 5, 3, 4);
  bool ok = write_file(dir, "train-images-idx3-ubyte", b, n, gz);
  n = idx_labels(b, 5, 3);
  ok = ok && write_file(dir, "train-labels-idx1-ubyte", b, n, gz);
  n = idx_images(b, 2, 3, 4);
  ok = ok && write_file(dir, "t10k-images-idx3-ubyte", b, n, gz);
  n = idx_labels(b, 2, 7);
  return ok && write_file(dir, "t10k-labels-idx1-ubyte", b, n, gz);
}

static void check_small(const tg_dataset *d, int64_t n, int first_label) {
  CHECK(d->n == n && d->x && d->y, "n %lld", (long long)d->n);
  if (!d->x || !d->y) return;
  CHECK(tg_ndim(d->x) == 4 && tg_shape(d->x, 0) == n && tg_shape(d->x, 1) == 1 && tg_shape(d->x, 2) == 3 &&
            tg_shape(d->x, 3) == 4 && tg_dtype_of(d->x) == TG_UINT8, "x shape/dtype");
  CHECK(tg_ndim(d->y) == 1 && tg_shape(d->y, 0) == n && tg_dtype_of(d->y) == TG_INT32, "y shape/dtype");
  uint8_t px[5 * 12];
  int32_t lb[5];
  CHECK(tg_to_host(d->x, px, (size_t)n * 12) == TG_OK && tg_to_host(d->y, lb, (size_t)n * 4) == TG_OK, "%s", tg_error());
  for (int64_t i = 0; i < n * 12; i++) CHECK(px[i] == (uint8_t)((i / 12) * 31 + i % 12), "pixel %lld = %u", (long long)i, px[i]);
  for (int64_t i = 0; i < n; i++) CHECK(lb[i] == (first_label + i) % 10, "label %lld = %d", (long long)i, lb[i]);
}

TEST(test_mnist_reads_raw_and_gzipped_idx) {
  for (int gz = 0; gz < 2; gz++) {
    char dir[PATH_MAX];
    if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
    CHECK(write_small_mnist(dir, gz), "write");
    tg_dataset train, test;
    CHECK(tg_mnist_load(dir, false, &train, &test) == TG_OK, "%s: %s", gz ? "gz" : "raw", tg_error());
    check_small(&train, 5, 3);
    check_small(&test, 2, 7);
    tg_dataset_free(&train);
    tg_dataset_free(&test);
    CHECK(train.x == NULL && train.n == 0, "freed dataset is cleared");
    /* one split alone */
    CHECK(tg_mnist_load(dir, true, NULL, &test) == TG_OK, "%s", tg_error());
    check_small(&test, 2, 7);
    tg_dataset_free(&test);
    test_remove_dir(dir);
  }
}

/* gzip's concatenated members (gzip -c a b > ab.gz) read as one stream, as gzread reads them */
TEST(test_mnist_reads_gzip_of_two_members) {
  char dir[PATH_MAX], p[PATH_MAX + 64];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  CHECK(write_small_mnist(dir, false), "write");
  uint8_t img[1024];
  size_t n = idx_images(img, 5, 3, 4);
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
  bool ok = true;
  for (int part = 0; part < 2; part++) {  /* the first 7 bytes, then the rest, each its own member */
    gzFile f = gzopen(p, part ? "ab" : "wb");
    size_t at = part ? 7 : 0, len = part ? n - 7 : 7;
    ok = ok && f && gzwrite(f, img + at, (unsigned)len) == (int)len;
    ok = gzclose(f) == Z_OK && ok;
  }
  CHECK(ok, "write");
  tg_dataset train = {0};
  CHECK(tg_mnist_load(dir, false, &train, NULL) == TG_OK, "%s", tg_error());
  check_small(&train, 5, 3);
  tg_dataset_free(&train);
  test_remove_dir(dir);
}

typedef struct bad_idx { const char *what, *file; uint8_t bytes[40]; size_t n; bool gz; const char *expect; } bad_idx;

TEST(test_mnist_refuses_malformed_idx) {
  uint8_t good_img[1024], good_lab[64];
  size_t ni = idx_images(good_img, 5, 3, 4), nl = idx_labels(good_lab, 5, 3);
  bad_idx bad[] = {
      {"bad magic", "train-labels-idx1-ubyte", {0, 0, 8, 3, 0, 0, 0, 5, 1, 2, 3, 4, 5}, 13, false, "bad magic"},
      {"float IDX", "train-images-idx3-ubyte", {0, 0, 0x0d, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}, 20, false, "bad magic"},
      {"too short", "train-labels-idx1-ubyte", {0, 0}, 2, false, "too short"},
      {"cut header", "train-images-idx3-ubyte", {0, 0, 8, 3, 0, 0, 0, 5, 0, 0}, 10, false, "truncated header"},
      {"truncated data", "train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 5, 1, 2}, 10, false, "truncated"},
      {"truncated gz data", "train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 5, 1, 2}, 10, true, "truncated"},
      {"sizes overflowing", "train-images-idx3-ubyte",
       {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 16, false, "claim more data"},
      {"sizes too large for the file", "train-images-idx3-ubyte", {0, 0, 8, 3, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0}, 16, true, "claim more data"},
      {"trailing bytes", "train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5, 6}, 14, false, "trailing"},
      {"label out of range", "train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 10, 5}, 13, false, "label 10"},
      {"count mismatch", "train-labels-idx1-ubyte", {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4}, 12, false, "4 labels"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char dir[PATH_MAX];
    if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
    bool ok = write_file(dir, "t10k-images-idx3-ubyte", good_img, ni, false) &&
              write_file(dir, "t10k-labels-idx1-ubyte", good_lab, nl, false);
    if (strcmp(bad[i].file, "train-images-idx3-ubyte")) ok = ok && write_file(dir, "train-images-idx3-ubyte", good_img, ni, false);
    if (strcmp(bad[i].file, "train-labels-idx1-ubyte")) ok = ok && write_file(dir, "train-labels-idx1-ubyte", good_lab, nl, false);
    ok = ok && write_file(dir, bad[i].file, bad[i].bytes, bad[i].n, bad[i].gz);
    CHECK(ok, "write");
    tg_dataset train = {0}, test = {0};
    tg_error_clear();
    CHECK(tg_mnist_load(dir, false, &train, &test) != TG_OK, "%s: accepted", bad[i].what);
    CHECK(strstr(tg_error(), bad[i].file) && strstr(tg_error(), bad[i].expect), "%s: message: %s", bad[i].what, tg_error());
    CHECK(train.x == NULL && test.x == NULL, "%s: a failed load leaves nothing behind", bad[i].what);
    test_remove_dir(dir);
  }
  /* a gzip stream cut in the middle */
  char dir[PATH_MAX], p[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) return;
  CHECK(write_small_mnist(dir, true), "write");
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
  FILE *f = fopen(p, "rb");
  uint8_t buf[4096];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f) fclose(f);
  CHECK(n > 30 && write_file(dir, "train-images-idx3-ubyte", buf, n / 2, false) == true, "cut");
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", dir);
  unlink(p);
  char raw[PATH_MAX + 32];
  snprintf(raw, sizeof raw, "%s/train-images-idx3-ubyte", dir);
  rename(raw, p);  /* the cut stream under the .gz name */
  tg_dataset train = {0};
  CHECK(tg_mnist_load(dir, false, &train, NULL) != TG_OK && strstr(tg_error(), "train-images"), "cut gzip: %s", tg_error());
  test_remove_dir(dir);
}

/* sets an environment variable for a test and gives back the old value (caller frees) */
static char *swap_env(const char *name, const char *value) {
  const char *old = getenv(name);
  char *keep = old ? strdup(old) : NULL;
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  return keep;
}

static void restore_env(const char *name, char *old) {
  if (old) setenv(name, old, 1);
  else unsetenv(name);
  free(old);
}

TEST(test_mnist_missing_lists_where_it_looked) {
  char dir[PATH_MAX], data[PATH_MAX], cache[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir) || !test_temp_dir(data, sizeof data) || !test_temp_dir(cache, sizeof cache)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  uint8_t b[64];
  CHECK(write_file(dir, "train-images-idx3-ubyte", b, idx_images(b, 1, 2, 2), false), "write");
  char *old_data = swap_env("TG_DATA", data), *old_cache = swap_env("XDG_CACHE_HOME", cache);
  tg_dataset train = {0}, test = {0};
  CHECK(tg_mnist_load(dir, false, &train, &test) == TG_ERR_IO, "found MNIST in empty places");
  const char *e = tg_error();
  char want[PATH_MAX + 32];
  snprintf(want, sizeof want, "%s (lacks train-labels-idx1-ubyte", dir);
  CHECK(strstr(e, want), "dir not named: %s", e);
  snprintf(want, sizeof want, "%s/mnist (no such directory)", data);
  CHECK(strstr(e, want), "$TG_DATA/mnist not named: %s", e);
  snprintf(want, sizeof want, "%s (no IDX files)", data);
  CHECK(strstr(e, want), "$TG_DATA not named: %s", e);
  snprintf(want, sizeof want, "%s/tgc/mnist", cache);
  CHECK(strstr(e, want), "the cache not named: %s", e);
  CHECK(strstr(e, "scripts/get_mnist.sh"), "no way to get it: %s", e);
  CHECK(!strstr(e, "/usr/share/datasets"), "MNIST is not in Debian's Fashion-MNIST place: %s", e);
  CHECK(tg_mnist_load(dir, true, &train, &test) == TG_ERR_IO || train.n == 60000, "fashion: %s", tg_error());
  if (!train.x) {
    CHECK(strstr(tg_error(), "/usr/share/datasets/fashion-mnist") && strstr(tg_error(), "dataset-fashion-mnist") &&
              strstr(tg_error(), "/tgc/fashion-mnist"), "fashion message: %s", tg_error());
  }
  tg_dataset_free(&train);
  tg_dataset_free(&test);
  /* $TG_DATA as a root holding mnist/ */
  char sub[PATH_MAX + 16];
  snprintf(sub, sizeof sub, "%s/mnist", data);
  CHECK(mkdir(sub, 0777) == 0 && write_small_mnist(sub, true), "write");
  CHECK(tg_mnist_load(NULL, false, &train, &test) == TG_OK, "%s", tg_error());
  check_small(&train, 5, 3);
  tg_dataset_free(&train);
  tg_dataset_free(&test);
  test_remove_dir(sub);
  restore_env("TG_DATA", old_data);
  restore_env("XDG_CACHE_HOME", old_cache);
  test_remove_dir(dir);
  test_remove_dir(data);
  test_remove_dir(cache);
}

/* the real files, where this machine keeps them (scripts/get_mnist.sh) */
static void check_real(bool fashion) {
  tg_dataset train = {0}, test = {0};
  tg_status st = tg_mnist_load(NULL, fashion, &train, &test);
  if (st != TG_OK) {
    test_skip("%s not here: %s", fashion ? "Fashion-MNIST" : "MNIST", tg_error());
    CHECK(strstr(tg_error(), "looked in") && strstr(tg_error(), fashion ? "dataset-fashion-mnist" : "get_mnist.sh"),
          "%s", tg_error());
    return;
  }
  CHECK(train.n == 60000 && test.n == 10000, "sizes %lld %lld", (long long)train.n, (long long)test.n);
  CHECK(tg_shape(train.x, 2) == 28 && tg_shape(train.x, 3) == 28, "28x28");
  int32_t *y = malloc(60000 * sizeof *y);
  int counts[10] = {0};
  if (y && tg_to_host(train.y, y, 60000 * sizeof *y) == TG_OK) {
    bool in_range = true;
    for (int i = 0; i < 60000; i++) {
      in_range &= y[i] >= 0 && y[i] <= 9;
      if (y[i] >= 0 && y[i] <= 9) counts[y[i]]++;
    }
    CHECK(in_range, "labels in 0..9");
    for (int c = 0; c < 10; c++) CHECK(fashion ? counts[c] == 6000 : counts[c] > 5000, "class %d: %d", c, counts[c]);
    if (!fashion) CHECK(y[0] == 5 && y[1] == 0 && y[2] == 4, "first labels %d %d %d", y[0], y[1], y[2]);
  }
  free(y);
  tg_tensor *mx = tg_max(test.x, 0, NULL, false);
  CHECK(tg_item(mx) == 255, "max pixel %g", tg_item(mx));
  tg_free(mx);
  tg_dataset_free(&train);
  tg_dataset_free(&test);
}

TEST(test_mnist_real_files) { check_real(false); }
TEST(test_fashion_mnist_real_files) { check_real(true); }

TEST(test_digits_csv_loads_1797_rows) {
  const char *path = "../shared/data/digits/digits.csv.gz";
  if (access(path, R_OK) != 0) {
    test_skip("%s is not here", path);
    return;
  }
  tg_dataset d;
  CHECK(tg_digits_load(path, &d) == TG_OK, "%s", tg_error());
  CHECK(d.n == 1797 && tg_shape(d.x, 0) == 1797 && tg_shape(d.x, 1) == 64 && tg_dtype_of(d.x) == TG_FLOAT32 &&
            tg_dtype_of(d.y) == TG_INT32, "shape");
  float *x = malloc(1797 * 64 * sizeof *x);
  int32_t y[1797];
  if (x && tg_to_host(d.x, x, 1797 * 64 * sizeof *x) == TG_OK && tg_to_host(d.y, y, sizeof y) == TG_OK) {
    const float row0[16] = {0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5, 0};
    CHECK_CLOSE("row 0", x, row0, 16);
    CHECK(y[0] == 0 && y[1] == 1 && y[2] == 2 && y[1796] == 8, "labels %d %d %d .. %d", y[0], y[1], y[2], y[1796]);
    float mx = 0;
    for (int i = 0; i < 1797 * 64; i++) mx = x[i] > mx ? x[i] : mx;
    CHECK(mx == 16, "max pixel %g", mx);
  }
  free(x);
  tg_dataset_free(&d);
  /* path NULL finds the same file beside the repository */
  char *old_data = swap_env("TG_DATA", NULL), *old_cache = swap_env("XDG_CACHE_HOME", "/nonexistent-tgc-test");
  CHECK(tg_digits_load(NULL, &d) == TG_OK && d.n == 1797, "default path: %s", tg_error());
  tg_dataset_free(&d);
  restore_env("TG_DATA", old_data);
  restore_env("XDG_CACHE_HOME", old_cache);
}

TEST(test_digits_csv_refuses_bad_rows) {
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (!test_temp_dir(dir, sizeof dir)) { CHECK(false, "mkdtemp failed"); return; }
  char row[512];
  size_t k = 0;
  for (int i = 0; i < 64; i++) k += (size_t)snprintf(row + k, sizeof row - k, "%d,", i % 17);
  snprintf(row + k, sizeof row - k, "7");
  char good[3 * sizeof row + 8];
  snprintf(good, sizeof good, "%s\n\n%s\r\n%s", row, row, row);  /* a blank line, CRLF, no final newline */
  CHECK(write_file(dir, "d.csv", good, strlen(good), true), "write");
  snprintf(path, sizeof path, "%s/d.csv.gz", dir);
  tg_dataset d;
  CHECK(tg_digits_load(path, &d) == TG_OK && d.n == 3, "good rows: %s", tg_error());
  float x[3 * 64];
  if (d.x && tg_to_host(d.x, x, sizeof x) == TG_OK) CHECK(x[64 + 16] == 16 && x[64 + 17] == 0, "values");
  tg_dataset_free(&d);
  const struct { const char *what, *text, *expect; } bad[] = {
      {"too few columns", "1,2,3\n", "line 1, column 3"},
      {"pixel out of range", "17,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1\n", "above 16"},
      {"label out of range", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,12\n", "label above 9"},
      {"not a number", "a,b\n", "expected a number"},
      {"too many columns", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,2\n", "end of the line"},
      {"empty", "", "no rows"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(write_file(dir, "bad.csv", bad[i].text, strlen(bad[i].text), false), "write");
    snprintf(path, sizeof path, "%s/bad.csv", dir);
    CHECK(tg_digits_load(path, &d) != TG_OK && strstr(tg_error(), bad[i].expect) && strstr(tg_error(), "bad.csv"),
          "%s: %s", bad[i].what, tg_error());
  }
  snprintf(path, sizeof path, "%s/none.csv", dir);
  CHECK(tg_digits_load(path, &d) == TG_ERR_IO && strstr(tg_error(), "none.csv"), "missing: %s", tg_error());
  test_remove_dir(dir);
}

TEST(test_dataset_batch_copies_rows) {
  /* x (6, 2, 3) float: row r holds r*10 + i; y (6) int32 r*7 */
  float xs[6 * 6];
  int32_t ys[6];
  for (int r = 0; r < 6; r++) {
    for (int i = 0; i < 6; i++) xs[r * 6 + i] = (float)(r * 10 + i);
    ys[r] = r * 7;
  }
  tg_dataset d = {.x = tg_from_data(TG_FLOAT32, 3, (int64_t[]){6, 2, 3}, xs, sizeof xs),
                  .y = tg_from_data(TG_INT32, 1, (int64_t[]){6}, ys, sizeof ys), .n = 6};
  int64_t perm[6] = {4, 0, 5, 2, 1, 3};
  tg_tensor *bx, *by;
  CHECK(tg_dataset_batch(&d, perm, 2, 3, &bx, &by) == TG_OK, "%s", tg_error());
  CHECK_T(bx);
  CHECK(tg_ndim(bx) == 3 && tg_shape(bx, 0) == 3 && tg_shape(bx, 1) == 2 && tg_shape(by, 0) == 3, "batch shape");
  float gx[18];
  int32_t gy[3];
  CHECK(tg_to_host(bx, gx, sizeof gx) == TG_OK && tg_to_host(by, gy, sizeof gy) == TG_OK, "%s", tg_error());
  const int rows[3] = {5, 2, 1};
  for (int b = 0; b < 3; b++) {
    CHECK(gy[b] == rows[b] * 7, "y[%d] = %d", b, gy[b]);
    for (int i = 0; i < 6; i++) CHECK(gx[b * 6 + i] == rows[b] * 10 + i, "x[%d][%d] = %g", b, i, gx[b * 6 + i]);
  }
  tg_free(bx);
  tg_free(by);
  /* the last batch is short; no perm means rows in order */
  CHECK(tg_dataset_batch(&d, NULL, 4, 4, &bx, &by) == TG_OK && tg_shape(bx, 0) == 2, "short batch: %s", tg_error());
  CHECK(tg_to_host(by, gy, 2 * sizeof *gy) == TG_OK && gy[0] == 28 && gy[1] == 35, "in order");
  tg_free(bx);
  tg_free(by);
  int64_t badp[6] = {0, 1, 9, 2, 3, 4};
  CHECK(tg_dataset_batch(&d, badp, 0, 3, &bx, &by) == TG_ERR_ARG && bx == NULL && by == NULL &&
            strstr(tg_error(), "perm[2] = 9"), "bad perm: %s", tg_error());
  CHECK(tg_dataset_batch(&d, perm, -1, 3, &bx, &by) == TG_ERR_ARG, "negative start");
  CHECK(tg_dataset_batch(&d, perm, 7, 1, &bx, &by) == TG_ERR_ARG, "start past the end");
  tg_dataset_free(&d);
}

TEST(test_shuffle_is_a_fixed_permutation) {
  int64_t p[10], q[10];
  tg_shuffle(p, 10, 42);
  /* splitmix64 + Fisher-Yates: the same on every machine (computed once, kept) */
  const int64_t want[10] = {0, 9, 5, 8, 6, 4, 7, 2, 1, 3};
  check_equal_i64("shuffle(10, 42)", p, want, 10, __FILE__, __LINE__);
  tg_shuffle(q, 10, 42);
  check_equal_i64("same seed", q, p, 10, __FILE__, __LINE__);
  tg_shuffle(q, 10, 43);
  CHECK(memcmp(p, q, sizeof p) != 0, "another seed, another order");
  enum { N = 100000 };
  int64_t *big = malloc(N * sizeof *big);
  char *seen = calloc(N, 1);
  if (big && seen) {
    tg_shuffle(big, N, 7);
    bool perm = true;
    int64_t fixed = 0;
    for (int64_t i = 0; i < N; i++) {
      perm &= big[i] >= 0 && big[i] < N && !seen[big[i]];
      if (big[i] >= 0 && big[i] < N) seen[big[i]] = 1;
      fixed += big[i] == i;
    }
    CHECK(perm, "not a permutation");
    CHECK(fixed < 10, "%lld fixed points (expected about 1)", (long long)fixed);
  }
  free(big);
  free(seen);
  tg_shuffle(NULL, 5, 1);  /* harmless */
}
