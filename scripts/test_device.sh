#!/usr/bin/env bash
# test_device.sh DEV [SHARDS] [FILTER] — the whole test suite on device DEV (CL, CUDA, ...), in SHARDS processes
# side by side (default: the number of cores; scripts/run_shards.sh). Prints each shard's failures and skips,
# then one summary line "DEV: N passed, N failed, N skipped"; exits non-zero when a test failed or a shard
# crashed. Expects build/run_tests to be built (scripts/test.sh builds it).
set -uo pipefail
cd "$(dirname "$0")/.."
dev="${1:?usage: scripts/test_device.sh DEV [SHARDS] [FILTER]}"
DEV="$dev" LABEL="$dev" exec scripts/run_shards.sh "${2:-$(nproc)}" "${3:-}"
