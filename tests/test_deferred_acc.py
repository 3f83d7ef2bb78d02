"""The deferred golden path (compiler/deferred_acc.py) against the call-by-call one.

Random chains of LOAD, ALU and STORE calls (whole views, explicit loops, broadcast operands, zero
factors, padded and strided tiles, overlapping destinations, a STORE into DRAM a pending LOAD read,
reads of the accumulator mid-chain, bad arguments) run on a deferring context and on one that runs every
call as it comes: the DRAM tensors, the accumulator, every mid-chain read and the error (which call,
its class and message) must be identical. Then whole kernels: every shipped elementwise operator in
lockstep with tails, deferred and not.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from compiler import S
from compiler.context import GoldenContext, active
from compiler.deferred_acc import MAX_NODES, MAX_PENDING
from compiler.errors import CompileError
from compiler.tensor import Tensor
from hw.config import load_config

CFG = load_config("small")  # 8 lanes, 64 accumulator vectors
L, DEPTH = CFG.lanes, CFG.acc_depth
OPS = ("add", "sub", "mul", "min", "max", "shr", "clip", "mov", "mulhr", "clz")
NVEC = 40  # vectors of the int32 input tensors

Call = Callable[[dict[str, Tensor], GoldenContext, list[np.ndarray]], Any]


def _values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """int32 values mixing extremes, small numbers (shift amounts, CLZ inputs) and the whole range."""
    pick = rng.integers(0, 4, size=shape)
    whole = rng.integers(-(1 << 31), 1 << 31, size=shape, dtype=np.int64)
    small = rng.integers(-40, 40, size=shape)
    edge = rng.choice(np.array([-(1 << 31), (1 << 31) - 1, 0, -1, 1, 1 << 30]), size=shape)
    return np.choose(pick, [whole, small, edge, whole >> 20]).astype(np.int32)


def _tensors(seed: int, batch: int) -> dict[str, Tensor]:
    """A and B int32 inputs, C an int8 output, W an int8 tensor over A's own bytes (a STORE into W changes
    what a LOAD of A reads)."""
    rng = np.random.default_rng(seed)
    row = (batch, L) if batch > 1 else (L,)
    a = _values(rng, (NVEC,) + row)
    b = _values(rng, (NVEC,) + row)
    c = np.zeros((NVEC,) + row, np.int8)
    w = a.view(np.int8).reshape((-1,) + row)
    return {"A": Tensor("A", (NVEC * L,), "int32", L, a), "B": Tensor("B", (NVEC * L,), "int32", L, b),
            "C": Tensor("C", (NVEC * L,), "int8", L, c), "W": Tensor("W", (w.shape[0] * L,), "int8", L, w)}


def _random_call(rng: np.random.Generator) -> Call:
    """One intrinsic call (or a read of the accumulator), its arguments drawn from ``rng``; some are bad."""
    kind = rng.choice(["load", "alu", "alu", "alu", "store", "observe"], p=[.25, .2, .2, .15, .15, .05])
    ri = lambda lo, hi: int(rng.integers(lo, hi))  # noqa: E731
    if kind == "load":
        n, base, src = ri(1, 17), ri(0, DEPTH - 16 + 4), str(rng.choice(["A", "B"]))
        off = ri(0, NVEC - n + 2)  # now and then past the tensor's end
        form = ri(0, 4)
        if form == 0:  # rows packed: stride == cols
            r = ri(1, 4)
            c = max(1, n // r)
            return lambda T, ctx, log: S.load(S.acc(base), T[src], offset=_near_offset(off, r * c), rows=r, cols=c,
                                              stride=c)
        if form == 1:  # strided rows (the plain path)
            return lambda T, ctx, log: S.load(S.acc(base), T[src], offset=off % 8, rows=2, cols=3, stride=5)
        if form == 2:  # padded (the plain path)
            return lambda T, ctx, log: S.load(S.acc(base), T[src], offset=off % 8, rows=2, cols=2, stride=4,
                                              pad=(1, 0, 1, 1))
        return lambda T, ctx, log: S.load(S.acc[base:base + n], T[src], offset=off)
    if kind == "alu":
        op = getattr(S, str(rng.choice(OPS)))
        imm = int(rng.choice([-32768, 32767, -1, 0, 3, 31, 40, -16, int(rng.integers(-32768, 32768))]))
        form = int(rng.choice(6, p=[.2, .25, .15, .2, .04, .16]))
        n, d = ri(1, 17), ri(0, DEPTH - 16)
        s = max(0, min(DEPTH - 1, d + ri(-20, 20)))  # sources near the destination: overlaps of every kind
        if form == 0:
            return lambda T, ctx, log: op(S.acc[d:d + n], imm)
        if form == 1:
            return lambda T, ctx, log: op(S.acc[d:d + n], S.acc[s:s + n])
        if form == 2:  # one broadcast vector, inside the destination or not
            return lambda T, ctx, log: op(S.acc[d:d + n], S.acc[s:s + 1])
        if form == 3:  # a two-level loop with random small factors (zero: repeated destinations)
            it = (ri(1, 4), ri(1, 5))
            df, sf = (ri(0, 5), ri(0, 3)), (ri(0, 5), ri(0, 3))
            return lambda T, ctx, log: op(S.acc(d), S.acc(s), iters=it, dst_factors=df, src_factors=sf)
        if form == 4:  # a bad argument: a negative factor or an index past the buffer
            bad = rng.choice(["factor", "range"])
            if bad == "factor":
                return lambda T, ctx, log: op(S.acc(d), S.acc(s), iters=(2, 2), dst_factors=(-1, 1))
            return lambda T, ctx, log: op(S.acc[DEPTH - 2:DEPTH + 3], imm)
        it = (ri(1, 4), ri(1, 5))  # a packed two-level loop (dst factors (inner, 1): one run)
        return lambda T, ctx, log: op(S.acc(d), S.acc(s), iters=it, dst_factors=(it[1], 1),
                                      src_factors=(it[1], 1))
    if kind == "store":
        n, base, dst = ri(1, 17), ri(0, DEPTH - 16), str(rng.choice(["C", "C", "W"]))
        off = ri(0, NVEC - n + 2)
        if ri(0, 4) == 0:  # strided rows (the plain path)
            return lambda T, ctx, log: S.store(T[dst], S.acc(base), offset=off % 8, rows=2, cols=3, stride=7)
        return lambda T, ctx, log: S.store(T[dst], S.acc[base:base + n], offset=off)
    lo, hi = sorted((ri(0, DEPTH), ri(0, DEPTH)))
    return lambda T, ctx, log: log.append(ctx.acc[lo:hi + 1].copy())


def _near_offset(off: int, n: int) -> int:
    """A LOAD offset for ``n`` vectors near ``off`` (now and then past the end: an error)."""
    return max(0, min(off, NVEC - n + 1))


def _run(calls: list[Call], seed: int, batch: int, defer: bool) -> tuple[Any, dict[str, np.ndarray], np.ndarray,
                                                                         list[np.ndarray]]:
    """Run ``calls`` on one context; return the error (call index, class, message), the DRAM tensors, the
    accumulator and the mid-chain reads."""
    T = _tensors(seed, batch)
    ctx = GoldenContext(CFG, "chain", batch, defer=defer)
    log: list[np.ndarray] = []
    err = None
    with active(ctx):
        for k, call in enumerate(calls):
            try:
                call(T, ctx, log)
            except CompileError as e:
                err = (k, type(e).__name__, str(e))
                break
    assert (ctx.deferred is not None) == defer
    return err, {name: t.data.copy() for name, t in T.items()}, ctx.acc.copy(), log


@pytest.mark.parametrize("batch", [1, 3])
def test_random_chains_equal_the_call_by_call_path(batch):
    rng = np.random.default_rng(2024 + batch)
    errors = 0
    for chain in range(150):
        calls = [_random_call(rng) for _ in range(int(rng.integers(1, 30)))]
        plain = _run(calls, chain, batch, defer=False)
        fused = _run(calls, chain, batch, defer=True)
        assert fused[0] == plain[0], chain
        errors += plain[0] is not None
        for name in plain[1]:
            assert np.array_equal(fused[1][name], plain[1][name]), (chain, name)
        assert np.array_equal(fused[2], plain[2]), chain
        assert len(fused[3]) == len(plain[3]) and all(np.array_equal(f, p) for f, p in zip(fused[3], plain[3]))
    assert 10 < errors < 120  # the chains exercise both the errors and long error-free runs


def _chain_result(body: Callable[[dict[str, Tensor]], None], defer: bool) -> tuple[np.ndarray, np.ndarray, Any]:
    T = _tensors(7, 1)
    ctx = GoldenContext(CFG, "t", defer=defer)
    with active(ctx):
        body(T)
        pending = dict(ctx.deferred.pending) if ctx.deferred else None
    return T["C"].data.copy(), ctx.acc.copy(), pending


def test_tile_chain_is_one_expression_and_leaves_the_accumulator_unwritten():
    """LOAD, LOAD, ADD, MOV, STORE: nothing reaches the accumulator until it is read; the STORE's value
    comes from the DRAM tiles."""
    def body(T):
        S.load(S.acc[0:8], T["A"], offset=3)
        S.load(S.acc[8:16], T["B"], offset=3)
        S.add(S.acc[0:8], S.acc[8:16])
        S.mov(S.acc[32:40], S.acc[0:8])
        S.store(T["C"], S.acc[32:40], offset=5)

    c, acc, pending = _chain_result(body, True)
    assert sorted(pending) == [0, 8, 32] and not pending[32][1].x is None
    c0, acc0, _ = _chain_result(body, False)
    assert np.array_equal(c, c0) and np.array_equal(acc, acc0)
    ctx = GoldenContext(CFG, "t")
    T = _tensors(7, 1)
    with active(ctx):
        body(T)
        assert not ctx._acc.any()  # the buffer behind ``acc``: nothing written yet
        assert np.array_equal(ctx.acc, acc0)  # reading it writes the pending intervals


def test_long_in_place_loop_and_many_intervals_stay_bounded():
    """A chain of more ops than MAX_NODES on one tile, and more intervals than MAX_PENDING, give the
    call-by-call results with the map bounded."""
    def body(T):
        S.load(S.acc[0:8], T["A"])
        for k in range(3 * MAX_NODES):
            (S.add if k % 3 else S.shr)(S.acc[0:8], k % 7 if k % 3 == 0 else 12345)
        for k in range(MAX_PENDING + 5):
            S.mov(S.acc[8 + k], S.acc[k % 8])
        for k in range(MAX_PENDING + 5):
            S.load(S.acc[50 - k], T["B"], offset=k)
        S.store(T["C"], S.acc[0:8])
        S.store(T["C"], S.acc[8:16], offset=8)

    c, acc, pending = _chain_result(body, True)
    assert len(pending) <= MAX_PENDING
    assert all(node.size <= MAX_NODES for _, node in pending.values())
    c0, acc0, _ = _chain_result(body, False)
    assert np.array_equal(c, c0) and np.array_equal(acc, acc0)


def test_store_into_dram_a_pending_load_reads_sees_the_old_values():
    """LOAD A (deferred), STORE into W (A's own bytes), then use the loaded tile: it holds A as it was."""
    def body(T):
        S.load(S.acc[0:8], T["A"])
        S.mov(S.acc[16:24], 100)
        S.store(T["W"], S.acc[16:24])  # overwrites A's first two vectors
        S.add(S.acc[0:8], 1)
        S.store(T["C"], S.acc[0:8])
        S.load(S.acc[8:16], T["A"])  # the new values
        S.store(T["C"], S.acc[8:16], offset=8)

    c, acc, _ = _chain_result(body, True)
    c0, acc0, _ = _chain_result(body, False)
    assert np.array_equal(c, c0) and np.array_equal(acc, acc0)


def test_an_error_leaves_dram_as_the_call_by_call_path():
    """STOREs are done when called, so DRAM at a failing call holds what the plain path wrote."""
    def body(T):
        S.load(S.acc[0:8], T["A"])
        S.add(S.acc[0:8], S.acc[0:8])
        S.store(T["C"], S.acc[0:8])
        S.sub(S.acc[60:70], 1)  # past the buffer

    for defer in (True, False):
        T = _tensors(3, 1)
        with active(GoldenContext(CFG, "t", defer=defer)):
            with pytest.raises(CompileError, match="S.sub at .*out of range"):
                body(T)
        assert np.array_equal(T["C"].data[:8], (T["A"].data[:8] * 2).astype(np.int8))


@pytest.mark.parametrize("config", ["small", "default"])
def test_every_operator_in_lockstep_equals_the_call_by_call_run(config, monkeypatch):
    """Every shipped elementwise operator with tails (a last tile shorter than the others, a last vector
    partly padding), run in lockstep deferred and not: the same outputs."""
    from compiler.ops import OPERATORS
    cfg = load_config(config)
    rng = np.random.default_rng(11)
    n = (cfg.acc_depth // 2 * 5 + 3) * cfg.lanes - 5
    params = {"shr_imm": {"imm": -3}, "clip": {"lo": -100000, "hi": 7}, "shr_round": {"shift": 18},
              "fused": {"shift": 2}, "min_imm": {"imm": 5000}, "max_imm": {"imm": -(1 << 20)},
              "clip_imm": {"imm": 77}, "mov_imm": {"imm": 123456}, "add_imm": {"imm": 9}}
    for name, op in OPERATORS.items():
        arrays = {k: _values(rng, (n,)) for k in op.inputs}
        for tile in (None, 3):
            args = {**arrays, op.output: S.tensor(n, "int8"), **op.fixed, **params.get(name, {})}
            if tile is not None and "tile" in op.kernel.signature.parameters:
                args["tile"] = tile
            monkeypatch.setattr(GoldenContext, "DEFER", True)
            fused = op.kernel.run_golden(cfg, args)[op.output].data.copy()
            monkeypatch.setattr(GoldenContext, "DEFER", False)
            plain = op.kernel.run_golden(cfg, args)[op.output].data
            assert np.array_equal(fused, plain), (name, tile)


def test_uniform_interval_broadcast_against_a_run():
    """A MOV of one broadcast vector makes a uniform interval; ops of it against a run of vectors, and a
    one-vector read inside it, give the call-by-call results."""
    def body(T):
        S.load(S.acc[16:32], T["A"])
        S.mov(S.acc[0:8], S.acc[20:21])
        S.shr(S.acc[0:8], S.acc[24:32])
        S.mov(S.acc[40:48], S.acc[21:22])
        S.mulhr(S.acc[40:48], S.acc[16:24])
        S.mov(S.acc[48:56], S.acc[22:23])
        S.clip(S.acc[56:64], S.acc[50:51])  # one vector inside the uniform interval
        S.max(S.acc[48:56], S.acc[8:16])
        S.store(T["C"], S.acc[0:8])
        S.store(T["C"], S.acc[40:48], offset=8)
        S.store(T["C"], S.acc[48:56], offset=16)

    c, acc, _ = _chain_result(body, True)
    c0, acc0, _ = _chain_result(body, False)
    assert np.array_equal(c, c0) and np.array_equal(acc, acc0)


def test_bench_golden_rows_agree_on_a_small_input():
    """The bench's golden-vs-numpy rows (deferred, numpy, call by call) run and agree on a small input."""
    from cosim.bench.measure import golden_vs_numpy
    rows = golden_vs_numpy(load_config("small"), 3000, reps=1)
    assert set(rows) == {"vadd", "fused", "requant", "vadd_big_tiles"}
    for row in rows.values():
        assert row["outputs_equal"] and row["golden_s"] > 0 and row["call_by_call_s"] > 0 and row["cpu_ratio"] > 0
    assert GoldenContext.DEFER


def test_lockstep_batch_of_a_fully_deferred_probe_is_bigger_but_bounded():
    """A probe that never wrote the buffer sizes the batch by the deferred budget; the copies' buffers
    stay within the address-space bound; the parts cover every vector once."""
    from compiler.kernel import LOCKSTEP_ACC_BYTES, LOCKSTEP_DEFERRED_BYTES, LOCKSTEP_MAX_BUFFER_BYTES, Kernel
    cfg = load_config("default")
    nvec = 1 << 22
    t = {"A": Tensor("A", (nvec * cfg.lanes,), "int32", cfg.lanes, None)}
    plain = Kernel.lockstep_parts(t, cfg, 64, 96)
    deferred = Kernel.lockstep_parts(t, cfg, 64, 96, LOCKSTEP_DEFERRED_BYTES)
    assert deferred[0][0] > LOCKSTEP_DEFERRED_BYTES // LOCKSTEP_ACC_BYTES * plain[0][0] // 2
    tiny = Kernel.lockstep_parts(t, cfg, 64, 1, LOCKSTEP_DEFERRED_BYTES)
    assert tiny[0][0] * cfg.acc_depth * cfg.lanes * 4 <= LOCKSTEP_MAX_BUFFER_BYTES
    for parts in (plain, deferred, tiny):
        assert sum(b * c for b, _, c in parts) == nvec - 64
        assert [f for _, f, _ in parts] == [64] + ([64 + parts[0][0] * parts[0][2]] if len(parts) > 1 else [])
    # a batch a little smaller that divides the vectors evenly saves the last part
    assert len(Kernel.lockstep_parts({"A": Tensor("A", (65536 * 16,), "int32", 16, None)}, cfg, 64, 96,
                                     LOCKSTEP_DEFERRED_BYTES)) == 1


def test_const_changed_after_its_load_keeps_the_values_it_had():
    """A kernel that changes its own array after S.const and the LOAD of it: the tile holds the values at
    S.const (the compiled program's constant region), deferred or not."""
    def body(T):
        table = np.arange(8 * L, dtype=np.int32) * 3
        t = S.const(table)
        S.load(S.acc[0:8], t)
        table[:] = 5  # after the LOAD: a deferred LOAD must not see it
        S.add(S.acc[0:8], S.acc[0:8])
        S.store(T["C"], S.acc[0:8])

    c, acc, _ = _chain_result(body, True)
    c0, acc0, _ = _chain_result(body, False)
    want = (np.arange(8 * L, dtype=np.int32) * 6).reshape(8, L)
    assert np.array_equal(acc0[:8], want) and np.array_equal(c0[:8], want.astype(np.int8))
    assert np.array_equal(c, c0) and np.array_equal(acc, acc0)


@pytest.mark.parametrize("n", [3, 4])  # 3: as many vectors as copies (a wrong broadcast would not fail)
@pytest.mark.parametrize("defer", [False, True])
def test_const_and_scratch_on_a_lockstep_context_are_each_copys_own(n, defer):
    """S.const loaded and S.scratch stored on a batched context: every copy sees what a one-copy run sees
    (no error, the same accumulator and scratch values)."""
    batch = 3
    a = _values(np.random.default_rng(5), (8, batch, L))
    table = _values(np.random.default_rng(6), (8 * L,))

    def body(A):
        S.load(S.acc[0:n], S.const(table), offset=1)
        S.load(S.acc[8:8 + n], A, offset=2)
        S.sub(S.acc[0:n], S.acc[8:8 + n])
        sc = S.scratch(8 * L, "int8")
        S.store(sc, S.acc[0:n], offset=3)
        return sc

    ctx = GoldenContext(CFG, "t", batch, defer=defer)
    with active(ctx):
        sc = body(Tensor("A", (8 * L,), "int32", L, a))
    for k in range(batch):
        one = GoldenContext(CFG, "t", defer=False)
        with active(one):
            sc1 = body(Tensor("A", (8 * L,), "int32", L, a[:, k].copy()))
        assert np.array_equal(sc.data[:, k], sc1.data), k
        assert np.array_equal(ctx.acc[:, k], one.acc), k


def test_elementwise_kernel_with_a_const_runs_in_lockstep_like_one_copy(monkeypatch):
    """A user's elementwise kernel adding a constant vector (per lane) to every vector: lockstep (deferred
    or not) gives the one-run result."""
    cfg = CFG

    @S.kernel(elementwise=True)
    def add_lanes(A, C):
        S.load(S.acc[0:4], S.const(np.tile(np.arange(L, dtype=np.int32) * 1000 - 3000, 4)))  # 4 equal vectors
        for t in range(0, A.nvec, 4):
            k = min(4, A.nvec - t)
            S.load(S.acc[8:8 + k], A, offset=t)
            S.add(S.acc[8:8 + k], S.acc[0:k])
            S.store(C, S.acc[8:8 + k], offset=t)

    n = 300 * L
    a = _values(np.random.default_rng(9), (n,))
    args = {"A": a, "C": S.tensor(n, "int8")}
    plain = add_lanes.run_golden(cfg, args, lockstep=False)["C"].data.copy()
    want = (a.reshape(-1, L) + (np.arange(L, dtype=np.int32) * 1000 - 3000)).astype(np.int8)
    assert np.array_equal(plain, want)
    for defer in (True, False):
        monkeypatch.setattr(GoldenContext, "DEFER", defer)
        lock = add_lanes.run_golden(cfg, args)["C"].data
        assert np.array_equal(lock, plain), defer


@pytest.mark.parametrize("batch", [1, 3])
def test_store_into_a_const_is_one_clear_error(batch):
    """A constant is read-only DRAM (its lockstep copies share one array): STORE into it is refused in the
    interface, the same error deferred or not, on one copy or several."""
    for defer in (True, False):
        with active(GoldenContext(CFG, "t", batch, defer=defer)):
            t = S.const(np.zeros(4 * L, np.int8), "table")
            S.mov(S.acc[0:4], 1)
            with pytest.raises(CompileError, match="'table' is a constant .*STORE cannot write it"):
                S.store(t, S.acc[0:4])


def _random_tile_body(rng: np.random.Generator, tile: int) -> list[Callable[..., Any]]:
    """The steps of a random elementwise kernel's tile (``step(t, n, A, B, C)`` for the tile of ``n`` vectors at
    vector ``t``): LOADs of A, B or a constant, ALU ops of every form, STOREs into C, on random slots."""
    ri = lambda lo, hi: int(rng.integers(lo, hi))  # noqa: E731
    steps: list[Callable[..., Any]] = []
    for _ in range(ri(1, 25)):
        kind = str(rng.choice(["load", "const", "alu", "alu", "alu", "store"]))
        b, s = ri(0, 48), ri(0, 48)
        if kind == "load":
            src = str(rng.choice(["A", "B"]))
            steps.append(lambda t, n, T, b=b, src=src: S.load(S.acc[b:b + n], T[src], offset=t))
        elif kind == "const":
            v = int(rng.integers(-(1 << 31), 1 << 31))
            steps.append(lambda t, n, T, b=b, v=v: S.load(S.acc[b:b + n], S.const(np.full(tile * L, v, np.int32))))
        elif kind == "store":
            steps.append(lambda t, n, T, b=b: S.store(T["C"], S.acc[b:b + n], offset=t))
        else:
            op = getattr(S, str(rng.choice(OPS)))
            imm = int(rng.choice([-32768, 32767, -1, 0, 3, 31, 33, -16, -40]))
            form = ri(0, 4)
            if form == 0:
                steps.append(lambda t, n, T, op=op, b=b, imm=imm: op(S.acc[b:b + n], imm))
            elif form == 1:
                steps.append(lambda t, n, T, op=op, b=b, s=s: op(S.acc[b:b + n], S.acc[s:s + n]))
            elif form == 2:
                steps.append(lambda t, n, T, op=op, b=b, s=s: op(S.acc[b:b + n], S.acc[s:s + 1]))
            else:  # a source overlapping the destination, after it
                steps.append(lambda t, n, T, op=op, b=b: op(S.acc[b:b + n], S.acc[b + 2:b + 2 + n]))
    return steps


def test_random_elementwise_kernels_in_lockstep_equal_the_call_by_call_run(monkeypatch):
    """Random elementwise kernels (random tile, steps and sizes: a probe, big batches, a remainder part, kept
    buffers between runs) run in lockstep deferred and call by call: the same outputs."""
    rng = np.random.default_rng(31)
    for trial in range(12):
        tile = int(rng.integers(1, 9))
        steps = _random_tile_body(rng, tile)

        def body(A, B, C):
            for t in range(0, A.nvec, tile):
                for step in steps:
                    step(t, min(tile, A.nvec - t), {"A": A, "B": B, "C": C})

        k = S.kernel(body, elementwise=True)
        n = int(rng.integers(300, 6000)) * L - int(rng.integers(0, L))
        args = {"A": _values(rng, (n,)), "B": _values(rng, (n,)), "C": S.tensor(n, "int8")}
        outs = []
        for defer in (True, False):
            monkeypatch.setattr(GoldenContext, "DEFER", defer)
            outs.append(k.run_golden(CFG, args)["C"].data.copy())
        assert np.array_equal(outs[0], outs[1]), trial
