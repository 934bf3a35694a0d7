"""``Data``: the data side of a framework program (a subclass builds its data sources and
iterators and answers ``reset``/``next``/``size``)."""
from ...utils.data_iterator import data_iterator
from ...utils.data_source import DataSource

__all__ = ["Data", "DataSource", "data_iterator"]


class Data:
    """Base class of a program's data: ``__init__`` builds ``self._data_source`` through
    ``__data_source__`` and ``self._data_iterator`` through ``__data_iterator__``; subclasses
    override those and ``reset`` (before an epoch), ``next`` (the next batch), ``size``."""

    class CustomDataSource(DataSource):
        """Where a subclass defines its own DataSource."""

    def __data_source__(self):
        return self.CustomDataSource()

    def __data_iterator__(self, data_source):
        return data_iterator(data_source)

    def __init__(self):
        self._data_source = self.__data_source__()
        self._data_iterator = self.__data_iterator__(self._data_source)

    def reset(self):
        """Reset the iterator (before an epoch). The base class does nothing."""

    def next(self):
        """The next batch. The base class gives None."""

    def size(self):
        """The batch size. The base class gives None."""
