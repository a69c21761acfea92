/* c_math.c — exp2, log2 and sin for vector lanes in generated C, as polynomials: no libm call per lane.
 *
 * log2 and sin compute in double precision lanes (float in, float out): with 53 bits the argument reduction
 * and the polynomial are exact enough that the one rounding back to float gives at most 1 ulp, and the double
 * range covers float denormals (log2 of 1e-45) without special scaling. exp2, the hot one (softmax, sigmoid,
 * gelu), computes in float lanes, twice as many per op, with a final step that keeps it within 1 ulp too. The
 * polynomials are fdlibm's (sin, cos kernels) and Taylor series (exp2: 2^f on [-1/2, 1/2] to degree 7; log:
 * 2*atanh(s) to s^13). inf and nan follow C99 Annex F: they fall out of the
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
    /* exp2 in float lanes, 16 per AVX-512 op instead of 8 doubles: 2^n * 2^f, f = x - rint(x) in [-1/2, 1/2]
     * (exact), 2^f by the degree-7 Taylor polynomial (relative error 5e-9) in Horner form, whose last step
     * 1 + f*q keeps the rounding errors of q scaled by |f| <= 1/2: at most 1 ulp from libm over every 7th float
     * of [-152, 129] (99.6% equal). 2^n is applied as 2^(n/2) * 2^(n - n/2), both normal floats, so a
     * denormal result is rounded once and 2^128 overflows to inf. x is clamped to [-160, 130] first (0 and
     * inf beyond; nan passes through). Softmax of 4096x4096, one thread: 48 -> 28 ms. */
    /* AVX-512 with 16-lane vectors (TG_VEC512, render/c.c) has an instruction for each step but the
     * polynomial: clamping by min and max (nan, the second operand, passes through), rounding by vrndscaleps,
     * and 2^n by vscalefps, which rounds a denormal result once and overflows to inf by itself. The same
     * polynomial, so the same 1 ulp; 16 instead of about 26 instructions (exp2 of 16 lanes: 0.31-0.40 ->
     * 0.17-0.24 ns an element; builtins, not immintrin.h, which would add tens of ms to every compile). */
    /* Both: at or below x = -150 the result is 0 (2^-150 rounds to even, 0): p is zeroed there (nan lanes keep
     * theirs) before scaling.
     * An underflowing multiply or scalef costs a microcode assist, about 6 ns a vector instead of 0.2 ns an
     * element, and masked softmax (causal attention, llama's arange <= pos) sends half its lanes there:
     * exp(-inf - max). Denormal results (-150 < x < -126) still take the assist; they are rare. */
    /* 2^f for f = x - n in [-1/2, 1/2], and 0 where x <= -150 (the comment above) */
    "TG_AI tg_float_v tg_exp2_frac(tg_float_v f, tg_float_v x) {\n"
    "  tg_float_v p = tg_bc_float(1.5252733804059838e-05f);\n"
    "  p = TG_HORNER(p, f, 1.5403530393381606e-04f); p = TG_HORNER(p, f, 1.3333558146428441e-03f);\n"
    "  p = TG_HORNER(p, f, 9.6181291076284769e-03f); p = TG_HORNER(p, f, 5.5504108664821576e-02f);\n"
    "  p = TG_HORNER(p, f, 2.4022650695910069e-01f); p = TG_HORNER(p, f, 6.9314718055994529e-01f);\n"
    "  p = TG_HORNER(p, f, 1.0f);\n"
    "  return (tg_float_v)((tg_int_v)p & ~(x <= tg_bc_float(-150.0f)));\n"
    "}\n"
    "#if defined(TG_VEC512)\n"
    "static inline tg_float_v tg_exp2_v(tg_float_v x) {\n"
    "#if defined(__clang__)\n"
    "  x = __builtin_ia32_minps512(tg_bc_float(130.0f), x, 4);\n"
    "  x = __builtin_ia32_maxps512(tg_bc_float(-160.0f), x, 4);\n"
    "#else\n"
    "  x = __builtin_ia32_minps512_mask(tg_bc_float(130.0f), x, x, (unsigned short)0xffff, 4);\n"
    "  x = __builtin_ia32_maxps512_mask(tg_bc_float(-160.0f), x, x, (unsigned short)0xffff, 4);\n"
    "#endif\n"
    "  tg_float_v n = __builtin_ia32_rndscaleps_mask(x, 0, x, (unsigned short)0xffff, 4), f = x - n;\n"
    "  tg_float_v p = tg_exp2_frac(f, x);\n"
    "  return __builtin_ia32_scalefps512_mask(p, n, p, (unsigned short)0xffff, 4);\n"
    "}\n"
    "#else\n"
    "static inline tg_float_v tg_exp2_v(tg_float_v x) {\n"
    "  x = tg_sel_float(x > tg_bc_float(130.0f), tg_bc_float(130.0f), x);\n"
    "  x = tg_sel_float(x < tg_bc_float(-160.0f), tg_bc_float(-160.0f), x);\n"
    "  tg_float_v m = tg_bc_float(12582912.0f), n = (x + m) - m, f = x - n;\n"
    "  tg_float_v p = tg_exp2_frac(f, x);\n"
    "  tg_int_v ni = __builtin_convertvector(n, tg_int_v), n1 = ni >> 1, n2 = ni - n1;\n"
    "  return (p * (tg_float_v)((n1 + 127) << 23)) * (tg_float_v)((n2 + 127) << 23);\n"
    "}\n"
    "#endif\n"
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
