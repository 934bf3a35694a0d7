"""Reading, writing and resizing images (nnabla's ``nnabla.utils.image_utils``), with Pillow.

Arrays are (height, width, channel) -- (height, width) for grey images -- unless
``channel_first``; sizes are given as (width, height), as nnabla does. Pillow comes with
matplotlib; it is imported on first use.
"""
import functools
import os

import numpy as np

from ...serialization.files import atomic_path

__all__ = ["imread", "imsave", "imresize", "imwrite", "imload", "get_available_backends",
           "get_backend", "set_backend", "minmax_auto_scale", "rescale_pixel_intensity",
           "backend_manager"]

_INTERPOLATIONS = ("nearest", "box", "bilinear", "hamming", "bicubic", "lanczos")
_DEEP_GREY_MODES = ("I;16", "I;16B", "I;16L", "I")


def _mode_for(image, grayscale, num_channels):
    """The Pillow mode an 8-bit image is read in."""
    if grayscale:
        return "L"
    if num_channels in (3, 4):
        return "RGB" if num_channels == 3 else "RGBA"
    if image.mode in ("L", "RGB", "RGBA"):
        return image.mode
    if image.mode == "1":
        return "L"
    has_alpha = "A" in image.mode or "transparency" in image.info
    return "RGBA" if has_alpha else "RGB"


def _pil(what):
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("{} needs Pillow to read and write images: pip install Pillow"
                          .format(what)) from None
    return Image


def _resample(Image, interpolate, what):
    if interpolate not in _INTERPOLATIONS:
        raise ValueError("{}: interpolate must be one of {}, got {!r}"
                         .format(what, ", ".join(_INTERPOLATIONS), interpolate))
    return getattr(Image.Resampling, interpolate.upper())


def _checked_size(size, what):
    if (not isinstance(size, (tuple, list)) or len(size) != 2
            or not all(isinstance(s, (int, np.integer)) and s > 0 for s in size)):
        raise ValueError("{}: size must be (width, height) in positive integers, got {!r}"
                         .format(what, size))
    return int(size[0]), int(size[1])


def imread(path, grayscale=False, size=None, interpolate="bilinear", channel_first=False,
           as_uint16=False, num_channels=-1):
    """Read the image at ``path`` (a file name or a binary file object) as a uint8 array
    (uint16 with ``as_uint16``).

    ``grayscale`` converts to grey; ``num_channels`` asks for 0 (a 2-D grey array), 1 (grey with a
    channel axis), 3 (RGB) or 4 (RGBA), -1 keeps what the file has (with ``grayscale``, 3 or 4
    repeat the grey plane, as nnabla does); ``size`` (width, height) resizes with
    ``interpolate``; ``channel_first`` returns (channel, height, width).
    """
    Image = _pil("imread")
    if num_channels not in (-1, 0, 1, 3, 4):
        raise ValueError("imread: num_channels must be one of -1, 0, 1, 3, 4, got {}".format(num_channels))
    if not grayscale and num_channels in (0, 1):
        raise ValueError("imread: num_channels={} needs grayscale=True".format(num_channels))
    name = getattr(path, "name", path)
    try:
        with Image.open(path) as image:
            image.load()
    except FileNotFoundError:
        raise FileNotFoundError("imread: no image file {}".format(name)) from None
    except OSError as e:
        raise ValueError("imread: {} is not an image Pillow can read ({})".format(name, e)) from None
    grey_planes = num_channels if grayscale and num_channels in (3, 4) else 0
    if grey_planes:
        num_channels = 0      # read grey, then repeat the plane
    if image.mode in _DEEP_GREY_MODES:
        array = np.clip(np.asarray(image), 0, 65535).astype(np.uint16)
        if not as_uint16:
            array = (array >> 8).astype(np.uint8)   # nnabla reads every image in 0..255
        if num_channels in (3, 4):
            planes = [array] * 3
            if num_channels == 4:
                planes.append(np.full_like(array, np.iinfo(array.dtype).max))   # opaque
            array = np.stack(planes, axis=2)
    else:
        mode = _mode_for(image, grayscale, num_channels)
        array = np.asarray(image if image.mode == mode else image.convert(mode))
        if as_uint16:
            array = array.astype(np.uint16) * 256
    if size is not None:
        array = imresize(array, size, interpolate)
    if grey_planes:
        array = np.repeat(array[:, :, None], grey_planes, axis=2)
    if num_channels == 1 and array.ndim == 2:
        array = array[:, :, None]
    if channel_first and array.ndim == 3:
        array = array.transpose(2, 0, 1)
    return np.ascontiguousarray(array)


def imresize(img, size, interpolate="bilinear", channel_first=False):
    """``img`` resized to ``size`` (width, height); the type is kept (float images come back
    as float32)."""
    Image = _pil("imresize")
    if not isinstance(img, np.ndarray) or img.ndim not in (2, 3):
        raise ValueError("imresize: img must be a 2-D or 3-D numpy array, got {}".format(
            getattr(img, "shape", type(img).__name__)))
    width, height = _checked_size(size, "imresize")
    resample = _resample(Image, interpolate, "imresize")
    if channel_first and img.ndim == 3:
        img = img.transpose(1, 2, 0)
    channels = img[:, :, None] if img.ndim == 2 else img
    out_dtype = np.float32 if img.dtype.kind == "f" else img.dtype
    out = np.empty((height, width, channels.shape[2]), out_dtype)
    # Channel by channel, as Pillow resizes RGB(A) images too: uint8 planes as 8-bit images,
    # float planes as 32-bit float images, other integers as 32-bit integer images.
    plane_type = np.uint8 if img.dtype == np.uint8 else np.float32 if img.dtype.kind == "f" else np.int32
    for c in range(channels.shape[2]):
        plane = Image.fromarray(np.ascontiguousarray(channels[:, :, c], dtype=plane_type))
        resized = np.asarray(plane.resize((width, height), resample))
        if plane_type is np.int32:
            info = np.iinfo(img.dtype)
            resized = np.clip(resized, info.min, info.max)
        out[:, :, c] = resized
    if img.ndim == 2:
        out = out[:, :, 0]
    elif channel_first:
        out = out.transpose(2, 0, 1)
    return np.ascontiguousarray(out)


def imsave(path, img, channel_first=False, as_uint16=False, auto_scale=True):
    """Write ``img`` to ``path`` (the format follows the extension), atomically.

    uint8 arrays are written as they are; float arrays must hold values in [0, 1] and are
    scaled to 0..255 (0..65535 with ``as_uint16``) with ``auto_scale``. 16-bit files are grey.
    """
    Image = _pil("imsave")
    if not isinstance(img, np.ndarray) or img.ndim not in (2, 3):
        raise ValueError("imsave: img must be a 2-D or 3-D numpy array, got {}".format(
            getattr(img, "shape", type(img).__name__)))
    if channel_first and img.ndim == 3:
        img = img.transpose(1, 2, 0)
    if img.ndim == 3 and img.shape[2] == 1:
        img = img[:, :, 0]
    if img.ndim == 3 and img.shape[2] not in (3, 4):
        raise ValueError("imsave: an image has 1, 3 or 4 channels, got shape {}".format(img.shape))
    if img.dtype not in (np.uint8, np.uint16):
        if not auto_scale:
            raise ValueError("imsave: a float image is saved with auto_scale=True (its values in "
                             "[0, 1] are scaled to integers); got dtype {}".format(img.dtype))
        if not np.all((img >= 0) & (img <= 1)):
            raise ValueError("imsave: the values of a float image must lie in [0, 1]; {} has "
                             "values in [{}, {}]".format(path, np.nanmin(img), np.nanmax(img)))
        img = (img * (65535 if as_uint16 else 255)).astype(np.uint16 if as_uint16 else np.uint8)
    elif img.dtype == np.uint16 and not as_uint16:
        raise ValueError("imsave: img is uint16 but as_uint16=False; pass as_uint16=True, or "
                         "convert to uint8 first")
    elif img.dtype == np.uint8 and as_uint16:
        img = img.astype(np.uint16) * 256 if auto_scale else img.astype(np.uint16)
    if img.dtype == np.uint16:
        if img.ndim == 3:
            raise ValueError("imsave: 16-bit images are written in grey only (Pillow); got shape {}"
                             .format(img.shape))
        image = Image.fromarray(img.astype("<u2"))
    else:
        image = Image.fromarray(np.ascontiguousarray(img))
    ext = os.path.splitext(os.fspath(path))[1].lower()
    file_format = Image.registered_extensions().get(ext)
    if file_format is None:
        raise ValueError("imsave: cannot tell an image format from the extension of {}".format(path))
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            image.save(f, format=file_format)




# The functions above are nnabla_jit's default backend (Pillow, plus 16-bit files as nnabla's
# pypng/cv2 backends handle them); ``set_backend('PilBackend')`` selects nnabla's Pillow
# backend exactly (8-bit only), see ``backend_events.pil_backend``.
_pil_imread, _pil_imsave, _pil_imresize = imread, imsave, imresize


@functools.wraps(_pil_imread)
def imread(path, grayscale=False, size=None, interpolate="bilinear", channel_first=False,
           as_uint16=False, num_channels=-1, **kwargs):
    return backend_manager.module.imread(path, grayscale, size, interpolate, channel_first,
                                         as_uint16, num_channels)


@functools.wraps(_pil_imsave)
def imsave(path, img, channel_first=False, as_uint16=False, auto_scale=True):
    return backend_manager.module.imsave(path, img, channel_first, as_uint16, auto_scale)


@functools.wraps(_pil_imresize)
def imresize(img, size, interpolate="bilinear", channel_first=False, **kwargs):
    return backend_manager.module.imresize(img, size, interpolate, channel_first)


imwrite = imsave
imload = imread

from .backend_events.common import rescale_pixel_intensity  # noqa: E402
from .backend_manager import backend_manager  # noqa: E402


def get_available_backends():
    """The image backends usable here (['PilBackend'] with Pillow installed)."""
    return backend_manager.get_available_backends()


def get_backend():
    return backend_manager.get_backend()


def set_backend(backend):
    """Use ``backend`` for imread/imsave/imresize (nnabla_jit has 'PilBackend')."""
    backend_manager.set_backend(backend)


def minmax_auto_scale(img, as_uint16):
    """``img`` rescaled from [min, max] to the full uint8 range (uint16 with ``as_uint16``)."""
    high, kind = (65535, np.uint16) if as_uint16 else (255, np.uint8)
    return rescale_pixel_intensity(img, input_low=img.min(), input_high=img.max(), output_low=0,
                                   output_high=high, output_type=kind)
