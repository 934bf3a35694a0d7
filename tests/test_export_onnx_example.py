"""examples/export_onnx.py: trains the digits CNN briefly, converts its .nnp with the CLI, and
exits 0 only when onnxruntime predicts what nnabla_jit predicts."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                       "export_onnx.py")


def test_export_onnx_example(tmp_path):
    result = subprocess.run([sys.executable, EXAMPLE, "--epochs", "2", "--out-dir", str(tmp_path)],
                            capture_output=True, text=True, cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "onnxruntime agrees with nnabla_jit" in result.stdout
    assert sorted(os.listdir(str(tmp_path))) == ["digits.h5", "digits.nnp", "digits.onnx"]
