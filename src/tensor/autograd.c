/* autograd.c — reverse-mode gradients as more lazy graph.
 *
 * One rule per primitive op, written as a rule table for the rewrite engine's matcher: given a node and
 * the gradient flowing into it, a rule gives the gradient of each source. tg_backward walks the graph from
 * the loss in reverse topological order, only through nodes that lead to a tensor requiring a gradient,
 * and sums the contributions of every use. Nothing runs: the gradients are nodes that the scheduler fuses
 * with the forward pass.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

#define LN2 0.69314718055994530942

typedef struct grad_ctx {
  uop *g;          /* gradient flowing into the node */
  uop *out[3];     /* gradients of its sources, NULL: none */
} grad_ctx;

static uop *mul(uop *a, uop *b) { return mk_binary(OP_MUL, a, b); }
static uop *neg(uop *a) { return mk_unary(OP_NEG, a); }

/* a non-NULL marker: the rule filled ctx->out */
static uop *done(void) { return uop_const_int(TG_BOOL, 1); }

static uop *g_cast(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  if (dtype_is_float((tg_dtype)u->src[0]->dtype)) c->out[0] = mk_cast(c->g, (tg_dtype)u->src[0]->dtype);
  return done();
}
static uop *g_neg(void *ctx, uop *u, uop **cap) { grad_ctx *c = ctx; c->out[0] = neg(c->g); return done(); }
static uop *g_pass(void *ctx, uop *u, uop **cap) { grad_ctx *c = ctx; c->out[0] = c->g; return done(); }
static uop *g_none(void *ctx, uop *u, uop **cap) { return done(); }
/* 0, as tinygrad: floor, ceil, trunc and round give their input a zero gradient rather than none */
static uop *g_zero(void *ctx, uop *u, uop **cap) { grad_ctx *c = ctx; c->out[0] = mk_const_like(u->src[0], 0); return done(); }
static uop *g_recip(void *ctx, uop *u, uop **cap) {  /* d(1/x) = -1/x^2 = -ret*ret */
  grad_ctx *c = ctx;
  c->out[0] = mul(neg(c->g), mul(u, u));
  return done();
}
static uop *g_sin(void *ctx, uop *u, uop **cap) {  /* cos(x) = sin(pi/2 - x) */
  grad_ctx *c = ctx;
  uop *x = u->src[0];
  c->out[0] = mul(c->g, mk_unary(OP_SIN, mk_binary(OP_ADD, mk_const_like(x, M_PI / 2), neg(x))));
  return done();
}
static uop *g_log2(void *ctx, uop *u, uop **cap) {  /* 1 / (x ln 2) */
  grad_ctx *c = ctx;
  uop *x = u->src[0];
  c->out[0] = mk_binary(OP_FDIV, c->g, mul(x, mk_const_like(x, LN2)));
  return done();
}
static uop *g_exp2(void *ctx, uop *u, uop **cap) {  /* ret * ln 2 */
  grad_ctx *c = ctx;
  c->out[0] = mul(c->g, mul(u, mk_const_like(u, LN2)));
  return done();
}
static uop *g_sqrt(void *ctx, uop *u, uop **cap) {  /* 1 / (2 ret) */
  grad_ctx *c = ctx;
  c->out[0] = mk_binary(OP_FDIV, c->g, mul(u, mk_const_like(u, 2)));
  return done();
}
static uop *g_add(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  c->out[0] = c->out[1] = c->g;
  return done();
}
static uop *g_mul(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  c->out[0] = mul(c->g, u->src[1]);
  c->out[1] = mul(c->g, u->src[0]);
  return done();
}
static uop *g_fdiv(void *ctx, uop *u, uop **cap) {  /* x/y: 1/y and -x/y^2 */
  grad_ctx *c = ctx;
  uop *x = u->src[0], *y = u->src[1];
  c->out[0] = mk_binary(OP_FDIV, c->g, y);
  c->out[1] = neg(mk_binary(OP_FDIV, mul(c->g, x), mul(y, y)));
  return done();
}
static uop *g_max(void *ctx, uop *u, uop **cap) {  /* ties split the gradient, as tinygrad */
  grad_ctx *c = ctx;
  uop *x = u->src[0], *y = u->src[1];
  uop *half = mul(c->g, mk_const_like(c->g, 0.5)), *zero = mk_const_like(c->g, 0);
  uop *eq = mk_binary(OP_CMPEQ, x, y);
  c->out[0] = mk_where(eq, half, mk_where(mk_binary(OP_CMPLT, y, x), c->g, zero));
  c->out[1] = mk_where(eq, half, mk_where(mk_binary(OP_CMPLT, x, y), c->g, zero));
  return done();
}
static uop *g_where(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  uop *zero = mk_const_like(c->g, 0);
  c->out[1] = mk_where(u->src[0], c->g, zero);
  c->out[2] = mk_where(u->src[0], zero, c->g);
  return done();
}
static uop *g_pow(void *ctx, uop *u, uop **cap) {  /* not built by the frontend (pow is exp2/log2); kept exact */
  grad_ctx *c = ctx;
  uop *x = u->src[0], *y = u->src[1];
  c->out[0] = mul(c->g, mul(y, mk_binary(OP_FDIV, u, x)));
  c->out[1] = mul(c->g, mul(u, mul(mk_unary(OP_LOG2, x), mk_const_like(x, LN2))));
  return done();
}

/* the reduced axes of a REDUCE_AXIS as flags */
static void reduced_axes(const uop *u, bool *f) {
  for (int i = 0; i < u->ndim; i++) f[i] = u->aux[i] != 0;
}

static uop *g_reduce(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  uop *x = u->src[0];
  uop *ge = mk_expand(c->g, x->ndim, x->shape);
  if (u->arg.i == OP_ADD) c->out[0] = ge;
  else if (u->arg.i == OP_MAX) {  /* shared equally among the elements equal to the max */
    bool f[TG_MAX_DIMS];
    reduced_axes(u, f);
    uop *is_max = mk_cast(mk_binary(OP_CMPEQ, x, mk_expand(u, x->ndim, x->shape)), (tg_dtype)x->dtype);
    uop *count = mk_expand(mk_reduce(is_max, OP_ADD, f), x->ndim, x->shape);
    c->out[0] = mul(mk_binary(OP_FDIV, is_max, count), ge);
  } else if (u->arg.i == OP_MUL) {  /* the product of the others: prod / x, or where x is the only 0 the prod of the rest */
    bool f[TG_MAX_DIMS];
    reduced_axes(u, f);
    uop *zero = mk_const_like(x, 0), *one = mk_const_like(x, 1);
    uop *is0 = mk_binary(OP_CMPEQ, x, zero), *safe = mk_where(is0, one, x);
    uop *n0 = mk_expand(mk_reduce(mk_cast(is0, TG_INT32), OP_ADD, f), x->ndim, x->shape);
    uop *rest = mk_expand(mk_reduce(safe, OP_MUL, f), x->ndim, x->shape);
    uop *at0 = mk_where(mk_binary(OP_CMPEQ, n0, mk_const_like(n0, 1)), rest, zero);
    uop *div = mk_binary(OP_FDIV, mk_expand(u, x->ndim, x->shape), safe);
    c->out[0] = mul(ge, mk_where(is0, at0, div));
  }
  return done();
}

static uop *g_reshape(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  c->out[0] = mk_reshape(c->g, u->src[0]->ndim, u->src[0]->shape);
  return done();
}
static uop *g_permute(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  int inv[TG_MAX_DIMS];
  for (int i = 0; i < u->ndim; i++) inv[u->aux[i]] = i;
  c->out[0] = mk_permute(c->g, inv);
  return done();
}
static uop *g_expand(void *ctx, uop *u, uop **cap) {  /* sum over the broadcast axes */
  grad_ctx *c = ctx;
  bool f[TG_MAX_DIMS];
  for (int i = 0; i < u->ndim; i++) f[i] = u->src[0]->shape[i] != u->shape[i];
  tg_dtype dt = (tg_dtype)c->g->dtype, acc = sum_acc_dtype(dt);  /* float16: summed in float32, as tg_sum */
  c->out[0] = acc == dt ? mk_reduce(c->g, OP_ADD, f) : mk_cast(mk_reduce(mk_cast(c->g, acc), OP_ADD, f), dt);
  return done();
}
static uop *g_pad(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < u->ndim; i++) {
    b[2 * i] = u->aux[2 * i];
    b[2 * i + 1] = u->aux[2 * i] + u->src[0]->shape[i];
  }
  c->out[0] = mk_shrink(c->g, b);
  return done();
}
static uop *g_shrink(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  int64_t p[2 * TG_MAX_DIMS];
  for (int i = 0; i < u->ndim; i++) {
    p[2 * i] = u->aux[2 * i];
    p[2 * i + 1] = u->src[0]->shape[i] - u->aux[2 * i + 1];
  }
  c->out[0] = mk_pad(c->g, p);
  return done();
}
/* at a variable offset (the second source, which gets no gradient): the same move backwards */
static uop *g_pad_at(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  int axis = (int)u->aux[2 * u->ndim];
  c->out[0] = mk_shrink_at(c->g, axis, u->src[1], u->src[0]->shape[axis]);
  return done();
}
static uop *g_shrink_at(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  int axis = (int)u->aux[2 * u->ndim];
  c->out[0] = mk_pad_at(c->g, axis, u->src[1], u->src[0]->shape[axis]);
  return done();
}
static uop *g_flip(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  bool f[TG_MAX_DIMS];
  for (int i = 0; i < u->ndim; i++) f[i] = u->aux[i] != 0;
  c->out[0] = mk_flip(c->g, f);
  return done();
}

/* a^b (CG_POW) as tinygrad's POW: b a^(b-1) for a (0 where b = 0: x^0 is constant), a^b ln a for b (where
 * a = 0: -inf for b < 0, else 0). a^(b-1) is pow again, so a second derivative follows the same rules */
static uop *pow_grads(grad_ctx *c, uop *u) {
  uop *a = u->src[1], *b = u->src[2], *g = c->g;
  uop *zero = mk_const_like(a, 0);
  uop *da = mul(b, pow_node(a, mk_binary(OP_ADD, b, mk_const_like(b, -1))));
  c->out[1] = mul(g, mk_where(mk_binary(OP_CMPEQ, b, zero), zero, da));
  uop *lna = mul(mk_unary(OP_LOG2, a), mk_const_like(a, LN2));
  uop *at0 = mk_where(mk_binary(OP_CMPLT, b, zero), mk_const_like(a, -INFINITY), zero);
  c->out[2] = mul(g, mk_where(mk_binary(OP_CMPEQ, a, zero), at0, mul(u, lna)));
  return c->out[1] && c->out[2] ? done() : NULL;
}

static uop *g_custom(void *ctx, uop *u, uop **cap) {
  grad_ctx *c = ctx;
  /* the rules that give src[0] (the value, built from the other sources) nothing */
  if (u->arg.i == CG_POW && u->nsrc == 3) return pow_grads(c, u);
  if (u->arg.i == CG_RELU && u->nsrc == 2) {
    /* the mask from the output: relu(x) > 0 exactly where x > 0 (NaN and -0 included). The output is kept for
     * the next layer's weight gradient anyway; read from x, the backward kept x too (a second activation-sized
     * buffer per relu), and x's producer (a convolution) could not take the relu into its own kernel */
    uop *zero = mk_const_like(c->g, 0);
    c->out[1] = mk_where(mk_binary(OP_CMPLT, mk_const_like(u, 0), u), c->g, zero);
    return c->out[1] ? done() : NULL;
  }
  if (u->arg.i == CG_SIGMOID && u->nsrc == 2) {
    c->out[1] = mul(c->g, mul(u, mk_binary(OP_ADD, mk_const_like(u, 1), neg(u))));
    return c->out[1] ? done() : NULL;
  }
  c->out[0] = c->g;  /* src[0] computes the value: its own sources get their gradients through it */
  if (u->arg.i == CG_CONV_INPUT && u->nsrc == 3) {
    c->out[1] = conv_input_grad(c->g, u->src[1], u->src[2], u->aux);
    if (!c->out[1]) return NULL;
  }
  return done();
}

static const rule gradient_rules[] = {
    {"(CAST _)", g_cast},
    {"(NEG _)", g_neg},
    {"(RECIP _)", g_recip},
    {"(SIN _)", g_sin},
    {"(LOG2 _)", g_log2},
    {"(EXP2 _)", g_exp2},
    {"(SQRT _)", g_sqrt},
    {"(ADD _ _)", g_add},
    {"(MUL _ _)", g_mul},
    {"(FDIV _ _)", g_fdiv},
    {"(MAX _ _)", g_max},
    {"(POW _ _)", g_pow},
    {"(WHERE _ _ _)", g_where},
    {"(REDUCE_AXIS _)", g_reduce},
    {"(RESHAPE _)", g_reshape},
    {"(PERMUTE _)", g_permute},
    {"(EXPAND _)", g_expand},
    {"(PAD _)", g_pad},
    {"(SHRINK _)", g_shrink},
    {"(PAD _ _)", g_pad_at},
    {"(SHRINK _ _)", g_shrink_at},
    {"(FLIP _)", g_flip},
    {"(CONTIGUOUS _)", g_pass},
    {"(CUSTOM_GRAD ...)", g_custom},
    {"(TRUNC _)", g_zero},
    {"(BITCAST|CMPLT|CMPNE|CMPEQ|IDIV|MOD|AND|OR|XOR|SHL|SHR|DETACH ...)", g_none},
    {NULL, NULL},
};

static matcher *gm;

/* gradients of root (seeded with g0) for every node on a path to a target; results in grads */
static bool compute_gradient(uop *root, uop *g0, const uop_map *targets, uop_map *grads) {
  if (!gm && !(gm = matcher_new(gradient_rules))) return false;
  int n;
  uop **order = uop_toposort(root, &n);
  if (!order) return false;
  uop_map reach = {0};
  static char yes;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {  /* sources first: does a target lie below? */
    uop *u = order[i];
    bool r = umap_get(targets, u) != NULL;
    for (int k = 0; k < u->nsrc && !r; k++) r = umap_get(&reach, u->src[k]) != NULL;
    if (r) ok = umap_put(&reach, u, &yes);
  }
  ok = ok && umap_put(grads, root, g0);
  for (int i = n - 1; i >= 0 && ok; i--) {
    uop *u = order[i];
    uop *g = umap_get(grads, u);
    /* a sharded tensor (MULTI) is a leaf: its gradient is a global-shape value like any other */
    if (!g || !umap_get(&reach, u) || u->nsrc == 0 || u->op == OP_MULTI) continue;
    grad_ctx c = {.g = g};
    uint64_t failed0 = mem_failures();  /* a rule's NULL gradient means "none" unless memory ran out */
    uop *r = matcher_apply(gm, &c, u);
    if (mem_failures() != failed0) {
      tg_set_error(TG_ERR_NOMEM, "tg_backward: out of memory building the gradient of %s", uop_op_name((uop_op)u->op));
      ok = false;
      break;
    }
    if (!r) {
      tg_set_error(TG_ERR_ARG, "tg_backward: no gradient rule for %s", uop_op_name((uop_op)u->op));
      ok = false;
      break;
    }
    for (int k = 0; k < u->nsrc && k < 3; k++) {
      uop *s = u->src[k], *sg = c.out[k];
      if (!sg || !umap_get(&reach, s) || !dtype_is_float((tg_dtype)s->dtype)) continue;
      uop *prev = umap_get(grads, s);
      uop *sum = prev ? mk_binary(OP_ADD, prev, sg) : sg;
      if (!sum || !umap_put(grads, s, sum)) { ok = false; break; }
    }
  }
  free(order);
  umap_free(&reach);
  return ok;
}

static bool check_loss(const char *op, tg_tensor *loss) {
  if (!loss) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "%s: loss is NULL", op);
    return false;
  }
  if (uop_numel(loss->u) != 1 || !dtype_is_float(TDT(loss))) {
    char b[256];
    tg_set_error(TG_ERR_ARG, "%s: the loss must be one float element, got %s of shape %s", op,
                 tg_dtype_name(TDT(loss)), shape_str(b, sizeof b, TNDIM(loss), TSHAPE(loss)));
    return false;
  }
  return true;
}

/* Every tensor that requires a gradient takes one, except another thread's on a node that a tensor of this
 * thread is on: equal graphs are one node, so another thread's tensor made alike would take this loss'
 * gradient too. A tensor handed over by the thread that made it (a model built on one thread and trained on
 * another) is found. */
static tg_status backward(tg_tensor *loss) {
  if (!check_loss("tg_backward", loss)) return tg_error_status();
  uop_map targets = {0}, own = {0}, grads = {0};
  tg_status st = TG_OK;
  for (tg_tensor *t = tensor_live_first(); t; t = t->next)
    if (t->requires_grad && (!umap_put(&targets, t->u, t->u) || (tensor_is_own(t) && !umap_put(&own, t->u, t->u))))
      st = TG_ERR_NOMEM;
  if (st == TG_OK && !compute_gradient(loss->u, mk_const_like(loss->u, 1), &targets, &grads))
    st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  for (tg_tensor *t = tensor_live_first(); t && st == TG_OK; t = t->next) {
    if (!t->requires_grad || (!tensor_is_own(t) && umap_get(&own, t->u))) continue;
    uop *g = umap_get(&grads, t->u);
    if (!g) continue;
    if (t->grad) g = mk_binary(OP_ADD, t->grad->u, g);
    tg_tensor *ng = tensor_new_unscoped(mk_cast(g, TDT(t)));
    if (!ng) { st = TG_ERR_NOMEM; break; }
    tg_free(t->grad);
    t->grad = ng;
  }
  umap_free(&targets);
  umap_free(&own);
  umap_free(&grads);
  return st;
}

tg_status tg_backward(tg_tensor *loss) {
  lib_region_begin();  /* the live tensors, the rule table */
  tg_status st = backward(loss);
  lib_region_end();
  return st;
}

static tg_status gradient(tg_tensor *loss, int n, tg_tensor *const *targets, tg_tensor **out) {
  if (n < 0 || (n && (!targets || !out))) {
    tg_set_error(TG_ERR_ARG, "tg_gradient: bad target list");
    return TG_ERR_ARG;
  }
  for (int i = 0; i < n; i++) out[i] = NULL;
  if (!check_loss("tg_gradient", loss)) return tg_error_status();
  uop_map tmap = {0}, grads = {0};
  tg_status st = TG_OK;
  for (int i = 0; i < n && st == TG_OK; i++) {
    if (!targets[i]) {
      tg_set_error(TG_ERR_ARG, "tg_gradient: target %d is NULL", i);
      st = TG_ERR_ARG;
    } else if (!umap_put(&tmap, targets[i]->u, targets[i]->u)) st = TG_ERR_NOMEM;
  }
  if (st == TG_OK && !compute_gradient(loss->u, mk_const_like(loss->u, 1), &tmap, &grads))
    st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  for (int i = 0; i < n && st == TG_OK; i++) {
    uop *x = targets[i]->u, *g = umap_get(&grads, x);
    out[i] = tensor_new(g ? mk_cast(g, (tg_dtype)x->dtype) : mk_const_like(x, 0));
    if (!out[i]) st = TG_ERR_NOMEM;
  }
  if (st != TG_OK)
    for (int i = 0; i < n; i++) { tg_free(out[i]); out[i] = NULL; }
  umap_free(&tmap);
  umap_free(&grads);
  return st;
}

tg_status tg_gradient(tg_tensor *loss, int n, tg_tensor *const *targets, tg_tensor **out) {
  lib_region_begin();
  tg_status st = gradient(loss, n, targets, out);
  lib_region_end();
  return st;
}

tg_tensor *tg_set_requires_grad(tg_tensor *t, bool on) {
  if (!t) return NULL;
  lib_lock();  /* another thread's backward reads it */
  t->requires_grad = on;
  lib_unlock();
  return t;
}

bool tg_requires_grad(const tg_tensor *t) { return t && t->requires_grad; }
tg_tensor *tg_grad(const tg_tensor *t) { return t ? t->grad : NULL; }

void tg_zero_grad(tg_tensor *t) {
  if (!t) return;
  lib_lock();
  tg_free(t->grad);
  t->grad = NULL;
  lib_unlock();
}

tg_tensor *tg_detach(tg_tensor *t) {
  if (!t) return NULL;
  uop *x = t->u;
  return tensor_new(uop_new_shaped(OP_DETACH, (tg_dtype)x->dtype, 1, &x, (uop_arg){0}, 0, NULL, x->ndim, x->shape));
}

tg_status tg_assign(tg_tensor *dst, tg_tensor *src) {
  if (!dst || !src) {
    if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "tg_assign: %s is NULL", dst ? "src" : "dst");
    return tg_error_status();
  }
  char a[256], b[256];
  bool same = TNDIM(dst) == TNDIM(src) && TDT(dst) == TDT(src);
  for (int i = 0; same && i < TNDIM(dst); i++) same = TSHAPE(dst)[i] == TSHAPE(src)[i];
  if (!same) {
    tg_set_error(TG_ERR_ARG, "tg_assign: %s %s cannot take a %s %s", tg_dtype_name(TDT(dst)),
                 shape_str(a, sizeof a, TNDIM(dst), TSHAPE(dst)), tg_dtype_name(TDT(src)),
                 shape_str(b, sizeof b, TNDIM(src), TSHAPE(src)));
    return TG_ERR_ARG;
  }
  /* a stored value is overwritten in place at the next realize (parameters keep their buffers) */
  lib_lock();
  uop *old = dst->u;
  bool stored = uop_storage(old) || old->op == OP_BUFFER || (old->op == OP_RESHAPE && old->src[0]->op == OP_BUFFER);
  if (old->op == OP_MULTI) {  /* sharded: each part is written in place (engine/place.c) */
    stored = true;
    for (int j = 0; j < old->nsrc; j++) {
      uop *p = old->src[j];
      stored &= uop_storage(p) || p->op == OP_BUFFER || (p->op == OP_RESHAPE && p->src[0]->op == OP_BUFFER);
    }
  }
  if (!dst->assign_target && stored && src->u != old) dst->assign_target = old;
  else uop_pin_dropped(old);
  dst->u = src->u;
  lib_unlock();
  return TG_OK;
}

void autograd_shutdown(void) {
  matcher_free(gm);
  gm = NULL;
}
