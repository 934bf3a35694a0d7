"""Time ``nn.grad`` on chains of 1k, 10k and 100k ops: its traversal should grow about linearly
with the graph (a heap orders the frontier; a scan of it each step made the walk quadratic).
Nothing here is asserted; see README.md.

    python benchmarks/grad_chain.py              # 1000 10000 100000
    python benchmarks/grad_chain.py 1000 5000    # other lengths
"""
import argparse
import time

import numpy as np


def chain(F, x, n):
    """``n`` ops: tanh, each fed by the previous one."""
    h = x
    for _ in range(n):
        h = F.tanh(h)
    return h


def time_grad(n, repeat):
    """Best of ``repeat`` runs: seconds to build the chain and seconds of ``nn.grad`` on it."""
    import nnabla_jit as nn
    import nnabla_jit.functions as F
    best_build, best_grad = float("inf"), float("inf")
    for _ in range(repeat):
        x = nn.Variable.from_numpy_array(np.ones(4, np.float32), need_grad=True)
        t0 = time.perf_counter()
        y = chain(F, x, n)
        t1 = time.perf_counter()
        dx, = nn.grad([y], [x])
        t2 = time.perf_counter()
        best_build, best_grad = min(best_build, t1 - t0), min(best_grad, t2 - t1)
        del x, y, dx
    return best_build, best_grad


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lengths", nargs="*", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per length (best kept)")
    args = parser.parse_args()
    time_grad(100, 1)   # warm up: imports and the kernels the grad rules' setup touches
    print("| ops in the chain | build the chain (s) | nn.grad (s) | nn.grad per op (us) |")
    print("|---:|---:|---:|---:|")
    for n in args.lengths:
        build, grad = time_grad(n, args.repeat if n < 100000 else 1)
        print("| {} | {:.3f} | {:.3f} | {:.1f} |".format(n, build, grad, grad / n * 1e6), flush=True)


if __name__ == "__main__":
    main()
