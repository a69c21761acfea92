/* data.c — datasets: MNIST and Fashion-MNIST from IDX files (raw or gzipped), scikit-learn's digits CSV,
 * seeded shuffling and batches.
 *
 * Every file is user input. Sizes in a header are checked before anything is allocated from them: a raw file
 * must be as long as its header says, a gzipped one can at most expand 1032 times (deflate's limit), so a
 * header claiming gigabytes in a small file is refused instead of allocating them. Data are read straight
 * into 64-byte aligned memory that the dataset's tensors wrap (no second copy); the tensors free it.
 * A batch copies its rows on the host into new tensors, so a training step's graph reads a small buffer,
 * not a gather over the whole dataset.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "nn/data.h"
#include "runtime/device.h"
#include "tensor/tensor.h"

#define DEFLATE_MAX_RATIO 1032  /* the most a deflate stream expands: 258 bytes per 2 bits */
#define GZ_CHUNK ((size_t)1 << 30)

/* ---- a file's bytes, gzipped or not ------------------------------------------------------------------------ */

/* A reader parses bytes in memory (data.h: the fuzz targets call these parsers); the calls that take a path
 * map the file read-only and hand the mapping over, so the parsers never see a file. Bytes that start with
 * gzip's magic (1f 8b) are inflated as they are read, like gzread: members one after another, trailing bytes
 * that do not start another member ignored. */
typedef struct zsrc {
  const char *op, *name;  /* for messages */
  const uint8_t *b;
  size_t n, off;          /* the bytes, and how many were consumed */
  uint64_t bound;         /* the most bytes the source can yield */
  bool gzipped, zinit, zdone;
  z_stream zs;
} zsrc;

/* zlib's allocations, through the library's (uop.h) */
static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size) { return mem_calloc(items, size); }
static void zlib_free(voidpf opaque, voidpf p) { free(p); }

static bool gz_magic(const uint8_t *b, size_t n) { return n >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

static void zsrc_init(zsrc *z, const char *op, const char *name, const uint8_t *b, size_t n) {
  *z = (zsrc){.op = op, .name = name, .b = b, .n = n, .gzipped = gz_magic(b, n)};
  z->bound = !z->gzipped                                   ? n
             : n < (UINT64_MAX - 64) / DEFLATE_MAX_RATIO ? (uint64_t)n * DEFLATE_MAX_RATIO + 64
                                                         : UINT64_MAX;
}

static void zsrc_end(zsrc *z) {
  if (z->zinit) inflateEnd(&z->zs);
  z->zinit = false;
}

/* a gzip error: -1 with the message set */
static int64_t zsrc_fail(zsrc *z, tg_status st, const char *what) {
  tg_set_error(st, "%s: %s: %s", z->op, z->name, what);
  return -1;
}

/* reads up to n bytes into dst; the count read (less than n only at the end), or -1 with the error set */
static int64_t zsrc_read(zsrc *z, void *dst, size_t n) {
  if (!z->gzipped) {
    size_t k = n < z->n - z->off ? n : z->n - z->off;
    if (k) memcpy(dst, z->b + z->off, k);
    z->off += k;
    return (int64_t)k;
  }
  size_t got = 0;
  while (got < n && !z->zdone) {
    if (!z->zinit) {
      /* a member starts here: the first, or one after another; anything else after a member is ignored */
      if (z->off > 0 && !gz_magic(z->b + z->off, z->n - z->off)) {
        z->zdone = true;
        break;
      }
      z->zs = (z_stream){.zalloc = zlib_alloc, .zfree = zlib_free};
      int r = inflateInit2(&z->zs, 16 + MAX_WBITS);
      if (r == Z_MEM_ERROR) return zsrc_fail(z, TG_ERR_NOMEM, "out of memory starting to inflate");
      if (r != Z_OK) return zsrc_fail(z, TG_ERR_IO, "inflateInit2 failed");
      z->zinit = true;
    }
    size_t in = z->n - z->off, out = n - got;
    z->zs.next_in = (Bytef *)(uintptr_t)(z->b + z->off);
    z->zs.avail_in = in < GZ_CHUNK ? (uInt)in : (uInt)GZ_CHUNK;
    z->zs.next_out = (Bytef *)dst + got;
    z->zs.avail_out = out < GZ_CHUNK ? (uInt)out : (uInt)GZ_CHUNK;
    uInt avail_in = z->zs.avail_in, avail_out = z->zs.avail_out;
    int r = inflate(&z->zs, Z_NO_FLUSH);
    z->off += avail_in - z->zs.avail_in;
    got += avail_out - z->zs.avail_out;
    if (r == Z_STREAM_END) {
      zsrc_end(z);
      if (z->off == z->n) z->zdone = true;
    } else if (r == Z_MEM_ERROR) {
      return zsrc_fail(z, TG_ERR_NOMEM, "out of memory inflating the gzip stream");
    } else if (r == Z_BUF_ERROR) {  /* no progress was possible: the input ran out inside a member */
      return zsrc_fail(z, TG_ERR_IO, "the gzip stream is cut short (unexpected end of file)");
    } else if (r == Z_DATA_ERROR || r == Z_NEED_DICT) {
      char msg[160];
      snprintf(msg, sizeof msg, "corrupt gzip stream: %s", z->zs.msg ? z->zs.msg : "bad data");
      return zsrc_fail(z, TG_ERR_IO, msg);
    } else if (r != Z_OK) {
      return zsrc_fail(z, TG_ERR_IO, "inflate failed");
    } else if (z->off == z->n && z->zs.avail_out) {  /* all input taken, room left, the member not ended */
      return zsrc_fail(z, TG_ERR_IO, "the gzip stream is cut short (unexpected end of file)");
    }
  }
  return (int64_t)got;
}

/* true if the source has no bytes left; sets an error naming its op otherwise */
static bool zsrc_at_end(zsrc *z) {
  char c;
  int64_t r = zsrc_read(z, &c, 1);
  if (r == 0) return true;
  if (r > 0) tg_set_error(TG_ERR_IO, "%s: %s: more bytes than its header says (trailing data)", z->op, z->name);
  return false;
}

tg_status data_map_file(const char *op, const char *path, data_map *m) {
  *m = (data_map){.b = (const uint8_t *)""};
  struct stat sb;
  if (stat(path, &sb) != 0) {  /* before open: opening a FIFO would block */
    tg_set_error(TG_ERR_IO, "%s: %s: %s", op, path, strerror(errno));
    return TG_ERR_IO;
  }
  if (!S_ISREG(sb.st_mode)) {
    tg_set_error(TG_ERR_IO, "%s: %s: not a regular file", op, path);
    return TG_ERR_IO;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &sb) != 0) {
    tg_set_error(TG_ERR_IO, "%s: %s: cannot open: %s", op, path, strerror(errno));
    if (fd >= 0) close(fd);
    return TG_ERR_IO;
  }
  if ((uint64_t)sb.st_size > SIZE_MAX / 2) {
    close(fd);
    tg_set_error(TG_ERR_IO, "%s: %s: too large to map", op, path);
    return TG_ERR_IO;
  }
  if (sb.st_size > 0) {
    void *base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) {
      tg_status st = err == ENOMEM ? TG_ERR_NOMEM : TG_ERR_IO;
      tg_set_error(st, "%s: %s: cannot map: %s", op, path, strerror(err));
      return st;
    }
    *m = (data_map){.b = base, .n = (size_t)sb.st_size, .base = base};
    return TG_OK;
  }
  close(fd);
  return TG_OK;
}

void data_unmap(data_map *m) {
  if (m->base) munmap(m->base, m->n);
  *m = (data_map){0};
}

/* 64-byte aligned memory for a tensor to wrap and free */
static void *aligned_bytes(size_t n) {
  size_t cap = n / 64 * 64 + 64;
  return n < SIZE_MAX - 64 ? mem_aligned(64, cap) : NULL;
}

static tg_tensor *wrap(tg_dtype dt, int ndim, const int64_t *shape, void *mem, size_t nbytes) {
  return tensor_wrap_memory(dt, ndim, shape, mem, nbytes, free, mem);
}

/* ---- IDX files -------------------------------------------------------------------------------------------- */

/* an IDX file of unsigned bytes with ndims dimensions (magic 0x0000 08 ndims, sizes big-endian uint32):
 * fills dims and *data (aligned, caller frees); *nbytes is the product of dims */
static tg_status idx_parse(const char *name, const uint8_t *bytes, size_t len, int ndims, int64_t *dims,
                           uint8_t **data, size_t *nbytes) {
  static const char *op = "IDX";
  *data = NULL;
  zsrc z;
  zsrc_init(&z, op, name, bytes, len);
  uint8_t h[4 + 4 * 3];
  size_t hn = 4 + 4 * (size_t)ndims;
  int64_t r = zsrc_read(&z, h, hn);
  if (r < 0) goto fail;
  if (r < 4) {
    tg_set_error(TG_ERR_IO, "%s: %s: %lld bytes, too short for an IDX file", op, name, (long long)r);
    goto fail;
  }
  uint32_t magic = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
  if (magic != 0x800u + (uint32_t)ndims) {
    tg_set_error(TG_ERR_IO, "%s: %s: bad magic 0x%08x, expected 0x%08x (unsigned bytes, %d dimension%s)", op, name,
                 magic, 0x800u + (uint32_t)ndims, ndims, ndims == 1 ? "" : "s");
    goto fail;
  }
  if ((size_t)r < hn) {
    tg_set_error(TG_ERR_IO, "%s: %s: truncated header (%lld of %zu bytes)", op, name, (long long)r, hn);
    goto fail;
  }
  uint64_t total = 1;
  bool over = false;
  for (int d = 0; d < ndims; d++) {
    const uint8_t *b = h + 4 + 4 * d;
    dims[d] = (int64_t)((uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]);
    if (dims[d] && total > UINT64_MAX / (uint64_t)dims[d]) over = true;
    else total *= (uint64_t)dims[d];
  }
  for (int d = 0; d < ndims; d++)
    if (!dims[d]) over = false, total = 0;
  if (over || total > z.bound || total > (uint64_t)INT64_MAX) {
    char sb[128];
    tg_set_error(TG_ERR_IO, "%s: %s: sizes %s claim more data than this %s file can hold", op, name,
                 shape_str(sb, sizeof sb, ndims, dims), z.gzipped ? "gzipped" : "raw");
    goto fail;
  }
  *data = aligned_bytes((size_t)total);
  if (!*data) {
    tg_set_error(TG_ERR_NOMEM, "%s: %s: out of memory for %llu bytes", op, name, (unsigned long long)total);
    goto fail;
  }
  r = zsrc_read(&z, *data, (size_t)total);
  if (r < 0) goto fail;
  if ((uint64_t)r < total) {
    tg_set_error(TG_ERR_IO, "%s: %s: truncated: %lld of %llu data bytes", op, name, (long long)r, (unsigned long long)total);
    goto fail;
  }
  if (!zsrc_at_end(&z)) goto fail;
  zsrc_end(&z);
  *nbytes = (size_t)total;
  return TG_OK;
fail:
  free(*data);
  *data = NULL;
  zsrc_end(&z);
  return tg_error_status() ? tg_error_status() : TG_ERR_IO;
}

/* images (N, 1, H, W) uint8 and labels (N) int32 from the bytes of a pair of IDX files; labels must be
 * below nclasses */
tg_status data_idx_pair(const char *images, const uint8_t *ib, size_t in, const char *labels, const uint8_t *lbytes,
                        size_t ln, int64_t nclasses, tg_dataset *out) {
  *out = (tg_dataset){0};
  int64_t di[3], dl[1];
  uint8_t *px = NULL, *lb = NULL;
  size_t npx, nlb;
  tg_status st = idx_parse(images, ib, in, 3, di, &px, &npx);
  if (st == TG_OK) st = idx_parse(labels, lbytes, ln, 1, dl, &lb, &nlb);
  if (st != TG_OK) goto fail;
  if (dl[0] != di[0]) {
    tg_set_error(TG_ERR_IO, "IDX: %s holds %lld images but %s holds %lld labels", images, (long long)di[0], labels,
                 (long long)dl[0]);
    st = TG_ERR_IO;
    goto fail;
  }
  int32_t *y = aligned_bytes(nlb * sizeof *y);
  if (!y) {
    st = TG_ERR_NOMEM;
    tg_set_error(st, "IDX: out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nlb; i++) {
    if (lb[i] >= nclasses) {
      tg_set_error(TG_ERR_IO, "IDX: %s: label %u at index %zu is not below %lld", labels, lb[i], i, (long long)nclasses);
      free(y);
      st = TG_ERR_IO;
      goto fail;
    }
    y[i] = lb[i];
  }
  free(lb);
  lb = NULL;
  tg_tensor *tx = wrap(TG_UINT8, 4, (int64_t[]){di[0], 1, di[1], di[2]}, px, npx);
  px = NULL;  /* the tensor owns it now, even on failure */
  tg_tensor *ty = wrap(TG_INT32, 1, dl, y, nlb * sizeof *y);
  if (!tx || !ty) {
    tg_free(tx);
    tg_free(ty);
    return tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  }
  *out = (tg_dataset){.x = tx, .y = ty, .n = di[0]};
  return TG_OK;
fail:
  free(px);
  free(lb);
  return st;
}

/* as data_idx_pair, from the files at these paths */
static tg_status idx_pair(const char *images, const char *labels, int64_t nclasses, tg_dataset *out) {
  data_map mi, ml;
  tg_status st = data_map_file("IDX", images, &mi);
  if (st != TG_OK) return st;
  st = data_map_file("IDX", labels, &ml);
  if (st == TG_OK) st = data_idx_pair(images, mi.b, mi.n, labels, ml.b, ml.n, nclasses, out);
  data_unmap(&mi);
  data_unmap(&ml);
  return st;
}

/* ---- MNIST: where the files are -------------------------------------------------------------------------- */

static const char *const mnist_files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

/* dir/name into out (PATH_MAX bytes); false if it does not fit */
static bool path_join(char *out, const char *dir, const char *name) {
  int w = snprintf(out, PATH_MAX, "%s/%s", dir, name);
  return w > 0 && w < PATH_MAX;
}

/* the readable file dir/name or dir/name.gz into out; false if neither is */
static bool find_file(const char *dir, const char *name, char *out, size_t cap) {
  int w = snprintf(out, cap, "%s/%s", dir, name);
  if (w > 0 && (size_t)w < cap && access(out, R_OK) == 0) return true;
  w = snprintf(out, cap, "%s/%s.gz", dir, name);
  return w > 0 && (size_t)w < cap && access(out, R_OK) == 0;
}

/* appends to a bounded message, ending in "..." when full */
typedef struct note { char s[720]; size_t k; } note;

static void note_add(note *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_add(note *n, const char *fmt, ...) {
  if (n->k >= sizeof n->s - 4) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(n->s + n->k, sizeof n->s - n->k, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= sizeof n->s - n->k - 4) {
    memcpy(n->s + sizeof n->s - 4, "...", 4);
    n->k = sizeof n->s;
  } else {
    n->k += (size_t)w;
  }
}

/* the user cache directory for tgc: $XDG_CACHE_HOME/tgc, else $HOME/.cache/tgc; false if neither is set */
static bool cache_dir(char *out, size_t cap) {
  const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  int w;
  if (x && x[0] == '/') w = snprintf(out, cap, "%s/tgc", x);  /* the spec ignores relative values */
  else if (h && *h) w = snprintf(out, cap, "%s/.cache/tgc", h);
  else return false;
  return w > 0 && (size_t)w < cap;
}

/* tries dir: true with the four paths if it holds all files; notes what it lacks otherwise */
static bool try_dir(const char *dir, note *looked, char paths[4][PATH_MAX]) {
  int missing = -1, nmissing = 0;
  for (int i = 0; i < 4; i++)
    if (!find_file(dir, mnist_files[i], paths[i], PATH_MAX)) {
      if (missing < 0) missing = i;
      nmissing++;
    }
  if (!nmissing) return true;
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) note_add(looked, "%s (no such directory); ", dir);
  else if (nmissing == 4) note_add(looked, "%s (no IDX files); ", dir);
  else note_add(looked, "%s (lacks %s[.gz]%s); ", dir, mnist_files[missing], nmissing > 1 ? " and more" : "");
  return false;
}

tg_status tg_mnist_load(const char *dir, bool fashion, tg_dataset *train, tg_dataset *test) {
  const char *op = fashion ? "tg_mnist_load (Fashion-MNIST)" : "tg_mnist_load (MNIST)";
  if (train) *train = (tg_dataset){0};
  if (test) *test = (tg_dataset){0};
  if (!train && !test) {
    tg_set_error(TG_ERR_ARG, "%s: neither a train nor a test dataset to fill", op);
    return TG_ERR_ARG;
  }
  const char *sub = fashion ? "fashion-mnist" : "mnist";
  char paths[4][PATH_MAX], cand[PATH_MAX];
  note looked = {0};
  bool found = false;
  /* the order tg.h gives: dir, $TG_DATA (itself or its mnist/ or fashion-mnist/ folder), the user cache,
   * then where Debian's dataset-fashion-mnist puts its files */
  if (dir) found = try_dir(dir, &looked, paths);
  const char *env = getenv("TG_DATA");
  if (!found && env && *env) {
    found = (path_join(cand, env, sub) && try_dir(cand, &looked, paths)) || try_dir(env, &looked, paths);
  } else if (!found) {
    note_add(&looked, "$TG_DATA (not set); ");
  }
  char cache[PATH_MAX];
  if (!found && cache_dir(cache, sizeof cache)) {
    found = path_join(cand, cache, sub) && try_dir(cand, &looked, paths);
  } else if (!found) {
    note_add(&looked, "the user cache ($XDG_CACHE_HOME and $HOME not set); ");
  }
  if (!found && fashion) found = try_dir("/usr/share/datasets/fashion-mnist", &looked, paths);
  if (!found) {
    if (looked.k >= 2 && looked.k < sizeof looked.s) looked.s[looked.k - 2] = 0;  /* the last "; " */
    tg_set_error(TG_ERR_IO, "%s: the four IDX files (%s etc., raw or .gz) were not found; looked in: %s. %s", op,
                 mnist_files[0], looked.s,
                 fashion ? "Get them with `apt-get install dataset-fashion-mnist` (or scripts/get_mnist.sh --fashion), "
                           "or pass their directory"
                         : "Get them with scripts/get_mnist.sh (it fills ~/.cache/tgc/mnist), or pass their directory");
    return TG_ERR_IO;
  }
  tg_status st = TG_OK;
  if (train) st = idx_pair(paths[0], paths[1], 10, train);
  if (st == TG_OK && test) st = idx_pair(paths[2], paths[3], 10, test);
  if (st != TG_OK && train) tg_dataset_free(train);
  return st;
}

/* ---- scikit-learn's digits CSV ---------------------------------------------------------------------------- */

#define DIGITS_FEATURES 64

/* the inflated bytes of a gzipped source into a new buffer of at most max bytes (caller frees) */
static tg_status gunzip_all(zsrc *z, size_t max, char **out, size_t *n) {
  *out = NULL;
  size_t cap = 1 << 16, len = 0;
  char *b = mem_alloc(cap + 1);
  for (;;) {
    if (!b) {
      tg_set_error(TG_ERR_NOMEM, "%s: %s: out of memory", z->op, z->name);
      return TG_ERR_NOMEM;
    }
    int64_t r = zsrc_read(z, b + len, cap - len);
    if (r < 0) {
      free(b);
      return tg_error_status();
    }
    len += (size_t)r;
    if (len < cap) break;
    if (cap >= max) {
      free(b);
      tg_set_error(TG_ERR_IO, "%s: %s: larger than %zu bytes", z->op, z->name, max);
      return TG_ERR_IO;
    }
    cap = cap * 2 < max ? cap * 2 : max;
    char *nb = mem_realloc(b, cap + 1);
    if (!nb) free(b);
    b = nb;
  }
  b[len] = 0;
  *out = b;
  *n = len;
  return TG_OK;
}

/* parses rows of 64 pixels (0..16) and a label (0..9), comma-separated, one row a line */
static tg_status digits_parse(const char *path, const char *s, size_t len, tg_dataset *all) {
  *all = (tg_dataset){0};
  int64_t rows = 0;
  for (size_t i = 0; i < len; i++)
    if (s[i] == '\n' && (i == 0 || s[i - 1] != '\n')) rows++;
  if (len && s[len - 1] != '\n') rows++;  /* a last line without its newline */
  float *x = aligned_bytes((size_t)(rows ? rows : 1) * DIGITS_FEATURES * sizeof *x);
  int32_t *y = aligned_bytes((size_t)(rows ? rows : 1) * sizeof *y);
  if (!x || !y) {
    free(x);
    free(y);
    tg_set_error(TG_ERR_NOMEM, "tg_digits_load: %s: out of memory", path);
    return TG_ERR_NOMEM;
  }
  int64_t n = 0, line = 1;
  const char *p = s, *end = s + len;
  while (p < end) {
    if (*p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n')) {  /* a blank line */
      p += *p == '\r' ? 2 : 1;
      line++;
      continue;
    }
    if (n >= rows) break;  /* cannot happen: rows counts every non-blank line */
    for (int c = 0; c <= DIGITS_FEATURES; c++) {
      long v = 0;
      int digits = 0;
      while (p < end && *p >= '0' && *p <= '9' && digits < 4) v = v * 10 + (*p++ - '0'), digits++;
      long hi = c < DIGITS_FEATURES ? 16 : 9;
      bool sep_ok = c < DIGITS_FEATURES ? (p < end && *p == ',')
                                        : (p == end || *p == '\n' || (*p == '\r' && p + 1 < end && p[1] == '\n'));
      if (!digits || v > hi || !sep_ok) {
        const char *what = !digits                   ? "expected a number"
                           : v > hi                  ? (c < DIGITS_FEATURES ? "a pixel above 16" : "a label above 9")
                           : c < DIGITS_FEATURES     ? "expected ',' (rows have 64 pixels and a label)"
                                                     : "expected the end of the line after the label";
        tg_set_error(TG_ERR_IO, "tg_digits_load: %s: line %lld, column %d: %s", path, (long long)line, c + 1, what);
        free(x);
        free(y);
        return TG_ERR_IO;
      }
      if (c < DIGITS_FEATURES) {
        x[n * DIGITS_FEATURES + c] = (float)v;
        p++;
      } else {
        y[n] = (int32_t)v;
      }
    }
    n++;
    if (p < end) p += *p == '\r' ? 2 : 1;
    line++;
  }
  if (!n) {
    tg_set_error(TG_ERR_IO, "tg_digits_load: %s: no rows", path);
    free(x);
    free(y);
    return TG_ERR_IO;
  }
  tg_tensor *tx = wrap(TG_FLOAT32, 2, (int64_t[]){n, DIGITS_FEATURES}, x, (size_t)n * DIGITS_FEATURES * sizeof *x);
  tg_tensor *ty = wrap(TG_INT32, 1, (int64_t[]){n}, y, (size_t)n * sizeof *y);
  if (!tx || !ty) {
    tg_free(tx);
    tg_free(ty);
    return tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  }
  *all = (tg_dataset){.x = tx, .y = ty, .n = n};
  return TG_OK;
}

/* the digits dataset from the bytes of a CSV file, gzipped or not */
tg_status data_digits(const char *name, const uint8_t *bytes, size_t len, tg_dataset *all) {
  *all = (tg_dataset){0};
  zsrc z;
  zsrc_init(&z, "tg_digits_load", name, bytes, len);
  if (!z.gzipped) return digits_parse(name, (const char *)bytes, len, all);
  char *text;
  size_t n = 0;
  tg_status st = gunzip_all(&z, (size_t)1 << 30, &text, &n);
  zsrc_end(&z);
  if (st != TG_OK) return st;
  st = digits_parse(name, text, n, all);
  free(text);
  return st;
}

tg_status tg_digits_load(const char *path, tg_dataset *all) {
  if (!all) {
    tg_set_error(TG_ERR_ARG, "tg_digits_load: the dataset is NULL");
    return TG_ERR_ARG;
  }
  *all = (tg_dataset){0};
  char found[PATH_MAX];
  if (!path) {
    /* where a user keeps data, then the project's shared data beside the repository */
    const char *env = getenv("TG_DATA");
    char cache[PATH_MAX], dirs[3][PATH_MAX];
    int nd = 0;
    if (env && *env && path_join(dirs[nd], env, "digits")) nd++;
    if (cache_dir(cache, sizeof cache) && path_join(dirs[nd], cache, "digits")) nd++;
    strcpy(dirs[nd++], "../shared/data/digits");
    note looked = {0};
    for (int i = 0; i < nd && !path; i++) {
      if (find_file(dirs[i], "digits.csv", found, sizeof found)) path = found;
      else note_add(&looked, "%s%s", i ? ", " : "", dirs[i]);
    }
    if (!path) {
      tg_set_error(TG_ERR_IO, "tg_digits_load: digits.csv[.gz] not found; looked in: %s", looked.s);
      return TG_ERR_IO;
    }
  }
  data_map m;
  tg_status st = data_map_file("tg_digits_load", path, &m);
  if (st != TG_OK) return st;
  st = data_digits(path, m.b, m.n, all);
  data_unmap(&m);
  return st;
}

/* ---- batches and shuffling ---------------------------------------------------------------------------------- */

/* the host bytes of t, realized and contiguous: its buffer itself on the CPU (the loaders' data sets stay
 * there), else a copy the caller frees (*copy set) */
static const uint8_t *host_data(tg_tensor *t, const char *op, uint8_t **copy) {
  *copy = NULL;
  if (tg_realize(t) != TG_OK) return NULL;
  uop *u = t->u;
  if (u->op == OP_RESHAPE) u = u->src[0];
  tg_buffer *b = u->op == OP_BUFFER ? u->buf : NULL;
  if (!b || (!b->ptr && b->nbytes)) {
    tg_set_error(TG_ERR_INTERNAL, "%s: a realized tensor has no buffer", op);
    return NULL;
  }
  if (!device_is_gpu(b->dev)) return b->ptr;
  size_t n = (size_t)tg_numel(t) * tg_dtype_size(tg_dtype_of(t));
  if (!(*copy = mem_alloc(n ? n : 1))) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory copying a data set of %zu bytes from %s", op, n, b->dev->name);
    return NULL;
  }
  if (tg_to_host(t, *copy, n) != TG_OK) {
    free(*copy);
    *copy = NULL;
    return NULL;
  }
  return *copy;
}

/* rows sel of t (N, ...) as a new tensor */
static tg_tensor *gather_rows(tg_tensor *t, int64_t n, const int64_t *perm, int64_t start, int64_t count, const char *op) {
  uint8_t *copy;
  const uint8_t *src = host_data(t, op, &copy);
  if (!src) return NULL;
  int nd = tg_ndim(t);
  int64_t shape[TG_MAX_DIMS];
  memcpy(shape, tg_shape_ptr(t), (size_t)nd * sizeof *shape);
  size_t row = tg_dtype_size(tg_dtype_of(t));
  for (int d = 1; d < nd; d++) row *= (size_t)shape[d];
  shape[0] = count;
  size_t nbytes = row * (size_t)count;
  uint8_t *dst = mem_alloc(nbytes ? nbytes : 1);
  if (!dst) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory for a batch of %zu bytes", op, nbytes);
    free(copy);
    return NULL;
  }
  for (int64_t i = 0; i < count; i++) {
    int64_t r = perm ? perm[start + i] : start + i;
    if (r < 0 || r >= n) {
      tg_set_error(TG_ERR_ARG, "%s: perm[%lld] = %lld is not a row of a dataset of %lld", op, (long long)(start + i),
                   (long long)r, (long long)n);
      free(dst);
      free(copy);
      return NULL;
    }
    memcpy(dst + (size_t)i * row, src + (size_t)r * row, row);
  }
  free(copy);
  tg_tensor *out = tg_from_data(tg_dtype_of(t), nd, shape, dst, nbytes);
  free(dst);
  return out;
}

tg_status tg_dataset_batch(const tg_dataset *d, const int64_t *perm, int64_t start, int64_t count, tg_tensor **x,
                           tg_tensor **y) {
  static const char *op = "tg_dataset_batch";
  if (x) *x = NULL;
  if (y) *y = NULL;
  if (!d || !d->x || !x || (y && !d->y)) {
    tg_set_error(TG_ERR_ARG, "%s: %s", op, !d || !d->x ? "no dataset" : !x ? "x is NULL" : "the dataset has no labels");
    return TG_ERR_ARG;
  }
  if (tg_ndim(d->x) < 1 || tg_shape(d->x, 0) != d->n || (y && (tg_ndim(d->y) < 1 || tg_shape(d->y, 0) != d->n))) {
    tg_set_error(TG_ERR_ARG, "%s: x and y must have n = %lld rows", op, (long long)d->n);
    return TG_ERR_ARG;
  }
  if (start < 0 || count < 0 || start > d->n) {
    tg_set_error(TG_ERR_ARG, "%s: rows [%lld, +%lld) of a dataset of %lld", op, (long long)start, (long long)count,
                 (long long)d->n);
    return TG_ERR_ARG;
  }
  if (count > d->n - start) count = d->n - start;  /* the last batch of an epoch may be short */
  *x = gather_rows(d->x, d->n, perm, start, count, op);
  if (!*x) return tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  if (y && !(*y = gather_rows(d->y, d->n, perm, start, count, op))) {
    tg_free(*x);
    *x = NULL;
    return tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  }
  return TG_OK;
}

/* splitmix64: a fixed 64-bit generator, the same sequence on every machine */
static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void tg_shuffle(int64_t *perm, int64_t n, uint64_t seed) {
  if (!perm || n <= 0) return;
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  uint64_t s = seed;
  for (int64_t i = n - 1; i > 0; i--) {
    /* j uniform in [0, i]: rejection keeps it unbiased */
    uint64_t m = (uint64_t)i + 1, lim = UINT64_MAX - UINT64_MAX % m, r;
    do r = splitmix64(&s);
    while (r >= lim);
    int64_t j = (int64_t)(r % m), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

void tg_dataset_free(tg_dataset *d) {
  if (!d) return;
  tg_free(d->x);
  tg_free(d->y);
  *d = (tg_dataset){0};
}

/* ---- finding a data file ------------------------------------------------------------------------------------ */

tg_status tg_data_find(const char *dir, const char *sub, const char *name, char *out, size_t cap) {
  if (!sub || !name || !out || cap == 0) {
    tg_set_error(TG_ERR_ARG, "tg_data_find: NULL argument or no room for the path");
    return TG_ERR_ARG;
  }
  /* where a user keeps data, then the project's shared data beside the repository */
  const char *env = getenv("TG_DATA");
  char cache[PATH_MAX], dirs[4][PATH_MAX];
  int nd = 0;
  if (dir && snprintf(dirs[nd], PATH_MAX, "%s", dir) < PATH_MAX) nd++;
  if (env && *env && path_join(dirs[nd], env, sub)) nd++;
  if (cache_dir(cache, sizeof cache) && path_join(dirs[nd], cache, sub)) nd++;
  if (path_join(dirs[nd], "../shared/data", sub)) nd++;
  note looked = {0};
  if (!env || !*env) note_add(&looked, "$TG_DATA (not set), ");
  for (int i = 0; i < nd; i++) {
    int w = snprintf(out, cap, "%s/%s", dirs[i], name);
    if (w > 0 && (size_t)w < cap && access(out, R_OK) == 0) return TG_OK;
    note_add(&looked, "%s%s", dirs[i], i + 1 < nd ? ", " : "");
  }
  out[0] = 0;
  tg_set_error(TG_ERR_IO, "tg_data_find: %s not found; looked in %s", name, looked.s);
  return TG_ERR_IO;
}
