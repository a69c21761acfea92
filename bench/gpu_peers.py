"""gpu_peers.py — PyTorch's side of bench/gpu.c: the same workloads on the same GPU ("cuda").

Run by build/bench/gpu as a subprocess with its flags; on its own:
    python3 bench/gpu_peers.py [--small] [--only W[,W]] [--peer-cpu] [--model stories260K.bin]
Prints one JSON line per workload, {"workload", "impl": "pytorch", "value", "best", "unit", "device"}; {"skip": "pytorch",
"note": why} when torch is missing, when there is no CUDA GPU (unless --peer-cpu: then PyTorch runs on the CPU, a
functional check of this script whose figures are not GPU figures) or when a workload fails; {"info": ...} says
the version and the device. The sizes and workload names follow gpu.c's (--small shrinks them the same way).

Every workload runs once first (cuBLAS/cuDNN choices, allocations), then a few timed repetitions, each ended by
torch.cuda.synchronize(); median and fastest are reported. PyTorch runs eager (no torch.compile); float32
matmuls and convolutions with TF32 off (torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False), as
tgc computes float32 in float32. c = a * b + 1 is written as a user would: two kernels in eager PyTorch, and
counted as 3 x 4 bytes per element as for tgc. Each result is checked once against a float64 computation of a
few elements on the host, as gpu.c checks tgc's.
"""
import json
import math
import os
import statistics
import struct
import sys
import time
import traceback

ARGS = sys.argv[1:]
SMALL = "--small" in ARGS
PEER_CPU = "--peer-cpu" in ARGS
ONLY = []
MODEL = None
for i, a in enumerate(ARGS):
    if a == "--only" and i + 1 < len(ARGS):
        ONLY = [w for w in ARGS[i + 1].split(",") if w]
    if a == "--model" and i + 1 < len(ARGS):
        MODEL = ARGS[i + 1]

MM16 = 256 if SMALL else 8192
MM32 = 128 if SMALL else 4096
EW = 1 << 20 if SMALL else 1 << 28
ROWS = 512 if SMALL else 16384
BATCH = 32 if SMALL else 512
REPS = 2 if SMALL else 5
POSITIONS = 16 if SMALL else 256


DEVICE = ["cuda"]  # where PyTorch runs: "cuda", or "cpu" with --peer-cpu


def emit(workload, value, best, unit):
    print(json.dumps({"workload": workload, "impl": "pytorch", "value": value, "best": best, "unit": unit,
                      "device": DEVICE[0]}), flush=True)


def skip(note):
    print(json.dumps({"skip": "pytorch", "note": note[:280]}), flush=True)


def info(note):
    print(json.dumps({"info": "pytorch", "note": note[:280]}), flush=True)


def wanted(workload):
    return not ONLY or any(w in workload for w in ONLY)


def guarded(workload, fn):
    if not wanted(workload):
        return
    try:
        fn()
    except Exception as e:  # one failing workload does not stop the others
        skip(f"{workload} failed: {type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stderr)


def main():
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:
        skip(f"torch is not installed ({type(e).__name__}); pip install torch")
        return
    if torch.cuda.is_available():
        dev = "cuda"
        where = torch.cuda.get_device_name(0)
    elif PEER_CPU:
        dev = "cpu"
        where = f"the CPU, {torch.get_num_threads()} threads (--peer-cpu: a functional check, not a GPU figure)"
    else:
        skip("no CUDA GPU for PyTorch (torch.cuda.is_available() is False); --peer-cpu runs it on the CPU as a check")
        return
    DEVICE[0] = dev
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    info(f"{torch.__version__} eager on {where}; float32 matmul and conv without TF32")
    torch.manual_seed(0)

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    def timed(fn, reps, first=None):
        """(median, best) seconds of reps calls of fn, each synchronized, after one untimed call (or first())"""
        (first or fn)()
        sync()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            sync()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts), min(ts)

    def rate(workload, amount, scale, unit, t):
        emit(workload, amount / t[0] / scale, amount / t[1] / scale, unit)

    def fail(workload, msg):
        raise RuntimeError(f"{workload}: check failed: {msg}")

    # ---- matmul ----
    for n, dt, name in ((MM16, torch.float16, "f16"), (MM16, torch.bfloat16, "bf16"), (MM32, torch.float32, "f32")):
        wl = f"matmul_{n}_{name}"

        def mm(n=n, dt=dt, wl=wl):
            a, b = torch.randn(n, n, device=dev).to(dt), torch.randn(n, n, device=dev).to(dt)
            c = a @ b
            tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dt]
            for k in range(4):
                i, j = k * 7919 % n, (k * 104729 + 13) % n
                row, col = a[i].double().cpu(), b[:, j].double().cpu()
                want, mag = float((row * col).sum()), float((row * col).abs().sum())
                got = float(c[i, j])
                if not abs(got - want) <= tol * abs(want) + 1e-5 * mag + 1e-6:
                    fail(wl, f"C[{i}][{j}] = {got}, the host says {want}")
            del c
            rate(wl, 2.0 * n ** 3, 1e12, "TFLOP/s", timed(lambda: a @ b, REPS))
        guarded(wl, mm)

    # ---- copy and elementwise ----
    lg = EW.bit_length() - 1
    cw, ew = f"copy_2^{lg}_f32", f"elementwise_2^{lg}_f32"
    if wanted(cw) or wanted(ew):
        def copy_and_ew():
            a, b = torch.randn(EW, device=dev), torch.randn(EW, device=dev)
            out = torch.empty_like(a)
            out.copy_(a)
            if not torch.equal(out[:16], a[:16]) or not torch.equal(out[-16:], a[-16:]):
                fail(cw, "the copy differs from its source")
            rate(cw, 8.0 * EW, 1e9, "GB/s", timed(lambda: out.copy_(a), 2 if SMALL else 10))
            if wanted(ew):
                c = a * b + 1
                for s in (slice(0, 16), slice(EW // 2, EW // 2 + 16), slice(EW - 16, EW)):
                    want = a[s].double().cpu() * b[s].double().cpu() + 1
                    if not torch.allclose(c[s].double().cpu(), want, rtol=1e-6, atol=1e-7):
                        fail(ew, f"c[{s.start}..] differs from the host's a * b + 1")
                del c
                rate(ew, 12.0 * EW, 1e9, "GB/s", timed(lambda: a * b + 1, 2 if SMALL else 10))
        guarded(ew if wanted(ew) else cw, copy_and_ew)

    # ---- softmax and layernorm ----
    for kind in ("softmax", "layernorm"):
        wl = f"{kind}_{ROWS}x{ROWS}_f32"

        def rows(kind=kind, wl=wl):
            x = torch.randn(ROWS, ROWS, device=dev) * (4 if kind == "softmax" else 1)
            fn = (lambda: torch.softmax(x, -1)) if kind == "softmax" else (lambda: F.layer_norm(x, (ROWS,), eps=1e-5))
            y = fn()
            for i in (0, ROWS - 1):
                xr = x[i].double().cpu()
                want = torch.softmax(xr, -1) if kind == "softmax" else (xr - xr.mean()) / torch.sqrt(xr.var(unbiased=False) + 1e-5)
                tol = dict(rtol=1e-5, atol=1e-7) if kind == "softmax" else dict(rtol=0, atol=1e-3)
                if not torch.allclose(y[i].double().cpu(), want, **tol):
                    fail(wl, f"row {i} differs from the host's")
            del y
            rate(wl, 8.0 * ROWS * ROWS, 1e9, "GB/s", timed(fn, REPS))
        guarded(wl, rows)

    # ---- MNIST training step: beautiful_mnist, Adam, a synthetic batch made on the device ----
    wl = f"mnist_step_b{BATCH}_adam"

    def mnist():
        nn = torch.nn
        model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32),
                              nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(),
                              nn.BatchNorm2d(64), nn.MaxPool2d(2), nn.Flatten(1), nn.Linear(576, 10)).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x = torch.randint(0, 256, (BATCH, 1, 28, 28), dtype=torch.uint8, device=dev)
        y = torch.randint(0, 10, (BATCH,), device=dev)
        losses = []

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x.float()), y)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        reps = 2 if SMALL else 10
        step(), step()  # warm-up as tgc's (its first two calls run and capture)
        t = timed(step, reps)
        first, last = float(losses[0]), float(losses[-1])
        if not (math.isfinite(last) and last < first):  # the same batch every step: the loss must fall
            fail(wl, f"the loss went from {first:.4f} to {last:.4f}")
        emit(wl, t[0] * 1e3, t[1] * 1e3, "ms/step")
    guarded(wl, mnist)

    # ---- Llama stories260K greedy decoding ----
    wl = f"llama_stories260K_decode_{POSITIONS}"
    if wanted(wl):
        if not MODEL:
            skip(f"{wl}: no model (gpu.c passes --model when it finds stories260K.bin)")
        else:
            guarded(wl, lambda: llama(torch, dev, sync, timed, wl))


def read_fixture():
    """llama2.c's greedy tokens after "Once upon a time" (tests/fixtures/stories260K_greedy.txt): (prompt, next)"""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "stories260K_greedy.txt")
    prompt, nxt = [1, 403, 407, 261, 378], []
    try:
        for line in open(path):
            if line.startswith("prompt_ids: "):
                prompt = [int(v) for v in line.split()[1:]]
            elif line.startswith("next: "):
                nxt = [int(v) for v in line.split()[1:]]
    except OSError:
        pass
    return prompt, nxt


def llama(torch, dev, sync, timed, wl):
    """llama2.c's forward (run.c) in eager PyTorch with a KV cache, one token per step, argmax read each step"""
    data = open(MODEL, "rb").read()
    dim, hidden, L, H, KV, vocab, seq = struct.unpack("7i", data[:28])
    shared, vocab = vocab > 0, abs(vocab)
    hs, kvd = dim // H, dim // H * KV
    w = torch.frombuffer(bytearray(data[28:]), dtype=torch.float32)
    off = [0]

    def take(*shape):
        n = math.prod(shape)
        t = w[off[0]:off[0] + n].view(*shape).to(dev)
        off[0] += n
        return t
    emb, rms_att, wq, wk, wv, wo = take(vocab, dim), take(L, dim), take(L, dim, dim), take(L, kvd, dim), take(L, kvd, dim), take(L, dim, dim)
    rms_ffn, w1, w2, w3, rms_final = take(L, dim), take(L, hidden, dim), take(L, dim, hidden), take(L, hidden, dim), take(dim)
    off[0] += seq * hs  # freq_cis_real and freq_cis_imag (seq x hs/2 each): recomputed below as run.c does
    wcls = emb if shared else take(vocab, dim)
    freq = 1.0 / (10000.0 ** (torch.arange(0, hs, 2, device=dev, dtype=torch.float32) / hs))
    ang = torch.arange(seq, device=dev, dtype=torch.float32)[:, None] * freq[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    kc, vc = torch.zeros(L, seq, KV, hs, device=dev), torch.zeros(L, seq, KV, hs, device=dev)

    def rmsnorm(x, g):
        return x * torch.rsqrt((x * x).mean() + 1e-5) * g

    def rope(v, pos, nh):
        v = v.view(nh, hs // 2, 2)
        a, b = v[..., 0], v[..., 1]
        c, s = cos[pos], sin[pos]
        return torch.stack((a * c - b * s, a * s + b * c), -1).view(nh, hs)

    def step(token, pos):
        x = emb[token]
        for l in range(L):
            xb = rmsnorm(x, rms_att[l])
            q, k, v = rope(wq[l] @ xb, pos, H), rope(wk[l] @ xb, pos, KV), (wv[l] @ xb).view(KV, hs)
            kc[l, pos], vc[l, pos] = k, v
            K = kc[l, :pos + 1].repeat_interleave(H // KV, dim=1)  # (T, H, hs)
            V = vc[l, :pos + 1].repeat_interleave(H // KV, dim=1)
            att = torch.softmax(torch.einsum("hd,thd->ht", q, K) / math.sqrt(hs), -1)
            x = x + wo[l] @ torch.einsum("ht,thd->hd", att, V).reshape(dim)
            xb = rmsnorm(x, rms_ffn[l])
            x = x + w2[l] @ (torch.nn.functional.silu(w1[l] @ xb) * (w3[l] @ xb))
        return wcls @ rmsnorm(x, rms_final)

    prompt, want = read_fixture()
    got = []

    def decode():
        got.clear()
        token = prompt[0]
        with torch.no_grad():
            for pos in range(POSITIONS):
                nxt = int(step(token, pos).argmax())  # the token read back every step, as tgc's logits are
                token = prompt[pos + 1] if pos + 1 < len(prompt) else nxt
                got.append(token)
    t = timed(decode, 1 if SMALL else 3)
    n = min(len(want), POSITIONS)
    if got[:n] != want[:n]:
        bad = next(i for i in range(n) if got[i] != want[i])
        raise RuntimeError(f"{wl}: check failed: position {bad}: token {got[bad]}, llama2.c's run.c chose {want[bad]}")
    emit(wl, POSITIONS / t[0], POSITIONS / t[1], "tok/s")


if __name__ == "__main__":
    main()
