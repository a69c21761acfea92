/* onnx_run.h — the runner's internals shared by onnx_run.c (the value table, running a graph, the services
 * of onnx_op.h), onnx_load.c (the public tg_onnx_* calls) and onnx_ops_control.c. */
#ifndef TG_ONNX_RUN_H
#define TG_ONNX_RUN_H

#include "onnx_model.h"

/* values known on the host: both as int64 (floats truncated) and as doubles */
typedef struct onnx_known {
  int64_t count;
  int64_t *ivals;
  double *dvals;
} onnx_known;

/* what the runner prepares per graph at load (onnx_graph.run) */
typedef struct graph_run {
  tg_tensor **inits;         /* the initializers as tensors (the model's references, never scoped) */
  onnx_known **init_known;   /* small initializers' values on the host, or NULL */
  const onnx_op_def **defs;  /* per node */
  int *nrelease;             /* per node: the values last read by it, dropped after it runs */
  const char ***release;
} graph_run;

struct tg_onnx {
  onnx_model *pm;
  char *name;                /* the file, for messages */
  int ninputs;               /* graph inputs that are not initializers */
  int *input_index;          /* their indices in pm->graph->inputs */
  tg_dtype *input_dt, *output_dt;
};

/* ONNX's seq(tensor) value: tensors of one dtype, the sequence's own references (a sequence is never changed:
 * SequenceInsert and SequenceErase make new ones, sharing the tensors) */
typedef struct onnx_seq {
  int64_t n;
  tg_tensor **items;
  tg_dtype dt;
} onnx_seq;

/* a sequence of n empty slots of dtype dt, or NULL (out of memory: recorded) */
onnx_seq *onnx_seq_new(int64_t n, tg_dtype dt);
void onnx_seq_free(onnx_seq *s);

/* a value of a graph being run: a tensor or a sequence */
typedef struct onnx_value {
  const char *name;          /* NULL: an empty slot */
  tg_tensor *t;              /* the runner's own reference (never scoped); NULL for a sequence */
  onnx_known *known;
  onnx_seq *seq;             /* a sequence value, or NULL */
} onnx_value;

struct onnx_ctx {
  onnx_ctx *parent;          /* the enclosing graph's values (subgraphs) */
  const tg_onnx *m;
  onnx_value *vals;
  int64_t cap, used;
  const onnx_node *node;     /* the node being run */
  onnx_known **pending;      /* onnx_set_known's values for its outputs */
  onnx_seq **pending_seqs;   /* onnx_set_seq's sequences for its outputs */
  onnx_known *scratch;       /* host values of a tensor outside the table (input_known) */
};

onnx_known *known_new(int64_t count);
void known_free(onnx_known *k);
/* values of a host buffer of dtype dt (unaligned is fine) as a new onnx_known, or NULL (f16/bf16, no memory) */
onnx_known *known_from_bytes(tg_dtype dt, const void *data, int64_t count);
/* as onnx_set_known with a whole record (doubles too), which it takes over (frees it when out of place) */
void onnx_set_pending_known(onnx_ctx *c, int k, onnx_known *kn);
/* int64 of a double (NaN 0, saturated at the int64 range), as a cast would without the undefined behaviour */
int64_t onnx_d2i(double d);

/* input i of the node being run when it holds a sequence (borrowed), else NULL (a tensor, or left out) */
const onnx_seq *onnx_input_seq(onnx_ctx *c, const onnx_node *n, int i);
/* makes output k of the node being run the sequence s (taken over, freed on failure) */
tg_status onnx_set_seq(onnx_ctx *c, int k, onnx_seq *s);
/* whether d is one of onnx_ops_seq's operators, the only ones a sequence may be given to */
bool onnx_op_takes_seqs(const onnx_op_def *d);

/* a tensor from a parsed TensorProto (never scoped: the caller owns it): wraps data in a mapping without a copy
 * when it is aligned, else a copy. what names it in messages */
tg_tensor *onnx_tensor_from_proto(const onnx_tensor_proto *t, const char *what);

/* runs graph g in ctx c (values bound already): its nodes in order, then the graph's outputs as new
 * references in outs[0 .. g->noutputs) */
tg_status onnx_run_graph(onnx_ctx *c, const onnx_graph *g, tg_tensor **outs);
/* binds name to t in c (takes the caller's reference to t, and known if given) */
tg_status onnx_ctx_bind(onnx_ctx *c, const char *name, tg_tensor *t, onnx_known *known);
void onnx_ctx_clear(onnx_ctx *c);
/* prepares g and its subgraphs for running (initializer tensors, operators, release lists); TG_ERR_ARG for an
 * unsupported operator or type */
tg_status onnx_graph_prepare(tg_onnx *m, onnx_graph *g, const char *where);
void onnx_graph_unprepare(onnx_graph *g);

#endif
