"""Record nnabla 1.39's results for every differential case (run under the oracle):

    ../shared/tools/nnabla-oracle python tests/differential/generate.py [snake_name ...]
    ../shared/tools/nnabla-oracle python tests/differential/generate.py --methods

writes ``tests/fixtures/differential/<snake_name>.npz`` for the functions named (all 228 when
none is); ``--methods`` writes ``tests/fixtures/differential_methods.npz``, the members of
Variable and NdArray and what their methods and operators do (``methods.py``). Cases run in a forked child per function, so a case that kills nnabla (a segfault, an
abort) or hangs is recorded as such (``crash``) and the next case runs in a fresh child.
"""
import os
import pickle
import select
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from tests.differential import cases, methods, runner, store  # noqa: E402

TIMEOUT_S = 60


def nograd_positions(case):
    flat = []
    for s in case.slots:
        if isinstance(s, list):
            flat.extend(s)
        elif s is not None:
            flat.append(s)
    return [i for i, (_, kind, _) in enumerate(flat) if kind.split(":")[0] in cases.INT_KINDS]


def execute(nn, FB, op, case, progress=None):
    return runner.run_case(nn, FB, op, case.arrays(op), case.args, nograd_positions(case),
                           op in cases.RANDOM, op in cases.AUTO_FORWARD, progress)


def _child(run_one, todo, fd):
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    with os.fdopen(fd, "wb") as out:
        def send(j, res, final):
            data = pickle.dumps((j, res, final))
            out.write(struct.pack("<Q", len(data)) + data)
            out.flush()

        for j, case in todo:
            try:
                res = run_one(case, lambda partial: send(j, partial, False))
            except BaseException as e:  # noqa: BLE001 (the runner's own failure, recorded)
                res = {"error": runner.error_names(e), "stage": "runner"}
            send(j, res, True)
    os._exit(0)


def _read_results(fd, pid, results, partial):
    """Read (index, result, final) messages until EOF or a case outlives TIMEOUT_S; return why
    it ended. A case's last partial result (forward done, a backward variant pending) goes to
    ``partial``."""
    buf, deadline = b"", time.time() + TIMEOUT_S
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.time()))
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return "timeout"
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return "eof"
        buf += chunk
        while len(buf) >= 8:
            n = struct.unpack("<Q", buf[:8])[0]
            if len(buf) < 8 + n:
                break
            j, res, final = pickle.loads(buf[8:8 + n])
            if final:
                results[j] = res
            else:
                partial[j] = res
            buf = buf[8 + n:]
            deadline = time.time() + TIMEOUT_S


def run_isolated(run_one, op_cases):
    """``run_one(case, progress)`` for every case, in forked children (see the module doc)."""
    results, partial = [None] * len(op_cases), {}
    while True:
        todo = [(j, c) for j, c in enumerate(op_cases) if results[j] is None]
        if not todo:
            return results
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(run_one, todo, w)
        os.close(w)
        why = _read_results(r, pid, results, partial)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        nxt = next((j for j, _ in todo if results[j] is None), None)
        if nxt is not None:
            if why == "timeout":
                crash = "timeout"
            elif os.WIFSIGNALED(status):
                crash = signal.Signals(os.WTERMSIG(status)).name
            else:
                crash = "exit {}".format(os.WEXITSTATUS(status))
            res = partial.get(nxt)
            if res is None:             # died building or in forward
                results[nxt] = {"crash": crash}
            else:                       # died in a backward variant: keep what came before
                res["backward"].append({"label": res.pop("pending"), "error": None,
                                        "crash": crash, "grads": {}})
                results[nxt] = res


def record(op, case, result):
    return {"label": case.label, "args": case.args, "slots": case.slots, "inputs": case.arrays(op),
            "nograd": nograd_positions(case), "random": op in cases.RANDOM,
            "auto_forward": op in cases.AUTO_FORWARD,
            "result": store.compact_grads(result)}


def main(names):
    import nnabla as nn
    import nnabla.function_bases as FB
    from tqdm import tqdm
    rows = [r for r in cases.table() if not names or r.snake in names]
    missing = set(names) - {r.snake for r in rows}
    if missing:
        sys.exit("generate.py: not in functions.tsv: {}".format(", ".join(sorted(missing))))
    total = 0
    for row in tqdm(rows, desc="functions", unit="fn"):
        op_cases = cases.cases_for(row)
        results = run_isolated(lambda case, progress: execute(nn, FB, row.snake, case, progress), op_cases)
        store.save(row.snake, {"function": row.name, "snake_name": row.snake, "seed": cases.SEED,
                               "nnabla": nn.__version__,
                               "cases": [record(row.snake, c, r) for c, r in zip(op_cases, results)]})
        total += len(op_cases)
    print("{} functions, {} cases".format(len(rows), total))


def main_methods():
    import nnabla as nn
    import nnabla.functions as F
    results = run_isolated(lambda snippet, progress: methods.run_snippet(nn, F, snippet[1]), methods.SNIPPETS)
    store.save("methods", {"nnabla": nn.__version__, "members": methods.members(nn),
                           "snippets": [{"label": label, "code": code, "result": result}
                                        for (label, code), result in zip(methods.SNIPPETS, results)]},
               path=store.METHODS)
    print("{} snippets".format(len(results)))


if __name__ == "__main__":
    main_methods() if sys.argv[1:] == ["--methods"] else main(sys.argv[1:])
