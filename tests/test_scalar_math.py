"""The scalar functions of generated kernels: float32 versions within a few ulp of libm,
special values as NumPy gives them; float64 (gradient checks) goes to libm itself."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F

SPECIAL = [0.0, -0.0, 1e-30, -1e-8, 1e-4, 0.5, -3.0, 9.5, -20.0, 88.7, -87.5, -104.0, 100.0,
           np.inf, -np.inf, np.nan]


def _run(fn, x):
    v = nn.Variable.from_numpy_array(x)
    y = fn(v)
    y.forward()
    return y.d


@pytest.mark.parametrize("name, fn, ref", [
    ("tanh", F.tanh, np.tanh),
    ("exp", F.exp, np.exp),
    ("sigmoid", F.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
])
def test_float32_accuracy_and_special_values(name, fn, ref):
    grid = np.linspace(-30, 30, 200001).astype(np.float32)
    if name == "exp":
        grid = np.linspace(-103, 88.7, 200001).astype(np.float32)
    got = _run(fn, grid)
    assert got.dtype == np.float32
    want = ref(grid.astype(np.float64))
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(got, want, rtol=4e-7, atol=2e-38)
        special = np.array(SPECIAL, np.float32)
        np.testing.assert_allclose(_run(fn, special), ref(special.astype(np.float64)).astype(np.float32),
                                   rtol=4e-7, atol=2e-38)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, -1.0, 1.7])
def test_power_exponents(p):
    x = np.linspace(0.1, 4, 50).astype(np.float32)
    np.testing.assert_allclose(_run(lambda v: v ** p, x), x.astype(np.float64) ** p, rtol=3e-7)


def test_float64_is_libm():
    from nnabla_jit.context import Context
    x = np.linspace(-5, 5, 101)
    with nn.context_scope(Context(["cpu:double"])):
        np.testing.assert_allclose(_run(F.tanh, x), np.tanh(x), rtol=1e-15, atol=1e-300)
        np.testing.assert_allclose(_run(F.exp, x), np.exp(x), rtol=1e-15)


# ---------------------------------------------------------------------------------- one table
def _defined_or_imported(source):
    import ast
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def test_kernel_preludes_and_grad_rules_derive_from_the_one_table():
    from nnabla_jit.backward_function import elementwise as elementwise_rules
    from nnabla_jit.ops import elementwise, scalar_math
    assert elementwise.SCALAR_FUNCTIONS == scalar_math.NAMES
    names = set(scalar_math.NAMES) | set(scalar_math.CONSTANTS) | {"like"}
    cpu = _defined_or_imported(scalar_math.kernel_prelude())
    cuda = _defined_or_imported(scalar_math.device_prelude())   # parsed only: no GPU needed
    assert names <= cpu and names <= cuda
    grad = elementwise_rules._grad_namespace()
    assert set(scalar_math.NAMES) <= set(grad)


def _table():
    from nnabla_jit.ops import scalar_math
    return scalar_math.FUNCTIONS


@pytest.mark.parametrize("fn", _table(), ids=lambda f: f.name)
def test_table_python_values_agree_with_the_cpu_kernels(fn):
    import math
    from numba import njit
    from nnabla_jit.ops import scalar_math
    x = 1.3 if fn.name == "acosh" else 0.3
    args = {"where": (True, x, 0.7)}.get(fn.name, (x, 0.7) if fn.name in (
        "atan2", "power", "eq", "ne", "sign", "minimum", "maximum") else (x,))
    kernel_fn = getattr(math if fn.kernel == "math" else scalar_math, fn.name)
    params = ", ".join("a{}".format(i) for i in range(len(args)))
    namespace = {"kernel_fn": kernel_fn}   # a global, so numba can inline the @njit helpers
    exec("def call({0}):\n    return kernel_fn({0})\n".format(params), namespace)
    call = njit(namespace["call"])
    assert call(*args) == pytest.approx(fn.python(*args), rel=1e-12)
