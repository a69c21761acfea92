/* norm.c — layernorm, rmsnorm, batchnorm (functional, tinygrad's signature) and group norm: a mean and a
 * mean of squares over some axes, broadcast back and combined elementwise, so each is a few reduces with
 * their elementwise epilogue fused in. */
#include <math.h>
#include <stdio.h>

#include "tensor/compose.h"

#define SB 256

/* the normalized axes in out (naxes 0: every axis, as a reduction); false with an error when one is bad */
static bool norm_axes(const char *op, tg_tensor *x, int naxes, const int *axes, int *out, int *n) {
  char a[SB];
  bool seen[TG_MAX_DIMS] = {0};
  int nd = TNDIM(x);
  if (naxes < 0 || naxes > nd || (naxes && !axes)) {
    tg_set_error(TG_ERR_ARG, "%s: %d axes for a tensor of shape %s", op, naxes, shape_str(a, sizeof a, nd, TSHAPE(x)));
    return false;
  }
  *n = naxes ? naxes : nd;
  for (int i = 0; i < *n; i++) {
    int ax = naxes ? axes[i] : i;
    if (ax < -nd || ax >= nd || seen[ax < 0 ? ax + nd : ax]) {
      tg_set_error(TG_ERR_ARG, "%s: axis %d is out of range or repeated for a tensor of shape %s", op, ax,
                   shape_str(a, sizeof a, nd, TSHAPE(x)));
      return false;
    }
    out[i] = ax < 0 ? ax + nd : ax;
    seen[out[i]] = true;
  }
  return true;
}

/* (x - mean) * rsqrt(mean((x - mean)^2) + eps) over the given (valid) axes */
static tg_tensor *layernorm_(tmps *s, tg_tensor *x, int naxes, const int *axes, double eps) {
  tg_tensor *y = tmp(s, tg_sub(x, tmp(s, tg_mean(x, naxes, axes, true))));
  tg_tensor *var = tmp(s, tg_mean(tmp(s, tg_mul(y, y)), naxes, axes, true));
  return tmp(s, tg_mul(y, tmp(s, tg_rsqrt(tmp(s, tg_add_scalar(var, eps))))));
}

tg_tensor *tg_layernorm(tg_tensor *x, int naxes, const int *axes, double eps) {
  int ax[TG_MAX_DIMS], n;
  if (!x || !norm_axes("tg_layernorm", x, naxes, axes, ax, &n)) return NULL;
  tmps s = TMPS("tg_layernorm");
  return tmps_end(&s, layernorm_(&s, x, n, ax, eps));
}

tg_tensor *tg_rmsnorm(tg_tensor *x, int naxes, const int *axes, double eps) {
  int ax[TG_MAX_DIMS], n;
  if (!x || !norm_axes("tg_rmsnorm", x, naxes, axes, ax, &n)) return NULL;
  tmps s = TMPS("tg_rmsnorm");
  tg_tensor *ms = tmp(&s, tg_mean(tmp(&s, tg_square(x)), n, ax, true));
  return tmps_end(&s, tmp(&s, tg_mul(x, tmp(&s, tg_rsqrt(tmp(&s, tg_add_scalar(ms, eps)))))));
}

/* t (C) viewed as (1, C, 1, ...) against x (N, C, ...); NULL stays NULL */
static tg_tensor *per_channel(tmps *s, tg_tensor *t, tg_tensor *x) {
  if (!t) return NULL;
  int64_t sh[TG_MAX_DIMS];
  for (int i = 0; i < TNDIM(x); i++) sh[i] = i == 1 ? TSHAPE(x)[1] : 1;
  return tmp(s, tg_reshape(t, TNDIM(x), sh));
}

static bool check_channels(const char *op, tg_tensor *x, int n, tg_tensor *const *ts, const char *const *names) {
  char a[SB], b[SB];
  if (TNDIM(x) < 2) {
    tg_set_error(TG_ERR_ARG, "%s: input of shape %s has no channel axis 1", op, shape_str(a, sizeof a, TNDIM(x), TSHAPE(x)));
    return false;
  }
  for (int i = 0; i < n; i++)
    if (ts[i] && (TNDIM(ts[i]) != 1 || TSHAPE(ts[i])[0] != TSHAPE(x)[1])) {
      tg_set_error(TG_ERR_ARG, "%s: %s of shape %s for an input of shape %s: expected (%lld,)", op, names[i],
                   shape_str(a, sizeof a, TNDIM(ts[i]), TSHAPE(ts[i])), shape_str(b, sizeof b, TNDIM(x), TSHAPE(x)),
                   (long long)TSHAPE(x)[1]);
      return false;
    }
  return true;
}

/* tinygrad's batchnorm: (x - mean) * weight * invstd + bias, everything per channel (axis 1) */
tg_tensor *tg_batchnorm(tg_tensor *x, tg_tensor *weight, tg_tensor *bias, tg_tensor *mean, tg_tensor *invstd) {
  if (!x || !mean || !invstd) return NULL;
  tg_tensor *ts[4] = {weight, bias, mean, invstd};
  static const char *const names[4] = {"weight", "bias", "mean", "invstd"};
  if (!check_channels("tg_batchnorm", x, 4, ts, names)) return NULL;
  tmps s = TMPS("tg_batchnorm");
  tg_tensor *y = tmp(&s, tg_sub(x, per_channel(&s, mean, x)));
  if (weight) y = tmp(&s, tg_mul(y, per_channel(&s, weight, x)));
  y = tmp(&s, tg_mul(y, per_channel(&s, invstd, x)));
  if (bias) y = tmp(&s, tg_add(y, per_channel(&s, bias, x)));
  return tmps_end(&s, y);
}

/* tinygrad's GroupNorm: a layernorm of (N, groups, -1), then the per-channel affine */
tg_tensor *tg_group_norm(tg_tensor *x, int64_t groups, tg_tensor *weight, tg_tensor *bias, double eps) {
  if (!x) return NULL;
  tg_tensor *ts[2] = {weight, bias};
  static const char *const names[2] = {"weight", "bias"};
  if (!check_channels("tg_group_norm", x, 2, ts, names)) return NULL;
  if (groups < 1 || TSHAPE(x)[1] % groups != 0) {
    char a[SB];
    tg_set_error(TG_ERR_ARG, "tg_group_norm: %lld groups do not divide the channels of shape %s", (long long)groups,
                 shape_str(a, sizeof a, TNDIM(x), TSHAPE(x)));
    return NULL;
  }
  tmps s = TMPS("tg_group_norm");
  tg_tensor *y = tmp(&s, tg_reshape(x, 3, (int64_t[]){TSHAPE(x)[0], groups, -1}));
  y = tmp(&s, tg_reshape(layernorm_(&s, y, 1, (int[]){-1}, eps), TNDIM(x), TSHAPE(x)));
  if (weight) y = tmp(&s, tg_mul(y, per_channel(&s, weight, x)));
  if (bias) y = tmp(&s, tg_add(y, per_channel(&s, bias, x)));
  return tmps_end(&s, y);
}

/* tinygrad's normalize: x / max(sum(|x|^p, dim) ^ (1 / p), eps); p 0 counts the nonzero elements, p +-inf
 * (which tinygrad's formula does not cover) takes the largest or smallest |x|, as PyTorch's vector norm */
tg_tensor *tg_normalize(tg_tensor *x, double p, int dim, double eps) {
  if (!x) return NULL;
  if (norm_axis_scalar("tg_normalize", dim, TNDIM(x)) < 0) return NULL;
  if (isnan(p)) {
    tg_set_error(TG_ERR_ARG, "tg_normalize: p is NaN");
    return NULL;
  }
  tmps s = TMPS("tg_normalize");
  if (!dtype_is_float(TDT(x))) x = tmp(&s, tg_cast(x, TG_FLOAT32));
  tg_tensor *den;
  if (p == 0) {
    den = tmp(&s, tg_sum(tmp(&s, tg_ne(x, tmp(&s, tg_scalar(TDT(x), 0)))), 1, &dim, true));
    den = tmp(&s, tg_cast(den, TDT(x)));
  } else if (isinf(p)) {
    tg_tensor *a = tmp(&s, tg_abs(x));
    den = tmp(&s, p > 0 ? tg_max(a, 1, &dim, true) : tg_min(a, 1, &dim, true));
  } else {
    den = tmp(&s, tg_sum(tmp(&s, tg_pow_scalar(tmp(&s, tg_abs(x)), p)), 1, &dim, true));
    den = tmp(&s, tg_pow_scalar(den, 1.0 / p));
  }
  return tmps_end(&s, tmp(&s, tg_div(x, tmp(&s, tg_maximum_scalar(den, eps)))));
}
