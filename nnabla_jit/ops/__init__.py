"""CPU forward kernels and the op registry, one module per family of nnabla functions.

Importing this package registers every op (see ``registry.py``).
"""
from . import registry  # noqa: F401
from . import arithmetic, math, activation, logical  # noqa: F401
from . import reduction, array, affine, convolution, pooling, normalization, loss  # noqa: F401
from . import stochastic, validation  # noqa: F401
