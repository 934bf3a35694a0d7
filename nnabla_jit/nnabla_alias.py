"""``import nnabla`` resolved to nnabla_jit: the import finder behind :func:`install_as_nnabla`
(the command line is :mod:`nnabla_jit.as_nnabla`, kept apart so that ``python -m
nnabla_jit.as_nnabla`` finds it not yet imported).

``nnabla.X`` resolves to ``nnabla_jit.X`` (the same module object, so ``nnabla.functions is
nnabla_jit.functions``) and ``nnabla_ext.cpu`` / ``nnabla_ext.cuda`` / ``nnabla_ext.cudnn`` to
the extension modules of :func:`nnabla_jit.ext_utils.import_extension_module`. A package's
attribute that its ``__init__`` binds over a submodule of the same name (``nnabla.logger`` is
the Logger, ``nnabla.grad`` the function, as in nnabla) stays what the package bound: every
nnabla_jit module already imported is entered under its nnabla name at each aliased import, so
the import system finds ``nnabla.logger`` imported and binds nothing over the attribute.

A real nnabla that is installed is never shadowed silently: ``install_as_nnabla()`` raises
:class:`NnablaInstalledError` when ``import nnabla`` would find one, unless ``force=True``
(``--force`` for the command line) asks for nnabla_jit anyway.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

from . import ext_utils

__all__ = ["install_as_nnabla", "uninstall_as_nnabla", "NnablaInstalledError"]

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
        module = importlib.import_module("nnabla_jit" + name[len("nnabla"):])
        _enter_loaded_modules()
        return module

    def exec_module(self, module):
        # The module is nnabla_jit's own, already executed; keep its identity.
        pass


_alias = _NnablaAlias()


def _enter_loaded_modules():
    """Enter every imported ``nnabla_jit.X`` in ``sys.modules`` as ``nnabla.X`` too. An import
    of ``nnabla.X`` that is not there yet sets the package's attribute X to the module once it
    is loaded, over what the package's ``__init__`` bound (``nnabla.logger``, the Logger);
    one already there is returned as it is, as in nnabla, whose ``__init__`` imported it."""
    for name, module in list(sys.modules.items()):
        if name.startswith("nnabla_jit.") and isinstance(module, types.ModuleType):
            sys.modules.setdefault("nnabla" + name[len("nnabla_jit"):], module)


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
