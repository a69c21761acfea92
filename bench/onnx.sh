#!/usr/bin/env bash
# onnx.sh — whole-model inference latency: tgc (examples/onnx --bench N, under tg_jit) next to onnxruntime (CPU),
# both with 2 threads, on the same models and inputs in one run, and whether their outputs agree. Usage:
#   bench/onnx.sh [RUNS [MODEL...]]   (default 20 timed runs each after warm-up; MODELs: names to run, e.g. mlp)
# A model whose RUNS take less than a second in tgc is run again, both sides, with as many runs as make about a
# second (at most 3000): the MLP's 0.3 ms runs were a median of 30 that moved by 40% from run to run.
# tgc gets ONNX_BENCH_TIMEOUT seconds per model (default 900; its first run compiles every kernel).
# The two sides run in turn ONNX_ROUNDS times (default 3): tgc, onnxruntime, tgc, ...; each row is the median of
# the rounds' medians and the best of their bests. This host's neighbours slow it for seconds at a time (one
# binary's medians of 50 ResNet-18 runs: 17.7-17.9 ms or 19.2), and a single round of each side could put one
# side in a slow spell and the other not.
# The models (bench/onnx_models.py, the onnx package's helper API, random weights): a ResNet-18-shaped
# convolutional network (batch 1, 3x224x224), a small MLP (batch 32, a named dimension) and a transformer block
# (128 tokens, 256 wide), plus the onnx wheel's light_* model tests (onnx/backend/test/data/light; Debian's
# libonnx-testdata has none); their weights are ConstantOfShape fills (one value per tensor), so every one of
# their 1000 outputs is the same value (0.001, a softmax of equal logits; densenet121: 0.461), and the diff is 0
# in both runtimes: they time the graph's work, not a trained network's numbers. Python: $PYTHON if set (it needs numpy, onnx, onnxruntime), else a venv made in
# build/bench-venv with them installed from PyPI. A model tgc cannot load or run is a row saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
shift || true
only=" $* "
limit="${ONNX_BENCH_TIMEOUT:-900}"
rounds="${ONNX_ROUNDS:-3}"
case "$rounds" in ''|*[!0-9]*|0) echo "onnx.sh: ONNX_ROUNDS must be a positive whole number, got '$rounds'" >&2; exit 2;; esac
case "$runs" in ''|*[!0-9]*|0) echo "onnx.sh: RUNS must be a positive whole number, got '$runs'" >&2; exit 2;; esac
threads=2

if [ -z "${PYTHON:-}" ]; then
  venv=build/bench-venv
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q numpy onnx onnxruntime
  fi
  PYTHON=$venv/bin/python
fi
"$PYTHON" -c "import numpy, onnx, onnxruntime" || { echo "onnx.sh: $PYTHON lacks numpy, onnx or onnxruntime" >&2; exit 1; }
make -j"$(nproc)" build/examples/onnx >/dev/null

dir=build/bench-onnx
rm -rf "$dir"
mkdir -p "$dir"
"$PYTHON" bench/onnx_models.py "$dir" >"$dir/models.tsv"
ort_version=$("$PYTHON" -c "import onnxruntime; print(onnxruntime.__version__)")

echo "latency per run in ms: median (best) of $runs runs after warm-up, $rounds rounds of each side in turn (the median of"
echo "the rounds' medians, the best of their bests); $threads threads each (TG_THREADS=$threads; onnxruntime $ort_version"
echo "intra_op_num_threads=$threads); ratio = onnxruntime / tgc (> 1: tgc faster);"
echo "diff = the largest |tgc - onnxruntime| over the outputs"
printf '%-20s %18s %18s %8s %10s\n' model "tgc JIT" onnxruntime ratio "diff"
# tgc on the current model with --bench $1 runs, its output in the model's log; the median and best of a bench line
run_tgc() {
  # shellcheck disable=SC2086
  TG_THREADS=$threads timeout "$limit" ./build/examples/onnx "$model" "${ins[@]}" $dims --out "$out" --bench "$1" \
    >"$dir/$name.log" 2>&1
}
median_of() { sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
best_of() { sed -n 's/.*best \([0-9.]*\) ms.*/\1/p' <<<"$1"; }
while IFS=$'\t' read -r name model inputs dims; do
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || continue
  IFS=, read -r -a ins <<<"$inputs"
  out="$dir/$name.tgc"
  mkdir -p "$out"
  run_tgc "$runs" && rc=0 || rc=$?
  if [ "$rc" -eq 124 ]; then
    printf '%-20s tgc: not done in %s s (ONNX_BENCH_TIMEOUT); %s\n' "$name" "$limit" "$(grep '^first run' "$dir/$name.log")"
    continue
  elif [ "$rc" -ne 0 ]; then
    printf '%-20s tgc failed: %s\n' "$name" "$(grep '^onnx:' "$dir/$name.log" | head -1 | cut -c1-110)"
    continue
  fi
  line=$(grep '^bench:' "$dir/$name.log")
  tgc_med=$(median_of "$line")
  n=$(awk -v m="$tgc_med" -v r="$runs" 'BEGIN { n = m > 0 ? int(1000 / m) + 1 : r; if (n > 3000) n = 3000; print (n > r ? n : r) }')
  if [ "$n" -gt "$runs" ]; then
    run_tgc "$n" || { printf '%-20s tgc failed on its second bench\n' "$name"; continue; }
    line=$(grep '^bench:' "$dir/$name.log")
    tgc_med=$(median_of "$line")
  fi
  tgc_best=$(best_of "$line")
  mode=jit
  grep -q "under tg_jit" <<<"$line" || mode=eager
  tgc_rounds="$tgc_med:$tgc_best"
  ort_rounds=()
  failed=""
  for ((r = 1; r <= rounds; r++)); do
    if [ "$r" -gt 1 ]; then
      run_tgc "$n" || { failed="tgc failed in round $r"; break; }
      line=$(grep '^bench:' "$dir/$name.log")
      tgc_rounds="$tgc_rounds $(median_of "$line"):$(best_of "$line")"
    fi
    if ! ort=$("$PYTHON" bench/onnx_ort.py "$model" "$out" "$n" "$threads" "${ins[@]}" 2>"$dir/$name.ort.log"); then
      failed="onnxruntime failed: $(tail -1 "$dir/$name.ort.log" | cut -c1-80)"
      break
    fi
    ort_rounds+=("$ort")
  done
  if [ -n "$failed" ]; then
    printf '%-20s %11.2f (%5.2f) %s\n' "$name" "$tgc_med" "$tgc_best" "$failed"
    continue
  fi
  "$PYTHON" - "$name" "$mode" "$tgc_rounds" "${ort_rounds[@]}" <<'PY'
import json, statistics, sys
name, mode, tgc = sys.argv[1], sys.argv[2], [tuple(map(float, x.split(":"))) for x in sys.argv[3].split()]
orts = [json.loads(a) for a in sys.argv[4:]]
med, best = statistics.median(m for m, _ in tgc), min(b for _, b in tgc)
omed, obest = statistics.median(o["ms_median"] for o in orts), min(o["ms_best"] for o in orts)
r = orts[-1]  # compared against the outputs of tgc's last round
diff = f"{r['max_abs_diff']:.2e}" if r["compared"] else "-"
note = f"  not compared: {'; '.join(r['missing'])}" if r["missing"] else ""
if mode != "jit":
    note += "  (tgc eager: tg_jit could not capture the model, see its log)"
print(f"{name:<20} {med:11.2f} ({best:5.2f}) {omed:10.2f} ({obest:5.2f}) {omed / med:7.2f}x {diff:>10}{note}")
PY
done <"$dir/models.tsv"
if [[ "$only" == "  " || "$only" == *" light_"* ]]; then
  echo "light_*: weights are ConstantOfShape fills and each output is one value repeated: a diff of 0 is expected"
fi
echo "logs, models, inputs and outputs: $dir"
