/* activation_forms.c — tinygrad's keyword forms of the activations and softmaxes: hardsigmoid(alpha, beta),
 * selu(alpha, gamma), softmax/log_softmax/softmin(dtype=). Each is written with the public ops in tinygrad's
 * own formula, so gradients and fusion come from the primitives and the dtypes follow tinygrad's weak scalars. */
#include <math.h>
#include <stdio.h>

#include "tensor/compose.h"

/* (alpha x + beta).relu() - (alpha x + beta - 1).relu(): tinygrad's hardsigmoid, alpha and beta weak scalars */
tg_tensor *tg_hardsigmoid_ab(tg_tensor *t, double alpha, double beta) {
  if (!t) return NULL;
  tmps s = TMPS("tg_hardsigmoid_ab");
  tg_tensor *a = tmp(&s, tg_add_scalar(tmp(&s, tg_mul_scalar(t, alpha)), beta));
  tg_tensor *hi = tmp(&s, tg_relu(tmp(&s, tg_sub_scalar(a, 1))));
  return tmps_end(&s, tmp(&s, tg_sub(tmp(&s, tg_relu(a)), hi)));
}

/* gamma (x >= 0 ? x : alpha (e^x - 1)), the exponential taken of min(x, 0) so that its gradient never meets inf */
tg_tensor *tg_selu_ag(tg_tensor *t, double alpha, double gamma) {
  if (!t) return NULL;
  tmps s = TMPS("tg_selu_ag");
  tg_tensor *x = dtype_is_float(TDT(t)) ? t : tmp(&s, tg_cast(t, TG_FLOAT32));
  tg_tensor *neg = tmp(&s, tg_lt(x, tmp(&s, tg_scalar(TDT(x), 0))));
  tg_tensor *xn = tmp(&s, tg_where(neg, x, tmp(&s, tg_scalar(TDT(x), 0))));
  tg_tensor *e = tmp(&s, tg_mul_scalar(tmp(&s, tg_sub_scalar(tmp(&s, tg_exp(xn)), 1)), alpha));
  return tmps_end(&s, tmp(&s, tg_mul_scalar(tmp(&s, tg_where(neg, e, x)), gamma)));
}

/* tinygrad's _softmax with dtype: x - max(x) (detached) in x's dtype, then converted to dt */
static tg_tensor *shifted_as(tmps *s, tg_tensor *t, int axis, tg_dtype dt) {
  tg_tensor *m = tmp(s, tg_detach(tmp(s, tg_max(t, 1, &axis, true))));
  return tmp(s, tg_cast(tmp(s, tg_sub(t, m)), dt));
}

/* the shifted values' max is exactly 0, so tg_softmax's own shift changes nothing */
tg_tensor *tg_softmax_dtype(tg_tensor *t, int axis, tg_dtype dt) {
  if (!t) return NULL;
  tmps s = TMPS("tg_softmax_dtype");
  return tmps_end(&s, tmp(&s, tg_softmax(shifted_as(&s, t, axis, dt), axis)));
}

tg_tensor *tg_log_softmax_dtype(tg_tensor *t, int axis, tg_dtype dt) {
  if (!t) return NULL;
  tmps s = TMPS("tg_log_softmax_dtype");
  return tmps_end(&s, tmp(&s, tg_log_softmax(shifted_as(&s, t, axis, dt), axis)));
}

/* tinygrad's (-x).softmax(axis, dtype) */
tg_tensor *tg_softmin_dtype(tg_tensor *t, int axis, tg_dtype dt) {
  if (!t) return NULL;
  tmps s = TMPS("tg_softmin_dtype");
  return tmps_end(&s, tmp(&s, tg_softmax_dtype(tmp(&s, tg_neg(t)), axis, dt)));
}
