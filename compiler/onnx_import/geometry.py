"""Convolution and pooling geometry: ONNX's kernel, strides, pads and auto_pad -> the graph's.

ONNX pads are ``[top, left, bottom, right]`` (begin values, then end values); ``auto_pad`` SAME_UPPER
/ SAME_LOWER pad so that the output is ``ceil(in / stride)``, the odd pixel at the end (UPPER) or the
beginning (LOWER); VALID pads nothing. The graph's convolution takes a square kernel: a ``kh x kw``
one is embedded in a ``k x k`` one (``k = max(kh, kw)``) with zero rows or columns, and the padding
grows by as many on each side, which gives the same outputs (a zero tap adds nothing).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler.onnx_import.errors import node_error


def _pads(node: Any, hw: tuple[int, int], kernel: tuple[int, int], strides: tuple[int, int],
          at: dict[str, Any]) -> list[int]:
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto in ("NOTSET", ""):
        pads = list(at.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4:
            raise node_error(node, f"pads {pads}: 2-D only")
        return pads
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise node_error(node, f"auto_pad {auto} is not supported")
    begin, end = [], []
    for size, k, s in zip(hw, kernel, strides):
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        small = total // 2
        begin.append(small if auto == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return [begin[0], begin[1], end[0], end[1]]


def _common(node: Any, shape: tuple[int, ...], kernel: tuple[int, int], at: dict[str, Any]
            ) -> tuple[tuple[int, int], list[int]]:
    if len(shape) != 4:
        raise node_error(node, f"input of shape {list(shape)}: 2-D (N, C, H, W) only")
    dil = list(at.get("dilations", [1, 1]))
    if any(d != 1 for d in dil):
        raise node_error(node, f"dilations {dil} are not supported (only 1)")
    strides = tuple(at.get("strides", [1, 1]))
    if len(strides) != 2:
        raise node_error(node, f"strides {list(strides)}: 2-D only")
    if strides[0] != strides[1]:
        raise node_error(node, f"strides {list(strides)} differ; equal strides only")
    return strides, _pads(node, (shape[2], shape[3]), kernel, strides, at)  # type: ignore[return-value]


def conv_geometry(node: Any, x_shape: tuple[int, ...], w: np.ndarray, at: dict[str, Any]
                  ) -> tuple[np.ndarray, int, tuple[int, int, int, int], tuple[int, int]]:
    """(square weight, stride, pads (top, left, bottom, right), output (H, W)) of a Conv."""
    if int(at.get("group", 1)) != 1:
        raise node_error(node, f"group {at['group']} is not supported (only 1)")
    if w.ndim != 4:
        raise node_error(node, f"weight of shape {list(w.shape)}: 2-D convolutions only")
    o, c, kh, kw = w.shape
    if c != x_shape[1]:
        raise node_error(node, f"weight of shape {list(w.shape)} does not take {x_shape[1]} channels")
    ks = tuple(at.get("kernel_shape", [kh, kw]))
    if ks != (kh, kw):
        raise node_error(node, f"kernel_shape {list(ks)} differs from the weight's {kh}x{kw}")
    strides, pads = _common(node, x_shape, (kh, kw), at)
    top, left, bottom, right = pads
    ho = (x_shape[2] + top + bottom - kh) // strides[0] + 1
    wo = (x_shape[3] + left + right - kw) // strides[1] + 1
    if ho <= 0 or wo <= 0:
        raise node_error(node, "the kernel does not fit the padded input")
    k = max(kh, kw)
    if kh != kw:  # embed in a square kernel, zero rows/columns split between the two sides
        dy, dx = (k - kh) // 2, (k - kw) // 2
        sq = np.zeros((o, c, k, k), np.int8)
        sq[:, :, dy:dy + kh, dx:dx + kw] = w
        w = sq
        top, bottom = top + dy, bottom + (k - kh - dy)
        left, right = left + dx, right + (k - kw - dx)
    # trailing rows/columns of padding that no output window reaches change nothing: drop them
    bottom = min(bottom, (ho - 1) * strides[0] + k - x_shape[2] - top)
    right = min(right, (wo - 1) * strides[1] + k - x_shape[3] - left)
    return w, int(strides[0]), (top, left, max(bottom, 0), max(right, 0)), (ho, wo)


def pool_geometry(node: Any, x_shape: tuple[int, ...], at: dict[str, Any], padded: bool = False,
                  partial: bool = False) -> tuple[int, int, tuple[int, int], tuple[int, int, int, int]]:
    """(kernel, stride, output (H, W), pads) of a MaxPool/AveragePool; ``padded``: padding is allowed (a
    MaxPool, which pads with the minimum, or an AveragePool that counts it, count_include_pad=1);
    ``partial``: ceil_mode's partial last windows are allowed (a MaxPool: they become end padding)."""
    ks = tuple(at.get("kernel_shape", []))
    if len(ks) != 2:
        raise node_error(node, f"kernel_shape {list(ks)}: 2-D pooling only")
    if ks[0] != ks[1]:
        raise node_error(node, f"kernel {ks[0]}x{ks[1]}: square pooling windows only")
    strides, pads = _common(node, x_shape, ks, at)  # type: ignore[arg-type]
    if any(pads) and not padded:
        why = "count_include_pad=0 averages fewer taps at the border" if node.op_type.endswith("AveragePool") \
            else "max pooling pads with -infinity"
        raise node_error(node, f"pads {pads}: not supported ({why})")
    k, s = int(ks[0]), int(strides[0])
    h, w = x_shape[2] + pads[0] + pads[2], x_shape[3] + pads[1] + pads[3]
    out = ((h - k) // s + 1, (w - k) // s + 1)
    if int(at.get("ceil_mode", 0)):
        # a last window must start inside the input or its begin padding (ONNX, as PyTorch)
        ceil = tuple(math.ceil((size - k) / s) + 1 - (1 if math.ceil((size - k) / s) * s >= size - end else 0)
                     for size, end in ((h, pads[2]), (w, pads[3])))
        if ceil != out:
            if not partial:
                raise node_error(node, "ceil_mode adds a partial window: not supported")
            pads = [pads[0], pads[1], pads[2] + (ceil[0] - 1) * s + k - h, pads[3] + (ceil[1] - 1) * s + k - w]
            out = (int(ceil[0]), int(ceil[1]))
    if out[0] <= 0 or out[1] <= 0:
        raise node_error(node, f"the {k}x{k} window does not fit the {h}x{w} input")
    return k, s, out, (pads[0], pads[1], pads[2], pads[3])
