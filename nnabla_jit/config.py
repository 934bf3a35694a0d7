"""Settings from ``nnabla.conf`` files (nnabla's ``nnabla.config``).

    from nnabla_jit.config import nnabla_config
    size = int(nnabla_config.get('DATA_ITERATOR', 'data_source_file_cache_size'))

Files are read in this order, each overriding the ones before: the ``nnabla.conf`` shipped next
to this module (the defaults), ``/etc/nnabla.conf``, ``~/.nnabla``, ``./nnabla.conf`` in the
current directory, and the file named by ``$NNABLA_CONFIG_FILE_PATH``. Sections and keys are
nnabla's; any others may be added.
"""
import configparser
import os
from os.path import abspath, dirname, exists, expanduser, join

__all__ = ["nnabla_config", "config_files", "load_config"]


def config_files():
    """The files that are read, in order (only the existing ones are)."""
    files = [join(dirname(abspath(__file__)), "nnabla.conf")]
    if os.name == "posix":
        files += ["/etc/nnabla.conf", abspath(join(expanduser("~"), ".nnabla"))]
    files.append(abspath(join(os.getcwd(), "nnabla.conf")))
    override = os.environ.get("NNABLA_CONFIG_FILE_PATH")
    if override:
        files.append(override)
    return files


def load_config():
    """A fresh ``RawConfigParser`` over :func:`config_files`."""
    config = configparser.RawConfigParser()
    for filename in config_files():
        if exists(filename):
            config.read(filename)
    return config


nnabla_config = load_config()
