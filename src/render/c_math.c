/* c_math.c — exp2, log2 and sin for vector lanes in generated C, as polynomials: no libm call per lane.
 *
 * Each computes in double precision lanes (float in, float out): with 53 bits the argument reduction and the
 * polynomial are exact enough that the one rounding back to float gives at most 1 ulp, and the double range
 * covers float denormals (exp2 down to 2^-149, log2 of 1e-45) without special scaling. The polynomials are
 * fdlibm's (sin, cos kernels) and Taylor series short enough to stay exact at this width (exp2: 2^f on
 * [-1/2, 1/2] to degree 11; log: 2*atanh(s) to s^15). inf and nan follow C99 Annex F: they fall out of the
 * arithmetic or are selected at the end. sin reduces by pi/2 in three parts (Cody-Waite) for |x| < 2^19; a
 * lane beyond that (rare: sin of a huge argument is noise) takes libm's sinf, behind a branch that skips
 * it when no lane needs it. tests/test_math.c compares all three with libm over the whole float range.
 */
#include "render/render.h"

const char render_c_vec_math[] =
    "typedef double tg_double_v __attribute__((vector_size(2*sizeof(tg_float_v))));\n"
    "static inline tg_double_v tg_bc_double(double s) { return (tg_double_v){} + s; }\n"
    "#define TG_CVD(x) __builtin_convertvector(x, tg_double_v)\n"
    "#define TG_CVF(x) __builtin_convertvector(x, tg_float_v)\n"
    "#define TG_DSEL(m, a, b) ((tg_double_v)(((m) & (tg_long_v)(a)) | (~(m) & (tg_long_v)(b))))\n"
    /* round to nearest even for |x| < 2^51 */
    "static inline tg_double_v tg_rint_d(tg_double_v x) { tg_double_v m = tg_bc_double(6755399441055744.0); "
    "return (x + m) - m; }\n"
    "static inline tg_double_v tg_poly_d(tg_double_v x, const double *c, int n) { tg_double_v r = tg_bc_double(c[0]); "
    "for (int i = 1; i < n; i++) r = r * x + c[i]; return r; }\n"
    /* exp2: 2^n * 2^f, f in [-1/2, 1/2]; |x| clamped to 200 (2^200 is inf and 2^-200 is 0 in float) */
    "static inline tg_float_v tg_exp2_v(tg_float_v xf) {\n"
    "  static const double c[12] = {4.4455382718708101e-10, 7.0549116208011209e-09, 1.0178086009239696e-07,\n"
    "    1.3215486790144305e-06, 1.5252733804059838e-05, 1.5403530393381606e-04, 1.3333558146428441e-03,\n"
    "    9.6181291076284769e-03, 5.5504108664821576e-02, 2.4022650695910069e-01, 6.9314718055994529e-01, 1.0};\n"
    "  tg_double_v x = TG_CVD(xf), hi = tg_bc_double(200.0), lo = tg_bc_double(-200.0);\n"
    "  x = TG_DSEL((tg_long_v)(x > hi), hi, x); x = TG_DSEL((tg_long_v)(x < lo), lo, x);\n"
    "  tg_double_v n = tg_rint_d(x), f = x - n;\n"
    "  tg_double_v p = tg_poly_d(f, c, 12);\n"
    "  tg_long_v e = (__builtin_convertvector(n, tg_long_v) + 1023) << 52;\n"
    "  return TG_CVF(p * (tg_double_v)e);\n"
    "}\n"
    /* log2: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), ln(m) = 2 atanh(s), s = (m-1)/(m+1) */
    "static inline tg_float_v tg_log2_v(tg_float_v xf) {\n"
    "  static const double c[7] = {1.0/13, 1.0/11, 1.0/9, 1.0/7, 1.0/5, 1.0/3, 1.0};\n"
    "  tg_double_v x = TG_CVD(xf);\n"
    "  tg_long_v b = (tg_long_v)x;\n"
    "  tg_long_v e = ((b >> 52) & 0x7ff) - 1023;\n"
    "  tg_double_v m = (tg_double_v)((b & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);\n"
    "  tg_long_v big = (tg_long_v)(m > tg_bc_double(1.4142135623730951));\n"
    "  m = TG_DSEL(big, m * 0.5, m); e = e - big;\n"
    "  tg_double_v s = (m - 1.0) / (m + 1.0), s2 = s * s;\n"
    "  tg_double_v r = (2.0 * 1.4426950408889634) * s * tg_poly_d(s2, c, 7) + __builtin_convertvector(e, tg_double_v);\n"
    "  tg_float_v rf = TG_CVF(r), inf = tg_bc_float(__builtin_inff());\n"
    "  rf = tg_sel_float(xf < tg_bc_float(0.0f), tg_bc_float(__builtin_nanf(\"\")), rf);\n"
    "  rf = tg_sel_float(xf == tg_bc_float(0.0f), -inf, rf);\n"
    "  rf = tg_sel_float(xf == inf, inf, rf);\n"
    "  return tg_sel_float(xf != xf, xf, rf);\n"
    "}\n"
    /* sin: x = k pi/2 + r, |r| <= pi/4, by the quadrant k&3 one of sin(r), cos(r), -sin(r), -cos(r) */
    "static inline tg_float_v tg_sin_v(tg_float_v xf) {\n"
    "  static const double s[6] = {1.58969099521155010221e-10, -2.50507602534068634195e-08,\n"
    "    2.75573137070700676789e-06, -1.98412698298579493134e-04, 8.33333333332248946124e-03, -1.66666666666666324348e-01};\n"
    "  static const double k[6] = {-1.13596475577881948265e-11, 2.08757232129817482790e-09, -2.75573143513906633035e-07,\n"
    "    2.48015872894767294178e-05, -1.38888888888741095749e-03, 4.16666666666666019037e-02};\n"
    "  tg_double_v x = TG_CVD(xf);\n"
    "  tg_double_v q = tg_rint_d(x * 6.36619772367581382433e-01);\n"
    "  tg_double_v r = ((x - q * 1.57079632673412561417e+00) - q * 6.07710050630396597660e-11) - q * 2.02226624871116645580e-21;\n"
    "  tg_double_v z = r * r;\n"
    "  tg_double_v sn = r + r * z * tg_poly_d(z, s, 6);\n"
    "  tg_double_v cs = 1.0 - 0.5 * z + z * z * tg_poly_d(z, k, 6);\n"
    "  tg_long_v qi = __builtin_convertvector(q, tg_long_v);\n"
    "  tg_double_v v = TG_DSEL(-(qi & 1), cs, sn);\n"
    "  v = TG_DSEL(-((qi >> 1) & 1), -v, v);\n"
    "  tg_float_v res = TG_CVF(v);\n"
    "  tg_int_v huge = (tg_float_v)((tg_int_v)xf & 0x7fffffff) >= tg_bc_float(524288.0f);\n"
    "  int any = 0;\n"
    "  for (int l = 0; l < (int)(sizeof(tg_int_v) / sizeof(int)); l++) any |= huge[l];\n"
    "  if (__builtin_expect(any, 0))\n"
    "    for (int l = 0; l < (int)(sizeof(tg_int_v) / sizeof(int)); l++) if (huge[l]) res[l] = __builtin_sinf(xf[l]);\n"
    "  return res;\n"
    "}\n";
