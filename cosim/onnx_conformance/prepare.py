"""A node case made into a model the importer can take: parameters frozen into initializers, and
float cases wrapped in QuantizeLinear/DequantizeLinear with scales taken from the case's data.

* An **integer or quantized case** (QLinearConv, MatMulInteger, QuantizeLinear, an int8 Add, ...)
  keeps its node and opset; every input but the data inputs (the first, both of an Add) becomes
  an initializer holding the case's value, so that weights, scales and zero points are constants,
  as in a real model.
* A **float case** (Conv, Gemm, MatMul, pooling, Relu, Add, Flatten, Reshape) becomes the QDQ form
  onnxruntime's ``quantize_static`` writes, at opset 21: each float data input goes through
  ``QuantizeLinear -> DequantizeLinear`` (int8, asymmetric: the scale and zero point cover the
  input's own range and 0); weights (Conv's W and B, Gemm's B and C, MatMul's B) become constants:
  int8 symmetric weights (per output channel for Conv) and an int32 bias at scale
  ``s_x * s_w``; the op's result goes through ``QuantizeLinear -> DequantizeLinear`` with a scale
  and zero point covering the case's expected output. Ops that only move values (MaxPool,
  GlobalMaxPool, Relu, Flatten, Reshape) keep their input's scale and zero point, as the quantizer
  does, so their results are exact.

The reference of a prepared case is ``onnx.reference.ReferenceEvaluator`` on the prepared model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cosim.onnx_conformance.cases import NodeCase, numpy_arrays

OPSET = 21  # >= 19: the evaluator refuses DequantizeLinear in older float models
FLOAT_OPS = ("Conv", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Relu",
             "Add", "Flatten", "Reshape")
# Ops whose output keeps the input's quantization: the wrapped case's result is exact (no rounding).
SAME_SCALE_OPS = ("MaxPool", "GlobalMaxPool", "Relu", "Flatten", "Reshape")
# Integer ops whose result involves no rounding: the accelerator must match them bit for bit.
EXACT_INTEGER_OPS = ("MatMulInteger", "ConvInteger", "MaxPool", "GlobalMaxPool", "Add", "Relu", "Flatten", "Reshape")
INT8 = (-128, 127)


class Refusal(Exception):
    """A case that cannot be put in a form the accelerator could take (one line)."""


@dataclass
class Prepared:
    """A case ready to run: ``model`` with float or integer data ``inputs``; ``exact`` says whether its
    outputs must match the evaluator bit for bit (else within one output step, ``lsb``)."""

    case: str
    op_type: str
    form: str                      # "integer" (the case as ONNX gives it) or "float, wrapped in Q/DQ"
    model: Any
    inputs: dict[str, np.ndarray]
    exact: bool
    lsb: dict[str, float] = field(default_factory=dict)   # output -> one step (1 for an integer output)


def data_inputs(op_type: str, n_inputs: int) -> list[int]:
    """Which inputs of ``op_type`` stay model inputs (the rest are constants)."""
    return [0, 1] if op_type == "Add" and n_inputs >= 2 else [0]


def is_float_case(case: NodeCase) -> bool:
    """A float case: an op of :data:`FLOAT_OPS` whose data is float32 (a Reshape's shape aside)."""
    if case.op_type not in FLOAT_OPS or not numpy_arrays(case.inputs):
        return False
    floats = [a for a in case.inputs if a.dtype != np.int64]
    return bool(floats) and all(a.dtype == np.float32 for a in floats)


def prepare(case: NodeCase) -> Prepared:
    """The case as a model the importer can take (module docstring); :class:`Refusal` when it cannot be."""
    if not numpy_arrays(case.inputs) or not numpy_arrays(case.outputs):
        dtypes = sorted({_proto_dtype(v) for v in case.inputs + case.outputs if not isinstance(v, np.ndarray)})
        raise Refusal(f"its data is {', '.join(dtypes)}: the accelerator computes on 8-bit integers")
    if any(a.size == 0 for a in case.inputs):
        raise Refusal("an input is empty (a dimension of size 0)")
    if is_float_case(case):
        return _wrap_float(case)
    return _freeze(case)


def _proto_dtype(t: Any) -> str:
    import onnx

    return onnx.helper.tensor_dtype_to_string(t.data_type).replace("TensorProto.", "").lower()


# ---- integer cases -----------------------------------------------------------------------------
def _freeze(case: NodeCase) -> Prepared:
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    g = model.graph
    keep = data_inputs(case.op_type, len(case.inputs))
    values = dict(zip(case.input_names, case.inputs))
    inputs = {}
    for i, vi in enumerate(list(g.input)):
        if i in keep:
            inputs[vi.name] = values[vi.name]
        else:
            g.initializer.append(numpy_helper.from_array(values[vi.name], vi.name))
    for vi in [vi for i, vi in enumerate(g.input) if i not in keep]:
        g.input.remove(vi)
    exact = case.op_type in EXACT_INTEGER_OPS
    lsb = {}
    for name, a in zip(case.output_names, case.outputs):
        lsb[name] = 1.0 if a.dtype.kind in "iu" else _float_output_step(case, values)
    return Prepared(case.name, case.op_type, "integer", model, inputs, exact, lsb)


def _float_output_step(case: NodeCase, values: dict[str, np.ndarray]) -> float:
    """One step of a float output of an integer case (DequantizeLinear's: its smallest scale)."""
    scales = [a for n, a in values.items() if "scale" in n]
    return float(np.min(np.abs(scales[0]))) if scales else 1.0


# ---- float cases -------------------------------------------------------------------------------
def activation_qparams(a: np.ndarray) -> tuple[float, int]:
    """int8 scale and zero point covering ``a``'s range and 0 (asymmetric, as quantize_static's MinMax)."""
    lo, hi = min(float(np.min(a)), 0.0), max(float(np.max(a)), 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zp = int(np.clip(np.rint(INT8[0] - lo / scale), *INT8))
    return float(np.float32(scale)), zp


def weight_qparams(w: np.ndarray, axis: int | None) -> np.ndarray:
    """Symmetric int8 weight scales: ``max|w| / 127`` per tensor (``axis`` None) or per slice of ``axis``."""
    amax = np.max(np.abs(w)) if axis is None else np.max(np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)), axis=1)
    return np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)


def _quantize(a: np.ndarray, scale: Any, zp: Any, lo: int, hi: int, axis: int | None = None) -> np.ndarray:
    s = np.asarray(scale, np.float32)
    z = np.asarray(zp)
    if axis is not None and s.ndim == 1:
        shape = [1] * a.ndim
        shape[axis] = -1
        s, z = s.reshape(shape), z.reshape(shape)
    return np.clip(np.rint(a.astype(np.float32) / s) + z, lo, hi)


class _ModelBuilder:
    """The nodes and initializers of one wrapped model."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, a: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def node(self, op: str, ins: list[str], out: str, **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def qdq(self, x: str, scale: float, zp: int, tag: str) -> str:
        s = self.const(f"{tag}_scale", np.array(scale, np.float32))
        z = self.const(f"{tag}_zero_point", np.array(zp, np.int8))
        q = self.node("QuantizeLinear", [x, s, z], f"{tag}_quantized")
        return self.node("DequantizeLinear", [q, s, z], f"{tag}_dequantized")


def _weight_role(op: str, index: int) -> str | None:
    """What input ``index`` of float op ``op`` is when it is a constant: "weight", "bias", "shape" or None."""
    roles = {"Conv": {1: "weight", 2: "bias"}, "Gemm": {1: "weight", 2: "bias"}, "MatMul": {1: "weight"},
             "Reshape": {1: "shape"}}
    return roles.get(op, {}).get(index)


def _wrap_float(case: NodeCase) -> Prepared:
    from onnx import TensorProto, helper

    op = case.op_type
    node = case.model.graph.node[0]
    values = list(case.inputs)
    keep = data_inputs(op, len(values))
    mb = _ModelBuilder()
    graph_inputs, feeds, act_scale = [], {}, {}
    node_ins: list[str] = []
    for i, (name, a) in enumerate(zip(case.input_names, values)):
        if i in keep:
            s, z = activation_qparams(a)
            act_scale[i] = s
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(a.shape)))
            feeds[name] = a
            node_ins.append(mb.qdq(name, s, z, name))
            continue
        role = _weight_role(op, i)
        if role is None:
            raise Refusal(f"input {i} ('{name}') of {op} is data the wrapping cannot make a constant of")
        if role == "shape":
            node_ins.append(mb.const(name, a))
        elif role == "weight":
            axis = 0 if op == "Conv" else None
            ws = weight_qparams(a, axis)
            wq = _quantize(a, ws, 0, -127, 127, axis).astype(np.int8)
            attrs = {"axis": axis} if axis is not None else {}
            zp = np.zeros(ws.shape, np.int8)
            node_ins.append(mb.node("DequantizeLinear", [mb.const(f"{name}_quantized", wq), mb.const(f"{name}_scale", ws),
                                                         mb.const(f"{name}_zero_point", zp)], f"{name}_dequantized", **attrs))
            act_scale[i] = ws
        else:  # bias: int32 at the scale of the accumulator (input scale times weight scale)
            bs = (np.float32(act_scale[0]) * np.asarray(act_scale[1], np.float32)).astype(np.float32)
            if bs.ndim == 1 and bs.size > 1 and a.ndim == 1 and a.size == bs.size:
                bq = np.rint(a / bs).astype(np.int32)
                attrs = {"axis": 0}
            else:
                bs = np.float32(np.max(bs))
                bq = np.rint(a / bs).astype(np.int32)
                attrs = {}
            node_ins.append(mb.node("DequantizeLinear", [mb.const(f"{name}_quantized", bq), mb.const(f"{name}_scale", bs),
                                                         mb.const(f"{name}_zero_point", np.zeros(np.shape(bs), np.int32))],
                                    f"{name}_dequantized", **attrs))
    out_name = case.output_names[0]
    expected = case.outputs[0]
    raw = mb.node(op, node_ins, f"{out_name}_float", **{a.name: helper.get_attribute_value(a) for a in node.attribute})
    if op in SAME_SCALE_OPS:  # the input's own scale and zero point
        s, z = activation_qparams(values[0])
    else:
        s, z = activation_qparams(expected)
    sc = mb.const(f"{out_name}_scale", np.array(s, np.float32))
    zc = mb.const(f"{out_name}_zero_point", np.array(z, np.int8))
    q = mb.node("QuantizeLinear", [raw, sc, zc], f"{out_name}_quantized")
    mb.nodes.append(helper.make_node("DequantizeLinear", [q, sc, zc], [out_name], name=out_name))
    out_vi = helper.make_tensor_value_info(out_name, TensorProto.FLOAT, list(expected.shape))
    graph = helper.make_graph(mb.nodes, case.name, graph_inputs, [out_vi], initializer=mb.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="cosim-conformance")
    model.ir_version = 10
    return Prepared(case.name, op, "float, wrapped in Q/DQ", model, feeds, op in SAME_SCALE_OPS, {out_name: s})
