#!/usr/bin/env bash
# test_device.sh DEV [SHARDS] [FILTER] — the whole test suite on device DEV (CL, CUDA, ...), in SHARDS processes
# side by side (default: the number of cores), each running every SHARDS-th test (run_tests --shard). Prints
# each shard's failures and skips, then one summary line "DEV: N passed, N failed, N skipped"; exits non-zero when
# a test failed or a shard crashed. Expects build/run_tests to be built (scripts/test.sh builds it).
set -uo pipefail
cd "$(dirname "$0")/.."
dev="${1:?usage: scripts/test_device.sh DEV [SHARDS] [FILTER]}"
n="${2:-$(nproc)}"
filter="${3:-}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pids=()
for ((i = 0; i < n; i++)); do
  DEV="$dev" ./build/run_tests --shard "$i/$n" $filter >"$tmp/out$i" 2>"$tmp/err$i" &
  pids+=($!)
done
status=0 passed=0 failed=0 skipped=0
for ((i = 0; i < n; i++)); do
  wait "${pids[$i]}" || status=1
  grep -v '^ok ' "$tmp/err$i" | grep -v '^  skipped:' || true
  line="$(tail -n 1 "$tmp/out$i")"
  if [[ "$line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
    passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2])) skipped=$((skipped + ${BASH_REMATCH[4]:-0}))
  else
    echo "shard $i/$n ended without its summary (crashed?): '$line'"
    status=1
  fi
done
echo "$dev: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] || status=1
exit "$status"
