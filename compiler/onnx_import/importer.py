"""ONNX ModelProto -> graph -> one Program: the walk over the model's nodes.

Every model input is an accelerator input (int8/uint8, uint8 shifted by -128 on the host) or a float
input that the host quantizes (its QuantizeLinear, and any Flatten/Reshape before it, run on the
host). Every node then gets its meaning from its handler (:mod:`compiler.onnx_import.qdq` for the
standard ops, :mod:`compiler.onnx_import.qoperator` for the QLinear/Integer ones), which adds the
graph layers; every model output must be an integer tensor of the accelerator or its
DequantizeLinear (which the host runs). The graph is then compiled for the batch of the model's
inputs (their first dimension) into one Program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import CompileError
from compiler.onnx_import.builder import Builder
from compiler.onnx_import.errors import UnsupportedModel, model_error, node_error, node_label
from compiler.onnx_import.fold import fold, foldable, shape_of
from compiler.onnx_import.host import HostOp, InputStep, ModelInput, OutputStep, RANGES
from compiler.onnx_import.model import attrs, check_model, load_model, with_batch
from compiler.onnx_import.names import MAX_NAME, printable
from compiler.onnx_import.qoperator import HANDLERS
from compiler.onnx_import.values import Const, HostFloat, IntTensor, RealTensor, shift

MICROSOFT = ("QLinearAdd", "QLinearGlobalAveragePool", "QLinearAveragePool", "QGemm", "QLinearConcat", "QLinearMul")
# What `cosim import --help` lists.
SUPPORTED_OPS = {
    "QDQ": ["QuantizeLinear", "DequantizeLinear", "Conv", "MatMul", "Gemm", "Add", "Relu", "Clip", "MaxPool",
            "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Flatten", "Reshape (to (N, F))",
            "Concat (channels)"],
    "QOperator": ["QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "com.microsoft QLinearAdd",
                  "com.microsoft QLinearGlobalAveragePool", "com.microsoft QLinearAveragePool",
                  "com.microsoft QGemm", "com.microsoft QLinearConcat",
                  "com.microsoft QLinearMul (by a per-channel constant)"],
    "also": ["any node of constant inputs (folded at import time)", "Shape", "Identity", "Dropout",
             "Cast (of a ConvInteger/MatMulInteger result)",
             "Add/Mul of a per-channel constant and BatchNormalization (a bias/scale: folded into the layer before, "
             "or an identity layer)"],
}
DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8"}


class ImportBuilder(Builder):
    """The builder plus the host's side: model inputs and the host steps that feed the graph."""

    def __init__(self, graph_name: str):
        super().__init__(graph_name)
        self.model_inputs: dict[str, ModelInput] = {}
        self.host_ops: list[HostOp] = []

    def graph_input(self, source: str, shape: tuple[int, ...], dtype: str, scale: float | None = None,
                    zero_point: int = 0) -> IntTensor:
        """A graph input for (a host step of) ONNX input ``source``."""
        if len(shape) not in (2, 3, 4):
            raise model_error(f"input '{source}' of shape {list(shape)}: the accelerator takes (N, C, H, W), "
                              f"(N, C, L) or (N, F) inputs")
        name = self.names.take(source, "input")
        per_sample = tuple(shape[1:]) + ((1,) if len(shape) == 3 else ())  # (N, C, L) is held as (C, L, 1)
        v = self.graph.input(name, per_sample)
        self.model_inputs[source].steps.append(InputStep(source, name, shape, dtype, scale, zero_point, per_sample))
        return IntTensor(v, dtype, shape)

    def host_quantize(self, node: Any, x: HostFloat, scale: float, zero_point: int, dtype: str) -> IntTensor:
        """The host's QuantizeLinear of a float input: a graph input."""
        mi = self.model_inputs[x.source]
        if mi.low == mi.high:  # the first quantization of this input sets the range of random test inputs
            lo, hi = RANGES[dtype]
            mi.low, mi.high = scale * (lo - zero_point), scale * (hi - zero_point)
        what = f"quantizes float input '{x.source}' (scale {scale:.6g}, zero point {zero_point}, {dtype})"
        self.host_ops.append(HostOp(node_label(node), node.op_type, what))
        try:
            return self.graph_input(x.source, x.shape, dtype, scale, zero_point)
        except UnsupportedModel as e:
            raise node_error(node, str(e).split(": ", 1)[1]) from None

    def host_reshape(self, node: Any) -> None:
        """Record a Flatten/Reshape of a float input that the host runs."""
        self.host_ops.append(HostOp(node_label(node), node.op_type, "reshapes a float input before quantizing it"))


def _operand(b: ImportBuilder, info: Any, node: Any, name: str) -> Any:
    if not name:
        return None
    if name in b.env:
        return b.env[name]
    if name in info.consts:
        return Const(info.consts[name])
    later = next((n for n in info.graph.node if name in n.output), None)
    if later is not None:
        raise node_error(node, f"input '{name}' is produced by node '{later.name or later.op_type}' only after it "
                               f"(ONNX lists nodes in topological order; a cycle has none)")
    raise node_error(node, f"input '{name}' is not produced by any node")


def _graph_name(proto: Any, fallback: str) -> str:
    return (printable(proto.graph.name).strip() or fallback)[:MAX_NAME]


def import_onnx(model: Any, config: Any = "default", batch: int | None = None) -> Any:
    """Import a quantized ONNX model (a ``ModelProto``, a path or bytes) for hardware ``config``:
    one Program for the batch of its inputs (``batch`` fixes a symbolic first dimension first, see
    :func:`compiler.onnx_import.model.with_batch`). Returns an
    :class:`compiler.onnx_import.imported.Imported`; raises :class:`UnsupportedModel` (one line naming
    the node) for what cannot be mapped."""
    from compiler.network import compile_network
    from compiler.onnx_import.imported import Imported
    from hw.config import load_config

    proto = load_model(model)
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 65535:
            raise UnsupportedModel(f"batch {batch!r} must be an integer 1..65535")
        inits = {t.name for t in proto.graph.initializer}
        for vi in proto.graph.input:  # a batch given fixes a symbolic one ('N'); it does not re-batch a model
            dims = vi.type.tensor_type.shape.dim
            if vi.name not in inits and len(dims) and dims[0].HasField("dim_value") and dims[0].dim_value != batch:
                raise UnsupportedModel(f"batch {batch}: input '{printable(vi.name)}' has a fixed batch of "
                                       f"{dims[0].dim_value}; a batch given fixes a symbolic first dimension "
                                       f"(such as 'N') only")
        proto = with_batch(proto, batch)
    cfg = config if not isinstance(config, str) else load_config(config)
    info = check_model(proto)
    fallback = Path(model).stem if isinstance(model, (str, Path)) else "onnx"
    b = ImportBuilder(_graph_name(proto, fallback or "onnx"))
    batch = None
    for vi in info.inputs():
        dtype = DTYPES.get(np.dtype(info.dtypes.get(vi.name, np.float64)))
        shape = info.shapes[vi.name]
        if dtype is None:
            raise model_error(f"input '{vi.name}' is {np.dtype(info.dtypes.get(vi.name, np.float64))}: float32, int8 "
                              f"or uint8 inputs only")
        if not shape:
            raise model_error(f"input '{vi.name}' is a scalar: a model input is a tensor whose first axis is "
                              f"the batch (a constant, e.g. a scale, belongs in an initializer)")
        if batch is not None and shape[0] != batch:
            raise model_error(f"input '{vi.name}' has batch {shape[0]}, another input {batch} (the model's inputs "
                              f"share their first dimension, the batch; weights are initializers, not inputs)")
        batch = shape[0]
        b.model_inputs[vi.name] = ModelInput(vi.name, dtype, shape)
        b.env[vi.name] = HostFloat(vi.name, shape) if dtype == "float32" else b.graph_input(vi.name, shape, dtype)
    opsets = {op.domain: op.version for op in proto.opset_import}
    for node in info.nodes:
        ins = [_operand(b, info, node, i) for i in node.input]
        if node.op_type == "Shape" or foldable(node, ins):  # computed now, once
            outs = [shape_of(node, ins[0], attrs(node))] if node.op_type == "Shape" else fold(node, ins, opsets)
            b.env.update((name, v) for name, v in zip(node.output, outs) if name)
            continue
        handler = HANDLERS.get(node.op_type)
        in_domain = (node.domain == "com.microsoft") == (node.op_type in MICROSOFT)
        if handler is None or not in_domain:
            dom = f"{node.domain}." if node.domain else ""
            raise node_error(node, f"op {dom}{node.op_type} is not supported (cosim import --help lists the "
                                   f"supported ops)")
        info.check_types(node)
        try:
            outs = handler(b, node, ins, attrs(node))
        except UnsupportedModel:
            raise
        except CompileError as e:  # a graph layer refused: name the ONNX node it was made for
            raise UnsupportedModel(b.names.explain(str(e)) or str(node_error(node, _reason(str(e))))) from None
        for name, v in zip(node.output, outs):
            if name:
                b.env[name] = v
    steps = _outputs(b, info)
    if not b.graph.inputs or all(s.graph_name in {v.name for v in b.graph.inputs} for s in steps):
        raise model_error("nothing runs on the accelerator (every output is an input)")
    try:
        net = compile_network(b.graph, cfg, batch=batch)
    except CompileError as e:
        msg = str(e)
        raise UnsupportedModel(b.names.explain(msg) or f"model: {msg}") from None
    inputs = [mi for mi in b.model_inputs.values()]
    for mi in inputs:
        if not mi.steps:
            raise model_error(f"input '{mi.name}' is not used by the accelerator")
    return Imported(proto, cfg, net, b.graph, inputs, steps, b.host_ops, b.names)


def _reason(msg: str) -> str:
    """The reason of a graph error line (``graph 'g': layer 'l': reason``), without the graph's names."""
    import re

    m = re.match(r"^graph '.*?': layer '.*?': (.*)$", msg)
    return m.group(1) if m else msg


def _outputs(b: ImportBuilder, info: Any) -> list[OutputStep]:
    steps: list[OutputStep] = []
    marked: set[int] = set()
    for vo in info.graph.output:
        v = b.env.get(vo.name)
        if v is None and vo.name in info.consts:
            raise model_error(f"output '{vo.name}' is a constant")
        node = next((n for n in info.nodes if vo.name in n.output), None)
        where = (lambda why: node_error(node, why)) if node is not None else (lambda why: model_error(why))
        scale, zp = None, 0
        if isinstance(v, RealTensor):
            dq = v.dq_node or node
            v = b.unclamped(dq, v)
            scale, zp = v.scale, v.zero_point + shift(v.q.dtype)
            b.host_ops.append(HostOp(node_label(dq), dq.op_type if dq is not None else "DequantizeLinear",
                                     f"dequantizes output '{vo.name}' (scale {scale:.6g}, zero point {zp})"))
            q = v.q
        elif isinstance(v, IntTensor):
            q = v
        else:
            raise where(f"output '{vo.name}' is not a quantized result of the accelerator (the accelerator's "
                        f"results are int8/uint8: end the model in QuantizeLinear, or DequantizeLinear of one)")
        if id(q.value) not in marked and q.value.layer.op != "input":
            b.graph.output(q.value)
            marked.add(id(q.value))
        steps.append(OutputStep(vo.name, q.value.name, tuple(q.shape), q.dtype, scale, zp))
    return steps
