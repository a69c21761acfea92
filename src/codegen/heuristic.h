/* heuristic.h — what the heuristic's two files share: heuristic.c (the general path, tinygrad's
 * hand_coded_optimizations for CPUs) and heuristic_shapes.c (kernel shapes with a path of their own).
 */
#ifndef TG_HEURISTIC_H
#define TG_HEURISTIC_H

#include "codegen/opt.h"

/* below this many loop iterations in total a kernel runs on one thread: waking the pool costs more */
#define THREAD_MIN_WORK 32768

/* the loads that run most often (inside a REDUCE; all loads when there is none) and the stores */
typedef struct hot { uop *loads[64]; int nloads; uop *stores[16]; int nstores; } hot;
void find_hot(uop *ast, hot *h);

/* how the hot loads index loop r: counts of reused (coefficient 0), contiguous (1) and other (gather) accesses */
void load_kinds(const hot *h, uop *r, int *reuse, int *contig, int *gather);
/* the block a reduce loop r of `size` is read in (a quantized weight's scale per 32 values), up to max; 0: none */
int64_t block_of(const hot *h, uop *r, int64_t size, int64_t max);
/* whether every store is contiguous along r */
bool store_contiguous(const hot *h, uop *r);
/* vector accumulators a register tile may keep on this target (AVX-512: 16, AVX2: 12) */
int acc_budget(const kernel_state *ks);
/* apply_opt without the reason; the index among output axes (or reduce axes when red) of the RANGE with id */
bool try_opt(kernel_state *ks, opt_op op, int axis, int64_t arg);
/* marks the UNROLL just applied for one accumulator (expand.c adds its copies into it one at a time) */
void one_accumulator(kernel_state *ks);
int axis_of(kernel_state *ks, int64_t id, bool red);
/* whether a hot load reads a strided window: two output loops step it by s (2..4) times what two reduce loops of
 * at most 11 taps do (a stride-2 convolution's oy and ky, ox and kx) */
bool strided_window(kernel_state *ks, const hot *h);

/* heuristic_shapes.c: each returns whether the kernel is of its shape and got its actions (ks unchanged when not) */
/* a convolution's output channels as lanes; with need_fit only with a register tile of 4+ pixels or a row under a vector */
bool channel_vectors(kernel_state *ks, const hot *h, int lanes, bool need_fit);
bool row_kernel(kernel_state *ks, int lanes);                     /* reduces broadcast along an output loop */
bool matvec(kernel_state *ks, const hot *h, int lanes);           /* x (M <= 4, K) @ W^T */
bool decoded_matvec(kernel_state *ks, const hot *h, int lanes);   /* the same with W decoded from bytes */
bool decoded_gemm(kernel_state *ks, const hot *h, int lanes);     /* x (M, K) @ W^T, W decoded from bytes */

#endif
