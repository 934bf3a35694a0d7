"""``profile``: time each step of every optimizer of an NNP (nnabla_cli's ``profile``).

For each optimizer: loading a batch, feeding each data variable, generators, each function's
forward and backward, the whole forward and backward, weight decay, the solver update and
reading the loss, each timed over at least one second and 100 runs after a warm-up. The table
(``time in ms``, a column per optimizer) goes to ``OUTDIR/profile.csv``.
"""
import os
import time
from collections import OrderedDict
from contextlib import ExitStack
from functools import partial

import numpy as np
from tqdm import tqdm

from ...ext_utils import import_extension_module
from ...logger import logger
from ..data_source import write_csv_rows
from ..load import load
from ..progress import configure_progress, progress
from . import CommandError
from .utility import let_data_to_variable

__all__ = ["add_profile_command", "add_result", "configure_progress", "import_extension_module",
           "let_data_to_variable",
           "profile", "profile_command", "profile_optimizer", "progress"]

MIN_SECONDS = 1.0     # each item is timed for at least this long ...
MIN_COUNT = 100       # ... and at least this many times


def profile(config, name, func, result_dict, synchronize):
    """Time ``func`` (mean ms over the runs) into ``result_dict[name]``."""
    func()
    synchronize()
    started, total, count = time.time(), 0.0, 0
    while time.time() < started + MIN_SECONDS or count < MIN_COUNT:
        start = time.time()
        func()
        synchronize()
        total += time.time() - start
        count += 1
    result_dict[name] = total * 1000 / count
    logger.log(99, "%s %f(ms)" % (name, result_dict[name]))
    return result_dict


def add_result(title, result_dict, result_array):
    """Add a column ``title`` to the table ``result_array`` (first column: the row names)."""
    rows = [line[0] for line in result_array]
    for key in result_dict:
        if key not in rows:
            rows.append(key)
            result_array.append([key] + [""] * (len(result_array[0]) - 1))
    result_array[0].append(title)
    for key, value in result_dict.items():
        result_array[rows.index(key)].append("%f" % value)
    return result_array


def _load_batch(iterators):
    data = OrderedDict()
    for di in iterators:
        data.update(zip(di.variables, di.next()))
    return data


def profile_optimizer(config, result_array, synchronize):
    for name, opt in config.optimizers.items():
        o = opt.optimizer
        title = "optimizer '%s' with network '%s'" % (o.name, o.network.name)
        result = OrderedDict()
        logger.log(99, "Profiling " + title + " ...")
        for pname, p in o.parameters.items():
            if pname[-2:] in ("/W", "/b"):
                p.data.zero()
        items = [("load_dataset", partial(_load_batch, opt.data_iterators))]
        data = _load_batch(opt.data_iterators)
        for v, d in o.dataset_assign.items():
            if d not in data:
                raise CommandError('data "{}" of optimizer "{}" is not in its datasets'.format(d, o.name))
            items.append(("let_data (%s to %s)" % (d, v.name), partial(
                let_data_to_variable, v.variable_instance, data[d], data_name=d, variable_name=v.name)))
        for v, generator in o.generator_assign.items():
            items.append(("generate_data (%s)" % v.name, partial(
                lambda v, g: let_data_to_variable(v.variable_instance, g(v.variable_instance.shape),
                                                  variable_name=v.name), v, generator)))
        for _, func in items[1:]:
            func()
        forward_sequence, backward_sequence = [], []
        o.target.forward(clear_no_need_grad=True, function_pre_hook=forward_sequence.append)
        o.target.backward(function_pre_hook=backward_sequence.append)
        for f in forward_sequence:
            items.append(("forward_function (%s : %s)" % (f.name, f.name),
                          partial(f.forward, f.inputs, f.outputs)))
        items.append(("prepare_backward", lambda: None))
        for f in backward_sequence:
            items.append(("backward_function (%s : %s)" % (f.name, f.name),
                          partial(f.backward, f.inputs, f.outputs)))
        items.append(("forward_all", lambda: o.target.forward(clear_no_need_grad=True)))
        # Kept buffers (no clear_buffer): each timed run back-propagates the same forward.
        items.append(("backward_all", lambda: o.target.backward()))

        def backward_without_zero_grad():
            for pname, p in o.parameters.items():
                if pname[-2:] in ("/W", "/b"):
                    p.grad.zero()
            o.target.backward()
        items.append(("backward_all(wo param zero_grad)", backward_without_zero_grad))
        solver_name = o.solver.name
        if o.weight_decay > 0:
            items.append(("weight_decay (%s)" % solver_name, partial(o.solver.weight_decay, o.weight_decay)))
        items.append(("update (%s)" % solver_name, o.solver.update))
        items.append(("monitor_loss", lambda: [np.mean(v.variable_instance.d) for v in o.loss_variables]))
        for item_name, func in tqdm(items, desc="profile {}".format(o.name), unit="item"):
            profile(config, item_name, func, result, synchronize)
        result_array = add_result(title, result, result_array)
    return result_array


class _Config:
    pass


def _synchronizer(global_config):
    """A call waiting for the device of the configuration's context (a no-op on the CPU)."""
    context = global_config.default_context
    try:
        extension = import_extension_module(context.backend[0].split(":")[0])
    except ImportError:
        return lambda: None
    return lambda: extension.synchronize(device_id=context.device_id)


def profile_command(args):
    os.makedirs(args.outdir, exist_ok=True)
    configure_progress(os.path.join(args.outdir, "progress.txt"))
    info = load([args.config], prepare_data_iterator=True)
    if not getattr(info, "optimizers", None):
        raise CommandError("{} has no optimizer to profile".format(args.config))
    config = _Config()
    config.global_config = info.global_config
    config.training_config = getattr(info, "training_config", None)
    config.optimizers = OrderedDict()
    result_array = [["time in ms"]]
    with ExitStack() as stack:
        made = {}
        for name, opt in info.optimizers.items():
            record = _Config()
            record.optimizer = opt
            record.data_iterators = []
            for dataset, factory in opt.data_iterators.items():
                if dataset not in made:
                    made[dataset] = stack.enter_context(factory())
                record.data_iterators.append(made[dataset])
            config.optimizers[name] = record
        result_array = profile_optimizer(config, result_array, _synchronizer(info.global_config))
    write_csv_rows(os.path.join(args.outdir, "profile.csv"), result_array)
    logger.log(99, "Profile Completed.")
    progress(None)
    return True


def add_profile_command(subparsers):
    sub = subparsers.add_parser("profile", help="Profiling performance with NNP.",
                                description="Time every step of each optimizer of an NNP; the "
                                            "table goes to OUTDIR/profile.csv.")
    sub.add_argument("-c", "--config", help="path to nntxt", required=True)
    sub.add_argument("-o", "--outdir", help="output directory", required=True)
    sub.set_defaults(func=profile_command)
    return sub
