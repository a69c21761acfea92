/* prefetch.c — software prefetches for reductions that stream a large buffer once (CPU kernels).
 *
 * A decode-time matrix-vector product reads each weight once: its THREAD loop walks tiles of rows, and each
 * tile reduces over its own slab of the weight (a Q4_0 tile of 4 rows is 4608 contiguous bytes). The hardware
 * prefetchers of this machine keep up with one sequential stream, not with the four row streams of a tile that
 * start again every few microseconds, and the kernel stalls on memory it asked for too late: 5632x2048 Q4_0
 * (6.5 MB, cold, 2 threads) ran at 4.6-6.7 GB/s where a plain read of the same bytes reaches 13-20. Asking, in
 * each reduce iteration, for the bytes the same load will read one THREAD iteration later (the next tile)
 * overlaps the next tile's memory with this tile's arithmetic: 1.1-1.5 ms -> 0.6-1.0 ms per product.
 *
 * The plan, for a C renderer to print as prefetches before the loads:
 *  - the load is of a kernel parameter of at least PF_MIN_BUFFER bytes (a buffer that outgrows the caches),
 *  - it sits in reduce loops directly inside the THREAD loop (a streaming reduction: no output loop between,
 *    whose iterations would reuse the bytes),
 *  - its index is affine in the THREAD loop's variable with a stride of at least PF_MIN_STRIDE bytes (the next
 *    iteration's bytes are elsewhere; a small stride is one stream the hardware follows by itself),
 *  - of a buffer's loads only those in its outermost such loop get one (the inner ones read the same tile's
 *    neighbouring bytes: Q4_0's scale bytes sit beside its values), and of loads at the same base index with
 *    constant offsets less than a cache line apart, only the first.
 */
#include <stdlib.h>

#include "codegen/opt.h"

#define PF_MIN_BUFFER ((int64_t)1 << 20)
#define PF_MIN_STRIDE 1024
#define PF_LINE 64
#define PF_SEEN 32

int64_t split_const(const uop *idx, const uop **base) {
  if (idx->op == OP_ADD && idx->nsrc == 2)
    for (int k = 0; k < 2; k++)
      if (uop_is_const(idx->src[k])) {
        *base = idx->src[1 - k];
        return idx->src[k]->arg.i;
      }
  *base = idx;
  return 0;
}

/* whether load u qualifies (the rules above), with *stride its index's stride along the THREAD loop o */
static bool streamed(const linear_program *p, const uop *u, uop *o, int64_t *stride) {
  if (u->op != OP_LOAD || u->nsrc < 2 || u->src[0]->op != OP_PARAM || lp_is_vec(p, u->src[1])) return false;
  size_t es = tg_dtype_size((tg_dtype)u->dtype);
  if (!es || u->src[0]->aux[0] < PF_MIN_BUFFER / (int64_t)es) return false;
  int64_t c;
  if (!lin_coef(u->src[1], o, &c) || c == 0) return false;
  if (c > -PF_MIN_STRIDE / (int64_t)es && c < PF_MIN_STRIDE / (int64_t)es) return false;
  *stride = c;
  return true;
}

int64_t *plan_prefetch(const linear_program *p) {
  uop *thread = NULL;
  int tpos = -1;
  for (int i = 0; i < p->n; i++)
    if (p->ops[i]->op == OP_RANGE && p->ops[i]->aux[0] == AX_THREAD && p->ops[i] != p->lane) {
      thread = p->ops[i];
      tpos = i;
      break;
    }
  if (!thread) return NULL;
  /* pass 1: each qualifying load's depth below the THREAD loop (-1: none); pass 2 keeps the outermost of each
   * buffer's and drops near duplicates */
  int *depth_of = mem_alloc(sizeof(int) * (size_t)p->n);
  int64_t *plan = mem_calloc((size_t)p->n, sizeof(int64_t));
  if (!depth_of || !plan) {  /* prefetches are hints: without memory the kernel is the same code without them */
    free(depth_of);
    free(plan);
    return NULL;
  }
  for (int i = 0; i < p->n; i++) depth_of[i] = -1;  /* also past the THREAD loop's end, where pass 1 stops */
  int depth = 0;  /* reduce loops open inside the THREAD loop */
  int other = 0;  /* loops of any other kind open inside it: no prefetch below them */
  bool any = false;
  for (int i = tpos + 1; i < p->n; i++) {
    const uop *u = p->ops[i];
    if (u->op == OP_RANGE && u != p->lane) {
      if (u->aux[0] == AX_REDUCE && !other) depth++;
      else other++;
    } else if (u->op == OP_ENDRANGE) {
      if (other) other--;
      else if (depth) depth--;
      else break;  /* the THREAD loop closed */
    } else if (depth > 0 && !other) {
      int64_t s;
      if (streamed(p, u, thread, &s)) {
        depth_of[i] = depth;
        plan[i] = s;
        any = true;
      }
    }
  }
  if (!any) goto none;
  any = false;
  const uop *seen_base[PF_SEEN];
  const uop *seen_buf[PF_SEEN];
  int64_t seen_off[PF_SEEN];
  int nseen = 0;
  for (int i = tpos + 1; i < p->n; i++) {
    const uop *u = p->ops[i];
    if (u->op == OP_RANGE || u->op == OP_ENDRANGE) nseen = 0;  /* a new loop body */
    if (depth_of[i] < 0) continue;
    bool keep = true;
    for (int j = tpos + 1; j < p->n && keep; j++)
      if (depth_of[j] >= 0 && depth_of[j] < depth_of[i] && p->ops[j]->src[0] == u->src[0]) keep = false;
    const uop *base;
    int64_t off = split_const(u->src[1], &base) * (int64_t)tg_dtype_size((tg_dtype)u->dtype);
    for (int k = 0; k < nseen && keep; k++)
      if (seen_buf[k] == u->src[0] && seen_base[k] == base && off - seen_off[k] < PF_LINE && seen_off[k] - off < PF_LINE)
        keep = false;
    if (!keep) {
      plan[i] = 0;
      continue;
    }
    if (nseen < PF_SEEN) {
      seen_buf[nseen] = u->src[0];
      seen_base[nseen] = base;
      seen_off[nseen++] = off;
    }
    any = true;
  }
  if (any) {
    free(depth_of);
    return plan;
  }
none:
  free(depth_of);
  free(plan);
  return NULL;
}
