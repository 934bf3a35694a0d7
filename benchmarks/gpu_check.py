"""The device check: nnabla_jit's CUDA path on a real GPU, in one command that needs nothing
installed beyond numba(-cuda), numpy, pytest (pytest-xdist / pytest-timeout if there), and
optionally CuPy and PyTorch; run from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/gpu_check.py --out DIR [--budget 420] [--profile]
    python benchmarks/gpu_check.py --simulate --out /tmp/gc      # numba's simulator, tiny shapes

Sections, in order, each under its share of ``--budget`` seconds (what one leaves goes to the
next; every GPU job runs in a subprocess with a timeout, so a crash or a hang is a result, not
the end of the run):

1. env (<= 12%, at least 45 s): Python, numpy, numba, numba-cuda, CuPy, PyTorch versions, ``nvidia-smi``, the
   GPU numba sees (``numba.cuda.detect()``), whether CuPy reads a numba device array without a
   copy and cuBLAS multiplies it, which ``blas`` route is the default, a first tiny graph on
   the device; run twice with ``NNABLA_JIT_CUDA_CACHE=1`` (kernels compiled with cache=True,
   under a NUMBA_CACHE_DIR in /tmp): if the second run works, the later sections reuse compiled
   kernels across processes (a first run that fails is repeated without the cache, which the
   later sections then go without).
2. correctness (<= 45%): ``pytest tests/cuda`` on the GPU (every op family's device kernels
   against the CPU kernels, forward and backward with accum / propagate_down, the solvers, the
   copies of a training step, blas.matmul through each route), in parallel (pytest-xdist,
   ``-n 12 --dist loadfile``, ``--timeout`` per test), results in ``junit.xml``; then, when
   the default route is cuBLAS, the test files whose ops reach ``blas.matmul`` again with
   ``NNABLA_JIT_CUDA_BLAS=numba`` (the tiled kernel), in ``junit_numba.xml``.
3. digits (<= 10%): examples/digits' CNN trained ``--digits-steps`` steps (batch 32, Adam) on
   the CPU and under a ``cudnn`` context from the same initial parameters and data; the
   losses' largest absolute and relative differences (scikit-learn's digits when it is
   installed, else seeded synthetic 8x8 images: the comparison, not the accuracy, is the point).
4. benchmarks (the rest): nnabla_jit under ``cudnn`` against PyTorch CUDA in the same process,
   each side synchronised before the clock is read, best window of repeated steps: fused
   elementwise chain, MLP, LeNet, BN-CNN, ResNet-18 (CIFAR, b128) training, ResNet-50
   inference b1 and b32 (``gpu_workloads.py``); PyTorch and the default route first for all of
   them, then the tiled-kernel route for the GEMM workloads while time remains. PyTorch runs
   in float32 without TF32 (as nnabla_jit's products), cudnn.benchmark on. nnabla_jit runs
   each workload twice, with the CUDA path's speed-ups (``NNABLA_JIT_CUDA_FAST=1``, the default)
   and without (``=0``), in separate processes, and LeNet, BN-CNN and ResNet-50 b1 again in
   the first process with each newer speed-up (SWITCHED: packed launches, kept views, kept
   GEMM layouts, one-launch BN statistics in inference and training) off in turn; with
   ``--profile``, cProfile's top functions of 20 steps of LeNet, BN-CNN, ResNet-18 and
   ResNet-50 b1 go to ``profile.txt``.

DIR receives, updated as each section ends: ``results.json``, ``results.md`` (the tables),
``gpu_check.log`` (this script's log), ``pytest.log``, ``junit.xml``, ``junit_numba.xml``,
``sections.log`` (the subprocesses' output) and, with ``--profile``, ``profile.txt``: 8 files.
stdout gets a compact summary.
"""
import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARES = {"env": 0.12, "correctness": 0.45, "digits": 0.10}   # benchmarks: the rest
FALLBACK_SHARE = 0.2   # of the correctness share, kept for the tiled-kernel rerun
SECTIONS = ("env", "correctness", "digits", "bench")
ROUTE_KEYS = ("cublas", "numba", "cublas_fast_off", "numba_fast_off")
BENCHMARKS = ("elementwise", "mlp", "lenet", "convbn", "resnet18", "resnet50_b1", "resnet50_b32")
TINY_BENCHMARKS = ("elementwise", "resnet18", "resnet50_b1")
# the tests whose graphs reach blas.matmul (Affine, BatchMatmul, the convolutions, RNNs, STFT,
# AffineGrid), run again through the tiled kernel when cuBLAS is the default
GEMM_TESTS = ("test_cuda_blas.py", "test_cuda_ops.py", "test_cuda_conv.py", "test_cuda_deconv.py",
              "test_cuda_convolution_variants.py", "test_cuda_recurrent.py",
              "test_cuda_signal.py", "test_cuda_geometric.py", "test_cuda_training.py",
              "test_cuda_adjoint.py")
SIMULATED_TESTS = ("test_cuda_blas.py", "test_cuda_arithmetic.py")
PROFILED = ("lenet", "convbn", "resnet18", "resnet50_b1")   # --profile: cProfiled on the GPU
PROFILED_SIMULATED = ("elementwise",)   # and in the simulator's dry run (tiny, one step)
PROFILE_STEPS = 20
PROFILE_RESERVE = 90.0   # s of the budget the bench passes leave for the profiles
# speed-ups switched off one at a time in the bench worker's process (module flags of
# cuda_ops/device.py read at every launch), on these workloads: the effect of each, measured
# on the same graph right after the default
SWITCHED = ("PACKED_LAUNCH", "VIEW_CACHE", "GEMM_CACHE", "FUSED_INFERENCE", "FUSED_STATISTICS")
SWITCH_MODULES = {"PACKED_LAUNCH": "device", "VIEW_CACHE": "device", "GEMM_CACHE": "cublas",
                  "FUSED_INFERENCE": "normalization", "FUSED_STATISTICS": "normalization"}
SWITCH_BENCH = ("lenet", "convbn", "resnet50_b1")
SWITCH_SHARE = 0.5   # of a switched workload's time, for the switched-off measurements
CACHE_ROOT = os.path.join(tempfile.gettempdir(), "nnabla_jit_gpu_check")


# ============================================================================ the orchestrator
class Check:
    def __init__(self, args):
        self.args = args
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        self.start = time.monotonic()
        self.deadline = self.start + args.budget
        self.work = tempfile.mkdtemp(prefix="gpu_check_")
        self.results = {"meta": {"simulate": args.simulate, "budget_s": args.budget,
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                                 "command": " ".join(sys.argv)},
                        "sections": {}}
        self.cache = False
        self.default_route = None
        for name in ("gpu_check.log", "sections.log", "pytest.log"):
            open(self.path(name), "w").close()

    def path(self, name):
        return os.path.join(self.out, name)

    def left(self):
        return self.deadline - time.monotonic()

    def log(self, msg, echo=True):
        line = "[{:6.1f}s] {}".format(time.monotonic() - self.start, msg)
        if echo:
            print(line, flush=True)
        with open(self.path("gpu_check.log"), "a") as f:
            f.write(line + "\n")

    def save(self):
        self.results["meta"]["elapsed_s"] = round(time.monotonic() - self.start, 1)
        _write_atomic(self.path("results.json"), json.dumps(self.results, indent=1, default=str))
        _write_atomic(self.path("results.md"), render_markdown(self.results))

    # ------------------------------------------------------------------ subprocesses
    def env(self, cache=None, route=None, fast=None):
        env = dict(os.environ)
        if fast is not None:   # NNABLA_JIT_CUDA_FAST: the CUDA path's speed-ups on / off
            env["NNABLA_JIT_CUDA_FAST"] = fast
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        env.setdefault("NNABLA_JIT_DEFER_PARALLEL", "0")   # no background compile workers
        env["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"     # tiny test grids: thousands of lines
        env["PYTHONUNBUFFERED"] = "1"
        env["TQDM_DISABLE"] = "1"
        if self.args.simulate:
            env["NUMBA_ENABLE_CUDASIM"] = "1"
        else:
            env.pop("NUMBA_ENABLE_CUDASIM", None)
            env.setdefault("NUMBA_CACHE_DIR", os.path.join(CACHE_ROOT, "numba"))
            env.setdefault("NNABLA_JIT_CACHE_DIR", os.path.join(CACHE_ROOT, "kernels"))
        env["NNABLA_JIT_CUDA_CACHE"] = "1" if (self.cache if cache is None else cache) else "0"
        if route is not None:
            env["NNABLA_JIT_CUDA_BLAS"] = route
        return env

    def worker(self, kind, timeout, extra=(), **env_kw):
        """Run ``gpu_check.py --worker kind`` for at most ``timeout`` s; returns (its result
        dict, or what it had written when it was stopped, and a status string)."""
        result_path = os.path.join(self.work, kind + ".json")
        if os.path.exists(result_path):
            os.remove(result_path)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--result",
               result_path, "--out", self.out] + (["--simulate"] if self.args.simulate else []) \
            + list(extra)
        t0 = time.monotonic()
        with open(self.path("sections.log"), "a") as log:
            log.write("\n===== {} (timeout {:.0f} s): {}\n".format(kind, timeout, " ".join(cmd)))
            log.flush()
            try:
                rc = subprocess.run(cmd, cwd=ROOT, env=self.env(**env_kw), stdout=log,
                                    stderr=subprocess.STDOUT, timeout=max(timeout, 1)).returncode
                status = "ok" if rc == 0 else "exit code {}".format(rc)
            except subprocess.TimeoutExpired:
                status = "timed out after {:.0f} s".format(timeout)
        result = _read_json(result_path) or {}
        result.setdefault("elapsed_s", round(time.monotonic() - t0, 1))
        return result, status

    # ------------------------------------------------------------------ sections
    def run(self):
        self.log("gpu_check: budget {} s, out {}, {}".format(
            self.args.budget, self.out, "SIMULATOR" if self.args.simulate else "GPU"))
        for name in self.args.sections:
            try:
                getattr(self, "section_" + name)()
            except Exception:
                self.results["sections"].setdefault(name, {})["error"] = traceback.format_exc()
                self.log("section {} failed in the orchestrator:\n{}".format(
                    name, traceback.format_exc()))
            self.save()
        shutil.rmtree(self.work, ignore_errors=True)
        self.log("done in {:.0f} s; results in {}".format(time.monotonic() - self.start, self.out))
        print()
        print(summary_text(self.results), flush=True)

    def section_env(self):
        cap = min(max(SHARES["env"] * self.args.budget, 45), self.left())
        t0 = time.monotonic()
        if self.args.simulate:
            result, status = self.worker("env", cap)
            section = {"status": status, "probe": result,
                       "kernel_cache": "off (the simulator compiles nothing)"}
        else:
            # twice with the kernel cache: the second run loads what the first compiled. A
            # first run that failed (not one that ran out of time) is repeated without it.
            result, status = self.worker("env", cap * 0.7, cache=True)
            cache = status == "ok" or status.startswith("timed out")
            if not cache:
                self.log("env probe with the kernel cache: {}; again without".format(status))
            again, status2 = self.worker("env", cap - (time.monotonic() - t0), cache=cache)
            self.cache = cache and status2 == "ok"
            section = {"status": status2, "probe": again if again.get("versions") else result,
                       "first_probe": {"status": status,
                                       "tiny_graph_s": result.get("tiny_graph_s")},
                       "kernel_cache": "on" if self.cache else "off (probes: {}, {})".format(
                           status, status2),
                       "cached_tiny_graph_s": again.get("tiny_graph_s"),
                       "cache_files": again.get("cache_files")}
            result = section["probe"]
        self.default_route = result.get("blas_backend")
        section["elapsed_s"] = round(time.monotonic() - t0, 1)
        self.results["sections"]["env"] = section
        self.log("env: {}; GPU {}; blas route {}; kernel cache {}".format(
            section["status"], result.get("gpu", {}).get("name"), self.default_route,
            section.get("kernel_cache")))

    def section_correctness(self):
        cap = min(SHARES["correctness"] * self.args.budget, self.left())
        t0 = time.monotonic()
        section = self.results["sections"]["correctness"] = {}
        tests = os.path.join(ROOT, "tests", "cuda")
        files = [os.path.join(tests, f) for f in SIMULATED_TESTS] if self.args.simulate else [tests]
        fallback = (self.default_route == "cublas")
        main_cap = cap * (1 - FALLBACK_SHARE) if fallback else cap
        section["default"] = self.pytest(files, "junit.xml", main_cap, route=None)
        section["default"]["route"] = self.default_route or "default"
        self.save()
        if fallback:
            files = [os.path.join(tests, f) for f in GEMM_TESTS]
            section["numba"] = self.pytest(files, "junit_numba.xml",
                                           cap - (time.monotonic() - t0), route="numba")
            section["numba"]["route"] = "numba (NNABLA_JIT_CUDA_BLAS=numba)"
        else:
            section["numba_note"] = ("the run above was the numba tiled kernel's (default route: "
                                     "{}); no cuBLAS route here".format(self.default_route))
        section["elapsed_s"] = round(time.monotonic() - t0, 1)

    def pytest(self, files, junit_name, cap, route):
        junit = self.path(junit_name)
        if os.path.exists(junit):
            os.remove(junit)
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
               "-m", "slow or not slow", "-v", "-rfE", "--tb=short", "--durations=15",
               "--junitxml", junit]
        workers = 0
        if importlib.util.find_spec("xdist") is not None and not self.args.simulate:
            workers = max(1, min(self.args.workers, (os.cpu_count() or 2) - 2))
            if self.exclusive_gpu():
                workers = 0
        if workers:
            cmd += ["-n", str(workers), "--dist", "loadfile"]
        if importlib.util.find_spec("pytest_timeout") is not None:
            cmd += ["--timeout", str(self.args.test_timeout)]
        cmd += files
        self.log("pytest ({}, {} workers, cap {:.0f} s): {}".format(
            route or "default route", workers or "no", cap, " ".join(cmd[3:])))
        t0 = time.monotonic()
        with open(self.path("pytest.log"), "a") as log:
            log.write("\n===== {}\n".format(" ".join(cmd)))
            log.flush()
            env = self.env(route=route)
            if workers:   # the CPU references of tiny graphs: threads would only contend
                env.setdefault("NUMBA_NUM_THREADS", "2")
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            status = _wait_or_stop(proc, max(cap, 5))
        result = parse_junit(junit)
        result.update(status=status, workers=workers, elapsed_s=round(time.monotonic() - t0, 1))
        if not result.get("tests"):   # stopped before the report: count pytest -v's lines
            result.update(progress_counts(self.path("pytest.log")))
        self.log("pytest {}: {} tests, {} failed, {} errors, {} skipped ({}, {:.0f} s)".format(
            junit_name, result.get("tests"), result.get("failures"), result.get("errors"),
            result.get("skipped"), status, result["elapsed_s"]))
        return result

    def exclusive_gpu(self):
        mode = self.results["sections"].get("env", {}).get("probe", {}).get("compute_mode", "")
        return "exclusive" in str(mode).lower()

    def section_digits(self):
        cap = min(SHARES["digits"] * self.args.budget, self.left())
        steps = self.args.digits_steps or (1 if self.args.simulate else 300)
        batch = 1 if self.args.simulate else self.args.digits_batch
        result, status = self.worker("digits", cap, ["--digits-steps", str(steps),
                                                     "--digits-batch", str(batch)])
        result["status"] = status
        self.results["sections"]["digits"] = result
        self.log("digits: {}; {} steps; max |diff| {}; max rel {}; verdict {}".format(
            status, steps, result.get("max_abs_diff"), result.get("max_rel_diff"),
            result.get("verdict")))

    def section_bench(self):
        names = list(self.args.bench or (TINY_BENCHMARKS if self.args.simulate else BENCHMARKS))
        # PyTorch and the default route (speed-ups on) for every workload first, then the same
        # with NNABLA_JIT_CUDA_FAST=0 (before / after in one run), the host profiles, and the
        # tiled kernel for the GEMM workloads when the default is cuBLAS, while time remains:
        # the slower runs cannot starve the others
        section = self.results["sections"]["bench"] = {"results": {}, "runs": []}
        self.bench_pass(section, ["{}:default".format(n) for n in names], fast="1")
        self.bench_pass(section, ["{}:default".format(n) for n in names], fast="0")
        self.save()
        if self.args.profile and self.left() > 20:
            self.section_profile()
        if self.default_route == "cublas":
            sys.path.insert(0, HERE)
            import gpu_workloads
            self.bench_pass(section, ["{}:numba".format(n) for n in names
                                      if n in gpu_workloads.HAS_GEMM], fast="1")
        for name, r in section["results"].items():
            self.log("bench {}: {}".format(name, _bench_line(r)))

    def bench_pass(self, section, items, fast):
        """Run the bench worker over ``items`` with NNABLA_JIT_CUDA_FAST=``fast``; a worker that
        dies or hangs in an item is started again on the rest."""
        reserve = PROFILE_RESERVE if (self.args.profile and "profile" not in
                                      self.results["sections"]) else 0
        while items and self.left() - reserve > 10:
            left = self.left() - reserve
            result, status = self.worker("bench", left - 3,
                                         ["--bench"] + items + ["--bench-deadline",
                                                                str(time.time() + left - 8)],
                                         fast=fast)
            for name, r in result.get("results", {}).items():
                merged = section["results"].setdefault(name, {})
                merged.update(r)
                _ratios(merged)
            section["runs"].append({"status": status, "items": items, "fast": fast,
                                    "elapsed_s": result.get("elapsed_s")})
            if isinstance(result.get("error"), str):
                section["runs"][-1]["error"] = result["error"].strip().splitlines()[-1][:300]
            for key in ("torch", "torch_settings", "routes", "packing"):
                if key in result and (fast == "1" or key != "packing"):
                    section[key] = result[key]
            done = set(result.get("done", []))
            current = result.get("current")
            if status == "ok" or current not in items:
                break
            # the worker died, hung or lost its CUDA context in an item: skip that one, go on
            # with the rest in a fresh process
            name = current.split(":")[0]
            if current not in done:
                section["results"].setdefault(name, {})[
                    "error" if fast == "1" else "error_fast_off"] = "{}: worker {}".format(
                        current, status)
            items = [i for i in items[items.index(current) + 1:] if i not in done]
            self.save()

    def section_profile(self):
        """cProfile of PROFILE_STEPS steps of LeNet and ResNet-50 b1 on the GPU (speed-ups on):
        the top functions by own time, into profile.txt, for the next look at the host time."""
        cap = min(PROFILE_RESERVE, self.left() - 5)
        names = PROFILED_SIMULATED if self.args.simulate else PROFILED
        result, status = self.worker("profile", cap, ["--bench"] + list(names), fast="1")
        self.results["sections"]["profile"] = {"status": status, "file": "profile.txt",
                                               "summary": result.get("summary"),
                                               "elapsed_s": result.get("elapsed_s")}
        self.log("profile: {} ({} s): {}".format(status, result.get("elapsed_s"),
                                                  result.get("summary")))


# ============================================================================ workers
def worker_env(args):
    """The environment section's probe (in a subprocess)."""
    out = {}
    save = (lambda: _write_atomic(args.result, json.dumps(out, indent=1, default=str)))
    import platform
    out["python"] = platform.python_version()
    out["platform"] = platform.platform()
    out["versions"] = _versions()
    out["nvidia_smi"], out["compute_mode"] = _nvidia_smi()
    save()
    try:
        import contextlib
        import io
        from numba import cuda
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cuda.detect()
        out["numba_cuda_detect"] = buf.getvalue()
    except Exception as e:
        out["numba_cuda_detect"] = "failed: {}: {}".format(type(e).__name__, e)
    save()
    from nnabla_jit.cuda_ops import blas, cublas, device, registry
    out["blas_backend"] = blas.BACKEND
    out["cublas_unavailable"] = cublas.unavailable_reason()
    out["kernel_cache_flag"] = registry.CACHE
    out["gpu"] = _attempt(lambda: dict(device.properties(0)))
    save()
    out["cupy_on_numba_array"] = _attempt(_cupy_interop)
    save()
    out["matmul_routes"] = _attempt(_matmul_routes)
    save()
    t0 = time.perf_counter()
    out["tiny_graph"] = _attempt(_tiny_graph)
    out["tiny_graph_s"] = round(time.perf_counter() - t0, 2)
    cache_dir = os.environ.get("NUMBA_CACHE_DIR")
    if cache_dir and os.path.isdir(cache_dir):
        out["cache_files"] = sum(len(f) for _, _, f in os.walk(cache_dir))
    save()
    failed = [k for k in ("gpu", "tiny_graph") if isinstance(out[k], dict) and "error" in out[k]]
    return 1 if failed else 0


def _versions():
    from importlib import metadata
    versions = {}
    for dist in ("numpy", "numba", "numba-cuda", "cuda-bindings", "cuda-python", "cupy-cuda13x",
                 "cupy-cuda12x", "cupy", "torch", "pytest", "pytest-xdist", "pytest-timeout",
                 "hypothesis", "scikit-learn"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _nvidia_smi():
    try:
        full = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=20).stdout
        mode = subprocess.run(["nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
        return full, mode
    except Exception as e:
        return "nvidia-smi failed: {}: {}".format(type(e).__name__, e), ""


def _attempt(fn):
    try:
        return fn()
    except Exception as e:
        return {"error": "{}: {}".format(type(e).__name__, e),
                "traceback": traceback.format_exc()[-3000:]}


def _cupy_interop():
    """CuPy reads a numba device array in place (same pointer) and multiplies it with cuBLAS."""
    import numpy as np
    from numba import cuda
    from numba import config
    if config.ENABLE_CUDASIM:
        return {"skipped": "the simulator has no CuPy interop"}
    import cupy
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    dev = cuda.to_device(host)
    view = cupy.asarray(dev)
    same_memory = int(view.data.ptr) == int(dev.__cuda_array_interface__["data"][0])
    product = cupy.asnumpy(view @ view.T)
    return {"zero_copy": same_memory,
            "matmul_max_abs_err": float(np.abs(product - host @ host.T).max()),
            "cupy_cuda_runtime": cupy.cuda.runtime.runtimeGetVersion()}


def _matmul_routes():
    """blas.matmul through each route against NumPy on one product of each transposition."""
    import numpy as np
    from nnabla_jit.cuda_ops import blas, cublas, device
    cuda = device.load()
    rng = np.random.RandomState(0)
    routes = ["numba"] + (["cublas"] if cublas.unavailable_reason() is None else [])
    report = {}
    for route in routes:
        previous = blas.use_backend(route)
        try:
            errs = []
            for ta in (False, True):
                for tb in (False, True):
                    a = rng.randn(2, *((33, 17) if ta else (17, 33))).astype(np.float32)
                    b = rng.randn(2, *((9, 33) if tb else (33, 9))).astype(np.float32)
                    c = cuda.device_array((2, 17, 9), np.float32)
                    same = blas.batch_map(2, (2,), (2,))
                    blas.matmul(cuda.to_device(a), cuda.to_device(b), c, ta, tb, False, same, same)
                    ref = np.matmul(a.transpose(0, 2, 1) if ta else a,
                                    b.transpose(0, 2, 1) if tb else b)
                    errs.append(float(np.abs(c.copy_to_host() - ref).max()))
            report[route] = {"max_abs_err": max(errs)}
        except Exception as e:
            report[route] = {"error": "{}: {}".format(type(e).__name__, e)}
        finally:
            blas.use_backend(previous)
    return report


def _tiny_graph():
    """sum(tanh(affine(x))) forward and backward under a cudnn context against NumPy (no CPU
    kernels: nothing to compile for the host)."""
    import numpy as np
    import nnabla_jit as nn
    import nnabla_jit.functions as F
    import nnabla_jit.parametric_functions as PF
    from nnabla_jit.ext_utils import get_extension_context
    x0 = np.random.RandomState(0).randn(4, 6).astype(np.float32)
    nn.clear_parameters()
    with nn.context_scope(get_extension_context("cudnn")):
        x = nn.Variable.from_numpy_array(x0, need_grad=True)
        y = F.sum(F.tanh(PF.affine(x, 5, name="fc")))
    y.forward()
    y.backward()
    params = nn.get_parameters()
    w, b = params["fc/affine/W"].d.astype(np.float64), params["fc/affine/b"].d.astype(np.float64)
    h = np.tanh(x0 @ w + b)
    return {"y_cuda": float(y.d), "y_numpy": float(h.sum()),
            "grad_max_abs_diff": float(np.abs(x.g - (1 - h ** 2) @ w.T).max())}


def worker_digits(args):
    import numpy as np
    import nnabla_jit as nn
    import nnabla_jit.functions as F
    import nnabla_jit.solvers as S
    from nnabla_jit.ext_utils import get_extension_context
    out = {"steps": args.digits_steps, "batch": args.digits_batch}
    save = (lambda: _write_atomic(args.result, json.dumps(out, indent=1, default=str)))
    spec = importlib.util.spec_from_file_location(
        "digits_train", os.path.join(ROOT, "examples", "digits", "train.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    try:
        (images, labels), _ = example.load_split()
        out["data"] = "scikit-learn's digits ({} training images)".format(len(images))
    except (SystemExit, Exception) as e:
        images, labels = _synthetic_digits()
        out["data"] = "synthetic 8x8 digits (scikit-learn absent: {})".format(e)
    if args.simulate:   # the simulator runs every GPU thread in Python: 4x4 crops, a dry run
        images = np.ascontiguousarray(images[:, :, 2:6, 2:6])
        out["data"] += ", cropped to 4x4 (--simulate)"
    batch, steps = args.digits_batch, args.digits_steps

    def losses(ctx):
        nn.clear_parameters()
        nn.random.seed(0)
        np.random.seed(0)
        with nn.context_scope(ctx):
            x = nn.Variable((batch,) + images.shape[1:])
            t = nn.Variable((batch, 1))
            loss = F.mean(F.softmax_cross_entropy(example.cnn(x), t))
        solver = S.Adam(2e-3)
        solver.set_parameters(nn.get_parameters())
        values = []
        for i in range(steps):
            start = (i * batch) % (len(images) - batch)
            x.d, t.d = images[start:start + batch], labels[start:start + batch]
            loss.forward(clear_no_need_grad=True)
            solver.zero_grad()
            loss.backward(clear_buffer=True)
            solver.weight_decay(1e-5)
            solver.update()
            values.append(float(loss.d))
        return values

    for name, make_ctx in (("cpu", nn.Context), ("gpu", lambda: get_extension_context("cudnn"))):
        t0 = time.perf_counter()
        out[name + "_losses"] = losses(make_ctx())
        out[name + "_s"] = round(time.perf_counter() - t0, 2)
        save()
    cpu, gpu = np.array(out["cpu_losses"]), np.array(out["gpu_losses"])
    diff = np.abs(cpu - gpu)
    rel = diff / np.maximum(np.abs(cpu), 1e-12)
    out.update(max_abs_diff=float(diff.max()), max_rel_diff=float(rel.max()),
               max_rel_diff_first_10=float(rel[:10].max()),
               first_loss=[float(cpu[0]), float(gpu[0])],
               last_loss=[float(cpu[-1]), float(gpu[-1])],
               verdict=("equal within float32 tolerance (rel <= 1e-3)" if rel.max() <= 1e-3 else
                        "close (rel <= 1e-2)" if rel.max() <= 1e-2 else "DIFFERENT"))
    save()
    return 0


def _synthetic_digits(n=1437, seed=0):
    """Ten seeded 8x8 patterns with noise, as examples/digits' (N, 1, 8, 8) float32 in [0, 1]
    and (N, 1) int32 labels."""
    import numpy as np
    rng = np.random.RandomState(seed)
    patterns = rng.rand(10, 8, 8)
    labels = rng.randint(0, 10, n)
    images = np.clip(patterns[labels] + 0.3 * rng.randn(n, 8, 8), 0, 1)
    return images[:, None].astype(np.float32), labels[:, None].astype(np.int32)


def worker_bench(args):
    import gc
    out = {"results": {}, "current": None}
    save = (lambda: _write_atomic(args.result, json.dumps(out, indent=1, default=str)))
    sys.path.insert(0, HERE)
    import gpu_workloads
    import nnabla_jit as nn
    from nnabla_jit.cuda_ops import blas, cublas, device
    from nnabla_jit.ext_utils import get_extension_context
    cuda = device.load()
    device.packing_driver()   # resolved now, so PACKING_STATS says why packing is off if it is
    size = "tiny" if args.simulate else "full"
    deadline = args.bench_deadline or (time.time() + 120)
    torch = None
    try:
        import torch
        if not torch.cuda.is_available() and not args.simulate:
            out["torch"] = "PyTorch {} sees no GPU: its side is skipped".format(torch.__version__)
            torch = None
        else:
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.benchmark = True
            out["torch"] = "PyTorch {} on {}".format(
                torch.__version__, "cuda" if torch.cuda.is_available() else "cpu")
            out["torch_settings"] = "float32, TF32 off, cudnn.benchmark on"
    except ImportError:
        out["torch"] = "PyTorch not installed: its side is skipped"
    default = blas.BACKEND
    routes = [default] + (["numba"] if default == "cublas" else [])
    out["routes"] = {"default": default, "cublas_unavailable": cublas.unavailable_reason()}
    save()
    ctx = get_extension_context("cudnn")
    torch_sync = (lambda: torch.cuda.synchronize()) if torch is not None and \
        torch.cuda.is_available() else (lambda: None)
    out["done"] = []
    fast = os.environ.get("NNABLA_JIT_CUDA_FAST", "1") != "0"
    out["fast"] = fast
    for i, item in enumerate(args.bench):
        name, _, route = item.partition(":")
        route = default if route in ("", "default") else route
        key = route + ("" if fast else "_fast_off")
        if time.time() >= deadline:
            break
        cap = time.time() + max((deadline - time.time()) / (len(args.bench) - i) *
                                (1.5 if route == default else 1.0), 1)
        cap = min(cap, deadline)
        out["current"] = item
        save()
        if os.environ.get("GPU_CHECK_CRASH_IN") == item:   # tests/test_gpu_check.py: recovery
            os._exit(9)
        r = out["results"].setdefault(name, {"title": gpu_workloads.TITLES.get(name, name),
                                             "size": size})
        if route == default and torch is not None and fast and "torch" not in r:
            r["torch"] = _attempt(lambda: _measure(gpu_workloads.torch_step(name, size), torch_sync,
                                                   time.time() + (cap - time.time()) * 0.35,
                                                   args.simulate))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            save()
        try:
            previous = blas.use_backend(route)
        except ImportError as e:
            r[key] = {"error": str(e)}
            continue
        switched = fast and route == default and name in SWITCH_BENCH
        try:
            steps = []

            def ours():
                with nn.context_scope(ctx):
                    steps.append(gpu_workloads.nnabla_jit_step(name, size))
                share = (1 - SWITCH_SHARE) if switched else 1.0
                return _measure(steps[0], cuda.synchronize,
                                time.time() + (cap - time.time()) * share, args.simulate)
            r[key] = _attempt(ours)
            for i_off, flag in enumerate(SWITCHED if switched and steps else ()):
                r["{}_no_{}".format(route, flag.lower())] = _attempt(lambda: _switched_off(
                    flag, lambda: _measure(
                        steps[0], cuda.synchronize,
                        time.time() + (cap - time.time()) / (len(SWITCHED) - i_off),
                        args.simulate)))
            out["packing"] = dict(device.PACKING_STATS)
        finally:
            blas.use_backend(previous)
            nn.clear_parameters()
            gc.collect()
            device.free_pool()
        _ratios(r)
        out["done"].append(item)
        save()
        errors = " ".join(str(v.get("error", "")) for v in r.values() if isinstance(v, dict))
        if "CUDA_ERROR" in errors or "cudaError" in errors or "CUDA error" in errors:
            return 3   # the context may be unusable: the orchestrator goes on in a new process
    out["current"] = None
    save()
    return 0


def _switched_off(flag, measure):
    """``measure()`` with the speed-up ``flag`` (a module flag of nnabla_jit.cuda_ops, read at
    every launch) off, as its NNABLA_JIT_CUDA_<flag>=0 would have it, then as it was."""
    import importlib
    module = importlib.import_module("nnabla_jit.cuda_ops." + SWITCH_MODULES[flag])
    before = getattr(module, flag)
    setattr(module, flag, False)
    try:
        return measure()
    finally:
        setattr(module, flag, before)


def _switch_keys(r):
    """The keys of ``r`` measured with one speed-up off (``<route>_no_<switch>``)."""
    return [k for k in r if "_no_" in k and isinstance(r[k], dict)]


def _ratios(r):
    """PyTorch's time over ours, per route measured (>= 1: as fast as PyTorch or faster)."""
    for k in ROUTE_KEYS + tuple(_switch_keys(r)):
        if k in r and "ms_per_step" in r[k] and "ms_per_step" in (r.get("torch") or {}):
            r["ratio_" + k] = r["torch"]["ms_per_step"] / r[k]["ms_per_step"]


def worker_profile(args):
    """cProfile ``PROFILE_STEPS`` steps of each workload of ``--bench`` under a cudnn context
    (after two steps that compile and fill the pool); the top functions by own time and by
    cumulative time, the device copies and allocations per step, into ``profile.txt``."""
    import cProfile
    import gc
    import io
    import pstats
    sys.path.insert(0, HERE)
    import gpu_workloads
    import nnabla_jit as nn
    from nnabla_jit.cuda_ops import device
    from nnabla_jit.ext_utils import get_extension_context
    cuda = device.load()
    device.packing_driver()
    out = {"summary": {}}
    size = "tiny" if args.simulate else "full"
    steps, warm = (1, 1) if args.simulate else (PROFILE_STEPS, 2)
    path = os.path.join(args.out, "profile.txt")
    texts = []
    for name in args.bench:
        try:
            with nn.context_scope(get_extension_context("cudnn")):
                step = gpu_workloads.nnabla_jit_step(name, size)
            for _ in range(warm):   # compiles, fills the pool
                step()
            cuda.synchronize()
            device.reset_stats()
            prof = cProfile.Profile()
            t0 = time.perf_counter()
            prof.enable()
            for _ in range(steps):
                step()
            cuda.synchronize()
            prof.disable()
            ms = (time.perf_counter() - t0) / steps * 1e3
            per_step = {k: v / steps for k, v in device.stats().items()}
            text = io.StringIO()
            text.write("===== {} ({}): {} steps under cProfile, {:.2f} ms per step (profiler "
                       "included); FAST={}\ndevice.stats() per step: {}\npacked launches: {}"
                       "\n\n".format(name, gpu_workloads.TITLES[name], steps, ms,
                                    os.environ.get("NNABLA_JIT_CUDA_FAST", "1"), per_step,
                                    device.PACKING_STATS))
            stats = pstats.Stats(prof, stream=text)
            stats.sort_stats("tottime").print_stats(40)
            stats.sort_stats("cumulative").print_stats(25)
            texts.append(text.getvalue())
            out["summary"][name] = {"ms_per_step_profiled": round(ms, 2), "stats": per_step}
        except Exception:
            texts.append("===== {}: failed\n{}\n".format(name, traceback.format_exc()))
            out["summary"][name] = {"error": traceback.format_exc().strip().splitlines()[-1]}
        finally:
            nn.clear_parameters()
            gc.collect()
            device.free_pool()
        _write_atomic(path, "\n".join(texts))
        _write_atomic(args.result, json.dumps(out, indent=1, default=str))
    return 0


def _measure(step, sync, cap, simulate, min_window=0.25, windows=3, max_steps=256):
    """ms per step: the first step (compiles) timed alone, then windows of repeated steps,
    doubled until one lasts ``min_window`` s, the best of ``windows`` of them; stops at the
    epoch time ``cap`` (between steps) with what it has."""
    t0 = time.perf_counter()
    step()
    sync()
    res = {"first_step_s": round(time.perf_counter() - t0, 3)}
    if simulate:   # a dry run: one more step, timed
        windows, min_window = 1, 0.0
    if time.time() >= cap:
        res["capped"] = "after the first step"
        return res
    if not simulate:
        step()   # the second step still fills the device pool
        sync()
    # host: the time to queue the window's steps (before the synchronisation); close to the
    # step time, the step is bound by Python and launches, not by the GPU
    n, best, rough, done, timed = 1, None, None, 0, 0
    while done < windows and time.time() < cap:
        t = time.perf_counter()
        for _ in range(n):
            step()
        queued = time.perf_counter() - t
        sync()
        dt = time.perf_counter() - t
        timed += n
        if dt >= min_window or n >= max_steps:
            if best is None or dt / n < best[0]:
                best = (dt / n, queued / n)
            done += 1
        else:   # too short to time well: kept only if the cap ends the doubling
            rough = (dt / n, queued / n)
            n = min(max_steps, n * 2)
    best = rough if best is None else best
    if best is not None:
        res.update(ms_per_step=best[0] * 1e3, host_ms_per_step=best[1] * 1e3,
                   steps_per_s=1.0 / best[0], timed_steps=timed, windows=done)
    if done < windows:
        res["capped"] = "{} of {} windows".format(done, windows)
    return res


# ============================================================================ reports
def parse_junit(path):
    if not os.path.exists(path):
        return {"junit": "missing (pytest stopped before writing it)"}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return {"junit": "unreadable: {}".format(e)}
    suites = [root] if root.tag == "testsuite" else list(root)
    totals = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors",
                                                                  "skipped")}
    files, failed, slowest = {}, [], []
    for case in root.iter("testcase"):
        module = case.get("classname", "").split(".")
        name = module[2] if len(module) > 2 else ".".join(module)
        f = files.setdefault(name, {"tests": 0, "failed": 0, "skipped": 0, "time_s": 0.0})
        f["tests"] += 1
        f["time_s"] = round(f["time_s"] + float(case.get("time", 0) or 0), 2)
        slowest.append((float(case.get("time", 0) or 0), str(case.get("name"))))
        for tag in ("failure", "error"):
            bad = case.find(tag)
            if bad is not None:
                f["failed"] += 1
                message = (bad.get("message") or bad.text or "").strip().splitlines()
                failed.append({"test": "{}::{}".format(case.get("classname"), case.get("name")),
                               "kind": tag, "message": (message[0] if message else "")[:300]})
                break
        else:
            if case.find("skipped") is not None:
                f["skipped"] += 1
    totals.update(files=files, failed=failed[:200], slowest=sorted(slowest, key=lambda t: t[0], reverse=True)[:10])
    return totals


def progress_counts(path):
    """Outcomes counted from the last pytest run's ``-v`` lines in ``path`` (pytest-xdist:
    ``[gw3] [ 12%] PASSED tests/...::test``; plain: ``tests/...::test PASSED [ 12%]``), for a
    run stopped before writing its junit report."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return {}
    text = text[text.rfind("\n===== "):]
    outcomes = {}   # test id -> its last outcome (the short summary repeats the failures)
    for line in text.splitlines():
        words = line.split()
        for outcome in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"):
            if outcome in words and any("::" in w for w in words):
                test = next(w for w in words if "::" in w)
                outcomes[test] = {"XFAIL": "skipped", "XPASS": "passed"}.get(outcome,
                                                                             outcome.lower())
                break
    counts = {k: sum(1 for v in outcomes.values() if v == k)
              for k in ("passed", "failed", "error", "skipped")}
    failed = [{"test": t, "kind": v, "message": "(from -v)"} for t, v in outcomes.items()
              if v in ("failed", "error")]
    return {"tests": len(outcomes), "failures": counts["failed"],
            "errors": counts["error"], "skipped": counts["skipped"], "failed": failed[:200],
            "counted_from": "pytest -v lines (no junit report)"}


def _brief(value, width=240):
    """``value`` for a report line: dicts without their tracebacks, long strings cut."""
    if isinstance(value, dict):
        return {k: _brief(v, width) for k, v in value.items() if k != "traceback"}
    if isinstance(value, str) and len(value) > width:
        return value[:width] + "..."
    return value


def _bench_line(r):
    def ms(key):
        v = r.get(key, {})
        if "ms_per_step" in v:
            return "{:.2f} ms".format(v["ms_per_step"])
        return v.get("error", v.get("capped", "-")) if v else "-"
    parts = ["torch {}".format(ms("torch")), "cublas {}".format(ms("cublas")),
             "cublas FAST=0 {}".format(ms("cublas_fast_off")), "numba {}".format(ms("numba"))]
    if "numba_fast_off" in r:
        parts.append("numba FAST=0 {}".format(ms("numba_fast_off")))
    for key in _switch_keys(r):
        parts.append("{} {}".format(key, ms(key)))
    for key in ("ratio_" + k for k in ROUTE_KEYS):
        if key in r:
            parts.append("{} {:.2f}x".format(key, r[key]))
    if "error" in r:
        parts.append("error: " + str(r["error"]))
    return "; ".join(parts)


def render_markdown(results):
    meta, sec = results["meta"], results["sections"]
    lines = ["# nnabla_jit device check", "",
             "{} run, started {}, {} s of a {} s budget. Command: `{}`".format(
                 "Simulator" if meta["simulate"] else "GPU", meta["started"],
                 meta.get("elapsed_s"), meta["budget_s"], meta["command"]), ""]
    env = sec.get("env")
    if env:
        probe = env.get("probe", {})
        gpu = probe.get("gpu", {})
        lines += ["## Environment", "",
                  "- status: {}".format(env.get("status")),
                  "- GPU: {} (compute capability {}, {} bytes), compute mode {}".format(
                      gpu.get("name"), gpu.get("compute_capability"), gpu.get("total_memory"),
                      probe.get("compute_mode") or "-"),
                  "- Python {}; {}".format(probe.get("python"), ", ".join(
                      "{} {}".format(k, v) for k, v in probe.get("versions", {}).items())),
                  "- blas route by default: {} (cuBLAS unavailable because: {})".format(
                      probe.get("blas_backend"), probe.get("cublas_unavailable")),
                  "- CuPy on a numba device array: {}".format(
                      _brief(probe.get("cupy_on_numba_array"))),
                  "- blas.matmul per route vs NumPy: {}".format(_brief(probe.get("matmul_routes"))),
                  "- tiny graph on the device vs NumPy: {} ({} s, compiling)".format(
                      _brief(probe.get("tiny_graph")), probe.get("tiny_graph_s")),
                  "- worker error: {}".format(_brief(probe.get("error"), 2000)),
                  "- kernel cache: {} (second probe {} s, {} cache files)".format(
                      env.get("kernel_cache"), env.get("cached_tiny_graph_s"),
                      env.get("cache_files")), ""]
    cor = sec.get("correctness")
    if cor:
        lines += ["## Correctness (tests/cuda on the device)", ""]
        for key in ("default", "numba"):
            run = cor.get(key)
            if not run:
                continue
            lines += ["### route: {} ({}, {} s, {} xdist workers)".format(
                run.get("route"), run.get("status"), run.get("elapsed_s"), run.get("workers")), "",
                "{} tests, {} failures, {} errors, {} skipped{}".format(
                    run.get("tests"), run.get("failures"), run.get("errors"), run.get("skipped"),
                    "; " + str(run.get("junit")) if run.get("junit") else ""), ""]
            if run.get("counted_from"):
                lines += ["(counted from {})".format(run["counted_from"]), ""]
            if run.get("files"):
                lines += ["| test file | tests | failed | skipped | time (s) |",
                          "|---|---:|---:|---:|---:|"]
                for name, f in sorted(run["files"].items()):
                    lines.append("| {} | {} | {} | {} | {:.1f} |".format(
                        name, f["tests"], f["failed"], f["skipped"], f["time_s"]))
                lines.append("")
            for bad in run.get("failed", [])[:60]:
                lines.append("- {} **{}**: {}".format(bad["test"], bad["kind"],
                                                      bad["message"].replace("|", "/")))
            lines.append("")
        if cor.get("numba_note"):
            lines += [cor["numba_note"], ""]
    dig = sec.get("digits")
    if dig:
        lines += ["## Digits CNN, CPU vs cudnn context", "",
                  "- {} ({} steps, batch {}, data: {})".format(dig.get("status"), dig.get("steps"),
                                                               dig.get("batch"), dig.get("data")),
                  "- losses: first (cpu, gpu) {}, last {}".format(dig.get("first_loss"),
                                                                  dig.get("last_loss")),
                  "- max abs diff {}, max rel diff {} (first 10 steps: {}): **{}**".format(
                      dig.get("max_abs_diff"), dig.get("max_rel_diff"),
                      dig.get("max_rel_diff_first_10"), dig.get("verdict")),
                  "- time: CPU {} s, GPU {} s (compiles included)".format(dig.get("cpu_s"),
                                                                          dig.get("gpu_s")), ""]
        if dig.get("error"):
            lines += ["error: {}".format(dig["error"]), ""]
    bench = sec.get("bench")
    if bench:
        lines += ["## Benchmarks (ms per step, best window; ratio = PyTorch time / ours, "
                  ">= 1 means faster than PyTorch; host: ms to queue a step before the "
                  "synchronisation, about the step time when Python and launches bound it)", "",
                  "{}; {}; routes {}".format(bench.get("torch"), bench.get("torch_settings"),
                                             bench.get("routes")), "",
                  "nnabla_jit's columns run with the CUDA speed-ups on (NNABLA_JIT_CUDA_FAST=1, "
                  "the default) unless marked FAST=0 (the path before them).", "",
                  "| workload | PyTorch | nnabla_jit cuBLAS | ratio | default route, FAST=0 | "
                  "ratio | nnabla_jit numba tiled | ratio | first step (compile) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for name, r in bench.get("results", {}).items():
            def cell(key):
                v = r.get(key) or {}
                if "ms_per_step" in v:
                    return "{:.2f} (host {:.2f})".format(v["ms_per_step"],
                                                         v.get("host_ms_per_step", float("nan")))
                if "error" in v:
                    return "error"
                return v.get("capped", "-") if v else "-"
            first = ", ".join("{} {}s".format(k, r[k]["first_step_s"]) for k in
                              ("torch",) + ROUTE_KEYS if "first_step_s" in (r.get(k) or {}))

            off = "cublas_fast_off" if "cublas_fast_off" in r else "numba_fast_off"

            def ratio(key):
                return "{:.2f}x".format(r["ratio_" + key]) if "ratio_" + key in r else "-"
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                r.get("title", name) + (" (TINY shapes)" if r.get("size") == "tiny" else ""),
                cell("torch"), cell("cublas"), ratio("cublas"), cell(off), ratio(off),
                cell("numba"), ratio("numba"), first))
        lines.append("")
        errors = [(n, k, r[k]["error"]) for n, r in bench.get("results", {}).items()
                  for k in ("torch",) + ROUTE_KEYS if isinstance(r.get(k), dict)
                  and "error" in r[k]]
        errors += [(n, "worker" + suffix, r[key]) for n, r in bench.get("results", {}).items()
                   for key, suffix in (("error", ""), ("error_fast_off", " (FAST=0)"))
                   if isinstance(r.get(key), str)]
        for n, k, e in errors:
            lines.append("- {} / {}: {}".format(n, k, e))
        for run in bench.get("runs", []):
            lines.append("- bench worker (FAST={}): {} ({} s){}".format(
                run.get("fast", "1"), run["status"], run.get("elapsed_s"),
                ": " + run["error"] if run.get("error") else ""))
        lines.append("")
        lines += _switch_table(bench)
    prof = sec.get("profile")
    if prof:
        lines += ["## Host profile (cProfile, speed-ups on)", "",
                  "- {} ({} s), in {}: {}".format(prof.get("status"), prof.get("elapsed_s"),
                                                  prof.get("file"), prof.get("summary")), ""]
    for name, s in sec.items():
        if isinstance(s, dict) and s.get("error") and name != "digits":
            lines += ["## {}: orchestrator error".format(name), "", "```", str(s["error"]), "```",
                      ""]
    return "\n".join(lines)


def _switch_table(bench):
    """The speed-ups one at a time: ms per step (host ms) with each off, next to all on and
    FAST=0 (all off), on the workloads measured so (SWITCH_BENCH)."""
    rows = [(name, r) for name, r in bench.get("results", {}).items() if _switch_keys(r)]
    if not rows:
        return []
    route = _switch_keys(rows[0][1])[0].split("_no_")[0]
    keys = [route] + ["{}_no_{}".format(route, f.lower()) for f in SWITCHED] + \
        [route + "_fast_off"]
    heads = ["all on"] + ["{}=0".format(f) for f in SWITCHED] + ["FAST=0 (all off)"]
    lines = ["## The speed-ups one at a time (NNABLA_JIT_CUDA_<switch>=0, in the process of the "
             "default column; ms per step, host ms to queue it)", "",
             "packed launches: {}".format(bench.get("packing")), "",
             "| workload | PyTorch | " + " | ".join(heads) + " |",
             "|---|" + "---:|" * (len(heads) + 1)]
    for name, r in rows:
        cells = []
        for key in ["torch"] + keys:
            v = r.get(key) or {}
            cells.append("{:.2f} ({:.2f})".format(v["ms_per_step"], v.get(
                "host_ms_per_step", float("nan"))) if "ms_per_step" in v else
                ("error" if "error" in v else v.get("capped", "-") if v else "-"))
        lines.append("| {} | {} |".format(r.get("title", name), " | ".join(cells)))
    return lines + [""]


def summary_text(results):
    sec = results["sections"]
    lines = ["==== gpu_check summary ({} s) ====".format(results["meta"].get("elapsed_s"))]
    env = sec.get("env", {})
    probe = env.get("probe", {})
    lines.append("env: {} | GPU {} | blas default {} | cupy interop {} | matmul routes {} | "
                 "tiny graph {} | kernel cache {}".format(
                     env.get("status"), _brief(probe.get("gpu", {}).get("name")),
                     probe.get("blas_backend"), _brief(probe.get("cupy_on_numba_array"), 160),
                     _brief(probe.get("matmul_routes"), 160), _brief(probe.get("tiny_graph"), 160),
                     env.get("kernel_cache")))
    cor = sec.get("correctness", {})
    for key in ("default", "numba"):
        run = cor.get(key)
        if run:
            lines.append("tests ({}): {} tests, {} failures, {} errors, {} skipped, {} in {} s{}"
                         .format(run.get("route"), run.get("tests"), run.get("failures"),
                                 run.get("errors"), run.get("skipped"), run.get("status"),
                                 run.get("elapsed_s"),
                                 " | " + run["counted_from"] if run.get("counted_from") else ""))
            for bad in run.get("failed", [])[:15]:
                lines.append("  FAIL {} : {}".format(bad["test"].replace("tests.cuda.", ""),
                                                     bad["message"][:120]))
            if len(run.get("failed", [])) > 15:
                lines.append("  ... {} more in results.md".format(len(run["failed"]) - 15))
    dig = sec.get("digits")
    if dig:
        lines.append("digits: {} | {} steps | max abs {} | max rel {} | {}{}".format(
            dig.get("status"), dig.get("steps"), dig.get("max_abs_diff"), dig.get("max_rel_diff"),
            dig.get("verdict"), " | " + dig["error"].strip().splitlines()[-1][:200]
            if isinstance(dig.get("error"), str) else ""))
    bench = sec.get("bench")
    if bench:
        lines.append("bench: {}".format(bench.get("torch")))
        lines.append("packed launches: {}".format(bench.get("packing")))
        for run in bench.get("runs", []):
            if run.get("error"):
                lines.append("  worker {}: {}".format(run["status"], run["error"]))
        for name, r in bench.get("results", {}).items():
            lines.append("  {}: {}".format(name, _bench_line(r)))
    prof = sec.get("profile")
    if prof:
        lines.append("profile: {} -> {}: {}".format(prof.get("status"), prof.get("file"),
                                                    prof.get("summary")))
    for name, s in sec.items():
        if isinstance(s, dict) and isinstance(s.get("error"), str) and name != "digits":
            lines.append("{}: ORCHESTRATOR ERROR {}".format(name, s["error"].splitlines()[-1]))
    return "\n".join(lines)


# ============================================================================ helpers
def _write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _wait_or_stop(proc, timeout, grace=20):
    """Wait for ``proc`` (a session leader); past ``timeout`` interrupt its group (pytest then
    writes its report), and kill it ``grace`` s later."""
    try:
        rc = proc.wait(timeout=timeout)
        return "ok" if rc == 0 else "exit code {}".format(rc)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=grace)
        return "stopped at the time cap ({:.0f} s), interrupted".format(timeout)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return "stopped at the time cap ({:.0f} s), killed".format(timeout)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for the results and logs")
    p.add_argument("--simulate", action="store_true",
                   help="numba's CUDA simulator, tiny shapes and a subset (a dry run)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run (default 420; 900 with --simulate, whose "
                        "simulated GPU threads are Python threads)")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help="comma-separated subset of " + ",".join(SECTIONS))
    p.add_argument("--workers", type=int, default=12, help="pytest-xdist workers")
    p.add_argument("--test-timeout", type=int, default=180, help="pytest-timeout per test (s)")
    p.add_argument("--digits-steps", type=int, default=0)
    p.add_argument("--digits-batch", type=int, default=32)
    p.add_argument("--bench", nargs="*", help="benchmarks to run (default: all of {})".format(
        ", ".join(BENCHMARKS)))
    p.add_argument("--profile", action="store_true",
                   help="after the bench passes, cProfile {} steps of {} on the GPU into "
                        "profile.txt".format(PROFILE_STEPS, " and ".join(PROFILED)))
    p.add_argument("--bench-deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = [b for b in args.bench or () if b.partition(":")[0] not in BENCHMARKS]
    if unknown and not args.worker:
        p.error("--bench: unknown {} (known: {})".format(unknown, ", ".join(BENCHMARKS)))
    if args.budget is None:
        args.budget = 900.0 if args.simulate else 420.0
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        p.error("--sections: unknown {} (known: {})".format(unknown, ", ".join(SECTIONS)))
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.simulate:   # before anything imports numba
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if args.worker:
        sys.path.insert(0, ROOT)
        try:
            workers = {"env": worker_env, "digits": worker_digits, "bench": worker_bench,
                       "profile": worker_profile}
            return workers[args.worker](args)
        except Exception:
            traceback.print_exc()
            current = _read_json(args.result) or {}
            current["error"] = traceback.format_exc()[-4000:]
            _write_atomic(args.result, json.dumps(current, indent=1, default=str))
            return 1
    Check(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
