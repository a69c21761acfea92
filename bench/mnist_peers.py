"""Peers for bench/mnist.c: the beautiful_mnist network trained with Adam, batch 512, on the CPU, in
tinygrad (TinyJit) and PyTorch (eager). Prints one JSON line per implementation:
{"impl": ..., "ms_per_step": ..., "steps": ..., "test_accuracy": ...}.
Usage: python3 bench/mnist_peers.py DATA_DIR STEPS   (DATA_DIR holds the four MNIST IDX files, gz or raw)"""
import gzip, json, os, sys, time

def idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            data = (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
            return data
    raise FileNotFoundError(path)

def load(d):
    import numpy as np
    def images(n): return np.frombuffer(idx(os.path.join(d, n)), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
    def labels(n): return np.frombuffer(idx(os.path.join(d, n)), dtype=np.uint8, offset=8).astype(np.int64)
    return (images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte"),
            images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte"))

def run_torch(data, steps):
    import numpy as np, torch
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.ReLU(), nn.Conv2d(32, 32, 5), nn.ReLU(), nn.BatchNorm2d(32), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.BatchNorm2d(64), nn.MaxPool2d(2),
                          nn.Flatten(1), nn.Linear(576, 10))
    opt = torch.optim.Adam(model.parameters())
    X, Y, Xt, Yt = data
    X, Y, Xt, Yt = torch.tensor(X).float(), torch.tensor(Y), torch.tensor(Xt).float(), torch.tensor(Yt)
    rng = np.random.default_rng(0)
    times = []
    for s in range(steps):
        idx = torch.tensor(rng.integers(0, X.shape[0], 512))
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(X[idx]), Y[idx])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    model.eval()
    with torch.no_grad():
        acc = sum((model(Xt[i:i+1000]).argmax(1) == Yt[i:i+1000]).sum().item() for i in range(0, 10000, 1000)) / 10000
    return {"impl": "pytorch", "threads": torch.get_num_threads(), "ms_per_step": 1e3 * sorted(times[1:])[len(times[1:]) // 2],
            "total_s": sum(times), "steps": steps, "test_accuracy": acc}

def run_tinygrad(data, steps):
    os.environ.setdefault("DEV", "CPU")
    os.environ["TRAINING"] = "1"  # tinygrad 0.14: the optimizer needs TRAINING=1 (batchnorm uses batch statistics)
    from tinygrad import Tensor, TinyJit, nn
    X, Y, Xt, Yt = [Tensor(a) for a in data]
    class Model:
        def __init__(self):
            self.layers = [nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,
                           nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
                           lambda x: x.flatten(1), nn.Linear(576, 10)]
        def __call__(self, x): return x.sequential(self.layers)
    model = Model()
    opt = nn.optim.Adam(nn.state.get_parameters(model))
    @TinyJit
    def step():
        opt.zero_grad()
        samples = Tensor.randint(512, high=X.shape[0])
        loss = model(X[samples]).sparse_categorical_crossentropy(Y[samples]).backward()
        return loss.realize(*opt.schedule_step())
    times = []
    for s in range(steps):
        t0 = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - t0)
    from tinygrad.helpers import Context
    with Context(TRAINING=0):
        acc = (model(Xt).argmax(axis=1) == Yt).mean().item()
    jit = times[3:] or times
    return {"impl": "tinygrad", "ms_per_step": 1e3 * sorted(jit)[len(jit) // 2], "first_steps_s": sum(times[:3]),
            "total_s": sum(times), "steps": steps, "test_accuracy": acc}

if __name__ == "__main__":
    d, steps = sys.argv[1], int(sys.argv[2])
    which = sys.argv[3:] or ["pytorch", "tinygrad"]
    data = load(d)
    for impl in which:
        try:
            r = run_torch(data, steps) if impl == "pytorch" else run_tinygrad(data, steps)
        except ImportError as e:
            r = {"impl": impl, "skipped": f"not installed ({e.name})"}
        except Exception as e:  # a peer failing must not hide the others
            r = {"impl": impl, "skipped": f"{type(e).__name__}: {e}"}
        print(json.dumps(r), flush=True)
