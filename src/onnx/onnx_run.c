/* onnx_run.c — running an ONNX graph as lazy tensors: the value table (by name, hashed), the host-known
 * values, the runner's services of onnx_op.h (onnx_find_op, onnx_input_ints, onnx_set_known, onnx_attr_tensor,
 * onnx_run_subgraph, onnx_opset), and the load-time preparation of each graph (initializer tensors, each node's
 * operator found or refused, each value's last reader, so values are dropped as soon as they are dead).
 *
 * Nodes run in file order (ONNX graphs are topologically sorted; the preparation checks that every input is
 * defined before it is read). Running builds the lazy graph of the whole model; kernels run only when the
 * caller realizes the outputs, or when an operator needs values on the host (onnx_input_ints). */
#include "onnx_run.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"
#include "uop/uop.h"

#define KNOWN_MAX 4096   /* initializers and constants up to this many elements are kept on the host too */

/* ---- host-known values ------------------------------------------------------------------------------------ */

int64_t onnx_d2i(double d) {
  if (isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return INT64_MAX;
  if (d <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)d;
}

onnx_known *known_new(int64_t count) {
  onnx_known *k = mem_calloc(1, sizeof *k);
  if (!k) return NULL;
  k->count = count;
  k->ivals = mem_alloc((size_t)(count ? count : 1) * sizeof *k->ivals);
  k->dvals = mem_alloc((size_t)(count ? count : 1) * sizeof *k->dvals);
  if (!k->ivals || !k->dvals) {
    known_free(k);
    return NULL;
  }
  return k;
}

void known_free(onnx_known *k) {
  if (!k) return;
  free(k->ivals);
  free(k->dvals);
  free(k);
}

onnx_known *known_from_bytes(tg_dtype dt, const void *data, int64_t count) {
  if (dt == TG_FLOAT16 || dt == TG_BFLOAT16) return NULL;
  onnx_known *k = known_new(count);
  if (!k) return NULL;
  const unsigned char *p = data;
  size_t es = tg_dtype_size(dt);
  for (int64_t i = 0; i < count; i++) {
    const unsigned char *q = p + (size_t)i * es;
    int64_t iv = 0;
    double dv = 0;
    switch (dt) {
    case TG_BOOL: iv = q[0] != 0; dv = (double)iv; break;
    case TG_INT8: { int8_t x; memcpy(&x, q, 1); iv = x; dv = x; break; }
    case TG_UINT8: iv = q[0]; dv = q[0]; break;
    case TG_INT16: { int16_t x; memcpy(&x, q, 2); iv = x; dv = x; break; }
    case TG_UINT16: { uint16_t x; memcpy(&x, q, 2); iv = x; dv = x; break; }
    case TG_INT32: { int32_t x; memcpy(&x, q, 4); iv = x; dv = x; break; }
    case TG_UINT32: { uint32_t x; memcpy(&x, q, 4); iv = x; dv = x; break; }
    case TG_INT64: { int64_t x; memcpy(&x, q, 8); iv = x; dv = (double)x; break; }
    case TG_UINT64: { uint64_t x; memcpy(&x, q, 8); iv = (int64_t)x; dv = (double)x; break; }
    case TG_FLOAT32: { float x; memcpy(&x, q, 4); dv = x; iv = onnx_d2i(x); break; }
    case TG_FLOAT64: { double x; memcpy(&x, q, 8); dv = x; iv = onnx_d2i(x); break; }
    default: break;
    }
    k->ivals[i] = iv;
    k->dvals[i] = dv;
  }
  return k;
}

/* ---- tensors from TensorProtos ------------------------------------------------------------------------------ */

tg_tensor *onnx_tensor_from_proto(const onnx_tensor_proto *t, const char *what) {
  if (!t->supported) {
    tg_set_error(TG_ERR_ARG, "onnx: %s '%s' has type %s, which tgc does not support", what, t->name,
                 onnx_type_name(t->data_type));
    return NULL;
  }
  size_t es = tg_dtype_size(t->dt);
  /* big and aligned data in a mapping: wrapped, the tensor holds the mapping (no copy on the CPU) */
  if (t->map && t->nbytes >= 4096 && (uintptr_t)t->data % es == 0) {
    onnx_map_ref(t->map);
    return tensor_wrap_memory(t->dt, t->ndim, t->dims, (void *)t->data, t->nbytes, onnx_map_unref, t->map);
  }
  static const uint64_t none = 0;
  tg_tensor *x = tg_from_data(t->dt, t->ndim, t->dims, t->nbytes ? t->data : &none, t->nbytes);
  return tensor_unscope(x);
}

/* ---- the value table: open addressing on a string hash ---------------------------------------------------- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static onnx_value *ctx_slot(onnx_ctx *c, const char *name) {
  if (!c->cap) return NULL;
  for (uint64_t i = hash_str(name) & (uint64_t)(c->cap - 1);; i = (i + 1) & (uint64_t)(c->cap - 1)) {
    onnx_value *v = &c->vals[i];
    if (!v->name || !strcmp(v->name, name)) return v;
  }
}

static onnx_value *ctx_find_own(onnx_ctx *c, const char *name) {
  onnx_value *v = ctx_slot(c, name);
  return v && v->name ? v : NULL;
}

/* the value name in c or an enclosing graph */
static onnx_value *ctx_find(onnx_ctx *c, const char *name) {
  for (; c; c = c->parent) {
    onnx_value *v = ctx_find_own(c, name);
    if (v) return v;
  }
  return NULL;
}

static bool ctx_grow(onnx_ctx *c) {
  int64_t ncap = c->cap ? c->cap * 2 : 64;
  onnx_value *nv = mem_calloc((size_t)ncap, sizeof *nv);
  if (!nv) return false;
  onnx_value *old = c->vals;
  int64_t ocap = c->cap;
  c->vals = nv;
  c->cap = ncap;
  for (int64_t i = 0; i < ocap; i++)
    if (old[i].name) *ctx_slot(c, old[i].name) = old[i];
  free(old);
  return true;
}

onnx_seq *onnx_seq_new(int64_t n, tg_dtype dt) {
  onnx_seq *s = mem_calloc(1, sizeof *s);
  if (s && !(s->items = mem_calloc((size_t)(n ? n : 1), sizeof *s->items))) {
    free(s);
    s = NULL;
  }
  if (!s) {
    tg_set_error(TG_ERR_NOMEM, "onnx: out of memory for a sequence of %lld tensors", (long long)n);
    return NULL;
  }
  s->n = n;
  s->dt = dt;
  return s;
}

void onnx_seq_free(onnx_seq *s) {
  if (!s) return;
  for (int64_t i = 0; i < s->n; i++) tg_free(s->items[i]);
  free(s->items);
  free(s);
}

static void value_free(onnx_value *v) {
  tg_free(v->t);
  known_free(v->known);
  onnx_seq_free(v->seq);
}

/* binds name to tensor t (with its known values) or to sequence seq, taking them over */
static tg_status ctx_put(onnx_ctx *c, const char *name, tg_tensor *t, onnx_known *known, onnx_seq *seq) {
  onnx_value nv = {.name = name, .t = t, .known = known, .seq = seq};
  if ((c->used + 1) * 2 > c->cap && !ctx_grow(c)) {
    value_free(&nv);
    tg_set_error(TG_ERR_NOMEM, "onnx: out of memory binding value '%s'", name);
    return TG_ERR_NOMEM;
  }
  onnx_value *v = ctx_slot(c, name);
  if (v->name) value_free(v);   /* a value defined twice (the preparation refuses it): the newer one wins */
  else c->used++;
  *v = nv;
  return TG_OK;
}

tg_status onnx_ctx_bind(onnx_ctx *c, const char *name, tg_tensor *t, onnx_known *known) {
  return ctx_put(c, name, t, known, NULL);
}

/* drops value name from c's own table (backward-shift deletion keeps the probe chains whole) */
static void ctx_release(onnx_ctx *c, const char *name) {
  onnx_value *v = ctx_find_own(c, name);
  if (!v) return;
  value_free(v);
  int64_t mask = c->cap - 1, i = v - c->vals;
  c->vals[i] = (onnx_value){0};
  c->used--;
  for (int64_t j = (i + 1) & mask; c->vals[j].name; j = (j + 1) & mask) {
    onnx_value w = c->vals[j];
    c->vals[j] = (onnx_value){0};
    *ctx_slot(c, w.name) = w;
  }
}

void onnx_ctx_clear(onnx_ctx *c) {
  for (int64_t i = 0; i < c->cap; i++)
    if (c->vals[i].name) value_free(&c->vals[i]);
  free(c->vals);
  known_free(c->scratch);
  c->scratch = NULL;
  c->vals = NULL;
  c->cap = c->used = 0;
}

/* ---- services of onnx_op.h ---------------------------------------------------------------------------------- */

int onnx_opset(const onnx_ctx *c, const char *domain) {
  const onnx_model *pm = c->m->pm;
  if (!strcmp(domain, "ai.onnx")) domain = "";
  for (int i = 0; i < pm->nopsets; i++)
    if (!strcmp(pm->opsets[i].domain, domain)) return (int)(pm->opsets[i].version > 100000 ? 100000 : pm->opsets[i].version);
  return 0;
}

const onnx_op_def *onnx_find_op(const char *domain, const char *op_type, int opset) {
  const onnx_op_def *const tables[] = {onnx_ops_math, onnx_ops_shape, onnx_ops_nn, onnx_ops_control, onnx_ops_training,
                                       onnx_ops_seq};
  const onnx_op_def *best = NULL;
  if (!strcmp(domain, "ai.onnx")) domain = "";
  for (size_t k = 0; k < sizeof tables / sizeof *tables; k++)
    for (const onnx_op_def *d = tables[k]; d->op_type; d++)
      if (!strcmp(d->op_type, op_type) && !strcmp(d->domain, domain) && d->since_opset <= opset &&
          (!best || d->since_opset > best->since_opset))
        best = d;
  return best;
}

tg_tensor *onnx_value_named(onnx_ctx *c, const char *name) {
  onnx_value *v = name && name[0] ? ctx_find(c, name) : NULL;
  return v ? v->t : NULL;
}

tg_tensor *onnx_attr_tensor(onnx_ctx *c, const onnx_node *n, const char *name) {
  const onnx_attr *a = onnx_attr_find(n, name);
  if (!a || a->type != ONNX_ATTR_TENSOR || !a->t) return NULL;
  char what[160];
  snprintf(what, sizeof what, "%s node '%s': attribute '%s'", n->op_type, n->name, name);
  return onnx_tensor_from_proto(a->t, what);
}

/* the host values of input i of node n, known or realized now (and remembered) */
static tg_status input_known(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, int64_t cap,
                             const onnx_known **out) {
  if (i < 0 || i >= n->nin || !in[i] || !n->inputs[i][0])
    return onnx_fail(n, TG_ERR_ARG, "input %d is needed on the host, and the node leaves it out", i);
  onnx_value *v = ctx_find(c, n->inputs[i]);
  if (v && v->known && v->t == in[i]) {
    if (v->known->count > cap)
      return onnx_fail(n, TG_ERR_ARG, "input %d ('%s') has %lld values, at most %lld are expected", i, n->inputs[i],
                       (long long)v->known->count, (long long)cap);
    *out = v->known;
    return TG_OK;
  }
  tg_tensor *t = in[i];
  int64_t count = tg_numel(t);
  if (count > cap)
    return onnx_fail(n, TG_ERR_ARG, "input %d ('%s') has %lld values, at most %lld are expected", i, n->inputs[i],
                     (long long)count, (long long)cap);
  tg_dtype dt = tg_dtype_of(t);
  bool is_float = dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64;
  tg_dtype host = dt == TG_FLOAT64 ? TG_FLOAT64 : is_float ? TG_FLOAT32 : TG_INT64;
  tg_tensor *h = dt == host ? tg_retain(t) : tg_cast(t, host);
  void *buf = mem_alloc((size_t)(count ? count : 1) * 8);
  tg_status st = h && buf ? tg_to_host(h, buf, (size_t)count * tg_dtype_size(host)) : TG_ERR_NOMEM;
  tg_free(h);
  onnx_known *k = st == TG_OK ? known_from_bytes(host, buf, count) : NULL;
  free(buf);
  if (!k) {
    if (st == TG_OK) st = TG_ERR_NOMEM;
    return onnx_fail(n, st, "reading input %d ('%s') on the host: %s", i, n->inputs[i], tg_error());
  }
  if (v && v->t == in[i]) {   /* remembered for the next reader */
    known_free(v->known);
    v->known = k;
    *out = k;
    return TG_OK;
  }
  /* a tensor the operator made itself (not a value of the table): kept until the next such read */
  known_free(c->scratch);
  c->scratch = k;
  *out = k;
  return TG_OK;
}

tg_status onnx_input_ints(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, int64_t *vals, int64_t cap,
                          int64_t *count) {
  const onnx_known *k;
  tg_status st = input_known(c, n, in, i, cap, &k);
  if (st) return st;
  memcpy(vals, k->ivals, (size_t)k->count * sizeof *vals);
  *count = k->count;
  return TG_OK;
}

tg_status onnx_input_doubles(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, double *vals, int64_t cap,
                             int64_t *count) {
  const onnx_known *k;
  tg_status st = input_known(c, n, in, i, cap, &k);
  if (st) return st;
  memcpy(vals, k->dvals, (size_t)k->count * sizeof *vals);
  *count = k->count;
  return TG_OK;
}

bool onnx_input_known(const onnx_ctx *c, const onnx_node *n, int i) {
  if (i < 0 || i >= n->nin || !n->inputs[i][0]) return false;
  onnx_value *v = ctx_find((onnx_ctx *)c, n->inputs[i]);
  return v && v->known;
}

void onnx_set_pending_known(onnx_ctx *c, int k, onnx_known *kn) {
  if (!c->node || k < 0 || k >= c->node->nout || !c->pending) {
    known_free(kn);
    return;
  }
  known_free(c->pending[k]);
  c->pending[k] = kn;
}

tg_status onnx_set_known(onnx_ctx *c, int k, const int64_t *vals, int64_t count) {
  const onnx_node *n = c->node;
  if (!n || k < 0 || k >= n->nout || !c->pending)
    return tg_set_error(TG_ERR_INTERNAL, "onnx_set_known: output %d of no node being run", k), TG_ERR_INTERNAL;
  onnx_known *kn = known_new(count);
  if (!kn) return onnx_fail(n, TG_ERR_NOMEM, "out of memory recording %lld known values", (long long)count);
  for (int64_t j = 0; j < count; j++) {
    kn->ivals[j] = vals[j];
    kn->dvals[j] = (double)vals[j];
  }
  known_free(c->pending[k]);
  c->pending[k] = kn;
  return TG_OK;
}

const onnx_seq *onnx_input_seq(onnx_ctx *c, const onnx_node *n, int i) {
  if (i < 0 || i >= n->nin || !n->inputs[i][0]) return NULL;
  onnx_value *v = ctx_find(c, n->inputs[i]);
  return v ? v->seq : NULL;
}

tg_status onnx_set_seq(onnx_ctx *c, int k, onnx_seq *s) {
  const onnx_node *n = c->node;
  if (!n || k < 0 || k >= n->nout || !c->pending_seqs) {
    onnx_seq_free(s);
    return tg_set_error(TG_ERR_INTERNAL, "onnx_set_seq: output %d of no node being run", k), TG_ERR_INTERNAL;
  }
  onnx_seq_free(c->pending_seqs[k]);
  c->pending_seqs[k] = s;
  return TG_OK;
}

tg_status onnx_run_subgraph(onnx_ctx *c, const onnx_graph *g, int nin, tg_tensor *const *inputs, int nout,
                            tg_tensor **outputs) {
  const onnx_node *n = c->node;
  if (nin != g->ninputs)
    return onnx_fail(n, TG_ERR_ARG, "subgraph '%s' takes %d inputs, %d given", g->name, g->ninputs, nin);
  if (nout != g->noutputs)
    return onnx_fail(n, TG_ERR_ARG, "subgraph '%s' has %d outputs, %d expected", g->name, g->noutputs, nout);
  onnx_ctx sub = {.parent = c, .m = c->m};
  tg_status st = TG_OK;
  for (int j = 0; j < nin && !st; j++) {
    tg_tensor *t = inputs[j] ? tensor_new_unscoped(((struct tg_tensor *)inputs[j])->u) : NULL;
    if (inputs[j] && !t) st = TG_ERR_NOMEM;
    else st = onnx_ctx_bind(&sub, g->inputs[j].name, t, NULL);
  }
  if (!st) st = onnx_run_graph(&sub, g, outputs);
  onnx_ctx_clear(&sub);
  return st;
}

/* ---- running a graph ------------------------------------------------------------------------------------------ */

/* the error of a failed node, with the node named when the message does not name it already */
static tg_status node_error(const onnx_node *n, tg_status st) {
  if (st == TG_OK) st = TG_ERR_INTERNAL;
  const char *e = tg_error();
  if (strncmp(e, "onnx:", 5)) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s", e[0] ? e : "failed without a message");
    onnx_fail(n, st, "%s", msg);
  }
  return st;
}

static tg_status run_node(onnx_ctx *c, const onnx_graph *g, int idx, tg_tensor **in, tg_tensor **out,
                          onnx_known **pending, onnx_seq **seqs) {
  const onnx_node *n = &g->nodes[idx];
  const graph_run *gr = g->run;
  for (int i = 0; i < n->nin; i++) {
    in[i] = NULL;
    if (!n->inputs[i][0]) continue;
    onnx_value *v = ctx_find(c, n->inputs[i]);
    if (!v) return onnx_fail(n, TG_ERR_ARG, "input %d reads '%s', which no earlier node or input defines", i, n->inputs[i]);
    if (v->seq && !onnx_op_takes_seqs(gr->defs[idx]))
      return onnx_fail(n, TG_ERR_ARG, "input %d ('%s') is a sequence; the operator takes tensors", i, n->inputs[i]);
    in[i] = v->t;
  }
  for (int k = 0; k < n->nout; k++) out[k] = NULL;
  for (int k = 0; k < n->nout; k++) pending[k] = NULL;
  for (int k = 0; k < n->nout; k++) seqs[k] = NULL;
  const onnx_node *saved = c->node;
  onnx_known **saved_p = c->pending;
  onnx_seq **saved_s = c->pending_seqs;
  c->node = n;
  c->pending = pending;
  c->pending_seqs = seqs;
  tg_error_clear();
  tg_status st = gr->defs[idx]->fn(c, n, in, out);
  c->node = saved;
  c->pending = saved_p;
  c->pending_seqs = saved_s;
  for (int k = 0; k < n->nout && !st; k++) {
    if (!n->outputs[k][0]) continue;
    if (!out[k] == !seqs[k]) st = onnx_fail(n, TG_ERR_INTERNAL, "output %d ('%s') was not produced", k, n->outputs[k]);
    else if (pending[k] && out[k] && pending[k]->count != tg_numel(out[k]))
      st = onnx_fail(n, TG_ERR_INTERNAL, "output %d: %lld known values for %lld elements", k, (long long)pending[k]->count,
                     (long long)tg_numel(out[k]));
  }
  if (st) {
    st = node_error(n, st);
    for (int k = 0; k < n->nout; k++) {
      tg_free(out[k]);
      known_free(pending[k]);
      onnx_seq_free(seqs[k]);
    }
    return st;
  }
  for (int k = 0; k < n->nout; k++) {
    if (!n->outputs[k][0] || st) {
      tg_free(out[k]);
      known_free(pending[k]);
      onnx_seq_free(seqs[k]);
      continue;
    }
    st = ctx_put(c, n->outputs[k], out[k] ? tensor_unscope(out[k]) : NULL, pending[k], seqs[k]);
  }
  for (int r = 0; r < gr->nrelease[idx]; r++) ctx_release(c, gr->release[idx][r]);
  return st;
}

tg_status onnx_run_graph(onnx_ctx *c, const onnx_graph *g, tg_tensor **outs) {
  const graph_run *gr = g->run;
  for (int i = 0; i < g->ninits; i++) {
    /* an initializer a graph input of the same name overrides (given by the caller) keeps the caller's */
    if (ctx_find_own(c, g->inits[i].name)) continue;
    onnx_known *k = NULL;
    if (gr->init_known[i]) {
      k = known_new(gr->init_known[i]->count);
      if (!k) return tg_set_error(TG_ERR_NOMEM, "onnx: out of memory"), TG_ERR_NOMEM;
      memcpy(k->ivals, gr->init_known[i]->ivals, (size_t)k->count * sizeof *k->ivals);
      memcpy(k->dvals, gr->init_known[i]->dvals, (size_t)k->count * sizeof *k->dvals);
    }
    tg_status st = onnx_ctx_bind(c, g->inits[i].name, tg_retain(gr->inits[i]), k);
    if (st) return st;
  }
  int maxin = 1, maxout = 1;
  for (int i = 0; i < g->nnodes; i++) {
    if (g->nodes[i].nin > maxin) maxin = g->nodes[i].nin;
    if (g->nodes[i].nout > maxout) maxout = g->nodes[i].nout;
  }
  /* per node: its inputs, outputs and outputs' known values (counts come from the file: on the heap) */
  tg_tensor **in = mem_alloc((size_t)(maxin + maxout) * sizeof *in);
  onnx_known **pending = mem_alloc((size_t)maxout * sizeof *pending);
  onnx_seq **seqs = mem_alloc((size_t)maxout * sizeof *seqs);
  tg_status st = in && pending && seqs ? TG_OK : TG_ERR_NOMEM;
  for (int i = 0; i < g->nnodes && !st; i++) st = run_node(c, g, i, in, in + maxin, pending, seqs);
  free(in);
  free(pending);
  free(seqs);
  for (int j = 0; j < g->noutputs; j++) outs[j] = NULL;
  for (int j = 0; j < g->noutputs && !st; j++) {
    onnx_value *v = ctx_find(c, g->outputs[j].name);
    if (v && v->seq) {
      st = TG_ERR_ARG;
      tg_set_error(st, "onnx: graph '%s': output '%s' is a sequence; graphs give tensors only", g->name,
                   g->outputs[j].name);
    } else if (!v || !v->t) {
      st = TG_ERR_ARG;
      tg_set_error(st, "onnx: graph '%s': output '%s' is never computed", g->name, g->outputs[j].name);
    } else {
      outs[j] = tg_retain(v->t);
    }
  }
  if (st)
    for (int j = 0; j < g->noutputs; j++) {
      tg_free(outs[j]);
      outs[j] = NULL;
    }
  return st;
}
