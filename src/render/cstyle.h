/* cstyle.h — what the C-style renderers share (cstyle.c): the output buffer, the names of values, constants,
 * scalar ALU expressions and the scalar statements (loops, accumulators, loads, stores). A language is a
 * dialect: its type names, literal suffixes, math functions and special values, how a loop over an output
 * axis opens (a thread split on the CPU, a global index on a GPU) and, for C only, the vector forms of ops.
 * c.c is the CPU's C, gpu.c OpenCL C and CUDA C. Private to render/.
 */
#ifndef TG_RENDER_CSTYLE_H
#define TG_RENDER_CSTYLE_H

#include "render/render.h"

typedef struct out { char *s; size_t n, cap; bool oom; } out;

/* appends printf-style text; on failure o->oom is set and later calls do nothing */
void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a new string (caller frees), NULL on failure */
char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

typedef struct rctx rctx;

typedef struct dialect {
  const char *lang;                     /* "C", "OpenCL C", "CUDA C": for error messages */
  const char *(*type)(tg_dtype dt);     /* the type of a value of dt (a buffer element's is param_type) */
  const char *(*param_type)(tg_dtype dt);
  const char *i64_suffix, *u64_suffix;  /* of 64-bit integer literals */
  const char *nan32, *inf32, *nan64, *inf64;  /* quiet NaN and +infinity as expressions */
  /* a math function of one float32 / float64 argument: printf formats taking (name, arg), name one of sqrt,
   * exp2, log2, sin, trunc, pow ("__builtin_%sf(%s)" for C) */
  const char *math32, *math64;
  /* float16 values are the dialect's own half type (C's tg_half); else they are 16-bit storage, like
   * bfloat16 everywhere, converted with tg_h2f/tg_f2h and never computed on (decompose_dtypes) */
  bool half_native;
  /* the bits of a as type `to` (same size) */
  char *(*bitcast)(tg_dtype from, tg_dtype to, const char *a);
  /* opens the loop of a RANGE (not the vector lane) named nm with bound text; the body follows at depth+1 */
  void (*open_range)(rctx *c, uop *u, const char *nm, const char *start, const char *bound);
  /* a barrier of the work items of a group for local memory (GPUs), placed around each store into it; NULL: none */
  const char *barrier;
  /* renders a DEFINE_LOCAL; NULL: the dialect has none (an internal error) */
  void (*define_local)(rctx *c, uop *u);
  /* renders u when it is a vector op (C only): true when it did */
  bool (*vec_op)(rctx *c, uop *u, int pos);
} dialect;

struct rctx {
  const dialect *d;
  uop_map names;  /* node -> its expression text (owned) */
  const linear_program *p;
  out *o;
  int depth;
  bool oom;       /* set with tg_error when rendering failed */
  void *dctx;     /* the dialect's own state */
  const uop_map *wide;  /* scalar int32 values declared 64-bit (C's address arithmetic: c.c plan_wide), or NULL */
};

/* marks the render failed with an internal error naming the language */
void render_fail(rctx *c, const char *what, const uop *u);
void set_name(rctx *c, uop *u, char *s);  /* takes s; NULL marks the render failed (out of memory) */
const char *name_of(rctx *c, uop *u);     /* a value's text; constants are made on first use */
void indent(rctx *c);
const char *ctype(rctx *c, tg_dtype dt);
/* the scalar expression of an ALU node over the source texts s; NULL when the dialect has none */
char *alu_text(rctx *c, uop *u, const char *const *s);
/* renders op pos of the program: statements and scalar values, vector ones through d->vec_op */
void render_op(rctx *c, uop *u, int pos);
/* the parameters' PARAM nodes by slot (caller frees), named data0, data1, ...; NULL on failure */
uop **render_params(rctx *c);
/* frees the names; returns o's text, or NULL (with tg_error set) when anything failed */
char *render_finish(rctx *c, out *o);

/* bfloat16 (tg_bf2f, tg_f2bf) and float16 (tg_h2f, tg_f2h) <-> float32 on 16-bit storage (unsigned short
 * bits), both rounding to nearest even, NaN kept NaN. They need the dialect's prelude to define
 * TG_F2U(float) -> unsigned int bits and TG_U2F(bits) -> float, and TG_INLINE. */
extern const char cstyle_bf16_helpers[];
extern const char cstyle_half_helpers[];
/* which dtypes the program's values and operands have (a prelude brings only the helpers it uses) */
void program_dtypes(const linear_program *p, bool has[TG_DTYPE_COUNT]);

/* c_rows.c: the C renderer's row groups (codegen/rows.c): the helpers the plan's groups use, for the vector
 * header; and op pos when it is a group's member (true: rendered, the group at its op, else nothing or the
 * member's name), false otherwise */
void c_rows_header(out *o, const row_plan *r, int lanes);
bool c_rows_op(rctx *c, const row_plan *r, int pos);

#endif
