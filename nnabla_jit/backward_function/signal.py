"""Grad rules of the signal ops (``ops/signal.py``), built from F so ``nn.grad`` can go on.

Backward kernels and grad rules of the signal ops (see ``ops/signal.py``): each backward is
the transpose of a linear map, and each grad rule builds that transpose as a graph node.
"""
from .. import functions as F
from .. import function_bases as FB
from ..function import build
from ..ops.registry import REGISTRY, grad_rule
from ..ops.signal import STFTAdjoint, _STFT_ARGS, _signal_size, ResampleAdjoint


def resample_adjoint(source, forward_args, in_shape, dy):
    """A ResampleAdjoint node applied to ``dy``."""
    return build(ResampleAdjoint(input_names=("dy",), source=source, forward_args=forward_args,
                                 in_shape=in_shape), [dy])


def resample_linear_part(source, forward_args, g):
    """The forward resampling of ``g`` without ONNX's extrapolation constant."""
    args = dict(forward_args)
    if "extrapolation_value" in args:
        args["extrapolation_value"] = 0.0
    return build(REGISTRY[source](input_names=("x",), **args), [g])


@grad_rule('Interpolate')
def interpolate_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [resample_adjoint("Interpolate", args, input_shapes[0], grad_inputs[0])]


@grad_rule('ONNXResize')
def onnx_resize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [resample_adjoint("ONNXResize", args, input_shapes[0], grad_inputs[0])]


@grad_rule('ResampleAdjoint')
def resample_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                          source="Interpolate", forward_args=None, in_shape=()):
    return [resample_linear_part(source, forward_args, grad_inputs[0])]


@grad_rule('FFT')
def fft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, signal_ndim=1,
             normalized=False):
    dx = F.ifft(grad_inputs[0], signal_ndim, normalized)
    return [dx if normalized else dx * float(_signal_size(input_shapes[0], signal_ndim))]


@grad_rule('IFFT')
def ifft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, signal_ndim=1,
              normalized=False):
    dx = F.fft(grad_inputs[0], signal_ndim, normalized)
    return [dx if normalized else dx / float(_signal_size(input_shapes[0], signal_ndim))]


@grad_rule('STFT')
def stft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, as_istft_backward=False,
              **args):
    dyr, dyi = grad_inputs
    stft_args = [args[k] for k in _STFT_ARGS]
    if as_istft_backward:
        return [FB.istft(dyr, dyi, *stft_args[:5], "constant", False)]
    length = input_shapes[0][1]
    frames = output_shapes[0][2]
    center_pad = 2 * (args["fft_size"] // 2) if args["center"] else 0
    if (frames - 1) * args["stride"] + args["fft_size"] - center_pad == length:
        return [FB.istft(dyr, dyi, *stft_args, True)]
    op = STFTAdjoint(input_names=("y_r", "y_i"), length=length,
                               **{k: args[k] for k in _STFT_ARGS})
    return [build(op, [dyr, dyi])]


@grad_rule('ISTFT')
def istft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, as_stft_backward=False,
               **args):
    stft_args = [args[k] for k in _STFT_ARGS]
    if as_stft_backward:
        return list(FB.stft(grad_inputs[0], *stft_args, False))
    return list(FB.stft(grad_inputs[0], *stft_args[:5], "constant", True))


@grad_rule('STFTAdjoint')
def stft_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, length=0, **args):
    return list(FB.stft(grad_inputs[0], *[args[k] for k in _STFT_ARGS], False))
