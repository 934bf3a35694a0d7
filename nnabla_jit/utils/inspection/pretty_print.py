"""``pprint``: a graph printed function by function (nnabla's
``nnabla.utils.inspection.pretty_print``)."""
import numpy as np

from .base import _outputs, listed, parameter_names, parameter_scope_of

__all__ = ["PrettyPrinter", "pprint"]


class PrettyPrinter:
    """The callback :func:`pprint` visits a graph with: prints each function and, with
    ``hidden``, keeps ``functions``: one dict per function (``name``, ``inputs``, ``outputs``)."""

    def __init__(self, summary=False, hidden=False):
        self._summary = summary
        self._hidden = hidden
        self._names = parameter_names()
        self.functions = []

    def __call__(self, f):
        scope = parameter_scope_of(f, self._names)
        name = "{}({})".format(f.name, f.info.type_name)
        if scope:
            name = scope + "/" + name
        outputs = _outputs(f)
        print(name)
        print("\tDepth = {}".format(f.rank))
        print("\tArgs:", ["{}={}".format(k, listed(v)) for k, v in f.info.args.items()])
        print("\tInputs:", [v.shape for v in f.inputs])
        print("\tOutputs:", [v.shape for v in outputs])
        print("\tBackward Inputs:", [v.need_grad for v in f.inputs])
        if self._summary:
            for title, arrays in (("Input Data", [v.d for v in f.inputs]),
                                  ("Output Data", [v.d for v in outputs]),
                                  ("Input Grads", [v.g for v in f.inputs]),
                                  ("Output Grads", [v.g for v in outputs])):
                _print_statistics(title, arrays)
        if self._hidden:
            self.functions.append(dict(name=name, inputs=list(f.inputs), outputs=outputs))


def _print_statistics(title, arrays):
    print("\t{}:".format(title))
    for label, stat in (("Med", np.median), ("Ave", np.mean), ("Std", np.std),
                        ("Min", np.min), ("Max", np.max)):
        # str() of a numpy scalar is its shortest form (repr adds "np.float32(...)").
        print("\t\t{}: ".format(label), "[" + ", ".join(str(stat(a)) for a in arrays) + "]")


def pprint(v, forward=False, backward=False, summary=False, hidden=False, printer=False):
    """Print the functions a graph computes ``v`` with, in forward order: name (with the
    parameter scope), depth, arguments, input and output shapes and which inputs take a
    gradient. ``forward`` / ``backward`` run the graph first; ``summary`` adds the median,
    mean, std, min and max of every input and output, data and gradient; ``hidden`` keeps the
    inputs and outputs on the printer, returned when ``printer`` is True."""
    if forward:
        v.forward()
    if backward:
        v.backward()
    pretty_printer = PrettyPrinter(summary, hidden)
    v.visit(pretty_printer)
    return pretty_printer if printer else None
