"""The QOperator form: QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger and the com.microsoft
QLinearAdd, QLinearGlobalAveragePool, QLinearAveragePool, QGemm and QLinearConcat that onnxruntime's
quantizer writes. Each is its QDQ meaning (DequantizeLinear of the integer operands, the float op,
QuantizeLinear of the result) built with the same :class:`compiler.onnx_import.builder.Builder`
operations, so the two forms give the same layers."""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.onnx_import.builder import Builder
from compiler.onnx_import.errors import node_error
from compiler.onnx_import.geometry import pool_geometry
from compiler.onnx_import.qdq import HANDLERS as QDQ_HANDLERS
from compiler.onnx_import.qdq import Handler, _global, _opt, dequantize_linear, quant_scale, zero_point
from compiler.onnx_import.qdq import add as qdq_add
from compiler.onnx_import.qdq import mul as qdq_mul
from compiler.onnx_import.values import Const, IntTensor, RealTensor


def _int_input(node: Any, v: Any, what: str = "input") -> IntTensor:
    if not isinstance(v, IntTensor):
        raise node_error(node, f"the {what} is not an int8/uint8 tensor computed on the accelerator")
    return v


def _deq(b: Builder, node: Any, x: Any, s: Any, z: Any, what: str = "input") -> RealTensor:
    q = _int_input(node, x, what)
    zp, dtype = zero_point(node, z, q.dtype)
    if dtype != q.dtype:
        raise node_error(node, f"the {what}'s zero point is {dtype}, the tensor {q.dtype}")
    return b.dequantize(node, q, quant_scale(node, s, f"the {what}'s scale"), zp)


def _weight(b: Builder, node: Any, w: Any, s: Any, z: Any, axis: int) -> Const:
    """A constant integer weight with its scale and zero point, as its DequantizeLinear would give it."""
    if not isinstance(w, Const):
        raise node_error(node, "the weight is computed, not a constant: only constant weights are supported")
    ins = [w, s] + ([z] if z is not None else [])
    return dequantize_linear(b, node, ins, {"axis": axis})[0]


def _bias(node: Any, v: Any, scale: np.ndarray) -> Const | None:
    """QLinearConv's int32 bias: quantized with scale ``x_scale * w_scale`` and zero point 0 (spec)."""
    if v is None:
        return None
    if not isinstance(v, Const):
        raise node_error(node, "the bias is not a constant")
    from compiler.onnx_import.values import QuantInfo

    q = np.asarray(v.value)
    return Const(q.astype(np.float64) * scale, QuantInfo(q.astype(np.int32), scale, np.zeros(1, np.int32), 0))


def _scales(w: Const) -> np.ndarray:
    """A quantized weight's scales (one, or one per output channel) as float64."""
    assert w.quant is not None
    return np.asarray(w.quant.scale, np.float64).reshape(-1)


def _out(b: Builder, node: Any, p: Any, s: Any, z: Any) -> IntTensor:
    zp, dtype = zero_point(node, z, "uint8")
    return b.quantize(node, p, quant_scale(node, s, "the output scale"), zp, dtype)


def qlinear_conv(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """QLinearConv: dequantize, Conv, quantize."""
    x = _deq(b, node, ins[0], ins[1], ins[2])
    w = _weight(b, node, ins[3], ins[4], ins[5], 0)
    bias = _bias(node, _opt(ins, 8), x.scale * _scales(w))
    return [_out(b, node, b.conv(node, x, w, bias, at), ins[6], ins[7])]


def qlinear_matmul(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """QLinearMatMul: dequantize, MatMul, quantize."""
    x = _deq(b, node, ins[0], ins[1], ins[2])
    w = _weight(b, node, ins[3], ins[4], ins[5], 1)
    return [_out(b, node, b.dense(node, x, w, None, trans_b=False), ins[6], ins[7])]


def qgemm(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """com.microsoft QGemm: dequantize, Gemm, quantize (a float result without y_scale)."""
    if int(at.get("transA", 0)):
        raise node_error(node, "transA=1 is not supported")
    trans_b = bool(int(at.get("transB", 0)))
    x = _deq(b, node, ins[0], ins[1], ins[2])
    w = _weight(b, node, ins[3], ins[4], ins[5], 0 if trans_b else 1)
    alpha = float(at.get("alpha", 1.0))
    bias = _bias(node, _opt(ins, 6), x.scale * _scales(w) * alpha)
    p = b.dense(node, x, w, bias, trans_b=trans_b, alpha=alpha)
    if _opt(ins, 7) is None:
        return [p]  # a float result: a QuantizeLinear must follow
    return [_out(b, node, p, ins[7], _opt(ins, 8))]


def _integer_zero(node: Any, q: IntTensor, z: Any) -> int:
    zp, dtype = zero_point(node, z, q.dtype)
    if dtype != q.dtype:
        raise node_error(node, f"the zero point is {dtype}, the input {q.dtype}")
    return zp


def conv_integer(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """ConvInteger: the int32 accumulator (scale 1) of a convolution with zero points."""
    q = _int_input(node, ins[0])
    x = b.dequantize(node, q, 1.0, _integer_zero(node, q, _opt(ins, 2)))
    w = _weight(b, node, ins[1], Const(np.ones(1, np.float32)), _opt(ins, 3), 0)
    return [b.conv(node, x, w, None, at, integer=True)]


def matmul_integer(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """MatMulInteger: the int32 accumulator (scale 1) of a matrix product with zero points."""
    q = _int_input(node, ins[0])
    x = b.dequantize(node, q, 1.0, _integer_zero(node, q, _opt(ins, 2)))
    w = _weight(b, node, ins[1], Const(np.ones(1, np.float32)), _opt(ins, 3), 1)
    return [b.dense(node, x, w, None, trans_b=False, integer=True)]


def qlinear_add(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """com.microsoft QLinearAdd (an operand may be a quantized constant)."""
    x = _operand(b, node, ins[0], ins[1], ins[2], "first operand")
    y = _operand(b, node, ins[3], ins[4], ins[5], "second operand")
    return [_out(b, node, qdq_add(b, node, [x, y], {})[0], ins[6], _opt(ins, 7))]


def qlinear_mul(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """com.microsoft QLinearMul by a quantized per-channel constant."""
    x = _operand(b, node, ins[0], ins[1], ins[2], "first operand")
    y = _operand(b, node, ins[3], ins[4], ins[5], "second operand")
    return [_out(b, node, qdq_mul(b, node, [x, y], {})[0], ins[6], _opt(ins, 7))]


def _operand(b: Builder, node: Any, x: Any, s: Any, z: Any, what: str) -> Any:
    """An operand of a QLinear elementwise op: a dequantized tensor, or a dequantized constant."""
    if isinstance(x, Const):
        return dequantize_linear(b, node, [x, s] + ([z] if z is not None else []), {})[0]
    return _deq(b, node, x, s, z, what)


def qlinear_global_average_pool(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """com.microsoft QLinearGlobalAveragePool (channels first)."""
    if int(at.get("channels_last", 0)):
        raise node_error(node, "channels_last=1 is not supported")
    x = _deq(b, node, ins[0], ins[1], ins[2])
    return [_out(b, node, _global(b, node, x), ins[3], ins[4])]


def qlinear_average_pool(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """com.microsoft QLinearAveragePool (channels first)."""
    if int(at.get("channels_last", 0)):
        raise node_error(node, "channels_last=1 is not supported")
    x = _deq(b, node, ins[0], ins[1], ins[2])
    k, s, out, pad = pool_geometry(node, x.shape, at, padded=bool(int(at.get("count_include_pad", 0))))
    return [_out(b, node, b.avg_pool(node, x, k, s, out, pad), ins[3], _opt(ins, 4))]


def qlinear_concat(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """com.microsoft QLinearConcat along channels."""
    if (len(ins) - 2) % 3 or len(ins) < 5:
        raise node_error(node, "expects the output scale and zero point, then (tensor, scale, zero point) triples")
    parts = [_deq(b, node, ins[k], ins[k + 1], ins[k + 2], f"operand {(k - 2) // 3}") for k in range(2, len(ins), 3)]
    axis = int(at.get("axis", 1)) % len(parts[0].shape)
    if axis != 1:
        raise node_error(node, f"concatenation along axis {at.get('axis')}: along channels (axis 1) only")
    return [_out(b, node, b.concat(node, parts), ins[0], ins[1])]


HANDLERS: dict[str, Handler] = {
    **QDQ_HANDLERS,
    "QLinearConv": qlinear_conv, "QLinearMatMul": qlinear_matmul, "ConvInteger": conv_integer,
    "MatMulInteger": matmul_integer, "QLinearAdd": qlinear_add, "QLinearGlobalAveragePool": qlinear_global_average_pool,
    "QLinearAveragePool": qlinear_average_pool, "QGemm": qgemm, "QLinearConcat": qlinear_concat,
    "QLinearMul": qlinear_mul,
}
