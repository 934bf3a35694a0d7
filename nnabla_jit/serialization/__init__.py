"""nnabla's file formats: parameters (``.h5``, ``.protobuf``), solver states, networks
(``.nntxt``, ``.protobuf``, ``.nnp``) and, in ``serialization.onnx``, ONNX.

- ``proto``: the protobuf message classes of nnabla.proto, built from ``tables/nnp_schema.tsv``.
- ``parameters``: ``nn.save_parameters`` / ``nn.load_parameters``.
- ``solver_states``: ``Solver.save_states`` / ``load_states`` file layouts.
- ``graph_export`` / ``graph_import``: a graph <-> a ``Network`` message.
- ``nnp``: reading and writing ``.nnp`` archives and protobuf files.
- ``files``: atomic writes and the :class:`FileFormatError` every reader raises.
"""
from .files import FileFormatError  # noqa: F401

__all__ = ["FileFormatError"]
