/* ops_math.h — private to the math operators (ops_math.c, ops_math_reduce.c, ops_math_signal.c,
 * ops_math_random.c, ops_math_text.c, ops_math_known.c): the way an operator body runs inside its own scope,
 * the operators the table in ops_math.c lists from the other files, and the host evaluation of shape
 * arithmetic on values the runner knows. */
#ifndef TG_ONNX_OPS_MATH_H
#define TG_ONNX_OPS_MATH_H

#include "onnx_op.h"

/* Defines operator `name` (onnx_op_fn): its body runs inside a tg scope, so every temporary tensor it makes
 * is freed when it returns; it hands results out with math_out, which moves them out of the scope. */
#define MATH_OP(name)                                                                                    \
  static tg_status name##_body(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out); \
  tg_status name(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out) {             \
    tg_scope_begin();                                                                                    \
    tg_status st_ = name##_body(c, n, in, out);                                                          \
    tg_scope_end();                                                                                      \
    return st_;                                                                                          \
  }                                                                                                      \
  static tg_status name##_body(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out)

/* input i, NULL when the node leaves it out ("" or past its nin inputs: in[] has nin entries) */
static inline tg_tensor *math_in(const onnx_node *n, tg_tensor *const *in, int i) { return i < n->nin ? in[i] : NULL; }
/* out[k] = t moved out of the operator's scope; t NULL: the node's failure with tg_error()'s message */
tg_status math_out(const onnx_node *n, tg_tensor **out, int k, tg_tensor *t);
/* the node's failure carrying tg_error() (after a tg_ call returned NULL or a status) */
tg_status math_fail_tg(const onnx_node *n);
/* t converted to dt unless it already is dt (ONNX ops keep their input's type where tinygrad promotes) */
tg_tensor *math_cast_to(tg_tensor *t, tg_dtype dt);
/* a new handle on t's value (an operator must never hand out one of its inputs: math_out would move it out of
 * the runner's scope) */
tg_tensor *math_copy(tg_tensor *t);
/* axis in [-ndim, ndim) made non-negative, or -1 after recording the node's failure */
int math_axis(const onnx_node *n, int64_t axis, int ndim);

/* ---- operators of ops_math_reduce.c ---- */
tg_status op_reduce(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);     /* Reduce* */
tg_status op_argmax(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);     /* ArgMax, ArgMin */
tg_status op_softmax(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);    /* (Log)Softmax, Hardmax */
tg_status op_topk(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status op_cumsum(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status op_einsum(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status op_det(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ---- operators of ops_math_signal.c ---- */
tg_status op_window(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);   /* Hann, Hamming, Blackman */
tg_status op_dft(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status op_stft(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status op_mel_weight_matrix(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ---- operators of ops_math_random.c ---- */
tg_status op_random(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);   /* Random{Normal,Uniform}[Like] */
tg_status op_bernoulli(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status op_multinomial(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ---- operators of ops_math_text.c ---- */
tg_status op_tfidf(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);   /* TfIdfVectorizer */

/* ---- values known on the host (ops_math_known.c) ---- */
/* whether input i's values are on the host already: reading them (onnx_input_ints/_doubles) runs no kernel and
 * reads no device memory, so it is safe inside a tg_jit capture */
bool math_input_known(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i);
/* Shape arithmetic: when every input of the node is a small (rank <= 1) integer or bool tensor whose values the
 * runner holds, computes output 0's values on the host as the kernel would and records them with
 * onnx_set_known, so later operators that read them as ints run no kernel. Best effort and silent: any input
 * not known leaves the output unrecorded. */
void math_known(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, const tg_tensor *result);

#endif
