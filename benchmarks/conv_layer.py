"""One convolution layer per shape, nnabla_jit against PyTorch (torch.nn.functional.conv2d and
its backward), forward, data gradient and filter gradient timed apart.

    python benchmarks/conv_layer.py                  # every shape, both sides taking turns
    python benchmarks/conv_layer.py --only lenet     # the shapes whose label contains "lenet"
    python benchmarks/conv_layer.py --base ../main   # and "base": ours from another checkout
    python benchmarks/conv_layer.py --one SIDE       # one side, every shape (a child)

Each side runs in a fresh process per round (the two taking turns), with the same thread count
(NUMBA_NUM_THREADS / torch.set_num_threads, default: every core) and nnabla_jit's parallel
kernels compiled at once (NNABLA_JIT_DEFER_PARALLEL=0). ours times ConvGeometry's three products
as Convolution's forward and backward call them; "bwd" is the data and filter gradients together
(as a backward with both needs does, the filter gradient reusing the forward's col where the
node keeps it). Medians of the rounds (each the median of --reps calls) in microseconds. With
one thread (NUMBA_NUM_THREADS=1) the children time thread CPU time, which a shared machine's
other processes disturb far less than wall time (a 2-core machine at load 3 makes 2-thread wall
times of parallel kernels meaningless).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPES = [   # (label, x shape, (M, kernel), pad)
    ("lenet conv1", (64, 1, 28, 28), (16, 5), 0),
    ("lenet conv2", (64, 16, 12, 12), (32, 5), 0),
    ("convbn conv0", (32, 3, 32, 32), (32, 3), 1),
    ("convbn conv1", (32, 32, 16, 16), (64, 3), 1),
    ("convbn conv2", (32, 64, 8, 8), (128, 3), 1),
    ("resnet18 s1", (32, 64, 32, 32), (64, 3), 1),
    ("resnet18 s2", (32, 128, 16, 16), (128, 3), 1),
    ("resnet18 s3", (32, 256, 8, 8), (256, 3), 1),
    ("resnet18 s4", (32, 512, 4, 4), (512, 3), 1),
]


def median_us(fn, reps):
    clock = time.thread_time if os.environ.get("NUMBA_NUM_THREADS") == "1" else time.perf_counter
    fn()
    fn()
    times = []
    for _ in range(reps):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times) * 1e6


def ours(x_shape, M, k, pad, reps):
    from nnabla_jit.ops.convolution import ConvGeometry, INIT_ZERO

    class Op:
        def fail(self, msg, *args):
            raise ValueError(msg.format(*args))
    rng = np.random.RandomState(0)
    C = x_shape[1]
    x = rng.randn(*x_shape).astype(np.float32)
    w = rng.randn(M, C, k, k).astype(np.float32)
    geo = ConvGeometry(Op(), x.shape, w.shape, (pad, pad), (1, 1), (1, 1), 1, False, 1)
    y = np.empty(geo.map_shape, np.float32)
    dy = rng.randn(*geo.map_shape).astype(np.float32)
    dx, dw = np.empty_like(x), np.empty_like(w)

    def fwd():
        geo.image_to_map(x, w, y, None, INIT_ZERO)

    def dgrad():
        geo.map_to_image(dy, w, dx, init=INIT_ZERO)

    def wgrad():   # after a forward, as in training (the col is reused where it is kept)
        geo.filter_grad(x, dy, dw, False, reuse_col=True)

    def bwd():
        dgrad()
        wgrad()
    out = {"fwd": median_us(fwd, reps), "dgrad": median_us(dgrad, reps)}
    fwd()
    out["wgrad"] = median_us(wgrad, reps)
    fwd()
    out["bwd"] = median_us(bwd, reps)
    return out


def torch_side(x_shape, M, k, pad, reps):
    import torch
    rng = np.random.RandomState(0)
    C = x_shape[1]
    x = torch.from_numpy(rng.randn(*x_shape).astype(np.float32))
    w = torch.from_numpy(rng.randn(M, C, k, k).astype(np.float32))
    y = torch.nn.functional.conv2d(x, w, padding=pad)
    dy = torch.from_numpy(rng.randn(*y.shape).astype(np.float32))
    conv_bwd = torch.ops.aten.convolution_backward

    def call(mask):
        return lambda: conv_bwd(dy, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, mask)
    with torch.no_grad():
        return {"fwd": median_us(lambda: torch.nn.functional.conv2d(x, w, padding=pad), reps),
                "dgrad": median_us(call([True, False, False]), reps),
                "wgrad": median_us(call([False, True, False]), reps),
                "bwd": median_us(call([True, True, False]), reps)}


def child(side, only, reps):
    threads = int(os.environ["NUMBA_NUM_THREADS"])
    if side == "torch":
        import torch
        torch.set_num_threads(threads)
    results = {}
    for label, x_shape, (M, k), pad in SHAPES:
        if only in label:
            fn = torch_side if side == "torch" else ours
            results[label] = fn(x_shape, M, k, pad, reps)
    print(json.dumps(results))


def print_ratios(title, numerator, denominator, parts):
    """Per layer and part: the median time of ``numerator``'s rounds over ``denominator``'s."""
    print(title)
    for label in numerator[0]:
        print("  %-14s " % label + "  ".join(
            "%s %.2f" % (part, statistics.median(r[label][part] for r in numerator)
                         / statistics.median(r[label][part] for r in denominator)) for part in parts))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--one", choices=("ours", "torch"))
    p.add_argument("--only", default="")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--sides", default="ours,torch")
    p.add_argument("--base", help="another checkout: its nnabla_jit runs as side 'base'")
    a = p.parse_args()
    if a.one:
        child(a.one, a.only, a.reps)
        return
    env = dict(os.environ, NNABLA_JIT_DEFER_PARALLEL="0")
    env.setdefault("NUMBA_NUM_THREADS", str(os.cpu_count()))
    path = env.get("PYTHONPATH", "")
    print("load average at start: %.2f %.2f %.2f; threads %s" % (os.getloadavg() + (env["NUMBA_NUM_THREADS"],)))
    sides = (["base"] if a.base else []) + a.sides.split(",")
    got = {s: [] for s in sides}
    for _ in range(a.rounds):
        for side in sides:
            root = os.path.abspath(a.base) if side == "base" else os.getcwd()
            env["PYTHONPATH"] = root + os.pathsep + path
            kind = "torch" if side == "torch" else "ours"
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", kind,
                                  "--only", a.only, "--reps", str(a.reps)],
                                 env=env, capture_output=True, text=True, check=True, cwd=root)
            got[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    parts = ("fwd", "dgrad", "wgrad", "bwd")
    print("| layer | " + " | ".join("%s %s" % (s, p) for p in parts for s in sides) + " |")
    print("|---|" + "---:|" * (len(parts) * len(sides)))
    for label in got[sides[0]][0]:
        cells = []
        for part in parts:
            for s in sides:
                cells.append("%.0f" % statistics.median(r[label][part] for r in got[s]))
        print("| %s | %s |" % (label, " | ".join(cells)))
    if "base" in sides and "ours" in sides:
        print_ratios("speed-up base/ours:", got["base"], got["ours"], parts)
    if "torch" in sides and "ours" in sides:
        print_ratios("ratio ours/torch:", got["ours"], got["torch"], parts)
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
