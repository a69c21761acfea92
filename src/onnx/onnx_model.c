/* onnx_model.c — parses an ONNX ModelProto (onnx.proto, onnx 1.x) from its wire format into onnx_model.h's
 * structs: the graph with its nodes, attributes (nested tensors and graphs), initializers (raw_data, the typed
 * fields, external data files) and the types of its inputs and outputs.
 *
 * Every message is read twice: a first pass checks the wire format and counts the repeated fields, a second
 * fills arrays of exactly that size in the model's arena. Counts are bounded by the bytes that hold them, and
 * tensor sizes by the bytes that hold their data, so a hostile file cannot make us allocate much more than
 * its own size. */
#include "onnx_model.h"

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

#include "protobuf.h"
#include "uop/uop.h"

/* ---- the arena: chunks freed together -------------------------------------------------------------------- */

typedef struct onnx_arena {
  struct onnx_arena *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} onnx_arena;

/* n zeroed bytes aligned to 16 from the arena at *a, or NULL */
static void *arena_alloc(onnx_arena **a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (!*a || (*a)->cap - (*a)->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    onnx_arena *c = mem_alloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = *a;
    c->used = 0;
    c->cap = cap;
    *a = c;
  }
  void *p = (*a)->data + (*a)->used;
  (*a)->used += n;
  memset(p, 0, n);
  return p;
}

void onnx_arena_free(onnx_arena *a) {
  while (a) {
    onnx_arena *n = a->next;
    free(a);
    a = n;
  }
}

/* ---- mapped and copied bytes ----------------------------------------------------------------------------- */

void onnx_map_ref(onnx_map *m) { __atomic_add_fetch(&m->refcnt, 1, __ATOMIC_RELAXED); }

void onnx_map_unref(void *p) {
  onnx_map *m = p;
  if (!m || __atomic_sub_fetch(&m->refcnt, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (m->heap) free(m->base);
  else if (m->len) munmap(m->base, m->len);
  free(m);
}

onnx_map *onnx_map_copy(const void *data, size_t n) {
  onnx_map *m = mem_calloc(1, sizeof *m);
  void *copy = mem_aligned(64, n ? (n + 63) / 64 * 64 : 64);
  if (!m || !copy) {
    free(m);
    free(copy);
    tg_set_error(TG_ERR_NOMEM, "onnx: out of memory copying %zu bytes", n);
    return NULL;
  }
  if (n) memcpy(copy, data, n);
  *m = (onnx_map){.base = copy, .len = n, .refcnt = 1, .heap = true};
  return m;
}

onnx_map *onnx_map_file(const char *path, const char *what) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below as not a regular file) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    tg_set_error(TG_ERR_IO, "onnx: %s '%s': cannot open: %s", what, path, strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    tg_set_error(TG_ERR_IO, "onnx: %s '%s': not a regular file", what, path);
    return NULL;
  }
  if ((uint64_t)sb.st_size > SIZE_MAX / 2) {
    close(fd);
    tg_set_error(TG_ERR_IO, "onnx: %s '%s': too large to map", what, path);
    return NULL;
  }
  onnx_map *m = mem_calloc(1, sizeof *m);
  if (!m) {
    close(fd);
    return NULL;
  }
  static uint8_t empty[1];
  *m = (onnx_map){.base = empty, .len = (size_t)sb.st_size, .refcnt = 1};   /* never NULL: NULL + 0 is undefined */
  if (m->len) {
    m->base = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->base == MAP_FAILED) {
      int err = errno;
      close(fd);
      free(m);
      tg_set_error(TG_ERR_IO, "onnx: %s '%s': cannot map: %s", what, path, strerror(err));
      return NULL;
    }
  }
  close(fd);
  return m;
}

/* ---- types ----------------------------------------------------------------------------------------------- */

static const char *const type_names[] = {
    "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool", "float16",
    "double", "uint32", "uint64", "complex64", "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz",
    "float8e5m2", "float8e5m2fnuz", "uint4", "int4", "float4e2m1"};

const char *onnx_type_name(int32_t t) {
  return t >= 0 && t < (int32_t)(sizeof type_names / sizeof *type_names) ? type_names[t] : "unknown";
}

bool onnx_dtype_to_tg(int32_t t, tg_dtype *out) {
  static const int map[] = {-1, TG_FLOAT32, TG_UINT8, TG_INT8, TG_UINT16, TG_INT16, TG_INT32, TG_INT64, -1, TG_BOOL,
                            TG_FLOAT16, TG_FLOAT64, TG_UINT32, TG_UINT64, -1, -1, TG_BFLOAT16};
  if (t < 0 || t >= (int32_t)(sizeof map / sizeof *map) || map[t] < 0) return false;
  if (out) *out = (tg_dtype)map[t];
  return true;
}

/* ---- the parse state ------------------------------------------------------------------------------------- */

typedef struct parser {
  onnx_arena **arena;
  pb_err err;
  tg_status st;              /* the code for err: TG_ERR_IO unless set otherwise */
  onnx_map *file;
  const char *name;          /* the file, for messages */
  const char *dir;           /* external data; NULL: refused */
  onnx_map **maps;           /* where external data maps go (the model's list) */
} parser;

/* records a failure that is not malformed bytes (unsupported, out of memory) with its own code */
static bool fail_st(parser *ps, tg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail_st(parser *ps, tg_status st, const char *fmt, ...) {
  if (!pb_failed(&ps->err)) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err.msg, sizeof ps->err.msg, fmt, ap);
    va_end(ap);
    ps->st = st;
  }
  return false;
}
/* snprintf for context strings, which are cut at the buffer's size on purpose */
static void ctxf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void ctxf(char *buf, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, n, fmt, ap);
  va_end(ap);
}

#define FAIL(ps, ...) fail_st(ps, TG_ERR_IO, __VA_ARGS__)

static void *palloc(parser *ps, size_t n) {
  void *p = arena_alloc(ps->arena, n);
  if (!p) fail_st(ps, TG_ERR_NOMEM, "out of memory (%zu bytes)", n);
  return p;
}

/* an array of n elements of size es, n counted from the file's bytes */
static void *palloc_n(parser *ps, int64_t n, size_t es) {
  if (n < 0 || (uint64_t)n > SIZE_MAX / 2 / es) return FAIL(ps, "a count of %lld is too large", (long long)n), NULL;
  return palloc(ps, (size_t)n * es + 1);
}

/* a length-delimited field as a NUL-terminated string in the arena (a NUL inside is refused) */
static const char *pstr(parser *ps, const pb_field *f, const char *what) {
  if (f->wire != PB_LEN) return FAIL(ps, "%s: a string with wire type %d", what, f->wire), NULL;
  if (memchr(f->data, 0, f->len)) return FAIL(ps, "%s: a string with a NUL byte inside", what), NULL;
  char *s = palloc(ps, f->len + 1);
  if (s && f->len) memcpy(s, f->data, f->len);
  return s;
}

static bool want_wire(parser *ps, const pb_field *f, int wire, const char *what) {
  if (f->wire == wire) return true;
  return FAIL(ps, "%s: field %u has wire type %d, expected %d", what, f->num, f->wire, wire);
}

/* a repeated int64 (varint) field's values appended to vals (count so far in *n, capacity cap) */
static bool get_ints(parser *ps, const pb_field *f, int64_t *vals, int64_t cap, int64_t *n) {
  int64_t got = 0;
  uint64_t *tmp = (uint64_t *)(vals + *n);   /* int64 and uint64 share a representation */
  if (!pb_get_scalar(&ps->err, f, PB_VARINT, tmp, cap - *n, &got)) return false;
  for (int64_t i = 0; i < got; i++) vals[*n + i] = (int64_t)tmp[i];
  *n += got;
  return true;
}

static bool get_floats(parser *ps, const pb_field *f, float *vals, int64_t cap, int64_t *n) {
  int64_t cnt = pb_count_scalar(&ps->err, f, PB_I32);
  if (cnt < 0) return false;
  uint64_t *tmp = mem_alloc((size_t)(cnt ? cnt : 1) * sizeof *tmp);
  if (!tmp) return fail_st(ps, TG_ERR_NOMEM, "out of memory");
  int64_t got = 0;
  bool ok = pb_get_scalar(&ps->err, f, PB_I32, tmp, cnt, &got) && got <= cap - *n;
  for (int64_t i = 0; ok && i < got; i++) {
    uint32_t b = (uint32_t)tmp[i];
    memcpy(&vals[(*n)++], &b, 4);
  }
  free(tmp);
  return ok || FAIL(ps, "a float list longer than counted");
}

/* ---- TensorProto ----------------------------------------------------------------------------------------- */

enum { T_DIMS = 1, T_DTYPE = 2, T_SEGMENT = 3, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7, T_NAME = 8,
       T_RAW = 9, T_DOUBLE = 10, T_UINT64 = 11, T_DOC = 12, T_EXTERNAL = 13, T_LOCATION = 14 };

/* external data: the file location (relative, inside dir), offset and length; sets t->data */
static bool external_data(parser *ps, onnx_tensor_proto *t, const char *loc, int64_t off, int64_t len, const char *tn) {
  if (!loc) return FAIL(ps, "tensor '%s': external data without a location", tn);
  if (!ps->dir) return fail_st(ps, TG_ERR_IO, "tensor '%s': external data '%s', but the model was loaded from memory without a directory", tn, loc);
  if (!loc[0] || loc[0] == '/' || strchr(loc, '\\'))
    return FAIL(ps, "tensor '%s': external data location '%s' must be a relative path inside the model's directory", tn, loc);
  for (const char *p = loc; *p;) {   /* no ".." component */
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return FAIL(ps, "tensor '%s': external data location '%s' leaves the model's directory", tn, loc);
    p += n + (e != NULL);
  }
  if (off < 0 || len < -1) return FAIL(ps, "tensor '%s': external data offset %lld or length %lld is negative", tn, (long long)off, (long long)len);
  onnx_map *m = NULL;
  for (onnx_map *x = *ps->maps; x; x = x->next)
    if (x->location && !strcmp(x->location, loc)) m = x;
  if (!m) {
    char path[PATH_MAX], real[PATH_MAX], realdir[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", ps->dir, loc) >= sizeof path) return FAIL(ps, "tensor '%s': external data path too long", tn);
    /* a symbolic link inside the directory must not lead out of it either */
    if (!realpath(ps->dir, realdir)) return FAIL(ps, "tensor '%s': the model's directory '%s': %s", tn, ps->dir, strerror(errno));
    if (!realpath(path, real)) return FAIL(ps, "tensor '%s': external data file '%s': %s", tn, path, strerror(errno));
    size_t dl = strlen(realdir);
    if (strncmp(real, realdir, dl) || (real[dl] != '/' && strcmp(realdir, "/")))
      return FAIL(ps, "tensor '%s': external data file '%s' is outside the model's directory", tn, path);
    m = onnx_map_file(real, "external data file");
    if (!m) {
      snprintf(ps->err.msg, sizeof ps->err.msg, "tensor '%s': %s", tn, tg_error());
      ps->st = TG_ERR_IO;
      return false;
    }
    m->location = loc;
    m->next = *ps->maps;
    *ps->maps = m;
  }
  if ((uint64_t)off > m->len) return FAIL(ps, "tensor '%s': external data offset %lld is past the end of '%s' (%zu bytes)", tn, (long long)off, loc, m->len);
  if (len >= 0 && (uint64_t)len != t->nbytes)
    return FAIL(ps, "tensor '%s': external data length %lld, but %zu bytes are needed", tn, (long long)len, t->nbytes);
  if (t->nbytes > m->len - (size_t)off)
    return FAIL(ps, "tensor '%s': external data of %zu bytes at offset %lld runs past the end of '%s' (%zu bytes)", tn, t->nbytes, (long long)off, loc, m->len);
  t->data = (const uint8_t *)m->base + off;
  t->map = m;
  if (t->dt == TG_BOOL && t->nbytes) {   /* a bool is 0 or 1 in tgc's buffers: other bytes are made 1 */
    uint8_t *b = palloc(ps, t->nbytes);
    if (!b) return false;
    for (size_t i = 0; i < t->nbytes; i++) b[i] = ((const uint8_t *)t->data)[i] != 0;
    t->data = b;
    t->map = NULL;
  }
  return true;
}

static bool parse_tensor(parser *ps, pb_msg *msg, onnx_tensor_proto *t, const char *ctx) {
  *t = (onnx_tensor_proto){.name = ""};
  pb_msg m = *msg;
  pb_field f;
  int r;
  int64_t ndims = 0, counts[16] = {0};
  const pb_field *raw = NULL;
  pb_field rawf;
  bool external = false;
  unsigned typed_seen = 0;   /* bit k: typed data field k is present (even empty) */
  /* pass 1: the scalars, and counts */
  while ((r = pb_next(&m, &f)) > 0) {
    switch (f.num) {
    case T_DIMS: {
      int64_t c = pb_count_scalar(&ps->err, &f, PB_VARINT);
      if (c < 0) return false;
      ndims += c;
      break;
    }
    case T_DTYPE:
      if (!want_wire(ps, &f, PB_VARINT, ctx)) return false;
      t->data_type = (int32_t)f.v;
      break;
    case T_SEGMENT: return fail_st(ps, TG_ERR_ARG, "%s: segmented tensors are not supported", ctx);
    case T_NAME:
      if (!(t->name = pstr(ps, &f, ctx))) return false;
      break;
    case T_RAW:
      if (!want_wire(ps, &f, PB_LEN, ctx)) return false;
      rawf = f;
      raw = &rawf;
      break;
    case T_LOCATION:
      if (!want_wire(ps, &f, PB_VARINT, ctx)) return false;
      external = f.v == 1;
      break;
    case T_FLOAT: case T_INT32: case T_INT64: case T_DOUBLE: case T_UINT64: {
      int elem = f.num == T_FLOAT ? PB_I32 : f.num == T_DOUBLE ? PB_I64 : PB_VARINT;
      int64_t c = pb_count_scalar(&ps->err, &f, elem);
      if (c < 0) return false;
      typed_seen |= 1u << f.num;
      counts[f.num] += c;
      break;
    }
    case T_STRING:
      counts[T_STRING]++;
      break;
    default: break;   /* doc_string, external_data (pass 2), unknown fields */
    }
  }
  if (r < 0) return false;
  if (ndims > TG_MAX_DIMS) return fail_st(ps, TG_ERR_ARG, "%s: %lld dims, tgc supports at most %d", ctx, (long long)ndims, TG_MAX_DIMS);
  /* pass 2: dims and external data entries */
  m = *msg;
  int64_t nd = 0;
  const char *loc = NULL;
  int64_t off = 0, len = -1;
  while (pb_next(&m, &f) > 0) {
    if (f.num == T_DIMS) {
      if (!get_ints(ps, &f, t->dims, TG_MAX_DIMS, &nd)) return false;
    } else if (f.num == T_EXTERNAL) {
      pb_msg e;
      if (!pb_sub(&m, &f, &e)) return false;
      const char *key = NULL, *val = NULL;
      pb_field g;
      while ((r = pb_next(&e, &g)) > 0) {
        if (g.num == 1 && !(key = pstr(ps, &g, ctx))) return false;
        if (g.num == 2 && !(val = pstr(ps, &g, ctx))) return false;
      }
      if (r < 0) return false;
      if (!key || !val) continue;
      char *endp;
      if (!strcmp(key, "location")) loc = val;
      else if (!strcmp(key, "offset") || !strcmp(key, "length")) {
        errno = 0;
        long long v = strtoll(val, &endp, 10);
        if (errno || endp == val || *endp) return FAIL(ps, "%s: external data %s '%s' is not a number", ctx, key, val);
        if (key[0] == 'o') off = v;
        else len = v;
      }
    }
  }
  t->ndim = (int)nd;
  t->numel = 1;
  for (int i = 0; i < t->ndim; i++) {
    if (t->dims[i] < 0) return FAIL(ps, "%s: dim %d is negative (%lld)", ctx, i, (long long)t->dims[i]);
    if (!size_mul(t->numel, t->dims[i], &t->numel)) return FAIL(ps, "%s: the dims' product overflows", ctx);
  }
  t->supported = onnx_dtype_to_tg(t->data_type, &t->dt);
  if (!t->supported) return true;   /* parsed; whoever reads it says the type is not supported */
  size_t es = tg_dtype_size(t->dt);
  if ((uint64_t)t->numel > SIZE_MAX / 2 / es) return FAIL(ps, "%s: %lld elements are too many", ctx, (long long)t->numel);
  t->nbytes = (size_t)t->numel * es;
  int sources = (raw != NULL) + external + (typed_seen != 0);
  if (sources > 1) return FAIL(ps, "%s: data in more than one field (raw_data, typed fields, external)", ctx);
  if (external) return external_data(ps, t, loc, off, len, t->name);
  if (raw) {
    if (raw->len != t->nbytes)
      return FAIL(ps, "%s: raw_data has %zu bytes, dims of %lld %s elements need %zu", ctx, raw->len, (long long)t->numel,
                  onnx_type_name(t->data_type), t->nbytes);
    if (t->dt == TG_BOOL && t->nbytes) {   /* a bool is 0 or 1 in tgc's buffers: other bytes are made 1 */
      uint8_t *b = palloc(ps, t->nbytes);
      if (!b) return false;
      for (size_t i = 0; i < t->nbytes; i++) b[i] = raw->data[i] != 0;
      t->data = b;
      return true;
    }
    t->data = raw->data;
    t->map = ps->file;
    return true;
  }
  /* a typed field: which one holds this type */
  int field;
  switch (t->dt) {
  case TG_FLOAT32: field = T_FLOAT; break;
  case TG_INT32: case TG_INT16: case TG_INT8: case TG_UINT16: case TG_UINT8: case TG_BOOL: case TG_FLOAT16:
  case TG_BFLOAT16: field = T_INT32; break;
  case TG_INT64: field = T_INT64; break;
  case TG_FLOAT64: field = T_DOUBLE; break;
  default: field = T_UINT64; break;   /* uint32, uint64 */
  }
  for (int k = T_FLOAT; k <= T_UINT64; k++)
    if (k != field && (typed_seen >> k & 1))
      return FAIL(ps, "%s: a %s tensor with data in field %d", ctx, onnx_type_name(t->data_type), k);
  if (counts[field] != t->numel)
    return FAIL(ps, "%s: %lld values, dims of %lld elements", ctx, (long long)counts[field], (long long)t->numel);
  if (!t->numel) return true;
  uint8_t *out = palloc(ps, t->nbytes);
  uint64_t *tmp = mem_alloc((size_t)t->numel * sizeof *tmp);
  if (!out || !tmp) {
    free(tmp);
    return fail_st(ps, TG_ERR_NOMEM, "%s: out of memory for %lld values", ctx, (long long)t->numel);
  }
  int elem = field == T_FLOAT ? PB_I32 : field == T_DOUBLE ? PB_I64 : PB_VARINT;
  int64_t got = 0;
  m = *msg;
  bool ok = true;
  while (ok && pb_next(&m, &f) > 0)
    if ((int)f.num == field) ok = pb_get_scalar(&ps->err, &f, elem, tmp, t->numel, &got);
  for (int64_t i = 0; ok && i < got; i++) {
    uint64_t v = tmp[i];
    switch (es) {   /* the low bits, little-endian: int32_data holds narrower types' values and 16-bit floats' bits */
    case 1: out[i] = (uint8_t)(t->dt == TG_BOOL ? v != 0 : v); break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(out + 2 * i, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(out + 4 * i, &x, 4); break; }
    default: memcpy(out + 8 * i, &v, 8); break;
    }
  }
  free(tmp);
  if (!ok) return false;
  t->data = out;
  return true;
}

/* ---- ValueInfoProto -------------------------------------------------------------------------------------- */

static bool parse_shape(parser *ps, pb_msg *msg, onnx_value_info *v, const char *ctx) {
  pb_field f;
  int r;
  v->ndim = 0;
  while ((r = pb_next(msg, &f)) > 0) {
    if (f.num != 1) continue;
    if (v->ndim == TG_MAX_DIMS) return fail_st(ps, TG_ERR_ARG, "%s: more than %d dims", ctx, TG_MAX_DIMS);
    pb_msg d;
    if (!pb_sub(msg, &f, &d)) return false;
    int k = v->ndim++;
    v->dims[k] = -1;
    pb_field g;
    while ((r = pb_next(&d, &g)) > 0) {
      if (g.num == 1) {
        if (!want_wire(ps, &g, PB_VARINT, ctx)) return false;
        if ((int64_t)g.v < 0) return FAIL(ps, "%s: dim %d is negative (%lld)", ctx, k, (long long)(int64_t)g.v);
        v->dims[k] = (int64_t)g.v;
        v->dim_names[k] = NULL;
      } else if (g.num == 2) {
        if (!(v->dim_names[k] = pstr(ps, &g, ctx))) return false;
        if (!v->dim_names[k][0]) v->dim_names[k] = NULL;
        v->dims[k] = -1;
      }
    }
    if (r < 0) return false;
  }
  return r == 0;
}

static bool parse_value_info(parser *ps, pb_msg *msg, onnx_value_info *v, const char *ctx) {
  *v = (onnx_value_info){.name = "", .ndim = -1};
  pb_field f;
  int r;
  while ((r = pb_next(msg, &f)) > 0) {
    if (f.num == 1) {
      if (!(v->name = pstr(ps, &f, ctx))) return false;
    } else if (f.num == 2) {
      pb_msg tp;
      if (!pb_sub(msg, &f, &tp)) return false;
      v->has_type = true;
      pb_field g;
      while ((r = pb_next(&tp, &g)) > 0) {
        if (g.num == 1) {   /* tensor_type */
          v->is_tensor = true;
          pb_msg tt;
          if (!pb_sub(&tp, &g, &tt)) return false;
          pb_field h;
          while ((r = pb_next(&tt, &h)) > 0) {
            if (h.num == 1) {
              if (!want_wire(ps, &h, PB_VARINT, ctx)) return false;
              v->elem_type = (int32_t)h.v;
            } else if (h.num == 2) {
              pb_msg sh;
              if (!pb_sub(&tt, &h, &sh) || !parse_shape(ps, &sh, v, ctx)) return false;
            }
          }
          if (r < 0) return false;
        }
      }
      if (r < 0) return false;
    }
  }
  return r == 0;
}

/* ---- AttributeProto, NodeProto, GraphProto ----------------------------------------------------------------- */

static bool parse_graph(parser *ps, pb_msg *msg, onnx_graph *g, const char *ctx);

enum { A_NAME = 1, A_F = 2, A_I = 3, A_S = 4, A_T = 5, A_G = 6, A_FLOATS = 7, A_INTS = 8, A_STRINGS = 9, A_TENSORS = 10,
       A_GRAPHS = 11, A_TP = 14, A_TPS = 15, A_TYPE = 20, A_REF = 21, A_SPARSE = 22, A_SPARSES = 23 };

static bool parse_attr(parser *ps, pb_msg *msg, onnx_attr *a, const char *ctx) {
  *a = (onnx_attr){.name = ""};
  pb_msg m = *msg;
  pb_field f;
  int r;
  int64_t nints = 0, nfloats = 0, nstrings = 0, nt = 0, ng = 0;
  int seen = 0;   /* the type implied by the fields present, for files that leave type out */
  while ((r = pb_next(&m, &f)) > 0) {
    switch (f.num) {
    case A_NAME: if (!(a->name = pstr(ps, &f, ctx))) return false; break;
    case A_TYPE: if (!want_wire(ps, &f, PB_VARINT, ctx)) return false; a->type = (onnx_attr_type)(f.v > 14 ? 99 : f.v); break;
    case A_F:
      if (!want_wire(ps, &f, PB_I32, ctx)) return false;
      { uint32_t b = (uint32_t)f.v; memcpy(&a->f, &b, 4); }
      seen = ONNX_ATTR_FLOAT;
      break;
    case A_I: if (!want_wire(ps, &f, PB_VARINT, ctx)) return false; a->i = (int64_t)f.v; seen = ONNX_ATTR_INT; break;
    case A_S: if (!(a->s = pstr(ps, &f, ctx))) return false; seen = ONNX_ATTR_STRING; break;
    case A_FLOATS: {
      int64_t c = pb_count_scalar(&ps->err, &f, PB_I32);
      if (c < 0) return false;
      nfloats += c;
      seen = ONNX_ATTR_FLOATS;
      break;
    }
    case A_INTS: {
      int64_t c = pb_count_scalar(&ps->err, &f, PB_VARINT);
      if (c < 0) return false;
      nints += c;
      seen = ONNX_ATTR_INTS;
      break;
    }
    case A_STRINGS: nstrings++; seen = ONNX_ATTR_STRINGS; break;
    case A_T: case A_TENSORS: case A_G: case A_GRAPHS:
      if (!want_wire(ps, &f, PB_LEN, ctx)) return false;
      if (f.num == A_TENSORS) nt++;
      if (f.num == A_GRAPHS) ng++;
      seen = f.num == A_T ? ONNX_ATTR_TENSOR : f.num == A_G ? ONNX_ATTR_GRAPH : f.num == A_TENSORS ? ONNX_ATTR_TENSORS : ONNX_ATTR_GRAPHS;
      break;
    case A_SPARSE: seen = ONNX_ATTR_SPARSE_TENSOR; break;
    case A_SPARSES: seen = ONNX_ATTR_SPARSE_TENSORS; break;
    default: break;
    }
  }
  if (r < 0) return false;
  if ((int)a->type == 99) return FAIL(ps, "%s: attribute '%s' has an unknown type", ctx, a->name);
  if (a->type == ONNX_ATTR_UNDEFINED) a->type = (onnx_attr_type)seen;
  int64_t *ints = palloc_n(ps, nints, sizeof *ints);
  float *floats = palloc_n(ps, nfloats, sizeof *floats);
  const char **strings = palloc_n(ps, nstrings, sizeof *strings);
  if (!ints || !floats || !strings) return false;
  a->ints = ints;
  a->floats = floats;
  a->strings = strings;
  int64_t ti = 0, gi = 0;
  char sub[160];
  m = *msg;
  while (pb_next(&m, &f) > 0) {
    switch (f.num) {
    case A_INTS: if (!get_ints(ps, &f, ints, nints, &a->nints)) return false; break;
    case A_FLOATS: if (!get_floats(ps, &f, floats, nfloats, &a->nfloats)) return false; break;
    case A_STRINGS: if (!(strings[a->nstrings++] = pstr(ps, &f, ctx))) return false; break;
    case A_T: case A_TENSORS: {
      pb_msg tm;
      onnx_tensor_proto *t = palloc(ps, sizeof *t);
      ctxf(sub, sizeof sub, "%s: attribute '%s'", ctx, a->name);
      if (!t || !pb_sub(&m, &f, &tm) || !parse_tensor(ps, &tm, t, sub)) return false;
      if (f.num == A_T) a->t = t;
      ti++;
      break;
    }
    case A_G: case A_GRAPHS: {
      pb_msg gm;
      onnx_graph *g = palloc(ps, sizeof *g);
      ctxf(sub, sizeof sub, "%s: attribute '%s'", ctx, a->name);
      if (!g || !pb_sub(&m, &f, &gm) || !parse_graph(ps, &gm, g, sub)) return false;
      if (f.num == A_G) a->g = g;
      gi++;
      break;
    }
    default: break;
    }
  }
  (void)ti;
  (void)gi;
  return !pb_failed(&ps->err);
}

enum { N_INPUT = 1, N_OUTPUT = 2, N_NAME = 3, N_OP = 4, N_ATTR = 5, N_DOMAIN = 7 };

static bool parse_node(parser *ps, pb_msg *msg, onnx_node *n, int index, const char *gctx) {
  *n = (onnx_node){.op_type = "", .domain = "", .name = ""};
  pb_msg m = *msg;
  pb_field f;
  int r;
  int64_t nin = 0, nout = 0, nattr = 0;
  while ((r = pb_next(&m, &f)) > 0) {
    if (f.num == N_INPUT) nin++;
    else if (f.num == N_OUTPUT) nout++;
    else if (f.num == N_ATTR) nattr++;
  }
  if (r < 0) return false;
  if (nin > INT_MAX / 2 || nout > INT_MAX / 2 || nattr > INT_MAX / 2) return FAIL(ps, "%s: node %d: too many fields", gctx, index);
  const char **in = palloc_n(ps, nin, sizeof *in), **out = palloc_n(ps, nout, sizeof *out);
  onnx_attr *attrs = palloc_n(ps, nattr, sizeof *attrs);
  if (!in || !out || !attrs) return false;
  n->inputs = in;
  n->outputs = out;
  n->attrs = attrs;
  char ctx[256];
  ctxf(ctx, sizeof ctx, "%s: node %d", gctx, index);
  m = *msg;
  while (pb_next(&m, &f) > 0) {   /* the names first, for messages */
    if (f.num == N_NAME && !(n->name = pstr(ps, &f, ctx))) return false;
    if (f.num == N_OP && !(n->op_type = pstr(ps, &f, ctx))) return false;
    if (f.num == N_DOMAIN && !(n->domain = pstr(ps, &f, ctx))) return false;
  }
  if (!strcmp(n->domain, "ai.onnx")) n->domain = "";
  ctxf(ctx, sizeof ctx, "%s: node %d (%s '%s')", gctx, index, n->op_type, n->name);
  m = *msg;
  while (pb_next(&m, &f) > 0) {
    if (f.num == N_INPUT && !(in[n->nin++] = pstr(ps, &f, ctx))) return false;
    if (f.num == N_OUTPUT && !(out[n->nout++] = pstr(ps, &f, ctx))) return false;
    if (f.num == N_ATTR) {
      pb_msg am;
      if (!pb_sub(&m, &f, &am) || !parse_attr(ps, &am, &attrs[n->nattrs++], ctx)) return false;
    }
  }
  if (!n->op_type[0]) return FAIL(ps, "%s: node %d has no op_type", gctx, index);
  return true;
}

enum { G_NODE = 1, G_NAME = 2, G_INIT = 5, G_INPUT = 11, G_OUTPUT = 12, G_VINFO = 13, G_SPARSE = 15 };

static bool parse_graph(parser *ps, pb_msg *msg, onnx_graph *g, const char *ctx) {
  *g = (onnx_graph){.name = ""};
  pb_msg m = *msg;
  pb_field f;
  int r;
  int64_t c[16] = {0};
  while ((r = pb_next(&m, &f)) > 0) {
    if (f.num == G_SPARSE) return fail_st(ps, TG_ERR_ARG, "%s: sparse initializers are not supported", ctx);
    if (f.num < 16) c[f.num]++;
    if (f.num == G_NAME && !(g->name = pstr(ps, &f, ctx))) return false;
  }
  if (r < 0) return false;
  for (int k = 0; k < 16; k++)
    if (c[k] > INT_MAX / 2) return FAIL(ps, "%s: too many fields", ctx);
  g->nodes = palloc_n(ps, c[G_NODE], sizeof *g->nodes);
  g->inits = palloc_n(ps, c[G_INIT], sizeof *g->inits);
  g->inputs = palloc_n(ps, c[G_INPUT], sizeof *g->inputs);
  g->outputs = palloc_n(ps, c[G_OUTPUT], sizeof *g->outputs);
  g->value_infos = palloc_n(ps, c[G_VINFO], sizeof *g->value_infos);
  if (!g->nodes || !g->inits || !g->inputs || !g->outputs || !g->value_infos) return false;
  char gctx[200];
  ctxf(gctx, sizeof gctx, "%s%sgraph '%s'", ctx, ctx[0] ? ": " : "", g->name);
  m = *msg;
  while (pb_next(&m, &f) > 0) {
    pb_msg sub;
    if (f.num != G_NODE && f.num != G_INIT && f.num != G_INPUT && f.num != G_OUTPUT && f.num != G_VINFO) continue;
    if (!pb_sub(&m, &f, &sub)) return false;
    bool ok = true;
    char what[260];
    switch (f.num) {
    case G_NODE: ok = parse_node(ps, &sub, &g->nodes[g->nnodes], g->nnodes, gctx); g->nnodes++; break;
    case G_INIT:
      ctxf(what, sizeof what, "%s: initializer %d", gctx, g->ninits);
      ok = parse_tensor(ps, &sub, &g->inits[g->ninits++], what);
      break;
    case G_INPUT:
      ctxf(what, sizeof what, "%s: input %d", gctx, g->ninputs);
      ok = parse_value_info(ps, &sub, &g->inputs[g->ninputs++], what);
      break;
    case G_OUTPUT:
      ctxf(what, sizeof what, "%s: output %d", gctx, g->noutputs);
      ok = parse_value_info(ps, &sub, &g->outputs[g->noutputs++], what);
      break;
    default:
      ctxf(what, sizeof what, "%s: value_info %d", gctx, g->nvalue_infos);
      ok = parse_value_info(ps, &sub, &g->value_infos[g->nvalue_infos++], what);
      break;
    }
    if (!ok) return false;
  }
  return true;
}

/* ---- ModelProto ------------------------------------------------------------------------------------------- */

static void set_parse_error(parser *ps) {
  tg_set_error(ps->st ? ps->st : TG_ERR_IO, "onnx: %s: %s", ps->name, ps->err.msg[0] ? ps->err.msg : "malformed");
}

void onnx_model_free(onnx_model *m) {
  if (!m) return;
  onnx_map *x = m->maps;
  onnx_arena *a = m->arena;
  while (x) {
    onnx_map *n = x->next;
    onnx_map_unref(x);
    x = n;
  }
  onnx_arena_free(a);
}

onnx_model *onnx_model_parse(onnx_map *file, const char *name, const char *dir) {
  onnx_arena *arena = NULL;
  onnx_model *model = arena_alloc(&arena, sizeof *model);
  if (!model) {
    onnx_map_unref(file);
    tg_set_error(TG_ERR_NOMEM, "onnx: %s: out of memory", name);
    return NULL;
  }
  model->maps = file;
  file->next = NULL;
  parser ps = {.arena = &arena, .st = TG_ERR_IO, .file = file, .name = name, .dir = dir, .maps = &file->next};
  pb_msg m = pb_root(file->base, file->len, &ps.err);
  pb_field f;
  int r;
  int64_t nops = 0, ngraphs = 0;
  while ((r = pb_next(&m, &f)) > 0) {
    if (f.num == 8) nops++;
    if (f.num == 7) ngraphs++;
    if (f.num == 1) {
      if (!want_wire(&ps, &f, PB_VARINT, "model")) break;
      model->ir_version = (int64_t)f.v;
    }
  }
  bool ok = r == 0 && !pb_failed(&ps.err);
  if (ok && ngraphs != 1) ok = FAIL(&ps, "the model has %lld graphs, expected 1 (is this an ONNX model?)", (long long)ngraphs);
  if (ok && !(model->opsets = palloc_n(&ps, nops, sizeof *model->opsets))) ok = false;
  m = pb_root(file->base, file->len, &ps.err);
  while (ok && pb_next(&m, &f) > 0) {
    pb_msg sub;
    if (f.num == 8) {
      if (!pb_sub(&m, &f, &sub)) { ok = false; break; }
      onnx_opset_id *o = &model->opsets[model->nopsets++];
      o->domain = "";
      pb_field g;
      while ((r = pb_next(&sub, &g)) > 0) {
        if (g.num == 1 && !(o->domain = pstr(&ps, &g, "opset_import"))) { ok = false; break; }
        if (g.num == 2) {
          if (!want_wire(&ps, &g, PB_VARINT, "opset_import")) { ok = false; break; }
          o->version = (int64_t)g.v;
        }
      }
      if (r < 0) ok = false;
      if (ok && !strcmp(o->domain, "ai.onnx")) o->domain = "";
    } else if (f.num == 7) {
      model->graph = palloc(&ps, sizeof *model->graph);
      if (!model->graph || !pb_sub(&m, &f, &sub) || !parse_graph(&ps, &sub, model->graph, "")) ok = false;
    }
  }
  model->arena = arena;
  if (!ok || pb_failed(&ps.err)) {
    set_parse_error(&ps);
    onnx_model_free(model);
    return NULL;
  }
  return model;
}

bool onnx_tensor_parse(onnx_map *file, const char *name, onnx_tensor_proto *t, onnx_arena **a) {
  parser ps = {.arena = a, .st = TG_ERR_IO, .file = file, .name = name, .dir = NULL, .maps = NULL};
  onnx_map *none = NULL;
  ps.maps = &none;
  pb_msg m = pb_root(file->base, file->len, &ps.err);
  if (!parse_tensor(&ps, &m, t, "tensor") || pb_failed(&ps.err)) {
    set_parse_error(&ps);
    return false;
  }
  return true;
}
