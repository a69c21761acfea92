/* search.c — BEAM=n on any device: the callbacks codegen's beam search times candidates with (render in the
 * device's language, compile on the device, run on random inputs: wall time on the CPU, the device's own event
 * time on a GPU), and the kernel it settles on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/beam.h"
#include "engine/search.h"
#include "uop/env.h"

typedef struct search_ctx {
  const device *dev;
  tg_buffer *bufs[64];
  void *ptrs[64];
  int nbufs;
} search_ctx;

static char *s_render(void *ctx, const linear_program *lp, const kernel_info *info, launch_shape *shape) {
  search_ctx *s = ctx;
  if (!device_is_gpu(s->dev)) return render_c(info->name, lp, info);
  return render_gpu(s->dev->kind == DEVICE_CL ? LANG_OPENCL : LANG_CUDA, info->name, lp, info, shape);
}

static void *s_compile(void *ctx, const char *name, const char *src, const launch_shape *shape) {
  search_ctx *s = ctx;
  tg_program *p = s->dev->compile(s->dev, name, src);
  if (p && device_is_gpu(s->dev)) {  /* equal sources have equal shapes: a cached program's is the same */
    memcpy(p->global, shape->global, sizeof p->global);
    memcpy(p->local, shape->local, sizeof p->local);
  }
  return p;
}

static double s_run(void *ctx, void *prog, int nthreads) {
  search_ctx *s = ctx;
  struct timespec a, b;
  double ms = -1;
  bool gpu = device_is_gpu(s->dev);
  clock_gettime(CLOCK_MONOTONIC, &a);
  if (s->dev->launch(prog, s->ptrs, s->nbufs, nthreads > 1 ? nthreads : 1, gpu ? &ms : NULL) != TG_OK) return -1;
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (gpu) return ms >= 0 ? ms * 1e-3 : -1;
  return (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
}

static void s_release(void *ctx, void *prog) { program_release(prog); }

/* random inputs: floats in [0, 1), other types small byte patterns (nothing indexes by data) */
static void fill_random(void *p, size_t nbytes, tg_dtype dt, uint64_t *x) {
  unsigned char *b = p;
  for (size_t i = 0; i < nbytes; i++) {
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    b[i] = (unsigned char)(*x & 3);
  }
  if (dt == TG_FLOAT32)
    for (size_t i = 0; i < nbytes / 4; i++) ((float *)p)[i] = (float)(i % 1021) / 1021.0f;
  if (dt == TG_FLOAT64)
    for (size_t i = 0; i < nbytes / 8; i++) ((double *)p)[i] = (double)(i % 1021) / 1021.0;
}

uop *engine_beam(const device *dev, uop *ast, int width, kernel_info *info) {
  search_ctx s = {.dev = dev};
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return NULL;
  bool ok = true;
  uint64_t x = 0x2545F4914F6CDD1DULL;
  for (int i = 0; i < n && ok; i++) {
    uop *u = order[i];
    if (u->op != OP_PARAM) continue;
    int slot = (int)u->arg.i;
    if (slot >= 64) { ok = false; break; }
    if (s.bufs[slot]) continue;
    size_t nb = (size_t)u->aux[0] * tg_dtype_size((tg_dtype)u->dtype);
    if (!(s.bufs[slot] = dev->alloc(dev, nb ? nb : 1))) { ok = false; break; }
    s.ptrs[slot] = s.bufs[slot]->ptr;
    if (!device_is_gpu(dev)) {
      fill_random(s.ptrs[slot], nb, (tg_dtype)u->dtype, &x);
    } else {  /* filled on the host, copied in */
      void *tmp = mem_alloc(nb ? nb : 1);
      if (tmp) fill_random(tmp, nb, (tg_dtype)u->dtype, &x);
      ok = tmp && dev->copyin(s.bufs[slot], tmp, nb) == TG_OK;
      free(tmp);
      if (!ok) break;
    }
    if (slot + 1 > s.nbufs) s.nbufs = slot + 1;
  }
  free(order);
  for (int i = 0; i < s.nbufs; i++) ok &= s.bufs[i] != NULL;
  kernel_state ks;
  uop *res = NULL;
  opt_target tg = device_is_gpu(dev) ? codegen_gpu_target() : codegen_host_target(dev->num_threads(dev));
  if (ok && ks_init(&ks, ast, tg)) {
    char dir[4096], key[160];
    compile_cache_dir(dir, sizeof dir);
    /* a GPU's results are its architecture's */
    snprintf(key, sizeof key, "%s/vec%d/threads%d%s%.60s", dev->name, ks.tg.vec_bytes, ks.tg.nthreads,
             device_is_gpu(dev) ? "/" : "", device_is_gpu(dev) ? dev->arch : "");
    beam_device bd = {.ctx = &s, .render = s_render, .compile = s_compile, .run = s_run, .release = s_release,
                      .key = key, .cache_dir = dir};
    if (!beam_search(&ks, width, &bd, env_get()->beam_limit)) hand_coded_optimizations(&ks);
    res = codegen_finish(&ks, info);
  }
  for (int i = 0; i < s.nbufs; i++) buffer_release(s.bufs[i]);
  return res;
}
