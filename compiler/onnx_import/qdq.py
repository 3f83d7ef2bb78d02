"""The standard ONNX ops of the QDQ form: QuantizeLinear/DequantizeLinear around Conv, MatMul, Gemm,
Add, Relu, Clip, MaxPool, AveragePool, GlobalAveragePool, Flatten, Reshape and Concat (plus the
pass-through Identity, Dropout and Cast, and the Mul/Add of a constant that a ConvInteger's scaling
and bias become). Each handler takes the builder, the node, its operands' meanings
(:mod:`compiler.onnx_import.values`) and attributes, and returns its outputs' meanings."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from compiler.onnx_import.builder import Builder
from compiler.onnx_import.errors import node_error
from compiler.onnx_import.geometry import pool_geometry
from compiler.onnx_import.host import quantize_values
from compiler.onnx_import.values import Const, HostFloat, IntTensor, Pending, QuantInfo, RealTensor

Handler = Callable[[Builder, Any, list[Any], dict[str, Any]], list[Any]]
QUANT_DTYPES = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8"}


def scalar(node: Any, v: Any, what: str) -> float:
    """A constant scalar operand (a scale, a bound)."""
    if not isinstance(v, Const):
        raise node_error(node, f"{what} is not a constant")
    a = np.asarray(v.value)
    if a.size != 1:
        raise node_error(node, f"{what} has {a.size} values; one per tensor only (per-channel activation "
                               f"quantization is not supported)")
    return float(a.reshape(-1)[0])


def check_scales(node: Any, scales: Any, what: str = "the scale") -> None:
    """Refuse a quantization scale that is zero, negative or not finite (one line naming the value)."""
    bad = [float(v) for v in np.asarray(scales, np.float64).reshape(-1) if not (math.isfinite(v) and v > 0)]
    if bad:
        raise node_error(node, f"{what} is {bad[0]:g}: a scale must be a positive finite number")


def quant_scale(node: Any, v: Any, what: str = "the scale") -> float:
    """A constant per-tensor quantization scale (positive and finite)."""
    s = scalar(node, v, what)
    check_scales(node, s, what)
    return s


def zero_point(node: Any, v: Any, default: str = "uint8") -> tuple[int, str]:
    """A constant per-tensor zero point and the integer dtype it gives (absent: 0 of ``default``)."""
    if v is None:
        return 0, default
    if not isinstance(v, Const):
        raise node_error(node, "the zero point is not a constant")
    a = np.asarray(v.value)
    if a.dtype not in QUANT_DTYPES:
        raise node_error(node, f"{a.dtype} quantization is not supported (int8 and uint8 only)")
    if a.size != 1:
        raise node_error(node, "per-channel activation zero points are not supported")
    return int(a.reshape(-1)[0]), QUANT_DTYPES[a.dtype]


def real(node: Any, v: Any, what: str = "input") -> RealTensor:
    """An operand that must be a dequantized tensor of the accelerator."""
    if isinstance(v, RealTensor):
        return v
    if isinstance(v, HostFloat):
        raise node_error(node, f"the {what} is the float model input '{v.source}', not quantized (no "
                               f"QuantizeLinear before it)")
    if isinstance(v, Pending):
        raise node_error(node, f"the {what} is the float result of '{v.node.name or v.node.op_type}' with no "
                               f"QuantizeLinear/DequantizeLinear between: the accelerator needs it quantized")
    if isinstance(v, IntTensor):
        raise node_error(node, f"the {what} is an integer tensor; this op takes a dequantized (float) one")
    raise node_error(node, f"the {what} is a constant; this op needs a computed tensor")


def _opt(ins: list[Any], k: int) -> Any:
    return ins[k] if len(ins) > k else None


def quantize_linear(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """QuantizeLinear: of a float input on the host, of a constant now, else the layers of its operand's
    output quantization."""
    x, s, z = ins[0], ins[1], _opt(ins, 2)
    if int(at.get("block_size", 0)):
        raise node_error(node, "blocked quantization is not supported")
    default = "uint8"
    if "output_dtype" in at and at["output_dtype"]:
        from onnx import helper

        dt = np.dtype(helper.tensor_dtype_to_np_dtype(at["output_dtype"]))
        if dt not in QUANT_DTYPES:
            raise node_error(node, f"{dt} quantization is not supported (int8 and uint8 only)")
        default = QUANT_DTYPES[dt]
    if isinstance(x, Const):  # a constant quantized at import time (float weights: per tensor or per axis)
        q = np.asarray(x.value)
        scale, zp = _constant_scales(node, q, s, z, at, np.dtype(default))
        dtype = QUANT_DTYPES.get(zp.dtype)
        if dtype is None:
            raise node_error(node, f"{zp.dtype} quantization is not supported (int8 and uint8 only)")
        sb, zb = _per_axis(q, scale, zp, at)
        return [Const(quantize_values(q, sb, zb, dtype).astype(dtype))]
    scale = quant_scale(node, s)
    zp, dtype = zero_point(node, z, default)
    if isinstance(x, HostFloat):
        return [b.host_quantize(node, x, scale, zp, dtype)]
    if isinstance(x, IntTensor):
        raise node_error(node, "quantizes an integer tensor")
    if not isinstance(x, (RealTensor, Pending)):
        raise node_error(node, "quantizes a tensor that is not computed on the accelerator")
    return [b.quantize(node, x, scale, zp, dtype)]


def dequantize_linear(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """DequantizeLinear: a quantized constant keeps its integers, a tensor of the accelerator becomes its real view."""
    x, s, z = ins[0], ins[1], _opt(ins, 2)
    if isinstance(x, Const):
        q = np.asarray(x.value)
        scale, zp = _constant_scales(node, q, s, z, at, q.dtype)
        sb, zb = _per_axis(q, scale, zp, at)
        value = (q.astype(np.int64) - zb.astype(np.int64)).astype(np.float32) * sb
        return [Const(value, QuantInfo(q, scale.reshape(-1), zp.reshape(-1), int(at.get("axis", 1)) % max(q.ndim, 1)))]
    if isinstance(x, Pending) and x.integer:  # the int32 accumulator of a ConvInteger/MatMulInteger
        if z is not None and (not isinstance(z, Const) or np.any(np.asarray(z.value))):
            raise node_error(node, "dequantizes an int32 accumulator with a non-zero zero point")
        return [_scaled(node, x, quant_scale(node, s))]
    if not isinstance(x, IntTensor):
        raise node_error(node, "dequantizes a tensor that is not a quantized result of the accelerator")
    zp, dtype = zero_point(node, z, x.dtype)
    if dtype != x.dtype:
        raise node_error(node, f"the zero point is {dtype}, the tensor {x.dtype}")
    return [b.dequantize(node, x, quant_scale(node, s), zp)]


def _constant_scales(node: Any, q: np.ndarray, s: Any, z: Any, at: dict[str, Any],
                     zp_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The scale and zero point with which a constant ``q`` is (de)quantized: constants, positive finite
    scales, one value or one per entry of the ``axis`` attribute (a 1-D list); no zero point is 0 of
    ``zp_dtype``."""
    if not isinstance(s, Const) or (z is not None and not isinstance(z, Const)):
        raise node_error(node, "the scale or zero point is not a constant")
    scale = np.asarray(s.value, np.float32)
    check_scales(node, scale)
    zp = np.zeros((), zp_dtype) if z is None else np.asarray(z.value)
    axis = int(at.get("axis", 1)) % max(q.ndim, 1)
    for what, v in (("scale", scale), ("zero point", zp)):
        if v.size > 1 and (q.ndim == 0 or v.ndim != 1 or v.size != q.shape[axis]):
            raise node_error(node, f"{v.size} {what}s for axis {at.get('axis', 1)} of a {list(q.shape)} "
                                   f"constant: per-axis needs one per entry of that axis (a 1-D list)")
    return scale, zp


def _per_axis(q: np.ndarray, scale: np.ndarray, zp: np.ndarray, at: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``scale`` and ``zp`` shaped to broadcast against ``q`` along the ``axis`` attribute (or as scalars)."""
    if scale.size > 1:
        shape = [1] * q.ndim
        shape[int(at.get("axis", 1)) % max(q.ndim, 1)] = -1
        return scale.reshape(shape), zp.reshape(shape) if zp.size > 1 else zp
    return scale.reshape(()), zp.reshape(()) if zp.size == 1 else zp


def _scaled(node: Any, p: Pending, c: Any) -> Pending:
    """``p * c`` for a convolution/dense result and a constant (scalar or per output channel): the scale of a
    channel times ``|c|``, and its weights and bias negated where ``c < 0``."""
    if p.kind not in ("conv", "dense") or p.clamped:
        raise node_error(node, "multiplies a result that is not a plain convolution or matrix product")
    per = _per_channel(node, np.asarray(c, np.float64), p)
    if np.any(per == 0) or not np.all(np.isfinite(per)):
        raise node_error(node, "multiplies by zero or a non-finite constant")
    args, bias = p.args, p.bias
    neg = per < 0
    if neg.any():
        w = np.asarray(args["weight"])
        if np.any(w[neg] == -128):
            raise node_error(node, "multiplies by a negative constant a channel whose weights hold -128 (its "
                                   "negation does not fit int8)")
        w = w.copy()
        w[neg] = -w[neg]
        args = {**args, "weight": w}
        if bias is not None:
            bias = np.where(neg, -bias, bias)
    return Pending(p.kind, p.node, p.shape, args, p.scale * np.abs(per), bias, p.lo, p.hi, False)


def batch_normalization(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Inference batch normalization: per channel ``x * a + c``, ``a = scale / sqrt(var + eps)``, ``c = bias -
    mean * a``, folded into the convolution before it (or an identity layer)."""
    if len(node.output) > 1 and any(node.output[1:]):
        raise node_error(node, "the training outputs (running mean and variance) are not supported")
    x, consts = ins[0], ins[1:5]
    if not all(isinstance(v, Const) for v in consts):
        raise node_error(node, "scale, bias, mean and variance must be constants")
    scale, bias, mean, var = (np.asarray(v.value, np.float64).reshape(-1) for v in consts)
    a = scale / np.sqrt(var + float(at.get("epsilon", 1e-5)))
    c = bias - mean * a
    if isinstance(x, RealTensor):
        x = b.identity(node, x)
    if not isinstance(x, Pending):
        real(node, x)
    per_channel = (-1, *[1] * (len(x.shape) - 2))  # ONNX broadcasting: aligned to the channel axis
    p = _scaled(node, x, a.reshape(per_channel))
    return add(b, node, [p, Const(c.astype(np.float32).reshape(per_channel))], {})


def _per_channel(node: Any, a: np.ndarray, p: Pending) -> np.ndarray:
    """A constant broadcast along ``p``'s channel axis (axis 1): its ``(O,)`` values."""
    o = p.shape[1]
    if a.size == 1:
        return np.full(o, float(a.reshape(-1)[0]))
    shape = [1] * len(p.shape)
    shape[1] = o
    sq = a.reshape(a.shape[-(len(p.shape)):]) if a.ndim > len(p.shape) else a
    want = tuple(shape[len(p.shape) - sq.ndim:])
    if sq.shape != want:
        raise node_error(node, f"constant of shape {list(a.shape)} is not one value per channel of "
                               f"{list(p.shape)}")
    return sq.reshape(-1).astype(np.float64)


def conv(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Conv of a dequantized tensor by a quantized constant weight."""
    return [b.conv(node, real(node, ins[0]), ins[1], _opt(ins, 2), at)]


def matmul(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """MatMul ``(N, F) @ (F, O)`` by a quantized constant."""
    return [b.dense(node, real(node, ins[0]), ins[1], None, trans_b=False)]


def gemm(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Gemm ``alpha * A @ B (+ beta * C)``, B a quantized constant (transA=0)."""
    if int(at.get("transA", 0)):
        raise node_error(node, "transA=1 is not supported")
    c = _opt(ins, 2)
    beta = float(at.get("beta", 1.0))
    if isinstance(c, Const) and beta != 1.0:
        c = Const(np.asarray(c.value, np.float64) * beta)
    return [b.dense(node, real(node, ins[0]), ins[1], c, trans_b=bool(int(at.get("transB", 0))),
                    alpha=float(at.get("alpha", 1.0)))]


def add(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Add of two dequantized tensors, or of a per-channel constant (folded into a bias)."""
    x, y = ins
    if isinstance(x, Const):
        x, y = y, x
    if isinstance(x, RealTensor) and isinstance(y, Const):  # a per-channel constant: the bias of an identity layer
        x = b.identity(node, x)
    if isinstance(x, Pending) and isinstance(y, Const):  # a bias added after a convolution/matrix product
        if x.kind not in ("conv", "dense") or x.clamped:
            raise node_error(node, "adds a constant to a result that is not a plain convolution or matrix product")
        per = _per_channel(node, np.asarray(y.value, np.float64), x)
        bias = (x.bias if x.bias is not None else np.zeros(x.shape[1], np.int64)) + np.rint(per / x.scale).astype(
            np.int64)
        return [Pending(x.kind, x.node, x.shape, x.args, x.scale, bias, x.lo, x.hi, x.integer)]
    return [b.add(node, real(node, x, "first operand"), real(node, y, "second operand"))]


def mul(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Mul by a per-channel constant (folded into the scale of the layer before, or of an identity layer)."""
    x, y = ins
    if isinstance(x, Const):
        x, y = y, x
    if isinstance(x, RealTensor) and isinstance(y, Const):  # a per-channel scale of an identity layer
        x = b.identity(node, x)
    if isinstance(x, Pending) and isinstance(y, Const):
        return [_scaled(node, x, y.value)]
    raise node_error(node, "only the multiplication of a convolution/matrix product by a constant scale is "
                           "supported")


def _clamp(node: Any, v: Any, lo: float, hi: float, b: Builder) -> Any:
    if isinstance(v, (RealTensor, Pending)):
        v2 = RealTensor(v.q, v.scale, v.zero_point, v.lo, v.hi, v.dq_node) if isinstance(v, RealTensor) else \
            Pending(v.kind, v.node, v.shape, v.args, v.scale, v.bias, v.lo, v.hi, v.integer)
        v2.lo, v2.hi = max(v.lo, lo), min(v.hi, hi)
        return v2
    if isinstance(v, IntTensor):
        from compiler.onnx_import.values import shift

        if lo == 0 and hi == math.inf:
            return b.int_relu(node, v)
        s = shift(v.dtype)
        qlo = -128 if lo == -math.inf else max(-128, min(127, math.ceil(lo) - s))
        qhi = 127 if hi == math.inf else max(-128, min(127, math.floor(hi) - s))
        out = b.graph.requantize(v.value, scale=1.0, lo=qlo, hi=qhi, name=b.layer_name(node))
        return IntTensor(out, v.dtype, v.shape)
    real(node, v)  # raises, saying what the operand is
    raise AssertionError(v)


def relu(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Relu: a clamp at 0, applied by the next requantization."""
    return [_clamp(node, ins[0], 0.0, math.inf, b)]


def clip(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Clip: a clamp applied by the next requantization."""
    lo = at.get("min", -math.inf)
    hi = at.get("max", math.inf)
    if _opt(ins, 1) is not None:
        lo = scalar(node, ins[1], "min")
    if _opt(ins, 2) is not None:
        hi = scalar(node, ins[2], "max")
    return [_clamp(node, ins[0], float(lo), float(hi), b)]


def max_pool(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """MaxPool of an integer or dequantized tensor (pads and ceil_mode pad with the minimum)."""
    if len(node.output) > 1 and node.output[1]:
        raise node_error(node, "the Indices output is not supported")
    x = ins[0]
    if not isinstance(x, (RealTensor, IntTensor)):
        real(node, x)
    k, s, out, pad = pool_geometry(node, x.shape, at, padded=True, partial=True)
    return [b.max_pool(node, x, k, s, out, pad)]


def global_max_pool(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """GlobalMaxPool of an (N, C, H, W) input (a non-square one padded to a square with the minimum)."""
    x = ins[0]
    if not isinstance(x, (RealTensor, IntTensor)):
        real(node, x)
    if len(x.shape) != 4:
        raise node_error(node, f"input of shape {list(x.shape)}: (N, C, H, W) only")
    h, w = x.shape[2], x.shape[3]
    k = max(h, w)
    return [b.max_pool(node, x, k, k, (1, 1), (0, 0, k - h, k - w))]


def average_pool(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """AveragePool (padding only when counted, count_include_pad=1)."""
    x = real(node, ins[0])
    k, s, out, pad = pool_geometry(node, x.shape, at, padded=bool(int(at.get("count_include_pad", 0))))
    return [b.avg_pool(node, x, k, s, out, pad)]


def global_average_pool(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """GlobalAveragePool of an (N, C, H, W) input."""
    x = real(node, ins[0])
    return [_global(b, node, x)]


def _global(b: Builder, node: Any, x: RealTensor) -> Pending:
    if len(x.shape) != 4:
        raise node_error(node, f"input of shape {list(x.shape)}: (N, C, H, W) only")
    return b.global_avg_pool(node, x)


def _target_shape(node: Any, x_shape: tuple[int, ...], spec: np.ndarray, allowzero: bool) -> tuple[int, ...]:
    dims = [int(d) for d in spec.reshape(-1)]
    out = [x_shape[k] if d == 0 and not allowzero and k < len(x_shape) else d for k, d in enumerate(dims)]
    if out.count(-1) > 1:
        raise node_error(node, f"shape {dims} has more than one -1")
    total = int(np.prod(x_shape))
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = total // rest if rest else 0
    if int(np.prod(out)) != total:
        raise node_error(node, f"cannot reshape {list(x_shape)} to {dims}")
    return tuple(out)


def _reshaped(b: Builder, node: Any, x: Any, target: tuple[int, ...]) -> Any:
    if isinstance(x, HostFloat):  # the host reshapes a float input before quantizing it
        b.host_reshape(node)
        return HostFloat(x.source, target, [*x.steps, node])
    if not isinstance(x, (RealTensor, IntTensor)):
        real(node, x)
    if target == tuple(x.shape):
        return x
    if target[0] != x.shape[0]:
        raise node_error(node, f"reshapes the batch dimension ({list(x.shape)} -> {list(target)})")
    if len(target) == 2:
        return b.flatten(node, x)
    raise node_error(node, f"reshape {list(x.shape)} -> {list(target)}: only flattening to (N, F) is supported")


def flatten(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Flatten to ``(N, F)`` (axis 1), on the host for a float input."""
    x = ins[0]
    shape = x.shape
    axis = int(at.get("axis", 1)) % max(len(shape), 1)
    target = (int(np.prod(shape[:axis])), int(np.prod(shape[axis:])))
    return [_reshaped(b, node, x, target)]


def reshape(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Reshape to ``(N, F)`` (a flatten) or to the same shape, on the host for a float input."""
    if not isinstance(ins[1], Const):
        raise node_error(node, "the target shape is not a constant")
    x = ins[0]
    return [_reshaped(b, node, x, _target_shape(node, tuple(x.shape), np.asarray(ins[1].value),
                                                bool(int(at.get("allowzero", 0)))))]


def concat(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Concat of dequantized tensors along channels."""
    parts = [real(node, v, f"operand {k}") for k, v in enumerate(ins)]
    axis = int(at.get("axis", 1)) % len(parts[0].shape)
    if axis != 1:
        raise node_error(node, f"concatenation along axis {at.get('axis')}: along channels (axis 1) only")
    if len(parts) == 1:
        return [parts[0]]
    return [b.concat(node, parts)]


def identity(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Identity and inference Dropout: the operand itself."""
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        raise node_error(node, "the mask output is not supported")
    return [ins[0]]


def cast(b: Builder, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    """Cast between a ConvInteger/MatMulInteger accumulator's int32 and float, or of a constant."""
    from onnx import TensorProto

    x = ins[0]
    to = int(at.get("to", 0))
    if isinstance(x, Pending) and to in (TensorProto.FLOAT, TensorProto.INT32):  # int32 accumulator <-> float
        return [Pending(x.kind, x.node, x.shape, x.args, x.scale, x.bias, x.lo, x.hi, to == TensorProto.INT32)]
    if isinstance(x, Const):
        from onnx import helper

        return [Const(np.asarray(x.value).astype(helper.tensor_dtype_to_np_dtype(to)))]
    raise node_error(node, "only the Cast of a ConvInteger/MatMulInteger accumulator to float is supported")


HANDLERS: dict[str, Handler] = {
    "QuantizeLinear": quantize_linear, "DequantizeLinear": dequantize_linear, "Conv": conv, "MatMul": matmul,
    "Gemm": gemm, "Add": add, "Mul": mul, "Relu": relu, "Clip": clip, "MaxPool": max_pool,
    "AveragePool": average_pool, "GlobalAveragePool": global_average_pool,
    "GlobalMaxPool": global_max_pool,
    "BatchNormalization": batch_normalization, "Flatten": flatten, "Reshape": reshape,
    "Concat": concat, "Identity": identity, "Dropout": identity, "Cast": cast,
}
