"""nnabla 1.39's names, with their kinds, exist under nnabla_jit's nnabla alias: every public
name of its modules and the non-public names nnabla's modules and nnabla-examples import from
each other. Recorded by ``gen_surface_names.py`` under the nnabla oracle; names nnabla_jit does
not provide are in the README's "Not provided" table with a reason."""
import json
import os
import subprocess
import sys

import pytest

from tests.test_public_surface import _covered, _not_provided

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(os.path.dirname(HERE), "fixtures", "differential", "surface_names.json")
RECORD = json.load(open(FIXTURE, encoding="utf-8"))

# Run once, in a child with the alias installed, so this process's modules stay nnabla_jit's.
PROBE = r"""
import importlib, json, sys
sys.path.insert(0, {root!r})
import nnabla_jit; nnabla_jit.install_as_nnabla()
sys.path.insert(0, {here!r})
from gen_surface_names import kind
wanted = json.load(open({fixture!r}))
out = {{}}
for part in ("public", "private"):
    for module, names in wanted[part].items():
        try:
            mod = importlib.import_module(module)
        except Exception as e:
            out.setdefault(part, {{}})[module] = "import failed: " + repr(e)
            continue
        out.setdefault(part, {{}})[module] = {{n: kind(getattr(mod, n)) if hasattr(mod, n) else None
                                              for n in names}}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def seen():
    code = PROBE.format(root=ROOT, here=HERE, fixture=FIXTURE)
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _problems(part, seen):
    entries = _not_provided()
    problems = []
    for module, names in sorted(RECORD[part].items()):
        got = seen[part][module]
        if isinstance(got, str):
            if not _covered(module, entries):
                problems.append("{}: {}".format(module, got))
            continue
        for name, want in sorted(names.items()):
            if _covered(module + "." + name, entries):
                continue
            if got[name] is None:
                problems.append("{}.{} missing".format(module, name))
            elif got[name] != want and not (want == "function" and got[name] == "class"):
                # a class where nnabla has a function is called the same way; the reverse is not
                problems.append("{}.{} is a {} (nnabla: {})".format(module, name, got[name], want))
    return problems


@pytest.mark.parametrize("part", ["public", "private"])
def test_names_exist_with_nnabla_kind_under_the_alias(part, seen):
    problems = _problems(part, seen)
    assert not problems, "\n".join(problems)


def test_record_counts():
    assert sum(len(v) for v in RECORD["public"].values()) > 2000
    assert sum(len(v) for v in RECORD["private"].values()) >= 20
