"""The digits CNN through ONNX: the float export (compiler.networks.digits_onnx) against the numpy float
model, onnxruntime's quantize_static forms, and the imported int8 model's accuracy on golden and TLM
beside onnxruntime's (cosim.onnx_conformance.digits)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from compiler.networks import digits, digits_onnx
from cosim.onnx_conformance import digits as digits_suite
from cosim.onnx_conformance.runner import onnxruntime_outputs


@pytest.fixture(scope="module")
def float_model() -> Any:
    return digits_onnx.float_model()


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return digits_suite.evaluate("default")


def test_float_export_is_the_numpy_float_model(float_model: Any) -> None:
    images, labels = digits.dataset("test")
    x = digits_onnx.float_inputs(images)
    ort = onnxruntime_outputs(float_model, {digits_onnx.INPUT: x})[digits_onnx.OUTPUT]
    ref = digits.float_logits(digits.load_weights(), digits.dequantize_images(images))
    assert np.allclose(ort, ref, rtol=1e-4, atol=1e-4)
    meta = digits.load_weights()["meta"]
    assert np.mean(np.argmax(ort, axis=1) == labels) == json.loads(str(meta))["float_accuracy_test"]


@pytest.mark.parametrize("form", digits_onnx.FORMS)
def test_quantize_static_forms_are_per_channel_int8(float_model: Any, form: str) -> None:
    q = digits_onnx.quantized_model(form, float_model)
    ops = [n.op_type for n in q.graph.node]
    if form == "qdq":
        assert {"Conv", "Gemm", "QuantizeLinear", "DequantizeLinear"} <= set(ops)
    else:
        assert "QLinearConv" in ops and ops.count("QGemm") == 2
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in q.graph.initializer}
    weights = [a for n, a in inits.items() if a.dtype == np.int8 and a.ndim >= 2]
    assert len(weights) == 3
    per_channel = [a for n, a in inits.items() if "scale" in n and a.size in (digits.CONV_CHANNELS, digits.HIDDEN,
                                                                              digits.CLASSES)]
    assert len(per_channel) >= 3


def test_with_batch_fixes_the_batch(float_model: Any) -> None:
    m = digits_onnx.with_batch(float_model, 7)
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [7, 1, 8, 8] and m.graph.output[0].type.tensor_type.shape.dim[0].dim_value == 7
    assert float_model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == digits_onnx.BATCH_DIM


def test_script_writes_the_three_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert digits_onnx.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == ["digits_float.onnx", "digits_qdq.onnx", "digits_qoperator.onnx"]
    assert digits_onnx.main(["--out", str(tmp_path / "new" / "dir")]) == 0  # made when missing
    assert len(list((tmp_path / "new" / "dir").iterdir())) == 3
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit) as e:
        digits_onnx.main(["--out", str(tmp_path / "file")])
    assert e.value.code == 2 and "is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("form", digits_onnx.FORMS)
def test_accuracy_within_one_point_of_onnxruntime_int8(report: dict[str, Any], form: str) -> None:
    f = report["forms"][form]
    assert report["images"] == len(digits.dataset("test")[1])
    assert abs(f["golden"] - f["int8_onnxruntime"]) * 100 <= digits_suite.ACCURACY_POINTS, f
    assert f["agreement"]["within_one_lsb"] >= digits_suite.WITHIN_ONE_SHARE, f["agreement"]
    assert f["models_equal_golden"] == {"tlm": True} and f["tlm"] == f["golden"]
    assert f["ok"] and report["ok"]
