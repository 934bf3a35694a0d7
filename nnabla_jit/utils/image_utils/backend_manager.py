"""Which image backend runs ``imread``/``imsave``/``imresize`` (nnabla's
``ImageUtilsBackendManager``). nnabla_jit has the Pillow backend, 'pil'."""
import importlib.util

from ...logger import logger
from .backend_events.image_utils_backend import ImageUtilsBackend

__all__ = ["ImageUtilsBackendManager", "backend_manager", "ImageUtilsBackend"]


class ImageUtilsBackendManager:
    _KNOWN = ("pil", "cv2", "pypng", "dicom")

    def __init__(self):
        self._backend = "pil"
        self._instances = {}

    def get_available_backends(self):
        """Backends usable here: 'pil' when Pillow is installed."""
        return ["pil"] if importlib.util.find_spec("PIL") is not None else []

    def get_backend(self):
        return self._backend

    def set_backend(self, backend):
        if backend not in self.get_available_backends():
            if backend in self._KNOWN:
                raise ValueError("image backend {!r} is not provided by nnabla_jit (available: {})"
                                 .format(backend, self.get_available_backends()))
            raise ValueError("unknown image backend {!r} (available: {})".format(
                backend, self.get_available_backends()))
        logger.info("use {} for the backend of image utils".format(backend))
        self._backend = backend

    @property
    def module(self):
        """The backend object in use."""
        if self._backend not in self._instances:
            from .backend_events.pil_backend import PilBackend   # it imports image_utils itself
            self._instances["pil"] = PilBackend()
        return self._instances[self._backend]


backend_manager = ImageUtilsBackendManager()
