"""The intrinsic registry: one name, two halves, no second registration, context selects the half."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import S, build
from compiler.errors import CompileError, IntrinsicError
from compiler.intrinsic_registry import HALVES, REGISTRY, implements, intrinsic
from hw.alu_numpy import ALU_NUMPY

EXPECTED = {"load", "store", "sync"} | {op.lower() for op in ALU_NUMPY}


def test_every_intrinsic_has_both_halves_in_one_module():
    assert EXPECTED <= set(REGISTRY)
    for name in EXPECTED:
        intr = REGISTRY[name]
        assert set(intr.halves) == set(HALVES), name
        mods = {h.__module__ for h in intr.halves.values()} | {intr.interface.__module__}
        assert mods == {"compiler.intrinsics"}, (name, mods)


def test_second_registration_is_refused():
    with pytest.raises(IntrinsicError, match="already declared"):
        intrinsic("load")(lambda ctx: None)
    for half in HALVES:
        with pytest.raises(IntrinsicError, match="already has"):
            implements("add", half)(lambda ctx, op: None)
    with pytest.raises(IntrinsicError, match="not declared"):
        implements("no_such_intrinsic", "python")(lambda ctx, op: None)
    with pytest.raises(IntrinsicError, match="unknown half"):
        implements("add", "verilog")


def test_new_intrinsic_needs_one_place_per_half():
    calls = []
    name = "test_probe"
    if name not in REGISTRY:
        intrinsic(name)(lambda ctx, x: x)
        implements(name, "python")(lambda ctx, op: calls.append(("python", op)))
        implements(name, "lower")(lambda ctx, op: calls.append(("lower", op)))
    probe = REGISTRY[name]

    @S.kernel
    def k(A, C):
        probe(7)
        S.load(S.acc[0:1], A)
        S.store(C, S.acc[0:1])

    k(np.zeros(16, np.int32), np.zeros(16, np.int8))
    build(k, [S.tensor(16), S.tensor(16, "int8")], "default")
    assert calls == [("python", 7), ("lower", 7)]


def test_intrinsic_outside_a_kernel_is_an_error():
    with pytest.raises(CompileError, match="outside a kernel"):
        S.add(S.acc[0:1], 1)


@pytest.mark.parametrize("call, words", [
    (lambda: S.clz(S.acc[0:1]), ["S.clz", "missing a required argument: 'src'", "S.clz(dst, src, iters=None"]),
    (lambda: S.load(S.acc[0:1], None, bogus=3), ["S.load", "unexpected keyword argument 'bogus'", "S.load(dst, src,"]),
    (lambda: S.add(S.acc[0:1], 1, None, None, None, 7), ["S.add", "too many positional arguments"]),
    (lambda: S.sync(1), ["S.sync", "too many positional arguments", "(S.sync())"]),
])
def test_a_call_that_does_not_fit_names_the_signature(call, words):
    """A wrong call is named against the intrinsic's own parameters (not the registry's context argument
    or the interface's Python name), on golden and compiled alike."""
    @S.kernel
    def k(A, C):
        call()

    for run in (lambda: k(np.zeros(16, np.int32), np.zeros(16, np.int8)),
                lambda: build(k, [S.tensor(16), S.tensor(16, "int8")], "default")):
        with pytest.raises(CompileError) as e:
            run()
        text = str(e.value)
        assert "interface" not in text and "ctx" not in text, text
        for w in words:
            assert w in text, (w, text)
