"""llama_torch.py — stories260K (a llama2.c checkpoint) decoded greedily in PyTorch, token by token with a KV cache:
the PyTorch peer of bench/memory.sh's decoding row (its peak memory next to tgc's). Prints the token ids it chose
and "tokens/s: X". Eager, float32, torch.no_grad(); the same arithmetic as llama2.c's run.c.

  python3 bench/llama_torch.py stories260K.bin STEPS [PROMPT_TOKEN ...]
"""
import struct
import sys
import time

import torch


def load(path):
    with open(path, "rb") as f:
        dim, hidden, layers, heads, kv_heads, vocab, seq = struct.unpack("7i", f.read(28))
        w = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    shared, vocab = vocab > 0, abs(vocab)
    head = dim // heads
    kv = head * kv_heads
    at = 0

    def take(*shape):
        nonlocal at
        n = 1
        for s in shape:
            n *= s
        t = w[at:at + n].view(*shape)
        at += n
        return t
    m = {"emb": take(vocab, dim)}
    for name, shape in (("att_norm", (dim,)), ("wq", (dim, dim)), ("wk", (kv, dim)), ("wv", (kv, dim)),
                        ("wo", (dim, dim)), ("ffn_norm", (dim,)), ("w1", (hidden, dim)), ("w2", (dim, hidden)),
                        ("w3", (hidden, dim))):
        m[name] = [take(*shape) for _ in range(layers)]
    m["norm"] = take(dim)
    at += seq * head  # the RoPE tables of old exports
    m["cls"] = m["emb"] if shared else take(vocab, dim)
    return m, dict(dim=dim, layers=layers, heads=heads, kv_heads=kv_heads, head=head, seq=seq)


def rmsnorm(x, w):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w


def main():
    path, steps, prompt = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3:]] or [1]
    m, c = load(path)
    head, nh, nkv = c["head"], c["heads"], c["kv_heads"]
    freq = 1.0 / (10000.0 ** (torch.arange(0, head, 2, dtype=torch.float32) / head))
    kc = [torch.zeros(steps, nkv, head) for _ in range(c["layers"])]
    vc = [torch.zeros(steps, nkv, head) for _ in range(c["layers"])]
    token, out = prompt[0], []
    t0 = time.time()
    with torch.no_grad():
        for pos in range(steps):
            x = m["emb"][token]
            ang = pos * freq
            cos, sin = torch.cos(ang), torch.sin(ang)

            def rope(v, n):
                v = v.view(n, head // 2, 2)
                a, b = v[..., 0], v[..., 1]
                return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).view(n, head)
            for l in range(c["layers"]):
                h = rmsnorm(x, m["att_norm"][l])
                q = rope(m["wq"][l] @ h, nh)
                kc[l][pos] = rope(m["wk"][l] @ h, nkv)
                vc[l][pos] = (m["wv"][l] @ h).view(nkv, head)
                k = kc[l][:pos + 1].repeat_interleave(nh // nkv, 1)  # (pos+1, nh, head)
                v = vc[l][:pos + 1].repeat_interleave(nh // nkv, 1)
                att = torch.softmax(torch.einsum("hd,thd->ht", q, k) / head ** 0.5, -1)
                x = x + m["wo"][l] @ torch.einsum("ht,thd->hd", att, v).reshape(-1)
                h = rmsnorm(x, m["ffn_norm"][l])
                x = x + m["w2"][l] @ (torch.nn.functional.silu(m["w1"][l] @ h) * (m["w3"][l] @ h))
            logits = m["cls"] @ rmsnorm(x, m["norm"])
            token = prompt[pos + 1] if pos + 1 < len(prompt) else int(torch.argmax(logits))
            out.append(token)
    dt = time.time() - t0
    print(" ".join(map(str, out)))
    print(f"tokens/s: {steps / dt:.1f}")


if __name__ == "__main__":
    main()
