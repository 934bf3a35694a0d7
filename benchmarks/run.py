"""Run the benchmarks: steps/s of nnabla_jit and, when PyTorch is installed, of PyTorch on the
same workload in the same run, and their ratio. Nothing here is asserted; see README.md.

    python benchmarks/run.py                 # all workloads + cold start
    python benchmarks/run.py mlp tiny        # some of them
    python benchmarks/run.py --seconds 5     # longer measurement per workload
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS  # noqa: E402


def steps_per_second(make_step, seconds, warmup=3):
    step = make_step()
    for _ in range(warmup):
        step()
    wait_for_parallel_kernels()
    step()   # loads what the worker compiled
    # repeat short timed windows and keep the best: the machine may be busy in bursts
    best = 0.0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < max(seconds / 5, 0.2):
            step()
            n += 1
        best = max(best, n / (time.perf_counter() - t0))
    return best


def wait_for_parallel_kernels():
    """On a cold cache the warm-up steps ran serial stand-ins while a background process compiled
    the parallel kernels (nnabla_jit/deferred_compile.py): measure with the parallel ones."""
    from nnabla_jit import deferred_compile   # the workloads import nnabla_jit lazily too
    if deferred_compile.pending():
        deferred_compile.wait()


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


COLD_START = r'''
import time
t0 = time.perf_counter()
import numpy as np
import nnabla_jit as nn, nnabla_jit.functions as F, nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
x = nn.Variable.from_numpy_array(np.random.randn(128, 784).astype(np.float32))
t = nn.Variable.from_numpy_array(np.random.randint(0, 10, (128, 1)))
h = F.relu(PF.affine(x, 1024, name="fc1"))
h = F.relu(PF.affine(h, 1024, name="fc2"))
loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc3"), t))
solver = S.Momentum(0.01, 0.9)
solver.set_parameters(nn.get_parameters())
loss.forward(); solver.zero_grad(); loss.backward(); solver.update()
print(time.perf_counter() - t0)
'''


def cold_start():
    """Seconds for a fresh process to import, build the MLP and run its first step, with an
    empty kernel cache and again with the cache that first run left behind."""
    cache = tempfile.mkdtemp(prefix="nnabla_jit_bench_cache_")
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, NNABLA_JIT_CACHE_DIR=cache)
    try:
        def run():
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", COLD_START], env=env, check=True,
                                 capture_output=True, text=True)
            return time.perf_counter() - start, float(out.stdout.strip().splitlines()[-1])
        empty = run()
        warm = min(run() for _ in range(3))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"empty_cache_s": empty[0], "warm_cache_s": warm[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="workloads (default: all)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per run")
    parser.add_argument("--no-cold-start", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    names = args.names or list(WORKLOADS)
    torch_ok = have_torch()
    if torch_ok:
        import torch
        print("PyTorch {} ({} threads)".format(torch.__version__, torch.get_num_threads()))
    else:
        print("PyTorch not installed: ratios omitted (pip install torch==2.13.0)")
    results = {}
    rows = ["| workload | nnabla_jit steps/s | PyTorch steps/s | ratio |", "|---|---:|---:|---:|"]
    for name in names:
        ours, theirs, title = WORKLOADS[name]
        r = {"title": title, "nnabla_jit": steps_per_second(ours, args.seconds)}
        if torch_ok:
            r["torch"] = steps_per_second(theirs, args.seconds)
            r["ratio"] = r["nnabla_jit"] / r["torch"]
        results[name] = r
        rows.append("| {} | {:.1f} | {} | {} |".format(
            title, r["nnabla_jit"], "{:.1f}".format(r["torch"]) if torch_ok else "-",
            "{:.2f}x".format(r["ratio"]) if torch_ok else "-"))
        print(rows[-1], flush=True)
    if not args.no_cold_start and not args.names:
        results["cold_start"] = cold_start()
        rows.append("| cold start (import, build MLP, first step), empty kernel cache | {:.2f} s | | |"
                    .format(results["cold_start"]["empty_cache_s"]))
        rows.append("| cold start, warm kernel cache | {:.2f} s | | |".format(results["cold_start"]["warm_cache_s"]))
        print("\n".join(rows[-2:]))
    print()
    print("\n".join(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
