#!/usr/bin/env python3
"""onnx_tinygrad.py — ONNX's backend node tests (the data build/onnx_backend runs) through tinygrad's OnnxRunner,
for the pass count side by side with tgc's (issue: "report the pass count next to tinygrad's OnnxRunner").

  python3 bench/onnx_tinygrad.py [--data DIR] [--exclude-file external_test_onnx_backend.py] [FILTER...]

Every test_* directory under DIR (default /usr/share/libonnx-testdata/data, and its node/, pytorch-converted/,
pytorch-operator/, simple/) runs model.onnx through tinygrad.nn.onnx.OnnxRunner on each test_data_set_*,
compared as onnx's runner compares (rtol 1e-3, atol 1e-7). Tests tinygrad's own test file excludes
(backend_test.exclude patterns, read from test/external/external_test_onnx_backend.py when given) are
counted apart. Prints one line per test and "tinygrad: N passed, N failed, N excluded of N". Needs tinygrad,
onnx and numpy (pip); not part of pass/fail.
"""
import glob, os, re, sys, time
import numpy as np
import onnx
from onnx import numpy_helper

def read_pb(path):
  t = onnx.TensorProto()
  with open(path, "rb") as f: t.ParseFromString(f.read())
  return numpy_helper.to_array(t)

def exclusions(path):
  if not path: return []
  src = open(path).read()
  return [re.compile(p.replace("*", ".*")) for p in re.findall(r"backend_test\.exclude\('([^']*)'\)", src)]

def main():
  args, data, excl_file = sys.argv[1:], "/usr/share/libonnx-testdata/data", None
  filters = []
  while args:
    a = args.pop(0)
    if a == "--data": data = args.pop(0)
    elif a == "--exclude-file": excl_file = args.pop(0)
    else: filters.append(a)
  from tinygrad import Tensor
  from tinygrad.nn.onnx import OnnxRunner
  excl = exclusions(excl_file)
  dirs = []
  for sub in ["", "node", "pytorch-converted", "pytorch-operator", "simple"]:
    dirs += [d for d in glob.glob(os.path.join(data, sub, "test_*")) if os.path.isfile(os.path.join(d, "model.onnx"))]
  dirs = sorted(set(dirs), key=os.path.basename)
  if filters: dirs = [d for d in dirs if any(f in os.path.basename(d) for f in filters)]
  counts = {"pass": 0, "FAIL": 0, "excluded": 0}
  t0 = time.time()
  for d in dirs:
    name = os.path.basename(d)
    if any(p.search(name + "_cpu") for p in excl):
      counts["excluded"] += 1
      print(f"{name:60s} excluded")
      continue
    result, why = "pass", ""
    try:
      model = onnx.load(os.path.join(d, "model.onnx"))
      inits = {i.name for i in model.graph.initializer}
      names = [i.name for i in model.graph.input if i.name not in inits]
      runner = OnnxRunner(Tensor(open(os.path.join(d, "model.onnx"), "rb").read(), device="PYTHON"))
      for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        ins = [read_pb(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
        want = [read_pb(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))]
        out = runner(dict(zip(names, ins)))
        got = [x.numpy() if isinstance(x, Tensor) else np.array(x) for x in out.values()]
        if len(got) != len(want): raise AssertionError(f"{len(got)} outputs, expected {len(want)}")
        for g, w in zip(got, want):
          if g.shape != w.shape: raise AssertionError(f"shape {g.shape}, expected {w.shape}")
          if w.dtype.kind in "fc": np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-7)
          else: np.testing.assert_array_equal(g, w)
    except Exception as e:  # a failure of any kind counts against the test, as in onnx's runner
      result, why = "FAIL", (type(e).__name__ + ": " + str(e)).replace("\n", " ")[:160]
    counts[result] += 1
    print(f"{name:60s} {result} {why}", flush=True)
  print(f"tinygrad: {counts['pass']} passed, {counts['FAIL']} failed, {counts['excluded']} excluded of {len(dirs)} "
        f"({time.time() - t0:.0f}s)")

if __name__ == "__main__":
  main()
