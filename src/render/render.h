/* render.h — linear programs become source text, one file per language. */
#ifndef TG_RENDER_H
#define TG_RENDER_H

#include "codegen/codegen.h"

/* C for the CPU device: `void name(void **bufs, long long core_id, long long ncores)`; caller frees */
char *render_c(const char *name, const linear_program *p, const kernel_info *info);

/* exp2, log2, sin of float vector lanes as C (c_math.c), for kernels with vector types */
extern const char render_c_vec_math[];

#endif
