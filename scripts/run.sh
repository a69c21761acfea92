#!/usr/bin/env bash
# run.sh — the main job: builds tgc and runs the example, printing per-kernel stats (DEBUG=2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
make -j"$(nproc)" >/dev/null
DEBUG="${DEBUG:-2}" ./build/examples/fused
