"""``compare_with_cpu``: run one training step of two configurations (typically the same
network, ``-c`` in the context it names and ``-c2`` on the CPU) from the same parameters and
data, and compare every function's outputs, every input gradient and every updated parameter.

Each comparison is ``norm_diff = std(a - b) / max(std(a), std(b))``; the table (``1-Correl``,
a column per optimizer) goes to ``OUTDIR/compare_with_cpu.csv``, as nnabla_cli writes it.
"""
import os
from collections import OrderedDict
from contextlib import ExitStack

import numpy as np

from ...logger import logger
from ...parameter import get_parameters, parameter_scope
from ..data_source import write_csv_rows
from ..load import load
from ..progress import configure_progress, progress
from . import CommandError
from .profile import add_result
from .utility import let_data_to_variable

__all__ = ["add_compare_with_cpu_command", "add_result", "calc_norm_diff", "compare_optimizer",
           "compare_with_cpu_command", "configure_progress", "get_parameters",
           "let_data_to_variable", "progress"]


def calc_norm_diff(data1, data2):
    """(norm_diff, std1, std2, diff_std) of two arrays (see module doc)."""
    data1, data2 = np.asarray(data1).ravel(), np.asarray(data2).ravel()
    std1, std2 = np.std(data1), np.std(data2)
    std = max(std1, std2)
    diff_std = np.std(data1 - data2)
    return (diff_std / std) if std > 0 else 0, std1, std2, diff_std


def _run_step(o, data, generated):
    """Feed, forward and backward optimizer ``o``; returns (forward outputs, input grads) of
    each function in order: [(function name, [(variable name, array)])]."""
    for v, d in o.dataset_assign.items():
        if d not in data:
            raise CommandError('data "{}" of optimizer "{}" is not in its dataset'.format(d, o.name))
        let_data_to_variable(v.variable_instance, data[d], data_name=d, variable_name=v.name)
    for v, generator in o.generator_assign.items():
        if v.name not in generated:
            generated[v.name] = generator(v.variable_instance.shape)
        let_data_to_variable(v.variable_instance, generated[v.name], variable_name=v.name)
    names = {id(v.variable_instance): v.name for v in o.network.variables.values()}
    names.update((id(v), name) for name, v in o.parameters.items())
    forward, backward = [], []

    def outputs(f):
        forward.append((f.name, [(names.get(id(v), "?"), v.d.copy()) for v in f.outputs]))

    def grads(f):
        backward.append((f.name, [(names.get(id(v), "?"), v.g.copy()) for v in f.inputs if v.need_grad]))
    o.target.forward(clear_no_need_grad=False, function_post_hook=outputs)
    o.solver.zero_grad()
    o.target.backward(function_post_hook=grads)
    return forward, backward


def _compare(kind, runs, runs_cpu, result):
    for (fname, values), (_, values_cpu) in zip(runs, runs_cpu):
        for (vname, a), (_, b) in zip(values, values_cpu):
            name = "%s (%s, %s)" % (kind, fname, vname)
            if a.shape != b.shape:
                logger.log(99, "Variable shape is different in %s (current_context=%s, cpu=%s)" % (
                    vname, a.shape, b.shape))
                continue
            norm_diff, std1, std2, diff_std = calc_norm_diff(a, b)
            logger.log(99, "%s, %f, %f, %f, %f" % (name, norm_diff, std1, std2, diff_std))
            result[name] = norm_diff


def compare_optimizer(config, parameters, config_cpu, parameters_cpu, result_array):
    loaded = {}
    for opt, opt_cpu in zip(config.optimizers.values(), config_cpu.optimizers.values()):
        o, o_cpu = opt.optimizer, opt_cpu.optimizer
        title = "optimizer '%s' with network '%s'" % (o.name, o.network.name)
        result = OrderedDict()
        logger.log(99, "Comparing " + title + " ...")
        logger.log(99, "process(func, variable), norm_diff, current_context_std, cpu_std, diff_std")
        for key, p in parameters.items():
            if key in parameters_cpu:
                parameters_cpu[key].d = p.d.copy()
        di = opt.data_iterator
        if id(di) not in loaded:
            loaded[id(di)] = OrderedDict(zip(di.variables, di.next()))
        generated = {}
        forward, backward = _run_step(o, loaded[id(di)], generated)
        forward_cpu, backward_cpu = _run_step(o_cpu, loaded[id(di)], generated)
        _compare("forward_function", forward, forward_cpu, result)
        _compare("backward_function", backward, backward_cpu, result)
        for solver, weight_decay in ((o.solver, o.weight_decay), (o_cpu.solver, o_cpu.weight_decay)):
            if weight_decay > 0:
                solver.weight_decay(weight_decay)
            solver.update()
        for (v, lr), (v_cpu, _) in zip(o.parameter_learning_rate_multipliers.items(),
                                       o_cpu.parameter_learning_rate_multipliers.items()):
            if lr > 0:
                name = "update (%s, %s)" % (o.solver.name, v.name)
                norm_diff, std1, std2, diff_std = calc_norm_diff(v.variable_instance.d,
                                                                 v_cpu.variable_instance.d)
                logger.log(99, "%s, %f, %f, %f, %f" % (name, norm_diff, std1, std2, diff_std))
                result[name] = norm_diff
        result_array = add_result(title, result, result_array)
    return result_array


class _Config:
    pass


def _configure(path, scope):
    with parameter_scope(scope):
        info = load([path], prepare_data_iterator=True)
        parameters = get_parameters(grad_only=False)
    if not getattr(info, "optimizers", None):
        raise CommandError("{} has no optimizer to compare".format(path))
    config = _Config()
    config.global_config = info.global_config
    config.optimizers = OrderedDict()
    for name, opt in info.optimizers.items():
        record = _Config()
        record.optimizer = opt
        record.data_iterator = None
        config.optimizers[name] = record
    return config, parameters


def compare_with_cpu_command(args):
    os.makedirs(args.outdir, exist_ok=True)
    configure_progress(os.path.join(args.outdir, "progress.txt"))
    config, parameters = _configure(args.config, "current")
    config_cpu, parameters_cpu = _configure(args.config2, "cpu")
    result_array = [["1-Correl"]]
    with ExitStack() as stack:
        for record in config.optimizers.values():
            factory = next(iter(record.optimizer.data_iterators.values()), None)
            if factory is None:
                raise CommandError("optimizer '{}' has no dataset".format(record.optimizer.name))
            record.data_iterator = stack.enter_context(factory())
        result_array = compare_optimizer(config, parameters, config_cpu, parameters_cpu, result_array)
    write_csv_rows(os.path.join(args.outdir, "compare_with_cpu.csv"), result_array)
    logger.log(99, "Compare with CPU Completed.")
    progress(None)
    return True


def add_compare_with_cpu_command(subparsers):
    sub = subparsers.add_parser("compare_with_cpu", help="Compare performance between two nntxt.",
                                description="Run one training step of two configurations from "
                                            "the same parameters and data and compare every "
                                            "intermediate result; the table goes to "
                                            "OUTDIR/compare_with_cpu.csv.")
    sub.add_argument("-c", "--config", help="path to nntxt", required=True)
    sub.add_argument("-c2", "--config2", help="path to cpu nntxt", required=True)
    sub.add_argument("-o", "--outdir", help="output directory", required=True)
    sub.set_defaults(func=compare_with_cpu_command)
    return sub
