"""Helpers the CLI's training-side commands share (nnabla's ``nnabla.utils.cli.utility``)."""
import os
import re

import numpy as np

from . import CommandError

__all__ = ["let_data_to_variable", "is_float", "compute_full_path", "str_to_num"]


def let_data_to_variable(variable, data, ctx=None, data_name=None, variable_name=None):
    """Copy ``data`` into ``variable`` (reshaped when only the shape differs)."""
    value = np.asarray(data)
    if value.shape != tuple(variable.shape):
        if value.size != variable.size:
            raise CommandError("data '{}' of shape {} does not fit variable '{}' of shape {}".format(
                data_name, value.shape, variable_name, tuple(variable.shape)))
        value = value.reshape(variable.shape)
    variable.d = value


def is_float(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def compute_full_path(root_path, file_path):
    """``file_path`` relative to directory ``root_path`` unless it is absolute."""
    return os.path.normpath(os.path.join(root_path, file_path))


_SIZE_PATTERN = re.compile(r"^(?:([1-9][0-9]*)|([1-9][0-9]*(?:\.[0-9]+)?)(?:e([0-9]+)|([KkMmGgTtPp])))$")
_UNIT_POWER = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


def str_to_num(text):
    """An integer from nnabla's size syntax: ``INTEGER``; ``NUMeNUM``, the first to the power
    of the second (nnabla's reading); ``NUM`` with K, M, G, T, P (powers of 1000) or k, m, g, t,
    p (powers of 1024)."""
    m = _SIZE_PATTERN.match(str(text).strip())
    if not m:
        raise CommandError("'{}' is not a size (INTEGER, NUMeNUM or NUM[KkMmGgTtPp])".format(text))
    integer, number, exponent, unit = m.groups()
    if integer:
        return int(integer)
    if exponent:
        return int(float(number) ** int(exponent))
    base = 1000 if unit.isupper() else 1024
    return int(float(number) * base ** _UNIT_POWER[unit.upper()])
