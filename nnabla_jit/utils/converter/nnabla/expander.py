"""``NnpExpander``: an ``NNablaProtoBuf`` whose networks use loop control (``repeat_info``,
``RepeatStart``/``RepeatEnd``, ``RecurrentInput``/``RecurrentOutput``, ``Delay``) -> the same
message with every loop unrolled, as nnabla's converter writes it.

Unrolling a repeat ``r`` of ``n`` times: a variable or function with ``r`` in its ``repeat_id``
gets ``n`` copies named ``<name>_r_<i>``; a parameter copy is named by replacing ``{r}`` in its
name by ``[i]`` (or ``<name>_r_<i>`` when the file's parameters follow nnabla's older
``...r[i]`` naming). RepeatStart feeds copy 0 its first input and copy ``i`` the previous
copy's output; RepeatEnd gives the last copy's; Delay gives copy 0 its initial value and copy
``i`` the delayed variable of copy ``i-1``; RecurrentInput becomes a Split and RecurrentOutput
a Stack along the loop axis. The functions are then put in topological order; the executors' and
optimizers' parameter lists name the parameter copies.
"""
import re
from collections import OrderedDict

from ....serialization.files import FileFormatError
from ....serialization.proto import nnabla_pb2

__all__ = ["NnpExpander", "expand_loops", "rename_square_bracket", "MAX_UNROLLED"]

_LOOP_ENDS = ("RepeatStart", "RepeatEnd")
_LOOP_CONTROL = _LOOP_ENDS + ("Delay", "RecurrentInput", "RecurrentOutput")

#: At most this many functions (and as many variables) come out of unrolling one network: a
#: file saying ``repeat_info { times: 100000000 }`` is refused before anything is copied. Raise
#: it for a larger loop.
MAX_UNROLLED = 100000


def _copy_name(name, repeat_id, i):
    return "{}_{}_{}".format(name, repeat_id, i)


def expand_loops(contents, always=False):
    """Unroll the loops of ``contents.proto`` (an ``NnpContents``) in place, as nnabla does when
    it loads a file designed with repeat/recurrent loop control; parameter values are looked up
    under the unrolled names. Without loops (and ``always`` False) the message is untouched, so
    its function order stays as written. Returns ``contents``."""
    proto = contents.proto
    if not always and not any(n.repeat_info for n in proto.network):
        return contents
    named = nnabla_pb2.NNablaProtoBuf()
    named.CopyFrom(proto)
    known = {p.variable_name for p in named.parameter}
    for entry in contents.parameters:
        if entry.name not in known:
            named.parameter.add().variable_name = entry.name   # the expander reads the naming
    try:
        expanded = NnpExpander(named).execute()
    except UnrollTooLarge as e:
        raise FileFormatError(contents.source, str(e)) from None
    del expanded.parameter[:]
    expanded.parameter.extend(proto.parameter)
    contents.proto = expanded
    return contents


class UnrollTooLarge(ValueError):
    """Unrolling a network's loops would make more than :data:`MAX_UNROLLED` functions or
    variables."""


def _check_unrolled_size(network):
    """Refuse ``network`` before unrolling when its loops would copy more than MAX_UNROLLED
    functions or variables (counts multiply over nested repeats; Python ints, no overflow)."""
    times = OrderedDict((ri.id, int(ri.times)) for ri in network.repeat_info)
    for what, items in (("functions", network.function), ("variables", network.variable)):
        total = 0
        for item in items:
            if what == "functions" and item.type in _LOOP_CONTROL:
                # RepeatStart/End and Delay go, RecurrentInput/Output become one Split/Stack
                total += item.type.startswith("Recurrent")
                continue
            copies = 1
            for rid in item.repeat_id:
                copies *= max(times.get(rid, 1), 1)
            total += copies
        if total > MAX_UNROLLED:
            raise UnrollTooLarge("network '{}': its repeats ({}) would unroll to {} {}; at most {} "
                                 "are unrolled (nnabla_jit.utils.converter.nnabla.expander."
                                 "MAX_UNROLLED)".format(network.name, ", ".join(
                                     "'{}' times {}".format(rid, n) for rid, n in times.items()),
                                     total, what, MAX_UNROLLED))


class NnpExpander:
    """Unroll the loops of the networks of ``nnp`` (an ``NNablaProtoBuf``).

    ``NnpExpander(nnp).execute()`` returns the unrolled copy; ``nnp`` is left as it is.
    """

    def __init__(self, nnp):
        self._nnp = nnp
        self._file_parameters = [p.variable_name for p in nnp.parameter]
        self._parameter_copies = OrderedDict()   # parameter name -> names of its copies

    def execute(self):
        out = nnabla_pb2.NNablaProtoBuf()
        out.CopyFrom(self._nnp)
        out.ClearField("network")
        copies = OrderedDict()
        for network in self._nnp.network:
            out.network.add().CopyFrom(self._expand_network(network))
            copies.update(self._parameter_copies)
        for holder in list(out.optimizer) + list(out.executor):
            names = []
            for pv in holder.parameter_variable:
                names.extend(copies.get(pv.variable_name) or [pv.variable_name])
            holder.ClearField("parameter_variable")
            for name in sorted(names):
                holder.parameter_variable.add().variable_name = name
        return out

    # ------------------------------------------------------------------------- networks
    def _expand_network(self, network):
        _check_unrolled_size(network)
        self._parameter_copies = OrderedDict()
        times = OrderedDict((ri.id, ri.times) for ri in network.repeat_info)
        # nnabla's older files name the copies of parameter 'w{r}' as 'w_r_<i>' and hold
        # parameters named '...r[i]'.
        self._old_parameter_names = any(
            m is not None and int(m.group(1)) < n
            for name in self._file_parameters for rid, n in times.items()
            for m in [re.search(r"{}\[([0-9]+)\]$".format(re.escape(rid)), name)])
        while network.repeat_info:
            network = self._unroll(network)
        unrolled = nnabla_pb2.NNablaProtoBuf().network.add()
        unrolled.CopyFrom(network)
        unrolled.ClearField("function")
        for f in _topological_order(network.function):
            unrolled.function.add().CopyFrom(f)
        return unrolled

    def _unroll(self, network):
        """``network`` with its first repeat unrolled."""
        info = network.repeat_info[0]
        rid, times = info.id, info.times
        net = nnabla_pb2.NNablaProtoBuf().network.add()
        net.CopyFrom(network)
        del net.repeat_info[0]

        net.ClearField("variable")
        for var in network.variable:
            is_param = var.type == "Parameter"
            if is_param:
                self._parameter_copies.setdefault(var.name, [])
            if rid not in var.repeat_id:
                if is_param and not var.repeat_id and not self._parameter_copies[var.name]:
                    self._parameter_copies[var.name].append(var.name)
                net.variable.add().CopyFrom(var)
                continue
            for i in range(times):
                if not is_param:
                    name = _copy_name(var.name, rid, i)
                else:
                    name = (_copy_name(var.name, rid, i) if self._old_parameter_names
                            else var.name.replace("{%s}" % rid, "[{}]".format(i)))
                    self._parameter_copies[var.name].append(name)
                v = net.variable.add()
                v.CopyFrom(var)
                v.name = name
                v.repeat_id.remove(rid)

        # What the copies read in place of a loop-control function's output.
        ends, starts, delays = {}, {}, {}
        for f in network.function:
            if f.type == "RepeatEnd" and f.repeat_param.repeat_id == rid:
                ends[f.output[0]] = [_copy_name(f.input[0], rid, i)
                                     for i in range(f.repeat_param.times)]
        for f in network.function:
            if f.type == "RepeatStart" and f.repeat_param.repeat_id == rid:
                first = f.input[0]
                seq = [ends[first][times - 1] if first in ends else first]
                for i in range(1, times):
                    back = f.input[1]
                    seq.append(ends[back][i - 1] if back in ends else _copy_name(back, rid, i - 1))
                starts[f.output[0]] = seq
            elif f.type == "Delay" and f.recurrent_param.repeat_id == rid:
                delays[f.output[0]] = [f.input[1]] + [_copy_name(f.input[0], rid, i - 1)
                                                       for i in range(1, times)]

        net.ClearField("function")
        for f in network.function:
            if f.type in _LOOP_ENDS and f.repeat_param.repeat_id == rid:
                continue
            if f.type == "Delay" and f.recurrent_param.repeat_id == rid:
                continue
            if f.type == "RecurrentInput" and f.recurrent_param.repeat_id == rid:
                g = net.function.add()
                g.CopyFrom(f)
                g.type = "Split"
                g.split_param.axis = f.recurrent_param.axis
                g.ClearField("recurrent_param")
                g.ClearField("output")
                g.output.extend(_copy_name(f.output[0], rid, i) for i in range(times))
                if rid in g.repeat_id:
                    g.repeat_id.remove(rid)
                continue
            if f.type == "RecurrentOutput" and f.recurrent_param.repeat_id == rid:
                g = net.function.add()
                g.CopyFrom(f)
                g.type = "Stack"
                g.stack_param.axis = f.recurrent_param.axis
                g.ClearField("recurrent_param")
                g.ClearField("input")
                g.input.extend(_copy_name(f.input[0], rid, i) for i in range(times))
                continue
            if rid not in f.repeat_id:
                g = net.function.add()
                g.CopyFrom(f)
                for k, name in enumerate(f.input):
                    if name in ends:
                        g.input[k] = ends[name][times - 1]
                continue
            for i in range(times):
                g = net.function.add()
                g.CopyFrom(f)
                g.repeat_id.remove(rid)
                g.name = _copy_name(f.name, rid, i)
                for k, name in enumerate(f.input):
                    g.input[k] = self._copy_input(name, rid, i, times, starts, ends, delays)
                for k, name in enumerate(f.output):
                    g.output[k] = _copy_name(name, rid, i)
        return net

    def _copy_input(self, name, rid, i, times, starts, ends, delays):
        """What copy ``i`` of a repeated function reads for its input ``name``."""
        if name in self._parameter_copies:
            copies = self._parameter_copies[name]
            return copies[i] if len(copies) == times else name   # shared across the loop
        for table in (starts, ends, delays):
            if name in table:
                return table[name][i]
        return _copy_name(name, rid, i)


def _topological_order(functions):
    """``functions`` ordered so that a function comes after the producers of its inputs
    (depth first from each function in file order, consumers visited in file order). Iterative:
    an unrolled network thousands of functions deep needs no Python recursion."""
    functions = list(functions)
    readers = {}
    for f in functions:
        for name in f.input:
            readers.setdefault(name, []).append(f)
    state, order = {}, []

    def consumers(f):
        seen = set()
        for out in f.output:
            for g in readers.get(out, []):
                if id(g) not in seen:
                    seen.add(id(g))
                    yield g

    for start in functions:
        if start.name in state:
            continue
        state[start.name] = "open"
        stack = [(start, consumers(start))]
        while stack:
            f, pending = stack[-1]
            g = next(pending, None)
            if g is None:
                stack.pop()
                state[f.name] = "done"
                order.append(f)
            elif state.get(g.name) == "open":
                raise ValueError("NnpExpander: the network is not a DAG (function '{}' is in a cycle)"
                                 .format(g.name))
            elif g.name not in state:
                state[g.name] = "open"
                stack.append((g, consumers(g)))
    order.reverse()
    return order


def _without_brackets(name):
    return name.replace("]", "").replace("[", "_")


def rename_square_bracket(nnp):
    """Rename, in place, ``w[0]`` to ``w_0`` in the parameters, the networks' variables and
    function inputs/outputs, and the optimizers' and executors' parameter lists of ``nnp`` (for
    formats that do not allow brackets). Does nothing while a network still has loops."""
    if any(n.repeat_info for n in nnp.network):
        return
    for p in nnp.parameter:
        p.variable_name = _without_brackets(p.variable_name)
    for n in nnp.network:
        for v in n.variable:
            v.name = _without_brackets(v.name)
        for f in n.function:
            for field in (f.input, f.output):
                names = [_without_brackets(x) for x in field]
                del field[:]
                field.extend(names)
    for holder in list(nnp.optimizer) + list(nnp.executor):
        for p in holder.parameter_variable:
            p.variable_name = _without_brackets(p.variable_name)
