"""Run programs written for nnabla on nnabla_jit, unchanged.

    python -m nnabla_jit.as_nnabla train.py --epochs 3     # the script sees `import nnabla`

or, in Python, before the program imports nnabla::

    import nnabla_jit
    nnabla_jit.install_as_nnabla()
    import nnabla as nn                     # nnabla_jit
    import nnabla_ext.cuda                  # nnabla_jit's CUDA extension (needs a GPU)

``nnabla.X`` resolves to ``nnabla_jit.X`` (the same module object, so ``nnabla.functions is
nnabla_jit.functions``) and ``nnabla_ext.cpu`` / ``nnabla_ext.cuda`` / ``nnabla_ext.cudnn`` to
the extension modules of :func:`nnabla_jit.ext_utils.import_extension_module`.

A real nnabla that is installed is never shadowed silently: ``install_as_nnabla()`` raises
:class:`NnablaInstalledError` when ``import nnabla`` would find one, unless ``force=True``
(``--force`` for the command line) asks for nnabla_jit anyway.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys

from . import ext_utils

__all__ = ["install_as_nnabla", "uninstall_as_nnabla", "NnablaInstalledError", "main"]

_EXTENSIONS = ("cpu", "cuda", "cudnn")


class NnablaInstalledError(ImportError):
    """A real nnabla is installed where ``import nnabla`` would find it."""


class _NnablaAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``nnabla[.X]`` as ``nnabla_jit[.X]`` and ``nnabla_ext[.cpu|.cuda|.cudnn]`` as
    nnabla_jit's extension modules."""

    def find_spec(self, name, path=None, target=None):
        if name == "nnabla" or name.startswith("nnabla."):
            real = "nnabla_jit" + name[len("nnabla"):]
            try:
                if importlib.util.find_spec(real) is None:
                    return None
            except ModuleNotFoundError:   # a parent package is missing
                return None
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if name == "nnabla_ext" or (name.startswith("nnabla_ext.")
                                    and name.split(".", 1)[1] in _EXTENSIONS):
            return importlib.machinery.ModuleSpec(name, self, is_package=name == "nnabla_ext")
        return None

    def create_module(self, spec):
        name = spec.name
        if name == "nnabla_ext":
            module = type(sys)("nnabla_ext", "nnabla_jit's extensions under nnabla's names")
            module.__path__ = []
            return module
        if name.startswith("nnabla_ext."):
            ext = name.split(".", 1)[1]
            module = ext_utils.import_extension_module(ext)   # ImportError without a GPU
            return module
        return importlib.import_module("nnabla_jit" + name[len("nnabla"):])

    def exec_module(self, module):
        # The module is nnabla_jit's own, already executed; keep its identity.
        pass


_alias = _NnablaAlias()


class _ExtensionsWhenAliased(_NnablaAlias):
    """Finds ``nnabla_ext[.cpu|.cuda|.cudnn]`` as nnabla_jit's extensions, but only once
    ``nnabla`` itself has been imported as nnabla_jit (by any alias, e.g. a test runner's) and
    no other finder has a real ``nnabla_ext``: it sits at the end of ``sys.meta_path``."""

    def find_spec(self, name, path=None, target=None):
        if not (name == "nnabla_ext" or name.startswith("nnabla_ext.")):
            return None
        if not _is_ours(sys.modules.get("nnabla")):
            return None
        return super().find_spec(name, path, target)


def register_extension_fallback():
    """Called by ``import nnabla_jit``: see :class:`_ExtensionsWhenAliased`."""
    if not any(isinstance(f, _ExtensionsWhenAliased) for f in sys.meta_path):
        sys.meta_path.append(_ExtensionsWhenAliased())


def _real_nnabla_spec():
    """Where ``import nnabla`` would find a real nnabla, looking past our own finder."""
    if isinstance(sys.modules.get("nnabla"), type(sys)) and not _is_ours(sys.modules["nnabla"]):
        return sys.modules["nnabla"].__spec__
    for finder in sys.meta_path:
        if finder is _alias or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec("nnabla", None)
        if spec is not None:
            return spec
    return None


def _is_ours(module):
    return getattr(module, "__name__", "").startswith("nnabla_jit")


def install_as_nnabla(force=False):
    """Make ``import nnabla`` and ``import nnabla_ext.<cpu|cuda|cudnn>`` give nnabla_jit.

    Raises NnablaInstalledError if a real nnabla is installed (or already imported), unless
    ``force=True``. Calling it again is harmless."""
    if _alias in sys.meta_path:
        return
    spec = _real_nnabla_spec()
    if spec is not None and not force:
        raise NnablaInstalledError(
            "install_as_nnabla: a real nnabla is installed ({}); `import nnabla` would no longer "
            "find it. Use a virtual environment without nnabla, or pass force=True "
            "(`python -m nnabla_jit.as_nnabla --force ...`) to use nnabla_jit anyway".format(
                spec.origin or spec.name))
    for name in [n for n in sys.modules if n == "nnabla" or n.startswith("nnabla.")
                 or n == "nnabla_ext" or n.startswith("nnabla_ext.")]:
        if not _is_ours(sys.modules[name]):
            del sys.modules[name]   # a forced install replaces an imported real nnabla
    sys.meta_path.insert(0, _alias)


def uninstall_as_nnabla():
    """Undo :func:`install_as_nnabla` (modules already imported as nnabla stay imported)."""
    if _alias in sys.meta_path:
        sys.meta_path.remove(_alias)
    for name in [n for n in sys.modules if n == "nnabla" or n.startswith("nnabla.")
                 or n == "nnabla_ext" or n.startswith("nnabla_ext.")]:
        del sys.modules[name]


_USAGE = ("usage: python -m nnabla_jit.as_nnabla [--force] script.py [args...]\n"
          "       python -m nnabla_jit.as_nnabla [--force] -m module [args...]\n"
          "Runs an nnabla program with `import nnabla` resolved to nnabla_jit.")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    force = False
    if argv and argv[0] == "--force":
        force, argv = True, argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE)
        return 0 if argv else 2
    try:
        install_as_nnabla(force=force)
    except NnablaInstalledError as e:
        print("nnabla_jit.as_nnabla: {}".format(e), file=sys.stderr)
        return 2
    if argv[0] == "-m":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))   # as `python script.py` does
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
