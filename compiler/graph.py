"""A network as a graph of quantized layers, with shapes inferred as it is built.

A :class:`Graph` is built layer by layer; each call checks its operands and returns the
:class:`Value` it produces, with its per-sample shape (no batch dimension: the batch is
chosen when the graph is compiled or run) and its type::

    g = Graph("digits")
    x = g.input("image", (1, 8, 8))                       # int8, C x H x W
    y = g.conv2d(x, w1, b1, stride=1, pad=1, name="conv1")  # int32 accumulators
    y = g.relu(g.requantize(y, shift=7))                  # int8
    y = g.flatten(g.max_pool(y, 2))                       # int8, C*H*W features
    y = g.requantize(g.dense(y, w2, b2, name="fc1"), 6)   # int8
    g.output(y)

The layers and their integer meaning (the reference, :mod:`compiler.graph_reference`, is
written from these sentences; the compiler, :mod:`compiler.network`, lowers them to the
GEMM and ALU operators):

* ``input(name, shape)``: int8 samples of ``shape`` (``(C, H, W)`` or ``(F,)``).
* ``conv2d(x, w, b, stride, pad, input_zero_point=zx)``: int8 ``(C, H, W)`` -> int32 ``(O, Ho, Wo)``;
  ``w`` int8 ``(O, C, K, K)``, ``b`` int32 ``(O,)`` or None; ``pad`` an int or ``(top, left, bottom,
  right)``; ``out[o,y,x] = b[o] + sum over c, ky, kx of (x[c, y*s+ky-top, x*s+kx-left] - zx) *
  w[o,c,ky,kx]`` where taps outside the input contribute 0 (ONNX pads the real value with 0, i.e. the
  quantized value with ``zx``); int32 wrap.
* ``dense(x, w, b, input_zero_point=zx)``: int8 ``(F,)`` -> int32 ``(O,)``; ``w`` int8 ``(O, F)``
  (out x in); ``b[o] + sum_f (x[f] - zx) * w[o,f]``.
* ``requantize(x, shift)``: int32 or int8 -> int8: ``clip((x + 2**(shift-1)) >> shift, -128, 127)``
  (no rounding term when ``shift`` is 0; arithmetic shift; the sum wraps at 32 bits).
  ``requantize(x, scale=s, input_zero_point=zx, zero_point=zy, lo=lo, hi=hi)``: int8
  ``clip(R(x - zx, s[c]) + zy, lo, hi)`` (``x - zx`` wrapping at 32 bits), ``s`` a float or one per
  channel (the first dimension), ``R`` the fixed-point rescaling of :mod:`compiler.fixed_point`
  (multiply-high and shift, both rounding half up; within one LSB of ``round(x * s)``), with the
  headroom of a bound on ``|x - zx|`` (``R_B``, :func:`rescale_bound`: the more bits ``x`` leaves
  free, the closer to ``x * s`` rounded once).
* ``relu(x, zero_point=z)``: ``max(x, z)``, any type, same shape and type.
* ``add(a, b)``: two int8 values of one shape -> their int32 sum; with ``a_scale``, ``b_scale``,
  ``a_zero_point``, ``b_zero_point``: int32 ``R_B(a - za, a_scale) + R_B(b - zb, b_scale)``, ``B =
  128 + |z|``.
* ``max_pool(x, k, stride, pad)`` / ``avg_pool(x, k, stride)``: int8 ``(C, H, W)`` -> int8, windows of
  ``k x k`` every ``stride`` (default ``k``), ``floor`` output size; the maximum's ``pad`` (an int or
  ``(top, left, bottom, right)``, each below ``k``) pads with -128 (ONNX's -infinity: it never wins
  a window, which always holds an input pixel); the average has no padding and is
  ``(sum + k*k/2) >> log2(k*k)`` (round half up), so ``k*k`` must be a power of two; with
  ``scale=s, input_zero_point=zx, zero_point=zy`` any window:
  ``clip(R_B(sum over the window of (x - zx), s) + zy, -128, 127)``, ``B = k*k*(128 + |zx|)``.
* ``flatten(x)``: int8 ``(C, H, W)`` -> ``(C*H*W,)`` in C, H, W order (as ``numpy.reshape``).

Names (of the graph, layers and inputs) are any non-empty printable strings up to 200 characters
(ONNX's ``/layer1/layer1.0/conv1/Conv``, ``onnx::Conv_193``); the compiler maps them to identifiers
where it needs some (DRAM regions), and every report and error line shows them as given.

Outputs must be int8 (the accelerator stores int8): requantize an accumulator first. Every
mistake (a shape that does not match, a weight of the wrong dtype, an int32 value where int8 is
needed) is one :class:`compiler.errors.CompileError` line naming the graph and the layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.errors import CompileError
from compiler.fixed_point import SCALE_MAX, SCALE_MIN, scale_ok

OPS = ("input", "conv2d", "dense", "requantize", "relu", "add", "max_pool", "avg_pool", "flatten")
SHIFT_MAX = 31
PAD_MAX = 15  # LOAD's padding fields (compiler.conv_plan.PAD_MAX)
NAME_MAX = 200  # characters of a graph, layer or input name (ONNX names are long paths)
ZP_MIN, ZP_MAX = -128, 127  # int8 zero points (uint8 ones are shifted by 128 by the importer)


def valid_name(name: object) -> bool:
    """Whether ``name`` is a valid graph, layer or input name: a non-empty string of printable characters,
    at most :data:`NAME_MAX` long (``/layer1/layer1.0/conv1/Conv`` and ``onnx::Conv_193`` are)."""
    return isinstance(name, str) and 0 < len(name) <= NAME_MAX and name.isprintable()


@dataclass(frozen=True, eq=False)
class Value:
    """What a layer produces: its per-sample ``shape`` and ``dtype`` (``int8`` or ``int32``)."""

    layer: "Layer"
    shape: tuple[int, ...]
    dtype: str

    @property
    def name(self) -> str:
        return self.layer.name

    def __repr__(self) -> str:
        return f"Value({self.layer.name!r}, {self.dtype} {self.shape})"


@dataclass(eq=False)
class Layer:
    """One layer: ``op`` (one of :data:`OPS`), a unique ``name``, its operand values, its parameters
    (``weight``/``bias`` arrays, ``stride``, ``pad``, ``shift``, ``kernel``) and its output value."""

    name: str
    op: str
    inputs: tuple[Value, ...]
    params: dict[str, Any] = field(default_factory=dict)
    output: Value | None = None

    @property
    def macs(self) -> int:
        """Multiply-accumulates per sample (conv2d, dense; 0 for the others)."""
        if self.op == "conv2d":
            o, c, k, _ = self.params["weight"].shape
            assert self.output is not None
            return int(np.prod(self.output.shape)) * c * k * k
        if self.op == "dense":
            return int(self.params["weight"].size)
        return 0

    def __repr__(self) -> str:
        return f"Layer({self.name!r}, {self.op})"


class Graph:
    """A network under construction: layers in the order they were added (a topological order)."""

    def __init__(self, name: str = "network"):
        if not valid_name(name):
            raise CompileError(f"graph name {name!r} must be a non-empty string of printable characters, at most "
                               f"{NAME_MAX} long")
        self.name = name
        self.layers: list[Layer] = []
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self._counts: dict[str, int] = {}

    # ---- errors and bookkeeping ---------------------------------------------------------------
    def error(self, layer: str, reason: str, cls: type[CompileError] = CompileError) -> CompileError:
        """The one-line error of this graph naming ``layer`` (of class ``cls``)."""
        return cls(f"graph '{self.name}': layer '{layer}': {reason}")

    def _name(self, op: str, name: str | None) -> str:
        if name is None:
            k = self._counts.get(op, 0)
            while f"{op}{k}" in self.layer_names():
                k += 1
            self._counts[op] = k + 1
            return f"{op}{k}"
        if not valid_name(name):
            raise CompileError(f"graph '{self.name}': layer name {name!r} must be a non-empty string of printable "
                               f"characters, at most {NAME_MAX} long")
        if name in self.layer_names():
            raise CompileError(f"graph '{self.name}': layer name '{name}' is used twice")
        return name

    def layer_names(self) -> set[str]:
        return {layer.name for layer in self.layers}

    def _operand(self, layer: str, v: Any, what: str, dtype: str | None = None, rank: int | None = None) -> Value:
        if not isinstance(v, Value) or v.layer.output is not v or v.layer not in self.layers:
            raise self.error(layer, f"{what} must be a value of this graph (what a layer of graph "
                                    f"'{self.name}' returned), got {type(v).__name__}")
        if dtype is not None and v.dtype != dtype:
            hint = " (requantize it first)" if v.dtype == "int32" else ""
            raise self.error(layer, f"{what} '{v.name}' is {v.dtype}, this layer takes {dtype}{hint}")
        if rank is not None and len(v.shape) != rank:
            want = "(C, H, W)" if rank == 3 else "(F,)"
            raise self.error(layer, f"{what} '{v.name}' has shape {v.shape}, this layer takes {want}"
                                    + (" (flatten it first)" if rank == 1 else ""))
        return v

    def _array(self, layer: str, a: Any, what: str, dtype: str, shape: tuple[int | None, ...]) -> np.ndarray:
        if not isinstance(a, np.ndarray):
            raise self.error(layer, f"{what} must be a numpy array of {dtype}, got {type(a).__name__}")
        if a.dtype != np.dtype(dtype):
            raise self.error(layer, f"{what} must be {dtype}, got {a.dtype}")
        if a.ndim != len(shape) or any(w is not None and g != w for g, w in zip(a.shape, shape)) or 0 in a.shape:
            want = "(" + ", ".join("?" if w is None else str(w) for w in shape) + ("," if len(shape) == 1 else "") + ")"
            raise self.error(layer, f"{what} has shape {a.shape}, expected {want}")
        out = a.copy()
        out.flags.writeable = False
        return out

    def _int(self, layer: str, v: Any, what: str, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
            raise self.error(layer, f"{what} {v!r} must be an integer {lo}..{hi}")
        return int(v)

    def _add(self, name: str, op: str, inputs: tuple[Value, ...], params: dict[str, Any], shape: tuple[int, ...],
             dtype: str) -> Value:
        layer = Layer(name, op, inputs, params)
        layer.output = Value(layer, tuple(int(s) for s in shape), dtype)
        self.layers.append(layer)
        return layer.output

    # ---- layers -------------------------------------------------------------------------------
    def input(self, name: str, shape: tuple[int, ...] | list[int]) -> Value:
        """An int8 input of per-sample ``shape``: ``(C, H, W)`` or ``(F,)``."""
        name = self._name("input", name)
        shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        if len(shp) not in (1, 3) or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s <= 0
                                         for s in shp):
            raise self.error(name, f"input shape {shape!r} must be (C, H, W) or (F,) of positive integers")
        v = self._add(name, "input", (), {}, shp, "int8")
        self.inputs.append(v)
        return v

    def _zp(self, layer: str, v: Any, what: str) -> int:
        return self._int(layer, v, what, ZP_MIN, ZP_MAX)

    def _scale(self, layer: str, scale: Any, what: str, channels: int | None) -> float | np.ndarray:
        """A float scale, or (``channels`` not None) a float array of one scale per channel."""
        if isinstance(scale, np.ndarray) and channels is not None:
            if scale.dtype.kind != "f" or scale.shape != (channels,):
                raise self.error(layer, f"{what} array must be float of shape ({channels},) (one per channel), got "
                                        f"{scale.dtype} {scale.shape}")
            bad = [float(v) for v in scale.ravel() if not scale_ok(float(v))]
            if bad:
                raise self.error(layer, f"{what} {bad[0]!r} is outside [2**-32, 2**15] (the fixed-point multiplier's "
                                        f"range: {SCALE_MIN:g}..{SCALE_MAX:g})")
            out = scale.astype(np.float64)
            out.flags.writeable = False
            return out
        if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (float, int, np.floating, np.integer)):
            kind = "a float or a float array of one scale per channel" if channels is not None else "a float"
            raise self.error(layer, f"{what} must be {kind}, got {type(scale).__name__}")
        if not scale_ok(scale):
            raise self.error(layer, f"{what} {scale!r} is outside [2**-32, 2**15] (the fixed-point multiplier's "
                                    f"range: {SCALE_MIN:g}..{SCALE_MAX:g})")
        return float(scale)

    def _pads(self, layer: str, pad: Any) -> tuple[int, int, int, int]:
        """``pad``: an int (every side) or ``(top, left, bottom, right)``."""
        if isinstance(pad, (tuple, list)):
            if len(pad) != 4:
                raise self.error(layer, f"pad {pad!r} must be an integer or (top, left, bottom, right)")
            t, l, b, r = (self._int(layer, p, "pad", 0, PAD_MAX) for p in pad)
            return t, l, b, r
        p = self._int(layer, pad, "pad", 0, PAD_MAX)
        return p, p, p, p

    def conv2d(self, x: Value, weight: np.ndarray, bias: np.ndarray | None = None, *, stride: int = 1,
               pad: int | tuple[int, int, int, int] = 0, input_zero_point: int = 0, name: str | None = None) -> Value:
        """int32 ``conv2d(x - input_zero_point, weight) + bias`` (module docstring); ``pad`` an int or
        ``(top, left, bottom, right)``."""
        name = self._name("conv2d", name)
        x = self._operand(name, x, "input", "int8", 3)
        c, h, w = x.shape
        wt = self._array(name, weight, "weight", "int8", (None, c, None, None))
        o, _, kh, kw = wt.shape
        if kh != kw:
            raise self.error(name, f"weight has a {kh}x{kw} kernel; square kernels only")
        pads = self._pads(name, pad)
        params: dict[str, Any] = {"weight": wt, "bias": None if bias is None else
                                  self._array(name, bias, "bias", "int32", (o,)),
                                  "stride": self._int(name, stride, "stride", 1, 64),
                                  "pad": pads[0] if len(set(pads)) == 1 else pads, "pads": pads,
                                  "input_zero_point": self._zp(name, input_zero_point, "input_zero_point")}
        s = params["stride"]
        top, left, bottom, right = pads
        if h + top + bottom < kh or w + left + right < kw:
            raise self.error(name, f"the {kh}x{kw} kernel does not fit the {h}x{w} input padded by {pad}")
        return self._add(name, "conv2d", (x,), params,
                         (o, (h + top + bottom - kh) // s + 1, (w + left + right - kw) // s + 1), "int32")

    def dense(self, x: Value, weight: np.ndarray, bias: np.ndarray | None = None, *, input_zero_point: int = 0,
              name: str | None = None) -> Value:
        """int32 ``(x - input_zero_point) @ weight.T + bias``; ``weight`` is ``(O, F)`` (out x in)."""
        name = self._name("dense", name)
        x = self._operand(name, x, "input", "int8", 1)
        wt = self._array(name, weight, "weight", "int8", (None, x.shape[0]))
        b = None if bias is None else self._array(name, bias, "bias", "int32", (wt.shape[0],))
        zx = self._zp(name, input_zero_point, "input_zero_point")
        return self._add(name, "dense", (x,), {"weight": wt, "bias": b, "input_zero_point": zx}, (wt.shape[0],),
                         "int32")

    def requantize(self, x: Value, shift: int | None = None, *, scale: float | np.ndarray | None = None,
                   input_zero_point: int = 0, zero_point: int = 0, lo: int = -128, hi: int = 127,
                   name: str | None = None) -> Value:
        """int8 ``clip((x + 2**(shift-1)) >> shift)``, or with ``scale``
        ``clip(R(x - input_zero_point, scale[c]) + zero_point, lo, hi)`` (module docstring)."""
        name = self._name("requantize", name)
        x = self._operand(name, x, "input")
        if (shift is None) == (scale is None):
            raise self.error(name, "give exactly one of shift (a power-of-two division) and scale (a real factor)")
        if shift is not None:
            if (input_zero_point, zero_point, lo, hi) != (0, 0, -128, 127):
                raise self.error(name, "zero points and lo/hi go with scale= (use scale=2.0**-shift)")
            return self._add(name, "requantize", (x,), {"shift": self._int(name, shift, "shift", 0, SHIFT_MAX)},
                             x.shape, "int8")
        sc = self._scale(name, scale, "scale", x.shape[0])
        izp = self._int(name, input_zero_point, "input_zero_point", -(1 << 31), (1 << 31) - 1)
        zp = self._zp(name, zero_point, "zero_point")
        lo_, hi_ = self._zp(name, lo, "lo"), self._zp(name, hi, "hi")
        if lo_ > hi_:
            raise self.error(name, f"lo {lo_} is above hi {hi_}")
        return self._add(name, "requantize", (x,), {"shift": None, "scale": sc, "input_zero_point": izp,
                                                    "zero_point": zp, "lo": lo_, "hi": hi_}, x.shape, "int8")

    def relu(self, x: Value, *, zero_point: int = 0, name: str | None = None) -> Value:
        """``max(x, zero_point)``, same shape and type."""
        name = self._name("relu", name)
        x = self._operand(name, x, "input")
        lim = (ZP_MIN, ZP_MAX) if x.dtype == "int8" else (-(1 << 31), (1 << 31) - 1)
        zp = self._int(name, zero_point, "zero_point", *lim)
        return self._add(name, "relu", (x,), {"zero_point": zp}, x.shape, x.dtype)

    def add(self, a: Value, b: Value, *, a_scale: float | None = None, b_scale: float | None = None,
            a_zero_point: int = 0, b_zero_point: int = 0, name: str | None = None) -> Value:
        """The int32 sum of two int8 values of one shape (a residual connection); with scales
        ``R(a - a_zero_point, a_scale) + R(b - b_zero_point, b_scale)``."""
        name = self._name("add", name)
        a = self._operand(name, a, "first operand", "int8")
        b = self._operand(name, b, "second operand", "int8")
        if a.shape != b.shape:
            raise self.error(name, f"operands '{a.name}' {a.shape} and '{b.name}' {b.shape} differ in shape")
        if (a_scale is None) != (b_scale is None):
            raise self.error(name, "give both a_scale and b_scale, or neither")
        params: dict[str, Any] = {"a_zero_point": self._zp(name, a_zero_point, "a_zero_point"),
                                  "b_zero_point": self._zp(name, b_zero_point, "b_zero_point"),
                                  "a_scale": None if a_scale is None else self._scale(name, a_scale, "a_scale", None),
                                  "b_scale": None if b_scale is None else self._scale(name, b_scale, "b_scale", None)}
        if a_scale is None and (params["a_zero_point"] or params["b_zero_point"]):
            raise self.error(name, "zero points go with scales (a_scale=1.0, b_scale=1.0)")
        return self._add(name, "add", (a, b), params, a.shape, "int32")

    def _pool(self, op: str, x: Value, kernel: int, stride: int | None, name: str | None,
              scaled: dict[str, Any] | None = None, pad: Any = 0) -> Value:
        name = self._name(op, name)
        x = self._operand(name, x, "input", "int8", 3)
        c, h, w = x.shape
        k = self._int(name, kernel, "kernel", 1, 64)
        s = k if stride is None else self._int(name, stride, "stride", 1, 64)
        top, left, bottom, right = pads = self._pads(name, pad)
        if max(pads) >= k:  # a window of padding alone would have no maximum
            raise self.error(name, f"pad {pad!r}: the {k}x{k} window must overlap the input, so each pad must be "
                                   f"below {k}")
        h, w = h + top + bottom, w + left + right
        if k > h or k > w:
            raise self.error(name, f"the {k}x{k} window does not fit the {h}x{w} input"
                                   + (f" padded by {pad!r}" if any(pads) else ""))
        params: dict[str, Any] = {"kernel": k, "stride": s, "scale": None}
        if any(pads):
            params["pads"] = pads
        if scaled is not None and scaled["scale"] is not None:
            params.update(scale=self._scale(name, scaled["scale"], "scale", None),
                          input_zero_point=self._zp(name, scaled["input_zero_point"], "input_zero_point"),
                          zero_point=self._zp(name, scaled["zero_point"], "zero_point"))
        elif scaled is not None and (scaled["input_zero_point"] or scaled["zero_point"]):
            raise self.error(name, "zero points go with scale=")
        elif op == "avg_pool" and (k * k) & (k * k - 1):
            raise self.error(name, f"the {k}x{k} average divides by {k * k}; the accelerator divides by shifting, "
                                   f"so the window's area must be a power of two (or give scale=)")
        return self._add(name, op, (x,), params, (c, (h - k) // s + 1, (w - k) // s + 1), "int8")

    def max_pool(self, x: Value, kernel: int, stride: int | None = None, *,
                 pad: int | tuple[int, int, int, int] = 0, name: str | None = None) -> Value:
        """int8 maximum over ``kernel x kernel`` windows every ``stride`` (default ``kernel``); ``pad`` (an int
        or ``(top, left, bottom, right)``, each below ``kernel``) pads with the minimum, which never wins."""
        return self._pool("max_pool", x, kernel, stride, name, pad=pad)

    def avg_pool(self, x: Value, kernel: int, stride: int | None = None, *, scale: float | None = None,
                 input_zero_point: int = 0, zero_point: int = 0, name: str | None = None) -> Value:
        """int8 rounded average over ``kernel x kernel`` windows (area a power of two); with ``scale``, any
        window: ``clip(R(sum of (x - input_zero_point), scale) + zero_point)``."""
        return self._pool("avg_pool", x, kernel, stride, name,
                          {"scale": scale, "input_zero_point": input_zero_point, "zero_point": zero_point})

    def flatten(self, x: Value, *, name: str | None = None) -> Value:
        """``(C, H, W)`` -> ``(C*H*W,)`` in C, H, W order."""
        name = self._name("flatten", name)
        x = self._operand(name, x, "input", "int8", 3)
        return self._add(name, "flatten", (x,), {}, (int(np.prod(x.shape)),), "int8")

    reshape = flatten  # the one reshape the accelerator's layouts need

    def output(self, v: Value) -> Value:
        """Mark ``v`` (int8) as an output of the network."""
        v = self._operand(getattr(getattr(v, "layer", None), "name", "output"), v, "output")
        if v.dtype != "int8":
            raise self.error(v.name, f"an output must be int8 (the accelerator stores int8), '{v.name}' is "
                                     f"{v.dtype}: requantize it")
        if v in self.outputs:
            raise self.error(v.name, "is already an output")
        if v.layer.op == "input":
            raise self.error(v.name, "an input cannot be an output")
        self.outputs.append(v)
        return v

    # ---- queries ------------------------------------------------------------------------------
    def consumers(self, v: Value) -> list[Layer]:
        """The layers that take ``v`` as an operand."""
        return [layer for layer in self.layers if any(u is v for u in layer.inputs)]

    def check(self) -> None:
        """Raise unless the graph is complete: at least one input and one output, and every layer's
        result used (by a layer or as an output)."""
        if not self.inputs:
            raise CompileError(f"graph '{self.name}' has no input")
        if not self.outputs:
            raise CompileError(f"graph '{self.name}' has no output (call graph.output(value))")
        for layer in self.layers:
            if layer.op not in OPS:  # a Layer made by hand, not by the graph's methods
                raise self.error(layer.name, f"unknown op {layer.op!r} (the graph's ops: {', '.join(OPS[1:])})")
            v = layer.output
            if v not in self.outputs and not self.consumers(v):
                raise self.error(layer.name, "its result is never used (make it an output or remove it)")

    @property
    def macs(self) -> int:
        """Multiply-accumulates per sample."""
        return sum(layer.macs for layer in self.layers)

    def summary(self) -> str:
        """One line per layer: name, op, operands, output shape and type."""
        lines = [f"graph '{self.name}': {len(self.layers)} layers, {self.macs:,} MACs per sample"]
        for layer in self.layers:
            ins = ", ".join(v.name for v in layer.inputs)
            out = layer.output
            assert out is not None
            lines.append(f"  {layer.name:<16} {layer.op:<11} ({ins}) -> {out.dtype} {out.shape}")
        return "\n".join(lines)


# ---- bounds of values, for the headroom of the fixed-point rescaling ------------------------------
def value_bound(v: Value) -> np.ndarray:
    """A bound of ``|v|`` per channel (the first dimension; int64 array) from the layers that made it:
    128 for an int8 value; for a convolution or dense layer's accumulator the sum over each output
    channel's weights of ``|w| * (128 + |zx|)`` plus ``|b|``; ReLUs keep it (or raise it to their zero
    point); a sum of two int8 values 256; a scaled add the bounds of its two rescaled terms. Part of the
    definition of the real-scale layers (``R_B``), so the reference and the compiler share it."""
    layer = v.layer
    p = layer.params
    c = v.shape[0]
    if v.dtype == "int8":
        return np.full(c, 128, dtype=np.int64)
    if layer.op in ("conv2d", "dense"):
        w = np.abs(p["weight"].astype(np.int64)).reshape(p["weight"].shape[0], -1).sum(axis=1)
        b = np.zeros(c, np.int64) if p["bias"] is None else np.abs(p["bias"].astype(np.int64))
        return w * (128 + abs(p["input_zero_point"])) + b
    if layer.op == "relu":
        return np.maximum(value_bound(layer.inputs[0]), abs(p["zero_point"]))
    if layer.op == "add":
        if p["a_scale"] is None:
            return np.full(c, 256, dtype=np.int64)
        terms = [(128 + abs(p[f"{k}_zero_point"])) * p[f"{k}_scale"] + 1 for k in "ab"]
        return np.full(c, int(np.ceil(sum(terms))), dtype=np.int64)
    return np.full(c, 1 << 31, dtype=np.int64)  # no bound known: no headroom


def rescale_bound(layer: Layer) -> np.ndarray | int:
    """The bound ``B`` of ``R_B`` in a real-scale layer (module docstring): per channel for a
    requantize (of its operand minus its input zero point), one number for an average pool."""
    p = layer.params
    if layer.op == "requantize":
        return value_bound(layer.inputs[0]) + abs(p["input_zero_point"])
    if layer.op == "avg_pool":
        return p["kernel"] ** 2 * (128 + abs(p["input_zero_point"]))
    raise ValueError(f"layer '{layer.name}' ({layer.op}) rescales nothing by a bound")
