/* test_movement_random.c — seeded random chains of movement and elementwise ops against the reference.
 *
 * Each case starts from a random leaf (shape drawn from a small fixed set) and applies 1..6 random ops:
 * reshape, permute, expand, pad, shrink, flip, slicing with steps, a unary op, or a binary op with a second
 * operand that is broadcast, permuted back, flipped, padded or the chain itself. The same op is applied to
 * the tg tensor and to the ref array, so the only thing compared is the library's index arithmetic and
 * fusion. Cases are realized BATCH at a time with one tg_realize_many. A mismatch prints the seed, the case
 * number and the whole chain. TG_SEED, TG_CASES and TG_CASE (run one case) override the defaults: seed 1 and
 * 300 cases for the plain chains, seed 7 and 80 cases for chains that end in a sum or max. */
#include <stdarg.h>
#include <stdlib.h>

#include "ref.h"
#include "test.h"

#define MAX_NUMEL 1536
#define BATCH 20

typedef struct mcase {
  tg_tensor *t;
  ref_arr *r;
  char desc[2048];
  bool broken;  /* tg returned NULL for a valid op */
  double atol;  /* 1e-6, or more after a sum: float32 accumulation of cancelling terms */
} mcase;

static void say(mcase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(mcase *c, const char *fmt, ...) {
  size_t k = strlen(c->desc);
  if (k + 1 >= sizeof c->desc) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->desc + k, sizeof c->desc - k, fmt, ap);
  va_end(ap);
}

static void note_null(mcase *c, tg_tensor *t, const char *op) {
  if (!t && !c->broken) {
    c->broken = true;
    say(c, " [tg_%s returned NULL: %s]", op, tg_error());
  }
}

static const char *shp(char *buf, size_t n, const ref_arr *a) { return ref_shape_str(buf, n, a->ndim, a->shape); }

static int rnd(int lo, int hi) { return (int)ref_randint(lo, hi); }

/* a leaf: random float32 values in [-2, 2) */
static void make_leaf(mcase *c, int ndim, const int64_t *shape) {
  char b[64];
  c->r = ref_rand(TG_FLOAT32, ndim, shape, -2, 2);
  c->t = ref_to_tg(c->r);
  note_null(c, c->t, "from_data");
  say(c, "leaf%s", shp(b, sizeof b, c->r));
}

static const struct { int n; int64_t s[4]; } leaf_shapes[] = {
    {1, {6}}, {2, {2, 3}}, {2, {3, 4}}, {3, {2, 3, 4}}, {3, {4, 1, 3}}, {2, {1, 5}}, {4, {2, 2, 1, 3}}, {2, {5, 5}},
};

/* ---- the ops: each applies to both sides and describes itself -------------------------------------- */
static void op_reshape(mcase *c) {
  /* distribute the prime factors of numel over 1..4 dims, sometimes with extra 1s */
  int64_t n = c->r->numel, f[32];
  int nf = 0;
  for (int64_t p = 2; n > 1 && nf < 32; p++)
    while (n % p == 0 && nf < 32) {
      f[nf++] = p;
      n /= p;
    }
  int nd = rnd(1, 4);
  int64_t shape[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) shape[i] = 1;
  for (int i = 0; i < nf; i++) shape[rnd(0, nd - 1)] *= f[i];
  int neg = rnd(0, 3) == 0 ? rnd(0, nd - 1) : -1;
  int64_t arg[TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) arg[i] = i == neg ? -1 : shape[i];
  char b[64];
  say(c, " -> reshape%s", ref_shape_str(b, sizeof b, nd, arg));
  c->t = tg_reshape(c->t, nd, arg);
  c->r = ref_reshape(c->r, nd, arg);
  note_null(c, c->t, "reshape");
}

static void op_permute(mcase *c) {
  int n = c->r->ndim, order[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = rnd(0, i), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  say(c, " -> permute(");
  for (int i = 0; i < n; i++) say(c, "%s%d", i ? "," : "", order[i]);
  say(c, ")");
  c->t = tg_permute(c->t, n, order);
  c->r = ref_permute(c->r, order);
  note_null(c, c->t, "permute");
}

static void op_expand(mcase *c) {
  int n = c->r->ndim;
  bool has1 = false;
  for (int i = 0; i < n; i++) has1 |= c->r->shape[i] == 1;
  if (!has1 || n == 0 || rnd(0, 2) == 0) {
    /* insert a size-1 axis first */
    int at = rnd(0, n);
    int64_t shape[TG_MAX_DIMS];
    for (int i = 0, k = 0; i <= n; i++) shape[i] = i == at ? 1 : c->r->shape[k++];
    char b[64];
    say(c, " -> reshape%s", ref_shape_str(b, sizeof b, n + 1, shape));
    c->t = tg_reshape(c->t, n + 1, shape);
    c->r = ref_reshape(c->r, n + 1, shape);
    note_null(c, c->t, "reshape");
    n++;
  }
  int64_t to[TG_MAX_DIMS];
  int64_t numel = c->r->numel;
  for (int i = 0; i < n; i++) {
    to[i] = rnd(0, 3) == 0 ? -1 : c->r->shape[i];
    if (c->r->shape[i] == 1) {
      int64_t k = rnd(1, 4);
      if (numel * k <= MAX_NUMEL) {
        to[i] = k;
        numel *= k;
      }
    }
  }
  char b[64];
  say(c, " -> expand%s", ref_shape_str(b, sizeof b, n, to));
  c->t = tg_expand(c->t, n, to);
  c->r = ref_expand(c->r, n, to);
  note_null(c, c->t, "expand");
}

static const double pad_values[] = {0, 1, -2.5};

static void op_pad(mcase *c) {
  int n = c->r->ndim;
  int64_t pads[2 * TG_MAX_DIMS], numel = 1;
  for (int i = 0; i < n; i++) {
    pads[2 * i] = rnd(0, 2);
    pads[2 * i + 1] = rnd(0, 2);
    numel *= c->r->shape[i] + pads[2 * i] + pads[2 * i + 1];
  }
  if (numel > MAX_NUMEL)
    for (int i = 0; i < 2 * n; i++) pads[i] = i == 0 || i == 3 ? 1 : 0;
  double v = pad_values[rnd(0, 2)];
  say(c, " -> pad(");
  for (int i = 0; i < n; i++) say(c, "%s(%lld,%lld)", i ? "," : "", (long long)pads[2 * i], (long long)pads[2 * i + 1]);
  say(c, ", %g)", v);
  c->t = tg_pad_axes(c->t, n, pads, v);
  c->r = ref_pad(c->r, pads, v);
  note_null(c, c->t, "pad");
}

static void op_shrink(mcase *c) {
  int n = c->r->ndim;
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int64_t s = c->r->shape[i];
    b[2 * i] = ref_randint(0, s - 1);
    b[2 * i + 1] = ref_randint(b[2 * i] + 1, s);
  }
  say(c, " -> shrink(");
  for (int i = 0; i < n; i++) say(c, "%s(%lld,%lld)", i ? "," : "", (long long)b[2 * i], (long long)b[2 * i + 1]);
  say(c, ")");
  c->t = tg_shrink(c->t, n, b);
  c->r = ref_shrink(c->r, b);
  note_null(c, c->t, "shrink");
}

static void op_flip(mcase *c) {
  int n = c->r->ndim, axes[TG_MAX_DIMS], na = 0;
  for (int i = 0; i < n; i++)
    if (rnd(0, 1)) axes[na++] = rnd(0, 3) == 0 ? i - n : i;
  if (na == 0) axes[na++] = n - 1;
  say(c, " -> flip(");
  for (int i = 0; i < na; i++) say(c, "%s%d", i ? "," : "", axes[i]);
  say(c, ")");
  c->t = tg_flip(c->t, na, axes);
  c->r = ref_flip(c->r, na, axes);
  note_null(c, c->t, "flip");
}

static void op_slice(mcase *c) {
  static const int64_t steps[] = {1, 2, 3, -1, -2};
  int n = c->r->ndim, ns = rnd(1, n);
  tg_slice s[TG_MAX_DIMS];
  for (int i = 0; i < ns; i++) {
    int64_t sz = c->r->shape[i];
    if (rnd(0, 4) == 0) {
      s[i] = (tg_slice){0, 0, 0, true};
      continue;
    }
    for (int tries = 0; tries < 8; tries++) {
      s[i].all = false;
      s[i].step = steps[rnd(0, 4)];
      s[i].start = rnd(0, 4) == 0 ? (s[i].step > 0 ? 0 : TG_END) : ref_randint(-sz - 1, sz + 1);
      s[i].stop = rnd(0, 4) == 0 ? (s[i].step > 0 ? TG_END : INT64_MIN) : ref_randint(-sz - 1, sz + 1);
      tg_slice one = s[i];
      if (ref_slice(ref_new(TG_FLOAT32, 1, &sz), 1, &one)->numel > 0) break;
      s[i] = (tg_slice){0, 0, 0, true};
    }
  }
  say(c, " -> slice[");
  for (int i = 0; i < ns; i++) {
    if (s[i].all) say(c, "%s:", i ? "," : "");
    else {
      say(c, "%s", i ? "," : "");
      if (s[i].start == TG_END) say(c, "END");
      else say(c, "%lld", (long long)s[i].start);
      if (s[i].stop == TG_END) say(c, ":END");
      else if (s[i].stop == INT64_MIN) say(c, ":MIN");
      else say(c, ":%lld", (long long)s[i].stop);
      say(c, ":%lld", (long long)s[i].step);
    }
  }
  say(c, "]");
  c->t = tg_slice_axes(c->t, ns, s);
  c->r = ref_slice(c->r, ns, s);
  note_null(c, c->t, "slice_axes");
}

static void op_unary(mcase *c) {
  static const struct { ref_op op; tg_tensor *(*fn)(tg_tensor *); } ops[] = {
      {R_NEG, tg_neg}, {R_ABS, tg_abs}, {R_RELU, tg_relu}, {R_SIN, tg_sin}, {R_SIGMOID, tg_sigmoid}, {R_TANH, tg_tanh},
  };
  int k = rnd(0, (int)(sizeof ops / sizeof ops[0]) - 1);
  say(c, " -> %s", ref_op_name(ops[k].op));
  c->t = ops[k].fn(c->t);
  c->r = ref_unary(ops[k].op, c->r, 0, 0);
  note_null(c, c->t, ref_op_name(ops[k].op));
}

static void op_contiguous(mcase *c) {
  say(c, " -> contiguous");
  c->t = tg_contiguous(c->t);
  note_null(c, c->t, "contiguous");
}

/* the second operand of a binary op: a tensor broadcastable to c's shape, built in one of several ways */
static void make_operand(mcase *c, mcase *o) {
  int n = c->r->ndim;
  char b[64];
  o->desc[0] = 0;
  o->broken = false;
  switch (rnd(0, 4)) {
  case 0: { /* broadcast: some dims 1, maybe fewer leading dims */
    int drop = n > 0 ? rnd(0, n > 1 ? 1 : 0) : 0;
    int64_t s[TG_MAX_DIMS];
    for (int i = drop; i < n; i++) s[i - drop] = rnd(0, 1) ? 1 : c->r->shape[i];
    make_leaf(o, n - drop, s);
    break;
  }
  case 1: { /* permuted leaf, permuted back */
    int perm[TG_MAX_DIMS], inv[TG_MAX_DIMS];
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
      int j = rnd(0, i), t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    int64_t s[TG_MAX_DIMS];
    for (int i = 0; i < n; i++) s[i] = c->r->shape[perm[i]];
    for (int i = 0; i < n; i++) inv[perm[i]] = i;
    make_leaf(o, n, s);
    say(o, " -> permute(");
    for (int i = 0; i < n; i++) say(o, "%s%d", i ? "," : "", inv[i]);
    say(o, ")");
    o->t = tg_permute(o->t, n, inv);
    o->r = ref_permute(o->r, inv);
    note_null(o, o->t, "permute");
    break;
  }
  case 2: { /* flipped leaf */
    make_leaf(o, n, c->r->shape);
    if (n > 0) op_flip(o);
    break;
  }
  case 3: { /* smaller leaf padded up */
    int64_t s[TG_MAX_DIMS], pads[2 * TG_MAX_DIMS];
    for (int i = 0; i < n; i++) {
      int64_t cut = c->r->shape[i] > 1 ? rnd(0, (int)(c->r->shape[i] - 1 < 2 ? c->r->shape[i] - 1 : 2)) : 0;
      s[i] = c->r->shape[i] - cut;
      pads[2 * i] = rnd(0, (int)cut);
      pads[2 * i + 1] = cut - pads[2 * i];
    }
    make_leaf(o, n, s);
    double v = pad_values[rnd(0, 2)];
    say(o, " -> pad(..., %g)%s", v, ref_shape_str(b, sizeof b, n, c->r->shape));
    o->t = tg_pad_axes(o->t, n, pads, v);
    o->r = ref_pad(o->r, pads, v);
    note_null(o, o->t, "pad");
    break;
  }
  default: /* the chain itself, flipped: shares the input buffer */
    o->t = c->t;
    o->r = c->r;
    say(o, "self");
    if (n > 0) op_flip(o);
    break;
  }
}

static void op_binary(mcase *c) {
  static const struct { ref_op op; tg_tensor *(*fn)(tg_tensor *, tg_tensor *); } ops[] = {
      {R_ADD, tg_add}, {R_MUL, tg_mul}, {R_SUB, tg_sub}, {R_MAXIMUM, tg_maximum},
  };
  static mcase o;  /* large desc buffer: not on the stack */
  make_operand(c, &o);
  int k = rnd(0, 3);
  bool swap = rnd(0, 1);
  say(c, " -> %s%s(%s)", ref_op_name(ops[k].op), swap ? "_swapped" : "", o.desc);
  if (o.broken) c->broken = true;
  c->t = swap ? ops[k].fn(o.t, c->t) : ops[k].fn(c->t, o.t);
  c->r = swap ? ref_binary(ops[k].op, o.r, c->r) : ref_binary(ops[k].op, c->r, o.r);
  note_null(c, c->t, ref_op_name(ops[k].op));
}

static void make_case(mcase *c) {
  c->desc[0] = 0;
  c->broken = false;
  c->atol = 1e-6;
  int li = rnd(0, (int)(sizeof leaf_shapes / sizeof leaf_shapes[0]) - 1);
  make_leaf(c, leaf_shapes[li].n, leaf_shapes[li].s);
  int len = rnd(1, 6);
  for (int k = 0; k < len && !c->broken; k++) {
    int which = rnd(0, 19);
    if (c->r->ndim == 0 && which < 13) which = 0;  /* only reshape/unary/binary make sense on 0-d */
    if (which < 2) op_reshape(c);
    else if (which < 4) op_permute(c);
    else if (which < 6) op_expand(c);
    else if (which < 8) op_pad(c);
    else if (which < 10) op_shrink(c);
    else if (which < 11) op_flip(c);
    else if (which < 13) op_slice(c);
    else if (which < 15) op_unary(c);
    else if (which < 19) op_binary(c);
    else op_contiguous(c);
    if (c->r->numel > MAX_NUMEL) {
      /* shrink back down: keep the first two of every axis */
      int64_t b[2 * TG_MAX_DIMS];
      for (int i = 0; i < c->r->ndim; i++) {
        b[2 * i] = 0;
        b[2 * i + 1] = c->r->shape[i] < 2 ? c->r->shape[i] : 2;
      }
      say(c, " -> shrink(to 2s)");
      c->t = tg_shrink(c->t, c->r->ndim, b);
      c->r = ref_shrink(c->r, b);
      note_null(c, c->t, "shrink");
    }
  }
}

/* ends a chain with sum or max over random axes, keepdim random: the reduce of a movement chain */
static void op_reduce(mcase *c) {
  int n = c->r->ndim, axes[TG_MAX_DIMS], na = 0;
  for (int i = 0; i < n; i++)
    if (rnd(0, 1)) axes[na++] = rnd(0, 2) == 0 ? i - n : i;
  bool keep = rnd(0, 1), is_max = rnd(0, 1);
  say(c, " -> %s(", is_max ? "max" : "sum");
  for (int i = 0; i < na; i++) say(c, "%s%d", i ? "," : "", axes[i]);
  say(c, "%skeepdim=%d)", na ? ", " : "", keep);
  if (!is_max) {
    ref_arr *mag = ref_reduce(R_SUM, ref_unary(R_ABS, c->r, 0, 0), na, axes, keep);
    double m = 0;
    for (int64_t i = 0; i < mag->numel; i++) m = mag->data[i] > m ? mag->data[i] : m;
    c->atol = 1e-6 + 5e-7 * m;
  }
  c->t = (is_max ? tg_max : tg_sum)(c->t, na, axes, keep);
  c->r = ref_reduce(is_max ? R_MAX : R_SUM, c->r, na, axes, keep);
  note_null(c, c->t, is_max ? "max" : "sum");
}

static void run_cases(int default_cases, bool reduce_at_end) {
  const char *es = getenv("TG_SEED"), *ec = getenv("TG_CASES");
  uint64_t seed = es ? strtoull(es, NULL, 10) : 1;
  int ncases = ec ? atoi(ec) : default_cases, only = getenv("TG_CASE") ? atoi(getenv("TG_CASE")) : -1;
  static mcase cases[BATCH];
  int failed = 0;
  for (int start = 0; start < ncases; start += BATCH) {
    int nb = ncases - start < BATCH ? ncases - start : BATCH;
    tg_scope_begin();
    tg_tensor *ts[BATCH];
    int nt = 0;
    for (int i = 0; i < nb; i++) {
      ref_seed(seed * 1000003u + (uint64_t)(start + i));  /* each case reproducible on its own (TG_CASE) */
      make_case(&cases[i]);
      if (reduce_at_end && !cases[i].broken) op_reduce(&cases[i]);
      if (only >= 0 && start + i != only) cases[i].broken = true, cases[i].desc[0] = 0;
      else if (!cases[i].broken) ts[nt++] = cases[i].t;
    }
    if (nt && tg_realize_many(nt, ts) != TG_OK)
      test_fail(__FILE__, __LINE__, "seed %llu batch at case %d: realize_many failed: %s", (unsigned long long)seed,
                start, tg_error());
    for (int i = 0; i < nb; i++) {
      mcase *c = &cases[i];
      char what[64];
      snprintf(what, sizeof what, "seed %llu case %d", (unsigned long long)seed, start + i);
      if (only >= 0 && start + i != only) continue;
      if (only >= 0) fprintf(stderr, "  case %d chain: %s\n", only, c->desc);
      bool ok = !c->broken && ref_check_tol(what, c->t, c->r, true, c->atol, 1e-3, __FILE__, __LINE__);
      if (!ok) {
        failed++;
        fprintf(stderr, "  seed %llu case %d chain: %s\n", (unsigned long long)seed, start + i, c->desc);
        if (c->broken) test_fail(__FILE__, __LINE__, "%s: an op refused a valid input", what);
      }
    }
    tg_scope_end();
    ref_free_all();
  }
  if (failed) test_fail(__FILE__, __LINE__, "%d of %d random chains differ (rerun one with TG_SEED=%llu)", failed,
                        ncases, (unsigned long long)seed);
}

TEST(test_movement_random_chains) { run_cases(300, false); }

/* the same chains (other seeds) ending in a reduction: fusion of movement into a reduce */
TEST(test_movement_random_chains_then_reduce) {
  const char *es = getenv("TG_SEED");
  if (!es) setenv("TG_SEED", "7", 1);
  run_cases(80, true);
  if (!es) unsetenv("TG_SEED");
}
