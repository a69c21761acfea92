/* llm.c — a decoder-only transformer (llama, qwen2, qwen3) over weights its loaders give it: prefill and
 * decode.
 *
 * One forward serves both: n tokens at positions start .. start+n-1, where start is a tg_variable. Decode
 * is n = 1 at m->pos, captured once by tg_jit and replayed (RoPE's angle is pos * freq computed in the
 * kernel, each layer's K and V caches (max_seq, kv_dim) get the new row with tg_assign_at, attention masks
 * the positions after pos with a bool mask: shapes stay static, but the kernels' loops over keys end at pos
 * (codegen/trim.c), so the scores, the softmax's reduces and p @ v cost O(pos); what stays O(max_seq) is
 * cheap: the masked scores' -inf and the softmax's output row). Prefill is the same graph over
 * n rows (chunks of at most PREFILL_CHUNK) padded to a power of two (bucket: a prompt of a new length reuses
 * the kernels of its bucket), realized eagerly with a fresh variable bounded by max_seq - rows (tg_assign_at
 * needs the window to fit for every value), the mask causal: query i sees keys 0 .. start+i; the logits are
 * those of the last real row, picked by a variable. The caches are written in place only, never replaced:
 * the captured step holds their buffers.
 *
 * The token embedding is a window of one row at the variable tok over the table as the file stores it (a
 * quantized table stays its blocks): the step reads its token's row and dequantizes only it; a prefill writes
 * its rows one by one into a buffer of the chunk (one small kernel, compiled once). tinygrad's embedding, a
 * one-hot sum over the vocabulary, would read the whole table per token, and with a quantized table the
 * scheduler stores its dequantized float copy (vocab * dim * 4 bytes: 263 MB for TinyLlama).
 *
 * Grouped-query attention puts the rep query heads of a KV head next to the query rows: q (nkv, n*rep, hd)
 * against k (nkv, T, hd), so each KV head's cache is read once for all of its query heads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gguf.h"
#include "nn/llm.h"
#include "tensor/tensor.h"

#define PREFILL_CHUNK 256

static void layer_free(llm_layer *l) {
  tg_tensor *all[] = {l->att_norm, l->wq, l->wk, l->wv, l->wo, l->bq, l->bk, l->bv, l->q_norm, l->k_norm,
                      l->ffn_norm, l->w1, l->w2, l->w3, l->kc, l->vc};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tg_free(all[i]);
}

void tg_llm_free(tg_llm *m) {
  if (!m) return;
  tg_jit_free(m->jit);
  tg_jit_free(m->embed_jit);
  tg_free(m->xrows);
  for (int64_t l = 0; m->layers && l < m->c.n_layers; l++) layer_free(&m->layers[l]);
  free(m->layers);
  if (m->out != m->emb) tg_free(m->out);
  tg_free(m->emb);
  tg_free(m->final_norm);
  tg_free(m->freq);
  tg_variable_free(m->pos);
  tg_variable_free(m->tok);
  tg_variable_free(m->row);
  free(m);
}

tg_llm *llm_new(const tg_llm_config *c) {
  tg_llm *m = mem_calloc(1, sizeof *m);
  if (m) {
    m->c = *c;
    m->kv_dim = c->head_dim * c->n_kv_heads;
    m->layers = mem_calloc((size_t)c->n_layers, sizeof *m->layers);
  }
  if (!m || !m->layers) {
    tg_set_error(TG_ERR_NOMEM, "tg_llm: out of memory for %lld layers", (long long)c->n_layers);
    free(m);
    return NULL;
  }
  return m;
}

static tg_status llm_step_fn(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out);
static tg_status llm_embed_fn(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out);

tg_status llm_finish(tg_llm *m, const float *factors) {
  int64_t half = m->c.head_dim / 2, shape[2] = {m->c.max_seq, m->kv_dim};
  float *f = mem_alloc((size_t)half * sizeof *f);
  if (!f) {
    tg_set_error(TG_ERR_NOMEM, "tg_llm: out of memory");
    return TG_ERR_NOMEM;
  }
  /* as llama2.c's run.c computes them, in float */
  for (int64_t i = 0; i < half; i++) {
    f[i] = 1.0f / powf((float)m->c.rope_base, (float)(2 * i) / (float)m->c.head_dim);
    if (factors) f[i] /= factors[i];
  }
  m->freq = tensor_unscope(tg_from_data(TG_FLOAT32, 1, &half, f, (size_t)half * sizeof *f));
  free(f);
  bool ok = m->freq && (m->pos = tg_variable_new("pos", 0, m->c.max_seq - 1)) &&
            (m->tok = tg_variable_new("tok", 0, m->c.vocab_size - 1)) &&
            (m->row = tg_variable_new("row", 0, PREFILL_CHUNK - 1));
  for (int64_t l = 0; ok && l < m->c.n_layers; l++) {
    llm_layer *y = &m->layers[l];
    y->kc = tensor_own(tg_zeros(TG_FLOAT32, 2, shape));
    y->vc = tensor_own(tg_zeros(TG_FLOAT32, 2, shape));
    ok = y->kc && y->vc;
  }
  ok = ok && (m->jit = tg_jit_new(llm_step_fn, m, 0, 1)) && (m->embed_jit = tg_jit_new(llm_embed_fn, m, 0, 0));
  if (!ok && !tg_error_status()) tg_set_error(TG_ERR_NOMEM, "tg_llm: out of memory");
  return ok ? TG_OK : tg_error_status();
}

/* ---- the forward ---------------------------------------------------------------------------------------- */

static tg_tensor *linear(tg_tensor *x, tg_tensor *w, tg_tensor *b) {
  tg_tensor *y = tg_matmul(x, tg_transpose(w, 0, 1));
  return b ? tg_add(y, b) : y;
}

static tg_tensor *rmsnorm(tg_tensor *x, tg_tensor *w, double eps) {
  return tg_mul(tg_rmsnorm(x, 1, (int[]){-1}, eps), w);
}

/* x (n, nh*hd) with each pair (x0, x1) of every head turned by its angle: (x0 c - x1 s, x1 c + x0 s). The
 * pairs are adjacent elements (llama) or i and i + hd/2 (neox): x seen as (n, nh, A, B) with the pair on the
 * axis of size 2. cs is (c, c) and sn (-s, s) along that axis; the pair swapped is a flip of it */
static tg_tensor *rope(const tg_llm *m, tg_tensor *x, int64_t n, int64_t nh, tg_tensor *cs, tg_tensor *sn) {
  int64_t hd = m->c.head_dim, half = hd / 2;
  bool neox = m->c.rope_neox;
  tg_tensor *p = tg_reshape(x, 4, neox ? (int64_t[]){n, nh, 2, half} : (int64_t[]){n, nh, half, 2});
  tg_tensor *r = tg_add(tg_mul(p, cs), tg_mul(tg_flip(p, 1, (int[]){neox ? 2 : 3}), sn));
  return tg_reshape(r, 2, (int64_t[]){n, nh * hd});
}

/* qwen3: x (n, nh*hd) normalized per head */
static tg_tensor *head_norm(const tg_llm *m, tg_tensor *x, int64_t n, int64_t nh, tg_tensor *w) {
  if (!w) return x;
  tg_tensor *h = rmsnorm(tg_reshape(x, 3, (int64_t[]){n, nh, m->c.head_dim}), w, m->c.norm_eps);
  return tg_reshape(h, 2, (int64_t[]){n, nh * m->c.head_dim});
}

/* the row of token m->tok (bound at run time) as float32 (1, dim): a window of one row of the table as stored,
 * dequantized by the kernel that reads it (a quantized table is never dequantized whole) */
static tg_tensor *embed_row(const tg_llm *m) {
  return gguf_dequantize_rows(tg_shrink_at(m->emb, 0, m->tok, 1), m->emb_type);
}

/* x, the embedded tokens float32 (n, dim), at positions start .. start+n-1: the logits (1, vocab) of row last
 * (NULL: n is 1); the caches' rows are assigned (their tensors listed in assigned[0 .. 2*n_layers), realized
 * with the logits by the caller) */
static tg_tensor *forward(tg_llm *m, tg_tensor *x, int64_t n, tg_variable *start, tg_variable *last,
                          tg_tensor **assigned, tg_status *st) {
  const tg_llm_config *c = &m->c;
  int64_t hd = c->head_dim, half = hd / 2, nh = c->n_heads, nkv = c->n_kv_heads, rep = nh / nkv, T = c->max_seq;
  bool neox = c->rope_neox;
  tg_tensor *p0 = tg_variable_tensor(start);
  /* (n,): positions (one token: the variable itself, which the step's kernels read inline) */
  tg_tensor *posi = n == 1 ? tg_reshape(p0, 1, (int64_t[]){1}) : tg_add(tg_arange(TG_INT32, 0, (double)n, 1), p0);
  /* RoPE: the angle of pair i at position p is p * freq[i], computed in the kernel */
  tg_tensor *ang = tg_mul(tg_reshape(tg_cast(posi, TG_FLOAT32), 2, (int64_t[]){n, 1}), m->freq);  /* (n, half) */
  int64_t ashape[4] = {n, 1, neox ? 1 : half, neox ? half : 1}, full[4] = {n, 1, neox ? 2 : half, neox ? half : 2};
  int64_t sshape[4] = {1, 1, neox ? 2 : 1, neox ? 1 : 2};
  tg_tensor *a4 = tg_reshape(ang, 4, ashape);
  tg_tensor *sign = tg_reshape(tg_from_data(TG_FLOAT32, 1, (int64_t[]){2}, (float[]){-1, 1}, 8), 4, sshape);
  tg_tensor *cs = tg_expand(tg_cos(a4), 4, full), *sn = tg_mul(tg_sin(a4), sign);
  /* the causal mask (n*rep, T): row i*rep + r (query i, head r of its group) sees keys 0 .. start+i */
  tg_tensor *seen = tg_le(tg_reshape(tg_arange(TG_INT32, 0, (double)T, 1), 2, (int64_t[]){1, T}),
                          tg_reshape(posi, 2, (int64_t[]){n, 1}));                          /* (n, T) */
  if (n > 1)  /* one token: (1, T) broadcasts over the rep rows (expanded, it was a kernel of its own) */
    seen = tg_reshape(tg_expand(tg_reshape(seen, 3, (int64_t[]){n, 1, T}), 3, (int64_t[]){n, rep, T}), 2,
                      (int64_t[]){n * rep, T});
  /* NULL is a valid mask for attention (none): a mask that failed to build must stop the forward here */
  if (!seen || !cs || !sn) {
    *st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
    return NULL;
  }
  for (int64_t l = 0; *st == TG_OK && l < c->n_layers; l++) {
    llm_layer *y = &m->layers[l];
    tg_tensor *h = rmsnorm(x, y->att_norm, c->norm_eps);
    tg_tensor *q = rope(m, head_norm(m, linear(h, y->wq, y->bq), n, nh, y->q_norm), n, nh, cs, sn);  /* (n, nh*hd) */
    /* the new rows are stored, then placed: left to the scheduler, the K row's matmul and RoPE fuse into one
     * kernel that runs the matmul twice (the pair and its flip), 1150 vs 1400 tok/s best of 6 */
    tg_tensor *k = tg_contiguous(rope(m, head_norm(m, linear(h, y->wk, y->bk), n, nkv, y->k_norm), n, nkv, cs, sn));
    tg_tensor *v = linear(h, y->wv, y->bv);                                                   /* (n, kv_dim) */
    /* rows start.. of each cache, written in place by a kernel over the rows; the attention below reads the
     * caches with them (the realize orders the writes before those reads) */
    *st = tg_assign_at(y->kc, 0, start, k);
    if (*st == TG_OK) *st = tg_assign_at(y->vc, 0, start, v);
    assigned[2 * l] = y->kc;
    assigned[2 * l + 1] = y->vc;
    int order[3] = {1, 0, 2};
    tg_tensor *qh = tg_reshape(tg_permute(tg_reshape(q, 4, (int64_t[]){n, nkv, rep, hd}), 4, (int[]){1, 0, 2, 3}), 3,
                               (int64_t[]){nkv, n * rep, hd});
    tg_tensor *kh = tg_permute(tg_reshape(y->kc, 3, (int64_t[]){T, nkv, hd}), 3, order);  /* (nkv, T, hd) */
    tg_tensor *vh = tg_permute(tg_reshape(y->vc, 3, (int64_t[]){T, nkv, hd}), 3, order);
    tg_tensor *att = tg_scaled_dot_product_attention(qh, kh, vh, seen, 0, false, false);    /* (nkv, n*rep, hd) */
    att = tg_reshape(tg_permute(tg_reshape(att, 4, (int64_t[]){nkv, n, rep, hd}), 4, (int[]){1, 0, 2, 3}), 2,
                     (int64_t[]){n, nh * hd});
    x = tg_add(x, linear(att, y->wo, NULL));
    h = rmsnorm(x, y->ffn_norm, c->norm_eps);
    x = tg_add(x, linear(tg_mul(tg_silu(linear(h, y->w1, NULL)), linear(h, y->w3, NULL)), y->w2, NULL));
  }
  if (last) x = tg_shrink_at(x, 0, last, 1);
  tg_tensor *logits = linear(rmsnorm(x, m->final_norm, c->norm_eps), m->out, NULL);  /* (1, vocab) */
  if (*st == TG_OK && !logits) *st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  return logits;
}

/* x (n, dim) at start (bound; x NULL: the row of m->tok), realized: the logits (1, vocab) of row last kept out
 * of the scope, or NULL */
static tg_tensor *run(tg_llm *m, tg_tensor *x, int64_t n, tg_variable *start, tg_variable *last, tg_status *st) {
  int64_t na = 2 * m->c.n_layers + 1;
  tg_tensor **assigned = mem_alloc((size_t)na * sizeof *assigned);
  *st = TG_OK;
  if (!assigned) {
    tg_set_error(TG_ERR_NOMEM, "tg_llm: out of memory");
    *st = TG_ERR_NOMEM;
    return NULL;
  }
  tg_scope_begin();
  tg_tensor *logits = forward(m, x ? x : embed_row(m), n, start, last, assigned, st);
  if (*st == TG_OK) {
    assigned[na - 1] = logits;
    *st = tg_realize_many((int)na, assigned);
  }
  logits = *st == TG_OK ? tg_keep(logits) : NULL;
  tg_scope_end();
  free(assigned);
  return logits;
}

/* the JIT's step: the token m->tok at m->pos (both bound before the call); out the logits (1, vocab) */
static tg_status llm_step_fn(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)nin, (void)in, (void)nout;
  tg_status st;
  out[0] = run(ctx, NULL, 1, ((tg_llm *)ctx)->pos, NULL, &st);
  return st;
}

/* ---- the calls ------------------------------------------------------------------------------------------ */

static tg_status check_tokens(const tg_llm *m, const char *op, const int32_t *tokens, int64_t n) {
  if (!m || !tokens) {
    tg_set_error(TG_ERR_ARG, "%s: %s is NULL", op, !m ? "the model" : "tokens");
    return TG_ERR_ARG;
  }
  if (n < 1 || n > m->c.max_seq - m->next_pos) {
    tg_set_error(TG_ERR_ARG, "%s: %lld tokens at position %lld: want 1 or more, ending at most at max_seq %lld "
                 "(tg_llm_reset starts over)", op, (long long)n, (long long)m->next_pos, (long long)m->c.max_seq);
    return TG_ERR_ARG;
  }
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= m->c.vocab_size) {
      tg_set_error(TG_ERR_ARG, "%s: token %lld is %d: want one in [0, %lld)", op, (long long)i, tokens[i],
                   (long long)m->c.vocab_size);
      return TG_ERR_ARG;
    }
  return TG_OK;
}

/* the logits (1, vocab) to the host, when wanted */
static tg_status read_logits(const tg_llm *m, tg_tensor *out, float *logits) {
  return logits ? tg_to_host(out, logits, (size_t)m->c.vocab_size * sizeof *logits) : TG_OK;
}

/* the captured step for token at the next position; logits read when wanted */
static tg_status step(tg_llm *m, int32_t token, float *logits) {
  tg_status st;
  if ((st = tg_variable_bind(m->pos, m->next_pos)) != TG_OK || (st = tg_variable_bind(m->tok, token)) != TG_OK)
    return st;
  tg_tensor *out = NULL;
  st = tg_jit_call(m->jit, NULL, &out);
  if (st == TG_OK) st = read_logits(m, out, logits);
  tg_free(out);
  if (st == TG_OK) m->next_pos++;
  return st;
}

tg_status tg_llm_step(tg_llm *m, int32_t token, float *logits) {
  tg_status st = check_tokens(m, "tg_llm_step", &token, 1);
  if (st == TG_OK && !logits) {
    tg_set_error(TG_ERR_ARG, "tg_llm_step: logits is NULL");
    st = TG_ERR_ARG;
  }
  return st == TG_OK ? step(m, token, logits) : st;
}

/* the rows a chunk of n tokens (n > 1) is padded to: the next power of two from 8 on, so that prompts of every
 * length share six sets of kernels (8 .. PREFILL_CHUNK rows); n itself where that many rows would pass max_seq */
static int64_t bucket(const tg_llm *m, int64_t n) {
  int64_t b = 8;
  while (b < n) b *= 2;
  return b <= m->c.max_seq - m->next_pos && !m->exact_chunks ? b : n;
}

/* the embedding JIT's step: the row of m->tok written into m->xrows at m->row (both bound before the call) */
static tg_status llm_embed_fn(void *ctx, int nin, tg_tensor *const *in, int nout, tg_tensor **out) {
  (void)nin, (void)in, (void)nout, (void)out;
  tg_llm *m = ctx;
  tg_scope_begin();
  tg_status st = tg_assign_at(m->xrows, 0, m->row, embed_row(m));
  if (st == TG_OK) st = tg_realize(m->xrows);
  tg_scope_end();
  return st;
}

/* tokens[0..n) embedded as float32 (b, dim) (b <= PREFILL_CHUNK), a view of m->xrows: row i is the window at
 * token i of the table, dequantized alone, written in place by a replay of the embedding JIT (one small kernel
 * a token). Rows n..b-1 hold zeros or rows of earlier tokens: finite values, as the padding needs */
static tg_tensor *embed_chunk(tg_llm *m, const int32_t *tokens, int64_t n, int64_t b, tg_status *st) {
  *st = TG_OK;
  if (!m->xrows && !(m->xrows = tensor_own(tg_zeros(TG_FLOAT32, 2, (int64_t[]){PREFILL_CHUNK, m->c.dim}))))
    *st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  for (int64_t i = 0; *st == TG_OK && i < n; i++) {
    if ((*st = tg_variable_bind(m->row, i)) != TG_OK || (*st = tg_variable_bind(m->tok, tokens[i])) != TG_OK) break;
    *st = tg_jit_call(m->embed_jit, NULL, NULL);
  }
  tg_tensor *x = *st == TG_OK ? tg_shrink(m->xrows, 2, (int64_t[]){0, b, 0, m->c.dim}) : NULL;
  if (*st == TG_OK && !x) *st = tg_error_status() ? tg_error_status() : TG_ERR_NOMEM;
  return x;
}

tg_status llm_embed(tg_llm *m, const int32_t *tokens, int64_t n, float *out) {
  tg_status st;
  tg_tensor *x = embed_chunk(m, tokens, n, n, &st);
  if (st == TG_OK) st = tg_to_host(x, out, (size_t)(n * m->c.dim) * sizeof *out);
  tg_free(x);
  return st;
}

/* n tokens (n > 1) in one forward at the next position: the logits of the last, when wanted. The forward runs
 * over b >= n rows (bucket): the rows past n are zeros at positions next_pos+n .. next_pos+b-1, harmless: the
 * causal mask hides their keys from every real row (row i sees keys up to next_pos+i), and their cache rows
 * are written again, by a step or the next chunk, before any query reaches them. Their values are finite (a
 * masked key's weight is an exact 0, and 0 times a NaN would not be). The logits are those of row n-1, a
 * variable: a chat's next prompt of another length reuses every kernel of its bucket */
static tg_status prefill_chunk(tg_llm *m, const int32_t *tokens, int64_t n, float *logits) {
  int64_t b = bucket(m, n);
  /* a window of b rows must fit for every value of its start: the variable's bound is max_seq - b */
  tg_variable *start = tg_variable_new("start", 0, m->c.max_seq - b), *last = tg_variable_new("last", 0, b - 1);
  tg_status st = start && last ? TG_OK : tg_error_status();
  if (st == TG_OK) st = tg_variable_bind(start, m->next_pos);
  if (st == TG_OK) st = tg_variable_bind(last, n - 1);
  tg_tensor *x = st == TG_OK ? embed_chunk(m, tokens, n, b, &st) : NULL;
  tg_scope_begin();
  tg_tensor *out = st == TG_OK ? run(m, x, b, start, last, &st) : NULL;
  if (st == TG_OK) st = read_logits(m, out, logits);
  tg_free(out);
  tg_scope_end();
  tg_free(x);
  tg_variable_free(start);
  tg_variable_free(last);
  if (st == TG_OK) m->next_pos += n;
  return st;
}

tg_status tg_llm_prefill(tg_llm *m, const int32_t *tokens, int64_t n, float *logits) {
  tg_status st = check_tokens(m, "tg_llm_prefill", tokens, n);
  /* chunks of at most PREFILL_CHUNK tokens: the attention scores are (n_heads, n, max_seq) floats, 1 GB for a
   * 2048-token prompt of a 32-head model with a 4096 cache in one forward; 128 MB in chunks of 256 */
  for (int64_t at = 0; st == TG_OK && at < n; at += PREFILL_CHUNK) {
    int64_t k = n - at < PREFILL_CHUNK ? n - at : PREFILL_CHUNK;
    float *want = at + k == n ? logits : NULL;
    if (k == 1) st = step(m, tokens[at], want);  /* the captured step: nothing to compile */
    else st = prefill_chunk(m, tokens + at, k, want);
  }
  return st;
}

tg_status tg_llm_reset(tg_llm *m) {
  if (!m) {
    tg_set_error(TG_ERR_ARG, "tg_llm_reset: the model is NULL");
    return TG_ERR_ARG;
  }
  /* zeros written as a window over all rows, in place: the decode step's replays hold the caches' buffers.
   * tg_assign(kc, zeros) would not do: the zeros of K and V are one node, realized into one new buffer that
   * both caches then share (copy on write), and every later eager write (a prefill) went to a copy the
   * replays never read */
  tg_variable *all = tg_variable_new("all", 0, 0);
  tg_status st = all ? TG_OK : tg_error_status();
  tg_scope_begin();
  for (int64_t l = 0; st == TG_OK && l < m->c.n_layers; l++) {
    llm_layer *y = &m->layers[l];
    st = tg_assign_at(y->kc, 0, all, tg_zeros_like(y->kc));
    if (st == TG_OK) st = tg_assign_at(y->vc, 0, all, tg_zeros_like(y->vc));
    if (st == TG_OK) st = tg_realize_many(2, (tg_tensor *[]){y->kc, y->vc});
  }
  tg_scope_end();
  tg_variable_free(all);
  if (st == TG_OK) m->next_pos = 0;
  return st;
}

tg_llm_config tg_llm_config_of(const tg_llm *m) {
  tg_llm_config z;
  memset(&z, 0, sizeof z);
  return m ? m->c : z;
}
int64_t tg_llm_pos(const tg_llm *m) { return m ? m->next_pos : -1; }
int tg_llm_kernels(const tg_llm *m) { return m ? tg_jit_kernels(m->jit) : 0; }
