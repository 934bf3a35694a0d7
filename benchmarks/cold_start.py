"""Cold start: how long a fresh process takes on a fresh machine (empty kernel caches), and
again once the cache is warm. Nothing here is asserted; see README.md for the numbers.

    python benchmarks/cold_start.py                  # LeNet first step + the digits main job
    python benchmarks/cold_start.py lenet -n 3       # one of them, three times
    python benchmarks/cold_start.py --warm-command   # also: an empty cache filled by `cache warm`

Each measurement runs a new Python process with ``NNABLA_JIT_CACHE_DIR`` and ``NUMBA_CACHE_DIR``
pointed at a new empty directory (numba's default cache, ``__pycache__`` beside the sources,
would otherwise serve compiled code from earlier runs). States per workload:

* ``empty``: nothing cached (the first run on a fresh machine);
* ``warm``: the same directory after that run (every later run);
* ``after cache warm`` (``--warm-command``): an empty directory filled by ``nnabla_jit cache
  warm`` first (its own time is reported apart).

Columns: wall seconds of the whole process (start to exit); the wall seconds from the process's
first line to the end of the work (LeNet: its first step; digits: the job), and the CPU seconds
(user + system) of the process itself up to then; the CPU seconds of the process and everything
it started and waited for -- the background compile worker included (deferred_compile.py),
which the process stops at exit.

Python's own bytecode cache is not a kernel cache: ``pip install`` byte-compiles a package as it
installs it, so a fresh machine has nnabla_jit's ``.pyc`` files. Before measuring, this script
byte-compiles the package the same way (``compileall``, into the ``__pycache__`` folders git
ignores), which matters where ``PYTHONDONTWRITEBYTECODE`` is set and the package is installed in
editable mode (no ``.pyc`` would be written, and every process would compile nnabla_jit's
sources again: 0.2 s here). ``--no-bytecode`` measures without them (removing the package's).

The machine this runs on may be shared: the CPU seconds say what the work cost, the load
average what else ran.
"""
import argparse
import compileall
import glob
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "nnabla_jit")

# The same LeNet as run.py's workload (workloads.py), built and stepped once in a fresh process;
# the time includes importing nnabla_jit, which workloads.py does on the first build.
LENET_FIRST_STEP = r'''
import resource, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {here!r})
from workloads import lenet_nnabla_jit
lenet_nnabla_jit()()
usage = resource.getrusage(resource.RUSAGE_SELF)
print("done", time.perf_counter() - t0, usage.ru_utime + usage.ru_stime)
'''.format(here=os.path.dirname(os.path.abspath(__file__)))

# A script run as __main__, then the same report (before the process stops its compile worker).
SCRIPT = r'''
import resource, runpy, sys, time
t0 = time.perf_counter()
script, sys.argv = sys.argv[1], sys.argv[1:]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    if e.code:
        raise
usage = resource.getrusage(resource.RUSAGE_SELF)
print("done", time.perf_counter() - t0, usage.ru_utime + usage.ru_stime)
'''

WORKLOADS = {
    "lenet": ("LeNet: import, build, first training step", [sys.executable, "-c", LENET_FIRST_STEP]),
    "digits": ("digits main job (examples/digits/train.py, 15 epochs)",
               [sys.executable, "-c", SCRIPT, os.path.join(REPO, "examples", "digits", "train.py"),
                "--out", "{out}"]),
}


def run(command, cache):
    """(wall seconds, CPU seconds of the process tree, in-process wall, process CPU) of one
    fresh process using ``cache``."""
    env = dict(os.environ, NNABLA_JIT_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [c.format(out=os.path.join(cache, "out.h5")) for c in command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    first = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("done ")]
    step_wall, step_cpu = (float(first[0][0]), float(first[0][1])) if first else (None, None)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), step_wall, step_cpu


def measure(command, warm_command):
    results = []
    cache = tempfile.mkdtemp(prefix="nnabla_jit_cold_")
    try:
        results.append(("empty", run(command, cache)))
        results.append(("warm", run(command, cache)))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if warm_command:
        cache = tempfile.mkdtemp(prefix="nnabla_jit_cold_")
        try:
            results.append(("`cache warm` command",
                            run([sys.executable, "-m", "nnabla_jit", "cache", "warm", "-q"], cache)))
            results.append(("after `cache warm`", run(command, cache)))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return results


def _seconds(value):
    return "" if value is None else "{:.1f}".format(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="workloads: {} (default: all)".format(", ".join(WORKLOADS)))
    parser.add_argument("-n", "--repeat", type=int, default=1, help="measure each this many times")
    parser.add_argument("--warm-command", action="store_true",
                        help="also time `nnabla_jit cache warm` and a run after it")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="remove the package's .pyc files instead of writing them as pip does")
    args = parser.parse_args()
    if args.no_bytecode:
        for path in glob.glob(os.path.join(PACKAGE, "**", "__pycache__", "*.pyc"), recursive=True):
            os.remove(path)
    else:
        compileall.compile_dir(PACKAGE, quiet=1)
    print("nnabla_jit's bytecode: {}".format("removed" if args.no_bytecode else "compiled, as pip install does"))
    print("load average before: {:.1f} {:.1f} {:.1f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))
    print("| workload | cache | wall s | in-process wall s | process CPU s | CPU s, with worker | load |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name in args.names or list(WORKLOADS):
        title, command = WORKLOADS[name]
        for _ in range(args.repeat):
            for state, (wall, cpu, step_wall, step_cpu) in measure(command, args.warm_command):
                print("| {} | {} | {:.1f} | {} | {} | {:.1f} | {:.1f} |".format(
                    title, state, wall, _seconds(step_wall), _seconds(step_cpu), cpu, os.getloadavg()[0]),
                    flush=True)
    print("load average after: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
