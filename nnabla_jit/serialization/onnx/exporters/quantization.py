"""Quantizers as the arithmetic nnabla_jit does: floats holding the quantized values (ONNX's
QuantizeLinear would produce int8 and round halves only to even). Fixed-point and power-of-two
quantization are rounding and clipping in the linear and the log domain."""
import math

from ....ops.quantization import fixed_point_bounds, pow2_levels, quantized_range
from .arithmetic import compare, round_half_away
from .table import exports


@exports("QuantizeLinear")
def quantize_linear(g, n):
    """clip(round(x / scale) + clip(round(zero_point)))."""
    x, scale, zero_point = n.inputs
    low, high = quantized_range(n.args["dtype"], n.args["narrow_range"])

    def rounded(v):
        return g.op("Round", [v]) if n.args["round_mode"] == "HALF_TO_EVEN" else round_half_away(g, v)
    shift = g.clip(rounded(zero_point), float(low), float(high))
    return g.clip(g.op("Add", [rounded(g.op("Div", [x, scale])), shift]), float(low), float(high))


@exports("DequantizeLinear")
def dequantize_linear(g, n):
    x, scale, zero_point = n.inputs
    return g.op("Mul", [g.op("Sub", [x, zero_point]), scale])


@exports("FixedPointQuantize")
def fixed_point_quantize(g, n):
    """round(x / delta) delta, clipped to the n-bit range."""
    delta = float(n.args["delta"])
    low, high = fixed_point_bounds(n.args["sign"], n.args["n"], delta)
    levels = round_half_away(g, g.op("Div", [n.x, g.scalar(delta)]))
    return g.clip(g.op("Mul", [levels, g.scalar(delta)]), low, high)


@exports("Pow2Quantize")
def pow2_quantize(g, n):
    """sign(x) 2^round(log2 |x|) clipped to [p_min, p_max] in magnitude; below p_min's rounding
    threshold (and negative when unsigned): 0 (with_zero) or p_min."""
    args = n.args
    signed = args["sign"]
    p_min, p_max = pow2_levels(signed, args["with_zero"], args["n"], args["m"])
    magnitude = g.op("Abs", [n.x])
    exponent = round_half_away(g, g.op("Div", [g.op("Log", [magnitude]), g.scalar(math.log(2.0))]))
    power = g.clip(g.op("Pow", [g.scalar(2.0), exponent]), p_min, p_max)
    negative = g.op("Less", [n.x, g.scalar(0.0)])
    rounded = g.where(negative, g.op("Neg", [power]), power)
    small = compare(g, "Less", magnitude, g.scalar(p_min * 2.0 ** -0.5))
    if not signed:
        small = g.op("Or", [small, negative])
    floor_value = 0.0 if args["with_zero"] else p_min
    low = g.scalar(floor_value)
    if signed:
        low = g.where(negative, g.scalar(-floor_value), low)
    return g.where(small, low, rounded)
