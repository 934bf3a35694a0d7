"""Run programs written for nnabla on nnabla_jit, unchanged.

    python -m nnabla_jit.as_nnabla train.py --epochs 3     # the script sees `import nnabla`
    python -m nnabla_jit.as_nnabla -m package.module ...   # a module, as `python -m` runs it

or, in Python, before the program imports nnabla::

    import nnabla_jit
    nnabla_jit.install_as_nnabla()
    import nnabla as nn                     # nnabla_jit
    import nnabla_ext.cuda                  # nnabla_jit's CUDA extension (needs a GPU)

The finder itself is :mod:`nnabla_jit.nnabla_alias`; this module is the command line, which
``import nnabla_jit`` does not import (so runpy finds it fresh, without a warning). A script or
module that cannot be found or read is one line on stderr and exit status 2 (1 for a module),
as ``python`` says it; what the program itself raises is its own traceback.
"""
import importlib.util
import os
import runpy
import sys

from .nnabla_alias import NnablaInstalledError, install_as_nnabla, uninstall_as_nnabla

__all__ = ["install_as_nnabla", "uninstall_as_nnabla", "NnablaInstalledError", "main"]

_USAGE = ("usage: python -m nnabla_jit.as_nnabla [--force] script.py [args...]\n"
          "       python -m nnabla_jit.as_nnabla [--force] -m module [args...]\n"
          "Runs an nnabla program with `import nnabla` resolved to nnabla_jit.")


def _fail(message, status):
    print("nnabla_jit.as_nnabla: {}".format(message), file=sys.stderr)
    return status


def _unreadable_script(path):
    """Why ``path`` cannot be run as a script (None when it can): runpy's own errors would be
    tracebacks."""
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "__main__.py")):
            return None
        return "can't find '__main__' module in {!r}".format(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        return "can't open file {!r}: [Errno {}] {}".format(path, e.errno, e.strerror)
    return None


def _missing_module(name):
    """Why module ``name`` cannot be run (None when it can be found)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as e:     # a parent package missing, an empty name
        return "no module named {!r} ({})".format(name, e)
    if spec is None:
        return "no module named {!r}".format(name)
    return None


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
        return _fail(e, 2)
    if argv[0] == "-m":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        missing = _missing_module(argv[1])
        if missing:
            return _fail(missing, 1)
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        unreadable = _unreadable_script(argv[0])
        if unreadable:
            return _fail(unreadable, 2)
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))   # as `python script.py` does
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
