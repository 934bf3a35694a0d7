"""The differences from nnabla 1.39 that the differential fixtures still show, each with why.

An entry names its functions, the cases (globs over case labels), the differences (globs over
``"kind | detail"`` as ``runner.compare`` words them), what differs and why, in one of four
categories. ``tests/test_differential.py`` fails on a difference no entry explains and on an
entry that explains nothing for one of its functions; README.md's table is generated from this
list (``python -m tests.differential.readme``).
"""
from collections import namedtuple
from fnmatch import fnmatchcase

NNABLA_BUG = "nnabla bug"            # nnabla computes garbage, crashes or writes what it should not
NNABLA_LACKS = "nnabla lacks it"     # nnabla (its CPU backend) raises; nnabla_jit computes it
INTENDED = "intended"                # a deliberate difference (README, Differences from nnabla)
NOT_YET = "not yet fixed"            # a difference to remove, not done yet
CATEGORIES = (NNABLA_BUG, NNABLA_LACKS, INTENDED, NOT_YET)

Known = namedtuple("Known", "ops cases match what category why")

_RNN = ("rnn", "lstm", "gru")
_ELEMENTWISE2 = ("add2", "bc_add2", "sub2", "mul2", "div2", "pow2", "maximum2", "minimum2", "atan2",
                 "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
                 "logical_or", "logical_xor", "squared_error", "absolute_error", "huber_loss",
                 "epsilon_insensitive_loss", "mod2", "bit_shift", "where")
_CHANNEL_LAST = ("convolution", "max_pooling", "average_pooling", "sum_pooling", "unpooling",
                 "interpolate", "roi_align", "warp_by_grid", "random_erase")
_LABELS = ("softmax_cross_entropy", "categorical_cross_entropy", "top_n_error", "confusion_matrix")
_STATEFUL = ("batch_normalization", "fused_batch_normalization", "fused_convolution", "mean_subtraction",
             "spectral_norm", "assign", "binary_connect_affine", "binary_connect_convolution",
             "binary_weight_affine", "binary_weight_convolution", "inq_affine", "inq_convolution",
             "min_max_quantize")

KNOWN = [
    # ------------------------------------------------------------------ nnabla bugs
    Known(_RNN, ("*",), ("grad*backward only*(nnabla 0.0)",),
          "gradients of inputs left out of backward (need_grad False)", NNABLA_BUG,
          "nnabla writes zeros into them; nnabla_jit leaves them as they were"),
    Known(("sink",), ("*",), ("grad*backward only*(nnabla 1.0)",),
          "gradients of inputs left out of backward", NNABLA_BUG,
          "nnabla writes ones into them (one_input_grad); nnabla_jit leaves them as they were"),
    Known(("binary_connect_affine", "binary_connect_convolution"), ("*",),
          ("grad*backward *, input 2:*",),
          "the gradient of binary_weight", NNABLA_BUG,
          "nnabla uses binary_weight's gradient as scratch for weight's (whatever its need_grad "
          "and accum); nnabla_jit gives binary_weight no gradient"),
    Known(("sort",), ("*",), ("gradvalues | backward *",),
          "gradient of the sorted values", NNABLA_BUG,
          "nnabla applies the inverse permutation (x = [3, 1, 2], dy = [10, 20, 30] gives "
          "dx = [20, 30, 10]; the gradient is [30, 10, 20], which nnabla_jit gives)"),
    Known(("kl_multinomial",), ("base_axis=-2", "base_axis=0"), ("*",),
          "a base_axis other than the last axis", NNABLA_BUG,
          "nnabla reads outside the distributions (values around 1e27 and 1e-31)"),
    Known(("vat_noise",), ("base_axis=-3", "base_axis=0"), ("outputvalues*",),
          "base_axis 0 (or its negative)", NNABLA_BUG, "nnabla's first output element is garbage (~1e14)"),
    Known(("min_max_quantize",), ("*",), ("gradshape | backward only1*", "gradshape | backward only2*"),
          "the shape of qr_min's and qr_max's gradients", NNABLA_BUG,
          "nnabla reshapes the gradient arrays of qr_min and qr_max to x's shape"),
    Known(("spectral_norm",), ("test=True",), ("gradvalues*(nnabla nan)",),
          "backward with test=True", NNABLA_BUG, "nnabla's gradient is NaN"),
    Known(("sync_batch_normalization",), ("*",), ("*",),
          "any call", NNABLA_BUG,
          "nnabla's function_bases.sync_batch_normalization raises NameError before it starts; "
          "nnabla_jit computes it (a single process: plain batch normalization) or refuses comm=None"),
    Known(("binary_cross_entropy", "categorical_cross_entropy", "kl_multinomial"), ("*.dtype=int32",),
          ("gradvalues*", "outputvalues*"),
          "log of 0 (integer probabilities 0 and 1)", NNABLA_BUG,
          "nnabla clamps some logarithms and not others (gradients of -6e37, losses of 87.3); "
          "nnabla_jit gives inf"),
    # ------------------------------------------------------------------ nnabla lacks it
    Known(("fft", "ifft"), ("*",), ("no-error*",), "every call", NNABLA_LACKS,
          "nnabla's CPU backend raises (FFT not implemented on the CPU); nnabla_jit computes it"),
    Known(_CHANNEL_LAST, ("*channel_last=True*",), ("no-error*",), "channel_last=True", NNABLA_LACKS,
          "nnabla's CPU backend implements these only channel-first"),
    Known(("broadcast_to", "onnx_resize", "warp_by_grid"), ("*",), ("grad-no-error*",),
          "backward (warp_by_grid: mode='nearest')", NNABLA_LACKS,
          "nnabla has no backward for them; nnabla_jit differentiates them"),
    # ------------------------------------------------------------------ intended
    Known(_ELEMENTWISE2, ("*.shorter",), ("no-error*",),
          "inputs of different ranks", INTENDED,
          "nnabla_jit broadcasts them as NumPy does (its own helpers rely on it); nnabla raises"),
    Known(_STATEFUL, ("*",), ("input-written*",),
          "an input written in place in another dtype (running statistics, quantized weights, "
          "the counter t), or one nnabla writes and nnabla_jit does not need to", INTENDED,
          "nnabla converts the array it writes to float32 (t to int32); nnabla_jit keeps the "
          "input's dtype. INQ's indicator and MinMaxQuantize's float16 range are written only by nnabla"),
    Known(("mean_subtraction", "min_max_quantize"), ("float_inputs=*",), ("outputvalues*",),
          "outputs computed from a state kept in float16/float64", INTENDED,
          "follows from keeping the state's dtype (above)"),
    Known(_LABELS, ("x.last=1",), ("error*",), "labels outside the classes", INTENDED,
          "nnabla_jit raises naming the label (README); nnabla reads outside the scores"),
]

_UNCHECKED_SHAPES = {
    "adaptive_separable_convolution": ("vertical_kernel.last=1",),
    "binary_connect_affine": ("binary_weight.*",),
    "binary_connect_convolution": ("binary_weight.*", "weight.last=1"),
    "bool_scatter": ("input.*",), "broadcast": ("x.shorter",), "clip_grad_by_value": ("x.*",),
    "deconvolution": ("weight.dim0=1",), "embed": ("w.*",), "fused_batch_normalization": ("x.*", "z.*"),
    "istft": ("y_r.dim0=1", "y_i.dim0=1"), "matrix_diag_part": ("x.last=1",),
    "max_pooling_backward": ("*",), "pack_padded_sequence": ("*",),
    "pad_packed_sequence": ("packed_sequence.*", "total_length=0"), "scatter_add": ("axis=2",),
    "stft": ("x.last=1",),
}
_UNCHECKED_VALUES = {
    "rnn": ("dropout=2.5",), "lstm": ("dropout=2.5",), "gru": ("dropout=2.5",),
    "image_augmentation": ("*",), "inq_affine": ("num_bits=*",), "inq_convolution": ("num_bits=*",),
    "quantize_linear": ("dtype=*", "extra:dtype=3"), "random_shift": ("shifts=(-1, 1, 1)",),
    "reshape": ("shape=(-5, 6)",),
    "clip_grad_by_norm": ("axes=(3,)", "axes=(-4,)"), "stft": ("window_size=*",),
}

KNOWN += [Known((op,), cases, ("error | forward: raises OpValueError (nnabla computes)",),
                "shapes that do not fit together", INTENDED,
                "nnabla_jit raises naming them; nnabla does not check them and reads or writes past "
                "an array (README: bad input raises early)") for op, cases in _UNCHECKED_SHAPES.items()]
KNOWN += [Known((op,), cases, ("error | forward: raises OpValueError (nnabla computes)",),
                "an argument outside its domain", INTENDED,
                "nnabla_jit raises naming it; nnabla uses it unchecked") for op, cases in _UNCHECKED_VALUES.items()]

_SINGLES = [
    # (ops, cases, match, what, category, why)
    (("binary_weight_affine", "binary_weight_convolution"), ("float_inputs=float16",), "gradvalues*",
     "x's gradient with float16 weights", INTENDED,
     "follows from keeping alpha's dtype (above): nnabla's backward reads alpha as the float32 it "
     "wrote, nnabla_jit as stored in float16 (differences of float16 round-off, 2e-4)"),
    (("batch_matmul",), ("*.shorter", "extra:a=(3, 4),b=(4, 5)"), "no-error*", "operands of different ranks",
     INTENDED, "nnabla_jit broadcasts the batch dimensions as NumPy's matmul does; nnabla raises"),
    (("where",), ("*.dim0=1", "*.last=1"), "no-error*", "inputs with size-1 dimensions", INTENDED,
     "nnabla_jit broadcasts them (its gradient rules build such Where nodes); nnabla needs one shape"),
    (("split",), ("*",), "no-error*", "function_bases.split without n_outputs", NNABLA_BUG,
     "nnabla's function_bases.split (n_outputs=-1) counts the outputs along axis 0 whatever the "
     "axis and raises; F.split passes n_outputs and works on both"),
    (("pad_packed_sequence",), ("padding_value=2.5",), "outputvalues*", "padding_value", NNABLA_BUG,
     "nnabla pads with 0 whatever padding_value says"),
    (("patch_correlation",), ("*",), "error-type | forward: raises OpValueError (nnabla IndexError)",
     "shape arguments of the wrong length", INTENDED,
     "nnabla raises IndexError (Python's, indexing them); nnabla_jit raises its OpValueError naming them"),
    (("gather_nd",), ("indices.dim0=0",), "error-type*", "indices with no index rows (M = 0)", INTENDED,
     "nnabla raises IndexError from a C++ range check (it reads index -1 of a vector); nnabla_jit "
     "raises its OpValueError naming the indices"),
    (("group_normalization",), ("batch_axis=(-1,)", "batch_axis=(2, 0)"), "*values*",
     "a batch axis after the channel axis", NNABLA_BUG,
     "nnabla reshapes x to (..., num_groups, C / num_groups, ...) and passes batch_axis unshifted to "
     "its InstanceNormalization, so a batch axis after the channel axis names the axis before it "
     "(batch_axis=(2,) of (N, C, L) keeps each channel and normalizes over N and L, without groups); "
     "nnabla_jit keeps the axis named"),
    (("instance_normalization", "tensor_normalization"), ("x.last=1", "batch_axis=(2, 0)"), "gradvalues*",
     "gradients where a statistic is taken over one element", INTENDED,
     "the variance is 0 and the gradient 0; nnabla's rounding error (1e-4) is scaled up by 1/sqrt(eps)"),
]

KNOWN += [Known(ops, cases, (match,), what, cat, why) for ops, cases, match, what, cat, why in _SINGLES]


def lookup(op, label, kind, detail):
    """The index of the first entry explaining this difference, or None."""
    text = "{} | {}".format(kind, detail)
    for k, e in enumerate(KNOWN):
        if (op in e.ops and any(fnmatchcase(label, c) for c in e.cases)
                and any(fnmatchcase(text, m) for m in e.match)):
            return k
    return None


def entries_for(op):
    return [k for k, e in enumerate(KNOWN) if op in e.ops]


# ------------------------------------------------------------------ Variable and NdArray
# The same entries for ``methods.py``'s snippets: ``ops`` names the class, ``cases`` globs over
# snippet labels (members: ``member:<name>``).
KNOWN_METHODS = [
    Known(("Variable",), ("member:EXCEPTIONS_AT_DEALLOC",), ("missing*",), "the class attribute",
          INTENDED, "nnabla's Cython internals (exceptions ignored when freeing)"),
    Known(("Variable", "NdArray"), ("* == *", "* != *"), ("no-error*",),
          "== and != with an operand that is not one of the class", INTENDED,
          "both compare identity; nnabla raises TypeError converting the other operand, nnabla_jit "
          "answers False (True for !=), so `v in [None, 3]` works"),
    Known(("Variable", "NdArray"), ("* < *", "* <= *", "* > *", "* >= *", "absV", "absA"), ("no-error*",),
          "<, <=, >, >= and abs()", INTENDED,
          "nnabla raises TypeError; nnabla_jit builds F.less, ..., F.abs (elementwise)"),
]


def lookup_method(cls, label, kind, detail):
    text = "{} | {}".format(kind, detail)
    for k, e in enumerate(KNOWN_METHODS):
        if (cls in e.ops and any(fnmatchcase(label, c) for c in e.cases)
                and any(fnmatchcase(text, m) for m in e.match)):
            return k
    return None
