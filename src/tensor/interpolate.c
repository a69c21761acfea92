/* interpolate.c — resizing the trailing axes as tinygrad's Tensor.interpolate: one axis at a time, last
 * first, each a gather of source positions along that axis (tg_index_select: a one-hot mask and a sum, so
 * it fuses and is differentiable). The positions are computed here on the host, once per axis, in the
 * arithmetic PyTorch and tinygrad use, and enter the graph as small int32 constants:
 *   nearest        src = floor(i * (float)in / out)                    (PyTorch's "nearest")
 *   nearest-exact  src = floor((i + 0.5) * (float)in / out)            (PyTorch's "nearest-exact")
 *   linear         the two neighbours of (i + 0.5) * in / out - 0.5, clamped to [0, in - 1], or with
 *                  align_corners of i * (in - 1) / (out - 1), blended by the fraction; tinygrad's exact
 *                  integer form num / den of that position gives the neighbours and the weight.
 * Linear blends in float32 (or wider) and converts back, except uint8, which blends per axis in tinygrad's
 * fixed point (its Tensor.lerp for a uint8 tensor and a tensor weight; it rounds as PyTorch's uint8 path):
 *   lo + (((hi - lo) * (int)(w * 128 + 0.5) + 64) >> 7)
 * with the difference exact: tinygrad casts it to int8, which wraps for neighbours more than 127 apart
 * (0 and 255 blended half way give 0 there, 128 here and in PyTorch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tensor/compose.h"

#define SB 256

/* an int32 (n) tensor of host values */
static tg_tensor *int_vec(tmps *s, const int32_t *v, int64_t n) {
  return tmp(s, tg_from_data(TG_INT32, 1, &n, v, (size_t)n * sizeof *v));
}

/* x resized along axis ax to out elements (in > 0, out > 0, both under 2^31) */
static tg_tensor *interp_axis(tmps *s, tg_tensor *x, int ax, int64_t out, tg_interp_mode mode, bool align) {
  int64_t in = TSHAPE(x)[ax];
  int32_t *lo = mem_alloc((size_t)out * sizeof *lo), *hi = mem_alloc((size_t)out * sizeof *hi);
  float *w = mem_alloc((size_t)out * sizeof *w);
  tg_tensor *y = NULL;
  if (!lo || !hi || !w) {
    tg_set_error(TG_ERR_NOMEM, "%s: out of memory", s->op);
    goto done;
  }
  float scale = (float)in / (float)out;
  for (int64_t i = 0; i < out; i++) {
    if (mode != TG_INTERP_LINEAR) {
      float pos = mode == TG_INTERP_NEAREST_EXACT ? ((float)i + 0.5f) * scale : (float)i * scale;
      int64_t j = (int64_t)floorf(pos);
      lo[i] = (int32_t)(j < in - 1 ? j : in - 1);
      continue;
    }
    /* position num / den; align_corners with one output (den 0) takes the first element, as PyTorch */
    int64_t num, den;
    if (align) num = i * (in - 1), den = out > 1 ? out - 1 : 1;
    else num = (2 * i + 1) * in - out, den = 2 * out;
    if (align && out == 1) num = 0;
    if (num < 0) num = 0;
    if (num > (in - 1) * den) num = (in - 1) * den;
    lo[i] = (int32_t)(num / den);
    hi[i] = (int32_t)ceildiv(num, den);
    w[i] = (float)((double)(num % den) / (double)den);
  }
  y = tmp(s, tg_index_select(x, ax, int_vec(s, lo, out)));
  if (mode == TG_INTERP_LINEAR) {
    tg_tensor *yh = tmp(s, tg_index_select(x, ax, int_vec(s, hi, out)));
    int64_t sh[TG_MAX_DIMS];
    for (int i = 0; i < TNDIM(x) - ax; i++) sh[i] = i ? 1 : out;
    if (TDT(x) == TG_UINT8) {
      /* the weights in 1/128ths as tinygrad computes them: float32 w * 128 + 0.5, truncated */
      int32_t *wi = mem_alloc((size_t)out * sizeof *wi);
      if (!wi) {
        tg_set_error(TG_ERR_NOMEM, "%s: out of memory", s->op);
        y = NULL;
        goto done;
      }
      for (int64_t i = 0; i < out; i++) wi[i] = (int32_t)(w[i] * 128.0f + 0.5f);
      tg_tensor *wt = tmp(s, tg_reshape(int_vec(s, wi, out), TNDIM(x) - ax, sh));
      free(wi);
      tg_tensor *lo32 = tmp(s, tg_cast(y, TG_INT32)), *hi32 = tmp(s, tg_cast(yh, TG_INT32));
      tg_tensor *d = tmp(s, tg_add_scalar(tmp(s, tg_mul(tmp(s, tg_sub(hi32, lo32)), wt)), 64));
      tg_tensor *q = tmp(s, tg_rshift(d, tmp(s, tg_scalar(TG_INT32, 7))));  /* arithmetic: floor(d / 128) */
      y = tmp(s, tg_cast(tmp(s, tg_add(lo32, q)), TG_UINT8));
    } else {
      tg_tensor *wt = tmp(s, tg_reshape(tmp(s, tg_from_data(TG_FLOAT32, 1, &out, w, (size_t)out * sizeof *w)), TNDIM(x) - ax, sh));
      y = tmp(s, tg_add(y, tmp(s, tg_mul(tmp(s, tg_sub(yh, y)), tmp(s, tg_cast(wt, TDT(x)))))));
    }
  }
done:
  free(lo);
  free(hi);
  free(w);
  return y;
}

tg_tensor *tg_interpolate(tg_tensor *x, int ndim, const int64_t *size, tg_interp_mode mode, bool align_corners) {
  if (!x) return NULL;
  char a[SB];
  if (mode != TG_INTERP_NEAREST && mode != TG_INTERP_LINEAR && mode != TG_INTERP_NEAREST_EXACT) {
    tg_set_error(TG_ERR_ARG, "tg_interpolate: unknown mode %d (TG_INTERP_LINEAR, TG_INTERP_NEAREST or TG_INTERP_NEAREST_EXACT)",
                 (int)mode);
    return NULL;
  }
  if (align_corners && mode != TG_INTERP_LINEAR) {
    tg_set_error(TG_ERR_ARG, "tg_interpolate: align_corners is for TG_INTERP_LINEAR only");
    return NULL;
  }
  bool ok = ndim >= 1 && ndim <= TNDIM(x) && size;
  /* int32 positions, and (2 i + 1) * in in interp_axis stays in int64 */
  for (int i = 0; ok && i < ndim; i++) ok = size[i] >= 1 && size[i] <= INT32_MAX && TSHAPE(x)[TNDIM(x) - ndim + i] <= INT32_MAX;
  if (!ok) {
    tg_set_error(TG_ERR_ARG, "tg_interpolate: bad sizes (%d of them, each 1 to 2^31 - 1) for the trailing axes of shape %s",
                 ndim, shape_str(a, sizeof a, TNDIM(x), TSHAPE(x)));
    return NULL;
  }
  tmps s = TMPS("tg_interpolate");
  tg_dtype dt = TDT(x);
  /* linear blends in float32 at least (tinygrad's weights are float32), then converts back to x's dtype;
   * uint8 stays uint8 (tinygrad's fixed-point lerp) */
  tg_dtype work = mode == TG_INTERP_LINEAR && dt != TG_UINT8 ? dtype_promote(dt, TG_FLOAT32) : dt;
  tg_tensor *y = work != dt ? tmp(&s, tg_cast(x, work)) : x;
  for (int i = ndim - 1; i >= 0 && y; i--) {
    int ax = TNDIM(x) - ndim + i;
    if (TSHAPE(x)[ax] == 0) {
      tg_set_error(TG_ERR_ARG, "tg_interpolate: cannot resize an empty axis of shape %s", shape_str(a, sizeof a, TNDIM(x), TSHAPE(x)));
      return tmps_end(&s, NULL);
    }
    if (TSHAPE(x)[ax] != size[i]) y = interp_axis(&s, y, ax, size[i], mode, align_corners);
  }
  return tmps_end(&s, tmp(&s, tg_cast(y, dt)));
}
