/* linearize.c — kernel AST -> loops -> one ordered list of UOps.
 *
 * Every node depends on a set of RANGEs (its loop variables). Output RANGEs open loops from the outside in;
 * a REDUCE opens loops for its own RANGEs around an accumulator. Before a loop opens, everything that does
 * not use its variable is emitted outside it ("hoisting"), so a value is computed in the outermost loop
 * that can compute it, and a value used after a loop is always declared before it.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

typedef struct lin_ctx {
  uop_map deps;      /* node -> range bit set (boxed) */
  uop_map emitted;
  uop_map seen;      /* node -> hoist pass that visited it: a DAG is walked once per pass, not per path */
  intptr_t pass;
  uop **ranges;      /* range id -> RANGE node */
  int nranges;
  uint64_t open;
  uop **out;
  int n, cap;
  int next_acc;
  bool fail;
  double flops, iters;
} lin_ctx;

static void push(lin_ctx *c, uop *u) {
  if (!u) { c->fail = true; return; }
  if (c->n == c->cap) {
    int nc = c->cap ? c->cap * 2 : 256;
    uop **no = realloc(c->out, (size_t)nc * sizeof *no);
    if (!no) { c->fail = true; return; }
    c->out = no;
    c->cap = nc;
  }
  c->out[c->n++] = u;
  if (uop_is_alu((uop_op)u->op)) c->flops += c->iters;
}

static uint64_t range_bit(lin_ctx *c, uop *r) {
  int64_t id = r->arg.i;
  return id < 64 ? 1ULL << id : 0;
}

/* the RANGEs u depends on, as a bit set (ranges have ids below 64) */
static uint64_t deps(lin_ctx *c, uop *u) {
  uint64_t *box = umap_get(&c->deps, u);
  if (box) return *box;
  uint64_t d = 0;
  if (u->op == OP_RANGE) d = range_bit(c, u);
  for (int i = 0; i < u->nsrc; i++) d |= deps(c, u->src[i]);
  if (u->op == OP_REDUCE)
    for (int i = 1; i < u->nsrc; i++) d &= ~range_bit(c, u->src[i]);
  box = malloc(sizeof *box);
  if (!box || !umap_put(&c->deps, u, box)) { free(box); c->fail = true; return d; }
  *box = d;
  return d;
}

static bool emitted(lin_ctx *c, uop *u) { return umap_get(&c->emitted, u) != NULL; }
static void mark(lin_ctx *c, uop *u) {
  static char yes;
  if (!umap_put(&c->emitted, u, &yes)) c->fail = true;
}

static void emit(lin_ctx *c, uop *u);

static void hoist_walk(lin_ctx *c, uop *u) {
  if (c->fail || emitted(c, u) || (intptr_t)umap_get(&c->seen, u) == c->pass) return;
  if (!umap_put(&c->seen, u, (void *)c->pass)) { c->fail = true; return; }
  if ((deps(c, u) & ~c->open) == 0) { emit(c, u); return; }
  if (u->op == OP_REDUCE) { hoist_walk(c, u->src[0]); return; }
  for (int i = 0; i < u->nsrc; i++) hoist_walk(c, u->src[i]);
}

/* emits every node under u that only uses open loop variables */
static void hoist(lin_ctx *c, uop *u) {
  c->pass++;
  hoist_walk(c, u);
}

static void open_loop(lin_ctx *c, uop *r) {
  push(c, r);
  mark(c, r);
  c->open |= range_bit(c, r);
  if (uop_is_const(r->src[0])) c->iters *= (double)r->src[0]->arg.i;
}

static void close_loop(lin_ctx *c, uop *r) {
  push(c, uop_new(OP_ENDRANGE, TG_INT32, 1, &r, (uop_arg){0}, 0, NULL));
  c->open &= ~range_bit(c, r);
  if (uop_is_const(r->src[0]) && r->src[0]->arg.i) c->iters /= (double)r->src[0]->arg.i;
}

static double identity(uop_op op, tg_dtype dt) {
  if (op == OP_MUL) return 1;
  if (op == OP_MAX) return dtype_min(dt);
  return 0;
}

static void emit_reduce(lin_ctx *c, uop *r) {
  tg_dtype dt = (tg_dtype)r->dtype;
  uop_op op = (uop_op)r->arg.i;
  hoist(c, r->src[0]);
  uop *init = uop_const(dt, identity(op, dt));
  uop *acc = uop_new(OP_DEFINE_ACC, dt, 1, &init, (uop_arg){.i = c->next_acc++}, 0, NULL);
  push(c, acc);
  for (int i = 1; i < r->nsrc; i++) {
    open_loop(c, r->src[i]);
    hoist(c, r->src[0]);
  }
  emit(c, r->src[0]);
  uop *upd = uop_binary(op, acc, r->src[0]);
  uop *s[2] = {acc, upd};
  push(c, upd);
  push(c, uop_new(OP_ASSIGN, dt, 2, s, (uop_arg){0}, 0, NULL));
  for (int i = r->nsrc - 1; i >= 1; i--) close_loop(c, r->src[i]);
  push(c, r);  /* from here on the REDUCE's value is its accumulator */
}

static void emit(lin_ctx *c, uop *u) {
  if (c->fail || emitted(c, u)) return;
  mark(c, u);
  if (u->op == OP_PARAM || u->op == OP_CONST) return;  /* rendered inline */
  if (u->op == OP_REDUCE) { emit_reduce(c, u); return; }
  for (int i = 0; i < u->nsrc; i++) emit(c, u->src[i]);
  push(c, u);
}

bool linearize(uop *ast, linear_program *out, kernel_info *info) {
  lin_ctx c = {.iters = 1};
  memset(out, 0, sizeof *out);
  int nn;
  uop **order = uop_toposort(ast, &nn);
  if (!order) return false;
  uop *globals[64];
  int ng = 0;
  for (int i = 0; i < nn; i++) {
    uop *u = order[i];
    if (u->op == OP_RANGE && u->arg.i >= 64) {
      free(order);
      tg_set_error(TG_ERR_INTERNAL, "linearize: more than 64 loops in one kernel");
      return false;
    }
    if (u->op == OP_RANGE && u->aux[0] != AX_REDUCE) globals[ng++] = u;
    if (u->op == OP_PARAM && u->arg.i + 1 > out->nparams) out->nparams = (int)u->arg.i + 1;
  }
  free(order);
  /* output loops in id order: ids were given outermost first */
  for (int i = 1; i < ng; i++)
    for (int j = i; j > 0 && globals[j]->arg.i < globals[j - 1]->arg.i; j--) {
      uop *t = globals[j];
      globals[j] = globals[j - 1];
      globals[j - 1] = t;
    }
  hoist(&c, ast);
  for (int i = 0; i < ng; i++) {
    open_loop(&c, globals[i]);
    hoist(&c, ast);
  }
  emit(&c, ast);
  for (int i = ng - 1; i >= 0; i--) close_loop(&c, globals[i]);
  for (size_t i = 0; i < c.deps.cap; i++)
    if (c.deps.keys[i]) free(c.deps.vals[i]);
  umap_free(&c.deps);
  umap_free(&c.emitted);
  umap_free(&c.seen);
  if (c.fail) {
    free(c.out);
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "linearize: out of memory");
    return false;
  }
  out->ops = c.out;
  out->n = c.n;
  if (info) info->flops = c.flops;
  return true;
}

void linear_program_free(linear_program *p) {
  free(p->ops);
  memset(p, 0, sizeof *p);
}
