"""Where the GPU's time goes in nnabla_jit's steps: every kernel launched on the device during a
few steps of each workload (numba's kernels and cuBLAS's alike), recorded by PyTorch's profiler
(CUPTI sees every launch in the process, not only PyTorch's), summed per kernel name.

    PYTHONPATH=$PWD python3 benchmarks/gpu_kernels.py --out DIR [--steps 5] resnet18 resnet50_b32

Writes DIR/kernels.md (per workload: the kernels by total device time, their share and count)
and DIR/NAME.trace.json (a Chrome trace: open it in chrome://tracing or ui.perfetto.dev).
Needs a GPU and PyTorch with CUDA (the device image has both); nothing is asserted.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def profile(name, steps, out):
    sys.path.insert(0, HERE)
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    import gpu_workloads
    import nnabla_jit as nn
    from nnabla_jit.cuda_ops import device
    from nnabla_jit.ext_utils import get_extension_context
    cuda = device.load()
    with nn.context_scope(get_extension_context("cudnn")):
        step = gpu_workloads.nnabla_jit_step(name)
    for _ in range(2):   # compiles, fills the pool
        step()
    cuda.synchronize()
    t0 = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps * 1e3
    prof.export_chrome_trace(os.path.join(out, name + ".trace.json"))
    totals = {}
    for event in prof.events():
        if getattr(event, "device_type", None) is None or "CUDA" not in str(event.device_type):
            continue
        t = totals.setdefault(event.name, [0.0, 0])
        t[0] += event.time_range.elapsed_us()
        t[1] += 1
    device_ms = sum(t for t, _ in totals.values()) / steps / 1e3
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])
    lines = ["## {} ({}): {:.2f} ms per step on the wall (profiler on), {:.2f} ms of kernels"
             .format(name, gpu_workloads.TITLES.get(name, name), wall, device_ms), "",
             "| kernel | ms per step | share | launches per step |", "|---|---:|---:|---:|"]
    for kernel, (us, count) in rows[:30]:
        lines.append("| `{}` | {:.3f} | {:.1%} | {:.0f} |".format(
            kernel[:90], us / steps / 1e3, us / max(sum(t for t, _ in totals.values()), 1e-9),
            count / steps))
    for sort_by in ("self_device_time_total", "self_cuda_time_total"):   # torch's own table
        try:
            lines += ["", "```", prof.key_averages().table(sort_by=sort_by, row_limit=25), "```"]
            break
        except Exception:
            continue
    return "\n".join(lines) + "\n\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("names", nargs="*", default=["resnet18", "resnet50_b32", "convbn"])
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    texts = ["# Device time per kernel (nnabla_jit under a cudnn context)\n\n"]
    for name in args.names:
        try:
            texts.append(profile(name, args.steps, args.out))
        except Exception as e:   # one workload's failure is a result, not the end of the run
            texts.append("## {}: failed: {!r}\n\n".format(name, e))
        with open(os.path.join(args.out, "kernels.md"), "w") as f:
            f.write("".join(texts))
    print("".join(texts))


if __name__ == "__main__":
    main()
