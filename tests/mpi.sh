#!/usr/bin/env bash
# mpi.sh — the distributed layer (src/dist/, tg.h "distributed") under mpirun with 2 ranks over loopback:
# collectives of every dtype and size 0 against plain sums, mismatched shapes reported on both ranks, three
# data-parallel MNIST-network steps (ranks bit-identical, one process over the global batch within 1e-6), a
# rank killed or hung mid-collective (the other fails with a message within TG_DIST_TIMEOUT), and one rank
# without mpirun. Run after `make`; the last line is "N passed, N failed, N skipped". Without mpirun, or with a
# library built without MPI, every test is skipped with a note. About 30 s here.
set -uo pipefail
cd "$(dirname "$0")/.."
B=$(cd "${BUILD:-build}" && pwd) || exit 1
pass=0 fail=0 skip=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; sed 's/^/    /' "$tmp/out" | tail -20; }
MPIRUN=(mpirun -np 2 --oversubscribe)
# as root (containers, CI) Open MPI refuses to start without these
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# loopback only: no probing of other network interfaces
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo

# runs "$@" for at most $limit seconds; $rc, $secs and $tmp/out hold what came back
run() {
  local t0=$SECONDS
  timeout "$limit" "$@" >"$tmp/out" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
}
limit=120

tests=(one-rank collectives collectives-3 mismatch data-parallel kill kill-recovery hang)
if ! command -v mpirun >/dev/null 2>&1; then
  echo "skipped: mpirun not found (apt-get install openmpi-bin libopenmpi-dev, then rebuild)"
  skip=${#tests[@]}
elif [ -x "$B/tests/mpi/dist_test" ] && run "$B/tests/mpi/dist_test" && grep -q "built without MPI" "$tmp/out"; then
  echo "skipped: the library was built without MPI (install libopenmpi-dev and rebuild)"
  skip=${#tests[@]}
elif [ ! -x "$B/tests/mpi/dist_test" ] || [ ! -x "$B/tests/mpi/dp_mnist" ]; then
  echo "FAIL: $B/tests/mpi/dist_test or dp_mnist is missing: run make first"
  fail=${#tests[@]}
else
  # one-rank: not started by mpirun, the collectives are the identity (the run just above)
  if [ $rc = 0 ] && grep -q "rank 0 of 1: .* 0 failed" "$tmp/out"; then ok "one rank without mpirun"; else bad "one rank without mpirun (status $rc)"; fi

  run "${MPIRUN[@]}" "$B/tests/mpi/dist_test" collectives
  if [ $rc = 0 ] && [ "$(grep -c " of 2: .* 0 failed" "$tmp/out")" = 2 ]; then
    ok "all-reduce and broadcast of every dtype and size 0, 2 ranks ($(grep -m1 -o '[0-9]* checks' "$tmp/out") each)"
  else bad "collectives (status $rc)"; fi

  # 3 ranks: uneven chunks, and a rank whose own values are not among the first two summed
  run mpirun -np 3 --oversubscribe "$B/tests/mpi/dist_test" collectives
  if [ $rc = 0 ] && [ "$(grep -c " of 3: .* 0 failed" "$tmp/out")" = 3 ]; then ok "the same collectives on 3 ranks"
  else bad "collectives on 3 ranks (status $rc)"; fi

  run "${MPIRUN[@]}" "$B/tests/mpi/dist_test" mismatch
  if [ $rc = 0 ] && grep -q "rank 0 has a tensor of float32 (3, 4), rank 1 one of float32 (4, 3)" "$tmp/out" &&
     grep -q "rank 1 has a tensor of float32 (4, 3), rank 0 one of float32 (3, 4)" "$tmp/out"; then
    ok "mismatched shapes are reported on both ranks, and the next collective works"
  else bad "mismatched shapes (status $rc)"; fi

  run "${MPIRUN[@]}" "$B/tests/mpi/dp_mnist"
  if [ $rc = 0 ] && [ "$(grep -c "bit-identical to rank 0's" "$tmp/out")" = 2 ]; then
    ok "3 data-parallel MNIST steps: ranks identical, $(grep -o 'global batch: .*' "$tmp/out")"
  else bad "data-parallel MNIST steps (status $rc)"; fi

  # a rank killed mid-step: mpirun ends the job (the other rank does not wait for ever) ...
  export TG_DIST_TIMEOUT=5
  run "${MPIRUN[@]}" "$B/tests/mpi/dist_test" kill
  if [ $rc != 0 ] && [ $rc != 124 ] && [ $secs -le $((TG_DIST_TIMEOUT + 15)) ] && grep -qi "rank 1 .*signal 9\|killed" "$tmp/out"; then
    ok "a rank killed mid-step: the job exits with status $rc in ${secs} s, naming it"
  else bad "a rank killed (status $rc after ${secs} s)"; fi
  # ... and when mpirun keeps the job going (--enable-recovery), the survivor's collective times out itself
  run "${MPIRUN[@]}" --enable-recovery "$B/tests/mpi/dist_test" kill
  if [ $rc != 124 ] && [ $secs -le $((TG_DIST_TIMEOUT + 15)) ] &&
     grep -q "rank 0: all-reduce returned -4 .*no answer from rank 1 after 5.0 s" "$tmp/out" && grep -q "then barrier: .*out of step" "$tmp/out"; then
    ok "a rank killed, job kept running: the other fails in ${secs} s: $(grep -o 'no answer from rank 1 after [0-9.]* s' "$tmp/out")"
  else bad "a rank killed under --enable-recovery (status $rc after ${secs} s)"; fi
  run "${MPIRUN[@]}" "$B/tests/mpi/dist_test" hang
  if [ $rc = 3 ] && [ $secs -le $((TG_DIST_TIMEOUT + 15)) ] && grep -q "no answer from rank 1 after 5.0 s" "$tmp/out"; then
    ok "a hung rank: the other exits with status 3 in ${secs} s naming it"
  else bad "a hung rank (status $rc after ${secs} s)"; fi
  unset TG_DIST_TIMEOUT
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
