/* einsum.c — Einstein summation as tinygrad composes it: each operand's repeated subscripts become a
 * diagonal (movement ops: flatten the pair, pad one row, view as (n, n + 1), keep column 0), then every
 * operand is permuted and reshaped onto one shared, sorted list of subscripts (size 1 where it lacks one),
 * the operands are multiplied with broadcasting, the subscripts absent from the output are summed, and the
 * result is permuted into the output order. Everything is lazy movement, one multiply and one reduce, so it
 * fuses into one kernel and autograd differentiates it like any other graph.
 *
 * Subscripts are the letters A-Z and a-z; "..." stands for the leading dimensions an operand has beyond its
 * letters, right-aligned across operands as broadcasting aligns them. Spaces are ignored. Without "->" the
 * output is the ellipsis dimensions followed by the letters that appear once, in sorted order (A-Z before
 * a-z), as PyTorch and tinygrad. */
#include <stdio.h>
#include <string.h>

#include "tensor/compose.h"

#define SB 256
#define NLETTERS 52            /* A-Z are 0..25, a-z 26..51: the sorted order of PyTorch and tinygrad */
#define NLABELS (NLETTERS + TG_MAX_DIMS)  /* then the ellipsis dimensions, outermost first */
#define ELL (-1)              /* "..." while parsing */

typedef struct term { int n, lab[TG_MAX_DIMS + 3]; bool ell; } term;

static int letter_code(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? 26 + c - 'a' : -1; }
static char code_letter(int l) { return l < 26 ? (char)('A' + l) : l < NLETTERS ? (char)('a' + l - 26) : '.'; }

/* a subscript for messages: its letter, or the ellipsis dimension */
static const char *label_str(char *buf, size_t cap, int l) {
  if (l < NLETTERS) snprintf(buf, cap, "'%c'", code_letter(l));
  else snprintf(buf, cap, "'...' dimension %d", l - NLETTERS);
  return buf;
}

/* parses one term (letters and at most one "...") from f[0..len); false with an error naming it */
static bool parse_term(const char *formula, const char *f, int len, const char *what, int idx, term *t) {
  t->n = 0;
  t->ell = false;
  for (int i = 0; i < len; i++) {
    if (f[i] == '.') {
      if (i + 2 >= len || f[i + 1] != '.' || f[i + 2] != '.' || t->ell) {
        tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': %s %d '%.*s': an ellipsis is exactly \"...\", at most once a term", formula,
                     what, idx, len, f);
        return false;
      }
      t->ell = true;
      t->lab[t->n++] = ELL;
      i += 2;
      continue;
    }
    int l = letter_code(f[i]);
    if (l < 0) {
      tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': %s %d '%.*s': '%c' is not a subscript (letters A-Z, a-z and \"...\")", formula,
                   what, idx, len, f, f[i]);
      return false;
    }
    if (t->n >= TG_MAX_DIMS + 1) {
      tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': %s %d '%.*s' has more than %d subscripts", formula, what, idx, len, f, TG_MAX_DIMS);
      return false;
    }
    t->lab[t->n++] = l;
  }
  return true;
}

/* the diagonal of x's last two axes (both n): (..., n, n) -> (..., n) */
static tg_tensor *diag_last(tmps *s, tg_tensor *x) {
  int nd = TNDIM(x);
  int64_t n = TSHAPE(x)[nd - 1], sh[TG_MAX_DIMS], p[2 * TG_MAX_DIMS] = {0}, b[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd - 2; i++) sh[i] = TSHAPE(x)[i];
  sh[nd - 2] = n * n;
  x = tmp(s, tg_reshape(x, nd - 1, sh));
  p[2 * (nd - 2) + 1] = n;
  x = tmp(s, tg_pad_axes(x, nd - 1, p, 0));  /* n*n + n = n rows of n + 1: the diagonal is column 0 */
  sh[nd - 2] = n;
  sh[nd - 1] = n + 1;
  x = tmp(s, tg_reshape(x, nd, sh));
  for (int i = 0; i < nd; i++) { b[2 * i] = 0; b[2 * i + 1] = i == nd - 1 ? 1 : sh[i]; }
  x = tmp(s, tg_shrink(x, nd, b));
  return tmp(s, tg_reshape(x, nd - 1, sh));
}

tg_tensor *tg_einsum(const char *formula, int n, tg_tensor *const *operands) {
  if (!formula) {
    tg_set_error(TG_ERR_ARG, "tg_einsum: formula is NULL");
    return NULL;
  }
  if (n < 1 || n > TG_MAX_DIMS || !operands) {
    tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': %d operands (give 1 to %d)", formula, n, TG_MAX_DIMS);
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (!operands[i]) return NULL;
  /* the formula without spaces */
  char f[512];
  int fl = 0;
  for (const char *c = formula; *c; c++) {
    if (*c == ' ') continue;
    if (fl + 1 >= (int)sizeof f) {
      tg_set_error(TG_ERR_ARG, "tg_einsum: formula of more than %d characters", (int)sizeof f - 1);
      return NULL;
    }
    f[fl++] = *c;
  }
  f[fl] = 0;
  const char *arrow = strstr(f, "->");
  if (arrow && strstr(arrow + 2, "->")) {
    tg_set_error(TG_ERR_ARG, "tg_einsum: '%s' has more than one \"->\"", formula);
    return NULL;
  }
  int lhs_len = arrow ? (int)(arrow - f) : fl;
  /* the input terms */
  term in[TG_MAX_DIMS], out;
  int nt = 0;
  for (int a = 0; a <= lhs_len;) {
    int b = a;
    while (b < lhs_len && f[b] != ',') b++;
    if (nt == n) {
      nt++;
      break;
    }
    if (!parse_term(formula, f + a, b - a, "operand", nt, &in[nt])) return NULL;
    nt++;
    a = b + 1;
  }
  if (nt != n) {
    tg_set_error(TG_ERR_ARG, "tg_einsum: '%s' names %s%d operands, got %d", formula, nt > n ? "more than " : "", nt > n ? n : nt, n);
    return NULL;
  }
  char b1[SB], b2[SB];
  /* ellipsis dimensions: each operand's extra dims, right-aligned onto ne shared labels */
  int ne = 0, nell[TG_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    int letters = in[i].n - (in[i].ell ? 1 : 0), nd = TNDIM(operands[i]);
    nell[i] = nd - letters;
    if (in[i].ell ? nell[i] < 0 : nell[i] != 0) {
      tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': operand %d has %d subscripts for its shape %s", formula, i, letters,
                   shape_str(b1, sizeof b1, nd, TSHAPE(operands[i])));
      return NULL;
    }
    if (nell[i] > ne) ne = nell[i];
  }
  /* each term's labels in dimension order, "..." expanded */
  int lab[TG_MAX_DIMS][TG_MAX_DIMS];
  int nl[TG_MAX_DIMS];
  int count[NLABELS] = {0};
  for (int i = 0; i < n; i++) {
    nl[i] = 0;
    for (int j = 0; j < in[i].n; j++) {
      if (in[i].lab[j] == ELL)
        for (int e = 0; e < nell[i]; e++) lab[i][nl[i]++] = NLETTERS + ne - nell[i] + e;
      else lab[i][nl[i]++] = in[i].lab[j];
    }
    for (int j = 0; j < in[i].n; j++)
      if (in[i].lab[j] != ELL) count[in[i].lab[j]]++;
  }
  /* the output labels */
  int olab[NLABELS], no = 0;
  if (arrow) {
    if (!parse_term(formula, arrow + 2, fl - lhs_len - 2, "output", 0, &out)) return NULL;
    bool seen[NLABELS] = {0};
    for (int j = 0; j < out.n; j++) {
      if (out.lab[j] == ELL) {
        for (int e = 0; e < ne; e++) olab[no++] = NLETTERS + e;
        continue;
      }
      int l = out.lab[j];
      if (!count[l] || seen[l]) {
        tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': output subscript %s %s", formula, label_str(b1, sizeof b1, l),
                     seen[l] ? "appears more than once" : "appears in no operand");
        return NULL;
      }
      seen[l] = true;
      olab[no++] = l;
    }
  } else {
    for (int e = 0; e < ne; e++) olab[no++] = NLETTERS + e;
    for (int l = 0; l < NLETTERS; l++)
      if (count[l] == 1) olab[no++] = l;
  }
  /* sizes: a subscript has one size over all operands; 1 broadcasts against it, as PyTorch's einsum */
  int64_t size[NLABELS];
  int from[NLABELS];
  for (int l = 0; l < NLABELS; l++) size[l] = -1;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < nl[i]; j++) {
      int l = lab[i][j];
      int64_t sz = TSHAPE(operands[i])[j];
      if (size[l] < 0 || (size[l] == 1 && sz != 1)) {
        size[l] = sz;
        from[l] = i;
      } else if (sz != size[l] && sz != 1) {
        tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': subscript %s has size %lld in operand %d %s and %lld in operand %d %s", formula,
                     label_str(b1, sizeof b1, l), (long long)size[l], from[l],
                     shape_str(b2, sizeof b2, TNDIM(operands[from[l]]), TSHAPE(operands[from[l]])), (long long)sz, i,
                     shape_str(b1, sizeof b1, TNDIM(operands[i]), TSHAPE(operands[i])));
        return NULL;
      }
    }
  /* the shared, sorted list of labels */
  int alpha[NLABELS], na = 0;
  for (int l = 0; l < NLABELS; l++)
    if (size[l] >= 0) alpha[na++] = l;
  if (na > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "tg_einsum: '%s' has %d distinct subscripts; at most %d are supported", formula, na, TG_MAX_DIMS);
    return NULL;
  }
  tmps s = TMPS("tg_einsum");
  tg_tensor *prod = NULL;
  for (int i = 0; i < n; i++) {
    tg_tensor *x = operands[i];
    int *L = lab[i], m = nl[i];
    /* repeated subscripts: the diagonal, its label moved to the end */
    for (int j = 0; j < m && x; j++)
      for (int k = j + 1; k < m && x; k++) {
        if (L[k] != L[j]) continue;
        if (TSHAPE(x)[j] != TSHAPE(x)[k]) {
          tg_set_error(TG_ERR_ARG, "tg_einsum: '%s': repeated subscript %s of operand %d has sizes %lld and %lld", formula,
                       label_str(b1, sizeof b1, L[j]), i, (long long)TSHAPE(x)[j], (long long)TSHAPE(x)[k]);
          return tmps_end(&s, NULL);
        }
        int perm[TG_MAX_DIMS], r = 0, nlab[TG_MAX_DIMS], c = L[j];
        for (int d = 0; d < m; d++)
          if (d != j && d != k) { nlab[r] = L[d]; perm[r++] = d; }
        perm[r] = j;
        perm[r + 1] = k;
        x = diag_last(&s, tmp(&s, tg_permute(x, m, perm)));
        nlab[r] = c;
        m--;
        memcpy(L, nlab, (size_t)m * sizeof *L);
        j = -1;  /* start over on the new labels */
        break;
      }
    if (!x) return tmps_end(&s, NULL);
    /* permute to the sorted labels, then reshape onto the shared list (1 where the operand lacks one) */
    int perm[TG_MAX_DIMS], r = 0;
    int64_t sh[TG_MAX_DIMS];
    for (int a = 0; a < na; a++) {
      sh[a] = 1;
      for (int d = 0; d < m; d++)
        if (L[d] == alpha[a]) {
          perm[r++] = d;
          sh[a] = TSHAPE(x)[d];
        }
    }
    x = tmp(&s, tg_reshape(tmp(&s, tg_permute(x, m, perm)), na, sh));
    prod = prod ? tmp(&s, tg_mul(prod, x)) : x;
  }
  /* sum what the output lacks, then put the rest in the output's order */
  bool keep[NLABELS] = {0};
  for (int o = 0; o < no; o++) keep[olab[o]] = true;
  int axes[TG_MAX_DIMS], nsum = 0, rank[NLABELS], nk = 0;
  for (int a = 0; a < na; a++) {
    if (keep[alpha[a]]) rank[alpha[a]] = nk++;
    else axes[nsum++] = a;
  }
  if (nsum && prod) prod = tmp(&s, tg_sum(prod, nsum, axes, false));
  int operm[TG_MAX_DIMS];
  for (int o = 0; o < no; o++) operm[o] = rank[olab[o]];
  if (prod) prod = tmp(&s, tg_permute(prod, no, operm));
  for (int i = 0; prod && i < n; i++)  /* never hand back an operand's own handle */
    if (prod == operands[i]) prod = tmp(&s, tensor_new(prod->u));
  return tmps_end(&s, prod);
}
