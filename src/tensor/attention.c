/* attention.c — scaled dot product attention as tinygrad composes it: softmax(q k^T / sqrt(E) + mask) v,
 * two matmuls around a softmax, each a broadcasted multiply and a reduce. */
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
  if (mask) {
    if (TDT(mask) == TG_BOOL)
      mask = tmp(&s, tg_where(mask, tmp(&s, tg_scalar(dt, 0)), tmp(&s, tg_scalar(dt, -INFINITY))));
    qk = tmp(&s, tg_add(qk, mask));
  }
  tg_tensor *p = tmp(&s, tg_dropout(tmp(&s, tg_softmax(tmp(&s, tg_cast(qk, TDT(q))), -1)), dropout_p));
  return tmps_end(&s, tmp(&s, tg_matmul(p, v)));
}
