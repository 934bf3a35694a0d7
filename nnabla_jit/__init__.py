"""nnabla_jit: Sony's Neural Network Libraries (nnabla) in pure Python, every op a Numba kernel.

    import nnabla_jit as nn
    import nnabla_jit.functions as F
    import nnabla_jit.parametric_functions as PF
    import nnabla_jit.solvers as S
"""
__version__ = "1.39.0"

# First: every kernel decorated from here on caches its machine code in the private kernel cache
# (or compiles in memory when there is none), see kernel_cache.py.
from . import kernel_cache as _kernel_cache
_kernel_cache.install()

from . import logger as _logger_module
from .logger import logger
from .context import Context, context_scope, get_current_context, set_default_context
from .ndarray import NdArray
from .variable import Variable
from .function import (PythonFunction, auto_forward, get_auto_forward, no_grad,
                       set_auto_forward)
from .graph import forward_all
from . import functions  # noqa: F401  (builds F from the op registry)
from .grad import grad
from .parameter import (clear_parameters, get_current_parameter_scope, get_parameters,
                        load_parameters, parameter_scope, save_parameters)
from . import random  # noqa: F401
from . import parameter  # noqa: F401

__all__ = ["Context", "context_scope", "get_current_context", "set_default_context", "NdArray",
           "Variable", "PythonFunction", "auto_forward", "get_auto_forward", "set_auto_forward",
           "no_grad", "forward_all", "grad", "clear_parameters", "get_current_parameter_scope",
           "get_parameters", "load_parameters", "parameter_scope", "save_parameters", "logger",
           "random"]


def __getattr__(name):
    # Submodules that pull in optional pieces are imported on first use (keeps import fast).
    import importlib
    if name in ("parametric_functions", "solvers", "initializer", "ext_utils", "monitor",
                "communicators", "utils", "experimental", "testing", "backward_functions",
                "function_bases", "cuda_ops", "normalization_functions", "numpy_compat_functions"):
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'nnabla_jit' has no attribute {!r}".format(name))
