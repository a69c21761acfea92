/* test_device_cl.c — the OpenCL runtime (opencl.c): buffers and copies, hand-written kernels built, cached (in
 * memory and on disk, a damaged cache file rebuilt), launched over global/local shapes, timed and synchronized;
 * device names and errors. Each test is skipped, saying why, where no OpenCL device can be opened. */
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/device.h"
#include "test.h"

/* device CL, or NULL after marking the test skipped */
static const device *cl_or_skip(void) {
  const device *d = device_cl(0);
  if (!d) test_skip("no OpenCL device: %s", tg_error());
  return d;
}

/* data0[i] = data1[i] + data2[i] for i < 1000; work items past 1000 write nothing */
static const char *add_src =
    "__kernel void add_k(__global float *data0, __global const float *data1, __global const float *data2) {\n"
    "  int i = get_global_id(0);\n"
    "  if (i < 1000) data0[i] = data1[i] + data2[i];\n"
    "}\n";

/* data0[i] = data0[i] * 2 + 1 */
static const char *twice_src =
    "__kernel void twice_k(__global float *data0) {\n"
    "  int i = get_global_id(0);\n"
    "  data0[i] = data0[i] * 2.0f + 1.0f;\n"
    "}\n";

/* a fresh buffer of n floats holding v */
static tg_buffer *buf_from(const device *d, const float *v, size_t n) {
  tg_buffer *b = buffer_new(d, n * sizeof(float));
  if (b && d->copyin(b, v, n * sizeof(float)) != TG_OK) {
    buffer_release(b);
    return NULL;
  }
  return b;
}

TEST(test_device_cl_opens_with_names_and_arch) {
  const device *d = cl_or_skip();
  if (!d) return;
  CHECK(!strcmp(d->name, "CL") && d->kind == DEVICE_CL && device_is_gpu(d), "device fields: %s", d->name);
  CHECK(d->arch[0] && strcmp(d->arch, "?"), "arch is empty");
  CHECK(d->num_threads(d) == 1, "num_threads");
  CHECK(device_get("CL") == d && device_get("cl") == d && device_cl(0) == d, "CL is device_cl(0)");
  int n = 1;
  while (n < 64 && device_cl(n)) n++;
  CHECK(device_get("CL:99") == NULL && tg_error_status() == TG_ERR_DEVICE, "CL:99 must fail");
  char want[64];
  snprintf(want, sizeof want, "%d OpenCL device", n);
  CHECK(strstr(tg_error(), want) && strstr(tg_error(), "CL:99"), "CL:99's error should name the count %d: %s", n,
        tg_error());
  /* the same message again */
  char first[1024];
  snprintf(first, sizeof first, "%s", tg_error());
  CHECK(device_cl(99) == NULL && !strcmp(first, tg_error()), "second failure differs: %s", tg_error());
  CHECK(device_cl(-1) == NULL && strstr(tg_error(), want), "CL:-1: %s", tg_error());
}

TEST(test_device_cl_copy_round_trip_odd_sizes) {
  const device *d = cl_or_skip();
  if (!d) return;
  size_t sizes[] = {0, 1, 3, 63, 1001, 70001, ((size_t)3 << 20) + 5};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    tg_buffer *b = buffer_new(d, n);
    CHECK(b && b->nbytes == n && b->dev == d && b->ptr, "buffer_new(%zu): %s", n, tg_error());
    if (!b) continue;
    unsigned char *src = malloc(n + 1), *dst = malloc(n + 1);
    for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i * 31 + 7 + k);
    memset(dst, 0xAB, n + 1);
    CHECK(d->copyin(b, src, n) == TG_OK, "copyin %zu: %s", n, tg_error());
    CHECK(d->copyout(dst, b, n) == TG_OK, "copyout %zu: %s", n, tg_error());
    CHECK(!memcmp(src, dst, n) && dst[n] == 0xAB, "round trip of %zu bytes differs", n);
    CHECK(d->copyin(b, src, n + 1) == TG_ERR_ARG, "copyin past the end must fail");
    CHECK(d->copyout(dst, b, n + 1) == TG_ERR_ARG, "copyout past the end must fail");
    free(src);
    free(dst);
    buffer_release(b);
  }
}

TEST(test_device_cl_device_copy_with_offsets) {
  const device *d = cl_or_skip();
  if (!d) return;
  unsigned char s[100], z[200], got[200], want[200];
  for (int i = 0; i < 100; i++) s[i] = (unsigned char)(i + 1);
  memset(z, 0, sizeof z);
  tg_buffer *src = buffer_new(d, 100), *dst = buffer_new(d, 200);
  CHECK(src && dst, "alloc: %s", tg_error());
  if (src && dst) {
    CHECK(d->copyin(src, s, 100) == TG_OK && d->copyin(dst, z, 200) == TG_OK, "copyin: %s", tg_error());
    CHECK(d->copy(dst, 17, src, 5, 50) == TG_OK, "copy: %s", tg_error());
    CHECK(d->copyout(got, dst, 200) == TG_OK, "copyout: %s", tg_error());
    memcpy(want, z, 200);
    memcpy(want + 17, s + 5, 50);
    CHECK(!memcmp(got, want, 200), "device copy with offsets differs");
    CHECK(d->copy(dst, 0, src, 60, 50) == TG_ERR_ARG, "copy past the source's end must fail");
    CHECK(d->copy(dst, 180, src, 0, 50) == TG_ERR_ARG, "copy past the destination's end must fail");
    CHECK(d->copy(dst, 0, src, SIZE_MAX, 2) == TG_ERR_ARG, "an overflowing offset must fail");
    CHECK(d->copy(dst, 0, dst, 10, 20) == TG_ERR_ARG, "an overlapping copy must fail");
    CHECK(d->copy(dst, 0, src, 0, 0) == TG_OK, "an empty copy");
  }
  buffer_release(src);
  buffer_release(dst);
}

TEST(test_device_cl_add_kernel_with_local_size_and_bounds_check) {
  const device *d = cl_or_skip();
  if (!d) return;
  enum { N = 1000, G = 1024 };
  float a[G], b[G], c[G], want[G];
  for (int i = 0; i < G; i++) {
    a[i] = (float)i * 0.5f - 3.0f;
    b[i] = (float)(i % 7) * 1.25f;
    c[i] = -7.0f;  /* past N: must stay */
    want[i] = i < N ? a[i] + b[i] : -7.0f;
  }
  tg_program *p = d->compile(d, "add_k", add_src);
  CHECK(p, "compile: %s", tg_error());
  tg_buffer *ba = buf_from(d, a, G), *bb = buf_from(d, b, G), *bc = buf_from(d, c, G);
  CHECK(ba && bb && bc, "buffers: %s", tg_error());
  if (p && ba && bb && bc) {
    CHECK(p->fn && p->handle && p->dev == d && !strcmp(p->name, "add_k"), "program fields");
    p->global[0] = G;
    p->local[0] = 64;
    void *bufs[3] = {bc->ptr, ba->ptr, bb->ptr};
    CHECK(d->launch(p, bufs, 3, 0, NULL) == TG_OK, "launch: %s", tg_error());
    CHECK(d->copyout(c, bc, sizeof c) == TG_OK, "copyout: %s", tg_error());
    CHECK_CLOSE("add", c, want, G);
    /* a global size that is not a multiple of the local size is refused before the driver sees it */
    p->global[0] = 1000;
    CHECK(d->launch(p, bufs, 3, 0, NULL) == TG_ERR_ARG && strstr(tg_error(), "add_k"), "1000/64: %s", tg_error());
    /* more buffers than the kernel has parameters (the engine passes every buffer of a kernel; one no op reads
     * is no parameter): the extra ones are not passed */
    p->global[0] = G;
    CHECK(p->nargs == 3, "the kernel declares %d arguments", p->nargs);
    void *more[4] = {bc->ptr, ba->ptr, bb->ptr, bb->ptr};
    CHECK(d->launch(p, more, 4, 0, NULL) == TG_OK, "4 args: %s", tg_error());
    CHECK(d->copyout(c, bc, sizeof c) == TG_OK, "copyout: %s", tg_error());
    CHECK_CLOSE("add with a fourth buffer", c, want, G);
  }
  program_release(p);
  buffer_release(ba);
  buffer_release(bb);
  buffer_release(bc);
}

TEST(test_device_cl_compile_error_gives_the_build_log) {
  const device *d = cl_or_skip();
  if (!d) return;
  const char *bad = "__kernel void bad_k(__global float *data0) { data0[0] = undefined_thing_42; }\n";
  tg_error_clear();
  tg_program *p = d->compile(d, "bad_k", bad);
  CHECK(!p && tg_error_status() == TG_ERR_DEVICE, "a bad kernel must fail with TG_ERR_DEVICE");
  CHECK(strstr(tg_error(), "CL: kernel bad_k failed to compile") && strstr(tg_error(), "undefined_thing_42"),
        "message: %s", tg_error());
  uint64_t builds = opencl_counters().compiles;
  p = d->compile(d, "bad_k", bad);  /* the same failure again, without building it again */
  CHECK(!p && strstr(tg_error(), "undefined_thing_42"), "second failure: %s", tg_error());
  CHECK(opencl_counters().compiles == builds, "a refused source was built again");
  /* a source that builds but has no kernel of that name */
  p = d->compile(d, "missing_k", twice_src);
  CHECK(!p && tg_error_status() == TG_ERR_DEVICE && strstr(tg_error(), "missing_k"), "missing kernel: %s",
        tg_error());
  program_release(p);
}

TEST(test_device_cl_freed_buffer_is_reused) {
  const device *d = cl_or_skip();
  if (!d) return;
  size_t n = 12345;
  tg_buffer *b = buffer_new(d, n);
  CHECK(b, "alloc: %s", tg_error());
  if (!b) return;
  void *mem = b->ptr;
  buffer_release(b);
  opencl_counters_t c0 = opencl_counters();
  CHECK(c0.bytes_cached >= n, "a freed buffer is cached (%zu bytes cached)", c0.bytes_cached);
  b = buffer_new(d, n);
  opencl_counters_t c1 = opencl_counters();
  CHECK(b && b->ptr == mem && b->nbytes == n && b->refcnt == 1, "the freed buffer was not reused");
  CHECK(c1.buffer_cache_hits == c0.buffer_cache_hits + 1 && c1.buffers_allocated == c0.buffers_allocated,
        "counters: hits %llu -> %llu", (unsigned long long)c0.buffer_cache_hits,
        (unsigned long long)c1.buffer_cache_hits);
  buffer_release(b);
  /* another size is not served by it; a flush empties the cache */
  tg_buffer *o = buffer_new(d, n + 1);
  CHECK(o && o->ptr != mem, "a buffer of another size reused the cached one");
  buffer_release(o);
  d->flush_cache(d);
  CHECK(opencl_counters().bytes_cached == 0, "flush_cache left %zu bytes", opencl_counters().bytes_cached);
  uint64_t allocated = opencl_counters().buffers_allocated;
  b = buffer_new(d, n);
  CHECK(b && opencl_counters().buffers_allocated == allocated + 1, "after a flush a new buffer is made");
  buffer_release(b);
  d->flush_cache(d);
  /* a wrap of host memory is not an OpenCL buffer: refused, never handed to the driver */
  float host[4] = {1, 2, 3, 4};
  tg_buffer *w = buffer_wrap(d, host, sizeof host);
  CHECK(w, "buffer_wrap: %s", tg_error());
  if (w) {
    CHECK(d->copyin(w, host, sizeof host) == TG_ERR_ARG, "copyin into a host wrap must fail");
    CHECK(d->copyout(host, w, sizeof host) == TG_ERR_ARG, "copyout from a host wrap must fail");
    buffer_release(w);
  }
}

TEST(test_device_cl_timed_launch_and_synchronize) {
  const device *d = cl_or_skip();
  if (!d) return;
  enum { N = 1 << 16 };
  float *x = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 100) * 0.01f;
    want[i] = x[i];
    for (int r = 0; r < 6; r++) want[i] = want[i] * 2.0f + 1.0f;
  }
  tg_program *p = d->compile(d, "twice_k", twice_src);
  tg_buffer *b = buf_from(d, x, N);
  CHECK(p && b, "setup: %s", tg_error());
  if (p && b) {
    p->global[0] = N;
    void *bufs[1] = {b->ptr};
    double ms = -1;
    CHECK(d->launch(p, bufs, 1, 0, &ms) == TG_OK, "timed launch: %s", tg_error());
    CHECK(ms > 0 && ms < 60000, "kernel time %g ms", ms);
    for (int r = 0; r < 5; r++) CHECK(d->launch(p, bufs, 1, 0, NULL) == TG_OK, "launch %d: %s", r, tg_error());
    CHECK(d->synchronize(d) == TG_OK, "synchronize: %s", tg_error());
    CHECK(d->copyout(x, b, N * sizeof(float)) == TG_OK, "copyout: %s", tg_error());
    CHECK_CLOSE("6 x (2x+1)", x, want, N);
  }
  program_release(p);
  buffer_release(b);
  free(x);
  free(want);
}

/* a two-dimensional launch: out[y*W + x] = x + 1000*y over global (W, H) in groups of (8, 4) */
TEST(test_device_cl_two_dimensional_launch) {
  const device *d = cl_or_skip();
  if (!d) return;
  enum { W = 64, H = 12 };
  const char *src =
      "__kernel void grid_k(__global float *data0) {\n"
      "  int x = get_global_id(0), y = get_global_id(1);\n"
      "  data0[y * get_global_size(0) + x] = (float)(x + 1000 * y);\n"
      "}\n";
  float got[W * H], want[W * H];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) want[y * W + x] = (float)(x + 1000 * y);
  tg_program *p = d->compile(d, "grid_k", src);
  tg_buffer *b = buffer_new(d, sizeof got);
  CHECK(p && b, "setup: %s", tg_error());
  if (p && b) {
    p->global[0] = W;
    p->global[1] = H;
    p->local[0] = 8;
    p->local[1] = 4;
    void *bufs[1] = {b->ptr};
    CHECK(d->launch(p, bufs, 1, 0, NULL) == TG_OK, "launch: %s", tg_error());
    CHECK(d->copyout(got, b, sizeof got) == TG_OK, "copyout: %s", tg_error());
    CHECK_CLOSE("grid", got, want, W * H);
  }
  program_release(p);
  buffer_release(b);
}

/* the name of the one cl-*.bin file in dir into out; false when there is not exactly one */
static bool find_cache_file(const char *dir, char *out, size_t cap) {
  DIR *dd = opendir(dir);
  if (!dd) return false;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dd)) != NULL) {
    size_t len = strlen(e->d_name);
    if (!strncmp(e->d_name, "cl-", 3) && len > 4 && !strcmp(e->d_name + len - 4, ".bin")) {
      snprintf(out, cap, "%s/%s", dir, e->d_name);
      n++;
    }
  }
  closedir(dd);
  return n == 1;
}

/* runs add_k's program p and checks it */
static void check_add(const device *d, tg_program *p) {
  enum { G = 1024 };
  float a[G], b[G], c[G], want[G];
  for (int i = 0; i < G; i++) {
    a[i] = (float)i;
    b[i] = 0.25f * (float)i;
    c[i] = 0;
    want[i] = i < 1000 ? a[i] + b[i] : 0;
  }
  tg_buffer *ba = buf_from(d, a, G), *bb = buf_from(d, b, G), *bc = buf_from(d, c, G);
  CHECK(ba && bb && bc, "buffers: %s", tg_error());
  if (ba && bb && bc) {
    p->global[0] = G;
    p->local[0] = 32;
    void *bufs[3] = {bc->ptr, ba->ptr, bb->ptr};
    CHECK(d->launch(p, bufs, 3, 0, NULL) == TG_OK, "launch: %s", tg_error());
    CHECK(d->copyout(c, bc, sizeof c) == TG_OK, "copyout: %s", tg_error());
    CHECK_CLOSE("add", c, want, G);
  }
  buffer_release(ba);
  buffer_release(bb);
  buffer_release(bc);
}

TEST(test_device_cl_program_caches_in_memory_and_on_disk) {
  const device *d = cl_or_skip();
  if (!d) return;
  char dir[PATH_MAX], file[PATH_MAX + 256];
  if (!test_temp_dir(dir, sizeof dir)) {
    CHECK(false, "no temporary directory");
    return;
  }
  compile_cache_set_dir(dir);
  opencl_program_cache_clear();

  /* the same source twice: built once, the second answered from memory */
  opencl_counters_t c0 = opencl_counters();
  tg_program *p1 = d->compile(d, "add_k", add_src);
  tg_program *p2 = d->compile(d, "add_k", add_src);
  opencl_counters_t c1 = opencl_counters();
  CHECK(p1 && p1 == p2, "the second compile should return the cached program: %s", tg_error());
  CHECK(c1.compiles == c0.compiles + 1 && c1.mem_hits == c0.mem_hits + 1 && c1.disk_hits == c0.disk_hits,
        "built %llu times, %llu memory hits", (unsigned long long)(c1.compiles - c0.compiles),
        (unsigned long long)(c1.mem_hits - c0.mem_hits));
  CHECK(p1 && !p1->from_disk, "a fresh build is not from the disk");
  program_release(p1);
  program_release(p2);
  CHECK(find_cache_file(dir, file, sizeof file), "one binary in the disk cache %s", dir);

  /* out of memory, in from the disk */
  opencl_program_cache_clear();
  tg_program *p3 = d->compile(d, "add_k", add_src);
  opencl_counters_t c2 = opencl_counters();
  CHECK(p3 && p3->from_disk && c2.disk_hits == c1.disk_hits + 1 && c2.compiles == c1.compiles,
        "a disk hit expected: %s", p3 ? "" : tg_error());
  if (p3) check_add(d, p3);
  program_release(p3);

  /* a damaged binary is deleted and built again, never loaded */
  FILE *f = fopen(file, "r+b");
  CHECK(f, "cannot open %s", file);
  if (f) {
    fseek(f, 60, SEEK_SET);
    fputs("garbage garbage garbage", f);
    fclose(f);
  }
  opencl_program_cache_clear();
  tg_program *p4 = d->compile(d, "add_k", add_src);
  opencl_counters_t c3 = opencl_counters();
  CHECK(p4 && !p4->from_disk, "the damaged file should be rebuilt: %s", p4 ? "" : tg_error());
  CHECK(c3.disk_rejects == c2.disk_rejects + 1 && c3.compiles == c2.compiles + 1, "rejects %llu compiles %llu",
        (unsigned long long)(c3.disk_rejects - c2.disk_rejects), (unsigned long long)(c3.compiles - c2.compiles));
  if (p4) check_add(d, p4);
  program_release(p4);

  /* a truncated one too */
  CHECK(find_cache_file(dir, file, sizeof file) && truncate(file, 30) == 0, "truncate %s", file);
  opencl_program_cache_clear();
  tg_program *p5 = d->compile(d, "add_k", add_src);
  CHECK(p5 && !p5->from_disk && opencl_counters().disk_rejects == c3.disk_rejects + 1, "truncated file: %s",
        p5 ? "" : tg_error());
  if (p5) check_add(d, p5);
  program_release(p5);

  opencl_program_cache_clear();
  compile_cache_set_dir(NULL);
  test_remove_dir(dir);
}

/* four threads open the device, build (one kernel of their own) and launch it and a shared kernel on their own
 * buffers at once (clSetKernelArg on the shared cl_kernel must not mix their arguments): every result right */
typedef struct cl_thread_arg { int id; tg_program *shared; bool ok; char err[256]; } cl_thread_arg;

static void *cl_thread_main(void *argp) {
  cl_thread_arg *a = argp;
  enum { N = 4096 };
  const device *d = device_cl(0);
  char src[256], name[32];
  snprintf(name, sizeof name, "own_k%d", a->id);
  snprintf(src, sizeof src, "__kernel void %s(__global float *data0) { int i = get_global_id(0); data0[i] += %d.0f; }\n",
           name, a->id + 1);
  float *x = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float));
  tg_program *own = d ? d->compile(d, name, src) : NULL;
  tg_buffer *b = NULL;
  a->ok = false;
  if (own && x && want) {
    for (int i = 0; i < N; i++) x[i] = want[i] = (float)(i % 64);
    b = buf_from(d, x, N);
  }
  if (b) {
    own->global[0] = N;
    void *bufs[1] = {b->ptr};
    bool ok = true;
    for (int r = 0; r < 3 && ok; r++) {
      ok = d->launch(a->shared, bufs, 1, 0, NULL) == TG_OK && d->launch(own, bufs, 1, 0, NULL) == TG_OK;
      for (int i = 0; i < N; i++) want[i] = want[i] * 2.0f + 1.0f + (float)(a->id + 1);
    }
    ok = ok && d->synchronize(d) == TG_OK && d->copyout(x, b, N * sizeof(float)) == TG_OK;
    for (int i = 0; ok && i < N; i++) ok = x[i] == want[i];
    a->ok = ok;
  }
  if (!a->ok) snprintf(a->err, sizeof a->err, "%s", tg_error());
  program_release(own);
  buffer_release(b);
  free(x);
  free(want);
  return NULL;
}

TEST(test_device_cl_threads_compile_and_launch_at_once) {
  const device *d = cl_or_skip();
  if (!d) return;
  tg_program *shared = d->compile(d, "twice_k", twice_src);
  CHECK(shared, "compile: %s", tg_error());
  if (!shared) return;
  shared->global[0] = 4096;
  pthread_t th[4];
  cl_thread_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (cl_thread_arg){.id = i, .shared = shared};
    pthread_create(&th[i], NULL, cl_thread_main, &args[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) CHECK(args[i].ok, "thread %d: %s", i, args[i].err);
  program_release(shared);
}
