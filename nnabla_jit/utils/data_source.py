"""Data sources: what a :class:`~nnabla_jit.utils.data_iterator.DataIterator` reads examples from.

A data source hands out one example (a tuple with one array per variable) at a time, at its
``position`` within the current epoch, in an *order* it may reshuffle between epochs. Orders are
labelled with a *generation* (epoch number) so that several slices of one source (one per worker)
read the same permutation in the same epoch. Wrappers add caching (``DataSourceWithMemoryCache``)
or restrict a source to a range (``SlicedDataSource``). The random draws (one
``rng.permutation(size)`` per reshuffle) are nnabla's, so a seeded iterator yields the same
batches in both libraries.
"""
import atexit

import numpy

from ..logger import logger

__all__ = ["DataSource", "DataSourceWithMemoryCache", "SlicedDataSource"]

# nnabla's default for [DATA_ITERATOR] data_source_buffer_max_size: a source whose examples
# together take less memory than this is kept in memory by DataSourceWithMemoryCache.
MEMORY_CACHE_MAX_BYTES = 1 << 30


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


class DataSourceWithMemoryCache(DataSource):
    """Keeps the examples of ``data_source`` in memory once read, when they fit in
    ``MEMORY_CACHE_MAX_BYTES``, and reshuffles the cached examples itself (from its second
    reset on, like nnabla); otherwise it reads through to ``data_source``."""

    def __init__(self, data_source, shuffle=False, rng=None):
        logger.info("Using DataSourceWithMemoryCache")
        super(DataSourceWithMemoryCache, self).__init__(shuffle=shuffle, rng=rng)
        self._buffer_max_size = MEMORY_CACHE_MAX_BYTES
        self._size = data_source._size
        self._variables = data_source.variables
        self._data_source = data_source
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

    def close(self):
        if not self._closed:
            atexit.unregister(self.close)
            self._data_source.close()
            self._closed = True

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
