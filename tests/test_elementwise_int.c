/* test_elementwise_int.c — division with a rounding mode, floor division, C's fmod, shifts, bitwise not and
 * the scalar and reflected scalar forms, against plain C computed here: integers exactly in every width (int8
 * to int64, uint8, uint32, uint64) with negative operands, MIN / -1 and a zero divisor; floats on values whose
 * quotients are exact; broadcasting and size 0; python's sign rules (-7 // 2 == -4, -7 % 2 == 1). */
#include <stdlib.h>

#include "ref.h"
#include "test.h"


/* ---- integers in and out, exactly -------------------------------------------------------------------------- */

static int64_t wrap(tg_dtype dt, int64_t v) {
  switch (dt) {
    case TG_INT8: return (int8_t)(uint8_t)v;
    case TG_INT16: return (int16_t)(uint16_t)v;
    case TG_INT32: return (int32_t)(uint32_t)v;
    case TG_UINT8: return (uint8_t)v;
    case TG_UINT16: return (uint16_t)v;
    case TG_UINT32: return (uint32_t)v;
    default: return v;  /* int64; uint64 as its bits */
  }
}

static tg_tensor *from_i64(tg_dtype dt, int ndim, const int64_t *shape, const int64_t *v) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  size_t sz = ref_dtype_size(dt);
  unsigned char *buf = malloc((size_t)n * sz + 1);
  for (int64_t i = 0; i < n; i++) {
    int64_t w = wrap(dt, v[i]);
    if (sz == 1) { uint8_t x = (uint8_t)w; memcpy(buf + i, &x, 1); }
    if (sz == 2) { uint16_t x = (uint16_t)w; memcpy(buf + 2 * i, &x, 2); }
    if (sz == 4) { uint32_t x = (uint32_t)w; memcpy(buf + 4 * i, &x, 4); }
    if (sz == 8) memcpy(buf + 8 * i, &w, 8);
  }
  tg_tensor *t = tg_from_data(dt, ndim, shape, buf, (size_t)n * sz);
  free(buf);
  return t;
}

/* t's values (n of them, dtype dt) against want (wrapped to dt), exactly */
static void check_ints(const char *what, tg_tensor *t, tg_dtype dt, int64_t n, const int64_t *want, const char *file,
                       int line) {
  if (!t) { test_fail(file, line, "%s: NULL: %s", what, tg_error()); return; }
  if (tg_dtype_of(t) != dt) { test_fail(file, line, "%s: dtype %s, want %s", what, ref_dtype_name(tg_dtype_of(t)), ref_dtype_name(dt)); return; }
  size_t sz = ref_dtype_size(dt);
  unsigned char *buf = malloc((size_t)n * sz + 1);
  if (tg_to_host(t, buf, (size_t)n * sz) != TG_OK) {
    test_fail(file, line, "%s: to_host: %s", what, tg_error());
    free(buf);
    return;
  }
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 4; i++) {
    int64_t g = 0;
    bool s = !ref_is_unsigned(dt);
    if (sz == 1) g = s ? (int64_t)((int8_t *)buf)[i] : (int64_t)buf[i];
    if (sz == 2) { uint16_t x; memcpy(&x, buf + 2 * i, 2); g = s ? (int64_t)(int16_t)x : (int64_t)x; }
    if (sz == 4) { uint32_t x; memcpy(&x, buf + 4 * i, 4); g = s ? (int64_t)(int32_t)x : (int64_t)x; }
    if (sz == 8) memcpy(&g, buf + 8 * i, 8);
    if (g != wrap(dt, want[i])) {
      test_fail(file, line, "%s [%lld]: got %lld want %lld", what, (long long)i, (long long)g, (long long)wrap(dt, want[i]));
      bad++;
    }
  }
  free(buf);
}
#define CHECK_INTS(what, t, dt, n, want) check_ints(what, t, dt, n, want, __FILE__, __LINE__)

static int64_t dt_min(tg_dtype dt) {
  switch (dt) {
    case TG_INT8: return INT8_MIN;
    case TG_INT16: return INT16_MIN;
    case TG_INT32: return INT32_MIN;
    case TG_INT64: return INT64_MIN;
    default: return 0;
  }
}
static int64_t dt_max(tg_dtype dt) {
  switch (dt) {
    case TG_INT8: return INT8_MAX;
    case TG_INT16: return INT16_MAX;
    case TG_INT32: return INT32_MAX;
    case TG_UINT8: return UINT8_MAX;
    case TG_UINT32: return UINT32_MAX;
    default: return INT64_MAX;
  }
}

/* C's quotient and remainder in dt with the library's guards: x / 0 = 0, x % 0 = 0, MIN / -1 = MIN */
static int64_t c_div(tg_dtype dt, int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (ref_is_unsigned(dt)) return (int64_t)((uint64_t)wrap(dt, a) / (uint64_t)wrap(dt, b));
  if (b == -1) return wrap(dt, (int64_t)(0 - (uint64_t)a));
  return a / b;
}
static int64_t c_mod(tg_dtype dt, int64_t a, int64_t b) {
  if (b == 0 || (b == -1 && !ref_is_unsigned(dt))) return 0;
  if (ref_is_unsigned(dt)) return (int64_t)((uint64_t)wrap(dt, a) % (uint64_t)wrap(dt, b));
  return a % b;
}
static int64_t py_floordiv(tg_dtype dt, int64_t a, int64_t b) {
  int64_t q = c_div(dt, a, b), r = c_mod(dt, a, b);
  return r != 0 && ((r < 0) != (b < 0)) && !ref_is_unsigned(dt) ? q - 1 : q;
}

/* a (16) x b (16): the edges of dt and random values of both signs, as (16, 1) against (1, 16) */
static void int_operands(tg_dtype dt, int64_t *a, int64_t *b) {
  int64_t lo = dt_min(dt), hi = dt_max(dt);
  int64_t e[8] = {lo, hi, -1, 0, 1, 7, -7, 2};
  for (int i = 0; i < 16; i++) {
    int64_t r = (int64_t)(ref_next() % 2001) - 1000;
    a[i] = i < 8 ? e[i] : (hi < 1000 ? r % (hi + 1) : r);
    b[i] = i < 8 ? e[(i + 2) % 8] : (hi < 1000 ? (r / 3) % (hi + 1) : r / 3);
    if (ref_is_unsigned(dt)) a[i] = wrap(dt, a[i]), b[i] = wrap(dt, b[i]);
  }
}

static const tg_dtype INT_DTS[] = {TG_INT8, TG_INT16, TG_INT32, TG_INT64, TG_UINT8, TG_UINT32};

REF_TEST(test_ei_int_division_every_width) {
  for (size_t k = 0; k < sizeof INT_DTS / sizeof INT_DTS[0]; k++) {
    tg_dtype dt = INT_DTS[k];
    int64_t a[16], b[16], fl[256], tr[256], fm[256];
    int_operands(dt, a, b);
    for (int i = 0; i < 16; i++)
      for (int j = 0; j < 16; j++) {
        int64_t x = wrap(dt, a[i]), y = wrap(dt, b[j]);
        fl[i * 16 + j] = py_floordiv(dt, x, y);
        tr[i * 16 + j] = c_div(dt, x, y);
        fm[i * 16 + j] = c_mod(dt, x, y);
      }
    tg_tensor *ta = from_i64(dt, 2, (int64_t[]){16, 1}, a), *tb = from_i64(dt, 2, (int64_t[]){1, 16}, b);
    char what[64];
    snprintf(what, sizeof what, "floordiv %s", ref_dtype_name(dt));
    CHECK_INTS(what, tg_floordiv(ta, tb), dt, 256, fl);
    snprintf(what, sizeof what, "div floor %s", ref_dtype_name(dt));
    CHECK_INTS(what, tg_div_mode(ta, tb, TG_ROUND_FLOOR), dt, 256, fl);
    snprintf(what, sizeof what, "div trunc %s", ref_dtype_name(dt));
    CHECK_INTS(what, tg_div_mode(ta, tb, TG_ROUND_TRUNC), dt, 256, tr);
    snprintf(what, sizeof what, "fmod %s", ref_dtype_name(dt));
    CHECK_INTS(what, tg_fmod(ta, tb), dt, 256, fm);
  }
}

/* test_ops' test_div_rounding_mode values: python's // and torch's trunc on ints, and on floats */
REF_TEST(test_ei_div_modes_tinygrad_values) {
  static const int64_t num[7] = {5, 6, 7, 0, -5, -6, -7};
  static const int64_t dens[10] = {-10, -5, -3, -2, -1, 1, 2, 3, 5, 10};
  for (int k = 0; k < 10; k++) {
    int64_t fl[7], tr[7];
    double ffl[7], ftr[7], ftrue[7];
    for (int i = 0; i < 7; i++) {
      fl[i] = py_floordiv(TG_INT32, num[i], dens[k]);
      tr[i] = num[i] / dens[k];
      ffl[i] = floor((double)num[i] / (double)dens[k]);
      ftr[i] = trunc((double)num[i] / (double)dens[k]);
      ftrue[i] = (double)num[i] / (double)dens[k];
    }
    tg_tensor *ia = from_i64(TG_INT32, 1, (int64_t[]){7}, num), *ib = from_i64(TG_INT32, 1, (int64_t[]){1}, &dens[k]);
    CHECK_INTS("int // int", tg_div_mode(ia, ib, TG_ROUND_FLOOR), TG_INT32, 7, fl);
    CHECK_INTS("int trunc int", tg_div_mode(ia, ib, TG_ROUND_TRUNC), TG_INT32, 7, tr);
    CHECK_REF("int / int", tg_div_mode(ia, ib, TG_ROUND_NONE), ref_from(TG_FLOAT32, SHAPE(7), ftrue));
    CHECK_INTS("int // scalar", tg_floordiv_scalar(ia, (double)dens[k]), TG_INT32, 7, fl);
    tg_tensor *fa = tg_cast(ia, TG_FLOAT32), *fb = tg_cast(ib, TG_FLOAT32);
    CHECK_REF("float // float", tg_div_mode(fa, fb, TG_ROUND_FLOOR), ref_from(TG_FLOAT32, SHAPE(7), ffl));
    CHECK_REF("float trunc float", tg_div_mode(fa, fb, TG_ROUND_TRUNC), ref_from(TG_FLOAT32, SHAPE(7), ftr));
    CHECK_REF("int // float", tg_div_mode(ia, fb, TG_ROUND_FLOOR), ref_from(TG_FLOAT32, SHAPE(7), ffl));
    CHECK_REF("float // int", tg_floordiv(fa, ib), ref_from(TG_FLOAT32, SHAPE(7), ffl));
  }
  /* bool divides as float32 */
  tg_tensor *t = ref_to_tg(ref_from(TG_BOOL, SHAPE(2), (double[]){1, 1}));
  CHECK_REF("bool // bool", tg_floordiv(t, t), ref_from(TG_FLOAT32, SHAPE(2), (double[]){1, 1}));
  CHECK(tg_div_mode(t, t, (tg_rounding_mode)9) == NULL && strstr(tg_error(), "tg_div_mode"), "bad mode: %s", tg_error());
  /* uint64 keeps every bit (test_ops: 2^64 - 1 trunc-divided by 1) */
  int64_t big = -1, one = 1;
  CHECK_INTS("uint64 trunc", tg_div_mode(from_i64(TG_UINT64, 0, NULL, &big), from_i64(TG_UINT64, 0, NULL, &one), TG_ROUND_TRUNC),
             TG_UINT64, 1, &big);
}

static double r_fmod(double a, double b) { return fmod(a, b); }
static double r_floordiv(double a, double b) { return floor(a / b); }

REF_TEST(test_ei_float_floordiv_fmod) {
  /* multiples of 1/4: the quotients and remainders are exact, so C's fmod is the reference */
  ref_arr *a = ref_new(TG_FLOAT32, SHAPE(12, 1)), *b = ref_new(TG_FLOAT32, SHAPE(1, 10));
  for (int i = 0; i < 12; i++) a->data[i] = (double)((int64_t)(ref_next() % 161) - 80) / 4;
  for (int j = 0; j < 10; j++) {
    double v = (double)((int64_t)(ref_next() % 41) - 20) / 4;
    b->data[j] = v == 0 ? 0.75 : v;
  }
  ref_arr *ab = ref_expand(a, 2, (int64_t[]){12, 10}), *bb = ref_expand(b, 2, (int64_t[]){12, 10});
  ref_arr *wf = ref_new(TG_FLOAT32, SHAPE(12, 10)), *wm = ref_new(TG_FLOAT32, SHAPE(12, 10));
  for (int64_t i = 0; i < 120; i++) {
    wf->data[i] = r_floordiv(ab->data[i], bb->data[i]);
    wm->data[i] = r_fmod(ab->data[i], bb->data[i]);
  }
  tg_tensor *ta = ref_to_tg(a), *tb = ref_to_tg(b);
  CHECK_REF("float floordiv", tg_floordiv(ta, tb), wf);
  CHECK_REF("float fmod", tg_fmod(ta, tb), wm);
  ref_arr *d = ref_cast(ab, TG_FLOAT64), *e = ref_cast(bb, TG_FLOAT64);
  CHECK_REF("float64 fmod", tg_fmod(ref_to_tg(d), ref_to_tg(e)), ref_cast(wm, TG_FLOAT64));
  /* edges: inf and NaN operands, zero divisors */
  static const double x[] = {5, -5, 5, -5, INFINITY, -INFINITY, NAN, 5, 0, 5, -5, 7.5};
  static const double y[] = {INFINITY, INFINITY, -INFINITY, -INFINITY, 2, 2, 2, NAN, 0, 0, 0, -2};
  ref_arr *xa = ref_from(TG_FLOAT32, SHAPE(12), x), *ya = ref_from(TG_FLOAT32, SHAPE(12), y);
  ref_arr *em = ref_new(TG_FLOAT32, SHAPE(12)), *ef = ref_new(TG_FLOAT32, SHAPE(12));
  for (int i = 0; i < 12; i++) em->data[i] = fmod(x[i], y[i]), ef->data[i] = floor(x[i] / y[i]);
  CHECK_REF("fmod edges", tg_fmod(ref_to_tg(xa), ref_to_tg(ya)), em);
  CHECK_REF("floordiv edges", tg_floordiv(ref_to_tg(xa), ref_to_tg(ya)), ef);
  /* test_ops' test_fmod, with an int operand and scalars */
  static const double fa[7] = {-4, 7, 5, 4, -7, 8, -9}, fb[7] = {2, -3, 8, -2, 3, 5, -5};
  ref_arr *ia = ref_from(TG_INT32, SHAPE(7), fa), *fba = ref_from(TG_FLOAT32, SHAPE(7), fb);
  ref_arr *w1 = ref_new(TG_FLOAT32, SHAPE(7)), *w2 = ref_new(TG_INT32, SHAPE(7)), *w3 = ref_new(TG_FLOAT32, SHAPE(7));
  for (int i = 0; i < 7; i++) w1->data[i] = fmod(fa[i], fb[i]), w2->data[i] = fmod(fa[i], 2), w3->data[i] = fmod(fa[i], 3.5);
  CHECK_REF("fmod int, float", tg_fmod(ref_to_tg(ia), ref_to_tg(fba)), w1);
  CHECK_REF("fmod int, 2", tg_fmod_scalar(ref_to_tg(ia), 2), w2);
  CHECK_REF("fmod int, 3.5", tg_fmod_scalar(ref_to_tg(ia), 3.5), w3);
  ref_arr *z = ref_new(TG_FLOAT32, SHAPE(0, 10));
  CHECK_REF("fmod size 0", tg_fmod(ref_to_tg(z), tb), z);
  CHECK_REF("floordiv size 0", tg_floordiv(ref_to_tg(z), tb), z);
}

/* ---- shifts and bitwise not ------------------------------------------------------------------------------------ */

REF_TEST(test_ei_shifts) {
  /* test_ops' unsigned data, by scalars and by a tensor */
  int64_t u[6] = {0, 1, 2, 1 << 8, 1 << 16, 1 << 30}, want[6];
  tg_tensor *tu = from_i64(TG_UINT32, 2, (int64_t[]){2, 3}, u);
  static const int64_t sh[4] = {0, 2, 31, 4};
  for (int k = 0; k < 4; k++) {
    for (int i = 0; i < 6; i++) want[i] = (int64_t)(((uint64_t)u[i] << sh[k]) & 0xFFFFFFFFu);
    CHECK_INTS("uint32 << s", tg_lshift_scalar(tu, sh[k]), TG_UINT32, 6, want);
    for (int i = 0; i < 6; i++) want[i] = (int64_t)((uint64_t)u[i] >> sh[k]);
    CHECK_INTS("uint32 >> s", tg_rshift_scalar(tu, sh[k]), TG_UINT32, 6, want);
  }
  int64_t amt[3] = {0, 2, 4};
  tg_tensor *ta = from_i64(TG_UINT32, 1, (int64_t[]){3}, amt);
  for (int i = 0; i < 6; i++) want[i] = (int64_t)(((uint64_t)u[i] << amt[i % 3]) & 0xFFFFFFFFu);
  CHECK_INTS("uint32 << tensor", tg_lshift(tu, ta), TG_UINT32, 6, want);
  /* signed: arithmetic right shift, two's complement left shift (test_ops' signed data) */
  int64_t s[8] = {-1, -3, 1, 7, 0, INT32_MIN, INT32_MAX, -1}, sw[8];
  tg_tensor *ts = from_i64(TG_INT32, 2, (int64_t[]){2, 4}, s);
  static const int64_t ssh[4] = {0, 2, 8, 31};
  for (int k = 0; k < 4; k++) {
    for (int i = 0; i < 8; i++) sw[i] = (int32_t)((uint32_t)s[i] << ssh[k]);
    CHECK_INTS("int32 << s", tg_lshift_scalar(ts, ssh[k]), TG_INT32, 8, sw);
    for (int i = 0; i < 8; i++) sw[i] = (int64_t)floor((double)s[i] / ldexp(1, (int)ssh[k]));
    CHECK_INTS("int32 >> s", tg_rshift_scalar(ts, ssh[k]), TG_INT32, 8, sw);
  }
  tg_tensor *tsh = from_i64(TG_INT32, 1, (int64_t[]){4}, ssh);
  for (int i = 0; i < 8; i++) sw[i] = (int64_t)floor((double)s[i] / ldexp(1, (int)ssh[i % 4]));
  CHECK_INTS("int32 >> tensor", tg_rshift(ts, tsh), TG_INT32, 8, sw);
  /* narrow types wrap; amounts past the width or negative give 0 (-1 for a negative value shifted right) */
  int64_t b8[4] = {1, -1, 100, -100}, w8[4];
  tg_tensor *t8 = from_i64(TG_INT8, 1, (int64_t[]){4}, b8);
  for (int i = 0; i < 4; i++) w8[i] = (int8_t)(uint8_t)((uint64_t)b8[i] << 3);
  CHECK_INTS("int8 << 3", tg_lshift_scalar(t8, 3), TG_INT8, 4, w8);
  int64_t zeros[4] = {0, 0, 0, 0}, signs[4] = {0, -1, 0, -1};
  CHECK_INTS("int8 << 8", tg_lshift_scalar(t8, 8), TG_INT8, 4, zeros);
  CHECK_INTS("int8 >> 9", tg_rshift_scalar(t8, 9), TG_INT8, 4, signs);
  CHECK_INTS("int8 << -1", tg_lshift_scalar(t8, -1), TG_INT8, 4, zeros);
  CHECK_INTS("int8 >> -1", tg_rshift_scalar(t8, -1), TG_INT8, 4, signs);
  int64_t i64[2] = {1, -5}, w64[2] = {(int64_t)1 << 40, -5 * ((int64_t)1 << 40)};
  CHECK_INTS("int64 << 40", tg_lshift_scalar(from_i64(TG_INT64, 1, (int64_t[]){2}, i64), 40), TG_INT64, 2, w64);
  /* v << t, v >> t */
  int64_t e[3] = {0, 3, 5}, we[3] = {1, 8, 32}, wr[3] = {96, 12, 3};
  tg_tensor *te = from_i64(TG_INT32, 1, (int64_t[]){3}, e);
  CHECK_INTS("1 << t", tg_rlshift_scalar(te, 1), TG_INT32, 3, we);
  CHECK_INTS("96 >> t", tg_rrshift_scalar(te, 96), TG_INT32, 3, wr);
  /* floats and bool are refused (tinygrad and PyTorch raise) */
  tg_tensor *f = tg_scalar(TG_FLOAT32, 1);
  CHECK(tg_lshift_scalar(f, 2) == NULL && strstr(tg_error(), "tg_lshift"), "float << : %s", tg_error());
  CHECK(tg_rshift(tu, tg_cast(ta, TG_FLOAT32)) == NULL, "uint32 >> float refused");
  CHECK(tg_lshift_scalar(tg_scalar(TG_BOOL, 1), 1) == NULL || tg_dtype_of(tg_lshift_scalar(tg_scalar(TG_BOOL, 1), 1)) == TG_INT32,
        "bool << int: refused or int32");
}

REF_TEST(test_ei_bitwise_not_and_scalars) {
  static const tg_dtype dts[] = {TG_INT8, TG_UINT8, TG_INT16, TG_INT32, TG_INT64, TG_UINT32, TG_UINT64};
  int64_t v[5] = {0, 1, -8, 32, 255}, w[5];
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
    for (int i = 0; i < 5; i++) w[i] = ~wrap(dts[k], v[i]);
    CHECK_INTS(ref_dtype_name(dts[k]), tg_bitwise_not(from_i64(dts[k], 1, (int64_t[]){5}, v)), dts[k], 5, w);
  }
  CHECK_REF("~bool", tg_bitwise_not(ref_to_tg(ref_from(TG_BOOL, SHAPE(2), (double[]){1, 0}))),
            ref_from(TG_BOOL, SHAPE(2), (double[]){0, 1}));
  CHECK(tg_bitwise_not(tg_scalar(TG_FLOAT32, 1)) == NULL && strstr(tg_error(), "tg_bitwise_not"), "float refused");
  /* test_ops' and / or / xor with 0x1337 on int32, and uint64 & 0xFFFFFFFF keeping 64 bits */
  int64_t d[6] = {1, -8, 1, 32, 1, 6}, wa[6], wo[6], wx[6];
  for (int i = 0; i < 6; i++) wa[i] = d[i] & 0x1337, wo[i] = d[i] | 0x1337, wx[i] = d[i] ^ 0x1337;
  tg_tensor *td = from_i64(TG_INT32, 2, (int64_t[]){2, 3}, d);
  CHECK_INTS("& 0x1337", tg_bitwise_and_scalar(td, 0x1337), TG_INT32, 6, wa);
  CHECK_INTS("| 0x1337", tg_bitwise_or_scalar(td, 0x1337), TG_INT32, 6, wo);
  CHECK_INTS("^ 0x1337", tg_bitwise_xor_scalar(td, 0x1337), TG_INT32, 6, wx);
  int64_t all = -1, low = 0xFFFFFFFF;
  CHECK_INTS("uint64 & 0xFFFFFFFF", tg_bitwise_and_scalar(from_i64(TG_UINT64, 0, NULL, &all), 0xFFFFFFFF), TG_UINT64, 1, &low);
  int64_t big = INT64_MAX - 5, bw = (INT64_MAX - 5) ^ 1;
  CHECK_INTS("int64 ^ 1 exact", tg_bitwise_xor_scalar(from_i64(TG_INT64, 0, NULL, &big), 1), TG_INT64, 1, &bw);
}

/* ---- scalar and reflected scalar forms ------------------------------------------------------------------------- */

static double py_mod(double a, double b) { double r = fmod(a, b); return r != 0 && ((r < 0) != (b < 0)) ? r + b : r; }

REF_TEST(test_ei_reflected_scalars) {
  ref_arr *x = ref_rand(TG_FLOAT32, SHAPE(5, 6), -3, 3);
  tg_tensor *tx = ref_to_tg(x);
  ref_arr *w = ref_new(TG_FLOAT32, x->ndim, x->shape);
  for (int64_t i = 0; i < x->numel; i++) w->data[i] = 2 - x->data[i];
  CHECK_REF("2 - x", tg_rsub_scalar(tx, 2), w);
  for (int64_t i = 0; i < x->numel; i++) w->data[i] = ref_round(TG_FLOAT32, 2 / x->data[i]);
  CHECK_REF("2 / x", tg_rdiv_scalar(tx, 2), w);
  for (int64_t i = 0; i < x->numel; i++) w->data[i] = ref_round(TG_FLOAT32, pow(2, x->data[i]));
  CHECK_REF("2 ** x", tg_rpow_scalar(tx, 2), w);
  for (int64_t i = 0; i < x->numel; i++) w->data[i] = ref_round(TG_FLOAT32, pow(5.5, x->data[i]));
  CHECK_REF("5.5 ** x", tg_rpow_scalar(tx, 5.5), w);
  for (int64_t i = 0; i < x->numel; i++) w->data[i] = ref_round(TG_FLOAT32, floor(7 / x->data[i]));
  CHECK_REF("7 // x", tg_rfloordiv_scalar(tx, 7), w);
  /* integer tensors: weak integral scalars keep the dtype, fractional ones make float32 */
  static const double iv[7] = {-4, 7, 5, 4, -7, 8, -9};
  int64_t ii[7] = {-4, 7, 5, 4, -7, 8, -9}, w100[7], w2r[7], w7[7];
  tg_tensor *ti = from_i64(TG_INT32, 1, (int64_t[]){7}, ii);
  for (int i = 0; i < 7; i++) {
    w100[i] = (int64_t)py_mod(100, (double)ii[i]);
    w2r[i] = 2 - ii[i];
    w7[i] = py_floordiv(TG_INT32, 7, ii[i]);
  }
  CHECK_INTS("100 % x", tg_rmod_scalar(ti, 100), TG_INT32, 7, w100);
  CHECK_INTS("2 - x int", tg_rsub_scalar(ti, 2), TG_INT32, 7, w2r);
  CHECK_INTS("7 // x int", tg_rfloordiv_scalar(ti, 7), TG_INT32, 7, w7);
  ref_arr *ia = ref_from(TG_INT32, SHAPE(7), iv);
  ref_arr *wm = ref_new(TG_FLOAT32, SHAPE(7)), *wd = ref_new(TG_FLOAT32, SHAPE(7)), *wm35 = ref_new(TG_FLOAT32, SHAPE(7));
  for (int i = 0; i < 7; i++) {
    wm->data[i] = ref_round(TG_FLOAT32, py_mod(100.5, iv[i]));
    wd->data[i] = ref_round(TG_FLOAT32, 2 / iv[i]);
    wm35->data[i] = ref_round(TG_FLOAT32, py_mod(iv[i], 3.5));
  }
  CHECK_REF("100.5 % x int", tg_rmod_scalar(ref_to_tg(ia), 100.5), wm);
  CHECK_REF("2 / x int", tg_rdiv_scalar(ref_to_tg(ia), 2), wd);
  CHECK_REF("x % 3.5 int", tg_mod_scalar(ref_to_tg(ia), 3.5), wm35);
  int64_t wm3[7];
  for (int i = 0; i < 7; i++) wm3[i] = (int64_t)py_mod((double)ii[i], 3);
  CHECK_INTS("x % 3 int", tg_mod_scalar(ti, 3), TG_INT32, 7, wm3);
  int64_t e[5] = {0, 1, 2, 3, 10}, wp[5] = {1, 3, 9, 27, 59049};
  CHECK_INTS("3 ** x int", tg_rpow_scalar(from_i64(TG_INT32, 1, (int64_t[]){5}, e), 3), TG_INT32, 5, wp);
  ref_arr *pe = ref_from(TG_INT32, SHAPE(6), (double[]){-2, -1, 0, 1, 2, 3}), *pw = ref_new(TG_FLOAT32, SHAPE(6));
  for (int i = 0; i < 6; i++) pw->data[i] = ref_round(TG_FLOAT32, pow(0.7, pe->data[i]));
  CHECK_REF("0.7 ** x int -> float32", tg_rpow_scalar(ref_to_tg(pe), 0.7), pw);
  /* tinygrad refuses a negative integer base over an integer exponent ("base needs to be float") */
  tg_tensor *neg_base = tg_rpow_scalar(ti, -2);
  CHECK(!neg_base && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "tg_rpow_scalar"), "-2 ** int x: %s",
        neg_base ? "allowed" : tg_error());
  tg_error_clear();
  int64_t wt[7];
  for (int i = 0; i < 7; i++) wt[i] = ii[i] / 2;
  CHECK_INTS("idiv scalar", tg_idiv_scalar(ti, 2), TG_INT32, 7, wt);
}

REF_TEST(test_ei_comparison_scalars) {
  static const double v[] = {-2, 0.5, 1, 1.5, 2, NAN, INFINITY};
  ref_arr *x = ref_from(TG_FLOAT32, SHAPE(7), v);
  tg_tensor *t = ref_to_tg(x);
  ref_arr *lt = ref_new(TG_BOOL, SHAPE(7)), *le = ref_new(TG_BOOL, SHAPE(7)), *gt = ref_new(TG_BOOL, SHAPE(7));
  ref_arr *ge = ref_new(TG_BOOL, SHAPE(7)), *eq = ref_new(TG_BOOL, SHAPE(7)), *ne = ref_new(TG_BOOL, SHAPE(7));
  for (int i = 0; i < 7; i++) {
    lt->data[i] = v[i] < 1.5, le->data[i] = v[i] <= 1.5, gt->data[i] = v[i] > 1.5;
    ge->data[i] = v[i] >= 1.5, eq->data[i] = v[i] == 1.5, ne->data[i] = v[i] != 1.5;
  }
  CHECK_REF("< 1.5", tg_lt_scalar(t, 1.5), lt);
  CHECK_REF("> 1.5", tg_gt_scalar(t, 1.5), gt);
  CHECK_REF("== 1.5", tg_eq_scalar(t, 1.5), eq);
  CHECK_REF("!= 1.5", tg_ne_scalar(t, 1.5), ne);
  /* <= and >= on NaN are tg_le's and tg_ge's business: the first five values only */
  tg_tensor *t5 = tg_shrink(t, 1, (int64_t[]){0, 5});
  CHECK_REF("<= 1.5", tg_le_scalar(t5, 1.5), ref_shrink(le, (int64_t[]){0, 5}));
  CHECK_REF(">= 1.5", tg_ge_scalar(t5, 1.5), ref_shrink(ge, (int64_t[]){0, 5}));
  /* an int tensor against a fractional scalar compares in float: 1 < 1.5 */
  int64_t iv[3] = {1, 2, 3}, wl[3] = {1, 0, 0}, we[3] = {0, 1, 0};
  tg_tensor *ti = from_i64(TG_INT32, 1, (int64_t[]){3}, iv);
  CHECK_INTS("int < 1.5", tg_lt_scalar(ti, 1.5), TG_BOOL, 3, wl);
  CHECK_INTS("int == 2", tg_eq_scalar(ti, 2), TG_BOOL, 3, we);
}

/* python modulo of floats at the infinities (python, numpy, PyTorch): a finite a modulo an infinite b is a when
 * a is 0 or of b's sign, else b (-3 % inf is inf); an infinite a or a NaN gives NaN; finite values as before */
TEST(test_float_mod_at_infinities_as_python) {
  const double a[] = {-3, 3, -1, 1, 0, 2.5, INFINITY, -INFINITY, NAN, 1, -7.5, 7.5};
  const double b[] = {INFINITY, INFINITY, -INFINITY, -INFINITY, INFINITY, -INFINITY, 2, 2, 2, NAN, 2, -2};
  const int n = (int)(sizeof a / sizeof a[0]);
  tg_dtype dts[] = {TG_FLOAT32, TG_FLOAT64};
  for (int k = 0; k < 2; k++) {
    int64_t shape[1] = {n};
    tg_tensor *ta = tg_cast(tg_from_data(TG_FLOAT64, 1, shape, a, sizeof a), dts[k]);
    tg_tensor *tb = tg_cast(tg_from_data(TG_FLOAT64, 1, shape, b, sizeof b), dts[k]);
    double got[12];
    tg_tensor *r = tg_cast(tg_mod(ta, tb), TG_FLOAT64);
    CHECK(r && tg_to_host(r, got, sizeof got) == TG_OK, "%s mod: %s", tg_dtype_name(dts[k]), tg_error());
    for (int i = 0; r && i < n; i++) {
      double want = py_mod(a[i], b[i]);
      bool same = isnan(want) ? isnan(got[i]) : fabs(got[i] - want) <= 1e-6 * fabs(want) || got[i] == want;
      CHECK(same, "%s: %g %% %g = %g, want %g", tg_dtype_name(dts[k]), a[i], b[i], got[i], want);
    }
    tg_free(r);
    tg_free(ta);
    tg_free(tb);
  }
}
