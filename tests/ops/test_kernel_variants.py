"""The op checkers run what users run: float32, and the parallel kernel variants (forced on
small inputs by ``kernels.parallel_threshold``), besides the float64 serial kernels the
numerical checks use; a bug living only in one of them fails the checks. The grad-rule
checks compare first-order values too, not only their derivatives."""
import numpy as np
import pytest
from numba import njit
from numba.core import config, event

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit import kernel_cache
from nnabla_jit.ops import kernels, reduction
from nnabla_jit.ops.registry import GRAD_RULES
from nnabla_jit.testing import check_backward, check_double_backward, check_forward, check_function

X = np.linspace(-1.0, 2.0, 12).reshape(3, 4)


def test_parallel_threshold_picks_the_variant():
    kernel = reduction.broadcast_back
    assert kernel.for_size(4) is kernel.serial
    assert kernel.for_size(kernels.PARALLEL_THRESHOLD) is kernel.parallel
    with kernels.parallel_threshold(0):
        assert kernel.for_size(4) is kernel.parallel
        with kernels.parallel_threshold(None):
            assert kernel.for_size(1 << 40) is kernel.serial
        assert kernel.for_size(1) is kernel.parallel
    assert kernel.for_size(4) is kernel.serial


def test_an_op_set_up_under_the_override_keeps_its_parallel_kernel():
    with kernels.parallel_threshold(0):
        y = F.sin(nn.Variable.from_numpy_array(X.astype(np.float32)))
    assert y.parent.op._forward.py_func.__name__ == "sin_forward_parallel"
    y.forward()
    np.testing.assert_allclose(y.d, np.sin(X), rtol=1e-6)
    assert F.sin(nn.Variable((3, 4))).parent.op._forward.py_func.__name__ == "sin_forward"


def test_a_bug_only_in_the_float32_serial_sum_fails_check_forward(monkeypatch):
    real = reduction.reduce_whole_serial
    monkeypatch.setattr(reduction, "reduce_whole_serial", lambda x: real(x[:-1]))  # drops one
    with pytest.raises(AssertionError, match=r"forward \(float32, serial\): output 0 differs"):
        check_forward(F.sum, [X], np.sum)


def test_a_bug_only_in_the_parallel_sum_fails_check_forward(monkeypatch):
    real = reduction.sum_all
    monkeypatch.setattr(reduction, "sum_all", lambda x, n_blocks: real(x[:-1], n_blocks))
    with pytest.raises(AssertionError, match=r"forward \(float32, parallel\): output 0 differs"):
        check_forward(F.sum, [X], np.sum)


def test_a_bug_only_in_a_parallel_backward_kernel_fails_check_backward(monkeypatch):
    real = reduction.broadcast_back.serial
    monkeypatch.setattr(reduction.broadcast_back, "parallel",
                        lambda dy, dx, scale, accum: real(dy, dx, 2 * scale, accum))
    with pytest.raises(AssertionError, match=r"backward \(float32, parallel\): input 0 differs"):
        check_backward(lambda v: F.sum(v, axis=1), [X])
    check_backward(lambda v: F.sum(v, axis=1), [X], variants=False)   # the serial kernels are right


def test_the_float32_run_is_float32():
    # float32 rounding (about 6e-8 relative) passes the float32 tolerance, not float64's
    fn, ref = (lambda v: F.exp(v * 10.0)), (lambda a: np.exp(a * 10.0))
    check_forward(fn, [X], ref, atol=0, rtol=1e-9)
    with pytest.raises(AssertionError, match=r"forward \(float32, serial\)"):
        check_forward(fn, [X], ref, atol=0, rtol=1e-9, atol32=0, rtol32=1e-9)


def test_a_wrong_grad_rule_fails_the_double_backward_check_at_first_order(monkeypatch):
    real = GRAD_RULES["Sin"]

    def doubled(*args, **kwargs):
        return [None if g is None else g * 2.0 for g in real(*args, **kwargs)]
    monkeypatch.setitem(GRAD_RULES, "Sin", doubled)
    # consistent with its own derivative, so only the first-order value check sees it
    with pytest.raises(AssertionError, match=r"grad rule \(first order\): input 0 differs"):
        check_double_backward(F.sin, [X])


def test_check_function_passes_on_a_correct_op():
    check_function(F.sin, [X], np.sin)


def test_the_package_kernels_compile_at_numbas_default_level(monkeypatch, tmp_path):
    """No lower level for the package's kernels: at -O2 the reference counting of arrays
    passed to inline helpers stayed inside the loops (the serial Momentum update ran ~100x
    slower than at numba's default -O3, benchmarks/README.md)."""
    monkeypatch.setenv(kernel_cache.ENV_VAR, str(tmp_path))   # an empty cache: it compiles
    module = kernel_cache.load_generated("nnabla_jit_opt_level_test_", """
from numba import njit


@njit(cache=True)
def triple(x):
    return 3 * x
""")
    seen = []

    class Listener(event.Listener):
        def on_start(self, ev):
            seen.append(int(config.OPT))

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", Listener()):
        assert module.triple(2.0) == 6.0
    assert seen == [int(config.OPT)]
