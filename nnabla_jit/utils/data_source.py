"""Data sources: what a :class:`~nnabla_jit.utils.data_iterator.DataIterator` reads examples from.

A data source hands out one example (a tuple with one array per variable) at a time, at its
``position`` within the current epoch, in an *order* it may reshuffle between epochs. Orders are
labelled with a *generation* (epoch number) so that several slices of one source (one per worker)
read the same permutation in the same epoch. Wrappers add caching (``DataSourceWithMemoryCache``,
``DataSourceWithFileCache``) or restrict a source to a range (``SlicedDataSource``). The random draws (one
``rng.permutation(size)`` per reshuffle) are nnabla's, so a seeded iterator yields the same
batches in both libraries.
"""
import atexit
import csv
import io
import os
import shutil
import tempfile
import threading

import numpy

from ..logger import logger
from ..serialization import hdf5
from ..serialization.files import atomic_path
from .data_source_loader import read_npy

__all__ = ["DataSource", "DataSourceWithMemoryCache", "DataSourceWithFileCache",
           "DataSourceWithFileCacheError", "SlicedDataSource", "read_cache_file"]

# nnabla's default for [DATA_ITERATOR] data_source_buffer_max_size: a source whose examples
# together take less memory than this is kept in memory by DataSourceWithMemoryCache.
MEMORY_CACHE_MAX_BYTES = 1 << 30
# nnabla's default for [DATA_ITERATOR] data_source_file_cache_size: examples per cache file.
FILE_CACHE_SIZE = 100


class DataSource(object):
    """Base class of data sources.

    Subclasses set ``_size`` and ``_variables`` (the names of the tuple's entries) and implement
    ``_get_data(position)``; shuffling ones also ``_generate_order(generation)`` /
    ``apply_order()``. ``rng`` defaults to ``numpy.random.RandomState(313)``, as in nnabla.
    """

    def __init__(self, shuffle=False, rng=None):
        logger.info("DataSource with shuffle({})".format(shuffle))
        self._rng = numpy.random.RandomState(313) if rng is None else rng
        self._variables = None
        self._generation = -1
        self._shuffle = shuffle
        self._position = 0
        self._size = 0
        self._closed = False
        self._order = None
        self._original_order = None
        self._original_source_uri = None
        atexit.register(self.close)

    def _get_data(self, position):
        raise NotImplementedError("{} does not implement _get_data(position)".format(type(self).__name__))

    def _get_data_of_generation(self, position, generation):
        """The example at ``position`` in the order of epoch ``generation`` (sources without
        per-generation orders ignore it)."""
        return self._get_data(position)

    def _generate_order(self, generation):
        """Make the order of epoch ``generation`` (kept beside older ones, which slices of this
        source may still read). Sources with a fixed order have nothing to do."""

    def __next__(self):
        return self.next()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.close()

    def close(self):
        if not self._closed:
            atexit.unregister(self.close)
            self._closed = True

    @property
    def order(self):
        return self._order

    @property
    def variables(self):
        """Names of the entries of each example."""
        return self._variables

    def next(self):
        """The example at the current position; advances the position."""
        data = self._get_data(self._position)
        self._position += 1
        return data

    @property
    def position(self):
        """Position within the current epoch."""
        return self._position

    @property
    def size(self):
        """Number of examples."""
        return self._size

    @property
    def shuffle(self):
        """Whether the examples are reshuffled every epoch."""
        return self._shuffle

    @shuffle.setter
    def shuffle(self, value):
        self._shuffle = value

    def reset(self):
        """Back to the start of the epoch."""
        self._position = 0

    def apply_order(self):
        """Called once an epoch has been read to its end: time to draw the next order."""


def _example_nbytes(example):
    return sum(numpy.asarray(d, dtype=numpy.float32 if isinstance(d, list) else None).nbytes
               for d in example)


class _WrappingDataSource(DataSource):
    """A data source over another one, ``data_source``: same size and variables; closing it
    closes ``data_source``."""

    def __init__(self, data_source, shuffle, rng):
        super(_WrappingDataSource, self).__init__(shuffle=shuffle, rng=rng)
        self._data_source = data_source
        self._size = data_source._size
        self._variables = data_source.variables

    def close(self):
        if not self._closed:
            self._data_source.close()
        super(_WrappingDataSource, self).close()


class DataSourceWithMemoryCache(_WrappingDataSource):
    """Keeps the examples of ``data_source`` in memory once read, when they fit in
    ``MEMORY_CACHE_MAX_BYTES``, and reshuffles the cached examples itself (from its second
    reset on, like nnabla); otherwise it reads through to ``data_source``."""

    def __init__(self, data_source, shuffle=False, rng=None):
        logger.info("Using DataSourceWithMemoryCache")
        super(DataSourceWithMemoryCache, self).__init__(data_source, shuffle, rng)
        self._buffer_max_size = MEMORY_CACHE_MAX_BYTES
        self._order = list(range(self._size))
        self._cache = []
        self._data_size = _example_nbytes(self._get_data_func(0))
        self._on_memory = self._data_size * self._size < self._buffer_max_size
        if self._on_memory:
            logger.info("On-memory")
        self._generation = -1

    def _get_data_func(self, position):
        return self._data_source._get_data(position)

    def _get_data(self, position):
        if self._on_memory:
            # The first pass reads the source in its own order and fills the cache; later passes
            # read the cache in this wrapper's order.
            if self._order[position] < len(self._cache):
                data = self._cache[self._order[position]]
            else:
                data = self._get_data_func(position)
                self._cache.append(data)
        else:
            data = self._data_source._get_data(position)
        self._position = position
        return data

    def reset(self):
        if self._on_memory:
            self._generation += 1
            if self._shuffle and self._generation > 0:
                self._order = list(self._rng.permutation(self._size))
            else:
                self._order = list(range(self._size))
            if self._position == 0:
                self._generation = -1
            else:
                self._data_source._position = self._position
                self._data_source.reset()
        else:
            self._data_source.reset()
            self._generation = self._data_source._generation
            self._position = self._data_source._position
        super(DataSourceWithMemoryCache, self).reset()


class SlicedDataSource(DataSource):
    """The examples ``slice_start <= i < slice_end`` of ``data_source``, read in the order the
    source gives each generation (so that slices of one shuffled source stay disjoint)."""

    def __init__(self, data_source, shuffle=False, rng=None, slice_start=None, slice_end=None):
        logger.info("Using SlicedDataSource")
        super(SlicedDataSource, self).__init__(shuffle=shuffle, rng=rng)
        if slice_start is None or slice_end is None or not 0 <= slice_start < slice_end <= data_source.size:
            raise ValueError("SlicedDataSource: slice [{}, {}) is not a non-empty range of the {} "
                             "examples".format(slice_start, slice_end, data_source.size))
        self._data_source = data_source
        self._variables = data_source._variables[:]
        self._slice_start = slice_start
        self._slice_end = slice_end
        self._size = slice_end - slice_start
        self._generation = 0

    def apply_order(self):
        self._generation += 1
        self._data_source._generate_order(self._generation)

    def reset(self):
        self._data_source.reset()
        self._data_source._position = self._slice_start
        self._position = 0

    def _get_data(self, position):
        self._position = position
        return self._data_source._get_data_of_generation(self._slice_start + position, self._generation)


def _is_rank_zero():
    """Whether this process shows progress: the only one, or rank 0 of an MPI run."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if name in os.environ:
            return os.environ[name] == "0"
    return True


def _write_atomically(path, write):
    """Call ``write(binary file)`` on a temporary file beside ``path``, then rename it."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            write(f)


def write_csv_rows(path, rows):
    """Write ``rows`` to ``path`` as CSV (UTF-8, LF line ends), atomically."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    _write_atomically(path, lambda f: f.write(text.getvalue().encode("utf-8")))


def read_cache_file(path, variables):
    """{variable: array of the examples} of one cache file: nnabla's ``.npy`` layout (the
    arrays of ``variables`` saved one after the other) or ``.h5`` (one dataset each)."""
    if os.path.splitext(path)[1].lower() == ".h5":
        # only this file's own datasets, each within the expansion limits (hdf5.py)
        with hdf5.open_file(path) as h5:
            names = set(hdf5.checked_datasets(h5, path, os.path.getsize(path)))
            return {name: h5[name][()] for name in h5.keys() if name in names}
    arrays = {}
    with open(path, "rb") as f:
        for name in variables:
            try:
                arrays[name] = read_npy(f, path)
            except (ValueError, EOFError, OSError) as e:
                raise DataSourceWithFileCacheError("{}: cannot read the array of variable '{}' "
                                                   "({})".format(path, name, e)) from None
    return arrays


class DataSourceWithFileCacheError(Exception):
    """A data source cannot be written to, or read from, cache files."""


class DataSourceWithFileCache(_WrappingDataSource):
    """Copies the examples of ``data_source`` into cache files and reads them from there.

    The files, in ``cache_dir`` (a temporary folder removed by ``close()`` when None), are
    nnabla's: ``<cache_file_name_prefix>_<first>_<last>.npy`` for each run of FILE_CACHE_SIZE
    examples (the arrays of the variables saved one after the other, positions first..last),
    ``cache_index.csv`` (file name and example count per line), ``cache_info.csv`` (the variable
    names), and for a CSV source ``original.csv`` (a copy of it) and ``order.csv`` (row, position
    pairs). :class:`~nnabla_jit.utils.data_source_implements.CacheDataSource` of either library
    reads them. With ``shuffle`` each reset shuffles the order of the files and, within each,
    the order of the examples (nnabla's random draws).
    """

    def __init__(self, data_source, cache_dir=None, cache_file_name_prefix="cache", shuffle=False,
                 rng=None):
        logger.info("Using DataSourceWithFileCache")
        super(DataSourceWithFileCache, self).__init__(data_source, shuffle, rng)
        self._cache_file_name_prefix = cache_file_name_prefix
        self._tempdir_created = cache_dir is None
        self._cache_dir = tempfile.mkdtemp() if cache_dir is None else cache_dir
        os.makedirs(self._cache_dir, exist_ok=True)
        logger.info("Cache Directory is {}".format(self._cache_dir))
        self._lock = threading.Lock()
        self._files = []               # (path, number of examples), in position order
        self._loaded = (None, None)    # (file index, {variable: array}) read last
        try:
            self._create_cache()
        except BaseException:
            self.close()   # no half-made temporary folder is left behind
            raise
        self._file_order = list(range(len(self._files)))
        self._row_orders = [list(range(count)) for _, count in self._files]
        self._make_position_table()

    def _create_cache(self):
        from tqdm import tqdm
        examples = []
        for position in tqdm(range(self._size), desc="Create cache", unit="example",
                             disable=not _is_rank_zero(), leave=False):
            examples.append(self._data_source._get_data(position))
            if len(examples) == FILE_CACHE_SIZE or position == self._size - 1:
                self._write_cache_file(position - len(examples) + 1, position, examples)
                examples = []
        write_csv_rows(os.path.join(self._cache_dir, "cache_index.csv"),
                       [(os.path.basename(path), count) for path, count in self._files])
        write_csv_rows(os.path.join(self._cache_dir, "cache_info.csv"),
                       [(name,) for name in self._variables])
        source = self._data_source
        if source._original_source_uri is not None:
            with open(source._original_source_uri, "rb") as f:
                original = f.read()
            _write_atomically(os.path.join(self._cache_dir, "original.csv"), lambda f: f.write(original))
        if source._order is not None and source._original_order is not None:
            write_csv_rows(os.path.join(self._cache_dir, "order.csv"),
                           # A cache source's original positions are (file, index) pairs,
                           # written as their text as nnabla does.
                           [[a if isinstance(a, tuple) else int(a), b if isinstance(b, tuple) else int(b)]
                            for a, b in zip(source._original_order, source._order)])

    def _write_cache_file(self, first, last, examples):
        """Save the examples at positions first..last into one cache file."""
        path = os.path.join(self._cache_dir, "{}_{:08d}_{:08d}.npy".format(
            self._cache_file_name_prefix, first, last))
        columns = []
        for k, name in enumerate(self._variables):
            # nnabla stores values that are not arrays (lists, numbers) as float32.
            values = [e[k] if isinstance(e[k], numpy.ndarray) else numpy.array(e[k]).astype(numpy.float32)
                      for e in examples]
            for offset, value in enumerate(values):
                if value.shape != values[0].shape:
                    raise DataSourceWithFileCacheError(
                        "cannot cache variable '{}': the example at position {} has shape {}, the "
                        "one at position {} has shape {}".format(
                            name, first, values[0].shape, first + offset, value.shape))
            columns.append(numpy.stack(values))
        logger.info("Creating cache file {}".format(path))

        def write(f):
            for column in columns:
                numpy.save(f, column)
        _write_atomically(path, write)
        self._files.append((path, len(examples)))

    def _make_position_table(self):
        self._positions = [(f, row) for f in self._file_order for row in self._row_orders[f]]
        self._order = [f * FILE_CACHE_SIZE + row for f, row in self._positions]

    def _get_data(self, position):
        with self._lock:
            self._position = position
            file_index, row = self._positions[position]
            if self._loaded[0] != file_index:
                self._loaded = (file_index, read_cache_file(self._files[file_index][0], self._variables))
            arrays = self._loaded[1]
            return [arrays[name][row] for name in self._variables]

    def reset(self):
        with self._lock:
            if self._shuffle:
                self._file_order = list(self._rng.permutation(self._file_order))
                for k in range(len(self._row_orders)):
                    self._row_orders[k] = list(self._rng.permutation(self._row_orders[k]))
            self._make_position_table()
            self._data_source.reset()
            self._position = 0
            self._generation += 1

    def close(self):
        if not self._closed and self._tempdir_created:
            shutil.rmtree(self._cache_dir, ignore_errors=True)
        super(DataSourceWithFileCache, self).close()
