/* ops_shape.c — ONNX operators (see onnx_op.h for the contract); to be filled */
#include "onnx_op.h"

const onnx_op_def onnx_ops_shape[] = {
    {NULL, NULL, 0, NULL},
};
