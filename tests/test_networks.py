"""The shipped networks and the graph reference.

* ``compiler.graph_reference.run_reference`` against an independent per-layer check in plain
  Python integers (scalar loops, written from ``compiler.graph``'s docstring) on small random
  graphs of every layer kind;
* the digits model: re-running its training script reproduces the committed ``digits.npz``;
  its int8 graph stays within 2 points of the float model on the test split; its data set;
* bad weights files and bad inputs: one clear error line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.graph import Graph
from compiler.graph_reference import run_reference
from compiler.networks import NETWORKS, Network, digits

ROOT = Path(__file__).resolve().parents[1]


# ---- an independent per-layer check, in Python integers ------------------------------------------
def _wrap32(v: int) -> int:
    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31


def _clip8(v: int) -> int:
    return max(-128, min(127, v))


def _expected(layer, ins: list[np.ndarray]) -> np.ndarray:
    """What ``layer`` must produce from its operand values ``ins`` (batch first), element by element."""
    out = np.zeros((ins[0].shape[0],) + layer.output.shape, dtype=np.int64)
    p = layer.params
    if layer.op == "conv2d":
        x, w, b = ins[0], p["weight"], p["bias"]
        _, c, h, wd = x.shape
        k, s, pad = w.shape[2], p["stride"], p["pad"]
        for n, o, y, xx in np.ndindex(*out.shape):
            acc = 0 if b is None else int(b[o])
            for ci, ky, kx in np.ndindex(c, k, k):
                iy, ix = y * s + ky - pad, xx * s + kx - pad
                if 0 <= iy < h and 0 <= ix < wd:
                    acc += int(x[n, ci, iy, ix]) * int(w[o, ci, ky, kx])
            out[n, o, y, xx] = _wrap32(acc)
    elif layer.op == "dense":
        x, w, b = ins[0], p["weight"], p["bias"]
        for n, o in np.ndindex(*out.shape):
            acc = (0 if b is None else int(b[o])) + sum(int(x[n, f]) * int(w[o, f]) for f in range(w.shape[1]))
            out[n, o] = _wrap32(acc)
    elif layer.op == "requantize":
        shift = p["shift"]
        for i in np.ndindex(*out.shape):
            v = int(ins[0][i])
            if shift:
                v = _wrap32(v + 2 ** (shift - 1)) >> shift  # Python's >> is an arithmetic (floor) shift
            out[i] = _clip8(v)
    elif layer.op == "relu":
        for i in np.ndindex(*out.shape):
            out[i] = max(int(ins[0][i]), 0)
    elif layer.op == "add":
        for i in np.ndindex(*out.shape):
            out[i] = int(ins[0][i]) + int(ins[1][i])
    elif layer.op in ("max_pool", "avg_pool"):
        k, s = p["kernel"], p["stride"]
        for n, c, y, xx in np.ndindex(*out.shape):
            window = [int(ins[0][n, c, y * s + ky, xx * s + kx]) for ky in range(k) for kx in range(k)]
            # round half up, as a floor division (the reference divides by shifting)
            out[n, c, y, xx] = max(window) if layer.op == "max_pool" else (sum(window) + k * k // 2) // (k * k)
    elif layer.op == "flatten":
        x = ins[0]
        _, c, h, wd = x.shape
        for n, ci, y, xx in np.ndindex(*x.shape):
            out[n, (ci * h + y) * wd + xx] = x[n, ci, y, xx]
    else:
        raise AssertionError(layer.op)
    return out


def _check_graph(g: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every layer's reference value equals the independent check from its operands' reference values."""
    values = run_reference(g, inputs, all_values=True)
    assert set(values) == {layer.name for layer in g.layers}
    for layer in g.layers:
        got = values[layer.name]
        assert got.dtype == np.dtype(layer.output.dtype), layer
        if layer.op == "input":
            np.testing.assert_array_equal(got, inputs[layer.name])
            continue
        want = _expected(layer, [values[v.name] for v in layer.inputs])
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"layer {layer.name} ({layer.op})")
    outs = run_reference(g, inputs)
    assert list(outs) == [v.name for v in g.outputs]
    for name, a in outs.items():
        np.testing.assert_array_equal(a, values[name])
    return values


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)


def _b(rng: np.random.Generator, n: int, scale: int = 5000) -> np.ndarray:
    return rng.integers(-scale, scale, size=n, dtype=np.int64).astype(np.int32)


def _graph_conv_stride_pad(rng):
    """conv 3x3 stride 2 pad 1 (3 -> 5 channels, odd sizes), max-pool 2 stride 1, dense without bias."""
    g = Graph("conv_s2")
    x = g.input("x", (3, 9, 9))
    y = g.conv2d(x, _w(rng, 5, 3, 3, 3), _b(rng, 5), stride=2, pad=1)
    y = g.max_pool(g.relu(g.requantize(y, 9)), 2, stride=1)
    y = g.dense(g.flatten(y), _w(rng, 7, 5 * 4 * 4), None)
    g.output(g.requantize(y, 11))
    return g


def _graph_residual(rng):
    """17 channels (not a multiple of 16), conv 3x3 pad 1, residual add, ReLU on int32, avg-pool 2."""
    g = Graph("residual")
    x = g.input("x", (17, 6, 6))
    y = g.relu(g.requantize(g.conv2d(x, _w(rng, 17, 17, 3, 3), _b(rng, 17), pad=1), 10))
    s = g.requantize(g.relu(g.add(y, x)), 1)
    p = g.avg_pool(s, 2)
    g.output(g.requantize(g.dense(g.flatten(p), _w(rng, 10, 17 * 3 * 3), _b(rng, 10)), 10))
    g.output(p)
    return g


def _graph_mlp(rng):
    """dense -> requantize by 0 (clip only) -> ReLU -> dense."""
    g = Graph("mlp")
    x = g.input("x", (20,))
    y = g.relu(g.requantize(g.dense(x, _w(rng, 33, 20), _b(rng, 33, 200)), 0))
    y = g.requantize(g.dense(y, _w(rng, 12, 33), _b(rng, 12)), 8)
    g.output(y)
    return g


def _graph_conv1x1_pools(rng):
    """conv 1x1 stride 2, 2 -> 20 channels; max-pool 3 stride 2; avg-pool 4 (area 16); requantize of int8."""
    g = Graph("pools")
    x = g.input("x", (2, 10, 10))
    y = g.relu(g.requantize(g.conv2d(x, _w(rng, 20, 2, 1, 1), None, stride=2), 5))  # (20, 5, 5)
    m = g.max_pool(y, 3, stride=2)                                                     # (20, 2, 2)
    a = g.avg_pool(g.requantize(x, 1), 4, stride=3)                                    # (2, 3, 3)
    g.output(g.requantize(m, 2))
    g.output(a)
    return g


def _graph_two_inputs(rng):
    """Two inputs added, the int32 sum requantized by 1."""
    g = Graph("two_inputs")
    a = g.input("a", (4, 3, 5))
    b = g.input("b", (4, 3, 5))
    g.output(g.requantize(g.add(a, b), 1))
    return g


def _graph_wrap(rng):
    """Biases near the int32 limits: the accumulators and the requantize rounding sum wrap at 32 bits."""
    g = Graph("wrap")
    x = g.input("x", (3, 4, 4))
    big = np.array([2 ** 31 - 20, -2 ** 31 + 20, 2 ** 31 - 1], dtype=np.int32)
    y = g.conv2d(x, _w(rng, 3, 3, 2, 2), big, pad=0)
    g.output(g.requantize(y, 31))
    g.output(g.requantize(y, 1))
    d = g.dense(g.flatten(x), _w(rng, 3, 48), big)
    g.output(g.requantize(d, 20))
    return g


# (graph builder, fewest distinct values each output must hold: the shifts are chosen so that outputs are
# spread, not all clipped or zero, so the check has teeth; in "wrap", a shift of 31 leaves -1 alone: the
# rounding term wraps every accumulator near the limits negative)
GRAPHS = [(_graph_conv_stride_pad, 4), (_graph_residual, 4), (_graph_mlp, 4), (_graph_conv1x1_pools, 4),
          (_graph_two_inputs, 4), (_graph_wrap, 1)]


@pytest.mark.parametrize("build, distinct", GRAPHS, ids=[b.__name__.removeprefix("_graph_") for b, _ in GRAPHS])
@pytest.mark.parametrize("seed", [0, 1])
def test_reference_matches_independent_check(build, distinct, seed):
    rng = np.random.default_rng(seed)
    g = build(rng)
    batch = 2
    inputs = {v.name: _w(rng, batch, *v.shape) for v in g.inputs}
    values = _check_graph(g, inputs)
    for v in g.outputs:
        assert len(np.unique(values[v.name])) >= distinct, v
    if build is _graph_wrap:  # most accumulators wrapped: the bias alone sits within 20 of the limit
        acc = values[g.layers[1].name].astype(np.int64)
        assert np.mean(np.sign(acc) != np.sign(g.layers[1].params["bias"].astype(np.int64)).reshape(1, 3, 1, 1)) > 0.2


def test_reference_wraps_at_32_bits():
    g = Graph("wrap_known")
    x = g.input("x", (2,))
    d = g.dense(x, np.array([[1, 0]], dtype=np.int8), np.array([2 ** 31 - 1], dtype=np.int32))
    g.output(g.requantize(d, 0))
    g.output(g.requantize(d, 4))
    out = run_reference(g, {"x": np.array([[1, 0], [0, 0]], dtype=np.int8)}, all_values=True)
    assert out[d.name].tolist() == [[-2 ** 31], [2 ** 31 - 1]]  # 2**31 - 1 + 1 wraps
    assert out[g.outputs[0].name].tolist() == [[-128], [127]]
    # (2**31 - 1) + 8 wraps negative before the shift
    assert out[g.outputs[1].name].tolist() == [[-128], [-128]]


def _small_graph() -> Graph:
    g = Graph("small")
    x = g.input("x", (2, 4, 4))
    g.output(g.max_pool(x, 2))
    return g


@pytest.mark.parametrize("inputs, words", [
    ({}, ["'x'", "no array"]),
    ({"x": np.zeros((1, 2, 4, 4), np.int8), "y": np.zeros(1, np.int8)}, ["'y'", "not an input"]),
    ({"x": np.zeros((1, 2, 4, 4), np.int32)}, ["'x'", "int8", "int32"]),
    ({"x": np.zeros((2, 4, 4), np.int8)}, ["'x'", "(2, 4, 4)", "(N, 2, 4, 4)"]),
    ({"x": np.zeros((0, 2, 4, 4), np.int8)}, ["'x'", "N >= 1"]),
    ({"x": [[1]]}, ["'x'", "int8", "list"]),
])
def test_reference_bad_inputs(inputs, words):
    with pytest.raises(CompileError) as e:
        run_reference(_small_graph(), inputs)
    msg = str(e.value)
    assert "\n" not in msg and "graph 'small'" in msg
    for w in words:
        assert w in msg


def test_reference_batch_mismatch_and_incomplete_graph():
    g = Graph("two")
    a, b = g.input("a", (3,)), g.input("b", (3,))
    with pytest.raises(CompileError, match="has no output"):
        run_reference(g, {"a": np.zeros((1, 3), np.int8), "b": np.zeros((1, 3), np.int8)})
    g.output(g.requantize(g.add(a, b), 0))
    with pytest.raises(CompileError, match="'b'.*2 samples, another input has 1"):
        run_reference(g, {"a": np.zeros((1, 3), np.int8), "b": np.zeros((2, 3), np.int8)})


# ---- the digits network --------------------------------------------------------------------------
def test_registry():
    net = NETWORKS["digits"]
    assert isinstance(net, Network) and net.name == "digits" and net.description
    g = net.graph()
    assert g is net.graph()  # cached
    assert [v.name for v in g.inputs] == [net.input_name] and [v.name for v in g.outputs] == [net.output_name]


def test_digits_graph():
    g = NETWORKS["digits"].graph()
    assert [layer.op for layer in g.layers] == [
        "input", "conv2d", "requantize", "relu", "max_pool", "flatten",
        "dense", "requantize", "relu", "dense", "requantize"]
    assert g.inputs[0].shape == (1, 8, 8) and g.outputs[0].shape == (10,) and g.outputs[0].dtype == "int8"
    for layer in g.layers:
        if layer.op in ("conv2d", "dense"):
            assert layer.params["weight"].dtype == np.int8 and layer.params["bias"].dtype == np.int32
            # power-of-two weight scales use the int8 range: the largest magnitude is at least 64
            assert np.abs(layer.params["weight"].astype(np.int64)).max() >= 64, layer
        if layer.op == "requantize":
            assert 0 <= layer.params["shift"] <= 31
    assert g.layers[1].params["pad"] == 1 and g.layers[1].output.shape == (8, 8, 8)


def test_digits_dataset():
    images, labels = digits.dataset("test")
    train_images, train_labels = digits.dataset("train")
    assert images.dtype == np.int8 and images.shape[1:] == (1, 8, 8) and labels.dtype == np.int64
    assert len(images) + len(train_images) == 1797 and len(images) == len(labels)
    assert images.min() == 0 and images.max() == 7 * 16  # pixels 0..16 -> 0..112, no overflow
    assert not images.flags.writeable and not labels.flags.writeable
    counts, train_counts = np.bincount(labels, minlength=10), np.bincount(train_labels, minlength=10)
    assert np.all(np.abs(counts - 0.2 * (counts + train_counts)) <= 0.5)  # stratified 20 %
    from sklearn.datasets import load_digits

    data = load_digits()
    train_idx, test_idx = digits.split_indices(data.target)
    assert not set(train_idx) & set(test_idx) and len(set(train_idx) | set(test_idx)) == 1797
    np.testing.assert_array_equal(images.reshape(len(images), -1), data.data[test_idx] * 7)
    np.testing.assert_array_equal(labels, data.target[test_idx])
    with pytest.raises(ValueError, match="split 'val' must be 'train' or 'test'"):
        digits.dataset("val")


def test_digits_int8_accuracy_close_to_float():
    net = NETWORKS["digits"]
    images, labels = net.dataset("test")
    logits = run_reference(net.graph(), {net.input_name: images})[net.output_name]
    int8_acc = float(np.mean(np.argmax(logits, axis=1) == labels))
    float_acc = float(np.mean(net.float_predict(images) == labels))
    assert float_acc >= 0.95
    assert abs(int8_acc - float_acc) <= 0.02
    meta = json.loads(str(digits.load_weights()["meta"]))
    assert meta["int8_accuracy_test"] == int8_acc and meta["float_accuracy_test"] == float_acc


def test_float_predict_bad_images():
    with pytest.raises(ValueError, match=r"images must be int8 \(N, 1, 8, 8\), got float64"):
        digits.float_predict(np.zeros((2, 1, 8, 8)))
    with pytest.raises(ValueError, match=r"got int8 \(2, 64\)"):
        digits.float_predict(np.zeros((2, 64), np.int8))


def test_training_reproduces_committed_weights(tmp_path):
    out = tmp_path / "digits.npz"
    r = subprocess.run([sys.executable, "-m", "compiler.networks.train_digits", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout
    with np.load(digits.WEIGHTS_PATH) as committed, np.load(out) as fresh:
        assert sorted(committed.files) == sorted(fresh.files) == sorted(digits.weight_spec())
        for key in committed.files:
            assert committed[key].dtype == fresh[key].dtype, key
            np.testing.assert_array_equal(committed[key], fresh[key], err_msg=key)


def test_training_bad_arguments(tmp_path):
    from compiler.networks import train_digits

    for argv, words in ([["--out", str(tmp_path / "no" / "x.npz")], "does not exist"],
                        [["--out", str(tmp_path)], "is a folder"], [["--epochs", "0"], "at least 1"]):
        r = subprocess.run([sys.executable, "-m", "compiler.networks.train_digits", *argv], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stdout == "", argv
        assert len(r.stderr.splitlines()) == 1 and words in r.stderr, r.stderr
    assert train_digits.EPOCHS >= 1


# ---- bad weights files ---------------------------------------------------------------------------
def _write(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _good() -> dict[str, np.ndarray]:
    return dict(digits.load_weights())


@pytest.mark.parametrize("make, words", [
    (lambda p: p / "absent.npz", ["no such file", "train_digits"]),
    (lambda p: (p / "junk.npz").write_bytes(b"not a zip file") and p / "junk.npz", ["not a readable .npz"]),
    (lambda p: _write(p / "m.npz", {k: v for k, v in _good().items() if k != "fc1.bias"}),
     ["'fc1.bias'", "missing"]),
    (lambda p: _write(p / "d.npz", dict(_good(), **{"conv1.weight": _good()["conv1.weight_float"]})),
     ["'conv1.weight'", "float64", "expected int8"]),
    (lambda p: _write(p / "s.npz", dict(_good(), **{"fc2.bias": np.zeros(9, np.int32)})),
     ["'fc2.bias'", "(9,)", "(10,)"]),
    (lambda p: _write(p / "h.npz", dict(_good(), **{"fc1.shift": np.array(40)})), ["'fc1.shift'", "0..31"]),
    (lambda p: _write(p / "o.npz", dict(_good(), meta=np.array([{"a": 1}], dtype=object))),
     ["not a readable .npz"]),
    (lambda p: _write(p / "n.npz", dict(_good(), **{"fc2.weight_float": np.full((10, 32), np.nan)})),
     ["'fc2.weight_float'", "non-finite"]),
    (lambda p: _write(p / "x.npz", dict(_good(), extra=np.zeros(1))), ["unexpected array 'extra'"]),
])
def test_bad_weights_file(tmp_path, make, words):
    path = make(tmp_path)
    with pytest.raises(CompileError) as e:
        digits.load_weights(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"network 'digits': weights file {path}: ")
    for w in words:
        assert w in msg, msg
