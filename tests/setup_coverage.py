"""How much of the ops' argument checking the tests reach (a measurement, not a test).

    python -m pip install coverage      # for this measurement only
    python -m coverage run --branch --include='nnabla_jit/ops/*' -m pytest -q -p no:cacheprovider \\
        tests/reliability/test_bad_calls.py tests/reliability/test_error_messages.py tests/test_errors.py \\
        tests/ops/test_argument_checks.py tests/ops/test_argument_checks_a.py tests/ops/test_argument_checks_b.py
    python tests/setup_coverage.py      # reads .coverage

Reports, over ``nnabla_jit/ops/*.py``: the lines and branches of every op's ``setup`` method,
and every argument check -- each ``fail(...)`` call and ``raise`` statement, wherever it is --
reached or not, listing the ones no test reaches.
"""
import ast
import pathlib
import sys

import coverage

OPS = pathlib.Path(__file__).resolve().parent.parent / "nnabla_jit" / "ops"


def setup_ranges(tree):
    """(first, last) line of each method named ``setup``."""
    return [(node.lineno, node.end_lineno) for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name == "setup"]


def check_sites(tree):
    """Lines of the argument checks: ``raise`` statements and ``fail(...)`` calls."""
    sites = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise):
            sites.add(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "fail":
                sites.add(node.lineno)
    return sites


def main(data_file=".coverage"):
    cov = coverage.Coverage(data_file=data_file)
    cov.load()
    lines = [0, 0]      # covered, total: statements inside setup methods
    branches = [0, 0]   # taken, total: branch exits from lines inside setup methods
    sites = [0, 0]      # reached, total: argument checks anywhere in ops/
    unreached = []
    for path in sorted(OPS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        analysis = cov._analyze(str(path))   # coverage's per-file analysis (no public equivalent)
        missing = set(analysis.missing)
        ranges = setup_ranges(tree)
        inside = lambda n: any(a <= n <= b for a, b in ranges)
        for n in analysis.statements:
            if inside(n):
                lines[1] += 1
                lines[0] += n not in missing
        for n, (total, taken) in analysis.branch_stats().items():
            if inside(n):
                branches[1] += total
                branches[0] += taken
        for n in sorted(check_sites(tree) & set(analysis.statements)):
            sites[1] += 1
            if n in missing:
                unreached.append("{}:{}".format(path.name, n))
            else:
                sites[0] += 1
    print("setup methods: {}/{} lines ({:.1f}%), {}/{} branches ({:.1f}%)".format(
        lines[0], lines[1], 100 * lines[0] / max(lines[1], 1),
        branches[0], branches[1], 100 * branches[0] / max(branches[1], 1)))
    print("argument checks (fail/raise) reached: {}/{} ({:.1f}%)".format(
        sites[0], sites[1], 100 * sites[0] / max(sites[1], 1)))
    if unreached:
        print("not reached:", " ".join(unreached))


if __name__ == "__main__":
    main(*sys.argv[1:])
