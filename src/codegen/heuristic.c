/* heuristic.c — actions for a kernel without search, tinygrad's hand_coded_optimizations made for CPUs.
 *
 * The loads that run most often are those inside a REDUCE (all loads when there is none). For each loop we
 * look at how they index it: a coefficient of 0 means the load is reused across that loop (a register can
 * hold it), 1 means contiguous (a vector load), anything else a gather.
 *   1. vector lanes: an output loop with a contiguous store whose hot loads are contiguous or reused gets
 *      UPCAST by 2 or 1 vectors; else a reduce loop whose loads are contiguous or reused gets UNROLL by 4
 *      vectors (a vector accumulator reduced across its lanes at the end);
 *      When no loop gives vector lanes, a convolution takes them from its output channels (channel_vectors),
 *      else a contiguous output loop that is not a multiple of the vector is padded to one (PADTO) and the
 *      choice made again. A vector loop whose hot load is strided in it is
 *      taken when step 4 can pack that load transposed (matmul with B transposed), else the dot-product
 *      form: UNROLL of the reduce by one vector and 16 accumulators over the output loops with reuse;
 *      (a reduce's loop is padded from above one vector: conv's rows of 20 or 24 become 32);
 *   2. register tile: for a reduce, one more output loop along which a hot load is reused gets UPCAST by
 *      16/8/6/4/3/2, keeping at most acc_budget() vector accumulators (AVX-512: 16, as matmul's 8x32 floats;
 *      AVX2: 12); a load
 *      reused there that varies along the vector loop counts twice (conv: the tile goes on cout, where x's
 *      window vector is shared, not on the batch, where only the weight's scalar is);
 *   3. threads: the output loop that splits evenly across the pool, preferring the vector loop's outer part
 *      (each core then keeps its own panel of the reused operand in its cache, e.g. B's columns in matmul);
 *   4. cache blocking: the vector loop outside the tile loop (SWAP) and the reused operand's panel packed
 *      into a contiguous buffer (PACK) before the tile loop.
 * Some kernel shapes take a short path of their own (heuristic_shapes.c): a row kernel (reduces broadcast
 * along an output loop: softmax in one kernel, a convolution whose weight is a constant), row_kernel(): its
 * broadcast loops innermost, so each reduce runs once per row. So does a matrix-vector product of a few rows (decode), matvec(), and a product
 * with a weight decoded from packed bytes in the kernel (a quantized weight): decoded_matvec() for one row,
 * decoded_gemm() for many (the decoded weight packed once per panel and shared by the rows).
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/heuristic.h"

/* Vector accumulators a register tile may keep: what the register file holds besides the tile's operands (a
 * vector load or two and a broadcast). AVX-512 has 32 vector registers: 16 accumulators; AVX2 and SSE have 16:
 * 12, as BLIS's 6x16 Haswell kernel (16 accumulators there spilled every step: MNIST's 5x5 convolution on an
 * AVX2 EPYC ran at 15-70 GFLOP/s). */
int acc_budget(const kernel_state *ks) { return ks->tg.vec_bytes >= 64 ? 16 : 12; }

/* the largest power of two below n (n > 1) */
static int64_t pow2_below(int64_t n) {
  int64_t p = 1;
  while (2 * p < n) p *= 2;
  return p;
}
#define PACK_MIN_REUSE 8         /* tile-loop trips a plain packed panel must serve (step 4) */
#define PACK_WEIGHT_MIN_ROWS 32  /* output rows a convolution's packed weight panel must serve (step 4) */

void find_hot(uop *ast, hot *h) {
  memset(h, 0, sizeof *h);
  int n;
  uop **order = uop_toposort(ast, &n);
  if (!order) return;
  bool has_reduce = false;
  for (int i = 0; i < n; i++) has_reduce |= order[i]->op == OP_REDUCE;
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    if (u->op == OP_STORE && h->nstores < 16) h->stores[h->nstores++] = u;
    if (u->op != OP_REDUCE) continue;
    int m;
    uop **sub = uop_toposort(u->src[0], &m);
    if (!sub) continue;
    for (int j = 0; j < m && h->nloads < 64; j++)
      if (sub[j]->op == OP_LOAD) {
        bool dup = false;
        for (int k = 0; k < h->nloads; k++) dup |= h->loads[k] == sub[j];
        if (!dup) h->loads[h->nloads++] = sub[j];
      }
    free(sub);
  }
  if (!has_reduce)
    for (int i = 0; i < n && h->nloads < 64; i++)
      if (order[i]->op == OP_LOAD) h->loads[h->nloads++] = order[i];
  free(order);
}

/* how the hot loads index r: counts of reused (0), contiguous (1) and other (gather) accesses */
void load_kinds(const hot *h, uop *r, int *reuse, int *contig, int *gather) {
  *reuse = *contig = *gather = 0;
  for (int i = 0; i < h->nloads; i++) {
    int64_t k;
    uop *l = h->loads[i];
    if (!lin_coef(l->src[1], r, &k)) (*gather)++;
    else if (k == 0) (*reuse)++;
    else if (k == 1) (*contig)++;
    else (*gather)++;
  }
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) { int64_t t = a % b; a = b; b = t; }
  return a;
}

/* the grain of index e in loop r: the largest g such that e is the same for every r in [g t, g t + g) (0: e
 * does not use r; 1: it changes with every r). Seen through divisions: (r + m) / B and ((r + m) % M) / B for B
 * dividing M and m a multiple of M (a block's scale: Q8_0's k / 32, a K-quant's sub-block (k % 256) / 32) */
static int64_t grain(uop *e, uop *r) {
  if (e == r) return 1;
  if (!uop_uses(e, r)) return 0;
  if (e->op == OP_IDIV && uop_is_const(e->src[1]) && e->src[1]->arg.i > 1) {
    int64_t b = e->src[1]->arg.i;
    uop *x = e->src[0];
    if (r_plus_multiple(x, r, b)) return b;
    if (x->op == OP_MOD && uop_is_const(x->src[1]) && x->src[1]->arg.i % b == 0 &&
        r_plus_multiple(x->src[0], r, x->src[1]->arg.i))
      return b;
  }
  int64_t g = 0;
  for (int i = 0; i < e->nsrc; i++) {
    int64_t s = grain(e->src[i], r);
    g = !g ? s : !s ? g : gcd64(g, s);
  }
  return g;
}

/* A reduce loop r read in blocks: a hot load whose index is the same over runs of B iterations of r (a
 * quantized weight's scale, one per block of 32 values: gguf_quant.c), B dividing r's size. Returns the
 * largest such B up to max, 0 when none. UNROLL by B makes the block one straight run: that load is made once
 * per block, not per value, and the values' indices within the block become constants (their loads
 * contiguous: expand.c's lane) */
int64_t block_of(const hot *h, uop *r, int64_t size, int64_t max) {
  int64_t best = 0;
  for (int l = 0; l < h->nloads; l++) {
    int64_t b = grain(h->loads[l]->src[1], r);
    if (b > 1 && b <= max && size % b == 0 && b > best) best = b;
  }
  return best;
}

/* load_kinds for a vector loop of `lanes`: a load whose index is the same over aligned runs of a multiple of
 * the lanes (grain) is the same in every lane of a vector, a broadcast, not a gather (Q6_K's scale of 16
 * values in a dequantize kernel); one that reads runs of a divisor of the lanes from consecutive elements is
 * a short load and a shuffle (expand.c's LOAD_RUNS: a 2x2 max pool's gradient, its pooled values read per
 * pixel), when unmasked; and so is every2_row's */
/* A kernel's only hot load reading every second element along a row of at least 4 vectors (a stride-2 max
 * pool) is read as two loads and a shuffle per vector (expand.c's LOAD_EVERY2). ResNet-18's 3x3/2 pool over
 * 112x112, rows of 56 padded to 64, per-kernel minimums over 30 runs, 2 threads (AMD Zen 4): 323-469 -> 160 us;
 * MNIST's 2x2 pools (rows of 10 and 3, padded to a vector) were slower so (0.9 -> 1.5 ms for the first).
 * Where other loads share the loop, as a strided convolution's weights, its other plans stay */
static bool every2_row(const hot *h, uop *l, uop *r, int lanes) {
  return h->nloads == 1 && uop_is_const(r->src[0]) && r->src[0]->arg.i >= 4 * lanes && r->src[0]->arg.i >= 64 &&
         every2_load(l, l->src[1], r);
}

static void load_kinds_vec(const hot *h, uop *r, int lanes, int *reuse, int *contig, int *gather) {
  load_kinds(h, r, reuse, contig, gather);
  for (int i = 0; i < h->nloads && *gather; i++) {
    int64_t k, g;
    uop *l = h->loads[i];
    if (lin_coef(l->src[1], r, &k) && (k == 0 || k == 1)) continue;
    if ((g = grain(l->src[1], r)) > 1 && g % lanes == 0) {
      (*gather)--;
      (*reuse)++;
    } else if (runs_load(l, l->src[1], r, lanes) || every2_row(h, l, r, lanes)) {
      (*gather)--;
      (*contig)++;
    }
  }
}

bool store_contiguous(const hot *h, uop *r) {
  if (!h->nstores) return false;
  for (int i = 0; i < h->nstores; i++) {
    int64_t k;
    if (!lin_coef(h->stores[i]->src[1], r, &k) || k != 1) return false;
  }
  return true;
}

bool try_opt(kernel_state *ks, opt_op op, int axis, int64_t arg) {
  char why[160];
  return apply_opt(ks, (opt){op, axis, arg}, why);
}

/* the index among output axes (or reduce axes when red) of the RANGE with this id */
int axis_of(kernel_state *ks, int64_t id, bool red) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  for (int i = 0; i < n; i++)
    if (ax[i].r->arg.i == id && ax[i].r->aux[0] != AX_UPCAST && ax[i].r->aux[0] != AX_UNROLL)
      return red ? i - nout : i;
  return -1;
}

/* whether a hot load reads overlapping windows: two of its loops step its index by the same amount (a conv's
 * ox and kx, oy and ky). Packing such a load copies every element once per window it is in */
static bool windowed(kernel_state *ks, const hot *h) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  for (int l = 0; l < h->nloads; l++) {
    int64_t c[KS_MAX_AXES];
    for (int i = 0; i < n; i++) {
      if (!lin_coef(h->loads[l]->src[1], ax[i].r, &c[i])) c[i] = 0;
      for (int j = 0; j < i && c[i]; j++)
        if (c[j] == c[i]) return true;
    }
  }
  return false;
}

bool strided_window(kernel_state *ks, const hot *h) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  for (int l = 0; l < h->nloads; l++) {
    int pairs = 0;
    int64_t stride = 0, co, cr;
    for (int i = 0; i < nout; i++) {
      if (!lin_coef(h->loads[l]->src[1], ax[i].r, &co) || co <= 0) continue;
      for (int r = nout; r < n; r++)
        if (ax[r].type == AX_REDUCE && ax[r].size <= 11 && lin_coef(h->loads[l]->src[1], ax[r].r, &cr) && cr > 0 &&
            co % cr == 0 && co / cr >= 2 && co / cr <= 4 && (!stride || co / cr == stride)) {
          stride = co / cr;
          pairs++;
          break;
        }
    }
    if (pairs >= 2) return true;
  }
  return false;
}

/* whether r is a window's row loop: a hot load steps by the same amount along r and along another loop (a
 * conv's oy and ky), as opposed to a loop of channels */
static bool window_row(kernel_state *ks, const hot *h, uop *r) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  for (int l = 0; l < h->nloads; l++) {
    int64_t cr, c;
    if (!lin_coef(h->loads[l]->src[1], r, &cr) || cr == 0) continue;
    for (int i = 0; i < n; i++)
      if (ax[i].r != r && lin_coef(h->loads[l]->src[1], ax[i].r, &c) && c == cr) return true;
  }
  return false;
}

/* The UNROLL just applied (the loop of the highest id) accumulates its copies into one accumulator, one after the
 * other (expand.c), not one accumulator each: a nibble's two halves, whose tile rows each hold their block's
 * scale and offset besides (Q4_0 decode on AVX2, 4 rows: 8 accumulators and 8 scales spilled in the loop, 1.14
 * ms for 5632 x 2048 on one thread; 4 accumulators 1.03). */
void one_accumulator(kernel_state *ks) {
  int n;
  uop **order = uop_toposort(ks->ast, &n), *r = NULL;
  for (int i = 0; order && i < n; i++)
    if (order[i]->op == OP_RANGE && (!r || order[i]->arg.i > r->arg.i)) r = order[i];
  free(order);
  if (!r || r->aux[0] != AX_UNROLL || r->naux != 1) return;
  int64_t aux[2] = {AX_UNROLL, 1};
  uop *one = uop_new(OP_RANGE, (tg_dtype)r->dtype, r->nsrc, r->src, r->arg, 2, aux);
  uop *ast = one ? uop_substitute(ks->ast, r, one) : NULL;
  if (ast) ks->ast = ast;  /* out of memory: one accumulator per copy, as good as before */
}

/* A short reduce loop that no packed-byte load is indexed by (a Q4_0 block's two nibbles, the low and the high
 * four bits of the same 16 bytes) is unrolled: its copies share one load of the bytes, and the low nibble's
 * shift by 0 folds away. Returns the accumulators each one becomes (the loop's size), 1 when none applies. */
static int64_t unroll_shared_bytes(kernel_state *ks) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  hot h;
  find_hot(ks->ast, &h);
  for (int i = nout; i < n && i < nout + nred; i++) {
    if (ax[i].type != AX_REDUCE || ax[i].size < 2 || ax[i].size > 4) continue;
    bool bytes = false, indexed = false;
    for (int l = 0; l < h.nloads; l++) {
      uop *L = h.loads[l];
      if (L->dtype != TG_UINT8 && L->dtype != TG_INT8) continue;
      bytes = true;
      indexed |= uop_uses(L->src[1], ax[i].r);
    }
    if (bytes && !indexed && try_opt(ks, OPT_UNROLL, i - nout, ax[i].size)) {
      one_accumulator(ks);
      return ax[i].size;
    }
  }
  return 1;
}

/* whether a hot load is valid only on part of the output loop with this id (a padding border along it) */
static bool masked_along(kernel_state *ks, const hot *h, int64_t id) {
  int ai = axis_of(ks, id, false);
  if (ai < 0) return false;
  axis_info ax[KS_MAX_AXES];
  int nout, nred;
  ks_axes(ks, ax, &nout, &nred);
  for (int l = 0; l < h->nloads; l++)
    if (h->loads[l]->nsrc > 2 && uop_uses(h->loads[l]->src[2], ax[ai].r)) return true;
  return false;
}

/* step 1 of the heuristic: the vector loop (see the top of the file); *vec_id its id when it is an output loop */
static void pick_vector(kernel_state *ks, hot *hp, int lanes, bool *pack_tp, int64_t *vec_idp, bool *vec_on_reducep) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  (void)n;
  hot h = *hp;
  bool pack_t = *pack_tp;
  int64_t vec_id = -1;
  for (int i = 0; i < nout && lanes >= 2; i++) {
    int re, co, ga;
    load_kinds_vec(&h, ax[i].r, lanes, &re, &co, &ga);
    if (ax[i].size % lanes || !store_contiguous(&h, ax[i].r) || (ga && !(pack_t && nred && nout >= 2))) continue;
    if (!ga) pack_t = false;
    int64_t id = ax[i].r->arg.i;
    int64_t amt = ax[i].size % (2 * lanes) == 0 && (nred || ax[i].size >= 8 * lanes) ? 2 * lanes : lanes;
    /* a load strided along the vector loop is packed transposed (step 4), a panel of the vector loop times the
     * reduce: one vector wide when two would not fit (x (m, 11008) @ W^T: 16 x 11008 packs, 32 x 11008 does
     * not, and the kernel without a panel ran 3-5x slower at m = 128) */
    int64_t red = 1;
    for (int r = nout; r < nout + nred; r++) red *= ax[r].size;
    if (ga && amt > lanes && amt * red > PACK_T_MAX_ELEMS) amt = lanes;
    if (try_opt(ks, OPT_UPCAST, i, amt)) vec_id = id;
    break;
  }
  bool vec_on_reduce = false;
  if (vec_id < 0 && nred && lanes >= 2)
    for (int i = nout; i < nout + nred; i++) {
      int re, co, ga;
      load_kinds(&h, ax[i].r, &re, &co, &ga);
      if (ax[i].size % lanes || ga || !co) continue;
      /* output loops a hot load is reused across (matmul with B transposed: both) get a 4x4 tile of vector
       * accumulators, one vector of the reduce each; without reuse, 4 vectors of the reduce per step */
      n = ks_axes(ks, ax, &nout, &nred);
      int64_t tile_ids[2];
      int nt = 0;
      for (int a = 0; a < nout && nt < 2; a++) {
        int r2, c2, g2;
        load_kinds(&h, ax[a].r, &r2, &c2, &g2);
        if (r2 && ax[a].size % 4 == 0 && ax[a].size > 4) tile_ids[nt++] = ax[a].r->arg.i;
      }
      int64_t amt = nt ? lanes : 4 * lanes;
      while (amt > lanes && ax[i].size % amt) amt /= 2;
      if (!try_opt(ks, OPT_UNROLL, i - nout, amt)) break;
      vec_on_reduce = true;
      /* 16 accumulators: a 4x4 tile over two loops that each reuse one operand (a convolution's weight
       * gradient: the output gradient's rows across input channels, the input's across output channels)
       * loads 4 + 4 vectors per 16 FMAs where 16 on one loop loads 16 + 1 (conv 64->64 56x56 weight gradient:
       * 124 -> 59 ms); with one such loop, 16 on it */
      int64_t left = acc_budget(ks);
      left /= unroll_shared_bytes(ks);
      int64_t per = nt == 2 ? 4 : left;
      for (int t = 0; t < nt && left > 1; t++) {
        int a = axis_of(ks, tile_ids[t], false);
        /* the budget (12 on AVX2), then powers of two below it */
        for (int64_t u = per < left ? per : left; u >= 2; u = u & (u - 1) ? pow2_below(u) : u / 2)
          if (a >= 0 && ax[a].size % u == 0 && try_opt(ks, OPT_UPCAST, a, u)) { left /= u; break; }
      }
      break;
    }

  *pack_tp = pack_t;
  *vec_idp = vec_id;
  *vec_on_reducep = vec_on_reduce;
}


/* Lanes on a short reduce (K of at most 32 vectors) end in one horizontal sum per accumulator every few FMAs: a
 * matmul with an output loop that is no multiple of the vector is better padded there (step 1's PADTO) and tiled
 * as any GEMM, when the padding adds at most an eighth. stories260K's prefill, x (128, 64) @ W^T of 172 rows:
 * 151 -> 67-73 us a product (DEBUG=2 medians over 40, 2 threads); the lanes on the output's rows that the
 * convolution rule below (channel_vectors) would give such a matmul were in between */
static bool short_reduce_pads_output(const hot *h, int lanes, kernel_state *unpicked) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred;
  ks_axes(unpicked, ax, &nout, &nred);
  int64_t red = 1;
  for (int r = nout; r < nout + nred; r++) red *= ax[r].size;
  if (!nred || red > 32 * lanes || nout < 2) return false;
  for (int i = 0; i < nout; i++) {
    int64_t sz = ax[i].size, padded = (sz + 2 * lanes - 1) / (2 * lanes) * (2 * lanes);
    if (sz > 2 * lanes && sz % lanes && 8 * (padded - sz) <= sz && store_contiguous(h, ax[i].r)) return true;
  }
  return false;
}

/* the heuristic; with pack_t a vector loop whose hot load is strided in it is allowed when a transposing PACK
 * can make that load contiguous; false when that PACK then does not apply */
static bool heuristic(kernel_state *ks, bool pack_t, bool *vectorized) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  *vectorized = true;
  if (!n) return true;
  hot h;
  find_hot(ks->ast, &h);
  /* vector lanes only for the dtypes the vector path has (expand.c; float16 and 8- and 16-bit integer loads,
   * widened in the load);
   * other kernels get scalar register tiles (a 8x32 tile of float16 would be 256 scalar accumulators) */
  int lanes = ks->tg.vec_bytes / 4;
  for (int i = 0; i < h.nloads; i++)
    if (h.loads[i]->dtype != TG_FLOAT32 && h.loads[i]->dtype != TG_INT32 && h.loads[i]->dtype != TG_INT64 &&
        h.loads[i]->dtype != TG_FLOAT16 && h.loads[i]->dtype != TG_UINT8 && h.loads[i]->dtype != TG_INT8 &&
        h.loads[i]->dtype != TG_UINT16 && h.loads[i]->dtype != TG_INT16)
      lanes = 1;
  for (int i = 0; i < h.nstores; i++)
    if (h.stores[i]->src[2]->dtype != TG_FLOAT32 && h.stores[i]->src[2]->dtype != TG_INT32) lanes = 1;
  /* nor reduces of other dtypes (a max over uint8 values): no vector accumulators for them */
  int norder;
  uop **order = uop_toposort(ks->ast, &norder);
  for (int i = 0; order && i < norder; i++)
    if (order[i]->op == OP_REDUCE && order[i]->dtype != TG_FLOAT32 && order[i]->dtype != TG_INT32 && order[i]->dtype != TG_INT64)
      lanes = 1;
  free(order);
  double work = 1;
  for (int i = 0; i < n; i++) work *= (double)ax[i].size;
  if (row_kernel(ks, lanes)) return true;
  if (matvec(ks, &h, lanes)) return true;
  if (decoded_matvec(ks, &h, lanes) || decoded_gemm(ks, &h, lanes)) return true;
  /* a strided convolution takes its lanes from its output channels: the weight's vectors whole and the input
   * broadcast, where lanes on its pixels read every second input through a panel packed per row (ResNet-18's
   * 7x7 stride-2 stem, 16 pixels x 16 channels from a per-row panel: 1.27 ms; 2 channel vectors x 8 pixels,
   * its 7 taps unrolled: 1.14, per-kernel minimums, 2 threads, AVX-512). A pool has no weight: not one */
  if (strided_window(ks, &h) && channel_vectors(ks, &h, lanes, true)) return true;

  /* 0. a reduce read in blocks (see block_of) is unrolled by its block: as many accumulators (vectors of the
   * machine's lanes when the block is whole vectors), which the register tile of step 2 then multiplies */
  int64_t block_regs = 1;
  for (int i = nout; i < nout + nred; i++) {
    int64_t b = block_of(&h, ax[i].r, ax[i].size, 32), hw = ks->tg.vec_bytes / 4;
    if (b && try_opt(ks, OPT_UNROLL, i - nout, b)) {
      block_regs = hw >= 2 && b % hw == 0 ? b / hw : b;
      find_hot(ks->ast, &h);
      n = ks_axes(ks, ax, &nout, &nred);
      break;
    }
  }

  /* 1. the vector loop; when there is none, a convolution's output channels, else an output loop with a
   * contiguous store that is not a multiple of the vector is padded to one (masked loads and stores at its
   * edge) and the choice made again */
  int64_t vec_id = -1;
  bool vec_on_reduce = false;
  kernel_state unpicked = *ks;
  pick_vector(ks, &h, lanes, &pack_t, &vec_id, &vec_on_reduce);
  bool pad_output = vec_on_reduce && short_reduce_pads_output(&h, lanes, &unpicked);
  if (pad_output) {
    *ks = unpicked;
    find_hot(ks->ast, &h);
    vec_on_reduce = false;
  }
  /* a convolution whose rows are no multiple of the vector takes its lanes from its output channels rather than
   * padding its rows: no masked lanes, no masked loads (MNIST's 5x5 convolution, rows of 20 padded to 24 or 32:
   * 512-609 -> 181 ms on one AVX2 core; its weight gradient 324 -> 129; the 3x3 ones 38-64 -> 37-42) */
  if (vec_id < 0 && !vec_on_reduce && !pad_output && channel_vectors(ks, &h, lanes, true)) return true;
  /* lanes on a row whose hot loads are masked along it (a convolution that also writes the next one's zero
   * border: each tap's load masked at both ends of the row) give way to the output channels' lanes, whose
   * loads are whole: ResNet-18's 14x14 convolutions into a padded 16x16 image, 2.20 -> 1.72-1.76 ms (per-kernel
   * minimums, 2 threads, AVX2) */
  if (vec_id >= 0 && masked_along(&unpicked, &h, vec_id)) {
    kernel_state picked = *ks;
    hot hp = h;
    *ks = unpicked;
    find_hot(ks->ast, &h);
    if (channel_vectors(ks, &h, lanes, true)) return true;
    *ks = picked, h = hp;
  }
  for (int i = 0; i < nout && vec_id < 0 && !vec_on_reduce && lanes >= 2; i++)
    if (ax[i].size > (nred ? lanes / 2 : 2 * lanes) && ax[i].size % lanes && store_contiguous(&h, ax[i].r)) {
      kernel_state before = *ks;
      hot hb = h;
      if (try_opt(ks, OPT_PADTO, i, nred && ax[i].size > lanes ? 2 * lanes : lanes)) {
        find_hot(ks->ast, &h);
        pick_vector(ks, &h, lanes, &pack_t, &vec_id, &vec_on_reduce);
        /* a row is padded for vector lanes only: without them its masked loads and stores cost more than the
         * lanes saved (conv's input gradient; a 3x3 stride-2 max pool of rows of 56 padded to 64: 1.7 -> 0.55 ms) */
        if (vec_id < 0 && !vec_on_reduce) *ks = before, h = hb;
      }
      break;
    }

  /* the same for a reduce loop read contiguously and longer than half a vector (a convolution's weight
   * gradient: its output is the small weight, its rows of 6, 20 or 24 pixels are reduced): padded to a vector,
   * it gives vector accumulators */
  for (int i = nout; i < nout + nred && vec_id < 0 && !vec_on_reduce && lanes >= 2; i++) {
    int re, co, ga;
    n = ks_axes(ks, ax, &nout, &nred);
    if (i >= nout + nred || 2 * ax[i].size <= lanes || ax[i].size % lanes == 0) continue;
    if (ks->tg.vec_bytes >= 64 && (ax[i].size + lanes / 2 - 1) / (lanes / 2) * (lanes / 2) < (ax[i].size + lanes - 1) / lanes * lanes)
      continue;  /* half vectors waste less: tried next */
    load_kinds(&h, ax[i].r, &re, &co, &ga);
    if (ga || !co) continue;
    kernel_state before = *ks;
    hot hb = h;
    if (try_opt(ks, OPT_PADTO, i, lanes)) {
      find_hot(ks->ast, &h);
      pick_vector(ks, &h, lanes, &pack_t, &vec_id, &vec_on_reduce);
      if (vec_id < 0 && !vec_on_reduce) *ks = before, h = hb;
    }
  }

  /* the last resort for vector lanes: a convolution's output channels with any tile */
  if (vec_id < 0 && !vec_on_reduce) {
    find_hot(ks->ast, &h);
    if (channel_vectors(ks, &h, lanes, false)) return true;
  }

  *vectorized = vec_id >= 0 || vec_on_reduce || lanes < 2;

  /* 2. a register tile for reduces: reuse a hot load across one more output loop */
  int64_t tile_id = -1;
  if (nred && !vec_on_reduce) {
    n = ks_axes(ks, ax, &nout, &nred);
    int vec_regs = (int)block_regs;
    for (int i = 0; i < n; i++)
      if (ax[i].type == AX_UPCAST) vec_regs *= (int)(ax[i].size / (vec_id >= 0 ? lanes : 1));
    int best = -1, best_reuse = 0, vi = -1;
    hot h2;  /* the loads as they are after step 1 (h's predate its UPCAST) */
    find_hot(ks->ast, &h2);
    for (int i = 0; i < n && vi < 0; i++)  /* step 1's UPCAST is the only one so far */
      if (vec_id >= 0 && ax[i].type == AX_UPCAST) vi = i;
    for (int i = 0; i < nout; i++) {
      if (ax[i].r->arg.i == vec_id) continue;
      int re, co, ga;
      load_kinds(&h, ax[i].r, &re, &co, &ga);
      /* a load reused across i that varies along the vector loop counts twice: its vector load is then shared
       * by the tile's accumulators (conv: x's window across cout, not the weight's scalar across the batch) */
      for (int l = 0; re && vi >= 0 && l < h2.nloads; l++) {
        int64_t ki, kv;
        if (lin_coef(h2.loads[l]->src[1], ax[i].r, &ki) && ki == 0 &&
            (!lin_coef(h2.loads[l]->src[1], ax[vi].r, &kv) || kv != 0))
          re++;
      }
      /* the most reuse; of equal reuse the longest loop (a batch axis of 8 folded into the tile would leave
       * no loop outside the tile to pack for) */
      if (re > best_reuse || (re && re == best_reuse && ax[i].size > ax[best].size)) { best_reuse = re; best = i; }
    }
    /* 16 when the vector loop is one vector and there are 32 registers: 16 accumulators, one vector load and
     * 16 broadcasts a step (the 3x3 and 5x5 convolutions of MNIST on rows of 8 or 16 pixels, and its conv2
     * weight gradient: 8-12% faster each than 8 accumulators, per-kernel minimums of alternated runs; BEAM
     * found it first); 8 with 16 registers (acc_budget) */
    static const int64_t amts[] = {16, 8, 6, 4, 3, 2};
    int64_t amt = 0;
    for (int k = 0; best >= 0 && k < 6 && !amt; k++)
      if (ax[best].size % amts[k] == 0 && vec_regs * amts[k] <= acc_budget(ks) && ax[best].size > amts[k]) amt = amts[k];
    /* 8 accumulators of one vector each on 16 registers: a tile of 4 on best and 2 on a second loop that
     * best's broadcast operand is reused across loads 4 + 2 per 8 FMAs, not 8 + 1 (a 3x3 convolution of rows
     * of 56 pixels, one vector of 8 wide: 4 output channels x 2 rows, the weight's broadcasts shared by the
     * rows, the input's vector by the channels) */
    int second = -1;
    for (int j = 0; amt == 8 && vec_regs == 1 && vi >= 0 && acc_budget(ks) < 16 && j < nout && second < 0; j++) {
      /* not a window's row loop: the weight panel of step 4 is packed before it (ResNet-18's 56x56 convs at
       * batch 1: 4 couts x 2 rows unpacked 8.2 ms on one thread, 8 couts x 1 row packed 3.3) */
      if (j == best || ax[j].r->arg.i == vec_id || ax[j].type != AX_GLOBAL || ax[j].size % 2 || ax[j].size <= 2 ||
          window_row(ks, &h2, ax[j].r))
        continue;
      for (int l = 0; l < h2.nloads && second < 0; l++) {
        int64_t kj, kb;
        if (lin_coef(h2.loads[l]->src[1], ax[j].r, &kj) && kj == 0 && (!lin_coef(h2.loads[l]->src[1], ax[best].r, &kb) || kb != 0))
          second = j;
      }
    }
    if (second >= 0) {
      kernel_state before = *ks;
      int64_t sid = ax[second].r->arg.i, bid = ax[best].r->arg.i;
      if (try_opt(ks, OPT_UPCAST, best, amt / 2) && try_opt(ks, OPT_UPCAST, axis_of(ks, sid, false), 2)) {
        tile_id = bid;
        amt = 0;
      } else {
        *ks = before;
      }
    }
    if (amt && try_opt(ks, OPT_UPCAST, best, amt)) tile_id = ax[best].r->arg.i;
  }

  /* 2a. a short window along a row on vector lanes with no tile (a max or average pool): its taps are
   * straight-line code, each loop of a window of at most 16 taps unrolled whole. A loop of 3 taps ran two
   * vector loads an iteration under its loop's compare and branch (ResNet-18's 3x3 stride-2 max pool, 2
   * threads: 153 -> 99 us timed by BEAM, which found it; the light models' 2x2 and 3x3 pools 0.6-0.9x their
   * time). Not a window across channels (a local response norm's 5 planes: no faster unrolled) */
  if (nred && vec_id >= 0 && tile_id < 0) {
    n = ks_axes(ks, ax, &nout, &nred);
    hot hw;
    find_hot(ks->ast, &hw);
    int64_t taps = 1, k;
    bool row = true;
    for (int i = nout; i < nout + nred; i++) taps *= ax[i].type == AX_REDUCE ? ax[i].size : 1;
    for (int l = 0; l < hw.nloads; l++)
      row &= lin_coef(hw.loads[l]->src[1], ax[nout + nred - 1].r, &k) && llabs(k) <= 1;
    for (int i = nout + nred - 1; row && taps <= 16 && i >= nout; i--)
      if (ax[i].type == AX_REDUCE && ax[i].size >= 2) try_opt(ks, OPT_UNROLL, i - nout, ax[i].size);
  }

  /* 2b. a scalar reduce with no tile (a pooling window: no load is reused across an output loop, its stride-2
   * loads give no vector) runs one chain of max or add per output, each step waiting on the last: 4 to 8
   * outputs of one loop become as many independent chains (ResNet-18's 3x3 max pool, one thread: 1.9 -> 0.7
   * ms; BEAM found it first). The loop whose loads move least along it (the row's pixels), so the chains read
   * neighbouring memory; a loop of far-apart loads (channels) only for a long reduce: a short window's kernel
   * streams its input, and 8 channel planes at once slowed MNIST's 2x2 pool (2.3 -> 4.8 ms) */
  if (nred && vec_id < 0 && tile_id < 0) {
    n = ks_axes(ks, ax, &nout, &nred);
    hot hc;
    find_hot(ks->ast, &hc);
    int64_t red = 1, best_stride = INT64_MAX;
    bool upcast = false;
    for (int i = 0; i < n; i++) {
      upcast |= ax[i].type == AX_UPCAST;
      if (ax[i].type == AX_REDUCE) red *= ax[i].size;
    }
    /* the same for a window whose row is the vector (ResNet's 3x3 max pool, kx padded to 4 lanes, ky left):
     * one chain of vector maxes per output, then its lanes; 8 outputs at once, 2 threads in the network:
     * 0.54 -> 0.40 ms. Not a long reduce on vectors (a row's sum): its chain is long enough */
    if (vec_on_reduce && red > 16) upcast = true;
    static const int64_t chains[] = {8, 6, 5, 4};
    int pick = -1;
    int64_t pick_amt = 0;
    for (int i = 0; i < nout && !upcast; i++) {
      int64_t amt = 0, stride = 0, k;
      for (int a = 0; a < 4 && !amt; a++)
        if (ax[i].type == AX_GLOBAL && ax[i].size % chains[a] == 0 && ax[i].size > chains[a]) amt = chains[a];
      for (int l = 0; amt && l < hc.nloads; l++)
        stride = !lin_coef(hc.loads[l]->src[1], ax[i].r, &k) ? INT64_MAX : llabs(k) > stride ? llabs(k) : stride;
      if (amt && stride < best_stride) best_stride = stride, pick = i, pick_amt = amt;
    }
    if (pick >= 0 && (best_stride <= 8 || red >= 16)) try_opt(ks, OPT_UPCAST, pick, pick_amt);
  }

  /* 3. threads */
  if (ks->tg.nthreads > 1 && work >= THREAD_MIN_WORK) {
    n = ks_axes(ks, ax, &nout, &nred);
    int nt = ks->tg.nthreads, pick = -1;
    int vi = vec_id >= 0 ? axis_of(ks, vec_id, false) : -1;
    /* the vector loop's outer part also when it does not divide but is long (49 panels: 25 and 24; 11: 6 and 5,
     * where the tile loop split instead kept step 4 from packing and the kernel took lanes on its reduce) */
    int64_t red = 1;
    for (int i = nout; i < nout + nred; i++) red *= ax[i].size;
    /* Not a short window's (a 2x2 max pool over rows of 112, 4 vector tiles a row: each thread took half of
     * every row, 1.7 -> 2.35 ms against threads on the channels) */
    if (nred && red >= 16 && vi >= 0 && ax[vi].size >= 2 * nt && (ax[vi].size % nt == 0 || ax[vi].size >= 4 * nt)) pick = vi;
    /* not the tile loop when another splits and step 4 will move the vector loop outside it to pack there
     * (ResNet's 7x7 stride-2 stem conv on rows of 112: its cout split, the PACK failed and the kernel took the
     * reduce-vector form, 16 ms; oy split, 4 ms on 2 threads). A window's weight packs outside the tile loop:
     * that one keeps the threads on its tile */
    hot h3;
    find_hot(ks->ast, &h3);
    int ti = tile_id >= 0 && vec_id >= 0 && !windowed(ks, &h3) ? axis_of(ks, tile_id, false) : -1;
    for (int i = 0; i < nout && pick < 0; i++)
      if (ax[i].type == AX_GLOBAL && ax[i].size % nt == 0 && i != ti) pick = i;
    for (int i = 0; i < nout && pick < 0; i++)
      if (ax[i].type == AX_GLOBAL && ax[i].size % nt == 0) pick = i;
    for (int i = 0; i < nout && pick < 0; i++)
      if (ax[i].type == AX_GLOBAL && ax[i].size >= 4 * nt) pick = i;
    if (pick >= 0) try_opt(ks, OPT_THREAD, pick, nt);
  }

  /* 4. cache blocking: the vector loop outside the tile loop, and the operand reused across the tile loop
   * (matmul: B's panel of the vector loop's columns) packed into a contiguous buffer before it */
  /* not the window of a convolution: its packed panel is an im2col copy per output row, which cost more than
   * the tile's arithmetic (conv2d 32x64x58x58 k3: 64-122 ms packed, 32-34 ms reading the input in place) */
  hot hp;
  find_hot(ks->ast, &hp);
  if (tile_id >= 0 && vec_id >= 0 && !windowed(ks, &hp)) {
    n = ks_axes(ks, ax, &nout, &nred);
    int vi = axis_of(ks, vec_id, false), ti = axis_of(ks, tile_id, false);
    if (vi >= 0 && ti >= 0 && ax[vi].size >= 2) {
      /* SWAP exchanges the loops' ids: the tile loop then has the vector loop's old id, and the other way */
      if (vi > ti && try_opt(ks, OPT_SWAP, ti, vi)) {
        ti = axis_of(ks, vec_id, false);
        vi = axis_of(ks, tile_id, false);
        n = ks_axes(ks, ax, &nout, &nred);
      }
      /* a plain copy of the panel serves the tile loop's trips, and a few do not pay for it (an MLP's
       * 32x784 by 784x512 matmul, 4 trips: the whole MLP 0.183 -> 0.155 ms without it). A transposing PACK
       * makes the vector load contiguous: it stays however few the trips */
      if (ti > vi && (pack_t || ax[ti].size >= PACK_MIN_REUSE) && try_opt(ks, OPT_PACK, ti, pack_t)) return true;
    }
  }
  /* A convolution packs its weight instead, the operand its window does not read: the tile's panel (cout x
   * cin x kernel) copied contiguous before the output-row loop, and read from there by every row. Worth it
   * only over many rows: conv 64->64 56x56 3x3 forward, 31.4-31.9 -> 28.4 ms (per-kernel minimums, alternated;
   * BEAM found it); MNIST's convs of 6-24 rows were 3-30% slower with it, the copy being repeated per image. */
  if (tile_id >= 0 && vec_id >= 0 && windowed(ks, &hp)) {
    n = ks_axes(ks, ax, &nout, &nred);
    int ti = axis_of(ks, tile_id, false);
    if (ti >= 0 && ti + 1 < nout && ax[ti + 1].type == AX_GLOBAL && ax[ti + 1].size >= PACK_WEIGHT_MIN_ROWS &&
        window_row(ks, &hp, ax[ti + 1].r))
      try_opt(ks, OPT_PACK, ti + 1, 0);
  }
  return vec_id < 0 || !pack_t;
}

static bool heuristic_both(kernel_state *ks) {
  kernel_state save = *ks;
  bool vec;
  if (heuristic(ks, true, &vec)) return vec;
  *ks = save;
  heuristic(ks, false, &vec);
  return vec;
}

/* GPU: a reduce whose outputs are too few to fill the device (a full sum, the rows of a softmax or a layernorm)
 * spreads each output's reduction over a group of work items (GROUP: neighbouring items read neighbouring
 * elements). Returns whether it applied. */
#define GPU_GROUP_MAX_OUTPUTS (1 << 18)  /* an H200 holds 132 x 2048 resident threads */
#define GPU_GROUP_MIN_REDUCE 256

static bool gpu_group(kernel_state *ks) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  if (!nred) return false;
  double outputs = 1;
  for (int i = 0; i < n; i++)
    if (i < nout || ax[i].type == AX_UPCAST) outputs *= (double)ax[i].size;
  /* the largest reduce axis */
  int best = -1;
  for (int i = 0; i < nred; i++)
    if (ax[nout + i].type == AX_REDUCE && (best < 0 || ax[nout + i].size > ax[nout + best].size)) best = i;
  if (best < 0 || outputs > GPU_GROUP_MAX_OUTPUTS || ax[nout + best].size < GPU_GROUP_MIN_REDUCE) return false;
  /* not a row kernel (softmax: its output loop is inside the row's work item, after the reduces): every item of
   * the group would run that loop whole. Splitting it over the group too is not built yet */
  uint64_t red = reduce_loops(ks->ast);
  for (int i = 0; i < nout; i++)
    if (ax[i].r->arg.i >= 64 || !(red >> ax[i].r->arg.i & 1)) return false;
  static const int64_t sizes[] = {256, 128, 64, 32, 16};
  for (int k = 0; k < 5; k++) {
    char why[160];
    if (ax[nout + best].size % sizes[k] == 0 && apply_opt(ks, (opt){OPT_GROUP, best, sizes[k]}, why)) return true;
  }
  return false;
}

/* when no loop fills a whole machine vector, half vectors (a row of 8 pixels with AVX-512: the 8x8 and 10x10
 * convolutions of MNIST), then quarter ones (rows of 20 or 12: MNIST's max-pool gradients), rather than
 * scalar code; never below 4 lanes, and only on AVX-512 (AVX2 keeps its tuned choices) */
void hand_coded_optimizations(kernel_state *ks) {
  if (ks->tg.has_local && gpu_group(ks)) return;
  kernel_state save = *ks;
  if (heuristic_both(ks) || ks->tg.vec_bytes < 64) return;
  kernel_state full = *ks;
  for (int vb = save.tg.vec_bytes / 2; vb >= 16; vb /= 2) {
    *ks = save;
    ks->tg.vec_bytes = vb;
    if (heuristic_both(ks)) return;
  }
  *ks = full;
}
