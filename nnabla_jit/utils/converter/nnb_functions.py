"""Functions nnabla-c-runtime (the NNB format) supports, as nnabla 1.39's converter reports
them (``nnabla_cli function_info -f NNB``)."""

NNB_FUNCTIONS = (
    "Abs", "Add2", "AddN", "AddScalar", "Affine", "AveragePooling", "BatchMatmul",
    "BatchNormalization", "BinaryConnectAffine", "BinaryConnectConvolution", "BinarySigmoid",
    "BinaryTanh", "BinaryWeightAffine", "BinaryWeightConvolution", "CELU", "CReLU",
    "Concatenate", "Convolution", "Deconvolution", "DepthwiseConvolution", "Div2", "Dropout",
    "ELU", "Exp", "Flip", "Identity", "LeakyReLU", "Log", "MatrixDiag", "MatrixDiagPart",
    "MaxPooling", "Maximum2", "MaximumScalar", "MeanSubtraction", "Minimum2", "MinimumScalar",
    "Mul2", "MulN", "MulScalar", "PReLU", "Pow2", "PowScalar", "RDivScalar", "RPowScalar",
    "RSubScalar", "ReLU", "Reshape", "Round", "SELU", "Shift", "Sigmoid", "Sign", "Slice",
    "Softmax", "Split", "Stack", "Sub2", "Sum", "SumPooling", "Swish", "Tanh",
    "TensorNormalization", "Transpose", "Trilu", "Unpooling",
)
