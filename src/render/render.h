/* render.h — linear programs become source text, one file per language. */
#ifndef TG_RENDER_H
#define TG_RENDER_H

#include "codegen/codegen.h"

/* C for the CPU device: `void name(void **bufs, long long core_id, long long ncores)`; caller frees */
char *render_c(const char *name, const linear_program *p, const kernel_info *info);

typedef enum render_lang { LANG_C, LANG_OPENCL, LANG_CUDA } render_lang;

/* how a GPU kernel is launched: global work items per dimension (a multiple of local) in groups of local */
typedef struct launch_shape { size_t global[3], local[3]; } launch_shape;

/* OpenCL C (`__kernel void name(__global T *data0, ...)`) or CUDA C (`extern "C" __global__ void name(T *data0,
 * ...)`) for a program without machine vectors; *shape gets its launch shape. Caller frees; NULL with tg_error */
char *render_gpu(render_lang lang, const char *name, const linear_program *p, const kernel_info *info,
                 launch_shape *shape);

/* exp2, log2, sin of float vector lanes as C (c_math.c), for kernels with vector types */
extern const char render_c_vec_math[];

#endif
