"""``install_as_nnabla`` / ``python -m nnabla_jit.as_nnabla``: nnabla programs run unchanged,
and a real nnabla is never shadowed without ``force``."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import nnabla as nn
    import nnabla.functions as F
    import nnabla.parametric_functions as PF
    import nnabla.solvers as S
    import nnabla_ext.cpu
    from nnabla.testing import assert_allclose

    nn.set_default_context(nnabla_ext.cpu.context())
    x = nn.Variable.from_numpy_array(np.ones((2, 3)))
    y = F.sum(PF.affine(x, 2, name="fc"))
    solver = S.Sgd(0.5)
    solver.set_parameters(nn.get_parameters())
    y.forward(); solver.zero_grad(); y.backward(); before = float(y.d); solver.update()
    y.forward()
    assert float(y.d) < before
    assert_allclose(F.relu(nn.NdArray.from_numpy_array(np.array([-1.0, 2.0]))).data, [0, 2])
    print("ran", nn.__name__, nnabla_ext.cpu.context().backend, sys.argv[1:])
""")


def _run(args, env_path=None, cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env_path, REPO) if p)
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def test_module_runs_an_nnabla_script_with_its_arguments(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    r = _run(["-m", "nnabla_jit.as_nnabla", str(script), "--epochs", "3"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "ran nnabla_jit ['cpu:float'] ['--epochs', '3']" in r.stdout


def test_install_in_process_makes_nnabla_the_same_modules(tmp_path):
    code = ("import nnabla_jit; nnabla_jit.install_as_nnabla()\n"
            "import nnabla, nnabla.functions, nnabla.solver, nnabla_ext.cpu\n"
            "import nnabla_jit.functions\n"
            "assert nnabla is nnabla_jit and nnabla.functions is nnabla_jit.functions\n"
            "assert nnabla.solver.Adam is nnabla_jit.solvers.Adam\n"
            "print(nnabla_ext.cpu.context())\n")
    r = _run(["-c", code], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "cpu:float" in r.stdout


def test_a_real_nnabla_is_not_shadowed_without_force(tmp_path):
    fake = tmp_path / "site" / "nnabla"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    script = tmp_path / "prog.py"
    script.write_text("import nnabla\nprint('real' if getattr(nnabla, 'REAL', False) else 'jit')\n")
    site = str(tmp_path / "site")

    r = _run(["-m", "nnabla_jit.as_nnabla", str(script)], env_path=site, cwd=str(tmp_path))
    assert r.returncode == 2
    assert "a real nnabla is installed" in r.stderr and "--force" in r.stderr

    r = _run(["-c", "import nnabla_jit; nnabla_jit.install_as_nnabla()"], env_path=site,
             cwd=str(tmp_path))
    assert r.returncode != 0 and "NnablaInstalledError" in r.stderr

    r = _run(["-m", "nnabla_jit.as_nnabla", "--force", str(script)], env_path=site,
             cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "jit"


def test_usage_without_a_script():
    r = _run(["-m", "nnabla_jit.as_nnabla"])
    assert r.returncode == 2 and "usage" in r.stdout


@pytest.mark.parametrize("ext", ["nnabla_ext.nosuch"])
def test_unknown_extension_is_not_found(ext, tmp_path):
    r = _run(["-c", "import nnabla_jit; nnabla_jit.install_as_nnabla(); import " + ext],
             cwd=str(tmp_path))
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr


# ---------------------------------------------------------------- names nnabla binds over modules
with open(os.path.join(REPO, "tests", "fixtures", "nnabla_rebound_names.json")) as _f:
    REBOUND = json.load(_f)    # nnabla 1.39's, see tests/fixtures/make_rebound_names.py

CHECK_REBOUND = textwrap.dedent("""
    import importlib, json, sys, types
    names = json.loads(sys.argv[1])
    first = {}
    for full in names:          # `import nnabla.X as y` first, before anything else names X
        exec("import {} as y".format(full), first)
        first[full] = first["y"]
    for full, want in names.items():
        parent, _, child = full.rpartition(".")
        package = importlib.import_module(parent)
        jit_package = importlib.import_module("nnabla_jit" + parent[len("nnabla"):])
        scope = {}
        exec("from {} import {} as z".format(parent, child), scope)
        got = [first[full], scope["z"], getattr(package, child), getattr(jit_package, child)]
        assert all(g is got[0] for g in got), (full, got)
        assert not isinstance(got[0], types.ModuleType), (full, got[0])
        if want["type_module"] in ("builtins", "logging"):
            assert type(got[0]).__name__ == want["type_name"], (full, type(got[0]))
        # the submodule itself is still what sys.modules holds, as in nnabla
        assert isinstance(sys.modules[full], types.ModuleType), full
    print("ok", len(names))
""")


def test_fixture_lists_the_logger():
    assert "nnabla.logger" in REBOUND and REBOUND["nnabla.logger"]["type_name"] == "Logger"


def test_alias_gives_what_nnabla_binds_over_its_submodules(tmp_path):
    code = "import nnabla_jit; nnabla_jit.install_as_nnabla()\n" + CHECK_REBOUND
    r = _run(["-c", code, json.dumps(REBOUND)], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == str(len(REBOUND))


def test_script_logs_through_nnabla_logger(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import nnabla.logger as logger\nlogger.info('first line')\n"
                      "from nnabla import logger as again\nassert again is logger\n"
                      "import nnabla\nassert nnabla.logger is logger\nprint('logged')\n")
    r = _run(["-m", "nnabla_jit.as_nnabla", str(script)], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "logged" in r.stdout and "[nnabla][INFO]: first line" in r.stderr


# ---------------------------------------------------------------- the command line itself
def test_no_runpy_warning_at_start(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text("print('quiet')\n")
    r = _run(["-W", "error::RuntimeWarning", "-m", "nnabla_jit.as_nnabla", str(script)],
             cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "quiet\n" and "RuntimeWarning" not in r.stderr and "found in sys.modules" not in r.stderr


@pytest.mark.parametrize("what", ["missing", "directory", "module"])
def test_a_script_that_cannot_run_is_one_line(what, tmp_path):
    args = {"missing": [str(tmp_path / "nosuch.py")], "directory": [str(tmp_path)],
            "module": ["-m", "nosuch_package.train"]}[what]
    r = _run(["-m", "nnabla_jit.as_nnabla"] + args, cwd=str(tmp_path))
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("nnabla_jit.as_nnabla: ")
    assert ("nosuch" in lines[0]) or (str(tmp_path) in lines[0])


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_script_is_one_line(tmp_path):
    script = tmp_path / "secret.py"
    script.write_text("print(1)\n")
    script.chmod(0)
    r = _run(["-m", "nnabla_jit.as_nnabla", str(script)], cwd=str(tmp_path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "secret.py" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- values no forward computed
UNCOMPUTED = textwrap.dedent("""
    import numpy as np
    import nnabla as nn
    import nnabla.functions as F
    z = nn.Variable.from_numpy_array(np.ones((2, 3), np.float32), need_grad=True)
    h = F.tanh(z * 2)
    loss = F.sum(F.sin(h) + 1)
    loss.backward()                      # before any forward: nnabla reads a fresh buffer
    print("grad", z.g.ravel()[0])
    loss.forward(clear_buffer=True)
    print("freed", h.d.ravel()[0])       # nnabla: what its memory pool left there
""")


def test_as_nnabla_values_no_forward_computed_read_as_zeros_with_one_warning(tmp_path):
    script = tmp_path / "uncomputed.py"
    script.write_text(UNCOMPUTED)
    r = _run(["-m", "nnabla_jit.as_nnabla", str(script)], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "grad 2.0" in r.stdout and "freed 0.0" in r.stdout
    assert r.stderr.count("UncomputedReadWarning") == 1, r.stderr

    direct = tmp_path / "direct.py"    # the same program on nnabla_jit imported as itself
    direct.write_text(UNCOMPUTED.replace("import nnabla", "import nnabla_jit"))
    r = _run([str(direct)], cwd=str(tmp_path))
    assert r.returncode != 0 and "InputNotComputed" in r.stderr

    env_error = dict(os.environ, NNABLA_JIT_UNCOMPUTED_READS="error",
                     PYTHONPATH=REPO)
    r = subprocess.run([sys.executable, "-m", "nnabla_jit.as_nnabla", str(script)],
                       capture_output=True, text=True, env=env_error, cwd=str(tmp_path), timeout=300)
    assert r.returncode != 0 and "InputNotComputed" in r.stderr
