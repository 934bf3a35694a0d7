"""The linear range maps behind image_utils' and audio_utils' pixel/sample intensity helpers,
which keep nnabla's names and argument names (``img``, ``audio_arr``) as thin wrappers."""
import numpy as np

__all__ = ["normalize_range", "rescale_range"]


def normalize_range(values, input_low, input_high):
    """``values`` mapped from [input_low, input_high] to [0, 1] (a constant range: 0 stays 0,
    other values become 1)."""
    span = input_high - input_low
    if span == 0:
        return values if input_low == 0 else values / input_low
    return (values - input_low) / span


def rescale_range(values, input_low, input_high, output_low, output_high, output_type):
    """``values`` mapped from [input_low, input_high] to [output_low, output_high], as
    ``output_type`` (None: their own)."""
    output_type = values.dtype if output_type is None else output_type
    if input_low == output_low and output_low == output_high:
        return np.asarray(values, output_type)
    scaled = normalize_range(values, input_low, input_high) * (output_high - output_low) + output_low
    return scaled.astype(output_type)
