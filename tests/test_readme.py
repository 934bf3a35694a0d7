"""The README's supported-ops table is generated from the registry and kept current."""
import os

from nnabla_jit.utils import inspection

README = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")


def test_supported_ops_table_is_current():
    assert inspection.readme_section(README) == inspection.registry_table(markdown=True).strip(), \
        "README.md is stale: run python -m nnabla_jit.utils.inspection --readme README.md"


def test_every_table_function_is_registered():
    rows = inspection.op_status()
    missing = [r["name"] for r in rows if r["category"] != "internal" and not r["forward"]]
    assert missing == []
