/* test_gguf.h — what the GGUF tests share: the plain C reference dequantizer (test_gguf_quant.c) and random
 * blocks for it. */
#ifndef TG_TEST_GGUF_H
#define TG_TEST_GGUF_H

#include <stdint.h>

extern const uint32_t gguf_block_types[8];   /* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K */
float gguf_ref_half(const uint8_t *p);       /* the little-endian float16 at p, as float */
/* nblocks blocks of ggml type `type` at b into y (nblocks * elements per block floats), as ggml does it */
void gguf_ref_dequantize(uint32_t type, const uint8_t *b, int64_t nblocks, float *y);
/* random blocks whose float16 scales are finite (magnitude 2^-9 .. 2) */
void gguf_rand_blocks(uint32_t type, uint8_t *b, int64_t nblocks);

#endif
