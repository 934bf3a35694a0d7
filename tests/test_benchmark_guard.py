"""The benchmark guard's arithmetic (benchmarks/run.py --check, --update-baseline) on made-up
figures: which ratios fail against a baseline, and what the baseline file keeps. Nothing is
measured or timed here."""
import importlib.util
import json
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def run():
    spec = importlib.util.spec_from_file_location("benchmarks_run", os.path.join(REPO, "benchmarks", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(ratios):
    return {"date": "2026-11-28", "commit": "abc", "machine": "test", "versions": {}, "load_average": (0, 0, 0),
            "rounds": 3, "steps_per_s": {}, "convergence": {}, "ratios": ratios}


def test_a_ratio_more_than_ten_percent_below_its_baseline_fails(run, capsys):
    baseline = {"ratios": {"lenet/torch": 1.0, "mlp/torch": 2.0, "convergence/lenet": 1.0}}
    failed = run.check(_result({"lenet/torch": 0.91, "mlp/torch": 1.79, "convergence/lenet": 0.5,
                                "tiny/torch": 0.1}), baseline)
    assert failed == ["convergence/lenet", "mlp/torch"]   # 9% below passes; new keys never fail
    assert "new (not in the baseline)" in capsys.readouterr().out


def test_a_second_run_that_compiles_fails_whatever_its_speed(run):
    result = _result({"convergence/lenet": 1.5})
    result["convergence"] = {"lenet": {"run_2_compiled": 0, "run_2_worker": True}}
    assert run.check(result, {"ratios": {"convergence/lenet": 1.0}}) == ["convergence/lenet (run 2 compiled)"]
    result["convergence"]["lenet"]["run_2_worker"] = False
    assert run.check(result, {"ratios": {"convergence/lenet": 1.0}}) == []


def test_a_better_ratio_passes(run):
    assert run.check(_result({"lenet/torch": 3.0}), {"ratios": {"lenet/torch": 1.0}}) == []


def test_update_baseline_merges_and_keeps_what_was_not_measured(run, tmp_path):
    path = str(tmp_path / "baseline.json")
    run.update_baseline(path, _result({"lenet/torch": 1.2, "resnet18/torch": 0.8}))
    run.update_baseline(path, _result({"lenet/torch": 1.5}))
    with open(path) as f:
        written = json.load(f)
    assert written["ratios"] == {"lenet/torch": 1.5, "resnet18/torch": 0.8}
    assert len(written["sittings"]) == 2
    assert run.check(_result({"resnet18/torch": 0.7}), run.load_baseline(path)) == ["resnet18/torch"]


def test_a_second_run_faster_than_fully_compiled_is_written_as_equal(run, tmp_path):
    # (on a loaded machine the serial stand-ins can beat the parallel kernels: noise, not a bar)
    path = str(tmp_path / "baseline.json")
    run.update_baseline(path, _result({"convergence/lenet": 1.3, "lenet/torch": 1.3}))
    assert run.load_baseline(path)["ratios"] == {"convergence/lenet": 1.0, "lenet/torch": 1.3}


def test_the_committed_baseline_names_known_workloads(run):
    ratios = run.load_baseline(run.BASELINE).get("ratios", {})
    assert ratios, "benchmarks/baseline.json is missing or empty"
    for key in ratios:
        name, other = key.split("/")
        if name == "convergence":
            assert other in run.cold_start.CONVERGE_STEPS
        else:
            assert name in run.WORKLOADS and other in run.builders(name), key
