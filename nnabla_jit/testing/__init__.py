"""Gradient checking for users and for nnabla_jit's own tests.

``check_backward``       backward kernels vs float64 central differences
``check_grad_rule``      ``nn.grad`` (grad rules built from F) vs the backward kernels
``check_double_backward`` second derivatives through ``nn.grad`` vs differences of the first
``check_forward``        forward vs a reference function (e.g. NumPy)
``check_function``       all of the above in one call

Every checker takes a function of Variables (``lambda x, w: F.affine(x, w)``) and NumPy inputs,
runs in float64 (``type_config='double'``) and raises ``AssertionError`` naming the input, the
worst element and both values when they disagree. ``nnabla_jit.testing.strategies`` has
hypothesis strategies for shapes, arrays and op arguments.
"""
from .checks import (check_backward, check_double_backward, check_forward, check_function,
                     check_grad_rule, double_context, numerical_grad)

from . import strategies  # noqa: F401

__all__ = ["strategies", "check_backward", "check_double_backward", "check_forward", "check_function",
           "check_grad_rule", "double_context", "numerical_grad"]
