"""The host's steps around the accelerator: quantizing float inputs, shifting uint8 by 128, reshaping,
and dequantizing outputs, exactly as ONNX defines QuantizeLinear (round half to even, saturate) and
DequantizeLinear (``(q - zero_point) * scale`` in float32)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.onnx_import.errors import UnsupportedModel
from compiler.onnx_import.values import shift

RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


def quantize_values(x: np.ndarray, scale: float | np.ndarray, zero_point: int | np.ndarray, dtype: str) -> np.ndarray:
    """ONNX QuantizeLinear of float values to ``dtype`` (int64 result): ``saturate(round(x / scale) +
    zero_point)``, rounding half to even in float32; a NaN gives the low end of the range, as
    onnxruntime does. ``scale`` and ``zero_point`` may be arrays that broadcast against ``x`` (per axis)."""
    lo, hi = RANGES[dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        q = np.rint(np.asarray(x, np.float32) / np.asarray(scale, np.float32)).astype(np.float64) + \
            np.asarray(zero_point, np.float64)
    return np.clip(np.where(np.isnan(q), lo, q), lo, hi).astype(np.int64)


@dataclass
class HostOp:
    """An ONNX node the host runs (not the accelerator)."""

    node: str
    op_type: str
    what: str

    def __str__(self) -> str:
        return f"{self.op_type} '{self.node}': {self.what}"


@dataclass
class InputStep:
    """How an accelerator input (graph input ``graph_name``) is made from ONNX input ``source``: reshape
    to ``shape`` (batch first), then quantize with ``scale``/``zero_point`` to ``dtype`` (None: the ONNX
    input is already that integer), then shift into int8."""

    source: str
    graph_name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None = None
    zero_point: int = 0
    graph_shape: tuple[int, ...] = ()  # per sample, as the graph holds it (default: shape without the batch)

    def apply(self, a: np.ndarray) -> np.ndarray:
        """The int8 graph input (batch first) for the ONNX input array ``a`` (of any batch)."""
        x = np.asarray(a).reshape((-1, *(self.graph_shape or self.shape[1:])))
        if self.scale is not None:
            x = quantize_values(x, self.scale, self.zero_point, self.dtype)
        return (x.astype(np.int64) - shift(self.dtype)).astype(np.int8)


@dataclass
class OutputStep:
    """How ONNX output ``name`` is made from graph output ``graph_name``: shift back to ``dtype``,
    dequantize with ``scale``/``zero_point`` when the ONNX output is float, reshape to ``shape``."""

    name: str
    graph_name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None = None
    zero_point: int = 0

    def apply(self, y: np.ndarray) -> np.ndarray:
        """The ONNX output array for the graph output ``y`` (batch first)."""
        q = np.asarray(y).astype(np.int64) + shift(self.dtype)
        if self.scale is not None:
            out = (q - self.zero_point).astype(np.float32) * np.float32(self.scale)
            return out.reshape(self.shape)
        return q.astype(self.dtype).reshape(self.shape)

    @property
    def onnx_dtype(self) -> str:
        """The ONNX output's dtype."""
        return "float32" if self.scale is not None else self.dtype


@dataclass
class ModelInput:
    """An ONNX model input: name, dtype, shape, and the range random test values are drawn from."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    low: float = 0.0
    high: float = 0.0
    steps: list[InputStep] = field(default_factory=list)

    def check(self, a: Any) -> np.ndarray:
        """``a`` as this input's array; one line when it is not."""
        if not isinstance(a, np.ndarray):
            raise UnsupportedModel(f"input '{self.name}': expected a numpy array, got {type(a).__name__}")
        if tuple(a.shape) != self.shape:
            raise UnsupportedModel(f"input '{self.name}': shape {list(a.shape)}, the model takes {list(self.shape)}")
        if self.dtype == "float32" and a.dtype.kind == "f":
            return a.astype(np.float32)
        if a.dtype != np.dtype(self.dtype):
            raise UnsupportedModel(f"input '{self.name}': dtype {a.dtype}, the model takes {self.dtype}")
        return a

    def random(self, rng: np.random.Generator, batch: int | None = None) -> np.ndarray:
        """Seeded random values in the input's range (a float input's: what its quantization covers), for the
        model's batch or ``batch`` samples."""
        shape = self.shape if batch is None else (batch, *self.shape[1:])
        if self.dtype == "float32":
            return rng.uniform(self.low, self.high, shape).astype(np.float32)
        lo, hi = RANGES[self.dtype]
        return rng.integers(lo, hi + 1, shape).astype(self.dtype)
