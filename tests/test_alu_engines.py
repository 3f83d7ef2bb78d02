"""The two ALU engines agree: the numpy one (hw/alu_numpy.py, run by golden and the TLM) and the ISS's
plain one (lane by lane, its own table of lane functions), on random loops full of hazards, on big tiles
where the engine takes its cached-fill path, and on the golden path's batched accumulator."""

from __future__ import annotations

import numpy as np
import pytest

from hw.alu_numpy import run_alu, run_alu_loop
from hw.isa import ALU_OP_NAMES, ALU_OPS, Alu
from hw.isa_semantics import INT32_MAX, INT32_MIN, alu_scalar
from sim.iss import execute_alu

SPECIALS = np.array([0, 1, -1, 31, 32, -31, -32, 33, -40, INT32_MAX, INT32_MIN, 12345, -99999], dtype=np.int64)


def _acc(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    acc = rng.integers(INT32_MIN, INT32_MAX + 1, size=shape, dtype=np.int64)
    flat = acc.reshape(-1)
    pick = rng.integers(0, flat.size, flat.size // 4)
    flat[pick] = rng.choice(SPECIALS, size=len(pick))
    return acc.astype(np.int32)


def _plain(acc: np.ndarray, insn: Alu) -> np.ndarray:
    a = acc.astype(np.int64)
    execute_alu(a, insn)
    return a.astype(np.int32)


def _filled_cache():
    cache: dict = {}

    def filled(shape, value):
        return cache.setdefault((shape, value), np.full(shape, value, dtype=np.int32))
    return filled


def test_scalar_semantics_edges():
    """docs/microarch.md 'Data semantics' at the 32-bit edges."""
    f = lambda op, x, s: alu_scalar(ALU_OPS[op], x, s)  # noqa: E731
    assert f("ADD", INT32_MAX, 1) == INT32_MIN and f("SUB", INT32_MIN, 1) == INT32_MAX
    assert f("MUL", INT32_MIN, -1) == INT32_MIN and f("MUL", 0x10000, 0x10000) == 0
    assert (f("SHR", -1, 99), f("SHR", 1, -31), f("SHR", 1, -32), f("SHR", 5, INT32_MIN)) == (-1, INT32_MIN, 0, 0)
    assert (f("CLIP", 5, INT32_MIN), f("CLIP", -1000, 127), f("MOV", 3, -7)) == (INT32_MIN, -127, -7)
    # MULHR rounds half up (ties toward +inf) and wraps its one overflowing product
    assert (f("MULHR", 3, 1 << 30), f("MULHR", -3, 1 << 30), f("MULHR", 1, 1 << 30), f("MULHR", -1, 1 << 30)) \
        == (2, -1, 1, 0)
    assert (f("MULHR", INT32_MIN, INT32_MIN), f("MULHR", INT32_MAX, INT32_MAX), f("MULHR", 1000, -2**31)) \
        == (INT32_MIN, INT32_MAX - 1, -1000)
    # CLZ counts the operand's leading zeros (32 for 0, 0 when negative) and ignores the destination
    assert [f("CLZ", 77, v) for v in (0, 1, -1, INT32_MIN, INT32_MAX, 1 << 30, 255, 256)] == \
        [32, 31, 0, 0, 1, 1, 24, 23]
    assert all(f("CLZ", 0, (1 << k) + ((1 << k) - 1) // 3) == 31 - k for k in range(31))
    with pytest.raises(ValueError):
        alu_scalar(len(ALU_OPS), 0, 0)


def test_numpy_engine_equals_plain_engine_on_random_loops():
    rng = np.random.default_rng(13)
    depth, lanes = 48, 3
    for _ in range(600):
        acc = _acc(rng, (depth, lanes))
        io, ii = int(rng.integers(0, 5)), int(rng.integers(0, 6))
        f = lambda: int(rng.integers(0, 4))  # noqa: E731 - small factors make overlaps (hazards) likely
        i = Alu(alu_op=int(rng.integers(0, len(ALU_OPS))), use_imm=bool(rng.integers(0, 2)), iter_out=io, iter_in=ii,
                dst_base=int(rng.integers(0, 16)), src_base=int(rng.integers(0, 16)), dst_factor_out=f(),
                dst_factor_in=f(), src_factor_out=f(), src_factor_in=f(),
                imm=int(rng.choice([int(rng.integers(-2**15, 2**15)), -32768, 32767, -1, 0, 31, -33])))
        got = acc.copy()
        run_alu(got, i)
        assert np.array_equal(got, _plain(acc, i)), i


def test_loops_in_chunks_equal_the_plain_engine(monkeypatch):
    """A loop whose indices are held a few outer iterations at a time (chunks of 8 iterations here instead
    of 2**20) gives what the plain engine does, hazards across the chunks included."""
    import hw.alu_numpy as engine

    monkeypatch.setattr(engine, "_CHUNK", 8)
    rng = np.random.default_rng(14)
    for _ in range(300):
        acc = _acc(rng, (48, 3))
        f = lambda: int(rng.integers(0, 4))  # noqa: E731
        i = Alu(alu_op=int(rng.integers(0, len(ALU_OPS))), use_imm=bool(rng.integers(0, 2)),
                iter_out=int(rng.integers(1, 7)), iter_in=int(rng.integers(1, 6)), dst_base=int(rng.integers(0, 16)),
                src_base=int(rng.integers(0, 16)), dst_factor_out=f(), dst_factor_in=f(), src_factor_out=f(),
                src_factor_in=f(), imm=int(rng.choice([-32768, -33, -1, 0, 31, 32767])))
        got = acc.copy()
        run_alu(got, i)
        assert np.array_equal(got, _plain(acc, i)), i


@pytest.mark.parametrize("op", list(ALU_OPS))
def test_one_iteration_repeated_equals_the_plain_engine(op):
    """Every iteration on the same vectors (all factors 0): a fixed point, ADD/SUB in closed form, or one
    application after another, as the plain engine (source the destination itself, or another vector
    holding the 32-bit edges; or an immediate)."""
    rng = np.random.default_rng(ALU_OPS[op] + 100)
    for use_imm, src in ((False, 5), (False, 2), (True, 0)):
        for imm in (-32768, -1, 3, 31, 32767) if use_imm else (0,):
            for io, ii in ((1, 1), (2, 3), (7, 19), (1, 300)):
                acc = _acc(rng, (8, len(SPECIALS)))
                acc[5] = SPECIALS.astype(np.int32)
                i = Alu(alu_op=ALU_OPS[op], use_imm=use_imm, imm=imm, iter_out=io, iter_in=ii, dst_base=2,
                        src_base=src)
                got = acc.copy()
                run_alu(got, i)
                assert np.array_equal(got, _plain(acc, i)), i


def test_a_long_repeated_add_wraps_as_the_hardware_does():
    """16383 x 16383 iterations of ADD of one vector into another (the largest loop of the ISA): the sum
    wrapped to 32 bits, computed at once (the plain engine would take hours)."""
    acc = np.zeros((8, len(SPECIALS)), np.int32)
    acc[5] = SPECIALS.astype(np.int32)
    acc[2] = np.arange(len(SPECIALS), dtype=np.int32) - 3
    n = 16383 * 16383
    want = [((int(x) + n * int(y) + 2**31) % 2**32) - 2**31 for x, y in zip(acc[2], acc[5])]
    run_alu(acc, Alu(alu_op=ALU_OPS["ADD"], iter_out=16383, iter_in=16383, dst_base=2, src_base=5))
    assert acc[2].tolist() == want


@pytest.mark.parametrize("op", list(ALU_OPS))
def test_big_tiles_with_the_filled_cache(op):
    """Immediates on tiles past the engine's cached-fill threshold (the golden path's fast MIN/MAX/CLIP)."""
    rng = np.random.default_rng(ALU_OPS[op])
    depth, lanes = 600, 16
    acc = _acc(rng, (depth, lanes))
    for imm in (-32768, -5, 0, 7, 32767):
        i = Alu(alu_op=ALU_OPS[op], use_imm=True, imm=imm, iter_out=1, iter_in=512, dst_base=40, dst_factor_in=1)
        got = acc.copy()
        run_alu_loop(got, op, 40, 0, 1, 512, 0, 1, 0, 0, imm, _filled_cache())
        assert np.array_equal(got, _plain(acc, i)), (op, imm)


def test_batched_accumulator_is_each_copy():
    """Golden runs B accelerators in lockstep on a (depth, batch, lanes) buffer: each copy is the plain run."""
    rng = np.random.default_rng(5)
    depth, batch, lanes = 32, 3, 4
    for _ in range(150):
        acc = _acc(rng, (depth, batch, lanes))
        io, ii = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        fo, fi, so, si = (int(rng.integers(0, 3)) for _ in range(4))
        op = int(rng.integers(0, 8))
        imm = int(rng.integers(-40, 40)) if rng.random() < 0.4 else None
        db, sb = int(rng.integers(0, 12)), int(rng.integers(0, 12))
        got = acc.copy()
        run_alu_loop(got, ALU_OP_NAMES[op], db, sb, io, ii, fo, fi, so, si, imm, _filled_cache())
        i = Alu(alu_op=op, use_imm=imm is not None, imm=imm or 0, iter_out=io, iter_in=ii, dst_base=db,
                src_base=sb, dst_factor_out=fo, dst_factor_in=fi, src_factor_out=so, src_factor_in=si)
        for k in range(batch):
            assert np.array_equal(got[:, k], _plain(acc[:, k], i)), (i, k)
