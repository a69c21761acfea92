#!/usr/bin/env bash
# llm_vs_llamacpp.sh — tg_llm against llama.cpp on the same GGUF files (issue 16's reference check; not part of
# run_tests: it needs a llama.cpp build, never committed). stories260K is converted to F32, F16, Q8_0 and Q4_0
# by tg_llama2c_to_gguf; llama.cpp decodes each file from the prompt's ids, greedily, 64 positions, and writes
# its logits; tgc decodes the same ids and compares: the largest logit difference and where greedy choices
# first differ. Expect F32 within 1e-4 and the same greedy tokens for every type; the logits of F16 and the
# quantized types differ more (measured: F16 8e-3, Q8_0 0.27, Q4_0 0.33), since llama.cpp rounds the
# activations to F16 or 8 bits for its dot products and tgc computes with the dequantized weights in float32.
# Then small random-weight llama3-, qwen2- and qwen3-style models written by tg_gguf_writer, F32 and Q8_0.
#
#   tests/llamacpp/llm_vs_llamacpp.sh          LLAMA_CPP_DIR: a llama.cpp checkout with build/ (cmake, static
#                                              libraries); default ~/.cache/tgc/llama.cpp (src/ and build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
LC=${LLAMA_CPP_DIR:-$HOME/.cache/tgc/llama.cpp}
SRC=$LC; [ -r "$LC/src/include/llama.h" ] && SRC=$LC/src
B=$LC/build
if [ ! -r "$SRC/include/llama.h" ] || [ ! -r "$B/src/libllama.a" ]; then
  echo "skipped: no llama.cpp build at $LC (want include/llama.h and build/src/libllama.a; set LLAMA_CPP_DIR)"
  exit 0
fi
D=""
for d in "${TG_DATA:+$TG_DATA/stories260K}" "${XDG_CACHE_HOME:-$HOME/.cache}/tgc/stories260K" ../shared/data/stories260K; do
  if [ -n "$d" ] && [ -r "$d/stories260K.bin" ] && [ -r "$d/tok512.bin" ]; then D=$d; break; fi
done
[ -n "$D" ] || { echo "skipped: stories260K not found"; exit 0; }
make -j2 build/libtg_internal.a >/dev/null
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
g++ -O2 -o "$T/llamacpp_run" -x c tests/llamacpp/llamacpp_run.c -I"$SRC/include" -I"$SRC/ggml/include" -x none \
  "$B/src/libllama.a" "$B/ggml/src/libggml.a" "$B/ggml/src/libggml-cpu.a" "$B/ggml/src/libggml-base.a" \
  -fopenmp -lpthread -lm -ldl
cc -std=c11 -O2 -Iinclude -o "$T/tgc_run" tests/llamacpp/tgc_run.c build/libtg_internal.a -lz -ldl -lm -pthread
PROMPT="1 403 407 261 378"   # "Once upon a time" with BOS, as llama2.c encodes it
for t in F32:0 F16:1 Q8_0:8 Q4_0:2; do
  name=${t%%:*}
  "$T/tgc_run" --convert "$D/stories260K.bin" "$D/tok512.bin" "$T/$name.gguf" "${t##*:}"
  # shellcheck disable=SC2086
  ids=$("$T/llamacpp_run" "$T/$name.gguf" 64 "$T/$name.logits" $PROMPT 2>/dev/null)
  # shellcheck disable=SC2086
  printf '%-11s %s\n' "$name" "$("$T/tgc_run" --compare "$T/$name.gguf" "$T/$name.logits" $ids)"
done
# small random-weight models written by tg_gguf_writer: llama3-style (GQA, rope_freqs), qwen2-style (biases,
# tied output, neox RoPE), qwen3-style (q/k norms, head_dim 32 from key_length)
for kind in llama3 qwen2 qwen3; do
  for t in F32:0 Q8_0:8; do
    name=$kind-${t%%:*}
    "$T/tgc_run" --random "$kind" "$T/$name.gguf" "${t##*:}"
    ids=$("$T/llamacpp_run" "$T/$name.gguf" 32 "$T/$name.logits" 1 7 3 30 2 11 2>/dev/null)
    # shellcheck disable=SC2086
    printf '%-11s %s\n' "$name" "$("$T/tgc_run" --compare "$T/$name.gguf" "$T/$name.logits" $ids)"
  done
done
