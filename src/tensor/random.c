/* random.c — random numbers computed inside kernels: Threefry-2x32 (20 rounds, Random123's constants)
 * applied to a counter (each element's index plus a per-call offset) under a key made from the seed.
 * The numbers depend only on the seed, the call order and the element index: the same on every run, for
 * every thread count and every device.
 *
 * The seed and the counter are the process's (tg_manual_seed, as tinygrad's): draws from several threads
 * take counters in whatever order the threads come, each draw its own range. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tensor/tensor.h"

static _Atomic uint64_t seed = 0x5eed;
static _Atomic uint64_t counter;  /* elements drawn since the seed was set */
static _Thread_local rng_draw_fn observer;  /* this thread's JIT capture */
static _Thread_local void *observer_ctx;

void rng_set_observer(rng_draw_fn fn, void *ctx) {
  observer = fn;
  observer_ctx = ctx;
}

uint64_t rng_advance(uint64_t n) { return atomic_fetch_add(&counter, n); }

void tg_manual_seed(uint64_t s) {
  atomic_store(&seed, s);
  atomic_store(&counter, 0);
}

static uop *u32c(uop *like, uint64_t v) { return mk_const(TG_UINT32, (double)(uint32_t)v, like->ndim, like->shape); }
static uop *add(uop *a, uop *b) { return mk_alu(OP_ADD, TG_UINT32, 2, (uop *[]){a, b}); }
static uop *rotl(uop *x, int r) {
  uop *l = mk_alu(OP_SHL, TG_UINT32, 2, (uop *[]){x, u32c(x, (uint64_t)r)});
  uop *h = mk_alu(OP_SHR, TG_UINT32, 2, (uop *[]){x, u32c(x, (uint64_t)(32 - r))});
  return mk_alu(OP_OR, TG_UINT32, 2, (uop *[]){l, h});
}

/* Threefry-2x32-20 of (x0, x1) under key (k0, k1) (nodes: the key is read from the draw's buffer);
 * returns the first output word */
static uop *threefry(uop *x0, uop *x1, uop *k0, uop *k1) {
  static const int R[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uop *k2 = mk_alu(OP_XOR, TG_UINT32, 2, (uop *[]){mk_alu(OP_XOR, TG_UINT32, 2, (uop *[]){k0, k1}), u32c(k0, 0x1BD11BDAu)});
  uop *ks[3] = {k0, k1, k2};
  x0 = add(x0, ks[0]);
  x1 = add(x1, ks[1]);
  for (int i = 0; i < 20; i++) {
    x0 = add(x0, x1);
    x1 = rotl(x1, R[i % 8]);
    x1 = mk_alu(OP_XOR, TG_UINT32, 2, (uop *[]){x1, x0});
    if (i % 4 == 3) {
      uint32_t s = (uint32_t)(i + 1) / 4;
      x0 = add(x0, ks[s % 3]);
      x1 = add(x1, add(ks[(s + 1) % 3], u32c(x1, s)));
    }
  }
  return x0;
}

void rng_draw_words(uint64_t base, uint32_t out[4]) {
  uint64_t s = atomic_load(&seed);
  out[0] = (uint32_t)base;
  out[1] = (uint32_t)(base >> 32);
  out[2] = (uint32_t)s;
  out[3] = (uint32_t)(s >> 32);
}

/* the draw's counter and key as a 4-word buffer: constants would make every call's kernel new code to
 * compile, and a JIT replay rewrites the buffer to draw fresh numbers */
static uop *draw_buffer(uint64_t base, int64_t n) {
  uint32_t v[4];
  rng_draw_words(base, v);
  tg_tensor *t = tg_from_data(TG_UINT32, 1, (int64_t[]){4}, v, sizeof v);
  if (!t) return NULL;
  uop *u = t->u;
  tg_free(t);  /* the node keeps its buffer */
  if (observer && u) observer(observer_ctx, u->buf, base, (uint64_t)n);
  return u;
}

/* word w of the draw buffer broadcast to shape (n,) (not a (n, 4) view: n may be up to 2^60) */
static uop *word(uop *draw, int w, int64_t n) {
  return mk_expand(mk_shrink(draw, (int64_t[]){w, w + 1}), 1, &n);
}

/* n uniform floats in [0, 1) as float32, shape (n,) */
static uop *uniform_bits(int64_t n) {
  uint64_t base = rng_advance((uint64_t)n);
  uop *idx = mk_iota(TG_UINT32, n);
  uop *d = draw_buffer(base, n);
  if (!idx || !d) return NULL;
  uop *bits = threefry(add(idx, word(d, 0, n)), word(d, 1, n), word(d, 2, n), word(d, 3, n));
  /* the top 24 bits as a float in [0, 1) */
  uop *top = mk_alu(OP_SHR, TG_UINT32, 2, (uop *[]){bits, u32c(bits, 8)});
  uop *f = mk_cast(top, TG_FLOAT32);
  return mk_alu(OP_MUL, TG_FLOAT32, 2, (uop *[]){f, mk_const(TG_FLOAT32, 1.0 / 16777216.0, 1, &n)});
}

static bool check(const char *op, tg_dtype dt, int ndim, const int64_t *shape, int64_t *n) {
  if ((unsigned)dt >= TG_DTYPE_COUNT) {
    tg_set_error(TG_ERR_ARG, "%s: bad dtype %d", op, (int)dt);
    return false;
  }
  return shape_check(op, ndim, shape) && shape_numel(ndim, shape, n);
}

static uop *scale_shift(uop *x, double mul, double add_) {
  if (!x) return NULL;
  if (mul != 1) x = mk_alu(OP_MUL, (tg_dtype)x->dtype, 2, (uop *[]){x, mk_const((tg_dtype)x->dtype, mul, x->ndim, x->shape)});
  if (add_ != 0) x = mk_alu(OP_ADD, (tg_dtype)x->dtype, 2, (uop *[]){x, mk_const((tg_dtype)x->dtype, add_, x->ndim, x->shape)});
  return x;
}

tg_tensor *tg_uniform(tg_dtype dt, int ndim, const int64_t *shape, double low, double high) {
  int64_t n;
  if (!check("tg_uniform", dt, ndim, shape, &n)) return NULL;
  uop *u = scale_shift(uniform_bits(n), high - low, low);
  return tensor_new(mk_cast(mk_reshape(u, ndim, shape), dt));
}

tg_tensor *tg_rand(tg_dtype dt, int ndim, const int64_t *shape) {
  int64_t n;
  if (!check("tg_rand", dt, ndim, shape, &n)) return NULL;
  if (!dtype_is_float(dt)) {  /* as tinygrad: an integer rand in [0, 1) would be all zeros */
    tg_set_error(TG_ERR_ARG, "tg_rand: dtype %s is not a float type (use tg_randint)", tg_dtype_name(dt));
    return NULL;
  }
  return tensor_new(mk_cast(mk_reshape(uniform_bits(n), ndim, shape), dt));
}

/* Box-Muller: sqrt(-2 ln(1 - u1)) * cos(2 pi u2) */
tg_tensor *tg_normal(tg_dtype dt, int ndim, const int64_t *shape, double mean, double std) {
  int64_t n;
  if (!check("tg_normal", dt, ndim, shape, &n)) return NULL;
  uop *u1 = uniform_bits(n), *u2 = uniform_bits(n);
  uop *one_minus = scale_shift(u1, -1, 1);
  uop *lg = mk_alu(OP_LOG2, TG_FLOAT32, 1, &one_minus);
  uop *r = scale_shift(lg, -2.0 * 0.69314718055994530942, 0);
  r = mk_alu(OP_SQRT, TG_FLOAT32, 1, &r);
  uop *ang = scale_shift(u2, -2 * M_PI, M_PI / 2);  /* cos(2 pi u) = sin(pi/2 - 2 pi u) */
  uop *c = mk_alu(OP_SIN, TG_FLOAT32, 1, &ang);
  uop *z = scale_shift(mk_alu(OP_MUL, TG_FLOAT32, 2, (uop *[]){r, c}), std, mean);
  return tensor_new(mk_cast(mk_reshape(z, ndim, shape), dt));
}

tg_tensor *tg_randn(tg_dtype dt, int ndim, const int64_t *shape) { return tg_normal(dt, ndim, shape, 0, 1); }

tg_tensor *tg_randint(tg_dtype dt, int ndim, const int64_t *shape, int64_t low, int64_t high) {
  int64_t n;
  if (!check("tg_randint", dt, ndim, shape, &n)) return NULL;
  if (!dtype_is_int(dt)) {
    tg_set_error(TG_ERR_ARG, "tg_randint: dtype %s is not an integer type", tg_dtype_name(dt));
    return NULL;
  }
  if (high <= low || (double)low < dtype_min(dt) || (double)high - 1 > dtype_max(dt)) {
    tg_set_error(TG_ERR_ARG, "tg_randint: range [%lld, %lld) is empty or does not fit %s", (long long)low, (long long)high,
                 tg_dtype_name(dt));
    return NULL;
  }
  /* floor(u * (high - low)) in float32 as tinygrad (float64 past 2^24, where float32 loses integers), cast,
   * then + low in the integer type, exactly */
  double range = (double)high - (double)low;
  tg_dtype ft = range > 16777216.0 ? TG_FLOAT64 : TG_FLOAT32;
  uop *u = uniform_bits(n);
  if (ft != TG_FLOAT32) u = mk_cast(u, ft);
  uop *t = scale_shift(u, range, 0);
  t = mk_cast(mk_alu(OP_TRUNC, ft, 1, &t), dt);
  return tensor_new(mk_reshape(scale_shift(t, 1, (double)low), ndim, shape));
}

static double fan_in(int ndim, const int64_t *shape) {
  double f = ndim > 1 ? (double)shape[1] : 1;
  for (int i = 2; i < ndim; i++) f *= (double)shape[i];
  return f;
}

tg_tensor *tg_kaiming_uniform(tg_dtype dt, int ndim, const int64_t *shape, double a) {
  if (ndim < 1 || !shape) {
    tg_set_error(TG_ERR_ARG, "tg_kaiming_uniform: needs at least one dimension");
    return NULL;
  }
  double bound = sqrt(2.0 / (1 + a * a)) * sqrt(3.0 / fan_in(ndim, shape));
  return tg_uniform(dt, ndim, shape, -bound, bound);
}

tg_tensor *tg_kaiming_normal(tg_dtype dt, int ndim, const int64_t *shape, double a) {
  if (ndim < 1 || !shape) {
    tg_set_error(TG_ERR_ARG, "tg_kaiming_normal: needs at least one dimension");
    return NULL;
  }
  double std = sqrt(2.0 / (1 + a * a)) / sqrt(fan_in(ndim, shape));
  return tg_normal(dt, ndim, shape, 0, std);
}

/* tinygrad's: bound sqrt(6 / (shape[0] + prod(shape[1:]))) */
tg_tensor *tg_glorot_uniform(tg_dtype dt, int ndim, const int64_t *shape) {
  if (ndim < 1 || !shape) {
    tg_set_error(TG_ERR_ARG, "tg_glorot_uniform: needs at least one dimension");
    return NULL;
  }
  double rest = 1;
  for (int i = 1; i < ndim; i++) rest *= (double)shape[i];
  double bound = sqrt(6.0 / ((double)shape[0] + rest));
  return tg_uniform(dt, ndim, shape, -bound, bound);
}
