"""nnabla's ``nnabla._variable`` (its C extension's module): programs test
``isinstance(x, nn._variable.Variable)``."""
from .context import Context
from .variable import Variable

__all__ = ["Variable", "Context"]
