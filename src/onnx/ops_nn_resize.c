/* ops_nn_resize.c — ONNX Resize and Upsample.
 *
 * Resize is separable: each resized axis is interpolated on its own, as onnx/reference/ops/op_resize.py
 * does. Shapes are static, so the source coordinate of every output position, its neighbours and their
 * weights are computed here on the host (in double, as the reference) and enter the graph as small
 * constant tensors: the axis becomes a gather of T taps (tg_index_select) times the weights, summed. A
 * nearest map that repeats or strides the input becomes a repeat or a slice instead of a gather. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_nn.h"
#include "../uop/uop.h"

typedef enum { RS_NEAREST, RS_LINEAR, RS_CUBIC } rs_mode;
typedef enum {
  CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_CROP, CT_HALF_PIXEL_SYM, CT_TF_HALF_PIXEL_NN
} ct_mode;
/* NM_SIMPLE: opset 10's Resize and Upsample (onnxruntime's): the floor when enlarging, the ceiling when shrinking */
typedef enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE } nearest_mode;

typedef struct rs_params {
  rs_mode mode;
  ct_mode ct;
  nearest_mode nm;
  double cubic_a, extrapolation;
  bool exclude_outside, antialias;
} rs_params;

#define RS_MAX_TAPS 1024

/* the interpolation weights for a position at `ratio` (in (0, 1]) past its left neighbour; their count */
static int coeffs(const rs_params *p, double ratio, double scale, double *c) {
  if (p->mode == RS_NEAREST) {
    bool right;
    if (ratio == 1.0) right = true;
    else if (p->nm == NM_ROUND_PREFER_FLOOR) right = ratio > 0.5;
    else if (p->nm == NM_ROUND_PREFER_CEIL) right = ratio >= 0.5;
    else if (p->nm == NM_SIMPLE) right = scale < 1;
    else right = p->nm == NM_CEIL;
    c[0] = right ? 0 : 1;
    c[1] = right ? 1 : 0;
    return 2;
  }
  double a = p->cubic_a;
  if (!p->antialias) {
    if (p->mode == RS_LINEAR) {
      c[0] = 1 - ratio;
      c[1] = ratio;
      return 2;
    }
    double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    c[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
    c[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
    c[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
    c[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
    return 4;
  }
  /* antialias (downscaling): the kernel stretched by 1 / scale, normalized */
  double s = scale < 1 ? scale : 1, sum = 0;
  double first = floor((p->mode == RS_LINEAR ? -1.0 : -2.0) / s) + 1;
  if (!(first > -RS_MAX_TAPS / 2 + 1)) return -1;
  int start = (int)first, cnt = 2 - 2 * start;
  for (int i = 0; i < cnt; i++) {
    double x = fabs(s * ((start + i) - ratio)), v;
    if (p->mode == RS_LINEAR) v = x < 1 ? 1 - x : 0;
    else if (x <= 1) v = (a + 2) * x * x * x - (a + 3) * x * x + 1;
    else if (x < 2) v = a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
    else v = 0;
    c[i] = v;
    sum += v;
  }
  for (int i = 0; i < cnt; i++) c[i] = sum != 0 ? c[i] / sum : 0;
  return cnt;
}

/* the source coordinate of output o; *extrap set when tf_crop_and_resize falls outside the input */
static double source_coord(const rs_params *p, int64_t o, int64_t in, int64_t out, double scale, double lo, double hi,
                           bool *extrap) {
  double y = (double)o, ow = scale * (double)in, x;
  *extrap = false;
  switch (p->ct) {
    case CT_ALIGN_CORNERS: return ow == 1 ? 0 : y * (double)(in - 1) / (ow - 1);
    case CT_ASYMMETRIC: return y / scale;
    case CT_TF_CROP:
      x = ow == 1 ? (hi - lo) * (double)(in - 1) / 2 : y * (hi - lo) * (double)(in - 1) / (ow - 1);
      x += lo * (double)(in - 1);
      *extrap = x < 0 || x > (double)(in - 1);
      return x;
    case CT_PYTORCH_HALF_PIXEL: return ow == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case CT_HALF_PIXEL_SYM: return (double)in / 2 * (1 - (double)out / ow) + (y + 0.5) / scale - 0.5;
    case CT_TF_HALF_PIXEL_NN: return (y + 0.5) / scale;
    case CT_HALF_PIXEL:
    default: return (y + 0.5) / scale - 0.5;
  }
}

/* x resized along axis from in to out positions; inside the caller's scope */
static tg_tensor *resize_axis(const onnx_node *n, const rs_params *p, tg_tensor *x, int axis, int64_t out, double scale,
                              double lo, double hi) {
  int64_t in = tg_shape(x, axis);
  if (in < 1 || in > INT32_MAX) return nn_err(n, "cannot resize axis %d of size %lld", axis, (long long)in);
  double c[RS_MAX_TAPS];
  /* taps per output: T (at most), then the compressed (nonzero) taps */
  int cnt = coeffs(p, 1.0, scale, c);
  if (cnt < 1 || out * cnt > ((int64_t)1 << 26))
    return nn_err(n, "scale %g: %lld output positions of %d taps is too many", scale, (long long)out, cnt);
  int32_t *idx = mem_alloc((size_t)out * (size_t)cnt * sizeof *idx);
  float *wt = mem_alloc((size_t)out * (size_t)cnt * sizeof *wt);
  bool *ext = mem_calloc((size_t)out, sizeof *ext);
  if (!idx || !wt || !ext) {
    free(idx), free(wt), free(ext);
    return nn_err(n, "out of memory for %lld output positions", (long long)out);
  }
  int T = 0;
  bool any_ext = false, unit = true;
  for (int64_t o = 0; o < out; o++) {
    bool e;
    double xo = source_coord(p, o, in, out, scale, lo, hi, &e);
    if (!(fabs(xo) < 1e12)) xo = xo > 0 ? 1e12 : -1e12;  /* NaN or far outside (a hostile roi): clamped below */
    any_ext |= e;
    ext[o] = e;
    double fl = floor(xo), ratio = xo == fl ? 1.0 : xo - fl;
    int k = coeffs(p, ratio, scale, c);
    int pw = (k + 1) / 2;
    double xp = xo + pw, pf = floor(xp), frac = xp - pf;
    int64_t off = k % 2 == 0 ? (frac == 0 ? -(k / 2) : -(k / 2) + 1) : (frac <= 0.5 ? -((k - 1) / 2) : -((k - 1) / 2) + 1);
    int64_t start = (int64_t)pf + off - pw;
    if (p->exclude_outside) {
      double sum = 0;
      for (int t = 0; t < k; t++) {
        int64_t j = start + t;
        if (j < 0 || j >= in) c[t] = 0;
        sum += c[t];
      }
      for (int t = 0; t < k; t++) c[t] /= sum == 0 ? 1 : sum;
    }
    int m = 0;
    for (int t = 0; t < k; t++) {
      if (c[t] == 0) continue;
      int64_t j = start + t;
      j = j < 0 ? 0 : j >= in ? in - 1 : j;
      int q;  /* taps of one source index add up */
      for (q = 0; q < m && idx[o * cnt + q] != (int32_t)j; q++) {}
      if (q == m) {
        idx[o * cnt + m] = (int32_t)j;
        wt[o * cnt + m++] = 0;
      }
      wt[o * cnt + q] += (float)c[t];
    }
    if (m == 0) idx[o * cnt + m] = 0, wt[o * cnt + m++] = 0;
    for (int q = 0; q < m; q++) unit &= wt[o * cnt + q] == 1.0f;
    for (int q = m; q < cnt; q++) idx[o * cnt + q] = idx[o * cnt], wt[o * cnt + q] = 0;
    if (m > T) T = m;
  }
  tg_tensor *y = NULL;
  int xn = tg_ndim(x);
  if (T == 1 && unit) {  /* a pure selection: repeat, slice or gather */
    int64_t f = out % in == 0 ? out / in : 0, st = 0;
    bool rep = f >= 1, strided = out >= 1;
    for (int64_t o = 0; o < out && rep; o++) rep = idx[o * cnt] == o / f;
    if (out >= 2) st = idx[cnt] - idx[0];
    for (int64_t o = 0; o < out && strided; o++) strided = st >= 1 && idx[o * cnt] == idx[0] + o * st;
    if (rep) {
      y = f == 1 ? tg_reshape(x, xn, tg_shape_ptr(x)) : tg_repeat_interleave(x, f, axis);
    } else if (strided || out == 1) {
      tg_slice sl[TG_MAX_DIMS];
      for (int i = 0; i < axis; i++) sl[i] = (tg_slice){0, 0, 1, true};
      sl[axis] = (tg_slice){idx[0], idx[0] + (out - 1) * (st ? st : 1) + 1, st ? st : 1, false};
      y = tg_slice_axes(x, axis + 1, sl);
    } else {
      int32_t *one = mem_alloc((size_t)out * sizeof *one);
      if (one) {
        for (int64_t o = 0; o < out; o++) one[o] = idx[o * cnt];
        y = tg_index_select(x, axis, tg_from_data(TG_INT32, 1, (int64_t[]){out}, one, (size_t)out * sizeof *one));
      } else {
        nn_err(n, "out of memory");
      }
      free(one);
    }
  } else {  /* T taps: gather (..., out, T, ...), weigh, sum over T */
    int32_t *ci = mem_alloc((size_t)out * (size_t)T * sizeof *ci);
    float *cw = mem_alloc((size_t)out * (size_t)T * sizeof *cw);
    if (ci && cw) {
      for (int64_t o = 0; o < out; o++)
        for (int t = 0; t < T; t++) ci[o * T + t] = idx[o * cnt + t], cw[o * T + t] = wt[o * cnt + t];
      int64_t ish[2] = {out, T}, wsh[TG_MAX_DIMS];
      for (int i = 0; i < xn + 1; i++) wsh[i] = i == axis ? out : i == axis + 1 ? T : 1;
      tg_tensor *it = tg_from_data(TG_INT32, 2, ish, ci, (size_t)out * (size_t)T * sizeof *ci);
      tg_tensor *w = tg_reshape(tg_from_data(TG_FLOAT32, 2, ish, cw, (size_t)out * (size_t)T * sizeof *cw), xn + 1, wsh);
      tg_dtype dt = tg_dtype_of(x);
      tg_tensor *xf = dt == TG_FLOAT32 || dt == TG_FLOAT64 ? x : tg_cast(x, TG_FLOAT32);
      y = tg_sum(tg_mul(tg_index_select(xf, axis, it), w), 1, (int[]){axis + 1}, false);
    } else {
      nn_err(n, "out of memory");
    }
    free(ci);
    free(cw);
  }
  if (y && any_ext) {
    uint8_t *mk = mem_alloc((size_t)out);
    if (mk) {
      for (int64_t o = 0; o < out; o++) mk[o] = ext[o];
      int64_t msh[TG_MAX_DIMS];
      for (int i = 0; i < xn; i++) msh[i] = i == axis ? out : 1;
      tg_tensor *m = tg_reshape(tg_from_data(TG_BOOL, 1, (int64_t[]){out}, mk, (size_t)out), xn, msh);
      tg_tensor *e = tg_full(tg_dtype_of(y), 0, NULL, p->extrapolation);
      y = tg_where(m, e, y);
    } else {
      y = nn_err(n, "out of memory");
    }
    free(mk);
  }
  free(idx);
  free(wt);
  free(ext);
  return y;
}

/* y back in x's dtype: integers round half to even and saturate, as the reference's saturate_cast */
static tg_tensor *to_dtype_of(tg_tensor *y, tg_tensor *x) {
  tg_dtype dt = tg_dtype_of(x);
  if (!y || tg_dtype_of(y) == dt) return y;
  if (dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64) return tg_cast(y, dt);
  double lo, hi;
  nn_int_range(dt, &lo, &hi);
  if (dt == TG_BOOL) return tg_cast(y, dt);
  return tg_cast(tg_clamp(tg_round(y), lo, hi), dt);
}

/* the resize of x: per axis (r of them) an output size and scale, and the roi (tf_crop_and_resize) */
static tg_tensor *resize_all(const onnx_node *n, const rs_params *p, tg_tensor *x, const int64_t *outs,
                             const double *scales, const double *roi) {
  int r = tg_ndim(x);
  tg_tensor *y = x;
  for (int a = 0; a < r && y; a++) {
    int64_t in = tg_shape(x, a);
    double lo = roi ? roi[a] : 0, hi = roi ? roi[r + a] : 1;
    bool noroi = !roi || (fabs(lo) < 1e-9 && fabs(hi - 1) < 1e-9);
    if (outs[a] == in && fabs(scales[a] - 1) <= 1e-9 && noroi) continue;
    if (outs[a] < 0 || outs[a] > ((int64_t)1 << 28)) return nn_err(n, "output size %lld of axis %d out of range", (long long)outs[a], a);
    if (outs[a] == 0) {
      int64_t sh[TG_MAX_DIMS];
      for (int i = 0; i < r; i++) sh[i] = i == a ? 0 : tg_shape(y, i);
      y = tg_zeros(tg_dtype_of(y), r, sh);
      continue;
    }
    y = resize_axis(n, p, y, a, outs[a], scales[a], lo, hi);
  }
  if (y == x) y = tg_reshape(x, r, tg_shape_ptr(x));
  return to_dtype_of(y, x);
}

static bool read_params(const onnx_node *n, rs_params *p) {
  const char *mode = onnx_attr_string(n, "mode", "nearest");
  const char *ct = onnx_attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const char *nm = onnx_attr_string(n, "nearest_mode", "round_prefer_floor");
  memset(p, 0, sizeof *p);
  if (!strcmp(mode, "nearest")) p->mode = RS_NEAREST;
  else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear") || !strcmp(mode, "trilinear")) p->mode = RS_LINEAR;
  else if (!strcmp(mode, "cubic") || !strcmp(mode, "bicubic")) p->mode = RS_CUBIC;
  else return nn_err(n, "unknown mode '%s'", mode), false;
  if (!strcmp(ct, "half_pixel")) p->ct = CT_HALF_PIXEL;
  else if (!strcmp(ct, "pytorch_half_pixel")) p->ct = CT_PYTORCH_HALF_PIXEL;
  else if (!strcmp(ct, "align_corners")) p->ct = CT_ALIGN_CORNERS;
  else if (!strcmp(ct, "asymmetric")) p->ct = CT_ASYMMETRIC;
  else if (!strcmp(ct, "tf_crop_and_resize")) p->ct = CT_TF_CROP;
  else if (!strcmp(ct, "half_pixel_symmetric")) p->ct = CT_HALF_PIXEL_SYM;
  else if (!strcmp(ct, "tf_half_pixel_for_nn")) p->ct = CT_TF_HALF_PIXEL_NN;  /* opsets 11 and 12 */
  else return nn_err(n, "unknown coordinate_transformation_mode '%s'", ct), false;
  if (!strcmp(nm, "round_prefer_floor")) p->nm = NM_ROUND_PREFER_FLOOR;
  else if (!strcmp(nm, "round_prefer_ceil")) p->nm = NM_ROUND_PREFER_CEIL;
  else if (!strcmp(nm, "floor")) p->nm = NM_FLOOR;
  else if (!strcmp(nm, "ceil")) p->nm = NM_CEIL;
  else return nn_err(n, "unknown nearest_mode '%s'", nm), false;
  p->cubic_a = onnx_attr_float(n, "cubic_coeff_a", -0.75);
  p->extrapolation = onnx_attr_float(n, "extrapolation_value", 0.0);
  p->exclude_outside = onnx_attr_int(n, "exclude_outside", 0) != 0;
  p->antialias = onnx_attr_int(n, "antialias", 0) != 0 && p->mode != RS_NEAREST;
  return true;
}

/* Resize: opset 10 (X, scales), 11+ (X, roi, scales, sizes), 18+ with axes and keep_aspect_ratio_policy */
tg_status onnx_nn_resize(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = NN_IN(0), *y = NULL;
  bool v10 = onnx_opset(c, "") < 11;
  int iroi = v10 ? -1 : 1, iscales = v10 ? 1 : 2, isizes = v10 ? -1 : 3;
  tg_scope_begin();
  rs_params p;
  if (!x || !read_params(n, &p)) return nn_done(n, out, 1, &y);
  if (v10) p.ct = CT_ASYMMETRIC, p.nm = NM_SIMPLE;  /* opset 10 has neither attribute */
  int r = tg_ndim(x), axes[TG_MAX_DIMS], na = r;
  for (int i = 0; i < r; i++) axes[i] = i;
  const int64_t *av;
  int64_t nav = onnx_attr_ints(n, "axes", &av);
  if (nav >= 0) {
    if (nav < 1 || nav > r) {
      y = nn_err(n, "%lld axes for rank %d", (long long)nav, r);
      return nn_done(n, out, 1, &y);
    }
    na = (int)nav;
    for (int i = 0; i < na; i++) {
      int64_t a = av[i] < 0 ? av[i] + r : av[i];
      if (a < 0 || a >= r) {
        y = nn_err(n, "axis %lld out of range for rank %d", (long long)av[i], r);
        return nn_done(n, out, 1, &y);
      }
      axes[i] = (int)a;
    }
  }
  double sc[TG_MAX_DIMS], roi_in[2 * TG_MAX_DIMS], roi[2 * TG_MAX_DIMS], scales[TG_MAX_DIMS];
  int64_t sz[TG_MAX_DIMS], outs[TG_MAX_DIMS], nsc = 0, nsz = 0, nroi = 0;
  if (NN_IN(iscales) && onnx_input_doubles(c, n, in, iscales, sc, TG_MAX_DIMS, &nsc) != TG_OK) return nn_done(n, out, 1, &y);
  if (isizes >= 0 && NN_IN(isizes) && onnx_input_ints(c, n, in, isizes, sz, TG_MAX_DIMS, &nsz) != TG_OK)
    return nn_done(n, out, 1, &y);
  if (p.ct == CT_TF_CROP && iroi >= 0 && NN_IN(iroi) &&
      onnx_input_doubles(c, n, in, iroi, roi_in, 2 * TG_MAX_DIMS, &nroi) != TG_OK)
    return nn_done(n, out, 1, &y);
  if ((nsc == 0) == (nsz == 0) || (nsc && nsc != na) || (nsz && nsz != na) || (nroi && nroi != 2 * na)) {
    y = nn_err(n, "needs scales or sizes (not both) with one value per resized axis (%d): %lld scales, %lld sizes, %lld roi",
               na, (long long)nsc, (long long)nsz, (long long)nroi);
    return nn_done(n, out, 1, &y);
  }
  for (int i = 0; i < r; i++) outs[i] = tg_shape(x, i), scales[i] = 1, roi[i] = 0, roi[r + i] = 1;
  for (int i = 0; i < na && nroi; i++) roi[axes[i]] = roi_in[i], roi[r + axes[i]] = roi_in[na + i];
  if (nsz) {
    const char *pol = onnx_attr_string(n, "keep_aspect_ratio_policy", "stretch");
    bool nl = !strcmp(pol, "not_larger"), ns = !strcmp(pol, "not_smaller");
    if (!nl && !ns && strcmp(pol, "stretch") != 0) {
      y = nn_err(n, "unknown keep_aspect_ratio_policy '%s'", pol);
      return nn_done(n, out, 1, &y);
    }
    double keep = nl ? INFINITY : -INFINITY;
    for (int i = 0; i < na; i++) {
      int64_t ins = tg_shape(x, axes[i]);
      if (sz[i] < 0 || ins < 1) {
        y = nn_err(n, "size %lld for axis %d of size %lld", (long long)sz[i], axes[i], (long long)ins);
        return nn_done(n, out, 1, &y);
      }
      double s = (double)sz[i] / (double)ins;
      outs[axes[i]] = sz[i];
      scales[axes[i]] = s;
      keep = nl ? fmin(keep, s) : fmax(keep, s);
    }
    if (nl || ns)
      for (int i = 0; i < na; i++) {
        if (!(keep * (double)tg_shape(x, axes[i]) < (double)((int64_t)1 << 28))) {
          y = nn_err(n, "size %g for axis %d out of range", keep * (double)tg_shape(x, axes[i]), axes[i]);
          return nn_done(n, out, 1, &y);
        }
        scales[axes[i]] = keep;
        outs[axes[i]] = (int64_t)(keep * (double)tg_shape(x, axes[i]) + 0.5);
      }
  } else {
    for (int i = 0; i < na; i++) {
      if (!(sc[i] > 0) || !isfinite(sc[i]) || sc[i] * (double)tg_shape(x, axes[i]) > (double)((int64_t)1 << 28)) {
        y = nn_err(n, "scale %g for axis %d out of range", sc[i], axes[i]);
        return nn_done(n, out, 1, &y);
      }
      scales[axes[i]] = sc[i];
      outs[axes[i]] = (int64_t)(sc[i] * (double)tg_shape(x, axes[i]));
    }
  }
  y = resize_all(n, &p, x, outs, scales, p.ct == CT_TF_CROP && nroi ? roi : NULL);
  return nn_done(n, out, 1, &y);
}

/* Upsample (deprecated at 10): scales, output floor(in * scale), the asymmetric coordinate mapping;
 * nearest takes the floor of o / scale (the ceiling for a scale below 1, as onnxruntime) */
static tg_status upsample(const onnx_node *n, tg_tensor *x, const double *sc, int64_t nsc, tg_tensor **out) {
  tg_tensor *y = NULL;
  tg_scope_begin();
  const char *mode = onnx_attr_string(n, "mode", "nearest");
  rs_params p = {.ct = CT_ASYMMETRIC, .nm = NM_SIMPLE, .cubic_a = -0.75};
  if (!strcmp(mode, "nearest")) p.mode = RS_NEAREST;
  else if (!strcmp(mode, "linear") || !strcmp(mode, "bilinear")) p.mode = RS_LINEAR;
  else y = nn_err(n, "unknown mode '%s'", mode);
  int r = tg_ndim(x);
  if (x && nsc != r) y = nn_err(n, "%lld scales for rank %d", (long long)nsc, r);
  if (!x || (nsc != r) || (strcmp(mode, "nearest") && p.mode != RS_LINEAR)) return nn_done(n, out, 1, &y);
  int64_t outs[TG_MAX_DIMS];
  for (int i = 0; i < r; i++) {
    if (!(sc[i] > 0) || sc[i] * (double)tg_shape(x, i) > (double)((int64_t)1 << 28)) {
      y = nn_err(n, "scale %g out of range", sc[i]);
      return nn_done(n, out, 1, &y);
    }
    outs[i] = (int64_t)(sc[i] * (double)tg_shape(x, i));
  }
  y = resize_all(n, &p, x, outs, sc, NULL);
  return nn_done(n, out, 1, &y);
}

tg_status onnx_nn_upsample_7(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  (void)c;
  const float *f;
  double sc[TG_MAX_DIMS];
  int64_t cnt = onnx_attr_floats(n, "scales", &f);
  if (cnt < 0 || cnt > TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "needs the scales attribute (one per axis)");
  for (int64_t i = 0; i < cnt; i++) sc[i] = f[i];
  return upsample(n, NN_IN(0), sc, cnt, out);
}

tg_status onnx_nn_upsample_9(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  double sc[TG_MAX_DIMS];
  int64_t cnt;
  if (onnx_input_doubles(c, n, in, 1, sc, TG_MAX_DIMS, &cnt) != TG_OK) return tg_error_status();
  return upsample(n, NN_IN(0), sc, cnt, out);
}

/* ---- GridSample: X (N, C, *D) sampled at grid (N, *O, nd) of normalized coordinates (last axis x, y, ...:
 * the reverse of D's order), as the reference (PyTorch's grid_sample). Every tap is a gather over the
 * flattened spatial axes (tg_gather: one-hot, lazy), weighted and summed. ---- */

typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad;

/* g (..., k) -> entry i of the last axis, (..., 1) */
static tg_tensor *cut_last(tg_tensor *g, int i) {
  int64_t b[2 * TG_MAX_DIMS];
  int nd = tg_ndim(g);
  for (int a = 0; a < nd; a++) b[2 * a] = 0, b[2 * a + 1] = tg_shape(g, a);
  b[2 * (nd - 1)] = i;
  b[2 * (nd - 1) + 1] = i + 1;
  return tg_shrink(g, nd, b);
}

/* x (float) folded into [lo, hi] by reflection, as the reference's _gs_reflect */
static tg_tensor *gs_reflect(tg_tensor *x, double lo, double hi) {
  double rng = hi - lo;
  tg_tensor *below = tg_lt_scalar(x, lo), *above = tg_gt_scalar(x, hi);
  tg_tensor *dx = tg_where(below, tg_rsub_scalar(x, lo), tg_sub_scalar(x, hi));
  tg_tensor *k = tg_trunc(tg_div_scalar(dx, rng));
  tg_tensor *r = tg_sub(dx, tg_mul_scalar(k, rng));
  tg_tensor *even = tg_eq_scalar(tg_fmod_scalar(k, 2.0), 0.0);
  tg_tensor *lo_r = tg_add_scalar(r, lo), *hi_r = tg_rsub_scalar(r, hi);
  tg_tensor *fb = tg_where(even, lo_r, hi_r), *fa = tg_where(even, hi_r, lo_r);
  return tg_where(below, fb, tg_where(above, fa, x));
}

/* an integer index tensor i (float) of a dim of size d under the padding mode: its clamped index, and for
 * zeros whether it was inside (*ok, else NULL) */
static tg_tensor *gs_index(tg_tensor *i, int64_t d, gs_pad pad, bool align, tg_tensor **ok) {
  *ok = NULL;
  if (pad == GS_ZEROS) *ok = tg_mul(tg_ge_scalar(i, 0), tg_lt_scalar(i, (double)d));
  else if (pad == GS_REFLECTION) i = tg_trunc(gs_reflect(i, align ? 0 : -0.5, align ? (double)d - 1 : (double)d - 0.5));
  return tg_cast(tg_clamp(i, 0, (double)(d - 1)), TG_INT32);
}

static void gs_cubic(tg_tensor *t, tg_tensor **c) {
  const double a = -0.75;
  tg_tensor *t1 = tg_add_scalar(t, 1), *q = tg_rsub_scalar(t, 1), *q1 = tg_rsub_scalar(t, 2);
  /* ((a x - 5a) x + 8a) x - 4a for 1 <= x < 2; ((a + 2) x - (a + 3)) x^2 + 1 for x <= 1 */
  c[0] = tg_sub_scalar(tg_mul(tg_add_scalar(tg_mul(tg_sub_scalar(tg_mul_scalar(t1, a), 5 * a), t1), 8 * a), t1), 4 * a);
  c[1] = tg_add_scalar(tg_mul(tg_mul(tg_sub_scalar(tg_mul_scalar(t, a + 2), a + 3), t), t), 1);
  c[2] = tg_add_scalar(tg_mul(tg_mul(tg_sub_scalar(tg_mul_scalar(q, a + 2), a + 3), q), q), 1);
  c[3] = tg_sub_scalar(tg_mul(tg_add_scalar(tg_mul(tg_sub_scalar(tg_mul_scalar(q1, a), 5 * a), q1), 8 * a), q1), 4 * a);
}

tg_status onnx_nn_grid_sample(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = NN_IN(0), *grid = NN_IN(1), *y = NULL;
  const char *mode = onnx_attr_string(n, "mode", onnx_opset(c, "") >= 20 ? "linear" : "bilinear");
  const char *padm = onnx_attr_string(n, "padding_mode", "zeros");
  bool align = onnx_attr_int(n, "align_corners", 0) != 0;
  tg_scope_begin();
  int xn = x ? tg_ndim(x) : 0, nd = xn - 2;
  if (!x || !grid || nd < 1 || nd > 3 || tg_ndim(grid) != xn || tg_shape(grid, -1) != nd || tg_shape(grid, 0) != tg_shape(x, 0)) {
    y = nn_err(n, "needs X (N, C, *D) with 1 to 3 spatial dims and grid (N, *O, %d)", nd);
    return nn_done(n, out, 1, &y);
  }
  int m = !strcmp(mode, "nearest") ? 0 : !strcmp(mode, "bilinear") || !strcmp(mode, "linear") ? 1
          : !strcmp(mode, "bicubic") || !strcmp(mode, "cubic") ? 2 : -1;
  gs_pad pad = !strcmp(padm, "zeros") ? GS_ZEROS : !strcmp(padm, "border") ? GS_BORDER : !strcmp(padm, "reflection") ? GS_REFLECTION : (gs_pad)-1;
  if (m < 0 || (int)pad < 0) {
    y = nn_err(n, "unknown mode '%s' or padding_mode '%s'", mode, padm);
    return nn_done(n, out, 1, &y);
  }
  int64_t N = tg_shape(x, 0), C = tg_shape(x, 1), L = 1, P = 1, d[3];
  for (int i = 0; i < nd; i++) d[i] = tg_shape(x, 2 + i), P *= d[i];
  for (int i = 1; i < xn - 1; i++) L *= tg_shape(grid, i);
  tg_tensor *g = tg_reshape(tg_cast(grid, TG_FLOAT32), 3, (int64_t[]){N, L, nd});
  tg_tensor *xf = tg_reshape(tg_cast(x, TG_FLOAT32), 3, (int64_t[]){N, C, P});
  int ntap = m == 0 ? 1 : m == 1 ? 2 : 4;
  tg_tensor *base[3], *w[3][4];  /* per dim: the first tap's index (float) and the taps' weights */
  for (int i = 0; i < nd; i++) {
    tg_tensor *v = tg_reshape(cut_last(g, nd - 1 - i), 2, (int64_t[]){N, L});
    v = align ? tg_mul_scalar(tg_add_scalar(v, 1), ((double)d[i] - 1) / 2) : tg_div_scalar(tg_sub_scalar(tg_mul_scalar(tg_add_scalar(v, 1), (double)d[i]), 1), 2);
    if (m == 0) v = tg_round(v);
    double lo = align ? 0 : -0.5, hi = align ? (double)d[i] - 1 : (double)d[i] - 0.5;
    if (pad == GS_BORDER) v = tg_where(tg_mul(tg_ge_scalar(v, lo), tg_le_scalar(v, hi)), v, tg_clamp(v, 0, (double)d[i] - 1));
    else if (pad == GS_REFLECTION) v = gs_reflect(v, lo, hi);
    if (m == 0) {
      base[i] = tg_trunc(v);
      w[i][0] = tg_ones_like(v);
    } else {
      tg_tensor *f = tg_floor(v), *t = tg_sub(v, f);
      base[i] = m == 1 ? f : tg_sub_scalar(f, 1);
      if (m == 1) w[i][0] = tg_rsub_scalar(t, 1), w[i][1] = t;
      else gs_cubic(t, w[i]);
    }
  }
  int combos = 1;
  for (int i = 0; i < nd; i++) combos *= ntap;
  for (int k = 0; k < combos; k++) {
    tg_tensor *flat = NULL, *wt = NULL;
    int rem = k;
    for (int i = nd - 1; i >= 0; i--) {
      int t = rem % ntap;
      rem /= ntap;
      tg_tensor *ok, *idx = gs_index(tg_add_scalar(base[i], t), d[i], pad, align, &ok);
      int64_t stride = 1;
      for (int j = i + 1; j < nd; j++) stride *= d[j];
      tg_tensor *term = tg_mul_scalar(idx, (double)stride), *wi = w[i][t];
      if (ok) wi = tg_mul(wi, tg_cast(ok, TG_FLOAT32));
      flat = flat ? tg_add(flat, term) : term;
      wt = wt ? tg_mul(wt, wi) : wi;
    }
    tg_tensor *ix = tg_expand(tg_reshape(flat, 3, (int64_t[]){N, 1, L}), 3, (int64_t[]){N, C, L});
    tg_tensor *v = tg_mul(tg_gather(xf, 2, ix), tg_reshape(wt, 3, (int64_t[]){N, 1, L}));
    y = y ? tg_add(y, v) : v;
  }
  int64_t sh[TG_MAX_DIMS];
  sh[0] = N, sh[1] = C;
  for (int i = 1; i < xn - 1; i++) sh[1 + i] = tg_shape(grid, i);
  y = to_dtype_of(tg_reshape(y, xn, sh), x);
  return nn_done(n, out, 1, &y);
}

/* AffineGrid: theta (N, 2, 3) or (N, 3, 4) and size (N, C, H, W) or (N, C, D, H, W) -> the grid (N, *S, nd)
 * of theta applied to the normalized coordinates (x, y[, z], 1) of every output position (computed here:
 * (2i + 1) / s - 1, or -1 + 2i / (s - 1) with align_corners) */
tg_status onnx_nn_affine_grid(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *theta = NN_IN(0), *y = NULL;
  bool align = onnx_attr_int(n, "align_corners", 0) != 0;
  int64_t size[5], cnt = 0;
  tg_scope_begin();
  if (!theta || !NN_IN(1)) {
    y = nn_err(n, "needs theta and size");
    return nn_done(n, out, 1, &y);
  }
  if (onnx_input_ints(c, n, in, 1, size, 5, &cnt) != TG_OK) return nn_done(n, out, 1, &y);
  int nd = (int)cnt - 2;
  int64_t P = 1;
  for (int i = 0; i < nd && i < 3; i++) P = size[2 + i] >= 1 && size[2 + i] <= (1 << 24) && P <= (1 << 24) ? P * size[2 + i] : (1 << 30);
  if (nd < 2 || nd > 3 || tg_ndim(theta) != 3 || tg_shape(theta, 0) != size[0] || tg_shape(theta, 1) != nd ||
      tg_shape(theta, 2) != nd + 1 || P > (1 << 24)) {
    y = nn_err(n, "theta (N, %d, %d) and a size of (N, C, 2 or 3 spatial sizes) under 2^24 positions", nd, nd + 1);
    return nn_done(n, out, 1, &y);
  }
  float *b = mem_alloc((size_t)P * (size_t)(nd + 1) * sizeof *b);
  if (!b) {
    y = nn_err(n, "out of memory");
    return nn_done(n, out, 1, &y);
  }
  for (int64_t p = 0; p < P; p++) {
    int64_t rem = p;
    for (int i = nd - 1; i >= 0; i--) {  /* spatial dim i is coordinate nd - 1 - i: x is the last dim */
      int64_t s = size[2 + i], k = rem % s;
      rem /= s;
      double v = align ? (s == 1 ? -1 : -1 + 2.0 * (double)k / (double)(s - 1)) : (2.0 * (double)k + 1) / (double)s - 1;
      b[p * (nd + 1) + (nd - 1 - i)] = (float)v;
    }
    b[p * (nd + 1) + nd] = 1;
  }
  tg_tensor *base = tg_from_data(TG_FLOAT32, 3, (int64_t[]){1, P, nd + 1}, b, (size_t)P * (size_t)(nd + 1) * sizeof *b);
  free(b);
  y = tg_matmul(tg_cast(base, tg_dtype_of(theta)), tg_transpose(theta, 1, 2));  /* (N, P, nd) */
  int64_t sh[5] = {size[0]};
  for (int i = 0; i < nd; i++) sh[1 + i] = size[2 + i];
  sh[1 + nd] = nd;
  y = tg_reshape(y, nd + 2, sh);
  return nn_done(n, out, 1, &y);
}
