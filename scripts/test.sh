#!/usr/bin/env bash
# test.sh — builds tgc (warnings are errors; the progress in one line, scripts/build.sh) and runs the whole
# test suite; the last line is "N passed, N failed" (", N skipped" when data is missing). Arguments filter tests by name.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
exec ./build/run_tests "$@"
