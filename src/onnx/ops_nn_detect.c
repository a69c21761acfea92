/* ops_nn_detect.c — ONNX's object-detection operators: NonMaxSuppression and RoiAlign, with the semantics of
 * ONNX's reference evaluator (onnx/reference/ops), which ports onnxruntime's CPU kernels.
 *
 * NonMaxSuppression's output size depends on the values, so it reads boxes and scores on the host (realizing
 * them, as NonZero does: refused inside a tg_jit capture) and returns a host-made int64 tensor. RoiAlign
 * reads only the regions (R x 4 values and R batch indices) on the host: from them it computes, per output row
 * and column, which input rows and columns the bilinear samples touch and with what weights. Bilinear
 * interpolation is separable (a sample's corner weight is its row weight times its column weight, and a sample
 * outside the map zeroes its whole row or column), so the output is two lazy gathers of X, one along H and one
 * along W, each times its weights, then a sum (avg) or max over the sample axes: X itself never comes to the
 * host. Host arithmetic rounds to float after every step for float inputs, as the float kernels do, so a
 * sample count (a ceil) or an out-of-map test never falls on the other side of a boundary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_nn.h"
#include "../uop/uop.h"

/* the most values an operator here reads on the host, and the most sample entries RoiAlign makes per axis:
 * past them a hostile file would ask for gigabytes */
#define DETECT_MAX_HOST ((int64_t)1 << 28)
#define DETECT_MAX_SAMPLES ((int64_t)1 << 24)

/* ---- NonMaxSuppression --------------------------------------------------------------------------------- */

typedef struct nms_cand { float score; int64_t box; } nms_cand;

/* higher score first, then the lower box index (the reference's order); NaN scores last */
static int nms_cmp(const void *pa, const void *pb) {
  const nms_cand *a = pa, *b = pb;
  bool an = isnan(a->score), bn = isnan(b->score);
  if (an != bn) return an ? 1 : -1;
  if (!an && a->score != b->score) return a->score > b->score ? -1 : 1;
  return a->box < b->box ? -1 : a->box > b->box;
}

/* the reference's max_min: (lo, hi) of two coordinates */
static void nms_order(float a, float b, float *lo, float *hi) {
  if (a >= b) *lo = b, *hi = a;
  else *lo = a, *hi = b;
}

static float nms_max(float a, float b) { return a < b ? b : a; }
static float nms_min(float a, float b) { return b < a ? b : a; }

/* whether box a suppresses box b (or b a): their intersection over union is past iou, in float arithmetic
 * as the reference and onnxruntime compute it. center: boxes are (xc, yc, w, h), else (y1, x1, y2, x2) with the
 * corners in either order */
static bool nms_suppress(const float *a, const float *b, bool center, float iou) {
  float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (center) {
    float aw = a[2] / 2, ah = a[3] / 2, bw = b[2] / 2, bh = b[3] / 2;
    ax0 = a[0] - aw, ax1 = a[0] + aw, bx0 = b[0] - bw, bx1 = b[0] + bw;
    ay0 = a[1] - ah, ay1 = a[1] + ah, by0 = b[1] - bh, by1 = b[1] + bh;
  } else {
    nms_order(a[1], a[3], &ax0, &ax1);
    nms_order(b[1], b[3], &bx0, &bx1);
    nms_order(a[0], a[2], &ay0, &ay1);
    nms_order(b[0], b[2], &by0, &by1);
  }
  float ix0 = nms_max(ax0, bx0), ix1 = nms_min(ax1, bx1);
  if (ix1 <= ix0) return false;
  float iy0 = nms_max(ay0, by0), iy1 = nms_min(ay1, by1);
  if (iy1 <= iy0) return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  if (inter <= 0) return false;
  float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou;
}

/* optional scalar input i as a double into *v; false when absent or empty (the reference's default), or on
 * an error (*st set) */
static bool nms_scalar(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, double *v, tg_status *st) {
  tg_tensor *t = NN_IN(i);
  if (!t || tg_numel(t) == 0) return false;
  if (tg_numel(t) != 1) {
    *st = onnx_fail(n, TG_ERR_ARG, "input %d must hold one value, it has %lld", i, (long long)tg_numel(t));
    return false;
  }
  int64_t cnt;
  *st = onnx_input_doubles(c, n, in, i, v, 1, &cnt);
  return *st == TG_OK;
}

/* input i (numel values) on the host as floats: a new buffer, or NULL with the node's error recorded */
static float *host_floats(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, int64_t numel) {
  double *d = mem_alloc((size_t)(numel ? numel : 1) * sizeof *d);
  float *f = mem_alloc((size_t)(numel ? numel : 1) * sizeof *f);
  int64_t cnt = 0;
  if (!d || !f) {
    onnx_fail(n, TG_ERR_NOMEM, "%lld values of input %d on the host", (long long)numel, i);
  } else if (onnx_input_doubles(c, n, in, i, d, numel, &cnt) == TG_OK) {
    for (int64_t j = 0; j < cnt; j++) f[j] = (float)d[j];
    free(d);
    return f;
  }
  free(d);
  free(f);
  return NULL;
}

/* boxes (B, N, 4), scores (B, C, N), max_output_boxes_per_class (int64, absent: 0), iou_threshold (absent: 0),
 * score_threshold (optional: only scores above it are candidates) -> int64 (selected, 3): (batch, class, box)
 * by batch, class, then descending score. Per class, the candidates by descending score are kept unless one
 * already kept overlaps them by more than iou_threshold, until max_output_boxes_per_class are kept. */
tg_status onnx_nn_nms(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *boxes = NN_IN(0), *scores = NN_IN(1);
  if (!boxes || !scores) return onnx_fail(n, TG_ERR_ARG, "boxes and scores are required");
  if (tg_ndim(boxes) != 3 || tg_shape(boxes, 2) != 4 || tg_ndim(scores) != 3 ||
      tg_shape(scores, 0) != tg_shape(boxes, 0) || tg_shape(scores, 2) != tg_shape(boxes, 1))
    return onnx_fail(n, TG_ERR_ARG, "boxes of %d dims (B %lld, N %lld, %lld), scores of %d dims (B %lld, C %lld, "
                     "N %lld): need boxes (B, N, 4) and scores (B, C, N)", tg_ndim(boxes),
                     (long long)tg_shape(boxes, 0), (long long)tg_shape(boxes, 1), (long long)tg_shape(boxes, 2),
                     tg_ndim(scores), (long long)tg_shape(scores, 0), (long long)tg_shape(scores, 1),
                     (long long)tg_shape(scores, 2));
  if (tg_dtype_of(boxes) != TG_FLOAT32 || tg_dtype_of(scores) != TG_FLOAT32)
    return onnx_fail(n, TG_ERR_ARG, "boxes (%s) and scores (%s) must be float32", tg_dtype_name(tg_dtype_of(boxes)),
                     tg_dtype_name(tg_dtype_of(scores)));
  int64_t cpb = onnx_attr_int(n, "center_point_box", 0);
  if (cpb != 0 && cpb != 1) return onnx_fail(n, TG_ERR_ARG, "center_point_box %lld: must be 0 or 1", (long long)cpb);
  int64_t B = tg_shape(boxes, 0), N = tg_shape(boxes, 1), C = tg_shape(scores, 1);
  if (tg_numel(boxes) > DETECT_MAX_HOST || tg_numel(scores) > DETECT_MAX_HOST)
    return onnx_fail(n, TG_ERR_ARG, "boxes of %lld values and scores of %lld: at most %lld are read on the host",
                     (long long)tg_numel(boxes), (long long)tg_numel(scores), (long long)DETECT_MAX_HOST);
  tg_status st = TG_OK;
  int64_t keep = 0;
  if (NN_IN(2) && tg_numel(NN_IN(2)) > 0) {
    int64_t cnt;
    if (tg_numel(NN_IN(2)) != 1)
      return onnx_fail(n, TG_ERR_ARG, "max_output_boxes_per_class must hold one value, it has %lld",
                       (long long)tg_numel(NN_IN(2)));
    if ((st = onnx_input_ints(c, n, in, 2, &keep, 1, &cnt)) != TG_OK) return st;
    if (keep < 0) keep = 0;
    if (keep > N) keep = N;
  }
  double iou_d = 0, score_d = 0;
  nms_scalar(c, n, in, 3, &iou_d, &st);
  bool has_score = st == TG_OK && nms_scalar(c, n, in, 4, &score_d, &st);
  if (st) return st;
  float iou = (float)iou_d, score_min = (float)score_d;
  int64_t cap = B * C * keep;   /* at most numel(scores) */
  float *bx = NULL, *sc = NULL;
  nms_cand *cand = NULL;
  int64_t *kept = NULL, *res = NULL, nres = 0;
  if (cap > 0) {
    bx = host_floats(c, n, in, 0, B * N * 4);
    sc = bx ? host_floats(c, n, in, 1, B * C * N) : NULL;
    cand = sc ? mem_alloc((size_t)N * sizeof *cand) : NULL;
    kept = cand ? mem_alloc((size_t)keep * sizeof *kept) : NULL;
    res = kept ? mem_alloc((size_t)cap * 3 * sizeof *res) : NULL;
    if (sc && !res) st = onnx_fail(n, TG_ERR_NOMEM, "the selection of %lld boxes", (long long)(B * N));
    else if (!res) st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;   /* host_floats named the node */
  }
  for (int64_t b = 0; res && b < B; b++) {
    const float *bb = bx + b * N * 4;
    for (int64_t k = 0; k < C; k++) {
      const float *s = sc + (b * C + k) * N;
      int64_t m = 0, nk = 0;
      for (int64_t i = 0; i < N; i++)
        if (!has_score || s[i] > score_min) cand[m].score = s[i], cand[m++].box = i;
      qsort(cand, (size_t)m, sizeof *cand, nms_cmp);
      for (int64_t j = 0; j < m && nk < keep; j++) {
        bool ok = true;
        for (int64_t q = 0; q < nk && ok; q++)
          ok = !nms_suppress(bb + cand[j].box * 4, bb + kept[q] * 4, cpb == 1, iou);
        if (!ok) continue;
        kept[nk++] = cand[j].box;
        res[3 * nres] = b, res[3 * nres + 1] = k, res[3 * nres + 2] = cand[j].box;
        nres++;
      }
    }
  }
  free(bx), free(sc), free(cand), free(kept);
  if (st) {
    free(res);
    return st;
  }
  tg_scope_begin();
  int64_t sh[2] = {nres, 3};
  tg_tensor *y = nres ? tg_from_data(TG_INT64, 2, sh, res, (size_t)nres * 3 * sizeof *res) : tg_zeros(TG_INT64, 2, sh);
  /* the selection is known on the host: a Gather of the boxes by it needs no kernel to find its indices */
  if (y && onnx_set_known(c, 0, res, 3 * nres) != TG_OK) y = NULL;
  free(res);
  return nn_done(n, out, 1, &y);
}

/* ---- RoiAlign ------------------------------------------------------------------------------------------ */

/* v rounded to float when the kernel computes in float: the float kernels' arithmetic, step by step (a double
 * operation on two floats rounded to float is the float operation) */
static double rnd(bool f32, double v) { return f32 ? (double)(float)v : v; }

/* One axis (rows or columns) of one region's samples. For each of the pooled output positions p, the grid
 * samples' coordinates start + p bin + (i + 0.5) bin / grid; each sample is two entries, its low and high
 * neighbour along the axis (index into the input axis of the given size) with their linear weights times
 * mul. A sample outside [-1, size] weighs 0 (so does the whole sample: its row or column is the same for all
 * its corners). Entries past 2 grid up to per (the widest region's) weigh 0, or repeat the real ones when
 * repeat (max mode: a repeated value leaves the max alone, a 0 would not). */
static void roi_axis(bool f32, double start, double bin, int64_t grid, int64_t pooled, int64_t size, double mul,
                     int64_t per, bool repeat, int64_t *idx, double *w) {
  for (int64_t p = 0; p < pooled; p++) {
    int64_t *ip = idx + p * per;
    double *wp = w + p * per;
    for (int64_t i = 0; i < grid; i++) {
      double v = rnd(f32, rnd(f32, start + rnd(f32, (double)p * bin)) +
                              rnd(f32, rnd(f32, ((double)i + 0.5) * bin) / (double)grid));
      ip[2 * i] = ip[2 * i + 1] = 0;
      wp[2 * i] = wp[2 * i + 1] = 0;
      if (v < -1.0 || v > (double)size) continue;
      if (v <= 0) v = 0;
      int64_t lo = (int64_t)v, hi = lo + 1;
      if (lo >= size - 1) hi = lo = size - 1, v = (double)lo;
      double l = rnd(f32, v - (double)lo), h = rnd(f32, 1.0 - l);
      ip[2 * i] = lo, wp[2 * i] = rnd(f32, h * mul);
      ip[2 * i + 1] = hi, wp[2 * i + 1] = rnd(f32, l * mul);
    }
    for (int64_t e = 2 * grid; e < per; e++) {
      bool dup = repeat && grid > 0;
      ip[e] = dup ? ip[e % (2 * grid)] : 0;
      wp[e] = dup ? wp[e % (2 * grid)] : 0;
    }
  }
}

/* a tensor of dtype dt (float32 or float64) and the given shape from count doubles, or NULL */
static tg_tensor *roi_weights(tg_dtype dt, int nd, const int64_t *sh, const double *v, int64_t count) {
  if (dt == TG_FLOAT64) return tg_from_data(dt, nd, sh, v, (size_t)count * sizeof *v);
  float *f = mem_alloc((size_t)(count ? count : 1) * sizeof *f);
  if (!f) return NULL;
  for (int64_t j = 0; j < count; j++) f[j] = (float)v[j];
  tg_tensor *t = tg_from_data(dt, nd, sh, f, (size_t)count * sizeof *f);
  free(f);
  return t;
}

/* the host side of RoiAlign: per region its sample grid (gh, gw) and its start and bin sizes */
typedef struct roi_geom {
  double y0, x0, bh, bw;
  int64_t gh, gw;
} roi_geom;

/* X (N, C, H, W), rois (R, 4) as (x1, y1, x2, y2) in X's dtype, batch_indices (R) -> (R, C, oh, ow): the
 * average (or max) over each output bin's sampling grid of X bilinearly interpolated at the samples. Max mode
 * takes the max over samples and corners of each corner's weight times its value (the reference's and
 * onnxruntime's formula), not of the interpolated values */
tg_status onnx_nn_roi_align(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = NN_IN(0), *rois = NN_IN(1), *bi = NN_IN(2);
  if (!x || !rois || !bi) return onnx_fail(n, TG_ERR_ARG, "X, rois and batch_indices are required");
  tg_dtype dt = tg_dtype_of(x);
  if (dt != TG_FLOAT16 && dt != TG_BFLOAT16 && dt != TG_FLOAT32 && dt != TG_FLOAT64)
    return onnx_fail(n, TG_ERR_ARG, "X of dtype %s: need a float type", tg_dtype_name(dt));
  tg_dtype rdt = tg_dtype_of(rois);
  if (rdt != TG_FLOAT16 && rdt != TG_BFLOAT16 && rdt != TG_FLOAT32 && rdt != TG_FLOAT64)
    return onnx_fail(n, TG_ERR_ARG, "rois of dtype %s: need a float type", tg_dtype_name(rdt));
  if (tg_ndim(x) != 4) return onnx_fail(n, TG_ERR_ARG, "X of %d dims: need (N, C, H, W)", tg_ndim(x));
  if (tg_ndim(rois) != 2 || tg_shape(rois, 1) != 4)
    return onnx_fail(n, TG_ERR_ARG, "rois of %d dims (%lld columns): need (R, 4)", tg_ndim(rois),
                     (long long)(tg_ndim(rois) == 2 ? tg_shape(rois, 1) : -1));
  int64_t R = tg_shape(rois, 0);
  if (tg_ndim(bi) != 1 || tg_shape(bi, 0) != R)
    return onnx_fail(n, TG_ERR_ARG, "batch_indices of %d dims (%lld values) for %lld rois: need (R)", tg_ndim(bi),
                     (long long)tg_numel(bi), (long long)R);
  const char *mode = onnx_attr_string(n, "mode", "avg");
  bool avg = !strcmp(mode, "avg");
  if (!avg && strcmp(mode, "max")) return onnx_fail(n, TG_ERR_ARG, "unknown mode '%s' (avg or max)", mode);
  const char *ctm = onnx_attr_string(n, "coordinate_transformation_mode",
                                     onnx_opset(c, "") < 16 ? "output_half_pixel" : "half_pixel");
  bool half = !strcmp(ctm, "half_pixel");
  if (!half && strcmp(ctm, "output_half_pixel"))
    return onnx_fail(n, TG_ERR_ARG, "unknown coordinate_transformation_mode '%s' (half_pixel or output_half_pixel)",
                     ctm);
  int64_t oh = onnx_attr_int(n, "output_height", 1), ow = onnx_attr_int(n, "output_width", 1);
  int64_t sr = onnx_attr_int(n, "sampling_ratio", 0);
  double scale = onnx_attr_float(n, "spatial_scale", 1.0);
  if (oh < 1 || ow < 1 || oh > NN_MAX_SPATIAL || ow > NN_MAX_SPATIAL || sr < 0 || sr > NN_MAX_WINDOW)
    return onnx_fail(n, TG_ERR_ARG, "output_height %lld, output_width %lld, sampling_ratio %lld: need sizes of at "
                     "least 1 and a ratio of at least 0", (long long)oh, (long long)ow, (long long)sr);
  int64_t N = tg_shape(x, 0), C = tg_shape(x, 1), H = tg_shape(x, 2), W = tg_shape(x, 3);
  if (R > DETECT_MAX_HOST / 4)
    return onnx_fail(n, TG_ERR_ARG, "%lld rois: at most %lld are read on the host", (long long)R,
                     (long long)(DETECT_MAX_HOST / 4));
  if (R > 0 && (H < 1 || W < 1 || H > NN_MAX_SPATIAL || W > NN_MAX_SPATIAL))
    return onnx_fail(n, TG_ERR_ARG, "X of height %lld and width %lld: need sizes from 1 to %lld", (long long)H,
                     (long long)W, (long long)NN_MAX_SPATIAL);
  int64_t osh[4] = {R, C, oh, ow};
  if (R == 0 || C == 0) {
    tg_scope_begin();
    tg_tensor *y = tg_zeros(dt, 4, osh);
    return nn_done(n, out, 1, &y);
  }
  bool f32 = dt != TG_FLOAT64;
  tg_dtype cdt = f32 ? TG_FLOAT32 : TG_FLOAT64;
  double *rv = mem_alloc((size_t)R * 4 * sizeof *rv);
  int64_t *bv = mem_alloc((size_t)R * sizeof *bv), cnt;
  roi_geom *g = mem_alloc((size_t)R * sizeof *g);
  int64_t *yi = NULL, *xi = NULL, gh = 1, gw = 1;
  double *wy = NULL, *wx = NULL;
  tg_status st = TG_OK;
  if (!rv || !bv || !g) st = onnx_fail(n, TG_ERR_NOMEM, "%lld rois on the host", (long long)R);
  if (!st) st = onnx_input_doubles(c, n, in, 1, rv, R * 4, &cnt);
  if (!st) st = onnx_input_ints(c, n, in, 2, bv, R, &cnt);
  for (int64_t r = 0; !st && r < R; r++) {   /* each region's start, bin size and sampling grid */
    const double *q = rv + 4 * r;
    if (bv[r] < 0 || bv[r] >= N) {
      st = onnx_fail(n, TG_ERR_ARG, "batch index %lld of roi %lld is out of range for X's %lld images",
                     (long long)bv[r], (long long)r, (long long)N);
      break;
    }
    double off = half ? 0.5 : 0.0, s[4];
    for (int j = 0; j < 4; j++) s[j] = rnd(f32, rnd(f32, q[j] * scale) - off);
    double rw = rnd(f32, s[2] - s[0]), rh = rnd(f32, s[3] - s[1]);
    if (!half) rw = rw > 1.0 ? rw : 1.0, rh = rh > 1.0 ? rh : 1.0;
    roi_geom *e = g + r;
    e->x0 = s[0], e->y0 = s[1], e->bh = rnd(f32, rh / (double)oh), e->bw = rnd(f32, rw / (double)ow);
    double ch = sr > 0 ? (double)sr : ceil(e->bh), cw = sr > 0 ? (double)sr : ceil(e->bw);
    if (!isfinite(e->x0) || !isfinite(e->y0) || !isfinite(rw) || !isfinite(rh) || ch > NN_MAX_WINDOW ||
        cw > NN_MAX_WINDOW) {
      st = onnx_fail(n, TG_ERR_ARG, "roi %lld (%g, %g, %g, %g) at spatial_scale %g: not finite, or past %lld samples "
                     "per bin", (long long)r, q[0], q[1], q[2], q[3], scale, (long long)NN_MAX_WINDOW);
      break;
    }
    e->gh = ch > 0 ? (int64_t)ch : 0, e->gw = cw > 0 ? (int64_t)cw : 0;
    if (e->gh > gh) gh = e->gh;
    if (e->gw > gw) gw = e->gw;
  }
  int64_t A = 2 * gh, Bw = 2 * gw;   /* sample entries per output row and per output column */
  if (!st && (R * oh > DETECT_MAX_SAMPLES / A || R * ow > DETECT_MAX_SAMPLES / Bw))
    st = onnx_fail(n, TG_ERR_ARG, "%lld rois of %lld x %lld bins sampled %lld x %lld: past %lld samples per axis",
                   (long long)R, (long long)oh, (long long)ow, (long long)gh, (long long)gw,
                   (long long)DETECT_MAX_SAMPLES);
  if (!st) {
    yi = mem_alloc((size_t)(R * oh * A) * sizeof *yi), wy = mem_alloc((size_t)(R * oh * A) * sizeof *wy);
    xi = mem_alloc((size_t)(R * ow * Bw) * sizeof *xi), wx = mem_alloc((size_t)(R * ow * Bw) * sizeof *wx);
    if (!yi || !wy || !xi || !wx) st = onnx_fail(n, TG_ERR_NOMEM, "RoiAlign's sample tables");
  }
  for (int64_t r = 0; !st && r < R; r++) {
    const roi_geom *e = g + r;
    double mul = avg && e->gh > 0 && e->gw > 0 ? 1.0 / (double)(e->gh * e->gw) : 1.0;
    roi_axis(f32, e->y0, e->bh, e->gh, oh, H, avg ? mul : 1.0, A, !avg, yi + r * oh * A, wy + r * oh * A);
    roi_axis(f32, e->x0, e->bw, e->gw, ow, W, 1.0, Bw, !avg, xi + r * ow * Bw, wx + r * ow * Bw);
  }
  tg_tensor *y = NULL;
  tg_scope_begin();
  if (!st) {
    int64_t xs[4] = {R, C, H, W}, ys[4] = {R, 1, oh * A, 1}, ye[4] = {R, C, oh * A, W};
    int64_t xsh[4] = {R, 1, 1, ow * Bw}, xe[4] = {R, C, oh * A, ow * Bw}, vs[6] = {R, C, oh, A, ow, Bw};
    tg_tensor *xc = dt == cdt ? x : tg_cast(x, cdt);
    /* each region's image: a broadcast for one image, else a select along N */
    tg_tensor *xr = N == 1 ? tg_expand(xc, 4, xs)
                           : tg_index_select(xc, 0, tg_from_data(TG_INT64, 1, &R, bv, (size_t)R * sizeof *bv));
    /* (R, C, oh A, W): the sampled rows, weighted; then (R, C, oh A, ow Bw): the sampled columns of those */
    tg_tensor *ry = tg_from_data(TG_INT64, 4, ys, yi, (size_t)(R * oh * A) * sizeof *yi);
    tg_tensor *rows = tg_mul(tg_gather(xr, 2, tg_expand(ry, 4, ye)), roi_weights(cdt, 4, ys, wy, R * oh * A));
    tg_tensor *rx = tg_from_data(TG_INT64, 4, xsh, xi, (size_t)(R * ow * Bw) * sizeof *xi);
    tg_tensor *v = tg_gather(rows, 3, tg_expand(rx, 4, xe));
    v = tg_reshape(tg_mul(v, roi_weights(cdt, 4, xsh, wx, R * ow * Bw)), 6, vs);
    int axes[2] = {3, 5};
    y = avg ? tg_sum(v, 2, axes, false) : tg_max(v, 2, axes, false);
    if (y && dt != cdt) y = tg_cast(y, dt);
  }
  free(rv), free(bv), free(g), free(yi), free(wy), free(xi), free(wx);
  if (st) {
    tg_scope_end();
    return st;
  }
  return nn_done(n, out, 1, &y);
}
