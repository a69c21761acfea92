/* compose.h — what the composite ops (conv.c, norm.c, loss.c, index.c, attention.c) share.
 *
 * A composite op is written with the public tensor ops, as tinygrad writes its nn ops with Tensor methods,
 * so it inherits their shape checks, broadcasting and dtype promotion and fuses like any other graph.
 * Every intermediate handle goes into a tmps list (tmp()) and tmps_end() frees all of them but the result,
 * so a composite op leaves exactly one new tensor behind, owned as tg.h says. A failure inside (which the
 * entry checks should make impossible) returns NULL with the inner message prefixed by the op's name.
 */
#ifndef TG_COMPOSE_H
#define TG_COMPOSE_H

#include "tensor/tensor.h"

typedef struct tmps { const char *op; tg_tensor **v; int n, cap; } tmps;

#define TMPS(name) {name, NULL, 0, 0}

/* records t for tmps_end (NULL passes through); on allocation failure frees t and returns NULL */
tg_tensor *tmp(tmps *s, tg_tensor *t);
/* frees every recorded tensor except r and returns r; a NULL r gets the op's name on its error */
tg_tensor *tmps_end(tmps *s, tg_tensor *r);

/* one value per spatial dim (nd of them) from an option: not given -> def, one value -> every dim, nd values
 * -> one each; false with an error naming op and what when the count is wrong or a value is below min */
bool ints_dims(const char *op, const char *what, tg_ints v, int nd, int64_t def, int64_t min, int64_t *out);
/* pads[2*j], pads[2*j+1] before and after spatial dim j from a padding option: not given -> 0, one value,
 * one per dim (symmetric), or 2 * nd per side in tinygrad's flat order (last dim first); a negative value crops */
bool ints_pads(const char *op, tg_ints v, int nd, int64_t *pads);

/* constant padding with pads[2*i], pads[2*i+1] before/after axis i; negative pads shrink */
tg_tensor *pad_const(tmps *s, tg_tensor *x, const int64_t *pads, double value);
/* tinygrad's _pool: windows of the last nk axes, (..., *i) -> (..., *o, *k) with o = ceil((i - d*(k-1)) / s) */
tg_tensor *pool_windows(tmps *s, tg_tensor *x, int nk, const int64_t *k, const int64_t *stride, const int64_t *dil);
/* a 0..n-1 int32 tensor of shape (n, 1 x trailing) */
tg_tensor *arange_col(tmps *s, int64_t n, int trailing);
/* (index[..., None] == arange(n)): bool (..., n) */
tg_tensor *one_hot_mask(tmps *s, tg_tensor *index, int64_t n);

/* python's a // b and -(-a // b) for b > 0 */
static inline int64_t floordiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static inline int64_t ceildiv(int64_t a, int64_t b) { return -floordiv(-a, b); }

#endif
