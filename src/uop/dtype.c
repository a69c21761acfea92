/* dtype.c — tinygrad's dtypes: sizes, names, C names, value limits and the promotion lattice. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "uop/uop.h"

typedef struct dtype_info { const char *name, *cname; size_t size; } dtype_info;
static const dtype_info info[TG_DTYPE_COUNT] = {
    [TG_BOOL] = {"bool", "_Bool", 1},
    [TG_INT8] = {"int8", "signed char", 1},       [TG_INT16] = {"int16", "short", 2},
    [TG_INT32] = {"int32", "int", 4},             [TG_INT64] = {"int64", "long long", 8},
    [TG_UINT8] = {"uint8", "unsigned char", 1},   [TG_UINT16] = {"uint16", "unsigned short", 2},
    [TG_UINT32] = {"uint32", "unsigned int", 4},  [TG_UINT64] = {"uint64", "unsigned long long", 8},
    [TG_FLOAT16] = {"float16", "tg_half", 2},      [TG_BFLOAT16] = {"bfloat16", "unsigned short", 2},
    [TG_FLOAT32] = {"float32", "float", 4},       [TG_FLOAT64] = {"float64", "double", 8},
};

static bool valid(tg_dtype dt) { return (unsigned)dt < TG_DTYPE_COUNT; }
const char *tg_dtype_name(tg_dtype dt) { return valid(dt) ? info[dt].name : "?"; }
size_t tg_dtype_size(tg_dtype dt) { return valid(dt) ? info[dt].size : 0; }
const char *dtype_c_name(tg_dtype dt) { return valid(dt) ? info[dt].cname : "void"; }
bool dtype_is_float(tg_dtype dt) { return dt >= TG_FLOAT16 && dt <= TG_FLOAT64; }
bool dtype_is_int(tg_dtype dt) { return dt >= TG_INT8 && dt <= TG_UINT64; }
bool dtype_is_unsigned(tg_dtype dt) { return dt >= TG_UINT8 && dt <= TG_UINT64; }

/* tinygrad's promotion lattice: the dtypes each one promotes to directly */
static const tg_dtype parents[TG_DTYPE_COUNT][2] = {
    [TG_BOOL] = {TG_INT8, TG_UINT8},
    [TG_INT8] = {TG_INT16, TG_INT16},       [TG_INT16] = {TG_INT32, TG_INT32},
    [TG_INT32] = {TG_INT64, TG_INT64},      [TG_INT64] = {TG_FLOAT16, TG_BFLOAT16},
    [TG_UINT8] = {TG_INT16, TG_UINT16},     [TG_UINT16] = {TG_INT32, TG_UINT32},
    [TG_UINT32] = {TG_INT64, TG_UINT64},    [TG_UINT64] = {TG_FLOAT16, TG_BFLOAT16},
    [TG_FLOAT16] = {TG_FLOAT32, TG_FLOAT32}, [TG_BFLOAT16] = {TG_FLOAT32, TG_FLOAT32},
    [TG_FLOAT32] = {TG_FLOAT64, TG_FLOAT64}, [TG_FLOAT64] = {TG_FLOAT64, TG_FLOAT64},
};

static unsigned upper_set(tg_dtype dt) {  /* bit set of dt and everything above it */
  unsigned s = 1u << dt;
  if (dt == TG_FLOAT64) return s;
  return s | upper_set(parents[dt][0]) | upper_set(parents[dt][1]);
}

/* tinygrad's priority order, which picks one dtype when the common upper set has no single least one
 * (int64 and uint64 meet at float16 and bfloat16: tinygrad takes float16) */
static const int priority[TG_DTYPE_COUNT] = {
    [TG_BOOL] = 0, [TG_INT8] = 1, [TG_UINT8] = 2, [TG_INT16] = 3, [TG_UINT16] = 4, [TG_INT32] = 5,
    [TG_UINT32] = 6, [TG_INT64] = 7, [TG_UINT64] = 8, [TG_FLOAT16] = 9, [TG_BFLOAT16] = 10,
    [TG_FLOAT32] = 11, [TG_FLOAT64] = 12,
};

/* the lowest-priority dtype both promote to */
tg_dtype dtype_promote(tg_dtype a, tg_dtype b) {
  if (!valid(a) || !valid(b)) return TG_FLOAT32;
  if (a == b) return a;
  unsigned common = upper_set(a) & upper_set(b);
  int best = -1;
  for (int d = 0; d < TG_DTYPE_COUNT; d++)
    if ((common >> d & 1) && (best < 0 || priority[d] < priority[best])) best = d;
  return best < 0 ? TG_FLOAT64 : (tg_dtype)best;
}

double dtype_min(tg_dtype dt) {
  switch (dt) {
    case TG_BOOL: case TG_UINT8: case TG_UINT16: case TG_UINT32: case TG_UINT64: return 0;
    case TG_INT8: return INT8_MIN;
    case TG_INT16: return INT16_MIN;
    case TG_INT32: return INT32_MIN;
    case TG_INT64: return (double)INT64_MIN;
    default: return -INFINITY;
  }
}

double dtype_max(tg_dtype dt) {
  switch (dt) {
    case TG_BOOL: return 1;
    case TG_INT8: return INT8_MAX;
    case TG_INT16: return INT16_MAX;
    case TG_INT32: return INT32_MAX;
    case TG_INT64: return (double)INT64_MAX;
    case TG_UINT8: return UINT8_MAX;
    case TG_UINT16: return UINT16_MAX;
    case TG_UINT32: return UINT32_MAX;
    case TG_UINT64: return (double)UINT64_MAX;
    default: return INFINITY;
  }
}

/* v as a value of dtype dt: floats rounded to their precision, ints truncated and wrapped like C casts */
double dtype_cast_value(tg_dtype dt, double v) {
  switch (dt) {
    case TG_BOOL: return v != 0;
    case TG_FLOAT32: return (double)(float)v;
    case TG_FLOAT16: return isnan(v) ? v : (double)half_to_float(float_to_half((float)v));
    case TG_BFLOAT16: return isnan(v) ? v : (double)bf16_to_float(float_to_bf16((float)v));
    case TG_FLOAT64: return v;
    default: break;
  }
  if (isnan(v) || isinf(v)) return 0;
  double t = trunc(v);
  if (t >= -9.2e18 && t <= 9.2e18) {
    int64_t i = (int64_t)t;
    switch (dt) {
      case TG_INT8: return (int8_t)i;
      case TG_INT16: return (int16_t)i;
      case TG_INT32: return (int32_t)i;
      case TG_UINT8: return (uint8_t)i;
      case TG_UINT16: return (uint16_t)i;
      case TG_UINT32: return (uint32_t)i;
      case TG_UINT64: return (double)(uint64_t)i;
      default: return (double)i;
    }
  }
  return t < 0 ? dtype_min(dt) : dtype_max(dt);
}

/* IEEE half <-> float by hand: clang 14 has no _Float16 on x86 (NOTES) */
float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
  if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else if (exp) bits = sign | ((exp + 112) << 23) | (man << 13);
  else if (!man) bits = sign;
  else {  /* subnormal: normalize */
    int e = -1;
    do { e++; man <<= 1; } while (!(man & 1024));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 1023) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 255, man = x & 0x7fffffu;
  if (exp == 255) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
  int e = (int)exp - 112;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {  /* subnormal or zero, round to nearest even */
    if (e < -10) return (uint16_t)sign;
    man |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;  /* a carry into the exponent is still right */
  return (uint16_t)h;
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {  /* round to nearest even; nan stays nan */
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

int64_t dtype_wrap_int(tg_dtype dt, int64_t v) {
  switch (dt) {
    case TG_BOOL: return v != 0;
    case TG_INT8: return (int8_t)v;
    case TG_INT16: return (int16_t)v;
    case TG_INT32: return (int32_t)v;
    case TG_UINT8: return (uint8_t)v;
    case TG_UINT16: return (uint16_t)v;
    case TG_UINT32: return (uint32_t)v;
    default: return v;
  }
}
