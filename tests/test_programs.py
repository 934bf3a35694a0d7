"""Real nnabla programs, unchanged, on nnabla_jit: a few fast programs of nnabla-examples run
through ``python -m nnabla_jit.as_nnabla`` on synthetic datasets and their loss series match
the series nnabla 1.39 gave for the same program, data and seeds (recorded with
``python benchmarks/programs/runner.py --record-fixtures NAME``; nnabla's random draws, if any,
are replayed). The whole set, against the live oracle, is ``benchmarks/programs/runner.py``.

The programs' sources are not part of this project: they are looked for in
``$NNABLA_EXAMPLES`` or ``../shared/nnabla-examples``, and the test is skipped without them.
"""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "programs"))

import catalog  # noqa: E402
import runner  # noqa: E402

CI_PROGRAMS = ["svd-mnist", "word2vec"]   # MAML, also recorded, took 99 s more (load 11-19)


@pytest.mark.slow
@pytest.mark.parametrize("name", CI_PROGRAMS)
def test_program_gives_nnabla_losses(name, tmp_path):
    corpus = runner.find_corpus()
    if corpus is None:
        pytest.skip("nnabla-examples sources not found (set NNABLA_EXAMPLES)")
    entry = catalog.select([name])[0]
    with open(os.path.join(runner.FIXTURES, name + ".json")) as f:
        recorded = json.load(f)
    assert recorded["program"] == entry.path and recorded["args"] == entry.args, \
        "the fixture was recorded with other arguments: record it again"
    draws = os.path.join(runner.FIXTURES, name + ".draws.npz")
    jit = runner.run_side(entry, "jit", str(tmp_path), corpus, str(tmp_path / "run"),
                          draws=draws if os.path.exists(draws) else None, timeout=900)
    assert jit["rc"] == 0, jit["tail"]
    nnabla_series = {n: [[i, v, None] for i, v in s] for n, s in recorded["series"].items()}
    worst, first, count, problem = runner.agreement(entry, nnabla_series, jit["series"])
    assert problem is None, problem
    assert count > 0
    assert worst <= entry.tol, "largest relative difference {:.3g} (tolerance {:.3g})".format(worst, entry.tol)
