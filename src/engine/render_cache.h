/* render_cache.h — rendered kernels kept on disk under their AST (render_cache.c): a process that realizes a
 * graph an earlier one did gets each kernel's source, info and launch shape back instead of optimizing,
 * linearizing and rendering it again. */
#ifndef TG_RENDER_CACHE_H
#define TG_RENDER_CACHE_H

#include "codegen/codegen.h"
#include "render/render.h"
#include "runtime/device.h"

/* where ast's rendering for dev is kept: the file and its two keys */
typedef struct render_key {
  char dir[4096], path[4200];
  uint64_t k1, k2;
} render_key;

/* *k for ast on dev; false when the cache is off (no directory, DEBUG=3, no TG_CODEGEN_ID) or out of memory */
bool render_cache_key(const device *dev, uop *ast, render_key *k);
/* the rendered kernel kept under k (*src mem_alloc'd: the caller frees it), or false: none kept, or no memory
 * to read it (never an error: the caller renders) */
bool render_cache_get(const render_key *k, kernel_info *info, int *nparams, launch_shape *shape, char **src);
/* keeps what kernel_source made under k; a failure keeps nothing (the cache is an optimisation) */
void render_cache_put(const render_key *k, const kernel_info *info, int nparams, const launch_shape *shape,
                      const char *src);
/* kernels render_cache_get has served since the process started (tests) */
uint64_t render_cache_hits(void);
/* turns the cache on or off for this process (on by default; tests that sweep the passes' allocations turn
 * it off); returns whether it was on */
bool render_cache_enable(bool on);

#endif
