"""``nnabla.auto_forward``: dynamic-graph mode switches (defined with the graph builder)."""
from .function import auto_forward, get_auto_forward, set_auto_forward

__all__ = ["auto_forward", "get_auto_forward", "set_auto_forward"]
