#!/usr/bin/env bash
# llama.sh — greedy decoding of stories260K, tokens per second: tgc's captured JIT step, the same step run
# eagerly (JIT=0) and llama2.c's run.c, the same prompt and number of positions, best of R runs (a shared
# machine is noisy), with the ratios and whether the texts agree. Not part of pass/fail.
#
#   bench/llama.sh [POSITIONS [RUNS]]        default 256 positions, 3 runs
#   LLAMA2C_DIR=/path/to/llama2.c bench/llama.sh   builds its run.c (gcc -O2) into a temporary folder;
#                                                  without it the llama2.c column is skipped with a note
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-256}
R=${2:-3}
PROMPT="Once upon a time"
make -j"$(nproc)" build/examples/llama >/dev/null

# the model where the example looks for it
MODEL=""
for d in "${TG_DATA:+$TG_DATA/stories260K}" "${XDG_CACHE_HOME:-$HOME/.cache}/tgc/stories260K" ../shared/data/stories260K; do
  if [ -n "$d" ] && [ -r "$d/stories260K.bin" ] && [ -r "$d/tok512.bin" ]; then MODEL=$d; break; fi
done
if [ -z "$MODEL" ]; then
  echo "skipped: stories260K.bin and tok512.bin not found in \$TG_DATA/stories260K, ~/.cache/tgc/stories260K or ../shared/data/stories260K"
  exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# best tokens/s of R runs of a command whose stderr says "achieved tok/s: X"; its stdout (the text) in $TMP/$1.txt
best() {
  local name=$1 b=0 r
  shift
  for _ in $(seq "$R"); do
    r=$("$@" 2>&1 >"$TMP/$name.txt" | sed -n 's/.*achieved tok\/s: \([0-9.]*\).*/\1/p')
    b=$(awk -v a="$b" -v c="${r:-0}" 'BEGIN { print (c > a ? c : a) }')
  done
  echo "$b"
}

JIT_TPS=$(best jit ./build/examples/llama --model "$MODEL/stories260K.bin" -n "$N" "$PROMPT")
EAGER_TPS=$(JIT=0 best eager ./build/examples/llama --model "$MODEL/stories260K.bin" -n "$N" "$PROMPT")
KERNELS=$(./build/examples/llama --model "$MODEL/stories260K.bin" -n 8 "$PROMPT" 2>&1 >/dev/null |
          sed -n 's/.*, \([0-9]*\) kernels per step.*/\1/p')

REF_TPS=""
if [ -n "${LLAMA2C_DIR:-}" ] && [ -r "$LLAMA2C_DIR/run.c" ]; then
  gcc -O2 -o "$TMP/run" "$LLAMA2C_DIR/run.c" -lm
  REF_TPS=$(best ref "$TMP/run" "$MODEL/stories260K.bin" -z "$MODEL/tok512.bin" -t 0 -n "$N" -i "$PROMPT")
else
  echo "note: llama2.c column skipped (set LLAMA2C_DIR to a folder holding llama2.c's run.c)"
fi

printf '%-28s %12s %12s\n' "greedy, $N positions" "tokens/s" "ms/token"
row() { printf '%-28s %12.1f %12.3f\n' "$1" "$2" "$(awk -v t="$2" 'BEGIN { print (t > 0 ? 1000 / t : 0) }')"; }
row "tgc JIT ($KERNELS kernels/step)" "$JIT_TPS"
row "tgc JIT=0 (eager)" "$EAGER_TPS"
[ -n "$REF_TPS" ] && row "llama2.c run.c (gcc -O2)" "$REF_TPS"
awk -v j="$JIT_TPS" -v e="$EAGER_TPS" 'BEGIN { printf "JIT / eager: %.2fx\n", (e > 0 ? j / e : 0) }'
if [ -n "$REF_TPS" ]; then
  awk -v j="$JIT_TPS" -v r="$REF_TPS" 'BEGIN { printf "tgc JIT / llama2.c: %.2fx\n", (r > 0 ? j / r : 0) }'
  if cmp -s "$TMP/jit.txt" "$TMP/ref.txt"; then echo "text: identical to llama2.c's"; else echo "text: DIFFERS from llama2.c's"; fi
fi
cmp -s "$TMP/jit.txt" "$TMP/eager.txt" && echo "text: JIT and eager identical" || echo "text: JIT and eager DIFFER"
