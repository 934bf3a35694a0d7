"""Loading the files a CSV dataset names (nnabla's ``nnabla.utils.data_source_loader``).

A CSV dataset cell that is not a number is the path of a file, relative to the CSV file; its
extension picks the loader:

* images (.png .jpg .jpeg .bmp .gif .tif .tiff): a (channel, height, width) array, uint8 as
  stored or, with ``normalize``, float64 in [0, 1] (16-bit images: uint16, or / 65535);
* .csv: a float64 array of its rows; .npy: the saved array; .wav: the samples, (length,
  channels).

Only local files are read (nnabla also reads http and S3 locations).
"""
import contextlib
import csv
import math
import os

import numpy

from .audio_utils import auread, auresize
from .download import download, get_data_home
from .image_utils import _pil, imread, imresize

__all__ = ["FileReader", "ResourceFileReader", "load", "load_image", "load_image_imread",
           "load_csv", "load_npy", "read_npy", "load_wav", "load_audio", "load_audio_pydub", "imread",
           "imresize", "auread", "auresize", "download", "get_data_home", "get_file_extension",
           "pydub_available"]

# nnabla decodes other audio formats with pydub when it is installed; nnabla_jit does not.
pydub_available = False


class FileReader:
    """Opens ``base_uri`` or files named relative to its folder."""

    def __init__(self, base_uri):
        base_uri = os.fspath(base_uri)
        if "://" in base_uri:
            raise ValueError("FileReader: {} is a URI; nnabla_jit reads datasets from local files "
                             "only".format(base_uri))
        self._base_uri = base_uri
        self.base_ext = os.path.splitext(base_uri)[1].lower()

    def path(self, filename=None):
        """The absolute path of ``filename`` (relative to the base's folder; '\\' separators
        work too), or of the base itself."""
        if filename is None:
            return os.path.abspath(self._base_uri)
        return os.path.abspath(os.path.join(os.path.dirname(self._base_uri.replace("\\", "/")),
                                            filename.replace("\\", "/")))

    @contextlib.contextmanager
    def open(self, filename=None, textmode=False, encoding="utf-8-sig"):
        """Open ``filename`` (or the base) for reading; the file object carries ``ext``."""
        path = self.path(filename)
        f = open(path, "rt", encoding=encoding, newline="") if textmode else open(path, "rb")
        with f:
            f.ext = os.path.splitext(path)[1].lower()
            yield f

    def listdir(self):
        """The ``.h5`` files in the base folder, sorted."""
        return [f for f in sorted(os.listdir(self._base_uri)) if os.path.splitext(f)[1].lower() == ".h5"]


def load_image_imread(file, shape=None, max_range=1.0):
    """An image file as a (channel, height, width) array, resized to ``shape`` (channel,
    height, width) if given. Values are scaled to [0, ``max_range``] (float64); a negative
    ``max_range`` keeps the stored integers."""
    image = imread(file, as_uint16=_is_16_bit(file))
    if image.ndim == 2:
        image = image[:, :, None]
    height, width, channels = image.shape
    if shape is not None:
        out_channels, out_height, out_width = shape
        if out_channels != channels:
            raise ValueError("load_image: {} has {} channels, the dataset asks for {}"
                             .format(getattr(file, "name", file), channels, out_channels))
        if (out_height, out_width) != (height, width):
            image = imresize(image, (out_width, out_height))
            image = image.reshape(out_height, out_width, channels)
    image = image.transpose(2, 0, 1)
    if max_range < 0:
        return image
    full_scale = 65535.0 if image.dtype == numpy.uint16 else 255.0
    return image * (max_range / full_scale)


def _is_16_bit(file):
    """Whether the image holds 16-bit values (read as uint16 to keep them)."""
    Image = _pil("load_image")
    position = file.tell() if hasattr(file, "tell") else None
    with Image.open(file) as image:
        deep = image.mode in ("I;16", "I;16B", "I;16L", "I")
    if position is not None:
        file.seek(position)
    return deep


def load_image(file, shape=None, normalize=False):
    """An image as (channel, height, width): stored integers, or with ``normalize`` float64 in
    [0, 1]."""
    return load_image_imread(file, shape, 1.0 if normalize else -1)


def load_csv(file, shape=None, normalize=False):
    """The numbers of a CSV file (binary file object) as a float64 array of its rows, reshaped
    to ``shape`` if given."""
    name = getattr(file, "name", "the CSV file")
    rows = []
    text = file.read().decode("utf-8-sig").splitlines()
    for number, row in enumerate(csv.reader(text), 1):
        if not row:
            continue
        try:
            rows.append([float(x) for x in row])
        except ValueError:
            raise ValueError("{}, line {}: expected numbers, got {}".format(name, number, row)) from None
    try:
        array = numpy.array(rows, numpy.float64)
        return array if shape is None else array.reshape(shape)
    except ValueError as e:
        raise ValueError("{}: cannot make an array of its rows ({})".format(name, e)) from None


def read_npy(f, label=None):
    """The next array of the open binary .npy file ``f``. Its header is checked first: one that
    claims more data than the file holds (a shape of 2**40 elements would have numpy allocate
    terabytes) is a ValueError naming ``label`` (the file's name by default)."""
    label = label or getattr(f, "name", "the .npy file")
    fmt = numpy.lib.format
    start = f.tell()
    try:
        version = fmt.read_magic(f)
        header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = header(f)
    except (ValueError, EOFError) as e:
        raise ValueError("{}: not a .npy file ({})".format(label, e)) from None
    data_start = f.tell()
    end = f.seek(0, os.SEEK_END)
    needed = math.prod(shape) * dtype.itemsize
    if needed > end - data_start:
        raise ValueError("{}: the header says shape {} of {} ({} bytes) but the file holds {} bytes "
                         "of data".format(label, shape, dtype, needed, end - data_start))
    f.seek(start)
    return numpy.load(f, allow_pickle=False)


def load_npy(path, shape=None, normalize=False):
    """The array saved in a .npy file (a path or a binary file object), reshaped to ``shape``
    if given."""
    if isinstance(path, (str, os.PathLike)):
        with open(path, "rb") as f:
            array = read_npy(f, os.fspath(path))
    else:
        array = read_npy(path)
    return array if shape is None else array.reshape(shape)


def load_wav(path, shape=None, normalize=False):
    """The samples of a .wav file as (length, channels), reshaped to ``shape`` if given."""
    import scipy.io.wavfile
    samples = scipy.io.wavfile.read(path)[1]
    if shape is not None:
        return samples.reshape(shape)
    return samples.reshape(-1, 1) if samples.ndim == 1 else samples


load_audio = load_wav

# nnabla's name: users and tools add loaders for more extensions to this table.
_load_functions = {
    ".bmp": load_image, ".jpg": load_image, ".jpeg": load_image, ".png": load_image,
    ".gif": load_image, ".tif": load_image, ".tiff": load_image,
    ".csv": load_csv, ".npy": load_npy, ".wav": load_wav,
}


def load(ext):
    """The loader of files with extension ``ext`` (e.g. '.png'): ``loader(file, shape=None,
    normalize=False)``."""
    try:
        return _load_functions[ext.lower()]
    except KeyError:
        raise ValueError('File format with extension "{}" is not supported (supported: {})'
                         .format(ext, " ".join(sorted(_load_functions)))) from None


def load_audio_pydub(path, shape=None, normalize=False):
    """nnabla reads audio other than .wav with pydub, which nnabla_jit does not use."""
    raise NotImplementedError("load_audio_pydub: nnabla_jit reads .wav files only (load_wav); "
                              "pydub is not a dependency")


# Leading bytes (hex) at an offset, per extension: how a file object without a name is typed.
_SIGNATURES = {
    ".bmp": (["424d"], 0x0), ".dib": (["424d"], 0x0), ".pgm": (["50350a"], 0x0),
    ".jpeg": (["ffd8ff"], 0x0), ".jpg": (["ffd8ff"], 0x0), ".png": (["89504e470d0a1a0a"], 0x0),
    ".tif": (["492049"], 0x0), ".tiff": (["492049"], 0x0), ".eps": (["c5d0d3c6"], 0x0),
    ".gif": (["474946383761", "474946383961"], 0x0), ".ico": (["00000100"], 0x0),
    ".dcm": (["4449434d"], 0x80), ".wav": (["52494646"], 0x0),
}


def get_file_extension(source):
    """The extension of a path, of a named file object, or, for a nameless binary stream,
    the one its leading bytes identify ('' if none); the stream is left at its start."""
    if isinstance(source, str):
        return os.path.splitext(source)[1].lower()
    if not hasattr(source, "read"):
        return ""
    if hasattr(source, "name") and isinstance(source.name, str):
        return os.path.splitext(source.name)[1].lower()
    ext = ""
    for extension, (signatures, offset) in _SIGNATURES.items():
        source.seek(offset)
        head = source.read(16).hex()
        source.seek(0)
        if any(head.startswith(s) for s in signatures):
            ext = extension
    return ext


class ResourceFileReader:
    """A path or a seekable binary stream, with its extension (``ext``) found; ``open()``
    yields a binary file object carrying ``ext``."""

    def __init__(self, source):
        self._source = source
        if isinstance(source, str):
            self.handler = FileReader(source)
            self.ext = self.handler.base_ext
            if not self.ext:
                with self.handler.open() as f:
                    self.ext = get_file_extension(f)
        elif hasattr(source, "read") and self._is_binary_stream(source):
            self.handler = source
            self.ext = get_file_extension(source)
        else:
            raise ValueError("ResourceFileReader only accept path str, binary file handler or BytesIO")

    @staticmethod
    def _is_binary_stream(source):
        if not hasattr(source, "seek"):
            return False
        try:
            source.seek(0)
            head = source.read(1)
            source.seek(0)
        except Exception:
            return False
        return not isinstance(head, str)

    @contextlib.contextmanager
    def open(self):
        if isinstance(self.handler, FileReader):
            with self.handler.open() as f:
                yield f
        else:
            self.handler.seek(0)
            self.handler.ext = self.ext
            yield self.handler
            self.handler.seek(0)
