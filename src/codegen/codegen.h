/* codegen.h — a kernel AST becomes a linear program a renderer can print.
 *
 *   optimize   choose the loop structure (which axis the thread pool splits; later UPCAST/UNROLL/BEAM)
 *   linearize  order the nodes into loops: each RANGE opens a loop, a REDUCE becomes a register
 *              accumulator (DEFINE_ACC, ASSIGN in its loops), every value is placed in the outermost loop
 *              whose variables it uses
 * The result is an array of UOps that render/ turns into source text.
 */
#ifndef TG_CODEGEN_H
#define TG_CODEGEN_H

#include "uop/uop.h"

typedef struct kernel_info {
  char name[96];
  bool threaded;      /* the outermost loop is split across the pool by core_id */
  double flops;       /* ALU operations executed, for DEBUG=2 */
  double bytes;       /* bytes of the buffers it reads and writes */
} kernel_info;

/* the AST with dtypes the target lacks computed in ones it has (bfloat16 in float32) */
uop *decompose_dtypes(uop *ast);

/* the AST with its loop structure chosen (the axis split across nthreads threads) */
uop *codegen_optimize(uop *ast, int nthreads, kernel_info *info);

typedef struct linear_program {
  uop **ops;
  int n;
  int nparams;
} linear_program;

/* the linear program of an optimized AST; false with tg_error set */
bool linearize(uop *ast, linear_program *out, kernel_info *info);
void linear_program_free(linear_program *p);

#endif
