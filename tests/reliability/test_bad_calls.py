"""Hypothesis-generated shapes and arguments for every ``F.*``: a call either builds a node or
raises a ValueError/TypeError whose message names the function, never another exception (issue
9, item 5).

Only graphs are built (setup-level checks): no kernel runs, so a bug cannot crash the test
process.
"""
import math

import pytest
from hypothesis import given, settings, strategies as st

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit.ops.registry import REGISTRY, TABLE

FUNCTIONS = [spec for name, spec in TABLE.items()
             if name in REGISTRY and hasattr(F, spec.snake_name)
             and not any(a.type.strip() == "Communicator" for a in spec.args)]

dims = st.lists(st.integers(0, 4), max_size=4).map(tuple)
ints = st.integers(-3, 5)
floats = st.sampled_from([-1.0, 0.0, 0.5, 2.0, math.nan, math.inf, -math.inf])


def argument_values(arg):
    kind = arg.type.strip()
    by_type = {
        "bool": st.booleans(),
        "int64": ints,
        "float": floats,
        "double": floats,
        "Shape": st.lists(ints, max_size=4).map(tuple),
        "repeated int64": st.lists(ints, max_size=4).map(tuple),
        "repeated float": st.lists(floats, max_size=4).map(tuple),
        "string": st.just("bogus"),
    }.get(kind)
    if by_type is None:
        return None
    if arg.choices:
        return st.one_of(st.sampled_from(arg.choices), by_type)
    return by_type


@st.composite
def calls(draw, spec):
    """(positional inputs, keyword inputs and arguments) for one call of ``spec``."""
    common = draw(st.none() | st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple))
    positional, keywords = [], {}
    for i in spec.inputs:
        if i.optional and draw(st.booleans()):
            continue
        for _ in range(draw(st.integers(1, 3)) if i.variadic else 1):
            v = nn.Variable(common if common is not None and draw(st.booleans()) else draw(dims))
            if i.variadic:
                positional.append(v)
            else:
                keywords[i.name] = v
    for arg in spec.args:
        values = argument_values(arg)
        if values is not None and (arg.required or draw(st.booleans())):
            keywords[arg.name] = draw(values)
    return positional, keywords


def names_the_function(error, spec):
    text = str(error).lower()
    return spec.name.lower() in text or spec.snake_name.lower() in text


@pytest.mark.parametrize("spec", FUNCTIONS, ids=lambda s: s.name)
@settings(max_examples=25, deadline=None, derandomize=True)
@given(data=st.data())
def test_any_call_builds_or_names_the_function(spec, data):
    positional, keywords = data.draw(calls(spec))
    try:
        outs = getattr(F, spec.snake_name)(*positional, **keywords)
    except (ValueError, TypeError) as e:
        assert names_the_function(e, spec), "{}: message does not name it: {}".format(spec.name, e)
        return
    for v in outs if isinstance(outs, (tuple, list)) else (outs,):
        assert isinstance(v, nn.Variable)
        assert all(d >= 0 for d in v.shape)


def test_every_function_is_covered():
    assert len(FUNCTIONS) > 200
