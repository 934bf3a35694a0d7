"""Settings each thread holds for itself: the parameter scope, the context scope and default
context, ``auto_forward`` and ``no_grad``.

Two threads that build graphs under their own ``parameter_scope`` / ``context_scope`` /
``no_grad`` blocks do not see each other's blocks. A setting a thread has not made itself reads
the process-wide value: what the main thread set with ``set_default_context`` or
``set_auto_forward`` (so a worker started after ``nn.set_default_context(ctx)`` runs under
``ctx``), else the initial value. What a worker thread sets stays in that thread.
"""
import threading
from contextlib import contextmanager

__all__ = ["ThreadSettings"]


class ThreadSettings(threading.local):
    """A mapping of settings, per thread, over process-wide values.

    ``settings[key]`` reads the calling thread's value, else the process-wide one;
    ``set(key, value)`` sets the thread's value (and, called from the main thread, the
    process-wide one); ``scoped(key, value)`` sets the thread's value for a ``with`` block.
    """

    def __init__(self, initial):
        # threading.local runs __init__ once per thread with the constructor's arguments, so
        # every thread shares the one ``initial`` dict as its process-wide values.
        self.process_wide = initial
        self.own = {}

    def __getitem__(self, key):
        own = self.own
        return own[key] if key in own else self.process_wide[key]

    def set(self, key, value):
        self.own[key] = value
        if threading.current_thread() is threading.main_thread():
            self.process_wide[key] = value

    @contextmanager
    def scoped(self, key, value):
        own = self.own
        had, prev = key in own, own.get(key)
        own[key] = value
        try:
            yield value
        finally:
            if had:
                own[key] = prev
            else:
                own.pop(key, None)
