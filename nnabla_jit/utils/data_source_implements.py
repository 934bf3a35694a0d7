"""Concrete data sources (nnabla's ``data_source_implements``): examples from a function
(``SimpleDataSource``), a CSV dataset file (``CsvDataSource``), a folder of cache files
(``CacheDataSource``) or several sources one after the other (``ConcatDataSource``)."""
import csv
import os
import threading
from collections import OrderedDict, deque

import numpy

from ..logger import logger
from .data_source import DataSource, read_cache_file
from .data_source_loader import FileReader, load

__all__ = ["SimpleDataSource", "CsvDataSource", "CacheDataSource", "ConcatDataSource"]


class _OrderSnapshot(object):
    """The order of the examples in one generation (epoch)."""
    __slots__ = ("generation", "order")

    def __init__(self, generation, order):
        self.generation = generation
        self.order = order


class SimpleDataSource(DataSource):
    """Examples from a user function: ``load_func(i)`` returns the tuple of arrays of example
    ``i`` (``0 <= i < num_examples``). The variables are named ``x0, x1, ...`` after the entries
    of ``load_func(0)``. With ``shuffle`` every generation reads a fresh ``rng.permutation``."""

    # Orders of this many recent generations are kept, so slices lagging behind still find theirs.
    MAX_GENERATIONS = 15

    def __init__(self, load_func, num_examples, shuffle=False, rng=None):
        super(SimpleDataSource, self).__init__(shuffle=shuffle, rng=rng)
        self._load_func = load_func
        self._size = num_examples
        self._generation = 0
        self._variables = ["x" + str(i) for i in range(len(self._load_func(0)))]
        self._orders = deque(maxlen=self.MAX_GENERATIONS)
        self.reset()
        self._generate_order(0)

    def _get_data(self, position):
        return self._get_data_of_generation(position, self._generation)

    def _get_data_of_generation(self, position, generation):
        for snapshot in self._orders:
            if snapshot.generation == generation:
                return self._load_func(snapshot.order[position])
        raise ValueError("SimpleDataSource: no order for generation {} (known: {}); a slice of "
                         "this source fell more than {} epochs behind".format(
                             generation, [s.generation for s in self._orders], self.MAX_GENERATIONS))

    def apply_order(self):
        self._generation += 1
        self._generate_order(self._generation)

    def _generate_order(self, generation):
        if any(s.generation == generation for s in self._orders):
            return
        order = self._rng.permutation(self._size) if self._shuffle else numpy.arange(self._size)
        self._orders.append(_OrderSnapshot(generation, order))


class CsvDataSource(DataSource):
    """The examples of a CSV dataset file, one per row after the header.

    The header names the variables: a column ``x`` is variable ``x``; columns ``y__0, y__1, ...``
    together make variable ``y`` (a vector); ``:label`` after a name is a comment, as is a whole
    column whose name starts with '#'. A cell is a number or the path of a file relative to the
    CSV file (an image, .csv, .npy or .wav; see ``data_source_loader``). A single-column number
    comes as a one-element list, the numbers of a vector as a list, files as arrays. Images
    are divided by 255 with ``normalize``.

    A row whose number of cells differs from the header's is an error naming the file and the
    line; so is a file that is missing or cannot be read (when the example is read).
    """

    def __init__(self, filename, shuffle=False, rng=None, normalize=False):
        super(CsvDataSource, self).__init__(shuffle=shuffle, rng=rng)
        self._filename = os.fspath(filename)
        self._normalize = normalize
        self._generation = -1
        self._filereader = FileReader(self._filename)
        try:
            with self._filereader.open(textmode=True) as f:
                reader = csv.reader(f)
                try:
                    lines = list(_numbered_rows(reader))
                except csv.Error as e:
                    raise ValueError(_not_csv(self._filename, reader, e)) from None
        except FileNotFoundError:
            raise FileNotFoundError("CsvDataSource: no dataset file {}".format(self._filename)) from None
        except UnicodeDecodeError as e:
            raise ValueError(_not_utf8(self._filename, e)) from None
        if not lines:
            raise ValueError("{}: the dataset file is empty (it needs a header line)".format(self._filename))
        if len(lines) == 1:
            raise ValueError("{}: the dataset file has a header line but no examples".format(
                self._filename))
        header_line, header = lines[0]
        self._rows = []
        for line, row in lines[1:]:
            if len(row) != len(header):
                raise ValueError("{}, line {}: {} values for the {} columns of the header {}"
                                 .format(self._filename, line, len(row), len(header), header))
            self._rows.append((line, row))
        # (cell index, header cell, variable, whether the cell is one element of a vector)
        self._columns = [(k, cell) + _parse_column(cell, "{}, line {}".format(self._filename, header_line))
                         for k, cell in enumerate(header) if not cell.startswith("#")]
        self._size = len(self._rows)
        self._variables = tuple(OrderedDict.fromkeys(name for _, _, name, _ in self._columns))
        self._original_source_uri = self._filename
        self._original_order = list(range(self._size))
        self._order = list(range(self._size))
        self.reset()

    def _value(self, cell, line, column, element):
        """A cell's number (a one-element list when ``element`` is False) or its file's data."""
        try:
            number = float(cell)
            return number if element else [number]
        except ValueError:
            pass
        where = "{}, line {}, column '{}'".format(self._filename, line, column)
        ext = os.path.splitext(cell)[1].lower()
        try:
            loader = load(ext)
        except ValueError:
            raise ValueError("{}: {!r} is neither a number nor the name of a file of a supported "
                             "type".format(where, cell)) from None
        try:
            with self._filereader.open(cell) as f:
                return loader(f, normalize=self._normalize)
        except FileNotFoundError:
            raise FileNotFoundError("{}: no file {} (looked for {})".format(
                where, cell, self._filereader.path(cell))) from None
        except (OSError, ValueError) as e:
            raise ValueError("{}: cannot load {} ({})".format(where, cell, e)) from None

    def _get_data(self, position):
        line, row = self._rows[self._order[position]]
        values = OrderedDict()
        for k, cell, name, indexed in self._columns:
            value = self._value(row[k], line, cell, indexed)
            if indexed:
                values.setdefault(name, []).append(value)
            else:
                values[name] = value
        return tuple(values.values())

    def reset(self):
        if self._shuffle:
            self._order = list(self._rng.permutation(list(range(self._size))))
        self._generation += 1
        super(CsvDataSource, self).reset()


def _not_utf8(filename, error):
    """The message for a dataset file that is not UTF-8 text: the file, the line, the byte."""
    line, column = 1, 0
    try:
        with open(filename, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    line, column = number, e.start
                    break
    except OSError:
        pass
    return ("{}, line {}: byte 0x{:02x} at column {} is not UTF-8 (encoding tried: utf-8-sig); "
            "save the dataset file as UTF-8".format(filename, line,
                                                     error.object[error.start], column + 1))


def read_csv_rows(filename):
    """The rows of a CSV text file (UTF-8, a byte-order mark allowed). Text that is not UTF-8, or
    that the csv module cannot split (a field over its size limit), is a ValueError naming the
    file and the line."""
    try:
        with open(filename, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            try:
                return list(reader)
            except csv.Error as e:
                raise ValueError(_not_csv(filename, reader, e)) from None
    except UnicodeDecodeError as e:
        raise ValueError(_not_utf8(filename, e)) from None


def _not_csv(filename, reader, error):
    return "{}, line {}: not CSV text ({})".format(filename, reader.line_num, error)


def _numbered_rows(reader):
    """(line number, row) of the rows of a csv reader, blank lines left out (the number is
    that of the row's first line)."""
    line = 1
    for row in reader:
        if len(row) > 1 or "".join(row).strip():
            yield line, row
        line = reader.line_num + 1


def _parse_column(header, where):
    """(variable name, whether the column is one element of a vector) of a header cell
    ``NAME[__INDEX][:LABEL]``."""
    variable, vector, _ = header.split(":", 1)[0].partition("__")
    if not variable:
        raise ValueError("{}: the header cell {!r} names no variable".format(where, header))
    return variable, bool(vector)


class CacheDataSource(DataSource):
    """The examples in a folder of cache files written by ``DataSourceWithFileCache`` (of
    nnabla_jit or nnabla): ``.npy`` files listed in ``cache_index.csv`` with the variables
    named in ``cache_info.csv``, or ``.h5`` files (one dataset per variable). With
    ``normalize`` uint8 data is divided by 255 and uint16 data by 65535 (as float32). With
    ``shuffle`` each reset shuffles the files and the examples within each."""

    def __init__(self, cachedir, shuffle=False, rng=None, normalize=False):
        super(CacheDataSource, self).__init__(shuffle=shuffle, rng=rng)
        self._cachedir = os.fspath(cachedir)
        self._normalize = normalize
        self._generation = -1
        self._lock = threading.Lock()
        if not os.path.isdir(self._cachedir):
            raise FileNotFoundError("CacheDataSource: no cache folder {}".format(self._cachedir))
        self._variables = self._read_info()
        self._cache_files = self._read_index()
        if not self._cache_files:
            raise ValueError("CacheDataSource: {} holds no cache files (cache_index.csv or *.h5)"
                             .format(self._cachedir))
        self._loaded = (None, None)
        self._original_order = [(path, k) for path, count in self._cache_files for k in range(count)]
        self.reset()

    def _read_info(self):
        """The variable names of cache_info.csv (.npy caches), or None for .h5 caches."""
        path = os.path.join(self._cachedir, "cache_info.csv")
        if not os.path.exists(path):
            return None
        with open(path, newline="", encoding="utf-8-sig") as f:
            return [row[0] for row in csv.reader(f) if row]

    def _read_index(self):
        """(path, example count) of each cache file."""
        index = os.path.join(self._cachedir, "cache_index.csv")
        files = []
        if os.path.exists(index):
            with open(index, newline="", encoding="utf-8-sig") as f:
                for line, row in _numbered_rows(csv.reader(f)):
                    if len(row) != 2 or not row[1].strip().isdigit():
                        raise ValueError("{}, line {}: expected '<cache file>,<example count>', got "
                                         "{}".format(index, line, row))
                    files.append((os.path.join(self._cachedir, row[0]), int(row[1])))
        else:
            for name in FileReader(self._cachedir).listdir():
                path = os.path.join(self._cachedir, name)
                arrays = read_cache_file(path, None)
                counts = {len(a) for a in arrays.values()}
                if len(counts) != 1:
                    raise ValueError("{}: its datasets hold different numbers of examples {}"
                                     .format(path, sorted(counts)))
                files.append((path, counts.pop()))
        if self._variables is None and files:
            if os.path.splitext(files[0][0])[1].lower() != ".h5":
                raise ValueError("CacheDataSource: {} has .npy cache files but no cache_info.csv "
                                 "naming their variables".format(self._cachedir))
            self._variables = list(read_cache_file(files[0][0], None).keys())
        for path, _ in files:
            if not os.path.exists(path):
                raise FileNotFoundError("CacheDataSource: {} lists {}, which does not exist"
                                        .format(os.path.join(self._cachedir, "cache_index.csv"), path))
        return files

    def _arrays(self, path):
        if self._loaded[0] != path:
            arrays = read_cache_file(path, self._variables)
            missing = [v for v in self._variables if v not in arrays]
            if missing:
                raise ValueError("{}: no data for variables {}".format(path, missing))
            self._loaded = (path, arrays)
        return self._loaded[1]

    def _get_data(self, position):
        with self._lock:
            self._position = position
            path, k = self._order[position]
            arrays = self._arrays(path)
            data = [arrays[name][k] for name in self._variables]
        if self._normalize:
            data = [d.astype(numpy.float32) * (1.0 / 255.0) if d.dtype == numpy.uint8 else
                    d.astype(numpy.float32) * (1.0 / 65535.0) if d.dtype == numpy.uint16 else d
                    for d in data]
        return data

    def reset(self):
        with self._lock:
            super(CacheDataSource, self).reset()
            files = range(len(self._cache_files))
            if self._shuffle:
                files = self._rng.permutation(list(files))
            self._order = []
            for f in files:
                path, count = self._cache_files[f]
                rows = self._rng.permutation(list(range(count))) if self._shuffle else range(count)
                self._order.extend((path, int(k)) for k in rows)
            self._size = len(self._order)
            self._generation += 1


class ConcatDataSource(DataSource):
    """The examples of several data sources one after the other (shuffled together with
    ``shuffle``). The sources must have the same number of variables; the names are the first
    one's."""

    def __init__(self, data_source_list, shuffle=True, rng=None):
        if not data_source_list:
            raise ValueError("ConcatDataSource: data_source_list is empty")
        first = data_source_list[0]
        for k, source in enumerate(data_source_list):
            if len(source.variables) != len(first.variables):
                raise ValueError("ConcatDataSource: source {} has variables {}, source 0 has {}"
                                 .format(k, source.variables, first.variables))
        super(ConcatDataSource, self).__init__(shuffle=shuffle, rng=rng)
        self._data_sources = list(data_source_list)
        self._ends = list(numpy.cumsum([source.size for source in self._data_sources]))
        self._size = int(self._ends[-1])
        self._variables = first.variables
        logger.info("ConcatDataSource of {} sources, {} examples".format(len(self._data_sources), self._size))
        self.reset()

    def _get_data(self, position):
        index = int(self._indexes[position])
        k = int(numpy.searchsorted(self._ends, index, side="right"))
        start = int(self._ends[k - 1]) if k > 0 else 0
        return self._data_sources[k]._get_data(index - start)

    def reset(self):
        self._indexes = self._rng.permutation(self._size) if self._shuffle else numpy.arange(self._size)
        super(ConcatDataSource, self).reset()

    def close(self):
        if not self._closed:
            for source in self._data_sources:
                source.close()
            super(ConcatDataSource, self).close()
