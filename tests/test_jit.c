/* test_jit.c — a captured training step replays bit-identically with no scheduling, compiling or
 * allocating; bad inputs and host reads are refused and the JIT stays usable. */
#include <stdlib.h>

#include "ref.h"
#include "test.h"

typedef struct mlp { tg_nn_linear l1, l2; tg_optim *opt; tg_params *p; bool read_host; } mlp;

static tg_status mlp_init(mlp *m) {
  tg_manual_seed(9);
  memset(m, 0, sizeof *m);
  if (tg_nn_linear_init(&m->l1, 12, 16, true) || tg_nn_linear_init(&m->l2, 16, 3, true)) return tg_error_status();
  m->p = tg_params_new();
  tg_nn_linear_params(&m->l1, "l1", m->p);
  tg_nn_linear_params(&m->l2, "l2", m->p);
  m->opt = tg_adam_new(m->p, adam_lr(0.01));
  return m->opt ? TG_OK : tg_error_status();
}

static void mlp_free(mlp *m) {
  tg_optim_free(m->opt);
  tg_params_free(m->p);
  tg_nn_linear_free(&m->l1);
  tg_nn_linear_free(&m->l2);
}

/* in: x (8, 12) float32, y (8) int32; out: the loss */
static tg_status train_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  mlp *m = ctx;
  tg_scope_begin();
  tg_tensor *logits = tg_nn_linear_forward(&m->l2, tg_relu(tg_nn_linear_forward(&m->l1, in[0])));
  tg_tensor *loss = tg_sparse_categorical_crossentropy(logits, in[1], (tg_loss_opts){0});
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->opt, 1, &loss);
  if (st == TG_OK && m->read_host && isnan(tg_item(loss))) st = tg_error_status();
  out[0] = st == TG_OK ? tg_keep(loss) : NULL;
  tg_scope_end();
  return st;
}

static void batch(int s, tg_tensor **x, tg_tensor **y) {
  float xv[96];
  int32_t yv[8];
  for (int i = 0; i < 96; i++) xv[i] = (float)sin(0.37 * (i + 1) * (s + 1));
  for (int i = 0; i < 8; i++) yv[i] = (i + s) % 3;
  *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){8, 12}, xv, sizeof xv);
  *y = tg_from_data(TG_INT32, 1, (int64_t[]){8}, yv, sizeof yv);
}

static void params_of(mlp *m, float *out) {  /* all parameters, flattened */
  size_t k = 0;
  for (int i = 0; i < tg_params_count(m->p); i++) {
    tg_tensor *t = tg_params_tensor(m->p, i);
    size_t n = (size_t)tg_numel(t);
    tg_to_host(t, out + k, n * 4);
    k += n;
  }
}

#define NPARAMS (12 * 16 + 16 + 16 * 3 + 3)

TEST(test_jit_replay_is_bit_identical_and_does_no_work) {
  mlp a, b;
  CHECK(mlp_init(&a) == TG_OK && mlp_init(&b) == TG_OK, "%s", tg_error());
  tg_jit *j = tg_jit_new(train_step, &b, 2, 1);
  CHECK_T(j);
  float pa[NPARAMS], pb[NPARAMS];
  for (int s = 0; s < 6; s++) {
    tg_scope_begin();
    tg_tensor *x, *y, *loss_a, *loss_b;
    batch(s, &x, &y);
    tg_tensor *in[2] = {x, y};
    CHECK(train_step(&a, 2, in, 1, &loss_a) == TG_OK, "eager step %d: %s", s, tg_error());
    tg_stats before = tg_get_stats();
    CHECK(tg_jit_call(j, in, &loss_b) == TG_OK, "jit step %d: %s", s, tg_error());
    tg_stats after = tg_get_stats();
    if (s >= 2) {
      CHECK(after.schedules == before.schedules, "step %d: replay scheduled %llu times", s,
            (unsigned long long)(after.schedules - before.schedules));
      CHECK(after.kernels_compiled == before.kernels_compiled, "step %d: replay compiled", s);
      CHECK(after.buffers_allocated == before.buffers_allocated, "step %d: replay allocated %llu buffers", s,
            (unsigned long long)(after.buffers_allocated - before.buffers_allocated));
      CHECK(after.kernels_run == before.kernels_run, "step %d: replay went through the scheduler's launches", s);
    }
    float la = (float)tg_item(loss_a), lb = (float)tg_item(loss_b);
    CHECK(la == lb, "step %d: loss %.9g eager, %.9g jit", s, la, lb);
    params_of(&a, pa);
    params_of(&b, pb);
    CHECK(!memcmp(pa, pb, sizeof pa), "step %d: parameters differ between eager and jit", s);
    tg_free(loss_a);
    tg_free(loss_b);
    tg_scope_end();
  }
  CHECK(tg_jit_kernels(j) > 0, "nothing was captured");
  tg_jit_free(j);
  mlp_free(&a);
  mlp_free(&b);
}

TEST(test_jit_refuses_other_shapes_and_stays_usable) {
  mlp m;
  CHECK(mlp_init(&m) == TG_OK, "%s", tg_error());
  tg_jit *j = tg_jit_new(train_step, &m, 2, 1);
  CHECK_T(j);
  for (int s = 0; s < 4; s++) {
    tg_scope_begin();
    tg_tensor *x, *y, *loss;
    batch(s, &x, &y);
    if (s == 2) {  /* a batch of another size: refused */
      tg_tensor *bad = tg_zeros(TG_FLOAT32, 2, (int64_t[]){5, 12});
      tg_tensor *in[2] = {bad, y};
      CHECK(tg_jit_call(j, in, &loss) != TG_OK, "another input shape was accepted");
      CHECK(strstr(tg_error(), "input 0") && strstr(tg_error(), "(5, 12)") && strstr(tg_error(), "(8, 12)"),
            "message: %s", tg_error());
      tg_tensor *in2[2] = {x, tg_cast(y, TG_INT64)};
      CHECK(tg_jit_call(j, in2, &loss) != TG_OK && strstr(tg_error(), "int64"), "another dtype was accepted: %s", tg_error());
      tg_error_clear();
    }
    tg_tensor *in[2] = {x, y};
    CHECK(tg_jit_call(j, in, &loss) == TG_OK, "step %d: %s", s, tg_error());
    tg_free(loss);
    tg_scope_end();
  }
  tg_jit_free(j);
  mlp_free(&m);
}

TEST(test_jit_refuses_host_reads_during_capture) {
  mlp m;
  CHECK(mlp_init(&m) == TG_OK, "%s", tg_error());
  m.read_host = true;
  tg_jit *j = tg_jit_new(train_step, &m, 2, 1);
  CHECK_T(j);
  tg_scope_begin();
  tg_tensor *x, *y, *loss = NULL;
  batch(0, &x, &y);
  tg_tensor *in[2] = {x, y};
  CHECK(tg_jit_call(j, in, &loss) == TG_OK, "first call (not captured) failed: %s", tg_error());
  tg_free(loss);
  CHECK(tg_jit_call(j, in, &loss) != TG_OK, "a host read during the capture was accepted");
  CHECK(strstr(tg_error(), "captured"), "message: %s", tg_error());
  m.read_host = false;  /* the JIT is still usable */
  CHECK(tg_jit_call(j, in, &loss) == TG_OK && tg_jit_kernels(j) > 0, "capture after a refused one: %s", tg_error());
  tg_free(loss);
  CHECK(tg_jit_call(j, in, &loss) == TG_OK, "replay: %s", tg_error());
  tg_free(loss);
  tg_scope_end();
  tg_jit_free(j);
  mlp_free(&m);
}

/* ---- several steps of MNIST training (beautiful_mnist's layers, narrower, with dropout) ----------------- */

typedef struct cnn {
  tg_nn_conv2d c1, c2, c3, c4;
  tg_nn_batchnorm bn1, bn2;
  tg_nn_linear fc;
  tg_params *p;
  tg_optim *opt;
} cnn;

static tg_status cnn_init(cnn *m) {
  tg_manual_seed(5);
  memset(m, 0, sizeof *m);
  tg_conv_opts o = {0};
  if (tg_nn_conv2d_init(&m->c1, 1, 8, TG_INTS(5), true, o) || tg_nn_conv2d_init(&m->c2, 8, 8, TG_INTS(5), true, o) ||
      tg_nn_batchnorm_init(&m->bn1, 8) || tg_nn_conv2d_init(&m->c3, 8, 16, TG_INTS(3), true, o) ||
      tg_nn_conv2d_init(&m->c4, 16, 16, TG_INTS(3), true, o) || tg_nn_batchnorm_init(&m->bn2, 16) ||
      tg_nn_linear_init(&m->fc, 144, 10, true))
    return tg_error_status();
  m->p = tg_params_new();
  tg_nn_conv2d_params(&m->c1, "c1", m->p);
  tg_nn_conv2d_params(&m->c2, "c2", m->p);
  tg_nn_batchnorm_params(&m->bn1, "bn1", m->p);
  tg_nn_conv2d_params(&m->c3, "c3", m->p);
  tg_nn_conv2d_params(&m->c4, "c4", m->p);
  tg_nn_batchnorm_params(&m->bn2, "bn2", m->p);
  tg_nn_linear_params(&m->fc, "fc", m->p);
  m->opt = tg_adam_new(m->p, adam_lr(0.003));
  return m->opt ? TG_OK : tg_error_status();
}

static void cnn_free(cnn *m) {
  tg_optim_free(m->opt);
  tg_params_free(m->p);
  tg_nn_conv2d_free(&m->c1);
  tg_nn_conv2d_free(&m->c2);
  tg_nn_conv2d_free(&m->c3);
  tg_nn_conv2d_free(&m->c4);
  tg_nn_batchnorm_free(&m->bn1);
  tg_nn_batchnorm_free(&m->bn2);
  tg_nn_linear_free(&m->fc);
}

static tg_status cnn_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  cnn *m = ctx;
  tg_pool_opts pool = {.kernel = TG_INTS(2)};
  tg_scope_begin();
  tg_tensor *x = tg_cast(in[0], TG_FLOAT32);
  x = tg_relu(tg_nn_conv2d_forward(&m->c1, x));
  x = tg_relu(tg_nn_conv2d_forward(&m->c2, x));
  x = tg_max_pool2d(tg_nn_batchnorm_forward(&m->bn1, x), pool);
  x = tg_relu(tg_nn_conv2d_forward(&m->c3, x));
  x = tg_relu(tg_nn_conv2d_forward(&m->c4, x));
  x = tg_max_pool2d(tg_nn_batchnorm_forward(&m->bn2, x), pool);
  tg_tensor *logits = tg_nn_linear_forward(&m->fc, tg_dropout(tg_flatten(x, 1, -1), 0.25));
  tg_tensor *loss = tg_sparse_categorical_crossentropy(logits, in[1], (tg_loss_opts){0});
  tg_tensor *upd[7] = {loss, m->bn1.running_mean, m->bn1.running_var, m->bn1.num_batches_tracked,
                       m->bn2.running_mean, m->bn2.running_var, m->bn2.num_batches_tracked};
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->opt, 7, upd);
  out[0] = st == TG_OK ? tg_keep(loss) : NULL;
  tg_scope_end();
  return st;
}

/* every parameter and running statistic of m, flattened into out (at most cap floats); the count */
static size_t cnn_state(cnn *m, float *out, size_t cap) {
  size_t k = 0;
  for (int i = 0; i < tg_params_count(m->p); i++) {
    tg_tensor *t = tg_params_tensor(m->p, i);
    size_t n = (size_t)tg_numel(t);
    if (tg_dtype_of(t) != TG_FLOAT32 || k + n > cap) continue;
    if (tg_to_host(t, out + k, n * 4) != TG_OK) return 0;
    k += n;
  }
  return k;
}

TEST(test_jit_mnist_steps_are_bit_identical_to_eager) {
  enum { B = 6, CAP = 16384 };
  cnn a, b;
  CHECK(cnn_init(&a) == TG_OK && cnn_init(&b) == TG_OK, "%s", tg_error());
  tg_jit *j = tg_jit_new(cnn_step, &b, 2, 1);
  CHECK_T(j);
  float *sa = malloc(CAP * sizeof *sa), *sb = malloc(CAP * sizeof *sb);
  CHECK_T(sa && sb);
  uint8_t img[B * 28 * 28];
  int32_t lab[B];
  tg_set_training(true);
  for (int s = 0; s < 5; s++) {
    for (int i = 0; i < B * 28 * 28; i++) img[i] = (uint8_t)((i * 37 + s * 101) % 256 * ((i / 28 + s) % 3 != 0));
    for (int i = 0; i < B; i++) lab[i] = (i * 3 + s) % 10;
    tg_scope_begin();
    tg_tensor *in[2] = {tg_from_data(TG_UINT8, 4, (int64_t[]){B, 1, 28, 28}, img, sizeof img),
                        tg_from_data(TG_INT32, 1, (int64_t[]){B}, lab, sizeof lab)};
    tg_tensor *la = NULL, *lb = NULL;
    tg_manual_seed(40 + (uint64_t)s);  /* both draw the same dropout masks */
    CHECK(cnn_step(&a, 2, in, 1, &la) == TG_OK, "eager step %d: %s", s, tg_error());
    tg_manual_seed(40 + (uint64_t)s);
    CHECK(tg_jit_call(j, in, &lb) == TG_OK, "jit step %d: %s", s, tg_error());
    float fa = (float)tg_item(la), fb = (float)tg_item(lb);
    CHECK(fa == fb && isfinite(fa), "step %d: loss %.9g eager, %.9g jit", s, fa, fb);
    size_t na = cnn_state(&a, sa, CAP), nb = cnn_state(&b, sb, CAP);
    CHECK(na == nb && na > 1000 && !memcmp(sa, sb, na * sizeof *sa), "step %d: parameters differ (%zu, %zu floats)",
          s, na, nb);
    tg_free(la);
    tg_free(lb);
    tg_scope_end();
  }
  tg_set_training(false);
  CHECK(tg_jit_kernels(j) > 20, "captured only %d kernels", tg_jit_kernels(j));
  free(sa);
  free(sb);
  tg_jit_free(j);
  cnn_free(&a);
  cnn_free(&b);
}

/* a step may return one of its inputs as it is: each call returns that call's input */
static tg_status passthrough_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  out[0] = tg_reshape(in[0], 1, (int64_t[]){4});
  out[1] = tg_add_scalar(in[0], 1);
  return out[0] && out[1] ? TG_OK : tg_error_status();
}

TEST(test_jit_step_returning_its_input) {
  tg_jit *j = tg_jit_new(passthrough_step, NULL, 1, 2);
  CHECK_T(j);
  for (int s = 0; s < 4; s++) {
    float v[4] = {(float)s, 1, 2, 3}, a[4], b[4];
    tg_tensor *x = tg_from_data(TG_FLOAT32, 1, (int64_t[]){4}, v, sizeof v), *o[2];
    CHECK(tg_jit_call(j, &x, o) == TG_OK, "%s", tg_error());
    CHECK(tg_to_host(o[0], a, sizeof a) == TG_OK && tg_to_host(o[1], b, sizeof b) == TG_OK, "%s", tg_error());
    CHECK(a[0] == s && b[0] == s + 1, "call %d: returned input %g, input + 1 %g", s, a[0], b[0]);
    tg_free(o[0]);
    tg_free(o[1]);
    tg_free(x);
  }
  tg_jit_free(j);
}

/* issue 12 item 11: inputs made by equal graphs are one interned node with one cached value. The capture must
 * read the buffer the call gave it, not run the kernel that made it, or every replay returns the first value */
static tg_status plus_one_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  out[0] = tg_add_scalar(in[0], 1);
  return out[0] ? TG_OK : tg_error_status();
}

TEST(test_jit_replays_inputs_made_by_equal_graphs) {
  tg_jit *j = tg_jit_new(plus_one_step, NULL, 1, 1);
  CHECK_T(j);
  const double vals[] = {1, 1, 5, 7, 7, 9, 1};
  for (int c = 0; c < 7; c++) {
    tg_tensor *x = tg_contiguous(tg_full(TG_FLOAT32, 1, (int64_t[]){4}, vals[c])), *o = NULL;
    float got[4] = {0};
    tg_status st = tg_jit_call(j, &x, &o);
    CHECK(st == TG_OK && tg_to_host(o, got, sizeof got) == TG_OK, "call %d: %s", c, tg_error());
    for (int i = 0; i < 4; i++)
      CHECK(got[i] == (float)vals[c] + 1, "call %d: input %g gave [%d] = %g, want %g", c, vals[c], i, got[i], vals[c] + 1);
    tg_free(o);
    tg_free(x);
  }
  tg_jit_free(j);
}

/* two inputs with equal values at the capture share one buffer, and so may an input and a parameter the step
 * reads: each must still read its own value in later calls */
typedef struct shared_ctx { tg_tensor *p; } shared_ctx;

static tg_status shared_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  shared_ctx *s = ctx;
  out[0] = tg_add(tg_sub(tg_mul_scalar(in[0], 100), tg_mul_scalar(in[1], 10)), s->p);
  return out[0] ? TG_OK : tg_error_status();
}

TEST(test_jit_inputs_sharing_a_buffer_at_capture) {
  shared_ctx s = {tg_contiguous(tg_full(TG_FLOAT32, 1, (int64_t[]){3}, 1))};
  CHECK_T(s.p);
  CHECK(tg_realize(s.p) == TG_OK, "%s", tg_error());
  tg_jit *j = tg_jit_new(shared_step, &s, 2, 1);
  CHECK_T(j);
  const double a[] = {1, 1, 2, 3, 1, 4}, b[] = {1, 1, 5, 3, 2, 1};
  for (int c = 0; c < 6; c++) {
    tg_tensor *x[2] = {tg_contiguous(tg_full(TG_FLOAT32, 1, (int64_t[]){3}, a[c])),
                       tg_contiguous(tg_full(TG_FLOAT32, 1, (int64_t[]){3}, b[c]))}, *o = NULL;
    float got[3] = {0}, want = (float)(100 * a[c] - 10 * b[c] + 1);
    CHECK(tg_jit_call(j, x, &o) == TG_OK && tg_to_host(o, got, sizeof got) == TG_OK, "call %d: %s", c, tg_error());
    for (int i = 0; i < 3; i++) CHECK(got[i] == want, "call %d: [%d] = %g, want %g", c, i, got[i], want);
    float pv[3] = {0};
    CHECK(tg_to_host(s.p, pv, sizeof pv) == TG_OK && pv[0] == 1, "call %d: the parameter became %g", c, pv[0]);
    tg_free(o);
    tg_free(x[0]);
    tg_free(x[1]);
  }
  tg_jit_free(j);
  tg_free(s.p);
}

/* Randomized: steps captured over inputs built fresh for each call by random graphs (full, contiguous of
 * expressions, from_data, views of realized tensors, the same tensor twice; values drawn from a small set, so
 * equal inputs within and across calls are common) give what the same step run eagerly on the same inputs
 * gives. TG_SEED changes the seed. */
#define RJ_ROWS 3
#define RJ_COLS 4
#define RJ_N (RJ_ROWS * RJ_COLS)

static tg_status rj_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  int kind = *(int *)ctx;
  tg_scope_begin();
  switch (kind) {
    case 0:  /* elementwise over both */
      out[0] = tg_sub(tg_mul_scalar(in[0], 10), in[1]);
      out[1] = tg_maximum(in[0], tg_neg(in[1]));
      break;
    case 1:  /* a reduce, a broadcast and a view of an input */
      out[0] = tg_sum(tg_mul(in[0], tg_flip(in[1], AXES(1))), AXES(0), false);
      out[1] = tg_add(tg_permute(in[0], AXES(1, 0)), tg_max(in[1], AXES(1), false));
      break;
    case 2:  /* an input returned as it is, and a matmul */
      out[0] = tg_reshape(in[1], SHAPE(RJ_N));
      out[1] = tg_matmul(in[0], tg_permute(in[1], AXES(1, 0)));
      break;
    default:  /* a comparison and a select between the inputs */
      out[0] = tg_exp(tg_mul_scalar(in[0], 0.1));
      out[1] = tg_where(tg_lt(in[0], in[1]), in[0], tg_add_scalar(in[1], 0.5));
  }
  tg_status st = out[0] && out[1] ? TG_OK : tg_error_status();
  if (st == TG_OK) { tg_keep(out[0]); tg_keep(out[1]); }
  else out[0] = out[1] = NULL;
  tg_scope_end();
  return st;
}

/* a (3, 4) float32 input by a random recipe; values from {1, 2, 5} (so equal graphs are common) or a ramp */
static tg_tensor *rj_input(tg_tensor *other) {
  static const double vals[] = {1, 2, 5};
  double v = vals[ref_randint(0, 2)];
  const int64_t shape[2] = {RJ_ROWS, RJ_COLS};
  switch (ref_randint(0, 6)) {
    case 0: return tg_full(TG_FLOAT32, 2, shape, v);
    case 1: return tg_contiguous(tg_full(TG_FLOAT32, 2, shape, v));
    case 2:  /* an expression of a ramp */
      return tg_contiguous(tg_add_scalar(tg_mul_scalar(tg_reshape(tg_arange(TG_FLOAT32, 0, RJ_N, 1), 2, shape), v), 1));
    case 3: {
      float d[RJ_N];
      for (int i = 0; i < RJ_N; i++) d[i] = (float)(v + (ref_randint(0, 1) ? i : 0));
      return tg_from_data(TG_FLOAT32, 2, shape, d, sizeof d);
    }
    case 4: {  /* a permuted view of a realized (4, 3) tensor */
      tg_tensor *t = tg_contiguous(tg_full(TG_FLOAT32, SHAPE(RJ_COLS, RJ_ROWS), v));
      if (t && tg_realize(t) != TG_OK) return NULL;
      return tg_permute(t, AXES(1, 0));
    }
    case 5: {  /* a shrunk window of a realized larger ramp */
      tg_tensor *t = tg_contiguous(tg_reshape(tg_arange(TG_FLOAT32, v, v + 30, 1), SHAPE(5, 6)));
      if (t && tg_realize(t) != TG_OK) return NULL;
      return tg_shrink(t, 2, (int64_t[]){1, 1 + RJ_ROWS, 2, 2 + RJ_COLS});
    }
    default: return other ? tg_retain(other) : tg_full(TG_FLOAT32, 2, shape, v);  /* the same tensor twice */
  }
}

TEST(test_jit_random_steps_over_fresh_inputs_match_eager) {
  const char *env = getenv("TG_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 10) : 1;
  ref_seed(seed);
  for (int kind = 0; kind < 4; kind++) {
    int k = kind;
    tg_jit *j = tg_jit_new(rj_step, &k, 2, 2);
    CHECK_T(j);
    for (int c = 0; c < 10; c++) {
      tg_scope_begin();
      tg_tensor *in[2];
      in[0] = rj_input(NULL);
      in[1] = rj_input(in[0]);
      tg_tensor *jo[2] = {NULL, NULL}, *eo[2] = {NULL, NULL};
      float jv[2][RJ_N], ev[2][RJ_N];
      tg_status st = tg_jit_call(j, in, jo);
      CHECK(st == TG_OK, "seed %llu kind %d call %d: %s", (unsigned long long)seed, kind, c, tg_error());
      for (int o = 0; o < 2 && st == TG_OK; o++) {
        size_t nb = (size_t)tg_numel(jo[o]) * 4;
        st = tg_to_host(jo[o], jv[o], nb);
      }
      if (st == TG_OK) st = rj_step(&k, 2, in, 2, eo);
      for (int o = 0; o < 2 && st == TG_OK; o++) {
        size_t nb = (size_t)tg_numel(eo[o]) * 4;
        st = tg_to_host(eo[o], ev[o], nb);
        char what[96];
        snprintf(what, sizeof what, "seed %llu kind %d call %d output %d", (unsigned long long)seed, kind, c, o);
        if (st == TG_OK) check_close_f32(what, jv[o], ev[o], tg_numel(eo[o]), 1e-6, 1e-6, __FILE__, __LINE__);
      }
      CHECK(st == TG_OK, "seed %llu kind %d call %d: %s", (unsigned long long)seed, kind, c, tg_error());
      for (int o = 0; o < 2; o++) { tg_free(jo[o]); tg_free(eo[o]); }
      tg_free(in[1]);
      tg_free(in[0]);
      tg_scope_end();
    }
    CHECK(tg_jit_kernels(j) > 0, "kind %d: nothing captured", kind);
    tg_jit_free(j);
  }
  ref_free_all();
}

/* the collector keeps the nodes of every captured step alive, however many JITs there are (it kept 32) */
TEST(test_jit_many_captured_steps_survive_collection) {
  enum { NJ = 48 };
  tg_jit *js[NJ] = {0};
  for (int k = 0; k < NJ; k++) {
    js[k] = tg_jit_new(plus_one_step, NULL, 1, 1);
    CHECK_T(js[k]);
    for (int c = 0; c < 2; c++) {
      tg_tensor *x = tg_full(TG_FLOAT32, 2, (int64_t[]){2, 3}, k + c), *o = NULL;
      CHECK(tg_jit_call(js[k], &x, &o) == TG_OK, "jit %d call %d: %s", k, c, tg_error());
      tg_free(o);
      tg_free(x);
    }
  }
  tg_collect();
  for (int i = 0; i < 64; i++) tg_free(tg_mul_scalar(tg_full(TG_FLOAT32, 2, (int64_t[]){2, 3}, i), 3));  /* reuse */
  for (int k = 0; k < NJ; k++) {
    tg_tensor *x = tg_full(TG_FLOAT32, 2, (int64_t[]){2, 3}, 100 + k), *o = NULL;
    float got[6] = {0};
    CHECK(tg_jit_call(js[k], &x, &o) == TG_OK && tg_to_host(o, got, sizeof got) == TG_OK, "jit %d: %s", k, tg_error());
    CHECK(got[5] == 101 + k, "jit %d: got %g, want %d", k, got[5], 101 + k);
    tg_free(o);
    tg_free(x);
    tg_jit_free(js[k]);
  }
}
