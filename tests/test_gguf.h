/* test_gguf.h — what the GGUF tests share: the plain C reference dequantizer (test_gguf_quant.c) and random
 * blocks for it. */
#ifndef TG_TEST_GGUF_H
#define TG_TEST_GGUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern const uint32_t gguf_block_types[8];   /* Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K */
float gguf_ref_half(const uint8_t *p);       /* the little-endian float16 at p, as float */
/* nblocks blocks of ggml type `type` at b into y (nblocks * elements per block floats), as ggml does it */
void gguf_ref_dequantize(uint32_t type, const uint8_t *b, int64_t nblocks, float *y);
/* random blocks whose float16 scales are finite (magnitude 2^-9 .. 2) */
void gguf_rand_blocks(uint32_t type, uint8_t *b, int64_t nblocks);

/* a growing byte buffer for writing GGUF files by hand (hostile ones too): the tests' own writer, independent of
 * the library's; aborts the test binary when memory runs out */
typedef struct gw { uint8_t *p; size_t n, cap; } gw;
static inline void gw_bytes(gw *w, const void *b, size_t n) {
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    while (cap < w->n + n) cap *= 2;
    uint8_t *p = realloc(w->p, cap);
    if (!p) abort();
    w->p = p;
    w->cap = cap;
  }
  if (n) memcpy(w->p + w->n, b, n);
  w->n += n;
}
static inline void gw_le(gw *w, uint64_t v, int nbytes) {  /* v as nbytes little-endian bytes */
  uint8_t b[8];
  for (int i = 0; i < nbytes; i++) b[i] = (uint8_t)(v >> (8 * i));
  gw_bytes(w, b, (size_t)nbytes);
}
static inline void gw_strn(gw *w, const char *s, size_t n) { gw_le(w, n, 8); gw_bytes(w, s, n); }  /* a GGUF string */
static inline void gw_str(gw *w, const char *s) { gw_strn(w, s, strlen(s)); }

#endif
