"""The network compiler: random graphs on golden, ISS, TLM and RTL against the numpy reference; the
DRAM plan by liveness; layer overlap through the dependency tokens; fusion; one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.graph import Graph, Value
from compiler.graph_reference import run_reference
from compiler.network import compile_network
from cosim import models


def _r8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-40, 41, size=shape).astype(np.int8)


def _bias(rng: np.random.Generator, n: int) -> np.ndarray | None:
    return rng.integers(-3000, 3000, size=n).astype(np.int32) if rng.random() < 0.7 else None


def random_graph(rng: np.random.Generator) -> Graph:
    """A random small network: convolutions (any kernel 1/3/5, stride 1/2, padding), pools (the maximum
    also over padding), residual adds
    (fused and not), ReLUs, sometimes a spatial output that is also flattened, dense layers."""
    g = Graph("rand")
    if rng.random() < 0.75:
        x = g.input("x", (int(rng.integers(1, 40)), int(rng.integers(3, 12)), int(rng.integers(3, 12))))
        for _ in range(int(rng.integers(1, 4))):
            kind = rng.choice(["conv", "conv", "pool", "add", "relu"])
            c, h, w = x.shape
            if kind == "conv":
                k = int(rng.choice([1, 3, 5])) if min(h, w) >= 5 else 1
                o = int(rng.integers(1, 40))
                y = g.requantize(g.conv2d(x, _r8(rng, o, c, k, k), _bias(rng, o), stride=int(rng.choice([1, 1, 2])),
                                          pad=int(rng.integers(0, k // 2 + 1))), int(rng.integers(4, 10)))
                x = g.relu(y) if rng.random() < 0.6 else y
            elif kind == "pool" and min(h, w) >= 3:
                if rng.random() < 0.5:
                    k = int(rng.choice([2, 3]))
                    pad = tuple(int(v) for v in rng.integers(0, k, size=4)) if rng.random() < 0.5 else 0
                    x = g.max_pool(x, k, int(rng.choice([1, 2])), pad=pad)
                else:
                    x = g.avg_pool(x, 2)
            elif kind == "add":
                y = g.relu(g.requantize(g.conv2d(x, _r8(rng, c, c, 1, 1), _bias(rng, c)), 7))
                z = g.requantize(g.add(x, y), int(rng.integers(0, 2)))  # shift 0: fused into the conv
                x = g.relu(z) if rng.random() < 0.5 else z
            else:
                x = g.relu(x)
        if rng.random() < 0.3:
            g.output(x)
            if rng.random() < 0.5:
                return g
        x = g.flatten(x)
    else:
        x = g.input("x", (int(rng.integers(1, 70)),))
    for _ in range(int(rng.integers(1, 3))):
        o = int(rng.integers(1, 50))
        y = g.requantize(g.dense(x, _r8(rng, o, x.shape[0]), _bias(rng, o)), int(rng.integers(5, 11)))
        x = g.relu(y) if rng.random() < 0.6 else y
    g.output(x)
    return g


def _case(seed: int, config: str):
    rng = np.random.default_rng(seed)
    g = random_graph(rng)
    n = int(rng.integers(1, 5))
    inputs = {v.name: rng.integers(-128, 128, size=(n, *v.shape)).astype(np.int8) for v in g.inputs}
    net = compile_network(g, config, batch=n)
    net.set_inputs(inputs)
    return g, net, inputs, run_reference(g, inputs)


def _same(net, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    return got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("config", ["default", "small", "wide"])
def test_random_graphs_golden_iss_tlm_match_the_reference(config: str) -> None:
    for seed in range(12):
        g, net, inputs, want = _case(seed, config)
        assert _same(net, net.run_golden(inputs), want), (seed, g.summary())
        assert _same(net, net.outputs(models.iss(net.program).outputs), want), (seed, g.summary())
        assert _same(net, net.outputs(models.tlm(net.program).outputs), want), (seed, g.summary())


@pytest.mark.parametrize("config", ["default", "small"])
def test_random_graphs_on_the_rtl_bit_and_cycle_exact(config: str) -> None:
    if models.rtl_available():
        pytest.skip(models.rtl_available())
    cases = [_case(seed, config) for seed in range(100, 104)]
    rtl = models.rtl([net.program for _, net, _, _ in cases])
    for (g, net, _, want), r in zip(cases, rtl):
        assert r.error is None, (g.summary(), r.error)
        assert _same(net, net.outputs(r.outputs), want), g.summary()
        assert r.cycles == models.tlm(net.program).cycles, g.summary()


def _chain(n_convs: int) -> Graph:
    rng = np.random.default_rng(3)
    g = Graph("chain")
    x = g.input("x", (16, 6, 6))
    for i in range(n_convs):
        x = g.relu(g.requantize(g.conv2d(x, _r8(rng, 16, 16, 3, 3), None, pad=1, name=f"c{i}"), 7))
    g.output(x)
    return g


def test_activations_reuse_memory_and_live_values_never_overlap() -> None:
    g = _chain(5)
    net = compile_network(g, "default", batch=2)
    info = net.program.meta["network"]
    dram = info["dram"]
    assert dram["activation_bytes_with_reuse"] < dram["activation_bytes_without_reuse"]
    acts = info["activations"]
    assert len(acts) == 4  # c0..c3 in 'act', c4 in the output region
    for a in acts:
        for b in acts:
            if a is not b and not (a["last_stage"] < b["first_stage"] or b["last_stage"] < a["first_stage"]):
                assert a["offset"] + a["bytes"] <= b["offset"] or b["offset"] + b["bytes"] <= a["offset"], (a, b)
    assert net.program.region("act").nbytes == dram["activation_bytes_with_reuse"]
    inputs = {"x": np.random.default_rng(0).integers(-128, 128, (2, 16, 6, 6)).astype(np.int8)}
    net.set_inputs(inputs)
    assert _same(net, net.outputs(models.tlm(net.program).outputs), run_reference(g, inputs))


def test_sections_are_the_stages_and_the_next_layer_starts_loading_before_the_last_store() -> None:
    g = _chain(3)
    net = compile_network(g, "default", batch=2)
    net.set_inputs({"x": np.ones((2, 16, 6, 6), dtype=np.int8)})
    secs = net.program.meta["sections"]
    assert [s["name"] for s in secs] == ["c0", "c1", "c2"] == [st.name for st in net.stages]
    assert secs[0]["first"] == 0 and sum(s["count"] for s in secs) == len(net.program.insns) - 1
    m = models.tlm_traced(net.program)
    for a, b in zip(secs, secs[1:]):
        in_a = range(a["first"], a["first"] + a["count"])
        in_b = range(b["first"], b["first"] + b["count"])
        last_store = max(end for unit, pc, _, _, _, end in m.tracer.insns if unit == "store" and pc in in_a)
        first_load = min(ex for unit, pc, _, _, ex, _ in m.tracer.insns if unit == "load" and pc in in_b)
        assert first_load < last_store, (a["name"], b["name"])


def test_fusion_conv_requantize_relu_and_residual_add() -> None:
    rng = np.random.default_rng(1)
    g = Graph("res")
    x = g.input("x", (32, 6, 6))
    y = g.relu(g.requantize(g.conv2d(x, _r8(rng, 32, 32, 3, 3), _bias(rng, 32), pad=1, name="c1"), 8))
    z = g.requantize(g.conv2d(y, _r8(rng, 32, 32, 3, 3), None, pad=1, name="c2"), 8)
    o = g.relu(g.requantize(g.add(z, x, name="add"), 0))             # clip only: fused into c2
    o2 = g.relu(g.requantize(g.add(o, y, name="add2"), 1))           # a shift: its own stage
    g.output(o2)
    net = compile_network(g, "small", batch=2)
    assert [(st.name, st.op) for st in net.stages] == [("c1", "conv2d"), ("c2", "conv2d"), ("add2", "eltwise")]
    assert "add" in [layer.name for layer in net.stages[1].layers]
    inputs = {"x": rng.integers(-128, 128, (2, 32, 6, 6)).astype(np.int8)}
    net.set_inputs(inputs)
    want = run_reference(g, inputs)
    assert _same(net, net.run_golden(inputs), want)
    assert _same(net, net.outputs(models.tlm(net.program).outputs), want)


def test_an_output_that_a_later_layer_reads_is_copied_and_both_outputs_are_right() -> None:
    rng = np.random.default_rng(2)
    g = Graph("two")
    x = g.input("x", (8, 4, 4))
    y = g.relu(g.requantize(g.conv2d(x, _r8(rng, 8, 8, 3, 3), None, pad=1, name="c1"), 6))
    g.output(y)
    f = g.flatten(y)
    g.output(f)
    g.output(g.requantize(g.dense(f, _r8(rng, 10, 128), None, name="fc"), 8))
    net = compile_network(g, "default", batch=3)
    assert [st.name for st in net.stages] == ["c1", y.name + ".out", f.name, f.name + ".out", "fc"]
    inputs = {"x": rng.integers(-128, 128, (3, 8, 4, 4)).astype(np.int8)}
    net.set_inputs(inputs)
    want = run_reference(g, inputs)
    assert _same(net, net.outputs(models.tlm(net.program).outputs), want)
    assert _same(net, net.run_golden(inputs), want)


def _err(fn) -> str:
    with pytest.raises(CompileError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_bad_graphs_fail_at_compile_time_naming_the_layer() -> None:
    w = np.ones((4, 3, 3, 3), dtype=np.int8)

    def unquantized_pool():
        g = Graph("g")
        g.max_pool(g.conv2d(g.input("x", (3, 8, 8)), w, name="c1"), 2)
    assert "layer 'max_pool0'" in _err(unquantized_pool) and "int32" in _err(unquantized_pool)

    def shared_int32():
        g = Graph("g")
        y = g.conv2d(g.input("x", (3, 8, 8)), w, name="c1")
        g.output(g.requantize(y, 3))
        g.output(g.requantize(y, 4))
        compile_network(g)
    assert "layer 'c1'" in _err(shared_int32) and "feeds 2 layers" in _err(shared_int32)

    def untileable():
        g = Graph("g")
        g.output(g.max_pool(g.input("x", (8, 4, 200)), 2, name="wide_pool"))
        compile_network(g, "small")
    assert "layer 'wide_pool': cannot be tiled on config 'small'" in _err(untileable)

    def float_weights():
        g = Graph("g")
        g.conv2d(g.input("x", (3, 8, 8)), w.astype(np.float32), name="c1")
    assert "layer 'c1': weight must be int8, got float32" in _err(float_weights)

    def mismatched():
        g = Graph("g")
        g.dense(g.flatten(g.input("x", (3, 8, 8))), np.ones((10, 100), np.int8), name="fc")
    assert "layer 'fc': weight has shape (10, 100), expected (?, 192)" in _err(mismatched)

    def add_shapes():
        g = Graph("g")
        g.add(g.input("a", (3, 8, 8)), g.input("b", (3, 8, 4)), name="sum")
    assert "layer 'sum'" in _err(add_shapes)

    # a name the network's own regions use gets a region of another name
    g = Graph("g")
    g.output(g.relu(g.input("weights", (3, 8, 8))))
    assert compile_network(g).region_name("weights") not in ("weights", "biases", "act")

    def too_many_outputs():
        g = Graph("g")
        x = g.input("x", (3, 8, 8))
        for _ in range(6):
            g.output(g.relu(x))
        compile_network(g)
    assert "region slots" in _err(too_many_outputs)

    def bad_batch():
        g = Graph("g")
        g.output(g.relu(g.input("x", (3, 8, 8))))
        compile_network(g, batch=0)
    assert "batch 0" in _err(bad_batch)

    def bad_input():
        g = Graph("g")
        g.output(g.relu(g.input("x", (3, 8, 8))))
        compile_network(g, batch=2).set_inputs({"x": np.zeros((3, 3, 8, 8), np.int8)})
    assert "input 'x' must be int8 of shape (2, 3, 8, 8)" in _err(bad_input)


def test_values_of_another_graph_are_refused() -> None:
    a, b = Graph("a"), Graph("b")
    x = a.input("x", (4,))
    with pytest.raises(CompileError, match="graph 'b'.*must be a value of this graph"):
        b.relu(x)
    assert isinstance(x, Value)


@pytest.mark.parametrize("config", ["default", "small"])
def test_max_pool_over_padding_is_the_maximum_of_the_window_inputs(config: str) -> None:
    """Padding never wins: each window's maximum over its input pixels alone, also when every input is
    negative, for pads on any side (tiles in the padding at the top and the bottom, clamped columns)."""
    rng = np.random.default_rng(7)
    runs = []
    for c, h, w, k, s, pad in [(16, 12, 11, 3, 2, 1), (8, 9, 7, 3, 2, (2, 0, 1, 2)), (20, 5, 6, 2, 2, (0, 1, 1, 0)),
                               (8, 7, 7, 3, 3, 2), (3, 4, 5, 3, 1, (1, 2, 2, 1))]:
        g = Graph("padded_pool")
        g.output(g.max_pool(g.input("x", (c, h, w)), k, s, pad=pad))
        x = rng.integers(-128, 0, size=(2, c, h, w)).astype(np.int8)  # all negative: a zero pad would win
        x[0, 0, 0, 0] = -128
        t, left, b, r = pad if isinstance(pad, tuple) else (pad,) * 4
        xp = np.pad(x, ((0, 0), (0, 0), (t, b), (left, r)), constant_values=-128)
        ho, wo = (h + t + b - k) // s + 1, (w + left + r - k) // s + 1
        want = np.array([[[[xp[n, ch, i * s:i * s + k, j * s:j * s + k].max() for j in range(wo)]
                           for i in range(ho)] for ch in range(c)] for n in range(2)], dtype=np.int8)
        ref = run_reference(g, {"x": x})
        assert np.array_equal(next(iter(ref.values())), want), (c, h, w, k, s, pad)
        net = compile_network(g, config, batch=2)
        net.set_inputs({"x": x})
        assert _same(net, net.run_golden({"x": x}), ref), (c, h, w, k, s, pad)
        assert _same(net, net.outputs(models.iss(net.program).outputs), ref), (c, h, w, k, s, pad)
        tlm = models.tlm(net.program)
        assert _same(net, net.outputs(tlm.outputs), ref), (c, h, w, k, s, pad)
        runs.append((net, ref, tlm.cycles))
    if config == "default" and not models.rtl_available():  # the RTL too, bit and cycle exact
        for (net, ref, cycles), r in zip(runs, models.rtl([net.program for net, _, _ in runs])):
            assert _same(net, net.outputs(r.outputs), ref) and r.cycles == cycles, net.program.name


def test_max_pool_padding_must_leave_every_window_an_input_pixel() -> None:
    g = Graph("bad_pad")
    x = g.input("x", (8, 6, 6))
    with pytest.raises(CompileError, match="each pad must be below 3"):
        g.max_pool(x, 3, 2, pad=(0, 3, 0, 0))


def test_graph_errors_name_the_layer_and_the_resource() -> None:
    """A hand-made layer of an unknown op, a convolution with a window of padding only, a graph too big for
    DRAM (naming what fills it) or a pooling row too big for a buffer (naming that buffer)."""
    from compiler.graph import Layer

    def unknown_op():
        g = Graph("g")
        x = g.input("x", (3, 2, 2))
        layer = Layer("mysoftmax", "softmax", (x,))
        layer.output = Value(layer, (3, 2, 2), "int8")
        g.layers.append(layer)
        g.output(layer.output)
        compile_network(g)
    assert "layer 'mysoftmax': unknown op 'softmax'" in _err(unknown_op)

    for pad, stride, shape in (((0, 1, 0, 0), 2, (3, 4, 1)),):  # its one output column is in the padding
        def padding_only():  # the graph (and its reference) takes it; the accelerator's engine does not
            g = Graph("g")
            y = g.conv2d(g.input("x", shape), np.ones((4, 3, 1, 1), np.int8), stride=stride, pad=pad, name="padconv")
            g.output(g.requantize(y, 2))
            compile_network(g)
        with pytest.raises(CompileError) as e:
            padding_only()
        assert type(e.value) is CompileError and "layer 'padconv'" in str(e.value) and "all padding" in str(e.value)

    def big_weights():
        g = Graph("big")
        a = g.input("a", (4096,))
        g.output(g.requantize(g.dense(a, np.ones((4096, 4096), np.int8), name="huge_fc"), 8))
        compile_network(g, "small")
    assert "argument 'weights'" in _err(big_weights) and "largest weights: 'huge_fc' 16,777,216 bytes" in \
        _err(big_weights)

    def long_stream():  # small's core with a 64 KiB DRAM: at most 4,096 instructions
        import dataclasses

        from hw.config import load_config
        cfg = dataclasses.replace(load_config("small"), name="small-64k", dram_bytes=1 << 16)
        g = Graph("insns")
        x = g.input("x", (1, 16, 16))
        y = g.requantize(g.conv2d(x, np.ones((256, 1, 1, 1), np.int8), name="expand"), 3)
        g.output(g.requantize(g.conv2d(y, np.ones((1, 256, 1, 1), np.int8), name="squeeze"), 8))
        compile_network(g, cfg, batch=8)
    assert "instructions outgrow" in _err(long_stream) and "(in layer 'expand')" in _err(long_stream)

    def wide_pool():
        g = Graph("gap")
        x = g.input("x", (16, 33, 33))
        g.output(g.avg_pool(x, 33, scale=0.01, name="gap33"))
        compile_network(g)
    assert "needs 1089 micro-ops (the config has 1024)" in _err(wide_pool) and "input vectors" not in _err(wide_pool)


def test_a_config_of_wide_outputs_is_refused_by_name() -> None:
    """Activations between layers are int8 tensors that STOREs write: on a config of 16-bit outputs every
    network compiler refuses in one line naming the network and the key, not an internal tensor."""
    import dataclasses

    from compiler.networks import charlm_decode, digits
    from compiler.networks import digits_transformer_program as dtp
    from hw.config import load_config

    wide_out = dataclasses.replace(load_config("default"), name="out16", out_width=16)
    for compile_it in (lambda: compile_network(digits.graph(), wide_out, batch=2),
                       lambda: dtp.compile_transformer(dtp.model(), wide_out, batch=2),
                       lambda: charlm_decode.compile_decode(wide_out)):
        with pytest.raises(CompileError, match="needs a config with int8 outputs \\(out_width 8\\); config "
                                               "'out16' has out_width 16"):
            compile_it()
