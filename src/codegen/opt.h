/* opt.h — optimization actions on a kernel's loops (tinygrad's OptOps), the state they act on, and the
 * passes that choose them (heuristic.c, beam.c) and carry them out (expand.c).
 *
 * A kernel's loops are its RANGE nodes. An action splits one RANGE r of size n by k into two new RANGEs,
 *   r = r_outer * k + r_inner
 * substituted everywhere in the AST (a REDUCE's range list gets both, outer first), then simplified; or it
 * retypes a RANGE (THREAD), or pads it (PADTO, with masks). The axis types after the actions say what each
 * loop becomes: AX_UPCAST / AX_UNROLL loops are expanded into registers (expand.c), one of them into the
 * lanes of a machine vector; AX_THREAD is split across the thread pool; the rest stay loops.
 *
 * SWAP(a, b) exchanges the nesting of two output loops. PACK(a) is cache blocking for the CPU: a load inside a
 * REDUCE that does not depend on output loop a, and whose index uses only loops opened before a and the
 * REDUCE's own and register loops, is copied once per outer iteration into a contiguous per-thread buffer
 * (DEFINE_LOCAL) before loop a opens, and read from there (matmul: the panel of B a core works on, which
 * with B's row stride of 4 KiB would not even stay in L2 by associativity). Measured on matmul 1024,
 * one thread: 65 GFLOP/s reading B in place, 153 from the packed panel. PACK(a, 1) puts the UPCAST loops
 * innermost in the buffer (a transposing copy), PACK(a, 0) keeps the source's order. PACKs come last; a
 * second one packs the largest load left (another reduce's: a residual's fused 1x1 projection) into a buffer
 * of its own.
 *
 * Axis numbering, as tinygrad's: UPCAST, THREAD, LOCAL and PADTO count the output loops (GLOBAL/THREAD, in
 * loop order) then the reduce loops; UNROLL, GROUP and GROUPTOP count the reduce loops only.
 */
#ifndef TG_OPT_H
#define TG_OPT_H

#include "codegen/codegen.h"

/* the largest panel PACK copies, in elements: 256 KiB of float32, a quarter of a Zen 5 L2, and room on a
 * thread's stack. A transposing PACK (x @ W^T: W's rows of the vector loop over the whole reduce) may take
 * 1 MiB: one vector of a down projection's rows (16 x 11008) did not fit 256 KiB, and the kernel without its
 * panel ran 3-5x slower (m = 128: 500-1200 ms -> 168-215, 2 threads); only the cores that run touch theirs */
#define PACK_MAX_ELEMS 65536
#define PACK_T_MAX_ELEMS 262144
/* a convolution's weight panel (heuristic_shapes.c's channel block x its reduce) at most: half of the 1 MiB L2
 * of Zen 4 and Zen 5, the other half for the weight's lines its copy reads */
#define CONV_PANEL_MAX_BYTES (512 * 1024)

typedef enum opt_op {
  OPT_UPCAST, OPT_UNROLL, OPT_THREAD, OPT_PADTO, OPT_SWAP, OPT_PACK, OPT_LOCAL, OPT_GROUP, OPT_GROUPTOP, OPT_COUNT
} opt_op;
typedef struct opt { opt_op op; int axis; int64_t arg; } opt;

#define KS_MAX_OPTS 16
#define KS_MAX_AXES 64
/* most register copies (product of upcast and unroll sizes, vector lanes included) a kernel may have: a 3x3
 * convolution's tile on AVX-512, 2 channel vectors (32 lanes) x 8 pixels x its 3 taps unrolled, is 768; the 7x7
 * stride-2 stem's, its 7 taps unrolled, 1792 */
#define KS_MAX_EXPAND 2048
/* most operations of a kernel once its copies are expanded: a random-number kernel (about 560 operations an
 * element) upcast 16 x 32 by BEAM was 290000 lines of C that gcc compiled for minutes in 3 GB; the heuristic's
 * largest kernels (a transformer block's) have about 36000 */
#define KS_MAX_EXPANDED_NODES 65536

/* what the target offers to the actions */
typedef struct opt_target {
  int nthreads;       /* cores of the pool */
  int vec_bytes;      /* bytes of one machine vector (64 with AVX-512) */
  bool has_local;     /* workgroups and local memory (GPUs) */
} opt_target;

typedef struct kernel_state {
  uop *ast;
  opt_target tg;
  opt applied[KS_MAX_OPTS];
  int napplied;
  int nthreads;       /* threads of the THREAD axis, 1 when none */
} kernel_state;

typedef struct axis_info {
  uop *r;
  int64_t size;
  int type;           /* axis_type */
} axis_info;

bool ks_init(kernel_state *ks, uop *ast, opt_target tg);
/* the loops of the kernel: output loops (GLOBAL, THREAD, LOOP) in loop order, then reduce loops, then
 * UNROLL, then UPCAST; returns the count, *nout the output loops and *nred the reduce loops */
int ks_axes(const kernel_state *ks, axis_info *ax, int *nout, int *nred);
/* applies o; false with the reason in why (at least 128 bytes) when it does not apply; ks is unchanged then */
bool apply_opt(kernel_state *ks, opt o, char *why);
const char *opt_name(opt_op op);
/* "UPCAST(1,4) UNROLL(0,4) THREAD(0,2)" into buf */
const char *opts_str(const kernel_state *ks, char *buf, size_t n);

/* r split by k: r_outer (size n/k, r's type and id) * k + r_inner (size k, inner_type, a new id); NULL on
 * failure (more than 64 loops) */
uop *split_range(uop *ast, uop *r, int64_t k, int inner_type, uop **outer, uop **inner);
/* uop_simplify, then REDUCE range lists cleaned of loops the simplifier folded away */
uop *kernel_simplify(uop *ast);
/* whether u uses the RANGE r */
bool uop_uses(uop *u, uop *r);
bool uop_uses_memo(uop *u, uop *r, uop_map *memo);  /* the same with a memo kept by the caller for one r */
/* the largest range id in ast, -1 if none; -2 when memory ran out (TG_ERR_NOMEM is set) */
int64_t max_range_id(uop *ast);

/* the loops every REDUCE of the kernel uses, all bits when there is none; an output loop not among them is
 * one that reduces are broadcast along (a row kernel: softmax's output loop) */
uint64_t reduce_loops(uop *ast);

/* the coefficient of r in e when e is linear in r (sums, products by constants); false otherwise */
bool lin_coef(uop *e, uop *r, int64_t *coef);
/* idx as *base plus the returned constant (prefetch.c) */
int64_t split_const(const uop *idx, const uop **base);
/* whether x is r plus a sum that is a multiple of m for every value of its loops */
bool r_plus_multiple(uop *x, uop *r, int64_t m);
/* g (>= 2) when e is base + r / g for every value of r, base not using r: lanes along r read runs of g equal
 * values from consecutive elements (a max pool's gradient read per pixel of its window); 0 otherwise */
int64_t runs_of(uop *e, uop *r);
/* runs_of(idx, r) when `load` at idx can be read as a vector of `lanes` in runs (LOAD_RUNS: an unmasked
 * float32 or int32 load, runs of a proper divisor of the lanes); 0 otherwise */
int64_t runs_load(uop *load, uop *idx, uop *r, int lanes);
/* whether `load` at idx reads every second element along r: a float32 kernel argument at base + 2 r, which
 * lanes along r read as two vectors and a shuffle (LOAD_EVERY2) */
bool every2_load(uop *load, uop *idx, uop *r);

/* trim.c: the least value of red's loop r from which red's body is the reduce's identity, as an expression of
 * the loops in open (not r) and values outside them; NULL when no such point is known */
uop *trim_bound(uop *red, uop *r, uint64_t open, loop_sets *ls);
/* the least value of red's loop r below which red's body is the reduce's identity (at least 1), as trim_bound's;
 * NULL when none is known */
uop *trim_start(uop *red, uop *r, uint64_t open, loop_sets *ls);
/* guards[REDUCE] = c for each reduce whose value is used only where c holds (inside where(c, f, constant)),
 * from the kernel's nodes; false when out of memory */
bool trim_guards(uop *ast, uop_map *guards);
/* bound b (NULL: r's size) of reduce loop r made 0 where guard g does not hold (in no lane of a vector g); NULL
 * when g cannot be a scalar bound (it reads vector loads) */
uop *trim_guarded(uop *b, uop *g, uop *r, uop *lane, int lanes);
/* b clamped to r's range [0, N], simplified; NULL when b is NULL or the clamp is N itself (nothing to trim) */
uop *trim_clamp(uop *b, uop *r);

/* the target of generated C on this host (vector width from the CPU; TG_VEC_BYTES overrides) */
opt_target codegen_host_target(int nthreads);
/* the target of a GPU kernel (render_gpu) */
opt_target codegen_gpu_target(void);
/* codegen_optimize for any target */
uop *codegen_optimize_for(uop *ast, opt_target tg, kernel_info *info);
/* names the kernel, records its actions in info and expands it: the AST to linearize */
uop *codegen_finish(kernel_state *ks, kernel_info *info);

/* GPU: every REDUCE over a GROUP range as a partial per work item, combined through local memory (opt.c) */
uop *lower_groups(uop *ast);

/* the heuristic (heuristic.c): actions for a kernel without search */
void hand_coded_optimizations(kernel_state *ks);

/* expansion (expand.c): UPCAST/UNROLL loops become copies with constant indices, except one loop of exactly
 * vec_lanes iterations whose values become machine vectors; *lane is that RANGE (NULL: all scalar) */
uop *expand_kernel(uop *ast, int vec_bytes, uop **lane);

#endif
