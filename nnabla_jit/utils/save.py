"""``nnabla_jit.utils.save.save``: write networks and their training/inference settings.

``contents`` is nnabla's dict::

    {'global_config': {'default_context': ctx},
     'training_config': {'max_epoch': 10, 'iter_per_epoch': 100, 'save_best': True},
     'networks': [{'name': 'net', 'batch_size': 16, 'outputs': {'y': y}, 'names': {'x': x}}],
     'executors': [{'name': 'runtime', 'network': 'net', 'data': ['x'], 'output': ['y']}],
     'optimizers': [{'name': 'opt', 'solver': solver, 'network': 'net', 'dataset': 'train',
                     'weight_decay': 0, 'lr_decay': 1, 'lr_decay_interval': 1,
                     'update_interval': 1}],
     'datasets': [{'name': 'train', 'uri': 'train.csv', 'variables': {'x': x, 'y': t},
                   'shuffle': True, 'batch_size': 16, 'no_image_normalization': False}],
     'monitors': [{'name': 'valid_error', 'network': 'net', 'dataset': 'valid'}]}

and the file is ``.nnp`` (zip: nntxt + parameters), ``.nntxt`` or ``.protobuf``.
"""
from collections import OrderedDict

from ..parameter import get_parameters
from ..serialization import nnp, parameters as params_io
from ..serialization.files import extension_of
from ..serialization.graph_export import network_to_proto
from ..serialization.proto import nnabla_pb2
from ..serialization.solver_proto import solver_to_proto, solver_type_name
from ..serialization.solver_states import states_to_proto

__all__ = ["save", "create_proto"]


class _Network:
    """What the other sections need to know of a saved network."""

    def __init__(self, proto):
        self.proto = proto
        produced = {o for f in proto.function for o in f.output}
        consumed = {i for f in proto.function for i in f.input}
        buffers = [v.name for v in proto.variable if v.type == "Buffer"]
        self.variables = set(v.name for v in proto.variable)
        self.inputs = [n for n in buffers if n in consumed and n not in produced]
        self.outputs = [n for n in buffers if n in produced and n not in consumed]
        self.parameters = [v.name for v in proto.variable if v.type == "Parameter"]


def _names(value, what):
    """A list of names from a name, a list of names, or a dict keyed by name."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return list(value.keys())
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError("save: {} must be a name, a list of names or a dict, got {}".format(
        what, type(value).__name__))


def _require(d, key, what):
    if key not in d:
        raise KeyError("save: {} has no '{}'".format(what, key))
    return d[key]


def _global_config(proto, config):
    ctx = _require(config, "default_context", "global_config")
    c = proto.global_config.default_context
    c.backends.extend(list(ctx.backend))
    c.array_class = ctx.array_class or ""
    c.device_id = str(ctx.device_id)


def _training_config(proto, config):
    t = proto.training_config
    t.max_epoch = int(_require(config, "max_epoch", "training_config"))
    t.iter_per_epoch = int(_require(config, "iter_per_epoch", "training_config"))
    t.save_best = bool(config.get("save_best", True))
    if "monitor_interval" in config:
        t.monitor_interval = int(config["monitor_interval"])


def _dataset(proto, d):
    what = "dataset '{}'".format(d.get("name"))
    m = proto.dataset.add(name=_require(d, "name", "a dataset"), uri=_require(d, "uri", what))
    if d.get("cache_dir") is not None:
        m.cache_dir = d["cache_dir"]
    m.shuffle = bool(d.get("shuffle", False))
    m.batch_size = int(_require(d, "batch_size", what))
    m.no_image_normalization = bool(d.get("no_image_normalization", False))
    m.variable.extend(_names(d.get("variables"), what + " variables"))


def _dataset_names(entry, datasets, what, required):
    names = _names(entry.get("dataset"), what + " dataset")
    for n in names:
        if n not in datasets:
            raise ValueError("save: {} uses dataset '{}', which 'datasets' does not define"
                             .format(what, n))
    if required and not names:
        raise ValueError("save: {} names no dataset".format(what))
    return names


def _network_of(entry, networks, what, required=True):
    name = entry.get("network")
    if name is None and not required:
        return None
    if name not in networks:
        raise ValueError("save: {} uses network '{}', which 'networks' does not define".format(
            what, name))
    return networks[name]


def _data_and_generators(msg, entry):
    for var_name, data_name in dict(entry.get("data_variables", {})).items():
        msg.data_variable.add(variable_name=var_name, data_name=data_name)
    for var_name in entry.get("generator_variables", []):
        msg.generator_variable.add(variable_name=var_name, type="Constant", multiplier=0)


def _optimizer(proto, o, networks, datasets, include_states):
    what = "optimizer '{}'".format(o.get("name"))
    solver = _require(o, "solver", what)
    net = _network_of(o, networks, what, required=False)
    m = proto.optimizer.add(name=_require(o, "name", "an optimizer"))
    m.network_name = net.proto.name if net else "None"
    m.dataset_name.extend(_dataset_names(o, datasets, what, required=False))
    solver_to_proto(m.solver, solver)
    m.solver.weight_decay = float(o.get("weight_decay", 0))
    m.solver.lr_decay = float(o.get("lr_decay", 1))
    m.solver.lr_decay_interval = int(o.get("lr_decay_interval", 1))
    m.update_interval = int(o.get("update_interval", 1))
    _data_and_generators(m, o)
    if net:
        for loss in o.get("loss_variables", net.outputs):
            m.loss_variable.add(variable_name=loss)
    trained = set(solver.get_parameters().keys()) if hasattr(solver, "get_parameters") else set()
    if net:
        names = net.parameters
    else:
        names = list(get_parameters())
    for name in names:
        m.parameter_variable.add(variable_name=name,
                                 learning_rate_multiplier=1.0 if name in trained else 0.0)
    if include_states:
        states_to_proto(m.solver, solver.get_states())


def _monitor(proto, mon, networks, datasets):
    what = "monitor '{}'".format(mon.get("name"))
    net = _network_of(mon, networks, what)
    m = proto.monitor.add(name=_require(mon, "name", "a monitor"), network_name=net.proto.name)
    m.dataset_name.extend(_dataset_names(mon, datasets, what, required=True))
    _data_and_generators(m, mon)
    for out in mon.get("monitor_variables", net.outputs):
        m.monitor_variable.add(variable_name=out, type="Error")


def _executor(proto, e, networks):
    what = "executor '{}'".format(e.get("name"))
    net = _network_of(e, networks, what)
    remap = e.get("remp", {})        # nnabla's key (sic): variable name -> data name
    m = proto.executor.add(name=_require(e, "name", "an executor"), network_name=net.proto.name)
    for key in ("no_image_normalization", "num_evaluations", "repeat_evaluation_type",
                "need_back_propagation"):
        if e.get(key) is not None:
            setattr(m, key, e[key])
    for kind, default, entries in (("data", net.inputs, m.data_variable),
                                   ("output", net.outputs, m.output_variable)):
        for vname in e.get(kind, default):
            if vname not in net.variables:
                raise ValueError("save: {}: {} variable '{}' is not in network '{}'".format(
                    what, kind, vname, net.proto.name))
            entries.add(variable_name=vname, data_name=remap.get(vname, vname))
    for name in net.parameters:
        m.parameter_variable.add(variable_name=name)
    for vname in e.get("generator_variables", []):
        m.generator_variable.add(variable_name=vname, type="Constant", multiplier=0)


def create_proto(contents, include_params=False, variable_batch_size=True,
                 save_solver_in_proto=False, parameters=None):
    """The NNablaProtoBuf of ``contents`` (see the module docstring)."""
    proto = nnabla_pb2.NNablaProtoBuf()
    if "global_config" in contents:
        _global_config(proto, contents["global_config"])
    if "training_config" in contents:
        _training_config(proto, contents["training_config"])
    networks = OrderedDict()
    for net in contents.get("networks", []):
        what = "network '{}'".format(net.get("name"))
        outputs = _require(net, "outputs", what)
        msg = network_to_proto(_require(net, "name", "a network"), outputs, net.get("names", {}),
                               net.get("batch_size"), variable_batch_size)
        proto.network.add().CopyFrom(msg)
        networks[msg.name] = _Network(msg)
    datasets = OrderedDict()
    for d in contents.get("datasets", []):
        _dataset(proto, d)
        datasets[d["name"]] = d
    for o in contents.get("optimizers", []):
        _optimizer(proto, o, networks, datasets, save_solver_in_proto)
    for m in contents.get("monitors", []):
        _monitor(proto, m, networks, datasets)
    for e in contents.get("executors", []):
        _executor(proto, e, networks)
    if include_params:
        params_io.add_entries_to_proto(proto, params_io.entries_of(_parameters(parameters)))
    return proto


def _parameters(parameters):
    if parameters is not None:
        return parameters
    return get_parameters(grad_only=False)


def save(filename, contents, include_params=False, variable_batch_size=True, extension=".nnp",
         parameters=None, parameter_format=".h5", include_solver_state=False,
         solver_state_format=".h5"):
    """Save ``contents`` to ``filename`` (``.nnp``, ``.nntxt``/``.prototxt`` or ``.protobuf``;
    a file object needs ``extension``).

    An ``.nnp`` always holds the parameters (``parameter_format`` '.h5' or '.protobuf'), and
    with ``include_solver_state`` each optimizer's solver states (``solver_state_format``).
    Other formats hold the parameters if ``include_params``, and the solver states inside the
    optimizer messages if ``include_solver_state``. ``parameters`` (path -> Variable) replaces
    the parameters of the current scope. The write is atomic.
    """
    ext = extension_of(filename, extension, "save")
    is_nnp = ext == ".nnp"
    if include_solver_state and not contents.get("optimizers"):
        raise KeyError("save: include_solver_state needs 'optimizers' in contents")
    proto = create_proto(contents, False, variable_batch_size,
                         save_solver_in_proto=include_solver_state and not is_nnp)
    entries = params_io.entries_of(_parameters(parameters)) if (is_nnp or include_params) else []
    optimizer_states, solver_types = None, None
    if include_solver_state and is_nnp:
        optimizer_states = OrderedDict((o["name"], o["solver"].get_states()) for o in contents["optimizers"])
        solver_types = {o["name"]: solver_type_name(o["solver"]) for o in contents["optimizers"]}
    nnp.write(filename, proto, entries, extension=ext, parameter_format=parameter_format,
              optimizer_states=optimizer_states, solver_types=solver_types,
              solver_state_format=solver_state_format)
