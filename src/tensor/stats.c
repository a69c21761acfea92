/* stats.c — the reductions tinygrad adds on top of the basic ones (reduce.c): any/all over several axes,
 * sum and prod with an accumulation dtype, var_mean and std_mean, logsumexp over several axes (or all), and
 * softmin. Each is a composition of public ops, so it fuses and differentiates like them. */
#include <math.h>

#include "tensor/compose.h"

static tg_status null_status(const char *op) {
  if (!tg_error_status()) tg_set_error(TG_ERR_ARG, "%s: tensor is NULL", op);
  return tg_error_status();
}

/* x != 0 as bool, reduced with max (any) or min (all): empty reductions give false and true */
static tg_tensor *bool_reduce(const char *op, tg_tensor *t, int naxes, const int *axes, bool keepdim, bool is_all) {
  if (!t) return NULL;
  tmps s = TMPS(op);
  tg_tensor *b = tmp(&s, tg_cast(t, TG_BOOL));
  return tmps_end(&s, tmp(&s, is_all ? tg_min(b, naxes, axes, keepdim) : tg_max(b, naxes, axes, keepdim)));
}

tg_tensor *tg_any(tg_tensor *t, int naxes, const int *axes, bool keepdim) {
  return bool_reduce("tg_any", t, naxes, axes, keepdim, false);
}

tg_tensor *tg_all(tg_tensor *t, int naxes, const int *axes, bool keepdim) {
  return bool_reduce("tg_all", t, naxes, axes, keepdim, true);
}

/* tinygrad's sum(dtype=): t converted to dt and summed in dt. The sum runs in tg_sum's accumulator for dt
 * (integers of at least 32 bits, float32 for halves) and is converted back: the same result for integers
 * (both wrap modulo 2^bits), a more exact one for float16 and bfloat16 */
tg_tensor *tg_sum_dtype(tg_tensor *t, int naxes, const int *axes, bool keepdim, tg_dtype dt) {
  if (!t) return NULL;
  tmps s = TMPS("tg_sum_dtype");
  tg_tensor *r = tmp(&s, tg_sum(tmp(&s, tg_cast(t, dt)), naxes, axes, keepdim));
  return tmps_end(&s, tmp(&s, tg_cast(r, dt)));
}

tg_tensor *tg_prod_dtype(tg_tensor *t, int naxes, const int *axes, bool keepdim, tg_dtype dt) {
  if (!t) return NULL;
  tmps s = TMPS("tg_prod_dtype");
  return tmps_end(&s, tmp(&s, tg_prod(tmp(&s, tg_cast(t, dt)), naxes, axes, keepdim)));
}

/* (spread, mean) with spread tg_var or tg_std; a NULL output pointer skips that output */
static tg_status spread_mean(const char *op, tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction,
                             bool take_sqrt, tg_tensor **spread, tg_tensor **mean) {
  if (spread) *spread = NULL;
  if (mean) *mean = NULL;
  if (!t) return null_status(op);
  tg_tensor *v = NULL, *m = NULL;
  if (spread) v = take_sqrt ? tg_std(t, naxes, axes, keepdim, correction) : tg_var(t, naxes, axes, keepdim, correction);
  if (mean && (v || !spread)) m = tg_mean(t, naxes, axes, keepdim);
  if ((spread && !v) || (mean && !m)) {
    tg_free(v);
    return tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
  }
  if (spread) *spread = v;
  if (mean) *mean = m;
  return TG_OK;
}

tg_status tg_var_mean(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction, tg_tensor **var,
                      tg_tensor **mean) {
  return spread_mean("tg_var_mean", t, naxes, axes, keepdim, correction, false, var, mean);
}

tg_status tg_std_mean(tg_tensor *t, int naxes, const int *axes, bool keepdim, double correction, tg_tensor **std,
                      tg_tensor **mean) {
  return spread_mean("tg_std_mean", t, naxes, axes, keepdim, correction, true, std, mean);
}

/* log(sum(exp(x))) shifted by the (detached) max as tinygrad; an infinite max shifts by 0 instead, so a
 * reduction of -inf only (or an empty one) gives -inf and one holding +inf gives +inf, as PyTorch (tinygrad:
 * NaN) */
tg_tensor *tg_logsumexp_axes(tg_tensor *t, int naxes, const int *axes, bool keepdim) {
  if (!t) return NULL;
  tmps s = TMPS("tg_logsumexp");
  tg_dtype ft = dtype_is_float(TDT(t)) ? TDT(t) : TG_FLOAT32;
  tg_tensor *x = tmp(&s, tg_cast(t, ft));
  tg_tensor *m = tmp(&s, tg_detach(tmp(&s, tg_max(x, naxes, axes, true))));
  tg_tensor *inf = tmp(&s, tg_eq(tmp(&s, tg_abs(m)), tmp(&s, tg_scalar(ft, INFINITY))));
  m = tmp(&s, tg_where(inf, tmp(&s, tg_scalar(ft, 0)), m));
  tg_tensor *e = tmp(&s, tg_exp(tmp(&s, tg_sub(x, m))));
  tg_tensor *r = tmp(&s, tg_log(tmp(&s, tg_sum(e, naxes, axes, true))));
  r = tmp(&s, tg_add(r, m));
  if (!keepdim) {  /* drop the reduced axes: the shape of the same reduction without keepdim (never computed) */
    tg_tensor *kept = tmp(&s, tg_sum(x, naxes, axes, false));
    r = kept ? tmp(&s, tg_reshape(r, TNDIM(kept), TSHAPE(kept))) : NULL;
  }
  return tmps_end(&s, r);
}

tg_tensor *tg_softmin(tg_tensor *t, int axis) {
  if (!t) return NULL;
  tmps s = TMPS("tg_softmin");
  tg_dtype ft = dtype_is_float(TDT(t)) ? TDT(t) : TG_FLOAT32;
  return tmps_end(&s, tmp(&s, tg_softmax(tmp(&s, tg_neg(tmp(&s, tg_cast(t, ft)))), axis)));
}
