"""Golden path semantics: 32-bit wrap, SHR/CLIP/MOV edge cases, C-like narrowing, sequential ALU loops,
2-D strided/padded LOAD and STORE, and range errors naming the intrinsic and the source line."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler import S
from compiler.context import GoldenContext, active
from compiler.errors import BufferRangeError, CompileError
from compiler.tensor import Tensor
from hw.config import load_config

CFG = load_config("small")  # 8 lanes, 64 accumulator vectors
L = CFG.lanes
I32 = np.iinfo(np.int32)


def run_acc(body, init: np.ndarray) -> np.ndarray:
    """Load ``init`` (vectors x lanes) into acc[0:n], run ``body()`` on the golden path, return acc[0:n]."""
    n = init.shape[0]
    ctx = GoldenContext(CFG, "t")
    a = Tensor("A", init.shape, "int32", L, init.astype(np.int32).copy())
    with active(ctx):
        S.load(S.acc[0:n], a)
        body()
    return ctx.acc[:n].copy()


def vec(*vals: int) -> np.ndarray:
    return np.array([list(vals) + [0] * (L - len(vals))], dtype=np.int64).astype(np.int32)


def test_add_sub_mul_wrap_at_32_bits():
    x = vec(I32.max, I32.min, 3, -7)
    assert list(run_acc(lambda: S.add(S.acc[0:1], 1), x)[0, :4]) == [I32.min, I32.min + 1, 4, -6]
    assert list(run_acc(lambda: S.sub(S.acc[0:1], 1), x)[0, :4]) == [I32.max - 1, I32.max, 2, -8]
    r = run_acc(lambda: S.mul(S.acc[0:1], S.acc[0:1]), vec(65536, -65536, 46341, 3))[0, :4]
    assert list(r) == [0, 0, np.int32(np.int64(46341 * 46341) - (1 << 32)), 9]


def test_shr_semantics():
    x = vec(-17, 17, -1, 1 << 30, 5, 5, 5, I32.min)
    s = vec(2, 2, 40, -1, -31, -32, -100, 31)
    got = run_acc(lambda: S.shr(S.acc[0:1], S.acc[1:2]), np.concatenate([x, s]))[0]
    assert list(got) == [-5, 4, -1, I32.min, I32.min, 0, 0, -1]
    assert list(run_acc(lambda: S.shr(S.acc[0:1], -33), x)[0]) == [0] * L
    assert list(run_acc(lambda: S.shr(S.acc[0:1], 99), x)[0]) == [-1, 0, -1, 0, 0, 0, 0, -1]


def test_clip_and_mov():
    x = vec(-300, 300, 5, I32.min, I32.max, 0, 0, 0)
    assert list(run_acc(lambda: S.clip(S.acc[0:1], 100), x)[0, :5]) == [-100, 100, 5, -100, 100]
    # CLIP with a negative bound: min(max(x, 5), -5) = -5; with INT_MIN: -INT_MIN wraps to INT_MIN
    assert set(run_acc(lambda: S.clip(S.acc[0:1], -5), x)[0]) == {-5}
    s = vec(*([I32.min] * L))
    assert set(run_acc(lambda: S.clip(S.acc[0:1], S.acc[1:2]), np.concatenate([x, s]))[0]) == {I32.min}
    assert set(run_acc(lambda: S.mov(S.acc[0:1], -32768), x)[0]) == {-32768}


def test_sequential_semantics_of_self_feeding_loops():
    init = np.arange(6 * L, dtype=np.int32).reshape(6, L)
    # acc[k+1] += acc[k] for k = 0..4, in order: a running prefix sum
    got = run_acc(lambda: S.add(S.acc[1:6], S.acc[0:5]), init)
    assert np.array_equal(got, np.cumsum(init, axis=0, dtype=np.int32))
    # a reduction into one vector (dst factor 0): acc[0] += acc[1..5]
    got = run_acc(lambda: S.add(S.acc(0), S.acc(1), iters=(1, 5), dst_factors=(0, 0), src_factors=(0, 1)), init)
    assert np.array_equal(got[0], init.sum(axis=0, dtype=np.int32))
    # broadcast operand overwritten mid-loop: acc[0..5] += acc[2], acc[2] doubles at iteration 2
    ref = init.copy()
    for k in range(6):
        ref[k] = ref[k] + ref[2]
    assert np.array_equal(run_acc(lambda: S.add(S.acc[0:6], S.acc[2:3]), init), ref)
    # two-level affine: a 2x3 block transposed sum, vectorised path
    ref = init.copy()
    for i in range(2):
        for j in range(3):
            ref[i * 3 + j] += init[j * 2 + i]
    got = run_acc(lambda: S.add(S.acc[0:6], S.acc[0:6], iters=(2, 3), dst_factors=(3, 1), src_factors=(1, 2)), init)
    seq = init.copy()
    for i in range(2):
        for j in range(3):
            seq[i * 3 + j] = seq[i * 3 + j] + seq[i + 2 * j]
    assert np.array_equal(got, seq)


def test_store_narrows_like_c_and_load_pads_and_strides():
    @S.kernel
    def k(A, C):
        # a 2x3 tile out of rows of 5 vectors, padded by one vector all round: 4x5 on chip
        S.load(S.acc[0:20], A, offset=1, rows=2, cols=3, stride=5, pad=(1, 1, 1, 1))
        S.add(S.acc[0:20], 200)
        S.store(C, S.acc[0:20], offset=0, rows=4, cols=5, stride=5)

    A = np.arange(10 * L, dtype=np.int32) * 37
    C = np.zeros(20 * L, np.int8)
    k(A, C, config=CFG)
    av = A.reshape(10, L)
    tile = np.zeros((4, 5, L), np.int64)
    tile[1:3, 1:4] = np.stack([av[1:4], av[6:9]])
    assert np.array_equal(C.reshape(4, 5, L), (tile + 200).astype(np.int32).astype(np.int8))


def test_tail_outputs_written_back_into_user_array():
    @S.kernel
    def k(A, C):
        S.load(S.acc[0:2], A)
        S.store(C, S.acc[0:2])
    A = np.arange(13, dtype=np.int32) + 120
    C = np.zeros(13, np.int8)
    k(A, C, config=CFG)
    assert np.array_equal(C, A.astype(np.int8))


def test_buffer_range_error_names_intrinsic_and_line():
    @S.kernel
    def k(A, C):
        S.load(S.acc[60:68], A)  # 64-vector buffer: index 67 is out of range

    with pytest.raises(BufferRangeError, match=r"kernel 'k'.*S\.load at test_golden_semantics\.py:\d+.*67"):
        k(np.zeros(64, np.int32), np.zeros(64, np.int8), config=CFG)

    @S.kernel
    def k2(A, C):
        S.load(S.acc[0:8], A)
        S.add(S.acc[0:8], S.acc[0:8], iters=(2, 8), dst_factors=(60, 1))

    with pytest.raises(IndexError, match=r"S\.add at test_golden_semantics\.py:\d+: dst index 67"):
        k2(np.zeros(64, np.int32), np.zeros(64, np.int8), config=CFG)


def test_bad_arguments_are_one_line_errors():
    @S.kernel
    def k(A, C):
        S.load(S.acc[0:8], A, offset=1)  # A has 8 vectors: reads past it

    with pytest.raises(CompileError, match="argument 'A'.*vectors up to 8.*8 vectors"):
        k(np.zeros(64, np.int32), np.zeros(64, np.int8), config=CFG)

    @S.kernel
    def k3(A, C):
        S.load(S.acc[0:8], A)
        S.add(S.acc[0:8], 1 << 16)

    with pytest.raises(CompileError, match="immediate 65536 does not fit"):
        k3(np.zeros(64, np.int32), np.zeros(64, np.int8), config=CFG)

    for kw, what in (({"iters": 5}, "iters"), ({"iters": (2, 2, 2)}, "iters"), ({"dst_factors": 1}, "dst_factors"),
                     ({"src_factors": (1,)}, "src_factors")):
        @S.kernel
        def k4(A, C):
            S.load(S.acc[0:8], A)
            S.add(S.acc[0:8], S.acc[0:8], **kw)

        with pytest.raises(CompileError, match=rf"argument '{what}'.*{what} must be a pair \(outer, inner\)"):
            k4(np.zeros(64, np.int32), np.zeros(64, np.int8), config=CFG)


# ---- lockstep golden runs (elementwise kernels) ---------------------------------------------------
@pytest.mark.parametrize("config", ["small", "default"])
def test_lockstep_run_equals_plain_run_for_every_operator(config, monkeypatch):
    """An elementwise kernel's golden run deals its vectors out to a one-copy probe run, then to several
    accelerator copies run in lockstep (with a remainder run); the outputs equal the plain one-copy run
    and the reference."""
    from compiler.kernel import Kernel
    from compiler.ops import OPERATORS
    cfg = load_config(config)
    rng = np.random.default_rng(5)
    n = (cfg.acc_depth // 2 * 9 + 5) * cfg.lanes - 3  # several copies and a remainder; a lane tail
    params = {"shr_imm": {"imm": -3}, "clip": {"lo": -100000, "hi": 7}, "shr_round": {"shift": 18},
              "fused": {"shift": 2}, "min_imm": {"imm": 5000}, "max_imm": {"imm": -(1 << 20)},
              "clip_imm": {"imm": 77}, "mov_imm": {"imm": 123456}, "add_imm": {"imm": 9}}
    run_part = Kernel._run_part
    parts: list[tuple[int, int, int]] = []

    def spy(self, cfg, bound, tensors, batch, first, chunk):
        parts.append((batch, first, chunk))
        return run_part(self, cfg, bound, tensors, batch, first, chunk)

    monkeypatch.setattr(Kernel, "_run_part", spy)
    nvec = -(-n // cfg.lanes)
    for name, op in OPERATORS.items():
        arrays = {k: rng.integers(-(1 << 31), 1 << 31, size=n, dtype=np.int64).astype(np.int32) for k in op.inputs}
        if name == "shift":
            arrays["B"] = rng.integers(-40, 40, size=n).astype(np.int32)
        p = params.get(name, {})
        args = {**arrays, op.output: S.tensor(n, "int8"), **op.fixed, **p}
        parts.clear()
        lock = op.kernel.run_golden(cfg, args)[op.output].data.reshape(-1)
        # a probe, several copies, a remainder, every vector once and in order
        assert parts[0][0] == 1 and any(b > 1 for b, _, _ in parts) and len(parts) in (2, 3), (name, parts)
        assert [f for _, f, _ in parts] == list(itertools.accumulate([0] + [b * c for b, _, c in parts[:-1]]))
        assert sum(b * c for b, _, c in parts) == nvec, (name, parts)
        parts.clear()
        plain = op.kernel.run_golden(cfg, args, lockstep=False)[op.output].data.reshape(-1)
        assert parts == []
        assert np.array_equal(lock, plain), name
        assert np.array_equal(lock[:n], op.reference(**arrays, **p).astype(np.int8)), name


def test_batched_context_runs_strided_padded_tiles_like_each_copy():
    """The Python halves on a lockstep (batched) context: every copy gets what a one-copy run gives."""
    batch = 3
    data = np.arange(10 * batch * L, dtype=np.int32).reshape(10, batch, L) * 7919

    def body(a, c):
        S.load(S.acc[0:20], a, offset=1, rows=2, cols=3, stride=5, pad=(1, 1, 1, 1))
        S.add(S.acc[0:20], S.acc[5:6])  # broadcast operand inside the tile, overwritten mid-loop
        S.clip(S.acc[0:20], 5000)
        S.max(S.acc[0:20], S.acc[20:40])
        S.store(c, S.acc[0:20], offset=0, rows=4, cols=5, stride=5)

    ctx = GoldenContext(CFG, "t", batch)
    c = Tensor("C", (20 * L,), "int8", L, np.zeros((20, batch, L), np.int8))
    with active(ctx):
        body(Tensor("A", (10 * L,), "int32", L, data), c)
    for k in range(batch):
        ctx1 = GoldenContext(CFG, "t")
        c1 = Tensor("C", (20 * L,), "int8", L, np.zeros((20, L), np.int8))
        with active(ctx1):
            body(Tensor("A", (10 * L,), "int32", L, data[:, k].copy()), c1)
        assert np.array_equal(ctx.acc[:, k], ctx1.acc) and np.array_equal(c.data[:, k], c1.data)


def test_a_load_of_padding_only_writes_its_zeros_on_every_model():
    """A LOAD with no data rows (or columns) but padding writes its padded tile with zeros, as the ISS,
    the TLM and the RTL do (docs/microarch.md); one past the buffer is refused when compiled."""
    from compiler.build import build
    from compiler.tensor import tensor
    from cosim import models

    @S.kernel
    def pad_only(A, C, rows=0, cols=3):
        S.load(S.acc[0:12], A)
        S.load(S.acc[0:12], A, rows=rows, cols=cols, stride=3, pad=(1, 1, 1, 1))
        S.add(S.acc[0:12], 1)
        S.store(C, S.acc[0:12])

    a = np.arange(12 * L, dtype=np.int32).reshape(12, L) % 50 + 1
    for rows, cols in ((0, 3), (2, 0)):
        p = build(pad_only, {"A": tensor((12, L), "int32"), "C": tensor((12, L), "int8"), "rows": rows,
                             "cols": cols}, CFG, name="pad_only")
        p.set_input("A", a)
        golden = pad_only.run_golden(CFG, {"A": a, "C": tensor((12, L), "int8"), "rows": rows, "cols": cols})
        iss, tlm = models.iss(p), models.tlm(p)
        r, c = 1 + rows + 1, 1 + cols + 1
        want = (a + 1).astype(np.int8)
        want[:r * c] = 1  # the padded tile's zeros, plus one
        assert np.array_equal(golden["C"].data.reshape(12, L), want), (rows, cols)
        assert np.array_equal(iss.outputs["C"].reshape(12, L), want), (rows, cols)
        assert np.array_equal(tlm.outputs["C"], iss.outputs["C"]), (rows, cols)

    @S.kernel
    def pad_past_the_end(A, C):
        S.load(S.acc[CFG.acc_depth - 1:CFG.acc_depth], A, rows=0, cols=3, stride=3, pad=(2, 2, 2, 2))
        S.store(C, S.acc[0:1])

    with pytest.raises(BufferRangeError, match="out of range"):
        build(pad_past_the_end, {"A": tensor((12, L), "int32"), "C": tensor((1, L), "int8")}, CFG, name="x")
