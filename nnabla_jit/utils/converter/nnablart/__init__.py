"""Exporters for nnabla-c-runtime (nnabla's ``nnablart``): :class:`NnbExporter` writes the
``.nnb`` network file the runtime loads, :class:`CsrcExporter` the C source that builds the
network into a program."""
from .csrc import CsrcExporter
from .nnb import NnbExporter

__all__ = ["CsrcExporter", "NnbExporter"]
