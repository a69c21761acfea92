/* test_shard.c — tensors across devices in one process: lazy tg_to copies, and sharded tensors (tg_shard) on
 * CPU:0 .. CPU:3 against the same computation unsharded on the default device (bit for bit where the order of
 * the arithmetic is the same, else 1e-6): elementwise ops, reductions over the split axis (all-reduce, a ring
 * for four devices) and another, matmul split on rows, on K and on columns, and an Adam training step with
 * the batch split. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "engine/jit.h"
#include "runtime/device.h"
#include "test.h"

static const char *const two[] = {"CPU:0", "CPU:1"};
static const char *const four[] = {"CPU:0", "CPU:1", "CPU:2", "CPU:3"};

static void fill(float *v, int64_t n, unsigned seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    v[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
}

static tg_tensor *rnd(int ndim, const int64_t *shape, unsigned seed) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *v = malloc((size_t)n * sizeof *v);
  if (!v) return NULL;
  fill(v, n, seed);
  tg_tensor *t = tg_from_data(TG_FLOAT32, ndim, shape, v, (size_t)n * sizeof *v);
  free(v);
  return t;
}

/* got and want read to the host and compared: exactly (atol 0) or within atol */
static void same(const char *what, tg_tensor *got, tg_tensor *want, double atol, const char *file, int line) {
  int64_t n = 1;
  for (int i = 0; want && i < tg_ndim(want); i++) n *= tg_shape(want, i);
  float *g = calloc((size_t)n + 1, sizeof *g), *w = calloc((size_t)n + 1, sizeof *w);
  if (!got || !want || !g || !w || tg_to_host(got, g, (size_t)n * sizeof *g) != TG_OK ||
      tg_to_host(want, w, (size_t)n * sizeof *w) != TG_OK) {
    test_fail(file, line, "%s: %s", what, tg_error());
  } else if (atol == 0 && strcmp(test_device_name(), "CPU")) {  /* the reference ran on another kind of device */
    check_close_f32(what, g, w, n, 1e-6, 1e-6, file, line);
  } else if (atol == 0) {
    for (int64_t i = 0; i < n; i++)
      if (memcmp(&g[i], &w[i], sizeof *g)) {
        test_fail(file, line, "%s: [%lld] %.9g, want %.9g (bit for bit)", what, (long long)i, g[i], w[i]);
        break;
      }
  } else {
    check_close_f32(what, g, w, n, atol, 0, file, line);
  }
  free(g);
  free(w);
}
#define SAME(what, got, want, atol) same(what, got, want, atol, __FILE__, __LINE__)

TEST(test_shard_elementwise_matches_unsharded) {
  tg_scope_begin();
  tg_tensor *a = rnd(2, (int64_t[]){8, 6}, 1), *b = rnd(2, (int64_t[]){8, 6}, 2), *c = rnd(1, (int64_t[]){6}, 3);
  tg_tensor *as = tg_shard(a, 2, two, 0), *bs = tg_shard(b, 2, two, 0), *cs = tg_shard(c, 2, two, -1);
  CHECK_T(as && bs && cs);
  CHECK(!strcmp(tg_device(as), "CPU:0,CPU:1"), "device %s", tg_device(as));
  tg_tensor *want = tg_relu(tg_add_scalar(tg_mul(tg_add(a, b), c), 0.5));
  tg_tensor *got = tg_relu(tg_add_scalar(tg_mul(tg_add(as, bs), cs), 0.5));
  CHECK_T(got);
  CHECK(tg_realize(got) == TG_OK, "%s", tg_error());
  CHECK(!strcmp(tg_device(got), "CPU:0,CPU:1"), "realized on %s", tg_device(got));
  SAME("elementwise", got, want, 0);
  /* along the other axis, and a movement op on top */
  tg_tensor *a1 = tg_shard(a, 2, two, 1);
  SAME("axis 1", tg_exp(tg_transpose(a1, 0, 1)), tg_exp(tg_transpose(a, 0, 1)), 0);
  SAME("reshape", tg_reshape(tg_mul_scalar(as, 3), 3, (int64_t[]){4, 2, 6}), tg_reshape(tg_mul_scalar(a, 3), 3, (int64_t[]){4, 2, 6}), 0);
  tg_scope_end();
}

TEST(test_shard_reductions_over_the_split_axis_and_another) {
  tg_scope_begin();
  tg_tensor *a = rnd(2, (int64_t[]){8, 10}, 4);
  tg_tensor *as = tg_shard(a, 2, two, 0);
  CHECK_T(as);
  SAME("sum over the other axis", tg_sum(as, 1, (int[]){1}, false), tg_sum(a, 1, (int[]){1}, false), 0);
  SAME("max over the split axis", tg_max(as, 1, (int[]){0}, false), tg_max(a, 1, (int[]){0}, false), 0);
  tg_tensor *s = tg_sum(as, 1, (int[]){0}, true);
  CHECK_T(s);
  CHECK(tg_realize(s) == TG_OK && !strcmp(tg_device(s), "CPU:0,CPU:1"), "replicated: %s %s", tg_device(s), tg_error());
  SAME("sum over the split axis", s, tg_sum(a, 1, (int[]){0}, true), 1e-6);
  SAME("sum of all", tg_sum(as, 0, NULL, false), tg_sum(a, 0, NULL, false), 1e-5);
  SAME("mean", tg_mean(as, 1, (int[]){0}, false), tg_mean(a, 1, (int[]){0}, false), 1e-6);
  tg_scope_end();
}

TEST(test_shard_matmul_on_rows_k_and_columns) {
  tg_scope_begin();
  tg_tensor *A = rnd(2, (int64_t[]){8, 16}, 5), *B = rnd(2, (int64_t[]){16, 6}, 6);
  tg_tensor *want = tg_matmul(A, B);
  SAME("A on rows", tg_matmul(tg_shard(A, 2, two, 0), tg_shard(B, 2, two, -1)), want, 1e-6);
  SAME("on K", tg_matmul(tg_shard(A, 2, two, 1), tg_shard(B, 2, two, 0)), want, 1e-6);
  SAME("B on columns", tg_matmul(tg_shard(A, 2, two, -1), tg_shard(B, 2, two, 1)), want, 1e-6);
  tg_scope_end();
}

TEST(test_shard_four_devices_all_reduce_as_a_ring) {
  tg_scope_begin();
  tg_tensor *a = rnd(2, (int64_t[]){8, 37}, 7), *A = rnd(2, (int64_t[]){5, 16}, 8), *B = rnd(2, (int64_t[]){16, 3}, 9);
  tg_tensor *as = tg_shard(a, 4, four, 0);
  CHECK_T(as);
  tg_tensor *s = tg_sum(as, 1, (int[]){0}, false);
  CHECK_T(s);
  CHECK(tg_realize(s) == TG_OK && !strcmp(tg_device(s), "CPU:0,CPU:1,CPU:2,CPU:3"), "%s %s", tg_device(s), tg_error());
  SAME("ring sum", s, tg_sum(a, 1, (int[]){0}, false), 1e-6);
  SAME("ring max", tg_max(as, 1, (int[]){0}, false), tg_max(a, 1, (int[]){0}, false), 0);
  SAME("matmul on K", tg_matmul(tg_shard(A, 4, four, 1), tg_shard(B, 4, four, 0)), tg_matmul(A, B), 1e-6);
  SAME("gathered", tg_to(as, "CPU:2"), a, 0);
  tg_scope_end();
}

TEST(test_shard_tg_to_is_lazy_and_gathers) {
  tg_scope_begin();
  const char *def = test_device_name();
  tg_tensor *a = rnd(2, (int64_t[]){4, 6}, 10);
  tg_tensor *x = tg_mul_scalar(a, 2);
  tg_tensor *b = tg_to(x, "CPU:1");
  CHECK_T(b);
  CHECK(!strcmp(tg_device(b), "CPU:1"), "lazy copy names its destination: %s", tg_device(b));
  tg_tensor *y = tg_add_scalar(b, 1);  /* computed on CPU:1, where it reads */
  CHECK(tg_realize(y) == TG_OK && !strcmp(tg_device(y), "CPU:1"), "%s %s", tg_device(y), tg_error());
  SAME("on CPU:1", y, tg_add_scalar(x, 1), 0);
  tg_tensor *back = tg_to(tg_to(y, "CPU:0"), def);
  SAME("back", tg_sub(back, a), tg_sub(tg_add_scalar(x, 1), a), 0);
  tg_tensor *same_dev = tg_to(y, "CPU:1");
  CHECK(same_dev == y, "tg_to its own device is the tensor itself");
  tg_free(same_dev);
  /* a sharded tensor gathered onto one device */
  tg_tensor *g = tg_to(tg_shard(a, 2, two, 1), def);
  CHECK_T(g);
  CHECK(tg_realize(g) == TG_OK && !strcmp(tg_device(g), def), "%s %s", tg_device(g), tg_error());
  SAME("gathered", g, a, 0);
  CHECK(fabs(tg_item(tg_sum(tg_shard(a, 2, two, 0), 0, NULL, false)) - tg_item(tg_sum(a, 0, NULL, false))) < 1e-5,
        "item of a sharded sum: %s", tg_error());
  tg_scope_end();
}

TEST(test_shard_errors_name_the_values) {
  tg_scope_begin();
  tg_tensor *a = rnd(2, (int64_t[]){5, 6}, 11);
  tg_error_clear();
  CHECK(!tg_shard(a, 2, two, 0) && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "(5, 6)") &&
        strstr(tg_error(), "axis 0") && strstr(tg_error(), "2 devices"), "uneven: %s", tg_error());
  tg_error_clear();
  CHECK(!tg_shard(a, 2, (const char *const[]){"CPU:0", "CPU:9"}, 1) && tg_error_status() == TG_ERR_ARG &&
        strstr(tg_error(), "CPU:9"), "CPU:9: %s", tg_error());
  tg_error_clear();
  CHECK(!tg_to(a, "CPU:8") && tg_error_status() == TG_ERR_ARG, "CPU:8: %s", tg_error());
  /* two devices without a copy */
  tg_tensor *b = tg_to(a, "CPU:1"), *c = tg_to(a, "CPU:2");
  CHECK_T(b && c);
  CHECK(tg_realize(b) == TG_OK && tg_realize(c) == TG_OK, "%s", tg_error());
  tg_error_clear();
  CHECK(tg_realize(tg_add(b, c)) != TG_OK && strstr(tg_error(), "CPU:1") && strstr(tg_error(), "CPU:2"),
        "mixing devices: %s", tg_error());
  /* a sharded operand and a buffer of one device */
  tg_tensor *s = tg_shard(a, 2, two, 1);
  tg_error_clear();
  CHECK(tg_realize(tg_add(s, b)) == TG_ERR_ARG && strstr(tg_error(), "ADD") && strstr(tg_error(), "CPU:0,CPU:1"),
        "sharded + single: %s", tg_error());
  tg_error_clear();
  CHECK(tg_realize(tg_flip(s, 1, (int[]){1})) == TG_ERR_ARG && strstr(tg_error(), "FLIP"), "flip: %s", tg_error());
  tg_error_clear();
  CHECK(tg_realize(tg_reshape(s, 1, (int64_t[]){30})) == TG_ERR_ARG && strstr(tg_error(), "RESHAPE"), "reshape: %s",
        tg_error());
  tg_error_clear();
  tg_scope_end();
}

/* the MLP relu(x w1 + b1) w2 + b2 with Adam; sharded: the parameters replicated on two devices */
typedef struct mlp {
  tg_tensor *p[4];
  tg_params *ps;
  tg_optim *o;
  bool sharded;
} mlp;

/* the batch of step s: x (8, 12) and labels y (8) */
static void batch(int s, tg_tensor **x, tg_tensor **y) {
  int32_t labels[8];
  for (int i = 0; i < 8; i++) labels[i] = (i * 3 + s) % 5;
  *x = rnd(2, (int64_t[]){8, 12}, 20 + (unsigned)s);
  *y = tg_from_data(TG_INT32, 1, (int64_t[]){8}, labels, sizeof labels);
}

/* in: x, y whole; the batch split over the devices when sharded; out: the loss on CPU:0 */
static tg_status mlp_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)nin, (void)nout;
  mlp *m = ctx;
  tg_scope_begin();
  tg_tensor *x = m->sharded ? tg_shard(in[0], 2, two, 0) : in[0], *y = m->sharded ? tg_shard(in[1], 2, two, 0) : in[1];
  tg_tensor *h = tg_relu(tg_linear(x, m->p[0], m->p[1]));
  tg_tensor *loss = tg_sparse_categorical_crossentropy(tg_linear(h, m->p[2], m->p[3]), y, (tg_loss_opts){.ignore_index = -1});
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(m->o, 1, &loss);
  out[0] = st == TG_OK ? tg_keep(tg_to(loss, "CPU:0")) : NULL;
  tg_scope_end();
  return out[0] ? st : tg_error_status();
}

static uint64_t last_step_kernels[3];  /* kernels the last step of train ran on CPU:0, CPU:1 and the default device (DEV) */

/* params[0..3] (w1, b1, w2, b2) and the losses after steps Adam steps (batch s at step s), under tg_jit or not */
static bool train(bool sharded, bool jit, int steps, float *out[4], float *losses, const int64_t *shapes[4],
                  const int *ndims) {
  tg_scope_begin();
  mlp m = {.sharded = sharded, .ps = tg_params_new()};
  bool ok = m.ps != NULL;
  for (int i = 0; i < 4 && ok; i++) {
    m.p[i] = tg_mul_scalar(rnd(ndims[i], shapes[i], 30 + (unsigned)i), 0.5);
    if (sharded) m.p[i] = tg_shard(m.p[i], 2, two, -1);
    ok = m.p[i] && tg_realize(m.p[i]) == TG_OK;
    if (ok) ok = tg_params_add(m.ps, (const char *[]){"w1", "b1", "w2", "b2"}[i], tg_set_requires_grad(m.p[i], true)) == TG_OK;
  }
  m.o = ok ? tg_adam_new(m.ps, tg_adam_defaults()) : NULL;
  tg_jit *j = jit ? tg_jit_new(mlp_step, &m, 2, 1) : NULL;
  ok = m.o && (!jit || j);
  for (int s = 0; s < steps && ok; s++) {
    tg_scope_begin();
    tg_tensor *in[2], *loss = NULL;
    batch(s, &in[0], &in[1]);
    const device *def = device_default();
    const char *dn = def ? def->name : "CPU";
    uint64_t k0 = engine_kernels_run_on("CPU:0"), k1 = engine_kernels_run_on("CPU:1"), kd = engine_kernels_run_on(dn);
    ok = (jit ? tg_jit_call(j, in, &loss) : mlp_step(&m, 2, in, 1, &loss)) == TG_OK;
    if (ok) ok = tg_to_host(loss, &losses[s], sizeof *losses) == TG_OK;
    last_step_kernels[0] = engine_kernels_run_on("CPU:0") - k0;
    last_step_kernels[1] = engine_kernels_run_on("CPU:1") - k1;
    last_step_kernels[2] = engine_kernels_run_on(dn) - kd;
    tg_free(loss);
    tg_scope_end();
  }
  if (jit && ok) {  /* captured, its arena's items apart while alive */
    char why[256];
    ok = tg_jit_kernels(j) > 0 && jit_plan_ok(j, why, sizeof why);
    if (!ok) fprintf(stderr, "jit plan: %s\n", why);
  }
  for (int i = 0; i < 4 && ok; i++) {
    int64_t n = 1;
    for (int k = 0; k < ndims[i]; k++) n *= shapes[i][k];
    ok = tg_to_host(m.p[i], out[i], (size_t)n * sizeof(float)) == TG_OK;
  }
  tg_jit_free(j);
  tg_optim_free(m.o);
  tg_params_free(m.ps);
  tg_scope_end();
  return ok;
}

static const int64_t s0[] = {12, 16}, s1[] = {16}, s2[] = {16, 5}, s3[] = {5};
static const int64_t *const mlp_shapes[4] = {s0, s1, s2, s3};
static const int mlp_ndims[4] = {2, 1, 2, 1}, mlp_n[4] = {192, 16, 80, 5};

TEST(test_shard_training_step_data_parallel_matches_unsharded) {
  float a[4][192], b[4][192], la[3], lb[3];
  float *pa[4] = {a[0], a[1], a[2], a[3]}, *pb[4] = {b[0], b[1], b[2], b[3]};
  CHECK(train(false, false, 3, pa, la, (const int64_t **)mlp_shapes, mlp_ndims), "unsharded: %s", tg_error());
  CHECK(train(true, false, 3, pb, lb, (const int64_t **)mlp_shapes, mlp_ndims), "sharded: %s", tg_error());
  for (int i = 0; i < 4; i++) check_close_f32("parameter", pb[i], pa[i], mlp_n[i], 1e-6, 0, __FILE__, __LINE__);
}

/* Each device computes its half of the batch once: a partial gradient another device needs (a copy's source)
 * and the same partial its own update reads are one computation, so a device runs no more kernels per step
 * than the whole step on one device (the copies' sources were realized on their own and then recomputed by
 * the device's step: twice the forward and backward per device). Values as the unsharded step's. */
TEST(test_shard_step_runs_each_devices_kernels_once) {
  enum { STEPS = 3 };
  float a[4][192], b[4][192], la[STEPS], lb[STEPS];
  float *pa[4] = {a[0], a[1], a[2], a[3]}, *pb[4] = {b[0], b[1], b[2], b[3]};
  CHECK(train(false, false, STEPS, pa, la, (const int64_t **)mlp_shapes, mlp_ndims), "unsharded: %s", tg_error());
  uint64_t one = last_step_kernels[2];  /* on the default device: CL in CI's DEV=CL run */
  CHECK(last_step_kernels[1] == 0, "the unsharded step ran %llu kernels on CPU:1", (unsigned long long)last_step_kernels[1]);
  CHECK(train(true, false, STEPS, pb, lb, (const int64_t **)mlp_shapes, mlp_ndims), "sharded: %s", tg_error());
  CHECK(one > 0 && last_step_kernels[0] <= one && last_step_kernels[1] <= one,
        "kernels per step: unsharded %llu, sharded CPU:0 %llu, CPU:1 %llu", (unsigned long long)one,
        (unsigned long long)last_step_kernels[0], (unsigned long long)last_step_kernels[1]);
  for (int s = 0; s < STEPS; s++) CHECK(fabsf(lb[s] - la[s]) <= 1e-6f, "step %d: loss %.9g sharded, %.9g", s, lb[s], la[s]);
  for (int i = 0; i < 4; i++) check_close_f32("parameter", pb[i], pa[i], mlp_n[i], 1e-6, 0, __FILE__, __LINE__);
}

/* the sharded step under tg_jit (captured on call 2, replayed on 3..5, each with its own batch): the copies of
 * the batch's split and of the all-reduce replay with the kernels. Bit for bit the eager sharded steps, and the
 * unsharded ones within 1e-6 */
TEST(test_shard_jit_training_step_matches_eager) {
  enum { STEPS = 5 };
  float a[4][192], b[4][192], c[4][192], la[STEPS], lb[STEPS], lc[STEPS];
  float *pa[4] = {a[0], a[1], a[2], a[3]}, *pb[4] = {b[0], b[1], b[2], b[3]}, *pc[4] = {c[0], c[1], c[2], c[3]};
  CHECK(train(false, false, STEPS, pa, la, (const int64_t **)mlp_shapes, mlp_ndims), "unsharded: %s", tg_error());
  CHECK(train(true, false, STEPS, pb, lb, (const int64_t **)mlp_shapes, mlp_ndims), "sharded: %s", tg_error());
  jit_set_poison(true);  /* an arena buffer read before it is written (a copy's too) gives NaN */
  CHECK(train(true, true, STEPS, pc, lc, (const int64_t **)mlp_shapes, mlp_ndims), "sharded jit: %s", tg_error());
  jit_set_poison(false);
  for (int s = 0; s < STEPS; s++) {
    CHECK(!memcmp(&lc[s], &lb[s], sizeof *lc), "step %d: loss %.9g jit, %.9g eager", s, lc[s], lb[s]);
    CHECK(fabsf(lc[s] - la[s]) <= 1e-6f, "step %d: loss %.9g jit sharded, %.9g unsharded", s, lc[s], la[s]);
  }
  for (int i = 0; i < 4; i++) {
    for (int k = 0; k < mlp_n[i]; k++)
      if (memcmp(&c[i][k], &b[i][k], sizeof(float))) {
        CHECK(false, "parameter %d [%d]: %.9g jit, %.9g eager (bit for bit)", i, k, c[i][k], b[i][k]);
        break;
      }
    check_close_f32("parameter vs unsharded", pc[i], pa[i], mlp_n[i], 1e-6, 0, __FILE__, __LINE__);
  }
}

static tg_status sharded_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)ctx, (void)nin, (void)nout;
  out[0] = tg_to(tg_sum(tg_mul_scalar(tg_shard(in[0], 2, two, 0), 2), 0, NULL, false), "CPU:0");
  return out[0] ? TG_OK : tg_error_status();
}

/* a lazy copy to CPU:1 inside the step: each replay copies that call's input */
static tg_status copy_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)ctx, (void)nin, (void)nout;
  out[0] = tg_add_scalar(tg_mul_scalar(tg_to(in[0], "CPU:1"), 3), 1);
  return out[0] ? TG_OK : tg_error_status();
}

TEST(test_shard_jit_replays_copies_with_fresh_inputs) {
  tg_scope_begin();
  tg_jit *j = tg_jit_new(copy_step, NULL, 1, 1), *js = tg_jit_new(sharded_step, NULL, 1, 1);
  CHECK_T(j && js);
  for (int i = 0; i < 5; i++) {
    tg_scope_begin();
    float v[8], got[8], sum = 0, gs = 0;
    fill(v, 8, 40 + (unsigned)i);
    tg_tensor *a = tg_from_data(TG_FLOAT32, 1, (int64_t[]){8}, v, sizeof v), *out = NULL, *outs = NULL;
    CHECK(tg_jit_call(j, &a, &out) == TG_OK && tg_to_host(out, got, sizeof got) == TG_OK, "call %d: %s", i, tg_error());
    CHECK(!strcmp(tg_device(out), "CPU:1"), "call %d: the result is on %s", i, tg_device(out));
    for (int k = 0; k < 8; k++) CHECK(fabsf(got[k] - (v[k] * 3 + 1)) < 1e-6f, "call %d [%d]: %g, want %g", i, k, got[k], v[k] * 3 + 1);
    CHECK(tg_jit_call(js, &a, &outs) == TG_OK && tg_to_host(outs, &gs, sizeof gs) == TG_OK, "call %d: %s", i, tg_error());
    for (int k = 0; k < 8; k++) sum += 2 * v[k];
    CHECK(fabsf(gs - sum) < 1e-5f, "sharded call %d: %g, want %g", i, gs, sum);
    tg_free(out);
    tg_free(outs);
    tg_scope_end();
  }
  CHECK(tg_jit_kernels(j) > 0 && tg_jit_kernels(js) > 0, "nothing was captured");
  tg_jit_free(j);
  tg_jit_free(js);
  tg_scope_end();
}

static tg_status identity_step(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)nin, (void)nout;
  out[0] = tg_mul_scalar(ctx ? tg_shard(in[0], 2, two, 0) : in[0], 2);
  return out[0] ? TG_OK : tg_error_status();
}

/* what a capture still cannot take: a sharded input or output (a replay patches one buffer per tensor) */
TEST(test_shard_jit_refuses_sharded_inputs_and_outputs) {
  tg_scope_begin();
  tg_tensor *a = tg_shard(rnd(1, (int64_t[]){8}, 12), 2, two, 0), *w = rnd(1, (int64_t[]){8}, 13);
  CHECK_T(a && w);
  for (int out_sharded = 0; out_sharded < 2; out_sharded++) {
    tg_jit *j = tg_jit_new(identity_step, out_sharded ? (void *)1 : NULL, 1, 1);
    CHECK_T(j);
    tg_status st = TG_OK;
    for (int i = 0; i < 3 && st == TG_OK; i++) {
      tg_tensor *out = NULL;
      st = tg_jit_call(j, out_sharded ? &w : &a, &out);
      tg_free(out);
    }
    const char *want = out_sharded ? "output 0 is sharded" : "input 0 is sharded";
    CHECK(st == TG_ERR_ARG && strstr(tg_error(), want), "want \"%s\": %s", want, tg_error());
    tg_error_clear();
    tg_jit_free(j);
  }
  tg_scope_end();
}

/* zeros realized on the default device are one node with the zeros of each part of a sharded tensor's state */
TEST(test_shard_parts_equal_to_a_realized_value_stay_on_their_devices) {
  tg_scope_begin();
  tg_tensor *z = tg_zeros(TG_FLOAT32, 2, (int64_t[]){4, 3});
  CHECK(tg_realize(z) == TG_OK, "%s", tg_error());
  tg_tensor *p = tg_shard(rnd(2, (int64_t[]){4, 3}, 13), 2, two, -1);
  tg_tensor *three = tg_full(TG_FLOAT32, 2, (int64_t[]){4, 3}, 3);
  CHECK(tg_realize(three) == TG_OK, "%s", tg_error());
  SAME("a constant realized before", tg_mul_scalar(tg_shard(rnd(2, (int64_t[]){4, 3}, 14), 2, two, 0), 3),
       tg_mul_scalar(rnd(2, (int64_t[]){4, 3}, 14), 3), 0);
  tg_tensor *zs = tg_zeros_like(p), *zs2 = tg_zeros_like(p);
  CHECK_T(zs && zs2);
  CHECK(tg_realize(zs) == TG_OK && !strcmp(tg_device(zs), "CPU:0,CPU:1"), "%s %s", tg_device(zs), tg_error());
  SAME("sum", tg_add(tg_add(p, zs), zs2), tg_add(p, zs), 0);
  tg_scope_end();
}
