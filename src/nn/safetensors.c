/* safetensors.c — model state in the safetensors format: save, load into named parameters, read all.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
 * padded with spaces, then the data section; offsets count from its start. Loading maps the file once
 * (read-only, private) and every tensor of it becomes a wrapped buffer pointing into the mapping: nothing is
 * copied, and the mapping goes away when the last of its tensors is freed (a reference count in the map,
 * dropped by the buffers' on_free hook). A tensor whose offset is not aligned to its element size is
 * copied instead, so generated kernels never read a misaligned element.
 *
 * The header is user input: it is parsed by a small strict JSON parser that never reads past the header's N
 * bytes, and every offset, size and shape is checked against the file before a tensor is made. Load is all or
 * nothing: either every parameter takes its new value or none does.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/safetensors.h"
#include "tensor/tensor.h"


#define JSON_MAX_DEPTH 64

static const struct { const char *name; tg_dtype dt; } st_dtypes[] = {
    {"F32", TG_FLOAT32}, {"F16", TG_FLOAT16}, {"BF16", TG_BFLOAT16}, {"F64", TG_FLOAT64}, {"I8", TG_INT8},
    {"I16", TG_INT16},   {"I32", TG_INT32},   {"I64", TG_INT64},     {"U8", TG_UINT8},    {"U16", TG_UINT16},
    {"U32", TG_UINT32},  {"U64", TG_UINT64},  {"BOOL", TG_BOOL},
};
#define NDTYPES (int)(sizeof st_dtypes / sizeof st_dtypes[0])

const char *st_dtype_name(tg_dtype dt) {
  for (int i = 0; i < NDTYPES; i++)
    if (st_dtypes[i].dt == dt) return st_dtypes[i].name;
  return NULL;
}

/* ---- the mapping, shared by the tensors made from it ------------------------------------------------- */

typedef struct st_map {
  void *base;
  size_t len;
  int refcnt;
  bool heap;  /* a copy in memory (st_read_bytes), not a file mapping */
} st_map;

static void map_ref(st_map *m) { __atomic_add_fetch(&m->refcnt, 1, __ATOMIC_RELAXED); }

static void map_unref(void *ctx) {
  st_map *m = ctx;
  if (!m || __atomic_sub_fetch(&m->refcnt, 1, __ATOMIC_ACQ_REL) > 0) return;
  if (m->heap) free(m->base);
  else munmap(m->base, m->len);
  free(m);
}

/* ---- a parsed file ------------------------------------------------------------------------------------ */

typedef struct st_entry {
  char *name;
  tg_dtype dt;
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  uint64_t begin, end;  /* in the data section */
} st_entry;

typedef struct st_file {
  const char *path;
  st_map *map;
  const uint8_t *data;  /* the data section */
  uint64_t data_len;
  st_entry *e;
  int n, cap;
  /* names -> entry index + 1, open addressing, to refuse duplicates without a quadratic scan */
  int *slots;
  size_t nslots;
} st_file;

static void file_close(st_file *f) {
  for (int i = 0; i < f->n; i++) free(f->e[i].name);
  free(f->e);
  free(f->slots);
  if (f->map) map_unref(f->map);
  *f = (st_file){0};
}

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* the slot of name: holds its entry index + 1, or 0 where it would go */
static int *slot_of(const st_file *f, const char *name) {
  size_t mask = f->nslots - 1, j = name_hash(name) & mask;
  while (f->slots[j] && strcmp(f->e[f->slots[j] - 1].name, name)) j = (j + 1) & mask;
  return &f->slots[j];
}

static const st_entry *file_find(const st_file *f, const char *name) {
  if (!f->nslots) return NULL;
  int k = *slot_of(f, name);
  return k ? &f->e[k - 1] : NULL;
}

/* records an error "safetensors: <path>: <message>" */
tg_status st_error(tg_status st, const char *path, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  tg_set_error(st, "safetensors: %s: %s", path, msg);
  return st;
}

/* ---- a strict JSON parser over the header's bytes ------------------------------------------------------ */

typedef struct jparse {
  const char *s;
  size_t n, i;
  const char *path;
  bool failed;
} jparse;

static bool jfail(jparse *p, const char *what) {
  if (!p->failed) {
    if (p->i < p->n)
      st_error(TG_ERR_IO, p->path, "bad JSON in the header at byte %zu of %zu: %s", p->i, p->n, what);
    else
      st_error(TG_ERR_IO, p->path, "bad JSON in the header: it ends (at %zu bytes) where %s", p->n, what);
  }
  p->failed = true;
  return false;
}

static void jws(jparse *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

/* skips whitespace; true (and consumes it) if the next byte is c */
static bool jeat(jparse *p, char c) {
  jws(p);
  if (p->i < p->n && p->s[p->i] == c) {
    p->i++;
    return true;
  }
  return false;
}

static bool jexpect(jparse *p, char c, const char *what) { return jeat(p, c) || jfail(p, what); }

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool jhex4(jparse *p, unsigned *v) {
  if (p->n - p->i < 4) return jfail(p, "a \\u escape needs 4 hex digits");
  *v = 0;
  for (int k = 0; k < 4; k++) {
    int h = hexval(p->s[p->i + (size_t)k]);
    if (h < 0) return jfail(p, "a \\u escape needs 4 hex digits");
    *v = *v * 16 + (unsigned)h;
  }
  p->i += 4;
  return true;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* a string; *out (if out) is the decoded, NUL-terminated text, which may not hold a NUL itself */
static bool jstring(jparse *p, char **out) {
  if (out) *out = NULL;
  if (!jexpect(p, '"', "expected a string")) return false;
  /* decoded text is never longer than its escaped form */
  size_t start = p->i, end = start;
  while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->n) {
    p->i = p->n;
    return jfail(p, "a string is not closed");
  }
  char *o = NULL;
  size_t k = 0;
  if (out && !(o = mem_alloc(end - start + 1))) {
    st_error(TG_ERR_NOMEM, p->path, "out of memory parsing the header");
    p->failed = true;
    return false;
  }
  while (p->i < end) {
    unsigned char c = (unsigned char)p->s[p->i];
    if (c < 0x20) { free(o); return jfail(p, "a control character inside a string"); }
    if (c != '\\') {
      if (o) o[k++] = (char)c;
      p->i++;
      continue;
    }
    char esc = p->s[++p->i];  /* in bounds: the scan above stopped after every escape's second byte */
    p->i++;
    unsigned cp;
    switch (esc) {
      case '"': cp = '"'; break;
      case '\\': cp = '\\'; break;
      case '/': cp = '/'; break;
      case 'b': cp = '\b'; break;
      case 'f': cp = '\f'; break;
      case 'n': cp = '\n'; break;
      case 'r': cp = '\r'; break;
      case 't': cp = '\t'; break;
      case 'u':
        if (!jhex4(p, &cp) || p->i > end) { free(o); return p->i > end ? jfail(p, "a \\u escape runs past the string") : false; }
        if (cp >= 0xDC00 && cp <= 0xDFFF) { free(o); return jfail(p, "a lone low surrogate"); }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          unsigned lo;
          if (end - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') { free(o); return jfail(p, "a high surrogate without its low half"); }
          p->i += 2;
          if (!jhex4(p, &lo)) { free(o); return false; }
          if (lo < 0xDC00 || lo > 0xDFFF) { free(o); return jfail(p, "a high surrogate without its low half"); }
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0) { free(o); return jfail(p, "a NUL character in a string"); }
        break;
      default: free(o); p->i--; return jfail(p, "an unknown escape in a string");
    }
    if (o) k += put_utf8(o + k, cp);
  }
  p->i = end + 1;
  if (o) {
    o[k] = 0;
    *out = o;
  }
  return true;
}

/* a non-negative integer without sign, fraction or exponent, at most max */
static bool juint(jparse *p, uint64_t max, uint64_t *v) {
  jws(p);
  if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "expected a non-negative integer");
  if (p->s[p->i] == '0' && p->i + 1 < p->n && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9')
    return jfail(p, "a number with a leading zero");
  uint64_t x = 0;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
    unsigned d = (unsigned)(p->s[p->i] - '0');
    if (x > (max - d) / 10) return jfail(p, "an integer too large");
    x = x * 10 + d;
    p->i++;
  }
  if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E'))
    return jfail(p, "expected an integer, found a fraction or exponent");
  *v = x;
  return true;
}

static bool jdigits(jparse *p) {
  size_t s = p->i;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  return p->i > s || jfail(p, "expected a digit");
}

/* any JSON value, checked and thrown away (the __metadata__ and fields we do not know) */
static bool jskip(jparse *p, int depth) {
  if (depth > JSON_MAX_DEPTH) return jfail(p, "values nested too deeply");
  jws(p);
  if (p->i >= p->n) return jfail(p, "a value was expected");
  char c = p->s[p->i];
  if (c == '"') return jstring(p, NULL);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    p->i++;
    if (jeat(p, close)) return true;
    do {
      if (c == '{' && (!jstring(p, NULL) || !jexpect(p, ':', "expected ':' after a key"))) return false;
      if (!jskip(p, depth + 1)) return false;
    } while (jeat(p, ','));
    return jexpect(p, close, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
  }
  static const char *const lits[] = {"true", "false", "null"};
  for (int k = 0; k < 3; k++) {
    size_t l = strlen(lits[k]);
    if (p->n - p->i >= l && !memcmp(p->s + p->i, lits[k], l)) {
      p->i += l;
      return true;
    }
  }
  if (c == '-') p->i++;
  if (p->i < p->n && p->s[p->i] == '0') p->i++;
  else if (!jdigits(p)) return false;
  if (p->i < p->n && p->s[p->i] == '.') { p->i++; if (!jdigits(p)) return false; }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    if (!jdigits(p)) return false;
  }
  return true;
}

static bool file_add(st_file *f, st_entry *e) {
  if (f->n == f->cap) {
    if (f->cap >= (1 << 28)) return false;
    int nc = f->cap ? f->cap * 2 : 16;
    st_entry *ne = mem_realloc(f->e, (size_t)nc * sizeof *ne);
    if (!ne) return false;
    f->e = ne;
    f->cap = nc;
  }
  if ((size_t)(f->n + 1) * 2 > f->nslots) {
    size_t ns = f->nslots ? f->nslots * 2 : 64;
    int *s = mem_calloc(ns, sizeof *s);
    if (!s) return false;
    free(f->slots);
    f->slots = s;
    f->nslots = ns;
    for (int i = 0; i < f->n; i++) *slot_of(f, f->e[i].name) = i + 1;
  }
  f->e[f->n++] = *e;
  *slot_of(f, e->name) = f->n;
  return true;
}

/* one tensor's description; e->name is set by the caller */
static bool jentry(jparse *p, st_entry *e) {
  if (!jexpect(p, '{', "expected '{' to open a tensor's description")) return false;
  bool has_dt = false, has_shape = false, has_off = false;
  if (jeat(p, '}')) goto done;
  do {
    char *key = NULL;
    if (!jstring(p, &key)) return false;
    bool ok = jexpect(p, ':', "expected ':' after a key");
    if (ok && !strcmp(key, "dtype")) {
      char *dn = NULL;
      size_t at = p->i;
      ok = !has_dt && jstring(p, &dn);
      has_dt = true;
      if (ok) {
        int k = 0;
        while (k < NDTYPES && strcmp(st_dtypes[k].name, dn)) k++;
        if (k == NDTYPES) {
          st_error(TG_ERR_IO, p->path, "tensor '%s' has an unknown dtype '%.64s' (known: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL)", e->name, dn);
          p->failed = true;
          ok = false;
        } else {
          e->dt = st_dtypes[k].dt;
        }
      } else if (!p->failed) {
        p->i = at;
        jfail(p, "a second \"dtype\"");
      }
      free(dn);
    } else if (ok && !strcmp(key, "shape")) {
      ok = !has_shape || jfail(p, "a second \"shape\"");
      has_shape = true;
      ok = ok && jexpect(p, '[', "expected '[' to open a shape");
      e->ndim = 0;
      if (ok && !jeat(p, ']')) {
        do {
          uint64_t v;
          if (e->ndim == TG_MAX_DIMS) { ok = jfail(p, "a shape with more than 16 dimensions"); break; }
          if (!(ok = juint(p, INT64_MAX, &v))) break;
          e->shape[e->ndim++] = (int64_t)v;
        } while (jeat(p, ','));
        ok = ok && jexpect(p, ']', "expected ',' or ']' in a shape");
      }
    } else if (ok && !strcmp(key, "data_offsets")) {
      ok = !has_off || jfail(p, "a second \"data_offsets\"");
      has_off = true;
      ok = ok && jexpect(p, '[', "expected '[' to open data_offsets") && juint(p, UINT64_MAX, &e->begin) &&
           jexpect(p, ',', "expected ',' between the two data_offsets") && juint(p, UINT64_MAX, &e->end) &&
           jexpect(p, ']', "expected ']' after the two data_offsets");
    } else if (ok) {
      ok = jskip(p, 1);
    }
    free(key);
    if (!ok) return false;
  } while (jeat(p, ','));
  if (!jexpect(p, '}', "expected ',' or '}' in a tensor's description")) return false;
done:
  if (!has_dt || !has_shape || !has_off) {
    st_error(TG_ERR_IO, p->path, "tensor '%s' lacks its \"%s\"", e->name,
             !has_dt ? "dtype" : !has_shape ? "shape" : "data_offsets");
    p->failed = true;
    return false;
  }
  return true;
}

static bool parse_header(st_file *f, const char *hdr, size_t n) {
  jparse p = {.s = hdr, .n = n, .path = f->path};
  if (!jexpect(&p, '{', "the header must be a JSON object")) return false;
  if (!jeat(&p, '}')) {
    do {
      st_entry e = {0};
      if (!jstring(&p, &e.name)) return false;
      if (!jexpect(&p, ':', "expected ':' after a name")) { free(e.name); return false; }
      if (!strcmp(e.name, "__metadata__")) {
        free(e.name);
        if (!jskip(&p, 1)) return false;
        continue;
      }
      if (file_find(f, e.name)) {
        st_error(TG_ERR_IO, f->path, "tensor '%s' appears twice in the header", e.name);
        free(e.name);
        return false;
      }
      if (!jentry(&p, &e)) { free(e.name); return false; }
      if (!file_add(f, &e)) {
        free(e.name);
        st_error(TG_ERR_NOMEM, f->path, "out of memory parsing the header");
        return false;
      }
    } while (jeat(&p, ','));
    if (!jexpect(&p, '}', "expected ',' or '}' after a tensor")) return false;
  }
  jws(&p);
  if (p.i != p.n) return jfail(&p, "bytes after the header's object (only spaces may pad it)");
  return true;
}

static int cmp_begin(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* sizes and offsets against the file: every tensor inside the data section, sized as its shape says, no
 * two overlapping; bool data must hold 0 or 1 only (any other byte is not a C bool) */
static bool check_entries(st_file *f) {
  char sb[256];
  for (int i = 0; i < f->n; i++) {
    st_entry *e = &f->e[i];
    uint64_t numel = 1, es = tg_dtype_size(e->dt);
    bool over = false;
    for (int d = 0; d < e->ndim; d++) {
      uint64_t s = (uint64_t)e->shape[d];
      if (s && numel > UINT64_MAX / s) over = true;
      else numel *= s;
    }
    for (int d = 0; d < e->ndim; d++)
      if (!e->shape[d]) numel = 0, over = false;
    if (over || numel > UINT64_MAX / es || numel * es > (uint64_t)INT64_MAX) {
      st_error(TG_ERR_IO, f->path, "tensor '%s' has a shape %s too large", e->name, shape_str(sb, sizeof sb, e->ndim, e->shape));
      return false;
    }
    if (e->begin > e->end) {
      st_error(TG_ERR_IO, f->path, "tensor '%s' has data_offsets [%llu, %llu] that run backwards", e->name,
               (unsigned long long)e->begin, (unsigned long long)e->end);
      return false;
    }
    if (e->end - e->begin != numel * es) {
      st_error(TG_ERR_IO, f->path, "tensor '%s': %s of shape %s needs %llu bytes, its data_offsets [%llu, %llu] hold %llu",
               e->name, tg_dtype_name(e->dt), shape_str(sb, sizeof sb, e->ndim, e->shape),
               (unsigned long long)(numel * es), (unsigned long long)e->begin, (unsigned long long)e->end,
               (unsigned long long)(e->end - e->begin));
      return false;
    }
    if (e->end > f->data_len) {
      st_error(TG_ERR_IO, f->path, "truncated: tensor '%s' has data_offsets [%llu, %llu] but the data section holds %llu bytes",
               e->name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)f->data_len);
      return false;
    }
  }
  if (f->n > 1) {
    const st_entry **order = mem_alloc((size_t)f->n * sizeof *order);
    if (!order) {
      st_error(TG_ERR_NOMEM, f->path, "out of memory checking offsets");
      return false;
    }
    for (int i = 0; i < f->n; i++) order[i] = &f->e[i];
    qsort(order, (size_t)f->n, sizeof *order, cmp_begin);
    const st_entry *prev = NULL;
    for (int i = 0; i < f->n; i++) {
      if (order[i]->begin == order[i]->end) continue;  /* empty tensors take no bytes */
      if (prev && order[i]->begin < prev->end) {
        st_error(TG_ERR_IO, f->path, "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", prev->name,
                 (unsigned long long)prev->begin, (unsigned long long)prev->end, order[i]->name,
                 (unsigned long long)order[i]->begin, (unsigned long long)order[i]->end);
        free(order);
        return false;
      }
      prev = order[i];
    }
    free(order);
  }
  for (int i = 0; i < f->n; i++) {
    const st_entry *e = &f->e[i];
    if (e->dt != TG_BOOL) continue;
    for (uint64_t k = e->begin; k < e->end; k++)
      if (f->data[k] > 1) {
        st_error(TG_ERR_IO, f->path, "tensor '%s' is BOOL but holds the byte %u at element %llu", e->name,
                 f->data[k], (unsigned long long)(k - e->begin));
        return false;
      }
  }
  return true;
}

/* checks the header and entries of f's mapped bytes (at least 8); on failure f is closed and the error set */
static tg_status file_parse(st_file *f) {
  const char *path = f->path;
  const uint8_t *b = f->map->base;
  uint64_t size = f->map->len, hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | b[i];
  if (hlen > size - 8) {
    st_error(TG_ERR_IO, path, "the header length %llu runs past the end of the file (%llu bytes)", (unsigned long long)hlen,
             (unsigned long long)size);
    file_close(f);
    return TG_ERR_IO;
  }
  f->data = b + 8 + hlen;
  f->data_len = size - 8 - hlen;
  if (!parse_header(f, (const char *)b + 8, (size_t)hlen) || !check_entries(f)) {
    tg_status st = tg_error_status();
    file_close(f);
    return st ? st : TG_ERR_IO;
  }
  return TG_OK;
}

/* maps and checks a file; on failure f is closed and the error set */
static tg_status file_open(st_file *f, const char *path) {
  *f = (st_file){.path = path};
  if (ST_BIG_ENDIAN) return st_error(TG_ERR_IO, path, "loading on a big-endian machine is not supported");
  /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below as not a regular file) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return st_error(TG_ERR_IO, path, "cannot open: %s", strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int err = errno;
    close(fd);
    return st_error(TG_ERR_IO, path, "cannot stat: %s", strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return st_error(TG_ERR_IO, path, "not a regular file");
  }
  uint64_t size = (uint64_t)sb.st_size;
  if (size < 8) {
    close(fd);
    return st_error(TG_ERR_IO, path, "the file has %llu bytes, too few for the 8-byte header length", (unsigned long long)size);
  }
  if (size > SIZE_MAX) {
    close(fd);
    return st_error(TG_ERR_IO, path, "the file is too large to map");
  }
  st_map *m = mem_alloc(sizeof *m);
  if (!m) {
    close(fd);
    return st_error(TG_ERR_NOMEM, path, "out of memory");
  }
  void *base = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    free(m);
    return st_error(TG_ERR_IO, path, "cannot map: %s", strerror(err));
  }
  *m = (st_map){.base = base, .len = (size_t)size, .refcnt = 1};
  f->map = m;
  return file_parse(f);
}

/* a copy of n bytes as a file: f->map owns the copy */
static tg_status file_from_bytes(st_file *f, const char *name, const void *bytes, size_t n) {
  *f = (st_file){.path = name};
  if (ST_BIG_ENDIAN) return st_error(TG_ERR_IO, name, "loading on a big-endian machine is not supported");
  st_map *m = mem_alloc(sizeof *m);
  void *copy = mem_alloc(n ? n : 1);
  if (!m || !copy) {
    free(m);
    free(copy);
    return st_error(TG_ERR_NOMEM, name, "out of memory");
  }
  if (n) memcpy(copy, bytes, n);
  *m = (st_map){.base = copy, .len = n, .refcnt = 1, .heap = true};
  f->map = m;
  if (n < 8) {
    file_close(f);
    return st_error(TG_ERR_IO, name, "the file has %zu bytes, too few for the 8-byte header length", n);
  }
  return file_parse(f);
}

/* the tensor of entry e (caller-owned, never scoped): the mapped bytes, or a copy if they are misaligned */
static tg_tensor *entry_tensor(st_file *f, const st_entry *e) {
  const uint8_t *ptr = f->data + e->begin;
  size_t nbytes = (size_t)(e->end - e->begin), es = tg_dtype_size(e->dt);
  if ((uintptr_t)ptr % es == 0) {
    map_ref(f->map);
    return tensor_wrap_memory(e->dt, e->ndim, e->shape, (void *)ptr, nbytes, map_unref, f->map);
  }
  /* misaligned for its dtype (a file written by a tool that packs tensors): a private aligned copy */
  size_t cap = (nbytes + 63) / 64 * 64;
  void *copy = mem_aligned(64, cap ? cap : 64);
  if (!copy) {
    st_error(TG_ERR_NOMEM, f->path, "out of memory copying tensor '%s'", e->name);
    return NULL;
  }
  memcpy(copy, ptr, nbytes);
  return tensor_wrap_memory(e->dt, e->ndim, e->shape, copy, nbytes, free, copy);
}

/* ---- the public calls ----------------------------------------------------------------------------------- */

/* every tensor of an opened file as a new parameter list; closes f */
static tg_params *file_read(st_file *f) {
  tg_params *p = tg_params_new();
  for (int i = 0; p && i < f->n; i++) {
    tg_tensor *t = entry_tensor(f, &f->e[i]);
    tg_status st = t ? tg_params_add(p, f->e[i].name, t) : TG_ERR_NOMEM;
    tg_free(t);
    if (st != TG_OK) {
      tg_params_free(p);
      p = NULL;
    }
  }
  file_close(f);
  return p;
}

tg_params *tg_safetensors_read(const char *path) {
  if (!path) {
    tg_set_error(TG_ERR_ARG, "tg_safetensors_read: path is NULL");
    return NULL;
  }
  st_file f;
  return file_open(&f, path) == TG_OK ? file_read(&f) : NULL;
}

tg_params *st_read_bytes(const char *name, const void *bytes, size_t n) {
  st_file f;
  return file_from_bytes(&f, name, bytes, n) == TG_OK ? file_read(&f) : NULL;
}

/* a message that grows up to the error buffer's size, then ends in "..." */
typedef struct msgbuf { char s[280]; size_t k; bool full; } msgbuf;

static void msg_add(msgbuf *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg_add(msgbuf *m, const char *fmt, ...) {
  if (m->full) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(m->s + m->k, sizeof m->s - m->k, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= sizeof m->s - m->k - 4) {
    m->full = true;
    size_t at = m->k < sizeof m->s - 4 ? m->k : sizeof m->s - 4;
    memcpy(m->s + at, "...", 4);
    m->k = at + 3;
  } else {
    m->k += (size_t)w;
  }
}

/* the tensors of an opened file into the parameters of p; closes f */
static tg_status file_load(st_file *f, tg_params *p, bool allow_partial) {
  const char *path = f->path;
  tg_status st = TG_OK;
  int np = tg_params_count(p);
  /* every difference, reported together */
  msgbuf mm = {0}, mu = {0}, mx = {0};
  int nmissing = 0, nunexpected = 0, nmismatch = 0;
  char a[256], b[256];
  for (int i = 0; i < np; i++) {
    const char *name = tg_params_name(p, i);
    tg_tensor *t = tg_params_tensor(p, i);
    const st_entry *e = file_find(f, name);
    if (!e) {
      if (!allow_partial) msg_add(&mm, "%s'%s'", nmissing++ ? ", " : "", name);
      continue;
    }
    bool same = e->dt == tg_dtype_of(t) && e->ndim == tg_ndim(t);
    for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == tg_shape_ptr(t)[d];
    if (!same)
      msg_add(&mx, "%s'%s' is %s %s in the file, %s %s in the model", nmismatch++ ? "; " : "", name,
              tg_dtype_name(e->dt), shape_str(a, sizeof a, e->ndim, e->shape), tg_dtype_name(tg_dtype_of(t)),
              shape_str(b, sizeof b, tg_ndim(t), tg_shape_ptr(t)));
  }
  if (!allow_partial)
    for (int i = 0; i < f->n; i++)
      if (!tg_params_find(p, f->e[i].name)) msg_add(&mu, "%s'%s'", nunexpected++ ? ", " : "", f->e[i].name);
  if (nmissing || nunexpected || nmismatch) {
    char nums[3][48];
    snprintf(nums[0], sizeof nums[0], "%d missing (", nmissing);
    snprintf(nums[1], sizeof nums[1], "%d unexpected (", nunexpected);
    snprintf(nums[2], sizeof nums[2], "%d mismatched (", nmismatch);
    st_error(TG_ERR_ARG, path, "does not fit the parameters: %s%s%s%s%s%s%s%s%s", nmissing ? nums[0] : "",
             nmissing ? mm.s : "", nmissing ? ") " : "", nunexpected ? nums[1] : "", nunexpected ? mu.s : "",
             nunexpected ? ") " : "", nmismatch ? nums[2] : "", nmismatch ? mx.s : "", nmismatch ? ")" : "");
    file_close(f);
    return TG_ERR_ARG;
  }
  /* all tensors first, then all assignments: a failure leaves every parameter as it was */
  tg_tensor **vals = mem_calloc(np > 0 ? (size_t)np : 1, sizeof *vals);
  if (!vals) {
    file_close(f);
    return st_error(TG_ERR_NOMEM, path, "out of memory");
  }
  for (int i = 0; i < np && st == TG_OK; i++) {
    const st_entry *e = file_find(f, tg_params_name(p, i));
    if (e && !(vals[i] = entry_tensor(f, e))) st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  }
  for (int i = 0; i < np && st == TG_OK; i++)
    if (vals[i]) st = tg_assign(tg_params_tensor(p, i), vals[i]);  /* cannot fail: shapes and dtypes checked */
  for (int i = 0; i < np; i++) tg_free(vals[i]);
  free(vals);
  file_close(f);
  return st;
}

tg_status tg_safetensors_load(const char *path, tg_params *p, bool allow_partial) {
  if (!path || !p) {
    tg_set_error(TG_ERR_ARG, "tg_safetensors_load: %s is NULL", path ? "the parameter list" : "path");
    return TG_ERR_ARG;
  }
  st_file f;
  tg_status st = file_open(&f, path);
  return st == TG_OK ? file_load(&f, p, allow_partial) : st;
}

tg_status st_load_bytes(const char *name, const void *bytes, size_t n, tg_params *p, bool allow_partial) {
  if (!p) {
    tg_set_error(TG_ERR_ARG, "tg_safetensors_load: the parameter list is NULL");
    return TG_ERR_ARG;
  }
  st_file f;
  tg_status st = file_from_bytes(&f, name, bytes, n);
  return st == TG_OK ? file_load(&f, p, allow_partial) : st;
}
