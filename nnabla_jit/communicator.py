"""``nnabla.communicator``: where nnabla defines its communicator classes
(``nnabla.communicators`` re-exports them); both lead to :mod:`nnabla_jit.communicators`."""
from .communicators import *  # noqa: F401,F403
from .communicators import __all__  # noqa: F401
