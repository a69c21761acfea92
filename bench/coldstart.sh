#!/usr/bin/env bash
# coldstart.sh — the first MNIST training step (examples/mnist, batch 512, under tg_jit) from an empty kernel
# cache and again with the cache it filled (a new process: schedule, codegen and loading, no compiles), medians
# and fastest of R rounds, with the number of kernels the cold run compiled. The first step is where the kernels
# of the new graph compile; CPU compiles run TG_COMPILE_JOBS at a time (default: the pool's size). Not part of
# pass/fail; the targets (issue 17) are under 3 s cold and under 0.3 s warm. 2026-12-02, 2 CPUs, load ~2.5, 5 rounds:
# cold 5.10 s serial -> 2.99 s with parallel compiles (median), warm 0.60 -> 0.66 s (a step is ~0.4 s of kernels).
#
#   bench/coldstart.sh [ROUNDS]             default 3 rounds of (cold, warm)
#   BEFORE=/path/to/an/older/mnist bench/coldstart.sh   alternates the two binaries in each round and prints both
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-3}
make -j"$(nproc)" build/examples/mnist >/dev/null
data="${TG_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/tgc}/mnist"
[ -r "$data/train-images-idx3-ubyte" ] || [ -r "$data/train-images-idx3-ubyte.gz" ] || scripts/get_mnist.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

bins=("now=./build/examples/mnist")
[ -n "${BEFORE:-}" ] && bins=("before=$BEFORE" "${bins[@]}")

first_step() {  # $1 binary, $2 cache dir: prints the first step's seconds
  TG_CACHE="$2" "$1" --steps 2 --batch 512 --data "$data" --no-save 2>/dev/null |
    sed -n 's/.*(first step \([0-9.]*\) s).*/\1/p'
}

for ((r = 1; r <= R; r++)); do
  for b in "${bins[@]}"; do
    name=${b%%=*} bin=${b#*=}
    dir="$TMP/$name.$r"
    mkdir -p "$dir"
    cold=$(first_step "$bin" "$dir")
    n=$(find "$dir" -name '*.so' | wc -l)
    warm=$(first_step "$bin" "$dir")
    echo "$name $cold $warm $n" >>"$TMP/results"
    echo "round $r $name: first step cold ${cold} s (${n} kernels compiled, training and test), warm ${warm} s;" \
      "load average $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
done

printf '%-8s %14s %14s %14s %14s %9s\n' binary "cold median s" "cold fastest" "warm median s" "warm fastest" kernels
for b in "${bins[@]}"; do
  name=${b%%=*}
  awk -v n="$name" '$1 == n { c[++k] = $2; w[k] = $3; m = $4 }
    function med(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    END { cm = med(c, k); cf = c[1]; wm = med(w, k); wf = w[1]
          printf "%-8s %14.2f %14.2f %14.2f %14.2f %9d\n", n, cm, cf, wm, wf, m }' "$TMP/results"
done
echo "targets (issue 17): cold < 3 s, warm < 0.3 s; jobs: TG_COMPILE_JOBS=${TG_COMPILE_JOBS:-default} on $(nproc) CPUs"
