"""``Updater``: one training update (zero grads; per accumulation step feed, forward,
backward; all-reduce when distributed; solver update) as calls of a Worker's hooks."""

__all__ = ["Updater"]


def _as_list(x):
    return x if type(x) is list else [x]


def _true(*args):
    return True


class Updater:
    """One update, made of callables (a Worker passes its hook methods).

    Args:
        train_data_feeder(i, e, ag), solver_zero_grad(i, e), solver_update(i, e): the steps.
        loss_forward(i, e, ag), loss_backward(i, e, ag): forward and backward of the loss.
        loss_forward_callback_on_start/..._on_finish, loss_backward_callback_on_start/
            ..._on_finish (i, e, ag), comm_all_reduce_callback_on_start/..._on_finish,
            solver_update_callback_on_start/..._on_finish (i, e): a callable or a list of them.
        comm_all_reduce(i, e): the all-reduce, called when ``comm`` is given and ``grads`` is
            not empty.
        accum_grad (int): forward/backward steps accumulated per update.
    """

    def __init__(self, train_data_feeder, solver_zero_grad, solver_update,
                 loss_forward=_true, loss_backward=_true,
                 loss_forward_callback_on_start=_true, loss_forward_callback_on_finish=_true,
                 loss_backward_callback_on_start=_true, loss_backward_callback_on_finish=_true,
                 comm_all_reduce_callback_on_start=_true, comm_all_reduce=_true,
                 comm_all_reduce_callback_on_finish=_true,
                 solver_update_callback_on_start=_true, solver_update_callback_on_finish=_true,
                 accum_grad=1, comm=None, grads=None):
        self.train_data_feeder = train_data_feeder
        self.solver_zero_grad = solver_zero_grad
        self.solver_update = solver_update
        self.loss_forward = loss_forward
        self.loss_backward = loss_backward
        self.comm_all_reduce = comm_all_reduce
        self.loss_forward_callback_on_start = _as_list(loss_forward_callback_on_start)
        self.loss_forward_callback_on_finish = _as_list(loss_forward_callback_on_finish)
        self.loss_backward_callback_on_start = _as_list(loss_backward_callback_on_start)
        self.loss_backward_callback_on_finish = _as_list(loss_backward_callback_on_finish)
        self.comm_all_reduce_callback_on_start = _as_list(comm_all_reduce_callback_on_start)
        self.comm_all_reduce_callback_on_finish = _as_list(comm_all_reduce_callback_on_finish)
        self.solver_update_callback_on_start = _as_list(solver_update_callback_on_start)
        self.solver_update_callback_on_finish = _as_list(solver_update_callback_on_finish)
        self.accum_grad = accum_grad
        self.comm = comm
        self.grads = grads if grads is not None else []

    def update(self, i, e):
        """Update ``i`` of epoch ``e``."""
        self.solver_zero_grad(i, e)
        for ag in range(self.accum_grad):
            self.train_data_feeder(i, e, ag)
            self._step("loss_forward", i, e, ag)
            self._step("loss_backward", i, e, ag)
        if self.comm and self.grads:
            self._step("comm_all_reduce", i, e)
        self._step("solver_update", i, e)

    def _step(self, name, *args):
        """Call step ``name`` between its ``name_callback_on_start`` and ``_on_finish`` lists."""
        for callback in getattr(self, name + "_callback_on_start"):
            callback(*args)
        getattr(self, name)(*args)
        for callback in getattr(self, name + "_callback_on_finish"):
            callback(*args)
