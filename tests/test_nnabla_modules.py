"""nnabla's smaller public modules: callback, recompute, dtypes, config, solver, testing,
context globals and the top-level array preferences."""
import logging

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
import importlib

from nnabla_jit import config, dtypes
from nnabla_jit import solver as solver_module
from nnabla_jit import solvers as S
from nnabla_jit.testing import assert_allclose, clear_called_flag_recorder


def test_global_function_hooks_see_every_function_and_can_be_removed():
    x = nn.Variable.from_numpy_array(np.ones((2, 2)), need_grad=True)
    y = F.tanh(F.exp(x) * 2)
    seen = []
    nn.set_function_pre_hook("pre", lambda f: seen.append(("pre", f.name)))
    nn.set_function_post_hook("post", lambda f: seen.append(("post", f.name)))
    try:
        y.forward()
        y.backward()
    finally:
        nn.unset_function_pre_hook("pre")
        nn.unset_function_post_hook("post")
    names = [n for k, n in seen if k == "pre"]
    assert names[:3] == ["Exp", "MulScalar", "Tanh"]       # forward order
    assert names[3:] == ["Tanh", "MulScalar", "Exp"]       # backward order
    assert len([1 for k, _ in seen if k == "post"]) == 6
    seen.clear()
    y.forward()
    assert seen == []
    with pytest.raises(KeyError, match="pre"):
        nn.unset_function_pre_hook("pre")


def test_global_hooks_run_after_the_call_hook():
    x = nn.Variable.from_numpy_array(np.ones(3))
    y = F.relu(x)
    order = []
    nn.set_function_pre_hook("g", lambda f: order.append("global"))
    try:
        y.forward(function_pre_hook=lambda f: order.append("own"))
    finally:
        nn.unset_function_pre_hook("g")
    assert order == ["own", "global"]


def test_global_solver_hooks_run_around_each_parameter_update():
    nn.clear_parameters()
    x = nn.Variable.from_numpy_array(np.ones((2, 3)))
    y = F.sum(PF.affine(x, 4, name="fc"))
    s = S.Sgd(0.1)
    s.set_parameters(nn.get_parameters())
    y.forward()
    s.zero_grad()
    y.backward()
    calls = []
    nn.set_solver_pre_hook("count", lambda: calls.append("pre"))
    nn.set_solver_post_hook("count", lambda: calls.append("post"))
    try:
        s.update()
        s.weight_decay(1e-4)
    finally:
        nn.unset_solver_pre_hook("count")
        nn.unset_solver_post_hook("count")
    assert calls == ["pre", "post"] * 4     # W and b, for update and for weight_decay
    nn.clear_parameters()


def test_recompute_scopes_and_global_flag():
    x = nn.Variable((2,))
    assert not F.relu(x).recompute
    with nn.recompute():
        a = F.relu(x)
        with nn.recompute(False):
            b = F.relu(a)
    assert a.recompute and not b.recompute

    @nn.recompute_fn()
    def block(v):
        return F.sin(v)
    assert block(x).recompute

    nn.set_global_recompute(True)
    try:
        # nn.recompute is the function, as in nnabla; the module is reached by its path
        assert importlib.import_module("nnabla_jit.recompute").get_global_recompute()
        assert F.relu(x).recompute
    finally:
        nn.set_global_recompute(False)
    assert not F.relu(x).recompute


def test_dtypes_codes_both_ways():
    assert dtypes.np_dtpye_to_int[np.float32] == 11
    assert dtypes.np_dtpye_to_int[np.int64] == 9
    assert dtypes.int_to_np_dtype[11] is np.float32
    assert dtypes.int_to_np_dtype[0] is bool
    for t, code in dtypes.np_dtpye_to_int.items():
        assert np.dtype(dtypes.int_to_np_dtype[code]) == np.dtype(t)


def test_config_reads_defaults_and_a_local_nnabla_conf(tmp_path, monkeypatch):
    assert config.nnabla_config.get("DATA_ITERATOR", "data_source_file_cache_size") == "100"
    (tmp_path / "nnabla.conf").write_text("[DATA_ITERATOR]\ndata_source_file_cache_size = 7\n")
    extra = tmp_path / "extra.conf"
    extra.write_text("[MISC]\nnnp_param_format = .protobuf\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NNABLA_CONFIG_FILE_PATH", str(extra))
    c = config.load_config()
    assert c.get("DATA_ITERATOR", "data_source_file_cache_size") == "7"
    assert c.get("MISC", "nnp_param_format") == ".protobuf"
    assert c.get("MISC", "misc_show_progress") == "True"    # default kept


def test_logger_settings_come_from_the_config():
    logger_module = importlib.import_module("nnabla_jit.logger")   # nn.logger is the Logger
    assert isinstance(logger_module.log_console_level, int)
    assert "%(message)s" in logger_module.log_console_format
    assert isinstance(nn.logger, logging.Logger)


def test_solver_module_is_the_solvers_module():
    assert solver_module.Solver is S.Solver and solver_module.Adam is S.Adam
    assert set(S.__all__) <= set(dir(solver_module))

    @S.solver_api
    def needs_context(ctx, k):
        return ctx, k
    ctx, k = needs_context(3)
    assert ctx == nn.get_current_context() and k == 3


def test_assert_allclose_has_numpy_allclose_tolerances():
    assert_allclose([1.0, np.nan], [1.0 + 5e-7, np.nan])
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        assert_allclose([1.0], [1.001])


def test_clear_called_flag_recorder_records_released_inputs():
    x = nn.Variable((1, 5), need_grad=True)
    y = F.add_scalar(F.identity(x))
    clear_called_flag_recorder.activate_clear_called_flag_recorder()
    try:
        y.forward(clear_no_need_grad=True)
        flags = clear_called_flag_recorder.get_input_clear_called_flags()
    finally:
        clear_called_flag_recorder.deactivate_clear_called_flag_recorder()
    assert [[d for d, _ in f] for f in flags] == [[False], [True]]
    assert clear_called_flag_recorder.get_input_clear_called_flags() == []


def test_context_globals_follow_the_scope():
    from nnabla_jit import context
    assert context.context_level == 0
    ctx = nn.Context(["cpu:double"])
    with nn.context_scope(ctx):
        assert context.context_level == 1 and context.current_ctx == ctx
    assert context.current_ctx == nn.get_current_context()


def test_array_preference_orders_array_classes():
    nn.prefer_cached_array(False)
    try:
        assert nn.array_classes()[-1] == "CpuCachedArray"
    finally:
        nn.prefer_cached_array(True)
    assert nn.array_classes()[0] == "CpuCachedArray"
    nn.reset_array_preference()
    assert nn.array_classes() == ["CpuArray", "CpuCachedArray", "CpuDlpackArray"]
    nn.prefer_cached_array(True)
    assert "cpu" in nn.available_contexts


def test_submodules_named_like_functions_do_not_shadow_them():
    for module in ("nnabla_jit.auto_forward", "nnabla_jit.recompute", "nnabla_jit.grad"):
        importlib.import_module(module)
    assert callable(nn.auto_forward) and callable(nn.recompute) and callable(nn.grad)
    with nn.auto_forward():
        y = F.relu(nn.Variable.from_numpy_array(np.array([-1.0, 2.0])))
    assert y.d.tolist() == [0.0, 2.0]
