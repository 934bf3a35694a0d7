"""Concrete data sources (nnabla's ``data_source_implements``)."""
from collections import deque

import numpy

from .data_source import DataSource

__all__ = ["SimpleDataSource"]


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
