/* uop.c — interned IR nodes: construction, the intern table, the collector, toposort and printing.
 *
 * A node is one allocation: the struct, then its sources, aux values and shape. Identity is
 * (op, dtype, src, arg, aux); the shape is derived (shape.c) and the value range is cached lazily.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

static const char *op_names[OP_COUNT] = {
    "BUFFER", "CONST", "RESHAPE", "PERMUTE", "EXPAND", "PAD", "SHRINK", "FLIP", "REDUCE_AXIS", "CONTIGUOUS", "DETACH", "CUSTOM_GRAD", "IOTA", "COPY", "MULTI",
    "PARAM", "RANGE", "LOAD", "STORE", "REDUCE", "SINK", "CORE_ID",
    "DEFINE_ACC", "ASSIGN", "ENDRANGE", "DEFINE_LOCAL",
    "CAST", "BITCAST", "EXP2", "LOG2", "SIN", "SQRT", "RECIP", "NEG", "TRUNC",
    "ADD", "MUL", "IDIV", "MOD", "FDIV", "MAX", "CMPLT", "CMPNE", "CMPEQ", "AND", "OR", "XOR", "SHL", "SHR", "POW",
    "WHERE",
};

const char *uop_op_name(uop_op op) { return op < OP_COUNT ? op_names[op] : "?"; }

int uop_op_from_name(const char *name, size_t len) {
  for (int i = 0; i < OP_COUNT; i++)
    if (strlen(op_names[i]) == len && !memcmp(op_names[i], name, len)) return i;
  return -1;
}

bool uop_is_alu(uop_op op) { return op >= OP_CAST && op <= OP_WHERE; }
int uop_arity(uop_op op) {
  if (op >= OP_CAST && op <= OP_TRUNC) return 1;
  if (op >= OP_ADD && op <= OP_POW) return 2;
  return op == OP_WHERE ? 3 : 0;
}
bool uop_is_commutative(uop_op op) {
  return op == OP_ADD || op == OP_MUL || op == OP_MAX || op == OP_CMPNE || op == OP_CMPEQ || op == OP_AND ||
         op == OP_OR || op == OP_XOR;
}

/* ---- the intern table --------------------------------------------------------------------------------- */

static struct {
  uop **slots;
  size_t cap, count, count_after_gc;
} table;

static void (*buf_release)(void *buf);
void uop_set_buf_release(void (*release)(void *buf)) { buf_release = release; }

uint64_t uop_hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

static uint64_t node_hash(uop_op op, tg_dtype dt, int nsrc, uop *const *src, uop_arg arg, int naux,
                          const int64_t *aux) {
  uint64_t h = uop_hash_mix(uop_hash_mix(uop_hash_mix(0x1234, (uint64_t)op), (uint64_t)dt), (uint64_t)arg.i);
  for (int i = 0; i < nsrc; i++) h = uop_hash_mix(h, src[i]->hash);
  h = uop_hash_mix(h, (uint64_t)naux);
  for (int i = 0; i < naux; i++) h = uop_hash_mix(h, (uint64_t)aux[i]);
  return h;
}

static bool node_equal(const uop *u, uop_op op, tg_dtype dt, int nsrc, uop *const *src, uop_arg arg, int naux,
                       const int64_t *aux) {
  if (u->op != op || u->dtype != dt || u->nsrc != nsrc || u->naux != naux || u->arg.i != arg.i) return false;
  for (int i = 0; i < nsrc; i++)
    if (u->src[i] != src[i]) return false;
  for (int i = 0; i < naux; i++)
    if (u->aux[i] != aux[i]) return false;
  return true;
}

static bool table_grow(void) {
  size_t ncap = table.cap ? table.cap * 2 : 4096;
  uop **ns = mem_calloc(ncap, sizeof *ns);
  if (!ns) return false;
  for (size_t i = 0; i < table.cap; i++)
    for (uop *u = table.slots[i], *nx; u; u = nx) {
      nx = u->next;
      size_t b = u->hash & (ncap - 1);
      u->next = ns[b];
      ns[b] = u;
    }
  free(table.slots);
  table.slots = ns;
  table.cap = ncap;
  return true;
}

static size_t node_size(int nsrc, int naux, int ndim) {
  return sizeof(uop) + (size_t)nsrc * sizeof(uop *) + (size_t)(naux + ndim) * sizeof(int64_t);
}

uop *uop_new_shaped(uop_op op, tg_dtype dt, int nsrc, uop *const *src, uop_arg arg, int naux,
                    const int64_t *aux, int ndim, const int64_t *shape) {
  for (int i = 0; i < nsrc; i++)
    if (!src[i]) return NULL;
  /* see shape.c: no shape overflows (checked for every node, found or new: an equal node has this shape) */
  if (ndim && !shape_check(uop_op_name(op), ndim, shape)) return NULL;
  uint64_t h = node_hash(op, dt, nsrc, src, arg, naux, aux);
  lib_lock();
  uop *u = NULL;
  if (table.cap) {
    for (u = table.slots[h & (table.cap - 1)]; u; u = u->next)
      if (u->hash == h && node_equal(u, op, dt, nsrc, src, arg, naux, aux)) goto found;
  }
  if (table.count + 1 > table.cap / 2 && !table_grow()) goto nomem;
  u = node_alloc(node_size(nsrc, naux, ndim));
  if (!u) goto nomem;
  u->op = (uint16_t)op;
  u->dtype = (uint8_t)dt;
  u->nsrc = nsrc;
  u->naux = naux;
  u->ndim = ndim;
  u->src = (uop **)(u + 1);
  u->aux = (int64_t *)(u->src + nsrc);
  u->shape = u->aux + naux;
  if (nsrc) memcpy(u->src, src, (size_t)nsrc * sizeof *src);
  if (naux) memcpy(u->aux, aux, (size_t)naux * sizeof *aux);
  if (ndim) memcpy(u->shape, shape, (size_t)ndim * sizeof *shape);
  u->arg = arg;
  u->hash = h;
  size_t b = h & (table.cap - 1);
  u->next = table.slots[b];
  table.slots[b] = u;
  table.count++;
found:
  uop_pin(u);  /* no other thread's collection frees it while this one builds on it */
  lib_unlock();
  return u;
nomem:
  lib_unlock();
  tg_set_error(TG_ERR_NOMEM, "out of memory building an IR node (%s)", uop_op_name(op));
  return NULL;
}

uop *uop_new(uop_op op, tg_dtype dt, int nsrc, uop *const *src, uop_arg arg, int naux, const int64_t *aux) {
  return uop_new_shaped(op, dt, nsrc, src, arg, naux, aux, 0, NULL);
}

uop *uop_replace_src(uop *u, int nsrc, uop *const *src) {
  if (nsrc == u->nsrc) {
    int i = 0;
    while (i < nsrc && src[i] == u->src[i]) i++;
    if (i == nsrc) return u;
  }
  return uop_new_shaped((uop_op)u->op, (tg_dtype)u->dtype, nsrc, src, u->arg, u->naux, u->aux, u->ndim, u->shape);
}

/* ---- constants and ALU --------------------------------------------------------------------------------- */

uop *uop_const(tg_dtype dt, double v) {
  uop_arg a;
  if (dtype_is_float(dt)) a.f = dtype_cast_value(dt, v);
  else a.i = (int64_t)dtype_cast_value(dt, v);
  return uop_new(OP_CONST, dt, 0, NULL, a, 0, NULL);
}

/* an integer constant holds its dtype's value: v wraps as the type does (a sum of uint8 constants 200 + 200 is
 * 144, and a cast of it must read 144, not 400) */
uop *uop_const_int(tg_dtype dt, int64_t v) {
  if (dtype_is_float(dt)) return uop_const(dt, (double)v);
  uop_arg a = {.i = v};
  switch (dt) {
    case TG_BOOL: a.i = v != 0; break;
    case TG_INT8: a.i = (int8_t)(uint8_t)v; break;
    case TG_INT16: a.i = (int16_t)(uint16_t)v; break;
    case TG_INT32: a.i = (int32_t)(uint32_t)v; break;
    case TG_UINT8: a.i = (uint8_t)v; break;
    case TG_UINT16: a.i = (uint16_t)v; break;
    case TG_UINT32: a.i = (uint32_t)v; break;
    default: break;
  }
  return uop_new(OP_CONST, dt, 0, NULL, a, 0, NULL);
}

bool uop_is_const(const uop *u) { return u && u->op == OP_CONST; }

double uop_const_value(const uop *u) {
  if (dtype_is_float((tg_dtype)u->dtype)) return u->arg.f;
  if (u->dtype == TG_UINT64) return (double)(uint64_t)u->arg.i;
  return (double)u->arg.i;
}

uop *uop_alu(uop_op op, tg_dtype dt, int nsrc, uop *const *src) {
  return uop_new(op, dt, nsrc, src, (uop_arg){0}, 0, NULL);
}

uop *uop_unary(uop_op op, uop *a) { return a ? uop_alu(op, (tg_dtype)a->dtype, 1, &a) : NULL; }

uop *uop_binary(uop_op op, uop *a, uop *b) {
  if (!a || !b) return NULL;
  uop *s[2] = {a, b};
  bool cmp = op == OP_CMPLT || op == OP_CMPNE || op == OP_CMPEQ;
  return uop_alu(op, cmp ? TG_BOOL : (tg_dtype)a->dtype, 2, s);
}

uop *uop_where(uop *c, uop *a, uop *b) {
  if (!c || !a || !b) return NULL;
  uop *s[3] = {c, a, b};
  return uop_alu(OP_WHERE, (tg_dtype)a->dtype, 3, s);
}

uop *uop_cast(uop *a, tg_dtype dt) {
  if (!a) return NULL;
  if (a->dtype == dt) return a;
  return uop_alu(OP_CAST, dt, 1, &a);
}

int64_t uop_numel(const uop *u) {
  int64_t n = 1;
  for (int i = 0; i < u->ndim; i++) n *= u->shape[i];
  return n;
}

/* ---- the collector ------------------------------------------------------------------------------------- */

/* bytes of storage made since the last collection: dead tensors' buffers are only freed by a collection,
 * so big buffers trigger one long before the node count would. Until then every new buffer is fresh memory
 * that page-faults when a kernel first writes it, while the dead ones wait (a loop making a 3 MB result
 * spent 69% of its time zeroing new pages). A sweep costs about 0.1 µs a node and a fresh page 0.1-3 ns a
 * byte, so a collection also runs once the bytes made outweigh the nodes to sweep; the freed blocks go to
 * the allocator's cache and the next step reuses them. */
static size_t bytes_since_gc;
#define GC_BYTES (256u << 20)
#define GC_MIN_BYTES (1u << 20)
#define GC_BYTES_PER_NODE 2048
/* fewer nodes never start a collection. Small enough that the intern table and the nodes of an eager
 * loop's last few steps stay in the cache: stories260K's eager decoding (611 new nodes a step) at 20000 ran
 * 0.33-0.37 ms a token, at 8192 0.30-0.31 (4096: 0.30-0.31, the collections' share up from 21 to 31 us) */
#define GC_MIN_NODES 8192

typedef struct root_entry { uop_root_fn fn; void *ctx; bool weak; } root_entry;
static root_entry *roots;
static int nroots, roots_cap;

static bool add_roots(uop_root_fn fn, void *ctx, bool weak) {
  lib_lock();
  bool ok = true;
  int i = 0;
  while (i < nroots && !(roots[i].fn == fn && roots[i].ctx == ctx)) i++;
  if (i == nroots && nroots == roots_cap) {  /* one per live JIT capture, so no fixed bound */
    int nc = roots_cap ? roots_cap * 2 : 16;
    root_entry *nr = mem_realloc(roots, (size_t)nc * sizeof *nr);
    if (nr) {
      roots = nr;
      roots_cap = nc;
    }
    ok = nr != NULL;
  }
  if (ok && i == nroots) roots[nroots++] = (root_entry){fn, ctx, weak};
  lib_unlock();
  return ok;
}

bool uop_gc_add_roots(uop_root_fn fn, void *ctx) { return add_roots(fn, ctx, false); }
bool uop_gc_add_weak_roots(uop_root_fn fn, void *ctx) { return add_roots(fn, ctx, true); }

void uop_gc_remove_roots(uop_root_fn fn, void *ctx) {
  lib_lock();
  for (int i = 0; i < nroots; i++)
    if (roots[i].fn == fn && roots[i].ctx == ctx) roots[i--] = roots[--nroots];
  lib_unlock();
}

/* marks iteratively: graphs can be deeper than the C stack */
static uop **mark_stack;
static size_t mark_n, mark_cap;
static bool marking_weak;  /* the weak roots' turn: what they alone reach loses its cached value */
static bool mark_lost;     /* a node was marked without its sources (no memory for the stack): sweep nothing */

void uop_mark(uop *u) {
  if (!u || u->mark) return;
  u->mark = 1;
  if (marking_weak && u->buf && u->op != OP_BUFFER) {
    if (buf_release) buf_release(u->buf);
    u->buf = NULL;
  }
  if (mark_n == mark_cap) {
    size_t nc = mark_cap ? mark_cap * 2 : 1024;
    uop **ns = mem_realloc(mark_stack, nc * sizeof *ns);
    if (!ns) {  /* 2: marked but its sources not visited; nothing is swept this time */
      u->mark = 2;
      mark_lost = true;
      return;
    }
    mark_stack = ns;
    mark_cap = nc;
  }
  mark_stack[mark_n++] = u;
}

static void mark_drain(void) {
  while (mark_n) {
    uop *u = mark_stack[--mark_n];
    for (int i = 0; i < u->nsrc; i++) uop_mark(u->src[i]);
  }
}

static uint32_t cache_epoch, scratch_stamp;

uint32_t uop_scratch_stamp(void) {
  if (++scratch_stamp == 0) {  /* wrapped: no node may keep a stamp that comes round again */
    for (size_t b = 0; b < table.cap; b++)
      for (uop *u = table.slots[b]; u; u = u->next) u->scratch_stamp = 0;
    scratch_stamp = 1;
  }
  return scratch_stamp;
}

void *uop_storage(uop *u) {
  if (u->buf && u->op != OP_BUFFER && u->epoch != cache_epoch) {
    if (buf_release) buf_release(u->buf);
    u->buf = NULL;
  }
  return u->buf;
}

void uop_set_realized(uop *u, void *buf) {
  u->buf = buf;
  u->epoch = cache_epoch;
}

void uop_cache_invalidate(void) { cache_epoch++; }

static void free_node(uop *u) {
  if (u->buf && buf_release) buf_release(u->buf);
  node_free(u, node_size(u->nsrc, u->naux, u->ndim));
}

size_t uop_gc(void) {
  lib_lock();
  pins_release_own();
  mark_lost = false;
  for (int i = 0; i < nroots; i++) {
    if (roots[i].weak) continue;
    roots[i].fn(roots[i].ctx);
    mark_drain();
  }
  bool lost_marks = pins_mark_others();
  mark_drain();
  marking_weak = true;  /* last: a node any strong root or live tensor reaches is marked already */
  for (int i = 0; i < nroots; i++) {
    if (!roots[i].weak) continue;
    roots[i].fn(roots[i].ctx);
    mark_drain();
  }
  marking_weak = false;
  lost_marks |= mark_lost;
  size_t freed = 0;
  for (size_t b = 0; b < table.cap; b++) {
    uop **pp = &table.slots[b];
    while (*pp) {
      uop *u = *pp;
      if (u->mark || lost_marks) { /* out of memory while marking: free nothing this time */
        u->mark = 0;
        uop_storage(u);  /* a value a write made stale lets go of its buffer now */
        pp = &u->next;
      } else {
        *pp = u->next;
        free_node(u);
        freed++;
      }
    }
  }
  table.count -= freed;
  table.count_after_gc = table.count;
  bytes_since_gc = 0;
  free(mark_stack);
  mark_stack = NULL;
  mark_n = mark_cap = 0;
  lib_unlock();
  return freed;
}

void uop_gc_note_bytes(size_t n) {
  lib_lock();
  bytes_since_gc += n;
  lib_unlock();
}

size_t uop_gc_maybe(void) {
  lib_lock();
  pins_release_own();
  bool nodes = table.count >= GC_MIN_NODES && table.count >= 2 * table.count_after_gc;
  bool bytes = bytes_since_gc >= GC_BYTES ||
               (bytes_since_gc >= GC_MIN_BYTES && bytes_since_gc / GC_BYTES_PER_NODE >= table.count);
  size_t freed = nodes || bytes ? uop_gc() : 0;
  lib_unlock();
  return freed;
}

size_t uop_live_count(void) {
  lib_lock();
  size_t n = table.count;
  lib_unlock();
  return n;
}

void uop_shutdown(void) {
  lib_lock();
  for (size_t b = 0; b < table.cap; b++)
    for (uop *u = table.slots[b], *nx; u; u = nx) {
      nx = u->next;
      free_node(u);
    }
  free(table.slots);
  table.slots = NULL;
  table.cap = table.count = table.count_after_gc = 0;
  node_pool_release();
  lib_unlock();
}

/* ---- toposort and printing ----------------------------------------------------------------------------- */

typedef struct visit_set { uop **keys; size_t cap, n; } visit_set;

static int vs_add(visit_set *s, uop *u) {  /* 1 if newly added, 0 if there already, -1 out of memory */
  if ((s->n + 1) * 2 > s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 256;
    uop **nk = mem_calloc(nc, sizeof *nk);
    if (!nk) return -1;
    for (size_t i = 0; i < s->cap; i++)
      if (s->keys[i]) {
        size_t j = s->keys[i]->hash & (nc - 1);
        while (nk[j]) j = (j + 1) & (nc - 1);
        nk[j] = s->keys[i];
      }
    free(s->keys);
    s->keys = nk;
    s->cap = nc;
  }
  size_t j = u->hash & (s->cap - 1);
  while (s->keys[j]) {
    if (s->keys[j] == u) return 0;
    j = (j + 1) & (s->cap - 1);
  }
  s->keys[j] = u;
  s->n++;
  return 1;
}

uop **uop_toposort(uop *root, int *n) { return uop_toposort_filtered(root, NULL, NULL, n); }

uop **uop_toposort_filtered(uop *root, bool (*enter)(uop *u, void *ctx), void *ctx, int *n) {
  *n = 0;
  if (!root) return NULL;
  visit_set seen = {0};
  size_t cap = 64, cnt = 0, sp = 0, scap = 64;
  uop **out = mem_alloc(cap * sizeof *out);
  struct frame { uop *u; int i; } *stack = mem_alloc(scap * sizeof *stack);
  if (!out || !stack) goto fail;
  if (vs_add(&seen, root) < 0) goto fail;
  stack[sp++] = (struct frame){root, 0};
  while (sp) {
    struct frame *f = &stack[sp - 1];
    if (f->i == 0 && enter && !enter(f->u, ctx)) f->i = f->u->nsrc;  /* a leaf for this walk */
    if (f->i < f->u->nsrc) {
      uop *c = f->u->src[f->i++];
      int added = vs_add(&seen, c);
      if (added < 0) goto fail;
      if (added) {
        if (sp == scap) {
          void *ns = mem_realloc(stack, (scap *= 2) * sizeof *stack);
          if (!ns) goto fail;
          stack = ns;
        }
        stack[sp++] = (struct frame){c, 0};
      }
    } else {
      if (cnt == cap) {
        void *no = mem_realloc(out, (cap *= 2) * sizeof *out);
        if (!no) goto fail;
        out = no;
      }
      out[cnt++] = f->u;
      sp--;
    }
  }
  free(stack);
  free(seen.keys);
  *n = (int)cnt;
  return out;
fail:
  free(out);
  free(stack);
  free(seen.keys);
  tg_set_error(TG_ERR_NOMEM, "out of memory sorting an IR graph");
  return NULL;
}

typedef struct strbuf { char *s; size_t n, cap; bool oom; } strbuf;
static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void sb_printf(strbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if (b->s && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
    size_t nc = (b->cap + (size_t)k + 1) * 2;
    char *ns = mem_realloc(b->s, nc);
    if (!ns) { b->oom = true; return; }
    b->s = ns;
    b->cap = nc;
  }
}

char *uop_to_string(uop *root) {
  int n;
  uop **order = uop_toposort(root, &n);
  if (!order) return NULL;
  strbuf b = {0};
  for (int i = 0; i < n; i++) {
    uop *u = order[i];
    sb_printf(&b, "%4d %-11s %-8s [", i, uop_op_name((uop_op)u->op), tg_dtype_name((tg_dtype)u->dtype));
    for (int s = 0; s < u->nsrc; s++) {
      int k = 0;
      while (order[k] != u->src[s]) k++;
      sb_printf(&b, "%s%d", s ? ", " : "", k);
    }
    sb_printf(&b, "]");
    if (u->op == OP_CONST) sb_printf(&b, " %.9g", uop_const_value(u));
    else if (u->arg.i) sb_printf(&b, " arg=%lld", (long long)u->arg.i);
    if (u->naux) {
      sb_printf(&b, " aux=(");
      for (int a = 0; a < u->naux; a++) sb_printf(&b, "%s%lld", a ? "," : "", (long long)u->aux[a]);
      sb_printf(&b, ")");
    }
    if (u->ndim) {
      char sh[256];
      sb_printf(&b, " shape=%s", shape_str(sh, sizeof sh, u->ndim, u->shape));
    }
    sb_printf(&b, "\n");
  }
  free(order);
  if (b.oom) { free(b.s); return NULL; }
  return b.s;
}
