"""Property tests: for every operator, random shapes (1-D to 4-D, including non-multiples of the lane
count and tensors larger than the small config's accumulator), random values and parameters, the
golden path equals the plain numpy reference; and random compiled operators replay to the golden."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import S, build
from compiler.ops import OPERATORS, tile_fit
from compiler.tensor import pad_to_vectors
from hw.config import load_config
from tests.test_compiler_build import execute

SMALL = load_config("small")
DEFAULT = load_config("default")
I32 = (-(1 << 31), (1 << 31) - 1)
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple) | \
    st.sampled_from([(1,), (7,), (8,), (9,), (600,), (3, 257)])  # 600 elements > 64 vectors x 8 lanes


def params_for(name: str) -> st.SearchStrategy:
    if name.endswith("_imm"):
        op = name[:-4]
        imm = st.integers(-40, 40) if op == "shr" else st.integers(-(1 << 20), 1 << 20) | st.integers(-300, 300)
        return st.fixed_dictionaries({"imm": imm})
    if name == "clip":
        return st.tuples(st.integers(-(1 << 17), 200), st.integers(0, 1 << 17)).map(
            lambda t: {"lo": min(t), "hi": max(t)}) | st.integers(0, 300).map(lambda h: {"lo": -h, "hi": h})
    if name in ("shr_round", "fused"):
        return st.fixed_dictionaries({"shift": st.integers(0, 31)})
    return st.just({})


def values(name: str, inp: str) -> tuple[int, int]:
    if name == "shift" and inp == "B":
        return (-40, 40)
    return I32


def run_golden(name: str, cfg, shape, params, data, tile=None):
    op = OPERATORS[name]
    ins = {n: data.draw(st.sampled_from([I32, (-300, 300)])) if values(name, n) == I32 else values(name, n)
           for n in op.inputs}
    rng = np.random.default_rng(data.draw(st.integers(0, 1 << 30)))
    arrays = {n: rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(np.int32)
              for n, (lo, hi) in ins.items()}
    out = np.zeros(shape, np.int8)
    op.kernel(**arrays, **{op.output: out}, **op.fixed, **params, tile=tile, config=cfg)
    ref = op.reference(**arrays, **params).astype(np.int8)
    return arrays, out, ref


@pytest.mark.parametrize("name", sorted(OPERATORS))
@SETTINGS
@given(data=st.data(), shape=shapes)
def test_operator_golden_equals_reference(name, data, shape):
    params = data.draw(params_for(name))
    cfg = data.draw(st.sampled_from([SMALL, DEFAULT]))
    _, out, ref = run_golden(name, cfg, shape, params, data)
    assert np.array_equal(out, ref), (name, shape, params)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(OPERATORS)), shape=shapes)
def test_compiled_operator_replays_to_golden(data, name, shape):
    """Random operator, shape and tile size on the small config: build verifies the stream, and its
    in-order replay gives the golden outputs (padding lanes included)."""
    op = OPERATORS[name]
    params = data.draw(params_for(name))
    n_in = len(op.inputs)
    consts = 2 if name == "clip" else 1
    tile = data.draw(st.none() | st.integers(1, tile_fit(SMALL, n_in, consts)))
    arrays, out, ref = run_golden(name, SMALL, shape, params, data, tile)
    assert np.array_equal(out, ref)
    specs = {**{n: S.tensor(shape) for n in op.inputs}, op.output: S.tensor(shape, "int8")}
    prog = build(op.kernel, {**specs, **op.fixed, **params, "tile": tile}, SMALL)
    for n, a in arrays.items():
        prog.set_input(n, pad_to_vectors(a, SMALL.lanes, np.int32).reshape(prog.region(n).shape))
    got = execute(prog)[op.output].reshape(-1)[:out.size].reshape(shape)
    assert np.array_equal(got, out)
