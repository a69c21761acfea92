/* rewrite.c — the pattern matcher and the graph rewrite engine: every pass of tgc is a rule table
 * (pattern -> function returning a replacement or NULL) handed to graph_rewrite().
 *
 * Patterns are written as s-expressions (see uop.h) and compiled once into small trees; rules are indexed
 * by the op at their root so a node only tries the rules that could match it.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

/* ---- uop_map -------------------------------------------------------------------------------------- */

void *umap_get(const uop_map *m, const uop *k) {
  if (!m->cap) return NULL;
  size_t j = k->hash & (m->cap - 1);
  while (m->keys[j]) {
    if (m->keys[j] == k) return m->vals[j];
    j = (j + 1) & (m->cap - 1);
  }
  return NULL;
}

bool umap_put(uop_map *m, uop *k, void *v) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 64;
    uop **nk = mem_calloc(nc, sizeof *nk);
    void **nv = mem_calloc(nc, sizeof *nv);
    if (!nk || !nv) { free(nk); free(nv); return false; }
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        size_t j = m->keys[i]->hash & (nc - 1);
        while (nk[j]) j = (j + 1) & (nc - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
      }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = nc;
  }
  size_t j = k->hash & (m->cap - 1);
  while (m->keys[j] && m->keys[j] != k) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) m->n++;
  m->keys[j] = k;
  m->vals[j] = v;
  return true;
}

void umap_free(uop_map *m) {
  free(m->keys);
  free(m->vals);
  *m = (uop_map){0};
}

uint64_t loops_free(loop_sets *ls, uop *u) {
  uint64_t *box = umap_get(&ls->memo, u);
  if (box) return *box;
  uint64_t d = 0;
  if (u->op == OP_RANGE && u->arg.i < 64) d = 1ULL << u->arg.i;
  for (int i = 0; i < u->nsrc; i++) d |= loops_free(ls, u->src[i]);
  if (u->op == OP_REDUCE)
    for (int i = 1; i < u->nsrc; i++)
      if (u->src[i]->op == OP_RANGE && u->src[i]->arg.i < 64) d &= ~(1ULL << u->src[i]->arg.i);
  box = mem_alloc(sizeof *box);
  if (!box || !umap_put(&ls->memo, u, box)) { free(box); ls->fail = true; return d; }
  *box = d;
  return d;
}

void loop_sets_free(loop_sets *ls) {
  for (size_t i = 0; i < ls->memo.cap; i++)
    if (ls->memo.keys[i]) free(ls->memo.vals[i]);
  umap_free(&ls->memo);
}

/* ---- patterns ------------------------------------------------------------------------------------- */

typedef struct pat pat;
struct pat {
  uint64_t ops;       /* allowed ops as a bit set; 0: any */
  int cap;            /* capture slot, -1 if none */
  int nsrc;           /* -1: sources not constrained */
  bool more;          /* a trailing ... */
  bool is_value;      /* a numeric literal: a CONST of this value */
  double value;
  pat **src;
};

struct matcher {
  int nrules;
  pat **roots;
  rule_fn *fns;
  int *by_op[OP_COUNT + 1];  /* rule indices per root op, -1 terminated; [OP_COUNT]: rules for any op */
  int ncaps[256];
};

typedef struct parser {
  const char *s;
  const char *names[RW_MAX_CAPTURES];
  size_t name_len[RW_MAX_CAPTURES];
  int nnames;
  bool err;
} parser;

static void skip_ws(parser *p) { while (isspace((unsigned char)*p->s)) p->s++; }

static pat *pat_alloc(void) {
  pat *q = mem_calloc(1, sizeof *q);
  if (q) { q->cap = -1; q->nsrc = -1; }
  return q;
}

static void pat_free(pat *q) {
  if (!q) return;
  for (int i = 0; i < q->nsrc; i++) pat_free(q->src[i]);
  free(q->src);
  free(q);
}

static int capture_slot(parser *p, const char *name, size_t len) {
  for (int i = 0; i < p->nnames; i++)
    if (p->name_len[i] == len && !memcmp(p->names[i], name, len)) return i;
  if (p->nnames == RW_MAX_CAPTURES) { p->err = true; return -1; }
  p->names[p->nnames] = name;
  p->name_len[p->nnames] = len;
  return p->nnames++;
}

static uint64_t parse_ops(parser *p) {  /* OP1|OP2 */
  uint64_t ops = 0;
  for (;;) {
    const char *st = p->s;
    while (isupper((unsigned char)*p->s) || isdigit((unsigned char)*p->s) || *p->s == '_') p->s++;
    int op = uop_op_from_name(st, (size_t)(p->s - st));
    if (op < 0) { p->err = true; return 0; }
    ops |= 1ULL << op;
    if (*p->s != '|') return ops;
    p->s++;
  }
}

static pat *parse(parser *p);

static pat *parse_paren(parser *p, pat *q) {  /* after '(': OPS src... ) */
  skip_ws(p);
  q->ops = parse_ops(p);
  int cap = 4;
  q->src = mem_alloc((size_t)cap * sizeof *q->src);
  q->nsrc = 0;
  if (!q->src) { p->err = true; return q; }
  for (;;) {
    skip_ws(p);
    if (*p->s == ')') { p->s++; return q; }
    if (!*p->s) { p->err = true; return q; }
    if (!strncmp(p->s, "...", 3)) { p->s += 3; q->more = true; continue; }
    if (q->nsrc == cap) {
      pat **ns = mem_realloc(q->src, (size_t)(cap *= 2) * sizeof *ns);
      if (!ns) { p->err = true; return q; }
      q->src = ns;
    }
    pat *c = parse(p);
    if (!c) { p->err = true; return q; }
    q->src[q->nsrc++] = c;
    if (p->err) return q;
  }
}

static pat *parse(parser *p) {
  skip_ws(p);
  pat *q = pat_alloc();
  if (!q) { p->err = true; return NULL; }
  char c = *p->s;
  if (c == '(') {
    p->s++;
    return parse_paren(p, q);
  }
  if (isdigit((unsigned char)c) || c == '-' || c == '.') {
    char *end;
    q->value = strtod(p->s, &end);
    if (end == p->s) p->err = true;
    p->s = end;
    q->is_value = true;
    q->ops = 1ULL << OP_CONST;
    q->nsrc = 0;
    return q;
  }
  if (c == '_') { p->s++; return q; }
  if (isupper((unsigned char)c)) { q->ops = parse_ops(p); return q; }
  if (islower((unsigned char)c)) {
    const char *st = p->s;
    while (isalnum((unsigned char)*p->s) || *p->s == '_') p->s++;
    q->cap = capture_slot(p, st, (size_t)(p->s - st));
    if (*p->s == ':') {
      p->s++;
      if (*p->s == '(') { p->s++; return parse_paren(p, q); }
      q->ops = parse_ops(p);
    }
    return q;
  }
  p->err = true;
  return q;
}

matcher *matcher_new(const rule *rules) {
  matcher *m = mem_calloc(1, sizeof *m);
  if (!m) return NULL;
  while (rules[m->nrules].pattern) m->nrules++;
  m->roots = mem_calloc((size_t)m->nrules + 1, sizeof *m->roots);
  m->fns = mem_calloc((size_t)m->nrules + 1, sizeof *m->fns);
  if (!m->roots || !m->fns) goto fail;
  for (int i = 0; i < m->nrules; i++) {
    parser p = {.s = rules[i].pattern};
    m->roots[i] = parse(&p);
    skip_ws(&p);
    if (p.err || *p.s || !m->roots[i]) {
      tg_set_error(TG_ERR_INTERNAL, "rewrite: bad pattern \"%s\" near \"%s\"", rules[i].pattern, p.s);
      goto fail;
    }
    m->fns[i] = rules[i].fn;
  }
  for (int op = 0; op <= OP_COUNT; op++) {
    int cnt = 0;
    m->by_op[op] = mem_alloc(((size_t)m->nrules + 1) * sizeof(int));
    if (!m->by_op[op]) goto fail;
    for (int i = 0; i < m->nrules; i++) {
      uint64_t ops = m->roots[i]->ops;
      if (op == OP_COUNT ? ops == 0 : (ops == 0 || (ops >> op & 1))) m->by_op[op][cnt++] = i;
    }
    m->by_op[op][cnt] = -1;
  }
  return m;
fail:
  matcher_free(m);
  return NULL;
}

void matcher_free(matcher *m) {
  if (!m) return;
  for (int i = 0; i < m->nrules && m->roots; i++) pat_free(m->roots[i]);
  for (int op = 0; op <= OP_COUNT; op++) free(m->by_op[op]);
  free(m->roots);
  free(m->fns);
  free(m);
}

static bool match(const pat *q, uop *u, uop **cap);

static bool match_srcs(const pat *q, uop *u, uop **cap, bool swap) {
  uop *saved[RW_MAX_CAPTURES];
  memcpy(saved, cap, sizeof saved);
  for (int i = 0; i < q->nsrc; i++) {
    int k = swap && i < 2 ? 1 - i : i;
    if (!match(q->src[i], u->src[k], cap)) {
      memcpy(cap, saved, sizeof saved);
      return false;
    }
  }
  return true;
}

static bool match(const pat *q, uop *u, uop **cap) {
  if (q->ops && !(q->ops >> u->op & 1)) return false;
  if (q->is_value && uop_const_value(u) != q->value) return false;
  if (q->nsrc >= 0 && !q->is_value) {
    if (q->more ? u->nsrc < q->nsrc : u->nsrc != q->nsrc) return false;
  }
  if (q->cap >= 0) {
    if (cap[q->cap] && cap[q->cap] != u) return false;
  }
  uop *prev = q->cap >= 0 ? cap[q->cap] : NULL;
  if (q->cap >= 0) cap[q->cap] = u;
  if (q->nsrc > 0 && !q->is_value) {
    bool ok = match_srcs(q, u, cap, false);
    if (!ok && q->nsrc == 2 && u->nsrc == 2 && uop_is_commutative((uop_op)u->op)) ok = match_srcs(q, u, cap, true);
    if (!ok) {
      if (q->cap >= 0) cap[q->cap] = prev;
      return false;
    }
  }
  return true;
}

uop *matcher_apply(const matcher *m, void *ctx, uop *u) {
  for (int pass = 0; pass < 2; pass++) {
    const int *list = m->by_op[pass ? OP_COUNT : u->op];
    for (int k = 0; list[k] >= 0; k++) {
      int i = list[k];
      if (!pass && m->roots[i]->ops == 0) continue; /* any-op rules run in the second pass */
      uop *cap[RW_MAX_CAPTURES] = {0};
      if (!match(m->roots[i], u, cap)) continue;
      uop *r = m->fns[i](ctx, u, cap);
      if (r && r != u) return r;
    }
  }
  return NULL;
}

/* ---- graph_rewrite -------------------------------------------------------------------------------- */

typedef struct frame { uop *n, *n2, *waiting; int stage; } frame;

#define REWRITE_STEP_LIMIT 50000000

uop *graph_rewrite(uop *root, const matcher *m, void *ctx, bool bottom_up) {
  if (!root) return NULL;
  uint64_t failed0 = mem_failures();  /* a rule that ran out of memory returns NULL, as one that does not apply */
  uop_map memo = {0};
  size_t sp = 0, scap = 256, steps = 0;
  frame *st = mem_alloc(scap * sizeof *st);
  uop **tmp = NULL;
  int tmpcap = 0;
  uop *result = NULL;
  if (!st) goto nomem;
  st[sp++] = (frame){root, NULL, NULL, 0};
  while (sp) {
    if (++steps > REWRITE_STEP_LIMIT) {
      tg_set_error(TG_ERR_INTERNAL, "rewrite: no fixed point after %d steps (rules loop)", REWRITE_STEP_LIMIT);
      goto out;
    }
    frame *f = &st[sp - 1];
    if (f->stage == 0) {
      if (umap_get(&memo, f->n)) { sp--; continue; }
      uop *n = f->n;
      if (bottom_up) {  /* rules first, to a fixed point, then the sources of what is left */
        for (int it = 0;; it++) {
          uop *r = matcher_apply(m, ctx, n);
          if (!r) break;
          n = r;
          if (it > 10000) { tg_set_error(TG_ERR_INTERNAL, "rewrite: bottom-up rules loop"); goto out; }
        }
      }
      f->n2 = n;
      f->stage = 1;
      for (int i = n->nsrc - 1; i >= 0; i--) {
        if (umap_get(&memo, n->src[i])) continue;
        if (sp == scap) {
          frame *ns = mem_realloc(st, (scap *= 2) * sizeof *st);
          if (!ns) goto nomem;
          st = ns;
        }
        st[sp++] = (frame){n->src[i], NULL, NULL, 0};
      }
      continue;
    }
    if (f->stage == 1) {
      uop *n = f->n2;
      if (n->nsrc > tmpcap) {
        uop **nt = mem_realloc(tmp, (size_t)(tmpcap = n->nsrc * 2) * sizeof *nt);
        if (!nt) goto nomem;
        tmp = nt;
      }
      for (int i = 0; i < n->nsrc; i++) tmp[i] = umap_get(&memo, n->src[i]);
      uop *rebuilt = uop_replace_src(n, n->nsrc, tmp);
      if (!rebuilt) goto out;
      uop *r = bottom_up ? NULL : matcher_apply(m, ctx, rebuilt);
      if (!r) {
        if (!umap_put(&memo, f->n, rebuilt) || !umap_put(&memo, rebuilt, rebuilt)) goto nomem;
        sp--;
        continue;
      }
      uop *done = umap_get(&memo, r);
      if (done) {
        if (!umap_put(&memo, f->n, done)) goto nomem;
        sp--;
        continue;
      }
      f->waiting = r;
      f->stage = 2;
      if (sp == scap) {
        frame *ns = mem_realloc(st, (scap *= 2) * sizeof *st);
        if (!ns) goto nomem;
        st = ns;
      }
      st[sp++] = (frame){r, NULL, NULL, 0};
      continue;
    }
    /* stage 2: the replacement has been rewritten */
    uop *done = umap_get(&memo, f->waiting);
    if (!done || !umap_put(&memo, f->n, done)) goto nomem;
    sp--;
  }
  result = umap_get(&memo, root);
  if (mem_failures() == failed0) goto out;
  result = NULL;
nomem:
  tg_set_error(TG_ERR_NOMEM, "out of memory in a graph rewrite");
out:
  free(st);
  free(tmp);
  umap_free(&memo);
  return result;
}

/* ---- substitute ----------------------------------------------------------------------------------- */

typedef struct subst { uop *from, *to; } subst;
static uop *rule_subst(void *ctx, uop *u, uop **cap) {
  subst *s = ctx;
  return u == s->from ? s->to : NULL;
}

uop *uop_substitute(uop *root, uop *from, uop *to) {
  static matcher *m;
  static const rule rules[] = {{"_", rule_subst}, {NULL, NULL}};
  if (!m && !(m = matcher_new(rules))) return NULL;
  subst s = {from, to};
  return graph_rewrite(root, m, &s, true);
}
