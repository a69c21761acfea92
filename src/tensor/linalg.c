/* linalg.c — tinygrad's matrix decompositions written with tensor ops, so they stay lazy, batch over leading
 * axes and differentiate like any other graph:
 *   qr: Householder reflections, one per column, each applied as two rank-1 matmul updates of R and Q;
 *   svd: QR first, then one-sided Jacobi on the square factor: rounds of parallel plane rotations over
 *        round-robin column pairs (the pairings are data-independent, so they are computed here in C and enter
 *        the graph as constant selection matrices), 4 * n rounds as tinygrad; singular values sorted descending;
 *   det: (-1)^n times the product of R's diagonal;
 *   newton_schulz: the odd-polynomial iteration G <- sum_i p_i (G G^T)^i G on the Frobenius-normalized input. */
#include <math.h>
#include <stdlib.h>

#include "tensor/compose.h"

/* x restricted to [lo, hi) along axis (negative counts from the end) */
static tg_tensor *narrow(tmps *s, tg_tensor *x, int axis, int64_t lo, int64_t hi) {
  if (!x) return NULL;
  int nd = TNDIM(x), ax = axis < 0 ? axis + nd : axis;
  int64_t b[2 * TG_MAX_DIMS];
  for (int i = 0; i < nd; i++) b[2 * i] = 0, b[2 * i + 1] = TSHAPE(x)[i];
  b[2 * ax] = lo;
  b[2 * ax + 1] = hi;
  return tmp(s, tg_shrink(x, nd, b));
}

static tg_tensor *mT(tmps *s, tg_tensor *x) { return x ? tmp(s, tg_transpose(x, -2, -1)) : NULL; }
static tg_tensor *mm(tmps *s, tg_tensor *a, tg_tensor *b) { return a && b ? tmp(s, tg_matmul(a, b)) : NULL; }
static tg_tensor *add(tmps *s, tg_tensor *a, tg_tensor *b) { return a && b ? tmp(s, tg_add(a, b)) : NULL; }
static tg_tensor *sub(tmps *s, tg_tensor *a, tg_tensor *b) { return a && b ? tmp(s, tg_sub(a, b)) : NULL; }
static tg_tensor *mul(tmps *s, tg_tensor *a, tg_tensor *b) { return a && b ? tmp(s, tg_mul(a, b)) : NULL; }
static tg_tensor *dv(tmps *s, tg_tensor *a, tg_tensor *b) { return a && b ? tmp(s, tg_div(a, b)) : NULL; }
static tg_tensor *wh(tmps *s, tg_tensor *c, tg_tensor *a, tg_tensor *b) { return c && a && b ? tmp(s, tg_where(c, a, b)) : NULL; }
static tg_tensor *whs(tmps *s, tg_tensor *c, tg_tensor *a, double b) { return c && a ? tmp(s, tg_where_scalar(c, a, b)) : NULL; }
static tg_tensor *sum_last(tmps *s, tg_tensor *x, int axis, bool keep) { return x ? tmp(s, tg_sum(x, 1, &axis, keep)) : NULL; }
static tg_tensor *ne0(tmps *s, tg_tensor *x) { return x ? tmp(s, tg_ne_scalar(x, 0)) : NULL; }

/* an identity (n, n) of dt broadcast to (*batch, n, n) */
static tg_tensor *eye_b(tmps *s, tg_dtype dt, int nb, const int64_t *batch, int64_t n) {
  int64_t sh[TG_MAX_DIMS];
  for (int i = 0; i < nb; i++) sh[i] = batch[i];
  sh[nb] = sh[nb + 1] = n;
  tg_tensor *e = tmp(s, tg_eye(dt, n, n));
  return e ? tmp(s, tg_expand(e, nb + 2, sh)) : NULL;
}

static bool check_matrix(const char *op, tg_tensor *t) {
  if (TNDIM(t) < 2 || !dtype_is_float(TDT(t))) {
    tg_set_error(TG_ERR_ARG, "%s: expected a float tensor of two or more dimensions, got %d-d %s", op, TNDIM(t),
                 tg_dtype_name(TDT(t)));
    return false;
  }
  return true;
}

/* Q (*b, m, m) and R (*b, m, n) recorded in s; false on error */
static bool qr_in(tmps *s, tg_tensor *t, tg_tensor **Qo, tg_tensor **Ro) {
  int nd = TNDIM(t), nb = nd - 2;
  int64_t m = TSHAPE(t)[nd - 2], n = TSHAPE(t)[nd - 1];
  tg_tensor *R = tmp(s, tg_reshape(t, nd, TSHAPE(t))), *Q = eye_b(s, TDT(t), nb, TSHAPE(t), m);  /* R: a handle of its own */
  tg_tensor *idx = tmp(s, tg_arange(TG_INT32, 0, (double)m, 1));
  for (int64_t i = 0; i < (m < n ? m : n) && R && Q && idx; i++) {
    /* the reflector v (zeros above row i) and w = tau v: R -= w (v^T R), Q -= (Q v) w^T */
    tg_tensor *at_i = tmp(s, tg_eq_scalar(idx, (double)i)), *below = tmp(s, tg_ge_scalar(idx, (double)i));
    tg_tensor *col = narrow(s, R, -1, i, i + 1);
    tg_tensor *x = whs(s, below, col ? tmp(s, tg_squeeze(col, -1)) : NULL, 0);                 /* (*b, m) */
    tg_tensor *norm = x ? tmp(s, tg_sqrt(sum_last(s, tmp(s, tg_square(x)), -1, true))) : NULL; /* (*b, 1) */
    tg_tensor *x0 = sum_last(s, whs(s, at_i, x, 0), -1, true);
    tg_tensor *sgn = x0 ? whs(s, ne0(s, x0), tmp(s, tg_sign(x0)), 1) : NULL, *active = ne0(s, norm);
    tg_tensor *u0 = add(s, x0, mul(s, sgn, norm));
    tg_tensor *v = dv(s, wh(s, at_i, u0, x), whs(s, active, u0, 1));
    v = v ? tmp(s, tg_unsqueeze(v, -1)) : NULL;                                                  /* (*b, m, 1) */
    tg_tensor *tau = whs(s, active, dv(s, mul(s, sgn, u0), whs(s, active, norm, 1)), 0);
    tg_tensor *w = mul(s, tau ? tmp(s, tg_unsqueeze(tau, -1)) : NULL, v);
    R = sub(s, R, mm(s, w, mm(s, mT(s, v), R)));
    Q = sub(s, Q, mm(s, mm(s, Q, v), mT(s, w)));
  }
  *Qo = Q;
  *Ro = R;
  return Q && R && idx;
}

/* hands the wanted outputs to the caller (each one reference, owned as tg.h says) and frees the rest of s */
static tg_status out_status(tmps *s, bool ok, int n, tg_tensor **outs[], tg_tensor *vals[]) {
  if (!ok) {
    tmps_end(s, NULL);
    return tg_error_status() != TG_OK ? tg_error_status() : TG_ERR_INTERNAL;
  }
  for (int i = 0; i < n; i++) {
    if (!outs[i]) continue;
    int at = -1;
    for (int k = 0; k < s->n && at < 0; k++)
      if (s->v[k] == vals[i]) at = k;
    if (at >= 0) s->v[at] = NULL;  /* the list's reference passes to the caller (every output is in s) */
    *outs[i] = vals[i];
  }
  for (int k = 0; k < s->n; k++) tg_free(s->v[k]);
  free(s->v);
  s->v = NULL;
  s->n = s->cap = 0;
  return TG_OK;
}

tg_status tg_qr(tg_tensor *t, tg_tensor **Q, tg_tensor **R) {
  if (Q) *Q = NULL;
  if (R) *R = NULL;
  if (!t) {
    tg_set_error(TG_ERR_ARG, "tg_qr: NULL tensor");
    return TG_ERR_ARG;
  }
  if (!check_matrix("tg_qr", t)) return TG_ERR_ARG;
  tmps s = TMPS("tg_qr");
  tg_tensor *q = NULL, *r = NULL;
  bool ok = qr_in(&s, t, &q, &r);
  return out_status(&s, ok, 2, (tg_tensor **[]){Q, R}, (tg_tensor *[]){q, r});
}

/* det (*b, n, n) -> (*b): Householder QR's R carries |det| on its diagonal, and each of the n reflections that
 * qr_in applies flips the sign (a reflection's determinant is -1; a step it skips is one whose column is zero
 * below the diagonal, and then R's diagonal holds that 0 and the product is 0 whatever the sign). So
 * det = (-1)^n prod(diag R): stable for ill-conditioned matrices where cofactor expansion is not, lazy,
 * batched and differentiable as qr is. */
tg_tensor *tg_det(tg_tensor *t) {
  if (!t) {
    tg_set_error(TG_ERR_ARG, "tg_det: NULL tensor");
    return NULL;
  }
  if (!check_matrix("tg_det", t)) return NULL;
  int nd = TNDIM(t);
  int64_t m = TSHAPE(t)[nd - 2], n = TSHAPE(t)[nd - 1];
  if (m != n) {
    tg_set_error(TG_ERR_ARG, "tg_det: expected square matrices in the last two axes, got %lld x %lld", (long long)m,
                 (long long)n);
    return NULL;
  }
  tmps s = TMPS("tg_det");
  tg_tensor *q = NULL, *r = NULL;
  if (!qr_in(&s, t, &q, &r)) return tmps_end(&s, NULL);
  int last = -1;
  tg_tensor *d = tmp(&s, tg_diagonal(r, 0, -2, -1));
  tg_tensor *p = d ? tmp(&s, tg_prod(d, 1, &last, false)) : NULL;
  return tmps_end(&s, p && n % 2 ? tmp(&s, tg_neg(p)) : p);
}

/* the round-robin pairing: column perm[k] pairs with perm[h + k] for k < h (tinygrad's schedule) */
static void next_pairing(int64_t *perm, int64_t num) {
  if (num % 2) {
    for (int64_t k = 0; k < num; k++) perm[k] = (perm[k] - 1 + num) % num;
  } else {
    for (int64_t k = 1; k < num; k++) perm[k] = ((perm[k] - 2) % (num - 1) + (num - 1)) % (num - 1) + 1;
  }
}

/* one Jacobi round: rotates the h column pairs of U (and V alike) so each pair becomes orthogonal */
static bool jacobi_round(tmps *s, tg_tensor **U, tg_tensor **V, const int64_t *perm, int64_t num, int nb,
                         const int64_t *batch, tg_tensor *eye_num) {
  int64_t h = num / 2;
  tg_dtype dt = TDT(*U);
  /* P_pair (num, 2h): column k selects column perm[k] */
  float *pp = mem_calloc((size_t)(num * 2 * h) + 1, sizeof *pp);
  if (!pp) {
    tg_set_error(TG_ERR_NOMEM, "tg_svd: out of memory");
    return false;
  }
  for (int64_t k = 0; k < 2 * h; k++) pp[perm[k] * 2 * h + k] = 1;
  tg_tensor *P = tmp(s, tg_from_data(TG_FLOAT32, 2, (int64_t[]){num, 2 * h}, pp, (size_t)(num * 2 * h) * sizeof *pp));
  free(pp);
  P = P ? tmp(s, tg_cast(P, dt)) : NULL;
  tg_tensor *Up = mm(s, *U, P);                                               /* (*b, num, 2h) */
  tg_tensor *Ul = narrow(s, Up, -1, 0, h), *Ur = narrow(s, Up, -1, h, 2 * h);
  tg_tensor *gamma = sum_last(s, mul(s, Ul, Ur), -2, true);                   /* (*b, 1, h) */
  tg_tensor *sq = sum_last(s, Up ? tmp(s, tg_square(Up)) : NULL, -2, true);   /* (*b, 1, 2h) */
  tg_tensor *alpha = narrow(s, sq, -1, 0, h), *beta = narrow(s, sq, -1, h, 2 * h);
  tg_tensor *rot = ne0(s, gamma);
  tg_tensor *tau = dv(s, sub(s, beta, alpha), gamma ? tmp(s, tg_mul_scalar(whs(s, rot, gamma, 1), 2)) : NULL);
  tg_tensor *tsq1 = tau ? tmp(s, tg_add_scalar(tmp(s, tg_square(tau)), 1)) : NULL;
  tg_tensor *tt = dv(s, tau ? whs(s, ne0(s, tau), tmp(s, tg_sign(tau)), 1) : NULL,
                     add(s, tau ? tmp(s, tg_abs(tau)) : NULL, tsq1 ? tmp(s, tg_sqrt(tsq1)) : NULL));
  tt = whs(s, rot, tt, 0);
  tg_tensor *c = tt ? tmp(s, tg_rsqrt(tmp(s, tg_add_scalar(tmp(s, tg_square(tt)), 1)))) : NULL;
  tg_tensor *sn = mul(s, c, tt);
  /* R = I + sum over pairs of (c - 1)(ei ei^T + ej ej^T) + s (ei ej^T - ej ei^T) */
  tg_tensor *PT = mT(s, P);                                                   /* (2h, num) */
  tg_tensor *Mi = narrow(s, PT, 0, 0, h), *Mj = narrow(s, PT, 0, h, 2 * h);  /* (h, num) */
  tg_tensor *Mia = Mi ? tmp(s, tg_unsqueeze(Mi, -1)) : NULL, *Mib = Mi ? tmp(s, tg_unsqueeze(Mi, -2)) : NULL;
  tg_tensor *Mja = Mj ? tmp(s, tg_unsqueeze(Mj, -1)) : NULL, *Mjb = Mj ? tmp(s, tg_unsqueeze(Mj, -2)) : NULL;
  int64_t sh[TG_MAX_DIMS];
  for (int i = 0; i < nb; i++) sh[i] = batch[i];
  sh[nb] = h, sh[nb + 1] = sh[nb + 2] = 1;
  tg_tensor *cc = c ? tmp(s, tg_reshape(tmp(s, tg_sub_scalar(c, 1)), nb + 3, sh)) : NULL;
  tg_tensor *ss = sn ? tmp(s, tg_reshape(sn, nb + 3, sh)) : NULL;
  tg_tensor *d = add(s, mul(s, cc, add(s, mul(s, Mia, Mib), mul(s, Mja, Mjb))), mul(s, ss, sub(s, mul(s, Mia, Mjb), mul(s, Mja, Mib))));
  tg_tensor *Rm = add(s, eye_num, sum_last(s, d, -3, false));
  /* own buffers each round: without them U's graph would be re-derived in every later round */
  tg_tensor *U2 = mm(s, *U, Rm), *V2 = mm(s, *V, Rm);
  *U = U2 ? tmp(s, tg_contiguous(U2)) : NULL;
  *V = V2 ? tmp(s, tg_contiguous(V2)) : NULL;
  return *U && *V;
}

tg_status tg_svd(tg_tensor *t, bool full_matrices, tg_tensor **U, tg_tensor **S, tg_tensor **Vh) {
  if (U) *U = NULL;
  if (S) *S = NULL;
  if (Vh) *Vh = NULL;
  if (!t) {
    tg_set_error(TG_ERR_ARG, "tg_svd: NULL tensor");
    return TG_ERR_ARG;
  }
  if (!check_matrix("tg_svd", t)) return TG_ERR_ARG;
  tmps s = TMPS("tg_svd");
  int nd = TNDIM(t), nb = nd - 2;
  const int64_t *batch = TSHAPE(t);
  int64_t m = TSHAPE(t)[nd - 2], n = TSHAPE(t)[nd - 1], num = m < n ? m : n, qn = m < n ? n : m;
  tg_dtype dt = TDT(t);
  tg_tensor *Q = NULL, *R = NULL;
  bool ok = qr_in(&s, m >= n ? t : mT(&s, t), &Q, &R);
  tg_tensor *Uw = ok ? narrow(&s, narrow(&s, R, -2, 0, num), -1, 0, num) : NULL;
  Uw = Uw ? tmp(&s, tg_contiguous(Uw)) : NULL;
  tg_tensor *Vw = eye_b(&s, dt, nb, batch, num);
  Vw = Vw ? tmp(&s, tg_contiguous(Vw)) : NULL;
  tg_tensor *eye_num = eye_b(&s, dt, nb, batch, num);
  int64_t *perm = mem_alloc((size_t)(num ? num : 1) * sizeof *perm);
  ok = ok && Uw && Vw && eye_num && perm;
  if (perm) {
    for (int64_t k = 0; k < num / 2; k++) perm[k] = k;
    for (int64_t k = num / 2; k < num; k++) perm[k] = num - 1 - (k - num / 2);  /* arange(h, num) flipped */
  }
  for (int64_t r = 0; ok && num / 2 > 0 && r < 4 * num; r++) {
    ok = jacobi_round(&s, &Uw, &Vw, perm, num, nb, batch, eye_num);
    next_pairing(perm, num);
  }
  free(perm);
  /* singular values: the column norms, sorted descending; U's columns normalized */
  tg_tensor *Sv = NULL, *ix = NULL;
  tg_tensor *norms = ok ? tmp(&s, tg_sqrt(sum_last(&s, tmp(&s, tg_square(Uw)), -2, false))) : NULL;
  if (norms && tg_sort(norms, -1, true, &Sv, &ix) == TG_OK) tmp(&s, Sv), tmp(&s, ix);
  else Sv = ix = NULL;
  int64_t sh[TG_MAX_DIMS];
  for (int i = 0; i < nb; i++) sh[i] = batch[i];
  sh[nb] = sh[nb + 1] = num;
  tg_tensor *gi = ix ? tmp(&s, tg_expand(tmp(&s, tg_unsqueeze(ix, -2)), nb + 2, sh)) : NULL;
  tg_tensor *Ug = gi ? tmp(&s, tg_gather(Uw, -1, gi)) : NULL;
  tg_tensor *Sd = Sv ? tmp(&s, tg_unsqueeze(whs(&s, ne0(&s, Sv), Sv, 1), -2)) : NULL;
  Ug = dv(&s, Ug, Sd);
  tg_tensor *Vg = gi ? tmp(&s, tg_gather(Vw, -1, gi)) : NULL;
  /* U = Q @ blockdiag(Ug, I) */
  int64_t pairs[2 * TG_MAX_DIMS] = {0};
  pairs[2 * nb + 1] = pairs[2 * nb + 3] = qn - num;
  tg_tensor *Upad = Ug ? tmp(&s, tg_pad_axes(Ug, nb + 2, pairs, 0)) : NULL;
  tg_tensor *e_n = eye_b(&s, dt, nb, batch, num);
  tg_tensor *e_npad = e_n ? tmp(&s, tg_pad_axes(e_n, nb + 2, pairs, 0)) : NULL;
  tg_tensor *Uf = mm(&s, Q, add(&s, sub(&s, Upad, e_npad), eye_b(&s, dt, nb, batch, qn)));
  if (!full_matrices) Uf = narrow(&s, Uf, -1, 0, num);
  tg_tensor *a = m >= n ? Uf : Vg, *c = m >= n ? mT(&s, Vg) : mT(&s, Uf);
  ok = ok && a && Sv && c;
  return out_status(&s, ok, 3, (tg_tensor **[]){U, S, Vh}, (tg_tensor *[]){a, Sv, c});
}

tg_tensor *tg_newton_schulz(tg_tensor *t, int steps, int nparams, const double *params, double eps) {
  if (!t) return NULL;
  if (TNDIM(t) < 2 || steps < 0 || nparams < 1 || !params) {
    tg_set_error(TG_ERR_ARG, "tg_newton_schulz: needs two or more dims (got %d), steps >= 0 (%d) and params (%d)", TNDIM(t),
                 steps, nparams);
    return NULL;
  }
  tmps s = TMPS("tg_newton_schulz");
  int nd = TNDIM(t);
  if (TSHAPE(t)[nd - 2] > TSHAPE(t)[nd - 1]) {  /* tall: on the transpose */
    tg_tensor *r = tmp(&s, tg_newton_schulz(mT(&s, t), steps, nparams, params, eps));
    return tmps_end(&s, mT(&s, r));
  }
  tg_tensor *fro = tmp(&s, tg_sqrt(tmp(&s, tg_sum(tmp(&s, tg_square(t)), 2, (int[]){-2, -1}, true))));
  tg_tensor *G = fro ? dv(&s, t, tmp(&s, tg_add_scalar(fro, eps))) : NULL;
  for (int k = 0; k < steps && G; k++) {
    tg_tensor *GG = mm(&s, G, mT(&s, G)), *term = G, *acc = NULL;
    for (int i = 0; i < nparams && term; i++) {
      if (i > 0) term = mm(&s, GG, term);  /* (G G^T)^i G */
      tg_tensor *p = term ? tmp(&s, tg_mul_scalar(term, params[i])) : NULL;
      acc = acc ? add(&s, acc, p) : p;
    }
    G = acc;
  }
  return tmps_end(&s, G);
}
