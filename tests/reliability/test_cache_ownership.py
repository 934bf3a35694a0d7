"""The kernel cache never harms what it does not own (issue 22, item 2).

It works only inside a directory it created, or took over empty, and marked as its own; it never
changes the mode of a directory; ``cache clear`` deletes only the entries it wrote; and numba's
pickled files are unpickled only when this user owns them and nobody else can write them
(checked on the open file, on every open), so a file planted by another user never runs.
Each scenario runs its consumer in a fresh process (see tests/test_kernel_cache.py).
"""
import os
import pickle
import shutil
import stat
import subprocess
import sys

import pytest

from nnabla_jit import kernel_cache
from tests.test_kernel_cache import (CONSUMER, PREFIX, REPO, SOURCE, _numba_files, cache_warnings,
                                     consume, module_path)

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def _tree(root):
    found = {}
    for directory, _, names in os.walk(str(root)):
        for n in names:
            path = os.path.join(directory, n)
            found[os.path.relpath(path, str(root))] = open(path, "rb").read()
    return found


def _users_folder(tmp_path):
    """A folder of the user's, with their own kernels/ and numba/ sub-folders."""
    folder = tmp_path / "mine"
    for sub in ("kernels", "numba"):
        (folder / sub).mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes")
    (folder / "kernels" / "keep.py").write_text("print('mine')")
    (folder / "numba" / "data.bin").write_bytes(b"\0\1\2")
    os.chmod(str(folder), 0o755)
    return folder


def _clear(cache, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NNABLA_JIT_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env.update(PYTHONPATH=REPO, NNABLA_JIT_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-m", "nnabla_jit", "cache", "clear"], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def test_a_users_folder_is_neither_chmodded_nor_used_nor_cleared(tmp_path):
    folder = _users_folder(tmp_path)
    before = _tree(folder)
    err = consume(folder, tmp_path)
    warnings = cache_warnings(err)
    assert len(warnings) == 1 and "is not a kernel cache made by nnabla_jit" in err, err
    assert _mode(folder) == 0o755
    assert _tree(folder) == before
    _clear(folder, tmp_path)
    assert _tree(folder) == before


def test_a_new_cache_is_created_private_and_marked(tmp_path):
    cache = tmp_path / "new" / "cache"
    consume(cache, tmp_path)
    assert _mode(cache) == 0o700
    assert os.path.isfile(str(cache / kernel_cache.MARKER))


def test_an_empty_folder_is_taken_over_and_marked_without_changing_its_mode(tmp_path):
    cache = tmp_path / "empty"
    cache.mkdir()
    os.chmod(str(cache), 0o755)
    assert cache_warnings(consume(cache, tmp_path)) == []
    assert _mode(cache) == 0o755
    assert os.path.isfile(str(cache / kernel_cache.MARKER))
    assert os.path.isfile(module_path(cache))


def test_an_older_nnabla_jit_cache_is_taken_over(tmp_path):
    cache = tmp_path / "old"
    consume(cache, tmp_path)
    os.unlink(str(cache / kernel_cache.MARKER))   # what an older nnabla_jit left
    assert cache_warnings(consume(cache, tmp_path)) == []
    assert os.path.isfile(str(cache / kernel_cache.MARKER))


def test_clear_deletes_only_the_entries_the_cache_wrote(tmp_path):
    cache = tmp_path / "cache"
    consume(cache, tmp_path)
    (cache / "kernels" / "notes.txt").write_text("a file the user put there")
    (cache / "numba" / "readme.txt").write_text("another")
    (cache / "mine.py").write_text("x = 1")
    status, out = _clear(cache, tmp_path)
    assert status == 0, out
    assert not os.path.exists(module_path(cache)) and _numba_files(cache, ".nbi") == []
    assert _tree(cache) == {"kernels/notes.txt": b"a file the user put there",
                            "numba/readme.txt": b"another", "mine.py": b"x = 1",
                            kernel_cache.MARKER: open(str(cache / kernel_cache.MARKER), "rb").read(),
                            ".generation": kernel_cache.GENERATION.encode() + b"\n"}


class _Planted:
    """Unpickling this writes the file ``marker``: the proof that a planted pickle ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return exec, ("open({!r}, 'w').write('planted pickle ran')".format(self.marker),)


def _plant(path, marker):
    """Replace numba's file ``path`` with a pickle that runs code, as another user would: owned
    by another uid (as root), else writable by others."""
    os.unlink(path)
    with open(path, "wb") as f:
        pickle.dump(_Planted(marker), f)
    if IS_ROOT:
        os.chown(path, 65534, 65534)
    else:
        os.chmod(path, 0o666)


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_a_numba_file_written_by_someone_else_is_never_unpickled(tmp_path, suffix):
    cache = tmp_path / "cache"
    consume(cache, tmp_path)
    marker = str(tmp_path / "ran")
    targets = _numba_files(cache, suffix)
    assert targets
    for path in targets:
        _plant(path, marker)
    err = consume(cache, tmp_path)
    assert not os.path.exists(marker)
    warnings = cache_warnings(err)
    assert len(warnings) == 1 and "not written by this user" in err, err


SWAP = '''
import os, shutil, sys, warnings
warnings.simplefilter("always")
from nnabla_jit import kernel_cache
sys.path.insert(0, {tests!r})
from reliability.test_cache_ownership import _plant
root = kernel_cache.cache_dir()           # checked once: ours, private
# another user swaps the folder (its parent is world-writable without the sticky bit)
os.rename(root, root + ".moved")
shutil.copytree(root + ".moved", root)
for directory, _, names in os.walk(os.path.join(root, "numba")):
    for n in names:
        if n.endswith(".nbi"):
            _plant(os.path.join(directory, n), {marker!r})
module = kernel_cache.load_generated({prefix!r}, {source!r})
print("result", module.plus_one(41))
'''


def test_a_cache_folder_swapped_after_the_check_has_its_planted_pickles_refused(tmp_path):
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chmod(str(parent), 0o777)          # no sticky bit
    cache = parent / "cache"
    consume(cache, tmp_path)              # a first run fills the cache
    marker = str(tmp_path / "ran")
    env = {k: v for k, v in os.environ.items() if k not in ("NNABLA_JIT_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env.update(PYTHONPATH=REPO, NNABLA_JIT_CACHE_DIR=str(cache))
    code = SWAP.format(prefix=PREFIX, source=SOURCE, marker=marker,
                       tests=os.path.join(REPO, "tests"))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "result 42" in done.stdout
    assert not os.path.exists(marker)
    shutil.rmtree(str(cache) + ".moved", ignore_errors=True)
