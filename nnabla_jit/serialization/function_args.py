"""An op's arguments <-> its ``<Type>Parameter`` message inside a ``Function`` message.

Nothing here is written per op: nnabla's schema has, for each function type with arguments, a
``Function`` oneof field whose message is ``<Type>Parameter`` with one field per argument, named
as in ``tables/functions.tsv``. Writing walks the message's fields and reads the op's argument
of the same name; reading walks the table's arguments and reads the field of the same name.
"""
from google.protobuf.descriptor import FieldDescriptor as _FD

from .proto import nnabla_pb2

__all__ = ["PARAM_FIELDS", "write_args", "read_args"]

#: function type name -> name of its ``Function`` oneof field (``Convolution`` -> ``convolution_param``)
PARAM_FIELDS = {f.message_type.name[:-len("Parameter")]: f.name
                for f in nnabla_pb2.Function.DESCRIPTOR.oneofs_by_name["parameter"].fields}

_SCALAR_CASTS = {"bool": bool, "float": float, "double": float, "int64": int, "uint32": int,
                 "string": str}


def _scalar_kind(field):
    return {_FD.TYPE_BOOL: "bool", _FD.TYPE_FLOAT: "float", _FD.TYPE_DOUBLE: "double",
            _FD.TYPE_INT64: "int64", _FD.TYPE_UINT32: "uint32", _FD.TYPE_STRING: "string"}.get(field.type)


def _is_repeated(field):
    # ``is_repeated`` is the newer protobuf API; ``label`` the older one.
    return field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED


def write_args(function_msg, type_name, args):
    """Store ``args`` (an op's argument dict) into ``function_msg``'s parameter message."""
    field_name = PARAM_FIELDS.get(type_name)
    if field_name is None:
        return          # a type without arguments (Tanh, Sigmoid, ...) has no parameter message
    param = getattr(function_msg, field_name)
    param.SetInParent()    # present even when every argument is at its proto default
    for field in param.DESCRIPTOR.fields:
        value = args.get(field.name)
        if value is None:
            continue
        if field.message_type is not None:
            if field.message_type.name == "Shape":
                shape = getattr(param, field.name)
                shape.SetInParent()
                shape.dim.extend(int(d) for d in value)
            continue        # Communicator: nothing to store
        kind = _scalar_kind(field)
        cast = _SCALAR_CASTS[kind]
        try:
            if _is_repeated(field):
                getattr(param, field.name).extend(cast(v) for v in value)
            else:
                setattr(param, field.name, cast(value))
        except (TypeError, ValueError) as e:
            raise ValueError("{}: argument '{}' = {!r} cannot be stored as {}: {}".format(
                type_name, field.name, value, kind, e)) from None


def read_args(function_msg, spec):
    """The arguments of ``function_msg`` as a dict for the op of table row ``spec``.

    An argument whose value the message cannot tell (its whole parameter message is absent, a
    ``Shape`` field is unset, a choice string is empty) is left out, so the table default applies.
    """
    field_name = PARAM_FIELDS.get(spec.name)
    if field_name is None or not function_msg.HasField(field_name):
        return {}
    param = getattr(function_msg, field_name)
    args = {}
    for arg in spec.args:
        if arg.type == "Communicator":
            continue
        value = getattr(param, arg.name)
        if arg.type == "Shape":
            if not param.HasField(arg.name):
                continue
            value = tuple(int(d) for d in value.dim)
        elif arg.type.startswith("repeated"):
            value = tuple(value)
        elif arg.type == "string" and value == "" and arg.default is not None:
            continue
        args[arg.name] = value
    return args
