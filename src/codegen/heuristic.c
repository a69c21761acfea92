/* heuristic.c — actions for a kernel without search, tinygrad's hand_coded_optimizations made for CPUs.
 *
 * The loads that run most often are those inside a REDUCE (all loads when there is none). For each loop we
 * look at how they index it: a coefficient of 0 means the load is reused across that loop (a register can
 * hold it), 1 means contiguous (a vector load), anything else a gather.
 *   1. vector lanes: an output loop with a contiguous store whose hot loads are contiguous or reused gets
 *      UPCAST by 2 or 1 vectors; else a reduce loop whose loads are contiguous or reused gets UNROLL by 4
 *      vectors (a vector accumulator reduced across its lanes at the end);
 *      When no loop gives vector lanes, a convolution takes them from its output channels (channel_vectors);
 *      else a contiguous output loop that is not a multiple of the vector is padded to one (PADTO) and the
 *      choice made again. A vector loop whose hot load is strided in it is
 *      taken when step 4 can pack that load transposed (matmul with B transposed), else the dot-product
 *      form: UNROLL of the reduce by one vector and 16 accumulators over the output loops with reuse;
 *      (a reduce's loop is padded from above one vector: conv's rows of 20 or 24 become 32);
 *   2. register tile: for a reduce, one more output loop along which a hot load is reused gets UPCAST by
 *      16/8/6/4/3/2, keeping at most 16 vector accumulators with 32 registers (matmul: 8x32 floats, 16 zmm), 12
 *      with 16 (AVX2: max_acc); a load reused there that varies along the vector loop counts twice (conv: the
 *      tile goes on cout, where x's window vector is shared, not on the batch, where only the weight's scalar
 *      is);
 *   3. threads: the output loop that splits evenly across the pool, preferring the vector loop's outer part
 *      (each core then keeps its own panel of the reused operand in its cache, e.g. B's columns in matmul);
 *   4. cache blocking: the vector loop outside the tile loop (SWAP) and the reused operand's panel packed
 *      into a contiguous buffer (PACK) before the tile loop.
 * A row kernel (reduces broadcast along an output loop: softmax in one kernel, a convolution whose weight is
 * a constant) takes its own short path instead, row_kernel() below: its broadcast loops innermost, so each
 * reduce runs once per row. So does a matrix-vector product of a few rows (decode), matvec().
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/opt.h"

/* below this many loop iterations in total a kernel runs on one thread: waking the pool costs more */
#define THREAD_MIN_WORK 32768
#define PACK_WEIGHT_MIN_ROWS 32  /* output rows a convolution's packed weight panel must serve (step 4) */

/* the register tile's vector accumulators (step 2): with AVX-512's 32 registers 16; with AVX2's 16 registers
 * 12, which leaves room for the shared vector and a broadcast: 16 spilled accumulators every step (ResNet-18's
 * 3x3 conv 64->64 on 56x56 with its residual, one thread, best of 60 runs: 10.0 -> 4.0 ms; 128 on 28x28 7.3 ->
 * 4.7; MNIST's 3x3 and 5x5 convs at batch 512 1.5-2x faster each, per-kernel minimums) */
static int max_acc(const kernel_state *ks) { return ks->tg.vec_bytes >= 64 ? 16 : 12; }

typedef struct hot { uop *loads[64]; int nloads; uop *stores[16]; int nstores; } hot;

static void find_hot(uop *ast, hot *h) {
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
static void load_kinds(const hot *h, uop *r, int *reuse, int *contig, int *gather) {
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

/* whether x is r plus a sum that is a multiple of m for every value of its loops */
static bool r_plus_multiple(uop *x, uop *r, int64_t m) {
  if (x == r) return true;
  if (x->op != OP_ADD) return false;
  for (int i = 0; i < 2; i++) {
    uop *o = x->src[1 - i];
    int64_t k;
    bool mult = uop_is_const(o) ? o->arg.i % m == 0
                                : o->op == OP_MUL && uop_is_const(o->src[1]) && o->src[1]->arg.i % m == 0 && !uop_uses(o, r);
    if (mult && lin_coef(x->src[i], r, &k) && k == 1 && r_plus_multiple(x->src[i], r, m)) return true;
  }
  return false;
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
static int64_t block_of(const hot *h, uop *r, int64_t size, int64_t max) {
  int64_t best = 0;
  for (int l = 0; l < h->nloads; l++) {
    int64_t b = grain(h->loads[l]->src[1], r);
    if (b > 1 && b <= max && size % b == 0 && b > best) best = b;
  }
  return best;
}

/* load_kinds for a vector loop of `lanes`: a load whose index is the same over aligned runs of a multiple of
 * the lanes (grain) is the same in every lane of a vector, a broadcast, not a gather (Q6_K's scale of 16
 * values in a dequantize kernel) */
static void load_kinds_vec(const hot *h, uop *r, int lanes, int *reuse, int *contig, int *gather) {
  load_kinds(h, r, reuse, contig, gather);
  for (int i = 0; i < h->nloads && *gather; i++) {
    int64_t k, g;
    uop *l = h->loads[i];
    if ((!lin_coef(l->src[1], r, &k) || (k != 0 && k != 1)) && (g = grain(l->src[1], r)) > 1 && g % lanes == 0) {
      (*gather)--;
      (*reuse)++;
    }
  }
}

static bool store_contiguous(const hot *h, uop *r) {
  if (!h->nstores) return false;
  for (int i = 0; i < h->nstores; i++) {
    int64_t k;
    if (!lin_coef(h->stores[i]->src[1], r, &k) || k != 1) return false;
  }
  return true;
}

static bool try_opt(kernel_state *ks, opt_op op, int axis, int64_t arg) {
  char why[160];
  return apply_opt(ks, (opt){op, axis, arg}, why);
}

/* the index among output axes (or reduce axes when red) of the RANGE with this id */
static int axis_of(kernel_state *ks, int64_t id, bool red) {
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

/* Channel vectors: a convolution whose output rows give no vector (7 or 14 pixels, a stride-2 window, a
 * residual's strided 1x1 convolution fused in) takes its lanes from the output channels instead. Along them
 * the input is reused (one broadcast per FMA) and the weight strided: that weight's panel is packed with the
 * channels innermost (a transposing PACK before the row loop), so each FMA reads one contiguous vector, and
 * the pixels of a row become the register tile (the weight vector reused across them). The store is a
 * scatter, once per reduce of at least CHANNEL_VEC_MIN_REDUCE. Returns whether it applied; ks is unchanged
 * when not. Before: the channels were upcast with the weight gathered lane by lane (ResNet-18's 7x7 and 14x14
 * layers at 2 GFLOP/s). */
#define CHANNEL_VEC_MIN_REDUCE 64
#define CHANNEL_VEC_BIG_WEIGHT (64 << 10)  /* values: 256 KiB of float32, half a core's L2 */

static bool channel_vectors(kernel_state *ks, const hot *h, int lanes, int64_t min_weight) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  if (lanes < 2 || !nred || nout < 2) return false;
  int64_t red = 1;
  for (int i = nout; i < n; i++)
    if (ax[i].type == AX_REDUCE) red *= ax[i].size;
  if (red < CHANNEL_VEC_MIN_REDUCE) return false;
  int c = -1;
  for (int i = 0; i < nout && c < 0; i++) {
    if (ax[i].type != AX_GLOBAL || ax[i].size % lanes) continue;
    int strided = 0, other = 0;
    for (int l = 0; l < h->nloads; l++) {
      int64_t k;
      if (!lin_coef(h->loads[l]->src[1], ax[i].r, &k)) other++;
      else if (k > 1) strided++;
      else if (k != 0) other++;
    }
    if (strided && !other) c = i;
  }
  if (c < 0) return false;
  /* min_weight: the strided loads a weight (no output loop but c) of at least that many values */
  for (int l = 0; l < h->nloads && min_weight; l++) {
    int64_t k;
    if (!lin_coef(h->loads[l]->src[1], ax[c].r, &k) || k <= 1) continue;
    if (ax[c].size * red < min_weight) return false;
    for (int i = 0; i < nout; i++)
      if (i != c && ax[i].size > 1 && (!lin_coef(h->loads[l]->src[1], ax[i].r, &k) || k != 0)) return false;
  }
  /* the tile: the output loop the strided (weight) loads do not use and the others do: the row's pixels */
  int t = -1;
  for (int i = nout - 1; i >= 0 && t < 0; i--) {
    if (i == c || ax[i].type != AX_GLOBAL || ax[i].size < 2) continue;
    bool w_reused = true, x_varies = false;
    for (int l = 0; l < h->nloads; l++) {
      int64_t kc, ki;
      bool strided = lin_coef(h->loads[l]->src[1], ax[c].r, &kc) && kc > 1;
      bool uses = !lin_coef(h->loads[l]->src[1], ax[i].r, &ki) || ki != 0;
      if (strided && uses) w_reused = false;
      if (!strided && uses) x_varies = true;
    }
    if (w_reused && x_varies) t = i;
  }
  if (t < 0) return false;  /* no row to reuse the weight's vectors across (a weight gradient) */
  int64_t vecs = ax[c].size % (2 * lanes) == 0 ? 2 : 1;
  static const int64_t amts[] = {8, 7, 6, 5, 4, 3, 2};
  bool fits = false;
  for (int k = 0; k < 7 && !fits; k++) fits = amts[k] >= 4 && ax[t].size % amts[k] == 0 && vecs * amts[k] <= max_acc(ks);
  /* before padding (min_weight): a row padded to two or more vectors (14 pixels to 16) loads a weight scalar
   * per vector of pixels and beat channel vectors without a tile that fits the registers (2 x 7 on 14x14
   * spills: 6.2 ms, the padded row 4.7 ms; 7 pixels padded to one vector 10.2 ms against 6.1, one thread) */
  if (min_weight && !fits && ax[t].size > lanes) return false;
  kernel_state save = *ks;
  int64_t cid = ax[c].r->arg.i, tid = ax[t].r->arg.i;
  if (!try_opt(ks, OPT_UPCAST, c, vecs * lanes)) return false;
  n = ks_axes(ks, ax, &nout, &nred);
  int ti = axis_of(ks, tid, false);
  /* a tile of at least 4 pixels within max_acc accumulators; else up to 16 (a row of 7 or 14 pixels: 2 x 7,
   * one spilled, beat 1 x 7 on 14x14, 6.7 against 11.6 ms; 2 x 4 beat 2 x 7 on 28x28, 4.7 against 6.5 ms) */
  bool tiled = false;
  for (int k = 0; ti >= 0 && k < 7 && !tiled; k++)
    tiled = amts[k] >= 4 && ax[ti].size % amts[k] == 0 && vecs * amts[k] <= max_acc(ks) && try_opt(ks, OPT_UPCAST, ti, amts[k]);
  for (int k = 0; ti >= 0 && k < 7 && !tiled; k++)
    tiled = ax[ti].size % amts[k] == 0 && vecs * amts[k] <= 16 && try_opt(ks, OPT_UPCAST, ti, amts[k]);
  /* threads over the channel blocks (each core packs its own panel), else any output loop that splits */
  n = ks_axes(ks, ax, &nout, &nred);
  double work = 1;
  for (int i = 0; i < n; i++) work *= (double)ax[i].size;
  int nt = ks->tg.nthreads, ci = axis_of(ks, cid, false);
  if (nt > 1 && work >= THREAD_MIN_WORK) {
    bool done = ci >= 0 && ax[ci].size >= nt && (ax[ci].size % nt == 0 || ax[ci].size >= 4 * nt) &&
                try_opt(ks, OPT_THREAD, ci, nt);
    for (int i = 0; i < nout && !done; i++)
      if (ax[i].type == AX_GLOBAL && ax[i].size >= 4 * nt) done = try_opt(ks, OPT_THREAD, i, nt);
  }
  /* the weight's panel, channels innermost, packed before the first loop inside the channel blocks */
  n = ks_axes(ks, ax, &nout, &nred);
  ci = axis_of(ks, cid, false);
  for (int i = ci + 1; ci >= 0 && i < nout; i++)
    if (ax[i].type == AX_GLOBAL && try_opt(ks, OPT_PACK, i, 1)) return true;
  *ks = save;
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
      int64_t left = 16, per = nt == 2 ? 4 : 16;
      for (int t = 0; t < nt && left > 1; t++) {
        int a = axis_of(ks, tile_ids[t], false);
        for (int64_t u = per < left ? per : left; u >= 2; u /= 2)
          if (a >= 0 && ax[a].size % u == 0 && try_opt(ks, OPT_UPCAST, a, u)) { left /= u; break; }
      }
      break;
    }

  *pack_tp = pack_t;
  *vec_idp = vec_id;
  *vec_on_reducep = vec_on_reduce;
}

/* a loop of size not a multiple of the vector padded to a multiple of `to`, or of the vector when that wastes
 * more than an eighth */
static void pad_loop(kernel_state *ks, int axis, int64_t size, int lanes, int64_t to) {
  if (lanes < 2 || size % lanes == 0 || size < 2 * lanes) return;
  if (8 * ((size + to - 1) / to * to - size) > size || !try_opt(ks, OPT_PADTO, axis, to)) try_opt(ks, OPT_PADTO, axis, lanes);
}

/* A row kernel (a reduce broadcast along an output loop, computed once per row: see schedule.c) gets vector
 * lanes on its row's output loop and on each reduce's loop (expand.c gives them one lane: no value uses two
 * of them), 4 vector accumulators per reduce to hide the latency of the add or max chain, and threads on the
 * rows. Returns false when the kernel is not a row kernel. */
static bool row_kernel(kernel_state *ks, int lanes) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  uint64_t rl = reduce_loops(ks->ast);
  int row = -1;
  for (int i = nout - 1; i >= 0 && row < 0; i--)
    if (ax[i].r->arg.i < 64 && !(rl >> ax[i].r->arg.i & 1) && ax[i].size > 1) row = i;
  if (row < 0 || !nred) return false;
  /* the broadcast loops innermost (SWAP exchanges the ids, so the reduces' loops are found again each time):
   * the linearizer opens a reduce inside the loops it uses, so it then runs once per element of them and its
   * value is stored along the loops inside. A convolution with a constant weight, whose reduce over (cin, ky,
   * kx) does not use cout, otherwise recomputes it for every cout (64x the work, squeezenet's first conv) */
  for (bool moved = true; moved;) {
    moved = false;
    n = ks_axes(ks, ax, &nout, &nred);
    rl = reduce_loops(ks->ast);
    for (int i = 0; i + 1 < nout && !moved; i++) {
      bool bi = ax[i].r->arg.i < 64 && !(rl >> ax[i].r->arg.i & 1), bj = ax[i + 1].r->arg.i < 64 && !(rl >> ax[i + 1].r->arg.i & 1);
      moved = bi && !bj && ax[i + 1].size > 1 && try_opt(ks, OPT_SWAP, i, i + 1);
    }
  }
  n = ks_axes(ks, ax, &nout, &nred);
  rl = reduce_loops(ks->ast);
  row = -1;
  for (int i = nout - 1; i >= 0 && row < 0; i--)
    if (ax[i].r->arg.i < 64 && !(rl >> ax[i].r->arg.i & 1) && ax[i].size > 1) row = i;
  hot h;
  find_hot(ks->ast, &h);
  /* the vector loop, when the row's store is not contiguous (a conv's cout): the innermost loop the reduces
   * use with a contiguous store (the conv's ox), its hot loads gathered lane by lane when strided (a stride-2
   * conv: its stores along the row outnumber its loads: squeezenet's first conv 5.4 ms -> 1.5 ms) */
  int64_t vec_id = -1, row_id = ax[row].r->arg.i;
  if (!store_contiguous(&h, ax[row].r))
    for (int i = nout - 1; i >= 0 && vec_id < 0; i--)
      if (ax[i].r->arg.i < 64 && (rl >> ax[i].r->arg.i & 1) && store_contiguous(&h, ax[i].r)) vec_id = ax[i].r->arg.i;
  if (vec_id >= 0 && lanes >= 2) {
    int v = axis_of(ks, vec_id, false);
    pad_loop(ks, v, ax[v].size, lanes, 2 * lanes);
    v = axis_of(ks, vec_id, false);
    n = ks_axes(ks, ax, &nout, &nred);
    if (v >= 0 && ax[v].size % lanes == 0) try_opt(ks, OPT_UPCAST, v, lanes);
    find_hot(ks->ast, &h);
  }
  n = ks_axes(ks, ax, &nout, &nred);
  row = axis_of(ks, row_id, false);
  if (row < 0) return true;
  double work = 1;
  for (int i = 0; i < n; i++) work *= (double)ax[i].size;
  /* rows that are not a multiple of the vector (1000 classes) are padded, their edge masked */
  if (store_contiguous(&h, ax[row].r)) pad_loop(ks, row, ax[row].size, lanes, 2 * lanes);
  for (int i = 0; i < nred; i++) {
    int re, co, ga;
    n = ks_axes(ks, ax, &nout, &nred);
    load_kinds(&h, ax[nout + i].r, &re, &co, &ga);
    if (!ga && co) pad_loop(ks, nout + i, ax[nout + i].size, lanes, 4 * lanes);
  }
  find_hot(ks->ast, &h);
  n = ks_axes(ks, ax, &nout, &nred);
  row = axis_of(ks, row_id, false);
  if (row >= 0 && lanes >= 2 && ax[row].size % lanes == 0 && store_contiguous(&h, ax[row].r))
    try_opt(ks, OPT_UPCAST, row, ax[row].size % (2 * lanes) == 0 ? 2 * lanes : lanes);
  /* by id: an UNROLL of a whole loop removes it, and the others move */
  int64_t red_ids[KS_MAX_AXES];
  int nids = 0;
  for (int i = nout; i < nout + nred; i++) red_ids[nids++] = ax[i].r->arg.i;
  for (int k = 0; k < nids && lanes >= 2; k++) {
    int i = axis_of(ks, red_ids[k], true);
    n = ks_axes(ks, ax, &nout, &nred);
    if (i < 0) continue;
    int re, co, ga;
    load_kinds(&h, ax[nout + i].r, &re, &co, &ga);
    if (ax[nout + i].size % lanes || ga || !co) continue;
    int64_t amt = 4 * lanes;
    while (amt > lanes && ax[nout + i].size % amt) amt /= 2;
    try_opt(ks, OPT_UNROLL, i, amt);
  }
  if (ks->tg.nthreads > 1 && work >= THREAD_MIN_WORK) {
    n = ks_axes(ks, ax, &nout, &nred);
    int nt = ks->tg.nthreads;
    for (int i = 0; i < nout; i++)
      if (ax[i].type == AX_GLOBAL && ax[i].size >= nt && (ax[i].size % nt == 0 || ax[i].size >= 4 * nt) &&
          try_opt(ks, OPT_THREAD, i, nt))
        break;
  }
  return true;
}

/* below this many multiply-adds a matrix-vector product runs on one thread: about 10 µs of one core's work,
 * against 1-5 µs to wake the pool and the risk of waiting for a thread the OS has set aside */
#define MATVEC_THREAD_MIN_WORK 131072

/* A matrix-vector product (decode: y = x W^T, x of M <= 4 rows, W of N rows of K contiguous values): one
 * reduce over K, along which every hot load is contiguous or reused, and one long output loop N along which
 * the weight is strided. Vector lanes go on K, as wide as divide it (K = 172: 4 lanes, not 8 lanes padded to
 * 176 with every load masked), the M rows and 16 / M of the N rows become the register tile (x's vector is
 * loaded once for all N rows, W's once for all M rows), and threads split N only when the product is large
 * enough to pay for waking the pool. Returns false, changing nothing, when the kernel is not one. */
static bool matvec(kernel_state *ks, const hot *h, int lanes) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  if (nred != 1 || n != nout + 1 || nout < 1 || lanes < 4 || !h->nloads) return false;
  int ni = -1;
  int64_t m = 1;
  for (int i = 0; i < nout; i++)
    if (ni < 0 || ax[i].size > ax[ni].size) ni = i;
  for (int i = 0; i < nout; i++) m *= i == ni ? 1 : ax[i].size;
  int64_t nn = ax[ni].size, k = ax[nout].size;
  if (m > 4 || nn < 8 || k < 4 || !store_contiguous(h, ax[ni].r)) return false;
  /* every hot load float32, contiguous or reused along K; the weight (contiguous along K) strided along N, the
   * vector (contiguous along K) the same for every N (without it, a sum of rows: the general path's) */
  bool weight = false, vec = false;
  for (int l = 0; l < h->nloads; l++) {
    int64_t ck, cn;
    if (h->loads[l]->dtype != TG_FLOAT32 || !lin_coef(h->loads[l]->src[1], ax[nout].r, &ck) || (ck != 0 && ck != 1))
      return false;
    if (!lin_coef(h->loads[l]->src[1], ax[ni].r, &cn) || cn == 1) return false;
    weight |= ck == 1 && cn != 0;
    vec |= ck == 1 && cn == 0;
  }
  if (!weight || !vec) return false;
  int v = lanes;
  while (v > 4 && k % v) v /= 2;
  if (k % v) return false;
  /* the tile: all M rows and the most N rows that divide N, 16 accumulators at most; a tile of fewer than 8
   * (N = 172 = 4 x 43) gets more vectors of K per step instead, to keep 8 or more FMA chains in flight */
  static const int64_t amts[] = {16, 12, 8, 6, 4, 3, 2};
  int64_t u = 1;
  for (int i = 0; i < 7 && u == 1; i++)
    if (amts[i] * m <= 16 && nn % amts[i] == 0 && nn > amts[i]) u = amts[i];
  int64_t unroll = v;
  while (u * m * (2 * unroll / v) <= 16 && u * m * (unroll / v) < 8 && k % (2 * unroll) == 0) unroll *= 2;
  kernel_state save = *ks;
  ks->tg.vec_bytes = v * 4;
  int64_t nid = ax[ni].r->arg.i;
  bool ok = try_opt(ks, OPT_UNROLL, 0, unroll);
  /* the M rows whole, by id: each UPCAST moves the axes */
  int64_t mids[KS_MAX_AXES];
  int nm = 0;
  for (int i = 0; i < nout; i++)
    if (i != ni && ax[i].size > 1) mids[nm++] = ax[i].r->arg.i;
  for (int i = 0; ok && i < nm; i++) {
    int a = axis_of(ks, mids[i], false);
    n = ks_axes(ks, ax, &nout, &nred);
    ok = a >= 0 && try_opt(ks, OPT_UPCAST, a, ax[a].size);
  }
  int a = axis_of(ks, nid, false);
  if (ok && u > 1) ok = a >= 0 && try_opt(ks, OPT_UPCAST, a, u);
  if (!ok) {
    *ks = save;
    return false;
  }
  int nt = ks->tg.nthreads;
  a = axis_of(ks, nid, false);
  n = ks_axes(ks, ax, &nout, &nred);
  if (nt > 1 && a >= 0 && (double)m * (double)nn * (double)k >= MATVEC_THREAD_MIN_WORK && ax[a].size >= 2)
    try_opt(ks, OPT_THREAD, a, ax[a].size < nt ? ax[a].size : nt);
  return true;
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

  /* 1. the vector loop; when there is none, an output loop with a contiguous store that is not a multiple
   * of the vector is padded to one (masked loads and stores at its edge) and the choice made again */
  int64_t vec_id = -1;
  bool vec_on_reduce = false;
  pick_vector(ks, &h, lanes, &pack_t, &vec_id, &vec_on_reduce);
  /* a convolution with a big weight whose rows need padding to a vector (7, 14 or 28 pixels) takes its output
   * channels instead: no masked lanes, and its weight panel packed once and read as vectors where the padded
   * row read that weight as 16 strided scalars per step, again for every row, from beyond L2 (ResNet-18's 3x3
   * conv 512->512 on 7x7, one thread, best of 90 runs: 17.4 -> 6.3 ms; 256 channels on 14x14 7.5 -> 6.4, 128
   * on 28x28 8.1 -> 6.5). A small weight stays in cache: MNIST's convs (25-37K values) are faster padded */
  if (vec_id < 0 && !vec_on_reduce && channel_vectors(ks, &h, lanes, CHANNEL_VEC_BIG_WEIGHT)) {
    *vectorized = true;
    return true;
  }
  for (int i = 0; i < nout && vec_id < 0 && !vec_on_reduce && lanes >= 2; i++)
    if (ax[i].size > (nred ? lanes / 2 : 2 * lanes) && ax[i].size % lanes && store_contiguous(&h, ax[i].r)) {
      kernel_state before = *ks;
      hot hb = h;
      if (try_opt(ks, OPT_PADTO, i, nred && ax[i].size > lanes ? 2 * lanes : lanes)) {
        find_hot(ks->ast, &h);
        pick_vector(ks, &h, lanes, &pack_t, &vec_id, &vec_on_reduce);
        /* a short row padded by up to 60% is worth it only for vector lanes (conv's input gradient: none) */
        if (vec_id < 0 && !vec_on_reduce && ax[i].size <= 2 * lanes) *ks = before, h = hb;
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

  /* the last resort for vector lanes: a convolution's output channels */
  if (vec_id < 0 && !vec_on_reduce) {
    find_hot(ks->ast, &h);
    if (channel_vectors(ks, &h, lanes, 0)) {
      *vectorized = true;
      return true;
    }
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
     * found it first); 8 with 16 registers (max_acc) */
    static const int64_t amts[] = {16, 8, 6, 4, 3, 2};
    for (int k = 0; best >= 0 && k < 6; k++)
      if (ax[best].size % amts[k] == 0 && vec_regs * amts[k] <= max_acc(ks) && ax[best].size > amts[k] &&
          try_opt(ks, OPT_UPCAST, best, amts[k])) {
        tile_id = ax[best].r->arg.i;
        break;
      }
  }

  /* 3. threads */
  if (ks->tg.nthreads > 1 && work >= THREAD_MIN_WORK) {
    n = ks_axes(ks, ax, &nout, &nred);
    int nt = ks->tg.nthreads, pick = -1;
    int vi = vec_id >= 0 ? axis_of(ks, vec_id, false) : -1;
    /* the vector loop's outer part also when it does not divide but is long (49 panels: 25 and 24) */
    if (nred && vi >= 0 && ax[vi].size >= 2 * nt && (ax[vi].size % nt == 0 || ax[vi].size >= 8 * nt)) pick = vi;
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
      }
      if (ti > vi && try_opt(ks, OPT_PACK, ti, pack_t)) return true;
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
 * convolutions of MNIST) rather than scalar code */
void hand_coded_optimizations(kernel_state *ks) {
  if (ks->tg.has_local && gpu_group(ks)) return;
  kernel_state save = *ks;
  if (heuristic_both(ks) || ks->tg.vec_bytes < 64) return;
  kernel_state full = *ks;
  *ks = save;
  ks->tg.vec_bytes /= 2;
  if (!heuristic_both(ks)) *ks = full;
}
