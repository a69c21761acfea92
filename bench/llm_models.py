#!/usr/bin/env python3
"""llm_models.py — the random-weight llama models bench/llm.sh runs, written with the `gguf` package (the GGUF
project's writer; gguf.quants quantizes as ggml's reference quantizers do).

    python bench/llm_models.py OUTDIR [--layers L] [--types q4_0,q8_0]

writes OUTDIR/llama1b-<type>.gguf unless it is there already: TinyLlama-1.1B's shape (dim 2048, 22 layers, FFN
5632, 32 heads, 4 KV heads, 32000 tokens: 1.1e9 parameters), weights N(0, 0.02) (one random layer repeated in
every block: the speed does not depend on the values, and it saves minutes of generation), every 2-D weight in
the type, the norms F32. The vocabulary is SentencePiece-style ("llama"): <unk> <s> </s>, the 256 byte tokens
<0xNN>, then "▁" and a..z, then made-up pieces "[00042]" that no text in the bench spells, so a prompt of k
lowercase letters is exactly k + 2 tokens (BOS, "▁", the letters) for every tokenizer that follows llama.cpp.
Prints each file's path and size.
"""
import argparse
import os
import sys

import numpy as np
import gguf

DIM, LAYERS, FFN, HEADS, KV_HEADS, VOCAB, CONTEXT = 2048, 22, 5632, 32, 4, 32000, 2048


def vocab():
    toks, types = ["<unk>", "<s>", "</s>"], [2, 3, 3]  # UNKNOWN, CONTROL (as llama.cpp's converters)
    toks += ["<0x%02X>" % b for b in range(256)]
    types += [6] * 256  # BYTE
    toks += ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    types += [1] * 27  # NORMAL
    i = 0
    while len(toks) < VOCAB:
        toks.append("[%05d]" % i)
        types.append(1)
        i += 1
    scores = [0.0] * 3 + [0.0] * 256 + [-1.0] * 27 + [-2.0 - 1e-4 * k for k in range(VOCAB - 286)]
    return toks, scores, types


def write(path, qtype, layers):
    rng = np.random.default_rng(0)
    kv = DIM // HEADS * KV_HEADS

    def weight(rows, cols):
        w = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
        return gguf.quants.quantize(w, qtype)

    w = gguf.GGUFWriter(path + ".tmp", "llama")
    w.add_name("random llama 1.1B (%s)" % qtype.name)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(DIM)
    w.add_block_count(layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(DIM // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type({gguf.GGMLQuantizationType.Q4_0: 2, gguf.GGMLQuantizationType.Q8_0: 7}[qtype])
    toks, scores, types = vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    norm = np.ones(DIM, dtype=np.float32)
    layer = {
        "attn_q": weight(DIM, DIM), "attn_k": weight(kv, DIM), "attn_v": weight(kv, DIM),
        "attn_output": weight(DIM, DIM), "ffn_gate": weight(FFN, DIM), "ffn_up": weight(FFN, DIM),
        "ffn_down": weight(DIM, FFN),
    }
    w.add_tensor("token_embd.weight", weight(VOCAB, DIM), raw_dtype=qtype)
    for i in range(layers):
        w.add_tensor("blk.%d.attn_norm.weight" % i, norm)
        for name, q in layer.items():
            w.add_tensor("blk.%d.%s.weight" % (i, name), q, raw_dtype=qtype)
        w.add_tensor("blk.%d.ffn_norm.weight" % i, norm)
    w.add_tensor("output_norm.weight", norm)
    w.add_tensor("output.weight", weight(VOCAB, DIM), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--layers", type=int, default=LAYERS, help="blocks (default %d: 1.1e9 parameters)" % LAYERS)
    ap.add_argument("--types", default="q4_0,q8_0", help="comma-separated: q4_0, q8_0")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    for t in a.types.split(","):
        qtype = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0}.get(t)
        if qtype is None:
            sys.exit("llm_models.py: --types: unknown type %r (q4_0, q8_0)" % t)
        suffix = "" if a.layers == LAYERS else "-%dl" % a.layers
        path = os.path.join(a.outdir, "llama1b%s-%s.gguf" % (suffix, t))
        if not os.path.exists(path):
            print("writing %s ..." % path, file=sys.stderr, flush=True)
            write(path, qtype, a.layers)
        print(path, os.path.getsize(path))


if __name__ == "__main__":
    main()
