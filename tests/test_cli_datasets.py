"""``create_image_classification_dataset`` and ``create_object_detection_dataset`` on a few
tiny images."""
import csv
import os

import numpy as np
import pytest

from nnabla_jit.utils.cli import main

PIL = pytest.importorskip("PIL.Image")


def _save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    PIL.fromarray(array).save(path)


def _rows(path):
    with open(path) as f:
        return list(csv.reader(f))


def _read(path):
    return np.asarray(PIL.open(path))


def test_image_classification_dataset_shapes_and_splits(tmp_path, capsys):
    rng = np.random.RandomState(0)
    _save(str(tmp_path / "src/cat/a.png"), rng.randint(0, 255, (12, 20, 3)).astype(np.uint8))
    _save(str(tmp_path / "src/cat/b.png"), rng.randint(0, 255, (16, 9)).astype(np.uint8))
    _save(str(tmp_path / "src/dog/c.png"), np.full((12, 16, 3), 7, np.uint8))
    _save(str(tmp_path / "src/dog/d.png"), rng.randint(0, 255, (8, 8, 3)).astype(np.uint8))
    (tmp_path / "src/dog/notes.txt").write_text("not an image")
    out = tmp_path / "out"
    status = main(["create_image_classification_dataset", "-i", str(tmp_path / "src"), "-o", str(out),
                   "-c", "3", "-w", "16", "-g", "12", "-m", "trimming", "-s", "false",
                   "-f1", "train.csv", "-f2", "test.csv", "-r2", "50"])
    assert status == 0
    assert _rows(out / "train.csv") == [["x:image", "y:label"], ["./cat/a.png", "0"], ["./cat/b.png", "0"]]
    assert _rows(out / "test.csv") == [["x:image", "y:label"], ["./dog/c.png", "1"], ["./dog/d.png", "1"]]
    for name in ("cat/a.png", "cat/b.png", "dog/d.png"):
        assert _read(out / name).shape == (12, 16, 3)
    np.testing.assert_array_equal(_read(out / "dog/c.png"), np.full((12, 16, 3), 7, np.uint8))
    status = main(["create_image_classification_dataset", "-i", str(tmp_path / "src"), "-o",
                   str(tmp_path / "grey"), "-c", "1", "-w", "8", "-g", "8", "-m", "padding",
                   "-s", "true", "-f1", "all.csv"])
    assert status == 0 and len(_rows(tmp_path / "grey" / "all.csv")) == 5
    assert _read(tmp_path / "grey" / "cat" / "a.png").shape == (8, 8)
    status = main(["create_image_classification_dataset", "-i", str(tmp_path / "src"), "-o", str(out),
                   "-c", "3", "-w", "16", "-g", "12", "-m", "stretch", "-s", "false", "-f1", "x.csv"])
    assert status == 1 and "trimming or padding" in capsys.readouterr().err


def test_object_detection_dataset_grid_labels(tmp_path, capsys):
    src = tmp_path / "det"
    for i in range(3):
        _save(str(src / "{}.png".format(i)), np.full((32, 32, 3), 40 * i, np.uint8))
        (src / "{}.txt".format(i)).write_text("0 0.3 0.3 0.2 0.2\n1 0.75 0.7 0.5 0.4\n")
    out = tmp_path / "out"
    status = main(["create_object_detection_dataset", "-i", str(src), "-o", str(out), "-n", "2",
                   "-c", "3", "-w", "32", "-g", "32", "-a", "2", "-d", "16", "-m", "padding",
                   "-s", "false", "-f1", "train.csv"])
    assert status == 0
    rows = _rows(out / "train.csv")
    assert rows[0] == ["x:image", "y:label", "r:region"] and len(rows) == 4
    labels = np.loadtxt(out / "data" / "0_label.csv", delimiter=",", dtype=int).reshape(2, 2, 2)
    # anchors sorted by area: anchor 0 fits the small object at cell (0, 0), anchor 1 the large
    # one at cell (1, 1)
    assert labels[0, 0, 0] == 0 and labels[1, 1, 1] == 1 and (labels == -1).sum() == 6
    region = np.loadtxt(out / "data" / "0_region.csv", delimiter=",").reshape(2, 2, 2, 4)
    np.testing.assert_allclose(region[0, 0, 0], [0.6 - 0.5 + 0.5, 0.6 - 0.5 + 0.5,
                                                 np.log(0.4), np.log(0.4)], atol=1e-6)
    status = main(["create_object_detection_dataset", "-i", str(src), "-o", str(out), "-n", "2",
                   "-c", "3", "-w", "30", "-g", "32", "-a", "2", "-d", "16", "-m", "padding",
                   "-s", "false", "-f1", "train.csv"])
    assert status == 1 and "divisible" in capsys.readouterr().err
