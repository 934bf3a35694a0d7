"""Copy a graph with its parameters excluded from differentiation."""
from ...initializer import ConstantInitializer  # noqa: F401  (nnabla's module has these names)
from ...parameter import get_parameter_or_create, get_parameters  # noqa: F401
from .graph_converter import FunctionModifier

__all__ = ["NoGradModifier"]


class NoGradModifier(FunctionModifier):
    """Rebuild every function with the registered parameters it reads replaced by views of
    them with ``need_grad=False`` (same buffers), so backward leaves the parameters alone."""

    def modify(self, f, inputs):
        params = set(get_parameters(grad_only=False).values())
        inputs = [v.get_unlinked_variable(need_grad=False) if v in params else v for v in inputs]
        return self._modify_as_same(f, inputs)
