"""nnabla's ``nnabla.utils.nnabla_pb2``: the message classes of nnabla.proto, built at import time
from ``tables/nnp_schema.tsv`` (see ``nnabla_jit.serialization.proto``)."""
from ..serialization.proto import nnabla_pb2 as _pb2

globals().update({name: getattr(_pb2, name) for name in dir(_pb2) if not name.startswith("_")})
