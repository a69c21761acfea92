/* ops_math_signal.c — ONNX's signal-processing operators (opset 17): the Hann, Hamming and Blackman windows,
 * DFT, STFT and MelWeightMatrix. A transform is two real matrix products with cos and sin matrices made on the
 * host (dft_matmul), so it fuses and runs on any device like a Linear layer; the frames of an STFT are a view
 * of the signal (tg_unfold). Complex values are ONNX's (..., 2) pairs of real and imaginary parts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_math.h"
#include "../uop/uop.h"

/* limits on what the host builds: a transform of N points to K outputs makes 2 N K floats of cos and sin, a mel
 * matrix its (bins, dft_length / 2 + 1) doubles (128 MiB at most) */
#define DFT_MAX_LEN (1 << 20)
#define DFT_MAX_ENTRIES ((int64_t)1 << 24)

/* ---- window functions ----------------------------------------------------------------------------------- */

/* Hann, Hamming, Blackman: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n < size, N = size (periodic) or
 * size - 1, in output_datatype (default float) */
MATH_OP(op_window) {
  int64_t size = 0, count = 0;
  tg_status st = onnx_input_ints(c, n, in, 0, &size, 1, &count);
  if (st) return st;
  if (count != 1 || size < 0) return onnx_fail(n, TG_ERR_ARG, "size must be one value >= 0");
  tg_dtype dt;
  int64_t odt = onnx_attr_int(n, "output_datatype", 1);
  if (odt < 0 || odt > INT32_MAX || !onnx_dtype_to_tg((int32_t)odt, &dt))
    return onnx_fail(n, TG_ERR_ARG, "output_datatype %lld is not a type tgc has", (long long)odt);
  double a0, a1, a2 = 0;
  if (!strcmp(n->op_type, "HannWindow")) a0 = 0.5, a1 = 0.5;
  else if (!strcmp(n->op_type, "HammingWindow")) a0 = 25.0 / 46, a1 = 21.0 / 46;
  else a0 = 0.42, a1 = 0.5, a2 = 0.08;
  double N = (double)(onnx_attr_int(n, "periodic", 1) ? size : size - 1);
  tg_tensor *x = tg_arange(dt == TG_FLOAT64 ? TG_FLOAT64 : TG_FLOAT32, 0, (double)size, 1);
  tg_tensor *w = tg_sub_scalar(tg_mul_scalar(tg_cos(tg_mul_scalar(x, 2 * M_PI / N)), -a1), -a0);
  if (a2 != 0) w = tg_add(w, tg_mul_scalar(tg_cos(tg_mul_scalar(x, 4 * M_PI / N)), a2));
  return math_out(n, out, 0, math_cast_to(w, dt));
}

/* ---- the transform ------------------------------------------------------------------------------------ */

/* x (..., L at axis a, ..., c) with axis a moved last: (..., c, L) */
static tg_tensor *dft_axis_last(tg_tensor *x, int a) {
  int nd = tg_ndim(x), order[TG_MAX_DIMS], k = 0;
  for (int i = 0; i < nd; i++)
    if (i != a) order[k++] = i;
  order[k] = a;
  return tg_permute(x, nd, order);
}

/* the real (part 0) or imaginary (1) values of xm (..., c, N): (..., N) */
static tg_tensor *dft_part(tg_tensor *xm, int part) {
  int nd = tg_ndim(xm);
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) b[2 * i] = 0, b[2 * i + 1] = tg_shape(xm, i);
  b[2 * (nd - 2)] = part, b[2 * (nd - 2) + 1] = part + 1;
  return tg_squeeze(tg_shrink(xm, nd, b), nd - 2);
}

/* y (..., K, 2) of the signal's other axes, K last but one, with K moved back to axis a: (..., K at a, ..., 2) */
static tg_tensor *dft_axis_back(tg_tensor *y, int a) {
  int nd = tg_ndim(y), order[TG_MAX_DIMS], k = 0;
  for (int i = 0; i < nd - 1; i++) order[i] = i == a ? nd - 2 : k++;
  order[nd - 1] = nd - 1;
  return tg_permute(y, nd, order);
}

/* x's last axis cut or zero-padded to N */
static tg_tensor *dft_fit(tg_tensor *x, int64_t N) {
  int nd = tg_ndim(x);
  int64_t L = tg_shape(x, nd - 1), pairs[2 * TG_MAX_DIMS] = {0}, bounds[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) bounds[2 * i] = 0, bounds[2 * i + 1] = tg_shape(x, i);
  if (L > N) bounds[2 * nd - 1] = N, x = tg_shrink(x, nd, bounds);
  if (L < N) pairs[2 * nd - 1] = N - L, x = tg_pad_axes(x, nd, pairs, 0);
  return x;
}

/* cos and sin of 2 pi k n / N for n < N and k < K as two matrices in dt: (N, K) for a transform, or (K, N) with
 * row k scaled by its Hermitian weight / N for the inverse of a one-sided spectrum (irfft). k n is reduced mod N
 * first so that large products keep their precision. false with the node's error */
static bool dft_tables(const onnx_node *n, int64_t N, int64_t K, bool irfft, tg_dtype dt, tg_tensor **C, tg_tensor **S) {
  if (N * K > DFT_MAX_ENTRIES) {
    onnx_fail(n, TG_ERR_ARG, "a transform of %lld points and %lld frequencies (tgc builds at most %lld cos and sin values)",
              (long long)N, (long long)K, (long long)DFT_MAX_ENTRIES);
    return false;
  }
  float *cs = mem_alloc((size_t)(2 * N * K) * sizeof *cs);
  if (!cs) {
    onnx_fail(n, TG_ERR_NOMEM, "out of memory for the %lld x %lld DFT matrices", (long long)N, (long long)K);
    return false;
  }
  for (int64_t i = 0; i < N; i++)
    for (int64_t k = 0; k < K; k++) {
      double t = 2 * M_PI * (double)((i * k) % N) / (double)N;
      double w = irfft ? (k == 0 || 2 * k == N ? 1.0 : 2.0) / (double)N : 1.0;
      int64_t at = irfft ? k * N + i : i * K + k;
      cs[at] = (float)(w * cos(t));
      cs[N * K + at] = (float)(w * sin(t));
    }
  int64_t shape[2] = {irfft ? K : N, irfft ? N : K};
  *C = math_cast_to(tg_from_data(TG_FLOAT32, 2, shape, cs, (size_t)(N * K) * sizeof *cs), dt);
  *S = math_cast_to(tg_from_data(TG_FLOAT32, 2, shape, cs + N * K, (size_t)(N * K) * sizeof *cs), dt);
  free(cs);
  return true;
}

/* X[k] = sum_n x[n] e^(-2 pi i k n / N) for k < K of re + i im (..., N) (im NULL: a real signal); the inverse
 * with e^(+...) and 1 / N. As two real matmuls with the (N, K) cos and sin matrices. (..., K, 2) in dt, or NULL
 * with the node's error. */
static tg_tensor *dft_matmul(const onnx_node *n, tg_tensor *re, tg_tensor *im, int64_t N, int64_t K, bool inverse,
                             tg_dtype dt) {
  tg_tensor *C, *S;
  if (!dft_tables(n, N, K, false, dt, &C, &S)) return NULL;
  /* forward: (re + i im)(cos - i sin); inverse: (re + i im)(cos + i sin) / N */
  double sg = inverse ? 1 : -1;
  tg_tensor *yr = tg_matmul(re, C), *yi = tg_mul_scalar(tg_matmul(re, S), sg);
  if (im) {
    yr = tg_sub(yr, tg_mul_scalar(tg_matmul(im, S), sg));
    yi = tg_add(yi, tg_matmul(im, C));
  }
  if (inverse) yr = tg_div_scalar(yr, (double)N), yi = tg_div_scalar(yi, (double)N);
  return math_cast_to(tg_stack(2, (tg_tensor *[]){yr, yi}, tg_ndim(re)), dt);
}

/* The inverse of a one-sided spectrum (numpy's irfft): the K = N / 2 + 1 bins of re + i im (..., K) stand for
 * all N by Hermitian symmetry, so x[n] = (re_0 + sum_k w_k (re_k cos - im_k sin)(2 pi k n / N)) / N with w_k = 2
 * but 1 for k = 0 and k = N / 2; real (..., N, 1) in dt */
static tg_tensor *irfft_matmul(const onnx_node *n, tg_tensor *re, tg_tensor *im, int64_t N, tg_dtype dt) {
  tg_tensor *C, *S;
  if (!dft_tables(n, N, N / 2 + 1, true, dt, &C, &S)) return NULL;
  tg_tensor *y = tg_matmul(re, C);
  if (im) y = tg_sub(y, tg_matmul(im, S));
  return math_cast_to(tg_unsqueeze(y, tg_ndim(re)), dt);
}

/* the signal x (..., 1) or (..., 2) of float values, at least min_nd dims; false with the node's error */
static bool signal_ok(const onnx_node *n, tg_tensor *x, int min_nd) {
  int nd = x ? tg_ndim(x) : 0;
  if (x && nd >= min_nd && (tg_shape(x, nd - 1) == 1 || tg_shape(x, nd - 1) == 2) && dtype_is_float(tg_dtype_of(x)))
    return true;
  if (!x) onnx_fail(n, TG_ERR_ARG, "input 0 (the signal) is missing");
  else
    onnx_fail(n, TG_ERR_ARG, "the signal must be float (..., 1) or (..., 2) of at least %d dims, not %s of %d dims",
              min_nd, tg_dtype_name(tg_dtype_of(x)), nd);
  return false;
}

/* The transform along one axis of the signal: dft_length (input 1) zero-pads or cuts it to N; the axis is an
 * attribute until opset 20, then input 2 (default -2); onesided keeps N / 2 + 1 outputs. (..., K, ..., 2). An
 * inverse of a onesided spectrum is numpy's irfft: N = 2 (bins - 1) real points (..., N, ..., 1). */
MATH_OP(op_dft) {
  tg_tensor *x = math_in(n, in, 0);
  if (!signal_ok(n, x, 2)) return TG_ERR_ARG;
  int nd = tg_ndim(x);
  int64_t axis = onnx_attr_int(n, "axis", 1), len = 0, count = 0;
  tg_status st;
  if (onnx_opset(c, "") >= 20) {
    axis = -2;
    if (math_in(n, in, 2) && (st = onnx_input_ints(c, n, in, 2, &axis, 1, &count))) return st;
  }
  int a = math_axis(n, axis, nd);
  if (a < 0) return TG_ERR_ARG;
  if (a == nd - 1) return onnx_fail(n, TG_ERR_ARG, "the axis may not be the last one (real and imaginary parts)");
  bool inverse = onnx_attr_int(n, "inverse", 0) != 0, onesided = onnx_attr_int(n, "onesided", 0) != 0;
  int64_t N = tg_shape(x, a);
  if (inverse && onesided) N = 2 * (N - 1);   /* the bins of a one-sided spectrum stand for this many points */
  if (math_in(n, in, 1)) {
    if ((st = onnx_input_ints(c, n, in, 1, &len, 1, &count))) return st;
    if (count != 1 || len < 1) return onnx_fail(n, TG_ERR_ARG, "dft_length must be one value >= 1");
    N = len;
  }
  if (N < 1 || N > DFT_MAX_LEN)
    return onnx_fail(n, TG_ERR_ARG, "a signal length of %lld (1 to %d)", (long long)N, DFT_MAX_LEN);
  if (inverse && onesided) {   /* one-sided spectrum in, real signal out (numpy's irfft) */
    tg_tensor *xm = dft_fit(dft_axis_last(x, a), N / 2 + 1);
    tg_tensor *re = dft_part(xm, 0), *im = tg_shape(x, nd - 1) == 2 ? dft_part(xm, 1) : NULL;
    tg_tensor *y = irfft_matmul(n, re, im, N, tg_dtype_of(x));
    if (!y) return tg_error_status();
    return math_out(n, out, 0, dft_axis_back(y, a));
  }
  tg_tensor *xm = dft_fit(dft_axis_last(x, a), N);  /* (..., 1|2, N) */
  tg_tensor *re = dft_part(xm, 0), *im = tg_shape(x, nd - 1) == 2 ? dft_part(xm, 1) : NULL;
  tg_tensor *y = dft_matmul(n, re, im, N, onesided ? N / 2 + 1 : N, inverse, tg_dtype_of(x));
  if (!y) return tg_error_status();
  return math_out(n, out, 0, dft_axis_back(y, a));
}

/* ---- STFT ------------------------------------------------------------------------------------------------ */

/* The short-time transform of signal (batch, length, 1|2): frames of the window's length W every frame_step
 * (input 1) samples, 1 + (length - frame_length) / frame_step of them, each multiplied by the window (input 2;
 * ones when absent) and transformed with frame_length (input 3; W by default) points: (batch, frames, K, 2),
 * K = frame_length / 2 + 1 when onesided (the default; real signals only). A frame running past the signal's end
 * (a window longer than frame_length) reads zeros there, as ONNX's reference does. */
MATH_OP(op_stft) {
  tg_tensor *x = math_in(n, in, 0), *window = math_in(n, in, 2);
  if (!signal_ok(n, x, 3)) return TG_ERR_ARG;
  if (tg_ndim(x) != 3) return onnx_fail(n, TG_ERR_ARG, "the signal must be (batch, length, 1|2), not %d dims", tg_ndim(x));
  int64_t L = tg_shape(x, 1), step = 0, flen = 0, count = 0;
  tg_status st = onnx_input_ints(c, n, in, 1, &step, 1, &count);
  if (st) return st;
  if (count != 1 || step < 1) return onnx_fail(n, TG_ERR_ARG, "frame_step must be one value >= 1");
  if (window && (tg_ndim(window) != 1 || !dtype_is_float(tg_dtype_of(window))))
    return onnx_fail(n, TG_ERR_ARG, "the window must be a 1-d float tensor");
  if (math_in(n, in, 3)) {
    if ((st = onnx_input_ints(c, n, in, 3, &flen, 1, &count))) return st;
    if (count != 1 || flen < 1) return onnx_fail(n, TG_ERR_ARG, "frame_length must be one value >= 1");
  } else {
    flen = window ? tg_shape(window, 0) : L;
  }
  int64_t W = window ? tg_shape(window, 0) : flen;
  if (flen > L || flen > DFT_MAX_LEN || W < 1)
    return onnx_fail(n, TG_ERR_ARG, "frame_length %lld and window %lld for a signal of %lld (frames of 1 to %d)",
                     (long long)flen, (long long)W, (long long)L, flen > L ? (int)L : DFT_MAX_LEN);
  bool onesided = onnx_attr_int(n, "onesided", 1) != 0;
  if (onesided && tg_shape(x, 2) == 2) return onnx_fail(n, TG_ERR_ARG, "onesided needs a real signal (..., 1)");
  int64_t frames = 1 + (L - flen) / step, need = (frames - 1) * step + W;
  tg_dtype dt = tg_dtype_of(x);
  tg_tensor *xs = x;
  if (need > L) xs = tg_pad_axes(x, 3, (int64_t[]){0, 0, 0, need - L, 0, 0}, 0);
  tg_tensor *f = tg_unfold(xs, 1, W, step);  /* (batch, windows >= frames, 1|2, W) */
  if (f && tg_shape(f, 1) > frames) f = tg_shrink(f, 4, (int64_t[]){0, tg_shape(f, 0), 0, frames, 0, tg_shape(f, 2), 0, W});
  if (window) f = tg_mul(f, math_cast_to(window, dt));
  f = dft_fit(f, flen);
  if (!f) return math_fail_tg(n);
  tg_tensor *re = dft_part(f, 0), *im = tg_shape(x, 2) == 2 ? dft_part(f, 1) : NULL;
  tg_tensor *y = dft_matmul(n, re, im, flen, onesided ? flen / 2 + 1 : flen, false, dt);
  if (!y) return tg_error_status();
  return math_out(n, out, 0, y);
}

/* ---- MelWeightMatrix --------------------------------------------------------------------------------- */

/* The (dft_length / 2 + 1, num_mel_bins) matrix that maps a onesided spectrum to mel bands: num_mel_bins + 2
 * points evenly spaced on the mel scale (2595 log10(1 + f / 700)) from lower_edge_hertz to upper_edge_hertz
 * (spaced by the range over num_mel_bins + 2, as ONNX's reference does), each taken to a spectrum bin
 * floor((dft_length + 1) f / sample_rate); band i rises linearly from bin p[i] to p[i + 1] and falls to p[i + 2].
 * Made on the host from the five scalar inputs, in output_datatype (default float). */
MATH_OP(op_mel_weight_matrix) {
  int64_t bins = 0, dlen = 0, count = 0;
  double rate = 0, lo = 0, hi = 0;
  tg_status st;
  if ((st = onnx_input_ints(c, n, in, 0, &bins, 1, &count))) return st;
  if (count != 1) return onnx_fail(n, TG_ERR_ARG, "num_mel_bins must be one value");
  if ((st = onnx_input_ints(c, n, in, 1, &dlen, 1, &count))) return st;
  if (count != 1) return onnx_fail(n, TG_ERR_ARG, "dft_length must be one value");
  if ((st = onnx_input_doubles(c, n, in, 2, &rate, 1, &count))) return st;
  if (count != 1) return onnx_fail(n, TG_ERR_ARG, "sample_rate must be one value");
  if ((st = onnx_input_doubles(c, n, in, 3, &lo, 1, &count))) return st;
  if (count != 1) return onnx_fail(n, TG_ERR_ARG, "lower_edge_hertz must be one value");
  if ((st = onnx_input_doubles(c, n, in, 4, &hi, 1, &count))) return st;
  if (count != 1) return onnx_fail(n, TG_ERR_ARG, "upper_edge_hertz must be one value");
  if (bins < 1 || dlen < 1 || dlen > DFT_MAX_LEN || bins > DFT_MAX_ENTRIES || bins * (dlen / 2 + 1) > DFT_MAX_ENTRIES ||
      !(rate > 0) || !(lo >= 0) || !(hi > lo) || !isfinite(hi))
    return onnx_fail(n, TG_ERR_ARG,
                     "num_mel_bins %lld and dft_length %lld (>= 1, a matrix of at most %lld values), sample_rate %g "
                     "(> 0) and edges %g to %g hertz (0 <= lower < upper)",
                     (long long)bins, (long long)dlen, (long long)DFT_MAX_ENTRIES, rate, lo, hi);
  tg_dtype dt;
  int64_t odt = onnx_attr_int(n, "output_datatype", 1);
  if (odt < 0 || odt > INT32_MAX || !onnx_dtype_to_tg((int32_t)odt, &dt))
    return onnx_fail(n, TG_ERR_ARG, "output_datatype %lld is not a type tgc has", (long long)odt);
  int64_t nspec = dlen / 2 + 1, *p = mem_alloc((size_t)(bins + 2) * sizeof *p);
  double *w = mem_calloc((size_t)(nspec * bins), sizeof *w);
  if (!p || !w) {
    free(p);
    free(w);
    return onnx_fail(n, TG_ERR_NOMEM, "out of memory for a %lld x %lld mel matrix", (long long)nspec, (long long)bins);
  }
  double mlo = 2595 * log10(1 + lo / 700), mhi = 2595 * log10(1 + hi / 700), mstep = (mhi - mlo) / (double)(bins + 2);
  for (int64_t i = 0; i < bins + 2; i++) {
    double f = 700 * (pow(10, ((double)i * mstep + mlo) / 2595) - 1);
    double b = floor((double)(dlen + 1) * f / rate);
    p[i] = b < 0 ? 0 : b >= (double)nspec ? nspec : (int64_t)b;  /* past the spectrum: no weight there */
  }
  for (int64_t i = 0; i < bins; i++) {
    int64_t l = p[i], m = p[i + 1], r = p[i + 2];
    if (m == l) {
      if (m < nspec) w[m * bins + i] = 1;
    } else {
      for (int64_t j = l; j <= m && j < nspec; j++) w[j * bins + i] = (double)(j - l) / (double)(m - l);
    }
    for (int64_t j = m; j < r && j < nspec; j++) w[j * bins + i] = (double)(r - j) / (double)(r - m);
  }
  tg_tensor *t = tg_from_data(TG_FLOAT64, 2, (int64_t[]){nspec, bins}, w, (size_t)(nspec * bins) * sizeof *w);
  free(p);
  free(w);
  return math_out(n, out, 0, math_cast_to(t, dt));
}
