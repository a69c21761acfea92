/* shape.c — size arithmetic that cannot overflow.
 *
 * Every shape in the graph has non-negative sizes whose product, zeros left out, is at most UOP_MAX_NUMEL
 * (2^60). Then an element count, a stride (a product of some sizes), a byte count (8 bytes an element at
 * most) and the index arithmetic a kernel does over them all fit in int64, and the code that computes with
 * shapes needs no checks of its own. Sizes come from users (shapes, pads, repeats, slice bounds): they are
 * combined with these helpers, which refuse a result past the bound instead of wrapping, and
 * uop_new_shaped refuses a node whose shape breaks the rule, whoever built it.
 */
#include <stdio.h>

#include "uop/uop.h"

bool size_add(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0 || a > UOP_MAX_NUMEL || b > UOP_MAX_NUMEL - a) return false;
  *out = a + b;
  return true;
}

bool size_mul(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0 || a > UOP_MAX_NUMEL || b > UOP_MAX_NUMEL) return false;
  if (a && b > UOP_MAX_NUMEL / a) return false;
  *out = a * b;
  return true;
}

bool shape_numel(int ndim, const int64_t *shape, int64_t *numel) {
  int64_t nonzero = 1;
  bool zero = false;
  if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim && !shape)) return false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 0) zero = true;
    else if (!size_mul(nonzero, shape[i], &nonzero)) return false;  /* negative or past the bound */
  }
  if (numel) *numel = zero ? 0 : nonzero;
  return true;
}

bool shape_check(const char *op, int ndim, const int64_t *shape) {
  if (shape_numel(ndim, shape, NULL)) return true;
  char b[400];
  if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim && !shape)) {
    tg_set_error(TG_ERR_ARG, "%s: %d dimensions%s, expected 0..%d", op, ndim, ndim > 0 && !shape ? " and NULL sizes" : "",
                 TG_MAX_DIMS);
    return false;
  }
  bool neg = false;
  for (int i = 0; i < ndim; i++) neg |= shape[i] < 0;
  if (neg) tg_set_error(TG_ERR_ARG, "%s: negative size in shape %s", op, shape_str(b, sizeof b, ndim, shape));
  else
    tg_set_error(TG_ERR_ARG, "%s: shape %s has more than 2^60 elements (the largest tensor tgc can index)", op,
                 shape_str(b, sizeof b, ndim, shape));
  return false;
}
