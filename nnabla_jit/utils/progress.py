"""Progress reports of long CLI operations (nnabla's ``nnabla.utils.progress``).

``configure_progress(file_name, cb)`` names a state file (rewritten with ``"<state> (<pct>%)"``
at most once a second) and/or a callback ``cb(state, progress)``; ``progress(state, p)``
reports. With neither configured, reports are dropped.
"""
import os
import time
from datetime import datetime, timedelta

from ..logger import logger

__all__ = ["configure_progress", "progress", "state_file_name", "cpu_load_backend_ok"]

state_file_name = ""
state_callback = None
last_state_datetime = datetime.now()
# nnabla reports CPU load with psutil when present; not a dependency here.
cpu_load_backend_ok = False


def configure_progress(file_name, cb=None):
    global state_file_name, state_callback
    if file_name is not None:   # absolute: the file named now, wherever the process goes later
        state_file_name = os.path.abspath(file_name)
    if cb is not None:
        state_callback = cb
    progress(None)


# nnabla retries a failed write 100 times, 0.1 s apart: on Windows the reader of the file
# (Neural Network Console) can hold it locked for a moment. Elsewhere no reader blocks a write,
# so a failure (a read-only folder, a full disk) is final and reported at once, not after 10 s.
_WRITE_ATTEMPTS = 100 if os.name == "nt" else 1


def _write_state(text):
    for attempt in range(_WRITE_ATTEMPTS):
        try:
            with open(state_file_name, "w") as f:
                f.write(text)
            return
        except OSError:
            if attempt == _WRITE_ATTEMPTS - 1:
                logger.critical("Failed to write to {}.".format(state_file_name))
                raise
            time.sleep(0.1)


def progress(state, progress=0.0):
    """Report ``state`` at fraction ``progress`` (0..1); ``state=None`` clears the file."""
    global last_state_datetime
    if state_file_name:
        now = datetime.now()
        if state is None or last_state_datetime < now - timedelta(milliseconds=1000):
            last_state_datetime = now
            _write_state("" if state is None else "{} ({:3.2f}%)".format(state, progress * 100))
    if state_callback is not None:
        state_callback(state, progress)
