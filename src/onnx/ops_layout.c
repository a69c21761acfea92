/* ops_layout.c — ONNX operators that rearrange or frame a tensor: Transpose, Tile, Pad (constant, reflect,
 * edge, wrap), DepthToSpace, SpaceToDepth, CenterCropPad, Col2Im, and the constant-making EyeLike and Trilu's
 * masks. Views and masks built with tg.h's calls, following ONNX's reference implementation (onnx/reference/ops). */
#include <string.h>

#include "ops_shape.h"

tg_status onnx_op_transpose(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]), perm[TG_MAX_DIMS];
  bool seen[TG_MAX_DIMS] = {false};
  const int64_t *p;
  int64_t np = onnx_attr_ints(n, "perm", &p);
  if (np >= 0 && np != nd) return onnx_fail(n, TG_ERR_ARG, "perm has %lld values for %d dims", (long long)np, nd);
  for (int d = 0; d < nd; d++) {
    int64_t a = np >= 0 ? p[d] : nd - 1 - d;
    if (a < 0 || a >= nd || seen[a]) return onnx_fail(n, TG_ERR_ARG, "perm is not a permutation of %d axes", nd);
    seen[a] = true;
    perm[d] = (int)a;
  }
  oshape_begin();
  return oshape_end(n, tg_permute(in[0], nd, perm), out, 0);
}

tg_status onnx_op_tile(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int64_t reps[TG_MAX_DIMS], cnt;
  tg_status st = onnx_input_ints(c, n, in, 1, reps, TG_MAX_DIMS, &cnt);
  if (st) return st;
  if (cnt != tg_ndim(in[0])) return onnx_fail(n, TG_ERR_ARG, "%lld repeats for %d dims", (long long)cnt, tg_ndim(in[0]));
  for (int64_t i = 0; i < cnt; i++)
    if (reps[i] < 0) return onnx_fail(n, TG_ERR_ARG, "repeats[%lld] is %lld", (long long)i, (long long)reps[i]);
  oshape_begin();
  return oshape_end(n, tg_repeat(in[0], (int)cnt, reps), out, 0);
}

tg_status onnx_op_pad(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  int64_t pads[2 * TG_MAX_DIMS], np, axes[TG_MAX_DIMS], na = -1, pairs[2 * TG_MAX_DIMS] = {0};
  double value = 0;
  tg_status st;
  if (onnx_opset(c, "") >= 11) {
    if ((st = onnx_input_ints(c, n, in, 1, pads, 2 * TG_MAX_DIMS, &np))) return st;
    if (n->nin > 2 && in[2]) {
      int64_t cnt;
      if ((st = onnx_input_doubles(c, n, in, 2, &value, 1, &cnt))) return st;
    }
    if (n->nin > 3 && in[3] && (st = onnx_input_ints(c, n, in, 3, axes, TG_MAX_DIMS, &na))) return st;
  } else {
    const int64_t *p;
    np = onnx_attr_ints(n, "pads", &p);
    if (np < 0 || np > 2 * TG_MAX_DIMS) return onnx_fail(n, TG_ERR_ARG, "the attribute pads is missing or too long");
    memcpy(pads, p, (size_t)np * sizeof *pads);
    value = onnx_attr_float(n, "value", 0);
  }
  if (na < 0) {
    na = nd;
    for (int d = 0; d < nd; d++) axes[d] = d;
  }
  if (np != 2 * na) return onnx_fail(n, TG_ERR_ARG, "%lld pads for %lld axes", (long long)np, (long long)na);
  for (int64_t i = 0; i < na; i++) {
    int a = oshape_axis(n, axes[i], nd);
    if (a < 0) return TG_ERR_ARG;
    pairs[2 * a] = pads[i], pairs[2 * a + 1] = pads[na + i];
  }
  const char *m = onnx_attr_string(n, "mode", "constant");
  tg_padding_mode mode;
  if (!strcmp(m, "constant")) mode = TG_PAD_CONSTANT;
  else if (!strcmp(m, "reflect")) mode = TG_PAD_REFLECT;
  else if (!strcmp(m, "edge")) mode = TG_PAD_REPLICATE;
  else if (!strcmp(m, "wrap")) mode = TG_PAD_CIRCULAR;
  else return onnx_fail(n, TG_ERR_ARG, "unknown mode '%s'", m);
  oshape_begin();
  return oshape_end(n, tg_pad_axes_mode(in[0], nd, pairs, mode, value), out, 0);
}

/* DepthToSpace and SpaceToDepth: (b, c, h, w) seen as 6 axes, permuted, seen as 4 */
static tg_status space_depth(const onnx_node *n, tg_tensor *x, bool to_space, bool crd, tg_tensor **out) {
  int64_t bs = onnx_attr_int(n, "blocksize", 0);
  if (tg_ndim(x) != 4 || bs < 1) return onnx_fail(n, TG_ERR_ARG, "needs 4 dims and a blocksize >= 1 (%d dims, %lld)",
                                                  tg_ndim(x), (long long)bs);
  int64_t b = tg_shape(x, 0), ch = tg_shape(x, 1), h = tg_shape(x, 2), w = tg_shape(x, 3);
  int64_t s6[6], s4[4];
  int perm[6];
  if (to_space) {
    if (ch % (bs * bs)) return onnx_fail(n, TG_ERR_ARG, "%lld channels do not divide by blocksize^2 %lld", (long long)ch,
                                         (long long)(bs * bs));
    int64_t cc = ch / (bs * bs);
    if (crd) memcpy(s6, (int64_t[]){b, cc, bs, bs, h, w}, sizeof s6), memcpy(perm, (int[]){0, 1, 4, 2, 5, 3}, sizeof perm);
    else memcpy(s6, (int64_t[]){b, bs, bs, cc, h, w}, sizeof s6), memcpy(perm, (int[]){0, 3, 4, 1, 5, 2}, sizeof perm);
    memcpy(s4, (int64_t[]){b, cc, h * bs, w * bs}, sizeof s4);
  } else {
    if (h % bs || w % bs) return onnx_fail(n, TG_ERR_ARG, "%lld x %lld do not divide by blocksize %lld", (long long)h,
                                           (long long)w, (long long)bs);
    memcpy(s6, (int64_t[]){b, ch, h / bs, bs, w / bs, bs}, sizeof s6);
    if (crd) memcpy(perm, (int[]){0, 1, 3, 5, 2, 4}, sizeof perm);   /* channels first, then the block offsets */
    else memcpy(perm, (int[]){0, 3, 5, 1, 2, 4}, sizeof perm);
    memcpy(s4, (int64_t[]){b, ch * bs * bs, h / bs, w / bs}, sizeof s4);
  }
  oshape_begin();
  return oshape_end(n, tg_reshape(tg_permute(tg_reshape(x, 6, s6), 6, perm), 4, s4), out, 0);
}

tg_status onnx_op_depth_to_space(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  const char *m = onnx_attr_string(n, "mode", "DCR");
  if (strcmp(m, "DCR") && strcmp(m, "CRD")) return onnx_fail(n, TG_ERR_ARG, "unknown mode '%s'", m);
  return space_depth(n, in[0], true, !strcmp(m, "CRD"), out);
}

/* SpaceToDepth's mode (DCR, the default, or CRD) came with opset 28 */
tg_status onnx_op_space_to_depth(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  const char *m = onnx_attr_string(n, "mode", "DCR");
  if (strcmp(m, "DCR") && strcmp(m, "CRD")) return onnx_fail(n, TG_ERR_ARG, "unknown mode '%s'", m);
  return space_depth(n, in[0], false, !strcmp(m, "CRD"), out);
}

/* CenterCropPad (opset 18): each listed axis (all by default) cropped or zero-padded to its size in `shape`,
 * centred (an odd difference puts the extra element at the end) */
tg_status onnx_op_center_crop_pad(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0];
  int nd = tg_ndim(x);
  const int64_t *ax = NULL;
  int64_t nax = onnx_attr_ints(n, "axes", &ax), sizes[TG_MAX_DIMS], count = 0;
  if (nax < 0) nax = nd;
  if (nax > nd) return onnx_fail(n, TG_ERR_ARG, "%lld axes for rank %d", (long long)nax, nd);
  tg_status st = onnx_input_ints(c, n, in, 1, sizes, TG_MAX_DIMS, &count);
  if (st) return st;
  if (count != nax) return onnx_fail(n, TG_ERR_ARG, "shape has %lld values for %lld axes", (long long)count, (long long)nax);
  int64_t bounds[2 * TG_MAX_DIMS], pairs[2 * TG_MAX_DIMS] = {0};
  for (int i = 0; i < nd; i++) bounds[2 * i] = 0, bounds[2 * i + 1] = tg_shape(x, i);
  bool seen[TG_MAX_DIMS] = {false};
  for (int64_t k = 0; k < nax; k++) {
    int64_t a = ax ? ax[k] : k;
    if (a < 0) a += nd;
    if (a < 0 || a >= nd || seen[a] || sizes[k] < 0)
      return onnx_fail(n, TG_ERR_ARG, "axis %lld (size %lld) is out of range, repeated or negative", (long long)(ax ? ax[k] : k),
                       (long long)sizes[k]);
    seen[a] = true;
    int64_t dim = tg_shape(x, (int)a);
    if (sizes[k] < dim) bounds[2 * a] = (dim - sizes[k]) / 2, bounds[2 * a + 1] = bounds[2 * a] + sizes[k];
    else pairs[2 * a] = (sizes[k] - dim) / 2, pairs[2 * a + 1] = sizes[k] - dim - pairs[2 * a];
  }
  oshape_begin();
  return oshape_end(n, tg_pad_axes(tg_shrink(x, nd, bounds), nd, pairs, 0), out, 0);
}

/* Col2Im (opset 18): columns (N, C * prod(block), L) summed back into images (N, C, *image_shape), im2col's
 * adjoint. Per kernel offset k, its column is the grid of block positions (N, C, *outs); spread by the strides
 * (zeros between) and shifted by k * dilation inside the padded image, the terms add up; the pads are cropped */
tg_status onnx_op_col2im(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  tg_tensor *x = in[0];
  int64_t img[TG_MAX_DIMS], blk[TG_MAX_DIMS], ni = 0, nb = 0;
  tg_status st;
  if ((st = onnx_input_ints(c, n, in, 1, img, TG_MAX_DIMS - 2, &ni)) || (st = onnx_input_ints(c, n, in, 2, blk, TG_MAX_DIMS - 2, &nb)))
    return st;
  int d = (int)ni;
  const int64_t *dil = NULL, *pads = NULL, *str = NULL;
  int64_t ndil = onnx_attr_ints(n, "dilations", &dil), npad = onnx_attr_ints(n, "pads", &pads), nstr = onnx_attr_ints(n, "strides", &str);
  if (tg_ndim(x) != 3 || d < 1 || nb != d || (ndil >= 0 && ndil != d) || (npad >= 0 && npad != 2 * d) || (nstr >= 0 && nstr != d))
    return onnx_fail(n, TG_ERR_ARG, "needs (N, C * prod(block), L) and image, block, dilations, strides of one length, pads twice it");
  int64_t prodb = 1, outs[TG_MAX_DIMS], L = 1, padded[TG_MAX_DIMS];
  for (int i = 0; i < d; i++) {
    int64_t di = dil ? dil[i] : 1, si = str ? str[i] : 1, pb = pads ? pads[i] : 0, pe = pads ? pads[d + i] : 0;
    const int64_t lim = (int64_t)1 << 31;   /* sums and products of two such values stay in int64 */
    if (blk[i] < 1 || di < 1 || si < 1 || pb < 0 || pe < 0 || img[i] < 1 || blk[i] > lim || di > lim || si > lim ||
        pb > lim || pe > lim || img[i] > lim)
      return onnx_fail(n, TG_ERR_ARG, "block, dilation, stride and image must be in 1..2^31, pads in 0..2^31 (dim %d)", i);
    padded[i] = img[i] + pb + pe;
    int64_t span = di * (blk[i] - 1) + 1;
    outs[i] = padded[i] >= span ? (padded[i] - span) / si + 1 : 0;
    prodb *= blk[i];
    L *= outs[i];
    if (prodb > tg_shape(x, 1) || L > tg_shape(x, 2))   /* checked as it grows: the products stay small */
      return onnx_fail(n, TG_ERR_ARG, "(%lld, %lld) columns cannot hold blocks of %lld elements over %lld positions",
                       (long long)tg_shape(x, 1), (long long)tg_shape(x, 2), (long long)prodb, (long long)L);
  }
  int64_t nn = tg_shape(x, 0), ch = tg_shape(x, 1) / (prodb ? prodb : 1);
  if (tg_shape(x, 1) % prodb || tg_shape(x, 2) != L || L == 0)
    return onnx_fail(n, TG_ERR_ARG, "(%lld, %lld, %lld) columns do not fit %lld-element blocks over %lld positions",
                     (long long)nn, (long long)tg_shape(x, 1), (long long)tg_shape(x, 2), (long long)prodb, (long long)L);
  oshape_begin();
  int64_t s4[4] = {nn, ch, prodb, L}, grid[2 + TG_MAX_DIMS];
  tg_tensor *cols = tg_reshape(x, 4, s4), *sum = NULL;
  grid[0] = nn, grid[1] = ch;
  for (int i = 0; i < d; i++) grid[2 + i] = outs[i];
  for (int64_t k = 0; k < prodb; k++) {
    int64_t b4[8] = {0, nn, 0, ch, k, k + 1, 0, L}, rem = k, koff[TG_MAX_DIMS];
    for (int i = d - 1; i >= 0; i--) koff[i] = rem % blk[i], rem /= blk[i];
    tg_tensor *t = tg_reshape(tg_shrink(cols, 4, b4), 2 + d, grid);
    for (int i = 0; i < d; i++) {   /* spread axis 2 + i by its stride, then shift it into the padded image */
      int ax = 2 + i, nd = tg_ndim(t);
      int64_t si = str ? str[i] : 1, di = dil ? dil[i] : 1, pairs[2 * TG_MAX_DIMS] = {0};
      if (si > 1) {
        int64_t sh[TG_MAX_DIMS + 1], sp[TG_MAX_DIMS], bnd[2 * TG_MAX_DIMS];
        for (int j = 0; j < nd; j++) sh[j + (j > ax)] = tg_shape(t, j);
        sh[ax + 1] = 1;   /* a new axis after ax, padded to the stride */
        int64_t up[2 * (TG_MAX_DIMS + 1)] = {0};
        up[2 * (ax + 1) + 1] = si - 1;
        tg_tensor *u = tg_pad_axes(tg_reshape(t, nd + 1, sh), nd + 1, up, 0);
        for (int j = 0; j < nd; j++) sp[j] = tg_shape(t, j), bnd[2 * j] = 0, bnd[2 * j + 1] = sp[j];
        sp[ax] *= si;
        bnd[2 * ax + 1] = (outs[i] - 1) * si + 1;
        t = tg_shrink(tg_reshape(u, nd, sp), nd, bnd);
      }
      pairs[2 * ax] = koff[i] * di;
      pairs[2 * ax + 1] = padded[i] - koff[i] * di - ((outs[i] - 1) * si + 1);
      t = tg_pad_axes(t, nd, pairs, 0);
    }
    sum = sum ? tg_add(sum, t) : t;
  }
  int64_t crop[2 * (2 + TG_MAX_DIMS)] = {0, nn, 0, ch};
  for (int i = 0; i < d; i++) {
    int64_t pb = pads ? pads[i] : 0;
    crop[2 * (2 + i)] = pb, crop[2 * (2 + i) + 1] = pb + img[i];
  }
  return oshape_end(n, tg_shrink(sum, 2 + d, crop), out, 0);
}

tg_status onnx_op_eyelike(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int nd = tg_ndim(in[0]);
  if (nd != 2) return onnx_fail(n, TG_ERR_ARG, "the input must have 2 dims, not %d", nd);
  tg_dtype dt = tg_dtype_of(in[0]);
  if (onnx_attr_has(n, "dtype") && !onnx_dtype_to_tg((int32_t)onnx_attr_int(n, "dtype", 1), &dt))
    return onnx_fail(n, TG_ERR_ARG, "dtype %lld is not supported", (long long)onnx_attr_int(n, "dtype", 1));
  int64_t rows = tg_shape(in[0], 0), cols = tg_shape(in[0], 1), k = onnx_attr_int(n, "k", 0);
  int64_t rs[2] = {rows, 1}, cs[2] = {1, cols};
  oshape_begin();
  tg_tensor *r = tg_reshape(tg_arange(TG_INT64, 0, (double)rows, 1), 2, rs);
  tg_tensor *cl = tg_reshape(tg_arange(TG_INT64, 0, (double)cols, 1), 2, cs);
  return oshape_end(n, tg_cast(tg_eq_scalar(tg_sub(cl, r), (double)k), dt), out, 0);
}

tg_status onnx_op_trilu(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {
  int64_t k = 0, cnt;
  if (n->nin > 1 && in[1]) {
    tg_status st = onnx_input_ints(c, n, in, 1, &k, 1, &cnt);
    if (st) return st;
  }
  if (tg_ndim(in[0]) < 2) return onnx_fail(n, TG_ERR_ARG, "the input must have 2 or more dims");
  oshape_begin();
  bool upper = onnx_attr_int(n, "upper", 1) != 0;
  return oshape_end(n, upper ? tg_triu(in[0], k) : tg_tril(in[0], k), out, 0);
}
