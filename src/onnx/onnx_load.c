/* onnx_load.c — the public calls of tg.h's "ONNX models": loading a model (parse, then prepare every graph:
 * initializer tensors, operators found at the model's opsets or refused, values checked to be defined before
 * they are read), its inputs and outputs, running it on named inputs (dtypes, shapes and named dimensions
 * checked), and reading single TensorProto files. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_run.h"
#include "tensor/tensor.h"
#include "uop/uop.h"

#define KNOWN_MAX 4096

/* ---- a set of names (borrowed strings) with counts, by open addressing ------------------------------------- */

typedef struct strmap {
  const char **keys;
  int *vals;
  int64_t cap, used;
  const struct strmap *parent;   /* lookups fall back to it (an enclosing graph's names) */
} strmap;

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int64_t sm_slot(const strmap *m, const char *k) {
  for (uint64_t i = hash_name(k) & (uint64_t)(m->cap - 1);; i = (i + 1) & (uint64_t)(m->cap - 1))
    if (!m->keys[i] || !strcmp(m->keys[i], k)) return (int64_t)i;
}

static bool sm_put(strmap *m, const char *k, int v) {
  if ((m->used + 1) * 2 > m->cap) {
    int64_t nc = m->cap ? m->cap * 2 : 64;
    strmap n = {.keys = mem_calloc((size_t)nc, sizeof *n.keys), .vals = mem_calloc((size_t)nc, sizeof *n.vals), .cap = nc};
    if (!n.keys || !n.vals) {
      free(n.keys);
      free(n.vals);
      return false;
    }
    for (int64_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        int64_t s = sm_slot(&n, m->keys[i]);
        n.keys[s] = m->keys[i];
        n.vals[s] = m->vals[i];
      }
    n.used = m->used;
    n.parent = m->parent;
    free(m->keys);
    free(m->vals);
    *m = n;
  }
  int64_t s = sm_slot(m, k);
  if (!m->keys[s]) m->used++;
  m->keys[s] = k;
  m->vals[s] = v;
  return true;
}

static bool sm_has(const strmap *m, const char *k) {
  for (; m; m = m->parent)
    if (m->cap && m->keys[sm_slot(m, k)]) return true;
  return false;
}

static void sm_free(strmap *m) {
  free(m->keys);
  free(m->vals);
}

/* ---- preparing graphs ----------------------------------------------------------------------------------------- */

static int model_opset(const onnx_model *pm, const char *domain) {
  for (int i = 0; i < pm->nopsets; i++)
    if (!strcmp(pm->opsets[i].domain, domain)) return (int)(pm->opsets[i].version > 100000 ? 100000 : pm->opsets[i].version);
  return -1;
}

/* the value a node reads by an attribute rather than as an input (onnx_value_named), or NULL: Gradient's y */
static const char *attr_reads(const onnx_node *n) {
  if (strcmp(n->op_type, "Gradient") || strcmp(n->domain, "ai.onnx.preview.training")) return NULL;
  const onnx_attr *a = onnx_attr_find(n, "y");
  return a && a->type == ONNX_ATTR_STRING && a->s && a->s[0] ? a->s : NULL;
}

/* every name the nodes of g (and their subgraphs) read, recorded in last with value idx */
static bool record_reads(const onnx_graph *g, strmap *last, int idx) {
  for (int i = 0; i < g->nnodes; i++) {
    const onnx_node *n = &g->nodes[i];
    for (int j = 0; j < n->nin; j++)
      if (n->inputs[j][0] && !sm_put(last, n->inputs[j], idx)) return false;
    if (attr_reads(n) && !sm_put(last, attr_reads(n), idx)) return false;
    for (int a = 0; a < n->nattrs; a++)
      if (n->attrs[a].g && !record_reads(n->attrs[a].g, last, idx)) return false;
  }
  return true;
}

void onnx_graph_unprepare(onnx_graph *g) {
  graph_run *gr = g->run;
  for (int i = 0; i < g->nnodes; i++)
    for (int a = 0; a < g->nodes[i].nattrs; a++)
      if (g->nodes[i].attrs[a].g) onnx_graph_unprepare((onnx_graph *)g->nodes[i].attrs[a].g);
  if (!gr) return;
  for (int i = 0; gr->inits && i < g->ninits; i++) tg_free(gr->inits[i]);
  for (int i = 0; gr->init_known && i < g->ninits; i++) known_free(gr->init_known[i]);
  for (int i = 0; gr->release && i < g->nnodes; i++) free(gr->release[i]);
  free(gr->inits);
  free(gr->init_known);
  free(gr->defs);
  free(gr->nrelease);
  free(gr->release);
  free(gr);
  g->run = NULL;
}

static tg_status prepare(tg_onnx *m, onnx_graph *g, const char *where, const strmap *outer) {
  graph_run *gr = mem_calloc(1, sizeof *gr);
  if (!gr) return TG_ERR_NOMEM;
  g->run = gr;
  size_t ni = (size_t)(g->ninits ? g->ninits : 1), nn = (size_t)(g->nnodes ? g->nnodes : 1);
  gr->inits = mem_calloc(ni, sizeof *gr->inits);
  gr->init_known = mem_calloc(ni, sizeof *gr->init_known);
  gr->defs = mem_calloc(nn, sizeof *gr->defs);
  gr->nrelease = mem_calloc(nn, sizeof *gr->nrelease);
  gr->release = mem_calloc(nn, sizeof *gr->release);
  if (!gr->inits || !gr->init_known || !gr->defs || !gr->nrelease || !gr->release) return TG_ERR_NOMEM;
  strmap defined = {.parent = outer}, last = {0};
  tg_status st = TG_OK;
  char what[300];
  for (int i = 0; i < g->ninits && !st; i++) {
    const onnx_tensor_proto *t = &g->inits[i];
    snprintf(what, sizeof what, "%s: initializer", m->name);
    if (!(gr->inits[i] = onnx_tensor_from_proto(t, what))) st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
    else if (t->numel <= KNOWN_MAX && tg_dtype_size(t->dt) && t->nbytes) gr->init_known[i] = known_from_bytes(t->dt, t->data, t->numel);
    else if (t->numel == 0) gr->init_known[i] = known_new(0);
    if (!st && !sm_put(&defined, t->name, 1)) st = TG_ERR_NOMEM;
  }
  for (int i = 0; i < g->ninputs && !st; i++)
    if (!sm_put(&defined, g->inputs[i].name, 1)) st = TG_ERR_NOMEM;
  for (int i = 0; i < g->nnodes && !st; i++) {
    onnx_node *n = &g->nodes[i];
    int opset = model_opset(m->pm, n->domain);
    if (opset < 0 && !n->domain[0]) opset = 1;
    if (opset < 0) {
      st = TG_ERR_ARG;
      tg_set_error(st, "onnx: %s: %snode %d (%s '%s'): its domain '%s' is not imported by the model", m->name, where, i,
                   n->op_type, n->name, n->domain);
      break;
    }
    if (!(gr->defs[i] = onnx_find_op(n->domain, n->op_type, opset))) {
      st = TG_ERR_ARG;
      tg_set_error(st, "onnx: %s: %snode %d '%s': operator %s (domain '%s', opset %d) is not supported", m->name, where, i,
                   n->name, n->op_type, n->domain[0] ? n->domain : "ai.onnx", opset);
      break;
    }
    for (int j = 0; j < n->nin && !st; j++)
      if (n->inputs[j][0] && !sm_has(&defined, n->inputs[j])) {
        st = TG_ERR_IO;
        tg_set_error(st, "onnx: %s: %snode %d (%s '%s'): input %d reads '%s', which no input, initializer or earlier node defines",
                     m->name, where, i, n->op_type, n->name, j, n->inputs[j]);
      }
    if (!st && attr_reads(n) && !sm_has(&defined, attr_reads(n))) {
      st = TG_ERR_IO;
      tg_set_error(st, "onnx: %s: %snode %d (%s '%s'): attribute y reads '%s', which no input, initializer or earlier node defines",
                   m->name, where, i, n->op_type, n->name, attr_reads(n));
    }
    for (int a = 0; a < n->nattrs && !st; a++)
      if (n->attrs[a].g) {
        char sub[300];
        snprintf(sub, sizeof sub, "%snode %d (%s '%s'): attribute '%s': ", where, i, n->op_type, n->name, n->attrs[a].name);
        st = prepare(m, (onnx_graph *)n->attrs[a].g, sub, &defined);
      }
    for (int k = 0; k < n->nout && !st; k++)
      if (n->outputs[k][0] && !sm_put(&defined, n->outputs[k], 1)) st = TG_ERR_NOMEM;
  }
  for (int j = 0; j < g->noutputs && !st; j++)
    if (!sm_has(&defined, g->outputs[j].name)) {
      st = TG_ERR_IO;
      tg_set_error(st, "onnx: %s: %sgraph output '%s' is not defined by any input, initializer or node", m->name, where,
                   g->outputs[j].name);
    }
  /* each value is dropped after the last node that reads it (graph outputs never) */
  for (int i = 0; i < g->nnodes && !st; i++) {
    const onnx_node *n = &g->nodes[i];
    for (int j = 0; j < n->nin && !st; j++)
      if (n->inputs[j][0] && !sm_put(&last, n->inputs[j], i)) st = TG_ERR_NOMEM;
    if (!st && attr_reads(n) && !sm_put(&last, attr_reads(n), i)) st = TG_ERR_NOMEM;
    for (int a = 0; a < n->nattrs && !st; a++)
      if (n->attrs[a].g && !record_reads(n->attrs[a].g, &last, i)) st = TG_ERR_NOMEM;
  }
  for (int j = 0; j < g->noutputs && !st; j++)
    if (!sm_put(&last, g->outputs[j].name, -1)) st = TG_ERR_NOMEM;
  for (int64_t s = 0; s < last.cap && !st; s++)
    if (last.keys[s] && last.vals[s] >= 0) gr->nrelease[last.vals[s]]++;
  for (int i = 0; i < g->nnodes && !st; i++)
    if (gr->nrelease[i] && !(gr->release[i] = mem_calloc((size_t)gr->nrelease[i], sizeof(char *)))) st = TG_ERR_NOMEM;
  if (!st) {
    for (int i = 0; i < g->nnodes; i++) gr->nrelease[i] = 0;
    for (int64_t s = 0; s < last.cap; s++)
      if (last.keys[s] && last.vals[s] >= 0) gr->release[last.vals[s]][gr->nrelease[last.vals[s]]++] = last.keys[s];
  }
  sm_free(&defined);
  sm_free(&last);
  if (st == TG_ERR_NOMEM && tg_error_status() != TG_ERR_NOMEM) tg_set_error(st, "onnx: %s: out of memory preparing the graph", m->name);
  return st;
}

tg_status onnx_graph_prepare(tg_onnx *m, onnx_graph *g, const char *where) { return prepare(m, g, where, NULL); }

/* ---- loading -------------------------------------------------------------------------------------------------- */

void tg_onnx_free(tg_onnx *m) {
  if (!m) return;
  if (m->pm && m->pm->graph) onnx_graph_unprepare(m->pm->graph);
  onnx_model_free(m->pm);
  free(m->name);
  free(m->input_index);
  free(m->input_dt);
  free(m->output_dt);
  free(m);
}

static bool io_dtype(tg_onnx *m, const onnx_value_info *v, const char *kind, tg_dtype *dt) {
  if (!v->has_type) {   /* no type given: any dtype is taken */
    *dt = TG_DTYPE_COUNT;
    return true;
  }
  if (!v->is_tensor) {
    tg_set_error(TG_ERR_ARG, "onnx: %s: %s '%s' is not a tensor (a sequence, map or optional): not supported", m->name, kind, v->name);
    return false;
  }
  if (v->elem_type == 0) {
    *dt = TG_DTYPE_COUNT;
    return true;
  }
  if (!onnx_dtype_to_tg(v->elem_type, dt)) {
    tg_set_error(TG_ERR_ARG, "onnx: %s: %s '%s' has type %s, which tgc does not support", m->name, kind, v->name,
                 onnx_type_name(v->elem_type));
    return false;
  }
  return true;
}

static tg_onnx *finish_load(onnx_model *pm, const char *name) {
  tg_onnx *m = pm ? mem_calloc(1, sizeof *m) : NULL;
  if (!m) {
    onnx_model_free(pm);
    return NULL;
  }
  m->pm = pm;
  m->name = mem_strdup(name);
  const onnx_graph *g = pm->graph;
  m->input_index = mem_calloc((size_t)(g->ninputs ? g->ninputs : 1), sizeof *m->input_index);
  m->input_dt = mem_calloc((size_t)(g->ninputs ? g->ninputs : 1), sizeof *m->input_dt);
  m->output_dt = mem_calloc((size_t)(g->noutputs ? g->noutputs : 1), sizeof *m->output_dt);
  if (!m->name || !m->input_index || !m->input_dt || !m->output_dt) {
    tg_onnx_free(m);
    return NULL;
  }
  if (onnx_graph_prepare(m, pm->graph, "") != TG_OK) {
    tg_onnx_free(m);
    return NULL;
  }
  for (int i = 0; i < g->ninputs; i++) {
    bool is_init = false;
    for (int k = 0; k < g->ninits && !is_init; k++) is_init = !strcmp(g->inits[k].name, g->inputs[i].name);
    if (is_init) continue;
    if (!io_dtype(m, &g->inputs[i], "input", &m->input_dt[m->ninputs])) {
      tg_onnx_free(m);
      return NULL;
    }
    m->input_index[m->ninputs++] = i;
  }
  for (int i = 0; i < g->noutputs; i++)
    if (!io_dtype(m, &g->outputs[i], "output", &m->output_dt[i])) {
      tg_onnx_free(m);
      return NULL;
    }
  return m;
}

tg_onnx *tg_onnx_load(const char *path) {
  if (!path) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_load: path is NULL");
    return NULL;
  }
  onnx_map *f = onnx_map_file(path, "model");
  if (!f) return NULL;
  char *copy = mem_strdup(path);
  if (!copy) {
    onnx_map_unref(f);
    return NULL;
  }
  char *dir = dirname(copy);
  onnx_model *pm = onnx_model_parse(f, path, dir);
  free(copy);
  return finish_load(pm, path);
}

tg_onnx *tg_onnx_load_memory(const void *data, size_t size, const char *dir) {
  if (!data && size) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_load_memory: data is NULL");
    return NULL;
  }
  onnx_map *f = onnx_map_copy(data, size);
  if (!f) return NULL;
  return finish_load(onnx_model_parse(f, "(memory)", dir), "(memory)");
}

/* ---- inputs and outputs --------------------------------------------------------------------------------------- */

int tg_onnx_num_inputs(const tg_onnx *m) { return m ? m->ninputs : -1; }
int tg_onnx_num_outputs(const tg_onnx *m) { return m ? m->pm->graph->noutputs : -1; }

static tg_status io_info(const onnx_value_info *v, tg_dtype dt, tg_onnx_io *info) {
  *info = (tg_onnx_io){.name = v->name, .dtype = dt, .ndim = v->ndim};
  for (int d = 0; d < v->ndim; d++) {
    info->shape[d] = v->dims[d];
    info->dim_names[d] = v->dim_names[d];
  }
  return TG_OK;
}

tg_status tg_onnx_input(const tg_onnx *m, int i, tg_onnx_io *info) {
  if (!m || !info || i < 0 || i >= m->ninputs) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_input: input %d of a model with %d inputs", i, m ? m->ninputs : 0);
    return TG_ERR_ARG;
  }
  return io_info(&m->pm->graph->inputs[m->input_index[i]], m->input_dt[i], info);
}

tg_status tg_onnx_output(const tg_onnx *m, int i, tg_onnx_io *info) {
  if (!m || !info || i < 0 || i >= m->pm->graph->noutputs) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_output: output %d of a model with %d outputs", i, m ? m->pm->graph->noutputs : 0);
    return TG_ERR_ARG;
  }
  return io_info(&m->pm->graph->outputs[i], m->output_dt[i], info);
}

/* ---- running -------------------------------------------------------------------------------------------------- */

/* checks t against input v (declared dtype dt); binds its named dims in (names, sizes) */
static tg_status check_input(const tg_onnx *m, const onnx_value_info *v, tg_dtype dt, tg_tensor *t, const char **names,
                             int64_t *sizes, const char **first, int64_t *nnames) {
  char a[128], b[128];
  if (dt != TG_DTYPE_COUNT && tg_dtype_of(t) != dt) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_run: %s: input '%s' is %s, the model declares %s", m->name, v->name,
                 tg_dtype_name(tg_dtype_of(t)), tg_dtype_name(dt));
    return TG_ERR_ARG;
  }
  if (v->ndim < 0) return TG_OK;
  if (tg_ndim(t) != v->ndim) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_run: %s: input '%s' has shape %s, the model declares %d dims", m->name, v->name,
                 shape_str(a, sizeof a, tg_ndim(t), tg_shape_ptr(t)), v->ndim);
    return TG_ERR_ARG;
  }
  for (int d = 0; d < v->ndim; d++) {
    int64_t size = tg_shape(t, d);
    if (v->dims[d] >= 0 && size != v->dims[d]) {
      tg_set_error(TG_ERR_ARG, "tg_onnx_run: %s: input '%s' has shape %s, the model declares %s", m->name, v->name,
                   shape_str(a, sizeof a, tg_ndim(t), tg_shape_ptr(t)), shape_str(b, sizeof b, v->ndim, v->dims));
      return TG_ERR_ARG;
    }
    if (!v->dim_names[d]) continue;
    int64_t k = 0;
    while (k < *nnames && strcmp(names[k], v->dim_names[d])) k++;
    if (k == *nnames) {
      names[k] = v->dim_names[d];
      sizes[k] = size;
      first[k] = v->name;
      (*nnames)++;
    } else if (sizes[k] != size) {
      tg_set_error(TG_ERR_ARG, "tg_onnx_run: %s: input '%s' has dimension '%s' of size %lld, input '%s' gave it size %lld",
                   m->name, v->name, v->dim_names[d], (long long)size, first[k], (long long)sizes[k]);
      return TG_ERR_ARG;
    }
  }
  return TG_OK;
}

tg_status tg_onnx_run(tg_onnx *m, int n, const char *const *names, tg_tensor *const *inputs, tg_tensor **outputs) {
  if (!m || n < 0 || (n && (!names || !inputs)) || !outputs) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_run: NULL model, names, inputs or outputs");
    return TG_ERR_ARG;
  }
  const onnx_graph *g = m->pm->graph;
  for (int j = 0; j < g->noutputs; j++) outputs[j] = NULL;
  for (int k = 0; k < n; k++) {
    if (!names[k] || !inputs[k]) {
      tg_set_error(TG_ERR_ARG, "tg_onnx_run: %s: input %d is NULL (%s)", m->name, k, names[k] ? names[k] : "no name");
      return TG_ERR_ARG;
    }
    int found = -1;
    for (int i = 0; i < g->ninputs && found < 0; i++)
      if (!strcmp(g->inputs[i].name, names[k])) found = i;
    if (found < 0) {
      tg_set_error(TG_ERR_ARG, "tg_onnx_run: %s: the model has no input '%s'", m->name, names[k]);
      return TG_ERR_ARG;
    }
    for (int j = 0; j < k; j++)
      if (!strcmp(names[j], names[k])) {
        tg_set_error(TG_ERR_ARG, "tg_onnx_run: %s: input '%s' is given twice", m->name, names[k]);
        return TG_ERR_ARG;
      }
  }
  /* every input that no initializer defaults is given; types and shapes fit */
  int64_t maxn = (int64_t)(m->ninputs + n) * TG_MAX_DIMS + 1;
  const char **dnames = mem_calloc((size_t)maxn, sizeof *dnames), **first = mem_calloc((size_t)maxn, sizeof *first);
  int64_t *dsizes = mem_calloc((size_t)maxn, sizeof *dsizes);
  int64_t nnames = 0;
  tg_status st = dnames && first && dsizes ? TG_OK : TG_ERR_NOMEM;
  for (int i = 0; i < m->ninputs && !st; i++) {
    const onnx_value_info *v = &g->inputs[m->input_index[i]];
    int k = 0;
    while (k < n && strcmp(names[k], v->name)) k++;
    if (k == n) {
      st = TG_ERR_ARG;
      tg_set_error(st, "tg_onnx_run: %s: input '%s' is not given", m->name, v->name);
    } else {
      st = check_input(m, v, m->input_dt[i], inputs[k], dnames, dsizes, first, &nnames);
    }
  }
  /* inputs an initializer defaults, given by the caller: checked as well */
  for (int k = 0; k < n && !st; k++) {
    const onnx_value_info *v = NULL;
    for (int i = 0; i < g->ninputs && !v; i++)
      if (!strcmp(g->inputs[i].name, names[k])) v = &g->inputs[i];
    bool is_init = false;
    for (int i = 0; i < g->ninits && !is_init; i++) is_init = !strcmp(g->inits[i].name, names[k]);
    tg_dtype dt = TG_DTYPE_COUNT;
    if (is_init && v->has_type && v->is_tensor && v->elem_type && !onnx_dtype_to_tg(v->elem_type, &dt)) dt = TG_DTYPE_COUNT;
    if (is_init) st = check_input(m, v, dt, inputs[k], dnames, dsizes, first, &nnames);
  }
  free(dnames);
  free(first);
  free(dsizes);
  if (st) return st;
  onnx_ctx c = {.m = m};
  for (int k = 0; k < n && !st; k++) {
    /* the runner's own handle on the caller's value: never in the caller's scope */
    tg_tensor *t = tensor_new_unscoped(inputs[k]->u);
    st = t ? onnx_ctx_bind(&c, names[k], t, NULL) : TG_ERR_NOMEM;
  }
  tg_tensor **outs = st ? NULL : mem_calloc((size_t)(g->noutputs ? g->noutputs : 1), sizeof *outs);
  if (!st && !outs) st = TG_ERR_NOMEM;
  if (!st) st = onnx_run_graph(&c, g, outs);
  onnx_ctx_clear(&c);
  for (int j = 0; !st && j < g->noutputs; j++) {
    /* new handles, owned as any new tensor (the caller's innermost scope) */
    outputs[j] = tensor_new(outs[j]->u);
    if (!outputs[j]) st = TG_ERR_NOMEM;
  }
  for (int j = 0; outs && j < g->noutputs; j++) tg_free(outs[j]);
  free(outs);
  if (st)
    for (int j = 0; j < g->noutputs; j++) {
      tg_free(outputs[j]);
      outputs[j] = NULL;
    }
  return st;
}

/* ---- single tensors ------------------------------------------------------------------------------------------- */

static tg_tensor *tensor_from_map(onnx_map *f, const char *name) {
  struct onnx_arena *arena = NULL;
  onnx_tensor_proto t;
  tg_tensor *x = NULL;
  if (onnx_tensor_parse(f, name, &t, &arena)) {
    if (!t.supported) {
      tg_set_error(TG_ERR_ARG, "onnx: %s: tensor '%s' has type %s, which tgc does not support", name, t.name,
                   onnx_type_name(t.data_type));
    } else {
      static const uint64_t none = 0;
      x = tg_from_data(t.dt, t.ndim, t.dims, t.nbytes ? t.data : &none, t.nbytes);
    }
  }
  onnx_arena_free(arena);
  onnx_map_unref(f);
  return x;
}

tg_tensor *tg_onnx_read_tensor(const char *path) {
  if (!path) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_read_tensor: path is NULL");
    return NULL;
  }
  onnx_map *f = onnx_map_file(path, "tensor file");
  return f ? tensor_from_map(f, path) : NULL;
}

tg_tensor *tg_onnx_tensor_from_memory(const void *data, size_t size) {
  if (!data && size) {
    tg_set_error(TG_ERR_ARG, "tg_onnx_tensor_from_memory: data is NULL");
    return NULL;
  }
  onnx_map *f = onnx_map_copy(data, size);
  return f ? tensor_from_map(f, "(memory)") : NULL;
}
