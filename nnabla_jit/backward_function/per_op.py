"""nnabla's per-op module paths, ``nnabla.backward_function.<op>`` (``slice``, ``average_pooling``...).

nnabla 1.39 has one module per op, holding the op's grad rule as ``<op>_backward`` and, for an op
linear in its input, the ``<Op>DataGrad`` function computing ``dx = A^T dy``. Here the rules live
one module per family, filed by type name in ``ops.registry.GRAD_RULES``; rather than a file per
op repeating them, :class:`PerOpModules` (on ``sys.meta_path``, after the ordinary finders, so a
family module of the same name wins) makes ``nnabla_jit.backward_function.<snake name>`` on
import from that table: a module of views onto the rules, never a second copy of one.
"""
import importlib.abc
import importlib.machinery
import sys

from .. import function_bases
from .. import functions as F
from ..context import context_scope
from ..function import auto_forward
from ..ops.registry import GRAD_RULES, TABLE
from ..variable import Variable
from .adjoint import bilinear_adjoint, linear_adjoint
from .normalization import FusedBatchNormalizationBackward

PACKAGE = __name__.rpartition(".")[0]

# The linear ops whose rule is linear_adjoint of the op itself (nnabla's UnaryDataGrad
# subclasses), with the function taking the op's own arguments in the op's order, as nnabla's
# ``<Op>DataGrad(ctx, *args)`` does (``_F.Interpolate(ctx, output_size, mode, ...)``, not
# ``F.interpolate``'s scale and sizes), which resolves their defaults.
DATA_GRAD_SOURCES = {
    "AveragePooling": function_bases.average_pooling,
    "SumPooling": function_bases.sum_pooling,
    "Slice": F.slice,   # F's: nnabla's Slice takes None entries, resolved as F does
    "Interpolate": function_bases.interpolate,
    "Pad": function_bases.pad,
    "Shift": function_bases.shift,
}


# The bilinear ops whose input and filter gradients are nnabla's ``<Op>DataGrad(dy, w)`` and
# ``<Op>FilterGrad(dy, x)`` (LinearDataGrad / LinearFilterGrad there), with the function taking
# the op's arguments after its inputs (x, w, bias), as nnabla's ``_F.<Op>(ctx, *args)`` does.
BILINEAR_SOURCES = {
    "Affine": function_bases.affine,
    "Convolution": function_bases.convolution,
    "Deconvolution": function_bases.deconvolution,
}


# nnabla's backward functions of other ops, with the grad rules of their own.
BACKWARD_FUNCTIONS = {
    "FusedBatchNormalization": {
        "FusedBatchNormalizationBackward": FusedBatchNormalizationBackward,
        "fused_batch_normalization_backward_backward": GRAD_RULES["FusedBatchNormalizationBackward"],
    },
}


class _GradFunction:
    """nnabla's ``<Op>DataGrad(ctx, *args)`` and the like: the op's arguments now, the shape
    of the input the output is the gradient of later (``xshape`` or ``wshape``), then called on
    Variables it builds the gradient node."""
    source_function = None   # the function of the op; set by each subclass
    shape_name = "xshape"

    def __init__(self, ctx, *args, **kwargs):
        self.ctx = ctx
        self.args = args
        self.kwargs = kwargs
        setattr(self, self.shape_name, None)

    def _out_shape(self):
        shape = getattr(self, self.shape_name)
        if shape is None:
            raise ValueError("{}: set {} (the shape of the op's {}) before calling it".format(
                type(self).__name__, self.shape_name, "input" if self.shape_name == "xshape" else "weight"))
        return tuple(shape)

    def _source_info(self, *inputs):
        """The op's info (type name, arguments as its function resolves them: defaults, None
        entries) when built, unevaluated, on placeholders of the given shapes and extra inputs."""
        with auto_forward(False), context_scope(self.ctx):
            y = type(self).source_function(*[Variable(tuple(s)) if isinstance(s, tuple) else s for s in inputs],
                                           *self.args, **self.kwargs)
        return (y[0] if isinstance(y, (list, tuple)) else y).parent.info


class UnaryDataGrad(_GradFunction):
    """nnabla's ``<Op>DataGrad(ctx, *args)`` of a linear op: set ``xshape`` (the op's input
    shape), then ``df(dy)`` gives ``dx = A^T dy`` as a LinearAdjoint node, differentiable to any order."""

    def __call__(self, dy):
        xshape = self._out_shape()
        info = self._source_info(xshape)
        with context_scope(self.ctx):
            return linear_adjoint(info.type_name, info.args, xshape, [dy])


class BilinearGrad(_GradFunction):
    """nnabla's ``<Op>DataGrad(ctx, *args)`` (set ``xshape``, then ``df(dy, w)`` gives dx) and
    ``<Op>FilterGrad(ctx, *args)`` (set ``wshape``, then ``df(dy, x)`` gives dw) of a bilinear
    op: a node of that type name (``ops/adjoint.py``), differentiable to any order."""
    wrt = 0   # 0: DataGrad, 1: FilterGrad

    def __call__(self, dy, other):
        shape = self._out_shape()
        slots = [None, None]
        slots[self.wrt], slots[1 - self.wrt] = shape, tuple(other.shape)
        info = self._source_info(slots[0], slots[1], None)
        with context_scope(self.ctx):
            return bilinear_adjoint(type(self).__name__, info.args, shape, dy, other)


def _grad_class(cls_name, base, source_function, snake_name, **attrs):
    return type(cls_name, (base,), dict(attrs, source_function=staticmethod(source_function),
                                        __doc__="nnabla's {}.".format(cls_name),
                                        __module__=PACKAGE + "." + snake_name))


def names_of(type_name, snake_name):
    """The public names of nnabla's module for one op."""
    names = {}
    if type_name in GRAD_RULES:
        names[snake_name + "_backward"] = GRAD_RULES[type_name]
    if type_name in DATA_GRAD_SOURCES:
        names[type_name + "DataGrad"] = _grad_class(type_name + "DataGrad", UnaryDataGrad,
                                                    DATA_GRAD_SOURCES[type_name], snake_name)
    if type_name in BILINEAR_SOURCES:
        for wrt, kind, shape_name in ((0, "DataGrad", "xshape"), (1, "FilterGrad", "wshape")):
            names[type_name + kind] = _grad_class(type_name + kind, BilinearGrad, BILINEAR_SOURCES[type_name],
                                                  snake_name, wrt=wrt, shape_name=shape_name)
            names["{}_{}_grad_backward".format(snake_name, kind[:-4].lower())] = GRAD_RULES[type_name + kind]
    names.update(BACKWARD_FUNCTIONS.get(type_name, {}))
    return names


class PerOpModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``nnabla_jit.backward_function.<snake name of an op with a grad rule>``."""

    def __init__(self):
        self.ops = {spec.snake_name: name for name, spec in TABLE.items()}

    def find_spec(self, fullname, path=None, target=None):
        package, _, leaf = fullname.rpartition(".")
        if package != PACKAGE or self.ops.get(leaf) not in GRAD_RULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None   # the default module object

    def exec_module(self, module):
        leaf = module.__name__.rpartition(".")[2]
        type_name = self.ops[leaf]
        module.__doc__ = "nnabla's backward_function.{}: the grad rule of {} (filed in {}).".format(
            leaf, type_name, GRAD_RULES[type_name].__module__)
        module.__dict__.update(names_of(type_name, leaf))


def install():
    """Put the finder on ``sys.meta_path`` (once), and give a family module named like an op
    (``affine``, ``convolution``) that op's per-op names too."""
    finder = PerOpModules()
    for leaf, type_name in finder.ops.items():
        family = sys.modules.get(PACKAGE + "." + leaf)
        if family is not None and type_name in GRAD_RULES:
            for name, value in names_of(type_name, leaf).items():
                family.__dict__.setdefault(name, value)
    if not any(isinstance(f, PerOpModules) for f in sys.meta_path):
        sys.meta_path.append(finder)
