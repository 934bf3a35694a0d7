"""The CUDA launchers of each op, and kernels compiled on first use.

A family module registers, per op name, a forward launcher ``fn(op, inputs, outputs)`` and a
backward launcher ``fn(op, inputs, outputs, output_grads, input_grads, propagate_down, accum)``:
the CPU kernels' signatures, over numba.cuda device arrays. ``CUDA_OPS`` is the set of names
with a forward launcher.

numba.cuda is optional, so a family module must be importable without it (``show_registry``
reads ``CUDA_OPS``). Kernels are therefore written as plain module-level functions marked with
:func:`kernel` or :func:`device_function`, and the module declares ``cuda = None``. On the first
launch :func:`bind_kernels` imports numba.cuda, binds ``cuda`` in each such module and replaces
every marked function by its ``cuda.jit`` dispatcher, so the kernels read as ordinary numba.cuda
code (``cuda.grid(1)``, ``cuda.shared.array``) and refer to each other by name. ``cuda`` has to
be a module global: numba's simulator swaps module globals to run the kernels.

``NNABLA_JIT_CUDA_CACHE=1`` compiles them with ``cache=True``: numba writes each kernel's
machine code next to its source (or under ``NUMBA_CACHE_DIR``), and a later process with the same
sources loads it instead of compiling (off by default: not yet measured on enough GPUs).
"""
import os
import sys
import warnings

from .. import numba_internals

__all__ = ["FORWARD", "BACKWARD", "WHEN", "UPDATES", "handles", "forward", "backward", "kernel", "device_function",
           "bind_kernels"]

FORWARD = {}    # op name -> forward launcher
BACKWARD = {}   # op name -> backward launcher
WHEN = {}       # op name -> predicate on the set-up op: whether its launchers handle it
UPDATES = {}    # op name -> fn(op): the indices of the inputs its forward writes in place

_bound = [False]
CACHE = os.environ.get("NNABLA_JIT_CUDA_CACHE", "0") == "1"   # cache=True on every kernel


def forward(*names, when=None, updates=None):
    """Decorator: ``fn`` launches the forward of the ops ``names``; ``when(op)``, if given,
    says which set-up ops it handles (the others run their CPU kernels on host copies);
    ``updates(op)``, if given, the indices of the inputs ``fn`` writes in place (their device
    copies become the newest)."""
    def deco(fn):
        for name in names:
            FORWARD[name] = fn
            if when is not None:
                WHEN[name] = when
            if updates is not None:
                UPDATES[name] = updates
        return fn
    return deco


def handles(op):
    """Whether the launchers of ``op``'s name handle this op (see :func:`forward`)."""
    when = WHEN.get(op.name)
    return when is None or when(op)


def backward(*names):
    """Decorator: ``fn`` launches the backward of the ops ``names``."""
    def deco(fn):
        for name in names:
            BACKWARD[name] = fn
        return fn
    return deco


class _Unbound:
    """A kernel waiting for numba.cuda (see the module docstring)."""

    def __init__(self, fn, device):
        self.fn = fn
        self.device = device


def kernel(fn):
    """Mark ``fn`` as a CUDA kernel of its module (compiled with ``cuda.jit`` when bound)."""
    return _Unbound(fn, device=False)


def device_function(fn):
    """Mark ``fn`` as a CUDA device function (``cuda.jit(device=True)`` when bound). ``fn``
    may be defined elsewhere, e.g. the ``py_func`` of a CPU helper, so both share one source."""
    return _Unbound(fn, device=True)


def bind_kernels(cuda):
    """Give every module of this package that marks kernels compile-on-demand dispatchers for
    them (``cuda`` is numba.cuda). Runs once."""
    if _bound[0]:
        return
    prefix = __name__.rpartition(".")[0] + "."
    for mod_name, module in list(sys.modules.items()):
        if not mod_name.startswith(prefix) or module is None:
            continue
        namespace = module.__dict__
        marked = [(k, v) for k, v in namespace.items() if isinstance(v, _Unbound)]
        if marked:
            namespace["cuda"] = cuda
        for name, value in marked:
            namespace[name] = cuda.jit(device=value.device, cache=CACHE)(value.fn)
            if CACHE:
                guard_cache(namespace[name])
    _bound[0] = True


def guard_cache(dispatcher):
    """A kernel whose machine code numba cannot save or load (a pickling limit, a damaged
    file) compiles as it would without the cache, with one warning, instead of failing."""
    cache = numba_internals.dispatcher_cache(dispatcher)
    if cache is None or not hasattr(cache, "save_overload"):
        return
    save, load = cache.save_overload, cache.load_overload

    def save_overload(sig, data):
        try:
            save(sig, data)
        except Exception as e:
            _cache_warning(dispatcher, "saved", e)

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception as e:
            _cache_warning(dispatcher, "loaded", e)
            return None

    cache.save_overload, cache.load_overload = save_overload, load_overload


def _cache_warning(dispatcher, verb, error):
    name = getattr(getattr(dispatcher, "py_func", None), "__qualname__", "?")
    warnings.warn("NNABLA_JIT_CUDA_CACHE: kernel {} could not be {} ({}: {}); it is compiled "
                  "without the cache".format(name, verb, type(error).__name__, error),
                  RuntimeWarning)
