/* npy.c — arrays as numpy's .npy files: tg_npy_load and tg_npy_save.
 *
 * A file is the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), the header's length (2 bytes
 * little-endian in 1.0, 4 bytes in 2.0 and 3.0), the header: a Python dict literal padded with spaces and
 * ending in a newline,
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * then the elements, numel * element size bytes, nothing after them. descr is a byte order ('<' little, '>'
 * big, '|' none, '=' the machine's) and a kind and size ('f4'); Fortran order means the elements are laid out
 * with the first axis fastest.
 *
 * The header is user input: a small strict parser reads exactly the three keys (each once, any order) from
 * the header's bytes and never past them; the data's size is computed with overflow checks and must equal
 * what the file holds after the header, before anything is allocated for it. The loaded tensor is a copy in
 * host memory the library owns (converted to this machine's byte order and to C order), wrapped as a
 * realized buffer: nothing runs to load a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/npy.h"
#include "runtime/file_out.h"
#include "tensor/tensor.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NPY_BIG_ENDIAN 1
#else
#define NPY_BIG_ENDIAN 0
#endif

/* numpy refuses headers over 10000 bytes unless told otherwise; a header of tgc's dtypes and 16 axes needs
 * under 500. This bound only keeps a hostile file from making us read megabytes of header text. */
#define NPY_MAX_HEADER (1u << 20)

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* the dtypes tgc shares with numpy: descr's kind and size */
static const struct { char kind; int size; tg_dtype dt; } npy_dtypes[] = {
    {'b', 1, TG_BOOL},   {'i', 1, TG_INT8},   {'i', 2, TG_INT16},   {'i', 4, TG_INT32},   {'i', 8, TG_INT64},
    {'u', 1, TG_UINT8},  {'u', 2, TG_UINT16}, {'u', 4, TG_UINT32},  {'u', 8, TG_UINT64},  {'f', 2, TG_FLOAT16},
    {'f', 4, TG_FLOAT32}, {'f', 8, TG_FLOAT64},
};
#define NPY_NDTYPES (int)(sizeof npy_dtypes / sizeof npy_dtypes[0])

/* records "<op>: <file>: <message>" and returns st */
static tg_status npy_error(tg_status st, const char *op, const char *file, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static tg_status npy_error(tg_status st, const char *op, const char *file, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(st, "%s: %s: %s", op, file, msg);
  return st;
}
#define LOAD_ERR(st, name, ...) npy_error(st, "tg_npy_load", name, __VA_ARGS__)

/* ---- the header ------------------------------------------------------------------------------------------ */

typedef struct npy_header {
  tg_dtype dt;
  size_t esize;
  bool swap;      /* the file's byte order is not this machine's */
  bool fortran;   /* first axis fastest */
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  size_t data_off;  /* where the elements start */
  size_t nbytes;    /* numel * esize */
} npy_header;

/* the prefix (magic, version, header length) from the first bytes of a file of size bytes (avail of them
 * in p, at least min(size, 12)): where the header starts and how long it is, checked against the file */
static tg_status prefix_parse(const char *name, const uint8_t *p, size_t avail, size_t size, size_t *hstart,
                              size_t *hlen) {
  if (size < 10 || memcmp(p, npy_magic, 6) != 0) {
    if (size >= 6 && memcmp(p, npy_magic, 6) == 0)
      return LOAD_ERR(TG_ERR_IO, name, "the file ends (at %zu bytes) inside the 10-byte prefix", size);
    return LOAD_ERR(TG_ERR_IO, name, "not a .npy file (it does not start with \"\\x93NUMPY\"; %zu bytes)", size);
  }
  int major = p[6], minor = p[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return LOAD_ERR(TG_ERR_IO, name, "format version %d.%d; known: 1.0, 2.0, 3.0", major, minor);
  if (major == 1) {
    *hstart = 10;
    *hlen = (size_t)p[8] | (size_t)p[9] << 8;
  } else {
    if (size < 12 || avail < 12)
      return LOAD_ERR(TG_ERR_IO, name, "the file ends (at %zu bytes) inside the 12-byte prefix of version %d.0", size,
                      major);
    *hstart = 12;
    *hlen = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
  }
  if (*hlen > size - *hstart)
    return LOAD_ERR(TG_ERR_IO, name, "the header is %zu bytes long but the file has %zu bytes after the prefix", *hlen,
                    size - *hstart);
  if (*hlen > NPY_MAX_HEADER)
    return LOAD_ERR(TG_ERR_IO, name, "a header of %zu bytes (more than %u: not a real one)", *hlen, NPY_MAX_HEADER);
  return TG_OK;
}

/* a cursor over the header text */
typedef struct hp {
  const char *s;
  size_t n, i;
  const char *name;
  tg_status st;  /* TG_OK until the first error, which is recorded */
} hp;

static bool hfail(hp *p, tg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool hfail(hp *p, tg_status st, const char *fmt, ...) {
  if (p->st) return false;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (st == TG_ERR_ARG) LOAD_ERR(st, p->name, "%s", msg);  /* a well-formed header tgc cannot take */
  else if (p->i < p->n) LOAD_ERR(st, p->name, "bad header at byte %zu of %zu: %s", p->i, p->n, msg);
  else LOAD_ERR(st, p->name, "bad header: it ends (at %zu bytes) where %s", p->n, msg);
  p->st = st;
  return false;
}

static void hws(hp *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

/* skips whitespace; true (and consumes it) if the next character is c */
static bool heat(hp *p, char c) {
  hws(p);
  if (p->i < p->n && p->s[p->i] == c) {
    p->i++;
    return true;
  }
  return false;
}

/* a quoted string (single or double quotes, no escapes, printable ASCII) into out (at most cap - 1 bytes) */
static bool hstring(hp *p, char *out, size_t cap, const char *what) {
  hws(p);
  if (p->i >= p->n || (p->s[p->i] != '\'' && p->s[p->i] != '"')) return hfail(p, TG_ERR_IO, "%s should be a quoted string", what);
  char q = p->s[p->i++];
  size_t k = 0;
  while (p->i < p->n && p->s[p->i] != q) {
    unsigned char c = (unsigned char)p->s[p->i];
    if (c < 0x20 || c > 0x7e || c == '\\') return hfail(p, TG_ERR_IO, "%s holds a byte 0x%02x (no escapes or non-ASCII)", what, c);
    if (k + 1 >= cap) return hfail(p, TG_ERR_IO, "%s is longer than %zu characters", what, cap - 1);
    out[k++] = (char)c;
    p->i++;
  }
  if (p->i >= p->n) return hfail(p, TG_ERR_IO, "%s's closing quote should be", what);
  p->i++;
  out[k] = 0;
  return true;
}

static bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* a Python boolean literal */
static bool hbool(hp *p, bool *out) {
  hws(p);
  const char *s = p->s + p->i;
  size_t left = p->n - p->i;
  if (left >= 4 && !memcmp(s, "True", 4)) *out = true, p->i += 4;
  else if (left >= 5 && !memcmp(s, "False", 5)) *out = false, p->i += 5;
  else return hfail(p, TG_ERR_IO, "'fortran_order' should be True or False");
  if (p->i < p->n && is_word_char(p->s[p->i]))
    return hfail(p, TG_ERR_IO, "'fortran_order' should be True or False");
  return true;
}

/* a non-negative decimal integer (Python 2's numpy wrote a trailing L: accepted), at most INT64_MAX */
static bool hint(hp *p, int64_t *out) {
  hws(p);
  size_t start = p->i;
  uint64_t v = 0;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
    unsigned d = (unsigned)(p->s[p->i] - '0');
    if (v > ((uint64_t)INT64_MAX - d) / 10) return hfail(p, TG_ERR_IO, "a size in 'shape' is larger than 2^63 - 1");
    v = v * 10 + d;
    p->i++;
  }
  if (p->i == start) return hfail(p, TG_ERR_IO, "'shape' should hold non-negative integers");
  if (p->i - start > 1 && p->s[start] == '0') {
    p->i = start;
    return hfail(p, TG_ERR_IO, "a size in 'shape' has a leading zero");
  }
  if (p->i < p->n && (p->s[p->i] == 'L' || p->s[p->i] == 'l')) p->i++;
  if (p->i < p->n && is_word_char(p->s[p->i])) return hfail(p, TG_ERR_IO, "'shape' should hold non-negative integers");
  *out = (int64_t)v;
  return true;
}

/* a tuple of sizes: (), (n,) or (n, m, ...) with an optional trailing comma; (n) is an int, not a tuple */
static bool hshape(hp *p, npy_header *h) {
  if (!heat(p, '(')) return hfail(p, TG_ERR_IO, "'shape' should be a tuple");
  h->ndim = 0;
  if (heat(p, ')')) return true;
  for (;;) {
    int64_t v = 0;
    if (!hint(p, &v)) return false;
    if (h->ndim == TG_MAX_DIMS)
      return hfail(p, TG_ERR_ARG, "'shape' has more than %d axes, tgc's most", TG_MAX_DIMS);
    h->shape[h->ndim++] = v;
    bool comma = heat(p, ',');
    if (heat(p, ')')) {
      if (h->ndim == 1 && !comma) return hfail(p, TG_ERR_IO, "'shape' is (n), an integer; a 1-d shape is (n,)");
      return true;
    }
    if (!comma) return hfail(p, TG_ERR_IO, "',' or ')' should follow a size in 'shape'");
  }
}

/* descr: a byte order and one of tgc's dtypes; numpy's other kinds are TG_ERR_ARG, anything else TG_ERR_IO */
static bool hdescr(hp *p, npy_header *h) {
  hws(p);
  if (p->i < p->n && p->s[p->i] == '[') return hfail(p, TG_ERR_ARG, "a structured dtype (a list of fields) is not supported");
  char d[32];
  if (!hstring(p, d, sizeof d, "'descr'")) return false;
  size_t len = strlen(d);
  char order = d[0], kind = len > 1 ? d[1] : 0;
  int size = 0;
  bool digits = len > 2 && len < 6;
  for (size_t k = 2; digits && k < len; k++) {
    if (d[k] < '0' || d[k] > '9') digits = false;
    else size = size * 10 + (d[k] - '0');
  }
  if (len == 2 && kind == 'O' && strchr("<>|=", order) && order)
    return hfail(p, TG_ERR_ARG, "'descr' '%s': Python objects (pickled) are not read", d);
  if (!strchr("<>|=", order) || !order || !digits || !kind || !strchr("biufcVUSOMm", kind))
    return hfail(p, TG_ERR_IO, "'descr' is '%s', not a numpy dtype ('<f4', '|u1', ...)", d);
  for (int k = 0; k < NPY_NDTYPES; k++) {
    if (npy_dtypes[k].kind != kind || npy_dtypes[k].size != size) continue;
    if (order == '|' && size > 1) return hfail(p, TG_ERR_IO, "'descr' '%s' gives no byte order for a %d-byte type", d, size);
    h->dt = npy_dtypes[k].dt;
    h->esize = (size_t)size;
    bool big = order == '>' || (order == '=' && NPY_BIG_ENDIAN);
    h->swap = size > 1 && order != '|' && big != NPY_BIG_ENDIAN;
    return true;
  }
  if (kind == 'V' && size == 2)
    return hfail(p, TG_ERR_ARG, "'descr' '%s' is raw 2-byte records (ml_dtypes' bfloat16 saves as this): save float32", d);
  if (kind == 'O') return hfail(p, TG_ERR_ARG, "'descr' '%s': Python objects (pickled) are not read", d);
  return hfail(p, TG_ERR_ARG, "'descr' '%s' is a dtype tgc lacks (it has bool, int8..64, uint8..64, float16/32/64)", d);
}

/* the header dict: exactly 'descr', 'fortran_order' and 'shape', each once, in any order */
static tg_status dict_parse(const char *name, const char *s, size_t n, npy_header *h) {
  hp p = {.s = s, .n = n, .name = name};
  bool have[3] = {false, false, false};
  static const char *const keys[3] = {"descr", "fortran_order", "shape"};
  if (!heat(&p, '{')) return hfail(&p, TG_ERR_IO, "the header should be a dict ('{')"), p.st;
  for (;;) {
    if (heat(&p, '}')) break;
    char key[32];
    size_t at = p.i;
    if (!hstring(&p, key, sizeof key, "a key")) return p.st;
    int k = 0;
    while (k < 3 && strcmp(key, keys[k])) k++;
    if (k == 3) {
      p.i = at;
      return hfail(&p, TG_ERR_IO, "an unknown key '%s' (known: descr, fortran_order, shape)", key), p.st;
    }
    if (have[k]) {
      p.i = at;
      return hfail(&p, TG_ERR_IO, "the key '%s' is given twice", key), p.st;
    }
    have[k] = true;
    if (!heat(&p, ':')) return hfail(&p, TG_ERR_IO, "':' should follow the key '%s'", key), p.st;
    bool ok = k == 0 ? hdescr(&p, h) : k == 1 ? hbool(&p, &h->fortran) : hshape(&p, h);
    if (!ok) return p.st;
    if (heat(&p, ',')) continue;
    if (heat(&p, '}')) break;
    return hfail(&p, TG_ERR_IO, "',' or '}' should follow the value of '%s'", key), p.st;
  }
  hws(&p);
  if (p.i < p.n) return hfail(&p, TG_ERR_IO, "only spaces and a newline may follow the dict"), p.st;
  for (int k = 0; k < 3; k++)
    if (!have[k]) return hfail(&p, TG_ERR_IO, "the key '%s' is missing", keys[k]), p.st;
  return TG_OK;
}

/* the whole header from the first bytes of a file of size bytes (avail of them in p, at least
 * min(size, 12 + header length) once the prefix is known; fewer: *need says how many to read and the call
 * is repeated): dtype, shape, order, and a data size that matches the file */
static tg_status header_parse(const char *name, const uint8_t *p, size_t avail, size_t size, npy_header *h,
                              size_t *need) {
  size_t hstart = 0, hlen = 0;
  *need = 0;
  tg_status st = prefix_parse(name, p, avail, size, &hstart, &hlen);
  if (st) return st;
  if (avail < hstart + hlen) {
    *need = hstart + hlen;
    return TG_OK;
  }
  *h = (npy_header){.dt = TG_DTYPE_COUNT};
  if ((st = dict_parse(name, (const char *)p + hstart, hlen, h))) return st;
  h->data_off = hstart + hlen;
  size_t numel = 1;
  for (int d = 0; d < h->ndim; d++) {
    uint64_t s = (uint64_t)h->shape[d];
    if (s && numel > SIZE_MAX / s) numel = SIZE_MAX;  /* saturates: refused below */
    else numel *= (size_t)s;
  }
  size_t left = size - h->data_off;
  char shp[TG_MAX_DIMS * 21 + 4];
  size_t w = 0;
  shp[w++] = '(';
  for (int d = 0; d < h->ndim && w < sizeof shp - 24; d++)
    w += (size_t)snprintf(shp + w, sizeof shp - w, "%s%lld", d ? ", " : "", (long long)h->shape[d]);
  snprintf(shp + w, sizeof shp - w, ")");
  if (numel > left / h->esize || numel * h->esize != left) {
    if (numel <= left / h->esize)
      return LOAD_ERR(TG_ERR_IO, name, "%zu bytes follow the data of the header's %s %s (%zu bytes)",
                      left - numel * h->esize, tg_dtype_name(h->dt), shp, numel * h->esize);
    return LOAD_ERR(TG_ERR_IO, name, "the header's %s %s needs more data than the %zu bytes after the header",
                    tg_dtype_name(h->dt), shp, left);
  }
  h->nbytes = numel * h->esize;
  return TG_OK;
}

/* ---- the data ------------------------------------------------------------------------------------------ */

static void swap_bytes(uint8_t *q, size_t nbytes, size_t es) {
  for (uint8_t *end = q + nbytes; q < end; q += es)
    for (size_t a = 0, z = es - 1; a < z; a++, z--) {
      uint8_t c = q[a];
      q[a] = q[z];
      q[z] = c;
    }
}

/* dst (C order) from src (Fortran order: the first axis fastest) */
static void fortran_to_c(uint8_t *dst, const uint8_t *src, const npy_header *h) {
  int64_t idx[TG_MAX_DIMS] = {0}, fstride[TG_MAX_DIMS];
  int64_t numel = 1;
  for (int d = 0; d < h->ndim; d++) {
    fstride[d] = numel;
    numel *= h->shape[d];
  }
  size_t es = h->esize;
  int64_t off = 0;  /* the Fortran offset of idx, in elements */
  for (int64_t i = 0; i < numel; i++) {
    memcpy(dst + (size_t)i * es, src + (size_t)off * es, es);
    for (int d = h->ndim - 1; d >= 0; d--) {  /* C order: the last axis fastest */
      off += fstride[d];
      if (++idx[d] < h->shape[d]) break;
      off -= fstride[d] * h->shape[d];
      idx[d] = 0;
    }
  }
}

static void free_ctx(void *p) { free(p); }

/* the tensor of a parsed header over its data, which this call owns (64-byte aligned, freed here on
 * failure): converted in place or through a second buffer, then wrapped as the new tensor's buffer */
static tg_tensor *make_tensor(const char *name, const npy_header *h, uint8_t *data) {
  if (h->swap) swap_bytes(data, h->nbytes, h->esize);
  bool permuted = false;
  for (int d = 0, big = 0; d < h->ndim; d++) big += h->shape[d] > 1, permuted = big > 1;
  if (h->fortran && permuted) {
    uint8_t *c = mem_aligned(64, (h->nbytes + 63) / 64 * 64);
    if (!c) {
      free(data);
      LOAD_ERR(TG_ERR_NOMEM, name, "out of memory for %zu bytes", h->nbytes);
      return NULL;
    }
    fortran_to_c(c, data, h);
    free(data);
    data = c;
  }
  tg_tensor *own = tensor_wrap_memory(h->dt, h->ndim, h->shape, data, h->nbytes, free_ctx, data);
  if (!own) return NULL;
  /* tensor_wrap_memory's tensor is the caller's alone; a view of it belongs to the open scope, as tg.h says
   * a new tensor does */
  tg_tensor *t = tg_reshape(own, h->ndim, h->shape);
  tg_free(own);
  return t;
}

static uint8_t *data_alloc(const char *name, size_t nbytes) {
  uint8_t *d = mem_aligned(64, nbytes ? (nbytes + 63) / 64 * 64 : 64);
  if (!d) LOAD_ERR(TG_ERR_NOMEM, name, "out of memory for %zu bytes", nbytes);
  return d;
}

tg_tensor *npy_load_bytes(const char *name, const void *bytes, size_t n) {
  if (!name) name = "(memory)";
  if (!bytes && n) {
    LOAD_ERR(TG_ERR_ARG, name, "NULL bytes");
    return NULL;
  }
  npy_header h;
  size_t need;
  if (header_parse(name, bytes, n, n, &h, &need)) return NULL;
  uint8_t *data = data_alloc(name, h.nbytes);
  if (!data) return NULL;
  if (h.nbytes) memcpy(data, (const uint8_t *)bytes + h.data_off, h.nbytes);
  return make_tensor(name, &h, data);
}

/* reads exactly n bytes at offset off of fd into dst */
static bool read_at(int fd, void *dst, size_t n, size_t off) {
  uint8_t *q = dst;
  while (n) {
    ssize_t r = pread(fd, q, n, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;  /* the file shrank while we read it */
      return false;
    }
    q += r;
    n -= (size_t)r;
    off += (size_t)r;
  }
  return true;
}

tg_tensor *tg_npy_load(const char *path) {
  if (!path) {
    tg_set_error(TG_ERR_ARG, "tg_npy_load: path is NULL");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    LOAD_ERR(TG_ERR_IO, path, "cannot open: %s", strerror(errno));
    return NULL;
  }
  tg_tensor *t = NULL;
  uint8_t first[12], *hdr = NULL, *data = NULL;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    LOAD_ERR(TG_ERR_IO, path, "%s", fstat(fd, &sb) != 0 ? strerror(errno) : "not a regular file");
    goto out;
  }
  if ((uint64_t)sb.st_size > SIZE_MAX) {
    LOAD_ERR(TG_ERR_IO, path, "too large for this machine");
    goto out;
  }
  size_t size = (size_t)sb.st_size, nfirst = size < sizeof first ? size : sizeof first, need;
  npy_header h;
  if (!read_at(fd, first, nfirst, 0)) {
    LOAD_ERR(TG_ERR_IO, path, "read failed: %s", strerror(errno));
    goto out;
  }
  if (header_parse(path, first, nfirst, size, &h, &need)) goto out;
  if (need) {  /* the prefix is read: now the header (its length checked against the file and bounded) */
    if (!(hdr = mem_alloc(need))) {
      LOAD_ERR(TG_ERR_NOMEM, path, "out of memory for a %zu-byte header", need);
      goto out;
    }
    if (!read_at(fd, hdr, need, 0)) {
      LOAD_ERR(TG_ERR_IO, path, "read failed: %s", strerror(errno));
      goto out;
    }
    if (header_parse(path, hdr, need, size, &h, &need)) goto out;
  }
  if (!(data = data_alloc(path, h.nbytes))) goto out;
  if (h.nbytes && !read_at(fd, data, h.nbytes, h.data_off)) {
    LOAD_ERR(TG_ERR_IO, path, "reading %zu bytes of data failed: %s", h.nbytes, strerror(errno));
    goto out;
  }
  t = make_tensor(path, &h, data);
  data = NULL;
out:
  close(fd);
  free(hdr);
  free(data);
  return t;
}

/* ---- save ---------------------------------------------------------------------------------------------- */

/* descr of a dtype numpy has, little-endian; NULL for bfloat16 */
static const char *descr_of(tg_dtype dt) {
  switch (dt) {
  case TG_BOOL: return "|b1";
  case TG_INT8: return "|i1";
  case TG_INT16: return "<i2";
  case TG_INT32: return "<i4";
  case TG_INT64: return "<i8";
  case TG_UINT8: return "|u1";
  case TG_UINT16: return "<u2";
  case TG_UINT32: return "<u4";
  case TG_UINT64: return "<u8";
  case TG_FLOAT16: return "<f2";
  case TG_FLOAT32: return "<f4";
  case TG_FLOAT64: return "<f8";
  default: return NULL;
  }
}

#define SAVE_ERR(st, path, ...) npy_error(st, "tg_npy_save", path, __VA_ARGS__)

/* the prefix and header of version 1.0 for t into out (cap bytes): its length, a multiple of 64 as numpy
 * writes it, so the data starts aligned */
static size_t header_write(char *out, size_t cap, const char *descr, int ndim, const int64_t *shape) {
  char dict[TG_MAX_DIMS * 22 + 96];
  size_t w = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int d = 0; d < ndim; d++)
    w += (size_t)snprintf(dict + w, sizeof dict - w, "%s%lld", d ? ", " : "", (long long)shape[d]);
  w += (size_t)snprintf(dict + w, sizeof dict - w, "%s), }", ndim == 1 ? "," : "");
  size_t total = (10 + w + 1 + 63) / 64 * 64;  /* the prefix, the dict, at least the newline */
  if (total > cap) return 0;
  size_t hlen = total - 10;
  memcpy(out, npy_magic, 6);
  out[6] = 1;
  out[7] = 0;
  out[8] = (char)(hlen & 0xff);
  out[9] = (char)(hlen >> 8);
  memcpy(out + 10, dict, w);
  memset(out + 10 + w, ' ', hlen - w - 1);
  out[total - 1] = '\n';
  return total;
}

tg_status tg_npy_save(const char *path, tg_tensor *t) {
  if (!path) {
    tg_set_error(TG_ERR_ARG, "tg_npy_save: path is NULL");
    return TG_ERR_ARG;
  }
  if (!t) return tg_error_status() ? tg_error_status() : SAVE_ERR(TG_ERR_ARG, path, "the tensor is NULL");
  tg_dtype dt = tg_dtype_of(t);
  const char *descr = descr_of(dt);
  if (!descr)
    return SAVE_ERR(TG_ERR_ARG, path, "numpy has no %s (cast it to float32 with tg_cast first)", tg_dtype_name(dt));
  int ndim = tg_ndim(t);
  int64_t shape[TG_MAX_DIMS];
  if (ndim > 0) memcpy(shape, tg_shape_ptr(t), (size_t)ndim * sizeof *shape);
  size_t nbytes = (size_t)tg_numel(t) * tg_dtype_size(dt);
  char head[TG_MAX_DIMS * 22 + 256];
  size_t hn = header_write(head, sizeof head, descr, ndim, shape);
  if (!hn) return SAVE_ERR(TG_ERR_INTERNAL, path, "the header does not fit");
  uint8_t *data = mem_alloc(nbytes ? nbytes : 1);
  if (!data) return SAVE_ERR(TG_ERR_NOMEM, path, "out of memory for %zu bytes", nbytes);
  tg_status st = tg_to_host(t, data, nbytes);
  if (st) {
    free(data);
    return st;
  }
  if (NPY_BIG_ENDIAN && tg_dtype_size(dt) > 1) swap_bytes(data, nbytes, tg_dtype_size(dt));
  /* written whole or not at all (file_out.h) */
  file_out f;
  if (!file_out_open(&f, path))
    st = SAVE_ERR(f.err == ENOMEM ? TG_ERR_NOMEM : TG_ERR_IO, path, "cannot create %s: %s", file_out_tmp(&f),
                  file_out_why(&f));
  else if (!file_out_write(&f, head, hn) || !file_out_write(&f, data, nbytes) || !file_out_commit(&f, true))
    st = SAVE_ERR(TG_ERR_IO, path, "writing %s failed: %s", file_out_tmp(&f), file_out_why(&f));
  file_out_discard(&f);
  free(data);
  return st;
}
