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

# The same LeNet as run.py's workload (workloads.py), built and stepped once in a fresh process;
# the time includes importing nnabla_jit, which workloads.py does on the first build.
LENET_FIRST_STEP = r'''
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {here!r})
from workloads import lenet_nnabla_jit
lenet_nnabla_jit()()
print(time.perf_counter() - t0)
'''.format(here=os.path.dirname(os.path.abspath(__file__)))

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
