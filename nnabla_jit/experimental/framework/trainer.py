"""``Trainer``: the common training loop, calling a Worker's hooks."""

__all__ = ["Trainer"]


class Trainer:
    """``Trainer(worker).train()``: load a checkpoint (the start epoch), prepare, then per
    epoch: evaluate, ``iter_per_epoch`` updates, save a checkpoint; finally evaluate, save the
    model, complete."""

    def __init__(self, worker):
        self.worker = worker
        self.start_epoch = 0

    def train(self):
        w = self.worker
        self.start_epoch = w.load_checkpoint()
        w.training_prepare()
        w.save_model_at_start()
        for e in range(self.start_epoch, self.start_epoch + w.max_epoch()):
            w.epoch_loop_start(e)
            w.evaluate_at_epoch_start(e)
            for i in range(w.iter_per_epoch()):
                w.iter_loop_start(i, e)
                w.update_in_iteration(i, e)
                w.iter_loop_end(i, e)
            w.epoch_loop_end(e)
            w.save_checkpoint_at_epoch_end(e)
        w.evaluate_at_training_end()
        w.save_model_at_end()
        w.training_complete()

    def brief(self):
        return self.worker.brief()
