"""The kernel cache (nnabla_jit/kernel_cache.py): private, verified, self-healing, optional.

Each scenario runs its consumer in a fresh Python process: numba keeps compiled code in the
process, which would hide what a later run finds on disk.
"""
import os
import stat
import subprocess
import sys

import pytest

from nnabla_jit import kernel_cache
from nnabla_jit.utils.cli import main as cli_main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX = "nnabla_jit_cachetest_"
# A generated module with one cached numba kernel (ours: loaded through load_generated).
SOURCE = '''
from numba import njit


@njit(cache=True)
def plus_one(x):
    return x + 1
'''
CONSUMER = '''
import warnings
warnings.simplefilter("always")
from nnabla_jit.kernel_cache import load_generated
module = load_generated({prefix!r}, {source!r})
print("result", module.plus_one(41))
'''
TRAINING = '''
import warnings
warnings.simplefilter("always")
import numpy as np
import nnabla_jit as nn, nnabla_jit.functions as F, nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
rng = np.random.RandomState(0)
x = nn.Variable.from_numpy_array(rng.randn(16, 3).astype(np.float32))
t = nn.Variable.from_numpy_array(rng.randint(0, 2, (16, 1)).astype(np.int32))
loss = F.mean(F.softmax_cross_entropy(PF.affine(F.tanh(PF.affine(x, 8, name="a")), 2, name="b"), t))
solver = S.Adam(0.05)
solver.set_parameters(nn.get_parameters())
losses = []
for _ in range(20):
    loss.forward(clear_no_need_grad=True)
    solver.zero_grad()
    loss.backward(clear_buffer=True)
    solver.update()
    losses.append(float(loss.d))
print("losses", losses[0], losses[-1])
'''


def run_python(code, env_changes, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("NNABLA_JIT_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env["PYTHONPATH"] = REPO
    env.update(env_changes)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def consume(cache, tmp_path, **env):
    env.setdefault("NNABLA_JIT_CACHE_DIR", str(cache))
    out, err = run_python(CONSUMER.format(prefix=PREFIX, source=SOURCE), env, tmp_path)
    assert "result 42" in out
    return err


def cache_warnings(stderr):
    return [line for line in stderr.splitlines() if "KernelCacheWarning" in line]


def module_path(cache):
    return os.path.join(str(cache), "kernels", kernel_cache.module_name(PREFIX, SOURCE) + ".py")


PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text('planted code ran')\n" + SOURCE


def unusable_path(tmp_path):
    """A path no one can create a directory at (its parent is a file): works as root too."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    return str(blocker / "cache")


# ------------------------------------------------------------------------------ safe
def test_code_planted_in_the_old_shared_temp_directory_does_not_run(tmp_path):
    # Before, an unusable cache directory sent generated modules to <tmp>/nnabla_jit_cache,
    # where another user could put a module of the expected name.
    shared_tmp = tmp_path / "shared_tmp"
    marker = tmp_path / "marker"
    planted = shared_tmp / "nnabla_jit_cache" / "kernels" / (kernel_cache.module_name(PREFIX, SOURCE) + ".py")
    planted.parent.mkdir(parents=True)
    planted.write_text(PLANTED.format(marker=str(marker)))
    err = consume(None, tmp_path, NNABLA_JIT_CACHE_DIR=unusable_path(tmp_path), TMPDIR=str(shared_tmp))
    assert not marker.exists()
    assert len(cache_warnings(err)) == 1 and "compiled in memory" in err


def test_module_in_the_cache_with_content_other_than_its_hash_is_replaced_not_run(tmp_path):
    cache = tmp_path / "cache"
    marker = tmp_path / "marker"
    consume(cache, tmp_path)
    with open(module_path(cache), "w") as f:
        f.write(PLANTED.format(marker=str(marker)))
    err = consume(cache, tmp_path)
    assert not marker.exists()
    assert open(module_path(cache)).read() == SOURCE
    assert len(cache_warnings(err)) == 1 and str(cache) in err


def test_cache_directory_is_created_private(tmp_path):
    cache = tmp_path / "new" / "cache"
    consume(cache, tmp_path)
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_cache_directory_readable_by_others_is_used_and_never_chmodded(tmp_path):
    # issue 22: the cache changes the mode of no directory (it was narrowed to 0700 before);
    # what it writes inside is private all the same
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o755)
    assert cache_warnings(consume(cache, tmp_path)) == []
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(cache / "kernels").st_mode) == 0o700


def test_cache_directory_writable_by_others_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    err = consume(cache, tmp_path)
    assert len(cache_warnings(err)) == 1 and "writable by group or others" in err
    assert os.listdir(cache) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a directory away needs root")
def test_cache_directory_of_another_user_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    err = consume(cache, tmp_path)
    assert len(cache_warnings(err)) == 1 and "owned by uid 65534" in err
    assert os.listdir(cache) == []


# ------------------------------------------------------------------------------ self-healing
def _numba_files(cache, suffix):
    found = []
    for root, _, names in os.walk(os.path.join(str(cache), "numba")):
        found += [os.path.join(root, n) for n in names if ".plus_one-" in n and n.endswith(suffix)]
    return found


def _damage(path, how):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write({"empty": b"", "truncated": data[:len(data) // 2],
                 "garbled": bytes(b ^ 0x5A for b in data)}[how])


@pytest.mark.parametrize("kind, how", [
    ("generated module", "empty"), ("generated module", "garbled"),
    ("numba index (.nbi)", "truncated"), ("numba index (.nbi)", "garbled"),
    ("numba data (.nbc)", "empty"), ("numba data (.nbc)", "truncated")])
def test_damaged_cache_entry_is_removed_and_rebuilt_with_one_warning(tmp_path, kind, how):
    cache = tmp_path / "cache"
    consume(cache, tmp_path)
    if kind == "generated module":
        targets = [module_path(cache)]
    else:
        targets = _numba_files(cache, ".nbi" if "index" in kind else ".nbc")
    assert targets
    for path in targets:
        _damage(path, how)
    err = consume(cache, tmp_path)
    warnings = cache_warnings(err)
    assert len(warnings) == 1 and str(cache) in err, err
    # rebuilt: the next process finds a sound cache and says nothing
    assert cache_warnings(consume(cache, tmp_path)) == []
    assert open(module_path(cache)).read() == SOURCE
    assert _numba_files(cache, ".nbi") and _numba_files(cache, ".nbc")


# ------------------------------------------------------------------------------ read-only
def test_training_works_with_no_writable_cache_location_anywhere(tmp_path):
    # HOME and the cache directory cannot be created, NUMBA_CACHE_DIR is unset: numba's
    # cache=True alone would fail at import ("no locator available").
    nowhere = unusable_path(tmp_path)
    out, err = run_python(TRAINING, {"HOME": nowhere, "XDG_CACHE_HOME": nowhere}, tmp_path)
    first, last = map(float, out.split("losses")[1].split())
    assert last < first
    warnings = cache_warnings(err)
    assert len(warnings) == 1 and "compiled in memory" in err, err


# ------------------------------------------------------------------------------ CLI
def test_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    consume(cache, tmp_path)
    monkeypatch.setenv("NNABLA_JIT_CACHE_DIR", str(cache))
    monkeypatch.setattr(kernel_cache.numba_internals.config, "CACHE_DIR", "")   # numba's own too
    assert cli_main(["cache", "info"]) == 0
    printed = capsys.readouterr().out
    assert str(cache) in printed and "NNABLA_JIT_CACHE_DIR" in printed and "NUMBA_CACHE_DIR" in printed
    assert kernel_cache.info()["kernels"]["files"] >= 1 and kernel_cache.info()["numba"]["files"] >= 2
    assert cli_main(["cache", "clear"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not os.path.exists(module_path(cache)) and _numba_files(cache, ".nbi") == []
    assert kernel_cache.info()["kernels"]["files"] == 0


def test_compile_status_shows_compiling_kernels_on_a_bar():
    from tqdm import tqdm
    shown = []

    class Bar(tqdm):
        def refresh(self, *args, **kwargs):
            shown.append(self.desc)
            return super().refresh(*args, **kwargs)

    source = SOURCE.replace("cache=True", "cache=False")   # compiles in every process
    # mininterval=0, miniters=1: every update redraws, so what is shown does not depend on timing
    with Bar(total=2, desc="training", disable=False, file=open(os.devnull, "w"), mininterval=0,
             miniters=1) as bar:
        with kernel_cache.compile_status(bar):
            module = kernel_cache.load_generated(PREFIX + "status_", source)
            module.plus_one(1.5)
            bar.update(1)
            module.plus_one(2.5)   # compiled already: no message
            bar.update(1)
        assert bar.desc == "training"
    assert "training [compiling kernels: 1, plus_one]" in shown
    assert shown[-1] == "training"
    with tqdm(total=1, disable=True) as quiet, kernel_cache.compile_status(quiet):   # no error
        quiet.update(1)


def test_cache_warm_leaves_nothing_to_compile_for_the_warmed_network(tmp_path):
    cache = tmp_path / "cache"
    env = {"NNABLA_JIT_CACHE_DIR": str(cache)}
    out, _ = run_python("from nnabla_jit.utils.cli import main; main(['cache', 'warm', 'small', '-j', '1'])",
                        env, tmp_path)
    assert "kernels of small compiled into {}".format(cache) in out
    out, _ = run_python("from nnabla_jit import kernel_cache\n"
                        "from nnabla_jit.utils.kernel_warmup import warm_one\n"
                        "warm_one('small')\nprint('compiled', kernel_cache.compile_count())", env, tmp_path)
    assert "compiled 0" in out


def test_machine_code_of_an_older_generation_is_removed_once(tmp_path):
    """numba's index does not record how a kernel was compiled: a cache of an older generation
    (kernels built at -O2) has its machine code removed by the first process of the new one,
    and only then; a user's file stays."""
    cache = tmp_path / "cache"
    consume(cache, tmp_path)
    assert (cache / ".generation").read_text().strip() == kernel_cache.GENERATION
    index = _numba_files(cache, ".nbi")
    assert index
    user_file = cache / "numba" / "notes.txt"
    user_file.write_text("mine")

    def stamp():
        return [os.stat(p).st_mtime_ns for p in _numba_files(cache, ".nbc")]
    before = stamp()
    consume(cache, tmp_path)                     # same generation: served from the cache
    assert stamp() == before
    for older in ("1\n", None):                 # an older marker, or none (before markers)
        if older is None:
            (cache / ".generation").unlink()
        else:
            (cache / ".generation").write_text(older)
        before = stamp()
        assert "KernelCacheWarning" not in consume(cache, tmp_path)
        assert stamp() != before                 # removed, then compiled again by this run
        assert (cache / ".generation").read_text().strip() == kernel_cache.GENERATION
        assert user_file.read_text() == "mine"
