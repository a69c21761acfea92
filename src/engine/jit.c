/* jit.c — capture a step's kernels once, replay them.
 *
 * Call 1 runs the step (compiling what it needs). Call 2 runs it again with the capture hook on: every
 * launch is recorded with its program and buffers (all retained, so nothing they point at is freed).
 * Later calls check the inputs, swap the captured input buffers for the new ones and launch the records in
 * order: no graph is built, nothing is scheduled, compiled or allocated. Parameters and optimizer state are
 * updated in place (tg_assign writes into the old buffer), so their buffers are the same in every replay.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/jit.h"
#include "tensor/tensor.h"

struct tg_jit {
  tg_jit_fn fn;
  void *ctx;
  int nin, nout, calls;
  jit_capture cap;
  bool captured;
  tg_buffer **in_bufs;     /* the inputs' buffers during the capture */
  tg_buffer **out_bufs;    /* the outputs' buffers (retained) */
  uop **in_shape;          /* the captured inputs' nodes: shapes and dtypes to check against */
  uop **out_shape;
};

static jit_capture *active;

jit_capture *jit_capturing(void) { return active; }

void jit_record(jit_capture *c, tg_program *prog, tg_buffer *const *bufs, int nbufs, int nthreads) {
  if (c->failed) return;
  if (c->n == c->cap) {
    int nc = c->cap ? c->cap * 2 : 64;
    jit_launch *nl = realloc(c->launches, (size_t)nc * sizeof *nl);
    if (!nl) { c->failed = true; return; }
    c->launches = nl;
    c->cap = nc;
  }
  tg_buffer **copy = malloc((size_t)(nbufs ? nbufs : 1) * sizeof *copy);
  if (!copy) { c->failed = true; return; }
  for (int i = 0; i < nbufs; i++) {
    copy[i] = bufs[i];
    buffer_retain(bufs[i]);
  }
  program_retain(prog);
  c->launches[c->n++] = (jit_launch){.prog = prog, .nbufs = nbufs, .nthreads = nthreads, .bufs = copy};
}

static void capture_clear(jit_capture *c) {
  for (int i = 0; i < c->n; i++) {
    for (int b = 0; b < c->launches[i].nbufs; b++) buffer_release(c->launches[i].bufs[b]);
    free(c->launches[i].bufs);
    program_release(c->launches[i].prog);
  }
  free(c->launches);
  *c = (jit_capture){0};
}

tg_jit *tg_jit_new(tg_jit_fn fn, void *ctx, int nin, int nout) {
  if (!fn || nin < 0 || nout < 0) {
    tg_set_error(TG_ERR_ARG, "tg_jit_new: %s", !fn ? "the step function is NULL" : "negative input or output count");
    return NULL;
  }
  tg_jit *j = calloc(1, sizeof *j);
  if (j) {
    j->in_bufs = calloc((size_t)nin + 1, sizeof *j->in_bufs);
    j->out_bufs = calloc((size_t)nout + 1, sizeof *j->out_bufs);
    j->in_shape = calloc((size_t)nin + 1, sizeof *j->in_shape);
    j->out_shape = calloc((size_t)nout + 1, sizeof *j->out_shape);
  }
  if (!j || !j->in_bufs || !j->out_bufs || !j->in_shape || !j->out_shape) {
    tg_jit_free(j);
    tg_set_error(TG_ERR_NOMEM, "tg_jit_new: out of memory");
    return NULL;
  }
  *j = (tg_jit){.fn = fn, .ctx = ctx, .nin = nin, .nout = nout, .in_bufs = j->in_bufs, .out_bufs = j->out_bufs,
                .in_shape = j->in_shape, .out_shape = j->out_shape};
  return j;
}

static void mark_jit(void *ctx) {
  tg_jit *j = ctx;
  for (int i = 0; i < j->nin; i++) uop_mark(j->in_shape[i]);
  for (int i = 0; i < j->nout; i++) uop_mark(j->out_shape[i]);
}

void tg_jit_free(tg_jit *j) {
  if (!j) return;
  uop_gc_remove_roots(mark_jit, j);
  capture_clear(&j->cap);
  for (int i = 0; i < j->nout; i++) buffer_release(j->out_bufs[i]);
  free(j->in_bufs);
  free(j->out_bufs);
  free(j->in_shape);
  free(j->out_shape);
  free(j);
}

int tg_jit_kernels(const tg_jit *j) { return j && j->captured ? j->cap.n : 0; }

static bool same_kind(const uop *a, const uop *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* runs the step normally; realizes the outputs so their kernels are part of the step */
static tg_status run_step(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  for (int i = 0; i < j->nout; i++) out[i] = NULL;
  tg_status st = j->fn(j->ctx, j->nin, in, j->nout, out);
  for (int i = 0; i < j->nout && st == TG_OK; i++)
    if (!out[i]) {
      if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_jit_call: the step returned no tensor for output %d", i);
      st = tg_error_status();
    }
  if (st == TG_OK) st = tg_realize_many(j->nout, out);
  if (st != TG_OK)
    for (int i = 0; i < j->nout; i++) { tg_free(out[i]); out[i] = NULL; }
  return st;
}

static tg_status capture(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  capture_clear(&j->cap);
  for (int i = 0; i < j->nin; i++) {
    j->in_bufs[i] = tensor_storage(in[i]);
    j->in_shape[i] = in[i]->u;
  }
  active = &j->cap;
  tg_status st = run_step(j, in, out);
  active = NULL;
  if (st == TG_OK && j->cap.failed) {  /* a host read inside the step (its error is set), or no memory */
    st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
    if (st == TG_ERR_NOMEM) tg_set_error(st, "tg_jit_call: out of memory recording the step");
  }
  if (st != TG_OK) {
    capture_clear(&j->cap);
    for (int i = 0; i < j->nout; i++) { tg_free(out[i]); out[i] = NULL; }
    return st;
  }
  for (int i = 0; i < j->nout; i++) {
    j->out_bufs[i] = tensor_storage(out[i]);
    if (!j->out_bufs[i]) {
      capture_clear(&j->cap);
      tg_set_error(TG_ERR_INTERNAL, "tg_jit_call: output %d has no buffer after the step", i);
      return TG_ERR_INTERNAL;
    }
    buffer_retain(j->out_bufs[i]);
    j->out_shape[i] = out[i]->u;
  }
  uop_gc_add_roots(mark_jit, j);
  j->captured = true;
  return TG_OK;
}

static tg_status replay(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  const tg_device *dev = device_default();
  tg_buffer *now[64], **cur = j->nin <= 64 ? now : malloc((size_t)j->nin * sizeof *cur);
  void *stack_ptrs[64];
  if (!cur || !dev) {
    if (cur != now) free(cur);
    return dev ? TG_ERR_NOMEM : tg_error_status();
  }
  tg_status st = TG_OK;
  for (int i = 0; i < j->nin && st == TG_OK; i++)
    if (!(cur[i] = tensor_storage(in[i]))) st = tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
  for (int k = 0; k < j->cap.n && st == TG_OK; k++) {
    jit_launch *l = &j->cap.launches[k];
    void **ptrs = l->nbufs <= 64 ? stack_ptrs : malloc((size_t)l->nbufs * sizeof *ptrs);
    if (!ptrs) { st = TG_ERR_NOMEM; break; }
    for (int b = 0; b < l->nbufs; b++) {
      tg_buffer *buf = l->bufs[b];
      for (int i = 0; i < j->nin; i++)
        if (buf == j->in_bufs[i]) buf = cur[i];
      ptrs[b] = buf->ptr;
    }
    st = dev->launch(l->prog, ptrs, l->nbufs, l->nthreads);
    if (ptrs != stack_ptrs) free(ptrs);
  }
  if (cur != now) free(cur);
  for (int i = 0; i < j->nout; i++) out[i] = NULL;
  for (int i = 0; i < j->nout && st == TG_OK; i++) {
    uop *o = j->out_shape[i];
    buffer_retain(j->out_bufs[i]);
    out[i] = tensor_new(mk_reshape(mk_buffer((tg_dtype)o->dtype, uop_numel(o), j->out_bufs[i]), o->ndim, o->shape));
    if (!out[i]) st = TG_ERR_NOMEM;
  }
  if (st != TG_OK)
    for (int i = 0; i < j->nout; i++) { tg_free(out[i]); out[i] = NULL; }
  return st;
}

tg_status tg_jit_call(tg_jit *j, tg_tensor *const *in, tg_tensor **out) {
  if (!j || (j->nin && !in) || (j->nout && !out)) {
    tg_set_error(TG_ERR_ARG, "tg_jit_call: %s", !j ? "the JIT is NULL" : "NULL input or output array");
    return TG_ERR_ARG;
  }
  if (active) {
    tg_set_error(TG_ERR_ARG, "tg_jit_call: a JIT step may not call another JIT while it is being captured");
    return TG_ERR_ARG;
  }
  for (int i = 0; i < j->nin; i++) {
    if (!in[i]) {
      if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_jit_call: input %d is NULL", i);
      return tg_error_status();
    }
    if (j->captured && !same_kind(in[i]->u, j->in_shape[i])) {
      char a[256], b[256];
      tg_set_error(TG_ERR_ARG, "tg_jit_call: input %d is %s %s, the captured step took %s %s", i,
                   tg_dtype_name((tg_dtype)in[i]->u->dtype), shape_str(a, sizeof a, in[i]->u->ndim, in[i]->u->shape),
                   tg_dtype_name((tg_dtype)j->in_shape[i]->dtype),
                   shape_str(b, sizeof b, j->in_shape[i]->ndim, j->in_shape[i]->shape));
      return TG_ERR_ARG;
    }
  }
  tg_status st = tg_realize_many(j->nin, in);  /* inputs are values with buffers before the step reads them */
  if (st != TG_OK) return st;
  j->calls++;
  const char *env = getenv("JIT");
  if (j->calls == 1 || (env && !strcmp(env, "0"))) return run_step(j, in, out);
  if (!j->captured) {
    st = capture(j, in, out);
    if (st != TG_OK) j->calls = 1;  /* the JIT stays usable: the next call tries to capture again */
    return st;
  }
  return replay(j, in, out);
}
