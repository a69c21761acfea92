/* gpu.c — tgc on the default device (DEV=CUDA, DEV=CL; the CPU when DEV is unset) next to PyTorch on the same
 * GPU, in one run:
 *
 *   matmul 8192x8192 float16 and bfloat16, 4096x4096 float32                 (TFLOP/s, 2 N^3 flops)
 *     PyTorch float32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False)
 *   copy of 2^28 float32, device to device                                    (GB/s, 2 x 4 bytes per element)
 *     tgc: a copy kernel (tg_contiguous of a * 1: tg_to to a's own device is a itself); PyTorch: b.copy_(a)
 *   c = a * b + 1 over 2^28 float32                                           (GB/s, 3 x 4 bytes per element)
 *     also shown as a percentage of the same implementation's copy bandwidth, measured in the same run
 *   softmax over the last axis of 16384x16384 float32                         (GB/s, 2 x 4 bytes per element)
 *   layernorm (no affine, eps 1e-5) over the last axis of 16384x16384 float32 (GB/s, 2 x 4 bytes per element)
 *   tinygrad's beautiful_mnist training step, batch 512, Adam (lr 1e-3)       (ms/step)
 *     tgc under tg_jit (as examples/mnist.c runs it), PyTorch eager. The batch is synthetic (random uint8
 *     images and labels, made on the device once): the step is timed, not the data loading, and no MNIST
 *     download is needed. The same batch every step, so the loss must fall: that is the step's check.
 *   Llama stories260K greedy decoding, 256 positions ("Once upon a time")      (tokens/s)
 *     tgc: tg_llama_step (one tg_jit replay per token, the logits copied to the host, argmax there); PyTorch:
 *     the same llama2.c checkpoint in eager PyTorch with a KV cache (bench/gpu_peers.py), argmax .item() per
 *     token. Skipped with a note when stories260K is not found ($TG_DATA/stories260K, ~/.cache/tgc/stories260K,
 *     ../shared/data/stories260K or shared/data/stories260K beside the repository).
 *
 * Usage: build/bench/gpu [--small] [--json] [--only NAME[,NAME]] [--peer-cpu] [--no-peers]
 *   --small     sizes shrunk for a functional check on a slow device (PoCL): the whole run in about a minute
 *   --json      one JSON line per measurement on stdout, {"workload", "impl", "value", "best", "unit",
 *               "device"}, and nothing else there (impl "tgc" or "pytorch")
 *   --only W    only the workloads whose names contain one of the comma-separated words (matmul, f16, copy,
 *               elementwise, softmax, layernorm, mnist, llama); elementwise brings its copy along
 *   --peer-cpu  without a CUDA GPU, run PyTorch on the CPU (a functional check of the peer script: its ratios
 *               compare a GPU with a CPU and mean nothing)
 *   --no-peers  tgc only
 * The peer runs as `python3 bench/gpu_peers.py` with the same flags (PYTHON=... picks another interpreter); it
 * says "skipped" (torch missing, or no CUDA GPU without --peer-cpu) instead of failing.
 *
 * Timing: every workload runs once first (kernels compiled, buffers allocated, and its result checked against
 * a host computation on a few rows or elements, so a wrong kernel is never timed silently), then a few timed
 * repetitions; median and fastest are reported. Inputs are realized on the device before timing. A timed
 * repetition is: build the graph in a scope, tg_realize, then wait for the device (its synchronize: GPU
 * launches are queued and return at once); so graph building, scheduling and launching count, as in PyTorch's
 * eager calls, which are timed with torch.cuda.synchronize() the same way. A workload whose first timed
 * repetition is slow gets fewer repetitions (at least 2; about 8 s each, 2 s with --small), so a slow kernel
 * cannot take bench/gpu.sh's whole budget. Ratios are tgc / PyTorch for rates
 * and PyTorch / tgc for times: > 1 means tgc is faster.
 *
 * Exit status: 0 when every tgc check passed, 1 when one failed (the table says which), 2 for a bad flag.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "runtime/device.h"  /* the default device's synchronize: GPU launches return before the kernel ends */
#include "tg.h"
#include "uop/uop.h"         /* uop_gc: the IR collector, run between repetitions outside the timed region */

static bool small_mode, peer_cpu, no_peers;
static const char *only;  /* --only: comma-separated words */
static const char *dev_name = "CPU";
static int nfailed;  /* checks failed so far */

static bool wanted(const char *workload) {
  if (!only || !*only) return true;
  char words[256];
  snprintf(words, sizeof words, "%s", only);
  for (char *save = NULL, *w = strtok_r(words, ",", &save); w; w = strtok_r(NULL, ",", &save))
    if (strstr(workload, w)) return true;
  return false;
}

/* ---- results ------------------------------------------------------------------------------------------------ */

#define MAX_RESULTS 64
typedef struct result { char workload[48], impl[16], unit[16], device[16]; double value, best; } result;
static result results[MAX_RESULTS];
static int nresults;
static char notes[24][320];
static int nnotes;

static void add_result(const char *workload, const char *impl, const char *unit, double value, double best) {
  if (nresults >= MAX_RESULTS) return;
  result *r = &results[nresults++];
  snprintf(r->workload, sizeof r->workload, "%s", workload);
  snprintf(r->impl, sizeof r->impl, "%s", impl);
  snprintf(r->unit, sizeof r->unit, "%s", unit);
  snprintf(r->device, sizeof r->device, "%s", dev_name);
  r->value = value, r->best = best;
}

static void add_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_note(const char *fmt, ...) {
  if (nnotes >= 24) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(notes[nnotes++], sizeof notes[0], fmt, ap);
  va_end(ap);
}

static const result *find_result(const char *workload, const char *impl) {
  for (int i = 0; i < nresults; i++)
    if (!strcmp(results[i].workload, workload) && !strcmp(results[i].impl, impl)) return &results[i];
  return NULL;
}

static bool is_time(const char *unit) { return !strncmp(unit, "ms", 2); }

/* a failed check: the workload's tgc figures are not reported as numbers, and the run's exit status is 1 */
static void check_failed(const char *workload, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check_failed(const char *workload, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  nfailed++;
  fprintf(stderr, "gpu: %s: CHECK FAILED: %s\n", workload, msg);
  add_note("%s: CHECK FAILED: %s", workload, msg);
}

/* ---- the device ----------------------------------------------------------------------------------------------- */

/* waits for every queued launch and copy of the default device (GPU launches return at once) */
static bool sync_device(void) {
  const device *d = device_default();
  return d && (!d->synchronize || d->synchronize(d) == TG_OK);
}

/* part of a tensor (bounds as tg_shrink's, t's ndim pairs) as float32 on the host: cast on the device, which
 * is exact from float16 and bfloat16 */
static bool read_f32(tg_tensor *t, const int64_t *bounds, float *out, size_t n) {
  tg_scope_begin();
  tg_tensor *s = tg_cast(tg_shrink(t, tg_ndim(t), bounds), TG_FLOAT32);
  bool ok = s && tg_numel(s) == (int64_t)n && tg_to_host(s, out, n * sizeof(float)) == TG_OK;
  tg_scope_end();
  return ok;
}

/* a realized tensor of normal (or uniform) random values cast to dt, made on the device */
static tg_tensor *device_random(tg_dtype dt, int ndim, const int64_t *shape, bool normal, double scale) {
  tg_scope_begin();
  tg_tensor *x = normal ? tg_randn(TG_FLOAT32, ndim, shape) : tg_rand(TG_FLOAT32, ndim, shape);
  if (scale != 1) x = tg_mul_scalar(x, scale);
  tg_tensor *c = tg_contiguous(dt == TG_FLOAT32 ? x : tg_cast(x, dt));
  if (c && tg_realize(c) == TG_OK) tg_keep(c);
  else c = NULL;
  tg_scope_end();
  return c;
}

/* ---- timing --------------------------------------------------------------------------------------------------- */

/* one repetition: builds and realizes (inside the scope the timer opens); check: compare with the host */
typedef bool (*step_fn)(void *ctx, bool check);

/* seconds the timed repetitions of one workload may take, about: a slow kernel gets fewer repetitions (at
 * least 2), so the whole run stays within bench/gpu.sh's budget */
#define REPS_BUDGET_S (small_mode ? 2.0 : 8.0)

/* the first call (compiles, allocates, checks), then reps timed calls, each ended by a device synchronize;
 * median and fastest seconds; false when a call fails */
static bool time_steps(step_fn fn, void *ctx, int reps, double *med, double *best) {
  double ts[64];
  reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
  for (int i = -1; i < reps; i++) {
    double t0 = bench_now_s();
    tg_scope_begin();
    bool ok = fn(ctx, i < 0) && sync_device();
    double t = bench_now_s() - t0;
    tg_scope_end();
    uop_gc();
    if (!ok) return false;
    if (i >= 0) ts[i] = t;
    if (i == 0 && reps > 2 && t * reps > REPS_BUDGET_S) reps = t * 2 > REPS_BUDGET_S ? 2 : (int)(REPS_BUDGET_S / t);
  }
  *med = median(ts, reps);
  *best = INFINITY;
  for (int i = 0; i < reps; i++) *best = ts[i] < *best ? ts[i] : *best;
  return true;
}

/* a rate measurement: amount (flops or bytes) / seconds / scale, median and fastest, into the results */
static void report_rate(const char *workload, const char *unit, double amount, double scale, bool ok, double med,
                        double best) {
  add_result(workload, "tgc", unit, ok ? amount / med / scale : NAN, ok ? amount / best / scale : NAN);
  note("  tgc %-30s %s\n", workload, ok ? "done" : "FAILED");
}

/* ---- matmul --------------------------------------------------------------------------------------------------- */

typedef struct mm_ctx { const char *name; tg_tensor *a, *b; int64_t n; tg_dtype dt; } mm_ctx;

static bool mm_step(void *p, bool check) {
  mm_ctx *c = p;
  tg_tensor *r = tg_matmul(c->a, c->b);
  if (!r || tg_realize(r) != TG_OK) return false;
  if (!check) return true;
  /* a few elements against double dot products of the same (rounded) inputs */
  int64_t n = c->n;
  float *row = malloc((size_t)n * sizeof *row), *col = malloc((size_t)n * sizeof *col);
  bool ok = row && col;
  double tol_rel = c->dt == TG_FLOAT32 ? 1e-5 : c->dt == TG_FLOAT16 ? 2e-3 : 1e-2;
  for (int k = 0; ok && k < 4; k++) {
    int64_t i = (int64_t)k * 7919 % n, j = (int64_t)(k * 104729 + 13) % n;
    float got;
    int64_t br[4] = {i, i + 1, 0, n}, bc[4] = {0, n, j, j + 1}, bo[4] = {i, i + 1, j, j + 1};
    ok = read_f32(c->a, br, row, (size_t)n) && read_f32(c->b, bc, col, (size_t)n) && read_f32(r, bo, &got, 1);
    if (!ok) break;
    double s = 0, mag = 0;
    for (int64_t q = 0; q < n; q++) s += (double)row[q] * col[q], mag += fabs((double)row[q] * col[q]);
    /* the output's rounding (relative to it) and the accumulation's (relative to the sum of magnitudes) */
    if (!(fabs(s - got) <= tol_rel * fabs(s) + 1e-5 * mag + 1e-6)) {
      check_failed(c->name, "C[%lld][%lld] = %.6g, the host says %.6g", (long long)i, (long long)j, got, s);
      break;
    }
  }
  free(row), free(col);
  if (!ok) check_failed(c->name, "reading the result back failed: %s", tg_error());
  return true;
}

static void bench_matmul(int64_t n, tg_dtype dt, const char *dname, int reps) {
  char name[48];
  snprintf(name, sizeof name, "matmul_%lld_%s", (long long)n, dname);
  if (!wanted(name)) return;
  int64_t sh[2] = {n, n};
  mm_ctx c = {.name = name, .a = device_random(dt, 2, sh, true, 1), .b = device_random(dt, 2, sh, true, 1), .n = n, .dt = dt};
  double med = NAN, best = NAN;
  int before = nfailed;
  bool ok = c.a && c.b && time_steps(mm_step, &c, reps, &med, &best);
  if (!ok) check_failed(name, "%s", tg_error());
  report_rate(name, "TFLOP/s", 2.0 * n * n * n, 1e12, ok && nfailed == before, med, best);
  tg_free(c.a), tg_free(c.b);
}

/* ---- copy and elementwise ------------------------------------------------------------------------------------- */

typedef struct ew_ctx { tg_tensor *a, *b; int64_t n; } ew_ctx;

/* a few elements at the start, the middle and the end */
static const double PROBES[3] = {0, 0.5, 1};

static bool copy_step(void *p, bool check) {
  ew_ctx *c = p;
  tg_tensor *r = tg_contiguous(tg_mul_scalar(c->a, 1));
  if (!r || tg_realize(r) != TG_OK) return false;
  for (int k = 0; check && k < 3; k++) {
    int64_t i0 = (int64_t)(PROBES[k] * (double)(c->n - 16)), bd[2] = {i0, i0 + 16};
    float x[16], y[16];
    if (!read_f32(c->a, bd, x, 16) || !read_f32(r, bd, y, 16)) return false;
    if (memcmp(x, y, sizeof x)) {
      check_failed("copy", "the copy differs from its source at elements %lld..%lld", (long long)i0, (long long)i0 + 15);
      break;
    }
  }
  return true;
}

static bool ew_step(void *p, bool check) {
  ew_ctx *c = p;
  tg_tensor *r = tg_add_scalar(tg_mul(c->a, c->b), 1);
  if (!r || tg_realize(r) != TG_OK) return false;
  for (int k = 0; check && k < 3; k++) {
    int64_t i0 = (int64_t)(PROBES[k] * (double)(c->n - 16)), bd[2] = {i0, i0 + 16};
    float x[16], y[16], z[16];
    if (!read_f32(c->a, bd, x, 16) || !read_f32(c->b, bd, y, 16) || !read_f32(r, bd, z, 16)) return false;
    for (int i = 0; i < 16; i++) {
      double want = (double)x[i] * y[i] + 1;
      if (!(fabs(z[i] - want) <= 1e-6 * fabs(want) + 1e-7)) {
        check_failed("elementwise", "c[%lld] = %.8g, the host says %.8g", (long long)(i0 + i), z[i], want);
        return true;
      }
    }
  }
  return true;
}

static void bench_elementwise(int64_t n, int reps) {
  char cname[48], ename[48];
  int lg = 0;
  while (((int64_t)1 << lg) < n) lg++;
  snprintf(cname, sizeof cname, "copy_2^%d_f32", lg);
  snprintf(ename, sizeof ename, "elementwise_2^%d_f32", lg);
  bool want_e = wanted(ename), want_c = want_e || wanted(cname);
  if (!want_c) return;
  int64_t sh[1] = {n};
  ew_ctx c = {.a = device_random(TG_FLOAT32, 1, sh, true, 1), .b = device_random(TG_FLOAT32, 1, sh, true, 1), .n = n};
  double med = NAN, best = NAN;
  int before = nfailed;
  bool ok = c.a && c.b && time_steps(copy_step, &c, reps, &med, &best);
  if (!ok) check_failed(cname, "%s", tg_error());
  report_rate(cname, "GB/s", 8.0 * (double)n, 1e9, ok && nfailed == before, med, best);
  if (want_e) {
    before = nfailed;
    ok = c.a && c.b && time_steps(ew_step, &c, reps, &med, &best);
    if (!ok) check_failed(ename, "%s", tg_error());
    report_rate(ename, "GB/s", 12.0 * (double)n, 1e9, ok && nfailed == before, med, best);
  }
  tg_free(c.a), tg_free(c.b);
}

/* ---- softmax and layernorm ------------------------------------------------------------------------------------ */

typedef struct row_ctx { const char *name; tg_tensor *x; int64_t n; bool layernorm; } row_ctx;

static bool row_step(void *p, bool check) {
  row_ctx *c = p;
  int axis[1] = {-1};
  tg_tensor *r = c->layernorm ? tg_layernorm(c->x, 1, axis, 1e-5) : tg_softmax(c->x, -1);
  if (!r || tg_realize(r) != TG_OK) return false;
  if (!check) return true;
  int64_t n = c->n;
  float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
  bool ok = x && y;
  for (int k = 0; ok && k < 2; k++) {  /* the first and the last row */
    int64_t i = k ? n - 1 : 0, bd[4] = {i, i + 1, 0, n};
    ok = read_f32(c->x, bd, x, (size_t)n) && read_f32(r, bd, y, (size_t)n);
    if (!ok) break;
    double mx = -INFINITY, s = 0, mean = 0, var = 0;
    for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx, mean += x[j];
    mean /= (double)n;
    for (int64_t j = 0; j < n; j++) s += exp((double)x[j] - mx), var += ((double)x[j] - mean) * ((double)x[j] - mean);
    var /= (double)n;
    for (int64_t j = 0; j < n; j++) {
      double want = c->layernorm ? ((double)x[j] - mean) / sqrt(var + 1e-5) : exp((double)x[j] - mx) / s;
      double tol = c->layernorm ? 1e-3 : 1e-5 * fabs(want) + 1e-7;
      if (!(fabs(y[j] - want) <= tol)) {
        check_failed(c->name, "row %lld column %lld = %.8g, the host says %.8g", (long long)i, (long long)j, y[j], want);
        free(x), free(y);
        return true;
      }
    }
  }
  free(x), free(y);
  if (!ok) check_failed(c->name, "reading the result back failed: %s", tg_error());
  return true;
}

static void bench_rows(int64_t n, bool layernorm, int reps) {
  char name[48];
  snprintf(name, sizeof name, "%s_%lldx%lld_f32", layernorm ? "layernorm" : "softmax", (long long)n, (long long)n);
  if (!wanted(name)) return;
  int64_t sh[2] = {n, n};
  row_ctx c = {.name = name, .x = device_random(TG_FLOAT32, 2, sh, true, layernorm ? 1 : 4), .n = n, .layernorm = layernorm};
  double med = NAN, best = NAN;
  int before = nfailed;
  bool ok = c.x && time_steps(row_step, &c, reps, &med, &best);
  if (!ok) check_failed(name, "%s", tg_error());
  report_rate(name, "GB/s", 8.0 * (double)n * (double)n, 1e9, ok && nfailed == before, med, best);
  tg_free(c.x);
}

/* ---- MNIST training step (examples/mnist.c's model: tinygrad's beautiful_mnist) ------------------------------ */

typedef struct model {
  tg_nn_conv2d c1, c2, c3, c4;
  tg_nn_batchnorm bn1, bn2;
  tg_nn_linear fc;
} model;

static tg_status model_init(model *m) {
  tg_status st = TG_OK;
  tg_conv_opts o = {0};
  if (!st) st = tg_nn_conv2d_init(&m->c1, 1, 32, TG_INTS(5), true, o);
  if (!st) st = tg_nn_conv2d_init(&m->c2, 32, 32, TG_INTS(5), true, o);
  if (!st) st = tg_nn_batchnorm_init(&m->bn1, 32);
  if (!st) st = tg_nn_conv2d_init(&m->c3, 32, 64, TG_INTS(3), true, o);
  if (!st) st = tg_nn_conv2d_init(&m->c4, 64, 64, TG_INTS(3), true, o);
  if (!st) st = tg_nn_batchnorm_init(&m->bn2, 64);
  if (!st) st = tg_nn_linear_init(&m->fc, 576, 10, true);
  return st;
}

static tg_status model_params(const model *m, tg_params *p) {
  tg_status st = tg_nn_conv2d_params(&m->c1, "layers.0", p);
  if (!st) st = tg_nn_conv2d_params(&m->c2, "layers.2", p);
  if (!st) st = tg_nn_batchnorm_params(&m->bn1, "layers.4", p);
  if (!st) st = tg_nn_conv2d_params(&m->c3, "layers.6", p);
  if (!st) st = tg_nn_conv2d_params(&m->c4, "layers.8", p);
  if (!st) st = tg_nn_batchnorm_params(&m->bn2, "layers.10", p);
  if (!st) st = tg_nn_linear_params(&m->fc, "layers.13", p);
  return st;
}

static void model_free(model *m) {
  tg_nn_conv2d_free(&m->c1), tg_nn_conv2d_free(&m->c2), tg_nn_conv2d_free(&m->c3), tg_nn_conv2d_free(&m->c4);
  tg_nn_batchnorm_free(&m->bn1), tg_nn_batchnorm_free(&m->bn2);
  tg_nn_linear_free(&m->fc);
}

static tg_tensor *forward(model *m, tg_tensor *x) {
  tg_pool_opts pool = {.kernel = TG_INTS(2)};
  x = tg_cast(x, TG_FLOAT32);
  x = tg_relu(tg_nn_conv2d_forward(&m->c1, x));
  x = tg_relu(tg_nn_conv2d_forward(&m->c2, x));
  x = tg_max_pool2d(tg_nn_batchnorm_forward(&m->bn1, x), pool);
  x = tg_relu(tg_nn_conv2d_forward(&m->c3, x));
  x = tg_relu(tg_nn_conv2d_forward(&m->c4, x));
  x = tg_max_pool2d(tg_nn_batchnorm_forward(&m->bn2, x), pool);
  return tg_nn_linear_forward(&m->fc, tg_flatten(x, 1, -1));
}

typedef struct mnist_ctx { model m; tg_optim *opt; tg_jit *jit; tg_tensor *x, *y; double first_loss, loss; } mnist_ctx;

/* in = {images, labels}, out = {loss}: examples/mnist.c's train_step */
static tg_status mnist_train(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  mnist_ctx *c = ctx;
  model *m = &c->m;
  tg_scope_begin();
  tg_tensor *loss = tg_sparse_categorical_crossentropy(forward(m, in[0]), in[1], (tg_loss_opts){0});
  tg_tensor *extra[7] = {loss, m->bn1.running_mean, m->bn1.running_var, m->bn1.num_batches_tracked,
                         m->bn2.running_mean, m->bn2.running_var, m->bn2.num_batches_tracked};
  tg_status st = loss ? tg_backward(loss) : tg_error_status();
  if (st == TG_OK) st = tg_optim_step(c->opt, 7, extra);
  out[0] = st == TG_OK ? tg_keep(loss) : NULL;
  tg_scope_end();
  return st;
}

/* one step; the loss stays on the device (read once, after the timing) */
static tg_tensor *mnist_loss;

static bool mnist_step(void *p, bool check) {
  mnist_ctx *c = p;
  tg_tensor *in[2] = {c->x, c->y}, *loss = NULL;
  if (tg_jit_call(c->jit, in, &loss) != TG_OK) return false;
  if (check && !isfinite(c->first_loss)) c->first_loss = tg_item(loss);
  tg_free(mnist_loss);
  mnist_loss = tg_keep(loss);
  return true;
}

static void bench_mnist(int64_t batch, int reps) {
  char name[48];
  snprintf(name, sizeof name, "mnist_step_b%lld_adam", (long long)batch);
  if (!wanted(name)) return;
  tg_manual_seed(1337);
  mnist_ctx c = {.first_loss = NAN, .loss = NAN};
  tg_params *params = tg_params_new();
  size_t npix = (size_t)batch * 28 * 28;
  uint8_t *img = malloc(npix);
  int32_t *lab = malloc((size_t)batch * sizeof *lab);
  bool ok = params && img && lab && model_init(&c.m) == TG_OK && model_params(&c.m, params) == TG_OK;
  if (ok) {
    for (size_t i = 0; i < npix; i++) img[i] = (uint8_t)((i * 2654435761u) >> 13);
    for (int64_t i = 0; i < batch; i++) lab[i] = (int32_t)(((uint64_t)i * 0x9E3779B97F4A7C15ull) >> 60) % 10;
    int64_t xs[4] = {batch, 1, 28, 28}, ys[1] = {batch};
    c.x = tg_from_data(TG_UINT8, 4, xs, img, npix);
    c.y = tg_from_data(TG_INT32, 1, ys, lab, (size_t)batch * sizeof *lab);
    c.opt = tg_adam_new(params, adam_lr(1e-3));
    c.jit = c.opt ? tg_jit_new(mnist_train, &c, 2, 1) : NULL;
    ok = c.x && c.y && c.jit;
  }
  free(img), free(lab);
  double med = NAN, best = NAN;
  tg_set_training(true);
  /* two untimed calls besides time_steps' first: the first call of a tg_jit step runs it, the second captures */
  ok = ok && mnist_step(&c, true) && mnist_step(&c, false) && time_steps(mnist_step, &c, reps, &med, &best);
  tg_set_training(false);
  c.loss = ok ? tg_item(mnist_loss) : NAN;
  int before = nfailed;
  if (!ok) check_failed(name, "%s", tg_error());
  else if (!isfinite(c.loss) || !(c.loss < c.first_loss))  /* the same batch every step: the loss must fall */
    check_failed(name, "the loss went from %.4f to %.4f over %d steps of the same batch", c.first_loss, c.loss, reps + 2);
  bool good = ok && nfailed == before;
  add_result(name, "tgc", "ms/step", good ? med * 1e3 : NAN, good ? best * 1e3 : NAN);
  note("  tgc %-30s %s (loss %.4f -> %.4f, %d kernels per step)\n", name, good ? "done" : "FAILED", c.first_loss,
       c.loss, c.jit ? tg_jit_kernels(c.jit) : 0);
  tg_error_clear();
  tg_free(mnist_loss);
  mnist_loss = NULL;
  tg_jit_free(c.jit);
  tg_optim_free(c.opt);
  tg_params_free(params);
  tg_free(c.x), tg_free(c.y);
  model_free(&c.m);
}

/* ---- Llama stories260K decoding ------------------------------------------------------------------------------- */

/* stories260K/<name> into out: tg_data_find's places, else shared/data beside the repository or inside it */
static bool find_data(const char *name, char *out, size_t cap) {
  if (tg_data_find(NULL, "stories260K", name, out, cap) == TG_OK) return true;
  tg_error_clear();
  static const char *const rel[2] = {"../../../shared/data/stories260K", "../../shared/data/stories260K"};
  char exe[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return false;
  exe[len] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;
  for (int i = 0; i < 2; i++) {
    int w = snprintf(out, cap, "%s/%s/%s", exe, rel[i], name);
    if (w > 0 && (size_t)w < cap && access(out, R_OK) == 0) return true;
  }
  return false;
}

/* the greedy tokens llama2.c's run.c chose after "Once upon a time" (tests/fixtures/stories260K_greedy.txt) */
static int read_fixture(int32_t *prompt, int *nprompt, int32_t *next, int cap) {
  char path[4200], buf[8192];
  bench_script_path("../tests/fixtures/stories260K_greedy.txt", path, sizeof path);
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = 0;
  int counts[2] = {0, 0};
  const char *keys[2] = {"\nprompt_ids: ", "\nnext: "};
  int32_t *outs[2] = {prompt, next};
  for (int k = 0; k < 2; k++) {
    const char *p = strstr(buf, keys[k]);
    if (!p) return 0;
    p += strlen(keys[k]);
    while (counts[k] < cap) {
      char *end;
      long v = strtol(p, &end, 10);
      if (end == p) break;
      outs[k][counts[k]++] = (int32_t)v;
      p = end;
      if (*p == '\n') break;
    }
  }
  *nprompt = counts[0];
  return counts[1];
}

/* positions tokens from the prompt, greedily; tokens[pos] is the token chosen after position pos */
static bool llama_decode(tg_llama *m, const int32_t *prompt, int nprompt, int positions, int32_t *tokens, float *logits,
                         int64_t vocab) {
  if (tg_llama_reset(m) != TG_OK || !sync_device()) return false;
  int32_t token = prompt[0];
  for (int pos = 0; pos < positions; pos++) {
    if (tg_llama_step(m, token, pos, logits) != TG_OK) return false;
    int32_t next = 0;
    for (int64_t i = 1; i < vocab; i++) next = logits[i] > logits[next] ? (int32_t)i : next;
    tokens[pos] = token = pos + 1 < nprompt ? prompt[pos + 1] : next;
  }
  return true;
}

static char llama_model_path[PATH_MAX];

static void bench_llama(int positions, int reps) {
  char name[48];
  snprintf(name, sizeof name, "llama_stories260K_decode_%d", positions);
  if (!wanted(name)) return;
  if (!find_data("stories260K.bin", llama_model_path, sizeof llama_model_path)) {
    llama_model_path[0] = 0;
    add_note("%s: skipped: stories260K.bin not found ($TG_DATA/stories260K, ~/.cache/tgc/stories260K, "
             "../shared/data/stories260K)", name);
    note("  tgc %-30s skipped (model not found)\n", name);
    return;
  }
  int32_t prompt[16], want[128];
  int nprompt = 0, nwant = read_fixture(prompt, &nprompt, want, 128);
  if (nprompt < 1) {  /* no fixture: "Once upon a time" as stories260K's tokenizer encodes it */
    static const int32_t P[5] = {1, 403, 407, 261, 378};
    memcpy(prompt, P, sizeof P);
    nprompt = 5;
    add_note("%s: tests/fixtures/stories260K_greedy.txt not found: tokens not checked", name);
  }
  tg_llama *m = tg_llama_load(llama_model_path, 0);
  int64_t vocab = m ? tg_llama_config_of(m).vocab_size : 0;
  float *logits = m ? malloc((size_t)vocab * sizeof *logits) : NULL;
  int32_t *tokens = malloc((size_t)positions * sizeof *tokens);
  double ts[16];
  reps = reps > 16 ? 16 : reps;
  bool ok = m && logits && tokens && positions <= tg_llama_max_seq(m);
  /* the first pass compiles and captures the step and is checked against llama2.c's tokens */
  ok = ok && llama_decode(m, prompt, nprompt, positions, tokens, logits, vocab);
  int before = nfailed;
  for (int i = 0; ok && i < positions && i < nwant; i++)
    if (tokens[i] != want[i]) {
      check_failed(name, "position %d: token %d, llama2.c's run.c chose %d", i, tokens[i], want[i]);
      break;
    }
  for (int r = 0; ok && r < reps; r++) {
    if (tg_llama_reset(m) != TG_OK || !sync_device()) ok = false;
    double t0 = bench_now_s();
    int32_t token = prompt[0];
    for (int pos = 0; ok && pos < positions; pos++) {
      ok = tg_llama_step(m, token, pos, logits) == TG_OK;
      int32_t next = 0;
      for (int64_t i = 1; i < vocab; i++) next = logits[i] > logits[next] ? (int32_t)i : next;
      token = pos + 1 < nprompt ? prompt[pos + 1] : next;
    }
    ts[r] = bench_now_s() - t0;
  }
  if (!ok) check_failed(name, "%s", tg_error());
  bool good = ok && nfailed == before;
  double best = INFINITY;
  for (int r = 0; good && r < reps; r++) best = ts[r] < best ? ts[r] : best;
  add_result(name, "tgc", "tok/s", good ? positions / median(ts, reps) : NAN, good ? positions / best : NAN);
  note("  tgc %-30s %s (%d kernels per step)\n", name, good ? "done" : "FAILED", m ? tg_llama_kernels(m) : 0);
  free(logits), free(tokens);
  tg_llama_free(m);
}

/* ---- the peer ------------------------------------------------------------------------------------------------- */

static void run_peer(void) {
  char path[4200], line[4096];
  bench_script_path("gpu_peers.py", path, sizeof path);
  if (access(path, R_OK) != 0) {
    add_note("pytorch: skipped: %s not found", path);
    return;
  }
  const char *py = getenv("PYTHON");
  char cmd[16384];
  int w = snprintf(cmd, sizeof cmd, "%s '%s'%s%s%s%.256s%s%s%.4200s%s", py && *py ? py : "python3", path,
                   small_mode ? " --small" : "", peer_cpu ? " --peer-cpu" : "", only ? " --only '" : "", only ? only : "",
                   only ? "'" : "", llama_model_path[0] ? " --model '" : "", llama_model_path,
                   llama_model_path[0] ? "'" : "");
  if (w < 0 || (size_t)w >= sizeof cmd) {
    add_note("pytorch: skipped: the command line is too long");
    return;
  }
  FILE *f = popen(cmd, "r");
  if (!f) {
    add_note("pytorch: skipped: cannot run %s", cmd);
    return;
  }
  while (fgets(line, sizeof line, f)) {
    char wl[48], impl[16], unit[16], txt[300];
    if (line[0] != '{') continue;
    if (json_str(line, "skip", impl, sizeof impl) && json_str(line, "note", txt, sizeof txt)) {
      add_note("%s: skipped: %s", impl, txt);
    } else if (json_str(line, "info", impl, sizeof impl) && json_str(line, "note", txt, sizeof txt)) {
      add_note("%s: %s", impl, txt);
    } else if (json_str(line, "workload", wl, sizeof wl) && json_str(line, "impl", impl, sizeof impl) &&
               json_str(line, "unit", unit, sizeof unit)) {
      char where[16];
      add_result(wl, impl, unit, json_num(line, "value"), json_num(line, "best"));
      if (json_str(line, "device", where, sizeof where)) snprintf(results[nresults - 1].device, sizeof where, "%s", where);
    }
  }
  int rc = pclose(f);
  if (rc != 0) add_note("pytorch: %s exited with status %d", path, rc);
}

/* ---- output --------------------------------------------------------------------------------------------------- */

static void fmt_num(char *b, size_t n, const result *r, bool best) {
  double v = r ? (best ? r->best : r->value) : NAN;
  if (!r) snprintf(b, n, "-");
  else if (!isfinite(v)) snprintf(b, n, "fail");
  else if (v >= 1000) snprintf(b, n, "%.0f", v);
  else if (v >= 10) snprintf(b, n, "%.1f", v);
  else if (v >= 0.01) snprintf(b, n, "%.3f", v);
  else snprintf(b, n, "%.2e", v);
}

/* how many times faster tgc is (rates: tgc / peer; times: peer / tgc) */
static void fmt_ratio(char *b, size_t n, const result *t, const result *p, bool best) {
  double tv = t ? (best ? t->best : t->value) : NAN, pv = p ? (best ? p->best : p->value) : NAN;
  if (!(tv > 0) || !(pv > 0)) snprintf(b, n, "-");
  else snprintf(b, n, "%.2fx", is_time(t->unit) ? pv / tv : tv / pv);
}

/* an elementwise row's rate as a percentage of its implementation's copy rate */
static void fmt_of_copy(char *b, size_t n, const result *r) {
  snprintf(b, n, "%s", "");
  if (!r || strncmp(r->workload, "elementwise_", 12)) return;
  char cname[48];
  snprintf(cname, sizeof cname, "copy_%s", r->workload + 12);
  const result *c = find_result(cname, r->impl);
  if (c && r->value > 0 && c->value > 0) snprintf(b, n, "%.0f%%", 100 * r->value / c->value);
}

static void print_table(void) {
  note("\n%-34s %-8s %10s %10s %8s   %10s %10s %8s   %-8s %-8s\n", "workload", "unit", "tgc med", "torch med", "ratio",
       "tgc best", "torch best", "ratio", "tgc/copy", "torch/copy");
  for (int i = 0; i < nresults; i++) {
    const result *t = &results[i];
    if (strcmp(t->impl, "tgc")) continue;
    const result *p = find_result(t->workload, "pytorch");
    char tm[16], pm[16], rm[16], tb[16], pb[16], rb[16], tc[16], pc[16];
    fmt_num(tm, sizeof tm, t, false), fmt_num(pm, sizeof pm, p, false), fmt_ratio(rm, sizeof rm, t, p, false);
    fmt_num(tb, sizeof tb, t, true), fmt_num(pb, sizeof pb, p, true), fmt_ratio(rb, sizeof rb, t, p, true);
    fmt_of_copy(tc, sizeof tc, t), fmt_of_copy(pc, sizeof pc, p);
    note("%-34s %-8s %10s %10s %8s   %10s %10s %8s   %-8s %-8s\n", t->workload, t->unit, tm, pm, rm, tb, pb, rb, tc, pc);
  }
  /* peer rows with no tgc row (tgc skipped them) */
  for (int i = 0; i < nresults; i++) {
    const result *p = &results[i];
    if (!strcmp(p->impl, "tgc") || find_result(p->workload, "tgc")) continue;
    char pm[16], pb[16];
    fmt_num(pm, sizeof pm, p, false), fmt_num(pb, sizeof pb, p, true);
    note("%-34s %-8s %10s %10s %8s   %10s %10s %8s\n", p->workload, p->unit, "-", pm, "-", "-", pb, "-");
  }
}

static void print_json(void) {
  for (int i = 0; i < nresults; i++) {
    const result *r = &results[i];
    char v[32], b[32];
    if (isfinite(r->value)) snprintf(v, sizeof v, "%.6g", r->value);
    else snprintf(v, sizeof v, "null");
    if (isfinite(r->best)) snprintf(b, sizeof b, "%.6g", r->best);
    else snprintf(b, sizeof b, "null");
    printf("{\"workload\": \"%s\", \"impl\": \"%s\", \"value\": %s, \"best\": %s, \"unit\": \"%s\", \"device\": \"%s\"}\n",
           r->workload, r->impl, v, b, r->unit, r->device);
  }
}

/* ---- main ----------------------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  args_prog = "gpu";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--small")) small_mode = true;
    else if (!strcmp(argv[i], "--json")) json_mode = true;
    else if (!strcmp(argv[i], "--peer-cpu")) peer_cpu = true;
    else if (!strcmp(argv[i], "--no-peers")) no_peers = true;
    else if (!strcmp(argv[i], "--only")) {
      if (!(only = args_value(argc, argv, &i, "comma-separated workload words"))) return ARGS_EXIT;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: gpu [--small] [--json] [--only W[,W]] [--peer-cpu] [--no-peers]\n"
             "tgc on the default device (DEV=CUDA, DEV=CL, else the CPU) next to PyTorch on the same GPU: matmul\n"
             "f16/bf16/f32, copy and c = a * b + 1, softmax, layernorm, the MNIST training step, Llama decoding.\n"
             "  --small     small sizes: a functional check on a slow device (about a minute on PoCL)\n"
             "  --json      one JSON line per measurement on stdout instead of the table\n"
             "  --only W    only workloads whose names contain one of the words (matmul, f16, bf16, f32, copy,\n"
             "              elementwise, softmax, layernorm, mnist, llama)\n"
             "  --peer-cpu  run PyTorch on the CPU when there is no CUDA GPU (functional check of the peer)\n"
             "  --no-peers  tgc only\n"
             "  -h, --help  this help\n"
             "Exit status: 0 every check passed, 1 a tgc result was wrong or failed, 2 a bad command line.\n");
      return 0;
    } else {
      args_unknown(argv[i]);
      return ARGS_EXIT;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const device *d = device_default();
  if (!d) die_tg("opening the default device (DEV)");
  dev_name = d->name;
  double t_start = bench_now_s();
  note("tgc GPU benchmark on %s%s%s%s: the first run of each workload compiles and is checked against the host,\n"
       "then a few timed runs (median and fastest), each ended by a device synchronize; the peer is PyTorch on the\n"
       "same GPU (bench/gpu_peers.py). Ratios: times faster than PyTorch (> 1: tgc faster).\n",
       dev_name, d->arch[0] ? " (" : "", d->arch, d->arch[0] ? ")" : "");
  if (small_mode) note("--small: sizes shrunk for a functional check; the figures are not the benchmark's\n");
  else if (!device_is_gpu(d))
    note("note: the default device is the CPU (DEV=CUDA or DEV=CL picks a GPU): the full sizes take long here\n");

  int64_t mm16 = small_mode ? 256 : 8192, mm32 = small_mode ? 128 : 4096, ew = small_mode ? (int64_t)1 << 20 : (int64_t)1 << 28;
  int64_t rows = small_mode ? 512 : 16384, batch = small_mode ? 32 : 512;
  int reps = small_mode ? 2 : 5;
  bench_matmul(mm16, TG_FLOAT16, "f16", reps);
  bench_matmul(mm16, TG_BFLOAT16, "bf16", reps);
  bench_matmul(mm32, TG_FLOAT32, "f32", reps);
  bench_elementwise(ew, small_mode ? 2 : 10);
  bench_rows(rows, false, reps);
  bench_rows(rows, true, reps);
  bench_mnist(batch, small_mode ? 2 : 10);
  bench_llama(small_mode ? 16 : 256, small_mode ? 1 : 3);
  if (d->flush_cache) d->flush_cache(d);  /* the device memory back before the peer takes the GPU */
  double t_tgc = bench_now_s() - t_start;
  if (!no_peers) {
    note("tgc done in %.1f s; running the peer (bench/gpu_peers.py)...\n", t_tgc);
    run_peer();
  }
  if (json_mode) {
    print_json();
    for (int i = 0; i < nnotes; i++) fprintf(stderr, "%s\n", notes[i]);
  } else {
    print_table();
    note("\n");
    for (int i = 0; i < nnotes; i++) note("%s\n", notes[i]);
    note("checks (tgc): %s; total %.1f s (tgc %.1f s)\n", nfailed ? "FAILED" : "ok", bench_now_s() - t_start, t_tgc);
  }
  return nfailed ? 1 : 0;
}
