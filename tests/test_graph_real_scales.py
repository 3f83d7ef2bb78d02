"""Quantized graphs with real scales: the fixed-point rescaling R(x, scale), the Graph API's new arguments
(zero points, per-channel scales, asymmetric pads, any names) and the integer reference against a float
computation of the same definitions (within one LSB)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.fixed_point import SCALE_MAX, SCALE_MIN, alu_steps, fixed_point, rescale, run_steps
from compiler.graph import Graph
from compiler.graph_reference import run_reference
from hw.alu_numpy import ALU_NUMPY


# ---- fixed point ----------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [SCALE_MIN, 1e-9, 0.0123, 0.4999999, 0.5, 0.75, 1.0, 1.5, 3.999999999, 1000.0,
                                   SCALE_MAX])
def test_fixed_point_multiplier_and_shift(scale):
    m, n = fixed_point(scale)
    assert (1 << 30) <= m < (1 << 31)
    assert -16 <= n <= 31
    assert abs(m * 2.0 ** -(31 + n) - scale) <= scale * 2.0 ** -30


def test_fixed_point_rounds_a_mantissa_of_one_up():
    # just below a power of two: the mantissa rounds to 2**31, halved, n decremented
    m, n = fixed_point(1.0 - 2.0 ** -40)
    assert (m, n) == (1 << 30, -1)


@pytest.mark.parametrize("bad", [0.0, -0.5, SCALE_MIN / 2, SCALE_MAX * 2, math.inf, math.nan])
def test_fixed_point_refuses_out_of_range(bad):
    with pytest.raises(ValueError):
        fixed_point(bad)


def test_rescale_is_the_mulhr_steps_and_within_one_lsb():
    rng = np.random.default_rng(1)
    for scale in [2.0 ** -31, 3e-7, 0.00071, 0.031, 0.5, 0.999, 1.0, 1.7, 37.5, 2.0 ** 14]:
        m, n = fixed_point(scale)
        lim = min((1 << 31) - 1, int((1 << 31) / max(1.0, scale * 2)))  # keep x*scale and the left shift in range
        x = np.concatenate([rng.integers(-lim, lim, 4000), np.arange(-300, 300), [0, lim - 1, -lim]]).astype(np.int64)
        got = rescale(x, scale)
        # the steps on the ALU's own MULHR
        v = x << max(-n, 0)
        t = ALU_NUMPY["MULHR"](v.astype(np.int32), np.int32(m)).astype(np.int64)
        k = max(n, 0)
        want = (t + (1 << (k - 1))) >> k if k else t
        assert np.array_equal(got, want), scale
        exact = x.astype(np.float64) * scale
        assert np.max(np.abs(got - np.round(exact))) <= 1, scale


def test_rescale_rounds_half_up_where_onnx_rounds_half_to_even():
    x = np.array([1, 3, 5, -1, -3])
    assert rescale(x, 0.5).tolist() == [1, 2, 3, 0, -1]           # half up
    assert np.round(x * 0.5).astype(int).tolist() == [0, 2, 2, -0, -2]  # half to even (numpy, ONNX)


# ---- the Graph API ----------------------------------------------------------------------------------
def _small_graph(name: str = "g") -> tuple[Graph, object]:
    g = Graph(name)
    return g, g.input("x", (3, 6, 6))


W = np.ones((4, 3, 3, 3), dtype=np.int8)


@pytest.mark.parametrize("call, text", [
    (lambda g, x: g.conv2d(x, W, pad=(1, 2, 3)), "pad"),
    (lambda g, x: g.conv2d(x, W, pad=(1, 0, 16, 0)), "pad 16"),
    (lambda g, x: g.conv2d(x, W, input_zero_point=200), "input_zero_point 200"),
    (lambda g, x: g.requantize(g.conv2d(x, W), 3, scale=0.1), "exactly one"),
    (lambda g, x: g.requantize(g.conv2d(x, W)), "exactly one"),
    (lambda g, x: g.requantize(g.conv2d(x, W), scale=0.0), "outside"),
    (lambda g, x: g.requantize(g.conv2d(x, W), scale=np.ones(3)), "shape (4,)"),
    (lambda g, x: g.requantize(g.conv2d(x, W), scale=np.array([0.1, 0.2, 0.3, 1e9])), "outside"),
    (lambda g, x: g.requantize(g.conv2d(x, W), scale="0.1"), "must be a float"),
    (lambda g, x: g.requantize(g.conv2d(x, W), scale=0.1, lo=5, hi=4), "lo 5 is above hi 4"),
    (lambda g, x: g.requantize(g.conv2d(x, W), 3, zero_point=2), "go with scale"),
    (lambda g, x: g.add(x, x, a_scale=0.5), "both"),
    (lambda g, x: g.add(x, x, a_zero_point=1), "zero points go with scales"),
    (lambda g, x: g.avg_pool(x, 3), "power of two"),
    (lambda g, x: g.avg_pool(x, 3, scale=-1.0), "outside"),
    (lambda g, x: g.relu(x, zero_point=300), "zero_point 300"),
])
def test_bad_arguments_are_one_line_errors(call, text):
    g, x = _small_graph()
    with pytest.raises(CompileError) as e:
        call(g, x)
    msg = str(e.value)
    assert "\n" not in msg and text in msg and "graph 'g'" in msg


def test_any_printable_name_up_to_200_characters():
    g = Graph("/model/onnx graph")
    x = g.input("onnx::input.1", (3, 6, 6))
    y = g.conv2d(x, W, name="/layer1/layer1.0/conv1/Conv")
    assert y.name == "/layer1/layer1.0/conv1/Conv"
    g.requantize(y, scale=0.01, name="x" * 200)
    for bad in ["", "a\nb", "x" * 201, 5]:
        with pytest.raises(CompileError) as e:
            g.relu(x, name=bad)
        assert "\n" not in str(e.value)
    with pytest.raises(CompileError):
        Graph("tab\there")


def test_shapes_with_asymmetric_pads_and_strides():
    g, x = _small_graph()
    y = g.conv2d(x, W, stride=2, pad=(1, 0, 2, 1))
    assert y.shape == (4, (6 + 3 - 3) // 2 + 1, (6 + 1 - 3) // 2 + 1) and y.dtype == "int32"
    q = g.requantize(y, scale=np.full(4, 0.01), zero_point=-3)
    assert q.dtype == "int8" and q.shape == y.shape
    p = g.avg_pool(g.requantize(g.conv2d(x, W, pad=1), scale=0.02), 6, scale=1 / 36)
    assert p.shape == (4, 1, 1)
    assert g.add(q, q, a_scale=0.5, b_scale=0.25).dtype == "int32"


# ---- the reference against a float computation --------------------------------------------------------
def _float_conv(x, w, b, stride, pads, zx):
    """The float convolution of the real-valued (x - zx), zero padded: exact in float64 for these sizes."""
    top, left, bottom, right = pads
    n, c, h, wd = x.shape
    o, _, k, _ = w.shape
    xp = np.zeros((n, c, h + top + bottom, wd + left + right))
    xp[:, :, top:top + h, left:left + wd] = x.astype(np.float64) - zx
    ho, wo = (h + top + bottom - k) // stride + 1, (wd + left + right - k) // stride + 1
    out = np.zeros((n, o, ho, wo))
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            out[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w.astype(np.float64))
    return out + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("seed", range(6))
def test_reference_conv_requantize_within_one_lsb_of_float(seed):
    rng = np.random.default_rng(seed)
    c, o, k = int(rng.integers(1, 5)), int(rng.integers(1, 7)), int(rng.choice([1, 2, 3]))
    h, wd, stride = int(rng.integers(k, 9)), int(rng.integers(k, 9)), int(rng.integers(1, 3))
    pads = tuple(int(p) for p in rng.integers(0, 3, 4))
    zx, zy = int(rng.integers(-128, 128)), int(rng.integers(-20, 20))
    w = rng.integers(-128, 128, (o, c, k, k), dtype=np.int8)
    b = rng.integers(-5000, 5000, o, dtype=np.int32)
    scale = rng.uniform(1e-4, 0.02, o) if seed % 2 else float(rng.uniform(1e-4, 0.02))
    g = Graph("f")
    x = g.input("in", (c, h, wd))
    acc = g.conv2d(x, w, b, stride=stride, pad=pads, input_zero_point=zx)
    g.output(g.requantize(acc, scale=scale, zero_point=zy, lo=-100, hi=120))
    xs = rng.integers(-128, 128, (3, c, h, wd), dtype=np.int8)
    got = run_reference(g, {"in": xs})[g.outputs[0].name].astype(np.int64)
    sc = np.asarray(scale).reshape(1, -1, 1, 1) if np.ndim(scale) else scale
    want = np.clip(np.round(_float_conv(xs, w, b, stride, pads, zx) * sc) + zy, -100, 120)
    assert np.max(np.abs(got - want)) <= 1


def test_reference_dense_add_avg_pool_relu_within_one_lsb_of_float():
    rng = np.random.default_rng(7)
    g = Graph("f")
    x = g.input("in", (3, 7, 7))
    zx = 5
    p = g.avg_pool(x, 7, scale=0.9 / 49, input_zero_point=zx, zero_point=-4)  # a global average over 7x7
    summed = g.add(x, x, a_scale=0.3, b_scale=1.2, a_zero_point=zx, b_zero_point=zx)
    r = g.relu(g.requantize(summed, scale=0.5, zero_point=2), zero_point=2)
    wd = rng.integers(-128, 128, (4, 3), dtype=np.int8)
    from_pool = g.requantize(g.dense(g.flatten(p), wd, input_zero_point=-4), scale=0.01)
    g.output(r)
    g.output(from_pool)
    xs = rng.integers(-128, 128, (5, 3, 7, 7), dtype=np.int8)
    vals = run_reference(g, {"in": xs}, all_values=True)
    xf = xs.astype(np.float64)
    pool = np.clip(np.round((xf - zx).sum(axis=(2, 3)) * 0.9 / 49) - 4, -128, 127)
    assert np.max(np.abs(vals[p.name].reshape(5, 3) - pool)) <= 1
    add = np.round((xf - zx) * 0.3) + np.round((xf - zx) * 1.2)  # each operand rescaled, then summed
    assert np.max(np.abs(vals[summed.name] - add)) <= 2
    relu = np.maximum(np.clip(np.rint(vals[summed.name] * 0.5) + 2, -128, 127), 2)
    assert np.array_equal(vals[r.name], relu)  # an exact scale of 0.5: ties reachable, exactly round half to even
    dense = np.clip(np.round((vals[p.name].reshape(5, 3).astype(np.float64) + 4) @ wd.T.astype(np.float64) * 0.01),
                    -128, 127)
    assert np.max(np.abs(vals[from_pool.name] - dense)) <= 1


def test_old_calls_keep_their_meaning():
    g = Graph("old")
    x = g.input("x", (2, 4, 4))
    w = np.full((2, 2, 3, 3), 3, dtype=np.int8)
    y = g.relu(g.requantize(g.conv2d(x, w, pad=1), 4))
    g.output(g.avg_pool(y, 2))
    xs = np.arange(-16, 16, dtype=np.int8).reshape(1, 2, 4, 4)
    acc = np.zeros((1, 2, 4, 4), dtype=np.int64)
    xp = np.pad(xs.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for i in range(4):
        for j in range(4):
            acc[:, :, i, j] = 3 * xp[:, :, i:i + 3, j:j + 3].sum(axis=(1, 2, 3))[:, None]
    q = np.maximum(np.clip((acc + 8) >> 4, -128, 127), 0)
    pool = (q.reshape(1, 2, 2, 2, 2, 2).sum(axis=(3, 5)) + 2) >> 2
    assert np.array_equal(run_reference(g, {"x": xs})[g.outputs[0].name], pool)


def test_alu_steps_equal_rescale_for_every_int32():
    rng = np.random.default_rng(3)
    cases = [0.0007, 0.6, 1.0, 3.5, 2.0 ** -31, np.array([0.001, 0.7, 2.5, 1e-6]), np.array([0.01, 0.02, 1e-5])]
    for scale in cases:
        ch = np.size(scale)
        x = rng.integers(-(1 << 31), 1 << 31, (500, ch)).astype(np.int64)
        x[:3] = [[-(1 << 31)] * ch, [(1 << 31) - 1] * ch, [0] * ch]
        steps = alu_steps(scale)
        got = run_steps(x.astype(np.int32), steps)
        assert np.array_equal(got, rescale(x, np.broadcast_to(scale, (ch,)))), scale
    assert [op for op, _ in alu_steps(0.01)] == ["MULHR", "MULHR"]
    assert [op for op, _ in alu_steps(3.0)] == ["SHR", "MULHR"]
