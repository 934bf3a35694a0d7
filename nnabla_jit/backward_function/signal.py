"""Grad rules of the signal ops (``ops/signal.py``): graphs of F ops, differentiable again.

Each backward kernel of a signal op is the transpose of a linear map; each grad rule builds
that transpose as a graph node.
"""
from .. import function_bases as FB, functions as F
from ..ops.registry import grad_rule
from ..ops.signal import STFT_ARGS, signal_size
from .adjoint import linear_adjoint


def _linear_part(args):
    """The arguments of a resampling without ONNX's extrapolation constant (its linear map)."""
    args = dict(args)
    if "extrapolation_value" in args:
        args["extrapolation_value"] = 0.0
    return args


@grad_rule('Interpolate')
def interpolate_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [linear_adjoint("Interpolate", args, input_shapes[0], [grad_inputs[0]])]


@grad_rule('ONNXResize')
def onnx_resize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [linear_adjoint("ONNXResize", _linear_part(args), input_shapes[0], [grad_inputs[0]])]


@grad_rule('FFT')
def fft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, signal_ndim=1,
             normalized=False):
    dx = F.ifft(grad_inputs[0], signal_ndim, normalized)
    return [dx if normalized else dx * float(signal_size(input_shapes[0], signal_ndim))]


@grad_rule('IFFT')
def ifft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, signal_ndim=1,
              normalized=False):
    dx = F.fft(grad_inputs[0], signal_ndim, normalized)
    return [dx if normalized else dx / float(signal_size(input_shapes[0], signal_ndim))]


@grad_rule('STFT')
def stft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, as_istft_backward=False,
              **args):
    dyr, dyi = grad_inputs
    stft_args = [args[k] for k in STFT_ARGS]
    if as_istft_backward:
        return [FB.istft(dyr, dyi, *stft_args[:5], "constant", False)]
    length = input_shapes[0][1]
    frames = output_shapes[0][2]
    center_pad = 2 * (args["fft_size"] // 2) if args["center"] else 0
    if (frames - 1) * args["stride"] + args["fft_size"] - center_pad == length:
        return [FB.istft(dyr, dyi, *stft_args, True)]
    return [linear_adjoint("STFT", dict(args, as_istft_backward=False), input_shapes[0], [dyr, dyi])]


@grad_rule('ISTFT')
def istft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, as_stft_backward=False,
               **args):
    stft_args = [args[k] for k in STFT_ARGS]
    if as_stft_backward:
        return list(FB.stft(grad_inputs[0], *stft_args, False))
    return list(FB.stft(grad_inputs[0], *stft_args[:5], "constant", True))


