#!/usr/bin/env bash
# fuzz.sh [seconds-per-target] [target...] — builds the libFuzzer targets tests/fuzz/fuzz_*.c with clang
# (-fsanitize=fuzzer,address,undefined; the library's objects with fuzzer-no-link, in build/fuzz/) and runs
# each for the given time (default 30 s) from its committed seed corpus tests/fuzz/corpus/<target>/, leak
# detection on. What a run adds to the corpus stays in build/fuzz/corpus/<target>/ (kept between runs, never
# committed). Fails if any target finds a crash, a leak, undefined behaviour or a broken contract; the input
# is left in build/fuzz/crashes/. Reproduce one with: build/fuzz/fuzz_<target> <file>.
#   scripts/fuzz.sh --corpus    rewrites the committed seeds with tests/fuzz/make_corpus.c
set -euo pipefail
cd "$(dirname "$0")/.."
TG_WITH_CLANG=1 scripts/deps.sh
B=build/fuzz
mkdir -p "$B"

if [ "${1:-}" = --corpus ]; then
  clang -std=c11 -D_GNU_SOURCE -O1 -Wall -Wextra -Werror tests/fuzz/make_corpus.c -lz -o "$B/make_corpus"
  rm -rf tests/fuzz/corpus
  "$B/make_corpus" tests/fuzz/corpus
  du -sh tests/fuzz/corpus
  exit 0
fi

secs=${1:-30}
shift || true
case "$secs" in ''|*[!0-9]*) echo "fuzz.sh: seconds must be a whole number, got '$secs'" >&2; exit 2;; esac
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do t=${f#tests/fuzz/fuzz_}; targets+=("${t%.c}"); done
fi

# the longest input each format needs to reach every path (the seeds are smaller)
max_len() {
  case "$1" in
    llama) echo 8192 ;;       # a checkpoint must be exactly as long as its header says: room for small models
    tokenizer) echo 8192 ;;   # 256 byte tokens and some merges
    tokenizer_gguf) echo 8192 ;;  # the same, as GGUF strings
    llm_gguf) echo 16384 ;;   # a model of one block: every tensor the loader wants
    digits) echo 4096 ;;      # rows of 65 numbers
    onnx) echo 4096 ;;        # small models with a subgraph or two
    *) echo 2048 ;;           # safetensors headers and IDX pairs
  esac
}

SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# the readers need no MPI: the distributed layer's stub (src/dist/nompi.c) stands in for src/dist/mpi.c
objs=$(ls src/*/*.c | grep -vx 'src/dist/mpi\.c' | sed "s|^|$B/|; s|\.c$|.o|")
echo "== building the library for fuzzing (clang, $B)"
# the objects, not libtg.a: the targets call internal parsers (src/nn/data.h) that the archive may not export
make -j"$(nproc)" CC=clang BUILD="$B" OPT="-O1 -g" SAN="$SAN" $objs >/dev/null
for t in "${targets[@]}"; do
  clang -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Iinclude -Isrc \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    "tests/fuzz/fuzz_$t.c" $objs -lz -ldl -lm -pthread -o "$B/fuzz_$t"
done

export TG_CACHE="$PWD/$B/kernel-cache"   # the llama target's cache kernels compile once
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:intercept_tls_get_addr=0   # see .ci/run
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fail=0
summary=""
for t in "${targets[@]}"; do
  mkdir -p "$B/corpus/$t" "$B/crashes"
  echo "== fuzz_$t for ${secs}s"
  log="$B/fuzz_$t.log"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  set +e
  "$B/fuzz_$t" "${dict[@]}" -max_total_time="$secs" -max_len="$(max_len "$t")" -timeout=20 -rss_limit_mb=4096 \
    -detect_leaks=1 -print_final_stats=1 -artifact_prefix="$B/crashes/$t-" \
    "$B/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ $rc -ne 0 ]; then
    fail=1
    echo "fuzz_$t: FAILED (exit $rc); the end of $log:"
    tail -n 40 "$log"
    summary+=$(printf '%-12s %10s execs  %6s edges  FAILED\n' "$t" "${execs:-?}" "${cov:-?}")$'\n'
  else
    summary+=$(printf '%-12s %10s execs  %6s edges  ok\n' "$t" "${execs:-?}" "${cov:-?}")$'\n'
  fi
done
echo "== fuzz summary (${secs}s per target)"
printf '%s' "$summary"
exit $fail
