"""Every public module and name of nnabla 1.39 exists at the same path under nnabla_jit, or is
listed with a reason in the README's "Not provided" table.

``tests/fixtures/nnabla_public_api.json`` lists nnabla's modules and their public names. It was
made once with the real nnabla 1.39 (the C extension, the mlflow hooks and private ``_`` modules
aside)::

    nnabla-oracle python tests/test_public_surface.py --generate tests/fixtures/nnabla_public_api.json

A module's public names are its ``__all__``, or else the names not starting with ``_`` that
are functions or classes of nnabla, plain constants, or instances of nnabla's types (names
re-exported from other nnabla modules count: nnabla programs import them from there). Modules
whose optional dependencies nnabla's environment lacked are listed with no names.

README rows name a module (``nnabla.utils.qnn``: it, its submodules and names) or a single name
(``nnabla.parameter.load_files``).
"""
import importlib
import json
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "nnabla_public_api.json")
README = os.path.join(os.path.dirname(HERE), "README.md")


def _not_provided():
    """The entries of the README's "Not provided" table: {'nnabla.x.y': reason}."""
    text = open(README, encoding="utf-8").read()
    m = re.search(r"<!-- not-provided:start -->(.*?)<!-- not-provided:end -->", text, re.S)
    assert m, "README.md has no <!-- not-provided:start --> ... <!-- not-provided:end --> section"
    entries = {}
    for line in m.group(1).splitlines():
        row = re.match(r"\|\s*((?:`[^`]+`[ ,]*)+)\|\s*(.*?)\s*\|\s*$", line)
        if row:
            for name in re.findall(r"`([^`]+)`", row.group(1)):
                entries[name] = row.group(2)
    return entries


def _covered(path, entries):
    """Whether ``path`` (a module or module.name) is listed, itself or by a parent module."""
    parts = path.split(".")
    return any(".".join(parts[:k]) in entries for k in range(1, len(parts) + 1))


def _ours(module_path):
    return "nnabla_jit" + module_path[len("nnabla"):]


GENERATING = __name__ == "__main__"
API = {"modules": {}} if GENERATING else json.load(open(FIXTURE, encoding="utf-8"))
ENTRIES = {} if GENERATING else _not_provided()


@pytest.mark.parametrize("module", sorted(API["modules"]))
def test_module_and_names_exist_or_are_listed(module):
    if _covered(module, ENTRIES):
        return
    try:
        mod = importlib.import_module(_ours(module))
    except ImportError as e:
        pytest.fail("{} is missing ({}); add it, or list it in the README's Not provided table"
                    .format(module, e))
    missing = [n for n in API["modules"][module]
               if not hasattr(mod, n) and not _covered(module + "." + n, ENTRIES)]
    assert not missing, ("{} lacks {}: add them, or list them in the README's Not provided table"
                         .format(module, ", ".join(missing)))


def test_every_readme_entry_names_something_of_nnabla_that_is_missing():
    """A row must name a module or name of nnabla 1.39, with a reason, that nnabla_jit does not
    have (rows for things since added must go)."""
    modules = API["modules"]
    # non-public names nnabla's modules and nnabla-examples import (tests/differential)
    private = json.load(open(os.path.join(HERE, "fixtures", "differential", "surface_names.json"),
                             encoding="utf-8"))["private"]
    for entry, reason in ENTRIES.items():
        assert reason, "README Not provided row {} gives no reason".format(entry)
        if entry in modules or any(m.startswith(entry + ".") for m in modules):
            try:
                importlib.import_module(_ours(entry))
            except ImportError:
                continue
            # A module that exists may still be listed for its missing submodules or names.
            has_missing = any(
                m.startswith(entry) and (_submodule_missing(m) or _names_missing(m))
                for m in modules)
            assert has_missing, "README lists {}, but nnabla_jit has all of it now".format(entry)
            continue
        module, _, name = entry.rpartition(".")
        assert (module in modules and name in modules[module]) or name in private.get(module, ()), (
            "README Not provided row {} is no module or name of nnabla 1.39".format(entry))
        try:
            present = hasattr(importlib.import_module(_ours(module)), name)
        except ImportError:
            present = False
        assert not present, "README lists {}, but nnabla_jit has it now".format(entry)


def _submodule_missing(module):
    try:
        importlib.import_module(_ours(module))
        return False
    except ImportError:
        return True


def _names_missing(module):
    try:
        mod = importlib.import_module(_ours(module))
    except ImportError:
        return True
    return any(not hasattr(mod, n) for n in API["modules"][module])


# ------------------------------------------------------------------ generating the fixture
def _public_names(mod):
    import inspect
    import types
    explicit = getattr(mod, "__all__", None)
    names = []
    for k in (explicit if explicit is not None else dir(mod)):
        if k.startswith("_"):
            continue
        try:
            v = getattr(mod, k)
        except AttributeError:
            continue
        if isinstance(v, types.ModuleType):
            continue
        if explicit is None:
            if callable(v) or inspect.isclass(v):
                owner = getattr(v, "__module__", None) or ""
                if not owner.startswith("nnabla"):
                    continue
            elif not isinstance(v, (int, float, str, bool, tuple, list, dict)):
                if not type(v).__module__.startswith("nnabla"):
                    continue
        names.append(k)
    return sorted(set(names))


def generate(path):
    """Write the fixture from the nnabla installed in this interpreter."""
    import pkgutil
    import nnabla
    skip = ("nnabla.libnnabla", "nnabla.mlflow_save_load_model", "nnabla.autolog")
    names = ["nnabla"] + [m.name for m in pkgutil.walk_packages(nnabla.__path__, "nnabla.",
                                                                 onerror=lambda n: None)]
    # nnabla.backward_function is a folder without __init__ (a namespace package): walk it too.
    folder = os.path.join(os.path.dirname(nnabla.__file__), "backward_function")
    names += ["nnabla.backward_function." + f[:-3] for f in sorted(os.listdir(folder))
              if f.endswith(".py") and not f.startswith("_")]
    modules, unimportable = {}, {}
    for name in names:
        if name.startswith(skip) or any(p.startswith("_") for p in name.split(".")):
            continue
        try:
            modules[name] = _public_names(importlib.import_module(name))
        except Exception as e:      # an optional dependency nnabla's environment lacks
            modules[name] = []
            unimportable[name] = repr(e)
    data = {"nnabla_version": nnabla.__version__, "modules": modules,
            "unimportable_in_reference": unimportable}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--generate":
        generate(sys.argv[2])
    else:
        sys.exit("usage: python tests/test_public_surface.py --generate OUT.json (with nnabla installed)")
