/* dropout.c — training mode and dropout. In its own file because dropout needs the random numbers of
 * random.c: a program that never calls it does not link them in. */
#include <stdatomic.h>
#include <stdio.h>

#include "tensor/compose.h"

static atomic_bool training;  /* the process's, as tinygrad's Tensor.training */

void tg_set_training(bool on) { atomic_store(&training, on); }
bool tg_training(void) { return atomic_load(&training); }

/* tinygrad's: where(rand >= p, x, 0) / (1 - p) when training, x itself otherwise. The mask is not made
 * contiguous as tinygrad does: the generator is counter-based, so a gradient that recomputes it gets the
 * same numbers, and the forward stays one kernel. */
tg_tensor *tg_dropout(tg_tensor *x, double p) {
  if (!x) return NULL;
  if (!(p >= 0 && p <= 1)) {
    tg_set_error(TG_ERR_ARG, "tg_dropout: p = %g is out of range [0, 1]", p);
    return NULL;
  }
  if (!tg_training() || p == 0) return tensor_new(x->u);
  if (p == 1) return tg_zeros_like(x);
  tmps s = TMPS("tg_dropout");
  tg_tensor *r = tmp(&s, tg_rand(TG_FLOAT32, TNDIM(x), TSHAPE(x)));
  tg_tensor *keep = tmp(&s, tg_ge(r, tmp(&s, tg_scalar(TG_FLOAT32, p))));
  tg_tensor *y = tmp(&s, tg_where(keep, x, tmp(&s, tg_zeros_like(x))));
  return tmps_end(&s, tmp(&s, tg_div_scalar(y, 1.0 - p)));
}
