"""The audio backend of nnabla_jit: ``.wav`` files through ``scipy.io.wavfile`` (8-bit
unsigned, 16/32-bit integer and 32-bit float samples), and linear resampling. nnabla's
backend is pydub's (``pydub_utils``), which also reads ``.raw`` files; it is not provided."""
import numpy as np
import scipy.io.wavfile

from .common import _auread_after, _auread_before, _auresize_before, _ausave_before

__all__ = ["auread", "ausave", "auresize"]


def auread(source, channel_first=False, raw_format_param=None):
    """Samples of the ``.wav`` ``source`` (a ResourceFileReader) as (samples, channels)."""
    _auread_before(source, raw_format_param)
    if source.ext == ".raw":
        raise ValueError("auread: .raw files need nnabla's pydub backend, which nnabla_jit does "
                         "not provide")
    with source.open() as f:
        audio = scipy.io.wavfile.read(f)[1]
    if audio.ndim == 1:
        audio = audio.reshape(-1, 1)
    return _auread_after(audio, channel_first)


def ausave(path, audio_arr, channel_first=False, frame_rate=48000):
    """Write (samples, channels) ``audio_arr`` as a ``.wav`` file at ``frame_rate``."""
    audio_arr = _ausave_before(path, audio_arr, channel_first)
    if audio_arr.dtype not in (np.uint8, np.int16, np.int32, np.float32):
        raise ValueError("ausave: .wav files hold uint8, int16, int32 or float32 samples, got {}"
                         .format(audio_arr.dtype))
    scipy.io.wavfile.write(path, frame_rate, np.ascontiguousarray(audio_arr))


def auresize(audio_arr, size, channel_first=False):
    """``audio_arr`` resampled to ``size`` = (samples, channels) by linear interpolation; one
    channel is copied to many, many are averaged to one."""
    audio = _auresize_before(audio_arr, size, channel_first)
    samples, channels = int(size[0]), int(size[1])
    have = audio.shape[1]
    if channels != have:
        if have == 1:
            audio = np.repeat(audio, channels, axis=1)
        elif channels == 1:
            audio = audio.mean(axis=1, keepdims=True)
        else:
            raise ValueError("auresize: cannot map {} channels to {}".format(have, channels))
    old = np.linspace(0.0, 1.0, audio.shape[0])
    new = np.linspace(0.0, 1.0, samples)
    out = np.stack([np.interp(new, old, audio[:, c].astype(np.float64)) for c in range(channels)], axis=1)
    out = out.astype(audio_arr.dtype)
    return out.transpose((1, 0)) if channel_first else out
