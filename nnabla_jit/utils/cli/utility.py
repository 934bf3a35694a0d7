"""Helpers the CLI's training-side commands share (nnabla's ``nnabla.utils.cli.utility``)."""
import os

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


def str_to_num(text):
    """An integer from ``INTEGER``, ``NUMeNUM`` or ``NUM[KkMmGgTtPp]`` (nnabla's size syntax)."""
    units = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
    text = str(text).strip()
    if text and text[-1].lower() in units:
        return int(float(text[:-1]) * units[text[-1].lower()])
    try:
        return int(float(text))
    except ValueError:
        raise CommandError("'{}' is not a size (INTEGER, NUMeNUM or NUM[KkMmGgTtPp])".format(text)) from None
