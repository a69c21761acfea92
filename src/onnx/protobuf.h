/* protobuf.h — a small bounds-checked reader of the protocol-buffer wire format, for the ONNX parser.
 *
 * Why our own and not protobuf-c: no build-time dependency (no generated code, no library to install), and a
 * small surface to fuzz: every byte of a file passes through the few functions here, each of which checks a
 * length against the bytes that remain before it reads.
 *
 * A message is a pb_msg (bytes in [p, end)); pb_next walks its fields in order. A failure writes a message into
 * the reader's error buffer (the first one wins) and returns -1; the caller adds where it was and records it. */
#ifndef TG_ONNX_PROTOBUF_H
#define TG_ONNX_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_SGROUP = 3, PB_EGROUP = 4, PB_I32 = 5 };
#define PB_MAX_DEPTH 64   /* nested messages (a graph in an attribute of a node in a graph ...) */

typedef struct pb_err { char msg[256]; } pb_err;

typedef struct pb_msg {
  const uint8_t *p, *end;   /* the next byte and the end of the message */
  const uint8_t *base;      /* the start of the whole buffer (offsets in messages) */
  int depth;
  pb_err *err;
} pb_msg;

typedef struct pb_field {
  uint32_t num;
  int wire;
  uint64_t v;               /* PB_VARINT, PB_I64, PB_I32: the value's bits */
  const uint8_t *data;      /* PB_LEN: the bytes */
  size_t len;
} pb_field;

pb_msg pb_root(const uint8_t *data, size_t n, pb_err *err);
/* 1: a field read into *f; 0: the message ended; -1: malformed (err set) */
int pb_next(pb_msg *m, pb_field *f);
/* the message inside PB_LEN field f of m (one level deeper); false when f is not PB_LEN or too deep */
bool pb_sub(const pb_msg *m, const pb_field *f, pb_msg *sub);
/* records a message (when none is recorded yet); returns -1 */
int pb_fail(pb_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool pb_failed(const pb_err *e);

/* a repeated scalar field given either as separate fields or packed (PB_LEN): elem is PB_VARINT, PB_I32 or
 * PB_I64. pb_count_scalar counts the values f holds (-1: malformed); pb_get_scalar writes them as raw bits
 * (varints as read, fixed ones as their little-endian bits) into out[0 .. count) */
int64_t pb_count_scalar(pb_err *e, const pb_field *f, int elem);
bool pb_get_scalar(pb_err *e, const pb_field *f, int elem, uint64_t *out, int64_t cap, int64_t *got);

#endif
