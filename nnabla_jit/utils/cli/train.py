"""``train``: train the networks of an NNP with its optimizer, dataset and monitor settings.

This follows nnabla_cli's training loop: every iteration each optimizer feeds its data, runs
forward and backward and updates (with weight decay and its learning-rate scheduler); after each
epoch the monitors are evaluated over their datasets, ``monitoring_report.yml`` gets the epoch's
cost and errors, and ``results.nnp`` (best) / ``results_current_<epoch>.nnp`` (last) hold the
configuration and parameters (with solver states every 5 epochs). ``--resume`` continues from
the newest ``results_current_*.nnp`` in the output directory. As in nnabla_cli the parameters
start from the variable initializers of the configuration (zero where it has none), not from
parameters stored with it; ``-p`` gives a parameter file to start from.
"""
import argparse
import glob
import io
import os
import re
import time
import zipfile
from collections import OrderedDict
from contextlib import ExitStack

import numpy as np
from tqdm import tqdm

from ...kernel_cache import compile_status
from ...logger import logger
from ...parameter import get_parameters
from ...serialization import nnp
from ...serialization.files import write_bytes
from ...serialization.parameters import assign_to_scope, entries_of, h5_bytes
from ...serialization.solver_proto import solver_type_name
from ...serialization.solver_states import states_to_h5_bytes
from ...ndarray import NdArray
from ..communicator_util import current_communicator, single_or_rankzero
from ..load import load
from ..progress import configure_progress, progress
from . import CommandError
from .utility import let_data_to_variable, str_to_num

__all__ = ["add_train_command"]

_STATE_INTERVAL = 5      # epochs between solver-state checkpoints (nnabla's default)
_RESERVED = {
    "%iter": lambda it, ipe, me: it,
    "%max_iter": lambda it, ipe, me: me * ipe,
    "%epoch": lambda it, ipe, me: it // ipe,
    "%epochf": lambda it, ipe, me: it / ipe,
    "%max_epoch": lambda it, ipe, me: me,
    "%progress": lambda it, ipe, me: (it / ipe) / me,
}


class _Trainer:
    def __init__(self, args, info, config_text):
        self.args, self.info = args, info
        self.config_text = config_text
        self.tc = info.training_config
        self.best_error = None
        self.cost_sum_epoch, self.cost_iterations = 0.0, 0
        self.cost_iteration, self.cost_variables = 0.0, None
        # Optimizers and monitors read a dataset through separate iterators, as in nnabla.
        self.train_iterators, self.monitor_iterators = {}, {}   # dataset name -> DataIterator
        self.saved_current = (0, 0.0)                             # (epoch, time) of last save
        self.comm = current_communicator()                        # None unless under -m/--mpi
        self.writes = single_or_rankzero()                        # rank 0 writes the results

    # ------------------------------------------------------------------ data
    def _batch(self, record, iterators, loaded):
        data = OrderedDict()
        for name in record.data_iterators:
            if name not in loaded:
                di = iterators[name]
                loaded[name] = dict(zip(di.variables, di.next()))
            data.update(loaded[name])
        return data

    def _feed(self, record, data, iteration):
        for pv, data_name in record.dataset_assign.items():
            v = pv.variable_instance
            if data_name not in data and data_name in _RESERVED:
                v.data.fill(_RESERVED[data_name](iteration, self.tc.iter_per_epoch, self.tc.max_epoch))
            elif data_name in data:
                let_data_to_variable(v, data[data_name], data_name=data_name, variable_name=pv.name)
                v.need_grad = False
            else:
                raise CommandError("variable '{}' wants data '{}', which datasets {} do not have"
                                   .format(pv.name, data_name, ", ".join(record.data_iterators)))
        for pv, generator in record.generator_assign.items():
            pv.variable_instance.d = generator(pv.variable_instance.shape)

    def _sum_over_ranks(self, value):
        """``value`` summed over the ranks of an MPI run (itself when alone)."""
        if not self.comm:
            return value
        total = NdArray.from_numpy_array(np.array([value], dtype=np.float32))
        self.comm.all_reduce([total], division=False, inplace=True)
        return float(total.data[0])

    def _add_cost(self, iteration=None):
        self.cost_sum_epoch += self._sum_over_ranks(self.cost_iteration)
        self.cost_iterations += self.comm.size if self.comm else 1
        if self.writes and iteration is not None:
            ipe = self.tc.iter_per_epoch
            progress("Training : cost={0:0.6f}".format(self.cost_iteration), (iteration % ipe) / ipe)
        self.cost_iteration = 0.0

    # ------------------------------------------------------------------ one iteration
    def update(self, iteration):
        loaded = {}
        first = True
        for opt in self.info.optimizers.values():
            if not ((opt.start_iter == 0 or iteration + 1 >= opt.start_iter) and
                    (opt.end_iter == 0 or iteration + 1 <= opt.end_iter)):
                continue
            self._feed(opt, self._batch(opt, self.train_iterators, loaded), iteration)
            # nnabla reads the previous step's loss here, before this step's forward.
            if self.cost_variables:
                for pv in self.cost_variables:
                    self.cost_iteration += float(np.mean(pv.variable_instance.d))
                if first:
                    first = False
                    self._add_cost(iteration)
            loss_size = opt.loss_variables[0].variable_instance.size
            opt.target.forward(clear_no_need_grad=True)
            if iteration % opt.update_interval == 0:
                opt.solver.zero_grad()
            opt.target.backward(grad=1.0 / loss_size, clear_buffer=True)
            if self.comm and iteration % opt.update_interval == opt.update_interval - 1:
                self.comm.all_reduce([p.grad for p in opt.parameters.values()], division=True,
                                     inplace=False)
            if iteration % opt.update_interval == opt.update_interval - 1:
                if opt.weight_decay > 0:
                    opt.solver.weight_decay(opt.weight_decay)
                if opt.scheduler is not None:
                    opt.solver.set_learning_rate(opt.scheduler.get_learning_rate(iteration))
                opt.solver.update()
            self.cost_variables = opt.loss_variables
        if iteration % self.tc.iter_per_epoch == self.tc.iter_per_epoch - 1 and self.cost_variables:
            for pv in self.cost_variables:
                self.cost_iteration += float(np.mean(pv.variable_instance.d))
            self._add_cost()
            self.cost_variables = None
        if not np.isfinite(self.cost_sum_epoch):
            raise CommandError("the cost became NaN or infinite at iteration {}".format(iteration + 1))

    # ------------------------------------------------------------------ monitors
    def evaluate(self, report):
        valid_error = 0.0
        texts = []
        for name, mon in self.info.monitors.items():
            if not mon.data_iterators or mon.target is None:
                continue
            iterators = [self.monitor_iterators[d] for d in mon.data_iterators]
            size = max(di.size for di in iterators)
            batch = max(di.batch_size for di in iterators)
            total, count = 0.0, 0
            for _ in range(size // batch):
                self._feed(mon, self._batch(mon, self.monitor_iterators, {}), 0)
                mon.target.forward(clear_no_need_grad=True, clear_buffer=True)
                total += self._sum_over_ranks(
                    sum(float(np.mean(pv.variable_instance.d)) for pv in mon.monitor_variables))
                count += self.comm.size if self.comm else 1
                if self.writes:
                    di = iterators[0]
                    progress('Evaluating "{0}" : error={1:0.6f}'.format(name, total / count),
                             di.position / di.size)
            error = total / count if count else 0.0
            if not np.isfinite(error):
                logger.log(99, "Validation error is Nan")
                error = 0.0
            report.append("  {}: {}\n".format(name, error))
            texts.append("{}={:.6f}".format(name, error))
            if name == "valid_error":
                valid_error = error
        return valid_error, (" {" + ", ".join(texts) + "}") if texts else ""

    # ------------------------------------------------------------------ results
    def save_results(self, base, epoch):
        """``base``.nnp: the configuration, the parameters and (every few epochs) solver states."""
        if not self.writes:
            return
        members = [("nnp_version.txt", (nnp.NNP_VERSION + "\n").encode()),
                   ("network.nntxt", self.config_text.encode("utf-8")),
                   ("parameter.h5", h5_bytes(entries_of(get_parameters(grad_only=False))))]
        if self.info.optimizers and epoch % _STATE_INTERVAL == 0:
            for opt in self.info.optimizers.values():
                members.append(("{}_{}_optimizer.h5.optimizer".format(opt.name, solver_type_name(opt.solver)),
                                states_to_h5_bytes(opt.solver.get_states())))
        _write_zip(base + ".nnp", members)

    def save_current(self, epoch, force=False):
        """results_current_<epoch>.nnp, replacing older ones; unless forced only when more
        than 10 epochs or 180 s passed since the last one (nnabla's rule)."""
        if not self.writes:
            return
        last_epoch, last_time = self.saved_current
        base = os.path.join(self.args.outdir, "results_current_{}".format(epoch))
        if not force and (os.path.exists(base + ".nnp") or
                          (time.time() - last_time <= 180.0 and epoch - last_epoch <= 10)):
            return
        for old in glob.glob(os.path.join(self.args.outdir, "results_current_*.nnp")):
            os.unlink(old)
        self.save_results(base, epoch)
        self.saved_current = (epoch, time.time())

    # ------------------------------------------------------------------ the loop
    def run(self, last_epoch):
        tc = self.tc
        max_iter = tc.max_epoch * tc.iter_per_epoch
        if max_iter <= 0:
            logger.log(99, "0 epoch learning. (Just save parameter.)")
            self.save_results(os.path.join(self.args.outdir, "results"), 0)
            return
        start = last_epoch * tc.iter_per_epoch
        if start >= max_iter:
            logger.log(99, "Training already finished at epoch {}".format(last_epoch))
            return
        started = time.time()
        with tqdm(total=max_iter, initial=start, desc="train", unit="iter") as bar, compile_status(bar):
            for iteration in range(start, max_iter):
                self.update(iteration)
                bar.update(1)
                if (iteration + 1) % tc.iter_per_epoch:
                    continue
                epoch = iteration // tc.iter_per_epoch + 1
                cost = self.cost_sum_epoch / self.cost_iterations if self.cost_iterations else 0.0
                self.cost_sum_epoch, self.cost_iterations = 0.0, 0
                report, error_text = [], ""
                if epoch % tc.monitor_interval == 0 or epoch <= 5:
                    valid_error, error_text = self.evaluate(report)
                    if not tc.save_best or not self.best_error or valid_error <= self.best_error:
                        self.best_error = valid_error
                        self.save_results(os.path.join(self.args.outdir, "results"), epoch)
                if self.writes:
                    with open(os.path.join(self.args.outdir, "monitoring_report.yml"), "a") as f:
                        f.write("{}:\n  cost: {}\n".format(epoch - 1, cost))
                        f.writelines(report)
                self.save_current(epoch)
                bar.set_postfix(cost="{:.6f}".format(cost))
                logger.log(99, "epoch {} of {} cost={:.6f}{} time=({:.1f}s)".format(
                    epoch, tc.max_epoch, cost, error_text, time.time() - started))
        self.save_current(tc.max_epoch, force=True)


def _write_zip(path, members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            z.writestr(name, data)
    write_bytes(path, buf.getvalue())


def _config_text(path):
    """The configuration as nntxt text, which results.nnp stores as network.nntxt (an NNP's own
    nntxt member verbatim, as nnabla_cli does)."""
    ext = os.path.splitext(path)[1].lower()
    if ext in (".nntxt", ".prototxt"):
        with open(path, encoding="utf-8") as f:
            return f.read()
    if ext == ".nnp":
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if os.path.splitext(name)[1].lower() in (".nntxt", ".prototxt"):
                    return z.read(name).decode("utf-8")
    return nnp.proto_to_text(nnp.read([path], exclude_parameter=True).proto)


def _resume(args, info):
    """Load the newest results_current_<epoch>.nnp; returns its epoch (0 if none)."""
    found = {}
    for path in glob.glob(os.path.join(args.outdir, "results_current_*.nnp")):
        m = re.search(r"results_current_(\d+)\.nnp$", path)
        if m:
            found[int(m.group(1))] = path
    if not found:
        logger.log(99, "No results_current_*.nnp in {}; starting from epoch 1".format(args.outdir))
        return 0
    epoch = max(found)
    _load_train_state(found[epoch], info)
    logger.log(99, "Resume from epoch {}".format(epoch + 1))
    return epoch


def _load_train_state(path, info):
    """Parameters and solver states of ``path`` into the current scope and the optimizers."""
    contents = nnp.read([path])
    assign_to_scope(contents.parameters, path)
    for name, states in contents.optimizer_states.items():
        if name in info.optimizers:
            info.optimizers[name].solver.set_states(states)


def train_command(args):
    # ``progress.txt`` in OUTDIR tells Neural Network Console how far training is (rank 0's).
    if getattr(args, "enable_ooc", False):
        logger.warning("train -O/--enable-ooc: out-of-core training (swapping to GPU memory of "
                       "%s bytes) is not provided; the whole network stays in memory",
                       args.ooc_gpu_memory_size)
    os.makedirs(args.outdir, exist_ok=True)
    if single_or_rankzero():
        configure_progress(os.path.join(args.outdir, "progress.txt"))
    info = load([args.config], prepare_data_iterator=True, exclude_parameter=True,
                context=args.context)
    if not hasattr(info, "training_config"):
        raise CommandError("{} has no training_config".format(args.config))
    if not info.optimizers:
        raise CommandError("{} has no optimizer".format(args.config))
    for d in info.datasets.values():
        if not d.uri.strip():
            raise CommandError("dataset '{}' has an empty URI".format(d.name))
    if args.param:
        _load_train_state(args.param, info)
    last_epoch = _resume(args, info) if args.resume else 0
    trainer = _Trainer(args, info, _config_text(args.config))
    comm = trainer.comm
    if comm:
        # Each rank trains on its slice of every dataset, for its share of the iterations.
        info.training_config.iter_per_epoch //= comm.size
    with ExitStack() as stack:
        for records, iterators in ((info.optimizers, trainer.train_iterators),
                                   (info.monitors, trainer.monitor_iterators)):
            for record in records.values():
                for name in record.data_iterators:
                    if name not in iterators:
                        iterator = stack.enter_context(info.datasets[name].data_iterator())
                        if comm:
                            iterator = iterator.slice(np.random.RandomState(comm.rank), comm.size, comm.rank)
                        iterators[name] = iterator
        trainer.run(last_epoch)
    logger.log(99, "Training Completed.")
    progress(None)
    return True


def _size_argument(text):
    try:
        return str_to_num(text)
    except CommandError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_train_command(subparsers):
    sub = subparsers.add_parser(
        "train", help="Training with NNP.",
        description="Train with the optimizers, datasets and monitors of an NNP (or nntxt) file; "
                    "results go to OUTDIR (monitoring_report.yml, results.nnp, "
                    "results_current_<epoch>.nnp).")
    sub.add_argument("-r", "--resume", action="store_true", help="Resume from last saved parameter")
    sub.add_argument("-c", "--config", required=True, help="Path to nnp / nntxt")
    sub.add_argument("-p", "--param", help="Path to parameter file (.h5, .protobuf or .nnp)")
    sub.add_argument("-o", "--outdir", required=True, help="Output directory")
    sub.add_argument("-O", "--enable-ooc", action="store_true",
                     help="Enable Out Of Core training (accepted; not provided: training runs with "
                          "all of the network in memory, and says so)")
    sub.add_argument("-m", "--ooc-gpu-memory-size", type=_size_argument, default=None,
                     help="OOC gpu memory size (INTEGER or NUMeNUM or NUM[KkMmGgTtPp])")
    sub.add_argument("-C", "--context", default=None, help="Force exec context (cpu or cudnn[:DEVID])")
    sub.add_argument("-w", "--ooc-window-length", type=_size_argument, default=None,
                     help="OOC window length (INTEGER or NUMeNUM or NUM[KkMmGgTtPp])")
    sub.set_defaults(func=train_command)
    return sub
