"""Rules the test suite keeps: every ``pytest.raises`` checks the message as well as the type
(``match=``), so a test cannot pass on an unrelated error of the same class."""
import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def raises_without_match(source):
    """Line numbers of the ``pytest.raises(...)`` calls in ``source`` that have no ``match=``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "raises" and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "pytest"
                and not any(k.arg == "match" for k in node.keywords)):
            lines.append(node.lineno)
    return sorted(lines)


def test_every_pytest_raises_checks_the_message():
    missing = ["{}:{}".format(path.relative_to(TESTS), line)
               for path in sorted(TESTS.rglob("*.py"))
               for line in raises_without_match(path.read_text(encoding="utf-8"))]
    assert missing == [], "pytest.raises without match=: " + ", ".join(missing)


def test_the_rule_finds_a_raises_without_match():
    source = ("import pytest\nwith pytest.raises(ValueError):\n    pass\n"
              "with pytest.raises(ValueError, match='x'):\n    pass\n"
              "pytest.raises(KeyError, dict().pop, 1)\n")
    assert raises_without_match(source) == [2, 6]
