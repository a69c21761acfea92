#!/usr/bin/env bash
# dist.sh — data parallelism over MPI on this machine, in one run:
#  1. the MNIST training step (examples/mnist.c, batch 512, Adam) as 1 process x 2 threads next to 2 processes x
#     1 thread (mpirun -np 2 mnist --dist): median step time, the communication per step (the all-reduces after
#     a barrier) and its share of the step, the wait for the slower rank at that barrier; ratio = 1 process's
#     step / 2 processes'
#     (> 1: data parallel faster);
#  2. all-reduce bandwidth of float32 sums, 4 KB and 64 KB, then 1 MB..MAX_MB: tg_dist_all_reduce next to Open MPI's
#     own MPI_Allreduce on a raw buffer (bench/allreduce.c; ratio = MPI's time / tgc's, target >= 0.9).
# Usage: bench/dist.sh [STEPS (default 20)] [MAX_MB (default 256)]. Needs Open MPI (scripts/deps.sh) and MNIST
# (scripts/get_mnist.sh). The machine is shared: compare the columns of one run, not runs.
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-20}"
max_mb="${2:-256}"
command -v mpirun >/dev/null 2>&1 || { echo "dist.sh: mpirun not found (scripts/deps.sh installs Open MPI)"; exit 1; }
make -j"$(nproc)" build/examples/mnist build/bench/allreduce >/dev/null
data="${TG_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/tgc}/mnist"
[ -r "$data/train-images-idx3-ubyte" ] || [ -r "$data/train-images-idx3-ubyte.gz" ] || scripts/get_mnist.sh
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mpirun=(mpirun -np 2 --oversubscribe --bind-to none)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

median_ms() { sed -n 's/median step after the first: \([0-9.]*\) ms.*/\1/p'; }
one=$(TG_THREADS=2 ./build/examples/mnist --steps "$steps" --data "$data" --no-save 2>/dev/null)
two=$(TG_THREADS=1 "${mpirun[@]}" ./build/examples/mnist --dist --steps "$steps" --data "$data" --no-save 2>/dev/null)
one_ms=$(echo "$one" | median_ms)
two_ms=$(echo "$two" | median_ms)
comm=$(echo "$two" | sed -n 's/communication: median \([0-9.]*\) ms per step (\([0-9.]*\)%.*waiting for the slower rank: median \([0-9.]*\) ms.*/\1 \2 \3/p')
echo
echo "MNIST step, batch 512 ($steps steps, median after the first)"
printf '%-28s %10s %12s %8s %10s %10s\n' setup ms/step "comm ms" "comm %" "wait ms" ratio
printf '%-28s %10.1f %12s %8s %10s %9.2fx\n' "1 process x 2 threads" "$one_ms" - - - 1
printf '%-28s %10.1f %12.2f %7.2f%% %10.2f %9.2fx\n' "2 processes x 1 thread" "$two_ms" ${comm:-nan nan nan} \
  "$(awk -v a="$one_ms" -v b="$two_ms" 'BEGIN { print a / b }')"
echo "test accuracy: $(echo "$one" | sed -n 's/test accuracy: //p') (1 process), $(echo "$two" | sed -n 's/test accuracy: //p') (2 processes)"
echo
TG_THREADS=1 "${mpirun[@]}" ./build/bench/allreduce "$max_mb"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
