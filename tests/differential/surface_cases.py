"""Cases of the differential surface tests, shared by the generators (run under the nnabla
oracle, with nnabla's modules) and the replay tests (nnabla_jit's modules): each runner takes
the modules as ``m`` (nn, F, PF, I, S) so the same code runs on both."""
import os

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


def _grads(params):
    return {k: np.asarray(v.g, dtype=np.float64).round(5).tolist() for k, v in sorted(params.items())}


def run_solver_ops_case(m, name):
    """The gradient helpers (clip, scale, inf/nan check, zero), set_states into a fresh solver,
    remove_parameters, and what each answers."""
    nn, S = m["nn"], m["S"]
    out = {}
    try:
        solver = getattr(S, name)()
        params, rs = _solver_params(nn)
        solver.set_parameters(params)
        for v in params.values():
            v.g = rs.randn(*v.shape).astype(np.float32) * 3
        solver.clip_grad_by_norm(1.0)
        out["clipped"] = _grads(params)
        solver.scale_grad(np.float32(0.5))
        out["scaled"] = _grads(params)
        out["finite"] = bool(solver.check_inf_or_nan_grad())
        solver.update()
        fresh = getattr(S, name)()
        twins = {k: nn.Variable.from_numpy_array(v.d.copy(), need_grad=True)
                 for k, v in params.items()}
        fresh.set_parameters(twins)
        fresh.set_states(solver.get_states())
        for k in params:
            g = rs.randn(*params[k].shape).astype(np.float32)
            params[k].g, twins[k].g = g, g
        solver.update()
        fresh.update()
        out["after_set_states"] = {k: np.asarray(v.d, dtype=np.float64).round(5).tolist()
                                   for k, v in sorted(twins.items())}
        out["same_as_source"] = all(np.allclose(params[k].d, twins[k].d, atol=1e-6) for k in params)
        params["w"].g = np.full((2, 3), np.inf, dtype=np.float32)
        out["inf"] = bool(solver.check_inf_or_nan_grad())
        solver.zero_grad()
        out["zeroed"] = _grads(params)
        solver.remove_parameters(["b"])
        out["after_remove"] = sorted(solver.get_parameters())
    except Exception as e:
        out.update(error_record(e))
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


# ---------------------------------------------------------------- Variable / NdArray methods
# Each case is code run with v (a Variable of arange(6) as (2, 3), need_grad), w (another),
# a (an NdArray of arange(6) as (2, 3)), b (another), nn, F, np bound; the value of the last line
# ``r = ...`` is summarized (or the error's classes).
ARRAY_CASES = [
    # Variable properties and methods
    ("v.shape", "r = v.shape"), ("v.ndim", "r = v.ndim"), ("v.size", "r = v.size"),
    ("v.size_from_axis()", "r = v.size_from_axis()"),
    ("v.size_from_axis(1)", "r = v.size_from_axis(1)"),
    ("v.size_from_axis(-1)", "r = v.size_from_axis(-1)"),
    ("v.need_grad", "r = v.need_grad"), ("v.persistent", "r = v.persistent"),
    ("v.name", "r = v.name"), ("v.rank", "r = v.rank"), ("v.parent", "r = v.parent"),
    ("v.d", "r = v.d"), ("v.g zero at start", "r = v.g"),
    ("v.data", "r = v.data"), ("v.grad", "r = v.grad"),
    ("v.d int set", "v.d = 3; r = v.d"), ("v.d list set", "v.d = [[1, 2, 3], [4, 5, 6]]; r = v.d"),
    ("v.d bad shape set", "v.d = np.ones((3, 2)); r = v.d"),
    ("v.g float set", "v.g = 0.5; r = v.g"),
    ("v.data set NdArray", "v.data = a; r = v.d"),
    ("v.reshape", "r = v.reshape((3, 2))"), ("v.reshape unlink", "r = v.reshape((3, 2), unlink=True)"),
    ("v.reshape list", "r = v.reshape([6])"), ("v.reshape -1", "r = v.reshape((-1,))"),
    ("v.reshape bad", "r = v.reshape((4,))"),
    ("v.reset_shape", "v.reset_shape((3, 2), force=True); r = v.d"),
    ("v.reset_shape no force", "v.reset_shape((3, 2)); r = v.shape"),
    ("v.get_unlinked_variable", "r = v.get_unlinked_variable()"),
    ("v.get_unlinked need_grad", "r = v.get_unlinked_variable(need_grad=False).need_grad"),
    ("v.unlinked", "r = v.unlinked()"),
    ("Variable()", "r = nn.Variable()"), ("Variable(shape list)", "r = nn.Variable([2, 3])"),
    ("Variable need_grad default", "r = nn.Variable((2,)).need_grad"),
    ("from_numpy_array need_grad default", "r = nn.Variable.from_numpy_array(np.ones(2)).need_grad"),
    ("from_numpy_array float64", "r = nn.Variable.from_numpy_array(np.ones(2))"),
    ("from_numpy_array int", "r = nn.Variable.from_numpy_array(np.arange(3))"),
    ("from_numpy_array grad", "r = nn.Variable.from_numpy_array(np.ones(2), np.full(2, 3.0)).g"),
    ("forward backward", "y = F.sum(v * v); y.forward(); y.backward(); r = v.g"),
    ("backward grad arg", "y = v * 2; y.forward(); y.backward(np.ones((2, 3)) * 3); r = v.g"),
    ("backward accumulates", "y = F.sum(v); y.forward(); y.backward(); y.backward(); r = v.g"),
    ("backward clear_buffer", "y = F.sum(F.exp(v)); y.forward(); y.backward(clear_buffer=True); r = v.g"),
    ("y.parent name", "r = F.relu(v).parent.name"),
    ("y.parent inputs", "r = len(F.add2(v, w).parent.inputs)"),
    ("y.rank", "r = F.relu(F.relu(v)).rank"),
    ("function_references", "y = F.relu(v); z = F.exp(v); r = len(v.function_references)"),
    ("get_number_of_references", "y = F.relu(v); r = v.get_number_of_references"),
    ("visit", "y = F.sum(F.relu(v)); names = []; y.visit(lambda f: names.append(f.name)); r = names"),
    ("apply", "r = v.apply(need_grad=False, persistent=True).persistent"),
    ("no_grad", "r = v.no_grad().need_grad"),
    ("clear_all_graph_links", "y = F.relu(v); y.clear_all_graph_links(); r = y.parent"),
    ("bool_fill_", "m = nn.Variable.from_numpy_array(np.array([[1, 0, 1], [0, 0, 1]])); "
                   "y = v.bool_fill_(m, 9.0); y.forward(); r = [y.parent.name, y.d]"),
    ("masked_fill_", "m = nn.Variable.from_numpy_array(np.array([[1, 0, 1], [0, 0, 1]])); "
                     "y = v.masked_fill_(m, 9.0); y.forward(); r = [y.parent.name, y.d]"),
    ("bool_fill_ backward", "m = nn.Variable.from_numpy_array(np.array([[1, 0, 1], [0, 0, 1]])); "
                            "y = F.sum(v.bool_fill_(m, 9.0) * 2); y.forward(); y.backward(); r = v.g"),
    # Variable operators
    ("v + 1", "r = v + 1"), ("1 + v", "r = 1 + v"), ("v - w", "r = v - w"), ("2 - v", "r = 2 - v"),
    ("v * w", "r = v * w"), ("v / 2", "r = v / 2"), ("2 / (v + 1)", "r = 2 / (v + 1)"),
    ("v ** 2", "r = v ** 2"), ("2 ** v", "r = 2 ** v"), ("v ** w", "r = v ** w"),
    ("-v", "r = -v"), ("+v", "r = +v"), ("v @ w.T", "r = v @ F.transpose(w, (1, 0))"),
    ("v + array", "r = v + np.ones((2, 3))"), ("v + NdArray", "r = v + a"),
    ("v[0]", "r = v[0]"), ("v[:, 1]", "r = v[:, 1]"), ("v[..., None]", "r = v[..., None]"),
    ("v[::-1]", "r = v[::-1]"), ("v[-1, -2]", "r = v[-1, -2]"), ("v[5]", "r = v[5]"),
    ("v setitem", "v[0, 1] = 7; r = v.d"),
    ("v == w", "r = v == w"), ("len(v)", "r = len(v)"),
    ("v.T", "r = v.T"), ("iter v", "r = [x.shape for x in v]"),
    # NdArray
    ("a.shape", "r = a.shape"), ("a.ndim", "r = a.ndim"), ("a.size", "r = a.size"),
    ("a.dtype", "r = a.dtype"), ("a.strides", "r = a.strides"),
    ("a.size_from_axis(1)", "r = a.size_from_axis(1)"),
    ("a.data", "r = a.data"), ("a.get_data", "r = a.get_data('r')"),
    ("a.get_data dtype", "r = a.get_data('r', np.float64)"),
    ("a.cast", "r = a.cast(np.int32)"), ("a.cast then data", "a.cast(np.int32); r = a.data"),
    ("a.fill", "a.fill(2); r = a.data"), ("a.zero", "a.zero(); r = a.data"),
    ("a.zeroing", "a.zero(); r = a.zeroing"), ("a.clear_called", "r = a.clear_called"),
    ("a.clear", "a.clear(); r = a.clear_called"),
    ("a.copy_from", "a.copy_from(b); r = a.data"),
    ("a.copy_from shape", "a.copy_from(nn.NdArray.from_numpy_array(np.ones((3, 2)))); r = a.data"),
    ("a.data set", "a.data = 5; r = a.data"), ("a.data set array", "a.data = np.ones((2, 3)); r = a.data"),
    ("a.view", "r = a.view((3, 2))"),  # a.view((4,)) of 6 values crashes nnabla 1.39
    ("a.narrow", "r = a.narrow(0, 1, 1)"), ("a.narrow bad", "r = a.narrow(0, 1, 3)"),
    ("NdArray()", "r = nn.NdArray()"), ("NdArray(shape)", "r = nn.NdArray((2, 2)).shape"),
    ("NdArray from float64", "r = nn.NdArray.from_numpy_array(np.ones(2))"),
    ("NdArray from int64", "r = nn.NdArray.from_numpy_array(np.arange(2))"),
    ("NdArray from bool", "r = nn.NdArray.from_numpy_array(np.ones(2, bool))"),
    ("a.bool_fill", "m = nn.NdArray.from_numpy_array(np.array([[1, 0, 1], [0, 0, 1]])); r = [a.bool_fill(m, 9.0), a]"),
    ("a.bool_fill broadcast", "m = nn.NdArray.from_numpy_array(np.array([1, 0, 1])); r = [a.bool_fill(m, 5), a]"),
    ("a.masked_fill", "m = nn.NdArray.from_numpy_array(np.array([[1, 0, 1], [0, 0, 1]])); r = [a.masked_fill(m, 9.0), a]"),
    ("a + 1", "r = a + 1"), ("a + b", "r = a + b"), ("a - b", "r = a - b"), ("a * 2", "r = a * 2"),
    ("a / 2", "r = a / 2"), ("a ** 2", "r = a ** 2"), ("2 ** a", "r = 2 ** a"), ("-a", "r = -a"),
    ("1 - a", "r = 1 - a"), ("a + array", "r = a + np.ones((2, 3))"),
    ("a += 1", "a += 1; r = a"), ("a *= b", "a *= b; r = a"), ("a -= 1", "a -= 1; r = a"),
    ("a /= 2", "a /= 2; r = a"), ("a **= 2", "a **= 2; r = a"),
    ("a @ b.T", "r = a @ nn.NdArray.from_numpy_array(np.ones((3, 2)))"),
    ("a[0]", "r = a[0]"), ("a[:, 1]", "r = a[:, 1]"), ("a setitem", "a[0, 1] = 7; r = a.data"),
    ("a == b", "r = a == b"),
]


def _summary(r, nn):
    if isinstance(r, nn.Variable):
        return {"kind": "Variable", "shape": list(r.shape), "need_grad": bool(r.need_grad),
                "value": _values(r.d) if r.shape and 0 not in r.shape else None}
    if isinstance(r, nn.NdArray):
        return {"kind": "NdArray", "shape": list(r.shape), "dtype": np.dtype(r.dtype).name,
                "value": _values(r.data) if r.shape and 0 not in r.shape else None}
    if isinstance(r, np.ndarray):
        return {"kind": "ndarray", "shape": list(r.shape), "dtype": r.dtype.name,
                "value": _values(r)}
    if isinstance(r, (tuple, list)):
        return {"kind": type(r).__name__, "items": [_summary(x, nn) for x in r]}
    if isinstance(r, (bool, np.bool_)):
        return {"kind": "bool", "value": bool(r)}
    if isinstance(r, (int, float, np.integer, np.floating)):
        return {"kind": "number", "value": float(r)}
    if r is None or isinstance(r, str):
        return {"kind": type(r).__name__, "value": r}
    if isinstance(r, type):
        return {"kind": "type", "value": np.dtype(r).name}
    if isinstance(r, np.dtype):
        return {"kind": "type", "value": r.name}
    return {"kind": "other"}


def _values(x):
    x = np.asarray(x)
    return np.asarray(x, dtype=np.float64).round(5).tolist() if x.dtype != bool else x.tolist()


def run_array_case(m, case):
    nn, F = m["nn"], m["F"]
    nn.clear_parameters()
    v = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32).reshape(2, 3), need_grad=True)
    w = nn.Variable.from_numpy_array(np.arange(6, dtype=np.float32).reshape(2, 3)[::-1] + 1,
                                     need_grad=True)
    a = nn.NdArray.from_numpy_array(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = nn.NdArray.from_numpy_array(np.arange(6, dtype=np.float32).reshape(2, 3)[::-1] + 1)
    env = dict(v=v, w=w, a=a, b=b, nn=nn, F=F, np=np)
    try:
        exec(case[1], env)
        return _summary(env["r"], nn)
    except Exception as e:
        return error_record(e)


# ---------------------------------------------------------------- data iterators
# (label, constructor code with tmp bound to a folder holding data.csv, batches to draw);
# shuffle is off throughout, so the batch sequences are nnabla's order (``position`` is not
# recorded: nnabla's runs one batch ahead, as its iterator prefetches in a thread).
CSV = "x__0,x__1,y\n" + "".join("{},{},{}\n".format(i, i * 10, i % 3) for i in range(7))

ITER_CASES = [
    ("simple 10 by 3", "_simple(m, 10, 3)", 9),
    ("simple 10 by 5", "_simple(m, 10, 5)", 5),
    ("simple 4 by 6", "_simple(m, 4, 6)", 3),
    ("simple 10 by 3 no memory cache", "_simple(m, 10, 3, with_memory_cache=False)", 5),
    ("simple 10 by 3 file cache", "_simple(m, 10, 3, with_file_cache=True, cache_dir=tmp)", 5),
    ("simple slice 0 of 2", "_simple(m, 10, 2).slice(rng=None, num_of_slices=2, slice_pos=0)", 6),
    ("simple slice 1 of 3", "_simple(m, 10, 2).slice(rng=None, num_of_slices=3, slice_pos=1)", 4),
    ("csv by 3", "m['DI'].data_iterator_csv_dataset(tmp + '/data.csv', 3, shuffle=False)", 6),
    ("csv by 7", "m['DI'].data_iterator_csv_dataset(tmp + '/data.csv', 7, shuffle=False)", 2),
    ("csv by 3 normalize", "m['DI'].data_iterator_csv_dataset(tmp + '/data.csv', 3, shuffle=False, "
                           "normalize=True)", 3),
    ("csv by 3 cached", "m['DI'].data_iterator_csv_dataset(tmp + '/data.csv', 3, shuffle=False, "
                        "cache_dir=tmp + '/cache', with_memory_cache=False)", 5),
    ("cache by 2", "_cached(m, tmp, 2)", 6),
    ("csv cache folder missing", "m['DI'].data_iterator_csv_dataset(tmp + '/data.csv', 3, "
                                 "shuffle=False, cache_dir=tmp + '/missing')", 2),
    # Not a case: a slice of a csv iterator (`.slice(rng=None, num_of_slices=2, slice_pos=1)` of
    # a batch-2 csv iterator) gave nnabla's sequence in all but one of ~20 runs here; the cause
    # (timing around the file cache it shares with its parent?) is not found yet.
]


def _simple(m, n, batch_size, **kw):
    def load(i):
        return np.array([i, i * 2], dtype=np.float32), np.array([i % 3], dtype=np.int32)
    return m["DI"].data_iterator_simple(load, n, batch_size, shuffle=False, **kw)


def _cached(m, tmp, batch_size):
    with m["DI"].data_iterator_csv_dataset(tmp + "/data.csv", 1, shuffle=False,
                                           cache_dir=tmp + "/c2", with_memory_cache=False):
        pass
    return m["DI"].data_iterator_cache(tmp + "/c2", batch_size, shuffle=False)


def run_iter_case(m, case, tmp):
    label, code, draws = case
    with open(tmp + "/data.csv", "w") as f:
        f.write(CSV)
    for folder in ("cache", "c2"):      # nnabla writes its cache into an existing folder
        os.makedirs(os.path.join(tmp, folder))
    try:
        it = eval(code, dict(m=m, tmp=tmp, _simple=_simple, _cached=_cached))
        out = {"size": int(it.size), "batch_size": int(it.batch_size),
               "variables": list(it.variables), "batches": []}
        for _ in range(draws):
            batch = it.next()
            out["batches"].append({"epoch": int(it.epoch),
                                   "data": [{"dtype": np.asarray(b).dtype.name,
                                             "value": np.asarray(b, dtype=np.float64).round(5).tolist()}
                                            for b in batch]})
        it.close()
    except Exception as e:
        return error_record(e)
    return out


# ---------------------------------------------------------------- .nnp round trips
# Networks nnabla_jit saves (utils.save) and nnabla's NnpLoader loads; (label, input shape, code
# building y from x with nn, F, PF, I bound).
NNP_CASES = [
    ("mlp", (2, 6), "y = F.softmax(PF.affine(F.relu(PF.affine(x, 5, name='l1')), 3, name='l2'))"),
    ("cnn", (2, 3, 8, 8),
     "h = PF.convolution(x, 4, (3, 3), pad=(1, 1), name='c1')\n"
     "h = PF.batch_normalization(h, batch_stat=False, name='bn1')\n"
     "h = F.max_pooling(F.relu(h), (2, 2))\n"
     "h = F.average_pooling(PF.convolution(h, 4, (3, 3), stride=(2, 2), name='c2'), (2, 2))\n"
     "y = PF.affine(h, 3, name='fc')"),
    ("deconv", (1, 2, 4, 4),
     "y = F.tanh(PF.deconvolution(x, 3, (4, 4), stride=(2, 2), pad=(1, 1), name='d1'))"),
    ("elementwise", (2, 4),
     "a = F.sigmoid(x) * 2 + 1\n"
     "b = F.concatenate(F.exp(x * 0.1), F.reshape(a, (2, 2, 2)).reshape((2, 4)), axis=1)\n"
     "y = F.sum(b ** 2, axis=1, keepdims=True) / F.mean(F.abs(x) + 1, keepdims=True)"),
    # nnabla's binary ops need inputs of one ndim; nnabla_jit's broadcast a 0-dim one, so this
    # .nnp holds a Div2 that nnabla refuses (README differences)
    ("ndim broadcast", (2, 4), "y = F.sum(x, axis=1, keepdims=True) / F.mean(F.abs(x) + 1)"),
    ("layers", (2, 3, 4),
     "h = PF.layer_normalization(x, name='ln')\n"
     "h = F.transpose(h, (0, 2, 1))\n"
     "y = F.slice(F.leaky_relu(PF.affine(h, 5, base_axis=2, name='a')), (0, 1, 0), (2, 4, 5))"),
]


def nnp_input(shape):
    return np.random.RandomState(1).randn(*shape).astype(np.float32)


def save_nnp_case(m, case, path):
    """Build the network with deterministic parameters, save it, return its outputs."""
    nn, F, PF, I = m["nn"], m["F"], m["PF"], m["I"]
    label, shape, code = case
    nn.clear_parameters()
    x = nn.Variable(shape)
    env = dict(x=x, nn=nn, F=F, PF=PF, I=I, np=np)
    exec(code, env)
    y = env["y"]
    rs = np.random.RandomState(0)
    for k, p in sorted(nn.get_parameters(grad_only=False).items()):
        p.d = rs.uniform(0.5, 1.5, p.shape) if k.endswith(("/var", "/gamma")) else rs.randn(*p.shape) * 0.5
    x.d = nnp_input(shape)
    y.forward()
    m["save"].save(path, {
        "networks": [{"name": "net", "batch_size": shape[0], "outputs": {"y": y}, "names": {"x": x}}],
        "executors": [{"name": "runtime", "network": "net", "data": ["x"], "output": ["y"]}]})
    out = np.asarray(y.d, dtype=np.float64)
    nn.clear_parameters()
    return out


def load_nnp_case(m, case, path):
    """Load with NnpLoader (nnabla's or ours), run the input, return the output."""
    nn = m["nn"]
    nn.clear_parameters()
    net = m["nnp_graph"].NnpLoader(path).get_network("net", batch_size=case[1][0])
    x = list(net.inputs.values())[0]
    y = list(net.outputs.values())[0]
    x.d = nnp_input(case[1])
    y.forward()
    nn.clear_parameters()
    return np.asarray(y.d, dtype=np.float64)
