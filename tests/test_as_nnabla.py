"""``install_as_nnabla`` / ``python -m nnabla_jit.as_nnabla``: nnabla programs run unchanged,
and a real nnabla is never shadowed without ``force``."""
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
