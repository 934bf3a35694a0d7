"""Image backends over Pillow: ``DefaultBackend`` (nnabla_jit's image functions, which also
read and write 16-bit files) and ``PilBackend`` (nnabla's Pillow backend: 8-bit images only;
saving uint16 or ``as_uint16`` raises ValueError, as nnabla does when no other backend is
installed)."""
import numpy as np

from .. import _pil_imread, _pil_imresize, _pil_imsave
from .image_utils_backend import ImageUtilsBackend

__all__ = ["PilBackend", "ImageUtilsBackend"]


class DefaultBackend(ImageUtilsBackend):
    def imread(self, path, grayscale=False, size=None, interpolate="bilinear", channel_first=False,
               as_uint16=False, num_channels=-1):
        return _pil_imread(path, grayscale, size, interpolate, channel_first, as_uint16, num_channels)

    def imsave(self, path, img, channel_first=False, as_uint16=False, auto_scale=True):
        return _pil_imsave(path, img, channel_first, as_uint16, auto_scale)

    def imresize(self, img, size, interpolate="bilinear", channel_first=False):
        return _pil_imresize(img, size, interpolate, channel_first)


class PilBackend(DefaultBackend):
    def imread(self, path, grayscale=False, size=None, interpolate="bilinear", channel_first=False,
               as_uint16=False, num_channels=-1):
        if as_uint16:
            raise ValueError("PilBackend reads 8-bit images only (as_uint16=True); the default "
                             "backend reads 16-bit images")
        return super().imread(path, grayscale, size, interpolate, channel_first, False, num_channels)

    def imsave(self, path, img, channel_first=False, as_uint16=False, auto_scale=True):
        if as_uint16 or (isinstance(img, np.ndarray) and img.dtype == np.uint16):
            raise ValueError("PilBackend saves 8-bit images only (uint16 data or as_uint16=True); "
                             "the default backend saves 16-bit images")
        return super().imsave(path, img, channel_first, False, auto_scale)
