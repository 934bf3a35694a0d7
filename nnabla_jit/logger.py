"""``nn.logger``: the 'nnabla' logger, printing ``time [nnabla][LEVEL]: message`` as nnabla does.

Its settings come from the ``[LOG]`` section of the ``nnabla.conf`` files
(:mod:`nnabla_jit.config`), with nnabla's keys and defaults: ``log_console_level`` (INFO) and
``log_console_format`` for the console (stderr); ``log_file_name`` (empty: no file),
``log_file_level`` (DEBUG) and ``log_file_format`` for a log file. ``$NNABLA_JIT_LOG_LEVEL``
overrides the console level. The logger's own level is the lower of the two, so the file gets
the DEBUG records its documented default promises while the console shows INFO and up.
"""
import logging
import os

from .config import nnabla_config

__all__ = ["logger", "log_console_level", "log_console_format"]

_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING,
           "ERROR": logging.ERROR, "CRITICAL": logging.CRITICAL}


def _setting(key, default):
    return nnabla_config.get("LOG", key, fallback=default)


def _level(text, key, default):
    level = _LEVELS.get(str(text).strip().upper())
    if level is None:
        logging.getLogger("nnabla").warning(
            "nnabla.conf [LOG] %s: unknown level %r (use DEBUG, INFO, WARNING, ERROR or CRITICAL); "
            "using %s", key, text, logging.getLevelName(default))
        return default
    return level


log_console_level = _level(os.environ.get("NNABLA_JIT_LOG_LEVEL") or _setting("log_console_level", "INFO"),
                           "log_console_level", logging.INFO)
log_console_format = _setting("log_console_format", "%(asctime)s [%(name)s][%(levelname)s]: %(message)s")

logger = logging.getLogger("nnabla")
if not logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter(log_console_format))
    _handler.setLevel(log_console_level)
    logger.addHandler(_handler)
    _lowest = log_console_level
    if _setting("log_file_name", ""):
        _file_level = _level(_setting("log_file_level", "DEBUG"), "log_file_level", logging.DEBUG)
        _file_handler = logging.FileHandler(_setting("log_file_name", ""))
        _file_handler.setLevel(_file_level)
        _file_handler.setFormatter(logging.Formatter(_setting("log_file_format", log_console_format)))
        logger.addHandler(_file_handler)
        _lowest = min(_lowest, _file_level)
    logger.propagate = False
    logger.setLevel(_lowest)
