/* schedule_cache.c — schedules remembered by graph structure (schedule_cache.h).
 *
 * A lookup walks the graph once, depth first from the outputs, numbering the nodes and writing each out as
 * it is numbered, into the walk's signature: every storage leaf by what a schedule depends on (dtype, shape,
 * op, whether it has storage yet, and which earlier leaf holds the same buffer: a window write must not read
 * its own target), every other node by its op, dtype, arg, aux and its sources' numbers. The signature's hash
 * picks the candidate entries and each is compared with the signature it keeps, all of it, so no hash is
 * trusted alone, a hit builds no node, and the comparison reads no canonical node (a step's kernels evict
 * them between two lookups).
 *
 * The canonical graph is made when a schedule is new: every leaf becomes a stand-in node (a PARAM with a
 * marker in its aux, never built elsewhere) numbered by its place in the walk, the nodes above rebuilt over the
 * stand-ins. Nodes are interned, so two graphs of equal walks have one canonical graph, and the entry keeps its
 * nodes in walk order to compare the next walks with.
 *
 * An entry keeps the schedule over canonical nodes: the kernels' ASTs as they are (they name buffers by PARAM
 * index only), stand-ins where the schedule named leaves, canonical nodes for the values it stores. A hit
 * binds stand-ins back to the new graph's leaves; the stored values stay canonical nodes, which serve the
 * realize only as keys of the buffers it makes (their dtype and shape are the real ones). No entry holds a
 * buffer: evicted entries and graphs free everything once collected. */
#include <stdlib.h>
#include <string.h>

#include "engine/schedule_cache.h"

#ifndef CACHE_MAX
#define CACHE_MAX 256             /* entries (-DCACHE_MAX=4 builds exercise eviction) */
#endif
#define CACHE_NODES (1 << 20)     /* canonical nodes kept alive, all entries together */
#define STANDIN_MAGIC 0x5c4edc0deLL
#define STANDIN_AUX 5          /* magic, leaf op, has storage, alias, ndim; then the shape */

typedef struct entry {
  uop *key;
  uint64_t hash;     /* of the walk */
  int nnodes;
  int64_t *sig;      /* the walk's signature */
  size_t nsig;
  schedule s;        /* over canonical nodes */
  int32_t *codes;    /* how a hit binds each node reference of s (bind_codes) */
  int64_t nodes;     /* size of the canonical graph (the budget) */
  uint64_t used;     /* last hit or insertion, for LRU */
} entry;

static entry *entries;
static int nentries, cap_entries;
static int64_t cache_nodes;
static uint64_t tick;
static bool rooted, narrow_at_fill;

static bool is_leaf(uop *u) { return uop_storage(u) != NULL || u->op == OP_BUFFER; }

static bool is_standin(const uop *u) {
  return u->op == OP_PARAM && u->naux >= STANDIN_AUX && u->aux[0] == STANDIN_MAGIC && u->nsrc == 0;
}

static void mark_entries(void *ctx) {
  for (int i = 0; i < nentries; i++) {
    const entry *e = &entries[i];
    uop_mark(e->key);
    for (int k = 0; k < e->s.nkernels; k++) {
      const sched_kernel *sk = &e->s.kernels[k];
      uop_mark(sk->ast);
      uop_mark(sk->output);
      uop_mark(sk->window_into);
      for (int j = 0; j < sk->nbufs; j++) uop_mark(sk->bufs[j]);
    }
    for (int j = 0; j < e->s.nrealized; j++) uop_mark(e->s.realized[j]);
    for (int j = 0; j < e->key->nsrc / 2; j++) uop_mark(e->s.roots[j]);
  }
}

static void entry_free(entry *e) {
  schedule_free(&e->s);
  free(e->sig);
  free(e->codes);
}

void sched_cache_clear(void) {
  for (int i = 0; i < nentries; i++) entry_free(&entries[i]);
  free(entries);
  entries = NULL;
  nentries = cap_entries = 0;
  cache_nodes = 0;
  if (rooted) uop_gc_remove_roots(mark_entries, NULL);
  rooted = false;
}

void sched_query_free(sched_query *q) {
  free(q->order);
  free(q->sig);
  free(q->alias);
  free(q->leaves);
  umap_free(&q->canon);
  memset(q, 0, sizeof *q);
}

/* uop_replace_src of u over its sources' images in m; NULL when one has none or out of memory */
static uop *rebuild(uop *u, const uop_map *m) {
  uop *tmp[8], **src = u->nsrc <= 8 ? tmp : mem_alloc((size_t)u->nsrc * sizeof *src);
  if (!src) return NULL;
  bool ok = true;
  for (int k = 0; k < u->nsrc && ok; k++) ok = (src[k] = umap_get(m, u->src[k])) != NULL;
  uop *v = ok ? (u->nsrc ? uop_replace_src(u, u->nsrc, src) : u) : NULL;
  if (src != tmp) free(src);
  return v;
}

/* ---- the walk ------------------------------------------------------------------------------------------- */

/* A node's number in the walk is its scratch field (-1 while its sources are walked), valid under the walk's
 * stamp: the walk runs under the library lock, and a lookup of the numbers is a field read, not a probe of a
 * table of its own */

/* whether u is new to the walk of stamp (now numbered -1) */
static bool num_add(uint32_t stamp, uop *u) {
  if (u->scratch_stamp == stamp) return false;
  u->scratch_stamp = stamp;
  u->scratch = -1;
  return true;
}

/* room for k more words of q's signature */
static bool sig_room(sched_query *q, size_t k) {
  if (q->nsig + k <= q->capsig) return true;
  size_t nc = q->capsig ? q->capsig : 1024;
  while (nc < q->nsig + k) nc *= 2;
  int64_t *ns = mem_realloc(q->sig, nc * sizeof *ns);
  if (!ns) return false;
  q->sig = ns;
  q->capsig = nc;
  return true;
}

#define SIG_LEAF ((int64_t)1 << 32)  /* a record's first word: kind, op and dtype; its length follows from it */
#define SIG_NODE ((int64_t)2 << 32)

/* u, numbered, written to q's signature: a leaf as (tag, has storage, ndim, shape), another node as (tag,
 * arg, nsrc, naux, aux, its sources' numbers). Leaves' aliases come last, once all leaves are known */
static bool sig_add(sched_query *q, uop *u, bool leaf) {
  int64_t tag = (leaf ? SIG_LEAF : SIG_NODE) | (int64_t)u->op << 8 | u->dtype;
  if (leaf) {
    if (q->nleaves == q->capleaves) {
      int nc = q->capleaves ? 2 * q->capleaves : 64;
      uop **nl = mem_realloc(q->leaves, (size_t)nc * sizeof *nl);
      if (!nl) return false;
      q->leaves = nl;
      q->capleaves = nc;
    }
    q->leaves[q->nleaves++] = u;
    if (!sig_room(q, 3 + (size_t)u->ndim)) return false;
    int64_t *w = q->sig + q->nsig;
    w[0] = tag;
    w[1] = uop_storage(u) != NULL;
    w[2] = u->ndim;
    for (int d = 0; d < u->ndim; d++) w[3 + d] = u->shape[d];
    q->nsig += 3 + (size_t)u->ndim;
    return true;
  }
  if (!sig_room(q, 4 + (size_t)u->naux + (size_t)u->nsrc)) return false;
  int64_t *w = q->sig + q->nsig;
  w[0] = tag;
  w[1] = u->arg.i;
  w[2] = u->nsrc;
  w[3] = u->naux;
  w += 4;
  for (int k = 0; k < u->naux; k++) *w++ = u->aux[k];
  for (int k = 0; k < u->nsrc; k++) *w++ = u->src[k]->scratch;
  q->nsig += 4 + (size_t)u->naux + (size_t)u->nsrc;
  return true;
}

/* the nodes below root in post order, leaves not entered: q->order, q->nnodes, their numbers, q->leaves and
 * the signature without the aliases */
static bool walk(uop *root, uint32_t stamp, sched_query *q) {
  size_t cap = 256, sp = 0, scap = 64;
  struct frame { uop *u; int i; bool leaf; } *stack = mem_alloc(scap * sizeof *stack);
  q->order = mem_alloc(cap * sizeof *q->order);
  if (!stack || !q->order) goto fail;
  num_add(stamp, root);
  bool leaf = is_leaf(root);
  stack[sp++] = (struct frame){root, leaf ? root->nsrc : 0, leaf};
  while (sp) {
    struct frame *f = &stack[sp - 1];
    if (f->i < f->u->nsrc) {
      uop *c = f->u->src[f->i++];
      if (!num_add(stamp, c)) continue;
      if (sp == scap) {
        void *ns = mem_realloc(stack, (scap *= 2) * sizeof *stack);
        if (!ns) goto fail;
        stack = ns;
      }
      leaf = is_leaf(c);
      stack[sp++] = (struct frame){c, leaf ? c->nsrc : 0, leaf};
    } else {
      if ((size_t)q->nnodes == cap) {
        void *no = mem_realloc(q->order, (cap *= 2) * sizeof *q->order);
        if (!no) goto fail;
        q->order = no;
      }
      f->u->scratch = q->nnodes;
      q->order[q->nnodes++] = f->u;
      if (!sig_add(q, f->u, f->leaf)) goto fail;
      sp--;
    }
  }
  free(stack);
  return true;
fail:
  free(stack);
  return false;
}

typedef struct leaf_ref { const void *buf; int i; } leaf_ref;

static int by_buf(const void *x, const void *y) {
  const leaf_ref *a = x, *b = y;
  if (a->buf != b->buf) return (uintptr_t)a->buf < (uintptr_t)b->buf ? -1 : 1;
  return a->i - b->i;
}

/* which earlier leaf holds the same buffer, per leaf */
static bool find_aliases(sched_query *q) {
  leaf_ref *refs = mem_alloc(((size_t)q->nleaves + 1) * sizeof *refs);
  q->alias = mem_alloc(((size_t)q->nleaves + 1) * sizeof *q->alias);
  if (!refs || !q->alias) {
    free(refs);
    return false;
  }
  for (int i = 0; i < q->nleaves; i++) refs[i] = (leaf_ref){uop_storage(q->leaves[i]), i};
  qsort(refs, (size_t)q->nleaves, sizeof *refs, by_buf);
  for (int i = 0; i < q->nleaves; i++)
    q->alias[refs[i].i] = refs[i].buf && i > 0 && refs[i - 1].buf == refs[i].buf ? q->alias[refs[i - 1].i] : refs[i].i;
  free(refs);
  return true;
}

/* a stand-in's aux for leaf number `leaf` of q: the shape goes into it too, as nodes are interned by op,
 * dtype, sources, arg and aux, not by shape (a node's shape follows from those everywhere else), so stand-ins
 * of leaves of different shapes would otherwise be one node, and a graph over (7,) would take the schedule
 * made for (1,) */
static int standin_aux(const sched_query *q, int leaf, int64_t *aux) {
  uop *u = q->leaves[leaf];
  aux[0] = STANDIN_MAGIC;
  aux[1] = u->op;
  aux[2] = uop_storage(u) != NULL;
  aux[3] = q->alias[leaf];
  aux[4] = u->ndim;
  for (int d = 0; d < u->ndim; d++) aux[STANDIN_AUX + d] = u->shape[d];
  return STANDIN_AUX + u->ndim;
}

tg_status sched_cache_query(int n, uop *const *outs, uop *const *targets, sched_query *q) {
  memset(q, 0, sizeof *q);
  /* one root over outputs and targets; a missing target is a constant no target can be (a 0-d int8 -1) */
  uop **roots = mem_alloc(((size_t)n * 2 + 1) * sizeof *roots);
  uop *none = uop_const_int(TG_INT8, -1), *sink = NULL;
  tg_status st = TG_ERR_NOMEM;
  lib_lock();  /* the nodes' scratch is the walk's until the numbers are read */
  if (!roots || !none) goto out;
  for (int i = 0; i < n; i++) {
    roots[i] = outs[i];
    roots[n + i] = targets && targets[i] ? targets[i] : none;
  }
  if (!(sink = uop_new(OP_SINK, TG_BOOL, 2 * n, roots, (uop_arg){.i = -3}, 0, NULL))) goto out;
  if (!walk(sink, uop_scratch_stamp(), q)) goto out;
  if (!find_aliases(q) || !sig_room(q, (size_t)q->nleaves + 1)) goto out;
  for (int i = 0; i < q->nleaves; i++) q->sig[q->nsig++] = q->alias[i];
  q->sig[q->nsig++] = q->nnodes;
  uint64_t h = uop_hash_mix(0x5c4ed, q->nsig);
  for (size_t i = 0; i < q->nsig; i++) h = uop_hash_mix(h, (uint64_t)q->sig[i]);
  q->hash = h;
  st = TG_OK;
out:
  if (st != TG_OK) {
    sched_query_free(q);
    if (tg_error_status() != TG_ERR_NOMEM) tg_set_error(TG_ERR_NOMEM, "tg_realize: out of memory");
  }
  lib_unlock();
  free(roots);
  return st;
}

/* whether entry e was made for a graph of q's structure: the same signature, word for word */
static bool matches(const entry *e, const sched_query *q) {
  return e->hash == q->hash && e->nnodes == q->nnodes && e->nsig == q->nsig &&
         !memcmp(e->sig, q->sig, q->nsig * sizeof *q->sig);
}

/* the canonical graph of q's walk: q->key and q->canon */
static bool canonicalize(sched_query *q) {
  int64_t aux[STANDIN_AUX + TG_MAX_DIMS];
  for (int i = 0, leaf = 0; i < q->nnodes; i++) {
    uop *u = q->order[i], *c;
    if (is_leaf(u)) {
      int na = standin_aux(q, leaf, aux);
      c = uop_new_shaped(OP_PARAM, (tg_dtype)u->dtype, 0, NULL, (uop_arg){.i = leaf}, na, aux, u->ndim, u->shape);
      leaf++;
    } else {
      c = rebuild(u, &q->canon);
    }
    if (!c || !umap_put(&q->canon, u, c)) return false;
  }
  q->key = umap_get(&q->canon, q->order[q->nnodes - 1]);
  return q->key != NULL;
}

/* ---- the schedule over canonical nodes, and back -------------------------------------------------------------- */

/* a copy of s with every node reference passed through fn (NULL: failure); false when out of memory or fn
 * failed. */
typedef uop *(*node_fn)(void *ctx, uop *u);

static bool copy_schedule(const schedule *s, schedule *out, node_fn fn, void *ctx) {
  memset(out, 0, sizeof *out);
  out->kernels = mem_calloc((size_t)s->nkernels + 1, sizeof *out->kernels);
  out->realized = mem_calloc((size_t)s->nrealized + 1, sizeof *out->realized);
  if (!out->kernels || !out->realized) goto fail;
  out->nkernels = s->nkernels;
  for (int k = 0; k < s->nkernels; k++) {
    const sched_kernel *a = &s->kernels[k];
    sched_kernel *b = &out->kernels[k];
    b->ast = a->ast;
    b->nbufs = a->nbufs;
    b->nout = a->nout;
    if (!(b->bufs = mem_alloc(((size_t)a->nbufs + 1) * sizeof *b->bufs))) goto fail;
    for (int j = 0; j < a->nbufs; j++)
      if (!(b->bufs[j] = fn(ctx, a->bufs[j]))) goto fail;
    if (!(b->output = fn(ctx, a->output))) goto fail;
    if (a->window_into && !(b->window_into = fn(ctx, a->window_into))) goto fail;
  }
  out->nrealized = s->nrealized;
  for (int i = 0; i < s->nrealized; i++)
    if (!(out->realized[i] = fn(ctx, s->realized[i]))) goto fail;
  return true;
fail:
  schedule_free(out);
  return false;
}

/* roots are copied apart: schedule.roots has one entry per output, which the schedule does not count */
static bool copy_roots(const schedule *s, schedule *out, int n, node_fn fn, void *ctx) {
  out->roots = mem_calloc((size_t)n + 1, sizeof *out->roots);
  if (!out->roots) return false;
  for (int i = 0; i < n; i++)
    if (!(out->roots[i] = fn(ctx, s->roots[i]))) return false;
  return true;
}

/* to canonical: the query's map, or (a node the scheduler made, as a split reduce) rebuilt over it */
typedef struct to_canon { sched_query *q; bool bad, foreign; } to_canon;

static bool enter_uncanonical(uop *u, void *ctx) {
  return !umap_get(&((sched_query *)ctx)->canon, u) && !is_leaf(u);
}

static uop *canon_of(void *ctx, uop *u) {
  to_canon *t = ctx;
  uop *c = umap_get(&t->q->canon, u);
  if (c || t->bad) return c;
  int nn;
  uop **order = uop_toposort_filtered(u, enter_uncanonical, t->q, &nn);
  if (!order) return NULL;
  for (int i = 0; i < nn && !t->bad; i++) {
    uop *x = order[i];
    if (umap_get(&t->q->canon, x)) continue;
    /* a leaf outside the walk (the schedule read storage its graph does not reach): not cacheable */
    if (is_leaf(x)) t->foreign = true;
    uop *v = is_leaf(x) ? NULL : rebuild(x, &t->q->canon);
    if (!v || !umap_put(&t->q->canon, x, v)) t->bad = true;
  }
  free(order);
  return t->bad ? NULL : umap_get(&t->q->canon, u);
}

/* from canonical: stand-ins to the query's leaves, stored values as they are, other nodes (a window write's
 * target view) rebuilt over the leaves */
typedef struct from_canon { const sched_query *q; uop_map memo; } from_canon;

static bool enter_unbound(uop *u, void *ctx) { return !umap_get(&((from_canon *)ctx)->memo, u) && !is_standin(u); }

static uop *bind_of(void *ctx, uop *u) {
  from_canon *f = ctx;
  uop *c = umap_get(&f->memo, u);
  if (c) return c;
  int nn;
  uop **order = uop_toposort_filtered(u, enter_unbound, f, &nn);
  if (!order) return NULL;
  bool ok = true;
  for (int i = 0; i < nn && ok; i++) {
    uop *x = order[i], *v;
    if (umap_get(&f->memo, x)) continue;
    if (is_standin(x)) v = x->arg.i >= 0 && x->arg.i < f->q->nleaves ? f->q->leaves[x->arg.i] : NULL;
    else v = rebuild(x, &f->memo);
    ok = v && umap_put(&f->memo, x, v);
  }
  free(order);
  return ok ? umap_get(&f->memo, u) : NULL;
}

/* A hit binds every node reference of the entry's schedule: most are a leaf's stand-in (the query's leaf of
 * that number) or a stored value (itself); only the rest (a window write's target view) are rebuilt over the
 * leaves by bind_of. The codes say which, one per reference in the order copy_schedule and copy_roots visit
 * them, so a hit reads none of the canonical nodes it copies (they are rarely in the cache by then: a step's
 * kernels ran in between) */
#define CODE_SELF (-1)
#define CODE_BIND (-2)

static int32_t code_of(const uop_map *stored, uop *c) {
  if (is_standin(c)) return (int32_t)c->arg.i;
  return umap_get(stored, c) ? CODE_SELF : CODE_BIND;
}

/* e->codes for e->s; false when out of memory */
static bool bind_codes(entry *e) {
  const schedule *s = &e->s;
  int nroots = e->key->nsrc / 2;
  size_t n = (size_t)s->nrealized + (size_t)nroots + 1;
  for (int k = 0; k < s->nkernels; k++) n += (size_t)s->kernels[k].nbufs + 1 + (s->kernels[k].window_into != NULL);
  uop_map stored = {0};
  bool ok = (e->codes = mem_alloc(n * sizeof *e->codes)) != NULL;
  for (int r = 0; r < s->nrealized && ok; r++) ok = umap_put(&stored, s->realized[r], s->realized[r]);
  int at = 0;
  for (int k = 0; k < s->nkernels && ok; k++) {
    const sched_kernel *sk = &s->kernels[k];
    for (int j = 0; j < sk->nbufs; j++) e->codes[at++] = code_of(&stored, sk->bufs[j]);
    e->codes[at++] = code_of(&stored, sk->output);
    if (sk->window_into) e->codes[at++] = code_of(&stored, sk->window_into);
  }
  for (int r = 0; r < s->nrealized && ok; r++) e->codes[at++] = CODE_SELF;
  for (int i = 0; i < nroots && ok; i++) e->codes[at++] = code_of(&stored, s->roots[i]);
  umap_free(&stored);
  return ok;
}

/* a node_fn for copy_schedule and copy_roots: the next reference bound by its code; the memo is seeded with
 * the stored values the first time one needs bind_of */
typedef struct by_code { from_canon f; const entry *e; const int32_t *next; bool seeded; } by_code;

static uop *bind_next(void *ctx, uop *c) {
  by_code *b = ctx;
  int32_t code = *b->next++;
  if (code >= 0) return code < b->f.q->nleaves ? b->f.q->leaves[code] : NULL;
  if (code == CODE_SELF) return c;
  if (!b->seeded) {
    for (int r = 0; r < b->e->s.nrealized; r++)
      if (!umap_put(&b->f.memo, b->e->s.realized[r], b->e->s.realized[r])) return NULL;
    b->seeded = true;
  }
  return bind_of(&b->f, c);
}

/* the entry made for a graph of q's structure, or -1 */
static int find(const sched_query *q) {
  for (int i = 0; i < nentries; i++)
    if (matches(&entries[i], q)) return i;
  return -1;
}

bool sched_cache_get(const sched_query *q, schedule *s, tg_status *st) {
  memset(s, 0, sizeof *s);
  *st = TG_OK;
  if (narrow_at_fill != lower_narrow_indices) sched_cache_clear();  /* kernels are lowered otherwise */
  int i = q->nnodes ? find(q) : -1;
  if (i < 0) return false;
  entry *e = &entries[i];
  /* stored values stay canonical: keys of the buffers the realize makes */
  by_code b = {{q, {0}}, e, e->codes, false};
  bool ok = copy_schedule(&e->s, s, bind_next, &b);
  if (ok && !copy_roots(&e->s, s, e->key->nsrc / 2, bind_next, &b)) {
    schedule_free(s);
    ok = false;
  }
  umap_free(&b.f.memo);
  if (!ok) {
    memset(s, 0, sizeof *s);
    *st = TG_ERR_NOMEM;
    if (tg_error_status() != TG_ERR_NOMEM) tg_set_error(TG_ERR_NOMEM, "tg_realize: out of memory");
    return false;
  }
  e->used = ++tick;
  return true;
}

static int by_tick(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* drops the least recently used quarter of the entries (at least one) */
static bool evict(void) {
  int drop = nentries / 4 + 1;
  uint64_t *t = mem_alloc(((size_t)nentries + 1) * sizeof *t);
  if (!t) return false;
  for (int i = 0; i < nentries; i++) t[i] = entries[i].used;
  qsort(t, (size_t)nentries, sizeof *t, by_tick);
  uint64_t cut = t[(drop < nentries ? drop : nentries) - 1];  /* ticks are distinct */
  free(t);
  int w = 0;
  for (int i = 0; i < nentries; i++) {
    if (entries[i].used <= cut) {
      cache_nodes -= entries[i].nodes;
      entry_free(&entries[i]);
    } else {
      entries[w++] = entries[i];
    }
  }
  nentries = w;
  return true;
}

tg_status sched_cache_put(sched_query *q, const schedule *s) {
  if (!q->nnodes || find(q) >= 0) return TG_OK;
  if (!q->key && !canonicalize(q)) return TG_ERR_NOMEM;
  if (nentries && narrow_at_fill != lower_narrow_indices) sched_cache_clear();
  narrow_at_fill = lower_narrow_indices;
  if (!rooted) {
    if (!uop_gc_add_weak_roots(mark_entries, NULL)) return TG_ERR_NOMEM;
    rooted = true;
  }
  int64_t nodes = (int64_t)q->canon.n;
  while (nentries && (nentries >= CACHE_MAX || cache_nodes + nodes > CACHE_NODES))
    if (!evict()) return TG_ERR_NOMEM;
  if (nentries == cap_entries) {
    int nc = cap_entries ? cap_entries * 2 : 16;
    entry *ne = mem_realloc(entries, (size_t)nc * sizeof *ne);
    if (!ne) return TG_ERR_NOMEM;
    entries = ne;
    cap_entries = nc;
  }
  to_canon t = {q, false, false};
  entry e = {.key = q->key, .hash = q->hash, .nnodes = q->nnodes, .nodes = nodes, .used = ++tick};
  if (!(e.sig = mem_alloc((q->nsig + 1) * sizeof *e.sig))) return TG_ERR_NOMEM;
  memcpy(e.sig, q->sig, q->nsig * sizeof *e.sig);
  e.nsig = q->nsig;
  int nroots = q->key->nsrc / 2;
  if (!copy_schedule(s, &e.s, canon_of, &t) || !copy_roots(s, &e.s, nroots, canon_of, &t)) {
    entry_free(&e);
    return t.foreign ? TG_OK : TG_ERR_NOMEM;
  }
  if (!bind_codes(&e)) {
    entry_free(&e);
    return TG_ERR_NOMEM;
  }
  entries[nentries++] = e;
  cache_nodes += nodes;
  return TG_OK;
}

tg_status schedule_cached(int n, uop *const *outs, uop *const *targets, schedule *s, bool *cached) {
  *cached = false;
  if (!n) return schedule_create_assign(n, outs, targets, s);
  sched_query q;
  tg_status st = sched_cache_query(n, outs, targets, &q);
  if (st != TG_OK) return st;
  *cached = sched_cache_get(&q, s, &st);
  if (!*cached && st == TG_OK) {
    st = schedule_create_assign(n, outs, targets, s);
    if (st == TG_OK && (st = sched_cache_put(&q, s)) != TG_OK) schedule_free(s);
  }
  sched_query_free(&q);
  return st;
}
