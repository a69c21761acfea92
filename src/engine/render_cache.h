/* render_cache.h — rendered kernels kept on disk under their AST (render_cache.c): a process that realizes a
 * graph an earlier one did gets each kernel's source, info and launch shape back instead of optimizing,
 * linearizing and rendering it again. */
#ifndef TG_RENDER_CACHE_H
#define TG_RENDER_CACHE_H

#include "codegen/codegen.h"
#include "render/render.h"
#include "runtime/device.h"

/* the rendered kernel of ast for dev (*src mem_alloc'd: the caller frees it), or false: none kept, the cache
 * off, or no memory to read it (never an error: the caller renders) */
bool render_cache_get(const device *dev, uop *ast, kernel_info *info, int *nparams, launch_shape *shape, char **src);
/* keeps what kernel_source made for ast on dev; a failure keeps nothing (the cache is an optimisation) */
void render_cache_put(const device *dev, uop *ast, const kernel_info *info, int nparams, const launch_shape *shape,
                      const char *src);
/* kernels render_cache_get has served since the process started (tests) */
uint64_t render_cache_hits(void);
/* turns the cache on or off for this process (on by default; tests that sweep the passes' allocations turn
 * it off); returns whether it was on */
bool render_cache_enable(bool on);

#endif
