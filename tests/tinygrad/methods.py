#!/usr/bin/env python3
"""Survey: tinygrad's Tensor public methods and properties against tg.h / libtg.so.

  python3 tests/tinygrad/methods.py [--tinygrad /work/tinygrad-src] [--all]

Introspects the real tinygrad Tensor class (tensor.py and its mixins) and marks each public name:
  has      tg_<name> exists, or the shim's mapping table (tgshim/tensor.py, @maps) names tg functions that all exist
  alias    tgc has it under another name (the note says which)
  n/a      outside tg.h's scope (devices, tinygrad internals, Python protocol), with the reason
  missing  neither
"""
import argparse, inspect, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))

# names whose tinygrad meaning has no place in a C library's tensor API, with the reason
NA = {
  "uop": "tinygrad internals (UOp graph)", "lazydata": "tinygrad internals", "schedule": "tinygrad internals",
  "schedule_with_vars": "tinygrad internals", "schedule_linear": "tinygrad internals", "linear_with_vars": "tinygrad internals",
  "kernelize": "tinygrad internals", "callify": "tinygrad internals", "custom_kernel": "tinygrad internals (UOp kernels)",
  "call": "tinygrad internals (UOp functions)", "as_param": "tinygrad internals", "is_param": "tinygrad internals",
  "is_param_": "tinygrad internals", "alu": "tinygrad internals (UOp ALU)", "const": "tinygrad internals (UOp const)",
  "const_like": "tinygrad internals (UOp const)", "invalids": "tinygrad internals (invalid UOp)", "ufix": "tinygrad internals",
  "usum": "tinygrad internals", "uprod": "tinygrad internals", "threefry": "tinygrad's RNG primitive (tgc has its own generator)",
  "random_bits": "tinygrad's RNG primitive", "shard": "multi-device", "shard_": "multi-device", "to_": "in-place device move",
  "from_uop": "tinygrad internals", "shard_like": "multi-device", "decode_hevc_frame": "video decoding (hardware HEVC)", "from_blob": "tgc has tg_from_blob (raw pointer)", "from_url": "network I/O",
  "image_dot": "IMAGE dtype (Qualcomm GPUs)", "image_conv2d": "IMAGE dtype", "keccak": "hash function on uint8 data",
  "hash": "hash function", "training": "class flag: tg_set_training/tg_training", "no_grad": "class flag",
  "device": "tg_device", "train": "context manager: tg_set_training", "test": "context manager: tg_set_training",
  "max_shape": "symbolic shapes (tgc: tg_variable)", "max_numel": "symbolic shapes", "shrink_to": "symbolic shapes",
  "pad_to": "symbolic shapes", "data": "Python memoryview (tg_to_host)", "grad": "tg_grad", "requires_grad": "tg_requires_grad",
  "replace": "swaps a tensor's graph (tg_assign covers updates)", "clone": None, "dtype": "tg_dtype_of", "shape": "tg_shape_ptr",
  "ndim": "tg_ndim", "numel": "tg_numel", "T": "tg_transpose", "realize": None, "to": "tg_to",
}
# tinygrad names that tgc has under another name (beyond the shim's @maps notes)
ALIAS = {
  "numpy": "tg_to_host", "item": "tg_item", "tolist": "tg_to_host", "dtype": "tg_dtype_of", "shape": "tg_shape_ptr",
  "ndim": "tg_ndim", "numel": "tg_numel", "T": "tg_transpose", "device": "tg_device", "to": "tg_to", "grad": "tg_grad",
  "requires_grad": "tg_requires_grad", "element_size": "tg_dtype_size", "nbytes": "tg_numel * tg_dtype_size",
  "size": "tg_shape", "float": "tg_cast", "half": "tg_cast", "int": "tg_cast", "bool": "tg_cast", "bfloat16": "tg_cast",
  "double": "tg_cast", "long": "tg_cast", "short": "tg_cast", "is_floating_point": "tg_dtype_of", "data": "tg_to_host",
  "training": "tg_training", "train": "tg_set_training", "test": "tg_set_training", "clip": "tg_clamp",
  "swish": "tg_silu", "view": "tg_reshape", "chunk": "tg_split", "sequential": "(a loop in C)",
  "empty_like": "tg_empty", "from_blob": "tg_from_blob", "manual_seed": "tg_manual_seed",
}


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--tinygrad", default=os.environ.get("TINYGRAD_SRC", "/work/tinygrad-src"))
  ap.add_argument("--all", action="store_true", help="print every name, not only the missing ones")
  args = ap.parse_args()
  sys.path.insert(0, args.tinygrad); sys.path.insert(0, HERE)
  import tinygrad
  Real = tinygrad.Tensor
  from tgshim import lib as L
  from tgshim.tensor import MAPS
  names = sorted(n for n in dir(Real) if not n.startswith("_"))
  rows = []
  for n in names:
    obj = inspect.getattr_static(Real, n)
    kind = "property" if isinstance(obj, property) else ("static" if isinstance(obj, (staticmethod, classmethod)) else "method")
    if not callable(getattr(Real, n, None)) and kind == "method": kind = "attr"
    tg = "tg_" + n
    if L.has(tg):
      rows.append((n, kind, "has", tg)); continue
    if n in MAPS and MAPS[n][0] and all(L.has(f) for f in MAPS[n][0][:1]):
      note = MAPS[n][1]
      rows.append((n, kind, "alias" if note and "alias" in note or MAPS[n][0][0] != tg else "has",
                   ", ".join(MAPS[n][0]) + (f" ({note})" if note else ""))); continue
    if n in ALIAS:
      rows.append((n, kind, "alias", ALIAS[n])); continue
    if n in NA and NA[n]:
      rows.append((n, kind, "n/a", NA[n])); continue
    rows.append((n, kind, "missing", ""))
  from collections import Counter
  c = Counter(r[2] for r in rows)
  total = len(rows)
  inscope = total - c["n/a"]
  print(f"tinygrad Tensor public names: {total} (tinygrad {open(os.path.join(args.tinygrad, 'COMMIT')).read().strip() if os.path.exists(os.path.join(args.tinygrad, 'COMMIT')) else '?'})")
  print(f"  has {c['has']}, alias {c['alias']}, n/a {c['n/a']}, missing {c['missing']}")
  print(f"  tgc covers {c['has'] + c['alias']} of {inscope} in-scope names ({100.0 * (c['has'] + c['alias']) / max(1, inscope):.1f}%)")
  for status in (["has", "alias", "n/a", "missing"] if args.all else ["missing"]):
    sel = [r for r in rows if r[2] == status]
    print(f"\n{status} ({len(sel)}):")
    for n, kind, _, note in sel: print(f"  {n:32s} {kind:9s} {note}")
  dunder = [n for n in dir(Real) if n.startswith("__") and n.endswith("__") and n not in dir(object) and callable(getattr(Real, n))]
  shim_dunder = {n for n in dir(__import__("tgshim.tensor", fromlist=["Tensor"]).Tensor)}
  lacking = [n for n in dunder if n not in shim_dunder]
  print(f"\noperators (dunder methods) tinygrad defines: {len(dunder)}; the shim maps {len(dunder) - len(lacking)}"
        + (f"; not mapped: {', '.join(lacking)}" if lacking else "")
        + "\n(without them Python runs x op= y as x = x op y: a new tensor, where tinygrad assigns in place)")


if __name__ == "__main__":
  main()
