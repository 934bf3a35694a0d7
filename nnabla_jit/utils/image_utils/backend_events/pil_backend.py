"""The Pillow backend: nnabla_jit's image functions (:mod:`nnabla_jit.utils.image_utils`)."""
from .. import _pil_imread, _pil_imresize, _pil_imsave
from .image_utils_backend import ImageUtilsBackend

__all__ = ["PilBackend", "ImageUtilsBackend"]


class PilBackend(ImageUtilsBackend):
    def imread(self, path, grayscale=False, size=None, interpolate="bilinear", channel_first=False,
               as_uint16=False, num_channels=-1):
        return _pil_imread(path, grayscale, size, interpolate, channel_first, as_uint16, num_channels)

    def imsave(self, path, img, channel_first=False, as_uint16=False, auto_scale=True):
        return _pil_imsave(path, img, channel_first, as_uint16, auto_scale)

    def imresize(self, img, size, interpolate="bilinear", channel_first=False):
        return _pil_imresize(img, size, interpolate, channel_first)
