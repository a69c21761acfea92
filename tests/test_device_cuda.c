/* test_device_cuda.c — the CUDA runtime: NVRTC (cubin, PTX, compile errors, float16 through inline PTX), the disk
 * cache of kernel images, a missing or stub driver as an error, and, on a machine with a GPU, buffers, copies,
 * launches (1-D, 2-D, timed), the program cache and out-of-memory. Tests whose tool or device is missing skip. */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/cuda.h"
#include "ref.h"
#include "runtime/device.h"
#include "test.h"

/* the kernel ABI of the CUDA renderer: one pointer per buffer, the index from block and thread */
static const char *add_src =
    "extern \"C\" __global__ void add(float *data0, const float *data1, const float *data2) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  data0[i] = data1[i] + data2[i];\n"
    "}\n";

/* float16 without cuda_fp16.h: the renderer converts with PTX's cvt */
static const char *half_src =
    "extern \"C\" __global__ void half_axpy(unsigned short *data0, const unsigned short *data1) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  unsigned short h = data1[i], o;\n"
    "  float f;\n"
    "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n"
    "  f = f * 2.0f + 1.0f;\n"
    "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(o) : \"f\"(f));\n"
    "  data0[i] = o;\n"
    "}\n";

static const char *bad_src =
    "extern \"C\" __global__ void broken(float *data0) {\n"
    "  data0[threadIdx.x] = 1.0f +;\n"
    "}\n";

static bool need_nvrtc(void) {
  if (nvrtc_available()) return true;
  test_skip("NVRTC (libnvrtc.so) is not installed");
  return false;
}

TEST(test_cuda_nvrtc_compiles_cubin_and_ptx) {
  if (!need_nvrtc()) return;
  void *img = NULL;
  size_t n = 0;
  tg_status st = nvrtc_compile("add", add_src, "sm_90", true, &img, &n);
  CHECK(st == TG_OK, "cubin: %s", tg_error());
  CHECK(img && n > 4 && !memcmp(img, "\x7f" "ELF", 4), "the cubin (%zu bytes) is not an ELF file", n);
  free(img);
  img = NULL;
  st = nvrtc_compile("add", add_src, "compute_90", false, &img, &n);
  CHECK(st == TG_OK, "ptx: %s", tg_error());
  if (img) {
    const char *ptx = img;
    CHECK(n > 0 && ptx[n - 1] == 0, "the PTX is not NUL-terminated");
    CHECK(strstr(ptx, ".entry add") != NULL, "the PTX has no .entry add:\n%.400s", ptx);
    CHECK(strstr(ptx, ".target sm_90") != NULL, "the PTX is not for sm_90:\n%.400s", ptx);
  }
  free(img);
  int archs[64], na = nvrtc_supported_archs(archs, 64);
  bool has90 = false;
  for (int i = 0; i < na && i < 64; i++) has90 = has90 || archs[i] == 90;
  CHECK(has90, "NVRTC %d lists %d architectures, without 90", nvrtc_version(), na);
}

TEST(test_cuda_nvrtc_syntax_error_gives_its_log) {
  if (!need_nvrtc()) return;
  void *img = (void *)1;
  size_t n = 7;
  tg_status st = nvrtc_compile("broken", bad_src, "sm_90", true, &img, &n);
  CHECK(st == TG_ERR_DEVICE, "status %d: %s", st, tg_error());
  CHECK(img == NULL && n == 0, "an image was returned");
  char e[1024];
  snprintf(e, sizeof e, "%s", tg_error());
  CHECK(strstr(e, "CUDA: kernel broken failed to compile for sm_90:") != NULL, "message: %s", e);
  CHECK(strstr(e, "error") && strstr(e, "expected an expression"), "NVRTC's log is not in the message: %s", e);
  CHECK(strstr(e, "(2)") != NULL, "the log does not name line 2: %s", e);
}

TEST(test_cuda_nvrtc_float16_through_inline_ptx) {
  if (!need_nvrtc()) return;
  void *img = NULL;
  size_t n = 0;
  tg_status st = nvrtc_compile("half_axpy", half_src, "sm_90", true, &img, &n);
  CHECK(st == TG_OK, "cubin: %s", tg_error());
  free(img);
  img = NULL;
  st = nvrtc_compile("half_axpy", half_src, "compute_90", false, &img, &n);
  CHECK(st == TG_OK, "ptx: %s", tg_error());
  CHECK(img && strstr(img, "cvt.f32.f16") && strstr(img, "cvt.rn.f16.f32"), "the PTX lacks the conversions");
  free(img);
}

typedef struct compile_job { char name[32], src[512]; tg_status st; bool elf; char err[256]; } compile_job;

static void *compile_thread(void *arg) {
  compile_job *j = arg;
  void *img = NULL;
  size_t n = 0;
  j->st = nvrtc_compile(j->name, j->src, "sm_90", true, &img, &n);
  j->elf = img && n > 4 && !memcmp(img, "\x7f" "ELF", 4);
  snprintf(j->err, sizeof j->err, "%s", j->st == TG_OK ? "" : tg_error());
  free(img);
  return NULL;
}

/* four threads compile four kernels at once: NVRTC's loading and its programs are per call */
TEST(test_cuda_nvrtc_compiles_from_threads) {
  if (!need_nvrtc()) return;
  compile_job jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (compile_job){.st = TG_ERR_INTERNAL};
    snprintf(jobs[i].name, sizeof jobs[i].name, "scale%d", i);
    snprintf(jobs[i].src, sizeof jobs[i].src,
             "extern \"C\" __global__ void scale%d(float *data0) { data0[threadIdx.x] *= %d.0f; }\n", i, i + 2);
  }
  int started = 0;
  for (; started < 4; started++)
    if (pthread_create(&th[started], NULL, compile_thread, &jobs[started]) != 0) break;
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  CHECK(started == 4, "only %d threads started", started);
  for (int i = 0; i < started; i++) CHECK(jobs[i].st == TG_OK && jobs[i].elf, "%s: %s", jobs[i].name, jobs[i].err);
}

static long file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* the one cuda-*.bin file in dir into path; false if there is not exactly one */
static bool cache_file(const char *dir, char *path, size_t cap) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls %s/cuda-*.bin 2>/dev/null", dir);
  FILE *f = popen(cmd, "r");
  if (!f) return false;
  int lines = 0;
  char line[PATH_MAX];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (lines++ == 0) snprintf(path, cap, "%s", line);
  }
  pclose(f);
  return lines == 1;
}

TEST(test_cuda_image_disk_cache_hit_corrupt_and_arch_choice) {
  if (!need_nvrtc()) return;
  char dir[PATH_MAX], path[PATH_MAX];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "mkdtemp failed");
    return;
  }
  compile_cache_set_dir(dir);
  void *img1 = NULL, *img2 = NULL, *img3 = NULL;
  size_t n1 = 0, n2 = 0, n3 = 0;
  char target[16];
  bool ptx, disk;
  cuda_counters c0 = cuda_get_counters();

  tg_status st = cuda_compile_image("add", add_src, 90, &img1, &n1, target, &ptx, &disk);
  CHECK(st == TG_OK && !disk && !ptx && !strcmp(target, "sm_90"), "first: %d %s disk=%d ptx=%d %s", st, target, disk,
        ptx, tg_error());
  CHECK(img1 && n1 > 4 && !memcmp(img1, "\x7f" "ELF", 4), "not a cubin");
  CHECK(cache_file(dir, path, sizeof path), "no single cache file in %s", dir);

  st = cuda_compile_image("add", add_src, 90, &img2, &n2, target, &ptx, &disk);
  CHECK(st == TG_OK && disk, "second: %d disk=%d %s", st, disk, tg_error());
  CHECK(n2 == n1 && img1 && img2 && !memcmp(img1, img2, n1), "the cached image differs (%zu vs %zu bytes)", n2, n1);
  cuda_counters c1 = cuda_get_counters();
  CHECK(c1.compiles == c0.compiles + 1 && c1.disk_hits == c0.disk_hits + 1, "compiles %llu->%llu hits %llu->%llu",
        (unsigned long long)c0.compiles, (unsigned long long)c1.compiles, (unsigned long long)c0.disk_hits,
        (unsigned long long)c1.disk_hits);

  /* one flipped byte in the middle: rejected, compiled again, rewritten */
  long sz = file_size(path);
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0 && sz > 100, "cannot open %s", path);
  if (fd >= 0) {
    unsigned char b;
    CHECK(pread(fd, &b, 1, sz / 2) == 1, "pread");
    b ^= 0x40;
    CHECK(pwrite(fd, &b, 1, sz / 2) == 1, "pwrite");
    close(fd);
  }
  st = cuda_compile_image("add", add_src, 90, &img3, &n3, target, &ptx, &disk);
  cuda_counters c2 = cuda_get_counters();
  CHECK(st == TG_OK && !disk && n3 == n1 && img3 && !memcmp(img1, img3, n1), "after corruption: %d disk=%d", st, disk);
  CHECK(c2.disk_rejects == c1.disk_rejects + 1 && c2.compiles == c1.compiles + 1, "rejects %llu->%llu",
        (unsigned long long)c1.disk_rejects, (unsigned long long)c2.disk_rejects);
  CHECK(file_size(path) == sz, "the file was not rewritten whole: %ld bytes, was %ld", file_size(path), sz);
  free(img1);
  free(img2);
  free(img3);

  /* a GPU newer than NVRTC knows: PTX for the newest architecture below it, which the driver compiles */
  void *img = NULL;
  size_t n = 0;
  st = cuda_compile_image("add", add_src, 990, &img, &n, target, &ptx, &disk);
  CHECK(st == TG_OK && ptx && !strncmp(target, "compute_", 8), "future GPU: %d %s ptx=%d %s", st, target, ptx, tg_error());
  CHECK(img && strstr(img, ".entry add"), "no PTX for the future GPU");
  free(img);
  img = NULL;
  /* one older than NVRTC's oldest: refused, naming the architecture */
  st = cuda_compile_image("add", add_src, 20, &img, &n, target, &ptx, &disk);
  CHECK(st == TG_ERR_DEVICE && strstr(tg_error(), "sm_20"), "old GPU: %d %s", st, tg_error());
  free(img);

  compile_cache_set_dir(NULL);
  test_remove_dir(dir);
}

/* ---- the device ------------------------------------------------------------------------------------------- */

TEST(test_cuda_device_without_driver_is_an_error) {
  tg_error_clear();
  const device *d = device_cuda(0);
  if (d) {  /* a GPU machine: an index past the last GPU is the error instead */
    CHECK(d->kind == DEVICE_CUDA && !strcmp(d->name, "CUDA") && !strncmp(d->arch, "sm_", 3), "%s %s", d->name, d->arch);
    CHECK(device_get("cuda") == d && device_get("CUDA:0") == d, "device_get does not find CUDA:0");
    CHECK(device_cuda(999) == NULL && tg_error_status() == TG_ERR_DEVICE && strstr(tg_error(), "no such GPU"),
          "CUDA:999: %s", tg_error());
    return;
  }
  const char *e = tg_error();
  CHECK(tg_error_status() == TG_ERR_DEVICE, "status %d: %s", tg_error_status(), e);
  CHECK(strstr(e, "CUDA:0") && strstr(e, "libcuda.so.1") && strstr(e, "NVIDIA driver"), "message: %s", e);
  char first[1024];
  snprintf(first, sizeof first, "%s", e);
  /* the same answer again, and by name */
  CHECK(device_get("CUDA") == NULL && tg_error_status() == TG_ERR_DEVICE && !strcmp(tg_error(), first),
        "device_get(CUDA): %s", tg_error());
  CHECK(device_get("cuda:3") == NULL && strstr(tg_error(), "CUDA:3") && strstr(tg_error(), "libcuda.so.1"),
        "device_get(cuda:3): %s", tg_error());
}

TEST(test_cuda_device_stub_driver_is_an_error) {
  static const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (access(stub, R_OK) != 0) {
    test_skip("no CUDA stub library at %s", stub);
    return;
  }
  /* on a GPU machine the real driver loads first, and a driver that loaded is never replaced */
  if (device_cuda(0) || cuda_set_driver_path(stub) != TG_OK) {
    test_skip("a CUDA driver is loaded already (a GPU machine)");
    return;
  }
  CHECK(device_cuda(0) == NULL, "the stub opened a device");
  const char *e = tg_error();
  CHECK(tg_error_status() == TG_ERR_DEVICE && strstr(e, "CUDA_ERROR_STUB_LIBRARY") && strstr(e, "stub") &&
            strstr(e, "libcuda.so.1"),
        "stub: %s", e);
  CHECK(cuda_set_driver_path("/nonexistent/libcuda.so.1") == TG_OK, "set path: %s", tg_error());
  CHECK(device_cuda(0) == NULL && strstr(tg_error(), "/nonexistent/libcuda.so.1") && strstr(tg_error(), "cannot be loaded"),
        "missing: %s", tg_error());
  CHECK(cuda_set_driver_path(NULL) == TG_OK, "restore: %s", tg_error());
  CHECK(device_cuda(0) == NULL && tg_error_status() == TG_ERR_DEVICE && strstr(tg_error(), "libcuda.so.1") &&
            !strstr(tg_error(), "stub"), "restored (the stub is still loaded?): %s", tg_error());
}

/* ---- with a GPU --------------------------------------------------------------------------------------------- */

static const device *need_gpu(void) {
  const device *d = device_cuda(0);
  if (!d) test_skip("no CUDA GPU: %s", tg_error());
  return d;
}

TEST(test_cuda_gpu_buffers_copy_round_trip) {
  const device *d = need_gpu();
  if (!d) return;
  /* 5M floats: 20 MB, more than both staging buffers together */
  const int64_t sizes[] = {1, 1000, 5 << 20};
  for (int s = 0; s < 3; s++) {
    int64_t n = sizes[s];
    size_t nb = (size_t)n * 4;
    float *src = malloc(nb), *dst = malloc(nb);
    tg_buffer *a = buffer_new(d, nb), *b = buffer_new(d, nb);
    CHECK(src && dst && a && b, "alloc %zu: %s", nb, tg_error());
    if (src && dst && a && b) {
      for (int64_t i = 0; i < n; i++) src[i] = (float)(i % 1009) * 0.25f - (float)s;
      CHECK(d->copyin(a, src, nb) == TG_OK, "copyin: %s", tg_error());
      memset(dst, 0, nb);
      CHECK(d->copyout(dst, a, nb) == TG_OK, "copyout: %s", tg_error());
      CHECK(!memcmp(src, dst, nb), "%lld floats: round trip differs", (long long)n);
      /* device copy: the second half of a to the front of b, then the first half after it */
      size_t h = nb / 8 * 4;
      CHECK(d->copy(b, 0, a, nb - h, h) == TG_OK && d->copy(b, h, a, 0, nb - h) == TG_OK, "copy: %s", tg_error());
      CHECK(d->synchronize(d) == TG_OK, "synchronize: %s", tg_error());
      CHECK(d->copyout(dst, b, nb) == TG_OK, "copyout b: %s", tg_error());
      CHECK(!memcmp(dst, (char *)src + (nb - h), h) && !memcmp((char *)dst + h, src, nb - h), "device copy differs");
      CHECK(d->copy(b, 4, a, 0, nb) == TG_ERR_ARG, "an overlong device copy was accepted");
    }
    buffer_release(a);
    buffer_release(b);
    free(src);
    free(dst);
  }
  /* a freed buffer comes back for the same size */
  cuda_counters c0 = cuda_get_counters();
  tg_buffer *x = buffer_new(d, 12345);
  buffer_release(x);
  x = buffer_new(d, 12345);
  cuda_counters c1 = cuda_get_counters();
  CHECK(x && c1.alloc_hits > c0.alloc_hits, "the freed-buffer cache was not used");
  buffer_release(x);
}

/* runs add over n floats and compares with a plain loop; *ms gets the timed launch's time */
static void run_add(const device *d, tg_program *p, int64_t n, double *ms) {
  size_t nb = (size_t)n * 4;
  float *ha = malloc(nb), *hb = malloc(nb), *hc = malloc(nb), *want = malloc(nb);
  tg_buffer *a = buffer_new(d, nb), *b = buffer_new(d, nb), *c = buffer_new(d, nb);
  CHECK(ha && hb && hc && want && a && b && c, "alloc: %s", tg_error());
  if (ha && hb && hc && want && a && b && c) {
    for (int64_t i = 0; i < n; i++) {
      ha[i] = (float)i * 0.5f;
      hb[i] = 3.0f - (float)(i % 7);
      want[i] = ha[i] + hb[i];
    }
    CHECK(d->copyin(a, ha, nb) == TG_OK && d->copyin(b, hb, nb) == TG_OK, "copyin: %s", tg_error());
    p->global[0] = (size_t)n;
    p->local[0] = 256;
    void *bufs[3] = {c->ptr, a->ptr, b->ptr};
    CHECK(d->launch(p, bufs, 3, 0, NULL) == TG_OK, "launch: %s", tg_error());
    CHECK(d->copyout(hc, c, nb) == TG_OK, "copyout: %s", tg_error());
    CHECK_CLOSE("add", hc, want, n);
    *ms = -1;
    CHECK(d->launch(p, bufs, 3, 0, ms) == TG_OK && *ms > 0 && *ms < 1000, "timed launch: %s (%g ms)", tg_error(), *ms);
    p->local[0] = 384;  /* does not divide 1<<20 */
    CHECK(d->launch(p, bufs, 3, 0, NULL) == TG_ERR_ARG && strstr(tg_error(), "multiple"), "bad local: %s", tg_error());
    p->local[0] = 256;
  }
  buffer_release(a);
  buffer_release(b);
  buffer_release(c);
  free(ha);
  free(hb);
  free(hc);
  free(want);
}

TEST(test_cuda_gpu_add_kernel_timed_and_cached) {
  const device *d = need_gpu();
  if (!d) return;
  cuda_counters c0 = cuda_get_counters();
  tg_program *p = d->compile(d, "add", add_src);
  CHECK(p != NULL, "compile: %s", tg_error());
  if (!p) return;
  double ms = 0;
  run_add(d, p, 1 << 20, &ms);
  tg_program *q = d->compile(d, "add", add_src);
  cuda_counters c1 = cuda_get_counters();
  CHECK(q == p && c1.mem_hits == c0.mem_hits + 1, "the program cache did not answer");
  program_release(q);
  program_release(p);
  /* a compile error through the device, then the same message again without compiling */
  CHECK(d->compile(d, "broken", bad_src) == NULL && tg_error_status() == TG_ERR_DEVICE &&
            strstr(tg_error(), "failed to compile"), "broken: %s", tg_error());
  uint64_t before = cuda_get_counters().compiles;
  CHECK(d->compile(d, "broken", bad_src) == NULL && strstr(tg_error(), "failed to compile"), "again: %s", tg_error());
  CHECK(cuda_get_counters().compiles == before, "a refused source was compiled again");
  CHECK(d->compile(d, "nosuch", add_src) == NULL && strstr(tg_error(), "no kernel nosuch"), "nosuch: %s", tg_error());
}

TEST(test_cuda_gpu_2d_launch_and_float16) {
  const device *d = need_gpu();
  if (!d) return;
  /* out[y][x] = x + 1000*y over a 64x32 grid of 16x4 blocks */
  static const char *grid_src =
      "extern \"C\" __global__ void grid2(float *data0) {\n"
      "  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;\n"
      "  data0[y * 64 + x] = (float)(x + 1000 * y);\n"
      "}\n";
  tg_program *p = d->compile(d, "grid2", grid_src);
  tg_buffer *o = buffer_new(d, 64 * 32 * 4);
  float got[64 * 32], want[64 * 32];
  CHECK(p && o, "%s", tg_error());
  if (p && o) {
    p->global[0] = 64, p->global[1] = 32, p->local[0] = 16, p->local[1] = 4;
    void *bufs[1] = {o->ptr};
    CHECK(d->launch(p, bufs, 1, 0, NULL) == TG_OK, "launch: %s", tg_error());
    CHECK(d->copyout(got, o, sizeof got) == TG_OK, "copyout: %s", tg_error());
    for (int y = 0; y < 32; y++)
      for (int x = 0; x < 64; x++) want[y * 64 + x] = (float)(x + 1000 * y);
    CHECK_CLOSE("grid2", got, want, 64 * 32);
  }
  program_release(p);
  buffer_release(o);

  /* float16: 2x+1 for 256 halves, against the reference conversions (ref.c) */
  enum { N = 256 };
  uint16_t hin[N], hout[N];
  float g[N], w[N];
  for (int i = 0; i < N; i++) hin[i] = ref_f32_to_f16((float)(i - 128) * 0.125f);
  p = d->compile(d, "half_axpy", half_src);
  tg_buffer *a = buffer_new(d, sizeof hin), *b = buffer_new(d, sizeof hin);
  CHECK(p && a && b, "%s", tg_error());
  if (p && a && b) {
    p->global[0] = N, p->local[0] = 64;
    void *bufs[2] = {b->ptr, a->ptr};
    CHECK(d->copyin(a, hin, sizeof hin) == TG_OK && d->launch(p, bufs, 2, 0, NULL) == TG_OK &&
              d->copyout(hout, b, sizeof hout) == TG_OK, "half: %s", tg_error());
    for (int i = 0; i < N; i++) {
      g[i] = ref_f16_to_f32(hout[i]);
      w[i] = ref_f16_to_f32(ref_f32_to_f16(ref_f16_to_f32(hin[i]) * 2.0f + 1.0f));
    }
    CHECK_CLOSE("half_axpy", g, w, N);
  }
  program_release(p);
  buffer_release(a);
  buffer_release(b);
}

TEST(test_cuda_gpu_out_of_memory_is_nomem) {
  const device *d = need_gpu();
  if (!d) return;
  float v[4] = {1, 2, 3, 4}, back[4] = {0};
  tg_buffer *keep = buffer_new(d, sizeof v);
  CHECK(keep && d->copyin(keep, v, sizeof v) == TG_OK, "%s", tg_error());
  tg_buffer *huge = buffer_new(d, (size_t)1 << 50);  /* 1 PiB */
  CHECK(!huge && tg_error_status() == TG_ERR_NOMEM && strstr(tg_error(), "1125899906842624"), "1 PiB: %s",
        tg_error());
  buffer_release(huge);
  CHECK(keep && d->copyout(back, keep, sizeof back) == TG_OK && !memcmp(v, back, sizeof v),
        "a buffer was damaged by the failed allocation: %s", tg_error());
  buffer_release(keep);
}
