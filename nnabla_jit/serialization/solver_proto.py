"""A solver <-> the ``Solver`` message of an ``Optimizer``.

nnabla's schema has one ``<Type>Parameter`` message per solver type (``AdamParameter``: alpha,
beta1, beta2, eps) whose fields are the solver's hyper-parameters, named as in ``solver.info``
and in the solver's constructor; both directions go through those names.
"""
import re

from .proto import nnabla_pb2

__all__ = ["SOLVER_PARAM_FIELDS", "solver_type_name", "solver_to_proto", "solver_from_proto"]

#: solver type name -> name of its ``Solver`` oneof field (``Adam`` -> ``adam_param``)
SOLVER_PARAM_FIELDS = {f.message_type.name[:-len("Parameter")]: f.name
                       for f in nnabla_pb2.Solver.DESCRIPTOR.oneofs_by_name["parameter"].fields}


def solver_type_name(solver):
    """nnabla's type name of a solver (``Adam``; a ``Cuda`` suffix dropped)."""
    return re.sub(r"Cuda$", "", str(getattr(solver, "name", type(solver).__name__)))


def solver_to_proto(solver_msg, solver):
    """Write ``solver``'s type and hyper-parameters (``solver.info``) into ``solver_msg``."""
    type_name = solver_type_name(solver)
    solver_msg.type = type_name
    field = SOLVER_PARAM_FIELDS.get(type_name)
    if field is None:
        raise ValueError("save: solver type '{}' has no message in nnabla's schema (known: {})"
                         .format(type_name, ", ".join(SOLVER_PARAM_FIELDS)))
    param = getattr(solver_msg, field)
    param.SetInParent()
    info = dict(getattr(solver, "info", {}) or {})
    for f in param.DESCRIPTOR.fields:
        if f.name in info:
            setattr(param, f.name, type(getattr(param, f.name))(info[f.name]))


def solver_from_proto(solver_msg):
    """A new solver (``nnabla_jit.solvers``) made from ``solver_msg``; returns ``(solver,
    initial learning rate)``."""
    from .. import solvers as S     # late: saving a file need not load the solver kernels
    type_name = "Sgd" if solver_msg.type == "SGD" else solver_msg.type
    field = SOLVER_PARAM_FIELDS.get(type_name)
    cls = getattr(S, type_name, None)
    if field is None or cls is None:
        raise ValueError("solver type '{}' is not supported (known: {})".format(
            solver_msg.type, ", ".join(n for n in SOLVER_PARAM_FIELDS if hasattr(S, n))))
    param = getattr(solver_msg, field)
    kwargs = {f.name: getattr(param, f.name) for f in param.DESCRIPTOR.fields}
    solver = cls(**kwargs)
    lr = kwargs.get("lr", kwargs.get("alpha", kwargs.get("eta")))
    return solver, lr
