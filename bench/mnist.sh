#!/usr/bin/env bash
# mnist.sh — MNIST training step time: tgc (examples/mnist.c) eager (JIT=0) and under tg_jit, next to tinygrad (TinyJit) and PyTorch CPU
# eager, the same network (beautiful_mnist), batch 512, Adam, in one run; with each the STEPS' whole training time (first steps
# included) and the test accuracy it reached: `bench/mnist.sh 70` is the main job's time to its accuracy. Usage: bench/mnist.sh [STEPS]
# Peers are skipped with a note when not installed (pip install torch tinygrad numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-10}"
make -j"$(nproc)" build/examples/mnist >/dev/null
data="${TG_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/tgc}/mnist"
[ -r "$data/train-images-idx3-ubyte" ] || [ -r "$data/train-images-idx3-ubyte.gz" ] || scripts/get_mnist.sh
run_tgc() {  # $1: JIT setting; prints "ms accuracy" and keeps the output in $out
  out=$(JIT="$1" ./build/examples/mnist --steps "$steps" --batch 512 --data "$data" --no-save 2>/dev/null)
  echo "$out" | grep -E "trained in|median step|jit:" | sed "s/^/  JIT=$1: /" >&2
  echo "$(echo "$out" | sed -n 's/median step after the first: \([0-9.]*\) ms.*/\1/p') $(echo "$out" | sed -n 's/test accuracy: \(.*\)%/\1/p') $(echo "$out" | sed -n 's/^trained in \([0-9.]*\) s.*/\1/p')"
}
read -r eager_ms eager_acc eager_s < <(run_tgc 0)
read -r tgc_ms tgc_acc tgc_s < <(run_tgc 1)
echo "ms/step: median of steps 2..N for tgc, steps 4..N for tinygrad (after TinyJit capture), steps 2..N for PyTorch"
echo "ratio: tgc JIT time / the implementation's time (> 1: tgc JIT slower)"
echo "train s: the $steps steps' whole time, first steps (compiles, capture) included: the time to the accuracy shown"
printf '%-12s %12s %10s %9s %14s\n' impl ms/step ratio "train s" accuracy
printf '%-12s %12.1f %9.2fx %9.1f %13s%%\n' "tgc eager" "$eager_ms" "$(awk -v a="$tgc_ms" -v b="$eager_ms" 'BEGIN { print a / b }')" "$eager_s" "$eager_acc"
printf '%-12s %12.1f %10s %9.1f %13s%%\n' "tgc JIT" "$tgc_ms" 1.00x "$tgc_s" "$tgc_acc"
python3 bench/mnist_peers.py "$data" "$steps" 2>/dev/null | while read -r line; do
  python3 - "$line" "$tgc_ms" <<'PY'
import json, sys
r, tgc = json.loads(sys.argv[1]), float(sys.argv[2])
if "skipped" in r:
    print(f"{r['impl']:<12} skipped: {r['skipped']}")
else:
    print(f"{r['impl']:<12} {r['ms_per_step']:12.1f} {tgc / r['ms_per_step']:9.2f}x {r['total_s']:9.1f} {100 * r['test_accuracy']:13.2f}%")
PY
done
