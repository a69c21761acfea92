#!/usr/bin/env bash
# cli.sh — the example and benchmark programs' command lines: a bad flag, a missing value or a bad value ends
# with exit status 2 and a message naming the flag; --help exits 0 with the usage on stdout; a run that fails
# leaves an existing output file as it was; --out into a missing folder fails before any training (time-bound).
# MNIST checks run on a small made-up dataset written here (the real one is not needed); llama checks need
# stories260K (the example finds it under ../shared/data; tg-llm converts it to GGUF in the user cache once) and
# are skipped with a line saying so without it.
# Run from anywhere after `make`; the last line is "N passed, N failed" and the status is 1 on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
B=$(cd "${BUILD:-build}" && pwd) || exit 1
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# runs a program with its arguments, for at most $limit seconds; $rc, $out and $err hold what came back
limit=60
run() {
  timeout "$limit" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out=$(cat "$tmp/out")
  err=$(cat "$tmp/err")
}

# expect_usage_error WORD PROGRAM ARGS...: exit 2, WORD (the flag) in the message on stderr, nothing on stdout
expect_usage_error() {
  local word=$1
  shift
  run "$@"
  if [ "$rc" -ne 2 ]; then bad "$* -> exit $rc, expected 2 (stderr: ${err:0:200})"
  elif ! grep -qF -- "$word" "$tmp/err"; then bad "$* -> the message does not name '$word': ${err:0:200}"
  elif [ -n "$out" ]; then bad "$* -> printed on stdout: ${out:0:200}"
  else ok
  fi
}

# expect_help PROGRAM FLAGS...: --help exits 0 with a usage line on stdout that names every flag given
expect_help() {
  local prog=$1
  shift
  run "$prog" --help
  if [ "$rc" -ne 0 ]; then bad "$prog --help -> exit $rc"; return; fi
  if ! grep -q "^usage:" "$tmp/out"; then bad "$prog --help -> no usage line on stdout"; return; fi
  for f in "$@"; do
    grep -qF -- "$f" "$tmp/out" || { bad "$prog --help does not explain $f"; return; }
  done
  ok
}

# a big-endian uint32 as printf escapes
be32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }

# idx DIR NAME N: N random 28x28 images (NAME-images) and labels 0..9 in turn (NAME-labels), MNIST's IDX format
idx() {
  # shellcheck disable=SC2059
  { printf '\x00\x00\x08\x03'; printf "$(be32 "$3")$(be32 28)$(be32 28)"; head -c $(($3 * 784)) /dev/urandom; } \
    >"$1/$2-images-idx$4-ubyte"
  # shellcheck disable=SC2059
  { printf '\x00\x00\x08\x01'; printf "$(be32 "$3")"; for ((k = 0; k < $3; k++)); do printf "$(printf '\\x%02x' $((k % 10)))"; done; } \
    >"$1/$2-labels-idx1-ubyte"
}
data="$tmp/data"
mkdir -p "$data"
idx "$data" train 64 3
idx "$data" t10k 20 3

# ---- mnist ------------------------------------------------------------------------------------------------
M=$B/examples/mnist
expect_help "$M" --steps --batch --lr --seed --data --fashion --out --no-save --eval
expect_usage_error --steps "$M" --steps abc
expect_usage_error --steps "$M" --steps
expect_usage_error --steps "$M" --steps 0
expect_usage_error --steps "$M" --steps 5x
expect_usage_error --steps "$M" --steps 99999999999999999999
expect_usage_error --batch "$M" --batch -3
expect_usage_error --batch "$M" --batch 65 --data "$data" --no-save   # more than the 64 training images
expect_usage_error --lr "$M" --lr abc
expect_usage_error --lr "$M" --lr nan
expect_usage_error --lr "$M" --lr 0
expect_usage_error --seed "$M" --seed -1
expect_usage_error --bogus "$M" --bogus
expect_usage_error extra "$M" extra
expect_usage_error --out "$M" --out --steps 3
expect_usage_error --eval "$M" --eval /nonexistent/w.safetensors
expect_usage_error --steps "$M" --eval "$tmp/x.safetensors" --steps 3
expect_usage_error /nonexistent "$M" --data /nonexistent
expect_usage_error train-images "$M" --data "$tmp" --no-save   # a folder without the IDX files
expect_usage_error /nonexistent "$M" --out /nonexistent/w.safetensors

# a failing run leaves the weights already saved as they were (same bytes, same modification time)
w="$tmp/w.safetensors"
echo "earlier weights" >"$w"
touch -d '2001-01-01' "$w"
before=$(stat -c '%Y %s' "$w")
for args in "--steps abc" "--lr abc" "--data /nonexistent" "--batch 65 --data $data" "--bogus"; do
  # shellcheck disable=SC2086
  run "$M" $args --out "$w"
  if [ "$rc" -ne 2 ]; then bad "mnist $args --out FILE -> exit $rc, expected 2"
  elif [ "$(stat -c '%Y %s' "$w")" != "$before" ] || [ "$(cat "$w")" != "earlier weights" ]; then
    bad "mnist $args --out FILE -> the file was touched: time and size $(stat -c '%Y %s' "$w"), before $before"
  else ok
  fi
  echo "earlier weights" >"$w"
  touch -d '2001-01-01' "$w"
done
[ -z "$(ls "$tmp" | grep probe)" ] && ok || bad "a probe file was left behind: $(ls "$tmp")"

# --out into a missing folder fails at once, with the dataset present, before a step runs
start=$(date +%s%N)
limit=15 run "$M" --data "$data" --steps 1000 --batch 8 --out "$tmp/missing/w.safetensors"
ms=$((($(date +%s%N) - start) / 1000000))
if [ "$rc" -ne 2 ] || ! grep -qF "$tmp/missing" "$tmp/err" || grep -q "^training" "$tmp/out" || [ "$ms" -gt 5000 ]; then
  bad "mnist --out into a missing folder -> exit $rc after $ms ms (stdout: ${out:0:120}; stderr: ${err:0:200})"
else ok
fi

# a real run on the made-up data writes its default name, distinct per dataset, and nothing else
mkdir -p "$tmp/cwd"
( cd "$tmp/cwd" && timeout 300 "$M" --data "$data" --steps 4 --batch 8 >out 2>err )
rc=$?
if [ "$rc" -ne 0 ] || [ "$(ls "$tmp/cwd" | grep -v '^out$\|^err$')" != "mnist.safetensors" ] ||
   ! grep -q "^test accuracy: " "$tmp/cwd/out"; then
  bad "mnist --data DIR --steps 4 in a fresh folder -> exit $rc, files: $(ls "$tmp/cwd" | paste -sd " "); $(tail -3 "$tmp/cwd/err")"
else ok
fi
cp "$tmp/cwd/mnist.safetensors" "$tmp/mnist-weights"
( cd "$tmp/cwd" && timeout 300 "$M" --data "$data" --fashion --steps 3 --batch 8 --seed 5 >out 2>err )
rc=$?
if [ "$rc" -ne 0 ] || [ ! -f "$tmp/cwd/fashion-mnist.safetensors" ] || ! cmp -s "$tmp/cwd/mnist.safetensors" "$tmp/mnist-weights"; then
  bad "mnist --fashion -> exit $rc, files: $(ls "$tmp/cwd" | paste -sd " "); $(tail -3 "$tmp/cwd/err")"
else ok
fi
# the ETA is unknown until two steps (compile, capture) are behind, then it is counted from the later steps
eta=$(tr '\r' '\n' <"$tmp/cwd/err" | grep -o 'ETA *[^ ]*' | tr -s ' ' | paste -sd,)
if [ "$eta" != "ETA ?,ETA ?,ETA 0.0s" ]; then bad "mnist --steps 3: ETAs '$eta', expected 'ETA ?,ETA ?,ETA 0.0s'"
else ok
fi

# ---- llama --------------------------------------------------------------------------------------------------
L=$B/examples/llama
expect_help "$L" --model --tokenizer -n --ids
expect_usage_error -n "$L" -n abc
expect_usage_error -n "$L" -n -5
expect_usage_error -n "$L" -n 0
expect_usage_error -n "$L" -n
expect_usage_error --bogus "$L" --bogus
expect_usage_error --model "$L" --model /nonexistent/m.bin
expect_usage_error --tokenizer "$L" --tokenizer /nonexistent/t.bin
model_dir=""
for d in "${TG_DATA:-/nonexistent}/stories260K" "${XDG_CACHE_HOME:-$HOME/.cache}/tgc/stories260K" ../shared/data/stories260K; do
  if [ -r "$d/stories260K.bin" ] && [ -r "$d/tok512.bin" ]; then model_dir=$d; break; fi
done
if [ -z "$model_dir" ]; then
  echo "skipped: the llama checks that need stories260K (not found in \$TG_DATA, ~/.cache/tgc or ../shared/data)"
else
  expect_usage_error "1..512" "$L" -n 100000 "Once upon a time"
  # extra words are one prompt: the same text as the quoted prompt
  run "$L" -n 24 --ids Once upon a time
  a="$err"
  run "$L" -n 24 --ids "Once upon a time"
  if [ "$rc" -ne 0 ] || [ "$(grep '^ids' <<<"$a")" != "$(grep '^ids' <<<"$err")" ]; then
    bad "llama with the prompt as four words differs from the quoted prompt: $(grep '^ids' <<<"$a") vs $(grep '^ids' <<<"$err")"
  else ok
  fi
  # --model DIR/x finds the tokenizer beside it first: a copy of the model beside a different tokenizer
  mkdir -p "$tmp/m"
  cp "$model_dir/stories260K.bin" "$tmp/m/x.bin"
  printf 'not a tokenizer' >"$tmp/m/tok512.bin"
  run "$L" --model "$tmp/m/x.bin" -n 8 "Once"
  if [ "$rc" -eq 0 ] || ! grep -qF "$tmp/m/tok512.bin" "$tmp/err"; then
    bad "llama --model DIR/x did not read DIR/tok512.bin (exit $rc: ${err:0:200})"
  else ok
  fi
  cp "$model_dir/tok512.bin" "$tmp/m/tok512.bin"
  run "$L" --model "$tmp/m/x.bin" -n 8 "Once"
  [ "$rc" -eq 0 ] && ok || bad "llama --model DIR/x with DIR/tok512.bin -> exit $rc: ${err:0:200}"
fi

# ---- tg-llm -------------------------------------------------------------------------------------------------
T=$B/tg-llm
expect_help "$T" --model --prompt --n-predict --interactive --temp --top-k --top-p --min-p --repeat-penalty \
  --repeat-last-n --seed --threads --ctx-size --verbose-prompt
for f in --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed -n -t -c; do
  expect_usage_error "$f" "$T" "$f" abc
  expect_usage_error "$f" "$T" "$f"
done
expect_usage_error --temp "$T" --temp -0.5
expect_usage_error --temp "$T" --temp nan
expect_usage_error --top-k "$T" --top-k -1
expect_usage_error --top-p "$T" --top-p 1.01
expect_usage_error --min-p "$T" --min-p -0.1
expect_usage_error --repeat-penalty "$T" --repeat-penalty 0
expect_usage_error --repeat-last-n "$T" --repeat-last-n 65537
expect_usage_error --seed "$T" --seed -1
expect_usage_error -n "$T" -n -2
expect_usage_error -t "$T" -t 0
expect_usage_error -t "$T" -t 257
expect_usage_error -c "$T" -c -1
expect_usage_error -p "$T" -p
expect_usage_error --bogus "$T" --bogus
expect_usage_error /nonexistent "$T" -m /nonexistent/m.gguf
printf 'not a model' >"$tmp/m.gguf"
run "$T" -m "$tmp/m.gguf" -n 1   # not a GGUF file: a failure while running, named
if [ "$rc" -ne 1 ] || ! grep -qF "not a GGUF file" "$tmp/err"; then bad "tg-llm on a file that is not GGUF -> exit $rc: ${err:0:200}"
else ok
fi
if [ -z "$model_dir" ]; then
  echo "skipped: the tg-llm runs that need stories260K (not found in \$TG_DATA, ~/.cache/tgc or ../shared/data)"
else
  # greedy: the prompt, then the same text as the llama example (llama2.c's run.c); statistics on stderr only
  run "$L" -n 40 "Once upon a time"
  want=$out
  run "$T" -n 36 --temp 0 -p "Once upon a time"   # 40 positions: BOS and 4 prompt tokens, 36 drawn
  if [ "$rc" -ne 0 ] || [ "$out" != "$want" ]; then bad "tg-llm --temp 0 -> exit $rc, text '${out:0:120}', want '${want:0:120}' (${err:0:200})"
  elif ! grep -q "prefill 5 tokens .*tokens/s" <<<"$err" || ! grep -q "decode .*tokens/s" <<<"$err" ||
       ! grep -q "peak memory" <<<"$err"; then bad "tg-llm statistics missing on stderr: ${err:0:300}"
  else ok
  fi
  expect_usage_error "0..512" "$T" -c 513
  # a seed fixes the text, whatever the thread count; another seed gives another text
  run "$T" -n 48 --seed 7 -t 1 -p "The dog"
  a=$out
  run "$T" -n 48 --seed 7 -t 2 -p "The dog"
  b=$out
  run "$T" -n 48 --seed 8 -p "The dog"
  if [ -z "$a" ] || [ "$a" != "$b" ] || [ "$a" = "$out" ]; then
    bad "tg-llm --seed: 7 on 1 thread '${a:0:80}', on 2 '${b:0:80}', 8 '${out:0:80}'"
  else ok
  fi
  # chat: each stdin line a turn (stories260K has no template: the text as it is), the replies on stdout
  printf 'Once upon a time\nThe cat\n' >"$tmp/chat.txt"
  timeout "$limit" "$T" -i -n 8 --seed 1 <"$tmp/chat.txt" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 0 ] || [ "$(wc -l <"$tmp/out")" -ne 2 ] || ! grep -q "chat template none" "$tmp/err"; then
    bad "tg-llm -i with two lines -> exit $rc, $(wc -l <"$tmp/out") lines: $(head -c 200 "$tmp/err")"
  else ok
  fi
fi

# ---- onnx ---------------------------------------------------------------------------------------------------
O=$B/examples/onnx
expect_help "$O" --out --no-save --bench --seed --dim
printf 'not a model' >"$tmp/m.onnx"
expect_usage_error "no model" "$O"
expect_usage_error --bench "$O" "$tmp/m.onnx" --bench abc
expect_usage_error --bench "$O" "$tmp/m.onnx" --bench 0
expect_usage_error --bench "$O" "$tmp/m.onnx" --bench
expect_usage_error --seed "$O" "$tmp/m.onnx" --seed -1
expect_usage_error --dim "$O" "$tmp/m.onnx" --dim N
expect_usage_error --dim "$O" "$tmp/m.onnx" --dim =3
expect_usage_error --dim "$O" "$tmp/m.onnx" --dim N=0
expect_usage_error --dim "$O" "$tmp/m.onnx" --dim N=3x
expect_usage_error --bogus "$O" "$tmp/m.onnx" --bogus
expect_usage_error /nonexistent "$O" /nonexistent/m.onnx
expect_usage_error /nonexistent "$O" "$tmp/m.onnx" /nonexistent/x.npy
expect_usage_error /nonexistent "$O" "$tmp/m.onnx" --out /nonexistent
expect_usage_error --no-save "$O" "$tmp/m.onnx" --out "$tmp" --no-save
run "$O" "$tmp/m.onnx" --no-save   # not a model: a failure while running, named
if [ "$rc" -ne 1 ] || ! grep -qF "$tmp/m.onnx" "$tmp/err"; then bad "onnx on a file that is not a model -> exit $rc: ${err:0:200}"
else ok
fi
node=/usr/share/libonnx-testdata/data/node
if [ ! -r "$node/test_relu/model.onnx" ] || [ ! -r "$node/test_add/model.onnx" ]; then
  echo "skipped: the onnx runs that need Debian's libonnx-testdata (not found in $node)"
else
  expect_usage_error --dim "$O" "$node/test_relu/model.onnx" --dim batch=2   # the model names no dimension
  expect_usage_error "2 input files" "$O" "$node/test_relu/model.onnx" "$tmp/m.onnx" "$tmp/m.onnx"
  # a run on random inputs writes y.npy; relu of that output is the same array, byte for byte
  mkdir -p "$tmp/o1" "$tmp/o2"
  run "$O" "$node/test_relu/model.onnx" --out "$tmp/o1" --seed 3
  r1=$rc
  run "$O" "$node/test_relu/model.onnx" "$tmp/o1/y.npy" --out "$tmp/o2"
  if [ "$r1" -ne 0 ] || [ "$rc" -ne 0 ] || ! cmp -s "$tmp/o1/y.npy" "$tmp/o2/y.npy" || ! grep -q "o1/y.npy" "$tmp/out"; then
    bad "onnx test_relu on its own output -> exit $r1, $rc; files $(ls "$tmp/o1" "$tmp/o2" | paste -sd " "): ${err:0:200}"
  else ok
  fi
  # two inputs from files under --bench: x + x is twice x (both files are test_relu's output)
  run "$O" "$node/test_add/model.onnx" "$tmp/o1/y.npy" "$tmp/o1/y.npy" --out "$tmp/o2" --bench 3
  if [ "$rc" -ne 0 ] || ! grep -q "^bench: 3 runs .*median [0-9.]* ms, best [0-9.]* ms" "$tmp/out" ||
     ! grep -q "max [0-9.e+-]*" "$tmp/out"; then
    bad "onnx test_add --bench 3 -> exit $rc: ${out:0:300} ${err:0:200}"
  else ok
  fi
  # an input file of another dtype is a message naming the input and both dtypes
  run "$O" "$node/test_add/model.onnx" "$tmp/o1/y.npy" "$PWD/tests/fixtures/npy/int32.npy" --no-save
  if [ "$rc" -ne 1 ] || ! grep -q "int32" "$tmp/err" || ! grep -q "float32" "$tmp/err"; then
    bad "onnx with an int32 file for a float32 input -> exit $rc: ${err:0:200}"
  else ok
  fi
fi

# ---- fused and the benchmarks (only their command lines: none of them runs here) -----------------------------
expect_help "$B/examples/fused"
expect_usage_error --bogus "$B/examples/fused" --bogus
expect_help "$B/bench/core" --json
expect_usage_error --bogus "$B/bench/core" --bogus
expect_help "$B/bench/jit" --steps
expect_usage_error --steps "$B/bench/jit" --steps abc
expect_usage_error --steps "$B/bench/jit" --steps 0
expect_help "$B/bench/workloads" --json --beam --rounds
expect_usage_error --rounds "$B/bench/workloads" --rounds 17
expect_usage_error --rounds "$B/bench/workloads" --rounds x
expect_help "$B/bench/quant" --json --reps --only
expect_usage_error --reps "$B/bench/quant" --reps 0
expect_usage_error --only "$B/bench/quant" --only
expect_usage_error --bogus "$B/bench/quant" --bogus

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
