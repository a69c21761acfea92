/* ref.c — the plain C reference of every forward op (see ref.h). Nothing here uses the library except the
 * bridging functions at the end (tg_from_data, tg_to_host, tg_shape, tg_dtype_of), which move values in and
 * out so a test can compare. Every op materializes a contiguous double array and rounds to its dtype. */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static void ref_die(const char *what) {
  fprintf(stderr, "ref: invalid use: %s\n", what);
  abort();
}

/* ---- generator ------------------------------------------------------------------------------------- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

void ref_seed(uint64_t seed) { rng_state = seed ? seed * 0x9E3779B97F4A7C15ull + 1 : 0x9E3779B97F4A7C15ull; }

uint64_t ref_next(void) {
  uint64_t x = rng_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

double ref_uniform(double lo, double hi) { return lo + (hi - lo) * ((double)(ref_next() >> 11) / 9007199254740992.0); }

int64_t ref_randint(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  return lo + (int64_t)(ref_next() % (uint64_t)(hi - lo + 1));
}

/* ---- dtypes ---------------------------------------------------------------------------------------- */
bool ref_is_float(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64; }
bool ref_is_unsigned(tg_dtype dt) { return dt == TG_UINT8 || dt == TG_UINT16 || dt == TG_UINT32 || dt == TG_UINT64; }
bool ref_is_int(tg_dtype dt) { return dt != TG_BOOL && !ref_is_float(dt) && dt < TG_DTYPE_COUNT; }

size_t ref_dtype_size(tg_dtype dt) {
  static const size_t sz[TG_DTYPE_COUNT] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  return (unsigned)dt < TG_DTYPE_COUNT ? sz[dt] : 0;
}

const char *ref_dtype_name(tg_dtype dt) {
  static const char *nm[TG_DTYPE_COUNT] = {"bool",   "int8",   "int16",   "int32",    "int64",   "uint8",  "uint16",
                                           "uint32", "uint64", "float16", "bfloat16", "float32", "float64"};
  return (unsigned)dt < TG_DTYPE_COUNT ? nm[dt] : "?";
}

/* tinygrad's promotion lattice: each dtype's direct parents; the result of promoting a and b is the
 * lowest-priority dtype that both can reach */
static uint32_t lattice_parents(tg_dtype dt) {
#define B(d) (1u << (d))
  switch (dt) {
  case TG_BOOL: return B(TG_INT8) | B(TG_UINT8);
  case TG_INT8: return B(TG_INT16);
  case TG_INT16: return B(TG_INT32);
  case TG_INT32: return B(TG_INT64);
  case TG_INT64: return B(TG_FLOAT16) | B(TG_BFLOAT16);
  case TG_UINT8: return B(TG_INT16) | B(TG_UINT16);
  case TG_UINT16: return B(TG_INT32) | B(TG_UINT32);
  case TG_UINT32: return B(TG_INT64) | B(TG_UINT64);
  case TG_UINT64: return B(TG_FLOAT16) | B(TG_BFLOAT16);
  case TG_FLOAT16: return B(TG_FLOAT32);
  case TG_BFLOAT16: return B(TG_FLOAT32);
  case TG_FLOAT32: return B(TG_FLOAT64);
  default: return 0;
  }
#undef B
}

static uint32_t lattice_ancestors(tg_dtype dt) {
  uint32_t set = 1u << dt, prev = 0;
  while (set != prev) {
    prev = set;
    for (int d = 0; d < TG_DTYPE_COUNT; d++)
      if (set & (1u << d)) set |= lattice_parents((tg_dtype)d);
  }
  return set;
}

tg_dtype ref_promote(tg_dtype a, tg_dtype b) {
  /* tinygrad's priorities: bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, f16, bf16, f32, f64 */
  static const tg_dtype order[] = {TG_BOOL,   TG_INT8,   TG_UINT8,    TG_INT16,   TG_UINT16, TG_INT32, TG_UINT32,
                                   TG_INT64,  TG_UINT64, TG_FLOAT16, TG_BFLOAT16, TG_FLOAT32, TG_FLOAT64};
  uint32_t both = lattice_ancestors(a) & lattice_ancestors(b);
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    if (both & (1u << order[i])) return order[i];
  return TG_FLOAT64;
}

tg_dtype ref_sum_dtype(tg_dtype dt) {
  if (ref_is_unsigned(dt)) return ref_promote(dt, TG_UINT32);
  if (ref_is_int(dt) || dt == TG_BOOL) return ref_promote(dt, TG_INT32);
  return dt;  /* float16/bfloat16 accumulate in float32 and cast back */
}

static tg_dtype float_of(tg_dtype dt) { return ref_is_float(dt) ? dt : TG_FLOAT32; }

uint16_t ref_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float ref_f16_to_f32(uint16_t h) {
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float f;
  if (e == 0) f = ldexpf((float)m, -24);
  else if (e == 31) f = m ? NAN : INFINITY;
  else f = ldexpf((float)(m | 0x400u), (int)e - 25);
  return (h & 0x8000u) ? -f : f;
}

uint16_t ref_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if (isnan(f)) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float ref_bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* an integer stored in dt with C's modular conversion */
static int64_t wrap_int(tg_dtype dt, int64_t v) {
  switch (dt) {
  case TG_BOOL: return v != 0;
  case TG_INT8: return (int8_t)(uint8_t)v;
  case TG_INT16: return (int16_t)(uint16_t)v;
  case TG_INT32: return (int32_t)(uint32_t)v;
  case TG_UINT8: return (uint8_t)v;
  case TG_UINT16: return (uint16_t)v;
  case TG_UINT32: return (uint32_t)v;
  default: return v;
  }
}

/* float -> int: truncation toward zero, then C's modular conversion to the width */
static int64_t to_i64(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

double ref_round(tg_dtype dt, double v) {
  switch (dt) {
  case TG_BOOL: return v != 0;
  case TG_FLOAT16: return ref_f16_to_f32(ref_f32_to_f16((float)v));
  case TG_BFLOAT16: return ref_bf16_to_f32(ref_f32_to_bf16((float)v));
  case TG_FLOAT32: return (float)v;
  case TG_FLOAT64: return v;
  case TG_UINT64: return v >= 9223372036854775808.0 ? (double)(uint64_t)v : (double)(uint64_t)to_i64(v);
  default: return (double)wrap_int(dt, to_i64(v));
  }
}

/* ---- pool ------------------------------------------------------------------------------------------ */
static ref_arr **pool;
static size_t pool_n, pool_cap;

static int64_t prod_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

ref_arr *ref_new(tg_dtype dt, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > TG_MAX_DIMS) ref_die("ndim");
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) ref_die("negative size");
  ref_arr *a = calloc(1, sizeof *a);
  if (!a) ref_die("out of memory");
  a->dtype = dt;
  a->ndim = ndim;
  for (int i = 0; i < ndim; i++) a->shape[i] = shape[i];
  a->numel = prod_of(ndim, shape);
  a->data = calloc((size_t)(a->numel ? a->numel : 1), sizeof(double));
  if (!a->data) ref_die("out of memory");
  if (pool_n == pool_cap) {
    pool_cap = pool_cap ? pool_cap * 2 : 64;
    pool = realloc(pool, pool_cap * sizeof *pool);
    if (!pool) ref_die("out of memory");
  }
  pool[pool_n++] = a;
  return a;
}

void ref_free_all(void) {
  for (size_t i = 0; i < pool_n; i++) {
    free(pool[i]->data);
    free(pool[i]);
  }
  free(pool);
  pool = NULL;
  pool_n = pool_cap = 0;
}

ref_arr *ref_full(tg_dtype dt, int ndim, const int64_t *shape, double v) {
  ref_arr *a = ref_new(dt, ndim, shape);
  double r = ref_round(dt, v);
  for (int64_t i = 0; i < a->numel; i++) a->data[i] = r;
  return a;
}

ref_arr *ref_scalar(tg_dtype dt, double v) { return ref_full(dt, 0, NULL, v); }

ref_arr *ref_from(tg_dtype dt, int ndim, const int64_t *shape, const double *vals) {
  ref_arr *a = ref_new(dt, ndim, shape);
  for (int64_t i = 0; i < a->numel; i++) a->data[i] = ref_round(dt, vals[i]);
  return a;
}

ref_arr *ref_rand(tg_dtype dt, int ndim, const int64_t *shape, double lo, double hi) {
  ref_arr *a = ref_new(dt, ndim, shape);
  for (int64_t i = 0; i < a->numel; i++) {
    if (dt == TG_BOOL) a->data[i] = (double)(ref_next() >> 63);
    else if (ref_is_float(dt)) a->data[i] = ref_round(dt, ref_uniform(lo, hi));
    else a->data[i] = ref_round(dt, (double)ref_randint((int64_t)lo, (int64_t)hi));
  }
  return a;
}

ref_arr *ref_arange(tg_dtype dt, double start, double stop, double step) {
  double c = ceil((stop - start) / step);
  int64_t n = c > 0 ? (int64_t)c : 0;
  ref_arr *a = ref_new(dt, 1, &n);
  for (int64_t i = 0; i < n; i++) a->data[i] = ref_round(dt, start + (double)i * step);
  return a;
}

ref_arr *ref_eye(tg_dtype dt, int64_t n, int64_t m) {
  ref_arr *a = ref_new(dt, 2, (int64_t[]){n, m});
  for (int64_t i = 0; i < n && i < m; i++) a->data[i * m + i] = ref_round(dt, 1);
  return a;
}

ref_arr *ref_copy(const ref_arr *a) { return ref_from(a->dtype, a->ndim, a->shape, a->data); }

const char *ref_shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (ndim == 1 && k < n) k += (size_t)snprintf(buf + k, n - k, ",");
  if (k < n) snprintf(buf + k, n - k, ")");
  return buf;
}

/* ---- movement -------------------------------------------------------------------------------------- */
static void contiguous_strides(int ndim, const int64_t *shape, int64_t *st) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

/* advances a row-major multi-index; returns false after the last one */
static bool next_index(int ndim, const int64_t *shape, int64_t *idx) {
  for (int i = ndim - 1; i >= 0; i--) {
    if (++idx[i] < shape[i]) return true;
    idx[i] = 0;
  }
  return false;
}

ref_arr *ref_view(const ref_arr *a, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset) {
  ref_arr *o = ref_new(a->dtype, ndim, shape);
  if (o->numel == 0) return o;
  int64_t idx[TG_MAX_DIMS] = {0};
  int64_t i = 0;
  do {
    int64_t off = offset;
    for (int k = 0; k < ndim; k++) off += idx[k] * strides[k];
    if (off < 0 || off >= a->numel) ref_die("view out of bounds");
    o->data[i++] = a->data[off];
  } while (next_index(ndim, shape, idx));
  return o;
}

ref_arr *ref_reshape(const ref_arr *a, int ndim, const int64_t *shape) {
  int64_t s[TG_MAX_DIMS], known = 1;
  int neg = -1;
  for (int i = 0; i < ndim; i++) {
    s[i] = shape[i];
    if (s[i] == -1) neg = i;
    else known *= s[i];
  }
  if (neg >= 0) s[neg] = known ? a->numel / known : 0;
  if (prod_of(ndim, s) != a->numel) ref_die("reshape changes numel");
  return ref_from(a->dtype, ndim, s, a->data);
}

ref_arr *ref_permute(const ref_arr *a, const int *order) {
  int64_t st[TG_MAX_DIMS], shape[TG_MAX_DIMS], nst[TG_MAX_DIMS];
  contiguous_strides(a->ndim, a->shape, st);
  for (int i = 0; i < a->ndim; i++) {
    int ax = order[i] < 0 ? order[i] + a->ndim : order[i];
    shape[i] = a->shape[ax];
    nst[i] = st[ax];
  }
  return ref_view(a, a->ndim, shape, nst, 0);
}

ref_arr *ref_expand(const ref_arr *a, int ndim, const int64_t *shape) {
  if (ndim < a->ndim) ref_die("expand to fewer dims");
  int64_t st[TG_MAX_DIMS], ost[TG_MAX_DIMS], oshape[TG_MAX_DIMS];
  contiguous_strides(a->ndim, a->shape, st);
  int lead = ndim - a->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t from = i < lead ? 1 : a->shape[i - lead];
    int64_t to = shape[i] == -1 ? from : shape[i];
    if (from != to && from != 1) ref_die("expand of a non-1 axis");
    oshape[i] = to;
    ost[i] = (i < lead || from != to) ? 0 : st[i - lead];
  }
  return ref_view(a, ndim, oshape, ost, 0);
}

ref_arr *ref_pad(const ref_arr *a, const int64_t *pads, double value) {
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i] + pads[2 * i] + pads[2 * i + 1];
  ref_arr *o = ref_full(a->dtype, a->ndim, shape, value);
  if (a->numel == 0) return o;
  int64_t idx[TG_MAX_DIMS] = {0}, ost[TG_MAX_DIMS];
  contiguous_strides(a->ndim, shape, ost);
  int64_t i = 0;
  do {
    int64_t off = 0;
    for (int k = 0; k < a->ndim; k++) off += (idx[k] + pads[2 * k]) * ost[k];
    o->data[off] = a->data[i++];
  } while (next_index(a->ndim, a->shape, idx));
  return o;
}

ref_arr *ref_shrink(const ref_arr *a, const int64_t *bounds) {
  int64_t st[TG_MAX_DIMS], shape[TG_MAX_DIMS], off = 0;
  contiguous_strides(a->ndim, a->shape, st);
  for (int i = 0; i < a->ndim; i++) {
    if (bounds[2 * i] < 0 || bounds[2 * i] > bounds[2 * i + 1] || bounds[2 * i + 1] > a->shape[i]) ref_die("shrink");
    shape[i] = bounds[2 * i + 1] - bounds[2 * i];
    off += bounds[2 * i] * st[i];
  }
  if (prod_of(a->ndim, shape) == 0) return ref_new(a->dtype, a->ndim, shape);
  return ref_view(a, a->ndim, shape, st, off);
}

ref_arr *ref_flip(const ref_arr *a, int naxes, const int *axes) {
  int64_t st[TG_MAX_DIMS], off = 0;
  contiguous_strides(a->ndim, a->shape, st);
  bool flip[TG_MAX_DIMS] = {false};
  for (int i = 0; i < naxes; i++) flip[axes[i] < 0 ? axes[i] + a->ndim : axes[i]] = true;
  for (int i = 0; i < a->ndim; i++)
    if (flip[i] && a->shape[i] > 0) {
      off += (a->shape[i] - 1) * st[i];
      st[i] = -st[i];
    }
  if (a->numel == 0) return ref_copy(a);
  return ref_view(a, a->ndim, a->shape, st, off);
}

ref_arr *ref_transpose(const ref_arr *a, int d0, int d1) {
  int order[TG_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) order[i] = i;
  d0 = d0 < 0 ? d0 + a->ndim : d0;
  d1 = d1 < 0 ? d1 + a->ndim : d1;
  order[d0] = d1;
  order[d1] = d0;
  return ref_permute(a, order);
}

ref_arr *ref_flatten(const ref_arr *a, int start, int end) {
  start = start < 0 ? start + a->ndim : start;
  end = end < 0 ? end + a->ndim : end;
  int64_t shape[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < start; i++) shape[n++] = a->shape[i];
  int64_t m = 1;
  for (int i = start; i <= end; i++) m *= a->shape[i];
  shape[n++] = m;
  for (int i = end + 1; i < a->ndim; i++) shape[n++] = a->shape[i];
  return ref_reshape(a, n, shape);
}

ref_arr *ref_squeeze(const ref_arr *a, int axis) {
  int64_t shape[TG_MAX_DIMS];
  int n = 0;
  if (axis != TG_ALL) axis = axis < 0 ? axis + a->ndim : axis;
  for (int i = 0; i < a->ndim; i++)
    if (!(a->shape[i] == 1 && (axis == TG_ALL || axis == i))) shape[n++] = a->shape[i];
  return ref_reshape(a, n, shape);
}

ref_arr *ref_unsqueeze(const ref_arr *a, int axis) {
  axis = axis < 0 ? axis + a->ndim + 1 : axis;
  int64_t shape[TG_MAX_DIMS];
  int n = 0;
  for (int i = 0; i <= a->ndim; i++) {
    if (i == axis) shape[n++] = 1;
    if (i < a->ndim) shape[n++] = a->shape[i];
  }
  return ref_reshape(a, n, shape);
}

/* python's slice.indices(): the first index and the element count */
static void slice_indices(int64_t n, const tg_slice *s, int64_t *first, int64_t *count, int64_t *step) {
  if (s->all) {
    *first = 0;
    *count = n;
    *step = 1;
    return;
  }
  int64_t st = s->step;
  if (st == 0) ref_die("slice step 0");
  int64_t lower = st < 0 ? -1 : 0, upper = st < 0 ? n - 1 : n;
  int64_t start = s->start, stop = s->stop;
  if (start < 0) {
    start = start < -n ? lower : start + n;
    if (start < lower) start = lower;
  } else if (start > upper) start = upper;
  if (s->stop == TG_END) stop = st < 0 ? lower : upper;  /* TG_END: python's None */
  else if (stop < 0) {
    stop = stop < -n ? lower : stop + n;
    if (stop < lower) stop = lower;
  } else if (stop > upper) stop = upper;
  /* any step, INT64_MIN included: |step| unsigned, and at most one element when |step| > n */
  uint64_t ust = st > 0 ? (uint64_t)st : -(uint64_t)st;
  int64_t span = st > 0 ? stop - start : start - stop;
  int64_t c = span > 0 ? (int64_t)((uint64_t)(span - 1) / ust) + 1 : 0;
  *first = start;
  *count = c;
  *step = c > 1 ? st : 1;
}

ref_arr *ref_slice(const ref_arr *a, int n, const tg_slice *s) {
  int64_t st[TG_MAX_DIMS], shape[TG_MAX_DIMS], nst[TG_MAX_DIMS], off = 0;
  contiguous_strides(a->ndim, a->shape, st);
  for (int i = 0; i < a->ndim; i++) {
    int64_t first = 0, count = a->shape[i], step = 1;
    if (i < n) slice_indices(a->shape[i], &s[i], &first, &count, &step);
    shape[i] = count;
    nst[i] = st[i] * step;
    if (count > 0) off += first * st[i];
  }
  if (prod_of(a->ndim, shape) == 0) return ref_new(a->dtype, a->ndim, shape);
  return ref_view(a, a->ndim, shape, nst, off);
}

ref_arr *ref_cat(int n, ref_arr *const *as, int axis) {
  const ref_arr *a0 = as[0];
  axis = axis < 0 ? axis + a0->ndim : axis;
  int64_t shape[TG_MAX_DIMS];
  memcpy(shape, a0->shape, sizeof shape);
  tg_dtype dt = a0->dtype;
  shape[axis] = 0;
  for (int i = 0; i < n; i++) {
    shape[axis] += as[i]->shape[axis];
    dt = ref_promote(dt, as[i]->dtype);
  }
  ref_arr *o = ref_new(dt, a0->ndim, shape);
  int64_t ost[TG_MAX_DIMS], at = 0;
  contiguous_strides(o->ndim, shape, ost);
  for (int t = 0; t < n; t++) {
    const ref_arr *a = as[t];
    if (a->numel) {
      int64_t idx[TG_MAX_DIMS] = {0}, i = 0;
      do {
        int64_t off = 0;
        for (int k = 0; k < a->ndim; k++) off += (idx[k] + (k == axis ? at : 0)) * ost[k];
        o->data[off] = ref_round(dt, a->data[i++]);
      } while (next_index(a->ndim, a->shape, idx));
    }
    at += a->shape[axis];
  }
  return o;
}

ref_arr *ref_stack(int n, ref_arr *const *as, int axis) {
  ref_arr *tmp[64];
  if (n > 64) ref_die("stack of too many");
  for (int i = 0; i < n; i++) tmp[i] = ref_unsqueeze(as[i], axis);
  return ref_cat(n, tmp, axis < 0 ? axis + as[0]->ndim + 1 : axis);
}

ref_arr *ref_repeat(const ref_arr *a, int ndim, const int64_t *repeats) {
  if (ndim < a->ndim) ref_die("repeat with fewer repeats than dims");
  int64_t base[TG_MAX_DIMS], shape[TG_MAX_DIMS], bst[TG_MAX_DIMS];
  int lead = ndim - a->ndim;
  for (int i = 0; i < ndim; i++) {
    base[i] = i < lead ? 1 : a->shape[i - lead];
    shape[i] = base[i] * repeats[i];
  }
  contiguous_strides(ndim, base, bst);
  ref_arr *o = ref_new(a->dtype, ndim, shape);
  if (o->numel == 0) return o;
  int64_t idx[TG_MAX_DIMS] = {0}, i = 0;
  do {
    int64_t off = 0;
    for (int k = 0; k < ndim; k++) off += (idx[k] % base[k]) * bst[k];
    o->data[i++] = a->data[off];
  } while (next_index(ndim, shape, idx));
  return o;
}

/* ---- elementwise ----------------------------------------------------------------------------------- */
const char *ref_op_name(ref_op op) {
  static const char *names[] = {
      "neg", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "reciprocal", "abs", "sign",
      "square", "trunc", "floor", "ceil", "relu", "sigmoid", "tanh", "gelu", "silu", "softplus", "leaky_relu",
      "elu", "relu6", "hardswish", "hardsigmoid", "mish", "logical_not", "clamp",
      "add", "sub", "mul", "div", "idiv", "mod", "pow", "maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne",
      "bitwise_and", "bitwise_or", "bitwise_xor",
      "sum", "prod", "max", "min", "mean"};
  return (size_t)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

static double softplus_d(double x) { return x > 30 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ops that compute in floating point: an integer input is cast to float32 first */
static bool unary_is_float_op(ref_op op) {
  switch (op) {
  case R_NEG: case R_ABS: case R_SIGN: case R_SQUARE: case R_TRUNC: case R_FLOOR: case R_CEIL: case R_RELU:
  case R_RELU6: case R_LOGICAL_NOT: case R_CLAMP: return false;
  default: return true;
  }
}

ref_arr *ref_unary(ref_op op, const ref_arr *a, double p0, double p1) {
  tg_dtype in = a->dtype, out = in;
  if (unary_is_float_op(op)) out = float_of(in);
  if (op == R_LOGICAL_NOT) out = TG_BOOL;
  ref_arr *o = ref_new(out, a->ndim, a->shape);
  for (int64_t i = 0; i < a->numel; i++) {
    double x = unary_is_float_op(op) ? ref_round(out, a->data[i]) : a->data[i], r = 0;
    switch (op) {
    case R_NEG: r = in == TG_BOOL ? (x == 0) : -x; break;
    case R_EXP: r = exp(x); break;
    case R_EXP2: r = exp2(x); break;
    case R_LOG: r = log(x); break;
    case R_LOG2: r = log2(x); break;
    case R_SQRT: r = sqrt(x); break;
    case R_RSQRT: r = 1.0 / sqrt(x); break;
    case R_SIN: r = sin(x); break;
    case R_COS: r = cos(x); break;
    case R_TAN: r = tan(x); break;
    case R_RECIP: r = 1.0 / x; break;
    case R_ABS: r = fabs(x); break;
    case R_SIGN: r = isnan(x) ? x : (x > 0) - (x < 0); break;
    case R_SQUARE: r = x * x; break;
    case R_TRUNC: r = trunc(x); break;
    case R_FLOOR: r = floor(x); break;
    case R_CEIL: r = ceil(x); break;
    case R_RELU: r = x > 0 ? x : 0; break;
    case R_SIGMOID: r = sigmoid_d(x); break;
    case R_TANH: r = tanh(x); break;
    case R_GELU: r = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); break;
    case R_SILU: r = x * sigmoid_d(x); break;
    case R_SOFTPLUS: r = softplus_d(x); break;
    case R_LEAKY_RELU: r = x >= 0 ? x : p0 * x; break;
    case R_ELU: r = x > 0 ? x : p0 * (exp(x) - 1); break;
    case R_RELU6: r = x < 0 ? 0 : x > 6 ? 6 : x; break;
    case R_HARDSWISH: r = x * (x + 3 < 0 ? 0 : x + 3 > 6 ? 6 : x + 3) / 6; break;
    case R_HARDSIGMOID: r = x / 6 + 0.5; r = r < 0 ? 0 : r > 1 ? 1 : r; break;
    case R_MISH: r = x * tanh(softplus_d(x)); break;
    case R_LOGICAL_NOT: r = x == 0; break;
    case R_CLAMP: r = x < p0 ? p0 : x; r = r > p1 ? p1 : r; break;
    default: ref_die("not a unary op");
    }
    o->data[i] = ref_round(out, r);
  }
  return o;
}

bool ref_broadcast_shape(int na, const int64_t *sa, int nb, const int64_t *sb, int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = i - (n - na), ib = i - (n - nb);
    int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
    if (x != y && x != 1 && y != 1) return false;
    out[i] = x == 1 ? y : x;
  }
  *nout = n;
  return true;
}

/* element offset into a (shape aligned right, broadcast dims read index 0) for an output multi-index */
static int64_t bcast_offset(const ref_arr *a, int n, const int64_t *idx) {
  int64_t off = 0, s = 1;
  for (int i = a->ndim - 1; i >= 0; i--) {
    int oi = i + (n - a->ndim);
    if (a->shape[i] != 1) off += idx[oi] * s;
    s *= a->shape[i];
  }
  return off;
}

static bool is_cmp(ref_op op) { return op >= R_LT && op <= R_NE; }

static double binary_int(ref_op op, tg_dtype dt, int64_t x, int64_t y) {
  uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
  int64_t r = 0;
  switch (op) {
  case R_ADD: r = (int64_t)(ux + uy); break;
  case R_SUB: r = (int64_t)(ux - uy); break;
  case R_MUL: r = (int64_t)(ux * uy); break;
  case R_IDIV: r = y == 0 ? 0 : (x == INT64_MIN && y == -1) ? x : x / y; break;
  case R_MOD:
    if (y == 0 || (x == INT64_MIN && y == -1)) r = 0;
    else {
      r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
    }
    break;
  case R_POW: {
    if (y < 0) return ref_round(dt, pow((double)x, (double)y));
    uint64_t acc = 1;
    for (int64_t k = 0; k < y && k < 64; k++) acc *= ux;
    r = (int64_t)acc;
    break;
  }
  case R_MAXIMUM: r = x > y ? x : y; break;
  case R_MINIMUM: r = x < y ? x : y; break;
  case R_AND: r = x & y; break;
  case R_OR: r = x | y; break;
  case R_XOR: r = x ^ y; break;
  default: ref_die("binary_int");
  }
  return (double)wrap_int(dt, r);
}

static double binary_apply(ref_op op, tg_dtype ct, double x, double y) {
  switch (op) {
  case R_LT: return x < y;
  case R_LE: return x <= y;
  case R_GT: return x > y;
  case R_GE: return x >= y;
  case R_EQ: return x == y;
  case R_NE: return x != y;
  case R_DIV: return x / y;
  default: break;
  }
  if (ct == TG_BOOL) {
    bool a = x != 0, b = y != 0;
    switch (op) {
    case R_AND: case R_MUL: case R_MINIMUM: return a && b;
    case R_OR: case R_ADD: case R_MAXIMUM: return a || b;
    case R_XOR: case R_NE: return a != b;
    case R_SUB: return a || !b;  /* tinygrad: a - b is a + (-b), and -b of a bool is not b */
    default: return binary_int(op, TG_INT32, (int64_t)a, (int64_t)b) != 0;
    }
  }
  if (!ref_is_float(ct)) return binary_int(op, ct, (int64_t)x, (int64_t)y);
  switch (op) {
  case R_ADD: return x + y;
  case R_SUB: return x - y;
  case R_MUL: return x * y;
  case R_IDIV: return trunc(x / y);
  case R_MOD: {
    double r = fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return r;
  }
  case R_POW: return pow(x, y);
  case R_MAXIMUM: return x > y ? x : y;
  case R_MINIMUM: return x < y ? x : y;
  default: ref_die("bitwise op on floats");
  }
  return 0;
}

ref_arr *ref_binary(ref_op op, const ref_arr *a, const ref_arr *b) {
  int n;
  int64_t shape[TG_MAX_DIMS];
  if (!ref_broadcast_shape(a->ndim, a->shape, b->ndim, b->shape, &n, shape)) return NULL;
  tg_dtype ct = ref_promote(a->dtype, b->dtype), out = ct;
  if (op == R_DIV) ct = out = float_of(ct);
  if (is_cmp(op)) out = TG_BOOL;
  ref_arr *o = ref_new(out, n, shape);
  if (o->numel == 0) return o;
  int64_t idx[TG_MAX_DIMS] = {0}, i = 0;
  do {
    double x = ref_round(ct, a->data[bcast_offset(a, n, idx)]);
    double y = ref_round(ct, b->data[bcast_offset(b, n, idx)]);
    o->data[i++] = ref_round(out, binary_apply(op, ct, x, y));
  } while (next_index(n, shape, idx));
  return o;
}

ref_arr *ref_binary_scalar(ref_op op, const ref_arr *a, double v) {
  bool integral = v == floor(v) && fabs(v) < 9e18;
  tg_dtype sdt;
  if (ref_is_float(a->dtype)) sdt = a->dtype;
  else if (ref_is_int(a->dtype) && integral) sdt = a->dtype;
  else if (integral) sdt = TG_INT32;
  else sdt = TG_FLOAT32;
  return ref_binary(op, a, ref_scalar(sdt, v));
}

ref_arr *ref_where(const ref_arr *c, const ref_arr *a, const ref_arr *b) {
  int n1, n;
  int64_t s1[TG_MAX_DIMS], shape[TG_MAX_DIMS];
  if (!ref_broadcast_shape(c->ndim, c->shape, a->ndim, a->shape, &n1, s1)) return NULL;
  if (!ref_broadcast_shape(n1, s1, b->ndim, b->shape, &n, shape)) return NULL;
  tg_dtype dt = ref_promote(a->dtype, b->dtype);
  ref_arr *o = ref_new(dt, n, shape);
  if (o->numel == 0) return o;
  int64_t idx[TG_MAX_DIMS] = {0}, i = 0;
  do {
    bool cv = c->data[bcast_offset(c, n, idx)] != 0;
    o->data[i++] = ref_round(dt, cv ? a->data[bcast_offset(a, n, idx)] : b->data[bcast_offset(b, n, idx)]);
  } while (next_index(n, shape, idx));
  return o;
}

ref_arr *ref_cast(const ref_arr *a, tg_dtype dt) { return ref_from(dt, a->ndim, a->shape, a->data); }

/* ---- reductions ------------------------------------------------------------------------------------ */
/* marks the reduced axes; naxes 0 reduces all */
static void reduce_mask(const ref_arr *a, int naxes, const int *axes, bool *mask) {
  for (int i = 0; i < a->ndim; i++) mask[i] = naxes == 0;
  for (int i = 0; i < naxes; i++) mask[axes[i] < 0 ? axes[i] + a->ndim : axes[i]] = true;
}

static int reduce_shape(const ref_arr *a, const bool *mask, bool keepdim, int64_t *shape) {
  int n = 0;
  for (int i = 0; i < a->ndim; i++) {
    if (!mask[i]) shape[n++] = a->shape[i];
    else if (keepdim) shape[n++] = 1;
  }
  return n;
}

/* the output offset (in the keepdim layout, which has the same order as the dropped one) of an input index */
static int64_t reduce_out_offset(const ref_arr *a, const bool *mask, const int64_t *idx) {
  int64_t off = 0, s = 1;
  for (int i = a->ndim - 1; i >= 0; i--)
    if (!mask[i]) {
      off += idx[i] * s;
      s *= a->shape[i];
    }
  return off;
}

static double dtype_min(tg_dtype dt) {
  switch (dt) {
  case TG_BOOL: return 0;
  case TG_INT8: return -128;
  case TG_INT16: return -32768;
  case TG_INT32: return -2147483648.0;
  case TG_INT64: return -9223372036854775808.0;
  default: return ref_is_unsigned(dt) ? 0 : -INFINITY;
  }
}

static double dtype_max(tg_dtype dt) {
  switch (dt) {
  case TG_BOOL: return 1;
  case TG_INT8: return 127;
  case TG_INT16: return 32767;
  case TG_INT32: return 2147483647.0;
  case TG_INT64: return 9223372036854775807.0;
  case TG_UINT8: return 255;
  case TG_UINT16: return 65535;
  case TG_UINT32: return 4294967295.0;
  case TG_UINT64: return 18446744073709551615.0;
  default: return INFINITY;
  }
}

ref_arr *ref_reduce(ref_op op, const ref_arr *a, int naxes, const int *axes, bool keepdim) {
  bool mask[TG_MAX_DIMS];
  int64_t shape[TG_MAX_DIMS];
  reduce_mask(a, naxes, axes, mask);
  int n = reduce_shape(a, mask, keepdim, shape);
  tg_dtype in = a->dtype, out;
  switch (op) {
  case R_SUM: out = ref_sum_dtype(in); break;
  case R_MEAN: out = float_of(in); break;
  default: out = in;
  }
  ref_arr *o = ref_new(out, n, shape);
  double init = op == R_PROD ? 1 : op == R_MAX ? dtype_min(in) : op == R_MIN ? dtype_max(in) : 0;
  for (int64_t i = 0; i < o->numel; i++) o->data[i] = init;
  int64_t count = 1;
  for (int i = 0; i < a->ndim; i++)
    if (mask[i]) count *= a->shape[i];
  if (a->numel) {
    int64_t idx[TG_MAX_DIMS] = {0}, i = 0;
    do {
      double x = a->data[i++], *acc = &o->data[reduce_out_offset(a, mask, idx)];
      switch (op) {
      case R_SUM: case R_MEAN: *acc += x; break;
      case R_PROD: *acc *= x; break;
      case R_MAX: if (x > *acc) *acc = x; break;
      case R_MIN: if (x < *acc) *acc = x; break;
      default: ref_die("not a reduce op");
      }
    } while (next_index(a->ndim, a->shape, idx));
  }
  for (int64_t i = 0; i < o->numel; i++) {
    if (op == R_MEAN) o->data[i] = o->data[i] / (double)count;
    o->data[i] = ref_round(out, o->data[i]);
  }
  return o;
}

ref_arr *ref_var(const ref_arr *a, int naxes, const int *axes, bool keepdim, double correction, bool take_sqrt) {
  bool mask[TG_MAX_DIMS];
  reduce_mask(a, naxes, axes, mask);
  ref_arr *af = ref_cast(a, TG_FLOAT64);
  ref_arr *mean = ref_reduce(R_MEAN, af, naxes, axes, true);
  ref_arr *dev = ref_binary(R_SUB, af, mean);
  ref_arr *sq = ref_binary(R_MUL, dev, dev);
  ref_arr *s = ref_reduce(R_SUM, sq, naxes, axes, keepdim);
  int64_t count = 1;
  for (int i = 0; i < a->ndim; i++)
    if (mask[i]) count *= a->shape[i];
  double denom = (double)count - correction;
  if (denom < 0) denom = 0;
  tg_dtype out = float_of(a->dtype);
  ref_arr *o = ref_new(out, s->ndim, s->shape);
  for (int64_t i = 0; i < o->numel; i++) {
    double v = s->data[i] / denom;
    o->data[i] = ref_round(out, take_sqrt ? sqrt(v) : v);
  }
  return o;
}

ref_arr *ref_argext(const ref_arr *a, int axis, bool keepdim, bool is_min) {
  if (axis == TG_ALL) {
    int64_t n = a->numel;
    ref_arr *flat = ref_reshape(a, 1, &n);
    return ref_argext(flat, 0, false, is_min);
  }
  axis = axis < 0 ? axis + a->ndim : axis;
  bool mask[TG_MAX_DIMS] = {false};
  mask[axis] = true;
  int64_t shape[TG_MAX_DIMS];
  int n = reduce_shape(a, mask, keepdim, shape);
  ref_arr *o = ref_new(TG_INT32, n, shape);
  ref_arr *best = ref_new(TG_FLOAT64, n, shape);
  for (int64_t i = 0; i < best->numel; i++) best->data[i] = NAN;
  if (a->numel == 0) return o;
  int64_t idx[TG_MAX_DIMS] = {0}, i = 0;
  do {
    double x = a->data[i++];
    int64_t off = reduce_out_offset(a, mask, idx);
    double b = best->data[off];
    if (isnan(b) || (is_min ? x < b : x > b)) {
      best->data[off] = x;
      o->data[off] = (double)idx[axis];
    }
  } while (next_index(a->ndim, a->shape, idx));
  return o;
}

/* softmax / log_softmax along axis, in double */
ref_arr *ref_softmax(const ref_arr *a, int axis, bool take_log) {
  axis = axis < 0 ? axis + a->ndim : axis;
  ref_arr *af = ref_cast(a, TG_FLOAT64);
  int ax[1] = {axis};
  ref_arr *m = ref_reduce(R_MAX, af, 1, ax, true);
  ref_arr *d = ref_binary(R_SUB, af, m);
  ref_arr *e = ref_unary(R_EXP, d, 0, 0);
  ref_arr *s = ref_reduce(R_SUM, e, 1, ax, true);
  ref_arr *r = take_log ? ref_binary(R_SUB, d, ref_unary(R_LOG, s, 0, 0)) : ref_binary(R_DIV, e, s);
  return ref_cast(r, float_of(a->dtype));
}

ref_arr *ref_logsumexp(const ref_arr *a, int axis, bool keepdim) {
  axis = axis < 0 ? axis + a->ndim : axis;
  ref_arr *af = ref_cast(a, TG_FLOAT64);
  int ax[1] = {axis};
  ref_arr *m = ref_reduce(R_MAX, af, 1, ax, true);
  ref_arr *e = ref_unary(R_EXP, ref_binary(R_SUB, af, m), 0, 0);
  ref_arr *s = ref_reduce(R_SUM, e, 1, ax, true);
  ref_arr *r = ref_binary(R_ADD, ref_unary(R_LOG, s, 0, 0), m);
  if (!keepdim) r = ref_squeeze(r, axis);
  return ref_cast(r, float_of(a->dtype));
}

ref_arr *ref_matmul(const ref_arr *a, const ref_arr *b) {
  if (a->ndim == 0 || b->ndim == 0) return NULL;
  const ref_arr *A = a->ndim == 1 ? ref_reshape(a, 2, (int64_t[]){1, a->shape[0]}) : a;
  const ref_arr *Bm = b->ndim == 1 ? ref_reshape(b, 2, (int64_t[]){b->shape[0], 1}) : b;
  int64_t M = A->shape[A->ndim - 2], K = A->shape[A->ndim - 1], K2 = Bm->shape[Bm->ndim - 2],
          N = Bm->shape[Bm->ndim - 1];
  if (K != K2) return NULL;
  int nb;
  int64_t bshape[TG_MAX_DIMS];
  if (!ref_broadcast_shape(A->ndim - 2, A->shape, Bm->ndim - 2, Bm->shape, &nb, bshape)) return NULL;
  tg_dtype ct = ref_promote(a->dtype, b->dtype), out = ref_sum_dtype(ct);
  int64_t oshape[TG_MAX_DIMS];
  memcpy(oshape, bshape, sizeof(int64_t) * (size_t)nb);
  oshape[nb] = M;
  oshape[nb + 1] = N;
  ref_arr *o = ref_new(out, nb + 2, oshape);
  int64_t nbatch = prod_of(nb, bshape);
  int64_t bidx[TG_MAX_DIMS] = {0};
  for (int64_t bi = 0; bi < nbatch; bi++) {
    /* offsets of this batch in A and B: broadcast dims read index 0 */
    int64_t offa = 0, offb = 0, sa = M * K, sb = K * N;
    for (int i = A->ndim - 3; i >= 0; i--) {
      if (A->shape[i] != 1) offa += bidx[i + (nb - (A->ndim - 2))] * sa;
      sa *= A->shape[i];
    }
    for (int i = Bm->ndim - 3; i >= 0; i--) {
      if (Bm->shape[i] != 1) offb += bidx[i + (nb - (Bm->ndim - 2))] * sb;
      sb *= Bm->shape[i];
    }
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++)
          acc += ref_round(ct, A->data[offa + i * K + k]) * ref_round(ct, Bm->data[offb + k * N + j]);
        o->data[bi * M * N + i * N + j] = ref_round(out, acc);
      }
    next_index(nb, bshape, bidx);
  }
  if (a->ndim == 1 && b->ndim == 1) return ref_reshape(o, 0, NULL);
  if (a->ndim == 1) return ref_squeeze(o, o->ndim - 2);
  if (b->ndim == 1) return ref_squeeze(o, o->ndim - 1);
  return o;
}

/* ---- bridging -------------------------------------------------------------------------------------- */
static void pack(tg_dtype dt, const double *v, int64_t n, unsigned char *out) {
  for (int64_t i = 0; i < n; i++) {
    unsigned char *p = out + (size_t)i * ref_dtype_size(dt);
    double x = v[i];
    switch (dt) {
    case TG_BOOL: *p = x != 0; break;
    case TG_INT8: { int8_t y = (int8_t)x; memcpy(p, &y, 1); break; }
    case TG_INT16: { int16_t y = (int16_t)x; memcpy(p, &y, 2); break; }
    case TG_INT32: { int32_t y = (int32_t)x; memcpy(p, &y, 4); break; }
    case TG_INT64: { int64_t y = (int64_t)x; memcpy(p, &y, 8); break; }
    case TG_UINT8: *p = (uint8_t)x; break;
    case TG_UINT16: { uint16_t y = (uint16_t)x; memcpy(p, &y, 2); break; }
    case TG_UINT32: { uint32_t y = (uint32_t)x; memcpy(p, &y, 4); break; }
    case TG_UINT64: { uint64_t y = (uint64_t)x; memcpy(p, &y, 8); break; }
    case TG_FLOAT16: { uint16_t y = ref_f32_to_f16((float)x); memcpy(p, &y, 2); break; }
    case TG_BFLOAT16: { uint16_t y = ref_f32_to_bf16((float)x); memcpy(p, &y, 2); break; }
    case TG_FLOAT32: { float y = (float)x; memcpy(p, &y, 4); break; }
    case TG_FLOAT64: memcpy(p, &x, 8); break;
    default: break;
    }
  }
}

static void unpack(tg_dtype dt, const unsigned char *in, int64_t n, double *v) {
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *p = in + (size_t)i * ref_dtype_size(dt);
    double x = 0;
    switch (dt) {
    case TG_BOOL: x = *p != 0; break;
    case TG_INT8: { int8_t y; memcpy(&y, p, 1); x = y; break; }
    case TG_INT16: { int16_t y; memcpy(&y, p, 2); x = y; break; }
    case TG_INT32: { int32_t y; memcpy(&y, p, 4); x = y; break; }
    case TG_INT64: { int64_t y; memcpy(&y, p, 8); x = (double)y; break; }
    case TG_UINT8: x = *p; break;
    case TG_UINT16: { uint16_t y; memcpy(&y, p, 2); x = y; break; }
    case TG_UINT32: { uint32_t y; memcpy(&y, p, 4); x = y; break; }
    case TG_UINT64: { uint64_t y; memcpy(&y, p, 8); x = (double)y; break; }
    case TG_FLOAT16: { uint16_t y; memcpy(&y, p, 2); x = ref_f16_to_f32(y); break; }
    case TG_BFLOAT16: { uint16_t y; memcpy(&y, p, 2); x = ref_bf16_to_f32(y); break; }
    case TG_FLOAT32: { float y; memcpy(&y, p, 4); x = y; break; }
    case TG_FLOAT64: memcpy(&x, p, 8); break;
    default: break;
    }
    v[i] = x;
  }
}

tg_tensor *ref_to_tg(const ref_arr *a) {
  size_t nbytes = (size_t)a->numel * ref_dtype_size(a->dtype);
  unsigned char *buf = malloc(nbytes ? nbytes : 1);
  if (!buf) return NULL;
  pack(a->dtype, a->data, a->numel, buf);
  tg_tensor *t = tg_from_data(a->dtype, a->ndim, a->shape, buf, nbytes);
  free(buf);
  return t;
}

ref_arr *ref_from_tg(tg_tensor *t) {
  if (!t) return NULL;
  int nd = tg_ndim(t);
  if (nd < 0 || nd > TG_MAX_DIMS) return NULL;
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) shape[i] = tg_shape(t, i);
  tg_dtype dt = tg_dtype_of(t);
  if ((unsigned)dt >= TG_DTYPE_COUNT) return NULL;
  ref_arr *o = ref_new(dt, nd, shape);
  size_t nbytes = (size_t)o->numel * ref_dtype_size(dt);
  unsigned char *buf = malloc(nbytes ? nbytes : 1);
  if (!buf) return NULL;
  if (tg_to_host(t, buf, nbytes) != TG_OK) {
    free(buf);
    return NULL;
  }
  unpack(dt, buf, o->numel, o->data);
  free(buf);
  return o;
}

bool ref_check_tol(const char *what, tg_tensor *t, const ref_arr *want, bool check_dtype, double atol, double rtol,
                   const char *file, int line) {
  char b1[256], b2[256];
  if (!t) {
    test_fail(file, line, "%s: tensor is NULL: %s", what, tg_error());
    return false;
  }
  int nd = tg_ndim(t);
  bool shape_ok = nd == want->ndim;
  int64_t shape[TG_MAX_DIMS] = {0};
  for (int i = 0; i < nd && i < TG_MAX_DIMS; i++) {
    shape[i] = tg_shape(t, i);
    if (shape_ok && shape[i] != want->shape[i]) shape_ok = false;
  }
  if (!shape_ok) {
    test_fail(file, line, "%s: shape %s, want %s", what, ref_shape_str(b1, sizeof b1, nd, shape),
              ref_shape_str(b2, sizeof b2, want->ndim, want->shape));
    return false;
  }
  tg_dtype dt = tg_dtype_of(t);
  if (check_dtype && dt != want->dtype) {
    test_fail(file, line, "%s: dtype %s, want %s", what, ref_dtype_name(dt), ref_dtype_name(want->dtype));
    return false;
  }
  ref_arr *got = ref_from_tg(t);
  if (!got) {
    test_fail(file, line, "%s: reading the result failed: %s", what, tg_error());
    return false;
  }
  bool fl = ref_is_float(want->dtype) || ref_is_float(dt);
  int64_t bad = 0;
  for (int64_t i = 0; i < want->numel; i++) {
    double g = got->data[i], w = want->data[i];
    bool ok = fl ? ((isnan(w) && isnan(g)) || (isinf(w) && g == w) || fabs(g - w) <= atol + rtol * fabs(w)) : g == w;
    if (!ok && bad++ < 4) {
      int64_t idx[TG_MAX_DIMS], r = i;
      for (int k = want->ndim - 1; k >= 0; k--) {
        idx[k] = want->shape[k] ? r % want->shape[k] : 0;
        r = want->shape[k] ? r / want->shape[k] : 0;
      }
      test_fail(file, line, "%s %s %s: at %s (flat %lld): got %.9g want %.9g", what,
                ref_shape_str(b2, sizeof b2, want->ndim, want->shape), ref_dtype_name(want->dtype),
                ref_shape_str(b1, sizeof b1, want->ndim, idx), (long long)i, g, w);
    }
  }
  if (bad > 4) test_fail(file, line, "%s: %lld of %lld elements differ", what, (long long)bad, (long long)want->numel);
  return bad == 0;
}
