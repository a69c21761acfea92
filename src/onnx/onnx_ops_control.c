/* onnx_ops_control.c — the operators the runner itself provides (onnx_op.h's onnx_ops_control): Constant,
 * If (a branch chosen on the host), Loop (unrolled on the host: the condition and the trip count
 * are read each iteration, so a loop whose condition the graph computes runs a kernel per iteration) and Scan
 * (opset 9 on: unrolled over the scan axis, which has a static length, so nothing runs on the host). */
#include <stdlib.h>
#include <string.h>

#include "onnx_run.h"
#include "uop/uop.h"

#define CONST_KNOWN_MAX 4096

/* Constant: exactly one of value, value_float(s), value_int(s) (strings and sparse values refused) */
static tg_status op_constant(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  if (n->nattrs != 1) return onnx_fail(n, TG_ERR_ARG, "needs exactly one attribute, has %d", n->nattrs);
  const onnx_attr *a = &n->attrs[0];
  tg_tensor *t = NULL;
  if (!strcmp(a->name, "value") && a->type == ONNX_ATTR_TENSOR) {
    t = onnx_attr_tensor(c, n, "value");
    if (!t) return onnx_fail(n, tg_error_status() ? tg_error_status() : TG_ERR_ARG, "%s", tg_error());
  } else if (!strcmp(a->name, "value_float") && a->type == ONNX_ATTR_FLOAT) {
    t = tg_from_data(TG_FLOAT32, 0, NULL, &a->f, sizeof a->f);
  } else if (!strcmp(a->name, "value_floats") && a->type == ONNX_ATTR_FLOATS) {
    static const float none = 0;
    t = tg_from_data(TG_FLOAT32, 1, (int64_t[]){a->nfloats}, a->nfloats ? a->floats : &none, (size_t)a->nfloats * 4);
  } else if (!strcmp(a->name, "value_int") && a->type == ONNX_ATTR_INT) {
    t = tg_from_data(TG_INT64, 0, NULL, &a->i, sizeof a->i);
  } else if (!strcmp(a->name, "value_ints") && a->type == ONNX_ATTR_INTS) {
    static const int64_t none = 0;
    t = tg_from_data(TG_INT64, 1, (int64_t[]){a->nints}, a->nints ? a->ints : &none, (size_t)a->nints * 8);
  } else if (!strncmp(a->name, "value_string", 12) || !strcmp(a->name, "sparse_value")) {
    return onnx_fail(n, TG_ERR_ARG, "attribute '%s': string and sparse constants are not supported", a->name);
  } else {
    return onnx_fail(n, TG_ERR_ARG, "attribute '%s' of type %d is not a constant's value", a->name, (int)a->type);
  }
  if (!t) return tg_error_status();
  /* constants are shapes, axes, indices and exponents more often than not: the readers get them without a kernel
   * (read from the attribute's bytes, so a Constant inside a tg_jit capture reads nothing back from a device) */
  int64_t numel = tg_numel(t);
  if (numel <= CONST_KNOWN_MAX) {
    const void *bytes = NULL;
    tg_dtype dt = tg_dtype_of(t);
    if (a->type == ONNX_ATTR_TENSOR) bytes = a->t->data;
    else if (a->type == ONNX_ATTR_FLOAT) bytes = &a->f;
    else if (a->type == ONNX_ATTR_FLOATS) bytes = a->floats;
    else if (a->type == ONNX_ATTR_INT) bytes = &a->i;
    else bytes = a->ints;
    onnx_known *k = bytes || numel == 0 ? known_from_bytes(dt, bytes, numel) : NULL;
    if (k) onnx_set_pending_known(c, 0, k);   /* none for float16/bfloat16 (known_from_bytes): the readers realize */
  }
  out[0] = t;
  return TG_OK;
}

static tg_status op_if(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  const onnx_attr *then_b = onnx_attr_find(n, "then_branch"), *else_b = onnx_attr_find(n, "else_branch");
  if (!then_b || !then_b->g || !else_b || !else_b->g) return onnx_fail(n, TG_ERR_ARG, "needs then_branch and else_branch graphs");
  int64_t cond, cnt;
  tg_status st = onnx_input_ints(c, n, in, 0, &cond, 1, &cnt);
  if (st) return st;
  if (cnt != 1) return onnx_fail(n, TG_ERR_ARG, "the condition has %lld values, needs 1", (long long)cnt);
  return onnx_run_subgraph(c, cond ? then_b->g : else_b->g, 0, NULL, n->nout, out);
}

/* Loop(M, cond, v_initial...) -> (v_final..., scan_outputs...); body(iter, cond, v...) -> (cond, v..., scans...) */
static tg_status op_loop(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  const onnx_attr *ba = onnx_attr_find(n, "body");
  if (!ba || !ba->g) return onnx_fail(n, TG_ERR_ARG, "needs a body graph");
  const onnx_graph *body = ba->g;
  int ncarried = n->nin - 2;
  if (ncarried < 0) return onnx_fail(n, TG_ERR_ARG, "needs at least 2 inputs (M and cond, either may be empty)");
  int nscan = body->noutputs - 1 - ncarried;
  if (body->ninputs != ncarried + 2 || nscan < 0 || n->nout != ncarried + nscan)
    return onnx_fail(n, TG_ERR_ARG, "body takes %d inputs and gives %d outputs; the node has %d inputs and %d outputs",
                     body->ninputs, body->noutputs, n->nin, n->nout);
  int64_t max_trip = INT64_MAX, cond = 1, cnt;
  tg_status st = TG_OK;
  if (in[0] && (st = onnx_input_ints(c, n, in, 0, &max_trip, 1, &cnt))) return st;
  if (n->nin > 1 && in[1] && (st = onnx_input_ints(c, n, in, 1, &cond, 1, &cnt))) return st;
  if (!in[0] && !(n->nin > 1 && in[1])) return onnx_fail(n, TG_ERR_ARG, "an infinite loop (neither M nor cond given)");
  int nb = body->noutputs;
  tg_tensor **carried = mem_calloc((size_t)(ncarried + 1), sizeof *carried);
  tg_tensor **bin = mem_calloc((size_t)(ncarried + 2), sizeof *bin);
  tg_tensor **bout = mem_calloc((size_t)(nb + 1), sizeof *bout);
  tg_tensor ***scans = mem_calloc((size_t)(nscan + 1), sizeof *scans);
  int64_t iters = 0, cap = 0;
  if (!carried || !bin || !bout || !scans) st = TG_ERR_NOMEM;
  for (int k = 0; k < ncarried && !st; k++) carried[k] = tg_retain(in[2 + k]);
  for (int64_t it = 0; !st && it < max_trip && cond; it++) {
    if (it > 1000000) {
      st = onnx_fail(n, TG_ERR_ARG, "more than 1000000 iterations");
      break;
    }
    bin[0] = tg_scalar(TG_INT64, (double)it);
    bin[1] = tg_scalar(TG_BOOL, 1);
    for (int k = 0; k < ncarried; k++) bin[2 + k] = carried[k];
    if (!bin[0] || !bin[1]) st = TG_ERR_NOMEM;
    if (!st) st = onnx_run_subgraph(c, body, ncarried + 2, bin, nb, bout);
    tg_free(bin[0]);
    tg_free(bin[1]);
    if (st) break;
    for (int k = 0; k < ncarried; k++) {
      tg_free(carried[k]);
      carried[k] = bout[1 + k];
    }
    if (iters == cap) {
      cap = cap ? cap * 2 : 16;
      for (int s = 0; s < nscan && !st; s++) {
        tg_tensor **ns = mem_realloc(scans[s], (size_t)cap * sizeof *ns);
        if (!ns) st = TG_ERR_NOMEM;
        else scans[s] = ns;
      }
    }
    for (int s = 0; s < nscan; s++) {
      if (!st) scans[s][iters] = bout[1 + ncarried + s];
      else tg_free(bout[1 + ncarried + s]);
    }
    if (!st) iters++;
    tg_tensor *cv = bout[0];
    if (!st) {
      /* the body's condition on the host: it is the first output of the body, read through a tiny cast */
      tg_tensor *h = tg_cast(cv, TG_INT64);
      int64_t v = 0;
      st = h ? tg_to_host(h, &v, 8) : TG_ERR_NOMEM;
      tg_free(h);
      cond = v;
    }
    tg_free(cv);
  }
  for (int k = 0; k < ncarried; k++) {
    if (!st) out[k] = carried[k];
    else tg_free(carried[k]);
  }
  for (int s = 0; s < nscan; s++) {
    if (!st) {
      if (iters) out[ncarried + s] = tg_stack((int)iters, scans[s], 0);
      else out[ncarried + s] = tg_zeros(TG_FLOAT32, 1, (int64_t[]){0});
      if (!out[ncarried + s]) st = tg_error_status();
    }
    for (int64_t i = 0; i < iters; i++) tg_free(scans[s][i]);
    free(scans[s]);
  }
  free(carried);
  free(bin);
  free(bout);
  free(scans);
  return st;
}

/* an int list attribute of n values (dflt when absent), or an error */
static tg_status scan_attr(const onnx_node *n, const char *name, int64_t count, int64_t *vals) {
  const int64_t *v;
  int64_t k = onnx_attr_ints(n, name, &v);
  for (int64_t i = 0; i < count; i++) vals[i] = k < 0 ? 0 : i < k ? v[i] : 0;
  if (k >= 0 && k != count) return onnx_fail(n, TG_ERR_ARG, "attribute %s has %lld values, expected %lld", name, (long long)k, (long long)count);
  return TG_OK;
}

/* The scan of body over ns states vals[0..ns) and m scan inputs vals[ns..ns+m) along axes ia (made
 * non-negative here), forward or reversed (id); out[0..ns) the final states, out[ns..ns+k) the k scan outputs,
 * each element stacked along its axis oa, appended or prepended (od). */
static tg_status scan_run(onnx_ctx *c, const onnx_node *n, const onnx_graph *body, int ns, int m, int k,
                          tg_tensor *const *vals, int64_t *ia, const int64_t *id, const int64_t *oa, const int64_t *od,
                          tg_tensor **out) {
  tg_tensor **bin = mem_calloc((size_t)(ns + m + 1), sizeof *bin), **bout = mem_calloc((size_t)(ns + k + 1), sizeof *bout);
  tg_tensor **states = mem_calloc((size_t)(ns + 1), sizeof *states);
  tg_tensor ***elems = mem_calloc((size_t)(k + 1), sizeof *elems);
  tg_status st = bin && bout && states && elems ? TG_OK : TG_ERR_NOMEM;
  int64_t len = -1;
  for (int j = 0; j < m && !st; j++) {
    tg_tensor *x = vals[ns + j];
    int nd = tg_ndim(x);
    if (!x) st = onnx_fail(n, TG_ERR_ARG, "scan input %d is missing", j);
    else if (ia[j] < -nd || ia[j] >= nd) st = onnx_fail(n, TG_ERR_ARG, "scan input %d: axis %lld of a %d-d tensor", j, (long long)ia[j], nd);
    else {
      if (ia[j] < 0) ia[j] += nd;
      int64_t l = tg_shape(x, (int)ia[j]);
      if (len >= 0 && l != len) st = onnx_fail(n, TG_ERR_ARG, "scan inputs of lengths %lld and %lld", (long long)len, (long long)l);
      len = l;
    }
  }
  if (!st && len < 1) st = onnx_fail(n, TG_ERR_ARG, "a scan of length %lld is not supported", (long long)len);
  for (int j = 0; j < k && !st; j++)
    if (!(elems[j] = mem_calloc((size_t)len, sizeof **elems))) st = TG_ERR_NOMEM;
  for (int j = 0; j < ns && !st; j++) states[j] = tg_retain(vals[j]);
  for (int64_t t = 0; t < len && !st; t++) {
    for (int j = 0; j < ns; j++) bin[j] = states[j];
    for (int j = 0; j < m && !st; j++) {
      tg_tensor *x = vals[ns + j];
      int nd = tg_ndim(x);
      int64_t bounds[2 * TG_MAX_DIMS], pos = id[j] ? len - 1 - t : t;
      for (int d = 0; d < nd; d++) {
        bounds[2 * d] = d == ia[j] ? pos : 0;
        bounds[2 * d + 1] = d == ia[j] ? pos + 1 : tg_shape(x, d);
      }
      tg_tensor *sl = tg_shrink(x, nd, bounds);
      bin[ns + j] = tg_squeeze(sl, (int)ia[j]);
      tg_free(sl);
      if (!bin[ns + j]) st = tg_error_status();
    }
    if (!st) st = onnx_run_subgraph(c, body, ns + m, bin, ns + k, bout);
    for (int j = 0; j < m; j++) {
      tg_free(bin[ns + j]);
      bin[ns + j] = NULL;
    }
    if (st) break;
    for (int j = 0; j < ns; j++) {
      tg_free(states[j]);
      states[j] = bout[j];
    }
    for (int j = 0; j < k; j++) elems[j][od[j] ? len - 1 - t : t] = bout[ns + j];
  }
  for (int j = 0; j < k && !st; j++) {
    int r = tg_ndim(elems[j][0]) + 1;
    if (oa[j] < -r || oa[j] >= r) st = onnx_fail(n, TG_ERR_ARG, "scan output %d: axis %lld of a %d-d result", j, (long long)oa[j], r);
    else if (!(out[ns + j] = tg_stack((int)len, elems[j], (int)oa[j]))) st = tg_error_status();
  }
  for (int j = 0; j < ns; j++) {
    if (!st) out[j] = states[j];
    else if (states) tg_free(states[j]);
  }
  for (int j = 0; elems && j < k; j++) {
    for (int64_t t = 0; elems[j] && t < len; t++) tg_free(elems[j][t]);
    free(elems[j]);
  }
  free(elems);
  free(states);
  free(bin);
  free(bout);
  return st;
}

/* the body of a Scan node, its number of scan inputs m (of nvals values: states, then scan inputs) and of scan
 * outputs *k, checked against the node's outputs; NULL after recording the node's error */
static const onnx_graph *scan_body(const onnx_node *n, int nvals, int64_t *m, int *k) {
  const onnx_attr *ba = onnx_attr_find(n, "body");
  if (!ba || !ba->g) {
    onnx_fail(n, TG_ERR_ARG, "needs a body graph");
    return NULL;
  }
  const onnx_graph *body = ba->g;
  *m = onnx_attr_int(n, "num_scan_inputs", -1);
  if (*m < 1 || *m > nvals) {
    onnx_fail(n, TG_ERR_ARG, "num_scan_inputs %lld with %d inputs", (long long)*m, nvals);
    return NULL;
  }
  int ns = nvals - (int)*m;
  *k = body->noutputs - ns;
  if (*k < 0 || body->ninputs != nvals || n->nout != ns + *k) {
    onnx_fail(n, TG_ERR_ARG, "body takes %d inputs and gives %d outputs; the node has %d inputs (%lld scanned) and %d outputs",
              body->ninputs, body->noutputs, nvals, (long long)*m, n->nout);
    return NULL;
  }
  return body;
}

/* Scan (opset 9 on) (states..., scan_inputs...) -> (final states..., scan_outputs...); body(states..., slices...)
 * -> (states..., scan output elements...): the body runs once per position along each scan input's axis (forward
 * or reversed), the elements are stacked along each scan output's axis (appended or prepended) */
static tg_status op_scan(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int64_t m;
  int k;
  const onnx_graph *body = scan_body(n, n->nin, &m, &k);
  if (!body) return tg_error_status();
  int ns = n->nin - (int)m;
  int64_t *ia = mem_calloc((size_t)(2 * m + 2 * k + 1), sizeof *ia), *id = ia + m, *oa = id + m, *od = oa + k;
  tg_status st = ia ? TG_OK : TG_ERR_NOMEM;
  if (!st) st = scan_attr(n, "scan_input_axes", m, ia);
  if (!st) st = scan_attr(n, "scan_input_directions", m, id);
  if (!st) st = scan_attr(n, "scan_output_axes", k, oa);
  if (!st) st = scan_attr(n, "scan_output_directions", k, od);
  if (!st) st = scan_run(c, n, body, ns, (int)m, k, in, ia, id, oa, od, out);
  free(ia);
  return st;
}

/* Scan at opset 8: (sequence_lens, states..., scan_inputs...), every value with a leading batch axis, the scan
 * inputs scanned along axis 1 (directions per scan input), the outputs stacked along axis 1; each batch entry
 * runs the scan of the later opsets on its own and the results are stacked along axis 0. sequence_lens, when
 * given, must be the full length of every entry (shorter sequences are refused). */
static tg_status op_scan8(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nvals = n->nin - 1;
  int64_t m;
  int k;
  const onnx_graph *body = nvals >= 1 ? scan_body(n, nvals, &m, &k) : NULL;
  if (!body) return nvals >= 1 ? tg_error_status() : onnx_fail(n, TG_ERR_ARG, "needs states or scan inputs");
  int ns = nvals - (int)m, nout = ns + k;
  tg_tensor *const *vals = in + 1;
  for (int j = 0; j < nvals; j++)
    if (!vals[j] || tg_ndim(vals[j]) < (j < ns ? 1 : 2) || tg_shape(vals[j], 0) != tg_shape(vals[0], 0))
      return onnx_fail(n, TG_ERR_ARG, "input %d: every value needs the batch axis first (and the scan inputs a "
                       "sequence axis after it)", j + 1);
  int64_t B = tg_shape(vals[0], 0), L = tg_shape(vals[ns], 1);
  int64_t *ia = mem_calloc((size_t)(2 * m + 2 * k + 1), sizeof *ia), *id = ia + m, *oa = id + m, *od = oa + k;
  int64_t *lens = mem_calloc((size_t)B + 1, sizeof *lens), cnt = 0;
  tg_tensor **vb = mem_calloc((size_t)nvals, sizeof *vb), **ob = mem_calloc((size_t)(nout * B + 1), sizeof *ob);
  tg_status st = ia && lens && vb && ob ? TG_OK : TG_ERR_NOMEM;
  if (!st) st = scan_attr(n, "directions", m, id);
  if (!st && in[0]) st = onnx_input_ints(c, n, in, 0, lens, B, &cnt);
  for (int64_t b = 0; !st && in[0] && b < B; b++)
    if (cnt != B || lens[b] != L)
      st = onnx_fail(n, TG_ERR_ARG, "sequence_lens must be %lld (the scanned length) for each of %lld entries: "
                     "shorter sequences are not supported", (long long)L, (long long)B);
  for (int64_t b = 0; b < B && !st; b++) {  /* entry b of every value, its batch axis dropped */
    for (int j = 0; j < nvals && !st; j++) {
      int nd = tg_ndim(vals[j]);
      int64_t bounds[2 * TG_MAX_DIMS];
      for (int d = 0; d < nd; d++) bounds[2 * d] = d ? 0 : b, bounds[2 * d + 1] = d ? tg_shape(vals[j], d) : b + 1;
      tg_tensor *sl = tg_shrink(vals[j], nd, bounds);
      if (!(vb[j] = tg_squeeze(sl, 0))) st = tg_error_status();
      tg_free(sl);
    }
    for (int j = 0; j < m; j++) ia[j] = 0;
    if (!st) st = scan_run(c, n, body, ns, (int)m, k, vb, ia, id, oa, od, ob + b * nout);
    for (int j = 0; j < nvals; j++) {
      tg_free(vb[j]);
      vb[j] = NULL;
    }
  }
  tg_tensor **col = st ? NULL : mem_calloc((size_t)B, sizeof *col);
  if (!st && !col) st = TG_ERR_NOMEM;
  for (int i = 0; i < nout && !st; i++) {  /* output i: entry b's result at b */
    for (int64_t b = 0; b < B; b++) col[b] = ob[b * nout + i];
    if (!(out[i] = tg_stack((int)B, col, 0))) st = tg_error_status();
  }
  for (int64_t i = 0; ob && i < nout * B; i++) tg_free(ob[i]);
  free(col);
  free(ob);
  free(vb);
  free(lens);
  free(ia);
  return st;
}

const onnx_op_def onnx_ops_control[] = {
    {"Constant", "", 1, op_constant},
    {"If", "", 1, op_if},
    {"Loop", "", 1, op_loop},
    {"Scan", "", 8, op_scan8},
    {"Scan", "", 9, op_scan},
    {NULL, NULL, 0, NULL},
};
