/* onnx_op.h — the contract between the ONNX runner (onnx_model.c, onnx_run.c) and the operators
 * (ops_*.c): a node as the operators see it, its attributes, the runner's services, and the tables the
 * operators are listed in.
 *
 * An operator is a function from a node and its input tensors to its output tensors, written with tg.h's
 * public calls (so it is lazy, fuses and runs on any device). The runner owns every tensor it passes in; the
 * operator returns new references in out[] (one per node output; it may leave an optional output whose name
 * is "" NULL) and frees every temporary it made. On failure it returns the status with tg_error() set (use
 * onnx_fail), and the runner frees whatever out[] holds. */
#ifndef TG_ONNX_OP_H
#define TG_ONNX_OP_H

#include <stdbool.h>
#include <stdint.h>

#include "tg.h"

/* AttributeProto.AttributeType of onnx.proto */
typedef enum onnx_attr_type {
  ONNX_ATTR_UNDEFINED = 0, ONNX_ATTR_FLOAT = 1, ONNX_ATTR_INT = 2, ONNX_ATTR_STRING = 3, ONNX_ATTR_TENSOR = 4,
  ONNX_ATTR_GRAPH = 5, ONNX_ATTR_FLOATS = 6, ONNX_ATTR_INTS = 7, ONNX_ATTR_STRINGS = 8, ONNX_ATTR_TENSORS = 9,
  ONNX_ATTR_GRAPHS = 10, ONNX_ATTR_SPARSE_TENSOR = 11, ONNX_ATTR_SPARSE_TENSORS = 12, ONNX_ATTR_TYPE_PROTO = 13,
  ONNX_ATTR_TYPE_PROTOS = 14,
} onnx_attr_type;

struct onnx_tensor_proto;   /* a parsed TensorProto (onnx_model.h) */
struct onnx_graph;          /* a parsed GraphProto (onnx_model.h) */

typedef struct onnx_attr {
  const char *name;
  onnx_attr_type type;
  int64_t i;
  float f;
  const char *s;             /* NUL-terminated (ONNX strings are bytes; a NUL inside is refused at load) */
  const int64_t *ints;
  int64_t nints;
  const float *floats;
  int64_t nfloats;
  const char *const *strings;
  int64_t nstrings;
  const struct onnx_tensor_proto *t;   /* ONNX_ATTR_TENSOR: read it with onnx_attr_tensor */
  const struct onnx_graph *g;          /* ONNX_ATTR_GRAPH: If's branches, Loop's body */
} onnx_attr;

typedef struct onnx_node {
  const char *op_type;       /* "Conv" */
  const char *domain;        /* "" for the default domain (ai.onnx), "com.microsoft", ... */
  const char *name;          /* the node's name in the file, "" if none */
  int nin, nout;
  const char *const *inputs;   /* value names; "" for an optional input left out */
  const char *const *outputs;  /* value names; "" for an optional output not wanted */
  int nattrs;
  const onnx_attr *attrs;
} onnx_node;

/* The runner's state while it runs one graph: which opset each domain has, values known on the host. */
typedef struct onnx_ctx onnx_ctx;

/* in[i] is NULL where the node leaves input i out ("" or past the end: nin may be less than the operator's
 * maximum). out has n->nout slots, all NULL on entry. */
typedef tg_status (*onnx_op_fn)(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

typedef struct onnx_op_def {
  const char *op_type;
  const char *domain;        /* "" for ai.onnx */
  int since_opset;           /* the oldest opset of the domain whose semantics fn implements */
  onnx_op_fn fn;
} onnx_op_def;

/* The tables, each ending with an entry whose op_type is NULL; one per file of operators. */
extern const onnx_op_def onnx_ops_math[];      /* ops_math.c: elementwise, math, logic, casts, reductions, ... */
extern const onnx_op_def onnx_ops_shape[];     /* ops_shape.c: shapes, movement, gather/scatter, constants, ... */
extern const onnx_op_def onnx_ops_nn[];        /* ops_nn.c: matmul, conv, pools, norms, resize, quantization, ... */
extern const onnx_op_def onnx_ops_control[];   /* onnx_run.c: If, Loop, Identity, Constant, ... */
extern const onnx_op_def onnx_ops_training[];  /* ops_training.c: ai.onnx.preview.training (Adam, Gradient, ...) */
extern const onnx_op_def onnx_ops_seq[];       /* onnx_ops_seq.c: Sequence*, SplitToSequence, ConcatFromSequence,
                                                  Identity: the operators given sequences (onnx_run.h) */

/* the definition for op_type in domain at that domain's opset, or NULL (onnx_run.c) */
const onnx_op_def *onnx_find_op(const char *domain, const char *op_type, int opset);

/* ---- attributes (onnx_attr.c): the value of attribute name, or dflt when the node lacks it ---- */
const onnx_attr *onnx_attr_find(const onnx_node *n, const char *name);   /* NULL when absent */
bool onnx_attr_has(const onnx_node *n, const char *name);
int64_t onnx_attr_int(const onnx_node *n, const char *name, int64_t dflt);
double onnx_attr_float(const onnx_node *n, const char *name, double dflt);
const char *onnx_attr_string(const onnx_node *n, const char *name, const char *dflt);
/* the count (its values in *vals, borrowed from the model), or -1 when the node lacks the attribute */
int64_t onnx_attr_ints(const onnx_node *n, const char *name, const int64_t **vals);
int64_t onnx_attr_floats(const onnx_node *n, const char *name, const float **vals);
/* records "onnx: <op_type> node '<name>': <message>" as tg_error() with code st, and returns st */
tg_status onnx_fail(const onnx_node *n, tg_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- the runner's services (onnx_run.c) ---- */
int onnx_opset(const onnx_ctx *c, const char *domain);   /* the model's opset of domain ("" for ai.onnx) */
/* an ONNX TensorProto.DataType as a tgc dtype; false for a type tgc lacks (string, complex, float8, ...) */
bool onnx_dtype_to_tg(int32_t onnx_type, tg_dtype *out);
/* ONNX_ATTR_TENSOR attribute name as a new tensor, or NULL: absent (tg_error() untouched) or unreadable (set) */
tg_tensor *onnx_attr_tensor(onnx_ctx *c, const onnx_node *n, const char *name);
/* Input i's values on the host, as int64 (integers, bools, floats truncated): values the graph gives as
 * tensors but an operator needs to build its graph (a Reshape's shape, a Slice's starts, a reduction's axes,
 * TopK's k). Values known at load or computed on the host (initializers, Constant, Shape and what
 * onnx_set_known recorded) come without running anything; others are realized. Fails when input i is absent
 * or holds more than cap values; *count gets the number of values. */
tg_status onnx_input_ints(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, int64_t *vals, int64_t cap,
                          int64_t *count);
/* true when input i is present and its values are known on the host (initializers, Constant, Shape and what
 * onnx_set_known recorded), so onnx_input_ints reads them without running a kernel: an operator that computes
 * shape arithmetic on the host asks this first (reading an unknown input would realize it, and inside a
 * tg_jit capture would fail) */
bool onnx_input_known(const onnx_ctx *c, const onnx_node *n, int i);
/* as onnx_input_ints, as doubles (Resize's scales, a Clip's bounds, a Pad's constant) */
tg_status onnx_input_doubles(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, double *vals, int64_t cap,
                             int64_t *count);
/* records that output k of the node being run holds these values (Shape, Size, and shape arithmetic on
 * known values), so the operators that read them as ints need not run a kernel */
tg_status onnx_set_known(onnx_ctx *c, int k, const int64_t *vals, int64_t count);
/* the tensor the graph (or an enclosing one) holds under name, borrowed (the runner owns it: do not free), or
 * NULL when no value of that name is live: for an operator that reads a value by an attribute rather than as
 * an input (Gradient's y). The load keeps such a value alive until that node (onnx_load.c: attr_reads) */
tg_tensor *onnx_value_named(onnx_ctx *c, const char *name);
/* runs a subgraph (If's branch, Loop's body) with the values of the enclosing graph in scope: inputs bound
 * to the subgraph's formal inputs in order, outputs filled with new references (one per subgraph output) */
tg_status onnx_run_subgraph(onnx_ctx *c, const struct onnx_graph *g, int nin, tg_tensor *const *inputs,
                            int nout, tg_tensor **outputs);

#endif
