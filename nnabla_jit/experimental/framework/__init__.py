"""nnabla's experimental training framework: a program split into :class:`Data` (the data
iterators), :class:`Worker` (model, loss, solver, monitors: hooks a subclass overrides) and
:class:`Trainer` (the common epoch/iteration loop driving a Worker)::

    trainer = Trainer(MyWorker(MyData(), max_epoch=10, iter_per_epoch=100))
    trainer.train()
"""
from .data import Data
from .trainer import Trainer
from .worker import Worker

__all__ = ["Data", "Worker", "Trainer"]
