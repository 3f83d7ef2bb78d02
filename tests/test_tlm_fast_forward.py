"""The TLM's fast-forward (sim/tlm/fast_forward.py) changes nothing the TLM reports: for every
Program, a run with it gives the same CYCLES, every counter, every output byte, the same error
(code, pc, cycle) and the same event count as the plain event-by-event run; and it does jump on
the long repetitive Programs it is for."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cosim.bench.suite import alu_loop, dma_stream
from cosim.fuzz.campaign import make_case as fuzz_case
from cosim.fuzz.faults import FAULT_KINDS, inject
from cosim.fuzz.generator import generate
from compiler.examples import list_examples, make_case
from hw.assembler import Assembler, patched
from hw.config import HwConfig, load_config
from hw.program import Program
from sim.tlm import TlmModel, run_program, simulate
from sim.tlm.fast_forward import FastForward, _tail_repeats
from sim.tlm.burst_calc import row_burst_beats, row_cut_marks
from sim.tlm.steady_state import undeclared_state

CONFIGS = ("default", "small", "wide")


@pytest.fixture(autouse=True)
def _sample_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast-forward samples only after a run's first few thousand events (a cost threshold);
    these Programs are kept short, so it samples from the first retirement here."""
    monkeypatch.setattr(FastForward, "warmup_events", 0)


def _run(p: Program, ff: bool) -> TlmModel:
    return simulate(p, fast_forward=ff)[0]


def _same(p: Program) -> TlmModel:
    """Run ``p`` with and without the fast-forward, assert every reported thing equal; the fast run."""
    plain, fast = _run(p, False), _run(p, True)
    assert fast.cycles == plain.cycles, p.name
    assert fast.counters() == plain.counters(), p.name
    assert fast.events == plain.events, p.name
    e1, e2 = plain.error, fast.error
    assert (e1 is None) == (e2 is None), p.name
    if e1 is not None:
        assert (e1.code, e1.pc, e1.cycle, e1.unit, str(e1)) == (e2.code, e2.pc, e2.cycle, e2.unit, str(e2)), p.name
    assert np.array_equal(plain.dram, fast.dram), p.name
    assert np.array_equal(plain.acc, fast.acc), p.name
    return fast


def _same_with_faults(p: Program, seed: int) -> None:
    """:func:`_same` on ``p`` with each of the first three fault kinds injected (where one applies)."""
    rng = np.random.default_rng(seed)
    for kind in FAULT_KINDS[:3]:
        got = inject(p, kind, rng)
        if got is not None:
            _same(got[0])


def _periodic(cfg: HwConfig, seed: int, dma: bool = False, tail: str = "finish") -> Program:
    """A long loop of one random body of ALU instructions (every op, immediates and buffer operands,
    overlapping loops), optionally with a LOAD and a STORE of fixed addresses in the body."""
    r = np.random.default_rng([seed, cfg.config_id])
    L, depth = cfg.lanes, cfg.acc_depth
    vecs = int(min(depth, r.choice([4, 16, 64])))
    asm = Assembler(cfg, f"periodic-{cfg.name}-{seed}-{dma}-{tail}")
    a = asm.input("a", r.integers(-50, 50, size=(vecs, L)).astype(np.int32))
    c = asm.output("c", (vecs, L))
    ops = ["ADD", "SUB", "MUL", "MOV", "MIN", "MAX", "SHR", "CLIP"]
    affine = bool(r.integers(0, 2))
    body = []
    for _ in range(int(r.integers(1, 6))):
        op = str(r.choice(ops[:4] if affine else ops))
        n_out, n_in = int(r.integers(1, vecs + 1)), int(r.integers(1, 3))
        f_out, f_in = int(r.integers(0, 2)), int(r.integers(0, 2))
        last = (n_out - 1) * f_out + (n_in - 1) * f_in
        dst = int(r.integers(0, vecs - last)) if last < vecs else 0
        if last >= vecs:
            f_out, f_in, n_in, dst = 1, 0, 1, 0
            n_out = min(n_out, vecs)
        fields = dict(iter_out=n_out, iter_in=n_in, dst_base=dst, dst_factor_out=f_out, dst_factor_in=f_in)
        if affine or r.random() < 0.6:
            imm = int(r.integers(-3, 4)) if op != "MUL" else int(r.choice([-1, 3, 5]))
            body.append((op, dict(fields, imm=imm)))
        else:
            src = int(r.integers(0, vecs - (n_out - 1) * f_out - (n_in - 1) * f_in))
            body.append((op, dict(fields, src_base=src, src_factor_out=f_out, src_factor_in=f_in)))
    reps = int(r.integers(40, 160))
    asm.load(a, x=vecs, push_next=True)
    for k in range(reps):
        if dma and k:
            asm.load(a, x=vecs, pop_next=True, push_next=True)
        for j, (op, f) in enumerate(body):
            asm.alu(op, pop_prev=j == 0, push_next=j == len(body) - 1 and (dma or k == reps - 1),
                    push_prev=dma and j == len(body) - 1 and k < reps - 1, **f)
        if dma and k < reps - 1:
            asm.store(c, x=vecs, pop_prev=True)
    asm.store(c, x=vecs, pop_prev=True)
    if tail == "finish":
        asm.finish()
    else:  # an ALU past the buffer's depth after the loop: a fault at the end
        asm.alu("ADD", imm=1, iter_out=2, dst_base=depth - 1, dst_factor_out=1)
        asm.finish()
    return asm.program()


@pytest.mark.parametrize("name", CONFIGS)
def test_suite_programs_jump_and_agree(name: str) -> None:
    cfg = load_config(name)
    m = _same(alu_loop(cfg, 3000, 8))
    assert m.ff is not None and m.ff.jumps >= 1 and m.ff.skipped_insns > 1000
    assert set(m.ff.ways) == {"affine"}  # ADD immediates: one affine map per vector
    _same(dma_stream(cfg, 2000))


def test_dma_tile_loop_jumps_and_faults_agree() -> None:
    """Tiles whose DRAM addresses move by a page multiple per period (small: 16 tiles) jump; a fault
    of every kind injected in the loop stops the jump before it and agrees too."""
    cfg = load_config("small")
    p = dma_stream(cfg, 12000)
    m = _same(p)
    assert m.ff is not None and m.ff.jumps >= 1 and m.ff.skipped_insns > 500
    assert m.ff.ways.get("batched")  # independent tiles: the skipped periods side by side
    rng = np.random.default_rng(3)
    for kind in FAULT_KINDS:
        got = inject(p, kind, rng)
        if got is not None:
            _same(got[0])


@pytest.mark.parametrize("name", CONFIGS)
def test_cut_marks_decide_the_bursts(name: str) -> None:
    """The signature holds a DMA row's cut mark instead of its address: two rows get the same
    bursts exactly when their marks are equal (every start on the bus grid of two pages)."""
    cfg = load_config(name)
    bb, mb = cfg.bus_bytes, cfg.max_burst
    starts = np.arange(0, 2 * 4096, bb, dtype=np.int64)
    for row_bytes in sorted({cfg.out_vec_bytes, cfg.acc_vec_bytes, 3 * cfg.out_vec_bytes, 10 * cfg.out_vec_bytes,
                             130 * cfg.acc_vec_bytes}):
        marks = row_cut_marks(starts, row_bytes, bb, mb)
        by_mark: dict[int, tuple[int, ...]] = {}
        by_bursts: dict[tuple[int, ...], int] = {}
        for a, mk in zip(starts.tolist(), marks.tolist()):
            bursts = tuple(row_burst_beats(np.array([a]), row_bytes, bb, mb)[0].tolist())
            assert by_mark.setdefault(mk, bursts) == bursts, (row_bytes, a)
            assert by_bursts.setdefault(bursts, mk) == mk, (row_bytes, a)
        assert len(by_mark) > 1 or row_bytes <= bb * mb  # a long row is cut in several ways


@pytest.mark.parametrize("name", CONFIGS)
def test_dma_steps_off_the_page_jump_and_agree(name: str) -> None:
    """Tiles of 10 vectors: the DRAM addresses move by steps that are no multiple of 4 KiB, so the
    4 KiB boundaries cut the rows at offsets that shift from period to period. The loop jumps up
    to the DMA whose cuts change, runs it event by event, and jumps again from the periods it saw
    (small: the STOREs' 80-byte rows straddle pages off the burst grid; wide's period, many tiles
    long, leaves no room to jump in a Program this short)."""
    cfg = load_config(name)
    p = dma_stream(cfg, 3000, 10)
    m = _same(p)
    assert m.ff is not None
    if name == "small":
        assert m.ff.jumps_again >= 1 and m.ff.skipped_insns > 300 and m.ff.ways.get("batched")
    elif name == "default":  # 160-byte STORE rows: a cut off the burst grid every few periods
        assert m.ff.jumps >= 1
    _same_with_faults(p, 7)


@pytest.mark.parametrize("name", ["small", "default"])
def test_crossings_are_replayed_and_agree(name: str) -> None:
    """Tiles of 10 vectors, long enough for the same DMA cut otherwise to come back: the
    event-by-event stretch of the first such crossing is recorded, and the later ones are replayed
    from it (then the loop jumps again at once), with the very results of the plain run; so are
    the same Program with a fault injected."""
    cfg = load_config(name)
    p = dma_stream(cfg, 6000, 10)
    m = _same(p)
    assert m.ff is not None and m.ff.n_segments >= 1 and m.ff.replays >= 2
    _same_with_faults(p, 11)


def test_a_crossing_whose_words_differ_is_not_replayed() -> None:
    """A recorded crossing is replayed only where the words ahead are the recorded ones (but for
    DMA addresses) with every DMA cut alike: a STORE of another size in the loop, past the first
    crossings, makes the run go event by event there and still agree."""
    cfg = load_config("small")
    p = dma_stream(cfg, 6000, 10)
    insns = list(p.insns)
    stores = [k for k, i in enumerate(insns) if i.MNEMONIC == "STORE" and k > len(insns) // 2]
    k = stores[len(stores) // 2]
    insns[k] = dataclasses.replace(insns[k], x_size=insns[k].x_size - 1)
    m = _same(patched(p, insns=insns))
    assert m.ff is not None and m.ff.replays >= 1  # the crossings before the change are replayed


@pytest.mark.parametrize("tile", [3, 7, 13, 22])
def test_tile_sizes_off_the_burst_grid_agree(tile: int) -> None:
    """Tiles of a few odd sizes on small: LOAD and STORE rows start off the burst grid at offsets
    that shift from tile to tile, so cuts change at irregular periods."""
    m = _same(dma_stream(load_config("small"), 1500, tile))
    assert m.ff is not None and m.ff.jumps >= 1


def test_pipelined_tiles_are_applied_side_by_side() -> None:
    """vadd on small: a tile's LOADs, ADD, MOV and STORE spread over up to three periods of the
    loop (the STORE of a tile among the next tile's LOADs); the skipped data is still applied block
    by block, side by side, with the plain run's buffers and DRAM."""
    cfg = load_config("small")
    m = _same(make_case("vadd_large", cfg, {"shape": (24, 1000)}).program)
    assert m.ff is not None and m.ff.jumps >= 1
    assert set(m.ff.ways) == {"batched"}


def _gemm_tile_loop(cfg: HwConfig, reps: int, double_buffered: bool = False) -> Program:
    """A convolution's tile loop in miniature: per iteration an input tile of 3 rows (one padding
    row first) and a weight block, both moving through their tensors by steps that are no multiple
    of 4 KiB, then a GEMM accumulating into the same output; requant and STORE at the end.
    ``double_buffered``: INP and WGT double-buffered (iteration k loads into half ``k % 2`` and its
    GEMM reads that half through its own micro-ops), so a period holds two iterations and each GEMM
    reads what a LOAD of its period or of the period before left."""
    rng = np.random.default_rng(21 if double_buffered else 9)
    L = cfg.lanes
    kind = "double-buffered-gemm-loop" if double_buffered else "gemm-tile-loop"
    asm = Assembler(cfg, f"{kind}-{cfg.name}-{reps}")
    table = [(0, 0, 0), (1, 1, 0), (2, 2, 0)] + ([(0, 3, 1), (1, 4, 1), (2, 5, 1)] if double_buffered else [])
    u = asm.uops("uops", table)
    inp = asm.input("inp", rng.integers(-128, 128, (reps * 5 + 3, L)).astype(np.int8))
    wgt = asm.input("wgt", rng.integers(-128, 128, (reps * 3 + 1, cfg.block, cfg.block)).astype(np.int8))
    out = asm.output("out", (3, L))
    asm.load(u, x=len(table), buf="UOP")
    for k in range(reps):
        h = k % 2 if double_buffered else 0
        asm.load(inp, x=1, y=2, offset=5 * k, stride=2, sram=3 * h, buf="INP", y_pad_0=1, pop_next=k > 0)
        asm.load(wgt, x=1, offset=3 * k, sram=h, buf="WGT", push_next=True)
        asm.gemm(reset=k == 0 and not double_buffered, uop_begin=3 * h, uop_end=3 * h + 3, pop_prev=True,
                 push_prev=k < reps - 1)
    asm.alu("SHR", imm=4, iter_out=3, dst_base=0, dst_factor_out=1, push_next=True)
    asm.store(out, x=3, pop_prev=True)
    asm.finish()
    return asm.program()


@pytest.mark.parametrize("name", CONFIGS)
def test_conv_tile_loop_agrees(name: str) -> None:
    cfg = load_config(name)
    p = _gemm_tile_loop(cfg, 300)
    m = _same(p)
    assert m.ff is not None and m.ff.jumps >= 1, p.name
    _same_with_faults(p, 13)


@pytest.mark.parametrize("name", CONFIGS)
def test_skipped_gemm_periods_are_summed_and_agree(name: str) -> None:
    """A reduction loop (LOADs into INP and WGT, accumulating GEMMs, nothing else): each GEMM of the
    skipped periods runs once for all of them on per-period copies of INP and WGT, with the plain
    run's accumulator, buffers and results; a fault injected changes nothing to that."""
    cfg = load_config(name)
    for p in (_gemm_tile_loop(cfg, 300), _gemm_tile_loop(cfg, 300, double_buffered=True)):
        m = _same(p)
        assert m.ff is not None and m.ff.ways.get("gemm"), (p.name, m.ff and m.ff.ways)
        plain = _run(p, False)
        bufs, want = m.compute.gemm_bufs, plain.compute.gemm_bufs
        assert np.array_equal(bufs.inp, want.inp) and np.array_equal(bufs.wgt, want.wgt), p.name
        assert np.array_equal(bufs.wgt_valid, want.wgt_valid), p.name
        _same_with_faults(p, 23)


def _nested_gemm_loop(cfg: HwConfig, outer: int, inner: int) -> Program:
    """Nested loops in miniature: the tile loop of :func:`_gemm_tile_loop` (input tile, weights,
    GEMM) run ``outer`` times, each pass on input moved by 3 vectors and ended by a requant and a
    STORE of its output rows (the next pass's first GEMM waits for that STORE)."""
    rng = np.random.default_rng(9)
    L = cfg.lanes
    asm = Assembler(cfg, f"nested-gemm-loop-{cfg.name}-{outer}x{inner}")
    u = asm.uops("uops", [(0, 0, 0), (1, 1, 0), (2, 2, 0)])
    inp = asm.input("inp", rng.integers(-128, 128, (3 * outer + 5 * inner + 3, L)).astype(np.int8))
    wgt = asm.input("wgt", rng.integers(-128, 128, (inner * 3 + 1, cfg.block, cfg.block)).astype(np.int8))
    out = asm.output("out", (3 * outer, L))
    asm.load(u, x=3, buf="UOP")
    for o in range(outer):
        for k in range(inner):
            asm.load(inp, x=1, y=2, offset=3 * o + 5 * k, stride=2, buf="INP", y_pad_0=1, pop_next=o + k > 0)
            asm.load(wgt, x=1, offset=3 * k, buf="WGT", push_next=True)
            asm.gemm(reset=k == 0, uop_begin=0, uop_end=3, pop_prev=True, pop_next=k == 0 and o > 0,
                     push_prev=not (o == outer - 1 and k == inner - 1))
        asm.alu("SHR", imm=4, iter_out=3, dst_base=0, dst_factor_out=1, push_next=True)
        asm.store(out, x=3, offset=3 * o, pop_prev=True, push_prev=o < outer - 1)
    asm.finish()
    return asm.program()


def test_nested_loops_replay_the_outer_pass_and_agree() -> None:
    """Nested loops: each pass of the inner loop jumps up to its end; the stretch between (the outer
    loop's requant and STORE, the next pass's start) is recorded once and replayed in the later
    passes, with the very results of the plain run; so are the Program with a fault injected."""
    p = _nested_gemm_loop(load_config("small"), 8, 40)
    m = _same(p)
    assert m.ff is not None and m.ff.jumps >= 4 and m.ff.replays >= 2
    # each replay ends in another pass, whose words the template's scan did not reach: scanned afresh
    assert m.ff.jumps_after_replay >= 2 and m.ff.ways.get("gemm")
    _same_with_faults(p, 17)


def test_passes_of_another_length_replay_and_agree() -> None:
    """Nested loops whose pass is no whole number of inner periods (a double-buffered inner loop of
    two-iteration periods, 40 iterations and 2 more instructions a pass, the input moving by 3
    vectors a pass): the stretch between two passes is recorded once and replayed, and the run
    jumps from the replayed end after a fresh scan of the words ahead; with the plain run's
    results, faults injected too."""
    cfg = load_config("small")
    rng = np.random.default_rng(31)
    L, outer, inner = cfg.lanes, 9, 40
    asm = Assembler(cfg, f"nested-double-buffered-{outer}x{inner}")
    u = asm.uops("uops", [(0, 0, 0), (1, 1, 0), (2, 2, 0), (0, 3, 1), (1, 4, 1), (2, 5, 1)])
    inp = asm.input("inp", rng.integers(-128, 128, (3 * outer + 5 * inner + 3, L)).astype(np.int8))
    wgt = asm.input("wgt", rng.integers(-128, 128, (inner * 3 + 1, cfg.block, cfg.block)).astype(np.int8))
    out = asm.output("out", (3 * outer, L))
    asm.load(u, x=6, buf="UOP")
    for o in range(outer):
        for k in range(inner):
            h = k % 2
            asm.load(inp, x=1, y=2, offset=3 * o + 5 * k, stride=2, sram=3 * h, buf="INP", y_pad_0=1,
                     pop_next=o + k > 0)
            asm.load(wgt, x=1, offset=3 * k, sram=h, buf="WGT", push_next=True)
            asm.gemm(reset=k == 0, uop_begin=3 * h, uop_end=3 * h + 3, pop_prev=True, pop_next=k == 0 and o > 0,
                     push_prev=not (o == outer - 1 and k == inner - 1))
        asm.alu("SHR", imm=4, iter_out=3, dst_base=0, dst_factor_out=1, push_next=True)
        asm.store(out, x=3, offset=3 * o, pop_prev=True, push_prev=o < outer - 1)
    asm.finish()
    p = asm.program()
    m = _same(p)
    assert m.ff is not None and m.ff.replays >= 2 and m.ff.jumps_after_replay >= 2, m.ff and vars(m.ff)
    _same_with_faults(p, 37)


def test_tail_repeats_finds_two_equal_periods_at_the_end() -> None:
    """The warm-up's look at the words: two equal periods at the end, covering enough rows."""
    rows = lambda xs: np.array([[x, 0] for x in xs], dtype=np.uint8)  # noqa: E731
    assert _tail_repeats(rows([9, 1, 2, 3, 1, 2, 3]), 6)
    assert not _tail_repeats(rows([9, 1, 2, 3, 1, 2, 3]), 7)     # the periods cover too few rows
    assert not _tail_repeats(rows([9, 1, 2, 3, 1, 2, 4]), 2)     # the last word breaks the repeat
    assert _tail_repeats(rows([5, 6, 5, 6, 7, 7]), 2)            # the shortest period: 1
    assert not _tail_repeats(rows([1, 2, 3]), 2)


def test_warm_up_ends_early_on_a_loop_and_runs_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the warm-up thresholds this module lowers put back: a loop of short tiles starts
    sampling once its words repeat, well before ``warmup_events``, jumps and agrees (here with
    fewer instructions ahead required, to stay short); with the default requirement this Program
    is too short for it, and its warm-up lasts its events."""
    monkeypatch.setattr(FastForward, "warmup_events", 1000)
    cfg = load_config("small")
    p = dma_stream(cfg, 3000, 10)
    assert len(p.insns) < FastForward._AHEAD_MIN
    warm_at: list[int] = []
    ended = FastForward._warmed_up

    def spy(self: FastForward) -> bool:
        if ended(self) and not warm_at:
            warm_at.append(self.m.sim.events)
        return self.warm

    monkeypatch.setattr(FastForward, "_warmed_up", spy)
    with monkeypatch.context() as mp:
        mp.setattr(FastForward, "_AHEAD_MIN", 100)
        m = _same(p)
    assert warm_at and FastForward.warmup_floor <= warm_at[0] < 1000
    assert m.ff is not None and m.ff.jumps >= 1
    warm_at.clear()
    m = _same(p)
    assert warm_at and 1000 <= warm_at[0] < 1100 and m.ff is not None and m.ff.jumps >= 1  # at a boundary


def test_several_cores_agree() -> None:
    """On several cores the walk covers core 0 only, so it refuses: the runs agree (no jump)."""
    cfg = load_config("quad")
    _same(make_case("vadd", cfg).program)


@pytest.mark.parametrize("name", CONFIGS)
def test_periodic_programs_agree(name: str) -> None:
    cfg = load_config(name)
    jumped = 0
    ways: dict[str, int] = {}
    for seed in range(10):
        for dma in (False, True):
            for tail in ("finish", "fault"):
                try:
                    p = _periodic(cfg, seed, dma, tail)
                except ValueError:  # a token pattern or layout the assembler rejects: not this test's subject
                    continue
                m = _same(p)
                jumped += m.ff is not None and m.ff.jumps > 0
                for way, n in (m.ff.ways if m.ff is not None else {}).items():
                    ways[way] = ways.get(way, 0) + n
                rng = np.random.default_rng(seed)
                got = inject(p, str(rng.choice(FAULT_KINDS)), rng)
                if got is not None:
                    _same(got[0])
    assert ways.get("replay")  # buffer operands, MIN/MAX/SHR/CLIP: replayed one by one
    assert jumped >= 3  # the loops are short for wide's long fetch bursts; default and small jump more


def test_jump_near_the_end_keeps_fetch_burst_whole() -> None:
    """A jump that lands a few words before INSN_COUNT with a fetch burst under way: the burst was
    sized for the words left at its request, so the jump stops a burst short of the end (a found bug)."""
    m = _same(_periodic(load_config("default"), 53, True, "finish"))
    assert m.ff is not None and m.ff.jumps >= 1


def _gemm_loop(cfg: HwConfig, reps: int, reload_inp: bool) -> Program:
    """Micro-ops and a weight block loaded once, then ``reps`` times: (an input reload,) a GEMM
    accumulating into acc[0..1] and an ALU on them; STORE at the end."""
    rng = np.random.default_rng(5)
    asm = Assembler(cfg, f"gemm-loop-{cfg.name}-{reps}-{reload_inp}")
    u = asm.uops("uops", [(0, 0, 0), (1, 0, 0)])
    wgt = asm.input("wgt", rng.integers(-128, 128, (1, cfg.block, cfg.block)).astype(np.int8))
    inp = asm.input("inp", rng.integers(-128, 128, (1, cfg.lanes)).astype(np.int8))
    out = asm.output("out", (2, cfg.lanes))
    asm.load(u, x=2, buf="UOP")
    asm.load(wgt, x=1, buf="WGT")
    asm.load(inp, x=1, buf="INP", push_next=True)
    asm.gemm(reset=True, uop_begin=0, uop_end=2, pop_prev=True)
    for k in range(reps):
        if reload_inp:
            asm.load(inp, x=1, buf="INP", push_next=True, pop_next=k > 0)
        asm.gemm(uop_begin=0, uop_end=2, pop_prev=reload_inp, push_prev=reload_inp and k < reps - 1)
        asm.alu("SHR", imm=1, iter_out=2, dst_base=0, dst_factor_out=1, push_next=k == reps - 1)
    asm.store(out, x=2, pop_prev=True)
    asm.finish()
    return asm.program()


@pytest.mark.parametrize("name", CONFIGS)
def test_gemm_loops_jump_and_agree(name: str) -> None:
    cfg = load_config(name)
    for reload_inp in (False, True):
        p = _gemm_loop(cfg, 300, reload_inp)
        m = _same(p)
        assert m.ff is not None and m.ff.jumps >= 1, p.name
        rng = np.random.default_rng(11)
        for kind in FAULT_KINDS:
            got = inject(p, kind, rng)
            if got is not None:
                _same(got[0])


@pytest.mark.parametrize("name", CONFIGS)
def test_examples_agree(name: str) -> None:
    cfg = load_config(name)
    for ex in list_examples():
        if ex == "conv2d_resnet" and name != "small":
            continue  # the long one: once is enough here
        m = _same(make_case(ex, cfg).program)
        if ex == "conv2d_resnet":
            # nested loops (the channel loop in a loop over output rows) whose passes differ in their
            # DMA cuts: passes jump from templates and replayed crossings of other passes (words
            # scanned afresh), the skipped GEMMs summed per GEMM
            ff = m.ff
            assert ff is not None and ff.jumps_other_pass and ff.jumps_after_replay and ff.ways.get("gemm"), vars(ff)


@pytest.mark.parametrize("name", CONFIGS)
def test_fuzz_programs_agree(name: str) -> None:
    cfg = load_config(name)
    for index in range(40):
        _same(fuzz_case(cfg, 5, index, fault_rate=0.5).program)
    for seed in range(20):
        _same(generate(cfg, 1000 + seed))


def test_switch_and_tracing_turn_it_off(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    cfg = load_config("small")
    p = alu_loop(cfg, 400, 8)
    monkeypatch.setenv("COSIM_TLM_FAST_FORWARD", "0")
    assert TlmModel(cfg).fast_forward is False
    monkeypatch.setenv("COSIM_TLM_FAST_FORWARD", "1")
    assert TlmModel(cfg).fast_forward is True
    plain = run_program(p, fast_forward=False)
    traced = run_program(p, trace=tmp_path / "t.json")  # tracing runs event by event: same events
    assert traced.extra["events"] == plain.extra["events"] and traced.cycles == plain.cycles
    fast = _run(p, True)
    assert fast.ff is not None and fast.ff.jumps >= 1


def _walked_blocks(m: TlmModel) -> list[object]:
    """Every object whose timing state the fast-forward's walk visits, at the model's current cycle."""
    out: list[object] = [m.sim, m.port, m.fetch, m.acc_buffer.ports, *m.units.values(), *m.queues.values(),
                         *m.tokens.values()]
    out += [u.dma for u in (m.load, m.store) if u.dma is not None]
    out += [s for s in (m.port.cur, *m.port.pending.values()) if s is not None]
    for tl in (m.acc_buffer.ports.writes, m.acc_buffer.ports.pads, m.acc_buffer.ports.reads):
        out += [tl, *tl.uses]
    return out


def test_every_block_declares_the_state_its_walk_covers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each block the fast-forward walks declares every attribute it has as walked state or as fixed
    in a run (``sim/tlm/steady_state.py``): a new attribute that the snapshot would miss fails here.
    The blocks are collected at the boundaries the fast-forward samples, on Programs with LOAD,
    STORE, ALU and GEMM, so that DMA jobs, port segments and port uses exist."""
    seen: dict[type, object] = {}
    walk = FastForward._walk

    def collecting(self: FastForward, w, t: int) -> None:
        for b in _walked_blocks(self.m):
            seen.setdefault(type(b), b)
        walk(self, w, t)

    monkeypatch.setattr(FastForward, "_walk", collecting)
    cfg = load_config("small")
    for p in (dma_stream(cfg, 2000), make_case("matmul", cfg).program):
        _run(p, True)
    wanted = {"Scheduler", "LoadUnit", "ComputeUnit", "StoreUnit", "DmaJob", "InsnQueue", "TokenQueue",
              "AxiArbiter", "Segment", "Fetch", "AccPorts", "Timeline", "PortUse"}
    assert wanted <= {t.__name__ for t in seen}, sorted(wanted - {t.__name__ for t in seen})
    for cls, obj in seen.items():
        extra, missing = undeclared_state(obj)
        assert not extra, f"{cls.__name__}: state not declared (walk it, or declare it fixed): {sorted(extra)}"
        assert not missing, f"{cls.__name__}: declared but absent: {sorted(missing)}"
    # the check sees a planted attribute (a new piece of state nobody walks)
    fetch = next(o for o in seen.values() if type(o).__name__ == "Fetch")
    fetch.retry_at = 5  # type: ignore[attr-defined]
    assert undeclared_state(fetch)[0] == {"retry_at"}


def test_pending_events_are_recognised_by_mark_not_name() -> None:
    """The fast-forward recognises a pending event by the mark its block puts on the method, so a
    renamed method keeps it; an unmarked method is refused (the run goes on event by event)."""
    from sim.tlm.fetch import Fetch
    from sim.tlm.steady_state import event_mark

    cfg = load_config("small")
    m = _run(dma_stream(cfg, 200), True)
    assert event_mark(m.fetch._request) is False and event_mark(m.compute._planned_done) is True
    assert event_mark(m.fetch.resume) is None and event_mark(Fetch._burst_done) is None
