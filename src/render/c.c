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

#include "render/render.h"

typedef struct out { char *s; size_t n, cap; bool oom; } out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  if (o->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(o->s ? o->s + o->n : NULL, o->s ? o->cap - o->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) { o->oom = true; return; }
    if (o->s && o->n + (size_t)k < o->cap) { o->n += (size_t)k; return; }
    size_t nc = (o->cap + (size_t)k + 64) * 2;
    char *ns = mem_realloc(o->s, nc);
    if (!ns) { o->oom = true; return; }
    o->s = ns;
    o->cap = nc;
  }
}

typedef struct rctx {
  uop_map names;  /* node -> its expression text (owned) */
  const linear_program *p;
  out *o;
  int depth;
  bool oom;
} rctx;

/* half: _Float16 where the compiler has it; clang 14 on x86 has it only with AVX512-FP16, and __fp16 there
 * (a storage type: arithmetic in float, as gcc's _Float16 does without AVX512-FP16). bfloat16 is stored as
 * its upper 16 bits; float to bfloat16 rounds to nearest even, keeping nan a nan. */
#define HALF_BF16_HELPERS                                                                                    \
  "#if defined(__clang__) && !defined(__FLT16_MAX__)\ntypedef __fp16 tg_half;\n#else\ntypedef _Float16 tg_half;\n#endif\n" \
  "static inline float tg_bf2f(unsigned short b) { union { unsigned int u; float f; } x; "               \
  "x.u = (unsigned int)b << 16; return x.f; }\n"                                                        \
  "static inline unsigned short tg_f2bf(float f) { union { unsigned int u; float f; } x; x.f = f; "      \
  "if ((x.u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x.u >> 16) | 64u); "                  \
  "return (unsigned short)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16); }\n"

/* gcc 12 at -O2 -march=native (also -mavx2) miscompiles some loops of many accumulators with masked loads
 * once it if-converts and vectorizes them: a reduce over a padded loop (PADTO) with 96 scalar accumulators
 * summed the masked-off elements (found by tests/test_opt.c, TG_SEED=52; right at -O1, with SSE2, with
 * clang, and without loop if-conversion). Generated kernels do not need gcc's vectorizer for masked loops:
 * their vectors are explicit */
#define GCC_WORKAROUND "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC optimize(\"no-tree-loop-if-convert\")\n#endif\n"

static const char *ctype(tg_dtype dt) { return dtype_c_name(dt); }

static void set_name(rctx *c, uop *u, char *s) {
  if (!s || !umap_put(&c->names, u, s)) { free(s); c->oom = true; }
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = NULL;
  if (vasprintf(&s, f, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

static char *const_text(uop *u) {
  tg_dtype dt = (tg_dtype)u->dtype;
  if (dt == TG_BFLOAT16) return fmt("((unsigned short)0x%04x)", float_to_bf16((float)u->arg.f));
  if (dtype_is_float(dt)) {
    double v = u->arg.f;
    const char *suf = dt == TG_FLOAT64 ? "" : "f";
    char *s;
    if (isnan(v)) s = fmt("__builtin_nan%s(\"\")", suf);
    else if (isinf(v)) s = fmt("%s__builtin_inf%s()", v < 0 ? "-" : "", suf);
    else s = fmt("%.17g%s", v, suf);
    if (s && strspn(s + (s[0] == '-'), "0123456789") == strlen(s + (s[0] == '-')) - strlen(suf)) {
      /* "3f" is not C: make it "3.0f" */
      char *t = fmt("%.1f%s", v, suf);
      free(s);
      s = t;
    }
    if (s && (dt == TG_FLOAT16)) { char *t = fmt("((tg_half)%s)", s); free(s); s = t; }
    return s;
  }
  switch (dt) {
    case TG_BOOL: return fmt("%d", u->arg.i != 0);
    case TG_INT64: return u->arg.i == INT64_MIN ? fmt("(-9223372036854775807LL-1)") : fmt("%" PRId64 "LL", u->arg.i);
    case TG_UINT64: return fmt("%" PRIu64 "ULL", (uint64_t)u->arg.i);
    case TG_UINT32: return fmt("%" PRIu64 "u", (uint64_t)(uint32_t)u->arg.i);
    case TG_INT32: return u->arg.i == INT32_MIN ? fmt("(-2147483647-1)") : fmt("%" PRId64, u->arg.i);
    default: return fmt("((%s)%" PRId64 ")", ctype(dt), u->arg.i);
  }
}

static const char *name_of(rctx *c, uop *u) {
  char *s = umap_get(&c->names, u);
  if (s) return s;
  if (u->op == OP_CONST) {
    set_name(c, u, const_text(u));
    s = umap_get(&c->names, u);
  }
  return s ? s : "/*?*/0";
}

static void indent(rctx *c) { put(c->o, "%*s", 2 * c->depth + 2, ""); }

/* a libm builtin for the dtype: float16 computes in float */
static char *math1(const char *fn, tg_dtype dt, const char *a) {
  if (dt == TG_FLOAT64) return fmt("__builtin_%s(%s)", fn, a);
  if (dt == TG_FLOAT32) return fmt("__builtin_%sf(%s)", fn, a);
  return fmt("((%s)__builtin_%sf((float)%s))", ctype(dt), fn, a);
}

/* the scalar C expression of an ALU node over the source texts s */
static char *alu_text(uop *u, const char *const *s) {
  tg_dtype dt = (tg_dtype)u->dtype;
  const char *a = u->nsrc > 0 ? s[0] : "", *b = u->nsrc > 1 ? s[1] : "";
  bool fl = dtype_is_float(dt);
  switch (u->op) {
    case OP_NEG: return dt == TG_BOOL ? fmt("(!%s)", a) : fmt("(-%s)", a);
    case OP_ADD: return fmt("(%s+%s)", a, b);
    case OP_MUL: return fmt("(%s*%s)", a, b);
    case OP_FDIV: return fmt("(%s/%s)", a, b);
    case OP_IDIV:
    case OP_MOD: {
      const char *op = u->op == OP_IDIV ? "/" : "%";
      if (uop_is_const(u->src[1]) && u->src[1]->arg.i != 0) return fmt("(%s%s%s)", a, op, b);
      /* division by zero gives 0 instead of a trap: lanes outside a pad's mask compute it too */
      return fmt("(%s==0?(%s)0:(%s%s%s))", b, ctype(dt), a, op, b);
    }
    case OP_MAX: return fmt("(%s>%s?%s:%s)", a, b, a, b);
    case OP_CMPLT: return fmt("(%s<%s)", a, b);
    case OP_CMPNE: return fmt("(%s!=%s)", a, b);
    case OP_CMPEQ: return fmt("(%s==%s)", a, b);
    case OP_AND: return fmt("(%s&%s)", a, b);
    case OP_OR: return fmt("(%s|%s)", a, b);
    case OP_XOR: return fmt("(%s^%s)", a, b);
    case OP_SHL: return fmt("(%s<<%s)", a, b);
    case OP_SHR: return fmt("(%s>>%s)", a, b);
    case OP_WHERE: return fmt("(%s?%s:%s)", a, b, s[2]);
    case OP_RECIP: return fl ? fmt("((%s)1/%s)", ctype(dt), a) : fmt("(1/%s)", a);
    case OP_SQRT: return math1("sqrt", dt, a);
    case OP_EXP2: return math1("exp2", dt, a);
    case OP_LOG2: return math1("log2", dt, a);
    case OP_SIN: return math1("sin", dt, a);
    case OP_TRUNC: return math1("trunc", dt, a);
    case OP_POW: return fl ? math1("pow", dt, a) : NULL;
    case OP_CAST:
      if (dt == TG_BFLOAT16) return fmt("tg_f2bf((float)%s)", a);
      if (u->src[0]->dtype == TG_BFLOAT16) return dt == TG_BOOL ? fmt("(tg_bf2f(%s)!=0)", a) : fmt("((%s)tg_bf2f(%s))", ctype(dt), a);
      if (dt == TG_BOOL) return fmt("(%s!=0)", a);
      return fmt("((%s)%s)", ctype(dt), a);
    case OP_BITCAST:
      return fmt("((union{%s a; %s b;}){.a=%s}).b", ctype((tg_dtype)u->src[0]->dtype), ctype(dt), a);
    default: return NULL;
  }
}

/* ---- vectors ---------------------------------------------------------------------------------------------
 * Values that depend on the lane (linear_program.lane) are GCC/clang vector types of p->lanes elements:
 * tg_float_v, tg_int_v; a bool is a tg_int_v mask (-1 true, 0 false), as vector comparisons give. A scalar
 * source of a vector op is broadcast (tg_bc_*). Ops without a vector form run per lane in a small loop. */

static const char *vkind(tg_dtype dt) { return dt == TG_FLOAT32 ? "float" : dt == TG_INT64 ? "long" : "int"; }

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
  /* The compilers' own builtins (the same names in gcc and clang), not <immintrin.h>: that header alone
   * took 230 ms of a 270 ms compile. */
  if (isa) put(o, "#if defined(%s)\n", isa);
  if (isa && masked) {
    if (lanes == 16)
      put(o, "#define TG_MASK_(m) ((unsigned short)__builtin_ia32_cmpd512_mask(m, tg_bc_int(0), 4, (unsigned short)0xffff))\n"
             "static inline tg_float_v tg_mload_float(tg_int_v m, const float *p) { return __builtin_ia32_loadups512_mask(p, tg_bc_float(0), TG_MASK_(m)); }\n"
             "static inline tg_int_v tg_mload_int(tg_int_v m, const int *p) { return __builtin_ia32_loaddqusi512_mask(p, tg_bc_int(0), TG_MASK_(m)); }\n"
             "static inline void tg_mstore_float(float *p, tg_int_v m, tg_float_v v) { __builtin_ia32_storeups512_mask(p, v, TG_MASK_(m)); }\n"
             "static inline void tg_mstore_int(int *p, tg_int_v m, tg_int_v v) { __builtin_ia32_storedqusi512_mask(p, v, TG_MASK_(m)); }\n");
    else
      put(o, "static inline tg_float_v tg_mload_float(tg_int_v m, const float *p) { return __builtin_ia32_maskloadps256((const tg_float_v *)p, m); }\n"
             "static inline tg_int_v tg_mload_int(tg_int_v m, const int *p) { return __builtin_ia32_maskloadd256((const tg_int_v *)p, m); }\n"
             "static inline void tg_mstore_float(float *p, tg_int_v m, tg_float_v v) { __builtin_ia32_maskstoreps256((tg_float_v *)p, m, v); }\n"
             "static inline void tg_mstore_int(int *p, tg_int_v m, tg_int_v v) { __builtin_ia32_maskstored256((tg_int_v *)p, m, v); }\n");
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
  put(o, "#ifndef TG_HAVE_VSQRT\n"
         "static inline tg_float_v tg_sqrt_v(tg_float_v x) { for (int l = 0; l < %d; l++) x[l] = __builtin_sqrtf(x[l]); return x; }\n"
         "#endif\n", lanes);
  if (tblock) {  /* a lanes x lanes transpose (STORE_TBLOCK): halves, quarters, ... of the rows swapped */
    put(o, "static inline void tg_tblock(float *d, long ds, const float *s, long ss) {\n  tg_float_v r[%d];\n", lanes);
    put(o, "  for (int i = 0; i < %d; i++) r[i] = *(const tg_float_vu *)(s + i * ss);\n", lanes);
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
      if (dt == st) r = fmt("%s", s[0]);
      else if (dt == TG_BOOL) r = fmt(L ? "__builtin_convertvector(%s!=tg_bc_%s(0), tg_int_v)" : "(%s!=tg_bc_%s(0))", s[0], vkind(st));
      else if (st == TG_BOOL) r = dt == TG_INT32 ? fmt("(-%s)", s[0]) : fmt("__builtin_convertvector(-%s, tg_%s_v)", s[0], vkind(dt));
      else r = fmt("__builtin_convertvector(%s, tg_%s_v)", s[0], vkind(dt));
      break;
    case OP_BITCAST: r = fmt("((tg_%s_v)%s)", vkind(dt), s[0]); break;
    default: break;
  }
  for (int i = 0; i < 3; i++) free(s[i]);
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
    e = alu_text(u, (const char *const *)s);
    put(c->o, "tg_%s_v %s;\n", vkind(dt), nm);
    per_lane_loop(c);
    if (dt == TG_BOOL) put(c->o, "%s[l_] = -(int)(%s);\n", nm, e ? e : "0");
    else put(c->o, "%s[l_] = %s;\n", nm, e ? e : "0");
    for (int i = 0; i < 3; i++) free(s[i]);
    if (!e) {
      c->oom = true;
      tg_set_error(TG_ERR_INTERNAL, "render c: no C for %s of %s", uop_op_name((uop_op)u->op), tg_dtype_name(dt));
    }
  }
  free(e);
  set_name(c, u, nm);
}

static void render_vec_load(rctx *c, uop *u, int pos) {
  tg_dtype dt = (tg_dtype)u->dtype;
  char *nm = fmt("val%d", pos);
  const char *p = name_of(c, u->src[0]), *k = vkind(dt);
  indent(c);
  if (u->arg.i > 0 && u->nsrc == 3 && is_vec(c, u->src[2]) && dt != TG_INT64) {  /* contiguous, masked */
    put(c->o, "tg_%s_v %s = tg_mload_%s(%s, %s+%s);\n", k, nm, k, name_of(c, u->src[2]), p, name_of(c, u->src[1]));
  } else if (u->arg.i > 0 && u->nsrc == 3 && is_vec(c, u->src[2])) {  /* contiguous, masked lane by lane */
    const char *m = name_of(c, u->src[2]), *i = name_of(c, u->src[1]);
    put(c->o, "tg_%s_v %s; if (tg_all(%s)) %s = *(const tg_%s_vu*)(%s+%s); else ", k, nm, m, nm, k, p, i);
    put(c->o, "for (int l_ = 0; l_ < %d; l_++) %s[l_] = %s[l_] ? %s[%s+l_] : 0;\n", c->p->lanes, nm, m, p, i);
  } else if (u->arg.i > 0) {  /* contiguous: one vector load at the (scalar) index */
    if (u->nsrc == 3)
      put(c->o, "tg_%s_v %s = tg_bc_%s(0); if (%s) %s = *(const tg_%s_vu*)(%s+%s);\n", k, nm, k, name_of(c, u->src[2]), nm,
          k, p, name_of(c, u->src[1]));
    else
      put(c->o, "tg_%s_v %s = *(const tg_%s_v%s*)(%s+%s);\n", k, nm, k, u->arg.i == 2 ? "" : "u", p, name_of(c, u->src[1]));
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
    put(c->o, "tg_mstore_%s(%s+%s, %s, %s);\n", k, p, name_of(c, u->src[1]), name_of(c, u->src[3]), v);
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

/* the value of a REDUCE: its accumulator, or the lanes of a vector accumulator reduced when it reduces the lane */
static void render_reduce(rctx *c, uop *u, int pos) {
  uop *acc = umap_get(&c->p->accs, u);
  if (!acc) {
    c->oom = true;
    tg_set_error(TG_ERR_INTERNAL, "render c: a REDUCE without an accumulator");
    return;
  }
  const char *an = name_of(c, acc);
  if (is_vec(c, u) || acc->aux[0] == 0) {
    set_name(c, u, fmt("%s", an));
    return;
  }
  char *nm = fmt("red%d", pos);
  tg_dtype dt = (tg_dtype)u->dtype;
  indent(c);
  put(c->o, "%s %s = %s[0];\n", ctype(dt), nm, an);
  indent(c);
  put(c->o, "for (int l_ = 1; l_ < %d; l_++) ", c->p->lanes);
  if (u->arg.i == OP_MAX) put(c->o, "%s = %s > %s[l_] ? %s : %s[l_];\n", nm, nm, an, nm, an);
  else put(c->o, "%s = %s %s %s[l_];\n", nm, nm, u->arg.i == OP_MUL ? "*" : "+", an);
  set_name(c, u, nm);
}

static void render_op(rctx *c, uop *u, int pos) {
  tg_dtype dt = (tg_dtype)u->dtype;
  bool vec = is_vec(c, u);
  switch (u->op) {
    case OP_RANGE: {
      const char *bound = name_of(c, u->src[0]);
      char *nm = fmt("ridx%" PRId64, u->arg.i);
      set_name(c, u, nm);
      indent(c);
      if (u == c->p->lane) {
        put(c->o, "tg_%s_v %s = {", vkind(dt), nm);
        for (int l = 0; l < c->p->lanes; l++) put(c->o, "%s%d", l ? "," : "", l);
        put(c->o, "};\n");
        return;
      }
      if (u->aux[0] == AX_THREAD) {
        put(c->o, "%s %s_end = (%s)(%s*(core_id+1)/ncores);\n", ctype(dt), nm, ctype(dt), bound);
        indent(c);
        put(c->o, "for (%s %s = (%s)(%s*core_id/ncores); %s < %s_end; %s++) {\n", ctype(dt), nm, ctype(dt), bound, nm, nm, nm);
      } else {
        put(c->o, "for (%s %s = 0; %s < %s; %s++) {\n", ctype(dt), nm, nm, bound, nm);
      }
      c->depth++;
      return;
    }
    case OP_ENDRANGE:
      c->depth--;
      indent(c);
      put(c->o, "}\n");
      return;
    case OP_DEFINE_ACC: {
      char *nm = fmt("acc%" PRId64, u->arg.i);
      set_name(c, u, nm);
      indent(c);
      if (vec) put(c->o, "tg_%s_v %s = tg_bc_%s(%s);\n", vkind(dt), nm, vkind(dt), name_of(c, u->src[0]));
      else put(c->o, "%s %s = %s;\n", ctype(dt), nm, name_of(c, u->src[0]));
      return;
    }
    case OP_ASSIGN:
      indent(c);
      put(c->o, "%s = %s;\n", name_of(c, u->src[0]), name_of(c, u->src[1]));
      return;
    case OP_REDUCE:
      render_reduce(c, u, pos);
      return;
    case OP_STORE:
      if (u->arg.i == STORE_TBLOCK) {
        indent(c);
        put(c->o, "tg_tblock(%s+%s, %s, %s+%s, %s);\n", name_of(c, u->src[0]), name_of(c, u->src[1]), name_of(c, u->src[5]),
            name_of(c, u->src[2]), name_of(c, u->src[3]), name_of(c, u->src[4]));
        set_name(c, u->src[6], fmt("%s", name_of(c, u->src[0])));  /* the panel's loads read the fill */
        return;
      }
      if (vec) { render_vec_store(c, u); return; }
      indent(c);
      if (u->nsrc == 4) put(c->o, "if (%s) ", name_of(c, u->src[3]));
      put(c->o, "%s[%s] = %s;\n", name_of(c, u->src[0]), name_of(c, u->src[1]), name_of(c, u->src[2]));
      if (u->src[0]->op == OP_DEFINE_LOCAL) set_name(c, u, fmt("%s", name_of(c, u->src[0])));  /* loads read it */
      return;
    case OP_DEFINE_LOCAL: {
      /* one buffer per core in the kernel's static storage (pages touched only by the cores that use them),
       * not on the stack: the caller's thread, which runs core 0, may have a small stack. Beyond 64 cores
       * (TG_THREADS) the stack it is */
      char *nm = fmt("local%" PRId64, u->arg.i);
      indent(c);
      put(c->o, "static %s %s_all[64][%" PRId64 "] __attribute__((aligned(64)));\n", ctype(dt), nm, u->aux[0]);
      indent(c);
      put(c->o, "%s *%s = core_id < 64 ? %s_all[core_id] : (%s *)(((unsigned long)__builtin_alloca(%" PRId64
                " * sizeof(%s) + 64) + 63) & ~63UL);\n", ctype(dt), nm, nm, ctype(dt), u->aux[0], ctype(dt));
      set_name(c, u, nm);
      return;
    }
    case OP_SINK:
      return;
    case OP_LOAD: {
      if (vec) { render_vec_load(c, u, pos); return; }
      char *nm = fmt("val%d", pos);
      set_name(c, u, nm);
      indent(c);
      if (u->nsrc == 3)
        put(c->o, "%s %s = %s ? %s[%s] : (%s)0;\n", ctype(dt), nm, name_of(c, u->src[2]), name_of(c, u->src[0]),
            name_of(c, u->src[1]), ctype(dt));
      else
        put(c->o, "%s %s = %s[%s];\n", ctype(dt), nm, name_of(c, u->src[0]), name_of(c, u->src[1]));
      return;
    }
    default: break;
  }
  if (vec) { render_vec_alu(c, u, pos); return; }
  const char *s[3] = {NULL, NULL, NULL};
  for (int i = 0; i < u->nsrc && i < 3; i++) s[i] = name_of(c, u->src[i]);
  char *e = alu_text(u, s);
  if (!e) {
    c->oom = true;
    tg_set_error(TG_ERR_INTERNAL, "render c: no C for %s of %s", uop_op_name((uop_op)u->op), tg_dtype_name(dt));
    return;
  }
  char *nm = fmt("alu%d", pos);
  indent(c);
  put(c->o, "%s %s = %s;\n", ctype(dt), nm, e);
  free(e);
  set_name(c, u, nm);
}

char *render_c(const char *name, const linear_program *p, const kernel_info *info) {
  out o = {0};
  rctx c = {.o = &o, .p = p};
  /* parameters: dtype of each slot from its PARAM node */
  uop **params = mem_calloc((size_t)p->nparams + 1, sizeof *params);
  if (!params) return NULL;
  for (int i = 0; i < p->n; i++)
    for (int s = 0; s < p->ops[i]->nsrc; s++) {
      uop *q = p->ops[i]->src[s];
      if (q->op == OP_PARAM && q->arg.i < p->nparams) params[q->arg.i] = q;
    }
  put(&o, "/* %s%s%s */\n%s%s", name, info && info->opts[0] ? ": " : "", info ? info->opts : "", GCC_WORKAROUND,
      HALF_BF16_HELPERS);
  bool math = false, masked = false, tblock = false;
  for (int i = 0; i < p->n; i++) {
    uop *u = p->ops[i];
    uop_op op = (uop_op)u->op;
    math |= (op == OP_EXP2 || op == OP_LOG2 || op == OP_SIN) && lp_is_vec(p, u);
    /* contiguous vector accesses under a mask that varies along the lanes (render_vec_load/store) */
    masked |= op == OP_LOAD && u->arg.i > 0 && u->nsrc == 3 && lp_is_vec(p, u->src[2]);
    masked |= op == OP_STORE && u->arg.i > 0 && u->nsrc == 4 && lp_is_vec(p, u->src[3]);
    tblock |= op == OP_STORE && u->arg.i == STORE_TBLOCK;
  }
  if (p->lane) vec_header(&o, p->lanes, math, masked, tblock);
  put(&o, "static void %s_body(", name);
  for (int i = 0; i < p->nparams; i++) {
    tg_dtype dt = params[i] ? (tg_dtype)params[i]->dtype : TG_UINT8;
    put(&o, "%s%s%s* restrict data%d", i ? ", " : "", i ? "const " : "", ctype(dt), i);
    if (params[i]) set_name(&c, params[i], fmt("data%d", i));
  }
  put(&o, "%slong long core_id, long long ncores) {\n", p->nparams ? ", " : "");
  for (int i = 0; i < p->n && !c.oom; i++) render_op(&c, p->ops[i], i);
  put(&o, "}\n");
  put(&o, "void %s(void **bufs, long long core_id, long long ncores) {\n  %s_body(", name, name);
  for (int i = 0; i < p->nparams; i++) {
    tg_dtype dt = params[i] ? (tg_dtype)params[i]->dtype : TG_UINT8;
    put(&o, "%s(%s*)bufs[%d]", i ? ", " : "", ctype(dt), i);
  }
  put(&o, "%score_id, ncores);\n}\n", p->nparams ? ", " : "");
  free(params);
  for (size_t i = 0; i < c.names.cap; i++)
    if (c.names.keys[i]) free(c.names.vals[i]);
  umap_free(&c.names);
  if (c.oom || o.oom) {
    free(o.s);
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "render c: out of memory");
    return NULL;
  }
  return o.s;
}
