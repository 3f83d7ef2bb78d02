"""ResNet-18 v1 as a float ONNX model with seeded random weights, and that model quantized by onnxruntime.

``float_model(shape)`` writes ResNet-18 v1 (He et al.; batch norm folded into the convolutions' biases)
with ``onnx.helper``::

    image float32 (B, 3, S, S) -> Conv 7x7 stride 2 pad 3 (W) -> Relu -> MaxPool 3x3 stride 2 pad 1
        -> 4 stages of 2 basic blocks (W, 2W, 4W, 8W channels; the first block of stages 2-4 has
           stride 2 and a 1x1 stride-2 downsampling shortcut)
        -> GlobalAveragePool -> Flatten -> Gemm (transB, 8W -> CLASSES) -> logits float32 (B, CLASSES)

At ImageNet shape (``FULL``: S = 224, W = 64, 1000 classes) it has 11.7 M weights. The weights are
seeded random (He-scaled normal), which changes no cycle count. ``quantized_model`` runs onnxruntime's
``quantize_static`` (QDQ form, int8 activations and weights, per-channel weight scales, MinMax
calibration on seeded random images). The quantized full-size model is cached under ``build/``
(regenerated, never committed): :func:`cached_quantized_model`.

``python -m compiler.networks.resnet18_onnx --out DIR [--size S --width W --classes C]`` writes
``resnet18_float.onnx`` and ``resnet18_qdq.onnx``.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.networks.script_cli import OneLineParser

OPSET = 21
INPUT = "image"
OUTPUT = "logits"
NAME = "resnet18"
CALIBRATION_IMAGES = 8


@dataclass(frozen=True)
class Shape:
    """The model's size: input side ``size``, first-stage channels ``width``, ``classes`` outputs, ``batch``."""

    size: int = 224
    width: int = 64
    classes: int = 1000
    batch: int = 1
    seed: int = 0

    def tag(self) -> str:
        """A file-name tag of the shape."""
        return f"s{self.size}_w{self.width}_c{self.classes}_b{self.batch}_seed{self.seed}"


FULL = Shape()

# VTA's ResNet-18 conv workloads (TVM's VTA tests, ``resnet_wkls``): (H, W, in, out, kernel, pad, stride).
VTA_WORKLOADS = {
    "C1": (224, 224, 3, 64, 7, 3, 2), "C2": (56, 56, 64, 64, 3, 1, 1), "C3": (56, 56, 64, 128, 3, 1, 2),
    "C4": (56, 56, 64, 128, 1, 0, 2), "C5": (28, 28, 128, 128, 3, 1, 1), "C6": (28, 28, 128, 256, 3, 1, 2),
    "C7": (28, 28, 128, 256, 1, 0, 2), "C8": (14, 14, 256, 256, 3, 1, 1), "C9": (14, 14, 256, 512, 3, 1, 2),
    "C10": (14, 14, 256, 512, 1, 0, 2), "C11": (7, 7, 512, 512, 3, 1, 1), "C12": (7, 7, 512, 512, 3, 1, 2),
}


def float_model(shape: Shape = FULL) -> Any:
    """ResNet-18 v1 of ``shape`` as a checked ``onnx.ModelProto`` (module docstring)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(shape.seed)
    inits: list[Any] = []
    nodes: list[Any] = []

    def conv(name: str, x: str, cin: int, cout: int, k: int, stride: int, pad: int) -> str:
        std = np.sqrt(2.0 / (cin * k * k))  # He: keeps the activations' range steady through the depth
        inits.append(numpy_helper.from_array(rng.normal(0, std, (cout, cin, k, k)).astype(np.float32), f"{name}.weight"))
        inits.append(numpy_helper.from_array(rng.normal(0, 0.05, cout).astype(np.float32), f"{name}.bias"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.weight", f"{name}.bias"], [name], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4))
        return name

    def relu(x: str) -> str:
        nodes.append(helper.make_node("Relu", [x], [f"{x}_relu"], name=f"{x}_relu"))
        return f"{x}_relu"

    w = shape.width
    x = relu(conv("conv1", INPUT, 3, w, 7, 2, 3))
    nodes.append(helper.make_node("MaxPool", [x], ["maxpool"], name="maxpool", kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    x, cin = "maxpool", w
    for stage in range(4):
        cout = w << stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            p = f"layer{stage + 1}.{block}"
            y = relu(conv(f"{p}.conv1", x, cin, cout, 3, stride, 1))
            y = conv(f"{p}.conv2", y, cout, cout, 3, 1, 1)
            short = conv(f"{p}.downsample", x, cin, cout, 1, stride, 0) if stride != 1 or cin != cout else x
            nodes.append(helper.make_node("Add", [y, short], [f"{p}.add"], name=f"{p}.add"))
            x, cin = relu(f"{p}.add"), cout
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["avgpool"], name="avgpool"))
    nodes.append(helper.make_node("Flatten", ["avgpool"], ["flatten"], name="flatten", axis=1))
    inits.append(numpy_helper.from_array(
        rng.normal(0, np.sqrt(1.0 / cin), (shape.classes, cin)).astype(np.float32), "fc.weight"))
    inits.append(numpy_helper.from_array(rng.normal(0, 0.05, shape.classes).astype(np.float32), "fc.bias"))
    nodes.append(helper.make_node("Gemm", ["flatten", "fc.weight", "fc.bias"], [OUTPUT], name="fc", transB=1))
    graph = helper.make_graph(
        nodes, NAME,
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [shape.batch, 3, shape.size, shape.size])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [shape.batch, shape.classes])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="cosim")
    model.ir_version = 10  # what onnxruntime 1.2x reads
    onnx.checker.check_model(model)
    return model


# DRAM of the whole network: 11.7 M int8 weights in the GEMM core's blocks, the activations, the im2col
# input and the instructions take 15.8 MB, too close to `default`'s 16 MiB to leave room for another shape.
DRAM_BYTES = 64 << 20


def config(base: str = "default") -> Any:
    """Hardware config ``base`` with a DRAM of at least :data:`DRAM_BYTES` (cycle counts are ``base``'s)."""
    from compiler.networks.network import with_dram
    from hw.config import load_config

    return with_dram(load_config(base), DRAM_BYTES)


def random_images(shape: Shape, count: int, seed: int) -> np.ndarray:
    """``count`` seeded random float images of ``shape`` (ImageNet-normalised range, about -2..2)."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-2.0, 2.0, (count, 3, shape.size, shape.size)).astype(np.float32)


def quantized_model(shape: Shape = FULL, float_proto: Any = None) -> Any:
    """The float model quantized by onnxruntime's ``quantize_static`` (QDQ, int8 activations and weights,
    per-channel weights, MinMax calibration on :data:`CALIBRATION_IMAGES` seeded random images)."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    proto = float_proto if float_proto is not None else float_model(shape)
    images = random_images(shape, CALIBRATION_IMAGES, seed=shape.seed + 1)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter([images[i:i + shape.batch] for i in range(0, len(images), shape.batch)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            b = next(self._it, None)
            return None if b is None else {INPUT: b}

    quiet = logging.getLogger()  # quantize_static advises pre-processing on the root logger, every call
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with tempfile.TemporaryDirectory() as d:
            src, dst = Path(d) / "float.onnx", Path(d) / "qdq.onnx"
            onnx.save(proto, src)
            quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True)
            return onnx.load(dst)
    finally:
        quiet.setLevel(level)


def cached_quantized_model(shape: Shape = FULL, cache: Path = Path("build") / "resnet18") -> Path:
    """The path of the quantized model of ``shape``, written under ``cache`` the first time (tens of MB at
    full size: regenerated from the seed, never committed)."""
    import onnx

    path = cache / f"resnet18_qdq_{shape.tag()}.onnx"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        onnx.save(quantized_model(shape), tmp)
        tmp.replace(path)  # a half-written file never looks like a cached model
    return path


# VTA's published tsim cycles for the offloaded ResNet-18 v1 body (every layer but conv1 and the dense
# layer; maxpool and global average pool also ran on the CPU), batch 1, 16x16 int8 GEMM core.
VTA_BODY_CYCLES = {"baseline": 27_679_515, "pipelined_gemm": 7_729_601}


def vta_workload(layer: str) -> str | None:
    """VTA's ResNet-18 workload name (C1..C12) of one of this graph's convolution layers, or None."""
    if layer == "conv1":
        return "C1"
    parts = layer.split(".")
    if len(parts) != 3 or not parts[0].startswith("layer") or not parts[2].startswith(("conv", "downsample")):
        return None
    stage, block, conv = int(parts[0][5:]), int(parts[1]), parts[2]
    if stage == 1:
        return "C2"
    base = {2: 3, 3: 6, 4: 9}[stage]  # C3/C6/C9 strided 3x3, C4/C7/C10 1x1 shortcut, C5/C8/C11 3x3
    if block == 0 and conv == "conv1":
        return f"C{base}"
    if conv == "downsample":
        return f"C{base + 1}"
    return f"C{base + 2}"


def _bound(row: dict[str, Any]) -> str:
    """The unit whose busy cycles are the layer's largest: what bounds it."""
    busy = {u: row.get(f"{u}_busy", 0) for u in ("load", "compute", "store")}
    return max(busy, key=lambda u: busy[u])


def summarize(layers: list[dict[str, Any]], images: int = 1) -> dict[str, Any]:
    """Per-layer rows named by VTA workload with their bound, and two totals: VTA's offloaded body (the
    ``layer1``..``layer4`` rows) against its published cycles (one image: the rows of a batch of
    ``images`` are divided by it for the ratio), and the whole network."""
    rows = [{"layer": r["name"], "vta": vta_workload(r["name"]), "cycles": r["cycles"], "macs": r.get("macs", 0),
             "macs_per_cycle": r.get("macs_per_cycle"), "peak_pct": r.get("peak_pct"),
             "dma_rd_bytes": r.get("dma_rd_bytes"), "dma_wr_bytes": r.get("dma_wr_bytes"), "bound": _bound(r)}
            for r in layers]
    body = [r for r in rows if r["layer"].startswith("layer")]
    body_cycles = sum(r["cycles"] for r in body)
    body_macs = sum(r["macs"] for r in body)
    whole = sum(r["cycles"] for r in rows)
    return {"rows": rows, "images": images,
            "vta_body": {"cycles": body_cycles, "macs": body_macs, "layers": len(body),
                         "cycles_per_image": body_cycles / images, "vta_cycles": VTA_BODY_CYCLES,
                         "ratio_to_pipelined": body_cycles / images / VTA_BODY_CYCLES["pipelined_gemm"]},
            "whole": {"cycles": whole, "cycles_per_image": whole / images, "macs": sum(r["macs"] for r in rows)}}


# Samples of the shipped network: seeded random images (no labels), quantized by the model's input step.
SAMPLES = 4
SAMPLE_SEED = 1000


def graph_output(imported: Any) -> str:
    """The accelerator graph's name of the int8 value the model's float output :data:`OUTPUT` is
    dequantized from (whatever the quantizer named the node that makes it)."""
    return next(o.graph_name for o in imported.outputs if o.name == OUTPUT)


def network(shape: Shape = FULL) -> Any:
    """ResNet-18 of ``shape`` as a shipped :class:`compiler.networks.Network`: the graph the importer makes of
    the cached quantized model (built on first use), on :data:`SAMPLES` seeded random images."""
    from functools import lru_cache

    from compiler.networks.network import Network

    @lru_cache(maxsize=1)
    def imported() -> Any:
        from compiler.onnx_import import import_onnx

        return import_onnx(str(cached_quantized_model(shape)), config())

    @lru_cache(maxsize=1)
    def samples() -> np.ndarray:
        imp = imported()
        x = imp.inputs[0].steps[0].apply(random_images(shape, SAMPLES, SAMPLE_SEED))
        x.flags.writeable = False
        return x

    def dataset(split: str) -> tuple[np.ndarray, Any]:
        return samples(), None

    name = NAME if shape == FULL else f"{NAME}_{shape.tag()}"
    return Network(name=name, description=f"ResNet-18 v1, {shape.size}x{shape.size}x3 input, {shape.classes} "
                   f"classes, width {shape.width}: seeded random weights quantized by onnxruntime (QDQ), seeded "
                   f"random images (no labels)", graph=lambda: imported().graph, dataset=dataset,
                   float_predict=None, input_name=INPUT, output=lambda: graph_output(imported()),
                   min_dram_bytes=DRAM_BYTES, sim_images=1, summarize=summarize)


def main(argv: list[str] | None = None) -> int:
    """Write the float model and its quantized form into a folder."""
    import onnx

    parser = OneLineParser(prog="python -m compiler.networks.resnet18_onnx", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the folder to write the two .onnx files into "
                        "(created if missing)")
    parser.add_argument("--size", type=int, default=FULL.size, help="input side (default 224)")
    parser.add_argument("--width", type=int, default=FULL.width, help="first-stage channels (default 64)")
    parser.add_argument("--classes", type=int, default=FULL.classes, help="classes (default 1000)")
    args = parser.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: exists and is not a folder")
    if args.size < 32 or args.size % 32 or args.width < 1 or args.classes < 1:
        parser.error("--size must be a multiple of 32, --width and --classes positive")
    shape = Shape(size=args.size, width=args.width, classes=args.classes)
    args.out.mkdir(parents=True, exist_ok=True)
    fm = float_model(shape)
    onnx.save(fm, args.out / "resnet18_float.onnx")
    onnx.save(quantized_model(shape, fm), args.out / "resnet18_qdq.onnx")
    print(f"wrote resnet18_float.onnx, resnet18_qdq.onnx in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
