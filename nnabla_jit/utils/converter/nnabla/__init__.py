"""nnabla's ``nnabla.utils.converter.nnabla``: :class:`NnpImporter` (NNP files for the converter
commands) and :class:`NnpExpander`, which unrolls the repeat and recurrent loop control of
networks designed in Neural Network Console."""
from .expander import NnpExpander, rename_square_bracket
from .importer import NnpImporter

__all__ = ["NnpExpander", "NnpImporter", "rename_square_bracket"]
