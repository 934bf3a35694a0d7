"""benchmarks/gpu_check.py, the device check: its report helpers here (fast), and the whole
script under numba's simulator in the slow step (tiny shapes), so the command prepared for a
GPU machine cannot rot."""
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "gpu_check.py")


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1"
failures="1" skipped="1" tests="4" time="3.0">
<testcase classname="tests.cuda.test_cuda_conv" name="test_a" time="1.5"/>
<testcase classname="tests.cuda.test_cuda_conv" name="test_b" time="0.5"><failure
message="AssertionError: Not equal to tolerance">trace</failure></testcase>
<testcase classname="tests.cuda.test_cuda_ops" name="test_c" time="0.2"><error message="boom">
trace</error></testcase>
<testcase classname="tests.cuda.test_cuda_ops" name="test_d" time="0.1"><skipped message="s"/>
</testcase></testsuite></testsuites>"""


def test_parse_junit_counts_files_and_failures(tmp_path):
    gc = _module()
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    r = gc.parse_junit(str(path))
    assert (r["tests"], r["failures"], r["errors"], r["skipped"]) == (4, 1, 1, 1)
    assert r["files"]["test_cuda_conv"] == {"tests": 2, "failed": 1, "skipped": 0, "time_s": 2.0}
    assert r["files"]["test_cuda_ops"]["failed"] == r["files"]["test_cuda_ops"]["skipped"] == 1
    assert [f["test"] for f in r["failed"]] == ["tests.cuda.test_cuda_conv::test_b",
                                                "tests.cuda.test_cuda_ops::test_c"]
    assert r["failed"][0]["message"].startswith("AssertionError")
    assert "missing" in gc.parse_junit(str(tmp_path / "absent.xml"))["junit"]


def test_a_process_past_its_time_is_stopped():
    gc = _module()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    t0 = time.monotonic()
    status = gc._wait_or_stop(proc, 0.5, grace=5)
    assert "stopped at the time cap" in status and time.monotonic() - t0 < 30
    assert proc.poll() is not None


def test_measure_times_windows_and_stops_at_the_cap():
    gc = _module()
    calls = []
    r = gc._measure(lambda: calls.append(time.sleep(0.01)), lambda: None, time.time() + 5,
                    False, min_window=0.05, windows=2)
    assert r["windows"] == 2 and 8 < r["ms_per_step"] < 200 and len(calls) == r["timed_steps"] + 2
    assert 0 < r["host_ms_per_step"] <= r["ms_per_step"]
    capped = gc._measure(lambda: time.sleep(0.02), lambda: None, time.time(), False)
    assert capped["capped"] == "after the first step" and "ms_per_step" not in capped


def test_reports_render_partial_results():
    """A run cut short (a section missing, a worker's error) still gives a table and a summary."""
    gc = _module()
    mlp = {"title": "MLP", "torch": {"ms_per_step": 2.0, "host_ms_per_step": 0.5},
           "cublas": {"ms_per_step": 4.0, "host_ms_per_step": 3.9}, "ratio_cublas": 0.5,
           "numba": {"error": "KeyError: 1"}}
    results = {"meta": {"simulate": False, "budget_s": 420, "started": "now", "command": "x",
                        "elapsed_s": 1},
               "sections": {"env": {"status": "timed out after 40 s", "probe": {}},
                            "bench": {"results": {"mlp": mlp},
                                      "runs": [{"status": "ok", "elapsed_s": 3}]}}}
    text = gc.render_markdown(results)
    assert "| MLP | 2.00 (host 0.50) | 4.00 (host 3.90) | 0.50x | - | - | error | - |" in text
    assert "KeyError: 1" in text
    assert "0.50x" in gc.summary_text(results)


def test_the_switches_table_shows_each_speed_up_off():
    gc = _module()
    r = {"title": "LeNet", "torch": {"ms_per_step": 2.0, "host_ms_per_step": 1.0},
         "cublas": {"ms_per_step": 4.0, "host_ms_per_step": 3.5},
         "cublas_no_packed_launch": {"ms_per_step": 6.0, "host_ms_per_step": 5.5},
         "cublas_no_view_cache": {"error": "boom"},
         "cublas_fast_off": {"ms_per_step": 9.0, "host_ms_per_step": 8.5}}
    gc._ratios(r)
    assert r["ratio_cublas_no_packed_launch"] == pytest.approx(2.0 / 6.0)
    results = {"meta": {"simulate": False, "budget_s": 420, "started": "now", "command": "x",
                        "elapsed_s": 1},
               "sections": {"bench": {"results": {"lenet": r, "mlp": {"title": "MLP"}},
                                      "runs": [], "packing": {"packed": 3, "reason": None}}}}
    text = gc.render_markdown(results)
    assert ("| LeNet | 2.00 (1.00) | 4.00 (3.50) | 6.00 (5.50) | error | - | - | - | "
            "9.00 (8.50) |" in text), text
    assert "| MLP |" not in text.split("one at a time")[1]
    assert "'packed': 3" in gc.summary_text(results)
    assert "cublas_no_packed_launch 6.00 ms" in gc.summary_text(results)


def test_bad_sections_are_refused(capsys):
    gc = _module()
    with pytest.raises(SystemExit, match="2"):
        gc.parse_args(["--out", "x", "--sections", "env,nope"])
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_the_device_check_runs_under_the_simulator(tmp_path):
    """The whole script, as the GPU machine runs it, under numba's simulator: every section
    gives a result (about 3 minutes on 2 cores: the simulator runs GPU threads in Python). The
    benchmark worker is made to die in ResNet-18: the orchestrator records it and goes on."""
    out = tmp_path / "gc"
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["GPU_CHECK_CRASH_IN"] = "resnet18:default"
    proc = subprocess.run([sys.executable, SCRIPT, "--simulate", "--profile", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "gpu_check summary" in proc.stdout
    results = json.loads((out / "results.json").read_text())["sections"]
    assert results["env"]["status"] == "ok"
    assert results["env"]["probe"]["blas_backend"] == "numba"
    assert "error" not in results["env"]["probe"]["tiny_graph"]
    tests = results["correctness"]["default"]
    assert tests["tests"] > 0 and tests["failures"] == tests["errors"] == tests["skipped"] == 0
    assert results["digits"]["status"] == "ok"
    assert np.isfinite(results["digits"]["max_rel_diff"])
    bench = results["bench"]["results"]
    assert set(bench) == {"elementwise", "resnet18", "resnet50_b1"}
    assert bench.pop("resnet18")["error"] == "resnet18:default: worker exit code 9"
    # the default route with NNABLA_JIT_CUDA_FAST=1, then =0: the worker dies in each
    assert [run["status"] for run in results["bench"]["runs"]] == ["exit code 9", "ok"] * 2
    assert [run["fast"] for run in results["bench"]["runs"]] == ["1", "1", "0", "0"]
    for name, r in bench.items():
        assert r["numba"]["ms_per_step"] > 0, (name, r)
        assert r["numba_fast_off"]["ms_per_step"] > 0, (name, r)   # NNABLA_JIT_CUDA_FAST=0
        has_torch = importlib.util.find_spec("torch") is not None
        assert ("ms_per_step" in r.get("torch", {})) == has_torch, (name, r)
    for flag in ("packed_launch", "view_cache", "gemm_cache", "fused_inference",
                 "fused_statistics"):   # switched off one by one in the first process
        assert bench["resnet50_b1"]["numba_no_" + flag]["ms_per_step"] > 0
    assert "simulator" in results["bench"]["packing"]["reason"]
    if importlib.util.find_spec("torch") is None:
        assert "skipped" in results["bench"]["torch"]
    assert results["profile"]["status"] == "ok", results["profile"]
    assert "tottime" in (out / "profile.txt").read_text()
    assert len(list(out.iterdir())) <= 8   # what the device tool brings back
    for name in ("results.md", "gpu_check.log", "pytest.log", "junit.xml", "sections.log"):
        assert (out / name).stat().st_size > 0, name


def test_progress_counts_read_pytest_verbose_lines(tmp_path):
    """A pytest run stopped before its junit report is counted from its -v lines (the last
    run's only), with and without pytest-xdist."""
    gc = _module()
    log = tmp_path / "pytest.log"
    log.write_text("\n===== first run\ntests/cuda/test_a.py::test_old FAILED [ 50%]\n"
                   "\n===== second run\n"
                   "[gw0] [ 10%] PASSED tests/cuda/test_a.py::test_x \n"
                   "[gw1] [ 20%] FAILED tests/cuda/test_b.py::test_y[1-2] \n"
                   "tests/cuda/test_c.py::test_z SKIPPED (no GPU) [ 30%]\n"
                   "tests/cuda/test_c.py::test_w ERROR [ 40%]\n"
                   "FAILED tests/cuda/test_b.py - summary lines name no outcome word first\n")
    r = gc.progress_counts(str(log))
    assert (r["tests"], r["failures"], r["errors"], r["skipped"]) == (4, 1, 1, 1)
    assert [f["test"] for f in r["failed"]] == ["tests/cuda/test_b.py::test_y[1-2]",
                                                "tests/cuda/test_c.py::test_w"]
    log.write_text(log.read_text() + "FAILED tests/cuda/test_b.py::test_y[1-2] - AssertionError\n")
    assert gc.progress_counts(str(log))["failures"] == 1   # the short summary is no new test
