/* ops_nn.h — private to the ONNX neural-network operators (ops_nn*.c): the helpers they share and the
 * operator functions the table in ops_nn.c lists.
 *
 * Every operator follows one pattern: tg_scope_begin(), build the outputs from tg.h calls (temporaries
 * belong to the scope), then nn_done() keeps the outputs, closes the scope and turns a NULL into the
 * node's error. So no operator frees a temporary by hand and none leaks on an error path. */
#ifndef TG_ONNX_OPS_NN_H
#define TG_ONNX_OPS_NN_H

#include "onnx_op.h"

/* input i of the node, NULL when left out (the runner passes nin slots) */
#define NN_IN(i) ((i) < n->nin ? in[i] : NULL)

/* true when the node asks for output k */
bool nn_wants(const onnx_node *n, int k);
/* Ends the operator's scope: keeps res[0..k) into out (only the outputs the node has), closes the scope and
 * returns TG_OK; a NULL res[i] for an output the node wants is a failure: tg_error() (made an error of this
 * node unless nn_err already named it) is returned and nothing is kept */
tg_status nn_done(const onnx_node *n, tg_tensor **out, int k, tg_tensor *const *res);
/* records an error of this node (as onnx_fail) and returns NULL, for use inside an operator's scope */
tg_tensor *nn_err(const onnx_node *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* x reshaped to (1, C, 1, ...) of rank ndim (a per-channel vector against an (N, C, ...) tensor) */
tg_tensor *nn_per_channel(tg_tensor *v, int ndim);
/* a 0-d or 1-element tensor, or a vector along axis of an ndim tensor (per-axis quantization) */
tg_tensor *nn_along_axis(tg_tensor *v, int axis, int ndim);
/* the dtype's lowest and highest values, as doubles (integers) */
void nn_int_range(tg_dtype dt, double *lo, double *hi);

/* Bounds on window attributes (kernel, stride, dilation, pads) and on spatial sizes: every product of two
 * stays far inside int64 (a hostile file cannot overflow the size arithmetic) */
#define NN_MAX_WINDOW ((int64_t)1 << 24)
#define NN_MAX_SPATIAL ((int64_t)1 << 31)

/* The window attributes shared by Conv, ConvTranspose and the pools: kernel_shape, strides, dilations,
 * pads (ONNX order: every begin, then every end) and auto_pad. */
typedef struct nn_window {
  int nd;                        /* spatial dims, 1 to TG_CONV_DIMS */
  int64_t k[TG_CONV_DIMS], s[TG_CONV_DIMS], d[TG_CONV_DIMS];
  int64_t begin[TG_CONV_DIMS], end[TG_CONV_DIMS];
} nn_window;
/* Reads the attributes for input x (N, C, *spatial): kernel from the attribute, or from kernel (a weight's
 * spatial sizes) when the node lacks it; auto_pad SAME_UPPER/SAME_LOWER pads for an output of
 * ceil(in / stride), with the window's dilated extent when dilate_same (Conv: as onnxruntime), else the
 * kernel alone; VALID: no padding. True, or false with the node's error recorded. */
bool nn_window_read(const onnx_node *n, tg_tensor *x, const int64_t *kernel, bool dilate_same, nn_window *w);
/* tg's per-side padding (last dimension first) of the window */
tg_ints nn_window_pads(const nn_window *w);
tg_ints nn_ints(int nd, const int64_t *v);

/* ops_nn.c: matrix products and convolutions */
tg_status onnx_nn_gemm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_matmul(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_conv(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_conv_transpose(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
/* Conv of x and w as the node's attributes say (bias may be NULL), inside the caller's scope */
tg_tensor *nn_conv(const onnx_node *n, tg_tensor *x, tg_tensor *w, tg_tensor *bias);

/* ops_nn_pool.c */
tg_status onnx_nn_average_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_max_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_lp_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_global_average_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_global_max_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_global_lp_pool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_max_unpool(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_nn_norm.c: normalizations, dropout, losses */
tg_status onnx_nn_batch_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_instance_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_layer_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
/* ops_nn_attention.c: Attention (opset 23 on), RotaryEmbedding and TensorScatter */
tg_status onnx_nn_attention_std(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_rotary_embedding(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_tensor_scatter(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_lp_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_rms_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_group_norm_18(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_group_norm_21(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_lrn(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_mvn(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_dropout_6(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_dropout_7(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_dropout_12(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_nll_loss(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_sce_loss(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_nn_ms.c: com.microsoft operators */
tg_status onnx_nn_fast_gelu(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_bias_gelu(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_skip_layer_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_embed_layer_norm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_attention(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_nn_resize.c */
tg_status onnx_nn_resize(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_upsample_7(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_upsample_9(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_grid_sample(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_affine_grid(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_nn_quant.c */
tg_status onnx_nn_quantize_linear(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_dequantize_linear(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_dynamic_quantize_linear(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_matmul_integer(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_conv_integer(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_qlinear_matmul(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_qlinear_conv(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_nn_detect.c: object detection */
tg_status onnx_nn_nms(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_roi_align(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_nn_rnn.c */
tg_status onnx_nn_rnn(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_gru(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_nn_lstm(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

#endif
