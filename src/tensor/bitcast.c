/* bitcast.c — tg_bitcast to a dtype of another size, as tinygrad's Tensor.bitcast: the last dim holds the same
 * bytes in elements of the new size (little-endian, as every device tgc runs on), n * old == m * new. Written
 * with the public ops as tinygrad writes it: the bits as unsigned integers, wider elements built by shifting
 * each group of narrow ones into place and adding them, narrower ones cut from a wide one by shifts and a
 * truncating cast, stacked on a new last dim and flattened. */
#include "tensor/compose.h"
#include "tensor/elementwise.h"

static tg_dtype uint_of(size_t bytes) {
  return bytes == 1 ? TG_UINT8 : bytes == 2 ? TG_UINT16 : bytes == 4 ? TG_UINT32 : TG_UINT64;
}

tg_tensor *bitcast_resize(tg_tensor *t, tg_dtype dt) {
  size_t os = tg_dtype_size(TDT(t)), ns = tg_dtype_size(dt);
  int nd = TNDIM(t);
  int64_t last = nd ? TSHAPE(t)[nd - 1] : 0;
  if (dt == TG_BOOL || TDT(t) == TG_BOOL) {  /* bytes other than 0 and 1 are no bool values (UB in C) */
    tg_set_error(TG_ERR_ARG, "tg_bitcast: %s to %s changes the element size, which bool's one-bit values cannot",
                 tg_dtype_name(TDT(t)), tg_dtype_name(dt));
    return NULL;
  }
  if (!nd || (last * (int64_t)os) % (int64_t)ns) {
    tg_set_error(TG_ERR_ARG, "tg_bitcast: %s to %s changes the element size: the last dim (%lld of %zu bytes) must hold a whole number of %zu-byte elements%s",
                 tg_dtype_name(TDT(t)), tg_dtype_name(dt), (long long)last, os, ns, nd ? "" : " (a 0-dim tensor has none)");
    return NULL;
  }
  int64_t shape[TG_MAX_DIMS + 1];
  for (int d = 0; d < nd; d++) shape[d] = TSHAPE(t)[d];
  tmps s = TMPS("tg_bitcast");
  tg_tensor *bits = tmp(&s, tg_bitcast(t, uint_of(os))), *r = NULL;
  if (ns > os) {  /* k narrow elements into one wide: element i of each group shifted by 8 i os bytes */
    int64_t k = (int64_t)(ns / os);
    shape[nd - 1] = last / k;
    shape[nd] = k;
    tg_tensor *groups = tmp(&s, tg_reshape(bits, nd + 1, shape));
    int64_t bounds[2 * (TG_MAX_DIMS + 1)];
    for (int d = 0; d < nd; d++) bounds[2 * d] = 0, bounds[2 * d + 1] = shape[d];
    for (int64_t i = 0; i < k && groups; i++) {
      bounds[2 * nd] = i, bounds[2 * nd + 1] = i + 1;
      tg_tensor *part = tmp(&s, tg_reshape(tmp(&s, tg_shrink(groups, nd + 1, bounds)), nd, shape));
      part = tmp(&s, tg_cast(part, uint_of(ns)));
      if (i) part = tmp(&s, tg_lshift_scalar(part, (int)(8 * os * (size_t)i)));
      r = r ? tmp(&s, tg_bitwise_or(r, part)) : part;
    }
  } else {  /* one wide element into k narrow: byte group i is the value shifted right by 8 i ns */
    int64_t k = (int64_t)(os / ns);
    tg_tensor *parts[8];
    for (int64_t i = 0; i < k; i++)
      parts[i] = tmp(&s, tg_cast(i ? tmp(&s, tg_rshift_scalar(bits, (int)(8 * ns * (size_t)i))) : bits, uint_of(ns)));
    bool ok = true;
    for (int64_t i = 0; i < k; i++) ok &= parts[i] != NULL;
    shape[nd - 1] = last * k;
    r = ok ? tmp(&s, tg_reshape(tmp(&s, tg_stack((int)k, parts, nd)), nd, shape)) : NULL;
  }
  return tmps_end(&s, r ? tmp(&s, tg_bitcast(r, dt)) : NULL);
}
