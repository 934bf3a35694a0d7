"""Replay nnabla 1.39's recorded results on nnabla_jit: every case of every function of the
table (tests/fixtures/differential, recorded by ``tests/differential/generate.py`` under the
oracle; the oracle is never run here). A difference fails unless ``tests/differential/known.py``
lists it with its reason; a listed difference that no longer shows fails too, and the README's
table of them is generated from that list (``python -m tests.differential.readme``)."""
import os

import pytest

import nnabla_jit as nn
import nnabla_jit.function_bases as FB
import nnabla_jit.functions as F
from tests.differential import cases, known, methods, readme, replay, store

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


def test_variable_and_ndarray_match_nnabla():
    """Members (name, kind, parameters) and the recorded calls of methods and operators."""
    found, _ = methods.replay(nn, F)
    unexplained = ["{} | {} | {} | {}".format(*f) for f in found if known.lookup_method(*f) is None]
    used = {known.lookup_method(*f) for f in found}
    stale = [e.what for k, e in enumerate(known.KNOWN_METHODS) if k not in used]
    assert not unexplained, "differences not in known.KNOWN_METHODS:\n" + "\n".join(unexplained)
    assert not stale, "listed differences that no longer show (remove them): {}".format(stale)
    text = open(README, encoding="utf-8").read()
    assert readme.methods_line(*readme.methods_figures(), len({(f[0], f[1]) for f in found})) in text


def test_readme_table_is_the_known_list():
    text = open(README, encoding="utf-8").read()
    assert readme.table(known.KNOWN) in text and readme.table(known.KNOWN_METHODS, "class") in text, (
        "README's differential tables are not tests/differential/known.py's lists: run "
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
