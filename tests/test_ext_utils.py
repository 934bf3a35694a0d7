"""nnabla_jit.ext_utils: extension contexts equal to nnabla's, and the dtypes they select."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nnabla_jit as nn
import nnabla_jit.functions as F
from nnabla_jit import ext_utils
from nnabla_jit.ext_utils import get_extension_context, import_extension_module, list_extensions


def test_cpu_contexts_repr_like_nnabla():
    assert repr(get_extension_context("cpu")) == \
        "Context(backend=['cpu:float'], array_class='CpuCachedArray', device_id='')"
    assert repr(get_extension_context("cpu", type_config="half")) == \
        "Context(backend=['cpu:half', 'cpu:float'], array_class='CpuCachedArray', device_id='')"
    # nnabla's CPU context ignores device_id
    assert get_extension_context("cpu", device_id="1") == get_extension_context("cpu")
    assert get_extension_context("cpu") == nn.Context(["cpu:float"], "CpuCachedArray", "")
    assert get_extension_context("cpu", type_config="double").backend == ["cpu:double"]


def test_context_types():
    assert get_extension_context("cpu").storage_dtype == np.float32
    half = get_extension_context("cpu", type_config="half")
    assert half.compute_dtype == np.float32 and half.storage_dtype == np.float16
    double = get_extension_context("cpu", type_config="double")
    assert double.compute_dtype == np.float64 and double.storage_dtype == np.float64


@pytest.mark.parametrize("type_config, dtype", [("float", np.float32), ("half", np.float16),
                                                ("double", np.float64)])
def test_functions_store_in_the_context_type(type_config, dtype):
    x = nn.Variable.from_numpy_array(np.array([[0.5, -1.25], [2.0, 3.0]], dtype=np.float32))
    w = nn.Variable.from_numpy_array(np.array([[1.0], [2.0]], dtype=np.float32))
    with nn.context_scope(get_extension_context("cpu", type_config=type_config)):
        y = F.affine(x, w)
    y.forward()
    assert y.d.dtype == dtype
    np.testing.assert_allclose(y.d, [[-2.0], [8.0]])
    nn.set_default_context(get_extension_context("cpu", type_config=type_config))
    z = F.add_scalar(x, 1.0)
    z.forward()
    assert z.d.dtype == dtype


def test_bad_names_and_type_configs():
    with pytest.raises(ValueError, match="Unknown data type config is given quarter"):
        get_extension_context("cpu", type_config="quarter")
    with pytest.raises(ImportError, match="tpu"):
        get_extension_context("tpu")
    with pytest.raises(ImportError, match="tpu"):
        import_extension_module("tpu")


def test_cpu_extension_module():
    cpu = import_extension_module("cpu")
    assert cpu.array_classes()[0] == "CpuCachedArray"
    assert cpu.get_device_count() == 1 and cpu.get_devices() == ["0"]
    assert cpu.context() == get_extension_context("cpu")
    assert cpu.synchronize() is None and cpu.device_synchronize("") is None
    assert cpu.clear_memory_cache() is None
    assert "cpu" in list_extensions()


def test_cuda_without_a_gpu_raises_one_error_saying_how_to_get_either(monkeypatch):
    from numba import cuda
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    assert list_extensions() == ["cpu"]
    for name in ("cuda", "cudnn", "cuda.cudnn"):
        with pytest.raises(ImportError, match="finds no GPU") as info:
            get_extension_context(name)
        message = str(info.value)
        assert "finds no GPU" in message
        assert "pip install 'nnabla_jit[cuda]'" in message      # how to get a GPU path
        assert "NUMBA_ENABLE_CUDASIM=1" in message              # how to get the simulator


def test_cuda_without_numba_cuda_says_what_to_install(monkeypatch):
    import numba
    monkeypatch.setitem(sys.modules, "numba.cuda", None)   # import fails
    monkeypatch.delattr(numba, "cuda", raising=False)
    with pytest.raises(ImportError, match=r"numba.cuda cannot be imported.*nnabla_jit\[cuda\]"):
        get_extension_context("cudnn")


def test_describe_device_on_the_cpu():
    assert ext_utils.describe_device("cpu").startswith("cpu:")


_CUDA_SCRIPT = """
import json
from nnabla_jit.ext_utils import (describe_device, get_extension_context,
                                  import_extension_module, list_extensions)
out = {name + ':' + tc: repr(get_extension_context(name, type_config=tc))
       for name in ('cuda', 'cudnn', 'cuda.cudnn') for tc in ('float', 'half')}
ext = import_extension_module('cuda')
ext.synchronize()
ext.device_synchronize('0')
ext.clear_memory_cache()
out['devices'] = ext.get_devices()
out['extensions'] = list_extensions()
out['device'] = get_extension_context('cudnn').device
out['properties'] = ext.get_device_properties('0')
out['describe'] = describe_device('cudnn')
try:
    get_extension_context('cuda', device_id='7')
except ValueError as e:
    out['bad_device'] = str(e)
print(json.dumps(out))
"""


def test_cuda_contexts_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run([sys.executable, "-c", _CUDA_SCRIPT], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["cuda:float"] == \
        "Context(backend=['cuda:float', 'cpu:float'], array_class='CudaCachedArray', device_id='0')"
    assert out["cuda:half"] == ("Context(backend=['cuda:half', 'cuda:float', 'cpu:float'], "
                                "array_class='CudaCachedArray', device_id='0')")
    assert out["cudnn:float"] == ("Context(backend=['cudnn:float', 'cuda:float', 'cpu:float'], "
                                  "array_class='CudaCachedArray', device_id='0')")
    assert out["cudnn:half"] == ("Context(backend=['cudnn:half', 'cudnn:float', 'cuda:float', "
                                 "'cpu:float'], array_class='CudaCachedArray', device_id='0')")
    assert out["cuda.cudnn:float"] == out["cudnn:float"]
    assert out["devices"] == ["0"]
    assert out["extensions"] == ["cpu", "cuda", "cudnn"]
    assert out["device"] == "cuda"
    assert "device_id='7'" in out["bad_device"]
    assert out["properties"]["name"] == "numba CUDA simulator"
    assert out["properties"]["total_memory"] is None     # the simulator reports inf
    assert out["describe"] == "cudnn device 0: numba CUDA simulator (compute {}.{})".format(
        *out["properties"]["compute_capability"])
