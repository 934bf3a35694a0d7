"""Record, with the real nnabla 1.39, the kind of every public name of its modules and the
non-public names that nnabla's own modules and nnabla-examples import from each other.

    /work/shared/tools/nnabla-oracle python tests/differential/gen_surface_names.py [EXAMPLES_DIR]

Writes ``tests/fixtures/differential/surface_names.json``; ``tests/differential/
test_surface_names.py`` replays it on nnabla_jit under its nnabla alias. The public names are
those of ``tests/fixtures/nnabla_public_api.json`` (made by ``tests/test_public_surface.py``).
"""
import ast
import importlib
import inspect
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
OUT = os.path.join(FIXTURES, "differential", "surface_names.json")


def kind(v):
    if isinstance(v, types.ModuleType):
        return "module"
    if inspect.isclass(v):
        return "class"
    if callable(v):
        return "function"
    return "other"


def _package_of(path, root, top):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
        return ".".join([top] + rel), True
    return ".".join([top] + rel), False


def private_imports(files, module_of=None):
    """{(module, name)} for every ``from M import _x`` (and ``M._x`` attribute use) of nnabla."""
    found = set()
    for path, modname, is_pkg in files:
        try:
            tree = ast.parse(open(path, encoding="utf-8", errors="replace").read())
        except SyntaxError:
            continue
        aliases = {"nnabla": "nnabla"}   # names a file binds to nnabla modules: import nnabla as nn
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "nnabla" and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    if modname is None:
                        continue
                    base = modname.split(".")
                    if not is_pkg:
                        base = base[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    mod = ".".join(base + ([mod] if mod else []))
                if mod != "nnabla" and not mod.startswith("nnabla."):
                    continue
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        found.add((mod, a.name))
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                parts, v = [node.attr], node.value
                while isinstance(v, ast.Attribute):
                    parts.append(v.attr)
                    v = v.value
                if isinstance(v, ast.Name) and v.id in aliases:
                    parts.append(aliases[v.id])
                    dotted = ".".join(reversed(parts))
                    found.add((dotted.rsplit(".", 1)[0], node.attr))
    return found


def main():
    import nnabla
    examples = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/nnabla-examples"
    api = json.load(open(os.path.join(FIXTURES, "nnabla_public_api.json"), encoding="utf-8"))
    public = {}
    for module, names in sorted(api["modules"].items()):
        try:
            mod = importlib.import_module(module)
        except Exception:
            continue
        public[module] = {n: kind(getattr(mod, n)) for n in names if hasattr(mod, n)}
    root = os.path.dirname(nnabla.__file__)
    files = []
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith(".py"):
                p = os.path.join(d, f)
                files.append((p,) + _package_of(p, root, "nnabla"))
    for d, _, fs in os.walk(examples):
        files += [(os.path.join(d, f), None, False) for f in fs if f.endswith(".py")]
    private = {}
    for mod, name in sorted(private_imports(files)):
        if mod.startswith(("nnabla.libnnabla", "nnabla.mlflow", "nnabla.autolog")):
            continue
        try:
            v = getattr(importlib.import_module(mod), name)
        except Exception:       # a name of a module nnabla's environment cannot import
            continue
        private.setdefault(mod, {})[name] = kind(v)
    data = {"nnabla_version": nnabla.__version__, "public": public, "private": private}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, OUT)
    print("public names", sum(len(v) for v in public.values()),
          "private names", sum(len(v) for v in private.values()))


if __name__ == "__main__":
    main()
