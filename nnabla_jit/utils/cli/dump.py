"""``dump``: what model files hold -- executors, optimizers and monitors with their variables
(``-F`` functions, ``-V`` their variables, ``-v`` every field), as nnabla_cli prints them."""
from .model_files import add_import_arguments, read_model

__all__ = ["add_dump_command", "dump_command"]


def _dump_verbose(msg, prefix, limit):
    for field, value in msg.ListFields():
        if field.message_type is None and not _repeated(field):
            print("{}:{}: {}".format(":".join(prefix), field.name, value))
        elif _repeated(field):
            items = list(value.items()) if hasattr(value, "items") else list(value)
            print("{} has {} {}(s).".format(":".join(prefix), len(items), field.name))
            for n, item in enumerate(items[:limit] if limit >= 0 else items):
                if hasattr(value, "items"):
                    key, item = item
                    print("{}:{}[{}]: key {}".format(":".join(prefix), field.name, n, key))
                if hasattr(item, "ListFields"):
                    _dump_verbose(item, prefix + ["{}[{}]".format(field.name, n)], limit)
                else:
                    print("{}:{}[{}]: {}".format(":".join(prefix), field.name, n, item))
        else:
            _dump_verbose(value, prefix + [field.name], limit)


def _repeated(field):
    return field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED


# The sections of the summary in nnabla_cli's order: its label, the repeated field of the
# proto, and the (label, variable field) rows printed for each entry.
_INPUT_PORTS = ((" (In) Data     ", "data_variable"), (" (In) Generator", "generator_variable"))
_SECTIONS = (
    ("Optimizer", "optimizer", _INPUT_PORTS + ((" (Out)Loss     ", "loss_variable"),)),
    ("Monitor  ", "monitor", _INPUT_PORTS + ((" (Out)Monitor  ", "monitor_variable"),)),
    ("Executor ", "executor", _INPUT_PORTS + ((" (Out)Loss     ", "loss_variable"),
                                              (" (Out)Output   ", "output_variable"))),
)


def _dump_summary(args, proto, parameter_names):
    nets = {}
    for net in proto.network:
        for var in net.variable:
            if var.type == "Parameter" and parameter_names is not None and var.name not in parameter_names:
                print("[WARNING] parameter '{}' of network '{}' has no value in the file(s)".format(
                    var.name, net.name))
        nets[net.name] = net

    def shape_of(net, name):
        for v in net.variable:
            if v.name == name:
                return list(v.shape.dim)
        return " - "

    def ports(prefix, label, net, entries):
        for i, v in enumerate(entries):
            print("{}{} variable[{}]: Name:{:30} Shape:{}".format(
                prefix, label, i, v.variable_name, shape_of(net, v.variable_name) if net else " - "))

    def functions(prefix, net):
        if net is None:
            return
        if args.dump_variable_name:
            name = args.dump_variable_name
            if any(v.name == name for v in net.variable):
                print("Variable Name: {:20} Shape: {}".format(name, shape_of(net, name)))
            else:
                print("DUMP ERROR: variable {} not found.".format(name))
            return
        if args.dump_functions:
            for i, f in enumerate(net.function):
                fp = "{}  Function[{:^5}]: ".format(prefix, i)
                print("{}Type: {:20} Name: {}".format(fp, f.type, f.name))
                if args.dump_variables:
                    for j, v in enumerate(f.input):
                        print("{}  Input{}: Name: {:20} Shape: {}".format(fp, j, v, shape_of(net, v)))
                    for j, v in enumerate(f.output):
                        print("{} Output{}: Name: {:20} Shape: {}".format(fp, j, v, shape_of(net, v)))

    for kind, entries, port_rows in _SECTIONS:
        for i, entry in enumerate(getattr(proto, entries)):
            prefix, net = "  {}[{}]: ".format(kind, i), nets.get(entry.network_name)
            print("{}{}".format(prefix, entry.name))
            for label, field in port_rows:
                ports(prefix, label, net, getattr(entry, field))
            functions(prefix, net)
    if not (proto.optimizer or proto.monitor or proto.executor):
        for name, net in nets.items():
            print("  Network: {} (batch size {}, {} functions, {} variables)".format(
                name, net.batch_size, len(net.function), len(net.variable)))
            functions("  Network: ", net)


def dump_command(args):
    contents = read_model(args.files, args.import_format, args)
    if args.dump_verbose:
        _dump_verbose(contents.proto, [args.import_format or "NNP"], args.dump_limit)
    else:
        names = {p.name for p in contents.parameters} if contents.parameters else None
        _dump_summary(args, contents.proto, names)
    return True


def add_dump_command(subparsers):
    sub = subparsers.add_parser(
        "dump", help="Dump network with supported format.",
        description="Print the executors, optimizers and monitors of model files, with their "
                    "input/output variables; -F adds the functions, -V their variables, -v every "
                    "field of the file.")
    sub.add_argument("files", metavar="FILE", nargs="+", help="model file(s) (NNP files are merged)")
    sub.add_argument("-v", "--dump-verbose", action="store_true", help="[dump] every field")
    sub.add_argument("-F", "--dump-functions", action="store_true", help="[dump] function list")
    sub.add_argument("-V", "--dump-variables", action="store_true", help="[dump] variable list")
    sub.add_argument("--dump-limit", type=int, default=-1, help="[dump] limit num of items")
    sub.add_argument("-n", "--dump-variable-name", default=None,
                     help="[dump] show only this variable")
    add_import_arguments(sub)
    sub.set_defaults(func=dump_command)
    return sub
