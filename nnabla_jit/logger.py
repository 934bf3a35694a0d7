"""``nn.logger``: the 'nnabla' logger, printing ``time [nnabla][LEVEL]: message`` as nnabla does.

Its console level and format come from the ``[LOG]`` section of the ``nnabla.conf`` files
(:mod:`nnabla_jit.config`); ``$NNABLA_JIT_LOG_LEVEL`` overrides the level. With ``log_file_name``
set, records also go to that file at ``log_file_level``.
"""
import logging
import os

from .config import nnabla_config

__all__ = ["logger", "log_console_level", "log_console_format"]


def _setting(key, default):
    return nnabla_config.get("LOG", key, fallback=default)


log_console_level = logging.getLevelName(
    os.environ.get("NNABLA_JIT_LOG_LEVEL") or _setting("log_console_level", "WARNING").upper())
if not isinstance(log_console_level, int):
    log_console_level = logging.WARNING
log_console_format = _setting("log_console_format", "%(asctime)s [%(name)s][%(levelname)s]: %(message)s")

logger = logging.getLogger("nnabla")
if not logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter(log_console_format))
    logger.addHandler(_handler)
    if _setting("log_file_name", ""):
        _file_handler = logging.FileHandler(_setting("log_file_name", ""))
        _file_handler.setLevel(_setting("log_file_level", "DEBUG").upper())
        _file_handler.setFormatter(logging.Formatter(_setting("log_file_format", log_console_format)))
        logger.addHandler(_file_handler)
    logger.propagate = False
logger.setLevel(log_console_level)
