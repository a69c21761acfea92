/* attention.c — scaled dot product attention as tinygrad composes it: softmax(q k^T / sqrt(E) + mask) v,
 * two matmuls around a softmax, each a broadcasted multiply and a reduce. A bool mask is where(mask, ., -inf),
 * as torch has it, applied in every reduce over keys, so codegen ends those loops at the last key kept. */
#include <math.h>
#include <stdio.h>

#include "tensor/compose.h"

#define SB 256

/* each of t's heads (axis -3) repeated r times in a row: (..., H, S, E) -> (..., H*r, S, E) */
static tg_tensor *repeat_heads(tmps *s, tg_tensor *t, int64_t r) {
  if (r == 1) return t;
  int n = TNDIM(t);
  int64_t sh[TG_MAX_DIMS + 1];
  for (int i = 0; i < n - 2; i++) sh[i] = TSHAPE(t)[i];
  sh[n - 2] = 1;
  sh[n - 1] = TSHAPE(t)[n - 2];
  sh[n] = TSHAPE(t)[n - 1];
  t = tmp(s, tg_reshape(t, n + 1, sh));
  sh[n - 2] = r;
  t = tmp(s, tg_expand(t, n + 1, sh));
  sh[n - 3] *= r;
  sh[n - 2] = sh[n - 1];
  sh[n - 1] = sh[n];
  return tmp(s, tg_reshape(t, n, sh));
}

/* softmax over the last axis of x where the bool mask holds, 0 elsewhere, with tg_softmax's arithmetic (exp2 of the
 * shifted value times log2(e), times the reciprocal of the sum). The masked scores and the result are stored
 * (contiguous: they are anyway, being read by loops of another shape) and the mask is applied again inside each
 * reduce that reads them: where(mask, x, -inf) in the max, where(mask, e, 0) in the sum, and where(mask, p, 0) in
 * the matmul with v (the caller), which lets codegen end those loops at the last kept key (codegen/trim.c); left
 * unstored, where(mask, where(mask, x, ..), ..) would fold to one where and the kernel reading the stored value
 * would not see the mask. A row with every key masked gives 0 (tg_softmax: NaN). */
static tg_tensor *masked_softmax(tmps *s, tg_tensor *x, tg_tensor *mask) {
  int last = -1;
  x = tmp(s, tg_contiguous(tmp(s, tg_where_scalar(mask, x, -INFINITY))));
  tg_tensor *m = tmp(s, tg_max(tmp(s, tg_where_scalar(mask, x, -INFINITY)), 1, &last, true));
  tg_tensor *e = tmp(s, tg_exp2(tmp(s, tg_mul_scalar(tmp(s, tg_sub(x, m)), 1.44269504088896340736))));
  e = tmp(s, tg_where_scalar(mask, e, 0));
  return tmp(s, tg_contiguous(tmp(s, tg_mul(e, tmp(s, tg_reciprocal(tmp(s, tg_sum(e, 1, &last, true))))))));
}

/* q (..., L, E), k (..., S, E), v (..., S, Ev); mask broadcastable to (..., L, S): bool (true keeps) or
 * float (added); is_causal keeps key j <= query i */
tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *mask, double dropout_p,
                                           bool is_causal, bool enable_gqa) {
  const char *op = "tg_scaled_dot_product_attention";
  if (!q || !k || !v) return NULL;
  char a[SB], b[SB], c[SB];
  if (TNDIM(q) < 2 || TNDIM(k) < 2 || TNDIM(v) < 2 || TSHAPE(q)[TNDIM(q) - 1] != TSHAPE(k)[TNDIM(k) - 1] ||
      TSHAPE(k)[TNDIM(k) - 2] != TSHAPE(v)[TNDIM(v) - 2]) {
    tg_set_error(TG_ERR_ARG, "%s: q %s, k %s, v %s: expected (..., L, E), (..., S, E), (..., S, Ev)", op,
                 shape_str(a, sizeof a, TNDIM(q), TSHAPE(q)), shape_str(b, sizeof b, TNDIM(k), TSHAPE(k)),
                 shape_str(c, sizeof c, TNDIM(v), TSHAPE(v)));
    return NULL;
  }
  if (is_causal && mask) {
    tg_set_error(TG_ERR_ARG, "%s: give a mask or is_causal, not both", op);
    return NULL;
  }
  if (!(dropout_p >= 0 && dropout_p <= 1)) {
    tg_set_error(TG_ERR_ARG, "%s: dropout_p %g is not in [0, 1]", op, dropout_p);
    return NULL;
  }
  tmps s = TMPS(op);
  if (enable_gqa) {
    int nq = TNDIM(q), nk = TNDIM(k), nv = TNDIM(v);
    if (nq < 3 || nk < 3 || nv < 3 || TSHAPE(k)[nk - 3] != TSHAPE(v)[nv - 3] || TSHAPE(k)[nk - 3] == 0 ||
        TSHAPE(q)[nq - 3] % TSHAPE(k)[nk - 3] != 0) {
      tg_set_error(TG_ERR_ARG, "%s: enable_gqa: q %s, k %s, v %s: need (..., H, L, E), (..., Hk, S, E), (..., Hk, S, Ev) "
                   "with Hk dividing H", op, shape_str(a, sizeof a, TNDIM(q), TSHAPE(q)), shape_str(b, sizeof b, TNDIM(k), TSHAPE(k)),
                   shape_str(c, sizeof c, TNDIM(v), TSHAPE(v)));
      return tmps_end(&s, NULL);
    }
    int64_t r = TSHAPE(q)[nq - 3] / TSHAPE(k)[nk - 3];
    k = repeat_heads(&s, k, r);
    v = repeat_heads(&s, v, r);
  }
  int64_t e = TSHAPE(q)[TNDIM(q) - 1], l = TSHAPE(q)[TNDIM(q) - 2], sk = TSHAPE(k)[TNDIM(k) - 2];
  tg_dtype dt = dtype_promote(dtype_promote(TDT(q), TDT(k)), TG_FLOAT32);
  tg_tensor *qk = tmp(&s, tg_matmul(tmp(&s, tg_cast(q, dt)), tmp(&s, tg_transpose(tmp(&s, tg_cast(k, dt)), -1, -2))));
  qk = tmp(&s, tg_div_scalar(qk, sqrt((double)e)));
  if (is_causal) mask = tmp(&s, tg_tril(tmp(&s, tg_ones(TG_BOOL, 2, (int64_t[]){l, sk})), 0));
  if (mask && TDT(mask) == TG_BOOL) {
    tg_tensor *p = tmp(&s, tg_dropout(masked_softmax(&s, tmp(&s, tg_cast(qk, TDT(q))), mask), dropout_p));
    return tmps_end(&s, tmp(&s, tg_matmul(tmp(&s, tg_where_scalar(mask, p, 0)), v)));
  }
  if (mask) qk = tmp(&s, tg_add(qk, mask));
  tg_tensor *p = tmp(&s, tg_dropout(tmp(&s, tg_softmax(tmp(&s, tg_cast(qk, TDT(q))), -1)), dropout_p));
  return tmps_end(&s, tmp(&s, tg_matmul(p, v)));
}
