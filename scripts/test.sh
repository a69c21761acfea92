#!/usr/bin/env bash
# test.sh [FILTER] — builds tgc (warnings are errors; the progress in one line, scripts/build.sh) and runs the
# whole test suite (or the tests whose names contain FILTER) in one process per core side by side
# (scripts/run_shards.sh: each prints its failures and skips); the last line is "N passed, N failed, N skipped".
# ./build/run_tests [FILTER] runs them in one process and prints every test with its time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
exec scripts/run_shards.sh "$(nproc)" "$@"
