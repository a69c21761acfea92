#!/usr/bin/env bash
# memory.sh — peak memory of the main job (beautiful_mnist, batch 512, Adam) in tgc under tg_jit and eagerly
# (JIT=0), next to PyTorch CPU eager on the same network, batch and steps, in one run; the MLP training step and
# the transformer block of bench/workloads (tgc JIT and eager, PyTorch eager); and stories260K greedy decoding
# (tgc JIT and eager, PyTorch eager: bench/llama_torch.py). Whole-process peak resident memory (/usr/bin/time -f %M) for every one, with
# tgc's own count (tg_memory's peak: tensors, optimizer state, JIT arenas) beside it, and the captured step's
# planned arena next to the bytes of the activations its backward pass must read (the floor of what a step keeps).
#
#   bench/memory.sh [STEPS]     default 70 steps (the issue's figure); PYTHON=... picks the peers' interpreter
# Not part of pass/fail. PyTorch is skipped with a note when it is not installed (pip install torch numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-70}"
py="${PYTHON:-python3}"
make -j"$(nproc)" build/examples/mnist build/examples/llama build/bench/workloads >/dev/null
data="${TG_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/tgc}/mnist"
[ -r "$data/train-images-idx3-ubyte" ] || [ -r "$data/train-images-idx3-ubyte.gz" ] || scripts/get_mnist.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# peak RSS in MB of a command (its output kept in $tmp/out); "" when it failed
peak_mb() {
  if /usr/bin/time -f "%M" -o "$tmp/rss" "$@" >"$tmp/out" 2>"$tmp/err"; then
    awk '{ printf "%.1f", $1 / 1024 }' "$tmp/rss"
  fi
}
field() { sed -n "s/$1/\\1/p" "$tmp/out" | head -1; }

# the activations beautiful_mnist's backward reads, float32, batch 512: the input, each convolution's ReLU output
# (the batch norms read the second and fourth) and each pooled output
act=$(awk 'BEGIN { b = 512; n = b * (1*28*28 + 32*24*24 + 32*20*20 + 32*10*10 + 64*8*8 + 64*6*6 + 64*3*3); printf "%.1f", n * 4 / 1e6 }')

printf '%-26s %12s %14s %10s\n' "main job ($steps steps)" "peak RSS MB" "tgc count MB" "vs PyTorch"
jit_rss=$(JIT=1 peak_mb ./build/examples/mnist --steps "$steps" --batch 512 --data "$data" --no-save)
jit_count=$(field 'peak memory: \([0-9.]*\) MB.*')
arena=$(field 'jit: .* \([0-9.]*\) MB in the planned arena')
eager_rss=$(JIT=0 peak_mb ./build/examples/mnist --steps "$steps" --batch 512 --data "$data" --no-save)
eager_count=$(field 'peak memory: \([0-9.]*\) MB.*')
torch_rss=$(peak_mb "$py" bench/mnist_peers.py "$data" "$steps" pytorch || true)
if [ -n "$torch_rss" ] && grep -q '"ms_per_step"' "$tmp/out"; then torch_note=""; else torch_rss=""; torch_note="skipped: $(tail -1 "$tmp/err")"; fi
ratio() { [ -n "$torch_rss" ] && [ -n "$1" ] && awk -v a="$1" -v b="$torch_rss" 'BEGIN { printf "%.2fx", a / b }' || echo "-"; }
printf '%-26s %12s %14s %10s\n' "tgc JIT" "${jit_rss:-failed}" "${jit_count:--}" "$(ratio "$jit_rss")"
printf '%-26s %12s %14s %10s\n' "tgc eager (JIT=0)" "${eager_rss:-failed}" "${eager_count:--}" "$(ratio "$eager_rss")"
if [ -n "$torch_rss" ]; then printf '%-26s %12s %14s %10s\n' "PyTorch eager" "$torch_rss" "-" "1.00x"
else echo "PyTorch eager              $torch_note"; fi
echo "the captured step's planned arena: ${arena:-?} MB; activations its backward reads: $act MB (the floor)"

# what the PyTorch rows start from: the interpreter with torch imported and nothing else
base_rss=$(peak_mb "$py" -c "import torch" || true)
echo "PyTorch's process with torch imported and nothing run: ${base_rss:-not installed} MB (included in its rows below)"

# the MLP step and the transformer block: bench/workloads --memory runs tgc's side alone (no limit arrays),
# workload_peers.py --torch-only PyTorch's
for w in mlp transformer; do
  t_rss=$(TG_BENCH_ONLY=$w peak_mb "$py" bench/workload_peers.py --torch-only || true)
  grep -q '"value"' "$tmp/out" 2>/dev/null || t_rss=""
  torch_rss=$t_rss
  for jit in 1 0; do
    rss=$(TG_BENCH_ONLY=$w JIT=$jit peak_mb ./build/bench/workloads --memory)
    count=$(field 'peak memory: \([0-9.]*\) MB.*')
    printf '%-26s %12s %14s %10s\n' "$w JIT=$jit" "${rss:-failed}" "${count:--}" "$(ratio "$rss")"
  done
  if [ -n "$t_rss" ]; then printf '%-26s %12s %14s %10s\n' "$w PyTorch eager" "$t_rss" "-" "1.00x"
  else echo "$w PyTorch eager: skipped (PyTorch not installed for $py)"; fi
done

# stories260K decoding: where the example looks for the model
model=""
for d in "${TG_DATA:+$TG_DATA/stories260K}" "${XDG_CACHE_HOME:-$HOME/.cache}/tgc/stories260K" ../shared/data/stories260K; do
  if [ -n "$d" ] && [ -r "$d/stories260K.bin" ] && [ -r "$d/tok512.bin" ]; then model=$d; break; fi
done
if [ -z "$model" ]; then
  echo "stories260K: skipped (stories260K.bin and tok512.bin not found)"
  exit 0
fi
torch_rss=$(peak_mb "$py" bench/llama_torch.py "$model/stories260K.bin" 256 1 403 407 261 378 || true)
grep -q 'tokens/s' "$tmp/out" 2>/dev/null || torch_rss=""
for jit in 1 0; do
  rss=$(JIT=$jit peak_mb ./build/examples/llama --model "$model/stories260K.bin" --tokenizer "$model/tok512.bin" -n 256 Once upon a time)
  count=$(sed -n 's/peak memory: \([0-9.]*\) MB.*/\1/p' "$tmp/err" | head -1)
  printf '%-26s %12s %14s %10s\n' "stories260K JIT=$jit" "${rss:-failed}" "${count:--}" "$(ratio "$rss")"
done
if [ -n "$torch_rss" ]; then printf '%-26s %12s %14s %10s\n' "stories260K PyTorch eager" "$torch_rss" "-" "1.00x"
else echo "stories260K PyTorch eager: skipped (PyTorch not installed for $py)"; fi
