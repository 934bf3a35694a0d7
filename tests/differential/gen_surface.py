"""Record nnabla 1.39's answers for the differential surface tests (PF argument forms, ...).

    /work/shared/tools/nnabla-oracle python tests/differential/gen_surface.py

Writes ``tests/fixtures/differential/surface_<part>.json``, replayed without the oracle by
``tests/differential/test_surface.py``."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "fixtures", "differential")
sys.path.insert(0, HERE)
import surface_cases as cases  # noqa: E402


def modules():
    import nnabla as nn
    import nnabla.functions as F
    import nnabla.initializer as I
    import nnabla.parametric_functions as PF
    import nnabla.solvers as S
    return dict(nn=nn, F=F, PF=PF, I=I, S=S)


def write(part, data):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "surface_{}.json".format(part))
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(part, len(data["cases"]), "cases")


def gen_pf(m):
    recs = {}
    for case in cases.PF_CASES:
        for scope in cases.SCOPES:
            recs["{} | {}".format(case[0], scope)] = cases.run_pf_case(m, case, scope)
    write("pf", {"cases": recs})


PARTS = {"pf": gen_pf}

if __name__ == "__main__":
    m = modules()
    for part in (sys.argv[1:] or PARTS):
        PARTS[part](m)
