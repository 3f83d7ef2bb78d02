"""Plain numpy integer inference over a :class:`compiler.graph.Graph`: the network's golden reference.

Written from the layer meanings in :mod:`compiler.graph`'s docstring, not from the intrinsics,
the operators or the network compiler: every layer is whole-tensor numpy on the natural
layouts (``(N, C, H, W)`` or ``(N, F)``, a batch dimension in front of the graph's per-sample
shapes) in int64, with the accelerator's arithmetic only where it is the layer's definition:
accumulators (conv2d, dense with its bias, the requantize rounding sum) wrap at 32 bits, and
requantize, pooling and flatten produce int8. The GEMM references' formula-level helpers
(:func:`compiler.gemm_reference.conv2d_ref`, :func:`compiler.gemm_reference.wrap32`) are reused.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from compiler.errors import CompileError
from compiler.fixed_point import rescale
from compiler.gemm_reference import wrap32
from compiler.graph import Graph, Layer, rescale_bound

INT8_MIN, INT8_MAX = -128, 127


def _conv2d(layer: Layer, x: np.ndarray) -> np.ndarray:
    # the definition: taps outside the input contribute 0, inside (x - zx) * w
    top, left, _, _ = layer.params["pads"]
    s = layer.params["stride"]
    w64 = layer.params["weight"].astype(np.int64)
    o, c, kh, kw = w64.shape
    n, _, h, wd = x.shape
    _, ho, wo = layer.output.shape
    xp = np.zeros((n, c, top + max(h, (ho - 1) * s + kh), left + max(wd, (wo - 1) * s + kw)), dtype=np.int64)
    xp[:, :, top:top + h, left:left + wd] = x.astype(np.int64) - layer.params["input_zero_point"]
    acc = np.zeros((n, o, ho, wo), dtype=np.int64)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky:ky + s * (ho - 1) + 1:s, kx:kx + s * (wo - 1) + 1:s]
            acc += np.einsum("nchw,oc->nohw", patch, w64[:, :, ky, kx])
    bias = layer.params["bias"]
    if bias is not None:
        acc = acc + bias.astype(np.int64).reshape(1, -1, 1, 1)
    return wrap32(acc)


def _dense(layer: Layer, x: np.ndarray) -> np.ndarray:
    acc = np.matmul(x.astype(np.int64) - layer.params["input_zero_point"], layer.params["weight"].astype(np.int64).T)
    bias = layer.params["bias"]
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    return wrap32(acc)


def _channel_scale(scale: float | np.ndarray, ndim: int) -> float | np.ndarray:
    """A per-channel scale array shaped to broadcast over ``(N, C, ...)`` values of ``ndim`` dimensions."""
    if isinstance(scale, np.ndarray):
        return scale.reshape((1, -1) + (1,) * (ndim - 2))
    return scale


def _requantize(layer: Layer, x: np.ndarray) -> np.ndarray:
    shift = layer.params["shift"]
    if shift is None:  # real scale: clip(R(x - zx, scale[c]) + zy, lo, hi), x - zx wrapping at 32 bits
        p = layer.params
        v = wrap32(x.astype(np.int64) - p["input_zero_point"]).astype(np.int64)
        y = rescale(v, _channel_scale(p["scale"], x.ndim),
                    _channel_scale(rescale_bound(layer), x.ndim)) + p["zero_point"]
        return np.clip(y, p["lo"], p["hi"]).astype(np.int8)
    v = x.astype(np.int64)
    if shift:
        # the rounding term is added in the 32-bit accumulator (it wraps), then an arithmetic shift
        v = wrap32(v + (1 << (shift - 1))).astype(np.int64) >> shift
    return np.clip(v, INT8_MIN, INT8_MAX).astype(np.int8)


def _relu(layer: Layer, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, layer.params["zero_point"]).astype(x.dtype)


def _add(layer: Layer, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    p = layer.params
    if p["a_scale"] is None:
        return (a.astype(np.int64) + b.astype(np.int64)).astype(np.int32)
    total = (rescale(a.astype(np.int64) - p["a_zero_point"], p["a_scale"], 128 + abs(p["a_zero_point"]))
             + rescale(b.astype(np.int64) - p["b_zero_point"], p["b_scale"], 128 + abs(p["b_zero_point"])))
    return wrap32(total).astype(np.int32)


def _windows(layer: Layer, x: np.ndarray) -> list[np.ndarray]:
    """The ``k*k`` strided views of ``x`` (one per window tap), each ``(N, C, Ho, Wo)``."""
    k, s = layer.params["kernel"], layer.params["stride"]
    _, ho, wo = layer.output.shape
    return [x[:, :, ky:ky + s * (ho - 1) + 1:s, kx:kx + s * (wo - 1) + 1:s]
            for ky in range(k) for kx in range(k)]


def _max_pool(layer: Layer, x: np.ndarray) -> np.ndarray:
    top, left, bottom, right = layer.params.get("pads", (0, 0, 0, 0))
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=INT8_MIN)
    return np.maximum.reduce(_windows(layer, x)).astype(np.int8)


def _avg_pool(layer: Layer, x: np.ndarray) -> np.ndarray:
    area = layer.params["kernel"] ** 2
    total = np.sum([w.astype(np.int64) for w in _windows(layer, x)], axis=0)
    p = layer.params
    if p["scale"] is not None:  # clip(R(sum of (x - zx), scale) + zy)
        y = rescale(total - area * p["input_zero_point"], p["scale"], rescale_bound(layer)) + p["zero_point"]
        return np.clip(y, INT8_MIN, INT8_MAX).astype(np.int8)
    # round half up: floor((sum + area/2) / area), the division an arithmetic shift (area is 2**n)
    return ((total + area // 2) >> (area.bit_length() - 1)).astype(np.int8)


def _flatten(layer: Layer, x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1)


_EVAL: dict[str, Callable[..., np.ndarray]] = {
    "conv2d": _conv2d, "dense": _dense, "requantize": _requantize, "relu": _relu, "add": _add,
    "max_pool": _max_pool, "avg_pool": _avg_pool, "flatten": _flatten,
}
_DTYPES = {"int8": np.int8, "int32": np.int32}


def _check_inputs(graph: Graph, inputs: dict[str, np.ndarray]) -> int:
    """Raise one line unless ``inputs`` holds exactly the graph's inputs, int8 ``(N, *shape)`` with one
    ``N``; return ``N``."""
    if not isinstance(inputs, dict):
        raise CompileError(f"graph '{graph.name}': inputs must be a dict of input name -> array, "
                           f"got {type(inputs).__name__}")
    names = [v.name for v in graph.inputs]
    unknown = sorted(set(inputs) - set(names), key=str)
    if unknown:
        raise CompileError(f"graph '{graph.name}': {unknown[0]!r} is not an input of the graph "
                           f"(its inputs: {', '.join(names)})")
    batch = None
    for v in graph.inputs:
        if v.name not in inputs:
            raise graph.error(v.name, "no array given for this input")
        a = inputs[v.name]
        if not isinstance(a, np.ndarray) or a.dtype != np.int8:
            got = a.dtype if isinstance(a, np.ndarray) else type(a).__name__
            raise graph.error(v.name, f"input array must be int8, got {got}")
        if a.ndim != len(v.shape) + 1 or a.shape[1:] != v.shape or a.shape[0] == 0:
            raise graph.error(v.name, f"input array has shape {a.shape}, expected (N, "
                                      f"{', '.join(map(str, v.shape))}) with N >= 1")
        if batch is not None and a.shape[0] != batch:
            raise graph.error(v.name, f"input array has {a.shape[0]} samples, another input has {batch}")
        batch = a.shape[0]
    assert batch is not None
    return batch


def run_reference(graph: Graph, inputs: dict[str, np.ndarray], all_values: bool = False) -> dict[str, np.ndarray]:
    """Run ``graph`` on a batch: ``inputs`` maps each graph input's name to an int8 ``(N, *shape)``
    array. Returns each graph output's value by name (``(N, *shape)``, int8); with ``all_values``,
    every layer's value by layer name instead (inputs included; for debugging). Raises
    :class:`compiler.errors.CompileError` (one line) for an incomplete graph or bad inputs."""
    graph.check()
    _check_inputs(graph, inputs)
    values: dict[str, np.ndarray] = {}
    for layer in graph.layers:
        if layer.op == "input":
            out = np.array(inputs[layer.name], dtype=np.int8)
        else:
            out = _EVAL[layer.op](layer, *(values[v.name] for v in layer.inputs))
        assert out.dtype == _DTYPES[layer.output.dtype] and out.shape[1:] == layer.output.shape, (layer, out.shape)
        values[layer.name] = out
    if all_values:
        return values
    return {v.name: values[v.name] for v in graph.outputs}
