/* test_opt.c — optimization actions: each refused with a reason where it does not apply; random legal action
 * lists on a set of kernels compute what the unoptimized kernel computes; the heuristic's code is vector code. */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "codegen/beam.h"
#include "codegen/opt.h"
#include "engine/search.h"
#include "heuristic_source.h"
#include "render/render.h"
#include "runtime/device.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "test.h"
#include "uop/env.h"

static uint64_t xs = 0x9E3779B97F4A7C15ULL;
static uint64_t next_u64(void) {
  xs ^= xs << 13; xs ^= xs >> 7; xs ^= xs << 17;
  return xs;
}
static float frand(void) { return (float)((next_u64() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f; }

static tg_tensor *rand_t(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  float *d = malloc((size_t)n * sizeof *d);
  if (!d) return NULL;
  for (int64_t i = 0; i < n; i++) d[i] = frand();
  tg_tensor *t = tg_from_data(TG_FLOAT32, ndim, shape, d, (size_t)n * sizeof *d);
  free(d);
  if (t) tg_realize(t);
  return t;
}

static int applied_total, vector_kernels, tblock_kernels;

static void *leaf_ptr(uop *u) {
  if (!u->buf && u->op == OP_RESHAPE && u->src[0]->op == OP_BUFFER) u = u->src[0];
  tg_buffer *b = u->buf;
  return b ? b->ptr : NULL;
}

/* a random action on an axis the kernel has, with an amount that often divides it */
static opt random_opt(kernel_state *ks) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred;
  ks_axes(ks, ax, &nout, &nred);
  opt o;
  o.op = (opt_op)(next_u64() % 6);  /* UPCAST UNROLL THREAD PADTO SWAP PACK */
  int lim = o.op == OPT_UNROLL ? nred : o.op == OPT_PADTO ? nout + nred : nout;
  o.axis = lim ? (int)(next_u64() % (uint64_t)lim) : 0;
  int64_t size = o.op == OPT_UNROLL ? (nred ? ax[nout + o.axis].size : 1) : (lim ? ax[o.axis].size : 1);
  static const int64_t amts[] = {2, 3, 4, 8, 16, 32};
  o.arg = amts[next_u64() % 6];
  if ((o.op == OPT_UPCAST || o.op == OPT_UNROLL) && next_u64() % 2)
    for (int k = 5; k >= 0; k--)
      if (size % amts[k] == 0) { o.arg = amts[k]; break; }
  if (o.op == OPT_THREAD) o.arg = 2;
  if (o.op == OPT_SWAP) o.arg = nout ? (int64_t)(next_u64() % (uint64_t)nout) : 0;
  if (o.op == OPT_PACK) o.arg = (int64_t)(next_u64() % 2);  /* 1: transposing copies (STORE_TBLOCK) too */
  return o;
}

/* y's one kernel with the actions applied (refused ones skipped; opts NULL: nopts random ones, nopts < 0: the heuristic's), run into out (nbytes); the actions that
 * applied are described in desc. false with a message on any failure */
static bool run_with_opts(tg_tensor *y, const opt *opts, int nopts, opt_target tgt, void *out, size_t nbytes,
                          char *desc, size_t ndesc) {
  schedule s;
  if (schedule_create(1, &y->u, &s) != TG_OK) return false;
  bool ok = false;
  char *src = NULL;
  tg_program *prog = NULL;
  linear_program lp = {0};
  if (s.nkernels != 1) {
    snprintf(desc, ndesc, "expected one kernel, got %d", s.nkernels);
    goto out;
  }
  sched_kernel *k = &s.kernels[0];
  kernel_state ks;
  if (!ks_init(&ks, decompose_dtypes(k->ast, true), tgt)) goto out;
  if (nopts < 0) hand_coded_optimizations(&ks);  /* the heuristic's plan */
  for (int i = 0; i < nopts; i++) {
    char why[160];
    apply_opt(&ks, opts ? opts[i] : random_opt(&ks), why);
  }
  kernel_info info;
  memset(&info, 0, sizeof info);
  uop *fin = codegen_finish(&ks, &info);
  snprintf(desc, ndesc, "%s [%s] vec %d", info.name, info.opts, tgt.vec_bytes);
  applied_total += ks.napplied;
  if (info.lane) vector_kernels++;
  if (!fin || !linearize(fin, &lp, &info)) goto out;
  if (!(src = render_c(info.name, &lp, &info))) goto out;
  if (strstr(src, "tg_tblock(")) tblock_kernels++;
  const device *dev = device_default();
  if (!(prog = dev->compile(dev, info.name, src))) goto out;
  void *bufs[16];
  bufs[0] = out;
  for (int j = 1; j < k->nbufs && j < 16; j++)
    if (!(bufs[j] = leaf_ptr(k->bufs[j]))) goto out;
  memset(out, 0, nbytes);
  ok = dev->launch(prog, bufs, k->nbufs, info.threaded ? info.nthreads : 1, NULL) == TG_OK;
out:
  if (!ok && tg_error()[0]) snprintf(desc + strlen(desc), ndesc - strlen(desc), ": %s", tg_error());
  program_release(prog);
  free(src);
  linear_program_free(&lp);
  schedule_free(&s);
  return ok;
}

typedef tg_tensor *(*kernel_fn)(tg_tensor **in);
typedef struct kcase { const char *name; int nin; int64_t shapes[3][4]; int ndims[3]; kernel_fn fn; } kcase;

static tg_tensor *k_matmul(tg_tensor **in) { return tg_matmul(in[0], in[1]); }
static tg_tensor *k_matmul_bt(tg_tensor **in) {
  int perm[2] = {1, 0};
  return tg_matmul(in[0], tg_permute(in[1], 2, perm));
}
static tg_tensor *k_sum_last(tg_tensor **in) { int ax = 1; return tg_sum(in[0], 1, &ax, false); }
static tg_tensor *k_max_first(tg_tensor **in) { int ax = 0; return tg_max(in[0], 1, &ax, false); }
static tg_tensor *k_fma_relu(tg_tensor **in) { return tg_relu(tg_add(tg_mul(in[0], in[1]), in[2])); }
static tg_tensor *k_sum_exp(tg_tensor **in) { int ax = 1; return tg_sum(tg_exp(in[0]), 1, &ax, false); }
static tg_tensor *k_where(tg_tensor **in) {
  return tg_where(tg_lt(in[0], in[1]), in[0], tg_mul_scalar(in[1], 2));
}
static tg_tensor *k_sum_transposed(tg_tensor **in) {
  int perm[2] = {1, 0}, ax = 1;
  return tg_sum(tg_permute(in[0], 2, perm), 1, &ax, false);
}
/* a 3-tap stencil over a zero-padded input: masked loads */
static tg_tensor *k_conv(tg_tensor **in) {
  int64_t pads[4] = {0, 0, 1, 1};
  tg_tensor *p = tg_pad_axes(in[0], 2, pads, 0), *y = NULL;
  for (int k = 0; k < 3; k++) {
    int64_t sh[4] = {0, 8, k, k + 32};
    tg_tensor *t = tg_mul_scalar(tg_shrink(p, 2, sh), 0.25 * (k + 1));
    y = y ? tg_add(y, t) : t;
  }
  return y;
}
static tg_tensor *k_int_sum(tg_tensor **in) {
  int ax = 0;
  return tg_cast(tg_sum(tg_cast(tg_mul_scalar(in[0], 100), TG_INT32), 1, &ax, false), TG_FLOAT32);
}

static const kcase cases[] = {
    {"matmul", 2, {{24, 40}, {40, 48}}, {2, 2}, k_matmul},
    {"matmul_bt", 2, {{16, 40}, {64, 40}}, {2, 2}, k_matmul_bt},
    {"sum_last", 1, {{16, 64}}, {2}, k_sum_last},
    {"max_first", 1, {{64, 20}}, {2}, k_max_first},
    {"fma_relu", 3, {{8, 64}, {8, 64}, {64}}, {2, 2, 1}, k_fma_relu},
    {"sum_exp", 1, {{6, 48}}, {2}, k_sum_exp},
    {"where", 2, {{48, 16}, {48, 16}}, {2, 2}, k_where},
    {"sum_transposed", 1, {{32, 12}}, {2}, k_sum_transposed},
    {"stencil", 1, {{8, 32}}, {2}, k_conv},
    {"int_sum", 1, {{32, 48}}, {2}, k_int_sum},
};

/* matmul with B transposed (a linear layer's weight): the heuristic's plan packs B's panel transposed, block by
 * block through vector registers (STORE_TBLOCK), with 16 and 8 lanes; the values equal the unoptimized kernel's */
TEST(test_opt_transposing_pack_copies_blocks) {
  REQUIRE_CPU();
  tg_scope_begin();
  tg_tensor *in[2] = {rand_t(2, (int64_t[]){128, 48}), rand_t(2, (int64_t[]){512, 48})};
  tg_tensor *y = k_matmul_bt(in);
  static float want[128 * 512], got[128 * 512];
  char desc[512];
  CHECK(run_with_opts(y, NULL, 0, (opt_target){.nthreads = 1}, want, sizeof want, desc, sizeof desc), "%s", desc);
  static const int vecs[] = {64, 32};
  for (int v = 0; v < 2; v++) {
    int before = tblock_kernels;
    CHECK(run_with_opts(y, NULL, -1, (opt_target){.nthreads = 2, .vec_bytes = vecs[v]}, got, sizeof got, desc, sizeof desc),
          "%s", desc);
    CHECK(tblock_kernels == before + 1, "%s: the transposing PACK was not copied in blocks", desc);
    CHECK_CLOSE(desc, got, want, 128 * 512);
  }
  tg_scope_end();
}

/* a 3x3 convolution over few pixels (ResNet's last stage, smaller): the heuristic packs the weight's panel
 * with the output channels innermost, a transposing copy; input channel, ky and kx are consecutive in the
 * weight and in the panel, so the copy is one pair of loops copied in blocks (STORE_TBLOCK), not four loops
 * copied element by element; the values equal the unoptimized kernel's */
TEST(test_opt_conv_weight_panel_is_copied_in_blocks) {
  REQUIRE_CPU();
  tg_scope_begin();
  tg_tensor *x = rand_t(4, (int64_t[]){1, 64, 7, 7}), *w = rand_t(4, (int64_t[]){64, 64, 3, 3});
  tg_tensor *y = tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)});
  static float want[64 * 49], got[64 * 49];
  char desc[512];
  CHECK(run_with_opts(y, NULL, 0, (opt_target){.nthreads = 1}, want, sizeof want, desc, sizeof desc), "%s", desc);
  static const int vecs[] = {64, 32};
  for (int v = 0; v < 2; v++) {
    int before = tblock_kernels;
    CHECK(run_with_opts(y, NULL, -1, (opt_target){.nthreads = 2, .vec_bytes = vecs[v]}, got, sizeof got, desc, sizeof desc),
          "%s", desc);
    CHECK(tblock_kernels == before + 1, "%s: the weight's panel was not copied in blocks", desc);
    CHECK_CLOSE(desc, got, want, 64 * 49);
  }
  tg_scope_end();
}

TEST(test_opt_random_action_lists_match_the_unoptimized_kernel) {
  REQUIRE_CPU();
  int lists = getenv("TG_TEST_QUICK") ? 6 : 20;
  static const int vecs[] = {0, 8, 16, 64};
  applied_total = vector_kernels = 0;
  const char *seed = getenv("TG_SEED");  /* reruns with other action lists */
  if (seed && *seed) xs = 0x9E3779B97F4A7C15ULL ^ (strtoull(seed, NULL, 10) * 0xBF58476D1CE4E5B9ULL);
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    tg_scope_begin();
    const kcase *kc = &cases[c];
    tg_tensor *in[3];
    for (int i = 0; i < kc->nin; i++) in[i] = rand_t(kc->ndims[i], kc->shapes[i]);
    tg_tensor *y = kc->fn(in);
    if (!y) {
      test_fail(__FILE__, __LINE__, "%s: %s", kc->name, tg_error());
      tg_scope_end();
      continue;
    }
    int64_t n = tg_numel(y);
    float *want = calloc((size_t)n, sizeof *want), *got = calloc((size_t)n, sizeof *got);
    char desc[512];
    if (!run_with_opts(y, NULL, 0, (opt_target){.nthreads = 1}, want, (size_t)n * 4, desc, sizeof desc)) {
      test_fail(__FILE__, __LINE__, "%s unoptimized: %s", kc->name, desc);
    } else {
      for (int l = 0; l < lists; l++) {
        int no = 1 + (int)(next_u64() % 6);
        opt_target tgt = {.nthreads = 2, .vec_bytes = vecs[next_u64() % 4]};
        if (!run_with_opts(y, NULL, no, tgt, got, (size_t)n * 4, desc, sizeof desc)) {
          test_fail(__FILE__, __LINE__, "%s: %s", kc->name, desc);
          continue;
        }
        if (!check_close_f32(desc, got, want, n, 1e-5, 1e-4, __FILE__, __LINE__)) break;
      }
    }
    free(want);
    free(got);
    tg_scope_end();
  }
  int nlists = lists * (int)(sizeof cases / sizeof *cases);
  CHECK(applied_total >= nlists && vector_kernels >= nlists / 20 + 1, "only %d actions applied and %d vector kernels in %d lists",
        applied_total, vector_kernels, nlists);
  if (tg_debug_level() >= 1) fprintf(stderr, "  %d actions applied, %d vector kernels, %d lists\n", applied_total, vector_kernels, nlists);
}

static bool refused(kernel_state *ks, opt o, const char *reason_part) {
  char why[160];
  bool applied = apply_opt(ks, o, why);
  if (applied) test_fail(__FILE__, __LINE__, "%s(%d,%lld) applied, expected a refusal", opt_name(o.op), o.axis, (long long)o.arg);
  else if (!strstr(why, reason_part)) test_fail(__FILE__, __LINE__, "reason '%s' lacks '%s'", why, reason_part);
  return !applied;
}

TEST(test_opt_actions_refused_with_a_reason) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t sa[2] = {24, 40}, sb[2] = {40, 48};
  tg_tensor *a = rand_t(2, sa), *b = rand_t(2, sb), *y = tg_matmul(a, b);
  CHECK_T(y);
  schedule s;
  if (schedule_create(1, &y->u, &s) != TG_OK) { test_fail(__FILE__, __LINE__, "%s", tg_error()); tg_scope_end(); return; }
  kernel_state ks;
  ks_init(&ks, s.kernels[0].ast, (opt_target){.nthreads = 2, .vec_bytes = 64});
  refused(&ks, (opt){OPT_LOCAL, 0, 4}, "GPU");
  refused(&ks, (opt){OPT_GROUP, 0, 4}, "GPU");
  refused(&ks, (opt){OPT_GROUPTOP, 0, 16}, "GPU");
  refused(&ks, (opt){OPT_UPCAST, 0, 5}, "not a multiple");
  refused(&ks, (opt){OPT_UPCAST, 7, 2}, "out of range");
  refused(&ks, (opt){OPT_UNROLL, 0, 128}, "more than 64");
  refused(&ks, (opt){OPT_PADTO, 0, 8}, "already a multiple");
  refused(&ks, (opt){OPT_THREAD, 0, 3}, "the pool has 2");
  refused(&ks, (opt){OPT_PACK, 0, 0}, "no load");
  refused(&ks, (opt){OPT_PACK, 0, 2}, "arg 2");
  char why[160];
  CHECK(apply_opt(&ks, (opt){OPT_THREAD, 0, 2}, why), "THREAD refused: %s", why);
  refused(&ks, (opt){OPT_THREAD, 1, 2}, "already has a THREAD");
  refused(&ks, (opt){OPT_SWAP, 0, 1}, "THREAD axis stays outermost");
  CHECK(apply_opt(&ks, (opt){OPT_UPCAST, 1, 16}, why), "UPCAST refused: %s", why);
  CHECK(apply_opt(&ks, (opt){OPT_PADTO, 2, 16}, why), "PADTO of the reduce refused: %s", why);
  CHECK(ks.napplied == 3, "%d actions recorded", ks.napplied);
  kernel_state k2;
  ks_init(&k2, s.kernels[0].ast, (opt_target){.nthreads = 1, .vec_bytes = 64});
  CHECK(apply_opt(&k2, (opt){OPT_PACK, 1, 0}, why), "PACK refused: %s", why);
  refused(&k2, (opt){OPT_UPCAST, 0, 2}, "PACK must be the last");
  schedule_free(&s);
  tg_scope_end();
}

/* A random-number kernel has about 560 operations per element (the counter-based generator's rounds): BEAM's
 * UPCAST(0,16) then UPCAST(1,32) would expand it into 512 copies, 290000 lines of C that gcc compiled for minutes
 * in 3 GB. The second action is refused for the size of the expanded kernel; the first, 16 copies, applies */
TEST(test_opt_upcast_refused_when_the_expanded_kernel_is_too_big) {
  REQUIRE_CPU();
  tg_scope_begin();
  tg_tensor *y = tg_randn(TG_FLOAT32, 2, (int64_t[]){64, 64});
  CHECK_T(y);
  schedule s;
  if (schedule_create(1, &y->u, &s) != TG_OK) { test_fail(__FILE__, __LINE__, "%s", tg_error()); tg_scope_end(); return; }
  kernel_state ks;
  CHECK(ks_init(&ks, decompose_dtypes(s.kernels[s.nkernels - 1].ast, true), (opt_target){.nthreads = 2, .vec_bytes = 64}),
        "ks_init");
  char why[160];
  axis_info ax[KS_MAX_AXES];
  int nout, nred;
  ks_axes(&ks, ax, &nout, &nred);
  CHECK(nout >= 1 && ax[nout - 1].size % 16 == 0, "the kernel's last output loop: %lld", nout ? (long long)ax[nout - 1].size : -1LL);
  CHECK(apply_opt(&ks, (opt){OPT_UPCAST, nout - 1, 16}, why), "UPCAST by 16 refused: %s", why);
  ks_axes(&ks, ax, &nout, &nred);
  int other = -1;
  for (int i = 0; i < nout && other < 0; i++)
    if (ax[i].type == AX_GLOBAL && ax[i].size % 32 == 0) other = i;
  CHECK(other >= 0, "no other output loop of a multiple of 32");
  if (other >= 0) refused(&ks, (opt){OPT_UPCAST, other, 32}, "once expanded");
  schedule_free(&s);
  tg_scope_end();
}

/* the source the heuristic gives a kernel */
TEST(test_opt_heuristic_matmul_is_a_vector_register_tile_with_a_packed_panel) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t sa[2] = {64, 128}, sb[2] = {128, 256};
  tg_tensor *y = tg_matmul(rand_t(2, sa), rand_t(2, sb));
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 64, &info);
  CHECK(src, "no source: %s", tg_error());
  if (src) {
    CHECK(strstr(src, "tg_float_v acc15"), "expected 16 vector accumulators:\n%s", src);
    CHECK(!strstr(src, "acc16"), "more than 16 accumulators");
    CHECK(strstr(src, "*(const tg_float_v*)(local0+"), "expected aligned vector loads from the packed panel:\n%s", src);
    CHECK(strstr(info.opts, "THREAD") && strstr(info.opts, "PACK"), "opts %s", info.opts);
  }
  free(src);
  tg_scope_end();
}

TEST(test_opt_heuristic_matmul_with_b_transposed_packs_a_transposed_panel) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t sa[2] = {64, 128}, sb[2] = {256, 128};
  int perm[2] = {1, 0};
  tg_tensor *a = rand_t(2, sa), *b = rand_t(2, sb), *y = tg_matmul(a, tg_permute(b, 2, perm));
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 64, &info);
  CHECK(src && strstr(info.opts, "PACK(1,1)") && strstr(src, "*(const tg_float_v*)(local0+"), "opts %s:\n%s", info.opts,
        src ? src : tg_error());
  free(src);
  float ha[64 * 128], hb[256 * 128], got[64 * 256];
  if (tg_to_host(a, ha, sizeof ha) == TG_OK && tg_to_host(b, hb, sizeof hb) == TG_OK && tg_to_host(y, got, sizeof got) == TG_OK) {
    float want[64 * 256];
    for (int i = 0; i < 64; i++)
      for (int j = 0; j < 256; j++) {
        double r = 0;
        for (int k = 0; k < 128; k++) r += (double)ha[i * 128 + k] * hb[j * 128 + k];
        want[i * 256 + j] = (float)r;
      }
    check_close_f32("a @ b.T", got, want, 64 * 256, 1e-5, 1e-4, __FILE__, __LINE__);
  } else {
    test_fail(__FILE__, __LINE__, "%s", tg_error());
  }
  tg_scope_end();
}

TEST(test_opt_heuristic_elementwise_and_sum_are_vector_code) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t s1[1] = {4096}, s2[2] = {64, 256};
  tg_tensor *a = rand_t(1, s1), *b = rand_t(1, s1), *x = rand_t(2, s2);
  int ax = 1;
  tg_tensor *e = tg_mul_scalar(tg_relu(tg_add(tg_mul(a, b), a)), 0.5), *r = tg_sum(x, 1, &ax, false);
  CHECK_T(e);
  CHECK_T(r);
  kernel_info info;
  char *se = heuristic_source(e, 64, &info), *sr = heuristic_source(r, 64, &info);
  CHECK(se && strstr(se, "*(tg_float_vu*)(data0+"), "elementwise: no vector store:\n%s", se ? se : tg_error());
  CHECK(sr && strstr(sr, "tg_float_v acc0") && strstr(sr, "red"), "sum: no vector accumulator reduced across lanes:\n%s",
        sr ? sr : tg_error());
  CHECK(se && !strstr(se, "for (int l_"), "elementwise has a per-lane loop:\n%s", se ? se : "");
  free(se);
  free(sr);
  tg_scope_end();
}

/* a 64x64 matmul of random inputs scheduled into s (one kernel); false when that fails */
static bool matmul64_schedule(schedule *s) {
  int64_t sa[2] = {64, 64};
  tg_tensor *y = tg_matmul(rand_t(2, sa), rand_t(2, sa));
  CHECK(y, "matmul: %s", tg_error());
  return y && schedule_create(1, &y->u, s) == TG_OK;
}

TEST(test_opt_noopt_turns_the_heuristic_off) {
  REQUIRE_CPU();
  tg_scope_begin();
  schedule s;
  if (!matmul64_schedule(&s)) { tg_scope_end(); return; }
  const char *old = getenv("NOOPT");
  setenv("NOOPT", "1", 1);
  env_reload();
  kernel_info info;
  uop *a = codegen_optimize(s.kernels[0].ast, 2, &info);
  CHECK(a && !strstr(info.opts, "UPCAST") && !info.lane, "NOOPT=1 applied %s", info.opts);
  unsetenv("NOOPT");
  env_reload();
  a = codegen_optimize(s.kernels[0].ast, 2, &info);
  CHECK(a && strstr(info.opts, "UPCAST"), "the heuristic applied only '%s'", info.opts);
  if (old) setenv("NOOPT", old, 1);
  env_reload();
  schedule_free(&s);
  tg_scope_end();
}

static void mark_held_ast(void *ctx) { uop_mark(*(uop **)ctx); }

TEST(test_opt_beam_finds_a_correct_kernel_and_caches_it_on_disk) {
  REQUIRE_CPU();
  char dir[] = "/tmp/tgc-beam-test-XXXXXX";
  if (!mkdtemp(dir)) { test_fail(__FILE__, __LINE__, "mkdtemp failed"); return; }
  compile_cache_set_dir(dir);
  setenv("TG_BEAM_LIMIT", "3", 1);
  setenv("BEAM", "2", 1);
  env_reload();
  tg_scope_begin();
  int64_t sa[2] = {32, 64}, sb[2] = {64, 48};
  tg_tensor *a = rand_t(2, sa), *b = rand_t(2, sb), *y = tg_matmul(a, b);
  float ha[32 * 64], hb[64 * 48], got[32 * 48], want[32 * 48];
  bool ok = y && tg_to_host(a, ha, sizeof ha) == TG_OK && tg_to_host(b, hb, sizeof hb) == TG_OK;
  schedule s;
  bool scheduled = ok && schedule_create(1, &y->u, &s) == TG_OK;
  /* the AST is used after the realize below, which may collect the IR: a root keeps it */
  uop *ast = scheduled ? s.kernels[0].ast : NULL;
  bool rooted = scheduled && uop_gc_add_roots(mark_held_ast, &ast);
  ok = rooted && tg_to_host(y, got, sizeof got) == TG_OK;  /* realized with BEAM=2 */
  unsetenv("BEAM");
  env_reload();
  CHECK(ok, "BEAM=2 matmul failed: %s", tg_error());
  if (ok) {
    for (int i = 0; i < 32; i++)
      for (int j = 0; j < 48; j++) {
        double r = 0;
        for (int k = 0; k < 64; k++) r += (double)ha[i * 64 + k] * hb[k * 48 + j];
        want[i * 48 + j] = (float)r;
      }
    CHECK_CLOSE("beam matmul", got, want, 32 * 48);
    /* the same kernel again: the actions come from the disk, nothing is compiled */
    uint64_t before = runtime_get_counters().compiles;
    kernel_info info;
    uop *k = engine_beam(device_default(), decompose_dtypes(ast, true), 2, &info);
    CHECK(k, "a second search failed: %s", tg_error());
    CHECK(runtime_get_counters().compiles == before, "a second search compiled %llu kernels",
          (unsigned long long)(runtime_get_counters().compiles - before));
  }
  if (rooted) uop_gc_remove_roots(mark_held_ast, &ast);
  if (scheduled) schedule_free(&s);
  tg_scope_end();
  unsetenv("TG_BEAM_LIMIT");
  env_reload();
  compile_cache_set_dir(NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0, "could not remove %s", dir);
}

/* a device whose every run takes 20 ms: the search must stop at its time limit within a round, with the
 * heuristic's own actions (timed first) as the result when nothing else was timed */
static atomic_int slow_runs;
static void *slow_compile(void *ctx, const char *name, const char *src, const launch_shape *shape) {
  (void)ctx, (void)name, (void)src, (void)shape;
  return (void *)1;
}
static char *slow_render(void *ctx, const linear_program *lp, const kernel_info *info, launch_shape *shape) {
  (void)ctx, (void)shape;
  return render_c(info->name, lp, info);
}
static double slow_run(void *ctx, void *prog, int nthreads) {
  (void)ctx, (void)prog, (void)nthreads;
  atomic_fetch_add(&slow_runs, 1);
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return 0.020;
}
static void slow_release(void *ctx, void *prog) { (void)ctx, (void)prog; }

TEST(test_opt_beam_stops_at_its_time_limit_within_a_round) {
  REQUIRE_CPU();
  tg_scope_begin();
  schedule s;
  if (!matmul64_schedule(&s)) { tg_scope_end(); return; }
  kernel_state ks, h;
  CHECK(ks_init(&ks, decompose_dtypes(s.kernels[0].ast, true), (opt_target){.nthreads = 2, .vec_bytes = 64}), "ks_init");
  h = ks;
  hand_coded_optimizations(&h);
  beam_device d = {.render = slow_render, .compile = slow_compile, .run = slow_run, .release = slow_release, .key = "slow", .cache_dir = NULL};
  atomic_store(&slow_runs, 0);
  bool found = beam_search(&ks, 2, &d, 0.05);
  /* the first candidate's three runs take 60 ms, past the 50 ms limit: nothing else runs. Before, every seed
   * of the round was timed (the limit was looked at between rounds only) */
  CHECK(found && atomic_load(&slow_runs) == 3, "%d runs for a 50 ms limit (20 ms each)", atomic_load(&slow_runs));
  bool same = found && ks.napplied == h.napplied;
  for (int i = 0; same && i < h.napplied; i++)
    same = ks.applied[i].op == h.applied[i].op && ks.applied[i].axis == h.applied[i].axis && ks.applied[i].arg == h.applied[i].arg;
  char a[160], b[160];
  CHECK(same, "a search cut short chose %s, not the heuristic's %s", opts_str(&ks, a, sizeof a), opts_str(&h, b, sizeof b));
  schedule_free(&s);
  tg_scope_end();
}

/* a kernel the heuristic gives half vectors (no loop fills a whole one): BEAM keeps that width. It searched
 * with the full width, so the heuristic's UPCAST of 8 lanes became 8 scalar copies (MNIST's conv2 weight
 * gradient: 1015 ms under BEAM, 108 ms without) */
TEST(test_opt_beam_keeps_the_heuristics_half_vectors) {
  REQUIRE_CPU();
  tg_scope_begin();
  /* MNIST's conv2 at batch 8 with 24 channels: 32 take channel vectors (two vectors of 16) */
  int64_t sx[4] = {8, 24, 24, 24}, sw[4] = {24, 24, 5, 5};
  int64_t sy[4] = {8, 24, 20, 20};
  tg_tensor *x = rand_t(4, sx), *w = rand_t(4, sw), *dy = rand_t(4, sy);
  tg_tensor *gw = NULL, *loss = tg_sum(tg_mul(tg_conv2d(x, w, NULL, (tg_conv_opts){0}), dy), 0, NULL, false);
  CHECK(loss && tg_gradient(loss, 1, &w, &gw) == TG_OK, "gradient: %s", tg_error());
  schedule s;
  if (!gw || schedule_create(1, &gw->u, &s) != TG_OK) { tg_scope_end(); return; }
  int found = 0;
  for (int k = 0; k < s.nkernels; k++) {
    kernel_state ks, h;
    if (!ks_init(&ks, decompose_dtypes(s.kernels[k].ast, true), (opt_target){.nthreads = 2, .vec_bytes = 64})) continue;
    h = ks;
    hand_coded_optimizations(&h);
    if (h.tg.vec_bytes != 32) continue;  /* the kernels of this graph that take half vectors */
    found++;
    beam_device d = {.render = slow_render, .compile = slow_compile, .run = slow_run, .release = slow_release, .key = "slow", .cache_dir = NULL};
    bool ok = beam_search(&ks, 2, &d, 0.05);
    kernel_info info;
    uop *fin = ok ? codegen_finish(&ks, &info) : NULL;
    char a[160];
    CHECK(fin && ks.tg.vec_bytes == 32 && info.lane, "kernel %d: BEAM kept %s at %d vector bytes, %s", k,
          opts_str(&ks, a, sizeof a), ks.tg.vec_bytes, info.lane ? "vector code" : "scalar code");
  }
  CHECK(found, "no kernel of the conv weight gradient takes half vectors: the test tests nothing");
  schedule_free(&s);
  tg_scope_end();
}

/* a matmul whose broadcast product has more than 2^31 elements indexes in int64: still vector code */
TEST(test_opt_int64_index_matmul_is_vector_code_and_correct) {
  REQUIRE_CPU();
  tg_scope_begin();
  int64_t n = 1296, sa[2] = {1296, 1296};
  tg_tensor *a = rand_t(2, sa), *b = rand_t(2, sa), *y = tg_matmul(a, b);
  CHECK_T(y);
  kernel_info info;
  lower_narrow_indices = false;  /* its indices fit in int32: only unnarrowed is it int64 code */
  char *src = heuristic_source(y, 64, &info);
  lower_narrow_indices = true;
  CHECK(src && strstr(src, "long long ridx") && strstr(src, "tg_float_v acc"), "not int64 vector code:\n%.2000s",
        src ? src : tg_error());
  free(src);
  src = heuristic_source(y, 64, &info);
  CHECK(src && !strstr(src, "long long ridx") && strstr(src, "int ridx"), "indices not narrowed to int32:\n%.2000s",
        src ? src : tg_error());
  free(src);
  float *ha = malloc((size_t)(n * n) * 4), *hb = malloc((size_t)(n * n) * 4), *hy = malloc((size_t)(n * n) * 4);
  if (ha && hb && hy && tg_to_host(a, ha, (size_t)(n * n) * 4) == TG_OK && tg_to_host(b, hb, (size_t)(n * n) * 4) == TG_OK &&
      tg_to_host(y, hy, (size_t)(n * n) * 4) == TG_OK) {
    for (int s = 0; s < 64; s++) {
      int64_t i = (s * 337) % n, j = (s * 911 + 5) % n;
      double r = 0;
      for (int64_t k = 0; k < n; k++) r += (double)ha[i * n + k] * hb[k * n + j];
      CHECK(fabs(hy[i * n + j] - r) <= 1e-3 + 1e-4 * fabs(r), "y[%lld,%lld] = %g, want %g", (long long)i, (long long)j,
            hy[i * n + j], r);
    }
  } else {
    test_fail(__FILE__, __LINE__, "%s", tg_error());
  }
  free(ha);
  free(hb);
  free(hy);
  tg_scope_end();
}

/* found by the random-API driver: a row kernel (a reduce over the row, then the row's outputs) whose values
 * have no vector form (float16) keeps its lanes scalar, and copying the stores per lane before unrolling the
 * row's reduce left each lane its own extreme: argmin over float16 tanh of 24 values picked a lane's minimum */
TEST(test_opt_scalar_lanes_of_a_row_kernel_reduce_the_whole_row) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { N = 24 };
  const float v[N] = {3, 2, 3, 1.5, 1.5, -3, -1.5, 3.5, 3.5, -3.5, -1, -2, -1, 3, 4, 3.5, -3.5, -2.5, 1.5, -3.5, -1.5, 3.5, -2, -1};
  tg_tensor *x = tg_cast(tg_from_data(TG_FLOAT32, 3, (int64_t[]){3, 4, 2}, v, sizeof v), TG_FLOAT16);
  CHECK_T(x);
  CHECK(tg_realize(x) == TG_OK, "%s", tg_error());
  for (int k = 0; k < 2; k++) {  /* tanh of the values and of their negation: both extremes */
    tg_tensor *y = tg_cast(tg_tanh(k ? tg_neg(x) : x), TG_FLOAT32);
    float t[N];
    CHECK(tg_to_host(tg_contiguous(y), t, sizeof t) == TG_OK, "%s", tg_error());
    int mi = 0, ma = 0;
    for (int i = 1; i < N; i++) {
      if (t[i] < t[mi]) mi = i;
      if (t[i] > t[ma]) ma = i;
    }
    int32_t gmin = -1, gmax = -1;
    CHECK(tg_to_host(tg_argmin(y, TG_ALL, false), &gmin, 4) == TG_OK && tg_to_host(tg_argmax(y, TG_ALL, true), &gmax, 4) == TG_OK,
          "%s", tg_error());
    CHECK(gmin == mi, "case %d: argmin %d (value %g), want %d (%g)", k, gmin, gmin >= 0 && gmin < N ? t[gmin] : NAN, mi, t[mi]);
    CHECK(gmax == ma, "case %d: argmax %d (value %g), want %d (%g)", k, gmax, gmax >= 0 && gmax < N ? t[gmax] : NAN, ma, t[ma]);
  }
  tg_scope_end();
}

/* a panel packed into local memory is filled once and read by every accumulator after it: a kernel with several
 * upcast outputs stored it again before each (the weight gradient of MNIST's last layer: 300x slower) */
TEST(test_opt_packed_panel_is_filled_once) {
  REQUIRE_CPU();
  tg_scope_begin();
  /* x (512, 64, 3, 3) flattened after a permute, as a pooled activation feeding a linear layer */
  int64_t sx[4] = {512, 3, 3, 64}, sg[2] = {512, 10}, flat[2] = {512, 576};
  tg_tensor *x = tg_reshape(tg_permute(rand_t(4, sx), 4, (int[]){0, 3, 1, 2}), 2, flat);
  tg_tensor *g = rand_t(2, sg), *y = tg_matmul(tg_transpose(g, 0, 1), x);  /* the weight (10, 576) gradient */
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  int fills = 0;
  for (const char *p = src; p && (p = strstr(p, "local0[")) != NULL; p++)
    if (strncmp(strchr(p, ']'), "] = ", 4) == 0) fills++;
  CHECK(src && strstr(info.opts, "PACK") && fills == 1, "opts %s: the panel is stored %d times:\n%s", info.opts, fills,
        src ? src : tg_error());
  free(src);
  tg_scope_end();
}

/* 8- and 16-bit integers in vector lanes (expand.c, render/c.c: int32 lanes narrowed after what can leave the
 * type's range): x * 3 + 7, << 1, >> 2 in each small type (the shift right sees the wrapped sign), wrapping as C's conversion to the type does,
 * then as float32 times a scale per block of 32 along the reduce (a quantized weight's shape: the heuristic
 * unrolls the block, the values' loads become one widening vector load), against plain C */
TEST(test_opt_small_integers_are_vector_lanes_that_wrap) {
  REQUIRE_CPU();
  static const tg_dtype dts[4] = {TG_UINT8, TG_INT8, TG_UINT16, TG_INT16};
  enum { R = 8, K = 128 };
  for (int d = 0; d < 4; d++) {
    tg_scope_begin();
    tg_dtype dt = dts[d];
    int64_t raw[R * K];
    uint8_t bytes[R * K * 2];
    float sc[R * K / 32];
    for (int i = 0; i < R * K; i++) {
      uint64_t v = next_u64();
      raw[i] = dt == TG_UINT8 ? (int64_t)(uint8_t)v : dt == TG_INT8 ? (int64_t)(int8_t)v : dt == TG_UINT16 ? (int64_t)(uint16_t)v : (int64_t)(int16_t)v;
      if (tg_dtype_size(dt) == 1) bytes[i] = (uint8_t)v;
      else memcpy(bytes + 2 * i, &(uint16_t){(uint16_t)v}, 2);
    }
    for (int i = 0; i < R * K / 32; i++) sc[i] = frand();
    size_t nb = (size_t)(R * K) * tg_dtype_size(dt);
    tg_tensor *x = tg_from_data(dt, 2, (int64_t[]){R, K}, bytes, nb);
    tg_tensor *s = tg_from_data(TG_FLOAT32, 3, (int64_t[]){R, K / 32, 1}, sc, sizeof sc);
    tg_tensor *e = tg_rshift_scalar(tg_lshift_scalar(tg_add_scalar(tg_mul_scalar(x, 3), 7), 1), 2);
    tg_tensor *f = tg_mul(tg_cast(e, TG_FLOAT32), tg_reshape(tg_expand(s, 3, (int64_t[]){R, K / 32, 32}), 2, (int64_t[]){R, K}));
    int ax = 1;
    tg_tensor *y = tg_sum(f, 1, &ax, false);
    CHECK_T(y);
    kernel_info info;
    char *src = y ? heuristic_source(y, 64, &info) : NULL;
    CHECK(src && strstr(src, "tg_ld_") && strstr(src, "tg_float_v acc") && !strstr(src, "[l_] = "),
          "%s: not vector code with widening loads (opts %s):\n%s", tg_dtype_name(dt), info.opts, src ? src : tg_error());
    free(src);
    float got[R], want[R];
    for (int r = 0; r < R; r++) {
      double acc = 0;
      for (int k = 0; k < K; k++) {
        int64_t v = raw[r * K + k];
        v = v * 3 + 7;
        v = dt == TG_UINT8 ? (uint8_t)v : dt == TG_INT8 ? (int8_t)(uint8_t)v : dt == TG_UINT16 ? (uint16_t)v : (int16_t)(uint16_t)v;
        v = v * 2;  /* << 1, without shifting a negative value in C */
        v = dt == TG_UINT8 ? (uint8_t)v : dt == TG_INT8 ? (int8_t)(uint8_t)v : dt == TG_UINT16 ? (uint16_t)v : (int16_t)(uint16_t)v;
        v = v >> 2;
        acc += (double)(float)v * sc[r * (K / 32) + k / 32];
      }
      want[r] = (float)acc;
    }
    if (y && tg_to_host(y, got, sizeof got) == TG_OK) check_close_f32(tg_dtype_name(dt), got, want, R, 1e-5, 1e-5, __FILE__, __LINE__);
    else test_fail(__FILE__, __LINE__, "%s: %s", tg_dtype_name(dt), tg_error());
    tg_scope_end();
  }
}

/* A stride-2 convolution on 7 output pixels a row (ResNet's downsampling 3x3): no output row gives vector lanes,
 * so the heuristic vectorizes the output channels, packs the weight's panel with the channels innermost (a
 * transposing PACK) and tiles the row's pixels; the kernel reads that panel as contiguous vectors, and its values
 * equal a plain C convolution */
TEST(test_opt_strided_conv_takes_vectors_from_its_output_channels) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { CI = 32, CO = 32, H = 16, OH = 7 };
  int64_t sx[4] = {1, CI, H, H}, sw[4] = {CO, CI, 3, 3};
  tg_tensor *x = rand_t(4, sx), *w = rand_t(4, sw);
  tg_tensor *y = tg_conv2d(x, w, NULL, (tg_conv_opts){.stride = TG_INTS(2)});
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  CHECK(src && strstr(info.opts, "PACK(") && strstr(info.opts, ",1)") && strstr(src, "*(const tg_float_v*)(local0"),
        "opts %s: expected the weight packed channels-innermost and read as vectors:\n%s", src ? info.opts : "",
        src ? src : tg_error());
  free(src);
  static float hx[CI * H * H], hw[CO * CI * 9], got[CO * OH * OH], want[CO * OH * OH];
  CHECK(tg_to_host(x, hx, sizeof hx) == TG_OK && tg_to_host(w, hw, sizeof hw) == TG_OK &&
        tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int o = 0; o < CO; o++)
    for (int i = 0; i < OH; i++)
      for (int j = 0; j < OH; j++) {
        double s = 0;
        for (int c = 0; c < CI; c++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++)
              s += (double)hx[(c * H + 2 * i + ky) * H + 2 * j + kx] * hw[((o * CI + c) * 3 + ky) * 3 + kx];
        want[(o * OH + i) * OH + j] = (float)s;
      }
  check_close_f32("strided conv", got, want, CO * OH * OH, 1e-4, 1e-4, __FILE__, __LINE__);
  tg_scope_end();
}

/* A stride-1 3x3 convolution on 7 output pixels a row with a big weight (ResNet-18's last stage, here 128 -> 64
 * channels: 73728 values), its batchnorm-like epilogue and a residual add fused: its row would need padding to a
 * vector, so it takes channel vectors (the weight packed channels-innermost, read as vectors, no PADTO). So does
 * the same convolution with a small weight (16 -> 16 channels: one block of two vectors, the whole weight packed
 * before the output loops); on rows of 14 (padded to two vectors) it keeps the padded row. Values equal a plain C
 * convolution */
TEST(test_opt_big_weight_conv_on_short_rows_takes_channel_vectors) {
  REQUIRE_CPU();
  for (int cs = 0; cs < 3; cs++) {
    tg_scope_begin();
    /* big and small weights on 7x7: channel vectors; a big weight on 14x14 (the row pads to two vectors, and
     * 2 x 7 channel vectors would not fit the registers): the padded row */
    int big = cs != 1, CI = big ? 128 : 16, CO = big ? 64 : 16, H = cs == 2 ? 14 : 7;
    bool want_chv = cs != 2;
    tg_tensor *x = rand_t(4, (int64_t[]){1, CI, H, H}), *w = rand_t(4, (int64_t[]){CO, CI, 3, 3});
    tg_tensor *sc = rand_t(4, (int64_t[]){1, CO, 1, 1}), *res = rand_t(4, (int64_t[]){1, CO, H, H});
    tg_tensor *y = tg_relu(tg_add(tg_mul(tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)}), sc), res));
    CHECK_T(y);
    kernel_info info;
    char *src = heuristic_source(y, 32, &info);
    /* channel vectors unroll the window's last loop (kx) into the tile's accumulators: the channel loop innermost */
    bool chv = src && strstr(info.opts, "PACK(") && strstr(info.opts, ",1)") && !strstr(info.opts, "PADTO") &&
               strstr(info.opts, "UNROLL(") && strstr(src, "*(const tg_float_v*)(local0");
    bool padded = src && strstr(info.opts, "PADTO");
    CHECK(want_chv ? chv : padded, "%s weight, %dx%d: opts %s, want %s:\n%s", big ? "big" : "small", H, H,
          src ? info.opts : "", want_chv ? "channel vectors (PACK(..,1), no PADTO)" : "the padded row", src ? src : tg_error());
    free(src);
    float *hx = malloc(sizeof(float) * CI * H * H), *hw = malloc(sizeof(float) * CO * CI * 9);
    float *hs = malloc(sizeof(float) * CO), *hr = malloc(sizeof(float) * CO * H * H);
    float *got = malloc(sizeof(float) * CO * H * H), *want = malloc(sizeof(float) * CO * H * H);
    CHECK(tg_to_host(x, hx, sizeof(float) * CI * H * H) == TG_OK && tg_to_host(w, hw, sizeof(float) * CO * CI * 9) == TG_OK &&
          tg_to_host(sc, hs, sizeof(float) * CO) == TG_OK && tg_to_host(res, hr, sizeof(float) * CO * H * H) == TG_OK &&
          tg_to_host(y, got, sizeof(float) * CO * H * H) == TG_OK, "%s", tg_error());
    for (int o = 0; o < CO; o++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++) {
          double v = ref_conv3x3_at(hx, hw, CI, H, o, i, j) * hs[o] + hr[(o * H + i) * H + j];
          want[(o * H + i) * H + j] = v > 0 ? (float)v : 0;
        }
    check_close_f32(big ? "big-weight conv" : "small-weight conv", got, want, CO * H * H, 1e-4, 1e-4, __FILE__, __LINE__);
    free(hx); free(hw); free(hs); free(hr); free(got); free(want);
    tg_scope_end();
  }
}

/* A 3x3 convolution that also writes the next one's zero border (its output padded by 1: ResNet-18's convolutions
 * into a padded 16x16 or 58x58 image). On 14x14 the padded row of 16 is two vectors, but each tap's load is masked
 * at both ends of the row: the output channels take the lanes instead. On 20x20 the row of 22 has no tile that
 * fits the registers: it is padded to the tile (PADTO) with channel vectors, not to vectors with every load
 * masked. AVX2's 8 lanes; values equal a plain C convolution with a zero border */
TEST(test_opt_zero_border_conv_takes_channel_vectors) {
  REQUIRE_CPU();
  for (int cs = 0; cs < 2; cs++) {
    tg_scope_begin();
    int CI = 16, CO = 16, H = cs ? 20 : 14, P = H + 2;
    tg_tensor *x = rand_t(4, (int64_t[]){1, CI, H, H}), *w = rand_t(4, (int64_t[]){CO, CI, 3, 3});
    tg_tensor *c = tg_relu(tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)}));
    tg_tensor *y = tg_pad(c, 4, (int64_t[]){1, 1, 1, 1}, 0.0);
    CHECK_T(y);
    kernel_info info;
    char *src = heuristic_source(y, 32, &info);
    bool chv = src && strstr(info.opts, "PACK(") && strstr(info.opts, ",1)") && strstr(src, "*(const tg_float_v*)(local0");
    bool pad = src && strstr(info.opts, "PADTO");
    CHECK(chv && (cs ? pad : !pad), "%dx%d into %dx%d: opts %s, want channel vectors%s:\n%s", H, H, P, P,
          src ? info.opts : "", cs ? " on a row padded to the tile" : ", no PADTO", src ? src : tg_error());
    free(src);
    float *hx = malloc(sizeof(float) * CI * H * H), *hw = malloc(sizeof(float) * CO * CI * 9);
    float *got = malloc(sizeof(float) * CO * P * P), *want = malloc(sizeof(float) * CO * P * P);
    CHECK(hx && hw && got && want, "out of memory");
    CHECK(tg_to_host(x, hx, sizeof(float) * CI * H * H) == TG_OK && tg_to_host(w, hw, sizeof(float) * CO * CI * 9) == TG_OK &&
          tg_to_host(y, got, sizeof(float) * CO * P * P) == TG_OK, "%s", tg_error());
    for (int o = 0; o < CO; o++)
      for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
          double v = i == 0 || j == 0 || i == P - 1 || j == P - 1 ? 0 : ref_conv3x3_at(hx, hw, CI, H, o, i - 1, j - 1);
          want[(o * P + i) * P + j] = v > 0 ? (float)v : 0;
        }
    check_close_f32(cs ? "20x20 conv into 22x22" : "14x14 conv into 16x16", got, want, CO * P * P, 1e-4, 1e-4, __FILE__, __LINE__);
    free(hx); free(hw); free(got); free(want);
    tg_scope_end();
  }
}

/* A residual block's second convolution with its 1x1 stride-2 projection fused in (ResNet-18's first block of
 * a stage, here 7x7 from 14x14): each reduce's weight gets a panel of its own, channels innermost, read as
 * vectors; before, the projection's weight was read 16 lanes at a time from 16 rows of W (layer4's fused kernel
 * 1.68 -> 1.45 ms). Values equal a plain C convolution */
TEST(test_opt_fused_projection_packs_its_weight_too) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { CI = 32, CO = 64, H = 7, XH = 14 };
  tg_tensor *h = rand_t(4, (int64_t[]){1, CO, H, H}), *w1 = rand_t(4, (int64_t[]){CO, CO, 3, 3});
  tg_tensor *x = rand_t(4, (int64_t[]){1, CI, XH, XH}), *w2 = rand_t(4, (int64_t[]){CO, CI, 1, 1});
  tg_tensor *y = tg_relu(tg_add(tg_conv2d(h, w1, NULL, (tg_conv_opts){.padding = TG_INTS(1)}),
                                tg_conv2d(x, w2, NULL, (tg_conv_opts){.stride = TG_INTS(2)})));
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 64, &info);
  const char *second = src ? strstr(info.opts, "PACK(") : NULL;
  CHECK(second && strstr(second + 1, "PACK(") && strstr(src, "*(const tg_float_v*)(local0") &&
        strstr(src, "*(const tg_float_v*)(local1"), "want two panels read as vectors: opts %s\n%s",
        src ? info.opts : "", src ? src : tg_error());
  free(src);
  float *hh = malloc(sizeof(float) * CO * H * H), *hw1 = malloc(sizeof(float) * CO * CO * 9);
  float *hx = malloc(sizeof(float) * CI * XH * XH), *hw2 = malloc(sizeof(float) * CO * CI);
  float *got = malloc(sizeof(float) * CO * H * H), *want = malloc(sizeof(float) * CO * H * H);
  CHECK(tg_to_host(h, hh, sizeof(float) * CO * H * H) == TG_OK && tg_to_host(w1, hw1, sizeof(float) * CO * CO * 9) == TG_OK &&
        tg_to_host(x, hx, sizeof(float) * CI * XH * XH) == TG_OK && tg_to_host(w2, hw2, sizeof(float) * CO * CI) == TG_OK &&
        tg_to_host(y, got, sizeof(float) * CO * H * H) == TG_OK, "%s", tg_error());
  for (int o = 0; o < CO; o++)
    for (int i = 0; i < H; i++)
      for (int j = 0; j < H; j++) {
        double s = ref_conv3x3_at(hh, hw1, CO, H, o, i, j);
        for (int c = 0; c < CI; c++) s += (double)hx[(c * XH + 2 * i) * XH + 2 * j] * hw2[o * CI + c];
        want[(o * H + i) * H + j] = s > 0 ? (float)s : 0;
      }
  check_close_f32("conv + projection", got, want, CO * H * H, 1e-4, 1e-4, __FILE__, __LINE__);
  free(hh); free(hw1); free(hx); free(hw2); free(got); free(want);
  tg_scope_end();
}

/* the number of vector accumulators the kernel source declares */
static int count_accumulators(const char *src) {
  int n = 0;
  for (const char *p = src; (p = strstr(p, "tg_float_v acc")); p++) n++;
  return n;
}

/* A 3x3 convolution (32 -> 64 channels, 16x16, padding 1) gets a register tile that fits the registers: at most
 * 12 vector accumulators with AVX2's 16 registers (16 spilled two every step), 16 with AVX-512's 32. Values
 * equal a plain C convolution */
TEST(test_opt_conv_register_tile_fits_the_registers) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { CI = 32, CO = 64, H = 16 };
  tg_tensor *x = rand_t(4, (int64_t[]){1, CI, H, H}), *w = rand_t(4, (int64_t[]){CO, CI, 3, 3});
  tg_tensor *y = tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)});
  CHECK_T(y);
  for (int vb = 32; vb <= 64; vb *= 2) {
    kernel_info info;
    char *src = heuristic_source(y, vb, &info);
    int acc = src ? count_accumulators(src) : -1, max = vb == 32 ? 12 : 16;
    CHECK(acc >= 4 && acc <= max, "vec_bytes %d: %d vector accumulators, want 4 to %d (opts %s)", vb, acc, max,
          src ? info.opts : tg_error());
    free(src);
  }
  float *hx = malloc(sizeof(float) * CI * H * H), *hw = malloc(sizeof(float) * CO * CI * 9);
  float *got = malloc(sizeof(float) * CO * H * H), *want = malloc(sizeof(float) * CO * H * H);
  CHECK(tg_to_host(x, hx, sizeof(float) * CI * H * H) == TG_OK && tg_to_host(w, hw, sizeof(float) * CO * CI * 9) == TG_OK &&
        tg_to_host(y, got, sizeof(float) * CO * H * H) == TG_OK, "%s", tg_error());
  for (int o = 0; o < CO; o++)
    for (int i = 0; i < H; i++)
      for (int j = 0; j < H; j++) {
        want[(o * H + i) * H + j] = (float)ref_conv3x3_at(hx, hw, CI, H, o, i, j);
      }
  check_close_f32("conv 3x3", got, want, CO * H * H, 1e-4, 1e-4, __FILE__, __LINE__);
  free(hx); free(hw); free(got); free(want);
  tg_scope_end();
}

/* A 3x3 convolution of 512 input channels with AVX-512: two vectors of output channels (32) would make a weight
 * panel of 32 x 4608 floats, 590 KB, over CONV_PANEL_MAX_BYTES, so the channel block is one vector (16 channels,
 * 295 KB); with 256 input channels the two-vector panel (295 KB) fits and stays. Values (at this host's width)
 * equal a plain C convolution */
TEST(test_opt_conv_weight_panel_over_half_the_l2_takes_one_channel_vector) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { CI = 512, CO = 32, H = 7 };
  tg_tensor *x = rand_t(4, (int64_t[]){1, CI, H, H}), *w = rand_t(4, (int64_t[]){CO, CI, 3, 3});
  tg_tensor *y = tg_conv2d(x, w, NULL, (tg_conv_opts){.padding = TG_INTS(1)});
  tg_tensor *x2 = rand_t(4, (int64_t[]){1, CI / 2, H, H}), *w2 = rand_t(4, (int64_t[]){CO, CI / 2, 3, 3});
  tg_tensor *y2 = tg_conv2d(x2, w2, NULL, (tg_conv_opts){.padding = TG_INTS(1)});
  CHECK_T(y);
  CHECK_T(y2);
  for (int k = 0; k < 2; k++) {
    kernel_info info;
    char *src = heuristic_source(k ? y2 : y, 64, &info);
    const char *block = k ? "UPCAST(0,32)" : "UPCAST(0,16)";
    CHECK(src && strstr(info.opts, block) && strstr(info.opts, "PACK("), "%d channels in: opts %s, want %s and a PACK",
          k ? CI / 2 : CI, src ? info.opts : tg_error(), block);
    free(src);
  }
  float *hx = malloc(sizeof(float) * CI * H * H), *hw = malloc(sizeof(float) * CO * CI * 9);
  float *got = malloc(sizeof(float) * CO * H * H), *want = malloc(sizeof(float) * CO * H * H);
  CHECK(hx && hw && got && want, "out of memory");
  if (hx && hw && got && want) {
    CHECK(tg_to_host(x, hx, sizeof(float) * CI * H * H) == TG_OK && tg_to_host(w, hw, sizeof(float) * CO * CI * 9) == TG_OK &&
          tg_to_host(y, got, sizeof(float) * CO * H * H) == TG_OK, "%s", tg_error());
    for (int o = 0; o < CO; o++)
      for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++) want[(o * H + i) * H + j] = (float)ref_conv3x3_at(hx, hw, CI, H, o, i, j);
    check_close_f32("conv 3x3, 512 channels in", got, want, CO * H * H, 1e-4, 1e-4, __FILE__, __LINE__);
  }
  free(hx); free(hw); free(got); free(want);
  tg_scope_end();
}

/* A 7x7 stride-2 convolution of a 3-channel image (ResNet's stem, here 16 output channels on 32x32): on two
 * threads it keeps a packed panel (PACK) as on one thread; once the threads split the tile's channels, the PACK
 * failed and the kernel took the reduce-vector form (kx padded to 8 and unrolled as the vector), 4x slower.
 * (Its lanes are now the output channels, heuristic.c's strided_window, with the 7 taps unrolled into the tile:
 * an UNROLL of 7, not a padded one.) Values equal a plain C convolution */
TEST(test_opt_stem_conv_on_two_threads_keeps_its_packed_tile) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { CI = 3, CO = 16, H = 64, OH = 32 };
  tg_tensor *x = rand_t(4, (int64_t[]){1, CI, H, H}), *w = rand_t(4, (int64_t[]){CO, CI, 7, 7});
  tg_tensor *y = tg_conv2d(x, w, NULL, (tg_conv_opts){.stride = TG_INTS(2), .padding = TG_INTS(3)});
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  CHECK(src && strstr(info.opts, "PACK(") && strstr(info.opts, "THREAD(") && !strstr(info.opts, "PADTO"),
        "opts %s: want a packed tile split across threads, no padded reduce-vector UNROLL", src ? info.opts : tg_error());
  free(src);
  float *hx = malloc(sizeof(float) * CI * H * H), *hw = malloc(sizeof(float) * CO * CI * 49);
  float *got = malloc(sizeof(float) * CO * OH * OH), *want = malloc(sizeof(float) * CO * OH * OH);
  CHECK(tg_to_host(x, hx, sizeof(float) * CI * H * H) == TG_OK && tg_to_host(w, hw, sizeof(float) * CO * CI * 49) == TG_OK &&
        tg_to_host(y, got, sizeof(float) * CO * OH * OH) == TG_OK, "%s", tg_error());
  for (int o = 0; o < CO; o++)
    for (int i = 0; i < OH; i++)
      for (int j = 0; j < OH; j++) {
        double s = 0;
        for (int c = 0; c < CI; c++)
          for (int ky = 0; ky < 7; ky++)
            for (int kx = 0; kx < 7; kx++) {
              int yy = 2 * i + ky - 3, xx = 2 * j + kx - 3;
              if (yy >= 0 && yy < H && xx >= 0 && xx < H) s += (double)hx[(c * H + yy) * H + xx] * hw[((o * CI + c) * 7 + ky) * 7 + kx];
            }
        want[(o * OH + i) * OH + j] = (float)s;
      }
  check_close_f32("stem conv", got, want, CO * OH * OH, 1e-4, 1e-4, __FILE__, __LINE__);
  free(hx); free(hw); free(got); free(want);
  tg_scope_end();
}

/* attention's heads merged back into the width: (H, T, D) permuted to (T, H, D), reshaped to (T, H*D), times W.
 * The reduce loop over H*D is read as r // D and r % D; the kernel splits it into H and D loops. Against a plain
 * C matmul of the same values. */
TEST(test_opt_reduce_over_merged_heads_splits_and_is_correct) {
  REQUIRE_CPU();
  enum { H = 4, T = 24, D = 16, N = 40 };
  tg_scope_begin();
  tg_tensor *a = rand_t(3, (int64_t[]){H, T, D}), *w = rand_t(2, (int64_t[]){H * D, N});
  int perm[3] = {1, 0, 2};
  tg_tensor *y = tg_matmul(tg_reshape(tg_permute(a, 3, perm), 2, (int64_t[]){T, H * D}), w);
  static float ha[H * T * D], hw[H * D * N], got[T * N], want[T * N];
  CHECK(y && tg_to_host(a, ha, sizeof ha) == TG_OK && tg_to_host(w, hw, sizeof hw) == TG_OK &&
        tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int t = 0; t < T; t++)
    for (int n = 0; n < N; n++) {
      double s = 0;
      for (int k = 0; k < H * D; k++) s += (double)ha[(k / D) * T * D + t * D + k % D] * hw[k * N + n];
      want[t * N + n] = (float)s;
    }
  check_close_f32("merged heads matmul", got, want, T * N, 1e-5, 1e-4, __FILE__, __LINE__);
  tg_scope_end();
}

/* a grouped 1x1 convolution after a channel shuffle (ShuffleNet: (N, g, C/g, H, W) transposed to (N, C/g, g, H,
 * W)): the output channel loop is read through co // (C/g) (the group) by the input, and split into (group,
 * channel) so the tile reuses the input across channels. Against a plain C convolution of the same values. */
TEST(test_opt_grouped_conv_after_a_channel_shuffle_is_correct) {
  REQUIRE_CPU();
  enum { N = 2, C = 32, G = 4, H = 6, W = 7, CO = 48 };
  tg_scope_begin();
  tg_tensor *x = rand_t(4, (int64_t[]){N, C, H, W}), *w = rand_t(4, (int64_t[]){CO, C / G, 1, 1});
  tg_tensor *s = tg_reshape(tg_transpose(tg_reshape(x, 5, (int64_t[]){N, G, C / G, H, W}), 1, 2), 4, (int64_t[]){N, C, H, W});
  tg_tensor *y = tg_conv2d(s, w, NULL, (tg_conv_opts){.groups = G});
  static float hx[N * C * H * W], hw[CO * (C / G)], got[N * CO * H * W], want[N * CO * H * W];
  CHECK(y && tg_to_host(x, hx, sizeof hx) == TG_OK && tg_to_host(w, hw, sizeof hw) == TG_OK &&
        tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int n = 0; n < N; n++)
    for (int co = 0; co < CO; co++)
      for (int p = 0; p < H * W; p++) {
        double acc = 0;
        int g = co / (CO / G);
        for (int ci = 0; ci < C / G; ci++) {
          int sc = g * (C / G) + ci;           /* channel of the shuffled input */
          int xc = (sc % G) * (C / G) + sc / G; /* where the shuffle took it from */
          acc += (double)hx[(n * C + xc) * H * W + p] * hw[co * (C / G) + ci];
        }
        want[(n * CO + co) * H * W + p] = (float)acc;
      }
  check_close_f32("shuffled grouped conv", got, want, N * CO * H * W, 1e-5, 1e-4, __FILE__, __LINE__);
  tg_scope_end();
}

/* ResNet's 3x3 stride-2 max pool with padding 1: its loads are strided (no vector lanes) and nothing is reused
 * across an output loop (no tile), so the heuristic makes several outputs of the pixel loop independent chains
 * (an UPCAST); a row that is no multiple of the vector (28 pooled pixels, 8 lanes) is not padded, since it gets no
 * lanes (masked loads and stores for nothing: ResNet's pool, 56 padded to 64 on AVX-512, took 1.7 ms, unpadded
 * 0.55). Values, padding included, equal a plain C max */
TEST(test_opt_max_pool_runs_independent_chains) {
  REQUIRE_CPU();
  enum { C = 4, HMAX = 56 };
  for (int H = 32; H <= HMAX; H += HMAX - 32) {
    tg_scope_begin();
    int OH = H / 2;
    tg_tensor *x = rand_t(4, (int64_t[]){1, C, H, H});
    tg_tensor *y = tg_max_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .padding = TG_INTS(1)});
    CHECK_T(y);
    kernel_info info;
    char *src = heuristic_source(y, 32, &info);
    CHECK(src && strstr(info.opts, "UPCAST(") && !strstr(info.opts, "PADTO") && strstr(src, "acc3"),
          "rows of %d: opts %s: want independent accumulators, no padding\n%s", OH, src ? info.opts : "", src ? src : tg_error());
    free(src);
    static float hx[C * HMAX * HMAX], got[C * HMAX * HMAX / 4], want[C * HMAX * HMAX / 4];
    CHECK(tg_to_host(x, hx, sizeof(float) * C * H * H) == TG_OK && tg_to_host(y, got, sizeof(float) * C * OH * OH) == TG_OK,
          "%s", tg_error());
    ref_max_pool_3s2p1(hx, C, H, want);
    int bad = 0;
    for (int c = 0; c < C; c++)
      for (int i = 0; i < OH; i++)
        for (int j = 0; j < OH; j++) {
          float g = got[(c * OH + i) * OH + j], m = want[(c * OH + i) * OH + j];
          if (g != m && bad++ < 3) CHECK(0, "rows of %d: y[%d,%d,%d] = %g, want %g", OH, c, i, j, g, m);
        }
    tg_scope_end();
  }
}

/* ResNet's max pool on AVX-512: the window's row (kx, 3 of 4 lanes) is the vector and ky is left, one chain
 * of vector maxes per output; outputs of the row loop run as independent chains (UPCAST on top of the lanes
 * on the reduce), also after the constant true of its padding mask was realized elsewhere; the values equal a
 * plain C max pool */
TEST(test_opt_max_pool_on_window_vectors_runs_independent_chains) {
  REQUIRE_CPU();
  enum { C = 6, H = 48, OH = 24 };
  tg_scope_begin();
  /* a realized constant true (the padding mask's) is no buffer the pool would load: realize.c constant_view */
  CHECK(tg_item(tg_scalar(TG_BOOL, 1)) == 1 && tg_item(tg_full(TG_BOOL, 2, (int64_t[]){1, 1}, 1)) == 1, "%s", tg_error());
  tg_tensor *x = rand_t(4, (int64_t[]){1, C, H, H});
  tg_tensor *y = tg_max_pool2d(x, (tg_pool_opts){.kernel = TG_INTS(3), .stride = TG_INTS(2), .padding = TG_INTS(1)});
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 16, &info);
  CHECK(src && strstr(info.opts, "UNROLL(") && strstr(info.opts, "UPCAST(") && strstr(src, "acc3"),
        "opts %s: want lanes on the window and independent accumulators\n%s", src ? info.opts : "", src ? src : tg_error());
  free(src);
  static float hx[C * H * H], got[C * OH * OH], want[C * OH * OH];
  CHECK(tg_to_host(x, hx, sizeof hx) == TG_OK && tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  ref_max_pool_3s2p1(hx, C, H, want);
  CHECK_CLOSE("max pool", got, want, C * OH * OH);
  tg_scope_end();
}

/* A concat whose rows are padded to vectors (28 pixels: a vector and a masked one): each input's loads are gated
 * by its channel range AND the padded lanes. Where the channel test is false the address lies outside that
 * input, so the masked load must not run at all (render/c.c gate_scalar): the values equal plain C. One row per
 * channel: rows of a plane (H > 1) would share one loop of H * W (lower.c lower_merged), a multiple of 8 */
TEST(test_opt_concat_of_padded_rows_reads_each_input_only_in_its_range) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { CA = 3, CB = 2, H = 1, W = 28 };
  tg_tensor *a = rand_t(4, (int64_t[]){1, CA, H, W}), *b = rand_t(4, (int64_t[]){1, CB, H, W});
  tg_tensor *y = tg_relu(tg_cat(2, (tg_tensor *[]){a, b}, 1));
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 32, &info);
  CHECK(src && strstr(info.opts, "PADTO") && strstr(src, "tg_mload_float"), "opts %s: want padded rows, masked loads\n%s",
        src ? info.opts : "", src ? src : tg_error());
  free(src);
  static float ha[CA * H * W], hb[CB * H * W], got[(CA + CB) * H * W];
  CHECK(tg_to_host(a, ha, sizeof ha) == TG_OK && tg_to_host(b, hb, sizeof hb) == TG_OK &&
        tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  int bad = 0;
  for (int i = 0; i < (CA + CB) * H * W; i++) {
    float v = i < CA * H * W ? ha[i] : hb[i - CA * H * W], want = v > 0 ? v : 0;
    if (got[i] != want && bad++ < 3) CHECK(0, "y[%d] = %g, want %g", i, got[i], want);
  }
  tg_scope_end();
}

/* 2x nearest upsampling, as max pooling's gradient spreads a window's gradient (x >= max, times the gradient):
 * along a vector of lanes over the output row, the small tensors' index is base + lane/2, so the heuristic vectorizes the row (rows of 20: 4 lanes
 * on AVX-512, no padding) and the code generator loads those 2 values once and repeats each (render/c.c,
 * __builtin_shufflevector) instead of gathering lane by lane. The values equal plain C */
TEST(test_opt_upsampled_operand_loads_runs_of_values) {
  REQUIRE_CPU();
  tg_scope_begin();
  enum { C = 3, H = 20, OH = H / 2 };
  tg_tensor *x = rand_t(4, (int64_t[]){1, C, H, H}), *m = rand_t(4, (int64_t[]){1, C, OH, OH});
  tg_tensor *g = rand_t(4, (int64_t[]){1, C, OH, OH});
  const int64_t split[] = {1, C, OH, 1, OH, 1}, wide[] = {1, C, OH, 2, OH, 2}, full[] = {1, C, H, H};
#define UP(t) tg_reshape(tg_expand(tg_reshape(t, 6, split), 6, wide), 4, full)
  tg_tensor *y = tg_add(tg_mul(tg_cast(tg_ge(x, UP(m)), TG_FLOAT32), UP(g)), x);
#undef UP
  CHECK_T(y);
  kernel_info info;
  char *src = heuristic_source(y, 64, &info);
  CHECK(src && info.lanes == 4 && !strstr(info.opts, "PADTO") && strstr(src, "__builtin_shufflevector"),
        "opts %s, %d lanes: want 4 lanes of repeated loads, no padding\n%s", src ? info.opts : "", info.lanes,
        src ? src : tg_error());
  free(src);
  static float hx[C * H * H], hm[C * OH * OH], hg[C * OH * OH], got[C * H * H];
  CHECK(tg_to_host(x, hx, sizeof hx) == TG_OK && tg_to_host(m, hm, sizeof hm) == TG_OK &&
        tg_to_host(g, hg, sizeof hg) == TG_OK &&
        tg_to_host(y, got, sizeof got) == TG_OK, "%s", tg_error());
  int bad = 0;
  for (int c = 0; c < C; c++)
    for (int i = 0; i < H; i++)
      for (int j = 0; j < H; j++) {
        int k = (c * H + i) * H + j;
        int s = (c * OH + i / 2) * OH + j / 2;
        float want = (hx[k] >= hm[s] ? hg[s] : 0.0f) + hx[k];
        if (got[k] != want && bad++ < 3) CHECK(0, "y[%d,%d,%d] = %g, want %g", c, i, j, got[k], want);
      }
  tg_scope_end();
}
