"""Run nnabla-examples programs unchanged on nnabla 1.39 and on nnabla_jit, compare.

    python benchmarks/programs/runner.py                      # every program of catalog.py
    python benchmarks/programs/runner.py wgan-gp pfc-mnist    # some of them
    python benchmarks/programs/runner.py --list

For each program: the datasets it reads are written (``program_data.py``) into a fresh working
directory (``home/nnabla_data`` is its ``$HOME``'s data home, where nnabla's ``download()``
looks first); the program runs there as ``python prog.py ARGS`` on the oracle (nnabla 1.39,
``../shared/tools/nnabla-oracle``) and as ``python -m nnabla_jit.as_nnabla prog.py ARGS`` on
nnabla_jit, both with ``program_hook.py`` loaded at start (seeds, the monitor log, the random
draws recorded from nnabla and replayed on nnabla_jit, the stop after a few iterations). The
loss series of both runs are compared value by value; the table gives the largest relative
difference and the seconds per iteration of each run (median time between two values of the
program's main series, the first two left out: they include the compilation). Where the
difference passes the entry's tolerance, nnabla runs once more with its parameters perturbed
by ``--sensitivity`` (1e-6): a difference within 3x that run's own spread, with the first
values agreeing within 1e-4, is round-off the program amplified. ``--nnabla-stats`` runs a
program again on nnabla_jit with nnabla's float32 one-pass normalization statistics: a program
that then agrees differed by those statistics alone (``judge_by_nnabla_stats``).

The oracle's results are kept in ``--work`` (default ``~/.cache/nnabla_jit_programs``) and
reused while the program's entry, its sources and the hook are unchanged; ``--record-fixtures``
copies them to ``tests/fixtures/programs`` for the programs CI runs without the oracle.
Programs importing packages the oracle's environment lacks (prototypical: matplotlib) need
``ORACLE_VENV`` pointing at a copy of it with them installed.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import catalog  # noqa: E402
import program_data  # noqa: E402

HOOK = os.path.join(HERE, "program_hook.py")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "programs")
ORACLE = os.environ.get("NNABLA_ORACLE") or next(
    (p for p in (os.path.join(ROOT, "..", "shared", "tools", "nnabla-oracle"),
                 "/work/shared/tools/nnabla-oracle") if os.path.exists(p)), None)


def find_corpus():
    """nnabla-examples' sources: ``$NNABLA_EXAMPLES`` or ``../shared/nnabla-examples``."""
    for p in (os.environ.get("NNABLA_EXAMPLES"), os.path.join(ROOT, "..", "shared", "nnabla-examples"),
              "/work/shared/nnabla-examples"):
        if p and os.path.isdir(p):
            return os.path.abspath(p)
    return None


def _hash(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _tree_hash(directory):
    """Hash of the Python sources of a program's directory (its edits invalidate the oracle)."""
    h = hashlib.sha256()
    for base, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(base, f), "rb") as fh:
                    h.update(f.encode() + fh.read())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------ data
def dataset_dir(work, name, params):
    """The tree of dataset ``name`` made once under ``work/data`` (made now if missing)."""
    d = os.path.join(work, "data", "{}-{}".format(name, _hash(name, params)))
    if not os.path.exists(os.path.join(d, ".done")):
        shutil.rmtree(d, ignore_errors=True)
        print("  making dataset {} {}".format(name, params or ""), flush=True)
        program_data.make(name, d, **params)
        open(os.path.join(d, ".done"), "w").close()
    return d


def overlay(src, dst):
    """Hard-link (copy where linking fails) every file of ``src`` into ``dst``."""
    for base, _, files in os.walk(src):
        rel = os.path.relpath(base, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            if f == ".done":
                continue
            s, t = os.path.join(base, f), os.path.join(dst, rel, f)
            try:
                os.link(s, t)
            except OSError:
                shutil.copy2(s, t)


def _site_dir(work):
    """A folder holding a ``sitecustomize.py`` that loads program_hook.py."""
    d = os.path.join(work, "site")
    os.makedirs(d, exist_ok=True)
    text = ("import sys\nsys.path.insert(0, {!r})\nimport program_hook  # noqa\n"
            "sys.path.remove({!r})\n").format(HERE, HERE)
    path = os.path.join(d, "sitecustomize.py")
    if not os.path.exists(path) or open(path).read() != text:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return d


# ------------------------------------------------------------------------------- run
def run_side(entry, side, work, corpus, run_dir, draws=None, timeout=1800, dump=False, perturb=0.0,
             nnabla_stats=False):
    """Run ``entry`` on ``side`` ("oracle" or "jit") in a fresh ``run_dir``; return the
    result (exit status, seconds, series, the tail of its output). ``nnabla_stats``: nnabla_jit
    takes nnabla's float32 one-pass normalization statistics (program_hook)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    for name, params in entry.data:
        overlay(dataset_dir(work, name, params), run_dir)
    prog = os.path.join(corpus, entry.path)
    fmt = dict(cwd=run_dir, prog_dir=os.path.dirname(prog), corpus=corpus)
    for name in entry.links:
        os.symlink(os.path.join(os.path.dirname(prog), name), os.path.join(run_dir, name))
    env = dict(os.environ)
    env.update({
        "HOME": os.path.join(run_dir, "home"),
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME")
        or os.path.join(os.path.expanduser("~"), ".cache"),
        "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg",
        "NNABLA_PROGRAMS_MODE": "record" if side == "oracle" else "replay",
        "NNABLA_PROGRAMS_OUT": run_dir, "NNABLA_PROGRAMS_STOP": entry.stop,
        "NNABLA_PROGRAMS_DRAWS": draws or "", "NNABLA_PROGRAMS_DUMP": "1" if dump else "",
        "NNABLA_PROGRAMS_PERTURB": repr(perturb) if perturb else "",
        "NNABLA_PROGRAMS_NNABLA_STATS": "1" if nnabla_stats else "",
    })
    os.makedirs(env["HOME"], exist_ok=True)
    paths = [_site_dir(work)] + [os.path.join(corpus, p) for p in entry.pythonpath]
    if side == "jit":
        paths.append(ROOT)
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if side == "oracle":
        if ORACLE is None:
            raise RuntimeError("runner: no nnabla oracle (set NNABLA_ORACLE)")
        python = [ORACLE, "python"]
    else:
        python = [sys.executable, "-m", "nnabla_jit.as_nnabla"]
    log_path = os.path.join(run_dir, "log.txt")
    start = time.time()
    rc = 0
    steps = [(script, args, "setup{}".format(k)) for k, (script, args) in enumerate(entry.setup)]
    steps.append((entry.path, entry.args, ""))
    with open(log_path, "w") as log:
        for script, args, sub in steps:
            # a setup step (e.g. training the model a program loads) logs and draws apart from
            # the program and runs to its end
            step_env = dict(env, NNABLA_PROGRAMS_OUT=os.path.join(run_dir, sub),
                            NNABLA_PROGRAMS_STOP=env["NNABLA_PROGRAMS_STOP"] if not sub else "")
            if sub and draws:
                step_env["NNABLA_PROGRAMS_DRAWS"] = os.path.join(os.path.dirname(draws), sub, "draws.npz")
            cmd = python + [os.path.join(corpus, script)] + [a.format(**fmt) for a in args]
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            try:
                rc = subprocess.call(cmd, cwd=run_dir, env=step_env, stdout=log,
                                     stderr=subprocess.STDOUT, timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = "timeout"
            if rc != 0:
                break
    seconds = time.time() - start
    with open(log_path, errors="replace") as f:
        text = f.read()
    if "Error in sitecustomize" in text:   # the program ran without the hook: nothing to compare
        rc = "program_hook failed to load"
    return {"rc": rc, "seconds": round(seconds, 1), "series": read_series(run_dir, entry, text),
            "tail": _error_tail(text)}


def read_series(run_dir, entry, text):
    """{series name: [[index, value, time], ...]} from the hook's log (and, for a program
    printing its losses, from its output through ``entry.stdout_series``)."""
    series = {}
    path = os.path.join(run_dir, "series.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                series.setdefault(r["series"], []).append([r["i"], r["v"], r["t"]])
    if entry.stdout_series:
        import re
        for name, pattern in entry.stdout_series.items():
            for k, m in enumerate(re.finditer(pattern, text)):
                series.setdefault(name, []).append([k, float(m.group(1)), None])
    return series


def _last_line(text):
    lines = text.strip().splitlines()
    return lines[-1].replace("nnabla_jit", "nnabla") if lines else ""


def _error_tail(text):
    lines = [l for l in text.splitlines() if l.strip()]
    for k in range(len(lines) - 1, -1, -1):
        if lines[k].startswith("Traceback") and not (k and lines[k - 1].startswith("Exception ignored")):
            return "\n".join(lines[k:])[-3000:]
    return "\n".join(lines[-15:])[-3000:]


# --------------------------------------------------------------------------- compare
def compared_names(entry, oracle_series):
    if entry.compare:
        return list(entry.compare)
    return [n for n in oracle_series if "loss" in n.lower()] or list(oracle_series)


def agreement(entry, oracle_series, jit_series):
    """(largest relative difference over the compared series, the same over their first
    values only, values compared, problem)."""
    worst, first, count = 0.0, 0.0, 0
    for name in compared_names(entry, oracle_series):
        a, b = oracle_series.get(name, []), jit_series.get(name, [])
        if not a:
            return None, None, 0, "nnabla logged no series {!r}".format(name)
        if len(b) != len(a):
            return None, None, 0, "series {!r}: {} values on nnabla, {} on nnabla_jit".format(
                name, len(a), len(b))
        for k, ((i, x, _), (j, y, _)) in enumerate(zip(a, b)):
            if i != j:
                return None, None, 0, "series {!r}: index {} vs {}".format(name, i, j)
            if x != x or y != y:
                if not (x != x and y != y):
                    return float("inf"), None, count, "series {!r}: NaN on one side only".format(name)
                continue
            diff = abs(x - y) / max(abs(x), entry.floor)
            worst = max(worst, diff)
            if k == 0:
                first = max(first, diff)
            count += 1
    return worst, first, count, None


def seconds_per_iteration(entry, series):
    name = entry.timing or (entry.stop.rpartition(":")[0] if ":" in entry.stop else None)
    times = [t for _, _, t in series.get(name, [])] if name else []
    if len(times) < 4:
        return None
    deltas = sorted(b - a for a, b in zip(times[2:], times[3:]))
    return deltas[len(deltas) // 2]


def hook_version():
    import re
    with open(HOOK) as f:
        return int(re.search(r"^HOOK_VERSION = (\d+)", f.read(), re.M).group(1))


def oracle_key(entry, corpus, perturb=0.0):
    return _hash(entry.key(), _tree_hash(os.path.dirname(os.path.join(corpus, entry.path))),
                 hook_version(), [(n, p) for n, p in entry.data], perturb)


def oracle_run(entry, work, corpus, fresh=False, timeout=1800, dump=False, perturb=0.0):
    """nnabla's run of ``entry`` (reused from ``work`` while its key holds); with ``perturb``,
    the run whose parameters start multiplied by 1 ± perturb (program_hook)."""
    key = oracle_key(entry, corpus, perturb)
    oracle_dir = os.path.join(work, "oracle-perturbed" if perturb else "oracle", entry.name)
    cached = os.path.join(oracle_dir, "result.json")
    if not (fresh or dump) and os.path.exists(cached):
        with open(cached) as f:
            oracle = json.load(f)
        if oracle.get("key") == key:
            return oracle, oracle_dir
    print("  nnabla run{} ...".format(" (parameters perturbed by {:g})".format(perturb) if perturb else ""),
          flush=True)
    oracle = run_side(entry, "oracle", work, corpus, oracle_dir, timeout=timeout, dump=dump,
                      perturb=perturb)
    oracle["key"] = key
    with open(cached + ".tmp", "w") as f:
        json.dump(oracle, f)
    os.replace(cached + ".tmp", cached)
    return oracle, oracle_dir


def run_program(entry, work, corpus, fresh_oracle=False, timeout=1800, dump=False, sensitivity=0.0):
    """Run ``entry`` on both sides (nnabla's run reused when cached); the result row. With
    ``sensitivity`` (a relative size, e.g. 1e-6), a program whose losses differ beyond its
    tolerance is run on nnabla once more with its parameters perturbed by that much: how far
    that moves nnabla's own losses is the program's amplification of round-off."""
    oracle, oracle_dir = oracle_run(entry, work, corpus, fresh_oracle, timeout, dump)
    draws = os.path.join(oracle_dir, "draws.npz")
    print("  nnabla_jit run ...", flush=True)
    jit = run_side(entry, "jit", work, corpus, os.path.join(work, "runs", entry.name),
                   draws=draws, timeout=timeout, dump=dump)   # a missing file: no draws
    with open(os.path.join(work, "runs", entry.name, "result.json"), "w") as f:
        json.dump(jit, f)
    row = compare_runs(entry, oracle, jit)
    if sensitivity and row["status"] == "differs" and row.get("max_rel_diff") is not None:
        perturbed, _ = oracle_run(entry, work, corpus, fresh_oracle, timeout, perturb=sensitivity)
        judge_by_spread(entry, row, oracle, perturbed, sensitivity)
    return row


# A single forward from equal parameters and data must agree to this (relative), and the whole
# run within this many times the spread of nnabla's own losses under a perturbation of its
# parameters, for a difference to count as round-off amplified by the program.
FIRST_VALUES_TOLERANCE = 1e-4
SPREAD_FACTOR = 3.0


def judge_by_spread(entry, row, oracle, perturbed, perturbation):
    """Set ``row``'s spread and, where the difference is round-off the program amplified (see
    above), its status."""
    spread, _, _, problem = agreement(entry, oracle["series"], perturbed["series"])
    if perturbed["rc"] != 0 or problem is not None:
        return
    row.update(nnabla_spread=spread, perturbation=perturbation)
    if row["first_rel_diff"] <= FIRST_VALUES_TOLERANCE and row["max_rel_diff"] <= SPREAD_FACTOR * spread:
        row.update(status="ok, round-off amplified",
                   detail="first values within {:g}; largest difference {:.3g} vs nnabla's own "
                          "{:.3g} with parameters perturbed by {:g}".format(
                              FIRST_VALUES_TOLERANCE, row["max_rel_diff"], spread, perturbation))


def judge_by_nnabla_stats(entry, row):
    """Where ``row`` differs and nnabla_jit was also run with nnabla's float32 one-pass
    normalization statistics (``--nnabla-stats``): if that run agrees with nnabla (its first
    values within FIRST_VALUES_TOLERANCE, the whole run within the entry's tolerance or
    SPREAD_FACTOR times nnabla's own spread), the difference is nnabla's statistics, which
    nnabla_jit computes accurately on purpose (README, differences from nnabla)."""
    diff, first = row.get("nnabla_stats_diff"), row.get("nnabla_stats_first")
    if row["status"] != "differs" or diff is None:
        return row
    bound = max(entry.tol, SPREAD_FACTOR * (row.get("nnabla_spread") or 0.0))
    if first <= FIRST_VALUES_TOLERANCE and diff <= bound:
        row.update(status="ok with nnabla's statistics",
                   detail="with nnabla's float32 one-pass normalization statistics the largest "
                          "difference is {:.3g} (first values {:.3g}), within {:.3g}".format(diff, first, bound))
    return row


def float64_reference(entry, work, corpus, row, timeout=1800):
    """Run ``entry`` on nnabla_jit in float64 (its ``float64_args``, nnabla's draws replayed)
    and put into ``row`` how far each float32 run's losses are from it: which side is nearer
    exact arithmetic, where the two differ beyond round-off."""
    oracle_dir = os.path.join(work, "oracle", entry.name)
    with open(os.path.join(oracle_dir, "result.json")) as f:
        oracle = json.load(f)
    jit = load_jit_run(entry, work)
    run_dir = os.path.join(work, "runs-float64", entry.name)
    double_entry = catalog.Entry(entry.name, entry.path, entry.args + entry.float64_args, entry.data,
                                 entry.stop, entry.compare, entry.tol, entry.floor, entry.timing,
                                 entry.pythonpath, entry.setup, entry.stdout_series, entry.links)
    print("  nnabla_jit run in float64 ...", flush=True)
    ref = run_side(double_entry, "jit", work, corpus, run_dir,
                   draws=os.path.join(oracle_dir, "draws.npz"), timeout=timeout)
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(ref, f)
    if ref["rc"] == 0:
        row["float64_nnabla"] = agreement(entry, ref["series"], oracle["series"])[0]
        row["float64_jit"] = agreement(entry, ref["series"], jit["series"])[0]
    return row


def nnabla_stats_run(entry, work, corpus, row, timeout=1800):
    """Run ``entry`` on nnabla_jit with nnabla's float32 one-pass normalization statistics
    (nnabla's draws replayed) and put into ``row`` how far its losses are from nnabla's: a
    program that then agrees differed by nnabla's statistics alone (README, differences)."""
    oracle_dir = os.path.join(work, "oracle", entry.name)
    with open(os.path.join(oracle_dir, "result.json")) as f:
        oracle = json.load(f)
    run_dir = os.path.join(work, "runs-nnabla-stats", entry.name)
    print("  nnabla_jit run with nnabla's normalization statistics ...", flush=True)
    run = run_side(entry, "jit", work, corpus, run_dir, draws=os.path.join(oracle_dir, "draws.npz"),
                   timeout=timeout, nnabla_stats=True)
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(run, f)
    if run["rc"] == 0:
        worst, first, _, problem = agreement(entry, oracle["series"], run["series"])
        if problem is None:
            row["nnabla_stats_diff"], row["nnabla_stats_first"] = worst, first
    return row


def load_jit_run(entry, work):
    """nnabla_jit's kept run of ``entry`` (exit status, series), or None."""
    run_dir = os.path.join(work, "runs", entry.name)
    if os.path.exists(os.path.join(run_dir, "result.json")):
        with open(os.path.join(run_dir, "result.json")) as f:
            return json.load(f)
    if os.path.exists(os.path.join(run_dir, "log.txt")):   # a run by an older runner
        with open(os.path.join(run_dir, "log.txt"), errors="replace") as f:
            return {"rc": 0, "series": read_series(run_dir, entry, f.read()), "tail": ""}
    return None


def recompute_row(entry, work, row):
    """The row again from the runs kept in ``work`` (for a change of the rules above)."""
    oracle_path = os.path.join(work, "oracle", entry.name, "result.json")
    if row.get("oracle_rc") != 0 or row.get("jit_rc") != 0 or not os.path.exists(oracle_path):
        return row
    with open(oracle_path) as f:
        oracle = json.load(f)
    jit = load_jit_run(entry, work)
    if jit is None:
        return row
    new = compare_runs(entry, oracle, jit)
    perturbed_path = os.path.join(work, "oracle-perturbed", entry.name, "result.json")
    if new["status"] == "differs" and new.get("max_rel_diff") is not None and os.path.exists(perturbed_path):
        with open(perturbed_path) as f:
            perturbed = json.load(f)
        judge_by_spread(entry, new, oracle, perturbed, row.get("perturbation", 1e-6))
    for key in ("float64_nnabla", "float64_jit", "nnabla_stats_diff", "nnabla_stats_first"):
        if key in row:
            new[key] = row[key]
    return judge_by_nnabla_stats(entry, new)


def compare_runs(entry, oracle, jit):
    row = {"program": entry.name, "path": entry.path, "oracle_rc": oracle["rc"], "jit_rc": jit["rc"],
           "oracle_s_iter": seconds_per_iteration(entry, oracle["series"]),
           "jit_s_iter": seconds_per_iteration(entry, jit["series"]),
           "tolerance": entry.tol, "note": entry.note}
    if oracle["rc"] != 0:
        same = jit["rc"] != 0 and _last_line(jit["tail"]) == _last_line(oracle["tail"])
        row.update(status="fails on nnabla 1.39 too, alike" if same else "fails on nnabla 1.39",
                   detail=oracle["tail"] if same else oracle["tail"] + "\n--- nnabla_jit:\n" + jit["tail"])
        return row
    if jit["rc"] != 0:
        row.update(status="fails", detail=jit["tail"])
        return row
    worst, first, count, problem = agreement(entry, oracle["series"], jit["series"])
    row.update(max_rel_diff=worst, first_rel_diff=first, values=count)
    if problem:
        row.update(status="differs", detail=problem)
    elif worst <= entry.tol:
        row.update(status="ok")
    else:
        row.update(status="differs", detail="max relative difference {:.3g} > {:.3g}".format(worst, entry.tol))
    return row


# ---------------------------------------------------------------------------- report
def _fmt(v, spec):
    return "" if v is None else format(v, spec)


def table(rows):
    lines = ["| program | status | loss agreement: max rel. diff (first values; values compared) "
             "| nnabla's own spread | from float64: nnabla, nnabla_jit "
             "| with nnabla's statistics: max rel. diff (first) | s/iter nnabla 1.39 "
             "| s/iter nnabla_jit |",
             "|---|---|---|---|---|---|---:|---:|"]
    for r in rows:
        agree = "" if r.get("max_rel_diff") is None else "{:.1e} ({:.1e}; {})".format(
            r["max_rel_diff"], r["first_rel_diff"] or 0.0, r["values"])
        spread = "" if r.get("nnabla_spread") is None else "{:.1e}".format(r["nnabla_spread"])
        ref = "" if r.get("float64_jit") is None else "{:.1e}, {:.1e}".format(
            r["float64_nnabla"], r["float64_jit"])
        stats = "" if r.get("nnabla_stats_diff") is None else "{:.1e} ({:.1e})".format(
            r["nnabla_stats_diff"], r["nnabla_stats_first"])
        lines.append("| {} (`{}`) | {} | {} | {} | {} | {} | {} | {} |".format(
            r["program"], r["path"], r["status"], agree, spread, ref, stats,
            _fmt(r["oracle_s_iter"], ".3f"), _fmt(r["jit_s_iter"], ".3f")))
    return "\n".join(lines)


def record_fixture(entry, work):
    """Copy the oracle's cached result for ``entry`` to tests/fixtures/programs (for CI)."""
    oracle_dir = os.path.join(work, "oracle", entry.name)
    with open(os.path.join(oracle_dir, "result.json")) as f:
        oracle = json.load(f)
    series = {n: [[i, v] for i, v, _ in s] for n, s in oracle["series"].items()}
    os.makedirs(FIXTURES, exist_ok=True)
    out = os.path.join(FIXTURES, entry.name + ".json")
    with open(out + ".tmp", "w") as f:
        json.dump({"program": entry.path, "args": entry.args, "stop": entry.stop,
                   "nnabla": "1.39.0", "series": series}, f, indent=1)
    os.replace(out + ".tmp", out)
    draws = os.path.join(oracle_dir, "draws.npz")
    if os.path.exists(draws):
        shutil.copy2(draws, os.path.join(FIXTURES, entry.name + ".draws.npz"))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("programs", nargs="*", help="catalog names (default: all)")
    p.add_argument("--work", default=os.path.join(os.path.expanduser("~"), ".cache", "nnabla_jit_programs"))
    p.add_argument("--fresh-oracle", action="store_true", help="run nnabla again even if cached")
    p.add_argument("--list", action="store_true")
    p.add_argument("--json", help="write the result rows here")
    p.add_argument("--record-fixtures", action="store_true",
                   help="copy the cached oracle results of the named programs to tests/fixtures/programs")
    p.add_argument("--report", action="store_true",
                   help="print the table of the named programs' last results (no run)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    p.add_argument("--sensitivity", type=float, default=1e-6, metavar="EPS",
                   help="for a program whose losses differ beyond its tolerance, run nnabla again "
                        "with its parameters perturbed by EPS (relative) and report that spread "
                        "(0: not)")
    p.add_argument("--float64", action="store_true",
                   help="run the named programs (already run) on nnabla_jit in float64 (their "
                        "float64_args) and measure both float32 runs against it")
    p.add_argument("--nnabla-stats", action="store_true",
                   help="run the named programs (already run) on nnabla_jit with nnabla's float32 "
                        "one-pass normalization statistics and measure against nnabla's losses")
    p.add_argument("--dump", action="store_true",
                   help="debugging: both runs save params0.npz and forward0.npz (see program_hook)")
    a = p.parse_args(argv)
    entries = catalog.select(a.programs)
    if a.list:
        for e in entries:
            print("{:24s} {}".format(e.name, e.path))
        return 0
    if a.record_fixtures:
        for e in entries:
            print(record_fixture(e, a.work))
        return 0
    rows_dir = os.path.join(a.work, "rows")
    if a.report:
        rows = []
        for e in entries:
            path = os.path.join(rows_dir, e.name + ".json")
            if os.path.exists(path):
                with open(path) as f:
                    rows.append(recompute_row(e, a.work, json.load(f)))
        print(table(rows))
        return 0
    corpus = find_corpus()
    if corpus is None:
        print("runner: nnabla-examples not found (set NNABLA_EXAMPLES)", file=sys.stderr)
        return 2
    rows = []
    for e in entries:
        print("{} ({})".format(e.name, e.path), flush=True)
        row_path = os.path.join(rows_dir, e.name + ".json")
        if a.float64 or a.nnabla_stats:   # extra runs only, beside the kept runs of both sides
            if not ((e.float64_args or not a.float64) and os.path.exists(row_path)):
                continue
            with open(row_path) as f:
                row = recompute_row(e, a.work, json.load(f))
            if row.get("max_rel_diff") is None:
                continue
            if a.float64:
                float64_reference(e, a.work, corpus, row, a.timeout)
            if a.nnabla_stats:
                nnabla_stats_run(e, a.work, corpus, row, a.timeout)
                judge_by_nnabla_stats(e, row)
        else:
            row = run_program(e, a.work, corpus, a.fresh_oracle, a.timeout, a.dump, a.sensitivity)
        rows.append(row)
        os.makedirs(rows_dir, exist_ok=True)
        with open(os.path.join(rows_dir, e.name + ".json.tmp"), "w") as f:
            json.dump(row, f, indent=1)
        os.replace(os.path.join(rows_dir, e.name + ".json.tmp"), os.path.join(rows_dir, e.name + ".json"))
        print("  -> {} {}".format(row["status"], row.get("detail", "") if row["status"] != "ok" else
                                  "max rel diff {:.2e}".format(row["max_rel_diff"])), flush=True)
    print()
    print(table(rows))
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
