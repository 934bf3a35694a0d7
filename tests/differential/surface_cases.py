"""Cases of the differential surface tests, shared by the generators (run under the nnabla
oracle, with nnabla's modules) and the replay tests (nnabla_jit's modules): each runner takes
the modules as ``m`` (nn, F, PF, I, S) so the same code runs on both."""
import numpy as np

# ---------------------------------------------------------------- PF argument forms
# (label, input shape, call): call is evaluated with x, nn, F, PF, I, np bound.
C = "I.ConstantInitializer(0.5)"
PF_CASES = [
    ("conv int kernel", (2, 3, 8, 8), "PF.convolution(x, 4, 3)"),
    ("conv tuple kernel", (2, 3, 8, 8), "PF.convolution(x, 4, (3, 3))"),
    ("conv list kernel", (2, 3, 8, 8), "PF.convolution(x, 4, [3, 2])"),
    ("conv int stride pad dilation", (2, 3, 8, 8),
     "PF.convolution(x, 4, (3, 3), pad=1, stride=2, dilation=2)"),
    ("conv tuple stride pad dilation", (2, 3, 8, 8),
     "PF.convolution(x, 4, (3, 3), pad=(1, 0), stride=(2, 1), dilation=(1, 2))"),
    ("conv 1d int kernel", (2, 3, 8), "PF.convolution(x, 4, 3)"),
    ("conv 1d tuple kernel", (2, 3, 8), "PF.convolution(x, 4, (3,))"),
    ("conv 3d int kernel", (1, 2, 5, 5, 5), "PF.convolution(x, 2, 3, pad=1)"),
    ("conv kernel too long", (2, 3, 8, 8), "PF.convolution(x, 4, (3, 3, 3))"),
    ("conv Nones", (2, 3, 8, 8),
     "PF.convolution(x, 4, (3, 3), w_init=None, b_init=None, fix_parameters=False, rng=None)"),
    ("conv no bias", (2, 3, 8, 8), "PF.convolution(x, 4, (3, 3), with_bias=False)"),
    ("conv fixed", (2, 3, 8, 8), "PF.convolution(x, 4, (3, 3), fix_parameters=True)"),
    ("conv rng", (2, 3, 8, 8), "PF.convolution(x, 4, (3, 3), rng=np.random.RandomState(0))"),
    ("conv group", (2, 4, 8, 8), "PF.convolution(x, 4, (3, 3), group=2)"),
    ("conv base_axis", (2, 3, 3, 8, 8), "PF.convolution(x, 4, (3, 3), base_axis=2)"),
    ("conv channel_last", (2, 8, 8, 3), "PF.convolution(x, 4, (3, 3), channel_last=True)"),
    ("conv const", (2, 3, 6, 6), "PF.convolution(x, 2, (3, 3), w_init=%s, b_init=%s)" % (C, C)),
    ("conv name", (2, 3, 8, 8), "PF.convolution(x, 4, (3, 3), name='c1')"),
    ("deconv int kernel", (2, 3, 5, 5), "PF.deconvolution(x, 4, 3)"),
    ("deconv tuple", (2, 3, 5, 5), "PF.deconvolution(x, 4, (3, 3), pad=(1, 1), stride=(2, 2))"),
    ("deconv int stride pad", (2, 3, 5, 5), "PF.deconvolution(x, 4, (4, 4), pad=1, stride=2)"),
    ("deconv no bias Nones", (2, 3, 5, 5),
     "PF.deconvolution(x, 4, (3, 3), with_bias=False, w_init=None, b_init=None, rng=None)"),
    ("deconv group", (2, 4, 5, 5), "PF.deconvolution(x, 4, (3, 3), group=2)"),
    ("deconv output_padding", (2, 3, 5, 5),
     "PF.deconvolution(x, 4, (3, 3), stride=(2, 2), output_padding=(1, 1))"),
    ("depthwise int kernel", (2, 3, 8, 8), "PF.depthwise_convolution(x, 3)"),
    ("depthwise tuple", (2, 3, 8, 8), "PF.depthwise_convolution(x, (3, 3), multiplier=2)"),
    ("depthwise deconv", (2, 3, 8, 8), "PF.depthwise_deconvolution(x, (3, 3), pad=(1, 1))"),
    ("affine int", (2, 5), "PF.affine(x, 3)"),
    ("affine tuple", (2, 5), "PF.affine(x, (3, 2))"),
    ("affine base_axis", (2, 3, 5), "PF.affine(x, 4, base_axis=2)"),
    ("affine Nones", (2, 5), "PF.affine(x, 3, w_init=None, b_init=None, rng=None)"),
    ("affine no bias", (2, 5), "PF.affine(x, 3, with_bias=False)"),
    ("affine const", (2, 5), "PF.affine(x, 3, w_init=%s, b_init=%s)" % (C, C)),
    ("affine fixed", (2, 5), "PF.affine(x, 3, fix_parameters=True)"),
    ("affine numpy w_init", (2, 2), "PF.affine(x, 2, w_init=np.ones((2, 2)))"),
    ("affine bad w_init shape", (2, 2), "PF.affine(x, 2, w_init=np.ones((3, 2)))"),
    ("embed", (2, 3), "PF.embed(x, 10, 4)"),
    ("bn default", (2, 3, 4, 4), "PF.batch_normalization(x)"),
    ("bn axes int", (2, 3, 4, 4), "PF.batch_normalization(x, axes=1)"),
    ("bn axes list", (2, 3, 4, 4), "PF.batch_normalization(x, axes=[3])"),
    ("bn batch_stat False", (2, 3, 4, 4), "PF.batch_normalization(x, batch_stat=False)"),
    ("bn no_scale no_bias", (2, 3, 4, 4), "PF.batch_normalization(x, no_scale=True, no_bias=True)"),
    ("bn fixed", (2, 3, 4, 4), "PF.batch_normalization(x, fix_parameters=True)"),
    ("bn param_init", (2, 3, 4, 4),
     "PF.batch_normalization(x, param_init={'gamma': I.ConstantInitializer(2.0)})"),
    ("fused bn", (2, 3, 4, 4), "PF.fused_batch_normalization(x)"),
    ("layer norm", (2, 3, 4), "PF.layer_normalization(x)"),
    ("instance norm", (2, 3, 4, 4), "PF.instance_normalization(x)"),
    ("group norm", (2, 4, 4, 4), "PF.group_normalization(x, 2)"),
    ("prelu", (2, 3, 4), "PF.prelu(x)"),
    ("prelu shared False", (2, 3, 4), "PF.prelu(x, shared=False)"),
    ("lstm cell", (2, 5), "PF.lstm_cell(x, nn.Variable((2, 4)), nn.Variable((2, 4)), 4)"),
    ("rnn", (3, 2, 5), "PF.rnn(x, nn.Variable((1, 1, 2, 4)))"),
    ("lstm", (3, 2, 5), "PF.lstm(x, nn.Variable((1, 1, 2, 4)), nn.Variable((1, 1, 2, 4)))"),
    ("gru", (3, 2, 5), "PF.gru(x, nn.Variable((1, 1, 2, 4)))"),
    ("rnn bidirectional 2 layers", (3, 2, 5),
     "PF.rnn(x, nn.Variable((2, 2, 2, 4)), num_layers=2, bidirectional=True, with_bias=False)"),
    ("svd affine", (2, 6), "PF.svd_affine(x, 4, 2)"),
    ("cpd3 conv", (2, 3, 8, 8), "PF.cpd3_convolution(x, 4, (3, 3), 2)"),
    ("binary connect affine", (2, 5), "PF.binary_connect_affine(x, 3)"),
    ("fixed point quantized conv", (2, 3, 8, 8),
     "PF.fixed_point_quantized_convolution(x, 4, (3, 3))"),
    ("spectral norm", (2, 5), "PF.affine(x, 3, apply_w=lambda w: PF.spectral_norm(w, dim=1))"),
    ("weight norm", (2, 5), "PF.affine(x, 3, apply_w=lambda w: PF.weight_normalization(w, dim=1))"),
    ("multi head attention", (3, 2, 4),
     "PF.multi_head_attention(x, x, x, num_heads=2)[0]"),
]
SCOPES = [None, "s", "a/b"]


def error_record(e):
    """The error's type, and the names of its classes (nnabla_jit's error matches nnabla's when
    nnabla's type is among them: ``except TypeError`` catches both)."""
    return {"error": type(e).__name__, "classes": [c.__name__ for c in type(e).__mro__]}


def same(want, got):
    """Whether a replayed record matches nnabla's (errors by class, sums to float32 round-off)."""
    if "error" in want or "error" in got:
        return "error" in want and "error" in got and want["error"] in got["classes"]
    if "sum" in want:
        if abs(got.get("sum", float("nan")) - want["sum"]) > 1e-5 * max(1.0, abs(want["sum"])):
            return False
        got = dict(got, sum=want["sum"])
    return got == want


def run_pf_case(m, case, scope):
    """Parameter names -> [shape, need_grad], output shape and dtype (and sum where the
    parameters are constants), or the error type nnabla's call raised."""
    nn, F, PF, I = m["nn"], m["F"], m["PF"], m["I"]
    label, shape, call = case
    nn.clear_parameters()
    np.random.seed(0)
    x = nn.Variable.from_numpy_array(np.ones(shape, dtype=np.float32))
    env = dict(x=x, nn=nn, F=F, PF=PF, I=I, np=np)
    try:
        if scope is None:
            y = eval(call, env)
        else:
            with nn.parameter_scope(scope):
                y = eval(call, env)
    except Exception as e:
        return error_record(e)
    params = {k: [list(v.shape), bool(v.need_grad)] for k, v in nn.get_parameters(grad_only=False).items()}
    ys = list(y) if isinstance(y, (tuple, list)) else [y]
    out = {"params": params, "shapes": [list(v.shape) for v in ys]}
    if "ConstantInitializer" in call and "bn" not in label:
        y.forward()
        out["sum"] = float(np.asarray(y.d, dtype=np.float64).sum())
    nn.clear_parameters()
    return out


# ---------------------------------------------------------------- solvers
SOLVERS = ["Sgd", "Momentum", "Nesterov", "Adadelta", "Adagrad", "AdaBelief", "RMSprop",
           "RMSpropGraves", "Adam", "AdaBound", "Adamax", "AMSGRAD", "AMSBound", "Lars", "Lamb",
           "SgdW", "AdamW", "Lion"]
# first positional argument (the learning rate, or Adadelta's lr too) in each form
LR_FORMS = {"default": None, "int": "1", "float": "0.01", "np.float32": "np.float32(0.01)",
            "np.float64": "np.float64(0.01)", "np.int64": "np.int64(1)"}


def _solver_params(nn):
    rs = np.random.RandomState(3)
    w = nn.Variable.from_numpy_array(rs.randn(2, 3).astype(np.float32), need_grad=True)
    b = nn.Variable.from_numpy_array(rs.randn(3).astype(np.float32), need_grad=True)
    return {"w": w, "b": b}, rs


def _states_record(solver):
    out = {}
    for k, st in solver.get_states().items():
        out[k] = {"t": int(st.t), "pstate": {n: np.asarray(v.d, dtype=np.float64).round(6).tolist()
                                              for n, v in sorted(st.pstate.items())}}
    return out


def run_solver_case(m, name, form):
    nn, S = m["nn"], m["S"]
    lr = LR_FORMS[form]
    try:
        solver = eval("S.{}({})".format(name, lr or ""), dict(S=S, np=np))
        params, rs = _solver_params(nn)
        solver.set_parameters(params)
        out = {"lr": float(solver.learning_rate()), "lr_type": type(solver.learning_rate()).__name__}
        for step in range(2):
            for v in params.values():
                v.g = rs.randn(*v.shape).astype(np.float32)
            solver.weight_decay(np.float32(0.01) if step else 0.01)
            solver.update()
        solver.set_learning_rate(np.float32(0.5) if form == "np.float32" else 1)
        out["lr_after_set"] = float(solver.learning_rate())
        out["lr_after_set_type"] = type(solver.learning_rate()).__name__
        for v in params.values():
            v.g = rs.randn(*v.shape).astype(np.float32)
        solver.update()
        out["params"] = {k: np.asarray(v.d, dtype=np.float64).round(5).tolist()
                         for k, v in params.items()}
        out["states"] = _states_record(solver)
        out["state_type"] = type(solver.get_states()).__name__
        # sorted: nnabla's order is its C++ hash map's (reverse insertion for a few names)
        out["names"] = sorted(solver.get_parameters())
    except Exception as e:
        return error_record(e)
    return out


STATE_SOLVERS = ["Adam", "Momentum", "Sgd", "RMSpropGraves"]


def trained_solver(m, name):
    """A solver after two updates of fixed parameters and gradients (for the state files)."""
    nn, S = m["nn"], m["S"]
    solver = getattr(S, name)()
    params, rs = _solver_params(nn)
    solver.set_parameters(params)
    for _ in range(2):
        for v in params.values():
            v.g = rs.randn(*v.shape).astype(np.float32)
        solver.update()
    return solver


def load_states_record(m, name, path):
    nn, S = m["nn"], m["S"]
    solver = getattr(S, name)()
    params, _ = _solver_params(nn)
    solver.set_parameters(params)
    try:
        solver.load_states(path)
    except Exception as e:
        return error_record(e)
    return _states_record(solver)
