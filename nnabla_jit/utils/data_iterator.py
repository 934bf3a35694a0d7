"""Mini-batches from a data source (nnabla's ``nnabla.utils.data_iterator``).

    di = data_iterator_simple(load_func, num_examples, batch_size, shuffle=True)
    x, y = di.next()

``next()`` returns a tuple with one array per variable, each stacking ``batch_size`` examples.
Iteration never ends by default: a batch that runs past the last example wraps around to the
first ones, the epoch count goes up, the epoch callbacks run, and a shuffling source draws the
next epoch's order. With ``stop_exhausted=True`` the iterator stops instead (a ``for`` loop over
it then reads one epoch; an incomplete last batch is dropped). With ``use_thread`` (the default)
the next batch is read on a background thread while the caller works on the current one: one
thread per iterator, kept for its life (starting a thread per batch, as nnabla does, cost a
third of a small network's training step here).
"""
import atexit
import os
import queue
import threading

import numpy

from ..logger import logger
from .data_source import DataSourceWithFileCache, DataSourceWithMemoryCache, SlicedDataSource
from .data_source_implements import CacheDataSource, ConcatDataSource, CsvDataSource, SimpleDataSource

__all__ = ["DataIterator", "data_iterator", "data_iterator_simple", "data_iterator_csv_dataset",
           "data_iterator_cache", "data_iterator_concat_datasets", "CacheDataSource",
           "ConcatDataSource", "CsvDataSource", "DataSourceWithFileCache",
           "DataSourceWithMemoryCache", "SimpleDataSource", "SlicedDataSource"]


class DataIterator(object):
    """Collects batches of ``batch_size`` examples from ``data_source``.

    Args:
        data_source (DataSource): where the examples come from.
        batch_size (int): examples per batch.
        rng (numpy.random.RandomState): kept for nnabla compatibility (the source shuffles).
        use_thread (bool): read the next batch on a background thread.
        epoch_begin_callbacks, epoch_end_callbacks (list of callables): called with the epoch
            index when an epoch begins (from the second one on) or ends.
        stop_exhausted (bool): raise StopIteration at the end of the data instead of wrapping.
    """

    def __init__(self, data_source, batch_size, rng=None, use_thread=True,
                 epoch_begin_callbacks=[], epoch_end_callbacks=[], stop_exhausted=False):
        logger.info("Using DataIterator")
        if int(batch_size) < 1:
            raise ValueError("DataIterator: batch_size must be positive, got {}".format(batch_size))
        self._rng = numpy.random.RandomState(313) if rng is None else rng
        self._stop_exhausted = stop_exhausted
        self._data_source = data_source
        self._shuffle = data_source.shuffle
        self._variables = data_source.variables
        self._batch_size = int(batch_size)
        self._epoch_end_callbacks = list(epoch_end_callbacks)
        self._epoch_begin_callbacks = list(epoch_begin_callbacks)
        self._size = data_source.size
        self._queue = queue.Queue()
        self._exhausted = False
        self._data_source.reset()
        self._current_epoch = 0
        self._use_thread = use_thread
        self._reader = None          # the thread reading ahead, and the process it runs in
        self._reader_pid = None
        self._wanted = queue.SimpleQueue()   # True: read the next batch; False: stop
        # Slices share their parent's order, and a slice's reset draws the next permutation
        # for all of them: when a batch is read then decides what it holds. nnabla's thread
        # per batch reads it as soon as it is asked for, before the caller goes on; the reader
        # thread here would read it later, after whatever the caller does next (another
        # slice's reset included). A slice therefore reads ahead in the caller.
        self._reads_in_caller = isinstance(data_source, SlicedDataSource)
        if self._use_thread:
            self._start_prefetch()
        self._closed = False
        atexit.register(self.close)

    def _start_prefetch(self):
        """Ask the reader thread for the next batch, starting it on first use (and again in a
        forked child, which has no copy of it); a slice reads it at once (see ``__init__``)."""
        if self._reads_in_caller:
            try:
                self._next()
            except Exception as error:   # raised by the next next(), as the reader's are
                self._queue.put((error, 0))
            return
        if self._reader is None or self._reader_pid != os.getpid():
            self._reader = threading.Thread(target=self._read_ahead, daemon=True,
                                            name="DataIterator reader")
            self._reader_pid = os.getpid()
            self._reader.start()
        self._wanted.put(True)

    def _read_ahead(self):
        while self._wanted.get():
            try:
                self._next()
            except Exception as error:   # handed to next(), which would otherwise wait forever
                self._queue.put((error, 0))

    def __iter__(self):
        return self

    def __next__(self):
        return self.next()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.close()

    def close(self):
        """Wait for the background read and close the data source."""
        if not self._closed:
            atexit.unregister(self.close)
            if self._reader is not None and self._reader_pid == os.getpid():
                self._wanted.put(False)   # after the batch being read, if any
                self._reader.join()
            self._data_source.close()
            self._closed = True

    @property
    def epoch(self):
        """How many times the data has been read to its end."""
        return self._current_epoch

    @property
    def position(self):
        """Position of the data source within the current epoch."""
        return self._data_source.position

    @property
    def size(self):
        """Number of examples of the data source."""
        return self._size

    @property
    def variables(self):
        """Names of the arrays ``next()`` returns."""
        return self._variables

    @property
    def batch_size(self):
        """Number of examples in each batch."""
        return self._batch_size

    def _next(self):
        """Read one batch from the source into the queue, as (arrays, epochs completed) or
        (None, 0) when the data is exhausted."""
        source = self._data_source
        if self._stop_exhausted and source.position + self._batch_size > self._size:
            self._queue.put((None, 0))
            return
        columns = [[] for _ in self._variables]
        n_reset = 0
        for _ in range(self._batch_size):
            example = source.next()
            if example is None:
                self._queue.put((None, 0))
                return
            if source.position >= self._size and not self._stop_exhausted:
                # End of the data: the rest of this batch comes from the start, in this epoch's
                # order; the next epoch's order is drawn once the batch is complete.
                n_reset += 1
                source.reset()
            for column, value in zip(columns, example):
                column.append(value)
        if n_reset:
            source.apply_order()
        self._queue.put((tuple(numpy.array(c) for c in columns), n_reset))

    def next(self):
        """The next batch: a tuple of arrays, one per variable, ``batch_size`` examples each."""
        if self._exhausted:
            raise StopIteration
        if not self._use_thread:
            self._next()
        data, n_reset = self._queue.get()   # the reader's last act for a batch: it is done
        if self._use_thread and isinstance(data, Exception):
            self._start_prefetch()
            raise data
        if data is None:
            if self._stop_exhausted and self._data_source.position + self._batch_size >= self._size:
                self._exhausted = True
                raise StopIteration
            if self._use_thread:
                logger.log(99, "next() got None retrying...")
                self._next()
                data, n_reset = self._queue.get()
        if self._use_thread:
            self._start_prefetch()
        for _ in range(n_reset):
            self._callback_epoch_end()
            self._current_epoch += 1
            self._callback_epoch_begin()
        return data

    def slice(self, rng, num_of_slices=None, slice_pos=None, slice_start=None, slice_end=None,
              cache_dir=None, use_cache=False, drop_last=False):
        """A new iterator over part of the data: slice ``slice_pos`` of ``num_of_slices`` equal
        slices (one per worker), or the examples ``slice_start <= i < slice_end``.

        Slices of a shuffled source read the same permutation each epoch, so they stay disjoint.
        Without ``drop_last`` the last slices are shifted back to keep their full length (some
        examples then appear in two slices); with it the remainder is dropped. ``use_cache``
        keeps the slice in memory (or in files under ``cache_dir``), shuffled with ``rng``.
        """
        if num_of_slices is not None and slice_pos is not None and slice_start is None and slice_end is None:
            if not 0 <= slice_pos < num_of_slices:
                raise ValueError("DataIterator.slice: slice_pos={} is not in [0, num_of_slices={})"
                                 .format(slice_pos, num_of_slices))
            slice_start, slice_end = _slice_range(self._size, num_of_slices, slice_pos, drop_last)
        elif not (num_of_slices is None and slice_pos is None and slice_start is not None
                  and slice_end is not None):
            raise ValueError("DataIterator.slice: give either num_of_slices and slice_pos, or "
                             "slice_start and slice_end")

        if cache_dir is None:
            # Reuse the file cache directory of a wrapped source, if there is one.
            source = self._data_source
            while hasattr(source, "_data_source"):
                cache_dir = getattr(source, "_cache_dir", cache_dir)
                source = source._data_source

        sliced = SlicedDataSource(self._data_source, self._data_source.shuffle,
                                  slice_start=slice_start, slice_end=slice_end)
        if use_cache:
            if cache_dir is not None:
                sliced = DataSourceWithFileCache(
                    sliced, cache_dir=cache_dir,
                    cache_file_name_prefix="cache_sliced_{:08d}_{:08d}".format(slice_start, slice_end),
                    shuffle=self._shuffle, rng=rng)
            sliced = DataSourceWithMemoryCache(sliced, shuffle=self._shuffle, rng=rng)
        return DataIterator(sliced, self._batch_size)

    def _callback_epoch_end(self):
        for callback in self._epoch_end_callbacks:
            callback(self.epoch)

    def _callback_epoch_begin(self):
        for callback in self._epoch_begin_callbacks:
            callback(self.epoch)

    def register_epoch_end_callback(self, callback):
        """Call ``callback(epoch)`` at the end of every epoch."""
        self._epoch_end_callbacks.append(callback)

    def register_epoch_begin_callback(self, callback):
        """Call ``callback(epoch)`` at the beginning of every epoch after the first."""
        self._epoch_begin_callbacks.append(callback)


def _slice_range(size, n_slices, rank, drop_last):
    """[start, end) of slice ``rank`` of ``n_slices``: equal lengths, the last ones shifted back
    to stay inside the data (or, with ``drop_last``, the remainder left out)."""
    if drop_last:
        length = size // n_slices
        start = length * rank
        return start, start + length
    length = (size + n_slices - 1) // n_slices
    start = (length * rank) % size
    end = start + length
    if end > size:
        start, end = start - (end - size), size
    return start, end


def data_iterator(data_source, batch_size, rng=None, use_thread=True, with_memory_cache=True,
                  with_file_cache=False, cache_dir=None, epoch_begin_callbacks=[],
                  epoch_end_callbacks=[], stop_exhausted=False):
    """A :class:`DataIterator` over ``data_source``, wrapped in a file cache (under
    ``cache_dir``, a temporary directory when None) and/or a memory cache, as asked."""
    if with_file_cache:
        data_source = DataSourceWithFileCache(data_source=data_source, cache_dir=cache_dir,
                                              shuffle=data_source.shuffle, rng=rng)
    if with_memory_cache:
        data_source = DataSourceWithMemoryCache(data_source, shuffle=data_source.shuffle, rng=rng)
    return DataIterator(data_source, batch_size, use_thread=use_thread,
                        epoch_begin_callbacks=epoch_begin_callbacks,
                        epoch_end_callbacks=epoch_end_callbacks, stop_exhausted=stop_exhausted)


def data_iterator_simple(load_func, num_examples, batch_size, shuffle=False, rng=None,
                         use_thread=True, with_memory_cache=False, with_file_cache=False,
                         cache_dir=None, epoch_begin_callbacks=[], epoch_end_callbacks=[],
                         stop_exhausted=False):
    """Batches of the examples ``load_func(i)`` returns, ``0 <= i < num_examples``.

    ``load_func(i)`` must return a tuple of arrays of the same shapes for every ``i``; a batch
    is the tuple of their stacks. ``shuffle`` draws a new order every epoch from ``rng``
    (``numpy.random.RandomState(313)`` when None).

        def load(i):
            return images[i], numpy.array([labels[i]])
        di = data_iterator_simple(load, len(images), batch_size=32, shuffle=True)
    """
    return data_iterator(SimpleDataSource(load_func, num_examples, shuffle=shuffle, rng=rng),
                         batch_size=batch_size, use_thread=use_thread,
                         with_memory_cache=with_memory_cache, with_file_cache=with_file_cache,
                         cache_dir=cache_dir, epoch_begin_callbacks=epoch_begin_callbacks,
                         epoch_end_callbacks=epoch_end_callbacks, stop_exhausted=stop_exhausted)


def data_iterator_csv_dataset(uri, batch_size, shuffle=False, rng=None, use_thread=True,
                              normalize=True, with_memory_cache=True, with_file_cache=True,
                              cache_dir=None, epoch_begin_callbacks=[], epoch_end_callbacks=[],
                              stop_exhausted=False):
    """Batches of the CSV dataset file ``uri`` (see
    :class:`~nnabla_jit.utils.data_source_implements.CsvDataSource`): the variables are the
    header's, file cells (images, ...) are read relative to the CSV file, images divided by
    255 with ``normalize``. By default the examples are copied into cache files first (under
    ``cache_dir``, kept; a temporary folder when None) and kept in memory.

        di = data_iterator_csv_dataset("train.csv", 64, shuffle=True)
        x, y = di.next()
    """
    source = CsvDataSource(uri, shuffle=shuffle, rng=rng, normalize=normalize)
    # As in nnabla, the caches draw from their own default generators, not from rng.
    return data_iterator(source, batch_size=batch_size, use_thread=use_thread,
                         with_memory_cache=with_memory_cache, with_file_cache=with_file_cache,
                         cache_dir=cache_dir, epoch_begin_callbacks=epoch_begin_callbacks,
                         epoch_end_callbacks=epoch_end_callbacks, stop_exhausted=stop_exhausted)


def data_iterator_cache(uri, batch_size, shuffle=False, rng=None, use_thread=True, normalize=True,
                        with_memory_cache=True, epoch_begin_callbacks=[], epoch_end_callbacks=[],
                        stop_exhausted=False):
    """Batches of the cache folder ``uri`` written by a file cache (``cache_dir`` of
    ``data_iterator_csv_dataset``, of this library or of nnabla); uint8 / uint16 data is scaled
    to [0, 1] with ``normalize``."""
    source = CacheDataSource(uri, shuffle=shuffle, rng=rng, normalize=normalize)
    # As in nnabla, the caches draw from their own default generators, not from rng.
    return data_iterator(source, batch_size=batch_size, use_thread=use_thread,
                         with_memory_cache=with_memory_cache,
                         epoch_begin_callbacks=epoch_begin_callbacks,
                         epoch_end_callbacks=epoch_end_callbacks, stop_exhausted=stop_exhausted)


def data_iterator_concat_datasets(data_source_list, batch_size, shuffle=False, rng=None,
                                  use_thread=True, with_memory_cache=True, with_file_cache=False,
                                  cache_dir=None, epoch_begin_callbacks=[], epoch_end_callbacks=[],
                                  stop_exhausted=False):
    """Batches of several data sources read as one (see
    :class:`~nnabla_jit.utils.data_source_implements.ConcatDataSource`)."""
    source = ConcatDataSource(data_source_list, shuffle=shuffle, rng=rng)
    # As in nnabla, the caches draw from their own default generators, not from rng.
    return data_iterator(source, batch_size=batch_size, use_thread=use_thread,
                         with_memory_cache=with_memory_cache, with_file_cache=with_file_cache,
                         cache_dir=cache_dir, epoch_begin_callbacks=epoch_begin_callbacks,
                         epoch_end_callbacks=epoch_end_callbacks, stop_exhausted=stop_exhausted)
