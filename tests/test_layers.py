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
