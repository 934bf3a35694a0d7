"""The ``.nnp`` format (nnabla's ``nnabla.utils.nnp_format``): a zip holding
``nnp_version.txt``, the network definition (``.nntxt``/``.prototxt`` text or ``.protobuf``)
and the parameters (``.h5`` or ``.protobuf``); other members are ignored."""
from ..serialization.nnp import NNP_VERSION

__all__ = ["nnp_version"]


def nnp_version():
    """The version written to ``nnp_version.txt`` ('0.1')."""
    return NNP_VERSION
