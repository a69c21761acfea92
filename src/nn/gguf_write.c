/* gguf_write.c — a GGUF version 3 writer: metadata values and tensors collected in memory, then one file.
 *
 * Each metadata value is serialized when it is set (its type tag and bytes as the file holds them), and each
 * tensor is converted when it is added (F16/BF16 rounded, block formats quantized as ggml's reference
 * quantizers), so save only lays out the header, the tensor infos and the data (alignment 32) and writes
 * them through a temporary file renamed to the path: a reader never sees half a file.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gguf.h"
#include "runtime/file_out.h"
#include "uop/uop.h"

#define ALIGN 32

/* a growable byte string */
typedef struct bytes { uint8_t *p; size_t n, cap; } bytes;

static bool put(bytes *b, const void *src, size_t n) {
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n) cap *= 2;
    uint8_t *p = mem_realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, src, n);
  b->n += n;
  return true;
}
static bool put_u32(bytes *b, uint32_t v) { return put(b, &v, 4); }  /* little-endian hosts only (as gguf.c) */
static bool put_u64(bytes *b, uint64_t v) { return put(b, &v, 8); }
static bool put_str(bytes *b, const char *s) { size_t n = strlen(s); return put_u64(b, n) && put(b, s, n); }

typedef struct wkv { char *key; bytes val; } wkv;   /* val: the type tag and the value's bytes */
typedef struct wtensor { char *name; int ndim; uint64_t ne[TG_MAX_DIMS]; uint32_t type; bytes data; } wtensor;

struct tg_gguf_writer {
  wkv *kv;
  int64_t nkv, capkv;
  wtensor *t;
  int64_t nt, capt;
};

tg_gguf_writer *tg_gguf_writer_new(void) {
  tg_gguf_writer *w = mem_calloc(1, sizeof *w);
  if (!w) tg_set_error(TG_ERR_NOMEM, "tg_gguf_writer_new: out of memory");
  return w;
}

void tg_gguf_writer_free(tg_gguf_writer *w) {
  if (!w) return;
  for (int64_t i = 0; i < w->nkv; i++) free(w->kv[i].key), free(w->kv[i].val.p);
  for (int64_t i = 0; i < w->nt; i++) free(w->t[i].name), free(w->t[i].data.p);
  free(w->kv);
  free(w->t);
  free(w);
}

/* ---- metadata ------------------------------------------------------------------------------------------- */

static size_t scalar_size(tg_gguf_type t) {
  static const uint8_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return t >= 0 && t <= TG_GGUF_FLOAT64 ? sz[t] : 0;
}
static bool is_int_type(tg_gguf_type t) {
  return (t >= TG_GGUF_UINT8 && t <= TG_GGUF_INT32) || t == TG_GGUF_UINT64 || t == TG_GGUF_INT64;
}

/* a new entry for key (checked: not NULL, not set before), or NULL with an error naming op */
static bytes *new_kv(tg_gguf_writer *w, const char *op, const char *key) {
  if (!w || !key) {
    tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, w ? "key" : "the writer");
    return NULL;
  }
  for (int64_t i = 0; i < w->nkv; i++)
    if (!strcmp(w->kv[i].key, key)) {
      tg_set_error(TG_ERR_ARG, "%s: key '%.128s' is already set", op, key);
      return NULL;
    }
  if (w->nkv == w->capkv) {
    int64_t cap = w->capkv ? 2 * w->capkv : 16;
    wkv *kv = mem_realloc(w->kv, (size_t)cap * sizeof *kv);
    if (!kv) goto nomem;
    w->kv = kv;
    w->capkv = cap;
  }
  size_t n = strlen(key) + 1;
  char *k = mem_alloc(n);
  if (!k) goto nomem;
  memcpy(k, key, n);
  w->kv[w->nkv] = (wkv){k, {0}};
  return &w->kv[w->nkv++].val;
nomem:
  tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  return NULL;
}

/* drops the entry new_kv made last (its value failed) */
static tg_status undo_kv(tg_gguf_writer *w, const char *op, tg_status st) {
  w->nkv--;
  free(w->kv[w->nkv].key);
  free(w->kv[w->nkv].val.p);
  if (st == TG_ERR_NOMEM) tg_set_error(st, "%s: out of memory", op);
  return st;
}

/* v as an integer of type t into b; false when it does not fit */
static bool int_fits(tg_gguf_type t, int64_t v) {
  switch (t) {
    case TG_GGUF_UINT8: return v >= 0 && v <= UINT8_MAX;
    case TG_GGUF_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case TG_GGUF_UINT16: return v >= 0 && v <= UINT16_MAX;
    case TG_GGUF_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case TG_GGUF_UINT32: return v >= 0 && v <= UINT32_MAX;
    case TG_GGUF_INT32: return v >= INT32_MIN && v <= INT32_MAX;
    case TG_GGUF_UINT64: return v >= 0;
    default: return true;
  }
}
static bool put_int(bytes *b, tg_gguf_type t, int64_t v) {
  uint64_t u = (uint64_t)v;
  return put(b, &u, scalar_size(t));  /* the low bytes, little-endian */
}
static bool put_float(bytes *b, tg_gguf_type t, double v) {
  if (t == TG_GGUF_FLOAT64) return put(b, &v, 8);
  float f = (float)v;
  return put(b, &f, 4);
}

tg_status tg_gguf_set_int(tg_gguf_writer *w, const char *key, tg_gguf_type type, int64_t value) {
  const char *op = "tg_gguf_set_int";
  if (!is_int_type(type) || !int_fits(type, value)) {
    tg_set_error(TG_ERR_ARG, "%s: key '%.128s': %lld as %s: want an integer type the value fits", op,
                 key ? key : "(null)", (long long)value, tg_gguf_type_name(type));
    return TG_ERR_ARG;
  }
  bytes *b = new_kv(w, op, key);
  if (!b) return tg_error_status();
  return put_u32(b, (uint32_t)type) && put_int(b, type, value) ? TG_OK : undo_kv(w, op, TG_ERR_NOMEM);
}

tg_status tg_gguf_set_float(tg_gguf_writer *w, const char *key, tg_gguf_type type, double value) {
  const char *op = "tg_gguf_set_float";
  if (type != TG_GGUF_FLOAT32 && type != TG_GGUF_FLOAT64) {
    tg_set_error(TG_ERR_ARG, "%s: key '%.128s': type %s: want float32 or float64", op, key ? key : "(null)",
                 tg_gguf_type_name(type));
    return TG_ERR_ARG;
  }
  bytes *b = new_kv(w, op, key);
  if (!b) return tg_error_status();
  return put_u32(b, (uint32_t)type) && put_float(b, type, value) ? TG_OK : undo_kv(w, op, TG_ERR_NOMEM);
}

tg_status tg_gguf_set_bool(tg_gguf_writer *w, const char *key, bool value) {
  bytes *b = new_kv(w, "tg_gguf_set_bool", key);
  if (!b) return tg_error_status();
  uint8_t v = value;
  return put_u32(b, TG_GGUF_BOOL) && put(b, &v, 1) ? TG_OK : undo_kv(w, "tg_gguf_set_bool", TG_ERR_NOMEM);
}

tg_status tg_gguf_set_string(tg_gguf_writer *w, const char *key, const char *s) {
  const char *op = "tg_gguf_set_string";
  if (!s) {
    tg_set_error(TG_ERR_ARG, "%s: key '%.128s': the string is NULL", op, key ? key : "(null)");
    return TG_ERR_ARG;
  }
  bytes *b = new_kv(w, op, key);
  if (!b) return tg_error_status();
  return put_u32(b, TG_GGUF_STRING) && put_str(b, s) ? TG_OK : undo_kv(w, op, TG_ERR_NOMEM);
}

/* checks an array's arguments; the entry with its array header (tag, element type, count), or NULL */
static bytes *new_array(tg_gguf_writer *w, const char *op, const char *key, tg_gguf_type elem, const void *v,
                        int64_t n, bool ok_type) {
  if (!ok_type || n < 0 || (n && !v)) {
    tg_set_error(TG_ERR_ARG, "%s: key '%.128s': %lld elements of %s%s", op, key ? key : "(null)", (long long)n,
                 tg_gguf_type_name(elem), !ok_type ? ": a type this call does not write"
                                                   : ": bad count or NULL values");
    return NULL;
  }
  bytes *b = new_kv(w, op, key);
  if (b && !(put_u32(b, TG_GGUF_ARRAY) && put_u32(b, (uint32_t)elem) && put_u64(b, (uint64_t)n))) {
    undo_kv(w, op, TG_ERR_NOMEM);
    return NULL;
  }
  return b;
}

tg_status tg_gguf_set_array_int(tg_gguf_writer *w, const char *key, tg_gguf_type elem_type, const int64_t *v,
                                int64_t n) {
  const char *op = "tg_gguf_set_array_int";
  for (int64_t i = 0; v && i < n; i++)
    if (!int_fits(elem_type, v[i])) {
      tg_set_error(TG_ERR_ARG, "%s: key '%.128s': element %lld = %lld does not fit %s", op, key ? key : "(null)",
                   (long long)i, (long long)v[i], tg_gguf_type_name(elem_type));
      return TG_ERR_ARG;
    }
  bytes *b = new_array(w, op, key, elem_type, v, n, is_int_type(elem_type));
  if (!b) return tg_error_status();
  for (int64_t i = 0; i < n; i++)
    if (!put_int(b, elem_type, v[i])) return undo_kv(w, op, TG_ERR_NOMEM);
  return TG_OK;
}

tg_status tg_gguf_set_array_float(tg_gguf_writer *w, const char *key, tg_gguf_type elem_type, const double *v,
                                  int64_t n) {
  const char *op = "tg_gguf_set_array_float";
  bytes *b = new_array(w, op, key, elem_type, v, n, elem_type == TG_GGUF_FLOAT32 || elem_type == TG_GGUF_FLOAT64);
  if (!b) return tg_error_status();
  for (int64_t i = 0; i < n; i++)
    if (!put_float(b, elem_type, v[i])) return undo_kv(w, op, TG_ERR_NOMEM);
  return TG_OK;
}

tg_status tg_gguf_set_array_string(tg_gguf_writer *w, const char *key, const char *const *v, int64_t n) {
  const char *op = "tg_gguf_set_array_string";
  for (int64_t i = 0; v && i < n; i++)
    if (!v[i]) {
      tg_set_error(TG_ERR_ARG, "%s: key '%.128s': string %lld is NULL", op, key ? key : "(null)", (long long)i);
      return TG_ERR_ARG;
    }
  bytes *b = new_array(w, op, key, TG_GGUF_STRING, v, n, true);
  if (!b) return tg_error_status();
  for (int64_t i = 0; i < n; i++)
    if (!put_str(b, v[i])) return undo_kv(w, op, TG_ERR_NOMEM);
  return TG_OK;
}

/* ---- tensors: conversion as ggml's reference code (ggml-quants.c quantize_row_*_ref) ---------------------- */

/* float32 -> bfloat16 as ggml_compute_fp32_to_bf16: NaN made quiet, then round to nearest even */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
  return (uint16_t)(((uint64_t)u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

static void put_half(uint8_t *p, float f) {
  uint16_t h = float_to_half(f);
  memcpy(p, &h, 2);
}

/* the element of largest magnitude (the first of equals), signed */
static float absmax_signed(const float *x) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; j++)
    if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
  return max;
}

/* the 4- or 5-bit codes of one block; q[j] in [0, qmax] */
static void codes(const float *x, float id, float add, float min, int qmax, uint8_t *q) {
  for (int j = 0; j < 32; j++) {
    float v = (x[j] - min) * id + add;
    int c = (int)truncf(v);
    q[j] = (uint8_t)(c < 0 ? 0 : c > qmax ? qmax : c);
  }
}

/* one block of 32 floats as type's bytes */
static void quantize_block(const float *x, uint32_t type, uint8_t *out) {
  uint8_t q[32];
  if (type == GGML_Q8_0) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127, id = d != 0 ? 1 / d : 0;
    put_half(out, d);
    for (int j = 0; j < 32; j++) {
      float v = x[j] * id, a = fabsf(v), fl = floorf(a);
      float r = fl + floorf(2 * (a - fl));  /* numpy's np_roundf: half away from zero */
      out[2 + j] = (uint8_t)(int8_t)(v < 0 ? -r : r);
    }
    return;
  }
  bool with_min = type == GGML_Q4_1 || type == GGML_Q5_1;
  int qmax = type == GGML_Q4_0 || type == GGML_Q4_1 ? 15 : 31;
  float d, min = 0, add;
  if (with_min) {
    float mx = x[0];
    min = x[0];
    for (int j = 1; j < 32; j++) min = fminf(min, x[j]), mx = fmaxf(mx, x[j]);
    d = (mx - min) / (float)qmax;
    add = 0.5f;
  } else {
    d = absmax_signed(x) / (qmax == 15 ? -8.0f : -16.0f);
    add = qmax == 15 ? 8.5f : 16.5f;
  }
  float id = d != 0 ? 1 / d : 0;
  codes(x, id, add, min, qmax, q);
  size_t at = 0;
  put_half(out, d), at = 2;
  if (with_min) put_half(out + 2, min), at = 4;
  if (qmax == 31) {  /* the fifth bits, bit j of a little-endian uint32 */
    uint32_t qh = 0;
    for (int j = 0; j < 32; j++) qh |= (uint32_t)(q[j] >> 4) << j;
    memcpy(out + at, &qh, 4);
    at += 4;
  }
  for (int j = 0; j < 16; j++) out[at + j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
}

tg_status tg_gguf_add_tensor(tg_gguf_writer *w, const char *name, int ndim, const int64_t *shape,
                             const float *data, tg_ggml_type type) {
  const char *op = "tg_gguf_add_tensor";
  const gguf_type_info *ti = gguf_type_of((uint32_t)type);
  bool block = ti && ti->block == 32;
  bool known = ti && (type == TG_GGML_F32 || type == TG_GGML_F16 || type == TG_GGML_BF16 || block);
  if (!w || !name || !data || !shape || ndim < 1 || ndim > TG_MAX_DIMS || !known) {
    tg_set_error(TG_ERR_ARG, "tg_gguf_add_tensor: %s", !w ? "the writer is NULL" : !name ? "name is NULL"
                 : !data || !shape ? "data or shape is NULL" : !known ? "a type the writer does not produce"
                 : "ndim is outside [1, 16]");
    return TG_ERR_ARG;
  }
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (n && shape[i] > ((int64_t)1 << 40) / n)) {  /* empty tensors are fine */
      tg_set_error(TG_ERR_ARG, "%s: '%.128s': size %lld of axis %d", op, name, (long long)shape[i], i);
      return TG_ERR_ARG;
    }
    n *= shape[i];
  }
  if (block && shape[ndim - 1] % 32) {
    tg_set_error(TG_ERR_ARG, "%s: '%.128s': a row of %lld elements is not a whole number of %s blocks of 32", op,
                 name, (long long)shape[ndim - 1], ti->name);
    return TG_ERR_ARG;
  }
  for (int64_t i = 0; i < w->nt; i++)
    if (!strcmp(w->t[i].name, name)) {
      tg_set_error(TG_ERR_ARG, "%s: tensor '%.128s' is already added", op, name);
      return TG_ERR_ARG;
    }
  if (w->nt == w->capt) {
    int64_t cap = w->capt ? 2 * w->capt : 16;
    wtensor *t = mem_realloc(w->t, (size_t)cap * sizeof *t);
    if (!t) goto nomem;
    w->t = t;
    w->capt = cap;
  }
  wtensor t = {.ndim = ndim, .type = (uint32_t)type};
  for (int i = 0; i < ndim; i++) t.ne[i] = (uint64_t)shape[ndim - 1 - i];
  size_t nbytes = (size_t)(n / ti->block * ti->size), len = strlen(name) + 1;
  t.name = mem_alloc(len);
  t.data.p = mem_alloc(nbytes ? nbytes : 1);
  if (!t.name || !t.data.p) {
    free(t.name), free(t.data.p);
    goto nomem;
  }
  memcpy(t.name, name, len);
  t.data.n = t.data.cap = nbytes;
  uint8_t *o = t.data.p;
  if (type == TG_GGML_F32) memcpy(o, data, nbytes);
  else if (type == TG_GGML_F16) for (int64_t i = 0; i < n; i++) put_half(o + 2 * i, data[i]);
  else if (type == TG_GGML_BF16) for (int64_t i = 0; i < n; i++) {
    uint16_t h = to_bf16(data[i]);
    memcpy(o + 2 * i, &h, 2);
  }
  else for (int64_t b = 0; b < n / 32; b++) quantize_block(data + 32 * b, (uint32_t)type, o + b * ti->size);
  w->t[w->nt++] = t;
  return TG_OK;
nomem:
  tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  return TG_ERR_NOMEM;
}

/* ---- the file ------------------------------------------------------------------------------------------- */

static uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

tg_status tg_gguf_writer_save(tg_gguf_writer *w, const char *path) {
  const char *op = "tg_gguf_writer_save";
  if (!w || !path) {
    tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, w ? "path" : "the writer");
    return TG_ERR_ARG;
  }
  bytes h = {0};
  bool ok = put(&h, "GGUF", 4) && put_u32(&h, 3) && put_u64(&h, (uint64_t)w->nt) && put_u64(&h, (uint64_t)w->nkv);
  for (int64_t i = 0; ok && i < w->nkv; i++) ok = put_str(&h, w->kv[i].key) && put(&h, w->kv[i].val.p, w->kv[i].val.n);
  uint64_t off = 0;
  for (int64_t i = 0; ok && i < w->nt; i++) {
    const wtensor *t = &w->t[i];
    ok = put_str(&h, t->name) && put_u32(&h, (uint32_t)t->ndim);
    for (int d = 0; ok && d < t->ndim; d++) ok = put_u64(&h, t->ne[d]);
    ok = ok && put_u32(&h, t->type) && put_u64(&h, off);
    off = align_up(off + t->data.n);
  }
  static const uint8_t zeros[ALIGN] = {0};
  ok = ok && put(&h, zeros, align_up(h.n) - h.n);
  if (!ok) {
    free(h.p);
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
    return TG_ERR_NOMEM;
  }
  /* written whole or not at all (file_out.h) */
  file_out f;
  tg_status st = TG_OK;
  if (!file_out_open(&f, path)) {
    st = f.err == ENOMEM ? TG_ERR_NOMEM : TG_ERR_IO;
    tg_set_error(st, "%s: %s: cannot create %s: %s", op, path, file_out_tmp(&f), file_out_why(&f));
  } else {
    ok = file_out_write(&f, h.p, h.n);
    for (int64_t i = 0; ok && i < w->nt; i++) {
      size_t n = w->t[i].data.n, pad = (size_t)(align_up(n) - n);
      ok = file_out_write(&f, w->t[i].data.p, n) && file_out_write(&f, zeros, pad);
    }
    if (!ok || !file_out_commit(&f, true)) {
      st = TG_ERR_IO;
      tg_set_error(st, "%s: %s: writing %s failed: %s", op, path, file_out_tmp(&f), file_out_why(&f));
    }
  }
  file_out_discard(&f);
  free(h.p);
  return st;
}
