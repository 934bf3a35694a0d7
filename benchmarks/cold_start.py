"""Cold start: how long a fresh process takes on a fresh machine (empty kernel caches), and
again once the cache is warm. Nothing here is asserted; see README.md for the numbers.

    python benchmarks/cold_start.py                  # LeNet first step + the digits main job
    python benchmarks/cold_start.py lenet -n 3       # one of them, three times
    python benchmarks/cold_start.py --warm-command   # also: an empty cache filled by `cache warm`
    python benchmarks/cold_start.py --converge 5     # convergence: 5 short runs from an empty cache

Each measurement runs a new Python process with ``NNABLA_JIT_CACHE_DIR`` and ``NUMBA_CACHE_DIR``
pointed at a new empty directory (numba's default cache, ``__pycache__`` beside the sources,
would otherwise serve compiled code from earlier runs). States per workload:

* ``empty``: nothing cached (the first run on a fresh machine);
* ``warm``: the same directory after that run, once its detached compile worker is done
  (every later run);
* ``after cache warm`` (``--warm-command``): an empty directory filled by ``nnabla_jit cache
  warm`` first (its own time is reported apart).

Columns: wall seconds of the whole process (start to exit); the wall seconds from the process's
first line to the end of the work (LeNet: its first step; digits: the job), and the CPU seconds
(user + system) of the process itself up to then; the CPU seconds of the process and the
children it waited for. The background compile worker (deferred_compile.py) was one of them
until it was detached at exit instead of stopped: its seconds are no longer in that column.

Python's own bytecode cache is not a kernel cache: ``pip install`` byte-compiles a package as it
installs it, so a fresh machine has nnabla_jit's ``.pyc`` files. Before measuring, this script
byte-compiles the package the same way (``compileall``, into the ``__pycache__`` folders git
ignores), which matters where ``PYTHONDONTWRITEBYTECODE`` is set and the package is installed in
editable mode (no ``.pyc`` would be written, and every process would compile nnabla_jit's
sources again: 0.2 s here). ``--no-bytecode`` measures without them (removing the package's).

The machine this runs on may be shared: the CPU seconds say what the work cost, the load
average what else ran.

Convergence (``--converge N``, workloads lenet, convbn, mlp, elementwise, resnet18 of
``workloads.py``): how fast a fresh machine gets to full speed when every run is short. An empty
cache, then N short runs in a row (fresh processes, back to back as a script or CI job would
start them; ``--pause`` waits between runs until no compile worker is left, as a person
looking at the last run's output would): import, build, a few training steps
(:data:`CONVERGE_STEPS`), steps/s of the steps after the first. "Fully compiled" is the same
short run on a cache that a run with ``NNABLA_JIT_DEFER_PARALLEL=0`` filled (every kernel
compiled in its process), the median of two. Per run: its first step's seconds (import
included), steps/s and their ratio to the fully compiled figure, the compilations the process
made itself, whether it started a compile worker, whether the worker detached from an earlier
run was still compiling when it started, the cache's files after it, and what the deferred
parallel kernels ran as at its end (parfor variants loaded, block stand-ins, serial stand-ins;
``nnabla_jit/parallel_blocks.py``); then how long after the last run its detached worker
finished.
"""
import argparse
import compileall
import glob
import os
import resource
import shutil
import statistics
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
        wait_for_workers(cache)   # "warm" is every later run: once the empty run's worker is done
        results.append(("warm", run(command, cache)))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if warm_command:
        cache = tempfile.mkdtemp(prefix="nnabla_jit_cold_")
        try:
            results.append(("`cache warm` command",
                            run([sys.executable, "-m", "nnabla_jit", "cache", "warm", "-q"], cache)))
            results.append(("after `cache warm`", run(command, cache)))
            wait_for_workers(cache)   # none left writing into a removed directory
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return results


# ------------------------------------------------------------------------------ convergence
CONVERGE_STEPS = {"lenet": 50, "convbn": 30, "mlp": 50, "elementwise": 30, "resnet18": 5}

# One short run of a workloads.py workload; prints its figures. `earlier`: a compile worker
# detached by an earlier run is compiling into this cache (-1: unknown, this process started its
# own at import, on an empty cache).
SHORT_RUN = r'''
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {here!r})
from nnabla_jit import deferred_compile, kernel_cache
running = getattr(deferred_compile, "workers_running", None)   # None: a tree from before it
earlier = -1 if deferred_compile._worker.started or running is None else int(running())
from workloads import WORKLOADS
name, steps = sys.argv[1], int(sys.argv[2])
step = WORKLOADS[name][0]()
step()
t1 = time.perf_counter()
for _ in range(steps - 1):
    step()
t2 = time.perf_counter()
# what the deferred parallel kernels ran as at the end: parfor variants, block stand-ins, serial
variants = [0, 0, 0]
for disp in getattr(deferred_compile, "_registry", {{}}).values():
    hook = disp.__dict__.get("_compile_for_args")
    variants[0] += len(disp.overloads)
    for sig, request in getattr(hook, "requests", {{}}).items():
        if sig not in disp.overloads:
            stand_in = getattr(hook, "stand_ins", {{}}).get(sig)
            variants[1 if getattr(stand_in, "__name__", "") == "run_blocks" else 2] += 1
print("done", t1 - t0, (steps - 1) / (t2 - t1), kernel_cache.compile_count(),
      deferred_compile._worker.started, deferred_compile.pending(), earlier, *variants)
'''.format(here=os.path.dirname(os.path.abspath(__file__)))

# Waits (bounded) until no compile worker is alive on the cache; prints the seconds waited.
WAIT_FOR_WORKERS = r'''
import time
from nnabla_jit import deferred_compile
t0 = time.perf_counter()
wait = getattr(deferred_compile, "wait_for_workers", None)   # None: a tree from before it
done = wait(deferred_compile.DETACHED_SECONDS + 60) if wait else True
print("waited", time.perf_counter() - t0, int(done))
'''


def _cache_env(cache, defer=True):
    env = dict(os.environ, NNABLA_JIT_CACHE_DIR=cache, NUMBA_CACHE_DIR=os.path.join(cache, "numba"),
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["NNABLA_JIT_DEFER_PARALLEL"] = "1" if defer else "0"
    return env


def short_run(name, cache, defer=True):
    """One fresh process's short run of ``name`` on ``cache``: a dict of its figures."""
    done = subprocess.run([sys.executable, "-c", SHORT_RUN, name, str(CONVERGE_STEPS[name])],
                          env=_cache_env(cache, defer), check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    line = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("done ")][0]
    first, rate, compiles, workers, pending, earlier, parfor, blocks, serial = line
    return {"first_step_s": float(first), "steps_per_s": float(rate), "compiles": int(compiles),
            "worker": int(workers) > 0, "pending": int(pending), "earlier_worker": int(earlier),
            "ran_as": (int(parfor), int(blocks), int(serial)),
            "cache_files": len(glob.glob(os.path.join(cache, "numba", "**", "*.nbc"), recursive=True))}


def wait_for_workers(cache):
    """Seconds until no compile worker is left on ``cache`` (a process with nothing deferred
    asks; its own start-up, about half a second, is not counted)."""
    done = subprocess.run([sys.executable, "-c", WAIT_FOR_WORKERS], env=_cache_env(cache, defer=False),
                          check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return float(done.stdout.split()[1])


def fully_compiled(name, cache=None, runs=2):
    """Median steps/s of the short run on a fully compiled cache: ``cache`` (filled first by a
    run that compiles every kernel in its process) or a new one."""
    own = cache is None
    cache = tempfile.mkdtemp(prefix="nnabla_jit_full_") if own else cache
    try:
        short_run(name, cache, defer=False)
        return statistics.median(short_run(name, cache)["steps_per_s"] for _ in range(runs))
    finally:
        if own:
            shutil.rmtree(cache, ignore_errors=True)


def converge(name, runs, pause=False, full_cache=None):
    """``runs`` short runs of ``name`` from an empty cache; returns (list of run dicts, seconds
    from the end of the last run until its detached worker finished, fully compiled steps/s)."""
    cache = tempfile.mkdtemp(prefix="nnabla_jit_converge_")
    results = []
    try:
        for i in range(runs):
            results.append(short_run(name, cache))
            if pause and i < runs - 1:
                results[-1]["paused_s"] = wait_for_workers(cache)
        settled = wait_for_workers(cache)   # also: no worker left writing into a removed cache
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    full = fully_compiled(name, full_cache)
    for r in results:
        r["vs_fully_compiled"] = r["steps_per_s"] / full
    return results, settled, full


def print_convergence(names, runs, pause):
    print("convergence: {} short runs per workload from an empty cache, {}".format(
        runs, "waiting between runs until no compile worker is left" if pause else "back to back"))
    print("| workload | run | first step s | steps/s | vs fully compiled | compiled in process "
          "| worker started | earlier run's worker compiling | cache files | then waited s "
          "| parallel kernels at the end: parfor, blocks, serial |")
    print("|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|")
    summary = {}
    for name in names:
        results, settled, full = converge(name, runs, pause)
        for i, r in enumerate(results):
            print("| {} | {} | {:.1f} | {:.1f} | {:.2f} | {} | {} | {} | {} | {} | {} |".format(
                name if i == 0 else "", i + 1, r["first_step_s"], r["steps_per_s"], r["vs_fully_compiled"],
                r["compiles"], "yes" if r["worker"] else "no",
                {-1: "-", 0: "no", 1: "yes"}[r["earlier_worker"]], r["cache_files"],
                "{:.1f}".format(r["paused_s"]) if "paused_s" in r else "", "{}, {}, {}".format(*r["ran_as"])),
                flush=True)
        print("| {} | fully compiled | | {:.1f} | 1.00 | | | | | | |".format(name, full))
        print("| | last run's worker done {:.1f} s after it | | | | | | | | | |".format(settled), flush=True)
        summary[name] = {"runs": results, "settled_s": settled, "fully_compiled": full}
    print("load average after: {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    return summary


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
    parser.add_argument("--converge", type=int, metavar="N",
                        help="convergence mode: N short runs from an empty cache (workloads: {})"
                        .format(", ".join(CONVERGE_STEPS)))
    parser.add_argument("--pause", action="store_true",
                        help="convergence: wait until no compile worker is left between runs")
    args = parser.parse_args()
    if args.no_bytecode:
        for path in glob.glob(os.path.join(PACKAGE, "**", "__pycache__", "*.pyc"), recursive=True):
            os.remove(path)
    else:
        compileall.compile_dir(PACKAGE, quiet=1)
    print("nnabla_jit's bytecode: {}".format("removed" if args.no_bytecode else "compiled, as pip install does"))
    print("load average before: {:.1f} {:.1f} {:.1f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))
    if args.converge:
        unknown = [n for n in args.names if n not in CONVERGE_STEPS]
        if unknown:
            parser.error("convergence workloads are {}, not {}".format(", ".join(CONVERGE_STEPS), ", ".join(unknown)))
        print_convergence(args.names or list(CONVERGE_STEPS), args.converge, args.pause)
        return
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
