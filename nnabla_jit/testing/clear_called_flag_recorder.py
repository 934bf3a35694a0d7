"""nnabla's ``clear_called_flag_recorder``: which arrays the executor released while running.

    clear_called_flag_recorder.activate_clear_called_flag_recorder()
    y.forward(clear_no_need_grad=True)
    flags = clear_called_flag_recorder.get_input_clear_called_flags()
    # flags[i][j] == (data cleared, grad cleared) of input j of the i-th function run
    clear_called_flag_recorder.deactivate_clear_called_flag_recorder()

While active, forward and backward run every function on its own (no fusion), so each one is
recorded.
"""
from .. import callback as _callback

__all__ = ["activate_clear_called_flag_recorder", "deactivate_clear_called_flag_recorder",
           "get_input_clear_called_flags", "get_output_clear_called_flags"]


def activate_clear_called_flag_recorder():
    """Start recording (clearing what was recorded before)."""
    _callback._recorder.update(active=True, inputs=[], outputs=[])


def deactivate_clear_called_flag_recorder():
    """Stop recording and forget the records."""
    _callback._recorder.update(active=False, inputs=[], outputs=[])


def get_input_clear_called_flags():
    """Per function run by forward, in order: [(data cleared, grad cleared)] of its inputs."""
    return [list(f) for f in _callback._recorder["inputs"]]


def get_output_clear_called_flags():
    """Per function run by backward, in order: [(data cleared, grad cleared)] of its outputs."""
    return [list(f) for f in _callback._recorder["outputs"]]
