"""Data-parallel scaling: the distributed digits CNN (examples/distributed) trained by 1, 2 and 4
MPI ranks, each with its own batch of 32, gradients averaged during backward. Prints, per rank
count, the steps/s of one rank, the steps/s of all ranks together (examples/s = that x 32) and
the kernel threads each rank ran. Nothing here is asserted; see README.md.

    python benchmarks/data_parallel.py                # 1, 2 and 4 ranks
    python benchmarks/data_parallel.py --ranks 1 2    # some of them
    python benchmarks/data_parallel.py --threads 2    # every rank runs 2 threads (NUMBA_NUM_THREADS)

The launcher is the mpirun (or mpiexec) next to this Python, else on the PATH (pip install
'nnabla_jit[mpi]').
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 32


def worker(steps, warmup):
    """One rank: build the digits CNN, warm up, time ``steps`` training steps, report as JSON
    from rank 0 (the slowest rank sets the pace of all: the all-reduce waits for it)."""
    import importlib.util

    import numba
    import numpy as np

    import nnabla_jit as nn
    import nnabla_jit.communicators as C
    import nnabla_jit.functions as F
    import nnabla_jit.solvers as S
    from nnabla_jit.ext_utils import get_extension_context

    spec = importlib.util.spec_from_file_location(
        "digits_train", os.path.join(ROOT, "examples", "digits", "train.py"))
    digits = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(digits)

    comm = C.MultiProcessDataParallelCommunicator(get_extension_context("cpu"))
    comm.init()
    rng = np.random.RandomState(comm.rank)
    x = nn.Variable.from_numpy_array(rng.rand(BATCH, 1, 8, 8).astype(np.float32))
    t = nn.Variable.from_numpy_array(rng.randint(0, 10, (BATCH, 1)).astype(np.int32))
    loss = F.mean(F.softmax_cross_entropy(digits.cnn(x), t))
    params = nn.get_parameters()
    comm.bcast([p.data for p in params.values()], src=0)
    solver = S.Adam(1e-3)
    solver.set_parameters(params)
    callback = comm.all_reduce_callback([p.grad for p in params.values()], 1 << 16, division=True)

    def step():
        loss.forward(clear_no_need_grad=True)
        solver.zero_grad()
        loss.backward(clear_buffer=True, communicator_callbacks=callback)
        solver.update()

    for _ in range(warmup):
        step()
    comm.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    comm.barrier()
    elapsed = time.perf_counter() - start
    if comm.rank == 0:
        print(json.dumps({"ranks": comm.size, "threads": numba.get_num_threads(),
                          "steps_per_s": steps / elapsed}))


def launcher():
    here = [os.path.join(os.path.dirname(sys.executable), name) for name in ("mpirun", "mpiexec")]
    found = [path for path in here if os.access(path, os.X_OK)]
    path = found[0] if found else shutil.which("mpirun") or shutil.which("mpiexec")
    if path is None:
        sys.exit("data_parallel.py: no mpirun / mpiexec found: pip install 'nnabla_jit[mpi]'")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    return [path] + (["--allow-run-as-root", "--oversubscribe"] if "Open MPI" in version else [])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None,
                        help="NUMBA_NUM_THREADS for every rank (default: the communicator's share)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.warmup)
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    if args.threads:
        env["NUMBA_NUM_THREADS"] = str(args.threads)
    print("{:>5} {:>7} {:>14} {:>15} {:>11}".format("ranks", "threads", "steps/s/rank",
                                                    "steps/s total", "examples/s"))
    for n in args.ranks:
        out = subprocess.run(launcher() + ["-np", str(n), sys.executable, os.path.abspath(__file__),
                                           "--worker", "--steps", str(args.steps),
                                           "--warmup", str(args.warmup)],
                             env=env, capture_output=True, text=True, check=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        rate = result["steps_per_s"]
        print("{:>5} {:>7} {:>14.1f} {:>15.1f} {:>11.0f}".format(
            n, result["threads"], rate, rate * n, rate * n * BATCH), flush=True)


if __name__ == "__main__":
    main()
