"""Writes ONNX's node backend tests from the installed onnx package's own case definitions
(onnx.backend.test.case.node) into DIR/node/<test>/ (model.onnx, test_data_set_0/input_K.pb and output_K.pb),
the layout build/onnx_backend reads. The onnx wheel ships no node data and Debian's libonnx-testdata is onnx
1.12's; this gives the tests of the newest operators (Attention, RMSNormalization, ...) to run with
    /path/to/python tests/onnx_backend/make_node_data.py build/onnx-node-data
    ./build/onnx_backend --data build/onnx-node-data
Cases whose data onnx cannot serialize (float4/int2 and the like) are listed as skipped. Needs numpy, onnx."""
import os
import shutil
import sys

import numpy as np
import onnx.backend.test.case.node as node
from onnx import numpy_helper


def serialize(value, info):
    """a test value as the protobuf its graph input or output type asks for"""
    t = info.type
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, info.name).SerializeToString()
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, info.name).SerializeToString()
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, info.name).SerializeToString()
    if not hasattr(value, "shape"):
        value = np.array(value)
    return numpy_helper.from_array(value, info.name).SerializeToString()


def main(out):
    cases = node.collect_testcases("")
    written = skipped = 0
    for case in cases:
        d = os.path.join(out, "node", case.name)
        if os.path.exists(d):
            shutil.rmtree(d)
        try:
            os.makedirs(d)
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(case.model.SerializeToString())
            for i, (inputs, outputs) in enumerate(case.data_sets):
                ds = os.path.join(d, f"test_data_set_{i}")
                os.makedirs(ds)
                for j, v in enumerate(inputs):
                    with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                        f.write(serialize(v, case.model.graph.input[j]))
                for j, v in enumerate(outputs):
                    with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                        f.write(serialize(v, case.model.graph.output[j]))
            written += 1
        except Exception as e:  # a value onnx's numpy_helper cannot write
            shutil.rmtree(d, ignore_errors=True)
            print(f"skipped {case.name}: {str(e)[:100]}")
            skipped += 1
    print(f"{written} node tests in {out}/node ({skipped} skipped)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_node_data.py DIR")
    main(sys.argv[1])
