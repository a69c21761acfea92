/* ops_math_known.c — shape arithmetic on the host. Exported models compute shapes with chains such as
 * Shape -> Gather -> Mul/Div/Add -> Concat -> Reshape; the runner knows Shape's values without a kernel, and
 * this file keeps them known through the math operators of such chains (Add, Sub, Mul, Div, Mod, Neg, Abs,
 * Sign, Max, Min, Sum, the comparisons, Not/And/Or/Xor, Where, Cast, CastLike and full reductions of a vector),
 * so that the Reshape at the end reads its shape without running anything.
 *
 * The values are computed as the kernel computes them (integer division truncating, results wrapped to the
 * output's type) and recorded with onnx_set_known; the operator's lazy result is built as usual. Only small
 * rank <= 1 integer and bool inputs whose values the runner already holds are considered (known values stay
 * known; nothing is ever read from the device for this); anything unexpected, a division by zero, leaves the
 * output unrecorded: this is an optimization and never fails the node. */
#include <string.h>

#include "ops_math.h"
#include "uop/uop.h"

#define KNOWN_CAP 64   /* shape vectors: one value per axis (TG_MAX_DIMS 16), with room for Range-made ones */

typedef struct known {
  int64_t v[KNOWN_CAP];
  int64_t n;
} known;

static bool is_int_or_bool(tg_dtype dt) { return dt == TG_BOOL || (dt >= TG_INT8 && dt <= TG_INT64) || (dt >= TG_UINT8 && dt <= TG_UINT32); }
static bool is_float(tg_dtype dt) { return dt == TG_FLOAT16 || dt == TG_BFLOAT16 || dt == TG_FLOAT32 || dt == TG_FLOAT64; }


/* Whether input i's values are on the host already (onnx_input_known), so that onnx_input_ints/_doubles read them
 * without running a kernel: such a read inside a tg_jit capture would fail the whole capture, even when the
 * operator could do without the values. */
bool math_input_known(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i) {
  return i < n->nin && in[i] && onnx_input_known(c, n, i);
}

/* input i's values, when it is a small rank <= 1 integer or bool tensor (any float too with floats) whose
 * values the runner holds */
static bool known_input(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, bool floats, known *k) {
  if (!math_input_known(c, n, in, i)) return false;
  tg_dtype dt = tg_dtype_of(in[i]);
  if (!(is_int_or_bool(dt) || (floats && is_float(dt))) || tg_ndim(in[i]) > 1 || tg_numel(in[i]) > KNOWN_CAP)
    return false;
  if (onnx_input_ints(c, n, in, i, k->v, KNOWN_CAP, &k->n) != TG_OK || k->n != tg_numel(in[i])) {
    tg_error_clear();   /* not a failure of the node: the values stay unknown */
    return false;
  }
  return true;
}

/* the broadcast length of vectors (and scalars) of lengths a and b, or -1 */
static int64_t bcast_len(int64_t a, int64_t b) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  return -1;
}

typedef enum { K_ADD, K_SUB, K_MUL, K_DIV, K_MOD, K_FMOD, K_MAX, K_MIN, K_EQ, K_GT, K_GE, K_LT, K_LE, K_AND, K_OR, K_XOR } kop;

static const struct { const char *op; kop k; } binary_ops[] = {
    {"Add", K_ADD}, {"Sum", K_ADD}, {"Sub", K_SUB}, {"Mul", K_MUL}, {"Div", K_DIV}, {"Mod", K_MOD},
    {"Max", K_MAX}, {"Min", K_MIN}, {"Equal", K_EQ}, {"Greater", K_GT}, {"GreaterOrEqual", K_GE},
    {"Less", K_LT}, {"LessOrEqual", K_LE}, {"And", K_AND}, {"Or", K_OR}, {"Xor", K_XOR},
};

/* a op b as the kernel computes it in dt; false where it would divide by zero */
static bool apply(kop op, int64_t a, int64_t b, tg_dtype dt, int64_t *r) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
    case K_ADD: *r = dtype_wrap_int(dt, (int64_t)(ua + ub)); return true;
    case K_SUB: *r = dtype_wrap_int(dt, (int64_t)(ua - ub)); return true;
    case K_MUL: *r = dtype_wrap_int(dt, (int64_t)(ua * ub)); return true;
    case K_DIV:
    case K_MOD:
    case K_FMOD:
      if (b == 0) return false;
      if (a == INT64_MIN && b == -1) *r = op == K_DIV ? INT64_MIN : 0;
      else if (op == K_DIV) *r = a / b;
      else {
        *r = a % b;
        if (op == K_MOD && *r != 0 && ((*r < 0) != (b < 0))) *r += b;   /* python's sign: the divisor's */
      }
      *r = dtype_wrap_int(dt, (int64_t)((uint64_t)*r));
      return true;
    case K_MAX: *r = a > b ? a : b; return true;
    case K_MIN: *r = a < b ? a : b; return true;
    case K_EQ: *r = a == b; return true;
    case K_GT: *r = a > b; return true;
    case K_GE: *r = a >= b; return true;
    case K_LT: *r = a < b; return true;
    case K_LE: *r = a <= b; return true;
    case K_AND: *r = a && b; return true;
    case K_OR: *r = a || b; return true;
    case K_XOR: *r = !a != !b; return true;
  }
  return false;
}

/* acc = acc op b elementwise with broadcasting; false if the shapes or a value do not allow it */
static bool fold(kop op, known *acc, const known *b, tg_dtype dt) {
  int64_t len = bcast_len(acc->n, b->n);
  if (len < 0) return false;
  known r = {.n = len};
  for (int64_t i = 0; i < len; i++)
    if (!apply(op, acc->v[acc->n == 1 ? 0 : i], b->v[b->n == 1 ? 0 : i], dt, &r.v[i])) return false;
  *acc = r;
  return true;
}

/* output 0's values for the node, or false */
static bool evaluate(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_dtype dt, known *r) {
  const char *op = n->op_type;
  known a, b, t;
  if (!strcmp(op, "Cast") || !strcmp(op, "CastLike")) {
    /* float inputs too: a Cast back to int64 of shape values that went through float */
    if (!known_input(c, n, in, 0, dt != TG_BOOL, r)) return false;   /* 0.5 is true, its truncation false */
    for (int64_t i = 0; i < r->n; i++) r->v[i] = dtype_wrap_int(dt, (int64_t)((uint64_t)r->v[i]));
    return true;
  }
  if (!strcmp(op, "Neg") || !strcmp(op, "Abs") || !strcmp(op, "Sign") || !strcmp(op, "Not")) {
    if (!known_input(c, n, in, 0, false, r)) return false;
    for (int64_t i = 0; i < r->n; i++) {
      int64_t v = r->v[i];
      uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
      r->v[i] = !strcmp(op, "Neg") ? dtype_wrap_int(dt, (int64_t)(0 - (uint64_t)v))
                : !strcmp(op, "Abs") ? dtype_wrap_int(dt, (int64_t)(m))
                : !strcmp(op, "Sign") ? (v > 0) - (v < 0)
                : !v;
    }
    return true;
  }
  if (!strcmp(op, "Where")) {
    if (!known_input(c, n, in, 0, false, &t) || !known_input(c, n, in, 1, false, &a) ||
        !known_input(c, n, in, 2, false, &b))
      return false;
    int64_t len = bcast_len(bcast_len(t.n, a.n), b.n);
    if (bcast_len(t.n, a.n) < 0 || len < 0) return false;
    r->n = len;
    for (int64_t i = 0; i < len; i++)
      r->v[i] = dtype_wrap_int(dt, (int64_t)((uint64_t)(t.v[t.n == 1 ? 0 : i] ? a.v[a.n == 1 ? 0 : i] : b.v[b.n == 1 ? 0 : i])));
    return true;
  }
  if (!strncmp(op, "Reduce", 6)) {
    /* a vector reduced to one value (the only reduction of a rank <= 1 input that gives one) */
    const char *k = op + 6;
    bool sum = !strcmp(k, "Sum"), prod = !strcmp(k, "Prod"), max = !strcmp(k, "Max"), min = !strcmp(k, "Min");
    if ((!sum && !prod && !max && !min) || !known_input(c, n, in, 0, false, &a) || a.n == 0) return false;
    r->n = 1;
    r->v[0] = a.v[0];
    for (int64_t i = 1; i < a.n; i++)
      apply(sum ? K_ADD : prod ? K_MUL : max ? K_MAX : K_MIN, r->v[0], a.v[i], dt, &r->v[0]);
    return true;
  }
  for (size_t j = 0; j < sizeof binary_ops / sizeof binary_ops[0]; j++) {
    if (strcmp(op, binary_ops[j].op)) continue;
    kop k = binary_ops[j].k;
    if (k == K_MOD && onnx_attr_int(n, "fmod", 0)) k = K_FMOD;
    if (!known_input(c, n, in, 0, false, r)) return false;
    for (int i = 1; i < n->nin; i++)   /* Sum, Max, Min take any number of inputs */
      if (!known_input(c, n, in, i, false, &b) || !fold(k, r, &b, dt)) return false;
    return n->nin > 1 || k == K_ADD || k == K_MAX || k == K_MIN;
  }
  return false;
}

void math_known(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, const tg_tensor *result) {
  tg_dtype dt = tg_dtype_of(result);
  if (!result || !is_int_or_bool(dt) || tg_ndim(result) > 1) return;
  known r;
  if (!evaluate(c, n, in, dt, &r) || r.n != tg_numel(result)) return;
  if (onnx_set_known(c, 0, r.v, r.n) != TG_OK) tg_error_clear();
}
