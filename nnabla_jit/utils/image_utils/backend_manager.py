"""Which image backend runs ``imread``/``imsave``/``imresize`` (nnabla's backend manager).
Backends are named by their classes, as in nnabla; nnabla_jit has ``PilBackend`` (Pillow).
As in nnabla, ``set_backend`` with a name that is not available leaves the choice automatic,
and ``get_backend()`` is '' until a backend has been chosen or used."""
import importlib.util

from ...logger import logger
from .backend_events.image_utils_backend import ImageUtilsBackend

__all__ = ["ImageUtilsBackendManager", "backend_manager", "ImageUtilsBackend"]

_UNPROVIDED = ("Cv2Backend", "PngBackend", "DicomBackend")


class ImageUtilsBackendManager:

    def __init__(self):
        self._chosen = None
        self._used = None
        self._instance = None

    def get_available_backends(self):
        """['PilBackend'] when Pillow is installed."""
        return ["PilBackend"] if importlib.util.find_spec("PIL") is not None else []

    def get_backend(self):
        return self._chosen or self._used or ""

    def set_backend(self, backend):
        if backend in self.get_available_backends():
            self._chosen = backend
            return
        logger.warning("image backend {!r} is {}; the backend is chosen automatically ({})".format(
            backend, "not provided by nnabla_jit" if backend in _UNPROVIDED else "unknown",
            self.get_available_backends()))
        self._chosen = None

    @property
    def module(self):
        """The backend object in use: nnabla's ``PilBackend`` once chosen, else nnabla_jit's
        default one (Pillow with 16-bit support)."""
        # imported here: the backends import image_utils, which imports this module
        from .backend_events.pil_backend import DefaultBackend, PilBackend
        if self._chosen == "PilBackend":
            return PilBackend()
        if self._instance is None:
            self._instance = DefaultBackend()
        self._used = "PilBackend"
        return self._instance


backend_manager = ImageUtilsBackendManager()
