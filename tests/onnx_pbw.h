/* onnx_pbw.h — a tiny protocol-buffer writer for building ONNX models and tensors in tests and fuzz seeds
 * (tests/test_onnx.c, tests/fuzz/make_corpus.c). Header-only; a failed allocation exits (test code). Field
 * numbers are onnx.proto's. */
#ifndef TG_ONNX_PBW_H
#define TG_ONNX_PBW_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pbw { uint8_t *b; size_t n, cap; } pbw;

static inline void pbw_raw(pbw *w, const void *p, size_t n) {
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap : 64;
    while (cap < w->n + n) cap *= 2;
    uint8_t *nb = realloc(w->b, cap);
    if (!nb) { fprintf(stderr, "pbw: out of memory\n"); exit(1); }
    w->b = nb;
    w->cap = cap;
  }
  if (n) memcpy(w->b + w->n, p, n);
  w->n += n;
}
static inline void pbw_varint(pbw *w, uint64_t v) {
  do {
    uint8_t b = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) b |= 0x80;
    pbw_raw(w, &b, 1);
  } while (v);
}
static inline void pbw_key(pbw *w, uint32_t field, int wire) { pbw_varint(w, (uint64_t)field << 3 | (uint64_t)wire); }
static inline void pbw_int(pbw *w, uint32_t field, int64_t v) { pbw_key(w, field, 0); pbw_varint(w, (uint64_t)v); }
static inline void pbw_bytes(pbw *w, uint32_t field, const void *p, size_t n) {
  pbw_key(w, field, 2);
  pbw_varint(w, n);
  pbw_raw(w, p, n);
}
static inline void pbw_str(pbw *w, uint32_t field, const char *s) { pbw_bytes(w, field, s, strlen(s)); }
static inline void pbw_f32(pbw *w, uint32_t field, float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  pbw_key(w, field, 5);
  uint8_t le[4] = {(uint8_t)b, (uint8_t)(b >> 8), (uint8_t)(b >> 16), (uint8_t)(b >> 24)};
  pbw_raw(w, le, 4);
}
/* sub as a length-delimited field of w; sub is freed */
static inline void pbw_msg(pbw *w, uint32_t field, pbw *sub) {
  pbw_bytes(w, field, sub->b, sub->n);
  free(sub->b);
  *sub = (pbw){0};
}
static inline void pbw_free(pbw *w) { free(w->b); *w = (pbw){0}; }

/* ---- ONNX messages ---- */
enum { ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_UINT16 = 4, ONNX_INT16 = 5, ONNX_INT32 = 6, ONNX_INT64 = 7,
       ONNX_STRING = 8, ONNX_BOOL = 9, ONNX_FLOAT16 = 10, ONNX_DOUBLE = 11, ONNX_UINT32 = 12, ONNX_UINT64 = 13 };

/* TensorProto with dims and data_type, raw_data when raw (n bytes) */
static inline pbw onnx_w_tensor(const char *name, int dtype, int ndim, const int64_t *dims, const void *raw, size_t n) {
  pbw t = {0};
  for (int i = 0; i < ndim; i++) pbw_int(&t, 1, dims[i]);
  pbw_int(&t, 2, dtype);
  if (name) pbw_str(&t, 8, name);
  if (raw) pbw_bytes(&t, 9, raw, n);
  return t;
}

/* ValueInfoProto of a tensor: dims[i] >= 0 a size, else the name names[i] (NULL: unknown); ndim < 0: no shape */
static inline pbw onnx_w_value(const char *name, int elem, int ndim, const int64_t *dims, const char *const *names) {
  pbw shape = {0}, tt = {0}, tp = {0}, v = {0};
  for (int i = 0; i < ndim; i++) {
    pbw d = {0};
    if (dims[i] >= 0) pbw_int(&d, 1, dims[i]);
    else if (names && names[i]) pbw_str(&d, 2, names[i]);
    pbw_msg(&shape, 1, &d);
  }
  pbw_int(&tt, 1, elem);
  if (ndim >= 0) pbw_msg(&tt, 2, &shape);
  pbw_free(&shape);
  pbw_msg(&tp, 1, &tt);
  pbw_str(&v, 1, name);
  pbw_msg(&v, 2, &tp);
  return v;
}

/* NodeProto: inputs and outputs separated by a NULL in io ({"x", NULL, "y", NULL}); attributes appended by the
 * caller (field 5) */
static inline pbw onnx_w_node(const char *op, const char *const *io) {
  pbw n = {0};
  int k = 0;
  for (; io[k]; k++) pbw_str(&n, 1, io[k]);
  for (k++; io[k]; k++) pbw_str(&n, 2, io[k]);
  pbw_str(&n, 4, op);
  return n;
}

/* AttributeProto helpers (type set explicitly) */
static inline void onnx_w_attr_int(pbw *node, const char *name, int64_t v) {
  pbw a = {0};
  pbw_str(&a, 1, name);
  pbw_int(&a, 3, v);
  pbw_int(&a, 20, 2);
  pbw_msg(node, 5, &a);
}
static inline void onnx_w_attr_ints(pbw *node, const char *name, int n, const int64_t *v) {
  pbw a = {0};
  pbw_str(&a, 1, name);
  for (int i = 0; i < n; i++) pbw_int(&a, 8, v[i]);
  pbw_int(&a, 20, 7);
  pbw_msg(node, 5, &a);
}
static inline void onnx_w_attr_float(pbw *node, const char *name, float v) {
  pbw a = {0};
  pbw_str(&a, 1, name);
  pbw_f32(&a, 2, v);
  pbw_int(&a, 20, 1);
  pbw_msg(node, 5, &a);
}
static inline void onnx_w_attr_string(pbw *node, const char *name, const char *s) {
  pbw a = {0};
  pbw_str(&a, 1, name);
  pbw_str(&a, 4, s);
  pbw_int(&a, 20, 3);
  pbw_msg(node, 5, &a);
}
/* tensor (a TensorProto, freed) or graph (a GraphProto, freed) attributes */
static inline void onnx_w_attr_msg(pbw *node, const char *name, int type, pbw *msg) {
  pbw a = {0};
  pbw_str(&a, 1, name);
  pbw_msg(&a, type == 4 ? 5 : 6, msg);
  pbw_int(&a, 20, type);
  pbw_msg(node, 5, &a);
}

/* ModelProto: ir_version 8, the default domain at opset, the graph (freed) */
static inline pbw onnx_w_model(int64_t opset, pbw *graph) {
  pbw m = {0}, o = {0};
  pbw_int(&m, 1, 8);
  pbw_str(&m, 2, "tgc-test");
  pbw_str(&o, 1, "");
  pbw_int(&o, 2, opset);
  pbw_msg(&m, 8, &o);
  pbw_msg(&m, 7, graph);
  return m;
}

/* graph fields: node 1, name 2, initializer 5, input 11, output 12 */
enum { ONNX_G_NODE = 1, ONNX_G_NAME = 2, ONNX_G_INIT = 5, ONNX_G_INPUT = 11, ONNX_G_OUTPUT = 12 };

#endif
