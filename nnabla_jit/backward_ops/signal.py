"""Backward kernels and grad rules of the signal ops (see ``ops/signal.py``): each backward is
the transpose of a linear map, and each grad rule builds that transpose as a graph node."""
import numpy as np

_STFT_ARGS = ("window_size", "stride", "fft_size", "window_type", "center", "pad_mode")


def _signal():
    from ..ops import signal
    return signal


# ------------------------------------------------------------------ resampling
def resample_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _signal().apply_resample_adjoint(op.plan, grad_outputs[0], grad_inputs[0], accum[0])


def interpolate_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [_signal().resample_adjoint("Interpolate", args, input_shapes[0], grad_inputs[0])]


def onnx_resize_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, **args):
    return [_signal().resample_adjoint("ONNXResize", args, input_shapes[0], grad_inputs[0])]


def resample_adjoint_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    dx = grad_inputs[0]
    target = np.empty_like(dx) if accum[0] else dx
    _signal().apply_resample(op.plan, grad_outputs[0], target, linear_part=True)
    if accum[0]:
        dx += target


def resample_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes,
                          source="Interpolate", forward_args=None, in_shape=()):
    return [_signal().resample_linear_part(source, forward_args, grad_inputs[0])]


# ------------------------------------------------------------------ FFT
def dft_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if propagate_down[0]:
        _signal().transform(grad_outputs[0], grad_inputs[0], op.axes, op.inverse, op.normalized,
                            adjoint=True, accum=accum[0])


def _signal_size(shape, signal_ndim):
    return int(np.prod(shape[len(shape) - 1 - signal_ndim:-1]))


def fft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, signal_ndim=1,
             normalized=False):
    from .. import functions as F
    dx = F.ifft(grad_inputs[0], signal_ndim, normalized)
    return [dx if normalized else dx * float(_signal_size(input_shapes[0], signal_ndim))]


def ifft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, signal_ndim=1,
              normalized=False):
    from .. import functions as F
    dx = F.fft(grad_inputs[0], signal_ndim, normalized)
    return [dx if normalized else dx / float(_signal_size(input_shapes[0], signal_ndim))]


# ------------------------------------------------------------------ STFT / ISTFT
def _into(dst, value, accum):
    if accum:
        dst += value
    else:
        dst[...] = value


def _spectrum_backward(op, dx, grad_inputs, propagate_down, accum, run):
    """Write the spectrum gradients ``run(dx, gr, gi)`` computes into the wanted inputs."""
    if not (propagate_down[0] or propagate_down[1]):
        return
    shape = next(g.shape for g in grad_inputs[:2] if g is not None)
    parts = [g if propagate_down[k] and not accum[k] else np.empty(shape, dx.dtype)
             for k, g in enumerate(grad_inputs[:2])]
    run(dx, parts[0], parts[1])
    for k in range(2):
        if propagate_down[k] and accum[k]:
            grad_inputs[k] += parts[k]


def stft_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    if not propagate_down[0]:
        return
    if op.as_istft_backward:
        op.run_synthesis(grad_outputs[0], grad_outputs[1], grad_inputs[0], accum[0])
    else:
        op.run_analysis_adjoint(grad_outputs[0], grad_outputs[1], grad_inputs[0], accum[0])


def istft_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    run = op.run_analysis if op.as_stft_backward else op.run_synthesis_adjoint
    _spectrum_backward(op, grad_outputs[0], grad_inputs, propagate_down, accum, run)


def stft_adjoint_backward(op, inputs, outputs, grad_outputs, grad_inputs, propagate_down, accum):
    _spectrum_backward(op, grad_outputs[0], grad_inputs, propagate_down, accum, op.run_analysis)


def stft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, as_istft_backward=False,
              **args):
    from .. import function_bases as FB
    from ..function import build
    dyr, dyi = grad_inputs
    stft_args = [args[k] for k in _STFT_ARGS]
    if as_istft_backward:
        return [FB.istft(dyr, dyi, *stft_args[:5], "constant", False)]
    length = input_shapes[0][1]
    frames = output_shapes[0][2]
    center_pad = 2 * (args["fft_size"] // 2) if args["center"] else 0
    if (frames - 1) * args["stride"] + args["fft_size"] - center_pad == length:
        return [FB.istft(dyr, dyi, *stft_args, True)]
    op = _signal().STFTAdjoint(input_names=("y_r", "y_i"), length=length,
                               **{k: args[k] for k in _STFT_ARGS})
    return [build(op, [dyr, dyi])]


def istft_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, as_stft_backward=False,
               **args):
    from .. import function_bases as FB
    stft_args = [args[k] for k in _STFT_ARGS]
    if as_stft_backward:
        return list(FB.stft(grad_inputs[0], *stft_args, False))
    return list(FB.stft(grad_inputs[0], *stft_args[:5], "constant", True))


def stft_adjoint_grad(grad_inputs, inputs, input_shapes, outputs, output_shapes, length=0, **args):
    from .. import function_bases as FB
    return list(FB.stft(grad_inputs[0], *[args[k] for k in _STFT_ARGS], False))
