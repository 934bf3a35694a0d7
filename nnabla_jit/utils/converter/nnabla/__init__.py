"""nnabla's ``nnabla.utils.converter.nnabla``: :class:`NnpExpander`, which unrolls the repeat
and recurrent loop control of networks designed in Neural Network Console."""
from .expander import NnpExpander, rename_square_bracket

__all__ = ["NnpExpander", "rename_square_bracket"]
