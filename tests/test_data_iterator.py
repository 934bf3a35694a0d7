"""nnabla_jit.utils.data_iterator / data_source: batches, epochs, shuffling, callbacks, slices."""
import os
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nnabla_jit.utils import data_source as ds_module
from nnabla_jit.utils.data_iterator import DataIterator, data_iterator, data_iterator_simple
from nnabla_jit.utils.data_source import DataSource, DataSourceWithMemoryCache
from nnabla_jit.utils.data_source_implements import SimpleDataSource


def load(i):
    return np.array([i, -i]), np.array(i * 0.5, dtype=np.float32)


def reference_batches(size, batch_size, n_batches, rng, shuffle):
    """nnabla's order: a batch running past the end continues from the start in the same
    order; the next epoch's permutation is drawn once that batch is complete."""
    order = rng.permutation(size) if shuffle else np.arange(size)
    position, batches = 0, []
    for _ in range(n_batches):
        indices, wrapped = [], 0
        for _ in range(batch_size):
            indices.append(int(order[position]))
            position += 1
            if position >= size:
                position, wrapped = 0, wrapped + 1
        if wrapped:
            order = rng.permutation(size) if shuffle else np.arange(size)
        batches.append((indices, wrapped))
    return batches


def read(di, n):
    return [di.next() for _ in range(n)]


def test_plain_batches_and_epochs():
    di = data_iterator_simple(load, 10, 3, use_thread=False)
    assert di.size == 10 and di.batch_size == 3 and di.variables == ["x0", "x1"]
    seen = []
    for _ in range(8):
        x, y = di.next()
        assert x.shape == (3, 2) and y.shape == (3,) and y.dtype == np.float32
        np.testing.assert_array_equal(x[:, 1], -x[:, 0])
        np.testing.assert_array_equal(y, x[:, 0] * 0.5)
        seen.append((x[:, 0].tolist(), di.epoch, di.position))
    assert seen == [([0, 1, 2], 0, 3), ([3, 4, 5], 0, 6), ([6, 7, 8], 0, 9), ([9, 0, 1], 1, 2),
                    ([2, 3, 4], 1, 5), ([5, 6, 7], 1, 8), ([8, 9, 0], 2, 1), ([1, 2, 3], 2, 4)]
    di.close()


def test_shuffle_matches_nnabla():
    # Produced by nnabla 1.39: data_iterator_simple(load, 10, 4, shuffle=True) (rng=None).
    di = data_iterator_simple(load, 10, 4, shuffle=True, use_thread=False)
    got = [di.next()[0][:, 0].tolist() for _ in range(5)]
    assert got == [[5, 3, 2, 4], [0, 6, 1, 9], [7, 8, 5, 3], [1, 3, 7, 5], [2, 8, 9, 0]]


@given(st.integers(1, 12), st.integers(1, 7), st.booleans(), st.integers(0, 1000), st.booleans())
def test_order_model(size, batch_size, shuffle, seed, use_thread):
    di = data_iterator_simple(load, size, batch_size, shuffle=shuffle,
                              rng=np.random.RandomState(seed), use_thread=use_thread)
    expected = reference_batches(size, batch_size, 6, np.random.RandomState(seed), shuffle)
    epoch = 0
    for indices, wrapped in expected:
        x, _ = di.next()
        epoch += wrapped
        assert x[:, 0].tolist() == indices
        assert di.epoch == epoch
    di.close()


def test_callbacks():
    events = []
    di = data_iterator_simple(load, 5, 2, use_thread=False,
                              epoch_begin_callbacks=[lambda e: events.append(("begin", e))],
                              epoch_end_callbacks=[lambda e: events.append(("end", e))])
    di.register_epoch_end_callback(lambda e: events.append(("end2", e)))
    di.register_epoch_begin_callback(lambda e: events.append(("begin2", e)))
    read(di, 2)
    assert events == []
    di.next()   # 4, 0: the first epoch ends inside this batch
    assert events == [("end", 0), ("end2", 0), ("begin", 1), ("begin2", 1)]
    read(di, 2)   # 1 2, 3 4: the second epoch ends exactly at the batch end
    assert events[4:] == [("end", 1), ("end2", 1), ("begin", 2), ("begin2", 2)]
    di.close()


def test_batch_larger_than_data_counts_every_epoch():
    ends = []
    di = data_iterator_simple(load, 3, 7, use_thread=False, epoch_end_callbacks=[ends.append])
    x, _ = di.next()
    assert x[:, 0].tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert di.epoch == 2 and ends == [0, 1]


@pytest.mark.parametrize("use_thread", [False, True])
@pytest.mark.parametrize("size", [9, 10])
def test_stop_exhausted(use_thread, size):
    with data_iterator_simple(load, size, 3, stop_exhausted=True, use_thread=use_thread) as di:
        batches = [x[:, 0].tolist() for x, _ in di]
        assert batches == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]   # an incomplete batch is dropped
        assert di.epoch == 0
        with pytest.raises(StopIteration, match="^$"):
            di.next()


def test_thread_gives_the_same_batches():
    a = data_iterator_simple(load, 11, 4, shuffle=True, rng=np.random.RandomState(3), use_thread=True)
    b = data_iterator_simple(load, 11, 4, shuffle=True, rng=np.random.RandomState(3), use_thread=False)
    for _ in range(7):
        xa, ya = a.next()
        xb, yb = b.next()
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
        assert a.epoch == b.epoch
    a.close()
    b.close()


def test_one_reader_thread_for_the_iterators_life():
    """The batches are read ahead by one thread kept for the iterator's life (not one thread per
    batch), which close() stops; a forked child reads with a thread of its own."""
    before = set(threading.enumerate())
    di = data_iterator_simple(load, 11, 4, use_thread=True)
    reader = di._reader
    for _ in range(20):
        di.next()
    assert di._reader is reader and reader.is_alive()
    assert set(threading.enumerate()) - before == {reader}
    if hasattr(os, "fork"):
        while di._queue.empty():   # fork once the batch asked for is read (as a fork must)
            reader.join(0.01)
        with warnings.catch_warnings():   # Python 3.12+ warns about forking with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            child = os.fork()
        if child == 0:   # the child's next() must not wait for the parent's thread
            ok = di.next()[0].shape == (4, 2) and di._reader is not reader
            os._exit(0 if ok else 1)
        assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
    di.close()
    reader.join(5)
    assert not reader.is_alive()


@pytest.mark.parametrize("use_thread", [False, True])
def test_load_errors_reach_the_caller(use_thread):
    def failing_load(i):
        if i == 3:
            raise OSError("cannot read example 3")
        return load(i)

    di = data_iterator_simple(failing_load, 6, 2, use_thread=use_thread)
    assert di.next()[0][:, 0].tolist() == [0, 1]
    with pytest.raises(OSError, match="example 3"):
        di.next()
    di.close()


def test_memory_cache_reads_the_source_once():
    calls = []

    def counting_load(i):
        calls.append(i)
        return load(i)

    di = data_iterator_simple(counting_load, 10, 4, shuffle=True, with_memory_cache=True,
                              use_thread=False)
    assert isinstance(di._data_source, DataSourceWithMemoryCache)
    batches = [di.next()[0][:, 0].tolist() for _ in range(8)]
    # load_func(0) names the variables; the cache probes example 0 once; then one pass reads it all
    assert len(calls) == 12 and sorted(calls[2:]) == list(range(10))
    # Produced by nnabla 1.39 with the same arguments: the cache keeps the first epoch's order
    # for the second epoch and reshuffles its own copy from the third on.
    assert batches == [[5, 3, 2, 4], [0, 6, 1, 9], [7, 8, 5, 3], [2, 4, 0, 6], [1, 9, 7, 8],
                       [6, 4, 2, 0], [5, 1, 3, 8], [9, 7, 0, 1]]
    di.close()


def test_memory_cache_reads_through_when_too_large(monkeypatch):
    monkeypatch.setattr(ds_module, "MEMORY_CACHE_MAX_BYTES", 16)
    calls = []
    source = SimpleDataSource(lambda i: calls.append(i) or load(i), 4)
    di = data_iterator(source, 2, use_thread=False)
    assert not di._data_source._on_memory
    got = [di.next()[0][:, 0].tolist() for _ in range(4)]
    assert got == [[0, 1], [2, 3], [0, 1], [2, 3]]
    assert len(calls) == 2 + 8


def test_simple_data_source():
    source = SimpleDataSource(load, 4, shuffle=True, rng=np.random.RandomState(0))
    assert source.size == 4 and source.variables == ["x0", "x1"] and source.shuffle
    order = np.random.RandomState(0).permutation(4)
    assert [int(source.next()[0][0]) for _ in range(4)] == order.tolist()
    assert source.position == 4
    source.reset()
    assert source.position == 0
    source.apply_order()   # the next generation's order
    rng = np.random.RandomState(0)
    rng.permutation(4)
    assert [int(source.next()[0][0]) for _ in range(4)] == rng.permutation(4).tolist()
    source.close()


@pytest.mark.parametrize("drop_last", [False, True])
def test_slices_share_the_permutation(drop_last):
    di = data_iterator_simple(load, 20, 3, shuffle=True, rng=np.random.RandomState(5), use_thread=False)
    order = np.random.RandomState(5).permutation(20)
    ranges = [(0, 7), (7, 14), (13, 20)] if not drop_last else [(0, 6), (6, 12), (12, 18)]
    for pos, (start, end) in enumerate(ranges):
        sliced = di.slice(None, num_of_slices=3, slice_pos=pos, drop_last=drop_last)
        assert sliced.size == end - start
        first_epoch = np.concatenate([sliced.next()[0][:, 0] for _ in range((end - start) // 3)])
        assert first_epoch.tolist() == order[start:start + len(first_epoch)].tolist()
        sliced.close()


def test_interleaved_slices_match_nnabla():
    # Produced by nnabla 1.39 with the same calls: slices of one shuffled source, read in turn,
    # draw each epoch's permutation from the source's rng in the order they reach it.
    di = data_iterator_simple(load, 20, 3, shuffle=True, use_thread=False)
    slices = [di.slice(None, num_of_slices=2, slice_pos=0), di.slice(None, num_of_slices=2, slice_pos=1),
              di.slice(None, slice_start=4, slice_end=9)]
    got = [[s.next()[0][:, 0].tolist() for s in slices] for _ in range(5)]
    assert got == [[[4, 6, 1], [18, 12, 2], [17, 5, 11]], [[3, 17, 5], [0, 19, 16], [14, 15, 17]],
                   [[11, 14, 15], [9, 7, 10], [9, 11, 6]], [[13, 4, 6], [8, 18, 12], [17, 2, 9]],
                   [[10, 13, 2], [8, 1, 5], [16, 15, 7]]]
    assert [s.epoch for s in slices] == [1, 1, 3]
    for s in slices:
        s.close()


class ShuffledIndexSource(DataSource):
    """A source as nnabla's examples write them (CIFAR-10's): a new permutation at each
    ``reset``, no per-generation orders; its examples are their indices."""

    def _get_data(self, position):
        return (np.array([self._indexes[position]]),)

    def __init__(self, size):
        super().__init__(shuffle=True)
        self._size = size
        self._variables = ("x",)
        self.rng = np.random.RandomState(313)
        self.reset()

    def reset(self):
        self._indexes = self.rng.permutation(self._size)
        super().reset()


def test_train_and_validation_slices_of_one_source_read_in_nnabla_order():
    # DARTS's split of one CIFAR-10 iterator into a training and a validation slice: each
    # slice's reset draws a new permutation of the shared source, so when a batch is read
    # matters. nnabla 1.39 (recorded) reads each next batch as soon as it is asked for.
    di = data_iterator(ShuffledIndexSource(20), 4, None, False, False)
    train = di.slice(rng=None, slice_start=0, slice_end=10)
    valid = di.slice(rng=None, slice_start=10, slice_end=20)
    got = [[train.next()[0].ravel().tolist(), valid.next()[0].ravel().tolist()] for _ in range(4)]
    assert got == [[[2, 9, 1, 4], [15, 0, 2, 14]], [[8, 17, 4, 11], [12, 3, 10, 18]],
                   [[16, 9, 13, 8], [2, 18, 0, 17]], [[5, 8, 18, 12], [1, 4, 16, 2]]]
    for it in (train, valid, di):
        it.close()


def test_slice_with_memory_cache():
    di = data_iterator_simple(load, 12, 2, use_thread=False)
    sliced = di.slice(np.random.RandomState(0), slice_start=2, slice_end=6, use_cache=True)
    assert isinstance(sliced._data_source, DataSourceWithMemoryCache)
    assert [sliced.next()[0][:, 0].tolist() for _ in range(2)] == [[2, 3], [4, 5]]
    sliced.close()


def test_slice_argument_errors():
    di = data_iterator_simple(load, 10, 2, use_thread=False)
    with pytest.raises(ValueError, match="num_of_slices"):
        di.slice(None, num_of_slices=2)
    with pytest.raises(ValueError, match="num_of_slices"):
        di.slice(None, num_of_slices=2, slice_pos=0, slice_start=0, slice_end=3)
    with pytest.raises(ValueError, match="slice_pos"):
        di.slice(None, num_of_slices=2, slice_pos=2)
    with pytest.raises(ValueError, match="slice"):
        di.slice(None, slice_start=5, slice_end=11)


@pytest.mark.parametrize("keep_dir", [False, True])
def test_cache_wrappers_close_the_source_they_wrap_and_only_their_own_temporary_folder(tmp_path, keep_dir):
    source = SimpleDataSource(load, 3)
    wrapper = ds_module.DataSourceWithFileCache(
        source, cache_dir=str(tmp_path / "cache") if keep_dir else None)
    assert (wrapper.size, wrapper.variables) == (3, source.variables)
    cache_dir = wrapper._cache_dir
    wrapper.close()
    wrapper.close()     # closing twice is harmless
    assert wrapper._closed and source._closed and os.path.isdir(cache_dir) == keep_dir
    source = SimpleDataSource(load, 3)
    memory = DataSourceWithMemoryCache(source)
    assert (memory.size, memory.variables) == (3, source.variables)
    memory.close()
    assert memory._closed and source._closed


def test_close_and_context_manager():
    source = SimpleDataSource(load, 4)
    with DataIterator(source, 2, use_thread=True) as di:
        assert di.next()[0][:, 0].tolist() == [0, 1]
    assert di._closed and source._closed
    di.close()   # closing twice is harmless
    with pytest.raises(ValueError, match="batch_size"):
        DataIterator(SimpleDataSource(load, 4), 0)
