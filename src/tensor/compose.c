/* compose.c — the helpers of compose.h: the list of intermediates a composite op frees, option
 * resolution, constant padding that may shrink, tinygrad's pooling windows, and one-hot masks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/compose.h"

tg_tensor *tmp(tmps *s, tg_tensor *t) {
  if (!t) return NULL;
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 32;
    tg_tensor **nv = mem_realloc(s->v, (size_t)nc * sizeof *nv);
    if (!nv) {
      tg_free(t);
      tg_set_error(TG_ERR_NOMEM, "%s: out of memory", s->op);
      return NULL;
    }
    s->v = nv;
    s->cap = nc;
  }
  s->v[s->n++] = t;
  return t;
}

tg_tensor *tmps_end(tmps *s, tg_tensor *r) {
  for (int i = s->n - 1; i >= 0; i--)
    if (s->v[i] != r) tg_free(s->v[i]);
  free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
  if (!r) {
    size_t n = strlen(s->op);
    const char *msg = tg_error();
    if (strncmp(msg, s->op, n) != 0 || (msg[n] != ':' && msg[n] != 0)) {
      char copy[1024];
      snprintf(copy, sizeof copy, "%s", msg);
      tg_set_error(tg_error_status() ? tg_error_status() : TG_ERR_INTERNAL, "%s: %s", s->op, copy);
    }
  }
  return r;
}

/* renders v's values as "(a, b, ...)" for messages */
static const char *ints_str(char *buf, size_t cap, tg_ints v) {
  int64_t vals[2 * TG_CONV_DIMS];
  int n = v.n < 0 ? 0 : v.n > 2 * TG_CONV_DIMS ? 2 * TG_CONV_DIMS : v.n;
  memcpy(vals, v.v, (size_t)n * sizeof *vals);
  return shape_str(buf, cap, n, vals);
}

bool ints_dims(const char *op, const char *what, tg_ints v, int nd, int64_t def, int64_t min, int64_t *out) {
  char b[128];
  if (v.n != 0 && v.n != 1 && v.n != nd) {
    tg_set_error(TG_ERR_ARG, "%s: %s has %d values for %d spatial dims (give 1 or %d)", op, what, v.n, nd, nd);
    return false;
  }
  for (int i = 0; i < nd; i++) {
    out[i] = v.n == 0 ? def : v.n == 1 ? v.v[0] : v.v[i];
    if (v.n && out[i] < min) {
      tg_set_error(TG_ERR_ARG, "%s: %s %s: each value must be at least %lld", op, what, ints_str(b, sizeof b, v), (long long)min);
      return false;
    }
  }
  return true;
}

bool ints_pads(const char *op, tg_ints v, int nd, int64_t *pads) {
  if (v.n == 2 * nd) {  /* tinygrad's flat order: the last dim's (before, after) first */
    for (int j = 0; j < nd; j++) {
      pads[2 * j] = v.v[2 * (nd - 1 - j)];
      pads[2 * j + 1] = v.v[2 * (nd - 1 - j) + 1];
    }
  } else {
    int64_t per[TG_CONV_DIMS];
    if (v.n != 0 && v.n != 1 && v.n != nd) {
      tg_set_error(TG_ERR_ARG, "%s: padding has %d values for %d spatial dims (give 1, %d, or %d per side)", op, v.n, nd, nd,
                   2 * nd);
      return false;
    }
    for (int j = 0; j < nd; j++) per[j] = v.n == 0 ? 0 : v.n == 1 ? v.v[0] : v.v[j];
    for (int j = 0; j < nd; j++) pads[2 * j] = pads[2 * j + 1] = per[j];
  }
  return true;
}

tg_tensor *pad_const(tmps *s, tg_tensor *x, const int64_t *pads, double value) {
  return x ? tmp(s, tg_pad_axes(x, TNDIM(x), pads, value)) : NULL;
}

tg_tensor *pool_windows(tmps *s, tg_tensor *x, int nk, const int64_t *k, const int64_t *st, const int64_t *dil) {
  if (!x) return NULL;
  int64_t d[TG_CONV_DIMS];  /* a window of one has no dilation: any value gives the same windows */
  for (int j = 0; j < nk && j < TG_CONV_DIMS; j++) d[j] = k[j] == 1 ? 1 : dil[j];
  int nd = TNDIM(x), noop = nd - nk;
  int64_t lead[TG_MAX_DIMS], nlead = 1, in[TG_CONV_DIMS], o[TG_CONV_DIMS], f[TG_CONV_DIMS], row[TG_CONV_DIMS];
  for (int i = 0; i < noop; i++) nlead *= (lead[i] = TSHAPE(x)[i]);
  for (int j = 0; j < nk; j++) {
    /* sizes from options are unbounded: every product below is checked (shape.c) */
    int64_t dk, os, krow;
    in[j] = TSHAPE(x)[noop + j];
    bool ok = in[j] > 0 && k[j] > 0 && st[j] > 0 && size_mul(d[j], k[j] - 1, &dk);
    if (ok) o[j] = ceildiv(in[j] - dk, st[j]);
    ok = ok && o[j] > 0 && size_mul(o[j], st[j], &os);
    if (ok) f[j] = ceildiv(os - d[j], in[j]);
    if (ok && f[j] < 1) f[j] = 1;
    ok = ok && size_mul(in[j], f[j], &row[j]) && size_add(row[j], d[j], &row[j]) && size_mul(k[j], row[j], &krow);
    if (!ok) {
      tg_set_error(TG_ERR_ARG, "%s: window %lld (stride %lld, dilation %lld) over an axis of %lld gives no output or more "
                   "than 2^60 elements", s->op, (long long)k[j], (long long)st[j], (long long)d[j], (long long)in[j]);
      return NULL;
    }
  }
  /* the leading axes as one, so that windows of any tensor stay within TG_MAX_DIMS */
  int64_t sh[TG_MAX_DIMS], b[2 * TG_MAX_DIMS];
  sh[0] = nlead;
  for (int j = 0; j < nk; j++) sh[1 + j] = in[j];
  x = tmp(s, tg_reshape(x, 1 + nk, sh));
  bool disjoint = true;
  for (int j = 0; j < nk; j++) disjoint &= d[j] == 1 && k[j] <= st[j];
  if (disjoint) {
    /* windows that do not overlap (a 2x2 pool of stride 2): cut each axis to o*s, view it as (o, s) and
     * keep the first k of each s. The general path below gives the same windows, but through a modulo
     * that the simplifier does not fold yet (see pool_windows in the report), so this one is faster. */
    int64_t p[2 * TG_MAX_DIMS] = {0};
    for (int j = 0; j < nk; j++) p[2 * (1 + j) + 1] = o[j] * st[j] - in[j];
    x = pad_const(s, x, p, 0);
    for (int j = 0; j < nk; j++) { sh[1 + 2 * j] = o[j]; sh[2 + 2 * j] = st[j]; }
    x = tmp(s, tg_reshape(x, 1 + 2 * nk, sh));
    b[0] = 0;
    b[1] = nlead;
    for (int j = 0; j < nk; j++) { b[2 + 4 * j] = 0; b[3 + 4 * j] = o[j]; b[4 + 4 * j] = 0; b[5 + 4 * j] = k[j]; }
    x = tmp(s, tg_shrink(x, 1 + 2 * nk, b));
    int perm[1 + 2 * TG_CONV_DIMS] = {0};
    for (int j = 0; j < nk; j++) { perm[1 + j] = 1 + 2 * j; perm[1 + nk + j] = 2 + 2 * j; }
    x = tmp(s, tg_permute(x, 1 + 2 * nk, perm));
    goto out;
  }
  /* repeat each axis so that k windows of i*f+d elements follow one another: no padding needed */
  int64_t rep[1 + TG_CONV_DIMS] = {1};
  for (int j = 0; j < nk; j++) rep[1 + j] = ceildiv(k[j] * row[j], in[j]);
  x = tmp(s, tg_repeat(x, 1 + nk, rep));
  b[0] = 0;
  b[1] = nlead;
  for (int j = 0; j < nk; j++) { b[2 + 2 * j] = 0; b[3 + 2 * j] = k[j] * row[j]; }
  x = tmp(s, tg_shrink(x, 1 + nk, b));
  /* dilation: (k, i*f+d) puts window w's start w*d elements into row w */
  for (int j = 0; j < nk; j++) { sh[1 + 2 * j] = k[j]; sh[2 + 2 * j] = row[j]; }
  x = tmp(s, tg_reshape(x, 1 + 2 * nk, sh));
  /* stride: keep o*s, view as (k, o, s), keep the first of each s */
  for (int j = 0; j < nk; j++) { b[2 + 4 * j] = 0; b[3 + 4 * j] = k[j]; b[4 + 4 * j] = 0; b[5 + 4 * j] = o[j] * st[j]; }
  x = tmp(s, tg_shrink(x, 1 + 2 * nk, b));
  for (int j = 0; j < nk; j++) { sh[1 + 3 * j] = k[j]; sh[2 + 3 * j] = o[j]; sh[3 + 3 * j] = st[j]; }
  x = tmp(s, tg_reshape(x, 1 + 3 * nk, sh));
  for (int j = 0; j < nk; j++) {
    b[2 + 6 * j] = 0; b[3 + 6 * j] = k[j];
    b[4 + 6 * j] = 0; b[5 + 6 * j] = o[j];
    b[6 + 6 * j] = 0; b[7 + 6 * j] = 1;
  }
  x = tmp(s, tg_shrink(x, 1 + 3 * nk, b));
  for (int j = 0; j < nk; j++) { sh[1 + 2 * j] = k[j]; sh[2 + 2 * j] = o[j]; }
  x = tmp(s, tg_reshape(x, 1 + 2 * nk, sh));
  /* (lead, k0, o0, k1, o1, ...) -> (lead, *o, *k) -> (*lead axes, *o, *k) */
  int perm[1 + 2 * TG_CONV_DIMS] = {0};
  for (int j = 0; j < nk; j++) { perm[1 + j] = 2 + 2 * j; perm[1 + nk + j] = 1 + 2 * j; }
  x = tmp(s, tg_permute(x, 1 + 2 * nk, perm));
out:
  if (noop + 2 * nk > TG_MAX_DIMS) {
    tg_set_error(TG_ERR_ARG, "%s: %d leading axes and %d windowed axes make more than %d dimensions", s->op, noop, nk,
                 TG_MAX_DIMS);
    return NULL;
  }
  for (int i = 0; i < noop; i++) sh[i] = lead[i];
  for (int j = 0; j < nk; j++) { sh[noop + j] = o[j]; sh[noop + nk + j] = k[j]; }
  return tmp(s, tg_reshape(x, noop + 2 * nk, sh));
}

tg_tensor *arange_col(tmps *s, int64_t n, int trailing) {
  tg_tensor *a = tmp(s, tg_arange(TG_INT32, 0, (double)n, 1));
  int64_t sh[TG_MAX_DIMS];
  sh[0] = n;
  for (int i = 0; i < trailing; i++) sh[1 + i] = 1;
  return tmp(s, tg_reshape(a, 1 + trailing, sh));
}

tg_tensor *one_hot_mask(tmps *s, tg_tensor *index, int64_t n) {
  return tmp(s, tg_eq(tmp(s, tg_unsqueeze(index, -1)), arange_col(s, n, 0)));
}
