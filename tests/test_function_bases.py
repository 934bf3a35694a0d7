"""``F.*`` is real, checked-in source that matches nnabla's table."""
import inspect

import nnabla_jit.functions as F
from nnabla_jit import function_bases, function_bases_source
from nnabla_jit.ops.registry import REGISTRY, TABLE


def test_checked_in_source_is_what_the_table_renders():
    with open(function_bases_source.TARGET) as f:
        on_disk = f.read()
    assert on_disk == function_bases_source.render(), (
        "function_bases.py is out of date: run `python -m nnabla_jit.function_bases_source`")


def test_every_registered_table_function_is_plain_source():
    for name, spec in TABLE.items():
        if name not in REGISTRY:
            continue
        fn = getattr(function_bases, spec.snake_name)
        assert inspect.getsourcefile(fn) == function_bases.__file__
        params = list(inspect.signature(fn).parameters)
        expected = [i.name for i in spec.inputs] + [a.name for a in spec.args]
        assert params[:len(expected)] == expected, spec.name
        assert params[len(expected):] == ["n_outputs", "outputs"]
        assert "nnabla's function {} ({})".format(spec.name, spec.category) in fn.__doc__


def test_signature_shows_nnabla_parameters_and_literal_defaults():
    sig = inspect.signature(F.convolution)
    assert list(sig.parameters)[:9] == ["x", "weight", "bias", "base_axis", "pad", "stride",
                                        "dilation", "group", "channel_last"]
    assert sig.parameters["base_axis"].default == 1
    assert sig.parameters["group"].default == 1
    # Expression defaults (over the inputs' shapes) are resolved per call; the doc names them.
    assert sig.parameters["pad"].default is None
    assert "(0,) * (len(x.shape) - (base_axis+1))" in F.convolution.__doc__
    assert inspect.signature(F.affine).parameters["base_axis"].default == 1
