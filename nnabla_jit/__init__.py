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
from .function import PythonFunction, no_grad
# Imported through the submodule so that the names end up bound to the functions (importing
# nnabla_jit.auto_forward later does not rebind them), as nnabla's __init__ does.
from .auto_forward import auto_forward, get_auto_forward, set_auto_forward
from .graph import forward_all
# The devices register their runners with runners.py (the executor imports none of them);
# importing cuda_ops does not import numba.cuda, its first node run does.
from . import cuda_ops  # noqa: F401
from .recompute import get_global_recompute, recompute, recompute_fn, set_global_recompute
from . import functions  # noqa: F401  (builds F from the op registry)
from . import backward_function  # noqa: F401  (files the grad rules, built from F, by op name)
from .grad import grad
from .parameter import (clear_parameters, get_current_parameter_scope, get_parameters,
                        load_parameters, parameter_scope, save_parameters)
from . import random  # noqa: F401
from . import parameter  # noqa: F401
from .random import seed
from ._init import (add_available_context, array_classes, available_contexts,
                    prefer_cached_array, reset_array_preference)
from . import nnabla_alias as _nnabla_alias
from .callback import (set_function_post_hook, set_function_pre_hook, set_solver_post_hook,
                       set_solver_pre_hook, unset_function_post_hook, unset_function_pre_hook,
                       unset_solver_post_hook, unset_solver_pre_hook)

__all__ = ["Context", "context_scope", "get_current_context", "set_default_context", "NdArray",
           "Variable", "PythonFunction", "auto_forward", "get_auto_forward", "set_auto_forward",
           "no_grad", "forward_all", "grad", "clear_parameters", "get_current_parameter_scope",
           "get_parameters", "load_parameters", "parameter_scope", "save_parameters", "logger",
           "random", "seed", "prefer_cached_array", "reset_array_preference", "array_classes",
           "add_available_context", "available_contexts", "recompute", "recompute_fn",
           "set_global_recompute", "set_function_pre_hook", "set_function_post_hook",
           "unset_function_pre_hook", "unset_function_post_hook", "set_solver_pre_hook",
           "set_solver_post_hook", "unset_solver_pre_hook", "unset_solver_post_hook",
           "Module", "Sequential", "ProtoVariable", "graph_def", "CommunicatorBackwardCallback"]

_nnabla_alias.register_extension_fallback()


def install_as_nnabla(force=False):
    """Make ``import nnabla`` (and ``nnabla_ext.cpu``/``cuda``/``cudnn``) give nnabla_jit, so
    programs written for nnabla run unchanged; refuses if a real nnabla is installed unless
    ``force=True`` (see :mod:`nnabla_jit.as_nnabla`)."""
    _nnabla_alias.install_as_nnabla(force=force)


# On an empty kernel cache a background process starts compiling the kernels of the common
# networks now, while this process goes on (deferred_compile.py).
from . import deferred_compile as _deferred_compile
_deferred_compile.start_if_cold()

# nnabla's top-level names from modules that pull in PF and the file formats: imported on
# first use (keeps `import nnabla_jit` fast).
_LAZY_NAMES = {"Module": ("core.module", "Module"), "Sequential": ("core.sequential", "Sequential"),
               "ProtoVariable": ("core.graph_def", "ProtoVariable"),
               "graph_def": ("core.graph_def", None),
               "CommunicatorBackwardCallback": ("communicators", "CommunicatorBackwardCallback")}


def __getattr__(name):
    # Submodules that pull in optional pieces are imported on first use (keeps import fast).
    import importlib
    if name in _LAZY_NAMES:
        module_name, attr = _LAZY_NAMES[name]
        module = importlib.import_module("." + module_name, __name__)
        return module if attr is None else getattr(module, attr)
    if name in ("parametric_functions", "solvers", "initializer", "ext_utils", "monitor",
                "communicators", "utils", "experimental", "testing", "backward_functions",
                "function_bases", "cuda_ops", "normalization_functions", "numpy_compat_functions",
                "core", "solver", "dtypes", "config", "callback", "lms", "communicator", "contrib",
                "models", "as_nnabla", "auto_forward", "_variable"):
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'nnabla_jit' has no attribute {!r}".format(name))
