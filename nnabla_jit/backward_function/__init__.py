"""nnabla's ``backward_function``: the grad rules ``nn.grad`` uses, one module per op family.

A rule has nnabla's signature ``fn(grad_inputs, inputs, input_shapes, outputs, output_shapes,
**args)`` and builds the input gradients from ``F`` ops, so they can be differentiated again.
Each module imports ``F`` at the top and files its rules by op type name with
``ops.registry.grad_rule``; the executor and ``nn.grad`` read them from ``ops.registry.GRAD_RULES``
(``nnabla_jit.backward_functions.registry`` is the same table). Importing this package (done by
``nnabla_jit/__init__.py`` right after ``functions``) files every rule.
"""
from . import elementwise  # noqa: F401  (first: other families use reduce_to_shape)
from . import adjoint  # noqa: F401  (LinearAdjoint, the transpose of the linear ops)
from . import activation, affine, arithmetic, array, augmentation, convolution  # noqa: F401
from . import cumulative, detection, geometric, indexing, linalg, loss, math  # noqa: F401
from . import normalization, pooling, quantization, recurrent, reduction, sequence  # noqa: F401
from . import signal, special, stochastic  # noqa: F401
from . import per_op  # noqa: E402  (after the rules: its modules are views onto GRAD_RULES)

per_op.install()   # nnabla's per-op paths: nnabla_jit.backward_function.slice, .average_pooling...
