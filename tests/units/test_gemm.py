"""The GEMM core (hw/rtl/gemm.v in compute_unit.v) and LOAD into the input, weight and micro-op
buffers, on every level, on the default and the small config.

Each case LOADs micro-ops, inputs and weights, runs GEMMs, and shows the accumulators in DRAM
(all 32 bits of each lane through shifted copies, tests/units/programs.py ``store_words``); the
expected outputs and faults come from a plain loop over the ISA's words
(``tests.units.programs.gemm_reference``), not from ``hw.gemm_numpy``. Cases: reset then
accumulate over several micro-ops with a reduction over the inner loop (and a GEMM without
iterations whose micro-op range is past the buffer: no error); distance-1 and distance-2
read-after-write on one accumulator index; every factor non-zero over a window of the micro-op
buffer; a GEMM while LOADs into ACC (frozen cycles, COMPUTE_WAIT) and INP run; LOADs into INP,
WGT and UOP with offsets, strides and padding (pad blocks and micro-ops are zero and loaded);
weights and inputs in many bursts; a reset GEMM whose input and weight indices are past their
buffers (not checked with reset); and every fault: an unloaded micro-op, an index past each
buffer, an unloaded weight block, range before unloaded weight, and uop_end > UOP_DEPTH in WAIT.

Besides the levels' checks (every_level.py: ISS, TLM, RTL = TLM cycle for cycle), the RTL is
held to the GEMM timing of docs/microarch.md by its counters: each GEMM's EXEC is N + 2 free
cycles (1 without iterations), so GEMM_BUSY = sum(N + 2) + COMPUTE_WAIT, or up to the error cycle
(the A stage of the faulting iteration k: k + 2 cycles of that GEMM); GEMM_OPS = the blocks
written without reset.
"""

from __future__ import annotations

from typing import Sequence

import pytest

from hw import csr
from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from hw.isa import Gemm
from hw.result import RunResult
from hw.toolchain import icarus_available
from tests.units.every_level import (Case, case_ids, check_iss, check_rtl, check_tlm, level_tests, needs_rtl,
                                     problems, run_rtl)
from tests.units.programs import GemmBuffers, GemmTile, gemm_tile, random_int8, random_vectors


def _tile_case(t: GemmTile) -> Case:
    f = t.fault
    return Case(t.program, None if f is None else (csr.ERROR_NAMES[f.code], f.pc))


# ---- clean runs -------------------------------------------------------------------------------------
def plain(cfg: HwConfig, name: str = "gemm_plain") -> GemmTile:
    """Reset 8 accumulators, then accumulate over 4 micro-ops x (2 x 3) loop iterations: the inner loop
    walks input and weight blocks into the same accumulators (a reduction); a GEMM without
    iterations between them names micro-ops past the buffer and does nothing."""
    uops = [(0, 0, 0), (1, 1, 1), (2, 2, 2), (3, 3, 1)]
    return gemm_tile(cfg, name, uops, random_int8((9, cfg.lanes), 1), random_int8((7, cfg.block, cfg.block), 2),
                     [dict(reset=True, uop_end=4, iter_out=2, acc_factor_out=4),
                      dict(uop_begin=0, uop_end=cfg.uop_depth + 1, iter_out=0),
                      dict(uop_end=4, iter_out=2, iter_in=3, acc_factor_out=4, inp_factor_out=1, inp_factor_in=2,
                           wgt_factor_out=2, wgt_factor_in=1)], out=(0, 8))


def hazards(cfg: HwConfig) -> GemmTile:
    """Read-after-write on one accumulator index: at distance 1 (micro-ops 0-2 all into acc[0]; a
    chain of 12 iterations into acc[0] with every acc factor 0) and at distance 2 (micro-ops 3-6
    alternate acc[1] and acc[2]); the inner loop wraps from micro-op 6 (acc[2]) to 0."""
    uops = [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 3, 0), (2, 0, 1), (1, 1, 2), (2, 2, 0)]
    return gemm_tile(cfg, "gemm_hazards", uops, random_int8((9, cfg.lanes), 3), random_int8((4, cfg.block, cfg.block), 4),
                     [dict(reset=True, uop_end=7),
                      dict(uop_end=7, iter_in=2, inp_factor_in=1, wgt_factor_in=1),
                      dict(uop_end=1, iter_out=3, iter_in=4, inp_factor_out=1, inp_factor_in=2, wgt_factor_out=1)],
                     out=(0, 3))


def all_factors(cfg: HwConfig) -> GemmTile:
    """Micro-ops [2, 5) of a larger buffer, every factor of both loop levels non-zero (accumulator
    indices of different iterations coincide: they accumulate)."""
    uops = [(7, 7, 7), (6, 6, 6), (0, 0, 0), (1, 2, 1), (2, 1, 2), (0, 0, 0)]
    return gemm_tile(cfg, "gemm_all_factors", uops, random_int8((10, cfg.lanes), 5),
                     random_int8((8, cfg.block, cfg.block), 6),
                     [dict(reset=True, uop_begin=5, uop_end=6, iter_out=10, acc_factor_out=1),
                      dict(uop_begin=2, uop_end=5, iter_out=2, iter_in=3, acc_factor_out=1, acc_factor_in=3,
                           inp_factor_out=5, inp_factor_in=1, wgt_factor_out=1, wgt_factor_in=2)], out=(0, 10))


def during_loads(cfg: HwConfig) -> GemmTile:
    """A 128-iteration GEMM while a LOAD into ACC (acc[4..8), which the GEMM does not touch) and a
    LOAD into INP (entries it does not read) run: the GEMM freezes in the cycles in which the
    accumulator LOAD writes (COMPUTE_WAIT), never for the INP LOAD."""
    acc_data = random_vectors(cfg, 4, 9, -2**31, 2**31)
    inp_more = random_int8((4, cfg.lanes), 10)

    def during(asm: Assembler, b: GemmBuffers) -> int:
        a = asm.input("acc_more", acc_data)
        i = asm.input("inp_more", inp_more)
        asm.load(a, x=4, sram=4, push_next=True)
        asm.load(i, x=4, sram=40, buf="INP", push_next=True)
        b.load("ACC", acc_data, sram=4)
        b.load("INP", inp_more, sram=40)
        return 2

    uops = [(0, 0, 0), (1, 1, 1), (2, 2, 2), (3, 3, 0)]
    return gemm_tile(cfg, "gemm_during_loads", uops, random_int8((16, cfg.lanes), 7),
                     random_int8((4, cfg.block, cfg.block), 8),
                     [dict(reset=True, uop_end=4),
                      dict(uop_end=4, iter_out=16, iter_in=2, inp_factor_in=8, wgt_factor_in=1)],
                     out=(0, 8), during=during)


def loads_padded(cfg: HwConfig) -> GemmTile:
    """LOADs into INP, WGT and UOP from an offset, with a row stride and padding on every side. GEMMs
    read every entry: the padded micro-op window (pad micro-ops are (0, 0, 0) and loaded), each
    input entry against the first data block (block 0 is a pad), each weight block (pad blocks:
    zeros, loaded) against one data input. The low byte of each lane is shown (the other cases show
    whole words)."""
    inp, wgt = random_int8((12, cfg.lanes), 11), random_int8((7, cfg.block, cfg.block), 12)
    uops = [(24, 1, 2), (25, 6, 4), (26, 13, 7), (27, 3, 8)]
    return gemm_tile(cfg, "gemm_loads_padded", uops, inp, wgt, loads={
        "INP": dict(offset=1, x=3, y=2, stride=4, y_pad_0=1, x_pad_0=1, x_pad_1=1),   # 3 x 5 entries
        "WGT": dict(offset=1, x=2, y=2, stride=3, x_pad_0=1, y_pad_1=1),               # 3 x 3 blocks
        "UOP": dict(sram=3, x=2, y=2, stride=2, y_pad_0=1, x_pad_1=1)},                # 3 x 3 micro-ops
        gemms=[dict(reset=True, uop_begin=3, uop_end=4, iter_out=28, acc_factor_out=1),
               dict(uop_begin=3, uop_end=12),
               dict(uop_begin=3, uop_end=4, iter_out=15, acc_factor_out=1, inp_factor_out=1, iter_in=2,
                    wgt_factor_in=1),
               dict(uop_begin=3, uop_end=4, iter_out=9, acc_factor_out=1, wgt_factor_out=1, iter_in=2,
                    acc_factor_in=15, inp_factor_in=6)],
        out=(0, 28), shifts=(0,))


def many_bursts(cfg: HwConfig) -> GemmTile:
    """20 weight blocks and 20 inputs in rows of 10 and 20 entries (each row several bursts; a weight
    block spans two bursts on the shipped configs), each block against one input."""
    return gemm_tile(cfg, "gemm_many_bursts", [(0, 0, 0)], random_int8((20, cfg.lanes), 13),
                     random_int8((20, cfg.block, cfg.block), 14),
                     [dict(reset=True, iter_out=20, acc_factor_out=1),
                      dict(iter_out=20, acc_factor_out=1, inp_factor_out=1, wgt_factor_out=1)],
                     loads={"WGT": dict(x=10, y=2)}, out=(0, 20), shifts=(0, 8))


def reset_ignores_inputs(cfg: HwConfig) -> GemmTile:
    """A reset GEMM checks only the accumulator index: its input and weight indices are past their
    buffers (and the weights were never loaded there); acc[1] and acc[3] keep their loaded values."""
    return gemm_tile(cfg, "gemm_reset_ignores_inputs", [(0, cfg.inp_depth + 3, cfg.wgt_depth + 1)],
                     random_int8((1, cfg.lanes), 15), random_int8((1, cfg.block, cfg.block), 16),
                     [dict(reset=True, iter_out=2, acc_factor_out=2)],
                     acc=random_vectors(cfg, 4, 17), out=(0, 4))


# ---- faults ----------------------------------------------------------------------------------------------
def _fault(cfg: HwConfig, name: str, uops: list[tuple[int, int, int]], gemm: dict, n_inp: int = 3,
           n_wgt: int = 3) -> GemmTile:
    t = gemm_tile(cfg, name, uops, random_int8((n_inp, cfg.lanes), 20), random_int8((n_wgt, cfg.block, cfg.block), 21),
                  [gemm], out=(0, 1))
    assert t.fault is not None, f"{name} does not fault"
    return t


def faults(cfg: HwConfig) -> list[GemmTile]:
    """One GEMM per fault kind, each at an iteration k > 0 (the earlier ones are applied)."""
    d = cfg.acc_depth
    three = [(0, 0, 0), (1, 1, 1), (2, 2, 2)]
    return [
        _fault(cfg, "gemm_fault_unloaded_uop", three, dict(uop_end=5, iter_in=2)),
        _fault(cfg, "gemm_fault_acc_range", three[:1], dict(iter_out=5, acc_factor_out=d // 4)),
        _fault(cfg, "gemm_fault_inp_range", [(0, 0, 0), (1, cfg.inp_depth, 1)], dict(uop_end=2)),
        _fault(cfg, "gemm_fault_wgt_range", [(0, 0, 0), (1, 1, cfg.wgt_depth)], dict(uop_end=2)),
        _fault(cfg, "gemm_fault_unloaded_wgt", three, dict(uop_end=3), n_wgt=2),
        _fault(cfg, "gemm_fault_range_before_unloaded", [(0, 0, 0), (d, 1, 5)], dict(uop_end=2), n_wgt=2),
        _fault(cfg, "gemm_fault_uop_end", three,
               dict(uop_begin=cfg.uop_depth - 2, uop_end=cfg.uop_depth + 1, iter_out=2)),
    ]


def tiles(cfg: HwConfig) -> list[GemmTile]:
    clean = [plain(cfg), hazards(cfg), all_factors(cfg), during_loads(cfg), loads_padded(cfg), many_bursts(cfg),
             reset_ignores_inputs(cfg)]
    assert all(t.fault is None for t in clean), [t.program.name for t in clean if t.fault is not None]
    return clean + faults(cfg) + [plain(cfg, "gemm_plain_after_faults")]


def cases(cfg: HwConfig) -> list[Case]:
    """Every case (a clean one last: the hardware runs on after each fault)."""
    return [_tile_case(t) for t in tiles(cfg)]


# ---- the RTL against the timing formula (no other model needed) -----------------------------------------
def gemm_e(g: Gemm) -> int:
    """EXEC cycles of a GEMM with no frozen cycle: N + 2, or 1 without iterations."""
    n = g.iter_out * g.iter_in * max(0, g.uop_end - g.uop_begin)
    return n + 2 if n else 1


def gemm_counters(t: GemmTile, compute_wait: int) -> dict[str, int]:
    """GEMM_BUSY and GEMM_OPS the RTL must show for ``t``, given its COMPUTE_WAIT (every frozen compute
    cycle of these Programs is a GEMM's: their ALU instructions run after every LOAD)."""
    busy = ops = 0
    for pc, g in enumerate(t.program.insns):
        if not isinstance(g, Gemm):
            continue
        n = g.iter_out * g.iter_in * max(0, g.uop_end - g.uop_begin)
        if t.fault is not None and pc == t.fault.pc:
            k = t.fault.iteration
            if k is not None:  # EXEC up to the error cycle: the A stage of iteration k
                busy += k + 2
                ops += 0 if g.reset else k
            break
        busy += gemm_e(g)
        ops += 0 if g.reset else n
    return {"gemm_busy": busy + compute_wait, "gemm_ops": ops}


def check_rtl_alone(tiles_: Sequence[GemmTile], rtl: Sequence[RunResult]) -> None:
    """The RTL's outputs, errors and stream counters against the reference, and its GEMM counters
    against the timing formula; all cases are checked before the test fails."""
    bad: list[str] = []
    for t, r in zip(tiles_, rtl):
        c = _tile_case(t)
        bad += problems(c, r)
        want = gemm_counters(t, r.counters["compute_wait"])
        got = {k: r.counters[k] for k in want}
        if got != want:
            bad.append(f"{c.name}: GEMM counters {got}, the timing formula says {want}")
    assert not bad, f"{len(bad)} problem(s):\n" + "\n".join(bad)


CFG = load_config("default")
SMALL = load_config("small")
TILES = tiles(CFG)
CASES = [_tile_case(t) for t in TILES]
SMALL_TILES = tiles(SMALL)
SMALL_CASES = [_tile_case(t) for t in SMALL_TILES]

# default: the four items of every unit file (ISS, TLM, RTL = TLM); small: the same by hand
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)


@pytest.mark.parametrize("case", SMALL_CASES, ids=case_ids(SMALL_CASES))
def test_iss_small(case: Case) -> None:
    check_iss(case)


@pytest.mark.parametrize("case", SMALL_CASES, ids=case_ids(SMALL_CASES))
def test_tlm_small(case: Case) -> None:
    check_tlm(case)


@pytest.fixture(scope="module")
def rtl_results_small() -> list[RunResult]:
    return run_rtl(SMALL_CASES, SMALL)


@needs_rtl
def test_rtl_matches_tlm_small(rtl_results_small: list[RunResult]) -> None:
    check_rtl(SMALL_CASES, rtl_results_small)


@needs_rtl
def test_rtl_against_reference(rtl_results: list[RunResult]) -> None:
    """Default config: outputs and faults as the reference says, GEMM_BUSY/GEMM_OPS as the formula."""
    check_rtl_alone(TILES, rtl_results)


@needs_rtl
def test_rtl_against_reference_small(rtl_results_small: list[RunResult]) -> None:
    check_rtl_alone(SMALL_TILES, rtl_results_small)


@needs_rtl
def test_frozen_cycles_are_counted(rtl_results: list[RunResult], rtl_results_small: list[RunResult]) -> None:
    """The GEMM running beside LOADs into ACC and INP freezes (only for the accumulator's writes: one
    cycle per vector LOAD writes during the GEMM), and no other case freezes."""
    for tiles_, res in ((TILES, rtl_results), (SMALL_TILES, rtl_results_small)):
        waits = {t.program.name: r.counters["compute_wait"] for t, r in zip(tiles_, res)}
        assert 0 < waits.pop("gemm_during_loads") <= 4, waits
        assert set(waits.values()) == {0}, waits


def after_reset(cfg: HwConfig) -> list[Case]:
    """Programs that reuse what plain() loaded without loading it: a GEMM reading weights it did not
    load, one reading micro-ops it did not load (each faults at its first iteration)."""
    asm = Assembler(cfg, "gemm_weights_not_reloaded")
    asm.load(asm.uops("uops", [(0, 0, 0)]), buf="UOP", push_next=True)
    asm.gemm(pop_prev=True)
    asm.finish()
    weights = Case(asm.program(), ("UNLOADED", 1))
    asm = Assembler(cfg, "gemm_uops_not_reloaded")
    asm.gemm(reset=True)
    asm.finish()
    return [weights, Case(asm.program(), ("UNLOADED", 0))]


@needs_rtl
def test_soft_reset_and_start_clear_the_loaded_flags() -> None:
    """After a run that loaded micro-ops and weights, CTRL.SOFT_RESET and START (no hardware reset in
    between) clear every loaded flag: GEMMs reading entries of that earlier run fault with
    ERR_UNLOADED, although the SRAMs still hold the data."""
    cases = [_tile_case(plain(SMALL)), *after_reset(SMALL)]
    res = run_rtl(cases, SMALL, between="soft")
    bad = [p for c, r in zip(cases, res) for p in problems(c, r)]
    assert not bad, bad
    assert [r.counters["gemm_busy"] for r in res[1:]] == [2, 2]  # the A stage of iteration 0


@needs_rtl
@pytest.mark.skipif(not icarus_available(), reason="Icarus Verilog (iverilog) is not installed")
def test_icarus_agrees(rtl_results_small: list[RunResult]) -> None:
    """Icarus (4-state: an X read from a buffer would show) gives the same outputs, errors, cycles and
    counters as Verilator on the small config's clean cases and two faults."""
    pick = [k for k, t in enumerate(SMALL_TILES) if t.program.name in (
        "gemm_plain", "gemm_hazards", "gemm_loads_padded", "gemm_fault_unloaded_wgt", "gemm_fault_uop_end")]
    ica = run_rtl([SMALL_CASES[k] for k in pick], SMALL, sim="icarus")
    for k, r in zip(pick, ica):
        v = rtl_results_small[k]
        assert not problems(SMALL_CASES[k], r) and r.extra["x_words"] == 0, (SMALL_CASES[k].name, r.extra)
        assert (r.cycles, r.counters, r.error) == (v.cycles, v.counters, v.error), SMALL_CASES[k].name
