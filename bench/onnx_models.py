"""Writes the models of bench/onnx.sh with the onnx package's helper API, random weights (seeded), and one set
of random inputs per model as .npy files:

  resnet18     a ResNet-18-shaped network: conv 7x7/2 + batchnorm + relu, max pool, 4 stages of 2 basic
               blocks (64, 128, 256, 512 channels; 1x1/2 projections), global average pool, a 512->1000 Gemm;
               input (1, 3, 224, 224)
  mlp          784-512-256-10 Gemms with relus and a softmax; input ("batch", 784) with batch 32
  transformer  one pre-norm transformer block (256 wide, 4 heads, 128 tokens, an erf-GELU MLP of 1024):
               LayerNormalization, MatMul, Reshape, Transpose, Softmax, Erf; input (1, 128, 256)
  light_*      the onnx package's own light model tests (onnx/backend/test/data/light, in the PyPI wheel; not in
               Debian's libonnx-testdata), where present: their weights are ConstantOfShape nodes

Prints one line per model: "name<TAB>model path<TAB>input .npy paths, comma separated<TAB>--dim flags".
Usage: python3 bench/onnx_models.py OUT_DIR [--no-light]"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
rng = np.random.default_rng(0)


class Graph:
    """nodes and initializers under unique names"""

    def __init__(self):
        self.nodes, self.inits, self.k = [], [], 0

    def name(self, what):
        self.k += 1
        return f"{what}_{self.k}"

    def const(self, what, a):
        n = self.name(what)
        self.inits.append(numpy_helper.from_array(np.asarray(a), n))
        return n

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def model(self, inputs, outputs, name):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tgc bench/onnx_models.py")
        m.ir_version = 8  # opset 17's IR version: onnxruntime and older readers take it
        onnx.checker.check_model(m)
        return m


def f32(a):
    return np.asarray(a, dtype=np.float32)


def conv_bn(g, x, cin, cout, k, stride, relu=True):
    w = g.const("w", f32(rng.normal(0, np.sqrt(2 / (cin * k * k)), (cout, cin, k, k))))
    y = g.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
    scale, bias = g.const("bn_s", f32(rng.uniform(0.5, 1.5, cout))), g.const("bn_b", f32(rng.normal(0, 0.1, cout)))
    mean, var = g.const("bn_m", f32(rng.normal(0, 0.1, cout))), g.const("bn_v", f32(rng.uniform(0.5, 1.5, cout)))
    y = g.op("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5)
    return g.op("Relu", [y]) if relu else y


def resnet18():
    g = Graph()
    x = g.op("Relu", [conv_bn(g, "input", 3, 64, 7, 2, relu=False)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate([64, 128, 256, 512]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = conv_bn(g, x, cin, cout, 3, stride)
            y = conv_bn(g, y, cout, cout, 3, 1, relu=False)
            skip = conv_bn(g, x, cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else x
            x = g.op("Relu", [g.op("Add", [y, skip])])
            cin = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    w, b = g.const("fc_w", f32(rng.normal(0, 0.03, (1000, 512)))), g.const("fc_b", f32(rng.normal(0, 0.01, 1000)))
    g.nodes.append(helper.make_node("Gemm", [x, w, b], ["output"], transB=1))
    return g.model([helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], "resnet18")


def mlp():
    g = Graph()
    x, sizes = "x", [784, 512, 256, 10]
    for i in range(3):
        w = g.const("w", f32(rng.normal(0, np.sqrt(2 / sizes[i]), (sizes[i], sizes[i + 1]))))
        b = g.const("b", f32(rng.normal(0, 0.01, sizes[i + 1])))
        x = g.op("Gemm", [x, w, b])
        if i < 2:
            x = g.op("Relu", [x])
    g.nodes.append(helper.make_node("Softmax", [x], ["probs"], axis=-1))
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])], "mlp")


def transformer(T=128, D=256, H=4, F=1024):
    g = Graph()

    def ln(x):
        return g.op("LayerNormalization", [x, g.const("ln_g", f32(rng.uniform(0.8, 1.2, D))),
                                           g.const("ln_b", f32(rng.normal(0, 0.05, D)))], axis=-1, epsilon=1e-5)

    def linear(x, i, o):
        y = g.op("MatMul", [x, g.const("w", f32(rng.normal(0, 1 / np.sqrt(i), (i, o))))])
        return g.op("Add", [y, g.const("b", f32(rng.normal(0, 0.01, o)))])

    heads = g.const("heads_shape", np.array([1, T, H, D // H], dtype=np.int64))
    flat = g.const("flat_shape", np.array([1, T, D], dtype=np.int64))

    def split(x):  # (1, T, D) -> (1, H, T, D/H)
        return g.op("Transpose", [g.op("Reshape", [x, heads])], perm=[0, 2, 1, 3])

    h = ln("x")
    q, k, v = (split(linear(h, D, D)) for _ in range(3))
    s = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), g.const("sqrt_d", f32(np.sqrt(D // H)))])
    a = g.op("MatMul", [g.op("Softmax", [s], axis=-1), v])
    a = g.op("Reshape", [g.op("Transpose", [a], perm=[0, 2, 1, 3]), flat])
    x = g.op("Add", ["x", linear(a, D, D)])
    u = linear(ln(x), D, F)
    gelu = g.op("Mul", [g.op("Mul", [u, g.const("half", f32(0.5))]),
                        g.op("Add", [g.op("Erf", [g.op("Div", [u, g.const("sqrt2", f32(np.sqrt(2)))])]), g.const("one", f32(1))])])
    g.nodes.append(helper.make_node("Add", [x, linear(gelu, F, D)], ["y"]))
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, D])], "transformer")


NP_OF = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.INT64: np.int64,
         TensorProto.INT32: np.int32, TensorProto.FLOAT16: np.float16, TensorProto.UINT8: np.uint8,
         TensorProto.INT8: np.int8, TensorProto.BOOL: np.bool_}


def write_inputs(out, name, model, dims):
    """one random array per graph input that is not an initializer, of its declared shape (named dims from dims)"""
    inits = {i.name for i in model.graph.initializer}
    paths = []
    for k, vi in enumerate(i for i in model.graph.input if i.name not in inits):
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims.get(d.dim_param, 1) for d in tt.shape.dim]
        dt = NP_OF[tt.elem_type]
        a = rng.standard_normal(shape).astype(dt) if np.issubdtype(dt, np.floating) else rng.integers(0, 10, shape).astype(dt)
        p = os.path.join(out, f"{name}_input_{k}.npy")
        np.save(p, a)
        paths.append(p)
    return paths


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    models = [("resnet18", resnet18(), {}), ("mlp", mlp(), {"batch": 32}), ("transformer", transformer(), {})]
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    if "--no-light" not in sys.argv:
        if os.path.isdir(light):
            for f in sorted(os.listdir(light)):
                if f.startswith("light_") and f.endswith(".onnx"):
                    models.append((f[:-5], onnx.load(os.path.join(light, f)), {}))
        else:
            print(f"# no light models: {light} is missing (Debian's libonnx-testdata has none either)", file=sys.stderr)
    for name, m, dims in models:
        path = os.path.join(out, name + ".onnx")
        onnx.save(m, path)
        ins = write_inputs(out, name, m, dims)
        print(f"{name}\t{path}\t{','.join(ins)}\t{' '.join(f'--dim {k}={v}' for k, v in dims.items())}")


if __name__ == "__main__":
    main()
