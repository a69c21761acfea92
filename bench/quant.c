/* quant.c — matrix products with a quantized weight (issue 16's speed structure), in one run:
 *
 *   x (m, k) @ W^T, W (n, k) stored as ggml blocks (Q8_0, Q4_0, Q4_K, Q6_K) or float16, dequantized inside the
 *   kernels that read it (src/nn/gguf_quant.c), next to the same product on a float32 W.
 *   Shapes: m = 1 (a decode step's matrix-vector product) for (n, k) = (4096, 4096) and (11008, 4096) (a llama
 *   feed-forward's up projection); m = 16 and 128 (prefill) for (4096, 4096); m = 512 for F32, Q8_0, Q4_0, and
 *   m = 128 for (4096, 11008) (the down projection) for those three.
 *
 * Reported per (shape, type): the median ms of a product and its GB/s, the bytes of the weight read (blocks as
 * stored, float32 4 bytes a weight) over the median time; m = 1 is bound by that read. The peer (llama.cpp's
 * kernels) is measured by bench/llm.sh; this program reports tgc alone, the float32 product as its yardstick.
 *
 * Timing: a warm-up product (compile, caches), then --reps products (default 9), each in its own scope over
 * fresh tensors made with tg_from_blob on the same host arrays, so the graph is rebuilt and its kernels run;
 * the time includes graph build, schedule and launch, as a model's step pays them. TG_THREADS sets the
 * threads (2 to compare with llama.cpp -t 2).
 *
 * Usage: build/bench/quant [--json] [--reps N] [--only WORD]... (WORD: a type name or "m=16" ...; repeated:
 * every WORD matches). --json prints
 * one JSON line per result: {"workload", "type", "ms", "gbs", "best_ms"}. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "nn/gguf.h"
#include "tg.h"
#include "uop/uop.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static void put_half(uint8_t *p) {   /* a small positive float16 (scales): exponent 6..13, any mantissa */
  uint16_t h = (uint16_t)((6 + rnd() % 8) << 10 | (rnd() & 1023));
  p[0] = (uint8_t)h;
  p[1] = (uint8_t)(h >> 8);
}

/* random blocks of `type`, its float16 fields finite (F16: every weight a finite float16) */
static uint8_t *rand_weight(uint32_t type, int64_t n, int64_t k, size_t *bytes) {
  const gguf_type_info *ti = gguf_type_of(type);
  int64_t nb = n * k / ti->block;
  *bytes = (size_t)(nb * ti->size);
  uint8_t *b = aligned_alloc(64, (*bytes + 63) & ~(size_t)63);
  if (!b) return NULL;
  for (size_t i = 0; i < *bytes; i++) b[i] = (uint8_t)rnd();
  if (type == GGML_F16) {
    for (size_t i = 0; i < *bytes; i += 2) put_half(b + i);
    return b;
  }
  for (int64_t i = 0; i < nb; i++) {
    uint8_t *p = b + i * ti->size;
    if (type == GGML_Q6_K) put_half(p + 208);
    else put_half(p);
    if (type == GGML_Q4_K) put_half(p + 2);
  }
  return b;
}

typedef struct job { uint32_t type; int64_t m, n, k; uint8_t *w; size_t wbytes; float *x; } job;

/* the weight as the model sees it: (n, k) float32, lazily dequantized from its blocks (F32: the array itself) */
static tg_tensor *weight(const job *j) {
  if (j->type == GGML_F32) return tg_from_blob(TG_FLOAT32, 2, (int64_t[]){j->n, j->k}, j->w, j->wbytes);
  if (j->type == GGML_F16)
    return tg_cast(tg_from_blob(TG_FLOAT16, 2, (int64_t[]){j->n, j->k}, j->w, j->wbytes), TG_FLOAT32);
  const gguf_type_info *ti = gguf_type_of(j->type);
  tg_tensor *b = tg_from_blob(TG_UINT8, 2, (int64_t[]){(int64_t)j->wbytes / ti->size, ti->size}, j->w, j->wbytes);
  return tg_reshape(gguf_dequantize(b, j->type), 2, (int64_t[]){j->n, j->k});
}

static bool step(const job *j) {
  tg_scope_begin();
  tg_tensor *x = tg_from_blob(TG_FLOAT32, 2, (int64_t[]){j->m, j->k}, j->x, (size_t)(j->m * j->k) * sizeof(float));
  tg_tensor *w = weight(j);
  tg_tensor *y = x && w ? tg_matmul(x, tg_transpose(w, 0, 1)) : NULL;
  bool ok = y && tg_realize(y) == TG_OK;
  tg_scope_end();
  uop_gc();
  return ok;
}

int main(int argc, char **argv) {
  args_prog = "quant";
  long long reps = 9;
  const char *only[4] = {0};
  int nonly = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json_mode = true;
    else if (!strcmp(argv[i], "--reps")) {
      if (!args_int(argc, argv, &i, 1, 64, &reps)) return ARGS_EXIT;
    } else if (!strcmp(argv[i], "--only")) {
      if (nonly == 4) {
        args_unknown(argv[i]);
        return ARGS_EXIT;
      }
      if (!(only[nonly++] = args_value(argc, argv, &i, "a type name or a word of a shape: Q4_0, m=16, 11008")))
        return ARGS_EXIT;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: %s [--json] [--reps N] [--only WORD]\n"
             "  --json       one JSON line per result on stdout, nothing else there\n"
             "  --reps N     timed products per result, 1..64 (default 9)\n"
             "  --only WORD  only the type WORD (F32, F16, Q8_0, Q4_0, Q4_K, Q6_K) or the shapes containing WORD;\n"
             "               up to 4 times: the results matching every WORD\n",
             argv[0]);
      return 0;
    } else {
      args_unknown(argv[i]);
      return ARGS_EXIT;
    }
  }
  /* m = 512 (a long prompt's prefill) and the down projection's prefill: F32, Q8_0 and Q4_0 only (seconds a type) */
  static const struct { int64_t m, n, k; bool all; } shapes[] = {
      {1, 4096, 4096, true}, {1, 11008, 4096, true}, {16, 4096, 4096, true}, {128, 4096, 4096, true}, {512, 4096, 4096, false},
      {128, 4096, 11008, false}};
  static const uint32_t types[] = {GGML_F32, GGML_F16, GGML_Q8_0, GGML_Q4_0, GGML_Q4_K, GGML_Q6_K};
  note("x (m, k) @ W^T, W (n, k) quantized; %s threads (TG_THREADS), load %.1f; ms median (best), GB/s of the weight\n",
       getenv("TG_THREADS") ? getenv("TG_THREADS") : "all", loadavg1());
  note("%-18s %-5s %10s %10s %8s %8s\n", "shape", "type", "ms", "best", "GB/s", "vs f32");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    char wl[64];
    snprintf(wl, sizeof wl, "m=%lld %lldx%lld", (long long)shapes[s].m, (long long)shapes[s].n, (long long)shapes[s].k);
    float *x = malloc((size_t)(shapes[s].m * shapes[s].k) * sizeof *x);
    if (!x) return 1;
    for (int64_t i = 0; i < shapes[s].m * shapes[s].k; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) / 1000.0f;
    double f32_ms = NAN;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
      const char *tn = gguf_type_of(types[t])->name;
      bool skip = false;
      for (int o = 0; o < nonly; o++) skip |= !strstr(wl, only[o]) && strcmp(tn, only[o]);
      if (skip) continue;
      if (!shapes[s].all && types[t] != GGML_F32 && types[t] != GGML_Q8_0 && types[t] != GGML_Q4_0) continue;
      job j = {types[t], shapes[s].m, shapes[s].n, shapes[s].k, NULL, 0, x};
      if (types[t] == GGML_F32) {
        j.wbytes = (size_t)(j.n * j.k) * sizeof(float);
        float *w = aligned_alloc(64, j.wbytes);
        if (!w) return 1;
        for (int64_t i = 0; i < j.n * j.k; i++) w[i] = (float)((int)(rnd() % 2001) - 1000) / 1e5f;
        j.w = (uint8_t *)w;
      } else {
        j.w = rand_weight(types[t], j.n, j.k, &j.wbytes);
      }
      if (!j.w) return 1;
      if (!step(&j)) die_tg(tn);
      double ts[64] = {0};
      for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        if (!step(&j)) die_tg(tn);
        ts[r] = (bench_now_s() - t0) * 1e3;
      }
      double ms = median(ts, (int)reps), best = ts[0];
      for (int r = 1; r < reps; r++) best = ts[r] < best ? ts[r] : best;
      double gbs = (double)j.wbytes / (ms * 1e-3) / 1e9;
      if (types[t] == GGML_F32) f32_ms = ms;
      note("%-18s %-5s %10.2f %10.2f %8.2f %7.2fx\n", wl, tn, ms, best, gbs, f32_ms / ms);
      if (json_mode)
        printf("{\"workload\": \"%s\", \"type\": \"%s\", \"ms\": %.4f, \"gbs\": %.3f, \"best_ms\": %.4f}\n", wl, tn, ms, gbs,
               best);
      free(j.w);
    }
    free(x);
  }
  return 0;
}
