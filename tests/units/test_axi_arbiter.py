"""The AXI4 port arbiter (hw/rtl/axi_arbiter.v) on every level, and the block's own cocotb bench
(testbench/units/axi_arbiter_bench.py).

Program cases put FETCH, LOAD and STORE on the one port at once: a LOAD asking while a
STORE runs a chain of bursts takes the port at the next burst boundary; a STORE asking
while a LOAD chain runs waits for the whole chain; FETCH (highest priority) cuts into a
LOAD chain; and all three together. The data of every case is defined whatever the
order of the bursts, so the ISS (no port at all) computes the same outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from testbench.block_bench import run_block_bench
from tests.units.every_level import Case, level_tests, needs_rtl
from tests.units.programs import narrow, random_vectors, relay


def _sizes(cfg: HwConfig) -> tuple[int, int]:
    """(output vectors of 4 max write bursts, accumulator vectors of 4 max read bursts), within the buffer."""
    omax = max(1, cfg.max_burst // cfg.beats_per_out_vec)
    vmax = max(1, cfg.max_burst // cfg.beats_per_acc_vec)
    return min(cfg.acc_depth // 2, 4 * omax), min(cfg.acc_depth // 2, 4 * vmax)


def load_cuts_store_chain(cfg: HwConfig, nops: int = 0) -> Case:
    """A STORE chain starts; a LOAD released a few cycles later gets the port at a burst boundary.
    With ``nops`` compute no-ops after them, FETCH wants the port too."""
    xs, _ = _sizes(cfg)
    half = cfg.acc_depth // 2
    data = random_vectors(cfg, 2, 61)
    asm = Assembler(cfg, "arbiter_load_cuts_store_chain" + ("_and_fetch" if nops else ""))
    a = asm.input("a", data)
    out, back = asm.output("out", (xs, cfg.lanes)), asm.output("back", (2, cfg.lanes))
    asm.alu("MOV", imm=7, iter_out=xs, dst_factor_out=1, push_next=True)
    relay(asm, push_prev=True)
    asm.store(out, x=xs, pop_prev=True)
    asm.load(a, x=2, sram=half, pop_next=True, push_next=True)
    for _ in range(nops):
        asm.alu("ADD", imm=1, dst_base=cfg.acc_depth - 1)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(back, x=2, sram=half, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.full((xs, cfg.lanes), 7)), "back": narrow(cfg, data)}))


def store_waits_for_load_chain(cfg: HwConfig) -> Case:
    """A LOAD chain holds the port; a STORE asking meanwhile (lower priority) waits for all of it."""
    _, xl = _sizes(cfg)
    half = cfg.acc_depth // 2
    data = random_vectors(cfg, xl, 62)
    asm = Assembler(cfg, "arbiter_store_waits_for_load_chain")
    a = asm.input("a", data)
    out, small = asm.output("out", (xl, cfg.lanes)), asm.output("small", (2, cfg.lanes))
    relay(asm, push_prev=True)
    asm.alu("MOV", imm=-9, iter_out=2, dst_base=half, dst_factor_out=1, push_next=True)
    asm.load(a, x=xl, pop_next=True, push_next=True)
    asm.store(small, x=2, sram=half, pop_prev=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=xl, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, data), "small": narrow(cfg, np.full((2, cfg.lanes), -9))}))


def fetch_cuts_load_chain(cfg: HwConfig) -> Case:
    """A long LOAD is dispatched first; FETCH asks for its next burst while the LOAD's chain runs."""
    _, xl = _sizes(cfg)
    per_burst = max(1, cfg.max_burst // cfg.beats_per_insn)
    data = random_vectors(cfg, xl, 63)
    asm = Assembler(cfg, "arbiter_fetch_cuts_load_chain")
    a = asm.input("a", data)
    out = asm.output("out", (xl, cfg.lanes))
    asm.load(a, x=xl, push_next=True)
    for _ in range(per_burst - 1):
        asm.alu("ADD", imm=0, dst_base=cfg.acc_depth - 1)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=xl, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, data)}))


def cases(cfg: HwConfig) -> list[Case]:
    per_burst = max(1, cfg.max_burst // cfg.beats_per_insn)
    return [
        load_cuts_store_chain(cfg),
        load_cuts_store_chain(cfg, nops=2 * per_burst),
        store_waits_for_load_chain(cfg),
        fetch_cuts_load_chain(cfg),
    ]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)


@needs_rtl
def test_block_bench():
    """axi_arbiter.v alone: fixed priority, one burst at a time, beats routed to their owner,
    data intact under AXI back-pressure, halt, error responses, abort."""
    # The port 'abort' is a C++ word; Verilator warns when it becomes a port of the top model.
    run_block_bench("axi_arbiter", "testbench.units.axi_arbiter_bench", load_config("small"),
                    build_args=["-Wno-SYMRSVDWORD"])


@needs_rtl
@pytest.mark.parametrize("cores, reads", [(1, 2), (2, 3)])
def test_block_bench_reads_in_flight(cores, reads):
    """axi_arbiter.v with read bursts in flight: the grant rule, IDs, R beats answered in any order
    across IDs (interleaved) routed by RID, writes alone on the port, error responses, abort orphaning
    every read in flight."""
    run_block_bench("axi_arbiter", "testbench.units.axi_inflight_bench", load_config("small"),
                    parameters={"N": cores, "CB": 1, "RIF": reads}, build_args=["-Wno-SYMRSVDWORD"])


@needs_rtl
@pytest.mark.parametrize("cores, reads, writes", [(1, 2, 2), (2, 3, 3)])
def test_block_bench_writes_in_flight(cores, reads, writes):
    """axi_arbiter.v with write bursts in flight: reads granted beside writes, up to WIF writes
    awaiting B, AWID the core, B's answered in any order across IDs (in order within one) routed by
    BID, W data in AW order under back-pressure, an R and a B error in one cycle, plus the read
    checks of the bench above."""
    run_block_bench("axi_arbiter", "testbench.units.axi_inflight_bench", load_config("small"),
                    parameters={"N": cores, "CB": 1, "RIF": reads, "WIF": writes}, build_args=["-Wno-SYMRSVDWORD"])
