/* c_math.c — exp2, log2 and sin for vector lanes in generated C, as polynomials: no libm call per lane.
 *
 * Each computes in double precision lanes (float in, float out): with 53 bits the argument reduction and the
 * polynomial are exact enough that the one rounding back to float gives at most 1 ulp, and the double range
 * covers float denormals (exp2 down to 2^-149, log2 of 1e-45) without special scaling. The polynomials are
 * fdlibm's (sin, cos kernels) and Taylor series short enough to stay exact at this width (exp2: 2^f on
 * [-1/2, 1/2] to degree 7; log: 2*atanh(s) to s^13). inf and nan follow C99 Annex F: they fall out of the
 * arithmetic or are selected at the end. sin reduces by pi/2 in three parts (Cody-Waite) for |x| < 2^19; a
 * lane beyond that (rare: sin of a huge argument is noise) takes libm's sinf, behind a branch that skips
 * it when no lane needs it. tests/test_math.c compares all three with libm over the whole float range.
 */
#include "render/render.h"

const char render_c_vec_math[] =
    /* the double lanes (tg_float_h, tg_double_h, tg_long_h, TG_BY_HALVES) come from the renderer, which
     * knows the lane count: half a float vector each, so a half is one machine vector (8 doubles for
     * AVX-512), split and joined with __builtin_shufflevector. A 16-double type is lowered by gcc 12 lane by
     * lane for compares; a union to split it went through memory (store-forwarding stalls): 3.3 ns per exp2
     * element against 0.4 with shuffles. */
    "#define TG_AI static inline __attribute__((always_inline))\n"
    "TG_AI tg_double_h tg_bc_dh(double s) { return (tg_double_h){} + s; }\n"
    "#define TG_CVD(x) __builtin_convertvector(x, tg_double_h)\n"
    "#define TG_CVF(x) __builtin_convertvector(x, tg_float_h)\n"
    "#define TG_DSEL(m, a, b) ((tg_double_h)(((m) & (tg_long_h)(a)) | (~(m) & (tg_long_h)(b))))\n"
    /* round to nearest even for |x| < 2^51 */
    "TG_AI tg_double_h tg_rint_d(tg_double_h x) { tg_double_h m = tg_bc_dh(6755399441055744.0); return (x + m) - m; }\n"
    /* Horner steps written out: gcc 12 keeps a loop over the coefficients as a loop (one FMA chain at a time) */
    "#define TG_HORNER(r, x, c) ((r) * (x) + (c))\n"
    /* exp2: 2^n * 2^f, f in [-1/2, 1/2]; |x| clamped to 200 (2^200 is inf and 2^-200 is 0 in float) */
    "TG_AI tg_double_h tg_exp2_d(tg_double_h x) {\n"

    "  tg_double_h hi = tg_bc_dh(200.0), lo = tg_bc_dh(-200.0);\n"
    "  x = TG_DSEL((tg_long_h)(x > hi), hi, x); x = TG_DSEL((tg_long_h)(x < lo), lo, x);\n"
    "  tg_double_h n = tg_rint_d(x), f = x - n;\n"
    "  tg_long_h e = (__builtin_convertvector(n, tg_long_h) + 1023) << 52;\n"
    /* degree 7 (relative error 5e-9, far below half a float ulp) by Estrin's scheme: a chain of 3 FMAs
     * instead of Horner's 7 (the kernel loop is latency bound: 1.2 -> 0.5 ns per element) */
    "  tg_double_h f2 = f * f, f4 = f2 * f2;\n"
    "  tg_double_h p01 = TG_HORNER(tg_bc_dh(0.69314718055994529), f, 1.0);\n"
    "  tg_double_h p23 = TG_HORNER(tg_bc_dh(0.055504108664821576), f, 0.24022650695910069);\n"
    "  tg_double_h p45 = TG_HORNER(tg_bc_dh(0.0013333558146428441), f, 0.0096181291076284769);\n"
    "  tg_double_h p67 = TG_HORNER(tg_bc_dh(1.5252733804059838e-05), f, 0.00015403530393381606);\n"
    "  tg_double_h p = (p01 + f2 * p23) + f4 * (p45 + f2 * p67);\n"
    "  return p * (tg_double_h)e;\n"
    "}\n"
    "static inline tg_float_v tg_exp2_v(tg_float_v xf) { return TG_BY_HALVES(tg_exp2_d, xf); }\n"
    /* log2: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), ln(m) = 2 atanh(s), s = (m-1)/(m+1); float denormals
     * are normal doubles. Negative, zero, inf and nan inputs are selected at the end */
    "TG_AI tg_double_h tg_log2_d(tg_double_h x) {\n"

    "  tg_long_h b = (tg_long_h)x;\n"
    "  tg_long_h e = ((b >> 52) & 0x7ff) - 1023;\n"
    "  tg_double_h m = (tg_double_h)((b & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);\n"
    "  tg_long_h big = (tg_long_h)(m > tg_bc_dh(1.4142135623730951));\n"
    "  m = TG_DSEL(big, m * 0.5, m); e = e - big;\n"
    "  tg_double_h s = (m - 1.0) / (m + 1.0), s2 = s * s;\n"
    "  tg_double_h p = tg_bc_dh(1.0 / 13);\n"
    "  p = TG_HORNER(p, s2, 1.0 / 11); p = TG_HORNER(p, s2, 1.0 / 9); p = TG_HORNER(p, s2, 1.0 / 7);\n"
    "  p = TG_HORNER(p, s2, 1.0 / 5); p = TG_HORNER(p, s2, 1.0 / 3); p = TG_HORNER(p, s2, 1.0);\n"
    "  return (2.0 * 1.4426950408889634) * s * p + __builtin_convertvector(e, tg_double_h);\n"
    "}\n"
    "static inline tg_float_v tg_log2_v(tg_float_v xf) {\n"
    "  tg_float_v rf = TG_BY_HALVES(tg_log2_d, xf), inf = tg_bc_float(__builtin_inff());\n"
    "  rf = tg_sel_float(xf < tg_bc_float(0.0f), tg_bc_float(__builtin_nanf(\"\")), rf);\n"
    "  rf = tg_sel_float(xf == tg_bc_float(0.0f), -inf, rf);\n"
    "  rf = tg_sel_float(xf == inf, inf, rf);\n"
    "  return tg_sel_float(xf != xf, xf, rf);\n"
    "}\n"
    /* sin: x = q pi/2 + r, |r| <= pi/4, by the quadrant q&3 one of sin(r), cos(r), -sin(r), -cos(r) */
    "TG_AI tg_double_h tg_sin_d(tg_double_h x) {\n"

    "  tg_double_h q = tg_rint_d(x * 6.36619772367581382433e-01);\n"
    "  tg_double_h r = ((x - q * 1.57079632673412561417e+00) - q * 6.07710050630396597660e-11) - q * 2.02226624871116645580e-21;\n"
    "  tg_double_h z = r * r;\n"
    "  tg_double_h ps = tg_bc_dh(1.58969099521155010221e-10), pc = tg_bc_dh(-1.13596475577881948265e-11);\n"
    "  ps = TG_HORNER(ps, z, -2.50507602534068634195e-08); pc = TG_HORNER(pc, z, 2.08757232129817482790e-09);\n"
    "  ps = TG_HORNER(ps, z, 2.75573137070700676789e-06); pc = TG_HORNER(pc, z, -2.75573143513906633035e-07);\n"
    "  ps = TG_HORNER(ps, z, -1.98412698298579493134e-04); pc = TG_HORNER(pc, z, 2.48015872894767294178e-05);\n"
    "  ps = TG_HORNER(ps, z, 8.33333333332248946124e-03); pc = TG_HORNER(pc, z, -1.38888888888741095749e-03);\n"
    "  ps = TG_HORNER(ps, z, -1.66666666666666324348e-01); pc = TG_HORNER(pc, z, 4.16666666666666019037e-02);\n"
    "  tg_double_h sn = r + r * z * ps;\n"
    "  tg_double_h cs = 1.0 - 0.5 * z + z * z * pc;\n"
    "  tg_long_h qi = __builtin_convertvector(q, tg_long_h);\n"
    "  tg_double_h v = TG_DSEL(-(qi & 1), cs, sn);\n"
    "  return TG_DSEL(-((qi >> 1) & 1), -v, v);\n"
    "}\n"
    "static inline tg_float_v tg_sin_v(tg_float_v xf) {\n"
    "  tg_float_v res = TG_BY_HALVES(tg_sin_d, xf);\n"
    "  tg_int_v huge = (tg_float_v)((tg_int_v)xf & 0x7fffffff) >= tg_bc_float(524288.0f);\n"
    "  int any = 0;\n"
    "  for (int l = 0; l < (int)(sizeof(tg_int_v) / sizeof(int)); l++) any |= huge[l];\n"
    "  if (__builtin_expect(any, 0))\n"
    "    for (int l = 0; l < (int)(sizeof(tg_int_v) / sizeof(int)); l++) if (huge[l]) res[l] = __builtin_sinf(xf[l]);\n"
    "  return res;\n"
    "}\n";
