"""CPU forward kernels and the op registry, one module per family of nnabla functions.

Importing this package registers every op (see ``registry.py``). A family module holds each
op's forward and first-order backward kernels; its grad rules (built from F, above it) are in
``backward_function/`` and its CUDA kernels in ``cuda_ops/``, in modules of the same name.
Helpers several families share are in ``common.py``.
"""
from . import registry, adjoint  # noqa: F401
from . import arithmetic, math, activation, logical, reduction, array, affine  # noqa: F401
from . import convolution, convolution_variants, pooling, normalization, loss, stochastic  # noqa: F401
from . import validation  # noqa: F401
from . import indexing, linalg, cumulative, recurrent, sequence, signal, geometric  # noqa: F401
from . import augmentation, quantization, detection, special  # noqa: F401
