/* ops_shape.h — what the files of shape, movement, indexing and constant-making operators (ops_shape.c,
 * ops_index.c, ops_layout.c) share: each operator as a function of onnx_op.h's form, and the helpers that
 * finish a node and carry host-known integer values (shape arithmetic) from node to node.
 *
 * Host-known values: ONNX exports compute shapes at run time (Shape -> Gather -> Unsqueeze -> Concat ->
 * Reshape). When every integer input of such a node is known on the host, the node computes its result on the
 * host too and records it with onnx_set_known, so the Reshape at the end reads its shape without a kernel and
 * a whole exported model builds its graph without running one. */
#ifndef TG_ONNX_OPS_SHAPE_H
#define TG_ONNX_OPS_SHAPE_H

#include "onnx_op.h"

/* the most values a node computes on the host (shapes are short; a mask of a few hundred still is cheap) */
#define SHAPE_KNOWN_CAP 4096

/* Operators work inside a scope: oshape_begin opens it, oshape_end keeps out[k] = t (NULL: the node failed,
 * tg_error() names the tg_ call) out of it, closes it and returns the node's status (the error renamed with
 * the node). */
void oshape_begin(void);
tg_status oshape_end(const onnx_node *n, tg_tensor *t, tg_tensor **out, int k);
/* closes the scope after out[] was filled with tg_keep'd tensors (or after a failure: st, message kept) */
tg_status oshape_close(tg_status st);

/* true when the node's input i is an integer (or bool) tensor whose values the runner holds on the host, so
 * reading them runs no kernel; its values into vals (at most cap) and their count into *count */
bool oshape_known(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, int i, int64_t *vals, int64_t cap,
                 int64_t *count);
/* a new tensor of integer or bool dtype dt and the given shape holding vals (numel of them), recorded as the
 * node's output k known on the host; NULL with tg_error() set on failure */
tg_tensor *oshape_known_out(onnx_ctx *c, int k, tg_dtype dt, int ndim, const int64_t *shape, const int64_t *vals);
bool oshape_int_dtype(tg_dtype dt);   /* integer or bool: the dtypes whose values the runner keeps on the host */
/* axis in [-ndim, ndim) as [0, ndim), or -1 with the error set naming the node */
int oshape_axis(const onnx_node *n, int64_t axis, int ndim);
int64_t oshape_numel(int ndim, const int64_t *shape);   /* the product of the sizes (1 for none) */

/* ops_shape.c */
tg_status onnx_op_shape(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_size(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_reshape(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_flatten(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_squeeze(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_unsqueeze(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_expand(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_concat(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_split(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_slice(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_constant_of_shape(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_range(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_index.c */
tg_status onnx_op_gather(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_gather_elements(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_gather_nd(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_scatter_elements(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_scatter_nd(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_nonzero(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_compress(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_onehot(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_unique(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_reverse_sequence(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

/* ops_layout.c */
tg_status onnx_op_transpose(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_tile(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_pad(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_depth_to_space(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_space_to_depth(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_col2im(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_center_crop_pad(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_eyelike(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);
tg_status onnx_op_trilu(onnx_ctx *c, const onnx_node *n, tg_tensor *const *in, tg_tensor **out);

#endif
