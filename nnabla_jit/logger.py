"""``nn.logger``: the 'nnabla' logger, printing ``time [nnabla][LEVEL]: message`` as nnabla does."""
import logging
import os

logger = logging.getLogger("nnabla")
if not logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s [%(name)s][%(levelname)s]: %(message)s"))
    logger.addHandler(_handler)
    logger.propagate = False
logger.setLevel(os.environ.get("NNABLA_JIT_LOG_LEVEL", "WARNING").upper())
