"""Replay nnabla 1.39's recorded answers (``gen_surface.py`` under the nnabla oracle) on
nnabla_jit: PF argument forms, ... The same case runners (``surface_cases.py``) made them."""
import json
import os

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.initializer as I
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S
import nnabla_jit.utils.data_iterator as DI

from . import surface_cases as cases

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                        "differential")
M = dict(nn=nn, F=F, PF=PF, I=I, S=S, DI=DI)


def _record(part):
    return json.load(open(os.path.join(FIXTURES, "surface_{}.json".format(part)),
                          encoding="utf-8"))["cases"]


PF_RECORD = _record("pf")
# Known differences (README "Differences from nnabla": "Argument forms"): nnabla_jit takes a single
# int where nnabla's repeated-int arguments need a sequence (nnabla: TypeError), so where the op
# needs more entries its error is OpValueError; a bad w_init shape is a ValueError here, an
# assert in nnabla; PF.batch_normalization takes an int axes (nnabla: TypeError).
PF_KNOWN = {"conv int stride pad dilation", "deconv int stride pad", "affine bad w_init shape",
            "bn axes int"}


@pytest.mark.parametrize("case", cases.PF_CASES, ids=[c[0] for c in cases.PF_CASES])
@pytest.mark.parametrize("scope", cases.SCOPES)
def test_pf_argument_forms(case, scope):
    want = PF_RECORD["{} | {}".format(case[0], scope)]
    got = cases.run_pf_case(M, case, scope)
    if case[0] in PF_KNOWN:
        assert not cases.same(want, got), "{} now matches nnabla: drop it from PF_KNOWN".format(case[0])
        return
    assert cases.same(want, got), "nnabla: {}\nnnabla_jit: {}".format(want, got)


SOLVER_RECORD = _record("solvers")
SOLVER_CASES = [(n, f) for n in cases.SOLVERS for f in cases.LR_FORMS]


def _close(want, got, tol=1e-4):
    """Nested records equal, floats (lists of them) to float32 round-off over three updates."""
    if isinstance(want, dict):
        return isinstance(got, dict) and want.keys() == got.keys() and all(
            _close(want[k], got[k], tol) for k in want)
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(
            _close(a, b, tol) for a, b in zip(want, got))
    if isinstance(want, float) and isinstance(got, (int, float)):
        return abs(want - got) <= tol * max(1.0, abs(want))
    return want == got


@pytest.mark.parametrize("name,form", SOLVER_CASES, ids=["{}-{}".format(*c) for c in SOLVER_CASES])
def test_solver_hyper_parameter_forms(name, form):
    want = SOLVER_RECORD["{} | {}".format(name, form)]
    got = cases.run_solver_case(M, name, form)
    if "error" in want or "error" in got:
        assert cases.same(want, got), "nnabla: {}\nnnabla_jit: {}".format(want, got)
        return
    assert _close(want, got), "nnabla: {}\nnnabla_jit: {}".format(want, got)


@pytest.mark.parametrize("name", cases.SOLVERS)
def test_solver_gradient_helpers_and_set_states(name):
    want = SOLVER_RECORD["{} | ops".format(name)]
    got = cases.run_solver_ops_case(M, name)
    if "error" in want or "error" in got:
        assert cases.same(want, got), "nnabla: {}\nnnabla_jit: {}".format(want, got)
    assert _close({k: v for k, v in want.items() if k not in ("error", "classes")},
                  {k: v for k, v in got.items() if k not in ("error", "classes")}), (
        "nnabla: {}\nnnabla_jit: {}".format(want, got))


STATES_RECORD = _record("solver_states")
STATES_FOLDER = os.path.join(FIXTURES, "solver_states")


@pytest.mark.parametrize("ext", ["h5", "protobuf"])
@pytest.mark.parametrize("name", cases.STATE_SOLVERS)
def test_nnabla_state_files_load(name, ext):
    got = cases.load_states_record(M, name, os.path.join(STATES_FOLDER, "{}.{}".format(name, ext)))
    assert _close(STATES_RECORD["saved_by_nnabla"][name], got), got


@pytest.mark.parametrize("ext", ["h5", "protobuf"])
@pytest.mark.parametrize("name", cases.STATE_SOLVERS)
def test_nnabla_reads_our_state_files(name, ext):
    """What nnabla read from the files nnabla_jit wrote (recorded) is what nnabla_jit holds."""
    want = STATES_RECORD["nnabla_read_from_nnabla_jit"]["{} | {}".format(name, ext)]
    assert "error" not in want, want
    assert _close(want, cases._states_record(cases.trained_solver(M, name)))


@pytest.mark.parametrize("ext", ["h5", "protobuf"])
@pytest.mark.parametrize("name", cases.STATE_SOLVERS)
def test_state_files_round_trip(name, ext, tmp_path):
    path = str(tmp_path / "s.{}".format(ext))
    solver = cases.trained_solver(M, name)
    solver.save_states(path)
    assert _close(cases._states_record(solver), cases.load_states_record(M, name, path))


ARRAY_RECORD = json.load(open(os.path.join(FIXTURES, "surface_arrays.json"), encoding="utf-8"))
# Known differences (README "Differences from nnabla": "Argument forms"): nnabla raises reading
# an unallocated gradient through ``v.grad.data`` and the dtype of an empty ``NdArray()``;
# ``copy_from`` of another shape and an out-of-range ``narrow`` are ValueErrors here (nnabla:
# copies with its own shape / RuntimeError).
ARRAY_KNOWN = {"v.grad", "NdArray()", "a.copy_from shape", "a.narrow bad"}
# nnabla's C++ binding's flag, of no meaning here
MEMBERS_NOT_PROVIDED = {"EXCEPTIONS_AT_DEALLOC"}


@pytest.mark.parametrize("case", cases.ARRAY_CASES, ids=[c[0] for c in cases.ARRAY_CASES])
def test_variable_and_ndarray_methods(case):
    want = ARRAY_RECORD["cases"][case[0]]
    got = cases.run_array_case(M, case)
    if case[0] in ARRAY_KNOWN:
        assert not cases.same(want, got), "{} now matches nnabla: drop it from ARRAY_KNOWN".format(case[0])
        return
    assert cases.same(want, got), "nnabla: {}\nnnabla_jit: {}".format(want, got)


@pytest.mark.parametrize("cls", ["Variable", "NdArray"])
def test_variable_and_ndarray_members(cls):
    ours = getattr(nn, cls)
    missing = [n for n in ARRAY_RECORD["members"][cls]
               if not hasattr(ours, n) and n not in MEMBERS_NOT_PROVIDED]
    assert not missing, missing


ITER_RECORD = _record("iterators")
# nnabla_jit makes a missing cache folder (nnabla: FileNotFoundError; README differences)
ITER_KNOWN = {"csv cache folder missing"}


@pytest.mark.parametrize("case", cases.ITER_CASES, ids=[c[0] for c in cases.ITER_CASES])
def test_data_iterators(case, tmp_path):
    want = ITER_RECORD[case[0]]
    got = cases.run_iter_case(M, case, str(tmp_path))
    if case[0] in ITER_KNOWN:
        assert not cases.same(want, got), "{} now matches nnabla: drop it from ITER_KNOWN".format(case[0])
        return
    if "error" in want or "error" in got:
        assert cases.same(want, got), "nnabla: {}\nnnabla_jit: {}".format(want, got)
        return
    assert _close(want, got, 1e-6), "nnabla: {}\nnnabla_jit: {}".format(want, got)


NNP_RECORD = _record("nnp")
# an .nnp nnabla refuses: nnabla_jit's binary ops broadcast inputs of fewer dimensions
NNP_KNOWN = {"ndim broadcast"}


@pytest.mark.parametrize("case", cases.NNP_CASES, ids=[c[0] for c in cases.NNP_CASES])
def test_nnp_saved_here_loads_in_nnabla_with_the_same_outputs(case, tmp_path):
    """The recorded outputs are nnabla's NnpLoader's on the .nnp this code saved (made by
    gen_surface.py); nnabla_jit's outputs when saving, and its own loader's, must match them."""
    import nnabla_jit.utils.nnp_graph as nnp_graph
    import nnabla_jit.utils.save as save
    want = NNP_RECORD[case[0]]
    path = str(tmp_path / "net.nnp")
    ours = cases.save_nnp_case(dict(M, save=save), case, path)
    if case[0] in NNP_KNOWN:
        assert "error" in want, "{} now loads in nnabla: drop it from NNP_KNOWN".format(case[0])
        return
    assert "error" not in want, want
    np.testing.assert_allclose(ours, want["value"], rtol=1e-5, atol=2e-6)
    loaded = cases.load_nnp_case(dict(M, nnp_graph=nnp_graph), case, path)
    np.testing.assert_allclose(loaded, want["value"], rtol=1e-5, atol=2e-6)
