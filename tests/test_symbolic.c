/* test_symbolic.c — the index simplifier: known folds, and a randomized check that a simplified
 * expression equals the original at sampled values of its loop variables. */
#include <stdlib.h>

#include "test.h"
#include "uop/uop.h"

static uop *var(int id, int64_t bound) {
  uop *b = uop_const_int(TG_INT32, bound);
  int64_t type = AX_GLOBAL;
  return uop_new(OP_RANGE, TG_INT32, 1, &b, (uop_arg){.i = id}, 1, &type);
}
static uop *c(int64_t v) { return uop_const_int(TG_INT32, v); }
static uop *add(uop *a, uop *b) { return uop_binary(OP_ADD, a, b); }
static uop *mul(uop *a, uop *b) { return uop_binary(OP_MUL, a, b); }
static uop *idiv(uop *a, uop *b) { return uop_binary(OP_IDIV, a, b); }
static uop *mod(uop *a, uop *b) { return uop_binary(OP_MOD, a, b); }

/* an evaluator written for the test: C semantics on int64, ranges read from env */
static int64_t eval(uop *u, const int64_t *env, bool *ok) {
  int64_t a = u->nsrc > 0 && u->op != OP_RANGE ? eval(u->src[0], env, ok) : 0;
  int64_t b = u->nsrc > 1 ? eval(u->src[1], env, ok) : 0;
  switch (u->op) {
    case OP_CONST: return u->arg.i;
    case OP_CAST: return a;
    case OP_RANGE: return env[u->arg.i];
    case OP_ADD: return a + b;
    case OP_MUL: return a * b;
    case OP_NEG: return -a;
    case OP_IDIV: if (!b) { *ok = false; return 0; } return a / b;
    case OP_MOD: if (!b) { *ok = false; return 0; } return a % b;
    case OP_MAX: return a > b ? a : b;
    case OP_CMPLT: return a < b;
    case OP_CMPNE: return a != b;
    case OP_CMPEQ: return a == b;
    case OP_AND: return a & b;
    case OP_OR: return a | b;
    case OP_WHERE: return a ? b : eval(u->src[2], env, ok);
    default: *ok = false; return 0;
  }
}

TEST(test_symbolic_reshape_roundtrip_folds_to_ranges) {
  uop *r0 = var(0, 4), *r1 = var(1, 6);
  uop *lin = add(mul(r0, c(6)), r1);
  CHECK(uop_simplify(idiv(lin, c(6))) == r0, "(r0*6+r1)//6 is not r0");
  CHECK(uop_simplify(mod(lin, c(6))) == r1, "(r0*6+r1)%%6 is not r1");
  CHECK(uop_simplify(add(mul(idiv(lin, c(6)), c(6)), mod(lin, c(6)))) == uop_simplify(lin), "x//6*6 + x%%6 is not x");
  uop *r2 = var(2, 24);
  CHECK(uop_simplify(add(mul(idiv(r2, c(6)), c(6)), mod(r2, c(6)))) == r2, "r//6*6 + r%%6 is not r");
}

TEST(test_symbolic_window_index_folds) {
  uop *r0 = var(0, 2), *r1 = var(1, 8);
  uop *x = add(r1, mul(r0, c(13)));
  CHECK(uop_simplify(mod(x, c(12))) == uop_simplify(add(r1, r0)), "(r1 + 13*r0) %% 12 is not r1 + r0");
  CHECK(uop_simplify(idiv(x, c(12))) == r0, "(r1 + 13*r0) // 12 is not r0");
}

TEST(test_symbolic_constant_folding_and_identities) {
  uop *r0 = var(0, 10);
  CHECK(uop_simplify(add(c(2), c(3))) == c(5), "2+3");
  CHECK(uop_simplify(add(r0, c(0))) == r0, "x+0");
  CHECK(uop_simplify(mul(r0, c(1))) == r0, "x*1");
  CHECK(uop_simplify(mul(r0, c(0))) == c(0), "x*0");
  CHECK(uop_simplify(add(add(r0, c(3)), c(-3))) == r0, "(x+3)-3");
  CHECK(uop_simplify(idiv(idiv(r0, c(2)), c(5))) == c(0), "r0//2//5 with r0<10");
}

TEST(test_symbolic_dead_masks_fold) {
  uop *r0 = var(0, 10);
  uop *t = uop_const_int(TG_BOOL, 1);
  CHECK(uop_simplify(uop_binary(OP_CMPLT, r0, c(10))) == t, "r0 < 10 is not true");
  CHECK(uop_simplify(uop_binary(OP_CMPLT, c(-1), r0)) == t, "-1 < r0 is not true");
  CHECK(uop_simplify(uop_binary(OP_CMPLT, r0, c(0))) == uop_const_int(TG_BOOL, 0), "r0 < 0 is not false");
  uop *m = uop_binary(OP_AND, uop_binary(OP_CMPLT, c(-1), r0), uop_binary(OP_CMPLT, add(r0, c(2)), c(20)));
  CHECK(uop_simplify(m) == t, "a mask true on the whole range did not fold");
  uop *w = uop_where(uop_binary(OP_CMPLT, r0, c(10)), r0, c(7));
  CHECK(uop_simplify(w) == r0, "where(true, x, 7) is not x");
}

TEST(test_symbolic_value_ranges) {
  uop *r0 = var(0, 10), *r1 = var(1, 4);
  uop *e = add(mul(r0, c(4)), r1);
  CHECK(uop_vmin(e) == 0 && uop_vmax(e) == 39, "range of r0*4+r1: [%lld, %lld]", (long long)uop_vmin(e), (long long)uop_vmax(e));
  uop *m = mod(e, c(8));
  CHECK(uop_vmin(m) == 0 && uop_vmax(m) == 7, "range of x%%8");
  uop *d = idiv(e, c(8));
  CHECK(uop_vmin(d) == 0 && uop_vmax(d) == 4, "range of x//8");
}

/* random expression over vars r0..r3 */
static uint64_t rs;
static int64_t rnd(int64_t n) {
  rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
  return (int64_t)(rs % (uint64_t)n);
}

static uop *vars[4];
static const int64_t bounds[4] = {3, 7, 13, 32};

static uop *random_expr(int depth) {
  if (depth == 0 || rnd(4) == 0) return rnd(3) ? vars[rnd(4)] : c(rnd(20) - 4);
  switch (rnd(7)) {
    case 0: return add(random_expr(depth - 1), random_expr(depth - 1));
    case 1: return mul(random_expr(depth - 1), c(rnd(9) - 2));
    case 2: return idiv(random_expr(depth - 1), c(1 + rnd(12)));
    case 3: return mod(random_expr(depth - 1), c(1 + rnd(12)));
    case 4: return uop_cast(uop_binary(OP_CMPLT, random_expr(depth - 1), c(rnd(30) - 5)), TG_INT32);
    case 5: return uop_binary(OP_MAX, random_expr(depth - 1), random_expr(depth - 1));
    default: return add(mul(random_expr(depth - 1), c(1 + rnd(8))), random_expr(depth - 1));
  }
}

TEST(test_symbolic_random_expressions_keep_their_value) {
  rs = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 4; i++) vars[i] = var(i, bounds[i]);
  int checked = 0;
  for (int t = 0; t < 5000; t++) {
    uop *e = random_expr(5);
    uop *s = uop_simplify(e);
    CHECK_T(s);
    for (int k = 0; k < 24; k++) {
      int64_t env[4];
      for (int v = 0; v < 4; v++) env[v] = rnd(bounds[v]);
      bool ok1 = true, ok2 = true;
      int64_t a = eval(e, env, &ok1), b = eval(s, env, &ok2);
      if (!ok1) continue;
      checked++;
      if (!ok2 || a != b) {
        char *es = uop_to_string(e), *ss = uop_to_string(s);
        CHECK(false, "case %d: original %lld, simplified %lld at (%lld,%lld,%lld,%lld)\noriginal:\n%s\nsimplified:\n%s", t,
              (long long)a, (long long)b, (long long)env[0], (long long)env[1], (long long)env[2], (long long)env[3],
              es, ss);
        free(es);
        free(ss);
        return;
      }
    }
  }
  CHECK(checked > 10000, "too few samples checked: %d", checked);
}

/* found by the random-API driver: the comparison and div/mod rules assumed integers that never wrap, which
 * index arithmetic is but uint8 data is not. (x + 255) < 0 in uint8 became x < 1 (true for x = 0), and
 * (x + 250) // 2 would become x // 2 + 125. */
TEST(test_symbolic_wrapping_data_arithmetic_is_not_folded) {
  tg_scope_begin();
  uint8_t d[4] = {3, 0, 7, 10};
  tg_tensor *x = tg_from_data(TG_UINT8, 1, (int64_t[]){4}, d, sizeof d);
  CHECK_T(x);
  tg_tensor *lt = tg_lt(tg_add_scalar(x, -1), tg_scalar(TG_UINT8, 0));  /* x - 1 wraps to 255 for x = 0 */
  tg_tensor *dv = tg_idiv(tg_add_scalar(x, 250), tg_scalar(TG_UINT8, 2));
  tg_tensor *i8 = tg_lt(tg_add_scalar(tg_cast(x, TG_INT8), 125), tg_scalar(TG_INT8, -100));  /* 7 + 125 wraps */
  uint8_t got_lt[4], got_dv[4], got_i8[4];
  CHECK(tg_to_host(lt, got_lt, 4) == TG_OK && tg_to_host(dv, got_dv, 4) == TG_OK && tg_to_host(i8, got_i8, 4) == TG_OK,
        "%s", tg_error());
  for (int i = 0; i < 4; i++) {
    int8_t s = (int8_t)(uint8_t)(d[i] + 125);
    CHECK(got_lt[i] == 0, "uint8 %d - 1 < 0 gave %d", d[i], got_lt[i]);
    CHECK(got_dv[i] == (uint8_t)(d[i] + 250) / 2, "uint8 (%d + 250) // 2 gave %d, want %d", d[i], got_dv[i],
          (uint8_t)(d[i] + 250) / 2);
    CHECK(got_i8[i] == (s < -100), "int8 %d + 125 < -100 gave %d, want %d", d[i], got_i8[i], s < -100);
  }
  tg_scope_end();
}

/* found by the random-API driver: a sum of integer constants kept the true sum in a narrow dtype's node, and a
 * cast then read it: uint8 200 + 200 cast to int32 gave 400, not 144 */
TEST(test_symbolic_integer_constants_wrap_to_their_dtype) {
  tg_scope_begin();
  tg_tensor *a = tg_scalar(TG_UINT8, 200), *b = tg_scalar(TG_INT8, 100);
  double s8 = tg_item(tg_cast(tg_add(a, a), TG_INT32)), i8 = tg_item(tg_cast(tg_add(b, b), TG_INT32));
  double sum = tg_item(tg_sum(tg_add(tg_full(TG_UINT8, 1, (int64_t[]){3}, 255), tg_scalar(TG_UINT8, 2)), 0, NULL, false));
  CHECK(s8 == 144, "uint8 200 + 200 as int32: %g, want 144", s8);
  CHECK(i8 == -56, "int8 100 + 100 as int32: %g, want -56", i8);
  CHECK(sum == 3, "sum of three uint8 (255 + 2): %g, want 3", sum);
  tg_scope_end();
}

/* a block of g inside a block of c (g dividing c): an index unrolled 32 at a time over a K-quant's blocks of
 * 256, (32*r0 + r1) // 256 with r1 < 32, is r0 // 8, and its remainder (r0 % 8)*32 + r1; checked at every value.
 * Shifts by 0 (a nibble's shift, unrolled) fold too */
TEST(test_symbolic_block_inside_a_larger_block_folds) {
  uop *r0 = var(0, 16), *r1 = var(1, 32);
  uop *x = add(mul(r0, c(32)), r1), *x5 = add(mul(r0, c(32)), c(5));
  CHECK(uop_simplify(idiv(x, c(256))) == uop_simplify(idiv(r0, c(8))), "(32*r0 + r1) // 256 is not r0 // 8");
  CHECK(uop_simplify(idiv(x5, c(256))) == uop_simplify(idiv(r0, c(8))), "(32*r0 + 5) // 256 is not r0 // 8");
  CHECK(uop_simplify(idiv(mod(x, c(256)), c(32))) == uop_simplify(mod(r0, c(8))), "((32*r0 + r1) %% 256) // 32 is not r0 %% 8");
  uop *r2 = var(2, 512);  /* a (.., 2, 16) view read as rows of 32: (r2//32)*32 + ((r2//16)%2)*16 + r2%16 is r2 */
  CHECK(uop_simplify(add(add(mul(idiv(r2, c(32)), c(32)), mul(mod(idiv(r2, c(16)), c(2)), c(16))), mod(r2, c(16)))) == r2,
        "(r2//32)*32 + ((r2//16)%%2)*16 + r2%%16 is not r2");
  uop *u8 = uop_cast(r1, TG_UINT8);
  CHECK(uop_simplify(uop_binary(OP_SHR, u8, uop_const_int(TG_UINT8, 0))) == uop_simplify(u8), "x >> 0 is not x");
  CHECK(uop_simplify(uop_binary(OP_SHL, r1, c(0))) == r1, "x << 0 is not x");
  uop *es[] = {idiv(x, c(256)), mod(x, c(256)), idiv(x5, c(64)), mod(x5, c(64)), idiv(mod(x, c(128)), c(16)),
               mod(add(mul(r0, c(48)), r1), c(96))};
  for (int i = 0; i < (int)(sizeof es / sizeof *es); i++) {
    uop *s = uop_simplify(es[i]);
    CHECK_T(s);
    for (int64_t a = 0; s && a < 16; a++)
      for (int64_t b = 0; b < 32; b++) {
        int64_t env[2] = {a, b};
        bool ok1 = true, ok2 = true;
        int64_t want = eval(es[i], env, &ok1), got = eval(s, env, &ok2);
        if (!ok1 || !ok2 || want != got) {
          CHECK(false, "expression %d at r0=%lld r1=%lld: %lld, simplified %lld", i, (long long)a, (long long)b,
                (long long)want, (long long)got);
          return;
        }
      }
  }
}

/* bool masks built as where(cond, false, true) or compared with constants fold to one comparison (trim.c and
 * the guards read comparisons, not wheres of constants) */
TEST(test_symbolic_bool_negations_fold) {
  uop *r0 = var(0, 8), *r1 = var(1, 8);
  uop *lt = uop_binary(OP_CMPLT, r0, r1), *f = uop_const_int(TG_BOOL, 0), *t = uop_const_int(TG_BOOL, 1);
  uop *not_lt = uop_simplify(uop_where(lt, f, t));
  CHECK(not_lt && not_lt->op == OP_CMPEQ && not_lt->src[0] == lt, "where(lt, false, true) is not lt == false");
  CHECK(uop_simplify(uop_where(lt, t, f)) == lt, "where(lt, true, false) is not lt");
  CHECK(uop_simplify(uop_binary(OP_CMPEQ, uop_binary(OP_CMPEQ, lt, f), f)) == lt, "(lt == false) == false is not lt");
  CHECK(uop_simplify(uop_binary(OP_CMPNE, lt, f)) == lt, "lt != false is not lt");
  CHECK(uop_simplify(uop_binary(OP_CMPEQ, lt, t)) == lt, "lt == true is not lt");
  CHECK(uop_simplify(uop_binary(OP_XOR, lt, f)) == lt, "lt ^ false is not lt");
  CHECK(uop_simplify(uop_where(uop_binary(OP_CMPNE, lt, t), f, t)) == lt, "where(lt != true, false, true) is not lt");
  /* and they keep their value at every point */
  for (int64_t a = 0; a < 8; a++)
    for (int64_t b = 0; b < 8; b++) {
      int64_t env[2] = {a, b};
      bool ok = true;
      CHECK(eval(not_lt, env, &ok) == !(a < b) && ok, "not lt at %lld, %lld", (long long)a, (long long)b);
    }
}

/* a mask that keeps every bit the value can have folds: (r >> 4) & 15 for r < 256 is r >> 4; & 7 stays */
TEST(test_symbolic_masks_of_shifted_values_fold) {
  uop *r = var(0, 256);
  uop *hi = uop_binary(OP_SHR, r, c(4));
  CHECK(uop_vmin(hi) == 0 && uop_vmax(hi) == 15, "range of r >> 4: [%lld, %lld]", (long long)uop_vmin(hi), (long long)uop_vmax(hi));
  CHECK(uop_simplify(uop_binary(OP_AND, hi, c(15))) == hi, "(r >> 4) & 15 is not r >> 4");
  CHECK(uop_simplify(uop_binary(OP_AND, r, c(255))) == r, "r & 255 is not r for r < 256");
  uop *m7 = uop_simplify(uop_binary(OP_AND, hi, c(7)));
  CHECK(m7 && m7->op == OP_AND, "(r >> 4) & 7 lost its mask");
  uop *m14 = uop_simplify(uop_binary(OP_AND, hi, c(14)));
  CHECK(m14 && m14->op == OP_AND, "(r >> 4) & 14 lost its mask");
}

/* a load or store gated by a constant true is not gated (the C renderer keeps a reused vector load in a
 * register only when it is plain); a variable gate or a false one stays */
TEST(test_symbolic_true_gates_drop) {
  int64_t n = 64;
  uop *p = uop_new(OP_PARAM, TG_FLOAT32, 0, NULL, (uop_arg){.i = 1}, 1, &n), *i = var(0, 64);
  uop *t = uop_const_int(TG_BOOL, 1), *f = uop_const_int(TG_BOOL, 0), *g = uop_binary(OP_CMPLT, i, c(7));
  uop *plain = uop_new(OP_LOAD, TG_FLOAT32, 2, (uop *[]){p, i}, (uop_arg){.i = 0}, 0, NULL);
  uop *l = uop_simplify(uop_new(OP_LOAD, TG_FLOAT32, 3, (uop *[]){p, i, t}, (uop_arg){.i = 0}, 0, NULL));
  CHECK(l == plain, "a load gated by true is not the plain load");
  uop *lg = uop_simplify(uop_new(OP_LOAD, TG_FLOAT32, 3, (uop *[]){p, i, g}, (uop_arg){.i = 0}, 0, NULL));
  CHECK(lg && lg->op == OP_LOAD && lg->nsrc == 3, "a load's variable gate was dropped");
  uop *lf = uop_simplify(uop_new(OP_LOAD, TG_FLOAT32, 3, (uop *[]){p, i, f}, (uop_arg){.i = 0}, 0, NULL));
  CHECK(lf && (lf->op != OP_LOAD || lf->nsrc == 3), "a load gated by false became a plain load");
  uop *v = uop_const(TG_FLOAT32, 2.0);
  uop *s = uop_simplify(uop_new(OP_STORE, TG_FLOAT32, 4, (uop *[]){p, i, v, t}, (uop_arg){.i = 0}, 0, NULL));
  CHECK(s && s->op == OP_STORE && s->nsrc == 3, "a store gated by true is still gated");
}

/* a load gated by a constant false reads 0: a product with it is 0, a sum with it the other term (a padded
 * convolution's taps past the image's edge, once UNROLL and UPCAST make the edge a constant); a load under a
 * variable gate keeps its product */
TEST(test_symbolic_false_gated_terms_fold) {
  int64_t n = 64;
  uop *p = uop_new(OP_PARAM, TG_FLOAT32, 0, NULL, (uop_arg){.i = 1}, 1, &n), *i = var(0, 64), *j = var(1, 64);
  uop *f = uop_const_int(TG_BOOL, 0), *g = uop_binary(OP_CMPLT, i, c(7));
  uop *w = uop_new(OP_LOAD, TG_FLOAT32, 2, (uop *[]){p, j}, (uop_arg){.i = 0}, 0, NULL);
  uop *dead = uop_new(OP_LOAD, TG_FLOAT32, 3, (uop *[]){p, i, f}, (uop_arg){.i = 0}, 0, NULL);
  uop *live = uop_new(OP_LOAD, TG_FLOAT32, 3, (uop *[]){p, i, g}, (uop_arg){.i = 0}, 0, NULL);
  uop *m = uop_simplify(uop_binary(OP_MUL, w, dead));
  CHECK(m && uop_is_const(m) && uop_const_value(m) == 0, "w * (a load gated by false) is not 0");
  uop *m2 = uop_simplify(uop_binary(OP_MUL, dead, w));
  CHECK(m2 && uop_is_const(m2) && uop_const_value(m2) == 0, "(a load gated by false) * w is not 0");
  uop *a = uop_simplify(uop_binary(OP_ADD, w, uop_binary(OP_MUL, dead, w)));
  CHECK(a == w, "w + (a load gated by false) * w is not w");
  uop *a2 = uop_simplify(uop_binary(OP_ADD, dead, w));
  CHECK(a2 == w, "(a load gated by false) + w is not w");
  uop *kept = uop_simplify(uop_binary(OP_MUL, w, live));
  CHECK(kept && kept->op == OP_MUL, "a product with a load under a variable gate was folded");
}
