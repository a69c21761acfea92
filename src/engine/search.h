/* search.h — BEAM search for the engine's kernels (search.c). */
#ifndef TG_SEARCH_H
#define TG_SEARCH_H

#include "codegen/codegen.h"
#include "runtime/device.h"

/* the kernel with the actions a beam of width candidates found fastest on dev (cached on disk) */
uop *engine_beam(const device *dev, uop *ast, int width, kernel_info *info);

#endif
