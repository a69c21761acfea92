"""workload_peers.py — the peers' side of bench/workloads.c: PyTorch CPU, tinygrad and numpy on the same workloads.

Run by build/bench/workloads as a subprocess; on its own: python3 bench/workload_peers.py (--torch-only: PyTorch
alone, as bench/memory.sh measures its memory). Prints one JSON line
per (workload, impl): {"workload", "impl", "value", "unit", "threads"}; a missing package or a failing workload
prints {"skip": impl, "note": why} instead, and {"info": impl, "note": ...} says versions and settings.
tinygrad BEAM (BEAM=2, a child process of this script) runs only when TG_BENCH_TINYGRAD_BEAM=1.

Every workload is warmed up first (compiles and caches excluded), then timed a few times; the median is
reported. PyTorch runs eager (no torch.compile), inference under torch.no_grad(); tinygrad realizes each result
and runs the MLP step and the transformer block under TinyJit (as its users do). Inputs are created and
realized before timing.
"""
import json
import os
import subprocess
import sys
import traceback

from peers import blas_threads, times  # bench/peers.py, beside this file

MM_SIZES = ((256, 20), (1024, 5), (2048, 3))
CONV_FLOPS = 2.0 * 32 * 64 * 56 * 56 * 64 * 9
SM_BYTES = 8.0 * 4096 * 4096


LAST = [None]  # (median, best) seconds of the last med() call: emit gives the fastest run's value too


def emit(workload, impl, value, unit, threads):
    line = {"workload": workload, "impl": impl, "value": value, "unit": unit, "threads": threads}
    if LAST[0] and value:
        m, b = LAST[0]
        line["best"] = value * (b / m if unit.startswith("ms") else m / b)  # rates go as 1 / time
    LAST[0] = None
    print(json.dumps(line), flush=True)


def skip(impl, note):
    print(json.dumps({"skip": impl, "note": note[:200]}), flush=True)


def info(impl, note):
    print(json.dumps({"info": impl, "note": note[:200]}), flush=True)


def med(fn, warm, reps):
    """median seconds of reps calls after warm calls (the fastest kept for emit)"""
    LAST[0] = times(fn, warm, reps)
    return LAST[0][0]


ONLY = [w for w in os.environ.get("TG_BENCH_ONLY", "").split(",") if w]


def guarded(impl, workload, fn):
    # TG_BENCH_ONLY=mlp,conv2d: only workloads whose name contains one of the words, as workloads.c selects
    # its own (bench/jit.c asks for mlp)
    if ONLY and not any(w in workload for w in ONLY):
        return
    try:
        fn()
    except Exception as e:  # one failing workload does not stop the others
        skip(impl, f"{workload} failed: {type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stderr)


# ---- numpy -----------------------------------------------------------------------------------------------------


def run_numpy():
    try:
        import numpy as np
    except Exception:
        skip("numpy", "not installed")
        return
    try:  # the same count as core.c's numpy rows: threadpoolctl, else the *_NUM_THREADS variables, else the CPUs
        bt = blas_threads()
    except Exception:
        bt = -1
    info("numpy", f"{np.__version__}, BLAS threads {bt}")
    rng = np.random.default_rng(0)
    for n, reps in MM_SIZES:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        guarded("numpy", f"matmul_{n}", lambda: emit(f"matmul_{n}", "numpy", 2 * n ** 3 / med(lambda: a @ b, 1, reps) / 1e9,
                                                      "GFLOP/s", bt))
    x = rng.standard_normal((4096, 4096), dtype=np.float32) * 4

    def softmax():
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    guarded("numpy", "softmax_4096x4096", lambda: emit("softmax_4096x4096", "numpy", SM_BYTES / med(softmax, 1, 5) / 1e9, "GB/s", 1))


# ---- PyTorch ---------------------------------------------------------------------------------------------------


def run_torch():
    try:
        import torch
        import torch.nn.functional as F
    except Exception:
        skip("pytorch", "not installed")
        return
    th = torch.get_num_threads()
    info("pytorch", f"{torch.__version__}, eager, {th} threads")
    torch.manual_seed(0)

    with torch.no_grad():
        for n, reps in MM_SIZES:
            a, b = torch.randn(n, n), torch.randn(n, n)
            guarded("pytorch", f"matmul_{n}", lambda: emit(f"matmul_{n}", "pytorch",
                                                           2 * n ** 3 / med(lambda: a @ b, 1, reps) / 1e9, "GFLOP/s", th))
        x = torch.randn(4096, 4096) * 4
        guarded("pytorch", "softmax_4096x4096", lambda: emit("softmax_4096x4096", "pytorch",
                                                   SM_BYTES / med(lambda: torch.softmax(x, -1), 1, 5) / 1e9, "GB/s", th))
        del x
        xc, wc = torch.randn(32, 64, 56, 56), torch.randn(64, 64, 3, 3) * 0.05
        guarded("pytorch", "conv2d_b32_64x64_56x56_k3", lambda: emit("conv2d_b32_64x64_56x56_k3", "pytorch",
                                                  CONV_FLOPS / med(lambda: F.conv2d(xc, wc, padding=1), 1, 3) / 1e9,
                                                  "GFLOP/s", th))
        del xc, wc

    def conv_train():
        xt = torch.randn(32, 64, 56, 56, requires_grad=True)
        wt = (torch.randn(64, 64, 3, 3) * 0.05).requires_grad_()
        gy = torch.randn(32, 64, 56, 56)

        def step():
            xt.grad, wt.grad = None, None
            F.conv2d(xt, wt, padding=1).backward(gy)
        emit("conv2d_train_b32_64x64_56x56_k3", "pytorch", 3 * CONV_FLOPS / med(step, 1, 3) / 1e9, "GFLOP/s", th)
    guarded("pytorch", "conv2d_train_b32_64x64_56x56_k3", conv_train)

    def mlp():
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        xb, yb = torch.randn(128, 784), torch.randint(0, 10, (128,))

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss.item()
        emit("mlp_784_512_512_10_adam_b128", "pytorch", med(step, 3, 10) * 1e3, "ms/step", th)
    guarded("pytorch", "mlp_784_512_512_10_adam_b128", mlp)

    def block():
        B, T, D, H = 8, 128, 256, 4
        ln1, ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        qkv, out = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        fc1, fc2 = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)
        x = torch.randn(B, T, D)

        def fwd():
            q, k, v = qkv(ln1(x)).split(D, dim=-1)
            q, k, v = (t.reshape(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
            x1 = x + out(a)
            return x1 + fc2(F.gelu(fc1(ln2(x1)), approximate="tanh"))
        with torch.no_grad():
            emit("transformer_block_b8_t128_d256_h4", "pytorch", med(fwd, 2, 5) * 1e3, "ms", th)
    guarded("pytorch", "transformer_block_b8_t128_d256_h4", block)


# ---- tinygrad --------------------------------------------------------------------------------------------------


def run_tinygrad(impl):
    try:
        from tinygrad import Tensor, Device, TinyJit, nn
        from tinygrad.helpers import NUM_CPU_THREADS, Context, getenv
        from importlib.metadata import version
        tg_version = version("tinygrad")
    except Exception:
        skip(impl, "not installed")
        return
    th = NUM_CPU_THREADS.value if getenv("THREADS", 1) else 1
    dev = Device[Device.DEFAULT]

    def R(t):  # realize and wait for the device
        t.realize()
        dev.synchronize()
        return t
    info(impl, f"{tg_version}, device {Device.DEFAULT}, {th} threads, "
               f"BEAM={getenv('BEAM', 0)}; MLP and transformer under TinyJit")
    Tensor.manual_seed(0)

    for n, reps in MM_SIZES:
        a, b = Tensor.randn(n, n).realize(), Tensor.randn(n, n).realize()
        guarded(impl, f"matmul_{n}", lambda: emit(f"matmul_{n}", impl,
                                                  2 * n ** 3 / med(lambda: R(a @ b), 1, reps) / 1e9, "GFLOP/s", th))
    x = (Tensor.randn(4096, 4096) * 4).realize()
    guarded(impl, "softmax_4096x4096", lambda: emit("softmax_4096x4096", impl,
                                          SM_BYTES / med(lambda: R(x.softmax(-1)), 1, 5) / 1e9, "GB/s", th))
    del x
    xc, wc = Tensor.randn(32, 64, 56, 56).realize(), (Tensor.randn(64, 64, 3, 3) * 0.05).realize()
    guarded(impl, "conv2d_b32_64x64_56x56_k3", lambda: emit("conv2d_b32_64x64_56x56_k3", impl,
                                         CONV_FLOPS / med(lambda: R(xc.conv2d(wc, padding=1)), 1, 3) / 1e9,
                                         "GFLOP/s", th))
    del xc, wc

    def mlp():
        layers = [nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)]
        opt = nn.optim.Adam(nn.state.get_parameters(layers), lr=1e-3)
        xb, yb = Tensor.randn(128, 784).realize(), Tensor.randint(128, high=10).realize()

        @TinyJit
        def step(xb, yb):
            opt.zero_grad()
            loss = layers[2](layers[1](layers[0](xb).relu()).relu()).sparse_categorical_crossentropy(yb)
            loss.backward()
            opt.step()
            return loss.realize()
        with Context(TRAINING=1):
            emit("mlp_784_512_512_10_adam_b128", impl, med(lambda: step(xb, yb).item(), 3, 10) * 1e3, "ms/step", th)
    guarded(impl, "mlp_784_512_512_10_adam_b128", mlp)

    def block():
        B, T, D, H = 8, 128, 256, 4
        ln1, ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        qkv, out = nn.Linear(D, 3 * D), nn.Linear(D, D)
        fc1, fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        x = Tensor.randn(B, T, D).realize()

        @TinyJit
        def fwd(x):
            q, k, v = qkv(ln1(x)).split(D, dim=-1)
            q, k, v = (t.reshape(B, T, H, D // H).transpose(1, 2) for t in (q, k, v))
            a = q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(B, T, D)
            x1 = x + out(a)
            return (x1 + fc2(fc1(ln2(x1)).gelu())).realize()
        emit("transformer_block_b8_t128_d256_h4", impl, med(lambda: R(fwd(x)), 3, 5) * 1e3, "ms", th)
    guarded(impl, "transformer_block_b8_t128_d256_h4", block)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--tinygrad-beam":
        run_tinygrad("tinygrad_beam")
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-only":  # bench/memory.sh: PyTorch's peak memory alone
        run_torch()
        return
    run_numpy()
    run_torch()
    run_tinygrad("tinygrad")
    if os.environ.get("TG_BENCH_TINYGRAD_BEAM") == "1":
        env = dict(os.environ, BEAM=os.environ.get("TG_BENCH_BEAM", "2"))
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--tinygrad-beam"], env=env,
                           stdout=subprocess.PIPE, text=True)
        sys.stdout.write(r.stdout)
        sys.stdout.flush()
        if r.returncode != 0:
            skip("tinygrad_beam", f"child exited with {r.returncode}")
    else:
        skip("tinygrad_beam", "not run (slow search); set TG_BENCH_TINYGRAD_BEAM=1 to run tinygrad with BEAM=2")


if __name__ == "__main__":
    main()
