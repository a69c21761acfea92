/* elementwise.h — what elementwise.c shares with the files that add more elementwise ops
 * (elementwise_math.c, elementwise_int.c, bitcast.c). */
#ifndef TG_ELEMENTWISE_H
#define TG_ELEMENTWISE_H

#include "tensor/tensor.h"

/* the dtype a weak python scalar v takes next to a tensor of dtype dt, as tinygrad's: a float tensor keeps
 * its dtype, an integral v keeps an integer tensor's (bool: int32), a fractional v makes it float32 */
tg_dtype scalar_dtype(tg_dtype dt, double v);

/* tg_bitcast to a dtype of another element size (bitcast.c) */
tg_tensor *bitcast_resize(tg_tensor *t, tg_dtype dt);

#endif
