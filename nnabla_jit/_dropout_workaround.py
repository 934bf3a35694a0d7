"""nnabla's ``_dropout_workaround``: the mask of the Dropout applied to a variable."""
import numpy as np

from .functions import dropout_applied_to
from .ops.registry import OpValueError
from .variable import Variable


def _get_dropout_mask(x):
    """A Variable holding the 0/1 mask that the last forward of the Dropout applied to ``x``
    (by ``F.dropout``) drew: 1 where x was kept."""
    op = dropout_applied_to(x)
    if op is None or op.mask is None:
        raise OpValueError("_get_dropout_mask: no Dropout was applied to this variable")
    return Variable.from_numpy_array((op.mask != 0).astype(np.float32))
