"""Time ``nn.grad`` on graphs of 1k, 10k and 100k ops: its traversal should grow about linearly
with the graph. Two shapes: a chain (``tanh`` of ``tanh`` of ...; one function waits at a time)
and a fan (``add_n`` of n-1 ``tanh(x)``; n-1 functions wait at once, which made the old scan
of the waiting functions quadratic: a heap orders them now). Nothing here is asserted; see
README.md.

    python benchmarks/grad_chain.py              # 1000 10000 100000, chain and fan
    python benchmarks/grad_chain.py 1000 5000    # other sizes
"""
import argparse
import gc
import time

import numpy as np


def chain(F, x, n):
    """``n`` ops: tanh, each fed by the previous one."""
    h = x
    for _ in range(n):
        h = F.tanh(h)
    return h


def fan(F, x, n):
    """``n`` ops: n-1 tanh of ``x``, summed by one add_n."""
    return F.add_n(*[F.tanh(x) for _ in range(n - 1)])


def time_grad(shape, n, repeat, collect):
    """Best of ``repeat`` runs: seconds to build the graph and seconds of ``nn.grad`` on it
    (``collect`` False: the cyclic garbage collector paused while nn.grad runs)."""
    import nnabla_jit as nn
    import nnabla_jit.functions as F
    best_build, best_grad = float("inf"), float("inf")
    for _ in range(repeat):
        x = nn.Variable.from_numpy_array(np.ones(4, np.float32), need_grad=True)
        t0 = time.perf_counter()
        y = shape(F, x, n)
        if not collect:
            gc.collect()
            gc.disable()
        try:
            t1 = time.perf_counter()
            dx, = nn.grad([y], [x])
            t2 = time.perf_counter()
        finally:
            gc.enable()
        best_build, best_grad = min(best_build, t1 - t0), min(best_grad, t2 - t1)
        del x, y, dx
    return best_build, best_grad


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--shapes", default="chain,fan", help="comma-separated: chain, fan")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size below 100k (best kept)")
    args = parser.parse_args()
    shapes = {"chain": chain, "fan": fan}
    time_grad(chain, 100, 1, True)   # warm up: imports and the kernels the grad rules' setup touches
    print("| graph | ops | build (s) | nn.grad (s) | nn.grad per op (us) | per op, GC paused (us) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.shapes.split(","):
        for n in args.sizes:
            repeat = args.repeat if n < 100000 else 1
            build, grad = time_grad(shapes[name], n, repeat, True)
            _, grad_nogc = time_grad(shapes[name], n, repeat, False)
            print("| {} | {} | {:.3f} | {:.3f} | {:.1f} | {:.1f} |".format(
                name, n, build, grad, grad / n * 1e6, grad_nogc / n * 1e6), flush=True)


if __name__ == "__main__":
    main()
