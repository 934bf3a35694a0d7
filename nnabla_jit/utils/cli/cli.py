"""nnabla's ``nnabla.utils.cli.cli`` module path: the command line's entry points.

``main(argv=None)`` is :func:`nnabla_jit.utils.cli.main` (it returns the exit status);
``cli_main(parser, args)`` runs arguments already parsed by ``parser``; ``version_command``
prints the version.
"""
from . import main, run_parsed, version_string

__all__ = ["cli_main", "main", "version_command"]


def version_command(args=None):
    print(version_string())
    return True


def cli_main(parser, args):
    """Run the command of ``args`` (parsed by ``parser``); returns the exit status."""
    return run_parsed(parser, args)
