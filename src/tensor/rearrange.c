/* rearrange.c — tinygrad's rearrange (einops' formula language): "b c (h p) -> b (c p) h" names the axes of
 * the input on the left and says on the right how they are ordered and grouped. Parentheses on the left split an
 * axis into several (sizes from the caller's (name, size) pairs, one may be inferred), on the right they merge
 * axes into one; a lone "1" or "()" is an axis of size 1; "..." (or "…") stands for the axes not named. The
 * result is three views: one reshape to every named axis, a permute, one reshape to the grouping on the right. */
#include <stdio.h>
#include <string.h>

#include "tensor/compose.h"

#define MAX_NAMES TG_MAX_DIMS
#define ELL (-1)  /* the ellipsis in a side's name list */

typedef struct side {
  int n, ngroups;
  int name[MAX_NAMES];     /* index into names (the left side's order), or ELL */
  int group[MAX_NAMES][2]; /* [start, end) of each parenthesized group in name[] */
  const char *tok[MAX_NAMES];
  int len[MAX_NAMES];
} side;

static bool fail(const char *formula, const char *why) {
  tg_set_error(TG_ERR_ARG, "tg_rearrange: %s in \"%s\"", why, formula);
  return false;
}

static bool ident_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* splits [p, end) into tokens: names (ident or ELL, by text), groups */
static bool parse_side(const char *formula, const char *p, const char *end, side *sd) {
  memset(sd, 0, sizeof *sd);
  int open = -1;
  while (p < end) {
    char c = *p;
    if (c == ' ' || c == '\t' || c == '\n') { p++; continue; }
    if (c == '(' || c == ')') {
      if ((c == '(') != (open < 0)) return fail(formula, "mismatched or nested parentheses");
      if (c == '(') open = sd->n;
      else {
        if (sd->ngroups >= MAX_NAMES) return fail(formula, "too many groups");
        sd->group[sd->ngroups][0] = open;
        sd->group[sd->ngroups++][1] = sd->n;
        open = -1;
      }
      p++;
      continue;
    }
    const char *q = p;
    int len;
    if (!strncmp(p, "...", 3)) len = 3;
    else if (!strncmp(p, "\xe2\x80\xa6", 3)) len = 3;  /* the one-character ellipsis */
    else {
      while (q < end && ident_char(*q)) q++;
      len = (int)(q - p);
      if (len == 0) return fail(formula, "an unexpected character");
    }
    if (len == 1 && *p == '1') {  /* an axis of size 1: an empty group */
      if (open >= 0) return fail(formula, "\"1\" inside parentheses");
      if (sd->ngroups >= MAX_NAMES) return fail(formula, "too many groups");
      sd->group[sd->ngroups][0] = sd->group[sd->ngroups][1] = sd->n;
      sd->ngroups++;
    } else {
      bool ell = len == 3 && (*p == '.' || *p == '\xe2');
      if (!ell && ((*p >= '0' && *p <= '9') || *p == '_' || p[len - 1] == '_'))
        return fail(formula, "an invalid axis name (an identifier not starting or ending with _)");
      if (sd->n >= MAX_NAMES) return fail(formula, "too many axis names");
      sd->name[sd->n] = ell ? ELL : 0;
      sd->tok[sd->n] = p;
      sd->len[sd->n++] = len;
    }
    p += len;
  }
  if (open >= 0) return fail(formula, "an unclosed parenthesis");
  return true;
}

static bool same_tok(const side *a, int i, const side *b, int j) {
  if (a->name[i] == ELL && b->name[j] == ELL) return true;  /* "..." and "…" alike */
  return a->len[i] == b->len[j] && (a->name[i] == ELL) == (b->name[j] == ELL) && !strncmp(a->tok[i], b->tok[j], (size_t)a->len[i]);
}

/* the position of a side's ellipsis, -1 if none */
static int ell_at(const side *sd) {
  for (int i = 0; i < sd->n; i++)
    if (sd->name[i] == ELL) return i;
  return -1;
}

tg_tensor *tg_rearrange(tg_tensor *t, const char *formula, int n, const char *const *names, const int64_t *sizes) {
  if (!t || !formula || n < 0 || (n > 0 && (!names || !sizes))) {
    if (t) tg_set_error(TG_ERR_ARG, "tg_rearrange: NULL formula or sizes");
    return NULL;
  }
  const char *arrow = strstr(formula, "->");
  if (!arrow || strstr(arrow + 2, "->")) return fail(formula, "not exactly one \"->\""), NULL;
  side L, R;
  if (!parse_side(formula, formula, arrow, &L) || !parse_side(formula, arrow + 2, arrow + strlen(arrow), &R)) return NULL;
  /* the left names are unique and the right side has the same ones */
  if (L.n != R.n) return fail(formula, "the two sides name different axes"), NULL;
  int nell = 0;
  for (int i = 0; i < L.n; i++) {
    nell += L.name[i] == ELL;
    for (int j = 0; j < i; j++)
      if (same_tok(&L, i, &L, j)) return fail(formula, "an axis named twice"), NULL;
  }
  int at_of[MAX_NAMES];
  for (int j = 0; j < R.n; j++) {
    int at = -1;
    for (int i = 0; i < L.n; i++)
      if (same_tok(&R, j, &L, i)) at = i;
    if (at < 0) return fail(formula, "the two sides name different axes"), NULL;
    for (int k = 0; k < j; k++)
      if (same_tok(&R, j, &R, k)) return fail(formula, "an axis named twice"), NULL;
    at_of[j] = at;
  }
  for (int j = 0; j < R.n; j++) R.name[j] = at_of[j];
  for (int i = 0; i < L.n; i++) L.name[i] = L.name[i] == ELL ? ELL : i;
  if (nell > 1) return fail(formula, "more than one ellipsis"), NULL;
  int le = ell_at(&L);
  for (int g = 0; g < L.ngroups; g++)
    if (le >= L.group[g][0] && le < L.group[g][1]) return fail(formula, "an ellipsis inside parentheses on the left"), NULL;
  /* the caller's sizes name left axes */
  int64_t given[MAX_NAMES];
  for (int i = 0; i < L.n; i++) given[i] = -1;
  for (int k = 0; k < n; k++) {
    int at = -1;
    for (int i = 0; i < L.n; i++)
      if (L.name[i] != ELL && names[k] && (int)strlen(names[k]) == L.len[i] && !strncmp(names[k], L.tok[i], (size_t)L.len[i])) at = i;
    if (at < 0 || sizes[k] < 0) {
      tg_set_error(TG_ERR_ARG, "tg_rearrange: size %s = %lld: no such axis on the left or negative in \"%s\"",
                   names[k] ? names[k] : "(null)", (long long)sizes[k], formula);
      return NULL;
    }
    given[at] = sizes[k];
  }
  /* the input's axes, one per top-level item of the left side */
  int items = L.n;
  for (int g = 0; g < L.ngroups; g++) items -= L.group[g][1] - L.group[g][0] - 1;
  int ell_len = 0;
  if (le >= 0) ell_len = TNDIM(t) - items + 1;
  if (ell_len < 0 || (le < 0 && items != TNDIM(t))) {
    tg_set_error(TG_ERR_ARG, "tg_rearrange: \"%s\" has %d axes on the left, the tensor %d", formula, items - (le >= 0), TNDIM(t));
    return NULL;
  }
  int full_n = L.n - (le >= 0) + ell_len;
  if (full_n > TG_MAX_DIMS) return fail(formula, "too many axes"), NULL;
  /* the size of each left name (ellipsis expanded): walk the left items against t's axes */
  int64_t full[TG_MAX_DIMS];
  int fi = 0, ax = 0;
  for (int i = 0; i <= L.n;) {
    for (int k = 0; k < L.ngroups; k++)  /* empty groups at i: an input axis of size 1 that goes away */
      if (L.group[k][0] == i && L.group[k][1] == i && TSHAPE(t)[ax++] != 1)
        return fail(formula, "a \"1\" or \"()\" on the left over an axis of size other than 1"), NULL;
    if (i == L.n) break;
    int g = -1;
    for (int k = 0; k < L.ngroups; k++)
      if (L.group[k][0] == i && L.group[k][1] > i) g = k;
    if (L.name[i] == ELL) {
      for (int e = 0; e < ell_len; e++) full[fi++] = TSHAPE(t)[ax++];
      i++;
    } else if (g < 0) {
      if (given[i] >= 0 && given[i] != TSHAPE(t)[ax]) return fail(formula, "a given size differs from the axis"), NULL;
      full[fi++] = TSHAPE(t)[ax++];
      i++;
    } else {  /* the axis splits into the group's names; at most one size is inferred */
      int64_t known = 1, sz = TSHAPE(t)[ax++];
      int unknown = -1;
      for (int k = L.group[g][0]; k < L.group[g][1]; k++) {
        if (given[k] >= 0) known *= given[k];
        else if (unknown >= 0) return fail(formula, "two axes of a group without a size"), NULL;
        else unknown = k;
      }
      if (unknown < 0 && known != sz) return fail(formula, "a group's sizes do not multiply to its axis"), NULL;
      if (unknown >= 0 && (known == 0 ? sz != 0 : sz % known)) return fail(formula, "a group's sizes do not divide its axis"), NULL;
      for (int k = L.group[g][0]; k < L.group[g][1]; k++) full[fi++] = k == unknown ? (known ? sz / known : 0) : given[k];
      i = L.group[g][1];
    }
  }
  /* left position -> position in full[] (the ellipsis takes ell_len) */
  int start_of[MAX_NAMES];
  for (int i = 0, p = 0; i < L.n; i++) {
    start_of[i] = p;
    p += L.name[i] == ELL ? ell_len : 1;
  }
  int perm[TG_MAX_DIMS], np = 0;
  int64_t out[TG_MAX_DIMS];
  int no = 0;
  for (int j = 0; j <= R.n; j++) {
    for (int k = 0; k < R.ngroups; k++)
      if (R.group[k][0] == j) {  /* a group opens at j: one output axis, the product of its names */
        int64_t prod = 1;
        for (int q = j; q < R.group[k][1]; q++) {
          int li = R.name[q];
          int cnt = L.name[li] == ELL ? ell_len : 1;
          for (int e = 0; e < cnt; e++) {
            perm[np++] = start_of[li] + e;
            prod *= full[start_of[li] + e];
          }
        }
        if (no >= TG_MAX_DIMS) return fail(formula, "too many axes"), NULL;
        out[no++] = prod;
      }
    if (j == R.n) break;
    bool grouped = false;
    for (int k = 0; k < R.ngroups; k++) grouped |= j >= R.group[k][0] && j < R.group[k][1];
    if (grouped) continue;
    int li = R.name[j];
    int cnt = L.name[li] == ELL ? ell_len : 1;
    for (int e = 0; e < cnt; e++) {
      if (no >= TG_MAX_DIMS) return fail(formula, "too many axes"), NULL;
      perm[np++] = start_of[li] + e;
      out[no++] = full[start_of[li] + e];
    }
  }
  tmps s = TMPS("tg_rearrange");
  tg_tensor *x = tmp(&s, tg_reshape(t, fi, full));
  x = x ? tmp(&s, tg_permute(x, np, perm)) : NULL;
  return tmps_end(&s, x ? tmp(&s, tg_reshape(x, no, out)) : NULL);
}
