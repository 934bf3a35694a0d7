"""Replay nnabla 1.39's recorded results on nnabla_jit: every case of every function of the
table (tests/fixtures/differential, recorded by ``tests/differential/generate.py`` under the
oracle; the oracle is never run here). A difference fails unless ``tests/differential/known.py``
lists it with its reason; a listed difference that no longer shows fails too, and the README's
table of them is generated from that list (``python -m tests.differential.readme``)."""
import os

import pytest

import nnabla_jit as nn
import nnabla_jit.function_bases as FB
from tests.differential import cases, known, readme, replay, store

OPS = store.ops()
README = os.path.join(os.path.dirname(__file__), "..", "README.md")
_SEEN = {}     # op -> {known entry index: cases}, filled by test_matches_nnabla


def test_every_function_of_the_table_has_fixtures():
    assert OPS == sorted(r.snake for r in cases.table())


@pytest.mark.parametrize("op", OPS)
def test_matches_nnabla(op):
    found, _ = replay.replay(nn, FB, op)
    unexplained, seen = [], {}
    for label, kind, detail in found:
        k = known.lookup(op, label, kind, detail)
        if k is None:
            unexplained.append("{} | {} | {}".format(label, kind, detail))
        else:
            seen.setdefault(k, set()).add(label)
    stale = [known.KNOWN[k].what for k in known.entries_for(op) if k not in seen]
    _SEEN[op] = seen
    assert not unexplained, "{}: {} differences from nnabla not in tests/differential/known.py:\n{}".format(
        op, len(unexplained), "\n".join(unexplained[:40]))
    assert not stale, "{}: listed differences that no longer show (remove them): {}".format(op, stale)


def test_readme_table_is_the_known_list():
    text = open(README, encoding="utf-8").read()
    assert readme.table(known.KNOWN) in text, (
        "README's differential table is not tests/differential/known.py's list: run "
        "python -m tests.differential.readme")


def test_readme_figures():
    """Functions and cases from the fixtures; the cases that differ once every function has
    been replayed in this session (the test above, for all functions)."""
    text = open(README, encoding="utf-8").read()
    assert readme.figures_line(*readme.fixture_figures()) in text
    if len(_SEEN) < len(OPS):
        pytest.skip("only {} of {} functions replayed in this session".format(len(_SEEN), len(OPS)))
    counts = readme.count(_SEEN)
    assert readme.counts_line(counts) in text, "run python -m tests.differential.readme"
