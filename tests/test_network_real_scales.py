"""The network compiler on quantized graphs with real scales: random small graphs (per-tensor and
per-channel scales, zero points, asymmetric pads, strides, scaled adds and averages, ONNX-style names)
on golden, ISS, TLM and a sample on the RTL, bit for bit against the integer reference."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.graph import Graph
from compiler.graph_reference import run_reference
from compiler.network import compile_network
from cosim import models


def _r8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-128, 128, size=shape).astype(np.int8)


def _zp(rng: np.random.Generator) -> int:
    return int(rng.integers(-128, 128)) if rng.random() < 0.7 else 0


def _scale(rng: np.random.Generator, o: int, fan_in: int) -> float | np.ndarray:
    """A requantization scale that keeps the int8 result in range most of the time."""
    base = 1.0 / (128.0 * np.sqrt(fan_in) * 2.0)
    if rng.random() < 0.5:
        return base * rng.uniform(0.3, 3.0, o)
    return float(base * rng.uniform(0.3, 3.0))


def random_real_graph(rng: np.random.Generator) -> Graph:
    """A random small quantized network as an ONNX importer builds it: convolutions with zero points,
    asymmetric pads, strides and per-channel scales; ReLUs with zero points; scaled adds and averages
    (any window, a global one too); max pooling; a dense layer; names with ONNX's characters."""
    g = Graph("/model/rand")
    x = g.input("onnx::input.0", (int(rng.integers(1, 20)), int(rng.integers(4, 10)), int(rng.integers(4, 10))))
    zx = _zp(rng)
    for i in range(int(rng.integers(1, 4))):
        kind = rng.choice(["conv", "conv", "pool", "add", "relu", "avg"])
        c, h, w = x.shape
        name = f"/layer{i}/{kind}/Conv" if kind == "conv" else None
        if kind == "conv":
            k = int(rng.choice([1, 2, 3])) if min(h, w) >= 3 else 1
            o = int(rng.integers(1, 24))
            pads = tuple(int(p) for p in rng.integers(0, k, 4)) if k > 1 else 0
            bias = rng.integers(-3000, 3000, o).astype(np.int32) if rng.random() < 0.7 else None
            acc = g.conv2d(x, _r8(rng, o, c, k, k), bias, stride=int(rng.choice([1, 1, 2])), pad=pads,
                           input_zero_point=zx, name=name)
            zy = _zp(rng)
            x = g.requantize(acc, scale=_scale(rng, o, c * k * k), zero_point=zy, name=f"onnx::Quant_{i}")
            if rng.random() < 0.5:
                x = g.relu(x, zero_point=zy)
            zx = zy
        elif kind == "pool" and min(h, w) >= 2:
            x = g.max_pool(x, 2, int(rng.choice([1, 2])))
        elif kind == "avg" and min(h, w) >= 2:
            k = int(rng.choice([2, 3, min(h, w)]))
            zy = _zp(rng)
            x = g.avg_pool(x, k, int(rng.choice([1, k])), scale=float(rng.uniform(0.5, 1.5)) / (k * k),
                           input_zero_point=zx, zero_point=zy)
            zx = zy
        elif kind == "add":
            y = g.requantize(g.conv2d(x, _r8(rng, c, c, 1, 1), None, input_zero_point=zx),
                             scale=_scale(rng, c, c), zero_point=_zp(rng))
            zy = _zp(rng)
            s = g.add(x, y, a_scale=float(rng.uniform(0.2, 1.5)), b_scale=float(rng.uniform(0.2, 1.5)),
                      a_zero_point=zx, b_zero_point=y.layer.params["zero_point"])
            x = g.requantize(s, scale=float(rng.choice([0.25, 0.5, 1.0])), zero_point=zy)
            zx = zy
        else:
            x = g.relu(x, zero_point=zx)
    if rng.random() < 0.3:
        g.output(x)
    f = g.flatten(x)
    o = int(rng.integers(1, 12))
    g.output(g.requantize(g.dense(f, _r8(rng, o, f.shape[0]), None, input_zero_point=zx),
                          scale=_scale(rng, o, f.shape[0]), zero_point=_zp(rng), name="logits:0"))
    return g


def _case(seed: int, config: str):
    rng = np.random.default_rng(seed)
    g = random_real_graph(rng)
    n = int(rng.integers(1, 4))
    inputs = {v.name: rng.integers(-128, 128, size=(n, *v.shape)).astype(np.int8) for v in g.inputs}
    net = compile_network(g, config, batch=n)
    net.set_inputs(inputs)
    return g, net, inputs, run_reference(g, inputs)


def _same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    return got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("config", ["default", "small"])
def test_random_real_scale_graphs_golden_iss_tlm_match_the_reference(config: str) -> None:
    for seed in range(10):
        g, net, inputs, want = _case(seed, config)
        assert _same(net.run_golden(inputs), want), (seed, g.summary())
        assert _same(net.outputs(models.iss(net.program).outputs), want), (seed, g.summary())
        assert _same(net.outputs(models.tlm(net.program).outputs), want), (seed, g.summary())


def test_random_real_scale_graphs_on_the_rtl_bit_and_cycle_exact() -> None:
    if models.rtl_available():
        pytest.skip(models.rtl_available())
    cases = [_case(seed, "small") for seed in (200, 201)]
    rtl = models.rtl([net.program for _, net, _, _ in cases])
    for (g, net, _, want), r in zip(cases, rtl):
        assert r.error is None, (g.summary(), r.error)
        assert _same(net.outputs(r.outputs), want), g.summary()
        assert r.cycles == models.tlm(net.program).cycles, g.summary()


def _conv_graph(pads, zx: int, scale, bias: bool = True, host_im2col: bool = True
                ) -> tuple[Graph, dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    g = Graph("conv")
    x = g.input("x", (5, 6, 7))
    if not host_im2col:  # a graph input only a convolution reads is packed im2col by the host
        x = g.relu(x, zero_point=-128)
    acc = g.conv2d(x, _r8(rng, 7, 5, 3, 3), rng.integers(-900, 900, 7).astype(np.int32) if bias else None,
                   stride=2, pad=pads, input_zero_point=zx, name="/c/Conv")
    g.output(g.requantize(acc, scale=scale, zero_point=-3, name="/c/Quant"))
    return g, {"x": _r8(rng, 2, 5, 6, 7)}


@pytest.mark.parametrize("host_im2col", [True, False])
@pytest.mark.parametrize("pads, zx, scale", [
    ((1, 0, 2, 1), 37, np.linspace(0.0004, 0.003, 7)),  # per-position start map, per-channel scale
    ((0, 0, 0, 0), -90, 0.001),                          # zero point folded into the bias vector
    ((2, 2, 2, 2), 0, np.array([0.001, 0.6, 2.0, 0.002, 3e-5, 0.7, 1.0])),  # scales with n <= 0: 3 shift steps
])
def test_conv_zero_point_pads_and_scales_exact_on_every_config(pads, zx, scale, host_im2col) -> None:
    g, inputs = _conv_graph(pads, zx, scale, host_im2col=host_im2col)
    want = run_reference(g, inputs)
    for config in ("default", "small", "wide"):
        net = compile_network(g, config, batch=2)
        net.set_inputs(inputs)
        assert _same(net.run_golden(inputs), want), config
        assert _same(net.outputs(models.tlm(net.program).outputs), want), config


def test_a_padded_conv_with_an_input_zero_point_starts_from_a_per_position_map() -> None:
    g, inputs = _conv_graph((1, 1, 1, 1), 12, 0.001, host_im2col=False)
    net = compile_network(g, "default", batch=2)
    assert net.stages[1].bias_map is not None
    g2, _ = _conv_graph((1, 1, 1, 1), 0, 0.001, host_im2col=False)
    assert compile_network(g2, "default", batch=2).stages[1].bias_map is None
    g3, _ = _conv_graph((1, 1, 1, 1), 12, 0.001)  # im2col: the host pads with the zero point
    assert compile_network(g3, "default", batch=2).stages[0].bias_map is None


def test_onnx_names_map_to_region_identifiers_and_reports_keep_them() -> None:
    g, inputs = _conv_graph(0, 0, 0.001)
    net = compile_network(g, "default", batch=2)
    assert net.region_name("/c/Quant") == "c_Quant"
    assert net.program.meta["network"]["regions"]["/c/Quant"] == "c_Quant"
    assert [st.name for st in net.stages] == ["/c/Conv"]
    assert [s["name"] for s in net.program.meta["sections"]] == ["/c/Conv"]
    assert "/c/Quant" in net.run_golden(inputs)
    # two names that map to one identifier stay apart
    g = Graph("x")
    a = g.input("a/b", (4,))
    g.output(g.relu(a, name="a:b"))
    g.output(g.relu(a, name="a.b"))
    net = compile_network(g)
    assert len({net.region_name(n) for n in ("a/b", "a:b", "a.b")}) == 3


def test_errors_name_the_onnx_layer() -> None:
    g = Graph("/m")
    x = g.input("in", (4, 6, 6))
    q = g.requantize(g.conv2d(x, np.ones((4, 4, 1, 1), np.int8), name="/a/Conv"), scale=0.01, name="/a/Q")
    s = g.requantize(g.add(q, q, a_scale=0.5, b_scale=0.5, name="/a/Add"), scale=np.array([0.5, 0.25, 0.5, 0.5]),
                     name="/a/Q2")
    g.output(s)
    with pytest.raises(CompileError) as e:
        compile_network(g)
    msg = str(e.value)
    assert "\n" not in msg and "'/a/Q2'" in msg and "per-channel" in msg
