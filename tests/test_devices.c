/* test_devices.c — tensors across devices: tg_device names where a value lives, tg_to copies it to another
 * device, a kernel refuses a tensor of another device naming both, device names are parsed strictly, and the
 * float16/bfloat16 conversions GPU kernels use (cstyle.c's helpers, compiled here as C) round as the host's do. */
#include <stdlib.h>

#include "codegen/opt.h"
#include "render/cstyle.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"
#include "runtime/device.h"
#include "uop/env.h"
#include "test.h"

/* a second device to move tensors to: the OpenCL one when the suite runs on the CPU and PoCL is there, else the
 * CPU; NULL when there is none */
static const char *other_device(void) {
  const char *cur = test_device_name();
  if (strcmp(cur, "CPU")) return "CPU";
  if (device_cl(0)) return "CL";
  tg_error_clear();
  return NULL;
}

TEST(test_devices_names_are_parsed_strictly) {
  CHECK(device_get("CPU") == device_cpu() && device_get("cpu") == device_cpu() && device_get("CPU:0") == device_cpu(),
        "CPU, cpu and CPU:0 are the CPU");
  static const char *bad[] = {"", "CPU:8", "CPU:9", "GPU", "CL:", "CL:x", "CUDA:-1", "CUDA:12345", "METAL", ":0", NULL};
  for (int i = 0; bad[i]; i++) {
    tg_error_clear();
    CHECK(!device_get(bad[i]) && tg_error_status() != TG_OK && tg_error()[0], "'%s' is refused with a message", bad[i]);
  }
  /* a device whose driver is missing says what to install (this machine has no NVIDIA driver) */
  tg_error_clear();
  if (!device_get("CUDA"))
    CHECK(tg_error_status() == TG_ERR_DEVICE && strstr(tg_error(), "libcuda"), "CUDA without a driver: %s", tg_error());
}

TEST(test_devices_tg_device_and_tg_to_copy_values) {
  float v[6] = {1, -2, 3.5f, 4, 5, -6};
  tg_tensor *a = tg_from_data(TG_FLOAT32, 2, (int64_t[]){2, 3}, v, sizeof v);
  CHECK_T(a);
  CHECK(a && !strcmp(tg_device(a), test_device_name()), "a lives on %s, not %s", tg_device(a), test_device_name());
  /* a lazy value: computed on the default device, then copied */
  tg_tensor *lazy = tg_mul_scalar(a, 2.0);
  const char *to = other_device();
  tg_tensor *same = tg_to(lazy, test_device_name());
  CHECK_T(same);
  float got[6];
  CHECK(same && tg_to_host(same, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int i = 0; i < 6; i++) CHECK(got[i] == 2 * v[i], "same device [%d] = %g", i, got[i]);
  if (!to) {
    test_skip("no second device here (the CPU suite needs PoCL for one)");
  } else {
    tg_tensor *b = tg_to(lazy, to);
    CHECK_T(b);
    CHECK(b && !strcmp(tg_device(b), to), "b lives on %s, not %s", b ? tg_device(b) : "?", to);
    memset(got, 0, sizeof got);
    CHECK(b && tg_to_host(b, got, sizeof got) == TG_OK, "%s", tg_error());
    for (int i = 0; i < 6; i++) CHECK(got[i] == 2 * v[i], "on %s [%d] = %g", to, i, got[i]);
    /* a kernel on the default device refuses it, naming both devices; moved back it works */
    tg_tensor *sum = tg_add(a, b);
    tg_error_clear();
    CHECK(sum && tg_realize(sum) != TG_OK && strstr(tg_error(), to) && strstr(tg_error(), test_device_name()),
          "an op across devices: %s", tg_error());
    tg_tensor *back = b ? tg_to(b, test_device_name()) : NULL, *sum2 = back ? tg_add(a, back) : NULL;
    memset(got, 0, sizeof got);
    CHECK(sum2 && tg_to_host(sum2, got, sizeof got) == TG_OK, "%s", tg_error());
    for (int i = 0; i < 6; i++) CHECK(got[i] == 3 * v[i], "moved back [%d] = %g", i, got[i]);
    tg_free(sum);
    tg_free(sum2);
    tg_free(back);
    tg_free(b);
  }
  tg_error_clear();
  CHECK(!tg_to(a, "NOPE") && tg_error_status() == TG_ERR_ARG && strstr(tg_error(), "NOPE"), "%s", tg_error());
  CHECK(!tg_to(NULL, "CPU") && !tg_device(NULL), "NULL tensor");
  tg_free(same);
  tg_free(lazy);
  tg_free(a);
}

/* the conversion helpers every GPU dialect includes, compiled as C here */
#define TG_INLINE static inline
#define TG_F2U(f) (((union { float f; unsigned int u; }){.f = (f)}).u)
#define TG_U2F(b) (((union { unsigned int u; float f; }){.u = (b)}).f)
TG_INLINE float tg_h2f(unsigned short h);
TG_INLINE unsigned short tg_f2h(float f);
TG_INLINE float tg_bf2f(unsigned short b);
TG_INLINE unsigned short tg_f2bf(float f);
/* the text of cstyle_half_helpers / cstyle_bf16_helpers, as code: kept in step by the test below */
TG_INLINE float tg_h2f(unsigned short h) { unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = ((unsigned int)h >> 10) & 0x1fu, m = h & 0x3ffu; if (e == 0x1fu) return TG_U2F(s | 0x7f800000u | (m << 13)); if (e) return TG_U2F(s | ((e + 112u) << 23) | (m << 13)); float f = (float)m * 5.9604644775390625e-8f; return s ? -f : f; }
TG_INLINE unsigned short tg_f2h(float f) { unsigned int x = TG_F2U(f), s = (x >> 16) & 0x8000u, a = x & 0x7fffffffu; if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u | ((a >> 13) & 0x3ffu)); if (a >= 0x477ff000u) return (unsigned short)(s | 0x7c00u); if (a < 0x38800000u) { unsigned int sh = 126u - (a >> 23); if (sh > 24u) return (unsigned short)s; unsigned int m = (a & 0x7fffffu) | 0x800000u, q = m >> sh, r = m & ((1u << sh) - 1u), hf = 1u << (sh - 1u); if (r > hf || (r == hf && (q & 1u))) q++; return (unsigned short)(s | q); } a -= 0x38000000u; a += 0xfffu + ((a >> 13) & 1u); return (unsigned short)(s | (a >> 13)); }
TG_INLINE float tg_bf2f(unsigned short b) { return TG_U2F((unsigned int)b << 16); }
TG_INLINE unsigned short tg_f2bf(float f) { unsigned int x = TG_F2U(f); if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 64u); return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); }

/* the text above, whitespace aside, is the text the renderers emit */
static bool same_code(const char *emitted, const char *file_marker) {
  FILE *f = fopen(__FILE__, "r");
  if (!f) return true;  /* run from elsewhere: the value checks below still hold */
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strstr(buf, file_marker);
  for (const char *e = emitted; p && *e; e++) {
    if (*e == ' ' || *e == '\n') continue;
    while (*p == ' ' || *p == '\n') p++;
    if (*p++ != *e) return false;
  }
  return p != NULL;
}

TEST(test_devices_gpu_half_and_bfloat16_conversions_round_like_the_host) {
  CHECK(same_code(cstyle_half_helpers, "TG_INLINE float tg_h2f(unsigned short h) {"), "the half helpers above are not the emitted text");
  CHECK(same_code(cstyle_bf16_helpers, "TG_INLINE float tg_bf2f(unsigned short b) {"), "the bfloat16 helpers above are not the emitted text");
  CHECK(tg_bf2f(tg_f2bf(1.5f)) == 1.5f && tg_bf2f(0x3f80) == 1.0f, "bfloat16 back and forth");
  /* every half value back and forth */
  for (unsigned h = 0; h < 0x10000; h++) {
    float f = tg_h2f((unsigned short)h), want = half_to_float((uint16_t)h);
    if (isnan(want)) CHECK(isnan(f) && isnan(tg_h2f(tg_f2h(f))), "h2f(%04x) = %g", h, f);
    else CHECK(f == want && tg_f2h(f) == h, "h2f(%04x) = %g (want %g), back %04x", h, f, want, tg_f2h(f));
  }
  /* floats between halves, around the subnormal and overflow edges, and random bits: the host's rounding */
  uint32_t x = 12345;
  for (int i = 0; i < 2000000; i++) {
    x = x * 1664525u + 1013904223u;
    uint32_t bits = i < 65536 ? (0x33000000u + (uint32_t)i * 2048u) : i < 131072 ? (0x47700000u + (uint32_t)(i - 65536) * 16u) : x;
    float f;
    memcpy(&f, &bits, 4);
    if (isnan(f)) continue;
    CHECK(tg_f2h(f) == float_to_half(f), "f2h(%a) = %04x, host %04x", f, tg_f2h(f), float_to_half(f));
    CHECK(tg_f2bf(f) == float_to_bf16(f), "f2bf(%a) = %04x, host %04x", f, tg_f2bf(f), float_to_bf16(f));
    if (test_failures_in_current() > 5) break;
  }
}

/* BEAM on whichever device the suite runs (on a GPU: candidates rendered in its language, timed by its events) */
TEST(test_devices_beam_finds_a_correct_kernel_on_the_suite_device) {
  const char *names[3] = {"BEAM", "TG_BEAM_LIMIT", "TG_CACHE"};
  char *old[3];
  for (int i = 0; i < 3; i++) old[i] = getenv(names[i]) ? strdup(getenv(names[i])) : NULL;
  char dir[] = "/tmp/tgc-beam-dev-XXXXXX";
  CHECK(mkdtemp(dir), "mkdtemp");
  setenv("BEAM", "2", 1);
  setenv("TG_BEAM_LIMIT", "3", 1);
  setenv("TG_CACHE", dir, 1);
  env_reload();
  compile_cache_set_dir(NULL);
  enum { N = 24, K = 40, M = 20 };
  float a[N * K], b[K * M], got[N * M];
  for (int i = 0; i < N * K; i++) a[i] = (float)((i * 7) % 13) - 6;
  for (int i = 0; i < K * M; i++) b[i] = (float)((i * 5) % 11) * 0.5f - 2;
  tg_tensor *ta = tg_from_data(TG_FLOAT32, 2, (int64_t[]){N, K}, a, sizeof a);
  tg_tensor *tb = tg_from_data(TG_FLOAT32, 2, (int64_t[]){K, M}, b, sizeof b);
  tg_tensor *c = tg_matmul(ta, tb);
  CHECK(c && tg_to_host(c, got, sizeof got) == TG_OK, "%s", tg_error());
  for (int i = 0; i < N; i++)
    for (int j = 0; j < M; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[k * M + j];
      CHECK(fabs(got[i * M + j] - s) <= 1e-4 * (1 + fabs(s)), "BEAM matmul [%d][%d] = %g, want %g", i, j, got[i * M + j], s);
      if (test_failures_in_current()) break;
    }
  tg_free(c);
  tg_free(ta);
  tg_free(tb);
  for (int i = 0; i < 3; i++) {
    if (old[i]) setenv(names[i], old[i], 1);
    else unsetenv(names[i]);
    free(old[i]);
  }
  env_reload();
  compile_cache_set_dir(NULL);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0, "removing %s", dir);
}

/* GROUP on a GPU target: the reduce is split over a work group, rendered with local memory and barriers, and
 * launched in groups of its size; the CPU target refuses it */
TEST(test_devices_group_reduce_renders_local_memory_and_barriers) {
  static float v[4 * 4096];
  tg_tensor *x = tg_from_data(TG_FLOAT32, 2, (int64_t[]){4, 4096}, v, sizeof v);
  tg_tensor *s = tg_sum(x, 1, (int[]){1}, false);
  CHECK_T(s);
  schedule sc;
  CHECK(s && schedule_create(1, &s->u, &sc) == TG_OK, "%s", tg_error());
  if (test_failures_in_current()) return;
  CHECK(sc.nkernels == 1, "%d kernels", sc.nkernels);
  uop *ast = decompose_dtypes(sc.kernels[0].ast, false);
  kernel_state ks;
  char why[160];
  CHECK(ks_init(&ks, ast, codegen_host_target(2)) && !apply_opt(&ks, (opt){OPT_GROUP, 0, 64}, why) && strstr(why, "GPU"),
        "the CPU refuses GROUP: %s", why);
  CHECK(ks_init(&ks, ast, codegen_gpu_target()) && apply_opt(&ks, (opt){OPT_GROUP, 0, 64}, why), "GROUP: %s", why);
  CHECK(!apply_opt(&ks, (opt){OPT_GROUPTOP, 0, 4}, why) && strstr(why, "already"), "a second group: %s", why);
  kernel_info info;
  linear_program lp = {0};
  launch_shape shape;
  uop *fin = codegen_finish(&ks, &info);
  char *cl = fin && linearize(fin, &lp, &info) ? render_gpu(LANG_OPENCL, info.name, &lp, &info, &shape) : NULL;
  CHECK(cl && strstr(cl, "__local float local0[64]") && strstr(cl, "barrier(CLK_LOCAL_MEM_FENCE)"), "%s", cl ? cl : tg_error());
  CHECK(shape.local[0] == 64 && shape.global[0] == 4 * 64, "launch %zu/%zu, want 256/64\n%s", shape.global[0], shape.local[0], cl ? cl : "");
  char *cu = cl ? render_gpu(LANG_CUDA, info.name, &lp, &info, &shape) : NULL;
  CHECK(cu && strstr(cu, "__shared__ float local0[64]") && strstr(cu, "__syncthreads()") &&
        strstr(cu, "__launch_bounds__(64)"), "%s", cu ? cu : tg_error());
  free(cl);
  free(cu);
  linear_program_free(&lp);
  schedule_free(&sc);
  tg_free(s);
  tg_free(x);
}
