"""Convert a channel-last (NHWC) graph to channel-first (NCHW); see ``channel_last``."""
from .channel_last import _ChannelLayoutModifier
from .graph_converter import FunctionModifier  # noqa: F401  (a name nnabla's module has)

__all__ = ["ChannelFirstModifier"]


class ChannelFirstModifier(_ChannelLayoutModifier):
    """Convert a channel-last (NHWC) graph to channel-first (NCHW).

    Args:
        inputs (list of Variable): the graph's inputs (channel last).
        inputs_cf (list of Variable): their channel-first stand-ins; by default new variables
            holding the inputs' current values transposed (``modifier.inputs_cf``).
    """

    to_last = False
    suffix = "cf"

    def __init__(self, inputs, inputs_cf=None):
        super().__init__(inputs, inputs_cf)

    @property
    def inputs_cf(self):
        return self._converted_inputs
