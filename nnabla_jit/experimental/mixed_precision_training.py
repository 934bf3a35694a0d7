"""Mixed precision training: dynamic loss scaling (nnabla's
``nnabla.experimental.mixed_precision_training``).

Under ``get_extension_context('cpu', type_config='half')`` activations and gradients are stored in
float16, whose largest value is 65504 and whose smallest is about 6e-8. Multiplying the loss by a
scale before backward keeps small gradients from underflowing; a scale that is too large makes
some gradient overflow to inf. Dynamic loss scaling tries a large scale, halves it whenever a
gradient is not finite (and redoes the step on fresh data), and doubles it again after ``N``
steps without overflow:

    updater = DynamicLossScalingUpdater(solver, loss, data_feeder=feed, scale=8.0, N=2000)
    for i in range(max_iter):
        updater.update()
"""

__all__ = ["DynamicLossScalingUpdater"]


def _no_data_feed():
    """The default feeder: the data is set by the caller before ``update()``."""


class DynamicLossScalingUpdater(object):
    """Runs one training step with dynamic loss scaling.

    Args:
        solver (Solver): the solver updating the parameters (Momentum, Adam, ...).
        loss (Variable): the loss forward and backward are called on.
        data_feeder (callable): called without arguments before each forward to put the next
            batch into the input variables. The default does nothing (nnabla's default, an
            identity taking one argument, fails when called without one).
        scale (float): the loss scale; it changes during training.
        scaling_factor (float): what the scale is divided by on overflow and multiplied by
            after ``N`` steps without one.
        N (int): steps without overflow before the scale grows.
        clear_buffer (bool): free intermediate buffers during forward and backward.
        accum_grad (int): forward and backward passes (each with a fresh batch) whose gradients
            add up before one update.
        weight_decay (float or None): decay rate applied after the gradients are unscaled.
        comm (Communicator or None): all-reduces ``grads`` before the overflow check
            (distributed training).
        grads (list of NdArray): the gradients ``comm`` all-reduces (summed, not divided:
            fold the division into the learning rate or the scale).

    The attributes of the same names can be changed between steps.
    """

    def __init__(self, solver, loss, data_feeder=_no_data_feed, scale=8.0, scaling_factor=2.0,
                 N=2000, clear_buffer=True, accum_grad=1, weight_decay=None, comm=None, grads=[]):
        if not callable(data_feeder):
            raise TypeError("DynamicLossScalingUpdater: data_feeder must be callable, got {}"
                            .format(type(data_feeder).__name__))
        if not scale > 0 or not scaling_factor > 0:
            raise ValueError("DynamicLossScalingUpdater: scale ({}) and scaling_factor ({}) must "
                             "be positive".format(scale, scaling_factor))
        if int(accum_grad) < 1:
            raise ValueError("DynamicLossScalingUpdater: accum_grad must be at least 1, got {}"
                             .format(accum_grad))
        self.solver = solver
        self.loss = loss
        self.data_feeder = data_feeder
        self.scale = scale
        self.scaling_factor = scaling_factor
        self.N = N
        self.clear_buffer = clear_buffer
        self.accum_grad = int(accum_grad)
        self.weight_decay = weight_decay
        self.comm = comm
        self.grads = list(grads)
        self._counter = 0
        self._max_retries = 100   # overflowing steps in a row before one update is given up

    def update(self):
        """One step: zero the gradients; feed, forward and backward (scaled by ``scale``)
        ``accum_grad`` times; all-reduce with ``comm``; then, if every gradient is finite,
        unscale them, apply the weight decay and update -- otherwise divide the scale by
        ``scaling_factor`` and redo the step on the next data (after 100 overflowing tries in a
        row the step is skipped). The scale is multiplied by ``scaling_factor`` once more than
        ``N`` updates have passed since it last changed."""
        for _ in range(self._max_retries + 1):
            if self._forward_backward():
                break
            self.scale /= self.scaling_factor
            self._counter = 0
        else:
            return
        self.solver.scale_grad(1.0 / self.scale)
        if self.weight_decay is not None:
            self.solver.weight_decay(self.weight_decay)
        self.solver.update()
        if self._counter > self.N:
            self.scale *= self.scaling_factor
            self._counter = 0
        self._counter += 1

    def _forward_backward(self):
        """Compute the scaled gradients; True when all of them are finite."""
        self.solver.zero_grad()
        for _ in range(self.accum_grad):
            self.data_feeder()
            self.loss.forward(clear_no_need_grad=self.clear_buffer)
            self.loss.backward(self.scale, clear_buffer=self.clear_buffer)
        if self.comm and self.grads:
            self.comm.all_reduce(self.grads, division=False, inplace=False)
        return not self.solver.check_inf_or_nan_grad()
