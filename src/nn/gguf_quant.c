/* gguf_quant.c — ggml's block formats as lazy expressions over their bytes.
 *
 * A quantized tensor stays in memory as its blocks, a uint8 (nblocks, bytes per block) tensor wrapped on the
 * file. Its float32 value is built here from tensor ops only: a slice of the block's bytes, two bytes joined
 * and read as float16 for a scale, shifts and masks for the packed 4-, 5- and 6-bit values (the shift amounts
 * are an arange, computed in the kernel), a multiply and an add with the scales and minimums. Nothing here is
 * stored: the expression fuses into whatever kernel reads it, so a matmul with a Q4_0 weight reads the 18 bytes
 * of each block of 32 weights and dequantizes them in its registers.
 *
 * How it becomes fast code, with nothing here or in the codegen keyed on a format: the heuristic sees a reduce
 * loop whose hot loads include one that is the same over runs of 32 (or 16) iterations (the block's scale,
 * index k / 32, or a K-quant's sub-block (k % 256) / 32) and unrolls the reduce by that block
 * (codegen/heuristic.c). The index simplifier folds k / 32 and k % 32 of the unrolled loop to the outer loop and
 * constants (uop/symbolic.c: also (32 r + j) // 256 -> r // 8), so the scale is decoded once per block and the
 * block's values are contiguous in its bytes: 16 of them are one vector lane loop (codegen/expand.c), loaded by
 * one widening load (vpmovzxbd), unpacked with vector shifts and masks in int32 lanes and converted to float32
 * (render/c.c), multiplied into 8 rows' vector accumulators. Q5_0/Q5_1 read their fifth bits from qh as one
 * 32-bit word per block (a byte per 8 values would be a gather across the lanes).
 *
 * Measured (TG_THREADS=2 on a machine shared with other jobs at load 7-10: medians, best in parentheses),
 * x (1, 4096) @ W^T, W (4096, 4096), bench/quant.c: Q8_0 1.9 ms (1.4-1.7), Q4_0 1.7-2.0 (1.4-1.7), Q4_K 2.9-7.3
 * (2.8), Q6_K 2.6-4.0 (2.3), F16 2.4-7 (0.8-2.3), F32 4-12 (2-9). The scalar kernel before this ran Q8_0 25
 * ms, Q4_0 25, Q4_K 67, Q6_K 48, F16 7-8 on the same machine (recorded here earlier elsewhere: Q4_0 87-110 ms,
 * Q8_0 79-94, Q4_K 277-293, Q6_K 169-227).
 * A matmul of several rows (prefill) is one kernel too: the scheduler does not store a value decoded from bytes
 * when it is broadcast over rows (schedule.c decodes_bytes), and the heuristic gives it the float32 GEMM's tile
 * with the decoded weight as its packed panel (heuristic.c decoded_gemm, opt.c decoded_candidate): each weight is
 * decoded once per panel of 16 columns into a float32 buffer the row tiles read. CPU time per product (2
 * threads summed, bench/quant.c under /usr/bin/time, a machine loaded 4x: wall times there are noise), before
 * (the dequantized weight stored as float32 by a kernel of its own, then multiplied) -> now: x (128, 4096) @
 * 4096x4096 Q4_0 120 -> 75 ms, Q8_0 110 -> 76 (F32 weights 106); x (1, 4096) @ 11008x4096 Q4_0 8.75 -> 5.0,
 * Q8_0 6.25 -> 3.75, i.e. 5.1 and 12.8 GB of weight per CPU second, at the memory bandwidth of the two cores
 * (9-12 GB/s read by 2 threads at that load).
 *
 * The layouts (ggml's block_q4_0 ... block_q6_K, all little-endian, d and dmin float16):
 *   Q4_0  (32, 18 bytes): d, qs[16]; x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8)
 *   Q4_1  (32, 20): d, m, qs[16]; as Q4_0 unsigned: x = d * q + m
 *   Q5_0  (32, 22): d, qh[4], qs[16]; the 5th bit of x[j] is bit j of qh (a little-endian uint32); d * (q - 16)
 *   Q5_1  (32, 24): d, m, qh[4], qs[16]; x = d * q + m
 *   Q8_0  (32, 34): d, qs[32] int8; x = d * qs
 *   Q4_K (256, 144): d, dmin, 12 bytes of eight 6-bit scales and mins, qs[128]; sub-block s (32 values) takes
 *                    the low nibbles of qs[32 (s/2) ...] for even s, the high ones for odd; d sc[s] q - dmin m[s]
 *   Q5_K (256, 176): d, dmin, scales[12], qh[32], qs[128]: Q4_K with bit s of qh[l] the 5th bit of value l of
 *                    sub-block s
 *   Q6_K (256, 210): ql[128], qh[64], int8 scales[16], d; value 128 h + 32 g + l (h < 2, g < 4, l < 32) is
 *                    (ql[64 h + 32 (g % 2) + l] >> 4 (g / 2)) & 15 | ((qh[32 h + l] >> 2 g) & 3) << 4, minus 32,
 *                    times d and the scale of its 16 values
 */
#include "nn/gguf.h"
#include "uop/uop.h"

/* Every broadcast happens on the bytes, before any arithmetic: a block's scale, read by its 32 (or 16) values,
 * is its two bytes expanded to the values' shape and decoded once per value, never a decoded (nb, 1) value
 * expanded. The scheduler stores a value that is computed and then broadcast (it would be recomputed for every
 * element it is broadcast to), so decoding first and then expanding made a small kernel per scale; expanding
 * the loads keeps the whole dequantize inside its reader's kernel. */

/* bytes [a, b) of every block: (nb, b - a) uint8 */
static tg_tensor *cols(tg_tensor *blk, int64_t a, int64_t b) {
  return tg_shrink(blk, 2, (int64_t[]){0, tg_shape(blk, 0), a, b});
}

/* t (a view of the bytes) reshaped to `as` (ndim sizes) and expanded to `to` */
static tg_tensor *spread(tg_tensor *t, int ndim, const int64_t *as, const int64_t *to) {
  return tg_expand(tg_reshape(t, ndim, as), ndim, to);
}

/* the little-endian float16 at byte off of each block, as float32 at every element of shape (nb, ...) */
static tg_tensor *half_at(tg_tensor *blk, int64_t off, int ndim, const int64_t *shape) {
  int64_t one[TG_MAX_DIMS];
  one[0] = shape[0];
  for (int d = 1; d < ndim; d++) one[d] = 1;
  tg_tensor *lo = tg_cast(spread(cols(blk, off, off + 1), ndim, one, shape), TG_UINT16);
  tg_tensor *hi = tg_cast(spread(cols(blk, off + 1, off + 2), ndim, one, shape), TG_UINT16);
  return tg_cast(tg_bitcast(tg_bitwise_or(lo, tg_lshift_scalar(hi, 8)), TG_FLOAT16), TG_FLOAT32);
}

/* the shifts bits * j for j < k, as a (k, 1, ..., 1) uint8 tensor of `trail` trailing ones */
static tg_tensor *shifts(int bits, int k, int trail) {
  int64_t shape[TG_MAX_DIMS] = {k};
  for (int d = 1; d <= trail; d++) shape[d] = 1;
  return tg_reshape(tg_arange(TG_UINT8, 0, bits * k, bits), 1 + trail, shape);
}

/* (x >> sh) & (2^bits - 1), x and sh broadcast together */
static tg_tensor *field(tg_tensor *x, tg_tensor *sh, int bits) {
  return tg_bitwise_and_scalar(tg_rshift(x, sh), (1 << bits) - 1);
}

static tg_tensor *as_f32(tg_tensor *t) { return tg_cast(t, TG_FLOAT32); }

#define SHAPE(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

/* Q4_0, Q4_1: the 32 unsigned 4-bit values, (nb, 2, 16): the low nibbles of qs (16 bytes at off), then the high */
static tg_tensor *nibbles32(tg_tensor *blk, int64_t nb, int64_t off) {
  return field(tg_reshape(cols(blk, off, off + 16), SHAPE(nb, 1, 16)), shifts(4, 2, 1), 4);
}

/* Q5_0, Q5_1: the 32 unsigned 5-bit values, (nb, 2, 16), with qh at off and qs after it: value i's fifth bit is
 * bit i of qh read as a little-endian 32-bit word. The word is built from its 4 bytes once per block (they are
 * broadcast to the values, as the scale is) and shifted by i: reading byte i / 8 per value instead is a gather
 * in a vector kernel (lanes 0-7 and 8-15 read different bytes) */
static tg_tensor *fives32(tg_tensor *blk, int64_t nb, int64_t off) {
  /* an int32 word (a vector of int32 lanes where it is shifted), its top byte signed and multiplied by 2^24:
   * a shift into the sign bit would overflow */
  tg_tensor *word = NULL;
  for (int b = 0; b < 4; b++) {
    tg_tensor *byte = spread(cols(blk, off + b, off + b + 1), SHAPE(nb, 1, 1), (int64_t[]){nb, 2, 16});
    byte = b < 3 ? tg_lshift_scalar(tg_cast(byte, TG_INT32), 8 * b) : tg_mul_scalar(tg_cast(tg_bitcast(byte, TG_INT8), TG_INT32), 16777216);
    word = word ? tg_bitwise_or(word, byte) : byte;
  }
  tg_tensor *bit = tg_reshape(tg_arange(TG_INT32, 0, 32, 1), SHAPE(2, 16));
  tg_tensor *five = tg_cast(field(word, bit, 1), TG_UINT8);
  return tg_bitwise_or(nibbles32(blk, nb, off + 4), tg_lshift_scalar(five, 4));
}

/* Q4_K, Q5_K: the 6-bit scale (mins false) or min of sub-block s = 2c + h at every value, (nb, 4, 2, 32). The 12
 * bytes at 4: A = bytes 4..7, M = 8..11, T = 12..15; s < 4: A[s] & 63 (min M[s] & 63); s >= 4: T[s-4] & 15 |
 * (A[s-4] >> 6) << 4 (min T[s-4] >> 4 | (M[s-4] >> 6) << 4) */
static tg_tensor *k_scale(tg_tensor *blk, int64_t nb, bool mins) {
  const int64_t to[] = {nb, 4, 2, 32};
  /* byte base + s % 4 for sub-block s, spread over the values */
  tg_tensor *bytes[3];
  for (int i = 0; i < 3; i++) {
    tg_tensor *b8 = tg_reshape(spread(cols(blk, 4 + 4 * i, 8 + 4 * i), SHAPE(nb, 1, 4), (int64_t[]){nb, 2, 4}), SHAPE(nb, 8));
    bytes[i] = spread(b8, SHAPE(nb, 4, 2, 1), to);
  }
  tg_tensor *a = bytes[mins ? 1 : 0], *t = bytes[2];
  tg_tensor *upper = tg_reshape(tg_ge_scalar(tg_arange(TG_UINT8, 0, 8, 1), 4), SHAPE(4, 2, 1));
  tg_tensor *low = tg_bitwise_and_scalar(a, 63);
  tg_tensor *nib = mins ? tg_rshift_scalar(t, 4) : tg_bitwise_and_scalar(t, 15);
  tg_tensor *high = tg_bitwise_or(nib, tg_lshift_scalar(tg_rshift_scalar(a, 6), 4));
  return tg_where(upper, high, low);
}

tg_tensor *gguf_dequantize(tg_tensor *blk, uint32_t type) {
  if (!blk) return NULL;
  const gguf_type_info *ti = gguf_type_of(type);
  if (!ti || !ti->supported || ti->dtype != TG_DTYPE_COUNT) {
    tg_set_error(TG_ERR_ARG, "gguf_dequantize: %s is not a block format tgc reads", ti ? ti->name : "an unknown type");
    return NULL;
  }
  if (tg_dtype_of(blk) != TG_UINT8 || tg_ndim(blk) != 2 || tg_shape(blk, 1) != ti->size) {
    tg_set_error(TG_ERR_ARG, "gguf_dequantize: %s blocks must be uint8 (n, %lld), not %s of %d dims", ti->name,
                 (long long)ti->size, tg_dtype_name(tg_dtype_of(blk)), tg_ndim(blk));
    return NULL;
  }
  int64_t nb = tg_shape(blk, 0);
  tg_scope_begin();
  tg_tensor *y = NULL;
  switch (type) {
    /* Q4_0, Q5_0: d q - 8 d (16 d), the same float32 as d (q - 8) (q - 8 is exact, and -8 d: one rounding either
     * way), but one FMA per value in the kernel instead of a subtract and a multiply; -8 d is made once per block */
    case GGML_Q4_0: {
      tg_tensor *d = half_at(blk, 0, SHAPE(nb, 2, 16));
      y = tg_add(tg_mul(as_f32(nibbles32(blk, nb, 2)), d), tg_mul_scalar(d, -8));
      break;
    }
    case GGML_Q4_1:
      y = tg_add(tg_mul(as_f32(nibbles32(blk, nb, 4)), half_at(blk, 0, SHAPE(nb, 2, 16))), half_at(blk, 2, SHAPE(nb, 2, 16)));
      break;
    case GGML_Q5_0: {
      tg_tensor *d = half_at(blk, 0, SHAPE(nb, 2, 16));
      y = tg_add(tg_mul(as_f32(fives32(blk, nb, 2)), d), tg_mul_scalar(d, -16));
      break;
    }
    case GGML_Q5_1:
      y = tg_add(tg_mul(as_f32(fives32(blk, nb, 4)), half_at(blk, 0, SHAPE(nb, 2, 16))), half_at(blk, 2, SHAPE(nb, 2, 16)));
      break;
    case GGML_Q8_0: y = tg_mul(as_f32(tg_bitcast(cols(blk, 2, 34), TG_INT8)), half_at(blk, 0, SHAPE(nb, 32))); break;
    case GGML_Q4_K:
    case GGML_Q5_K: {
      /* value 64 c + 32 h + l (sub-block s = 2c + h) is nibble h of qs[32 c + l] */
      int64_t qs = type == GGML_Q4_K ? 16 : 48;
      tg_tensor *q = field(tg_reshape(cols(blk, qs, qs + 128), SHAPE(nb, 4, 1, 32)), shifts(4, 2, 1), 4);
      if (type == GGML_Q5_K) {  /* its fifth bit: bit s of qh[l] */
        tg_tensor *qh = spread(cols(blk, 16, 48), SHAPE(nb, 1, 1, 32), (int64_t[]){nb, 4, 2, 32});
        q = tg_bitwise_or(q, tg_lshift_scalar(field(qh, tg_reshape(shifts(1, 8, 0), SHAPE(4, 2, 1)), 1), 4));
      }
      tg_tensor *scale = tg_mul(half_at(blk, 0, SHAPE(nb, 4, 2, 32)), as_f32(k_scale(blk, nb, false)));
      tg_tensor *min = tg_mul(half_at(blk, 2, SHAPE(nb, 4, 2, 32)), as_f32(k_scale(blk, nb, true)));
      y = tg_sub(tg_mul(scale, as_f32(q)), min);
      break;
    }
    case GGML_Q6_K: {
      /* value 128 h + 32 g + l: the low 4 bits are nibble g / 2 of ql[64 h + 32 (g % 2) + l], the high 2 bits are
       * bits 2g, 2g + 1 of qh[32 h + l]; its scale is scales[(128 h + 32 g + l) / 16] */
      tg_tensor *lo = field(tg_reshape(cols(blk, 0, 128), SHAPE(nb, 2, 1, 2, 32)), shifts(4, 2, 2), 4);
      tg_tensor *hi = field(tg_reshape(cols(blk, 128, 192), SHAPE(nb, 2, 1, 32)), shifts(2, 4, 1), 2);
      tg_tensor *q = tg_bitwise_or(tg_reshape(lo, SHAPE(nb, 2, 4, 32)), tg_lshift_scalar(hi, 4));
      tg_tensor *sc = tg_reshape(spread(cols(blk, 192, 208), SHAPE(nb, 2, 4, 2, 1), (int64_t[]){nb, 2, 4, 2, 16}),
                                 SHAPE(nb, 2, 4, 32));
      tg_tensor *scale = tg_mul(half_at(blk, 208, SHAPE(nb, 2, 4, 32)), as_f32(tg_bitcast(sc, TG_INT8)));
      y = tg_mul(scale, tg_sub_scalar(as_f32(q), 32));
      break;
    }
    default: break;
  }
  y = tg_keep(tg_reshape(y, 2, (int64_t[]){nb, ti->block}));
  tg_scope_end();
  return y;
}

tg_tensor *gguf_dequantize_rows(tg_tensor *rows, uint32_t type) {
  if (!rows) return NULL;
  const gguf_type_info *ti = gguf_type_of(type);
  if (ti && ti->supported && ti->dtype != TG_DTYPE_COUNT) return tg_cast(rows, TG_FLOAT32);
  if (!ti || !ti->supported || tg_ndim(rows) != 2 || tg_shape(rows, 1) % ti->size) {
    tg_set_error(TG_ERR_ARG, "gguf_dequantize_rows: %s rows must be (n, a multiple of %lld bytes), not %d dims",
                 ti ? ti->name : "an unknown type", ti ? (long long)ti->size : 0LL, tg_ndim(rows));
    return NULL;
  }
  int64_t r = tg_shape(rows, 0), per = tg_shape(rows, 1) / ti->size;  /* blocks per row */
  tg_scope_begin();
  tg_tensor *y = tg_reshape(gguf_dequantize(tg_reshape(rows, 2, (int64_t[]){r * per, ti->size}), type), 2,
                            (int64_t[]){r, per * ti->block});
  y = tg_keep(y);
  tg_scope_end();
  return y;
}
