/* decompose.c — rewrites a kernel into what a C compiler can do: bfloat16 has no arithmetic in C (gcc 12
 * rejects __bf16 math, NOTES), so every ALU op on bfloat16 computes in float32 between casts; the renderer
 * then only needs the two conversions. */
#include "codegen/codegen.h"

static bool is_bf16(const uop *u) { return u->dtype == TG_BFLOAT16; }

static uop *rule_bf16_alu(void *ctx, uop *u, uop **cap) {
  if (!uop_is_alu((uop_op)u->op) || u->op == OP_CAST || u->op == OP_BITCAST) return NULL;
  bool any = is_bf16(u);
  for (int i = 0; i < u->nsrc; i++) any |= is_bf16(u->src[i]);
  if (!any) return NULL;
  uop *s[3];
  for (int i = 0; i < u->nsrc; i++) s[i] = is_bf16(u->src[i]) ? uop_cast(u->src[i], TG_FLOAT32) : u->src[i];
  tg_dtype dt = is_bf16(u) ? TG_FLOAT32 : (tg_dtype)u->dtype;
  uop *r = uop_alu((uop_op)u->op, dt, u->nsrc, s);
  return is_bf16(u) ? uop_cast(r, TG_BFLOAT16) : r;
}

static const rule decompose_rules[] = {
    {"_", rule_bf16_alu},
    {NULL, NULL},
};

static matcher *dm;

uop *decompose_dtypes(uop *ast) {
  if (!dm && !(dm = matcher_new(decompose_rules))) return NULL;
  return graph_rewrite(ast, dm, NULL, false);
}
