"""F.* and PF.* carry docstrings a user can work from: what the function computes, every
argument, what it returns; the examples in them run and their stated shapes hold."""
import inspect
import re

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
import nnabla_jit.parametric_functions as PF
from nnabla_jit import function_bases, function_bases_source
from nnabla_jit.ops.registry import TABLE


def _public_functions(module, names):
    return {n: getattr(module, n) for n in names
            if not n.startswith("_") and inspect.isfunction(getattr(module, n))}


# F's own functions (not the context helpers nnabla's module also re-exports)
F_MODULES = ("function_bases", "functions", "normalization_functions", "numpy_compat_functions")
F_FUNCTIONS = _public_functions(F, [n for n in dir(F) if getattr(getattr(F, n), "__module__", "")
                                    in ["nnabla_jit." + m for m in F_MODULES]])
PF_FUNCTIONS = _public_functions(PF, [n for n in dir(PF) if n != "parametric_function_api"
                                      and getattr(getattr(PF, n), "__module__", "") == PF.__name__])


def _sections(doc):
    """{section title: its lines} of a Google-style docstring; the summary under ''."""
    sections, current = {"": []}, ""
    for line in inspect.cleandoc(doc).splitlines():
        m = re.match(r"^(Args|Returns|Example|Examples):\s*$", line)
        if m:
            current = m.group(1)
            sections[current] = []
        else:
            sections[current].append(line)
    return sections


def _arg_entries(lines):
    """{argument name: its description} of an Args section: ``name (type): text`` or
    ``name: text``, continuation lines joined, the type (which may hold parentheses and wrap)
    left out."""
    raw, name = {}, None
    for line in lines:
        m = re.match(r"^    \**(\w+)( \(|:)", line)
        if m:
            name = m.group(1)
            raw[name] = line.strip().lstrip("*")[len(name):]
        elif name is not None and line.startswith("        "):
            raw[name] += " " + line.strip()
        elif not line.strip():
            name = None
    entries = {}
    for name, rest in raw.items():
        depth, k = 0, 0
        for k, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if ch == ":" and depth == 0:
                break
        entries[name] = rest[k + 1:].strip()
    return entries


def _problems(name, fn):
    doc = fn.__doc__
    if not doc:
        return ["no docstring"]
    sections = _sections(doc)
    problems = []
    summary = " ".join(sections[""]).strip()
    # three words at least, and more than the old generated "Name (Category)."
    if len(summary.split()) < 3 or re.match(r"^\w+ \([^)]*\)\.$", summary):
        problems.append("summary {!r} is too short".format(summary))
    params = [p.name for p in inspect.signature(fn).parameters.values()]
    entries = _arg_entries(sections.get("Args", []))
    for p in params:
        text = entries.get(p, "")
        if not re.search(r"\w", text):
            problems.append("argument {} is not described".format(p))
    if not " ".join(sections.get("Returns", [])).strip():
        problems.append("no Returns section")
    return problems


@pytest.mark.parametrize("module, functions", [("F", F_FUNCTIONS), ("PF", PF_FUNCTIONS)])
def test_every_function_describes_itself_and_every_argument(module, functions):
    assert len(functions) > (200 if module == "F" else 40)
    bad = {name: p for name, p in ((n, _problems(n, fn)) for n, fn in sorted(functions.items())) if p}
    assert not bad, "\n".join("{}.{}: {}".format(module, n, "; ".join(p)) for n, p in bad.items())


def test_the_checker_finds_a_missing_argument_and_a_thin_summary():
    def thin(x, axis=0):
        """Sum.

        Args:
            x (Variable): the input array.
            axis (int):

        Returns:
            the sum.
        """
    problems = _problems("thin", thin)
    assert problems == ["summary 'Sum.' is too short", "argument axis is not described"]
    old_style = thin.__doc__.replace("Sum.", "Sum (Reduction).").replace("axis (int):", "axis (int): axis.")
    thin.__doc__ = old_style
    assert _problems("thin", thin) == ["summary 'Sum (Reduction).' is too short"]

    def good(x, *ys, axis=0, **kw):
        """Adds things together along an axis.

        Args:
            x (Variable): the first input, any shape.
            *ys (Variable, any (variadic) number): more inputs,
                broadcastable with x.
            axis (int, default 0): where
                the sum runs.
            **kw: passed on to the op.

        Returns:
            Variable: the sum.
        """
    assert _problems("good", good) == []


def test_the_table_describes_every_function_and_the_docstrings_come_from_it():
    for name, spec in TABLE.items():
        summary, per_arg, returns, example = function_bases_source.parse_description(spec)
        fn = getattr(function_bases, spec.snake_name)
        assert inspect.cleandoc(fn.__doc__).startswith(summary[:40]), name
        if example:   # so that the examples test below runs it
            assert getattr(F, spec.snake_name) is fn, "{}: F.{} is not the table's function" \
                .format(name, spec.snake_name)
    doc = inspect.getdoc(F.convolution)
    assert "nnabla's function Convolution" in doc
    assert "group (int64, default ``1``): split the channels" in doc


def test_a_description_missing_an_argument_is_one_clear_error():
    spec = TABLE["LeakyReLU"]
    saved = spec.description
    try:
        spec.description = saved.replace(" | alpha: ", " | alfa: ")
        with pytest.raises(ValueError, match=r"LeakyReLU: 'alfa' is not an argument of leaky_relu"):
            function_bases_source.parse_description(spec)
        spec.description = " | ".join(f for f in saved.split(" | ") if not f.startswith("alpha:"))
        with pytest.raises(ValueError, match=r"LeakyReLU: no description of alpha"):
            function_bases_source.parse_description(spec)
    finally:
        spec.description = saved


def _examples():
    found = []
    for module, functions in (("F", F_FUNCTIONS), ("PF", PF_FUNCTIONS)):
        for name, fn in sorted(functions.items()):
            lines = _sections(fn.__doc__ or "").get("Example", [])
            code = [line.strip()[4:] for line in lines if line.strip().startswith(">>> ")]
            if code:
                found.append(pytest.param(code, id="{}.{}".format(module, name)))
    return found


EXAMPLES = _examples()


def test_the_common_functions_have_examples():
    assert len(EXAMPLES) >= 40
    names = {p.id for p in EXAMPLES}
    for common in ("F.convolution", "F.affine", "F.relu", "F.softmax_cross_entropy", "F.sum",
                   "F.mean", "F.max_pooling", "F.batch_normalization", "F.reshape",
                   "PF.convolution", "PF.affine", "PF.batch_normalization"):
        assert common in names, common


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_runs_and_its_stated_values_hold(code):
    # An example's trailing comment "# a == b" is a claim about the result: checked here.
    namespace = {"nn": nn, "F": F, "PF": PF, "np": np}
    with nn.parameter_scope("doc_example"):
        for line in code:
            statement, _, claim = line.partition("  # ")
            exec(statement, namespace)
            if " == " in claim:
                assert eval(claim, namespace), "{}: {}".format(line, claim)
    nn.clear_parameters()
