"""Where a workload's training step spends its time: trace its steps (nnabla_jit.utils.profiler.
trace) once the kernels are compiled and print each kind of work's share.

    python benchmarks/profile_step.py lenet convbn            # 20 traced steps each
    python benchmarks/profile_step.py lenet --steps 50 --out /tmp/traces   # and keep the traces

Shares are of the time inside the traced calls (forward, backward, the solver's), by the kernels'
own time (an op's family: ops/<family>.py; fused elementwise regions count as elementwise);
"executor" is the Python of forward/backward between and around the kernels. Open a kept trace in
https://ui.perfetto.dev to see the steps themselves. Nothing here is asserted.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS  # noqa: E402

# what each column holds: categories of nnabla_jit.utils.trace.category
COLUMNS = [
    ("conv/GEMM", {"convolution", "convolution_variants", "affine", "blas"}),
    ("elementwise", {"elementwise", "fused elementwise", "arithmetic", "math", "activation"}),
    ("BN", {"normalization"}),
    ("pooling", {"pooling"}),
    ("loss, reductions", {"loss", "reduction"}),
    ("solver", {"solver"}),
    ("executor", {"executor"}),
]


def shares(events):
    """{column: share of the traced time} and the traced milliseconds."""
    from nnabla_jit.utils.trace import category, self_times
    spent, total = {}, 0.0
    for event, own in self_times(events):
        kind = category(event)
        column = next((name for name, kinds in COLUMNS if kind in kinds), "other")
        spent[column] = spent.get(column, 0.0) + own
        total += own
    return {k: v / total for k, v in spent.items()}, total / 1e3


def profile(name, steps, out):
    from nnabla_jit import deferred_compile
    from nnabla_jit.utils.profiler import trace
    from nnabla_jit.utils.trace import load_events, summary
    step = WORKLOADS[name][0]()
    for _ in range(5):
        step()
    deferred_compile.wait()   # the parallel kernels compiled in the background, then loaded
    for _ in range(3):
        step()
    path = None if out is None else os.path.join(out, name + ".json")
    t0 = time.perf_counter()
    with trace(path) as t:
        for _ in range(steps):
            step()
    rate = steps / (time.perf_counter() - t0)
    events = load_events(t)
    part, ms = shares(events)
    print("== {}: {} traced steps, {:.1f} steps/s while traced, {:.2f} ms/step in slices".format(
        name, steps, rate, ms / steps))
    print(summary(t, top=10))
    return part, rate


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", default=["lenet", "convbn"],
                        help="workloads (default: lenet convbn)")
    parser.add_argument("--steps", type=int, default=20, help="traced steps per workload")
    parser.add_argument("--out", help="write each workload's trace here as NAME.json")
    args = parser.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    columns = [c for c, _ in COLUMNS] + ["other"]
    rows = ["| workload | steps/s traced | " + " | ".join(columns) + " |",
            "|---|---:|" + "---:|" * len(columns)]
    for name in args.names:
        part, rate = profile(name, args.steps, args.out)
        rows.append("| {} | {:.1f} | ".format(name, rate)
                    + " | ".join("{:.0f}%".format(100 * part.get(c, 0.0)) for c in columns) + " |")
    print()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
