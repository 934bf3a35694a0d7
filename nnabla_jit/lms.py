"""Out-of-core training (nnabla's ``nnabla.lms``): ``SwapInOutScheduler`` moves arrays between
GPU and host memory so that a network larger than the GPU's memory trains.

In nnabla_jit every array the executor owns lives in host memory (the CUDA backend copies
operands to the device per kernel and frees them), so no array outlives the device memory budget
and there is nothing to schedule: the scheduler keeps nnabla's interface and checks its
arguments, and the training step inside it runs unchanged.
"""
from .context import Context

__all__ = ["SwapInOutScheduler"]


class SwapInOutScheduler:
    """``SwapInOutScheduler(host_ctx, device_ctx, size, prefetch_size=None, save_host_mem=True,
    save_host_mem_no_abort=False)``; use ``with scheduler:`` (or ``start_scheduling()`` /
    ``end_scheduling()``) around each training step, and pass ``scheduler.function_pre_hook``
    etc. to forward/backward/update as in nnabla."""

    def __init__(self, h_ctx, d_ctx, size, prefetch_size=None, save_host_mem=True,
                 save_host_mem_no_abort=False):
        for name, ctx in (("h_ctx", h_ctx), ("d_ctx", d_ctx)):
            if not isinstance(ctx, Context):
                raise TypeError("SwapInOutScheduler: {} must be a Context, got {}".format(
                    name, type(ctx).__name__))
        if int(size) <= 0:
            raise ValueError("SwapInOutScheduler: size must be a positive number of bytes, got {}"
                             .format(size))
        self.h_ctx, self.d_ctx = h_ctx, d_ctx
        self.size = int(size)
        self.prefetch_size = int(size * 1.5) if prefetch_size is None else int(prefetch_size)
        self.save_host_mem = save_host_mem
        self.save_host_mem_no_abort = save_host_mem_no_abort
        self._scheduling = False

    def start_scheduling(self):
        if self._scheduling:
            raise RuntimeError("SwapInOutScheduler: start_scheduling() called twice without "
                               "end_scheduling()")
        self._scheduling = True

    def end_scheduling(self):
        if not self._scheduling:
            raise RuntimeError("SwapInOutScheduler: end_scheduling() without start_scheduling()")
        self._scheduling = False

    def __enter__(self):
        self.start_scheduling()
        return self

    def __exit__(self, *exc):
        self.end_scheduling()

    # Hooks to pass to forward/backward and the solver's update, as in nnabla; arrays stay in
    # host memory, so they have nothing to move.
    def function_pre_hook(self, func):
        pass

    def function_post_hook(self, func):
        pass

    def update_pre_hook(self):
        pass

    def update_post_hook(self):
        pass
