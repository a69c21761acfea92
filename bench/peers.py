"""peers.py — numpy's side of bench/core.c: prints one JSON line with its rates (median and best run).

Run by build/bench/core as a subprocess; on its own: python3 bench/peers.py. Without numpy it prints
{"numpy": false} and exits 0, so the benchmark can say "not installed" instead of failing.
"""
import json
import os
import statistics
import time


def times(fn, warm, reps):
    """(median, best) seconds of reps calls after warm calls"""
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts)


def put(out, key, amount, t):
    """out[key] = amount / median time, out[key_best] = amount / best time"""
    out[key] = amount / t[0]
    out[key + "_best"] = amount / t[1]


def blas_threads():
    try:
        from threadpoolctl import threadpool_info
        n = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
        if n:
            return max(n)
    except Exception:
        pass
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def main():
    try:
        import numpy as np
    except Exception:
        print(json.dumps({"numpy": False}), flush=True)
        return
    out = {"numpy": True, "version": np.__version__, "threads": blas_threads()}
    rng = np.random.default_rng(0)

    # matmul 1024 float32: 2 N^3 flops (OpenBLAS sgemm)
    n = 1024
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    put(out, "matmul_1024_gflops", 2 * n ** 3 / 1e9, times(lambda: a @ b, 3, 15))

    # relu(a*b + c) * 0.5 over 2^24 float32, written as a numpy user would (temporaries included);
    # 16 bytes per element, as in core.c
    m = 1 << 24
    x, y, z = (rng.standard_normal(m, dtype=np.float32) for _ in range(3))
    put(out, "elementwise_16M_gbs", 16 * m / 1e9, times(lambda: np.maximum(x * y + z, 0) * np.float32(0.5), 2, 10))
    del y, z

    # sum over the last axis of 4096x4096 float32
    s = x.reshape(4096, 4096)
    put(out, "sum_4096_gbs", 4 * (4096 * 4096 + 4096) / 1e9, times(lambda: s.sum(axis=-1), 2, 10))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
