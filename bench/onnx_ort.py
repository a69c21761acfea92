"""The onnxruntime side of bench/onnx.sh: runs a model on .npy inputs (given in the order of the model's
inputs) on the CPU with intra_op_num_threads threads, times N runs after one warm-up, and compares each output
with the .npy file of the same (sanitized) name in TGC_DIR, as examples/onnx writes them. Prints one JSON line:
{"ms_median", "ms_best", "runs", "threads", "max_abs_diff", "max_rel_diff", "compared", "missing"}.
Usage: python3 bench/onnx_ort.py MODEL.onnx TGC_DIR N THREADS [INPUT.npy ...]"""
import json
import re
import sys
import time

import numpy as np
import onnxruntime as ort


def file_name(name, i):
    """examples/onnx.c's file_name(): letters, digits, '.', '-', '_' kept (no leading '.'), others '_'"""
    s = "".join(c if re.match(r"[A-Za-z0-9_-]", c) or (c == "." and k > 0) else "_" for k, c in enumerate(name[:200]))
    return s or f"output{i}"


def session_options(threads):
    """the CPU session both benches time: `threads` threads inside each node, nodes one after another"""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # no warnings about unused initializers in old models
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return so


def main():
    model, tgc_dir, runs, threads, inputs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
    sess = ort.InferenceSession(model, session_options(threads), providers=["CPUExecutionProvider"])
    feed = {i.name: np.load(p) for i, p in zip(sess.get_inputs(), inputs)}
    outs = sess.run(None, feed)  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        outs = sess.run(None, feed)
        times.append(1e3 * (time.perf_counter() - t0))
    times.sort()
    r = {"ms_median": times[len(times) // 2], "ms_best": times[0], "runs": runs, "threads": threads,
         "max_abs_diff": 0.0, "max_rel_diff": 0.0, "compared": 0, "missing": []}
    bases = []
    for i, (o, want) in enumerate(zip(sess.get_outputs(), outs)):
        base = file_name(o.name, i)
        f = base + f"_{i}" if base in bases else base  # as examples/onnx.c names two outputs that sanitize alike
        bases.append(base)
        try:
            got = np.load(f"{tgc_dir}/{f}.npy")
        except OSError:
            r["missing"].append(o.name)
            continue
        want = np.asarray(want)
        if got.shape != want.shape:
            r["missing"].append(f"{o.name}: shape {got.shape} vs onnxruntime's {want.shape}")
            continue
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
        if d.size:
            r["max_abs_diff"] = max(r["max_abs_diff"], float(np.nanmax(d)))
            r["max_rel_diff"] = max(r["max_rel_diff"], float(np.nanmax(d / (np.abs(want.astype(np.float64)) + 1e-6))))
        r["compared"] += 1
    print(json.dumps(r))


if __name__ == "__main__":
    main()
