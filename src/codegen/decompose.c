/* decompose.c — rewrites a kernel into what its target can do, and does cheaply: bfloat16 has no arithmetic
 * in C (gcc 12 rejects __bf16 math, NOTES), so every ALU op on bfloat16 computes in float32 between casts (the
 * renderer then only needs the two conversions), and so does float16 on a target without half arithmetic
 * (GPU dialects: PoCL has none, CUDA's needs a header); a division by a value that does not change in the loops the
 * division runs in is a multiplication by its reciprocal, computed once outside them. */
#include "codegen/codegen.h"

typedef struct decompose_ctx { loop_sets ls; bool half_alu; } decompose_ctx;

/* a dtype stored in 16 bits and computed in float32 */
static bool is_storage16(const decompose_ctx *d, const uop *u) {
  return u->dtype == TG_BFLOAT16 || (u->dtype == TG_FLOAT16 && !d->half_alu);
}

static uop *rule_bf16_alu(void *ctx, uop *u, uop **cap) {
  decompose_ctx *d = ctx;
  if (!uop_is_alu((uop_op)u->op) || u->op == OP_CAST || u->op == OP_BITCAST) return NULL;
  bool any = is_storage16(d, u);
  for (int i = 0; i < u->nsrc; i++) any |= is_storage16(d, u->src[i]);
  if (!any) return NULL;
  uop *s[3];
  for (int i = 0; i < u->nsrc; i++) s[i] = is_storage16(d, u->src[i]) ? uop_cast(u->src[i], TG_FLOAT32) : u->src[i];
  tg_dtype dt = is_storage16(d, u) ? TG_FLOAT32 : (tg_dtype)u->dtype;
  uop *r = uop_alu((uop_op)u->op, dt, u->nsrc, s);
  return is_storage16(d, u) ? uop_cast(r, (tg_dtype)u->dtype) : r;
}

/* a reduction of a 16-bit storage dtype accumulates in float32 and rounds once at the end: its bits are not
 * numbers the target can compare or add (a float16 max on a GPU compared ushort bit patterns, and -inf's bits
 * beat every value: softmax(dtype=float16) on OpenCL was inf everywhere) */
static uop *rule_reduce16(void *ctx, uop *u, uop **cap) {
  decompose_ctx *d = ctx;
  if (u->op != OP_REDUCE || !is_storage16(d, u) || u->nsrc > 16) return NULL;
  uop *s[16];
  for (int i = 0; i < u->nsrc; i++) s[i] = u->src[i];
  if (!(s[0] = uop_cast(u->src[0], TG_FLOAT32))) return NULL;
  uop *r = uop_new(OP_REDUCE, TG_FLOAT32, u->nsrc, s, u->arg, u->naux, u->aux);
  return r ? uop_cast(r, (tg_dtype)u->dtype) : NULL;
}

/* x / y -> x * (1 / y) when y depends on fewer loops than x: the reciprocal is hoisted out of the loops only
 * x runs in. A vector division costs 10-16 cycles against 0.5 for a multiplication (Adam's update divides
 * every element by the step's two bias corrections: its update kernel for a 784x512 weight, with the vector
 * square root, 593 -> 102 us). The result
 * is within 1 ulp of the division, as tinygrad's, whose every division is a multiplication by a reciprocal. */
static uop *rule_invariant_div(void *ctx, uop *u, uop **cap) {
  if (u->op != OP_FDIV || (u->dtype != TG_FLOAT32 && u->dtype != TG_FLOAT64)) return NULL;
  loop_sets *ls = &((decompose_ctx *)ctx)->ls;
  uint64_t x = loops_free(ls, u->src[0]), y = loops_free(ls, u->src[1]);
  if (ls->fail || (x | y) == y) return NULL;  /* y already runs in every loop x does */
  uop *r = uop_alu(OP_RECIP, (tg_dtype)u->dtype, 1, &u->src[1]);
  return r ? uop_alu(OP_MUL, (tg_dtype)u->dtype, 2, (uop *[]){u->src[0], r}) : NULL;
}

static const rule decompose_rules[] = {
    {"_", rule_bf16_alu},
    {"(REDUCE ...)", rule_reduce16},
    {"(FDIV _ _)", rule_invariant_div},
    {NULL, NULL},
};

static matcher *dm;

uop *decompose_dtypes(uop *ast, bool half_alu) {
  if (!dm && !(dm = matcher_new(decompose_rules))) return NULL;
  decompose_ctx d = {.half_alu = half_alu};
  uop *r = graph_rewrite(ast, dm, &d, false);
  loop_sets_free(&d.ls);
  return r;
}
