/* tokenizer_merge.c — the merge loop both encoders share (llama.cpp's and sentencepiece's algorithm): symbols
 * in a linked list, every adjacent pair that can merge in a heap by priority (then by position, the leftmost
 * first), the best pair merged into its left symbol and the pairs around it pushed. A heap entry whose symbols
 * changed since it was pushed is stale and skipped: a pair's priority depends only on the two symbols, so the
 * result is that of rescanning every pair after each merge, in O(n log n) instead of O(n^2) (a megabyte of
 * one word, or of SPM text, stays fast).
 */
#include <stdlib.h>

#include "nn/tokenizer.h"
#include "uop/uop.h"

typedef struct heap { tok_pair *e; int64_t n; } heap;

static bool before(const tok_pair *a, const tok_pair *b) {
  return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

static void push(heap *h, tok_pair p) {
  int64_t i = h->n++;
  while (i > 0 && before(&p, &h->e[(i - 1) / 2])) {
    h->e[i] = h->e[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->e[i] = p;
}

static tok_pair pop(heap *h) {
  tok_pair top = h->e[0], last = h->e[--h->n];
  int64_t i = 0;
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && before(&h->e[c + 1], &h->e[c])) c++;
    if (!before(&h->e[c], &last)) break;
    h->e[i] = h->e[c];
    i = c;
  }
  if (h->n) h->e[i] = last;
  return top;
}

static void try_pair(const tg_tokenizer *t, const char *text, const tok_sym *sym, int32_t a, heap *h, tok_pair_fn fn) {
  if (a < 0 || sym[a].next < 0) return;
  int32_t b = sym[a].next;
  tok_pair p = {0, a, sym[a].len + sym[b].len, -1};
  if (fn(t, text, &sym[a], &sym[b], &p.prio, &p.result)) push(h, p);
}

tg_status tok_merge_symbols(const tg_tokenizer *t, const char *text, tok_sym *sym, int64_t n, tok_pair_fn fn) {
  if (n < 2) return TG_OK;
  heap h = {mem_alloc((size_t)(3 * n) * sizeof *h.e), 0};  /* n - 1 pairs, then two per merge */
  if (!h.e) return TG_ERR_NOMEM;
  for (int32_t i = 0; i + 1 < n; i++) try_pair(t, text, sym, i, &h, fn);
  while (h.n) {
    tok_pair p = pop(&h);
    /* stale when either symbol changed since: lengths only grow, so the sum tells (as in llama.cpp) */
    tok_sym *a = &sym[p.left];
    if (!a->len || a->next < 0 || a->len + sym[a->next].len != p.size) continue;
    tok_sym *b = &sym[a->next];
    a->len += b->len;
    a->id = p.result;
    a->next = b->next;
    if (b->next >= 0) sym[b->next].prev = p.left;
    b->len = 0;
    try_pair(t, text, sym, a->prev, &h, fn);
    try_pair(t, text, sym, p.left, &h, fn);
  }
  free(h.e);
  return TG_OK;
}
