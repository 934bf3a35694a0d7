"""``extension_context`` (deprecated in nnabla; use ``ext_utils.get_extension_context``)."""
from ..ext_utils import get_extension_context
from ..logger import logger

__all__ = ["extension_context"]


def extension_context(extension_name="cpu", **kw):
    """The context of extension ``extension_name`` ('cpu', 'cuda', 'cudnn', or nnabla's old
    'cuda.cudnn'); ``kw`` as for ``get_extension_context``."""
    logger.warning("Deprecated API. Use `nnabla.ext_util.get_extension_context(ext_name, **kw)`.")
    if extension_name == "cuda.cudnn":
        extension_name = "cudnn"
    return get_extension_context(extension_name, **kw)
