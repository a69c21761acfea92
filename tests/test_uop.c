/* test_uop.c — the IR: interning, the collector, the pattern matcher and both rewrite modes. */
#include <stdlib.h>

#include "test.h"
#include "uop/uop.h"

static uop *rng(int id, int64_t bound) {
  uop *b = uop_const_int(TG_INT32, bound);
  int64_t type = AX_GLOBAL;
  return uop_new(OP_RANGE, TG_INT32, 1, &b, (uop_arg){.i = id}, 1, &type);
}

TEST(test_uop_interning_returns_same_pointer) {
  uop *a = uop_const_int(TG_INT32, 7), *b = uop_const_int(TG_INT32, 7);
  CHECK(a == b, "same constant built twice gives two nodes");
  CHECK(uop_const_int(TG_INT64, 7) != a, "dtype must be part of identity");
  uop *x = rng(0, 10);
  CHECK(uop_binary(OP_ADD, x, a) == uop_binary(OP_ADD, x, a), "same ADD built twice gives two nodes");
  CHECK(uop_binary(OP_ADD, x, a) != uop_binary(OP_ADD, a, x), "source order is part of identity");
  CHECK(uop_const(TG_FLOAT32, 0.0) != uop_const(TG_FLOAT32, -0.0), "0.0 and -0.0 must differ");
}

TEST(test_uop_gc_frees_unreferenced_nodes) {
  tg_collect();
  size_t before = uop_live_count();
  for (int i = 0; i < 1000; i++) uop_binary(OP_ADD, rng(1, 1000 + i), uop_const_int(TG_INT32, i));
  CHECK(uop_live_count() >= before + 1000, "nodes were not interned (%zu -> %zu)", before, uop_live_count());
  tg_collect();
  CHECK(uop_live_count() <= before, "collector left %zu nodes (had %zu)", uop_live_count(), before);
}

static uop *r_fold_add_zero(void *ctx, uop *u, uop **cap) { return cap[0]; }
static uop *r_swap_mul(void *ctx, uop *u, uop **cap) {  /* (MUL x 2) -> (ADD x x) */
  return uop_binary(OP_ADD, cap[0], cap[0]);
}
static uop *r_count(void *ctx, uop *u, uop **cap) {
  (*(int *)ctx)++;
  return NULL;
}

TEST(test_rewrite_pattern_captures_and_commutes) {
  static const rule rules[] = {{"(ADD x 0)", r_fold_add_zero}, {"(MUL x 2)", r_swap_mul}, {NULL, NULL}};
  matcher *m = matcher_new(rules);
  CHECK_T(m);
  uop *x = rng(0, 8), *zero = uop_const_int(TG_INT32, 0), *two = uop_const_int(TG_INT32, 2);
  CHECK(matcher_apply(m, NULL, uop_binary(OP_ADD, x, zero)) == x, "(ADD x 0) did not fold");
  CHECK(matcher_apply(m, NULL, uop_binary(OP_ADD, zero, x)) == x, "commuted (ADD 0 x) did not fold");
  CHECK(matcher_apply(m, NULL, uop_binary(OP_ADD, x, two)) == NULL, "(ADD x 2) matched (ADD x 0)");
  /* nested: ((x*2) + 0) -> x + x, top-down to a fixed point */
  uop *g = uop_binary(OP_ADD, uop_binary(OP_MUL, x, two), zero);
  CHECK(graph_rewrite(g, m, NULL, false) == uop_binary(OP_ADD, x, x), "top-down rewrite did not reach x+x");
  CHECK(graph_rewrite(g, m, NULL, true) == uop_binary(OP_ADD, x, x), "bottom-up rewrite did not reach x+x");
  matcher_free(m);
}

TEST(test_rewrite_same_name_must_match_same_node) {
  static const rule rules[] = {{"(ADD x x)", r_fold_add_zero}, {NULL, NULL}};
  matcher *m = matcher_new(rules);
  CHECK_T(m);
  uop *x = rng(0, 8), *y = rng(1, 8);
  CHECK(matcher_apply(m, NULL, uop_binary(OP_ADD, x, x)) == x, "(ADD x x) did not match x+x");
  CHECK(matcher_apply(m, NULL, uop_binary(OP_ADD, x, y)) == NULL, "(ADD x x) matched x+y");
  matcher_free(m);
}

TEST(test_rewrite_alternatives_and_rest) {
  int hits = 0;
  static const rule rules[] = {{"(ADD|MUL _ _)", r_count}, {"(SINK x ...)", r_count}, {NULL, NULL}};
  matcher *m = matcher_new(rules);
  CHECK_T(m);
  uop *x = rng(0, 8);
  matcher_apply(m, &hits, uop_binary(OP_MUL, x, x));
  matcher_apply(m, &hits, uop_binary(OP_MAX, x, x));
  uop *s[3] = {x, x, x};
  matcher_apply(m, &hits, uop_new(OP_SINK, TG_BOOL, 3, s, (uop_arg){0}, 0, NULL));
  CHECK(hits == 2, "expected 2 matches (MUL and SINK with extra sources), got %d", hits);
  matcher_free(m);
}

TEST(test_rewrite_bad_pattern_is_an_error) {
  static const rule rules[] = {{"(NOT_AN_OP x)", r_count}, {NULL, NULL}};
  matcher *m = matcher_new(rules);
  CHECK(m == NULL, "a bad pattern compiled");
  CHECK(strstr(tg_error(), "NOT_AN_OP") != NULL, "error does not name the pattern: %s", tg_error());
}

TEST(test_uop_toposort_sources_first) {
  uop *x = rng(0, 4), *y = rng(1, 4);
  uop *g = uop_binary(OP_MUL, uop_binary(OP_ADD, x, y), x);
  int n;
  uop **o = uop_toposort(g, &n);
  CHECK_T(o);
  CHECK(o[n - 1] == g, "root is not last");
  for (int i = 0; i < n; i++)
    for (int s = 0; s < o[i]->nsrc; s++) {
      int k = 0;
      while (k < n && o[k] != o[i]->src[s]) k++;
      CHECK(k < i, "source of node %d comes after it", i);
    }
  free(o);
}

TEST(test_dtype_promotion_matches_tinygrad) {
  CHECK(dtype_promote(TG_INT32, TG_FLOAT32) == TG_FLOAT32, "int32+float32");
  CHECK(dtype_promote(TG_UINT8, TG_INT8) == TG_INT16, "uint8+int8 should be int16");
  CHECK(dtype_promote(TG_BOOL, TG_UINT8) == TG_UINT8, "bool+uint8");
  CHECK(dtype_promote(TG_INT64, TG_UINT32) == TG_INT64, "int64+uint32");
  CHECK(dtype_promote(TG_UINT64, TG_INT64) == TG_FLOAT16, "uint64+int64 is float16 in tinygrad's lattice");
  CHECK(dtype_promote(TG_FLOAT16, TG_BFLOAT16) == TG_FLOAT32, "float16+bfloat16");
  CHECK(dtype_promote(TG_FLOAT32, TG_FLOAT64) == TG_FLOAT64, "float32+float64");
}

TEST(test_uop_to_string_prints_graph) {
  uop *x = rng(0, 4);
  char *s = uop_to_string(uop_binary(OP_ADD, x, uop_const_int(TG_INT32, 3)));
  CHECK_T(s);
  CHECK(strstr(s, "RANGE") && strstr(s, "ADD") && strstr(s, "CONST"), "graph print misses nodes:\n%s", s);
  free(s);
}
