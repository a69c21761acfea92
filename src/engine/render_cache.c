/* render_cache.c — rendered kernels on disk under their AST (render_cache.h).
 *
 * The compile cache keys a shared object by its source, so a warm process still optimized, linearized and
 * rendered every kernel of its first realize to find it: a fifth of the first MNIST step with a filled cache.
 * This cache goes one step earlier: the kernel's source, its info and launch shape, in one file per kernel
 * (disk_blob: checksummed, written whole or not at all) in the compile cache's directory.
 *
 * The key is what the rendered text depends on: the AST (two independent structural hashes: each node's op,
 * dtype, arg, aux and shape over its sources' hashes, so 128 bits in all), the device and its architecture,
 * the code generator's target and choices (threads, vector width, BEAM, NOOPT, TG_NO_NATIVE, TG_CHUNKS) and
 * the code generator itself: TG_CODEGEN_ID, a checksum of the library's sources made at build time, so a
 * rebuilt library never takes an older one's sources. DEBUG=3 and up run the passes (they print them). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"
#include "engine/render_cache.h"
#include "runtime/disk_blob.h"
#include "uop/env.h"

#ifndef TG_CODEGEN_ID
#define TG_CODEGEN_ID 0  /* a build without the Makefile's checksum: no cache (see enabled) */
#endif

static const char MAGIC[8] = {'t', 'g', 'c', '-', 'r', 'n', 'd', '1'};
#define MAX_SOURCE ((size_t)64 << 20)

/* the file's fixed part: kernel_info's fields that outlive the render (the lane is linearize's only), the
 * parameter count and the launch shape; the source follows, NUL-terminated */
typedef struct record {
  char name[96];
  char opts[160];
  int32_t threaded, nthreads, lanes, nparams;
  double flops, bytes, work;
  uint64_t global[3], local[3];
} record;

static uint64_t mix2(uint64_t h, uint64_t v) {  /* splitmix64's finalizer over h ^ v: not uop_hash_mix */
  uint64_t z = (h ^ v) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* the AST's second structural hash (the first is the node's own, uop.c's); false when out of memory */
static bool ast_hash2(uop *ast, uint64_t *out) {
  int n;
  uop **order = uop_toposort(ast, &n);
  uint64_t *h = order ? mem_alloc(((size_t)n + 1) * sizeof *h) : NULL;
  uop_map at = {0};
  bool ok = h != NULL;
  for (int i = 0; ok && i < n; i++) {
    uop *u = order[i];
    uint64_t x = mix2(mix2(mix2(0x7467632d72656e64ULL, u->op), u->dtype), (uint64_t)u->arg.i);
    x = mix2(mix2(x, (uint64_t)u->nsrc), (uint64_t)u->naux);
    for (int k = 0; k < u->naux; k++) x = mix2(x, (uint64_t)u->aux[k]);
    x = mix2(x, (uint64_t)u->ndim);
    for (int k = 0; k < u->ndim; k++) x = mix2(x, (uint64_t)u->shape[k]);
    for (int k = 0; k < u->nsrc && ok; k++) {
      intptr_t j = (intptr_t)umap_get(&at, u->src[k]);  /* position + 1 */
      ok = j > 0;
      if (ok) x = mix2(x, h[j - 1]);
    }
    h[i] = x;
    ok = ok && umap_put(&at, u, (void *)(intptr_t)(i + 1));
  }
  if (ok) *out = h[n - 1];
  umap_free(&at);
  free(h);
  free(order);
  return ok;
}

static _Atomic uint64_t hits;
uint64_t render_cache_hits(void) { return hits; }

static _Atomic bool off;
bool render_cache_enable(bool on) { return !atomic_exchange(&off, !on); }

static bool enabled(void) { return TG_CODEGEN_ID != 0 && !off && env_get()->debug < 3; }

bool render_cache_key(const device *dev, uop *ast, render_key *k) {
  if (!enabled()) return false;
  compile_cache_dir(k->dir, sizeof k->dir);
  uint64_t h2;
  if (!k->dir[0] || !ast_hash2(ast, &h2)) return false;
  const env_values *env = env_get();
  bool gpu = device_is_gpu(dev);
  int nthreads = dev->num_threads(dev);
  opt_target tg = gpu ? codegen_gpu_target() : codegen_host_target(nthreads);
  char ctx[512];
  int w = snprintf(ctx, sizeof ctx, "%s|%s|vec%d|threads%d|%d|beam%d|noopt%d|native%d|chunks%d|%s|%llx", dev->name,
                   dev->arch, tg.vec_bytes, tg.nthreads, nthreads, env->beam, env->noopt, !env->no_native,
                   env->chunks, TG_VERSION_STRING, (unsigned long long)TG_CODEGEN_ID);
  if (w < 0 || (size_t)w >= sizeof ctx) return false;
  k->k1 = hash_bytes(ctx, (size_t)w, ast->hash);
  k->k2 = hash_bytes(ctx, (size_t)w, h2);
  w = snprintf(k->path, sizeof k->path, "%s/render-%016llx%016llx.bin", k->dir, (unsigned long long)k->k1,
               (unsigned long long)k->k2);
  return w > 0 && (size_t)w < sizeof k->path;
}

bool render_cache_get(const render_key *k, kernel_info *info, int *nparams, launch_shape *shape, char **src) {
  void *data;
  size_t n;
  const char *why;
  *src = NULL;
  disk_blob_status ds = disk_blob_read(k->path, MAGIC, k->k1, k->k2, sizeof(record) + MAX_SOURCE, &data, &n, &why);
  if (ds == DISK_BLOB_DAMAGED) remove(k->path);  /* made again by this process's render */
  if (ds != DISK_BLOB_OK) return false;
  record r;
  const char *text = (const char *)data + sizeof r;
  bool ok = n > sizeof r && text[n - sizeof r - 1] == 0 && strlen(text) == n - sizeof r - 1;
  if (ok) memcpy(&r, data, sizeof r);
  ok = ok && memchr(r.name, 0, sizeof r.name) && memchr(r.opts, 0, sizeof r.opts) && r.nparams >= 0 &&
       r.nparams <= 4096 && r.nthreads >= 0 && r.lanes >= 0;
  *src = ok ? mem_alloc(n - sizeof r) : NULL;
  if (*src) {
    memcpy(*src, text, n - sizeof r);
    memset(info, 0, sizeof *info);
    memcpy(info->name, r.name, sizeof info->name);
    memcpy(info->opts, r.opts, sizeof info->opts);
    info->threaded = r.threaded != 0;
    info->nthreads = r.nthreads;
    info->lanes = r.lanes;
    info->flops = r.flops;
    info->bytes = r.bytes;
    info->work = r.work;
    *nparams = r.nparams;
    for (int d = 0; d < 3; d++) {
      shape->global[d] = (size_t)r.global[d];
      shape->local[d] = (size_t)r.local[d];
    }
  } else if (!ok) {
    remove(k->path);  /* a file of the right keys that does not hold a record */
  }
  free(data);
  if (*src) hits++;
  return *src != NULL;
}

void render_cache_put(const render_key *k, const kernel_info *info, int nparams, const launch_shape *shape,
                      const char *src) {
  size_t len = strlen(src);
  if (len > MAX_SOURCE) return;
  record r;
  memset(&r, 0, sizeof r);
  memcpy(r.name, info->name, sizeof r.name);
  memcpy(r.opts, info->opts, sizeof r.opts);
  r.name[sizeof r.name - 1] = r.opts[sizeof r.opts - 1] = 0;
  r.threaded = info->threaded;
  r.nthreads = info->nthreads;
  r.lanes = info->lanes;
  r.nparams = nparams;
  r.flops = info->flops;
  r.bytes = info->bytes;
  r.work = info->work;
  for (int d = 0; d < 3; d++) {
    r.global[d] = shape->global[d];
    r.local[d] = shape->local[d];
  }
  char *buf = mem_alloc(sizeof r + len + 1);
  if (!buf) return;
  memcpy(buf, &r, sizeof r);
  memcpy(buf + sizeof r, src, len + 1);
  disk_blob_write(k->dir, k->path, MAGIC, k->k1, k->k2, buf, sizeof r + len + 1);
  free(buf);
}
