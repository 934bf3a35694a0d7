"""Exporters for nnabla-c-runtime (nnabla's ``nnablart``): :class:`NnbExporter` writes the
``.nnb`` network file the runtime loads. nnabla's C-source exporter (``CsrcExporter``) is not
provided: its output is nnabla's own C templates, see the README."""
from .nnb import NnbExporter

__all__ = ["NnbExporter"]
