"""Gradient checking for users and for nnabla_jit's own tests.

``check_backward``       backward kernels vs float64 central differences
``check_grad_rule``      ``nn.grad`` (grad rules built from F) vs the backward kernels
``check_double_backward`` ``nn.grad`` values vs the backward kernels, their derivatives vs differences
``check_forward``        forward vs a reference function (e.g. NumPy)
``check_function``       all of the above in one call

Every checker takes a function of Variables (``lambda x, w: F.affine(x, w)``) and NumPy inputs,
runs in float64 (``type_config='double'``) with the serial kernels and raises ``AssertionError``
naming the input, the worst element and both values when they disagree. ``check_forward`` and
``check_backward`` then run what users run -- float32, with the serial and with the parallel
kernel variants (forced on small inputs) -- against the float64 results within float32
tolerances (``atol32``/``rtol32``; ``variants=False`` skips this). ``nnabla_jit.testing.strategies`` has
hypothesis strategies for shapes, arrays and op arguments.
"""
import numpy as np

from .checks import (check_backward, check_double_backward, check_forward, check_function,
                     check_grad_rule, double_context, numerical_grad)

from . import clear_called_flag_recorder  # noqa: F401


def assert_allclose(actual, desired, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg="", verbose=True):
    """``numpy.testing.assert_allclose`` with ``numpy.allclose``'s tolerances (nnabla's helper)."""
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, equal_nan=equal_nan,
                               err_msg=err_msg, verbose=verbose)


__all__ = ["assert_allclose", "clear_called_flag_recorder", "strategies", "check_backward",
           "check_double_backward", "check_forward", "check_function", "check_grad_rule",
           "double_context", "numerical_grad"]


def __getattr__(name):
    # ``strategies`` needs hypothesis, a test-only dependency: imported on first use so that
    # ``from nnabla_jit.testing import assert_allclose`` works without it.
    if name == "strategies":
        import importlib
        return importlib.import_module(".strategies", __name__)
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
