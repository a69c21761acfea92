/* test_llm_embed.c — the token embedding of src/nn/llm.c: a token's row is read alone from the table as stored
 * and dequantized by the kernel that reads it. Tables of every type the loader accepts (the eight block formats,
 * F16, BF16, F32) with random contents against a plain C dequantize of the same row's bytes (tests/test_gguf.h's
 * reference); no float copy of the whole table is made. */
#include "nn/gguf.h"
#include "nn/llm.h"
#include "tensor/tensor.h"
#include "test.h"
#include "test_gguf.h"

/* row id of a table of type `type` (cols values a row), bytes at tab: as float, by the reference */
static void ref_row(uint32_t type, const uint8_t *tab, int64_t cols, int64_t id, float *y) {
  const gguf_type_info *ti = gguf_type_of(type);
  int64_t row = cols / ti->block * ti->size;
  const uint8_t *p = tab + id * row;
  for (int64_t j = 0; j < cols; j++) {
    if (type == GGML_F32) memcpy(&y[j], p + 4 * j, 4);
    else if (type == GGML_F16) y[j] = gguf_ref_half(p + 2 * j);
    else if (type == GGML_BF16) {
      uint32_t bits = (uint32_t)(p[2 * j] | p[2 * j + 1] << 8) << 16;
      memcpy(&y[j], &bits, 4);
    }
  }
  if (ti->dtype == TG_DTYPE_COUNT) gguf_ref_dequantize(type, p, cols / ti->block, y);
}

/* random bytes of a table (plain types: finite values) */
static void rand_table(uint32_t type, uint8_t *tab, int64_t rows, int64_t cols) {
  const gguf_type_info *ti = gguf_type_of(type);
  if (ti->dtype == TG_DTYPE_COUNT) {
    gguf_rand_blocks(type, tab, rows * cols / ti->block);
    return;
  }
  uint64_t x = 12345;
  for (int64_t i = 0; i < rows * cols; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    float f = (float)((double)(x >> 40) / (double)(1 << 24) * 4 - 2);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (type == GGML_F32) memcpy(tab + 4 * i, &f, 4);
    else if (type == GGML_BF16) tab[2 * i] = (uint8_t)(bits >> 16), tab[2 * i + 1] = (uint8_t)(bits >> 24);
    else {   /* float16 bits with an exponent below 31: finite */
      uint16_t h = (uint16_t)((x >> 20) & 0xFBFF);
      tab[2 * i] = (uint8_t)h, tab[2 * i + 1] = (uint8_t)(h >> 8);
    }
  }
}

/* a model with only an embedding (vocab, dim) of type over the bytes tab: enough for llm_embed */
static tg_llm *embed_model(uint32_t type, const uint8_t *tab, int64_t vocab, int64_t dim) {
  const gguf_type_info *ti = gguf_type_of(type);
  tg_llm_config c = {.dim = dim, .hidden_dim = dim, .n_layers = 1, .n_heads = 1, .n_kv_heads = 1, .head_dim = dim,
                     .vocab_size = vocab, .context = 8, .max_seq = 8, .rope_base = 10000, .norm_eps = 1e-5};
  tg_llm *m = llm_new(&c);
  if (!m) return NULL;
  int64_t row = dim / ti->block * ti->size;
  tg_dtype dt = ti->dtype == TG_DTYPE_COUNT ? TG_UINT8 : ti->dtype;
  int64_t shape[2] = {vocab, ti->dtype == TG_DTYPE_COUNT ? row : dim};
  m->emb = tensor_unscope(tg_from_data(dt, 2, shape, tab, (size_t)(vocab * row)));
  m->out = m->emb;
  m->emb_type = type;
  if (!m->emb || llm_finish(m, NULL) != TG_OK) {
    tg_llm_free(m);
    return NULL;
  }
  return m;
}

TEST(test_llm_embedding_rows_match_dequantize_then_gather_every_type) {
  const uint32_t types[] = {GGML_Q4_0, GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0, GGML_Q4_K,
                            GGML_Q5_K, GGML_Q6_K, GGML_F16,  GGML_BF16, GGML_F32};
  const int64_t vocab = 4001;   /* odd; its float table (4 or 8 MB) would dwarf the rows read */
  /* the first and last rows, odd ids, one twice */
  const int32_t ids[] = {0, 4000, 7, 3999, 2501, 7, 333};
  const int n = (int)(sizeof ids / sizeof ids[0]);
  for (int d = 0; d < 2; d++) {
    int64_t dim = d ? 512 : 256;   /* one and two K-quant super-blocks a row */
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
      uint32_t type = types[k];
      const gguf_type_info *ti = gguf_type_of(type);
      int64_t row = dim / ti->block * ti->size;
      uint8_t *tab = malloc((size_t)(vocab * row));
      float *got = malloc((size_t)(n * dim) * sizeof *got), *want = malloc((size_t)(n * dim) * sizeof *want);
      if (!tab || !got || !want) {
        CHECK(false, "malloc");
        free(tab), free(got), free(want);
        return;
      }
      rand_table(type, tab, vocab, dim);
      for (int i = 0; i < n; i++) ref_row(type, tab, dim, ids[i], want + i * dim);
      tg_llm *m = embed_model(type, tab, vocab, dim);
      tg_memory_info before, after;
      tg_memory(NULL, &before);
      tg_memory_reset_peak(NULL);
      tg_status st = m ? llm_embed(m, ids, n, got) : tg_error_status();
      tg_memory(NULL, &after);
      CHECK(st == TG_OK, "%s dim %lld: %s", ti->name, (long long)dim, tg_error());
      char what[64];
      snprintf(what, sizeof what, "%s rows of dim %lld", ti->name, (long long)dim);
      if (st == TG_OK) check_close_f32(what, got, want, n * dim, 0, 0, __FILE__, __LINE__);
      /* the prefill's row buffer (256, dim) and small temporaries, never a float table of vocab rows */
      CHECK(after.peak - before.in_use < (size_t)(vocab * dim * 4) / 4, "%s: %zu bytes at the peak for %d rows",
            ti->name, after.peak - before.in_use, n);
      tg_llm_free(m);
      free(tab), free(got), free(want);
    }
  }
}
