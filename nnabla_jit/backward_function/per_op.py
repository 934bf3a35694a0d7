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
from .adjoint import linear_adjoint

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


class UnaryDataGrad:
    """nnabla's ``<Op>DataGrad(ctx, *args)``: set ``xshape`` (the op's input shape), then
    ``df(dy)`` gives ``dx = A^T dy`` as a LinearAdjoint node, differentiable to any order."""
    source_function = None   # the F function of the linear op; set by each subclass

    def __init__(self, ctx, *args, **kwargs):
        self.ctx = ctx
        self.args = args
        self.kwargs = kwargs
        self.xshape = None

    def __call__(self, dy):
        name = type(self).__name__
        if self.xshape is None:
            raise ValueError("{}: set xshape (the shape of the op's input) before calling it"
                             .format(name))
        # The op is built once, unevaluated, on a placeholder of the input's shape, for its
        # type name and its arguments as its function resolves them (defaults, None entries).
        with auto_forward(False), context_scope(self.ctx):
            y = type(self).source_function(Variable(tuple(self.xshape)), *self.args, **self.kwargs)
        info = (y[0] if isinstance(y, (list, tuple)) else y).parent.info
        with context_scope(self.ctx):
            return linear_adjoint(info.type_name, info.args, tuple(self.xshape), [dy])


def names_of(type_name, snake_name):
    """The public names of nnabla's module for one op."""
    names = {}
    if type_name in GRAD_RULES:
        names[snake_name + "_backward"] = GRAD_RULES[type_name]
    if type_name in DATA_GRAD_SOURCES:
        cls_name = type_name + "DataGrad"
        names[cls_name] = type(cls_name, (UnaryDataGrad,), {
            "source_function": staticmethod(DATA_GRAD_SOURCES[type_name]),
            "__doc__": "nnabla's {}: dx = A^T dy of {}.".format(cls_name, type_name),
            "__module__": PACKAGE + "." + snake_name})
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
