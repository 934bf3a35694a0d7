"""Reading, writing and resizing audio (nnabla's ``nnabla.utils.audio_utils``). Arrays are
(samples, channels) unless ``channel_first``. The backend is 'wav' (``.wav`` files through
scipy); nnabla's pydub backend is not provided."""
import numpy as np

from . import common  # noqa: F401
from .backend_manager import backend_manager
from .common import _auto_scale_before, rescale_intensity

__all__ = ["auread", "ausave", "auwrite", "auload", "auresize", "get_backend", "set_backend",
           "get_available_backends", "minmax_auto_scale", "rescale_intensity", "backend_manager"]


def set_backend(backend):
    """Use ``backend`` (see ``get_available_backends``); ValueError for any other."""
    backend_manager.backend = backend


def get_backend():
    return backend_manager.backend


def get_available_backends():
    return backend_manager.get_available_backends()


def minmax_auto_scale(audio_arr, out_datatype):
    """``audio_arr`` rescaled from [min, max] to the whole range of ``out_datatype`` (as
    nnabla does, float types included: [finfo.min, finfo.max])."""
    _auto_scale_before(audio_arr, out_datatype)
    info = np.iinfo(out_datatype) if np.issubdtype(out_datatype, np.integer) else np.finfo(out_datatype)
    low, high = info.min, info.max
    return rescale_intensity(audio_arr, input_low=audio_arr.min(), input_high=audio_arr.max(),
                             output_low=low, output_high=high, output_type=out_datatype)


def auread(path, channel_first=False, raw_format_param=None, **kwargs):
    """The samples of an audio file (a path or a binary file object)."""
    from ..data_source_loader import ResourceFileReader   # data_source_loader imports this package
    return backend_manager.module.auread(ResourceFileReader(path), channel_first=channel_first,
                                         raw_format_param=raw_format_param)


def ausave(path, audio_arr, channel_first=False, frame_rate=48000, **kwargs):
    """Write ``audio_arr`` to ``path`` (``.wav``)."""
    return backend_manager.module.ausave(path, audio_arr, channel_first=channel_first,
                                         frame_rate=frame_rate)


def auresize(audio_arr, size, channel_first=False, **kwargs):
    """``audio_arr`` resampled to ``size`` = (samples, channels)."""
    return backend_manager.module.auresize(audio_arr, size, channel_first=channel_first)


auload = auread
auwrite = ausave
