"""One 3x3 stride-1 convolution layer, Winograd F(2x2,3x3) against im2col + GEMM.

    python benchmarks/winograd_layer.py            # every shape, both routes, alternating
    python benchmarks/winograd_layer.py --one ROUTE B C H W M MODE   # one timing (a child)

Each timing runs in a fresh process (NUMBA_NUM_THREADS=1 unless set, parallel kernels compiled
eagerly), the routes taking turns; medians of the rounds are printed with the load average.
MODE "forward" times y.forward(); "train" times forward + backward (data and filter gradients)
with the filter changed before each step, as a solver does.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPES = [   # (label, batch, in channels, side, out channels)
    ("BN-CNN conv0", 32, 3, 32, 32),
    ("BN-CNN conv1", 32, 32, 16, 64),
    ("BN-CNN conv2", 32, 64, 8, 128),
    ("ResNet-18 stage 1", 32, 64, 32, 64),
    ("ResNet-18 stage 2", 32, 128, 16, 128),
    ("ResNet-18 stage 3", 32, 256, 8, 256),
    ("ResNet-18 stage 4", 32, 512, 4, 512),
]


def one(route, B, C, H, W, M, mode, reps):
    os.environ["NNABLA_JIT_WINOGRAD"] = "force" if route == "winograd" else "0"
    import nnabla_jit as nn
    import nnabla_jit.functions as F
    rng = np.random.RandomState(0)
    x = nn.Variable.from_numpy_array(rng.randn(B, C, H, W).astype(np.float32), need_grad=True)
    w = nn.Variable.from_numpy_array((rng.randn(M, C, 3, 3) / np.sqrt(9 * C)).astype(np.float32),
                                     need_grad=True)
    y = F.convolution(x, w, pad=(1, 1))
    dy = rng.randn(*y.shape).astype(np.float32)
    times = []
    for i in range(reps + 2):
        t0 = time.perf_counter()
        if mode == "train":
            w.d += 1e-6   # a solver step: the filter tiles are redone
            y.forward()
            y.backward(dy)
        else:
            y.forward()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:]) * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--one", nargs=7)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--modes", default="forward,train")
    p.add_argument("--only", default="", help="layers whose label contains this")
    a = p.parse_args()
    if a.one:
        route, B, C, H, W, M, mode = a.one
        print(one(route, int(B), int(C), int(H), int(W), int(M), mode, a.reps))
        return
    env = dict(os.environ, NNABLA_JIT_DEFER_PARALLEL="0")
    env.setdefault("NUMBA_NUM_THREADS", "1")
    env["PYTHONPATH"] = os.getcwd() + os.pathsep + env.get("PYTHONPATH", "")
    print("load average at start: %.1f %.1f %.1f; NUMBA_NUM_THREADS=%s" % (os.getloadavg() + (env["NUMBA_NUM_THREADS"],)))
    print("| layer | x shape -> M | mode | im2col ms | Winograd ms | speed-up |")
    print("|---|---|---|---:|---:|---:|")
    for label, B, C, S, M in SHAPES:
        if a.only not in label:
            continue
        for mode in a.modes.split(","):
            got = {"im2col": [], "winograd": []}
            for _ in range(a.rounds):
                for route in ("im2col", "winograd"):
                    out = subprocess.run([sys.executable, __file__, "--reps", str(a.reps), "--one", route,
                                          str(B), str(C), str(S), str(S), str(M), mode],
                                         env=env, capture_output=True, text=True, check=True)
                    got[route].append(float(out.stdout.split()[-1]))
            i, w = statistics.median(got["im2col"]), statistics.median(got["winograd"])
            print("| %s | (%d,%d,%d,%d) -> %d | %s | %.2f | %.2f | %.2fx |" % (label, B, C, S, S, M, mode, i, w, i / w),
                  flush=True)
    print("load average at end: %.1f %.1f %.1f" % os.getloadavg())


if __name__ == "__main__":
    main()
