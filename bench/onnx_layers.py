"""Where a model's time goes, tgc beside onnxruntime: tgc's kernels (examples/onnx --bench under DEBUG=2, the
median of each kernel over the timed runs) and onnxruntime's nodes (its profiler, the median of each node over
as many runs), 2 threads each, in the order they run, with each side's sum. Kernels and nodes do not pair one to
one (tgc fuses a convolution with its batch norm, ReLU and residual; onnxruntime fuses some and reorders others
to NCHWc), so the two lists are printed side by side by position only: read them by their shapes and sums.
DEBUG=2 times each kernel alone (a wait after each), so its sum is above the whole run's median, which is printed
too. Not part of pass/fail: a tool for choosing which kernel to work on (issue 15).

Usage: python3 bench/onnx_layers.py MODEL.onnx RUNS INPUT.npy...   (the model's inputs in order: both sides run
the same arrays; bench/onnx.sh writes a model's inputs into build/bench-onnx)"""
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

from onnx_ort import session_options

THREADS = 2
KERNEL = re.compile(r"^\*\*\* \S+\s+(\d+) (\S+)\s.*?tm\s+([0-9.]+)us/")


def tgc_kernels(model, inputs, runs, root):
    """per kernel position: (name, median us) over the last `runs` runs, and the whole run's median ms"""
    env = dict(os.environ, DEBUG="2", TG_THREADS=str(THREADS))
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([os.path.join(root, "build/examples/onnx"), model, *inputs, "--out", out, "--bench", str(runs)],
                           env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"onnx_layers: examples/onnx failed ({p.returncode}): {(p.stderr or p.stdout)[-400:]}")
    text = p.stdout + p.stderr
    runs_seen, cur = [], None
    for line in text.splitlines():
        m = KERNEL.match(line)
        if not m:
            continue
        idx, name, us = int(m.group(1)), m.group(2), float(m.group(3))
        if idx == 0 or cur is None:
            cur = []
            runs_seen.append(cur)
        cur.append((name, us))
    # the timed runs are the last ones of the longest kernel count (the first run and the output's cast differ)
    n = max((len(r) for r in runs_seen), default=0)
    timed = [r for r in runs_seen if len(r) == n][-runs:]
    if not timed:
        sys.exit("onnx_layers: no DEBUG=2 kernel lines in examples/onnx's output")
    rows = [(timed[0][i][0], statistics.median(r[i][1] for r in timed)) for i in range(n)]
    m = re.search(r"^bench: .*median ([0-9.]+) ms", text, re.M)
    return rows, float(m.group(1)) if m else float("nan"), len(timed)


def ort_nodes(model, inputs, runs):
    """per node in running order: (name, op type, median us), and the whole run's median ms"""
    so = session_options(THREADS)
    so.enable_profiling = True
    with tempfile.TemporaryDirectory() as d:
        so.profile_file_prefix = os.path.join(d, "ort")
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        feed = {i.name: np.load(p) for i, p in zip(sess.get_inputs(), inputs)}
        sess.run(None, feed)
        walls = []
        for _ in range(runs):
            t = time.perf_counter()
            sess.run(None, feed)
            walls.append((time.perf_counter() - t) * 1e3)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    times, ops, order = collections.defaultdict(list), {}, []
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        if name not in ops:
            order.append(name)
        ops[name] = e.get("args", {}).get("op_name", "")
        times[name].append(e["dur"])
    # the first run is the warm-up: drop each node's first sample when it has more than `runs`
    rows = [(n, ops[n], statistics.median(times[n][-runs:])) for n in order]
    return rows, statistics.median(walls)


def main():
    if len(sys.argv) < 4 or not sys.argv[2].isdigit() or int(sys.argv[2]) == 0:
        sys.exit(__doc__ + "\n(RUNS: a positive whole number)")
    model, runs, inputs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tk, t_ms, nt = tgc_kernels(model, inputs, runs, root)
    on, o_ms = ort_nodes(model, inputs, runs)
    print(f"{os.path.basename(model)}: median us per kernel / node over {nt} runs, {THREADS} threads each")
    print(f"{'#':>3} {'tgc kernel':<34} {'us':>9}   {'onnxruntime node':<40} {'op':<14} {'us':>9}")
    for i in range(max(len(tk), len(on))):
        a = f"{tk[i][0][:34]:<34} {tk[i][1]:9.1f}" if i < len(tk) else " " * 44
        b = f"{on[i][0][:40]:<40} {on[i][1][:14]:<14} {on[i][2]:9.1f}" if i < len(on) else ""
        print(f"{i:>3} {a}   {b}")
    st, so_ = sum(r[1] for r in tk), sum(r[2] for r in on)
    print(f"sum of kernels: tgc {st / 1e3:.2f} ms, onnxruntime {so_ / 1e3:.2f} ms (ratio {so_ / st:.2f}x)")
    print(f"whole run, median: tgc {t_ms:.2f} ms (under DEBUG=2: bench/onnx.sh times it without), "
          f"onnxruntime {o_ms:.2f} ms (profiling on)")


if __name__ == "__main__":
    main()
