/* codegen.h — a kernel AST becomes a linear program a renderer can print.
 *
 *   optimize   choose the loop structure: optimization actions (opt.h: UPCAST, UNROLL, THREAD, PADTO, SWAP,
 *              PACK) picked by the heuristic (heuristic.c) or BEAM search (beam.h), then UPCAST/UNROLL loops
 *              expanded into registers and the lanes of machine vectors (expand.c)
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
  int nthreads;       /* threads it runs on when threaded (0: the whole pool) */
  double flops;       /* ALU operations executed, for DEBUG=2 */
  double bytes;       /* bytes of the buffers it reads and writes */
  double work;        /* loop iterations of the whole kernel, registers' included (sizes chunks: cpu.c) */
  uop *lane;          /* the RANGE whose values are the lanes of machine vectors, or NULL */
  int lanes;
  char opts[160];     /* the actions applied, for DEBUG */
} kernel_info;

/* the AST with dtypes the target lacks computed in ones it has: bfloat16 in float32, and float16 too when
 * half_alu is false (GPU dialects) */
uop *decompose_dtypes(uop *ast, bool half_alu);

/* the AST with its loop structure chosen and UPCAST/UNROLL loops expanded (opt.h): the heuristic's actions,
 * or BEAM's, or none with NOOPT=1 (then only the outermost loop is split across nthreads threads) */
uop *codegen_optimize(uop *ast, int nthreads, kernel_info *info);

typedef struct linear_program {
  uop **ops;
  uop **bounds;       /* per op: for a RANGE, the run-time count its loop runs (trim.c: min(N, a point past
                       * which its reduces' bodies are their identities), computed before it), else NULL */
  uop **starts;       /* per op: for a RANGE, the run-time value its loop starts from (trim.c: a point before
                       * which its reduces' bodies are their identities), else NULL (0) */
  int n;
  int nparams;
  int nouts;          /* the params stored into are 0..nouts (the others are read only: const) */
  uop *lane;          /* the vector lane RANGE (never a loop), or NULL */
  int lanes;
  uop_map vec;        /* node -> non-NULL when its value is a vector of `lanes` */
  uop_map accs;       /* REDUCE -> its DEFINE_ACC (aux[0] 1: a vector accumulator) */
} linear_program;

/* STORE's arg in a linear program for a transposing block copy into a PACK's buffer (linearize.c): sources
 * (local, dst index, source param, src index, source row stride, buffer row stride, the fill STORE it stands
 * for); it copies one lanes x lanes block, element (i, j) of the source block to (j, i) of the buffer's */
#define STORE_TBLOCK (-3)

/* STORE's arg for a vector of a PACK's fill read every second element (linearize.c): sources (local, dst index,
 * source param, src index, the fill STORE it stands for); lane l of the buffer's vector at dst is the source's
 * element src + 2 l (a strided convolution's input panel) */
#define STORE_EVERY2 (-4)

/* LOAD's arg for a vector read every second element (expand.c): lane l reads the element at index + 2 l (a
 * stride-2 max pool's window); rendered as two vector loads and a shuffle of their even lanes, under a mask
 * that has the odd ones off, so no lane reads past what the gather it replaces would */
#define LOAD_EVERY2 3

/* LOAD's arg for a vector of runs (expand.c): lane l reads the element at index + l / g, g dividing the lanes,
 * so lanes / g consecutive elements each repeated g times; load_runs gives g back (0: not such a load) */
#define LOAD_RUNS(g) (16 * (int64_t)(g))
static inline int64_t load_runs(const uop *u) { return u->op == OP_LOAD && u->arg.i >= 32 ? u->arg.i / 16 : 0; }

/* whether u's value in p is a vector */
bool lp_is_vec(const linear_program *p, const uop *u);

/* the linear program of an optimized AST; false with tg_error set */
bool linearize(uop *ast, linear_program *out, kernel_info *info);
void linear_program_free(linear_program *p);

/* per op of p, for a LOAD that streams a large buffer in a reduction inside the THREAD loop: how many elements
 * ahead to prefetch (its index's stride along that loop: what it reads one iteration later), else 0; NULL when
 * no load needs one (prefetch.c). Caller frees */
int64_t *plan_prefetch(const linear_program *p);

/* A row group (rows.c): n vector accesses of a tile that gather or scatter along a stride, member k at index
 * root + c0 + k whose lane l is element k of lane l's row (at root[l] + c0), read or written as those rows
 * with a transpose in registers. A load group is rendered at its first member, a store group at its last. */
#define ROW_MAX 16
typedef struct row_group {
  int n;                     /* members, 2..lanes */
  int width;                 /* the power of two >= n the transpose works in (<= lanes) */
  int64_t stride;            /* between two lanes' rows, >= n */
  int64_t c0;
  const uop *root;           /* a vector of int32 indices: root[l] + c0 starts lane l's row */
  const uop *gate;           /* a scalar gate every member has, or NULL */
  bool store;
  int at;                    /* the op that renders the group */
  int pos[ROW_MAX];          /* member k is op pos[k] of the program */
} row_group;
typedef struct row_plan {
  int n;
  row_group *groups;
  int *group_of;             /* per op of the program: its group, or -1 */
} row_plan;
/* the row groups of p (NULL: none, or no memory to plan them: the accesses stay as they are) */
row_plan *plan_rows(const linear_program *p);
void row_plan_free(row_plan *r);

#endif
