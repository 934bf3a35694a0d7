"""Argument checks of the ops that no other test reached (found with tests/setup_coverage.py),
second part: normalization, pooling, recurrent, sequence, signal, stochastic, loss and the
registry's own argument handling. Each bad call raises a one-line error naming the op, the
argument and the values or shapes. Most are setup-level (no kernel runs); the checks on input
values (labels, lengths, box indices, weights) run in forward, and a few in backward."""
import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.function_bases as FB
import nnabla_jit.functions as F
from nnabla_jit.backward_functions import registry as grad_rules
from nnabla_jit.ops import registry
from nnabla_jit.ops.normalization import Standardization


def V(*shape):
    return nn.Variable(shape)


def data(values, need_grad=False):
    return nn.Variable.from_numpy_array(np.asarray(values), need_grad=need_grad)


class NotACommunicator:
    pass


class DuckCommunicator:
    """What SyncBatchNormalization asks of a communicator (ops sit below the communicators)."""

    def _gather_stats(self, local, group):
        return local[None]

    def _sum_arrays(self, flat, group):
        pass


def stat(*shape):
    """beta, gamma, mean and variance of one shape."""
    return [V(*shape) for _ in range(4)]


SETUP_CASES = {
    # normalization
    "batch_norm beta with no_bias": (
        lambda: FB.batch_normalization(V(2, 3), *stat(1, 3), no_bias=True),
        r"BatchNormalization: no_bias=True but beta is given"),
    "batch_norm mean shape": (
        lambda: FB.batch_normalization(V(2, 3), V(1, 3), V(1, 3), V(1, 4), V(1, 3)),
        r"BatchNormalization: mean of shape \(1, 4\) does not fit input of shape \(2, 3\) \(expected \(1, 3\)\)"),
    "batch_norm stats without batch_stat": (
        lambda: FB.batch_normalization(V(2, 3), *stat(1, 3), batch_stat=False, n_outputs=3),
        "BatchNormalization: batch_stat=False cannot output the batch mean and variance"),
    "fused_batch_norm missing beta and gamma": (
        lambda: FB.fused_batch_normalization(V(2, 3), None, None, V(1, 3), V(1, 3)),
        "FusedBatchNormalization: missing input.s. beta, gamma"),
    "fused_batch_norm z shape": (
        lambda: FB.fused_batch_normalization(V(2, 3), *stat(1, 3), V(2, 4)),
        r"FusedBatchNormalization: z of shape \(2, 4\) must have the input's shape \(2, 3\)"),
    "sync_batch_norm comm": (
        lambda: FB.sync_batch_normalization(V(2, 3), *stat(1, 3), NotACommunicator()),
        "SyncBatchNormalization: comm must be a communicator .*, got NotACommunicator"),
    "group_norm num_groups": (
        lambda: F.group_normalization(V(2, 6, 2), V(1, 6, 1), V(1, 6, 1), num_groups=4),
        r"GroupNormalization: the channel dimension 6 of input shape \(2, 6, 2\) is not a multiple of "
        "num_groups=4"),
    "mean_subtraction rmean": (
        lambda: F.mean_subtraction(V(2, 3), V(4), V(1)),
        r"MeanSubtraction: running mean of shape \(4,\) must have shape \(3,\) \(input shape \(2, 3\)"),
    "mean_subtraction t": (
        lambda: FB.mean_subtraction(V(2, 3), V(3), V(2)),
        r"MeanSubtraction: t must hold one value, got shape \(2,\)"),
    # pooling (nnabla's convolution refuses a kernel that leaves no window, as here; its pooling
    # gives an empty or negative output shape)
    "max_pooling no window": (
        lambda: F.max_pooling(V(1, 1, 2, 2), (3, 3), stride=(1, 1)),
        r"MaxPooling: kernel \(3, 3\) with stride \(1, 1\) is larger than the padded input: pooled "
        r"dims \(2, 2\) of input shape \(1, 1, 2, 2\) with pad \(0, 0\) leave no window"),
    "max_pooling_backward dy": (
        lambda: FB.max_pooling_backward(V(1, 1, 4, 4), V(1, 1, 4, 4), (2, 2)),
        r"MaxPoolingBackward: dy of shape \(1, 1, 4, 4\) must have the pooled shape \(1, 1, 2, 2\) of "
        r"x \(1, 1, 4, 4\)"),
    # quantization
    "binary_connect_affine bias": (
        lambda: FB.binary_connect_affine(V(2, 3), V(3, 4), V(3, 4), V(5)),
        r"BinaryConnectAffine: bias of shape \(5,\) must have shape \(4,\) \(weight shape \(3, 4\)\)"),
    # recurrent
    "lstm c shape": (
        lambda: FB.lstm(V(2, 1, 3), V(1, 1, 1, 2), V(1, 1, 1, 3), V(1, 4, 2, 5)),
        r"LSTM: c of shape \(1, 1, 1, 3\) must have the shape of h, \(1, 1, 1, 2\)"),
    "rnn weight with one layer": (
        lambda: FB.rnn(V(2, 1, 3), V(1, 1, 1, 2), V(1, 2, 5), V(1, 1, 2, 4)),
        r"RNN: weight cannot be given when num_layers == 1 \(got shape \(1, 1, 2, 4\)\)"),
    "rnn weight missing with two layers": (
        lambda: F.rnn(V(2, 1, 3), V(2, 1, 1, 2), V(1, 2, 5), num_layers=2),
        r"RNN: weight of shape \(1, 1, 2, 4\) is required when num_layers = 2"),
    "rnn weight_l0 shape": (
        lambda: FB.rnn(V(2, 1, 3), V(1, 1, 1, 2), V(1, 2, 6)),
        r"RNN: weight_l0 of shape \(1, 2, 6\) must have shape \(1, 2, 5\) for x \(2, 1, 3\)"),
    # signal
    "onnx_resize sizes": (
        lambda: FB.onnx_resize(V(1, 1, 4, 4), sizes=(8, 8)),
        r"ONNXResize: sizes \(8, 8\) must have one non-negative entry per input axis \(shape \(1, 1, 4, 4\)\)"),
    "onnx_resize scales": (
        lambda: FB.onnx_resize(V(1, 1, 4, 4), scales=(1.0, 1.0, 0.0, 2.0)),
        r"ONNXResize: scales \(1.0, 1.0, 0.0, 2.0\) must have one positive entry per input axis"),
    "istft NOLA": (
        lambda: F.istft(V(1, 9, 9), V(1, 9, 9), window_size=4, stride=8, fft_size=16, pad_mode="constant"),
        r"ISTFT: the NOLA \(nonzero overlap-add\) condition is not met: .* \(window_size=4, stride=8, "
        r"fft_size=16\)"),
    "onnx_resize roi for tf_crop_and_resize": (
        lambda: FB.onnx_resize(V(1, 1, 4, 4), roi=(0.0, 1.0), scales=(1.0, 1.0, 2.0, 2.0),
                               coordinate_transformation_mode="tf_crop_and_resize"),
        r"ONNXResize: roi \(0.0, 1.0\) must hold 4 starts then 4 ends for tf_crop_and_resize"),
    "stft signal shorter than fft_size": (
        lambda: F.stft(V(1, 8), window_size=16, stride=4, fft_size=16, center=False),
        "STFT: a signal of 8 samples .* is shorter than fft_size=16"),
    "stft reflect padding": (
        lambda: F.stft(V(1, 8), window_size=16, stride=4, fft_size=16, pad_mode="reflect"),
        "STFT: reflect padding of 8 needs more than 8 samples"),
    "stft as_istft_backward stride": (
        lambda: FB.stft(V(1, 64), 16, 5, 16, pad_mode="constant", as_istft_backward=True),
        "STFT: fft_size=16 must be a multiple of stride=5"),
    "stft as_istft_backward 3-d": (
        lambda: FB.stft(V(1, 2, 64), 16, 4, 16, pad_mode="constant", as_istft_backward=True),
        r"STFT: x of shape \(1, 2, 64\) must be \(batch, samples\)"),
    "stft as_istft_backward length": (
        lambda: FB.stft(V(1, 63), 16, 4, 16, pad_mode="constant", as_istft_backward=True),
        "STFT: 63 samples are not an ISTFT output length for stride=4, fft_size=16"),
    "stft as_istft_backward pad_mode": (
        lambda: FB.stft(V(1, 64), 16, 4, 16, pad_mode="reflect", as_istft_backward=True),
        "STFT: pad_mode must be 'constant' when as_istft_backward=True"),
    # the registry's argument handling
    "int64 argument not an integer": (
        # a float truncates as in nnabla (1.5 -> 1); one with no integer value is refused
        lambda: FB.softmax(V(2, 3), axis=float("nan")),
        r"softmax: argument 'axis' = nan is not a valid int64 \(cannot convert float NaN"),
    # grad rules called directly (nnabla's backward_functions.registry): a gradient whose
    # shape is not the function output's
    "dropout grad rule dy": (
        lambda: grad_rules["Dropout"]([V(3, 4)], [V(2, 3)], [None], [F.dropout(V(2, 3))], [None], 0.5, -1),
        r"DropoutMask: gradient of shape \(3, 4\) does not match the dropout input shape \(2, 3\)"),
    "max_pooling_backward grad rule g": (
        lambda: grad_rules["MaxPoolingBackward"](
            [V(1, 1, 3, 3)], [V(1, 1, 2, 2), V(1, 1, 4, 4)], [None, None], [None], [None], kernel=(2, 2),
            stride=(2, 2), ignore_border=True, pad=(0, 0), channel_last=False),
        r"MaxPoolingGather: g of shape \(1, 1, 3, 3\) must have the shape of x \(1, 1, 4, 4\)"),
}


@pytest.mark.parametrize("case", sorted(SETUP_CASES))
def test_bad_arguments_are_refused_when_the_graph_is_built(case):
    call, message = SETUP_CASES[case]
    with pytest.raises(ValueError, match=message):
        call()


# The same checks let well-formed calls through (graph building only: no kernel runs).
GOOD_CALLS = {
    "batch_norm": (lambda: FB.batch_normalization(V(2, 3), *stat(1, 3)), [(2, 3)]),
    "sync_batch_norm without comm": (
        lambda: FB.sync_batch_normalization(V(2, 3), *stat(1, 3), None, n_outputs=3), [(2, 3), (1, 3), (1, 3)]),
    "sync_batch_norm with a duck-typed comm": (
        lambda: FB.sync_batch_normalization(V(2, 3), *stat(1, 3), DuckCommunicator()), [(2, 3)]),
    "mean_subtraction": (lambda: FB.mean_subtraction(V(2, 3), V(3), V(1)), [(2, 3)]),
    "max_pooling_backward": (lambda: FB.max_pooling_backward(V(1, 1, 2, 2), V(1, 1, 4, 4), (2, 2)), [(1, 1, 4, 4)]),
    "max_pooling_backward grad rule": (
        lambda: grad_rules["MaxPoolingBackward"](
            [V(1, 1, 4, 4)], [V(1, 1, 2, 2), V(1, 1, 4, 4)], [None, None], [None], [None], kernel=(2, 2),
            stride=(2, 2), ignore_border=True, pad=(0, 0), channel_last=False)[0], [(1, 1, 2, 2)]),
    "dropout grad rule": (
        lambda: grad_rules["Dropout"]([V(2, 3)], [V(2, 3)], [None], [F.dropout(V(2, 3))], [None], 0.5, -1),
        [(2, 3)]),
    "onnx_resize sizes": (lambda: FB.onnx_resize(V(1, 1, 4, 4), sizes=(1, 1, 8, 2)), [(1, 1, 8, 2)]),
    "onnx_resize scales": (lambda: FB.onnx_resize(V(1, 1, 4, 4), scales=(1.0, 1.0, 2.0, 0.5)), [(1, 1, 8, 2)]),
    "sum keep_dims": (lambda: F.sum(V(2, 3), axis=1, keepdims=True), [(2, 1)]),
    "batch_matmul broadcast": (lambda: F.batch_matmul(V(2, 3, 4), V(1, 4, 5)), [(2, 3, 5)]),
}


@pytest.mark.parametrize("case", sorted(GOOD_CALLS))
def test_well_formed_calls_build(case):
    call, shapes = GOOD_CALLS[case]
    out = call()
    outs = out if isinstance(out, (list, tuple)) else [out]
    assert [o.shape for o in outs] == shapes


def test_dropout_setup_again_keeps_the_mask_backward_reads():
    x = V(2, 3)
    y = F.dropout(x, 0.5)
    mask = y.parent.op.mask
    y.parent.setup([x], [y])
    assert y.parent.op.mask is mask


def test_a_missing_required_argument_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="max_pooling: missing required argument 'kernel'"):
        FB.max_pooling(V(1, 1, 4, 4), None)


def test_a_table_argument_that_does_not_parse_names_the_table_and_the_text():
    with pytest.raises(ValueError, match="functions.tsv: cannot parse argument 'kernel'"):
        registry.ArgSpec("kernel")


# ------------------------------------------------------------------ checks on input values
def forward(y):
    y.forward()
    return y


VALUE_CASES = {
    "softmax_cross_entropy label": (
        lambda: forward(F.softmax_cross_entropy(data(np.zeros((2, 3))), data([[1], [5]]))),
        r"SoftmaxCrossEntropy: label 5 at position \(1, 0\) of the target is not a class index: labels "
        "must be below the number of classes 3"),
    "bit_shift signed x": (
        lambda: forward(FB.bit_shift(data(np.array([1, 2], np.int32)), data(np.array([1, 1], np.uint8)))),
        "BitShift: x must have an unsigned integer type, got int32"),
    "roi_align box batch index": (
        lambda: forward(F.roi_align(data(np.ones((1, 2, 4, 4))), data([[2.0, 0, 0, 2, 2]]), (2, 2))),
        r"RoiAlign: box batch indices \[2\] must lie in \[0, 1\)"),
    "pack_padded_sequence length too long": (
        lambda: FB.pack_padded_sequence(data(np.ones((3, 2))), data([4, 1])),
        r"PackPaddedSequence: lengths \[4, 1\] must lie in \[0, 3\]"),
    "pack_padded_sequence unsorted": (
        lambda: FB.pack_padded_sequence(data(np.ones((3, 2))), data([1, 3])),
        r"PackPaddedSequence: lengths \[1, 3\] must be sorted in decreasing order"),
    "pad_packed_sequence increasing": (
        lambda: FB.pad_packed_sequence(data(np.ones((3, 2))), data([1, 2])),
        r"PadPackedSequence: batch_sizes \[1, 2\] must be non-negative and non-increasing"),
    "pad_packed_sequence sum": (
        lambda: FB.pad_packed_sequence(data(np.ones((3, 2))), data([2, 2])),
        r"PadPackedSequence: batch_sizes \[2, 2\] add up to 4, but packed_sequence has 3 rows"),
    "random_choice negative weight": (
        lambda: forward(F.random_choice(data(np.ones((2, 3))), data([[1, -1, 1], [1, 1, 1.0]]), shape=(2,))),
        r"RandomChoice: weights must be non-negative with a positive sum per population, got w of shape "
        r"\(2, 3\) with minimum -1.0"),
    "random_choice too few positive without replacement": (
        lambda: forward(F.random_choice(data(np.ones((1, 3))), data([[1.0, 0, 0]]), shape=(2,), replace=False)),
        r"RandomChoice: weights must be non-negative with a positive sum per population, and without "
        r"replacement at least 2 of them positive, got w of shape \(1, 3\)"),
}


@pytest.mark.parametrize("case", sorted(VALUE_CASES))
def test_bad_input_values_are_refused(case):
    call, message = VALUE_CASES[case]
    with pytest.raises(ValueError, match=message):
        call()


# ------------------------------------------------------------------------ backward checks
def lstm_graph(training):
    """A one-layer LSTM whose inputs hold data, so backward may run without a forward."""
    x = data(np.ones((2, 1, 3)), need_grad=True)
    h, c = data(np.zeros((1, 1, 1, 2))), data(np.zeros((1, 1, 1, 2)))
    w = data(np.full((1, 4, 2, 5), 0.1), need_grad=True)
    return FB.lstm(x, h, c, w, training=training)[0]


def test_lstm_backward_needs_training_true():
    # nnabla: "Backward is called for training only."
    with pytest.raises(ValueError, match="LSTM: backward is called with training=False; build the layer "
                                         "with training=True"):
        lstm_graph(training=False).backward()


def test_lstm_backward_before_forward_is_an_error():
    with pytest.raises(RuntimeError, match="LSTM: backward is called before forward"):
        lstm_graph(training=True).backward()


def test_softmax_cross_entropy_backward_before_forward_is_an_error():
    y = F.softmax_cross_entropy(data(np.zeros((2, 3)), need_grad=True), data([[0], [1]]))
    with pytest.raises(RuntimeError, match="SoftmaxCrossEntropy needs the softmax its forward computes, "
                                           "and no forward.. has run"):
        y.backward()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arg_max_and_min_with_only_index_pass_the_index_gradient_as_nnabla(dtype):
    # nnabla 1.39 (recorded): the index output's gradient reaches the max (min) element; nn.grad
    # of the indices is zeros
    for reduce, picked in ((F.max, [0, 0, 1, 0, 0, 1]), (F.min, [1, 0, 0, 1, 0, 0])):
        x = data(np.arange(6.0, dtype=dtype).reshape(2, 3), need_grad=True)
        y = reduce(x, axis=1, only_index=True)
        y.forward()
        x.g = np.full((2, 3), 7.0)
        y.g = np.ones(2)
        y.parent.backward([x], [y], accum=[False])
        np.testing.assert_array_equal(x.g.ravel(), picked)
        y.parent.backward([x], [y], accum=[True])
        np.testing.assert_array_equal(x.g.ravel(), 2 * np.array(picked))
        g = nn.grad([reduce(x, axis=1, only_index=True)], [x])[0]
        g.forward()
        np.testing.assert_array_equal(g.d, np.zeros((2, 3)))


def test_backward_through_a_function_without_gradient_names_it():
    y = F.sum(FB.mod2(data(np.ones(3), need_grad=True), data(np.full(3, 2.0))))
    with pytest.raises(registry.NoGradient, match="Mod2: this function has no backward"):
        y.backward()


def test_in_place_is_refused_by_functions_without_it():
    with pytest.raises(RuntimeError, match="Tanh: not_implemented error in inplace_data_with"):
        F.tanh(V(2)).parent.inplace_data_with(0)


# ------------------------------------------------------------------ what every op defines
def test_every_op_defines_its_kernels_and_data_dependent_shapes():
    # Op has no default forward, output_specs or layout_of to fall back on (a default would
    # raise only when called): every registered op must define what the executor calls.
    for name, cls in registry.REGISTRY.items():
        assert callable(getattr(cls, "forward", None)), name
        if cls.data_dependent:
            assert callable(getattr(cls, "output_specs", None)), name
        if issubclass(cls, Standardization):
            assert callable(getattr(cls, "layout_of", None)), name


# ------------------------------------------------------------- huge and non-finite arguments
def test_a_non_finite_shape_argument_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"reshape: argument 'shape' = \(inf,\) is not a valid Shape"):
        F.reshape(V(2, 3), (float("inf"),))


def test_an_error_no_op_check_foresaw_names_the_op_its_inputs_and_arguments():
    # numpy's own "Maximum allowed size exceeded" gets the op, the shapes and the arguments
    with pytest.raises(ValueError, match=r"Tile: .* \(inputs of shapes \(2, 3\), arguments \{'reps': "):
        F.tile(V(2, 3), (10 ** 30,))


def test_pow2_quantize_with_a_huge_bit_width_builds_without_a_huge_integer():
    y = FB.pow2_quantize(V(2, 3), n=10 ** 30)
    assert y.shape == (2, 3) and y.parent.op.levels == (0.0, 2.0)
