"""The interface of an image backend."""

__all__ = ["ImageUtilsBackend"]


class ImageUtilsBackend:
    """A backend reads, saves and resizes images; ``accepts_*`` say which files it takes."""

    def __init__(self):
        self._imread_helper = None

    def accept_imread(self, path):
        return "OK"

    def accept_imsave(self, path, img):
        return "OK"

    def accept_imresize(self, img):
        return "OK"

    def imread(self, path, grayscale=False, size=None, interpolate="bilinear", channel_first=False,
               as_uint16=False, num_channels=-1):
        raise NotImplementedError("{}.imread".format(type(self).__name__))

    def imsave(self, path, img, channel_first=False, as_uint16=False, auto_scale=True):
        raise NotImplementedError("{}.imsave".format(type(self).__name__))

    def imresize(self, img, size, interpolate="bilinear", channel_first=False):
        raise NotImplementedError("{}.imresize".format(type(self).__name__))
