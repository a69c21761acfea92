#!/usr/bin/env bash
# tsan.sh — builds the test binary with ThreadSanitizer (in build/tsan, -O1 -g) and runs the tests whose name
# contains "test_threads" (or the filter given as $1). Any report fails the run (exit status 66).
#
# Kernels are shared objects compiled at run time without -fsanitize=thread, so TSan sees neither their
# loads and stores nor those of the pool threads inside them: those touch disjoint parts of the buffers by
# design, and every hand-off around them (the pool's tickets and done count, the library lock) is a C11
# atomic or a mutex that TSan does see. No report is suppressed.
set -euo pipefail
cd "$(dirname "$0")/.."
make -j2 BUILD=build/tsan OPT="-O1 -g" SAN="-fsanitize=thread" build/tsan/run_tests >/dev/null
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
exec ./build/tsan/run_tests "${1:-test_threads}"
