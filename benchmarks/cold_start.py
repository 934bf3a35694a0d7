"""Cold start: how long a fresh process takes on a fresh machine (empty kernel caches), and
again once the cache is warm. Nothing here is asserted; see README.md for the numbers.

    python benchmarks/cold_start.py              # LeNet first step + the digits main job
    python benchmarks/cold_start.py lenet        # one of them

Each measurement runs a new Python process with ``NNABLA_JIT_CACHE_DIR`` and ``NUMBA_CACHE_DIR``
pointed at a new empty directory (numba's default cache, ``__pycache__`` beside the sources,
would otherwise serve compiled code from earlier runs). Three states per workload:

* ``empty``: nothing cached (the first run on a fresh machine);
* ``warm``: the same directory after that run (every later run);
* ``after cache warm``: an empty directory filled by ``nnabla_jit cache warm`` first (its own
  time is reported apart).

Wall time depends on what else the machine runs; the CPU seconds of the child process (user +
system) are reported beside it, with the load average, so runs on a busy machine can be read.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LENET_FIRST_STEP = r'''
import time
t0 = time.perf_counter()
import numpy as np
import nnabla_jit as nn, nnabla_jit.functions as F, nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
rng = np.random.RandomState(0)
x = nn.Variable.from_numpy_array(rng.randn(64, 1, 28, 28).astype(np.float32))
t = nn.Variable.from_numpy_array(rng.randint(0, 10, (64, 1)))
h = F.max_pooling(F.relu(PF.convolution(x, 16, (5, 5), name="conv1")), (2, 2))
h = F.max_pooling(F.relu(PF.convolution(h, 32, (5, 5), name="conv2")), (2, 2))
h = F.relu(PF.affine(h, 128, name="fc1"))
loss = F.mean(F.softmax_cross_entropy(PF.affine(h, 10, name="fc2"), t))
solver = S.Adam(1e-3)
solver.set_parameters(nn.get_parameters())
loss.forward(clear_no_need_grad=True)
solver.zero_grad()
loss.backward(clear_buffer=True)
solver.update()
print(time.perf_counter() - t0)
'''

WORKLOADS = {
    "lenet": ("LeNet: import, build, first training step", [sys.executable, "-c", LENET_FIRST_STEP]),
    "digits": ("digits main job (examples/digits/train.py, 15 epochs)",
               [sys.executable, os.path.join(REPO, "examples", "digits", "train.py"), "--out", "{out}"]),
}


def run(command, cache):
    """(wall seconds, child CPU seconds) of one fresh process using ``cache``."""
    env = dict(os.environ, NNABLA_JIT_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [c.format(out=os.path.join(cache, "out.h5")) for c in command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(command):
    results = {}
    cache = tempfile.mkdtemp(prefix="nnabla_jit_cold_")
    try:
        results["empty"] = run(command, cache)
        results["warm"] = run(command, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    cache = tempfile.mkdtemp(prefix="nnabla_jit_cold_")
    try:
        results["cache warm command"] = run([sys.executable, "-m", "nnabla_jit", "cache", "warm", "-q"], cache)
        results["after cache warm"] = run(command, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="workloads: {} (default: all)".format(", ".join(WORKLOADS)))
    args = parser.parse_args()
    print("load average before: {:.1f} {:.1f} {:.1f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))
    print("| workload | cache | wall s | CPU s |\n|---|---|---:|---:|")
    for name in args.names or list(WORKLOADS):
        title, command = WORKLOADS[name]
        for state, (wall, cpu) in measure(command).items():
            print("| {} | {} | {:.1f} | {:.1f} |".format(title, state, wall, cpu), flush=True)
    print("load average after: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
