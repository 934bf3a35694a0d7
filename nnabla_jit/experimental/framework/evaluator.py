"""``Evaluator``: one evaluation (``val_iter`` times: feed data, forward the evaluation
graphs) between start and finish callbacks."""
from .updater import _as_list, _true

__all__ = ["Evaluator"]


class Evaluator:
    """Args: eval_data_feeder(e, vi), eval_graph_forward(e, vi), eval_callback_on_start(e),
    eval_callback_on_finish(e) (a callable or a list), val_iter (int)."""

    def __init__(self, eval_data_feeder, eval_graph_forward, eval_callback_on_start=_true,
                 eval_callback_on_finish=_true, val_iter=1):
        self.eval_data_feeder = eval_data_feeder
        self.eval_graph_forward = eval_graph_forward
        self.eval_callback_on_start = _as_list(eval_callback_on_start)
        self.eval_callback_on_finish = _as_list(eval_callback_on_finish)
        self.val_iter = val_iter

    def evaluate(self, e):
        """Evaluate at epoch ``e``."""
        for callback in self.eval_callback_on_start:
            callback(e)
        for vi in range(self.val_iter):
            self.eval_data_feeder(e, vi)
            self.eval_graph_forward(e, vi)
        for callback in self.eval_callback_on_finish:
            callback(e)
