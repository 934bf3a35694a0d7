"""Record nnabla 1.39's answers for the differential surface tests: PF argument forms (pf),
solver hyper-parameter forms and helpers (solvers), state files both ways (state_files),
Variable/NdArray methods (arrays), .nnp files saved by nnabla_jit and loaded by nnabla (nnp),
data iterators (iterators). From the repository root:

    PROJECT_PYTHON=$(which python) /work/shared/tools/nnabla-oracle python \
        tests/differential/gen_surface.py [PART ...]

(PROJECT_PYTHON: the interpreter with nnabla_jit's dependencies; the state_files and nnp parts
run it to write nnabla_jit's files that nnabla then reads.)

Writes ``tests/fixtures/differential/surface_<part>.json``, replayed without the oracle by
``tests/differential/test_surface.py``."""
import json
import os

import numpy as np
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
    import nnabla.utils.data_iterator as DI
    return dict(nn=nn, F=F, PF=PF, I=I, S=S, DI=DI)


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


def gen_solvers(m):
    recs = {"{} | {}".format(n, f): cases.run_solver_case(m, n, f)
            for n in cases.SOLVERS for f in cases.LR_FORMS}
    recs.update({"{} | ops".format(n): cases.run_solver_ops_case(m, n) for n in cases.SOLVERS})
    write("solvers", {"cases": recs})


def gen_state_files(m):
    """(Run with PROJECT_PYTHON set to the interpreter that has nnabla_jit's dependencies.)
    nnabla's state files (kept as fixtures, small), and what nnabla reads from nnabla_jit's:
    the project's interpreter writes them (subprocess, nnabla_jit), nnabla loads them here."""
    import subprocess
    import tempfile
    folder = os.path.join(OUT, "solver_states")
    os.makedirs(folder, exist_ok=True)
    recs = {}
    for name in cases.STATE_SOLVERS:
        solver = cases.trained_solver(m, name)
        for ext in ("h5", "protobuf"):
            solver.save_states(os.path.join(folder, "{}.{}".format(name, ext)))
        recs[name] = cases._states_record(solver)
    with tempfile.TemporaryDirectory() as tmp:
        code = ("import sys; sys.path.insert(0, {here!r}); import surface_cases as c\n"
                "import nnabla_jit as nn, nnabla_jit.solvers as S\n"
                "for n in c.STATE_SOLVERS:\n"
                "    s = c.trained_solver(dict(nn=nn, S=S), n)\n"
                "    [s.save_states({tmp!r} + '/' + n + '.' + e) for e in ('h5', 'protobuf')]\n")
        code = code.format(here=HERE, tmp=tmp)
        root = os.path.dirname(os.path.dirname(HERE))
        env = dict(os.environ, PYTHONPATH=root)
        env.pop("VIRTUAL_ENV", None)
        subprocess.run([os.environ.get("PROJECT_PYTHON", "python3"), "-c",
                        code],
                       check=True, env=env, cwd=root)
        read = {"{} | {}".format(n, e): cases.load_states_record(m, n, os.path.join(tmp, n + "." + e))
                for n in cases.STATE_SOLVERS for e in ("h5", "protobuf")}
    write("solver_states", {"cases": {"saved_by_nnabla": recs, "nnabla_read_from_nnabla_jit": read}})


def gen_arrays(m):
    import nnabla as nn
    recs = {c[0]: cases.run_array_case(m, c) for c in cases.ARRAY_CASES}
    members = {cls.__name__: sorted(n for n in dir(cls) if not n.startswith("_"))
               for cls in (nn.Variable, nn.NdArray)}
    write("arrays", {"cases": recs, "members": members})


def gen_iterators(m):
    import tempfile
    recs = {}
    for case in cases.ITER_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            recs[case[0]] = cases.run_iter_case(m, case, tmp)
    write("iterators", {"cases": recs})


def gen_nnp(m):
    """nnabla_jit saves each network (project interpreter, subprocess; set PROJECT_PYTHON);
    nnabla's NnpLoader loads it here and its outputs are recorded."""
    import subprocess
    import tempfile
    root = os.path.dirname(os.path.dirname(HERE))
    recs = {}
    with tempfile.TemporaryDirectory() as tmp:
        code = ("import sys; sys.path.insert(0, {here!r}); import surface_cases as c\n"
                "import numpy as np, nnabla_jit as nn, nnabla_jit.functions as F\n"
                "import nnabla_jit.parametric_functions as PF, nnabla_jit.initializer as I\n"
                "import nnabla_jit.utils.save as save\n"
                "m = dict(nn=nn, F=F, PF=PF, I=I, save=save)\n"
                "for case in c.NNP_CASES:\n"
                "    np.save({tmp!r} + '/' + case[0] + '.npy', "
                "c.save_nnp_case(m, case, {tmp!r} + '/' + case[0] + '.nnp'))\n").format(
                    here=HERE, tmp=tmp)
        env = dict(os.environ, PYTHONPATH=root)
        subprocess.run([os.environ.get("PROJECT_PYTHON", "python3"), "-c", code], check=True,
                       env=env, cwd=root)
        import nnabla.utils.nnp_graph as nnp_graph
        mm = dict(m, nnp_graph=nnp_graph)
        for case in cases.NNP_CASES:
            path = os.path.join(tmp, case[0] + ".nnp")
            try:
                out = cases.load_nnp_case(mm, case, path)
                recs[case[0]] = {"shape": list(out.shape), "value": out.round(6).tolist(),
                                 "ours_at_save": np.load(os.path.join(tmp, case[0] + ".npy"))
                                 .round(6).tolist()}
            except Exception as e:
                recs[case[0]] = cases.error_record(e)
    write("nnp", {"cases": recs})


PARTS = {"nnp": gen_nnp, "iterators": gen_iterators, "arrays": gen_arrays, "pf": gen_pf, "solvers": gen_solvers, "state_files": gen_state_files}

if __name__ == "__main__":
    m = modules()
    for part in (sys.argv[1:] or PARTS):
        PARTS[part](m)
