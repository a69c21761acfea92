/* protobuf.c — the wire-format reader (protobuf.h): varints, fixed 32/64-bit values, length-delimited fields
 * (lengths checked against the bytes left), unknown fields skipped, groups refused, nesting limited. */
#include "protobuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int pb_fail(pb_err *e, const char *fmt, ...) {
  if (e && !e->msg[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (!e->msg[0]) snprintf(e->msg, sizeof e->msg, "malformed");
  }
  return -1;
}

bool pb_failed(const pb_err *e) { return e->msg[0] != 0; }

pb_msg pb_root(const uint8_t *data, size_t n, pb_err *err) {
  return (pb_msg){.p = data, .end = data + n, .base = data, .depth = 0, .err = err};
}

/* a varint at *p (before end) into *v; false when it runs past end or past 64 bits */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return false;
    uint8_t b = *(*p)++;
    if (shift == 63 && (b & 0x7e)) return false;   /* the tenth byte may add only bit 63 */
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      return true;
    }
  }
  return false;
}

static uint64_t load_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int pb_next(pb_msg *m, pb_field *f) {
  if (m->p >= m->end) return 0;
  size_t at = (size_t)(m->p - m->base);
  uint64_t key;
  if (!read_varint(&m->p, m->end, &key)) return pb_fail(m->err, "a field key at byte %zu runs past the end or 64 bits", at);
  *f = (pb_field){.num = (uint32_t)(key >> 3), .wire = (int)(key & 7)};
  if (key >> 3 == 0 || key >> 3 > 0x1fffffff) return pb_fail(m->err, "field number %llu at byte %zu", (unsigned long long)(key >> 3), at);
  switch (f->wire) {
  case PB_VARINT:
    if (!read_varint(&m->p, m->end, &f->v)) return pb_fail(m->err, "a varint at byte %zu runs past the end or 64 bits", at);
    return 1;
  case PB_I64:
  case PB_I32: {
    int n = f->wire == PB_I64 ? 8 : 4;
    if (m->end - m->p < n) return pb_fail(m->err, "a %d-byte value at byte %zu runs past the end", n, at);
    f->v = load_le(m->p, n);
    m->p += n;
    return 1;
  }
  case PB_LEN: {
    uint64_t len;
    if (!read_varint(&m->p, m->end, &len)) return pb_fail(m->err, "a length at byte %zu runs past the end or 64 bits", at);
    if (len > (uint64_t)(m->end - m->p))
      return pb_fail(m->err, "field %u at byte %zu says %llu bytes, %zu are left", f->num, at, (unsigned long long)len,
                     (size_t)(m->end - m->p));
    f->data = m->p;
    f->len = (size_t)len;
    m->p += len;
    return 1;
  }
  default:  /* groups are deprecated and ONNX has none; wire types 6 and 7 do not exist */
    return pb_fail(m->err, "wire type %d of field %u at byte %zu is not supported", f->wire, f->num, at);
  }
}

bool pb_sub(const pb_msg *m, const pb_field *f, pb_msg *sub) {
  if (f->wire != PB_LEN) {
    pb_fail(m->err, "field %u should be a message (wire type 2), has wire type %d", f->num, f->wire);
    return false;
  }
  if (m->depth + 1 > PB_MAX_DEPTH) {
    pb_fail(m->err, "messages nested deeper than %d", PB_MAX_DEPTH);
    return false;
  }
  *sub = (pb_msg){.p = f->data, .end = f->data + f->len, .base = m->base, .depth = m->depth + 1, .err = m->err};
  return true;
}

static int elem_size(int elem) { return elem == PB_I32 ? 4 : elem == PB_I64 ? 8 : 0; }

int64_t pb_count_scalar(pb_err *e, const pb_field *f, int elem) {
  if (f->wire == elem) return 1;
  if (f->wire != PB_LEN) return pb_fail(e, "field %u has wire type %d, expected %d or packed", f->num, f->wire, elem);
  int es = elem_size(elem);
  if (es) {
    if (f->len % (size_t)es) return pb_fail(e, "packed field %u has %zu bytes, not a multiple of %d", f->num, f->len, es);
    return (int64_t)(f->len / (size_t)es);
  }
  int64_t n = 0;
  const uint8_t *p = f->data, *end = f->data + f->len;
  while (p < end) {
    uint64_t v;
    if (!read_varint(&p, end, &v)) return pb_fail(e, "a packed varint of field %u runs past its end or 64 bits", f->num);
    n++;
  }
  return n;
}

bool pb_get_scalar(pb_err *e, const pb_field *f, int elem, uint64_t *out, int64_t cap, int64_t *got) {
  int64_t n = pb_count_scalar(e, f, elem);
  if (n < 0) return false;
  if (n > cap - *got) return pb_fail(e, "field %u has more values than counted", f->num), false;
  if (f->wire == elem) {
    out[(*got)++] = f->v;
    return true;
  }
  int es = elem_size(elem);
  const uint8_t *p = f->data, *end = f->data + f->len;
  for (int64_t i = 0; i < n; i++) {
    if (es) {
      out[(*got)++] = load_le(p, es);
      p += es;
    } else if (!read_varint(&p, end, &out[(*got)++])) {
      return pb_fail(e, "a packed varint of field %u runs past its end", f->num), false;
    }
  }
  return true;
}
