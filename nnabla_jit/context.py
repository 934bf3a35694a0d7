"""Execution contexts: which backend runs the ops and in which number type.

A context is what nnabla calls ``Context(backend=['cpu:float'], array_class, device_id)``.
The first entry of ``backend`` decides the compute backend (``cpu`` or ``cuda``) and the type
configuration (``float``, ``half`` or ``double``). Graph nodes capture the current context when
they are built, exactly as nnabla functions do.
"""
from contextlib import contextmanager

import numpy as np

from .thread_state import ThreadSettings

__all__ = ["Context", "context_scope", "set_default_context", "get_current_context",
           "get_default_context"]


class Context:
    """nnabla's ``Context``: ``backend`` is a list such as ``['cpu:float']``."""

    def __init__(self, backend=None, array_class="", device_id="0"):
        self.backend = list(backend) if backend else ["cpu:float"]
        self.array_class = array_class
        self.device_id = str(device_id)

    # What the executor needs, derived from the backend list.
    @property
    def device(self):
        """'cpu' or 'cuda' (cudnn runs the same numba.cuda kernels)."""
        return "cuda" if self.backend[0].split(":")[0] in ("cuda", "cudnn") else "cpu"

    @property
    def type_config(self):
        parts = self.backend[0].split(":")
        return parts[1] if len(parts) > 1 else "float"

    @property
    def compute_dtype(self):
        """Kernels compute in float64 for 'double' and in float32 otherwise ('half' included)."""
        return np.dtype(np.float64) if self.type_config == "double" else np.dtype(np.float32)

    @property
    def storage_dtype(self):
        """Function outputs are stored in float16 under 'half', else in the compute type."""
        return np.dtype(np.float16) if self.type_config == "half" else self.compute_dtype

    def __eq__(self, other):
        return (isinstance(other, Context) and self.backend == other.backend
                and self.array_class == other.array_class and self.device_id == other.device_id)

    def __hash__(self):
        return hash((tuple(self.backend), self.array_class, self.device_id))

    def __repr__(self):
        return "Context(backend={}, array_class='{}', device_id='{}')".format(
            self.backend, self.array_class, self.device_id)

    __str__ = __repr__


# Per thread (see thread_state.py): the default context, and the stack of context_scope blocks.
_settings = ThreadSettings({"default": Context(), "stack": ()})


def get_current_context():
    """The innermost ``context_scope`` context of this thread, else the default context."""
    stack = _settings["stack"]
    return stack[-1] if stack else _settings["default"]


def get_default_context():
    """The context used outside every ``context_scope`` (in this thread)."""
    return _settings["default"]


def set_default_context(ctx):
    """Set the context used outside every ``context_scope``: this thread's, and, called from the
    main thread, that of every thread that has not set its own."""
    if not isinstance(ctx, Context):
        raise TypeError("set_default_context: expected a Context, got {}".format(type(ctx).__name__))
    _settings.set("default", ctx)


@contextmanager
def context_scope(ctx):
    """Build the graph under ``ctx`` inside the ``with`` block (in this thread)."""
    if not isinstance(ctx, Context):
        raise TypeError("context_scope: expected a Context, got {}".format(type(ctx).__name__))
    with _settings.scoped("stack", _settings["stack"] + (ctx,)):
        yield ctx


def __getattr__(name):
    # nnabla keeps these as module globals that change with every scope; here they are
    # derived from the scope stack so that they cannot drift from it.
    if name == "current_ctx":
        return get_current_context()
    if name == "context_level":
        return len(_settings["stack"])
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
