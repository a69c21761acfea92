/* gguf.h — what the GGUF reader (gguf.c), its dequantizers (gguf_quant.c), the tests and the fuzz target share. */
#ifndef TG_NN_GGUF_H
#define TG_NN_GGUF_H

#include "tg.h"

/* ggml's tensor type numbers that tgc reads (ggml.h's enum ggml_type) */
enum {
  GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8,
  GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_I8 = 24, GGML_I16 = 25, GGML_I32 = 26, GGML_I64 = 27,
  GGML_F64 = 28, GGML_BF16 = 30,
};

/* a ggml tensor type: its name, elements per block, bytes per block (1 and the element size for plain
 * types), the tgc dtype a plain type is wrapped as (TG_DTYPE_COUNT for a block format) and whether tgc reads it */
typedef struct gguf_type_info {
  const char *name;
  int64_t block, size;
  tg_dtype dtype;
  bool supported;
} gguf_type_info;

/* the description of ggml type number t, NULL for a number ggml does not define */
const gguf_type_info *gguf_type_of(uint32_t t);

/* blocks: uint8 (nblocks, bytes per block) of a supported block format; returns a new lazy float32 tensor
 * (nblocks, elements per block) computing the dequantized values from those bytes (shifts, masks and
 * multiply-adds that fuse into the kernel that reads them), or NULL with an error */
tg_tensor *gguf_dequantize(tg_tensor *blocks, uint32_t type);
/* rows as gguf_tensor_rows gives them (uint8 (r, bytes per row) of a block format, or a plain type's (r, cols)):
 * a new lazy float32 (r, cols), the dequantize (or cast) of exactly those rows, or NULL with an error */
tg_tensor *gguf_dequantize_rows(tg_tensor *rows, uint32_t type);

/* ---- the reader's state (gguf.c parses, gguf_api.c answers) ---- */

/* the file's bytes, shared by the reader and the tensors wrapped on them */
typedef struct gguf_map {
  void *base;
  size_t len;
  int refcnt;
  bool heap;  /* a copy in memory (gguf_open_bytes), not a file mapping */
} gguf_map;
void gguf_map_ref(gguf_map *m);
void gguf_map_unref(void *ctx);   /* drops one reference; the last unmaps (an on_free hook for buffers) */

typedef struct gguf_str { uint64_t off, len; } gguf_str;   /* a string in the arena: off, len (a NUL follows) */

typedef struct gguf_kv {
  uint64_t key;        /* the key's place in the arena */
  tg_gguf_type type;
  tg_gguf_type elem;   /* an array's element type */
  uint64_t n;          /* an array's length; a string's length */
  /* a scalar or an array of scalars: the file offset of its bytes; a string: its place in the arena; an array
   * of strings: the index of its first string in sv */
  uint64_t pos;
} gguf_kv;

typedef struct gguf_tensor {
  uint64_t name;                /* its place in the arena */
  uint32_t type;                /* ggml's type number (known: gguf_type_of is not NULL) */
  int ndim;
  int64_t ne[TG_MAX_DIMS];      /* ggml's order: ne[0] is the fastest */
  uint64_t offset, nbytes;      /* in the data section, checked against it */
} gguf_tensor;

struct tg_gguf {
  char *path;
  gguf_map *map;
  const uint8_t *base;
  uint64_t len;
  uint32_t version;
  uint64_t alignment, data_off;   /* the data section starts at data_off */
  gguf_kv *kv;
  int64_t nkv;
  gguf_tensor *t;
  int64_t nt;
  char *strs;                     /* the arena: every key, name and string value, NUL-terminated */
  uint64_t nstrs, capstrs;
  gguf_str *sv;                   /* the strings of string arrays */
  uint64_t nsv;
  int64_t *kslots, *tslots;       /* name tables: index + 1, or 0 (open addressing) */
  uint64_t nkslots, ntslots;
};

/* records "gguf: <path>: <message>" and returns st */
tg_status gguf_error(const tg_gguf *g, tg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* the index of a key (tensors false) or a tensor name, -1 if absent */
int64_t gguf_find(const tg_gguf *g, bool tensors, const char *name);

/* tensor name as the file stores it, a new tensor of the caller's scope, its ggml type in *type: a plain type as
 * tg_gguf_tensor gives it, a block format as its bytes, uint8 (rows, bytes per row). A row's blocks are
 * contiguous, so a window of rows (tg_shrink_at) is the quantized data of those rows alone; NULL with an error */
tg_tensor *gguf_tensor_rows(tg_gguf *g, const char *name, uint32_t *type);

/* tg_gguf_open over a copy of n bytes (name for messages): the fuzz target's entry point */
tg_gguf *gguf_open_bytes(const char *name, const void *bytes, size_t n);

#endif
