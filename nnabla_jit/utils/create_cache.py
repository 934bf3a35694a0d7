"""Cache files from a CSV dataset (nnabla's ``nnabla.utils.create_cache``, what
``nnabla_cli conv_dataset`` runs).

    CreateCache("train.csv", shuffle=True).create("cache_dir", normalize=True)
    source = CacheDataSource("cache_dir")

The cache is nnabla's: ``<prefix>_<first>_<last>.npy`` (or ``.h5``, by the ``cache_file_format``
setting) per ``data_source_file_cache_size`` examples, ``cache_index.csv``, ``cache_info.csv``,
``original.csv`` and ``order.csv``; the examples are in the (shuffled) order of the source.
"""
import os
from contextlib import closing
from multiprocessing.pool import ThreadPool

import h5py
import numpy
from tqdm import tqdm

from ..config import nnabla_config
from ..logger import logger
from .communicator_util import single_or_rankzero
from .data_source import _write_atomically, write_csv_rows
from .data_source_implements import CsvDataSource
from .data_source_loader import FileReader
from .progress import progress

__all__ = ["CreateCache", "CsvDataSource", "FileReader", "progress", "single_or_rankzero"]


class CreateCache(CsvDataSource):
    """A CSV data source that writes its examples as a file cache with :meth:`create`."""

    def __init__(self, input_csv_filename, rng=None, shuffle=False, num_of_threads=None):
        self._input_csv_filename = input_csv_filename
        self._shuffle_arg, self._rng_arg = shuffle, rng
        self._cache_size = int(nnabla_config.get("DATA_ITERATOR", "data_source_file_cache_size"))
        self._num_of_threads = int(num_of_threads or nnabla_config.get(
            "DATA_ITERATOR", "data_source_file_cache_num_of_threads"))
        super().__init__(input_csv_filename, shuffle=shuffle, rng=rng)

    def _save_cache(self, chunk):
        first, last, examples = chunk
        path = os.path.join(self._cache_dir, "{}_{:08d}_{:08d}{}".format(
            self._cache_file_name_prefix, first, last, self._cache_file_format))
        logger.info("Creating cache file {}".format(path))
        columns = [numpy.stack([e[k] if isinstance(e[k], numpy.ndarray)
                                else numpy.array(e[k]).astype(numpy.float32) for e in examples])
                   for k in range(len(self._variables))]
        if self._cache_file_format == ".h5":
            def write(f):
                with h5py.File(f, "w") as h5:
                    for name, column in zip(self._variables, columns):
                        h5.create_dataset(name, data=column)
        else:
            def write(f):
                for column in columns:
                    numpy.save(f, column)
        _write_atomically(path, write)
        return os.path.basename(path), len(examples)

    def create(self, output_cache_dirname, normalize=True, cache_file_name_prefix="cache"):
        """Write the cache into ``output_cache_dirname`` (images divided by 255 with
        ``normalize``)."""
        self._normalize = normalize
        self._cache_dir = output_cache_dirname
        self._cache_file_name_prefix = cache_file_name_prefix
        self._cache_file_format = nnabla_config.get("DATA_ITERATOR", "cache_file_format")
        if self._cache_file_format not in (".npy", ".h5"):
            raise ValueError("CreateCache: cache_file_format must be .npy or .h5, got {!r}".format(
                self._cache_file_format))
        os.makedirs(output_cache_dirname, exist_ok=True)
        chunks, examples = [], []
        for position in tqdm(range(self._size), desc="Create cache", unit="example",
                             disable=not single_or_rankzero()):
            examples.append(self._get_data(position))
            if len(examples) == self._cache_size or position == self._size - 1:
                chunks.append((position - len(examples) + 1, position, examples))
                examples = []
        if single_or_rankzero():
            progress("Create cache", 0)
        with closing(ThreadPool(processes=self._num_of_threads)) as pool:
            index_rows = pool.map(self._save_cache, chunks)
        if single_or_rankzero():
            progress("Create cache", 1.0)
        write_csv_rows(os.path.join(output_cache_dirname, "cache_index.csv"), index_rows)
        if self._cache_file_format == ".npy":
            write_csv_rows(os.path.join(output_cache_dirname, "cache_info.csv"),
                           [(name,) for name in self._variables])
        with open(self._input_csv_filename, "rb") as f:
            original = f.read()
        _write_atomically(os.path.join(output_cache_dirname, "original.csv"), lambda f: f.write(original))
        if self._order is not None and self._original_order is not None:
            write_csv_rows(os.path.join(output_cache_dirname, "order.csv"),
                           [[int(a), int(b)] for a, b in zip(self._original_order, self._order)])
