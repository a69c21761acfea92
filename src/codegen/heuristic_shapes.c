/* heuristic_shapes.c — kernel shapes the heuristic (heuristic.c) gives a path of their own: a convolution's
 * output channels as vector lanes, row kernels (softmax in one kernel), matrix-vector products (decode), and
 * products with a weight decoded from quantized bytes (GGUF) in the kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/heuristic.h"

/* a loop of size not a multiple of the vector padded to a multiple of `to`, or of the vector when that wastes
 * more than an eighth. Rows of 9 to 15 are padded too: two vectors, the second masked, beat scalar lanes (the
 * 13x13 and 14x14 layers of squeezenet, inception, shufflenet: their row kernels 2-4x faster, the models
 * 10-20% under tg_jit) */
static void pad_loop(kernel_state *ks, int axis, int64_t size, int lanes, int64_t to) {
  if (lanes < 2 || size % lanes == 0 || size <= lanes) return;
  if (8 * ((size + to - 1) / to * to - size) > size || !try_opt(ks, OPT_PADTO, axis, to)) try_opt(ks, OPT_PADTO, axis, lanes);
}

/* Channel vectors: a convolution whose output rows give no vector (7, 14 or 20 pixels, a stride-2 window, a
 * residual's strided 1x1 convolution fused in) takes its lanes from the output channels instead. Along them
 * the input is reused (one broadcast per FMA) and the weight strided: that weight's panel is packed with the
 * channels innermost (a transposing PACK before the row loop), so each FMA reads one contiguous vector, and
 * the pixels of a row become the register tile (the weight vector reused across them). The store is a
 * scatter, once per reduce of at least CHANNEL_VEC_MIN_REDUCE. Returns whether it applied; ks is unchanged
 * when not. Before: the channels were upcast with the weight gathered lane by lane (ResNet-18's 7x7 and 14x14
 * layers at 2 GFLOP/s). */
#define CHANNEL_VEC_MIN_REDUCE 64

bool channel_vectors(kernel_state *ks, const hot *h, int lanes, bool need_fit) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  if (lanes < 2 || !nred || nout < 2) return false;
  int64_t red = 1;
  for (int i = nout; i < n; i++)
    if (ax[i].type == AX_REDUCE) red *= ax[i].size;
  if (red < CHANNEL_VEC_MIN_REDUCE) return false;
  /* of the loops along which every load is strided or reused, the one whose strided loads (the panel to pack)
   * use the fewest other output loops: the output channels, whose weight is the same for every image and pixel,
   * not the batch, whose images vary along the rows */
  int c = -1, c_uses = 0;
  for (int i = 0; i < nout; i++) {
    if (ax[i].type != AX_GLOBAL || ax[i].size % lanes) continue;
    int strided = 0, other = 0, uses = 0;
    for (int l = 0; l < h->nloads; l++) {
      int64_t k, kj;
      if (!lin_coef(h->loads[l]->src[1], ax[i].r, &k)) other++;
      else if (k > 1) {
        strided++;
        for (int j = 0; j < nout; j++)
          if (j != i && (!lin_coef(h->loads[l]->src[1], ax[j].r, &kj) || kj != 0)) uses++;
      } else if (k != 0) other++;
    }
    if (strided && !other && (c < 0 || uses < c_uses)) c = i, c_uses = uses;
  }
  if (c < 0) return false;
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
  /* two vectors of channels a block, one when their weight panel (block x reduce, PACKed per block) would not
   * fit CONV_PANEL_MAX_BYTES: the copy's source lines pass through L2 beside the panel, and a 590 KB panel (32
   * channels x 512 x 3 x 3) was partly evicted before its rows used it (ResNet-18's 7x7 convolutions, 16
   * channels a block: 1.21-1.22 -> 1.15 ms, 0.94-0.95x, per-kernel minimums, 2 threads, Zen 4 with a 1 MiB L2) */
  int64_t panel = 0;  /* elements of the largest weight panel per channel: the reduce loops its load uses */
  for (int l = 0; l < h->nloads; l++) {
    int64_t k, p = 1;
    if (!lin_coef(h->loads[l]->src[1], ax[c].r, &k) || k <= 1) continue;
    for (int i = nout; i < n; i++)
      if (ax[i].type == AX_REDUCE && (!lin_coef(h->loads[l]->src[1], ax[i].r, &k) || k != 0)) p *= ax[i].size;
    if (p > panel) panel = p;
  }
  int64_t vecs = ax[c].size % (2 * lanes) == 0 && 2 * lanes * panel * 4 <= CONV_PANEL_MAX_BYTES ? 2 : 1;
  static const int64_t amts[] = {8, 7, 6, 5, 4, 3, 2};
  bool fits = false;
  for (int k = 0; k < 7 && !fits; k++) fits = amts[k] >= 4 && ax[t].size % amts[k] == 0 && vecs * amts[k] <= acc_budget(ks);
  /* a row no tile divides (58: a convolution that also writes the next one's zero border) is padded to the tile
   * of 4 or more pixels within the budget that wastes least, at most an eighth: a few masked pixels at its end,
   * against a row padded to vectors with every load masked (ResNet-18's 56x56 convolutions into a padded
   * 58x58 image, 16 channels x 6 pixels: 3.03-3.10 -> 1.64 ms, per-kernel minimums, 2 threads, AVX2) */
  int64_t pad_to = 0, least = ax[t].size / 8 + 1;
  for (int k = 0; k < 7 && !fits; k++) {
    int64_t a = amts[k], waste = (ax[t].size + a - 1) / a * a - ax[t].size;
    if (a >= 4 && vecs * a <= acc_budget(ks) && ax[t].size > a && waste < least) pad_to = a, least = waste;
  }
  fits = fits || pad_to;
  /* need_fit (before padding a row): a row padded to two or more vectors (14 pixels to 16) beat channel vectors
   * without a tile of 4 or more pixels that fits the registers (2 x 7 on 14x14 spills: 6.2 ms, the padded row
   * 4.7; 7 pixels padded to one vector 10.2 ms against 6.1, one thread) */
  if (need_fit && !fits && ax[t].size > lanes) return false;
  kernel_state save = *ks;
  int64_t cid = ax[c].r->arg.i, tid = ax[t].r->arg.i, most_taps = strided_window(ks, h) ? 8 : 3;
  if (!try_opt(ks, OPT_UPCAST, c, vecs * lanes)) return false;
  n = ks_axes(ks, ax, &nout, &nred);
  int ti = axis_of(ks, tid, false);
  if (pad_to && ti >= 0) {
    if (!try_opt(ks, OPT_PADTO, ti, pad_to)) {
      *ks = save;
      return false;
    }
    n = ks_axes(ks, ax, &nout, &nred);
    ti = axis_of(ks, tid, false);
  }
  /* a tile of at least 4 pixels within the accumulator budget; else up to 16 (a row of 7 or 14 pixels: 2 x 7,
   * one spilled, beat 1 x 7 on 14x14, 6.7 against 11.6 ms; 2 x 4 beat 2 x 7 on 28x28, 4.7 against 6.5 ms) */
  bool tiled = false;
  for (int k = 0; ti >= 0 && k < 7 && !tiled; k++)
    tiled = amts[k] >= 4 && ax[ti].size % amts[k] == 0 && vecs * amts[k] <= acc_budget(ks) && try_opt(ks, OPT_UPCAST, ti, amts[k]);
  for (int k = 0; ti >= 0 && k < 7 && !tiled; k++)
    tiled = ax[ti].size % amts[k] == 0 && vecs * amts[k] <= 16 && try_opt(ks, OPT_UPCAST, ti, amts[k]);
  /* a window's last loop of 2 or 3 taps (kx) unrolled into the tile's accumulators (one_accumulator): each tap's
   * padding test is then a constant of its copy, decided outside the channel loop, which becomes the innermost
   * loop (ResNet-18's 3x3 convolutions at 7x7, 2 channel vectors x 7 pixels: 5.3 -> 3.2 ms on one thread, the
   * innermost loop was the 3 taps with a branch per pixel; resnet18.onnx 37.5 -> 32.9 ms). A strided window's
   * row of up to 8 taps too (the 7x7 stride-2 stem: 1.22 -> 1.14 ms); not a stride-1 row of 5 (MNIST's 5x5
   * convolutions: 2-3% slower unrolled) */
  n = ks_axes(ks, ax, &nout, &nred);
  int last = nout + nred - 1;
  if (nred && ax[last].type == AX_REDUCE && ax[last].size >= 2 && ax[last].size <= most_taps &&
      try_opt(ks, OPT_UNROLL, last - nout, ax[last].size))
    one_accumulator(ks);
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
  /* the weight's panel, channels innermost, packed before the first loop inside the channel blocks (channels
   * that make one block lose their loop to the UPCAST: the whole weight, before the first output loop) */
  n = ks_axes(ks, ax, &nout, &nred);
  ci = axis_of(ks, cid, false);
  for (int i = ci + 1; i < nout; i++)
    if (ax[i].type == AX_GLOBAL && try_opt(ks, OPT_PACK, i, 1)) {
      try_opt(ks, OPT_PACK, i, 1);  /* a second reduce's weight (a residual's 1x1 projection) gets its own */
      return true;
    }
  *ks = save;
  return false;
}

/* A row kernel (a reduce broadcast along an output loop, computed once per row: see schedule.c) gets vector
 * lanes on its row's output loop and on each reduce's loop (expand.c gives them one lane: no value uses two
 * of them), 4 vector accumulators per reduce to hide the latency of the add or max chain, and threads on the
 * rows. Returns false when the kernel is not a row kernel. */
bool row_kernel(kernel_state *ks, int lanes) {
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
bool matvec(kernel_state *ks, const hot *h, int lanes) {
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
    if (amts[i] * m <= acc_budget(ks) && nn % amts[i] == 0 && nn > amts[i]) u = amts[i];
  int64_t unroll = v;
  while (u * m * (2 * unroll / v) <= acc_budget(ks) && u * m * (unroll / v) < 8 && k % (2 * unroll) == 0) unroll *= 2;
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

/* A matrix-vector product whose weight is decoded from packed bytes in the kernel (decode: x (1, K) @ W^T, W
 * quantized): the reduce unrolled by the weight's block (its scale decoded once per block, its values vector
 * lanes, as step 0 of the general path does) and a register tile of weight rows whose accumulators, x's
 * vectors of the block and a few temporaries fit the registers. The general path's 4 rows x 4 vectors (16
 * accumulators) fit AVX-512's 32 registers but not AVX2's 16: 42 of the 168 instructions of its inner loop
 * were spills (Q4_0, 11008 x 4096). Returns false, changing nothing, when the kernel is not one. */
bool decoded_matvec(kernel_state *ks, const hot *h, int lanes) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  if (nred != 1 || n != nout + 1 || lanes < 4 || !h->nloads) return false;
  int ni = -1;
  for (int i = 0; i < nout; i++) {
    if (ax[i].size == 1) continue;
    if (ni >= 0) return false;
    ni = i;
  }
  if (ni < 0) return false;
  uop *rn = ax[ni].r;
  bool xs = false, ws = false;
  for (int l = 0; l < h->nloads; l++) {
    uop *L = h->loads[l];
    if (L->dtype == TG_FLOAT32) {
      if (uop_uses(L->src[1], rn)) return false;
      xs = true;
    } else if (L->dtype == TG_UINT8 || L->dtype == TG_INT8) {
      ws |= uop_uses(L->src[1], rn);
    } else {
      return false;
    }
  }
  int64_t b = block_of(h, ax[nout].r, ax[nout].size, 32);
  if (!xs || !ws || !b || b % lanes || !store_contiguous(h, rn)) return false;
  int bv = (int)(b / lanes), regs = lanes >= 16 ? 32 : 16;
  int64_t u = 1, N = ax[ni].size, nid = rn->arg.i;
  static const int64_t amts[] = {8, 6, 4, 3, 2};
  for (int i = 0; i < 5 && u == 1; i++)
    if (N % amts[i] == 0 && N > amts[i] && amts[i] * bv <= 16 && amts[i] * bv + bv + 3 <= regs) u = amts[i];
  kernel_state save = *ks;
  ks->tg.vec_bytes = lanes * 4;
  bool ok = try_opt(ks, OPT_UNROLL, 0, b);
  if (ok && u > 1) ok = try_opt(ks, OPT_UPCAST, axis_of(ks, nid, false), u);
  if (!ok) {
    *ks = save;
    return false;
  }
  n = ks_axes(ks, ax, &nout, &nred);
  int a = axis_of(ks, nid, false), nt = ks->tg.nthreads;
  if (nt > 1 && a >= 0 && ax[a].size >= 2 * nt && (double)N * (double)ax[nout].size * b >= THREAD_MIN_WORK)
    try_opt(ks, OPT_THREAD, a, nt);
  return true;
}

/* A matmul whose weight is decoded from packed bytes inside the kernel (x (M, K) @ W^T, W a quantized weight the
 * scheduler fused: schedule.c decodes_bytes): the float32 GEMM's tile with the decoded weight as its packed
 * panel. Vector lanes on N (2 vectors), a register tile of up to 8 rows of M, threads on N, and the N panel's
 * decoded weights (16 x K float32) packed transposed before the M loop: each weight is decoded once per panel
 * and read by all M rows from there, where decoding in the tile would repeat it for every 8 rows (m = 128,
 * 4096 x 4096 Q4_0: 317 ms decoding per tile, see the commit for the packed panel's time). A matrix of a few
 * rows (M <= the tile) skips the PACK: one tile decodes each weight once anyway. Returns false, changing
 * nothing, when the kernel is not one. */
bool decoded_gemm(kernel_state *ks, const hot *h, int lanes) {
  axis_info ax[KS_MAX_AXES];
  int nout, nred, n = ks_axes(ks, ax, &nout, &nred);
  if (nred != 1 || n != nout + 1 || lanes < 4 || !h->nloads) return false;
  int mi = -1, ni = -1;
  for (int i = 0; i < nout; i++) {
    if (ax[i].size == 1) continue;
    if (mi < 0) mi = i;
    else if (ni < 0) ni = i;
    else return false;
  }
  if (mi < 0 || ni < 0) return false;
  /* x: float32 loads the same for every N; the weight: 1-byte loads the same for every
   * M and varying along N; the M and N roles are found from the loads */
  bool xs = false, ws = false;
  uop *rm = ax[mi].r, *rn = ax[ni].r;
  for (int pass = 0; pass < 2 && !(xs && ws); pass++) {
    xs = ws = false;
    if (pass) { uop *t = rm; rm = rn; rn = t; int ti = mi; mi = ni; ni = ti; }
    bool bad = false;
    for (int l = 0; l < h->nloads && !bad; l++) {
      uop *L = h->loads[l];
      if (L->dtype == TG_FLOAT32) {  /* read as broadcast scalars: any index along K (attention's heads) */
        bad = uop_uses(L->src[1], rn);
        xs = true;
      } else if (L->dtype == TG_UINT8 || L->dtype == TG_INT8) {
        bad = uop_uses(L->src[1], rm);
        ws |= uop_uses(L->src[1], rn);
      } else {
        bad = true;
      }
    }
    if (bad) xs = ws = false;
  }
  if (!xs || !ws || !store_contiguous(h, rn)) return false;
  int64_t M = ax[mi].size, N = ax[ni].size;
  int64_t vn = N % (2 * lanes) == 0 ? 2 * lanes : N % lanes == 0 ? lanes : 0;
  if (!vn) return false;
  int64_t mid = rm->arg.i, nid = rn->arg.i;
  kernel_state save = *ks;
  /* the accumulators, the weight's vectors and a broadcast of x must fit the registers: 16 with AVX2 (an 8 x
   * 16 tile, 16 accumulators, spilled 6 of them to the stack in the inner loop), 32 with AVX-512 */
  int vregs = (int)(vn / lanes), regs = lanes >= 16 ? 32 : 16;
  int64_t tm = 1;
  static const int64_t amts[] = {8, 6, 4, 3, 2};
  for (int i = 0; i < 5 && tm == 1; i++)
    if (M % amts[i] == 0 && amts[i] * vregs <= 16 && amts[i] * vregs + vregs + 2 <= regs) tm = amts[i];
  ks->tg.vec_bytes = lanes * 4;
  bool ok = try_opt(ks, OPT_UPCAST, axis_of(ks, nid, false), vn);
  if (ok && tm > 1) ok = try_opt(ks, OPT_UPCAST, axis_of(ks, mid, false), tm);
  if (!ok) {
    *ks = save;
    return false;
  }
  n = ks_axes(ks, ax, &nout, &nred);
  int an = axis_of(ks, nid, false), am = axis_of(ks, mid, false);
  int nt = ks->tg.nthreads;
  if (nt > 1 && an >= 0 && ax[an].size >= 2 * nt && (double)M * (double)N * (double)ax[nout].size >= THREAD_MIN_WORK)
    try_opt(ks, OPT_THREAD, an, nt);
  if (am < 0 || ax[am].size < 2) return true;  /* one tile of rows: each weight is decoded once already */
  an = axis_of(ks, nid, false);
  am = axis_of(ks, mid, false);
  if (an >= 0 && am >= 0 && an > am && try_opt(ks, OPT_SWAP, am, an)) {
    /* SWAP exchanges the loops' ids */
    am = axis_of(ks, nid, false);
  }
  if (am >= 0) try_opt(ks, OPT_PACK, am, 1);
  return true;
}
