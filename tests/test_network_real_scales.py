"""The network compiler on quantized graphs with real scales: random small graphs (per-tensor and
per-channel scales, zero points, asymmetric pads, strides, scaled adds and averages, ONNX-style names)
on golden, ISS, TLM and a sample on the RTL, bit for bit against the integer reference."""

from __future__ import annotations

from typing import Any

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
        kind = rng.choice(["conv", "conv", "pool", "add", "relu", "avg", "requant", "shift"])
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
            izp = int(rng.integers(-5000, 5000)) if rng.random() < 0.3 else 0
            if rng.random() < 0.3:  # a ReLU on the accumulators, before the requantization
                acc = g.relu(acc, zero_point=int(rng.integers(-3000, 3000)))
            x = g.requantize(acc, scale=_scale(rng, o, c * k * k), input_zero_point=izp, zero_point=zy,
                             name=f"onnx::Quant_{i}")
            if rng.random() < 0.5:
                x = g.relu(x, zero_point=zy)
            zx = zy
        elif kind == "pool" and min(h, w) >= 2:
            x = g.max_pool(x, 2, int(rng.choice([1, 2])))
        elif kind == "avg" and min(h, w) >= 2:
            k = int(rng.choice([2, 3, min(h, w, 7)]))  # a 7x7 window: a global average on config small too
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
        elif kind == "requant":  # an int8 value rescaled (a QuantizeLinear of a dequantized tensor)
            zy = _zp(rng)
            x = g.requantize(x, scale=float(rng.uniform(0.3, 2.5)), input_zero_point=zx, zero_point=zy)
            zx = zy
        elif kind == "shift":  # the power-of-two form with a ReLU of a zero point after it
            o = int(rng.integers(1, 12))
            acc = g.conv2d(x, _r8(rng, o, c, 1, 1), None)
            x = g.relu(g.requantize(acc, int(rng.integers(6, 10))), zero_point=int(rng.integers(-20, 20)))
            zx = 0
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
    # a border correction with per-lane shift steps (scales with n <= 0 beside n >= 1), and a start map
    for kw in (dict(pads=(1, 0, 2, 1), zx=37, scale=np.array([0.001, 0.6, 2.0, 0.002, 3e-5, 0.7, 1.0])),
               dict(pads=2, zx=-77, scale=0.0005, k=5, stride=1)):
        g, inputs = _conv_graph(host_im2col=False, **kw)
        net = compile_network(g, "small", batch=2)
        net.set_inputs(inputs)
        cases.append((g, net, inputs, run_reference(g, inputs)))
    assert cases[2][1].stages[1].border is not None and cases[3][1].stages[1].bias_map is not None
    assert [op for op, _ in cases[2][1].stages[1].epi.steps][-3:] == ["SHR", "ADD", "SHR"]
    rtl = models.rtl([net.program for _, net, _, _ in cases])
    for (g, net, _, want), r in zip(cases, rtl):
        assert r.error is None, (g.summary(), r.error)
        assert _same(net.outputs(r.outputs), want), g.summary()
        assert r.cycles == models.tlm(net.program).cycles, g.summary()


def _conv_graph(pads, zx: int, scale, bias: bool = True, host_im2col: bool = True, k: int = 3, stride: int = 2
                ) -> tuple[Graph, dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    g = Graph("conv")
    x = g.input("x", (5, 6, 7))
    if not host_im2col:  # a graph input only a convolution reads is packed im2col by the host
        x = g.relu(x, zero_point=-128)
    acc = g.conv2d(x, _r8(rng, 7, 5, k, k), rng.integers(-900, 900, 7).astype(np.int32) if bias else None,
                   stride=stride, pad=pads, input_zero_point=zx, name="/c/Conv")
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


def test_a_padded_conv_with_an_input_zero_point_corrects_its_border() -> None:
    g, inputs = _conv_graph((1, 1, 1, 1), 12, 0.001, host_im2col=False)
    st = compile_network(g, "default", batch=2).stages[1]
    # 3x3, pad 1, stride 2 on 6x7 -> 3x4: the top row and the left and right columns reach outside, the
    # bottom row does not: (top, -), (top, left), (top, right), (-, left), (-, right)
    assert st.bias_map is None and st.border is not None and st.border.count == 5
    assert st.border.row_class == (1, 0, 0) and st.border.col_class == (1, 0, 0, 2)
    g2, _ = _conv_graph((1, 1, 1, 1), 0, 0.001, host_im2col=False)
    assert compile_network(g2, "default", batch=2).stages[1].border is None
    g3, _ = _conv_graph((1, 1, 1, 1), 12, 0.001)  # im2col: the host pads with the zero point
    assert compile_network(g3, "default", batch=2).stages[0].border is None


@pytest.mark.parametrize("config", ["default", "small"])
def test_many_border_classes_start_from_a_per_position_map(config: str) -> None:
    # 5x5, pad 2, stride 1: 5 row classes x 5 column classes, 24 corrections: the start map
    g, inputs = _conv_graph(2, -77, np.linspace(0.0002, 0.001, 7), host_im2col=False, k=5, stride=1)
    net = compile_network(g, config, batch=2)
    assert net.stages[1].bias_map is not None and net.stages[1].border is None
    net.set_inputs(inputs)
    want = run_reference(g, inputs)
    assert _same(net.run_golden(inputs), want)
    assert _same(net.outputs(models.tlm(net.program).outputs), want)


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
    g.output(g.relu(a, name="größe"))
    g.output(g.relu(a, name="class"))
    net = compile_network(g)
    names = [net.region_name(n) for n in ("a/b", "a:b", "a.b", "größe", "class")]
    assert len(set(names)) == 5 and all(n.isascii() and n.isidentifier() for n in names), names


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


def _two_convolutions(name: str, rng: np.random.Generator) -> tuple[Graph, Any, Any]:
    """A graph with input x (16, 6, 6), y = relu(R(conv c1 of x)) per channel and z = R(conv c2 of y)."""
    g = Graph(name)
    x = g.input("x", (16, 6, 6))
    y = g.relu(g.requantize(g.conv2d(x, _r8(rng, 16, 16, 3, 3), None, pad=1, input_zero_point=-128, name="c1"),
                            scale=np.linspace(0.0002, 0.0008, 16), zero_point=-128), zero_point=-128)
    z = g.requantize(g.conv2d(y, _r8(rng, 16, 16, 3, 3), None, pad=1, input_zero_point=-128, name="c2"),
                     scale=0.0004, zero_point=5)
    return g, y, z


def test_a_shortcut_add_fuses_into_a_real_scale_convolution() -> None:
    rng = np.random.default_rng(9)
    g, y, z = _two_convolutions("res", rng)
    g.output(g.relu(g.requantize(g.add(z, y, name="add"), 0)))  # clip only: fused into c2
    net = compile_network(g, "small", batch=2)
    assert [(st.name, st.op) for st in net.stages] == [("c1", "conv2d"), ("c2", "conv2d")]
    assert net.stages[1].border is not None and "add" in [x.name for x in net.stages[1].layers]
    inputs = {"x": _r8(rng, 2, 16, 6, 6)}
    net.set_inputs(inputs)
    want = run_reference(g, inputs)
    assert _same(net.run_golden(inputs), want)
    assert _same(net.outputs(models.tlm(net.program).outputs), want)


@pytest.mark.parametrize("conv_first, a_zp, config", [(True, 5, "small"), (False, 3, "default")])
def test_a_quantized_add_fuses_into_the_convolution_exactly(conv_first: bool, a_zp: int, config: str) -> None:
    """A scaled add (ONNX's QDQ Add) of a real-scale convolution's result and a stored activation runs in
    the convolution's epilogue, bit for bit the elementwise stage's arithmetic (operands either way round;
    the add's zero point of the convolution's result equal to its output zero point, or not)."""
    rng = np.random.default_rng(11)
    g, y, z = _two_convolutions("qres", rng)
    ops = (z, y) if conv_first else (y, z)
    zps = (a_zp, -128) if conv_first else (-128, a_zp)
    s = g.add(*ops, a_scale=0.7 * 2**12, b_scale=0.45 * 2**12, a_zero_point=zps[0], b_zero_point=zps[1], name="add")
    g.output(g.requantize(s, scale=2.0**-12, zero_point=-7, lo=-7, name="add_relu"))
    net = compile_network(g, config, batch=2)
    assert [(st.name, st.op) for st in net.stages] == [("c1", "conv2d"), ("c2", "conv2d")]
    sr = net.stages[1].epi.scaled_residual
    assert sr is not None and net.stages[1].shape.residual_acc
    # the sum can be an exact tie of its power-of-two requantization, so it rounds half to even (three
    # passes, compiler.fixed_point's "Ties to even"), not by the two-pass rounding shift that rounds half up
    assert [op for op, _ in sr.final.steps] == ["SHR", "MULHR", "MULHR"]
    inputs = {"x": _r8(rng, 2, 16, 6, 6)}
    net.set_inputs(inputs)
    want = run_reference(g, inputs)
    assert len(np.unique(want["add_relu"])) > 50  # the sum spans the range: rescaling, clip and ReLU all matter
    assert _same(net.run_golden(inputs), want)
    assert _same(net.outputs(models.iss(net.program).outputs), want)
    assert _same(net.outputs(models.tlm(net.program).outputs), want)


def test_a_unit_scale_requantization_needs_no_rescaling_pass() -> None:
    """``R(x, 1) = x`` while ``x`` cannot wrap: a requantization by 1 (the importer's clamps and its max
    pool's padding convolution) runs no MULHR, and stays exact."""
    rng = np.random.default_rng(5)
    g = Graph("unit")
    x = g.input("x", (16, 5, 5))
    eye = np.eye(16, dtype=np.int8).reshape(16, 16, 1, 1)
    y = g.requantize(g.conv2d(x, eye, None, pad=1, input_zero_point=-128, name="pad"), scale=1.0, zero_point=-128)
    g.output(y)
    net = compile_network(g, "default", batch=1)
    assert net.stages[0].epi.steps == ()
    inputs = {"x": _r8(rng, 1, 16, 5, 5)}
    net.set_inputs(inputs)
    want = run_reference(g, inputs)
    assert (want[y.name][0, :, 0, :] == -128).all()  # the padding
    assert _same(net.run_golden(inputs), want)
    assert _same(net.outputs(models.tlm(net.program).outputs), want)


def test_a_strided_1x1_convolution_loads_only_the_rows_it_reads() -> None:
    """A 1x1 stride-2 convolution (a ResNet downsample) LOADs every second input row only, packed on chip;
    bit-exact on golden, ISS, TLM and RTL, TLM cycles equal to the RTL's."""
    rng = np.random.default_rng(3)
    g = Graph("ds")
    x = g.input("x", (32, 11, 10))
    acc = g.conv2d(g.relu(x, zero_point=-3), _r8(rng, 48, 32, 1, 1), rng.integers(-900, 900, 48).astype(np.int32),
                   stride=2, input_zero_point=-3, name="downsample")
    g.output(g.requantize(acc, scale=np.linspace(0.001, 0.004, 48), zero_point=4))
    net = compile_network(g, "small", batch=2)
    st = net.stages[-1]
    assert st.shape.row_skip and st.plan.th_in == st.plan.th
    inputs = {"x": _r8(rng, 2, 32, 11, 10)}
    net.set_inputs(inputs)
    want = run_reference(g, inputs)
    assert _same(net.run_golden(inputs), want)
    assert _same(net.outputs(models.iss(net.program).outputs), want)
    tlm = models.tlm(net.program)
    assert _same(net.outputs(tlm.outputs), want)
    if not models.rtl_available():
        r = models.rtl([net.program])[0]
        assert r.error is None and _same(net.outputs(r.outputs), want) and r.cycles == tlm.cycles
