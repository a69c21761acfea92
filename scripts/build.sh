#!/usr/bin/env bash
# build.sh — `make -j$(nproc)` with its progress in one line: "building 37/82 src/codegen/opt.c", rewritten in
# place when stdout is a terminal, a line at every tenth of the way otherwise. The total is what `make -n` would
# run (without its silent mkdir/rm lines); the compiler's messages (stderr) pass through as they come.
# Arguments go to make. The status is make's.
set -euo pipefail
cd "$(dirname "$0")/.."
total=$(make -n "$@" 2>/dev/null | grep -cvE '^(mkdir -p|rm -f) |^make(\[[0-9]+\])?: ' || true)
if [ "$total" -eq 0 ]; then
  make -j"$(nproc)" "$@" >/dev/null
  echo "build up to date"
  exit
fi
tty=false
[ -t 1 ] && tty=true
start=$SECONDS
n=0
shown=0
set +e
make -j"$(nproc)" "$@" | while IFS= read -r line; do
  case "$line" in make:* | make\[*) continue ;; esac
  n=$((n + 1))
  [ "$n" -gt "$total" ] && n=$total
  what=""
  if [[ $line =~ \ -c\ ([^ ]+) ]] || [[ $line =~ \ -o\ ([^ ]+) ]] || [[ $line =~ ^ar\ [a-z]+\ ([^ ]+) ]]; then
    what=${BASH_REMATCH[1]:0:60}
  fi
  if $tty; then
    printf '\r\033[Kbuilding %d/%d %s' "$n" "$total" "$what"
  elif [ $((n * 10 / total)) -gt "$shown" ] || [ "$n" -eq 1 ]; then
    shown=$((n * 10 / total))
    echo "building $n/$total $what"
  fi
done
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo
  echo "build failed (make exited with $status)" >&2
  exit "$status"
fi
$tty && printf '\r\033[K'
echo "built in $((SECONDS - start)) s ($total steps)"
