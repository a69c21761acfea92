/* conv.c — convolution, transposed convolution and pooling as tinygrad builds them: pad, cut the input
 * into windows with movement ops alone (pool_windows: repeat, shrink, reshape, permute), then one
 * broadcasted multiply and one reduce. No im2col buffer exists: the windows are index arithmetic inside
 * the one kernel that does the multiply-and-sum, and an elementwise epilogue (bias, relu) fuses into it. */
#include <stdio.h>

#include "tensor/compose.h"

#define SB 256
#define STORE_PAD_MIN 65536  /* elements of a padded input worth a kernel of its own */
/* how a convolution's padded input is made (conv_core): in the windows' index arithmetic, stored whole, or
 * stored padded along its last axis with the other axes padded in the index arithmetic */
enum { PAD_LAZY, PAD_STORED, PAD_ROWS_LAZY };

/* y marked so that x's gradient is conv_input_grad's (see conv_core) */
static tg_tensor *mark_input_grad(tmps *s, tg_tensor *y, tg_tensor *x, tg_tensor *w, int64_t g, int nd,
                                  const int64_t *stride, const int64_t *dil, const int64_t *pads) {
  if (!y) return NULL;
  int64_t aux[2 + 4 * TG_CONV_DIMS];
  int na = 0;
  aux[na++] = g;
  aux[na++] = nd;
  for (int j = 0; j < nd; j++) aux[na++] = stride[j];
  for (int j = 0; j < nd; j++) aux[na++] = dil[j];
  for (int j = 0; j < 2 * nd; j++) aux[na++] = pads[j];
  uop *src[3] = {y->u, x->u, w->u};
  return tmp(s, tensor_new(uop_new_shaped(OP_CUSTOM_GRAD, TDT(y), 3, src, (uop_arg){.i = CG_CONV_INPUT}, na, aux,
                                          TNDIM(y), TSHAPE(y))));
}

/* x (N, Cin, *S), w (Cout, Cin/g, *K): pads[2*j], pads[2*j+1] before/after spatial axis j (negative shrinks).
 * x's gradient is not left to autograd: derived through pool_windows it is a reduce over the window trick's
 * repeats whose div/mod indices the simplifier does not fold (conv 32->32 5x5 on 24x24, batch 512: a 36-step
 * masked gather loop per input element, 3 s, no vector lanes). The transposed convolution gives the same
 * values as a plain windowed convolution of the gradient, which vectorizes like the forward pass. */
static tg_tensor *conv_core(tmps *s, tg_tensor *x, tg_tensor *w, tg_tensor *bias, int64_t g, int nd,
                            const int64_t *stride, const int64_t *dil, const int64_t *pads, int store_padded) {
  int64_t n = TSHAPE(x)[0], cin = TSHAPE(w)[1], cout = TSHAPE(w)[0], rcout = cout / g;
  const int64_t *k = TSHAPE(w) + 2;
  int64_t p[2 * TG_MAX_DIMS] = {0};
  tg_tensor *x_in = x;
  x = tmp(s, tg_detach(x));
  bool padded = false;
  int64_t padded_numel = TSHAPE(x)[0] * TSHAPE(x)[1];
  for (int j = 0; j < 2 * nd; j++) padded |= pads[j] > 0;
  for (int j = 0; j < nd; j++) padded_numel *= TSHAPE(x)[2 + j] + pads[2 * j] + pads[2 * j + 1];
  if (store_padded == PAD_ROWS_LAZY && nd >= 2 && padded && padded_numel >= STORE_PAD_MIN) {
    /* the last axis padded and stored, the others padded lazily: their masks depend on an output row and a tap
     * row only, scalars of the loops outside the tile, and the linearizer cuts the tap loop to where they hold
     * (trim.c) instead of multiplying zero rows */
    p[4 + 2 * nd - 2] = pads[2 * nd - 2];
    p[4 + 2 * nd - 1] = pads[2 * nd - 1];
    x = pad_const(s, x, p, 0);
    if (pads[2 * nd - 2] > 0 || pads[2 * nd - 1] > 0) x = tmp(s, tg_contiguous(x));
    for (int j = 0; j < 2 * nd - 2; j++) p[4 + j] = pads[j];
    p[4 + 2 * nd - 2] = p[4 + 2 * nd - 1] = 0;
    store_padded = PAD_LAZY;
  } else {
    for (int j = 0; j < 2 * nd; j++) p[4 + j] = pads[j];
  }
  x = pad_const(s, x, p, 0);
  /* store_padded: the padded input in its own buffer. The pad's masks then vanish from the windows, which
   * otherwise are computed and applied for every tap: the input gradient of conv 32->32 5x5 on 24x24 (its
   * output gradient padded by 4), batch 512, ran 1400 ms masked and 160 + 20 ms (pad) stored; the forward
   * conv 32x64x56x56 k3 padding 1, 45-48 ms in tinygrad's one kernel, 34 ms with the pad stored. A small
   * input keeps the one kernel: there the extra launch costs more than the masks. */
  if (store_padded == PAD_STORED && padded && tg_numel(x) >= STORE_PAD_MIN) x = tmp(s, tg_contiguous(x));
  x = pool_windows(s, x, nd, k, stride, dil);  /* (N, Cin, *O, *K) */
  if (!x) return NULL;
  const int64_t *o = TSHAPE(x) + 2;
  /* (N, g, cin, 1, *O, *K) -> expand rcout -> (N, g, rcout, *O, cin, *K) */
  int64_t sh[TG_MAX_DIMS];
  int perm[TG_MAX_DIMS], r = 0;
  sh[0] = n; sh[1] = g; sh[2] = cin; sh[3] = 1;
  for (int j = 0; j < nd; j++) { sh[4 + j] = o[j]; sh[4 + nd + j] = k[j]; }
  x = tmp(s, tg_reshape(x, 4 + 2 * nd, sh));
  sh[3] = rcout;
  x = tmp(s, tg_expand(x, 4 + 2 * nd, sh));
  perm[r++] = 0; perm[r++] = 1; perm[r++] = 3;
  for (int j = 0; j < nd; j++) perm[r++] = 4 + j;
  perm[r++] = 2;
  for (int j = 0; j < nd; j++) perm[r++] = 4 + nd + j;
  x = tmp(s, tg_permute(x, r, perm));
  /* w as (1, g, rcout, 1 x nd, cin, *K) */
  sh[0] = 1; sh[1] = g; sh[2] = rcout;
  for (int j = 0; j < nd; j++) { sh[3 + j] = 1; sh[4 + nd + j] = k[j]; }
  sh[3 + nd] = cin;
  tg_tensor *wr = tmp(s, tg_reshape(w, 4 + 2 * nd, sh));
  int axes[1 + TG_CONV_DIMS];
  for (int j = 0; j <= nd; j++) axes[j] = -1 - j;
  tg_tensor *y = tmp(s, tg_sum(tmp(s, tg_mul(x, wr)), nd + 1, axes, false));  /* (N, g, rcout, *O) */
  sh[0] = n; sh[1] = cout;
  for (int j = 0; j < nd; j++) sh[2 + j] = o[j];
  y = mark_input_grad(s, tmp(s, tg_reshape(y, 2 + nd, sh)), x_in, w, g, nd, stride, dil, pads);
  if (!bias) return y;
  for (int j = 0; j < nd; j++) sh[2 + j] = 1;
  sh[0] = 1;
  return tmp(s, tg_add(y, tmp(s, tg_reshape(bias, 2 + nd, sh))));
}

/* |v| (INT64_MIN as INT64_MAX): a padding's size, cropping or not */
static int64_t mag(int64_t v) { return v >= 0 ? v : v == INT64_MIN ? INT64_MAX : -v; }

/* shared argument checks; fills nd, g and the per-dimension options (pads: before/after per dim) */
static bool conv_args(const char *op, tg_tensor *x, tg_tensor *w, tg_tensor *bias, tg_conv_opts o, bool transposed,
                      int *nd, int64_t *g, int64_t *stride, int64_t *dil, int64_t *pads, int64_t *opad) {
  char a[SB], b[SB];
  int xn = TNDIM(x);
  if (xn < 3 || xn > 2 + TG_CONV_DIMS || TNDIM(w) != xn) {
    tg_set_error(TG_ERR_ARG, "%s: input %s and weight %s: need (N, C, *spatial) with 1 to %d spatial dims and a weight of the same rank",
                 op, shape_str(a, sizeof a, xn, TSHAPE(x)), shape_str(b, sizeof b, TNDIM(w), TSHAPE(w)), TG_CONV_DIMS);
    return false;
  }
  *nd = xn - 2;
  *g = o.groups ? o.groups : 1;
  if (*g < 1) {
    tg_set_error(TG_ERR_ARG, "%s: groups %lld must be at least 1", op, (long long)o.groups);
    return false;
  }
  if (!ints_dims(op, "stride", o.stride, *nd, 1, 1, stride) || !ints_dims(op, "dilation", o.dilation, *nd, 1, 1, dil) ||
      !ints_pads(op, o.padding, *nd, pads) || !ints_dims(op, "output_padding", o.output_padding, *nd, 0, 0, opad))
    return false;
  bool opadded = false;
  for (int j = 0; j < *nd; j++) opadded |= opad[j] != 0;
  if (!transposed && opadded) {
    tg_set_error(TG_ERR_ARG, "%s: output_padding is for tg_conv_transpose2d only", op);
    return false;
  }
  int64_t cin = TSHAPE(x)[1];
  bool ok = cin % *g == 0;
  if (transposed) ok = ok && TSHAPE(w)[0] == cin;
  else ok = ok && TSHAPE(w)[1] * *g == cin && TSHAPE(w)[0] % *g == 0;
  if (!ok) {
    tg_set_error(TG_ERR_ARG, "%s: input %s does not match weight %s with %lld groups", op,
                 shape_str(a, sizeof a, xn, TSHAPE(x)), shape_str(b, sizeof b, xn, TSHAPE(w)), (long long)*g);
    return false;
  }
  int64_t cout = transposed ? TSHAPE(w)[1] * *g : TSHAPE(w)[0];
  if (bias && tg_numel(bias) != cout) {
    tg_set_error(TG_ERR_ARG, "%s: bias %s for %lld output channels", op, shape_str(a, sizeof a, TNDIM(bias), TSHAPE(bias)),
                 (long long)cout);
    return false;
  }
  for (int j = 0; j < *nd; j++) {
    int64_t i = TSHAPE(x)[2 + j], k = TSHAPE(w)[2 + j], pb = pads[2 * j], pa = pads[2 * j + 1], out, t1, t2, t3;
    /* each term under 2^60 (shape.c): the output size arithmetic below and after cannot overflow. A negative
     * padding crops (tinygrad): its size counts too */
    if (i >= 1 && k >= 1 && !(size_mul(dil[j], k - 1, &t1) && size_add(i, mag(pb), &t2) && size_add(t2, mag(pa), &t2) &&
                              size_mul(i - 1, stride[j], &t3) && size_add(stride[j], dil[j], &t3))) {
      tg_set_error(TG_ERR_ARG, "%s: stride %lld, dilation %lld or padding (%lld, %lld) of spatial dim %d (size %lld, "
                   "kernel %lld) makes a size past 2^60", op, (long long)stride[j], (long long)dil[j], (long long)pb,
                   (long long)pa, j, (long long)i, (long long)k);
      return false;
    }
    if (transposed) {
      if (opad[j] >= stride[j] && opad[j] >= dil[j]) {
        tg_set_error(TG_ERR_ARG, "%s: output_padding %lld must be smaller than stride %lld or dilation %lld", op,
                     (long long)opad[j], (long long)stride[j], (long long)dil[j]);
        return false;
      }
      out = (i - 1) * stride[j] - pb - pa + dil[j] * (k - 1) + opad[j] + 1;
    } else {
      out = i + pb + pa - dil[j] * (k - 1) - 1;  /* one less than the output size */
      out = out < 0 ? 0 : out / stride[j] + 1;
    }
    if (out < 1) {
      tg_set_error(TG_ERR_ARG, "%s: input %s, weight %s: spatial dim %d gives no output (padding %lld+%lld, dilation %lld)",
                   op, shape_str(a, sizeof a, xn, TSHAPE(x)), shape_str(b, sizeof b, xn, TSHAPE(w)), j, (long long)pb,
                   (long long)pa, (long long)dil[j]);
      return false;
    }
  }
  return true;
}

tg_conv_opts tg_conv_defaults(void) { return (tg_conv_opts){.groups = 1}; }

/* How a convolution's padded input is made (conv_core's store_padded). An input already in a buffer (a model's
 * input, a batch) is padded by a kernel of its own: a copy, small against the convolution, and the windows then
 * read it without masks. A computed input is padded lazily, in the windows' index arithmetic: stored padded, its
 * producer (a convolution, its norm and ReLU) would store the zero border with its output tiles, and rows of 58
 * tile worse than rows of 56; stored twice (a residual's sum read padded by the next convolution and as it is
 * by the one after) a copy kernel would make the padded form. ResNet-18 (1x3x224x224, ONNX, random weights),
 * per-kernel minimums over 20 runs, 2 threads, AMD Zen 4: 28 -> 20 kernels, the 56x56 stage's convolutions and
 * pads 4.92 -> 4.75 ms, the 14x14 stage's 4.60 -> 4.36, the whole model 19.8-22.1 -> 18.7-19.7 ms (medians).
 * Each masked tap load costs a few percent of the convolution reading it (a batch-32 input in a buffer padded
 * lazily: 186-211 -> 178-193 GFLOP/s, hence the first rule). A weight that is one constant everywhere (ONNX's
 * light models: ConstantOfShape) leaves no weight load to take vector lanes along the channels, and the masked
 * rows are then the vectors: padded lazily, their 14x14 convolutions ran 0.09 -> 1.2 ms; stored, as before */
static bool constant_everywhere(const uop *u) {
  while (u->op >= OP_RESHAPE && u->op <= OP_FLIP && u->op != OP_PAD && u->nsrc == 1) u = u->src[0];
  return u->op == OP_CONST;
}

static int pad_mode(const tg_tensor *x, const tg_tensor *w) {
  const uop *u = x->u;
  bool stored = uop_storage((uop *)u) || u->op == OP_BUFFER || (u->op == OP_RESHAPE && u->src[0]->op == OP_BUFFER);
  return stored || constant_everywhere(w->u) ? PAD_STORED : PAD_LAZY;
}

tg_tensor *tg_conv2d(tg_tensor *x, tg_tensor *w, tg_tensor *bias, tg_conv_opts o) {
  if (!x || !w) return NULL;
  int nd;
  int64_t g, st[TG_CONV_DIMS], dl[TG_CONV_DIMS], op[TG_CONV_DIMS], pads[2 * TG_CONV_DIMS];
  if (!conv_args("tg_conv2d", x, w, bias, o, false, &nd, &g, st, dl, pads, op)) return NULL;
  tmps s = TMPS("tg_conv2d");
  return tmps_end(&s, conv_core(&s, x, w, bias, g, nd, st, dl, pads, pad_mode(x, w)));
}

/* x (N, Cin, *S), w (Cin, Cout/g, *K): the stride-1 convolution of x zero-stuffed by stride with the flipped,
 * group-transposed weight; pads (before/after, may be negative) of the stuffed input */
static tg_tensor *transposed_core(tmps *s, tg_tensor *x, tg_tensor *w, tg_tensor *bias, int64_t g, int nd,
                                  const int64_t *st, const int64_t *dl, const int64_t *pads, int store_padded) {
  int xn = 2 + nd;
  int64_t cin = TSHAPE(w)[0], rcout = TSHAPE(w)[1], sh[TG_MAX_DIMS], b[2 * TG_MAX_DIMS];
  const int64_t *k = TSHAPE(w) + 2;
  /* w (Cin, Cout/g, *K) -> (g, Cin/g, Cout/g, *K) -> (g, Cout/g, Cin/g, *K) flipped -> (Cout, Cin/g, *K) */
  sh[0] = g; sh[1] = cin / g; sh[2] = rcout;
  for (int j = 0; j < nd; j++) sh[3 + j] = k[j];
  tg_tensor *wt = tmp(s, tg_transpose(tmp(s, tg_reshape(w, 3 + nd, sh)), 1, 2));
  int flip[TG_CONV_DIMS];
  for (int j = 0; j < nd; j++) flip[j] = 3 + j;
  wt = tmp(s, tg_flip(wt, nd, flip));
  sh[0] = g * rcout; sh[1] = cin / g;
  for (int j = 0; j < nd; j++) sh[2 + j] = k[j];
  wt = tmp(s, tg_reshape(wt, xn, sh));
  bool strided = false;
  for (int j = 0; j < nd; j++) strided |= st[j] > 1;
  if (strided) {  /* (i) -> (i, 1) -> pad -> (i, s) -> (i*s) -> first i*s - (s-1): s-1 zeros between inputs */
    int64_t p[2 * TG_MAX_DIMS] = {0};
    sh[0] = TSHAPE(x)[0]; sh[1] = TSHAPE(x)[1];
    for (int j = 0; j < nd; j++) { sh[2 + 2 * j] = TSHAPE(x)[2 + j]; sh[3 + 2 * j] = 1; p[2 * (3 + 2 * j) + 1] = st[j] - 1; }
    x = tmp(s, tg_reshape(x, 2 + 2 * nd, sh));
    x = tmp(s, tg_pad_axes(x, 2 + 2 * nd, p, 0));
    if (!x) return NULL;
    for (int j = 0; j < nd; j++) sh[2 + j] = TSHAPE(x)[2 + 2 * j] * st[j];
    x = tmp(s, tg_reshape(x, xn, sh));
    for (int j = 0; j < xn; j++) { b[2 * j] = 0; b[2 * j + 1] = j < 2 ? sh[j] : sh[j] - (st[j - 2] - 1); }
    x = tmp(s, tg_shrink(x, xn, b));
  }
  int64_t one[TG_CONV_DIMS];
  for (int j = 0; j < nd; j++) one[j] = 1;
  if (!x || !wt) return NULL;
  return conv_core(s, x, wt, bias, g, nd, one, dl, pads, store_padded);
}

/* tinygrad's: a stride-1 convolution of the zero-stuffed input with the flipped, group-transposed weight */
tg_tensor *tg_conv_transpose2d(tg_tensor *x, tg_tensor *w, tg_tensor *bias, tg_conv_opts o) {
  if (!x || !w) return NULL;
  int nd;
  int64_t g, st[TG_CONV_DIMS], dl[TG_CONV_DIMS], pd[2 * TG_CONV_DIMS], op[TG_CONV_DIMS];
  if (!conv_args("tg_conv_transpose2d", x, w, bias, o, true, &nd, &g, st, dl, pd, op)) return NULL;
  tmps s = TMPS("tg_conv_transpose2d");
  int64_t pads[2 * TG_CONV_DIMS];
  for (int j = 0; j < nd; j++) {
    int64_t k = TSHAPE(w)[2 + j];
    pads[2 * j] = (k - 1) * dl[j] - pd[2 * j];
    pads[2 * j + 1] = (k - 1) * dl[j] - pd[2 * j + 1] + op[j];
  }
  return tmps_end(&s, transposed_core(&s, x, w, bias, g, nd, st, dl, pads, PAD_LAZY));
}

uop *conv_input_grad(uop *gy, uop *x, uop *w, const int64_t *aux) {
  int64_t g = aux[0];
  int nd = (int)aux[1];
  const int64_t *st = aux + 2, *dl = aux + 2 + nd, *pads = aux + 2 + 2 * nd;
  /* x's element i gets the windows that cover it: the transposed convolution, padded to end at x's edge */
  int64_t tp[2 * TG_CONV_DIMS];
  for (int j = 0; j < nd; j++) {
    int64_t k = w->shape[2 + j], i = x->shape[2 + j], o = gy->shape[2 + j];
    tp[2 * j] = (k - 1) * dl[j] - pads[2 * j];
    tp[2 * j + 1] = i - (o - 1) * st[j] - 1 + pads[2 * j];
  }
  tmps s = TMPS("tg_backward: conv2d input gradient");
  tg_tensor *gt = tmp(&s, tensor_new(gy)), *wt = tmp(&s, tensor_new(w));
  tg_tensor *dx = gt && wt ? transposed_core(&s, gt, wt, NULL, g, nd, st, dl, tp, PAD_ROWS_LAZY) : NULL;
  uop *r = dx ? dx->u : NULL;
  bool same = r && r->ndim == x->ndim;
  for (int j = 0; same && j < x->ndim; j++) same = r->shape[j] == x->shape[j];
  if (r && !same) tg_set_error(TG_ERR_INTERNAL, "tg_backward: conv2d input gradient of the wrong shape");
  tmps_end(&s, NULL);  /* the graph outlives its handles: nothing is collected while gradients are built */
  return same ? r : NULL;
}

/* ---- pooling ------------------------------------------------------------------------------------------ */

typedef struct pool_args { int nd; int64_t k[TG_CONV_DIMS], st[TG_CONV_DIMS], dl[TG_CONV_DIMS], pads[2 * TG_CONV_DIMS], reg[2 * TG_CONV_DIMS]; } pool_args;

tg_pool_opts tg_pool_defaults(void) { return (tg_pool_opts){.count_include_pad = true}; }

/* resolves the options; pads are the padding after tinygrad's _apply_ceil_mode, reg the plain padding */
static bool pool_setup(const char *op, tg_tensor *x, tg_pool_opts o, pool_args *a) {
  char b[SB];
  a->nd = o.ndims ? o.ndims : o.kernel.n == 2 || o.kernel.n == 3 ? o.kernel.n : 2;
  if (a->nd < 1 || a->nd > TG_CONV_DIMS || TNDIM(x) < a->nd) {
    tg_set_error(TG_ERR_ARG, "%s: %d pooled dims for an input of shape %s", op, a->nd, shape_str(b, sizeof b, TNDIM(x), TSHAPE(x)));
    return false;
  }
  if (!ints_dims(op, "kernel", o.kernel, a->nd, 2, 1, a->k) || !ints_dims(op, "stride", o.stride, a->nd, 0, 1, a->st) ||
      !ints_dims(op, "dilation", o.dilation, a->nd, 1, 1, a->dl) || !ints_pads(op, o.padding, a->nd, a->reg))
    return false;
  if (!o.stride.n)
    for (int j = 0; j < a->nd; j++) a->st[j] = a->k[j];
  int lead = TNDIM(x) - a->nd;
  for (int j = 0; j < a->nd; j++) {
    int64_t i = TSHAPE(x)[lead + j], k = a->k[j], s = a->st[j], d = a->dl[j], pb = a->reg[2 * j], pa = a->reg[2 * j + 1];
    a->pads[2 * j] = pb;
    a->pads[2 * j + 1] = pa;
    int64_t t1, t2;  /* each term under 2^60 (shape.c): the arithmetic below cannot overflow */
    if (!(size_mul(d, k - 1, &t1) && size_add(i, mag(pb), &t2) && size_add(t2, mag(pa), &t2) &&
          size_add(s, d, &t1))) {
      tg_set_error(TG_ERR_ARG, "%s: kernel %lld, stride %lld, dilation %lld or padding (%lld, %lld) makes a size past 2^60",
                   op, (long long)k, (long long)s, (long long)d, (long long)pb, (long long)pa);
      return false;
    }
    if (i + pb + pa < d * (k - 1) + 1) {
      tg_set_error(TG_ERR_ARG, "%s: window %lld (dilation %lld) is larger than the padded input %lld of shape %s", op,
                   (long long)k, (long long)d, (long long)(i + pb + pa), shape_str(b, sizeof b, TNDIM(x), TSHAPE(x)));
      return false;
    }
    if (o.ceil_mode) {  /* https://arxiv.org/pdf/1603.07285 section 5.1, relationship 15, as tinygrad */
      int64_t out = ceildiv(i + pb + pa - (d * (k - 1) + 1), s) + 1;
      int64_t past = s * (out - 1) - (pb + i - 1);
      a->pads[2 * j + 1] = pa + s * (out - 1) + (d * (k - 1) + 1) - (i + pb + pa) - (past > 0 ? past : 0);
    }
  }
  return true;
}

/* the windows (..., *O, *K) of x padded with value */
static tg_tensor *pool_of(tmps *s, tg_tensor *x, const pool_args *a, const int64_t *pads, double value) {
  int64_t p[2 * TG_MAX_DIMS] = {0};
  int lead = TNDIM(x) - a->nd;
  for (int j = 0; j < 2 * a->nd; j++) p[2 * lead + j] = pads[j];
  return pool_windows(s, pad_const(s, x, p, value), a->nd, a->k, a->st, a->dl);
}

tg_tensor *tg_max_pool2d(tg_tensor *x, tg_pool_opts o) {
  if (!x) return NULL;
  pool_args a;
  if (!pool_setup("tg_max_pool2d", x, o, &a)) return NULL;
  tmps s = TMPS("tg_max_pool2d");
  int axes[TG_CONV_DIMS];
  for (int j = 0; j < a.nd; j++) axes[j] = -1 - j;
  tg_tensor *w = pool_of(&s, x, &a, a.pads, dtype_min(TDT(x)));
  return tmps_end(&s, tmp(&s, tg_max(w, a.nd, axes, false)));
}

tg_tensor *tg_avg_pool2d(tg_tensor *x, tg_pool_opts o) {
  if (!x) return NULL;
  pool_args a;
  if (!pool_setup("tg_avg_pool2d", x, o, &a)) return NULL;
  tmps s = TMPS("tg_avg_pool2d");
  int axes[TG_CONV_DIMS];
  for (int j = 0; j < a.nd; j++) axes[j] = -1 - j;
  tg_tensor *sum = tmp(&s, tg_sum(pool_of(&s, x, &a, a.pads, 0), a.nd, axes, false)), *count;
  if (!o.count_include_pad) {
    count = tmp(&s, tg_sum(pool_of(&s, tmp(&s, tg_ones_like(x)), &a, a.pads, 0), a.nd, axes, false));
  } else if (!o.ceil_mode) {
    return tmps_end(&s, tmp(&s, tg_mean(pool_of(&s, x, &a, a.pads, 0), a.nd, axes, false)));
  } else {  /* the regular padding counts, the extra padding of ceil_mode does not */
    int64_t sh[TG_MAX_DIMS], extra[2 * TG_CONV_DIMS];
    int lead = TNDIM(x) - a.nd;
    for (int i = 0; i < TNDIM(x); i++) sh[i] = TSHAPE(x)[i];
    for (int j = 0; j < a.nd; j++) sh[lead + j] += a.reg[2 * j] + a.reg[2 * j + 1];
    for (int j = 0; j < 2 * a.nd; j++) extra[j] = a.pads[j] - a.reg[j];
    tg_tensor *ones = tmp(&s, tg_ones(TDT(x), TNDIM(x), sh));
    count = tmp(&s, tg_sum(pool_of(&s, ones, &a, extra, 0), a.nd, axes, false));
  }
  return tmps_end(&s, tmp(&s, tg_div(sum, count)));
}

/* tinygrad's max_pool2d(return_indices=True): where each window's maximum sits, as a flat index into its
 * input plane. The windows of x and of a countdown numbering (n .. 1, padded with int32's minimum) line
 * up; the numbering kept where x equals its window's maximum, maximized, gives the first such position. */
tg_status tg_max_pool2d_with_indices(tg_tensor *x, tg_pool_opts o, tg_tensor **values, tg_tensor **indices) {
  const char *op = "tg_max_pool2d_with_indices";
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (!values || !indices) {
    tg_set_error(TG_ERR_ARG, "%s: values and indices must not be NULL", op);
    return TG_ERR_ARG;
  }
  if (!x) return tg_error_status() ? tg_error_status() : TG_ERR_ARG;
  pool_args a;
  if (!pool_setup(op, x, o, &a)) return TG_ERR_ARG;
  int lead = TNDIM(x) - a.nd;
  int64_t plane = 1;
  for (int j = 0; j < a.nd; j++) plane *= TSHAPE(x)[lead + j];
  if (plane > INT32_MAX) {
    tg_set_error(TG_ERR_ARG, "%s: a plane of %lld elements does not fit the int32 indices", op, (long long)plane);
    return TG_ERR_ARG;
  }
  tmps s = TMPS(op);
  int axes[TG_CONV_DIMS];
  for (int j = 0; j < a.nd; j++) axes[j] = -1 - j;
  tg_tensor *w = pool_of(&s, x, &a, a.pads, dtype_min(TDT(x)));  /* (..., *O, *K) */
  tg_tensor *val = tg_max(w, a.nd, axes, false);  /* kept: one of the two results */
  int64_t ksh[TG_MAX_DIMS];
  for (int i = 0; val && i < TNDIM(w); i++) ksh[i] = i < TNDIM(val) ? TSHAPE(val)[i] : 1;
  tg_tensor *mx = val ? tmp(&s, tg_reshape(val, TNDIM(w), ksh)) : NULL;
  tg_tensor *num = tmp(&s, tg_reshape(tmp(&s, tg_arange(TG_INT32, (double)plane, 0, -1)), a.nd, TSHAPE(x) + lead));
  tg_tensor *nw = pool_of(&s, num, &a, a.pads, dtype_min(TG_INT32));  /* (*O, *K): the spatial axes alone */
  tg_tensor *hit = tmp(&s, tg_where(tmp(&s, tg_eq(w, mx)), nw, tmp(&s, tg_scalar(TG_INT32, 0))));
  tg_tensor *first = tmp(&s, tg_max(hit, a.nd, axes, false));
  tg_tensor *idx = tmp(&s, tg_sub(tmp(&s, tg_scalar(TG_INT32, (double)plane)), first));
  if (!idx) {
    tg_free(val);
    tmps_end(&s, NULL);
    return tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL;
  }
  *values = val;
  *indices = tmps_end(&s, idx);
  return TG_OK;
}

/* tinygrad's max_unpool2d: x (N, C, *S) scattered into zeros of (N, C, *out) at indices (flat per plane),
 * as a one-hot mask of each index against the output plane, where and a sum (an index out of range adds
 * nothing) */
tg_tensor *tg_max_unpool2d(tg_tensor *x, tg_tensor *indices, tg_pool_opts o, int nsize, const int64_t *output_size) {
  const char *op = "tg_max_unpool2d";
  if (!x || !indices) return NULL;
  char b1[SB], b2[SB];
  int nd = TNDIM(x) - 2;
  if (nd < 1 || nd > TG_CONV_DIMS || (o.ndims && o.ndims != nd)) {
    tg_set_error(TG_ERR_ARG, "%s: input %s: need (N, C, *spatial) with 1 to %d spatial dims%s", op,
                 shape_str(b1, sizeof b1, TNDIM(x), TSHAPE(x)), TG_CONV_DIMS, o.ndims ? " (and o.ndims of that count)" : "");
    return NULL;
  }
  bool same = TNDIM(indices) == TNDIM(x);
  for (int i = 0; same && i < TNDIM(x); i++) same = TSHAPE(indices)[i] == TSHAPE(x)[i];
  if (!same || !dtype_is_int(TDT(indices))) {
    tg_set_error(TG_ERR_ARG, "%s: indices %s %s must be integers of the input's shape %s", op, tg_dtype_name(TDT(indices)),
                 shape_str(b1, sizeof b1, TNDIM(indices), TSHAPE(indices)), shape_str(b2, sizeof b2, TNDIM(x), TSHAPE(x)));
    return NULL;
  }
  int64_t out[TG_CONV_DIMS], plane = 1;
  if (nsize) {
    if (nsize < nd || !output_size) {
      tg_set_error(TG_ERR_ARG, "%s: output_size has %d values for %d spatial dims", op, nsize, nd);
      return NULL;
    }
    for (int j = 0; j < nd; j++) out[j] = output_size[nsize - nd + j];  /* the last nd, as tinygrad */
  } else {
    int64_t k[TG_CONV_DIMS], st[TG_CONV_DIMS], dl[TG_CONV_DIMS], pads[2 * TG_CONV_DIMS];
    if (!ints_dims(op, "kernel", o.kernel, nd, 2, 1, k) || !ints_dims(op, "stride", o.stride, nd, 0, 1, st) ||
        !ints_dims(op, "dilation", o.dilation, nd, 1, 1, dl) || !ints_pads(op, o.padding, nd, pads))
      return NULL;
    for (int j = 0; j < nd; j++) {
      if (!o.stride.n) st[j] = k[j];
      int64_t i = TSHAPE(x)[2 + j], t1, t2;
      if (!(size_mul(i, st[j], &t1) && size_mul(dl[j], k[j], &t2))) {
        tg_set_error(TG_ERR_ARG, "%s: kernel %lld, stride %lld or dilation %lld makes a size past 2^60", op, (long long)k[j],
                     (long long)st[j], (long long)dl[j]);
        return NULL;
      }
      /* the inverse of the pooled size (https://arxiv.org/pdf/1603.07285 relationship 15) */
      out[j] = (i - 1) * st[j] - (pads[2 * j] + pads[2 * j + 1]) + dl[j] * (k[j] - 1) + 1;
    }
  }
  for (int j = 0; j < nd; j++) {
    if (out[j] < 0 || !size_mul(plane, out[j], &plane)) {
      tg_set_error(TG_ERR_ARG, "%s: output size %lld of spatial dim %d for input %s", op, (long long)out[j], j,
                   shape_str(b1, sizeof b1, TNDIM(x), TSHAPE(x)));
      return NULL;
    }
  }
  tmps s = TMPS(op);
  int64_t n = TSHAPE(x)[0], c = TSHAPE(x)[1], sh[2 + TG_CONV_DIMS];
  tg_tensor *xr = tmp(&s, tg_reshape(x, 4, (int64_t[]){n, c, -1, 1}));              /* (N, C, L, 1) */
  tg_tensor *ir = tmp(&s, tg_reshape(indices, 3, (int64_t[]){n, c, -1}));          /* (N, C, L) */
  tg_tensor *m = one_hot_mask(&s, ir, plane);                                      /* (N, C, L, out) */
  tg_tensor *y = tmp(&s, tg_sum(tmp(&s, tg_where(m, xr, tmp(&s, tg_scalar(TDT(x), 0)))), 1, (int[]){2}, false));
  sh[0] = n;
  sh[1] = c;
  for (int j = 0; j < nd; j++) sh[2 + j] = out[j];
  return tmps_end(&s, tmp(&s, tg_reshape(y, 2 + nd, sh)));
}
