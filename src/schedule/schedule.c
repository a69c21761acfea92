/* schedule.c — which nodes are stored, and the kernels that store them, in dependency order.
 *
 * A node gets a buffer when it is an output, a CONTIGUOUS, or a REDUCE_AXIS whose result reaches its
 * consumers through an EXPAND (x - x.max(): recomputing the reduce for every broadcast element would
 * multiply its work) unless its one kernel computes it once per row anyway (row fusion, below), or through a
 * PAD that at least doubles its size (the padded kernel runs the reduce for every element, valid or not: a
 * KV-cache row placed among 512), or a reduce (or a costly value) that several nodes read, unless they are
 * all one kernel's elementwise epilogue (shared epilogues, below); a value read through a view that reorders it
 * into fewer axes is stored as that view (readers' layout, below). Everything else fuses: elementwise chains,
 * the work before a reduce, the epilogue after it, and small reduces nested in reduces (matmul -> relu -> sum is
 * one kernel; a long one, a pooled convolution, is stored: big_nested).
 */
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

static bool enter_no_storage(uop *u, void *ctx) { return !node_has_storage(u); }

/* A big reduction into a small output runs as two kernels, as tinygrad's split_reduceop: the first
 * reduces d contiguous chunks in parallel, the second the d partial results. Besides using every core,
 * the partial sums keep float32 sums of millions of elements exact to rounding (one long float32
 * accumulator stops growing at 2^24). */
#define SPLIT_THRESHOLD 32768
/* A reduce over several axes (batch and pixels: a convolution's weight gradient, batchnorm's statistics) is
 * split along its first reduced axis into chunks whose inputs stay in cache: unsplit, every output element
 * streamed all of its inputs again (conv 32->32 5x5, batch 512: 13 MB of output gradient re-read for each of
 * 800 weight columns; 32 images of 64 channels at 56x56: 6.4 MB per 3x3 weight column), also when the
 * output is as big as the reduce (MNIST conv3 and conv4 weight gradients: 45-65 ms unsplit, 15-28 split).
 * The partial results are at most SPLIT_PARTIAL elements. */
#define SPLIT_CHUNKS 128
#define SPLIT_PARTIAL (4 << 20)

static uop *split_reduce(uop *r) {
  uop *x = r->src[0];
  int axis = -1, nred = 0;
  int64_t total = 1;
  for (int i = 0; i < r->ndim; i++)
    if (r->aux[i] && x->shape[i] > 1) {
      if (axis < 0) axis = i;
      nred++;
      total *= x->shape[i];
    }
  if (axis < 0 || x->ndim + 1 > TG_MAX_DIMS) return r;
  int64_t n = x->shape[axis], out = uop_numel(r), d = 0;
  if (nred == 1) {
    if (n < SPLIT_THRESHOLD || n / (out ? out : 1) < SPLIT_THRESHOLD) return r;
    for (int64_t c = 256; c >= 8 && !d; c--)
      if (n % c == 0) d = c;
  } else {
    if (total < SPLIT_THRESHOLD / 2) return r;
    for (int64_t c = SPLIT_CHUNKS; c >= 8 && !d; c--)
      if (n % c == 0 && c * out <= SPLIT_PARTIAL) d = c;
  }
  if (!d) return r;
  int64_t shape[TG_MAX_DIMS];
  bool inner[TG_MAX_DIMS] = {0}, outer[TG_MAX_DIMS] = {0};
  for (int i = 0, k = 0; i < x->ndim; i++) {
    if (i == axis) {
      shape[k] = d;
      outer[k++] = true;
      shape[k] = n / d;
      inner[k++] = true;
    } else {
      inner[k] = r->aux[i] != 0;  /* the other reduced axes go to the first kernel */
      shape[k++] = x->shape[i];
    }
  }
  uop *split = uop_new_shaped(OP_RESHAPE, (tg_dtype)x->dtype, 1, &x, (uop_arg){0}, x->ndim + 1, shape, x->ndim + 1, shape);
  int64_t aux_in[TG_MAX_DIMS], aux_out[TG_MAX_DIMS], s1[TG_MAX_DIMS], s2[TG_MAX_DIMS];
  for (int i = 0; i <= x->ndim; i++) {
    aux_in[i] = inner[i];
    aux_out[i] = outer[i];
    s1[i] = inner[i] ? 1 : shape[i];
    s2[i] = inner[i] || outer[i] ? 1 : shape[i];
  }
  uop *part = uop_new_shaped(OP_REDUCE_AXIS, (tg_dtype)r->dtype, 1, &split, r->arg, x->ndim + 1, aux_in, x->ndim + 1, s1);
  part = part ? uop_new_shaped(OP_CONTIGUOUS, (tg_dtype)r->dtype, 1, &part, (uop_arg){0}, 0, NULL, part->ndim, part->shape) : NULL;
  uop *whole = part ? uop_new_shaped(OP_REDUCE_AXIS, (tg_dtype)r->dtype, 1, &part, r->arg, x->ndim + 1, aux_out, x->ndim + 1, s2) : NULL;
  return whole ? uop_new_shaped(OP_RESHAPE, (tg_dtype)r->dtype, 1, &whole, (uop_arg){0}, r->ndim, r->shape, r->ndim, r->shape) : NULL;
}

/* the graph under root with big reductions split; nodes with storage are not entered */
static uop *rewrite_reductions(uop *root, uop_map *memo) {
  int nn;
  uop **order = uop_toposort_filtered(root, enter_no_storage, NULL, &nn);
  if (!order) return NULL;
  uop *tmp[TG_MAX_DIMS + 4], *res = NULL;
  for (int i = 0; i < nn; i++) {
    uop *u = order[i], *v = u;
    if (!node_has_storage(u)) {
      uop **src = u->nsrc <= (int)(sizeof tmp / sizeof *tmp) ? tmp : mem_alloc((size_t)u->nsrc * sizeof *src);
      if (!src) goto out;
      for (int k = 0; k < u->nsrc; k++) src[k] = umap_get(memo, u->src[k]);
      v = uop_replace_src(u, u->nsrc, src);
      if (src != tmp) free(src);
      if (v && v->op == OP_REDUCE_AXIS) v = split_reduce(v);
      if (v && v->op == OP_CUSTOM_GRAD) v = v->src[0];  /* its other sources matter to gradients only */
      if (!v) goto out;
    }
    if (!umap_put(memo, u, v)) goto out;
  }
  res = umap_get(memo, root);
out:
  free(order);
  return res;
}

/* Whether recomputing u for every element of a broadcast costs more than storing it: u does real work
 * (many ALU ops, or several inputs combined). An upstream gradient broadcast over a convolution's
 * weight window is the case that decided it: recomputed per (cin, ky, kx) it multiplied a step's work
 * by 40. Cheap nodes (relu of one load, a bias add) stay fused. */
#define EXPENSIVE_ALU 8
#define EXPENSIVE_LEAVES 3
#define EXPENSIVE_WALK 256

static bool expensive(uop *u, const uop_map *realized, bool only_reduce) {
  struct { uop *x; bool bcast; } stack[EXPENSIVE_WALK];
  uop_map seen = {0};
  int sp = 0, alu = 0, leaves = 0, visited = 0;
  static char yes;
  stack[sp].x = u;
  stack[sp++].bcast = false;
  bool big = false;
  while (sp && !big) {
    sp--;
    uop *x = stack[sp].x;
    bool bcast = stack[sp].bcast;
    if (umap_get(&seen, x)) continue;
    if (!umap_put(&seen, x, &yes) || ++visited >= EXPENSIVE_WALK) { big = true; break; }
    /* a CONTIGUOUS is stored whatever its readers (it may not be marked yet: readers are decided first) */
    if (x != u && (node_has_storage(x) || umap_get(realized, x) || x->op == OP_CONTIGUOUS)) { leaves++; continue; }
    /* a reduce seen through a broadcast is stored, or computed once per row (row fusion): a leaf; any other
     * means real work */
    if (x->op == OP_REDUCE_AXIS) {
      if (bcast) { leaves++; continue; }
      big = true;
      break;
    }
    /* a scalar (a variable's value clamped to its bounds) is computed once per kernel, outside its loops */
    if (uop_is_alu((uop_op)x->op) && uop_numel(x) > 1) alu++;
    for (int k = 0; k < x->nsrc && sp < EXPENSIVE_WALK; k++) {
      stack[sp].x = x->src[k];
      stack[sp++].bcast = bcast || x->op == OP_EXPAND;
    }
  }
  umap_free(&seen);
  if (only_reduce) return big && visited < EXPENSIVE_WALK;
  return big || alu >= EXPENSIVE_ALU || (leaves >= EXPENSIVE_LEAVES && alu >= 2);
}

/* ---- row fusion ----------------------------------------------------------------------------------------
 * A reduce broadcast back along the axes it reduced (x - max(x, -1), x - mean(x, -1)) is realized above
 * because recomputing it per broadcast element multiplies its work. When its only kernel reads it per row
 * of that kernel's outermost loops, it need not be: the linearizer computes a value in the outermost loop
 * that has its variables, so the reduce runs once per row before the row's output loop, over a row that is
 * still in L1/L2. Softmax then is one kernel (max loop, sum-of-exp loop, output loop) and reads its input
 * from memory once instead of three times. lower_row_fusable() checks the kernel that would hold it; rows
 * are bounded so that a row stays in cache between its passes (16K float32: 64 KiB, within L2). A reduce
 * broadcast over other axes (batchnorm's mean over N, H, W), read inside another reduce (a matmul), or by
 * several kernels stays realized. */
#define FUSE_ROW_MAX 16384

static char multi;  /* owner of a node in several kernels */

/* owner[u]: the realized node whose kernel computes u, or &multi when several do */
static bool find_owners(uop **order, int nn, uop *sink, const uop_map *realized, uop_map *owner) {
  umap_free(owner);
  for (int i = nn - 1; i >= 0; i--) {
    uop *u = order[i];
    if (u == sink || node_has_storage(u)) continue;
    uop *own = umap_get(realized, u) ? u : umap_get(owner, u);
    if (!own) continue;
    for (int k = 0; k < u->nsrc; k++) {
      uop *x = u->src[k], *cur = umap_get(owner, x);
      if (node_has_storage(x) || cur == own || cur == (uop *)&multi) continue;
      if (!umap_put(owner, x, cur ? (uop *)&multi : own)) return false;
    }
  }
  return true;
}

/* fusable(k, realized, u): whether kernel k (its root) may compute u itself once u is unrealized */
typedef bool (*fusable_fn)(uop *k, const uop_map *realized, uop *u);

/* the candidates cands (consumers first) left unrealized where the one kernel reading them can compute them.
 * After a fusion the owners are computed again only when the next candidate's may have changed: it was owned by
 * a node fused since, or by several kernels (which a fusion can merge). Another single owner is still exact.
 * Recomputing after every fusion was 18% of an eager Llama step's time. */
static tg_status fuse_into_readers(uop **order, int nn, uop *sink, uop_map *realized, uop **cands, int ncands,
                                   fusable_fn fusable) {
  uop_map owner = {0};
  static char yes;
  bool stale = true;
  uop **fused = mem_alloc(((size_t)ncands + 1) * sizeof *fused);  /* fused since the owners were computed */
  int nfused = 0;
  if (!fused) goto nomem;
  for (int i = 0; i < ncands; i++) {
    uop *u = cands[i];
    if (!umap_get(realized, u)) continue;
    uop *k = stale ? NULL : umap_get(&owner, u);
    for (int f = 0; f < nfused && !stale; f++) stale = k == fused[f];
    if (stale || (nfused && k == (uop *)&multi)) {
      if (!find_owners(order, nn, sink, realized, &owner)) goto nomem;
      stale = false;
      nfused = 0;
      k = umap_get(&owner, u);
    }
    if (!k || k == (uop *)&multi) continue;
    if (!umap_put(realized, u, NULL)) goto nomem;
    if (fusable(k, realized, u)) {
      fused[nfused++] = u;
      continue;
    }
    if (!umap_put(realized, u, &yes)) goto nomem;
  }
  free(fused);
  umap_free(&owner);
  return TG_OK;
nomem:
  free(fused);
  umap_free(&owner);
  tg_set_error(TG_ERR_NOMEM, "schedule: out of memory");
  return TG_ERR_NOMEM;
}

/* a broadcast reduce computed per row of its kernel */
static bool row_fusable(uop *k, const uop_map *realized, uop *u) { return lower_row_fusable(k, realized, u, FUSE_ROW_MAX); }

/* ---- shared epilogues -----------------------------------------------------------------------------------
 * A value several nodes read is stored so that their kernels do not each recompute it. When all its readers
 * are one kernel's elementwise epilogue (gelu's x used four times: x * 0.5 * (1 + tanh(c * (x + a * x^3))),
 * on a matmul's output), the kernel computes it once per element anyway, in registers: storing it costs a
 * kernel and a round trip through memory (a transformer's fc1 + gelu: 2.14 -> 2.06 ms). Readers inside a
 * reduce of that kernel (a row pass, a nested reduce) or through a movement op would compute it again per use:
 * it stays. */

typedef struct kernel_walk { uop *root; const uop_map *realized; } kernel_walk;

/* the nodes one kernel computes: below its root, down to stored and realized nodes */
static bool enter_kernel(uop *u, void *ctx) {
  kernel_walk *w = ctx;
  return u == w->root || (!node_has_storage(u) && !umap_get(w->realized, u));
}

/* whether every path from root (a kernel's output) down to u is elementwise: no REDUCE_AXIS, no view */
static bool epilogue_only(uop *root, const uop_map *realized, uop *u) {
  kernel_walk w = {root, realized};
  int n;
  uop **order = uop_toposort_filtered(root, enter_kernel, &w, &n);
  uop_map under = {0};  /* nodes reached through a reduce or a view */
  static char yes;
  bool ok = order != NULL;
  for (int i = n - 1; i >= 0 && ok; i--) {  /* readers before what they read */
    uop *x = order[i];
    if (!enter_kernel(x, &w)) continue;
    bool through = umap_get(&under, x) || !uop_is_alu((uop_op)x->op);
    for (int k = 0; k < x->nsrc && ok && through; k++)
      if (!umap_put(&under, x->src[k], &yes)) ok = false;
  }
  ok = ok && !umap_get(&under, u);
  umap_free(&under);
  free(order);
  return ok;
}

/* ---- recomputing cheap shared values ----------------------------------------------------------------------
 * A value several kernels read is stored when computing it means real work: a reduce below it, not yet
 * stored. The decision is made readers first, before the reduces below are decided, so a cheap value over a
 * convolution's output (batchnorm's x - mean, its x * invstd) looked like a convolution and was stored too,
 * an activation-sized buffer each (MNIST: 26 MB apiece). Once every node is decided, a value stored only for
 * sharing that is a few adds, multiplies, compares and casts of stored buffers is computed again by each
 * reader instead (tinygrad's scheduler recomputes elementwise values the same way): reading its inputs costs
 * each reader about what reading it did. A transcendental (softmax's exp) or a division is worth its store.
 * Producers are decided before the values built on them, so a value's cost counts what its sources became. */
#define RECOMPUTE_ALU 4
#define RECOMPUTE_LEAVES 3

static bool cheap_op(uop_op op) {
  switch (op) {
  case OP_CAST: case OP_NEG: case OP_ADD: case OP_MUL: case OP_MAX: case OP_CMPLT: case OP_CMPNE: case OP_CMPEQ:
  case OP_AND: case OP_OR: case OP_XOR: case OP_WHERE:
    return true;
  default:
    return false;
  }
}

/* u is at most RECOMPUTE_ALU cheap ALU ops over at most RECOMPUTE_LEAVES stored values (constants free) */
static bool cheap_to_recompute(uop *u, const uop_map *realized) {
  uop *stack[2 * RECOMPUTE_ALU * 3 + 4];
  int sp = 0, alu = 0, leaves = 0;
  stack[sp++] = u;
  while (sp) {
    uop *x = stack[--sp];
    if (x->op == OP_CONST) continue;
    if (x != u && (node_has_storage(x) || umap_get(realized, x))) {
      if (++leaves > RECOMPUTE_LEAVES) return false;
      continue;
    }
    if (x->op >= OP_RESHAPE && x->op <= OP_FLIP) {  /* a view: loads at other indices (a mean per channel) */
      if ((size_t)sp >= sizeof stack / sizeof *stack) return false;
      stack[sp++] = x->src[0];
      continue;
    }
    if (!uop_is_alu((uop_op)x->op) || !cheap_op((uop_op)x->op) || ++alu > RECOMPUTE_ALU) return false;
    for (int k = 0; k < x->nsrc; k++) {
      if ((size_t)sp >= sizeof stack / sizeof *stack) return false;
      stack[sp++] = x->src[k];
    }
  }
  return true;
}

/* Whether u is a value decoded from packed bytes (a quantized weight: nibbles and scales read from uint8 or int8
 * buffers, shifted, masked, converted and scaled): every input it reads is a stored buffer of 1-byte integers,
 * and there is no reduce in it (and it is real work: a cast of uint8 images alone is not this, see widened
 * below). Such a value read through a broadcast (a matmul over many rows) is not stored
 * as float32 (4 bytes a weight written and read again, the whole weight's float copy in memory): it fuses into
 * its reader, whose codegen decodes it once per panel of the reduce (a PACK of the expression, codegen/opt.c)
 * and reuses the panel across the rows. */
#define DECODE_WALK 512

static bool decodes_bytes(uop *u, const uop_map *realized) {
  if (u->dtype != TG_FLOAT32 || !uop_is_alu((uop_op)u->op)) return false;
  uop *stack[DECODE_WALK];
  uop_map seen = {0};
  static char yes;
  int sp = 0, visited = 0, leaves = 0;
  bool ok = true;
  stack[sp++] = u;
  while (sp && ok) {
    uop *x = stack[--sp];
    if (umap_get(&seen, x)) continue;
    if (!umap_put(&seen, x, &yes) || ++visited >= DECODE_WALK) { ok = false; break; }
    if (x != u && (node_has_storage(x) || umap_get(realized, x))) {
      ok = dtype_is_int((tg_dtype)x->dtype) && tg_dtype_size((tg_dtype)x->dtype) == 1;
      leaves++;
      continue;
    }
    if (x->op == OP_REDUCE_AXIS || x->op == OP_CONTIGUOUS || x->op == OP_PAD) { ok = false; break; }
    for (int k = 0; k < x->nsrc && ok; k++) {
      if (sp == DECODE_WALK) ok = false;
      else stack[sp++] = x->src[k];
    }
  }
  umap_free(&seen);
  return ok && leaves > 0;
}

/* marks every node of u's expression (down to stored nodes) in m */
static bool mark_expression(uop *u, const uop_map *realized, uop_map *m) {
  uop *stack[DECODE_WALK];
  static char yes;
  int sp = 0;
  stack[sp++] = u;
  while (sp) {
    uop *x = stack[--sp];
    if (umap_get(m, x)) continue;
    if (x != u && (node_has_storage(x) || umap_get(realized, x))) continue;
    if (!umap_put(m, x, &yes)) return false;
    for (int k = 0; k < x->nsrc && sp < DECODE_WALK; k++) stack[sp++] = x->src[k];
  }
  return true;
}

static bool recompute_cheap(uop_map *realized, uop **cands, int n) {
  for (int i = n - 1; i >= 0; i--) {  /* cands are readers first */
    uop *u = cands[i];
    if (cheap_to_recompute(u, realized) && !umap_put(realized, u, NULL)) return false;
  }
  return true;
}

/* ---- reduces nested in reduces -------------------------------------------------------------------------
 * A reduce read by another reduce of its kernel (a pooling over a convolution's pixels, a sum over a matmul's
 * columns) fuses: each inner value is computed once. But the inner reduce's output loops are then loops of the
 * outer reduce, and the code generator gets only the outer kernel's few output loops for vector lanes and
 * register tiles (a global average pool over ResNet-18's last 3x3 conv ran at 6-17 GFLOP/s with its pixels
 * reduced; densenet's 2x2 average pool over a 1x1 conv likewise). When the inner reduce is long and its work
 * large, storing its output (one write and one read per value, against NESTED_MIN_REDUCE or more multiply-adds)
 * costs far less than losing those loops: it is stored. Small ones stay fused (matmul -> relu -> sum). */
#define NESTED_MIN_REDUCE 128
#define NESTED_MIN_WORK (1 << 20)

static bool big_nested(uop *u, bool read_by_reduce) {
  if (!read_by_reduce || u->op != OP_REDUCE_AXIS) return false;
  int64_t in = uop_numel(u->src[0]), out = uop_numel(u);
  return out > 0 && in / out >= NESTED_MIN_REDUCE && in >= NESTED_MIN_WORK;
}

/* A pad with a value (max pool's -inf): where(pad(true), pad(x), value). Seen through a broadcast it is not
 * stored itself, padded: x is, at its own size, and the readers apply the pad and the value as they load
 * (ResNet's stem conv stored on a 114x114 grid for its max pool ran its reduce on the border too and missed
 * the vector rows of 112: 12 -> 4 ms) */
static bool pad_with_value(const uop *u) {
  return u->op == OP_WHERE && u->nsrc == 3 && u->src[0]->op == OP_PAD && u->src[1]->op == OP_PAD &&
         !node_has_storage(u->src[1]);
}

/* ---- values stored in their readers' layout ---------------------------------------------------------------
 * A value several nodes read through one view is stored; when the view only reorders it into fewer axes (a
 * max pool's gradient: computed per window (n, c, oy, ox, ky, kx), read as the image (n, c, y, x) by batchnorm's
 * backward, two reductions and an elementwise), the view itself is stored: its kernel writes the image once in
 * the readers' order, and each reader loads rows instead of windows (MNIST's two batchnorm-gradient sums over
 * the window layout ran scalar, 6-7 ms each; in rows, 1.5). A view into more axes (the pool's windows of its
 * input) keeps the value's own layout: the windows are the readers' order only for the pool. */
#define READER_LAYOUT_MIN 4096

static bool stored_as_view(uop *u, const uop_map *consumers) {
  if ((u->op != OP_RESHAPE && u->op != OP_PERMUTE && u->op != OP_FLIP) || uop_numel(u) < READER_LAYOUT_MIN) return false;
  uop *x = u->src[0];
  while (!node_has_storage(x) && (x->op == OP_RESHAPE || x->op == OP_PERMUTE || x->op == OP_FLIP) &&
         (intptr_t)umap_get(consumers, x) == 1)
    x = x->src[0];
  return !node_has_storage(x) && (intptr_t)umap_get(consumers, x) == 1 && uop_is_alu((uop_op)x->op) &&
         u->ndim < x->ndim;
}

tg_status schedule_create(int n, uop *const *outs, schedule *s) { return schedule_create_assign(n, outs, NULL, s); }

tg_status schedule_create_assign(int n, uop *const *outs, uop *const *targets, schedule *s) {
  memset(s, 0, sizeof *s);
  uop_map realized = {0}, expanded = {0}, in_reduce = {0}, padded = {0}, rewritten = {0}, consumers = {0}, viewed = {0},
          moved = {0}, decoded = {0};
  tg_status st = TG_OK;
  uop **order = NULL, **cands = NULL, **shared_cands = NULL, **recompute_cands = NULL;
  int ncands = 0, nshared = 0, nrecompute = 0;
  s->roots = mem_alloc(((size_t)n + 1) * sizeof *s->roots);
  uop *sink = uop_new(OP_SINK, TG_BOOL, n, outs, (uop_arg){.i = -2}, 0, NULL);
  if (!sink || !s->roots || !(sink = rewrite_reductions(sink, &rewritten))) goto nomem;
  memcpy(s->roots, sink->src, (size_t)n * sizeof *s->roots);
  int nn;
  order = uop_toposort_filtered(sink, enter_no_storage, NULL, &nn);
  if (!order || !(cands = mem_alloc(((size_t)nn + 1) * sizeof *cands)) ||
      !(shared_cands = mem_alloc(((size_t)nn + 1) * sizeof *shared_cands)) ||
      !(recompute_cands = mem_alloc(((size_t)nn + 1) * sizeof *recompute_cands)))
    goto nomem;
  static char yes;
  for (int i = 0; i < n; i++)
    if (!node_has_storage(s->roots[i]) && !umap_put(&realized, s->roots[i], &yes)) goto nomem;
  /* how many nodes use each node */
  for (int i = 0; i < nn; i++) {
    uop *u = order[i];
    if (u == sink) continue;
    for (int k = 0; k < u->nsrc; k++) {
      if (k && u->src[k] == u->src[k - 1]) continue;
      intptr_t c = (intptr_t)umap_get(&consumers, u->src[k]);
      if (!umap_put(&consumers, u->src[k], (void *)(c + 1))) goto nomem;
    }
  }
  /* nodes read through a movement op (their readers index them at other positions) */
  for (int i = 0; i < nn; i++)
    if (order[i] != sink && order[i]->op >= OP_RESHAPE && order[i]->op <= OP_FLIP && !umap_put(&moved, order[i]->src[0], &yes))
      goto nomem;
  /* consumers come before producers in reverse order, so a node's "seen through an EXPAND" flag is
   * final when the node is reached */
  for (int i = nn - 1; i >= 0; i--) {
    uop *u = order[i];
    if (u == sink || node_has_storage(u)) continue;
    bool stored = umap_get(&realized, u) != NULL;
    bool broadcast = umap_get(&expanded, u) != NULL;
    /* a value made by a reduce and used by several nodes would be recomputed by each of their kernels
     * (a convolution's output feeds batchnorm's mean, its variance, the normalization, the backward) */
    bool shared = ((intptr_t)umap_get(&consumers, u) >= 2 || umap_get(&viewed, u)) &&
                  (u->op == OP_REDUCE_AXIS || uop_is_alu((uop_op)u->op));
    bool alu = uop_is_alu((uop_op)u->op);
    /* a reduce (or a long ALU chain) seen through a PAD that at least doubles its size is computed for every
     * element of the padded extent, valid or not (a KV cache row placed at a position among 512: 512x) */
    bool pad_grown = umap_get(&padded, u) != NULL;
    /* a narrow integer cast to float32 and read through a broadcast (a convolution's uint8 images, read once
     * per output channel and tap) is stored as float32: the vector path has no uint8 lanes, and the conv
     * reading it ran scalar (MNIST conv1: 43 ms scalar) */
    bool widened = u->op == OP_CAST && u->dtype == TG_FLOAT32 && tg_dtype_size((tg_dtype)u->src[0]->dtype) < 4 &&
                   dtype_is_int((tg_dtype)u->src[0]->dtype) && !umap_get(&decoded, u);
    /* a weight decoded from its bytes, read through a broadcast: fused whole into its reader (decodes_bytes) */
    if (!stored && broadcast && !umap_get(&decoded, u) && decodes_bytes(u, &realized) &&
        expensive(u, &realized, false) && !mark_expression(u, &realized, &decoded))
      goto nomem;
    bool in_decode = umap_get(&decoded, u) != NULL;
    bool by_sharing = (shared && alu && expensive(u, &realized, true)) || (shared && u->op == OP_REDUCE_AXIS);
    bool must = u->op == OP_CONTIGUOUS || by_sharing || (broadcast && widened) ||
                (pad_grown && (u->op == OP_REDUCE_AXIS || (alu && expensive(u, &realized, false))));
    if (pad_with_value(u)) alu = false;
    bool bcast_reduce = broadcast && (u->op == OP_REDUCE_AXIS || (alu && expensive(u, &realized, true)));
    must |= !broadcast && big_nested(u, umap_get(&in_reduce, u) != NULL);
    if (!stored && !in_decode && (must || bcast_reduce || (broadcast && alu && expensive(u, &realized, false)))) {
      if (!umap_put(&realized, u, &yes)) goto nomem;
      stored = true;
      if (!must && bcast_reduce) cands[ncands++] = u;
      /* stored only because several nodes read it: maybe they are all one kernel's epilogue */
      if (by_sharing && !broadcast && !pad_grown && u->op != OP_CONTIGUOUS && !umap_get(&viewed, u) &&
          !umap_get(&moved, u))
        shared_cands[nshared++] = u;
      if (by_sharing && !broadcast && !pad_grown && !widened && u->op != OP_CONTIGUOUS && !umap_get(&viewed, u) &&
          !umap_get(&moved, u))
        recompute_cands[nrecompute++] = u;
    }
    /* the values a MAX reduce compares are stored when they come from a reduce: recomputed in another
     * kernel with another summation order they differ in the last bit, and the gradient's x == max(x)
     * would then match nothing (0/0) */
    if (u->op == OP_REDUCE_AXIS && u->arg.i == OP_MAX) {
      uop *x = u->src[0];
      while (!node_has_storage(x) && ((x->op >= OP_RESHAPE && x->op <= OP_FLIP) || pad_with_value(x)))
        x = x->op == OP_WHERE ? x->src[1] : x->src[0];
      if (!node_has_storage(x) && uop_is_alu((uop_op)x->op) && expensive(x, &realized, false) && !umap_put(&realized, x, &yes))
        goto nomem;
    }
    /* a value several nodes read through a view that reorders it into fewer axes: the view is stored */
    if (!stored && ((intptr_t)umap_get(&consumers, u) >= 2 || umap_get(&viewed, u)) && stored_as_view(u, &consumers)) {
      if (!umap_put(&realized, u, &yes)) goto nomem;
      stored = true;
    }
    /* the same through a view: a weight's gradient is reshaped and then read by both of Adam's moments
     * (MNIST: every weight-gradient kernel ran twice) */
    if (!stored && u->op >= OP_RESHAPE && u->op <= OP_FLIP &&
        ((intptr_t)umap_get(&consumers, u) >= 2 || umap_get(&viewed, u)) && !umap_put(&viewed, u->src[0], &yes))
      goto nomem;
    /* the values a reduce of this kernel reads */
    if (u->op == OP_REDUCE_AXIS || (!stored && umap_get(&in_reduce, u)))
      for (int k = 0; k < u->nsrc; k++)
        if (!umap_put(&in_reduce, u->src[k], &yes)) goto nomem;
    bool flag = !stored && (umap_get(&expanded, u) || u->op == OP_EXPAND);
    if (flag)
      for (int k = 0; k < u->nsrc; k++)
        if (!umap_put(&expanded, u->src[k], &yes)) goto nomem;
    bool grows = !stored && (pad_grown || (u->op == OP_PAD && uop_numel(u) >= 2 * uop_numel(u->src[0])));
    if (grows)  /* the padded value, not a variable offset (tg_pad_at's second source, read once) */
      for (int k = 0; k < (u->op == OP_PAD ? 1 : u->nsrc); k++)
        if (!umap_put(&padded, u->src[k], &yes)) goto nomem;
  }
  if (!recompute_cheap(&realized, recompute_cands, nrecompute)) goto nomem;
  if ((st = fuse_into_readers(order, nn, sink, &realized, cands, ncands, row_fusable)) != TG_OK ||
      (st = fuse_into_readers(order, nn, sink, &realized, shared_cands, nshared, epilogue_only)) != TG_OK)
    goto out;
  s->kernels = mem_calloc((size_t)realized.n + 1, sizeof *s->kernels);
  s->realized = mem_calloc((size_t)realized.n + 1, sizeof *s->realized);
  if (!s->kernels || !s->realized) goto nomem;
  for (int i = 0; i < nn; i++)
    if (order[i] != sink && umap_get(&realized, order[i])) s->realized[s->nrealized++] = order[i];
  st = schedule_kernels(s, order, nn, sink, &realized, n, targets);
  goto out;
nomem:
  st = TG_ERR_NOMEM;
  tg_set_error(st, "schedule: out of memory");
out:
  free(order);
  free(cands);
  free(shared_cands);
  free(recompute_cands);
  umap_free(&realized);
  umap_free(&expanded);
  umap_free(&in_reduce);
  umap_free(&padded);
  umap_free(&rewritten);
  umap_free(&consumers);
  umap_free(&viewed);
  umap_free(&moved);
  umap_free(&decoded);
  if (st != TG_OK) schedule_free(s);
  return st;
}

void schedule_free(schedule *s) {
  for (int i = 0; i < s->nkernels; i++) free(s->kernels[i].bufs);
  free(s->kernels);
  free(s->realized);
  free(s->roots);
  memset(s, 0, sizeof *s);
}
