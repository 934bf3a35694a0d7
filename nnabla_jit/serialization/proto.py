"""nnabla's protobuf messages (``nnabla.proto``), built at import time without ``protoc``.

``tables/nnp_schema.tsv`` lists every field of nnabla's schema: message, field, number and type
(``int64``, ``repeated float``, ``Shape``, ``map<string, SolverState>``, ``X (oneof parameter)``).
From it we build a ``FileDescriptorProto`` (proto3, as nnabla's is) in a private descriptor pool
and get one message class per message. Field names, numbers, types and labels are nnabla's, so
the binary ``.protobuf`` and the text ``.nntxt`` forms cross between the two libraries.

    from nnabla_jit.serialization.proto import nnabla_pb2
    proto = nnabla_pb2.NNablaProtoBuf()
"""
import csv
import os
import types

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["nnabla_pb2", "PACKAGE", "SCHEMA_PATH"]

PACKAGE = "nnabla"
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "tables", "nnp_schema.tsv")

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "bool": _F.TYPE_BOOL, "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT,
    "int64": _F.TYPE_INT64, "uint32": _F.TYPE_UINT32, "string": _F.TYPE_STRING,
}
_ONEOF_SUFFIX = " (oneof parameter)"


def _read_schema(path):
    """OrderedDict-like list of (message, [(field, number, type), ...]) in file order."""
    messages = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            fields = messages.setdefault(row["message"], [])
            if row["number"] == "-":      # a message with no fields (Communicator)
                continue
            try:
                number = int(row["number"])
            except ValueError:
                raise ValueError("{}: field {}.{} has no valid number ({!r})".format(
                    path, row["message"], row["field"], row["number"])) from None
            fields.append((row["field"], number, row["type"].strip()))
    return messages


def _entry_name(field_name):
    """protoc's name for a map field's entry type: state_parameter -> StateParameterEntry."""
    return "".join(part.capitalize() for part in field_name.split("_")) + "Entry"


def _set_type(field, type_text, known, where):
    if type_text in _SCALARS:
        field.type = _SCALARS[type_text]
    elif type_text in known:
        field.type = _F.TYPE_MESSAGE
        field.type_name = ".{}.{}".format(PACKAGE, type_text)
    else:
        raise ValueError("{}: unknown type {!r} for {}".format(SCHEMA_PATH, type_text, where))


def _referenced_messages(messages):
    """Message types used by fields but given no row of their own (nnabla's empty
    RoundParameter, CeilParameter, ...)."""
    referenced = []
    for fields in messages.values():
        for _, _, type_text in fields:
            t = type_text.replace(_ONEOF_SUFFIX, "").replace("repeated ", "")
            if t.startswith("map<"):
                t = t[4:-1].split(",")[1].strip()
            if t not in _SCALARS and t not in messages and t not in referenced:
                referenced.append(t)
    return referenced


def build_file_descriptor(path=SCHEMA_PATH):
    """The ``FileDescriptorProto`` of nnabla.proto, from the schema table."""
    messages = _read_schema(path)
    for name in _referenced_messages(messages):
        messages[name] = []
    known = set(messages)
    fdp = descriptor_pb2.FileDescriptorProto(name="nnabla.proto", package=PACKAGE, syntax="proto3")
    for msg_name, fields in messages.items():
        msg = fdp.message_type.add(name=msg_name)
        oneof_index = None
        for field_name, number, type_text in fields:
            where = "{}.{}".format(msg_name, field_name)
            field = msg.field.add(name=field_name, number=number, label=_F.LABEL_OPTIONAL)
            if type_text.endswith(_ONEOF_SUFFIX):
                if oneof_index is None:
                    msg.oneof_decl.add(name="parameter")
                    oneof_index = len(msg.oneof_decl) - 1
                field.oneof_index = oneof_index
                type_text = type_text[:-len(_ONEOF_SUFFIX)]
            if type_text.startswith("map<"):
                key_type, value_type = (t.strip() for t in type_text[4:-1].split(","))
                entry = msg.nested_type.add(name=_entry_name(field_name))
                entry.options.map_entry = True
                _set_type(entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL),
                          key_type, known, where)
                _set_type(entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL),
                          value_type, known, where)
                field.label = _F.LABEL_REPEATED
                field.type = _F.TYPE_MESSAGE
                field.type_name = ".{}.{}.{}".format(PACKAGE, msg_name, entry.name)
                continue
            if type_text.startswith("repeated "):
                field.label = _F.LABEL_REPEATED
                type_text = type_text[len("repeated "):]
            _set_type(field, type_text, known, where)
    return fdp


def _build_module():
    pool = descriptor_pool.DescriptorPool()
    file_desc = pool.Add(build_file_descriptor())
    module = types.SimpleNamespace(DESCRIPTOR=pool.FindFileByName(file_desc.name))
    for name in module.DESCRIPTOR.message_types_by_name:
        desc = pool.FindMessageTypeByName("{}.{}".format(PACKAGE, name))
        setattr(module, name, message_factory.GetMessageClass(desc))
    return module


#: The message classes, one attribute per message, as ``nnabla.utils.nnabla_pb2`` has them.
nnabla_pb2 = _build_module()
