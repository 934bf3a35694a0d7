"""The scalar functions elementwise expressions call: one table, :data:`FUNCTIONS`, and their
CPU implementations, typed for the array they run over.

Everything that needs the list derives it from :data:`FUNCTIONS`: the imports of the generated
CPU kernels (:func:`kernel_prelude`, used by ``elementwise.py`` and ``fusion.py``), the device
functions of the CUDA kernels (:func:`device_prelude`, used by ``cuda_ops/elementwise.py``), the
names an expression may call (``elementwise.SCALAR_FUNCTIONS``) and the F ops the grad rules use
over Variables (``elementwise._grad_namespace``).

The CPU versions keep float32 math in float32 (literals go through ``like``), so LLVM
vectorises the loops, and pick per type:

- ``tanh``: float32 uses a rational approximation (the one Eigen uses, within 4 ulp, and plain
  arithmetic that vectorises); float64 -- what gradient checks run -- uses libm's tanh.
- ``exp``: float32 uses Cephes' polynomial with the power of two built from its bits (within
  1 ulp, denormals, inf and nan as libm); float64 uses libm's exp.
- ``power(x, p)``: the common exponents (1, 2, 3, 0.5, -1) as multiplications, not pow().

The choice happens at compile time through ``numba.extending.overload``.
"""
import functools
import hashlib
import inspect
import math
import textwrap
from typing import Callable, NamedTuple, Optional, Union

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload


def _is_float32(t):
    return isinstance(t, types.Float) and t.bitwidth == 32


# ---------------------------------------------------------------------------------- literals
def like(value, ref):
    """``value`` converted to the type of ``ref`` (float32 literals for float32 kernels)."""
    return value


@overload(like)
def _like(value, ref):
    if _is_float32(ref):
        return lambda value, ref: np.float32(value)
    if isinstance(ref, types.Float):
        return lambda value, ref: np.float64(value)
    return lambda value, ref: value


# ---------------------------------------------------------------------------------- tanh
def tanh(x):
    return math.tanh(x)


@overload(tanh)
def _tanh(x):
    if not _is_float32(x):
        return lambda x: math.tanh(x)

    def rational(x):
        c = np.float32(7.90531110763549805)    # tanh(c) rounds to 1 in float32
        x = c if x > c else (-c if x < -c else x)
        x2 = x * x
        p = x2 * np.float32(-2.76076847742355e-16) + np.float32(2.00018790482477e-13)
        p = x2 * p + np.float32(-8.60467152213735e-11)
        p = x2 * p + np.float32(5.12229709037114e-08)
        p = x2 * p + np.float32(1.48572235717979e-05)
        p = x2 * p + np.float32(6.37261928875436e-04)
        p = x2 * p + np.float32(4.89352455891786e-03)
        q = x2 * np.float32(1.19825839466702e-06) + np.float32(1.18534705686654e-04)
        q = x2 * q + np.float32(2.26843463243900e-03)
        q = x2 * q + np.float32(4.89352518554385e-03)
        return x * p / q
    return rational


# ---------------------------------------------------------------------------------- exp
@intrinsic
def _int32_as_float32(typingctx, bits):
    """The float32 whose bit pattern is ``bits`` (a free bit cast, which vectorises)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


def exp(x):
    return math.exp(x)


@overload(exp)
def _exp(x):
    if not _is_float32(x):
        return lambda x: math.exp(x)

    def cephes(x):
        hi = np.float32(88.72283935546875)     # the largest x with a finite exp in float32
        lo = np.float32(-103.972084045410)     # below it exp rounds to 0
        over = x > hi
        under = x < lo
        x = hi if over else (lo if under else x)
        # np.floor keeps float32 (math.floor returns an int, which takes the rest to float64
        # and stops LLVM vectorising the loop)
        n = np.floor(x * np.float32(1.44269504088896341) + np.float32(0.5))
        r = x - n * np.float32(0.693359375) + n * np.float32(2.12194440e-4)   # x - n ln2
        p = np.float32(1.9875691500e-4)
        p = p * r + np.float32(1.3981999507e-3)
        p = p * r + np.float32(8.3334519073e-3)
        p = p * r + np.float32(4.1665795894e-2)
        p = p * r + np.float32(1.6666665459e-1)
        p = p * r + np.float32(5.0000001201e-1)
        p = p * (r * r) + r + np.float32(1.0)
        whole = np.int32(n)
        half = whole >> np.int32(1)            # 2^n as two factors: n spans [-150, 128]
        s1 = _int32_as_float32((half + np.int32(127)) << np.int32(23))
        s2 = _int32_as_float32((whole - half + np.int32(127)) << np.int32(23))
        result = p * s1 * s2
        return np.float32(np.inf) if over else (np.float32(0.0) if under else result)
    return cephes


# ---------------------------------------------------------------------------------- power
def power(x, p):
    return x ** p


def _power(x, p):
    # p is the same for every element: the branch is hoisted out of the loop
    if p == 2.0:
        return x * x
    if p == 1.0:
        return x
    if p == 3.0:
        return x * x * x
    if p == 0.5:
        return math.sqrt(x)
    if p == -1.0:
        return like(1.0, x) / x
    return x ** p


@overload(power)
def _power_overload(x, p):
    return _power


# ---------------------------------------------------------------------------------- helpers
@njit(inline="always")
def where(c, a, b):
    return a if c else b


@njit(inline="always")
def eq(a, b):
    return a == b


@njit(inline="always")
def ne(a, b):
    return a != b


@njit(inline="always")
def sign(x, alpha):
    return like(1.0, x) if x > 0 else (like(-1.0, x) if x < 0 else like(alpha, x))


@njit(inline="always")
def minimum(a, b):
    return a if a < b else b


@njit(inline="always")
def maximum(a, b):
    return a if a > b else b


@njit(inline="always")
def round_away(x):
    half = like(0.5, x)
    return math.floor(x + half) if x >= 0 else -math.floor(-x + half)


@njit(inline="always")
def sigmoid(x):
    one = like(1.0, x)
    e = exp(-abs(x))              # never overflows
    s = one / (one + e)
    return s if x >= 0 else e * s


@njit(inline="always")
def softplus(x):
    return max(x, like(0.0, x)) + math.log1p(exp(-abs(x)))


# ---------------------------------------------------------------------------------- the table
class ScalarFunction(NamedTuple):
    """One function of the expression language.

    ``kernel``: where CPU kernels get it: ``"math"`` or ``"scalar_math"`` (this module).
    ``device``: where CUDA kernels get it: ``"math"``, or a function of this module whose source
    is compiled again as a CUDA device function (so it is written once).
    ``python``: its value on Python numbers (grad rules evaluated on plain numbers).
    ``grad``: the F function computing it over Variables in grad rules (``elementwise``), or
    ``None`` where elementwise's grad namespace has its own rule (``sqrt``, ``where``, ...).
    """
    name: str
    kernel: str
    device: Union[str, Callable]
    python: Optional[Callable]
    grad: Optional[str]


def _math(name, grad=True):
    """A function of ``math``, on every target; over Variables the F op of the same name."""
    return ScalarFunction(name, "math", "math", getattr(math, name), name if grad else None)


FUNCTIONS = (
    ScalarFunction("exp", "scalar_math", "math", math.exp, "exp"),
    ScalarFunction("tanh", "scalar_math", "math", math.tanh, "tanh"),
    *(_math(n) for n in ("log", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "atan2",
                         "asinh", "acosh", "atanh", "erf", "floor", "ceil", "isnan", "isinf")),
    _math("sqrt", grad=False),     # over Variables: v ** 0.5
    ScalarFunction("power", "scalar_math", _power, lambda v, p: v ** p, "pow_scalar"),
    ScalarFunction("where", "scalar_math", where, lambda c, a, b: a if c else b, None),
    ScalarFunction("eq", "scalar_math", eq, lambda a, b: a == b, None),
    ScalarFunction("ne", "scalar_math", ne, lambda a, b: a != b, None),
    ScalarFunction("sign", "scalar_math", sign, lambda v, a: math.copysign(1.0, v) if v else a, "sign"),
    ScalarFunction("minimum", "scalar_math", minimum, min, None),
    ScalarFunction("maximum", "scalar_math", maximum, max, None),
    ScalarFunction("round_away", "scalar_math", round_away, lambda v: math.floor(v + 0.5), "round"),
    ScalarFunction("sigmoid", "scalar_math", sigmoid, lambda v: 1 / (1 + math.exp(-v)), "sigmoid"),
    ScalarFunction("softplus", "scalar_math", softplus, lambda v: math.log1p(math.exp(v)), "softplus"),
)
NAMES = tuple(f.name for f in FUNCTIONS)
CONSTANTS = {"pi": math.pi}
# What generated kernels use besides the table: ``like`` (typed literals, see _TypedLiterals).
_KERNEL_HELPERS = ("like",)


@functools.cache
def kernel_prelude():
    """The imports of a generated CPU kernel module. The hash of this file is part of the
    text, so a change here makes new module files (numba's cache does not track imported
    helpers)."""
    with open(__file__, "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:12]
    from_math = [f.name for f in FUNCTIONS if f.kernel == "math"] + list(CONSTANTS)
    ours = list(_KERNEL_HELPERS) + [f.name for f in FUNCTIONS if f.kernel == "scalar_math"]
    return ("# Generated by nnabla_jit from the elementwise op table. Do not edit.\n"
            "# scalar_math {}\n"
            "import math\n"
            "from math import {}\n"
            "from numba import njit, prange\n"
            "from {} import {}\n").format(digest, ", ".join(from_math), __name__, ", ".join(ours))


def _device_source(name, fn):
    """``fn``'s source as a CUDA device function named ``name``."""
    fn = getattr(fn, "py_func", fn)    # an @njit helper: its Python function
    lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
    body = [line for line in lines if not line.startswith("@")]
    body[0] = body[0].replace("def {}(".format(fn.__name__), "def {}(".format(name), 1)
    return "\n\n@cuda.jit(device=True)\n" + "\n".join(body) + "\n"


@functools.cache
def device_prelude():
    """The head of the generated CUDA kernel module: ``math`` imports and device functions.
    ``like`` is the identity there (the CUDA kernels keep Python's literal types)."""
    from_math = [f.name for f in FUNCTIONS if f.device == "math"] + list(CONSTANTS)
    text = ("import math\n"
            "from math import {}\n"
            "from numba import cuda\n"
            "\n\n@cuda.jit(device=True)\n"
            "def like(value, ref):\n"
            "    return value\n").format(", ".join(from_math))
    return text + "".join(_device_source(f.name, f.device) for f in FUNCTIONS if f.device != "math")
