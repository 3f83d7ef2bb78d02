"""The digits CNN as a float ONNX model, and that model quantized by onnxruntime.

``float_model(batch)`` writes the float network of :mod:`compiler.networks.digits` (the float
weights that ``train_digits`` trained and ``digits.npz`` keeps) with ``onnx.helper``::

    image float32 (N, 1, 8, 8) -> Conv 3x3 pad 1 (8) -> Relu -> MaxPool 2 -> Flatten
        -> Gemm (transB, 128 -> 32) -> Relu -> Gemm (transB, 32 -> 10) -> logits float32 (N, 10)

Its input is the float image the int8 network's input stands for: ``7 * pixel / 128``
(:func:`compiler.networks.digits.dequantize_images`). ``quantized_model(form)`` runs onnxruntime's
``quantize_static`` on it: QDQ or QOperator form, int8 activations and weights, per-channel weight
scales, MinMax calibration on the train split. ``with_batch`` fixes the batch dimension for an import
(the accelerator compiles one Program per batch).

``python -m compiler.networks.digits_onnx --out DIR`` writes ``digits_float.onnx``,
``digits_qdq.onnx`` and ``digits_qoperator.onnx`` (batch dimension ``N``).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from compiler.networks import digits
from compiler.networks.script_cli import OneLineParser

OPSET = 21
FORMS = ("qdq", "qoperator")
INPUT = "image"
OUTPUT = "logits"
BATCH_DIM = "N"
CALIBRATION_BATCH = 64


def float_inputs(images: np.ndarray) -> np.ndarray:
    """The float model's input (float32) for int8 images ``(N, 1, 8, 8)``."""
    return digits.dequantize_images(images).astype(np.float32)


def float_model(batch: int | str = BATCH_DIM, weights: dict[str, np.ndarray] | None = None) -> Any:
    """The float digits CNN as an ``onnx.ModelProto`` (module docstring); ``batch`` a size or a symbolic name."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = weights if weights is not None else digits.load_weights()
    inits = []
    for layer, _, _ in digits.PARAM_LAYERS:
        inits.append(numpy_helper.from_array(w[f"{layer}.weight_float"].astype(np.float32), f"{layer}.weight"))
        inits.append(numpy_helper.from_array(w[f"{layer}.bias_float"].astype(np.float32), f"{layer}.bias"))
    p = digits.POOL
    nodes = [
        helper.make_node("Conv", [INPUT, "conv1.weight", "conv1.bias"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["conv1_relu"], name="conv1_relu"),
        helper.make_node("MaxPool", ["conv1_relu"], ["pool1"], name="pool1", kernel_shape=[p, p], strides=[p, p]),
        helper.make_node("Flatten", ["pool1"], ["flatten"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flatten", "fc1.weight", "fc1.bias"], ["fc1"], name="fc1", transB=1),
        helper.make_node("Relu", ["fc1"], ["fc1_relu"], name="fc1_relu"),
        helper.make_node("Gemm", ["fc1_relu", "fc2.weight", "fc2.bias"], [OUTPUT], name="fc2", transB=1),
    ]
    graph = helper.make_graph(
        nodes, digits.NAME,
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [batch, *digits.INPUT_SHAPE])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [batch, digits.CLASSES])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="cosim")
    model.ir_version = 10  # what onnxruntime 1.2x reads
    onnx.checker.check_model(model)
    return model


class _TrainSplitReader:
    """onnxruntime's calibration data reader over the train split, in batches."""

    def __init__(self, batch: int = CALIBRATION_BATCH):
        images, _ = digits.dataset("train")
        x = float_inputs(images)
        self._batches = iter([x[i:i + batch] for i in range(0, len(x), batch)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        b = next(self._batches, None)
        return None if b is None else {INPUT: b}


def quantized_model(form: str, float_proto: Any = None) -> Any:
    """The float model quantized by onnxruntime's ``quantize_static`` in ``form`` ("qdq" or "qoperator"):
    int8 activations and weights, per-channel weights, MinMax calibration on the train split."""
    if form not in FORMS:
        raise ValueError(f"form '{form}': one of {', '.join(FORMS)}")
    proto = float_proto if float_proto is not None else float_model()
    quiet = logging.getLogger()  # quantize_static advises pre-processing on the root logger, every call
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _quantize(form, proto)
    finally:
        quiet.setLevel(level)


def _quantize(form: str, proto: Any) -> Any:
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(_TrainSplitReader, CalibrationDataReader):
        pass

    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "float.onnx", Path(d) / f"{form}.onnx"
        onnx.save(proto, src)
        quantize_static(str(src), str(dst), Reader(),
                        quant_format=QuantFormat.QDQ if form == "qdq" else QuantFormat.QOperator,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
        return onnx.load(dst)


def with_batch(model: Any, batch: int) -> Any:
    """A copy of ``model`` whose batch dimension is ``batch`` (:func:`compiler.onnx_import.model.with_batch`)."""
    from compiler.onnx_import.model import with_batch as fixed

    return fixed(model, batch)


def main(argv: list[str] | None = None) -> int:
    """Write the float model and its two quantized forms into a folder."""
    import onnx

    parser = OneLineParser(prog="python -m compiler.networks.digits_onnx", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder to write the three .onnx files into")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: exists and is not a folder")
    args.out.mkdir(parents=True, exist_ok=True)
    fm = float_model()
    onnx.save(fm, args.out / "digits_float.onnx")
    for form in FORMS:
        onnx.save(quantized_model(form, fm), args.out / f"digits_{form}.onnx")
    print(f"wrote digits_float.onnx, digits_qdq.onnx, digits_qoperator.onnx in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
