"""Pixel-range helpers shared by the image backends."""
import numpy as np

from ....logger import logger
from ...intensity_range import normalize_range, rescale_range

__all__ = ["normalize_pixel_intensity", "rescale_pixel_intensity", "upscale_uint8_image",
           "upscale_float_image", "upscale_pixel_intensity", "check_type_and_cast_if_necessary"]


def normalize_pixel_intensity(img, input_low, input_high):
    """``img`` mapped from [input_low, input_high] to [0, 1] (a constant range: 0 stays 0, other
    values become 1)."""
    return normalize_range(img, input_low, input_high)


def rescale_pixel_intensity(img, input_low=0, input_high=255, output_low=0, output_high=255,
                            output_type=None):
    """``img`` mapped from [input_low, input_high] to [output_low, output_high], as
    ``output_type`` (default: its own)."""
    if not isinstance(img, np.ndarray):
        raise ValueError("rescale_pixel_intensity() supports only numpy.ndarray as input")
    return rescale_range(img, input_low, input_high, output_low, output_high, output_type)


def upscale_uint8_image(img, as_uint16):
    return np.asarray(img, np.uint16) * 256 if as_uint16 else img


def upscale_float_image(img, as_uint16):
    """A [0, 1] float image as uint16 (x 65535) or uint8 (x 255)."""
    return np.asarray(img * 65535, np.uint16) if as_uint16 else np.asarray(img * 255, np.uint8)


def upscale_pixel_intensity(img, as_uint16):
    if img.dtype == np.uint16:
        return img
    if img.dtype == np.uint8:
        return upscale_uint8_image(img, as_uint16)
    return upscale_float_image(img, as_uint16)


def check_type_and_cast_if_necessary(img, as_uint16):
    if not as_uint16 and img.dtype == np.uint16:
        raise ValueError("Input img type is uint16, but as_uint16 is False. If you want to save img "
                         "as uint8, be sure all pixel values are in the range of [0, 255] and cast "
                         "it before you call imsave function.")
    if as_uint16 and img.dtype != np.uint16:
        logger.warning("Save image as uint16, but the original input image type is not uint16")
        img = np.asarray(img, np.uint16)
    return img
