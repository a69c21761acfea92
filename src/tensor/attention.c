/* attention.c — scaled dot product attention as tinygrad composes it: softmax(q k^T / sqrt(E) + mask) v,
 * two matmuls around a softmax, each a broadcasted multiply and a reduce. */
#include <math.h>
#include <stdio.h>

#include "tensor/compose.h"

#define SB 256

/* q (..., L, E), k (..., S, E), v (..., S, Ev); mask broadcastable to (..., L, S): bool (true keeps) or
 * float (added); is_causal keeps key j <= query i */
tg_tensor *tg_scaled_dot_product_attention(tg_tensor *q, tg_tensor *k, tg_tensor *v, tg_tensor *mask, bool is_causal) {
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
  tmps s = TMPS(op);
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
  tg_tensor *p = tmp(&s, tg_softmax(tmp(&s, tg_cast(qk, TDT(q))), -1));
  return tmps_end(&s, tmp(&s, tg_matmul(p, v)));
}
