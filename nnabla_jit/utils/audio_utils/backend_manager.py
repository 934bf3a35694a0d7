"""Which audio backend runs ``auread``/``ausave``/``auresize``: 'wav' (scipy) in nnabla_jit."""
import importlib

from ...logger import logger

__all__ = ["AudioUtilsBackendManager", "backend_manager"]


class AudioUtilsBackendManager:
    _BACKENDS = {"wav": ".wav_backend"}

    def __init__(self):
        self._backend = "wav"

    def get_available_backends(self):
        return list(self._BACKENDS)

    @property
    def backend(self):
        return self._backend

    @backend.setter
    def backend(self, backend):
        if backend not in self._BACKENDS:
            raise ValueError("{} is not available as an audio backend in nnabla_jit (available: {}; "
                             "nnabla's pydub backend is not provided)".format(
                                 backend, self.get_available_backends()))
        logger.info("use {} for the backend of audio utils".format(backend))
        self._backend = backend

    @property
    def module(self):
        return importlib.import_module(self._BACKENDS[self._backend], __package__)


backend_manager = AudioUtilsBackendManager()
