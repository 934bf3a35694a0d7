"""``Worker``: the model side of a framework program. A subclass sets up its context,
variables, graphs, loss (``self._loss``), solver (``self._solver``) and monitors in the
``_*_init`` hooks and feeds data / evaluates in the ``_train_data_feeder`` /
``_eval_*`` hooks; the Trainer drives it through an Updater and an Evaluator built on those
hooks. Every hook runs when ``_loopCallbackCondition(i, e, ag)`` (by default: always)."""
from .evaluator import Evaluator
from .updater import Updater

__all__ = ["Worker", "Updater", "Evaluator"]


class Worker:
    """Args:
        data (Data): the program's data.
        max_epoch (int), iter_per_epoch (int): the loop's length.
        clear_buffer (bool): passed to the loss's backward.
        clear_no_need_grad (bool): passed to the loss's forward.
    """

    def __init__(self, data, max_epoch=1, iter_per_epoch=1, clear_buffer=True,
                 clear_no_need_grad=True):
        self._data = data
        self._max_epoch = max_epoch
        self._iter_per_epoch = iter_per_epoch
        self._clear_buffer = clear_buffer
        self._clear_no_need_grad = clear_no_need_grad
        self._updater = Updater(
            train_data_feeder=self._train_data_feeder,
            solver_zero_grad=self._solver_zero_grad,
            solver_update=self._solver_update,
            loss_forward=self._loss_forward,
            loss_backward=self._loss_backward,
            loss_forward_callback_on_start=[self._loss_forward_callback_on_start],
            loss_forward_callback_on_finish=[self._loss_forward_callback_on_finish],
            loss_backward_callback_on_start=[self._loss_backward_callback_on_start],
            loss_backward_callback_on_finish=[self._loss_backward_callback_on_finish],
            comm_all_reduce_callback_on_start=[self._comm_all_reduce_callback_on_start],
            comm_all_reduce=self._comm_all_reduce,
            comm_all_reduce_callback_on_finish=[self._comm_all_reduce_callback_on_finish],
            solver_update_callback_on_start=[self._solver_update_callback_on_start],
            solver_update_callback_on_finish=[self._solver_update_callback_on_finish],
            accum_grad=1, comm=None, grads=[])
        self._evaluator = Evaluator(
            eval_data_feeder=self._eval_data_feeder,
            eval_graph_forward=self._eval_graph_forward,
            eval_callback_on_start=[self._eval_callback_on_start],
            eval_callback_on_finish=[self._eval_callback_on_finish],
            val_iter=1)

    # Hooks a subclass overrides ------------------------------------------------------
    def _loopCallbackCondition(self, i=0, e=0, ag=0, toExecute=lambda i, e, ag: True):
        return toExecute(i, e, ag)

    def _force_to_list(self, x):
        return x if type(x) is list else [x]

    def _load_parameters(self):
        pass

    def _save_parameters(self):
        pass

    def _load_model(self):
        pass

    def _save_model(self):
        pass

    def _ctx_init(self):
        pass

    def _var_init(self):
        pass

    def _comm_init(self):
        pass

    def _data_init(self):
        pass

    def _graph_init(self):
        pass

    def _loss_init(self):
        pass

    def _solver_init(self):
        pass

    def _monitor_init(self):
        pass

    # What the Trainer calls -------------------------------------------------------------
    def max_epoch(self):
        return self._max_epoch

    def iter_per_epoch(self):
        return self._iter_per_epoch

    def training_prepare(self):
        self._ctx_init()
        self._var_init()
        self._comm_init()
        self._data_init()
        self._graph_init()
        self._loss_init()
        self._solver_init()
        self._monitor_init()

    def training_complete(self):
        pass

    def load_checkpoint(self):
        """The epoch to start from (0: no checkpoint)."""
        return 0

    def brief(self):
        pass

    def epoch_loop_start(self, e):
        pass

    def epoch_loop_end(self, e):
        pass

    def save_checkpoint_at_epoch_end(self, e):
        pass

    def iter_loop_start(self, i, e):
        pass

    def iter_loop_end(self, i, e):
        pass

    def update_in_iteration(self, i, e):
        if self._loopCallbackCondition(i=i, e=e):
            self._updater.update(i, e)

    def evaluate_at_epoch_start(self, e):
        if self._loopCallbackCondition(e=e):
            self._evaluator.evaluate(e)

    def evaluate_at_training_end(self):
        self._evaluator.evaluate(self._max_epoch)

    def save_model_at_start(self):
        pass

    def save_model_at_end(self):
        pass

    # The Updater's and Evaluator's steps --------------------------------------------------
    def _train_data_feeder(self, i, e, ag):
        pass

    def _solver_zero_grad(self, i, e):
        if self._loopCallbackCondition(i=i, e=e):
            self._solver.zero_grad()

    def _loss_forward_callback_on_start(self, i, e, ag):
        pass

    def _loss_forward(self, i, e, ag):
        if self._loopCallbackCondition(i=i, e=e, ag=ag) and self._loss is not None:
            self._loss.forward(clear_no_need_grad=self._clear_no_need_grad)

    def _loss_forward_callback_on_finish(self, i, e, ag):
        pass

    def _loss_backward_callback_on_start(self, i, e, ag):
        pass

    def _loss_backward(self, i, e, ag):
        if self._loopCallbackCondition(i=i, e=e, ag=ag) and self._loss is not None:
            self._loss.backward(clear_buffer=self._clear_buffer)

    def _loss_backward_callback_on_finish(self, i, e, ag):
        pass

    def _comm_all_reduce_callback_on_start(self, i, e):
        pass

    def _comm_all_reduce(self, i, e):
        if self._loopCallbackCondition(i=i, e=e) and self._comm is not None:
            self._comm.all_reduce(self.grads, division=False, inplace=False)

    def _comm_all_reduce_callback_on_finish(self, i, e):
        pass

    def _solver_update_callback_on_start(self, i, e):
        pass

    def _solver_update(self, i, e):
        if self._loopCallbackCondition(i=i, e=e) and self._solver is not None:
            self._solver.update()

    def _solver_update_callback_on_finish(self, i, e):
        pass

    def _eval_callback_on_start(self, e):
        pass

    def _eval_data_feeder(self, e, vi):
        pass

    def _eval_graph_forward(self, e, vi):
        pass

    def _eval_callback_on_finish(self, e):
        pass
