"""The package's layers go one way (the import-linter contract in pyproject.toml), and the op
kernels and grad rules are not held together by function-local imports."""
import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "nnabla_jit")


def _lint(config):
    """Run lint-imports on ``config`` in a fresh interpreter importing this tree; (rc, output)."""
    pytest.importorskip("importlinter")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = "import sys; from importlinter.cli import lint_imports; " \
           "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
    done = subprocess.run([sys.executable, "-c", code, config], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def test_layers_contract_is_kept():
    rc, out = _lint(os.path.join(ROOT, "pyproject.toml"))
    assert rc == 0, out
    assert "KEPT" in out


def test_layers_contract_catches_an_upward_import(tmp_path):
    # The same checker on a contract that puts ops above the grad rules must report the
    # imports backward_function makes from ops: the contract test is not vacuous.
    config = tmp_path / "layers.toml"
    config.write_text('[tool.importlinter]\nroot_package = "nnabla_jit"\n\n'
                      '[[tool.importlinter.contracts]]\nname = "reversed"\ntype = "layers"\n'
                      'layers = ["nnabla_jit.ops", "nnabla_jit.backward_function"]\n')
    rc, out = _lint(str(config))
    assert rc != 0
    assert "nnabla_jit.backward_function is not allowed to import nnabla_jit.ops" in out


def _contract_layers(config_path):
    """The module names the layers contract of ``config_path`` puts in a layer."""
    try:
        import tomllib
    except ImportError:   # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(config_path, "rb") as f:
        config = tomllib.load(f)
    names = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers":
            for layer in contract["layers"]:
                names += [n.strip() for n in re.split(r"[:|]", layer) if n.strip()]
    return names


def _package_modules(folder, package):
    """Dotted names of every module and subpackage under ``folder`` (the package itself
    excluded), read from the files: nothing is imported."""
    found = []
    for dirpath, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if os.path.exists(os.path.join(dirpath, d, "__init__.py")))
        relative = os.path.relpath(dirpath, folder)
        here = package if relative == "." else package + "." + relative.replace(os.sep, ".")
        if here != package:
            found.append(here)
        found += [here + "." + name[:-3] for name in sorted(files)
                  if name.endswith(".py") and name != "__init__.py"]
    return found


def _modules_in_no_layer(modules, layers):
    return [m for m in modules if not any(m == n or m.startswith(n + ".") for n in layers)]


def test_every_module_is_in_a_layer():
    # A new module must be placed in the contract: one in no layer is checked by nothing.
    layers = _contract_layers(os.path.join(ROOT, "pyproject.toml"))
    modules = _package_modules(PACKAGE, "nnabla_jit")
    assert "nnabla_jit.cuda_ops.device" in modules and "nnabla_jit.runners" in modules
    assert len(modules) > 300
    assert not _modules_in_no_layer(modules, layers)


def test_a_module_in_no_layer_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub" / "inner").mkdir(parents=True)
    for path in ("__init__.py", "a.py", "b.py", "sub/__init__.py", "sub/c.py",
                 "sub/inner/__init__.py", "sub/inner/d.py"):
        (pkg / path).write_text("")
    (pkg / "data").mkdir()            # not a package: no __init__.py
    (pkg / "data" / "script.py").write_text("")
    modules = _package_modules(str(pkg), "pkg")
    assert sorted(modules) == ["pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "pkg.sub.inner",
                               "pkg.sub.inner.d"]
    assert _modules_in_no_layer(modules, ["pkg.a", "pkg.sub"]) == ["pkg.b"]
    assert _modules_in_no_layer(modules, ["pkg.a", "pkg.sub.inner", "pkg.b"]) == ["pkg.sub",
                                                                                   "pkg.sub.c"]


def test_graph_and_cuda_ops_do_not_import_each_other():
    # The executor reaches the CUDA device through runners.py's table only; cuda_ops builds on
    # the runner table and the buffer resolver, not on the executor.
    for path, banned in (("graph.py", r"cuda_ops"), ("fusion.py", r"cuda_ops"),
                         ("cuda_ops/__init__.py", r"\bgraph\b|\bfusion\b|\bfunction\b")):
        with open(os.path.join(PACKAGE, path)) as f:
            tree = ast.parse(f.read())
        imported = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert not [i for i in imported if re.search(banned, i)], (path, imported)


def _function_local_imports(folder):
    """(path, line, text) of every import statement inside a function or class body."""
    found = []
    for dirpath, _, files in os.walk(folder):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                source = f.read()
            lines = source.splitlines()
            tree = ast.parse(source)
            for top in tree.body:
                if isinstance(top, (ast.Import, ast.ImportFrom)):
                    continue
                for node in ast.walk(top):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        found.append((os.path.relpath(path, ROOT), node.lineno, lines[node.lineno - 1]))
    return found


def test_function_local_imports_are_few_and_explained():
    local = (_function_local_imports(os.path.join(PACKAGE, "ops"))
             + _function_local_imports(os.path.join(PACKAGE, "backward_function")))
    assert len(local) < 10, local
    unexplained = [x for x in local if not re.search(r"#\s*\S", x[2])]
    assert not unexplained, "function-local imports need a comment saying why: {}".format(unexplained)


def test_function_local_import_counter_sees_nested_imports(tmp_path):
    (tmp_path / "m.py").write_text("import os\n\ndef f():\n    import sys  # why: a test\n"
                                   "    return sys\n\nclass C:\n    def g(self):\n"
                                   "        from os import path\n        return path\n")
    found = _function_local_imports(str(tmp_path))
    assert [line for _, line, _ in found] == [4, 9]


def test_grad_rules_are_filed_by_op_name_below_the_functions():
    import nnabla_jit  # noqa: F401
    from nnabla_jit import backward_functions
    from nnabla_jit.ops.registry import GRAD_RULES, REGISTRY
    assert backward_functions.registry is GRAD_RULES
    # every rule is a registered op's, but for nnabla's FusedBatchNormalizationBackward, a
    # PythonFunction (backward_function/normalization.py)
    assert set(GRAD_RULES) - set(REGISTRY) == {"FusedBatchNormalizationBackward"}
    # a table-line op, a family op and a composite op each have their rule; BinaryError none
    for name in ("Tanh", "Convolution", "Softmax", "FusedConvolution", "Add2"):
        assert callable(GRAD_RULES[name]), name
    assert "BinaryError" not in GRAD_RULES
    assert not hasattr(REGISTRY["Softmax"], "grad")   # the op class no longer carries its rule


def test_backward_functions_register_replaces_a_rule():
    import numpy as np

    import nnabla_jit as nn
    import nnabla_jit.functions as F
    from nnabla_jit import backward_functions

    old = backward_functions.registry["Tanh"]
    try:
        backward_functions.register("Tanh", lambda dys, xs, xshapes, ys, yshapes: [dys[0] * 3.0])
        x = nn.Variable.from_numpy_array(np.array([0.5, -1.0], np.float32), need_grad=True)
        g, = nn.grad([F.tanh(x)], [x])
        g.forward()
        np.testing.assert_allclose(g.d, [3.0, 3.0])
    finally:
        backward_functions.register("Tanh", old)


def test_build_leaves_the_callers_op_alone():
    import numpy as np

    import nnabla_jit as nn
    from nnabla_jit.function import build
    from nnabla_jit.ops.registry import REGISTRY

    x = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32).reshape(2, 3))
    op = REGISTRY["Identity"](input_names=("x",))
    y = build(op, [x], n_outputs=1)
    assert op.n_outputs == -1                 # the op given keeps its own output count
    assert y.parent.op is not op and y.parent.op.n_outputs == 1
    y.forward()
    np.testing.assert_array_equal(y.d, x.d)
