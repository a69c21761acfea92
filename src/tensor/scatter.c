/* scatter.c — tinygrad's scatter and scatter_reduce: the index becomes a one-hot mask over the target axis
 * (index (..., i, ...) -> (..., n at dim, ..., i last)), src is laid out the same way, and a reduction over
 * the last axis combines what each target position receives. Lazy compositions of where and reductions. */
#include <math.h>
#include <stdio.h>

#include "tensor/compose.h"

#define SB 256

/* tinygrad's _pre_scatter: src and the mask as (x's shape, index's size along dim), padded with 0 / false */
static bool pre_scatter(tmps *s, tg_tensor *x, int *dim, tg_tensor *index, tg_tensor *src, tg_tensor **srco, tg_tensor **masko) {
  int nd = TNDIM(x);
  char a[SB], b[SB], c[SB];
  if (!dtype_is_int(TDT(index))) {
    tg_set_error(TG_ERR_ARG, "%s: index must be an integer tensor, got %s", s->op, tg_dtype_name(TDT(index)));
    return false;
  }
  int ax = norm_axis(s->op, *dim, nd);
  if (ax < 0) return false;
  bool ok = TNDIM(index) == nd && TNDIM(src) == nd && nd + 1 <= TG_MAX_DIMS;
  for (int d = 0; ok && d < nd; d++)
    ok = (d == ax || TSHAPE(x)[d] >= TSHAPE(index)[d]) && TSHAPE(src)[d] >= TSHAPE(index)[d];
  if (!ok) {
    tg_set_error(TG_ERR_ARG, "%s: index %s must have x's rank and be no larger than src %s, nor than x %s off axis %d", s->op,
                 shape_str(a, sizeof a, TNDIM(index), TSHAPE(index)), shape_str(b, sizeof b, TNDIM(src), TSHAPE(src)),
                 shape_str(c, sizeof c, nd, TSHAPE(x)), ax);
    return false;
  }
  if (TDT(src) != TDT(x)) {
    tg_set_error(TG_ERR_ARG, "%s: src is %s, x is %s (they must match)", s->op, tg_dtype_name(TDT(src)), tg_dtype_name(TDT(x)));
    return false;
  }
  *dim = ax;
  int64_t n = TSHAPE(x)[ax], sh[TG_MAX_DIMS], p[2 * TG_MAX_DIMS] = {0};
  tg_tensor *sv = tmp(s, tg_shrink_to(src, nd, TSHAPE(index)));
  for (int d = 0; d < nd; d++) sh[d] = TSHAPE(index)[d];
  sh[nd] = n;
  sv = tmp(s, tg_transpose(tmp(s, tg_expand(tmp(s, tg_unsqueeze(sv, -1)), nd + 1, sh)), -1, ax));
  tg_tensor *m = tmp(s, tg_transpose(one_hot_mask(s, index, n), -1, ax));
  if (!sv || !m) return false;
  for (int d = 0; d < nd; d++) p[2 * d + 1] = TSHAPE(x)[d] - TSHAPE(sv)[d];
  *srco = tmp(s, tg_pad_axes(sv, nd + 1, p, 0));
  *masko = tmp(s, tg_pad_axes(m, nd + 1, p, 0));
  return *srco && *masko;
}

static tg_tensor *scal(tmps *s, tg_dtype dt, double v) { return tmp(s, tg_scalar(dt, v)); }

/* the dtype of row positions compared with a max: float32 while exact, int32 beyond */
static tg_dtype pos_dtype(int64_t n) { return n <= (1 << 24) ? TG_FLOAT32 : TG_INT32; }

/* the highest value of dt (inf for floats) that converts back to dt without overflow: dtype_max's
 * (double)INT64_MAX rounds up to 2^63, past int64 */
static double dt_max(tg_dtype dt) {
  switch (dt) {
    case TG_BOOL: return 1;
    case TG_UINT8: return UINT8_MAX;
    case TG_UINT16: return UINT16_MAX;
    case TG_UINT32: return UINT32_MAX;
    case TG_UINT64: return 18446744073709549568.0;  /* the largest double below 2^64 */
    case TG_INT8: return INT8_MAX;
    case TG_INT16: return INT16_MAX;
    case TG_INT32: return INT32_MAX;
    case TG_INT64: return 9223372036854774784.0;    /* the largest double below 2^63 */
    default: return INFINITY;
  }
}

tg_tensor *tg_scatter_reduce(tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src, tg_scatter_reduce_op op, bool include_self) {
  if (!x || !index || !src) return NULL;
  if (op < TG_SCATTER_SUM || op > TG_SCATTER_AMIN) {
    tg_set_error(TG_ERR_ARG, "tg_scatter_reduce: reduce %d must be one of sum, prod, mean, amax, amin", (int)op);
    return NULL;
  }
  tmps s = TMPS("tg_scatter_reduce");
  tg_tensor *sv, *m;
  if (!pre_scatter(&s, x, &dim, index, src, &sv, &m)) return tmps_end(&s, NULL);
  tg_dtype dt = TDT(x);
  int last = -1;
  /* where no index reaches: x's value, or (include_self false) the reduction's identity */
  tg_tensor *none = tmp(&s, tg_logical_not(tmp(&s, tg_sum(m, 1, &last, false))));  /* a sum: see pos_dtype */
  tg_tensor *r = NULL;
  switch (op) {
    case TG_SCATTER_SUM: case TG_SCATTER_MEAN: {
      tg_tensor *sum = tmp(&s, tg_cast(tmp(&s, tg_sum(tmp(&s, tg_where(m, sv, scal(&s, dt, 0))), 1, &last, false)), dt));
      tg_tensor *self = include_self ? x : tmp(&s, tg_where(none, x, scal(&s, dt, 0)));
      r = tmp(&s, tg_add(sum, self));
      if (op == TG_SCATTER_MEAN) {
        tg_tensor *cnt = tmp(&s, tg_sum(tmp(&s, tg_cast(m, TG_INT32)), 1, &last, false));
        cnt = include_self ? tmp(&s, tg_add_scalar(cnt, 1)) : tmp(&s, tg_add(cnt, tmp(&s, tg_cast(none, TG_INT32))));
        r = tmp(&s, tg_cast(tmp(&s, tg_div(r, cnt)), dt));
      }
      break;
    }
    case TG_SCATTER_PROD: {
      tg_tensor *pr = tmp(&s, tg_prod(tmp(&s, tg_where(m, sv, scal(&s, dt, 1))), 1, &last, false));
      r = tmp(&s, tg_mul(pr, include_self ? x : tmp(&s, tg_where(none, x, scal(&s, dt, 1)))));
      break;
    }
    case TG_SCATTER_AMAX: case TG_SCATTER_AMIN: {
      bool mx = op == TG_SCATTER_AMAX;
      double id = mx ? dtype_min(dt) : dt_max(dt);
      tg_tensor *w = tmp(&s, tg_where(m, sv, scal(&s, dt, id)));
      tg_tensor *red = tmp(&s, mx ? tg_max(w, 1, &last, false) : tg_min(w, 1, &last, false));
      tg_tensor *self = include_self ? x : tmp(&s, tg_where(none, x, scal(&s, dt, id)));
      r = tmp(&s, mx ? tg_maximum(red, self) : tg_minimum(red, self));
      break;
    }
  }
  return tmps_end(&s, r ? tmp(&s, tg_cast(r, dt)) : NULL);
}

tg_tensor *tg_scatter(tg_tensor *x, int dim, tg_tensor *index, tg_tensor *src) {
  if (!x || !index || !src) return NULL;
  tmps s = TMPS("tg_scatter");
  tg_tensor *sv, *m;
  if (!pre_scatter(&s, x, &dim, index, src, &sv, &m)) return tmps_end(&s, NULL);
  /* a position written twice takes the last write along dim: the largest k with a hit */
  int nd = TNDIM(x), last = -1;
  int64_t k = TSHAPE(m)[nd], sh[TG_MAX_DIMS];
  for (int d = 0; d < nd; d++) sh[d] = 1;
  sh[nd] = k;
  tg_dtype pd = pos_dtype(k);
  tg_tensor *ar = tmp(&s, tg_reshape(tmp(&s, tg_arange(pd, 0, (double)k, 1)), nd + 1, sh));
  tg_tensor *at = tmp(&s, tg_max(tmp(&s, tg_where(m, ar, scal(&s, pd, -1))), 1, &last, true));
  tg_tensor *pick = tmp(&s, tg_mul(m, tmp(&s, tg_eq(ar, at))));
  tg_tensor *val = tmp(&s, tg_cast(tmp(&s, tg_sum(tmp(&s, tg_where(pick, sv, scal(&s, TDT(x), 0))), 1, &last, false)), TDT(x)));
  tg_tensor *hit = tmp(&s, tg_ge(tmp(&s, tg_squeeze(at, -1)), scal(&s, pd, 0)));
  return tmps_end(&s, tmp(&s, tg_where(hit, val, x)));
}

tg_tensor *tg_scatter_scalar(tg_tensor *x, int dim, tg_tensor *index, double value, int reduce) {
  if (!x || !index) return NULL;
  if (reduce != -1 && reduce != TG_SCATTER_SUM && reduce != TG_SCATTER_PROD) {
    tg_set_error(TG_ERR_ARG, "tg_scatter_scalar: reduce %d must be -1 (none), TG_SCATTER_SUM (add) or TG_SCATTER_PROD (multiply)", reduce);
    return NULL;
  }
  tmps s = TMPS("tg_scatter_scalar");
  tg_tensor *src = tmp(&s, tg_full(TDT(x), TNDIM(index), TSHAPE(index), value));
  if (!src) return tmps_end(&s, NULL);
  tg_tensor *r = reduce == -1 ? tg_scatter(x, dim, index, src) : tg_scatter_reduce(x, dim, index, src, (tg_scatter_reduce_op)reduce, true);
  return tmps_end(&s, tmp(&s, r));
}
