"""Python operators of Variable and NdArray, mapped to nnabla functions as nnabla maps them
(``v / 2`` is MulScalar, ``2 - v`` is RSubScalar, ``v @ w`` is Affine for 2-d operands).

On Variables the operators build graph nodes; on NdArrays they compute at once (imperative
mode). ``==`` and ``hash`` are left to the classes: both compare identity, as in nnabla.
"""


def _F():
    from . import functions
    return functions


class Operators:
    """Mixin with the arithmetic and comparison operators."""

    __slots__ = ()

    def __neg__(self):
        return _F().mul_scalar(self, -1.0)

    def __pos__(self):
        return self

    def __add__(self, other):
        return _F()._add(self, other)

    __radd__ = __add__

    def __sub__(self, other):
        return _F()._sub(self, other)

    def __rsub__(self, other):
        return _F()._rsub(self, other)

    def __mul__(self, other):
        return _F()._mul(self, other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        return _F()._div(self, other)

    def __rtruediv__(self, other):
        return _F()._rdiv(self, other)

    def __pow__(self, other):
        return _F()._pow(self, other)

    def __rpow__(self, other):
        return _F()._rpow(self, other)

    def __matmul__(self, other):
        return _F()._matmul(self, other)

    def __abs__(self):
        return _F().abs(self)

    def __lt__(self, other):
        return _F()._compare(self, other, "less")

    def __le__(self, other):
        return _F()._compare(self, other, "less_equal")

    def __gt__(self, other):
        return _F()._compare(self, other, "greater")

    def __ge__(self, other):
        return _F()._compare(self, other, "greater_equal")
