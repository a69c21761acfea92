/* creation.c — tensors from nothing (constants, arange, eye) and from host memory (copy or wrap). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "tensor/tensor.h"

static bool check_new(const char *op, tg_dtype dt, int ndim, const int64_t *shape) {
  if ((unsigned)dt >= TG_DTYPE_COUNT) {
    tg_set_error(TG_ERR_ARG, "%s: bad dtype %d", op, (int)dt);
    return false;
  }
  if (ndim < 0 || ndim > TG_MAX_DIMS || (ndim && !shape)) {
    tg_set_error(TG_ERR_ARG, "%s: bad shape (%d dimensions%s)", op, ndim, ndim && !shape ? ", NULL sizes" : "");
    return false;
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) {
      char b[256];
      tg_set_error(TG_ERR_ARG, "%s: negative size in shape %s", op, shape_str(b, sizeof b, ndim, shape));
      return false;
    }
  return true;
}

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
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
  const tg_device *dev = device_default();
  if (!dev) return NULL;
  tg_buffer *b = buffer_new(dev, nbytes);
  if (!b) return NULL;
  if (nbytes && dev->copyin(b, data, nbytes) != TG_OK) {
    buffer_release(b);
    return NULL;
  }
  return from_buffer(dt, ndim, shape, b);
}

tg_tensor *tg_from_blob(tg_dtype dt, int ndim, const int64_t *shape, void *data, size_t nbytes) {
  if (!check_bytes("tg_from_blob", dt, ndim, shape, data, nbytes)) return NULL;
  const tg_device *dev = device_default();
  if (!dev) return NULL;
  tg_buffer *b = buffer_wrap(dev, data, nbytes);
  if (!b) return NULL;
  return from_buffer(dt, ndim, shape, b);
}

/* arange is filled on the host: a creation op, like from_data (tinygrad builds it with a cumsum kernel) */
tg_tensor *tg_arange(tg_dtype dt, double start, double stop, double step) {
  if ((unsigned)dt >= TG_DTYPE_COUNT || step == 0 || isnan(start) || isnan(stop) || isnan(step)) {
    tg_set_error(TG_ERR_ARG, "tg_arange: bad arguments (start %g, stop %g, step %g, dtype %d)", start, stop, step, (int)dt);
    return NULL;
  }
  double cnt = ceil((stop - start) / step);
  if (cnt < 0) cnt = 0;
  if (cnt > 1e12) {
    tg_set_error(TG_ERR_ARG, "tg_arange: %g elements is too many", cnt);
    return NULL;
  }
  int64_t n = (int64_t)cnt;
  size_t esz = tg_dtype_size(dt);
  unsigned char *host = malloc(n ? (size_t)n * esz : 1);
  if (!host) {
    tg_set_error(TG_ERR_NOMEM, "tg_arange: out of memory for %lld elements", (long long)n);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = dtype_cast_value(dt, start + (double)i * step);
    unsigned char *p = host + (size_t)i * esz;
    switch (dt) {
      case TG_BOOL: *(bool *)p = v != 0; break;
      case TG_INT8: *(int8_t *)p = (int8_t)v; break;
      case TG_INT16: *(int16_t *)p = (int16_t)v; break;
      case TG_INT32: *(int32_t *)p = (int32_t)v; break;
      case TG_INT64: *(int64_t *)p = (int64_t)v; break;
      case TG_UINT8: *(uint8_t *)p = (uint8_t)v; break;
      case TG_UINT16: *(uint16_t *)p = (uint16_t)v; break;
      case TG_UINT32: *(uint32_t *)p = (uint32_t)v; break;
      case TG_UINT64: *(uint64_t *)p = (uint64_t)v; break;
      case TG_FLOAT32: *(float *)p = (float)v; break;
      case TG_FLOAT64: *(double *)p = v; break;
      case TG_FLOAT16: { uint16_t h = float_to_half((float)v); memcpy(p, &h, 2); break; }
      case TG_BFLOAT16: {
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        uint16_t h = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
        memcpy(p, &h, 2);
        break;
      }
      default: break;
    }
  }
  tg_tensor *t = tg_from_data(dt, 1, &n, host, (size_t)n * esz);
  free(host);
  return t;
}

/* eye from movement ops alone: ones (k, 1) padded to (k, k+1), flattened and cut to (k, k) puts the ones
 * on the diagonal; no buffer is read */
tg_tensor *tg_eye(tg_dtype dt, int64_t n, int64_t m) {
  if ((unsigned)dt >= TG_DTYPE_COUNT || n < 0 || m < 0) {
    tg_set_error(TG_ERR_ARG, "tg_eye: bad arguments (%lld, %lld)", (long long)n, (long long)m);
    return NULL;
  }
  if (n == 0 || m == 0) return tg_zeros(dt, 2, (int64_t[]){n, m});
  int64_t k = n > m ? n : m;  /* square first: a wide or tall cut of it stays correct */
  uop *x = mk_const(dt, 1, 2, (int64_t[]){k, 1});
  x = mk_pad(x, (int64_t[]){0, 0, 0, k});
  x = mk_reshape(x, 1, (int64_t[]){k * (k + 1)});
  x = mk_shrink(x, (int64_t[]){0, k * k});
  x = mk_reshape(x, 2, (int64_t[]){k, k});
  x = mk_shrink(x, (int64_t[]){0, n, 0, m});
  return tensor_new(x);
}
