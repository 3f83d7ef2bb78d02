"""The graph under construction and the quantized operations both ONNX forms reduce to.

QDQ ``DequantizeLinear -> Conv -> QuantizeLinear`` and QOperator ``QLinearConv`` mean the same
integer computation, so both are written with the operations here: dequantize, quantize, conv,
dense, add, pools, flatten, clamp. An operation on real values gives a :class:`Pending` result;
:meth:`Builder.quantize` builds its layers once the output scale is known (a QuantizeLinear).

Integer meaning (contract of :mod:`compiler.graph`): a convolution accumulates
``(q - zx) * (w - zw)`` in int32 with the bias ``round(b / (sx * sw))`` (the quantizer's int32 bias as
it is), and ``requantize(scale=sx*sw/sy, zero_point=zy)`` gives the output; an addition scales both
operands by ``s/sy * 2**k`` into int32 (``k`` keeps the sum's precision) and requantizes by
``2**-k``. Relu and Clip become the requantize's ``lo``/``hi`` (``round(min/sy) + zy``), exactly what
ONNX's rounding gives, since rounding is monotone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler.fixed_point import SCALE_MAX, SCALE_MIN, scale_ok
from compiler.graph import Graph
from compiler.onnx_import.errors import node_error
from compiler.onnx_import.names import NameTable
from compiler.onnx_import.values import INT8_MAX, INT8_MIN, Const, IntTensor, Pending, RealTensor, shift

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
# The addition's extra precision: the operands are scaled by s/sy * 2**ADD_PRECISION_BITS (fewer when the
# sum could overflow int32) and the sum requantized by 2**-ADD_PRECISION_BITS.
ADD_PRECISION_BITS = 12
# The weight of the identity convolutions that place a concatenation's parts (a power of two in int8).
CONCAT_GAIN = 64
# The weight of the identity convolution that sums a padded average pool's windows.
POOL_GAIN = 64
# The weight of the identity layer that an elementwise constant (Add/Mul of a per-channel constant) folds
# into: a bias of a 64 times finer step.
IDENTITY_GAIN = 64


def round_half_even(x: float) -> int:
    """ONNX's rounding."""
    return int(np.rint(x))


def _per_output(node: Any, a: np.ndarray, o: int) -> np.ndarray:
    """A bias's ``(O,)`` values: a scalar, ``(O,)``, or rows that are all equal (a Gemm's ``(N, O)`` C)."""
    a = np.asarray(a)
    if a.size == 1:
        return np.full(o, a.reshape(-1)[0])
    if a.shape[-1:] != (o,):
        raise node_error(node, f"the bias of shape {list(a.shape)} is not one value per output ({o})")
    rows = a.reshape(-1, o)
    if np.any(rows != rows[0]):
        raise node_error(node, "the bias differs from sample to sample; one bias per output only")
    return rows[0].copy()


class Builder:
    """The graph being built for one model, the names, and every ONNX tensor's meaning."""

    def __init__(self, graph_name: str):
        self.names = NameTable()
        self.graph = Graph(graph_name)
        self.env: dict[str, Any] = {}

    def layer_name(self, node: Any, what: str = "") -> str:
        """A fresh graph name for a layer of ``node`` (its ONNX name, ``what`` appended)."""
        from compiler.onnx_import.errors import node_label

        label = node_label(node)
        return self.names.take(label + (f" ({what})" if what else ""), node.op_type)

    # ---- quantization -------------------------------------------------------------------------
    def dequantize(self, node: Any, q: IntTensor, scale: float, zero_point: int) -> RealTensor:
        """``scale * (q - zero_point)`` (``zero_point`` the ONNX one, of q's dtype)."""
        return RealTensor(q, float(scale), int(zero_point) - shift(q.dtype), dq_node=node)

    def clamp_range(self, node: Any, lo: float, hi: float, scale: float, zp8: int) -> tuple[int, int]:
        """The int8 bounds that a real clamp ``[lo, hi]`` becomes under the output quantization."""
        qlo = INT8_MIN if lo == -math.inf else max(INT8_MIN, min(INT8_MAX, round_half_even(lo / scale) + zp8))
        qhi = INT8_MAX if hi == math.inf else max(INT8_MIN, min(INT8_MAX, round_half_even(hi / scale) + zp8))
        if qlo > qhi:
            raise node_error(node, f"the clamp [{lo}, {hi}] is empty")
        return qlo, qhi

    def quantize(self, node: Any, v: Any, scale: float, zero_point: int, dtype: str) -> IntTensor:
        """QuantizeLinear of a real tensor or pending result: ``clip(round(v / scale) + zero_point)``."""
        if not scale > 0 or not math.isfinite(scale):
            raise node_error(node, f"scale {scale} must be a positive number")
        zp8 = int(zero_point) - shift(dtype)
        qlo, qhi = self.clamp_range(node, v.lo, v.hi, scale, zp8)
        name = self.layer_name(node)
        g = self.graph
        if isinstance(v, RealTensor):
            if v.scale == scale and v.zero_point == zp8:
                if (qlo, qhi) == (INT8_MIN, INT8_MAX):
                    return IntTensor(v.q.value, dtype, v.shape)
                if qhi == INT8_MAX and qlo == zp8:
                    return IntTensor(g.relu(v.q.value, zero_point=zp8, name=name), dtype, v.shape)
            out = g.requantize(v.q.value, scale=v.scale / scale, input_zero_point=v.zero_point, zero_point=zp8,
                               lo=qlo, hi=qhi, name=name)
            return IntTensor(out, dtype, v.shape)
        if not isinstance(v, Pending):
            raise node_error(node, "quantizes a tensor that is not computed on the accelerator")
        return IntTensor(self._build(v, scale, zp8, qlo, qhi, name), dtype, v.shape)

    def _build(self, p: Pending, sy: float, zy: int, lo: int, hi: int, qname: str) -> Any:
        g, a = self.graph, p.args
        if p.kind in ("conv", "dense"):
            bias = None
            if p.bias is not None:
                if p.bias.min() < INT32_MIN or p.bias.max() > INT32_MAX:
                    raise node_error(p.node, "the bias does not fit int32 accumulators")
                bias = p.bias.astype(np.int32)
            name = self.layer_name(p.node)
            if p.kind == "conv":
                acc = g.conv2d(a["x"], a["weight"], bias, stride=a["stride"], pad=a["pad"],
                               input_zero_point=a["x_zero_point"], name=name)
            else:
                acc = g.dense(a["x"], a["weight"], bias, input_zero_point=a["x_zero_point"], name=name)
            scale = p.scale / sy
            bad = [float(v) for v in np.ravel(scale) if not scale_ok(float(v))]
            if bad:  # the multiplier is this node's (input x weight scale) over the output's: say so
                raise node_error(p.node, f"its requantization multiplier (input scale x weight scale / output scale "
                                         f"{sy:g}) is {bad[0]:g}, outside the fixed-point multiplier's range "
                                         f"[2**-32, 2**15] ({SCALE_MIN:g}..{SCALE_MAX:g})")
            s: Any = float(scale[0]) if np.all(scale == scale[0]) else scale.astype(np.float64)
            return g.requantize(acc, scale=s, zero_point=zy, lo=lo, hi=hi, name=qname)
        if p.kind == "add":
            x, y = a["a"], a["b"]
            ra, rb = x.scale / sy, y.scale / sy
            # room in int32 for the two scaled operands (each at most 255 away from its zero point)
            room = math.floor(math.log2((2**30) / (256 * (ra + rb))))
            k = max(0, min(ADD_PRECISION_BITS, room))
            acc = g.add(x.q.value, y.q.value, a_scale=ra * 2**k, b_scale=rb * 2**k, a_zero_point=x.zero_point,
                        b_zero_point=y.zero_point, name=self.layer_name(p.node))
            return g.requantize(acc, scale=2.0**-k, zero_point=zy, lo=lo, hi=hi, name=qname)
        if p.kind == "avg_pool":
            x, k, s, pad = a["x"], a["kernel"], a["stride"], a.get("pad", (0, 0, 0, 0))
            area = a.get("area") or k * k
            scale = x.scale / (sy * area)
            value = x.q.value
            if a.get("area") is not None and any(pad):
                # a global average of a non-square input: padded to a square with the zero point (the real 0,
                # which adds nothing to the window sum), divided by the input's own area
                value, pad = self._padded(p.node, value, x.shape[1], pad, x.zero_point), (0, 0, 0, 0)
            if not any(pad):  # the pooling layer (its rescaling has the headroom of the window sum's bound)
                out = g.avg_pool(value, k, s, scale=scale, input_zero_point=x.zero_point, zero_point=zy,
                                 name=self.layer_name(p.node))
                if (lo, hi) != (INT8_MIN, INT8_MAX):
                    out = g.requantize(out, scale=1.0, input_zero_point=zy, zero_point=zy, lo=lo, hi=hi, name=qname)
                return out
            # Padded: the window sum is a convolution by POOL_GAIN * identity, whose zero-point padding is the
            # real 0 that count_include_pad averages, requantized by a POOL_GAIN times smaller scale.
            c = x.shape[1]
            w = np.zeros((c, c, k, k), np.int8)
            w[np.arange(c), np.arange(c)] = POOL_GAIN
            acc = g.conv2d(x.q.value, w, None, stride=s, pad=pad, input_zero_point=x.zero_point,
                           name=self.layer_name(p.node))
            return g.requantize(acc, scale=scale / POOL_GAIN, zero_point=zy, lo=lo, hi=hi, name=qname)
        if p.kind == "concat":
            return self._concat(p, sy, zy, lo, hi, qname)
        raise AssertionError(p.kind)

    def _concat(self, p: Pending, sy: float, zy: int, lo: int, hi: int, qname: str) -> Any:
        """Channel concatenation: each part goes to its channels of the output by a 1x1 convolution
        with an identity block (zero elsewhere) requantized to the output scale, so the other channels
        hold the zero point; the parts are then added (exactly: all but one are at the zero point)."""
        g = self.graph
        parts: list[RealTensor] = p.args["parts"]
        total = sum(t.shape[1] for t in parts)
        spatial = len(parts[0].shape) != 2
        placed, at = [], 0
        for k, t in enumerate(parts):
            c = t.shape[1]
            w = np.zeros((total, c), np.int8)
            # 64 * identity: the requantization's scale is then 64 times smaller, which keeps the rounding of
            # the fixed-point multiply below a step (its double rounding costs up to half a step for a scale
            # near 1/4)
            w[at:at + c] = CONCAT_GAIN * np.eye(c, dtype=np.int8)
            at += c
            name = self.layer_name(p.node, f"part {k}")
            if spatial:
                acc = g.conv2d(t.q.value, w.reshape(total, c, 1, 1), None, input_zero_point=t.zero_point, name=name)
            else:
                acc = g.dense(t.q.value, w, None, input_zero_point=t.zero_point, name=name)
            placed.append(g.requantize(acc, scale=t.scale / sy / CONCAT_GAIN, zero_point=zy, lo=lo, hi=hi,
                                       name=self.layer_name(p.node, f"part {k} requantize")))
        out = placed[0]
        for k, nxt in enumerate(placed[1:]):
            s = g.add(out, nxt, a_scale=1.0, b_scale=1.0, a_zero_point=zy, b_zero_point=zy,
                      name=self.layer_name(p.node, f"sum {k}"))
            out = g.requantize(s, scale=1.0, zero_point=zy, lo=lo, hi=hi,
                               name=qname if k == len(placed) - 2 else self.layer_name(p.node, f"sum {k} requantize"))
        return out

    def unclamped(self, node: Any, v: RealTensor) -> RealTensor:
        """``v`` with its pending clamp applied (a layer), for an operation that needs the plain value."""
        if not v.clamped:
            return v
        q = self.quantize(node, v, v.scale, v.zero_point + shift(v.q.dtype), v.q.dtype)
        return RealTensor(q, v.scale, v.zero_point, dq_node=v.dq_node)

    # ---- real-domain operations ---------------------------------------------------------------
    def weights(self, node: Any, w: Any, out_axis: int, what: str = "weight") -> tuple[np.ndarray, np.ndarray]:
        """A quantized constant's int8 weights ``q - zero_point`` and per-output scales ``(O,)``."""
        if not isinstance(w, Const):
            raise node_error(node, f"the {what} is computed, not a constant: only constant weights are supported")
        if w.quant is None:
            raise node_error(node, f"the {what} is float, not a DequantizeLinear of integers: quantize the model "
                                   f"(onnxruntime.quantization.quantize_static)")
        qi = w.quant
        if qi.q.dtype not in (np.int8, np.uint8):
            raise node_error(node, f"the {what} is {qi.q.dtype}; int8 or uint8 weights are supported")
        o = qi.q.shape[out_axis]
        scale, zp = np.asarray(qi.scale, np.float64), np.asarray(qi.zero_point, np.int64)
        if scale.size > 1 and qi.axis % qi.q.ndim != out_axis % qi.q.ndim:
            raise node_error(node, f"the {what} is quantized per axis {qi.axis}, not per output channel")
        shape = [1] * qi.q.ndim
        shape[out_axis] = -1
        zp_b = zp.reshape(shape) if zp.size > 1 else zp
        ints = qi.q.astype(np.int64) - zp_b
        if ints.min() < INT8_MIN or ints.max() > INT8_MAX:
            raise node_error(node, f"the {what}'s integers minus its zero point do not fit int8 "
                                   f"({ints.min()}..{ints.max()})")
        scales = np.broadcast_to(scale.reshape(-1), (o,)).astype(np.float64) if scale.size > 1 else \
            np.full(o, float(scale.reshape(-1)[0]))
        return ints.astype(np.int8), scales

    def bias(self, node: Any, b: Any, acc_scale: np.ndarray) -> np.ndarray | None:
        """The int64 accumulator bias ``(O,)`` of a constant bias (the quantizer's int32 one as it is when
        its scale is the accumulator's)."""
        if b is None:
            return None
        if not isinstance(b, Const):
            raise node_error(node, "the bias is computed, not a constant")
        o = acc_scale.size
        if b.quant is not None and b.quant.q.dtype == np.int32 and not np.any(b.quant.zero_point):
            s = np.asarray(b.quant.scale, np.float64).reshape(-1)
            q = _per_output(node, b.quant.q, o)
            if s.size in (1, o) and np.allclose(np.broadcast_to(s, (o,)), acc_scale, rtol=1e-6, atol=0):
                return q.astype(np.int64)
        v = _per_output(node, np.asarray(b.value, np.float64), o)
        return np.rint(v / acc_scale).astype(np.int64)

    def conv(self, node: Any, x: RealTensor, w: Any, b: Any, at: dict[str, Any], integer: bool = False) -> Pending:
        """Conv of a real tensor by quantized weights (ONNX attributes ``at``)."""
        from compiler.onnx_import.geometry import conv_geometry

        x = self.unclamped(node, x)
        if len(x.shape) != 4:
            raise node_error(node, f"input of shape {list(x.shape)}: 2-D convolutions (N, C, H, W) only")
        ints, ws = self.weights(node, w, 0)
        weight, stride, pad, out_hw = conv_geometry(node, x.shape, ints, at)
        scale = x.scale * ws
        return Pending("conv", node, (x.shape[0], weight.shape[0], *out_hw),
                       {"x": x.q.value, "weight": weight, "stride": stride, "pad": pad,
                        "x_zero_point": x.zero_point}, scale=scale, bias=self.bias(node, b, scale), integer=integer)

    def dense(self, node: Any, x: RealTensor, w: Any, b: Any, trans_b: bool, alpha: float = 1.0,
              integer: bool = False) -> Pending:
        """``x @ W (+ b)``: ``x`` of shape (N, F), ``W`` a quantized constant (F, O), or (O, F) when
        ``trans_b``."""
        x = self.unclamped(node, x)
        if len(x.shape) != 2:
            raise node_error(node, f"input of shape {list(x.shape)}: (N, F) only (flatten it first)")
        ints, ws = self.weights(node, w, 0 if trans_b else 1)
        weight = ints if trans_b else ints.T
        if weight.ndim != 2 or weight.shape[1] != x.shape[1]:
            raise node_error(node, f"weight of shape {list(ints.shape)} does not take {x.shape[1]} features")
        if alpha == 0 or not math.isfinite(alpha):
            raise node_error(node, f"alpha {alpha} must be a non-zero finite number")
        if alpha < 0:  # alpha * x @ W = |alpha| * x @ (-W)
            if np.any(weight == INT8_MIN):
                raise node_error(node, f"alpha {alpha} is negative and the weights hold -128 (its negation does "
                                       f"not fit int8)")
            weight = -weight
        scale = x.scale * ws * abs(alpha)
        return Pending("dense", node, (x.shape[0], weight.shape[0]),
                       {"x": x.q.value, "weight": np.ascontiguousarray(weight), "x_zero_point": x.zero_point},
                       scale=scale, bias=self.bias(node, b, scale), integer=integer)

    def identity(self, node: Any, x: RealTensor) -> Pending:
        """``x`` as a convolution/dense result (a 1x1 convolution or dense layer by IDENTITY_GAIN times the
        identity), so that a constant added to it or multiplying it folds into a bias or a scale."""
        x = self.unclamped(node, x)
        c = x.shape[1]
        eye = IDENTITY_GAIN * np.eye(c, dtype=np.int8)
        scale = np.full(c, x.scale / IDENTITY_GAIN)
        if len(x.shape) in (3, 4):  # (N, C, L) is held as (C, L, 1)
            return Pending("conv", node, x.shape, {"x": x.q.value, "weight": eye.reshape(c, c, 1, 1), "stride": 1,
                                                   "pad": (0, 0, 0, 0), "x_zero_point": x.zero_point}, scale=scale)
        if len(x.shape) == 2:
            return Pending("dense", node, x.shape, {"x": x.q.value, "weight": eye, "x_zero_point": x.zero_point},
                           scale=scale)
        raise node_error(node, f"input of shape {list(x.shape)}: (N, C, H, W) or (N, F) only")

    def add(self, node: Any, a: RealTensor, b: RealTensor) -> Pending:
        """Elementwise addition of two dequantized tensors of one shape."""
        if a.shape != b.shape:
            raise node_error(node, f"operands of shapes {list(a.shape)} and {list(b.shape)}: elementwise addition "
                                   f"of equal shapes only (no broadcasting)")
        return Pending("add", node, a.shape, {"a": self.unclamped(node, a), "b": self.unclamped(node, b)})

    def avg_pool(self, node: Any, x: RealTensor, kernel: int, stride: int, out_hw: tuple[int, int],
                 pad: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Pending:
        """Average pooling (``pad``: zero padding counted in the average, ONNX's count_include_pad)."""
        x = self.unclamped(node, x)
        return Pending("avg_pool", node, (x.shape[0], x.shape[1], *out_hw),
                       {"x": x, "kernel": kernel, "stride": stride, "pad": pad})

    def global_avg_pool(self, node: Any, x: RealTensor) -> Pending:
        """The average over all of an (N, C, H, W) input's positions; a non-square input is padded at its
        bottom or right to a square of side max(H, W) with padding that adds nothing to the sum."""
        h, w = x.shape[2], x.shape[3]
        k = max(h, w)
        x = self.unclamped(node, x)
        return Pending("avg_pool", node, (x.shape[0], x.shape[1], 1, 1),
                       {"x": x, "kernel": k, "stride": k, "pad": (0, 0, k - h, k - w), "area": h * w})

    def _padded(self, node: Any, x: Any, channels: int, pad: tuple[int, int, int, int], fill: int) -> Any:
        """``x`` (int8, ``channels`` channels) with ``pad`` rows/columns of the value ``fill`` around it: a 1x1
        identity convolution whose input zero point is ``fill`` pads with it, and its requantization by 1
        with zero point ``fill`` gives the values back exactly."""
        acc = self.graph.conv2d(x, np.eye(channels, dtype=np.int8).reshape(channels, channels, 1, 1), None,
                                pad=pad, input_zero_point=fill, name=self.layer_name(node, "padding"))
        return self.graph.requantize(acc, scale=1.0, zero_point=fill, name=self.layer_name(node, "padded"))

    def concat(self, node: Any, parts: list[RealTensor]) -> Pending:
        """Concatenation of dequantized tensors along channels."""
        first = parts[0].shape
        for t in parts[1:]:
            if len(t.shape) != len(first) or t.shape[:1] + t.shape[2:] != first[:1] + first[2:]:
                raise node_error(node, f"operands of shapes {list(first)} and {list(t.shape)} differ outside the "
                                       f"channel axis")
        shape = (first[0], sum(t.shape[1] for t in parts), *first[2:])
        return Pending("concat", node, shape, {"parts": [self.unclamped(node, t) for t in parts]})

    def max_pool(self, node: Any, v: Any, kernel: int, stride: int, out_hw: tuple[int, int],
                 pad: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Any:
        """Max pooling of an integer or real tensor (the maximum commutes with the monotone dequantization).
        Padding (ONNX pads with -infinity) is the int8 minimum, -128, which no window's maximum can be
        below: the pool's own padding where every window overlaps the input (each pad below the kernel),
        else an explicit padding layer first."""
        q = v.q if isinstance(v, RealTensor) else v
        x = q.value
        own = max(pad) < kernel
        if any(pad) and not own:
            x = self._padded(node, x, q.shape[1], pad, INT8_MIN)
        out = self.graph.max_pool(x, kernel, stride, pad=pad if own else 0, name=self.layer_name(node))
        qt = IntTensor(out, q.dtype, (q.shape[0], q.shape[1], *out_hw))
        if isinstance(v, RealTensor):
            return RealTensor(qt, v.scale, v.zero_point, v.lo, v.hi, v.dq_node)
        return qt

    def flatten(self, node: Any, v: Any) -> Any:
        """``(N, C, H, W)`` -> ``(N, C*H*W)`` of an integer or real tensor."""
        q = v.q if isinstance(v, RealTensor) else v
        n = q.shape[0]
        f = int(np.prod(q.shape[1:]))
        if len(q.shape) == 2:
            qt = q
        elif len(q.shape) in (3, 4):  # (N, C, L) is held as (C, L, 1): the same order
            qt = IntTensor(self.graph.flatten(q.value, name=self.layer_name(node)), q.dtype, (n, f))
        else:
            raise node_error(node, f"input of shape {list(q.shape)}: (N, C, H, W) or (N, F) only")
        if isinstance(v, RealTensor):
            return RealTensor(qt, v.scale, v.zero_point, v.lo, v.hi, v.dq_node)
        return qt

    def int_relu(self, node: Any, q: IntTensor) -> IntTensor:
        """Relu of an integer tensor: ``max(q, 0)`` in its ONNX dtype."""
        floor = -shift(q.dtype)
        if floor == INT8_MIN:
            return q
        return IntTensor(self.graph.relu(q.value, zero_point=floor, name=self.layer_name(node)), q.dtype, q.shape)
