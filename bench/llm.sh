#!/usr/bin/env bash
# llm.sh — language models from GGUF files, tgc against llama.cpp side by side (issue 16): prefill (pp, one
# batched forward over P random tokens) and decode (tg, N steps) tokens/s with 2 threads each, as llama-bench
# measures them, and the peak resident memory of each process (/usr/bin/time -f %M), with the ratios. Models:
# stories260K (llama2.c's, converted to GGUF by tg-llm on its first run) and a random-weight llama of 1.1e9
# parameters in Q4_0 and Q8_0 (bench/llm_models.py, the `gguf` package). Not part of pass/fail.
#
#   bench/llm.sh [P [N [R]]]              default P 128, N 64, R 3 repetitions
#   bench/llm.sh --build-llama-cpp        builds llama.cpp's llama-bench and llama-completion from the sources inside
#                                         llama-cpp-python's sdist (PyPI) into $LLAMA_CPP_DIR (long: run it once)
# LLAMA_CPP_DIR (default ~/.cache/tgc/llama.cpp) holds build/bin/llama-bench; without it the llama.cpp column
# is skipped with a note. LLM_MODELS (default ~/.cache/tgc/llm-bench) holds the 1B models; LLM_LAYERS=L writes
# and runs a smaller model of L layers instead (a quick check). PYTHON (default /work/venv/bin/python, else
# python3) needs numpy and gguf.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/tgc
LLAMA_CPP_DIR=${LLAMA_CPP_DIR:-$CACHE/llama.cpp}
LLM_MODELS=${LLM_MODELS:-$CACHE/llm-bench}
PYTHON=${PYTHON:-$( [ -x /work/venv/bin/python ] && echo /work/venv/bin/python || echo python3)}
THREADS=2

# ---- llama.cpp from llama-cpp-python's source distribution: only the two programs, niced, 2 jobs ----------------
if [ "${1:-}" = "--build-llama-cpp" ]; then
  mkdir -p "$LLAMA_CPP_DIR"
  if [ ! -f "$LLAMA_CPP_DIR/src/CMakeLists.txt" ]; then
    dl=$(mktemp -d)
    "$PYTHON" -m pip download --no-binary :all: --no-deps llama-cpp-python -d "$dl"
    tar xzf "$dl"/llama_cpp_python-*.tar.gz -C "$dl"
    rm -rf "$LLAMA_CPP_DIR/src"
    mv "$dl"/llama_cpp_python-*/vendor/llama.cpp "$LLAMA_CPP_DIR/src"
    rm -rf "$dl"
  fi
  command -v cmake >/dev/null || { echo "cmake is missing: apt-get install cmake" >&2; exit 1; }
  # -march=native without AMX: on this machine's Xeon (a VM) ggml's AMX matmul of Q4_0/Q8_0 weights crashes
  # (SIGSEGV in ggml_backend_amx_mul_mat, llama.cpp of llama-cpp-python 0.3.36); AVX-512 and the repacked
  # kernels stay, so llama.cpp runs its fastest CPU path here.
  noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  nice -n 15 cmake -S "$LLAMA_CPP_DIR/src" -B "$LLAMA_CPP_DIR/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_C_FLAGS="$noamx" -DCMAKE_CXX_FLAGS="$noamx" >/dev/null
  nice -n 15 cmake --build "$LLAMA_CPP_DIR/build" -j2 --target llama-bench llama-completion
  ls -l "$LLAMA_CPP_DIR/build/bin/llama-bench"
  exit 0
fi

P=${1:-128}
N=${2:-64}
R=${3:-3}
make -j2 build/tg-llm build/bench/llm >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---- the models ------------------------------------------------------------------------------------------------
MODELS=()
if ! ./build/tg-llm -n 1 --temp 0 -p "Once" >/dev/null 2>"$TMP/convert.txt"; then
  echo "note: stories260K skipped: $(tail -n 1 "$TMP/convert.txt")"
else
  for d in "${TG_DATA:+$TG_DATA/stories260K}" "$CACHE/stories260K" ../shared/data/stories260K; do
    if [ -n "$d" ] && [ -r "$d/stories260K.gguf" ]; then MODELS+=("$d/stories260K.gguf"); break; fi
  done
fi
layers=()
[ -n "${LLM_LAYERS:-}" ] && layers=(--layers "$LLM_LAYERS")
if "$PYTHON" bench/llm_models.py "$LLM_MODELS" "${layers[@]}" >"$TMP/models.txt" 2>"$TMP/models.err"; then
  while read -r path _; do MODELS+=("$path"); done <"$TMP/models.txt"
else
  echo "note: the 1B models skipped: $PYTHON bench/llm_models.py failed: $(tail -n 1 "$TMP/models.err")"
fi

LB=$LLAMA_CPP_DIR/build/bin/llama-bench
if [ ! -x "$LB" ]; then
  echo "note: llama.cpp column skipped: $LB is not built (bench/llm.sh --build-llama-cpp builds it)"
  LB=""
fi

# ---- one row per model --------------------------------------------------------------------------------------------
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2fx", a / b }'; }
echo "prefill pp$P and decode tg$N tokens/s, $THREADS threads each, mean of $R runs; rss: peak resident MB;"
echo "load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores (a shared machine skews both columns)"
printf '%-26s %8s %7s | %9s %9s %6s | %9s %9s %6s | %8s %8s\n' model file_MB kv_MB tgc_pp llama_pp ratio \
  tgc_tg llama_tg ratio tgc_rss llama_rss
for m in "${MODELS[@]}"; do
  size=$(awk -v b="$(stat -c %s "$m")" 'BEGIN { printf "%.1f", b / 1e6 }')
  TG_THREADS=$THREADS /usr/bin/time -f "%M" -o "$TMP/tg.rss" ./build/bench/llm -m "$m" -p "$P" -n "$N" -r "$R" \
    >"$TMP/tg.txt" 2>"$TMP/tg.err" || { echo "$m: tgc failed: $(tail -n 2 "$TMP/tg.err")"; continue; }
  tg_pp=$(sed -n "s/^pp$P: \([0-9.]*\).*/\1/p" "$TMP/tg.txt")
  tg_tg=$(sed -n "s/^tg$N: \([0-9.]*\).*/\1/p" "$TMP/tg.txt")
  kv=$(sed -n 's/^kv cache: \([0-9.]*\) MB/\1/p' "$TMP/tg.txt")
  tg_rss=$(awk '{ printf "%.1f", $1 / 1024 }' "$TMP/tg.rss")
  lc_pp="" lc_tg="" lc_rss=""
  if [ -n "$LB" ]; then
    lc_rc=0
    /usr/bin/time -f "%M" -o "$TMP/lc.rss" "$LB" -m "$m" -p "$P" -n "$N" -r "$R" -t "$THREADS" -o csv \
      >"$TMP/lc.csv" 2>"$TMP/lc.err" || lc_rc=$?
    if [ "$lc_rc" -eq 0 ]; then
      # avg_ts by the header's column names, for the row of each test
      read -r lc_pp lc_tg < <(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { gsub(/"/, "", $i); c[$i] = i }; next }
        { gsub(/"/, ""); if ($c["n_gen"] == 0) pp = $c["avg_ts"]; else tg = $c["avg_ts"] }
        END { printf "%.2f %.2f\n", pp, tg }' "$TMP/lc.csv")
      lc_rss=$(awk '{ printf "%.1f", $1 / 1024 }' "$TMP/lc.rss")
    else
      echo "$m: llama-bench failed (exit $lc_rc; $(head -n 1 "$TMP/lc.rss")): $(tail -n 2 "$TMP/lc.err")"
    fi
  fi
  printf '%-26s %8s %7s | %9s %9s %6s | %9s %9s %6s | %8s %8s\n' "$(basename "$m")" "$size" "${kv:--}" \
    "${tg_pp:--}" "${lc_pp:--}" "$(ratio "$tg_pp" "$lc_pp")" "${tg_tg:--}" "${lc_tg:--}" "$(ratio "$tg_tg" "$lc_tg")" \
    "$tg_rss" "${lc_rss:--}"
done
echo "ratio: tgc / llama.cpp tokens/s (above 1.00x: tgc faster). The issue's targets on the 1B models: pp and tg"
echo "at least 1.00x; tgc_rss at most file_MB + kv_MB + 10%."
