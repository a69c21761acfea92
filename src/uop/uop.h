/* uop.h — the one IR of tgc.
 *
 * A UOp is (op, dtype, src[], arg, aux[]): immutable and interned, so building the same node twice returns
 * the same pointer and equality is pointer equality. The same node type carries the lazy tensor graph
 * (BUFFER, movement ops, REDUCE_AXIS, ALU), the kernel graph the scheduler makes of it (PARAM, RANGE, LOAD,
 * STORE, REDUCE), and the linear program the linearizer makes of that (DEFINE_ACC, ASSIGN, ENDRANGE).
 * Every pass over it is a graph rewrite with a rule table (rewrite.c).
 *
 * Memory: nodes live in one intern table. Nothing is freed while a pass runs; uop_gc() marks from the roots
 * the upper layers register (live tensors, caches) and the nodes other threads pinned (lock.c), and frees
 * every node nothing refers to.
 */
#ifndef TG_UOP_H
#define TG_UOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tg.h"

typedef enum uop_op {
  /* tensor graph */
  OP_BUFFER,      /* arg.i: unique id; aux[0]: element count; buf: the storage (set by the engine) */
  OP_CONST,       /* arg: value (f for floats, i for ints and bool); scalar, shape () */
  OP_RESHAPE, OP_PERMUTE, OP_EXPAND, OP_PAD, OP_SHRINK, OP_FLIP,  /* aux: new shape/order/pairs/flags */
  OP_REDUCE_AXIS, /* arg.i: OP_ADD|OP_MUL|OP_MAX; aux: 1 for each reduced axis (kept as size 1) */
  OP_CONTIGUOUS,  /* forces its source into a buffer */
  OP_DETACH,      /* its source's value; gradients stop here */
  OP_CUSTOM_GRAD, /* src[0]'s value; the gradients of src[1..] come from a rule named by arg.i (CG_*), aux its
                   * parameters. Gone before scheduling: the scheduler sees src[0] alone */
  OP_IOTA,        /* 0, 1, 2, ... (1-d): the element index, computed in the kernel (arange, random counters) */
  OP_COPY,        /* src[0]'s value on another device; arg.i: the destination (a device pointer). Made by tg_to; the
                   * engine realizes src[0] on its own device and copies (engine/place.c): never scheduled */
  OP_MULTI,       /* a tensor split over devices (tg_shard): src: one part per device; arg.i: the split axis (-1:
                   * each part is the whole, replicated); aux: the devices (pointers); shape: the global one. Gone
                   * before scheduling (schedule/multi.c maps the graph over it to one graph per device) */
  /* kernel graph */
  OP_PARAM,       /* arg.i: kernel argument slot; aux[0]: element count */
  OP_RANGE,       /* src[0]: bound (CONST); arg.i: id; aux[0]: axis type */
  OP_LOAD,        /* src: param, index[, valid] */
  OP_STORE,       /* src: param, index, value */
  OP_REDUCE,      /* src: value, ranges...; arg.i: OP_ADD|OP_MUL|OP_MAX */
  OP_SINK,        /* src: the stores of a kernel (or any roots) */
  OP_CORE_ID,     /* the thread index inside the CPU pool (int32) */
  /* linear program */
  OP_DEFINE_ACC,  /* src[0]: initial value; arg.i: id */
  OP_ASSIGN,      /* src: acc, new value */
  OP_ENDRANGE,    /* src[0]: the RANGE it closes */
  OP_DEFINE_LOCAL, /* a scratch buffer of the kernel (per thread on the CPU); arg.i: id; aux[0]: element count.
                    * A STORE into it fills it over the AX_LOOP ranges of its index; LOAD(that STORE, idx) reads it */
  /* ALU: unary */
  OP_CAST, OP_BITCAST, OP_EXP2, OP_LOG2, OP_SIN, OP_SQRT, OP_RECIP, OP_NEG, OP_TRUNC,
  /* ALU: binary */
  OP_ADD, OP_MUL, OP_IDIV, OP_MOD, OP_FDIV, OP_MAX, OP_CMPLT, OP_CMPNE, OP_CMPEQ,
  OP_AND, OP_OR, OP_XOR, OP_SHL, OP_SHR, OP_POW,
  /* ALU: ternary */
  OP_WHERE,
  OP_COUNT
} uop_op;

typedef enum axis_type {
  AX_GLOBAL, AX_REDUCE, AX_THREAD, AX_UPCAST, AX_UNROLL, AX_LOCAL, AX_GROUP, AX_LOOP,
} axis_type;

typedef union uop_arg { int64_t i; double f; } uop_arg;

/* CUSTOM_GRAD rules. CG_CONV_INPUT: src (y, x, w) of a convolution y = conv(detach(x), w) (tensor/conv.c);
 * x's gradient is the transposed convolution of y's gradient, aux (groups, nd, stride[nd], dilation[nd],
 * pads[2*nd]). In the others no gradient flows through src[0], a value computed from the other sources
 * (tensor/elementwise.c): CG_POW src (a^b, a, b), a and b get tinygrad's gradients of POW; CG_RELU src
 * (relu(x), x), x gets g where x > 0, else 0; CG_SIGMOID src (s = sigmoid(x), x), x gets g s (1 - s) */
enum { CG_CONV_INPUT = 1, CG_POW = 2, CG_RELU = 3, CG_SIGMOID = 4 };

typedef struct uop uop;
struct uop {
  uint16_t op;
  uint8_t dtype;
  uint8_t mark;         /* used by the collector */
  int32_t nsrc, naux, ndim;
  uop **src;
  int64_t *aux;
  int64_t *shape;       /* tensor graph only: derived from op, src and aux when the node is built */
  uop_arg arg;
  uint64_t hash;
  uop *next;            /* intern table chain */
  void *buf;            /* BUFFER storage, or a realized value; owned through the release hook */
  uint32_t epoch;       /* a realized value's cache epoch: valid while no buffer was written in place since */
  uint32_t scratch_stamp;  /* scratch belongs to the pass that took this stamp (uop_scratch_stamp) */
  int64_t vmin, vmax;   /* integer value range, valid when has_range */
  bool has_range;
  int32_t scratch;      /* one pass's per-node number, so a walk needs no table of its own */
};

/* a fresh stamp for one pass's use of the nodes' scratch fields: a node whose scratch_stamp differs has no
 * value for this pass yet. The caller holds the library lock for the whole pass (one pass at a time) */
uint32_t uop_scratch_stamp(void);

/* ---- construction ---------------------------------------------------------------------------------- */
/* the interned node; NULL (with tg_error set) on allocation failure or a NULL source */
/* one step of the hash nodes are interned by: h combined with v (also for hashes of graphs built on it) */
uint64_t uop_hash_mix(uint64_t h, uint64_t v);
uop *uop_new(uop_op op, tg_dtype dt, int nsrc, uop *const *src, uop_arg arg, int naux, const int64_t *aux);
uop *uop_new_shaped(uop_op op, tg_dtype dt, int nsrc, uop *const *src, uop_arg arg, int naux,
                    const int64_t *aux, int ndim, const int64_t *shape);
uop *uop_const(tg_dtype dt, double v);          /* CONST, value cast to dt */
uop *uop_const_int(tg_dtype dt, int64_t v);
uop *uop_alu(uop_op op, tg_dtype dt, int nsrc, uop *const *src);
uop *uop_unary(uop_op op, uop *a);              /* dtype of a (CAST/BITCAST: use uop_cast) */
uop *uop_binary(uop_op op, uop *a, uop *b);     /* comparisons give bool; else dtype of a */
uop *uop_where(uop *c, uop *a, uop *b);
uop *uop_cast(uop *a, tg_dtype dt);
uop *uop_replace_src(uop *u, int nsrc, uop *const *src);  /* same op/dtype/arg/aux/shape, new sources */

/* ---- queries --------------------------------------------------------------------------------------- */
bool uop_is_const(const uop *u);
double uop_const_value(const uop *u);
bool uop_is_alu(uop_op op);
bool uop_is_commutative(uop_op op);
int uop_arity(uop_op op);                       /* ALU arity, 0 for others */
const char *uop_op_name(uop_op op);
int uop_op_from_name(const char *name, size_t len);  /* -1 if unknown */
int64_t uop_vmin(uop *u);                       /* integer value range (bool: 0..1) */
int64_t uop_vmax(uop *u);
int64_t uop_numel(const uop *u);                /* product of the shape */

/* toposort of the graph under root, sources first; caller frees the array */
uop **uop_toposort(uop *root, int *n);
/* the same, not entering the sources of nodes for which enter() is false */
uop **uop_toposort_filtered(uop *root, bool (*enter)(uop *u, void *ctx), void *ctx, int *n);

/* ---- dtypes ---------------------------------------------------------------------------------------- */
bool dtype_is_float(tg_dtype dt);
bool dtype_is_int(tg_dtype dt);      /* signed or unsigned integer, not bool */
bool dtype_is_unsigned(tg_dtype dt);
const char *dtype_c_name(tg_dtype dt);
tg_dtype dtype_promote(tg_dtype a, tg_dtype b);  /* tinygrad's least upper dtype */
double dtype_min(tg_dtype dt);
double dtype_max(tg_dtype dt);
/* v as a value of the integer (or bool) dtype dt: two's-complement wrap-around as the generated C converts (64-bit
 * dtypes unchanged) */
int64_t dtype_wrap_int(tg_dtype dt, int64_t v);
double dtype_cast_value(tg_dtype dt, double v);  /* v as the dtype would hold it */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

/* ---- memory ---------------------------------------------------------------------------------------- */
typedef void (*uop_root_fn)(void *ctx);
/* fn calls uop_mark on what it keeps alive; false when out of memory (then nothing is kept) */
bool uop_gc_add_roots(uop_root_fn fn, void *ctx);
/* the same for a cache of graphs (the schedule cache): a node only such roots reach stays, but the value a
 * realize cached on it (its buffer) is dropped, so a cache never keeps a freed tensor's memory */
bool uop_gc_add_weak_roots(uop_root_fn fn, void *ctx);
void uop_gc_remove_roots(uop_root_fn fn, void *ctx);
void uop_mark(uop *u);
void uop_set_buf_release(void (*release)(void *buf));
size_t uop_gc(void);                 /* frees unreachable nodes; returns how many */
size_t uop_gc_maybe(void);           /* collects when the table doubled or much storage was made since the last */
void uop_gc_note_bytes(size_t n);    /* storage of n bytes was attached to nodes */
size_t uop_live_count(void);
void uop_shutdown(void);             /* frees everything (at exit) */

/* ---- threads (lock.c) ------------------------------------------------------------------------------ */
/* The library lock guards the state threads share: the intern table and the collector, the live tensors,
 * the kernel cache, values cached on nodes (realized buffers, value ranges), statistics, rule tables. It is
 * recursive (a depth per thread). Passes (rewrites, scheduling, codegen) run inside a region: a public call
 * that holds it from start to end. */
/* Thread-locals on hot paths use the initial-exec model: an offset from the thread pointer, where libtg.so
 * would otherwise call __tls_get_addr on every access (building and scheduling a chain of tiny kernels
 * through libtg.so: +9% before, +3% after, as linked statically). About 100 bytes of static TLS. */
#if defined(__GNUC__) || defined(__clang__)
#define TG_TLS_FAST __attribute__((tls_model("initial-exec")))
#else
#define TG_TLS_FAST
#endif
extern _Thread_local int lib_lock_depth TG_TLS_FAST, lib_region_depth TG_TLS_FAST;
void lib_mutex_acquire(void);
void lib_mutex_release(void);
static inline void lib_lock(void) {
  if (lib_lock_depth++ == 0) lib_mutex_acquire();
}
static inline void lib_unlock(void) {
  if (--lib_lock_depth == 0) lib_mutex_release();
}
void lib_region_begin(void);  /* lib_lock, and the nodes made until lib_region_end need no pins */
void lib_region_end(void);
/* With the lock held: u stays alive, whatever other threads collect, until this thread's next uop_gc or
 * uop_gc_maybe. uop_pin_dropped pins inside regions too (a tensor let go of u, which its thread may still
 * use after the region); uop_pin does nothing inside one (uop_new pins what it returns with it). */
void uop_pin_dropped(uop *u);
static inline void uop_pin(uop *u) {
  if (!lib_region_depth && u) uop_pin_dropped(u);
}
void pins_release_own(void);  /* this thread is at a collection point: it holds no unrooted node */
bool pins_mark_others(void);  /* with the lock held: marks other threads' pins; true if some could not be kept */

/* ---- realized values ------------------------------------------------------------------------------- */
/* A BUFFER node's storage, or the buffer a computed node was realized to while that is still its value. A
 * realized value is a cache on an interned node: building the same graph again finds it. Writing a buffer
 * in place (an optimizer step, a JIT replay, a host write) may change what such a node computes, so those
 * writes call uop_cache_invalidate and older realized values are dropped when next asked for. All three
 * with the library lock held (a realize, a JIT call, tg_assign). */
void *uop_storage(uop *u);
void uop_set_realized(uop *u, void *buf);  /* u's value is in buf (one reference passes to u) */
void uop_cache_invalidate(void);

/* ---- printing (DEBUG) ------------------------------------------------------------------------------ */
/* a readable multi-line dump of the graph under root, one node a line; caller frees */
char *uop_to_string(uop *root);

/* ---- rewrite engine -------------------------------------------------------------------------------- */
#define RW_MAX_CAPTURES 8
typedef uop *(*rule_fn)(void *ctx, uop *root, uop **cap);
typedef struct rule { const char *pattern; rule_fn fn; } rule;
typedef struct matcher matcher;

/* compiles a rule table once; NULL-terminated (pattern NULL). Pattern syntax, s-expressions:
 *   x          any node, captured (captures are numbered in order of first appearance)
 *   _          any node
 *   (OP a b)   a node of op OP with exactly these sources; OP may be OP1|OP2; a trailing ... allows more
 *   x:OP       x:(OP ...)   capture with an op constraint
 *   3  -1.5    a CONST with that value
 * a name used twice must match the same node; binary commutative ops also match with sources swapped. */
matcher *matcher_new(const rule *rules);
void matcher_free(matcher *m);
/* rewrites the graph under root until no rule applies. top-down (default): sources first, then the node,
 * again on each result; bottom_up: rules at a node before its sources. NULL on allocation failure. */
uop *graph_rewrite(uop *root, const matcher *m, void *ctx, bool bottom_up);
/* root with every use of from replaced by to */
uop *uop_substitute(uop *root, uop *from, uop *to);
/* one rule application at one node, or NULL */
uop *matcher_apply(const matcher *m, void *ctx, uop *u);

/* ---- symbolic simplifier (symbolic.c) --------------------------------------------------------------- */
const matcher *symbolic_matcher(void);  /* constant folding, ranges, div/mod folding, mask removal */
uop *uop_simplify(uop *root);
void symbolic_shutdown(void);       /* frees the compiled rule table */

/* ---- a map from nodes to pointers (memo tables of passes) ---------------------------------------------- */
typedef struct uop_map { uop **keys; void **vals; size_t cap, n; } uop_map;
void *umap_get(const uop_map *m, const uop *k);   /* NULL if absent */
bool umap_put(uop_map *m, uop *k, void *v);        /* false on allocation failure */
void umap_free(uop_map *m);

/* the loops (RANGE ids below 64) a value uses free, as a bit set: a REDUCE binds its own. The memo is per
 * kernel; fail is set when it ran out of memory (the result is then still right, only not remembered) */
typedef struct loop_sets { uop_map memo; bool fail; } loop_sets;
uint64_t loops_free(loop_sets *ls, uop *u);
void loop_sets_free(loop_sets *ls);

/* ---- heap memory (mem.c): every allocation of the library goes through these; a failure returns NULL
 * and records TG_ERR_NOMEM with a message (the caller may replace it with one naming its op) ---------- */
void *mem_alloc(size_t n);                     /* malloc */
void *mem_calloc(size_t n, size_t size);       /* calloc */
void *mem_realloc(void *p, size_t n);          /* realloc */
void *mem_aligned(size_t align, size_t n);     /* aligned_alloc */
char *mem_strdup(const char *s);               /* strdup */
/* an allocation of n bytes a pool of the library serves (node_pool.c) counts as one: false (TG_ERR_NOMEM
 * recorded) when fault injection makes it the one to fail */
bool mem_pooled(size_t n);
/* IR nodes' memory (node_pool.c), zeroed; sizes of up to NODE_POOL_MAX bytes come from free lists, larger
 * ones from the heap. node_free takes the size node_alloc was given. Under the library lock */
void *node_alloc(size_t size);
void node_free(void *p, size_t size);
void node_pool_release(void);  /* at shutdown, every node freed */
/* allocations that failed on this thread so far: code that calls builders whose NULL can also mean "nothing"
 * (a rewrite rule that does not apply, an op without a gradient) compares it before and after */
uint64_t mem_failures(void);
/* fault injection for tests: the k-th allocation from now fails (returns NULL) once; 0 disarms */
void mem_fail_at(int64_t k);
int64_t mem_count(void);   /* allocations since mem_fail_at (counted only while armed) */
bool mem_failed(void);     /* whether the armed allocation has failed */
void mem_on_fail(void (*fn)(int64_t k));  /* fn runs in the allocation that fails (a test's backtrace); NULL: none */
/* true: this thread's allocations neither fail nor count toward mem_fail_at until mem_exempt(false) (nests):
 * checks that run inside a fault test (tests/render_check.c) leave its allocation sequence as it was */
void mem_exempt(bool on);

/* ---- size arithmetic (shape.c) ----------------------------------------------------------------------- */
/* Every shape of the graph has sizes >= 0 whose product (zeros left out, so every stride fits too) is at most
 * UOP_MAX_NUMEL: counts, strides, byte counts and kernel index arithmetic then stay in int64. */
#define UOP_MAX_NUMEL ((int64_t)1 << 60)
/* a + b and a * b of sizes in [0, UOP_MAX_NUMEL] into *out; false (nothing written) for a negative operand or
 * a result past UOP_MAX_NUMEL */
bool size_add(int64_t a, int64_t b, int64_t *out);
bool size_mul(int64_t a, int64_t b, int64_t *out);
/* the element count of a shape into *numel (NULL: not wanted); false for a bad rank, a negative size or a
 * product past UOP_MAX_NUMEL */
bool shape_numel(int ndim, const int64_t *shape, int64_t *numel);
/* shape_numel as a check: false with an error naming op and the shape */
bool shape_check(const char *op, int ndim, const int64_t *shape);

/* ---- helpers shared by the layers ------------------------------------------------------------------ */
void tg_set_error(tg_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tg_debug_level(void);
/* formats a shape as "(2, 3, 4)" into buf */
const char *shape_str(char *buf, size_t n, int ndim, const int64_t *shape);

#endif
