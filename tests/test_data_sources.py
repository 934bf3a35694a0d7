"""CSV datasets, file caches in nnabla's format, cache folders, concatenated sources, and the
image / file loaders they use. Orders marked 'nnabla' were produced by nnabla 1.39 with the same
calls (its caches draw from their own RandomState(313))."""
import os

import numpy as np
import pytest

from nnabla_jit.utils import image_utils
from nnabla_jit.utils.data_iterator import (data_iterator_cache, data_iterator_concat_datasets,
                                            data_iterator_csv_dataset, data_iterator_simple)
from nnabla_jit.utils.data_source import DataSourceWithFileCache, DataSourceWithFileCacheError
from nnabla_jit.utils.data_source_implements import (CacheDataSource, ConcatDataSource,
                                                     CsvDataSource, SimpleDataSource)
from nnabla_jit.utils.data_source_loader import load, load_csv, load_image


@pytest.fixture
def image_dataset(tmp_path):
    """7 rows: a grey and a colour PNG (relative paths), a label, a 2-vector, a comment."""
    rng = np.random.RandomState(0)
    (tmp_path / "img").mkdir()
    grey, colour, rows = [], [], []
    for i in range(7):
        g = rng.randint(0, 256, (4, 5), dtype=np.uint8)
        c = rng.randint(0, 256, (4, 5, 3), dtype=np.uint8)
        image_utils.imsave(str(tmp_path / "img" / "{}.png".format(i)), g)
        image_utils.imsave(str(tmp_path / "img" / "c{}.png".format(i)), c)
        grey.append(g)
        colour.append(c)
        rows.append("img/{0}.png,img/c{0}.png,{1},{2},{3},note".format(i, i % 3, i * 0.5, i * 1.5))
    path = tmp_path / "data.csv"
    path.write_text("x:image,c,y:label,z__0,z__1,#comment\n" + "\n".join(rows) + "\n")
    return str(path), np.array(grey), np.array(colour)


def ids_csv(tmp_path, n=13):
    path = tmp_path / "ids.csv"
    path.write_text("i,v__0,v__1\n" + "".join("{0},{0},{1}\n".format(i, -i) for i in range(n)))
    return str(path)


def test_csv_dataset_values(image_dataset):
    path, grey, colour = image_dataset
    di = data_iterator_csv_dataset(path, 3, normalize=False, with_file_cache=False, use_thread=False)
    assert di.variables == ("x", "c", "y", "z") and di.size == 7
    x, c, y, z = di.next()
    np.testing.assert_array_equal(x, grey[:3, None])
    np.testing.assert_array_equal(c, colour[:3].transpose(0, 3, 1, 2))
    assert x.dtype == np.uint8 and y.shape == (3, 1) and z.shape == (3, 2)
    np.testing.assert_array_equal(y[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(z, [[0, 0], [0.5, 1.5], [1, 3]])
    di.close()


def test_csv_dataset_through_the_file_cache(image_dataset, tmp_path):
    path, grey, colour = image_dataset
    cache = tmp_path / "cache"
    di = data_iterator_csv_dataset(path, 3, cache_dir=str(cache), use_thread=False)
    batches = [di.next() for _ in range(3)]
    di.close()
    x, c, y, z = batches[0]
    assert (x.dtype, c.dtype, y.dtype, z.dtype) == (np.float64, np.float64, np.float32, np.float32)
    np.testing.assert_allclose(x, grey[:3, None] / 255.0)
    # The third batch wraps around: rows 6, 0, 1.
    np.testing.assert_array_equal(batches[2][2][:, 0], [0, 0, 1])
    # nnabla's cache layout, byte for byte where it is text.
    assert sorted(os.listdir(cache)) == ["cache_00000000_00000006.npy", "cache_index.csv",
                                         "cache_info.csv", "order.csv", "original.csv"]
    assert (cache / "cache_index.csv").read_text() == "cache_00000000_00000006.npy,7\n"
    assert (cache / "cache_info.csv").read_text() == "x\nc\ny\nz\n"
    assert (cache / "order.csv").read_text() == "".join("{0},{0}\n".format(i) for i in range(7))
    assert (cache / "original.csv").read_text() == open(path).read()
    with open(cache / "cache_00000000_00000006.npy", "rb") as f:
        arrays = [np.load(f) for _ in range(4)]
    assert [a.shape for a in arrays] == [(7, 1, 4, 5), (7, 3, 4, 5), (7, 1), (7, 2)]
    # ... which data_iterator_cache reads back.
    dc = data_iterator_cache(str(cache), 7, use_thread=False)
    x2, c2, y2, z2 = dc.next()
    np.testing.assert_allclose(x2, grey[:, None] / 255.0)
    np.testing.assert_array_equal(z2[:, 1], np.arange(7) * 1.5)
    dc.close()


def test_shuffled_orders_match_nnabla(tmp_path):
    cache = tmp_path / "c1"
    di = data_iterator_csv_dataset(ids_csv(tmp_path), 4, shuffle=True, cache_dir=str(cache), use_thread=False)
    got = [di.next()[0].ravel().astype(int).tolist() for _ in range(10)]
    di.close()
    assert got == [[1, 4, 3, 9], [5, 6, 2, 0], [12, 11, 7, 10], [8, 1, 4, 3], [9, 5, 6, 2],
                   [0, 12, 11, 7], [10, 8, 4, 5], [9, 11, 6, 2], [3, 1, 8, 10], [0, 7, 12, 1]]
    assert (cache / "order.csv").read_text().split() == [
        "0,1", "1,4", "2,3", "3,9", "4,5", "5,6", "6,2", "7,0", "8,12", "9,11", "10,7", "11,10", "12,8"]
    dc = data_iterator_cache(str(cache), 5, shuffle=True, use_thread=False)
    got = [dc.next()[0].ravel().astype(int).tolist() for _ in range(6)]
    dc.close()
    assert got == [[4, 5, 9, 11, 6], [2, 3, 1, 8, 10], [0, 7, 12, 4, 5], [9, 11, 6, 2, 3],
                   [1, 8, 10, 0, 7], [12, 5, 6, 11, 10]]


def test_file_cache_of_several_files_matches_nnabla(tmp_path):
    cache = tmp_path / "c2"
    di = data_iterator_simple(lambda i: (np.array([i]),), 250, 64, shuffle=True, with_file_cache=True,
                              cache_dir=str(cache), use_thread=False)
    got = [di.next()[0].ravel().tolist()[:8] for _ in range(9)]
    di.close()
    assert got == [[91, 30, 108, 122, 83, 117, 142, 160], [132, 77, 151, 246, 27, 143, 53, 178],
                   [31, 58, 0, 101, 202, 37, 50, 15], [95, 235, 183, 99, 111, 94, 205, 140],
                   [157, 8, 39, 15, 74, 190, 215, 37], [112, 83, 172, 84, 86, 249, 91, 163],
                   [78, 238, 213, 242, 137, 204, 81, 102], [192, 13, 49, 76, 149, 29, 167, 25],
                   [196, 9, 225, 49, 96, 52, 104, 187]]
    assert sorted(os.listdir(cache)) == ["cache_00000000_00000099.npy", "cache_00000100_00000199.npy",
                                         "cache_00000200_00000249.npy", "cache_index.csv", "cache_info.csv"]
    assert not [name for name in os.listdir(cache) if name.startswith(".tmp")]


def test_shuffled_epochs_read_every_example_once(tmp_path):
    source = DataSourceWithFileCache(SimpleDataSource(lambda i: (np.array([i]),), 230), shuffle=True,
                                     rng=np.random.RandomState(3))
    for _ in range(3):
        source.reset()
        seen = [int(source.next()[0][0]) for _ in range(230)]
        assert sorted(seen) == list(range(230))
    folder = source._cache_dir
    source.close()
    assert not os.path.exists(folder)   # a temporary cache folder goes with the source


def test_concat_matches_nnabla_and_reads_every_example(tmp_path):
    path = ids_csv(tmp_path)
    di = data_iterator_concat_datasets([CsvDataSource(path), CsvDataSource(path)], 5, shuffle=True,
                                       use_thread=False)
    got = [di.next()[0].ravel().astype(int).tolist() for _ in range(6)]
    di.close()
    assert got == [[12, 2, 4, 3, 1], [4, 0, 6, 1, 9], [8, 11, 2, 5, 11], [7, 3, 6, 5, 0],
                   [12, 9, 7, 10, 10], [8, 12, 2, 4, 3]]
    source = ConcatDataSource([SimpleDataSource(lambda i: (np.array([i]),), 4),
                               SimpleDataSource(lambda i: (np.array([10 + i]),), 3)], shuffle=False)
    assert [int(source.next()[0][0]) for _ in range(7)] == [0, 1, 2, 3, 10, 11, 12]
    with pytest.raises(ValueError, match="source 1 has variables"):
        ConcatDataSource([source, SimpleDataSource(lambda i: (1, 2), 3)])


def test_h5_cache_folders_are_read(tmp_path):
    import h5py
    for k in range(2):
        with h5py.File(tmp_path / "part{}.h5".format(k), "w") as h5:
            h5["x"] = np.arange(3 * k, 3 * k + 3, dtype=np.uint8)[:, None]
            h5["y"] = np.arange(3, dtype=np.int32)[:, None] + 10 * k
    source = CacheDataSource(str(tmp_path), normalize=True)
    assert source.variables == ["x", "y"] and source.size == 6
    examples = [source.next() for _ in range(6)]
    np.testing.assert_allclose([e[0][0] for e in examples], np.arange(6) / 255.0, rtol=1e-6)
    assert [int(e[1][0]) for e in examples] == [0, 1, 2, 10, 11, 12]


def test_malformed_rows_and_missing_files_name_the_file_and_line(image_dataset, tmp_path):
    path, _, _ = image_dataset
    folder = os.path.dirname(path)
    bad = os.path.join(folder, "bad.csv")
    with open(bad, "w") as f:
        f.write("x,y\nimg/0.png,1\n\nimg/1.png,2,3\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 4: 3 values for the 2 columns"):
        CsvDataSource(bad)
    missing = os.path.join(folder, "missing.csv")
    with open(missing, "w") as f:
        f.write("x,y\nimg/0.png,1\nimg/nope.png,2\n")
    di = data_iterator_csv_dataset(missing, 1, with_file_cache=False, use_thread=False)
    di.next()
    with pytest.raises(FileNotFoundError, match=r"missing.csv, line 3, column 'x': no file img/nope.png"):
        di.next()
    di.close()
    with pytest.raises(FileNotFoundError, match=r"missing.csv, line 3, column 'x'"):
        data_iterator_csv_dataset(missing, 1, cache_dir=str(tmp_path / "cache"), use_thread=False)
    odd = os.path.join(folder, "odd.csv")
    with open(odd, "w") as f:
        f.write("x\nhello\n")
    with pytest.raises(ValueError, match=r"odd.csv, line 2, column 'x': 'hello' is neither a number"):
        CsvDataSource(odd)._get_data(0)
    with pytest.raises(FileNotFoundError, match="no dataset file"):
        CsvDataSource(os.path.join(folder, "absent.csv"))
    empty = os.path.join(folder, "empty.csv")
    open(empty, "w").close()
    with pytest.raises(ValueError, match="empty.csv: the dataset file is empty"):
        CsvDataSource(empty)


def test_examples_of_different_shapes_cannot_be_cached():
    source = SimpleDataSource(lambda i: (np.zeros(2 + (i == 3)),), 5)
    with pytest.raises(DataSourceWithFileCacheError, match=r"variable 'x0'.*position 3 has shape \(3,\)"):
        DataSourceWithFileCache(source)


def test_slices_with_a_file_cache(tmp_path):
    di = data_iterator_simple(lambda i: (np.array([i]),), 10, 2, with_file_cache=True,
                              cache_dir=str(tmp_path / "whole"), use_thread=False)
    slices = [di.slice(None, 2, k, use_cache=True) for k in range(2)]
    assert [s.next()[0].ravel().tolist() for s in slices] == [[0, 1], [5, 6]]
    assert any(name.startswith("cache_sliced_00000005_00000010") for name in os.listdir(tmp_path / "whole"))
    for s in slices + [di]:
        s.close()


# ----------------------------------------------------------------------------- loaders
def test_image_round_trips(tmp_path):
    grey = (np.arange(20).reshape(4, 5) * 12).astype(np.uint8)
    colour = np.random.RandomState(1).randint(0, 256, (4, 5, 3)).astype(np.uint8)
    image_utils.imsave(str(tmp_path / "g.png"), grey)
    image_utils.imsave(str(tmp_path / "c.png"), colour.transpose(2, 0, 1), channel_first=True)
    np.testing.assert_array_equal(image_utils.imread(str(tmp_path / "g.png")), grey)
    np.testing.assert_array_equal(image_utils.imread(str(tmp_path / "c.png")), colour)
    assert image_utils.imread(str(tmp_path / "g.png"), num_channels=3).shape == (4, 5, 3)
    assert image_utils.imread(str(tmp_path / "c.png"), channel_first=True).shape == (3, 4, 5)
    assert image_utils.imread(str(tmp_path / "c.png"), grayscale=True, num_channels=1).shape == (4, 5, 1)
    assert image_utils.imread(str(tmp_path / "c.png"), size=(8, 6)).shape == (6, 8, 3)
    deep = (np.arange(20).reshape(4, 5) * 3000).astype(np.uint16)
    image_utils.imsave(str(tmp_path / "d.png"), deep, as_uint16=True)
    np.testing.assert_array_equal(image_utils.imread(str(tmp_path / "d.png"), as_uint16=True), deep)
    image_utils.imsave(str(tmp_path / "f.png"), np.linspace(0, 1, 20).reshape(4, 5))
    assert image_utils.imread(str(tmp_path / "f.png"))[-1, -1] == 255
    assert image_utils.imresize(np.ones((4, 5), np.float64), (10, 2)).dtype == np.float32


def test_image_errors(tmp_path):
    with pytest.raises(ValueError, match="must lie in \\[0, 1\\]"):
        image_utils.imsave(str(tmp_path / "f.png"), np.full((2, 2), 1.5))
    with pytest.raises(ValueError, match="as_uint16=True"):
        image_utils.imsave(str(tmp_path / "f.png"), np.zeros((2, 2), np.uint16))
    with pytest.raises(FileNotFoundError, match="no image file"):
        image_utils.imread(str(tmp_path / "none.png"))
    (tmp_path / "text.png").write_text("not an image")
    with pytest.raises(ValueError, match="not an image"):
        image_utils.imread(str(tmp_path / "text.png"))
    with pytest.raises(ValueError, match="num_channels must be one of"):
        image_utils.imread(str(tmp_path / "text.png"), grayscale=True, num_channels=2)


def test_file_loaders(tmp_path):
    import scipy.io.wavfile
    np.save(tmp_path / "a.npy", np.arange(6).reshape(2, 3))
    (tmp_path / "a.csv").write_text("1,2,3\n4,5,6\n")
    scipy.io.wavfile.write(tmp_path / "a.wav", 8000, np.arange(5, dtype=np.int16))
    image_utils.imsave(str(tmp_path / "a.png"), np.full((2, 3), 51, np.uint8))
    assert load(".npy")(str(tmp_path / "a.npy"), shape=(3, 2)).shape == (3, 2)
    with open(tmp_path / "a.csv", "rb") as f:
        np.testing.assert_array_equal(load_csv(f), [[1, 2, 3], [4, 5, 6]])
    assert load(".WAV")(str(tmp_path / "a.wav")).shape == (5, 1)
    with open(tmp_path / "a.png", "rb") as f:
        np.testing.assert_allclose(load_image(f, normalize=True), np.full((1, 2, 3), 0.2))
    with open(tmp_path / "a.png", "rb") as f:
        assert load_image(f, shape=(1, 4, 6)).shape == (1, 4, 6)
    with pytest.raises(ValueError, match='extension ".txt" is not supported'):
        load(".txt")
