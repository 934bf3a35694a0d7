"""Buffer sharing of the nnabla-c-runtime exporters: Buffer variables whose lifetimes do not
overlap share one actual buffer.

A Buffer variable lives from the first function that uses it (function 0 for a network input)
to the last one (to the end for a network output). The number of actual buffers is the most
variables alive at once; slot ``i`` of them is as large as the ``i``-th smallest of the live
sizes at any function (smallest first, empty slots counting -1). Walking the functions in
order, each newly live variable takes the first free actual buffer large enough, else the
first free one, grown to fit. The result is nnabla's exactly, so the NNB files match.
"""
import numpy as np

__all__ = ["save_variable_buffer"]


def _lifetimes(info):
    """[begin, end] function index of each buffer (-1, -1: never used)."""
    lives = [[-1, -1] for _ in info._variable_buffer_index]
    index_of = {v.name: i for i, v in enumerate(info._network.variable)}
    final = len(info._network.function)
    for f_index, func in enumerate(info._network.function):
        for name in list(func.input) + list(func.output):
            if info._variables[name].type != "Buffer":
                continue
            life = lives[info._buffer_ids[index_of[name]]]
            if life[0] < 0:
                life[0] = 0 if name in info._input_variables else f_index
            life[1] = final if name in info._output_variables else f_index
    return lives


def _live_at(lives, f_index):
    return [b for b, (begin, end) in enumerate(lives) if begin <= f_index <= end]


def save_variable_buffer(info):
    """(sizes of the actual buffers, {variable index: actual buffer index})."""
    lives = _lifetimes(info)
    n_functions = len(info._network.function)
    live = [_live_at(lives, f) for f in range(n_functions)]
    count = max((len(b) for b in live), default=0)
    sizes = np.zeros(count, dtype=np.int32)
    for buffers in live:
        slot_sizes = np.full(count, -1, dtype=np.int32)
        slot_sizes[:len(buffers)] = [info._variable_buffer_size[b] for b in buffers]
        sizes = np.maximum(sizes, np.sort(slot_sizes))
    assignment = {}
    for buffers in live:
        taken = np.zeros(count, dtype=bool)
        for b in buffers:
            v_index = info._variable_buffer_index[b][0]
            if v_index in assignment:
                taken[assignment[v_index]] = True
        for b in buffers:
            v_index = info._variable_buffer_index[b][0]
            if v_index in assignment:
                continue
            needed = info._variable_buffer_size[b]
            fits = [a for a in range(count) if not taken[a] and needed <= sizes[a]]
            free = fits or [a for a in range(count) if not taken[a]]
            if free:
                a = free[0]
                if not fits:
                    sizes[a] = needed
                taken[a] = True
                assignment[v_index] = a
    return [int(s) for s in sizes], assignment
