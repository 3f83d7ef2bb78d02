"""Small ONNX models for the importer's tests: float models built with onnx.helper (opset 19) and
quantized with onnxruntime's quantize_static (a numpy calibration reader), and hand-written QOperator
models."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = 19


def _init(name: str, a: np.ndarray) -> Any:
    return nh.from_array(np.asarray(a), name)


def model(nodes: list[Any], inputs: list[tuple[str, int, list[Any]]], outputs: list[tuple[str, int, list[Any]]],
          inits: dict[str, np.ndarray], name: str = "m", microsoft: bool = False) -> Any:
    """A checked model of ``nodes``."""
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                     [h.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                     [_init(k, v) for k, v in inits.items()])
    ops = [h.make_opsetid("", OPSET)] + ([h.make_opsetid("com.microsoft", 1)] if microsoft else [])
    m = h.make_model(g, opset_imports=ops)
    if not microsoft and all(s is not None for _, _, s in outputs):  # the checker wants every output's shape
        onnx.checker.check_model(m)
    return m


def tiny_cnn(batch: int = 2, seed: int = 0) -> Any:
    """conv(pad 1) relu maxpool conv add(residual) relu globalavgpool flatten gemm: float."""
    rng = np.random.default_rng(seed)
    f = np.float32
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"], name="/relu1/Relu"),
        h.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        h.make_node("Add", ["c2", "p1"], ["a"], name="add"),
        h.make_node("Relu", ["a"], ["r2"], name="relu2"),
        h.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        h.make_node("Flatten", ["g"], ["fl"], name="flat"),
        h.make_node("Gemm", ["fl", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    inits = {"w1": rng.normal(0, .3, (8, 3, 3, 3)).astype(f), "b1": rng.normal(0, .1, 8).astype(f),
             "w2": rng.normal(0, .2, (8, 8, 3, 3)).astype(f), "b2": rng.normal(0, .1, 8).astype(f),
             "wf": rng.normal(0, .3, (10, 8)).astype(f), "bf": rng.normal(0, .1, 10).astype(f)}
    return model(nodes, [("x", T.FLOAT, [batch, 3, 8, 8])], [("y", T.FLOAT, [batch, 10])], inits, "tiny_cnn")


def geometry_cnn(batch: int = 2, seed: int = 1) -> Any:
    """Convolutions with asymmetric pads, stride 2, SAME_UPPER/SAME_LOWER/VALID auto_pad and a 1x3 kernel,
    a Clip (ReLU6), an AveragePool, a channel Concat and a MatMul: float."""
    rng = np.random.default_rng(seed)
    f = np.float32
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv_asym", pads=[0, 1, 2, 1], strides=[2, 2]),
        h.make_node("Clip", ["c1", "lo", "hi"], ["r1"], name="relu6"),
        h.make_node("Conv", ["r1", "w2"], ["c2"], name="conv_same_upper", auto_pad="SAME_UPPER", strides=[2, 2]),
        h.make_node("Conv", ["r1", "w3", "b3"], ["c3"], name="conv_1x3", pads=[0, 1, 0, 1]),
        h.make_node("Conv", ["c3", "w4", "b4"], ["c4"], name="conv_same_lower", auto_pad="SAME_LOWER", strides=[2, 2]),
        h.make_node("Concat", ["c2", "c4"], ["cat"], name="concat", axis=1),
        h.make_node("Relu", ["cat"], ["rc"], name="relu_cat"),
        h.make_node("Conv", ["rc", "w5", "b5"], ["c5"], name="conv_valid", auto_pad="VALID"),
        h.make_node("AveragePool", ["c5"], ["ap"], name="avgpool", kernel_shape=[2, 2], strides=[1, 1]),
        h.make_node("Reshape", ["ap", "shape"], ["fl"], name="reshape"),
        h.make_node("MatMul", ["fl", "wm"], ["y"], name="matmul"),
    ]
    inits = {"w1": rng.normal(0, .3, (8, 3, 3, 3)).astype(f), "b1": rng.normal(0, .1, 8).astype(f),
             "lo": np.array(0, f), "hi": np.array(6, f),
             "w2": rng.normal(0, .2, (8, 8, 3, 3)).astype(f),
             "w3": rng.normal(0, .3, (4, 8, 1, 3)).astype(f), "b3": rng.normal(0, .1, 4).astype(f),
             "w4": rng.normal(0, .3, (8, 4, 2, 2)).astype(f), "b4": rng.normal(0, .1, 8).astype(f),
             "w5": rng.normal(0, .2, (8, 16, 2, 2)).astype(f), "b5": rng.normal(0, .1, 8).astype(f),
             "shape": np.array([batch, -1], np.int64),
             "wm": rng.normal(0, .2, (8, 6)).astype(f)}
    return model(nodes, [("x", T.FLOAT, [batch, 3, 9, 10])], [("y", T.FLOAT, [batch, 6])], inits, "geometry")


def mlp(batch: int = 4, seed: int = 2) -> Any:
    """flatten (host) gemm relu gemm: float, input (N, 1, 8, 8)."""
    rng = np.random.default_rng(seed)
    f = np.float32
    nodes = [h.make_node("Flatten", ["x"], ["fl"], name="flatten_input"),
             h.make_node("Gemm", ["fl", "w1", "b1"], ["g1"], name="fc1", transB=1),
             h.make_node("Relu", ["g1"], ["r1"], name="relu"),
             h.make_node("Gemm", ["r1", "w2", "b2"], ["y"], name="fc2", transB=1)]
    inits = {"w1": rng.normal(0, .2, (32, 64)).astype(f), "b1": rng.normal(0, .1, 32).astype(f),
             "w2": rng.normal(0, .3, (10, 32)).astype(f), "b2": rng.normal(0, .1, 10).astype(f)}
    return model(nodes, [("x", T.FLOAT, [batch, 1, 8, 8])], [("y", T.FLOAT, [batch, 10])], inits, "mlp")


def calibration(m: Any, count: int = 8, seed: int = 3) -> list[dict[str, np.ndarray]]:
    """Random normal calibration samples for ``m``'s inputs."""
    rng = np.random.default_rng(seed)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
    return [{k: rng.normal(0, 1, s).astype(np.float32) for k, s in shapes.items()} for _ in range(count)]


def quantize(m: Any, folder: Path, fmt: str = "QDQ", activations: str = "QInt8", per_channel: bool = False,
             extra_options: dict[str, Any] | None = None) -> Path:
    """``m`` quantized by onnxruntime's quantize_static into ``folder`` (``extra_options`` as it takes them);
    returns the file."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(calibration(m))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{m.graph.name}_float.onnx"
    onnx.save(m, src)
    extra = "".join(f"_{k}" for k in sorted(extra_options or {}))
    out = folder / f"{m.graph.name}_{fmt}_{activations}_{'pc' if per_channel else 'pt'}{extra}.onnx"
    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice on pre-processing
    quantize_static(str(src), str(out), Reader(), quant_format=getattr(QuantFormat, fmt),
                    activation_type=getattr(QuantType, activations), weight_type=QuantType.QInt8,
                    per_channel=per_channel, extra_options=dict(extra_options or {}))
    return out


def qoperator_integer(batch: int = 2, seed: int = 4) -> Any:
    """Hand-written QOperator ops: QuantizeLinear (host) -> ConvInteger (uint8 weights with a zero point)
    -> Cast -> Mul (scale) -> Add (bias) -> Relu -> QuantizeLinear -> Flatten -> QLinearMatMul ->
    MatMulInteger -> Cast -> Mul -> QuantizeLinear -> DequantizeLinear (host)."""
    rng = np.random.default_rng(seed)
    u8, i8, f = np.uint8, np.int8, np.float32
    nodes = [
        h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quant_in"),
        h.make_node("ConvInteger", ["xq", "wc", "xz", "wcz"], ["acc"], name="conv_int", pads=[1, 0, 1, 2]),
        h.make_node("Cast", ["acc"], ["accf"], name="cast", to=T.FLOAT),
        h.make_node("Mul", ["accf", "cs"], ["cm"], name="scale"),
        h.make_node("Add", ["cm", "cb"], ["ca"], name="bias"),
        h.make_node("Relu", ["ca"], ["cr"], name="relu"),
        h.make_node("QuantizeLinear", ["cr", "ys", "yz"], ["yq"], name="quant_conv"),
        h.make_node("Flatten", ["yq"], ["fq"], name="flatten"),
        h.make_node("QLinearMatMul", ["fq", "ys", "yz", "wm", "wms", "wmz", "ms", "mz"], ["mq"], name="qmatmul"),
        h.make_node("MatMulInteger", ["mq", "wi", "mz"], ["macc"], name="matmul_int"),
        h.make_node("Cast", ["macc"], ["maccf"], name="cast2", to=T.FLOAT),
        h.make_node("Mul", ["maccf", "ms2"], ["mm"], name="scale2"),
        h.make_node("QuantizeLinear", ["mm", "os", "oz"], ["oq"], name="quant_out"),
        h.make_node("DequantizeLinear", ["oq", "os", "oz"], ["y"], name="dequant_out"),
    ]
    feat = 4 * 6 * 5
    inits = {"xs": np.array(0.02, f), "xz": np.array(120, u8),
             "wc": rng.integers(100, 156, (4, 3, 3, 3)).astype(u8), "wcz": np.array(128, u8),
             "cs": np.array(0.02 * 0.01, f), "cb": rng.normal(0, 0.05, (1, 4, 1, 1)).astype(f),
             "ys": np.array(0.01, f), "yz": np.array(5, u8),
             "wm": rng.integers(-60, 60, (feat, 12)).astype(i8), "wms": np.full(12, 0.004, f),
             "wmz": np.zeros(12, i8), "ms": np.array(0.05, f), "mz": np.array(128, u8),
             "wi": rng.integers(-50, 50, (12, 5)).astype(i8), "ms2": np.array(0.05 * 0.01, f),
             "os": np.array(0.03, f), "oz": np.array(10, u8)}
    return model(nodes, [("x", T.FLOAT, [batch, 3, 6, 5])], [("y", T.FLOAT, [batch, 5])], inits, "qop_integer")


def tiny_resnet(batch: int = 4, seed: int = 0) -> Any:
    """A small ResNet: a stem convolution, three basic blocks (identity, then stride-2 with 1x1 downsampling
    shortcuts), global average pooling, flatten, a dense layer; float, PyTorch-like node names."""
    rng = np.random.default_rng(seed)
    f = np.float32
    nodes: list[Any] = []
    inits: dict[str, np.ndarray] = {}

    def conv(x: str, cin: int, cout: int, k: int, s: int, name: str, relu: bool = True) -> str:
        inits[name + ".weight"] = rng.normal(0, (2 / (cin * k * k)) ** .5, (cout, cin, k, k)).astype(f)
        inits[name + ".bias"] = rng.normal(0, .05, cout).astype(f)
        nodes.append(h.make_node("Conv", [x, name + ".weight", name + ".bias"], [name], name=f"/{name}/Conv",
                                 pads=[k // 2] * 4, strides=[s, s]))
        if not relu:
            return name
        nodes.append(h.make_node("Relu", [name], [name + "/relu"], name=f"/{name}/Relu"))
        return name + "/relu"

    def block(x: str, cin: int, cout: int, s: int, name: str) -> str:
        y = conv(conv(x, cin, cout, 3, s, name + ".conv1"), cout, cout, 3, 1, name + ".conv2", relu=False)
        sc = x if (cin == cout and s == 1) else conv(x, cin, cout, 1, s, name + ".downsample", relu=False)
        nodes.append(h.make_node("Add", [y, sc], [name + "/add"], name=f"/{name}/Add"))
        nodes.append(h.make_node("Relu", [name + "/add"], [name + "/out"], name=f"/{name}/Relu"))
        return name + "/out"

    x = conv("input", 3, 16, 3, 1, "stem")
    x = block(block(block(x, 16, 16, 1, "layer1.0"), 16, 32, 2, "layer2.0"), 32, 64, 2, "layer3.0")
    nodes += [h.make_node("GlobalAveragePool", [x], ["gap"], name="/avgpool/GlobalAveragePool"),
              h.make_node("Flatten", ["gap"], ["flat"], name="/Flatten")]
    inits["fc.weight"] = rng.normal(0, .2, (10, 64)).astype(f)
    inits["fc.bias"] = np.zeros(10, f)
    nodes.append(h.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1))
    return model(nodes, [("input", T.FLOAT, [batch, 3, 16, 16])], [("logits", T.FLOAT, [batch, 10])], inits,
                 "tiny_resnet")
