"""Exporters for nnabla-c-runtime: :class:`NnbExporter` (the ``.nnb`` network file) and
:class:`CsrcExporter` (C source that builds the network), as nnabla's ``nnablart``."""
from .nnb import NnbExporter

__all__ = ["NnbExporter"]
