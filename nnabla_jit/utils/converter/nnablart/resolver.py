"""Network rewrites before a C-runtime export: nnabla unrolls GRU into basic functions
here; nnabla_jit does not yet, and says so. Parameters no function uses are dropped."""

__all__ = ["Resolver"]

_UNROLLED_BY_NNABLA = ("GRU",)


class Resolver:
    def __init__(self, nnp):
        self._nnp = nnp

    def execute(self):
        proto = self._nnp.protobuf
        for network in proto.network:
            for func in network.function:
                if func.type in _UNROLLED_BY_NNABLA:
                    raise NotImplementedError(
                        "function '{}' ({}): nnabla_jit cannot unroll {} for the C runtime "
                        "formats (NNB, CSRC) yet".format(func.name, func.type, func.type))
        used = {i for network in proto.network for func in network.function for i in func.input}
        exe = proto.executor[0] if proto.executor else None
        if exe is not None:
            exe.ClearField("parameter_variable")
            for name in self._nnp.parameters:
                if name in used:
                    exe.parameter_variable.add().variable_name = name
        return self._nnp
