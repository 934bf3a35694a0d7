"""Copy a graph, optionally onto other input variables."""
from .graph_converter import FunctionModifier

__all__ = ["IdentityModifier"]


class IdentityModifier(FunctionModifier):
    """Rebuild every function as it is; ``inputs`` maps input variables of the graph to the
    variables the copy reads instead. With ``copy_value`` each replacement first gets the
    data and gradient of the variable it replaces (the shapes must then match)."""

    def __init__(self, inputs={}, copy_value=False):
        super().__init__()
        self._input_dict = dict(inputs)
        self._copy_value = copy_value

    def modify(self, f, inputs):
        replaced = False
        for i, v in enumerate(f.inputs):
            if v.parent is None and v in self._input_dict:
                new = self._input_dict[v]
                if self._copy_value:
                    if new.shape != v.shape:
                        raise ValueError("IdentityModifier: the replacement of shape {} for an input of "
                                         "shape {} cannot take its values (copy_value=True)".format(new.shape, v.shape))
                    new.d = v.d.copy()
                    new.g = v.g.copy()
                inputs[i] = new
                replaced = True
        return self._modify_as_same(f, inputs) if replaced else None
