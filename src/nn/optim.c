/* optim.c — SGD, Adam and AdamW as lazy graph.
 *
 * step() builds every parameter's update from its gradient, assigns it (and the optimizer state), and
 * realizes all of it in one schedule with the caller's extra tensors (the loss): forward, backward and
 * update fuse. The learning rate and the Adam bias corrections live in one-element buffers, not in the
 * kernels' constants, so every step runs the same compiled kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "tensor/tensor.h"

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW } opt_kind;

struct tg_optim {
  opt_kind kind;
  int n;
  tg_tensor **params;
  tg_tensor **m, **v;     /* SGD: momentum buffers in m; Adam: moments */
  tg_tensor *lr;          /* (1) float32 */
  tg_tensor *b1t, *b2t;   /* (1) float32: b1^t, b2^t, updated by every step */
  double lr_value, momentum, wd, b1, b2, eps;
  bool nesterov;
};

static tg_tensor *owned(tg_tensor *lazy) { return tensor_own(lazy); }  /* realized, unscoped, no gradient */

static tg_tensor *scalar_buffer(double v) {
  float f = (float)v;
  return tensor_unscope(tg_from_data(TG_FLOAT32, 1, (int64_t[]){1}, &f, sizeof f));
}

void tg_optim_free(tg_optim *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) {
    tg_free(o->params[i]);
    if (o->m) tg_free(o->m[i]);
    if (o->v) tg_free(o->v[i]);
  }
  free(o->params);
  free(o->m);
  free(o->v);
  tg_free(o->lr);
  tg_free(o->b1t);
  tg_free(o->b2t);
  free(o);
}

/* the trainable tensors of p (those requiring a gradient), with zeroed state for each */
static tg_optim *optim_new(const char *op, const tg_params *p, opt_kind kind, double lr, bool state_m, bool state_v) {
  if (!p) {
    tg_set_error(TG_ERR_ARG, "%s: parameter list is NULL", op);
    return NULL;
  }
  if (!(lr >= 0 && lr < INFINITY)) {
    tg_set_error(TG_ERR_ARG, "%s: learning rate %g is not a finite number >= 0", op, lr);
    return NULL;
  }
  tg_optim *o = mem_calloc(1, sizeof *o);
  int cnt = tg_params_count(p);
  if (!o) goto nomem;
  o->kind = kind;
  o->lr_value = lr;
  o->params = mem_calloc((size_t)cnt + 1, sizeof *o->params);
  o->m = mem_calloc((size_t)cnt + 1, sizeof *o->m);
  o->v = mem_calloc((size_t)cnt + 1, sizeof *o->v);
  if (!o->params || !o->m || !o->v || !(o->lr = scalar_buffer(lr))) goto nomem;
  for (int i = 0; i < cnt; i++) {
    tg_tensor *t = tg_params_tensor(p, i);
    if (!tg_requires_grad(t)) continue;
    if (!dtype_is_float(TDT(t))) {
      tg_set_error(TG_ERR_ARG, "%s: parameter \"%s\" is %s, not a float", op, tg_params_name(p, i), tg_dtype_name(TDT(t)));
      tg_optim_free(o);
      return NULL;
    }
    o->params[o->n] = tg_retain(t);
    if (state_m && !(o->m[o->n] = owned(tg_zeros_like(t)))) { o->n++; goto nomem; }
    if (state_v && !(o->v[o->n] = owned(tg_zeros_like(t)))) { o->n++; goto nomem; }
    o->n++;
  }
  return o;
nomem:
  if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
  tg_optim_free(o);
  return NULL;
}

tg_sgd_opts tg_sgd_defaults(void) { return (tg_sgd_opts){.lr = 0.001}; }
tg_adam_opts tg_adam_defaults(void) { return (tg_adam_opts){.lr = 0.001, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8}; }
tg_adam_opts tg_adamw_defaults(void) {
  tg_adam_opts o = tg_adam_defaults();
  o.weight_decay = 0.01;
  return o;
}

/* false with an error naming the option when v is not in [lo, hi) (hi_open) or [lo, hi] */
static bool in_range(const char *op, const char *name, double v, double lo, double hi, bool hi_open) {
  if (v >= lo && (hi_open ? v < hi : v <= hi)) return true;
  tg_set_error(TG_ERR_ARG, "%s: %s %g is outside [%g, %g%s", op, name, v, lo, hi, hi_open ? ")" : "]");
  return false;
}

tg_optim *tg_sgd_new(const tg_params *p, tg_sgd_opts s) {
  const char *op = "tg_sgd_new";
  if (!in_range(op, "momentum", s.momentum, 0, INFINITY, false) ||
      !in_range(op, "weight_decay", s.weight_decay, 0, INFINITY, false))
    return NULL;
  if (s.nesterov && s.momentum == 0) {
    tg_set_error(TG_ERR_ARG, "%s: nesterov needs a momentum above 0", op);
    return NULL;
  }
  tg_optim *o = optim_new(op, p, OPT_SGD, s.lr, s.momentum != 0, false);
  if (!o) return NULL;
  o->momentum = s.momentum;
  o->wd = s.weight_decay;
  o->nesterov = s.nesterov;
  return o;
}

static tg_optim *adam_new(const char *op, const tg_params *p, tg_adam_opts a, opt_kind kind) {
  if (!in_range(op, "b1", a.b1, 0, 1, true) || !in_range(op, "b2", a.b2, 0, 1, true) ||
      !in_range(op, "eps", a.eps, 0, INFINITY, false) || !in_range(op, "weight_decay", a.weight_decay, 0, INFINITY, false))
    return NULL;
  tg_optim *o = optim_new(op, p, kind, a.lr, true, true);
  if (!o) return NULL;
  o->b1 = a.b1;
  o->b2 = a.b2;
  o->eps = a.eps;
  o->wd = a.weight_decay;
  if (!(o->b1t = scalar_buffer(1)) || !(o->b2t = scalar_buffer(1))) {
    tg_optim_free(o);
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "%s: out of memory", op);
    return NULL;
  }
  return o;
}

tg_optim *tg_adam_new(const tg_params *p, tg_adam_opts a) { return adam_new("tg_adam_new", p, a, OPT_ADAM); }
tg_optim *tg_adamw_new(const tg_params *p, tg_adam_opts a) { return adam_new("tg_adamw_new", p, a, OPT_ADAMW); }

/* the new value of parameter i, with its state assigned; NULL on error */
static tg_tensor *update(tg_optim *o, int i, tg_tensor *b1t, tg_tensor *b2t) {
  tg_tensor *p = o->params[i], *g = tg_grad(p);
  tg_tensor *pd = tg_detach(p);
  tg_tensor *lr = tensor_replicate_like(o->lr, p);  /* a sharded parameter: its scalars on each of its devices */
  b1t = tensor_replicate_like(b1t, p);
  b2t = tensor_replicate_like(b2t, p);
  if (o->kind != OPT_ADAMW && o->wd != 0) g = tg_add(g, tg_mul_scalar(pd, o->wd));
  if (o->kind == OPT_SGD) {
    if (o->momentum != 0) {
      tg_tensor *b = tg_add(tg_mul_scalar(o->m[i], o->momentum), g);
      if (tg_assign(o->m[i], b) != TG_OK) return NULL;
      g = o->nesterov ? tg_add(g, tg_mul_scalar(b, o->momentum)) : b;
    }
    return tg_sub(pd, tg_mul(g, lr));
  }
  /* Adam: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr * m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) */
  tg_tensor *m = tg_add(tg_mul_scalar(o->m[i], o->b1), tg_mul_scalar(g, 1 - o->b1));
  tg_tensor *v = tg_add(tg_mul_scalar(o->v[i], o->b2), tg_mul_scalar(tg_mul(g, g), 1 - o->b2));
  if (tg_assign(o->m[i], m) != TG_OK || tg_assign(o->v[i], v) != TG_OK) return NULL;
  tg_tensor *mhat = tg_div(m, tg_sub(tg_ones_like(b1t), b1t));
  tg_tensor *vhat = tg_div(v, tg_sub(tg_ones_like(b2t), b2t));
  tg_tensor *up = tg_div(mhat, tg_add_scalar(tg_sqrt(vhat), o->eps));
  if (o->kind == OPT_ADAMW && o->wd != 0) up = tg_add(up, tg_mul_scalar(pd, o->wd));
  return tg_sub(pd, tg_mul(up, lr));
}

tg_status tg_optim_step(tg_optim *o, int nextra, tg_tensor *const *extra) {
  if (!o || nextra < 0 || (nextra && !extra)) {
    tg_set_error(TG_ERR_ARG, "tg_optim_step: bad arguments");
    return TG_ERR_ARG;
  }
  int nstate = o->kind == OPT_SGD ? (o->momentum != 0) : 2;
  int total = nextra + o->n * (1 + nstate) + 2;
  tg_tensor **all = mem_calloc((size_t)total, sizeof *all);
  if (!all) {
    tg_set_error(TG_ERR_NOMEM, "tg_optim_step: out of memory");
    return TG_ERR_NOMEM;
  }
  tg_status st = TG_OK;
  int k = 0;
  for (int i = 0; i < nextra; i++) all[k++] = extra[i];
  tg_scope_begin();
  tg_tensor *b1t = NULL, *b2t = NULL;
  if (o->kind != OPT_SGD) {
    b1t = tg_mul_scalar(o->b1t, o->b1);
    b2t = tg_mul_scalar(o->b2t, o->b2);
  }
  for (int i = 0; i < o->n && st == TG_OK; i++) {
    if (!tg_grad(o->params[i])) continue;  /* the loss does not depend on it */
    tg_tensor *np = update(o, i, b1t, b2t);
    st = np ? tg_assign(o->params[i], np) : (tg_error_status() ? tg_error_status() : TG_ERR_NOMEM);
    all[k++] = o->params[i];
    if (o->m[i]) all[k++] = o->m[i];
    if (o->v[i]) all[k++] = o->v[i];
  }
  if (st == TG_OK && o->kind != OPT_SGD) {
    st = tg_assign(o->b1t, b1t);
    if (st == TG_OK) st = tg_assign(o->b2t, b2t);
    all[k++] = o->b1t;
    all[k++] = o->b2t;
  }
  if (st == TG_OK) st = tg_realize_many(k, all);
  tg_scope_end();
  free(all);
  tg_optim_zero_grad(o);
  return st;
}

void tg_optim_zero_grad(tg_optim *o) {
  for (int i = 0; o && i < o->n; i++) tg_zero_grad(o->params[i]);
}

tg_status tg_optim_set_lr(tg_optim *o, double lr) {
  if (!o) {
    tg_set_error(TG_ERR_ARG, "tg_optim_set_lr: optimizer is NULL");
    return TG_ERR_ARG;
  }
  if (!(lr >= 0 && lr < INFINITY)) {
    tg_set_error(TG_ERR_ARG, "tg_optim_set_lr: learning rate %g is not a finite number >= 0", lr);
    return TG_ERR_ARG;
  }
  float f = (float)lr;
  tg_status st = tensor_write(o->lr, &f, sizeof f);
  if (st == TG_OK) o->lr_value = lr;
  return st;
}

double tg_optim_lr(const tg_optim *o) { return o ? o->lr_value : NAN; }

/* ---- learning-rate schedules ---------------------------------------------------------------------- */

double tg_lr_step(double base, int64_t step, int64_t step_size, double gamma) {
  if (step_size <= 0) return base;
  return base * pow(gamma, (double)(step / step_size));
}

double tg_lr_cosine(double base, int64_t step, int64_t total, double min_lr) {
  if (total <= 0) return base;
  double t = step >= total ? 1 : (double)step / (double)total;
  return min_lr + (base - min_lr) * 0.5 * (1 + cos(M_PI * t));
}

/* PyTorch's OneCycleLR with cosine annealing: up from max/div to max over pct_start, then down to
 * max/(div*final_div) */
double tg_lr_onecycle(double max_lr, int64_t step, int64_t total, double pct_start, double div_factor,
                      double final_div_factor) {
  double initial = max_lr / div_factor, final = initial / final_div_factor;
  double up_end = pct_start * (double)total - 1, down_end = (double)total - 1;
  double s = (double)step;
  if (s <= up_end) {
    double pct = up_end > 0 ? s / up_end : 1;
    return initial + (max_lr - initial) * 0.5 * (1 - cos(M_PI * pct));
  }
  double pct = down_end > up_end ? (s - up_end) / (down_end - up_end) : 1;
  if (pct > 1) pct = 1;
  return final + (max_lr - final) * 0.5 * (1 + cos(M_PI * pct));
}
