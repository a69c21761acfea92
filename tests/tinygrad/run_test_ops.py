#!/usr/bin/env python3
"""Runs tinygrad's own test/backend/test_ops.py against tgc (libtg.so) through tgshim, and reports.

  python3 tests/tinygrad/run_test_ops.py setup            # extract tinygrad's source + test_ops.py (once)
  python3 tests/tinygrad/run_test_ops.py [-j 2] [-k substr] [--timeout 300] [--out FILE]

Every helper_test_op / helper_test_exception call inside a test is one *case*, recorded and then the test
goes on (a failing case does not hide the cases after it). A test method whose body raises outside those
helpers adds one "body" case. Workers run in subprocesses: a crash or a timeout costs one test method.
See README.md.
"""
import argparse, collections, json, os, re, subprocess, sys, tempfile, time, traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
MIRROR = "/work/.mirror/tinygrad+tinygrad/repo"
PINNED = "a9069c177a9da9cca18593edf55acd2e6073cca6"   # tinygrad master 2026-08-22 (the pip release 0.14.0 + a few commits)
DEFAULT_SRC = os.environ.get("TINYGRAD_SRC", "/work/tinygrad-src")

# Tests outside tg.h's scope: name -> reason. They are run anyway and reported in their own bucket.
OUT_OF_SCOPE = {
}


# ---- setup -------------------------------------------------------------------------------------------------
def setup(dst, commit):
  if os.path.isdir(os.path.join(dst, "tinygrad")) and os.path.exists(os.path.join(dst, "test", "backend", "test_ops.py")):
    print(f"{dst}: already there"); return
  if not os.path.isdir(MIRROR):
    sys.exit(f"no tinygrad mirror at {MIRROR}: fetch github:tinygrad/tinygrad first (the session's fetch tool), "
             f"or put tinygrad's source tree (tinygrad/ and test/backend/test_ops.py) in {dst}")
  os.makedirs(dst, exist_ok=True)
  subprocess.check_call(f"git --git-dir={MIRROR} archive {commit} tinygrad test/backend/test_ops.py test/helpers.py | tar -x -C {dst}",
                        shell=True)
  with open(os.path.join(dst, "COMMIT"), "w") as f: f.write(commit + "\n")
  print(f"{dst}: tinygrad {commit}")


# ---- worker: runs test methods in this process ---------------------------------------------------------------
def classify(e, tb):
  """-> (status, message)"""
  sys.path.insert(0, HERE)
  from tgshim.lib import Missing, OutOfScope, Signature
  if isinstance(e, Missing): return "missing", str(e)
  if isinstance(e, OutOfScope): return "oos", str(e)
  if isinstance(e, Signature): return "signature", str(e)
  files = [f.filename for f in traceback.extract_tb(tb)]
  msg = f"{type(e).__name__}: {e}"
  if any("/tgshim/" in f for f in files): return "fail", msg
  if files and "/torch/" in files[-1] and not any("/tgshim/" in f for f in files): return "torch", msg
  return "fail", msg


def worker(src, tests, outpath):
  sys.path.insert(0, HERE)
  sys.path.insert(0, src)
  sys.path.insert(0, os.path.join(src, "test", "backend"))
  out = open(outpath, "a", buffering=1)
  def emit(**kw): out.write(json.dumps(kw) + "\n")
  import numpy as np, unittest, inspect
  import tgshim
  tgshim.install()
  from tgshim import tensor as shim
  import test_ops as m
  orig_prepare = m.prepare_test_op
  cur = {"test": None, "n": 0}

  def caller():
    for fr in inspect.stack()[2:]:
      if fr.filename.endswith("test_ops.py"):
        return fr.lineno, (fr.code_context or [""])[0].strip()[:200]
    return 0, ""

  def desc(shps, vals):
    r = f"shps={shps!r}" if shps is not None else f"vals={vals!r}"
    return r[:300]

  def wrapped_op(shps, torch_fxn, tinygrad_fxn=None, *a, **kw):
    line, code = caller()
    cur["n"] += 1
    shim._PHASE["phase"] = "forward"
    rec = dict(test=cur["test"], case=cur["n"], kind="op", line=line, code=code, inputs=desc(shps, kw.get("vals")))
    try:
      orig_op(shps, torch_fxn, tinygrad_fxn, *a, **kw)
      emit(status="pass", **rec)
    except Exception as e:
      st, msg = classify(e, e.__traceback__)
      phase = shim._PHASE["phase"]
      if st == "fail":
        if msg.startswith("Exception: forward pass"): kind = "forward-mismatch"
        elif msg.startswith("Exception: backward pass"): kind = "backward-mismatch"
        else: kind = f"{phase}-error"
      else: kind = st
      emit(status=st, cls=kind, msg=msg[:3000], **rec)

  def wrapped_exc(self, shps, torch_fxn, tinygrad_fxn=None, expected=None, forward_only=False, exact=False, vals=None,
                  low=-1.5, high=1.5):
    line, code = caller()
    cur["n"] += 1
    rec = dict(test=cur["test"], case=cur["n"], kind="exception", line=line, code=code, inputs=desc(shps, vals))
    try:
      ts, tst = orig_prepare(low, high, shps, vals, forward_only)
    except Exception as e:
      st, msg = classify(e, e.__traceback__); emit(status=st, cls="prepare", msg=msg[:2000], **rec); return
    if tinygrad_fxn is None: tinygrad_fxn = torch_fxn
    try:
      torch_fxn(*ts)
      emit(status="torch", cls="torch-no-raise", msg=f"torch did not raise {expected}", **rec); return
    except expected: pass
    except Exception as e:
      emit(status="torch", cls="torch-other", msg=f"torch raised {type(e).__name__}: {e}"[:500], **rec); return
    try:
      tinygrad_fxn(*tst)
      emit(status="fail", cls="no-error", msg=f"tgc did not refuse (tinygrad raises {expected})", **rec)
    except expected as e:
      if exact: emit(status="fail", cls="message", msg=f"exact message expected; tgc: {e}"[:500], **rec)
      else: emit(status="pass", **rec)
    except Exception as e:
      st, msg = classify(e, e.__traceback__)
      emit(status=st, cls=st if st != "fail" else "wrong-error", msg=msg[:2000], **rec)

  orig_op = m.helper_test_op
  m.helper_test_op = wrapped_op
  m.TestOps.helper_test_exception = wrapped_exc
  classes = {n: getattr(m, n) for n in dir(m) if isinstance(getattr(m, n), type) and issubclass(getattr(m, n), unittest.TestCase)}
  for tid in tests:
    cname, mname = tid.split(".")
    cur["test"], cur["n"] = tid, 0
    emit(event="start", test=tid)
    t0 = time.time()
    tc = classes[cname](mname)
    body = "pass"
    try:
      tc.setUp()
      getattr(tc, mname)()
    except unittest.SkipTest as e:
      body = "skip"; emit(test=tid, case=0, kind="body", status="skip", msg=str(e)[:300])
    except Exception as e:
      st, msg = classify(e, e.__traceback__)
      tbl = traceback.extract_tb(e.__traceback__)
      line = next((f.lineno for f in reversed(tbl) if f.filename.endswith("test_ops.py")), 0)
      code = next(((f.line or "")[:200] for f in reversed(tbl) if f.filename.endswith("test_ops.py")), "")
      emit(test=tid, case=cur["n"] + 1, kind="body", status=st, cls="body-" + st, msg=msg[:3000], line=line, code=code)
      body = st
    finally:
      try: tc.tearDown()
      except Exception: pass
    if cur["n"] == 0 and body == "pass":
      emit(test=tid, case=1, kind="body", status="pass")
    emit(event="end", test=tid, secs=round(time.time() - t0, 2))
  out.close()


def collect(src):
  sys.path.insert(0, HERE); sys.path.insert(0, src); sys.path.insert(0, os.path.join(src, "test", "backend"))
  import unittest, tgshim
  tgshim.install()
  import test_ops as m
  ids = []
  for n in dir(m):
    c = getattr(m, n)
    if isinstance(c, type) and issubclass(c, unittest.TestCase) and c.__module__ == m.__name__:
      ids += [f"{n}.{t}" for t in unittest.TestLoader().getTestCaseNames(c)]
  print(json.dumps(ids))


# ---- parent -----------------------------------------------------------------------------------------------------
def run_all(args):
  py = sys.executable
  env = dict(os.environ)
  env.setdefault("TG_THREADS", "1")
  # tinygrad picks the first device it finds (pocl's CL, say) and exports DEV for children, which tgc reads
  # too: both run on the CPU here unless DEV is set
  env.setdefault("DEV", "CPU")
  ids = json.loads(subprocess.check_output([py, __file__, "--collect", "--tinygrad", args.tinygrad], env=env))
  if args.k: ids = [i for i in ids if any(k in i for k in args.k.split(","))]
  tmp = tempfile.mkdtemp(prefix="tgops-")
  queue = collections.deque(ids)
  workers = []   # dicts: proc, out, tests, started, current
  records = []
  crashed = []

  def start_worker():
    batch = []
    while queue and len(batch) < 60: batch.append(queue.popleft())
    if not batch: return None
    k = len(workers)
    outp = os.path.join(tmp, f"w{k}.jsonl")
    tl = os.path.join(tmp, f"w{k}.tests")
    json.dump(batch, open(tl, "w"))
    open(outp, "a").close()
    p = subprocess.Popen([py, __file__, "--worker", tl, outp, "--tinygrad", args.tinygrad], env=env,
                         stdout=subprocess.DEVNULL, stderr=open(outp + ".err", "w"))
    w = dict(proc=p, out=outp, tests=batch, pos=0, current=None, t0=time.time(), done=set())
    workers.append(w)
    return w

  t_start = time.time()
  active = [w for w in (start_worker() for _ in range(args.j)) if w]
  try:
    loop(active, records, crashed, queue, start_worker, ids, args)
  finally:
    for w in workers:
      if w["proc"].poll() is None: w["proc"].kill()
  report(ids, records, args, time.time() - t_start)


def loop(active, records, crashed, queue, start_worker, ids, args):
  ndone, fails = 0, [0]
  while active:
    time.sleep(0.3)
    for w in list(active):
      with open(w["out"], "rb") as f:
        f.seek(w["pos"])
        data = f.read()
        cut = data.rfind(b"\n") + 1   # whole lines only
        w["pos"] += cut
        for line in data[:cut].decode().splitlines():
          r = json.loads(line)
          if r.get("event") == "start": w["current"], w["t0"] = r["test"], time.time()
          elif r.get("event") == "end":
            w["done"].add(r["test"]); w["current"] = None; ndone += 1
            if args.verbose: print(f"[{ndone}/{len(ids)}] {r['test']} {r['secs']}s", flush=True)
          else: records.append(r)
      rc = w["proc"].poll()
      timed_out = w["current"] and time.time() - w["t0"] > args.timeout
      if timed_out:
        w["proc"].kill(); w["proc"].wait(); rc = -9
      if rc is not None:
        active.remove(w)
        if w["current"]:
          why = "timeout" if timed_out else f"crash (rc {rc})"
          errtail = open(w["out"] + ".err").read()[-1500:] if not timed_out else ""
          records.append(dict(test=w["current"], case=999, kind="body", status="fail" if not timed_out else "timeout",
                              cls=why, msg=f"{why} {errtail}"))
          crashed.append(w["current"]); ndone += 1
        rest = [t for t in w["tests"] if t not in w["done"] and t != w["current"]]
        if rest and not w["current"] and not w["done"]:
          fails[0] += 1
          if fails[0] >= 3:
            sys.exit("workers die before running a test:\n" + open(w["out"] + ".err").read()[-3000:])
        queue.extendleft(reversed(rest))
        nw = start_worker()
        if nw: active.append(nw)


def report(ids, records, args, secs):
  from collections import Counter, defaultdict
  src = args.tinygrad
  commit = open(os.path.join(src, "COMMIT")).read().strip() if os.path.exists(os.path.join(src, "COMMIT")) else "?"
  cases = [r for r in records if r.get("status") != "skip"]
  skipped_tests = sorted({r["test"] for r in records if r.get("status") == "skip"})
  st = Counter(r["status"] for r in cases)
  bytest = defaultdict(list)
  for r in records: bytest[r["test"]].append(r)
  tstat = Counter()
  for t in ids:
    ss = {r["status"] for r in bytest[t]}
    if "skip" in ss and len(ss) == 1: tstat["skip"] += 1
    elif ss & {"fail", "timeout", "signature"}: tstat["fail"] += 1
    elif "missing" in ss: tstat["missing"] += 1
    elif "oos" in ss: tstat["oos"] += 1
    elif "torch" in ss: tstat["torch"] += 1
    elif ss <= {"pass"} and ss: tstat["pass"] += 1
    else: tstat["other"] += 1
  miss = Counter(r["msg"] for r in cases if r["status"] == "missing")
  fails = [r for r in cases if r["status"] in ("fail", "timeout", "signature")]
  n = len(cases)
  L = []
  L.append(f"tinygrad test_ops.py @ {commit}; library {os.environ.get('TG_LIB', os.path.join(ROOT, 'build/libtg.so'))}; {secs:.0f}s")
  L.append(f"test methods: {len(ids)}  pass {tstat['pass']}  fail {tstat['fail']}  missing-only {tstat['missing']}  "
           f"out-of-scope {tstat['oos']}  torch-side {tstat['torch']}  skipped {tstat['skip']}")
  L.append(f"cases: {n}  passed {st['pass']} ({100.0 * st['pass'] / max(1, n):.1f}%)  failed {st['fail']}  "
           f"missing {st['missing']}  timeout {st['timeout']}  shim-signature {st['signature']}  out-of-scope {st['oos']}  torch-side {st['torch']}")
  scoped = n - st["oos"] - st["torch"]
  L.append(f"in scope (cases minus out-of-scope and torch-side): {scoped}, passed {st['pass']} ({100.0 * st['pass'] / max(1, scoped):.1f}%)")
  fk = Counter(r.get("cls", "?") for r in fails)
  L.append("failed by kind: " + ", ".join(f"{k} {v}" for k, v in fk.most_common()))
  L.append("")
  L.append("missing (cases blocked):")
  for k, v in miss.most_common(): L.append(f"  {v:5d}  {k}")
  L.append("")
  L.append("failures on what tgc has, grouped (count, one example):")
  groups = defaultdict(list)
  for r in fails:
    key = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", r.get("msg", ""))[:140]
    key = f"{r['test'].split('.')[-1]} | {r.get('cls')} | {key}"
    groups[key].append(r)
  for key, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
    r = rs[0]
    L.append(f"- [{len(rs)}] {r['test']} line {r.get('line')}: {r.get('cls')}")
    L.append(f"    code: {r.get('code', '')}")
    if r.get("inputs"): L.append(f"    inputs: {r['inputs']}")
    L.append("    " + r.get("msg", "").replace("\n", "\n    ")[:1200])
  if OUT_OF_SCOPE:
    L.append("")
    L.append("out of scope: " + ", ".join(f"{k} ({v})" for k, v in OUT_OF_SCOPE.items()))
  oos = Counter(r["msg"] for r in cases if r["status"] == "oos")
  if oos:
    L.append("out-of-scope cases: " + "; ".join(f"{v} {k}" for k, v in oos.most_common()))
  tor = [r for r in cases if r["status"] == "torch"]
  if tor:
    L.append("")
    L.append("torch-side (the reference itself failed; not counted against tgc):")
    for r in tor[:40]: L.append(f"  {r['test']} line {r.get('line')}: {r.get('msg', '')[:200]}")
  if skipped_tests: L.append("\nskipped by test_ops itself: " + ", ".join(t.split(".")[-1] for t in skipped_tests))
  text = "\n".join(L)
  print(text)
  if args.out:
    with open(args.out, "w") as f: f.write(text + "\n")
    with open(args.out + ".jsonl", "w") as f:
      for r in records: f.write(json.dumps(r) + "\n")


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("cmd", nargs="?", default="run", choices=["run", "setup", "report"])
  ap.add_argument("--tinygrad", default=DEFAULT_SRC, help="tinygrad source tree with test/backend/test_ops.py")
  ap.add_argument("--commit", default=PINNED)
  ap.add_argument("-j", type=int, default=2)
  ap.add_argument("-k", default="", help="comma-separated substrings of test names")
  ap.add_argument("--timeout", type=float, default=300, help="seconds per test method")
  ap.add_argument("--out", default=os.path.join(ROOT, "build", "tinygrad_ops_summary.txt"))
  ap.add_argument("-v", "--verbose", action="store_true")
  ap.add_argument("--worker", nargs=2)
  ap.add_argument("--collect", action="store_true")
  args = ap.parse_args()
  if args.worker: return worker(args.tinygrad, json.load(open(args.worker[0])), args.worker[1])
  if args.collect: return collect(args.tinygrad)
  if args.cmd == "setup": return setup(args.tinygrad, args.commit)
  if args.cmd == "report":
    recs = [json.loads(l) for l in open(args.out + ".jsonl")]
    ids = sorted({r["test"] for r in recs})
    return report(ids, recs, args, 0)
  if not os.path.exists(os.path.join(args.tinygrad, "test", "backend", "test_ops.py")):
    sys.exit(f"{args.tinygrad}: no tinygrad source; run `{sys.argv[0]} setup` first")
  run_all(args)


if __name__ == "__main__":
  main()
