/* onnx_model.h — an ONNX file parsed into plain structs (onnx_model.c), for the runner (onnx_run.c).
 *
 * Everything a model holds lives in its arena and in the byte mappings it keeps (the file itself, mapped or
 * copied, and the external data files), freed together by onnx_model_free. Tensor data is checked at parse
 * time: a TensorProto's bytes are exactly numel * element size in tgc's layout (little-endian), whether they
 * came from raw_data, a typed field (converted into the arena) or an external file. */
#ifndef TG_ONNX_MODEL_H
#define TG_ONNX_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnx_op.h"

/* bytes the model keeps: a mapped file or a heap copy, reference-counted (tensors wrapping them hold one) */
typedef struct onnx_map {
  void *base;
  size_t len;
  int refcnt;
  bool heap;                 /* mem_alloc'd, else mmapped */
  const char *location;      /* an external data file's name as the model gives it (NULL for the model) */
  struct onnx_map *next;     /* the model's list */
} onnx_map;
void onnx_map_ref(onnx_map *m);
void onnx_map_unref(void *m);   /* (onnx_map *) as an on_free callback */

/* a parsed TensorProto */
typedef struct onnx_tensor_proto {
  const char *name;
  int32_t data_type;         /* TensorProto.DataType */
  bool supported;            /* data_type has a tgc dtype (dt); when false data is NULL */
  tg_dtype dt;
  int ndim;
  int64_t dims[TG_MAX_DIMS];
  int64_t numel;
  const void *data;          /* nbytes = numel * tg_dtype_size(dt) bytes, little-endian; may be misaligned */
  size_t nbytes;
  onnx_map *map;             /* the mapping data points into, or NULL (the arena) */
} onnx_tensor_proto;

/* a ValueInfoProto */
typedef struct onnx_value_info {
  const char *name;
  bool is_tensor;            /* a tensor type (else a sequence, map, optional, sparse tensor, or no type) */
  bool has_type;
  int32_t elem_type;         /* TensorProto.DataType; 0: not given */
  int ndim;                  /* -1: no shape given */
  int64_t dims[TG_MAX_DIMS]; /* -1: named or unknown */
  const char *dim_names[TG_MAX_DIMS];
} onnx_value_info;

typedef struct onnx_graph {
  const char *name;
  int nnodes;
  onnx_node *nodes;
  int ninits;
  onnx_tensor_proto *inits;
  int ninputs, noutputs, nvalue_infos;
  onnx_value_info *inputs, *outputs, *value_infos;
  void *run;                 /* the runner's per-graph data (onnx_run.c), freed by it */
} onnx_graph;

typedef struct onnx_opset_id { const char *domain; int64_t version; } onnx_opset_id;

typedef struct onnx_model {
  int64_t ir_version;
  int nopsets;
  onnx_opset_id *opsets;
  onnx_graph *graph;
  struct onnx_arena *arena;
  onnx_map *maps;            /* the file's bytes first, then external data files */
} onnx_model;

/* parses a whole ModelProto from bytes (copied when copy, else mapped by the caller and handed over in map);
 * name names the file in messages; dir is where external data files are (NULL: refused). NULL on error
 * (TG_ERR_IO for a malformed file, TG_ERR_ARG for what tgc does not support, TG_ERR_NOMEM) */
onnx_model *onnx_model_parse(onnx_map *file, const char *name, const char *dir);
void onnx_model_free(onnx_model *m);
/* maps a file (a regular file, at most max bytes); NULL with the error set */
onnx_map *onnx_map_file(const char *path, const char *what);
/* a heap copy of n bytes; NULL on error */
onnx_map *onnx_map_copy(const void *data, size_t n);
/* parses one TensorProto from bytes into *t (its data pointing into file or into arena a); a new arena is
 * made when *a is NULL. false with the error set */
bool onnx_tensor_parse(onnx_map *file, const char *name, onnx_tensor_proto *t, struct onnx_arena **a);
void onnx_arena_free(struct onnx_arena *a);

/* an ONNX type's name ("float", "string", ...) for messages */
const char *onnx_type_name(int32_t onnx_type);

#endif
