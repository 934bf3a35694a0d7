"""Intensity helpers and argument checks shared by the audio backends."""
import os

import numpy as np

from ..intensity_range import normalize_range, rescale_range

__all__ = ["normalize_intensity", "rescale_intensity"]


def normalize_intensity(audio_arr, input_low, input_high):
    """``audio_arr`` mapped from [input_low, input_high] to [0, 1] (a constant range: 0 stays
    0, other values become 1)."""
    return normalize_range(audio_arr, input_low, input_high)


def rescale_intensity(audio_arr, input_low=0, input_high=255, output_low=0, output_high=255,
                      output_type=None):
    """``audio_arr`` mapped from [input_low, input_high] to [output_low, output_high] (computed
    in float64), as ``output_type`` (default: its own)."""
    if not isinstance(audio_arr, np.ndarray):
        raise ValueError("rescale_intensity() supports only numpy.ndarray as input")
    return rescale_range(audio_arr, np.float64(input_low), np.float64(input_high),
                         np.float64(output_low), np.float64(output_high), output_type)


def _auto_scale_before(audio_arr, datatype):
    if not isinstance(audio_arr, np.ndarray):
        raise ValueError("the input audio_arr for rescaling must be numpy.ndarray.")
    if not isinstance(datatype, (np.dtype, type)):
        raise ValueError("the out_datatype for rescaling must be numpy.dtype or type.")
    if np.dtype(datatype).itemsize > 4:
        raise ValueError("the itemsize of out_datatype for rescaling should not greater than 4.")


def _auread_before(source, raw_format_param):
    if source.ext not in (".wav", ".raw"):
        raise ValueError("path should contains filename extension and only .raw .wav formats are "
                         "now supported.")
    if source.ext == ".raw" and raw_format_param is None:
        raise ValueError("raw_format_param which contains sample_width, frame_rate, and channels "
                         "need to be provided when read raw format audio file.")


def _auread_after(audio, channel_first):
    return audio.transpose((1, 0)) if channel_first and audio.ndim == 2 else audio


def _ausave_before(path, audio_arr, channel_first):
    if not isinstance(audio_arr, np.ndarray):
        raise ValueError("the input audio_arr for ausave must be numpy.ndarray.")
    if audio_arr.ndim != 2:
        raise ValueError("size must be (samples, channels) liked")
    filepath = path if isinstance(path, str) else path.name
    os.makedirs(os.path.dirname(os.path.abspath(filepath)), exist_ok=True)
    if os.path.splitext(filepath)[-1] != ".wav":
        raise ValueError("only support save as .wav format for now.")
    if audio_arr.dtype.itemsize > 4:
        raise ValueError("audio_arr's dtype.itemsize should not greater than 4")
    return audio_arr.transpose((1, 0)) if channel_first else audio_arr


def _auresize_before(audio_arr, size, channel_first):
    if not isinstance(audio_arr, np.ndarray):
        raise ValueError("the input audio_arr for auresize must be numpy.ndarray.")
    if not isinstance(size, (list, tuple)) or len(size) != 2:
        raise ValueError("size must be (samples, channels) liked")
    return audio_arr.transpose((1, 0)) if channel_first else audio_arr
