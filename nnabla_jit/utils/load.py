"""``nnabla_jit.utils.load.load``: networks and training/inference settings from model files.

``load(files)`` reads ``.nnp``, ``.nntxt``/``.prototxt``, ``.protobuf`` and ``.h5`` files,
puts their parameters into the current scope (all or nothing: a file that fails to load
leaves the current parameters as they were), builds every network and returns an object with
nnabla's attributes: ``networks``, ``executors``, ``optimizers``, ``monitors``, ``datasets``,
``training_config``, ``global_config`` (and ``proto``, the message read). Executors, optimizers
and monitors are linked to their networks and datasets as nnabla links them (``dataset_assign``,
``output_assign``, ``loss_variables``, ``forward_target``, ``solver``, ``scheduler``, ...).
"""
import os
from collections import OrderedDict

import numpy as np

from .. import functions as F
from .. import initializer as I
from ..context import Context, context_scope, get_default_context, set_default_context
from ..ext_utils import get_extension_context
from ..logger import logger
from ..serialization import nnp
from ..serialization.files import file_label
from ..serialization.graph_import import ProtoNetwork, check_batch_size
from ..serialization.parameters import assign_to_scope, scope_restored_on_error
from ..serialization.solver_proto import solver_from_proto
from ..serialization.solver_states import states_from_proto
from . import data_iterator as di
from .converter.nnabla.expander import expand_loops
from . import learning_rate_scheduler as L

__all__ = ["load", "Info"]


class Info:
    """What ``load`` returns; attributes are set as the file provides them."""


class _Record:
    """A plain attribute holder (nnabla's Optimizer / Monitor / Executor / Dataset objects)."""

    def __repr__(self):
        return "<{} {}>".format(type(self).__name__, getattr(self, "name", ""))


class Dataset(_Record):
    pass


class Optimizer(_Record):
    pass


class Monitor(_Record):
    pass


class Executor(_Record):
    pass


# ------------------------------------------------------------------------------------ configs
def _context_from_proto(c):
    if not c.backends:
        return None
    ctx = Context(list(c.backends), c.array_class, c.device_id or "0")
    if ctx.device == "cuda":
        from numba import cuda
        if not cuda.is_available():
            logger.warning("load: the file asks for context {}, but no GPU is available; using "
                           "the CPU".format(ctx))
            return get_extension_context("cpu")
    return ctx


def _requested_context(context):
    """``context`` as nnabla's ``-C`` option gives it: 'cpu' or 'cudnn[:device_id]'."""
    name, _, device = str(context).partition(":")
    return get_extension_context(name, device_id=device or "0")


def _global_config(proto, context):
    config = _Record()
    ctx = _requested_context(context) if context else None
    if ctx is None and proto.HasField("global_config"):
        ctx = _context_from_proto(proto.global_config.default_context)
    if ctx is None:
        ctx = get_extension_context("cpu")
    config.default_context = ctx
    set_default_context(ctx)
    return config


def _training_config(proto):
    t = proto.training_config
    config = _Record()
    config.max_epoch = t.max_epoch
    config.iter_per_epoch = t.iter_per_epoch
    config.save_best = t.save_best
    config.monitor_interval = t.monitor_interval if t.monitor_interval > 0 else 10
    return config


# ------------------------------------------------------------------------------------ datasets
def _dataset(d, index, prepare):
    ds = Dataset()
    ds.name, ds.uri, ds.cache_dir = d.name, d.uri, d.cache_dir
    ds.batch_size, ds.shuffle = d.batch_size, d.shuffle
    ds.normalize = not d.no_image_normalization
    ds.variables = list(d.variable)
    ds.data_iterator = _iterator_factory(ds, index) if prepare else None
    return ds


def _iterator_factory(ds, index):
    """A callable creating the dataset's DataIterator (from its cache if it has one)."""
    def create():
        rng = np.random.RandomState(index)
        cache = ds.cache_dir or None
        if cache and os.path.isdir(cache) and os.listdir(cache):
            return di.data_iterator_cache(cache, ds.batch_size, ds.shuffle, rng=rng,
                                          normalize=ds.normalize)
        return di.data_iterator_csv_dataset(ds.uri, ds.batch_size, ds.shuffle, rng=rng,
                                            normalize=ds.normalize, cache_dir=cache)
    return create


# ------------------------------------------------------------------------------------ linking
def _variable(network, name, what):
    pv = network.variables.get(name)
    if pv is None:
        raise ValueError("load: {} refers to variable '{}', which network '{}' does not have"
                         .format(what, name, network.name))
    return pv


def _generator(g):
    makers = {"Normal": lambda m: I.NormalInitializer(sigma=m),
              "Uniform": lambda m: I.UniformInitializer(lim=(-m, m)),
              "Range": lambda m: I.RangeInitializer(start=0, step=m),
              "Constant": lambda m: I.ConstantInitializer(value=m)}
    if g.type not in makers:
        raise ValueError("load: generator type '{}' of '{}' is not supported (known: {})".format(
            g.type, g.variable_name, ", ".join(makers)))
    return makers[g.type](g.multiplier)


def _target(variables, **sink_args):
    """The variable to call forward/backward on: the only one, or a Sink of all."""
    instances = [pv.variable_instance for pv in variables]
    for v in instances:
        v.persistent = True     # read after a forward(clear_buffer=True)
    if len(instances) == 1:
        return instances[0]
    return F.sink(*instances, **sink_args)


def _inputs_and_generators(record, msg, network, what):
    record.dataset_assign = OrderedDict(
        (_variable(network, d.variable_name, what), d.data_name) for d in msg.data_variable)
    record.generator_assign = OrderedDict(
        (_variable(network, g.variable_name, what), _generator(g)) for g in msg.generator_variable)


def _parameter_multipliers(network, entries, what):
    out = OrderedDict()
    for p in entries:
        pv = network.parameters.get(p.variable_name) or network.variables.get(p.variable_name)
        if pv is None:
            raise ValueError("load: {} refers to parameter '{}', which network '{}' does not have"
                             .format(what, p.variable_name, network.name))
        out[pv] = p.learning_rate_multiplier
    return out


def _scheduler(s, init_lr):
    scheduler = L.ExponentialScheduler(init_lr, 1.0, 1)
    kind = s.lr_scheduler_type
    if kind == "Polynomial":
        if s.polynomial_scheduler_param.power != 0.0:
            p = s.polynomial_scheduler_param
            scheduler = L.PolynomialScheduler(init_lr, p.max_iter, p.power)
    elif kind == "Cosine":
        scheduler = L.CosineScheduler(init_lr, s.cosine_scheduler_param.max_iter)
    elif kind == "Exponential":
        p = s.exponential_scheduler_param
        if p.gamma != 1.0:
            scheduler = L.ExponentialScheduler(init_lr, p.gamma, max(p.iter_interval, 1))
    elif kind == "Step":
        p = s.step_scheduler_param
        if p.gamma != 1.0 and len(p.iter_steps) > 0:
            scheduler = L.StepScheduler(init_lr, p.gamma, list(p.iter_steps))
    elif kind == "":
        if s.lr_decay_interval != 0 or s.lr_decay != 0.0:
            scheduler = L.ExponentialScheduler(init_lr, s.lr_decay if s.lr_decay > 0.0 else 1.0,
                                               max(s.lr_decay_interval, 1))
    else:
        raise ValueError("load: learning rate scheduler '{}' is not supported".format(kind))
    if s.lr_warmup_scheduler_type == "Linear" and s.linear_warmup_scheduler_param.warmup_iter >= 1:
        scheduler = L.LinearWarmupScheduler(scheduler, s.linear_warmup_scheduler_param.warmup_iter)
    return scheduler


def _network_of(entry, networks, what):
    """The network an optimizer, monitor or executor ``entry`` names."""
    if entry.network_name not in networks:
        raise ValueError("load: {} uses network '{}', which the file does not define".format(
            what, entry.network_name))
    return networks[entry.network_name]


def _optimizer(o, networks, datasets, checkpoint, ctx):
    what = "optimizer '{}'".format(o.name)
    opt = Optimizer()
    opt.proto, opt.name, opt.order = o, o.name, o.order
    opt.comm = None
    opt.start_iter, opt.end_iter = max(o.start_iter, 0), max(o.end_iter, 0)
    opt.update_interval = o.update_interval if o.update_interval > 0 else 1
    solver_ctx = _context_from_proto(o.solver.context) or ctx
    with context_scope(solver_ctx):
        opt.solver, init_lr = solver_from_proto(o.solver)
    opt.weight_decay = o.solver.weight_decay
    opt.lr_decay = o.solver.lr_decay if o.solver.lr_decay > 0.0 else 1.0
    opt.lr_decay_interval = o.solver.lr_decay_interval if o.solver.lr_decay_interval > 0 else 1
    opt.scheduler = _scheduler(o.solver, init_lr)
    net = opt.network = _network_of(o, networks, what)
    opt.data_iterators = OrderedDict()
    for d in o.dataset_name:
        if d not in datasets:
            raise ValueError("load: {} uses dataset '{}', which the file does not define".format(what, d))
        opt.data_iterators[d] = datasets[d].data_iterator
    _inputs_and_generators(opt, o, net, what)
    opt.loss_variables = [_variable(net, v.variable_name, what) for v in o.loss_variable]
    opt.parameter_learning_rate_multipliers = _parameter_multipliers(net, o.parameter_variable, what)
    params = OrderedDict()
    for pv, lr in opt.parameter_learning_rate_multipliers.items():
        if lr > 0.0:
            params[pv.name] = pv.variable_instance
        else:
            pv.variable_instance.need_grad = False
    opt.solver.set_parameters(params)
    opt.parameters = OrderedDict(sorted(params.items()))
    if o.solver.states:
        opt.solver.set_states(states_from_proto(o.solver, what))
    if checkpoint is not None:
        opt.solver.set_states(checkpoint)
    for v in opt.loss_variables:
        v.variable_instance.grad.fill(1.0 / v.variable_instance.size)
    if not opt.loss_variables:
        raise ValueError("load: {} has no loss variable".format(what))
    opt.target = _target(opt.loss_variables, one_input_grad=False)
    return opt


def _monitor(m, networks, datasets):
    what = "monitor '{}'".format(m.name)
    mon = Monitor()
    mon.proto, mon.name = m, m.name
    net = mon.network = _network_of(m, networks, what)
    mon.data_iterators = OrderedDict((d, datasets[d].data_iterator) for d in m.dataset_name
                                     if d in datasets)
    _inputs_and_generators(mon, m, net, what)
    mon.monitor_variables = [_variable(net, v.variable_name, what) for v in m.monitor_variable]
    mon.target = _target(mon.monitor_variables) if mon.monitor_variables else None
    return mon


def _executor(e, networks):
    what = "executor '{}'".format(e.name)
    ex = Executor()
    ex.proto, ex.name = e, e.name
    net = ex.network = _network_of(e, networks, what)
    ex.num_evaluations = e.num_evaluations if e.num_evaluations > 0 else 1
    ex.repeat_evaluation_type = e.repeat_evaluation_type
    ex.need_back_propagation = e.need_back_propagation
    ex.no_image_normalization = e.no_image_normalization
    _inputs_and_generators(ex, e, net, what)
    ex.output_assign = OrderedDict(
        (_variable(net, o.variable_name, what), [o.type, o.data_name]) for o in e.output_variable)
    ex.parameters = OrderedDict(
        (pv, pv.name) for pv in _parameter_multipliers(net, e.parameter_variable, what))
    ex.forward_target = _target(list(ex.output_assign)) if ex.output_assign else None
    if ex.need_back_propagation:
        ex.loss_variables = [_variable(net, v.variable_name, what) for v in e.loss_variable]
        ex.parameter_learning_rate_multipliers = _parameter_multipliers(net, e.parameter_variable, what)
        ex.backward_target = _target(ex.loss_variables)
    return ex


# ------------------------------------------------------------------------------------ API
def load(filenames, prepare_data_iterator=True, batch_size=None, exclude_parameter=False,
         parameter_only=False, extension=".nntxt", context=None):
    """Load networks and settings from ``filenames`` (a path, file object, or a list).

    Args:
        prepare_data_iterator (bool or None): create each dataset's ``data_iterator`` factory
            (None: only if the training configuration has epochs).
        batch_size (int): build the networks at this batch size (default: the file's).
        exclude_parameter (bool): do not read parameters.
        parameter_only (bool): read only parameters from text files.
        extension (str): the format of file objects.
        context (str): 'cpu' or 'cudnn[:device]' instead of the file's context.
    """
    check_batch_size(batch_size, "load")
    contents = expand_loops(nnp.read(filenames, extension=extension, exclude_parameter=exclude_parameter,
                                     parameter_only=parameter_only))
    source = file_label(filenames if not isinstance(filenames, (list, tuple)) else filenames[0])
    proto = contents.proto
    # Reading every network first refuses an unknown function type or an undeclared variable
    # before any parameter changes; what can only fail while building is undone below.
    for n in proto.network:
        ProtoNetwork(n, batch_size)
    previous_default = get_default_context()
    with scope_restored_on_error(e.name for e in contents.parameters):
        try:
            return _load(contents, source, proto, prepare_data_iterator, batch_size, context)
        except BaseException:
            set_default_context(previous_default)
            raise


def _load(contents, source, proto, prepare_data_iterator, batch_size, context):
    assign_to_scope(contents.parameters, source)
    info = Info()
    info.proto = proto
    info.global_config = _global_config(proto, context)
    ctx = info.default_context = info.global_config.default_context
    if proto.HasField("training_config"):
        info.training_config = _training_config(proto)
    if prepare_data_iterator is None:
        prepare_data_iterator = proto.training_config.max_epoch > 0
    info.datasets = OrderedDict((d.name, _dataset(d, i, prepare_data_iterator))
                                for i, d in enumerate(proto.dataset))
    with context_scope(ctx):
        info.networks = OrderedDict(
            (n.name, ProtoNetwork(n, batch_size).build(rng=np.random.RandomState(0)))
            for n in proto.network)
        info.optimizers = OrderedDict(
            (o.name, _optimizer(o, info.networks, info.datasets, contents.optimizer_states.get(o.name), ctx))
            for o in proto.optimizer)
        info.monitors = OrderedDict((m.name, _monitor(m, info.networks, info.datasets))
                                    for m in proto.monitor)
        info.executors = OrderedDict((e.name, _executor(e, info.networks)) for e in proto.executor)
    return info
