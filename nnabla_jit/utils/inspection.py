"""What exists for each op: forward, backward kernel, grad rule, CUDA kernel, ONNX mapping.

``show_registry()``, ``nnabla_jit function_info`` and the README's supported-ops table all come
from :func:`op_status`.
"""
from ..ops.registry import REGISTRY, TABLE


def _cuda_ops():
    try:
        from ..cuda_ops import CUDA_OPS
        return CUDA_OPS
    except Exception:
        return set()


def _onnx_ops():
    try:
        from ..serialization.onnx import exportable_ops
        return exportable_ops()
    except Exception:
        return set()


def op_status():
    """One dict per nnabla function (table order), then internal ops, with what exists."""
    from ..backward_functions import registry as grad_rules
    cuda, onnx = _cuda_ops(), _onnx_ops()
    rows = []
    names = list(TABLE) + [n for n in REGISTRY if n not in TABLE]
    for name in names:
        cls = REGISTRY.get(name)
        spec = TABLE.get(name)
        rows.append({
            "name": name,
            "snake_name": spec.snake_name if spec else None,
            "category": spec.category if spec else "internal",
            "forward": cls is not None,
            "backward": cls is not None and cls.has_backward(),
            "grad": name in grad_rules,
            "cuda": name in cuda,
            "onnx": name in onnx,
        })
    return rows


def registry_table(markdown=False):
    """The status table as text (or Markdown for the README)."""
    rows = op_status()
    cols = ["forward", "backward", "grad", "cuda", "onnx"]
    if markdown:
        lines = ["| function | category | " + " | ".join(cols) + " |",
                 "|---|---|" + "---|" * len(cols)]
        for r in rows:
            lines.append("| {} | {} | ".format(r["name"], r["category"]) +
                         " | ".join("yes" if r[c] else "-" for c in cols) + " |")
        n = sum(1 for r in rows if r["forward"] and r["category"] != "internal")
        lines.append("")
        lines.append("{} of {} nnabla functions implemented.".format(n, len(TABLE)))
        return "\n".join(lines)
    width = max(len(r["name"]) for r in rows) + 2
    lines = ["{:<{w}}".format("function", w=width) + "".join("{:<10}".format(c) for c in cols)]
    for r in rows:
        lines.append("{:<{w}}".format(r["name"], w=width) +
                     "".join("{:<10}".format("yes" if r[c] else "-") for c in cols))
    return "\n".join(lines)
