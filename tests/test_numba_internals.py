"""numba's internals behind one module (nnabla_jit/numba_internals.py): each of its functions on
the installed numba, the version check, and no other module of the package reaching for numba's
internals itself."""
import ast
import importlib.util
import os
import re
import warnings

import numpy as np
import pytest
from numba import njit, types

import nnabla_jit.solver_kernels as K
from nnabla_jit import kernel_cache, numba_internals as ni

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "nnabla_jit")


# ------------------------------------------------------------------------------ the version check
def test_the_installed_numba_is_in_the_tested_range():
    low, high = ni.TESTED_RANGE
    assert low <= ni.check_version() < high


@pytest.mark.parametrize("version", ["0.67.1", "0.69.0", "0.69.0rc1", "1.0.0"])
def test_an_untested_numba_stops_the_import_with_one_clear_line(version):
    with pytest.raises(ni.UntestedNumba, match="is not a version nnabla_jit is tested on") as raised:
        ni.check_version(version, environ={})
    message = str(raised.value)
    assert "numba {} is not a version nnabla_jit is tested on".format(version) in message
    assert "numba>={}.{},<{}.{}".format(*ni.TESTED_RANGE[0], *ni.TESTED_RANGE[1]) in message
    assert ni.ENV_VAR in message and "\n" not in message


def test_the_untested_numba_variable_lets_it_go_on_with_a_warning():
    with pytest.warns(RuntimeWarning, match="numba 0.69.0 is not a version"):
        assert ni.check_version("0.69.0", environ={ni.ENV_VAR: "1"}) == (0, 69)


@pytest.mark.parametrize("version", ["0.68.0", "0.68.1", "0.68.1+3.gabcdef", "0.68.0rc1"])
def test_a_tested_numba_passes_silently(version):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ni.check_version(version, environ={}) == (0, 68)


def test_a_version_without_numbers_is_refused():
    with pytest.raises(ni.UntestedNumba, match="cannot read numba's version 'dev'"):
        ni.check_version("dev", environ={})


def test_pyproject_bounds_numba_to_the_tested_range():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    bounds = re.findall(r'"numba([<>=!~][^"]*)"', text)
    assert bounds == [">={}.{},<{}.{}".format(*ni.TESTED_RANGE[0], *ni.TESTED_RANGE[1])]


# ------------------------------------------------------------------------------ signatures
def _readonly(a):
    a.flags.writeable = False
    return a


SIGNATURE_VALUES = [np.zeros(3, np.float32), np.zeros((2, 3)), np.zeros((2, 3), np.int32).T,
                    np.zeros(6)[::2], _readonly(np.zeros((2, 2), np.float32)), np.zeros(3, np.bool_),
                    np.zeros(3, np.float16), np.zeros((1, 1, 1), np.uint8), 1, 1.5, True, None,
                    np.float32(1), np.int32(1), 1j, (1, 2, 3), (1, 2.0), ((1, 2), (3, 4)), ()]


def test_a_signature_as_text_reads_back_as_the_same_types():
    from numba import typeof
    sig = tuple(typeof(v) for v in SIGNATURE_VALUES)
    text = ni.signature_text(sig)
    assert "array(float32, 1d, C)" in text and "readonly array(float32, 2d, C)" in text
    assert ni.signature_from_text(text) == sig
    unaligned = (types.Array(types.float64, 2, "F", readonly=True, aligned=False),)
    assert ni.signature_from_text(ni.signature_text(unaligned)) == unaligned
    assert ni.signature_from_text("()") == ()


def test_a_type_without_a_readable_name_is_refused():
    with pytest.raises(ValueError, match="cannot be written as text"):
        ni.signature_text((types.literal(3),))


@pytest.mark.parametrize("text", ["float32", "(float32", "(float32) x", "(foo)", "(__import__)",
                                  "(array(float32, 1d, Q))", "(array(float32, 1, C))",
                                  "(float32;)", "(readonly float32)", "(UniTuple(int64, 3))"])
def test_other_text_is_refused(text):
    with pytest.raises(ValueError, match="signature text"):
        ni.signature_from_text(text)


def test_the_manifest_holds_signatures_as_text():
    import json
    with open(os.path.join(PACKAGE, "tables", "kernel_manifest.json")) as f:
        entries = json.load(f)["kernels"]
    assert entries
    for module, name, sig in entries:
        assert ni.signature_text(ni.signature_from_text(sig)) == sig, (module, name)


# ------------------------------------------------------------------------------ events, settings
def _double(x):
    return 2 * x


def test_compile_events_name_the_dispatcher_and_its_argument_types():
    seen = []

    class Listener(ni.Listener):
        def on_start(self, ev):
            seen.append((ni.event_dispatcher(ev), ni.event_argument_types(ev)))

        def on_end(self, ev):
            pass

    disp = njit(_double)
    with ni.install_listener(ni.COMPILE_EVENT, Listener()):
        assert disp(np.float32(2)) == 4
    assert seen == [(disp, (types.float32,))]
    listener = Listener()
    ni.register_listener(ni.COMPILE_EVENT, listener)
    ni.unregister_listener(ni.COMPILE_EVENT, listener)
    disp(2)
    assert len(seen) == 1


def test_numba_cache_dir_is_numba_cache_dir_setting(monkeypatch, tmp_path):
    monkeypatch.setattr(ni.config, "CACHE_DIR", "")
    assert ni.numba_cache_dir() is None
    monkeypatch.setattr(ni.config, "CACHE_DIR", str(tmp_path))
    assert ni.numba_cache_dir() == str(tmp_path)


def test_cache_subpath_names_the_source_directory():
    path = ni.cache_subpath(os.path.join(PACKAGE, "ops", "x.py"))
    assert re.fullmatch(r"ops_[0-9a-f]{40}", path)
    assert path != ni.cache_subpath(os.path.join(PACKAGE, "x.py"))


def test_dispatcher_kinds():
    assert ni.is_dispatcher(njit(_double)) and not ni.is_dispatcher(_double)
    assert ni.is_parallel(njit(parallel=True)(_double)) and not ni.is_parallel(njit(_double))
    assert ni.argument_types(njit(_double), (np.zeros(3, np.float32), 1, 2.0)) == (
        types.Array(types.float32, 1, "C"), types.int64, types.float64)


def test_a_dispatcher_without_a_cache_caches_nothing():
    disp = njit(_double)
    assert ni.caches_nothing(disp) and ni.dispatcher_cache(disp) is not None
    assert not ni.caches_nothing(_double) and ni.dispatcher_cache(_double) is None
    if kernel_cache.cache_dir() is not None:   # the package's kernels are on its policy's cache
        cache = ni.dispatcher_cache(K.adam_update.serial)
        assert type(cache).__name__ == "_PolicyCache" and not ni.caches_nothing(K.adam_update.serial)


def test_the_compile_on_call_hook_runs_for_a_new_signature_only():
    disp, calls = njit(_double), []
    assert ni.compile_on_call_hook(disp) is None

    def hook(*args, **kws):
        calls.append(args)
        return ni.compile_on_call(disp, args, kws)

    ni.hook_compile_on_call(disp, hook)
    assert ni.compile_on_call_hook(disp) is hook
    assert disp(3) == 6 and disp(4) == 8 and disp(1.5) == 3.0
    assert calls == [(3,), (1.5,)]


_CACHED_SOURCE = '''
from numba import njit


@njit(cache=True)
def triple(x):
    return 3 * x
'''


def _import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_load_cached_loads_from_the_disk_and_never_compiles(monkeypatch, tmp_path):
    # a function not of the package: numba's own cache, under NUMBA_CACHE_DIR
    monkeypatch.setattr(ni.config, "CACHE_DIR", str(tmp_path / "numba"))
    source = tmp_path / "cached_kernel.py"
    source.write_text(_CACHED_SOURCE)
    first = _import_file(source, "nnabla_jit_test_cached_kernel_a").triple
    assert first(2.0) == 6.0   # compiled and saved
    compiled = []

    class Listener(ni.Listener):
        def on_start(self, ev):
            compiled.append(ev)

        def on_end(self, ev):
            pass

    again = _import_file(source, "nnabla_jit_test_cached_kernel_b").triple   # a new dispatcher
    with ni.install_listener(ni.COMPILE_EVENT, Listener()):
        entry = ni.load_cached(again, (types.float64,))
        assert entry is not None and entry(2.0) == 6.0
        assert ni.load_cached(again, (types.int32,)) is None   # never compiled: not there
    assert compiled == [] and again.signatures == [(types.float64,)]
    assert ni.load_cached(again, (types.float64,)) is not None   # in memory now


class _RecordingPolicy:
    """A policy for functions of one directory, recording what numba_internals asks it."""

    def __init__(self, source_dir, cache):
        self.source_dir, self.cache, self.calls = str(source_dir), str(cache), []

    def is_ours(self, py_file):
        return os.path.dirname(os.path.abspath(py_file)) == self.source_dir

    def cache_path(self, py_file):
        self.calls.append("cache_path")
        return os.path.join(self.cache, ni.cache_subpath(py_file))

    def ensure_directory(self, path):
        self.calls.append("ensure_directory")
        os.makedirs(path, exist_ok=True)

    def open_own(self, path):
        self.calls.append("open_own")
        return open(path, "rb")

    def damaged(self, path, name, error):
        self.calls.append("damaged")

    def unwritable(self, path, error):
        self.calls.append("unwritable")

    def no_locator(self):
        self.calls.append("no_locator")


def test_a_routed_cache_asks_its_policy_and_heals_a_damaged_entry(tmp_path):
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "routed_kernel.py").write_text(_CACHED_SOURCE)
    policy = _RecordingPolicy(sources, tmp_path / "cache")
    package_policy = ni._policy[0]
    ni._policy[0] = _ChainedPolicy(policy, package_policy)
    try:
        _routed_cache_scenario(sources, policy)
    finally:
        ni._policy[0] = package_policy


def _routed_cache_scenario(sources, policy):
    first = _import_file(sources / "routed_kernel.py", "nnabla_jit_test_routed_a").triple
    assert type(ni.dispatcher_cache(first)).__name__ == "_PolicyCache"
    assert first(2.0) == 6.0
    assert {"cache_path", "ensure_directory"} <= set(policy.calls)
    files = [n for _, _, names in os.walk(policy.cache) for n in names]
    assert any(n.endswith(".nbi") for n in files) and any(n.endswith(".nbc") for n in files)
    policy.calls.clear()
    again = _import_file(sources / "routed_kernel.py", "nnabla_jit_test_routed_b").triple
    assert ni.load_cached(again, (types.float64,)) is not None and "open_own" in policy.calls
    for folder, _, names in os.walk(policy.cache):   # damage the entry: it is removed, recompiled
        for n in names:
            if n.endswith(".nbc"):
                with open(os.path.join(folder, n), "wb") as f:
                    f.write(b"garbage")
    third = _import_file(sources / "routed_kernel.py", "nnabla_jit_test_routed_c").triple
    assert ni.load_cached(third, (types.float64,)) is None and "damaged" in policy.calls
    assert third(2.0) == 6.0


class _ChainedPolicy:
    """The test's policy for its own directory, the package's for the rest (a package kernel
    decorated meanwhile stays on the package's cache)."""

    def __init__(self, mine, package):
        self.mine, self.package = mine, package

    def _for_file(self, py_file):
        return self.mine if self.mine.is_ours(py_file) else self.package

    def _for_path(self, path):
        return self.mine if os.path.abspath(path).startswith(self.mine.cache + os.sep) else self.package

    def is_ours(self, py_file):
        return self.mine.is_ours(py_file) or self.package.is_ours(py_file)

    def cache_path(self, py_file):
        return self._for_file(py_file).cache_path(py_file)

    def ensure_directory(self, path):
        return self._for_path(path).ensure_directory(path)

    def open_own(self, path):
        return self._for_path(path).open_own(path)

    def damaged(self, path, name, error):
        return self._for_path(path).damaged(path, name, error)

    def unwritable(self, path, error):
        return self._for_path(path).unwritable(path, error)

    def no_locator(self):
        return self.package.no_locator()


# ------------------------------------------------------------------------------ one place
# numba's internals, by name: no module of the package but numba_internals uses them.
PRIVATE_NAMES = {"_compile_for_args", "_compiling_counter", "_cache_hits", "_cache_misses",
                 "typeof_pyval", "targetctx", "targetoptions", "add_overload", "insert_user_function",
                 "enable_caching", "_cache_file", "_index_path", "_load_index", "_load_data",
                 "get_suitable_cache_subpath", "_cache"}
# Modules whose own objects have an attribute of one of these names (the executor's plan cache
# of a Variable, a data source's memory cache).
OWN_NAMES = {"variable.py": {"_cache"}, "graph.py": {"_cache"},
             os.path.join("utils", "data_source.py"): {"_cache"}}
# The one module left out: the CUDA launch path reads numba-cuda's internals itself (its
# dispatcher's typeof_pyval and overloads, numba.core.types, a kernel's _prepare_args and
# _codelibrary, each with a fallback to numba's own launch), being reworked apart from this.
NOT_SCANNED = {os.path.join("cuda_ops", "device.py")}


def _internals_used(tree):
    """(line, what) for each use of numba's internals in the module ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith("numba.core") or (node.module == "numba" and any(
                    a.name == "core" for a in node.names))):
            found.append((node.lineno, "from {} import".format(node.module)))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, "import " + a.name) for a in node.names
                      if a.name.startswith("numba.core")]
        elif isinstance(node, ast.Attribute):
            if node.attr in PRIVATE_NAMES:
                found.append((node.lineno, "." + node.attr))
            elif node.attr == "core" and isinstance(node.value, ast.Name) and node.value.id == "numba":
                found.append((node.lineno, "numba.core"))
        elif isinstance(node, ast.Constant) and node.value in PRIVATE_NAMES:   # getattr(x, "_cache")
            found.append((node.lineno, repr(node.value)))
    return found


def test_the_scan_sees_each_kind_of_use():
    code = ("from numba.core import caching\nimport numba.core.config\nfrom numba import core\n"
            "d._compile_for_args = h\nx = numba.core.event\ngetattr(d, '_cache', None)\n")
    assert [line for line, _ in _internals_used(ast.parse(code))] == [1, 2, 3, 4, 5, 6]


def test_no_module_but_numba_internals_uses_numba_internals():
    offenders, excepted = [], set()
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, PACKAGE)
            if relative == "numba_internals.py":
                continue
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            own = OWN_NAMES.get(relative, set())
            for line, what in _internals_used(tree):
                if relative in NOT_SCANNED:
                    excepted.add((relative, None))
                elif what.strip(".'") in own:
                    excepted.add((relative, what.strip(".'")))
                else:
                    offenders.append("{}:{}: {}".format(relative, line, what))
    assert offenders == []
    # an exception no longer needed goes from OWN_NAMES / NOT_SCANNED
    assert excepted == ({(path, name) for path, names in OWN_NAMES.items() for name in names}
                        | {(path, None) for path in NOT_SCANNED})


def test_numba_internals_is_the_bottom_layer():
    try:
        import tomllib
    except ImportError:   # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    layers = [c for c in contracts if c["type"] == "layers"][0]["layers"]
    assert layers[-1].strip() == "nnabla_jit.numba_internals"
