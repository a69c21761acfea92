/* c.c — the C renderer: a linear program becomes one C function.
 *
 * The entry point takes the buffers as void** (a fixed ABI for the runtime) and calls a static function
 * with typed restrict parameters: NOTES measured that gcc only vectorizes through restrict on function
 * parameters. The THREAD loop is split by core_id/ncores. Math goes through gcc builtins, which resolve
 * to libm symbols of the host process at dlopen (kernels are linked -nostdlib).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/cstyle.h"

/* half: _Float16 where the compiler has it; clang 14 on x86 has it only with AVX512-FP16, and __fp16 there
 * (a storage type: arithmetic in float, as gcc's _Float16 does without AVX512-FP16). bfloat16 is stored as
 * its upper 16 bits (cstyle.c's helpers). */
#define HALF_BF16_HELPERS                                                                                    \
  "#if defined(__clang__) && !defined(__FLT16_MAX__)\ntypedef __fp16 tg_half;\n#else\ntypedef _Float16 tg_half;\n#endif\n" \
  "#define TG_INLINE static inline\n"                                                                     \
  "#define TG_F2U(f) (((union { float f; unsigned int u; }){.f = (f)}).u)\n"                              \
  "#define TG_U2F(b) (((union { unsigned int u; float f; }){.u = (b)}).f)\n"

/* clang 14 converts __fp16 on a CPU without F16C (TG_NO_NATIVE, or an older CPU) by calling compiler-rt's
 * __gnu_h2f_ieee and __gnu_f2h_ieee, which gcc's runtime library lacks: the kernel would not load. Such a
 * kernel brings its own, from cstyle.c's bit-exact conversions (found by CI's TG_CC=clang TG_NO_NATIVE=1 run). */
#define CLANG_HALF_RUNTIME_BEGIN "#if defined(__clang__) && !defined(__FLT16_MAX__) && !defined(__F16C__)\n"
#define CLANG_HALF_RUNTIME_END                                                                     \
  "float __gnu_h2f_ieee(unsigned short h) { return tg_h2f(h); }\n"                                \
  "unsigned short __gnu_f2h_ieee(float f) { return tg_f2h(f); }\n#endif\n"

/* gcc 12 at -O2 -march=native (also -mavx2) miscompiles some loops of many accumulators with masked loads
 * once it if-converts and vectorizes them: a reduce over a padded loop (PADTO) with 96 scalar accumulators
 * summed the masked-off elements (found by tests/test_opt.c, TG_SEED=52; right at -O1, with SSE2, with
 * clang, and without loop if-conversion). Generated kernels do not need gcc's vectorizer for masked loops:
 * their vectors are explicit */
#define GCC_WORKAROUND "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC optimize(\"no-tree-loop-if-convert\")\n#endif\n"

/* ---- vectors ---------------------------------------------------------------------------------------------
 * Values that depend on the lane (linear_program.lane) are GCC/clang vector types of p->lanes elements:
 * tg_float_v, tg_int_v; a bool is a tg_int_v mask (-1 true, 0 false), as vector comparisons give. A scalar
 * source of a vector op is broadcast (tg_bc_*). Ops without a vector form run per lane in a small loop. */

/* float16 lanes are float32 lanes (expand.c: a float16 vector is only loaded, then converted to float32) */
static const char *vkind(tg_dtype dt) { return dt == TG_FLOAT32 || dt == TG_FLOAT16 ? "float" : dt == TG_INT64 ? "long" : "int"; }

/* 8- and 16-bit integers are int lanes holding the value (expand.c): the name of the function that loads them
 * contiguously (vec_header), or NULL for the other dtypes */
static const char *small_vu(tg_dtype dt) {
  return dt == TG_UINT8 ? "tg_ld_u8" : dt == TG_INT8 ? "tg_ld_i8" : dt == TG_UINT16 ? "tg_ld_u16" : dt == TG_INT16 ? "tg_ld_i16" : NULL;
}

/* the function that loads a vector of dt widened to its lanes' type: small integers, float16 */
static const char *widening_load(tg_dtype dt) { return dt == TG_FLOAT16 ? "tg_ld_f16" : small_vu(dt); }

/* e (int lanes) brought back into the small integer type dt's range, as C's conversion to dt wraps it (signed:
 * the low bits with their top bit's sign, by xor and subtract: no shift of a negative value) */
static char *narrow(tg_dtype dt, char *e) {
  char *r = !e ? NULL
            : dt == TG_UINT8 ? fmt("(%s&255)", e)
            : dt == TG_UINT16 ? fmt("(%s&65535)", e)
            : dt == TG_INT8 ? fmt("(((%s&255)^128)-128)", e)
            : fmt("(((%s&65535)^32768)-32768)", e);
  free(e);
  return r;
}

/* whether a value of small integer type st is always in small integer type dt's range */
static bool fits(tg_dtype st, tg_dtype dt) {
  if (st == dt) return true;
  if (st == TG_UINT8) return dt == TG_INT16 || dt == TG_UINT16;
  return st == TG_INT8 && dt == TG_INT16;
}

/* contiguous loads and stores under a k mask, the lanes' int mask compared with 0: AVX-512 for 16 lanes,
 * AVX-512VL for 8 and 4 (the same builtin names in gcc and clang; their pointer parameters differ, void *
 * converts to either) */
static void kmask_ops(out *o, int lanes) {
  const char *mt = lanes == 16 ? "unsigned short" : "unsigned char";
  int bits = 32 * lanes, full = (1 << lanes) - 1;
  put(o, "#define TG_MASK_(m) ((%s)__builtin_ia32_cmpd%d_mask(m, tg_bc_int(0), 4, (%s)0x%x))\n", mt, bits, mt, full);
  put(o, "static inline tg_float_v tg_mload_float(tg_int_v m, const float *p) { return __builtin_ia32_loadups%d_mask((const void *)p, tg_bc_float(0), TG_MASK_(m)); }\n"
         "static inline tg_int_v tg_mload_int(tg_int_v m, const int *p) { return __builtin_ia32_loaddqusi%d_mask((const void *)p, tg_bc_int(0), TG_MASK_(m)); }\n"
         "static inline void tg_mstore_float(float *p, tg_int_v m, tg_float_v v) { __builtin_ia32_storeups%d_mask((void *)p, v, TG_MASK_(m)); }\n"
         "static inline void tg_mstore_int(int *p, tg_int_v m, tg_int_v v) { __builtin_ia32_storedqusi%d_mask((void *)p, v, TG_MASK_(m)); }\n",
      bits, bits, bits, bits);
}

static void vec_header(out *o, int lanes, bool math, bool masked, bool tblock) {
  const char *ts[3] = {"float", "int", "long"}, *cs[3] = {"float", "int", "long long"};
  const int sz[3] = {4, 4, 8};
  for (int t = 0; t < 3; t++) {
    put(o, "typedef %s tg_%s_v __attribute__((vector_size(%d)));\n", cs[t], ts[t], sz[t] * lanes);
    put(o, "typedef %s tg_%s_vu __attribute__((vector_size(%d), aligned(%d), may_alias));\n", cs[t], ts[t], sz[t] * lanes, sz[t]);
    put(o, "static inline tg_%s_v tg_bc_%s(%s s) { return (tg_%s_v){", ts[t], ts[t], cs[t], ts[t]);
    for (int l = 0; l < lanes; l++) put(o, "%ss", l ? "," : "");
    put(o, "}; }\n");
  }
  /* 8- and 16-bit integers loaded into int lanes, widened in the load: one vpmovzxbd. gcc 12's
   * __builtin_convertvector of a byte vector inserted the 16 bytes one at a time (a 4096^2 Q8_0 matrix-vector
   * product: 18 ms, 1.6 ms with the widening load); clang has no such builtins and converts well. Float16: one
   * vcvtph2ps (F16C; AVX-512F for 16 lanes), in both compilers */
  static const char *const sn[4] = {"u8", "i8", "u16", "i16"}, *const sc[4] = {"unsigned char", "signed char", "unsigned short", "short"};
  static const char *const mv[4] = {"zxbd", "sxbd", "zxwd", "sxwd"};
  for (int t = 0; t < 4; t++)
    put(o, "typedef %s tg_%s_vu __attribute__((vector_size(%d), aligned(1), may_alias));\n", sc[t], sn[t], (t < 2 ? 1 : 2) * lanes);
  if (lanes == 16 || lanes == 8) {
    put(o, "typedef char tg_c16_ __attribute__((vector_size(16)));\ntypedef short tg_s%d_ __attribute__((vector_size(%d)));\n"
           "typedef long long tg_q2_ __attribute__((vector_size(16)));\n#if defined(%s) && !defined(__clang__)\n",
        lanes, 2 * lanes, lanes == 16 ? "__AVX512F__" : "__AVX2__");
    for (int t = 0; t < 4; t++) {
      put(o, "static inline tg_int_v tg_ld_%s(const %s *p) { ", sn[t], sc[t]);
      if (lanes == 16 && t < 2) put(o, "return __builtin_ia32_pmov%s512_mask((tg_c16_)*(const tg_%s_vu*)p, tg_bc_int(0), 0xffff); }\n", mv[t], sn[t]);
      else if (lanes == 16) put(o, "return __builtin_ia32_pmov%s512_mask((tg_s16_)*(const tg_%s_vu*)p, tg_bc_int(0), 0xffff); }\n", mv[t], sn[t]);
      else if (t < 2) put(o, "long long q; __builtin_memcpy(&q, p, 8); return __builtin_ia32_pmov%s256((tg_c16_)(tg_q2_){q, 0}); }\n", mv[t]);
      else put(o, "return __builtin_ia32_pmov%s256((tg_s8_)*(const tg_%s_vu*)p); }\n", mv[t], sn[t]);
    }
    put(o, "#define TG_HAVE_LDSMALL 1\n#endif\n");
    if (lanes == 16)
      put(o, "#if defined(__AVX512F__)\nstatic inline tg_float_v tg_ld_f16(const tg_half *p) { return __builtin_ia32_vcvtph2ps512_mask((tg_s16_)*(const tg_i16_vu*)p, tg_bc_float(0), 0xffff, 4); }\n");
    else
      put(o, "#if defined(__F16C__)\nstatic inline tg_float_v tg_ld_f16(const tg_half *p) { return __builtin_ia32_vcvtph2ps256((tg_s8_)*(const tg_i16_vu*)p); }\n");
    put(o, "#define TG_HAVE_LDF16 1\n#endif\n");
  }
  put(o, "#ifndef TG_HAVE_LDSMALL\n");
  for (int t = 0; t < 4; t++)
    put(o, "static inline tg_int_v tg_ld_%s(const %s *p) { return __builtin_convertvector(*(const tg_%s_vu*)p, tg_int_v); }\n", sn[t], sc[t], sn[t]);
  put(o, "#endif\n#ifndef TG_HAVE_LDF16\n"
         "static inline tg_float_v tg_ld_f16(const tg_half *p) { tg_float_v v; for (int l = 0; l < %d; l++) v[l] = (float)p[l]; return v; }\n"
         "#endif\n", lanes);
  put(o, "static inline tg_long_v tg_sel_long(tg_int_v m, tg_long_v a, tg_long_v b) "
         "{ tg_long_v w = __builtin_convertvector(m, tg_long_v); return (w & a) | (~w & b); }\n"
         "static inline tg_long_v tg_max_long(tg_long_v a, tg_long_v b) "
         "{ return tg_sel_long(__builtin_convertvector(a > b, tg_int_v), a, b); }\n");
  put(o, "static inline tg_float_v tg_sel_float(tg_int_v m, tg_float_v a, tg_float_v b) "
         "{ return (tg_float_v)((m & (tg_int_v)a) | (~m & (tg_int_v)b)); }\n"
         "static inline tg_int_v tg_sel_int(tg_int_v m, tg_int_v a, tg_int_v b) { return (m & a) | (~m & b); }\n"
         "static inline tg_float_v tg_max_float(tg_float_v a, tg_float_v b) { return tg_sel_float(a > b, a, b); }\n"
         "static inline tg_int_v tg_max_int(tg_int_v a, tg_int_v b) { return tg_sel_int(a > b, a, b); }\n"
         "static inline int tg_all(tg_int_v m) { int r = -1; "
         "for (int l = 0; l < (int)(sizeof m / sizeof(int)); l++) r &= m[l]; return r != 0; }\n");
  /* contiguous loads and stores under a mask that varies along the lanes (a pad's edge, a PADTO row): one
   * masked instruction where the ISA has it (masked-off lanes do not fault), else lane by lane. The per-lane
   * loop at a padded conv's every row edge was most of the time of conv backward's input gradient. */
  const char *isa = lanes == 16 ? "__AVX512F__" : lanes == 8 ? "__AVX2__" : NULL;
  /* a vector read by several FMAs of a register tile kept in a register: without it gcc folds the load into
   * every FMA as a memory operand, and a 5x5 convolution's inner loop (2 weight vectors, 5 broadcasts, 10 FMAs)
   * issued 15 loads for 10 FMAs, bound by the load ports (MNIST's forward convolution 182 -> 118 ms, one AVX2
   * core) */
  put(o, "#if defined(__x86_64__) && %s%s%s\n#define TG_KEEP(v) __asm__(\"\" : \"+v\"(v))\n#else\n#define TG_KEEP(v) (void)(v)\n#endif\n",
      isa ? "defined(" : "0", isa ? isa : "", isa ? ")" : "");
  /* cut_after_loop's memory round trip (GNU C; other compilers take the value as it is) */
  put(o, "#if defined(__GNUC__)\nstatic inline tg_float_v tg_cut_float(tg_float_v v) { __asm__(\"\" : \"+m\"(v)); return v; }\n"
         "#else\n#define tg_cut_float(v) (v)\n#endif\n");
  /* The compilers' own builtins (the same names in gcc and clang), not <immintrin.h>: that header alone
   * took 230 ms of a 270 ms compile. */
  if (isa) put(o, "#if defined(%s)\n", isa);
  if (isa && masked) {
    if (lanes == 16)
      kmask_ops(o, lanes);
    else {
      /* AVX-512VL masks 8 lanes as it does 16: one instruction with a k mask, fast for loads and stores on Zen 4
       * (a padded gradient's rows of 28 in vectors of 8, every row's last one masked: the AVX2 store below, lane
       * by lane where the mask is partial, made MNIST's E_512_32_28_4_8 a 16 GB/s kernel) */
      put(o, "#if defined(__AVX512VL__)\n");
      kmask_ops(o, lanes);
      put(o, "#else\n");
      /* a full mask reads with a plain load: vmaskmovps is microcoded on AMD's Zen 1, ~10 cycles a load against
       * one (a padded 3x3 convolution's inner loop, 2 masked loads and 8 FMAs a tap, ran at a quarter of its FMA
       * rate); the mask is loop-invariant in such loops, so the test is a predicted branch */
      for (int k = 0; k < 2; k++)
        put(o, "static inline tg_%s_v tg_mload_%s(tg_int_v m, const %s *p) { if (__builtin_ia32_movmskps256((tg_float_v)m) == 0xff) "
               "return *(const tg_%s_vu*)p; return __builtin_ia32_maskload%s256((const tg_%s_v *)p, m); }\n",
            ts[k], ts[k], cs[k], ts[k], k ? "d" : "ps", ts[k]);
      /* not vmaskmovps for stores: about 20 cycles each on AMD's Zen 3, with a full mask too, where a plain store
       * takes one (a padded row's elementwise kernel stores every vector masked); the lanes one at a time where
       * the mask is partial */
      for (int k = 0; k < 2; k++)
        put(o, "static inline void tg_mstore_%s(%s *p, tg_int_v m, tg_%s_v v) { int k = __builtin_ia32_movmskps256((tg_float_v)m); "
               "if (k == 0xff) { *(tg_%s_vu*)p = v; return; } for (int l = 0; l < 8; l++) if (k >> l & 1) p[l] = v[l]; }\n",
            ts[k], cs[k], ts[k], ts[k]);
      put(o, "#endif\n");
    }
    put(o, "#define TG_HAVE_MLOAD 1\n");
  }
  /* square roots in one instruction (Adam's update takes one per element); lane by lane, gcc 12 at -O2 left
   * 16 scalar sqrtss calls in the loop (its math-errno path) */
  if (isa) {
    if (lanes == 16)
      put(o, "#if defined(__clang__)\n"
             "static inline tg_float_v tg_sqrt_v(tg_float_v x) { return __builtin_ia32_sqrtps512(x, 4); }\n"
             "#else\n"
             "static inline tg_float_v tg_sqrt_v(tg_float_v x) { return __builtin_ia32_sqrtps512_mask(x, x, (unsigned short)0xffff, 4); }\n"
             "#endif\n"
             "#define TG_VEC512 1\n");  /* 16-lane vectors on AVX-512: c_math.c's exp2 uses its instructions */
    else
      put(o, "static inline tg_float_v tg_sqrt_v(tg_float_v x) { return __builtin_ia32_sqrtps256(x); }\n");
    put(o, "#define TG_HAVE_VSQRT 1\n#endif\n");
  }
  if (lanes == 4 && masked) {  /* quarter vectors on AVX-512 (rows of 12 or 20 pixels), SSE lane by lane */
    put(o, "#if defined(__AVX512VL__)\n");
    kmask_ops(o, lanes);
    put(o, "#define TG_HAVE_MLOAD 1\n#endif\n");
  }
  put(o, "#ifndef TG_HAVE_VSQRT\n"
         "static inline tg_float_v tg_sqrt_v(tg_float_v x) { for (int l = 0; l < %d; l++) x[l] = __builtin_sqrtf(x[l]); return x; }\n"
         "#endif\n", lanes);
  if (tblock) {  /* a lanes x lanes transpose (STORE_TBLOCK): halves, quarters, ... of the rows swapped */
    put(o, "static inline void tg_tblock(float *d, long ds, const float *s, long ss) {\n  tg_float_v r[%d];\n", lanes);
    /* each row 256 bytes ahead fetched too: the copy walks its rows from start to end */
    put(o, "  for (int i = 0; i < %d; i++) { r[i] = *(const tg_float_vu *)(s + i * ss); __builtin_prefetch(s + i * ss + 64); }\n",
        lanes);
    for (int h = lanes / 2; h >= 1; h /= 2)
      for (int i = 0; i < lanes; i++) {
        if (i & h) continue;
        put(o, "  { tg_float_v a = __builtin_shufflevector(r[%d], r[%d]", i, i + h);
        for (int k = 0; k < lanes; k++) put(o, ", %d", k & h ? lanes + k - h : k);
        put(o, "), b = __builtin_shufflevector(r[%d], r[%d]", i, i + h);
        for (int k = 0; k < lanes; k++) put(o, ", %d", k & h ? lanes + k : k + h);
        put(o, "); r[%d] = a; r[%d] = b; }\n", i, i + h);
      }
    put(o, "  for (int i = 0; i < %d; i++) *(tg_float_vu *)(d + i * ds) = r[i];\n}\n", lanes);
  }
  put(o, "#ifndef TG_HAVE_MLOAD\n");
  for (int t = 0; t < 2; t++)
    put(o, "static inline tg_%s_v tg_mload_%s(tg_int_v m, const %s *p) { tg_%s_v v; if (tg_all(m)) return *(const tg_%s_vu*)p; "
           "for (int l = 0; l < %d; l++) v[l] = m[l] ? p[l] : 0; return v; }\n"
           "static inline void tg_mstore_%s(%s *p, tg_int_v m, tg_%s_v v) { if (tg_all(m)) { *(tg_%s_vu*)p = v; return; } "
           "for (int l = 0; l < %d; l++) if (m[l]) p[l] = v[l]; }\n",
        ts[t], ts[t], cs[t], ts[t], ts[t], lanes, ts[t], cs[t], ts[t], ts[t], lanes);
  put(o, "#endif\n");
  /* a masked vector of a buffer of n elements whose lanes all lie inside it, masked-off lanes included: a plain
   * load and an AND, where a masked load is microcoded on some cores (vmaskmovps on AMD's Zen 1: ~10 cycles,
   * 4.4x a load; lane by lane without the ISA). Only a vector that would cross an end of the buffer takes the
   * masked load: a padded row's edge inside the buffer does not */
  for (int t = 0; t < 2; t++)
    put(o, "static inline tg_%s_v tg_mload_%s_in(tg_int_v m, const %s *p, long long i, long long n) { "
           "if ((unsigned long long)i <= (unsigned long long)(n - %d)) return (tg_%s_v)(m & *(const tg_int_vu*)(p + i)); "
           "return tg_mload_%s(m, p + i); }\n",
        ts[t], ts[t], cs[t], lanes, ts[t], ts[t]);
  if (!math) return;  /* only when used: it adds about 10 ms to a compile */
  if (lanes >= 4) {
    int h = lanes / 2;
    put(o, "typedef float tg_float_h __attribute__((vector_size(%d)));\n"
           "typedef double tg_double_h __attribute__((vector_size(%d)));\n"
           "typedef long long tg_long_h __attribute__((vector_size(%d)));\n", 4 * h, 8 * h, 8 * h);
    put(o, "#define TG_BY_HALVES(fn, xf) ({ tg_float_v x_ = (xf); tg_float_h a_ = __builtin_shufflevector(x_, x_");
    for (int l = 0; l < h; l++) put(o, ", %d", l);
    put(o, "), b_ = __builtin_shufflevector(x_, x_");
    for (int l = h; l < lanes; l++) put(o, ", %d", l);
    put(o, "); a_ = TG_CVF(fn(TG_CVD(a_))); b_ = TG_CVF(fn(TG_CVD(b_))); __builtin_shufflevector(a_, b_");
    for (int l = 0; l < lanes; l++) put(o, ", %d", l);
    put(o, "); })\n");
  } else {
    put(o, "typedef float tg_float_h __attribute__((vector_size(%d)));\n"
           "typedef double tg_double_h __attribute__((vector_size(%d)));\n"
           "typedef long long tg_long_h __attribute__((vector_size(%d)));\n"
           "#define TG_BY_HALVES(fn, xf) ((tg_float_v)TG_CVF(fn(TG_CVD(xf))))\n", 4 * lanes, 8 * lanes, 8 * lanes);
  }
  put(o, "%s", render_c_vec_math);

}

static bool is_vec(rctx *c, const uop *u) { return c->p->lane && lp_is_vec(c->p, u); }

/* source i of u as a vector operand */
static char *vsrc(rctx *c, uop *u, int i) {
  uop *s = u->src[i];
  if (is_vec(c, s)) return fmt("%s", name_of(c, s));
  if (s->dtype == TG_BOOL) return fmt("tg_bc_int(-(int)(%s))", name_of(c, s));
  return fmt("tg_bc_%s(%s)", vkind((tg_dtype)s->dtype), name_of(c, s));
}

/* the vector expression of u, or NULL when it has none (then it runs per lane) */
static char *valu_text(rctx *c, uop *u) {
  tg_dtype dt = (tg_dtype)u->dtype, st = u->nsrc ? (tg_dtype)u->src[0]->dtype : dt;
  /* unsigned bytes (or halves) read as signed ones (a Q8_0 weight's int8 in a uint8 file): the signed widening
   * load of the same address (one vpmovsxbd), not the unsigned one then an and, a xor and a subtract */
  uop *ld = u->nsrc ? u->src[0] : NULL;
  if ((u->op == OP_CAST || u->op == OP_BITCAST) && ((st == TG_UINT8 && dt == TG_INT8) || (st == TG_UINT16 && dt == TG_INT16)) &&
      ld->op == OP_LOAD && ld->arg.i > 0 && ld->nsrc == 2 && is_vec(c, ld))
    return fmt("%s((const %s*)(%s+%s))", small_vu(dt), dt == TG_INT8 ? "signed char" : "short", name_of(c, ld->src[0]),
               name_of(c, ld->src[1]));
  char *s[3] = {NULL, NULL, NULL}, *r = NULL;
  for (int i = 0; i < u->nsrc && i < 3; i++) s[i] = vsrc(c, u, i);
  bool b = st == TG_BOOL, L = st == TG_INT64;
  switch (u->op) {
    case OP_ADD: r = b ? NULL : fmt("(%s+%s)", s[0], s[1]); break;
    case OP_MUL: r = b ? fmt("(%s&%s)", s[0], s[1]) : fmt("(%s*%s)", s[0], s[1]); break;
    case OP_FDIV: r = fmt("(%s/%s)", s[0], s[1]); break;
    case OP_NEG: r = b ? fmt("(~%s)", s[0]) : fmt("(-%s)", s[0]); break;
    case OP_MAX: r = b ? fmt("(%s|%s)", s[0], s[1]) : fmt("tg_max_%s(%s,%s)", vkind(dt), s[0], s[1]); break;
    case OP_CMPLT: r = b ? fmt("(~%s&%s)", s[0], s[1]) : fmt(L ? "__builtin_convertvector(%s<%s, tg_int_v)" : "(%s<%s)", s[0], s[1]); break;
    case OP_CMPNE: r = b ? fmt("(%s^%s)", s[0], s[1]) : fmt(L ? "__builtin_convertvector(%s!=%s, tg_int_v)" : "(%s!=%s)", s[0], s[1]); break;
    case OP_CMPEQ: r = b ? fmt("(~(%s^%s))", s[0], s[1]) : fmt(L ? "__builtin_convertvector(%s==%s, tg_int_v)" : "(%s==%s)", s[0], s[1]); break;
    case OP_AND: r = fmt("(%s&%s)", s[0], s[1]); break;
    case OP_OR: r = fmt("(%s|%s)", s[0], s[1]); break;
    case OP_XOR: r = fmt("(%s^%s)", s[0], s[1]); break;
    case OP_IDIV:
    case OP_MOD:
      if (uop_is_const(u->src[1]) && u->src[1]->arg.i > 0) r = fmt("(%s%s%s)", s[0], u->op == OP_IDIV ? "/" : "%", s[1]);
      break;
    case OP_WHERE: r = fmt("tg_sel_%s(%s,%s,%s)", vkind(dt), s[0], s[1], s[2]); break;
    case OP_EXP2: r = dt == TG_FLOAT32 ? fmt("tg_exp2_v(%s)", s[0]) : NULL; break;
    case OP_LOG2: r = dt == TG_FLOAT32 ? fmt("tg_log2_v(%s)", s[0]) : NULL; break;
    case OP_SIN: r = dt == TG_FLOAT32 ? fmt("tg_sin_v(%s)", s[0]) : NULL; break;
    case OP_RECIP: r = dt == TG_FLOAT32 ? fmt("(tg_bc_float(1.0f)/%s)", s[0]) : NULL; break;
    case OP_SQRT: r = dt == TG_FLOAT32 ? fmt("tg_sqrt_v(%s)", s[0]) : NULL; break;
    case OP_CAST:
      if (dt == st || (st == TG_FLOAT16 && dt == TG_FLOAT32)) r = fmt("%s", s[0]);
      else if (dt == TG_BOOL) r = fmt(L ? "__builtin_convertvector(%s!=tg_bc_%s(0), tg_int_v)" : "(%s!=tg_bc_%s(0))", s[0], vkind(st));
      /* a mask lane is -1 or 0: its low bit, not its negation (gcc 12 at -O1 and above folds max(acc, -m) with
       * acc = INT_MIN into a negated min, which wraps: every int max reduction of a comparison gave INT_MIN) */
      else if (st == TG_BOOL) r = dt == TG_INT32 ? fmt("(%s&1)", s[0]) : fmt("__builtin_convertvector(%s&1, tg_%s_v)", s[0], vkind(dt));
      else r = fmt("__builtin_convertvector(%s, tg_%s_v)", s[0], vkind(dt));
      break;
    case OP_BITCAST: r = small_vu(dt) ? fmt("%s", s[0]) : fmt("((tg_%s_v)%s)", vkind(dt), s[0]); break;
    case OP_SHL: r = fmt("(%s<<%s)", s[0], s[1]); break;
    case OP_SHR: r = fmt("(%s>>%s)", s[0], s[1]); break;
    default: break;
  }
  for (int i = 0; i < 3; i++) free(s[i]);
  /* a small integer result that may leave its type's range (and, or, shifts right, max and selects of values in
   * range stay in it) */
  if (r && small_vu(dt) && u->op != OP_AND && u->op != OP_OR && u->op != OP_XOR && u->op != OP_SHR &&
      u->op != OP_MAX && u->op != OP_WHERE && !(u->op == OP_CAST && small_vu(st) && fits(st, dt)))
    r = narrow(dt, r);
  return r;
}

/* text of source s in lane "l_": an element of a vector, or the scalar itself */
static char *lane_of(rctx *c, uop *s) {
  if (!is_vec(c, s)) return fmt("%s", name_of(c, s));
  if (s->dtype == TG_BOOL) return fmt("(%s[l_]!=0)", name_of(c, s));
  return fmt("%s[l_]", name_of(c, s));
}

static void per_lane_loop(rctx *c) {
  indent(c);
  put(c->o, "for (int l_ = 0; l_ < %d; l_++) ", c->p->lanes);
}

static void render_vec_alu(rctx *c, uop *u, int pos) {
  tg_dtype dt = (tg_dtype)u->dtype;
  char *nm = fmt("alu%d", pos), *e = valu_text(c, u);
  indent(c);
  if (e) {
    put(c->o, "tg_%s_v %s = %s;\n", vkind(dt), nm, e);
  } else {
    char *s[3] = {NULL, NULL, NULL};
    for (int i = 0; i < u->nsrc && i < 3; i++) s[i] = lane_of(c, u->src[i]);
    e = alu_text(c, u, (const char *const *)s);
    put(c->o, "tg_%s_v %s;\n", vkind(dt), nm);
    per_lane_loop(c);
    if (dt == TG_BOOL) put(c->o, "%s[l_] = -(int)(%s);\n", nm, e ? e : "0");
    else if (small_vu(dt)) put(c->o, "%s[l_] = (%s)(%s);\n", nm, ctype(c, dt), e ? e : "0");
    else put(c->o, "%s[l_] = %s;\n", nm, e ? e : "0");
    for (int i = 0; i < 3; i++) free(s[i]);
    if (!e) {
      render_fail(c, "no expression for this op", u);
    }
  }
  free(e);
  set_name(c, u, nm);
}

/* whether ops after pos read u more than once */
static bool reused(const linear_program *p, const uop *u, int pos) {
  int n = 0;
  for (int i = pos + 1; i < p->n && n < 2; i++)
    for (int k = 0; k < p->ops[i]->nsrc; k++) n += p->ops[i]->src[k] == u;
  return n >= 2;
}

/* A vector gate that is a scalar condition AND a lane mask (a tile's padded lanes inside one input of a concat):
 * returns the scalar condition's name, for an if around the masked access, and sets *mask to the lane mask, or
 * returns NULL and sets *mask to the gate. Where the scalar is false the address is outside the buffer, and AMD
 * cores take a microcode assist for a masked access to an unmapped page even with every lane off (shufflenet's
 * concat + residual kernel, one thread, 1.6 -> 0.19 ms) */
static const char *gate_scalar(rctx *c, uop *g, const char **mask) {
  *mask = name_of(c, g);
  if (g->op != OP_AND || g->nsrc != 2) return NULL;
  for (int k = 0; k < 2; k++)
    if (!is_vec(c, g->src[k]) && is_vec(c, g->src[1 - k])) {
      *mask = name_of(c, g->src[1 - k]);
      return name_of(c, g->src[k]);
    }
  return NULL;
}

/* a kernel argument whose element count the kernel knows (every vector inside it may be read whole) */
static bool bounded_buffer(rctx *c, uop *b) {
  return b->op == OP_PARAM && b->naux >= 1 && b->aux[0] >= c->p->lanes && b->aux[0] < ((int64_t)1 << 62);
}

/* LOAD_EVERY2: lanes l of the vectors at index and index + lanes hold elements 2 l and 2 l + 1 of the window;
 * the even ones are the value. Each half is loaded under its lanes' mask with the odd elements off (a vector
 * inside a bounded buffer is a plain load and an AND: tg_mload_float_in), so nothing outside the elements
 * the gather would read is touched; a scalar gate skips the loads */
static void render_every2_load(rctx *c, uop *u, const char *nm) {
  int L = c->p->lanes;
  const char *p = name_of(c, u->src[0]), *i = name_of(c, u->src[1]), *m = NULL, *when = NULL;
  if (u->nsrc == 3 && is_vec(c, u->src[2])) when = gate_scalar(c, u->src[2], &m);
  else if (u->nsrc == 3) when = name_of(c, u->src[2]);
  put(c->o, "tg_float_v %s = tg_bc_float(0); ", nm);
  if (when) put(c->o, "if (%s) ", when);
  put(c->o, "{ tg_int_v m_ = %s, z_ = tg_bc_int(0), a_ = __builtin_shufflevector(m_, z_", m ? m : "tg_bc_int(-1)");
  for (int l = 0; l < L; l++) put(c->o, ", %d", l % 2 ? L : l / 2);
  put(c->o, "), b_ = __builtin_shufflevector(m_, z_");
  for (int l = 0; l < L; l++) put(c->o, ", %d", l % 2 ? L : L / 2 + l / 2);
  put(c->o, "); ");
  if (bounded_buffer(c, u->src[0])) {
    long long n = (long long)u->src[0]->aux[0];
    put(c->o, "tg_float_v x_ = tg_mload_float_in(a_, %s, %s, %lldLL), y_ = tg_mload_float_in(b_, %s, (%s)+%d, %lldLL); ", p, i,
        n, p, i, L, n);
  } else {
    put(c->o, "tg_float_v x_ = tg_mload_float(a_, %s+%s), y_ = tg_mload_float(b_, %s+(%s)+%d); ", p, i, p, i, L);
  }
  put(c->o, "%s = __builtin_shufflevector(x_, y_", nm);
  for (int l = 0; l < L; l++) put(c->o, ", %d", 2 * l);
  put(c->o, "); }\n");
}

static void render_vec_load(rctx *c, uop *u, int pos) {
  tg_dtype dt = (tg_dtype)u->dtype;
  char *nm = fmt("val%d", pos);
  const char *p = name_of(c, u->src[0]), *k = vkind(dt), *sv = widening_load(dt);
  indent(c);
  if (sv && u->arg.i > 0) {  /* a small integer type's packed vector, converted to int lanes */
    const char *i = name_of(c, u->src[1]);
    char *full = fmt("%s(%s+%s)", sv, p, i);
    if (u->nsrc == 3 && is_vec(c, u->src[2])) {
      const char *m = name_of(c, u->src[2]);
      put(c->o, "tg_%s_v %s; if (tg_all(%s)) %s = %s; else ", k, nm, m, nm, full);
      put(c->o, "for (int l_ = 0; l_ < %d; l_++) %s[l_] = %s[l_] ? %s[%s+l_] : 0;\n", c->p->lanes, nm, m, p, i);
    } else if (u->nsrc == 3) {
      put(c->o, "tg_%s_v %s = tg_bc_%s(0); if (%s) %s = %s;\n", k, nm, k, name_of(c, u->src[2]), nm, full);
    } else {
      put(c->o, "tg_%s_v %s = %s;\n", k, nm, full);
    }
    free(full);
  } else if (u->arg.i == LOAD_EVERY2) {
    render_every2_load(c, u, nm);
  } else if (u->arg.i > 0 && u->nsrc == 3 && is_vec(c, u->src[2]) && dt != TG_INT64) {  /* contiguous, masked */
    const char *m, *when = gate_scalar(c, u->src[2], &m), *i = name_of(c, u->src[1]);
    char *ld = bounded_buffer(c, u->src[0]) ? fmt("tg_mload_%s_in(%s, %s, %s, %lldLL)", k, m, p, i, (long long)u->src[0]->aux[0])
                                            : fmt("tg_mload_%s(%s, %s+%s)", k, m, p, i);
    if (when) put(c->o, "tg_%s_v %s = tg_bc_%s(0); if (%s) %s = %s;\n", k, nm, k, when, nm, ld);
    else put(c->o, "tg_%s_v %s = %s;\n", k, nm, ld);
    free(ld);
    if (dt == TG_FLOAT32 && reused(c->p, u, pos)) indent(c), put(c->o, "TG_KEEP(%s);\n", nm);
  } else if (u->arg.i > 0 && u->nsrc == 3 && is_vec(c, u->src[2])) {  /* contiguous, masked lane by lane */
    const char *m = name_of(c, u->src[2]), *i = name_of(c, u->src[1]);
    put(c->o, "tg_%s_v %s; if (tg_all(%s)) %s = *(const tg_%s_vu*)(%s+%s); else ", k, nm, m, nm, k, p, i);
    put(c->o, "for (int l_ = 0; l_ < %d; l_++) %s[l_] = %s[l_] ? %s[%s+l_] : 0;\n", c->p->lanes, nm, m, p, i);
  } else if (load_runs(u)) {  /* runs: lanes / g consecutive values, each repeated g times by a shuffle */
    int64_t g = load_runs(u), nv = c->p->lanes / g;
    const char *i = name_of(c, u->src[1]);
    if (nv == 1) {
      put(c->o, "tg_%s_v %s = tg_bc_%s(%s[%s]);\n", k, nm, k, p, i);
    } else {
      put(c->o, "tg_%s_v %s; { typedef %s r_t_ __attribute__((vector_size(%lld), aligned(4), may_alias)); "
                "r_t_ r_ = *(const r_t_*)(%s+%s); %s = __builtin_shufflevector(r_, r_", k, nm, ctype(c, dt),
          (long long)(nv * 4), p, i, nm);
      for (int l = 0; l < c->p->lanes; l++) put(c->o, ", %lld", (long long)(l / g));
      put(c->o, "); }\n");
    }
  } else if (u->arg.i > 0) {  /* contiguous: one vector load at the (scalar) index */
    if (u->nsrc == 3)
      put(c->o, "tg_%s_v %s = tg_bc_%s(0); if (%s) %s = *(const tg_%s_vu*)(%s+%s);\n", k, nm, k, name_of(c, u->src[2]), nm,
          k, p, name_of(c, u->src[1]));
    else
      put(c->o, "tg_%s_v %s = *(const tg_%s_v%s*)(%s+%s);\n", k, nm, k, u->arg.i == 2 ? "" : "u", p, name_of(c, u->src[1]));
    if (dt == TG_FLOAT32 && u->nsrc != 3 && reused(c->p, u, pos)) indent(c), put(c->o, "TG_KEEP(%s);\n", nm);
  } else {  /* gather */
    char *i = lane_of(c, u->src[1]), *v = u->nsrc == 3 ? lane_of(c, u->src[2]) : NULL;
    put(c->o, "tg_%s_v %s;\n", k, nm);
    per_lane_loop(c);
    if (v) put(c->o, "%s[l_] = %s ? %s[%s] : 0;\n", nm, v, p, i);
    else put(c->o, "%s[l_] = %s[%s];\n", nm, p, i);
    free(i);
    free(v);
  }
  set_name(c, u, nm);
}

static void render_vec_store(rctx *c, uop *u) {
  const char *p = name_of(c, u->src[0]);
  indent(c);
  if (u->arg.i > 0 && u->nsrc == 4 && is_vec(c, u->src[3]) && u->src[2]->dtype != TG_INT64) {  /* contiguous, masked */
    char *v = vsrc(c, u, 2);
    const char *k = vkind((tg_dtype)u->src[2]->dtype);
    const char *m, *when = gate_scalar(c, u->src[3], &m);
    if (when) put(c->o, "if (%s) ", when);
    put(c->o, "tg_mstore_%s(%s+%s, %s, %s);\n", k, p, name_of(c, u->src[1]), m, v);
    free(v);
    return;
  }
  if (u->arg.i > 0 && u->nsrc == 4 && is_vec(c, u->src[3])) {  /* contiguous, masked lane by lane */
    char *v = vsrc(c, u, 2);
    const char *m = name_of(c, u->src[3]), *i = name_of(c, u->src[1]);
    put(c->o, "if (tg_all(%s)) *(tg_%s_vu*)(%s+%s) = %s; else ", m, vkind((tg_dtype)u->src[2]->dtype), p, i, v);
    put(c->o, "for (int l_ = 0; l_ < %d; l_++) if (%s[l_]) %s[%s+l_] = (%s)[l_];\n", c->p->lanes, m, p, i, v);
    free(v);
    return;
  }
  if (u->arg.i > 0) {
    char *v = vsrc(c, u, 2);
    if (u->nsrc == 4) put(c->o, "if (%s) ", name_of(c, u->src[3]));
    put(c->o, "*(tg_%s_vu*)(%s+%s) = %s;\n", vkind((tg_dtype)u->src[2]->dtype), p, name_of(c, u->src[1]), v);
    free(v);
    return;
  }
  char *i = lane_of(c, u->src[1]), *v = lane_of(c, u->src[2]), *m = u->nsrc == 4 ? lane_of(c, u->src[3]) : NULL;
  put(c->o, "for (int l_ = 0; l_ < %d; l_++) ", c->p->lanes);
  if (m) put(c->o, "if (%s) ", m);
  put(c->o, "%s[%s] = %s;\n", p, i, v);
  free(i);
  free(v);
  free(m);
}

/* A register tile's float accumulators leave their reduce loop through memory (one store and load each per
 * tile): the values after the loop are then other variables than the ones inside it. gcc otherwise gives an
 * accumulator one place for its whole life, and where the code after the loop holds many values at once (a
 * batch norm's four per-channel scalars broadcast for each of the tile's channels, a residual, masks) it
 * spilled half the tile's accumulators to the stack inside the loop: ResNet-18's 3x3 convolutions with a fused
 * norm, residual and ReLU ran at a third of the speed of the same loop without them. Only for a tile (4 or
 * more vector accumulators) whose reduce is a loop. */
static void cut_after_loop(rctx *c, uop *u, int pos) {
  uop *acc = umap_get(&c->p->accs, u);
  if (!acc || acc->dtype != TG_FLOAT32 || !is_vec(c, acc)) return;
  int accs = 0, loops = 0;
  bool inside = false;
  for (int i = 0; i < c->p->n; i++) {
    uop *o = c->p->ops[i];
    if (o->op == OP_DEFINE_ACC && o->dtype == TG_FLOAT32 && is_vec(c, o)) accs++;
    if (o == acc) inside = true;
    if (inside && i < pos && o->op == OP_ENDRANGE) loops++;
  }
  if (accs < 4 || !loops) return;
  const char *an = name_of(c, acc);
  indent(c);
  put(c->o, "%s = tg_cut_float(%s);\n", an, an);
}

/* C's vector forms (cstyle.h's vec_op): the lane RANGE, vector accumulators, loads, stores and ALU ops, and
 * the transposing block copy of a PACK */
static bool c_vec_op(rctx *c, uop *u, int pos) {
  if (u->op == OP_STORE && u->arg.i == STORE_TBLOCK) {
    indent(c);
    put(c->o, "tg_tblock(%s+%s, %s, %s+%s, %s);\n", name_of(c, u->src[0]), name_of(c, u->src[1]), name_of(c, u->src[5]),
        name_of(c, u->src[2]), name_of(c, u->src[3]), name_of(c, u->src[4]));
    set_name(c, u->src[6], fmt("%s", name_of(c, u->src[0])));  /* the panel's loads read the fill */
    return true;
  }
  if (u->op == OP_STORE && u->arg.i == STORE_EVERY2) {  /* reads src .. src + 2 lanes - 1 when inside */
    int L = c->p->lanes;
    const uop *b = u->src[2];
    indent(c);
    put(c->o, "{ const float *s_ = %s + %s; tg_float_v v_; if ((long long)(%s) + %d <= %lldLL) v_ = __builtin_shufflevector("
              "*(const tg_float_vu*)s_, *(const tg_float_vu*)(s_ + %d)", name_of(c, u->src[2]), name_of(c, u->src[3]),
        name_of(c, u->src[3]), 2 * L, (long long)b->aux[0], L);
    for (int l = 0; l < L; l++) put(c->o, ", %d", 2 * l);
    put(c->o, "); else for (int l_ = 0; l_ < %d; l_++) v_[l_] = s_[2 * l_]; *(tg_float_vu*)(%s + %s) = v_; }\n", L,
        name_of(c, u->src[0]), name_of(c, u->src[1]));
    set_name(c, u->src[4], fmt("%s", name_of(c, u->src[0])));  /* the panel's loads read the fill */
    return true;
  }
  if (!c->p->lane) return false;
  tg_dtype dt = (tg_dtype)u->dtype;
  if (u->op == OP_RANGE && u == c->p->lane) {
    char *nm = fmt("ridx%" PRId64, u->arg.i);
    set_name(c, u, nm);
    indent(c);
    put(c->o, "tg_%s_v %s = {", vkind(dt), nm ? nm : "");
    for (int l = 0; l < c->p->lanes; l++) put(c->o, "%s%d", l ? "," : "", l);
    put(c->o, "};\n");
    return true;
  }
  if (!is_vec(c, u)) return false;
  switch (u->op) {
    case OP_DEFINE_ACC: {
      char *nm = fmt("acc%" PRId64, u->arg.i);
      set_name(c, u, nm);
      indent(c);
      put(c->o, "tg_%s_v %s = tg_bc_%s(%s);\n", vkind(dt), nm ? nm : "", vkind(dt), name_of(c, u->src[0]));
      return true;
    }
    case OP_STORE: render_vec_store(c, u); return true;
    case OP_LOAD: render_vec_load(c, u, pos); return true;
    case OP_REDUCE: cut_after_loop(c, u, pos); return false;
    case OP_RANGE: case OP_ENDRANGE: case OP_ASSIGN: case OP_SINK: case OP_DEFINE_LOCAL: return false;
    default: render_vec_alu(c, u, pos); return true;
  }
}

/* an output loop split across the pool by core_id (THREAD), or a plain loop */
static void c_open_range(rctx *c, uop *u, const char *nm, const char *start, const char *bound) {
  const char *t = ctype(c, (tg_dtype)u->dtype);
  indent(c);
  if (u->aux[0] == AX_THREAD) {
    put(c->o, "%s %s_end = (%s)(%s*(core_id+1)/ncores);\n", t, nm, t, bound);
    indent(c);
    put(c->o, "for (%s %s = (%s)(%s*core_id/ncores); %s < %s_end; %s++) {\n", t, nm, t, bound, nm, nm, nm);
  } else {
    put(c->o, "for (%s %s = %s; %s < %s; %s++) {\n", t, nm, start, nm, bound, nm);
  }
  c->depth++;
}

/* a PACK's buffer: one per pool thread (worker, not the chunk core_id: a thread runs many chunks, one at a
 * time) in the kernel's static storage (pages touched only by the threads that use them), not on the stack:
 * the caller's thread, worker 0, may have a small stack. Beyond 64 threads (TG_THREADS) the stack it is */
static void c_define_local(rctx *c, uop *u) {
  const char *t = ctype(c, (tg_dtype)u->dtype);
  char *nm = fmt("local%" PRId64, u->arg.i);
  if (!nm) { c->oom = true; return; }
  indent(c);
  put(c->o, "static %s %s_all[64][%" PRId64 "] __attribute__((aligned(64)));\n", t, nm, u->aux[0]);
  indent(c);
  put(c->o, "%s *%s = worker < 64 ? %s_all[worker] : (%s *)(((unsigned long)__builtin_alloca(%" PRId64
            " * sizeof(%s) + 64) + 63) & ~63UL);\n", t, nm, nm, t, u->aux[0], t);
  set_name(c, u, nm);
}

static const char *c_type(tg_dtype dt) { return dtype_c_name(dt); }

static char *c_bitcast(tg_dtype from, tg_dtype to, const char *a) {
  return fmt("((union{%s a; %s b;}){.a=%s}).b", dtype_c_name(from), dtype_c_name(to), a);
}

static const dialect c_dialect = {
    .lang = "C",
    .type = c_type,
    .param_type = c_type,
    .i64_suffix = "LL",
    .u64_suffix = "ULL",
    .nan32 = "__builtin_nanf(\"\")",
    .inf32 = "__builtin_inff()",
    .nan64 = "__builtin_nan(\"\")",
    .inf64 = "__builtin_inf()",
    /* gcc builtins, which resolve to libm symbols of the host process at dlopen (kernels are linked -nostdlib) */
    .math32 = "__builtin_%sf(%s)",
    .math64 = "__builtin_%s(%s)",
    .half_native = true,
    .bitcast = c_bitcast,
    .open_range = c_open_range,
    .define_local = c_define_local,
    .vec_op = c_vec_op,
};

/* Address arithmetic in 64 bits. An int32 index added to a pointer is sign-extended where it is used: a 3x3
 * convolution's eight tap loads at base - 7 .. base took a 32-bit add and a movslq each (52 instructions for
 * its 16 FMAs a tap); from a 64-bit base gcc folds each offset into the load's displacement (34). A scalar
 * int32 ADD, MUL, IDIV, MOD, MAX or NEG whose every use is the index of a load or store, or another such value,
 * is declared long long: the same values, as indices fit in int32 (lower.c narrows only those that do), and
 * no value stored or computed on as data changes type. Found users first: the program lists each value before
 * its uses. false when out of memory (then none is) */
static bool address_op(int op) {
  return op == OP_ADD || op == OP_MUL || op == OP_IDIV || op == OP_MOD || op == OP_MAX || op == OP_NEG;
}

static bool plan_wide(const linear_program *p, uop_map *wide) {
  uop_map use = {0};  /* node -> 1: used, as an address only; 2: used otherwise too */
  bool ok = true;
  for (int i = p->n - 1; i >= 0 && ok; i--) {
    uop *u = p->ops[i];
    bool w = (intptr_t)umap_get(&use, u) == 1 && u->dtype == TG_INT32 && address_op(u->op) && !lp_is_vec(p, u);
    if (w) ok = umap_put(wide, u, (void *)1);
    for (int k = 0; k < u->nsrc && ok; k++) {
      bool addr = w || ((u->op == OP_LOAD || u->op == OP_STORE) && k == 1);
      intptr_t was = (intptr_t)umap_get(&use, u->src[k]), now = addr && was != 2 ? 1 : 2;
      if (now != was) ok = umap_put(&use, u->src[k], (void *)now);
    }
  }
  umap_free(&use);
  if (!ok) umap_free(wide);
  return ok;
}

char *render_c(const char *name, const linear_program *p, const kernel_info *info) {
  out o = {0};
  uop_map wide = {0};
  rctx c = {.d = &c_dialect, .o = &o, .p = p, .wide = plan_wide(p, &wide) ? &wide : NULL};
  uop **params = render_params(&c);
  if (!params) {
    umap_free(&wide);
    return render_finish(&c, &o);
  }
  put(&o, "/* %s%s%s */\n%s%s%s", name, info && info->opts[0] ? ": " : "", info ? info->opts : "", GCC_WORKAROUND,
      HALF_BF16_HELPERS, cstyle_bf16_helpers);
  bool has[TG_DTYPE_COUNT];
  program_dtypes(p, has);
  if (has[TG_FLOAT16])
    put(&o, "%s%s%s", CLANG_HALF_RUNTIME_BEGIN, cstyle_half_helpers, CLANG_HALF_RUNTIME_END);
  bool math = false, masked = false, tblock = false;
  for (int i = 0; i < p->n; i++) {
    uop *u = p->ops[i];
    uop_op op = (uop_op)u->op;
    math |= (op == OP_EXP2 || op == OP_LOG2 || op == OP_SIN) && lp_is_vec(p, u);
    /* contiguous vector accesses under a mask that varies along the lanes (render_vec_load/store) */
    masked |= op == OP_LOAD && u->arg.i > 0 && u->nsrc == 3 && lp_is_vec(p, u->src[2]);
    masked |= op == OP_LOAD && u->arg.i == LOAD_EVERY2;  /* its halves are loaded under masks */
    masked |= op == OP_STORE && u->arg.i > 0 && u->nsrc == 4 && lp_is_vec(p, u->src[3]);
    tblock |= op == OP_STORE && u->arg.i == STORE_TBLOCK;
  }
  if (p->lane) vec_header(&o, p->lanes, math, masked, tblock);
  row_plan *rows = plan_rows(p);
  if (rows) c_rows_header(&o, rows, p->lanes);
  put(&o, "static void %s_body(", name);
  for (int i = 0; i < p->nparams; i++) {
    tg_dtype dt = params[i] ? (tg_dtype)params[i]->dtype : TG_UINT8;
    put(&o, "%s%s%s* restrict data%d", i ? ", " : "", i && i >= p->nouts ? "const " : "", c_type(dt), i);
  }
  put(&o, "%slong long core_id, long long ncores, long long worker) {\n  (void)worker;\n", p->nparams ? ", " : "");
  int64_t *ahead = plan_prefetch(p);
  for (int i = 0; i < p->n && !c.oom; i++) {
    if (ahead && ahead[i]) {  /* integer arithmetic: the next tile's address may lie past the buffer's end */
      indent(&c);
      uop *u = p->ops[i];
      put(&o, "__builtin_prefetch((const void *)((unsigned long)%s + (unsigned long)(%s+%" PRId64 "LL)*%zuUL));\n",
          name_of(&c, u->src[0]), name_of(&c, u->src[1]), ahead[i], tg_dtype_size((tg_dtype)u->dtype));
    }
    if (!c_rows_op(&c, rows, i)) render_op(&c, p->ops[i], i);
  }
  free(ahead);
  row_plan_free(rows);
  put(&o, "}\n");
  /* the THREAD loop's trip count and the kernel's work, read by cpu.c to cut the loop into chunks */
  for (int i = 0; i < p->n; i++) {
    uop *u = p->ops[i];
    if (u->op == OP_RANGE && u->aux[0] == AX_THREAD && uop_is_const(u->src[0])) {
      put(&o, "const long long %s_split[2] = {%" PRId64 "LL, %.0fLL};\n", name, u->src[0]->arg.i,
          info && info->work >= 1 && info->work < 9e18 ? info->work : 0.0);
      break;
    }
  }
  put(&o, "void %s(void **bufs, long long core_id, long long ncores, long long worker) {\n  %s_body(", name, name);
  for (int i = 0; i < p->nparams; i++) {
    tg_dtype dt = params[i] ? (tg_dtype)params[i]->dtype : TG_UINT8;
    put(&o, "%s(%s*)bufs[%d]", i ? ", " : "", c_type(dt), i);
  }
  put(&o, "%score_id, ncores, worker);\n}\n", p->nparams ? ", " : "");
  free(params);
  umap_free(&wide);
  return render_finish(&c, &o);
}
