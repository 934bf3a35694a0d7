"""Replay the recorded cases of one function on nnabla_jit and list the differences."""
import numpy as np

from . import runner, store


def replay(nn, FB, op):
    """[(label, kind, detail)] for every difference between nnabla_jit and the fixture of ``op``,
    and the number of cases replayed."""
    meta = store.load(op)
    found = []
    for case in meta["cases"]:
        expected = store.expand_grads(case["result"])
        if expected.get("crash"):
            continue
        with np.errstate(all="ignore"):
            actual = runner.run_case(nn, FB, op, case["inputs"], case["args"], case["nograd"],
                                     case["random"], case["auto_forward"])
        for kind, detail in runner.compare(actual, expected):
            found.append((case["label"], kind, detail))
    return found, len(meta["cases"])
