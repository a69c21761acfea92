/* loss.c — the losses, as tinygrad formulates them: log_softmax, a one-hot mask of the labels built by
 * comparison with an arange (no gather kernel), and means. Class axis: the last one for
 * sparse_categorical_crossentropy (tinygrad's), axis 1 (0 for a 1-d input) for cross_entropy and nll_loss
 * (tinygrad's and PyTorch's); the reduction is the mean over the batch (the ignored labels left out, the
 * class weights of nll_loss dividing), the sum, or none. */
#include <stdio.h>

#include "tensor/compose.h"

#define SB 256

/* labels int with the shape of x without its class axis ca: x (N, C, ...) / labels (N, ...) for ca 1,
 * x (..., C) / labels (...) for the last axis */
static bool check_labels(const char *op, tg_tensor *x, tg_tensor *labels, int ca, bool need_int) {
  char a[SB], b[SB];
  int nd = TNDIM(x);
  bool ok = nd >= 1 && TNDIM(labels) == nd - 1;
  for (int i = 0, j = 0; ok && i < nd; i++)
    if (i != ca) ok = TSHAPE(labels)[j++] == TSHAPE(x)[i];
  if (!ok) {
    tg_set_error(TG_ERR_ARG, "%s: labels %s do not match input %s (class axis %d removed)", op,
                 shape_str(a, sizeof a, TNDIM(labels), TSHAPE(labels)), shape_str(b, sizeof b, nd, TSHAPE(x)), ca);
    return false;
  }
  if (need_int && !dtype_is_int(TDT(labels))) {
    tg_set_error(TG_ERR_ARG, "%s: labels must be an integer tensor, got %s", op, tg_dtype_name(TDT(labels)));
    return false;
  }
  return true;
}

/* the class axis of cross_entropy and nll_loss: 1, or 0 for a 1-d input */
static int axis1(tg_tensor *x) { return TNDIM(x) == 1 ? 0 : 1; }

/* the options each loss has (tinygrad's keywords); any other set away from its default is refused */
enum { HAS_SMOOTHING = 1, HAS_IGNORE = 2, HAS_WEIGHT = 4, HAS_POS_WEIGHT = 8 };

static bool check_opts(const char *op, tg_loss_opts o, int has) {
  if ((unsigned)o.reduction > TG_REDUCTION_NONE) {
    tg_set_error(TG_ERR_ARG, "%s: reduction %d is not TG_REDUCTION_MEAN, _SUM or _NONE", op, (int)o.reduction);
    return false;
  }
  bool smoothing = has & HAS_SMOOTHING;
  if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1) || (!smoothing && o.label_smoothing != 0)) {
    tg_set_error(TG_ERR_ARG, "%s: label_smoothing %g: %s", op, o.label_smoothing,
                 smoothing ? "must be in [0, 1]" : "this loss has none (as tinygrad's)");
    return false;
  }
  const char *extra = !(has & HAS_IGNORE) && o.use_ignore_index ? "ignore_index"
                      : !(has & HAS_WEIGHT) && o.weight       ? "weight"
                      : !(has & HAS_POS_WEIGHT) && o.pos_weight ? "pos_weight"
                                                               : NULL;
  if (extra) {
    tg_set_error(TG_ERR_ARG, "%s: this loss has no %s (as tinygrad's)", op, extra);
    return false;
  }
  return true;
}

tg_loss_opts tg_loss_defaults(void) { return (tg_loss_opts){.reduction = TG_REDUCTION_MEAN, .ignore_index = -1}; }

/* unreduced's sum divided by count (mean), its sum, or itself, as o.reduction says */
static tg_tensor *reduce_loss(tmps *s, tg_tensor *unreduced, tg_tensor *count, tg_loss_opts o) {
  if (o.reduction == TG_REDUCTION_NONE) return unreduced;
  tg_tensor *total = tmp(s, tg_sum(unreduced, 0, NULL, false));
  if (o.reduction == TG_REDUCTION_SUM) return total;
  return tmp(s, count ? tg_div(total, count) : tg_div_scalar(total, (double)tg_numel(unreduced)));
}

/* the labels that count: labels != ignore_index, or all of them (bool, the labels' shape) */
static tg_tensor *label_mask(tmps *s, tg_tensor *labels, bool use_ignore, int64_t ignore_index) {
  if (!use_ignore) return tmp(s, tg_full(TG_BOOL, TNDIM(labels), TSHAPE(labels), 1));
  return tmp(s, tg_ne(labels, tmp(s, tg_scalar(TDT(labels), (double)ignore_index))));
}

/* tinygrad's sparse_categorical_crossentropy, class axis last:
 *   -sum((1 - ls) * sum(log_probs * onehot * mask) + ls * mean(log_probs) * mask) / sum(mask)
 * ignore_index -1 ignores nothing (tinygrad's "none"), so a label -1 adds 0 and counts in the mean */
tg_tensor *tg_sparse_categorical_crossentropy(tg_tensor *logits, tg_tensor *labels, tg_loss_opts o) {
  const char *op = "tg_sparse_categorical_crossentropy";
  if (!logits || !labels) return NULL;
  if (!check_labels(op, logits, labels, TNDIM(logits) - 1, true) || !check_opts(op, o, HAS_SMOOTHING | HAS_IGNORE)) return NULL;
  tmps s = TMPS(op);
  int nd = TNDIM(logits);
  double ls = o.label_smoothing;
  tg_tensor *lp = tmp(&s, tg_log_softmax(logits, -1));
  tg_tensor *mask = label_mask(&s, labels, o.use_ignore_index && o.ignore_index != -1, o.ignore_index);
  tg_tensor *hot = tmp(&s, tg_mul(one_hot_mask(&s, labels, TSHAPE(logits)[nd - 1]), tmp(&s, tg_unsqueeze(mask, -1))));
  tg_tensor *zero = tmp(&s, tg_scalar(TDT(lp), 0));
  tg_tensor *picked = tmp(&s, tg_sum(tmp(&s, tg_where(hot, lp, zero)), 1, (int[]){-1}, false));
  tg_tensor *unreduced = tmp(&s, tg_mul_scalar(picked, 1 - ls));
  if (ls != 0) {
    tg_tensor *smooth = tmp(&s, tg_mul(tmp(&s, tg_mul_scalar(tmp(&s, tg_mean(lp, 1, (int[]){-1}, false)), ls)), mask));
    unreduced = tmp(&s, tg_add(unreduced, smooth));
  }
  unreduced = tmp(&s, tg_neg(unreduced));
  return tmps_end(&s, reduce_loss(&s, unreduced, tmp(&s, tg_sum(mask, 0, NULL, false)), o));
}

/* tinygrad's cross_entropy: targets are probabilities of the logits' shape, or integer labels (one-hot) */
tg_tensor *tg_cross_entropy(tg_tensor *logits, tg_tensor *target, tg_loss_opts o) {
  const char *op = "tg_cross_entropy";
  if (!logits || !target) return NULL;
  if (!check_opts(op, o, HAS_SMOOTHING)) return NULL;
  double label_smoothing = o.label_smoothing;
  int nd = TNDIM(logits);
  if (nd < 1) {
    tg_set_error(TG_ERR_ARG, "%s: logits need at least 1 dimension", op);
    return NULL;
  }
  int ca = axis1(logits);
  bool same = TNDIM(target) == nd;
  for (int i = 0; same && i < nd; i++) same = TSHAPE(target)[i] == TSHAPE(logits)[i];
  if (!same && !check_labels(op, logits, target, ca, true)) return NULL;
  tmps s = TMPS(op);
  tg_dtype dt = dtype_is_float(TDT(logits)) ? TDT(logits) : TG_FLOAT32;
  int64_t c = TSHAPE(logits)[ca];
  tg_tensor *y = target;
  if (!same) y = tmp(&s, tg_eq(tmp(&s, tg_unsqueeze(target, ca)), arange_col(&s, c, nd - ca - 1)));
  y = tmp(&s, tg_cast(y, dt));
  y = tmp(&s, tg_add_scalar(tmp(&s, tg_mul_scalar(y, 1 - label_smoothing)), label_smoothing / (double)c));
  tg_tensor *l = tmp(&s, tg_sum(tmp(&s, tg_mul(tmp(&s, tg_log_softmax(logits, ca)), y)), 1, &ca, false));
  return tmps_end(&s, reduce_loss(&s, tmp(&s, tg_neg(l)), NULL, o));
}

/* tinygrad's nll_loss: -log_probs picked by the labels * w, w = weight[label] (1 without weight) * mask;
 * the mean is sum(-picked * w) / sum(w) */
tg_tensor *tg_nll_loss(tg_tensor *log_probs, tg_tensor *labels, tg_loss_opts o) {
  const char *op = "tg_nll_loss";
  if (!log_probs || !labels) return NULL;
  if (!check_labels(op, log_probs, labels, axis1(log_probs), true) || !check_opts(op, o, HAS_IGNORE | HAS_WEIGHT))
    return NULL;
  int ca = axis1(log_probs);
  int64_t c = TSHAPE(log_probs)[ca];
  if (o.weight && (TNDIM(o.weight) != 1 || TSHAPE(o.weight)[0] != c)) {
    char a[SB];
    tg_set_error(TG_ERR_ARG, "%s: weight %s must have one value per class (%lld)", op,
                 shape_str(a, sizeof a, TNDIM(o.weight), TSHAPE(o.weight)), (long long)c);
    return NULL;
  }
  tmps s = TMPS(op);
  tg_tensor *picked = tmp(&s, tg_gather(log_probs, ca, tmp(&s, tg_unsqueeze(labels, ca))));
  picked = tmp(&s, tg_squeeze(picked, ca));
  tg_tensor *w = tmp(&s, tg_cast(label_mask(&s, labels, o.use_ignore_index, o.ignore_index), TDT(picked)));
  if (o.weight) {  /* weight[label], 0 for a label out of range (tinygrad's gather) */
    tg_tensor *wl = tmp(&s, tg_embedding(tmp(&s, tg_reshape(o.weight, 2, (int64_t[]){c, 1})), labels));
    w = tmp(&s, tg_mul(w, tmp(&s, tg_squeeze(wl, -1))));
  }
  tg_tensor *unreduced = tmp(&s, tg_neg(tmp(&s, tg_mul(picked, w))));
  return tmps_end(&s, reduce_loss(&s, unreduced, tmp(&s, tg_sum(w, 0, NULL, false)), o));
}

/* integer or bool targets as float32, so that 1 - y is arithmetic */
static tg_tensor *as_float(tmps *s, tg_tensor *t) { return dtype_is_float(TDT(t)) ? t : tmp(s, tg_cast(t, TG_FLOAT32)); }

/* mean(-y log p - (1 - y) log(1 - p)); as tinygrad, the logs are not clamped at -100 as PyTorch's are */
tg_tensor *tg_binary_crossentropy(tg_tensor *probs, tg_tensor *targets, tg_loss_opts o) {
  if (!probs || !targets || !check_opts("tg_binary_crossentropy", o, 0)) return NULL;
  tmps s = TMPS("tg_binary_crossentropy");
  targets = as_float(&s, targets);
  tg_tensor *one_m_y = tmp(&s, tg_add_scalar(tmp(&s, tg_neg(targets)), 1));
  tg_tensor *one_m_p = tmp(&s, tg_add_scalar(tmp(&s, tg_neg(probs)), 1));
  tg_tensor *a = tmp(&s, tg_mul(targets, tmp(&s, tg_log(probs))));
  tg_tensor *b = tmp(&s, tg_mul(one_m_y, tmp(&s, tg_log(one_m_p))));
  return tmps_end(&s, reduce_loss(&s, tmp(&s, tg_neg(tmp(&s, tg_add(a, b)))), NULL, o));
}

/* mean(pw * y * softplus(-x) + (1 - y) * softplus(x)): tinygrad's -(pw y logsigmoid(x) + (1-y) logsigmoid(-x)),
 * pw = pos_weight (broadcast with the rest) or 1 */
tg_tensor *tg_binary_crossentropy_logits(tg_tensor *logits, tg_tensor *targets, tg_loss_opts o) {
  if (!logits || !targets || !check_opts("tg_binary_crossentropy_logits", o, HAS_POS_WEIGHT)) return NULL;
  tmps s = TMPS("tg_binary_crossentropy_logits");
  targets = as_float(&s, targets);
  tg_tensor *one_m_y = tmp(&s, tg_add_scalar(tmp(&s, tg_neg(targets)), 1));
  tg_tensor *pos = o.pos_weight ? tmp(&s, tg_mul(o.pos_weight, targets)) : targets;
  tg_tensor *a = tmp(&s, tg_mul(pos, tmp(&s, tg_softplus(tmp(&s, tg_neg(logits))))));
  tg_tensor *b = tmp(&s, tg_mul(one_m_y, tmp(&s, tg_softplus(logits))));
  return tmps_end(&s, reduce_loss(&s, tmp(&s, tg_add(a, b)), NULL, o));
}
