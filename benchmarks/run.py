"""Run the benchmarks: steps/s of nnabla_jit and, when installed, of PyTorch (and onnxruntime
for ResNet-50) on the same workloads, and their ratios. Nothing here is asserted by the tests;
see README.md.

    python benchmarks/run.py                  # a quick look: all workloads in this process
    python benchmarks/run.py mlp tiny         # some of them
    python benchmarks/run.py --compare        # fresh processes taking turns, median of rounds
    python benchmarks/run.py --check          # --compare + convergence against baseline.json
    python benchmarks/run.py --check --full   # every workload (ResNets too; 20-30 minutes)
    python benchmarks/run.py --update-baseline [--full]   # write what was measured

``--compare``/``--check``/``--update-baseline``: first every nnabla_jit workload runs once with
``NNABLA_JIT_DEFER_PARALLEL=0`` (its kernels, the parallel ones too, compiled into the kernel
cache: the figures are fully compiled ones); then each round runs every workload once per
implementation, each in its own fresh process (nnabla_jit first in odd rounds, last in even
ones), and a figure is the median of the rounds. The ratios (nnabla_jit / PyTorch, nnabla_jit /
onnxruntime, and convergence: the second short run from an empty cache, started once the first
run's detached compile worker is done, / the fully compiled short run, see cold_start.py) are compared with ``baseline.json``: ``--check`` exits 1 when one
is more than 10% below its baseline. The machine may be shared: every sitting prints its load
average; compare ratios from the same sitting, never absolute figures across machines.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from workloads import OTHERS, WORKLOADS  # noqa: E402
import cold_start  # noqa: E402

BASELINE = os.path.join(HERE, "baseline.json")
TOLERANCE = 0.10   # --check fails a ratio more than this fraction below its baseline
QUICK = ["lenet", "convbn", "mlp", "elementwise", "elementwise_plain", "tiny"]   # --check's default, a few minutes
QUICK_CONVERGE = ["lenet"]
IMPLEMENTATIONS = ("nnabla_jit", "torch")


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
        while time.perf_counter() - t0 < max(seconds / 5, 0.2) or n == 0:
            step()
            n += 1
        best = max(best, n / (time.perf_counter() - t0))
    return best


def wait_for_parallel_kernels():
    """On a cold cache the warm-up steps ran serial stand-ins while a background process compiled
    the parallel kernels (nnabla_jit/deferred_compile.py): measure with the parallel ones."""
    import sys as _sys
    if "nnabla_jit" not in _sys.modules:   # a PyTorch or onnxruntime process
        return
    from nnabla_jit import deferred_compile   # the workloads import nnabla_jit lazily too
    if deferred_compile.pending():
        deferred_compile.wait()


def have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def builders(name):
    """implementation -> builder of workload ``name``."""
    ours, theirs, _ = WORKLOADS[name]
    return dict({"nnabla_jit": ours, "torch": theirs}, **OTHERS.get(name, {}))


# ------------------------------------------------------------------------------ one process
def measure_one(name, implementation, seconds):
    """In this process: build one implementation of one workload and print its steps/s."""
    if implementation == "torch":
        import torch
        version = torch.__version__ + " ({} threads)".format(torch.get_num_threads())
    elif implementation == "onnxruntime":
        import onnxruntime
        version = onnxruntime.__version__
    else:
        import nnabla_jit
        version = nnabla_jit.__version__
    rate = steps_per_second(builders(name)[implementation], seconds)
    print(json.dumps({"steps_per_s": rate, "version": version}))


def run_one(name, implementation, seconds, env):
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, implementation,
                           "--seconds", str(seconds)], env=env, check=True, stdout=subprocess.PIPE,
                          text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def fill_cache(names, env):
    """Run each nnabla_jit workload once with every kernel compiled in its process."""
    env = dict(env, NNABLA_JIT_DEFER_PARALLEL="0")
    for name in names:
        start = time.perf_counter()
        subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name, "nnabla_jit",
                        "--seconds", "0"], env=env, check=True, stdout=subprocess.DEVNULL)
        print("  fully compiled {} ({:.0f} s)".format(name, time.perf_counter() - start), flush=True)


def compare(names, rounds, seconds, converge_names):
    """The guard's measurements: {"steps_per_s": {name/impl: median}, "ratios": {...}, ...}."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    available = {impl for impl in ("torch", "onnxruntime") if have(impl)} | {"nnabla_jit"}
    missing = sorted({"torch", "onnxruntime"} - available)
    if missing:
        print("not installed: {} (their ratios are not measured)".format(", ".join(missing)))
    load_before = os.getloadavg()
    print("load average before: {:.1f} {:.1f} {:.1f} on {} CPUs".format(*load_before, os.cpu_count()))
    print("filling the kernel cache (every kernel compiled):", flush=True)
    fill_cache(names, env)
    samples, versions = {}, {}
    for r in range(rounds):
        for name in names:
            impls = [i for i in builders(name) if i in available]
            for impl in (impls if r % 2 == 0 else impls[::-1]):
                result = run_one(name, impl, seconds, env)
                samples.setdefault(name + "/" + impl, []).append(result["steps_per_s"])
                versions[impl] = result["version"]
        print("  round {} of {} done (load {:.1f})".format(r + 1, rounds, os.getloadavg()[0]), flush=True)
    rates = {key: statistics.median(v) for key, v in samples.items()}
    ratios = {}
    for key, rate in rates.items():
        name, impl = key.split("/")
        if impl != "nnabla_jit" and name + "/nnabla_jit" in rates:
            ratios[name + "/" + impl] = rates[name + "/nnabla_jit"] / rate
    convergence = {}
    for name in converge_names:   # run 2 starts once run 1's detached worker is done
        runs, settled, full = cold_start.converge(name, 2, pause=True)
        convergence[name] = {"runs_steps_per_s": [r["steps_per_s"] for r in runs], "fully_compiled": full,
                             "worker_after_run_1_s": runs[0]["paused_s"],
                             "run_2_compiled": runs[1]["compiles"], "run_2_worker": runs[1]["worker"]}
        ratios["convergence/" + name] = runs[1]["steps_per_s"] / full
        print("  convergence {}: run 1 {:.1f}, run 2 {:.1f}, fully compiled {:.1f} steps/s".format(
            name, runs[0]["steps_per_s"], runs[1]["steps_per_s"], full), flush=True)
    return {"date": datetime.date.today().isoformat(), "machine": machine(), "commit": commit(),
            "versions": versions,
            "load_average_before": load_before, "load_average": os.getloadavg(), "rounds": rounds, "steps_per_s": rates,
            "samples": samples, "convergence": convergence, "ratios": ratios}


def commit():
    done = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True)
    return done.stdout.strip() or "?"


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return "{} CPUs {}, {}, Python {}".format(os.cpu_count(), model, platform.system(), platform.python_version())


def print_comparison(result):
    print()
    print("{}, {}; {}; load average after {:.1f} {:.1f} {:.1f}; median of {} rounds".format(
        result["date"], result["commit"], result["machine"], *result["load_average"], result["rounds"]))
    print("versions: " + ", ".join("{} {}".format(k, v) for k, v in sorted(result["versions"].items())))
    print("| workload | nnabla_jit steps/s | PyTorch steps/s | ratio | onnxruntime steps/s | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    rates, ratios = result["steps_per_s"], result["ratios"]
    names = sorted({key.split("/")[0] for key in rates}, key=list(WORKLOADS).index)

    def cell(fmt, value):
        return "-" if value is None else fmt.format(value)
    for name in names:
        print("| {} | {} | {} | {} | {} | {} |".format(
            name, cell("{:.2f}", rates.get(name + "/nnabla_jit")), cell("{:.2f}", rates.get(name + "/torch")),
            cell("{:.2f}x", ratios.get(name + "/torch")), cell("{:.2f}", rates.get(name + "/onnxruntime")),
            cell("{:.2f}x", ratios.get(name + "/onnxruntime"))))
    for name, c in result["convergence"].items():
        print("| convergence {}: short runs 1, 2 from an empty cache (run 1's worker done {:.0f} s after it) "
              "| {} | fully compiled {:.1f} | run 2: {:.2f}x | | |".format(
                  name, c["worker_after_run_1_s"], ", ".join("{:.1f}".format(v) for v in c["runs_steps_per_s"]),
                  c["fully_compiled"], ratios["convergence/" + name]))


# ------------------------------------------------------------------------------ the baseline
def check(result, baseline):
    """Print each ratio against the baseline; the keys more than TOLERANCE below it, and the
    convergence workloads whose second run (after the first run's worker) still compiled or
    started a worker -- a fact that, unlike a ratio, does not depend on the machine's load."""
    failed = []
    for name, c in sorted(result["convergence"].items()):
        if c["run_2_compiled"] or c["run_2_worker"]:
            failed.append("convergence/" + name + " (run 2 compiled)")
            print("convergence {}: run 2 compiled {} kernel(s), {} a worker: FAILED (the first run's "
                  "kernels did not all reach the cache)".format(
                      name, c["run_2_compiled"], "started" if c["run_2_worker"] else "did not start"))
    print()
    print("| ratio | baseline | now | change | |")
    print("|---|---:|---:|---:|---|")
    for key, now in sorted(result["ratios"].items()):
        base = baseline.get("ratios", {}).get(key)
        if base is None:
            print("| {} | - | {:.2f} | | new (not in the baseline) |".format(key, now))
            continue
        bad = now < base * (1 - TOLERANCE)
        if bad:
            failed.append(key)
        print("| {} | {:.2f} | {:.2f} | {:+.0%} | {} |".format(key, base, now, now / base - 1,
                                                               "FAILED" if bad else "ok"))
    return failed


def load_baseline(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def update_baseline(path, result):
    """Merge ``result``'s ratios into the baseline file (ratios not measured now are kept)."""
    baseline = load_baseline(path)
    measured = {key: min(value, 1.0) if key.startswith("convergence/") else value   # a second run
                for key, value in result["ratios"].items()}   # faster than fully compiled is noise
    ratios = dict(baseline.get("ratios", {}), **measured)
    sittings = baseline.get("sittings", [])
    sittings.append({k: result.get(k) for k in ("date", "commit", "machine", "versions", "load_average_before",
                                                "load_average", "rounds", "steps_per_s", "convergence")})
    text = json.dumps({"about": "Ratios `python benchmarks/run.py --check` compares with (fails "
                       "on one more than 10% below); written by --update-baseline. Ratios: "
                       "nnabla_jit / the other implementation's steps/s, fully compiled; "
                       "convergence/NAME: the second short run from an empty cache (started once the "
                       "first run's compile worker is done) / the fully compiled short run. "
                       "sittings: what each update measured.",
                       "ratios": dict(sorted(ratios.items())), "sittings": sittings[-5:]}, indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    print("wrote {}".format(path))


# ------------------------------------------------------------------------------ in one process
def quick_look(names, seconds, cold):
    torch_ok = have("torch")
    if torch_ok:
        import torch
        print("PyTorch {} ({} threads)".format(torch.__version__, torch.get_num_threads()))
    else:
        print("PyTorch not installed: ratios omitted (pip install torch==2.13.0)")
    rows = ["| workload | nnabla_jit steps/s | PyTorch steps/s | ratio |", "|---|---:|---:|---:|"]
    results = {}
    for name in names:
        ours, theirs, title = WORKLOADS[name]
        r = {"title": title, "nnabla_jit": steps_per_second(ours, seconds)}
        if torch_ok:
            r["torch"] = steps_per_second(theirs, seconds)
            r["ratio"] = r["nnabla_jit"] / r["torch"]
        results[name] = r
        rows.append("| {} | {:.1f} | {} | {} |".format(
            title, r["nnabla_jit"], "{:.1f}".format(r["torch"]) if torch_ok else "-",
            "{:.2f}x".format(r["ratio"]) if torch_ok else "-"))
        print(rows[-1], flush=True)
    if cold:
        results["cold_start"] = cold_start_mlp()
        rows.append("| cold start (import, build MLP, first step), empty kernel cache | {:.2f} s | | |"
                    .format(results["cold_start"]["empty_cache_s"]))
        rows.append("| cold start, warm kernel cache | {:.2f} s | | |".format(results["cold_start"]["warm_cache_s"]))
    print()
    print("\n".join(rows))
    return results


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


def cold_start_mlp():
    """Seconds for a fresh process to import, build the MLP and run its first step, with an
    empty kernel cache and again with the cache that first run left behind."""
    cache = tempfile.mkdtemp(prefix="nnabla_jit_bench_cache_")
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, NNABLA_JIT_CACHE_DIR=cache)
    try:
        def run():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", COLD_START], env=env, check=True, capture_output=True, text=True)
            return time.perf_counter() - start
        empty = run()
        warm = min(run() for _ in range(3))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return {"empty_cache_s": empty, "warm_cache_s": warm}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="workloads: {}".format(", ".join(WORKLOADS)))
    parser.add_argument("--seconds", type=float, help="measuring time per process (default 3; 2 in "
                        "--compare/--check)")
    parser.add_argument("--no-cold-start", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--compare", action="store_true", help="fresh processes taking turns, median of rounds")
    parser.add_argument("--check", action="store_true", help="--compare, then exit 1 on a ratio more than "
                        "10%% below the baseline")
    parser.add_argument("--update-baseline", action="store_true", help="--compare, then write the ratios "
                        "into the baseline")
    parser.add_argument("--full", action="store_true", help="every workload and convergence workload "
                        "(default for --compare/--check: {}; convergence {})".format(
                            ", ".join(QUICK), ", ".join(QUICK_CONVERGE)))
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --compare (default 3)")
    parser.add_argument("--converge", nargs="*", metavar="NAME", help="convergence workloads to "
                        "measure in --compare (none: skip)")
    parser.add_argument("--baseline", default=BASELINE, help="the baseline file (default benchmarks/baseline.json)")
    parser.add_argument("--one", nargs=2, metavar=("NAME", "IMPL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in WORKLOADS]
    if unknown:
        parser.error("unknown workloads {}; they are {}".format(", ".join(unknown), ", ".join(WORKLOADS)))
    if args.one:
        measure_one(args.one[0], args.one[1], 3.0 if args.seconds is None else args.seconds)
        return 0
    if not (args.compare or args.check or args.update_baseline):
        results = quick_look(args.names or list(WORKLOADS), args.seconds or 3.0,
                             not args.no_cold_start and not args.names)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
        return 0
    names = args.names or (list(WORKLOADS) if args.full else QUICK)
    if args.converge is not None:
        converge_names = args.converge
    else:
        converge_names = [] if args.names else list(cold_start.CONVERGE_STEPS) if args.full else QUICK_CONVERGE
    result = compare(names, args.rounds, args.seconds or 2.0, converge_names)
    print_comparison(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    failed = []
    if args.check:
        failed = check(result, load_baseline(args.baseline))
        print("\n{} ratio(s) more than {:.0%} below the baseline: {}".format(
            len(failed), TOLERANCE, ", ".join(failed)) if failed else
            "\nno ratio more than {:.0%} below the baseline".format(TOLERANCE))
    if args.update_baseline:
        update_baseline(args.baseline, result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
