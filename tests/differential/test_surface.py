"""Replay nnabla 1.39's recorded answers (``gen_surface.py`` under the nnabla oracle) on
nnabla_jit: PF argument forms, ... The same case runners (``surface_cases.py``) made them."""
import json
import os

import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.initializer as I
import nnabla_jit.parametric_functions as PF
import nnabla_jit.solvers as S

from . import surface_cases as cases

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                        "differential")
M = dict(nn=nn, F=F, PF=PF, I=I, S=S)


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
