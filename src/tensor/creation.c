/* creation.c — tensors from nothing (constants, arange, eye) and from host memory (copy or wrap). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "engine/engine.h"
#include "engine/place.h"
#include "tensor/tensor.h"

static bool check_new(const char *op, tg_dtype dt, int ndim, const int64_t *shape) {
  if ((unsigned)dt >= TG_DTYPE_COUNT) {
    tg_set_error(TG_ERR_ARG, "%s: bad dtype %d", op, (int)dt);
    return false;
  }
  return shape_check(op, ndim, shape);
}

/* the element count of a shape check_new accepted */
static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 0;
  shape_numel(ndim, shape, &n);
  return n;
}

static tg_tensor *full(const char *op, tg_dtype dt, int ndim, const int64_t *shape, double value) {
  if (!check_new(op, dt, ndim, shape)) return NULL;
  return tensor_new(mk_const(dt, value, ndim, shape));
}

tg_tensor *tg_full(tg_dtype dt, int ndim, const int64_t *shape, double v) { return full("tg_full", dt, ndim, shape, v); }
tg_tensor *tg_zeros(tg_dtype dt, int ndim, const int64_t *shape) { return full("tg_zeros", dt, ndim, shape, 0); }
tg_tensor *tg_ones(tg_dtype dt, int ndim, const int64_t *shape) { return full("tg_ones", dt, ndim, shape, 1); }
tg_tensor *tg_scalar(tg_dtype dt, double value) { return full("tg_scalar", dt, 0, NULL, value); }

tg_tensor *tg_full_like(const tg_tensor *t, double value) {
  if (t && t->u->op == OP_MULTI) {  /* sharded as t is (optimizer state of a sharded parameter) */
    uop *m = t->u, *parts[PLACE_MAX_DEVS];
    const device *devs[PLACE_MAX_DEVS];
    int axis = (int)m->arg.i;
    int64_t local[TG_MAX_DIMS];
    memcpy(local, m->shape, (size_t)m->ndim * sizeof *local);
    if (axis >= 0) local[axis] /= m->nsrc;
    for (int j = 0; j < m->nsrc; j++) {
      parts[j] = mk_const(TDT(t), value, m->ndim, local);
      devs[j] = (const device *)(intptr_t)m->aux[j];
    }
    return tensor_new(mk_multi_node(TDT(t), m->nsrc, parts, devs, axis, m->ndim, m->shape));
  }
  return t ? tg_full(TDT(t), TNDIM(t), TSHAPE(t), value) : NULL;
}
tg_tensor *tg_zeros_like(const tg_tensor *t) { return tg_full_like(t, 0); }
tg_tensor *tg_ones_like(const tg_tensor *t) { return tg_full_like(t, 1); }

/* a BUFFER node on storage b (a reference is taken over) reshaped to shape */
static tg_tensor *from_buffer(tg_dtype dt, int ndim, const int64_t *shape, tg_buffer *b) {
  uop *buf = mk_buffer(dt, numel_of(ndim, shape), b);
  if (!buf) {
    buffer_release(b);
    return NULL;
  }
  return tensor_new(mk_reshape(buf, ndim, shape));
}

tg_tensor *tg_empty(tg_dtype dt, int ndim, const int64_t *shape) {
  if (!check_new("tg_empty", dt, ndim, shape)) return NULL;
  uop *buf = mk_buffer(dt, numel_of(ndim, shape), NULL);  /* storage comes when the engine needs it */
  return tensor_new(mk_reshape(buf, ndim, shape));
}

static bool check_bytes(const char *op, tg_dtype dt, int ndim, const int64_t *shape, const void *data, size_t nbytes) {
  if (!check_new(op, dt, ndim, shape)) return false;
  size_t want = (size_t)numel_of(ndim, shape) * tg_dtype_size(dt);
  if (nbytes != want || (want && !data)) {
    char b[256];
    tg_set_error(TG_ERR_ARG, "%s: %s of shape %s needs %zu bytes, got %zu%s", op, tg_dtype_name(dt),
                 shape_str(b, sizeof b, ndim, shape), want, nbytes, want && !data ? " and a NULL pointer" : "");
    return false;
  }
  return true;
}

tg_tensor *tg_from_data(tg_dtype dt, int ndim, const int64_t *shape, const void *data, size_t nbytes) {
  if (!check_bytes("tg_from_data", dt, ndim, shape, data, nbytes)) return NULL;
  const device *dev = device_default();
  if (!dev) return NULL;
  tg_buffer *b = buffer_new(dev, nbytes);
  if (!b) return NULL;
  uop_gc_note_bytes(nbytes);
  if (nbytes && dev->copyin(b, data, nbytes) != TG_OK) {
    buffer_release(b);
    return NULL;
  }
  return from_buffer(dt, ndim, shape, b);
}

/* a buffer of dev over the caller's memory: the memory itself on the CPU, a copy of it on a GPU (whose kernels
 * cannot read host memory; the copy is made now) */
static tg_buffer *wrap_or_copy(const device *dev, void *data, size_t nbytes) {
  if (!device_is_gpu(dev)) return buffer_wrap(dev, data, nbytes);
  tg_buffer *b = buffer_new(dev, nbytes ? nbytes : 1);
  if (b && nbytes && dev->copyin(b, data, nbytes) != TG_OK) {
    buffer_release(b);
    return NULL;
  }
  if (b) uop_gc_note_bytes(nbytes);
  return b;
}

tg_tensor *tg_from_blob(tg_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes) {
  if (!check_bytes("tg_from_blob", dt, ndim, shape, data, nbytes)) return NULL;
  const device *dev = device_default();
  if (!dev) return NULL;
  tg_buffer *b = wrap_or_copy(dev, data, nbytes);
  if (!b) return NULL;
  return from_buffer(dt, ndim, shape, b);
}

tg_tensor *tensor_wrap_memory(tg_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes,
                              void (*on_free)(void *ctx), void *ctx) {
  const device *dev = NULL;
  tg_buffer *b = NULL;
  if (check_bytes("tensor_wrap_memory", dt, ndim, shape, data, nbytes) && (dev = device_default()))
    b = wrap_or_copy(dev, data, nbytes);
  if (b && device_is_gpu(dev) && on_free) {  /* copied: the memory is not needed any more */
    on_free(ctx);
    on_free = NULL;
  }
  if (!b) {
    if (on_free) on_free(ctx);
    return NULL;
  }
  b->on_free = on_free;
  b->ctx = ctx;
  uop *buf = mk_buffer(dt, numel_of(ndim, shape), b);
  if (!buf) {
    buffer_release(b);
    return NULL;
  }
  return tensor_new_unscoped(mk_reshape(buf, ndim, shape));
}



/* start + i*step, computed in the kernel that uses it (nothing is stored) */
tg_tensor *tg_arange(tg_dtype dt, double start, double stop, double step) {
  if ((unsigned)dt >= TG_DTYPE_COUNT || step == 0 || isnan(start) || isnan(stop) || isnan(step)) {
    tg_set_error(TG_ERR_ARG, "tg_arange: bad arguments (start %g, stop %g, step %g, dtype %d)", start, stop, step, (int)dt);
    return NULL;
  }
  double cnt = ceil((stop - start) / step);
  if (cnt < 0) cnt = 0;
  if (cnt > 1e15) {
    tg_set_error(TG_ERR_ARG, "tg_arange: %g elements is too many", cnt);
    return NULL;
  }
  int64_t n = (int64_t)cnt;
  tg_dtype it = n > INT32_MAX ? TG_INT64 : TG_INT32;
  uop *i = mk_iota(dtype_is_float(dt) || dt == TG_BOOL ? it : dt, n);
  if (dt == TG_BOOL) return tensor_new(mk_cast(mk_alu(OP_ADD, it, 2, (uop *[]){i, mk_const(it, start, 1, &n)}), dt));
  if (dtype_is_float(dt)) i = mk_cast(i, dt);
  uop *v = i;
  if (step != 1) v = mk_alu(OP_MUL, dt, 2, (uop *[]){v, mk_const(dt, step, 1, &n)});
  if (start != 0) v = mk_alu(OP_ADD, dt, 2, (uop *[]){v, mk_const(dt, start, 1, &n)});
  return tensor_new(v);
}

/* eye from movement ops alone: ones (k, 1) padded to (k, k+1), flattened and cut to (k, k) puts the ones
 * on the diagonal; no buffer is read */
tg_tensor *tg_eye(tg_dtype dt, int64_t n, int64_t m) {
  if ((unsigned)dt >= TG_DTYPE_COUNT || n < 0 || m < 0) {
    tg_set_error(TG_ERR_ARG, "tg_eye: bad arguments (%lld, %lld)", (long long)n, (long long)m);
    return NULL;
  }
  if (n == 0 || m == 0) return tg_zeros(dt, 2, (int64_t[]){n, m});
  int64_t k = n > m ? n : m, kk;  /* square first: a wide or tall cut of it stays correct */
  if (!size_mul(k, k + 1, &kk)) {
    tg_set_error(TG_ERR_ARG, "tg_eye: %lld x %lld is too large (it is cut from a %lld x %lld view of at most 2^60 "
                 "elements)", (long long)n, (long long)m, (long long)k, (long long)(k + 1));
    return NULL;
  }
  uop *x = mk_const(dt, 1, 2, (int64_t[]){k, 1});
  x = mk_pad(x, (int64_t[]){0, 0, 0, k});
  x = mk_reshape(x, 1, &kk);
  x = mk_shrink(x, (int64_t[]){0, k * k});
  x = mk_reshape(x, 2, (int64_t[]){k, k});
  x = mk_shrink(x, (int64_t[]){0, n, 0, m});
  return tensor_new(x);
}

/* ---- devices ------------------------------------------------------------------------------------------------ */

/* tg_device, tg_to and tg_shard: engine/place.c */
