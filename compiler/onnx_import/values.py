"""What an ONNX tensor is while the importer walks the model.

The importer gives every ONNX tensor one of these meanings:

* :class:`Const`: an initializer or ``Constant`` (``quant`` set when it is the DequantizeLinear of
  an integer array: weights and biases keep their integers and scales);
* :class:`HostFloat`: a float model input, still on the host (it may be reshaped there, then a
  QuantizeLinear on the host makes it an accelerator input);
* :class:`IntTensor`: an int8/uint8 tensor held on the accelerator as an int8 graph value (uint8
  shifted by -128; :func:`shift` says by how much);
* :class:`RealTensor`: a float tensor equal to ``scale * (q - zero_point)`` of an IntTensor ``q``
  (what DequantizeLinear gives), possibly clamped to ``[lo, hi]`` (a Relu or Clip not yet applied);
* :class:`Pending`: a float (or ConvInteger's int32) result of a convolution, dense layer, addition,
  average pool or concatenation computed on the accelerator, whose integer form waits for the
  output quantization (the QuantizeLinear that reads it) to be built.

Shapes are ONNX shapes, batch first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

INT8_MIN, INT8_MAX = -128, 127


def shift(dtype: str) -> int:
    """What is subtracted from an ONNX integer of ``dtype`` to hold it as int8 (uint8: 128)."""
    return 128 if dtype == "uint8" else 0


@dataclass(frozen=True)
class QuantInfo:
    """The quantization of a constant: integers ``q``, ``scale`` and ``zero_point`` (scalars or per
    ``axis``), as DequantizeLinear gives them."""

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


@dataclass
class Const:
    """An initializer or Constant (``quant``: its DequantizeLinear's integers and scales)."""
    value: np.ndarray
    quant: QuantInfo | None = None


@dataclass
class HostFloat:
    """A float model input on the host: ``source`` the ONNX input, ``shape`` after host reshapes."""

    source: str
    shape: tuple[int, ...]
    steps: list[Any] = field(default_factory=list)  # the host nodes (Flatten/Reshape) on the way


@dataclass
class IntTensor:
    """An int8/uint8 ONNX tensor held as an int8 graph value."""
    value: Any          # compiler.graph.Value, int8
    dtype: str          # the ONNX dtype: "int8" or "uint8"
    shape: tuple[int, ...]


@dataclass
class RealTensor:
    """A float ONNX tensor: ``scale * (q - zero_point)`` clamped to ``[lo, hi]``."""
    q: IntTensor
    scale: float
    zero_point: int     # in the int8 domain (the ONNX zero point minus shift(q.dtype))
    lo: float = -math.inf
    hi: float = math.inf
    dq_node: Any = None  # the DequantizeLinear that made it (the host runs it when it is an output)

    @property
    def shape(self) -> tuple[int, ...]:
        """The ONNX shape."""
        return self.q.shape

    @property
    def clamped(self) -> bool:
        """Whether a clamp waits to be applied."""
        return self.lo != -math.inf or self.hi != math.inf


@dataclass
class Pending:
    """A result waiting for its output quantization. ``kind``: conv, dense, add, avg_pool, concat;
    ``args`` what :mod:`compiler.onnx_import.builder` needs to build it; ``node`` the ONNX node that
    computes it. conv/dense: ``scale`` is the real value of one accumulator unit per output channel
    and ``bias`` the int64 accumulator bias (both change when a Mul or Add by a constant is folded)."""

    kind: str
    node: Any
    shape: tuple[int, ...]
    args: dict[str, Any]
    scale: np.ndarray | None = None
    bias: np.ndarray | None = None
    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False  # ConvInteger/MatMulInteger: the ONNX tensor is the int32 accumulator itself

    @property
    def clamped(self) -> bool:
        """Whether a clamp waits to be applied."""
        return self.lo != -math.inf or self.hi != math.inf
