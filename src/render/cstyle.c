/* cstyle.c — the part of every C-style renderer that does not depend on the language (cstyle.h): values get
 * names (alu12, val3, acc0, ridx1), constants and ALU expressions are written with the dialect's types,
 * suffixes and math, and each statement of the linear program is printed at its loop depth. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render/cstyle.h"

void put(out *o, const char *fmt, ...) {
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

char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = NULL;
  if (vasprintf(&s, f, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

const char cstyle_bf16_helpers[] =
    "TG_INLINE float tg_bf2f(unsigned short b) { return TG_U2F((unsigned int)b << 16); }\n"
    "TG_INLINE unsigned short tg_f2bf(float f) { unsigned int x = TG_F2U(f); "
    "if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 64u); "
    "return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); }\n";

/* float16 from float: NaN stays a quiet NaN, |f| >= 65520 is infinity, below 2^-14 a subnormal rounded from
 * the 24-bit significand, else the exponent rebased and the 13 dropped bits rounded to nearest even */
const char cstyle_half_helpers[] =
    "TG_INLINE float tg_h2f(unsigned short h) { unsigned int s = (unsigned int)(h & 0x8000u) << 16, "
    "e = ((unsigned int)h >> 10) & 0x1fu, m = h & 0x3ffu; "
    "if (e == 0x1fu) return TG_U2F(s | 0x7f800000u | (m << 13)); "
    "if (e) return TG_U2F(s | ((e + 112u) << 23) | (m << 13)); "
    "float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; }\n"
    "TG_INLINE unsigned short tg_f2h(float f) { unsigned int x = TG_F2U(f), s = (x >> 16) & 0x8000u, "
    "a = x & 0x7fffffffu; "
    "if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u | ((a >> 13) & 0x3ffu)); "
    "if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u); "
    "if (a < 0x38800000u) { unsigned int sh = 126u - (a >> 23); if (sh > 24u) return (unsigned short)s; "
    "unsigned int m = (a & 0x7fffffu) | 0x800000u, q = m >> sh, r = m & ((1u << sh) - 1u), hf = 1u << (sh - 1u); "
    "if (r > hf || (r == hf && (q & 1u))) q++; return (unsigned short)(s | q); } "
    "a -= 0x38000000u; a += 0xfffu + ((a >> 13) & 1u); return (unsigned short)(s | (a >> 13)); }\n";

void program_dtypes(const linear_program *p, bool has[TG_DTYPE_COUNT]) {
  for (int i = 0; i < TG_DTYPE_COUNT; i++) has[i] = false;
  for (int i = 0; i < p->n; i++) {
    has[p->ops[i]->dtype % TG_DTYPE_COUNT] = true;
    for (int k = 0; k < p->ops[i]->nsrc; k++) has[p->ops[i]->src[k]->dtype % TG_DTYPE_COUNT] = true;
  }
}

void render_fail(rctx *c, const char *what, const uop *u) {
  c->oom = true;
  if (u)
    tg_set_error(TG_ERR_INTERNAL, "render %s: %s (%s of %s)", c->d->lang, what, uop_op_name((uop_op)u->op),
                 tg_dtype_name((tg_dtype)u->dtype));
  else
    tg_set_error(TG_ERR_INTERNAL, "render %s: %s", c->d->lang, what);
}

const char *ctype(rctx *c, tg_dtype dt) { return c->d->type(dt); }

void set_name(rctx *c, uop *u, char *s) {
  char *old = umap_get(&c->names, u);  /* a loop opened again (around values hoisted between) is named again */
  if (!s || !umap_put(&c->names, u, s)) { free(s); c->oom = true; return; }
  if (old != s) free(old);
}

/* float16 storage bits (dialects without a half type) or bfloat16's from a float expression */
static char *to16(rctx *c, tg_dtype dt, const char *f) {
  return fmt("%s(%s)", dt == TG_BFLOAT16 ? "tg_f2bf" : "tg_f2h", f);
}

static bool stored16(rctx *c, tg_dtype dt) { return dt == TG_BFLOAT16 || (dt == TG_FLOAT16 && !c->d->half_native); }

static char *const_text(rctx *c, uop *u) {
  const dialect *d = c->d;
  tg_dtype dt = (tg_dtype)u->dtype;
  if (dt == TG_BFLOAT16) return fmt("((unsigned short)0x%04x)", float_to_bf16((float)u->arg.f));
  if (dt == TG_FLOAT16 && !d->half_native) return fmt("((unsigned short)0x%04x)", float_to_half((float)u->arg.f));
  if (dtype_is_float(dt)) {
    double v = u->arg.f;
    bool f64 = dt == TG_FLOAT64;
    const char *suf = f64 ? "" : "f";
    char *s;
    if (isnan(v)) s = fmt("%s", f64 ? d->nan64 : d->nan32);
    else if (isinf(v)) s = fmt("%s%s", v < 0 ? "-" : "", f64 ? d->inf64 : d->inf32);
    else s = fmt("%.17g%s", v, suf);
    if (s && !isnan(v) && !isinf(v) &&
        strspn(s + (s[0] == '-'), "0123456789") == strlen(s + (s[0] == '-')) - strlen(suf)) {
      /* "3f" is not C: make it "3.0f" */
      char *t = fmt("%.1f%s", v, suf);
      free(s);
      s = t;
    }
    if (s && dt == TG_FLOAT16) { char *t = fmt("((%s)%s)", ctype(c, dt), s); free(s); s = t; }
    return s;
  }
  switch (dt) {
    case TG_BOOL: return fmt("%d", u->arg.i != 0);
    case TG_INT64:
      return u->arg.i == INT64_MIN ? fmt("(-9223372036854775807%s-1)", d->i64_suffix)
                                   : fmt("%" PRId64 "%s", u->arg.i, d->i64_suffix);
    case TG_UINT64: return fmt("%" PRIu64 "%s", (uint64_t)u->arg.i, d->u64_suffix);
    case TG_UINT32: return fmt("%" PRIu64 "u", (uint64_t)(uint32_t)u->arg.i);
    case TG_INT32: return u->arg.i == INT32_MIN ? fmt("(-2147483647-1)") : fmt("%" PRId64, u->arg.i);
    default: return fmt("((%s)%" PRId64 ")", ctype(c, dt), u->arg.i);
  }
}

const char *name_of(rctx *c, uop *u) {
  char *s = umap_get(&c->names, u);
  if (s) return s;
  if (u->op == OP_CONST) {
    set_name(c, u, const_text(c, u));
    s = umap_get(&c->names, u);
  }
  return s ? s : "/*?*/0";
}

void indent(rctx *c) { put(c->o, "%*s", 2 * c->depth + 2, ""); }

/* a math function for the dtype: float16 computes in float */
static char *math1(rctx *c, const char *fn, tg_dtype dt, const char *a) {
  if (dt == TG_FLOAT64) return fmt(c->d->math64, fn, a);
  if (dt == TG_FLOAT32) return fmt(c->d->math32, fn, a);
  char *f = fmt("(float)%s", a), *r = f ? fmt(c->d->math32, fn, f) : NULL, *t = r ? fmt("((%s)%s)", ctype(c, dt), r) : NULL;
  free(f);
  free(r);
  return t;
}

char *alu_text(rctx *c, uop *u, const char *const *s) {
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
      return fmt("(%s==0?(%s)0:(%s%s%s))", b, ctype(c, dt), a, op, b);
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
    case OP_RECIP: return fl ? fmt("((%s)1/%s)", ctype(c, dt), a) : fmt("(1/%s)", a);
    case OP_SQRT: return math1(c, "sqrt", dt, a);
    case OP_EXP2: return math1(c, "exp2", dt, a);
    case OP_LOG2: return math1(c, "log2", dt, a);
    case OP_SIN: return math1(c, "sin", dt, a);
    case OP_TRUNC: return math1(c, "trunc", dt, a);
    case OP_POW: return fl ? math1(c, "pow", dt, a) : NULL;
    case OP_CAST: {
      tg_dtype st = (tg_dtype)u->src[0]->dtype;
      if (stored16(c, dt)) {
        if (st == dt) return fmt("%s", a);
        char *f = stored16(c, st) ? fmt("%s(%s)", st == TG_BFLOAT16 ? "tg_bf2f" : "tg_h2f", a) : fmt("(float)%s", a);
        char *r = f ? to16(c, dt, f) : NULL;
        free(f);
        return r;
      }
      if (stored16(c, st)) {
        const char *cv = st == TG_BFLOAT16 ? "tg_bf2f" : "tg_h2f";
        return dt == TG_BOOL ? fmt("(%s(%s)!=0)", cv, a) : fmt("((%s)%s(%s))", ctype(c, dt), cv, a);
      }
      if (dt == TG_BOOL) return fmt("(%s!=0)", a);
      return fmt("((%s)%s)", ctype(c, dt), a);
    }
    case OP_BITCAST: return c->d->bitcast((tg_dtype)u->src[0]->dtype, dt, a);
    default: return NULL;
  }
}

/* the value of a REDUCE: its accumulator, or the lanes of a vector accumulator reduced when it reduces the lane */
static void render_reduce(rctx *c, uop *u, int pos) {
  uop *acc = umap_get(&c->p->accs, u);
  if (!acc) {
    render_fail(c, "a REDUCE without an accumulator", u);
    return;
  }
  const char *an = name_of(c, acc);
  if ((c->p->lane && lp_is_vec(c->p, u)) || acc->aux[0] == 0) {
    set_name(c, u, fmt("%s", an));
    return;
  }
  char *nm = fmt("red%d", pos);
  tg_dtype dt = (tg_dtype)u->dtype;
  indent(c);
  put(c->o, "%s %s = %s[0];\n", ctype(c, dt), nm, an);
  indent(c);
  put(c->o, "for (int l_ = 1; l_ < %d; l_++) ", c->p->lanes);
  if (u->arg.i == OP_MAX) put(c->o, "%s = %s > %s[l_] ? %s : %s[l_];\n", nm, nm, an, nm, an);
  else put(c->o, "%s = %s %s %s[l_];\n", nm, nm, u->arg.i == OP_MUL ? "*" : "+", an);
  set_name(c, u, nm);
}

void render_op(rctx *c, uop *u, int pos) {
  if (c->d->vec_op && c->d->vec_op(c, u, pos)) return;
  tg_dtype dt = (tg_dtype)u->dtype;
  switch (u->op) {
    case OP_RANGE: {
      uop *b = c->p->bounds && c->p->bounds[pos] ? c->p->bounds[pos] : u->src[0];
      uop *st = c->p->starts ? c->p->starts[pos] : NULL;
      const char *bound = name_of(c, b), *start = st ? name_of(c, st) : "0";
      char *nm = fmt("ridx%" PRId64, u->arg.i);
      set_name(c, u, nm);
      if (nm) c->d->open_range(c, u, nm, start, bound);
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
      put(c->o, "%s %s = %s;\n", ctype(c, dt), nm, name_of(c, u->src[0]));
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
      if (u->arg.i == STORE_TBLOCK) { render_fail(c, "a transposing block copy outside C's vectors", u); return; }
      if (u->arg.i == STORE_EVERY2) { render_fail(c, "a strided vector copy outside C's vectors", u); return; }
    {
      /* a group's local memory: every item has read the last values before any writes, and has written before
       * any reads */
      bool fence = u->src[0]->op == OP_DEFINE_LOCAL && c->d->barrier;
      if (fence) { indent(c); put(c->o, "%s\n", c->d->barrier); }
      indent(c);
      if (u->nsrc == 4) put(c->o, "if (%s) ", name_of(c, u->src[3]));
      put(c->o, "%s[%s] = %s;\n", name_of(c, u->src[0]), name_of(c, u->src[1]), name_of(c, u->src[2]));
      if (fence) { indent(c); put(c->o, "%s\n", c->d->barrier); }
      if (u->src[0]->op == OP_DEFINE_LOCAL) set_name(c, u, fmt("%s", name_of(c, u->src[0])));  /* loads read it */
      return;
    }
    case OP_DEFINE_LOCAL:
      if (c->d->define_local) c->d->define_local(c, u);
      else render_fail(c, "no local buffers in this language", u);
      return;
    case OP_SINK:
      return;
    case OP_LOAD: {
      char *nm = fmt("val%d", pos);
      set_name(c, u, nm);
      indent(c);
      if (u->nsrc == 3)
        put(c->o, "%s %s = %s ? %s[%s] : (%s)0;\n", ctype(c, dt), nm, name_of(c, u->src[2]), name_of(c, u->src[0]),
            name_of(c, u->src[1]), ctype(c, dt));
      else
        put(c->o, "%s %s = %s[%s];\n", ctype(c, dt), nm, name_of(c, u->src[0]), name_of(c, u->src[1]));
      return;
    }
    default: break;
  }
  const char *s[3] = {NULL, NULL, NULL};
  for (int i = 0; i < u->nsrc && i < 3; i++) s[i] = name_of(c, u->src[i]);
  char *e = alu_text(c, u, s);
  if (!e) {
    render_fail(c, "no expression for this op", u);
    return;
  }
  char *nm = fmt("alu%d", pos);
  indent(c);
  put(c->o, "%s %s = %s;\n", c->wide && umap_get(c->wide, u) ? "long long" : ctype(c, dt), nm, e);
  free(e);
  set_name(c, u, nm);
}

uop **render_params(rctx *c) {
  const linear_program *p = c->p;
  uop **params = mem_calloc((size_t)p->nparams + 1, sizeof *params);
  if (!params) {
    c->oom = true;
    return NULL;
  }
  for (int i = 0; i < p->n; i++)
    for (int s = 0; s < p->ops[i]->nsrc; s++) {
      uop *q = p->ops[i]->src[s];
      if (q->op == OP_PARAM && q->arg.i < p->nparams) params[q->arg.i] = q;
    }
  for (int i = 0; i < p->nparams; i++)
    if (params[i]) set_name(c, params[i], fmt("data%d", i));
  return params;
}

char *render_finish(rctx *c, out *o) {
  for (size_t i = 0; i < c->names.cap; i++)
    if (c->names.keys[i]) free(c->names.vals[i]);
  umap_free(&c->names);
  if (c->oom || o->oom) {
    free(o->s);
    if (!tg_error_status()) tg_set_error(TG_ERR_NOMEM, "render %s: out of memory", c->d->lang);
    return NULL;
  }
  return o->s;
}
