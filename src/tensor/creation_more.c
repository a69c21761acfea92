/* creation_more.c — more of tinygrad's creation and random methods, each written with the public ops as
 * tinygrad writes them with Tensor methods: linspace, scaled_uniform, rand_like/randn_like, randperm (the
 * argsort of uniform draws) and multinomial (inverse CDF with a cumsum, or Efraimidis-Spirakis keys with topk
 * when drawing several without replacement). All lazy: nothing runs until the result is realized. */
#include <math.h>

#include "tensor/compose.h"

tg_tensor *tg_linspace(tg_dtype dt, double start, double stop, int64_t steps) {
  if ((unsigned)dt >= TG_DTYPE_COUNT || dt == TG_BOOL || steps < 0 || isnan(start) || isnan(stop)) {
    tg_set_error(TG_ERR_ARG, "tg_linspace: bad arguments (start %g, stop %g, steps %lld, dtype %d; steps >= 0, dtype not bool)",
                 start, stop, (long long)steps, (int)dt);
    return NULL;
  }
  if (steps == 1) return tg_full(dt, 1, (int64_t[]){1}, start);
  /* as tinygrad: start + arange(steps) * ((stop - start) / (steps - 1)) in float32, then converted to dt */
  tmps s = TMPS("tg_linspace");
  tg_tensor *i = tmp(&s, tg_arange(TG_FLOAT32, 0, (double)steps, 1));
  tg_tensor *v = tmp(&s, tg_add_scalar(tmp(&s, tg_mul_scalar(i, (stop - start) / (double)(steps - 1))), start));
  return tmps_end(&s, v ? tmp(&s, tg_cast(v, dt)) : NULL);
}

tg_tensor *tg_scaled_uniform(tg_dtype dt, int ndim, const int64_t *shape) {
  tmps s = TMPS("tg_scaled_uniform");
  tg_tensor *u = tmp(&s, tg_uniform(dt, ndim, shape, -1, 1));
  if (!u) return tmps_end(&s, NULL);
  double n = (double)tg_numel(u);
  return tmps_end(&s, tmp(&s, tg_mul_scalar(u, n > 0 ? 1 / sqrt(n) : INFINITY)));
}

tg_tensor *tg_rand_like(const tg_tensor *t) { return t ? tg_rand(TDT(t), TNDIM(t), TSHAPE(t)) : NULL; }
tg_tensor *tg_randn_like(const tg_tensor *t) { return t ? tg_randn(TDT(t), TNDIM(t), TSHAPE(t)) : NULL; }

tg_tensor *tg_randperm(int64_t n) {
  if (n < 0 || n > INT32_MAX) {
    tg_set_error(TG_ERR_ARG, "tg_randperm: n %lld is out of range [0, 2^31)", (long long)n);
    return NULL;
  }
  tmps s = TMPS("tg_randperm");
  tg_tensor *u = tmp(&s, tg_rand(TG_FLOAT32, 1, &n));
  tg_tensor *p = u ? tmp(&s, tg_argsort(u, 0, false)) : NULL;  /* stable: equal draws keep index order */
  return tmps_end(&s, p ? tmp(&s, tg_cast(p, TG_INT32)) : NULL);
}

tg_tensor *tg_multinomial(tg_tensor *probs, int64_t num_samples, bool replacement) {
  if (!probs) return NULL;
  int nd = TNDIM(probs);
  if (nd < 1 || nd > 2 || num_samples <= 0) {
    tg_set_error(TG_ERR_ARG, "tg_multinomial: weights must be 1-d or 2-d (got %d-d) and num_samples > 0 (got %lld)", nd,
                 (long long)num_samples);
    return NULL;
  }
  int64_t rows = nd == 1 ? 1 : TSHAPE(probs)[0], k = TSHAPE(probs)[nd - 1];
  if (!replacement && num_samples > k) {
    tg_set_error(TG_ERR_ARG, "tg_multinomial: %lld samples without replacement from %lld categories", (long long)num_samples,
                 (long long)k);
    return NULL;
  }
  tmps s = TMPS("tg_multinomial");
  tg_tensor *w = tmp(&s, tg_reshape(probs, 2, (int64_t[]){rows, k}));  /* (rows, k) */
  tg_tensor *idx = NULL;
  if (!w) return tmps_end(&s, NULL);
  if (replacement || num_samples == 1) {
    /* inverse CDF: the count of cdf entries at or below a uniform draw is the category */
    tg_tensor *cw = tmp(&s, tg_cast(tmp(&s, tg_cumsum(w, 1)), TG_FLOAT32));
    tg_tensor *last = cw ? tmp(&s, tg_shrink(cw, 2, (int64_t[]){0, rows, k - 1, k})) : NULL;
    tg_tensor *cdf = last ? tmp(&s, tg_div(cw, last)) : NULL;                      /* (rows, k) */
    tg_tensor *u = tmp(&s, tg_rand(TG_FLOAT32, 3, (int64_t[]){num_samples, rows, 1}));
    tg_tensor *ge = cdf && u ? tmp(&s, tg_ge(u, cdf)) : NULL;                      /* (num_samples, rows, k) */
    tg_tensor *cnt = ge ? tmp(&s, tg_sum(ge, 1, (int[]){2}, false)) : NULL;
    idx = cnt ? tmp(&s, tg_permute(cnt, 2, (int[]){1, 0})) : NULL;                 /* (rows, num_samples) */
  } else {
    /* Efraimidis-Spirakis: the num_samples largest log2(u) / w */
    tg_tensor *u = tmp(&s, tg_rand(TG_FLOAT32, 2, (int64_t[]){rows, k}));
    tg_tensor *key = u ? tmp(&s, tg_div(tmp(&s, tg_log2(u)), w)) : NULL;
    if (key && tg_topk(key, num_samples, 1, true, true, NULL, &idx) == TG_OK) tmp(&s, idx);
    else idx = NULL;
  }
  if (idx && nd == 1) idx = tmp(&s, tg_squeeze(idx, 0));
  return tmps_end(&s, idx ? tmp(&s, tg_cast(idx, TG_INT32)) : NULL);
}

tg_tensor *tg_allclose(tg_tensor *a, tg_tensor *b, double rtol, double atol, bool equal_nan) {
  tmps s = TMPS("tg_allclose");
  tg_tensor *c = tmp(&s, tg_isclose(a, b, rtol, atol, equal_nan));
  return tmps_end(&s, c ? tmp(&s, tg_all(c, 0, NULL, false)) : NULL);
}
