#!/usr/bin/env bash
# gpu.sh — the GPU check in one run, under 8 minutes: builds, runs the suite with DEV=CUDA, then the GPU benchmark
# (build/bench/gpu, when built). Usage: bench/gpu.sh OUTDIR. Writes OUTDIR/gpu.txt (nvidia-smi), build.log,
# tests.log (the suite; its last line is the count) and bench.txt. Exits non-zero when there is no NVIDIA GPU,
# the build or a test fails, or a step runs out of time. Only a machine with an NVIDIA GPU and its driver can run it.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: bench/gpu.sh OUTDIR" >&2; exit 2; }
out="$1"
mkdir -p "$out" && out="$(cd "$out" && pwd)" || { echo "gpu.sh: cannot make $1" >&2; exit 2; }
cd "$(dirname "$0")/.."
budget=470  # seconds for everything: 8 minutes less a margin for the checks below
left() { echo $((budget - SECONDS)); }

command -v nvidia-smi >/dev/null || { echo "gpu.sh: no nvidia-smi: this machine has no NVIDIA driver (needs a CUDA GPU)" >&2; exit 1; }
if ! timeout 30 nvidia-smi -L >"$out/gpu.txt" 2>&1 || ! grep -q '^GPU ' "$out/gpu.txt"; then
  echo "gpu.sh: nvidia-smi finds no CUDA GPU: $(head -c 300 "$out/gpu.txt")" >&2
  exit 1
fi
timeout 30 nvidia-smi >>"$out/gpu.txt" 2>&1 || true
head -1 "$out/gpu.txt"

status=0
echo "== build (make -j)"
if ! timeout "$(left)" make -j"$(nproc)" >"$out/build.log" 2>&1; then
  echo "gpu.sh: the build failed or ran out of time: see $out/build.log" >&2
  tail -20 "$out/build.log" >&2
  exit 1
fi

echo "== DEV=CUDA ./build/run_tests"
DEV=CUDA timeout "$(left)" ./build/run_tests >"$out/tests.log" 2>&1
rc=$?
tail -1 "$out/tests.log"
if [ $rc -ne 0 ]; then
  [ $rc -eq 124 ] && echo "gpu.sh: the suite ran out of time" >&2 || echo "gpu.sh: the suite failed (exit $rc)" >&2
  grep "^FAIL" "$out/tests.log" | head -20 >&2
  status=1
fi

echo "== DEV=${DEV:-CUDA} ./build/bench/gpu"
if [ ! -x build/bench/gpu ]; then
  echo "build/bench/gpu is not built (no bench/gpu.c): skipped" | tee "$out/bench.txt"
elif [ "$(left)" -lt 10 ]; then
  echo "no time left for the benchmark: skipped" | tee "$out/bench.txt"
  status=1
else
  DEV="${DEV:-CUDA}" timeout "$(left)" ./build/bench/gpu >"$out/bench.txt" 2>&1  # on the GPU, not the CPU default
  rc=$?
  cat "$out/bench.txt"
  [ $rc -eq 0 ] || { echo "gpu.sh: the benchmark failed (exit $rc)" >&2; status=1; }
fi
echo "gpu.sh: done in ${SECONDS} s, results in $out"
exit $status
