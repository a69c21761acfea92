#!/usr/bin/env bash
# The random-API driver (tests/fuzz/api_driver.c) under AddressSanitizer + UndefinedBehaviorSanitizer:
#   scripts/fuzz_api.sh [CALLS] [SEED]      (defaults: 20000 calls, seed 1)
# Builds build/asan/fuzz/api_driver (the same objects as CI's sanitizer suite) and runs CALLS seeded calls.
# Any failed check or sanitizer report (leaks included) makes the run fail.
set -euo pipefail
cd "$(dirname "$0")/.."
calls=${1:-20000}
seed=${2:-1}
if ! [[ "$calls" =~ ^[0-9]+$ && "$seed" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz_api.sh [CALLS] [SEED]  (non-negative integers)" >&2
  exit 2
fi
echo "building the driver with -fsanitize=address,undefined ..."
make -j2 BUILD=build/asan OPT="-O1 -g" \
  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
  build/asan/fuzz/api_driver >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1:intercept_tls_get_addr=0 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ./build/asan/fuzz/api_driver "$seed" "$calls"
