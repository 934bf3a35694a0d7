"""Loaded at interpreter start (as ``sitecustomize``) in both runs of a program: on nnabla 1.39
(``record``) and on nnabla_jit (``replay``). It imports only the standard library and NumPy
before it knows which nnabla it is in, so the same file serves both interpreters.

What it does, driven by environment variables the runner sets:

- seeds NumPy's and Python's global generators (``NNABLA_PROGRAMS_SEED``), so a program drawing
  its noise or shuffles from them draws the same numbers in both runs; a
  ``np.random.RandomState()`` made without a seed (from the OS's entropy: a different order of
  the data in every run, on nnabla too) gets one from a counter instead;
- logs every ``MonitorSeries.add`` (series name, index, value, time) to ``series.jsonl``: the
  loss series and the seconds between iterations come from there;
- ``record``: seeds nnabla's generator of random functions (nnabla seeds it from the OS);
  keeps what nnabla's random functions drew (the outputs of Rand, Randn, ...,
  ImageAugmentation; Dropout's mask) in execution order, per function type, and saves them to
  ``draws.npz`` when the process ends;
- ``replay``: nnabla_jit's random ops draw as usual (so their own state stays consistent), then
  their outputs (and Dropout's mask) are replaced by nnabla's draw of the same call, and the
  global ``nn.random.prng`` is put back to where it was (nnabla's random functions draw from
  the C++ generator and never advance ``nn.random.prng``; nnabla_jit's draw from it);
- ``NNABLA_PROGRAMS_CPU=1``: the GPU extensions (``cuda``, ``cudnn``) a program asks for by
  name or imports are given as the CPU one, on both sides (this machine has no GPU, and many programs
  name ``cudnn`` in their code or defaults);
- NumPy's names that newer NumPy removed (``np.int``, ``np.float``, ... gone in 1.24;
  ``np.float_``, ``np.NaN``, ``np.product``, ... gone in 2.0) are put back where missing, on
  both sides: the programs were written against older NumPy, nnabla 1.39's environment has
  1.26 and nnabla_jit's has 2.x, and a program must not fail on one side for NumPy's sake;
- ``NNABLA_PROGRAMS_PERTURB=eps``: every parameter is multiplied by 1 ± eps
  when the first function runs, to measure how much the program amplifies round-off;
- ``NNABLA_PROGRAMS_NNABLA_STATS=1`` (``replay`` only, a diagnosis): nnabla_jit's
  normalization layers take their batch statistics the way nnabla 1.39's CPU code does (one
  pass in float32, E[x²] − E[x]², see ``_install_nnabla_stats``) instead of accurately; a
  program whose losses then agree with nnabla's differed by nnabla's statistics alone;
- ``NNABLA_PROGRAMS_STOP=name:N`` ends the process (exit status 0) right after series ``name``
  got its N-th value (``N`` alone: any series), so a program runs a few iterations unchanged.
"""
import atexit
import json
import os
import random
import sys
import time

import numpy as np

# Bump when a change alters what nnabla's runs record (the runner reuses those runs while the
# program, its entry and this number are unchanged).
HOOK_VERSION = 3   # 3: nnabla's generator seeded (nn.seed(313)) in its runs

MODE = os.environ.get("NNABLA_PROGRAMS_MODE", "off")
OUT = os.environ.get("NNABLA_PROGRAMS_OUT")
SEED = int(os.environ.get("NNABLA_PROGRAMS_SEED", "0"))
STOP = os.environ.get("NNABLA_PROGRAMS_STOP", "")
DRAWS = os.environ.get("NNABLA_PROGRAMS_DRAWS", "")   # replay: the oracle's draws.npz
CPU = os.environ.get("NNABLA_PROGRAMS_CPU", "1") == "1"
DUMP = os.environ.get("NNABLA_PROGRAMS_DUMP", "") == "1"   # debugging: see _install_dump
PERTURB = float(os.environ.get("NNABLA_PROGRAMS_PERTURB", "0") or 0)   # see _install_perturbation
NNABLA_STATS = os.environ.get("NNABLA_PROGRAMS_NNABLA_STATS", "") == "1"   # see _install_nnabla_stats

# nnabla's functions that draw random numbers when they run forward
GENERATORS = ("Rand", "Randint", "Randn", "RandBinomial", "RandBeta", "RandGamma")
AUGMENTERS = ("ImageAugmentation", "RandomCrop", "RandomFlip", "RandomShift", "RandomErase",
              "RandomChoice")
RANDOM_TYPES = ("Dropout",) + GENERATORS + AUGMENTERS
_SNAKE = {"Rand": "rand", "Randint": "randint", "Randn": "randn", "RandBinomial": "rand_binomial",
          "RandBeta": "rand_beta", "RandGamma": "rand_gamma"}

_series_file = None
_series_counts = {}
_draws = []          # record: [(type name, array)]
_finished = []


def _open_series():
    global _series_file
    if _series_file is None and OUT:
        os.makedirs(OUT, exist_ok=True)
        _series_file = open(os.path.join(OUT, "series.jsonl"), "a", buffering=1)
    return _series_file


def _scalar(value):
    try:
        return float(np.mean(np.asarray(value, dtype=np.float64)))
    except (TypeError, ValueError):
        return float("nan")


def _stop_target():
    if not STOP:
        return None, None
    name, _, n = STOP.rpartition(":")
    return (name or None), int(n)


def finish():
    """Save what this run recorded (once)."""
    if _finished:
        return
    _finished.append(True)
    if MODE == "record" and OUT and _draws:
        os.makedirs(OUT, exist_ok=True)
        arrays = {"d{:06d}_{}".format(k, t): a for k, (t, a) in enumerate(_draws)}
        tmp = os.path.join(OUT, "draws.tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, os.path.join(OUT, "draws.npz"))
    if _series_file is not None:
        _series_file.flush()


def _wrap_monitor(series_class):
    add = series_class.add

    def add_and_log(self, index, value):
        add(self, index, value)
        _save_dump()
        name = getattr(self, "name", "?")
        f = _open_series()
        if f is not None:
            f.write(json.dumps({"series": name, "i": int(index), "v": _scalar(value),
                                "t": time.perf_counter()}) + "\n")
        _series_counts[name] = _series_counts.get(name, 0) + 1
        stop_name, stop_n = _stop_target()
        if stop_n is not None and (stop_name is None or stop_name == name) \
                and _series_counts[name] >= stop_n:
            finish()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    add_and_log.__wrapped__ = add
    series_class.add = add_and_log


# ---------------------------------------------------------------- nnabla 1.39: record draws
def _install_recorder(nn):
    """Record the draws with nnabla's global function hooks. nnabla calls them around the
    backward of each function too, and says not which: a call that leaves the output as it
    was is taken for a backward (a random function's forward draws anew; one drawing exactly
    the output of the previous call would be missed, and the replay then stops at the end
    with a count mismatch, never silently)."""
    held = []   # (output before the call, Dropout's input values while it runs on ones)

    def pre(f):
        name = f.info.type_name
        if name not in RANDOM_TYPES:
            return
        before = np.array(f.outputs[0].d)
        x_values = None
        if name == "Dropout":
            x = f.inputs[0]
            x_values = x.d.copy()
            x.d = np.ones(x.shape, x_values.dtype)   # the output is then the mask itself
        held.append((before, x_values))

    def post(f):
        name = f.info.type_name
        if name not in RANDOM_TYPES:
            return
        before, x_values = held.pop()
        out = f.outputs[0]
        drawn = not np.array_equal(out.d, before)
        if name == "Dropout":
            mask = out.d.copy()
            f.inputs[0].d = x_values
            if drawn:
                out.d = x_values * mask
                _draws.append((name, mask))
        elif drawn:
            _draws.append((name, out.d.copy()))

    nn.set_function_pre_hook("nnabla_programs_record", pre)
    nn.set_function_post_hook("nnabla_programs_record", post)
    _record_auto_forward_generators(nn)


def _record_auto_forward_generators(nn):
    """nnabla calls no global hook for a function run as it is built (``nn.auto_forward``):
    there, the generators (F.rand, F.randn, ...) are recorded as they return. (Dropout and
    the augmenters run that way are not recorded: their replay then stops with a count
    mismatch.)"""
    import nnabla.functions as F
    from nnabla import function_bases

    def wrap(name, fn):
        def recorded(*args, **kwargs):
            y = fn(*args, **kwargs)
            if nn.get_auto_forward():
                _draws.append((name, np.array(y.d)))
            return y
        recorded.__wrapped__ = fn
        recorded.__name__ = fn.__name__
        return recorded

    for name in GENERATORS:
        attr = _SNAKE[name]
        for module in (F, function_bases):
            fn = getattr(module, attr, None)
            if fn is not None and not hasattr(fn, "__wrapped__"):
                setattr(module, attr, wrap(name, fn))


# --------------------------------------------------------------- nnabla_jit: replay draws
class _Replay:
    def __init__(self, path):
        self.by_type = {}
        if path and os.path.exists(path):
            with np.load(path) as z:
                for key in sorted(z.files):
                    self.by_type.setdefault(key.split("_", 1)[1], []).append(z[key])
        self.used = {}

    def next(self, name, shape):
        k = self.used.get(name, 0)
        series = self.by_type.get(name, [])
        if k >= len(series):
            raise RuntimeError("program replay: nnabla_jit ran {} #{} but nnabla ran {} of them"
                               .format(name, k + 1, len(series)))
        self.used[name] = k + 1
        value = series[k]
        if tuple(value.shape) != tuple(shape):
            raise RuntimeError("program replay: {} #{} has shape {} here, {} in nnabla's run"
                               .format(name, k + 1, tuple(shape), value.shape))
        return value


def _install_replay(nnabla_jit):
    from nnabla_jit import random as jit_random
    from nnabla_jit.ops.registry import REGISTRY

    replay = _Replay(DRAWS)

    def wrap(cls, name):
        forward = cls.forward

        def replayed_forward(self, inputs, outputs):
            state = jit_random.prng.get_state()
            forward(self, inputs, outputs)
            jit_random.prng.set_state(state)
            value = replay.next(name, outputs[0].shape)
            if name == "Dropout":
                self.mask[...] = value
                np.multiply(inputs[0], value, out=outputs[0])
            else:
                outputs[0][...] = value

        cls.forward = replayed_forward

    for name in RANDOM_TYPES:
        if name in REGISTRY:
            wrap(REGISTRY[name], name)


_dump = {"on": False, "k": 0, "outputs": {}}


def _install_dump(nn):
    """Debugging a difference: save every parameter (``params0.npz``) when the first function
    runs, and the outputs of every function run before the first ``MonitorSeries.add``
    (``forward0.npz``, keyed by execution order and type), so that the two runs can be
    compared step by step."""
    _dump["on"] = True

    def pre(f):
        if _dump["k"] == 0 and _dump["on"] and OUT:
            params = {k: v.d.copy() for k, v in nn.get_parameters(grad_only=False).items()}
            np.savez(os.path.join(OUT, "params0.npz"), **params)

    def post(f):
        if _dump["on"]:
            for j, o in enumerate(f.outputs):
                _dump["outputs"]["{:05d}_{}_{}".format(_dump["k"], f.info.type_name, j)] = np.array(o.d)
            _dump["k"] += 1

    nn.set_function_pre_hook("nnabla_programs_dump", pre)
    nn.set_function_post_hook("nnabla_programs_dump", post)


def _save_dump():
    if _dump["on"] and OUT:
        _dump["on"] = False
        np.savez(os.path.join(OUT, "forward0.npz"), **_dump["outputs"])
        _dump["outputs"] = {}


def _install_perturbation(nn):
    """How much does the program itself amplify round-off? Multiply every parameter by
    (1 ± PERTURB), signs drawn from a generator of its own, when the first function runs;
    the runner compares this run of nnabla with the plain one (see runner.sensitivity)."""
    done = []

    def pre(f):
        if not done:
            done.append(True)
            signs = np.random.RandomState(2718)
            for v in nn.get_parameters(grad_only=False).values():
                d = v.d
                v.d = d * (1 + PERTURB * np.where(signs.rand(*d.shape) < 0.5, -1, 1)).astype(d.dtype)

    nn.set_function_pre_hook("nnabla_programs_perturb", pre)


def nnabla_one_pass_stats(x3):
    """Per-channel mean and biased variance of ``x3`` (outer, channels, inner) as nnabla 1.39's
    CPU batch normalization computes them: sums of x and x*x accumulated element by element in
    float32, outer index major, then mean = sum / n and var = sum_sq / n - mean * mean, all in
    float32 (bit-exact against nnabla's ``output_stat`` on the inputs checked). Returned in
    float64, as nnabla_jit's ``batch_stats`` returns its statistics."""
    C = x3.shape[1]
    rows = np.ascontiguousarray(np.asarray(x3, dtype=np.float32).transpose(1, 0, 2)).reshape(C, -1)
    n = np.float32(rows.shape[1])
    if rows.shape[1] == 0:
        return np.zeros(C), np.zeros(C)
    s = np.cumsum(rows, axis=1, dtype=np.float32)[:, -1]
    ss = np.cumsum(rows * rows, axis=1, dtype=np.float32)[:, -1]
    mean = s / n
    var = ss / n - mean * mean
    return mean.astype(np.float64), var.astype(np.float64)


def _install_nnabla_stats():
    """Diagnosis of a difference: nnabla_jit's normalization layers (batch, instance, layer,
    group normalization: every ``Standardization`` op) take nnabla's float32 one-pass
    statistics instead of their accurate ones. Only the statistics change: the rest of each
    layer (the normalized output, the gradients) is nnabla_jit's own."""
    from nnabla_jit.ops import normalization

    def batch_stats(layout, x3):
        return nnabla_one_pass_stats(x3)

    normalization.batch_stats = batch_stats
    # the kernel that takes the statistics and normalizes in one pass has its own sums
    normalization.Standardization.stats_in_one_pass = False


def _cpu_for_gpu(ext_utils):
    """The CPU extension stands for ``cuda`` and ``cudnn``, asked for by name
    (``get_extension_context``, ``import_extension_module``) or imported
    (``import nnabla_ext.cuda``), the same way on both sides."""
    original = ext_utils.import_extension_module

    def import_extension_module(ext_name):
        return original("cpu" if ext_name in ("cuda", "cudnn", "cuda.cudnn") else ext_name)

    ext_utils.import_extension_module = import_extension_module
    if MODE == "record":   # nnabla_jit's alias imports nnabla_ext.X through the function above
        cpu = original("cpu")
        import nnabla_ext
        for name in ("cuda", "cudnn"):
            sys.modules["nnabla_ext." + name] = cpu
            setattr(nnabla_ext, name, cpu)


# NumPy names removed in 1.24 (the builtin-type aliases) and in 2.0, with what they meant
_REMOVED_NUMPY_NAMES = {
    "int": int, "float": float, "bool": bool, "object": object, "str": str, "complex": complex,
    "long": int, "unicode": str,
    "float_": "float64", "complex_": "complex128", "int0": "intp", "uint0": "uintp",
    "bool8": "bool_", "unicode_": "str_", "string_": "bytes_", "NaN": "nan", "NAN": "nan",
    "Inf": "inf", "Infinity": "inf", "infty": "inf", "PINF": "inf", "product": "prod",
    "cumproduct": "cumprod", "alltrue": "all", "sometrue": "any", "round_": "round",
}


def _restore_numpy_names():
    import warnings
    for name, meaning in _REMOVED_NUMPY_NAMES.items():
        try:
            with warnings.catch_warnings():   # NumPy 1.2x warns when asked for some of them
                warnings.simplefilter("ignore")
                getattr(np, name)
        except AttributeError:
            setattr(np, name, getattr(np, meaning) if isinstance(meaning, str) else meaning)
    try:
        np.NINF
    except AttributeError:
        np.NINF = -np.inf
    try:
        np.asfarray
    except AttributeError:
        np.asfarray = lambda a, dtype=np.float64: np.asarray(a, dtype=dtype)


def _seed_unseeded_random_states():
    original = np.random.RandomState
    made = [0]

    class RandomState(original):
        """``np.random.RandomState`` whose ``seed=None`` means the next seed of a counter."""

        def __init__(self, seed=None):
            if seed is None:
                made[0] += 1
                seed = 1000 * (SEED + 1) + made[0]
            super().__init__(seed)

    RandomState.__module__ = original.__module__
    RandomState.__qualname__ = original.__qualname__
    np.random.RandomState = RandomState


def _install():
    if MODE == "off":
        return
    _restore_numpy_names()
    _seed_unseeded_random_states()
    np.random.seed(SEED)
    random.seed(SEED)
    if MODE == "record":
        import nnabla as nn
        # nnabla seeds the C++ generator of its random functions from the OS at start: a
        # second run (the perturbed one) would draw other numbers. 313 also leaves
        # nn.random.prng, which initializers draw from, as nnabla made it.
        nn.seed(313)
        import nnabla.monitor
        _wrap_monitor(nnabla.monitor.MonitorSeries)
        _install_recorder(nn)
        if DUMP:
            _install_dump(nn)
        if PERTURB:
            _install_perturbation(nn)
        if CPU:
            import nnabla.ext_utils
            _cpu_for_gpu(nnabla.ext_utils)
    elif MODE == "replay":
        import nnabla_jit
        import nnabla_jit.monitor
        _wrap_monitor(nnabla_jit.monitor.MonitorSeries)
        _install_replay(nnabla_jit)
        if DUMP:
            _install_dump(nnabla_jit)
        if PERTURB:
            _install_perturbation(nnabla_jit)
        if NNABLA_STATS:
            _install_nnabla_stats()
        if CPU:
            import nnabla_jit.ext_utils
            _cpu_for_gpu(nnabla_jit.ext_utils)
    atexit.register(finish)


_install()
