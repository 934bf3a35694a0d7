"""CPU forward kernels and the op registry, one module per family of nnabla functions.

Importing this package registers every op (see ``registry.py``). Each family module has a twin
of the same name in ``backward_ops/`` (backward kernels, grad rules) and ``cuda_ops/``.
"""
from . import registry  # noqa: F401
from . import arithmetic, math, activation, logical, reduction, array, affine  # noqa: F401
from . import convolution, pooling, normalization, loss, stochastic, validation  # noqa: F401
from . import indexing, linalg, cumulative, recurrent, sequence, signal, geometric  # noqa: F401
from . import augmentation, quantization, detection, special  # noqa: F401
