"""The README: its supported-ops table is current, its snippets run, its links resolve."""
import importlib.util
import os
import re
import subprocess
import sys

from nnabla_jit.utils import inspection

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")


def test_supported_ops_table_is_current():
    assert inspection.readme_section(README) == inspection.registry_table(markdown=True).strip(), \
        "README.md is stale: run python -m nnabla_jit.utils.inspection --readme README.md"


def test_every_table_function_is_registered():
    rows = inspection.op_status()
    missing = [r["name"] for r in rows if r["category"] != "internal" and not r["forward"]]
    assert missing == []


def _python_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_gradient_checking_snippet_runs_as_printed_on_an_empty_cache(tmp_path):
    # A newcomer pastes the snippet into a file and runs it: it must import what it uses and
    # not trip hypothesis' default 200 ms deadline while the first example compiles kernels.
    # Its own process: no conftest hypothesis profile, empty kernel cache.
    with open(README) as f:
        snippet = next(b for b in _python_blocks(f.read()) if "check_function" in b)
    code = snippet + "\ntest_my_layer()\nprint('snippet ok')\n"
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "HYPOTHESIS_PROFILE")}
    env.update(NNABLA_JIT_CACHE_DIR=str(tmp_path / "empty_cache"), PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "snippet ok" in done.stdout


def test_readme_links_stay_inside_the_repository():
    with open(README) as f:
        targets = re.findall(r"\]\(([^)]+)\)", f.read())
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+://", t) and not t.startswith("#")]
    assert local
    for target in local:
        path = os.path.normpath(os.path.join(REPO, target))
        assert path.startswith(REPO + os.sep), "README links outside the repository: " + target
        assert os.path.exists(path), "README links a missing file: " + target


def test_examples_write_into_an_ignored_folder_by_default():
    with open(os.path.join(REPO, ".gitignore")) as f:
        assert "/out/" in f.read().split()
    spec = importlib.util.spec_from_file_location(
        "digits_train", os.path.join(REPO, "examples", "digits", "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert os.path.normpath(module.OUT_DIR).startswith(os.path.join(REPO, "out") + os.sep)
    for name in ("digits/train.py", "distributed/train.py", "export_onnx.py"):
        with open(os.path.join(REPO, "examples", name)) as f:
            source = f.read()
        assert '"out"' in source, name + " does not default to the ignored out/ folder"
